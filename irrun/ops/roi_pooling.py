"""ROIPooling-2, PSROIPooling-1 and DeformablePSROIPooling-1: pooling over ROIs given as rows
[batch_id, x1, y1, x2, y2].

They follow the CPU plugin's kernels (class docstrings, specs/errata/detection.md).  The CPU
plugin stops at the first ROI whose batch_id is -1 and writes 0 for it and every ROI after
it.  ROIPooling's max mode loops over ROIs.
"""
from __future__ import annotations

import math

import numpy as np

from .. import etypes
from ..errors import ModelError, ShapeError
from ..registry import Op, TensorType, register
from ..shapes import ANY, dims_compatible, format_shape
from .common import check_dim, check_rank, round_half_away


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
    check_rank(data, 4, "data")
    check_rank(rois, 2, "rois")
    check_dim(rois, 1, 5, "rois [batch_id, x1, y1, x2, y2]")
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
            check_rank(inputs[2], 4, "offsets")
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
