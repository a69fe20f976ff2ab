"""TopK-1/3/11, NonZero-3, Bucketize-3, SearchSorted-15 and Unique-10.

What OpenVINO 2026.4.1 computes, beyond the op specs (specs/errata/detection.md):

* TopK orders by value (descending for mode=max, ascending for min); equal
  values keep their input order (the only order `stable=true` allows, and one
  of the orders an unstable sort may give).  sort=none returns the value order,
  as the CPU plugin does.  NaN counts as larger than +inf, so it comes first
  for max and last for min: OpenVINO's own NaN order is undefined (it changes
  with k and the slice length).
* A k of at most an eighth of the axis is chosen by partition around the k-th value (ties there
  taken in input order) and only those k sorted: TopK 100 of 100 000 10.8 -> 1.0-1.4 ms
  (OpenVINO 0.2-0.35); data holding a NaN takes the full sort.  k = 1 (an argmax) scans a short
  axis's slices against their extreme, where NumPy's argmax walked each position's 21 classes one
  at a time (a segmentation head's [1, 21, 512, 512]: 90 -> 14 ms, OpenVINO 5-7).
* k = 0 gives an empty axis (OpenVINO's shape inference accepts it); k larger
  than the axis is an error (the CPU plugin refuses to compile it).
* NonZero of a scalar is [1, count], as on the CPU plugin.

Bucketize, SearchSorted and Unique (specs/errata/misc.md):

* Bucketize with_right_bound counts the buckets below x (std::lower_bound), without it the
  buckets at or below x (std::upper_bound); a NaN x is in bucket 0 or len(buckets).
  SearchSorted counts the same two ways, but a NaN value gives 0 in both modes.
* Unique compares with ==: NaNs are all distinct and -0.0 equals 0.0 (the first occurrence is
  kept).  sorted=true orders values (or slices, lexicographically) ascending with NaN last,
  sorted=false by first occurrence.
"""
from __future__ import annotations

import numpy as np

from ..errors import ModelError, ShapeError
from ..registry import Op, TensorType, register
from .. import etypes
from ..shapes import (
    ANY,
    dim_bounds,
    dim_merge,
    format_shape,
    is_static,
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


# k at most this share of the axis takes `_top_k_by_partition` (a full sort of 100 000 values took
# 10.8 ms for TopK 100; the partition 1.0-1.4)
PARTITION_MAX_SHARE = 1 / 8


def _top_k_by_partition(x: np.ndarray, k: int, largest_first: bool) -> np.ndarray | None:
    """The first k of `_order_along_last(x, largest_first)` without sorting the whole axis, or None
    where the data has a NaN.  The k-th value splits the axis: the values beyond it, then those
    equal to it in input order up to k, are the k; they are sorted alone, stably, from input order."""
    n = x.shape[-1]
    if np.isnan(x).any() if x.dtype.kind == "f" else False:
        return None
    kth = n - k if largest_first else k - 1
    bound = np.partition(x, kth, axis=-1)[..., kth:kth + 1]
    chosen = x >= bound if largest_first else x <= bound
    if np.any(np.count_nonzero(chosen, axis=-1) != k):          # ties at the k-th value: the first of them
        tied = x == bound
        wanted = k - np.count_nonzero(chosen & ~tied, axis=-1, keepdims=True)
        chosen &= ~tied | (np.cumsum(tied, axis=-1) <= wanted)
    index = np.nonzero(chosen)[-1].reshape(x.shape[:-1] + (k,))      # per row, in input order
    return np.take_along_axis(index, _order_along_last(np.take_along_axis(x, index, -1), largest_first), -1)


# An axis at most this long takes `_top_one` by a scan of its slices; a longer one np.argmax
SCAN_MAX_LENGTH = 64


def _top_one(data: np.ndarray, axis: int, largest_first: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """TopK with k = 1 (a segmentation head's argmax over 21 classes of 512 x 512: 90 -> 14 ms): the
    extreme along `axis`, then, over a short axis, its slices from the last to the first marking
    where they reach it, so the first occurrence wins; a long axis by np.argmax / np.argmin, which
    keep the first too.  None where a NaN is involved (`_order_along_last` ranks it)."""
    length = data.shape[axis]
    if length > SCAN_MAX_LENGTH:
        index = (np.argmax if largest_first else np.argmin)(data, axis=axis, keepdims=True)
    else:
        extreme = (np.max if largest_first else np.min)(data, axis=axis, keepdims=True)
        if extreme.dtype.kind == "f" and np.isnan(extreme).any():
            return None
        index = np.full(extreme.shape, length - 1, np.int64)
        before = (slice(None),) * axis
        for i in range(length - 2, -1, -1):
            np.copyto(index, i, where=data[before + (slice(i, i + 1),)] == extreme)
    values = np.take_along_axis(data, index, axis=axis)
    if data.dtype.kind == "f" and np.isnan(values).any():
        return None
    return values, index


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
        largest_first = self.attrs.mode == "max"
        if k == 1 and data.size:
            found = _top_one(data, axis, largest_first)
            if found is not None:
                return found[0], found[1].astype(self.attrs.index_element_type.carrier)
        x = np.moveaxis(data, axis, -1)
        order = None
        if 0 < k <= x.shape[-1] * PARTITION_MAX_SHARE:
            order = _top_k_by_partition(x, k, largest_first)
        if order is None:
            order = _order_along_last(x, largest_first)[..., :k]
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


# ---------------------------------------------------------------- Bucketize and SearchSorted

def _comparable(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both operands in the type C++ compares them in: the float type when either is floating
    (f16 compares as f32), else NumPy's common integer type."""
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        wide = np.float64 if np.float64 in (a.dtype, b.dtype) else np.float32
        return a.astype(wide), b.astype(wide)
    common = np.result_type(a.dtype, b.dtype)
    return a.astype(common), b.astype(common)


def count_below(sorted_rows: np.ndarray, values: np.ndarray, inclusive: bool) -> np.ndarray:
    """For each value, how many entries of its row of `sorted_rows` are < it (<= if inclusive).

    `sorted_rows` is [rows, n], `values` [rows, m].  One flat search serves every row: all
    numbers are replaced by their rank among all numbers (ties share a rank), then row r
    adds r * (number of ranks), which keeps rows apart and each row sorted.
    """
    rows, n = sorted_rows.shape
    everything = np.concatenate([sorted_rows.reshape(-1), values.reshape(-1)])
    _, ranks = np.unique(everything, return_inverse=True)
    ranks = ranks.reshape(-1).astype(np.int64)
    span = int(ranks.max(initial=0)) + 1
    offset = np.arange(rows, dtype=np.int64)[:, None] * span
    seq_keys = (ranks[:sorted_rows.size].reshape(rows, n) + offset).reshape(-1)
    value_keys = ranks[sorted_rows.size:].reshape(values.shape) + offset
    found = np.searchsorted(seq_keys, value_keys.reshape(-1), side="right" if inclusive else "left")
    return found.reshape(values.shape) - n * np.arange(rows)[:, None]


def _check_index_type(etype, name: str = "output_type") -> None:
    if etype.name not in ("i32", "i64"):
        raise ShapeError(f"{name} must be i32 or i64, got {etype}")


@register("Bucketize", 3)
class Bucketize(Op):
    """The index of the bucket each element falls in, given sorted bucket boundaries."""

    def infer(self, inputs):
        data, buckets = inputs
        for name, t in (("data", data), ("buckets", buckets)):
            if t.etype.kind in ("bool", "string"):
                raise ShapeError(f"{name} must be numeric, got {t.etype}")
        if buckets.rank not in (None, 1):
            raise ShapeError(f"buckets must be a 1D tensor, got {format_shape(buckets.shape)}")
        _check_index_type(self.attrs.output_type)
        return [data.like(etype=self.attrs.output_type)]

    def run(self, data, buckets):
        x, edges = _comparable(data, buckets)
        right_bound = self.attrs.with_right_bound
        # with_right_bound: buckets[i - 1] < x <= buckets[i], the count of edges below x.
        index = np.searchsorted(edges, x, side="left" if right_bound else "right")
        if x.dtype.kind == "f":   # comparisons with NaN are false: lower_bound stops first, upper_bound runs off
            index = np.where(np.isnan(x), 0 if right_bound else edges.size, index)
        return np.asarray(index).astype(self.attrs.output_type.carrier)


@register("SearchSorted", 15)
class SearchSorted(Op):
    """Where each value would be inserted into its row of sorted_sequence to keep the row sorted."""

    def infer(self, inputs):
        seq, values = inputs
        if seq.etype is not values.etype and etypes.dynamic not in (seq.etype, values.etype):
            raise ShapeError(f"sorted_sequence ({seq.etype}) and values ({values.etype}) must have the "
                             f"same element type")
        _check_index_type(self.attrs.output_type)
        etype = self.attrs.output_type
        if seq.rank == 0:
            raise ShapeError("sorted_sequence must have rank 1 or more, got a scalar")
        if seq.rank is None or values.rank is None or seq.rank == 1:
            return [values.like(etype=etype)]
        if seq.rank != values.rank:
            raise ShapeError(f"sorted_sequence {format_shape(seq.shape)} and values {format_shape(values.shape)} "
                             f"must have the same rank unless sorted_sequence is 1D")
        try:
            leading = tuple(dim_merge(a, b) for a, b in zip(seq.shape[:-1], values.shape[:-1]))
        except ShapeError:
            raise ShapeError(f"sorted_sequence {format_shape(seq.shape)} and values {format_shape(values.shape)} "
                             f"differ in a dimension other than the last") from None
        return [TensorType(leading + values.shape[-1:], etype)]

    def run(self, seq, values):
        seq, values = _comparable(seq, values)
        if seq.ndim == 1 or values.ndim == 0:
            rows_seq, rows_values = seq.reshape(1, -1), values.reshape(1, -1)
        else:
            rows_seq = seq.reshape(-1, seq.shape[-1])
            rows_values = values.reshape(rows_seq.shape[0], -1)
        index = count_below(rows_seq, rows_values, inclusive=self.attrs.right_mode).reshape(values.shape)
        if values.dtype.kind == "f":   # the CPU plugin's comparisons put NaN at 0 in both modes
            index = np.where(np.isnan(values), 0, index)
        return index.astype(self.attrs.output_type.carrier)


# ---------------------------------------------------------------- Unique

def unique_slices(rows: np.ndarray, keep_sorted: bool):
    """Distinct rows of a 2-D array: (unique rows, first index, inverse, counts).

    Rows are compared with == (NaN never equals NaN, -0.0 equals 0.0); a stable
    lexicographic sort keeps each group's first occurrence first.
    """
    n = rows.shape[0]
    if n == 0:
        empty = np.zeros(0, np.int64)
        return rows, empty, empty, empty
    order = np.lexsort(rows.T[::-1]) if rows.shape[1] else np.arange(n)
    ordered = rows[order]
    starts = np.ones(n, dtype=bool)
    if rows.shape[1]:
        starts[1:] = ~np.all(ordered[1:] == ordered[:-1], axis=1)
    else:
        starts[1:] = False
    group = np.cumsum(starts) - 1
    first = order[starts]
    counts = np.diff(np.append(np.flatnonzero(starts), n))
    inverse = np.empty(n, np.int64)
    inverse[order] = group
    if not keep_sorted:   # renumber the groups by first occurrence
        by_first = np.argsort(first, kind="stable")
        renumber = np.empty_like(by_first)
        renumber[by_first] = np.arange(by_first.size)
        first, counts, inverse = first[by_first], counts[by_first], renumber[inverse]
    return rows[first], first, inverse, counts


@register("Unique", 10)
class Unique(Op):
    """Distinct elements (or slices along axis), their first indices, the inverse map and counts."""

    def _axis(self, inputs, rank: int | None) -> int | None:
        if len(inputs) < 2:
            return None
        axis = inputs[1]
        if axis.etype is not etypes.dynamic and axis.etype.name not in ("i32", "i64"):
            raise ShapeError(f"axis must be i32 or i64, got {axis.etype}")
        if axis.shape is not None and axis.shape not in ((), (1,)):
            raise ShapeError(f"axis must be a scalar or a 1D tensor of one element, got {format_shape(axis.shape)}")
        if axis.value is None:
            raise ShapeError("axis must be known when the model is loaded (OpenVINO requires a Constant)")
        value = int(np.asarray(axis.value).reshape(-1)[0])
        return value if rank is None else normalize_axis(value, rank, "axis")

    def infer(self, inputs):
        data = inputs[0]
        a = self.attrs
        _check_index_type(a.index_element_type, "index_element_type")
        _check_index_type(a.count_element_type, "count_element_type")
        axis = self._axis(inputs, data.rank)
        types = (data.etype, a.index_element_type, a.index_element_type, a.count_element_type)
        if data.value is not None:
            return [TensorType(v.shape, t) for v, t in zip(self.run(*[t.value for t in inputs]), types)]
        # OpenVINO's bounds: 1..numel distinct elements when data is static and not empty.
        numel = shape_numel(data.shape) if data.shape is not None else ANY
        capacity = numel if isinstance(numel, int) and numel > 0 else None
        some = ANY if capacity is None else make_dim(1, capacity)
        shapes = [(some,), (some,), (ANY if capacity is None else capacity,), (some,)]
        if axis is None:
            if not is_static(data.shape):
                shapes[0] = (ANY,)
        elif data.shape is not None:
            dim = data.shape[axis]
            if dim == 0:
                kept, shapes[1], shapes[2], shapes[3] = 0, (0,), (0,), (0,)
            elif dim == ANY:
                kept, shapes[2] = ANY, (ANY,)
            else:
                kept, shapes[2] = make_dim(1, dim_bounds(dim)[1]), (dim,)
            shapes[0] = data.shape[:axis] + (kept,) + data.shape[axis + 1:]
        else:
            shapes[0] = None
        return [TensorType(shape, etype) for shape, etype in zip(shapes, types)]

    def run(self, data, axis=None):
        a = self.attrs
        if axis is None:
            rows = data.reshape(-1, 1)
            values, first, inverse, counts = unique_slices(rows, a.sorted)
            values = values.reshape(-1)
        else:
            k = normalize_axis(int(np.asarray(axis).reshape(-1)[0]), data.ndim, "axis")
            moved = np.moveaxis(data, k, 0)
            values, first, inverse, counts = unique_slices(moved.reshape(moved.shape[0], -1), a.sorted)
            values = np.moveaxis(values.reshape((-1,) + moved.shape[1:]), 0, k)
        index = a.index_element_type.carrier
        return (np.ascontiguousarray(values), first.astype(index), inverse.astype(index),
                counts.astype(a.count_element_type.carrier))
