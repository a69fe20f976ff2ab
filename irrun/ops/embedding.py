"""Embedding bags and segment reductions: EmbeddingBagOffsetsSum-3, EmbeddingBagOffsets-15,
EmbeddingBagPackedSum-3, EmbeddingBagPacked-15, EmbeddingSegmentsSum-3, SegmentMax-16 and
SparseFillEmptyRows-16.

Every embedding op gathers rows of `emb_table` and sums (or averages) them per
bag; they differ only in how indices are assigned to bags:

* offsets: bag b holds indices[offsets[b]:offsets[b+1]] (the last bag runs to the end);
* packed: bag b is row b of a 2-D indices tensor;
* segments: index i goes to bag segment_ids[i].

What OpenVINO 2026.4.1 computes beyond the specs (specs/errata/misc2.md): an
index outside the table is an error; an offset must be below the number of
indices (so a trailing empty bag is an error); integer sums wrap in the table's
type and an integer mean truncates toward zero; f16 accumulates in f32.
"""
from __future__ import annotations

import numpy as np

from .. import etypes
from ..errors import ShapeError
from ..registry import Op, TensorType, register
from ..shapes import ANY, DimLike, Shape, dim_add, dim_merge, dims_compatible, format_shape

INDEX_TYPES = ("i32", "i64")


# ---------------------------------------------------------------- shared checks

def _check_index_types(op: str, named: list[tuple[str, TensorType]]) -> None:
    """Index inputs are i32 or i64, and all of one type."""
    for name, t in named:
        if t.etype is not etypes.dynamic and t.etype.name not in INDEX_TYPES:
            raise ShapeError(f"{op} {name} must be i32 or i64, got {t.etype}")
    if len({t.etype for _, t in named if t.etype is not etypes.dynamic}) > 1:
        listed = ", ".join(f"{n} {t.etype}" for n, t in named)
        raise ShapeError(f"{op} index inputs must share one element type, got {listed}")


def _check_rank(t: TensorType, rank: int, what: str) -> None:
    if t.rank is not None and t.rank != rank:
        want = "a scalar" if rank == 0 else f"{rank}-D"
        raise ShapeError(f"{what} must be {want}, got {format_shape(t.shape)}")


def _check_same_shape(a: TensorType, b: TensorType, what: str) -> Shape:
    """The merged shape of two inputs that must have one shape."""
    if a.shape is None or b.shape is None:
        return a.shape if b.shape is None else b.shape
    if len(a.shape) != len(b.shape) or not all(dims_compatible(x, y) for x, y in zip(a.shape, b.shape)):
        raise ShapeError(f"{what} must have one shape, got {format_shape(a.shape)} and {format_shape(b.shape)}")
    return tuple(dim_merge(x, y) for x, y in zip(a.shape, b.shape))


def _check_weights(table: TensorType, weights: TensorType, indices: TensorType, rank: int) -> Shape:
    if table.etype is not etypes.dynamic and weights.etype is not etypes.dynamic and weights.etype is not table.etype:
        raise ShapeError(f"per_sample_weights ({weights.etype}) must have the element type of emb_table "
                         f"({table.etype})")
    _check_rank(weights, rank, "per_sample_weights")
    return _check_same_shape(indices, weights, "indices and per_sample_weights")


def _bags_shape(table: TensorType, bags: DimLike, note: str) -> TensorType:
    """emb_table's shape with its first dim replaced by the number of bags."""
    if table.shape is None:
        return TensorType(None, table.etype)
    if not table.shape:
        raise ShapeError("emb_table must have rank 1 or more, got a scalar")
    return TensorType((bags,) + tuple(table.shape[1:]), table.etype, notes={0: note})


def _scalar(value: np.ndarray | None) -> int | None:
    return None if value is None else int(np.asarray(value).reshape(-1)[0])


# ---------------------------------------------------------------- shared kernel

def _accumulator(dtype: np.dtype) -> np.dtype:
    """What sums run in: f32 for f16 (as the CPU plugin), int64 for integers (wrapped back after)."""
    if dtype.kind == "f":
        return np.dtype(np.float32) if dtype.itemsize < 4 else dtype
    return np.dtype(np.int64)


def _table_rows(table: np.ndarray, indices: np.ndarray, what: str) -> np.ndarray:
    """Rows table[indices] as (len(indices), row size); every index must address a row."""
    idx = indices.astype(np.int64, copy=False).reshape(-1)
    bad = (idx < 0) | (idx >= table.shape[0])
    if bad.any():
        raise ShapeError(f"{what} {int(idx[bad][0])} is outside the {table.shape[0]} rows of emb_table")
    return table.reshape(table.shape[0], int(np.prod(table.shape[1:], dtype=np.int64)))[idx]


def embedding_bags(table: np.ndarray, indices: np.ndarray, bag_of: np.ndarray, n_bags: int,
                   weights: np.ndarray | None = None, default_index: int | None = None,
                   mean: bool = False) -> np.ndarray:
    """Sum (or average) the table rows `indices` into `n_bags` bags; index i goes to bag `bag_of[i]`.
    Empty bags get row `default_index` (unweighted), or zeros."""
    work = _accumulator(table.dtype)
    rows = _table_rows(table, indices, "index").astype(work)
    if weights is not None:
        rows *= weights.astype(work)[:, None]
    sums = np.zeros((n_bags, rows.shape[1]), dtype=work)
    np.add.at(sums, bag_of, rows)
    counts = np.bincount(bag_of, minlength=n_bags)
    empty = counts == 0
    if default_index is not None and empty.any():
        sums[empty] = _table_rows(table, np.array([default_index]), "default_index")[0]
        counts[empty] = 1
    if table.dtype.kind != "f":
        sums = sums.astype(table.dtype).astype(np.int64)   # the CPU plugin sums in the table's type
    if mean:
        n = np.maximum(counts, 1)[:, None]
        if work.kind == "f":
            sums = sums / n.astype(work)
        else:  # integer division truncates toward zero
            sums = np.sign(sums) * (np.abs(sums) // n)
    with np.errstate(over="ignore"):
        return sums.astype(table.dtype).reshape((n_bags,) + table.shape[1:])


def _reduction(op: Op) -> str:
    return op.attrs.get("reduction") or "sum"


def _check_mean_weights(op: Op, has_weights: bool) -> None:
    if has_weights and _reduction(op) == "mean":
        raise ShapeError(f"{op.spec.type}: per_sample_weights work with reduction=sum only, not mean")


# ---------------------------------------------------------------- EmbeddingBagOffsets

@register("EmbeddingBagOffsetsSum", 3)
@register("EmbeddingBagOffsets", 15)
class EmbeddingBagOffsets(Op):
    """Bag b holds indices[offsets[b]:offsets[b+1]]; default_index -1 (or none) leaves empty bags 0."""

    def infer(self, inputs):
        table, indices, offsets = inputs[:3]
        _check_index_types(self.spec.type, [("indices", indices), ("offsets", offsets)]
                           + [("default_index", t) for t in inputs[3:4]])
        _check_rank(indices, 1, "indices")
        _check_rank(offsets, 1, "offsets")
        if len(inputs) > 3:
            _check_rank(inputs[3], 0, "default_index")
        if len(inputs) > 4:
            _check_weights(table, inputs[4], indices, 1)
        _check_mean_weights(self, len(inputs) > 4)
        bags = offsets.shape[0] if offsets.shape is not None else ANY
        return [_bags_shape(table, bags, f"{bags} bags (the length of offsets)")]

    def run(self, table, indices, offsets, default_index=None, weights=None):
        offs = offsets.astype(np.int64)
        n = indices.shape[0]
        if offs.size and (np.any(np.diff(offs) < 0) or offs[0] < 0 or offs[-1] >= n):
            raise ShapeError(f"offsets {offs.tolist()} must be non-decreasing and each below the number of "
                             f"indices ({n}), as OpenVINO requires")
        first = int(offs[0]) if offs.size else n     # indices before the first offset are in no bag
        bag_of = np.searchsorted(offs, np.arange(first, n), side="right") - 1
        default = _scalar(default_index)
        return embedding_bags(table, indices[first:], bag_of, offs.size, None if weights is None else weights[first:],
                              None if default == -1 else default, _reduction(self) == "mean")


# ---------------------------------------------------------------- EmbeddingBagPacked

@register("EmbeddingBagPackedSum", 3)
@register("EmbeddingBagPacked", 15)
class EmbeddingBagPacked(Op):
    """Bag b is row b of the 2-D indices."""

    def infer(self, inputs):
        table, indices = inputs[:2]
        _check_index_types(self.spec.type, [("indices", indices)])
        _check_rank(indices, 2, "indices")
        shape = indices.shape
        if len(inputs) > 2:
            shape = _check_weights(table, inputs[2], indices, 2)
        _check_mean_weights(self, len(inputs) > 2)
        bags = shape[0] if shape is not None else ANY
        return [_bags_shape(table, bags, f"{bags} bags (rows of indices)")]

    def run(self, table, indices, weights=None):
        bags, per_bag = indices.shape
        bag_of = np.repeat(np.arange(bags), per_bag)
        return embedding_bags(table, indices.reshape(-1), bag_of, bags,
                              None if weights is None else weights.reshape(-1), mean=_reduction(self) == "mean")


# ---------------------------------------------------------------- EmbeddingSegmentsSum

@register("EmbeddingSegmentsSum", 3)
class EmbeddingSegmentsSum(Op):
    """Index i goes to segment segment_ids[i] (in any order, each in [0, num_segments), as in
    OpenVINO's reference kernel); empty segments get row default_index (which must address a
    row) or zeros."""

    def infer(self, inputs):
        table, indices, segment_ids, num_segments = inputs[:4]
        _check_index_types(self.spec.type, [("indices", indices), ("segment_ids", segment_ids),
                                            ("num_segments", num_segments)]
                           + [("default_index", t) for t in inputs[4:5]])
        _check_rank(indices, 1, "indices")
        _check_rank(segment_ids, 1, "segment_ids")
        _check_same_shape(indices, segment_ids, "indices and segment_ids")
        _check_rank(num_segments, 0, "num_segments")
        if len(inputs) > 4:
            _check_rank(inputs[4], 0, "default_index")
        if len(inputs) > 5:
            _check_weights(table, inputs[5], indices, 1)
        count = _scalar(num_segments.value)
        segments = count if count is not None and count >= 0 else ANY
        return [_bags_shape(table, segments, f"{segments} segments (num_segments)")]

    def run(self, table, indices, segment_ids, num_segments, default_index=None, weights=None):
        count = _scalar(num_segments)
        if count < 0:
            raise ShapeError(f"num_segments must not be negative, got {count}")
        ids = segment_ids.astype(np.int64)
        bad = (ids < 0) | (ids >= count)
        if bad.any():
            raise ShapeError(f"segment id {int(ids[bad][0])} is outside [0, {count}) (num_segments = {count})")
        return embedding_bags(table, indices, ids, count, weights, _scalar(default_index))


# ---------------------------------------------------------------- SegmentMax

def _lowest(dtype: np.dtype):
    return np.finfo(dtype).min if dtype.kind == "f" else np.iinfo(dtype).min if dtype.kind in "iu" else False


@register("SegmentMax", 16)
class SegmentMax(Op):
    """Per segment (a run of equal sorted ids), the maximum of data's rows; an empty segment gets 0
    (fill_mode=zero) or the type's lowest value.  As in OpenVINO, the maximum starts from the
    lowest value and skips NaN (a segment of NaN or -inf gives the lowest value); f16 is computed
    in f32, so its lowest value is -inf."""

    def infer(self, inputs):
        data, segment_ids = inputs[:2]
        for name, t in zip(("segment_ids", "num_segments"), inputs[1:]):
            if t.etype is not etypes.dynamic and t.etype.name not in INDEX_TYPES:
                raise ShapeError(f"SegmentMax {name} must be i32 or i64, got {t.etype}")
        if data.rank == 0:
            raise ShapeError("SegmentMax data must have rank 1 or more, got a scalar")
        _check_rank(segment_ids, 1, "segment_ids")
        if data.shape is not None and segment_ids.shape is not None \
                and not dims_compatible(data.shape[0], segment_ids.shape[0]):
            raise ShapeError(f"segment_ids {format_shape(segment_ids.shape)} must have one id per row of data "
                             f"{format_shape(data.shape)}")
        ids = segment_ids.value
        if ids is not None:
            _check_sorted(ids)
        if len(inputs) > 2:
            _check_rank(inputs[2], 0, "num_segments")
        count = _scalar(inputs[2].value) if len(inputs) > 2 else None
        if count is not None and count >= 0:   # OpenVINO leaves the dim dynamic for -1 (and fails at run time)
            segments, note = count, f"num_segments = {count}"
        elif len(inputs) == 2 and ids is not None:
            segments = int(ids.max()) + 1 if ids.size else 0
            note = f"{segments} = largest segment id + 1"
        else:
            segments, note = ANY, None
        if data.shape is None:
            return [TensorType(None, data.etype)]
        return [TensorType((segments,) + tuple(data.shape[1:]), data.etype, notes={0: note} if note else None)]

    def run(self, data, segment_ids, num_segments=None):
        ids = segment_ids.astype(np.int64)
        _check_sorted(ids)
        if ids.size and ids[0] < 0:
            raise ShapeError(f"segment ids must not be negative, got {int(ids[0])}")
        count = _scalar(num_segments) if num_segments is not None else (int(ids[-1]) + 1 if ids.size else 0)
        if count < 0:
            raise ShapeError(f"num_segments must not be negative, got {count}")
        work = np.dtype(np.float32) if data.dtype == np.float16 else data.dtype
        lowest = _lowest(work)
        fill = lowest if self.attrs.fill_mode == "lowest" else 0
        out = np.full((count,) + data.shape[1:], fill, dtype=work)
        inside = ids < count            # rows past the last segment are dropped
        rows, ids = data[inside].astype(work), ids[inside]
        if ids.size:
            starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
            out[ids[starts]] = np.fmax(np.fmax.reduceat(rows, starts, axis=0), lowest)
        with np.errstate(over="ignore"):
            return out.astype(data.dtype)


def _check_sorted(ids: np.ndarray) -> None:
    if np.any(np.diff(ids.reshape(-1)) < 0):
        raise ShapeError(f"segment_ids must be sorted, got {np.asarray(ids).reshape(-1).tolist()[:16]}")


# ---------------------------------------------------------------- SparseFillEmptyRows

@register("SparseFillEmptyRows", 16)
class SparseFillEmptyRows(Op):
    """A 2-D sparse tensor (indices [M, 2], values [M], dense_shape [2]) with an entry
    (row, 0) = default_value added for every row that has none; entries come out sorted by
    (row, column)."""

    def infer(self, inputs):
        values, dense_shape, indices, default = inputs
        _check_index_types("SparseFillEmptyRows", [("dense_shape", dense_shape), ("indices", indices)])
        index_type = indices.etype if indices.etype is not etypes.dynamic else dense_shape.etype
        _check_rank(values, 1, "values")
        if dense_shape.shape is not None and (len(dense_shape.shape) != 1
                                              or not dims_compatible(dense_shape.shape[0], 2)):
            raise ShapeError(f"dense_shape must be 1-D with 2 elements (only 2-D sparse tensors), "
                             f"got {format_shape(dense_shape.shape)}")
        if indices.shape is not None and (
                len(indices.shape) != 2 or not dims_compatible(indices.shape[1], 2)
                or (values.shape is not None and not dims_compatible(indices.shape[0], values.shape[0]))):
            raise ShapeError(f"indices {format_shape(indices.shape)} must be [M, 2] with M the length of values "
                             f"{format_shape(values.shape)}")
        _check_rank(default, 0, "default_value")
        rows = entries = value_entries = ANY
        index_notes = value_notes = None
        if dense_shape.value is not None:
            n_rows, n_cols = (int(v) for v in dense_shape.value.reshape(-1)[:2])
            rows = n_rows
            if indices.value is not None:   # then its shape is static too
                filled = int(_empty_rows(indices.value.reshape(-1, 2).astype(np.int64), n_rows, n_cols).sum())
                n_values = values.shape[0] if values.shape is not None else ANY
                entries, value_entries = indices.shape[0] + filled, dim_add(n_values, filled)
                index_notes = {0: f"{indices.shape[0]} entries + {filled} empty rows"}
                value_notes = {0: f"{n_values} values + {filled} empty rows"}
        return [TensorType((entries, 2), index_type, notes=index_notes),
                TensorType((value_entries,), values.etype, notes=value_notes),
                TensorType((rows,), etypes.boolean)]

    def run(self, values, dense_shape, indices, default_value):
        n_rows, n_cols = (int(v) for v in dense_shape.reshape(-1)[:2])
        idx = indices.reshape(-1, 2).astype(np.int64)
        if values.shape != (idx.shape[0],):
            raise ShapeError(f"values {list(values.shape)} must hold one value per row of indices {list(indices.shape)}")
        empty = _empty_rows(idx, n_rows, n_cols)
        fill_rows = np.flatnonzero(empty)
        all_idx = np.concatenate([idx, np.stack([fill_rows, np.zeros_like(fill_rows)], axis=1)])
        all_values = np.concatenate([values, np.full(fill_rows.size, default_value, dtype=values.dtype)])
        order = np.lexsort((all_idx[:, 1], all_idx[:, 0]))    # stable: repeated positions keep input order
        return all_idx[order].astype(indices.dtype), all_values[order], empty


def _empty_rows(idx: np.ndarray, n_rows: int, n_cols: int) -> np.ndarray:
    """Which of the `n_rows` rows no entry of `idx` ([M, 2]) addresses; every entry must be inside."""
    for axis, (what, limit) in enumerate((("row", n_rows), ("column", n_cols))):
        bad = (idx[:, axis] < 0) | (idx[:, axis] >= limit)
        if bad.any():
            raise ShapeError(f"sparse index {idx[bad][0].tolist()} is outside the dense shape [{n_rows}, {n_cols}] "
                             f"({what} {int(idx[bad][0, axis])} not in [0, {limit - 1}])")
    empty = np.ones(max(n_rows, 0), dtype=bool)
    empty[idx[:, 0]] = False
    return empty
