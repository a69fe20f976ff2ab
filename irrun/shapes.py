"""Partial shapes: static dims are ints, dynamic dims are `Dim` intervals.

A shape is a tuple of dims, or `None` for a dynamic rank.  Shape functions are
written with the helpers below so the same formula serves static and dynamic
dims: `dim_map` applies a monotone non-decreasing function to both bounds.
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Callable, Union

from .errors import ModelError, ShapeError


@dataclass(frozen=True)
class Dim:
    """A dynamic dimension: an interval [lo, hi]; hi None means unbounded."""

    lo: int = 0
    hi: int | None = None

    def __str__(self) -> str:
        if self.lo == 0 and self.hi is None:
            return "?"
        if self.hi is None:
            return f"{self.lo}.."
        return f"{self.lo}..{self.hi}" if self.lo else f"..{self.hi}"

    __repr__ = __str__

    def contains(self, value: int) -> bool:
        return value >= self.lo and (self.hi is None or value <= self.hi)


DimLike = Union[int, Dim]
Shape = Union[tuple, None]          # tuple[DimLike, ...] or None for dynamic rank
ANY = Dim()


def is_static_dim(d: DimLike) -> bool:
    return isinstance(d, int)


_INT_FOREVER = itertools.repeat(int)


def is_static(shape: Shape) -> bool:
    # (map over isinstance: no generator frame, a big model asks this 10^5 times)
    return shape is not None and all(map(isinstance, shape, _INT_FOREVER))


def make_dim(lo: int, hi: int | None) -> DimLike:
    lo = max(lo, 0)
    if hi is not None and hi == lo:
        return lo
    return Dim(lo, hi)


def dim_map(fn: Callable[[int], int], d: DimLike) -> DimLike:
    """Apply a non-decreasing integer function to a dim (to both bounds)."""
    if isinstance(d, int):
        return fn(d)
    return make_dim(fn(d.lo), None if d.hi is None else fn(d.hi))


def dim_bounds(d: DimLike) -> tuple[int, int | None]:
    return (d, d) if isinstance(d, int) else (d.lo, d.hi)


def dim_add(a: DimLike, b: DimLike) -> DimLike:
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    (alo, ahi), (blo, bhi) = dim_bounds(a), dim_bounds(b)
    return make_dim(alo + blo, None if ahi is None or bhi is None else ahi + bhi)


def dim_mul(a: DimLike, b: DimLike) -> DimLike:
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    (alo, ahi), (blo, bhi) = dim_bounds(a), dim_bounds(b)
    if ahi == 0 or bhi == 0:
        return 0
    return make_dim(alo * blo, None if ahi is None or bhi is None else ahi * bhi)


def dim_divide_exact(d: DimLike, divisor: int) -> DimLike | None:
    """The values d / divisor takes over the multiples of `divisor` in `d` (None: there are none)."""
    lo, hi = dim_bounds(d)
    q_lo, q_hi = -(-lo // divisor), None if hi is None else hi // divisor
    return None if q_hi is not None and q_lo > q_hi else make_dim(q_lo, q_hi)


def dims_compatible(a: DimLike, b: DimLike) -> bool:
    if type(a) is int and type(b) is int:   # (static dims, the common case: inference at run time asks often)
        return a == b
    (alo, ahi), (blo, bhi) = dim_bounds(a), dim_bounds(b)
    return (ahi is None or blo <= ahi) and (bhi is None or alo <= bhi)


def dim_merge(a: DimLike, b: DimLike) -> DimLike:
    """The intersection of two dims that must be equal; raises if disjoint."""
    if type(a) is int and type(b) is int and a == b:
        return a
    if not dims_compatible(a, b):
        raise ShapeError(f"dimensions {a} and {b} differ")
    (alo, ahi), (blo, bhi) = dim_bounds(a), dim_bounds(b)
    hi = ahi if bhi is None else bhi if ahi is None else min(ahi, bhi)
    return make_dim(max(alo, blo), hi)


def shape_numel(shape: Shape) -> DimLike:
    if shape is None:
        return ANY
    total: DimLike = 1
    for d in shape:
        total = dim_mul(total, d)
    return total


def format_shape(shape: Shape) -> str:
    if shape is None:
        return "[...]"
    return "[" + ",".join(str(d) for d in shape) + "]"


_INTERVAL = re.compile(r"^(-?\d*)\.\.(-?\d*)$")


def parse_partial_shape(text: str) -> Shape:
    """A `shape="..."` attribute: `1,3,?,-1,1..10,..5,3..`, `...`, `[..]`, or ""."""
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1].strip()
    if text == "...":
        return None
    if text == "":
        return ()
    dims: list[DimLike] = []
    for field in text.split(","):
        field = field.strip()
        if field in ("?", "-1"):
            dims.append(ANY)
            continue
        if field.isdigit():
            dims.append(int(field))
            continue
        m = _INTERVAL.match(field)
        if m:
            lo = int(m.group(1)) if m.group(1) else 0
            hi = int(m.group(2)) if m.group(2) else None
            if lo >= 0 and (hi is None or hi >= lo):
                dims.append(make_dim(lo, hi))
                continue
        raise ModelError(f'cannot parse shape "{text}": bad dimension "{field}"')
    return tuple(dims)


def parse_static_shape(text: str) -> tuple[int, ...]:
    shape = parse_partial_shape(text)
    if not is_static(shape):
        raise ModelError(f'shape "{text}" must be static here')
    return shape


def broadcast_dims(x: DimLike, y: DimLike) -> DimLike:
    """One dim of a NumPy-style broadcast, with OpenVINO's interval rule.

    A side that may be 1 yields to the other; when both may be 1 the result is
    the union of their intervals; otherwise the two must be equal.
    """
    if type(x) is int and type(y) is int and (x == y or y == 1):
        return x
    x_may_be_1, y_may_be_1 = dims_compatible(x, 1), dims_compatible(y, 1)
    if x_may_be_1 and y_may_be_1:
        (xlo, xhi), (ylo, yhi) = dim_bounds(x), dim_bounds(y)
        return make_dim(min(xlo, ylo), None if xhi is None or yhi is None else max(xhi, yhi))
    if x_may_be_1:
        return y
    if y_may_be_1:
        return x
    return dim_merge(x, y)


def broadcast_shapes(a: Shape, b: Shape) -> Shape:
    """NumPy-style bidirectional broadcasting of two partial shapes."""
    if a is None or b is None:
        return None
    if a == b:
        return tuple(a)
    rank = max(len(a), len(b))
    padded_a = (1,) * (rank - len(a)) + tuple(a)
    padded_b = (1,) * (rank - len(b)) + tuple(b)
    out = []
    for i, (x, y) in enumerate(zip(padded_a, padded_b)):
        try:
            out.append(broadcast_dims(x, y))
        except ShapeError:
            raise ShapeError(f"shapes {format_shape(a)} and {format_shape(b)} do not broadcast "
                             f"(dim {i - rank} from the end: {x} vs {y})") from None
    return tuple(out)


def numpy_broadcast(a: tuple, b: tuple) -> tuple | None:
    """The NumPy broadcast of two static shapes, None where they do not broadcast (0.4 us where
    numpy.broadcast_shapes takes 1.6: run-time checks ask it at every call of a decoding step)."""
    if len(a) < len(b):
        a, b = b, a
    offset = len(a) - len(b)
    out = list(a)
    for i, d in enumerate(b):
        o = a[offset + i]
        if d != o:
            if o == 1:
                out[offset + i] = d
            elif d != 1:
                return None
    return tuple(out)


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    if rank == 0 and axis in (0, -1):   # a scalar's one axis, as OpenVINO allows
        return 0
    if not -rank <= axis < rank:
        raise ShapeError(f"{what} {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis
