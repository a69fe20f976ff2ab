"""ExtractImagePatches-3 (image -> patches as channels) and Col2Im-15 (column blocks -> image, summed).

What OpenVINO 2026.4.1 computes, beyond the op specs (specs/errata/misc.md):

* ExtractImagePatches: output channel (i * size_cols + j) * C + c holds tap (i, j) of
  channel c; pads are zeros.  An image smaller than a patch gives an empty axis (0), not
  an error: out = max(0, ceil((x - rate * (size - 1)) / stride)) with auto_pad=valid,
  ceil(x / stride) with same_upper/same_lower (the odd pad unit at the end / beginning).
* Col2Im: input channel c * kh * kw + i * kw + j is tap (i, j) of output channel c; the
  column blocks run row-major over the padded output; overlapping taps add up (f16 in f32).
"""
from __future__ import annotations

import numpy as np

from .. import etypes
from ..errors import ModelError, ShapeError
from ..registry import Op, TensorType, register
from ..shapes import ANY, dim_map, dim_merge, dim_mul, format_shape
from .window import axis_output, resolve_pads

_SPATIAL = 2


def _taps(kernel) -> list[tuple[int, int]]:
    return [(i, j) for i in range(kernel[0]) for j in range(kernel[1])]


def _tap_window(i: int, j: int, rates, strides, counts) -> tuple[slice, slice]:
    """Where tap (i, j) of every block sits in the padded image."""
    return tuple(slice(t * r, t * r + (n - 1) * s + 1, s) for t, r, s, n in zip((i, j), rates, strides, counts))


# ---------------------------------------------------------------- ExtractImagePatches

def _patch_count(x: int, size: int, stride: int, rate: int, auto_pad: str) -> int:
    if auto_pad == "valid":
        return max(axis_output(x, size, stride, rate, 0, 0), 0)
    return -(-x // stride)


@register("ExtractImagePatches", 3)
class ExtractImagePatches(Op):
    """Each sizes[0] x sizes[1] patch (taps `rates` apart, patches `strides` apart) becomes a
    column of C * sizes[0] * sizes[1] channels."""

    def spatial_rank(self, inputs):
        return None   # sizes, strides and rates always have two values

    def _check_attrs(self):
        for name in ("sizes", "strides", "rates"):
            values = self.attrs[name]
            if len(values) != _SPATIAL:
                raise ShapeError(f"{name} must have 2 values [rows, cols], got {list(values)}")
            if min(values) < 1:
                raise ShapeError(f"{name} must be positive, got {list(values)}")

    def infer(self, inputs):
        self._check_attrs()
        data = inputs[0]
        if data.etype.kind == "string":
            raise ShapeError(f"ExtractImagePatches does not take {data.etype}")
        if data.rank is None:
            return [TensorType((ANY,) * 4, data.etype)]
        if data.rank != 4:
            raise ShapeError(f"image must be 4D [N, C, H, W], got {format_shape(data.shape)}")
        a = self.attrs
        dims = [data.shape[0], dim_mul(data.shape[1], a.sizes[0] * a.sizes[1])]
        notes = {1: f"C * {a.sizes[0]} * {a.sizes[1]}"}
        for axis, (x, k, s, r) in enumerate(zip(data.shape[2:], a.sizes, a.strides, a.rates), start=2):
            dims.append(dim_map(lambda v, k=k, s=s, r=r: _patch_count(v, k, s, r, a.auto_pad), x))
            notes[axis] = (f"max(0, ceil(({x} - {r} * ({k} - 1)) / {s}))" if a.auto_pad == "valid"
                           else f"ceil({x} / {s}) with auto_pad={a.auto_pad}")
        return [TensorType(tuple(dims), data.etype, notes=notes)]

    def run(self, image):
        self._check_attrs()
        a = self.attrs
        n, c, height, width = image.shape
        counts = [_patch_count(x, k, s, r, a.auto_pad) for x, k, s, r in zip((height, width), a.sizes, a.strides,
                                                                               a.rates)]
        out = np.zeros((n, a.sizes[0], a.sizes[1], c, *counts), dtype=image.dtype)
        depth = a.sizes[0] * a.sizes[1] * c
        if out.size == 0:
            return out.reshape(n, depth, *counts)
        begins, ends = resolve_pads((height, width), a.sizes, a.strides, a.rates, (0, 0), (0, 0), a.auto_pad)
        padded = np.pad(image, [(0, 0), (0, 0)] + list(zip(begins, ends)))
        for i, j in _taps(a.sizes):
            out[:, i, j] = padded[(slice(None), slice(None)) + _tap_window(i, j, a.rates, a.strides, counts)]
        return out.reshape(n, depth, *counts)


# ---------------------------------------------------------------- Col2Im

def _block_counts(size, kernel, strides, dilations, pads_begin, pads_end) -> list[int]:
    """Blocks per spatial axis: windows of the padded output, as a convolution would slide them."""
    return [max(axis_output(x, k, s, d, pb, pe), 0)
            for x, k, s, d, pb, pe in zip(size, kernel, strides, dilations, pads_begin, pads_end)]


def _pair(t: TensorType, name: str) -> tuple[int, int] | None:
    if t.etype is not etypes.dynamic and t.etype.name not in ("i32", "i64"):
        raise ShapeError(f"{name} must be i32 or i64, got {t.etype}")
    if t.shape is not None and (len(t.shape) != 1 or t.shape[0] not in (2, ANY)):
        raise ShapeError(f"{name} must be a 1D tensor of 2 values, got {format_shape(t.shape)}")
    return None if t.value is None else tuple(int(v) for v in np.asarray(t.value).reshape(-1))


@register("Col2Im", 15)
class Col2Im(Op):
    """Sum sliding blocks [N, C * kh * kw, L] back into an image [N, C, H, W] (the inverse of im2col)."""

    def spatial_rank(self, inputs):
        return _SPATIAL

    def infer(self, inputs):
        data, size_in, kernel_in = inputs
        size, kernel = _pair(size_in, "output_size"), _pair(kernel_in, "kernel_size")
        if etypes.dynamic not in (size_in.etype, kernel_in.etype) and size_in.etype is not kernel_in.etype:
            raise ShapeError(f"output_size ({size_in.etype}) and kernel_size ({kernel_in.etype}) must have the same "
                             f"element type")
        a = self.attrs
        if min(a.strides) < 1 or min(a.dilations) < 1:
            raise ShapeError(f"strides {list(a.strides)} and dilations {list(a.dilations)} must be positive")
        if data.rank is None:
            return [TensorType(None, data.etype)]
        if data.rank not in (2, 3):
            raise ShapeError(f"data must be 2D [C * kh * kw, L] or 3D [N, C * kh * kw, L], got "
                             f"{format_shape(data.shape)}")
        columns, blocks = data.shape[-2:]
        channels = ANY
        if kernel is not None:
            if min(kernel) < 1:
                raise ShapeError(f"kernel_size must be positive, got {list(kernel)}")
            taps = kernel[0] * kernel[1]
            if isinstance(columns, int):
                if columns % taps:
                    raise ShapeError(f"data dim {data.rank - 2} ({columns}) is not divisible by kh * kw = {taps}")
                channels = columns // taps
            else:
                channels = dim_map(lambda v: v // taps, columns)
            if size is not None:
                expected = int(np.prod(_block_counts(size, kernel, a.strides, a.dilations, a.pads_begin, a.pads_end)))
                try:
                    dim_merge(blocks, expected)
                except ShapeError:
                    raise ShapeError(f"data {format_shape(data.shape)} has {blocks} blocks; output_size "
                                     f"{list(size)}, kernel_size {list(kernel)}, strides, dilations and pads give "
                                     f"{expected}") from None
        spatial = (ANY, ANY) if size is None else size
        batch = data.shape[:1] if data.rank == 3 else ()
        return [TensorType(batch + (channels,) + tuple(spatial), data.etype)]

    def run(self, data, output_size, kernel_size):
        a = self.attrs
        size = [int(v) for v in output_size.reshape(-1)]
        kernel = [int(v) for v in kernel_size.reshape(-1)]
        unbatched = data.ndim == 2
        columns = data[None] if unbatched else data
        counts = _block_counts(size, kernel, a.strides, a.dilations, a.pads_begin, a.pads_end)
        n, rows, blocks = columns.shape
        if blocks != counts[0] * counts[1] or rows % (kernel[0] * kernel[1]):
            raise ModelError(f"Col2Im data {format_shape(data.shape)} does not fit output_size {size} and kernel_size "
                             f"{kernel}: {counts[0]} x {counts[1]} blocks of {kernel[0]} x {kernel[1]} taps")
        acc = np.float32 if data.dtype == np.float16 else data.dtype
        channels = rows // (kernel[0] * kernel[1])
        blocks_by_tap = columns.astype(acc).reshape(n, channels, kernel[0], kernel[1], *counts)
        padded_size = [x + pb + pe for x, pb, pe in zip(size, a.pads_begin, a.pads_end)]
        padded = np.zeros((n, channels, *padded_size), dtype=acc)
        with np.errstate(over="ignore"):
            for i, j in _taps(kernel):
                padded[(slice(None), slice(None)) + _tap_window(i, j, a.dilations, a.strides, counts)] += \
                    blocks_by_tap[:, :, i, j]
        crop = tuple(slice(pb, pb + x) for pb, x in zip(a.pads_begin, size))
        out = padded[(slice(None), slice(None)) + crop].astype(data.dtype)
        return out[0] if unbatched else out
