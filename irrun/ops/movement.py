"""Shape and data-movement ops: Reshape, Transpose, Squeeze, Unsqueeze, Concat, ShapeOf.

Each op's output shape comes from one function of the input shape and the
values of its shape/axes/order input.  Shape inference calls it with partial
shapes at load time; the kernel calls it with the concrete shape, so the two
cannot disagree.  Kernels return NumPy views wherever NumPy can (reshape,
transpose, squeeze, unsqueeze); only Concat of two or more inputs copies.
"""
from __future__ import annotations

import numpy as np

from .. import etypes
from ..errors import ShapeError
from ..registry import Op, TensorType, register
from ..shapes import (ANY, Dim, DimLike, Shape, dim_add, dim_bounds, dim_merge, dim_mul, dims_compatible,
                      format_shape, is_static, is_static_dim, make_dim, normalize_axis, shape_numel)


# ---------------------------------------------------------------- shared helpers

def _int_values(t: TensorType, what: str, *, allow_float: bool = True) -> list[int] | None:
    """The known values of a shape/axes/order input as Python ints (None: known only at run time).

    OpenVINO reads these inputs with a cast to int64, so a float tensor works
    wherever its shape function does not insist on an integer type.
    """
    if not (t.etype.is_integral or (allow_float and t.etype.is_float) or t.etype is etypes.dynamic):
        kinds = "a numeric" if allow_float else "an integer"
        raise ShapeError(f"{what} must be {kinds} tensor, got {t.etype}")
    if t.value is None:
        return None
    return _as_ints(t.value)


def _as_ints(array: np.ndarray) -> list[int]:
    values = np.asarray(array).reshape(-1)
    if values.dtype.kind == "f":
        values = np.trunc(values)
    return [int(v) for v in values]


def _check_vector(t: TensorType, what: str, *, allow_scalar: bool) -> None:
    """Shape/axes/order inputs are 1-D (some ops also take a scalar)."""
    if t.shape is None:
        return
    allowed = (0, 1) if allow_scalar else (1,)
    if len(t.shape) not in allowed:
        want = "a scalar or 1-D" if allow_scalar else "1-D"
        raise ShapeError(f"{what} must be {want}, got shape {format_shape(t.shape)}")


def _vector_length(t: TensorType) -> DimLike:
    """How many values a scalar-or-1-D input holds."""
    if t.shape is None:
        return ANY
    return 1 if len(t.shape) == 0 else t.shape[0]


def _may_be_one(d: DimLike) -> bool:
    return d == 1 if is_static_dim(d) else d.contains(1)


def _normalized(axes: list[int], rank: int, what: str) -> list[int]:
    return [normalize_axis(a, rank, what) for a in axes]


def _view(x: np.ndarray, shape: Shape) -> np.ndarray:
    """`x` with a new shape; a view, since every caller keeps the element order."""
    return x.reshape(shape)


# ---------------------------------------------------------------- Reshape

def _dim_quotient(numerator: DimLike, divisor: int) -> DimLike:
    """The values n / divisor can take for n in `numerator` that divide evenly (divisor > 0)."""
    lo, hi = dim_bounds(numerator)
    q_lo = -(-lo // divisor)
    q_hi = None if hi is None else hi // divisor
    if q_hi is not None and q_lo > q_hi:
        return None  # no value in the interval divides evenly
    return make_dim(q_lo, q_hi)


def reshape_shape(shape: Shape, pattern: list[int], special_zero: bool) -> tuple[Shape, dict[int, str]]:
    """Output shape of Reshape-1 and the arithmetic of an inferred -1 dim (for diagnostics)."""
    bad = [(i, p) for i, p in enumerate(pattern) if p < -1]
    if bad:
        i, p = bad[0]
        raise ShapeError(f"target shape {pattern} has {p} at index {i}; only -1 and values >= 0 are allowed")
    minus_ones = [i for i, p in enumerate(pattern) if p == -1]
    if len(minus_ones) > 1:
        raise ShapeError(f"target shape {pattern} has more than one -1")
    copied = {i for i, p in enumerate(pattern) if special_zero and p == 0}
    if shape is not None and copied and max(copied) >= len(shape):
        raise ShapeError(f"target shape {pattern} copies dim {max(copied)} of the input (special_zero), "
                         f"but the input {format_shape(shape)} has rank {len(shape)}")
    out: list[DimLike] = []
    for i, p in enumerate(pattern):
        if i in copied:
            out.append(ANY if shape is None else shape[i])
        else:
            out.append(ANY if p == -1 else p)
    if shape is None:
        return tuple(out), {}
    # Copied dims appear on both sides, so they drop out of the element balance.
    rest_in = [d for i, d in enumerate(shape) if i not in copied]
    rest_out = [p for i, p in enumerate(pattern) if i not in copied and p != -1]
    out_count = int(np.prod(rest_out, dtype=np.int64))
    notes = {}
    if minus_ones:
        m = minus_ones[0]
        static_in = int(np.prod([d for d in rest_in if is_static_dim(d)], dtype=np.int64))
        dynamic_in = shape_numel(tuple(d for d in rest_in if not is_static_dim(d)))
        if out_count == 0:
            # 0 elements either way: OpenVINO then sets the -1 dim to the dynamic part of the input (1 if none).
            if static_in != 0:
                raise ShapeError(f"cannot infer the -1 in target shape {pattern} for input {format_shape(shape)}: "
                                 f"the other target dims hold 0 elements but the input does not")
            out[m] = dynamic_in
        else:
            in_count = dim_mul(static_in, dynamic_in)
            out[m] = _dim_quotient(in_count, out_count)
            if out[m] is None:
                raise ShapeError(f"cannot reshape {format_shape(shape)} to {pattern}: the -1 dim would be "
                                 f"{in_count} / {out_count}, which is not a whole number")
            counted = "input elements outside the copied dims" if copied else "input elements"
            notes[m] = f"{in_count} {counted} / {out_count} = {out[m]}"
    in_total, out_total = shape_numel(shape), shape_numel(tuple(out))
    if not dims_compatible(in_total, out_total):
        raise ShapeError(f"cannot reshape {format_shape(shape)} ({in_total} elements) to "
                         f"{format_shape(tuple(out))} ({out_total} elements)")
    return tuple(out), notes


@register("Reshape", 1)
class Reshape(Op):
    def infer(self, inputs):
        data, target = inputs
        _check_vector(target, "the target shape", allow_scalar=False)
        pattern = _int_values(target, "the target shape", allow_float=False)
        if pattern is None:
            length = _vector_length(target)
            shape = (ANY,) * length if isinstance(length, int) else None
            return [data.like(shape)]
        shape, notes = reshape_shape(data.shape, pattern, self.attrs.special_zero)
        return [TensorType(shape, data.etype, notes=notes or None)]

    def run(self, x, target):
        shape, _ = reshape_shape(x.shape, _as_ints(target), self.attrs.special_zero)
        return _view(x, shape)


# ---------------------------------------------------------------- Transpose

def transpose_order(rank: int | None, order: list[int]) -> list[int] | None:
    """The permutation (an empty order reverses the axes); None when the rank is unknown and order empty."""
    if not order:
        return None if rank is None else list(range(rank - 1, -1, -1))
    n = len(order) if rank is None else rank
    if sorted(order) != list(range(n)):
        raise ShapeError(f"Transpose order {order} is not a permutation of the axes 0..{n - 1}")
    return order


@register("Transpose", 1)
class Transpose(Op):
    def infer(self, inputs):
        data, order_t = inputs
        _check_vector(order_t, "the Transpose order", allow_scalar=False)
        length = _vector_length(order_t)
        if data.rank is not None and isinstance(length, int) and length not in (0, data.rank):
            raise ShapeError(f"Transpose order has {length} values for an input of rank {data.rank} "
                             f"{format_shape(data.shape)}")
        order = _int_values(order_t, "the Transpose order", allow_float=False)
        if order is not None:
            perm = transpose_order(data.rank, order)
            if perm is None:
                return [data.like(None)]
            if data.shape is None:
                return [data.like((ANY,) * len(perm))]
            return [data.like(tuple(data.shape[p] for p in perm))]
        return [data.like(None if data.rank is None else (ANY,) * data.rank)]

    def run(self, x, order):
        return np.transpose(x, transpose_order(x.ndim, _as_ints(order)))


# ---------------------------------------------------------------- Squeeze

def squeeze_shape(shape: tuple, axes: set[int]) -> tuple:
    """Drop the dims that are 1 among `axes` (all 1s when `axes` is empty).

    A named dim that cannot be 1 stays, as in OpenVINO 2024.3 and later; a
    dynamic dim that may be 1 is taken to be 1.
    """
    if not axes:
        return tuple(d for d in shape if not _may_be_one(d))
    return tuple(d for i, d in enumerate(shape) if not (i in axes and _may_be_one(d)))


@register("Squeeze", 1, 15)
class Squeeze(Op):
    def infer(self, inputs):
        data, axes_t = inputs[0], (inputs[1] if len(inputs) == 2 else None)
        if axes_t is not None:
            values = _int_values(axes_t, "Squeeze axes")
            if not is_static(axes_t.shape):
                return [data.like(None)]  # and OpenVINO checks nothing more
            _check_vector(axes_t, "Squeeze axes", allow_scalar=True)
        if data.shape is None:
            return [data.like(None)]
        if axes_t is None:
            axes = set()
        elif values is None:
            one_axis = data.rank > 0 and _vector_length(axes_t) == 1
            return [data.like(self._one_unknown_axis(data.shape) if one_axis else None)]
        else:
            axes = set(_normalized(values, data.rank, "Squeeze axis"))
        dynamic_ones = {i for i, d in enumerate(data.shape) if isinstance(d, Dim) and d.contains(1)}
        if dynamic_ones and not axes:
            return [data.like(None)]  # which of them are 1 is known only at run time
        if self.version >= 15 and self.attrs.allow_axis_skip and axes & dynamic_ones:
            return [data.like(None)]
        return [data.like(squeeze_shape(data.shape, axes))]

    def _one_unknown_axis(self, shape: tuple) -> Shape:
        """Axes is a single value known only at run time."""
        if not any(_may_be_one(d) for d in shape):
            return shape
        return (ANY,) * (len(shape) - 1) if self.version == 1 else None

    def run(self, x, axes=None):
        named = set() if axes is None else set(_normalized(_as_ints(axes), x.ndim, "Squeeze axis"))
        return _view(x, squeeze_shape(x.shape, named))


# ---------------------------------------------------------------- Unsqueeze

def unsqueeze_shape(shape: tuple, axes: list[int]) -> tuple:
    """Insert 1s at `axes`, which index the output.

    As OpenVINO does: the output rank for normalizing is the input rank plus
    the number of distinct values given; axes equal after normalizing count once.
    """
    if not axes:
        raise ShapeError("Unsqueeze needs at least one axis")
    expanded = len(shape) + len(set(axes))
    out = list(shape)
    for axis in sorted(set(_normalized(axes, expanded, "Unsqueeze axis"))):
        if axis > len(out) + 1:
            raise ShapeError(f"Unsqueeze axis {axis} is out of range for the output rank {len(out) + 1}")
        out.insert(min(axis, len(out)), 1)
    return tuple(out)


@register("Unsqueeze", 1)
class Unsqueeze(Op):
    def infer(self, inputs):
        data, axes_t = inputs
        _check_vector(axes_t, "Unsqueeze axes", allow_scalar=True)
        values = _int_values(axes_t, "Unsqueeze axes")
        if data.shape is None or values is None:
            return [data.like(None)]
        return [data.like(unsqueeze_shape(data.shape, values))]

    def run(self, x, axes):
        return _view(x, unsqueeze_shape(x.shape, _as_ints(axes)))


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

    def run(self, *arrays):
        if len(arrays) == 1:
            return arrays[0]
        return np.concatenate(arrays, axis=normalize_axis(self.attrs.axis, arrays[0].ndim, "Concat axis"))


# ---------------------------------------------------------------- ShapeOf

@register("ShapeOf", 1, 3)
class ShapeOf(Op):
    @property
    def output_etype(self):
        return etypes.i64 if self.version == 1 else self.attrs.output_type

    def infer(self, inputs):
        data = inputs[0]
        etype = self.output_etype
        if data.shape is None:
            return [TensorType((ANY,), etype)]
        # A static shape is a constant: Reshape targets built from it fold at load.
        value = np.array(data.shape, dtype=etype.carrier) if data.is_static else None
        return [TensorType((len(data.shape),), etype, value=value)]

    def run(self, x):
        return np.array(x.shape, dtype=self.output_etype.carrier)
