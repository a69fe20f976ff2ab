"""Normalization: MVN-2/6, BatchNormInference-1/5, NormalizeL2, GroupNormalization, LRN, GRN.

Each keeps its data input's shape and element type.  Kernels compute in
floating point (f16 in f32, integers in f64) and come back to the input type
through `_as_input_type`; integer results are rounded to nearest and saturate,
as the CPU plugin does for the integer tensors it accepts.

What OpenVINO 2026.4.1 computes, beyond the op specs (specs/errata/reduction.md):

* MVN-2 normalizes over dims [1:] when `across_channels`, else over [2:]; with
  `reduction_axes` given, `across_channels` is whether they contain 1, and the
  axes themselves are otherwise ignored (the CPU plugin).  eps is added inside
  the square root.  An empty MVN-6 axes list gives zeros (x minus itself).
* BatchNormInference-1 takes (gamma, beta, data, mean, variance); -5 takes
  data first.
* NormalizeL2 with no axes gives 0 where x is 0 and 1 elsewhere.
* LRN sums squares over a box of (size - 1) // 2 on each side of every axis in
  `axes` (so an even size is one narrower than the spec's formula), and
  divides alpha by size ** len(axes).  The bias is used as given (the CPU
  plugin truncates it to an integer).
"""
from __future__ import annotations

import math
from math import prod
from typing import Callable

import numpy as np

from .. import etypes, threads
from ..errors import ShapeError
from ..registry import Op, TensorType, register
from ..shapes import DimLike, dim_merge, dims_compatible, format_shape
from .common import last_axis_square_sums, last_axis_sums, typed_constant
from .reduction import check_axes_input, normalized_axes


# ---------------------------------------------------------------- shared helpers

def _float_dtype(dtype: np.dtype) -> np.dtype:
    """Where a kernel computes: f16 in f32 (the CPU plugin at f32 precision), integers in f64."""
    if dtype.kind == "f":
        return np.dtype(np.float32) if dtype.itemsize < 4 else dtype
    return np.dtype(np.float64)


def _as_input_type(y: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Integers: rounded to nearest and saturated, as the CPU plugin stores them."""
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        with np.errstate(invalid="ignore"):
            return np.clip(np.rint(y), info.min, info.max).astype(dtype)
    with np.errstate(over="ignore"):
        return y.astype(dtype, copy=False)


def in_float(fn: Callable[..., np.ndarray], x: np.ndarray, *params: np.ndarray) -> np.ndarray:
    """fn(x, *params) computed in floating point, returned in x's dtype."""
    dtype = _float_dtype(x.dtype)
    with np.errstate(all="ignore"):
        # no copy when x already has the type: every fn here leaves its arguments as they are
        y = fn(x.astype(dtype, copy=False), *(np.asarray(p).astype(dtype, copy=False) for p in params))
    return _as_input_type(np.asarray(y), x.dtype)


def _check_numeric(t: TensorType, what: str = "data") -> None:
    if t.etype.kind in ("bool", "string"):
        raise ShapeError(f"{what} must be a numeric tensor, got element type {t.etype}")


def _check_float(t: TensorType, what: str) -> None:
    if t.etype is not etypes.dynamic and not t.etype.is_float:
        raise ShapeError(f"{what} must be a floating-point tensor, got element type {t.etype}")


def _per_channel(values: np.ndarray, rank: int) -> np.ndarray:
    """A [C] vector shaped to broadcast along dim 1 of a rank-`rank` tensor."""
    return values.reshape((1, -1) + (1,) * (rank - 2))


def _mvn(x: np.ndarray, axes: tuple[int, ...], normalize_variance: bool, eps: float,
         eps_inside_sqrt: bool) -> np.ndarray:
    count = prod(x.shape[a] for a in axes)
    if count == x.size and count > 1 and x.dtype in (np.float32, np.float64):
        return _one_row_mvn(x, count, normalize_variance, eps, eps_inside_sqrt)
    if axes == (x.ndim - 1,) and count > 1 and x.dtype in (np.float32, np.float64):
        # over the last axis (a transformer's layer norm), the means by BLAS (ViT's 197 x 192:
        # 47 -> 33 us a norm)
        centered = np.subtract(x, last_axis_sums(x, 1 / count))
        if not normalize_variance:
            return centered
        variance = last_axis_square_sums(centered, 1 / count)
    else:
        # np.mean's sum and division without its Python-level checks (a third of a small call)
        mean = np.add.reduce(x, axis=axes, keepdims=True)
        centered = np.subtract(x, np.true_divide(mean, count, out=mean))   # axes=(): all zeros
        if not normalize_variance:
            return centered
        squares = np.multiply(centered, centered)
        variance = np.add.reduce(squares, axis=axes, keepdims=True)
        variance /= count
    scale = np.sqrt(variance + eps) if eps_inside_sqrt else np.sqrt(variance) + eps
    centered /= scale
    return centered


def _one_row_mvn(x: np.ndarray, count: int, normalize_variance: bool, eps: float,
                 eps_inside_sqrt: bool) -> np.ndarray:
    """`_mvn` of float32/64 data that is one row (every axis reduced but those of length 1: a
    decoding step's layer norm): the sums as BLAS dot products, the scalars in Python.  A
    decoding step's [1, 1, 256] norm 6.2 -> 4.4 us with its scale and shift."""
    flat = x.reshape(-1)
    mean = float(np.dot(flat, typed_constant(1, x.dtype, count))) / count
    centered = np.subtract(x, mean)
    if not normalize_variance:
        return centered
    squares = centered.reshape(-1)
    variance = float(np.dot(squares, squares)) / count
    centered /= math.sqrt(variance + eps) if eps_inside_sqrt else math.sqrt(variance) + eps
    return centered


MVN_COST = 4.0        # work per element relative to an add (irrun.threads)


def _mvn_in_parts(x: np.ndarray, axes: tuple[int, ...], normalize_variance: bool, eps: float,
                  eps_inside_sqrt: bool) -> np.ndarray:
    """`_mvn` of float data, in parts along an axis it does not reduce, on every core when large."""
    axes = tuple(a % x.ndim for a in axes)

    def part(v, out):
        out[...] = _mvn(v, axes, normalize_variance, eps, eps_inside_sqrt)
    return threads.in_parts(part, np.empty_like(x), x, cost=MVN_COST, whole_axes=axes)


def _axis_values(axes: np.ndarray) -> np.ndarray:
    """Axes inputs are read with a cast to int64: floats truncate."""
    return np.trunc(np.asarray(axes, dtype=np.float64)).astype(np.int64) if axes.dtype.kind == "f" else axes


# ---------------------------------------------------------------- MVN

@register("MVN", 2)
class MVN2(Op):
    """Mean-variance normalization over dims [1:] (across_channels) or [2:]."""

    outputs_are_new = True   # for the executor: the result is never a view of the input

    def across_channels(self) -> bool:
        # The IR reader sets across_channels from reduction_axes when they are
        # given (is axis 1 among them?); the CPU plugin then uses only that flag.
        given = self.attrs.reduction_axes
        return 1 in given if given else self.attrs.across_channels

    def infer(self, inputs):
        _check_numeric(inputs[0])
        return [inputs[0].like()]

    def run(self, x):
        axes = tuple(range(1 if self.across_channels() else 2, x.ndim))
        return in_float(lambda v: _mvn_in_parts(v, axes, self.attrs.normalize_variance, self.attrs.eps, True), x)


@register("MVN", 6)
class MVN6(Op):
    outputs_are_new = True   # for the executor: the result is never a view of the input
    def infer(self, inputs):
        data, axes = inputs
        _check_numeric(data)
        check_axes_input(axes, "axes", allow_scalar=False)
        if data.rank is not None and axes.shape is not None and isinstance(axes.shape[0], int) \
                and axes.shape[0] > data.rank:
            raise ShapeError(f"MVN has {axes.shape[0]} axes for data of rank {data.rank} {format_shape(data.shape)}")
        if data.rank is not None and axes.value is not None:
            normalized_axes(axes.value, data.rank, "MVN axis")
        return [data.like()]

    def run(self, x, axes):
        reduced = normalized_axes(axes, x.ndim, "MVN axis")
        inside = self.attrs.eps_mode == "inside_sqrt"
        return in_float(lambda v: _mvn_in_parts(v, reduced, self.attrs.normalize_variance, self.attrs.eps, inside),
                        x)

    def bind(self, step):
        """f32/f64 data and constant axes: `_mvn` itself on tensors too small to run in parts (what
        `run` computes there, without its conversions and hand-offs: 5 us of a 16 us call)."""
        data, axes = step.inputs
        if self.run_replaced() or axes.value is None or data.rank is None or data.etype.name not in ("f32", "f64"):
            return None
        reduced = tuple(a % data.rank for a in normalized_axes(axes.value, data.rank, "MVN axis"))
        if data.is_static and threads.worth_parts(prod(data.shape), MVN_COST):
            return None
        variance, eps, inside, run = self.attrs.normalize_variance, self.attrs.eps, \
            self.attrs.eps_mode == "inside_sqrt", self.run
        large = 2 * threads.MIN_PART_ELEMENTS / MVN_COST

        def mvn(x, axes_input):
            if x.size >= large:
                return run(x, axes_input)
            return _mvn(x, reduced, variance, eps, inside)
        return mvn


# ---------------------------------------------------------------- BatchNormInference

_BATCH_NORM_ORDER = {
    1: ("gamma", "beta", "data", "mean", "variance"),
    5: ("data", "gamma", "beta", "mean", "variance"),
}


@register("BatchNormInference", 1, 5)
class BatchNormInference(Op):
    """gamma * (data - mean) / sqrt(variance + epsilon) + beta, per channel (dim 1)."""

    def named(self, items: list) -> dict:
        return dict(zip(_BATCH_NORM_ORDER[self.version], items))

    def infer(self, inputs):
        t = self.named(inputs)
        data = t["data"]
        if len({x.etype for x in inputs if x.etype is not etypes.dynamic}) > 1:
            raise ShapeError("Input element types do not match: " + ", ".join(
                f"{name} {x.etype}" for name, x in t.items()))
        for name, x in t.items():
            _check_float(x, name)
        if data.rank is not None and data.rank < 2:
            raise ShapeError(f"data must have rank 2 or more, got {format_shape(data.shape)}")
        # The channel count: data's dim 1 merged with the length of every per-channel input.
        channels: DimLike | None = None if data.shape is None else data.shape[1]
        for name in ("gamma", "beta", "mean", "variance"):
            shape = t[name].shape
            if shape is None:
                continue
            if len(shape) != 1:
                raise ShapeError(f"{name} must be 1-D, got {format_shape(shape)}")
            if channels is not None and not dims_compatible(channels, shape[0]):
                raise ShapeError(f"{name} {format_shape(shape)} does not match the channel dim of data "
                                 f"{format_shape(data.shape)} or another per-channel input")
            channels = shape[0] if channels is None else dim_merge(channels, shape[0])
        if channels == 0:
            raise ShapeError("the channel count must be at least 1")
        if data.shape is None:
            return [data.like()]
        return [data.like(data.shape[:1] + (channels,) + data.shape[2:])]

    def run(self, *arrays):
        t = self.named(arrays)
        x = t["data"]

        def batch_norm(v, gamma, beta, mean, variance):
            gamma, beta, mean, variance = (_per_channel(p, v.ndim) for p in (gamma, beta, mean, variance))
            return gamma * (v - mean) / np.sqrt(variance + self.attrs.epsilon) + beta

        return in_float(batch_norm, x, t["gamma"], t["beta"], t["mean"], t["variance"])


# ---------------------------------------------------------------- NormalizeL2

@register("NormalizeL2", 1)
class NormalizeL2(Op):
    """x / sqrt(sum(x^2) + eps), or / sqrt(max(sum(x^2), eps)), over the axes."""

    def infer(self, inputs):
        data, axes = inputs
        _check_numeric(data)
        _check_numeric(axes, "axes")
        if axes.rank is not None and axes.rank > 1:
            raise ShapeError(f"axes must be a scalar or 1-D, got shape {format_shape(axes.shape)}")
        if data.rank is not None and axes.value is not None:
            normalized_axes(_axis_values(axes.value), data.rank, "NormalizeL2 axis")
        return [data.like()]

    def run(self, x, axes):
        reduced = normalized_axes(_axis_values(axes), x.ndim, "NormalizeL2 axis")
        if not reduced:
            return (x != 0).astype(x.dtype)   # each element divided by itself; 0 stays 0
        eps, add = self.attrs.eps, self.attrs.eps_mode == "add"

        def normalize(v):
            squares = np.sum(v * v, axis=reduced, keepdims=True)
            return v / np.sqrt(squares + eps if add else np.maximum(squares, eps))

        return in_float(normalize, x)


# ---------------------------------------------------------------- GroupNormalization

@register("GroupNormalization", 12)
class GroupNormalization(Op):
    """Per sample and group of C / num_groups channels: scale * (x - mean) / sqrt(var + epsilon) + bias."""

    def infer(self, inputs):
        data, scale, bias = inputs
        groups = self.attrs.num_groups
        if groups < 1:
            raise ShapeError(f"num_groups must be a positive integer, got {groups}")
        _check_float(data, "data")
        for name, t in (("scale", scale), ("bias", bias)):
            if t.rank is not None and t.rank != 1:
                raise ShapeError(f"{name} must be 1-D, got {format_shape(t.shape)}")
        if scale.shape is not None and bias.shape is not None and not dims_compatible(scale.shape[0], bias.shape[0]):
            raise ShapeError(f"scale {format_shape(scale.shape)} and bias {format_shape(bias.shape)} differ")
        if data.rank is not None:
            if data.rank < 2:
                raise ShapeError(f"data must have rank 2 or more, got {format_shape(data.shape)}")
            channels = data.shape[1]
            for name, t in (("scale", scale), ("bias", bias)):
                if t.shape is not None and not dims_compatible(channels, t.shape[0]):
                    raise ShapeError(f"{name} {format_shape(t.shape)} does not match the {channels} channels of "
                                     f"data {format_shape(data.shape)}")
            if isinstance(channels, int) and (groups > channels or channels % groups):
                raise ShapeError(f"{channels} channels of data {format_shape(data.shape)} cannot be split into "
                                 f"num_groups={groups} equal groups")
        return [data.like()]

    def run(self, x, scale, bias):
        groups, epsilon = self.attrs.num_groups, self.attrs.epsilon

        def group_norm(v, scale, bias):
            grouped = v.reshape(v.shape[0], groups, int(np.prod(v.shape[1:])) // groups)
            normalized = _mvn(grouped, (2,), True, epsilon, True).reshape(v.shape)
            return normalized * _per_channel(scale, v.ndim) + _per_channel(bias, v.ndim)

        return in_float(group_norm, x, scale, bias)


# ---------------------------------------------------------------- LRN

def _box_sums(values: np.ndarray, axis: int, half: int) -> np.ndarray:
    """Along `axis`, the sum of values[i - half : i + half + 1] (clipped to the array)."""
    n = values.shape[axis]
    start = list(values.shape)
    start[axis] = 1
    running = np.concatenate([np.zeros(start, values.dtype), np.cumsum(values, axis=axis)], axis=axis)
    index = np.arange(n)
    upper = np.take(running, np.minimum(index + half + 1, n), axis=axis)
    lower = np.take(running, np.maximum(index - half, 0), axis=axis)
    return upper - lower


# LRN windows reaching at most this far on each side sum by shifted adds (`_shifted_sums`)
SHIFTED_SUMS_MOST_HALF = 8


def _shifted_sums(values: np.ndarray, axis: int, half: int) -> np.ndarray:
    """`_box_sums` by adding each neighbour up to `half` away, a slice at a time."""
    n = values.shape[axis]
    total = values.copy()
    before = (slice(None),) * axis
    for d in range(1, min(half, n - 1) + 1):
        total[before + (slice(d, None),)] += values[before + (slice(None, n - d),)]
        total[before + (slice(None, n - d),)] += values[before + (slice(d, None),)]
    return total


@register("LRN", 1)
class LRN(Op):
    """x / (bias + alpha / size^len(axes) * sum of squares over a box around x) ^ beta."""

    def infer(self, inputs):
        data, axes = inputs
        _check_numeric(data)
        check_axes_input(axes, "axes", allow_scalar=False)
        if data.rank is not None and axes.value is not None:
            normalized_axes(axes.value, data.rank, "LRN axis")
        return [data.like()]

    def run(self, x, axes):
        reduced = normalized_axes(axes, x.ndim, "LRN axis")
        a = self.attrs
        half = max(a.size - 1, 0) // 2
        with np.errstate(divide="ignore"):
            scale = np.float64(a.alpha) / np.float64(a.size) ** len(reduced)

        def lrn(v):
            if half <= SHIFTED_SUMS_MOST_HALF and v.dtype == np.float32:
                # Windows of a few (AlexNet's and GoogLeNet's 5 channels): shifted adds in f32, no
                # difference of running sums to lose digits (96 x 55 x 55: 4.1 -> 0.5 ms)
                squares = np.square(v)
                for axis in reduced:
                    squares = _shifted_sums(squares, axis, half)
                squares *= np.float32(scale)
                squares += np.float32(a.bias)
                np.power(squares, np.float32(a.beta), out=squares)
                return np.divide(v, squares, out=squares)
            # Box sums in f64: the running-sum differences would lose digits in f32.
            squares = v.astype(np.float64) ** 2
            for axis in reduced:
                squares = _box_sums(squares, axis, half)
            return v / ((a.bias + scale * squares) ** a.beta).astype(v.dtype)

        return in_float(lrn, x)


# ---------------------------------------------------------------- GRN

@register("GRN", 1)
class GRN(Op):
    """Global response normalization: x / sqrt(sum over channels (dim 1) of x^2 + bias)."""

    def infer(self, inputs):
        data = inputs[0]
        _check_numeric(data)
        if data.rank is not None and data.rank not in (2, 3, 4):
            raise ShapeError(f"GRN takes data of rank 2, 3 or 4, got {format_shape(data.shape)}")
        return [data.like()]

    def run(self, x):
        bias = self.attrs.bias
        return in_float(lambda v: v / np.sqrt(np.sum(v * v, axis=1, keepdims=True) + bias), x)
