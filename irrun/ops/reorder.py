"""Reverse-1, ReverseSequence-1 and Roll-7: reorder elements along axes, shape and type unchanged.

What OpenVINO 2026.4.1 computes, beyond the op specs (specs/errata/misc.md):

* Reverse reverses each listed axis once, however often it is listed.
* ReverseSequence: a length of 0 leaves the sequence as it is (like 1); float lengths
  truncate; a length below 0 or above the sequence axis is an error.
* Roll adds up the shifts of an axis listed more than once; a scalar shift or axis
  broadcasts against the other.
"""
from __future__ import annotations

import numpy as np

from .. import etypes
from ..errors import ModelError, ShapeError
from ..registry import Op, TensorType, register
from ..shapes import dim_merge, format_shape, normalize_axis
from .reduction import check_axes_input


def _axes_in_range(values, rank: int, what: str) -> tuple[int, ...]:
    """Distinct axes in [0, rank) from values in [-rank, rank)."""
    return tuple(sorted({normalize_axis(int(v), rank, what) for v in np.asarray(values).reshape(-1)}))


# ---------------------------------------------------------------- Reverse

@register("Reverse", 1)
class Reverse(Op):
    """Reverse the axes listed by index (mode=index) or flagged in a boolean mask (mode=mask)."""

    def _axes(self, axes: np.ndarray, rank: int) -> tuple[int, ...]:
        if self.attrs.mode == "mask":
            if axes.size != rank:
                raise ShapeError(f"mode=mask needs one flag per data axis: {axes.size} flags for rank {rank}")
            return tuple(int(i) for i in np.flatnonzero(axes.reshape(-1)))
        return _axes_in_range(axes, rank, "reversed axis")

    def infer(self, inputs):
        data, axes = inputs
        if axes.rank not in (None, 1):
            raise ShapeError(f"reversed_axes must be a 1D tensor, got {format_shape(axes.shape)}")
        if axes.etype is not etypes.dynamic:
            if self.attrs.mode == "mask" and axes.etype is not etypes.boolean:
                raise ShapeError(f"mode=mask needs boolean reversed_axes, got {axes.etype}")
            if self.attrs.mode == "index" and not axes.etype.is_integral:
                raise ShapeError(f"mode=index needs integer reversed_axes, got {axes.etype}")
        if data.rank is not None:
            if self.attrs.mode == "mask" and axes.shape is not None and isinstance(axes.shape[0], int) \
                    and axes.shape[0] != data.rank:
                raise ShapeError(f"mode=mask needs one flag per data axis: reversed_axes {format_shape(axes.shape)} "
                                 f"for data {format_shape(data.shape)}")
            if axes.value is not None:
                self._axes(axes.value, data.rank)
        return [data.like()]

    def run(self, data, axes):
        return np.flip(data, self._axes(axes, data.ndim)).copy()


# ---------------------------------------------------------------- ReverseSequence

@register("ReverseSequence", 1)
class ReverseSequence(Op):
    """Per batch entry b, reverse the first seq_lengths[b] elements along seq_axis."""

    def _axes(self, rank: int) -> tuple[int, int]:
        return (normalize_axis(self.attrs.batch_axis, rank, "batch_axis"),
                normalize_axis(self.attrs.seq_axis, rank, "seq_axis"))

    def infer(self, inputs):
        data, lengths = inputs
        if lengths.etype.kind in ("bool", "string"):
            raise ShapeError(f"seq_lengths must be numeric, got {lengths.etype}")
        if lengths.rank not in (None, 1):
            raise ShapeError(f"seq_lengths must be a 1D tensor, got {format_shape(lengths.shape)}")
        if data.rank is None:
            return [data.like()]
        if data.rank < 2:
            raise ShapeError(f"data must have rank 2 or more, got {format_shape(data.shape)}")
        batch_axis, _ = self._axes(data.rank)
        shape = list(data.shape)
        if lengths.shape is not None:
            try:
                shape[batch_axis] = dim_merge(shape[batch_axis], lengths.shape[0])
            except ShapeError:
                raise ShapeError(f"seq_lengths {format_shape(lengths.shape)} must have one entry per batch_axis "
                                 f"{batch_axis} entry of data {format_shape(data.shape)}") from None
        return [TensorType(tuple(shape), data.etype)]

    def run(self, data, lengths):
        batch_axis, seq_axis = self._axes(data.ndim)
        n = data.shape[seq_axis]
        lengths = np.trunc(lengths.astype(np.float64)).astype(np.int64) if lengths.dtype.kind == "f" \
            else lengths.astype(np.int64)
        if lengths.size and (lengths.min() < 0 or lengths.max() > n):
            raise ModelError(f"seq_lengths must be in [0, {n}] (the seq_axis size), got {lengths.tolist()}")
        # Source position along seq_axis, per (batch entry, position): reversed inside the length.
        position = np.arange(n)
        source = np.where(position < lengths[:, None], lengths[:, None] - 1 - position, position)
        shape = [1] * data.ndim
        shape[batch_axis], shape[seq_axis] = data.shape[batch_axis], n
        if batch_axis > seq_axis:
            source = source.T
        return np.take_along_axis(data, source.reshape(shape), axis=seq_axis)


# ---------------------------------------------------------------- Roll

@register("Roll", 7)
class Roll(Op):
    """Shift elements along axes, wrapping around (np.roll with OpenVINO's input checks)."""

    def infer(self, inputs):
        data, shift, axes = inputs
        for name, t in (("shift", shift), ("axes", axes)):
            if t.etype is not etypes.dynamic and t.etype.name not in ("i32", "i64"):
                raise ShapeError(f"{name} must be i32 or i64, got {t.etype}")
        check_axes_input(shift, "shift")
        check_axes_input(axes, "axes")
        if shift.rank == 1 and axes.shape is not None and shift.shape is not None:
            if axes.rank != 1 or not _same_length(shift.shape[0], axes.shape[0]):
                raise ShapeError(f"a 1D shift {format_shape(shift.shape)} needs a 1D axes of the same length, got "
                                 f"{format_shape(axes.shape)}")
        if data.rank is not None and axes.value is not None:
            _axes_in_range(axes.value, max(data.rank, 1), "roll axis")
        return [data.like()]

    def run(self, data, shift, axes):
        if data.ndim == 0 or data.size == 0:
            _axes_in_range(axes, max(data.ndim, 1), "roll axis")
            return data.copy()
        axes = [normalize_axis(int(a), data.ndim, "roll axis") for a in np.asarray(axes).reshape(-1)]
        shifts = np.broadcast_to(np.asarray(shift).reshape(-1), (len(axes),))
        return np.roll(data, tuple(int(s) for s in shifts), tuple(axes))


def _same_length(a, b) -> bool:
    try:
        dim_merge(a, b)
    except ShapeError:
        return False
    return True
