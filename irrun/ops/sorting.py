"""TopK-1/3/11 and NonZero-3.

What OpenVINO 2026.4.1 computes, beyond the op specs (specs/errata/detection.md):

* TopK orders by value (descending for mode=max, ascending for min); equal
  values keep their input order (the only order `stable=true` allows, and one
  of the orders an unstable sort may give).  sort=none returns the value order,
  as the CPU plugin does.  NaN counts as larger than +inf, so it comes first
  for max and last for min: OpenVINO's own NaN order is undefined (it changes
  with k and the slice length).
* k = 0 gives an empty axis (OpenVINO's shape inference accepts it); k larger
  than the axis is an error (the CPU plugin refuses to compile it).
* NonZero of a scalar is [1, count], as on the CPU plugin.
"""
from __future__ import annotations

import numpy as np

from ..errors import ModelError, ShapeError
from ..registry import Op, TensorType, register
from ..shapes import (
    ANY,
    dim_bounds,
    format_shape,
    make_dim,
    normalize_axis,
    shape_numel,
)


def _scalar_value(t: TensorType, what: str) -> int | None:
    """The integer a scalar input holds, when it is known at load."""
    if t.value is None:
        return None
    if t.value.size != 1:
        raise ShapeError(f"{what} must hold one value, got {t.value.size}")
    return int(t.value.reshape(-1)[0])


# ---------------------------------------------------------------- TopK

def _order_along_last(x: np.ndarray, largest_first: bool) -> np.ndarray:
    """Indices that sort the last axis; ties keep input order, NaN counts as the largest value."""
    if not largest_first:
        return np.argsort(x, axis=-1, kind="stable")
    # Sorting the reversed slice ascending and reading it backwards gives a
    # descending order in which equal values keep their input order.
    n = x.shape[-1]
    backwards = np.argsort(x[..., ::-1], axis=-1, kind="stable")[..., ::-1]
    return (n - 1) - backwards


@register("TopK", 1, 3, 11)
class TopK(Op):
    def _axis(self, rank: int) -> int:
        return normalize_axis(self.attrs.axis, rank, "axis")

    def infer(self, inputs):
        data, k_in = inputs
        if self.version == 11 and self.attrs.stable and self.attrs.sort == "none":
            raise ShapeError("stable=true needs sort=value or sort=index")
        if k_in.rank not in (None, 0):
            raise ShapeError(f"k must be a scalar, got {format_shape(k_in.shape)}")
        if not k_in.etype.is_integral and k_in.etype.name != "dynamic":
            raise ShapeError(f"k must be an integer, got {k_in.etype}")
        index_type = self.attrs.index_element_type
        if data.shape is None:
            return [TensorType(None, data.etype), TensorType(None, index_type)]
        if data.rank == 0:
            raise ShapeError("data must have rank 1 or more, got a scalar")
        axis = self._axis(data.rank)
        k = _scalar_value(k_in, "k")
        dim = data.shape[axis]
        shape = list(data.shape)
        if k is None:
            shape[axis] = make_dim(0, dim_bounds(dim)[1])
        else:
            if k < 0:
                raise ShapeError(f"k must be >= 0, got {k}")
            if isinstance(dim, int) and k > dim:
                raise ShapeError(f"k={k} exceeds the axis {axis} dimension {dim} of data {format_shape(data.shape)}")
            shape[axis] = k
        notes = {axis: f"k = {k}"} if k is not None else None
        return [TensorType(tuple(shape), data.etype, notes=notes),
                TensorType(tuple(shape), index_type, notes=notes)]

    def run(self, data, k):
        axis = self._axis(data.ndim)
        k = int(np.asarray(k).reshape(-1)[0])
        if not 0 <= k <= data.shape[axis]:
            raise ModelError(f"k={k} is outside [0, {data.shape[axis]}], the size of axis {axis}")
        x = np.moveaxis(data, axis, -1)
        order = _order_along_last(x, self.attrs.mode == "max")[..., :k]
        if self.attrs.sort == "index":
            order = np.sort(order, axis=-1)
        values = np.take_along_axis(x, order, axis=-1)
        indices = order.astype(self.attrs.index_element_type.carrier)
        return np.moveaxis(values, -1, axis), np.moveaxis(indices, -1, axis)


# ---------------------------------------------------------------- NonZero

@register("NonZero", 3)
class NonZero(Op):
    def infer(self, inputs):
        data = inputs[0]
        out_type = self.attrs.output_type
        if data.value is not None:
            return [TensorType(self.run(data.value).shape, out_type)]
        if data.rank in (None, 0):
            return [TensorType((ANY, ANY), out_type)]
        count = make_dim(0, dim_bounds(shape_numel(data.shape))[1])
        return [TensorType((data.rank, count), out_type,
                           notes={1: f"number of non-zero elements, at most {format_shape(data.shape)} elements"})]

    def run(self, data):
        positions = np.nonzero(np.atleast_1d(data))
        return np.stack(positions).astype(self.attrs.output_type.carrier).reshape(len(positions), -1)
