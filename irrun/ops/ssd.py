"""SSD heads: PriorBox-1/8 and PriorBoxClustered-1 (the prior boxes of a feature-map grid) and
DetectionOutput-1/8 (boxes decoded from the priors, per-class NMS, keep_top_k).

What OpenVINO 2026.4.1 computes, beyond the op specs (specs/errata/detection.md): the ops
follow the CPU plugin's kernels; their details are in the docstrings (PriorBox's output size
and box stream: `_prior_output`).  DetectionOutput's NMS runs over selected boxes, each step
computing its IoU against all remaining candidates at once.
"""
from __future__ import annotations

import math

import numpy as np

from .. import etypes
from ..errors import ModelError, ShapeError
from ..registry import Op, TensorType, register
from ..shapes import ANY, dim_bounds, dims_compatible, format_shape, make_dim
from .common import check_rank, round_half_away
from .detection_common import by_score, greedy_in_blocks


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
            check_rank(t, 1, what)
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


# ---------------------------------------------------------------- DetectionOutput

_CODE_TYPES = ("caffe.PriorBoxParameter.CORNER", "caffe.PriorBoxParameter.CENTER_SIZE")


def _size(b: np.ndarray) -> np.ndarray:
    """Caffe's BBoxSize of boxes (..., 4): 0 for an inverted box."""
    inverted = (b[..., 2] < b[..., 0]) | (b[..., 3] < b[..., 1])
    return np.where(inverted, 0, (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1]))


def _jaccard(box: np.ndarray, others: np.ndarray, box_size: np.ndarray, others_size: np.ndarray) -> np.ndarray:
    """Caffe's JaccardOverlap of [xmin, ymin, xmax, ymax] boxes (..., 4) of sizes `_size`, broadcast
    (kept boxes [k, 1, 4] against candidates [1, m, 4]).  (Caffe's test for disjoint boxes is left
    out: where it holds, the width or the height is negative, the difference of distinct floats.)"""
    width = np.minimum(box[..., 2], others[..., 2]) - np.maximum(box[..., 0], others[..., 0])
    height = np.minimum(box[..., 3], others[..., 3]) - np.maximum(box[..., 1], others[..., 1])
    inter = width * height
    with np.errstate(invalid="ignore", divide="ignore"):
        iou = inter / (box_size + others_size - inter)
    return np.where((width > 0) & (height > 0), iou, 0).astype(others.dtype)


def _greedy_keep(boxes: np.ndarray, order: np.ndarray, threshold: float) -> list[int]:
    """Caffe NMS over candidates in `order`: keep one unless it overlaps a kept box by more than threshold."""
    candidates = boxes[order]
    sizes = _size(candidates)

    def suppresses(kept, rest):
        return _jaccard(candidates[kept][:, None], candidates[rest][None], sizes[kept][:, None],
                        sizes[rest][None]) > threshold
    return order[np.asarray(greedy_in_blocks([np.arange(len(order))], len(order), suppresses), np.intp)].tolist()


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
        check_rank(loc, 2, "box_logits")
        check_rank(conf, 2, "class_preds")
        check_rank(priors, 3, "proposals")
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
            order = by_score(class_scores, np.flatnonzero(class_scores > np.float32(a.confidence_threshold)))
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
        order = by_score(best_score, np.flatnonzero(ok))
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
        labels = np.concatenate([np.full(len(indices), label, np.int64) for label, indices in chosen.items()])
        boxes = np.concatenate([np.asarray(indices, np.int64) for indices in chosen.values()])
        best = np.lexsort((boxes, -scores[boxes, labels]))[:keep]    # stable: ties keep the classes' order
        kept: dict[int, list[int]] = {}
        for label, idx in zip(labels[best].tolist(), boxes[best].tolist()):
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
