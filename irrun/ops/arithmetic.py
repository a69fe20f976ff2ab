"""Elementwise binary arithmetic: Add, Subtract, Multiply, Divide.

`BinaryElementwise` is what every two-input elementwise op shares: the three
`auto_broadcast` modes (shape function and kernel alignment) and the rule that
both inputs have one element type.  A new op only names its element rule:

    @register("Maximum", 1)
    class Maximum(BinaryArithmetic):
        compute = staticmethod(np.maximum)

Comparison and logical ops subclass `BinaryElementwise` and override
`check_etype` / `output_etype`.  Integers wrap on overflow, as in C++.
"""
from __future__ import annotations

import numpy as np

from .. import etypes
from ..errors import ShapeError
from ..etypes import ElementType
from ..registry import Op, TensorType, register
from ..shapes import Shape, broadcast_shapes, dims_compatible, dim_merge, format_shape

PDPD_AXIS = "auto_broadcast.auto_broadcast_axis"


def merge_etypes(a: ElementType, b: ElementType) -> ElementType:
    """The one element type two inputs share (`dynamic` takes the other's)."""
    if a is etypes.dynamic:
        return b
    if b is etypes.dynamic or a is b:
        return a
    raise ShapeError(f"Arguments do not have the same element type (input 0: {a}, input 1: {b})")


def pdpd_start(rank_a: int, rank_b: int, axis: int) -> int:
    """First axis of input 0 that input 1 lines up with (pdpd broadcast)."""
    start = rank_a - rank_b if axis == -1 else axis
    if axis < -1 or start < 0 or start + rank_b > rank_a:
        raise ShapeError(f"auto_broadcast=pdpd: input 1 of rank {rank_b} does not fit into input 0 of rank "
                         f"{rank_a} from axis {axis}")
    return start


def _numpy_shape(a: Shape, b: Shape) -> Shape:
    try:
        return broadcast_shapes(a, b)
    except ShapeError as exc:
        raise ShapeError(f"auto_broadcast=numpy: {exc.message}") from None


def _none_shape(a: Shape, b: Shape) -> Shape:
    if a is None or b is None:
        return b if a is None else a
    if len(a) != len(b) or not all(dims_compatible(x, y) for x, y in zip(a, b)):
        raise ShapeError(f"auto_broadcast=none needs equal shapes, got {format_shape(a)} and {format_shape(b)}")
    return tuple(dim_merge(x, y) for x, y in zip(a, b))


def _pdpd_shape(a: Shape, b: Shape, axis: int) -> Shape:
    if a is None or b is None:
        return None
    start = pdpd_start(len(a), len(b), axis)
    out = list(a)
    for i, d in enumerate(b):
        target = a[start + i]
        # Input 1 only ever stretches to input 0: a 1 in input 0 cannot grow.
        bad = isinstance(target, int) and isinstance(d, int) and d > target
        try:
            out[start + i] = broadcast_shapes((target,), (d,))[0]
        except ShapeError:
            bad = True
        if bad:
            raise ShapeError(f"auto_broadcast=pdpd (axis {axis}): input 1 {format_shape(b)} does not broadcast "
                             f"onto input 0 {format_shape(a)} (dim {start + i}: {target} vs {d})")
    return tuple(out)


def broadcast_binary(a: Shape, b: Shape, mode: str, axis: int = -1) -> Shape:
    """Output shape of a binary elementwise op under `auto_broadcast` = mode."""
    if mode == "numpy":
        return _numpy_shape(a, b)
    if mode == "pdpd":
        return _pdpd_shape(a, b, axis)
    return _none_shape(a, b)   # "none" and its alias "explicit"


def broadcast_notes(a: Shape, b: Shape, out: Shape) -> dict[int, str] | None:
    """Per output dim, the input dims it came from (right-aligned), for diagnostics."""
    if a is None or b is None or out is None:
        return None

    def dim_from(shape, i):   # i counts from the end
        return str(shape[i]) if -i <= len(shape) else "none"

    return {len(out) + i: f"broadcast of input 0's {dim_from(a, i)} and input 1's {dim_from(b, i)}"
            for i in range(-len(out), 0)}


class BinaryElementwise(Op):
    """Two inputs of one element type, broadcast by `auto_broadcast`."""

    def compute(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def check_etype(self, etype: ElementType) -> None:
        """Raise ShapeError if the op does not take this element type."""

    def output_etype(self, etype: ElementType) -> ElementType:
        return etype

    @property
    def mode(self) -> str:
        return self.attrs.get("auto_broadcast", "numpy")

    @property
    def pdpd_axis(self) -> int:
        return self.attrs.get(PDPD_AXIS, 0)   # 0 when absent, as OpenVINO's IR reader assumes

    def infer(self, inputs):
        a, b = inputs
        etype = merge_etypes(a.etype, b.etype)
        self.check_etype(etype)
        shape = broadcast_binary(a.shape, b.shape, self.mode, self.pdpd_axis)
        notes = broadcast_notes(a.shape, b.shape, shape) if self.mode == "numpy" else None
        return [TensorType(shape, self.output_etype(etype), notes=notes)]

    def run(self, a, b):
        if self.mode == "pdpd":
            start = pdpd_start(a.ndim, b.ndim, self.pdpd_axis)
            b = b.reshape((1,) * start + b.shape + (1,) * (a.ndim - start - b.ndim))
        elif self.mode != "numpy" and a.shape != b.shape:
            raise ShapeError(f"auto_broadcast=none needs equal shapes, got {format_shape(a.shape)} and "
                             f"{format_shape(b.shape)}")
        with np.errstate(all="ignore"):   # overflow wraps, x/0 is inf or nan, as in C++
            return np.asarray(self.compute(a, b))


class BinaryArithmetic(BinaryElementwise):
    """Numeric inputs (no boolean or string), output of the input type."""

    def check_etype(self, etype):
        if etype.kind in ("bool", "string"):
            raise ShapeError(f"This operation does not support inputs with element type: {etype}")


@register("Add", 1)
class Add(BinaryArithmetic):
    compute = staticmethod(np.add)


@register("Subtract", 1)
class Subtract(BinaryArithmetic):
    compute = staticmethod(np.subtract)


@register("Multiply", 1)
class Multiply(BinaryArithmetic):
    compute = staticmethod(np.multiply)


@register("Divide", 1)
class Divide(BinaryArithmetic):
    """Integers: floor division (m_pythondiv, the default) or truncation toward zero.

    Integer x / 0 gives 0: OpenVINO's reference raises and its CPU plugin returns
    whatever its float conversion yields (see specs/errata/arithmetic.md).
    """

    def compute(self, a, b):
        if a.dtype.kind not in "iu":
            return np.divide(a, b)
        quotient = np.floor_divide(a, b)   # 0 where b == 0; INT_MIN / -1 wraps to INT_MIN
        if not self.attrs.m_pythondiv and a.dtype.kind == "i":
            # Truncation is one above the floor wherever the division is inexact and the signs differ.
            inexact = (quotient * b != a) & ((a < 0) != (b < 0)) & (b != 0)
            quotient = quotient + inexact.astype(quotient.dtype)
        return quotient
