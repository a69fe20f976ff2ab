"""Every element type a Const can hold: irrun's .bin decoding against OpenVINO's."""
import numpy as np
import openvino as ov
import openvino.opset14 as ops
import pytest

import irrun
from irrun import etypes
from ovutil import assert_close

CORE = ov.Core()

VALUES = {
    "f64": [1.5, -2.25, 1e300], "f32": [1.5, -2.25, 3.4e38], "f16": [1.5, -2.25, 65504],
    "bf16": [1, -2.5, 3.14159, 1e30],
    "i64": [-(2**62), 5, -1], "i32": [-(2**31), 7, -1], "i16": [-32768, 3, 32767], "i8": [-128, 0, 127],
    "u64": [2**62, 5, 0], "u32": [2**32 - 1, 7, 0], "u16": [65535, 3, 0], "u8": [255, 0, 7],
    "boolean": [True, False, True],
    "u1": [0, 1, 1, 0, 1, 1, 1, 0, 1], "u2": [0, 1, 2, 3, 1, 0, 3, 2, 1], "u3": [0, 1, 2, 3, 4, 5, 6, 7, 1, 7],
    "u4": [0, 1, 15, 3, 9], "u6": [63, 0, 33, 62, 5], "i4": [-1, 2, -3, 7, -8],
    "nf4": [-1, 0.5, 0.7, 1, 0], "f8e4m3": [0.5, 448, -3.25, 0.001], "f8e5m2": [0.5, -57344, 3.5, 1e-5],
    "f8e8m0": [1, 2, 0.25, 1024], "f4e2m1": [0, 0.5, -6, 3, 1.5],
}


def _reference(xml, inputs=()):
    """OpenVINO reads the IR back and evaluates it (reference, no plugin): every output."""
    model = CORE.read_model(str(xml))
    out = [ov.Tensor(o.get_element_type(), o.get_shape()) for o in model.outputs]
    assert model.evaluate(out, [ov.Tensor(v) for v in inputs])
    return [o.data.copy() for o in out]


@pytest.mark.parametrize("name", sorted(VALUES))
def test_const_decoding_matches_openvino(name, tmp_path):
    values = VALUES[name]
    const = ov.op.Constant(getattr(ov.Type, name), ov.Shape([len(values)]), values)
    # 64-bit values need f64 to stay exact; OpenVINO converts the small formats only to f32.
    wide = ov.Type.f64 if name in ("f64", "i64", "u64", "i32", "u32") else ov.Type.f32
    model = ov.Model([ops.result(ops.convert(const, wide))], [])
    xml = tmp_path / "model.xml"
    ov.save_model(model, str(xml), compress_to_fp16=False)
    expected, = _reference(xml)
    got = irrun.load(xml).infer([])
    (value,) = got.values()
    assert_close(value, expected, rtol=0, atol=0)


@pytest.mark.parametrize("as_input", [False, True], ids=["weight", "input"])
def test_every_f16_value_decompresses_exactly(as_input, tmp_path):
    """Every f16 bit pattern, five times over (past the size that converts on several threads), to
    f32: as an f16-compressed weight times ones, and through Convert of an f16 input; against
    OpenVINO's reference evaluation."""
    bits = np.tile(np.arange(65536, dtype=np.uint16), 5)
    values = bits.view(np.float16).reshape(5, 65536)
    if as_input:
        x = ops.parameter([5, 65536], np.float16, name="x")
        model, feed = ov.Model([ops.result(ops.convert(x, ov.Type.f32))], [x]), values
    else:
        x = ops.parameter([5, 65536], np.float32, name="x")
        model = ov.Model([ops.result(ops.multiply(x, ops.constant(values.astype(np.float32))))], [x])
        feed = np.ones(values.shape, np.float32)
    xml = tmp_path / "model.xml"
    ov.save_model(model, str(xml), compress_to_fp16=not as_input)
    assert ('element_type="f16"' in xml.read_text()) and ('type="Convert"' in xml.read_text())
    out = [ov.Tensor(ov.Type.f32, ov.Shape([5, 65536]))]
    assert CORE.read_model(str(xml)).evaluate(out, [ov.Tensor(feed)])
    (got,) = irrun.load(xml).infer([feed]).values()
    assert got.dtype == np.float32
    expected = out[0].data
    # (OpenVINO quiets signalling NaNs, NumPy keeps their payload: NaN where NaN, the rest bit for bit)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    number = ~np.isnan(expected)
    np.testing.assert_array_equal(got[number].view(np.uint32), expected[number].view(np.uint32))


def test_packed_layouts_from_the_reference_page():
    """Bit orders documented in ir-format.md 1.4, byte for byte."""
    assert etypes.BY_NAME["i4"].decode(bytes.fromhex("2f7d08"), 5).tolist() == [-1, 2, -3, 7, -8]
    assert etypes.BY_NAME["u4"].decode(bytes.fromhex("214305"), 5).tolist() == [1, 2, 3, 4, 5]
    assert etypes.BY_NAME["u2"].decode(bytes.fromhex("e4"), 4).tolist() == [0, 1, 2, 3]
    assert etypes.BY_NAME["u1"].decode(bytes.fromhex("b1"), 8).tolist() == [1, 0, 1, 1, 0, 0, 0, 1]
    assert etypes.BY_NAME["u3"].decode(bytes.fromhex("1b1b0f"), 8).tolist() == list(range(8))
    assert etypes.BY_NAME["u6"].decode(bytes.fromhex("f01ecb"), 4).tolist() == [63, 0, 33, 62]
    assert etypes.BY_NAME["bf16"].decode(bytes.fromhex("803f"), 1).tolist() == [1.0]
    assert np.isnan(etypes.BY_NAME["f8e4m3"].decode(bytes([0x7F]), 1)[0])
    assert etypes.BY_NAME["f8e5m2"].decode(bytes([0x7C]), 1)[0] == np.inf


def test_string_constant(tmp_path):
    packed = bytes.fromhex("03000000" "00000000" "02000000" "02000000" "08000000") + "ab".encode() + "héllo".encode()
    assert etypes.BY_NAME["string"].decode(packed, 3).tolist() == ["ab", "", "héllo"]
    with pytest.raises(irrun.ModelError):
        etypes.BY_NAME["string"].decode(packed[:10], 3)


def test_precision_names():
    assert etypes.from_precision("FP32") is etypes.f32
    assert etypes.from_precision("f32") is etypes.f32
    assert etypes.from_precision("BIN") is etypes.BY_NAME["u1"]
    assert etypes.from_precision("BOOL") is etypes.boolean
    with pytest.raises(irrun.ModelError):
        etypes.from_precision("fp32")  # case-sensitive, as in OpenVINO


@pytest.mark.parametrize("threads_", [1, 2])
def test_every_f16_widens_as_openvino_does(threads_, monkeypatch, tmp_path):
    """All 65,536 f16 bit patterns, as a Const's values (decompressed at load) and as an input
    (widened when fed), through the f16 -> f32 kernel by the bits: OpenVINO's f32 to the bit (signed
    zeros, subnormals, infinities), NaN where it has NaN (the blocks with one go back to NumPy's
    cast, which keeps a signalling NaN signalling where OpenVINO quiets it), in blocks and parts."""
    from irrun import threads
    before = threads.threads()
    monkeypatch.setattr(threads, "MIN_PART_ELEMENTS", 1 << 12)
    monkeypatch.setattr(threads, "PASS_BLOCK_ELEMENTS", 1 << 10)
    patterns = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).reshape(256, 256)
    x = ops.parameter([256, 256], ov.Type.f16, name="x")
    const = ov.op.Constant(patterns)
    model = ov.Model([ops.result(ops.convert(const, ov.Type.f32)), ops.result(ops.convert(x, ov.Type.f32))], [x])
    xml = tmp_path / "m.xml"
    ov.save_model(model, str(xml), compress_to_fp16=False)
    expected = _reference(xml, [patterns])
    try:
        threads.set_threads(threads_)
        got = list(irrun.load(xml).infer({"x": patterns}).values())
    finally:
        threads.set_threads(before)
    for a, b in zip(got, expected):
        nan = np.isnan(b)
        assert a.dtype == np.float32 and np.array_equal(np.isnan(a), nan) and nan.sum() == 2046
        assert np.array_equal(a[~nan].view(np.uint32), b[~nan].view(np.uint32))


def test_threaded_decompression_survives_fork():
    """A child forked after a threaded f16 conversion converts on its own (the parent's pool has no
    threads in the child: without starting its own, the conversion would wait forever)."""
    import subprocess
    import sys
    code = """
import os, numpy as np
from irrun.ops.common import convert_array
from irrun import etypes
f32 = etypes.element_type("f32")
a = np.ones(1 << 20, np.float16)
convert_array(a, f32)
pid = os.fork()
if pid == 0:
    os._exit(0 if convert_array(a, f32).sum() == a.size else 1)
print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""
    if not hasattr(__import__("os"), "fork"):
        pytest.skip("no fork here")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "0", done.stderr


# ---------------------------------------------------------------- encoding (what the writer stores)

# Elements per group of whole bytes: a .bin of that many elements has no padding bits.
_WHOLE_GROUP = {"u1": 8, "u2": 4, "u3": 8, "u4": 2, "i4": 2, "nf4": 2, "f4e2m1": 2, "u6": 4}


def _every_pattern(etype) -> bytes:
    """Every value a byte can hold, for the byte-wide types; random bytes (several groups) for the others."""
    if etype.bits == 8 or etype.name in _WHOLE_GROUP:
        return bytes(range(256)) * (3 if etype.name in ("u3", "u6") else 1)
    return np.random.default_rng(5).integers(0, 256, 64 * etype.bits // 8 * 5, dtype=np.uint8).tobytes()


@pytest.mark.parametrize("name", sorted(set(VALUES) - {"boolean"}))
def test_encode_gives_back_every_bit_pattern(name):
    """encode(decode(bytes)) == bytes for every bit pattern: -0, every NaN code (f8e5m2 has three of
    each sign), every packed field."""
    etype = etypes.BY_NAME[name]
    data = _every_pattern(etype)
    count = len(data) * 8 // etype.bits if name not in ("u3", "u6") else len(data) // 3 * _WHOLE_GROUP[name]
    assert etype.nbytes(count) == len(data)
    assert etype.encode(etype.decode(data, count)) == data


def test_encode_booleans_as_zero_and_one():
    """Any nonzero byte is true; it is stored back as 1, as OpenVINO stores its booleans."""
    boolean = etypes.BY_NAME["boolean"]
    assert boolean.encode(boolean.decode(bytes([0, 1, 7, 255]), 4)) == bytes([0, 1, 1, 1])


@pytest.mark.parametrize("name", ["u1", "u2", "u3", "u4", "u6", "i4", "nf4", "f4e2m1"])
def test_encode_pads_the_last_byte_with_zeros(name):
    """3 elements in a packed type: the unused bits of the last group are zeros, as OpenVINO writes them."""
    etype = etypes.BY_NAME[name]
    values = etype.decode(bytes([0xFF] * etype.nbytes(8)), 3)
    encoded = etype.encode(values)
    assert len(encoded) == etype.nbytes(3)
    assert etype.decode(encoded, 3).tobytes() == values.tobytes()
    code_zero = etype.decode(bytes(etype.nbytes(8)), 8)
    assert encoded == etype.encode(np.concatenate([values, code_zero[3:]]))[:len(encoded)]


def test_encode_refuses_what_a_type_cannot_hold():
    with pytest.raises(irrun.ModelError, match="u4 holds integers 0..15"):
        etypes.BY_NAME["u4"].encode(np.array([3, 16], np.uint8))
    with pytest.raises(irrun.ModelError, match="i4 holds integers -8..7"):
        etypes.BY_NAME["i4"].encode(np.array([-9], np.int8))
    with pytest.raises(irrun.ModelError, match="not one of the 16 values an nf4"):
        etypes.BY_NAME["nf4"].encode(np.array([0.3], np.float32))


def test_encode_bf16_rounds_to_nearest_even():
    bf16 = etypes.BY_NAME["bf16"]
    x = np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -7), np.inf, np.nan], np.float32)
    got = bf16.decode(bf16.encode(x), 5)
    np.testing.assert_array_equal(got[:4], [1, 1 + 2 ** -6, -(1 + 2 ** -7), np.inf])
    assert np.isnan(got[4])


def test_encode_strings_as_openvino_packs_them():
    string = etypes.BY_NAME["string"]
    packed = bytes.fromhex("03000000" "00000000" "02000000" "02000000" "08000000") + "ab".encode() + "héllo".encode()
    assert string.encode(np.array(["ab", "", "héllo"], dtype=object)) == packed
    odd = string.decode(packed[:-1] + b"\xff", 3)   # not UTF-8: kept as it was
    assert string.encode(odd)[-1:] == b"\xff"
