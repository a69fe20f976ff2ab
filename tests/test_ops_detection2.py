"""RegionYolo-1, ReorgYolo-2, ROIPooling-2, PSROIPooling-1, DeformablePSROIPooling-1, ROIAlignRotated-15,
MatrixNms-8, MulticlassNms-8/9, NMSRotated-13, GenerateProposals-9 and the ExperimentalDetectron*-6 ops
against OpenVINO.

Differential runs (`compare`) against the CPU plugin, shape functions against OpenVINO's partial-shape
inference, and validate tests.  Divergences from the op specs are in specs/errata/detection.md.
"""
from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset1 as ops1
import openvino.opset2 as ops2
import pytest
from lxml import etree
from openvino.utils.node_factory import NodeFactory

from ovutil import (
    check_shape_function, compare, compile_cpu, edited_ir, irrun_infer_all, model, openvino_refuses, param, save,
    set_parameter_dims, tensor_type
)
import irrun
from irrun.shapes import format_shape

D = ov.Dimension
F16 = dict(rtol=2e-3, atol=2e-3)


def with_parameter_shape(m: ov.Model, tmp_path, index: int, dims: list[int]) -> Path:
    """Save `m`, then give its index-th Parameter the static shape `dims` (and every port it feeds)."""
    xml = save(m, tmp_path)
    tree = etree.parse(str(xml))
    root = tree.getroot()
    set_parameter_dims(root, [la for la in root.iter("layer") if la.get("type") == "Parameter"][index], dims)
    tree.write(str(xml))
    return xml


def rng(seed=0):
    return np.random.default_rng(seed)


# ---------------------------------------------------------------- RegionYolo

REGION_CASES = {
    # name: (input shape, coords, classes, num, do_softmax, mask, axis, end_axis)
    "v2-softmax": ([2, 5 * (4 + 3 + 1), 4, 3], 4, 3, 5, True, [], 1, 3),
    "v2-axis-2": ([1, 2 * (4 + 2 + 1), 3, 5], 4, 2, 2, True, [], 2, 3),
    "v2-negative-axes": ([1, 2 * (4 + 2 + 1), 3, 5], 4, 2, 2, True, [], -3, -1),
    "v2-end-before-axis": ([1, 2 * (4 + 2 + 1), 3, 5], 4, 2, 2, True, [], 2, 1),
    "v3-mask": ([2, 3 * (4 + 5 + 1), 3, 4], 4, 5, 9, False, [0, 1, 2], 1, 3),
    "v3-one-mask-entry": ([1, 4 + 2 + 1, 5, 5], 4, 2, 3, False, [2], 1, 3),
    "v3-extra-channels": ([2, 3 * (4 + 2 + 1), 2, 2], 4, 2, 3, False, [0, 1], 1, 3),
    "coords-1": ([1, 2 * (1 + 3 + 1), 3, 3], 1, 3, 2, True, [], 1, 3),
}


@pytest.mark.parametrize("case", REGION_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_region_yolo(case, dtype, tmp_path):
    shape, coords, classes, num, softmax, mask, axis, end_axis = REGION_CASES[case]
    x = param(shape, dtype)
    node = ops1.region_yolo(x, coords, classes, num, softmax, mask, axis, end_axis, [1.0, 2.0])
    data = (rng(1).standard_normal(shape) * 4).astype(dtype)
    compare(model(node, [x]), [data], tmp_path, **(F16 if dtype == np.float16 else {}))


@pytest.mark.parametrize("softmax, axis, end_axis, shape", [
    (True, 1, 3, [-1, 40, -1, 5]), (True, 0, 1, [D(1, 3), 40, 4, 5]), (False, 1, 3, [-1, -1, -1, -1]),
    (True, 1, 3, None), (False, 1, 3, None), (True, 2, 3, [2, D(8, 40), D(2, 4), 5]),
])
def test_region_yolo_shape_function(softmax, axis, end_axis, shape):
    attrs = dict(coords=4, classes=3, num=5, do_softmax=softmax, mask=[0, 2], axis=axis, end_axis=end_axis)
    check_shape_function(lambda x: ops1.region_yolo(x, 4, 3, 5, softmax, [0, 2], axis, end_axis), "RegionYolo", 1,
                         attrs, [param(shape)], all_outputs=True)


def test_region_yolo_dynamic_input(tmp_path):
    x = param([-1, 16, -1, -1])
    node = ops1.region_yolo(x, 4, 3, 2, True, [], 1, 3)
    compare(model(node, [x]), [rng(2).standard_normal((2, 16, 3, 4)).astype(np.float32)], tmp_path)


# ---------------------------------------------------------------- ReorgYolo

@pytest.mark.parametrize("shape, stride", [([1, 4, 4, 4], 2), ([2, 8, 6, 4], 2), ([1, 18, 6, 9], 3),
                                           ([1, 3, 5, 5], 1), ([2, 32, 4, 8], 4)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint8])
def test_reorg_yolo(shape, stride, dtype, tmp_path):
    x = param(shape, dtype)
    data = rng(3).integers(0, 100, shape).astype(dtype)
    compare(model(ops2.reorg_yolo(x, [stride]), [x]), [data], tmp_path)


def test_reorg_yolo_dynamic_input(tmp_path):
    x = param([-1, 8, -1, -1])
    compare(model(ops2.reorg_yolo(x, [2]), [x]), [rng(4).standard_normal((2, 8, 6, 4)).astype(np.float32)], tmp_path)


@pytest.mark.parametrize("shape, stride", [
    ([1, 8, 4, 6], 2), ([-1, -1, -1, -1], 2), ([1, D(2, 9), D(4, 11), 6], 2), (None, 2), ([1, 8, D(3, 5), 4], 3),
    ([1, 3, 4, 4], 2), ([1, 8, 5, 4], 2),
])
def test_reorg_yolo_shape_function(shape, stride):
    check_shape_function(lambda x: ops2.reorg_yolo(x, [stride]), "ReorgYolo", 2, {"stride": stride}, [param(shape)],
                         all_outputs=True)


# ---------------------------------------------------------------- ROIPooling

def roi_rows(count, batches, height, width, rng_, scale=1.0):
    """[batch, x1, y1, x2, y2] in image coordinates (map size / scale), some partly outside the map."""
    b = rng_.integers(0, batches, count)
    size = np.array([width, height], np.float64) / scale
    p = rng_.uniform(-0.15, 1.1, (count, 2, 2)) * size
    lo, hi = np.minimum(p[:, 0], p[:, 1]), np.maximum(p[:, 0], p[:, 1])
    return np.concatenate([b[:, None], lo, hi], axis=1).astype(np.float32)


def normalized_rows(count, batches, rng_):
    b = rng_.integers(0, batches, count)
    p = rng_.uniform(-0.1, 1.1, (count, 2, 2))
    lo, hi = np.minimum(p[:, 0], p[:, 1]), np.maximum(p[:, 0], p[:, 1])
    return np.concatenate([b[:, None], lo, hi], axis=1).astype(np.float32)


@pytest.mark.parametrize("method", ["max", "bilinear"])
@pytest.mark.parametrize("pooled, scale", [((2, 2), 1.0), ((3, 4), 0.5), ((1, 1), 0.25), ((6, 5), 0.125)])
def test_roi_pooling(method, pooled, scale, tmp_path):
    r = rng(5)
    feat = r.standard_normal((2, 5, 9, 11)).astype(np.float32)
    rois = roi_rows(7, 2, 9, 11, r, scale) if method == "max" else normalized_rows(7, 2, r)
    x, b = param(feat.shape), param(rois.shape)
    compare(model(ops2.roi_pooling(x, b, pooled, scale, method), [x, b]), [feat, rois], tmp_path)


@pytest.mark.parametrize("method", ["max", "bilinear"])
def test_roi_pooling_adversarial_rois(method, tmp_path):
    """Degenerate, inverted, out-of-map and half-pixel ROIs; batch id -1 ends the list (later ROIs give 0)."""
    feat = rng(6).standard_normal((2, 3, 6, 7)).astype(np.float32)
    rois = np.array([[0, 2, 2, 2, 2], [1, 5, 4, 1, 0], [0, -9, -9, -5, -5], [1, 2.5, 0.5, 3.5, 1.5],
                     [0, 10, 10, 20, 20], [1, 0, 0, 0.5, 1], [0, 0.2, 0.5, 0.4, 0.5],
                     [-1, 0, 0, 3, 3], [0, 0, 0, 3, 3]], np.float32)
    if method == "bilinear":
        rois[:, 1:] = rois[:, 1:] / 6
    x, b = param(feat.shape), param(rois.shape)
    compare(model(ops2.roi_pooling(x, b, [3, 2], 1.0, method), [x, b]), [feat, rois], tmp_path)


@pytest.mark.parametrize("dtype", [np.float16])
def test_roi_pooling_f16(dtype, tmp_path):
    r = rng(7)
    feat = r.standard_normal((1, 4, 8, 8)).astype(dtype)
    rois = roi_rows(5, 1, 8, 8, r).astype(dtype)
    x, b = param(feat.shape, dtype), param(rois.shape, dtype)
    compare(model(ops2.roi_pooling(x, b, [2, 3], 1.0, "max"), [x, b]), [feat, rois], tmp_path, **F16)


def test_roi_pooling_dynamic_rois(tmp_path):
    r = rng(8)
    feat = r.standard_normal((2, 3, 8, 8)).astype(np.float32)
    x, b = param([-1, 3, -1, -1]), param([-1, 5])
    compare(model(ops2.roi_pooling(x, b, [2, 2], 0.5, "max"), [x, b]), [feat, roi_rows(4, 2, 8, 8, r, 0.5)], tmp_path)


@pytest.mark.parametrize("output_size", ["2, 2", None])
def test_roi_pooling_pooled_size_attributes(output_size, tmp_path):
    """OpenVINO's reader takes output_size, lets pooled_h / pooled_w override it and ignores output_roi."""
    feat, rois = rng(9).standard_normal((1, 2, 6, 6)).astype(np.float32), np.array([[0, 0, 0, 5, 5]], np.float32)
    x, b = param(feat.shape), param(rois.shape)

    def edit(layer):
        data = layer.find("data")
        if output_size is None:
            del data.attrib["output_size"]
        else:
            data.set("output_size", output_size)
        data.set("output_roi", "7, 7")
    xml = edited_ir(model(ops2.roi_pooling(x, b, [3, 4], 1.0, "max"), [x, b]), tmp_path, "ROIPooling", edit=edit)
    expected = compile_cpu(xml)([feat, rois])[0]
    got = next(iter(irrun.load(xml).infer([feat, rois]).values()))
    assert got.shape == expected.shape == (1, 2, 3, 4)
    np.testing.assert_allclose(got, expected, rtol=1e-5)


# ---------------------------------------------------------------- PSROIPooling

PSROI_CASES = {
    # name: (mode, output_dim, group_size, spatial_scale, bins_x, bins_y)
    "average": ("average", 3, 2, 1.0, 1, 1),
    "average-scaled": ("average", 2, 3, 0.5, 1, 1),
    "average-group-1": ("average", 4, 1, 0.25, 1, 1),
    "bilinear": ("bilinear", 2, 2, 1.0, 2, 2),
    "bilinear-bins-3x1": ("bilinear", 3, 3, 0.5, 3, 1),
    "bilinear-group-1": ("bilinear", 2, 1, 1.0, 2, 3),
}


@pytest.mark.parametrize("case", PSROI_CASES)
def test_psroi_pooling(case, tmp_path):
    mode, dim, group, scale, bx, by = PSROI_CASES[case]
    r = rng(10)
    channels = dim * (group * group if mode == "average" else bx * by)
    feat = r.standard_normal((2, channels, 9, 8)).astype(np.float32)
    rois = roi_rows(6, 2, 9, 8, r, scale) if mode == "average" else normalized_rows(6, 2, r) / np.float32(scale)
    rois[:, 0] = r.integers(0, 2, 6)
    x, b = param(feat.shape), param(rois.shape)
    node = ops1.psroi_pooling(x, b, dim, group, scale, bx, by, mode)
    compare(model(node, [x, b]), [feat, rois], tmp_path)


@pytest.mark.parametrize("mode", ["average", "bilinear"])
def test_psroi_pooling_adversarial_rois(mode, tmp_path):
    feat = rng(11).standard_normal((1, 8, 5, 6)).astype(np.float32)
    rois = np.array([[0, 2, 2, 2, 2], [0, 4, 3, 1, 0], [0, -9, -9, -5, -5], [0, 2.5, 0.5, 3.5, 1.5],
                     [0, 10, 10, 20, 20], [0, -0.5, -0.5, 0.49999997, 1.5], [-1, 0, 0, 3, 3], [0, 0, 0, 3, 3]],
                    np.float32)
    if mode == "bilinear":
        rois[:, 1:] /= 5
    x, b = param(feat.shape), param(rois.shape)
    node = ops1.psroi_pooling(x, b, 2, 2, 1.0, 2, 2, mode)
    compare(model(node, [x, b]), [feat, rois], tmp_path)


def test_psroi_pooling_f16(tmp_path):
    r = rng(12)
    feat = r.standard_normal((1, 8, 6, 6)).astype(np.float16)
    rois = roi_rows(4, 1, 6, 6, r).astype(np.float16)
    x, b = param(feat.shape, np.float16), param(rois.shape, np.float16)
    compare(model(ops1.psroi_pooling(x, b, 2, 2, 1.0, 1, 1, "average"), [x, b]), [feat, rois], tmp_path, **F16)


@pytest.mark.parametrize("mode, channels, shape", [
    ("average", 12, [1, -1, 5, 5]), ("average", 11, [1, 11, 5, 5]), ("bilinear", 24, [-1, -1, -1, -1]),
    ("bilinear", 7, [1, 7, 5, 5]), ("average", 12, None),
])
def test_psroi_pooling_shape_function(mode, channels, shape):
    attrs = dict(output_dim=3, group_size=2, spatial_scale=1.0, mode=mode, spatial_bins_x=2, spatial_bins_y=4)
    check_shape_function(lambda x, b: ops1.psroi_pooling(x, b, 3, 2, 1.0, 2, 4, mode), "PSROIPooling", 1, attrs,
                         [param(shape), param([-1, 5])], all_outputs=True, refusal="channels")


# ---------------------------------------------------------------- DeformablePSROIPooling

DEFORMABLE_CASES = {
    # name: (output_dim, group_size, spatial_scale, bins_x, bins_y, part_size, trans_std, offset classes or None)
    "no-offsets": (2, 2, 1.0, 1, 1, 1, 1.0, None),
    "no-offsets-bins": (3, 3, 0.5, 2, 3, 1, 1.0, None),
    "offsets": (2, 3, 0.5, 2, 2, 3, 0.1, 1),
    "offsets-two-classes": (4, 2, 1.0, 3, 2, 2, 0.5, 2),
    "offsets-part-larger": (2, 2, 0.25, 1, 1, 4, 1.0, 1),
    "offsets-trans-std-0": (2, 2, 1.0, 2, 2, 2, 0.0, 1),
}


@pytest.mark.parametrize("case", DEFORMABLE_CASES)
def test_deformable_psroi_pooling(case, tmp_path):
    dim, group, scale, bx, by, part, std, classes = DEFORMABLE_CASES[case]
    r = rng(13)
    feat = r.standard_normal((2, dim * group * group, 9, 10)).astype(np.float32)
    rois = roi_rows(5, 2, 9, 10, r, scale)
    x, b = param(feat.shape), param(rois.shape)
    inputs, params = [feat, rois], [x, b]
    offsets = None
    if classes is not None:
        offsets = param([5, 2 * classes, part, part])
        params.append(offsets)
        inputs.append(r.uniform(-1, 1, (5, 2 * classes, part, part)).astype(np.float32))
    node = ops1.deformable_psroi_pooling(x, b, dim, scale, group, "bilinear_deformable", bx, by, std, part,
                                         offsets=offsets)
    compare(model(node, params), inputs, tmp_path)


def test_deformable_psroi_pooling_adversarial_rois(tmp_path):
    feat = rng(14).standard_normal((1, 8, 5, 6)).astype(np.float32)
    rois = np.array([[0, 2, 2, 2, 2], [0, 4, 3, 1, 0], [0, -9, -9, -5, -5], [0, 2.5, 0.5, 3.5, 1.5],
                     [0, 10, 10, 20, 20], [0, 5, 4, 5, 4], [-1, 0, 0, 3, 3], [0, 0, 0, 3, 3]], np.float32)
    offsets = rng(15).uniform(-2, 2, (8, 2, 2, 2)).astype(np.float32)
    x, b, o = param(feat.shape), param(rois.shape), param(offsets.shape)
    node = ops1.deformable_psroi_pooling(x, b, 2, 1.0, 2, "bilinear_deformable", 2, 2, 0.5, 2, offsets=o)
    compare(model(node, [x, b, o]), [feat, rois, offsets], tmp_path)


def test_deformable_psroi_pooling_f16(tmp_path):
    r = rng(16)
    feat = r.standard_normal((1, 8, 6, 6)).astype(np.float16)
    rois = roi_rows(4, 1, 6, 6, r).astype(np.float16)
    x, b = param(feat.shape, np.float16), param(rois.shape, np.float16)
    node = ops1.deformable_psroi_pooling(x, b, 2, 1.0, 2, "bilinear_deformable", 2, 2)
    compare(model(node, [x, b]), [feat, rois], tmp_path, **F16)


@pytest.mark.parametrize("shape, rois, offsets", [
    ([1, 8, 5, 5], [-1, 5], None), (None, None, None), ([1, 8, 5, 5], [D(2, 9), 5], [-1, 2, 2, 2]),
    ([1, 8, 5], [3, 5], None), ([1, 8, 5, 5], [3, 5], [3, 2, 2]),
])
def test_deformable_psroi_pooling_shape_function(shape, rois, offsets):
    args = [param(shape), param(rois)] + ([param(offsets)] if offsets is not None else [])
    attrs = dict(output_dim=2, spatial_scale=1.0, group_size=2)
    check_shape_function(lambda x, b, o=None: ops1.deformable_psroi_pooling(x, b, 2, 1.0, 2, offsets=o),
                         "DeformablePSROIPooling", 1, attrs, args, all_outputs=True)


# ---------------------------------------------------------------- ROIAlignRotated

def rotated_rois(count, height, width, rng_, scale=1.0):
    """[x_ctr, y_ctr, width, height, angle] in image coordinates, some partly outside the map."""
    centre = rng_.uniform(-0.1, 1.1, (count, 2)) * np.array([width, height]) / scale
    size = rng_.uniform(0.3, 6, (count, 2)) / scale
    angle = rng_.uniform(-3.5, 3.5, (count, 1))
    return np.concatenate([centre, size, angle], axis=1).astype(np.float32)


@pytest.mark.parametrize("clockwise", [True, False])
@pytest.mark.parametrize("pooled, ratio, scale", [((2, 2), 2, 1.0), ((3, 4), 0, 0.5), ((1, 1), 1, 2.0),
                                                   ((5, 3), 0, 1.0)])
def test_roi_align_rotated(clockwise, pooled, ratio, scale, tmp_path):
    import openvino.opset15 as ops15
    r = rng(17)
    feat = r.standard_normal((2, 3, 8, 9)).astype(np.float32)
    rois = rotated_rois(6, 8, 9, r, scale)
    idx = r.integers(0, 2, 6).astype(np.int32)
    x, b, i = param(feat.shape), param(rois.shape), param(idx.shape, np.int32)
    node = ops15.roi_align_rotated(x, b, i, pooled[0], pooled[1], ratio, scale, clockwise)
    compare(model(node, [x, b, i]), [feat, rois, idx], tmp_path)


def test_roi_align_rotated_adversarial(tmp_path):
    """Zero-size, huge, far-outside and exactly axis-aligned ROIs; i64 batch indices; dynamic shapes."""
    import openvino.opset15 as ops15
    feat = rng(18).standard_normal((2, 2, 5, 6)).astype(np.float32)
    rois = np.array([[2, 2, 0, 0, 0], [3, 2.5, 40, 30, 0.3], [-20, -20, 2, 2, 1], [2.5, 2.5, 4, 2, np.pi / 2],
                     [0, 0, 1, 1, -np.pi], [5.5, 4.5, 3, 3, 0]], np.float32)
    idx = np.array([0, 1, 1, 0, 1, 0], np.int64)
    x, b, i = param([-1, 2, -1, -1]), param([-1, 5]), param([-1], np.int64)
    node = ops15.roi_align_rotated(x, b, i, 3, 2, 0, 1.0, True)
    compare(model(node, [x, b, i]), [feat, rois, idx], tmp_path)


def test_roi_align_rotated_f16(tmp_path):
    import openvino.opset15 as ops15
    r = rng(19)
    feat = r.standard_normal((1, 3, 6, 6)).astype(np.float16)
    rois = rotated_rois(4, 6, 6, r).astype(np.float16)
    idx = np.zeros(4, np.int32)
    x, b, i = param(feat.shape, np.float16), param(rois.shape, np.float16), param(idx.shape, np.int32)
    node = ops15.roi_align_rotated(x, b, i, 2, 2, 2, 1.0, False)
    compare(model(node, [x, b, i]), [feat, rois, idx], tmp_path, **F16)


# ---------------------------------------------------------------- NMSRotated

def rotated_boxes(batches, count, rng_, grid=False):
    centre = rng_.uniform(0, 8, (batches, count, 2))
    size = rng_.uniform(0.5, 4, (batches, count, 2))
    angle = rng_.uniform(-np.pi, np.pi, (batches, count, 1))
    boxes = np.concatenate([centre, size, angle], -1)
    if grid:
        boxes[..., :4] = np.round(boxes[..., :4])
        boxes[..., 4] = np.round(boxes[..., 4] / (np.pi / 2)) * (np.pi / 2)
    return boxes.astype(np.float32)


def nms_rotated_model(batches, classes, count, max_out, iou, score_thr, sort=True, clockwise=True, output_type="i64",
                      dynamic=False, dtype=np.float32):
    import openvino.opset13 as ops13
    b = param([-1, -1, 5] if dynamic else [batches, count, 5], dtype)
    s = param([-1, -1, -1] if dynamic else [batches, classes, count], dtype)
    node = ops13.nms_rotated(b, s, ops1.constant(np.int64(max_out)), ops1.constant(np.dtype(dtype).type(iou)),
                             ops1.constant(np.dtype(dtype).type(score_thr)), sort, output_type, clockwise)
    return model(node, [b, s])


@pytest.mark.parametrize("sort, clockwise", [(True, True), (False, True), (True, False)])
@pytest.mark.parametrize("max_out, iou, score_thr", [(3, 0.3, 0.0), (20, 0.1, 0.4), (1, 0.7, -1.0), (10, 0.0, 0.2)])
def test_nms_rotated(sort, clockwise, max_out, iou, score_thr, tmp_path):
    r = rng(20)
    scores = r.uniform(0, 1, (2, 3, 12)).astype(np.float32)
    m = nms_rotated_model(2, 3, 12, max_out, iou, score_thr, sort, clockwise)
    compare(m, [rotated_boxes(2, 12, r), scores], tmp_path)


NMS_ROTATED_ADVERSARIAL = {
    # identical boxes: IoU 1, suppressed only below threshold 1 (the rule is IoU > threshold)
    "identical": ([[2, 2, 2, 2, 0.3], [2, 2, 2, 2, 0.3], [2, 2, 2, 2, 0.3]], [0.9, 0.8, 0.7], 0.99),
    "identical-threshold-1": ([[2, 2, 2, 2, 0.3], [2, 2, 2, 2, 0.3]], [0.9, 0.8], 1.0),
    # no area: never suppressed at a threshold >= 0; IoU with it is 0
    "zero-area": ([[2, 2, 0, 2, 0], [2, 2, 0, 2, 0], [2, 2, 2, 2, 0], [2, 2, 2, 0, 1]], [0.9, 0.8, 0.7, 0.6], 0.0),
    "zero-area-negative-threshold": ([[2, 2, 2, 2, 0], [2, 2, 0, 2, 0], [9, 9, 1, 1, 0]], [0.9, 0.8, 0.7], -0.1),
    # edge-sharing and corner-touching rectangles (exact crossings at t = 0 or 1)
    "touching": ([[1, 1, 2, 2, 0], [3, 1, 2, 2, 0], [3, 3, 2, 2, 0], [2, 2, 2, 2, 0]], [0.9, 0.8, 0.7, 0.6], 0.0),
    "quarter-turns": ([[2, 2, 4, 2, 0], [2, 2, 4, 2, np.pi / 2], [2, 2, 4, 2, np.pi], [2, 2, 2, 4, 0]],
                      [0.9, 0.8, 0.7, 0.6], 0.4),
    "contained": ([[4, 4, 6, 6, 0.5], [4, 4, 1, 1, 0.2], [4.5, 4, 2, 1, -0.7]], [0.9, 0.8, 0.7], 0.01),
    "negative-size": ([[2, 2, -2, 2, 0], [2, 2, 2, 2, 0], [2, 2, -2, -2, 0]], [0.9, 0.8, 0.7], 0.1),
    "score-ties": ([[0, 0, 1, 1, 0], [5, 5, 1, 1, 0], [0.2, 0, 1, 1, 0], [5, 5.1, 1, 1, 0]], [0.5, 0.5, 0.5, 0.5], 0.3),
}


@pytest.mark.parametrize("case", NMS_ROTATED_ADVERSARIAL)
@pytest.mark.parametrize("clockwise", [True, False])
def test_nms_rotated_adversarial(case, clockwise, tmp_path):
    boxes, scores, iou = NMS_ROTATED_ADVERSARIAL[case]
    boxes, scores = np.array([boxes], np.float32), np.array([[scores]], np.float32)
    m = nms_rotated_model(1, 1, boxes.shape[1], 10, iou, 0.0, clockwise=clockwise)
    compare(m, [boxes, scores], tmp_path)


def test_nms_rotated_grid_boxes(tmp_path):
    """Integer centres and sizes at quarter turns: many exact edge crossings and contained corners."""
    r = rng(21)
    m = nms_rotated_model(2, 2, 16, 16, 0.2, 0.0)
    compare(m, [rotated_boxes(2, 16, r, grid=True), r.uniform(0, 1, (2, 2, 16)).astype(np.float32)], tmp_path)


@pytest.mark.parametrize("output_type", ["i32", "i64"])
def test_nms_rotated_dynamic_f16(output_type, tmp_path):
    r = rng(22)
    m = nms_rotated_model(2, 2, 9, 4, 0.3, 0.1, output_type=output_type, dynamic=True, dtype=np.float16)
    boxes = rotated_boxes(2, 9, r).astype(np.float16)
    compare(m, [boxes, r.uniform(0, 1, (2, 2, 9)).astype(np.float16)], tmp_path)


@pytest.mark.parametrize("boxes, scores, max_out", [
    ([2, 10, 5], [2, 3, 10], 4), ([-1, -1, 5], [-1, -1, -1], 4), ([2, D(2, 10), 5], [2, 3, D(1, 5)], 7),
    ([1, 10, 5], [1, 3, 10], 100), ([1, 10, 4], [1, 3, 10], 4), ([2, 10, 5], [3, 3, 10], 4), (None, None, 4),
])
def test_nms_rotated_shape_function(boxes, scores, max_out):
    import openvino.opset13 as ops13
    args = [param(boxes), param(scores), ops1.constant(np.int64(max_out)), ops1.constant(np.float32(0.5)),
            ops1.constant(np.float32(0))]
    check_shape_function(ops13.nms_rotated, "NMSRotated", 13, {}, args, all_outputs=True)


# ---------------------------------------------------------------- MatrixNms and MulticlassNms

def corner_boxes(batches, count, rng_, normalized=True, grid=False):
    """[x1, y1, x2, y2] with x1 <= x2, y1 <= y2 (normalized: in [0, 1]; else pixels)."""
    scale = 1.0 if normalized else 20.0
    lo = rng_.uniform(0, 0.8, (batches, count, 2))
    size = rng_.uniform(0.05, 0.4, (batches, count, 2))
    boxes = np.concatenate([lo, lo + size], -1) * scale
    return (np.round(boxes * 10) / 10 if grid else boxes).astype(np.float32)


def distinct_scores(shape, rng_):
    """Scores without ties (OpenVINO's sorts are not stable)."""
    return rng_.permutation(np.prod(shape)).reshape(shape).astype(np.float32) / np.prod(shape) + np.float32(0.001)


def matrix_nms_model(shape, dtype=np.float32, dynamic=False, **attrs):
    import openvino.opset8 as ops8
    batches, classes, count = shape
    b = param([-1, -1, 4] if dynamic else [batches, count, 4], dtype)
    s = param([-1, -1, -1] if dynamic else [batches, classes, count], dtype)
    return model(ops8.matrix_nms(b, s, **attrs), [b, s])


MATRIX_CASES = {
    "defaults": {},
    "score-across-batch": dict(sort_result_type="score", sort_result_across_batch=True),
    "class-across-batch": dict(sort_result_type="classid", sort_result_across_batch=True),
    "class-per-batch": dict(sort_result_type="classid"),
    "score-per-batch": dict(sort_result_type="score", score_threshold=0.3),
    "gaussian": dict(decay_function="gaussian", gaussian_sigma=0.5, post_threshold=0.2),
    "gaussian-big-sigma": dict(decay_function="gaussian", gaussian_sigma=4.0, post_threshold=0.05),
    "top-k": dict(nms_top_k=5, keep_top_k=7, sort_result_type="score", sort_result_across_batch=True),
    "keep-top-k": dict(keep_top_k=4, post_threshold=0.1),
    "background": dict(background_class=1, sort_result_type="classid"),
    "unnormalized": dict(normalized=False, post_threshold=0.3),
    "i32": dict(output_type="i32", post_threshold=0.4),
}


@pytest.mark.parametrize("case", MATRIX_CASES)
def test_matrix_nms(case, tmp_path):
    r = rng(23)
    attrs = MATRIX_CASES[case]
    shape = (2, 3, 10)
    boxes = corner_boxes(2, 10, r, normalized=attrs.get("normalized", True))
    compare(matrix_nms_model(shape, **attrs), [boxes, distinct_scores(shape, r)], tmp_path)


def test_matrix_nms_adversarial(tmp_path):
    """Identical, disjoint, touching and inverted boxes; dynamic shapes; nothing above the threshold in a class."""
    boxes = np.array([[[0, 0, 1, 1], [0, 0, 1, 1], [1, 1, 2, 2], [0.5, 0, 1.5, 1], [2, 2, 1, 1], [5, 5, 6, 6]]],
                     np.float32)
    scores = np.array([[[0.9, 0.8, 0.7, 0.6, 0.5, 0.4], [0.05, 0.04, 0.03, 0.02, 0.01, 0.011]]], np.float32)
    compare(matrix_nms_model((1, 2, 6), dynamic=True, score_threshold=0.1), [boxes, scores], tmp_path)


def test_matrix_nms_f16(tmp_path):
    r = rng(24)
    shape = (1, 2, 8)
    boxes, scores = corner_boxes(1, 8, r), distinct_scores(shape, r)
    compare(matrix_nms_model(shape, np.float16, post_threshold=0.1), [boxes.astype(np.float16),
                                                                      scores.astype(np.float16)], tmp_path, **F16)


def multiclass_model(version, shape, dtype=np.float32, dynamic=False, roisnum=None, **attrs):
    import openvino.opset8 as ops8
    import openvino.opset9 as ops9
    if roisnum is not None:                      # boxes [C, M, 4], scores [C, M], roisnum [N]
        classes, count = shape
        b = param([-1, -1, 4] if dynamic else [classes, count, 4], dtype)
        s = param([-1, -1] if dynamic else [classes, count], dtype)
        n = param([-1] if dynamic else [roisnum], np.int32)
        return model(ops9.multiclass_nms(b, s, n, **attrs), [b, s, n])
    batches, classes, count = shape
    b = param([-1, -1, 4] if dynamic else [batches, count, 4], dtype)
    s = param([-1, -1, -1] if dynamic else [batches, classes, count], dtype)
    build = ops8.multiclass_nms if version == 8 else ops9.multiclass_nms
    return model(build(b, s, **attrs), [b, s])


MULTICLASS_CASES = {
    "defaults": dict(iou_threshold=0.5),
    "score-across-batch": dict(sort_result_type="score", sort_result_across_batch=True, iou_threshold=0.3),
    "class-across-batch": dict(sort_result_type="classid", sort_result_across_batch=True, iou_threshold=0.3),
    "class-per-batch": dict(sort_result_type="classid", iou_threshold=0.2, score_threshold=0.3),
    "top-k": dict(nms_top_k=4, keep_top_k=6, iou_threshold=0.3, sort_result_type="score"),
    "keep-top-k-across": dict(keep_top_k=3, iou_threshold=0.4, sort_result_type="score",
                              sort_result_across_batch=True),
    "background": dict(background_class=0, iou_threshold=0.3),
    "eta": dict(nms_eta=0.7, iou_threshold=0.9, score_threshold=0.1),
    "eta-small-threshold": dict(nms_eta=0.5, iou_threshold=0.4),
    "eta-zero": dict(nms_eta=0.0, iou_threshold=0.8, nms_top_k=6),
    "unnormalized": dict(normalized=False, iou_threshold=0.3),
    "i32": dict(output_type="i32", iou_threshold=0.5, sort_result_type="classid"),
}


@pytest.mark.parametrize("case", MULTICLASS_CASES)
@pytest.mark.parametrize("version", [8, 9])
def test_multiclass_nms(case, version, tmp_path):
    r = rng(25)
    attrs = MULTICLASS_CASES[case]
    shape = (2, 3, 10)
    boxes = corner_boxes(2, 10, r, normalized=attrs.get("normalized", True))
    compare(multiclass_model(version, shape, **attrs), [boxes, distinct_scores(shape, r)], tmp_path)


@pytest.mark.parametrize("attrs", [dict(iou_threshold=0.3), dict(iou_threshold=0.6, nms_eta=0.8, keep_top_k=4),
                                   dict(iou_threshold=0.4, sort_result_type="classid", sort_result_across_batch=True,
                                        background_class=2, nms_top_k=3)])
def test_multiclass_nms_roisnum(attrs, tmp_path):
    """MulticlassNms-9 with boxes per class [C, M, 4], scores [C, M] and roisnum splitting M among images."""
    r = rng(26)
    classes, count = 3, 12
    boxes = corner_boxes(classes, count, r)
    scores = distinct_scores((classes, count), r)
    roisnum = np.array([5, 0, 7], np.int32)
    compare(multiclass_model(9, (classes, count), roisnum=3, **attrs), [boxes, scores, roisnum], tmp_path)


def test_multiclass_nms_adversarial(tmp_path):
    """IoU exactly at the threshold (suppressed: >=), zero-area boxes (IoU 0), score exactly at the threshold."""
    boxes = np.array([[[0, 0, 1, 2], [0, 1, 1, 3], [0, 0, 1, 2], [3, 3, 3, 4], [3, 3, 3, 4], [0, 2, 1, 4]]], np.float32)
    scores = np.array([[[0.9, 0.8, 0.7, 0.6, 0.5, 0.3]]], np.float32)
    m = multiclass_model(9, (1, 1, 6), dynamic=True, iou_threshold=1 / 3, score_threshold=0.3)
    compare(m, [boxes, scores], tmp_path)


def test_multiclass_nms_f16(tmp_path):
    r = rng(27)
    shape = (2, 2, 8)
    boxes, scores = corner_boxes(2, 8, r), distinct_scores(shape, r)
    compare(multiclass_model(9, shape, np.float16, iou_threshold=0.4),
            [boxes.astype(np.float16), scores.astype(np.float16)], tmp_path, **F16)


@pytest.mark.parametrize("eta", [1.0, 0.9])
def test_multiclass_nms_score_at_threshold(eta, tmp_path):
    """With nms_eta < 1 the CPU plugin checks a candidate scoring exactly score_threshold only against the
    newest selected box: the copy of box 0 survives (it overlaps box 0, not box 1); with nms_eta = 1 it does not."""
    boxes = np.array([[[0, 0, 1, 1], [5, 5, 6, 6], [0, 0, 1, 1]]], np.float32)
    scores = np.array([[[0.9, 0.8, 0.5]]], np.float32)
    m = multiclass_model(9, (1, 1, 3), iou_threshold=0.5, score_threshold=0.5, nms_eta=eta)
    got = compare(m, [boxes, scores], tmp_path)
    assert len(next(iter(got.values()))) == (3 if eta < 1 else 2)


NMS_SHAPES = [
    ([2, 10, 4], [2, 3, 10]), ([-1, -1, 4], [-1, -1, -1]), ([2, D(2, 10), 4], [2, 3, D(1, 5)]),
    ([D(1, 3), 6, 4], [-1, 4, 6]), (None, None), ([2, 10, 4], [3, 3, 10]), ([2, 10, 5], [2, 3, 10]),
    ([2, 10, 4], [2, 3, 9]),
]
NMS_SHAPE_ATTRS = [{}, dict(nms_top_k=3), dict(keep_top_k=5), dict(nms_top_k=4, keep_top_k=50),
                   dict(background_class=1, keep_top_k=7)]


@pytest.mark.parametrize("boxes, scores", NMS_SHAPES)
@pytest.mark.parametrize("attrs", NMS_SHAPE_ATTRS)
@pytest.mark.parametrize("op", ["MatrixNms-8", "MulticlassNms-8", "MulticlassNms-9"])
def test_multiclass_nms_shape_function(op, boxes, scores, attrs):
    import openvino.opset8 as ops8
    import openvino.opset9 as ops9
    build = {"MatrixNms-8": ops8.matrix_nms, "MulticlassNms-8": ops8.multiclass_nms,
             "MulticlassNms-9": ops9.multiclass_nms}[op]
    type_name, version = op.split("-")
    check_shape_function(lambda b, s: build(b, s, **attrs), type_name, int(version), attrs,
                         [param(boxes), param(scores)], all_outputs=True)


@pytest.mark.parametrize("type_name, version", [("MatrixNms", 8), ("MulticlassNms", 8), ("MulticlassNms", 9)])
def test_multiclass_nms_scores_of_unknown_rank(type_name, version):
    """OpenVINO's MulticlassNms shape inference fails on it ("Accessing out-of-range dimension"); irrun
    gives dynamic rows, as OpenVINO's MatrixNms does (and MulticlassNms's rule for an unknown scores rank)."""
    got = irrun_infer_all(type_name, version, {}, [tensor_type([2, 10, 4]), tensor_type(None)])
    images = "[2]" if type_name == "MatrixNms" else "[?]"
    assert [format_shape(t.shape) for t in got] == ["[?,6]", "[?,1]", images]


@pytest.mark.parametrize("boxes, scores, roisnum", [
    ([3, 12, 4], [3, 12], [4]), ([-1, -1, 4], [-1, -1], [-1]), ([3, D(2, 9), 4], [3, -1], [D(1, 4)]),
    ([3, 12, 4], [3, 12], None), ([3, 12, 4], [3, 11], [4]), ([3, 12, 4], [3, 12, 1], [4]),
])
@pytest.mark.parametrize("attrs", [{}, dict(nms_top_k=5, keep_top_k=8)])
def test_multiclass_nms_roisnum_shape_function(boxes, scores, roisnum, attrs):
    import openvino.opset9 as ops9
    check_shape_function(lambda b, s, n: ops9.multiclass_nms(b, s, n, **attrs), "MulticlassNms", 9, attrs,
                         [param(boxes), param(scores), param(roisnum, np.int32)], all_outputs=True)


# ---------------------------------------------------------------- GenerateProposals and ExperimentalDetectron*

ED = NodeFactory("opset6")


def ed_node(type_name, params, attrs):
    return ED.create(type_name, [p.output(0) for p in params], attrs)


def grid_anchors(height, width, count, stride, rng_):
    """[H, W, A, 4] anchors: boxes of random sizes centred on each cell."""
    cy, cx = np.meshgrid((np.arange(height) + 0.5) * stride, (np.arange(width) + 0.5) * stride, indexing="ij")
    size = rng_.uniform(2, 3 * stride, (count, 2))
    half = size[None, None] / 2
    centre = np.stack([cx, cy], -1)[:, :, None, :]
    return np.concatenate([centre - half, centre + half], -1).astype(np.float32)


def proposal_inputs(batches, count, height, width, rng_, stride=8.0):
    anchors = grid_anchors(height, width, count, stride, rng_)
    deltas = (rng_.standard_normal((batches, count * 4, height, width)) * 0.3).astype(np.float32)
    scores = distinct_scores((batches, count, height, width), rng_)
    im_info = np.array([[height * stride, width * stride, 1.0, 1.2], [height * stride * 0.8, width * stride, 1.5, 2.0]],
                       np.float32)[:batches]
    return im_info, anchors, deltas, scores


GENERATE_CASES = {
    # name: (normalized, min_size, nms_threshold, pre_nms, post_nms, im_info values)
    "normalized": (True, 0.0, 0.7, 30, 10, 3),
    "pixels": (False, 4.0, 0.5, 40, 12, 4),
    "min-size-drops": (True, 9.0, 0.6, 60, 20, 4),
    "pre-limits": (False, 1.0, 0.3, 5, 20, 3),
    "no-nms": (True, 0.0, 1.0, 100, 100, 3),
}


@pytest.mark.parametrize("case", GENERATE_CASES)
@pytest.mark.parametrize("roi_num_type", ["i32", "i64"])
def test_generate_proposals(case, roi_num_type, tmp_path):
    import openvino.opset9 as ops9
    normalized, min_size, nms, pre, post, info_values = GENERATE_CASES[case]
    im_info, anchors, deltas, scores = proposal_inputs(2, 3, 4, 5, rng(28))
    im_info = im_info[:, :info_values]
    params = [param(a.shape) for a in (im_info, anchors, deltas, scores)]
    node = ops9.generate_proposals(*params, min_size, nms, pre, post, normalized=normalized, roi_num_type=roi_num_type)
    compare(model(node, params), [im_info, anchors, deltas, scores], tmp_path)


def test_generate_proposals_dynamic_f16(tmp_path):
    import openvino.opset9 as ops9
    im_info, anchors, deltas, scores = proposal_inputs(2, 2, 3, 4, rng(29))
    inputs = [a.astype(np.float16) for a in (im_info, anchors, deltas, scores)]
    params = [param([-1, 4], np.float16), param([-1, -1, -1, 4], np.float16), param([-1, -1, -1, -1], np.float16),
              param([-1, -1, -1, -1], np.float16)]
    node = ops9.generate_proposals(*params, 1.0, 0.6, 20, 8)
    compare(model(node, params), inputs, tmp_path, **F16)


@pytest.mark.parametrize("shapes", [
    ([2, 3], [4, 5, 3, 4], [2, 12, 4, 5], [2, 3, 4, 5]), ([-1, 4], [-1, -1, -1, 4], [-1, -1, -1, -1], [-1, -1, -1, -1]),
    ([D(1, 3), 3], [4, 5, 3, 4], [-1, 12, 4, 5], [2, 3, 4, 5]), (None, None, None, None),
    ([2, 3], [4, 5, 3, 4], [2, 12, 4, 5], [2, 4, 4, 5]), ([2, 5], [4, 5, 3, 4], [2, 12, 4, 5], [2, 3, 4, 5]),
    ([2, 3], [4, 5, 3, 4], [3, 12, 4, 5], [3, 3, 4, 5]),
])
def test_generate_proposals_shape_function(shapes):
    import openvino.opset9 as ops9
    attrs = dict(min_size=0.0, nms_threshold=0.5, pre_nms_count=10, post_nms_count=6)
    check_shape_function(lambda *a: ops9.generate_proposals(*a, 0.0, 0.5, 10, 6), "GenerateProposals", 9, attrs,
                         [param(s) for s in shapes], all_outputs=True)


@pytest.mark.parametrize("min_size, nms, pre, post", [(0.0, 0.7, 30, 10), (0.0, 0.5, 60, 60), (5.0, 0.5, 25, 50),
                                                     (1.0, 0.2, 6, 4)])
def test_ed_generate_proposals_single_image(min_size, nms, pre, post, tmp_path):
    """A proposal scoring 0 is still eligible (last); proposals below min_size score 0, and OpenVINO orders
    equal scores arbitrarily (std::partial_sort), so pre_nms_count stops before ties."""
    r = rng(30)
    _, anchors, deltas, scores = proposal_inputs(1, 3, 4, 5, r)
    scores[0, 0, 0, 0] = 0
    inputs = [np.array([32.0, 40.0, 1.0], np.float32), anchors.reshape(-1, 4), deltas[0], scores[0]]
    params = [param(a.shape) for a in inputs]
    node = ed_node("ExperimentalDetectronGenerateProposalsSingleImage", params,
                   dict(min_size=min_size, nms_threshold=nms, pre_nms_count=pre, post_nms_count=post))
    compare(model(node, params), inputs, tmp_path)


def detection_output_inputs(rois_count, classes, rng_):
    lo = rng_.uniform(0, 60, (rois_count, 2))
    rois = np.concatenate([lo, lo + rng_.uniform(1, 30, (rois_count, 2))], 1).astype(np.float32)
    rois[0, 2] = rois[0, 0]                      # a ROI without area
    deltas = (rng_.standard_normal((rois_count, classes * 4)) * 0.5).astype(np.float32)
    scores = distinct_scores((rois_count, classes), rng_)
    return [rois, deltas, scores, np.array([[80, 90, 1]], np.float32)]


ED_DETECTION_CASES = {
    "default": dict(score_threshold=0.05, nms_threshold=0.5, post_nms_count=5, max_detections_per_image=8),
    "few-detections": dict(score_threshold=0.8, nms_threshold=0.5, post_nms_count=5, max_detections_per_image=20),
    "all-per-class": dict(score_threshold=0.0, nms_threshold=0.3, post_nms_count=-1, max_detections_per_image=10),
    "no-nms": dict(score_threshold=0.2, nms_threshold=1.0, post_nms_count=100, max_detections_per_image=30),
    "agnostic-flag": dict(score_threshold=0.1, nms_threshold=0.4, post_nms_count=3, max_detections_per_image=6,
                          class_agnostic_box_regression=True),
}


@pytest.mark.parametrize("case", ED_DETECTION_CASES)
def test_ed_detection_output(case, tmp_path):
    classes = 4
    inputs = detection_output_inputs(12, classes, rng(31))
    params = [param(a.shape) for a in inputs]
    attrs = dict(max_delta_log_wh=2.0, num_classes=classes, deltas_weights=[10.0, 10.0, 5.0, 5.0],
                 class_agnostic_box_regression=False) | ED_DETECTION_CASES[case]
    node = ed_node("ExperimentalDetectronDetectionOutput", params, attrs)
    compare(model(node, params), inputs, tmp_path)


@pytest.mark.parametrize("flatten", [True, False])
@pytest.mark.parametrize("strides", [(0.0, 0.0), (4.0, 2.5)])
def test_ed_prior_grid_generator(flatten, strides, tmp_path):
    priors = np.array([[-8, -8, 8, 8], [-16, -4, 16, 4], [-2, -6, 2, 6]], np.float32)
    params = [param([3, 4]), param([1, 8, 4, 5]), param([1, 3, 30, 41])]
    inputs = [priors, rng(32).standard_normal((1, 8, 4, 5)).astype(np.float32),
              np.zeros((1, 3, 30, 41), np.float32)]
    node = ed_node("ExperimentalDetectronPriorGridGenerator", params,
                   dict(flatten=flatten, h=0, w=0, stride_x=strides[0], stride_y=strides[1]))
    compare(model(node, params), inputs, tmp_path)


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("ratio, size", [(2, 3), (0, 2), (1, 4)])
def test_ed_roi_feature_extractor(aligned, ratio, size, tmp_path):
    r = rng(33)
    lo = r.uniform(-10, 300, (10, 2))
    sizes = np.exp(r.uniform(np.log(2), np.log(500), (10, 2)))
    rois = np.concatenate([lo, lo + sizes], 1).astype(np.float32)
    rois[1, 2:] = rois[1, :2]                    # no area: no level, features 0
    maps = [r.standard_normal((1, 3, 64 // s, 80 // s)).astype(np.float32) for s in (4, 8, 16, 32)]
    params = [param(rois.shape)] + [param(m.shape) for m in maps]
    node = ed_node("ExperimentalDetectronROIFeatureExtractor", params,
                   dict(output_size=size, sampling_ratio=ratio, pyramid_scales=[4, 8, 16, 32], aligned=aligned))
    compare(model(node, params), [rois] + maps, tmp_path)


@pytest.mark.parametrize("count, max_rois", [(10, 4), (6, 6), (1, 1)])
def test_ed_topk_rois(count, max_rois, tmp_path):
    r = rng(34)
    rois, probs = r.uniform(0, 50, (count, 4)).astype(np.float32), distinct_scores((count,), r)
    params = [param([-1, 4]), param([-1])]
    node = ed_node("ExperimentalDetectronTopKROIs", params, dict(max_rois=max_rois))
    compare(model(node, params), [rois, probs], tmp_path)


def test_ed_roi_feature_extractor_f16(tmp_path):
    r = rng(35)
    rois = np.array([[0, 0, 30, 40], [10, 5, 200, 180], [3, 3, 9, 9]], np.float16)
    maps = [r.standard_normal((1, 2, 16, 16)).astype(np.float16), r.standard_normal((1, 2, 8, 8)).astype(np.float16)]
    params = [param(rois.shape, np.float16)] + [param(m.shape, np.float16) for m in maps]
    node = ed_node("ExperimentalDetectronROIFeatureExtractor", params,
                   dict(output_size=2, sampling_ratio=2, pyramid_scales=[4, 8], aligned=False))
    compare(model(node, params), [rois] + maps, tmp_path, **F16)


@pytest.mark.parametrize("type_name, inputs, attrs", [
    ("ExperimentalDetectronTopKROIs", ([10, 4], [10]), dict(max_rois=5)),
    ("ExperimentalDetectronTopKROIs", ([-1, 4], [-1]), dict(max_rois=0)),
    ("ExperimentalDetectronTopKROIs", ([10, 4], [9]), dict(max_rois=5)),
    ("ExperimentalDetectronTopKROIs", ([10, 5], [10]), dict(max_rois=5)),
    ("ExperimentalDetectronPriorGridGenerator", ([3, 4], [1, 8, 4, 5], [1, 3, 16, 20]), dict(flatten=True)),
    ("ExperimentalDetectronPriorGridGenerator", ([3, 4], [1, 8, -1, -1], [1, 3, 16, 20]), dict(flatten=False)),
    ("ExperimentalDetectronPriorGridGenerator", ([-1, 4], [1, 8, 4, 5], None), dict(flatten=False)),
    ("ExperimentalDetectronPriorGridGenerator", ([3, 4], [2, 8, 4, 5], [1, 3, 16, 20]), dict(flatten=True)),
    ("ExperimentalDetectronROIFeatureExtractor", ([5, 4], [1, 8, 16, 16], [1, 8, 8, 8]),
     dict(output_size=2, pyramid_scales=[4, 8])),
    ("ExperimentalDetectronROIFeatureExtractor", ([-1, 4], [1, -1, 16, 16], [1, 8, 8, 8]),
     dict(output_size=3, pyramid_scales=[4, 8])),
    ("ExperimentalDetectronROIFeatureExtractor", ([5, 4], [1, 8, 16, 16], [1, 6, 8, 8]),
     dict(output_size=2, pyramid_scales=[4, 8])),
    ("ExperimentalDetectronROIFeatureExtractor", ([5, 4], [2, 8, 16, 16], [1, 8, 8, 8]),
     dict(output_size=2, pyramid_scales=[4, 8])),
    ("ExperimentalDetectronGenerateProposalsSingleImage", ([3], [24, 4], [12, 4, 2], [3, 4, 2]),
     dict(post_nms_count=5)),
    ("ExperimentalDetectronGenerateProposalsSingleImage", ([4], [24, 4], [12, 4, 2], [3, 4, 2]),
     dict(post_nms_count=5)),
    ("ExperimentalDetectronGenerateProposalsSingleImage", (None, None, None, None), dict(post_nms_count=7)),
    ("ExperimentalDetectronDetectionOutput", ([10, 4], [10, 12], [10, 3], [1, 3]),
     dict(num_classes=3, max_detections_per_image=7, deltas_weights=[10.0, 10.0, 5.0, 5.0])),
    ("ExperimentalDetectronDetectionOutput", ([-1, 4], [-1, -1], [-1, -1], [1, 3]),
     dict(num_classes=3, max_detections_per_image=7, deltas_weights=[10.0, 10.0, 5.0, 5.0])),
    ("ExperimentalDetectronDetectionOutput", ([10, 4], [10, 12], [10, 4], [1, 3]),
     dict(num_classes=3, max_detections_per_image=7, deltas_weights=[10.0, 10.0, 5.0, 5.0])),
    ("ExperimentalDetectronDetectionOutput", ([10, 4], [9, 12], [10, 3], [1, 3]),
     dict(num_classes=3, max_detections_per_image=7, deltas_weights=[10.0, 10.0, 5.0, 5.0])),
])
def test_ed_shape_functions(type_name, inputs, attrs):
    check_shape_function(lambda *a: ed_node(type_name, a, attrs), type_name, 6, attrs, [param(s) for s in inputs],
                         all_outputs=True)


# ---------------------------------------------------------------- versions, validate

def test_version_redirects(tmp_path):
    """ReorgYolo written as opset1 reads as ReorgYolo-2; ExperimentalDetectron* as "experimental" or
    "extension" read as opset6 (OpenVINO's IR reader agrees)."""
    x = param([1, 8, 4, 4])
    data = rng(36).standard_normal((1, 8, 4, 4)).astype(np.float32)
    xml = edited_ir(model(ops2.reorg_yolo(x, [2]), [x]), tmp_path / "reorg", "ReorgYolo",
                    edit=lambda layer: layer.set("version", "opset1"))
    expected = compile_cpu(xml)([data])[0]
    np.testing.assert_array_equal(next(iter(irrun.load(xml).infer([data]).values())), expected)
    rois, probs = rng(37).uniform(0, 9, (6, 4)).astype(np.float32), distinct_scores((6,), rng(37))
    for version in ("experimental", "extension"):
        params = [param([6, 4]), param([6])]
        node = ed_node("ExperimentalDetectronTopKROIs", params, dict(max_rois=3))
        xml = edited_ir(model(node, params), tmp_path / version, "ExperimentalDetectronTopKROIs",
                        edit=lambda layer: layer.set("version", version))
        assert not openvino_refuses(xml)
        assert irrun.validate(xml).ok
        np.testing.assert_array_equal(next(iter(irrun.load(xml).infer([rois, probs]).values())),
                                      rois[np.argsort(-probs)[:3]])


def test_region_yolo_declared_shape(tmp_path):
    x = param([1, 16, 3, 4])
    m = model(ops1.region_yolo(x, 4, 3, 2, True, [], 1, 3), [x])

    def edit(layer):
        layer.find("output").find("port").findall("dim")[1].text = "200"
    xml = edited_ir(m, tmp_path, "RegionYolo", edit=edit)
    problems = irrun.validate(xml).errors
    assert [(e.code, e.layer.type) for e in problems][:1] == [("E-DECLARED-SHAPE", "RegionYolo")]


def test_multiclass_nms_declared_rows_beyond_the_bound(tmp_path):
    m = multiclass_model(9, (2, 3, 10), iou_threshold=0.5, keep_top_k=4)          # rows [..8, 6]

    def edit(layer):
        layer.find("output").find("port").findall("dim")[0].text = "9"
    problems = irrun.validate(edited_ir(m, tmp_path, "MulticlassNms", edit=edit)).errors
    assert [(e.code, e.layer.type) for e in problems] == [("E-DECLARED-SHAPE", "MulticlassNms")]


@pytest.mark.parametrize("case", ["roi-pooling-rois", "psroi-channels", "nms-rotated-boxes", "generate-anchors",
                                  "multiclass-boxes"])
def test_inconsistent_operands_name_the_layer(case, tmp_path):
    """IRs OpenVINO refuses (a Parameter reshaped after saving): irrun's validate reports an error on the layer."""
    import openvino.opset9 as ops9
    if case == "roi-pooling-rois":
        x, b = param([1, 3, 8, 8]), param([2, 5])
        m, type_name, index, dims = model(ops2.roi_pooling(x, b, [2, 2], 1.0), [x, b]), "ROIPooling", 1, [2, 4]
    elif case == "psroi-channels":
        x, b = param([1, 8, 8, 8]), param([2, 5])
        m, type_name, index, dims = model(ops1.psroi_pooling(x, b, 2, 2, 1.0, 1, 1, "average"), [x, b]), \
            "PSROIPooling", 0, [1, 9, 8, 8]
    elif case == "nms-rotated-boxes":
        m, type_name, index, dims = nms_rotated_model(1, 2, 6, 3, 0.5, 0.0), "NMSRotated", 0, [1, 6, 4]
    elif case == "generate-anchors":
        params = [param(s) for s in ([1, 3], [4, 5, 3, 4], [1, 12, 4, 5], [1, 3, 4, 5])]
        m, type_name, index, dims = model(ops9.generate_proposals(*params, 0.0, 0.5, 10, 5), params), \
            "GenerateProposals", 1, [4, 2, 3, 4]
    else:
        m, type_name, index, dims = multiclass_model(9, (2, 3, 10)), "MulticlassNms", 1, [2, 3, 9]
    xml = with_parameter_shape(m, tmp_path, index, dims)
    assert openvino_refuses(xml)
    assert any(e.layer is not None and e.layer.type == type_name for e in irrun.validate(xml).errors)
