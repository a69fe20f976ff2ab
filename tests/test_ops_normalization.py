"""MVN-2/6, BatchNormInference-1/5, NormalizeL2, GroupNormalization and LRN against OpenVINO.

Whole models run by the CPU plugin and by irrun (several outputs per model, to
keep compilations few); shape functions against OpenVINO's partial-shape
inference; where the CPU plugin departs from the reference kernel (LRN's bias,
LRN over arbitrary axes) an independent per-element implementation of the
reference's loop is the oracle.  See specs/errata/reduction.md.
"""
import re

import numpy as np
import openvino as ov
import openvino.opset1 as ops1
import openvino.opset2 as ops2
import openvino.opset5 as ops5
import openvino.opset6 as ops6
import openvino.opset12 as ops12
import pytest
from lxml import etree
from openvino.utils.node_factory import NodeFactory

from irxml import hand_ir
from ovutil import (
    as_tensor_type, check_shape_function, compare, const, irrun_infer, model, openvino_refuses, param, run_openvino,
    save
)
from test_ops_reduction import reduce_ir
import irrun
from irrun.errors import ShapeError
from irrun.shapes import format_shape

D = ov.Dimension
DYN = ov.PartialShape.dynamic()
RNG = np.random.default_rng(23)
F16 = {"rtol": 3e-3, "atol": 3e-3}


def sample(shape, dtype=np.float32, scale=2.0, offset=0.5):
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        lo = 0 if dtype.kind == "u" else -50
        return RNG.integers(lo, 50, shape).astype(dtype)
    return (RNG.standard_normal(shape) * scale + offset).astype(dtype)


def positive(n, dtype=np.float32):
    return const(RNG.uniform(0.5, 2.0, n), dtype)


def normal(n, dtype=np.float32):
    return const(RNG.standard_normal(n), dtype)


def irrun_run(xml, inputs) -> list[np.ndarray]:
    return list(irrun.load(xml).infer(list(inputs)).values())


def compare_xml(xml, inputs, **tol):
    """For IRs edited after saving: run the file in OpenVINO and in irrun."""
    assert irrun.validate(xml).ok
    for got, want in zip(irrun_run(xml, inputs), run_openvino(xml, inputs)):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, **({"rtol": 1e-4, "atol": 1e-5} | tol))


# ---------------------------------------------------------------- MVN-2

@pytest.mark.parametrize("shape", [[-1, 5], [-1, 3, 5], [-1, 3, 4, 5], [2, 3, -1, 2, 3]], ids=str)
def test_mvn2_modes(shape, tmp_path):
    """across_channels x normalize_variance on 2-D to 5-D input with a dynamic dim: dims [1:] or [2:]."""
    x = param(shape)
    outputs = [ops2.mvn(x, across, variance, 0.25) for across in (False, True) for variance in (False, True)]
    concrete = [3 if d == -1 else d for d in shape]
    compare(model(outputs, [x]), [sample(concrete)], tmp_path)


def test_mvn2_reduction_axes_only_choose_across_channels(tmp_path):
    """The IR's reduction_axes override across_channels (OpenVINO's reader sets it to "contains
    axis 1"); the CPU plugin then normalizes over [1:] or [2:] whatever the listed axes are."""
    x = param([2, 3, 4, 5])
    net = model([ops2.mvn(x, True, True, 0.25) for _ in range(5)], [x])
    xml = save(net, tmp_path)
    edits = iter(['across_channels="true" reduction_axes="2,3"', 'across_channels="false" reduction_axes="1,2,3"',
                  'across_channels="false" reduction_axes="3"', 'across_channels="true" reduction_axes="-3,-2,-1"',
                  'across_channels="true"'])
    text = re.sub(r'across_channels="true" normalize_variance="true" reduction_axes="[^"]*"',
                  lambda m: next(edits) + ' normalize_variance="true"', xml.read_text())
    # The IR reader maps MVN version="opset1" to MVN-2.
    text = text.replace('type="MVN" version="opset2"', 'type="MVN" version="opset1"', 1)
    xml.write_text(text)
    assert text.count("normalize_variance") == 5 and 'version="opset1"' in text
    data = sample([2, 3, 4, 5])
    compare_xml(xml, [data])
    got = irrun_run(xml, [data])
    per_channel = (data - data.mean((2, 3), keepdims=True)) / np.sqrt(data.var((2, 3), keepdims=True) + 0.25)
    np.testing.assert_allclose(got[2], per_channel, rtol=1e-4, atol=1e-5)   # "3" still means [2:]


@pytest.mark.parametrize("dtype", [np.float16, np.int32, np.uint8])
def test_mvn2_element_types(dtype, tmp_path):
    """Integers are normalized in floating point, rounded to nearest and saturated (u8: negatives become 0)."""
    x = param([2, 3, 4], dtype)
    m = model([ops2.mvn(x, False, False, 1e-3), ops2.mvn(x, True, True, 1e-3)], [x])
    compare(m, [sample([2, 3, 4], dtype)], tmp_path, **(F16 if dtype == np.float16 else {}))


def test_mvn_hand_example(tmp_path):
    """[1, 2, 3, 4]: mean 2.5, variance 1.25."""
    x = param([1, 4])
    got = compare(model([ops6.mvn(x, const([1]), True, 0.0, "inside_sqrt")], [x]),
                  [np.array([[1, 2, 3, 4]], np.float32)], tmp_path)
    np.testing.assert_allclose(next(iter(got.values())), [[-1.5, -0.5, 0.5, 1.5]] / np.sqrt(1.25), rtol=1e-6)


# ---------------------------------------------------------------- MVN-6

MVN6_AXES = [[1], [-1], [0, 2], [3, 1], [1, 1], [2, 3], [0, 1, 2, 3]]


@pytest.mark.parametrize("eps_mode", ["inside_sqrt", "outside_sqrt"])
def test_mvn6_axes_and_modes(eps_mode, tmp_path):
    """eps = 0.5 so that inside and outside the root differ; a dynamic batch."""
    x = param([-1, 3, 4, 5])
    outputs = [ops6.mvn(x, const(axes), variance, 0.5, eps_mode) for axes in MVN6_AXES for variance in (True, False)]
    compare(model(outputs, [x]), [sample([2, 3, 4, 5])], tmp_path)


def test_mvn6_ranks_and_axes_types(tmp_path):
    shapes = {1: [6], 2: [3, 5], 3: [2, 3, 5], 5: [2, 3, 2, 2, 3]}
    xs = [param(shape, name=f"x{rank}") for rank, shape in shapes.items()]
    outputs = []
    for x, rank in zip(xs, shapes):
        for axes, axes_dtype in (([-1], np.int32), (list(range(rank)), np.int64), ([rank - 1, 0][:rank], np.uint8)):
            outputs.append(ops6.mvn(x, const(axes, axes_dtype), True, 1e-4, "outside_sqrt"))
    compare(model(outputs, xs), [sample(s) for s in shapes.values()], tmp_path)


@pytest.mark.parametrize("shape,axes", [([1, 1, 256], [-1]), ([1, 256, 1], [1]), ([1, 4, 64], [1, 2]), ([7], [0])],
                         ids=str)
def test_mvn6_one_row(shape, axes, tmp_path):
    """Every element in one mean (a decoding step's layer norm): irrun's dot-product path, both eps
    modes, with and without the variance, on a row far from zero and on a constant row (its
    variance 0: eps alone divides)."""
    x, flat = param(shape, name="x"), param(shape, name="flat")
    outputs = [ops6.mvn(t, const(axes), variance, eps, mode) for t in (x, flat)
               for variance in (True, False) for eps, mode in ((1e-5, "inside_sqrt"), (0.25, "outside_sqrt"))]
    far = sample(shape, scale=1.0, offset=20.0)
    # (7 values of 3: OpenVINO's mean, the sum times 1/7 in float32, is a rounding off 3, which
    # 1/sqrt(eps) magnifies to 7.5e-5; irrun's is 3.  Zeros there.)
    constant = np.full(shape, 3.0 if len(far.reshape(-1)) in (64, 256) else 0.0, np.float32)
    compare(model(outputs, [x, flat]), [far, constant], tmp_path)


@pytest.mark.parametrize("shape", [[2, 3, 4], [2, 3]], ids=str)
def test_mvn6_empty_axes_gives_zeros(shape, tmp_path):
    """Each element is its own mean.  oracle="reference" for 2-D data: the CPU plugin returns the
    input unchanged there (it gives zeros for 3-D and up)."""
    x = param(shape)
    got = compare(model([ops6.mvn(x, const([]), True, 1e-3, "inside_sqrt")], [x]), [sample(shape)], tmp_path,
                  oracle="reference" if len(shape) == 2 else "cpu")
    assert not np.any(next(iter(got.values())))


@pytest.mark.parametrize("dtype", [np.float16, np.int32, np.int64, np.int8])
def test_mvn6_element_types(dtype, tmp_path):
    x = param([2, 3, 4], dtype)
    m = model([ops6.mvn(x, const([2]), False, 1e-3, "inside_sqrt"),
               ops6.mvn(x, const([1, 2]), True, 1e-3, "outside_sqrt")], [x])
    compare(m, [sample([2, 3, 4], dtype)], tmp_path, **(F16 if dtype == np.float16 else {}))


@pytest.mark.parametrize("shape,axes,axes_dtype", [
    ([2, 3, 4], [1], np.int64), ([2, 3, 4], [0, 1, 2, 2], np.int64), ([2, 3, 4], 1, np.int64),
    ([2, 3, 4], [[1]], np.int64), (DYN, [5], np.int32), ([-1, D(2, 4)], [1], np.uint8)], ids=str)
def test_mvn6_shape_function(shape, axes, axes_dtype):
    check_shape_function(lambda x, a: ops6.mvn(x, a, True, 1e-3, "inside_sqrt"), "MVN", 6, {},
                         [param(shape), const(axes, axes_dtype)])


@pytest.mark.parametrize("axes,axes_dtype", [([3], np.int64), ([-4], np.int32), ([1], np.float32)], ids=str)
def test_mvn6_shape_function_stricter_than_openvino(axes, axes_dtype):
    """OpenVINO's shape inference takes these; the CPU plugin then fails to compile them (its
    decomposition builds a ReduceMean, which checks the axes)."""
    inputs = [param([2, 3, 4]), const(axes, axes_dtype)]
    assert str(ops6.mvn(*inputs, True, 1e-3, "inside_sqrt").get_output_partial_shape(0)) == "[2,3,4]"
    with pytest.raises(ShapeError, match="out of range|integer"):
        irrun_infer("MVN", 6, {}, [as_tensor_type(a.output(0)) for a in inputs])


# ---------------------------------------------------------------- BatchNormInference

BATCH_NORM = {1: ops1.batch_norm_inference, 5: ops5.batch_norm_inference}


@pytest.mark.parametrize("version", [1, 5])
def test_batch_norm(version, tmp_path):
    """2-D to 5-D data (one with a dynamic channel dim, which the per-channel inputs fix);
    v1's IR lists gamma and beta before data, v5 data first."""
    shapes = [[4, 3], [2, 3, 5], [-1, 3, 4, 5], [2, -1, 2, 3, 2]]
    xs = [param(s, name=f"x{i}") for i, s in enumerate(shapes)]
    outputs = [BATCH_NORM[version](x, normal(3), normal(3), normal(3), positive(3), 1e-3) for x in xs]
    m = model(outputs, xs)
    compare(m, [sample([3 if i == 1 else 2 if d == -1 else d for i, d in enumerate(s)]) for s in shapes],
            tmp_path)
    xml = save(m, tmp_path)
    data_port = 2 if version == 1 else 0
    for node in etree.parse(str(xml)).iterfind(".//layer[@type='BatchNormInference']"):
        ranks = [len(p.findall("dim")) for p in node.find("input").findall("port")]
        assert ranks[data_port] >= 2 and ranks[:data_port] + ranks[data_port + 1:] == [1, 1, 1, 1]
    assert [format_shape(o.shape) for o in irrun.load(xml).outputs] == ["[4,3]", "[2,3,5]", "[?,3,4,5]",
                                                                        "[2,3,2,3,2]"]


def test_batch_norm_f16_and_compressed_weights(tmp_path):
    x, h = param([2, 3, 4]), param([2, 3, 4], np.float16, "h")
    m = model([ops5.batch_norm_inference(x, normal(3), normal(3), normal(3), positive(3), 1e-5)], [x])
    compare(m, [sample([2, 3, 4])], tmp_path / "c", compress=True, rtol=2e-3, atol=2e-3)
    f16 = [normal(3, np.float16), normal(3, np.float16), normal(3, np.float16), positive(3, np.float16)]
    m = model([ops1.batch_norm_inference(h, *f16, 1e-3)], [h])
    compare(m, [sample([2, 3, 4], np.float16)], tmp_path, **F16)


BATCH_NORM_SHAPES = [
    ([2, 3], [3]), ([2, -1, 4], [3]), ([2, 4], [3]), ([3], [3]), (DYN, [3]), ([2, D(2, 5)], [-1]),
    ([2, 0], [0]), ([2, 3], [3, 1]),
]


@pytest.mark.parametrize("shape,channel_shape", BATCH_NORM_SHAPES, ids=str)
@pytest.mark.parametrize("version", [1, 5])
def test_batch_norm_shape_function(version, shape, channel_shape):
    names = ["data", "gamma", "beta", "mean", "variance"]
    args = {"data": param(shape)} | {n: param(channel_shape, name=n) for n in names[1:]}
    order = ["gamma", "beta", "data", "mean", "variance"] if version == 1 else names

    def build(*inputs):
        named = dict(zip(order, inputs))
        return BATCH_NORM[version](named["data"], named["gamma"], named["beta"], named["mean"], named["variance"],
                                   1e-3)

    check_shape_function(build, "BatchNormInference", version, {"epsilon": 1e-3}, [args[n] for n in order])


def test_validate_batch_norm_channel_mismatch(tmp_path):
    """v1 order: the data is input 2; the per-channel inputs say 4, the data 3."""
    inputs = [([4], "FP32"), ([4], "FP32"), ([2, 3, 5], "FP32"), ([4], "FP32"), ([4], "FP32")]
    xml = hand_ir(tmp_path, "BatchNormInference", inputs, [2, 3, 5], {"epsilon": "0.001"})
    problems = irrun.validate(xml).errors
    assert [(e.code, e.layer.name) for e in problems] == [("E-SHAPE", "the_op")], [e.format() for e in problems]
    assert "channel" in problems[0].message


def test_validate_batch_norm_declared_shape_and_epsilon(tmp_path):
    inputs = [([2, 3, 5], "FP32")] + [([3], "FP32")] * 4
    xml = hand_ir(tmp_path, "BatchNormInference", inputs, [2, 3, 6], {"epsilon": "-1"}, version="opset5")
    assert sorted(e.code for e in irrun.validate(xml).errors) == ["E-ATTR-RANGE", "E-DECLARED-SHAPE"]


# ---------------------------------------------------------------- NormalizeL2

def normalize_l2(x, axes, eps, eps_mode):
    # openvino.opset1.normalize_l2 passes eps_mode as "mode", so OpenVINO silently keeps "add".
    return NodeFactory("opset1").create("NormalizeL2", [x.output(0), axes.output(0)],
                                        {"eps": eps, "eps_mode": eps_mode})


NL2_AXES = [[1], [-1], [0], [1, 2], [2, 3], [1, 2, 3], [0, 1, 2, 3], [3, 1], [1, 1], np.int64(2)]


@pytest.mark.parametrize("eps_mode", ["add", "max"])
def test_normalize_l2(eps_mode, tmp_path):
    """eps = 3 is larger than some sums of squares, so add and max differ; a zero slice gives 0."""
    x = param([2, 3, -1, 5])
    m = model([normalize_l2(x, const(axes), 3.0, eps_mode) for axes in NL2_AXES], [x])
    data = sample([2, 3, 4, 5], scale=1.0, offset=0.0)
    data[0, :, 0, 0] = 0
    compare(m, [data], tmp_path)
    assert f'eps_mode="{eps_mode}"' in save(m, tmp_path).read_text()


def test_normalize_l2_ranks_and_empty_axes(tmp_path):
    """No axes: 0 where x is 0, 1 elsewhere (NaN and -2 included), as the reference kernel and the
    spec say.  On 2-D to 4-D data; for 1-D and 5-D data the CPU plugin computes x / sqrt(x^2 + eps)."""
    xs = [param([6], name="a"), param([3, 4], name="b"), param([2, 3, 2, 2, 3], name="c"), param([1, 4], name="d")]
    outputs = [normalize_l2(xs[0], const([0]), 1e-6, "add"), normalize_l2(xs[1], const([0]), 1e-6, "max"),
               normalize_l2(xs[2], const([1, 4]), 1e-6, "add"),
               normalize_l2(xs[1], const([1.7], np.float32), 1e-6, "add"),   # float axes truncate: [1]
               normalize_l2(xs[3], const([]), 1e-6, "add")]
    data = [sample([6]), sample([3, 4]), sample([2, 3, 2, 2, 3]), np.array([[0, np.nan, -2, 1e-30]], np.float32)]
    got = list(compare(model(outputs, xs), data, tmp_path).values())
    np.testing.assert_array_equal(got[4], [[0, 1, 1, 1]])


@pytest.mark.parametrize("dtype", [np.float16, np.uint8, np.int8])
def test_normalize_l2_element_types(dtype, tmp_path):
    """Integers round to nearest: mostly 0 and 1.  The CPU plugin cannot run i32 or i64, and gets
    u8 and i8 right only on the axes its own kernel handles ([1] and [1, 2, ...]); elsewhere its
    decomposition gives values like 2."""
    x = param([2, 3, 4], dtype)
    m = model([normalize_l2(x, const([1]), 1e-3, "add"), normalize_l2(x, const([1, 2]), 1e-3, "max")], [x])
    data = sample([2, 3, 4], dtype) if dtype != np.float16 else sample([2, 3, 4], dtype, 1.0, 0.0)
    compare(m, [data], tmp_path, **(F16 if dtype == np.float16 else {}))


def test_normalize_l2_hand_example(tmp_path):
    x = param([2, 2])
    got = compare(model([normalize_l2(x, const([1]), 0.0, "add"), normalize_l2(x, const([1]), 100.0, "max")], [x]),
                  [np.array([[3, 4], [0, 0]], np.float32)], tmp_path)
    add, floor = got.values()
    np.testing.assert_allclose(add, [[0.6, 0.8], [np.nan, np.nan]])          # 0 / 0
    np.testing.assert_allclose(floor, [[0.3, 0.4], [0, 0]])                   # / sqrt(max(25, 100))


# ---------------------------------------------------------------- GroupNormalization

@pytest.mark.parametrize("shape,groups", [([2, 6], (1, 3, 6)), ([-1, 6, 5], (1, 2, 6)), ([2, 6, -1, 4], (2, 3)),
                                          ([1, 4, 2, 2, 3], (1, 4))], ids=str)
def test_group_normalization(shape, groups, tmp_path):
    x = param(shape)
    m = model([ops12.group_normalization(x, normal(shape[1]), normal(shape[1]), g, 1e-4) for g in groups], [x])
    compare(m, [sample([3 if d == -1 else d for d in shape])], tmp_path)


def test_group_normalization_f16(tmp_path):
    x = param([2, 4, 3], np.float16)
    m = model([ops12.group_normalization(x, normal(4, np.float16), normal(4, np.float16), 2, 1e-3)], [x])
    compare(m, [sample([2, 4, 3], np.float16)], tmp_path, **F16)


GROUP_NORM_SHAPES = [
    ([2, 6, 4], [6], 3), ([2, 6, 4], [6], 4), ([2, 6, 4], [6], 12), ([6], [6], 1), ([2, -1, 4], [6], 5),
    ([2, 6, 4], [5], 1), ([2, 6, 4], [-1], 2), (DYN, [6], 4), ([2, 6], [6, 1], 1), ([2, D(4, 8)], [6], 3),
]


@pytest.mark.parametrize("shape,scale_shape,groups", GROUP_NORM_SHAPES, ids=str)
def test_group_normalization_shape_function(shape, scale_shape, groups):
    check_shape_function(lambda x, s, b: ops12.group_normalization(x, s, b, groups, 1e-5), "GroupNormalization", 12,
                         {"num_groups": groups, "epsilon": 1e-5},
                         [param(shape), param(scale_shape, name="s"), param(scale_shape, name="b")])


def test_validate_group_normalization(tmp_path):
    inputs = [([2, 6, 4], "FP32"), ([6], "FP32"), ([6], "FP32")]
    xml = hand_ir(tmp_path, "GroupNormalization", inputs, [2, 6, 4], {"num_groups": "4", "epsilon": "1e-5"},
                  version="opset12")
    problems = irrun.validate(xml).errors
    assert [(e.code, e.layer.name) for e in problems] == [("E-SHAPE", "the_op")]
    assert "num_groups=4" in problems[0].message
    xml = hand_ir(tmp_path, "GroupNormalization", inputs, [2, 6, 4], {"epsilon": "1e-5"}, version="opset12")
    assert openvino_refuses(xml)
    assert [e.code for e in irrun.validate(xml).errors] == ["E-ATTR-MISSING"]


# ---------------------------------------------------------------- LRN

def lrn_reference_loop(x, axes, alpha, beta, bias, size):
    """The reference kernel's arithmetic, element by element: a box of (size - 1) // 2 on each
    side of every axis in `axes`, clipped to the tensor."""
    x = x.astype(np.float64)
    axes = sorted({a % x.ndim for a in axes})
    half = (size - 1) // 2
    out = np.empty_like(x)
    for index in np.ndindex(x.shape):
        box = tuple(slice(max(0, i - half), i + half + 1) if a in axes else slice(i, i + 1)
                    for a, i in enumerate(index))
        squares = np.sum(x[box] ** 2)
        out[index] = x[index] / (bias + alpha / size ** len(axes) * squares) ** beta
    return out


@pytest.mark.parametrize("shape,axes_sets", [([3, 6], ([1],)), ([2, 6, 5], ([1], [2])),
                                             ([2, 6, 4, -1], ([1], [2, 3], [3, 2, 2])), ([1, 4, 3, 3, 3], ([1],))],
                         ids=str)
def test_lrn(shape, axes_sets, tmp_path):
    """The axes the CPU plugin runs: [1], or all spatial axes.  Even sizes have a box one narrower
    than the spec's formula.  Integer biases (the CPU plugin truncates others)."""
    x = param(shape)
    outputs = [ops1.lrn(x, const(axes), alpha, 0.75, bias, size) for axes in axes_sets
               for size, alpha, bias in ((1, 1e-4, 1), (2, 0.5, 2), (3, 0.7, 1), (4, 2.0, 3), (5, 0.3, 1))]
    compare(model(outputs, [x]), [sample([5 if d == -1 else d for d in shape])], tmp_path)


def test_lrn_at_alexnet_size(tmp_path):
    """AlexNet's and GoogLeNet's LRN (5 channels, alpha 1e-4, beta 0.75) over 96 x 55 x 55 by shifted
    adds in f32, and a window of 21 channels (beyond SHIFTED_SUMS_MOST_HALF) by running sums in f64."""
    x = param([1, 96, 55, 55])
    outputs = [ops1.lrn(x, const([1]), 1e-4, 0.75, 1, 5), ops1.lrn(x, const([1]), 2e-3, 0.75, 2, 21),
               ops1.lrn(x, const([2, 3]), 1e-3, 0.75, 1, 3)]
    compare(model(outputs, [x]), [sample([1, 96, 55, 55]) * 20], tmp_path)


def test_lrn_fractional_bias_and_any_axes(tmp_path):
    """The reference kernel takes any bias and any axes; the CPU plugin truncates the bias (1.5
    runs as 1) and normalizes over all spatial axes for any axes other than [1]."""
    data = sample([2, 4, 3, 3])
    x = param([2, 4, 3, 3])
    cases = [  # axes, alpha, beta, bias, size
        ([1], 0.6, 0.75, 1.5, 3), ([0], 0.6, 0.75, 2.25, 2), ([-1], 1.0, 0.5, 1.0, 3), ([1, 2, 3], 0.2, 1.0, 1.0, 3),
        ([0, 2], 0.5, 0.6, 0.5, 4), ([2, 2], 0.5, 0.75, 1.0, 3)]
    m = model([ops1.lrn(x, const(axes), alpha, beta, bias, size) for axes, alpha, beta, bias, size in cases],
              [x])
    got = irrun_run(save(m, tmp_path), [data])
    for actual, (axes, alpha, beta, bias, size) in zip(got, cases):
        np.testing.assert_allclose(actual, lrn_reference_loop(data, axes, alpha, beta, bias, size), rtol=1e-5)
    cpu_bias_1_5 = run_openvino(save(model([ops1.lrn(x, const([1]), 0.6, 0.75, 1.5, 3)], [x]), tmp_path / "b"),
                                [data])[0]
    np.testing.assert_allclose(cpu_bias_1_5, lrn_reference_loop(data, [1], 0.6, 0.75, 1.0, 3), rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float16, np.int32, np.uint8])
def test_lrn_element_types(dtype, tmp_path):
    x = param([2, 4, 3], dtype)
    compare(model([ops1.lrn(x, const([1]), 0.01, 0.75, 1, 3), ops1.lrn(x, const([2]), 0.5, 0.3, 2, 2)], [x]),
            [sample([2, 4, 3], dtype)], tmp_path, **(F16 if dtype == np.float16 else {}))


@pytest.mark.parametrize("shape,axes", [([2, 3, 4], [1]), ([2, 3, 4], [-1, 1]), ([2, 3, 4], [3]), ([2, 3, 4], 1),
                                        ([2, 3, 4], [[1]]), (DYN, [4]), ([-1, D(2, 3)], [1])], ids=str)
def test_lrn_shape_function(shape, axes):
    check_shape_function(lambda x, a: ops1.lrn(x, a), "LRN", 1, {"size": 5}, [param(shape), const(axes)])


# ---------------------------------------------------------------- validate: axes out of range

@pytest.mark.parametrize("op_type,version,axes", [("MVN", "opset6", [3]), ("MVN", "opset6", [-4]),
                                                  ("LRN", "opset1", [1, 3]), ("NormalizeL2", "opset1", [-4])])
def test_validate_axes_out_of_range(op_type, version, axes, tmp_path):
    """OpenVINO reads the MVN (its CPU plugin then cannot compile it); it refuses the others."""
    xml = reduce_ir(tmp_path, op_type, version, [2, 3, 4], axes, [2, 3, 4])
    problems = irrun.validate(xml).errors
    assert [(e.code, e.layer.name) for e in problems] == [("E-SHAPE", "the_op")], [e.format() for e in problems]
    assert f"axis {axes[-1]} is out of range for rank 3" in problems[0].message
    assert openvino_refuses(xml) == (op_type != "MVN")


def test_mvn6_last_axis_of_rows_laid_out_either_way(tmp_path):
    """A layer norm over the last axis, of rows contiguous in memory (the variance one dot product
    a row: `last_axis_square_sums` by np.vecdot) and of rows strided in memory (a Transpose's
    output is a view: the squares' sums by BLAS), rows far from zero and at unit scale."""
    x = param([2, 48, 40], name="x")
    columns = ops1.transpose(x, const([0, 2, 1]))
    outputs = [ops6.mvn(t, const([-1]), True, 1e-5, mode) for t in (x, columns)
               for mode in ("inside_sqrt", "outside_sqrt")]
    compare(model(outputs, [x]), [sample([2, 48, 40], scale=1.0, offset=20.0)], tmp_path)
    compare(model(outputs, [x]), [sample([2, 48, 40], scale=1.0, offset=0.0)], tmp_path / "unit")
