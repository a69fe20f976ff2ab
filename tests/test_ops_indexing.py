"""Gather, GatherElements, GatherND and the Scatter*Update ops against OpenVINO.

Two kinds of differential test: shape functions alone, where OpenVINO's
partial-shape inference of a node built in Python is the oracle for
`Op.infer` (dynamic dims, dynamic rank, errors), and whole models run by the
CPU plugin and by irrun (`compare`).  Where the CPU plugin is known to be
wrong the reference evaluation is the oracle, and the test says why.
"""
import os
import re
import zlib

import numpy as np
import openvino as ov
import openvino.opset1 as ops1
import openvino.opset3 as ops3
import openvino.opset4 as ops4
import openvino.opset5 as ops5
import openvino.opset6 as ops6
import openvino.opset7 as ops7
import openvino.opset8 as ops8
import openvino.opset12 as ops12
import openvino.opset15 as ops15
import pytest

from ovutil import (
    as_tensor_type, check_shape_function, compare, compile_cpu, const, irrun_infer, model, model_from_arrays, only_output,
    openvino_refuses, param, random_data, replace_in_ir, save
)
import irrun
from irrun.errors import IrrunError, ShapeError

D = ov.Dimension
DYN = ov.PartialShape.dynamic()
RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _seeded(request):
    """Each test draws the same data however the run is selected or ordered
    (INDEXING_SEED=n draws other data, to shake out data-dependent differences)."""
    global RNG
    RNG = np.random.default_rng(zlib.crc32(request.node.name.encode()) + int(os.environ.get("INDEXING_SEED", "0")))


DATA_TYPES = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
              "boolean": np.bool_}


def sample(shape, dtype=np.float32):
    return random_data(RNG, shape, dtype)


def indices_for(shape, size, dtype=np.int64, *, negative=True):
    """Random indices into a dim of `size`, negative ones included (they count from the end)."""
    lo = -size if negative else 0
    return RNG.integers(lo, size, shape).astype(dtype)


def run_one(tmp_path, build, arrays, *, dynamic=False, oracle="cpu", consts=(), static_last=()):
    """`build(*nodes)` from `arrays` (see `model_from_arrays`) compared with OpenVINO."""
    m, feeds = model_from_arrays(build, arrays, consts=consts, dynamic=dynamic, static_last=static_last)
    return compare(m, feeds, tmp_path, oracle=oracle)


# ---------------------------------------------------------------- shape functions vs OpenVINO

GATHER_SHAPES = [
    # data, indices, axis, batch_dims
    ([2, 3, 4], [5], 1, 0), ([2, 3, 4], [], 1, 0), ([2, 3, 4], [2, 5], -1, 0), ([2, 3, 4], [0], 0, 0),
    ([2, 3, 4], [2, 5], 1, 1), ([2, 3, 4], [2, 5], 2, 1), ([2, 3, 4], [2, 3, 5], 2, 2),
    ([2, 3, 4], [2, 5], 1, -1), ([2, 3, 4], [2, 3], 2, -1), ([2, 3, 4], [2, 3], 1, 2),
    ([2, 3, 4], [3, 5], 1, 1), ([2, 3, 4], [5], 3, 0), ([2, 3, 4], [5], -4, 0), ([2, 3, 4], [2, 5], 0, 1),
    ([2, 3, 4], [2, 3], 2, 3), ([2, 3, 4], [2, 3], 2, -2),
    ([-1, 3, 4], [5], 0, 0), ([-1, 3, 4], [-1, 5], 1, 1), ([D(1, 4), 3], [D(2, 6), 7], 1, 1),
    ([D(1, 4), 3], [D(5, 6), 7], 1, 1), ([2, -1], [-1], -1, 0), (DYN, [2, 3], 1, 0), ([2, 3, 4], DYN, 1, 0),
    (DYN, [2, 3], 1, 1), ([2, 3, 4], DYN, 1, -1), (DYN, DYN, 0, 0), ([5], [], 0, 0), ([], [2], 0, 0),
]


@pytest.mark.parametrize("data,indices,axis,batch_dims", GATHER_SHAPES, ids=str)
def test_gather_shape_function(data, indices, axis, batch_dims):
    for version, build in ((7, ops7.gather), (8, ops8.gather)):
        check_shape_function(lambda d, i, a, build=build: build(d, i, a, batch_dims), "Gather", version,
                             {"batch_dims": batch_dims}, [param(data), param(indices, np.int64), const(axis)])
    if batch_dims == 0:
        check_shape_function(ops1.gather, "Gather", 1, {}, [param(data), param(indices, np.int64), const(axis)])


@pytest.mark.parametrize("data,indices,axis,batch_dims,ov_shape,words", [
    ([2, 3, 4], [2, 3], const(2), -3, "[2,3,3,2,3]", r"batch_dims -3 is out of range for indices \[2,3\]"),
    ([2, 3], [2, 3, 4], param([], np.int64), 2, "[2,3]", "batch_dims 2 needs data of rank above 2"),
], ids=["below_minus_indices_rank", "whole_data_rank"])
def test_gather_impossible_batch_dims_are_errors(data, indices, axis, batch_dims, ov_shape, words):
    """OpenVINO infers a shape for these, but no input can run: batch_dims -3 for indices of rank 2
    normalizes to -1 and the shape is made of out-of-range reads; batch_dims equal to the data
    rank leaves no axis at or after it to gather along.  irrun refuses both."""
    args = [param(data), param(indices, np.int64), axis]
    assert str(ops8.gather(*args, batch_dims).get_output_partial_shape(0)) == ov_shape
    with pytest.raises(ShapeError, match=words):
        irrun_infer("Gather", 8, {"batch_dims": batch_dims}, [as_tensor_type(a.output(0)) for a in args])


@pytest.mark.parametrize("data,indices,axis_shape,batch_dims", [
    ([2, 3, 4], [5], [], 0), ([2, 3, 4], [2, 5], [1], 1), ([2, 3, 4], [2, 5], [-1], 0), ([2, 3, 4], [5], [2], 0),
    (DYN, [2, 5], [], 1), ([2, 3, 4], [2, 5], [], -1), ([2, 3, 4], [2, 5], [], 3)], ids=str)
def test_gather_shape_function_unknown_axis(data, indices, axis_shape, batch_dims):
    """The axis known only at run time: the rank (and the batch dims) are still known."""
    check_shape_function(lambda d, i, a: ops8.gather(d, i, a, batch_dims), "Gather", 8, {"batch_dims": batch_dims},
                         [param(data), param(indices, np.int64), param(axis_shape, np.int64)])


@pytest.mark.parametrize("version", [1, 7, 8])
@pytest.mark.parametrize("indices_type,axis_type", [(np.int32, np.int64), (np.uint8, np.int32), (np.float32, np.int64),
                                                    (np.int64, np.float32), (np.bool_, np.int64)], ids=str)
def test_gather_shape_function_index_types(version, indices_type, axis_type):
    """Gather-1 reads any numeric indices and axis; Gather-7/8 need integers."""
    build = {1: ops1.gather, 7: ops7.gather, 8: ops8.gather}[version]
    check_shape_function(build, "Gather", version, {}, [param([2, 3]), param([4], indices_type), const(1, axis_type)])


GATHER_ELEMENTS_SHAPES = [
    # data, indices, axis
    ([3, 4], [5, 4], 0), ([3, 4], [3, 7], -1), ([3, 4], [2, 4], 1), ([3, 4], [3, 4, 1], 0), ([3, 4], [3, 4], 2),
    ([3, 4], [3, 4], -3), ([-1, 4], [5, -1], 0), ([-1, 4], [-1, 2], 0), ([D(2, 5), 4], [D(4, 8), 6], 1),
    ([D(2, 3), 4], [D(4, 8), 6], 1), (DYN, [3, 4], 1), ([3, 4], DYN, 0), (DYN, DYN, 0), ([], [1], 0), ([3], [], 0),
    ([3, 4, 5], [3, 1, 5], 1),
]


@pytest.mark.parametrize("data,indices,axis", GATHER_ELEMENTS_SHAPES, ids=str)
def test_gather_elements_shape_function(data, indices, axis):
    check_shape_function(lambda d, i: ops6.gather_elements(d, i, axis), "GatherElements", 6, {"axis": axis},
                         [param(data), param(indices, np.int32)])


@pytest.mark.parametrize("indices_type", [np.int32, np.int64, np.uint8, np.int8, np.float32], ids=str)
def test_gather_elements_shape_function_index_types(indices_type):
    check_shape_function(lambda d, i: ops6.gather_elements(d, i, 0), "GatherElements", 6, {"axis": 0},
                         [param([3, 4]), param([2, 4], indices_type)])


GATHER_ND_SHAPES = [
    # data, indices, batch_dims
    ([3, 4, 5], [2], 0), ([3, 4, 5], [6, 1], 0), ([3, 4, 5], [6, 3], 0), ([3, 4, 5], [6, 4], 0),
    ([3, 4, 5], [7, 6, 0], 0), ([3, 4, 5], [3, 2, 1], 1), ([3, 4, 5], [3, 2], 1), ([3, 4, 5], [3, 4, 2, 1], 2),
    ([3, 4, 5, 6], [3, 4, 7, 1], 2), ([3, 4, 5, 6], [3, 4, 2], 2), ([3, 4, 5], [4, 2, 1], 1), ([3, 4, 5], [3, 4], 3),
    ([3, 4, 5], [3, 4, 2, 2], 2), ([3, 4, 5], [3, 4, 7, 1], 3), ([-1, 4, 5], [3, -1, 1], 1), ([3, 4, 5], [1, 2, 1], 1),
    ([-1, -1, 5], [-1, -1, 2, 1], 2), ([D(2, 6), 4, 5], [D(3, 8), 2, 1], 1), ([3, 4, 5], [6, -1], 0),
    (DYN, [6, 2], 0), ([3, 4], DYN, 0), ([3, 4, 5], [], 0), ([], [2], 0), ([3, 4], [2, 1], 4),
]


@pytest.mark.parametrize("data,indices,batch_dims", GATHER_ND_SHAPES, ids=str)
@pytest.mark.parametrize("version", [5, 8])
def test_gather_nd_shape_function(data, indices, batch_dims, version):
    build = ops5.gather_nd if version == 5 else ops8.gather_nd
    check_shape_function(lambda d, i: build(d, i, batch_dims), "GatherND", version, {"batch_dims": batch_dims},
                         [param(data), param(indices, np.int32)])


@pytest.mark.parametrize("indices_type", [np.int32, np.int64, np.uint8, np.float32], ids=str)
def test_gather_nd_shape_function_index_types(indices_type):
    check_shape_function(lambda d, i: ops8.gather_nd(d, i, 0), "GatherND", 8, {"batch_dims": 0},
                         [param([3, 4]), param([2, 1], indices_type)])


SCATTER_UPDATE_SHAPES = [
    # data, indices, updates, axis
    ([4, 5], [2], [2, 5], 0), ([4, 5], [2], [4, 2], 1), ([4, 5], [2, 3], [4, 2, 3], -1), ([4, 5], [], [5], 0),
    ([4, 5], [2], [2, 4], 0), ([4, 5], [2], [3, 5], 0), ([4, 5], [2], [2, 5, 1], 0), ([4, 5], [2], [2, 5], 2),
    ([4, 5], [2], [2, 5], -3), ([-1, 5], [2], [2, -1], 0), ([-1, 5], [2], [7, 2], 1), (DYN, [2], [2, 5], 0),
    ([4, 5], DYN, [2, 5], 0), ([4, 5], [2], DYN, 0), ([D(2, 6), 5], [-1], [D(7, 9), -1], 1),
    ([D(2, 6), 5], [3], [4, D(1, 2)], 1), ([5], [], [], 0), ([], [], [], 0), ([], [2], [1], 0),
]


@pytest.mark.parametrize("data,indices,updates,axis", SCATTER_UPDATE_SHAPES, ids=str)
def test_scatter_update_shape_function(data, indices, updates, axis):
    check_shape_function(ops3.scatter_update, "ScatterUpdate", 3, {},
                         [param(data), param(indices, np.int64), param(updates), const(axis)])


@pytest.mark.parametrize("axis_shape", [[], [1], [2], [-1], [1, 1]], ids=str)
def test_scatter_update_shape_function_unknown_axis(axis_shape):
    check_shape_function(ops3.scatter_update, "ScatterUpdate", 3, {},
                         [param([4, 5]), param([2], np.int64), param([2, 5]), param(axis_shape, np.int64)])


@pytest.mark.parametrize("indices_type,updates_type,axis_type", [
    (np.int32, np.float32, np.int32), (np.uint8, np.float32, np.uint8), (np.float32, np.float32, np.int64),
    (np.int64, np.float16, np.int64), (np.int64, np.float32, np.float32)], ids=str)
def test_scatter_update_shape_function_types(indices_type, updates_type, axis_type):
    check_shape_function(ops3.scatter_update, "ScatterUpdate", 3, {},
                         [param([4, 5]), param([2], indices_type), param([2, 5], updates_type), const(0, axis_type)])


SCATTER_ELEMENTS_SHAPES = [
    # data, indices, updates, axis
    ([4, 5], [2, 5], [2, 5], 0), ([4, 5], [4, 3], [4, 3], -1), ([4, 5], [7, 9], [7, 9], 1), ([4, 5], [2], [2], 0),
    ([4, 5], [2, 5], [2, 4], 0), ([4, 5], [2, 5], [2, 5], 2), ([4, 5], [2, 5], [2, 5], -3),
    ([-1, 5], [-1, 2], [3, -1], 0),
    (DYN, [2, 5], [2, 5], 1), (DYN, [2, 5], [2, 5], 7), ([4, 5], DYN, [2, 5], 0), ([4, 5], [2, 5], DYN, 0),
    ([D(2, 6), 5], [D(1, 3), 5], [D(3, 4), 5], 0), ([D(2, 6), 5], [D(1, 2), 5], [D(3, 4), 5], 0),
]


@pytest.mark.parametrize("data,indices,updates,axis", SCATTER_ELEMENTS_SHAPES, ids=str)
def test_scatter_elements_update_shape_function(data, indices, updates, axis):
    args = [param(data), param(indices, np.int32), param(updates), const(axis)]
    check_shape_function(ops3.scatter_elements_update, "ScatterElementsUpdate", 3, {}, args)
    check_shape_function(lambda *a: ops12.scatter_elements_update(*a, "max", False), "ScatterElementsUpdate", 12,
                         {"reduction": "max", "use_init_val": False}, args)


def test_scatter_elements_update_of_a_scalar_is_an_error():
    """OpenVINO's shape inference accepts scalar data, indices and updates; its reference
    evaluation then crashes (segmentation fault).  irrun refuses the layer."""
    args = [param([]), param([], np.int64), param([]), const(0)]
    assert str(ops3.scatter_elements_update(*args).get_output_partial_shape(0)) == "[]"
    with pytest.raises(ShapeError, match="data is a scalar"):
        irrun_infer("ScatterElementsUpdate", 3, {}, [as_tensor_type(a.output(0)) for a in args])


@pytest.mark.parametrize("axis_shape", [[], [1], [2], [-1], [1, 1]], ids=str)
def test_scatter_elements_update_shape_function_unknown_axis(axis_shape):
    check_shape_function(ops3.scatter_elements_update, "ScatterElementsUpdate", 3, {},
                         [param([4, 5]), param([2, 5], np.int64), param([2, 5]), param(axis_shape, np.int64)])


@pytest.mark.parametrize("data_type,indices_type,axis_type,reduction", [
    (np.float32, np.uint8, np.int32, "sum"), (np.float32, np.bool_, np.int64, "none"),
    (np.float32, np.float32, np.int64, "none"), (np.float32, np.int64, np.float32, "sum"),
    (np.bool_, np.int64, np.int64, "mean"), (np.bool_, np.int64, np.int64, "prod"),
    (np.int8, np.int32, np.int8, "mean")],
    ids=str)
def test_scatter_elements_update_shape_function_types(data_type, indices_type, axis_type, reduction):
    check_shape_function(lambda *a: ops12.scatter_elements_update(*a, reduction), "ScatterElementsUpdate", 12,
                         {"reduction": reduction},
                         [param([4, 5], data_type), param([2, 5], indices_type), param([2, 5], data_type),
                          const(0, axis_type)])


SCATTER_ND_SHAPES = [
    # data, indices, updates
    ([4, 5, 6], [3, 1], [3, 5, 6]), ([4, 5, 6], [3, 2], [3, 6]), ([4, 5, 6], [3, 3], [3]),
    ([4, 5, 6], [2, 7, 2], [2, 7, 6]), ([4, 5, 6], [1, 3], []), ([4, 5, 6], [3], []), ([4, 5, 6], [3], [1]),
    ([4, 5, 6], [3], [2]), ([4, 5, 6], [2, 4], [2]), ([4, 5, 6], [3, 1], [3, 5]), ([4, 5, 6], [3, 1], [3, 5, 7]),
    ([4, 5, 6], [3, 1], [2, 5, 6]),
    ([4, 5, 6], [3, 0], [3, 4, 5, 6]), ([-1, 5, 6], [-1, 1], [3, -1, 6]), ([4, 5, 6], [3, -1], [3, 6]),
    (DYN, [3, 1], [3, 5]), ([4, 5, 6], DYN, [3, 5]), ([4, 5, 6], [3, 1], DYN), ([], [1], [1]), ([4], [], [1]),
    ([D(2, 6), 5], [D(1, 3), 1], [D(3, 4), 5]), ([D(2, 6), 5], [D(1, 2), 1], [D(3, 4), 5]),
]


@pytest.mark.parametrize("data,indices,updates", SCATTER_ND_SHAPES, ids=str)
def test_scatter_nd_update_shape_function(data, indices, updates):
    args = [param(data), param(indices, np.int32), param(updates)]
    check_shape_function(ops4.scatter_nd_update, "ScatterNDUpdate", 4, {}, args)
    check_shape_function(lambda *a: ops15.scatter_nd_update(*a, "sub"), "ScatterNDUpdate", 15, {"reduction": "sub"},
                         args)


@pytest.mark.parametrize("indices_type,updates_type", [(np.int64, np.float32), (np.uint8, np.float32),
                                                       (np.float32, np.float32), (np.int64, np.float16)], ids=str)
def test_scatter_nd_update_shape_function_types(indices_type, updates_type):
    check_shape_function(ops4.scatter_nd_update, "ScatterNDUpdate", 4, {},
                         [param([4, 5]), param([2, 1], indices_type), param([2, 5], updates_type)])


# ---------------------------------------------------------------- Gather

GATHER_VERSIONS = {1: lambda d, i, a, b: ops1.gather(d, i, a), 7: ops7.gather, 8: ops8.gather}


@pytest.mark.parametrize("dtype", DATA_TYPES)
@pytest.mark.parametrize("version", [1, 7, 8])
def test_gather_dtypes(version, dtype, tmp_path):
    data = sample([3, 5, 2], DATA_TYPES[dtype])
    run_one(tmp_path, lambda d, i, a: GATHER_VERSIONS[version](d, i, a, 0),
            [data, indices_for([2, 4], 5, negative=False), np.int64(1)], consts=(2,))


GATHER_CASES = [
    # data shape, indices shape, axis, batch_dims
    ([4, 3], [], 0, 0), ([4, 3], [6], -1, 0), ([2, 3, 4], [2, 5], 1, 1), ([2, 3, 4], [2, 3, 5], 2, 2),
    ([2, 3, 4, 5], [2, 6], 2, 1), ([2, 3, 4], [2, 5], -1, -1), ([2, 3, 4], [2, 3], 2, -1), ([2, 3, 4], [2], 1, 1),
]


@pytest.mark.parametrize("data_shape,indices_shape,axis,batch_dims", GATHER_CASES, ids=str)
@pytest.mark.parametrize("index_type", [np.int32, np.int64], ids=["i32", "i64"])
def test_gather8(data_shape, indices_shape, axis, batch_dims, index_type, tmp_path):
    """Negative indices count from the end; indices outside [-n, n-1] give 0."""
    n = data_shape[axis]
    idx = RNG.integers(-n - 2, n + 2, indices_shape).astype(index_type)
    run_one(tmp_path, lambda d, i, a: ops8.gather(d, i, a, batch_dims),
            [sample(data_shape), idx, np.int64(axis)], consts=(2,))


@pytest.mark.parametrize("data_shape,indices_shape,axis,batch_dims", [
    ([2, 3, 4], [0], 1, 0), ([2, 3, 4], [2, 0], 1, 1), ([2, 0, 4], [3], 2, 0), ([2, 0, 4], [2, 3], 1, 1)], ids=str)
@pytest.mark.parametrize("version", [1, 8])
def test_gather_empty_tensors_follow_reference(data_shape, indices_shape, axis, batch_dims, version, tmp_path):
    """The CPU plugin dies (SIGFPE) on an empty index tensor or empty data; the reference works."""
    run_one(tmp_path, lambda d, i, a: GATHER_VERSIONS[version](d, i, a, batch_dims if version == 8 else 0),
            [sample(data_shape), indices_for(indices_shape, max(data_shape[axis], 1)), np.int64(axis)],
            consts=(2,), oracle="reference")


@pytest.mark.parametrize("data_shape,indices_shape,axis,batch_dims", GATHER_CASES, ids=str)
def test_gather7_batch_dims(data_shape, indices_shape, axis, batch_dims, tmp_path):
    idx = indices_for(indices_shape, data_shape[axis], np.int32, negative=False)
    run_one(tmp_path, lambda d, i, a: ops7.gather(d, i, a, batch_dims),
            [sample(data_shape, np.float16), idx, np.int32(axis)], consts=(2,))


@pytest.mark.parametrize("version", [1, 7])
def test_gather1_and_7_negative_indices_follow_reference(version, tmp_path):
    """The CPU plugin gives 0 for negative indices of Gather-1/7 (its spec allows [0, n-1] only);
    OpenVINO's reference evaluation, and its constant folding at load, count them from the end
    like Gather-8.  irrun follows the reference."""
    data, idx = sample([2, 5]), np.array([[0, -1, 4, 5, -5, -6]], np.int64)
    got = run_one(tmp_path, lambda d, i, a: GATHER_VERSIONS[version](d, i, a, 0), [data, idx, np.int64(1)],
                  consts=(2,), oracle="reference")
    np.testing.assert_array_equal(next(iter(got.values()))[:, 0, 1], data[:, 4])


@pytest.mark.parametrize("version", [1, 7, 8])
def test_gather_dynamic_shapes(version, tmp_path):
    data, idx = sample([3, 4, 5]), indices_for([2, 3], 4, negative=version == 8)
    run_one(tmp_path, lambda d, i, a: GATHER_VERSIONS[version](d, i, a, 0), [data, idx, np.int64(-2)],
            consts=(2,), dynamic=True)


def test_gather8_dynamic_batch_dims(tmp_path):
    run_one(tmp_path, lambda d, i, a: ops8.gather(d, i, a, -1),
            [sample([2, 3, 4]), indices_for([2, 6], 3), np.int64(1)], consts=(2,), dynamic=True)


def test_gather_axis_known_only_at_run_time_follows_reference(tmp_path):
    """The CPU plugin refuses to compile a Gather whose axis is not a constant ("axis value is not set")."""
    run_one(tmp_path, lambda d, i, a: ops8.gather(d, i, a, 0), [sample([3, 4]), indices_for([5], 4), np.array([1])],
            oracle="reference")


def test_gather_i64_data_follows_reference(tmp_path):
    """The CPU plugin moves i64 data through int32 (2**40 + 5 comes out as 5)."""
    data = np.array([[2**40 + 5, -2**35, 7]], np.int64)
    run_one(tmp_path, lambda d, i, a: ops8.gather(d, i, a, 0), [data, np.array([2, -3, 1]), np.int64(1)],
            consts=(2,), oracle="reference")


def test_gather_of_constants_folds(tmp_path):
    table = const(np.arange(12).reshape(3, 4), np.float32)
    picked = ops8.gather(table, const([[2, -1], [0, 1]]), const(0), 0)       # [2,2,4], known at load
    x = param([2, 2, 4], name="x")
    compare(model(ops1.add(picked, x), [x]), [sample([2, 2, 4])], tmp_path)
    assert 'type="Gather"' in (tmp_path / "model.xml").read_text()


def test_shape_arithmetic_folds_at_load(tmp_path):
    """ShapeOf -> Gather -> Concat -> Reshape: the Reshape output is static after loading."""
    x = param([2, 3, 4, 5], name="x")
    dims = ops3.shape_of(x, "i64")
    batch = ops8.gather(dims, const([0]), const(0), 0)                  # [2]
    channels = ops7.gather(dims, const(1), const(-1), 0)                # 3, a scalar
    width = ops1.gather(dims, const([-1]), const(0))                    # [5]: Gather-1 wraps at load too
    target = ops1.concat([width, ops1.unsqueeze(channels, const([0])), const([-1]), batch], 0)
    m = model(ops1.reshape(x, target, False), [x])
    got = compare(m, [sample([2, 3, 4, 5])], tmp_path)
    assert re.findall(r'type="(Gather|ShapeOf)"', save(m, tmp_path).read_text()).count("Gather") == 3
    assert irrun.load(tmp_path / "model.xml").outputs[0].shape == (5, 3, 4, 2)
    assert next(iter(got.values())).shape == (5, 3, 4, 2)


# ---------------------------------------------------------------- GatherElements

@pytest.mark.parametrize("dtype", DATA_TYPES)
def test_gather_elements_dtypes(dtype, tmp_path):
    run_one(tmp_path, lambda d, i: ops6.gather_elements(d, i, 1),
            [sample([3, 4, 2], DATA_TYPES[dtype]), indices_for([3, 6, 2], 4)])


@pytest.mark.parametrize("data_shape,indices_shape,axis", [
    ([5], [7], 0), ([3, 4], [6, 4], 0), ([3, 4], [3, 2], -1), ([2, 3, 4, 5], [2, 3, 7, 5], 2),
    ([2, 3, 4], [2, 1, 4], -2),
    ([2, 3], [2, 0], 1)], ids=str)
@pytest.mark.parametrize("index_type", [np.int32, np.int64], ids=["i32", "i64"])
def test_gather_elements(data_shape, indices_shape, axis, index_type, tmp_path):
    """Negative indices count from the end (not in the spec; the CPU plugin does it)."""
    idx = indices_for(indices_shape, data_shape[axis], index_type)
    run_one(tmp_path, lambda d, i: ops6.gather_elements(d, i, axis), [sample(data_shape), idx])


@pytest.mark.parametrize("negative", [False, True], ids=["in-range", "negative"])
def test_gather_elements_last_axis_large(negative, tmp_path):
    """torch.gather along the last axis (a flat gather with the rows' starts), fewer and more indices
    than the axis holds, negative ones counting from the end; and along a middle axis."""
    data = sample([8, 64, 300])
    for shape, axis in (([8, 64, 700], -1), ([8, 64, 40], 2), ([8, 90, 300], 1)):
        idx = indices_for(shape, data.shape[axis], np.int64)
        if not negative:
            idx = np.where(idx < 0, idx + data.shape[axis], idx)
        run_one(tmp_path / f"{axis}{shape[axis]}", lambda d, i: ops6.gather_elements(d, i, axis), [data, idx])


def test_gather_elements_dynamic_shapes(tmp_path):
    run_one(tmp_path, lambda d, i: ops6.gather_elements(d, i, 0), [sample([3, 4]), indices_for([5, 4], 3)],
            dynamic=True)


def test_gather_elements_out_of_range_index_is_an_error(tmp_path):
    """The CPU plugin refuses it at run time too."""
    d, i = param([2, 3], name="d"), param([2, 2], np.int64, name="i")
    m = irrun.load(save(model(ops6.gather_elements(d, i, 1, name="pick"), [d, i]), tmp_path))
    with pytest.raises(IrrunError, match=r'"pick".*element 3 of a dim of size 3'):
        m.infer([sample([2, 3]), np.array([[0, 1], [3, 0]])])


# ---------------------------------------------------------------- GatherND

GATHER_ND_CASES = [
    # data shape, indices shape, batch_dims
    ([4, 3], [2], 0), ([4, 3], [5, 1], 0), ([4, 3, 2], [2, 3, 2], 0), ([4, 3, 2], [6, 3], 0), ([2, 3, 4], [2, 5, 1], 1),
    ([2, 3, 4, 5], [2, 3, 6, 1], 2), ([2, 3, 4, 5], [2, 3, 2], 2), ([2, 3, 4, 5, 2], [2, 3, 4, 7, 2], 3),
    ([2, 3, 4], [2, 0, 1], 1),
]


@pytest.mark.parametrize("data_shape,indices_shape,batch_dims", GATHER_ND_CASES, ids=str)
@pytest.mark.parametrize("version", [5, 8])
def test_gather_nd(data_shape, indices_shape, batch_dims, version, tmp_path):
    """GatherND-5 fuses the batch dims into one; negative indices count from the end."""
    k = indices_shape[-1]
    dims = data_shape[batch_dims:batch_dims + k]
    idx = np.stack([indices_for(indices_shape[:-1], n) for n in dims], axis=-1).astype(np.int32) if k else \
        np.zeros(indices_shape, np.int32)
    build = ops5.gather_nd if version == 5 else ops8.gather_nd
    run_one(tmp_path, lambda d, i: build(d, i, batch_dims), [sample(data_shape), idx])


@pytest.mark.parametrize("dtype", DATA_TYPES)
def test_gather_nd_dtypes(dtype, tmp_path):
    idx = np.stack([indices_for([3, 2], 4), indices_for([3, 2], 3)], axis=-1)
    run_one(tmp_path, lambda d, i: ops8.gather_nd(d, i, 0), [sample([4, 3, 2], DATA_TYPES[dtype]), idx])


@pytest.mark.parametrize("version", [5, 8])
def test_gather_nd_dynamic_shapes(version, tmp_path):
    build = ops5.gather_nd if version == 5 else ops8.gather_nd
    """The tuple length (last dim of indices) stays static: without it the output rank is
    dynamic, which the CPU plugin refuses to compile."""
    run_one(tmp_path, lambda d, i: build(d, i, 2), [sample([2, 3, 4, 5]), indices_for([2, 3, 6, 1], 4)],
            dynamic=True, static_last=(1,))


def test_gather_nd_empty_index_tuples_take_whole_slices(tmp_path):
    """Index tuples of length 0 select all of data (per batch).  The CPU plugin returns
    uninitialized memory here and there is no reference evaluation for GatherND, so the
    expectation is the spec's: [4,0] indices give 4 copies of data."""
    data = sample([2, 3])
    d, i = param([2, 3]), param([4, 0], np.int64)
    got = irrun.load(save(model(ops8.gather_nd(d, i, 0), [d, i]), tmp_path)).infer(
        [data, np.zeros((4, 0), np.int64)])
    np.testing.assert_array_equal(next(iter(got.values())), np.broadcast_to(data, (4, 2, 3)))


def test_gather_nd_out_of_range_index_is_an_error(tmp_path):
    """The CPU plugin reads outside the data (garbage values); irrun refuses."""
    d, i = param([2, 3], name="d"), param([2, 2], np.int64, name="i")
    m = irrun.load(save(model(ops8.gather_nd(d, i, 0, name="nd"), [d, i]), tmp_path))
    with pytest.raises(IrrunError, match=r'"nd".*position \(1, 1\) addresses element 5 of a dim of size 3'):
        m.infer([sample([2, 3]), np.array([[0, 1], [1, 5]])])


# ---------------------------------------------------------------- ScatterUpdate

@pytest.mark.parametrize("dtype", DATA_TYPES)
def test_scatter_update_dtypes(dtype, tmp_path):
    t = DATA_TYPES[dtype]
    run_one(tmp_path, ops3.scatter_update,
            [sample([4, 3], t), np.array([2, 0]), sample([2, 3], t), np.int64(0)], consts=(3,))


@pytest.mark.parametrize("data_shape,indices,axis", [
    ([5, 3], [[4, 0], [1, 3]], 0), ([2, 6, 3], [5, 1, 2], 1), ([2, 3, 4], [[0], [3]], -1), ([4, 3], [1, 3, 1], 0),
    ([4, 3], np.zeros((0,), np.int64), 1), ([4, 3], [[2, 2], [2, 0]], -2)], ids=str)
@pytest.mark.parametrize("index_type", [np.int32, np.int64], ids=["i32", "i64"])
def test_scatter_update(data_shape, indices, axis, index_type, tmp_path):
    """Repeated indices: the last update wins (index 1 in [1, 3, 1], 2 in [[2, 2], [2, 0]]), as in
    OpenVINO's reference, the oracle there: the CPU plugin writes them in parallel, and any one may
    win (the first of [1, 3, 1]'s in 1 run of 200)."""
    indices = np.asarray(indices, index_type)
    a = axis % len(data_shape)
    updates = sample(data_shape[:a] + list(indices.shape) + data_shape[a + 1:])
    run_one(tmp_path, ops3.scatter_update, [sample(data_shape), indices, updates, np.int32(axis)], consts=(3,),
            oracle=_oracle_for_places(indices.reshape(-1, 1) % data_shape[a]))


def test_scatter_update_dynamic_shapes(tmp_path):
    run_one(tmp_path, ops3.scatter_update, [sample([4, 3, 2]), np.array([[2], [0]]), sample([4, 2, 1, 2]),
                                            np.int64(1)], consts=(3,), dynamic=True)


def test_scatter_update_scalar_index_follows_reference(tmp_path):
    """The CPU plugin refuses to compile a 0-D index tensor ("is_not_supported_input")."""
    run_one(tmp_path, ops3.scatter_update, [sample([4, 3]), np.array(2), sample([3]), np.int64(0)], consts=(3,),
            oracle="reference")


def test_scatter_update_i64_data_follows_reference(tmp_path):
    """The CPU plugin moves i64 data through int32."""
    run_one(tmp_path, ops3.scatter_update, [np.array([[2**40 + 5, -2**35, 7]]), np.array([1]),
                                            np.array([[2**50]]), np.int64(1)], consts=(3,), oracle="reference")


def test_scatter_update_negative_index_is_an_error(tmp_path):
    """Negative indices are outside the spec's [0, n-1]; the CPU plugin and the reference both stop."""
    d, i, u = param([3, 4], name="d"), param([2], np.int64, name="i"), param([2, 4], name="u")
    m = irrun.load(save(model(ops3.scatter_update(d, i, u, const(0), name="su"), [d, i, u]), tmp_path))
    with pytest.raises(IrrunError, match=r'"su".*position \(0,\) addresses element -1 of a dim of size 3'):
        m.infer([sample([3, 4]), np.array([-1, 0]), sample([2, 4])])


# ---------------------------------------------------------------- ScatterElementsUpdate

def seu(reduction, use_init_val=True):
    if reduction is None:
        return ops3.scatter_elements_update
    return lambda d, i, u, a: ops12.scatter_elements_update(d, i, u, a, reduction, use_init_val)


# (reduction, use_init_val, dtype); None is ScatterElementsUpdate-3.  use_init_val matters only
# with a reduction, and mean is not defined for boolean (see the shape-function tests).
SEU_CASES = [(r, init, dtype) for r in (None, "none", "sum", "prod", "min", "max", "mean")
             for init in (True, False) for dtype in ("f32", "f16", "i32", "u8", "boolean")
             if (init or r not in (None, "none")) and (r, dtype) != ("mean", "boolean")]


@pytest.mark.parametrize("reduction,use_init_val,dtype", SEU_CASES, ids=str)
def test_scatter_elements_update_reductions(reduction, use_init_val, dtype, tmp_path):
    """Many repeated and negative indices (None: ScatterElementsUpdate-3); integer sums and
    products wrap.  Integer data is non-negative for mean: the CPU plugin truncates a negative
    mean, see the next test."""
    t = DATA_TYPES[dtype]
    data, updates = sample([4, 5], t), sample([6, 5], t)
    if reduction == "mean" and dtype == "i32":
        data, updates = np.abs(data), np.abs(updates)
    run_one(tmp_path, seu(reduction, use_init_val), [data, indices_for([6, 5], 4), updates, np.int64(0)],
            consts=(3,))


@pytest.mark.parametrize("use_init_val", [True, False])
def test_scatter_elements_update_integer_mean_rounds_down(use_init_val, tmp_path):
    """OpenVINO's reference rounds an integer mean toward -inf (as torch does): (41 - 50) / 2 = -5.
    The CPU plugin truncates toward zero (-4).  irrun follows the reference."""
    data = np.array([[1, -2, 3, 4], [5, 6, 7, 8]], np.int32)
    indices = np.array([[0, 3, 3], [1, 1, 0]], np.int64)
    updates = np.array([[10, -21, 30], [41, -50, 60]], np.int32)
    got = run_one(tmp_path, seu("mean", use_init_val), [data, indices, updates, np.int64(1)], consts=(3,),
                  oracle="reference")
    assert next(iter(got.values()))[1, 1] == (-5 if not use_init_val else -1)


@pytest.mark.parametrize("data_shape,indices_shape,axis", [
    ([6], [4], 0), ([4, 5], [2, 3], 1), ([3, 4, 5], [3, 2, 5], -2), ([3, 4, 5], [1, 4, 7], 2), ([3, 4], [0, 4], 0)],
    ids=str)
@pytest.mark.parametrize("version", [3, 12])
def test_scatter_elements_update_shapes(data_shape, indices_shape, axis, version, tmp_path):
    """Indices may be smaller than data in every dim."""
    idx = indices_for(indices_shape, data_shape[axis], np.int32)
    run_one(tmp_path, seu(None if version == 3 else "sum"), [sample(data_shape), idx, sample(indices_shape),
                                                               np.int32(axis)], consts=(3,))


@pytest.mark.parametrize("version", [3, 12])
def test_scatter_elements_update_dynamic_shapes(version, tmp_path):
    run_one(tmp_path, seu(None if version == 3 else "max"), [sample([4, 5]), indices_for([3, 5], 5), sample([3, 5]),
                                                               np.int64(-1)], consts=(3,), dynamic=True)


def test_scatter_elements_update_i64_data_follows_reference(tmp_path):
    """The CPU plugin moves i64 data through int32."""
    run_one(tmp_path, seu("sum"), [np.array([[2**40 + 5, -2**35, 7]]), np.array([[0, -3]]), np.array([[2**50, 3]]),
                                   np.int64(1)], consts=(3,), oracle="reference")


# ---------------------------------------------------------------- ScatterNDUpdate

def snd(reduction):
    if reduction is None:
        return ops4.scatter_nd_update
    return lambda d, i, u: ops15.scatter_nd_update(d, i, u, reduction)


def nd_indices(shape, dims, dtype=np.int64):
    """Index tuples (last dim of `shape`) into the leading `dims` of data, negative ones included."""
    return np.stack([indices_for(shape[:-1], n, dtype) for n in dims[:shape[-1]]], axis=-1)


def _oracle_for_places(places: np.ndarray) -> str:
    """The oracle of a scatter without a reduction writing these places ([updates, index], negative
    indices made positive): OpenVINO's reference where one repeats (it writes the updates in order,
    the last winning; the CPU plugin writes them in parallel, any one winning), else its CPU plugin."""
    return "reference" if len(np.unique(places, axis=0)) < len(places) else "cpu"


@pytest.mark.parametrize("dtype", ["f32", "f16", "i32", "u8", "boolean"])
@pytest.mark.parametrize("reduction", [None, "none", "sum", "sub", "prod", "min", "max"])
def test_scatter_nd_update_reductions(reduction, dtype, tmp_path):
    """Repeated and negative index tuples.  (None: ScatterNDUpdate-4.)  Without a reduction the
    spec leaves the order of updates to one place undefined (the CPU plugin's varies between
    runs), so those index tuples are distinct.  Boolean sub is xor in the spec and the reference;
    the CPU plugin subtracts as integers and converts once at the end (False - True - True gives
    True), so the reference is the oracle there."""
    t = DATA_TYPES[dtype]
    data, updates = sample([3, 4, 2], t), sample([5, 2, 2], t)
    oracle = "reference" if (reduction, dtype) == ("sub", "boolean") else "cpu"
    if reduction in (None, "none"):
        positions = np.random.default_rng(3).permutation(12)[:10]
        indices = np.stack([positions // 4, positions % 4], axis=-1)
        indices[::3] -= [3, 4]   # negative ones too
        indices = indices.reshape(5, 2, 2)
    else:
        indices = nd_indices([5, 2, 2], [3, 4])
    run_one(tmp_path, snd(reduction), [data, indices, updates], oracle=oracle)


@pytest.mark.parametrize("data_shape,indices_shape", [
    ([8], [6, 1]), ([4, 5], [3, 2]), ([4, 5, 6], [2, 3, 1]), ([4, 5, 6], [7, 3]), ([4, 5, 6], [3]), ([4, 5], [0, 1])],
    ids=str)
@pytest.mark.parametrize("version", [4, 15])
@pytest.mark.parametrize("index_type", [np.int32, np.int64], ids=["i32", "i64"])
def test_scatter_nd_update_shapes(data_shape, indices_shape, version, index_type, tmp_path):
    k = indices_shape[-1]
    updates = sample(indices_shape[:-1] + data_shape[k:])
    indices = nd_indices(indices_shape, data_shape, index_type)
    places = indices.reshape(-1, k) % np.array(data_shape[:k]) if k else indices.reshape(-1, 1)
    run_one(tmp_path, snd(None if version == 4 else "sum"), [sample(data_shape), indices, updates],
            oracle=_oracle_for_places(places) if version == 4 else "cpu")


def test_scatter_nd_update_single_element_update_may_be_1d(tmp_path):
    """A full index tuple takes a scalar update; OpenVINO's shape inference accepts a 1-element
    tensor too, and so does the reference.  The CPU plugin refuses to compile it."""
    run_one(tmp_path, snd("sum"), [sample([4, 5]), np.array([1, -2]), sample([1])], oracle="reference")


@pytest.mark.parametrize("version", [4, 15])
def test_scatter_nd_update_dynamic_shapes(version, tmp_path):
    run_one(tmp_path, snd(None if version == 4 else "min"), [sample([4, 5, 6]), nd_indices([3, 2], [4, 5]),
                                                               sample([3, 6])], dynamic=True, static_last=(1,))


@pytest.mark.parametrize("reduction", [None, "sum"])
def test_scatter_nd_update_empty_tuples_follow_reference(reduction, tmp_path):
    """Index tuples of length 0 address all of data: the CPU plugin leaves data unchanged,
    the reference applies each update to the whole tensor (sum: data + both updates)."""
    run_one(tmp_path, snd(reduction), [sample([2, 3]), np.zeros((2, 0), np.int64), sample([2, 2, 3])],
            oracle="reference")


def test_scatter_nd_update_i64_data_follows_reference(tmp_path):
    """The CPU plugin moves i64 data through int32."""
    run_one(tmp_path, snd("sum"), [np.array([[2**40 + 5, -2**35, 7]]), np.array([[0, 0], [0, -3]]),
                                   np.array([2**50, 3])], oracle="reference")


@pytest.mark.parametrize("reduction", ["min", "max"])
@pytest.mark.parametrize("op", ["ScatterElementsUpdate-12", "ScatterNDUpdate-15"])
def test_scatter_min_max_with_nan(op, reduction, tmp_path):
    """std::min/max(accumulator, update): a NaN update is skipped, a NaN in data stays.  The
    reference of ScatterElementsUpdate-12 swaps the operands (a NaN update replaces the value,
    a NaN in data is replaced); irrun follows the CPU plugin and ScatterNDUpdate's reference."""
    data = np.array([1, np.nan, 5, np.nan, 2], np.float32)
    indices = np.array([0, 1, 2, 2, 3, 4], np.int64)
    updates = np.array([np.nan, 3, np.nan, 7, np.nan, 4], np.float32)
    if op.startswith("ScatterElements"):
        run_one(tmp_path, seu(reduction, True), [data, indices, updates, np.int64(0)], consts=(3,))
    else:
        run_one(tmp_path, snd(reduction), [data, indices[:, None], updates])



@pytest.mark.parametrize("op", ["ScatterElementsUpdate-12", "ScatterNDUpdate-15"])
def test_scatter_f16_accumulates_in_f32(op, tmp_path):
    """2048 + 1 + 1 + 1 is 2051 in f32, 2052 once rounded to f16; in f16 steps it stays 2048."""
    data, updates = np.array([2048, 1], np.float16), np.ones(3, np.float16)
    if op.startswith("ScatterElements"):
        got = run_one(tmp_path, seu("sum"), [data, np.zeros(3, np.int64), updates, np.int64(0)], consts=(3,))
    else:
        got = run_one(tmp_path, snd("sum"), [data, np.zeros((3, 1), np.int64), updates])
    assert only_output(got)[0] == 2052


# ---------------------------------------------------------------- the specs' worked examples, checked by hand

GATHER7_DATA_2x5 = np.arange(1, 11, dtype=np.int32).reshape(2, 5)


@pytest.mark.parametrize("data,indices,axis,batch_dims,expected", [
    (np.arange(1, 6), [0, 0, 4], 0, 0, [1, 1, 5]),                                              # example 1
    (GATHER7_DATA_2x5, [[0, 0, 4], [4, 0, 0]], 1, 1, [[1, 1, 5], [10, 6, 6]]),                  # example 2
    (np.arange(1, 21).reshape(2, 2, 5), [[[0, 0, 4], [4, 0, 0]], [[1, 2, 4], [4, 3, 2]]], 2, 2,
     [[[1, 1, 5], [10, 6, 6]], [[12, 13, 15], [20, 19, 18]]]),                                  # example 3
    (np.arange(1, 41).reshape(2, 1, 5, 4), [[1, 2, 4], [4, 3, 2]], 2, 1,
     [[[[5, 6, 7, 8], [9, 10, 11, 12], [17, 18, 19, 20]]],
      [[[37, 38, 39, 40], [33, 34, 35, 36], [29, 30, 31, 32]]]]),                               # example 4
    (GATHER7_DATA_2x5, [[0, 0, 4], [4, 0, 0]], 1, -1, [[1, 1, 5], [10, 6, 6]]),                 # example 5
], ids=["ex1", "ex2", "ex3", "ex4", "ex5"])
def test_gather7_spec_examples(data, indices, axis, batch_dims, expected, tmp_path):
    got = run_one(tmp_path, lambda d, i, a: ops7.gather(d, i, a, batch_dims),
                  [np.asarray(data, np.int32), np.asarray(indices, np.int32), np.int64(axis)], consts=(2,))
    np.testing.assert_array_equal(only_output(got), expected)


@pytest.mark.parametrize("data,indices,axis,expected", [
    ([[1, 2], [3, 4]], [[0, 1], [0, 0]], 0, [[1, 4], [1, 2]]),                                 # example 1
    ([[1, 7], [4, 3]], [[1, 1, 0], [1, 0, 1]], 1, [[7, 7, 1], [3, 4, 3]]),                     # example 2
    (np.arange(1, 10).reshape(3, 3), [[1, 0, 1], [1, 2, 0]], 0, [[4, 2, 6], [4, 8, 3]]),       # example 3
], ids=["ex1", "ex2", "ex3"])
def test_gather_elements_spec_examples(data, indices, axis, expected, tmp_path):
    got = run_one(tmp_path, lambda d, i: ops6.gather_elements(d, i, axis),
                  [np.asarray(data, np.int32), np.asarray(indices, np.int32)])
    np.testing.assert_array_equal(only_output(got), expected)


@pytest.mark.parametrize("data,indices,batch_dims,expected", [
    ([[1, 2], [3, 4]], [[0, 0], [1, 0]], 0, [1, 3]),                                            # example 1
    ([[1, 2], [3, 4]], [[1], [0]], 0, [[3, 4], [1, 2]]),                                        # example 2
    ([[1, 2], [3, 4]], [[[1]], [[0]]], 0, [[[3, 4]], [[1, 2]]]),                                # example 3
    ([[1, 2], [3, 4]], [[1], [0]], 1, [2, 3]),                                                  # example 4
    (np.arange(1, 25).reshape(2, 3, 4), [[1], [0]], 1, [[5, 6, 7, 8], [13, 14, 15, 16]]),       # example 5
    (np.arange(1, 25).reshape(2, 3, 4), [[[[1]], [[0]], [[2]]], [[[0]], [[2]], [[2]]]], 2,
     [[[2], [5], [11]], [[13], [19], [23]]]),                                                   # example 6
    (np.arange(1, 17).reshape(1, 2, 2, 4), [[[[1], [0]], [[3], [2]]]], 3, [[[2, 5], [12, 15]]]),  # example 7
], ids=["ex1", "ex2", "ex3", "ex4", "ex5", "ex6", "ex7"])
@pytest.mark.parametrize("version", [5, 8])
def test_gather_nd_spec_examples(data, indices, batch_dims, expected, version, tmp_path):
    """The GatherND-8 examples; GatherND-5 gives the same values with the batch dims fused."""
    build = ops5.gather_nd if version == 5 else ops8.gather_nd
    got = only_output(run_one(tmp_path, lambda d, i: build(d, i, batch_dims),
                              [np.asarray(data, np.float32), np.asarray(indices, np.int64)]))
    expected = np.asarray(expected, np.float32)
    if version == 5 and batch_dims > 1:
        expected = expected.reshape((-1,) + expected.shape[batch_dims:])
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("data,indices,updates,axis,reduction,use_init_val,expected", [
    ([2, 3, 4, 6], [1, 0, 0, -2, -1, 2], [10, 20, 30, 40, 70, 60], 0, "sum", True, [52, 13, 104, 76]),
    ([2, 3, 4, 6], [1, 0, 0, 2, 3, 2], [10, 20, 30, 40, 70, 60], 0, "sum", False, [50, 10, 100, 70]),
    (np.zeros((3, 4)), [[1, 2], [0, 3]], [[11, 12], [13, 14]], 1, "none", True,
     [[0, 11, 12, 0], [13, 0, 0, 14], [0, 0, 0, 0]]),
    (np.ones((3, 4)), [[1, 1], [0, 3]], [[11, 12], [13, 14]], 1, "sum", True, [[1, 24, 1, 1], [14, 1, 1, 15], [1] * 4]),
    (np.full((3, 4), 2), [[1, 1], [0, 3]], [[11, 12], [13, 14]], 1, "prod", True,
     [[2, 264, 2, 2], [26, 2, 2, 28], [2] * 4]),
], ids=["ex1", "ex2", "ex3", "ex4", "ex5"])
def test_scatter_elements_update12_spec_examples(data, indices, updates, axis, reduction, use_init_val, expected,
                                                 tmp_path):
    got = run_one(tmp_path, seu(reduction, use_init_val),
                  [np.asarray(data, np.int32), np.asarray(indices, np.int64), np.asarray(updates, np.int32),
                   np.array([axis])], consts=(3,))
    np.testing.assert_array_equal(only_output(got), expected)


@pytest.mark.parametrize("reduction,expected", [
    ("none", [50, 40, 20, 4]),      # the spec says [50, 20, 20, 4]: index -3 (1) is last set to 40
    ("sum", [61, 72, 23, 4]),
    ("sub", [-59, -68, -17, 4]),
    ("prod", [500, 2400, 60, 4]),   # the spec says [500, 3600, 40, 4]: 2*30*40 = 2400, 3*20 = 60
])
def test_scatter_nd_update15_spec_examples(reduction, expected, tmp_path):
    """(Without a reduction the places repeat: OpenVINO's reference is the oracle, see
    `_oracle_for_places`.)"""
    indices = np.array([[0], [2], [-3], [-3], [0]])
    got = run_one(tmp_path, snd(reduction), [np.array([1, 2, 3, 4], np.int32), indices,
                                             np.array([10, 20, 30, 40, 50], np.int32)],
                  oracle=_oracle_for_places(indices % 4) if reduction == "none" else "cpu")
    np.testing.assert_array_equal(only_output(got), expected)


def test_scatter_nd_update15_spec_example_with_slices(tmp_path):
    """The 8-element example: the spec's output has 4 at index 4, where [4] -> 9 and [-4] -> 14 write
    (a place written twice: OpenVINO's reference is the oracle, see `_oracle_for_places`)."""
    indices = np.array([[4], [3], [1], [7], [-2], [-4]])
    got = run_one(tmp_path, snd("none"), [np.arange(1, 9, dtype=np.float32), indices, np.arange(9, 15, dtype=np.float32)],
                  oracle=_oracle_for_places(indices % 8))
    np.testing.assert_array_equal(only_output(got), [1, 11, 3, 10, 14, 6, 13, 12])


def test_scatter_update_spec_example(tmp_path):
    data = np.array([[-1, 1, -1, 3, 4], [-1, 6, -1, 8, 9], [-1, 11, 1, 13, 14]], np.float32)
    updates = np.array([[1, 1], [1, 1], [1, 2]], np.float32)
    got = run_one(tmp_path, ops3.scatter_update, [data, np.array([0, 2]), updates, np.array([1])], consts=(3,))
    np.testing.assert_array_equal(only_output(got), [[1, 1, 1, 3, 4], [1, 6, 1, 8, 9], [1, 11, 2, 13, 14]])


# ---------------------------------------------------------------- validate: attributes and defective IRs

def errors_of(xml):
    return [d for d in irrun.validate(xml).errors]


def default_attribute_cases():
    """(model built with the attribute at its default value, the attribute as written, feeds)."""
    d, i, u = param([3, 3], name="d"), param([3, 3], np.int64, name="i"), param([3, 3], name="u")
    i1 = param([3, 1], np.int64, name="i1")
    # (each place written once: without a reduction the CPU plugin may let any of a place's updates win)
    data, idx, upd = sample([3, 3]), np.stack([RNG.permutation(3) for _ in range(3)], axis=1), sample([3, 3])
    idx1 = RNG.permutation(3).reshape(3, 1)
    return {
        "gather": (model(ops8.gather(d, i, const(1), 0), [d, i]), 'batch_dims="0"', [data, idx]),
        "gather_elements": (model(ops6.gather_elements(d, i, 0), [d, i]), 'axis="0"', [data, idx]),
        "gather_nd": (model(ops8.gather_nd(d, i1, 0), [d, i1]), 'batch_dims="0"', [data, idx1]),
        "seu_reduction": (model(ops12.scatter_elements_update(d, i, u, const(0), "none"), [d, i, u]),
                          'reduction="none"', [data, idx, upd]),
        "seu_use_init_val": (model(ops12.scatter_elements_update(d, i, u, const(0), "sum", True), [d, i, u]),
                             'use_init_val="true"', [data, idx, upd]),
        "snd_reduction": (model(ops15.scatter_nd_update(d, i1, u, "none"), [d, i1, u]),
                          'reduction="none"', [data, idx1, upd]),
    }


@pytest.mark.parametrize("case", list(default_attribute_cases()))
def test_missing_attributes_take_openvino_defaults(case, tmp_path):
    """The IR reader takes batch_dims and axis as 0, reduction as none, use_init_val as true."""
    m, attribute, feeds = default_attribute_cases()[case]
    xml = replace_in_ir(save(m, tmp_path), " " + attribute, "")
    want = compile_cpu(xml)(feeds)[0]
    assert not errors_of(xml)
    np.testing.assert_allclose(only_output(irrun.load(xml).infer(feeds)), want, rtol=1e-6)


def test_declared_gather_shape_is_checked(tmp_path):
    d, i = param([2, 3, 4], name="d"), param([5], np.int64, name="i")
    xml = save(model(ops8.gather(d, i, const(1), 0, name="pick"), [d, i]), tmp_path)
    text = xml.read_text()
    block = re.search(r'name="pick".*?</layer>', text, re.DOTALL).group(0)
    fixed = re.sub(r"(<output>.*?)<dim>5</dim>", r"\1<dim>6</dim>", block, flags=re.DOTALL)
    xml.write_text(text.replace(block, fixed))
    problems = errors_of(xml)
    assert [(e.code, e.layer.name) for e in problems] == [("E-DECLARED-SHAPE", "pick")], [e.format() for e in problems]
    assert "declared [2,6,4], inferred [2,5,4]" in problems[0].message


def test_declared_gather_nd5_shape_names_the_fused_batch_dims(tmp_path):
    d, i = param([2, 3, 4], name="d"), param([2, 3, 1], np.int64, name="i")
    xml = save(model(ops5.gather_nd(d, i, 2, name="nd"), [d, i]), tmp_path)
    replace_in_ir(xml, "<dim>6</dim>", "<dim>5</dim>")
    problems = errors_of(xml)
    assert [(e.code, e.layer.type) for e in problems] == [("E-DECLARED-SHAPE", "GatherND")]
    assert "2 * 3 (the 2 batch dims fused)" in problems[0].message


def inconsistent_cases():
    d, i = param([2, 5, 3], name="d"), param([2, 5], np.int64, name="i")
    i3, i_nd = param([2, 5, 3], np.int64, name="i3"), param([2, 5, 1], np.int64, name="i_nd")
    b = param([2, 5, 3], np.bool_, name="b")
    return {
        "gather_batch_dims_rank": (model(ops8.gather(d, i, const(1), 1, name="bad"), [d, i]),
                                   'batch_dims="1"', 'batch_dims="3"',
                                   "batch_dims 3 is out of range for indices [2,5] of rank 2"),
        "gather_batch_dims_axis": (model(ops8.gather(d, i, const(1), 1, name="bad"), [d, i]),
                                   'batch_dims="1"', 'batch_dims="2"', "batch_dims 2 must not exceed the axis 1"),
        "gather_elements_axis": (model(ops6.gather_elements(d, i3, 1, name="bad"), [d, i3]),
                                 'axis="1"', 'axis="3"', "GatherElements axis 3 is out of range for rank 3"),
        "gather_nd_batch_dims": (model(ops8.gather_nd(d, i_nd, 1, name="bad"), [d, i_nd]),
                                 'batch_dims="1"', 'batch_dims="3"', "batch_dims 3 needs data of rank above 3"),
        "seu_boolean_mean": (model(ops12.scatter_elements_update(b, i3, b, const(0), "max", name="bad"), [b, i3]),
                             'reduction="max"', 'reduction="mean"', "reduction mean is not defined for boolean data"),
    }


@pytest.mark.parametrize("case", list(inconsistent_cases()))
def test_inconsistent_attributes_name_the_layer(case, tmp_path):
    """Each edit is one that OpenVINO refuses too."""
    m, old, new, words = inconsistent_cases()[case]
    xml = replace_in_ir(save(m, tmp_path), old, new)
    assert openvino_refuses(xml)
    problems = errors_of(xml)
    assert problems and problems[0].layer.name == "bad", [e.format() for e in problems]
    assert words in problems[0].message, problems[0].message


def test_gather_axis_out_of_range_names_the_layer(tmp_path):
    d, i = param([2, 3], name="d"), param([4], np.int64, name="i")
    xml = save(model(ops8.gather(d, i, const(1), 0, name="bad_axis"), [d, i]), tmp_path)
    bin_path = xml.with_suffix(".bin")
    bin_path.write_bytes(np.int64(2).tobytes())   # the only Const: the axis
    assert openvino_refuses(xml)
    problems = errors_of(xml)
    assert [(e.code, e.layer.name) for e in problems] == [("E-SHAPE", "bad_axis")]
    assert "Gather axis 2 is out of range for rank 2" in problems[0].message


def test_scatter_updates_of_the_wrong_shape_name_the_layer(tmp_path):
    d, i, u = param([4, 5], name="d"), param([2, 1], np.int64, name="i"), param([2, 5], name="u")
    xml = save(model(ops4.scatter_nd_update(d, i, u, name="bad_updates"), [d, i, u]), tmp_path)
    replace_in_ir(xml, 'shape="2,5"', 'shape="2,6"')
    replace_in_ir(xml, "<dim>2</dim>\n\t\t\t\t\t<dim>5</dim>", "<dim>2</dim>\n\t\t\t\t\t<dim>6</dim>", count=2)
    assert openvino_refuses(xml)
    problems = errors_of(xml)
    assert [(e.code, e.layer.name) for e in problems] == [("E-SHAPE", "bad_updates")], [e.format() for e in problems]
    assert "updates [2,6] must have shape [2,5]" in problems[0].message


@pytest.mark.parametrize("op", ["ScatterElementsUpdate", "ScatterNDUpdate"])
def test_scatter_index_out_of_range_at_run_time_names_the_layer(op, tmp_path):
    """The CPU plugin and the reference stop too."""
    d, i = param([3, 4], name="d"), param([2, 1], np.int64, name="i")
    if op == "ScatterElementsUpdate":
        node = ops12.scatter_elements_update(d, i, param([2, 1], name="u"), const(1), "sum", name="sc")
        feeds = [sample([3, 4]), np.array([[0], [4]]), sample([2, 1])]
    else:
        node = ops15.scatter_nd_update(d, i, param([2, 4], name="u"), "sum", name="sc")
        feeds = [sample([3, 4]), np.array([[0], [-4]]), sample([2, 4])]
    m = irrun.load(save(model(node, [d, i, node.input_value(2).get_node()]), tmp_path))
    with pytest.raises(IrrunError, match=r'"sc".*position \(1, 0\) addresses element -?\d of a dim of size [34]'):
        m.infer(feeds)
