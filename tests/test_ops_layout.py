"""DepthToSpace-1, SpaceToDepth-1, ShuffleChannels-1, BatchToSpace-2 and SpaceToBatch-2 against OpenVINO.

Differential runs (`compare`, several nodes per model to share one compile),
the shape functions against OpenVINO's partial-shape inference, hand-checked
values (the spec's formulas on tiny inputs, and inverse pairs), and validate.
"""

import numpy as np
import openvino as ov
import openvino.opset1 as ops1
import openvino.opset2 as ops2
import openvino.opset3 as ops3
import pytest
from ovutil import (
    compare, const, edited_ir, evaluate_reference, irrun_infer_all, model, only_output, ov_shape_text, param,
    run_openvino, save, tensor_type
)

import irrun
from irrun.errors import ShapeError
from irrun.shapes import format_shape

RNG = np.random.default_rng(3)
D = ov.Dimension
DTYPES = [np.float32, np.float16, np.int32, np.int64, np.uint8, np.int8]


def sample(shape, dtype=np.float32):
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        return RNG.integers(0 if dtype.kind == "u" else -100, 100, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


# ---------------------------------------------------------------- DepthToSpace / SpaceToDepth

BLOCK_CASES = [([2, 8, 3, 4], 2), ([1, 27, 2, 2, 2], 3), ([2, 12, 5], 2), ([1, 4, 2, 3, 2, 1], 1),
               ([1, 16, 1, 3], 4), ([1, 64, 2, 1, 1, 2], 2)]


@pytest.mark.parametrize("shape, block", BLOCK_CASES, ids=[f"{len(s)}d-bs{b}" for s, b in BLOCK_CASES])
def test_depth_and_space(shape, block, tmp_path):
    """DepthToSpace on `shape`, SpaceToDepth on the shape it makes, both modes."""
    x = param(shape)
    space_shape = shape[:2] + [d * block for d in shape[2:]]
    y = param(space_shape)
    nodes = [ops1.depth_to_space(x, mode, block) for mode in ("blocks_first", "depth_first")]
    nodes += [ops1.space_to_depth(y, mode, block) for mode in ("blocks_first", "depth_first")]
    compare(model(nodes, [x, y]), [sample(shape), sample(space_shape)], tmp_path)


@pytest.mark.parametrize("dtype", DTYPES + [np.bool_])
def test_depth_and_space_element_types(dtype, tmp_path):
    x, y = param([1, 8, 2, 3], dtype), param([1, 2, 4, 6], dtype)
    nodes = [ops1.depth_to_space(x, "depth_first", 2), ops1.space_to_depth(y, "blocks_first", 2)]
    data = [sample([1, 8, 2, 3], dtype), sample([1, 2, 4, 6], dtype)]
    if dtype == np.bool_:
        data = [RNG.random([1, 8, 2, 3]) < 0.5, RNG.random([1, 2, 4, 6]) < 0.5]
    compare(model(nodes, [x, y]), data, tmp_path)


def test_depth_to_space_hand_checked(tmp_path):
    """Channels 0..7 into 2x2 tiles: blocks_first reads channel (i * 2 + j) * 2 + c, depth_first c * 4 + i * 2 + j."""
    x = param([1, 8, 1, 1])
    nodes = [ops1.depth_to_space(x, mode, 2) for mode in ("blocks_first", "depth_first")]
    blocks, depth = compare(model(nodes, [x]), [np.arange(8, dtype=np.float32).reshape(1, 8, 1, 1)],
                            tmp_path).values()
    np.testing.assert_array_equal(blocks[0], [[[0, 2], [4, 6]], [[1, 3], [5, 7]]])
    np.testing.assert_array_equal(depth[0], [[[0, 1], [2, 3]], [[4, 5], [6, 7]]])


@pytest.mark.parametrize("mode", ["blocks_first", "depth_first"])
def test_space_to_depth_inverts_depth_to_space(mode, tmp_path):
    x = param([2, 18, 2, 3])
    node = ops1.space_to_depth(ops1.depth_to_space(x, mode, 3), mode, 3)
    data = sample([2, 18, 2, 3])
    np.testing.assert_array_equal(only_output(compare(model([node], [x]), [data], tmp_path)), data)


def test_depth_and_space_dynamic_shapes(tmp_path):
    x, y = param([-1, 8, -1, -1]), param([1, -1, -1, 6])
    nodes = [ops1.depth_to_space(x, "blocks_first", 2), ops1.space_to_depth(y, "depth_first", 2)]
    m = model(nodes, [x, y])
    for d2s, s2d in (([1, 8, 2, 3], [1, 3, 4, 6]), ([3, 8, 1, 5], [1, 1, 2, 6])):
        compare(m, [sample(d2s), sample(s2d)], tmp_path)


# ---------------------------------------------------------------- ShuffleChannels

SHUFFLE_CASES = [([1, 6, 2], 1, 3), ([6], 0, 2), ([2, 3, 4, 8], -1, 4), ([2, 12, 2], 1, 1), ([2, 6, 3, 2, 2], 2, 3),
                 ([4, 6, 5], -3, 2), ([1, 12], 1, 12)]


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.float16])
def test_shuffle_channels(dtype, tmp_path):
    params = [param(shape, dtype) for shape, _, _ in SHUFFLE_CASES]
    nodes = [ops3.shuffle_channels(p, axis, group) for p, (_, axis, group) in zip(params, SHUFFLE_CASES)]
    compare(model(nodes, params), [sample(shape, dtype) for shape, _, _ in SHUFFLE_CASES], tmp_path)


def test_shuffle_channels_hand_checked(tmp_path):
    """Six channels in 2 groups of 3: [0, 1, 2 | 3, 4, 5] -> [0, 3, 1, 4, 2, 5]."""
    x = param([1, 6])
    got = only_output(compare(model([ops3.shuffle_channels(x, 1, 2)], [x]), [np.arange(6, dtype=np.float32)[None]],
                              tmp_path))
    np.testing.assert_array_equal(got, [[0, 3, 1, 4, 2, 5]])


def test_shuffle_channels_dynamic_shape(tmp_path):
    x = param([-1, 6, -1])
    m = model([ops3.shuffle_channels(x, 1, 3)], [x])
    for shape in ([1, 6, 4], [3, 6, 1]):
        compare(m, [sample(shape)], tmp_path)


# ---------------------------------------------------------------- BatchToSpace / SpaceToBatch

# (data shape, block_shape, begin, end): the specs' examples first.
B2S_CASES = [([10, 2], [1, 5], [0, 2], [0, 0]), ([48, 3, 3, 1, 3], [1, 2, 4, 3, 1], [0, 0, 1, 0, 0], [0, 0, 1, 0, 0]),
             ([12, 2, 3], [1, 2, 3], [0, 0, 1], [0, 1, 0]), ([4, 3], [1, 1], [0, 0], [0, 0]),
             ([8, 1, 2, 2], [1, 2, 2, 2], [0, 1, 0, 3], [0, 0, 2, 1])]
S2B_CASES = [([2, 6, 10, 3, 3], [1, 2, 4, 3, 1], [0, 0, 1, 0, 0], [0, 0, 1, 0, 0]),
             ([2, 4, 3], [1, 2, 3], [0, 0, 1], [0, 2, 2]), ([1, 5], [1, 5], [0, 0], [0, 0]),
             ([3, 1, 3, 4], [1, 2, 2, 2], [0, 1, 0, 1], [0, 0, 1, 1])]


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.float16, np.int64])
def test_batch_to_space(dtype, tmp_path):
    params = [param(shape, dtype) for shape, *_ in B2S_CASES]
    nodes = [ops2.batch_to_space(p, const(b), const(cb), const(ce)) for p, (_, b, cb, ce) in zip(params, B2S_CASES)]
    got = compare(model(nodes, params), [sample(shape, dtype) for shape, *_ in B2S_CASES], tmp_path)
    assert [v.shape for v in got.values()][:2] == [(2, 8), (2, 6, 10, 3, 3)]   # the spec's examples


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.float16, np.int64])
def test_space_to_batch(dtype, tmp_path):
    params = [param(shape, dtype) for shape, *_ in S2B_CASES]
    nodes = [ops2.space_to_batch(p, const(b), const(pb), const(pe)) for p, (_, b, pb, pe) in zip(params, S2B_CASES)]
    got = compare(model(nodes, params), [sample(shape, dtype) for shape, *_ in S2B_CASES], tmp_path)
    assert next(iter(got.values())).shape == (48, 3, 3, 1, 3)   # the spec's example


def test_space_to_batch_block_spanning_padded_last_axis(tmp_path):
    """oracle=reference: when one block spans the whole padded last axis and the axis before it has more
    than one row, the CPU plugin writes an input value where padding belongs ([1, 1, 2, 2], block 4 on
    the last axis, pads 1 and 1: CPU [0, 0, 1, 3, 2, 4, 3, 0], reference [0, 0, 1, 3, 2, 4, 0, 0])."""
    x = param([3, 1, 3, 2])
    m = model([ops2.space_to_batch(x, const([1, 2, 2, 4]), const([0, 1, 0, 1]), const([0, 0, 1, 1]))], [x])
    data = sample([3, 1, 3, 2])
    got = only_output(compare(m, [data], tmp_path, oracle="reference"))
    assert not np.array_equal(run_openvino(save(m, tmp_path), [data])[0], got)


def test_batch_to_space_inverts_space_to_batch(tmp_path):
    x = param([2, 4, 6])
    block, begin, end = const([1, 2, 3], np.int32), const([0, 1, 2], np.int32), const([0, 1, 1], np.int32)
    node = ops2.batch_to_space(ops2.space_to_batch(x, block, begin, end), block, begin, end)
    data = sample([2, 4, 6])
    np.testing.assert_array_equal(only_output(compare(model([node], [x]), [data], tmp_path)), data)


def test_batch_space_dynamic_shapes(tmp_path):
    x, y = param([-1, 2, -1]), param([2, -1, 3])
    nodes = [ops2.batch_to_space(x, const([1, 2, 3]), const([0, 0, 1]), const([0, 1, 0])),
             ops2.space_to_batch(y, const([1, 2, 3]), const([0, 0, 1]), const([0, 2, 2]))]
    m = model(nodes, [x, y])
    for b2s, s2b in (([12, 2, 3], [2, 4, 3]), ([6, 2, 1], [2, 2, 3])):
        compare(m, [sample(b2s), sample(s2b)], tmp_path)


def test_batch_space_block_values_at_run_time(tmp_path):
    """block_shape and crops from Parameters: the output shape is known only when the layer runs."""
    x = param([12, 2, 3])
    block, begin, end = (ov.op.Parameter(ov.Type.i64, ov.PartialShape([3])) for _ in range(3))
    m = model([ops2.batch_to_space(x, block, begin, end)], [x, block, begin, end])
    compare(m, [sample([12, 2, 3]), np.array([1, 2, 3]), np.array([0, 1, 0]), np.array([0, 0, 2])], tmp_path)


# ---------------------------------------------------------------- shape functions against OpenVINO

def outcome(run) -> str:
    try:
        return run()
    except (RuntimeError, ShapeError):
        return "error"


BLOCK_SHAPES = [[1, -1, 2, 2], [1, D(8, 20), D(2, 5), -1], [1, 7, 2, 2], [1, 8, 2, 2], [1, D(5, 7), 2, 2],
                [1, D(5, 6), 2, 2], [1, 8], [2, 16, 3], None]


@pytest.mark.parametrize("block", [2, 4])
@pytest.mark.parametrize("shape", BLOCK_SHAPES, ids=str)
@pytest.mark.parametrize("type_name, make", [("DepthToSpace", ops1.depth_to_space),
                                             ("SpaceToDepth", ops1.space_to_depth)])
def test_block_shape_function(type_name, make, shape, block):
    expected = outcome(lambda: ov_shape_text(make(param(shape), "blocks_first", block).get_output_partial_shape(0)))
    got = outcome(lambda: format_shape(irrun_infer_all(type_name, 1, {"block_size": str(block)},
                                                       [tensor_type(shape)], bad_attrs_refuse=True)[0].shape))
    assert got == expected


@pytest.mark.parametrize("shape, axis, group", [([1, 6, 2], 1, 3), ([1, 7, 2], 1, 3), ([1, -1, 2], 1, 3),
                                                ([1, D(4, 8), 2], -2, 2), ([6], 0, 2), ([1, 6], 2, 1),
                                                ([1, 6], -3, 1), ([1, 6], 1, 0), (None, 1, 2)])
def test_shuffle_shape_function(shape, axis, group):
    expected = outcome(lambda: ov_shape_text(ops3.shuffle_channels(param(shape), axis, group)
                                             .get_output_partial_shape(0)))
    got = outcome(lambda: format_shape(irrun_infer_all("ShuffleChannels", 1, {"axis": str(axis), "group": str(group)},
                                                       [tensor_type(shape)], bad_attrs_refuse=True)[0].shape))
    assert got == expected


BATCH_SHAPE_CASES = [  # (type, data shape, block, begin, end)
    ("BatchToSpace", [12, 2, 3], [1, 2, 3], [0, 0, 1], [0, 1, 0]),
    ("BatchToSpace", [-1, 2, 3], [1, 2, 3], [0, 0, 1], [0, 1, 0]),
    ("BatchToSpace", [D(6, 30), D(2, 4), -1], [1, 2, 3], [0, 0, 1], [0, 1, 0]),
    ("BatchToSpace", [10, 2, 3], [1, 2, 3], [0, 0, 1], [0, 1, 0]),
    ("BatchToSpace", [D(7, 11), 2, 3], [1, 2, 3], [0, 0, 0], [0, 0, 0]),
    ("BatchToSpace", [12, 2, 3], [1, 2, 3], [0, 3, 1], [0, 2, 0]),
    ("BatchToSpace", [12, 2, 3], [1, 0, 3], [0, 0, 0], [0, 0, 0]),
    ("BatchToSpace", [12, 2, 3], [1, 2, 3], [0, -1, 0], [0, 0, 0]),
    ("BatchToSpace", [12, 2], [1, 2, 3], [0, 0, 0], [0, 0, 0]),
    ("BatchToSpace", [D(2, 12), D(1, 3), 4], [1, 2, 1], [0, 3, 1], [0, 0, 1]),
    ("BatchToSpace", None, [1, 2, 3], [0, 0, 0], [0, 0, 0]),
    ("SpaceToBatch", [2, 4, 3], [1, 2, 3], [0, 0, 1], [0, 2, 2]),
    ("SpaceToBatch", [-1, -1, 3], [1, 2, 3], [0, 0, 1], [0, 2, 2]),
    ("SpaceToBatch", [D(1, 3), D(2, 6), D(1, 7)], [1, 2, 3], [0, 0, 1], [0, 2, 1]),
    ("SpaceToBatch", [2, 3, 3], [1, 2, 3], [0, 0, 0], [0, 0, 0]),
    ("SpaceToBatch", [2, 4, 3], [1, 0, 3], [0, 0, 0], [0, 0, 0]),
    ("SpaceToBatch", [D(2, 5), D(3, 9), 3], [1, 2, 3], [0, 0, 0], [0, 0, 0]),
    ("SpaceToBatch", None, [1, 2, 3], [0, 0, 0], [0, 0, 0]),
]


@pytest.mark.parametrize("type_name, shape, block, begin, end", BATCH_SHAPE_CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[2]}-{c[3]}-{c[4]}".replace(" ", "") for c in BATCH_SHAPE_CASES])
def test_batch_shape_function(type_name, shape, block, begin, end):
    make = ops2.batch_to_space if type_name == "BatchToSpace" else ops2.space_to_batch
    expected = outcome(lambda: ov_shape_text(make(param(shape), const(block), const(begin), const(end))
                                             .get_output_partial_shape(0)))
    inputs = [tensor_type(shape)] + [tensor_type([3], np.int64, v) for v in (block, begin, end)]
    got = outcome(lambda: format_shape(irrun_infer_all(type_name, 2, {}, inputs)[0].shape))
    assert got == expected


def test_batch_shape_function_unknown_block():
    """block_shape only known at run time: OpenVINO still bounds the spatial dims below (block >= 1)."""
    for type_name, make in (("BatchToSpace", ops2.batch_to_space), ("SpaceToBatch", ops2.space_to_batch)):
        node = make(param([12, 2, 3]), param([3], np.int64), const([0, 0, 0]), const([0, 0, 0]))
        inputs = [tensor_type([12, 2, 3]), tensor_type([3], np.int64), tensor_type([3], np.int64, [0, 0, 0]),
                  tensor_type([3], np.int64, [0, 0, 0])]
        got = irrun_infer_all(type_name, 2, {}, inputs)[0]
        assert format_shape(got.shape) == ov_shape_text(node.get_output_partial_shape(0))


# ---------------------------------------------------------------- where OpenVINO disagrees with itself

def test_batch_to_space_batch_block_is_refused(tmp_path):
    """block_shape[0] = 2 (the spec expects 1): shape inference says [2, 2, 9], the CPU plugin writes
    [4, 2, 9], and running it (CPU or reference) corrupts the heap, so it is not run here.  irrun refuses."""
    x = param([12, 2, 3])
    m = model([ops2.batch_to_space(x, const([2, 1, 3]), const([0, 0, 0]), const([0, 0, 0]))], [x])
    assert m.output(0).get_partial_shape() == ov.PartialShape([2, 2, 9])
    problems = irrun.validate(save(m, tmp_path)).errors
    assert problems and problems[0].layer.type == "BatchToSpace" and "block_shape[0] must be 1" in problems[0].message


def test_space_to_batch_negative_pad_is_refused(tmp_path):
    """Shape inference accepts pads_begin[1] = -2; the reference refuses it ("must be non-negative")."""
    x = param([2, 4, 3])
    m = model([ops2.space_to_batch(x, const([1, 2, 3]), const([0, -2, 0]), const([0, 0, 0]))], [x])
    with pytest.raises(RuntimeError, match="non-negative"):
        evaluate_reference(m, [sample([2, 4, 3])])
    problems = irrun.validate(save(m, tmp_path)).errors
    assert problems and "must be >= 0" in problems[0].message


# ---------------------------------------------------------------- validate

def test_validate_declared_shape(tmp_path):
    x = param([1, 8, 2, 3])
    xml = edited_ir(model([ops1.depth_to_space(x, "blocks_first", 2)], [x]), tmp_path, "DepthToSpace",
                    output_dims=[1, 2, 4, 7])
    problems = irrun.validate(xml).errors
    assert [e.code for e in problems] == ["E-DECLARED-SHAPE"]
    assert problems[0].layer.type == "DepthToSpace"


@pytest.mark.parametrize("type_name, make, attrs, words", [
    ("DepthToSpace", lambda x: ops1.depth_to_space(x, "blocks_first", 2), {"block_size": "3"}, "multiple of 9"),
    ("SpaceToDepth", lambda x: ops1.space_to_depth(x, "blocks_first", 2), {"block_size": "3"}, "multiple of 3"),
    ("ShuffleChannels", lambda x: ops3.shuffle_channels(x, 1, 2), {"group": "3"}, "multiple of group 3"),
    ("ShuffleChannels", lambda x: ops3.shuffle_channels(x, 1, 2), {"axis": "4"}, "axis 4"),
])
def test_validate_inconsistent_layer(type_name, make, attrs, words, tmp_path):
    """Edits OpenVINO refuses too; irrun names the layer."""
    x = param([1, 8, 4, 4])
    xml = edited_ir(model([make(x)], [x]), tmp_path, type_name, attrs)
    with pytest.raises(RuntimeError):
        ov.Core().read_model(str(xml))
    problems = irrun.validate(xml).errors
    assert problems and problems[0].layer.type == type_name
    assert any(words in e.message for e in problems), [e.format() for e in problems]


def test_attribute_defaults_match_openvino(tmp_path):
    """mode defaults to blocks_first; axis and group to 1; block_size is required (OpenVINO reads 0 and refuses)."""
    x = param([1, 8, 2, 3])
    xml = edited_ir(model([ops1.depth_to_space(x, "depth_first", 2)], [x]), tmp_path, "DepthToSpace", drop=("mode",))
    data = sample([1, 8, 2, 3])
    np.testing.assert_array_equal(only_output(irrun.load(xml).infer([data])), run_openvino(xml, [data])[0])
    xml = edited_ir(model([ops3.shuffle_channels(x, 1, 2)], [x]), tmp_path, "ShuffleChannels", drop=("group",))
    np.testing.assert_array_equal(only_output(irrun.load(xml).infer([data])), data)
    xml = edited_ir(model([ops1.depth_to_space(x, "depth_first", 2)], [x]), tmp_path, "DepthToSpace",
                    drop=("block_size",))
    with pytest.raises(RuntimeError):
        ov.Core().read_model(str(xml))
    assert "E-ATTR-MISSING" in [e.code for e in irrun.validate(xml).errors]
