"""DeformableConvolution-1/8 and BinaryConvolution-1 against OpenVINO's CPU plugin.

Divergences from the op specs are in specs/errata/convolution.md (BinaryConvolution's bit order and padding,
the CPU plugin's binarization of raw f32 inputs)."""
import numpy as np
import openvino as ov
import openvino.opset1 as ops1
import openvino.opset8 as ops8
import pytest

from ovutil import assert_close, check_shape_function, compare, edited_ir, param, run_openvino, save
import irrun

AUTO_PADS = ["explicit", "same_upper", "same_lower", "valid"]
D = ov.Dimension


def rng(seed=0):
    return np.random.default_rng(seed)


def output_size(size, kernel, stride, dilation, pads, auto_pad):
    if auto_pad in ("same_upper", "same_lower"):
        return -(-size // stride)
    if auto_pad == "valid":
        pads = (0, 0)
    return (size + pads[0] + pads[1] - (kernel - 1) * dilation - 1) // stride + 1


def deformable_inputs(n, c, spatial, kernel, out, groups, scale, r, mask=True):
    data = r.standard_normal((n, c, *spatial)).astype(np.float32)
    taps = kernel[0] * kernel[1]
    offsets = (r.standard_normal((n, 2 * groups * taps, *out)) * scale).astype(np.float32)
    masks = r.uniform(0, 1, (n, groups * taps, *out)).astype(np.float32) if mask else None
    return data, offsets, masks


# (data spatial, kernel, strides, pads_begin, pads_end, dilations)
DEFORMABLE_GEOMETRY = [
    ((6, 7), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),
    ((8, 7), (3, 2), (2, 1), (1, 0), (2, 1), (1, 2)),
    ((5, 5), (1, 1), (1, 2), (0, 0), (0, 0), (1, 1)),
]


@pytest.mark.parametrize("geometry", range(len(DEFORMABLE_GEOMETRY)))
@pytest.mark.parametrize("auto_pad", AUTO_PADS)
@pytest.mark.parametrize("version", [1, 8])
def test_deformable_convolution(geometry, auto_pad, version, tmp_path):
    spatial, kernel, strides, pb, pe, dil = DEFORMABLE_GEOMETRY[geometry]
    out = [output_size(s, k, st, d, (b, e), auto_pad)
           for s, k, st, d, b, e in zip(spatial, kernel, strides, dil, pb, pe)]
    r = rng(geometry)
    data, offsets, _ = deformable_inputs(2, 4, spatial, kernel, out, 1, 1.5, r, mask=False)
    filt = r.standard_normal((3, 4, *kernel)).astype(np.float32)
    x, o = param(data.shape), param(offsets.shape)
    ops = ops1 if version == 1 else ops8
    node = ops.deformable_convolution(x, o, ops1.constant(filt), strides, pb, pe, dil, auto_pad=auto_pad)
    compare(ov.Model([node], [x, o]), [data, offsets], tmp_path)


@pytest.mark.parametrize("bilinear_pad", [False, True])
@pytest.mark.parametrize("group, deformable_group, with_mask", [(1, 1, True), (2, 1, True), (1, 2, False),
                                                                  (2, 4, True), (4, 2, True)])
def test_deformable_convolution_8(bilinear_pad, group, deformable_group, with_mask, tmp_path):
    r = rng(group * 10 + deformable_group)
    spatial, kernel, out = (6, 5), (3, 3), (6, 5)
    data, offsets, masks = deformable_inputs(2, 8, spatial, kernel, out, deformable_group, 2.0, r, with_mask)
    filt = r.standard_normal((4, 8 // group, *kernel)).astype(np.float32)
    params = [param(data.shape), param(offsets.shape)]
    inputs = [data, offsets]
    mask = None
    if with_mask:
        mask = param(masks.shape)
        params.append(mask)
        inputs.append(masks)
    node = ops8.deformable_convolution(params[0], params[1], ops1.constant(filt), [1, 1], [1, 1], [1, 1], [1, 1],
                                       mask=mask, group=group, deformable_group=deformable_group,
                                       bilinear_interpolation_pad=bilinear_pad)
    compare(ov.Model([node], params), inputs, tmp_path)


@pytest.mark.parametrize("bilinear_pad", [False, True])
def test_deformable_convolution_adversarial_offsets(bilinear_pad, tmp_path):
    """Offsets landing exactly on grid lines, on the borders (-1, 0, H - 1, H), just inside and far outside."""
    r = rng(7)
    data = r.standard_normal((1, 2, 4, 5)).astype(np.float32)
    choices = np.array([-5.0, -1.0, -0.5, -1e-6, 0.0, 0.5, 1.0, 2.999, 3.0, 4.0, 4.5, 9.0], np.float32)
    offsets = r.choice(choices, (1, 2 * 9, 4, 5)).astype(np.float32)
    filt = r.standard_normal((2, 2, 3, 3)).astype(np.float32)
    x, o = param([1, 2, -1, -1]), param([1, 18, -1, -1])
    node = ops8.deformable_convolution(x, o, ops1.constant(filt), [1, 1], [1, 1], [1, 1], [1, 1],
                                       bilinear_interpolation_pad=bilinear_pad)
    compare(ov.Model([node], [x, o]), [data, offsets], tmp_path)


@pytest.mark.parametrize("deformable_group", [1, 4])
def test_deformable_convolution_larger_and_with_nan(deformable_group, tmp_path):
    """64 channels at 16 x 20 (a DCN layer of a detector's head): gathered from a channels-last copy;
    a NaN in the data takes the channel-major gathers, which keep it from taps of weight 0."""
    r = rng(40 + deformable_group)
    data, offsets, masks = deformable_inputs(1, 64, (16, 20), (3, 3), (16, 20), deformable_group, 3.0, r, True)
    filt = (r.standard_normal((32, 64, 3, 3)) / 24).astype(np.float32)      # outputs of unit scale
    params = [param(data.shape), param(offsets.shape), param(masks.shape)]
    for pad in (False, True):
        node = ops8.deformable_convolution(params[0], params[1], ops1.constant(filt), [1, 1], [1, 1], [1, 1],
                                           [1, 1], mask=params[2], deformable_group=deformable_group,
                                           bilinear_interpolation_pad=pad)
        compare(ov.Model([node], params), [data, offsets, masks], tmp_path / str(pad))
    # offsets on the grid with the bilinear pad: every sample's second neighbours weigh 0, and one
    # of them is the NaN, which reaches only the outputs that weigh it
    data[0, 5, 7, 9] = np.nan
    got = next(iter(compare(ov.Model([node], params), [data, np.round(offsets), masks], tmp_path / "nan").values()))
    assert 0 < np.isnan(got).sum() < got.size


@pytest.mark.parametrize("taps, pads", [(31, (15, 15)), (7, (3, 3)), (9, (8, 0)), (15, (2, 5))],
                         ids=["conformer", "convnext-1d", "causal", "uneven"])
def test_depthwise_1d_long_kernels(taps, pads, tmp_path):
    """A Conformer's depthwise 1-D convolution (and its BatchNorm and Swish): blocks of outputs against
    a banded matrix of each channel's taps (ops/depthwise.py `_depthwise_toeplitz`); a NaN in the
    data takes the tap kernels, where the band's zeros would spread it."""
    from irrun.ops.convolution import Geometry
    from irrun.ops.depthwise import _toeplitz_pays
    r = rng(taps)
    x = param([2, 64, 300])
    filt = (r.standard_normal((64, 1, 1, taps)) / np.sqrt(taps)).astype(np.float32)
    conv = ops1.group_convolution(x, ops1.constant(filt), [1], [pads[0]], [pads[1]], [1])
    scaled = ops1.add(ops1.multiply(conv, ops1.constant(r.uniform(0.5, 2, (1, 64, 1)).astype(np.float32))),
                      ops1.constant(r.standard_normal((1, 64, 1)).astype(np.float32)))
    out = ops1.multiply(scaled, ops1.sigmoid(scaled))
    data = r.standard_normal((2, 64, 300)).astype(np.float32)
    compare(ov.Model([out], [x]), [data], tmp_path)
    assert _toeplitz_pays(filt.shape, Geometry((1,), (1,), pads[:1], pads[1:], (0,), "explicit"))
    data[1, 7, 150] = np.nan
    got = next(iter(compare(ov.Model([out], [x]), [data], tmp_path / "nan").values()))
    assert np.isnan(got[1, 7]).sum() == taps and not np.isnan(got[0]).any()


def test_deformable_convolution_f16_and_dynamic_filter(tmp_path):
    r = rng(8)
    data, offsets, masks = deformable_inputs(1, 4, (5, 6), (2, 2), (4, 5), 2, 1.0, r)
    filt = r.standard_normal((3, 4, 2, 2))
    params = [param([1, 4, -1, -1], np.float16), param([1, 16, -1, -1], np.float16),
              param([3, 4, 2, 2], np.float16), param([1, 8, -1, -1], np.float16)]
    node = ops8.deformable_convolution(params[0], params[1], params[2], [1, 1], [0, 0], [0, 0], [1, 1],
                                       deformable_group=2, mask=params[3])
    compare(ov.Model([node], params), [a.astype(np.float16) for a in (data, offsets, filt, masks)], tmp_path,
            rtol=2e-3, atol=2e-2)


def test_deformable_convolution_i32(tmp_path):
    """Integer tensors: the CPU plugin computes in f32 and converts back (integral offsets keep samples exact)."""
    r = rng(10)
    inputs = [r.integers(-3, 4, (1, 2, 5, 5)), r.integers(-1, 2, (1, 18, 3, 3)), r.integers(-2, 3, (2, 2, 3, 3))]
    params = [param(a.shape, np.int32) for a in inputs]
    node = ops8.deformable_convolution(*params, [1, 1], [0, 0], [0, 0], [1, 1])
    compare(ov.Model([node], params), [a.astype(np.int32) for a in inputs], tmp_path)


def test_deformable_convolution_compressed_weights(tmp_path):
    r = rng(9)
    data, offsets, _ = deformable_inputs(1, 4, (6, 6), (3, 3), (4, 4), 1, 1.0, r, mask=False)
    x, o = param(data.shape), param(offsets.shape)
    node = ops8.deformable_convolution(x, o, ops1.constant(r.standard_normal((2, 4, 3, 3)).astype(np.float32)),
                                       [1, 1], [0, 0], [0, 0], [1, 1])
    compare(ov.Model([node], [x, o]), [data, offsets], tmp_path, compress=True)


@pytest.mark.parametrize("data, offsets, filt, mask", [
    ([1, 4, 6, 6], [1, 18, 4, 4], [2, 4, 3, 3], None),
    ([-1, 4, -1, -1], [-1, 18, -1, -1], [2, 4, 3, 3], [-1, 9, -1, -1]),
    ([2, 4, D(4, 8), 6], [2, 18, -1, 4], [2, 4, 3, 3], None),
    (None, [1, 18, 4, 4], [2, 4, 3, 3], None),
    ([1, 4, 6, 6], [1, 16, 4, 4], [2, 4, 3, 3], None),          # offsets channels != 2 * K
    ([1, 4, 6, 6], [1, 18, 5, 4], [2, 4, 3, 3], None),          # offsets spatial != output
    ([1, 4, 6, 6], [2, 18, 4, 4], [2, 4, 3, 3], None),          # batch
    ([1, 5, 6, 6], [1, 18, 4, 4], [2, 4, 3, 3], None),          # channels
    ([1, 4, 6, 6], [1, 18, 4, 4], [2, 4, 3, 3], [1, 8, 4, 4]),  # mask channels
    ([1, 4, 6], [1, 18, 4], [2, 4, 3], None),                   # 1-D
])
def test_deformable_convolution_shape_function(data, offsets, filt, mask):
    args = [param(s) for s in (data, offsets, filt)] + ([param(mask)] if mask is not None else [])
    attrs = {"strides": "1, 1", "pads_begin": "0, 0", "pads_end": "0, 0", "dilations": "1, 1", "group": "1",
             "deformable_group": "1"}
    check_shape_function(
        lambda d, o, f, m=None: ops8.deformable_convolution(d, o, f, [1, 1], [0, 0], [0, 0], [1, 1], mask=m),
        "DeformableConvolution", 8, attrs, args)


# ---------------------------------------------------------------- BinaryConvolution

def u1_constant(bits: np.ndarray):
    return ov.op.Constant(ov.Type.u1, ov.Shape(list(bits.shape)), bits.ravel().tolist())


def binary_model(shape, bits, strides, pb, pe, dil, pad_value, auto_pad, levels=(-1.0, 1.0), dtype=np.float32):
    """FakeQuantize (2 levels, threshold 0.5) -> BinaryConvolution: the CPU plugin fuses the two into a binarization,
    the only way it reads a float input as bits (a raw f32 input of 0s and 1s gives it all the same bit)."""
    x = param(shape, dtype)
    low, high = (ops1.constant(np.array(v, dtype)) for v in levels)
    fq = ops1.fake_quantize(x, ops1.constant(np.array(0, dtype)), ops1.constant(np.array(1, dtype)), low, high, 2)
    node = ops1.binary_convolution(fq, u1_constant(bits), strides, pb, pe, dil, "xnor-popcount", pad_value, auto_pad)
    return ov.Model([node], [x])


def compare_binary(shape, bits, args, tmp_path, levels=(-1.0, 1.0), dtype=np.float32, seed=0):
    """irrun on the IR against the CPU plugin on the same IR with every weight byte bit-reversed: the CPU plugin
    reads u1 weights least significant bit first, OpenVINO's u1 format (and its reference kernel) most
    significant bit first."""
    data = rng(seed).uniform(-1, 2, shape).astype(dtype)
    xml = save(binary_model(shape, bits, *args, levels=levels, dtype=dtype), tmp_path / "irrun")
    cpu_bits = np.unpackbits(np.packbits(bits.ravel(), bitorder="little"))[:bits.size].reshape(bits.shape)
    cpu_xml = save(binary_model(shape, cpu_bits, *args, levels=levels, dtype=dtype), tmp_path / "cpu")
    expected = run_openvino(cpu_xml, [data])[0]
    assert irrun.validate(xml).ok
    got = next(iter(irrun.load(xml).infer([data]).values()))
    assert_close(got, expected, rtol=0, atol=0)


BINARY_GEOMETRY = [
    # kernel, strides, pads_begin, pads_end, dilations
    ((3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),
    ((3, 2), (2, 1), (0, 1), (2, 0), (1, 2)),
    ((1, 1), (1, 2), (0, 0), (0, 0), (1, 1)),
    ((2, 3), (1, 1), (2, 1), (1, 2), (2, 1)),
]


@pytest.mark.parametrize("geometry", range(len(BINARY_GEOMETRY)))
@pytest.mark.parametrize("auto_pad", AUTO_PADS)
@pytest.mark.parametrize("pad_value", [-1.0, 0.0, 1.0])
def test_binary_convolution(geometry, auto_pad, pad_value, tmp_path):
    kernel, strides, pb, pe, dil = BINARY_GEOMETRY[geometry]
    bits = rng(geometry).integers(0, 2, (5, 8, *kernel)).astype(np.uint8)
    compare_binary([2, 8, 7, 6], bits, (strides, pb, pe, dil, pad_value, auto_pad), tmp_path, seed=geometry)


@pytest.mark.parametrize("levels", [(0.0, 1.0), (-1.0, 1.0)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_binary_convolution_levels_and_types(levels, dtype, tmp_path):
    bits = rng(5).integers(0, 2, (3, 16, 3, 3)).astype(np.uint8)
    compare_binary([1, 16, 5, 5], bits, ((1, 1), (1, 1), (1, 1), (1, 1), -1.0, "explicit"), tmp_path, levels, dtype)


def naive_binary_convolution(data, bits, pads, pad_value):
    """The spec's formula written out: bits 1/0 as +1/-1, the padding as pad_value's sign (0: nothing)."""
    signs = np.pad(np.where(data > 0, 1, -1), [(0, 0), (0, 0), pads, pads], constant_values=np.sign(pad_value))
    kernel = bits.shape[2:]
    out = np.zeros((data.shape[0], bits.shape[0], signs.shape[2] - kernel[0] + 1, signs.shape[3] - kernel[1] + 1))
    for o in range(bits.shape[0]):
        for i in range(out.shape[2]):
            for j in range(out.shape[3]):
                window = signs[:, :, i:i + kernel[0], j:j + kernel[1]]
                out[:, o, i, j] = (window * np.where(bits[o] == 1, 1, -1)).sum(axis=(1, 2, 3))
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8])
def test_binary_convolution_zero_one_input_by_hand(dtype, tmp_path):
    """0/1 input of any numeric type, channels not a multiple of 8 (where the CPU plugin gives no consistent
    result): checked against the spec's formula written out."""
    r = rng(11)
    data = r.integers(0, 2, (1, 3, 4, 5)).astype(dtype)
    bits = r.integers(0, 2, (2, 3, 2, 2)).astype(np.uint8)
    x = param(data.shape, dtype)
    node = ops1.binary_convolution(x, u1_constant(bits), [1, 1], [1, 1], [1, 1], [1, 1], "xnor-popcount", -1.0)
    xml = save(ov.Model([node], [x]), tmp_path)
    got = next(iter(irrun.load(xml).infer([data]).values()))
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, naive_binary_convolution(data, bits, (1, 1), -1.0).astype(dtype))


@pytest.mark.parametrize("data, filt", [
    ([1, 8, 5, 5], [2, 8, 3, 3]), ([-1, 8, -1, -1], [2, 8, 3, 3]), ([1, 8, 5], [2, 8, 3]), ([1, 7, 5, 5], [2, 8, 3, 3]),
    (None, [2, 8, 3, 3]),
])
def test_binary_convolution_shape_function(data, filt):
    w = ov.op.Constant(ov.Type.u1, ov.Shape(filt), [1] * int(np.prod(filt)))
    spatial = len(filt) - 2
    attrs = {"strides": ", ".join(["1"] * spatial), "pads_begin": ", ".join(["0"] * spatial),
             "pads_end": ", ".join(["0"] * spatial), "dilations": ", ".join(["1"] * spatial)}
    check_shape_function(lambda d, f: ops1.binary_convolution(d, f, [1] * spatial, [0] * spatial, [0] * spatial,
                                                              [1] * spatial, "xnor-popcount", 0.0),
                         "BinaryConvolution", 1, attrs, [param(data), w])


# ---------------------------------------------------------------- validate

def declared_output_edited(m: ov.Model, tmp_path, type_name: str, axis: int, value: int):
    def edit(layer):
        layer.find("output").find("port").findall("dim")[axis].text = str(value)
    return edited_ir(m, tmp_path, type_name, edit=edit)


@pytest.mark.parametrize("type_name", ["DeformableConvolution", "BinaryConvolution"])
def test_declared_output_shape(type_name, tmp_path):
    x = param([1, 8, 6, 6])
    if type_name == "DeformableConvolution":
        o = param([1, 18, 4, 4])
        node = ops8.deformable_convolution(x, o, ops1.constant(np.ones((2, 8, 3, 3), np.float32)), [1, 1], [0, 0],
                                           [0, 0], [1, 1])
        m = ov.Model([node], [x, o])
    else:
        node = ops1.binary_convolution(x, u1_constant(np.ones((2, 8, 3, 3), np.uint8)), [1, 1], [0, 0], [0, 0],
                                       [1, 1], "xnor-popcount", 0.0)
        m = ov.Model([node], [x])
    problems = irrun.validate(declared_output_edited(m, tmp_path, type_name, 2, 5)).errors
    assert [(e.code, e.layer.type) for e in problems][:1] == [("E-DECLARED-SHAPE", type_name)]


def test_deformable_offsets_channels_mismatch_names_the_layer(tmp_path):
    """Offsets must have 2 * deformable_group * KH * KW channels; OpenVINO refuses the edited IR too."""
    from lxml import etree
    x, o = param([1, 4, 6, 6]), param([1, 18, 4, 4])
    node = ops8.deformable_convolution(x, o, ops1.constant(np.ones((2, 4, 3, 3), np.float32)), [1, 1], [0, 0],
                                       [0, 0], [1, 1])
    xml = save(ov.Model([node], [x, o]), tmp_path)
    tree = etree.parse(str(xml))
    layer = next(la for la in tree.getroot().iter("layer") if la.get("type") == "DeformableConvolution")
    layer.find("data").set("deformable_group", "2")
    tree.write(str(xml))
    try:
        ov.Core().read_model(str(xml))
        pytest.fail("OpenVINO accepted offsets with the wrong channel count")
    except RuntimeError:
        pass
    errors = irrun.validate(xml).errors
    assert any(e.layer.type == "DeformableConvolution" and "offsets" in e.message for e in errors)
