"""Detection heads: NonMaxSuppression-1/3/4/5/9, NMSRotated-13, MatrixNms-8, MulticlassNms-8/9,
ROIAlign-3/9, ROIAlignRotated-15, ROIPooling-2, PSROIPooling-1, DeformablePSROIPooling-1,
PriorBox-1/8, PriorBoxClustered-1, Proposal-1/4, GenerateProposals-9, DetectionOutput-1/8,
RegionYolo-1, ReorgYolo-2 and the ExperimentalDetectron*-6 ops (DetectionOutput,
GenerateProposalsSingleImage, PriorGridGenerator, ROIFeatureExtractor, TopKROIs).

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
* ROIAlign samples as OpenVINO's reference does; max mode starts from 0.
* Proposal follows the CPU plugin, which reads the image size as (width,
  height) for framework="tensorflow"; unused probs are 0.
* The other ops follow the CPU plugin's kernels too; their details are in the
  class docstrings and the errata (ROIs with batch id -1 end the list, NMSRotated
  suppresses at IoU > threshold, MatrixNms sorts by class only across the batch,
  MulticlassNms's nms_top_k limits the candidates examined, ...).
* Box loops (every greedy NMS, the proposal ops, the detection outputs) run over
  selected boxes, each step computing its IoU against all remaining candidates
  at once; ROIPooling's max mode loops over ROIs.
"""
from __future__ import annotations

import heapq
import math

import numpy as np

from .. import etypes
from ..errors import ModelError, ShapeError
from ..registry import Op, TensorType, register
from ..shapes import (
    ANY,
    Dim,
    dim_bounds,
    dim_merge,
    dim_mul,
    dims_compatible,
    format_shape,
    make_dim,
    normalize_axis,
)
from .common import round_half_away

# ---------------------------------------------------------------- shared box helpers


def _check_rank(t: TensorType, rank: int, what: str) -> None:
    if t.rank is not None and t.rank != rank:
        raise ShapeError(f"{what} must be {rank}-D, got {format_shape(t.shape)}")


def _check_dim(t: TensorType, axis: int, size: int, what: str) -> None:
    if t.shape is not None and not dims_compatible(t.shape[axis], size):
        raise ShapeError(f"{what} dimension {axis} must be {size}, got {format_shape(t.shape)}")


def _merge(a, b, message: str):
    try:
        return dim_merge(a, b)
    except ShapeError:
        raise ShapeError(message) from None


def _x86_min(a, b):
    """minps: the second operand when either is NaN."""
    return np.where(a < b, a, b)


def _x86_max(a, b):
    return np.where(a > b, a, b)


# ---------------------------------------------------------------- NonMaxSuppression

def _nms_corners(boxes: np.ndarray, center: bool) -> np.ndarray:
    """(..., 4) boxes as y1, x1, y2, x2 with y1 <= y2 and x1 <= x2 (f32)."""
    b = boxes.astype(np.float32)
    if center:
        x, y = b[..., 0], b[..., 1]
        half_w, half_h = b[..., 2] * np.float32(0.5), b[..., 3] * np.float32(0.5)
        return np.stack([y - half_h, x - half_w, y + half_h, x + half_w], axis=-1)
    return np.stack([_x86_min(b[..., 0], b[..., 2]), _x86_min(b[..., 1], b[..., 3]),
                     _x86_max(b[..., 0], b[..., 2]), _x86_max(b[..., 1], b[..., 3])], axis=-1)


def _iou(selected: np.ndarray, candidate: np.ndarray) -> np.ndarray:
    """IoU of normalized boxes (..., 4), broadcast; f32, NaN when both areas are 0.

    The operand order is the CPU plugin's: a NaN coordinate yields the candidate's."""
    area_s = (selected[..., 2] - selected[..., 0]) * (selected[..., 3] - selected[..., 1])
    area_c = (candidate[..., 2] - candidate[..., 0]) * (candidate[..., 3] - candidate[..., 1])
    zero = np.float32(0)
    height = np.maximum(_x86_min(selected[..., 2], candidate[..., 2]) - _x86_max(selected[..., 0], candidate[..., 0]),
                        zero)
    width = np.maximum(_x86_min(selected[..., 3], candidate[..., 3]) - _x86_max(selected[..., 1], candidate[..., 1]),
                       zero)
    inter = height * width
    with np.errstate(invalid="ignore", divide="ignore"):
        return inter / ((area_s + area_c) - inter)


def _greedy(candidates: np.ndarray, limit: int, suppressed) -> list[int]:
    """Greedy NMS over candidates in priority order: keep the first, drop the rest that
    `suppressed(kept, rest)` flags (one vectorised test per kept box), repeat."""
    kept: list[int] = []
    while candidates.size and len(kept) < limit:
        best, rest = int(candidates[0]), candidates[1:]
        kept.append(best)
        candidates = rest[~suppressed(best, rest)]
    return kept


def _by_score(scores: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Candidates by descending score, ties by index."""
    return candidates[np.lexsort((candidates, -scores[candidates]))]


def _by_score_above(scores: np.ndarray, threshold) -> np.ndarray:
    """Indices with score > threshold, by descending score, ties by index."""
    return _by_score(scores, np.flatnonzero(scores > threshold))


def _hard_nms(boxes, scores, limit, iou_threshold, score_threshold) -> list[tuple[int, float]]:
    # NaN IoU compares false: it suppresses nothing.
    kept = _greedy(_by_score_above(scores, score_threshold), limit,
                   lambda best, rest: _iou(boxes[best], boxes[rest]) >= iou_threshold)
    return [(i, float(scores[i])) for i in kept]


def _soft_nms(boxes, scores, limit, score_threshold, sigma) -> list[tuple[int, float]]:
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
    return selected


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
        _check_rank(boxes, 3, "boxes")
        _check_rank(scores, 3, "scores")
        _check_dim(boxes, 2, self.box_values, "boxes")
        for i, name in enumerate(("max_output_boxes_per_class", "iou_threshold", "score_threshold",
                                  "soft_nms_sigma")[:len(inputs) - 2]):
            t = inputs[2 + i]
            if t.rank not in (None, 0) and not (self.version >= 5 and t.rank == 1 and dims_compatible(t.shape[0], 1)):
                raise ShapeError(f"{name} must be a scalar, got {format_shape(t.shape)}")
        rows = ANY
        if boxes.shape is not None and scores.shape is not None:
            _merge(boxes.shape[0], scores.shape[0], f"boxes {format_shape(boxes.shape)} and scores "
                   f"{format_shape(scores.shape)} differ in the batch dimension")
            _merge(boxes.shape[1], scores.shape[2], f"boxes {format_shape(boxes.shape)} and scores "
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
        rows = []
        for b in range(batches):
            for c in range(classes):
                chosen = self.select(prepared[b], scores[b, c].astype(np.float32), limit, iou_threshold,
                                     score_threshold, sigma)
                rows += [(b, c, index, score) for index, score in chosen]
        return self.outputs(rows)

    def prepare_boxes(self, boxes: np.ndarray) -> np.ndarray:
        return _nms_corners(boxes, self.attrs.box_encoding == "center")

    def select(self, boxes, scores, limit, iou_threshold, score_threshold, sigma) -> list[tuple[int, float]]:
        """(box, score) pairs selected for one batch item and class, in selection order."""
        if sigma > 0:
            return _soft_nms(boxes, scores, limit, score_threshold, sigma)
        return _hard_nms(boxes, scores, limit, iou_threshold, score_threshold)

    def outputs(self, rows: list[tuple[int, int, int, float]]):
        """selected_indices (and, from v5, selected_scores and valid_outputs) from (batch, class, box, score) rows."""
        if self.attrs.sort_result_descending:
            rows = sorted(rows, key=lambda r: (-r[3], r[0], r[1], r[2]))
        indices = np.array([r[:3] for r in rows], dtype=np.int64).reshape(-1, 3)
        indices = indices.astype(self.index_type.carrier)
        if self.version < 5:
            return indices
        selected_scores = np.array([(r[0], r[1], r[3]) for r in rows], dtype=np.float32).reshape(-1, 3)
        return indices, selected_scores, np.array([len(rows)], dtype=self.index_type.carrier)


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

    def select(self, boxes, scores, limit, iou_threshold, score_threshold, sigma):
        corners = _rotated_corners(boxes, self.attrs.clockwise)
        area = boxes[:, 2] * boxes[:, 3]

        def suppressed(best, rest):
            inter = _rotated_intersection(corners[rest], np.broadcast_to(corners[best], (len(rest), 4, 2)))
            with np.errstate(invalid="ignore", divide="ignore"):
                iou = inter / (area[rest] + area[best] - inter)
            iou = np.where(area[best] > 0, iou, np.float32(0))
            return np.where(area[rest] > 0, iou > iou_threshold, np.float32(0) > iou_threshold)

        kept = _greedy(_by_score_above(scores, score_threshold), limit, suppressed)
        return [(i, float(scores[i])) for i in kept]


# ---------------------------------------------------------------- MatrixNms and MulticlassNms
# Outputs: selected_outputs [N, 6] rows [class, score, x1, y1, x2, y2] (the boxes' type),
# selected_indices [N, 1] (flat box indices) and valid_outputs [batches], N data-dependent.

def _max_length(d) -> int:
    """OpenVINO's Dimension::get_max_length(): the upper bound, -1 when unbounded."""
    hi = dim_bounds(d)[1]
    return -1 if hi is None else hi


def _dimension(value: int):
    """OpenVINO's Dimension(value): -1 is dynamic."""
    return ANY if value < 0 else value


def _up_to(d):
    """Dimension(0, max): the rows of a data-dependent output."""
    top = _max_length(d)
    return make_dim(0, None if top < 0 else top)


class _NmsTable:
    """Selected boxes of every batch item and class, as parallel arrays."""

    def __init__(self):
        self.parts: list[tuple] = []

    def add(self, batch: int, cls: int, scores: np.ndarray, flat: np.ndarray, coords: np.ndarray):
        """Rows for one batch item and class: scores, flat box indices, box coordinates."""
        n = len(scores)
        self.parts.append((np.full(n, batch), np.full(n, cls), scores.astype(np.float32), flat, coords))

    def arrays(self):
        """batch, class, score, flat index, coordinates of every row."""
        if not self.parts:
            return (np.zeros(0, np.int64),) * 2 + (np.zeros(0, np.float32), np.zeros(0, np.int64),
                                                   np.zeros((0, 4), np.float32))
        return tuple(np.concatenate(column) for column in zip(*self.parts))


class _MulticlassOutputs(Op):
    """What MatrixNms and MulticlassNms share: attribute checks, the shape function, output order."""

    #: sort_result_type=classid also orders the rows of each batch item (not only across the batch)
    class_sort_per_batch = True

    def spatial_rank(self, inputs):
        return None

    def check_attributes(self) -> None:
        a = self.attrs
        for name in ("nms_top_k", "keep_top_k", "background_class"):
            if a[name] < -1:
                raise ShapeError(f"{name} must be >= -1, got {a[name]}")

    def infer(self, inputs):
        self.check_attributes()
        boxes, scores = inputs[0], inputs[1]
        for t, what in ((boxes, "boxes"), (scores, "scores")):
            if not t.etype.is_float and t.etype is not etypes.dynamic:
                raise ShapeError(f"{what} must be floating point, got {t.etype}")
        if boxes.etype is not scores.etype and etypes.dynamic not in (boxes.etype, scores.etype):
            raise ShapeError(f"boxes ({boxes.etype}) and scores ({scores.etype}) must have the same element type")
        _check_rank(boxes, 3, "boxes")
        _check_dim(boxes, 2, 4, "boxes")
        rows, images = self.bounds(inputs)
        notes = {0: "data-dependent: selected boxes, at most the bound OpenVINO infers"}
        index = self.attrs.output_type
        return [TensorType((rows, 6), boxes.etype, notes=notes), TensorType((rows, 1), index, notes=notes),
                TensorType((images,), index)]

    def bounds(self, inputs) -> tuple:
        raise NotImplementedError

    @staticmethod
    def check_boxes(boxes: TensorType, scores: TensorType, boxes_axis: int) -> None:
        """Batch (or class) and box counts of boxes and scores agree."""
        _merge(boxes.shape[0], scores.shape[0], f"boxes {format_shape(boxes.shape)} and scores "
               f"{format_shape(scores.shape)} differ in dimension 0")
        _merge(boxes.shape[1], scores.shape[boxes_axis], f"boxes {format_shape(boxes.shape)} and scores "
               f"{format_shape(scores.shape)} differ in the number of boxes")

    def order(self, batch, cls, score, flat) -> np.ndarray:
        """Final row order: per batch item by score (then class, index) unless sorted by class,
        or across the batch when sort_result_across_batch."""
        a = self.attrs
        if a.sort_result_type == "classid" and a.sort_result_across_batch:
            keys = (flat, -score, batch, cls)
        elif a.sort_result_type == "classid" and self.class_sort_per_batch:
            keys = (flat, -score, cls, batch)
        elif a.sort_result_type == "score" and a.sort_result_across_batch:
            keys = (flat, cls, batch, -score)
        else:
            keys = (flat, cls, -score, batch)
        return np.lexsort(keys)

    def keep_top(self, batch, cls, score, flat) -> np.ndarray:
        """Per batch item: rows by score (then class, index), at most keep_top_k of them."""
        order = np.lexsort((flat, cls, -score, batch))
        keep = self.attrs.keep_top_k
        if keep > -1:
            rank = np.arange(len(order)) - np.searchsorted(batch[order], batch[order], side="left")
            order = order[rank < keep]
        return order

    def outputs(self, table: _NmsTable, batches: int, dtype):
        batch, cls, score, flat, coords = table.arrays()
        kept = self.keep_top(batch, cls, score, flat)
        batch, cls, score, flat, coords = batch[kept], cls[kept], score[kept], flat[kept], coords[kept]
        final = self.order(batch, cls, score, flat)
        index = self.attrs.output_type.carrier
        selected = np.concatenate([cls[final, None].astype(np.float32), score[final, None], coords[final]], axis=1)
        return (selected.astype(dtype), flat[final, None].astype(index),
                np.bincount(batch, minlength=batches).astype(index))


def _matrix_iou(a: np.ndarray, b: np.ndarray, normalized: bool) -> np.ndarray:
    """IoU of [x1, y1, x2, y2] boxes as MatrixNms computes it (broadcast): 0 for disjoint boxes,
    +1 on every side length for unnormalized boxes, inverted boxes have no area."""
    norm = np.float32(0 if normalized else 1)
    disjoint = (b[..., 0] > a[..., 2]) | (b[..., 2] < a[..., 0]) | (b[..., 1] > a[..., 3]) | (b[..., 3] < a[..., 1])
    width = np.minimum(a[..., 2], b[..., 2]) - np.maximum(a[..., 0], b[..., 0]) + norm
    height = np.minimum(a[..., 3], b[..., 3]) - np.maximum(a[..., 1], b[..., 1]) + norm

    def area(box):
        inverted = (box[..., 2] < box[..., 0]) | (box[..., 3] < box[..., 1])
        sides = (box[..., 2] - box[..., 0] + norm) * (box[..., 3] - box[..., 1] + norm)
        return np.where(inverted, np.float32(0), sides)

    inter = width * height
    with np.errstate(invalid="ignore", divide="ignore"):
        iou = inter / (area(a) + area(b) - inter)
    return np.where(disjoint, np.float32(0), iou).astype(np.float32)


@register("MatrixNms", 8)
class MatrixNms(_MulticlassOutputs):
    """Matrix NMS (SOLOv2): no box is dropped by IoU; each candidate's score decays by its overlap
    with every higher-scored candidate, compensated by how much that one was itself overlapped:
    decay = min over j of f(iou_ij, max_iou_j) (linear (1 - iou) / (1 - max_iou), gaussian
    exp((max_iou^2 - iou^2) * gaussian_sigma)).  Boxes whose decayed score is above
    post_threshold are kept.  The CPU plugin sorts by class only across the batch: with
    sort_result_across_batch=false the rows of each image stay in score order."""

    class_sort_per_batch = False

    def bounds(self, inputs):
        a = self.attrs
        boxes, scores = inputs
        _check_rank(scores, 3, "scores")
        if boxes.shape is None:
            return ANY, ANY
        count = _dimension(min(_max_length(boxes.shape[1]), a.nms_top_k)) if a.nms_top_k > -1 else boxes.shape[1]
        rows = ANY
        if scores.shape is not None:
            self.check_boxes(boxes, scores, 2)
            count = dim_mul(count, scores.shape[1])
            if a.keep_top_k > -1:
                count = _dimension(min(_max_length(count), a.keep_top_k))
            rows = _up_to(dim_mul(count, scores.shape[0]))
        return rows, boxes.shape[0]

    def decayed(self, boxes: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(candidates kept, their decayed scores) for one batch item and class."""
        a = self.attrs
        order = _by_score_above(scores, np.float32(a.score_threshold))
        if a.nms_top_k > -1:
            order = order[:a.nms_top_k]
        if not order.size:
            return order, np.zeros(0, np.float32)
        candidates = boxes[order]
        iou = _matrix_iou(candidates[:, None], candidates[None, :], a.normalized)     # iou[i, j]
        earlier = np.tri(len(order), k=-1, dtype=bool)                                # j < i
        iou = np.where(earlier, iou, np.float32(0))
        max_iou = iou.max(axis=1)                   # how much candidate j was overlapped by earlier ones
        if a.decay_function == "gaussian":
            decay = np.exp((max_iou[None, :] * max_iou[None, :] - iou * iou) * np.float32(a.gaussian_sigma))
        else:
            decay = ((1.0 - iou.astype(np.float64)) / (1.0 - max_iou[None, :].astype(np.float64) + np.float32(1e-10)))
        decay = np.minimum(np.where(earlier, decay.astype(np.float32), np.float32(1)).min(axis=1), np.float32(1))
        score = (decay * scores[order]).astype(np.float32)
        keep = score > np.float32(a.post_threshold)
        return order[keep], score[keep]

    def run(self, boxes, scores):
        batches, classes, count = scores.shape
        corners, scores32 = boxes.astype(np.float32), scores.astype(np.float32)
        table = _NmsTable()
        for b in range(batches):
            for c in range(classes):
                if c == self.attrs.background_class:
                    continue
                kept, score = self.decayed(corners[b], scores32[b, c])
                table.add(b, c, score, b * count + kept, corners[b, kept])
        return self.outputs(table, batches, boxes.dtype)


def _multiclass_iou(a: np.ndarray, b: np.ndarray, normalized: bool) -> np.ndarray:
    """IoU as MulticlassNms computes it: +1 on every side for unnormalized boxes, 0 when either has no area."""
    norm = np.float32(0 if normalized else 1)
    area_a = (a[..., 2] - a[..., 0] + norm) * (a[..., 3] - a[..., 1] + norm)
    area_b = (b[..., 2] - b[..., 0] + norm) * (b[..., 3] - b[..., 1] + norm)
    inter = np.maximum(np.minimum(a[..., 2], b[..., 2]) - np.maximum(a[..., 0], b[..., 0]) + norm, np.float32(0)) * \
        np.maximum(np.minimum(a[..., 3], b[..., 3]) - np.maximum(a[..., 1], b[..., 1]) + norm, np.float32(0))
    with np.errstate(invalid="ignore", divide="ignore"):
        iou = inter / (area_a + area_b - inter)
    return np.where((area_a <= 0) | (area_b <= 0), np.float32(0), iou).astype(np.float32)


@register("MulticlassNms", 8, 9)
class MulticlassNms(_MulticlassOutputs):
    """Per-class greedy NMS over the nms_top_k best candidates (score >= score_threshold), a candidate
    dropped at IoU >= iou_threshold with a selected box; with nms_eta < 1 the threshold shrinks by
    nms_eta after each selection while above 0.5.  MulticlassNms-9 also takes boxes [C, M, 4] and
    scores [C, M] with roisnum [N] splitting the M boxes among the images."""

    def check_attributes(self) -> None:
        super().check_attributes()
        if not 0 <= self.attrs.nms_eta <= 1:
            raise ShapeError(f"nms_eta must be in [0, 1], got {self.attrs.nms_eta}")

    def bounds(self, inputs):
        a = self.attrs
        boxes, scores = inputs[0], inputs[1]
        split = len(inputs) > 2
        _check_rank(scores, 2 if split else 3, "scores")
        if split:
            _check_rank(inputs[2], 1, "roisnum")
            if inputs[2].etype not in (etypes.i32, etypes.i64, etypes.dynamic):
                raise ShapeError(f"roisnum must be i32 or i64, got {inputs[2].etype}")
        if boxes.shape is None:
            return ANY, ANY
        if scores.shape is None or (split and inputs[2].shape is None):
            if scores.shape is not None:
                self.check_boxes(boxes, scores, 1 if split else 2)
            return ANY, ANY
        self.check_boxes(boxes, scores, 1 if split else 2)
        classes, images = (boxes.shape[0], inputs[2].shape[0]) if split else (scores.shape[1], scores.shape[0])
        count = _dimension(min(_max_length(boxes.shape[1]), a.nms_top_k)) if a.nms_top_k > -1 else boxes.shape[1]
        count = dim_mul(count, classes)
        if -1 < a.keep_top_k < _max_length(count):
            count = a.keep_top_k
        return _up_to(dim_mul(count, images)), (inputs[2].shape[0] if split else boxes.shape[0])

    def selected(self, boxes: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """Indices selected for one batch item and class, in selection order."""
        a = self.attrs
        score_threshold = np.float32(a.score_threshold)
        order = _by_score(scores, np.flatnonzero(scores >= score_threshold))
        limit = order.size if a.nms_top_k == -1 else min(a.nms_top_k, order.size)
        order = order[:limit]              # the candidates examined at all
        if not order.size:
            return order
        adaptive = a.nms_eta < 1
        threshold = np.float32(a.iou_threshold)
        # With nms_eta < 1, a candidate scoring at the threshold is only checked against the
        # newest selected box (the CPU plugin stops there).
        newest_only = adaptive & (scores[order] <= score_threshold)
        worst = np.zeros(order.size, np.float32)       # max IoU with the boxes selected so far
        chosen, position = [], 0
        while position < order.size:
            chosen.append(position)
            newest = _multiclass_iou(boxes[order[position]], boxes[order], a.normalized)
            worst = np.maximum(worst, newest)
            if adaptive and threshold > 0.5:
                threshold = np.float32(threshold * np.float32(a.nms_eta))
            overlap = np.where(newest_only, newest, worst)
            free = np.flatnonzero(~(overlap[position + 1:] >= threshold))
            if not free.size:
                break
            position += 1 + int(free[0])
        return order[chosen]

    def run(self, boxes, scores, roisnum=None):
        a = self.attrs
        corners, scores32 = boxes.astype(np.float32), scores.astype(np.float32)
        table = _NmsTable()
        if roisnum is None:
            batches, classes, count = scores.shape
            for b in range(batches):
                for c in range(classes):
                    if c != a.background_class:
                        kept = self.selected(corners[b], scores32[b, c])
                        table.add(b, c, scores32[b, c, kept], b * count + kept, corners[b, kept])
            return self.outputs(table, batches, boxes.dtype)
        classes = scores.shape[0]
        sizes = roisnum.astype(np.int64).reshape(-1)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        if np.any(sizes < 0) or sizes.sum() > boxes.shape[1]:
            raise ModelError(f"roisnum {sizes.tolist()} does not split the {boxes.shape[1]} boxes")
        for b, (start, size) in enumerate(zip(starts, sizes)):
            for c in range(classes):
                if c != a.background_class and size > 0:
                    part = slice(start, start + size)
                    kept = self.selected(corners[c, part], scores32[c, part])
                    table.add(b, c, scores32[c, part][kept], (start + kept) * classes + c, corners[c, part][kept])
        return self.outputs(table, len(sizes), boxes.dtype)


# ---------------------------------------------------------------- ROIAlign

def _neighbours(pos, size: int):
    """ROIAlign's bilinear neighbours of sample positions along one axis of length `size`.

    Returns (low, high, frac, valid): the two feature rows (or columns) to blend, the weight
    of `high`, and whether the sample lies in [-1, size] (outside, it contributes 0)."""
    valid = (pos >= -1) & (pos <= size)
    pos = np.maximum(pos, np.float32(0))
    low = np.floor(np.where(valid, pos, 0)).astype(np.int64)
    at_edge = low >= size - 1
    low = np.where(at_edge, size - 1, low)
    high = np.where(at_edge, low, low + 1)
    frac = np.where(at_edge, np.float32(0), pos - low).astype(np.float32)
    return low, high, frac, valid


def _axis_samples(start, bin_size, count: int, pooled: int, size: int):
    """Sample positions along one axis for a group of ROIs sharing `count` samples per bin,
    as `_neighbours` of shape (rois, pooled, count)."""
    bins = np.arange(pooled, dtype=np.float32)[None, :, None]
    taps = (np.arange(count, dtype=np.float32) + np.float32(0.5))[None, None, :]
    step = (bin_size / np.float32(count))[:, None, None]
    return _neighbours(start[:, None, None] + bins * bin_size[:, None, None] + step * taps, size)


def _blend_neighbours(plane, y_low, y_high, x_low, x_high, fy, fx):
    """The bilinear sample from 4 neighbours, weighted as ROIAlign does; `plane(y, x)` gathers values
    (channels last), so the weights get a trailing axis."""
    one = np.float32(1)
    fy, fx = fy[..., None], fx[..., None]
    return ((one - fy) * (one - fx) * plane(y_low, x_low) + (one - fy) * fx * plane(y_low, x_high)
            + fy * (one - fx) * plane(y_high, x_low) + fy * fx * plane(y_high, x_high))


def _check_batch_indices(batch_indices: np.ndarray, batches: int) -> np.ndarray:
    batch_indices = batch_indices.astype(np.int64)
    if np.any((batch_indices < 0) | (batch_indices >= batches)):
        raise ModelError(f"batch_indices must be in [0, {batches}), got {batch_indices.tolist()}")
    return batch_indices


def _sample_counts(bin_w, bin_h, ratio: int):
    """Samples per bin along x and y for each ROI: sampling_ratio, or ceil(bin size) when it is 0."""
    if ratio > 0:
        return np.full(len(bin_w), ratio), np.full(len(bin_h), ratio)
    return np.ceil(bin_w).astype(np.int64), np.ceil(bin_h).astype(np.int64)


def _by_sample_counts(count_x, count_y):
    """ROI index groups sharing (samples along x, samples along y); groups without samples are skipped."""
    for sx, sy in sorted({(int(a), int(b)) for a, b in zip(count_x, count_y)}):
        if sx > 0 and sy > 0:
            yield sx, sy, np.flatnonzero((count_x == sx) & (count_y == sy))


def _aligned_samples(features, batch, x1, y1, bin_w, bin_h, sx: int, sy: int, ph: int, pw: int) -> np.ndarray:
    """ROIAlign's bilinear samples (G, PH, SY, PW, SX, C) for a group of axis-aligned ROIs sharing
    sx * sy samples per bin; samples outside [-1, size] are 0."""
    _, _, h, w = features.shape
    y_low, y_high, ly, y_ok = _axis_samples(y1, bin_h, sy, ph, h)     # (G, PH, SY)
    x_low, x_high, lx, x_ok = _axis_samples(x1, bin_w, sx, pw, w)     # (G, PW, SX)
    # Index arrays broadcast to (G, PH, SY, PW, SX); gathering puts channels last.
    g = batch[:, None, None, None, None]
    valid = (y_ok[:, :, :, None, None] & x_ok[:, None, None, :, :])[..., None]
    value = _blend_neighbours(lambda yi, xi: features[g, :, yi, xi],
                              y_low[:, :, :, None, None], y_high[:, :, :, None, None],
                              x_low[:, None, None, :, :], x_high[:, None, None, :, :],
                              ly[:, :, :, None, None], lx[:, None, None, :, :])
    return np.where(valid, value, np.float32(0))


@register("ROIAlign", 3, 9)
class ROIAlign(Op):
    box_values = 4       # a ROI row: x1, y1, x2, y2

    def spatial_rank(self, inputs):
        return None

    def infer(self, inputs):
        data, rois, batch_indices = inputs
        _check_rank(data, 4, "data")
        _check_rank(rois, 2, "rois")
        _check_rank(batch_indices, 1, "batch_indices")
        _check_dim(rois, 1, self.box_values, "rois")
        if not batch_indices.etype.is_integral and batch_indices.etype is not etypes.dynamic:
            raise ShapeError(f"batch_indices must be integers, got {batch_indices.etype}")
        if not data.etype.is_float and data.etype is not etypes.dynamic:
            raise ShapeError(f"data must be floating point, got {data.etype}")
        num_rois = ANY
        if rois.shape is not None:
            num_rois = rois.shape[0]
        if batch_indices.shape is not None:
            num_rois = _merge(num_rois, batch_indices.shape[0], f"rois {format_shape(rois.shape)} and batch_indices "
                              f"{format_shape(batch_indices.shape)} differ in the number of ROIs")
        channels = ANY if data.shape is None else data.shape[1]
        return [TensorType((num_rois, channels, self.attrs.pooled_h, self.attrs.pooled_w), data.etype)]

    def _roi_boxes(self, rois: np.ndarray):
        """x1, y1, width, height of each ROI in feature-map coordinates (f32)."""
        mode = self.attrs.get("aligned_mode") or "asymmetric"
        offset_src = np.float32(0.5 if mode == "half_pixel" else 0)
        offset_dst = np.float32(0 if mode == "asymmetric" else -0.5)
        scale = np.float32(self.attrs.spatial_scale)
        corners = (rois.astype(np.float32) + offset_src) * scale + offset_dst
        x1, y1 = corners[:, 0], corners[:, 1]
        width, height = corners[:, 2] - x1, corners[:, 3] - y1
        if mode == "asymmetric":
            width, height = np.maximum(width, np.float32(1)), np.maximum(height, np.float32(1))
        return x1, y1, width, height

    def run(self, data, rois, batch_indices):
        ph, pw = self.attrs.pooled_h, self.attrs.pooled_w
        n, c = data.shape[:2]
        x1, y1, width, height = self._roi_boxes(rois)
        bin_w, bin_h = width / np.float32(pw), height / np.float32(ph)
        count_x, count_y = _sample_counts(bin_w, bin_h, self.attrs.sampling_ratio)
        batch_indices = _check_batch_indices(batch_indices, n)
        features = data.astype(np.float32)
        out = np.zeros((len(rois), c, ph, pw), dtype=np.float32)     # bins without samples stay 0
        for sx, sy, group in _by_sample_counts(count_x, count_y):
            out[group] = self._pool_group(features, batch_indices[group], x1[group], y1[group],
                                          bin_w[group], bin_h[group], sx, sy)
        return out.astype(data.dtype)

    def _pool_group(self, features, batch, x1, y1, bin_w, bin_h, sx, sy):
        samples = _aligned_samples(features, batch, x1, y1, bin_w, bin_h, sx, sy, self.attrs.pooled_h,
                                   self.attrs.pooled_w)                   # (G, PH, SY, PW, SX, C)
        if self.attrs.mode == "max":
            pooled = np.maximum(samples.max(axis=(2, 4)), np.float32(0))
        else:
            pooled = (samples / np.float32(sx * sy)).sum(axis=(2, 4), dtype=np.float32)
        return pooled.transpose(0, 3, 1, 2)


@register("ROIAlignRotated", 15)
class ROIAlignRotated(ROIAlign):
    """Average of bilinear samples over the bins of ROIs [x_ctr, y_ctr, width, height, angle]:
    the bin grid is laid out around the centre and rotated by the angle (radians)."""

    box_values = 5

    def run(self, data, rois, batch_indices):
        a = self.attrs
        ph, pw = a.pooled_h, a.pooled_w
        n, c = data.shape[:2]
        boxes = rois.astype(np.float32)
        scale = np.float32(a.spatial_scale)
        cx, cy = boxes[:, 0] * scale - np.float32(0.5), boxes[:, 1] * scale - np.float32(0.5)
        width, height = boxes[:, 2] * scale, boxes[:, 3] * scale
        angle = -boxes[:, 4] if a.clockwise_mode else boxes[:, 4]
        bin_w, bin_h = width / np.float32(pw), height / np.float32(ph)
        count_x, count_y = _sample_counts(bin_w, bin_h, a.sampling_ratio)
        if np.any(count_x < 0) or np.any(count_y < 0):
            raise ModelError("ROIAlignRotated: a ROI with negative width or height has no samples "
                             "(OpenVINO's sampling-count check fails)")
        batch_indices = _check_batch_indices(batch_indices, n)
        features = data.astype(np.float32)
        frame = (cx, cy, -width / np.float32(2), -height / np.float32(2), np.cos(angle), np.sin(angle), bin_w, bin_h)
        out = np.zeros((len(boxes), c, ph, pw), dtype=np.float32)
        for sx, sy, group in _by_sample_counts(count_x, count_y):
            out[group] = self._pool_rotated(features, batch_indices[group], *(v[group] for v in frame), sx, sy)
        return out.astype(data.dtype)

    def _pool_rotated(self, features, batch, cx, cy, x1, y1, cos, sin, bin_w, bin_h, sx, sy):
        ph, pw = self.attrs.pooled_h, self.attrs.pooled_w
        _, _, h, w = features.shape

        def roi(v):                                      # per-ROI values against (G, PH, PW, SY, SX)
            return v[:, None, None, None, None]

        bin_y = np.arange(ph, dtype=np.float32)[None, :, None, None, None]
        bin_x = np.arange(pw, dtype=np.float32)[None, None, :, None, None]
        tap_y = (np.arange(sy, dtype=np.float32) + np.float32(0.5))[None, None, None, :, None]
        tap_x = (np.arange(sx, dtype=np.float32) + np.float32(0.5))[None, None, None, None, :]
        # Sample points in the ROI's own frame, then rotated about its centre into the map.
        along_y = roi(y1) + bin_y * roi(bin_h) + roi(bin_h / np.float32(sy)) * tap_y
        along_x = roi(x1) + bin_x * roi(bin_w) + roi(bin_w / np.float32(sx)) * tap_x
        y = along_y * roi(cos) - along_x * roi(sin) + roi(cy)
        x = along_y * roi(sin) + along_x * roi(cos) + roi(cx)
        y_low, y_high, fy, y_ok = _neighbours(y, h)
        x_low, x_high, fx, x_ok = _neighbours(x, w)
        value = _blend_neighbours(lambda yi, xi: features[roi(batch), :, yi, xi], y_low, y_high, x_low, x_high,
                                  fy, fx)                                  # (G, PH, PW, SY, SX, C)
        value = np.where((y_ok & x_ok)[..., None], value, np.float32(0))
        return (value / np.float32(sx * sy)).sum(axis=(3, 4), dtype=np.float32).transpose(0, 3, 1, 2)


# ---------------------------------------------------------------- PriorBox and PriorBoxClustered

def _shape_pair(values: np.ndarray, what: str) -> tuple[int, int]:
    flat = np.asarray(values).reshape(-1)
    if flat.size != 2:
        raise ModelError(f"{what} must hold 2 values (height, width), got {flat.size}")
    return int(flat[0]), int(flat[1])


def _variance_row(variance, count: int) -> np.ndarray:
    """The second output row: one variance for every coordinate, or 4 repeated per prior."""
    variance = list(variance) or [0.1]
    if len(variance) not in (1, 4):
        raise ModelError(f"variance must have 1 or 4 values, got {len(variance)}")
    return np.resize(np.asarray(variance, np.float32), count * 4)


class _PriorGrid(Op):
    """Shape rule shared by PriorBox and PriorBoxClustered: [2, 4 * H * W * priors]."""

    def spatial_rank(self, inputs):
        return None

    def number_of_priors(self) -> int:
        raise NotImplementedError

    def infer(self, inputs):
        for t, what in zip(inputs, ("output_size", "image_size")):
            if not t.etype.is_integral and t.etype is not etypes.dynamic:
                raise ShapeError(f"{what} must be integers, got {t.etype}")
            _check_rank(t, 1, what)
        size = inputs[0]
        if size.value is None:
            return [TensorType((2, ANY), etypes.f32)]
        h, w = _shape_pair(size.value, "output_size")
        priors = self.number_of_priors()
        return [TensorType((2, 4 * h * w * priors), etypes.f32,
                           notes={1: f"4 * {h} * {w} * {priors} priors"})]


def _prior_aspect_ratios(aspect_ratio, flip: bool) -> list[float]:
    """1, then each new ratio (and its inverse with flip), as the PriorBox kernel lists them."""
    ratios = [1.0]
    for ar in aspect_ratio:
        if any(abs(ar - known) < 1e-6 for known in ratios):
            continue
        ratios.append(ar)
        if flip:
            ratios.append(1.0 / ar)
    return ratios


def _unique_ratio_count(aspect_ratio, flip: bool) -> int:
    """The count OpenVINO's shape inference uses: distinct ratios rounded to 1e-6 (in float32, with
    std::round), plus 1."""
    million = np.float32(1e6)

    def rounded(ratio):
        return float(round_half_away(np.float32(ratio) * million) / million)
    unique = {1.0}
    for ar in aspect_ratio:
        unique.add(rounded(ar))
        if flip:
            unique.add(rounded(np.float32(1) / np.float32(ar)))
    return len(unique)


@register("PriorBox", 1, 8)
class PriorBox(_PriorGrid):
    def number_of_priors(self) -> int:
        a = self.attrs
        ratios = _unique_ratio_count(a.aspect_ratio, a.flip)
        if a.scale_all_sizes:
            count = ratios * len(a.min_size) + len(a.max_size)
        else:
            count = ratios + len(a.min_size) - 1
        if a.fixed_size:
            count = ratios * len(a.fixed_size)
        for density in a.density:
            extra = int(density) ** 2 - 1
            count += (len(a.fixed_ratio) if a.fixed_ratio else ratios) * extra
        return count

    def _cell_priors(self, image_h: float) -> list[tuple[float, float, float, float, bool]]:
        """Per cell: (dx, dy, half width, half height, clip each side) relative to the cell centre."""
        a = self.attrs
        ratios = _prior_aspect_ratios(a.aspect_ratio, a.flip)
        priors = []

        def density_grid(s, half_w, half_h):
            density = int(a.density[s])
            size = int(a.fixed_size[s])
            shift = int(a.fixed_size[s] / density)
            for r in range(density):
                for col in range(density):
                    priors.append((-(size // 2) + shift / 2 + col * shift, -(size // 2) + shift / 2 + r * shift,
                                   half_w, half_h, True))

        for s, fixed in enumerate(a.fixed_size):
            if a.fixed_ratio:
                for ar in a.fixed_ratio:
                    density_grid(s, fixed * 0.5 * math.sqrt(ar), fixed * 0.5 / math.sqrt(ar))
                continue
            if a.density:
                density_grid(s, int(fixed) * 0.5, int(fixed) * 0.5)
            for ar in ratios:
                if abs(ar - 1) >= 1e-6:
                    density_grid(s, fixed * 0.5 * math.sqrt(ar), fixed * 0.5 / math.sqrt(ar))

        min_sizes = [m if a.scale_all_sizes else m * image_h for m in a.min_size]
        min_max_first = self.attrs.get("min_max_aspect_ratios_order", True)
        for i, min_size in enumerate(min_sizes):
            priors.append((0, 0, min_size * 0.5, min_size * 0.5, False))
            with_max = [(0, 0, math.sqrt(min_size * a.max_size[i]) * 0.5,
                         math.sqrt(min_size * a.max_size[i]) * 0.5, False)] if i < len(a.max_size) else []
            with_ratios = []
            if a.scale_all_sizes or i == len(min_sizes) - 1:
                base = min_sizes[i if a.scale_all_sizes else 0]
                with_ratios = [(0, 0, base * 0.5 * math.sqrt(ar), base * 0.5 / math.sqrt(ar), False)
                               for ar in ratios if abs(ar - 1) >= 1e-6]
            priors += with_max + with_ratios if min_max_first else with_ratios + with_max
        return priors

    def run(self, output_size, image_size):
        a = self.attrs
        h, w = _shape_pair(output_size, "output_size")
        image_h, image_w = _shape_pair(image_size, "image_size")
        step = np.float32(a.step)
        if not a.scale_all_sizes:
            step = np.float32(image_h) / np.float32(h) if a.step == -1 else step * np.float32(image_h)
        if step == 0:
            cx = (np.arange(w, dtype=np.float32) + np.float32(0.5)) * (np.float32(image_w) / np.float32(w))
            cy = (np.arange(h, dtype=np.float32) + np.float32(0.5)) * (np.float32(image_h) / np.float32(h))
        else:
            cx = (np.float32(a.offset) + np.arange(w, dtype=np.float32)) * step
            cy = (np.float32(a.offset) + np.arange(h, dtype=np.float32)) * step
        table = np.array(self._cell_priors(image_h), dtype=np.float64).reshape(-1, 5)
        dx, dy, half_w, half_h, clip_sides = (table[:, i].astype(np.float32) for i in range(5))
        centre_x = cx[None, :, None] + dx                      # (1, W, P)
        centre_y = cy[:, None, None] + dy[None, None, :]       # (H, 1, P)
        inv_w, inv_h = np.float32(1) / np.float32(image_w), np.float32(1) / np.float32(image_h)
        boxes = np.stack(np.broadcast_arrays((centre_x - half_w) * inv_w, (centre_y - half_h) * inv_h,
                                             (centre_x + half_w) * inv_w, (centre_y + half_h) * inv_h), axis=-1)
        clip_sides = clip_sides.astype(bool)[None, None, :]
        boxes[..., 0:2] = np.where(clip_sides[..., None], np.maximum(boxes[..., 0:2], 0), boxes[..., 0:2])
        boxes[..., 2:4] = np.where(clip_sides[..., None], np.minimum(boxes[..., 2:4], 1), boxes[..., 2:4])
        return _prior_output(boxes, 4 * h * w * self.number_of_priors(), a.clip, a.variance)


@register("PriorBoxClustered", 1)
class PriorBoxClustered(_PriorGrid):
    def number_of_priors(self) -> int:
        return len(self.attrs.width)

    def infer(self, inputs):
        if len(self.attrs.width) != len(self.attrs.height):
            raise ShapeError(f"width has {len(self.attrs.width)} values, height {len(self.attrs.height)}")
        return super().infer(inputs)

    def run(self, output_size, image_size):
        a = self.attrs
        h, w = _shape_pair(output_size, "output_size")
        image_h, image_w = _shape_pair(image_size, "image_size")
        step_w = np.float32(a.step_w or a.step)
        step_h = np.float32(a.step_h or a.step)
        if step_w == 0 and step_h == 0:
            step_w, step_h = np.float32(image_w) / np.float32(w), np.float32(image_h) / np.float32(h)
        cx = ((np.arange(w, dtype=np.float32) + np.float32(a.offset)) * step_w)[None, :, None]
        cy = ((np.arange(h, dtype=np.float32) + np.float32(a.offset)) * step_h)[:, None, None]
        half_w = np.asarray(a.width, np.float32) / np.float32(2)
        half_h = np.asarray(a.height, np.float32) / np.float32(2)
        boxes = np.stack(np.broadcast_arrays((cx - half_w) / np.float32(image_w), (cy - half_h) / np.float32(image_h),
                                             (cx + half_w) / np.float32(image_w), (cy + half_h) / np.float32(image_h)),
                         axis=-1)
        return _prior_output(boxes, 4 * h * w * self.number_of_priors(), a.clip, a.variance)


def _prior_output(boxes: np.ndarray, size: int, clip: bool, variance) -> np.ndarray:
    """The [2, size] output: the boxes, clipped to [0, 1] with `clip`, over their variances.

    OpenVINO's PriorBox kernel writes its boxes cell after cell, as many per cell as the
    attributes give, into an output sized by `number_of_priors`, which can count otherwise: with
    scale_all_sizes=false it leaves out the max_size boxes, with more max_size than min_size values
    it counts boxes the kernel never writes.  The output is the first `size` values of that stream
    (cells run into each other); a stream that falls short leaves the rest unwritten (uninitialised
    memory in OpenVINO), 0 here."""
    stream = boxes.reshape(-1).astype(np.float32)
    flat = stream[:size] if stream.size >= size else np.concatenate([stream, np.zeros(size - stream.size, np.float32)])
    if clip:
        flat = np.clip(flat, np.float32(0), np.float32(1))
    return np.stack([flat, _variance_row(variance, flat.size // 4)])


# ---------------------------------------------------------------- Proposal

def _proposal_anchors(attrs) -> np.ndarray:
    """(A, 4) anchors x0, y0, x1, y1 around the origin, ratio-major."""
    tensorflow = attrs.framework == "tensorflow"
    offset = np.float32(0 if tensorflow else 1)
    base = np.float32(attrs.base_size)
    centre = np.float32(0.5) * (base - offset)
    ratios = np.asarray(attrs.ratio, np.float32)
    scales = np.asarray(attrs.scale, np.float32)
    width = np.sqrt(base * base / ratios)
    if not tensorflow:
        width = np.round(width)                      # roundf: halves away from zero, widths are >= 0
    height = width * ratios
    if not tensorflow:
        height = np.round(height)
    half_w = np.float32(0.5) * (width[:, None] * scales[None, :] - offset)
    half_h = np.float32(0.5) * (height[:, None] * scales[None, :] - offset)
    anchors = np.stack([centre - half_w, centre - half_h, centre + half_w, centre + half_h], -1).reshape(-1, 4)
    if tensorflow:
        anchors = anchors - base * np.float32(0.5)
    return anchors.astype(np.float32)


def _proposal_iou(box: np.ndarray, rest: np.ndarray, offset: np.float32) -> np.ndarray:
    """IoU of one [x0, y0, x1, y1] box with others, sides counting `offset` extra pixels; 0 without overlap."""
    overlap = (box[0] <= rest[:, 2]) & (box[1] <= rest[:, 3]) & (rest[:, 0] <= box[2]) & (rest[:, 1] <= box[3])
    width = np.maximum(np.minimum(box[2], rest[:, 2]) - np.maximum(box[0], rest[:, 0]) + offset, 0)
    height = np.maximum(np.minimum(box[3], rest[:, 3]) - np.maximum(box[1], rest[:, 1]) + offset, 0)
    inter = width * height
    area = (box[2] - box[0] + offset) * (box[3] - box[1] + offset)
    areas = (rest[:, 2] - rest[:, 0] + offset) * (rest[:, 3] - rest[:, 1] + offset)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(overlap, inter / (area + areas - inter), np.float32(0))


def _proposal_nms(boxes: np.ndarray, threshold: float, limit: int, offset: np.float32) -> list[int]:
    """Greedy NMS over boxes already sorted by score; drops later boxes with IoU > threshold.
    The CPU plugin counts before comparing with the limit, so a limit of 0 keeps every survivor."""
    return _greedy(np.arange(len(boxes)), limit if limit > 0 else len(boxes),
                   lambda best, rest: np.float32(threshold) < _proposal_iou(boxes[best], boxes[rest], offset))


@register("Proposal", 1, 4)
class Proposal(Op):
    def spatial_rank(self, inputs):
        return None

    def infer(self, inputs):
        probs, deltas, image = inputs
        _check_rank(probs, 4, "class_probs")
        _check_rank(deltas, 4, "bbox_deltas")
        if image.rank not in (None, 1, 2):
            raise ShapeError(f"image_shape must be 1-D, got {format_shape(image.shape)}")
        if image.shape is not None and not any(dims_compatible(image.shape[-1], n) for n in (3, 4)):
            raise ShapeError(f"image_shape must hold 3 or 4 values, got {format_shape(image.shape)}")
        batch = ANY
        if probs.shape is not None:
            batch = probs.shape[0]
        if deltas.shape is not None:
            batch = _merge(batch, deltas.shape[0], f"class_probs {format_shape(probs.shape)} and bbox_deltas "
                           f"{format_shape(deltas.shape)} differ in the batch dimension")
            if probs.shape is not None:
                for axis in (2, 3):
                    _merge(probs.shape[axis], deltas.shape[axis], f"class_probs {format_shape(probs.shape)} and "
                           f"bbox_deltas {format_shape(deltas.shape)} differ in the spatial dimensions")
        post = self.attrs.post_nms_topn
        rows = batch * post if isinstance(batch, int) else make_dim(dim_bounds(batch)[0] * post, None
                                                                   if dim_bounds(batch)[1] is None
                                                                   else dim_bounds(batch)[1] * post)
        notes = {0: f"batch * post_nms_topn ({post})"}
        out = [TensorType((rows, 5), probs.etype, notes=notes)]
        if self.version == 4:
            out.append(TensorType((rows,), probs.etype, notes=notes))
        return out

    def run(self, class_probs, bbox_deltas, image_shape):
        a = self.attrs
        dtype = class_probs.dtype
        probs, deltas = class_probs.astype(np.float32), bbox_deltas.astype(np.float32)
        image = image_shape.astype(np.float32).reshape(-1)
        tensorflow = a.framework == "tensorflow"
        # The CPU plugin reads the image size as (width, height) for TensorFlow (the reference does not).
        img_h, img_w = (image[1], image[0]) if tensorflow else (image[0], image[1])
        scale_h = image[2]
        scale_w = image[3] if image.size > 3 else scale_h
        min_h, min_w = np.float32(a.min_size) * scale_h, np.float32(a.min_size) * scale_w
        batches, channels, h, w = probs.shape
        anchors = _proposal_anchors(a)
        count = channels // 2
        offset = np.float32(0 if tensorflow else 1)
        stride = np.float32(a.feat_stride)
        ys, xs = np.meshgrid(np.arange(h, dtype=np.float32), np.arange(w, dtype=np.float32), indexing="ij")
        shift_x, shift_y = (ys, xs) if tensorflow else (xs, ys)
        post = a.post_nms_topn
        rois = np.zeros((batches, post, 5), np.float32)
        scores_out = np.zeros((batches, post), np.float32)
        for b in range(batches):
            # (H, W, A): proposals are numbered (h * W + w) * A + anchor
            base = np.stack([shift_x * stride, shift_y * stride], -1)[:, :, None, :]
            x0, y0 = base[..., 0] + anchors[:, 0], base[..., 1] + anchors[:, 1]
            x1, y1 = base[..., 0] + anchors[:, 2], base[..., 1] + anchors[:, 3]
            if tensorflow:
                x0, x1 = np.clip(x0, 0, img_w), np.clip(x1, 0, img_w)
                y0, y1 = np.clip(y0, 0, img_h), np.clip(y1, 0, img_h)
            d = deltas[b].reshape(count, 4, h, w).transpose(2, 3, 0, 1)          # (H, W, A, 4)
            dx, dy = d[..., 0] / np.float32(a.box_coordinate_scale), d[..., 1] / np.float32(a.box_coordinate_scale)
            dw, dh = d[..., 2] / np.float32(a.box_size_scale), d[..., 3] / np.float32(a.box_size_scale)
            ww, hh = x1 - x0 + offset, y1 - y0 + offset
            cx, cy = x0 + np.float32(0.5) * ww, y0 + np.float32(0.5) * hh
            pcx, pcy = dx * ww + cx, dy * hh + cy
            pw, ph = np.exp(dw) * ww, np.exp(dh) * hh
            x0, y0 = pcx - np.float32(0.5) * pw, pcy - np.float32(0.5) * ph
            x1, y1 = pcx + np.float32(0.5) * pw, pcy + np.float32(0.5) * ph
            if a.clip_before_nms:
                x0, x1 = np.clip(x0, 0, img_w - offset), np.clip(x1, 0, img_w - offset)
                y0, y1 = np.clip(y0, 0, img_h - offset), np.clip(y1, 0, img_h - offset)
            big_enough = (min_w <= x1 - x0 + offset) & (min_h <= y1 - y0 + offset)
            score = probs[b, count:].transpose(1, 2, 0) * big_enough
            boxes = np.stack([x0, y0, x1, y1], -1).reshape(-1, 4)
            score = score.reshape(-1)
            order = np.argsort(-score, kind="stable")[:min(a.pre_nms_topn, score.size)]
            keep = order[_proposal_nms(boxes[order], a.nms_thresh, post, offset)]
            kept = boxes[keep]
            if a.clip_after_nms:
                kept = np.clip(kept, 0, np.array([img_w, img_h, img_w, img_h], np.float32))
            if a.normalize:
                kept = kept / np.array([img_w, img_h, img_w, img_h], np.float32)
            rois[b, :len(keep), 0] = b
            rois[b, :len(keep), 1:] = kept
            scores_out[b, :len(keep)] = score[keep]
            if len(keep) < post:
                rois[b, len(keep), 0] = -1          # OpenVINO marks the end of the ROIs
        rois = rois.reshape(-1, 5).astype(dtype)
        if self.version == 1:
            return rois
        return rois, scores_out.reshape(-1).astype(dtype)


# ---------------------------------------------------------------- DetectionOutput

_CODE_TYPES = ("caffe.PriorBoxParameter.CORNER", "caffe.PriorBoxParameter.CENTER_SIZE")


def _jaccard(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Caffe's JaccardOverlap of one [xmin, ymin, xmax, ymax] box with each of `others`."""
    disjoint = ((others[:, 0] > box[2]) | (others[:, 2] < box[0]) | (others[:, 1] > box[3]) | (others[:, 3] < box[1]))
    width = np.minimum(box[2], others[:, 2]) - np.maximum(box[0], others[:, 0])
    height = np.minimum(box[3], others[:, 3]) - np.maximum(box[1], others[:, 1])
    inter = width * height

    def size(b):
        inverted = (b[..., 2] < b[..., 0]) | (b[..., 3] < b[..., 1])
        return np.where(inverted, 0, (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1]))

    with np.errstate(invalid="ignore", divide="ignore"):
        iou = inter / (size(box) + size(others) - inter)
    return np.where(~disjoint & (width > 0) & (height > 0), iou, 0).astype(others.dtype)


def _greedy_keep(boxes: np.ndarray, order: np.ndarray, threshold: float) -> list[int]:
    """Caffe NMS over candidates in `order`: keep one unless it overlaps a kept box by more than threshold."""
    return _greedy(order, len(order), lambda best, rest: _jaccard(boxes[best], boxes[rest]) > threshold)


@register("DetectionOutput", 1, 8)
class DetectionOutput(Op):
    def spatial_rank(self, inputs):
        return None

    @property
    def prior_size(self) -> int:
        return 4 if self.attrs.normalized else 5

    def infer(self, inputs):
        a = self.attrs
        if a.code_type not in _CODE_TYPES:
            raise ShapeError(f'code_type must be one of {", ".join(_CODE_TYPES)}, got "{a.code_type}"')
        if not a.keep_top_k:
            raise ShapeError("keep_top_k must have a value")
        loc, conf, priors = inputs[:3]
        _check_rank(loc, 2, "box_logits")
        _check_rank(conf, 2, "class_preds")
        _check_rank(priors, 3, "proposals")
        images = loc.shape[0] if loc.shape is not None else ANY
        num_priors = None
        if priors.shape is not None and isinstance(priors.shape[2], int):
            if priors.shape[2] % self.prior_size:
                raise ShapeError(f"proposals {format_shape(priors.shape)}: the last dimension is not a multiple of "
                                 f"{self.prior_size} (the prior size with normalized={str(a.normalized).lower()})")
            num_priors = priors.shape[2] // self.prior_size
        classes = a.num_classes if self.version == 1 else None
        if classes is None and num_priors and conf.shape is not None and isinstance(conf.shape[1], int):
            classes = conf.shape[1] // num_priors
        if num_priors is not None and classes is not None:
            self._check_inputs(inputs, num_priors, classes)
        per_image = self._detections_per_image(num_priors, classes)
        if per_image is None:
            return [TensorType((1, 1, ANY, 7), loc.etype)]
        count, why = per_image
        rows = images * count if isinstance(images, int) else \
            make_dim(dim_bounds(images)[0] * count, None if dim_bounds(images)[1] is None
                     else dim_bounds(images)[1] * count)
        return [TensorType((1, 1, rows, 7), loc.etype, notes={2: f"images * {why}"})]

    def _detections_per_image(self, num_priors, classes) -> tuple[int, str] | None:
        """Output rows per image, as OpenVINO's shape inference counts them."""
        a = self.attrs
        if a.keep_top_k[0] > 0:
            return a.keep_top_k[0], f"keep_top_k ({a.keep_top_k[0]})"
        if classes is None:
            return None
        if a.top_k > 0:
            return a.top_k * classes, f"top_k ({a.top_k}) * classes ({classes})"
        if num_priors is None:
            return None
        return num_priors * classes, f"priors ({num_priors}) * classes ({classes})"

    def _check_inputs(self, inputs, num_priors: int, classes: int) -> None:
        loc_classes = 1 if self.attrs.share_location else classes
        expected = {0: num_priors * loc_classes * 4, 1: num_priors * classes}
        if len(inputs) > 3:
            expected[3] = num_priors * 2
        if len(inputs) > 4:
            expected[4] = num_priors * loc_classes * 4
        names = ("box_logits", "class_preds", "proposals", "aux_class_preds", "aux_box_preds")
        for i, size in expected.items():
            t = inputs[i]
            if t.shape is not None and not dims_compatible(t.shape[1], size):
                raise ShapeError(f"{names[i]} {format_shape(t.shape)}: dimension 1 must be {size} "
                                 f"({num_priors} priors, {classes} classes)")

    # -- decoding

    def _decode(self, priors: np.ndarray, variances: np.ndarray | None, loc: np.ndarray) -> np.ndarray:
        """Boxes (..., 4) from priors (P, 4) and predictions loc (..., P, 4)."""
        a = self.attrs
        if not a.normalized:
            priors = priors / np.array([a.input_width, a.input_height] * 2, priors.dtype)
        if variances is not None:
            loc = loc * variances
        if a.code_type.endswith("CORNER"):
            boxes = priors + loc
        else:
            width, height = priors[:, 2] - priors[:, 0], priors[:, 3] - priors[:, 1]
            cx, cy = (priors[:, 0] + priors[:, 2]) / 2, (priors[:, 1] + priors[:, 3]) / 2
            new_cx, new_cy = loc[..., 0] * width + cx, loc[..., 1] * height + cy
            new_w, new_h = np.exp(loc[..., 2]) * width, np.exp(loc[..., 3]) * height
            boxes = np.stack([new_cx - new_w / 2, new_cy - new_h / 2, new_cx + new_w / 2, new_cy + new_h / 2], -1)
        if a.clip_before_nms:
            boxes = np.clip(boxes, 0, 1)
        return boxes.astype(np.float32)

    def _priors(self, priors: np.ndarray, image: int):
        """Prior boxes (P, 4) and variances (P, 4) or None for one image."""
        item = priors[min(image, priors.shape[0] - 1)].reshape(-1).astype(np.float32)
        size, offset = self.prior_size, 0 if self.attrs.normalized else 1
        count = priors.shape[2] // size
        boxes = item[:count * size].reshape(count, size)[:, offset:offset + 4]
        if self.attrs.variance_encoded_in_target:
            return boxes, None
        return boxes, item[count * size:count * size + count * 4].reshape(count, 4)

    # -- selection

    def _caffe_nms(self, boxes, scores) -> dict[int, list[int]]:
        a = self.attrs
        chosen = {}
        for c in range(scores.shape[1]):
            if c == a.background_label_id:
                continue
            class_scores = scores[:, c]
            order = _by_score(class_scores, np.flatnonzero(class_scores > np.float32(a.confidence_threshold)))
            if a.top_k > -1:
                order = order[:a.top_k]
            chosen[c] = _greedy_keep(boxes[-1 if a.share_location else c], order, a.nms_threshold)
        return chosen

    def _mxnet_nms(self, boxes, scores) -> dict[int, list[int]]:
        """One class per prior (the best non-background one), then NMS within each class."""
        a = self.attrs
        usable = scores.copy()
        usable[:, 0] = -np.inf
        if a.background_label_id > -1:
            usable[:, a.background_label_id] = -np.inf
        best = np.argmax(np.where(usable > -1, usable, -np.inf), axis=1)
        best_score = usable[np.arange(len(usable)), best]
        ok = (best > 0) & (best_score > -1) & (best_score >= np.float32(a.confidence_threshold))
        order = _by_score(best_score, np.flatnonzero(ok))
        if a.top_k != -1:
            order = order[:a.top_k]
        chosen: dict[int, list[int]] = {}
        for c in np.unique(best[order]):
            in_class = order[best[order] == c]
            chosen[int(c)] = _greedy_keep(boxes[-1 if a.share_location else c], in_class, a.nms_threshold)
        return chosen

    def _keep_top(self, chosen: dict[int, list[int]], scores) -> dict[int, list[int]]:
        keep = self.attrs.keep_top_k[0]
        total = sum(len(v) for v in chosen.values())
        if keep <= -1 or total <= keep:
            return chosen
        pairs = [(label, idx) for label, indices in chosen.items() for idx in indices]
        pairs.sort(key=lambda p: (-scores[p[1], p[0]], p[1]))
        kept: dict[int, list[int]] = {}
        for label, idx in pairs[:keep]:
            kept.setdefault(label, []).append(idx)
        return kept

    def run(self, box_logits, class_preds, proposals, aux_class_preds=None, aux_box_preds=None):
        a = self.attrs
        images = box_logits.shape[0]
        num_priors = proposals.shape[2] // self.prior_size
        classes = a.num_classes if self.version == 1 else class_preds.shape[1] // num_priors
        loc_classes = 1 if a.share_location else classes
        loc = box_logits.astype(np.float32).reshape(images, num_priors, loc_classes, 4)
        conf = class_preds.astype(np.float32).reshape(images, num_priors, classes)
        rows_total = images * self._detections_per_image(num_priors, classes)[0]
        out = np.zeros((rows_total, 7), np.float32)
        cascade = aux_class_preds is not None and aux_box_preds is not None
        count = 0
        for i in range(images):
            prior_boxes, variances = self._priors(proposals, i)
            scores = conf[i]
            if cascade:
                objectness = aux_class_preds[i].astype(np.float32).reshape(num_priors, 2)[:, 1]
                background = np.zeros(classes, np.float32)
                if 0 <= a.background_label_id < classes:
                    background[a.background_label_id] = 1
                scores = np.where((objectness < np.float32(a.objectness_score))[:, None], background, scores)
                arm = aux_box_preds[i].astype(np.float32).reshape(num_priors, loc_classes, 4)
            boxes = {}
            for c in range(loc_classes):
                label = -1 if a.share_location else c
                if a.background_label_id > -1 and label == a.background_label_id:
                    continue
                base = self._decode(prior_boxes, variances, arm[:, c]) if cascade else prior_boxes
                boxes[label] = self._decode(base, variances, loc[i, :, c])
            chosen = self._mxnet_nms(boxes, scores) if a.decrease_label_id else self._caffe_nms(boxes, scores)
            for label, indices in sorted(self._keep_top(chosen, scores).items()):
                decoded = boxes[-1 if a.share_location else label][indices]
                if a.clip_after_nms:
                    decoded = np.clip(decoded, 0, 1)
                n = len(indices)
                out[count:count + n, 0] = i
                out[count:count + n, 1] = label - 1 if a.decrease_label_id else label
                out[count:count + n, 2] = scores[indices, label]
                out[count:count + n, 3:] = decoded
                count += n
        if count < rows_total:
            out[count, 0] = -1
        return out.reshape(1, 1, rows_total, 7).astype(box_logits.dtype)


# ---------------------------------------------------------------- YOLO heads: RegionYolo and ReorgYolo

def _logistic(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)) in f32, without overflow for large |x|."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, np.float32(1) / (np.float32(1) + e), e / (np.float32(1) + e)).astype(np.float32)


@register("RegionYolo", 1)
class RegionYolo(Op):
    """Logistic on the box centres and scores of every region, softmax over classes (YOLO v2).

    The CPU plugin works on the flat buffer: region r of image b starts at
    (b * regions + r) * (coords + classes + 1) * H * W.  Without do_softmax (YOLO v3)
    the output is the first len(mask) regions' worth of each image, read from
    that flat layout."""

    def spatial_rank(self, inputs):
        return None

    @property
    def entry(self) -> int:
        return self.attrs.coords + self.attrs.classes + 1

    @property
    def regions(self) -> int:
        return self.attrs.num if self.attrs.do_softmax else len(self.attrs.mask)

    def infer(self, inputs):
        data = inputs[0]
        _check_rank(data, 4, "data")
        if not data.etype.is_float and data.etype is not etypes.dynamic:
            raise ShapeError(f"data must be floating point, got {data.etype}")
        if data.shape is None:
            return [TensorType(None, data.etype)]
        a = self.attrs
        if not a.do_softmax:
            channels = self.entry * len(a.mask)
            why = f"(coords {a.coords} + classes {a.classes} + 1) * {len(a.mask)} mask entries"
            return [TensorType((data.shape[0], channels, *data.shape[2:]), data.etype, notes={1: why})]
        axis = normalize_axis(a.axis, 4, "axis")
        end = normalize_axis(a.end_axis, 4, "end_axis")
        merged = 1
        for d in data.shape[axis:max(end, axis) + 1]:
            merged = dim_mul(merged, d)
        shape = data.shape[:axis] + (merged,) + data.shape[max(end + 1, axis + 1):]
        return [TensorType(shape, data.etype, notes={axis: f"dims {axis}..{end} flattened (do_softmax)"})]

    def run(self, data):
        a = self.attrs
        batch, _, h, w = data.shape
        flat = data.astype(np.float32).reshape(-1)
        area, regions = h * w, self.regions
        used = batch * regions * self.entry * area
        if used > flat.size:
            raise ModelError(f"RegionYolo reads {batch} x {regions} regions of {self.entry} x {h} x {w} values, "
                             f"more than the {flat.size} of input {list(data.shape)}")
        out = flat[:flat.size if a.do_softmax else used].copy()
        blocks = out[:used].reshape(batch * regions, self.entry, area)
        blocks[:, :2] = _logistic(blocks[:, :2])
        scored = 1 if a.do_softmax else a.classes + 1          # objectness (and class scores in v3)
        blocks[:, a.coords:a.coords + scored] = _logistic(blocks[:, a.coords:a.coords + scored])
        if a.do_softmax:
            logits = flat[:used].reshape(batch * regions, self.entry, area)[:, a.coords + 1:a.coords + 1 + a.classes]
            e = np.exp(logits - logits.max(axis=1, keepdims=True))
            blocks[:, a.coords + 1:a.coords + 1 + a.classes] = e / e.sum(axis=1, keepdims=True)
        shape = self.infer([TensorType(data.shape, etypes.from_dtype(data.dtype))])[0].shape
        return out.reshape(shape).astype(data.dtype)


@register("ReorgYolo", 2)
class ReorgYolo(Op):
    """[N, C, H, W] -> [N, C * s * s, H / s, W / s] with darknet's reorg index arithmetic."""

    def spatial_rank(self, inputs):
        return None

    @property
    def stride(self) -> int:
        return self.attrs.stride[0]

    def infer(self, inputs):
        data = inputs[0]
        s = self.stride
        if s < 1:
            raise ShapeError(f"stride must be positive, got {s}")
        _check_rank(data, 4, "data")
        if data.shape is None:
            return [TensorType(None, data.etype)]
        n, c, h, w = data.shape
        if isinstance(c, int) and c < s * s:
            raise ShapeError(f"data {format_shape(data.shape)}: C must be >= stride * stride = {s * s}")
        spatial = []
        for axis, d in ((2, h), (3, w)):
            lo, hi = dim_bounds(d)
            if isinstance(d, int) and d % s:
                raise ShapeError(f"data {format_shape(data.shape)}: dimension {axis} is not divisible by "
                                 f"stride {s}")
            spatial.append(make_dim(-(-lo // s), None if hi is None else hi // s))
        return [TensorType((n, dim_mul(c, s * s), *spatial), data.etype,
                           notes={1: f"C * stride^2 ({s * s})", 2: f"H / {s}", 3: f"W / {s}"})]

    def run(self, data):
        s = self.stride
        n, c, h, w = data.shape
        if c % (s * s) or h % s or w % s:
            raise ModelError(f"ReorgYolo with stride {s} needs C divisible by {s * s} and H, W by {s}, "
                             f"got {list(data.shape)}")
        groups = c // (s * s)
        # Read as [N, C / s^2, H * s, W * s]; output channel (dy * s + dx) * C / s^2 + c' at (y, x)
        # takes element (c', y * s + dy, x * s + dx).
        view = data.reshape(n, groups, h, s, w, s)
        return view.transpose(0, 3, 5, 1, 2, 4).reshape(n, c * s * s, h // s, w // s)


# ---------------------------------------------------------------- ROIPooling, PSROIPooling, DeformablePSROIPooling
# ROIs are rows [batch_id, x1, y1, x2, y2].  The CPU plugin stops at the first ROI whose
# batch_id is -1 and writes 0 for it and every ROI after it.

def _roi_batches(rois: np.ndarray, batches: int) -> np.ndarray:
    """Batch index of each ROI before the first one marked -1."""
    batch = np.trunc(rois[:, 0].astype(np.float64))
    ends = np.flatnonzero(batch == -1)
    batch = batch[:ends[0] if ends.size else len(batch)].astype(np.int64)
    bad = (batch < 0) | (batch >= batches)
    if bad.any():
        raise ModelError(f"ROI batch ids must be in [0, {batches}) (or -1 to end the list), got "
                         f"{batch[bad].tolist()}")
    return batch


def _check_roi_tuples(data: TensorType, rois: TensorType) -> None:
    _check_rank(data, 4, "data")
    _check_rank(rois, 2, "rois")
    _check_dim(rois, 1, 5, "rois [batch_id, x1, y1, x2, y2]")
    for t, what in ((data, "data"), (rois, "rois")):
        if not t.etype.is_float and t.etype is not etypes.dynamic:
            raise ShapeError(f"{what} must be floating point, got {t.etype}")


def _bilinear_gather(plane, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Blend of the 4 neighbours of each point (y, x) inside the map (broadcast index arrays), as the
    pooling kernels interpolate: floor and ceil of each coordinate (the same on a grid line), a lerp
    along x, then along y (ROIAlign instead weighs 4 neighbours: `_blend_neighbours`).
    `plane(y_index, x_index)` gathers values, possibly with trailing axes (channels)."""
    top, left = np.floor(y), np.floor(x)
    fy, fx = (y - top).astype(np.float32), (x - left).astype(np.float32)
    top, left = top.astype(np.int64), left.astype(np.int64)
    bottom, right = np.ceil(y).astype(np.int64), np.ceil(x).astype(np.int64)
    top_left = plane(top, left)
    trailing = (1,) * (top_left.ndim - np.broadcast(y, x).ndim)
    fy, fx = fy.reshape(fy.shape + trailing), fx.reshape(fx.shape + trailing)
    upper = top_left + (plane(top, right) - top_left) * fx
    bottom_left = plane(bottom, left)
    lower = bottom_left + (plane(bottom, right) - bottom_left) * fx
    return upper + (lower - upper) * fy


@register("ROIPooling", 2)
class ROIPooling(Op):
    """Max over integer bins of each ROI, or one bilinear sample per bin of a normalized ROI."""

    def spatial_rank(self, inputs):
        return None

    def pooled_size(self) -> tuple[int, int]:
        """OpenVINO reads output_size, then pooled_h and pooled_w replace its two entries."""
        a = self.attrs
        size = list(a.output_size) if a.output_size else [0, 0]
        for i, value in enumerate((a.pooled_h, a.pooled_w)):
            if value is not None and i < len(size):
                size[i] = value
        if len(size) != 2 or min(size) < 1:
            raise ShapeError(f"the pooled size (output_size / pooled_h, pooled_w) must be 2 positive values, "
                             f"got {size}")
        return size[0], size[1]

    def infer(self, inputs):
        data, rois = inputs
        _check_roi_tuples(data, rois)
        scale = self.attrs.spatial_scale
        if not (math.isfinite(scale) and scale > 0):
            raise ShapeError(f"spatial_scale must be a positive number, got {scale}")
        ph, pw = self.pooled_size()
        num_rois = ANY if rois.shape is None else rois.shape[0]
        channels = ANY if data.shape is None else data.shape[1]
        return [TensorType((num_rois, channels, ph, pw), data.etype)]

    def run(self, data, rois):
        ph, pw = self.pooled_size()
        features, boxes = data.astype(np.float32), rois.astype(np.float32)
        batch = _roi_batches(boxes, data.shape[0])
        out = np.zeros((len(rois), data.shape[1], ph, pw), np.float32)
        real = slice(0, len(batch))
        if self.attrs.method == "max":
            out[real] = self._max(features, boxes[real], batch, ph, pw)
        else:
            out[real] = self._bilinear(features, boxes[real], batch, ph, pw)
        return out.astype(data.dtype)

    def _max(self, features, boxes, batch, ph, pw):
        _, c, h, w = features.shape
        start_w, start_h, end_w, end_h = round_half_away(boxes[:, 1:] * np.float32(self.attrs.spatial_scale)) \
            .astype(np.int64).T

        def bins(start, end, pooled, size):
            extent = np.maximum(end - start + 1, 1)[:, None]
            k = np.arange(pooled)[None, :]
            first = (k * extent) // pooled + start[:, None]
            last = -(-((k + 1) * extent) // pooled) + start[:, None]
            return np.clip(first, 0, size), np.clip(last, 0, size)

        h0, h1 = bins(start_h, end_h, ph, h)
        w0, w1 = bins(start_w, end_w, pw, w)
        rows, cols = np.arange(h), np.arange(w)
        out = np.zeros((len(boxes), c, ph, pw), np.float32)
        for r in range(len(boxes)):
            in_row = (rows[None, :] >= h0[r][:, None]) & (rows[None, :] < h1[r][:, None])     # (PH, H)
            in_col = (cols[None, :] >= w0[r][:, None]) & (cols[None, :] < w1[r][:, None])     # (PW, W)
            # Separable max: over each bin's columns, then over its rows; empty bins give 0.
            across = np.where(in_col, features[batch[r], :, :, None, :], -np.inf).max(axis=-1)        # (C, H, PW)
            pooled = np.where(in_row[:, :, None], across[:, None, :, :], -np.inf).max(axis=2)      # (C, PH, PW)
            empty = (h1[r] <= h0[r])[:, None] | (w1[r] <= w0[r])[None, :]
            out[r] = np.where(empty, np.float32(0), pooled)
        return out

    @staticmethod
    def _sample_positions(start, end, pooled: int, size: int) -> np.ndarray:
        """(R, pooled) positions along one axis of normalized ROIs; the last bin sits on the ROI end."""
        span = np.float32(size - 1)
        if pooled == 1:
            return (np.float32(0.5) * (start + end) * span)[:, None].astype(np.float32)
        step = (end - start) * span / np.float32(pooled - 1)
        pos = np.arange(pooled, dtype=np.float32)[None, :] * step[:, None] + (start * span)[:, None]
        pos[:, -1] = end * span
        return pos.astype(np.float32)

    def _bilinear(self, features, boxes, batch, ph, pw):
        _, c, h, w = features.shape
        ys = self._sample_positions(boxes[:, 2], boxes[:, 4], ph, h)       # (R, PH)
        xs = self._sample_positions(boxes[:, 1], boxes[:, 3], pw, w)       # (R, PW)
        inside = ((ys >= 0) & (ys <= h - 1))[:, :, None] & ((xs >= 0) & (xs <= w - 1))[:, None, :]
        y = np.clip(ys, 0, h - 1)[:, :, None]
        x = np.clip(xs, 0, w - 1)[:, None, :]
        b = batch[:, None, None]
        value = _bilinear_gather(lambda yi, xi: features[b, :, yi, xi], y, x)          # (R, PH, PW, C)
        return np.where(inside[..., None], value, np.float32(0)).transpose(0, 3, 1, 2)


class _PositionSensitivePooling(Op):
    """Shared by PSROIPooling and DeformablePSROIPooling: output [ROIs, output_dim, group_size, group_size]."""

    def spatial_rank(self, inputs):
        return None

    def check_attributes(self) -> None:
        a = self.attrs
        if a.output_dim < 1 or a.group_size < 1:
            raise ShapeError(f"output_dim ({a.output_dim}) and group_size ({a.group_size}) must be positive")

    def infer(self, inputs):
        data, rois = inputs[:2]
        self.check_attributes()
        _check_roi_tuples(data, rois)
        a = self.attrs
        num_rois = ANY if rois.shape is None else rois.shape[0]
        return [TensorType((num_rois, a.output_dim, a.group_size, a.group_size), data.etype,
                           notes={1: "output_dim", 2: "group_size", 3: "group_size"})]

    def run(self, data, rois, offsets=None):
        features, boxes = data.astype(np.float32), rois.astype(np.float32)
        batch = _roi_batches(boxes, data.shape[0])
        g = self.attrs.group_size
        out = np.zeros((len(rois), self.attrs.output_dim, g, g), np.float32)
        if len(batch):
            out[:len(batch)] = self.pool(features, boxes[:len(batch)], batch,
                                         None if offsets is None else offsets.astype(np.float32))
        return out.astype(data.dtype)

    def pool(self, features, boxes, batch, offsets):
        raise NotImplementedError


@register("PSROIPooling", 1)
class PSROIPooling(_PositionSensitivePooling):
    """average: bin (i, j) of output channel c averages input channel (c * G + i) * G + j over
    integer bins of the rounded ROI; bilinear: sub-bin (y, x) of a normalized ROI is read from
    channel c + (y * bins_x + x) * output_dim, one bilinear sample per output cell."""

    def check_attributes(self) -> None:
        super().check_attributes()
        a = self.attrs
        if not (math.isfinite(a.spatial_scale) and a.spatial_scale > 0):
            raise ShapeError(f"spatial_scale must be a positive number, got {a.spatial_scale}")
        if a.mode == "bilinear" and (a.spatial_bins_x < 1 or a.spatial_bins_y < 1):
            raise ShapeError(f"spatial_bins_x ({a.spatial_bins_x}) and spatial_bins_y ({a.spatial_bins_y}) "
                             f"must be positive in bilinear mode")

    def infer(self, inputs):
        out = super().infer(inputs)
        a, data = self.attrs, inputs[0]
        if a.mode == "average":
            per_output, why = a.group_size ** 2, f"group_size^2 ({a.group_size ** 2})"
        else:
            per_output, why = a.spatial_bins_x * a.spatial_bins_y, \
                f"spatial_bins_x * spatial_bins_y ({a.spatial_bins_x * a.spatial_bins_y})"
        if data.shape is not None and not dims_compatible(data.shape[1], per_output * a.output_dim):
            raise ShapeError(f"data {format_shape(data.shape)} has {data.shape[1]} channels; {a.mode} mode needs "
                             f"output_dim ({a.output_dim}) * {why} = {per_output * a.output_dim}")
        return out

    def pool(self, features, boxes, batch, offsets):
        return self._average(features, boxes, batch) if self.attrs.mode == "average" \
            else self._bilinear(features, boxes, batch)

    def _average(self, features, boxes, batch):
        a = self.attrs
        _, _, h, w = features.shape
        g, scale = a.group_size, np.float32(a.spatial_scale)
        rounded = round_half_away(boxes[:, 1:3]).astype(np.float32)
        start_w, start_h = (rounded * scale).T
        end_w, end_h = (round_half_away(boxes[:, 3:5] + np.float32(1)).astype(np.float32) * scale).T
        cells = np.arange(g, dtype=np.float32)[None, :]

        def bins(start, end, size):
            extent = np.maximum(end - start, np.float32(0.1))
            step = (extent / np.float32(g))[:, None]
            first = np.floor(cells * step + start[:, None])
            last = np.ceil((cells + np.float32(1)) * step + start[:, None])
            return np.clip(first, 0, size).astype(np.int64), np.clip(last, 0, size).astype(np.int64)

        h0, h1 = bins(start_h, end_h, h)            # (R, G)
        w0, w1 = bins(start_w, end_w, w)
        # Bin sums from a summed-area table: S[y, x] = sum of the map above and left of (y, x).
        table = np.zeros(features.shape[:2] + (h + 1, w + 1))
        table[:, :, 1:, 1:] = features.astype(np.float64).cumsum(2).cumsum(3)
        c = np.arange(a.output_dim)[None, :, None, None]
        i, j = np.arange(g)[None, None, :, None], np.arange(g)[None, None, None, :]
        channel = (c * g + i) * g + j                                       # (1, C, G, G)
        b = batch[:, None, None, None]
        y0, y1 = h0[:, None, :, None], h1[:, None, :, None]
        x0, x1 = w0[:, None, None, :], w1[:, None, None, :]
        total = table[b, channel, y1, x1] - table[b, channel, y0, x1] - table[b, channel, y1, x0] \
            + table[b, channel, y0, x0]
        area = (y1 - y0) * (x1 - x0)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(area > 0, total / area, 0).astype(np.float32)

    def _bilinear(self, features, boxes, batch):
        a = self.attrs
        _, _, h, w = features.shape
        g, scale = a.group_size, np.float32(a.spatial_scale)
        bins_x, bins_y = a.spatial_bins_x, a.spatial_bins_y
        start_w, start_h, end_w, end_h = (boxes[:, 1:] * scale).T

        def positions(start, end, bins, size):
            """(R, bins, G) sample positions: bin k of the ROI mapped onto the whole map."""
            k = np.arange(bins, dtype=np.float32)[None, :]
            part = ((end - start) / np.float32(bins))[:, None]
            low, high = start[:, None] + k * part, start[:, None] + (k + np.float32(1)) * part
            span = np.float32(size - 1)
            if g == 1:
                return (np.float32(0.5) * (low + high) * span)[:, :, None]
            step = (high - low) * span / np.float32(g - 1)
            return np.arange(g, dtype=np.float32)[None, None, :] * step[:, :, None] + (low * span)[:, :, None]

        ys = positions(start_h, end_h, bins_y, h)[:, None, :, None, :, None]      # (R, 1, BY, 1, G, 1)
        xs = positions(start_w, end_w, bins_x, w)[:, None, None, :, None, :]      # (R, 1, 1, BX, 1, G)
        inside = (ys >= 0) & (ys <= h - 1) & (xs >= 0) & (xs <= w - 1)
        c = np.arange(a.output_dim)[None, :, None, None, None, None]
        by, bx = np.arange(bins_y)[:, None, None, None], np.arange(bins_x)[None, :, None, None]
        channel = c + (by * bins_x + bx) * a.output_dim                        # (1, C, BY, BX, 1, 1)
        b = batch[:, None, None, None, None, None]
        y, x = np.clip(ys, 0, h - 1), np.clip(xs, 0, w - 1)
        value = _bilinear_gather(lambda yi, xi: features[b, channel, yi, xi], y, x)
        value = np.where(inside, value, np.float32(0))
        return (value.sum(axis=(2, 3), dtype=np.float32) / np.float32(bins_x * bins_y)).astype(np.float32)


@register("DeformablePSROIPooling", 1)
class DeformablePSROIPooling(_PositionSensitivePooling):
    """Average of spatial_bins_y x spatial_bins_x bilinear samples per bin of the rounded ROI,
    each bin shifted by trans_std * offset * ROI size (offsets [ROIs, 2 * classes, part, part])."""

    def infer(self, inputs):
        if len(inputs) > 2:
            _check_rank(inputs[2], 4, "offsets")
        return super().infer(inputs)

    def pool(self, features, boxes, batch, offsets):
        a = self.attrs
        _, channels, h, w = features.shape
        g, scale = a.group_size, np.float32(a.spatial_scale)
        half = np.float32(0.5)
        x1, y1 = (round_half_away(boxes[:, 1:3]).astype(np.float32) * scale - half).T
        x2, y2 = ((round_half_away(boxes[:, 3:5]).astype(np.float32) + np.float32(1)) * scale - half).T
        roi_w, roi_h = np.maximum(x2 - x1, np.float32(0.1)), np.maximum(y2 - y1, np.float32(0.1))
        bin_w, bin_h = roi_w / np.float32(g), roi_h / np.float32(g)
        r = np.arange(len(boxes))[:, None, None, None]
        c = np.arange(a.output_dim)[None, :, None, None]
        i, j = np.arange(g)[None, None, :, None], np.arange(g)[None, None, None, :]
        shift_x = shift_y = np.float32(0)
        if offsets is not None:
            classes = offsets.shape[1] // 2
            cls = c // (a.output_dim // classes)
            part_i, part_j = i * a.part_size // g, j * a.part_size // g
            std = np.float32(a.trans_std)
            shift_x = offsets[r, 2 * cls, part_i, part_j] * std * roi_w[:, None, None, None]
            shift_y = offsets[r, 2 * cls + 1, part_i, part_j] * std * roi_h[:, None, None, None]
        # Bin corners (R, C, G, G), then sub-bin samples (..., BY, BX).
        x0 = j.astype(np.float32) * bin_w[:, None, None, None] + x1[:, None, None, None] + shift_x
        y0 = i.astype(np.float32) * bin_h[:, None, None, None] + y1[:, None, None, None] + shift_y
        sub_x = np.arange(a.spatial_bins_x, dtype=np.float32)[None, :] * (bin_w / np.float32(a.spatial_bins_x))[:, None]
        sub_y = np.arange(a.spatial_bins_y, dtype=np.float32)[None, :] * (bin_h / np.float32(a.spatial_bins_y))[:, None]
        xs = x0[..., None, None] + sub_x[:, None, None, None, None, :]
        ys = y0[..., None, None] + sub_y[:, None, None, None, :, None]
        inside = (xs >= -0.5) & (xs <= w - 0.5) & (ys >= -0.5) & (ys <= h - 0.5)
        xs, ys = np.clip(xs, 0, w - 1), np.clip(ys, 0, h - 1)
        channel = ((c * g + i) * g + j)[..., None, None]
        b = batch[:, None, None, None, None, None]
        value = _bilinear_gather(lambda yi, xi: features[b, channel, yi, xi], ys, xs)
        count = inside.sum(axis=(-2, -1))
        total = np.where(inside, value, np.float32(0)).sum(axis=(-2, -1), dtype=np.float32)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(count > 0, total / count.astype(np.float32), np.float32(0)).astype(np.float32)


# ---------------------------------------------------------------- GenerateProposals and the ExperimentalDetectron ops
# As the CPU plugin computes them: box deltas are applied with log sizes capped at
# log(1000 / 16) (max_delta_log_wh for the detection output), proposals are numbered
# (h, w, anchor), ranked by score, and kept by the Proposal NMS (IoU > threshold drops).

_MAX_DELTA_LOG_WH = np.float32(math.log(1000.0 / 16.0))


def _float_like(t: TensorType, what: str) -> None:
    if not t.etype.is_float and t.etype is not etypes.dynamic:
        raise ShapeError(f"{what} must be floating point, got {t.etype}")


def _apply_deltas(boxes, deltas, offset: np.float32, max_log: np.float32):
    """Boxes [..., 4] moved and resized by deltas [..., 4] (dx, dy, d log w, d log h): corners of the result."""
    x0, y0, x1, y1 = (boxes[..., i] for i in range(4))
    ww, hh = x1 - x0 + offset, y1 - y0 + offset
    half = np.float32(0.5)
    ctr_x, ctr_y = x0 + half * ww, y0 + half * hh
    pred_x, pred_y = deltas[..., 0] * ww + ctr_x, deltas[..., 1] * hh + ctr_y
    pred_w = np.exp(np.minimum(deltas[..., 2], max_log)) * ww
    pred_h = np.exp(np.minimum(deltas[..., 3], max_log)) * hh
    return (pred_x - half * pred_w, pred_y - half * pred_h,
            pred_x + half * pred_w - offset, pred_y + half * pred_h - offset)


def _refine_anchors(anchors, deltas, scores, image_h, image_w, min_h, min_w, offset: np.float32):
    """Proposals (H * W * A, 4) numbered (h, w, anchor), their scores, and which are at least min_w x min_h.

    anchors: (H, W, A, 4) in any layout of that size; deltas: (A * 4, H, W); scores: (A, H, W)."""
    count, h, w = scores.shape
    grid = anchors.reshape(h, w, count, 4).astype(np.float32)
    moves = deltas.astype(np.float32).reshape(count, 4, h, w).transpose(2, 3, 0, 1)
    x0, y0, x1, y1 = _apply_deltas(grid, moves, offset, _MAX_DELTA_LOG_WH)
    zero = np.float32(0)
    x0, x1 = (np.maximum(zero, np.minimum(v, image_w - offset)) for v in (x0, x1))
    y0, y1 = (np.maximum(zero, np.minimum(v, image_h - offset)) for v in (y0, y1))
    big_enough = (min_w <= x1 - x0 + offset) & (min_h <= y1 - y0 + offset)
    boxes = np.stack([x0, y0, x1, y1], -1).reshape(-1, 4)
    return boxes, scores.astype(np.float32).transpose(1, 2, 0).reshape(-1), big_enough.reshape(-1)


def _best_proposals(boxes, scores, usable, pre_nms: int, post_nms: int, threshold: float, offset) -> np.ndarray:
    """Indices kept: the pre_nms best by score, those `usable`, then NMS keeping at most post_nms."""
    order = np.argsort(-scores, kind="stable")[:min(pre_nms, len(scores))]
    order = order[usable[order]]
    return order[_proposal_nms(boxes[order], threshold, post_nms, offset)]


@register("GenerateProposals", 9)
class GenerateProposals(Op):
    """Proposals per image from anchors [H, W, A, 4], deltas [N, A * 4, H, W] and scores [N, A, H, W]:
    rois [total, 4], their scores [total] and the count per image [N].  The CPU plugin does not
    implement nms_eta (NMS at a fixed threshold)."""

    def spatial_rank(self, inputs):
        return None

    def infer(self, inputs):
        im_info, anchors, deltas, scores = inputs
        for t, what in zip(inputs, ("im_info", "anchors", "deltas", "scores")):
            _float_like(t, what)
        _check_rank(im_info, 2, "im_info")
        _check_rank(anchors, 4, "anchors")
        _check_rank(deltas, 4, "deltas")
        _check_rank(scores, 4, "scores")
        if im_info.shape is not None and not any(dims_compatible(im_info.shape[1], n) for n in (3, 4)):
            raise ShapeError(f"im_info {format_shape(im_info.shape)} must hold 3 or 4 values per image")
        _check_dim(anchors, 3, 4, "anchors [H, W, A, 4]")
        batches = ANY
        for t in (im_info, deltas, scores):
            if t.shape is not None and dims_compatible(batches, t.shape[0]):
                batches = dim_merge(batches, t.shape[0])
        if deltas.shape is not None and scores.shape is not None:
            why = f"deltas {format_shape(deltas.shape)} and scores {format_shape(scores.shape)}"
            _merge(deltas.shape[0], scores.shape[0], f"{why} differ in the batch dimension")
            _merge(deltas.shape[1], dim_mul(scores.shape[1], 4), f"{why}: deltas must hold 4 values per anchor")
            _merge(deltas.shape[2], scores.shape[2], f"{why} differ in height")
            _merge(deltas.shape[3], scores.shape[3], f"{why} differ in width")
            if im_info.shape is not None:
                _merge(deltas.shape[0], im_info.shape[0], f"{why} and im_info {format_shape(im_info.shape)} "
                       f"differ in the batch dimension")
        if scores.shape is not None and anchors.shape is not None:
            for axis, (a_axis, what) in enumerate(((2, "height"), (3, "width"), (1, "anchor count"))):
                _merge(anchors.shape[axis], scores.shape[a_axis], f"anchors {format_shape(anchors.shape)} and "
                       f"scores {format_shape(scores.shape)} differ in {what}")
        rows = _up_to(dim_mul(batches, self.attrs.post_nms_count))
        notes = {0: f"data-dependent: at most images * post_nms_count ({self.attrs.post_nms_count})"}
        return [TensorType((rows, 4), im_info.etype, notes=notes), TensorType((rows,), im_info.etype, notes=notes),
                TensorType((batches,), self.attrs.roi_num_type)]

    def run(self, im_info, anchors, deltas, scores):
        a = self.attrs
        offset = np.float32(0 if a.normalized else 1)
        info = im_info.astype(np.float32).reshape(len(im_info), -1)
        rois, roi_scores, counts = [], [], []
        for n in range(scores.shape[0]):
            scale_h = info[n, 2] if info.shape[1] > 2 else np.float32(1)
            scale_w = info[n, 3] if info.shape[1] > 3 else scale_h
            min_size = np.float32(a.min_size)
            boxes, box_scores, big_enough = _refine_anchors(anchors, deltas[n], scores[n], info[n, 0], info[n, 1],
                                                            min_size * scale_h, min_size * scale_w, offset)
            kept = _best_proposals(boxes, box_scores, big_enough, a.pre_nms_count, a.post_nms_count,
                                   a.nms_threshold, offset)
            rois.append(boxes[kept])
            roi_scores.append(box_scores[kept])
            counts.append(len(kept))
        dtype = im_info.dtype
        return (np.concatenate(rois).reshape(-1, 4).astype(dtype), np.concatenate(roi_scores).astype(dtype),
                np.array(counts, dtype=a.roi_num_type.carrier))


@register("ExperimentalDetectronGenerateProposalsSingleImage", 6)
class ExperimentalDetectronGenerateProposalsSingleImage(Op):
    """GenerateProposals for one image (im_info [3], anchors [H * W * A, 4], deltas [A * 4, H, W],
    scores [A, H, W]); exactly post_nms_count rows, zero-padded.  As the CPU plugin computes it:
    box sides count one extra pixel when the deltas are applied but not in the NMS, and a proposal
    smaller than min_size scores 0 (ranked last, still eligible)."""

    def spatial_rank(self, inputs):
        return None

    def infer(self, inputs):
        im_info, anchors, deltas, scores = inputs
        for t, what in zip(inputs, ("im_info", "anchors", "deltas", "scores")):
            _float_like(t, what)
        _check_rank(im_info, 1, "im_info")
        _check_dim(im_info, 0, 3, "im_info [height, width, scale]")
        _check_rank(anchors, 2, "anchors")
        _check_dim(anchors, 1, 4, "anchors")
        _check_rank(deltas, 3, "deltas")
        _check_rank(scores, 3, "scores")
        if deltas.shape is not None and scores.shape is not None:
            for axis, what in ((1, "height"), (2, "width")):
                _merge(deltas.shape[axis], scores.shape[axis], f"deltas {format_shape(deltas.shape)} and scores "
                       f"{format_shape(scores.shape)} differ in {what}")
        post = self.attrs.post_nms_count
        return [TensorType((post, 4), im_info.etype), TensorType((post,), im_info.etype)]

    def run(self, im_info, anchors, deltas, scores):
        a = self.attrs
        info = im_info.astype(np.float32).reshape(-1)
        min_size = np.float32(a.min_size)
        boxes, box_scores, big_enough = _refine_anchors(anchors, deltas, scores, info[0], info[1], min_size,
                                                        min_size, np.float32(1))
        box_scores = box_scores * big_enough
        kept = _best_proposals(boxes, box_scores, np.ones(len(boxes), bool), a.pre_nms_count, a.post_nms_count,
                               a.nms_threshold, np.float32(0))
        rois = np.zeros((a.post_nms_count, 4), np.float32)
        roi_scores = np.zeros(a.post_nms_count, np.float32)
        rois[:len(kept)], roi_scores[:len(kept)] = boxes[kept], box_scores[kept]
        return rois.astype(im_info.dtype), roi_scores.astype(im_info.dtype)


def _detectron_overlap(box, size, others, others_size) -> np.ndarray:
    """JaccardOverlap of ExperimentalDetectronDetectionOutput: sides count one extra pixel, box sizes given."""
    disjoint = (others[:, 0] > box[2]) | (others[:, 2] < box[0]) | (others[:, 1] > box[3]) | (others[:, 3] < box[1])
    width = np.minimum(box[2], others[:, 2]) - np.maximum(box[0], others[:, 0]) + np.float32(1)
    height = np.minimum(box[3], others[:, 3]) - np.maximum(box[1], others[:, 1]) + np.float32(1)
    inter = width * height
    with np.errstate(invalid="ignore", divide="ignore"):
        iou = inter / (size + others_size - inter)
    return np.where(disjoint | (width <= 0) | (height <= 0), np.float32(0), iou)


@register("ExperimentalDetectronDetectionOutput", 6)
class ExperimentalDetectronDetectionOutput(Op):
    """Per-class refined boxes from rois [R, 4], deltas [R, classes * 4] and scores [R, classes]; NMS per
    class (except 0), post_nms_count per class, then the max_detections_per_image best.  Outputs are
    zero-padded to max_detections_per_image rows: boxes, classes (i32), scores.

    As on the CPU plugin: ROIs without area give nothing, refined boxes are clamped at 0 only (not to
    the image), class_agnostic_box_regression is not applied, and when there are no more detections
    than max_detections_per_image they stay in class order."""

    def spatial_rank(self, inputs):
        return None

    def infer(self, inputs):
        rois, deltas, scores, im_info = inputs
        a = self.attrs
        for t, what in zip(inputs, ("rois", "deltas", "scores", "im_info")):
            _float_like(t, what)
            _check_rank(t, 2, what)
        _check_dim(rois, 1, 4, "rois")
        _check_dim(deltas, 1, a.num_classes * 4, "deltas (num_classes * 4)")
        _check_dim(scores, 1, a.num_classes, "scores (num_classes)")
        if im_info.shape is not None and not (dims_compatible(im_info.shape[0], 1) and
                                              dims_compatible(im_info.shape[1], 3)):
            raise ShapeError(f"im_info must be [1, 3], got {format_shape(im_info.shape)}")
        if all(t.shape is not None for t in (rois, deltas, scores)):
            rows = rois.shape[0]
            for t, what in ((deltas, "deltas"), (scores, "scores")):
                rows = _merge(rows, t.shape[0], f"rois {format_shape(rois.shape)} and {what} "
                              f"{format_shape(t.shape)} differ in the number of ROIs")
        top = a.max_detections_per_image
        notes = {0: "max_detections_per_image"}
        return [TensorType((top, 4), rois.etype, notes=notes), TensorType((top,), etypes.i32, notes=notes),
                TensorType((top,), rois.etype, notes=notes)]

    def run(self, rois, deltas, scores, im_info):
        a = self.attrs
        if len(a.deltas_weights) != 4:
            raise ModelError(f"deltas_weights must hold 4 values, got {len(a.deltas_weights)}")
        classes, top = a.num_classes, a.max_detections_per_image
        boxes = rois.astype(np.float32)
        moves = deltas.astype(np.float32).reshape(len(boxes), classes, 4) / np.asarray(a.deltas_weights, np.float32)
        x0, y0, x1, y1 = _apply_deltas(boxes[:, None, :], moves, np.float32(1), np.float32(a.max_delta_log_wh))
        refined = np.maximum(np.stack([x0, y0, x1, y1], -1), np.float32(0)).transpose(1, 0, 2)   # (C, R, 4)
        one = np.float32(1)
        sizes = (refined[..., 2] - refined[..., 0] + one) * (refined[..., 3] - refined[..., 1] + one)
        has_area = (boxes[:, 2] - boxes[:, 0] > 0) & (boxes[:, 3] - boxes[:, 1] > 0)
        refined_scores = np.where(has_area[None, :], scores.astype(np.float32).T, np.float32(0))
        refined, sizes = np.where(has_area[None, :, None], refined, np.float32(0)), np.where(has_area, sizes, 0)
        found = []                                   # (score, class, roi) in class order
        for c in range(1, classes):
            class_scores = refined_scores[c]
            order = _by_score_above(class_scores, np.float32(a.score_threshold))
            kept = _greedy(order, len(order), lambda best, rest: _detectron_overlap(
                refined[c, best], sizes[c, best], refined[c, rest], sizes[c, rest]) > np.float32(a.nms_threshold))
            found += [(class_scores[i], c, i) for i in (kept if a.post_nms_count == -1 else kept[:a.post_nms_count])]
        if len(found) > top:
            found = sorted(found, key=lambda f: (-f[0], f[2]))[:top]
        out_boxes, out_classes, out_scores = np.zeros((top, 4), np.float32), np.zeros(top, np.int32), \
            np.zeros(top, np.float32)
        for i, (score, c, r) in enumerate(found):
            out_boxes[i], out_classes[i], out_scores[i] = refined[c, r], c, score
        return out_boxes.astype(rois.dtype), out_classes, out_scores.astype(rois.dtype)


@register("ExperimentalDetectronPriorGridGenerator", 6)
class ExperimentalDetectronPriorGridGenerator(Op):
    """The priors [A, 4] shifted to the centre of every feature-map cell: [H, W, A, 4], or [H * W * A, 4]
    with flatten.  Steps: stride_x / stride_y, else the image size over the grid size."""

    def spatial_rank(self, inputs):
        return None

    def infer(self, inputs):
        priors, featmap, image = inputs
        for t, what in zip(inputs, ("priors", "feature_map", "im_data")):
            _float_like(t, what)
        _check_rank(priors, 2, "priors")
        _check_dim(priors, 1, 4, "priors")
        _check_rank(featmap, 4, "feature_map")
        _check_rank(image, 4, "im_data")
        if featmap.shape is not None and image.shape is not None:
            _merge(featmap.shape[0], image.shape[0], f"feature_map {format_shape(featmap.shape)} and im_data "
                   f"{format_shape(image.shape)} differ in the batch dimension")
        h, w = (ANY, ANY) if featmap.shape is None else featmap.shape[2:]
        count = ANY if priors.shape is None else priors.shape[0]
        if self.attrs.flatten:
            rows = ANY if featmap.shape is None or priors.shape is None else dim_mul(dim_mul(h, w), count)
            return [TensorType((rows, 4), priors.etype, notes={0: "H * W * priors"})]
        return [TensorType((h, w, count, 4), priors.etype)]

    def run(self, priors, featmap, image):
        a = self.attrs
        h, w = featmap.shape[2:]
        if (a.h and a.h != h) or (a.w and a.w != w):
            raise ModelError(f"h={a.h}, w={a.w} differ from the feature map's {h} x {w}, which sets the output size")
        step_w = np.float32(a.stride_x) if a.stride_x else np.float32(image.shape[3]) / np.float32(w)
        step_h = np.float32(a.stride_y) if a.stride_y else np.float32(image.shape[2]) / np.float32(h)
        half = np.float32(0.5)
        shift_x = step_w * (np.arange(w, dtype=np.float32) + half)
        shift_y = step_h * (np.arange(h, dtype=np.float32) + half)
        shifts = np.stack(np.broadcast_arrays(shift_x[None, :], shift_y[:, None],
                                              shift_x[None, :], shift_y[:, None]), -1)           # (H, W, 4)
        grid = priors.astype(np.float32)[None, None, :, :] + shifts[:, :, None, :]
        return (grid.reshape(-1, 4) if a.flatten else grid).astype(priors.dtype)


@register("ExperimentalDetectronROIFeatureExtractor", 6)
class ExperimentalDetectronROIFeatureExtractor(Op):
    """ROIAlign (average) of each ROI [x0, y0, x1, y1] on the pyramid level its size picks:
    floor(log2(sqrt(area) / 224 + 1e-6) + 2), clamped to the levels (no area: no level, features 0).
    Level l samples feature map l [1, C, H, W] at scale 1 / pyramid_scales[l]; ROIs are at least
    1 x 1 (aligned shifts them by -0.5)."""

    def spatial_rank(self, inputs):
        return None

    def infer(self, inputs):
        rois, levels = inputs[0], inputs[1:]
        _float_like(rois, "rois")
        _check_rank(rois, 2, "rois")
        _check_dim(rois, 1, 4, "rois")
        channels = None
        for i, t in enumerate(levels):
            _float_like(t, f"feature map {i}")
            _check_rank(t, 4, f"feature map {i}")
            if t.shape is None:
                continue
            _check_dim(t, 0, 1, f"feature map {i}")
            channels = t.shape[1] if channels is None else _merge(
                channels, t.shape[1], f"the feature maps differ in channels ({channels} and {t.shape[1]})")
        count = ANY if rois.shape is None else rois.shape[0]
        size = self.attrs.output_size
        return [TensorType((count, ANY if channels is None else channels, size, size), rois.etype),
                TensorType((count, 4), rois.etype)]

    def run(self, rois, *levels):
        a = self.attrs
        if len(a.pyramid_scales) < len(levels):
            raise ModelError(f"pyramid_scales has {len(a.pyramid_scales)} values for {len(levels)} feature maps")
        boxes = rois.astype(np.float32)
        area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
        with np.errstate(invalid="ignore", divide="ignore"):
            wanted = np.floor(np.log2(np.sqrt(area) / np.float32(224) + np.float32(1e-6)) + np.float32(2))
        level = np.where(area > 0, np.clip(np.nan_to_num(wanted), 0, len(levels) - 1), len(levels)).astype(np.int64)
        size = a.output_size
        out = np.zeros((len(boxes), levels[0].shape[1], size, size), np.float32)
        offset = np.float32(0.5 if a.aligned else 0)
        for index, features in enumerate(levels):
            on_level = np.flatnonzero(level == index)
            if not on_level.size:
                continue
            scale = np.float32(1) / np.float32(a.pyramid_scales[index])
            corners = boxes[on_level] * scale - offset
            width = np.maximum(corners[:, 2] - corners[:, 0], np.float32(1))
            height = np.maximum(corners[:, 3] - corners[:, 1], np.float32(1))
            bin_w, bin_h = width / np.float32(size), height / np.float32(size)
            maps = features.astype(np.float32)
            for sx, sy, group in _by_sample_counts(*_sample_counts(bin_w, bin_h, a.sampling_ratio)):
                samples = _aligned_samples(maps, np.zeros(len(group), np.int64), corners[group, 0], corners[group, 1],
                                           bin_w[group], bin_h[group], sx, sy, size, size)
                pooled = samples.sum(axis=(2, 4), dtype=np.float32) / np.float32(sx * sy)
                out[on_level[group]] = pooled.transpose(0, 3, 1, 2)
        return out.astype(rois.dtype), rois.copy()


@register("ExperimentalDetectronTopKROIs", 6)
class ExperimentalDetectronTopKROIs(Op):
    """The max_rois ROIs with the highest probabilities, best first; rows past the input are 0."""

    def spatial_rank(self, inputs):
        return None

    def infer(self, inputs):
        rois, probs = inputs
        _float_like(rois, "rois")
        _float_like(probs, "probs")
        _check_rank(rois, 2, "rois")
        _check_dim(rois, 1, 4, "rois")
        _check_rank(probs, 1, "probs")
        if rois.shape is not None and probs.shape is not None:
            _merge(rois.shape[0], probs.shape[0], f"rois {format_shape(rois.shape)} and probs "
                   f"{format_shape(probs.shape)} differ in the number of ROIs")
        return [TensorType((self.attrs.max_rois, 4), rois.etype, notes={0: "max_rois"})]

    def run(self, rois, probs):
        count = min(self.attrs.max_rois, len(rois))
        order = np.argsort(-probs.astype(np.float32), kind="stable")[:count]
        out = np.zeros((self.attrs.max_rois, 4), rois.dtype)
        out[:count] = rois[order]
        return out
