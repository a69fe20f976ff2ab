"""Elementwise math: Abs, Negative, Sign, Floor, Ceiling, Round, the square
root, exponential, logarithm, error function, the trigonometric and
hyperbolic functions and their inverses, the inverse error function, and the
IsFinite/IsInf/IsNaN tests.

Every op keeps its input's shape.  The transcendental functions go through
`float_math` (f16 computed in f32; integer inputs computed in float, rounded to
nearest).  Abs, Negative and Sign stay in the integer type (wrapping, as C++
does: Abs(INT_MIN) = INT_MIN), and rounding an integer changes nothing.
"""
from __future__ import annotations

import numpy as np

from .. import etypes
from ..errors import ShapeError
from ..registry import Op, register
from .activation import UnaryElementwise, _polynomial, erf, erf_f32, float_math
from .common import round_half_away


class FloatFunction(UnaryElementwise):
    """A real function, computed through `float_math`."""

    function = staticmethod(np.exp)

    def run(self, x):
        return float_math(self.function, x)


@register("Sqrt", 1)
class Sqrt(FloatFunction):
    function = staticmethod(np.sqrt)


@register("Exp", 1)
class Exp(FloatFunction):
    function = staticmethod(np.exp)


@register("Log", 1)
class Log(FloatFunction):
    function = staticmethod(np.log)


@register("Erf", 1)
class Erf(FloatFunction):
    function = staticmethod(erf)

    def run(self, x):
        if x.dtype == np.float32:
            return erf_f32(x)
        return super().run(x)


# ErfInv-17: OpenVINO's rational approximation (M. Giles, "Approximating the erfinv function",
# GPU Computing Gems Jade, 2011, single precision), erfinv(x) = x P(w) with w = -ln((1 - x)(1 + x)),
# one polynomial for w < 5 and one in sqrt(w) beyond.  OpenVINO's tail polynomial has -0.00943887047
# where Giles has +0.00943887047, which puts it up to 0.53% off erfinv for |x| > 0.9966; irrun keeps
# OpenVINO's value (specs/errata/unary.md).  Leading coefficient first.
_ERFINV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                   -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                -0.0076224613, -0.00943887047, 1.00167406, 2.83297682)


def erfinv(x: np.ndarray) -> np.ndarray:
    """OpenVINO's erfinv, in double precision as its reference kernel: 0 at 0, +-inf at +-1, NaN
    beyond (and for NaN)."""
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        w = -np.log((1 - x) * (1 + x))
        y = np.where(w < 5, _polynomial(_ERFINV_CENTRAL, w - 2.5), _polynomial(_ERFINV_TAIL, np.sqrt(w) - 3.0))
        y *= x      # in place: a 0-d y stays an array
    edge = np.abs(x) >= 1
    y[edge] = np.where(np.abs(x[edge]) > 1, np.nan, np.copysign(np.inf, x[edge]))
    y[x == 0] = 0
    return y


@register("ErfInv", 17)
class ErfInv(FloatFunction):
    float_only = True
    function = staticmethod(erfinv)


@register("Sin", 1)
class Sin(FloatFunction):
    function = staticmethod(np.sin)


@register("Cos", 1)
class Cos(FloatFunction):
    function = staticmethod(np.cos)


@register("Tan", 1)
class Tan(FloatFunction):
    function = staticmethod(np.tan)


@register("Asin", 1)
class Asin(FloatFunction):
    function = staticmethod(np.arcsin)


@register("Acos", 1)
class Acos(FloatFunction):
    function = staticmethod(np.arccos)


@register("Atan", 1)
class Atan(FloatFunction):
    function = staticmethod(np.arctan)


@register("Sinh", 1)
class Sinh(FloatFunction):
    function = staticmethod(np.sinh)


@register("Cosh", 1)
class Cosh(FloatFunction):
    function = staticmethod(np.cosh)


@register("Asinh", 4)
class Asinh(FloatFunction):
    function = staticmethod(np.arcsinh)


@register("Acosh", 4)
class Acosh(FloatFunction):
    function = staticmethod(np.arccosh)


@register("Atanh", 4)
class Atanh(FloatFunction):
    function = staticmethod(np.arctanh)


# ---------------------------------------------------------------- exact in the input's type

@register("Abs", 1)
class Abs(UnaryElementwise):
    def run(self, x):
        return np.abs(x)


@register("Negative", 1)
class Negative(UnaryElementwise):
    def run(self, x):
        return np.negative(x)   # unsigned types wrap: -1 as u8 is 255


@register("Sign", 1)
class Sign(UnaryElementwise):
    def run(self, x):
        return np.sign(x)       # NaN stays NaN, -0.0 gives 0


class Rounding(UnaryElementwise):
    """Integers are already whole: they pass through unchanged."""

    def run(self, x):
        return self.round(x) if x.dtype.kind == "f" else x

    def round(self, x):
        raise NotImplementedError


@register("Floor", 1)
class Floor(Rounding):
    round = staticmethod(np.floor)


@register("Ceiling", 1)
class Ceiling(Rounding):
    round = staticmethod(np.ceil)


@register("Round", 5)
class Round(Rounding):
    def round(self, x):
        return np.rint(x) if self.attrs.mode == "half_to_even" else round_half_away(x)


# ---------------------------------------------------------------- floating-point class tests

class FloatTest(Op):
    """Floating-point input, boolean output of the same shape."""

    def infer(self, inputs):
        t = inputs[0]
        if not (t.etype.is_float or t.etype.kind == "dynamic"):
            raise ShapeError(f"{self.spec.type} takes floating-point input, got element type {t.etype}")
        return [t.like(etype=etypes.boolean)]


@register("IsFinite", 10)
class IsFinite(FloatTest):
    def run(self, x):
        return np.isfinite(x)


@register("IsNaN", 10)
class IsNaN(FloatTest):
    def run(self, x):
        return np.isnan(x)


@register("IsInf", 10)
class IsInf(FloatTest):
    def run(self, x):
        return (np.isposinf(x) & self.attrs.detect_positive) | (np.isneginf(x) & self.attrs.detect_negative)
