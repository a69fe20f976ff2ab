"""Shape ops: Reshape, Squeeze and Unsqueeze (the elements keep their order, only the shape
changes), Transpose and ShapeOf.

Each op's output shape comes from one function of the input shape and the values of its
shape/axes/order input.  Shape inference calls it with partial shapes at load time; the
kernel calls it with the concrete shape, so the two cannot disagree.  The kernels return
NumPy views.
"""
from __future__ import annotations

import numpy as np

from .. import etypes, partial_values
from ..errors import ShapeError
from ..registry import Op, TensorType, register
from ..shapes import (
    ANY, dim_divide_exact, Dim, DimLike, Shape, dim_mul, dims_compatible, format_shape, is_static, is_static_dim,
    shape_numel,
)
from .shape_inputs import as_ints, check_vector, int_values, may_be_one, normalize_axes, vector_length


def _view(x: np.ndarray, shape: Shape) -> np.ndarray:
    """`x` with a new shape; a view, since every caller keeps the element order."""
    return x.reshape(shape)


class ShapeRelabel(Op):
    """Reshape, Squeeze, Unsqueeze: the elements keep their order, only the shape changes.

    With static shapes the output shape is known at load, so the bound kernel
    is a bare `reshape` to it (about 0.3 us, where reading the shape input and
    redoing the shape arithmetic at every call costs 20 us).
    """

    checks_itself = True

    def bind(self, step):
        shape = step.outputs[0].shape
        if self.run_replaced() or not (is_static(shape) and is_static(step.inputs[0].shape)):
            return None
        if len(step.inputs) == 1:
            return lambda x: x.reshape(shape)
        return lambda x, _: x.reshape(shape)


# ---------------------------------------------------------------- Reshape

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
            out[m] = dim_divide_exact(in_count, out_count)
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
class Reshape(ShapeRelabel):
    def infer(self, inputs):
        data, target = inputs
        check_vector(target, "the target shape", allow_scalar=False)
        pattern = int_values(target, "the target shape", allow_float=False)
        if pattern is None and target.partial is not None:
            shape = partial_values.reshape_from_bounds(data.shape, partial_values.bounds(target),
                                                       self.attrs.special_zero)
            return [data.like(shape)]
        if pattern is None:
            length = vector_length(target)
            shape = (ANY,) * length if isinstance(length, int) else None
            return [data.like(shape)]
        shape, notes = reshape_shape(data.shape, pattern, self.attrs.special_zero)
        return [TensorType(shape, data.etype, notes=notes or None)]

    def run(self, x, target):
        pattern = as_ints(target)
        if x.size and target.ndim == 1 and min(pattern, default=0) >= -1:
            # NumPy's reshape where it means the same (no empty data, at most one -1, copied dims
            # filled in): a decoding step's targets change with its cache, so no kernel is bound
            # to them, and the rule below took 8-13 us of such a Reshape's 10-15
            if self.attrs.special_zero and 0 in pattern:
                rank = x.ndim
                pattern = [x.shape[i] if p == 0 and i < rank else p for i, p in enumerate(pattern)]
            if 0 not in pattern and pattern.count(-1) <= 1:
                try:
                    return x.reshape(pattern)
                except ValueError:
                    pass            # (the rule's message says why)
        shape, _ = reshape_shape(x.shape, pattern, self.attrs.special_zero)
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
    checks_itself = True        # (`transpose_order`; a view)

    def infer(self, inputs):
        data, order_t = inputs
        check_vector(order_t, "the Transpose order", allow_scalar=False)
        length = vector_length(order_t)
        if data.rank is not None and isinstance(length, int) and length not in (0, data.rank):
            raise ShapeError(f"Transpose order has {length} values for an input of rank {data.rank} "
                             f"{format_shape(data.shape)}")
        order = int_values(order_t, "the Transpose order", allow_float=False)
        if order is not None:
            perm = transpose_order(data.rank, order)
            if perm is None:
                return [data.like(None)]
            if data.shape is None:
                return [data.like((ANY,) * len(perm))]
            return [data.like(tuple(data.shape[p] for p in perm))]
        return [data.like(None if data.rank is None else (ANY,) * data.rank)]

    def run(self, x, order):
        return np.transpose(x, transpose_order(x.ndim, as_ints(order)))

    def bind(self, step):
        """A constant order on data of known rank: the permutation worked out once (reading and
        checking it took 3-4 us of a call that is otherwise a view)."""
        data, order = step.inputs
        if self.run_replaced() or order.value is None or data.rank is None:
            return None
        perm = transpose_order(data.rank, as_ints(order.value))
        if perm is None or len(perm) != data.rank:
            return None
        perm = tuple(perm)
        return lambda x, order: x.transpose(perm)


# ---------------------------------------------------------------- Squeeze

def squeeze_shape(shape: tuple, axes: set[int]) -> tuple:
    """Drop the dims that are 1 among `axes` (all 1s when `axes` is empty).

    A named dim that cannot be 1 stays, as in OpenVINO 2024.3 and later; a
    dynamic dim that may be 1 is taken to be 1.
    """
    if not axes:
        return tuple(d for d in shape if not may_be_one(d))
    return tuple(d for i, d in enumerate(shape) if not (i in axes and may_be_one(d)))


@register("Squeeze", 1, 15)
class Squeeze(ShapeRelabel):
    def infer(self, inputs):
        data, axes_t = inputs[0], (inputs[1] if len(inputs) == 2 else None)
        if axes_t is not None:
            values = int_values(axes_t, "Squeeze axes")
            if not is_static(axes_t.shape):
                return [data.like(None)]  # and OpenVINO checks nothing more
            check_vector(axes_t, "Squeeze axes", allow_scalar=True)
        if data.shape is None:
            return [data.like(None)]
        if axes_t is None:
            axes = set()
        elif values is None:
            one_axis = data.rank > 0 and vector_length(axes_t) == 1
            return [data.like(self._one_unknown_axis(data.shape) if one_axis else None)]
        else:
            axes = set(normalize_axes(values, data.rank, "Squeeze axis"))
        dynamic_ones = {i for i, d in enumerate(data.shape) if isinstance(d, Dim) and d.contains(1)}
        if dynamic_ones and not axes:
            return [data.like(None)]  # which of them are 1 is known only at run time
        if self.version >= 15 and self.attrs.allow_axis_skip and axes & dynamic_ones:
            return [data.like(None)]
        return [data.like(squeeze_shape(data.shape, axes))]

    def _one_unknown_axis(self, shape: tuple) -> Shape:
        """Axes is a single value known only at run time."""
        if not any(may_be_one(d) for d in shape):
            return shape
        return (ANY,) * (len(shape) - 1) if self.version == 1 else None

    def run(self, x, axes=None):
        named = set() if axes is None else set(normalize_axes(as_ints(axes), x.ndim, "Squeeze axis"))
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
    for axis in sorted(set(normalize_axes(axes, expanded, "Unsqueeze axis"))):
        if axis > len(out) + 1:
            raise ShapeError(f"Unsqueeze axis {axis} is out of range for the output rank {len(out) + 1}")
        out.insert(min(axis, len(out)), 1)
    return tuple(out)


@register("Unsqueeze", 1)
class Unsqueeze(ShapeRelabel):
    def infer(self, inputs):
        data, axes_t = inputs
        check_vector(axes_t, "Unsqueeze axes", allow_scalar=True)
        values = int_values(axes_t, "Unsqueeze axes")
        if data.shape is None or values is None:
            return [data.like(None)]
        return [data.like(unsqueeze_shape(data.shape, values))]

    def run(self, x, axes):
        return _view(x, unsqueeze_shape(x.shape, as_ints(axes)))

    def bind(self, step):
        """Also constant axes on data of known rank but dynamic dims: where the 1s go, worked out
        once (a decoding step's shapes change at every call: `unsqueeze_shape` took 2-3 us of a
        3 us call)."""
        bound = super().bind(step)
        data, axes = step.inputs
        if bound is not None or self.run_replaced() or axes.value is None or data.rank is None:
            return bound
        try:    # (the dims as stand-ins > 1: the 1s are the new axes)
            ones = [i for i, d in enumerate(unsqueeze_shape(tuple(range(2, data.rank + 2)), as_ints(axes.value)))
                    if d == 1]
        except ShapeError:
            return None     # (`run` says why, at run time)
        if len(ones) == 1:
            at = ones[0]
            return lambda x, _: x.reshape(x.shape[:at] + (1,) + x.shape[at:])

        def unsqueeze(x, _):
            shape = list(x.shape)
            for i in ones:
                shape.insert(i, 1)
            return x.reshape(shape)
        return unsqueeze


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
