"""Activations: Relu, Sigmoid, Tanh, Clamp, Softmax.

Each keeps its input's shape and element type.  The transcendental ones go
through `float_math`, which computes f16 in f32 (as OpenVINO's CPU plugin does
at f32 inference precision) and rounds integer results to nearest.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ..errors import ShapeError
from ..registry import Op, register
from ..shapes import normalize_axis


def float_math(fn: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    """`fn` on a float copy of x, returned in x's dtype."""
    with np.errstate(all="ignore"):
        if x.dtype.kind == "f":
            y = fn(x.astype(np.float32) if x.dtype == np.float16 else x)
            return np.asarray(y, dtype=x.dtype)
        # Integer inputs: OpenVINO computes in float and rounds, e.g. Sigmoid(1) = 1, Tanh(-3) = -1.
        return np.asarray(np.rint(fn(x.astype(np.float64))), dtype=x.dtype)


class UnaryElementwise(Op):
    """Same shape and element type out; numeric element types only."""

    def infer(self, inputs):
        t = inputs[0]
        if t.etype.kind in ("bool", "string"):
            raise ShapeError(f"{self.spec.type} does not support input element type {t.etype}")
        return [t.like()]


@register("Relu", 1)
class Relu(UnaryElementwise):
    def run(self, x):
        # std::max(x, 0) as OpenVINO's reference: NaN stays NaN (the CPU plugin's 0 is its bug).
        return np.where(x < 0, np.zeros((), x.dtype), x)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


@register("Sigmoid", 1)
class Sigmoid(UnaryElementwise):
    def run(self, x):
        return float_math(_sigmoid, x)


@register("Tanh", 1)
class Tanh(UnaryElementwise):
    def run(self, x):
        return float_math(np.tanh, x)


def _saturate(value: float, to_int: Callable[[float], int], info: np.iinfo) -> int:
    if not math.isfinite(value):
        return info.min if value < 0 else info.max
    return min(max(to_int(value), info.min), info.max)


@register("Clamp", 1)
class Clamp(UnaryElementwise):
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

    def run(self, x):
        lo, hi = self.bounds(x.dtype)
        # std::min(std::max(x, lo), hi) as OpenVINO's reference: NaN stays NaN, and an
        # integer range emptied by rounding (min 2.3, max 2.7) gives hi everywhere.
        raised = np.where(x < lo, lo, x)
        return np.where(hi < raised, hi, raised)


def _softmax(axis: int | None):
    def softmax(x):
        if x.size == 0:
            return x
        e = np.exp(x - x.max(axis=axis, keepdims=True))   # max subtracted: exp cannot overflow
        return e / e.sum(axis=axis, keepdims=True)
    return softmax


@register("Softmax", 1, 8)
class Softmax(UnaryElementwise):
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
