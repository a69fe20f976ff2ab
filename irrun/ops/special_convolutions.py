"""DeformableConvolution (v1, v8) and BinaryConvolution: convolutions whose taps are not plain
reads of the input, built on the shape function and kernels of `convolution`."""
from __future__ import annotations

from math import prod

import numpy as np

from .. import etypes
from ..errors import ShapeError
from ..registry import TensorType, register
from ..shapes import ANY, DimLike, dim_merge, dim_mul, dims_compatible, format_shape
from .convolution import Geometry, _ConvolutionFamily, _element_type, _in_batch_slices, _to_output, conv_forward
from .window import forward_spatial, resolve_pads


# ---------------------------------------------------------------- DeformableConvolution
# 2-D convolution whose every tap reads the input at a learned offset:
#
#     y = oh * stride - pad_begin + kh * dilation + offsets[n, dg, 2 * (kh * KW + kw),     oh, ow]
#     x = ow * stride - pad_begin + kw * dilation + offsets[n, dg, 2 * (kh * KW + kw) + 1, oh, ow]
#
# sampled bilinearly (input channel c belongs to deformable group c // (C / deformable_group)),
# times mask[n, dg, kh * KW + kw, oh, ow] in v8.  A sample outside [0, H) x [0, W) is 0; with
# bilinear_interpolation_pad (v8) it is taken on (-1, H) x (-1, W), neighbours outside the map
# counting as 0.  The samples form an im2col matrix for one grouped matmul.

def _deformable_neighbours(pos: np.ndarray, size: int, padded: bool):
    """Per sample along one axis: (low, high) indices clipped into the map and their weights (0 off the map)."""
    low = np.floor(pos)
    if padded:
        high = low + 1
    else:
        low, high = np.maximum(low, 0), np.minimum(np.ceil(pos), size - 1)
    frac = (pos - low).astype(np.float32)
    w_low = np.where(low >= 0, np.float32(1) - frac, np.float32(0))
    w_high = np.where(high < size, frac, np.float32(0))
    return (np.clip(low, 0, size - 1).astype(np.int64), np.clip(high, 0, size - 1).astype(np.int64),
            w_low.astype(np.float32), w_high.astype(np.float32))


def _deformable_columns(x, offsets, mask, kernel, geo: Geometry, pads_begin, groups: int, padded: bool):
    """Bilinear samples [N, C * KH * KW, OH * OW] (channel-major, like im2col) for every tap and output."""
    n, c, h, w = x.shape
    kh, kw = kernel
    oh, ow = offsets.shape[2:]
    taps = kh * kw
    shifts = offsets.reshape(n, groups, taps, 2, oh, ow)
    tap_y, tap_x = np.divmod(np.arange(taps), kw)
    base_y = (np.arange(oh) * geo.strides[0] - pads_begin[0])[None, :] + (tap_y * geo.dilations[0])[:, None]
    base_x = (np.arange(ow) * geo.strides[1] - pads_begin[1])[None, :] + (tap_x * geo.dilations[1])[:, None]
    y = base_y[:, :, None].astype(np.float32) + shifts[:, :, :, 0]                      # (N, DG, K, OH, OW)
    xs = base_x[:, None, :].astype(np.float32) + shifts[:, :, :, 1]
    if padded:
        inside = (np.trunc(y) > -1) & (np.trunc(y) < h) & (np.trunc(xs) > -1) & (np.trunc(xs) < w)
    else:
        inside = (y >= 0) & (y < h) & (xs >= 0) & (xs < w)
    scale = inside.astype(np.float32)
    if mask is not None:
        scale = scale * mask.reshape(n, groups, taps, oh, ow)
    y_low, y_high, wy_low, wy_high = _deformable_neighbours(np.where(inside, y, 0), h, padded)
    x_low, x_high, wx_low, wx_high = _deformable_neighbours(np.where(inside, xs, 0), w, padded)
    if np.isfinite(x).all():
        return _gathered_channels_last(x, (y_low, y_high, wy_low, wy_high), (x_low, x_high, wx_low, wx_high), scale)
    maps = x.reshape(n, groups, 1, c // groups, h * w)
    columns = np.zeros((n, groups, c // groups, taps, oh, ow), np.float32)
    for yi, wy in ((y_low, wy_low), (y_high, wy_high)):
        for xi, wx in ((x_low, wx_low), (x_high, wx_high)):
            weight = wy * wx * scale                                                   # (N, DG, K, OH, OW)
            index = (yi * w + xi).reshape(n, groups, 1, 1, -1)
            values = np.take_along_axis(maps, index, axis=-1).reshape(n, groups, c // groups, taps, oh, ow)
            # A zero weight contributes nothing, even next to a NaN or inf.
            columns += np.where(weight[:, :, None] == 0, np.float32(0), weight[:, :, None] * values)
    return columns.reshape(n, c * taps, oh * ow)


def _gathered_channels_last(x, rows, cols, scale) -> np.ndarray:
    """`_deformable_columns` of a finite map: each neighbour's row of channels gathered from a
    channels-last copy (contiguous), where the channel-major gather read a channel at a time, and
    no guard for zero weights (a finite value times 0 is 0): the same sums in the same order
    (64 channels at 32 x 32, 3 x 3: 15.5 -> 4.0-4.2 ms, OpenVINO 0.7-1.0)."""
    n, c, h, w = x.shape
    groups, taps, oh, ow = scale.shape[1:]
    per_group = c // groups
    maps = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).reshape(n, h * w, c)
    columns = np.zeros((n, taps * oh * ow, c), np.float32)
    y_low, y_high, wy_low, wy_high = rows
    x_low, x_high, wx_low, wx_high = cols
    for yi, wy in ((y_low, wy_low), (y_high, wy_high)):
        for xi, wx in ((x_low, wx_low), (x_high, wx_high)):
            weight = (wy * wx * scale).reshape(n, groups, -1, 1)                       # (N, DG, K * O, 1)
            index = (yi * w + xi).reshape(n, groups, -1)
            for b in range(n):
                for g in range(groups):
                    channels = slice(g * per_group, (g + 1) * per_group)
                    columns[b, :, channels] += weight[b, g] * maps[b, index[b, g], channels]
    # [N, K, O, C] -> [N, C * K, O], im2col's order
    return columns.reshape(n, taps, oh * ow, c).transpose(0, 3, 1, 2).reshape(n, c * taps, oh * ow)


@register("DeformableConvolution", 1, 8)
class DeformableConvolution(_ConvolutionFamily):
    """Inputs data [N, C, H, W], offsets [N, 2 * DG * KH * KW, OH, OW], filter [C_out, C / group, KH, KW]
    and, in v8, an optional mask [N, DG * KH * KW, OH, OW]."""

    def spatial_rank(self, inputs):
        return 2

    def infer(self, inputs):
        data, offsets, filt = inputs[:3]
        a = self.attrs
        if a.group < 1 or a.deformable_group < 1:
            raise ShapeError(f"group ({a.group}) and deformable_group ({a.deformable_group}) must be positive")
        names = ("data", "offsets", "filter", "mask")
        for t, name in zip(inputs, names):
            if t.rank not in (None, 4):
                raise ShapeError(f"{name} must be 4-D, got {format_shape(t.shape)}")
        etype = _element_type(data, filt)
        dshape = data.shape or (ANY,) * 4
        fshape = filt.shape or (ANY,) * 4
        self._check_channels(dshape, fshape, offsets, inputs[3] if len(inputs) > 3 else None)
        geo = self.geometry(2)
        spatial, notes = forward_spatial(dshape[2:], fshape[2:], geo)
        batch = dshape[0]
        for t, name in ((offsets, "offsets"), (inputs[3] if len(inputs) > 3 else None, "mask")):
            if t is None or t.shape is None:
                continue
            batch = _merge_dims(batch, t.shape[0], f"data {format_shape(dshape)} and {name} "
                                f"{format_shape(t.shape)} differ in the batch dimension")
            for axis, d in enumerate(spatial):
                if not dims_compatible(d, t.shape[2 + axis]):
                    raise ShapeError(f"{name} {format_shape(t.shape)}: spatial dimensions must match the output's "
                                     f"{format_shape(tuple(spatial))}")
        return [TensorType((batch, fshape[0], *spatial), etype, notes=notes)]

    def _check_channels(self, dshape, fshape, offsets, mask) -> None:
        a = self.attrs
        channels = dshape[1]
        if isinstance(channels, int) and channels % a.group:
            raise ShapeError(f"data {format_shape(dshape)}: {channels} channels are not divisible by group {a.group}")
        if isinstance(fshape[0], int) and fshape[0] % a.group:
            raise ShapeError(f"filter {format_shape(fshape)}: {fshape[0]} output channels are not divisible by "
                             f"group {a.group}")
        if not dims_compatible(channels, dim_mul(fshape[1], a.group)):
            raise ShapeError(f"data {format_shape(dshape)} has {channels} channels, filter {format_shape(fshape)} "
                             f"expects {dim_mul(fshape[1], a.group)} (group={a.group} x {fshape[1]})")
        taps = dim_mul(fshape[2], fshape[3])
        for t, name, per_tap in ((offsets, "offsets", 2), (mask, "mask", 1)):
            if t is None or t.shape is None:
                continue
            expected = dim_mul(taps, per_tap * a.deformable_group)
            if not dims_compatible(t.shape[1], expected):
                raise ShapeError(f"{name} {format_shape(t.shape)} must have {expected} channels ({per_tap} x "
                                 f"deformable_group {a.deformable_group} x kernel taps {taps})")
            if isinstance(t.shape[1], int) and t.shape[1] % a.deformable_group:
                raise ShapeError(f"{name} {format_shape(t.shape)}: channels are not divisible by deformable_group "
                                 f"{a.deformable_group}")

    def run(self, x, offsets, w, mask=None):
        a = self.attrs
        geo = self.geometry(2)
        groups, kernel = a.group, w.shape[2:]
        pads_begin, _ = resolve_pads(x.shape[2:], kernel, geo.strides, geo.dilations, geo.pads_begin, geo.pads_end,
                                     geo.auto_pad)
        padded = bool(self.attrs.get("bilinear_interpolation_pad"))
        data, shifts = x.astype(np.float32), offsets.astype(np.float32)
        scale = None if mask is None else mask.astype(np.float32)
        filters = w.astype(np.float32).reshape(groups, w.shape[0] // groups, -1)             # [G, Og, Cg * K]
        oh, ow = offsets.shape[2:]

        def convolve(idx):
            columns = _deformable_columns(data[idx], shifts[idx], None if scale is None else scale[idx], kernel,
                                          geo, pads_begin, a.deformable_group, padded)
            grouped = columns.reshape(columns.shape[0], groups, -1, oh * ow)
            return filters @ grouped                                                          # [n, G, Og, O]

        per_sample = x.shape[1] * prod(kernel) * oh * ow
        out = _in_batch_slices(convolve, np.arange(x.shape[0]), per_sample)
        return _to_output(out.reshape(x.shape[0], w.shape[0], oh, ow), x.dtype)


def _merge_dims(a: DimLike, b: DimLike, message: str) -> DimLike:
    try:
        return dim_merge(a, b)
    except ShapeError:
        raise ShapeError(message) from None


# ---------------------------------------------------------------- BinaryConvolution
# xnor-popcount: input and filter values are bits, bit 1 meaning +1 and 0 meaning -1; each
# output is the sum of +1 (equal bits) and -1 (different bits) over the window, 2 * popcount(xnor) - taps.
# An input bit is x > 0 (inputs should be 0 or 1; two-level FakeQuantize outputs binarize
# the same way in OpenVINO's CPU plugin).  Padded taps add nothing with pad_value 0 (as the CPU
# plugin computes), else the sign of pad_value.  Integer outputs wrap, as in OpenVINO's reference.

@register("BinaryConvolution", 1)
class BinaryConvolution(_ConvolutionFamily):
    def element_type(self, data: TensorType, filt: TensorType):
        if data.etype is not etypes.dynamic and not (data.etype.is_float or data.etype.is_integral):
            raise ShapeError(f"data element type {data.etype} is not numeric")
        return data.etype

    def infer(self, inputs):
        for t, name in zip(inputs, ("data", "filter")):
            if t.rank not in (None, 4):
                raise ShapeError(f"{name} must be 4-D (2-D convolution only), got {format_shape(t.shape)}")
        return super().infer(inputs)

    def run(self, x, w):
        self.check_channels(x.shape, w.shape)
        geo = self.geometry(2)
        pb, pe = resolve_pads(x.shape[2:], w.shape[2:], geo.strides, geo.dilations, geo.pads_begin, geo.pads_end,
                              geo.auto_pad)
        signs = np.where(x > 0, np.float32(1), np.float32(-1))
        pad = np.float32(np.sign(self.attrs.pad_value))
        signs = np.pad(signs, [(0, 0), (0, 0)] + list(zip(pb, pe)), constant_values=pad)
        filters = np.where(w > 0, np.float32(1), np.float32(-1))[None]
        unpadded = Geometry(geo.strides, geo.dilations, (0, 0), (0, 0), (0, 0), "explicit")
        out = conv_forward(signs, filters, unpadded)
        # The sums are small exact integers; an integer output type wraps them (reference: T_IN arithmetic).
        return out.astype(x.dtype) if x.dtype.kind == "f" else out.astype(np.int64).astype(x.dtype)
