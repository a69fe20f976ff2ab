"""Reduce* and CumSum against OpenVINO.

Whole models run by the CPU plugin (or OpenVINO's reference evaluation where
the plugin is known to be wrong, see specs/errata/reduction.md) and by irrun;
shape functions against OpenVINO's own partial-shape inference; hand-written
IRs for what OpenVINO cannot build in Python.  Models carry several outputs
each to keep the number of compilations (the slow part) small.
"""
import numpy as np
import openvino as ov
import openvino.opset1 as ops1
import openvino.opset3 as ops3
import openvino.opset4 as ops4
import pytest

from irxml import edge, hand_ir, layer, net, port, write
from ovutil import (
    as_tensor_type, check_shape_function, compare, const, irrun_infer, model, openvino_refuses, param, save
)
import irrun
from irrun.errors import ModelError, ShapeError
from irrun.etypes import from_dtype
from irrun.shapes import format_shape

D = ov.Dimension
DYN = ov.PartialShape.dynamic()
RNG = np.random.default_rng(11)

# name -> (builder, version)
ARITHMETIC = {
    "ReduceSum": (ops1.reduce_sum, 1), "ReduceMean": (ops1.reduce_mean, 1), "ReduceProd": (ops1.reduce_prod, 1),
    "ReduceMax": (ops1.reduce_max, 1), "ReduceMin": (ops1.reduce_min, 1), "ReduceL1": (ops4.reduce_l1, 4),
    "ReduceL2": (ops4.reduce_l2, 4),
}
LOGICAL = {"ReduceLogicalAnd": (ops1.reduce_logical_and, 1), "ReduceLogicalOr": (ops1.reduce_logical_or, 1)}


def sample(shape, dtype=np.float32, lo=-9, hi=10):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return RNG.random(shape) < 0.5
    if dtype.kind in "iu":
        return RNG.integers(max(lo, np.iinfo(dtype).min), hi, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


# Axes for a rank-3 input: single, negative, several, repeated, scalar, all.  (Empty axes:
# test_reduce_empty_axes_reduces_each_element.)
AXES_SETS = [[1], [-1], [0, 2], [-3, -1, 1], [1, -2], np.int64(-2), [0, 1, 2]]


# ---------------------------------------------------------------- Reduce*: values

@pytest.mark.parametrize("keep_dims", [False, True])
@pytest.mark.parametrize("op", sorted(ARITHMETIC))
def test_reduce_axes_and_keep_dims(op, keep_dims, tmp_path):
    """Every axes form, on an input with a dynamic dim."""
    build, _ = ARITHMETIC[op]
    x = param([2, 3, -1])
    m = model([build(x, const(axes), keep_dims) for axes in AXES_SETS], [x])
    data = sample([2, 3, 4]) * (0.5 if op == "ReduceProd" else 1)
    compare(m, [data], tmp_path)


@pytest.mark.parametrize("keep_dims", [False, True])
def test_reduce_empty_axes_reduces_each_element(keep_dims, tmp_path):
    """No axes: the shape stays and each element is reduced on its own, so L1 and L2 give |x|
    and the others x.  oracle="reference" without keep_dims: the CPU plugin refuses to compile an
    empty axes list then ("gets incorrect number of input/output dimensions")."""
    x, b = param([2, 3, 4]), param([2, 3], np.bool_, "b")
    outputs = [build(x, const([]), keep_dims) for build, _ in ARITHMETIC.values()]
    outputs += [build(b, const([]), keep_dims) for build, _ in LOGICAL.values()]
    data = [sample([2, 3, 4]), sample([2, 3], np.bool_)]
    got = compare(model(outputs, [x, b]), data, tmp_path, oracle="cpu" if keep_dims else "reference")
    expected = [np.abs(data[0]) if op in ("ReduceL1", "ReduceL2") else data[0] for op in ARITHMETIC]
    for value, want in zip(got.values(), expected + [data[1]] * len(LOGICAL)):
        np.testing.assert_allclose(value, want, rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float16, np.int32, np.int64, np.uint8, np.int8])
def test_reduce_element_types(dtype, tmp_path):
    """Values small enough that no sum or product leaves the type: the CPU plugin agrees
    with the reference there, i64 included.  Integer means truncate toward zero."""
    x = param([3, 4, 2], dtype)
    outputs = [build(x, const(axes), keep) for build, _ in ARITHMETIC.values()
               for axes, keep in (([1], False), ([0, 2], True))]
    lo, hi = (0, 6) if dtype == np.uint8 else (-5, 6)
    data = sample([3, 4, 2], dtype, lo, hi)
    if dtype == np.float16:
        compare(model(outputs, [x]), [data], tmp_path, rtol=2e-3, atol=2e-3)
    else:
        compare(model(outputs, [x]), [data], tmp_path)


def test_reduce_mean_integer_truncates(tmp_path):
    x = param([4, 4], np.int32)
    data = np.array([[1, 2, 2, 2], [-1, -2, -4, 6], [3, 3, 3, 2], [-3, -3, -3, -2]], np.int32)
    got = compare(model([ops1.reduce_mean(x, const([1]))], [x]), [data], tmp_path)
    np.testing.assert_array_equal(next(iter(got.values())), [1, 0, 2, -2])   # 1.75, -0.25, 2.75, -2.75


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_reduce_wide_integers_wrap(dtype, tmp_path):
    """oracle="reference": the CPU plugin computes i32 reductions in f32 (2**24 + 1 becomes
    2**24, overflow gives INT_MIN) and i64 in i32.  The reference sums exactly and wraps.
    ReduceL2 has no integer reference and is left out."""
    big = 2 ** 30 if dtype == np.int32 else 2 ** 62
    data = np.array([[big, big, big, 1], [2 ** 24 + 1, 1, 0, 3], [-big, -big, -big, -big],
                     [46341, 46341, 7, -7]], dtype)
    x = param([4, 4], dtype)
    outputs = [ARITHMETIC[op][0](x, const([1])) for op in ARITHMETIC if op != "ReduceL2"]
    compare(model(outputs, [x]), [data], tmp_path, oracle="reference")


def test_reduce_narrow_integers(tmp_path):
    """8- and 16-bit integers have no reference evaluation.  The CPU plugin saturates 8-bit sums
    and products (ReduceMean divides the saturated sum); it runs 16-bit ones as i32, so their
    mean is exact and only the result wraps."""
    i8 = np.array([[100, 100, -100, -100], [127, 1, -1, 0], [50, 50, 50, -100], [-128, -1, 1, 0]], np.int8)
    u8 = np.array([[200, 100, 0, 0], [255, 1, 0, 0], [16, 16, 1, 1], [128, 2, 1, 1]], np.uint8)
    i16 = np.array([[30000, 30000, 0, 0], [-30000, -30000, 0, 0], [7, 0, 0, 0], [300, 300, 3, 2]], np.int16)
    x, y, z = param([4, 4], np.int8), param([4, 4], np.uint8, "y"), param([4, 4], np.int16, "z")
    ops = [ops1.reduce_sum, ops1.reduce_mean, ops1.reduce_prod, ops4.reduce_l1]
    got = list(compare(model([op(t, const([1])) for t in (x, y, z) for op in ops], [x, y, z]), [i8, u8, i16],
                       tmp_path).values())
    expected = [[0, 127, 50, -128], [0, 31, 12, -32], [127, 0, -128, 0], [127, 127, 127, 127],
                [255, 255, 34, 132], [63, 63, 8, 33], [0, 0, 255, 255], [255, 255, 34, 132],
                [-5536, 5536, 7, 605], [15000, -15000, 1, 151], [0, 0, 0, 15712], [-5536, -5536, 7, 605]]
    for actual, want in zip(got, expected):
        np.testing.assert_array_equal(actual, want)


def test_reduce_l2_8bit(tmp_path):
    """Squares that fit: trunc(sqrt).  (With squares past 255 the CPU plugin's u8 result depends
    on the tensor's size: 15 or 0 for the same row; irrun gives trunc(sqrt(255)) = 15.)"""
    x, y = param([3, 4], np.int8), param([3, 4], np.uint8, "y")
    i8 = np.array([[3, 4, 0, 0], [-5, 5, 5, -1], [1, 1, 1, 1]], np.int8)
    u8 = np.array([[3, 4, 0, 0], [7, 7, 7, 1], [15, 1, 1, 0]], np.uint8)
    got = compare(model([ops4.reduce_l2(x, const([1])), ops4.reduce_l2(y, const([1]))], [x, y]), [i8, u8],
                  tmp_path)
    assert [v.tolist() for v in got.values()] == [[5, 8, 2], [5, 12, 15]]


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_reduce_empty_dims(dtype, tmp_path):
    """Reducing a dim of size 0: 0, 0, 1, lowest, max (+inf for floats), 0, 0.
    oracle="reference": the CPU plugin gives f32's largest finite value, not +inf, for ReduceMin."""
    x = param([2, -1, 3], dtype)
    ops = [op for op in ARITHMETIC if not (op == "ReduceL2" and dtype == np.int32)]   # no integer L2 reference
    got = compare(model([ARITHMETIC[op][0](x, const([1])) for op in ops], [x]), [np.zeros((2, 0, 3), dtype)],
                  tmp_path, oracle="reference")
    if dtype == np.float32:
        assert np.all(got[list(got)[ops.index("ReduceMin")]] == np.inf)
        assert np.all(got[list(got)[ops.index("ReduceMax")]] == np.finfo(np.float32).min)


def test_reduce_nan_and_inf(tmp_path):
    """oracle="reference": the CPU plugin's max/min return NaN when NaN is the last element,
    and skip it elsewhere.  The reference (std::max from the lowest value) never picks NaN, and
    the maximum of -infs is the lowest finite value."""
    data = np.array([[np.nan, 1, 2], [1, np.nan, 2], [1, 2, np.nan], [np.inf, -np.inf, 1],
                     [-np.inf, -np.inf, -np.inf]], np.float32)
    x = param([5, 3])
    got = list(compare(model([op(x, const([1])) for op, _ in ARITHMETIC.values()], [x]), [data], tmp_path,
                       oracle="reference").values())
    names = list(ARITHMETIC)
    np.testing.assert_array_equal(got[names.index("ReduceMax")], [2, 2, 2, np.inf, np.finfo(np.float32).min])
    np.testing.assert_array_equal(got[names.index("ReduceMin")], [1, 1, 1, -np.inf, -np.inf])


def test_reduce_f16_extremes_computed_in_f32(tmp_path):
    """f16 goes through f32: the mean of 60000s is 60000 (not inf), the maximum of -infs is -inf."""
    x = param([2, 2], np.float16)
    data = np.array([[60000, 60000], [-np.inf, -np.inf]], np.float16)
    ops = [ops1.reduce_mean, ops1.reduce_max, ops1.reduce_sum]
    got = list(compare(model([op(x, const([1])) for op in ops], [x]), [data], tmp_path).values())
    np.testing.assert_array_equal(got[0], [60000, -np.inf])
    np.testing.assert_array_equal(got[1], [60000, -np.inf])
    np.testing.assert_array_equal(got[2], [np.inf, -np.inf])


def test_reduce_axes_known_only_at_run_time(tmp_path):
    """Axes from a Parameter (keep_dims: the CPU plugin cannot run an output of dynamic rank)."""
    x, axes = param([2, 3, 4]), param([-1], np.int64, "axes")
    m = model([op(x, axes, True) for op, _ in ARITHMETIC.values()], [x, axes])
    for values in ([1], [-1, 0]):
        compare(m, [sample([2, 3, 4]), np.array(values, np.int64)], tmp_path)
    # An empty run-time axes list crashes the CPU plugin's shape inference ("ptr is Null").
    compare(m, [sample([2, 3, 4]), np.array([], np.int64)], tmp_path, oracle="reference")
    assert format_shape(irrun.load(save(m, tmp_path)).outputs[0].shape) == "[?,?,?]"


@pytest.mark.parametrize("axes_dtype", [np.int32, np.uint8, np.int8])
def test_reduce_axes_element_types(axes_dtype, tmp_path):
    x = param([2, 3, 4])
    m = model([ops1.reduce_sum(x, const([2, 0], axes_dtype)), ops4.reduce_l2(x, const([1], axes_dtype), True)],
              [x])
    compare(m, [sample([2, 3, 4])], tmp_path)


@pytest.mark.parametrize("keep_dims", [False, True])
def test_reduce_logical(keep_dims, tmp_path):
    x = param([2, -1, 4], np.bool_)
    m = model([build(x, const(axes), keep_dims) for build, _ in LOGICAL.values() for axes in AXES_SETS], [x])
    compare(m, [sample([2, 3, 4], np.bool_)], tmp_path)
    compare(m, [np.zeros((2, 0, 4), np.bool_)], tmp_path)   # all of nothing: true; any of nothing: false


def test_reduce_scalar_data(tmp_path):
    """A scalar takes axis 0 or -1 (as if it had one dim) and stays a scalar (without keep_dims:
    OpenVINO cannot build keep_dims on a scalar, see test_reduce_shape_function)."""
    x = param([])
    m = model([ops1.reduce_sum(x, const([0])), ops1.reduce_max(x, const(-1), False)], [x])
    got = compare(m, [np.array(2.5, np.float32)], tmp_path)
    assert all(v.shape == () for v in got.values())


def test_reduce_mean_spec_hand_example(tmp_path):
    """Plain arithmetic: the mean of 1..24 over axes [0, 2] of a [2, 3, 4] tensor."""
    x = param([2, 3, 4])
    got = compare(model([ops1.reduce_mean(x, const([0, 2]), True)], [x]),
                  [np.arange(1, 25, dtype=np.float32).reshape(2, 3, 4)], tmp_path)
    np.testing.assert_allclose(next(iter(got.values())).reshape(-1), [8.5, 12.5, 16.5])


# ---------------------------------------------------------------- Reduce*: shape functions

REDUCE_SHAPES = [
    # data shape, axes
    ([6, 12, 10, 24], [2, 3]), ([6, 12, 10, 24], [1]), ([6, 12, 10, 24], [-2]),   # the spec's examples
    ([2, 3, 4], [1, 1]), ([2, 3, 4], [1, -2]), ([2, 3, 4], []), ([2, 3, 4], [0, 1, 2]), ([2, 3, 4], 2),
    ([2, 3, 4], [3]), ([2, 3, 4], [-4]), ([2, 3, 4], [[1]]), ([D(2, 5), -1, 4], [1]), ([-1, -1], [0]),
    (DYN, [1]), ([], [0]), ([], [-1]), ([], [1]), ([], []), ([2, 0, 3], [1]),
]


@pytest.mark.parametrize("shape,axes", REDUCE_SHAPES, ids=str)
@pytest.mark.parametrize("keep_dims", [False, True])
@pytest.mark.parametrize("op", ["ReduceMean", "ReduceL2"])
def test_reduce_shape_function(op, keep_dims, shape, axes):
    build, version = ARITHMETIC[op]
    check_shape_function(lambda x, a: build(x, a, keep_dims), op, version, {"keep_dims": keep_dims},
                         [param(shape), const(axes)])


@pytest.mark.parametrize("shape,axes_shape", [([2, 3, 4], [1]), ([2, 3, 4], []), ([2, 3, 4], [2]),
                                              ([2, 3, 4], [-1]), ([2, 3, 4], [0]), (DYN, [1]), ([2, 3], [1, 1])],
                         ids=str)
@pytest.mark.parametrize("keep_dims", [False, True])
def test_reduce_shape_function_unknown_axes(shape, axes_shape, keep_dims):
    check_shape_function(lambda x, a: ops1.reduce_sum(x, a, keep_dims), "ReduceSum", 1, {"keep_dims": keep_dims},
                         [param(shape), param(axes_shape, np.int64, "a")])


@pytest.mark.parametrize("op,dtype", [("ReduceSum", np.bool_), ("ReduceL1", np.bool_), ("ReduceLogicalOr", np.float32),
                                      ("ReduceLogicalAnd", np.int32), ("ReduceMax", np.float16),
                                      ("ReduceLogicalAnd", np.bool_)])
def test_reduce_shape_function_element_types(op, dtype):
    build, version = {**ARITHMETIC, **LOGICAL}[op]
    check_shape_function(lambda x, a: build(x, a), op, version, {}, [param([2, 3], dtype), const([1])])


@pytest.mark.parametrize("axes_dtype", [np.float32, np.bool_, np.int16])
def test_reduce_shape_function_axes_types(axes_dtype):
    check_shape_function(lambda x, a: ops1.reduce_prod(x, a), "ReduceProd", 1, {}, [param([2, 3]),
                                                                                  const([1], axes_dtype)])


# ---------------------------------------------------------------- validate

def reduce_ir(tmp_path, op_type, version, data_dims, axes, out_dims, attrs=None, axes_precision="I64",
              scalar_axes=False):
    """Parameter + Const axes -> op -> Result, written by hand (OpenVINO cannot build bad axes)."""
    dtype = {"I64": np.int64, "I32": np.int32, "FP32": np.float32}[axes_precision]
    blob = np.asarray(axes, dtype).tobytes()
    axes_dims = [] if scalar_axes else [len(axes)]
    layers = [
        layer(0, "x", "Parameter", data={"shape": ",".join(map(str, data_dims)), "element_type": "f32"},
              outputs=[port(0, data_dims)]),
        layer(1, "axes", "Const", data={"element_type": from_dtype(dtype).name,
                                        "shape": ",".join(map(str, axes_dims)),
                                        "offset": 0, "size": len(blob)},
              outputs=[port(0, axes_dims, axes_precision)]),
        layer(2, "the_op", op_type, version, data=attrs or {},
              inputs=[port(0, data_dims), port(1, axes_dims, axes_precision)], outputs=[port(2, out_dims)]),
        layer(3, "out", "Result", inputs=[port(0, out_dims)]),
    ]
    return write(tmp_path, net(layers, [edge(0, 0, 2, 0), edge(1, 0, 2, 1), edge(2, 2, 3, 0)]), blob, name="reduce")


@pytest.mark.parametrize("op_type,version", [("ReduceSum", "opset1"), ("ReduceL2", "opset4"),
                                             ("ReduceMin", "opset1")])
@pytest.mark.parametrize("axes", [[3], [-4], [0, 5]])
def test_validate_axes_out_of_range(op_type, version, axes, tmp_path):
    xml = reduce_ir(tmp_path, op_type, version, [2, 3, 4], axes, [2, 3, 4])
    assert openvino_refuses(xml)
    problems = irrun.validate(xml).errors
    assert [(e.code, e.layer.name) for e in problems] == [("E-SHAPE", "the_op")], [e.format() for e in problems]
    assert "out of range for rank 3" in problems[0].message


def test_validate_declared_shape(tmp_path):
    xml = reduce_ir(tmp_path, "ReduceMean", "opset1", [2, 3, 4], [1], [2, 4, 1], {"keep_dims": "true"})
    problems = irrun.validate(xml).errors
    assert [(e.code, e.layer.name) for e in problems] == [("E-DECLARED-SHAPE", "the_op")]
    assert "declared [2,4,1], inferred [2,1,4]" in problems[0].message
    assert "axis 1 is reduced (keep_dims=true)" in problems[0].message


def test_validate_float_axes(tmp_path):
    xml = reduce_ir(tmp_path, "ReduceMax", "opset1", [2, 3, 4], [1.0], [2, 4], axes_precision="FP32")
    assert openvino_refuses(xml)
    problems = irrun.validate(xml).errors
    assert problems and problems[0].layer.name == "the_op" and "integer" in problems[0].message


def test_validate_logical_reduce_of_floats(tmp_path):
    xml = hand_ir(tmp_path, "ReduceLogicalOr", [([2, 3], "FP32"), ([1], "I64")], [-1])
    problems = irrun.validate(xml).errors
    assert problems and problems[0].layer.name == "the_op" and "boolean" in problems[0].message


def test_run_time_axes_out_of_range(tmp_path):
    x, axes = param([2, 3]), param([1], np.int64, "axes")
    m = irrun.load(save(model([ops1.reduce_sum(x, axes, True)], [x, axes]), tmp_path))
    with pytest.raises(ModelError, match="ReduceSum-1.*axis 2 is out of range for rank 2"):
        m.infer([sample([2, 3]), np.array([2])])


# ---------------------------------------------------------------- CumSum

CUMSUM_DTYPES = [np.float32, np.float16, np.int32, np.int64, np.uint8, np.int8, np.bool_]


@pytest.mark.parametrize("dtype", CUMSUM_DTYPES, ids=lambda d: np.dtype(d).name)
def test_cumsum_modes(dtype, tmp_path):
    """exclusive x reverse, positive and negative axes, i32 and i64 axis; a dynamic dim.
    i64 values stay small: the CPU plugin computes i64 CumSum in i32 (irrun in i64)."""
    x = param([3, -1, 2], dtype)
    outputs = [ops3.cumsum(x, const(axis, axis_type), exclusive, reverse)
               for axis, axis_type in ((1, np.int64), (-3, np.int32), (2, np.int64))
               for exclusive in (False, True) for reverse in (False, True)]
    data = sample([3, 4, 2], dtype, *((0, 60) if dtype == np.uint8 else (-9, 10)))
    tol = {"rtol": 2e-3, "atol": 2e-3} if dtype == np.float16 else {}
    compare(model(outputs, [x]), [data], tmp_path, **tol)


def test_cumsum_integers_wrap(tmp_path):
    """Even i8 wraps (unlike the Reduce ops' saturation); the CPU plugin agrees."""
    x, y = param([1, 4], np.int8), param([1, 4], np.uint8, "y")
    m = model([ops3.cumsum(x, const(1)), ops3.cumsum(x, const(1), True, True), ops3.cumsum(y, const(1))],
              [x, y])
    got = list(compare(m, [np.array([[100, 100, -100, 27]], np.int8), np.array([[200, 100, 3, 4]], np.uint8)],
                       tmp_path).values())
    assert [g.tolist() for g in got] == [[[100, -56, 100, 127]], [[27, -73, 27, 0]], [[200, 44, 47, 51]]]


def test_cumsum_i64_beyond_i32(tmp_path):
    """The CPU plugin gives [0, 1, 1, 2] here (it runs i64 CumSum in i32), and CumSum has no
    reference evaluation for integers: the expected sums are written out."""
    x = param([4], np.int64)
    m = irrun.load(save(model([ops3.cumsum(x, const(0))], [x]), tmp_path))
    got = next(iter(m.infer([np.array([2 ** 40, 1, 2 ** 33, 1])]).values()))
    assert got.tolist() == [2 ** 40, 2 ** 40 + 1, 2 ** 40 + 2 ** 33 + 1, 2 ** 40 + 2 ** 33 + 2]


def test_cumsum_without_axis_input(tmp_path):
    """The spec's optional axis (default 0).  OpenVINO 2026.4.1 cannot read such a layer, so the
    expected values are written out."""
    xml = hand_ir(tmp_path, "CumSum", [([3, 2], "FP32")], [3, 2], {"exclusive": "true", "reverse": "true"},
                  version="opset3")
    assert openvino_refuses(xml)
    assert irrun.validate(xml).ok
    got = next(iter(irrun.load(xml).infer([np.arange(6, dtype=np.float32).reshape(3, 2)]).values()))
    np.testing.assert_array_equal(got, [[6, 8], [4, 5], [0, 0]])


def test_cumsum_spec_examples(tmp_path):
    """cum-sum-3.rst's four examples on [1, 2, 3, 4, 5]."""
    x = param([5])
    m = model([ops3.cumsum(x, const(0), exclusive, reverse)
               for exclusive, reverse in ((False, False), (True, False), (False, True), (True, True))], [x])
    got = compare(m, [np.arange(1, 6, dtype=np.float32)], tmp_path)
    assert [v.tolist() for v in got.values()] == [[1, 3, 6, 10, 15], [0, 1, 3, 6, 10], [15, 14, 12, 9, 5],
                                                  [14, 12, 9, 5, 0]]


@pytest.mark.parametrize("shape,axis,axis_dtype", [([2, 3], -2, np.int64), ([2, 3], 1, np.float32),
                                                   ([2, 3], 1, np.uint8), (DYN, 5, np.int64), ([], 0, np.int32)],
                         ids=str)
def test_cumsum_shape_function(shape, axis, axis_dtype):
    check_shape_function(ops3.cumsum, "CumSum", 3, {}, [param(shape), const(axis, axis_dtype)])


@pytest.mark.parametrize("shape,axis", [([2, 3], 2), ([2, 3], -3), ([2, 3], [1]), ([2, 3], [[1]]), ([2, 3], [1, 0])],
                         ids=str)
def test_cumsum_shape_function_stricter_than_openvino(shape, axis):
    """OpenVINO's shape inference takes an axis out of range or of any shape; the CPU plugin then
    refuses to compile it ("has axis with a value out of range", "doesn't support 'axis' input
    tensor with non scalar rank").  irrun reports it at load."""
    inputs = [param(shape), const(axis)]
    assert str(ops3.cumsum(*inputs).get_output_partial_shape(0)) == "[2,3]"
    with pytest.raises(ShapeError, match="out of range|must be a scalar"):
        irrun_infer("CumSum", 3, {}, [as_tensor_type(a.output(0)) for a in inputs])


def test_validate_cumsum_axis_out_of_range(tmp_path):
    xml = reduce_ir(tmp_path, "CumSum", "opset3", [2, 3], [2], [2, 3], scalar_axes=True)
    problems = irrun.validate(xml).errors
    assert [(e.code, e.layer.name) for e in problems] == [("E-SHAPE", "the_op")]
    assert "CumSum axis 2 is out of range for rank 2" in problems[0].message


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("keep", [True, False])
def test_reduce_extremum_over_a_short_middle_axis(dtype, keep, tmp_path, monkeypatch):
    """ReduceMax / ReduceMin over one short axis that is not the last (a CRNN's height) fold the
    axis's slices into the start value one by one: the reference's values exactly, NaN,
    infinities, windows all NaN or all -inf included (oracle="reference", as
    test_reduce_nan_and_inf); a spy checks the path."""
    from irrun.ops import reduction
    data = RNG.standard_normal((2, 256, 4, 64)).astype(dtype)
    data[0, :, 1, ::3] = np.nan
    data[1, 7] = np.nan                         # every element of the reduced axis NaN
    data[1, 8] = -np.inf
    data[1, 9, 2] = np.inf
    data[0, 10, :, 5] = [np.nan, -np.inf, np.nan, -np.inf]
    x = param(list(data.shape), dtype)
    taken = []
    real = reduction._slices_extremum
    monkeypatch.setattr(reduction, "_slices_extremum", lambda *a: taken.append(1) or real(*a))
    got = list(compare(model([ops1.reduce_max(x, const([2]), keep), ops1.reduce_min(x, const([-2]), keep)], [x]),
                       [data], tmp_path, oracle="reference").values())
    assert len(taken) == 2
    wide = data.astype(np.float32)
    lowest = np.finfo(np.float32).min
    for actual, ufunc, start in ((got[0], np.fmax, lowest), (got[1], np.fmin, np.inf)):
        expected = ufunc.reduce(wide, axis=2, keepdims=keep, initial=start).astype(dtype)
        assert actual.dtype == dtype
        np.testing.assert_array_equal(actual, expected)


def test_reduce_prod_wraps_in_its_own_type_inside_the_graph(tmp_path):
    """A product of a shape (a decoding step's ReduceProd of ShapeOf) stays in its type between
    layers: 65536 * 65536 wraps to 0 in i32, which the Greater after it sees.  oracle="reference":
    the CPU plugin computes i32 products in f32 (specs/errata/reduction.md)."""
    x = param([2], np.int32)
    product = ops1.reduce_prod(x, const([0]), False)
    m = model([ops1.greater(product, ops1.constant(np.array(0, np.int32))), ops1.reduce_prod(x, const([0]), True)], [x])
    got = compare(m, [np.array([65536, 65536], np.int32)], tmp_path, oracle="reference")
    assert list(got.values())[0].tolist() is False
