"""Shape and data-movement ops: Reshape, Transpose, Squeeze, Unsqueeze, Concat, ShapeOf,
Split, VariadicSplit, Slice, StridedSlice, SliceScatter, Broadcast, Tile and Pad.

Each op's output shape comes from one function of the input shape and the
values of its shape/axes/order input.  Shape inference calls it with partial
shapes at load time; the kernel calls it with the concrete shape, so the two
cannot disagree.  Kernels return NumPy views wherever NumPy can (reshape,
transpose, squeeze, unsqueeze, split, slicing, broadcast, cropping Pad); Concat
of two or more inputs, Tile, SliceScatter and padding Pad copy.
"""
from __future__ import annotations

import numpy as np

from .. import etypes
from ..errors import ShapeError
from ..registry import Op, TensorType, register
from ..shapes import (ANY, dim_divide_exact, Dim, DimLike, Shape, broadcast_shapes, dim_add, dim_bounds, dim_merge, dim_mul,
                      dims_compatible, format_shape, is_static, is_static_dim, make_dim, normalize_axis, shape_numel)
from .arithmetic import pdpd_align, pdpd_start
from .common import convert_array


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


class ShapeRelabel(Op):
    """Reshape, Squeeze, Unsqueeze: the elements keep their order, only the shape changes.

    With static shapes the output shape is known at load, so the bound kernel
    is a bare `reshape` to it (about 0.3 us, where reading the shape input and
    redoing the shape arithmetic at every call costs 20 us).
    """

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
class Squeeze(ShapeRelabel):
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
class Unsqueeze(ShapeRelabel):
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


# ---------------------------------------------------------------- index inputs

def _index_input(t: TensorType, what: str, *, allow_float: bool = False) -> list[int] | None:
    """A 1-D index input (start, begin, pads, repeats, split lengths): checked, and its values if known."""
    _check_vector(t, what, allow_scalar=False)
    return _int_values(t, what, allow_float=allow_float)


def _upto(d: DimLike) -> DimLike:
    """Any size from 0 to what `d` can be: a dim cut by a slice not known until run time."""
    return make_dim(0, dim_bounds(d)[1])


def _lengths_agree(inputs: list[tuple[str, TensorType]]) -> None:
    """1-D inputs that give one value per sliced axis must have one length."""
    known = [(name, _vector_length(t)) for name, t in inputs if t.shape is not None]
    for name, n in known[1:]:
        if not dims_compatible(n, known[0][1]):
            raise ShapeError(f"{known[0][0]} has {known[0][1]} values but {name} has {n}; they must have one value "
                             f"per sliced axis")


# ---------------------------------------------------------------- Split, VariadicSplit

def _split_axis(axis: TensorType | np.ndarray, rank: int, op: str) -> int | None:
    """The normalized split axis (None: known only at run time).  VariadicSplit also reads a float axis."""
    if isinstance(axis, np.ndarray):
        values = _as_ints(axis)
    else:
        values = _int_values(axis, f"the {op} axis", allow_float=op == "VariadicSplit")
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
        lengths = _index_input(lengths_t, "split_lengths", allow_float=True)
        count = _vector_length(lengths_t)
        if not isinstance(count, int):  # the IR's output ports still say how many
            count = len(self.layer.outputs) if hasattr(self, "layer") else 0
        axis = None if data.shape is None else _split_axis(axis_t, data.rank, "VariadicSplit")
        if axis is None or lengths is None:
            return _pieces(data, axis, [ANY] * count)
        return _pieces(data, axis, resolve_split_lengths(lengths, data.shape[axis]))

    def run(self, x, axis, lengths):
        axis = _split_axis(axis, x.ndim, "VariadicSplit")
        sizes = resolve_split_lengths(_as_ints(lengths), x.shape[axis])
        return tuple(np.split(x, np.cumsum(sizes[:-1]), axis=axis))


# ---------------------------------------------------------------- slicing arithmetic

INT64_MAX = (1 << 63) - 1
INT64_MIN = -(1 << 63)


def clamped_bounds(dim: int, start: int, stop: int, step: int) -> tuple[int, int]:
    """OpenVINO's start and stop on an axis of `dim` elements: negatives count from the end, then clamp.

    Forward steps clamp both to [0, dim].  Reverse steps clamp start to
    [0, dim - 1] and stop to [-1, dim - 1]: a start before the first element
    still selects element 0, where Python's slicing selects nothing.
    """
    start = start + dim if start < 0 else start
    stop = stop + dim if stop < 0 else stop
    if step > 0:
        return min(max(start, 0), dim), min(max(stop, 0), dim)
    return min(max(start, 0), dim - 1), min(max(stop, -1), dim - 1)


def axis_slice(dim: int, start: int, stop: int, step: int) -> slice:
    begin, end = clamped_bounds(dim, start, stop, step)
    return slice(begin, end if end >= 0 else None, step)


def sliced_length(dim: int, start: int, stop: int, step: int) -> int:
    return len(range(*clamped_bounds(dim, start, stop, step), step))


def _sliced_unbounded(start: int, stop: int, step: int) -> int | None:
    """Most elements a slice can take from a dim with no upper bound (None: no bound either).

    OpenVINO's bound: a slice reaching to "the end" of an unbounded dim is
    unbounded; one counted from the end or between fixed indices is not.
    """
    reverse = step < 0
    start_limit = start in (INT64_MAX, INT64_MIN)
    any_max = INT64_MAX in (start, stop)
    if (start < 0) != (stop < 0) or any_max or start_limit:
        if reverse:
            end = -1 if start < 0 or any_max else -1 - start
        elif start < 0 and not start_limit:
            end = -start if stop == INT64_MAX else stop
        else:
            end = -1
        begin = 0
    else:
        begin = min(max(start + INT64_MAX if start < 0 else start, 0), INT64_MAX - 1 if reverse else INT64_MAX)
        end = min(max(stop + INT64_MAX if stop < 0 else stop, -1 if reverse else 0), INT64_MAX)
    if begin == 0 and end == -1:
        return None
    span = min(0, end - begin) if reverse else max(0, end - begin)
    length = abs(span) if abs(step) == 1 or span == 0 else -(-abs(span) // abs(step))
    return None if length >= INT64_MAX else length


def sliced_dim(d: DimLike, start: int, stop: int, step: int) -> DimLike:
    """How many elements start:stop:step selects from a dim (an interval for a dynamic dim)."""
    if isinstance(d, int):
        return sliced_length(d, start, stop, step)
    lo, hi = dim_bounds(d)
    at_lo = sliced_length(lo, start, stop, step)
    at_hi = _sliced_unbounded(start, stop, step) if hi is None else sliced_length(hi, start, stop, step)
    if at_hi is None:
        return make_dim(at_lo, None)
    # A slice counted from the end can take more from a short dim than from a long one; OpenVINO
    # then gives up on the interval.
    return make_dim(at_lo, at_hi) if at_lo <= at_hi else ANY


def _check_steps(steps: list[int], what: str) -> None:
    if 0 in steps:
        raise ShapeError(f"{what} {steps} has a 0; every step must be non-zero")


# ---------------------------------------------------------------- Slice, SliceScatter

def slice_axes(rank: int, count: int, axes: list[int] | None) -> list[int]:
    """The data axis each start/stop/step value applies to (default: the first `count` axes)."""
    if axes is None:
        return list(range(count))
    normalized = _normalized(axes, rank, "Slice axis")
    if len(set(normalized)) != len(normalized):
        raise ShapeError(f"Slice axes {axes} repeat an axis; they must be unique")
    return normalized


def slice_shape(shape: Shape, starts, stops, steps, axes, *, has_axes: bool) -> Shape:
    """Output shape of Slice-8 (the region SliceScatter-15 writes); a value list is None when unknown.

    `has_axes`: the op has an axes input (then axes None means its values are
    known only at run time, and any dim may be cut).
    """
    if shape is None:
        return None
    if (has_axes and axes is None) or (not has_axes and starts is None):
        return tuple(_upto(d) for d in shape)
    count = len(axes) if has_axes else len(starts)
    which = dict(zip(slice_axes(len(shape), count, axes), range(count)))
    known = starts is not None and stops is not None and steps is not None
    if known:
        _check_steps(steps, "Slice step")
    out = []
    for i, d in enumerate(shape):
        if i not in which:
            out.append(d)
        elif known:
            k = which[i]
            out.append(sliced_dim(d, starts[k], stops[k], steps[k]))
        else:
            out.append(_upto(d))
    return tuple(out)


def slice_index(shape: tuple, starts, stops, steps, axes=None) -> tuple:
    """The NumPy index (a tuple of slices) of a Slice-8 with these start/stop/step/axes arrays."""
    starts, stops, steps = _as_ints(starts), _as_ints(stops), _as_ints(steps)
    axes = None if axes is None else _as_ints(axes)
    if not len(starts) == len(stops) == len(steps) == len(starts if axes is None else axes):
        raise ShapeError(f"Slice start {starts}, stop {stops}, step {steps} and axes {axes} must have one length")
    _check_steps(steps, "Slice step")
    index = [slice(None)] * len(shape)
    for k, axis in enumerate(slice_axes(len(shape), len(starts), axes)):
        index[axis] = axis_slice(shape[axis], starts[k], stops[k], steps[k])
    return tuple(index)


_SLICE_INPUTS = ("start", "stop", "step", "axes")


def _sliced_shape(shape: Shape, index_inputs: list[TensorType]) -> Shape:
    """Slice-8's output shape from its start, stop, step (and axes) inputs, after checking them."""
    rank = None if shape is None else len(shape)
    named = [(f"the {name} input", t) for name, t in zip(_SLICE_INPUTS, index_inputs)]
    for what, t in named:
        _check_vector(t, what, allow_scalar=False)
        if rank is not None and t.shape is not None and dim_bounds(t.shape[0])[0] > rank:
            raise ShapeError(f"{what} has {t.shape[0]} values, more than the data rank {rank}")
    _lengths_agree(named)
    values = [_int_values(t, what, allow_float=False) for what, t in named]
    has_axes = len(values) == 4
    return slice_shape(shape, *values[:3], values[3] if has_axes else None, has_axes=has_axes)


@register("Slice", 8)
class Slice(Op):
    def infer(self, inputs):
        data = inputs[0]
        return [data.like(_sliced_shape(data.shape, inputs[1:]))]

    def run(self, x, *index_inputs):
        return x[slice_index(x.shape, *index_inputs)]


@register("SliceScatter", 15)
class SliceScatter(Op):
    def infer(self, inputs):
        data, updates = inputs[:2]
        shape = data.shape if data.shape is not None else \
            None if updates.shape is None else (ANY,) * len(updates.shape)
        if shape is not None and updates.shape is not None and len(updates.shape) != len(shape):
            raise ShapeError(f"updates {format_shape(updates.shape)} and data {format_shape(shape)} differ in rank")
        if shape is not None and len(shape) == 0:
            raise ShapeError("SliceScatter data and updates cannot be scalars")
        region = _sliced_shape(shape, inputs[2:])
        if region is not None and updates.shape is not None and \
                not all(dims_compatible(a, b) for a, b in zip(region, updates.shape)):
            raise ShapeError(f"updates of shape {format_shape(updates.shape)} do not fit the sliced region "
                             f"{format_shape(region)} of data {format_shape(shape)}")
        return [data.like(shape)]

    def run(self, x, updates, *index_inputs):
        index = slice_index(x.shape, *index_inputs)
        region = x[index].shape
        if updates.shape != region:
            raise ShapeError(f"updates of shape {format_shape(updates.shape)} do not fit the sliced region "
                             f"{format_shape(region)} of data {format_shape(x.shape)}")
        out = x.copy()
        # The spec wants one element type; OpenVINO accepts others and its CPU plugin converts them.
        out[index] = convert_array(updates, etypes.from_dtype(x.dtype))
        return out


# ---------------------------------------------------------------- StridedSlice

_MASKS = ("begin_mask", "end_mask", "new_axis_mask", "shrink_axis_mask", "ellipsis_mask")


def strided_slice_masks(attrs) -> dict[str, set[int]]:
    """The indices each mask sets, after OpenVINO's checks on the masks themselves."""
    masks = {name: tuple(attrs[name]) for name in _MASKS}
    for name, mask in masks.items():
        if any(v not in (0, 1) for v in mask):
            raise ShapeError(f"{name}={','.join(map(str, mask))}: every mask value must be 0 or 1")
    # OpenVINO compares every mask's length with begin_mask's (an empty mask is always fine).
    first = len(masks["begin_mask"])
    for name, mask in masks.items():
        if mask and len(mask) != first:
            raise ShapeError(f"{name} has {len(mask)} values but begin_mask has {first}; OpenVINO needs every "
                             f"non-empty mask to be as long as begin_mask")
    bits = {name: {i for i, v in enumerate(mask) if v == 1} for name, mask in masks.items()}
    if len(bits["ellipsis_mask"]) > 1:
        raise ShapeError(f"ellipsis_mask={','.join(map(str, masks['ellipsis_mask']))} sets more than one ellipsis")
    return bits


def strided_slice_plan(rank: int, count: int, bits: dict[str, set[int]],
                       count_new_after_ellipsis: bool = True) -> list[tuple[str, int | None, int | None]]:
    """What each output dim comes from: ("keep", input axis, None), ("new", None, k),
    ("shrink", input axis, k) or ("slice", input axis, k), k indexing begin/end/strides.

    An ellipsis stands for the input axes no other entry claims; so does the end
    of the list.  OpenVINO's shape inference counts the new axes after an
    ellipsis only when begin is known (`count_new_after_ellipsis`); the kernel
    always does.
    """
    ellipsis, new, shrink = bits["ellipsis_mask"], bits["new_axis_mask"], bits["shrink_axis_mask"]
    if not ellipsis and rank + len(new) < count:
        raise ShapeError(f"begin/end/strides have {count} values, more than the input rank {rank} plus the "
                         f"{len(new)} new axes")
    plan: list[tuple[str, int | None, int | None]] = []
    axis = 0
    for k in range(count):
        if k in ellipsis:
            before = sum(1 for j in range(k) if j not in new)
            new_after = sum(1 for j in range(k + 1, count) if j in new) if count_new_after_ellipsis else 0
            hidden = rank - (count - k - new_after - 1) - before
            plan += [("keep", a, None) for a in range(axis, axis + max(hidden, 0))]
            axis += max(hidden, 0)
        elif k in new:
            plan.append(("new", None, k))
        else:
            if axis >= rank:
                raise ShapeError(f"begin/end/strides index {k} slices input axis {axis}, but the input has rank {rank}")
            plan.append(("shrink" if k in shrink else "slice", axis, k))
            axis += 1
    plan += [("keep", a, None) for a in range(axis, rank)]
    return plan


def _strided_bounds(k: int, begin: list[int] | None, end: list[int] | None, stride: int,
                    bits) -> tuple[int | None, int | None]:
    """begin[k], end[k] with the masks applied: a masked bound reaches past the end in the stride's direction.

    None: the bound is known only at run time.
    """
    reverse = stride < 0
    start = (INT64_MAX if reverse else 0) if k in bits["begin_mask"] else None if begin is None else begin[k]
    stop = (INT64_MIN if reverse else INT64_MAX) if k in bits["end_mask"] else None if end is None else end[k]
    return start, stop


def _strided_dim(d: DimLike, start: int | None, stop: int | None, stride: int) -> DimLike:
    """A sliced dim; with a bound known only at run time, anything up to every |stride|-th element."""
    if start is not None and stop is not None:
        return sliced_dim(d, start, stop, stride)
    hi = dim_bounds(d)[1]
    return make_dim(0, None if hi is None else -(-hi // abs(stride)))


def _slicing_stride(strides: list[int], k: int) -> int:
    """The stride of a slicing entry (new-axis and shrink entries ignore theirs, even a 0)."""
    if strides[k] == 0:
        raise ShapeError(f"StridedSlice strides {strides} has a 0 at index {k}, which slices an axis; "
                         f"strides must be non-zero")
    return strides[k]


def _check_shrink_index(index: int, dim: int, k: int) -> None:
    if not -dim <= index < dim:
        raise ShapeError(f"shrink_axis_mask takes element begin[{k}]={index} of an axis of {dim} elements, "
                         f"which is out of range")


@register("StridedSlice", 1)
class StridedSlice(Op):
    def infer(self, inputs):
        data = inputs[0]
        bits = strided_slice_masks(self.attrs)
        named = list(zip(("begin", "end", "strides"), inputs[1:]))
        for name, t in named:
            _check_vector(t, f"StridedSlice {name}", allow_scalar=False)
        _lengths_agree(named)
        begin = _int_values(inputs[1], "StridedSlice begin", allow_float=False)
        end = _int_values(inputs[2], "StridedSlice end", allow_float=False)
        if data.shape is None:
            return [data.like(None)]
        lengths = [n for n in map(_vector_length, inputs[1:]) if isinstance(n, int)]
        if not lengths:
            return [data.like(None)]
        if len(inputs) == 4:
            strides = _int_values(inputs[3], "StridedSlice strides")
        else:
            strides = [1] * lengths[0]
        out = []
        plan = strided_slice_plan(data.rank, lengths[0], bits, count_new_after_ellipsis=begin is not None)
        for kind, axis, k in plan:
            d = None if axis is None else data.shape[axis]
            if kind == "keep":
                out.append(d)
            elif kind == "new":
                out.append(1)
            elif kind == "shrink":
                if begin is not None and isinstance(d, int):
                    _check_shrink_index(begin[k], d, k)
            elif strides is None:
                out.append(_upto(d))
            else:
                stride = _slicing_stride(strides, k)
                out.append(_strided_dim(d, *_strided_bounds(k, begin, end, stride, bits), stride))
        return [data.like(tuple(out))]

    def run(self, x, begin, end, strides=None):
        bits = strided_slice_masks(self.attrs)
        begin, end = _as_ints(begin), _as_ints(end)
        strides = [1] * len(begin) if strides is None else _as_ints(strides)
        if not len(begin) == len(end) == len(strides):
            raise ShapeError(f"StridedSlice begin {begin}, end {end} and strides {strides} must have one length")
        index: list = []
        for kind, axis, k in strided_slice_plan(x.ndim, len(begin), bits):
            if kind == "keep":
                index.append(slice(None))
            elif kind == "new":
                index.append(None)
            elif kind == "shrink":
                _check_shrink_index(begin[k], x.shape[axis], k)
                index.append(begin[k])
            else:
                stride = _slicing_stride(strides, k)
                start, stop = _strided_bounds(k, begin, end, stride, bits)
                index.append(axis_slice(x.shape[axis], start, stop, stride))
        # The trailing ellipsis covers no axis; it keeps an all-integer index a 0-d array, not a scalar.
        return x[(*index, ...)]


# ---------------------------------------------------------------- Broadcast

def _target_dims(values: list[int]) -> tuple:
    """A target shape input's values as dims (OpenVINO reads a negative value as a dynamic dim)."""
    return tuple(ANY if v < 0 else v for v in values)


def broadcast_numpy_shape(data: Shape, target: tuple) -> tuple:
    """mode=numpy: the output is the target; data lines up with its trailing dims."""
    if data is not None:
        if len(data) > len(target):
            raise ShapeError(f"cannot broadcast {format_shape(data)} to the target {format_shape(target)} of "
                             f"smaller rank (mode numpy)")
        for i, d in enumerate(data):
            t = target[len(target) - len(data) + i]
            # OpenVINO checks static dims only (a 2..5 data dim passes for a target of 7).
            if is_static_dim(d) and is_static_dim(t) and d not in (1, t):
                raise ShapeError(f"cannot broadcast {format_shape(data)} to {format_shape(target)} (mode numpy): "
                                 f"data dim {i} is {d}, which is neither 1 nor {t}")
    return target


def broadcast_explicit_shape(data: Shape, target: tuple, axes: list[int] | None) -> tuple:
    """mode=explicit: data dim i becomes target dim axes[i]; axes must be increasing."""
    if data is None or axes is None:
        return target
    if sorted(axes) != list(axes):
        raise ShapeError(f"axes_mapping {axes} is not in increasing order (Broadcast cannot transpose)")
    for i, a in enumerate(axes):
        if not 0 <= a < len(target):
            raise ShapeError(f"axes_mapping[{i}]={a} is out of range for the target {format_shape(target)}")
        if not data:  # OpenVINO places a scalar at a target dim that may be 1
            if i == 0 and not _may_be_one(target[a]):
                raise ShapeError(f"cannot broadcast a scalar to {format_shape(target)} with axes_mapping {axes}: "
                                 f"target dim {a} is {target[a]}, not 1")
            continue
        d = data[i]
        if not (_may_be_one(d) or dims_compatible(d, target[a])):
            raise ShapeError(f"cannot broadcast {format_shape(data)} to {format_shape(target)} with axes_mapping "
                             f"{axes}: data dim {i} is {d}, target dim {a} is {target[a]}")
    return target


def _check_axes_count(data: Shape, count: int) -> None:
    """axes_mapping has one value per data dim (a scalar takes one or more)."""
    if data is not None and count != len(data) and not (len(data) == 0 and count > 0):
        raise ShapeError(f"axes_mapping has {count} values for data {format_shape(data)} of rank {len(data)}; "
                         f"it needs one per data dim")


def broadcast_pdpd_shape(data: Shape, target: tuple, axis: int) -> tuple:
    """mode=pdpd: data lines up with the target from `axis` (-1: the trailing dims); 1s on either side stretch."""
    if data is None:
        return tuple(ANY for _ in target)
    start = pdpd_start(len(target), len(data), axis)
    out = list(target)
    for i, d in enumerate(data):
        try:
            out[start + i] = broadcast_shapes((d,), (target[start + i],))[0]
        except ShapeError:
            raise ShapeError(f"cannot broadcast {format_shape(data)} to {format_shape(target)} (mode pdpd, axis "
                             f"{axis}): data dim {i} is {d}, target dim {start + i} is {target[start + i]}") from None
    return tuple(out)


@register("Broadcast", 1, 3)
class Broadcast(Op):
    def mode(self, n_inputs: int) -> str:
        mode = self.attrs.mode
        if mode is None:  # Broadcast-1 without the attribute: OpenVINO picks by the number of inputs
            mode = "explicit" if n_inputs == 3 else "numpy"
        return "explicit" if mode == "none" else mode

    @property
    def pdpd_axis(self) -> int:
        return self.attrs.get("mode.mode.axis") or 0

    def infer(self, inputs):
        data, target_t = inputs[:2]
        mode = self.mode(len(inputs))
        if self.version == 3 and (mode == "explicit") != (len(inputs) == 3):
            raise ShapeError("Broadcast-3 takes an axes_mapping input in explicit mode and only then")
        if mode == "explicit" and len(inputs) < 3:
            raise ShapeError("Broadcast in explicit mode needs the axes_mapping input")
        target = _index_input(target_t, "the Broadcast target shape")
        axes = None
        if mode == "explicit":
            axes = _index_input(inputs[2], "axes_mapping")
            if is_static(inputs[2].shape) and inputs[2].rank == 1:
                _check_axes_count(data.shape, inputs[2].shape[0])
        if target is None:
            length = _vector_length(target_t)
            if not isinstance(length, int):
                return [data.like(None)]
            if mode == "bidirectional":
                return [data.like(broadcast_shapes(data.shape, (ANY,) * length))]
            return [data.like((ANY,) * length)]
        return [data.like(self._shape(mode, data.shape, _target_dims(target), axes))]

    def _shape(self, mode: str, data: Shape, target: tuple, axes) -> Shape:
        if mode == "numpy":
            return broadcast_numpy_shape(data, target)
        if mode == "explicit":
            return broadcast_explicit_shape(data, target, axes)
        if mode == "bidirectional":
            try:
                return broadcast_shapes(data, target)
            except ShapeError as exc:
                raise ShapeError(f"mode bidirectional: {exc.message}") from None
        return broadcast_pdpd_shape(data, target, self.pdpd_axis)

    def run(self, x, target, axes=None):
        mode = self.mode(2 if axes is None else 3)
        target = tuple(_as_ints(target))
        if any(d < 0 for d in target):
            raise ShapeError(f"the Broadcast target shape {list(target)} has a negative dim")
        if mode == "explicit":
            axes = _as_ints(axes)
            _check_axes_count(x.shape, len(axes))
            broadcast_explicit_shape(x.shape, target, axes)
            placed = [1] * len(target)
            for i, a in enumerate(axes[:x.ndim]):
                placed[a] = x.shape[i]
            return np.broadcast_to(x.reshape(placed), target)
        out = self._shape(mode, x.shape, target, None)
        if mode == "pdpd":
            x = pdpd_align(x, len(target), self.pdpd_axis)
        return np.broadcast_to(x, out)


# ---------------------------------------------------------------- Tile

def tile_shape(shape: Shape, repeats: list[int]) -> tuple[tuple, dict[int, str]]:
    """Output shape of Tile: the shorter of shape and repeats is padded with leading 1s; negative repeats are 0."""
    repeats = [max(r, 0) for r in repeats]
    rank = max(len(shape), len(repeats))
    shape = (1,) * (rank - len(shape)) + tuple(shape)
    repeats = [1] * (rank - len(repeats)) + repeats
    out = tuple(dim_mul(d, r) for d, r in zip(shape, repeats))
    notes = {i: f"{d} * {r} = {o}" for i, (d, r, o) in enumerate(zip(shape, repeats, out)) if r != 1}
    return out, notes


@register("Tile", 1)
class Tile(Op):
    def infer(self, inputs):
        data, repeats_t = inputs
        repeats = _index_input(repeats_t, "Tile repeats")
        length = _vector_length(repeats_t)
        if data.shape is None:
            return [data.like(None)]
        if repeats is None:
            return [data.like((ANY,) * max(data.rank, length) if isinstance(length, int) else None)]
        shape, notes = tile_shape(data.shape, repeats)
        return [TensorType(shape, data.etype, notes=notes or None)]

    def run(self, x, repeats):
        repeats = [max(r, 0) for r in _as_ints(repeats)]
        return np.tile(x, repeats) if repeats else x


# ---------------------------------------------------------------- Pad

def _padded_dim(d: DimLike, total: int) -> DimLike:
    """A dim grown (or, negative, cropped) by `total` elements."""
    lo, hi = dim_bounds(d)
    if hi is not None and hi + total < 0:
        raise ShapeError(f"pads of {total} in total crop more than the {d} elements of the dim")
    return make_dim(max(lo + total, 0), None if hi is None else hi + total)


def pad_shape(shape: Shape, begins: list[int], ends: list[int], mode: str) -> tuple[tuple, dict[int, str]]:
    """Output shape of Pad; negative pads crop.  reflect needs pads < dim, symmetric pads <= dim."""
    for name, pads in (("pads_begin", begins), ("pads_end", ends)):
        if len(pads) != len(shape):
            raise ShapeError(f"{name} {pads} has {len(pads)} values for an input {format_shape(shape)} of rank "
                             f"{len(shape)}")
    out, notes = [], {}
    for i, (d, b, e) in enumerate(zip(shape, begins, ends)):
        if isinstance(d, int):
            _check_pad_mode(mode, d, b, e, i)
        out.append(d if b == e == 0 else _padded_dim(d, b + e))
        if b or e:
            notes[i] = f"{b} + {d} + {e} = {out[i]}"
    return tuple(out), notes


def _check_pad_mode(mode: str, dim: int, begin: int, end: int, axis: int) -> None:
    """OpenVINO's limits on the pads of a static dim (checked even where the dim is only cropped)."""
    largest = max(begin, end)
    if mode == "edge" and largest > 0 and dim < 1:
        raise ShapeError(f"pad_mode=edge pads axis {axis}, which has no elements to repeat")
    if mode == "reflect" and (largest >= dim or largest > 0 and dim < 2):
        raise ShapeError(f"pad_mode=reflect with pads {begin}, {end} on axis {axis} of {dim} elements; each pad "
                         f"must be less than the dim")
    if mode == "symmetric" and largest > dim:
        raise ShapeError(f"pad_mode=symmetric with pads {begin}, {end} on axis {axis} of {dim} elements; each pad "
                         f"must not exceed the dim")


@register("Pad", 1, 12)
class Pad(Op):
    def infer(self, inputs):
        data, begins_t, ends_t = inputs[:3]
        if len(inputs) == 4 and self.attrs.pad_mode == "constant":  # other modes ignore pad_value
            value = inputs[3]
            if value.etype != data.etype and etypes.dynamic not in (value.etype, data.etype):
                raise ShapeError(f"pad_value has element type {value.etype}, data has {data.etype}; they must match")
            if value.rank not in (None, 0):
                raise ShapeError(f"pad_value must be a scalar, got shape {format_shape(value.shape)}")
        begins = _index_input(begins_t, "pads_begin")
        ends = _index_input(ends_t, "pads_end")
        if data.shape is None:
            return [data.like(None)]
        if begins is None or ends is None:
            for name, t in (("pads_begin", begins_t), ("pads_end", ends_t)):
                n = _vector_length(t)
                if isinstance(n, int) and n > data.rank:
                    raise ShapeError(f"{name} has {n} values for an input {format_shape(data.shape)} of rank "
                                     f"{data.rank}")
            return [data.like((ANY,) * data.rank)]
        shape, notes = pad_shape(data.shape, begins, ends, self.attrs.pad_mode)
        return [TensorType(shape, data.etype, notes=notes or None)]

    def run(self, x, begins, ends, value=None):
        begins, ends = _as_ints(begins), _as_ints(ends)
        mode = self.attrs.pad_mode
        pad_shape(x.shape, begins, ends, mode)
        # Pad first with the positive amounts, then crop: padding values come from the whole input.
        grow = [(max(b, 0), max(e, 0)) for b, e in zip(begins, ends)]
        if any(b or e for b, e in grow):
            if mode == "constant":
                fill = 0 if value is None else np.asarray(value).reshape(()).item()
                x = np.pad(x, grow, mode="constant", constant_values=fill)
            else:
                x = np.pad(x, grow, mode=mode)
        crop = tuple(slice(max(-b, 0), n - max(-e, 0)) for n, b, e in zip(x.shape, begins, ends))
        return x[crop]
