"""Greedy non-maximum suppression per batch item and class: NonMaxSuppression-1/3/4/5/9 and
NMSRotated-13 (MatrixNms and MulticlassNms are in `multiclass_nms`).

What OpenVINO 2026.4.1 computes, beyond the op specs (specs/errata/detection.md):

* NonMaxSuppression, every version, runs as the CPU plugin's NMS-9 kernel:
  candidates are the boxes with score > score_threshold, taken by score then
  box index; a candidate is dropped when its IoU with a selected box is
  >= iou_threshold.  IoU is intersection / (area_a + area_b - intersection)
  with no special case, so two boxes with no area give NaN, which suppresses
  nothing.  Corner boxes are normalized with x86 min/max (a NaN coordinate
  takes the other one).  Soft NMS (sigma > 0) decays a candidate's score by
  exp(-0.5 * iou^2 / sigma) per selected box and never suppresses by IoU.
  The output has exactly the selected rows (no -1 padding), sorted by score,
  batch, class, box when sort_result_descending, else by batch, class and
  selection order.  Versions 1-4 declare a static row count; the CPU plugin
  ignores it, so irrun's shape is the interval [0, N] that contains it.
* NMSRotated follows the CPU plugin's kernel too (details in its class docstring): it
  suppresses at IoU > threshold.
* Hard NMS tests its candidates a block at a time (`detection_common.greedy_in_blocks`): the
  boxes kept so far against the block, then the block against itself; only the best few
  hundred candidates are sorted unless more are reached (`ranked_above`).  Soft NMS and
  NMSRotated take one selected box at a time.
"""
from __future__ import annotations

import heapq

import numpy as np

from .. import etypes
from ..errors import ModelError, ShapeError
from ..registry import Op, TensorType, register
from ..shapes import ANY, Dim, dim_bounds, dims_compatible, format_shape, make_dim
from .common import check_dim, check_rank, merge_dims
from .detection_common import by_score_above, greedy, greedy_in_blocks, ranked_above


# ---------------------------------------------------------------- NonMaxSuppression

def _x86_min(a, b):
    """minps: the second operand when either is NaN."""
    return np.where(a < b, a, b)


def _x86_max(a, b):
    return np.where(a > b, a, b)


def _nms_corners(boxes: np.ndarray, center: bool) -> np.ndarray:
    """(..., 4) boxes as y1, x1, y2, x2 with y1 <= y2 and x1 <= x2 (f32)."""
    b = boxes.astype(np.float32)
    if center:
        x, y = b[..., 0], b[..., 1]
        half_w, half_h = b[..., 2] * np.float32(0.5), b[..., 3] * np.float32(0.5)
        return np.stack([y - half_h, x - half_w, y + half_h, x + half_w], axis=-1)
    return np.stack([_x86_min(b[..., 0], b[..., 2]), _x86_min(b[..., 1], b[..., 3]),
                     _x86_max(b[..., 0], b[..., 2]), _x86_max(b[..., 1], b[..., 3])], axis=-1)


def _iou(selected: np.ndarray, candidate: np.ndarray, area_s=None, area_c=None, lower=_x86_min,
         upper=_x86_max) -> np.ndarray:
    """IoU of normalized boxes (..., 4), broadcast; f32, NaN when both areas are 0.  `area_s` /
    `area_c`: their areas when known; `lower` / `upper`: min and max (x86's by default).

    The operand order is the CPU plugin's: a NaN coordinate yields the candidate's."""
    if area_s is None:
        area_s = (selected[..., 2] - selected[..., 0]) * (selected[..., 3] - selected[..., 1])
    if area_c is None:
        area_c = (candidate[..., 2] - candidate[..., 0]) * (candidate[..., 3] - candidate[..., 1])
    zero = np.float32(0)
    height = np.maximum(lower(selected[..., 2], candidate[..., 2]) - upper(selected[..., 0], candidate[..., 0]), zero)
    width = np.maximum(lower(selected[..., 3], candidate[..., 3]) - upper(selected[..., 1], candidate[..., 1]), zero)
    inter = height * width
    with np.errstate(invalid="ignore", divide="ignore"):
        return inter / ((area_s + area_c) - inter)


class _PairwiseIoU:
    """`_iou` of every kept box against every candidate ([kept, rest]) for one image's boxes, the
    areas computed once; finite boxes take NumPy's minimum and maximum, which are x86's there
    (and twice as fast as its selects)."""

    def __init__(self, boxes: np.ndarray):
        self.boxes = boxes
        self.areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
        finite = bool(np.isfinite(boxes).all())
        self.lower, self.upper = (np.minimum, np.maximum) if finite else (_x86_min, _x86_max)

    def __call__(self, kept: np.ndarray, rest: np.ndarray) -> np.ndarray:
        return _iou(self.boxes[kept][:, None], self.boxes[rest][None], self.areas[kept][:, None],
                    self.areas[rest][None], self.lower, self.upper)


def _hard_nms(iou: _PairwiseIoU, scores, limit, iou_threshold, score_threshold) -> tuple[np.ndarray, np.ndarray]:
    # NaN IoU compares false: it suppresses nothing.
    kept = np.array(greedy_in_blocks(ranked_above(scores, score_threshold), limit,
                                     lambda kept, rest: iou(kept, rest) >= iou_threshold), np.int64)
    return kept, scores[kept]


def _soft_nms(boxes, scores, limit, score_threshold, sigma) -> tuple[np.ndarray, np.ndarray]:
    """Score decay by exp(scale * iou^2) against each box selected since the candidate was last scored."""
    scale = np.float32(-0.5) / np.float32(sigma)
    heap = [(-float(scores[i]), int(i), 0) for i in np.flatnonzero(scores > score_threshold)]
    heapq.heapify(heap)
    selected: list[tuple[int, float]] = []
    while heap and len(selected) < limit:
        neg_score, index, seen = heapq.heappop(heap)
        original = np.float32(-neg_score)
        newer = [i for i, _ in selected[seen:]]
        score = original
        if newer:
            ious = _iou(boxes[newer], boxes[index])
            weights = np.exp(scale * ious * ious).astype(np.float32)
            score = np.float32(original * np.prod(weights[::-1], dtype=np.float32))
        if score <= score_threshold:
            continue
        if score == original:
            selected.append((index, float(score)))
        else:
            heapq.heappush(heap, (-float(score), index, len(selected)))
    return np.array([i for i, _ in selected], np.int64), np.array([s for _, s in selected], np.float32)


def _first_value(x: np.ndarray | None, default):
    return default if x is None else np.asarray(x).reshape(-1)[0]


@register("NonMaxSuppression", 1, 3, 4, 5, 9)
class NonMaxSuppression(Op):
    box_values = 4        # y1, x1, y2, x2 (or centre and size)

    @property
    def index_type(self):
        return self.attrs.get("output_type") or etypes.i64

    def infer(self, inputs):
        boxes, scores = inputs[0], inputs[1]
        check_rank(boxes, 3, "boxes")
        check_rank(scores, 3, "scores")
        check_dim(boxes, 2, self.box_values, "boxes")
        for i, name in enumerate(("max_output_boxes_per_class", "iou_threshold", "score_threshold",
                                  "soft_nms_sigma")[:len(inputs) - 2]):
            t = inputs[2 + i]
            if t.rank not in (None, 0) and not (self.version >= 5 and t.rank == 1 and dims_compatible(t.shape[0], 1)):
                raise ShapeError(f"{name} must be a scalar, got {format_shape(t.shape)}")
        rows = ANY
        if boxes.shape is not None and scores.shape is not None:
            merge_dims(boxes.shape[0], scores.shape[0], f"boxes {format_shape(boxes.shape)} and scores "
                       f"{format_shape(scores.shape)} differ in the batch dimension")
            merge_dims(boxes.shape[1], scores.shape[2], f"boxes {format_shape(boxes.shape)} and scores "
                       f"{format_shape(scores.shape)} differ in the number of boxes")
            rows = self._row_bound(boxes.shape[1], scores.shape[0], scores.shape[1],
                                   inputs[2].value if len(inputs) > 2 else np.zeros(1, np.int64))
        notes = {0: "selected boxes: at most min(boxes, max_output_boxes_per_class) per batch and class"}
        out = [TensorType((rows, 3), self.index_type, notes=notes)]
        if self.version >= 5:
            out += [TensorType((rows, 3), etypes.f32, notes=notes), TensorType((1,), self.index_type)]
        return out

    @staticmethod
    def _row_bound(num_boxes, batches, classes, max_out) -> Dim | int:
        """[0, min(num_boxes, max_out) * batches * classes], as OpenVINO's NMS-9 shape inference gives."""
        if max_out is None:
            return ANY
        limit = int(_first_value(max_out, 0))
        boxes_hi = dim_bounds(num_boxes)[1]
        if boxes_hi is None or limit < 0:
            return ANY
        per_class = min(boxes_hi, limit)
        if per_class == 0:
            return 0
        bounds = [dim_bounds(batches)[1], dim_bounds(classes)[1]]
        if None in bounds:
            return ANY
        return make_dim(0, per_class * bounds[0] * bounds[1])

    def run(self, boxes, scores, max_output=None, iou_threshold=None, score_threshold=None, sigma=None):
        limit = int(_first_value(max_output, 0))
        if limit < 0:
            raise ModelError(f"max_output_boxes_per_class is {limit}; OpenVINO's CPU plugin refuses a negative value")
        iou_threshold = np.float32(_first_value(iou_threshold, 0))
        score_threshold = np.float32(_first_value(score_threshold, 0))
        sigma = float(_first_value(sigma, 0))
        batches, classes, num_boxes = scores.shape
        prepared = self.prepare_boxes(boxes)
        limit = min(limit, num_boxes)
        picked = []
        for b in range(batches):
            image = self.image(prepared[b])
            for c in range(classes):
                chosen = self.select(image, scores[b, c].astype(np.float32), limit, iou_threshold,
                                     score_threshold, sigma)
                if len(chosen[0]):
                    picked.append((b, c) + chosen)
        return self.outputs(picked)

    def prepare_boxes(self, boxes: np.ndarray) -> np.ndarray:
        return _nms_corners(boxes, self.attrs.box_encoding == "center")

    def image(self, boxes: np.ndarray):
        """What `select` reads of one batch item's prepared boxes, made once for all its classes."""
        return _PairwiseIoU(boxes)

    def select(self, image, scores, limit, iou_threshold, score_threshold, sigma) -> tuple[np.ndarray, np.ndarray]:
        """The boxes selected for one batch item and class, in selection order, and their scores."""
        if sigma > 0:
            return _soft_nms(image.boxes, scores, limit, score_threshold, sigma)
        return _hard_nms(image, scores, limit, iou_threshold, score_threshold)

    def outputs(self, picked: list[tuple[int, int, np.ndarray, np.ndarray]]):
        """selected_indices (and, from v5, selected_scores and valid_outputs) from each batch item's and
        class's selected boxes and scores, as one table (a tuple a row made YOLOv8's 8000 rows pay
        for the garbage collector's passes over the model's objects)."""
        table = np.empty((sum(len(boxes) for _, _, boxes, _ in picked), 4))    # batch, class, box, score: exact
        at = 0
        for b, c, boxes, box_scores in picked:
            rows = table[at:at + len(boxes)]
            rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3] = b, c, boxes, box_scores
            at += len(boxes)
        if self.attrs.sort_result_descending:
            table = table[np.lexsort((table[:, 2], table[:, 1], table[:, 0], -table[:, 3]))]
        indices = table[:, :3].astype(np.int64).astype(self.index_type.carrier)
        if self.version < 5:
            return indices
        selected_scores = table[:, [0, 1, 3]].astype(np.float32)
        return indices, selected_scores, np.array([len(table)], dtype=self.index_type.carrier)


# ---------------------------------------------------------------- NMSRotated

def _rotated_corners(boxes: np.ndarray, clockwise: bool) -> np.ndarray:
    """(..., 4, 2) corners of boxes [x_ctr, y_ctr, w, h, angle], in the CPU plugin's order (f32)."""
    b = boxes.astype(np.float32)
    theta = b[..., 4] if clockwise else -b[..., 4]
    cos, sin = np.cos(theta) * np.float32(0.5), np.sin(theta) * np.float32(0.5)
    x, y, w, h = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    p0 = np.stack([x - sin * h - cos * w, y + cos * h - sin * w], -1)
    p1 = np.stack([x + sin * h - cos * w, y - cos * h - sin * w], -1)
    centre2 = np.stack([2 * x, 2 * y], -1)
    return np.stack([p0, p1, centre2 - p0, centre2 - p1], -2)


def _cross(a, b):
    return a[..., 0] * b[..., 1] - b[..., 0] * a[..., 1]


def _dot(a, b):
    return a[..., 0] * b[..., 0] + a[..., 1] * b[..., 1]


def _corners_inside(points: np.ndarray, rect: np.ndarray) -> np.ndarray:
    """Which of points (K, 4, 2) lie in rectangles rect (K, 4, 2) (projections onto two sides, bounds included)."""
    ab, da = rect[:, 1] - rect[:, 0], rect[:, 0] - rect[:, 3]
    ap = points - rect[:, None, 0]
    along_ab, along_ad = _dot(ap, ab[:, None]), -_dot(ap, da[:, None])
    return (along_ab >= 0) & (along_ad >= 0) & (along_ab <= _dot(ab, ab)[:, None]) & \
        (along_ad <= _dot(da, da)[:, None])


def _convex_area(points: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Area of the convex hull of each row's valid points (K, P, 2), computed as the CPU plugin does
    (in f32): Graham scan from the lowest point, then a fan of triangles from it; 0 with fewer than
    3 points.  Rows advance in lock step; each row keeps its own stack."""
    rows, size = points.shape[:2]
    count = valid.sum(axis=1)
    # The valid points first, in their original order.
    p = np.take_along_axis(points, np.argsort(~valid, axis=1, kind="stable")[..., None], axis=1).astype(np.float32)
    live = np.arange(size)[None, :] < count[:, None]
    lowest = np.lexsort((np.where(live, p[..., 0], np.inf), np.where(live, p[..., 1], np.inf)), axis=1)[:, 0]
    every = np.arange(rows)
    q = p - p[every, lowest][:, None]
    first = q[:, 0].copy()
    q[:, 0] = q[every, lowest]
    q[every, lowest] = first
    live_rest = live[:, 1:]
    # Angular order about the lowest point (collinear points by distance).
    angle = np.where(live_rest, np.arctan2(q[:, 1:, 1].astype(np.float64), q[:, 1:, 0].astype(np.float64)), np.inf)
    q[:, 1:] = np.take_along_axis(q[:, 1:], np.lexsort((_dot(q[:, 1:], q[:, 1:]), angle), axis=1)[..., None], axis=1)
    far = (_dot(q, q) > np.float32(1e-8)) & live
    far[:, 0] = False
    second = np.where(far.any(axis=1), np.argmax(far, axis=1), size)
    stack = np.zeros_like(q)
    stack[:, 1] = q[np.arange(rows), np.minimum(second, size - 1)]
    height = np.where(second < size, 2, 1)
    for i in range(2, size):
        active = (i > second) & (i < count)
        while True:
            top, below = stack[every, height - 1], stack[every, np.maximum(height - 2, 0)]
            pop = active & (height > 1) & (_cross(q[:, i] - below, top - below) >= 0)
            if not pop.any():
                break
            height = height - pop
        stack[every[active], height[active]] = q[active, i]
        height = height + active
    area = np.zeros(rows, np.float32)
    for i in range(1, size - 1):
        triangle = np.abs(_cross(stack[:, i], stack[:, i + 1]))
        area = np.where(i < height - 1, area + triangle, area).astype(np.float32)
    return np.where((count > 2) & (height > 2), area / np.float32(2), np.float32(0))


def _rotated_intersection(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Intersection areas of rectangles a (K, 4, 2) and b (K, 4, 2), as the CPU plugin finds the
    polygon: edge crossings plus the corners of each inside the other."""
    edge_a, edge_b = np.roll(a, -1, axis=1) - a, np.roll(b, -1, axis=1) - b
    ea, eb = edge_a[:, :, None], edge_b[:, None, :]                            # (K, 4 of a, 4 of b, 2)
    det = _cross(eb, ea)
    offset = b[:, None, :] - a[:, :, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        t1, t2 = _cross(eb, offset) / det, _cross(ea, offset) / det
    crossing = (np.abs(det) > np.float32(1e-14)) & (t1 >= 0) & (t1 <= 1) & (t2 >= 0) & (t2 <= 1)
    crossings = a[:, :, None] + ea * np.where(crossing, t1, 0)[..., None]
    points = np.concatenate([crossings.reshape(-1, 16, 2), a, b], axis=1)
    valid = np.concatenate([crossing.reshape(-1, 16), _corners_inside(a, b), _corners_inside(b, a)], axis=1)
    return _convex_area(points, valid)


@register("NMSRotated", 13)
class NMSRotated(NonMaxSuppression):
    """NMS-9's selection and outputs over rotated boxes [x_ctr, y_ctr, w, h, angle].

    As on the CPU plugin: a candidate is suppressed when its rotated IoU with a selected
    box is > iou_threshold (not >=); a candidate without area is never suppressed (unless
    the threshold is negative), and IoU with a selected box without area is 0."""

    box_values = 5

    def prepare_boxes(self, boxes):
        return boxes.astype(np.float32)

    def image(self, boxes):
        return boxes

    def select(self, boxes, scores, limit, iou_threshold, score_threshold, sigma):
        corners = _rotated_corners(boxes, self.attrs.clockwise)
        area = boxes[:, 2] * boxes[:, 3]

        def suppressed(best, rest):
            inter = _rotated_intersection(corners[rest], np.broadcast_to(corners[best], (len(rest), 4, 2)))
            with np.errstate(invalid="ignore", divide="ignore"):
                iou = inter / (area[rest] + area[best] - inter)
            iou = np.where(area[best] > 0, iou, np.float32(0))
            return np.where(area[rest] > 0, iou > iou_threshold, np.float32(0) > iou_threshold)

        kept = greedy(by_score_above(scores, score_threshold), limit, suppressed)
        kept = np.array(kept, np.int64)
        return kept, scores[kept]
