"""MatrixNms-8 and MulticlassNms-8/9: NMS over every class of a batch at once.

Outputs: selected_outputs [N, 6] rows [class, score, x1, y1, x2, y2] (the boxes' type),
selected_indices [N, 1] (flat box indices) and valid_outputs [batches], N data-dependent.

Both follow the CPU plugin's kernels; their details are in the class docstrings and
specs/errata/detection.md (MatrixNms sorts by class only across the batch, MulticlassNms's
nms_top_k limits the candidates examined, ...).  MulticlassNms's greedy loop runs over
selected boxes, each step computing its IoU against all remaining candidates at once.
"""
from __future__ import annotations

import numpy as np

from .. import etypes
from ..errors import ModelError, ShapeError
from ..registry import Op, TensorType, register
from ..shapes import ANY, dim_mul, format_shape
from .common import check_dim, check_rank, merge_dims
from .detection_common import by_score, by_score_above, max_length, up_to


def _dimension(value: int):
    """OpenVINO's Dimension(value): -1 is dynamic."""
    return ANY if value < 0 else value


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
        check_rank(boxes, 3, "boxes")
        check_dim(boxes, 2, 4, "boxes")
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
        merge_dims(boxes.shape[0], scores.shape[0], f"boxes {format_shape(boxes.shape)} and scores "
                   f"{format_shape(scores.shape)} differ in dimension 0")
        merge_dims(boxes.shape[1], scores.shape[boxes_axis], f"boxes {format_shape(boxes.shape)} and scores "
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
        check_rank(scores, 3, "scores")
        if boxes.shape is None:
            return ANY, ANY
        count = _dimension(min(max_length(boxes.shape[1]), a.nms_top_k)) if a.nms_top_k > -1 else boxes.shape[1]
        rows = ANY
        if scores.shape is not None:
            self.check_boxes(boxes, scores, 2)
            count = dim_mul(count, scores.shape[1])
            if a.keep_top_k > -1:
                count = _dimension(min(max_length(count), a.keep_top_k))
            rows = up_to(dim_mul(count, scores.shape[0]))
        return rows, boxes.shape[0]

    def decayed(self, boxes: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(candidates kept, their decayed scores) for one batch item and class."""
        a = self.attrs
        order = by_score_above(scores, np.float32(a.score_threshold))
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
        check_rank(scores, 2 if split else 3, "scores")
        if split:
            check_rank(inputs[2], 1, "roisnum")
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
        count = _dimension(min(max_length(boxes.shape[1]), a.nms_top_k)) if a.nms_top_k > -1 else boxes.shape[1]
        count = dim_mul(count, classes)
        if -1 < a.keep_top_k < max_length(count):
            count = a.keep_top_k
        return up_to(dim_mul(count, images)), (inputs[2].shape[0] if split else boxes.shape[0])

    def selected(self, boxes: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """Indices selected for one batch item and class, in selection order."""
        a = self.attrs
        score_threshold = np.float32(a.score_threshold)
        order = by_score(scores, np.flatnonzero(scores >= score_threshold))
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
