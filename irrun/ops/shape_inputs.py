"""Reading the shape, axes, order and index inputs of the shape and data-movement ops
(reshaping, concat_split, slicing, broadcast_tile_pad): their checks, their values as Python
ints when known at load, and the dims they give.
"""
from __future__ import annotations

import numpy as np

from .. import etypes
from ..errors import ShapeError
from ..registry import TensorType
from ..shapes import ANY, DimLike, format_shape, is_static_dim, normalize_axis


def int_values(t: TensorType, what: str, *, allow_float: bool = True) -> list[int] | None:
    """The known values of a shape/axes/order input as Python ints (None: known only at run time).

    OpenVINO reads these inputs with a cast to int64, so a float tensor works
    wherever its shape function does not insist on an integer type.
    """
    if not (t.etype.is_integral or (allow_float and t.etype.is_float) or t.etype is etypes.dynamic):
        kinds = "a numeric" if allow_float else "an integer"
        raise ShapeError(f"{what} must be {kinds} tensor, got {t.etype}")
    if t.value is None:
        return None
    return as_ints(t.value)


def as_ints(array: np.ndarray) -> list[int]:
    values = np.asarray(array).reshape(-1)
    if values.dtype.kind in "iu":
        return values.tolist()      # (Python ints at once: a decoding step reads ~50 such inputs)
    if values.dtype.kind == "f":
        values = np.trunc(values)
    return [int(v) for v in values]


def check_vector(t: TensorType, what: str, *, allow_scalar: bool) -> None:
    """Shape/axes/order inputs are 1-D (some ops also take a scalar)."""
    if t.shape is None:
        return
    allowed = (0, 1) if allow_scalar else (1,)
    if len(t.shape) not in allowed:
        want = "a scalar or 1-D" if allow_scalar else "1-D"
        raise ShapeError(f"{what} must be {want}, got shape {format_shape(t.shape)}")


def vector_length(t: TensorType) -> DimLike:
    """How many values a scalar-or-1-D input holds."""
    if t.shape is None:
        return ANY
    return 1 if len(t.shape) == 0 else t.shape[0]


def may_be_one(d: DimLike) -> bool:
    return d == 1 if is_static_dim(d) else d.contains(1)


def normalize_axes(axes: list[int], rank: int, what: str) -> list[int]:
    return [normalize_axis(a, rank, what) for a in axes]


def index_input(t: TensorType, what: str, *, allow_float: bool = False) -> list[int] | None:
    """A 1-D index input (start, begin, pads, repeats, split lengths): checked, and its values if known."""
    check_vector(t, what, allow_scalar=False)
    return int_values(t, what, allow_float=allow_float)
