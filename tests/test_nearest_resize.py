"""Interpolate's nearest mode on static shapes (irrun/ops/nearest_resize.py) against OpenVINO:
upsamplings by whole factors (one broadcast copy, the last axis twice as one wider integer),
the coordinate modes and roundings that give the same indices, factors and sizes that do not,
every data type, and the bits of special values."""
import numpy as np
import openvino.opset11 as ops11
import pytest
from ovutil import compare, const, model, param, run_openvino, save

import irrun

RNG = np.random.default_rng(17)
SHAPE = [1, 6, 5, 7]


def nearest(x, scales=None, sizes=None, axes=(2, 3), **attrs):
    target = const(scales, np.float32) if sizes is None else const(sizes, np.int64)
    return ops11.interpolate(x, target, "nearest", "scales" if sizes is None else "sizes",
                             axes=const(list(axes), np.int64), **attrs)


# (resize, the kernel it takes: "copy" for the broadcast copy, "take" for the gathers)
RESIZES = [
    (dict(scales=[2.0, 2.0], coordinate_transformation_mode="asymmetric", nearest_mode="floor"), "copy"),
    (dict(scales=[2.0, 2.0]), "copy"),                   # half_pixel, round_prefer_floor
    (dict(scales=[2.0, 2.0], nearest_mode="round_prefer_ceil"), "copy"),
    (dict(scales=[3.0, 2.0], coordinate_transformation_mode="asymmetric", nearest_mode="floor"), "copy"),
    (dict(scales=[2.0], axes=[2], coordinate_transformation_mode="asymmetric", nearest_mode="floor"), "copy"),
    (dict(scales=[2.0], axes=[3], coordinate_transformation_mode="asymmetric", nearest_mode="floor"), "copy"),
    (dict(sizes=[10, 14], coordinate_transformation_mode="tf_half_pixel_for_nn"), "take"),   # 0, 1, 1, 2, ...
    (dict(sizes=[10, 14], coordinate_transformation_mode="pytorch_half_pixel"), "copy"),
    (dict(scales=[2.0, 3.0], coordinate_transformation_mode="asymmetric", nearest_mode="floor"), "take"),
    (dict(scales=[2.0, 2.0], coordinate_transformation_mode="align_corners"), "copy"),    # 0, 0, 1, 1, ...
    (dict(scales=[2.0, 2.0], coordinate_transformation_mode="align_corners", nearest_mode="ceil"), "take"),
    (dict(sizes=[7, 9]), "take"),
    (dict(scales=[0.5, 0.5]), "take"),
]


def kernel_kind(step) -> str:
    name = getattr(step.kernel, "__qualname__", "")
    return "copy" if name.startswith("_repeating") else "take" if name.startswith("_gathering") else name


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int8, np.uint8, np.int32, np.int64])
def test_nearest_resizes_match_openvino(dtype, tmp_path):
    x = param(SHAPE, dtype)
    nodes = [nearest(x, **resize) for resize, _ in RESIZES]
    for i, node in enumerate(nodes):
        node.set_friendly_name(f"resize{i}")
    m = model(nodes, [x])
    data = (RNG.standard_normal(SHAPE) * 50).astype(dtype)
    # copies, so exactly OpenVINO's values; but f64, which the CPU plugin computes in f32 and irrun
    # as declared (specs/errata/precision.md): within the float tolerance there
    exact = dict(rtol=0, atol=0) if dtype != np.float64 else {}
    compare(m, [data], tmp_path, **exact)
    loaded = irrun.load(save(m, tmp_path / "again"))
    kinds = {s.node.layer.name: kernel_kind(s) for s in loaded._plan.steps}
    # (8-byte values have no integer twice as wide: a last axis repeated twice takes the gathers)
    expected = ["take" if np.dtype(dtype).itemsize == 8 and 3 in resize.get("axes", (2, 3)) else kind
                for resize, kind in RESIZES]
    assert [kinds[f"resize{i}"] for i in range(len(RESIZES))] == expected


def test_upsampling_keeps_every_bit(tmp_path):
    """NaN payloads (a signalling one too), signed zeros and infinities copied as they are,
    whichever way: OpenVINO's bits."""
    x = param([1, 3, 4, 4])
    m = model([nearest(x, scales=[2.0, 2.0]), nearest(x, scales=[3.0, 2.0]), nearest(x, scales=[2.0], axes=[2])], [x])
    data = RNG.standard_normal([1, 3, 4, 4]).astype(np.float32)
    bits = data.view(np.uint32)
    bits[0, 0, 0, :3] = [0x7FC01234, 0xFFA00001, 0x80000000]     # quiet and signalling NaNs, -0.0
    data[0, 1, 2, 3], data[0, 2, 3, 0] = np.inf, -np.inf
    xml = save(m, tmp_path)
    got = list(irrun.load(xml).infer([data]).values())
    for out, expected in zip(got, run_openvino(xml, [data])):
        np.testing.assert_array_equal(out.view(np.uint32), expected.view(np.uint32))


def test_a_yolo_neck_upsampling_in_its_network(tmp_path):
    """A YOLO neck's 2x upsampling between convolutions: OpenVINO's values."""
    x = param([1, 32, 10, 10])
    w = const(RNG.standard_normal([16, 32, 1, 1]) * 0.2, np.float32)
    y = ops11.convolution(x, w, [1, 1], [0, 0], [0, 0], [1, 1])
    up = nearest(ops11.sigmoid(y), scales=[2.0, 2.0], coordinate_transformation_mode="asymmetric",
                 nearest_mode="floor")
    compare(model([ops11.concat([up, up], 1)], [x]), [RNG.standard_normal([1, 32, 10, 10]).astype(np.float32)],
            tmp_path)
