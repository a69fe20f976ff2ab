"""Resampling: Interpolate-1, Interpolate-4 and Interpolate-11.

Every mode is separable: each resized axis gets a table of source indices and
weights per output position (`_AxisTaps`), and the axes are resampled one
after the other by a gather and a weighted sum.  The tables follow the CPU
plugin's arithmetic, which is float32 throughout: the source coordinate of
output index `o` is computed in float32 from the per-axis scale, and that is
what decides a nearest index or a cubic fraction.

What OpenVINO 2026.4.1 computes, beyond the op specs (specs/errata/resampling.md):

* The per-axis scale is the given scale in `scales` mode and float32
  out / padded-in in `sizes` mode; an axis whose size does not change is
  copied.  Scales mode sizes are `int(float32(n) * (scale + 1e-6f))`.
* Data is padded with zeros (pads index dims of the full rank, resized to it).
* Integer results are rounded half to even (`linear`: half away from zero,
  as the reference) and saturated; floats narrower than f32 are computed in
  f32.  Nearest copies values exactly.
* `linear` weights are the triangle filter normalised per output; with
  antialias and at least one axis downsampled, every axis' filter is
  stretched by its scale (the reference; the CPU plugin runs `linear` on
  rank < 5 as `linear_onnx` and drops antialias).
* Pillow modes use the centre (o + 0.5) / scale whatever
  coordinate_transformation_mode says and run the last of the two axes
  first; for i8/u8 4-D data the CPU plugin keeps the intermediate in the data
  type.  bicubic_pillow uses cube_coeff (the reference; the CPU plugin fixes
  it at -0.5).
* Summation order follows the CPU plugin (fused multiply-adds in its JIT
  kernels), so integer results agree on exact .5 ties; a float32 sum that
  lands within an ulp of .5 can still round the other way.  Float32 data of
  a static shape resized linearly or cubically takes float32 kernels made at
  load instead (irrun/ops/weighted_resize.py: the same taps, each product and
  sum rounded on its own, 3-7x faster).
* Interpolate-1 runs as the CPU plugin converts it to Interpolate-4: sizes
  mode, nearest_mode simple, linear as linear_onnx below rank 5, coordinates
  align_corners when asked, else half_pixel for linear without pads unless the
  data is 4-D resized on {2, 3}, else asymmetric.  Mode `area` has no kernel
  in OpenVINO.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from .. import etypes, partial_values
from ..errors import ShapeError, UnsupportedError
from ..registry import Op, TensorType, register
from ..shapes import ANY, DimLike, Shape, dim_map, dim_merge, dims_compatible, format_shape, is_static_dim
from . import nearest_resize, weighted_resize
from .common import channels_first_view, channels_last_view, round_half_away

_F32 = np.float32
_HALF = np.float32(0.5)
_SCALE_EPSILON = np.float32(1e-6)     # added to a scale before it sizes an axis
_DATA_TYPES = ("f32", "f16", "bf16", "f64", "i8", "u8", "i32", "i64")
_INDEX_TYPES = ("i32", "i64", "u32", "u64")
_SCALE_TYPES = ("f32", "f16", "bf16")
_PILLOW = ("bilinear_pillow", "bicubic_pillow")


class Method(NamedTuple):
    """How to resample, with Interpolate-1's attributes already mapped to Interpolate-4's."""

    mode: str
    transform: str = "half_pixel"        # coordinate_transformation_mode
    nearest_mode: str = "round_prefer_floor"
    antialias: bool = False
    cube_coeff: float = -0.75


# ---------------------------------------------------------------- coordinates

def _source_coords(n_out: int, n_in: int, scale: float, transform: str) -> np.ndarray:
    """float32 coordinate in the (padded) input of each output index along one axis."""
    o = np.arange(n_out, dtype=_F32)
    scale = _F32(scale)
    if scale == 1 or n_in == n_out:
        return o
    if transform in ("half_pixel", "pytorch_half_pixel"):
        if transform == "pytorch_half_pixel" and n_out == 1:
            return np.zeros(1, _F32)
        return (o + _HALF) / scale - _HALF
    if transform == "asymmetric":
        return o / scale
    if transform == "tf_half_pixel_for_nn":
        return (o + _HALF) / scale
    if transform == "align_corners":
        if n_out == 1:
            return np.zeros(1, _F32)
        # the CPU plugin's grouping; the reference's o * (in - 1) / (out - 1) rounds differently
        return o * (_F32(n_in - 1) / _F32(n_out - 1))
    raise AssertionError(transform)


def _nearest_index(coords: np.ndarray, nearest_mode: str, downsample: bool) -> np.ndarray:
    if nearest_mode == "round_prefer_floor":
        tie = coords == np.trunc(coords) + _HALF
        index = np.where(tie, np.floor(coords), round_half_away(coords))
    elif nearest_mode == "round_prefer_ceil":
        index = round_half_away(coords)
    elif nearest_mode == "floor":
        index = np.floor(coords)
    elif nearest_mode == "ceil":
        index = np.ceil(coords)
    elif nearest_mode == "simple":
        index = np.ceil(coords) if downsample else np.trunc(coords)
    else:
        raise AssertionError(nearest_mode)
    return index.astype(np.int64)


# ---------------------------------------------------------------- per-axis tap tables

class _AxisTaps(NamedTuple):
    """Output i reads input[index[i, k]] with weight[i, k] (no weights: a plain gather)."""

    index: np.ndarray                     # (out,) for a gather, (out, taps) otherwise
    weight: np.ndarray | None = None      # (out, taps) float32
    skip_zero: bool = False               # zero-weight taps are not read (NaN there does not leak)


def _normalized(weight: np.ndarray) -> np.ndarray:
    """Each row divided by its sum; a row summing to 0 stays 0."""
    total = weight.sum(axis=1, keepdims=True)
    return np.where(total != 0, weight / np.where(total != 0, total, 1), 0).astype(_F32)


def _nearest_taps(coords, n_in, scale, method) -> _AxisTaps:
    index = _nearest_index(coords, method.nearest_mode, downsample=scale < 1)
    return _AxisTaps(np.clip(index, 0, n_in - 1))


def _linear_onnx_taps(coords, n_in, scale, method) -> _AxisTaps:
    c = np.clip(coords, 0, _F32(n_in - 1))
    i0 = np.minimum(c.astype(np.int64), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    w0, w1 = np.abs(c - i1.astype(_F32)), np.abs(c - i0.astype(_F32))
    same = i0 == i1
    # the upper neighbour first: the order the CPU plugin accumulates in
    weight = np.stack([np.where(same, _HALF, w1), np.where(same, _HALF, w0)], axis=1)
    return _AxisTaps(np.stack([i1, i0], axis=1), weight.astype(_F32))


def _triangle_taps(coords, n_in, scale, stretch) -> _AxisTaps:
    """`linear`: triangle filter of half-width 1 / stretch around each coordinate, normalised."""
    reach = 2 if scale > 1 else int(np.ceil(_F32(2) / _F32(stretch)))
    index = round_half_away(coords).astype(np.int64)[:, None] + np.arange(-reach, reach + 1)
    inside = (index >= 0) & (index < n_in)
    distance = coords[:, None] - index.astype(_F32)
    weight = np.maximum(_F32(0), _F32(1) - np.abs(_F32(stretch) * distance))
    weight = _normalized(np.where(inside, weight, 0))
    return _AxisTaps(np.clip(index, 0, n_in - 1), weight, skip_zero=True)


def _cubic_taps(coords, n_in, scale, method) -> _AxisTaps:
    base = np.floor(coords)
    m = (coords - base).astype(_F32)
    a = _F32(method.cube_coeff)
    one, two, three = _F32(1), _F32(2), _F32(3)
    weight = np.stack([a * (m - one) * (m - one) * m,
                       ((a + two) * m - (a + three)) * m * m + one,
                       (((-a - two) * m + (two * a + three)) * m - a) * m,
                       -a * m * m * (m - one)], axis=1)
    index = base.astype(np.int64)[:, None] + np.arange(-1, 3)
    return _AxisTaps(np.clip(index, 0, n_in - 1), weight.astype(_F32))


def _pillow_bilinear(x: np.ndarray, a: np.float32) -> np.ndarray:
    return np.maximum(_F32(0), _F32(1) - np.abs(x))


def _pillow_bicubic(x: np.ndarray, a: np.float32) -> np.ndarray:
    x = np.abs(x)
    near = ((a + 2.0) * x.astype(np.float64) - (a + 3.0)) * x * x + 1.0
    far = (((x - _F32(5)) * x + _F32(8)) * x - _F32(4)) * a
    return np.where(x < 1, near.astype(_F32), np.where(x < 2, far, _F32(0)))


_PILLOW_FILTERS = {"bilinear_pillow": (1.0, _pillow_bilinear), "bicubic_pillow": (2.0, _pillow_bicubic)}


def _sequential_sum(values: np.ndarray) -> np.ndarray:
    """Row sums added left to right, in the array's dtype (NumPy's pairwise sum rounds differently)."""
    total = np.zeros(values.shape[0], values.dtype)
    for column in values.T:
        total = total + column
    return total


def _pillow_taps(n_out, n_in, scale, method) -> _AxisTaps:
    """Pillow's filter, widened by the downscale factor, over [lo, hi) around each centre (float32)."""
    support, kernel = _PILLOW_FILTERS[method.mode]
    centre = _source_coords(n_out, n_in, scale, "tf_half_pixel_for_nn")
    stretch = max(_F32(1), _F32(1) / _F32(scale))
    radius = _F32(support) * stretch
    lo = np.maximum(np.trunc(centre - radius + _HALF), 0).astype(np.int64)
    hi = np.minimum(np.trunc(centre + radius + _HALF), n_in).astype(np.int64)
    index = lo[:, None] + np.arange(int(np.ceil(radius)) * 2 + 1)
    x = (index.astype(_F32) - centre[:, None] + _HALF) * (_F32(1) / stretch)
    weight = np.where(index < hi[:, None], kernel(x, _F32(method.cube_coeff)), _F32(0))
    total = _sequential_sum(weight)[:, None]
    weight = np.where(total != 0, weight / np.where(total != 0, total, 1), weight).astype(_F32)
    return _AxisTaps(np.clip(index, 0, n_in - 1), weight, skip_zero=True)


def _axis_taps(method: Method, n_in: int, n_out: int, scale: float, stretch: float) -> _AxisTaps:
    if method.mode in _PILLOW:
        return _pillow_taps(n_out, n_in, scale, method)
    coords = _source_coords(n_out, n_in, scale, method.transform)
    if method.mode == "nearest":
        return _nearest_taps(coords, n_in, scale, method)
    if method.mode == "linear_onnx":
        return _linear_onnx_taps(coords, n_in, scale, method)
    if method.mode == "linear":
        return _triangle_taps(coords, n_in, scale, stretch)
    if method.mode == "cubic":
        return _cubic_taps(coords, n_in, scale, method)
    raise AssertionError(method.mode)


# ---------------------------------------------------------------- the kernel

def _resample_axis(x: np.ndarray, axis: int, taps: _AxisTaps, fused: bool = False) -> np.ndarray:
    """Gather + weighted sum along `axis`, accumulated tap by tap in `x`'s dtype as OpenVINO does.

    `fused`: each step rounds once, as a fused multiply-add does (the CPU plugin's JIT kernels).
    """
    if taps.weight is None:
        return np.take(x, taps.index, axis=axis)
    trailing = (1,) * (x.ndim - axis - 1)
    total = None
    for k in range(taps.index.shape[1]):
        weight = taps.weight[:, k].astype(x.dtype).reshape((-1,) + trailing)
        term = np.take(x, taps.index[:, k], axis=axis)
        # a float32 product is exact in float64, so rounding the float64 sum once is the fused step
        term = term.astype(np.float64) * weight if fused else term * weight
        if taps.skip_zero:
            term = np.where(weight != 0, term, 0)
        total = term.astype(x.dtype) if total is None else (total + term).astype(x.dtype)
    return total


def _saturate(values: np.ndarray, dtype: np.dtype, rounding: Callable) -> np.ndarray:
    """`values` rounded and clipped to the range of the integer `dtype` (still as float64)."""
    info = np.iinfo(dtype)
    hi = float(info.max) if info.bits < 64 else np.nextafter(2.0 ** 63, 0)
    return np.clip(rounding(np.asarray(values, np.float64)), float(info.min), hi)


def _pads_for_rank(pads: tuple[int, ...], rank: int) -> tuple[int, ...]:
    """OpenVINO cuts pads to the rank or extends them with zeros."""
    return tuple(pads[:rank]) + (0,) * max(rank - len(pads), 0)


def _size_ratios(shape: tuple[int, ...], axes: list[int], sizes: list[int], pads_begin, pads_end) -> list[float]:
    """float32 output size / padded input size per axis: the scales of `sizes` mode."""
    begin, end = _pads_for_rank(pads_begin, len(shape)), _pads_for_rank(pads_end, len(shape))
    padded = [shape[a] + begin[a] + end[a] for a in axes]
    return [float(_F32(n) / _F32(p)) if p else 1.0 for n, p in zip(sizes, padded)]


class _Arithmetic(NamedTuple):
    """How OpenVINO accumulates and rounds, which decides integer results near .5."""

    fused: bool                       # fused multiply-adds (the CPU plugin's JIT kernels)
    per_pass: Callable | None         # integer rounding after each axis (None: only at the end)
    final: Callable                   # integer rounding at the end


def _arithmetic(mode: str, rank: int, dtype: np.dtype) -> _Arithmetic:
    if mode == "linear":
        # the reference kernel: plain float32 and std::round (the CPU plugin truncates i8/u8)
        return _Arithmetic(False, None, round_half_away)
    if mode in _PILLOW:
        # a JIT kernel on 4-D data, keeping i8/u8 in their type between the two passes;
        # plain C++ in float32 below rank 4
        jit = rank == 4
        return _Arithmetic(jit, np.rint if jit and dtype in (np.int8, np.uint8) else None, np.rint)
    return _Arithmetic(True, None, np.rint)


def interpolate(x: np.ndarray, axes: list[int], sizes: list[int], scales: list[float], method: Method,
                pads_begin=(), pads_end=()) -> np.ndarray:
    """Resample `x` (zero-padded) to `sizes[i]` along `axes[i]`, mapping coordinates with `scales[i]`."""
    rank = x.ndim
    widths = list(zip(_pads_for_rank(pads_begin, rank), _pads_for_rank(pads_end, rank)))
    if any(w != (0, 0) for w in widths):
        x = np.pad(x, widths)
    # innermost axis first, as the CPU plugin's kernels go (Pillow: the horizontal pass first)
    plan = [step for step in sorted(zip(axes, sizes, scales), reverse=True) if x.shape[step[0]] != step[1]]
    if method.mode == "nearest":
        for axis, n_out, scale in plan:
            x = _resample_axis(x, axis, _axis_taps(method, x.shape[axis], n_out, scale, 1.0))
        return x
    # linear with antialias stretches every axis' filter once any axis shrinks
    antialias = method.antialias and any(s < 1 for s in scales)
    if method.mode == "linear" and not antialias and rank < 5:
        method = method._replace(mode="linear_onnx")   # the same values, computed as the CPU plugin does
    dtype = x.dtype
    arithmetic = _arithmetic(method.mode, rank, dtype)
    work = x.astype(np.float64 if dtype == np.float64 else _F32)
    for axis, n_out, scale in plan:
        if work.shape[axis] == 0:
            raise ShapeError(f"cannot resize axis {axis} of size 0 to {n_out}")
        taps = _axis_taps(method, work.shape[axis], n_out, scale, scale if antialias else 1.0)
        work = _resample_axis(work, axis, taps, arithmetic.fused)
        if arithmetic.per_pass is not None:
            work = _saturate(work, dtype, arithmetic.per_pass).astype(work.dtype)
    if dtype.kind == "f":
        return work.astype(dtype)
    return _saturate(work, dtype, arithmetic.final).astype(dtype)


def _nearest_resizer(data: TensorType, axes: list[int], sizes: list[int], scales: list[float],
                     method: Method) -> Callable:
    """`interpolate` in nearest mode for data of `shape`: its source indices worked out once
    (working them out took as long as the gathers: the detector's 2x upsamplings 152 and 163 us
    a call -> 38 and 101), then irrun/ops/nearest_resize.py's gathers or broadcast copy."""
    shape = data.shape
    gathers = [(axis, _axis_taps(method, shape[axis], n, scale, 1.0).index)
               for axis, n, scale in sorted(zip(axes, sizes, scales), reverse=True) if shape[axis] != n]
    return nearest_resize.resizer(shape, np.dtype(data.etype.carrier).itemsize, gathers)


def _weighted_resizer(shape: tuple[int, ...], axes: list[int], sizes: list[int], scales: list[float],
                      method: Method, general: Callable) -> Callable | None:
    """`interpolate` in linear_onnx or cubic mode (or linear, which runs as linear_onnx below rank 5
    without antialias) for float32 data of `shape` in float32 (weighted_resize.py); other data
    through `general`."""
    if method.mode == "linear" and not method.antialias and len(shape) < 5:
        method = method._replace(mode="linear_onnx")
    if method.mode not in ("linear_onnx", "cubic") or 0 in shape:
        return None
    plans = []
    for axis, n_out, scale in sorted(zip(axes, sizes, scales), reverse=True):   # innermost first, as `interpolate`
        if shape[axis] == n_out:
            continue
        taps = _axis_taps(method, shape[axis], n_out, scale, 1.0)
        plans.append(weighted_resize.axis_plan(axis, taps.index, taps.weight))
    if not plans:
        return None
    resize = weighted_resize.resizer(shape, plans)
    return lambda x, *rest: resize(x) if x.dtype == _F32 else general(x, *rest)


# ---------------------------------------------------------------- shape functions

def _padded_dim(d: DimLike, pad: int) -> DimLike:
    return d if pad == 0 else dim_map(lambda n: n + pad, d)


def _scaled_size(n: int, scale: float) -> int:
    """OpenVINO's int(float32(n) * (scale + 1e-6f)), refusing what cannot be a size."""
    product = _F32(n) * (_F32(scale) + _SCALE_EPSILON)
    if not np.isfinite(product) or product < 0:
        raise ShapeError(f"scale {scale:g} gives size {product:g} for an axis of size {n}")
    return int(product)


def _scaled_dim(d: DimLike, scale: float) -> DimLike:
    return d if _F32(scale) == 1 else dim_map(lambda n: _scaled_size(n, scale), d)


def _check_axes(axes: list[int], rank: int) -> None:
    bad = [a for a in axes if not 0 <= a < rank]
    if bad:
        raise ShapeError(f"axes {axes} must lie in [0, {rank - 1}] for data of rank {rank}")
    if len(set(axes)) != len(axes):
        raise ShapeError(f"axes {axes} repeat an axis")


def resized_shape(data: Shape, pads_begin, pads_end, axes: list[int] | None, targets: list | None,
                  use_scales: bool) -> tuple[Shape, dict[int, str]]:
    """Interpolate-4/11 output shape: data + pads, with `axes` resized by `targets` (sizes or scales).

    `axes` None: not known before running (every dim dynamic); `targets` None: the resized dims are.
    """
    if data is None:
        return None, {}
    rank = len(data)
    if axes is None:
        return (ANY,) * rank, {}
    _check_axes(axes, rank)
    pads_begin, pads_end = _pads_for_rank(pads_begin, rank), _pads_for_rank(pads_end, rank)
    out = [_padded_dim(d, b + e) for d, b, e in zip(data, pads_begin, pads_end)]
    notes = {}
    if targets is not None and len(targets) < len(axes):
        what = "scales" if use_scales else "sizes"
        raise ShapeError(f"{what} has {len(targets)} values for {len(axes)} axes {axes}")
    for i, axis in enumerate(axes):
        if targets is None:
            out[axis] = ANY
        elif use_scales:
            padded = out[axis]
            out[axis] = _scaled_dim(padded, targets[i])
            if is_static_dim(padded):
                notes[axis] = f"floor({padded} * {targets[i]:g}) = {out[axis]}"
        else:
            if is_static_dim(targets[i]) and targets[i] < 0:
                raise ShapeError(f"sizes[{i}] = {targets[i]} is negative")
            out[axis] = targets[i]
            notes[axis] = f"sizes[{i}] = {targets[i]}"
    return tuple(out), notes


def _known_values(t: TensorType, kind: type) -> list | None:
    if t.value is None:
        return None
    return [kind(v) for v in np.asarray(t.value).reshape(-1)]


def _check_type(t: TensorType, allowed: tuple[str, ...], what: str) -> None:
    if t.etype is not etypes.dynamic and t.etype.name not in allowed:
        raise ShapeError(f"{what} element type must be {', '.join(allowed)}, got {t.etype}")


def _check_1d(t: TensorType, what: str) -> None:
    if t.rank is not None and t.rank != 1:
        raise ShapeError(f"{what} must be 1-D, got shape {format_shape(t.shape)}")


# ---------------------------------------------------------------- the ops

class _Interpolate(Op):
    def spatial_rank(self, inputs):
        return None   # pads are per dimension of the full rank, not per spatial axis


class _InterpolateWithInputs(_Interpolate):
    """Interpolate-4 and -11: mode, coordinates and sizes from attributes and inputs."""

    @property
    def method(self) -> Method:
        a = self.attrs
        return Method(a.mode, a.coordinate_transformation_mode, a.nearest_mode, a.antialias, a.cube_coeff)

    @property
    def use_scales(self) -> bool:
        return self.attrs.shape_calculation_mode == "scales"

    def target_port(self) -> int:
        """The input the sizes or scales come from."""
        raise NotImplementedError

    axes_port: int

    def infer(self, inputs):
        data = inputs[0]
        _check_type(data, _DATA_TYPES, "data")
        target = inputs[self.target_port()]
        _check_1d(target, "scales" if self.use_scales else "sizes")
        axes = None
        if len(inputs) > self.axes_port:
            axes_t = inputs[self.axes_port]
            _check_type(axes_t, _INDEX_TYPES, "axes")
            _check_1d(axes_t, "axes")
            axes = _known_values(axes_t, int)
        elif data.rank is not None:
            axes = list(range(data.rank))
        if self.attrs.mode in _PILLOW and axes is not None and len(axes) != 2:
            raise ShapeError(f"{self.attrs.mode} resizes exactly two axes, got axes {axes}")
        targets = _known_values(target, float if self.use_scales else int)
        if targets is None and not self.use_scales and target.partial is not None:
            targets = list(partial_values.as_dims(target, "sizes"))
        shape, notes = resized_shape(data.shape, self.attrs.pads_begin, self.attrs.pads_end, axes, targets,
                                     self.use_scales)
        return [TensorType(shape, data.etype, notes=notes or None)]

    def resizing(self, shape: tuple[int, ...], inputs: tuple) -> tuple[list[int], list[int], list[float]]:
        """(axes, sizes, scales) for data of `shape`; `inputs`: every input's value by port (the
        data's own is not read)."""
        has_axes = len(inputs) > self.axes_port
        axes = [int(a) for a in inputs[self.axes_port]] if has_axes else list(range(len(shape)))
        raw = np.asarray(inputs[self.target_port()]).reshape(-1)
        targets = [float(v) for v in raw.astype(_F32)] if self.use_scales else [int(v) for v in raw]
        a = self.attrs
        out, _ = resized_shape(shape, a.pads_begin, a.pads_end, axes, targets, self.use_scales)
        sizes = [out[axis] for axis in axes]
        if self.use_scales and a.mode not in _PILLOW:
            scales = targets[:len(axes)]
        else:   # sizes mode, and Pillow always
            scales = _size_ratios(shape, axes, sizes, a.pads_begin, a.pads_end)
        return axes, sizes, scales

    def run(self, x, *rest):
        axes, sizes, scales = self.resizing(x.shape, (x,) + rest)
        return interpolate(x, axes, sizes, scales, self.method, self.attrs.pads_begin, self.attrs.pads_end)

    def bind(self, step):
        """Resizing of a static shape, unpadded, with constant sizes, scales and axes: nearest (an
        FPN's or a YOLO neck's upsampling: see `_nearest_resizer`), and linear or cubic float32
        data (a segmentation head's upsampling: see irrun/ops/weighted_resize.py)."""
        data = step.inputs[0]
        if self.run_replaced() or not data.is_static or any(self.attrs.pads_begin) or any(self.attrs.pads_end) \
                or any(t.value is None for t in step.inputs[1:]):
            return None
        axes, sizes, scales = self.resizing(data.shape, (None,) + tuple(t.value for t in step.inputs[1:]))
        if self.attrs.mode == "nearest":
            return _nearest_resizer(data, axes, sizes, scales, self.method)
        return _weighted_resizer(data.shape, axes, sizes, scales, self.method, self.run)


@register("Interpolate", 4)
class Interpolate4(_InterpolateWithInputs):
    axes_port = 3

    def target_port(self):
        return 2 if self.use_scales else 1

    def infer(self, inputs):
        _check_type(inputs[1], _INDEX_TYPES, "sizes")
        _check_type(inputs[2], _SCALE_TYPES, "scales")
        return super().infer(inputs)


@register("Interpolate", 11)
class Interpolate11(_InterpolateWithInputs):
    axes_port = 2

    def target_port(self):
        return 1

    def infer(self, inputs):
        if self.use_scales:
            _check_type(inputs[1], _SCALE_TYPES, "scales")
        else:
            _check_type(inputs[1], _INDEX_TYPES, "sizes")
        return super().infer(inputs)


@register("Interpolate", 1)
class Interpolate1(_Interpolate):
    """`axes` and the sizes in input 1; no padding of the output shape (see `_check_pads`)."""

    def infer(self, inputs):
        data, target = inputs
        if not (target.etype.is_integral or target.etype is etypes.dynamic):
            raise ShapeError(f"target_spatial_shape must be an integer tensor, got {target.etype}")
        if data.shape is None:
            return [data.like()]
        axes = list(self.attrs.axes)
        _check_axes(axes, data.rank)
        self._check_pads(data.rank, axes)
        sizes = _known_values(target, int)
        if sizes is None and target.partial is not None:
            sizes = list(partial_values.as_dims(target, "target_spatial_shape"))
        if sizes is not None and len(sizes) < len(axes):
            raise ShapeError(f"target_spatial_shape has {len(sizes)} values for axes {axes}")
        out = list(data.shape)
        notes = {}
        for i, axis in enumerate(axes):
            out[axis] = ANY if sizes is None else sizes[i]
            if sizes is not None:
                notes[axis] = f"target_spatial_shape[{i}] = {sizes[i]}"
        return [TensorType(tuple(out), data.etype, notes=notes or None)]

    def _check_pads(self, rank: int, axes: list[int]) -> None:
        """Pads on a dim that is not resized: shape inference ignores them, the CPU plugin pads."""
        for name in ("pads_begin", "pads_end"):
            pads = _pads_for_rank(self.attrs[name], rank)
            stray = [d for d, p in enumerate(pads) if p and d not in axes]
            if stray:
                raise ShapeError(f"{name} {list(self.attrs[name])} pads dim {stray[0]}, which is not in axes "
                                 f"{axes}: OpenVINO's output shape ignores such pads while its CPU plugin "
                                 f"applies them")

    def _method(self, rank: int, axes: list[int]) -> Method:
        """The Interpolate-4 attributes OpenVINO's CPU plugin runs this layer with."""
        mode = self.attrs.mode
        if mode == "area":
            raise UnsupportedError("Interpolate-1 mode area has no kernel in OpenVINO (CPU plugin and "
                                   "reference both refuse it)")
        if mode == "linear":
            mode = "linear_onnx" if rank < 5 else "linear"
        unpadded = not any(self.attrs.pads_begin) and not any(self.attrs.pads_end)
        if self.attrs.align_corners:
            transform = "align_corners"
        elif mode in ("linear", "linear_onnx") and unpadded and not (rank == 4 and set(axes) == {2, 3}):
            transform = "half_pixel"
        else:
            transform = "asymmetric"
        return Method(mode, transform, "simple", self.attrs.antialias, -0.75)

    def resizing(self, shape: tuple[int, ...], target) -> tuple[list[int], list[int], list[float]]:
        a = self.attrs
        axes = list(a.axes)
        sizes = [int(v) for v in np.asarray(target).reshape(-1)[:len(axes)]]
        return axes, sizes, _size_ratios(shape, axes, sizes, a.pads_begin, a.pads_end)

    def run(self, x, target):
        axes, sizes, scales = self.resizing(x.shape, target)
        a = self.attrs
        return interpolate(x, axes, sizes, scales, self._method(x.ndim, axes), a.pads_begin, a.pads_end)

    def bind(self, step):
        """As Interpolate-4's (an old Model Optimizer IR's upsampling)."""
        data, target = step.inputs
        a = self.attrs
        if self.run_replaced() or not data.is_static or target.value is None or a.mode == "area" \
                or any(a.pads_begin) or any(a.pads_end):
            return None
        axes, sizes, scales = self.resizing(data.shape, target.value)
        method = self._method(len(data.shape), axes)
        if method.mode == "nearest":
            return _nearest_resizer(data, axes, sizes, scales, method)
        return _weighted_resizer(data.shape, axes, sizes, scales, method, self.run)


# ---------------------------------------------------------------- GridSample-9
#
# Every output point reads the data at its own (x, y) from the grid, so there is
# no per-axis table here: the whole grid is denormalised at once, and the 1, 4
# or 16 neighbours are gathered with fancy indexing and weighted.  The arithmetic
# is float32 in the order of OpenVINO's reference (which the CPU plugin matches
# to an ulp); the padding rules are PyTorch's (the reflection acts on the
# continuous coordinate).  Details and divergences: specs/errata/resampling.md.

_GRID_TYPES = ("f32", "f16", "bf16", "f64")
_BICUBIC_A = _F32(-0.75)


def _denormalized(v: np.ndarray, n: int, align_corners: bool) -> np.ndarray:
    """A grid value in [-1, 1] as a float32 pixel coordinate along an axis of size n."""
    one, two = _F32(1), _F32(2)
    if align_corners:
        return (v + one) * (_F32(n) - one) / two
    return ((v + one) * _F32(n) - one) / two


def _reflected(c: np.ndarray, n: int, align_corners: bool) -> np.ndarray:
    """c mirrored into [0, n - 1] (corners aligned) or [-0.5, n - 0.5] (not), any number of times."""
    if align_corners and n == 1:
        return np.zeros_like(c)
    lo, span = (_F32(0), _F32(n - 1)) if align_corners else (_F32(-0.5), _F32(n))
    distance = np.abs(c - lo)
    flips = np.floor(distance / span)
    extra = distance - flips * span
    return np.where(flips % 2 == 0, lo + extra, lo + span - extra).astype(_F32)


def _padded_coords(c: np.ndarray, n: int, padding_mode: str, align_corners: bool) -> np.ndarray:
    """Coordinates moved inside the axis as the padding mode says; `zeros` leaves them (outside reads 0)."""
    if padding_mode == "reflection":
        c = _reflected(c, n, align_corners)
    if padding_mode in ("border", "reflection"):
        c = np.clip(c, _F32(0), _F32(n - 1))
    return c


class _PointGather:
    """Reads data[n, :, y, x] for integer (y, x) per grid point; points outside the data read 0."""

    def __init__(self, data: np.ndarray):
        self.channels_last = channels_last_view(data)          # N, H, W, C: one gather per point
        self.height, self.width = data.shape[2:]
        self.batch = np.arange(data.shape[0])[:, None, None]

    def __call__(self, iy: np.ndarray, ix: np.ndarray) -> np.ndarray:
        inside = (iy >= 0) & (iy < self.height) & (ix >= 0) & (ix < self.width)
        values = self.channels_last[self.batch, np.clip(iy, 0, self.height - 1), np.clip(ix, 0, self.width - 1)]
        return np.where(inside[..., None], values, values.dtype.type(0))   # N, H_out, W_out, C


def _cubic_coefficients(t: np.ndarray) -> list[np.ndarray]:
    """Keys' cubic kernel (a = -0.75) at the distances t + 1, t, 1 - t, 2 - t, as the reference writes it."""
    a, one, two = _BICUBIC_A, _F32(1), _F32(2)

    def far(d):   # 1 <= d < 2
        return ((a * d - _F32(5) * a) * d + _F32(8) * a) * d - _F32(4) * a

    def near(d):  # 0 <= d <= 1
        return ((a + two) * d - (a + _F32(3))) * d * d + one

    return [far(t + one), near(t), near(one - t), far(two - t)]


def grid_sample(data: np.ndarray, grid: np.ndarray, align_corners: bool, mode: str, padding_mode: str) -> np.ndarray:
    """GridSample-9 of NCHW `data` at the [N, H_out, W_out, 2] (x, y) `grid`; float32 arithmetic."""
    height, width = data.shape[2:]
    x = _denormalized(grid[..., 0].astype(_F32), width, align_corners)
    y = _denormalized(grid[..., 1].astype(_F32), height, align_corners)
    gather = _PointGather(data)

    if mode == "nearest":
        # round half to even (lrint), and the values are copied, not converted
        x = _padded_coords(x, width, padding_mode, align_corners)
        y = _padded_coords(y, height, padding_mode, align_corners)
        return channels_first_view(gather(np.rint(y).astype(np.int64), np.rint(x).astype(np.int64)))

    gather = _PointGather(data.astype(_F32))
    if mode == "bilinear":
        x = _padded_coords(x, width, padding_mode, align_corners)
        y = _padded_coords(y, height, padding_mode, align_corners)
        x0, y0 = np.floor(x), np.floor(y)
        dx, dy = (x - x0)[..., None], (y - y0)[..., None]
        ix, iy = x0.astype(np.int64), y0.astype(np.int64)
        one = _F32(1)
        top = (one - dx) * gather(iy, ix) + dx * gather(iy, ix + 1)
        bottom = (one - dx) * gather(iy + 1, ix) + dx * gather(iy + 1, ix + 1)
        out = dy * bottom + (one - dy) * top
    elif mode == "bicubic":
        # the 4 x 4 taps around floor(coordinate); padding moves each tap, not the point
        x0, y0 = np.floor(x), np.floor(y)
        wx, wy = _cubic_coefficients(x - x0), _cubic_coefficients(y - y0)

        def tap(base, offset, n):
            moved = _padded_coords(base + _F32(offset), n, padding_mode, align_corners)
            return np.rint(moved).astype(np.int64)

        columns = [tap(x0, i - 1, width) for i in range(4)]
        out = None
        for j in range(4):
            row_index = tap(y0, j - 1, height)
            row = None
            for i in range(4):
                term = wx[i][..., None] * gather(row_index, columns[i])
                row = term if row is None else row + term
            term = wy[j][..., None] * row
            out = term if out is None else out + term
    else:
        raise AssertionError(mode)
    return channels_first_view(_grid_sample_cast(out, data.dtype))


def _grid_sample_cast(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The CPU plugin's store: i8/u8 round half to even, wider integers truncate; both saturate."""
    if dtype.kind == "f":
        return values.astype(dtype)
    rounding = np.rint if dtype.itemsize == 1 else np.trunc
    return _saturate(values, dtype, rounding).astype(dtype)


@register("GridSample", 9)
class GridSample(Op):
    """Samples NCHW data at the normalised (x, y) points of a [N, H_out, W_out, 2] grid."""

    def spatial_rank(self, inputs):
        return None

    def infer(self, inputs):
        data, grid = inputs
        _check_type(data, _DATA_TYPES, "data")
        _check_type(grid, _GRID_TYPES, "grid")
        for t, what in ((data, "data"), (grid, "grid")):
            if t.rank is not None and t.rank != 4:
                raise ShapeError(f"{what} must be 4-D, got shape {format_shape(t.shape)}")
        out = [ANY] * 4
        if data.shape is not None:
            out[0], out[1] = data.shape[0], data.shape[1]
        if grid.shape is not None:
            if not dims_compatible(grid.shape[3], 2):
                raise ShapeError(f"the last dim of grid {format_shape(grid.shape)} must be 2 (x, y)")
            try:
                out[0] = dim_merge(out[0], grid.shape[0])
            except ShapeError:
                raise ShapeError(f"batch of data {format_shape(data.shape)} differs from batch of grid "
                                 f"{format_shape(grid.shape)}") from None
            out[2], out[3] = grid.shape[1], grid.shape[2]
        return [TensorType(tuple(out), data.etype)]

    def run(self, data, grid):
        n, channels, height, width = data.shape
        if n != grid.shape[0] or grid.shape[3] != 2:
            raise ShapeError(f"grid {grid.shape} does not fit data {data.shape}")
        if height == 0 or width == 0:
            return np.zeros((n, channels) + grid.shape[1:3], data.dtype)
        a = self.attrs
        return grid_sample(data, grid, a.align_corners, a.mode, a.padding_mode)
