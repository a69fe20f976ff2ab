"""Interpolate's linear and cubic modes on float32 data in float32 (irrun/ops/weighted_resize.py)
against OpenVINO: the upsamplings of segmentation heads and U-Nets, downsamplings, ratios that are
not whole numbers, align_corners, Interpolate-1 from old IRs, special values, and the parts."""
import numpy as np
import openvino.opset1 as ops1
import openvino.opset11 as ops11
import pytest
from ovutil import compare, const, model, param, run_openvino, save

import irrun
from irrun.ops import resampling, weighted_resize
from irrun.ops.weighted_resize import GatheredAxis, PeriodicAxis

RNG = np.random.default_rng(11)


def upsample(x, mode, scales=None, sizes=None, axes=(2, 3), **attrs):
    target = const(scales, np.float32) if sizes is None else const(sizes, np.int64)
    return ops11.interpolate(x, target, mode, "scales" if sizes is None else "sizes",
                             axes=const(list(axes), np.int64), **attrs)


@pytest.mark.parametrize("n_in, n_out, mode, transform, kind, period, step", [
    (80, 160, "linear_onnx", "half_pixel", PeriodicAxis, 2, 1),
    (40, 320, "linear_onnx", "pytorch_half_pixel", PeriodicAxis, 8, 1),
    (160, 80, "linear_onnx", "half_pixel", PeriodicAxis, 1, 2),
    (64, 80, "linear_onnx", "half_pixel", PeriodicAxis, 5, 4),
    (32, 64, "cubic", "asymmetric", PeriodicAxis, 2, 1),
    (80, 160, "linear_onnx", "align_corners", PeriodicAxis, 2, 1),
    (97, 224, "linear_onnx", "half_pixel", GatheredAxis, None, None),
])
def test_axis_plans(n_in, n_out, mode, transform, kind, period, step):
    """Which plan an axis gets from OpenVINO's taps, and that a periodic plan reads every output's
    own taps."""
    method = resampling.Method(mode, transform)
    taps = resampling._axis_taps(method, n_in, n_out, n_out / n_in, 1.0)
    plan = weighted_resize.axis_plan(3, taps.index, taps.weight)
    assert type(plan) is kind and plan.size == n_out
    if kind is PeriodicAxis:
        assert (plan.period, plan.step) == (period, step)
        assert plan.hi - plan.lo >= n_out - 2 * 3 * period       # only outputs at the clamped edges left
        for i in range(plan.lo, plan.hi):
            first = plan.lo + (i - plan.lo) % plan.period
            k = (i - plan.lo) // plan.period
            np.testing.assert_array_equal(taps.index[first] + k * plan.step, taps.index[i])


def _head(x):
    """What segmentation heads and U-Nets resize by, on one input."""
    return [
        upsample(x, "linear_onnx", [2.0, 2.0]),
        upsample(x, "linear_onnx", [4.0, 4.0], coordinate_transformation_mode="pytorch_half_pixel"),
        upsample(x, "linear_onnx", [2.0, 2.0], coordinate_transformation_mode="align_corners"),
        upsample(x, "linear_onnx", sizes=[51, 97], coordinate_transformation_mode="asymmetric"),
        upsample(x, "linear_onnx", [0.5, 0.5]),
        upsample(x, "linear_onnx", [1.25], axes=[3]),
        upsample(x, "cubic", [2.0, 2.0]),
        upsample(x, "cubic", [3.0, 3.0], coordinate_transformation_mode="align_corners", cube_coeff=-0.5),
        upsample(x, "linear", [2.0, 2.0]),
        ops1.interpolate(x, const([40, 48], np.int64), {"axes": [2, 3], "mode": "linear"}),
        ops1.interpolate(x, const([60, 72], np.int64), {"axes": [2, 3], "mode": "linear", "align_corners": True}),
    ]


def test_segmentation_upsamplings_match_openvino(tmp_path):
    x = param([2, 16, 20, 24])
    data = RNG.standard_normal([2, 16, 20, 24]).astype(np.float32)
    m = model(_head(x), [x])
    compare(m, [data], tmp_path)
    loaded = irrun.load(save(m, tmp_path / "again"))
    # every one of them takes the float32 kernels
    assert all(getattr(s.kernel, "__qualname__", "").startswith("_weighted_resizer")
               for s in loaded._plan.steps if s.node.layer.op_type == "Interpolate")


def test_special_values_spread_as_in_openvino(tmp_path):
    """NaN and infinities reach the outputs that read them, as OpenVINO's taps read them (a tap of
    weight 0 times an infinity is NaN there too)."""
    x = param([1, 4, 12, 16])
    data = RNG.standard_normal([1, 4, 12, 16]).astype(np.float32)
    data[0, 0, 3, 5], data[0, 1, 0, 0], data[0, 2, 11, 15], data[0, 3, 6, 0] = np.nan, np.inf, -np.inf, 1e30
    compare(model(_head(x)[:9], [x]), [data], tmp_path)


def test_large_resizes_in_parts_as_whole(tmp_path):
    """A 4x upsampling of 32 x 40 x 48 (2 Mi outputs) runs in parts on two threads and in blocks:
    OpenVINO's values, and the same bits as on one thread."""
    x = param([1, 32, 40, 48])
    data = RNG.standard_normal([1, 32, 40, 48]).astype(np.float32)
    nodes = [upsample(x, "linear_onnx", [4.0, 4.0]), upsample(x, "linear_onnx", sizes=[150, 170])]
    xml = save(model(nodes, [x]), tmp_path)
    expected = run_openvino(xml, [data])
    one, two = (list(irrun.load(xml, threads=n).infer([data]).values()) for n in (1, 2))
    for a, b, e in zip(one, two, expected):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5)
