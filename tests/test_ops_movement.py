"""Reshape, Transpose, Squeeze, Unsqueeze, Concat and ShapeOf against OpenVINO.

Two kinds of differential test: whole models run by the CPU plugin and by
irrun (`compare`), and shape functions alone, where OpenVINO's partial-shape
inference of a node built in Python is the oracle for `Op.infer` (dynamic
dims, intervals, dynamic rank and the errors), without compiling anything.
"""
import re

import numpy as np
import openvino as ov
import openvino.opset1 as ops1
import openvino.opset3 as ops3
import openvino.opset15 as ops15
import pytest

from ovutil import (
    as_tensor_type, check_shape_function, compare, const, evaluate_reference, irrun_infer, model, param, random_data,
    replace_in_ir, run_openvino, save
)
import irrun
from irrun.errors import ShapeError
from irrun.registry import implementation
from irrun.shapes import format_shape
from irrun.spec import all_specs, parse_attrs

D = ov.Dimension
DYN = ov.PartialShape.dynamic()
RNG = np.random.default_rng(7)

DATA_TYPES = {
    "f32": np.float32, "f16": np.float16, "i32": np.int32, "i64": np.int64,
    "u8": np.uint8, "i8": np.int8, "boolean": np.bool_,
}


def sample(shape, dtype=np.float32):
    return random_data(RNG, shape, dtype)


def layer_types(xml) -> list[str]:
    return re.findall(r'type="(\w+)"', xml.read_text())


# ---------------------------------------------------------------- shape functions vs OpenVINO

RESHAPE_SHAPES = [
    # input, target, special_zero
    ([2, 3, 4], [0, -1], True), ([2, 3, 4], [-1], False), ([2, 3, 4], [4, -1, 2], False),
    ([2, 3, 0], [0, -1], False), ([2, 3, 4], [0, -1], False), ([2, 3, 4], [5, 5], False),
    ([2, 3, 4], [-1, -1], False), ([2, 3, 4], [-2, 12], False), ([2, 3, 4], [5, -1], False),
    ([2, 3], [0, 0, 0, -1], True), ([6], [0, 1, 1], True), ([2, 3, 4], [-1, 0], True),
    ([0, 3], [-1, 3], False), ([0, 3], [-1, 0], False), ([2, 3], [-1, 0], False),
    ([-1, 3, 4], [0, -1], True), ([-1, 3, 4], [0, 0, -1], True), ([-1, 3, 4], [-1, 12], False),
    ([-1, 3, 4], [-1, 5], False), ([-1, 3, 4], [2, -1, 4], False), ([-1, -1], [3, -1], False),
    ([-1, 3, 4], [5, 5], False), ([-1, -1], [0, 0], True), ([-1, 3], [-1, 0], False),
    ([D(2, 10), 3, 4], [-1, 12], False), ([D(2, 10), 3, 4], [-1, 24], False),
    ([D(2, 10), 3, 4], [-1, 8], False), ([D(2, 10), 3, 4], [4, -1], False),
    ([D(2, 3), 5], [-1, 7], False), ([D(2, 3), 5], [-1, 4], False), ([D(0, 3), 4], [-1, 5], False),
    ([D(2, 3), 0], [-1, 0], False), ([D(2, 3), 0], [-1, 5], False), ([D(2, 3), 5], [-1, 0], False),
    ([D(2, 3), 5], [15], False), ([2, 3, 4], [0, 0, 2, 2], False),
    (DYN, [0, -1, 3], True), (DYN, [2, 5, 3], True), ([2, 5, 5, 24], [0, -1, 4], True),
    ([2, 2, 3], [0, 0, 1, -1], True), ([3, 1, 1], [-1, 0], True), ([3, 1, 1], [0, -1], True),
    ([2, 5, 5, 0], [0, 4], False),
]


@pytest.mark.parametrize("shape,target,special_zero", RESHAPE_SHAPES, ids=str)
def test_reshape_shape_function(shape, target, special_zero):
    check_shape_function(lambda x, t: ops1.reshape(x, t, special_zero), "Reshape", 1,
                         {"special_zero": special_zero}, [param(shape), const(target)])


@pytest.mark.parametrize("shape,target", [([D(2, 3), 5], [-1, 8]), ([D(2, 3), 5], [-1, 20]),
                                          ([D(2, 3), 5], [7])], ids=str)
def test_reshape_shape_function_stricter_than_openvino(shape, target):
    """No input in the declared range can be reshaped to the target: OpenVINO still
    infers a shape (an empty interval like [2..1,8], or [7] for 10..15 elements), irrun
    reports the layer."""
    ov_shape = ops1.reshape(param(shape), const(target), False).get_output_partial_shape(0)
    with pytest.raises(ShapeError, match="cannot reshape"):
        irrun_infer("Reshape", 1, {"special_zero": False}, [as_tensor_type(param(shape).output(0)),
                                                            as_tensor_type(const(target).output(0))])
    assert ov_shape.rank.get_length() == len(target)


@pytest.mark.parametrize("target_shape", [[3], [-1], [D(2, 4)], [1, 3], []], ids=str)
def test_reshape_shape_function_unknown_target(target_shape):
    check_shape_function(lambda x, t: ops1.reshape(x, t, False), "Reshape", 1, {"special_zero": False},
                         [param([2, 3]), param(target_shape, np.int64, "t")])


@pytest.mark.parametrize("target_dtype", [np.int32, np.uint8, np.int8, np.uint64, np.float32], ids=str)
def test_reshape_shape_function_target_types(target_dtype):
    check_shape_function(lambda x, t: ops1.reshape(x, t, False), "Reshape", 1, {"special_zero": False},
                         [param([2, 3]), const([3, 2], target_dtype)])


TRANSPOSE_SHAPES = [
    ([2, 3, 4], [2, 0, 1]), ([2, 3, 4], [-1, 0, 1]), ([2, 3, 4], []), ([2, 3, 4], [0, 0, 1]),
    ([2, 3, 4], [0, 1]), ([2, 3, 4], [0, 1, 3]), (DYN, [1, 0]), ([D(2, 5), -1, 4], [2, 0, 1]),
    ([], []), ([5], [0]),
]


@pytest.mark.parametrize("shape,order", TRANSPOSE_SHAPES, ids=str)
def test_transpose_shape_function(shape, order):
    check_shape_function(ops1.transpose, "Transpose", 1, {}, [param(shape), const(order)])


@pytest.mark.parametrize("shape,order_shape", [([2, 3, 4], [3]), ([2, 3, 4], [-1]), (DYN, [3]), (DYN, [-1]),
                                               ([2, 3], [3])], ids=str)
def test_transpose_shape_function_unknown_order(shape, order_shape):
    check_shape_function(ops1.transpose, "Transpose", 1, {}, [param(shape), param(order_shape, np.int64, "o")])


def test_transpose_dynamic_rank_with_empty_order_stays_dynamic():
    """OpenVINO infers a scalar [] here (it reverses the axes of a rank it does not know);
    the output has the input's rank, so irrun keeps it dynamic."""
    assert str(ops1.transpose(param(DYN), const([])).get_output_partial_shape(0)) == "[]"
    got = irrun_infer("Transpose", 1, {}, [as_tensor_type(param(DYN).output(0)), as_tensor_type(const([]).output(0))])
    assert got.shape is None


def test_transpose_rejects_float_order():
    check_shape_function(ops1.transpose, "Transpose", 1, {}, [param([2, 3]), const([1, 0], np.float32)])


SQUEEZE_SHAPES = [
    ([2, 3], [0]), ([-1, 3], [0]), ([2, 1, 3], [-2]), ([2, 1, 3], [1, -2]), ([2, 1, 3], [3]),
    ([2, 1, 3], []), ([1, 1, 3], [0, 1]), (DYN, [0]), ([], [0]), ([1, 2], 0),
    ([D(1, 5), 2], [0]), ([D(2, 5), 2], [0]), ([-1, 1, 3], []), ([1, 2, 1], [-1]),
]


@pytest.mark.parametrize("shape,axes", SQUEEZE_SHAPES, ids=str)
@pytest.mark.parametrize("version,skip", [(1, False), (15, False), (15, True)])
def test_squeeze_shape_function(shape, axes, version, skip):
    build = ops1.squeeze if version == 1 else (lambda x, a: ops15.squeeze(x, a, skip))
    attrs = {"allow_axis_skip": skip} if version == 15 else {}
    check_shape_function(build, "Squeeze", version, attrs, [param(shape), const(axes)])


@pytest.mark.parametrize("axes", [np.array([0.7, -1.2], np.float32), np.array([1, 0], np.uint8),
                                  np.array([0, 1], np.int8), np.array([True, False])], ids=lambda a: a.dtype.name)
def test_squeeze_and_unsqueeze_axes_types(axes):
    """OpenVINO reads axes of any numeric type, truncating floats; boolean is refused."""
    check_shape_function(ops1.squeeze, "Squeeze", 1, {}, [param([1, 2, 1]), const(axes, axes.dtype)])
    check_shape_function(ops1.unsqueeze, "Unsqueeze", 1, {}, [param([1, 2, 1]), const(axes, axes.dtype)])


@pytest.mark.parametrize("shape", [[-1, 1, 3], [1, 1, 3], [2, 3], [D(2, 4), 1], DYN, []], ids=str)
def test_squeeze_shape_function_without_axes(shape):
    check_shape_function(lambda x: ops15.squeeze(x), "Squeeze", 15, {}, [param(shape)])
    # Squeeze-1 without axes has the same shape function (OpenVINO builds it from the same code).
    got = irrun_infer("Squeeze", 1, {}, [as_tensor_type(param(shape).output(0))])
    assert format_shape(got.shape) == str(ops15.squeeze(param(shape)).get_output_partial_shape(0))


@pytest.mark.parametrize("shape,axes_shape", [([2, 1, 3], [1]), ([2, 1, 3], [2]), ([2, 3], [1]),
                                              ([2, 1, 3], [-1]), ([], [1]), ([2, 1], [1, 1])], ids=str)
@pytest.mark.parametrize("version", [1, 15])
def test_squeeze_shape_function_unknown_axes(shape, axes_shape, version):
    build = ops1.squeeze if version == 1 else ops15.squeeze
    check_shape_function(build, "Squeeze", version, {}, [param(shape), param(axes_shape, np.int64, "a")])


UNSQUEEZE_SHAPES = [
    ([2, 3], [-1, 0]), ([2, 3], [0, 0]), ([2, 3], [0, -4]), ([2, 3], [3]), ([2, 3], [-4]),
    ([], 0), (DYN, [0]), ([2, 3], [[0]]), ([2, 3], [0, 0, 3]), ([2, 3], [0, 0, 4]),
    ([2, 3, 4], [4, -1]), ([2], [3, -1, -2]), ([D(2, 5), -1], [1]), ([2, 3], []),
]


@pytest.mark.parametrize("shape,axes", UNSQUEEZE_SHAPES, ids=str)
def test_unsqueeze_shape_function(shape, axes):
    check_shape_function(ops1.unsqueeze, "Unsqueeze", 1, {}, [param(shape), const(axes)])


@pytest.mark.parametrize("shape,axes_shape", [([2, 3], [1]), ([2, 3], [2]), ([2, 3], [-1]), (DYN, [1])],
                         ids=str)
def test_unsqueeze_shape_function_unknown_axes(shape, axes_shape):
    check_shape_function(ops1.unsqueeze, "Unsqueeze", 1, {}, [param(shape), param(axes_shape, np.int64, "a")])


CONCAT_SHAPES = [
    ([[2, 3], [2, 4], [2, 1]], -1), ([[-1, 3], [2, -1], [D(1, 4), 1]], 1),
    ([[-1, 3], [D(2, 3), 3], [D(1, 4), 3]], 0), ([[2, 3], [3, 4]], 1), ([[2, 3], [2, 4]], 2),
    ([[2, 3], [2, 4, 1]], 1), ([DYN, [2, 4]], 1), ([DYN, [2, 4]], -1), ([DYN, DYN], 1),
    ([[2, 3]], 0), ([[], []], 0), ([[D(1, 5), 3], [D(3, 8), 3]], 1), ([[2, 0], [2, 3]], 1),
    ([[2, 3], [2, 3]], -3),
]


@pytest.mark.parametrize("shapes,axis", CONCAT_SHAPES, ids=str)
def test_concat_shape_function(shapes, axis):
    args = [param(s, name=f"x{i}") for i, s in enumerate(shapes)]
    check_shape_function(lambda *xs: ops1.concat(list(xs), axis), "Concat", 1, {"axis": axis}, args)


def test_concat_rejects_mixed_element_types():
    args = [param([2, 3]), param([2, 3], np.int32, "y")]
    check_shape_function(lambda *xs: ops1.concat(list(xs), 0), "Concat", 1, {"axis": 0}, args)


@pytest.mark.parametrize("shape", [[2, 3], [-1, 3], DYN, [], [D(1, 4)]], ids=str)
@pytest.mark.parametrize("version,output_type", [(1, "i64"), (3, "i32"), (3, "i64")])
def test_shapeof_shape_function(shape, version, output_type):
    x = param(shape)
    node = ops1.shape_of(x) if version == 1 else ops3.shape_of(x, output_type)
    attrs = {} if version == 1 else {"output_type": output_type}
    got = irrun_infer("ShapeOf", version, attrs, [as_tensor_type(x.output(0))])
    assert format_shape(got.shape) == str(node.get_output_partial_shape(0))
    assert got.etype.name == output_type
    if isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape):
        np.testing.assert_array_equal(got.value, shape)
        assert got.value.dtype == np.dtype(output_type.replace("i", "int"))
    else:
        assert got.value is None


# ---------------------------------------------------------------- Reshape models

RESHAPE_RUNS = [
    ([2, 3, 4], [0, -1], True), ([2, 3, 4], [-1], False), ([2, 3, 4], [4, -1, 2], False),
    ([2, 3, 4], [0, 0, 2, 2], True), ([2, 3, 4], [-1, 0], True),
    ([6], [0, 1, 1], True), ([2, 5, 5, 24], [0, -1, 4], True), ([2, 2, 3], [0, 0, 1, -1], True),
    ([3, 1, 1], [-1, 0], True), ([3, 1, 1], [0, -1], True), ([2, 5, 5, 0], [0, 4], False),
    ([1], [1, 1, 1], False), ([1, 1], [-1], True),
]


@pytest.mark.parametrize("shape,target,special_zero", RESHAPE_RUNS, ids=str)
def test_reshape(shape, target, special_zero, tmp_path):
    x = param(shape)
    m = model(ops1.reshape(x, const(target), special_zero), [x])
    compare(m, [sample(shape)], tmp_path)


@pytest.mark.parametrize("dtype", sorted(DATA_TYPES))
@pytest.mark.parametrize("target_dtype", [np.int32, np.int64, np.uint8])
def test_reshape_element_types(dtype, target_dtype, tmp_path):
    x = param([2, 3, 4], DATA_TYPES[dtype])
    m = model(ops1.reshape(x, const([4, 6], target_dtype), False), [x])
    got = compare(m, [sample([2, 3, 4], DATA_TYPES[dtype])], tmp_path)
    assert next(iter(got.values())).shape == (4, 6)


def test_reshape_dynamic_batch_keeps_batch_dim(tmp_path):
    x = param([-1, 3, 4])
    m = model(ops1.reshape(x, const([0, -1]), True), [x])
    for batch in (1, 5):
        compare(m, [sample([batch, 3, 4])], tmp_path)
    out = irrun.load(save(m, tmp_path)).outputs[0]
    assert format_shape(out.shape) == "[?,12]"


def test_reshape_target_from_shapeof_folds_at_load(tmp_path):
    """ShapeOf(y) -> Concat with a Const -> Reshape: the target is known at load."""
    x, y = param([2, 3, 4]), param([2, 3], name="y")
    target = ops1.concat([ops1.shape_of(y), const([-1])], 0)
    m = model([ops1.reshape(x, target, False), ops1.relu(y)], [x, y])
    got = compare(m, [sample([2, 3, 4]), sample([2, 3])], tmp_path)
    xml = save(m, tmp_path)
    assert {"ShapeOf", "Concat", "Reshape"} <= set(layer_types(xml))
    assert irrun.load(xml).outputs[0].shape == (2, 3, 4)
    assert next(iter(got.values())).shape == (2, 3, 4)


def test_reshape_target_is_shapeof_of_another_tensor(tmp_path):
    x, y = param([4, 6]), param([3, 8], name="y")
    m = model([ops1.reshape(x, ops3.shape_of(y, "i32"), False), ops1.relu(y)], [x, y])
    compare(m, [sample([4, 6]), sample([3, 8])], tmp_path)


def test_reshape_back_to_a_dynamic_shape(tmp_path):
    """Flatten then restore with ShapeOf of the dynamic input: the target is known only at run time."""
    x = param([-1, 3, -1])
    flat = ops1.reshape(x, const([-1]), False)
    m = model(ops1.reshape(ops1.relu(flat), ops1.shape_of(x), False), [x])
    compare(m, [sample([2, 3, 5])], tmp_path)


def test_reshape_target_from_a_parameter(tmp_path):
    x, t = param([2, 3, 4]), param([3], np.int64, "t")
    m = model(ops1.reshape(x, t, True), [x, t])
    compare(m, [sample([2, 3, 4]), np.array([0, -1, 2], np.int64)], tmp_path)
    assert format_shape(irrun.load(save(m, tmp_path)).outputs[0].shape) == "[?,?,?]"


def test_transpose_then_reshape_keeps_logical_order(tmp_path):
    """Transpose returns a strided view; a Reshape after it must read it in logical order."""
    x = param([2, 3, 4])
    t = ops1.transpose(x, const([2, 0, 1]))
    m = model([ops1.reshape(t, const([4, 6]), False), ops1.squeeze(ops1.unsqueeze(t, const([1])), const([1]))], [x])
    compare(m, [sample([2, 3, 4])], tmp_path)


def test_constant_subgraph_folds_at_load(tmp_path):
    """Every op here has only constant inputs: irrun computes them while loading."""
    c = const(np.arange(24).reshape(2, 3, 4), np.int64)
    x = param([1])
    moved = ops1.unsqueeze(ops1.squeeze(ops1.transpose(c, const([1, 0, 2])), const([])), const([0]))
    joined = ops1.concat([ops1.reshape(moved, const([-1]), False), ops3.shape_of(c), ops1.convert(x, "i64")], 0)
    net = model(joined, [x])
    xml = save(net, tmp_path)
    assert {"Transpose", "Squeeze", "Unsqueeze", "Concat", "ShapeOf"} <= set(layer_types(xml))
    compare(net, [np.array([5], np.float32)], tmp_path)
    m = irrun.load(xml)
    assert m.outputs[0].shape == (24 + 3 + 1,)


def test_reshape_is_a_view(tmp_path):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    op = implementation("Reshape", 1)(all_specs()[("Reshape", 1)],
                                      parse_attrs(all_specs()[("Reshape", 1)], {"special_zero": "true"})[0])
    out = op.run(x, np.array([0, -1]))
    assert out.shape == (2, 12) and np.shares_memory(out, x)


# ---------------------------------------------------------------- Transpose models

@pytest.mark.parametrize("shape,order", [
    ([2, 3, 4], [2, 0, 1]), ([2, 3, 4], [0, 1, 2]), ([2, 3, 4, 5], [1, 0, 3, 2]), ([2, 3, 4, 5], [3, 2, 1, 0]),
    ([2, 3], [1, 0]), ([7], [0]), ([2, 3, 4], []), ([2, 3, 4, 5], []), ([1, 2, 1, 3, 1], [4, 3, 2, 1, 0]),
], ids=str)
def test_transpose(shape, order, tmp_path):
    x = param(shape)
    m = model(ops1.transpose(x, const(order)), [x])
    compare(m, [sample(shape)], tmp_path)


@pytest.mark.parametrize("dtype", sorted(DATA_TYPES))
@pytest.mark.parametrize("order_dtype", [np.int32, np.int64, np.uint8])
def test_transpose_element_types(dtype, order_dtype, tmp_path):
    x = param([2, 3, 4], DATA_TYPES[dtype])
    m = model(ops1.transpose(x, const([1, 2, 0], order_dtype)), [x])
    compare(m, [sample([2, 3, 4], DATA_TYPES[dtype])], tmp_path)


def test_transpose_dynamic_dims_and_runtime_order(tmp_path):
    """A constant order is bound at load (the generic `run` is left to a runtime order)."""
    from irrun.ops.reshaping import Transpose
    x, o = param([-1, 3, -1]), param([3], np.int64, "o")
    m = model([ops1.transpose(x, const([2, 0, 1])), ops1.transpose(x, o)], [x, o])
    compare(m, [sample([2, 3, 5]), np.array([1, 2, 0], np.int64)], tmp_path)
    loaded = irrun.load(save(m, tmp_path))
    assert [format_shape(o.shape) for o in loaded.outputs] == ["[?,?,3]", "[?,?,?]"]
    kernels = [s.kernel for s in loaded._plan.steps if s.node.layer.op_type == "Transpose"]
    assert sorted(getattr(k, "__func__", None) is Transpose.run for k in kernels) == [False, True]


# ---------------------------------------------------------------- Squeeze / Unsqueeze models

@pytest.mark.parametrize("shape,axes", [
    ([1, 3, 1, 2], [0, 2]), ([1, 3, 1, 2], [-2]), ([1, 3, 1, 2], 0), ([1], [0]), ([2, 3], [0]),
    ([1, 3, 1], [0, -1]), ([2, 1, 1], [1, -2]),
], ids=str)
@pytest.mark.parametrize("version", [1, 15])
def test_squeeze(shape, axes, version, tmp_path):
    x = param(shape)
    squeeze = ops1.squeeze if version == 1 else ops15.squeeze
    m = model(squeeze(x, const(axes)), [x])
    compare(m, [sample(shape)], tmp_path)


@pytest.mark.parametrize("dtype", ["f16", "i64", "u8", "boolean"])
@pytest.mark.parametrize("axes_dtype", [np.int32, np.int64])
def test_squeeze_element_types(dtype, axes_dtype, tmp_path):
    x = param([1, 3, 1], DATA_TYPES[dtype])
    m = model(ops1.squeeze(x, const([0, 2], axes_dtype)), [x])
    compare(m, [sample([1, 3, 1], DATA_TYPES[dtype])], tmp_path)


def squeeze1_without_axes(xml):
    """OpenVINO's Python API builds Squeeze-15 without axes but not Squeeze-1: retarget the XML."""
    text = xml.read_text()
    text = re.sub(r'(type="Squeeze" version=")opset15(">)\s*<data allow_axis_skip="false" />', r"\1opset1\2",
                  text)
    assert 'version="opset1">' in text and "allow_axis_skip" not in text
    xml.write_text(text)
    return xml


@pytest.mark.parametrize("version", [1, 15])
def test_squeeze_without_axes(version, tmp_path):
    x = param([1, 3, 1, 2])
    m = model(ops15.squeeze(x), [x])
    xml = save(m, tmp_path)
    if version == 1:
        squeeze1_without_axes(xml)
    data = sample([1, 3, 1, 2])
    (expected,) = run_openvino(xml, [data])
    assert irrun.validate(xml).ok
    (got,) = irrun.load(xml).infer([data]).values()
    assert got.shape == expected.shape == (3, 2)
    np.testing.assert_array_equal(got, expected)


def test_squeeze_dynamic_dims(tmp_path):
    """A named dynamic dim is assumed to be 1 at load (output rank 2)."""
    x = param([-1, 3, -1])
    m = model(ops1.squeeze(x, const([0])), [x])
    compare(m, [sample([1, 3, 5])], tmp_path)
    assert format_shape(irrun.load(save(m, tmp_path)).outputs[0].shape) == "[3,?]"


def test_squeeze15_allow_axis_skip_follows_reference(tmp_path):
    """allow_axis_skip on a dynamic dim gives a dynamic output rank, which the CPU plugin
    refuses to compile ("doesn't support Squeeze operation with dynamic rank");
    OpenVINO's reference evaluation squeezes the dim when it is 1 and keeps it otherwise."""
    x = param([-1, 3])
    net = model(ops15.squeeze(x, const([0]), True), [x])
    m = irrun.load(save(net, tmp_path))
    assert m.outputs[0].shape is None
    for batch in (1, 2):
        data = sample([batch, 3])
        (expected,) = evaluate_reference(net, [data])
        (got,) = m.infer([data]).values()
        assert got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)


def test_squeeze_of_a_dynamic_dim_that_is_not_1_keeps_it(tmp_path):
    """At load the named dynamic dim is taken to be 1 (output [3]).  Fed a 2 there,
    the CPU plugin fails ("Can not clone with new dims"); OpenVINO's reference
    evaluation and the spec keep the dim ("ignored and copied as is"), as irrun does."""
    x = param([-1, 3])
    net = model(ops1.squeeze(x, const([0])), [x])
    m = irrun.load(save(net, tmp_path))
    assert m.outputs[0].shape == (3,)
    data = sample([2, 3])
    (expected,) = evaluate_reference(net, [data])
    (got,) = m.infer([data]).values()
    assert got.shape == expected.shape == (2, 3)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("shape,axes", [
    ([2, 3], [0]), ([2, 3], [0, 3]), ([2, 3], [-1]), ([2, 3], [-1, 0]), ([2, 3], [1, 1]), ([2, 3], [0, -4]),
    ([2, 3, 4], [4, -1]), ([], [0]), ([], 0), ([3], [0, 1, 2]), ([2, 3], [0, 0, 3]),
], ids=str)
def test_unsqueeze(shape, axes, tmp_path):
    x = param(shape)
    m = model(ops1.unsqueeze(x, const(axes)), [x])
    compare(m, [sample(shape)], tmp_path)


@pytest.mark.parametrize("dtype", ["f16", "i32", "i64", "boolean"])
@pytest.mark.parametrize("axes_dtype", [np.int32, np.int64])
def test_unsqueeze_element_types_and_dynamic_dims(dtype, axes_dtype, tmp_path):
    x = param([-1, 3], DATA_TYPES[dtype])
    m = model(ops1.unsqueeze(x, const([-1, 1], axes_dtype)), [x])
    compare(m, [sample([4, 3], DATA_TYPES[dtype])], tmp_path)


# ---------------------------------------------------------------- Concat models

@pytest.mark.parametrize("shapes,axis", [
    ([[2, 3], [2, 4]], 1), ([[2, 3], [2, 4]], -1), ([[2, 3], [5, 3]], 0), ([[2, 3], [5, 3]], -2),
    ([[1, 2, 3], [1, 4, 3], [1, 1, 3], [1, 2, 3]], 1), ([[2, 3, 4], [2, 3, 1], [2, 3, 2]], -1),
    ([[4], [0], [2]], 0), ([[3, 2]], 1),
], ids=str)
def test_concat(shapes, axis, tmp_path):
    xs = [param(s, name=f"x{i}") for i, s in enumerate(shapes)]
    m = model(ops1.concat(xs, axis), xs)
    compare(m, [sample(s) for s in shapes], tmp_path)


@pytest.mark.parametrize("axis", [1, -3])
def test_concat_spec_example(axis, tmp_path):
    """The spec's two examples: 8 + 16 + 32 channels give 56 (its comment says 48)."""
    shapes = [[1, 8, 50, 50], [1, 16, 50, 50], [1, 32, 50, 50]]
    xs = [param(s, name=f"x{i}") for i, s in enumerate(shapes)]
    got = compare(model(ops1.concat(xs, axis), xs), [sample(s) for s in shapes], tmp_path)
    assert next(iter(got.values())).shape == (1, 56, 50, 50)


@pytest.mark.parametrize("dtype", sorted(DATA_TYPES))
def test_concat_element_types(dtype, tmp_path):
    shapes = [[2, 1], [2, 3], [2, 2]]
    xs = [param(s, DATA_TYPES[dtype], f"x{i}") for i, s in enumerate(shapes)]
    m = model(ops1.concat(xs, -1), xs)
    compare(m, [sample(s, DATA_TYPES[dtype]) for s in shapes], tmp_path)


def test_concat_dynamic_dims(tmp_path):
    xs = [param([-1, 3], name="a"), param([-1, -1], name="b"), param([2, 3], name="c")]
    m = model(ops1.concat(xs, 0), xs)
    compare(m, [sample([4, 3]), sample([1, 3]), sample([2, 3])], tmp_path)
    assert format_shape(irrun.load(save(m, tmp_path)).outputs[0].shape) == "[2..,3]"


def test_concat_of_shape_values_with_constants(tmp_path):
    """Shape arithmetic on i64: ShapeOf of a dynamic tensor joined with constants."""
    x = param([-1, 3, 4])
    target = ops1.concat([const([1]), ops1.shape_of(x), const([-1, 7])], 0)
    m = model(target, [x])
    compare(m, [sample([5, 3, 4])], tmp_path)


# ---------------------------------------------------------------- ShapeOf models

@pytest.mark.parametrize("shape,feed", [([2, 3, 4], [2, 3, 4]), ([-1, 3, -1], [5, 3, 2]), ([-1], [0]),
                                        ([], [])], ids=str)
@pytest.mark.parametrize("version,output_type", [(1, "i64"), (3, "i32"), (3, "i64")])
def test_shapeof(shape, feed, version, output_type, tmp_path):
    x = param(shape)
    node = ops1.shape_of(x) if version == 1 else ops3.shape_of(x, output_type)
    # A ShapeOf of a Parameter alone folds in OpenVINO; a Relu keeps x an input.
    m = model([node, ops1.relu(x)], [x])
    compare(m, [sample(feed)], tmp_path)


@pytest.mark.parametrize("version,output_type", [(1, "i64"), (3, "i32")])
def test_shapeof_of_dynamic_rank(version, output_type, tmp_path):
    """The CPU plugin compiles no dynamic-rank input; OpenVINO's reference evaluation is the oracle."""
    x = param(DYN)
    node = ops1.shape_of(x) if version == 1 else ops3.shape_of(x, output_type)
    net = model(node, [x])
    m = irrun.load(save(net, tmp_path))
    assert format_shape(m.outputs[0].shape) == "[?]"
    for shape in ([2, 1, 3], [], [4]):
        data = sample(shape)
        (expected,) = evaluate_reference(net, [data])
        (got,) = m.infer([data]).values()
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", ["f16", "i64", "u8", "boolean"])
def test_shapeof_of_every_element_type(dtype, tmp_path):
    x = param([3, -1], DATA_TYPES[dtype])
    m = model([ops3.shape_of(x, "i32"), ops1.convert(x, ov.Type.f32)], [x])
    compare(m, [sample([3, 2], DATA_TYPES[dtype])], tmp_path)


# ---------------------------------------------------------------- validate: defective IRs

def errors_of(xml):
    report = irrun.validate(xml)
    return [(d.code, d.layer.type if d.layer else None, d.message) for d in report.errors], report


def test_reshape_wrong_element_count_names_the_layer(tmp_path):
    x = param([2, 3, 4])
    m = model(ops1.reshape(x, const([4, 6]), False, name="to_matrix"), [x])
    xml = save(m, tmp_path)
    # The target lives in the .bin as int64 [4, 6]; make it [5, 5].
    bin_path = xml.with_suffix(".bin")
    data = bin_path.read_bytes()
    bin_path.write_bytes(data.replace(np.array([4, 6], np.int64).tobytes(), np.array([5, 5], np.int64).tobytes()))
    errors, report = errors_of(xml)
    assert any(code == "E-SHAPE" and t == "Reshape" for code, t, _ in errors), report.diagnostics
    text = "\n".join(d.format() for d in report.errors)
    assert "to_matrix" in text and "[2,3,4] (24 elements)" in text and "[5,5] (25 elements)" in text
    with pytest.raises(irrun.errors.ModelError, match="to_matrix"):
        irrun.load(xml)


def test_reshape_special_zero_count_mismatch_is_an_error(tmp_path):
    """OpenVINO skips its element-count check when special_zero copies a dim:
    [2,3,4] -> [0,5] loads, and the CPU plugin returns [2,5] read from the first
    10 elements (with [0,13] it reads past the buffer).  irrun reports it."""
    x = param([2, 3, 4])
    m = model(ops1.reshape(x, const([0, 12]), True, name="bad"), [x])
    xml = save(m, tmp_path)
    bin_path = xml.with_suffix(".bin")
    bin_path.write_bytes(bin_path.read_bytes().replace(np.array([0, 12], np.int64).tobytes(),
                                                       np.array([0, 5], np.int64).tobytes()))
    replace_in_ir(xml, "<dim>12</dim>", "<dim>5</dim>")
    replace_in_ir(xml, "<dim>12</dim>", "<dim>5</dim>")   # the Result's input port too
    assert ov.Core().read_model(str(xml)).outputs[0].get_partial_shape() == ov.PartialShape([2, 5])
    errors, report = errors_of(xml)
    assert [(c, t) for c, t, _ in errors] == [("E-SHAPE", "Reshape")], report.diagnostics
    assert "(24 elements)" in errors[0][2] and "(10 elements)" in errors[0][2]


def test_reshape_error_at_run_time_names_the_layer(tmp_path):
    x, t = param([2, 3, 4]), param([2], np.int64, "t")
    net = model(ops1.reshape(x, t, False, name="runtime_reshape"), [x, t])
    m = irrun.load(save(net, tmp_path))
    with pytest.raises(irrun.errors.IrrunError, match=r"runtime_reshape.*\[2,3,4\] \(24 elements\).*25 elements"):
        m.infer([sample([2, 3, 4]), np.array([5, 5], np.int64)])


def test_declared_output_shape_is_checked(tmp_path):
    x = param([2, 3, 4])
    m = model(ops1.transpose(x, const([2, 0, 1]), name="perm"), [x])
    xml = save(m, tmp_path)
    text = xml.read_text()
    # The Transpose output is declared [4,2,3]; claim [4,3,2].
    block = re.search(r'name="perm".*?</layer>', text, re.S).group(0)
    fixed = block.replace("<dim>2</dim>\n\t\t\t\t\t<dim>3</dim>\n\t\t\t\t</port>\n\t\t\t</output>",
                          "<dim>3</dim>\n\t\t\t\t\t<dim>2</dim>\n\t\t\t\t</port>\n\t\t\t</output>")
    assert fixed != block
    xml.write_text(text.replace(block, fixed))
    errors, report = errors_of(xml)
    assert ("E-DECLARED-SHAPE", "Transpose") in [(c, t) for c, t, _ in errors], report.diagnostics


def test_concat_mismatched_dims_names_the_layer_and_input(tmp_path):
    a, b = param([2, 3], name="a"), param([2, 4], name="b")
    net = model(ops1.concat([a, b], 1, name="joined"), [a, b])
    xml = save(net, tmp_path)
    # Make input b [5,4]: its Parameter, and the Concat's declared input.
    replace_in_ir(xml, 'shape="2,4"', 'shape="5,4"')
    text = xml.read_text()
    xml.write_text(text.replace("<dim>2</dim>\n\t\t\t\t\t<dim>4</dim>", "<dim>5</dim>\n\t\t\t\t\t<dim>4</dim>"))
    errors, report = errors_of(xml)
    concat_errors = [m for c, t, m in errors if t == "Concat" and c == "E-SHAPE"]
    assert concat_errors, report.diagnostics
    assert "input 1" in concat_errors[0] and "[5,4]" in concat_errors[0] and "axis 1" in concat_errors[0]
    assert "joined" in "\n".join(d.format() for d in report.errors)


def test_transpose_invalid_order_names_the_layer(tmp_path):
    x = param([2, 3, 4])
    net = model(ops1.transpose(x, const([2, 0, 1]), name="perm"), [x])
    xml = save(net, tmp_path)
    bin_path = xml.with_suffix(".bin")
    bin_path.write_bytes(bin_path.read_bytes().replace(np.array([2, 0, 1], np.int64).tobytes(),
                                                       np.array([2, 0, 0], np.int64).tobytes()))
    errors, report = errors_of(xml)
    assert any(t == "Transpose" and "not a permutation" in m for _, t, m in errors), report.diagnostics


def test_missing_attributes_take_openvino_defaults(tmp_path):
    """Concat without axis concatenates on 0 and Reshape without special_zero treats 0 literally,
    as OpenVINO's IR reader does; ShapeOf-3 without output_type is an error there and here."""
    a, b = param([2, 3], name="a"), param([2, 3], name="b")
    shape_source = param([2, 3], name="s")
    net = model([ops1.concat([a, b], 1), ops3.shape_of(shape_source, "i32")], [a, b, shape_source])
    xml = save(net, tmp_path)
    replace_in_ir(xml, '<data axis="1" />', "")
    replace_in_ir(xml, "<dim>2</dim>\n\t\t\t\t\t<dim>6</dim>", "<dim>4</dim>\n\t\t\t\t\t<dim>3</dim>", count=2)
    expected = ov.Core().read_model(str(xml))
    assert str(expected.outputs[0].get_partial_shape()) == "[4,3]"
    m = irrun.load(xml)
    assert m.outputs[0].shape == (4, 3)
    replace_in_ir(xml, 'output_type="i32"', "")
    with pytest.raises(RuntimeError):
        ov.Core().read_model(str(xml))
    errors, _ = errors_of(xml)
    assert ("E-ATTR-MISSING", "ShapeOf") in [(c, t) for c, t, _ in errors]
