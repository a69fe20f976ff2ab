"""NonMaxSuppression-1/3/4/5/9, ROIAlign-3/9, PriorBox-1/8, PriorBoxClustered-1 against OpenVINO.

Differential runs (`compare`) against the CPU plugin (NonMaxSuppression has no
reference evaluator in OpenVINO, so the CPU plugin is its only oracle), shape
functions against OpenVINO's partial-shape inference, and validate tests.
Divergences from the op specs are recorded in specs/errata/detection.md.
"""

import itertools

import numpy as np
import openvino as ov
import openvino.opset1 as ops1
import openvino.opset3 as ops3
import openvino.opset4 as ops4
import openvino.opset5 as ops5
import openvino.opset8 as ops8
import openvino.opset9 as ops9
import pytest
from lxml import etree

from ovutil import (
    assert_close, compare, irrun_infer, irrun_infer_all, irrun_outputs, layer_of, openvino_refuses, ov_shape_text,
    param, replace_in_ir, run_openvino, save, tensor_type
)
import irrun
from irrun.shapes import format_shape

RNG = np.random.default_rng(3)
D = ov.Dimension
NMS = {1: ops1, 3: ops3, 4: ops4, 5: ops5, 9: ops9}


# ---------------------------------------------------------------- NonMaxSuppression

def nms_model(version, batches, classes, boxes, max_out, iou, score_thr, sigma=0.0, center=False, sort=True,
              output_type="i64", dtype=np.float32, dynamic=False):
    b = param([-1, -1, 4] if dynamic else [batches, boxes, 4], dtype)
    s = param([-1, -1, -1] if dynamic else [batches, classes, boxes], dtype)
    args = [b, s, ops1.constant(np.int64(max_out)), ops1.constant(np.float32(iou)), ops1.constant(np.float32(score_thr))]
    kw = {"box_encoding": "center" if center else "corner", "sort_result_descending": sort}
    if version >= 3:
        kw["output_type"] = output_type
    if version >= 5:
        args.append(ops1.constant(np.float32(sigma)))
    return ov.Model(NMS[version].non_max_suppression(*args, **kw).outputs(), [b, s])


def random_boxes(batches, boxes, center, rng=RNG, grid=False):
    if center:
        xy = rng.uniform(0, 10, (batches, boxes, 2))
        wh = rng.uniform(0.5, 4, (batches, boxes, 2))
        out = np.concatenate([xy, wh], -1)
    else:
        out = rng.uniform(0, 10, (batches, boxes, 4))   # corners in either order
    return (np.round(out) if grid else out).astype(np.float32)


NMS_CASES = [(v, center, sort) for v in (1, 3, 4, 5, 9) for center in (False, True) for sort in (True, False)]


@pytest.mark.parametrize("version, center, sort", NMS_CASES)
@pytest.mark.parametrize("max_out, iou, score_thr", [(3, 0.5, 0.0), (20, 0.3, 0.4), (1, 0.7, -1.0)])
def test_nms_modes(version, center, sort, max_out, iou, score_thr, tmp_path):
    batches, classes, boxes = 2, 3, 12
    scores = RNG.uniform(0, 1, (batches, classes, boxes)).astype(np.float32)
    m = nms_model(version, batches, classes, boxes, max_out, iou, score_thr, center=center, sort=sort)
    compare(m, [random_boxes(batches, boxes, center), scores], tmp_path)


@pytest.mark.parametrize("version", [5, 9])
@pytest.mark.parametrize("sigma, score_thr, center", [(0.5, 0.0, False), (0.2, 0.3, True), (1.0, 0.1, False)])
def test_nms_soft(version, sigma, score_thr, center, tmp_path):
    """Soft NMS decays scores and never suppresses by IoU (iou_threshold is ignored, as on the CPU plugin)."""
    batches, classes, boxes = 2, 2, 10
    scores = RNG.uniform(0, 1, (batches, classes, boxes)).astype(np.float32)
    m = nms_model(version, batches, classes, boxes, 6, 0.5, score_thr, sigma=sigma, center=center)
    compare(m, [random_boxes(batches, boxes, center), scores], tmp_path, rtol=1e-5)


@pytest.mark.parametrize("version", [1, 4, 5, 9])
def test_nms_ties_and_grid_boxes(version, tmp_path):
    """Equal scores (ties broken by box index, then batch and class in the sorted output), integer
    corners (IoU exactly at the threshold suppresses: iou >= threshold), zero-area boxes."""
    batches, classes, boxes = 2, 2, 16
    scores = (RNG.integers(0, 4, (batches, classes, boxes)) / 4).astype(np.float32)
    m = nms_model(version, batches, classes, boxes, 10, 0.5, 0.0)
    compare(m, [random_boxes(batches, boxes, False, grid=True), scores], tmp_path)


NMS_ADVERSARIAL = {
    # two boxes with no area: IoU 0 / 0 = NaN, which suppresses nothing, even at threshold 0
    "zero-area-pair": ([[0, 0, 0, 1], [0, 0, 0, 1], [0, 0, 1, 1]], [0.9, 0.8, 0.7], 0.0),
    # a zero-area box against a real one: IoU 0, suppressed at threshold 0
    "zero-area-vs-real": ([[5, 5, 5, 6], [0, 0, 1, 1]], [0.9, 0.8], 0.0),
    "corners-reversed": ([[1, 1, 0, 0], [0, 0, 1, 1], [2, 3, 1, 2]], [0.9, 0.8, 0.7], 0.5),
    "iou-exactly-half": ([[0, 0, 1, 2], [0, 1, 1, 3], [0, 2, 1, 4]], [0.9, 0.8, 0.7], 0.5),
    "threshold-above-1": ([[0, 0, 1, 1], [0, 0, 1, 1]], [0.9, 0.8], 1.5),
    "threshold-1": ([[0, 0, 1, 1], [0, 0, 1, 1]], [0.9, 0.8], 1.0),
    "nan-score": ([[0, 0, 1, 1], [5, 5, 6, 6], [8, 8, 9, 9]], [np.nan, 0.8, 0.7], 0.5),
    "nan-and-inf-coordinates": ([[0, 0, 1, 1], [np.nan, 0, 1, 1], [-np.inf, 0, np.inf, 1]], [0.9, 0.8, 0.7], 0.0),
    "all-below-score-threshold": ([[0, 0, 1, 1], [5, 5, 6, 6]], [0.1, 0.2], 0.5),
}


@pytest.mark.parametrize("case", NMS_ADVERSARIAL, ids=list(NMS_ADVERSARIAL))
@pytest.mark.parametrize("version", [4, 9])
def test_nms_adversarial(case, version, tmp_path):
    boxes, scores, iou = NMS_ADVERSARIAL[case]
    boxes = np.array(boxes, np.float32)[None]
    scores = np.array(scores, np.float32)[None, None]
    m = nms_model(version, 1, 1, boxes.shape[1], 10, iou, 0.3 if case == "all-below-score-threshold" else -1.0)
    compare(m, [boxes, scores], tmp_path)


@pytest.mark.parametrize("version", [1, 5, 9])
def test_nms_max_output_zero(version, tmp_path):
    """No boxes.  The CPU plugin leaves valid_outputs uninitialised here (garbage); irrun gives 0."""
    boxes, scores = random_boxes(1, 5, False), RNG.uniform(0, 1, (1, 2, 5)).astype(np.float32)
    m = nms_model(version, 1, 2, 5, 0, 0.5, 0.0)
    got = irrun_outputs(m, [boxes, scores], tmp_path)
    expected = run_openvino(tmp_path / "model.xml", [boxes, scores])
    for g, e in zip(got[:2], expected[:2]):
        assert_close(g, e)
    if version >= 5:
        assert got[2].tolist() == [0]


@pytest.mark.parametrize("version, output_type", [(3, "i32"), (5, "i32"), (9, "i32"), (9, "i64")])
def test_nms_output_type_and_f16(version, output_type, tmp_path):
    boxes, scores = random_boxes(1, 9, False), RNG.uniform(0, 1, (1, 2, 9)).astype(np.float32)
    m = nms_model(version, 1, 2, 9, 4, 0.4, 0.1, output_type=output_type, dtype=np.float16)
    compare(m, [boxes.astype(np.float16), scores.astype(np.float16)], tmp_path)


@pytest.mark.parametrize("version", [4, 9])
def test_nms_dynamic_inputs(version, tmp_path):
    boxes, scores = random_boxes(3, 7, True), RNG.uniform(0, 1, (3, 2, 7)).astype(np.float32)
    m = nms_model(version, 3, 2, 7, 5, 0.5, 0.2, center=True, dynamic=True)
    compare(m, [boxes, scores], tmp_path)


def test_nms_optional_inputs_absent(tmp_path):
    """Only boxes and scores: max_output_boxes_per_class defaults to 0, so nothing is selected."""
    b, s = param([1, 4, 4]), param([1, 1, 4])
    m = ov.Model(ops9.non_max_suppression(b, s).outputs(), [b, s])
    got = irrun_outputs(m, [random_boxes(1, 4, False), RNG.uniform(0, 1, (1, 1, 4)).astype(np.float32)], tmp_path)
    assert got[0].shape == (0, 3) and got[2].tolist() == [0]


NMS_SHAPES = [([2, 6, 4], [2, 3, 6]), ([-1, 6, 4], [-1, 3, 6]), ([2, -1, 4], [2, 3, -1]),
              ([2, D(2, 10), 4], [2, 3, D(1, 5)]), (None, None), ([D(1, 3), 6, 4], [-1, -1, 6])]


@pytest.mark.parametrize("boxes_shape, scores_shape", NMS_SHAPES, ids=str)
@pytest.mark.parametrize("max_out", [4, 10, 0, None])
def test_nms_shape_function_v9(boxes_shape, scores_shape, max_out):
    mo = param([], np.int64) if max_out is None else ops1.constant(np.int64(max_out))
    node = ops9.non_max_suppression(param(boxes_shape), param(scores_shape), mo, output_type="i32")
    out = irrun_infer_all("NonMaxSuppression", 9, {"output_type": "i32"},
                          [tensor_type(boxes_shape), tensor_type(scores_shape), tensor_type([], np.int64, max_out)])
    assert [format_shape(t.shape) for t in out] == [ov_shape_text(o.get_partial_shape()) for o in node.outputs()]
    assert [t.etype.name for t in out] == ["i32", "f32", "i32"]


@pytest.mark.parametrize("version", [1, 3, 4])
def test_nms_static_declared_rows_are_accepted(version, tmp_path):
    """NMS-1/3/4 declare a static row count ([4, 3] here, v4: [8, 3]); the CPU plugin returns the
    selected rows only (8 here: more than v1/v3 declare).  irrun's [0, 8] accepts the declaration."""
    m = nms_model(version, 2, 2, 6, 2, 0.5, 0.0)
    xml = save(m, tmp_path)
    assert not irrun.validate(xml).errors
    shape = irrun.load(xml).outputs[0]
    boxes = np.tile(np.array([[[0, 0, 1, 1], [0, 5, 1, 6], [0, 9, 1, 10]]], np.float32), (2, 2, 1))
    scores = RNG.uniform(0.1, 1, (2, 2, 6)).astype(np.float32)
    compare(m, [boxes, scores], tmp_path)
    assert irrun_outputs(m, [boxes, scores], tmp_path)[0].shape == (8, 3), shape


@pytest.mark.parametrize("edit, words", [
    ({"boxes": [2, 6, 5]}, "boxes dimension 2 must be 4"),
    ({"scores": [3, 3, 6]}, "batch dimension"),
    ({"scores": [2, 3, 7]}, "number of boxes"),
])
def test_nms_inconsistent_inputs(edit, words, tmp_path):
    """Hand-edited Parameter shapes that OpenVINO refuses too; the error names the NMS layer."""
    xml = save(nms_model(9, 2, 3, 6, 2, 0.5, 0.0), tmp_path)
    tree = etree.parse(str(xml))
    for name, dims in edit.items():
        index = 0 if name == "boxes" else 1
        p = [l for l in tree.getroot().iter("layer") if l.get("type") == "Parameter"][index]
        p.find("data").set("shape", ",".join(map(str, dims)))
        for dim, value in zip(p.find("output").find("port").findall("dim"), dims):
            dim.text = str(value)
        nms_port = layer_of(tree.getroot(), "NonMaxSuppression").find("input").findall("port")[index]
        for dim, value in zip(nms_port.findall("dim"), dims):
            dim.text = str(value)
    tree.write(str(xml))
    assert openvino_refuses(xml)
    problems = irrun.validate(xml).errors
    assert any(e.layer.type == "NonMaxSuppression" and words in e.message for e in problems), \
        [e.format() for e in problems]


# ---------------------------------------------------------------- ROIAlign

def roi_align_model(version, data_shape, num_rois, ph, pw, ratio, scale, mode, aligned="asymmetric",
                    dtype=np.float32, index_dtype=np.int32):
    d, r, i = param(data_shape, dtype), param([num_rois, 4], dtype), param([num_rois], index_dtype)
    if version == 3:
        node = ops3.roi_align(d, r, i, ph, pw, ratio, scale, mode)
    else:
        node = ops9.roi_align(d, r, i, ph, pw, ratio, scale, mode, aligned)
    return ov.Model(node.outputs(), [d, r, i])


def random_rois(n, size, spread=1.2):
    """ROIs [x1, y1, x2, y2] in image coordinates, some reaching past the image edge."""
    start = RNG.uniform(-2, size * spread * 0.7, (n, 2))
    extent = RNG.uniform(0.5, size * spread * 0.6, (n, 2))
    return np.concatenate([start, start + extent], 1).astype(np.float32)


ROI_CASES = [(3, mode, "asymmetric") for mode in ("avg", "max")] + \
    [(9, mode, aligned) for mode in ("avg", "max") for aligned in ("asymmetric", "half_pixel_for_nn", "half_pixel")]


@pytest.mark.parametrize("version, mode, aligned", ROI_CASES)
@pytest.mark.parametrize("ph, pw, ratio, scale", [(2, 3, 2, 0.5), (3, 3, 0, 0.25), (1, 2, 1, 1.0)])
def test_roi_align_modes(version, mode, aligned, ph, pw, ratio, scale, tmp_path):
    data_shape = [2, 3, 9, 11]
    x = RNG.standard_normal(data_shape).astype(np.float32)
    rois = random_rois(6, 40 * scale if scale < 1 else 10)
    batch = RNG.integers(0, 2, 6).astype(np.int32)
    compare(roi_align_model(version, data_shape, 6, ph, pw, ratio, scale, mode, aligned),
            [x, rois, batch], tmp_path, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype, index_dtype", [(np.float16, np.int32), (np.float32, np.int64)])
def test_roi_align_element_types(dtype, index_dtype, tmp_path):
    data_shape = [1, 4, 8, 8]
    x = RNG.standard_normal(data_shape).astype(dtype)
    rois = random_rois(3, 8).astype(dtype)
    compare(roi_align_model(9, data_shape, 3, 2, 2, 2, 1.0, "avg", "half_pixel", dtype, index_dtype),
            [x, rois, np.zeros(3, index_dtype)], tmp_path, rtol=5e-3, atol=5e-3)


@pytest.mark.parametrize("ratio, aligned", [(2, "asymmetric"), (0, "half_pixel"), (0, "half_pixel_for_nn")])
def test_roi_align_average_at_mask_rcnn_size(ratio, aligned, tmp_path):
    """300 ROIs over two images' 64 x 25 x 34 maps (stride 16), some past the edges, averaged per bin
    by two products per ROI (irrun/ops/roi_align.py `_averaged_samples`); with a NaN in the map, by
    each sample's own neighbours, as OpenVINO (the NaN reaches only the bins that read it)."""
    data_shape, n = [2, 64, 25, 34], 300
    x = RNG.standard_normal(data_shape).astype(np.float32)
    rois, batch = random_rois(n, 540), RNG.integers(0, 2, n).astype(np.int32)
    m = roi_align_model(9, data_shape, n, 7, 7, ratio, 1 / 16, "avg", aligned)
    compare(m, [x, rois, batch], tmp_path, rtol=1e-4, atol=1e-5)
    x[1, 5, 12, 20] = np.nan
    got = compare(m, [x, rois, batch], tmp_path / "nan", rtol=1e-4, atol=1e-5)
    nan_bins = np.isnan(next(iter(got.values())))
    assert 0 < nan_bins.sum() < nan_bins.size // 100


def test_roi_align_adversarial_rois(tmp_path):
    """Zero-size, reversed and far-outside ROIs; negative features (max mode never goes below 0)."""
    data_shape = [1, 2, 6, 6]
    x = -np.abs(RNG.standard_normal(data_shape)).astype(np.float32)
    x[0, 1] *= -1
    rois = np.array([[2, 2, 2, 2], [4, 4, 1, 1], [50, 50, 60, 60], [-9, -9, -3, -3], [0, 0, 6, 6]], np.float32)
    for version, mode in ((3, "max"), (9, "avg")):
        compare(roi_align_model(version, data_shape, 5, 2, 2, 0, 1.0, mode), [x, rois, np.zeros(5, np.int32)],
                tmp_path / f"{version}{mode}")


def test_roi_align_shape_function():
    for data, rois, idx in [([2, 3, 8, 8], [5, 4], [5]), ([-1, -1, -1, -1], [-1, 4], [D(2, 6)]), (None, None, None)]:
        node = ops9.roi_align(param(data), param(rois), param(idx, np.int32), 2, 3, 0, 0.5, "avg")
        out = irrun_infer_all("ROIAlign", 9, {"pooled_h": "2", "pooled_w": "3", "sampling_ratio": "0",
                                              "spatial_scale": "0.5", "mode": "avg"},
                              [tensor_type(data), tensor_type(rois), tensor_type(idx, np.int32)])
        assert format_shape(out[0].shape) == ov_shape_text(node.get_output_partial_shape(0))


def test_roi_align_roi_count_mismatch(tmp_path):
    m = roi_align_model(3, [1, 2, 6, 6], 4, 2, 2, 1, 1.0, "avg")
    xml = save(m, tmp_path)
    tree = etree.parse(str(xml))
    p = [l for l in tree.getroot().iter("layer") if l.get("type") == "Parameter"][2]
    p.find("data").set("shape", "3")
    p.find("output").find("port").find("dim").text = "3"
    layer_of(tree.getroot(), "ROIAlign").find("input").findall("port")[2].find("dim").text = "3"
    tree.write(str(xml))
    assert openvino_refuses(xml)
    assert any(e.layer.type == "ROIAlign" and "number of ROIs" in e.message for e in irrun.validate(xml).errors)


# ---------------------------------------------------------------- PriorBox and PriorBoxClustered

def prior_model(make, layer_hw, image_hw, attrs, dtype=np.int64, const=False):
    """Sizes as Parameters, so the CPU plugin's kernel runs; constant sizes are folded at compile
    time by OpenVINO's reference evaluator (the CPU result is then the reference's)."""
    values = [np.array(layer_hw, dtype), np.array(image_hw, dtype)]
    if const:
        return ov.Model(make(*[ops1.constant(v) for v in values], attrs).outputs(), []), []
    size, image = param([2], dtype), param([2], dtype)
    return ov.Model(make(size, image, attrs).outputs(), [size, image]), values


PRIOR_BOX_ATTRS = {
    "basic": {"min_size": [4.0], "aspect_ratio": [2.0], "offset": 0.5},
    "flip-clip-max": {"min_size": [4.0, 8.0], "max_size": [9.0, 16.0], "aspect_ratio": [2.0, 3.0], "flip": True,
                      "clip": True, "offset": 0.5, "variance": [0.1, 0.1, 0.2, 0.2]},
    "step": {"min_size": [5.0], "aspect_ratio": [1.5, 1.5], "step": 8.0, "offset": 0.3, "variance": [0.2]},
    "mxnet": {"min_size": [0.2, 0.4], "aspect_ratio": [2.0, 0.5], "scale_all_sizes": False, "step": 0.0,
              "offset": 0.5},
    "mxnet-step": {"min_size": [0.25], "aspect_ratio": [3.0], "flip": True,
                   "scale_all_sizes": False, "step": 0.25, "offset": 0.5},
    "fixed-size-density": {"fixed_size": [8.0], "density": [2.0], "aspect_ratio": [2.0], "offset": 0.5},
    # fixed_ratio needs as many ratios as aspect_ratio gives (with 1), or OpenVINO writes past its output
    "fixed-ratio": {"fixed_size": [6.0, 10.0], "fixed_ratio": [1.0, 2.0], "aspect_ratio": [3.0], "density": [1.0, 2.0],
                    "offset": 0.5},
}


@pytest.mark.parametrize("case", PRIOR_BOX_ATTRS, ids=list(PRIOR_BOX_ATTRS))
@pytest.mark.parametrize("version, order", [(1, None), (8, True), (8, False)])
def test_prior_box(case, version, order, tmp_path):
    """min_max_aspect_ratios_order=false: the CPU plugin cannot compile PriorBox-8 with non-constant
    sizes ("Unexpected op type in PriorBox shape inference factory"), and the reference evaluator
    writes past a dynamic output; with constant sizes OpenVINO folds it with the reference."""
    attrs = dict(PRIOR_BOX_ATTRS[case])
    if order is not None:
        attrs["min_max_aspect_ratios_order"] = order
    make = ops1.prior_box if version == 1 else ops8.prior_box
    m, inputs = prior_model(make, [3, 4], [30, 44], attrs, const=order is False)
    compare(m, inputs, tmp_path, rtol=1e-5, atol=1e-6)


def prior_box_grid():
    """Every combination of min/max sizes, aspect ratios, flip and scale_all_sizes, with clip, step,
    offset, variance and the op version / min_max_aspect_ratios_order taking turns."""
    mins = {"1min": [0.25], "2min": [0.2, 0.45]}
    maxes = {"nomax": [], "max-per-min": "same", "1max": [0.6], "2max": [0.5, 0.7]}
    ratios = {"noar": [], "ar2": [2.0], "ar2-3": [2.0, 3.0], "ar2-half": [2.0, 0.5]}
    versions = [(1, None), (8, True), (8, False)]
    cases = {}
    for i, (mn, mx, ar, flip, scale_all) in enumerate(itertools.product(mins, maxes, ratios, [False, True],
                                                                          [True, False])):
        min_size = mins[mn]
        max_size = min_size and [m + 0.3 for m in min_size] if maxes[mx] == "same" else maxes[mx]
        if scale_all:   # sizes in pixels; with scale_all_sizes=false fractions of the image height
            min_size, max_size = [m * 40 for m in min_size], [m * 40 for m in max_size]
        attrs = {"min_size": min_size, "max_size": max_size, "aspect_ratio": ratios[ar], "flip": flip,
                 "scale_all_sizes": scale_all, "clip": i % 3 == 0, "offset": (0.5, 0.3, 0.0)[i % 3],
                 "step": ((0.0, 8.0, 5.5) if scale_all else (0.0, 0.25, 0.1))[(i // 3) % 3],
                 "variance": ([], [0.1], [0.1, 0.1, 0.2, 0.2])[i % 3 if i % 2 else 2]}
        version, order = versions[i % 3]
        name = f"{mn}-{mx}-{ar}-{'flip' if flip else 'noflip'}-{'all' if scale_all else 'mxnet'}-v{version}"
        if order is not None:
            attrs["min_max_aspect_ratios_order"] = order
            name += "-minmax" if order else "-armax"
        cases[name] = (version, attrs)
    return cases


PRIOR_BOX_GRID = prior_box_grid()


def _kernel_writes_every_prior(attrs) -> bool:
    """OpenVINO's kernel writes fewer boxes per cell than its shape counts only when scale_all_sizes
    is true and there are more max_size than min_size values."""
    return not (attrs["scale_all_sizes"] and len(attrs["max_size"]) > len(attrs["min_size"]))


@pytest.mark.parametrize("case", PRIOR_BOX_GRID)
def test_prior_box_grid(case, tmp_path):
    """The output holds OpenVINO's number of priors per cell (number_of_priors: with
    scale_all_sizes=false it leaves out the max_size boxes, which the kernel still writes, so cells
    run into each other); irrun gives the same values, cut to that size (specs/errata/detection.md).
    Sizes are Parameters, so the CPU plugin's kernel runs, except for PriorBox-8 with
    min_max_aspect_ratios_order=false, which it cannot compile so: constant sizes, folded by the
    reference."""
    version, attrs = PRIOR_BOX_GRID[case]
    make = ops1.prior_box if version == 1 else ops8.prior_box
    folded = attrs.get("min_max_aspect_ratios_order") is False
    m, inputs = prior_model(make, [3, 4], [40, 48], attrs, const=folded)
    if _kernel_writes_every_prior(attrs):
        compare(m, inputs, tmp_path, rtol=1e-5, atol=1e-6)
        return
    # The kernel leaves the tail of the output unwritten: uninitialised memory in OpenVINO (garbage
    # on the CPU plugin, mostly 0 in the reference's folded constant), 0 in irrun.  The written part
    # and the variances agree.
    (expected,) = run_openvino(save(m, tmp_path / "cpu"), inputs)
    (got,) = irrun_outputs(m, inputs, tmp_path / "irrun", check_validate=True)
    written = 4 * 3 * 4 * (len(attrs["min_size"]) * (_ratio_count(attrs)) + len(attrs["min_size"]))
    assert got.shape == expected.shape
    np.testing.assert_allclose(got[0, :written], expected[0, :written], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got[0, written:], 0)
    np.testing.assert_array_equal(got[1], expected[1])


def _ratio_count(attrs) -> int:
    ratios = [1.0]
    for ar in attrs["aspect_ratio"]:
        if all(abs(ar - r) >= 1e-6 for r in ratios):
            ratios += [ar, 1 / ar] if attrs["flip"] else [ar]
    return len(ratios)


@pytest.mark.parametrize("version", [1, 8])
def test_prior_box_mxnet_step_minus_one(version, tmp_path):
    """step=-1 with scale_all_sizes=false: the step is image height / map height.  The Python API
    refuses a negative step, the IR reader takes it: written into the IR by hand."""
    attrs = {"min_size": [0.2, 0.4], "max_size": [0.5], "aspect_ratio": [2.0], "flip": True,
             "scale_all_sizes": False, "step": 0.0, "offset": 0.5}
    m, inputs = prior_model(ops1.prior_box if version == 1 else ops8.prior_box, [3, 4], [40, 48], attrs)
    xml = replace_in_ir(save(m, tmp_path), 'step="0"', 'step="-1"')
    (expected,) = run_openvino(xml, inputs)
    assert irrun.validate(xml).ok
    np.testing.assert_allclose(next(iter(irrun.load(xml).infer(inputs).values())), expected, rtol=1e-5, atol=1e-6)
    (stepless,) = run_openvino(save(m, tmp_path / "zero"), inputs)
    assert not np.allclose(stepless, expected)   # -1 is not 0: centres at (i + offset) * 40 / 3


def test_prior_box_mxnet_with_max_size_by_hand(tmp_path):
    """scale_all_sizes=false, min_size [0.1, 0.2], max_size [0.3, 0.4], aspect ratio 2 with flip:
    OpenVINO counts 3 ratios + 2 min sizes - 1 = 4 priors per cell; its kernel writes 6 per cell
    (min 0, max 0, min 1, max 1, ratio 2, ratio 1/2), so the output of a 2x2 map is the first 16
    of those 24 boxes: cell 0's six, cell 1's six, and cell 2's first four."""
    attrs = {"min_size": [0.1, 0.2], "max_size": [0.3, 0.4], "aspect_ratio": [2.0], "flip": True,
             "scale_all_sizes": False, "step": 0.0, "offset": 0.5}
    m, inputs = prior_model(ops8.prior_box, [2, 2], [32, 32], attrs)
    got = next(iter(compare(m, inputs, tmp_path, rtol=1e-5, atol=1e-6).values()))
    boxes = got[0].reshape(-1, 4) * 32
    assert got.shape == (2, 2 * 2 * 4 * 4)
    half = [1.6, 0.5 * np.sqrt(3.2 * 0.3), 3.2, 0.5 * np.sqrt(6.4 * 0.4)]   # max_size is not scaled by the image
    np.testing.assert_allclose(boxes[:4, 2] - 8, half, rtol=1e-5)
    np.testing.assert_allclose(boxes[6, [0, 2]], [24 - 1.6, 24 + 1.6], rtol=1e-5)   # cell 1 starts at box 6


def test_prior_box_constant_sizes_fold(tmp_path):
    """With constant sizes the output shape is static and the whole output a folded constant."""
    node = ops8.prior_box(ops1.constant(np.array([2, 3], np.int32)), ops1.constant(np.array([20, 30], np.int32)),
                          PRIOR_BOX_ATTRS["flip-clip-max"])
    compare(ov.Model(node.outputs(), []), [], tmp_path)


PBC_ATTRS = {
    "basic": {"width": [2.0, 5.0], "height": [3.0, 1.5], "offset": 0.5},
    "no-clip-steps": {"width": [12.0], "height": [20.0], "clip": False, "step_w": 4.0, "step_h": 6.0,
                      "offset": 0.25, "variance": [0.1, 0.2, 0.3, 0.4]},
    "step": {"width": [3.0, 4.0, 9.0], "height": [3.0, 8.0, 2.0], "step": 5.0, "offset": 0.5, "variance": [0.5]},
}


@pytest.mark.parametrize("case", PBC_ATTRS, ids=list(PBC_ATTRS))
@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_prior_box_clustered(case, dtype, tmp_path):
    m, inputs = prior_model(ops1.prior_box_clustered, [4, 3], [32, 27], PBC_ATTRS[case], dtype)
    compare(m, inputs, tmp_path, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("version, attrs", [(1, PRIOR_BOX_ATTRS["flip-clip-max"]),
                                            (8, PRIOR_BOX_ATTRS["fixed-ratio"]),
                                            ("c", PBC_ATTRS["step"])])
def test_prior_shape_function(version, attrs):
    make = {1: ops1.prior_box, 8: ops8.prior_box, "c": ops1.prior_box_clustered}[version]
    node = make(ops1.constant(np.array([5, 7], np.int64)), ops1.constant(np.array([50, 70], np.int64)), attrs)
    type_name, v = ("PriorBoxClustered", 1) if version == "c" else ("PriorBox", version)
    out = irrun_infer(type_name, v, attrs, [tensor_type([2], np.int64, [5, 7]), tensor_type([2], np.int64, [50, 70])])
    assert format_shape(out.shape) == ov_shape_text(node.get_output_partial_shape(0))
    out = irrun_infer(type_name, v, attrs, [tensor_type([2], np.int64), tensor_type([2], np.int64)])
    assert format_shape(out.shape) == "[2,?]"


# ---------------------------------------------------------------- Proposal

PROPOSAL_BASE = {"base_size": 8, "pre_nms_topn": 30, "post_nms_topn": 12, "nms_thresh": 0.6, "feat_stride": 8,
                 "min_size": 3, "ratio": [0.5, 1.0, 2.0], "scale": [1.0, 2.0]}
PROPOSAL_ATTRS = {
    "caffe": {},
    "clip-after-normalize": {"clip_after_nms": True, "normalize": True, "clip_before_nms": False},
    "tensorflow": {"framework": "tensorflow"},
    "scaled-deltas": {"box_size_scale": 2.0, "box_coordinate_scale": 4.0, "nms_thresh": 0.3},
    # NMS leaves fewer than post_nms_topn: zero rows after a -1 marker (probs 0).
    # (min_size is kept small everywhere: boxes scored 0 tie, and ties have no fixed order.)
    "few-survive": {"nms_thresh": 0.05, "post_nms_topn": 40},
}


def proposal_model(version, attrs, batch=2, h=4, w=5, anchors=6, image_len=3, dtype=np.float32):
    a = {k: (np.uint32(v) if isinstance(v, int) and not isinstance(v, bool) else v)
         for k, v in {**PROPOSAL_BASE, **attrs}.items()}
    probs, deltas, image = param([batch, 2 * anchors, h, w], dtype), param([batch, 4 * anchors, h, w], dtype), \
        param([image_len], dtype)
    make = ops1.proposal if version == 1 else ops4.proposal
    return ov.Model(make(probs, deltas, image, a).outputs(), [probs, deltas, image])


def proposal_inputs(batch=2, h=4, w=5, anchors=6, image=(40, 48, 1.0), dtype=np.float32):
    n = batch * 2 * anchors * h * w
    probs = (RNG.permutation(n) / n).reshape(batch, 2 * anchors, h, w)     # distinct scores: no ties
    deltas = RNG.normal(0, 0.3, (batch, 4 * anchors, h, w))
    return [probs.astype(dtype), deltas.astype(dtype), np.array(image, dtype)]


@pytest.mark.parametrize("case", PROPOSAL_ATTRS, ids=list(PROPOSAL_ATTRS))
@pytest.mark.parametrize("version", [1, 4])
def test_proposal(case, version, tmp_path):
    if (version, case) == (4, "few-survive"):
        pytest.skip("test_proposal_probs_past_the_rois")
    compare(proposal_model(version, PROPOSAL_ATTRS[case]), proposal_inputs(), tmp_path, rtol=1e-4, atol=1e-4)


def test_proposal_probs_past_the_rois(tmp_path):
    """The CPU plugin leaves probs uninitialised after the last ROI (garbage); irrun writes 0 as the
    reference does.  The ROIs (zeros after a -1 marker) and the valid probs match."""
    m, inputs = proposal_model(4, PROPOSAL_ATTRS["few-survive"]), proposal_inputs()
    rois, probs = irrun_outputs(m, inputs, tmp_path)
    cpu_rois, cpu_probs = run_openvino(tmp_path / "model.xml", inputs)
    assert_close(rois, cpu_rois, rtol=1e-4, atol=1e-4)
    valid = np.concatenate([np.flatnonzero(r[:, 0] == -1)[:1] for r in rois.reshape(2, 40, 5)])
    assert len(valid) == 2 and valid.max() < 40
    for b, n in enumerate(valid):
        assert_close(probs[b * 40:b * 40 + n], cpu_probs[b * 40:b * 40 + n], rtol=1e-5)
        assert not probs[b * 40 + n:(b + 1) * 40].any()


def test_proposal_image_shape_with_two_scales(tmp_path):
    compare(proposal_model(4, {"min_size": 2}, image_len=4), proposal_inputs(image=(40, 48, 2.0, 0.5)), tmp_path,
            rtol=1e-4, atol=1e-4)


def test_proposal_shape_function():
    for probs, deltas in [([2, 12, 4, 5], [2, 24, 4, 5]), ([-1, 12, -1, -1], [D(1, 3), 24, 4, 5]), (None, None)]:
        a = {k: (np.uint32(v) if isinstance(v, int) else v) for k, v in PROPOSAL_BASE.items()}
        node = ops4.proposal(param(probs), param(deltas), param([3]), a)
        out = irrun_infer_all("Proposal", 4, PROPOSAL_BASE, [tensor_type(probs), tensor_type(deltas), tensor_type([3])])
        assert [format_shape(t.shape) for t in out] == [ov_shape_text(o.get_partial_shape()) for o in node.outputs()]


# ---------------------------------------------------------------- DetectionOutput

DO_BASE = {"keep_top_k": [30], "nms_threshold": 0.45, "normalized": True}
DO_ATTRS = {
    "corner": {},
    "center-size": {"code_type": "caffe.PriorBoxParameter.CENTER_SIZE", "confidence_threshold": 0.2},
    "top-k-clip": {"top_k": 4, "keep_top_k": [-1], "clip_after_nms": True, "clip_before_nms": True},
    "keep-few": {"keep_top_k": [5], "code_type": "caffe.PriorBoxParameter.CENTER_SIZE"},
    "no-share": {"share_location": False, "background_label_id": -1},
    "variance-in-target": {"variance_encoded_in_target": True},
    "unnormalized": {"normalized": False, "input_height": 30, "input_width": 40},
    "mxnet": {"decrease_label_id": True, "confidence_threshold": 0.1},
    "background-2": {"background_label_id": 2, "top_k": 6},
}


def detection_model(version, attrs, images=2, priors=12, classes=4, aux=False, prior_batch=1):
    a = {**DO_BASE, **attrs}
    if version == 1:
        a["num_classes"] = classes
    loc_classes = 1 if a.get("share_location", True) else classes
    prior_size = 4 if a["normalized"] else 5
    rows = 1 if a.get("variance_encoded_in_target") else 2
    loc, conf = param([images, priors * loc_classes * 4]), param([images, priors * classes])
    prior = param([prior_batch, rows, priors * prior_size])
    params = [loc, conf, prior]
    if aux:
        params += [param([images, priors * 2]), param([images, priors * loc_classes * 4])]
    make = ops1.detection_output if version == 1 else ops8.detection_output
    node = make(*params[:3], a, *params[3:])
    return ov.Model(node.outputs(), params), a


def detection_inputs(a, images=2, priors=12, classes=4, aux=False, prior_batch=1):
    loc_classes = 1 if a.get("share_location", True) else classes
    loc = RNG.normal(0, 0.2, (images, priors * loc_classes * 4))
    n = images * priors * classes
    conf = (RNG.permutation(n) / n).reshape(images, priors * classes)         # distinct scores
    corner = RNG.uniform(0, 0.7, (prior_batch, priors, 2))
    boxes = np.concatenate([corner, corner + RNG.uniform(0.1, 0.3, (prior_batch, priors, 2))], -1)
    if not a["normalized"]:
        boxes = np.concatenate([np.zeros((prior_batch, priors, 1)), boxes * [40, 30, 40, 30]], -1)
    rows = [boxes.reshape(prior_batch, 1, -1)]
    if not a.get("variance_encoded_in_target"):
        variance = np.tile([0.1, 0.1, 0.2, 0.2], priors * boxes.shape[-1] // 4)
        rows.append(np.broadcast_to(variance, (prior_batch, 1, variance.size)))
    inputs = [loc, conf, np.concatenate(rows, 1)]
    if aux:
        inputs += [RNG.uniform(0, 1, (images, priors * 2)), RNG.normal(0, 0.2, (images, priors * loc_classes * 4))]
    return [x.astype(np.float32) for x in inputs]


@pytest.mark.parametrize("case", DO_ATTRS, ids=list(DO_ATTRS))
@pytest.mark.parametrize("version", [1, 8])
def test_detection_output(case, version, tmp_path):
    m, a = detection_model(version, DO_ATTRS[case])
    compare(m, detection_inputs(a), tmp_path, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("version", [1, 8])
@pytest.mark.parametrize("objectness", [0.0, 0.5])
def test_detection_output_with_aux_inputs(version, objectness, tmp_path):
    """Cascade: priors are first moved by aux_box_preds; objectness below the score makes a prior background."""
    attrs = {"objectness_score": objectness, "code_type": "caffe.PriorBoxParameter.CENTER_SIZE"}
    m, a = detection_model(version, attrs, aux=True, prior_batch=2)
    compare(m, detection_inputs(a, aux=True, prior_batch=2), tmp_path, rtol=1e-4, atol=1e-5)


def test_detection_output_priors_per_image(tmp_path):
    m, a = detection_model(8, {}, prior_batch=2)
    compare(m, detection_inputs(a, prior_batch=2), tmp_path, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("attrs", [{}, {"keep_top_k": [-1]}, {"keep_top_k": [-1], "top_k": 3}], ids=str)
def test_detection_output_shape_function(attrs):
    a = {**DO_BASE, **attrs}
    for loc, conf, prior in [([2, 48], [2, 48], [1, 2, 48]), ([-1, 48], [-1, 48], [1, 2, 48]),
                             ([D(1, 3), 48], [-1, 48], [-1, 2, 48])]:
        node = ops8.detection_output(param(loc), param(conf), param(prior), a)
        out = irrun_infer("DetectionOutput", 8, a, [tensor_type(loc), tensor_type(conf), tensor_type(prior)])
        assert format_shape(out.shape) == ov_shape_text(node.get_output_partial_shape(0))


def test_detection_output_inconsistent_priors(tmp_path):
    """class_preds must hold priors * classes scores (OpenVINO refuses the edited IR too)."""
    m, _ = detection_model(1, {})
    xml = save(m, tmp_path)
    tree = etree.parse(str(xml))
    layer_of(tree.getroot(), "DetectionOutput").find("data").set("num_classes", "5")
    tree.write(str(xml))
    assert openvino_refuses(xml)
    assert any(e.layer.type == "DetectionOutput" and "class_preds" in e.message for e in irrun.validate(xml).errors)


# ---------------------------------------------------------------- declared shapes

def test_prior_box_declared_shape(tmp_path):
    node = ops1.prior_box(ops1.constant(np.array([3, 4], np.int64)), ops1.constant(np.array([30, 40], np.int64)),
                          PRIOR_BOX_ATTRS["flip-clip-max"])
    xml = save(ov.Model(node.outputs(), []), tmp_path)
    tree = etree.parse(str(xml))
    layer_of(tree.getroot(), "PriorBox").find("output").find("port").findall("dim")[1].text = "100"
    tree.write(str(xml))
    problems = irrun.validate(xml).errors
    assert [e.code for e in problems] == ["E-DECLARED-SHAPE"]
    assert "4 * 3 * 4 * 12 priors" in problems[0].message


def test_nms_declared_rows_beyond_the_bound(tmp_path):
    xml = save(nms_model(9, 2, 3, 6, 4, 0.5, 0.0), tmp_path)          # [..24, 3]
    tree = etree.parse(str(xml))
    layer_of(tree.getroot(), "NonMaxSuppression").find("output").find("port").findall("dim")[0].text = "25"
    tree.write(str(xml))
    problems = irrun.validate(xml).errors
    assert [(e.code, e.layer.type) for e in problems] == [("E-DECLARED-SHAPE", "NonMaxSuppression")]
