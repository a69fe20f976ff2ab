"""Concat, Split and VariadicSplit: tensors joined along an axis, and one cut into pieces.

The output shapes come from one function each, used by shape inference (partial shapes, at
load) and by the kernel (the concrete shape), so the two cannot disagree.  Split kernels
return NumPy views; Concat of two or more inputs copies.
"""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..registry import Op, TensorType, register
from ..shapes import (
    ANY, DimLike, dim_add, dim_bounds, dim_merge, dims_compatible, format_shape, make_dim, normalize_axis,
)
from .shape_inputs import as_ints, index_input, int_values, vector_length


# ---------------------------------------------------------------- Concat

@register("Concat", 1)
class Concat(Op):
    def infer(self, inputs):
        first = inputs[0]
        for i, t in enumerate(inputs[1:], 1):
            if t.etype != first.etype:
                raise ShapeError(f"input {i} has element type {t.etype}, input 0 has {first.etype}; "
                                 f"Concat needs one element type")
        ranked = [(i, t.shape) for i, t in enumerate(inputs) if t.shape is not None]
        if not ranked:
            return [first.like(None)]
        ref_index, ref_shape = ranked[0]
        rank = len(ref_shape)
        if rank == 0:
            raise ShapeError(f"input {ref_index} is a scalar; Concat needs inputs of rank 1 or more")
        axis = normalize_axis(self.attrs.axis, rank, "Concat axis")
        out = list(ref_shape)
        along: DimLike = 0
        terms = []
        for i, t in enumerate(inputs):
            if t.shape is None:
                along = dim_add(along, ANY)
                terms.append("?")
                continue
            if len(t.shape) != rank:
                raise ShapeError(f"input {i} has shape {format_shape(t.shape)} of rank {len(t.shape)}, "
                                 f"input {ref_index} has {format_shape(ref_shape)} of rank {rank}")
            for k, d in enumerate(t.shape):
                if k == axis:
                    continue
                try:
                    out[k] = dim_merge(out[k], d)
                except ShapeError:
                    raise ShapeError(f"input {i} has shape {format_shape(t.shape)}, which differs from the "
                                     f"inputs before it at dim {k} ({d} vs {out[k]}); all dims but the "
                                     f"concatenation axis {axis} must agree") from None
            along = dim_add(along, t.shape[axis])
            terms.append(str(t.shape[axis]))
        out[axis] = along
        return [TensorType(tuple(out), first.etype, notes={axis: " + ".join(terms)})]

    def quick_shapes(self, args):
        first = args[0].shape
        rank = len(first)
        if not rank:
            return None
        try:
            axis = normalize_axis(self.attrs.axis, rank)
        except ShapeError:
            return None
        total = 0
        for a in args:
            shape = a.shape
            if len(shape) != rank or shape[:axis] != first[:axis] or shape[axis + 1:] != first[axis + 1:]:
                return None
            total += shape[axis]
        return (first[:axis] + (total,) + first[axis + 1:],), ()

    def run(self, *arrays):
        if len(arrays) == 1:
            return arrays[0]
        return np.concatenate(arrays, axis=normalize_axis(self.attrs.axis, arrays[0].ndim, "Concat axis"))


# ---------------------------------------------------------------- Split, VariadicSplit

def _split_axis(axis: TensorType | np.ndarray, rank: int, op: str) -> int | None:
    """The normalized split axis (None: known only at run time).  VariadicSplit also reads a float axis."""
    if isinstance(axis, np.ndarray):
        values = as_ints(axis)
    else:
        values = int_values(axis, f"the {op} axis", allow_float=op == "VariadicSplit")
    return None if values is None else normalize_axis(values[0], rank, f"{op} axis")


def _pieces(data: TensorType, axis: int | None, sizes: list[DimLike], notes=None) -> list[TensorType]:
    """One output per size: the input's type with the split axis replaced."""
    if axis is None or data.shape is None:
        return [data.like(None if data.rank is None else (ANY,) * data.rank) for _ in sizes]
    shapes = [data.shape[:axis] + (size,) + data.shape[axis + 1:] for size in sizes]
    return [TensorType(shape, data.etype, notes=notes) for shape in shapes]


def split_dim(d: DimLike, parts: int) -> DimLike:
    """The size of each of `parts` equal pieces of a dim."""
    if isinstance(d, int):
        if d % parts:
            raise ShapeError(f"the split axis has {d} elements, which do not divide into num_splits={parts} "
                             f"equal parts")
        return d // parts
    lo, hi = dim_bounds(d)
    if hi is not None and hi < parts:
        raise ShapeError(f"the split axis has {d} elements, fewer than num_splits={parts}")
    return make_dim(lo // parts, None if hi is None else hi // parts)


def _bound_pieces(step, op: str):
    """A kernel returning the pieces as views by slices worked out at load: static data and outputs
    and a constant axis (np.split took 5 us a call for what three slices do in 0.5)."""
    data, axis_t = step.inputs[0], step.inputs[1]
    if not data.is_static or any(not t.is_static for t in step.outputs) or axis_t.value is None:
        return None
    axis = _split_axis(axis_t, data.rank, op)
    slices, start = [], 0
    for t in step.outputs:
        stop = start + t.shape[axis]
        slices.append((slice(None),) * axis + (slice(start, stop),))
        start = stop
    if start != data.shape[axis]:
        return None
    slices = tuple(slices)
    return lambda x, *_: tuple(x[s] for s in slices)


@register("Split", 1)
class Split(Op):
    def infer(self, inputs):
        data, axis_t = inputs
        if axis_t.rank not in (None, 0):
            raise ShapeError(f"the Split axis must be a scalar, got shape {format_shape(axis_t.shape)}")
        parts = self.attrs.num_splits
        axis = None if data.shape is None else _split_axis(axis_t, data.rank, "Split")
        if axis is None:
            return _pieces(data, None, [ANY] * parts)
        size = split_dim(data.shape[axis], parts)
        return _pieces(data, axis, [size] * parts, notes={axis: f"{data.shape[axis]} / {parts} = {size}"})

    def run(self, x, axis):
        axis = _split_axis(axis, x.ndim, "Split")
        split_dim(x.shape[axis], self.attrs.num_splits)
        return tuple(np.split(x, self.attrs.num_splits, axis=axis))

    def bind(self, step):
        return None if self.run_replaced() else _bound_pieces(step, "Split")


def resolve_split_lengths(lengths: list[int], d: DimLike) -> list[DimLike]:
    """VariadicSplit's lengths with the one -1 filled in from the axis size `d`."""
    bad = [v for v in lengths if v < -1]
    if bad:
        raise ShapeError(f"split_lengths {lengths} has {bad[0]}; only -1 and values >= 0 are allowed")
    if lengths.count(-1) > 1:
        raise ShapeError(f"split_lengths {lengths} has more than one -1")
    given = sum(v for v in lengths if v != -1)
    out: list[DimLike] = list(lengths)
    if -1 in lengths:
        hi = dim_bounds(d)[1]
        if hi is not None and hi < given:
            raise ShapeError(f"split_lengths {lengths} add up to {given}, more than the {d} elements of the split axis")
        # OpenVINO leaves the -1 part of a dynamic axis fully dynamic.
        out[lengths.index(-1)] = d - given if isinstance(d, int) else ANY
    elif not dims_compatible(d, given):
        raise ShapeError(f"split_lengths {lengths} add up to {given}, but the split axis has {d} elements")
    return out


@register("VariadicSplit", 1)
class VariadicSplit(Op):
    def infer(self, inputs):
        data, axis_t, lengths_t = inputs
        if axis_t.rank not in (None, 0) and not (axis_t.rank == 1 and dims_compatible(axis_t.shape[0], 1)):
            raise ShapeError(f"the VariadicSplit axis must be a scalar or have shape [1], got "
                             f"{format_shape(axis_t.shape)}")
        lengths = index_input(lengths_t, "split_lengths", allow_float=True)
        count = vector_length(lengths_t)
        if not isinstance(count, int):  # the IR's output ports still say how many
            count = len(self.layer.outputs) if hasattr(self, "layer") else 0
        axis = None if data.shape is None else _split_axis(axis_t, data.rank, "VariadicSplit")
        if axis is None or lengths is None:
            return _pieces(data, axis, [ANY] * count)
        return _pieces(data, axis, resolve_split_lengths(lengths, data.shape[axis]))

    def run(self, x, axis, lengths):
        axis = _split_axis(axis, x.ndim, "VariadicSplit")
        sizes = resolve_split_lengths(as_ints(lengths), x.shape[axis])
        return tuple(np.split(x, np.cumsum(sizes[:-1]), axis=axis))

    def bind(self, step):
        if step.inputs[2].value is None or self.run_replaced():
            return None
        return _bound_pieces(step, "VariadicSplit")
