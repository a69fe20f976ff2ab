"""Comparisons, logical and bitwise ops, Select.

The binary ones are `BinaryElementwise` ops (arithmetic.py) with their own
element-type rule:

- comparisons take any element type and give boolean (NaN compares false,
  as IEEE and OpenVINO's reference; the CPU plugin's Greater/GreaterEqual
  say true, see specs/errata/elementwise.md);
- LogicalAnd/Or/Xor (and opset1's Xor) take boolean only;
- BitwiseAnd/Or/Xor/Not take integers and boolean, the shifts integers only.

Select picks from `then` or `else` by a boolean `cond`, all three broadcast
together (numpy, none) or `else` and `cond` into `then` (pdpd).
"""
from __future__ import annotations

import numpy as np

from .. import etypes, threads
from ..errors import ShapeError
from ..etypes import ElementType
from ..registry import Op, TensorType, register
from ..shapes import format_shape
from .arithmetic import (BinaryElementwise, Broadcasting, broadcast_binary, broadcast_notes, check_equal_shapes,
                         merge_etypes, pdpd_align, equal_or_numpy_broadcast)


def _require(etype: ElementType, allowed: bool, what: str) -> None:
    """OpenVINO's element-type rule of the op; a dynamic type passes."""
    if etype is not etypes.dynamic and not allowed:
        raise ShapeError(f"{what}, got {etype}")


# ---------------------------------------------------------------- comparisons

class Comparison(BinaryElementwise):
    """Any element type in (one for both inputs), boolean out."""

    def output_etype(self, etype):
        return etypes.boolean


@register("Equal", 1)
class Equal(Comparison):
    compute = staticmethod(np.equal)


@register("NotEqual", 1)
class NotEqual(Comparison):
    compute = staticmethod(np.not_equal)


@register("Less", 1)
class Less(Comparison):
    compute = staticmethod(np.less)


@register("LessEqual", 1)
class LessEqual(Comparison):
    compute = staticmethod(np.less_equal)


@register("Greater", 1)
class Greater(Comparison):
    compute = staticmethod(np.greater)


@register("GreaterEqual", 1)
class GreaterEqual(Comparison):
    compute = staticmethod(np.greater_equal)


# ---------------------------------------------------------------- logical

class BinaryLogical(BinaryElementwise):
    def check_etype(self, etype):
        _require(etype, etype is etypes.boolean, "logical operators need boolean operands")


@register("LogicalAnd", 1)
class LogicalAnd(BinaryLogical):
    compute = staticmethod(np.logical_and)


@register("LogicalOr", 1)
class LogicalOr(BinaryLogical):
    compute = staticmethod(np.logical_or)


@register("LogicalXor", 1)
@register("Xor", 1)   # opset1's name for the same op
class LogicalXor(BinaryLogical):
    compute = staticmethod(np.logical_xor)


class UnaryNot(Op):
    """LogicalNot, BitwiseNot: same shape and element type out."""

    def check_etype(self, etype: ElementType) -> None:
        """Raise ShapeError if the op does not take this element type."""
        raise NotImplementedError

    def infer(self, inputs):
        self.check_etype(inputs[0].etype)
        return [inputs[0].like()]


@register("LogicalNot", 1)
class LogicalNot(UnaryNot):
    """C++ `!x` in the input's type: 1 where x is 0, else 0 (NaN is truthy).

    The spec allows boolean only; OpenVINO accepts any numeric type and both
    its reference and CPU plugin compute this (specs/errata/elementwise.md).
    """

    def check_etype(self, etype):
        _require(etype, etype.kind != "string", "LogicalNot needs a boolean or numeric input")

    def run(self, x):
        return np.asarray(x == 0).astype(x.dtype)


# ---------------------------------------------------------------- bitwise

def _check_bitwise(etype: ElementType) -> None:
    _require(etype, etype.is_integral or etype is etypes.boolean,
             "bitwise operators need integer or boolean operands")


class BinaryBitwise(BinaryElementwise):
    check_etype = staticmethod(_check_bitwise)


@register("BitwiseAnd", 13)
class BitwiseAnd(BinaryBitwise):
    compute = staticmethod(np.bitwise_and)


@register("BitwiseOr", 13)
class BitwiseOr(BinaryBitwise):
    compute = staticmethod(np.bitwise_or)


@register("BitwiseXor", 13)
class BitwiseXor(BinaryBitwise):
    compute = staticmethod(np.bitwise_xor)


@register("BitwiseNot", 13)
class BitwiseNot(UnaryNot):
    check_etype = staticmethod(_check_bitwise)

    def run(self, x):
        return np.invert(x)   # logical not on boolean


def _shift(numpy_shift, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C++ `a << b` / `a >> b` as compiled for x86, which OpenVINO's kernels are.

    Narrow types are promoted to int first; the count is taken modulo the
    width of the promoted type (32 or 64 bits, as the shift instructions do),
    so a count of -1 means 31 and 33 means 1; the result wraps to the type.
    """
    promoted = a.dtype if a.dtype.itemsize >= 4 else np.dtype(np.int32)
    count = np.bitwise_and(b.astype(np.int64), promoted.itemsize * 8 - 1).astype(promoted)
    return numpy_shift(a.astype(promoted), count).astype(a.dtype)


class BitwiseShift(BinaryElementwise):
    def check_etype(self, etype):
        _require(etype, etype.is_integral, "bitwise shifts need integer operands")


@register("BitwiseLeftShift", 15)
class BitwiseLeftShift(BitwiseShift):
    def compute(self, a, b):
        return _shift(np.left_shift, a, b)


@register("BitwiseRightShift", 15)
class BitwiseRightShift(BitwiseShift):
    def compute(self, a, b):
        return _shift(np.right_shift, a, b)   # arithmetic (sign-filling) for signed types


# ---------------------------------------------------------------- Select

@register("Select", 1)
class Select(Broadcasting):
    """cond ? then : else elementwise.

    Shapes as OpenVINO's Select shape inference: numpy and none start from
    `else` and merge `then`, then `cond` into it; pdpd starts from `then` and
    stretches `else`, then `cond`, into it from the pdpd axis.
    """

    def infer(self, inputs):
        cond, then, other = inputs
        _require(cond.etype, cond.etype is etypes.boolean, "Select cond (input 0) must be boolean")
        try:
            etype = merge_etypes(then.etype, other.etype)
        except ShapeError:
            raise ShapeError(f"Select then (input 1) and else (input 2) must have one element type, "
                             f"got {then.etype} and {other.etype}") from None
        if self.mode == "pdpd":
            shape = self._merge(then.shape, other.shape, "else (input 2)", "then (input 1)")
            shape = self._merge(shape, cond.shape, "cond (input 0)", "then (input 1)")
        else:
            shape = self._merge(other.shape, then.shape, "then (input 1)", "else (input 2)")
            shape = self._merge(shape, cond.shape, "cond (input 0)", "then/else")
        notes = None
        if self.mode == "numpy":
            notes = broadcast_notes(shape, {"cond": cond.shape, "then": then.shape, "else": other.shape})
        return [TensorType(shape, etype, notes=notes)]

    def quick_shapes(self, args):
        return equal_or_numpy_broadcast(args, self.mode)

    def _merge(self, into, shape, what, into_what):
        try:
            return broadcast_binary(into, shape, self.mode, self.pdpd_axis)
        except ShapeError:
            axis = f", axis {self.pdpd_axis}" if self.mode == "pdpd" else ""
            raise ShapeError(f"Select: {what} {format_shape(shape)} does not broadcast with {into_what} "
                             f"{format_shape(into)} (auto_broadcast={self.mode}{axis})") from None

    def run(self, cond, then, other):
        if self.mode == "pdpd":
            other = pdpd_align(other, then.ndim, self.pdpd_axis)
            cond = pdpd_align(cond, then.ndim, self.pdpd_axis)
        elif self.mode != "numpy":
            check_equal_shapes(cond, then, other)
        return np.where(cond, then, other)

    def bind(self, step):
        """numpy broadcasting into a static output: `_blend`, in parts and cache-sized blocks."""
        out = step.outputs[0]
        if self.mode != "numpy" or self.run_replaced() or not out.is_static:
            return None
        shape = out.shape

        def select(cond, then, other):
            dtype = then.dtype      # (f16 layers carry f32 arrays: the arrays' type, not the IR's)
            if other.dtype != dtype or cond.dtype != np.bool_ or dtype.itemsize not in _SAME_SIZE_INTEGERS:
                return self.run(cond, then, other)
            return threads.in_parts(_blend, np.empty(shape, dtype), cond, then, other, cost=_BLEND_COST)
        return select


# Integers of each element size, whose bits `_blend` moves
_SAME_SIZE_INTEGERS = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}
_BLEND_COST = 6


def _blend(cond: np.ndarray, then: np.ndarray, other: np.ndarray, out: np.ndarray) -> None:
    """`then` where `cond`, else `other`, by their bits: and-ed with a mask of all ones or all zeros
    and or-ed, SIMD integer passes where np.where copies an element at a time (4 Mi float32 with a
    0 else-value: 17.7 -> 3.1 ms in its profile; in cache 5x faster); NaNs and signed zeros keep
    their bits."""
    bits = _SAME_SIZE_INTEGERS[out.dtype.itemsize]
    mask = cond.astype(bits)
    np.negative(mask, out=mask)                         # 1 -> all ones
    target = out.view(bits)
    np.bitwise_and(then.view(bits), mask, out=target)
    np.invert(mask, out=mask)
    np.bitwise_or(target, np.bitwise_and(other.view(bits), mask), out=target)
