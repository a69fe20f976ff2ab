"""Activations: Relu, Sigmoid, Tanh, Clamp, Softmax, PRelu, Elu, Selu, Gelu,
HSwish, HSigmoid, HardSigmoid, Swish, Mish, SoftPlus, SoftSign, LogSoftmax.

Each keeps its input's shape and element type.  The transcendental ones go
through `float_math`, which computes f16 in f32 (as OpenVINO's CPU plugin does
at f32 inference precision) and rounds integer results to nearest.
"""
from __future__ import annotations

import math
from functools import lru_cache
from math import prod
from typing import Callable

import numpy as np

from .. import threads
from ..errors import ShapeError
from ..etypes import from_dtype
from ..registry import Op, register
from ..shapes import format_shape, normalize_axis
from .common import clip_ufunc, convert_array, last_axis_sums, scalar_clamp, scalar_extremum, typed_constant


def float_math(fn: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    """`fn` on a float copy of x, returned in x's dtype."""
    with np.errstate(all="ignore"):
        if x.dtype.kind == "f":
            y = fn(x.astype(np.float32) if x.dtype == np.float16 else x)
            return np.asarray(y, dtype=x.dtype)
        # Integer inputs: OpenVINO's CPU plugin computes in float and rounds, e.g. Sigmoid(1) = 1,
        # Sqrt(3) = 2.  Results an integer cannot hold (NaN, inf, overflow) convert as Convert does.
        return convert_array(np.rint(fn(x.astype(np.float64))), from_dtype(x.dtype))


# erf to double precision (NumPy has none): the rational approximations of Cephes' ndtr.c
# (S. L. Moshier), erf(x) = x T(x^2) / U(x^2) for |x| <= 1 and 1 - exp(-x^2) P(|x|) / Q(|x|)
# above; from |x| = 6 on, erf is 1 to double precision.  Leading coefficient first.
_ERF_T = (9.60497373987051638749e0, 9.00260197203842689217e1, 2.23200534594684319226e3,
          7.00332514112805075473e3, 5.55923013010394962768e4)
_ERF_U = (1.0, 3.35617141647503099647e1, 5.21357949780152679795e2, 4.59432382970980127987e3,
          2.26290000613890934246e4, 4.92673942608635921086e4)
_ERFC_P = (2.46196981473530512524e-10, 5.64189564831068821977e-1, 7.46321056442269912687e0,
           4.86371970985681366614e1, 1.96520832956077098242e2, 5.26445194995477358631e2,
           9.34528527171957607540e2, 1.02755188689515710272e3, 5.57535335369399327526e2)
_ERFC_Q = (1.0, 1.32281951154744992508e1, 8.67072140885989742329e1, 3.54937778887819891062e2,
           9.75708501743205489753e2, 1.82390916687909736289e3, 2.24633760818710981792e3,
           1.65666309194161350182e3, 5.57535340817727675546e2)
_ERF_IS_ONE = 6.0


def _polynomial(coefficients: tuple[float, ...], z: np.ndarray) -> np.ndarray:
    """Horner's rule in place, leading coefficient first (two or more), in z's float type.  (The
    coefficients as scalars of that type made once, and `out` passed positionally: on a decoding
    step's 1024 values, where its calls are all overhead, Gelu took 13.1 -> 8.9-9.1 us, the same bits.)"""
    if z.ndim == 0:   # NumPy makes scalars of 0-d results, which `out=` cannot take
        return _polynomial(coefficients, z.reshape(1)).reshape(())
    typed = _typed_coefficients(coefficients, z.dtype)
    total = np.multiply(z, typed[0])
    for c in typed[1:-1]:
        np.add(total, c, total)
        np.multiply(total, z, total)
    return np.add(total, typed[-1], total)


@lru_cache(maxsize=64)
def _typed_coefficients(coefficients: tuple[float, ...], dtype: np.dtype) -> tuple:
    return tuple(dtype.type(c) for c in coefficients)



# erf in float32 (the Erf op): erf(t) = t P(t^2) / Q(t^2) for t clamped to [-4, 4] (from 3.92 on,
# erf is 1 in float32); one rational function, degrees 5 / 5, fitted to `erf` by weighted least
# squares, within 4.1e-7 of erf.  Leading coefficient first; P is halved: t P / Q is erf(t) / 2.
_ERF_F32_P = tuple(c / 2 for c in (1.9745583096867836e-06, 0.0002879645812287712, 0.004002091973519928,
                                    0.05346277799246491, 0.1962185205467738, 1.1283789791187833))
_ERF_F32_Q = (3.747392767327778e-05, 0.0012158995683168026, 0.015441432023659158, 0.1164631974328935,
               0.5072253202045632, 1.0)
_ERF_SATURATES_F32 = 4.0
_ERF_CLAMP_F32 = scalar_clamp(-_ERF_SATURATES_F32, _ERF_SATURATES_F32, np.dtype(np.float32))

# Gelu (erf mode) in float32 as x (1 + tanh(y(x))) / 2, where y(x) = atanh(erf(x / sqrt 2)) is odd
# and smooth: y = x S(x^2), S of degree 6 fitted over [0, 5.75^2] (at 5.75 y is 10.3 and tanh(y)
# exactly +-1 in float32, so that Gelu is 0 and x beyond) by reweighted least squares to Gelu's own
# error.  Within 5.6e-7 of 0.5 x (1 + erf(x / sqrt 2)) over all floats (the CPU plugin's own Gelu
# is 1.2e-6 off at x = 3.5), in 18 NumPy calls where erf's rational function takes 29: Gelu was a
# fifth of a BERT encoder's time.  S has no real root and grows with x beyond the fit, so |y| stays
# above 10.3 there (checked over float32 magnitudes up to 3.4e38, and S(inf) is inf, not NaN):
# x needs no clamp to [-5.75, 5.75] first, whose clip took an eighth of Gelu's time (the same
# bits).  S's first two coefficients are nearly those of Gelu's tanh mode.  Leading coefficient
# first.
_GELU_TANH_ARGUMENT = (1.8139381510334537e-09, -1.3378367331057332e-07, 3.974078205893313e-06,
                       -5.527343898298613e-05, -3.302653799136589e-05, 0.03633414892892616, 0.7978842684407049)
_GELU_SIGMOID_ARGUMENT = tuple(-2 * c for c in _GELU_TANH_ARGUMENT)     # -2 y = x times this of x^2
_ONE_F32, _HALF_F32 = np.float32(1), np.float32(0.5)


def _gelu_erf_f32_into(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """0.5 x (1 + erf(x / sqrt 2)) of float32 data, written into `out` (which may be `x`)."""
    if x.ndim == 0:   # NumPy makes scalars of 0-d results, which `out=` cannot take
        return _gelu_erf_f32_into(x.reshape(1), out.reshape(1)).reshape(())
    if not EXP_BY_EXP2:
        # As x / (1 + exp(-2 y)), the same function ((1 + tanh(y)) / 2 = 1 / (1 + exp(-2 y))) where
        # NumPy has no AVX-512 loops: exp takes 2.3-2.5 ns an element there, tanh 3.1-4.0, and two
        # calls fewer (and no 1 + tanh(y) cancelling for negative x)
        t = _polynomial(_GELU_SIGMOID_ARGUMENT, np.multiply(x, x))
        np.multiply(t, x, t)
        np.exp(t, t)
        np.add(t, _ONE_F32, t)
        return np.divide(x, t, out)
    y = _polynomial(_GELU_TANH_ARGUMENT, np.multiply(x, x))     # (inf for |x| from about 1e4)
    np.multiply(y, x, y)
    np.tanh(y, y)
    np.add(y, _ONE_F32, y)
    np.multiply(y, _HALF_F32, y)
    return np.multiply(y, x, out)


def erf_f32(x: np.ndarray) -> np.ndarray:
    """The error function of float32 data in float32, within 4.1e-7 of erf (the double-precision
    `erf` took 50 times an add; this is a fifth of that)."""
    if x.ndim == 0:
        return erf_f32(x.reshape(1)).reshape(())
    t = _ERF_CLAMP_F32(x, None)   # NaN stays NaN
    z = np.multiply(t, t)
    doubled = _polynomial(_ERF_F32_P, z)
    doubled *= t
    doubled /= _polynomial(_ERF_F32_Q, z)
    return np.add(doubled, doubled, out=doubled)


def erf(x: np.ndarray) -> np.ndarray:
    """The error function in double precision (within 5e-16 relative of C's erf)."""
    x = np.asarray(x, np.float64)
    out = np.ones_like(x)
    np.copysign(out, x, out=out)                   # |x| >= 6 (and +-inf); out= keeps 0-d an array
    out[np.isnan(x)] = np.nan
    ax = np.abs(x)
    near = ax <= 1
    xn = x[near]
    zn = xn * xn
    out[near] = xn * _polynomial(_ERF_T, zn) / _polynomial(_ERF_U, zn)
    middle = (ax > 1) & (ax < _ERF_IS_ONE)
    am = ax[middle]
    erfc = np.exp(-am * am) * _polynomial(_ERFC_P, am) / _polynomial(_ERFC_Q, am)
    out[middle] = np.copysign(1 - erfc, x[middle])
    return out


class UnaryElementwise(Op):
    """Same shape and element type out; numeric element types only (floating-point with `float_only`)."""

    float_only = False

    def infer(self, inputs):
        t = inputs[0]
        if t.etype.kind in ("bool", "string") or (self.float_only and t.etype.kind in ("int", "uint")):
            allowed = "floating-point" if self.float_only else "numeric"
            raise ShapeError(f"{self.spec.type} takes {allowed} input, got element type {t.etype}")
        return [t.like()]

    def quick_shapes(self, args):
        return ((args[0].shape,), ()) if len(args) == 1 else None

    def check_parameter(self, inputs, index: int, *, scalar: bool) -> None:
        """A parameter input (alpha, beta, lambda): data's element type, and rank 0 where `scalar`."""
        data, param = inputs[0], inputs[index]
        name = self.spec.inputs[index].name
        if param.etype != data.etype and "dynamic" not in (param.etype.kind, data.etype.kind):
            raise ShapeError(f"{self.spec.type} input {name} has element type {param.etype}, "
                             f"data has {data.etype}: they must match")
        if scalar and param.rank not in (None, 0):
            raise ShapeError(f"{self.spec.type} input {name} must be a scalar, got shape {format_shape(param.shape)}")


class Activation(UnaryElementwise):
    """The ops of this module: every kernel returns a new array (never a view of an input), which
    lets the executor hand a later op this output to overwrite (see irrun/executor.py)."""

    outputs_are_new = True

    #: f32/f64 kernel writing into its second argument, bound by the executor: `fn(x, out) -> out`.
    #: `out` may be `x` (a kernel that needs x after writing keeps its values in a temporary: in
    #: blocks of a large tensor, irrun/threads.py, that stays in cache)
    into = None
    #: work per element relative to an add (irrun.threads: when a large tensor is worth splitting)
    cost = 1.0

    #: axes `into` reads across (the rest is position by position): none but Softmax's
    def whole_axes(self, rank: int) -> tuple[int, ...]:
        return ()

    def into_for(self, dtype: np.dtype):
        """`into` for data of `dtype`: an op whose kernel has constants overrides this to make
        one with them already in that type (looking them up was a third of a small call)."""
        return self.into

    def ufuncs(self, dtype: np.dtype) -> list | None:
        """`into_for(dtype)` spelled as its NumPy calls, for irrun/optimize.py to inline in a fused
        chain on small tensors: [(ufunc, constant, a tuple of constants (clip's bounds) or None)],
        the first reading x, every one writing `out`, the same calls in the same order (None: not
        spelled out)."""
        return None

    def bind(self, step):
        """`into` for float32/float64 data, in place when the plan lets this op overwrite its input."""
        etype = step.inputs[0].etype
        if self.run_replaced() or etype.name not in ("f32", "f64"):
            return None
        into = self.into_for(etype.carrier)
        if into is None:
            return None
        in_place = 0 in step.consumable
        data = step.inputs[0]
        if data.is_static and data.rank and threads.worth_parts(prod(data.shape), self.cost):
            cost, whole = self.cost, self.whole_axes(data.rank)
            if in_place:
                return lambda x: threads.in_parts(into, x, x, cost=cost, whole_axes=whole)
            return lambda x: threads.in_parts(into, np.empty_like(x), x, cost=cost, whole_axes=whole)
        if in_place:
            return lambda x: into(x, x)
        return lambda x: into(x, np.empty_like(x))


@register("Relu", 1)
class Relu(Activation):
    def into_for(self, dtype):
        # As OpenVINO's reference, which replaces what is below 0 with 0: NaN and -0.0 pass through
        # (the CPU plugin's 0 for NaN is its bug); for floats scalar_extremum clips to [0, inf],
        # the same bits (MobileNetV3 3.3%, the 500 cheap layers 6.6% faster than np.maximum by a
        # row of zeros, old and new alternating in one process; the rest level).
        # np.where(x < 0, 0, x) is 5x slower.
        return scalar_extremum(np.maximum, 0, dtype)

    def ufuncs(self, dtype):
        if dtype.kind == "f":
            return [(clip_ufunc, (typed_constant(0, dtype), typed_constant(np.inf, dtype)))]
        return [(np.maximum, typed_constant(0, dtype))]

    def run(self, x):
        return self.into_for(x.dtype)(x, np.empty_like(x))


def _numpy_has_avx512_loops() -> bool:
    """Whether NumPy dispatches its AVX-512 (SKX) loops on this CPU, SVML's exp2 among them."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:
        try:
            from numpy.core._multiarray_umath import __cpu_features__ as features
        except ImportError:
            return False
    return bool(features.get("AVX512_SKX") or features.get("X86_V4"))


# exp(a x) is computed as exp2(x * a log2(e)) where NumPy runs its AVX-512 loops: its float32 exp2
# (SVML's) takes 0.20 ns an element there against exp's 0.37, so a multiply and exp2 (0.28) beat a
# negation and exp (0.45), and Swish, the activation of YOLO and EfficientNet, 0.74 -> 0.58 ns
# (YOLOv5n-style net 14.9 -> 14.3 ms, EfficientNet-B0 24.0 -> 23.2).  Rounding the product moves
# the result by at most |a x| 2^-24 relative: 4e-6 where exp(a x) reaches float32's limits, 1e-7 for
# |a x| < 2.  Without AVX-512 (an AMD EPYC of family 19h, model 1: AVX2 and FMA) exp2 is the slower,
# 4.5 ns an element against exp's 2.3, and exp(a x) is exp of the product itself (a = -1: an exact
# negation).  Decided once, from the CPU (the same bits from one process to the next).
EXP_BY_EXP2 = _numpy_has_avx512_loops()
LOG2_E = 1.4426950408889634


def exponential():
    """The ufunc that gives exp(a x) from x times `exponent_factor(a)`: np.exp2 or np.exp."""
    return np.exp2 if EXP_BY_EXP2 else np.exp


def exponent_factor(a: float, dtype) -> np.generic:
    """What x is multiplied by, in `dtype`, for `exponential()` of the product to be exp(a x)."""
    return typed_constant(a * LOG2_E if EXP_BY_EXP2 else a, dtype)


def _sigmoid(x):
    return 1 / (1 + exponential()(x * exponent_factor(-1, x.dtype)))


def _sigmoid_into_for(dtype):
    one, scale, exp = typed_constant(1, dtype), exponent_factor(-1, dtype), exponential()

    def sigmoid_into(x, out):
        """1 / (1 + exp(-x)), rounded exactly as `_sigmoid`, without temporaries.  (1 / t by
        np.divide: the same bits as np.reciprocal at half its time, 0.084 against 0.161 ns an
        element in float32.)"""
        np.multiply(x, scale, out=out)
        exp(out, out=out)
        np.add(out, one, out=out)
        return np.divide(one, out, out=out)
    return sigmoid_into


@register("Sigmoid", 1)
class Sigmoid(Activation):
    cost = 3.0
    def into_for(self, dtype):
        return _sigmoid_into_for(dtype)

    def ufuncs(self, dtype):
        return [(np.multiply, exponent_factor(-1, dtype)), (exponential(), None), (np.add, typed_constant(1, dtype)),
                (np.reciprocal, None)]

    def run(self, x):
        return float_math(_sigmoid, x)


@register("Tanh", 1)
class Tanh(Activation):
    cost = 3.0
    into = staticmethod(lambda x, out: np.tanh(x, out=out))

    def ufuncs(self, dtype):
        return [(np.tanh, None)]

    def run(self, x):
        return float_math(np.tanh, x)


def _saturate(value: float, to_int: Callable[[float], int], info: np.iinfo) -> int:
    if not math.isfinite(value):
        return info.min if value < 0 else info.max
    return min(max(to_int(value), info.min), info.max)


@register("Clamp", 1)
class Clamp(Activation):
    def infer(self, inputs):
        if self.attrs.min > self.attrs.max:
            raise ShapeError(f"Clamp min ({self.attrs.min:g}) is greater than max ({self.attrs.max:g})")
        return super().infer(inputs)

    def bounds(self, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        """min and max in the input's dtype: integers round inward (ceil(min), floor(max)) and saturate."""
        lo, hi = self.attrs.min, self.attrs.max
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            lo, hi = _saturate(lo, math.ceil, info), _saturate(hi, math.floor, info)
        with np.errstate(over="ignore"):   # past f16's range a bound becomes inf, as static_cast does
            return np.asarray(lo, dtype), np.asarray(hi, dtype)

    def into_for(self, dtype):
        lo, hi = (np.asarray(b).item() for b in self.bounds(dtype))
        return scalar_clamp(lo, hi, dtype)     # (NaN stays NaN, as in `run`)

    def ufuncs(self, dtype):
        lo, hi = (np.asarray(b).item() for b in self.bounds(dtype))
        return [(clip_ufunc, (typed_constant(lo, dtype), typed_constant(hi, dtype)))]

    def run(self, x):
        lo, hi = self.bounds(x.dtype)
        # std::min(std::max(x, lo), hi) as OpenVINO's reference: NaN stays NaN, and an
        # integer range emptied by rounding (min 2.3, max 2.7) gives hi everywhere.
        raised = np.where(x < lo, lo, x)
        return np.where(hi < raised, hi, raised)


# Within these bounds exp neither overflows (a row sums to at most its length times 6e27) nor
# underflows (exp(-64) is 1.6e-28, a normal float32), so no row needs its maximum subtracted;
# below _SOFTMAX_WHOLE_EXTREMES elements the two extra calls cost more than they save
_SOFTMAX_EXP_SAFE = 64.0
_SOFTMAX_WHOLE_EXTREMES = 1024
_SOFTMAX_EXP2_ELEMENTS = 1 << 18


def _softmax_into(x, out, axis: int | None):
    if x.size == 0:
        return out
    # One pass for the whole tensor's extremes instead of one maximum per row (a third of the
    # time of 128-wide rows) and the subtraction; masked scores (-1e4, -inf) and NaN take the rows'.
    # Within the caches, exp by exp2 where the activations above take it (ViT's 3 x 197 x 197 scores
    # 119 -> 98 us); beyond them the product is one more pass through memory (8 x 512 x 512: 1.37 ->
    # 1.97 ms)
    by_exp2 = EXP_BY_EXP2 and x.size <= _SOFTMAX_EXP2_ELEMENTS
    if x.size >= _SOFTMAX_WHOLE_EXTREMES and -_SOFTMAX_EXP_SAFE < x.min() and x.max() < _SOFTMAX_EXP_SAFE:
        start = x
    else:
        # exp cannot overflow then (the ufunc's reduce: x.max's Python wrapper took 1 us of a decoding
        # step's 8-us softmax over 4 x 128 scores)
        start = np.subtract(x, np.maximum.reduce(x, axis=axis, keepdims=True), out=out)
    if by_exp2:
        np.exp2(np.multiply(start, typed_constant(LOG2_E, out.dtype), out=out), out=out)
    else:
        np.exp(start, out=out)
    if axis == x.ndim - 1 and out.dtype in (np.float32, np.float64):
        out /= last_axis_sums(out)
    else:
        out /= out.sum(axis=axis, keepdims=True)
    return out



def _softmax(axis: int | None):
    def softmax(x):
        if x.ndim == 0:   # NumPy makes scalars of 0-d results, which `out=` cannot take
            return softmax(x.reshape(1)).reshape(())
        return _softmax_into(x, np.empty_like(x), axis)
    return softmax


@register("Softmax", 1, 8)
class Softmax(Activation):
    cost = 3.0

    def whole_axes(self, rank):
        return (self.axis(rank),)

    def axis(self, rank: int) -> int:
        axis = self.attrs.axis
        if self.version == 1 and axis < 0:
            raise ShapeError(f"Softmax-1 axis must be non-negative, got {axis} (Softmax-8 allows negative axes)")
        return normalize_axis(axis, rank, "Softmax axis")

    def infer(self, inputs):
        if inputs[0].rank is not None:
            self.axis(inputs[0].rank)
        return super().infer(inputs)

    def run(self, x):
        axis = self.axis(x.ndim)
        return float_math(_softmax(axis if x.ndim else None), x)

    def into(self, x, out):
        if x.ndim == 0:
            out[...] = self.run(x)
            return out
        return _softmax_into(x, out, self.axis(x.ndim))


# ---------------------------------------------------------------- PRelu

def _slope_layout(data_shape, slope_shape) -> tuple | None:
    """The shape slope takes to broadcast against data, or None where it cannot.

    A 1-D slope as long as the channel axis (axis 1, axis 0 for 1-D data) runs
    along that axis, even where it also matches the last axis; any other slope
    broadcasts numpy-style onto data and must not widen it.
    """
    if data_shape is None or slope_shape is None:
        return slope_shape
    rank = len(data_shape)
    channel = 1 if rank > 1 else 0
    if len(slope_shape) == 1 and rank:
        if not (isinstance(slope_shape[0], int) and isinstance(data_shape[channel], int)):
            return slope_shape                     # may run along the channels: known only when run
        if slope_shape[0] == data_shape[channel]:
            return tuple(slope_shape[0] if axis == channel else 1 for axis in range(rank))
    extra = len(slope_shape) - rank
    if extra > 0:
        if any(isinstance(d, int) and d != 1 for d in slope_shape[:extra]):
            return None                             # would widen the output beyond data
        slope_shape = slope_shape[extra:]
    for s, d in zip(reversed(slope_shape), reversed(data_shape)):
        if isinstance(s, int) and isinstance(d, int) and s not in (1, d):
            return None
    return tuple(slope_shape)


@register("PRelu", 1)
class PRelu(Activation):
    def infer(self, inputs):
        data, slope = inputs
        if _slope_layout(data.shape, slope.shape) is None:
            raise ShapeError(f"PRelu slope {format_shape(slope.shape)} fits neither the channel axis nor, "
                             f"numpy-style, the data {format_shape(data.shape)}")
        return super().infer(inputs)

    def run(self, x, slope):
        slope = slope.reshape(_slope_layout(x.shape, slope.shape)).astype(x.dtype, copy=False)
        if x.dtype.kind == "f" and x.size >= _PRELU_CLIPPED_ELEMENTS and np.isfinite(slope).all():
            return _prelu_clipped(x, slope)
        with np.errstate(over="ignore"):
            return np.where(x < 0, x * slope, x)   # integers wrap; NaN and -0.0 pass through


# np.where on data whose sign changes at random takes 3.5 ns an element (mispredicted branches;
# 0.45 with no sign change): LeakyReLU, which OpenVINO reads as PRelu, over 64 x 56 x 56
# activations took 826 us that way (526 with spatially correlated signs), 132-153 clipped.
_PRELU_CLIPPED_ELEMENTS = 1 << 12


def _prelu_clipped(x: np.ndarray, slope: np.ndarray) -> np.ndarray:
    """where(x < 0, x * slope, x) as min(x, 0) * slope + max(x, 0), both clip ufunc calls, for a
    finite slope: the same values, NaN staying NaN; a zero's sign can differ where both terms are
    zeros of opposite signs (x = -0.0 with a negative slope, x * slope underflowing, slope 0),
    where -0.0 + 0.0 is +0.0 (equal values)."""
    negative = scalar_clamp(-np.inf, 0, x.dtype)(x, np.empty_like(x))
    np.multiply(negative, slope, out=negative)
    return np.add(negative, scalar_clamp(0, np.inf, x.dtype)(x, np.empty_like(x)), out=negative)


# ---------------------------------------------------------------- exponential units

@register("Elu", 1)
class Elu(Activation):
    def run(self, x):
        alpha = self.attrs.alpha
        return float_math(lambda v: np.where(v < 0, alpha * np.expm1(v), v), x)


@register("Selu", 1)
class Selu(Activation):
    float_only = True

    def infer(self, inputs):
        self.check_parameter(inputs, 1, scalar=False)
        self.check_parameter(inputs, 2, scalar=False)
        return super().infer(inputs)

    def run(self, x, alpha, lam):
        # One value each is the norm; of longer tensors the CPU plugin uses the first value.
        a, scale = (float(p.reshape(-1)[0]) for p in (alpha, lam))
        return float_math(lambda v: np.where(v > 0, scale * v, (a * scale) * np.expm1(v)), x)


# ---------------------------------------------------------------- Gelu, Swish, Mish, SoftPlus, SoftSign

_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


def _gelu_erf(x):
    if x.dtype == np.float32:
        return _gelu_erf_f32_into(x, np.empty_like(x))
    return 0.5 * x * (1 + erf(x / math.sqrt(2)).astype(x.dtype))


def _gelu_into(mode: str):
    """Gelu's bound kernel for float32 (float64 takes the exact `erf`)."""
    def into(x, out):
        if x.dtype == np.float32:
            return (_gelu_tanh_into if mode == "tanh" else _gelu_erf_f32_into)(x, out)
        out[...] = (_gelu_tanh if mode == "tanh" else _gelu_erf)(x)
        return out
    return into


def _gelu_tanh(x):
    # x cubed as x * x * x: NumPy's float power took 60 times an add
    return 0.5 * x * (1 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * (x * x * x))))


def _gelu_tanh_into(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """`_gelu_tanh` of float data, written into `out` (which may be `x`), one temporary."""
    if x.ndim == 0:   # NumPy makes scalars of 0-d results, which `out=` cannot take
        return _gelu_tanh_into(x.reshape(1), out.reshape(1)).reshape(())
    number = x.dtype.type
    t = np.multiply(x, x)
    t *= x
    t *= number(0.044715)
    t += x
    if not EXP_BY_EXP2:     # (as x / (1 + exp(-2 t)): see _gelu_erf_f32_into)
        t *= number(-2 * _SQRT_2_OVER_PI)
        np.exp(t, out=t)
        t += number(1)
        return np.divide(x, t, out=out)
    t *= number(_SQRT_2_OVER_PI)
    np.tanh(t, out=t)
    t += number(1)
    t *= x
    return np.multiply(t, number(0.5), out=out)


@register("Gelu", 2, 7)
class Gelu(Activation):
    float_only = True
    # (for parts, irrun/threads.py: its 19 NumPy calls take turns at the GIL, so two parts pay
    # later than the arithmetic says: on two threads, 151 Ki elements took 1.17x the time of one
    # part, 300 Ki 0.87x, 600 Ki 0.71x; inside the ViT's fused fc1 + bias + Gelu, 100 us more)
    cost = 4.0

    def __init__(self, spec, attrs):
        super().__init__(spec, attrs)
        self.mode = attrs.get("approximation_mode") or "erf"   # Gelu-2 has no attribute: always erf
        self.into = _gelu_into(self.mode)

    def run(self, x):
        return float_math(_gelu_tanh if self.mode == "tanh" else _gelu_erf, x)


@register("Swish", 4)
class Swish(Activation):
    float_only = True

    def infer(self, inputs):
        if len(inputs) > 1:
            self.check_parameter(inputs, 1, scalar=True)
        return super().infer(inputs)

    cost = 3.0

    def run(self, x, beta=None):
        b = 1.0 if beta is None else float(beta.reshape(()))
        return float_math(lambda v: v / (1 + exponential()(v * exponent_factor(-b, v.dtype))), x)

    beta = 1.0

    def bind(self, step):
        """With beta absent or constant, one pass without temporaries (and in parts, when large)."""
        if len(step.inputs) == 1:
            return super().bind(step)
        if step.inputs[1].value is None:
            return None
        self.beta = float(np.asarray(step.inputs[1].value).reshape(()))
        kernel = super().bind(step)
        return None if kernel is None else (lambda x, beta: kernel(x))

    def into_for(self, dtype):
        scale, one, exp = exponent_factor(-self.beta, dtype), typed_constant(1, dtype), exponential()

        def swish_into(x, out):
            """x / (1 + exp(-beta x)), rounded as `run`; `out` may be `x`."""
            t = np.multiply(x, scale, out=np.empty_like(x))
            exp(t, out=t)
            np.add(t, one, out=t)
            return np.divide(x, t, out=out)
        return swish_into


def _softplus(x):
    return _softplus_into(x, np.empty_like(x))


def _softplus_into(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """log(1 + exp(x)) without overflow, as max(x, 0) + log1p(exp(-|x|)): x itself once exp(x)
    dwarfs 1, as OpenVINO's threshold does.  The same formula as np.logaddexp(0, x), whose
    loop is not vectorised (26 times an add; this is 6).  `out` may be `x`."""
    if x.ndim == 0:   # NumPy makes scalars of 0-d results, which `out=` cannot take
        return _softplus_into(x.reshape(1), out.reshape(1)).reshape(())
    tail = np.abs(x)
    np.multiply(tail, exponent_factor(-1, x.dtype), out=tail)
    exponential()(tail, out=tail)
    np.log1p(tail, out=tail)
    scalar_extremum(np.maximum, 0, x.dtype)(x, out)
    return np.add(out, tail, out=out)


@register("SoftPlus", 4)
class SoftPlus(Activation):
    float_only = True
    into = staticmethod(_softplus_into)

    def run(self, x):
        return float_math(_softplus, x)


@register("Mish", 4)
class Mish(Activation):
    float_only = True
    cost = 6.0

    def into_for(self, dtype):
        def mish_into(x, out):
            """`out` may be `x`."""
            t = _softplus_into(x, np.empty_like(x))
            np.tanh(t, out=t)
            return np.multiply(t, x, out=out)
        return mish_into

    def run(self, x):
        return float_math(lambda v: v * np.tanh(_softplus(v)), x)


@register("SoftSign", 9)
class SoftSign(Activation):
    float_only = True

    def run(self, x):
        return float_math(lambda v: v / (1 + np.abs(v)), x)


# ---------------------------------------------------------------- hard (piecewise linear) sigmoids

def _relu6(v):
    return np.minimum(np.maximum(v + 3, 0), 6)


# HSwish and HSigmoid end with a product by 1/6, not a division by 6: 0.08 against 0.15 ns an
# element, 13% of HSwish (MobileNetV3's activation); the result moves by at most an ulp.
_ONE_SIXTH = 1 / 6


def _relu6_into_for(dtype):
    three, clamp = typed_constant(3, dtype), scalar_clamp(0, 6, dtype)

    def relu6_into(x, out):
        """min(max(x + 3, 0), 6) as `_relu6` rounds it."""
        np.add(x, three, out=out)
        return clamp(out, out)
    return relu6_into


@register("HSwish", 4)
class HSwish(Activation):
    cost = 2.0

    def into_for(self, dtype):
        relu6_into, one_sixth = _relu6_into_for(dtype), typed_constant(_ONE_SIXTH, dtype)

        def hswish_into(x, out):
            """`out` may be `x`."""
            t = relu6_into(x, np.empty_like(x))
            np.multiply(t, x, out=t)
            return np.multiply(t, one_sixth, out=out)
        return hswish_into

    def run(self, x):
        return float_math(lambda v: v * _relu6(v) * _ONE_SIXTH, x)


@register("HSigmoid", 5)
class HSigmoid(Activation):
    def into_for(self, dtype):
        relu6_into, one_sixth = _relu6_into_for(dtype), typed_constant(_ONE_SIXTH, dtype)

        def hsigmoid_into(x, out):
            return np.multiply(relu6_into(x, out), one_sixth, out=out)
        return hsigmoid_into

    def ufuncs(self, dtype):
        three, zero, six, one_sixth = (typed_constant(v, dtype) for v in (3, 0, 6, _ONE_SIXTH))
        return [(np.add, three), (clip_ufunc, (zero, six)), (np.multiply, one_sixth)]

    def run(self, x):
        return float_math(lambda v: _relu6(v) * _ONE_SIXTH, x)


@register("HardSigmoid", 1)
class HardSigmoid(Activation):
    def infer(self, inputs):
        self.check_parameter(inputs, 1, scalar=True)
        self.check_parameter(inputs, 2, scalar=True)
        return super().infer(inputs)

    def run(self, x, alpha, beta):
        a, b = (float(p.reshape(())) for p in (alpha, beta))
        # fmin/fmax as std::min/std::max in OpenVINO: NaN gives 1.
        return float_math(lambda v: np.fmax(0, np.fmin(1, (a * v + b).astype(v.dtype))), x)


# ---------------------------------------------------------------- LogSoftmax

def _log_softmax(axis: int | None, integral: bool):
    def log_softmax(x):
        if x.size == 0:
            return x
        shifted = x - x.max(axis=axis, keepdims=True)   # max subtracted: exp cannot overflow
        exps = np.exp(shifted)
        if integral:
            # OpenVINO keeps the exponentials in the integer type: exp(x - max) rounds to 1 at the
            # maximum and 0 elsewhere, so the sum counts the maxima.
            exps = np.rint(exps)
        return shifted - np.log(exps.sum(axis=axis, keepdims=True))
    return log_softmax


@register("LogSoftmax", 5)
class LogSoftmax(Activation):
    def axis(self, rank: int) -> int | None:
        if rank == 0 and self.attrs.axis in (0, -1):   # a scalar: its one element
            return None
        return normalize_axis(self.attrs.axis, rank, "LogSoftmax axis")

    def infer(self, inputs):
        if inputs[0].rank is not None:
            self.axis(inputs[0].rank)
        return super().infer(inputs)

    def run(self, x):
        return float_math(_log_softmax(self.axis(x.ndim), x.dtype.kind in "iu"), x)
