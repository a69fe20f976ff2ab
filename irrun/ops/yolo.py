"""YOLO heads: RegionYolo-1 and ReorgYolo-2, as the CPU plugin computes them (class docstrings,
specs/errata/detection.md).
"""
from __future__ import annotations

import numpy as np

from .. import etypes
from ..errors import ModelError, ShapeError
from ..registry import Op, TensorType, register
from ..shapes import dim_bounds, dim_mul, format_shape, make_dim, normalize_axis
from .common import check_rank


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
        check_rank(data, 4, "data")
        if not data.etype.is_float and data.etype is not etypes.dynamic:
            raise ShapeError(f"data must be floating point, got {data.etype}")
        if data.shape is None:
            return [TensorType(None, data.etype)]
        a = self.attrs
        if a.do_softmax and a.num <= 0:
            # (0 is what OpenVINO's reader takes a missing num as; its CPU plugin then divides by it)
            raise ShapeError(f"num={a.num}: with do_softmax the layer has num regions per cell, so num must be "
                             f"at least 1")
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
        check_rank(data, 4, "data")
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
