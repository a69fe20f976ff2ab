"""Large constants folded at load in blocks of rows (irrun/blockwise_folding.py): compressed weights
decompressed straight into their GEMM layouts, joined weights and huge pages.  The outputs are
OpenVINO's; every folded weight holds, bit for bit, the values of its layers folded one by one
(`optimize=False`), and so does each of those layers as a watcher sees it."""
from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset13 as ops
import pytest

import irrun
from irrun import blockwise_folding, huge_pages
from irrun.blockwise_folding import RowChain, copy_into
from ovutil import (CPU_F32_EXACT, WINOGRAD_ERROR, assert_blas_close, assert_close, compile_cpu,
                    openvino_layer_outputs, save)
from test_precision import COMPRESSIONS, nncf_weight

RNG = np.random.default_rng(11)
N, K = 320, 288     # (weights above analysis.FOLD_LIMIT: folded by the plan, not by shape inference)


@pytest.fixture(autouse=True)
def _small_sizes_qualify(monkeypatch):
    """Weights of a test's size folded by rows in many blocks, and moved to huge pages."""
    monkeypatch.delenv("IRRUN_OPTIMIZE", raising=False)
    monkeypatch.setattr(blockwise_folding, "SMALLEST_ELEMENTS", 1 << 12)
    monkeypatch.setattr(blockwise_folding, "BLOCK_ELEMENTS", 1 << 9)
    monkeypatch.setattr(huge_pages, "_available", lambda: True)
    monkeypatch.setattr(huge_pages, "SMALLEST_WEIGHT", 1 << 10)
    monkeypatch.setattr(huge_pages, "SMALLEST_TOTAL", 1 << 12)


@pytest.fixture
def chains_written(monkeypatch) -> list:
    """The chains folded by rows as they are written (the test's weights must be folded so)."""
    written = []
    write_into = RowChain.write_into

    def counted(self, dest):
        written.append(dest.shape)
        return write_into(self, dest)
    monkeypatch.setattr(RowChain, "write_into", counted)
    return written


def _block(rows: int, compression: dict) -> ov.Model:
    """An LLM block's products: q, k and v of one hidden state (siblings joined where one row),
    an up-projection [out, in] and a down-projection [in, out], every weight compressed."""
    x = ops.parameter([rows, K], ov.Type.f32, name="x")
    q, k, v = (ops.matmul(x, nncf_weight(shape=(n, K), **compression), False, True) for n in (K, 32, 32))
    up = ops.matmul(ops.concat([q, k, v], -1), nncf_weight(shape=(N, K + 64), **compression), False, True)
    down = ops.matmul(ops.relu(up), ops.transpose(nncf_weight(shape=(K, N), **compression),
                                                  ops.constant(np.array([1, 0]))), False, False)
    return ov.Model([ops.result(down)], [x])


def _weights(model: irrun.Model) -> list[np.ndarray]:
    plan = model._plan
    return [plan.constants[s.inputs[1]] for s in plan.layer_steps if s.node.layer.op_type == "MatMul"]


@pytest.mark.parametrize("rows", [1, 5, -1], ids=["one_row", "rows", "dynamic"])
@pytest.mark.parametrize("name", list(COMPRESSIONS))
def test_compressed_weights_decompress_by_rows_into_their_layouts(name, rows, chains_written, tmp_path):
    xml = save(_block(rows, COMPRESSIONS[name]), tmp_path / "m.xml")
    # (outputs of about 10: a sum of large terms that cancel is rounded in the terms' magnitude)
    x = (RNG.standard_normal((1 if rows == 1 else 3 if rows < 0 else rows, K)) * 0.02).astype(np.float32)
    expected = compile_cpu(xml, CPU_F32_EXACT)([x])[0]
    by_rows = irrun.load(xml)
    assert chains_written, "no weight was folded by rows"
    assert_close(next(iter(by_rows.infer({"x": x}).values())), np.asarray(expected), what=name)
    one_by_one = irrun.load(xml, optimize=False)
    for got, want in zip(_weights(by_rows), _weights(one_by_one)):
        assert got.dtype == want.dtype and np.array_equal(got, want)


def test_a_weight_read_twice_and_a_step_seen_elsewhere_are_arrays_of_their_own(chains_written, tmp_path):
    """A decompressed table read by a Gather and a MatMul (tied embeddings), a decompression's
    Multiply also a Result: each such value computed once, whole, its readers given the array."""
    ids = ops.parameter([3], ov.Type.i64, name="ids")
    table = nncf_weight(shape=(N, K), **COMPRESSIONS["int8_asym"])
    hidden = ops.gather(table, ids, ops.constant(np.int64(0)))
    logits = ops.matmul(hidden, table, False, True)
    scaled = nncf_weight(shape=(N, K), out_type=ov.Type.f16, **COMPRESSIONS["int4_asym_g16"])
    head = ops.matmul(hidden, ops.convert(scaled, ov.Type.f32), False, True)
    model = ov.Model([ops.result(logits), ops.result(head), ops.result(scaled)], [ids])
    xml = save(model, tmp_path / "m.xml")
    feeds = {"ids": np.array([0, 319, 7], np.int64)}
    expected = compile_cpu(xml, CPU_F32_EXACT)(feeds)
    got = list(irrun.load(xml).infer(feeds).values())
    assert chains_written
    for g, e in zip(got, expected.values()):
        assert_close(g, np.asarray(e))
    plain = list(irrun.load(xml, optimize=False).infer(feeds).values())
    for g, p in zip(got, plain):
        assert np.array_equal(g, p)


def test_watchers_see_each_folded_layer_as_folded_one_by_one(chains_written, tmp_path):
    """Each layer of a decompression folded by rows, as a watcher sees it: OpenVINO's value of that
    layer (each made an output), and the bits of the layers folded one by one."""
    xml = save(_block(1, COMPRESSIONS["int4_asym_g16"]), tmp_path / "m.xml")
    x = RNG.standard_normal((1, K)).astype(np.float32)
    seen = irrun.load(xml).infer({"x": x}, intermediates=True)
    assert chains_written
    expected = openvino_layer_outputs(xml, {"x": x})
    plain = irrun.load(xml, optimize=False).infer({"x": x}, intermediates=True)
    folded = [key for key in plain if key.split(":")[0].startswith(("Subtract", "Multiply", "Reshape", "Convert"))]
    assert len(folded) >= 15 and all(key in expected for key in folded)
    for key in folded:
        assert_close(seen[key], expected[key], what=key)
        assert np.array_equal(seen[key], plain[key]), key


def test_a_kernel_failing_in_a_chain_is_reported_at_its_layer(monkeypatch, tmp_path):
    from irrun.ops.arithmetic import Subtract
    xml = save(_block(1, COMPRESSIONS["int8_asym"]), tmp_path / "m.xml")

    run = Subtract.run

    def failing(self, a, b):        # (on a block of one row: shape inference folds whole weights)
        if len(a) == 1:
            raise FloatingPointError("no")
        return run(self, a, b)
    monkeypatch.setattr(Subtract, "run", failing)
    with pytest.raises(irrun.IrrunError, match=r"Subtract.*: failed on inputs \[288,288\], \[288,1\]: FloatingPointError: no$"):
        irrun.load(xml)


@pytest.mark.parametrize("order", ["C", "F"])
def test_copy_into_keeps_every_value_whatever_the_layouts(order):
    source = RNG.standard_normal((300, 70)).astype(np.float32)
    source = source if order == "C" else np.asfortranarray(source)
    for dest in (np.empty((300, 70), np.float32), np.empty((70, 300), np.float32).T):
        copy_into(dest, source)
        assert np.array_equal(dest, source)


@pytest.mark.parametrize("rows", [1, 4])
def test_f16_arithmetic_folded_by_rows_is_rounded_where_openvino_folds_it_in_f16(rows, chains_written, tmp_path):
    """A weight scaled and shifted in a model built in f16: OpenVINO folds the layers in f16, irrun
    in f32, its values rounded to f16 where the MatMul reads them (irrun/precision.py), whether
    computed by rows or whole."""
    x = ops.parameter([rows, K], ov.Type.f16, name="x")
    w = ops.constant((RNG.standard_normal((N, K)) * 0.3).astype(np.float16))
    scaled = ops.multiply(w, ops.constant((RNG.random((N, 1)) * 3 + 0.1).astype(np.float16)))
    shifted = ops.add(scaled, ops.constant((RNG.standard_normal((1, K)) * 0.01).astype(np.float16)))
    y = ops.convert(ops.matmul(x, shifted, False, True), ov.Type.f32)     # (an f16 output is off by its last bit)
    xml = save(ov.Model([ops.result(y)], [x]), tmp_path / "m.xml")
    feeds = {"x": (RNG.standard_normal((rows, K)) * 0.05).astype(np.float16)}
    by_rows = irrun.load(xml)
    assert chains_written
    one_by_one = irrun.load(xml, optimize=False)
    got, want = _weights(by_rows)[0], _weights(one_by_one)[0]
    assert np.array_equal(got, want) and np.array_equal(got, got.astype(np.float16).astype(np.float32))
    expected = compile_cpu(xml, CPU_F32_EXACT)(feeds)[0]
    assert_close(next(iter(by_rows.infer(feeds).values())), np.asarray(expected))


def _embedding_model(tied: bool, index_type=ov.Type.i64) -> ov.Model:
    """Token ids through a compressed embedding table (NNCF's int8 embeddings: OpenVINO's
    GatherCompressed), then a product; the table also the head's weight where `tied`."""
    ids = ops.parameter([-1], index_type, name="ids")
    table = nncf_weight(shape=(N, K), **COMPRESSIONS["int8_asym"])
    hidden = ops.gather(table, ids, ops.constant(np.int64(0)))
    head = table if tied else nncf_weight(shape=(N, K), **COMPRESSIONS["int4_asym_g16"])
    return ov.Model([ops.result(ops.matmul(hidden, head, False, True)), ops.result(hidden)], [ids])


@pytest.mark.parametrize("tied, index_type", [(False, np.int64), (False, np.int32), (True, np.int64)],
                         ids=["own_head", "own_head_i32", "tied"])
def test_a_compressed_table_only_gathers_read_stays_compressed(tied, index_type, chains_written, tmp_path):
    """Rows of a compressed embedding table are computed as a Gather asks for them (negative ids
    from the end, ids out of range zeros, as Gather's), the table never made; tied to the head,
    it is made whole once."""
    xml = save(_embedding_model(tied, ov.Type.i32 if index_type == np.int32 else ov.Type.i64), tmp_path / "m.xml")
    model = irrun.load(xml)
    plan = model._plan
    gathers = [s for s in plan.main.steps if s.node.layer.op_type == "Gather"]
    assert (type(gathers[0].op).__name__ == "GatheredRows") != tied
    assert bool(plan.tables_by_rows) != tied
    one_by_one = irrun.load(xml, optimize=False)
    compiled = compile_cpu(xml, CPU_F32_EXACT)
    for ids in ([5], [0, N - 1, 17, 5], [-1, -N, 3]):
        feeds = {"ids": np.array(ids, index_type)}
        got = list(model.infer(feeds).values())
        for g, e in zip(got, compiled(feeds).values()):
            assert_close(g, np.asarray(e))
        plain = list(one_by_one.infer(feeds).values())
        assert np.array_equal(got[1], plain[1])            # (the rows; the products' sums run in another order)
        assert_blas_close(got[0], plain[0])
    outside = {"ids": np.array([2, N, -N - 1], index_type)}
    got, plain = list(model.infer(outside).values()), list(one_by_one.infer(outside).values())
    assert np.array_equal(got[1], plain[1]) and not got[1][1:].any()
    seen, plain = model.infer(outside, intermediates=True), one_by_one.infer(outside, intermediates=True)
    assert list(seen) == list(plain) and any(k.startswith("Multiply") for k in seen)
    for key in [k for k in plain if k.startswith(("Convert", "Subtract", "Multiply", "Gather"))]:
        assert np.array_equal(seen[key], plain[key]), key


@pytest.mark.parametrize("name", ["int4_asym_g16", "int4_sym_g32", "nf4_g32", "nvfp4"])
@pytest.mark.parametrize("optimize", [True, False], ids=["optimized", "plain"])
def test_large_4_bit_weights_are_read_by_rows(name, optimize, monkeypatch, tmp_path):
    """4-bit Consts of weights.ROWS_AS_ASKED_FROM elements or more are never unpacked whole where
    the plan folds them by rows (shape inference knows their shapes only); read whole otherwise
    (`optimize=False`, a Result of the Const itself).  OpenVINO's outputs, the folded weights' bits
    as read whole, and the Consts as watchers see them."""
    from irrun.weights import PackedRows, Weights
    monkeypatch.setattr(blockwise_folding, "SMALLEST_ELEMENTS", 1 << 18)
    x = ops.parameter([1, 512], ov.Type.f32, name="x")
    y = ops.matmul(x, nncf_weight(shape=(512, 512), **COMPRESSIONS[name]), False, True)
    stored = ops.constant(RNG.integers(0, 16, (512, 512)).astype(np.uint8), dtype=ov.Type.u4)
    xml = save(ov.Model([ops.result(y), ops.result(stored)], [x]), tmp_path / "m.xml")
    wholes = []
    decoded = PackedRows.decoded
    monkeypatch.setattr(PackedRows, "decoded", lambda self: wholes.append(self.shape) or decoded(self))
    model = irrun.load(xml, optimize=optimize)
    # (optimized, only the Result's Const is read whole; plain, the weight too)
    assert wholes[-1] == (512, 512) and len(wholes) == (1 if optimize else 2)
    read = []
    monkeypatch.setattr(Weights, "read", lambda self, *a, _r=Weights.read: read.append(a[3]) or _r(self, *a))
    feeds = {"x": (RNG.standard_normal((1, 512)) * 0.05).astype(np.float32)}
    got = list(model.infer(feeds).values())
    expected = list(compile_cpu(xml, CPU_F32_EXACT)(feeds).values())
    assert_close(got[0], np.asarray(expected[0]))
    packed = np.asarray(expected[1]).reshape(-1)       # (OpenVINO gives u4 as its packed bytes, low nibble first)
    assert got[1].dtype == np.uint8 and np.array_equal(got[1], np.stack([packed & 15, packed >> 4], -1).reshape(512, 512))
    monkeypatch.setattr(PackedRows, "decoded", decoded)
    with monkeypatch.context() as m:
        m.setattr("irrun.ops.infrastructure.Constant.packed", None)
        m.setattr(Weights, "packed_rows", lambda self, *a: None)
        whole = irrun.load(xml, optimize=optimize)
    assert np.array_equal(_weights(model)[0], _weights(whole)[0])
    assert np.array_equal(got[1], list(whole.infer(feeds).values())[1])
    seen, plain = model.infer(feeds, intermediates="all"), whole.infer(feeds, intermediates="all")
    for key in [k for k in plain if k.startswith(("Constant", "Convert", "Subtract", "Multiply"))]:
        assert np.array_equal(seen[key], plain[key]), key
    assert irrun.validate(xml).ok


def _compressed_filter(shape: tuple, compression: str, seed: int):
    """A convolution filter as the IR stores it compressed: f16 (`Const f16 -> Convert`, what
    `openvino.save_model` writes by default) or int8 with a zero point and a scale per output
    channel (`Const i8 -> Convert -> Subtract -> Multiply`, NNCF's)."""
    rng = np.random.default_rng(seed)
    scale = 1 / np.sqrt(9 * shape[1])
    if compression == "f16":
        return ops.convert(ops.constant((rng.standard_normal(shape) * scale).astype(np.float16)), ov.Type.f32)
    codes = ops.convert(ops.constant(rng.integers(-127, 128, shape).astype(np.int8)), ov.Type.f32)
    zero = ops.constant(rng.integers(-3, 4, (shape[0], 1, 1, 1)).astype(np.float32))
    return ops.multiply(ops.subtract(codes, zero), ops.constant(np.full((shape[0], 1, 1, 1), scale / 64, np.float32)))


@pytest.mark.parametrize("compression", ["f16", "int8"])
def test_winograd_filters_are_transformed_by_rows(compression, monkeypatch, tmp_path):
    """Two Winograd layers (96 channels at 16 x 16: F(4,3); filters beyond analysis.FOLD_LIMIT)
    whose compressed filters nothing else reads stay chains folded by rows: each is transformed a block of output channels at a time and
    never made whole, its transform the bits of the filter's as folded one by one; a third filter,
    read by a Winograd layer and a strided one, is made whole for both.  OpenVINO's outputs; an
    input holding a NaN takes the direct kernels by the filter then made whole (its mapped source
    pages let go after the transform, read again), NaN where OpenVINO's are; watchers see the
    folded layers' values."""
    from irrun.ops import convolution
    from test_fast_convolution_special_values import assert_like_openvino
    whole = {}          # id -> shape of each chain made whole (a multi-layer one's value() writes it)
    for name in ("value", "write_into"):
        original = getattr(RowChain, name)
        monkeypatch.setattr(RowChain, name, lambda self, *a, _o=original: whole.setdefault(id(self), self.shape)
                            and _o(self, *a))

    def made_whole():
        return sorted(whole.values())
    x = ops.parameter([1, 96, 16, 16], np.float32, name="x")
    filters = [_compressed_filter((96, 96, 3, 3), compression, seed) for seed in range(2)]
    shared = _compressed_filter((80, 96, 3, 3), compression, 2)
    y = x
    for f in filters:      # (a bias, not a Relu: OpenVINO's Relu makes a NaN 0)
        y = ops.add(ops.convolution(y, f, [1, 1], [1, 1], [1, 1], [1, 1]), ops.constant(np.float32(0.1)))
    wide = ops.convolution(y, shared, [1, 1], [1, 1], [1, 1], [1, 1])
    strided = ops.convolution(y, shared, [2, 2], [1, 1], [1, 1], [1, 1])
    xml = save(ov.Model([ops.result(wide), ops.result(strided)], [x]), tmp_path / "m.xml")
    model = irrun.load(xml)
    plan = model._plan
    by_rows = {s: plan.constants[s] for s in plan.filters_by_rows}
    assert sorted(v.shape for v in by_rows.values()) == [(96, 96, 3, 3)] * 2
    assert all(isinstance(v, RowChain) for v in by_rows.values())
    assert made_whole() == [(80, 96, 3, 3)]
    one_by_one = irrun.load(xml, optimize=False)
    tiles = {}
    monkeypatch.setattr(convolution, "winograd_conv", lambda x, f, *a, _w=convolution.winograd_conv:
                        tiles.setdefault(f.c_out, []).append(f) or _w(x, f, *a))
    feeds = {"x": RNG.standard_normal((1, 96, 16, 16)).astype(np.float32)}
    expected = [np.asarray(v) for v in compile_cpu(xml)(feeds).values()]
    got = list(model.infer(feeds).values())
    plain = list(one_by_one.infer(feeds).values())
    for g, p, e in zip(got, plain, expected):
        # (three F(4,3) layers in a row: their documented bound; with OpenBLAS's SkylakeX kernels one
        # value of 20480 was 1.16e-5 off OpenVINO's, stop 66)
        assert_close(g, e, atol=WINOGRAD_ERROR[4])
        assert np.array_equal(g, p)
    assert [f.m for f in tiles[96]] == [4, 4, 4, 4] and tiles[80][0].m == 4
    for mine, theirs in zip(tiles[96][:2], tiles[96][2:]):
        assert np.array_equal(mine.u, theirs.u)
    assert made_whole() == [(80, 96, 3, 3)]
    feeds["x"][0, 5, 7, 7] = np.nan
    expected = [np.asarray(v) for v in compile_cpu(xml)(feeds).values()]
    got = list(model.infer(feeds).values())
    assert made_whole() == [(80, 96, 3, 3)] + [(96, 96, 3, 3)] * 2
    for g, p, e in zip(got, one_by_one.infer(feeds).values(), expected):
        assert_like_openvino(g, e)
        assert np.array_equal(g, p, equal_nan=True)
    seen = model.infer({"x": feeds["x"] * 0}, intermediates="all")
    shown = one_by_one.infer({"x": feeds["x"] * 0}, intermediates="all")
    folded = [k for k in shown if k.startswith(("Convert", "Multiply"))]
    assert len(folded) == (3 if compression == "f16" else 6)
    for key in folded:
        assert np.array_equal(seen[key], shown[key]), key
