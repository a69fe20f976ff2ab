"""Reductions: ReduceSum, ReduceMean, ReduceProd, ReduceMax, ReduceMin, ReduceL1,
ReduceL2, ReduceLogicalAnd, ReduceLogicalOr; and CumSum.

Every Reduce op shares `Reduction`: the axes input (a scalar or 1-D integer
tensor; negative axes count from the end, repeats count once), `keep_dims`,
and the shape function.  A concrete op names its element rule in
`reduce(x, axes)`, which returns the reduced array with the reduced dims kept
as 1.  An empty axes list keeps the shape and reduces each element on its
own (ReduceL1 and ReduceL2 then give |x|).

What OpenVINO 2026.4.1 computes, beyond the op specs (specs/errata/reduction.md):

* Integer sums (of x, |x| or x*x) are exact, then
  - 8-bit: saturated, then divided (Mean) or rooted (L2): the CPU plugin's
    8-bit kernels, the only runtime for them;
  - 16-bit: divided or rooted, then wrapped: the CPU plugin runs them as i32;
  - 32- and 64-bit: wrapped to the type, then divided or rooted: the
    reference's C++ arithmetic (the CPU plugin computes i32 in f32, i64 in i32).
  Means and roots truncate toward zero.  Products wrap (8-bit: saturate).
* f16 is computed in f32.  Empty reductions give 0 (Sum, Mean, L1, L2), 1
  (Prod), the lowest finite value of the compute type for Max (so -inf in f16)
  and +inf / the largest integer for Min.
* ReduceMax and ReduceMin never pick NaN (std::max / std::min from a start
  value, as the reference does), and ReduceMax of -infs is the lowest finite
  value.
"""
from __future__ import annotations

import numpy as np

from .. import etypes
from ..errors import ShapeError
from ..etypes import ElementType
from ..registry import Op, TensorType, register
from ..shapes import ANY, format_shape, normalize_axis
from .common import convert_array, last_axis_sums


# ---------------------------------------------------------------- shared helpers

def check_axes_input(axes: TensorType, what: str, *, allow_scalar: bool = True) -> None:
    """An axes input is an integer scalar or 1-D tensor."""
    if axes.etype is not etypes.dynamic and not axes.etype.is_integral:
        raise ShapeError(f"Element type of {what} input must be integer, got {axes.etype}")
    allowed = (0, 1) if allow_scalar else (1,)
    if axes.rank is not None and axes.rank not in allowed:
        want = "a scalar or 1D" if allow_scalar else "a 1D"
        raise ShapeError(f"{what} input must be {want} tensor, got shape {format_shape(axes.shape)}")


def normalized_axes(values, rank: int, what: str = "reduction axis") -> tuple[int, ...]:
    """Sorted distinct axes in [0, rank) from values in [-rank, rank)."""
    # A scalar has no axes, but OpenVINO lets axis 0 (or -1) name it, as if it had one dim.
    axes = {normalize_axis(int(a), max(rank, 1), what) for a in np.asarray(values).reshape(-1)}
    return tuple(sorted(a for a in axes if a < rank))


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    """f16 is computed in f32 (the CPU plugin and the reference both do)."""
    return np.dtype(np.float32) if dtype == np.float16 else dtype


def _exact_dtype(dtype: np.dtype) -> np.dtype:
    """Where an integer reduction is accumulated: wide enough to be exact, or to wrap as C++ does."""
    return np.dtype(np.uint64) if dtype.kind == "u" else np.dtype(np.int64)


def _narrow(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """An exact integer result in the input's type: 8-bit types saturate, wider types wrap."""
    if dtype.itemsize == 1:
        info = np.iinfo(dtype)
        return np.clip(values, info.min, info.max).astype(dtype)
    return values.astype(dtype)


# ---------------------------------------------------------------- the Reduce ops

class Reduction(Op):
    """data + axes -> data reduced over axes (kept as 1s with keep_dims)."""

    def check_etype(self, etype: ElementType) -> None:
        if etype.kind in ("bool", "string"):
            raise ShapeError(f"Element type of data input must be numeric, got {etype}")

    def reduce(self, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        raise NotImplementedError

    def infer(self, inputs):
        data, axes = inputs
        if data.etype is not etypes.dynamic:
            self.check_etype(data.etype)
        check_axes_input(axes, "axes")
        keep = self.attrs.keep_dims
        if data.shape is not None and axes.value is not None:
            reduced = self.axes(axes.value, data.rank)
            shape = tuple(1 if i in reduced else d for i, d in enumerate(data.shape) if keep or i not in reduced)
            notes = {i: f"axis {i} is reduced (keep_dims=true)" for i in reduced} if keep else None
            return [TensorType(shape, data.etype, notes=notes)]
        if data.shape is None:
            return [data.like(None)]
        if keep:
            return [data.like((ANY,) * data.rank)]
        # One axis (a scalar or a [1] tensor) drops one dim; otherwise repeats make the rank unknown.
        if axes.shape is not None and all(isinstance(d, int) for d in axes.shape) \
                and int(np.prod(axes.shape)) == 1 and data.rank > 0:
            return [data.like((ANY,) * (data.rank - 1))]
        return [data.like(None)]

    def axes(self, values, rank: int) -> tuple[int, ...]:
        reduced = normalized_axes(values, rank)
        if rank == 0 and self.attrs.keep_dims and np.size(values):
            raise ShapeError("a scalar has no axis to keep (keep_dims=true with axes on a rank-0 input)")
        return reduced

    def run(self, x, axes):
        reduced = self.axes(axes, x.ndim)
        # No axes still reduces each element on its own: L1 and L2 give |x|, Max of NaN the lowest value.
        with np.errstate(all="ignore"):   # overflow wraps or saturates, inf - inf is NaN, as in C++
            out = self.reduce(x, reduced)
        if not self.attrs.keep_dims:
            out = out.reshape([d for i, d in enumerate(x.shape) if i not in reduced])
        return out


class SumLike(Reduction):
    """finish(sum of term(x), count).  An exact integer sum is narrowed before `finish`
    (8-bit: saturated; 32/64-bit: wrapped), a 16-bit one after it (see the module docstring)."""

    @staticmethod
    def term(x: np.ndarray) -> np.ndarray:
        return x

    def finish(self, total: np.ndarray, count: int) -> np.ndarray:
        return total

    def bind(self, step):
        """Float data and constant axes: `reduce` without its copy of the data (astype copies even
        to the same type) and with the axes worked out once."""
        data, axes = step.inputs
        if self.run_replaced() or type(self).reduce is not SumLike.reduce or axes.value is None \
                or data.rank is None or data.etype.name not in ("f32", "f64"):
            return None
        reduced = self.axes(axes.value, data.rank)
        if not reduced:
            return None
        keep, term, finish, dtype = self.attrs.keep_dims, self.term, self.finish, data.etype.carrier
        # The trailing axes (a global average pool's H and W, a norm's last axis): each sum one
        # product with a column of ones, by BLAS -- ResNet's pool over [512, 7 x 7] 11 -> 2.5 us
        trailing = reduced == tuple(range(data.rank - len(reduced), data.rank))
        last_only = reduced == (data.rank - 1,)

        def reduce(x, _):
            if last_only:       # (a norm's statistics: the shapes without loops, 1.5 us of 5)
                count, kept = x.shape[-1], x.shape[:-1] + (1,)
            else:
                count = 1
                for a in reduced:
                    count *= x.shape[a]
                kept = [1 if i in reduced else d for i, d in enumerate(x.shape)]
            if trailing and count > 1:
                total = last_axis_sums(term(x).reshape(-1, count)).reshape(kept)
            else:
                total = np.sum(term(x), axis=reduced, keepdims=True, dtype=dtype)
            out = finish(total, count).astype(dtype, copy=False)
            if keep:
                return out
            return out.reshape(x.shape[:-1] if last_only else [d for i, d in enumerate(x.shape) if i not in reduced])
        return reduce

    def reduce(self, x, axes):
        count = int(np.prod([x.shape[a] for a in axes]))
        integral = x.dtype.kind in "iu"
        dtype = _exact_dtype(x.dtype) if integral else _compute_dtype(x.dtype)
        total = np.sum(self.term(x.astype(dtype)), axis=axes, keepdims=True, dtype=dtype)
        if integral and x.dtype.itemsize != 2:
            total = _narrow(total, x.dtype).astype(dtype)
        result = self.finish(total, count)
        if integral and result.dtype.kind == "f":   # a root: truncated as float -> integer Convert does
            return convert_array(result, etypes.from_dtype(x.dtype))
        return result.astype(x.dtype)


@register("ReduceSum", 1)
class ReduceSum(SumLike):
    pass


@register("ReduceL1", 4)
class ReduceL1(SumLike):
    term = staticmethod(np.abs)


@register("ReduceL2", 4)
class ReduceL2(SumLike):
    @staticmethod
    def term(x):
        return x * x

    def finish(self, total, count):
        # Integer sums: the root in f64 (a sum wrapped negative has none: NaN).
        return np.sqrt(total.astype(np.float64) if total.dtype.kind in "iu" else total)


@register("ReduceMean", 1)
class ReduceMean(SumLike):
    def finish(self, total, count):
        if count == 0:
            return np.zeros_like(total)   # OpenVINO's mean of nothing is 0, not NaN
        if total.dtype.kind in "iu":
            # C++ integer division: truncates toward zero.
            quotient = total // count
            return np.where((total < 0) & (quotient * count != total), quotient + 1, quotient)
        return total / count   # f16: divided in f32, so 60000s average to 60000


@register("ReduceProd", 1)
class ReduceProd(Reduction):
    def bind(self, step):
        """Integers wider than 8 bits or f32/f64 with constant axes: the product in the data's own
        type (an integer product wraps the same in it as in 64 bits then narrowed), the axes worked
        out once (a decoding step's product of a shape, every call: 11 -> 3 us)."""
        data, axes = step.inputs
        etype = data.etype
        if self.run_replaced() or axes.value is None or data.rank is None or etype.carrier is None \
                or not (etype.carrier.kind in "iu" and etype.carrier.itemsize > 1 or etype.name in ("f32", "f64")):
            return None
        reduced, keep, dtype = self.axes(axes.value, data.rank), self.attrs.keep_dims, etype.carrier
        product = np.multiply.reduce

        def reduce(x, _):
            out = product(x, axis=reduced, keepdims=keep, dtype=dtype)   # (NumPy would widen to 64 bits)
            return out if type(out) is np.ndarray else np.asarray(out)     # (all axes, not kept: a scalar)
        return reduce

    def reduce(self, x, axes):
        if x.dtype.kind in "iu" and x.dtype.itemsize == 1:
            # Saturates: the true product's sign and size matter, so multiply in f64
            # (an overflow to inf still saturates) and let any zero factor win over inf.
            product = np.prod(x.astype(np.float64), axis=axes, keepdims=True)
            has_zero = np.any(x == 0, axis=axes, keepdims=True)
            return _narrow(np.where(has_zero, 0.0, product), x.dtype)
        dtype = _exact_dtype(x.dtype) if x.dtype.kind in "iu" else _compute_dtype(x.dtype)
        return np.prod(x, axis=axes, keepdims=True, dtype=dtype).astype(x.dtype)


class Extremum(Reduction):
    """ReduceMax / ReduceMin: NaN never wins, the empty result is the start value."""

    pick: staticmethod   # np.max or np.min
    pick_number: np.ufunc   # np.fmax or np.fmin: NaN loses to any number

    def start(self, dtype: np.dtype):
        raise NotImplementedError

    def reduce(self, x, axes):
        dtype = _compute_dtype(x.dtype)
        start = self.start(dtype)
        values = x.astype(dtype, copy=False)
        if dtype.kind == "f":
            if _short_middle_axis(values, axes):
                return _slices_extremum(self.pick_number, values, axes[0], start).astype(x.dtype, copy=False)
            # one pass, where replacing NaN by the start first took two more and a copy
            return self.pick_number.reduce(values, axis=axes, keepdims=True, initial=start).astype(
                x.dtype, copy=False)
        return self.pick(values, axis=axes, keepdims=True, initial=start).astype(x.dtype, copy=False)


# A reduction over one axis, not the last, of at most this many elements, of data at least this
# large: its slices combined one by one into the start value (contiguous rows, NumPy's fast loop)
# instead of by the ufunc's reduce (which walks the short axis in its inner loop): a CRNN's maximum
# over the height of 256 x 4 x 64, 34 -> 14 us.
SHORT_AXIS_MOST = 16
SHORT_AXIS_MIN_ELEMENTS = 4096


def _short_middle_axis(values: np.ndarray, axes) -> bool:
    return len(axes) == 1 and axes[0] != values.ndim - 1 and 0 < values.shape[axes[0]] <= SHORT_AXIS_MOST \
        and values.size >= SHORT_AXIS_MIN_ELEMENTS


def _slices_extremum(ufunc, values: np.ndarray, axis: int, start) -> np.ndarray:
    """ufunc.reduce(values, axis, keepdims=True, initial=start) for np.fmax / np.fmin: the same
    values (NaN loses to any number, and to `start`)."""
    before = (slice(None),) * axis
    out = np.full(values.shape[:axis] + (1,) + values.shape[axis + 1:], start, values.dtype)
    for j in range(values.shape[axis]):
        ufunc(out, values[before + (slice(j, j + 1),)], out=out)
    return out


@register("ReduceMax", 1)
class ReduceMax(Extremum):
    pick = staticmethod(np.max)
    pick_number = np.fmax

    def start(self, dtype):
        return np.finfo(dtype).min if dtype.kind == "f" else np.iinfo(dtype).min


@register("ReduceMin", 1)
class ReduceMin(Extremum):
    pick = staticmethod(np.min)
    pick_number = np.fmin

    def start(self, dtype):
        return np.inf if dtype.kind == "f" else np.iinfo(dtype).max


class LogicalReduction(Reduction):
    def check_etype(self, etype):
        if etype.kind != "bool":
            raise ShapeError(f"Element type of data input must be boolean, got {etype}")


@register("ReduceLogicalAnd", 1)
class ReduceLogicalAnd(LogicalReduction):
    def reduce(self, x, axes):
        return np.all(x, axis=axes, keepdims=True)


@register("ReduceLogicalOr", 1)
class ReduceLogicalOr(LogicalReduction):
    def reduce(self, x, axes):
        return np.any(x, axis=axes, keepdims=True)


# ---------------------------------------------------------------- CumSum

@register("CumSum", 3)
class CumSum(Op):
    """Running sums along one axis (axis 0 without the axis input).

    `exclusive` leaves the element itself out, `reverse` runs from the end.
    Integers wrap (the CPU plugin, even for i8; it computes i64 in i32, irrun
    in i64); booleans give "any true so far"; f16 is summed in f32.
    """

    def axis(self, axis_value, rank: int) -> int:
        return normalize_axis(int(axis_value), rank, "CumSum axis")

    def infer(self, inputs):
        data = inputs[0]
        if data.etype.kind == "string":
            raise ShapeError(f"CumSum does not support element type {data.etype}")
        if len(inputs) > 1:
            axis = inputs[1]
            if axis.etype not in (etypes.i32, etypes.i64, etypes.dynamic):
                raise ShapeError(f"CumSum axis element type must be i32 or i64, got {axis.etype}")
            # OpenVINO's shape inference takes any shape (the reference reads the first value);
            # the CPU plugin refuses anything but a scalar.
            if axis.rank is not None and axis.rank != 0:
                raise ShapeError(f"CumSum axis must be a scalar, got shape {format_shape(axis.shape)}")
            if axis.value is not None and data.rank is not None:
                self.axis(axis.value, data.rank)
        return [data.like()]

    def run(self, x, axis_value=0):
        if x.ndim == 0:
            return np.zeros_like(x) if self.attrs.exclusive else x.copy()
        axis = self.axis(axis_value, x.ndim)
        values = np.flip(x, axis) if self.attrs.reverse else x
        if self.attrs.exclusive:
            values = _shift_forward(values, axis)
        dtype = np.dtype(np.int64) if x.dtype == np.bool_ else _compute_dtype(x.dtype)
        with np.errstate(over="ignore"):
            sums = np.cumsum(values, axis=axis, dtype=dtype)
        if self.attrs.reverse:
            sums = np.flip(sums, axis)
        return (sums != 0) if x.dtype == np.bool_ else sums.astype(x.dtype)


def _shift_forward(x: np.ndarray, axis: int) -> np.ndarray:
    """x moved one step along `axis`, a zero entering at the start (the last element drops out)."""
    out = np.zeros_like(x)
    dst = [slice(None)] * x.ndim
    src = [slice(None)] * x.ndim
    dst[axis], src[axis] = slice(1, None), slice(None, -1)
    out[tuple(dst)] = x[tuple(src)]
    return out
