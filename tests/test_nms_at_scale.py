"""Greedy box selection at the sizes real detectors run it, against OpenVINO: YOLOv8's 8400 boxes in
80 classes (NonMaxSuppression), an SSD's 1917 priors (DetectionOutput), a Faster R-CNN RPN's 6000
proposals (Proposal).  Their candidates fill many blocks of `greedy_in_blocks`, whose blocks and
score ranks the small cases of test_ops_detection.py never leave."""
import numpy as np
import openvino as ov
import openvino.opset4 as ops4
import openvino.opset8 as ops8
import openvino.opset9 as ops9
import pytest
from ovutil import compare, param

from irrun.ops import detection_common
from irrun.ops.detection_common import GREEDY_BLOCK, by_score_above, greedy, greedy_in_blocks, ranked_above

RNG = np.random.default_rng(23)


def test_blocks_select_what_one_box_at_a_time_selects():
    """The same kept boxes as `greedy` over relations that cross blocks, for limits within the first
    block, past it and none; and the ranks in two pieces as one sort, ties at the cut included."""
    n = 5 * GREEDY_BLOCK + 17
    near = RNG.uniform(0, 1, (n, n)) < 0.01
    suppresses = lambda kept, rest: near[np.asarray(kept)[:, None], np.asarray(rest)[None]]    # noqa: E731
    order = RNG.permutation(n)
    for limit in (5, GREEDY_BLOCK + 3, 3 * GREEDY_BLOCK, n):
        expected = greedy(order, limit, lambda best, rest: near[best, rest])
        assert greedy_in_blocks([order[:200], order[200:]], limit, suppresses) == expected
        assert len(expected) == min(limit, len(expected)) and len(expected) > 3
    scores = np.round(RNG.uniform(0, 1, 4000), 2).astype(np.float32)      # many ties, across the cut too
    pieces = list(ranked_above(scores, np.float32(0.1)))
    assert len(pieces) == 2 and len(pieces[0]) >= 2 * GREEDY_BLOCK
    np.testing.assert_array_equal(np.concatenate(pieces), by_score_above(scores, np.float32(0.1)))


def _yolo_boxes(n):
    xy = RNG.uniform(0, 600, (1, n, 2))
    return np.concatenate([xy, xy + RNG.uniform(10, 100, (1, n, 2))], -1).astype(np.float32)


@pytest.mark.parametrize("scores, limit, iou, threshold, sort", [
    ("uniform", 100, 0.5, 0.25, True),        # 6300 candidates a class, 100 kept from the first block
    ("uniform", 300, 0.45, 0.25, False),      # kept from three blocks and more
    ("sigmoid", 100, 0.6, 0.001, True),       # the evaluation threshold
    ("quantized", 200, 0.5, 0.0, True),       # ties of score at every rank
], ids=["uniform", "three-blocks", "evaluation", "ties"])
def test_yolov8_nms(scores, limit, iou, threshold, sort, tmp_path):
    n, classes = 8400, 80
    b, s = param([1, n, 4]), param([1, classes, n])
    nms = ops9.non_max_suppression(b, s, ops9.constant(np.int64(limit)), ops9.constant(np.float32(iou)),
                                   ops9.constant(np.float32(threshold)), sort_result_descending=sort)
    values = {"uniform": lambda: RNG.uniform(0, 1, (1, classes, n)),
              "sigmoid": lambda: 1 / (1 + np.exp(-RNG.normal(-6, 2, (1, classes, n)))),
              "quantized": lambda: np.round(RNG.uniform(0, 1, (1, classes, n)) * 8) / 8}[scores]()
    compare(ov.Model(nms.outputs(), [b, s]), [_yolo_boxes(n), values.astype(np.float32)], tmp_path)


def test_ssd_detection_output(tmp_path):
    """MobileNet-SSD's 1917 priors, 21 classes, 400 candidates a class at confidence 0.01."""
    priors, classes = 1917, 21
    attrs = {"num_classes": classes, "background_label_id": 0, "top_k": 400, "keep_top_k": [200],
             "code_type": "caffe.PriorBoxParameter.CENTER_SIZE", "nms_threshold": 0.6, "confidence_threshold": 0.01,
             "normalized": True}
    loc, conf, prior = param([1, priors * 4]), param([1, priors * classes]), param([1, 2, priors * 4])
    node = ops8.detection_output(loc, conf, prior, attrs)
    centre, size = RNG.uniform(0, 1, (priors, 2)), RNG.uniform(0.05, 0.3, (priors, 2))
    boxes = np.concatenate([centre - size / 2, centre + size / 2], 1).reshape(-1)
    variances = np.tile([0.1, 0.1, 0.2, 0.2], priors)
    logits = RNG.normal(0, 1, (priors, classes))
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    inputs = [RNG.normal(0, 1, (1, priors * 4)), probs.reshape(1, -1), np.stack([boxes, variances])[None]]
    compare(ov.Model(node.outputs(), [loc, conf, prior]), [x.astype(np.float32) for x in inputs], tmp_path,
            rtol=1e-4, atol=1e-5)


def test_faster_rcnn_proposal(tmp_path):
    """An RPN's 6000 best of 9 x 38 x 50 anchors down to 300 at IoU 0.7."""
    anchors, h, w = 9, 38, 50
    attrs = {"base_size": 16, "pre_nms_topn": 6000, "post_nms_topn": 300, "nms_thresh": 0.7, "feat_stride": 16,
             "min_size": 16, "ratio": [0.5, 1.0, 2.0], "scale": [8.0, 16.0, 32.0]}
    probs, deltas, image = param([1, 2 * anchors, h, w]), param([1, 4 * anchors, h, w]), param([3])
    node = ops4.proposal(probs, deltas, image, {k: np.uint32(v) if isinstance(v, int) else v for k, v in attrs.items()})
    n = 2 * anchors * h * w
    inputs = [(RNG.permutation(n) / n).reshape(1, 2 * anchors, h, w), RNG.normal(0, 0.3, (1, 4 * anchors, h, w)),
              np.array([600, 800, 1.0])]
    compare(ov.Model(node.outputs(), [probs, deltas, image]), [x.astype(np.float32) for x in inputs], tmp_path,
            rtol=1e-4, atol=1e-4)
    assert detection_common.GREEDY_BLOCK < 300
