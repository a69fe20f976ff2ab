"""Region proposals and the two-stage detector heads: Proposal-1/4, GenerateProposals-9 and the
ExperimentalDetectron*-6 ops DetectionOutput, GenerateProposalsSingleImage, PriorGridGenerator
and TopKROIs (ExperimentalDetectronROIFeatureExtractor is in `roi_align`).

What OpenVINO 2026.4.1 computes, beyond the op specs (specs/errata/detection.md):

* Proposal follows the CPU plugin, which reads the image size as (width,
  height) for framework="tensorflow"; unused probs are 0.
* The other ops follow the CPU plugin's kernels too; their details are in the
  class docstrings and the errata.
* Box loops (the proposal NMS, the detection output) run over selected boxes,
  each step computing its IoU against all remaining candidates at once.
"""
from __future__ import annotations

import math

import numpy as np

from .. import etypes
from ..errors import ModelError, ShapeError
from ..registry import Op, TensorType, register
from ..shapes import ANY, dim_bounds, dim_merge, dim_mul, dims_compatible, format_shape, make_dim
from .common import check_dim, check_rank, merge_dims
from .detection_common import by_score_above, check_float, greedy_in_blocks, up_to


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
    """IoU of [x0, y0, x1, y1] boxes (..., 4), broadcast (kept boxes [k, 1, 4] against others [1, m, 4]),
    sides counting `offset` extra pixels; 0 without overlap."""
    overlap = (box[..., 0] <= rest[..., 2]) & (box[..., 1] <= rest[..., 3]) & (rest[..., 0] <= box[..., 2]) \
        & (rest[..., 1] <= box[..., 3])
    width = np.maximum(np.minimum(box[..., 2], rest[..., 2]) - np.maximum(box[..., 0], rest[..., 0]) + offset, 0)
    height = np.maximum(np.minimum(box[..., 3], rest[..., 3]) - np.maximum(box[..., 1], rest[..., 1]) + offset, 0)
    inter = width * height
    area = (box[..., 2] - box[..., 0] + offset) * (box[..., 3] - box[..., 1] + offset)
    areas = (rest[..., 2] - rest[..., 0] + offset) * (rest[..., 3] - rest[..., 1] + offset)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(overlap, inter / (area + areas - inter), np.float32(0))


def _proposal_nms(boxes: np.ndarray, threshold: float, limit: int, offset: np.float32) -> list[int]:
    """Greedy NMS over boxes already sorted by score; drops later boxes with IoU > threshold.
    The CPU plugin counts before comparing with the limit, so a limit of 0 keeps every survivor."""
    return greedy_in_blocks([np.arange(len(boxes))], limit if limit > 0 else len(boxes),
                            lambda kept, rest: np.float32(threshold) < _proposal_iou(boxes[kept][:, None],
                                                                                   boxes[rest][None], offset))


@register("Proposal", 1, 4)
class Proposal(Op):
    def spatial_rank(self, inputs):
        return None

    def infer(self, inputs):
        probs, deltas, image = inputs
        check_rank(probs, 4, "class_probs")
        check_rank(deltas, 4, "bbox_deltas")
        if image.rank not in (None, 1, 2):
            raise ShapeError(f"image_shape must be 1-D, got {format_shape(image.shape)}")
        if image.shape is not None and not any(dims_compatible(image.shape[-1], n) for n in (3, 4)):
            raise ShapeError(f"image_shape must hold 3 or 4 values, got {format_shape(image.shape)}")
        batch = ANY
        if probs.shape is not None:
            batch = probs.shape[0]
        if deltas.shape is not None:
            batch = merge_dims(batch, deltas.shape[0], f"class_probs {format_shape(probs.shape)} and bbox_deltas "
                               f"{format_shape(deltas.shape)} differ in the batch dimension")
            if probs.shape is not None:
                for axis in (2, 3):
                    merge_dims(probs.shape[axis], deltas.shape[axis], f"class_probs {format_shape(probs.shape)} and "
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
        if not len(anchors):   # no ratio or no scale (what OpenVINO reads a missing one as): no proposals
            rois = np.zeros((batches, a.post_nms_topn, 5), np.float32)
            rois[:, 0, 0] = -1
            rois = rois.reshape(-1, 5).astype(dtype)
            return rois if self.version == 1 else (rois, np.zeros(len(rois), dtype))
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


# ---------------------------------------------------------------- GenerateProposals and the ExperimentalDetectron ops
# As the CPU plugin computes them: box deltas are applied with log sizes capped at
# log(1000 / 16) (max_delta_log_wh for the detection output), proposals are numbered
# (h, w, anchor), ranked by score, and kept by the Proposal NMS (IoU > threshold drops).

_MAX_DELTA_LOG_WH = np.float32(math.log(1000.0 / 16.0))


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
            check_float(t, what)
        check_rank(im_info, 2, "im_info")
        check_rank(anchors, 4, "anchors")
        check_rank(deltas, 4, "deltas")
        check_rank(scores, 4, "scores")
        if im_info.shape is not None and not any(dims_compatible(im_info.shape[1], n) for n in (3, 4)):
            raise ShapeError(f"im_info {format_shape(im_info.shape)} must hold 3 or 4 values per image")
        check_dim(anchors, 3, 4, "anchors [H, W, A, 4]")
        batches = ANY
        for t in (im_info, deltas, scores):
            if t.shape is not None and dims_compatible(batches, t.shape[0]):
                batches = dim_merge(batches, t.shape[0])
        if deltas.shape is not None and scores.shape is not None:
            why = f"deltas {format_shape(deltas.shape)} and scores {format_shape(scores.shape)}"
            merge_dims(deltas.shape[0], scores.shape[0], f"{why} differ in the batch dimension")
            merge_dims(deltas.shape[1], dim_mul(scores.shape[1], 4), f"{why}: deltas must hold 4 values per anchor")
            merge_dims(deltas.shape[2], scores.shape[2], f"{why} differ in height")
            merge_dims(deltas.shape[3], scores.shape[3], f"{why} differ in width")
            if im_info.shape is not None:
                merge_dims(deltas.shape[0], im_info.shape[0], f"{why} and im_info {format_shape(im_info.shape)} "
                           f"differ in the batch dimension")
        if scores.shape is not None and anchors.shape is not None:
            for axis, (a_axis, what) in enumerate(((2, "height"), (3, "width"), (1, "anchor count"))):
                merge_dims(anchors.shape[axis], scores.shape[a_axis], f"anchors {format_shape(anchors.shape)} and "
                           f"scores {format_shape(scores.shape)} differ in {what}")
        rows = up_to(dim_mul(batches, self.attrs.post_nms_count))
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
            check_float(t, what)
        check_rank(im_info, 1, "im_info")
        check_dim(im_info, 0, 3, "im_info [height, width, scale]")
        check_rank(anchors, 2, "anchors")
        check_dim(anchors, 1, 4, "anchors")
        check_rank(deltas, 3, "deltas")
        check_rank(scores, 3, "scores")
        if deltas.shape is not None and scores.shape is not None:
            for axis, what in ((1, "height"), (2, "width")):
                merge_dims(deltas.shape[axis], scores.shape[axis], f"deltas {format_shape(deltas.shape)} and scores "
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
    """JaccardOverlap of ExperimentalDetectronDetectionOutput: sides count one extra pixel, box sizes given;
    boxes (..., 4) broadcast (kept boxes [k, 1, 4] against others [1, m, 4])."""
    disjoint = (others[..., 0] > box[..., 2]) | (others[..., 2] < box[..., 0]) | (others[..., 1] > box[..., 3]) \
        | (others[..., 3] < box[..., 1])
    width = np.minimum(box[..., 2], others[..., 2]) - np.maximum(box[..., 0], others[..., 0]) + np.float32(1)
    height = np.minimum(box[..., 3], others[..., 3]) - np.maximum(box[..., 1], others[..., 1]) + np.float32(1)
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
            check_float(t, what)
            check_rank(t, 2, what)
        check_dim(rois, 1, 4, "rois")
        check_dim(deltas, 1, a.num_classes * 4, "deltas (num_classes * 4)")
        check_dim(scores, 1, a.num_classes, "scores (num_classes)")
        if im_info.shape is not None and not (dims_compatible(im_info.shape[0], 1) and
                                              dims_compatible(im_info.shape[1], 3)):
            raise ShapeError(f"im_info must be [1, 3], got {format_shape(im_info.shape)}")
        if all(t.shape is not None for t in (rois, deltas, scores)):
            rows = rois.shape[0]
            for t, what in ((deltas, "deltas"), (scores, "scores")):
                rows = merge_dims(rows, t.shape[0], f"rois {format_shape(rois.shape)} and {what} "
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
            order = by_score_above(class_scores, np.float32(a.score_threshold))
            kept = greedy_in_blocks([order], len(order), lambda best, rest: _detectron_overlap(
                refined[c, best][:, None], sizes[c, best][:, None], refined[c, rest][None], sizes[c, rest][None])
                > np.float32(a.nms_threshold))
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
            check_float(t, what)
        check_rank(priors, 2, "priors")
        check_dim(priors, 1, 4, "priors")
        check_rank(featmap, 4, "feature_map")
        check_rank(image, 4, "im_data")
        if featmap.shape is not None and image.shape is not None:
            merge_dims(featmap.shape[0], image.shape[0], f"feature_map {format_shape(featmap.shape)} and im_data "
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


@register("ExperimentalDetectronTopKROIs", 6)
class ExperimentalDetectronTopKROIs(Op):
    """The max_rois ROIs with the highest probabilities, best first; rows past the input are 0."""

    def spatial_rank(self, inputs):
        return None

    def infer(self, inputs):
        rois, probs = inputs
        check_float(rois, "rois")
        check_float(probs, "probs")
        check_rank(rois, 2, "rois")
        check_dim(rois, 1, 4, "rois")
        check_rank(probs, 1, "probs")
        if rois.shape is not None and probs.shape is not None:
            merge_dims(rois.shape[0], probs.shape[0], f"rois {format_shape(rois.shape)} and probs "
                       f"{format_shape(probs.shape)} differ in the number of ROIs")
        return [TensorType((self.attrs.max_rois, 4), rois.etype, notes={0: "max_rois"})]

    def run(self, rois, probs):
        count = min(self.attrs.max_rois, len(rois))
        order = np.argsort(-probs.astype(np.float32), kind="stable")[:count]
        out = np.zeros((self.attrs.max_rois, 4), rois.dtype)
        out[:count] = rois[order]
        return out
