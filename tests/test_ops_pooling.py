"""AvgPool-1/14/16, MaxPool-1/8/14, AdaptiveAvgPool-8 and AdaptiveMaxPool-8 against OpenVINO.

Three kinds of test:
* differential runs (`compare`): the model is saved as IR, run by the CPU
  plugin and by irrun, every output compared;
* shape functions alone: OpenVINO's partial-shape inference of a node built in
  Python is the oracle for `Op.infer` (dynamic dims, intervals, errors);
* hand-checked vectors: the spec's worked example and the hard-coded cases of
  OpenVINO's own reference tests (op_reference/avg_pool.cpp, max_pool.cpp),
  which decide where the CPU plugin and the reference disagree.
"""
from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset1 as ops1
import openvino.opset8 as ops8
import openvino.opset14 as ops14
import openvino.opset16 as ops16
import pytest
from lxml import etree

from ovutil import (
    assert_close, compare, edited_ir, evaluate_reference, irrun_infer, irrun_infer_all, irrun_outputs, layer_of,
    openvino_refuses, ov_shape_text, run_openvino, save, tensor_type
)
import irrun
from irrun import threads as irrun_threads
from irrun.errors import ShapeError
from irrun.shapes import format_shape

RNG = np.random.default_rng(11)
D = ov.Dimension
EXAMPLES = Path(__file__).resolve().parent.parent / "specs" / "examples"


def sample(shape, dtype=np.float32):
    dtype = np.dtype(dtype)
    if dtype.kind == "u":
        return RNG.integers(0, 250, shape).astype(dtype)
    if dtype.kind == "i":
        return RNG.integers(-100, 100, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def pool_model(make, shape, dtype=np.float32) -> ov.Model:
    """A model of one pooling node on a Parameter of `shape` (a list, -1 for dynamic, or a PartialShape)."""
    p = ov.op.Parameter(ov.Type(np.dtype(dtype)), ov.PartialShape(shape))
    return ov.Model(make(p).outputs(), [p])


def avg_pool(version, strides, pads_begin, pads_end, kernel, exclude_pad, rounding="floor", auto_pad="explicit",
             dilations=None):
    def make(p):
        if version == 1:
            return ops1.avg_pool(p, strides, pads_begin, pads_end, kernel, exclude_pad, rounding, auto_pad)
        if version == 14:
            return ops14.avg_pool(p, strides, pads_begin, pads_end, kernel, exclude_pad, rounding, auto_pad)
        return ops16.avg_pool(p, strides, pads_begin, pads_end, kernel, exclude_pad, rounding, auto_pad,
                              dilations=dilations)
    return make


def max_pool(version, strides, pads_begin, pads_end, kernel, rounding="floor", auto_pad="explicit",
             dilations=None, index_type="i64", axis=0):
    def make(p):
        if version == 1:
            return ops1.max_pool(p, strides, pads_begin, pads_end, kernel, rounding, auto_pad)
        module = ops8 if version == 8 else ops14
        return module.max_pool(p, strides, dilations or [1] * len(kernel), pads_begin, pads_end, kernel,
                               rounding, auto_pad, index_type, axis)
    return make


# ---------------------------------------------------------------- AvgPool differential

# (input spatial, kernel, strides, pads_begin, pads_end, dilations for v16).  No case lets a
# ceil-mode window lie wholly in padding: there the CPU plugin is wrong (test_avgpool_window_all_padding).
AVG_GEOMETRY = {
    "1d": ([9], [3], [2], [1], [1], [2]),
    "2d": ([7, 8], [3, 2], [2, 3], [1, 0], [0, 1], [1, 2]),
    "2d-overhang-no-pads": ([8, 7], [3, 3], [2, 2], [0, 0], [0, 0], [1, 1]),
    "2d-stride-over-kernel": ([10, 10], [2, 1], [3, 3], [0, 0], [1, 0], [1, 1]),
    "2d-stride-1": ([7, 8], [3, 4], [1, 1], [1, 2], [2, 1], [2, 1]),
    "3d": ([4, 5, 6], [2, 3, 2], [1, 2, 2], [0, 1, 1], [1, 1, 0], [2, 1, 1]),
}
AVG_MODES = [(1, "floor"), (1, "ceil"), (14, "ceil"), (14, "ceil_torch"), (16, "ceil_torch"), (16, "floor")]
AVG_CASES = [(geometry, version, rounding, auto_pad, (i + j) % 2 == 0)
             for i, geometry in enumerate(AVG_GEOMETRY)
             for j, (version, rounding) in enumerate(AVG_MODES)
             for auto_pad in ("explicit", "same_upper", "same_lower", "valid")]


@pytest.mark.parametrize("geometry, version, rounding, auto_pad, exclude_pad", AVG_CASES)
def test_avgpool_modes(geometry, version, rounding, auto_pad, exclude_pad, tmp_path):
    spatial, kernel, strides, pads_begin, pads_end, dilations = AVG_GEOMETRY[geometry]
    shape = [2, 3] + spatial
    make = avg_pool(version, strides, pads_begin, pads_end, kernel, exclude_pad, rounding, auto_pad,
                    dilations if version == 16 else None)
    compare(pool_model(make, shape), [sample(shape)], tmp_path)


@pytest.mark.parametrize("exclude_pad", [True, False])
@pytest.mark.parametrize("pads_begin, pads_end", [([1, 0], [0, 0]), ([0, 0], [0, 1]), ([0, 0], [0, 0])])
def test_avgpool_ceil_overhang_divisor(pads_begin, pads_end, exclude_pad, tmp_path):
    """Where a ceil-mode window runs past the end pad: without exclude-pad the divisor is the
    kernel size if any pad is non-zero (on any axis), else only the real elements count."""
    shape = [1, 2, 2, 4]
    make = avg_pool(1, [1, 2], pads_begin, pads_end, [2, 3], exclude_pad, "ceil")
    compare(pool_model(make, shape), [sample(shape)], tmp_path)


@pytest.mark.parametrize("auto_pad", ["same_upper", "same_lower"])
def test_avgpool_same_with_ceil_is_not_ceil_of_size_over_stride(auto_pad, tmp_path):
    """same_* pads 9 (kernel 2, stride 3) by 0/0, then ceil gives ceil(7 / 3) + 1 = 4 windows where
    ceil(9 / 3) would say 3.  The 4th row of windows starts past the input and holds no element:
    0 in the reference, NaN on the CPU plugin (see test_avgpool_window_all_padding)."""
    shape = [1, 2, 9, 10]
    x = sample(shape)
    model = pool_model(avg_pool(1, [3, 3], [0, 0], [0, 0], [2, 1], False, "ceil", auto_pad), shape)
    got = irrun_outputs(model, [x], tmp_path)[0]
    cpu = run_openvino(tmp_path / "model.xml", [x])[0]
    assert got.shape == cpu.shape == (1, 2, 4, 4)
    assert not irrun.validate(tmp_path / "model.xml").errors
    np.testing.assert_array_equal(got[:, :, 3], 0)
    assert np.isnan(cpu[:, :, 3]).all()
    np.testing.assert_allclose(got[:, :, :3], cpu[:, :, :3], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float16, np.int32, np.int8, np.uint8, np.int64])
@pytest.mark.parametrize("version, exclude_pad", [(1, True), (14, False)])
def test_avgpool_element_types(dtype, version, exclude_pad, tmp_path):
    """Integer averages are rounded half to even; f16 is averaged in f32."""
    shape = [2, 3, 6, 7]
    make = avg_pool(version, [1, 2], [1, 1], [1, 0], [2, 3], exclude_pad, "ceil")
    compare(pool_model(make, shape, dtype), [sample(shape, dtype)], tmp_path, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint8])
@pytest.mark.parametrize("version, exclude_pad, rounding", [(1, True, "floor"), (14, False, "ceil")])
@pytest.mark.parametrize("shape", [[2, 64, 7, 7], [1, 5, 3, 4, 2]], ids=["7x7", "3d"])
def test_avgpool_one_window_over_all_the_data(shape, dtype, version, exclude_pad, rounding, tmp_path):
    """A classifier's global pool (the window the data's size): one reduction per channel."""
    make = avg_pool(version, [1] * (len(shape) - 2), [0] * (len(shape) - 2), [0] * (len(shape) - 2), shape[2:],
                    exclude_pad, rounding)
    got = compare(pool_model(make, shape, dtype), [sample(shape, dtype)], tmp_path, rtol=1e-3, atol=1e-3)
    assert next(iter(got.values())).shape == tuple(shape[:2]) + (1,) * (len(shape) - 2)


@pytest.mark.parametrize("version", [1, 14, 16])
@pytest.mark.parametrize("shape, concrete", [([1, 3, -1, -1], [1, 3, 9, 6]),
                                             ([-1, 2, D(4, 12), 7], [3, 2, 10, 7])])
@pytest.mark.parametrize("auto_pad", ["explicit", "same_lower"])
def test_avgpool_dynamic_input(version, shape, concrete, auto_pad, tmp_path):
    make = avg_pool(version, [2, 1], [1, 0], [0, 1], [3, 2], False, "ceil", auto_pad,
                    [1, 2] if version == 16 else None)
    compare(pool_model(make, shape), [sample(concrete)], tmp_path)


# ---------------------------------------------------------------- AvgPool hand-checked

@pytest.mark.parametrize("exclude_pad, expected", [(True, [[1.0, 2.5], [5.5, 7.0]]),
                                                   (False, [[0.25, 1.25], [2.75, 7.0]])])
def test_avgpool_spec_worked_example(exclude_pad, expected, tmp_path):
    """The spec's exclude-pad description, by hand: the first 2x2 window holds one real value (1)
    and three padding zeros, so it averages to 1 / 1 = 1.0 with padding excluded, 1 / 4 = 0.25
    with it included.  The last window holds 5, 6, 8, 9 and no padding: 7 either way."""
    x = np.arange(1, 10, dtype=np.float32).reshape(1, 1, 3, 3)
    model = pool_model(avg_pool(1, [2, 2], [1, 1], [1, 1], [2, 2], exclude_pad), x.shape)
    got = irrun_outputs(model, [x], tmp_path)[0]
    np.testing.assert_array_equal(got, np.array(expected, np.float32).reshape(1, 1, 2, 2))
    np.testing.assert_array_equal(run_openvino(tmp_path / "model.xml", [x])[0], got)


def test_avgpool_window_all_padding(tmp_path):
    """Ceil mode keeps windows that start in the end padding.  OpenVINO's reference averages such
    a window to 0 (op_reference/avg_pool.cpp, last case); the CPU plugin returns NaN there.  irrun
    follows the reference.  (AvgPool has no `evaluate`, so the vector is the reference test's.)"""
    x = np.arange(1, 10, dtype=np.float32).reshape(1, 1, 3, 3)
    model = pool_model(avg_pool(1, [2, 2], [1, 1], [1, 1], [2, 2], True, "ceil"), x.shape)
    got = irrun_outputs(model, [x], tmp_path)[0]
    reference = np.array([1, 2.5, 0, 5.5, 7, 0, 0, 0, 0], np.float32).reshape(1, 1, 3, 3)
    np.testing.assert_array_equal(got, reference)
    cpu = run_openvino(tmp_path / "model.xml", [x])[0]
    np.testing.assert_array_equal(np.isnan(cpu), reference == 0)
    np.testing.assert_array_equal(cpu[reference != 0], reference[reference != 0])


# op_reference/avg_pool.cpp: (input shape, output values, strides, pads_begin, pads_end, kernel,
# exclude_pad, rounding, auto_pad); the input is 1, 2, 3, ... except where given.
AVG_REFERENCE = [
    ([1, 1, 3, 3], [3, 4, 6, 7], [1, 1], [0, 0], [0, 0], [2, 2], True, "floor", "explicit"),
    ([1, 1, 4, 4], [6, 7, 10, 11], [1, 1], [0, 0], [0, 0], [3, 3], True, "ceil", "explicit"),
    ([1, 1, 2, 2], [1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4], [1, 1], [1, 1], [1, 1], [2, 2], True, "ceil", "explicit"),
    ([1, 1, 1, 5], [1.5, 3, 4.5], [1, 2], [1, 1], [1, 1], [3, 3], True, "ceil", "explicit"),
    ([1, 1, 1, 5], [0.5, 2, 1], [1, 2], [1, 1], [1, 1], [3, 3], False, "ceil", "explicit"),
    ([1, 1, 3, 3], [3, 4, 2.25, 6, 7, 3.75, 3.75, 4.25, 2.25], [1, 1], [0, 0], [0, 0], [2, 2], False, "ceil",
     "same_upper"),
    ([1, 1, 3, 3], [0.25, 0.75, 1.25, 1.25, 3, 4, 2.75, 6, 7], [1, 1], [0, 0], [0, 0], [2, 2], False, "ceil",
     "same_lower"),
    ([1, 1, 2, 2, 2], [1.5, 3.5, 5.5, 7.5], [1, 1, 1], [0, 0, 0], [0, 0, 0], [1, 1, 2], True, "ceil", "valid"),
    ([1, 1, 3, 3], [1, 2.5, 0, 5.5, 7, 0, 0, 0, 0], [2, 2], [1, 1], [1, 1], [2, 2], True, "ceil", "explicit"),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("case", range(len(AVG_REFERENCE)))
def test_avgpool_reference_vectors(case, dtype, tmp_path):
    shape, expected, strides, pads_begin, pads_end, kernel, exclude_pad, rounding, auto_pad = AVG_REFERENCE[case]
    x = np.arange(1, np.prod(shape) + 1).reshape(shape).astype(dtype)
    if case == 4:
        x = np.array([2.5, 2, 12, 4, 5], dtype).reshape(shape)
    model = pool_model(avg_pool(1, strides, pads_begin, pads_end, kernel, exclude_pad, rounding, auto_pad),
                       shape, dtype)
    got = irrun_outputs(model, [x], tmp_path)[0]
    assert got.dtype == dtype
    np.testing.assert_allclose(got.ravel(), np.array(expected, dtype), rtol=1e-3)


# ---------------------------------------------------------------- MaxPool differential

# (input spatial, kernel, strides, pads_begin, pads_end, dilations for v8/v14)
MAX_GEOMETRY = {
    "1d": ([11], [3], [2], [1], [2], [2]),
    "2d": ([7, 9], [3, 2], [2, 3], [1, 0], [2, 1], [2, 1]),
    "2d-stride-over-kernel": ([9, 10], [2, 1], [3, 3], [0, 0], [0, 0], [1, 1]),
    "2d-stride-1": ([7, 9], [3, 4], [1, 1], [1, 2], [2, 1], [2, 1]),
    "3d-stride-1": ([5, 4, 6], [2, 3, 2], [1, 1, 1], [0, 1, 1], [1, 1, 0], [1, 1, 2]),
}
MAX_MODES = [(1, "floor", "i64", 0), (1, "ceil", "i64", 0), (8, "floor", "i32", 1), (8, "ceil", "i64", -1),
             (14, "ceil_torch", "i32", 2), (14, "ceil", "i64", 0)]
MAX_CASES = [(geometry, version, rounding, index_type, axis, auto_pad)
             for geometry in MAX_GEOMETRY
             for version, rounding, index_type, axis in MAX_MODES
             for auto_pad in ("explicit", "same_upper", "same_lower", "valid")]


@pytest.mark.parametrize("geometry, version, rounding, index_type, axis, auto_pad", MAX_CASES)
def test_maxpool_modes(geometry, version, rounding, index_type, axis, auto_pad, tmp_path):
    spatial, kernel, strides, pads_begin, pads_end, dilations = MAX_GEOMETRY[geometry]
    shape = [2, 3] + spatial
    make = max_pool(version, strides, pads_begin, pads_end, kernel, rounding, auto_pad,
                    dilations if version > 1 else None, index_type, axis)
    compare(pool_model(make, shape), [sample(shape)], tmp_path)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("threads", [1, 2])
def test_maxpool_values_in_channel_blocks(dtype, threads, tmp_path):
    """Values alone (the indices unread) of a pool large enough for irrun's channel blocks (one
    thread) or parts (two): NaN, -inf and windows reaching into the padding on both sides, a
    dilated 3x3 in ceil mode."""
    shape = [1, 6, 200, 240]       # 48 K elements a channel: blocks of 5 channels
    x = sample(shape, dtype)
    x[0, 2, ::7, ::5] = np.nan
    x[0, 4, 10:30, 40:60] = -np.inf
    x[0, 5, :4] = np.nan
    p = ov.op.Parameter(ov.Type(np.dtype(dtype)), ov.PartialShape(shape))
    pool = ops8.max_pool(p, [2, 2], [2, 1], [1, 2], [1, 1], [3, 3], "ceil", "explicit")
    xml = save(ov.Model([pool.output(0)], [p]), tmp_path)
    expected = run_openvino(xml, [x])[0]
    before = irrun_threads.threads()
    try:
        got = irrun.load(xml, threads=threads).infer([x])
    finally:
        irrun_threads.set_threads(before)
    assert_close(next(iter(got.values())), expected, what="values")


# Windows that tile the data (stride = kernel, no padding): irrun splits each axis into (outputs,
# taps) instead of sliding taps over it.  (spatial, kernel, rounding, tiles): ceil mode on sizes the
# kernel does not divide makes a last window run past the end, which the sliding path takes.
TILING = {
    "1d-odd": ([3873], [2], "floor", True),
    "2d-2x2": ([32, 256], [2, 2], "floor", True),
    "2d-2x2-large": ([128, 256], [2, 2], "floor", True),     # (NaN to the lowest value by a row)
    "2d-2x2-odd": ([9, 7], [2, 2], "floor", True),
    "2d-3x3": ([10, 9], [3, 3], "floor", True),
    "2d-1x2": ([5, 8], [1, 2], "floor", True),
    "2d-2x1": ([6, 5], [2, 1], "floor", True),
    "3d-2x2x2": ([4, 6, 5], [2, 2, 2], "floor", True),
    "2d-2x2-ceil-even": ([8, 6], [2, 2], "ceil", True),
    "2d-2x2-ceil-odd": ([9, 7], [2, 2], "ceil", False),
}


def _tiling_pool(geometry, dtype, batch, tmp_path):
    """(model file, data, OpenVINO's values) of a max pool of TILING[geometry] over `batch` samples
    of 3 channels (5 for one sample), NaN, -inf and a channel all NaN among float data."""
    spatial, kernel, rounding, _ = TILING[geometry]
    shape = [batch, 3 if batch > 1 else 5] + spatial
    x = sample(shape, dtype)
    if np.dtype(dtype).kind == "f":
        flat = x.reshape(-1)
        flat[::7] = np.nan
        flat[3::11] = -np.inf
        x[-1, 2] = np.nan           # every window of a channel NaN: the lowest value, as in OpenVINO
    p = ov.op.Parameter(ov.Type(np.dtype(dtype)), ov.PartialShape(shape))
    n = len(spatial)
    pool = ops8.max_pool(p, kernel, [1] * n, [0] * n, [0] * n, kernel, rounding, "explicit")
    xml = save(ov.Model([pool.output(0)], [p]), tmp_path)
    return xml, x, run_openvino(xml, [x])[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
@pytest.mark.parametrize("geometry", TILING)
def test_maxpool_values_of_tiling_windows(geometry, dtype, tmp_path, monkeypatch):
    """Values alone of windows that tile the data, exactly as OpenVINO gives them, NaN, -inf and
    all-NaN windows included; a spy checks which path ran."""
    xml, x, expected = _tiling_pool(geometry, dtype, 2, tmp_path)
    from irrun.ops import pooling
    taken = []
    real = pooling._tiled
    monkeypatch.setattr(pooling, "_tiled", lambda *a: taken.append(1) or real(*a))
    got = next(iter(irrun.load(xml).infer([x]).values()))
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
    assert bool(taken) == TILING[geometry][3]


@pytest.mark.parametrize("dtype, paired", [(np.float32, True), (np.float16, True), (np.int8, True), (np.uint8, True),
                                           (np.int16, True), (np.int32, True), (np.int64, False)])
@pytest.mark.parametrize("geometry", ["1d-odd", "2d-2x2", "2d-2x2-odd", "3d-2x2x2", "2d-1x2"])
def test_maxpool_tiling_windows_two_wide_by_contiguous_passes(geometry, dtype, paired, tmp_path, monkeypatch):
    """One sample (its channels contiguous): windows two taps wide on the last axis by contiguous
    passes, their maxima taken out as the first halves of pairs of elements (`copy_gathered`) for
    elements of 1, 2 and 4 bytes (f16 is pooled in f32), by a plain strided copy for 8 bytes;
    exactly OpenVINO's values, NaN, -inf and an all-NaN channel included."""
    from irrun.ops import pooling, window
    xml, x, expected = _tiling_pool(geometry, dtype, 1, tmp_path)
    monkeypatch.setattr(window, "PAIR_GATHER_ELEMENTS", 1)
    by_pairs, casts = [], []
    real, real_view = pooling._tiled_by_pairs, window._pairs_view
    monkeypatch.setattr(pooling, "_tiled_by_pairs", lambda *a: by_pairs.append(real(*a)) or by_pairs[-1])
    monkeypatch.setattr(window, "_pairs_view", lambda *a: casts.append(1) or real_view(*a))
    got = next(iter(irrun.load(xml).infer([x]).values()))
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
    assert any(by_pairs) and bool(casts) == paired


def test_copy_gathered_takes_every_other_element_to_the_buffers_end():
    """Pairs whose last second half is the buffer's last element, or lies past it (then the plain
    copy), offsets of one element (an unaligned view), and other strides and types as they are."""
    from irrun.ops.window import copy_gathered
    data = np.arange(20_001, dtype=np.float32)
    for source in (data[0::2], data[1::2], data[1:-1:2], data.reshape(1, -1)[:, 5::2],
                   data[:20_000].reshape(100, 200)[::3, 1::2], data[::3], data.astype(np.int8)[::2],
                   data.astype(np.float64)[1::2], data.astype(np.uint16)[::-2]):
        target = np.empty(source.shape, source.dtype)
        copy_gathered(target, source)
        np.testing.assert_array_equal(target, source)


@pytest.mark.parametrize("op", ["max", "avg"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_pool_stride_1_on_the_padded_grid(op, dtype, tmp_path, monkeypatch):
    """Stride-1 windows run on a padded, flattened copy of the data (`_flat_grid`): YOLO's SPPF
    (three 5x5 / 1 max pools in a row) and a dilated 3x3 average with windows that see only
    padding at the corners, NaN, -inf and a channel all NaN among the data; a spy checks the path."""
    shape = [1, 6, 10, 12]
    x = sample(shape, dtype)
    if np.dtype(dtype).kind == "f":
        flat = x.reshape(-1)
        flat[::9] = np.nan
        flat[4::13] = -np.inf
        x[0, 3] = np.nan
    p = ov.op.Parameter(ov.Type(np.dtype(dtype)), ov.PartialShape(shape))
    if op == "max":
        y = p
        for _ in range(3):
            y = ops8.max_pool(y, [1, 1], [1, 1], [2, 2], [2, 2], [5, 5]).output(0)
    else:
        x = np.nan_to_num(x, nan=0.5, neginf=-3.0)
        y = ops16.avg_pool(p, [1, 1], [3, 2], [3, 2], [3, 3], False, dilations=[3, 2]).output(0)
    xml = save(ov.Model([y], [p]), tmp_path)
    expected = run_openvino(xml, [x])[0]
    from irrun.ops import pooling
    taken = []
    real = pooling._flat_grid
    monkeypatch.setattr(pooling, "_flat_grid", lambda *a: taken.append(1) or real(*a))
    got = next(iter(irrun.load(xml).infer([x]).values()))
    assert taken and got.dtype == expected.dtype
    if op == "max":
        np.testing.assert_array_equal(got, expected)
    else:
        assert_close(got, expected, rtol=1e-3 if dtype == np.float16 else 1e-5, atol=1e-3 if dtype == np.float16 else 1e-6)


@pytest.mark.parametrize("dtype", [np.float16, np.int32, np.uint8, np.int8, np.int64])
@pytest.mark.parametrize("version", [1, 8, 14])
def test_maxpool_element_types(dtype, version, tmp_path):
    """Integers with many ties: indices pick the first maximum in row-major window order."""
    shape = [2, 2, 7, 6]
    make = max_pool(version, [2, 1], [1, 1], [1, 2], [3, 3], "ceil", dilations=[1, 2])
    x = RNG.integers(0, 4, shape).astype(dtype)
    compare(pool_model(make, shape, dtype), [x], tmp_path)


@pytest.mark.parametrize("index_type", ["i32", "i64", "i16", "u16", "u32", "u64"])
def test_maxpool_index_element_types(index_type, tmp_path):
    """The spec names i32 and i64; OpenVINO also runs the other integer types below (not i8, u8)."""
    shape = [2, 3, 8, 8]
    compare(pool_model(max_pool(8, [2, 2], [0, 0], [0, 0], [2, 2], index_type=index_type), shape),
            [sample(shape)], tmp_path)


@pytest.mark.parametrize("axis", [0, 1, 2, 3, 4, -1, -3, -5])
def test_maxpool_axis_3d(axis, tmp_path):
    shape = [2, 3, 3, 4, 5]
    compare(pool_model(max_pool(14, [1, 2, 1], [0, 1, 0], [1, 0, 0], [2, 2, 3], "ceil", axis=axis), shape),
            [sample(shape)], tmp_path)


@pytest.mark.parametrize("version", [1, 8, 14])
@pytest.mark.parametrize("shape, concrete", [([2, 3, -1, -1], [2, 3, 9, 7]),
                                             ([-1, -1, D(5, 20)], [3, 2, 13])])
@pytest.mark.parametrize("auto_pad", ["explicit", "same_upper"])
def test_maxpool_dynamic_input(version, shape, concrete, auto_pad, tmp_path):
    n = len(concrete) - 2
    make = max_pool(version, [2] * n, [1] * n, [0] * n, [3] * n, "ceil", auto_pad, [2] * n if version > 1 else None)
    x = sample(concrete)
    if version == 1 or auto_pad == "explicit":
        compare(pool_model(make, shape), [x], tmp_path)
        return
    # The CPU plugin runs MaxPool-8/14 with dynamic spatial dims and same_* on pads that are not
    # recomputed for the actual shape (MaxPool-1 and AvgPool are right); the oracle is the same
    # model with the concrete shape, which is what OpenVINO's reference does at run time.
    (tmp_path / "static").mkdir()
    expected = run_openvino(save(pool_model(make, concrete), tmp_path / "static"), [x])
    got = irrun_outputs(pool_model(make, shape), [x], tmp_path)
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)


def test_maxpool_padding_nan_and_inf_never_win(tmp_path):
    """The running maximum starts at the lowest f32 and moves on strictly greater values: padding,
    NaN and -inf never win, an empty window gives -3.4e38 and index 0 of its channel.  Hand-checked,
    and the CPU plugin and OpenVINO's reference evaluation agree."""
    x = np.array([-np.inf, -np.inf, 3, 3, np.nan, 1, 2, np.nan, 5, 5], np.float32).reshape(1, 1, 10)
    model = pool_model(max_pool(8, [2], [2], [2], [2], index_type="i32"), x.shape)
    values, indices = irrun_outputs(model, [x], tmp_path)
    lowest = np.finfo(np.float32).min
    np.testing.assert_array_equal(values.ravel(), [lowest, lowest, 3, 1, 2, 5, lowest])
    np.testing.assert_array_equal(indices.ravel(), [0, 0, 2, 5, 6, 8, 0])
    for expected in (run_openvino(tmp_path / "model.xml", [x]), evaluate_reference(model, [x])):
        np.testing.assert_array_equal(expected[0], values)
        np.testing.assert_array_equal(expected[1], indices)


def test_maxpool_f16_empty_window_is_minus_inf(tmp_path):
    """The CPU plugin pools f16 in f32: an all-padding window's lowest f32 becomes -inf in f16
    (the reference's f16 lowest would be -65504)."""
    x = np.array([1, 2, 3], np.float16).reshape(1, 1, 3)
    got = compare(pool_model(max_pool(8, [2], [2], [2], [2]), x.shape, np.float16), [x], tmp_path)
    assert np.isneginf(list(got.values())[0].ravel()[0])


def test_maxpool_u8_zero_never_wins(tmp_path):
    """u8's lowest value is 0, so a window of zeros has no winner: index 0 of the channel."""
    x = np.zeros((1, 2, 4), np.uint8)
    x[0, 1, 3] = 7
    got = compare(pool_model(max_pool(14, [2], [0], [0], [2]), x.shape, np.uint8), [x], tmp_path)
    np.testing.assert_array_equal(list(got.values())[1].ravel(), [0, 0, 4, 7])


SPEC_GRID = [[-1, 2, 3], [4, 5, -6], [-7, 8, 9]]
NINE = [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
# pooling_shape_rules.rst (also max-pool-8.rst): the MaxPool worked examples, as
# (input, kernel, strides, pads_begin, pads_end, dilations, rounding, auto_pad, axis, values, indices).
# Example 1 is corrected at row 1, column 3: the spec says -6 (index 5), but that window holds
# 3 and -6 (and padding), so the maximum is 3 at index 2, as OpenVINO computes.
MAX_SPEC_EXAMPLES = {
    "1-explicit": ([[SPEC_GRID]], [2, 2], [1, 1], [1, 1], [1, 1], [1, 1], "floor", "explicit", 0,
                   [[-1, 2, 3, 3], [4, 5, 5, 3], [4, 8, 9, 9], [-7, 8, 9, 9]],
                   [[0, 1, 2, 2], [3, 4, 4, 2], [3, 7, 8, 8], [6, 7, 8, 8]]),
    "2-valid-1d": ([[[-1, 2, 3, 5, -7, 9, 1]]], [3], [1], [0], [0], [1], "floor", "valid", 0,
                   [3, 5, 5, 9, 9], [2, 3, 3, 5, 5]),
    "3-same_lower": ([[SPEC_GRID]], [2, 2], [1, 1], [0, 0], [0, 0], [1, 1], "floor", "same_lower", 0,
                     [[-1, 2, 3], [4, 5, 5], [4, 8, 9]], [[0, 1, 2], [3, 4, 4], [3, 7, 8]]),
    "4-same_upper": ([[SPEC_GRID, [[2, -1, 5], [6, -7, 1], [8, 2, -3]]]], [2, 2], [1, 1], [0, 0], [0, 0], [1, 1],
                     "floor", "same_upper", 0,
                     [[[5, 5, 3], [8, 9, 9], [8, 9, 9]], [[6, 5, 5], [8, 2, 1], [8, 2, -3]]],
                     [[[4, 4, 2], [7, 8, 8], [7, 8, 8]], [[12, 11, 11], [15, 16, 14], [15, 16, 17]]]),
    "5-ceil_torch": ([[NINE]], [2, 2], [2, 2], [1, 1], [1, 1], [1, 1], "ceil_torch", "explicit", 0,
                     [[1, 3], [7, 9]], [[0, 2], [6, 8]]),
    "6-valid-ceil": ([[SPEC_GRID]], [2, 2], [2, 2], [0, 0], [0, 0], [1, 1], "ceil", "valid", 0,
                     [[5, 3], [8, 9]], [[4, 2], [7, 8]]),
    "7-dilated": ([[NINE]], [2, 2], [1, 1], [1, 1], [1, 1], [2, 2], "floor", "explicit", 0,
                  [[5, 6, 5], [8, 9, 8], [5, 6, 5]], [[4, 5, 4], [7, 8, 7], [4, 5, 4]]),
    "8-axis": ([[NINE, [[10, 11, 12], [13, 14, 15], [16, 17, 18]]]], [2, 2], [1, 1], [0, 0], [0, 0], [1, 1],
               "floor", "explicit", 2, [[[5, 6], [8, 9]], [[14, 15], [17, 18]]],
               [[[4, 5], [7, 8]], [[4, 5], [7, 8]]]),
}


@pytest.mark.parametrize("example", MAX_SPEC_EXAMPLES)
def test_maxpool_spec_examples(example, tmp_path):
    data, kernel, strides, pads_begin, pads_end, dilations, rounding, auto_pad, axis, values, indices = \
        MAX_SPEC_EXAMPLES[example]
    x = np.array(data, np.float32)
    make = max_pool(14, strides, pads_begin, pads_end, kernel, rounding, auto_pad, dilations, "i64", axis)
    got_values, got_indices = compare(pool_model(make, x.shape), [x], tmp_path).values()
    np.testing.assert_array_equal(got_values.ravel(), np.ravel(values))
    np.testing.assert_array_equal(got_indices.ravel(), np.ravel(indices))


# op_reference/max_pool.cpp: (input shape, input, values, indices, strides, dilations, pads_begin,
# pads_end, kernel, auto_pad, axis), MaxPool-8 with i32 indices.
FIVE = [0, -2, 24, 13, 7, -5, -4, 4, 21, -18, 81, 20, -15, 37, 23, 41, 18, 42, 8, 32, 9, 57, 58, 29, 3]
CUBE = [0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 20, 30, 40, -20, 60, 70, 80, 50, 50, 1, 2, 3, -15, -10, 50, 30, 81]
MAX_REFERENCE = [
    ([1, 1, 9], list(range(1, 10)), [1, 3, 5, 7, 9], [0, 2, 4, 6, 8], [2], [1], [], [], [2], "same_lower", 0),
    ([1, 1, 9], list(range(1, 10)), [2, 4, 6, 8, 9], [1, 3, 5, 7, 8], [2], [1], [], [], [2], "same_upper", 0),
    ([1, 1, 9], [1, 9, 3, 8, 5, 2, 6, 4, 7], [1, 9, 6, 7], [0, 1, 6, 8], [3], [1], [2], [2], [3], "explicit", 0),
    ([1, 2, 4], [1, 2, 3, 4, 0, -3.14, -2.71, 5], [3, 4, 0, 5], [2, 3, 0, 3], [1], [1], [], [], [3], "explicit", 2),
    ([1, 1, 5, 5], FIVE, [81, 24, 81, 58], [10, 2, 10, 22], [2, 2], [2, 2], [], [], [2, 2], "explicit", 0),
    ([1, 1, 5, 5], FIVE, [0, 24, 21, 81, 42, 37, 57, 58, 32], [0, 2, 8, 10, 17, 13, 21, 22, 19], [2, 2], [1, 1],
     [1, 1], [1, 1], [3, 3], "explicit", 0),
    ([1, 1, 5, 5], FIVE, [81, 37, 81, 58, 58, 58], [10, 13, 10, 22, 22, 22], [2, 2], [1, 1], [0, 0], [2, 1],
     [3, 3], "explicit", 0),
    ([1, 1, 3, 3, 3], CUBE, [-20] * 8, [13] * 8, [2, 2, 2], [2, 2, 2], [1, 1, 1], [1, 1, 1], [2, 2, 2],
     "explicit", 0),
    ([1, 1, 3, 3, 3], CUBE, [4, 5, 7, 8, 40, 60, 80, 80, 50, 2, 50, 81], [4, 5, 7, 8, 3, 5, 7, 7, 0, 2, 6, 8],
     [1, 1, 1], [1, 1, 1], [], [], [1, 2, 2], "explicit", 3),
]


@pytest.mark.parametrize("case", range(len(MAX_REFERENCE)))
def test_maxpool_reference_vectors(case, tmp_path):
    shape, data, values, indices, strides, dilations, pads_begin, pads_end, kernel, auto_pad, axis = \
        MAX_REFERENCE[case]
    n = len(shape) - 2
    x = np.array(data, np.float32).reshape(shape)
    make = max_pool(8, strides, pads_begin or [0] * n, pads_end or [0] * n, kernel, "floor", auto_pad, dilations,
                    "i32", axis)
    got_values, got_indices = irrun_outputs(pool_model(make, shape), [x], tmp_path)
    np.testing.assert_allclose(got_values.ravel(), values, rtol=1e-6)
    np.testing.assert_array_equal(got_indices.ravel(), indices)


# ---------------------------------------------------------------- Adaptive pools

ADAPTIVE_CASES = [
    ([2, 3, 10], [4]),
    ([2, 3, 7], [7]),
    ([1, 2, 5], [8]),              # more windows than elements: windows overlap
    ([2, 3, 9, 10], [3, 4]),
    ([1, 2, 7, 6], [5, 1]),
    ([1, 2, 4, 5, 6], [3, 2, 4]),
    ([2, 2, 3, 6, 5], [1, 7, 2]),
]


@pytest.mark.parametrize("shape, output_size", ADAPTIVE_CASES)
@pytest.mark.parametrize("size_type", [np.int32, np.int64])
def test_adaptive_avgpool(shape, output_size, size_type, tmp_path):
    model = pool_model(lambda p: ops8.adaptive_avg_pool(p, np.array(output_size, size_type)), shape)
    compare(model, [sample(shape)], tmp_path)


@pytest.mark.parametrize("shape, output_size", ADAPTIVE_CASES)
def test_adaptive_maxpool(shape, output_size, tmp_path):
    model = pool_model(lambda p: ops8.adaptive_max_pool(p, np.array(output_size, np.int64), "i32"), shape)
    compare(model, [sample(shape)], tmp_path)


def test_adaptive_maxpool_i64_indices(tmp_path):
    """The CPU plugin cannot compile i64 indices ("does not support i64 for use with oneDNN") and
    AdaptiveMaxPool has no reference `evaluate`: check the i64 output against OpenVINO's i32 one."""
    shape = [2, 3, 9, 10]
    x = sample(shape)
    make = lambda index_type: lambda p: ops8.adaptive_max_pool(p, np.array([4, 3], np.int32), index_type)  # noqa: E731
    (tmp_path / "i32").mkdir()
    expected = compare(pool_model(make("i32"), shape), [x], tmp_path / "i32")
    got = irrun_outputs(pool_model(make("i64"), shape), [x], tmp_path)
    assert got[1].dtype == np.int64
    for a, b in zip(got, expected.values()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", [np.float16, np.int32, np.uint8])
@pytest.mark.parametrize("op", ["avg", "max"])
def test_adaptive_element_types(dtype, op, tmp_path):
    shape = [2, 3, 7, 9]
    size = np.array([3, 4], np.int64)
    make = (lambda p: ops8.adaptive_avg_pool(p, size)) if op == "avg" else \
        (lambda p: ops8.adaptive_max_pool(p, size, "i32"))
    compare(pool_model(make, shape, dtype), [sample(shape, dtype)], tmp_path, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("op", ["avg", "max"])
@pytest.mark.parametrize("shape, concrete", [([1, 3, -1, -1], [1, 3, 11, 5]), ([-1, 2, 9], [2, 2, 9])])
def test_adaptive_dynamic_input(op, shape, concrete, tmp_path):
    size = np.array([4] * (len(concrete) - 2), np.int64)
    make = (lambda p: ops8.adaptive_avg_pool(p, size)) if op == "avg" else \
        (lambda p: ops8.adaptive_max_pool(p, size, "i32"))
    compare(pool_model(make, shape), [sample(concrete)], tmp_path)


def test_adaptive_output_size_from_a_parameter(tmp_path):
    """A non-constant output_size: the spatial dims are dynamic until it is fed."""
    x = ov.op.Parameter(ov.Type.f32, ov.PartialShape([2, 3, 10, 12]))
    size = ov.op.Parameter(ov.Type.i32, ov.PartialShape([2]))
    model = ov.Model(ops8.adaptive_max_pool(x, size, "i32").outputs(), [x, size])
    xml = save(model, tmp_path)
    assert [format_shape(o.shape) for o in irrun.load(xml).outputs] == ["[2,3,?,?]"] * 2
    compare(model, [sample([2, 3, 10, 12]), np.array([3, 5], np.int32)], tmp_path)


def test_adaptive_maxpool_nan_and_ties(tmp_path):
    """AdaptiveMaxPool's running maximum starts at the window's first element: a NaN there wins,
    a NaN later never does; ties keep the first element in row-major order (CPU, hand-checked)."""
    nan = np.nan
    x = np.array([[3, 1, nan, 1], [nan, 5, 2, nan], [2, 2, -np.inf, -np.inf], [2, 2, -np.inf, -np.inf]],
                 np.float32).reshape(1, 1, 4, 4)
    model = pool_model(lambda p: ops8.adaptive_max_pool(p, np.array([2, 2], np.int64), "i32"), x.shape)
    values, indices = compare(model, [x], tmp_path).values()
    np.testing.assert_array_equal(values.ravel(), [5, nan, 2, -np.inf])
    np.testing.assert_array_equal(indices.ravel(), [5, 2, 8, 10])


# ---------------------------------------------------------------- shape functions vs OpenVINO

def pool_attrs(kernel, strides, pads_begin, pads_end, rounding, auto_pad, **extra) -> dict[str, str]:
    text = lambda v: ",".join(map(str, v))  # noqa: E731
    return {"kernel": text(kernel), "strides": text(strides), "pads_begin": text(pads_begin),
            "pads_end": text(pads_end), "rounding_type": rounding, "auto_pad": auto_pad, **extra}


SHAPE_INPUTS = [
    [1, 3, D(10, 20), D(5, -1)],
    [D(-1), 3, D(3, 20), 9],
    [2, D(1, 4), 17, 12],
    # lower bounds with no room for a window: OpenVINO still gives 1 (its dim arithmetic saturates)
    [1, 3, D(1, 20), D(-1)],
    [1, 3, 6, D(0, 4)],
    None,
]


def _shape_case_ids(inputs):
    return [format_shape(None) if s is None else str(s) for s in inputs]


@pytest.mark.parametrize("data_shape", SHAPE_INPUTS, ids=_shape_case_ids(SHAPE_INPUTS))
def test_window_shape_function_dynamic(data_shape):
    """Partial shapes for every auto_pad and rounding against OpenVINO's shape inference."""
    for auto_pad in ("explicit", "valid", "same_upper", "same_lower"):
        for rounding in ("floor", "ceil", "ceil_torch"):
            p = ov.op.Parameter(ov.Type.f32, ov.PartialShape.dynamic() if data_shape is None
                                else ov.PartialShape(data_shape))
            node = ops14.max_pool(p, [2, 3], [1, 2], [1, 0], [2, 1], [3, 2], rounding, auto_pad)
            attrs = pool_attrs([3, 2], [2, 3], [1, 0], [2, 1], rounding, auto_pad, dilations="1,2")
            out = irrun_infer_all("MaxPool", 14, attrs, [tensor_type(data_shape)])
            expected = ov_shape_text(node.get_output_partial_shape(0))
            got = format_shape(out[0].shape)
            if auto_pad.startswith("same") and data_shape is not None:
                # OpenVINO gives ? for any non-static dim under same_*; irrun may keep ceil(bounds / s).
                pairs = zip(expected.strip("[]").split(","), got.strip("[]").split(","))
                assert all(e == g or e == "?" for e, g in pairs), (auto_pad, rounding, got, expected)
            else:
                assert got == expected, (auto_pad, rounding)
            assert [str(t.shape) for t in out[:1]] == [str(out[1].shape)] and out[1].etype.name == "i64"


WINDOW_PADDINGS = [("explicit", pads) for pads in ((0, 0), (1, 0), (0, 2), (2, 1))] + \
    [(auto_pad, (1, 1)) for auto_pad in ("same_upper", "same_lower", "valid")]


@pytest.mark.parametrize("spatial", range(2, 12))
@pytest.mark.parametrize("rounding", ["floor", "ceil", "ceil_torch"])
def test_window_shape_function_static_sweep(spatial, rounding):
    """Small sizes, every kernel/stride/padding: irrun's output size equals OpenVINO's, or both refuse.
    (same_* with ceil is not ceil(x / s): 9 with kernel 2, stride 3 gives 4.)"""
    for kernel in (1, 2, 3):
        for stride in (1, 2, 3):
            for auto_pad, pads in WINDOW_PADDINGS:
                p = ov.op.Parameter(ov.Type.f32, ov.PartialShape([1, 1, spatial]))
                try:
                    expected = str(ops14.avg_pool(p, [stride], [pads[0]], [pads[1]], [kernel], False, rounding,
                                                  auto_pad).get_output_partial_shape(0)).replace(" ", "")
                except RuntimeError:
                    expected = "error"
                attrs = pool_attrs([kernel], [stride], [pads[0]], [pads[1]], rounding, auto_pad,
                                   **{"exclude-pad": "false"})
                try:
                    got = format_shape(irrun_infer("AvgPool", 14, attrs, [tensor_type([1, 1, spatial])]).shape)
                except ShapeError:
                    got = "error"
                assert got == expected, (kernel, stride, auto_pad, pads)


def test_adaptive_shape_function():
    cases = [([2, 3, D(5, 9), 8], np.array([4, 2], np.int64), "[2,3,4,2]"),
             ([2, 3, D(5, 9), 8], None, "[2,3,?,?]"),
             (None, np.array([4, 2], np.int64), "[...]")]
    for shape, size, expected in cases:
        data = tensor_type(shape)
        size_type = tensor_type([2], np.int64, size)
        for type_name, attrs in (("AdaptiveAvgPool", {}), ("AdaptiveMaxPool", {"index_element_type": "i32"})):
            out = irrun_infer_all(type_name, 8, attrs, [data, size_type])
            assert [format_shape(t.shape) for t in out] == [expected] * len(out)
        assert out[1].etype.name == "i32"


# ---------------------------------------------------------------- validate

def errors(xml: Path) -> list:
    return irrun.validate(xml).errors


def test_validate_declared_shape_names_the_arithmetic(tmp_path):
    model = pool_model(avg_pool(1, [2, 2], [0, 0], [1, 1], [2, 2], True, "floor", "same_upper"), [1, 3, 32, 32])
    problems = errors(edited_ir(model, tmp_path, "AvgPool", output_dims=[1, 3, 32, 32]))
    assert [e.code for e in problems] == ["E-DECLARED-SHAPE"]
    assert problems[0].layer.type == "AvgPool"
    assert "ceil(32 / 2) with auto_pad=same_upper" in problems[0].message


def test_validate_declared_indices_shape(tmp_path):
    model = pool_model(max_pool(8, [2, 2], [0, 0], [0, 0], [3, 3], "ceil"), [1, 3, 8, 8])
    xml = save(model, tmp_path)
    text = xml.read_text()
    # The indices port is the layer's second output; change its last dim from 4 to 5.
    tree = etree.parse(str(xml))
    ports = layer_of(tree.getroot(), "MaxPool").find("output").findall("port")
    ports[1].findall("dim")[-1].text = "5"
    tree.write(str(xml))
    assert text != xml.read_text()
    problems = errors(xml)
    assert [(e.code, e.port) for e in problems] == [("E-DECLARED-SHAPE", 1)]
    assert "ceil((8 + 0 + 0 - 3) / 2) + 1" in problems[0].message


@pytest.mark.parametrize("type_name, make", [
    ("AvgPool", avg_pool(1, [2, 2], [0, 0], [0, 0], [2, 2], True)),
    ("MaxPool", max_pool(8, [2, 2], [0, 0], [0, 0], [2, 2])),
])
def test_validate_zero_stride(type_name, make, tmp_path):
    xml = edited_ir(pool_model(make, [1, 3, 8, 8]), tmp_path, type_name, {"strides": "0,2"})
    assert openvino_refuses(xml)
    problems = errors(xml)
    assert problems and all(e.layer is not None and e.layer.type == type_name for e in problems)
    assert any("strides" in e.message for e in problems)


@pytest.mark.parametrize("attrs, words", [
    ({"kernel": "9,2"}, "larger than spatial dim 2"),
    ({"kernel": "2,6", "pads_begin": "0,1", "pads_end": "0,0"}, "larger than spatial dim 3"),
    ({"pads_begin": "2,0", "exclude-pad": "true"}, "entirely in the padding"),
    ({"rounding_type": "ceil_torch"}, "ceil_torch"),
    ({"auto_pad": "notset"}, "notset"),
    ({"kernel": "2,2,2"}, "kernel"),
])
def test_validate_inconsistent_avgpool(attrs, words, tmp_path):
    """Each edit is one that OpenVINO refuses too."""
    model = pool_model(avg_pool(1, [1, 1], [0, 0], [0, 0], [2, 2], False), [1, 3, 6, 4])
    xml = edited_ir(model, tmp_path, "AvgPool", attrs)
    assert openvino_refuses(xml)
    problems = errors(xml)
    assert problems and problems[0].layer.type == "AvgPool", [e.format() for e in problems]
    assert any(words in e.message for e in problems), [e.format() for e in problems]


def test_validate_maxpool_axis_out_of_range(tmp_path):
    xml = edited_ir(pool_model(max_pool(8, [1, 1], [0, 0], [0, 0], [2, 2]), [1, 3, 6, 4]), tmp_path, "MaxPool",
                    {"axis": "4"})
    assert openvino_refuses(xml)
    assert any("axis 4" in e.message and e.layer.type == "MaxPool" for e in errors(xml))


def test_validate_adaptive_output_size_length(tmp_path):
    """output_size with 2 values for 1-D data (built with 1 value, then edited: OpenVINO refuses to build it)."""
    x = ov.op.Parameter(ov.Type.f32, ov.PartialShape([1, 3, 8]))
    size = ov.op.Parameter(ov.Type.i64, ov.PartialShape([1]))
    size.set_friendly_name("size")
    xml = save(ov.Model(ops8.adaptive_avg_pool(x, size).outputs(), [x, size]), tmp_path)
    tree = etree.parse(str(xml))
    size_layer = next(layer for layer in tree.getroot().iter("layer") if layer.get("name") == "size")
    size_layer.find("data").set("shape", "2")
    size_ports = [size_layer.find("output").find("port"),
                  layer_of(tree.getroot(), "AdaptiveAvgPool").find("input").findall("port")[1]]
    for port in size_ports:
        port.find("dim").text = "2"
    tree.write(str(xml))
    assert openvino_refuses(xml)
    assert any("output_size has 2 values" in e.message and e.layer.type == "AdaptiveAvgPool" for e in errors(xml))


def test_missing_optional_attributes_match_openvino(tmp_path):
    """OpenVINO reads AvgPool without pads (all 0) or exclude-pad (true); the spec calls them required."""
    shape = [1, 2, 5, 5]
    model = pool_model(avg_pool(1, [2, 2], [1, 1], [1, 1], [3, 3], False, "ceil"), shape)
    xml = edited_ir(model, tmp_path, "AvgPool", drop=("exclude-pad", "pads_end"), output_dims=[1, 2, 3, 3])
    assert not errors(xml)
    x = sample(shape)
    expected = run_openvino(xml, [x])[0]
    np.testing.assert_allclose(list(irrun.load(xml).infer([x]).values())[0], expected, rtol=1e-5)


@pytest.mark.parametrize("type_name, make", [
    ("MaxPool", max_pool(8, [2, 2], [0, 0], [0, 0], [2, 2])),
    ("AdaptiveMaxPool", lambda p: ops8.adaptive_max_pool(p, np.array([2, 3], np.int64), "i32")),
])
def test_indices_port_may_be_left_out(type_name, make, tmp_path):
    """OpenVINO reads a layer that declares only the values port of MaxPool-8 or AdaptiveMaxPool."""
    shape = [1, 2, 6, 6]
    p = ov.op.Parameter(ov.Type.f32, ov.PartialShape(shape))
    model = ov.Model([make(p).output(0)], [p])
    xml = save(model, tmp_path)
    tree = etree.parse(str(xml))
    output = layer_of(tree.getroot(), type_name).find("output")
    output.remove(output.findall("port")[1])
    tree.write(str(xml))
    assert not openvino_refuses(xml)
    assert not errors(xml)
    x = sample(shape)
    np.testing.assert_array_equal(list(irrun.load(xml).infer([x]).values())[0], run_openvino(xml, [x])[0])


# ---------------------------------------------------------------- spec-style snippets

SNIPPETS = sorted(p for p in EXAMPLES.glob("*.xml") if p.name.startswith(("avgpool", "adaptive")))


def snippet_as_model(snippet: Path, tmp_path: Path) -> Path:
    """A full IR around a snippet's layer: a Parameter per input (declared dims), a Result per output."""
    layer = etree.parse(str(snippet)).getroot()
    net = etree.Element("net", name="snippet", version="11")
    layers, edges = etree.SubElement(net, "layers"), etree.SubElement(net, "edges")
    inputs = layer.find("input").findall("port")
    for i, port in enumerate(inputs):
        dims = [d.text for d in port.findall("dim")]
        precision = port.get("precision", "FP32")
        etype = {"FP32": "f32", "I64": "i64", "I32": "i32"}[precision]
        param = etree.SubElement(layers, "layer", id=str(100 + i), name=f"in{i}", type="Parameter",
                                 version="opset1")
        etree.SubElement(param, "data", shape=",".join(dims), element_type=etype)
        out = etree.SubElement(etree.SubElement(param, "output"), "port", id="0", precision=precision)
        for d in dims:
            etree.SubElement(out, "dim").text = d
        etree.SubElement(edges, "edge", **{"from-layer": str(100 + i), "from-port": "0",
                                           "to-layer": layer.get("id"), "to-port": port.get("id")})
    layers.append(layer)
    for i, port in enumerate(layer.find("output").findall("port")):
        result = etree.SubElement(layers, "layer", id=str(200 + i), name=f"out{i}", type="Result",
                                  version="opset1")
        etree.SubElement(etree.SubElement(result, "input"), "port", id="0")
        etree.SubElement(edges, "edge", **{"from-layer": layer.get("id"), "from-port": port.get("id"),
                                           "to-layer": str(200 + i), "to-port": "0"})
    xml = tmp_path / "snippet.xml"
    etree.ElementTree(net).write(str(xml))
    return xml


MAXPOOL8_SPEC_XML = """<layer id="1" name="pool" type="MaxPool" version="opset8">
    <data auto_pad="{auto_pad}" kernel="2,2" pads_begin="1,1" pads_end="1,1" strides="2,2"/>
    <input><port id="0"><dim>1</dim><dim>3</dim><dim>32</dim><dim>32</dim></port></input>
    <output>
        <port id="1" precision="FP32"><dim>1</dim><dim>3</dim><dim>{out}</dim><dim>{out}</dim></port>
        <port id="2" precision="I64"><dim>1</dim><dim>3</dim><dim>{out}</dim><dim>{out}</dim></port>
    </output>
</layer>"""


@pytest.mark.parametrize("auto_pad, declared, codes", [("same_upper", 32, ["E-DECLARED-SHAPE"] * 2),
                                                       ("explicit", 17, []), ("valid", 16, [])])
def test_maxpool8_spec_xml_examples(auto_pad, declared, codes, tmp_path):
    """max-pool-8.rst's XML examples (version added): same_upper with stride 2 gives 16, not 32."""
    snippet = tmp_path / "maxpool8.xml"
    snippet.write_text(MAXPOOL8_SPEC_XML.format(auto_pad=auto_pad, out=declared))
    assert [e.code for e in irrun.validate(snippet).errors] == codes
    model = ov.Core().read_model(str(snippet_as_model(snippet, tmp_path)))
    size = 17 if auto_pad == "explicit" else 16
    assert [str(o.get_partial_shape()) for o in model.outputs] == [f"[1,3,{size},{size}]"] * 2


@pytest.mark.parametrize("snippet", SNIPPETS, ids=[p.name for p in SNIPPETS])
def test_snippet_verdicts_match_openvino(snippet, tmp_path):
    """The `expect:` line of each pooling snippet agrees with irrun.validate and with the shapes
    OpenVINO infers for the same layer in a full IR."""
    expect = etree.parse(str(snippet)).getroot().getprevious()
    while expect is not None and "expect:" not in (expect.text or ""):
        expect = expect.getprevious()
    codes = sorted(c.strip() for c in expect.text.split("expect:")[1].split(","))
    report = irrun.validate(snippet)
    assert sorted({d.code for d in report.errors}) == ([] if codes == ["clean"] else codes)
    model = ov.Core().read_model(str(snippet_as_model(snippet, tmp_path)))
    declared = [[int(d.text) for d in port.findall("dim")]
                for port in etree.parse(str(snippet)).getroot().find("output").findall("port")]
    consistent = all(ov.PartialShape(dims).compatible(out.get_partial_shape())
                     for dims, out in zip(declared, model.outputs))
    assert consistent == (codes == ["clean"])
