"""EmbeddingBag*, EmbeddingSegmentsSum, SegmentMax, SparseFillEmptyRows and OneHot against OpenVINO.

OpenVINO's reference evaluation has no kernel for the embedding ops, SegmentMax
or SparseFillEmptyRows (`Model.evaluate` fails), so the CPU plugin is the
oracle for them; OneHot has both, and uses the reference where the CPU plugin
narrows i64 to int32.  Divergences are recorded in specs/errata/misc2.md.
"""
import os
import zlib

import numpy as np
import openvino as ov
import openvino.opset1 as ops1
import openvino.opset3 as ops3
import openvino.opset15 as ops15
import openvino.opset16 as ops16
import pytest

from ovutil import check_shape_function, compare, const, model_from_arrays, param, run_openvino, save
from irxml import hand_ir
import irrun
from irrun.errors import IrrunError
from irrun.shapes import format_shape

D = ov.Dimension
DYN = ov.PartialShape.dynamic()
RNG = np.random.default_rng(3)


@pytest.fixture(autouse=True)
def _seeded(request):
    """The same data however the run is selected (EMBEDDING_SEED=n draws other data)."""
    global RNG
    RNG = np.random.default_rng(zlib.crc32(request.node.name.encode()) + int(os.environ.get("EMBEDDING_SEED", "0")))


TABLE_TYPES = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
               "i8": np.int8}


def sample(shape, dtype):
    """Integers wide enough that i8/u8 sums wrap, as the CPU plugin's do."""
    dtype = np.dtype(dtype)
    if dtype.kind == "u":
        return RNG.integers(0, 256, shape).astype(dtype)
    if dtype.kind == "i":
        return RNG.integers(-120, 120, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def run_case(tmp_path, build, arrays, *, consts=(), dynamic=False, **kw):
    """`build(*nodes)` with a Parameter per array (a Const at the positions in `consts`; `dynamic`:
    every Parameter dim -1), compared with OpenVINO."""
    model, feeds = model_from_arrays(build, arrays, consts=consts, dynamic=dynamic)
    return compare(model, feeds, tmp_path, **kw)


def refused_by_both(tmp_path, build, arrays, words, *, consts=()):
    """OpenVINO's CPU plugin fails, and irrun raises an error matching `words`."""
    model, feeds = model_from_arrays(build, arrays, consts=consts)
    xml = save(model, tmp_path)
    with pytest.raises(RuntimeError):
        run_openvino(xml, feeds)
    with pytest.raises(IrrunError, match=words):
        irrun.load(xml).infer(feeds)


def refused_by_irrun(tmp_path, build, arrays, words, *, consts=()):
    """For inputs on which the CPU plugin crashes the process (so it is not run): irrun raises."""
    model, feeds = model_from_arrays(build, arrays, consts=consts)
    with pytest.raises(IrrunError, match=words):
        irrun.load(save(model, tmp_path)).infer(feeds)


def sorted_offsets(n_bags, n_indices):
    """Non-decreasing offsets, each below n_indices, with some empty bags."""
    return np.sort(RNG.integers(0, n_indices, n_bags))


# ---------------------------------------------------------------- EmbeddingBagOffsets(Sum)

def offsets_op(version, reduction="sum"):
    if version == 3:
        return lambda *a: ops3.embedding_bag_offsets_sum(*a)
    return lambda *a: ops15.embedding_bag_offsets(*a, reduction=reduction)


OFFSETS_VERSIONS = [(3, "sum"), (15, "sum"), (15, "mean")]


@pytest.mark.parametrize("version,reduction", OFFSETS_VERSIONS, ids=str)
@pytest.mark.parametrize("dtype", TABLE_TYPES)
def test_offsets_dtypes(version, reduction, dtype, tmp_path):
    table = sample((9, 3), TABLE_TYPES[dtype])
    indices = RNG.integers(0, 9, 12).astype(np.int32)
    offsets = np.array([0, 3, 3, 7, 11], np.int32)
    tol = {"rtol": 1e-2, "atol": 1e-2} if dtype == "f16" else {}
    run_case(tmp_path, offsets_op(version, reduction), [table, indices, offsets], **tol)


@pytest.mark.parametrize("version,reduction", OFFSETS_VERSIONS, ids=str)
@pytest.mark.parametrize("default,index_type", [(None, np.int32), (-1, np.int64), (0, np.int32), (4, np.int64)],
                         ids=lambda v: str(getattr(v, "__name__", v)))
def test_offsets_default_index(version, reduction, default, index_type, tmp_path):
    table = sample((5, 2, 3), np.float32)
    indices = RNG.integers(0, 5, 10).astype(index_type)
    offsets = np.array([2, 2, 5, 5, 9], index_type)   # entries before offsets[0] belong to no bag
    arrays = [table, indices, offsets] + ([] if default is None else [np.array(default, index_type)])
    run_case(tmp_path, offsets_op(version, reduction), arrays, consts=(3,))


@pytest.mark.parametrize("version", [3, 15])
@pytest.mark.parametrize("dtype", ["f32", "i32", "u8"])
def test_offsets_per_sample_weights(version, dtype, tmp_path):
    table = sample((6, 4), TABLE_TYPES[dtype])
    indices = RNG.integers(0, 6, 8).astype(np.int64)
    offsets = np.array([0, 0, 4, 6], np.int64)
    weights = sample(8, TABLE_TYPES[dtype])
    run_case(tmp_path, offsets_op(version), [table, indices, offsets, np.array(3, np.int64), weights], consts=(3,))


def test_offsets_spec_example(tmp_path):
    """EmbeddingBagOffsets-15 example 1: output [[-1.05, -1.2], [-0.2, -0.6], [-0.1, 0.4]]."""
    table = np.array([[-0.2, -0.6], [-0.1, -0.4], [-1.9, -1.8], [-1., 1.5], [0.8, -0.7]], np.float32)
    arrays = [table, np.array([0, 2, 3, 4], np.int32), np.array([0, 2, 2], np.int32), np.array(0, np.int32),
              np.full(4, 0.5, np.float32)]
    got = run_case(tmp_path, offsets_op(15), arrays, consts=(3,))
    np.testing.assert_allclose(next(iter(got.values())), [[-1.05, -1.2], [-0.2, -0.6], [-0.1, 0.4]], rtol=1e-5)


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_offsets_dynamic_shapes(reduction, tmp_path):
    table = sample((7, 5), np.float32)
    arrays = [table, RNG.integers(0, 7, 9).astype(np.int32), sorted_offsets(4, 9).astype(np.int32)]
    run_case(tmp_path, offsets_op(15, reduction), arrays, dynamic=True)


@pytest.mark.parametrize("version,reduction", OFFSETS_VERSIONS, ids=str)
def test_offsets_f16_compressed_table(version, reduction, tmp_path):
    """A constant table saved as f16 (compress_to_fp16) and decompressed by a Convert."""
    table = sample((6, 4), np.float32)
    arrays = [table, RNG.integers(0, 6, 7).astype(np.int32), np.array([0, 2, 2, 5], np.int32)]
    run_case(tmp_path, offsets_op(version, reduction), arrays, consts=(0,), compress=True)


@pytest.mark.parametrize("offsets,default,words", [
    ([0, 2, 4], None, "offsets .* below the number of indices"),      # trailing empty bag: offset == len(indices)
    ([0, 3, 2], None, "non-decreasing"),
    ([0, 2, 2], 7, "default_index 7 is outside the 5 rows"),
    ([0, 2, 2], -2, "default_index -2 is outside"),
])
def test_offsets_refusals(offsets, default, words, tmp_path):
    arrays = [sample((5, 2), np.float32), np.array([0, 1, 2, 3], np.int32), np.array(offsets, np.int32)]
    if default is not None:
        arrays.append(np.array(default, np.int32))
    refused_by_both(tmp_path, offsets_op(15), arrays, words, consts=(3,))


@pytest.mark.parametrize("bad", [5, -1])
def test_offsets_index_outside_the_table(bad, tmp_path):
    arrays = [sample((5, 2), np.float32), np.array([0, bad, 2, 3], np.int32), np.array([0, 2], np.int32)]
    refused_by_both(tmp_path, offsets_op(3), arrays, f"index {bad} is outside the 5 rows")


# ---------------------------------------------------------------- EmbeddingBagPacked(Sum)

def packed_op(version, reduction="sum"):
    if version == 3:
        return lambda *a: ops3.embedding_bag_packed_sum(*a)
    return lambda *a: ops15.embedding_bag_packed(*a, reduction=reduction)


@pytest.mark.parametrize("version,reduction", OFFSETS_VERSIONS, ids=str)
@pytest.mark.parametrize("dtype", TABLE_TYPES)
def test_packed_dtypes(version, reduction, dtype, tmp_path):
    table = sample((8, 2, 2), TABLE_TYPES[dtype])
    indices = RNG.integers(0, 8, (4, 3)).astype(np.int64)
    tol = {"rtol": 1e-2, "atol": 1e-2} if dtype == "f16" else {}
    run_case(tmp_path, packed_op(version, reduction), [table, indices], **tol)


@pytest.mark.parametrize("version", [3, 15])
def test_packed_per_sample_weights(version, tmp_path):
    table = sample((8, 3), np.float32)
    arrays = [table, RNG.integers(0, 8, (5, 2)).astype(np.int32), sample((5, 2), np.float32)]
    run_case(tmp_path, packed_op(version), arrays)


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_packed_dynamic_shapes(reduction, tmp_path):
    """Without per_sample_weights: the CPU plugin cannot compile dynamic ones ("to_shape was called
    on a dynamic shape")."""
    arrays = [sample((8, 3), np.float32), RNG.integers(0, 8, (5, 2)).astype(np.int32)]
    run_case(tmp_path, packed_op(15, reduction), arrays, dynamic=True)


def test_packed_index_outside_the_table(tmp_path):
    arrays = [sample((4, 2), np.float32), np.array([[0, 1], [4, 2]], np.int32)]
    refused_by_both(tmp_path, packed_op(15, "mean"), arrays, "index 4 is outside the 4 rows")


# ---------------------------------------------------------------- EmbeddingSegmentsSum

def segments_op(*a):
    return ops3.embedding_segments_sum(*a)


@pytest.mark.parametrize("dtype", TABLE_TYPES)
@pytest.mark.parametrize("extras", ["none", "default", "default+weights"])
def test_segments(dtype, extras, tmp_path):
    table = sample((6, 3), TABLE_TYPES[dtype])
    indices = RNG.integers(0, 6, 7).astype(np.int32)
    segment_ids = np.array([0, 0, 2, 2, 2, 4, 4], np.int32)
    arrays = [table, indices, segment_ids, np.array(6, np.int32)]
    if extras != "none":
        arrays.append(np.array(5, np.int32))
    if extras == "default+weights":
        arrays.append(sample(7, TABLE_TYPES[dtype]))
    tol = {"rtol": 1e-2, "atol": 1e-2} if dtype == "f16" else {}
    run_case(tmp_path, segments_op, arrays, consts=(3, 4), **tol)


@pytest.mark.parametrize("segment_ids,num_segments", [
    ([0, 0, 1, 3, 3], 6),          # empty segments in the middle and at the end
    ([2, 2, 2, 2, 3], 4),          # and at the start
    ([0, 1, 2, 3, 4], 5),
])
def test_segments_ids(segment_ids, num_segments, tmp_path):
    arrays = [sample((4, 2), np.float32), np.array([0, 1, 2, 3, 1], np.int64), np.array(segment_ids, np.int64),
              np.array(num_segments, np.int64)]
    run_case(tmp_path, segments_op, arrays, consts=(3,))


def test_segments_unsorted_ids_follow_reference(tmp_path):
    """Hand-checked: segment s sums the rows of every index whose id is s, in any order, as
    OpenVINO's reference kernel does.  The CPU plugin sums the run of len(ids == s) indices from
    the first one with id s, which is only right for sorted ids (and Model.evaluate has no kernel)."""
    table = np.arange(10, dtype=np.float32).reshape(5, 2)
    arrays = [table, np.array([0, 1, 2, 3], np.int32), np.array([2, 0, 1, 0], np.int32), np.array(3, np.int32)]
    model, feeds = model_from_arrays(segments_op, arrays, consts=(3,))
    got = next(iter(irrun.load(save(model, tmp_path)).infer(feeds).values()))
    assert got.tolist() == [[8, 10], [4, 5], [0, 1]]


@pytest.mark.parametrize("bad", [3, -1])
def test_segments_ids_outside_are_an_error(bad, tmp_path):
    """OpenVINO's reference kernel refuses an id outside [0, num_segments); the CPU plugin drops
    the index.  irrun follows the reference."""
    arrays = [sample((4, 2), np.float32), np.array([0, 1, 2], np.int32), np.array([0, 1, bad], np.int32),
              np.array(3, np.int32)]
    refused_by_irrun(tmp_path, segments_op, arrays, rf"segment id {bad} is outside \[0, 3\)", consts=(3,))


def test_segments_spec_example(tmp_path):
    table = np.array([[-0.2, -0.6], [-0.1, -0.4], [-1.9, -1.8], [-1., 1.5], [0.8, -0.7]], np.float32)
    arrays = [table, np.array([0, 2, 3, 4], np.int32), np.array([0, 0, 2, 2], np.int32), np.array(3, np.int32),
              np.array(0, np.int32), np.full(4, 0.5, np.float32)]
    got = run_case(tmp_path, segments_op, arrays, consts=(3, 4))
    np.testing.assert_allclose(next(iter(got.values())), [[-1.05, -1.2], [-0.2, -0.6], [-0.1, 0.4]], rtol=1e-5)


def test_segments_num_segments_known_at_run_time(tmp_path):
    arrays = [sample((5, 3), np.float32), np.array([0, 1, 4], np.int32), np.array([0, 2, 2], np.int32),
              np.array(4, np.int32)]
    run_case(tmp_path, segments_op, arrays)


def test_segments_dynamic_shapes(tmp_path):
    arrays = [sample((5, 3), np.float32), np.array([0, 1, 4, 3], np.int32), np.array([0, 2, 2, 1], np.int32),
              np.array(3, np.int32), np.array(1, np.int32)]
    run_case(tmp_path, segments_op, arrays, dynamic=True, consts=(3, 4))


@pytest.mark.parametrize("default", [-1, 5])
def test_segments_default_index_must_address_a_row(default, tmp_path):
    """Unlike EmbeddingBagOffsets, -1 is not "no default" here: the CPU plugin refuses it."""
    arrays = [sample((5, 2), np.float32), np.array([0, 1], np.int32), np.array([0, 2], np.int32),
              np.array(3, np.int32), np.array(default, np.int32)]
    refused_by_both(tmp_path, segments_op, arrays, f"default_index {default} is outside", consts=(3, 4))


# ---------------------------------------------------------------- embedding shape functions

EMB_OPS = {   # name: (type, version, attributes, builder)
    "offsets3": ("EmbeddingBagOffsetsSum", 3, {}, offsets_op(3)),
    "offsets15": ("EmbeddingBagOffsets", 15, {"reduction": "sum"}, offsets_op(15)),
    "offsets15-mean": ("EmbeddingBagOffsets", 15, {"reduction": "mean"}, offsets_op(15, "mean")),
    "packed3": ("EmbeddingBagPackedSum", 3, {}, packed_op(3)),
    "packed15": ("EmbeddingBagPacked", 15, {"reduction": "sum"}, packed_op(15)),
    "packed15-mean": ("EmbeddingBagPacked", 15, {"reduction": "mean"}, packed_op(15, "mean")),
    "segments": ("EmbeddingSegmentsSum", 3, {}, segments_op),
}
F32, I32, I64 = np.float32, np.int32, np.int64
EMB_SHAPE_CASES = [
    # op, input shapes, input types
    ("offsets3", [[5, 2], [4], [3]], [F32, I32, I32]),
    ("offsets3", [[5, 2, 3], [-1], [D(2, 6)]], [F32, I64, I64]),
    ("offsets3", [DYN, [4], [3]], [F32, I32, I32]),
    ("offsets3", [[5, 2], [4], DYN], [F32, I32, I32]),
    ("offsets3", [[5], [4], [3]], [F32, I32, I32]),
    ("offsets3", [[], [4], [3]], [F32, I32, I32]),
    ("offsets3", [[5, 2], [4, 1], [3]], [F32, I32, I32]),
    ("offsets3", [[5, 2], [4], [3]], [F32, I32, I64]),
    ("offsets3", [[5, 2], [4], [3]], [F32, np.uint8, np.uint8]),
    ("offsets15", [[5, 2], [4], [3], [], [4]], [F32, I32, I32, I32, F32]),
    ("offsets15", [[5, 2], [4], [3], [1], [4]], [F32, I32, I32, I32, F32]),
    ("offsets15", [[5, 2], [4], [3], [], [3]], [F32, I32, I32, I32, F32]),
    ("offsets15", [[5, 2], [4], [3], [], [4]], [F32, I32, I32, I32, I32]),
    ("offsets15-mean", [[5, 2], [4], [3], [], [4]], [F32, I32, I32, I32, F32]),
    ("packed3", [[5, 2], [3, 4]], [F32, I32]),
    ("packed3", [[5, 2], [-1, 4], [3, -1]], [F32, I32, F32]),
    ("packed3", [[5, 2], [3, 4], [3, 5]], [F32, I32, F32]),
    ("packed3", [[5, 2], [12]], [F32, I32]),
    ("packed15-mean", [[5, 2], [3, 4], [3, 4]], [F32, I32, F32]),
    ("packed15", [DYN, [3, 4]], [F32, I64]),
    ("segments", [[5, 2], [4], [4], []], [F32, I32, I32, I32]),
    ("segments", [[5, 2], [4], [3], []], [F32, I32, I32, I32]),
    ("segments", [[5, 2], [4], [4], [1]], [F32, I32, I32, I32]),
    ("segments", [[5, 2], [4], [4], []], [F32, I32, I32, I64]),
    ("segments", [[5, 2], [-1], [4], [], [], [-1]], [F32, I64, I64, I64, I64, F32]),
]


@pytest.mark.parametrize("op,shapes,types", EMB_SHAPE_CASES, ids=str)
def test_embedding_shape_functions(op, shapes, types):
    type_name, version, attrs, build = EMB_OPS[op]
    check_shape_function(build, type_name, version, attrs, [param(s, t) for s, t in zip(shapes, types)])


def test_segments_shape_uses_the_known_num_segments():
    for count, want in ((4, "[4,2]"), (-1, "[?,2]")):
        nodes = [param([5, 2]), param([3], np.int32), param([3], np.int32), const(count, np.int32)]
        check_shape_function(segments_op, "EmbeddingSegmentsSum", 3, {}, nodes)
        assert str(segments_op(*nodes).get_output_partial_shape(0)) == want


# ---------------------------------------------------------------- SegmentMax

def segment_max_op(fill_mode):
    return lambda *a: ops16.segment_max(*a, fill_mode=fill_mode.upper())


@pytest.mark.parametrize("fill_mode", ["zero", "lowest"])
@pytest.mark.parametrize("dtype", ["f32", "f16", "i32", "u8", "i8"])
@pytest.mark.parametrize("data_shape", [(6,), (6, 2, 2)], ids=str)
def test_segment_max(fill_mode, dtype, data_shape, tmp_path):
    data = sample(data_shape, TABLE_TYPES[dtype])
    segment_ids = np.array([0, 0, 2, 2, 2, 4], np.int32)
    run_case(tmp_path, segment_max_op(fill_mode), [data, segment_ids])


@pytest.mark.parametrize("fill_mode", ["zero", "lowest"])
@pytest.mark.parametrize("num_segments", [0, 2, 3, 7])
@pytest.mark.parametrize("const_ids", [False, True], ids=["ids", "const-ids"])
def test_segment_max_num_segments(fill_mode, num_segments, const_ids, tmp_path):
    """Rows whose id is num_segments or more are dropped; segments past the last id are empty."""
    data = sample((6, 3), np.float32)
    segment_ids = np.array([0, 1, 1, 3, 3, 4], np.int64)
    consts = (1, 2) if const_ids else (2,)
    run_case(tmp_path, segment_max_op(fill_mode), [data, segment_ids, np.array(num_segments, np.int32)],
             consts=consts)


def test_segment_max_i64_zero_fill(tmp_path):
    data = sample((5, 2), np.int64)
    run_case(tmp_path, segment_max_op("zero"), [data, np.array([0, 2, 2, 3, 3], np.int32)])


def test_segment_max_i64_lowest_is_the_int64_lowest(tmp_path):
    """Hand-checked: the CPU plugin computes i64 in int32 and fills with -2**31; the spec (and
    OpenVINO's reference kernel) use the lowest value of the data type."""
    model, feeds = model_from_arrays(segment_max_op("lowest"), [np.array([5, 7], np.int64), np.array([0, 2], np.int32)])
    got = next(iter(irrun.load(save(model, tmp_path)).infer(feeds).values()))
    assert got.dtype == np.int64 and got.tolist() == [5, np.iinfo(np.int64).min, 7]


def test_segment_max_nan_and_infinity(tmp_path):
    """The maximum starts from the lowest value and skips NaN: a segment of NaN (or of -inf)
    gives the lowest value, even with fill_mode=zero."""
    data = np.array([[np.nan, 1], [2, np.nan], [np.nan, -np.inf], [np.nan, -np.inf], [np.inf, 0]], np.float32)
    run_case(tmp_path, segment_max_op("zero"), [data, np.array([0, 0, 1, 1, 2], np.int32)])


def test_segment_max_spec_example(tmp_path):
    """Spec: ids [0,0,0,1,1,3,5,5] give [max(s0), max(s1), 0, max(s3), 0, max(s5)]."""
    data = np.array([1, 7, 3, -2, 4, 9, 0, 6], np.float32)
    ids = np.array([0, 0, 0, 1, 1, 3, 5, 5], np.int32)
    got = run_case(tmp_path, segment_max_op("zero"), [data, ids])
    assert next(iter(got.values())).tolist() == [7, 4, 0, 9, 0, 6]


@pytest.mark.parametrize("with_count", [False, True])
def test_segment_max_dynamic_shapes(with_count, tmp_path):
    arrays = [sample((5, 2), np.float32), np.array([0, 0, 1, 3, 3], np.int32)]
    if with_count:
        arrays.append(np.array(6, np.int32))
    run_case(tmp_path, segment_max_op("lowest"), arrays, dynamic=True)


@pytest.mark.parametrize("ids,words", [([2, 0, 1], "must be sorted"), ([-1, 0, 1], "must not be negative")])
def test_segment_max_bad_ids(ids, words, tmp_path):
    """The CPU plugin reports unsorted ids, then crashes (segmentation fault); negative ids corrupt
    its memory.  irrun refuses both."""
    refused_by_irrun(tmp_path, segment_max_op("zero"), [sample((3, 2), np.float32), np.array(ids, np.int32)], words)


def test_segment_max_empty_data(tmp_path):
    """Hand-checked: no rows, 2 segments: both empty, so both get the fill value (the CPU plugin
    leaves the output uninitialised)."""
    model, feeds = model_from_arrays(segment_max_op("zero"),
                                     [np.zeros((0, 3), np.float32), np.zeros(0, np.int32), np.array(2, np.int32)],
                                     consts=(2,))
    got = next(iter(irrun.load(save(model, tmp_path)).infer(feeds).values()))
    assert got.shape == (2, 3) and not got.any()


SEGMENT_MAX_SHAPES = [
    ([6, 3], [6], None, None), ([-1, 3], [-1], None, None), (DYN, [6], None, None), ([6, 3], DYN, None, None),
    ([6, 3], [6], [], None), ([6, 3], [6], [1], None), ([6, 3], [5], None, None), ([], [6], None, None),
    ([6, 3], [6, 1], None, None), ([D(2, 8), 3], [D(4, 9)], [], None),
    ([6, 3], [6], None, [0, 0, 1, 1, 3, 3]), ([6, 3], [6], [], [0, 0, 1, 1, 3, 3]),
    ([6, 3], [6], None, [0, 2, 1, 1, 3, 3]),
]


@pytest.mark.parametrize("data,ids,count,id_values", SEGMENT_MAX_SHAPES, ids=str)
def test_segment_max_shape_function(data, ids, count, id_values):
    nodes = [param(data), const(id_values, np.int32) if id_values is not None else param(ids, np.int32)]
    if count is not None:
        nodes.append(param(count, np.int64))
    check_shape_function(segment_max_op("zero"), "SegmentMax", 16, {"fill_mode": "zero"}, nodes)


@pytest.mark.parametrize("count", [4, 0, -1])
def test_segment_max_shape_function_known_count(count):
    nodes = [param([6, 3]), param([6], np.int32), const(count, np.int64)]
    check_shape_function(segment_max_op("zero"), "SegmentMax", 16, {"fill_mode": "zero"}, nodes)


# ---------------------------------------------------------------- SparseFillEmptyRows

def sfer(*a):
    return ops16.sparse_fill_empty_rows(*a)


def test_sparse_fill_spec_example(tmp_path):
    """Spec: rows 1 and 4 of a [5, 6] tensor are empty and get (row, 0) = default."""
    arrays = [np.array([1, 2, 3, 4], np.float32), np.array([5, 6], np.int64),
              np.array([[0, 1], [0, 3], [2, 0], [3, 1]], np.int64), np.array(-1, np.float32)]
    got = list(run_case(tmp_path, sfer, arrays).values())
    assert got[0].tolist() == [[0, 1], [0, 3], [1, 0], [2, 0], [3, 1], [4, 0]]
    assert got[1].tolist() == [1, 2, -1, 3, 4, -1]
    assert got[2].tolist() == [False, True, False, False, True]


@pytest.mark.parametrize("dtype", ["f32", "f16", "i32", "i64", "u8"])
@pytest.mark.parametrize("index_type", [np.int32, np.int64], ids=["i32", "i64"])
def test_sparse_fill_dtypes(dtype, index_type, tmp_path):
    n_rows, n_cols, m = 7, 4, 6
    positions = RNG.choice(n_rows * n_cols, m, replace=False)
    indices = np.stack(np.divmod(positions, n_cols), axis=1).astype(index_type)   # unsorted
    arrays = [sample(m, TABLE_TYPES[dtype]), np.array([n_rows, n_cols], index_type), indices,
              sample((), TABLE_TYPES[dtype])]
    run_case(tmp_path, sfer, arrays)


@pytest.mark.parametrize("values,dense_shape,indices", [
    ([1, 2, 3], [3, 6], [[1, 1], [1, 1], [1, 0]]),     # repeated positions keep their order
    ([], [3, 6], np.zeros((0, 2))),                     # no entries: every row is filled
    ([], [0, 6], np.zeros((0, 2))),                     # no rows
    ([5, 6], [2, 1], [[1, 0], [0, 0]]),                 # no empty row
], ids=["repeats", "no-entries", "no-rows", "full"])
def test_sparse_fill_edge_cases(values, dense_shape, indices, tmp_path):
    arrays = [np.array(values, np.float32), np.array(dense_shape, np.int32), np.array(indices, np.int32).reshape(-1, 2),
              np.array(9, np.float32)]
    run_case(tmp_path, sfer, arrays)


@pytest.mark.parametrize("const_inputs", [(1,), (1, 2)], ids=["dense-shape", "dense-shape+indices"])
def test_sparse_fill_constant_inputs_give_static_shapes(const_inputs, tmp_path):
    arrays = [np.array([1, 2, 3], np.float32), np.array([5, 3], np.int64), np.array([[4, 2], [0, 0], [4, 1]], np.int64),
              np.array(7, np.float32)]
    model, _ = model_from_arrays(sfer, arrays, consts=const_inputs)
    irrun_model = irrun.load(save(model, tmp_path))
    assert [format_shape(o.shape) for o in irrun_model.outputs] == [str(o.get_partial_shape()) for o in model.outputs]
    run_case(tmp_path, sfer, arrays, consts=const_inputs)


def test_sparse_fill_dynamic_shapes(tmp_path):
    arrays = [np.array([1, 2, 3], np.float32), np.array([5, 3], np.int32), np.array([[4, 2], [0, 0], [4, 1]], np.int32),
              np.array(7, np.float32)]
    run_case(tmp_path, sfer, arrays, dynamic=True)


def test_sparse_fill_row_outside_is_an_error(tmp_path):
    """The CPU plugin corrupts its memory (the process aborts); irrun refuses."""
    arrays = [np.array([1, 2], np.float32), np.array([3, 6], np.int32), np.array([[1, 1], [5, 1]], np.int32),
              np.array(0, np.float32)]
    refused_by_irrun(tmp_path, sfer, arrays, r"row 5 not in \[0, 2\]")


def test_sparse_fill_column_outside_is_an_error(tmp_path):
    """OpenVINO's shape inference refuses a column outside the dense shape when the indices are
    constant; the CPU plugin passes it through when they are not.  irrun always refuses."""
    arrays = [np.array([1, 2], np.float32), np.array([3, 6], np.int32), np.array([[1, 1], [1, 9]], np.int32),
              np.array(0, np.float32)]
    with pytest.raises(RuntimeError):
        model_from_arrays(sfer, arrays, consts=(1, 2))
    refused_by_irrun(tmp_path, sfer, arrays, r"column 9 not in \[0, 5\]")


SPARSE_SHAPES = [
    ([4], [2], [4, 2], []), ([-1], [2], [-1, 2], []), ([4], DYN, [4, 2], []), (DYN, [2], DYN, DYN),
    ([4, 1], [2], [4, 2], []), ([4], [3], [4, 2], []), ([4], [2], [4, 3], []), ([4], [2], [5, 2], []),
    ([4], [2], [4, 2], [1]), ([4], [2, 1], [4, 2], []),
]


@pytest.mark.parametrize("values,dense_shape,indices,default", SPARSE_SHAPES, ids=str)
def test_sparse_fill_shape_function(values, dense_shape, indices, default):
    nodes = [param(values), param(dense_shape, np.int64), param(indices, np.int64), param(default)]
    check_shape_function(sfer, "SparseFillEmptyRows", 16, {}, nodes)


@pytest.mark.parametrize("dense_type,indices_type", [(np.int32, np.int64), (np.int8, np.int8), (np.int64, np.int64)])
def test_sparse_fill_index_types(dense_type, indices_type):
    nodes = [param([4]), param([2], dense_type), param([4, 2], indices_type), param([])]
    check_shape_function(sfer, "SparseFillEmptyRows", 16, {}, nodes)


# ---------------------------------------------------------------- OneHot

def one_hot_op(version, axis, mode=None):
    if version == 1:
        return lambda *a: ops1.one_hot(*a, axis)
    return lambda *a: ops16.one_hot(*a, axis, negative_indices_mode=mode)


ONE_HOT_MODES = [(1, None), (16, "ignore_negative"), (16, "normalize")]


@pytest.mark.parametrize("version,mode", ONE_HOT_MODES, ids=str)
@pytest.mark.parametrize("shape,axis", [((), 0), ((), -1), ((7,), 0), ((7,), -1), ((2, 3, 4), 1), ((2, 3, 4), -2),
                                        ((2, 3, 4), 3), ((2, 3, 4), -4)], ids=str)
def test_one_hot(version, mode, shape, axis, tmp_path):
    """i64 indices here, i32 in test_one_hot_value_types."""
    depth = 5
    indices = RNG.integers(-depth - 2, depth + 2, shape).astype(np.int64)   # negative and too large ones too
    arrays = [indices, np.array(depth, np.int64), np.array(2.5, np.float32), np.array(-1, np.float32)]
    run_case(tmp_path, one_hot_op(version, axis, mode), arrays, consts=(1, 2, 3))


@pytest.mark.parametrize("version,mode", ONE_HOT_MODES, ids=str)
@pytest.mark.parametrize("value_type", [np.float16, np.int32, np.uint8, np.int8, np.bool_], ids=str)
def test_one_hot_value_types(version, mode, value_type, tmp_path):
    on, off = (True, False) if value_type == np.bool_ else (3, 1)
    arrays = [np.array([[0, 3, -1], [5, -4, -5]], np.int32), np.array(4, np.int32), np.array(on, value_type),
              np.array(off, value_type)]
    run_case(tmp_path, one_hot_op(version, 1, mode), arrays, consts=(1,))


@pytest.mark.parametrize("index_type", [np.uint8, np.int8], ids=str)
def test_one_hot_small_index_types(index_type, tmp_path):
    """Hand-checked: OpenVINO accepts any integer index type but runs only i32 and i64 (the CPU
    plugin: "Only I32 is supported"; the reference: no kernel).  irrun runs them."""
    model, feeds = model_from_arrays(one_hot_op(1, 0), [np.array([2, 0, 7], index_type), np.array(3, np.int64),
                                                        np.array(5, np.int32), np.array(0, np.int32)],
                                     consts=(1, 2, 3))
    got = next(iter(irrun.load(save(model, tmp_path)).infer(feeds).values()))
    assert got.tolist() == [[0, 5, 0], [0, 0, 0], [5, 0, 0]]


def test_one_hot_f16_compressed_values(tmp_path):
    arrays = [np.array([[0, 2], [3, -1]], np.int64), np.array(3, np.int64), np.array(0.7, np.float32),
              np.array(-0.2, np.float32)]
    run_case(tmp_path, one_hot_op(16, 0, "normalize"), arrays, consts=(1, 2, 3), compress=True, rtol=1e-3)


def test_one_hot_i64_values_follow_reference(tmp_path):
    """The CPU plugin narrows i64 on/off values to int32 (2**40 + 3 comes out as 2**31 - 1)."""
    arrays = [np.array([0, 3, -1], np.int64), np.array(4, np.int64), np.array(2 ** 40 + 3, np.int64),
              np.array(-5, np.int64)]
    run_case(tmp_path, one_hot_op(16, 0, "normalize"), arrays, consts=(1, 2, 3), oracle="reference")


@pytest.mark.parametrize("depth", [0, 1, 6])
def test_one_hot_depths(depth, tmp_path):
    arrays = [np.array([[0, 2], [-1, 1]], np.int64), np.array(depth, np.int32), np.array(1, np.float32),
              np.array(0, np.float32)]
    run_case(tmp_path, one_hot_op(1, -1), arrays, consts=(1, 2, 3))


def test_one_hot_depth_known_at_run_time(tmp_path):
    arrays = [np.array([[0, 2], [3, 1]], np.int32), np.array(3, np.int64), np.array(1, np.float32),
              np.array(0, np.float32)]
    run_case(tmp_path, one_hot_op(16, 1, "normalize"), arrays, consts=(2, 3))


def test_one_hot_dynamic_shapes(tmp_path):
    arrays = [np.array([[0, 2, -3], [3, 1, 9]], np.int32), np.array(3, np.int64), np.array(7, np.int32),
              np.array(-7, np.int32)]
    run_case(tmp_path, one_hot_op(16, -1, "normalize"), arrays, consts=(1, 2, 3), dynamic=True)


def test_one_hot_spec_example_negative_indices(tmp_path):
    """OneHot-16: indices [0, -1, -4] with depth 3: normalize maps -1 to 2 and drops -4 (< -depth)."""
    arrays = [np.array([0, -1, -4], np.int64), np.array(3, np.int64), np.array(1, np.float32), np.array(0, np.float32)]
    got = run_case(tmp_path, one_hot_op(16, 1, "normalize"), arrays, consts=(1, 2, 3))
    assert next(iter(got.values())).tolist() == [[1, 0, 0], [0, 0, 1], [0, 0, 0]]


ONE_HOT_SHAPES = [
    ([2, 3], [], 1), ([2, 3], [], -1), ([2, 3], [], -3), ([2, 3], [], 3), ([2, 3], [], -4), ([], [], 0),
    ([-1, D(2, 5)], [], 2), (DYN, [], 0), ([2, 3], [1], 1), ([2, 3], DYN, 1),
]


@pytest.mark.parametrize("indices,depth_shape,axis", ONE_HOT_SHAPES, ids=str)
@pytest.mark.parametrize("version", [1, 16])
def test_one_hot_shape_function(indices, depth_shape, axis, version):
    nodes = [param(indices, np.int64), param(depth_shape, np.int64), param([]), param([])]
    attrs = {"axis": axis} if version == 1 else {"axis": axis, "negative_indices_mode": "normalize"}
    check_shape_function(one_hot_op(version, axis, "normalize"), "OneHot", version, attrs, nodes)


@pytest.mark.parametrize("depth", [4, 0, -2])
def test_one_hot_shape_function_known_depth(depth):
    nodes = [param([2, 3], np.int32), const(depth, np.int32), const(1, np.float32), const(0, np.float32)]
    check_shape_function(one_hot_op(1, 1), "OneHot", 1, {"axis": 1}, nodes)


@pytest.mark.parametrize("types", [(np.float32, np.int64, np.float32, np.float32),
                                   (np.int64, np.float32, np.float32, np.float32),
                                   (np.int64, np.int64, np.float32, np.int32),
                                   (np.uint8, np.int8, np.bool_, np.bool_)], ids=str)
def test_one_hot_shape_function_types(types):
    nodes = [param(s, t) for s, t in zip([[3], [], [], []], types)]
    check_shape_function(one_hot_op(1, 0), "OneHot", 1, {"axis": 0}, nodes)


# ---------------------------------------------------------------- validate

def test_wrong_declared_output_is_reported(tmp_path):
    xml = hand_ir(tmp_path, "EmbeddingBagPackedSum", [([5, 2], "FP32"), ([3, 4], "I32")], [4, 2], version="opset3")
    assert "E-DECLARED-SHAPE" in irrun.validate(xml).codes()


def test_inconsistent_operands_name_the_layer(tmp_path):
    xml = hand_ir(tmp_path, "EmbeddingSegmentsSum", [([5, 2], "FP32"), ([4], "I32"), ([3], "I32"), ([], "I32")],
                  [3, 2], version="opset3", name="seg_sum")
    report = irrun.validate(xml)
    assert any("seg_sum" in d.format() and "indices and segment_ids" in d.message for d in report.errors)


def test_mean_with_weights_is_an_error(tmp_path):
    xml = hand_ir(tmp_path, "EmbeddingBagPacked", [([5, 2], "FP32"), ([3, 4], "I32"), ([3, 4], "FP32")], [3, 2],
                  {"reduction": "mean"}, version="opset15", name="bag")
    report = irrun.validate(xml)
    assert any("bag" in d.format() and "reduction=sum only" in d.message for d in report.errors)
