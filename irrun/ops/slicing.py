"""Slice-8, SliceScatter-15 and StridedSlice-1, and the slicing arithmetic they share: OpenVINO's
clamping of start and stop, and how much a slice takes from a dynamic dim.

Each op's output shape comes from one function of the input shape and the values of its index
inputs.  Shape inference calls it with partial shapes at load time; the kernel calls it with
the concrete shape, so the two cannot disagree.  Slice and StridedSlice return NumPy views;
SliceScatter copies.
"""
from __future__ import annotations

from .. import etypes
from ..errors import ShapeError
from ..registry import Op, TensorType, register
from ..shapes import ANY, DimLike, Shape, dim_bounds, dims_compatible, format_shape, make_dim
from .common import convert_array
from .shape_inputs import as_ints, check_vector, int_values, normalize_axes, vector_length


# ---------------------------------------------------------------- index inputs

def _upto(d: DimLike) -> DimLike:
    """Any size from 0 to what `d` can be: a dim cut by a slice not known until run time."""
    return make_dim(0, dim_bounds(d)[1])


def _lengths_agree(inputs: list[tuple[str, TensorType]]) -> None:
    """1-D inputs that give one value per sliced axis must have one length."""
    known = [(name, vector_length(t)) for name, t in inputs if t.shape is not None]
    for name, n in known[1:]:
        if not dims_compatible(n, known[0][1]):
            raise ShapeError(f"{known[0][0]} has {known[0][1]} values but {name} has {n}; they must have one value "
                             f"per sliced axis")


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
    normalized = normalize_axes(axes, rank, "Slice axis")
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
    starts, stops, steps = as_ints(starts), as_ints(stops), as_ints(steps)
    axes = None if axes is None else as_ints(axes)
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
        check_vector(t, what, allow_scalar=False)
        if rank is not None and t.shape is not None and dim_bounds(t.shape[0])[0] > rank:
            raise ShapeError(f"{what} has {t.shape[0]} values, more than the data rank {rank}")
    _lengths_agree(named)
    values = [int_values(t, what, allow_float=False) for what, t in named]
    has_axes = len(values) == 4
    return slice_shape(shape, *values[:3], values[3] if has_axes else None, has_axes=has_axes)


@register("Slice", 8)
class Slice(Op):
    checks_itself = True        # (`slice_index`; a view)

    def infer(self, inputs):
        data = inputs[0]
        return [data.like(_sliced_shape(data.shape, inputs[1:]))]

    def run(self, x, *index_inputs):
        return x[slice_index(x.shape, *index_inputs)]

    def bind(self, step):
        """Constant start/stop/step/axes: on static data the index worked out once, here; on data of
        known rank the values read and checked once, each call clamping them to its dims (a
        decoding step's cache grows at every call)."""
        data, rest = step.inputs[0], step.inputs[1:]
        if self.run_replaced() or data.rank is None or any(t.value is None for t in rest):
            return None
        if data.is_static:
            index = slice_index(tuple(data.shape), *(t.value for t in rest))
            return lambda x, *_: x[index]
        values = [as_ints(t.value) for t in rest]
        try:
            slice_index((1,) * data.rank, *values)      # (its checks, which no dim changes)
        except ShapeError:
            return None                                 # (`run` says what is wrong, at run time)
        rank = data.rank
        cuts = list(zip(slice_axes(rank, len(values[0]), values[3] if len(values) == 4 else None), *values[:3]))

        def sliced(x, *_):
            index = [slice(None)] * rank
            for axis, start, stop, stride in cuts:
                index[axis] = axis_slice(x.shape[axis], start, stop, stride)
            return x[tuple(index)]
        return sliced


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
            check_vector(t, f"StridedSlice {name}", allow_scalar=False)
        _lengths_agree(named)
        begin = int_values(inputs[1], "StridedSlice begin", allow_float=False)
        end = int_values(inputs[2], "StridedSlice end", allow_float=False)
        if data.shape is None:
            return [data.like(None)]
        lengths = [n for n in map(vector_length, inputs[1:]) if isinstance(n, int)]
        if not lengths:
            return [data.like(None)]
        if len(inputs) == 4:
            strides = int_values(inputs[3], "StridedSlice strides")
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
        begin, end = as_ints(begin), as_ints(end)
        strides = [1] * len(begin) if strides is None else as_ints(strides)
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
