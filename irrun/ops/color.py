"""Colour conversion: NV12toRGB, NV12toBGR, I420toRGB, I420toBGR (all version 8) and the
encoders RGBtoNV12, BGRtoNV12 (version 17).

YUV 4:2:0 images in NHWC layout (one channel) become interleaved RGB or BGR
images of the same height and width.  Chroma is sampled once per 2x2 block.
NV12 keeps U and V interleaved in one plane; I420 keeps them in two planes.
Either comes as one tensor (Y on top of the chroma, 3/2 of the image height)
or as separate planes.

Arithmetic, as OpenVINO does it (specs/errata/misc2.md): float32 throughout,
with the BT.601 limited-range coefficients

    r = 1.164 (y - 16) + 1.596 (v - 128)
    g = 1.164 (y - 16) - 0.391 (u - 128) - 0.813 (v - 128)
    b = 1.164 (y - 16) + 2.018 (u - 128)

then clamped to [0, 255]; u8 results round half to even first (the CPU
plugin; the reference kernel's std::round would round halves away from 0).
f16 and f64 images are computed in f32 too.

The encoders (OpenVINO 2026.4.1 reads them but has no kernel for them; this is
its reference source) compute per pixel, in float32,

    y = 0.257 r + 0.504 g + 0.098 b + 16
    u = -0.148 r - 0.291 g + 0.439 b + 128
    v = 0.439 r - 0.368 g - 0.071 b + 128

each clamped to [0, 255] (u8: rounded half away from zero first); U and V of a
2x2 block are the mean of its four clamped values (u8: rounded again).
"""
from __future__ import annotations

import numpy as np

from .. import etypes
from ..errors import ShapeError
from ..registry import Op, TensorType, register
from ..shapes import ANY, DimLike, dim_map, dim_merge, dims_compatible, format_shape, make_dim
from .common import round_half_away

_F32 = np.float32


# ---------------------------------------------------------------- shape arithmetic

def _scaled(d: DimLike, num: int, den: int) -> DimLike | None:
    """d * num / den with OpenVINO's interval rule (bounds round inward); None if no value fits."""
    if isinstance(d, int):
        return None if d * num % den else d * num // den
    lo = -(-d.lo * num // den)
    hi = None if d.hi is None else d.hi * num // den
    if hi is not None and hi < lo:
        return None
    return make_dim(lo, hi)


def _may_be_even(d: DimLike) -> bool:
    if isinstance(d, int):
        return d % 2 == 0
    return d.hi is None or d.lo + d.lo % 2 <= d.hi


def _check_plane(t: TensorType, what: str, channels: int) -> tuple[DimLike, ...] | None:
    """The shape of an NHWC plane (None: dynamic rank), checked for rank 4 and its channel count."""
    if t.shape is None:
        return None
    if len(t.shape) != 4:
        raise ShapeError(f"{what} plane must have 4 dimensions (N, H, W, C), got {format_shape(t.shape)}")
    if not dims_compatible(t.shape[3], channels):
        raise ShapeError(f"{what} plane must have {channels} channel{'s' if channels > 1 else ''}, "
                         f"got {format_shape(t.shape)}")
    return tuple(t.shape)


def _merge_planes(image: list[DimLike], chroma: tuple[DimLike, ...], what: str, shapes: str) -> list[DimLike]:
    """Merge N, H, W of the image with a chroma plane's (whose H and W are half as large)."""
    doubled = (chroma[0], dim_map(lambda n: 2 * n, chroma[1]), dim_map(lambda n: 2 * n, chroma[2]))
    try:
        return [dim_merge(a, b) for a, b in zip(image[:3], doubled)] + image[3:]
    except ShapeError:
        raise ShapeError(f"the Y plane and the {what} do not fit one image: {shapes} (chroma planes have "
                         f"half the height and width of Y)") from None


class _ConvertColor(Op):
    """YUV 4:2:0 -> RGB/BGR; subclasses name the chroma layout and the channel order."""

    chroma_planes: int          # separate chroma inputs when not single-plane: NV12 1 (UV), I420 2 (U, V)
    bgr: bool = False

    @property
    def _name(self) -> str:
        return self.spec.type

    def infer(self, inputs):
        etype = inputs[0].etype
        for t in inputs[1:]:
            if etype is etypes.dynamic:
                etype = t.etype
            elif t.etype is not etypes.dynamic and t.etype is not etype:
                raise ShapeError(f"{self._name} planes must share one element type, got "
                                 f"{', '.join(str(i.etype) for i in inputs)}")
        if not (etype is etypes.dynamic or etype.is_float or etype is etypes.u8):
            raise ShapeError(f"{self._name} takes u8 or floating-point images, got {etype}")
        if len(inputs) not in (1, 1 + self.chroma_planes):
            raise ShapeError(f"{self._name} takes 1 or {1 + self.chroma_planes} planes, got {len(inputs)}")
        y = _check_plane(inputs[0], "Y" if len(inputs) > 1 else "the image", 1)
        out = list(y) if y is not None else [ANY] * 4
        shapes = ", ".join(format_shape(t.shape) for t in inputs)
        if len(inputs) == 1:
            height = _scaled(out[1], 2, 3)
            if height is None:
                raise ShapeError(f"{self._name}: the single-plane image {format_shape(y)} must have a height "
                                 f"divisible by 3 (2/3 of it is Y, 1/3 chroma)")
            notes = {1: f"{height} = 2/3 of the height {out[1]} of the single plane (Y, then chroma)"}
            out[1] = height
        else:
            notes = None
            chroma = self._chroma_shape(inputs[1:], shapes)
            if chroma is not None:
                out = _merge_planes(out, chroma, "chroma planes" if self.chroma_planes > 1 else "UV plane", shapes)
        for axis, what in ((1, "height"), (2, "width")):
            if not _may_be_even(out[axis]):
                raise ShapeError(f"{self._name}: image {what} {out[axis]} must be even ({shapes})")
        out[3] = 3
        return [TensorType(tuple(out), etype, notes=notes)]

    def _chroma_shape(self, planes: list[TensorType], shapes: str) -> tuple[DimLike, ...] | None:
        if self.chroma_planes == 1:
            return _check_plane(planes[0], "UV", 2)
        u, v = (_check_plane(t, name, 1) for t, name in zip(planes, ("U", "V")))
        if u is None or v is None:
            return u or v
        try:
            return tuple(dim_merge(a, b) for a, b in zip(u, v))
        except ShapeError:
            raise ShapeError(f"{self._name}: the U and V planes differ: {shapes}") from None

    def run(self, *planes):
        y, u, v = self._split(*planes)
        return _to_rgb(y, u, v, planes[0].dtype, self.bgr)

    def _split(self, *planes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Y (N, H, W) and the U, V planes (N, H/2, W/2) of the input."""
        if len(planes) > 1:
            y = planes[0][..., 0]
            u, v = (planes[1][..., 0], planes[1][..., 1]) if self.chroma_planes == 1 else \
                (planes[1][..., 0], planes[2][..., 0])
        else:
            image = planes[0]
            n, rows, w = image.shape[:3]
            h = rows * 2 // 3
            flat = image.reshape(n, -1)
            y = flat[:, :h * w].reshape(n, h, w)
            chroma = flat[:, h * w:]
            if self.chroma_planes == 1:
                uv = chroma.reshape(n, h // 2, w // 2, 2)
                u, v = uv[..., 0], uv[..., 1]
            else:
                quarter = h * w // 4
                u = chroma[:, :quarter].reshape(n, h // 2, w // 2)
                v = chroma[:, quarter:].reshape(n, h // 2, w // 2)
        half = (y.shape[0], y.shape[1] // 2, y.shape[2] // 2)
        if u.shape != half or v.shape != half:
            raise ShapeError(f"{self._name}: chroma planes {list(u.shape)}, {list(v.shape)} do not fit "
                             f"Y {list(y.shape)}")
        return y, u, v


def _to_rgb(y: np.ndarray, u: np.ndarray, v: np.ndarray, dtype: np.dtype, bgr: bool) -> np.ndarray:
    """Interleaved (N, H, W, 3) RGB (or BGR) from Y (N, H, W) and half-size U, V."""
    def full_size(chroma):
        return np.repeat(np.repeat(chroma, 2, axis=1), 2, axis=2).astype(_F32) - _F32(128)
    c = y.astype(_F32) - _F32(16)
    d, e = full_size(u), full_size(v)
    luma = _F32(1.164) * c
    # Same operation order as OpenVINO, so u8 results round identically.
    r = luma + _F32(1.596) * e
    g = luma - _F32(0.391) * d - _F32(0.813) * e
    b = luma + _F32(2.018) * d
    out = np.stack((b, g, r) if bgr else (r, g, b), axis=-1)
    if dtype == np.uint8:
        out = np.rint(out)
    return np.clip(out, _F32(0), _F32(255)).astype(dtype)


@register("NV12toRGB", 8)
class NV12toRGB(_ConvertColor):
    chroma_planes = 1


@register("NV12toBGR", 8)
class NV12toBGR(_ConvertColor):
    chroma_planes = 1
    bgr = True


@register("I420toRGB", 8)
class I420toRGB(_ConvertColor):
    chroma_planes = 2


@register("I420toBGR", 8)
class I420toBGR(_ConvertColor):
    chroma_planes = 2
    bgr = True


# ---------------------------------------------------------------- RGB/BGR -> NV12

class _EncodeNV12(Op):
    """RGB (or BGR) NHWC image -> NV12: one [N, 3H/2, W, 1] tensor, or Y [N, H, W, 1] and UV [N, H/2, W/2, 2]."""

    bgr: bool = False

    def infer(self, inputs):
        t = inputs[0]
        name = self.spec.type
        if not (t.etype is etypes.dynamic or t.etype.is_float or t.etype is etypes.u8):
            raise ShapeError(f"{name} takes u8 or floating-point images, got {t.etype}")
        try:
            image = _check_plane(t, "the image", 3)
        except ShapeError as exc:
            raise ShapeError(f"{name}: {exc.message}") from None
        n, h, w = image[:3] if image is not None else (ANY, ANY, ANY)
        for d, what in ((h, "height"), (w, "width")):
            if not _may_be_even(d):
                raise ShapeError(f"{name}: image {what} {d} must be even ({format_shape(image)})")
        if self.attrs.single_plane:
            rows = _scaled(h, 3, 2)
            return [TensorType((n, rows, w, 1), t.etype, notes={1: f"{rows} = 3/2 of the image height {h} "
                                                                   f"(Y, then interleaved UV)"})]
        return [TensorType((n, h, w, 1), t.etype),
                TensorType((n, _scaled(h, 1, 2), _scaled(w, 1, 2), 2), t.etype,
                           notes={1: "half the image height", 2: "half the image width"})]

    def run(self, image):
        if image.ndim != 4 or image.shape[3] != 3 or image.shape[1] % 2 or image.shape[2] % 2:
            raise ShapeError(f"{self.spec.type}: the image must be [N, H, W, 3] with even H and W, "
                             f"got {list(image.shape)}")
        y, uv = _to_nv12(image, self.bgr)
        if not self.attrs.single_plane:
            return y[..., None], uv
        n, h, w = y.shape
        return np.concatenate([y.reshape(n, -1), uv.reshape(n, -1)], axis=1).reshape(n, h * 3 // 2, w, 1)


def _to_nv12(image: np.ndarray, bgr: bool) -> tuple[np.ndarray, np.ndarray]:
    """Y (N, H, W) and interleaved UV (N, H/2, W/2, 2) of an (N, H, W, 3) image, in its dtype."""
    pixels = image.astype(_F32)
    r, g, b = (pixels[..., i] for i in ((2, 1, 0) if bgr else (0, 1, 2)))
    rounds = image.dtype == np.uint8

    def clamp(x):
        return np.clip(round_half_away(x) if rounds else x, _F32(0), _F32(255))
    # The reference kernel's operation order, so that u8 results round identically.
    y = clamp(_F32(0.257) * r + _F32(0.504) * g + _F32(0.098) * b + _F32(16))
    u = clamp(_F32(-0.148) * r - _F32(0.291) * g + _F32(0.439) * b + _F32(128))
    v = clamp(_F32(0.439) * r - _F32(0.368) * g - _F32(0.071) * b + _F32(128))
    n, h, w = y.shape

    def block_mean(c):
        q = c.reshape(n, h // 2, 2, w // 2, 2)
        mean = (((q[:, :, 0, :, 0] + q[:, :, 0, :, 1]) + q[:, :, 1, :, 0]) + q[:, :, 1, :, 1]) / _F32(4)
        return round_half_away(mean) if rounds else mean
    uv = np.stack([block_mean(u), block_mean(v)], axis=-1)
    return y.astype(image.dtype), uv.astype(image.dtype)


@register("RGBtoNV12", 17)
class RGBtoNV12(_EncodeNV12):
    pass


@register("BGRtoNV12", 17)
class BGRtoNV12(_EncodeNV12):
    bgr = True
