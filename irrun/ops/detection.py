"""Detection heads: NonMaxSuppression-1/3/4/5/9, ROIAlign-3/9, PriorBox-1/8, PriorBoxClustered-1,
Proposal-1/4 and DetectionOutput-1/8.

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
* Box loops (greedy NMS, Proposal, DetectionOutput) run over selected boxes,
  each step computing its IoU against all remaining candidates at once.
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
    dims_compatible,
    format_shape,
    make_dim,
)

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


def _hard_nms(boxes, scores, limit, iou_threshold, score_threshold) -> list[tuple[int, float]]:
    candidates = np.flatnonzero(scores > score_threshold)
    candidates = candidates[np.lexsort((candidates, -scores[candidates]))]
    selected = []
    while candidates.size and len(selected) < limit:
        best, rest = candidates[0], candidates[1:]
        selected.append((int(best), float(scores[best])))
        # NaN IoU compares false: it suppresses nothing.
        candidates = rest[~(_iou(boxes[best], boxes[rest]) >= iou_threshold)]
    return selected


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
    @property
    def index_type(self):
        return self.attrs.get("output_type") or etypes.i64

    def infer(self, inputs):
        boxes, scores = inputs[0], inputs[1]
        _check_rank(boxes, 3, "boxes")
        _check_rank(scores, 3, "scores")
        _check_dim(boxes, 2, 4, "boxes")
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
        corners = _nms_corners(boxes, self.attrs.box_encoding == "center")
        limit = min(limit, num_boxes)
        rows = []
        for b in range(batches):
            for c in range(classes):
                class_scores = scores[b, c].astype(np.float32)
                if sigma > 0:
                    chosen = _soft_nms(corners[b], class_scores, limit, score_threshold, sigma)
                else:
                    chosen = _hard_nms(corners[b], class_scores, limit, iou_threshold, score_threshold)
                rows += [(b, c, index, score) for index, score in chosen]
        if self.attrs.sort_result_descending:
            rows.sort(key=lambda r: (-r[3], r[0], r[1], r[2]))
        indices = np.array([r[:3] for r in rows], dtype=np.int64).reshape(-1, 3)
        indices = indices.astype(self.index_type.carrier)
        if self.version < 5:
            return indices
        selected_scores = np.array([(r[0], r[1], r[3]) for r in rows], dtype=np.float32).reshape(-1, 3)
        return indices, selected_scores, np.array([len(rows)], dtype=self.index_type.carrier)


# ---------------------------------------------------------------- ROIAlign

def _axis_samples(start, bin_size, count: int, pooled: int, size: int):
    """Sample positions along one axis for a group of ROIs sharing `count` samples per bin.

    Returns (low, high, frac, valid), each (rois, pooled, count): the two feature rows (or
    columns) to blend, the weight of `high`, and whether the sample lies in [-1, size]."""
    bins = np.arange(pooled, dtype=np.float32)[None, :, None]
    taps = (np.arange(count, dtype=np.float32) + np.float32(0.5))[None, None, :]
    step = (bin_size / np.float32(count))[:, None, None]
    pos = start[:, None, None] + bins * bin_size[:, None, None] + step * taps
    valid = (pos >= -1) & (pos <= size)
    pos = np.maximum(pos, np.float32(0))
    low = np.floor(np.where(valid, pos, 0)).astype(np.int64)
    at_edge = low >= size - 1
    low = np.where(at_edge, size - 1, low)
    high = np.where(at_edge, low, low + 1)
    frac = np.where(at_edge, np.float32(0), pos - low).astype(np.float32)
    return low, high, frac, valid


@register("ROIAlign", 3, 9)
class ROIAlign(Op):
    def spatial_rank(self, inputs):
        return None

    def infer(self, inputs):
        data, rois, batch_indices = inputs
        _check_rank(data, 4, "data")
        _check_rank(rois, 2, "rois")
        _check_rank(batch_indices, 1, "batch_indices")
        _check_dim(rois, 1, 4, "rois")
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
        ph, pw, ratio = self.attrs.pooled_h, self.attrs.pooled_w, self.attrs.sampling_ratio
        n, c = data.shape[:2]
        x1, y1, width, height = self._roi_boxes(rois)
        bin_w, bin_h = width / np.float32(pw), height / np.float32(ph)
        # sampling_ratio 0: ceil(bin size) samples per bin, so ROIs are handled in groups of equal counts.
        count_x = np.full(len(rois), ratio) if ratio > 0 else np.ceil(bin_w).astype(np.int64)
        count_y = np.full(len(rois), ratio) if ratio > 0 else np.ceil(bin_h).astype(np.int64)
        batch_indices = batch_indices.astype(np.int64)
        if np.any((batch_indices < 0) | (batch_indices >= n)):
            raise ModelError(f"batch_indices must be in [0, {n}), got {batch_indices.tolist()}")
        features = data.astype(np.float32)
        out = np.zeros((len(rois), c, ph, pw), dtype=np.float32)
        for sx, sy in {(int(a), int(b)) for a, b in zip(count_x, count_y)}:
            group = np.flatnonzero((count_x == sx) & (count_y == sy))
            if sx <= 0 or sy <= 0:
                continue  # no samples: the bin stays 0
            out[group] = self._pool_group(features, batch_indices[group], x1[group], y1[group],
                                          bin_w[group], bin_h[group], sx, sy)
        return out.astype(data.dtype)

    def _pool_group(self, features, batch, x1, y1, bin_w, bin_h, sx, sy):
        ph, pw = self.attrs.pooled_h, self.attrs.pooled_w
        _, _, h, w = features.shape
        y_low, y_high, ly, y_ok = _axis_samples(y1, bin_h, sy, ph, h)     # (G, PH, SY)
        x_low, x_high, lx, x_ok = _axis_samples(x1, bin_w, sx, pw, w)     # (G, PW, SX)
        # Index arrays broadcast to (G, PH, SY, PW, SX); gathering puts channels last.
        g = batch[:, None, None, None, None]
        yl, yh = y_low[:, :, :, None, None], y_high[:, :, :, None, None]
        xl, xh = x_low[:, None, None, :, :], x_high[:, None, None, :, :]
        fy, fx = ly[:, :, :, None, None, None], lx[:, None, None, :, :, None]
        valid = (y_ok[:, :, :, None, None] & x_ok[:, None, None, :, :])[..., None]
        one = np.float32(1)
        value = ((one - fy) * (one - fx) * features[g, :, yl, xl] + (one - fy) * fx * features[g, :, yl, xh]
                 + fy * (one - fx) * features[g, :, yh, xl] + fy * fx * features[g, :, yh, xh])
        value = np.where(valid, value, np.float32(0))                        # (G, PH, SY, PW, SX, C)
        if self.attrs.mode == "max":
            pooled = np.maximum(value.max(axis=(2, 4)), np.float32(0))
        else:
            pooled = (value / np.float32(sx * sy)).sum(axis=(2, 4), dtype=np.float32)
        return pooled.transpose(0, 3, 1, 2)


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
    """The count OpenVINO's shape inference uses: distinct ratios rounded to 1e-6, plus 1."""
    unique = {1.0}
    for ar in aspect_ratio:
        unique.add(round(ar * 1e6) / 1e6)
        if flip:
            unique.add(round(1 / ar * 1e6) / 1e6)
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
        if len(table) != self.number_of_priors():
            raise ModelError(f"the attributes give {len(table)} priors per cell, the output shape "
                             f"{self.number_of_priors()}")
        dx, dy, half_w, half_h, clip_sides = (table[:, i].astype(np.float32) for i in range(5))
        centre_x = cx[None, :, None] + dx                      # (1, W, P)
        centre_y = cy[:, None, None] + dy[None, None, :]       # (H, 1, P)
        inv_w, inv_h = np.float32(1) / np.float32(image_w), np.float32(1) / np.float32(image_h)
        boxes = np.stack(np.broadcast_arrays((centre_x - half_w) * inv_w, (centre_y - half_h) * inv_h,
                                             (centre_x + half_w) * inv_w, (centre_y + half_h) * inv_h), axis=-1)
        clip_sides = clip_sides.astype(bool)[None, None, :]
        boxes[..., 0:2] = np.where(clip_sides[..., None], np.maximum(boxes[..., 0:2], 0), boxes[..., 0:2])
        boxes[..., 2:4] = np.where(clip_sides[..., None], np.minimum(boxes[..., 2:4], 1), boxes[..., 2:4])
        if a.clip:
            boxes = np.clip(boxes, 0, 1)
        flat = boxes.reshape(-1).astype(np.float32)
        return np.stack([flat, _variance_row(a.variance, flat.size // 4)])


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
        if a.clip:
            boxes = np.clip(boxes, 0, 1)
        flat = boxes.reshape(-1).astype(np.float32)
        return np.stack([flat, _variance_row(a.variance, flat.size // 4)])


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


def _proposal_nms(boxes: np.ndarray, threshold: float, limit: int, offset: np.float32) -> list[int]:
    """Greedy NMS over boxes already sorted by score; drops later boxes with IoU > threshold."""
    alive = np.ones(len(boxes), bool)
    keep = []
    for i in range(len(boxes)):
        if not alive[i]:
            continue
        keep.append(i)
        if len(keep) == limit:
            break
        rest = boxes[i + 1:]
        box = boxes[i]
        overlap = (box[0] <= rest[:, 2]) & (box[1] <= rest[:, 3]) & (rest[:, 0] <= box[2]) & (rest[:, 1] <= box[3])
        width = np.maximum(np.minimum(box[2], rest[:, 2]) - np.maximum(box[0], rest[:, 0]) + offset, 0)
        height = np.maximum(np.minimum(box[3], rest[:, 3]) - np.maximum(box[1], rest[:, 1]) + offset, 0)
        inter = width * height
        area = (box[2] - box[0] + offset) * (box[3] - box[1] + offset)
        areas = (rest[:, 2] - rest[:, 0] + offset) * (rest[:, 3] - rest[:, 1] + offset)
        with np.errstate(invalid="ignore", divide="ignore"):
            iou = np.where(overlap, inter / (area + areas - inter), np.float32(0))
        alive[i + 1:] &= ~(np.float32(threshold) < iou)
    return keep


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
    kept = []
    while order.size:
        best, order = order[0], order[1:]
        kept.append(int(best))
        order = order[~(_jaccard(boxes[best], boxes[order]) > threshold)]
    return kept


def _by_score(scores: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Candidates by descending score, ties by index."""
    return candidates[np.lexsort((candidates, -scores[candidates]))]


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
