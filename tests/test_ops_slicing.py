"""Split, VariadicSplit, Slice, StridedSlice, SliceScatter, Broadcast, Tile and Pad against OpenVINO.

As in test_ops_movement.py: whole models run by the CPU plugin and by irrun
(`compare`), and shape functions alone, where OpenVINO's partial-shape
inference of a node built in Python is the oracle for `Op.infer` (dynamic
dims, intervals, dynamic rank, values known or not, and the errors).
"""
import itertools
import re

import numpy as np
import openvino as ov
import openvino.opset1 as ops1
import openvino.opset3 as ops3
import openvino.opset8 as ops8
import openvino.opset12 as ops12
import openvino.opset15 as ops15
import pytest

from irxml import hand_ir
from ovutil import (
    _CORE, as_tensor_type, assert_close, check_shape_function, compare, const, evaluate_reference, model, param,
    replace_in_ir, run_openvino, save
)
from test_ops_movement import DATA_TYPES, DYN, errors_of, sample
import irrun
from irrun.errors import ShapeError
from irrun.registry import implementation
from irrun.shapes import format_shape
from irrun.spec import all_specs, parse_attrs

D = ov.Dimension
I64_MAX, I64_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min


def irrun_op(type_name, version, attrs=None):
    """irrun's op object (for its kernel and for ops with several outputs); list attributes as lists."""
    spec = all_specs()[(type_name, version)]
    parsed, problems = parse_attrs(spec, {k: ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)
                                          for k, v in (attrs or {}).items()})
    assert not problems, problems
    return implementation(type_name, version)(spec, parsed)


def check_all_outputs(ov_build, type_name, version, attrs, args):
    """check_shape_function for ops with several outputs: every output's shape must agree."""
    inputs = [as_tensor_type(a.output(0)) for a in args]
    try:
        node = ov_build(*args)
        expected = [str(node.get_output_partial_shape(i)) for i in range(node.get_output_size())]
    except RuntimeError as exc:
        with pytest.raises(ShapeError):
            got = irrun_op(type_name, version, attrs).infer(inputs)
            pytest.fail(f"OpenVINO rejects this ({str(exc).splitlines()[-1]}), irrun infers "
                        f"{[format_shape(t.shape) for t in got]}")
        return
    got = irrun_op(type_name, version, attrs).infer(inputs)
    assert [format_shape(t.shape) for t in got] == expected


def outputs_of(node):
    return [node.output(i) for i in range(node.get_output_size())]


# ---------------------------------------------------------------- Split

SPLIT_SHAPES = [
    # data shape, axis, num_splits
    ([6, 4], 0, 3), ([6, 4], -1, 2), ([6, 4], 1, 3), ([-1, 4], 0, 2), ([D(2, 10), 4], 0, 3),
    ([D(6, -1), 4], 0, 3), ([D(1, 2), 4], 0, 3), ([0, 4], 0, 2), (DYN, 0, 2), ([6, 4], 2, 2),
    ([6, 4], -3, 2), ([6], 0, 1), ([D(7, 20)], 0, 7),
]


@pytest.mark.parametrize("shape,axis,parts", SPLIT_SHAPES, ids=str)
def test_split_shape_function(shape, axis, parts):
    check_all_outputs(lambda x, a: ops1.split(x, a, parts), "Split", 1, {"num_splits": parts},
                      [param(shape), const(axis)])


@pytest.mark.parametrize("axis", [np.array(1, np.float32), np.array([1]), np.array(1, np.uint8),
                                  np.array(True)], ids=lambda a: f"{a.dtype}{list(a.shape)}")
def test_split_axis_must_be_an_integer_scalar(axis):
    check_all_outputs(lambda x, a: ops1.split(x, a, 2), "Split", 1, {"num_splits": 2},
                      [param([6, 4]), const(axis, axis.dtype)])


def test_split_shape_function_unknown_axis():
    check_all_outputs(lambda x, a: ops1.split(x, a, 2), "Split", 1, {"num_splits": 2},
                      [param([6, 4]), param([], np.int64, "a")])


@pytest.mark.parametrize("shape,axis,parts", [([6, 4], 0, 3), ([6, 4], -1, 4), ([2, 3, 4], 1, 1),
                                              ([0, 4], 0, 2), ([1, 6, 1], -2, 6)], ids=str)
def test_split(shape, axis, parts, tmp_path):
    x = param(shape)
    compare(model(outputs_of(ops1.split(x, const(axis), parts)), [x]), [sample(shape)], tmp_path)


@pytest.mark.parametrize("dtype", sorted(DATA_TYPES))
def test_split_element_types(dtype, tmp_path):
    x = param([2, 6], DATA_TYPES[dtype])
    m = model(outputs_of(ops1.split(x, const(1, np.int32), 3)), [x])
    compare(m, [sample([2, 6], DATA_TYPES[dtype])], tmp_path)


def test_split_dynamic_dims(tmp_path):
    x = param([-1, D(4, 12)])
    m = model(outputs_of(ops1.split(x, const(1), 4)), [x])
    compare(m, [sample([3, 8])], tmp_path)
    assert_output_shapes_as_openvino(m, tmp_path)


def test_split_outputs_are_views():
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    parts = irrun_op("Split", 1, {"num_splits": 3}).run(x, np.array(1))
    assert all(np.shares_memory(p, x) for p in parts)


def test_split_at_run_time_names_the_layer(tmp_path):
    x = param([-1, 4])
    net = model(outputs_of(ops1.split(x, const(0), 2, name="halves")), [x])
    m = irrun.load(save(net, tmp_path))
    with pytest.raises(irrun.errors.IrrunError, match=r"halves.*5 elements.*num_splits=2"):
        m.infer([sample([5, 4])])


# ---------------------------------------------------------------- VariadicSplit

VSPLIT_SHAPES = [
    # data shape, axis, split_lengths
    ([6, 4], 0, [1, -1, 2]), ([6, 4], 1, [4, 0]), ([6, 4], -1, [-1]), ([6, 4], 0, [2, 2]),
    ([6, 4], 0, [2, 5]), ([6, 4], 0, [-1, -1]), ([6, 4], 0, [-2, 8]),
    ([-1, 4], 0, [1, -1]), ([-1, 4], 0, [2, 3]), ([D(2, 10), 4], 0, [1, -1]), ([D(2, 10), 4], 0, [3, -1]),
    ([D(4, -1), 4], 0, [-1, 2]), (DYN, 0, [1, -1]), ([6, 4], 2, [1, -1]), ([6, 4], [1], [1, 3]),
]


@pytest.mark.parametrize("shape,axis,lengths", VSPLIT_SHAPES, ids=str)
def test_variadic_split_shape_function(shape, axis, lengths):
    check_all_outputs(ops1.variadic_split, "VariadicSplit", 1, {}, [param(shape), const(axis), const(lengths)])


@pytest.mark.parametrize("shape,lengths", [([6, 4], [7, -1]), ([D(2, 10), 4], [12, -1]), ([D(2, 10), 4], [11])],
                         ids=str)
def test_variadic_split_shape_function_stricter_than_openvino(shape, lengths):
    """No input can be split so: OpenVINO still infers shapes ([7,4] and [?,4] for [6,4] split
    as [7,-1], where the CPU plugin then reads past the input); irrun reports the layer."""
    node = ops1.variadic_split(param(shape), const(0), const(lengths))
    assert node.get_output_partial_shape(0)[0] == D(lengths[0])
    with pytest.raises(ShapeError, match="split_lengths"):
        irrun_op("VariadicSplit", 1).infer([as_tensor_type(n.output(0)) for n in
                                            (param(shape), const(0), const(lengths))])


@pytest.mark.parametrize("axis_dtype,lengths_dtype", [(np.float32, np.int64), (np.int64, np.float32),
                                                      (np.uint8, np.int32)], ids=str)
def test_variadic_split_index_types(axis_dtype, lengths_dtype):
    """Unlike Split, OpenVINO reads a float axis and float lengths here (truncated)."""
    check_all_outputs(ops1.variadic_split, "VariadicSplit", 1, {},
                      [param([6, 4]), const(1, axis_dtype), const([1.5, 3], lengths_dtype)])


@pytest.mark.parametrize("known", ["axis", "lengths"])
def test_variadic_split_shape_function_unknown_inputs(known):
    axis = const(1) if known == "axis" else param([], np.int64, "a")
    lengths = const([1, -1]) if known == "lengths" else param([2], np.int64, "l")
    check_all_outputs(ops1.variadic_split, "VariadicSplit", 1, {}, [param([6, D(2, 8)]), axis, lengths])


@pytest.mark.parametrize("shape,axis,lengths", [([6, 4], 0, [1, -1, 2]), ([6, 4], -1, [4, 0]), ([6, 4], 1, [-1]),
                                                ([3, 5, 2], 1, [0, 5, 0]), ([3, 5, 2], -2, [2, -1, 1])], ids=str)
def test_variadic_split(shape, axis, lengths, tmp_path):
    x = param(shape)
    m = model(outputs_of(ops1.variadic_split(x, const(axis), const(lengths))), [x])
    compare(m, [sample(shape)], tmp_path)


@pytest.mark.parametrize("dtype", ["f16", "i32", "u8", "boolean"])
def test_variadic_split_element_types_and_dynamic_dims(dtype, tmp_path):
    x = param([-1, 5], DATA_TYPES[dtype])
    m = model(outputs_of(ops1.variadic_split(x, const(1, np.int32), const([2, -1], np.int32))), [x])
    compare(m, [sample([3, 5], DATA_TYPES[dtype])], tmp_path)


# ---------------------------------------------------------------- Slice

SLICE_BOUNDS = [
    # start, stop, step on one axis
    (1, 8, 1), (1, 8, 2), (-100, 100, 1), (9, -11, -1), (9, 0, -1), (9, -10, -1), (9, -11, -2), (100, -100, -1),
    (-3, -1, 1), (-1, -4, -1), (-10, -10, -1), (-10, I64_MIN, -1), (I64_MAX, I64_MIN, -1), (I64_MIN, I64_MAX, 1),
    (0, I64_MAX, 3), (-3, I64_MAX, 1), (2, 2, 1), (5, 2, 1), (2, 5, -1), (3, -20, -3), (-2, 2, 1), (I64_MAX, 0, -2),
    (0, -1, 1), (I64_MIN, 2, 1), (-5, I64_MIN, -2), (4, 3, -1),
]
SLICE_DIMS = [10, 3, 0, -1, D(2, 12), D(4, -1), D(0, 3)]


@pytest.mark.parametrize("dim", SLICE_DIMS, ids=str)
@pytest.mark.parametrize("start,stop,step", SLICE_BOUNDS, ids=str)
def test_slice_shape_function_one_axis(dim, start, stop, step):
    args = [param([dim, 2]), const([start]), const([stop]), const([step]), const([0])]
    check_shape_function(ops8.slice, "Slice", 8, {}, args)


SLICE_SHAPES = [
    # data shape, start, stop, step, axes (None: no axes input)
    ([4, 5, 6], [1, 2], [3, 5], [1, 2], None), ([4, 5, 6], [1, 2], [3, 5], [1, 2], [2, 0]),
    ([4, 5, 6], [1], [3], [1], [-1]), ([4, 5, 6], [1, 1], [3, 3], [1, 1], [0, 0]), ([4, 5, 6], [1], [3], [0], [1]),
    ([4, 5, 6], [1], [3], [1], [3]), ([4, 5, 6], [1, 1, 1, 1], [3, 3, 3, 3], [1, 1, 1, 1], None),
    ([4, 5, 6], [1, 1], [3], [1, 1], None), ([4, 5, 6], [], [], [], None), (DYN, [1], [3], [1], [0]),
    ([4, 5, 6], [1], [3], [1], [-4]),
]


@pytest.mark.parametrize("shape,start,stop,step,axes", SLICE_SHAPES, ids=str)
def test_slice_shape_function(shape, start, stop, step, axes):
    args = [param(shape), const(start), const(stop), const(step)] + ([] if axes is None else [const(axes)])
    check_shape_function(ops8.slice, "Slice", 8, {}, args)


@pytest.mark.parametrize("unknown", ["start", "step", "axes", "all"])
def test_slice_shape_function_unknown_values(unknown):
    values = {"start": [1, 0], "stop": [3, 4], "step": [1, 2], "axes": [2, 0]}
    args = [param([4, D(2, 6), 8, -1])] + [param([2], np.int64, name) if unknown in (name, "all") else const(v)
                                           for name, v in values.items()]
    check_shape_function(ops8.slice, "Slice", 8, {}, args)


@pytest.mark.parametrize("name", ["start", "stop", "step", "axes"])
def test_slice_index_inputs_must_be_integers(name):
    values = {"start": [1], "stop": [3], "step": [1], "axes": [0]}
    args = [param([4, 5])] + [const(v, np.float32 if n == name else np.int32) for n, v in values.items()]
    check_shape_function(ops8.slice, "Slice", 8, {}, args)


SLICE_RUNS = [
    ([10], [1], [8], [1], [0]), ([10], [1], [8], [2], None), ([10], [-100], [100], [1], [0]),
    ([10], [9], [-11], [-1], [0]), ([10], [9], [0], [-1], [0]), ([10], [9], [-10], [-1], [0]),
    ([10], [9], [-11], [-2], [0]), ([10], [100], [-100], [-1], [0]), ([2, 5], [0, 1], [2, 4], [1, 2], [0, 1]),
    ([20, 10, 5], [0, 0, 0], [4, 10, 5], [1, 1, 1], [0, 1, 2]), ([20, 10, 5], [0, 0], [4, 10], [1, 1], [0, 1]),
    ([4, 5, 6], [5, -1], [-100, 0], [-2, -1], [1, 2]), ([4, 5, 6], [-10], [I64_MIN], [-1], [0]),
    ([4, 5, 6], [I64_MAX, 1], [I64_MIN, I64_MAX], [-3, 2], [2, -3]), ([4, 5, 6], [2], [2], [1], [1]),
    ([4, 5, 6], [3, 1], [1, 3], [1, -1], None), ([4, 5, 6], [-3], [I64_MAX], [1], [-1]),
]


@pytest.mark.parametrize("shape,start,stop,step,axes", SLICE_RUNS, ids=str)
def test_slice(shape, start, stop, step, axes, tmp_path):
    """The spec's examples (the first eleven) and more: clamping, reverse steps, INT64 bounds, empty results."""
    x = param(shape)
    m = model(ops8.slice(x, const(start), const(stop), const(step), None if axes is None else const(axes)), [x])
    compare(m, [sample(shape)], tmp_path)


def test_slice_reverse_from_before_the_start_selects_element_0(tmp_path):
    """start -10 on 10 elements with step -1 selects element 0 (Python's slicing: nothing)."""
    x = param([10])
    m = model(ops8.slice(x, const([-11]), const([-20]), const([-1])), [x])
    got = compare(m, [np.arange(10, dtype=np.float32)], tmp_path)
    assert next(iter(got.values())).tolist() == [0.0]
    assert list(range(10))[-11:-20:-1] == []


INDEX_TYPES = [np.int32, np.int64, np.uint8, np.int8]


@pytest.mark.parametrize("dtype,index_dtype", list(zip(sorted(DATA_TYPES), itertools.cycle(INDEX_TYPES))), ids=str)
def test_slice_element_types(dtype, index_dtype, tmp_path):
    x = param([4, 6], DATA_TYPES[dtype])
    step = [2, 1] if np.dtype(index_dtype).kind == "u" else [2, -1]
    m = model(ops8.slice(x, const([1, 5], index_dtype), const([4, 0], index_dtype), const(step, index_dtype),
                         const([0, 1], index_dtype)), [x])
    compare(m, [sample([4, 6], DATA_TYPES[dtype])], tmp_path)


def test_slice_dynamic_shape_and_runtime_bounds(tmp_path):
    x = param([-1, D(2, 9), 3])
    start, stop = param([2], np.int64, "start"), param([2], np.int64, "stop")
    fixed = ops8.slice(x, const([-3, 1]), const([I64_MAX, 100]), const([1, 2]), const([0, 1]))
    runtime = ops8.slice(x, start, stop, const([1, -1]), const([1, 0]))
    m = model([fixed, runtime], [x, start, stop])
    for shape, lo, hi in [([5, 7, 3], [1, 4], [5, 0]), ([1, 2, 3], [0, -1], [1, -5]), ([0, 4, 3], [0, 0], [4, 0])]:
        compare(m, [sample(shape), np.array(lo), np.array(hi)], tmp_path)
    assert_output_shapes_as_openvino(m, tmp_path)


def test_slice_is_a_view():
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    out = irrun_op("Slice", 8).run(x, np.array([3, 1]), np.array([0, 5]), np.array([-1, 2]))
    assert out.shape == (3, 2) and np.shares_memory(out, x)


def test_slice_of_a_shape_folds_at_load(tmp_path):
    """ShapeOf -> Slice -> Concat -> Reshape: shape arithmetic on i64 resolves while loading."""
    x, y = param([2, 3, 4]), param([6, 4], name="y")
    dims = ops8.slice(ops3.shape_of(x), const([-1]), const([-3]), const([-1]))
    target = ops1.concat([const([-1]), dims], 0)
    m = model([ops1.reshape(y, target, False), ops1.relu(x)], [x, y])
    compare(m, [sample([2, 3, 4]), sample([6, 4])], tmp_path)
    assert irrun.load(save(m, tmp_path)).outputs[0].shape == (2, 4, 3)


# ---------------------------------------------------------------- StridedSlice

MASK_KINDS = ("plain", "begin", "end", "both", "new", "shrink", "ellipsis")


def masks_of(kinds):
    """The five StridedSlice masks that give entry i the role kinds[i]."""
    def mask(*names):
        return [int(k in names) for k in kinds]
    return {"begin_mask": mask("begin", "both"), "end_mask": mask("end", "both"), "new_axis_mask": mask("new"),
            "shrink_axis_mask": mask("shrink"), "ellipsis_mask": mask("ellipsis")}


def strided_slice(x, begin, end, strides, masks, **kw):
    return ops1.strided_slice(x, begin, end, strides, masks["begin_mask"], masks["end_mask"], masks["new_axis_mask"],
                              masks["shrink_axis_mask"], masks["ellipsis_mask"], **kw)


MASK_COMBOS = [k for k in itertools.product(MASK_KINDS, repeat=3) if k.count("ellipsis") <= 1]
# Valid for every axis of [3, 4, 5], so a shrink entry may land on any of them.
BEGIN, END, STRIDES = [1, -2, 2], [3, 3, 0], [1, 1, -2]


@pytest.mark.parametrize("shape", [[3, 4, 5], [-1, D(2, 6), 5], [D(3, -1), 4, D(0, 5)]], ids=str)
def test_strided_slice_shape_function_every_mask_combination(shape):
    """Every role (plain, begin/end masks, new axis, shrink, ellipsis) at every one of three entries."""
    for kinds in MASK_COMBOS:
        masks = masks_of(kinds)
        check_shape_function(lambda *a: strided_slice(*a, masks), "StridedSlice", 1, masks,
                             [param(shape), const(BEGIN), const(END), const(STRIDES)])


def test_strided_slice_kernel_every_mask_combination():
    """The kernel against OpenVINO's reference evaluation, for every combination of masks above."""
    data = sample([3, 4, 5])
    for kinds in MASK_COMBOS:
        masks = masks_of(kinds)
        x = param([3, 4, 5])
        m = model(strided_slice(x, const(BEGIN), const(END), const(STRIDES), masks), [x])
        (expected,) = evaluate_reference(m, [data])
        got = irrun_op("StridedSlice", 1, masks).run(data, np.array(BEGIN), np.array(END), np.array(STRIDES))
        assert got.shape == expected.shape and np.array_equal(got, expected), kinds


STRIDED_SHAPES = [
    # shape, begin, end, strides, masks by kind
    ([4, 5], [1], [3], [1], ("plain",)), ([4, 5], [0, 0, 0], [1, 1, 1], [1, 1, 1], ("plain",) * 3),
    ([4, 5], [0, 0, 0], [1, 1, 1], [1, 1, 1], ("new", "plain", "plain")),
    ([4, 5], [0, 0], [1, 1], [1, 1], ("ellipsis", "ellipsis")), ([4, 5], [0], [1], [0], ("plain",)),
    ([4, 5], [0, 0, 0], [1, 1, 1], [1, 1, 1], ("ellipsis", "plain", "plain")),
    ([4, 5], [0, 0, 0, 0], [1, 1, 1, 1], [1, 1, 1, 1], ("ellipsis", "new", "plain", "new")),
    ([2, 3, 4, 5], [1, 0, 2], [2, 0, 4], [1, 1, 1], ("shrink", "ellipsis", "plain")),
    ([2, 3, 4, 5], [0, 0], [0, 0], [1, 1], ("ellipsis", "new")), (DYN, [0], [1], [1], ("plain",)),
    ([4, 5], [], [], [], ()), ([], [0], [0], [1], ("new",)),
]


@pytest.mark.parametrize("shape,begin,end,strides,kinds", STRIDED_SHAPES, ids=str)
def test_strided_slice_shape_function(shape, begin, end, strides, kinds):
    masks = masks_of(kinds)
    check_shape_function(lambda *a: strided_slice(*a, masks), "StridedSlice", 1, masks,
                         [param(shape), const(begin), const(end), const(strides)])


@pytest.mark.parametrize("unknown", ["begin", "end", "strides"])
@pytest.mark.parametrize("kinds", [("plain", "new", "shrink"), ("ellipsis", "new"), ("new", "ellipsis", "plain"),
                                   ("begin", "end")], ids=str)
def test_strided_slice_shape_function_unknown_values(unknown, kinds):
    """With begin unknown OpenVINO counts no new axes after the ellipsis, and irrun follows."""
    masks = masks_of(kinds)
    n = len(kinds)
    args = [param([4, D(2, 6), 5])] + [param([n], np.int64, name) if name == unknown else const(values[:n])
                                       for name, values in (("begin", [1, 0, 2]), ("end", [3, 2, 5]),
                                                            ("strides", [1, 1, 2]))]
    check_shape_function(lambda *a: strided_slice(*a, masks), "StridedSlice", 1, masks, args)


@pytest.mark.parametrize("masks", [
    {"begin_mask": [2, 0], "end_mask": [0, 0]}, {"begin_mask": [0, 0], "end_mask": [0]},
    {"begin_mask": [], "end_mask": [1, 0]}, {"begin_mask": [0, 0], "end_mask": [], "new_axis_mask": [0, 0, 0]},
    {"begin_mask": [0, 0], "end_mask": [0, 0], "ellipsis_mask": [1, 1]},
], ids=str)
def test_strided_slice_mask_checks(masks):
    """OpenVINO wants 0/1 masks, each empty or as long as begin_mask (the spec allows any lengths)."""
    full = {"new_axis_mask": [], "shrink_axis_mask": [], "ellipsis_mask": [], **masks}
    check_shape_function(lambda *a: strided_slice(*a, full), "StridedSlice", 1, full,
                         [param([4, 5]), const([0, 1]), const([2, 3]), const([1, 1])])


def test_strided_slice_index_types():
    """begin and end must be integers; OpenVINO reads float strides (truncated)."""
    masks = masks_of(("plain", "plain"))
    for types in [(np.float32, np.int64, np.int64), (np.int64, np.float32, np.int64), (np.int32, np.int64, np.float32),
                  (np.bool_, np.int64, np.int64)]:
        args = [param([4, 5])] + [const(v, t) for v, t in zip(([0, 1], [2, 3], [1, 2]), types)]
        check_shape_function(lambda *a: strided_slice(*a, masks), "StridedSlice", 1, masks, args)


STRIDED_RUNS = [
    # The spec's examples first: begin, end, strides and masks as written there.
    ([4] * 6, [0, 1, 0, 1, 3, 3], [4, 4, 4, 4, 0, 0], [1, 1, 2, 2, -1, -2], ("plain",) * 6),
    ([2, 2], [1234, 2], [1234, 4321], [1, -1], ("plain",) * 2),
    ([2, 3, 4], [0, 0, 0], [2, 2, -1], [1, 1, 1], ("plain",) * 3),
    ([2, 3, 4], [1, 1, 123], [0, 0, 2], [1, 1, -1], ("end", "both", "both")),
    ([2, 4], [1234, 0, -1, 0], [1234, 2, 9876, 4], [132, 1, 241, 1], ("new", "plain", "new", "plain")),
    ([1, 2, 384, 64, 8], [0, 0, 0, 0, 0], [1, 0, 384, 64, 8], [1, 1, 1, 1, 1], ("plain", "shrink", "plain", "plain",
                                                                                 "plain")),
    ([3] * 10, [0, 0, 0], [4, 0, 5], [1, -1, 1], ("plain", "ellipsis", "plain")),
    # Then the other masks, bounds and steps.
    ([3, 4, 5], [1, -2, 2], [3, 3, 0], [1, 1, -2], ("begin", "end", "both")),
    ([3, 4, 5], [-1, 0, 0], [-4, 4, 5], [-1, 3, 2], ("plain", "plain", "plain")),
    ([3, 4, 5], [0, 2, 0], [0, 4, 0], [1, 1, 1], ("ellipsis", "plain", "new")),
    ([3, 4, 5], [-10, -10], [I64_MIN, I64_MAX], [-1, 1], ("plain", "plain")),
    ([3, 4, 5], [2, 0], [2, 0], [1, 1], ("plain", "ellipsis")), ([3, 4, 5], [-1], [0], [1], ("shrink",)),
    ([3, 4, 5], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1], [1, 1, 1, 1, 1], ("new", "ellipsis", "new", "end", "new")),
]


@pytest.mark.parametrize("shape,begin,end,strides,kinds", STRIDED_RUNS, ids=str)
def test_strided_slice(shape, begin, end, strides, kinds, tmp_path):
    x = param(shape)
    m = model(strided_slice(x, const(begin), const(end), const(strides), masks_of(kinds)), [x])
    compare(m, [sample(shape)], tmp_path)


def test_strided_slice_spec_mask_example_keeps_element_0(tmp_path):
    """The spec's begin_mask/end_mask example says [2,3,4] -> [1,3,3] (end_mask with a negative
    stride stops before element 0); OpenVINO includes element 0: [1,3,4]."""
    x = param([2, 3, 4])
    m = model(strided_slice(x, const([1, 1, 123]), const([0, 0, 2]), const([1, 1, -1]),
                            masks_of(("end", "both", "both"))), [x])
    got = compare(m, [np.arange(24, dtype=np.float32).reshape(2, 3, 4)], tmp_path)
    out = next(iter(got.values()))
    assert out.shape == (1, 3, 4) and out[0, 0].tolist() == [15, 14, 13, 12]


@pytest.mark.parametrize("kinds", [("plain", "shrink", "new"), ("new", "shrink", "both"), ("shrink", "new", "shrink"),
                                   ("new", "shrink", "shrink"), ("shrink", "begin", "new")], ids=str)
def test_strided_slice_new_and_shrink_together_follow_reference(kinds, tmp_path):
    """The CPU plugin returns garbage (uninitialized memory) when one StridedSlice both adds
    and removes axes; the shapes agree.  irrun matches OpenVINO's reference evaluation."""
    x = param([3, 4, 5])
    m = model(strided_slice(x, const(BEGIN), const(END), const(STRIDES), masks_of(kinds)), [x])
    compare(m, [sample([3, 4, 5])], tmp_path, oracle="reference")


@pytest.mark.parametrize("dtype,index_dtype", list(zip(sorted(DATA_TYPES), itertools.cycle([np.int32, np.int64]))),
                         ids=str)
def test_strided_slice_element_types(dtype, index_dtype, tmp_path):
    x = param([4, 6], DATA_TYPES[dtype])
    m = model(strided_slice(x, const([3, 1], index_dtype), const([0, 5], index_dtype),
                            const([-1, 2], index_dtype), masks_of(("end", "plain"))), [x])
    compare(m, [sample([4, 6], DATA_TYPES[dtype])], tmp_path)


def test_strided_slice_dynamic_shape_and_runtime_begin(tmp_path):
    x, begin = param([-1, 6, D(1, 8)]), param([3], np.int64, "begin")
    masks = masks_of(("plain", "shrink", "begin"))
    m = model([strided_slice(x, begin, const([4, 0, 0]), const([1, 1, -2]), masks),
               strided_slice(x, const([1, 2, 0]), const([4, 0, -6]), const([3, 1, -2]), masks)], [x, begin])
    for shape, b in [([5, 6, 8], [1, 2, 0]), ([2, 6, 1], [-1, -6, 5]), ([0, 6, 3], [0, 5, 0])]:
        compare(m, [sample(shape), np.array(b)], tmp_path)
    assert_output_shapes_as_openvino(m, tmp_path)


def test_strided_slice_new_axis_after_ellipsis_with_runtime_begin(tmp_path):
    """With begin known only at run time, OpenVINO's shape inference sizes the ellipsis as if
    there were no new axis after it: [2,3,4] with (..., new) loads as [2,3,1,4].  At run time
    the output is [2,3,4,1], in OpenVINO's reference evaluation and in irrun."""
    x, begin = param([2, 3, 4]), param([2], np.int64, "begin")
    m = model(strided_slice(x, begin, const([0, 0]), const([1, 1]), masks_of(("ellipsis", "new"))), [x, begin])
    assert_output_shapes_as_openvino(m, tmp_path)
    assert irrun.load(save(m, tmp_path)).outputs[0].shape == (2, 3, 1, 4)
    data = sample([2, 3, 4])
    (expected,) = evaluate_reference(m, [data, np.array([0, 0])])
    (got,) = irrun.load(save(m, tmp_path)).infer([data, np.array([0, 0])]).values()
    assert got.shape == expected.shape == (2, 3, 4, 1)
    np.testing.assert_array_equal(got, expected)


def assert_output_shapes_as_openvino(model, tmp_path):
    """The output shapes irrun infers at load are the ones OpenVINO infers reading the same IR."""
    xml = save(model, tmp_path)
    expected = [str(o.get_partial_shape()) for o in _CORE.read_model(str(xml)).outputs]
    assert [format_shape(o.shape) for o in irrun.load(xml).outputs] == expected


def without_strides_input(xml):
    """OpenVINO's Python API always writes the strides input; drop it (the spec makes it optional)."""
    text = xml.read_text()
    layer = re.search(r'<layer id="(\d+)"[^>]*type="StridedSlice".*?</layer>', text, re.S)
    block = re.sub(r'\s*<port id="3" precision="I64">\s*<dim>\d+</dim>\s*</port>', "", layer.group(0), count=1)
    text = text.replace(layer.group(0), block)
    text = re.sub(rf'\s*<edge from-layer="\d+" from-port="0" to-layer="{layer.group(1)}" to-port="3" />', "", text)
    xml.write_text(text)
    return xml


def test_strided_slice_without_strides(tmp_path):
    x = param([4, 6])
    m = model(strided_slice(x, const([-1, 1]), const([1, 5]), const([1, 1]), masks_of(("begin", "plain")),
                            name="no_strides"), [x])
    xml = without_strides_input(save(m, tmp_path))
    assert len(re.findall(r'to-layer="\d+" to-port="3"', xml.read_text())) == 0
    read = _CORE.read_model(str(xml))
    data = sample([4, 6])
    (expected,) = evaluate_reference(read, [data])
    assert irrun.validate(xml).ok
    (got,) = irrun.load(xml).infer([data]).values()
    assert got.shape == expected.shape == (1, 4)
    np.testing.assert_array_equal(got, expected)


def test_strided_slice_of_a_shape_folds_at_load(tmp_path):
    """x.shape[1:] joined with -1 reshapes y at load: StridedSlice on i64 shape values."""
    x, y = param([2, 3, 4]), param([5, 12], name="y")
    tail = strided_slice(ops3.shape_of(x), const([1]), const([0]), const([1]), masks_of(("end",)))
    m = model([ops1.reshape(y, ops1.concat([const([-1]), tail], 0), False), ops1.relu(x)], [x, y])
    compare(m, [sample([2, 3, 4]), sample([5, 12])], tmp_path)
    assert irrun.load(save(m, tmp_path)).outputs[0].shape == (5, 3, 4)


# ---------------------------------------------------------------- SliceScatter

SLICE_SCATTER_SHAPES = [
    # data shape, updates shape, start, stop, step, axes
    ([4, 6], [2, 6], [1], [3], [1], None), ([4, 6], [4, 3], [5], [-100], [-2], [1]),
    ([4, 6], [2, 3], [1], [3], [1], None),
    ([4, 6], [2], [1], [3], [1], None), ([-1, 6], [2, 6], [1], [3], [1], [0]), ([-1, 6], [-1, 2], [0], [2], [1], [-1]),
    (DYN, [2, 6], [1], [3], [1], [0]), ([4, 6], [2, 6], [1], [3], [0], [0]), ([], [], [0], [1], [1], None),
    ([4, 6], [2, 6], [1, 0], [3, 6], [1, 1], [0, 0]),
]


@pytest.mark.parametrize("shape,updates,start,stop,step,axes", SLICE_SCATTER_SHAPES, ids=str)
def test_slice_scatter_shape_function(shape, updates, start, stop, step, axes):
    args = [param(shape), param(updates, name="u"), const(start), const(stop), const(step)]
    check_shape_function(ops15.slice_scatter, "SliceScatter", 15, {}, args + ([] if axes is None else [const(axes)]))


def test_slice_scatter_converts_updates_of_another_type(tmp_path):
    """The spec wants one element type; OpenVINO accepts i32 updates into f32 data (its reference
    evaluation then fails, the CPU plugin converts them), and irrun converts."""
    x, u = param([4, 6]), param([2, 6], np.int32, "u")
    m = model(ops15.slice_scatter(x, u, const([1]), const([3]), const([1])), [x, u])
    compare(m, [sample([4, 6]), sample([2, 6], np.int32)], tmp_path)


@pytest.mark.parametrize("shape,updates,start,stop,step,axes", [
    ([4, 6], [2, 6], [1], [3], [1], None), ([4, 6], [4, 3], [5], [-100], [-2], [1]),
    ([3, 4, 5], [3, 2, 2], [-1, 0], [I64_MIN, I64_MAX], [-3, 3], [-1, 1]), ([4, 6], [0, 6], [2], [2], [1], [0]),
], ids=str)
def test_slice_scatter(shape, updates, start, stop, step, axes, tmp_path):
    x, u = param(shape), param(updates, name="u")
    m = model(ops15.slice_scatter(x, u, const(start), const(stop), const(step),
                                  None if axes is None else const(axes)), [x, u])
    compare(m, [sample(shape), sample(updates)], tmp_path)


@pytest.mark.parametrize("dtype", ["f16", "i64", "u8", "boolean"])
def test_slice_scatter_element_types_and_dynamic_dims(dtype, tmp_path):
    x, u = param([-1, 6], DATA_TYPES[dtype]), param([-1, 2], DATA_TYPES[dtype], "u")
    m = model(ops15.slice_scatter(x, u, const([0], np.int32), const([6], np.int32), const([3], np.int32),
                                  const([1], np.int32)), [x, u])
    compare(m, [sample([3, 6], DATA_TYPES[dtype]), sample([3, 2], DATA_TYPES[dtype])], tmp_path)


def test_slice_scatter_leaves_its_input_alone():
    x = np.zeros((2, 3), np.float32)
    out = irrun_op("SliceScatter", 15).run(x, np.ones((2, 1), np.float32), np.array([1]), np.array([2]),
                                           np.array([1]), np.array([1]))
    assert out[:, 1].tolist() == [1, 1] and not x.any()


# ---------------------------------------------------------------- Broadcast

def broadcast(version, mode, x, target, axes=None, **kw):
    if version == 1:
        return ops1.broadcast(x, target, axes, mode.upper(), **kw)
    return ops3.broadcast(x, target, axes, mode.upper(), **kw)


BROADCAST_SHAPES = [
    # mode, data shape, target, axes_mapping
    ("numpy", [3, 1], [2, 3, 4], None), ("numpy", [3], [2, 3, 1], None), ("numpy", [1], [0], None),
    ("numpy", [2, 3, 4], [3, 4], None), ("numpy", [-1, 1], [2, 3, 4], None), ("numpy", [D(2, 5)], [4], None),
    ("numpy", [D(2, 5)], [7], None), ("numpy", DYN, [2, 3], None), ("numpy", [3], [-1, 3], None),
    ("numpy", [], [2, 3], None), ("numpy", [2, 3], [2, 3], None),
    ("explicit", [3], [2, 3, 4], [1]), ("explicit", [2, 4], [2, 3, 4], [0, 2]), ("explicit", [3], [2, 3, 4], [2]),
    ("explicit", [2, 4], [2, 3, 4], [2, 0]), ("explicit", [3], [2, 3, 4], [3]), ("explicit", [3], [2, 3, 4], [0, 1]),
    ("explicit", [], [2, 1], [1]), ("explicit", [], [2, 3], [1]), ("explicit", [], [2, 3], [0, 1]),
    ("explicit", [1], [2, 3, 4], [2]), ("explicit", [-1, 4], [2, 3, 4], [1, 2]),
    ("explicit", DYN, [2, 3], [0]), ("explicit", [1, 1], [2, 3], [0, 0]),
    ("bidirectional", [3, 1], [2, 1, 4], None), ("bidirectional", [4, 5], [5], None),
    ("bidirectional", [2, 3], [4], None), ("bidirectional", [2, 3], [], None), ("bidirectional", [-1], [3], None),
    ("bidirectional", [D(1, 4)], [3], None), ("bidirectional", DYN, [3], None), ("bidirectional", [1, 3], [0, 1], None),
    ("pdpd", [2, 1, 4], [2, 3, 4], None), ("pdpd", [2, 1, 4], [2, 3, 1], None), ("pdpd", [2, 2, 4], [2, 3, 4], None),
]


# Broadcast-1 has no bidirectional mode, and OpenVINO builds its pdpd mode only with a third input.
@pytest.mark.parametrize("version,mode,shape,target,axes",
                         [(3, *case) for case in BROADCAST_SHAPES] +
                         [(1, *case) for case in BROADCAST_SHAPES if case[0] in ("numpy", "explicit")], ids=str)
def test_broadcast_shape_function(version, mode, shape, target, axes):
    attrs = {"mode": mode}
    check_shape_function(lambda *a: broadcast(version, mode, *a), "Broadcast", version, attrs,
                         [param(shape), const(target)] + ([] if axes is None else [const(axes)]))


@pytest.mark.parametrize("mode", ["numpy", "explicit", "bidirectional"])
@pytest.mark.parametrize("target_shape", [[3], [-1]], ids=str)
def test_broadcast_shape_function_unknown_target(mode, target_shape):
    args = [param([4, 1]), param(target_shape, np.int64, "t")] + ([const([0, 1])] if mode == "explicit" else [])
    check_shape_function(lambda *a: broadcast(3, mode, *a), "Broadcast", 3, {"mode": mode}, args)


def test_broadcast_index_types():
    for target, axes in [(np.float32, np.int64), (np.int32, np.float32), (np.uint8, np.int32)]:
        args = [param([3]), const([2, 3], target), const([1], axes)]
        check_shape_function(lambda *a: broadcast(3, "explicit", *a), "Broadcast", 3, {"mode": "explicit"}, args)


BROADCAST_RUNS = [
    # The spec's four examples first.
    (3, "numpy", [16, 1, 1], [1, 16, 50, 50], None), (3, "explicit", [16], [1, 16, 50, 50], [1]),
    (3, "explicit", [50, 50], [1, 50, 50, 16], [1, 2]), (3, "bidirectional", [16, 1, 1], [1, 1, 50, 50], None),
    (1, "numpy", [3, 1], [2, 3, 4], None), (1, "numpy", [], [2, 3], None), (1, "explicit", [3], [2, 3, 4], [1]),
    (1, "explicit", [2, 4], [2, 3, 4], [0, 2]), (1, "explicit", [1], [2, 3, 4], [2]),
    (3, "numpy", [3, 1], [2, 3, 4], None), (3, "numpy", [4], [0, 4], None), (3, "explicit", [], [2, 1], [1]),
    (3, "explicit", [1, 3], [4, 3, 2], [0, 1]), (3, "bidirectional", [3, 1], [2, 1, 4], None),
    (3, "bidirectional", [2, 3], [], None), (3, "bidirectional", [4, 1, 5], [3, 1], None),
    (3, "pdpd", [2, 1, 4], [2, 3, 4], None), (3, "pdpd", [2, 1, 4], [2, 3, 1], None),
]


@pytest.mark.parametrize("version,mode,shape,target,axes", BROADCAST_RUNS, ids=str)
def test_broadcast(version, mode, shape, target, axes, tmp_path):
    x = param(shape)
    m = model(broadcast(version, mode, x, const(target), None if axes is None else const(axes)), [x])
    compare(m, [sample(shape)], tmp_path)


@pytest.mark.parametrize("axis,shape,target", [(0, [2, 1, 4], [2, 3, 4]), (-1, [3, 1], [2, 3, 4]),
                                              (1, [1, 4], [2, 3, 4]), (1, [3, 1], [2, 1, 4])], ids=str)
def test_broadcast_pdpd_axis_attribute(axis, shape, target, tmp_path):
    """pdpd mode has an axis, written as mode.mode.axis (Python builds it only with 0): data lines
    up with the target from that dim (-1: with the trailing dims).  The target is an input here."""
    xml = hand_ir(tmp_path, "Broadcast", [(shape, "FP32"), ([len(target)], "I64")], [-1] * len(target),
                  {"mode": "pdpd", "mode.mode.axis": axis}, "opset3")
    inputs = [sample(shape), np.array(target)]
    expected = run_openvino(xml, inputs)
    assert irrun.validate(xml).ok
    got = list(irrun.load(xml).infer(inputs).values())
    assert_close(got[0], expected[0])


@pytest.mark.parametrize("dtype", sorted(DATA_TYPES))
def test_broadcast_element_types(dtype, tmp_path):
    x = param([3, 1], DATA_TYPES[dtype])
    m = model([broadcast(3, "bidirectional", x, const([2, 1, 4], np.int32)),
               broadcast(1, "explicit", x, const([3, 2, 1], np.int32), const([0, 2], np.int32))], [x])
    compare(m, [sample([3, 1], DATA_TYPES[dtype])], tmp_path)


def test_broadcast_to_a_runtime_shape(tmp_path):
    """The target is ShapeOf a dynamic tensor: known only at run time."""
    x, like = param([-1, 1]), param([-1, -1, 4], name="like")
    m = model([broadcast(3, "numpy", x, ops3.shape_of(like)),
               broadcast(3, "bidirectional", x, ops3.shape_of(like, "i32")), ops1.relu(like)], [x, like])
    compare(m, [sample([3, 1]), sample([2, 3, 4])], tmp_path)
    # The target's last value is known to be 4 (partly known shape values, irrun/partial_values.py), as
    # OpenVINO knows it.
    expected = [str(o.get_partial_shape()) for o in ov.Core().read_model(str(save(m, tmp_path))).outputs][:2]
    assert [format_shape(o.shape) for o in irrun.load(save(m, tmp_path)).outputs][:2] == expected == ["[?,?,4]"] * 2


@pytest.mark.parametrize("mode,shape,target", [
    ("numpy", [3, 1], [2, 3, 4]), ("numpy", [1, 2, 1, 5, 16], [1, 2, 4, 5, 16]), ("numpy", [], [2, 0, 3]),
    ("numpy", [2, 3], [2, 3]), ("bidirectional", [3, 1], [2, 1, 4]), ("bidirectional", [4, 1, 5], [3, 1]),
], ids=str)
def test_broadcast_to_targets_that_change_at_each_call(mode, shape, target, tmp_path):
    """Two inputs, the target one of them (a decoding step's targets follow its cache): the bound
    kernel reads it at every call."""
    x, t = param(shape), param([len(target)], np.int64, "t")
    m = model([ops3.broadcast(x, t, broadcast_spec=mode.upper())], [x, t])
    compare(m, [sample(shape), np.array(target, np.int64)], tmp_path)


def test_a_numpy_broadcast_to_a_target_the_data_does_not_fit_fails_at_its_layer(tmp_path):
    """numpy mode broadcasts one way: data [3, 1] to [1, 4] is refused (by OpenVINO too), not
    broadcast both ways."""
    x, t = param([3, 1]), param([2], np.int64, "t")
    xml = save(model([ops3.broadcast(x, t, broadcast_spec="NUMPY")], [x, t]), tmp_path)
    inputs = [sample([3, 1]), np.array([1, 4], np.int64)]
    with pytest.raises(RuntimeError):
        run_openvino(xml, inputs)
    with pytest.raises(irrun.IrrunError, match="Broadcast"):
        irrun.load(xml).infer(inputs)


def test_broadcast_is_a_view():
    x = np.arange(3, dtype=np.float32)
    out = irrun_op("Broadcast", 3, {"mode": "numpy"}).run(x, np.array([4, 3]))
    assert out.shape == (4, 3) and np.shares_memory(out, x)


@pytest.mark.parametrize("inputs,mode", [(2, "numpy"), (3, "explicit")])
def test_broadcast1_without_mode_depends_on_the_inputs(inputs, mode, tmp_path):
    """The spec's default is numpy; OpenVINO's IR reader takes a Broadcast-1 without mode as numpy
    with two inputs and as explicit with three."""
    x = param([3])
    m = model(broadcast(1, mode, x, const([2, 3]), const([1]) if mode == "explicit" else None), [x])
    xml = save(m, tmp_path)
    text = re.sub(r'<data mode="\w+" />', "", xml.read_text())
    if inputs == 2:  # Python writes numpy mode with a dummy third input: drop it
        layer = re.search(r'<layer id="(\d+)"[^>]*type="Broadcast".*?</layer>', text, re.S)
        block = re.sub(r'\s*<port id="2" precision="U8" />', "", layer.group(0))
        text = re.sub(rf'\s*<edge from-layer="\d+" from-port="0" to-layer="{layer.group(1)}" to-port="2" />', "",
                      text.replace(layer.group(0), block))
    xml.write_text(text)
    read = _CORE.read_model(str(xml))
    assert [op.get_attributes()["mode"] for op in read.get_ops() if op.get_type_name() == "Broadcast"] == \
        [mode if mode == "numpy" else "none"]
    data = sample([3])
    (expected,) = evaluate_reference(read, [data])
    assert irrun.validate(xml).ok
    (got,) = irrun.load(xml).infer([data]).values()
    np.testing.assert_array_equal(got, expected)


# ---------------------------------------------------------------- Tile

TILE_SHAPES = [
    ([2, 3], [2, 2]), ([2, 3], [3]), ([2, 3], [2, 1, 3]), ([2, 3], []), ([2, 3], [-2, 3]), ([2, 3], [0, 1]),
    ([-1, 3], [2, 2]), ([D(1, 4), 3], [3, 1]), (DYN, [2, 2]), ([], [2, 3]), ([0, 3], [5, 1]),
]


@pytest.mark.parametrize("shape,repeats", TILE_SHAPES, ids=str)
def test_tile_shape_function(shape, repeats):
    check_shape_function(ops1.tile, "Tile", 1, {}, [param(shape), const(repeats)])


@pytest.mark.parametrize("shape,repeats_shape", [([2, 3], [3]), ([2, 3, 4], [2]), ([2, 3], [-1]), (DYN, [2])], ids=str)
def test_tile_shape_function_unknown_repeats(shape, repeats_shape):
    check_shape_function(ops1.tile, "Tile", 1, {}, [param(shape), param(repeats_shape, np.int64, "r")])


@pytest.mark.parametrize("repeats", [np.array([2.0, 1.0], np.float32), np.array(2), np.array([True, False])],
                         ids=lambda r: f"{r.dtype}{list(r.shape)}")
def test_tile_repeats_must_be_an_integer_vector(repeats):
    check_shape_function(ops1.tile, "Tile", 1, {}, [param([2, 3]), const(repeats, repeats.dtype)])


@pytest.mark.parametrize("shape,repeats", [
    ([2, 3, 4], [1, 2, 3]), ([2, 3, 4], [5, 1, 2, 3]), ([5, 2, 3, 4], [1, 2, 3]),  # the spec's examples
    ([2, 3], [2, 2]), ([2, 3], [3]), ([2, 3], [1, 1]), ([2, 3], [-2, 3]), ([], [2, 3]), ([4], [0]),
], ids=str)
def test_tile(shape, repeats, tmp_path):
    """Negative repeats count as 0 (the spec does not say)."""
    x = param(shape)
    compare(model(ops1.tile(x, const(repeats)), [x]), [sample(shape)], tmp_path)


@pytest.mark.parametrize("dtype", sorted(DATA_TYPES))
def test_tile_element_types_and_dynamic_dims(dtype, tmp_path):
    x = param([-1, 3], DATA_TYPES[dtype])
    m = model(ops1.tile(x, const([1, 2, 1], np.int32)), [x])
    compare(m, [sample([2, 3], DATA_TYPES[dtype])], tmp_path)


def test_tile_runtime_repeats(tmp_path):
    x, r = param([2, 3]), param([3], np.int64, "r")
    m = model(ops1.tile(x, r), [x, r])
    for repeats in ([1, 2, 3], [2, 0, 1], [1, 1, 1]):
        compare(m, [sample([2, 3]), np.array(repeats)], tmp_path)
    assert_output_shapes_as_openvino(m, tmp_path)


# ---------------------------------------------------------------- Pad

PAD_MODES = ["constant", "edge", "reflect", "symmetric"]
PAD_SHAPES = [
    # data shape, pads_begin, pads_end
    ([3, 4], [0, 1], [2, 3]), ([3, 4], [2, -1], [-1, 3]), ([3, 4], [-1, -1], [-1, -1]), ([3, 4], [-3, 0], [0, 0]),
    ([3, 4], [0, 0], [0, 3]), ([3, 4], [0, 0], [0, 4]), ([3, 4], [0, 5], [0, 0]),
    ([0, 4], [1, 0], [0, 0]), ([1, 4], [1, 0], [0, 0]), ([3, 4], [1, 0], [0]), ([3, 4], [1, 0, 0], [0, 0, 1]),
    ([-1, 4], [2, 0], [1, 0]), ([-1, 4], [-1, 0], [0, 0]), ([D(2, 5), 4], [-3, 1], [0, 1]),
    ([D(2, 5), 4], [-4, 0], [0, 0]), ([D(2, -1), 4], [-1, 7], [0, 0]), (DYN, [1, 1], [1, 1]), ([], [], []),
]


@pytest.mark.parametrize("shape,begin,end", PAD_SHAPES, ids=str)
@pytest.mark.parametrize("mode", PAD_MODES)
@pytest.mark.parametrize("version", [1, 12])
def test_pad_shape_function(version, mode, shape, begin, end):
    pad = ops1.pad if version == 1 else ops12.pad
    check_shape_function(lambda *a: pad(*a, mode), "Pad", version, {"pad_mode": mode},
                         [param(shape), const(begin), const(end)])


@pytest.mark.parametrize("shape,begin", [([3, 4], [-4, 0]), ([3, 4], [-3, 0]), ([D(2, 3), 4], [-4, 0])], ids=str)
def test_pad_cropping_more_than_the_dim_is_an_error(shape, begin, tmp_path):
    """The spec makes such a dim 0 (max(pads_begin + dim + pads_end, 0)); OpenVINO infers a
    dynamic dim and fails at run time, in the CPU plugin and the reference evaluation alike.
    irrun reports the layer."""
    x = param(shape)
    node = ops12.pad(x, const(begin), const([-1, 0]), "constant", name="crop")
    assert str(node.get_output_partial_shape(0)) == "[?,4]"
    with pytest.raises(RuntimeError):
        evaluate_reference(model(node, [x]), [sample([3, 4])])
    xml = save(model(node, [x]), tmp_path)
    errors, report = errors_of(xml)
    assert [(c, t) for c, t, _ in errors] == [("E-SHAPE", "Pad")], report.diagnostics
    assert "crop more than" in errors[0][2] and "crop" in "\n".join(d.format() for d in report.errors)


@pytest.mark.parametrize("shape", [[3, 4], [3, 4, 5], DYN], ids=str)
@pytest.mark.parametrize("pads_shape", [[2], [-1], [3]], ids=str)
def test_pad_shape_function_unknown_pads(shape, pads_shape):
    check_shape_function(lambda *a: ops12.pad(*a, "constant"), "Pad", 12, {"pad_mode": "constant"},
                         [param(shape), param(pads_shape, np.int64, "b"), param(pads_shape, np.int64, "e")])


@pytest.mark.parametrize("mode,pads_dtype,value", [
    ("constant", np.float32, None), ("constant", np.int64, np.int32(3)),
    ("constant", np.int64, np.array([3.0], np.float32)),
    ("edge", np.int64, np.array([3.0], np.float32)), ("edge", np.int64, np.int32(3)), ("constant", np.uint8, None),
], ids=str)
def test_pad_input_checks(mode, pads_dtype, value):
    """Integer pads; pad_value of the data's type, and a scalar in constant mode."""
    args = [param([3, 4]), const([1, 1], pads_dtype), const([1, 1], pads_dtype)]
    args += [] if value is None else [ops1.constant(value)]
    check_shape_function(lambda *a: ops12.pad(*a[:3], mode, *a[3:]), "Pad", 12, {"pad_mode": mode}, args)


PAD_RUNS = [
    ([3, 4], [0, 1], [2, 3]), ([3, 4], [2, -1], [-1, 3]), ([3, 4], [-1, -1], [-1, -1]), ([3, 4], [-3, 0], [0, 1]),
    ([3, 4], [-1, 0], [2, 0]), ([2, 3, 4], [1, 0, 2], [0, 2, 1]), ([3, 4], [0, 0], [0, 0]), ([5], [-2], [-3]),
]


@pytest.mark.parametrize("mode", PAD_MODES)
@pytest.mark.parametrize("version", [1, 12])
def test_pad(version, mode, tmp_path):
    """Every case of PAD_RUNS as one output of one model.  They include the spec's positive,
    negative and mixed examples; negative pads crop after padding, so reflect and symmetric
    pads mirror the whole input.  Pad-1 takes negative pads too."""
    pad = ops1.pad if version == 1 else ops12.pad
    runs = [r for r in PAD_RUNS if mode != "reflect" or max(r[1] + r[2]) < min(r[0])]  # reflect: pads < dim
    xs = [param(shape, name=f"x{i}") for i, (shape, _, _) in enumerate(runs)]
    outputs = [pad(x, const(begin), const(end), mode, name=f"pad{i}_{begin}_{end}".replace(" ", ""))
               for i, (x, (_, begin, end)) in enumerate(zip(xs, runs))]
    compare(model(outputs, xs), [sample(shape) for shape, _, _ in runs], tmp_path)


@pytest.mark.parametrize("mode,shape,begin,end", [
    ("constant", [1, 3, 32, 40], [0, 5, 2, 1], [1, 0, 3, 7]), ("edge", [1, 3, 32, 40], [0, 5, 2, 1], [1, 0, 3, 7]),
    ("constant", [2, 3, 32, 40], [0, -2, -8, 1], [-1, 4, -6, 7]),
], ids=str)
def test_pad_spec_xml_examples(mode, shape, begin, end, tmp_path):
    """The spec's IR examples (pad_value 15 in constant mode).  In the last one the spec's comment
    says dim 0 is 2 = 0 + 2 + (-1); it is 1, as its <dim> says."""
    x = param(shape)
    value = ops1.constant(np.float32(15)) if mode == "constant" else None
    m = model(ops12.pad(x, const(begin), const(end), mode, value), [x])
    got = compare(m, [sample(shape)], tmp_path)
    assert next(iter(got.values())).shape == tuple(b + d + e for b, d, e in zip(begin, shape, end))


def test_pad_spec_example_mixed_reflect(tmp_path):
    x = param([3, 4])
    m = model(ops12.pad(x, const([2, -1]), const([-1, 3]), "reflect"), [x])
    got = compare(m, [np.arange(1, 13, dtype=np.float32).reshape(3, 4)], tmp_path)
    assert next(iter(got.values())).tolist() == [[10, 11, 12, 11, 10, 9], [6, 7, 8, 7, 6, 5], [2, 3, 4, 3, 2, 1],
                                                 [6, 7, 8, 7, 6, 5]]


@pytest.mark.parametrize("dtype,mode", list(zip(sorted(DATA_TYPES), itertools.cycle(PAD_MODES))), ids=str)
def test_pad_element_types(dtype, mode, tmp_path):
    x = param([3, 4], DATA_TYPES[dtype])
    value = ops1.constant(np.array(1, DATA_TYPES[dtype])) if mode == "constant" else None
    m = model(ops12.pad(x, const([1, -1], np.int32), const([2, 1], np.int32), mode, value), [x])
    compare(m, [sample([3, 4], DATA_TYPES[dtype])], tmp_path)


def test_pad_value_input(tmp_path):
    x, value = param([2, 3]), param([], name="value")
    m = model(ops1.pad(x, const([1, 1]), const([0, 2]), "constant", value), [x, value])
    # The CPU plugin pads with 0 when pad_value is not a constant; the reference uses the value.
    compare(m, [sample([2, 3]), np.array(-7.5, np.float32)], tmp_path, oracle="reference")


def test_pad_dynamic_shape_and_runtime_pads(tmp_path):
    x, begin = param([-1, D(2, 6)]), param([2], np.int64, "begin")
    m = model([ops12.pad(x, const([1, -1]), const([-1, 2]), "edge"),
               ops12.pad(x, begin, const([1, 1]), "symmetric")], [x, begin])
    for shape, b in [([3, 4], [1, 2]), ([1, 2], [-1, 0]), ([2, 6], [0, -3])]:
        compare(m, [sample(shape), np.array(b)], tmp_path)
    assert_output_shapes_as_openvino(m, tmp_path)


def test_pad_crop_is_a_view():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = irrun_op("Pad", 12, {"pad_mode": "reflect"}).run(x, np.array([-1, 0]), np.array([0, -2]))
    assert out.shape == (2, 2) and np.shares_memory(out, x)


# ---------------------------------------------------------------- validate: defective IRs

def replace_constant(xml, old, new):
    """Rewrite a Const's data in the .bin (same dtype and size)."""
    path = xml.with_suffix(".bin")
    data = path.read_bytes()
    old_bytes, new_bytes = np.asarray(old, np.int64).tobytes(), np.asarray(new, np.int64).tobytes()
    assert data.count(old_bytes) == 1
    path.write_bytes(data.replace(old_bytes, new_bytes))


def shape_errors(xml, layer_type):
    errors, report = errors_of(xml)
    found = [m for c, t, m in errors if c == "E-SHAPE" and t == layer_type]
    assert found, report.diagnostics
    return found[0], "\n".join(d.format() for d in report.errors)


@pytest.mark.parametrize("build,old,new,name,words", [
    (lambda x: ops1.split(x, const(1), 2, name="halves"), "<data num_splits=\"2\" />", "<data num_splits=\"4\" />",
     "halves", ["6 elements", "num_splits=4"]),
    (lambda x: ops1.variadic_split(x, const(1), const([2, -1]), name="parts"), None, ([2, -1], [7, -1]),
     "parts", ["split_lengths [7, -1]", "more than the 6 elements"]),
    (lambda x: broadcast(3, "numpy", ops1.reshape(x, const([4, 6, 1]), False), const([4, 6, 5]), name="wide"),
     None, ([4, 6, 5], [4, 3, 5]), "wide", ["[4,6,1]", "[4,3,5]"]),
    (lambda x: ops12.pad(x, const([0, 2]), const([0, 1]), "reflect", name="mirror"), None, ([0, 2], [0, 6]),
     "mirror", ["reflect", "axis 1 of 6 elements"]),
    (lambda x: strided_slice(x, const([0, 1]), const([2, 3]), const([1, 1]), masks_of(("plain", "plain")),
                             name="cut"),
     'begin_mask="0, 0"', 'begin_mask="0, 2"', "cut", ["begin_mask=0,2", "0 or 1"]),
    (lambda x: ops8.slice(x, const([0, 1]), const([2, 3]), const([1, 1]), const([0, 1]), name="cut"), None,
     ([0, 1], [1, 1]), "cut", ["axes [1, 1]", "unique"]),
], ids=["Split", "VariadicSplit", "Broadcast", "Pad", "StridedSlice", "Slice"])
def test_inconsistent_inputs_name_the_layer(build, old, new, name, words, tmp_path):
    """Each IR is valid as OpenVINO wrote it; one edit makes the layer's inputs disagree."""
    x = param([4, 6])
    node = build(x)
    m = model(outputs_of(node), [x])
    xml = save(m, tmp_path)
    if old is None:
        replace_constant(xml, *new)
    else:
        replace_in_ir(xml, old, new)
    message, text = shape_errors(xml, node.get_type_name())
    assert all(w in message for w in words), message
    assert f'"{name}"' in text
    with pytest.raises(irrun.errors.ModelError, match=name):
        irrun.load(xml)


def test_declared_output_shapes_are_checked(tmp_path):
    x = param([4, 6])
    net = model([*outputs_of(ops1.split(x, const(1), 2, name="halves")),
                 ops12.pad(x, const([1, -1]), const([0, 2]), "edge", name="padded")], [x])
    xml = save(net, tmp_path)
    text = xml.read_text()
    for name, old, new in [("halves", "<dim>4</dim>\n\t\t\t\t\t<dim>3</dim>\n\t\t\t\t</port>\n\t\t\t</output>",
                            "<dim>4</dim>\n\t\t\t\t\t<dim>2</dim>\n\t\t\t\t</port>\n\t\t\t</output>"),
                           ("padded", "<dim>5</dim>\n\t\t\t\t\t<dim>7</dim>", "<dim>5</dim>\n\t\t\t\t\t<dim>8</dim>")]:
        block = re.search(rf'name="{name}".*?</layer>', text, re.S).group(0)
        assert old in block
        text = text.replace(block, block.replace(old, new))
    xml.write_text(text)
    errors, report = errors_of(xml)
    declared = dict((t, m) for c, t, m in errors if c == "E-DECLARED-SHAPE")
    assert sorted(declared) == ["Pad", "Split"], report.diagnostics
    assert declared["Split"].startswith("output 1: declared [4,2], inferred [4,3]")
    assert declared["Pad"] == "output 0: declared [5,8], inferred [5,7]; dim 1 = -1 + 6 + 2 = 7"


def test_split_num_splits_must_be_positive(tmp_path):
    x = param([4, 6])
    xml = save(model(outputs_of(ops1.split(x, const(1), 2)), [x]), tmp_path)
    replace_in_ir(xml, 'num_splits="2"', 'num_splits="0"')
    with pytest.raises(RuntimeError):
        _CORE.read_model(str(xml))
    errors, _ = errors_of(xml)
    assert ("E-ATTR-RANGE", "Split") in [(c, t) for c, t, _ in errors]


def test_strided_slice_shrink_out_of_range_at_run_time_names_the_layer(tmp_path):
    """The reference evaluation and the CPU plugin both fail on it."""
    x, begin = param([-1, 3]), param([1], np.int64, "begin")
    net = model(strided_slice(x, begin, const([0]), const([1]), masks_of(("shrink",)), name="pick"), [x, begin])
    with pytest.raises(RuntimeError):
        evaluate_reference(net, [sample([2, 3]), np.array([2])])
    m = irrun.load(save(net, tmp_path))
    with pytest.raises(irrun.errors.IrrunError, match=r"pick.*begin\[0\]=2 of an axis of 2 elements"):
        m.infer([sample([2, 3]), np.array([2])])
