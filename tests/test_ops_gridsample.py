"""GridSample-9 against OpenVINO.

* Differential runs (`compare`): one model holds a GridSample per attribute
  combination on the same data and grid, so one compile covers the sweep.
  Grids reach past [-1, 1] so every padding mode matters.
* Hand-checked values: corner pixels, round-half-to-even ties, reflection.
* Shape functions with OpenVINO's partial-shape inference as the oracle, and
  validate errors for IRs with wrong declared shapes or operands.
"""
import itertools

import numpy as np
import openvino as ov
import openvino.opset9 as ops9
import pytest
from irxml import hand_ir
from ovutil import compare

import irrun
from irrun.errors import ShapeError
from irrun.etypes import from_dtype
from irrun.registry import TensorType, implementation
from irrun.shapes import ANY, Dim, format_shape
from irrun.spec import all_specs, parse_attrs

MODES = ("nearest", "bilinear", "bicubic")
PADDINGS = ("zeros", "border", "reflection")
ALL_ATTRS = list(itertools.product(MODES, PADDINGS, (False, True)))


def grid_sample(data, grid, mode="bilinear", padding_mode="zeros", align_corners=False):
    return ops9.grid_sample(data, grid, {"align_corners": align_corners, "mode": mode, "padding_mode": padding_mode})


def sweep_model(data_shape, grid_shape, data_type=np.float32, grid_type=np.float32, attrs=ALL_ATTRS):
    data, grid = ops9.parameter(data_shape, data_type), ops9.parameter(grid_shape, grid_type)
    outputs = [grid_sample(data, grid, mode, padding, align) for mode, padding, align in attrs]
    return ov.Model(outputs, [data, grid])


def random_grid(shape, dtype=np.float32, reach=1.8, seed=0):
    """Points up to `reach` in each direction: inside, on and beyond the data's edges."""
    return np.random.default_rng(seed).uniform(-reach, reach, shape).astype(dtype)


def random_data(shape, dtype=np.float32, seed=1):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -300), min(info.max, 300), shape, endpoint=True).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("data_type, grid_type", [(np.float32, np.float32), (np.float16, np.float32),
                                                  (np.float16, np.float16), (np.float32, np.float16)])
def test_every_mode_padding_and_alignment(tmp_path, data_type, grid_type):
    data_shape, grid_shape = [2, 3, 5, 6], [2, 4, 7, 2]
    compare(sweep_model(data_shape, grid_shape, data_type, grid_type),
            [random_data(data_shape, data_type), random_grid(grid_shape, grid_type)], tmp_path,
            rtol=1e-3 if np.float16 in (data_type, grid_type) else 1e-4)


@pytest.mark.parametrize("data_shape", [[1, 1, 1, 1], [1, 2, 1, 5], [2, 1, 4, 1]])
def test_single_pixel_axes(tmp_path, data_shape):
    """Axes of size 1: align_corners maps every point to 0, reflection has nothing to mirror."""
    grid_shape = [data_shape[0], 3, 5, 2]
    compare(sweep_model(data_shape, grid_shape), [random_data(data_shape), random_grid(grid_shape)], tmp_path)


def test_far_outside_reflects_many_times(tmp_path):
    data_shape, grid_shape = [1, 2, 3, 4], [1, 6, 6, 2]
    attrs = [a for a in ALL_ATTRS if a[1] == "reflection"]
    compare(sweep_model(data_shape, grid_shape, attrs=attrs),
            [random_data(data_shape), random_grid(grid_shape, reach=9.0)], tmp_path)


def test_nearest_ties_round_half_to_even(tmp_path):
    """Grid points on exact .5 pixel coordinates: lrint rounds them to the even neighbour."""
    data = np.arange(2 * 1 * 4 * 4, dtype=np.float32).reshape(2, 1, 4, 4)
    steps = np.array([-1.75, -1.25, -1, -0.75, -0.5, -0.25, 0, 0.25, 0.5, 0.75, 1, 1.25, 1.75], np.float32)
    grid = np.stack(np.meshgrid(steps, steps), -1)[None].repeat(2, 0)
    attrs = [a for a in ALL_ATTRS if a[0] == "nearest"]
    out = compare(sweep_model(list(data.shape), list(grid.shape), attrs=attrs), [data, grid], tmp_path)
    # align_corners false, width 4: x = 0 is pixel 1.5, which rounds to 2
    first = next(iter(out.values()))
    assert first[0, 0, 6, 6] == data[0, 0, 2, 2]


@pytest.mark.parametrize("data_type", [np.int32, np.int64, np.int8, np.uint8])
def test_integer_data(tmp_path, data_type):
    """i8/u8 results round half to even and saturate (bicubic overshoots); i32/i64 truncate.

    Points stay inside the data: beyond a corner with border padding, the 16 bicubic taps all read one
    value and irrun's weights sum to 1 - 2e-7, so a truncated i32 can come out 1 below the CPU's
    (specs/errata/resampling.md).
    """
    data_shape, grid_shape = [1, 2, 5, 6], [1, 6, 6, 2]
    compare(sweep_model(data_shape, grid_shape, data_type, attrs=[a for a in ALL_ATTRS if not a[2]]),
            [random_data(data_shape, data_type), random_grid(grid_shape, reach=1.0)], tmp_path)


@pytest.mark.parametrize("data_shape, grid_shape", [
    ([-1, 3, -1, -1], [-1, -1, -1, 2]),
    ([2, -1, 5, 6], [2, 4, -1, -1]),
    ([-1, -1, -1, -1], [-1, -1, -1, -1]),   # the CPU plugin refuses a dynamic rank
])
def test_dynamic_shapes(tmp_path, data_shape, grid_shape):
    attrs = [("bilinear", "zeros", False), ("bicubic", "reflection", True), ("nearest", "border", False)]
    compare(sweep_model(data_shape, grid_shape, attrs=attrs),
            [random_data([2, 3, 5, 6]), random_grid([2, 4, 7, 2])], tmp_path)


def test_hand_checked_corners_and_padding():
    """2 x 2 data [[1, 2], [3, 4]]; the point (x, y) = (-1, -1) and a point one pixel beyond the right edge."""
    run = implementation("GridSample", 9)
    spec = all_specs()[("GridSample", 9)]
    data = np.array([[[[1, 2], [3, 4]]]], np.float32)
    grid = np.array([[[[-1, -1], [2, -1]]]], np.float32)   # x = 2: pixel 2.5 (not aligned), 1.5 (aligned)

    def sample(**attrs):
        parsed, problems = parse_attrs(spec, {k: str(v).lower() for k, v in attrs.items()})
        assert not problems
        return run(spec, parsed).run(data, grid)[0, 0, 0].tolist()

    # not aligned: (-1, -1) is the outer corner (pixel -0.5, -0.5): a quarter of pixel (0, 0) with zeros
    assert sample(mode="bilinear", padding_mode="zeros", align_corners=False) == [0.25, 0.0]
    assert sample(mode="bilinear", padding_mode="border", align_corners=False) == [1.0, 2.0]
    # aligned: (-1, -1) is pixel (0, 0); pixel 1.5 mirrored about pixel 1 is 0.5, halfway between 1 and 2
    assert sample(mode="bilinear", padding_mode="reflection", align_corners=True) == [1.0, 1.5]
    assert sample(mode="nearest", padding_mode="reflection", align_corners=True) == [1.0, 1.0]   # 0.5 -> 0
    # not aligned: pixel 2.5 mirrored about the edge 1.5 is 0.5, halfway between 1 and 2
    assert sample(mode="bilinear", padding_mode="reflection", align_corners=False) == [1.0, 1.5]


# ---------------------------------------------------------------- shapes and validation

def irrun_shape(data_shape, grid_shape, data_type=np.float32, grid_type=np.float32) -> TensorType:
    spec = all_specs()[("GridSample", 9)]
    parsed, problems = parse_attrs(spec, {})
    assert not problems
    inputs = [TensorType(_dims(s), from_dtype(t)) for s, t in ((data_shape, data_type), (grid_shape, grid_type))]
    return implementation("GridSample", 9)(spec, parsed).infer(inputs)[0]


def _dims(shape):
    if shape is None:
        return None
    return tuple(d if isinstance(d, int) and d >= 0 else ANY if d == -1 else Dim(*d) for d in shape)


def _ov_shape(shape):
    if shape is None:
        return ov.PartialShape.dynamic()
    return ov.PartialShape([ov.Dimension(*d) if isinstance(d, tuple) else ov.Dimension(d) for d in shape])


@pytest.mark.parametrize("data_shape, grid_shape", [
    ([2, 3, 5, 6], [2, 4, 7, 2]),
    ([-1, 3, 5, 6], [2, 4, -1, -1]),
    ([(1, 4), 3, 5, 6], [(2, 8), 4, 7, 2]),
    (None, [2, 4, 7, 2]),
    ([2, 3, 5, 6], None),
    (None, None),
])
def test_shape_function_matches_openvino(data_shape, grid_shape):
    node = grid_sample(ops9.parameter(_ov_shape(data_shape), np.float32),
                       ops9.parameter(_ov_shape(grid_shape), np.float32))
    got = irrun_shape(data_shape, grid_shape)
    assert format_shape(got.shape).replace(" ", "") == str(node.get_output_partial_shape(0)).replace(" ", "")
    assert got.etype == from_dtype(np.float32)


@pytest.mark.parametrize("data_shape, grid_shape, grid_type, message", [
    ([2, 3, 5, 6], [3, 4, 7, 2], np.float32, "batch"),
    ([2, 3, 5, 6], [2, 4, 7, 3], np.float32, "must be 2"),
    ([2, 3, 5], [2, 4, 7, 2], np.float32, "4-D"),
    ([2, 3, 5, 6], [2, 4, 7, 2], np.int32, "grid element type"),
])
def test_inconsistent_operands_refused_like_openvino(data_shape, grid_shape, grid_type, message):
    with pytest.raises(Exception):
        grid_sample(ops9.parameter(data_shape, np.float32), ops9.parameter(grid_shape, grid_type))
    with pytest.raises(ShapeError, match=message):
        irrun_shape(data_shape, grid_shape, grid_type=grid_type)


def test_validate_declared_shape(tmp_path):
    xml = hand_ir(tmp_path, "GridSample", [([1, 2, 5, 6], "FP32"), ([1, 4, 7, 2], "FP32")], [1, 2, 7, 4],
                  {"mode": "bicubic"}, version="opset9")
    assert [e.code for e in irrun.validate(xml).errors] == ["E-DECLARED-SHAPE"]


def test_validate_batch_mismatch_names_the_layer(tmp_path):
    xml = hand_ir(tmp_path, "GridSample", [([1, 2, 5, 6], "FP32"), ([3, 4, 7, 2], "FP32")], [3, 2, 4, 7],
                  version="opset9", name="sampler")
    errors = irrun.validate(xml).errors
    assert errors and errors[0].layer.name == "sampler" and "batch" in errors[0].message
