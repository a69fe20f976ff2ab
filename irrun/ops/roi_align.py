"""ROIAlign-3/9, ROIAlignRotated-15 and ExperimentalDetectronROIFeatureExtractor-6: bilinear
samples averaged (or, for ROIAlign's max mode, maxed) over the bins of each ROI.

What OpenVINO 2026.4.1 computes, beyond the op specs (specs/errata/detection.md): ROIAlign
samples as OpenVINO's reference does; max mode starts from 0.  ROIAlignRotated and the
feature extractor follow the CPU plugin's kernels; their details are in the class docstrings.
Averages over finite maps take two products per ROI (`_averaged_samples`) rather than gathering
every sample's neighbours: the same weights, summed in another order.
"""
from __future__ import annotations

import numpy as np

from .. import etypes
from ..errors import ModelError, ShapeError
from ..registry import Op, TensorType, register
from ..shapes import ANY, format_shape
from .common import check_dim, check_rank, merge_dims
from .detection_common import check_float


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


def _axis_weights(start, bin_size, count: int, pooled: int, size: int) -> np.ndarray:
    """(G, pooled, size): each bin's share of every row (or column) of the map, its samples'
    bilinear weights averaged, 0 for samples outside [-1, size] (`_neighbours`)."""
    low, high, frac, ok = _axis_samples(start, bin_size, count, pooled, size)       # (G, pooled, count)
    weights = np.zeros((low.shape[0], pooled, size), np.float32)
    at = (np.arange(low.shape[0])[:, None, None], np.arange(pooled)[None, :, None])
    share = np.float32(1) / np.float32(count)
    np.add.at(weights, at + (low,), np.where(ok, np.float32(1) - frac, np.float32(0)) * share)
    np.add.at(weights, at + (high,), np.where(ok, frac, np.float32(0)) * share)
    return weights


def _averaged_samples(features, batch, x1, y1, bin_w, bin_h, sx: int, sy: int, ph: int, pw: int) -> np.ndarray | None:
    """The mean of each bin's sx * sy bilinear samples (G, C, PH, PW), as two products per ROI: the
    average of the samples' bilinear weights is separable, rows (PH, h) times the ROI's window of
    the map (channels last) times columns (w, PW); 1000 ROIs of 256 channels took 0.6-1.2 s
    gathering their 4 neighbours a sample, now 45-65 ms (OpenVINO 147).  None where the map holds
    a NaN or an infinity: a window's zero weights would spread it, where a sample reads only its
    neighbours."""
    if not np.isfinite(features).all():
        return None
    _, c, h, w = features.shape
    rows = _axis_weights(y1, bin_h, sy, ph, h)       # (G, PH, H)
    cols = _axis_weights(x1, bin_w, sx, pw, w)       # (G, PW, W)
    read_rows, read_cols = rows.any(axis=1), cols.any(axis=1)
    top, bottom = read_rows.argmax(axis=1), h - read_rows[:, ::-1].argmax(axis=1)
    left, right = read_cols.argmax(axis=1), w - read_cols[:, ::-1].argmax(axis=1)
    reads = read_rows.any(axis=1) & read_cols.any(axis=1)
    out = np.zeros((len(batch), c, ph, pw), np.float32)
    maps = {b: np.ascontiguousarray(features[b].transpose(1, 2, 0)) for b in np.unique(batch[reads])}   # (H, W, C)
    for r in np.flatnonzero(reads):
        y0, y1_, x0, x1_ = top[r], bottom[r], left[r], right[r]
        window = maps[batch[r]][y0:y1_, x0:x1_].reshape(y1_ - y0, (x1_ - x0) * c)    # strided rows, no copy
        by_rows = (rows[r, :, y0:y1_] @ window).reshape(ph, x1_ - x0, c).transpose(1, 0, 2)
        out[r] = (cols[r, :, x0:x1_] @ by_rows.reshape(x1_ - x0, ph * c)).reshape(pw, ph, c).transpose(2, 1, 0)
    return out


@register("ROIAlign", 3, 9)
class ROIAlign(Op):
    box_values = 4       # a ROI row: x1, y1, x2, y2

    def spatial_rank(self, inputs):
        return None

    def infer(self, inputs):
        data, rois, batch_indices = inputs
        check_rank(data, 4, "data")
        check_rank(rois, 2, "rois")
        check_rank(batch_indices, 1, "batch_indices")
        check_dim(rois, 1, self.box_values, "rois")
        if not batch_indices.etype.is_integral and batch_indices.etype is not etypes.dynamic:
            raise ShapeError(f"batch_indices must be integers, got {batch_indices.etype}")
        if not data.etype.is_float and data.etype is not etypes.dynamic:
            raise ShapeError(f"data must be floating point, got {data.etype}")
        num_rois = ANY
        if rois.shape is not None:
            num_rois = rois.shape[0]
        if batch_indices.shape is not None:
            num_rois = merge_dims(num_rois, batch_indices.shape[0], f"rois {format_shape(rois.shape)} and "
                                  f"batch_indices {format_shape(batch_indices.shape)} differ in the number of ROIs")
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
        if self.attrs.mode != "max":
            pooled = _averaged_samples(features, batch, x1, y1, bin_w, bin_h, sx, sy, self.attrs.pooled_h,
                                       self.attrs.pooled_w)
            if pooled is not None:
                return pooled
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


# ---------------------------------------------------------------- ExperimentalDetectronROIFeatureExtractor

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
        check_float(rois, "rois")
        check_rank(rois, 2, "rois")
        check_dim(rois, 1, 4, "rois")
        channels = None
        for i, t in enumerate(levels):
            check_float(t, f"feature map {i}")
            check_rank(t, 4, f"feature map {i}")
            if t.shape is None:
                continue
            check_dim(t, 0, 1, f"feature map {i}")
            channels = t.shape[1] if channels is None else merge_dims(
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
                args = (maps, np.zeros(len(group), np.int64), corners[group, 0], corners[group, 1], bin_w[group],
                        bin_h[group], sx, sy, size, size)
                pooled = _averaged_samples(*args)
                if pooled is None:
                    pooled = (_aligned_samples(*args).sum(axis=(2, 4), dtype=np.float32)
                              / np.float32(sx * sy)).transpose(0, 3, 1, 2)
                out[on_level[group]] = pooled
        return out.astype(rois.dtype), rois.copy()
