"""Gather and scatter ops: Gather, GatherElements, GatherND, ScatterUpdate,
ScatterElementsUpdate, ScatterNDUpdate; and OneHot, the inverse of an index lookup.

Every kernel reduces its op to one of two NumPy moves on a flattened view:
a gather is fancy indexing of rows, a scatter writes (or reduces into) rows
of a 2-D `(positions, slice)` view of the data.  Index tensors are read as
int64; negative indices count from the end wherever OpenVINO's reference does.

Shape functions follow OpenVINO's shape inference, including what it leaves
dynamic: Gather's output dims are exact whenever the axis is a known constant,
so ShapeOf -> Gather -> Concat -> Reshape folds at load.
"""
from __future__ import annotations

import numpy as np

from .. import etypes
from ..errors import ShapeError
from ..registry import Op, TensorType, register
from ..shapes import ANY, DimLike, Shape, dim_mul, dims_compatible, format_shape, normalize_axis
from .arithmetic import merge_etypes
from .common import merge_dims

# What an index or axis input may hold, as ElementType.kind values.
INTEGER = ("int", "uint")
I32_I64 = ("i32", "i64")
NUMERIC = ("int", "uint", "float")
INTEGER_OR_BOOL = INTEGER + ("bool",)
ANY_TYPE = NUMERIC + ("bool",)


# ---------------------------------------------------------------- shared helpers: types and axes

def _check_etype(t: TensorType, what: str, allowed: tuple[str, ...]) -> None:
    """`allowed` holds ElementType kinds, or the names i32 and i64."""
    if t.etype is etypes.dynamic or t.etype.kind in allowed or t.etype.name in allowed:
        return
    want = {INTEGER: "an integer", I32_I64: "an i32 or i64", NUMERIC: "a numeric",
            INTEGER_OR_BOOL: "an integer or boolean", ANY_TYPE: "a numeric or boolean"}[allowed]
    raise ShapeError(f"{what} must be {want} tensor, got {t.etype}")


def _data_etype(data: TensorType, updates: TensorType) -> etypes.ElementType:
    try:
        return merge_etypes(data.etype, updates.etype)
    except ShapeError:
        raise ShapeError(f"updates have element type {updates.etype}, data has {data.etype}; "
                         f"they must be the same") from None


def _check_axis_shape(t: TensorType, *, any_1d: bool = False) -> None:
    """An axis input is a scalar or holds one value (`any_1d`: any 1-D length passes, as
    ScatterElementsUpdate's shape inference allows; its first value counts)."""
    shape = t.shape
    if shape is None or len(shape) == 0:
        return
    if len(shape) == 1 and (any_1d or dims_compatible(shape[0], 1)):
        return
    raise ShapeError(f"the axis input must be a scalar or hold one value, got shape {format_shape(shape)}")


def _first_int(values, what: str) -> int:
    """The value of a scalar-or-1-element input (OpenVINO reads the first; floats truncate)."""
    flat = np.asarray(values).reshape(-1)
    if flat.size == 0:
        raise ShapeError(f"{what} is empty")
    return int(np.trunc(flat[0])) if flat.dtype.kind == "f" else int(flat[0])


def _known_axis(t: TensorType, what: str) -> int | None:
    """The value of an axis input known at load (a Const or folded), else None."""
    return None if t.value is None else _first_int(t.value, what)


def _axis_of(axis: np.ndarray, rank: int, what: str) -> int:
    return normalize_axis(_first_int(axis, what), rank, what)


# ---------------------------------------------------------------- shared helpers: kernels

def _as_index(indices: np.ndarray) -> np.ndarray:
    """Index values as int64 (floats, which only Gather-1 takes, truncate toward zero)."""
    return np.asarray(indices).astype(np.int64, copy=False)


def _wrapped(indices: np.ndarray, size) -> np.ndarray:
    """Negative indices count from the end of a dim of `size` (an int or per-column sizes)."""
    idx = _as_index(indices)
    return np.where(idx < 0, idx + np.asarray(size, dtype=np.int64), idx)


def _check_range(idx: np.ndarray, size, what: str) -> None:
    """Every index must address an element: OpenVINO stops on the first one that does not."""
    size = np.asarray(size, dtype=np.int64)
    bad = (idx < 0) | (idx >= size)
    if bad.any():
        pos = np.argwhere(bad)[0]
        limit = int(np.broadcast_to(size, idx.shape)[tuple(pos)])
        raise ShapeError(f"{what} at position {tuple(int(p) for p in pos)} addresses element "
                         f"{int(idx[tuple(pos)])} of a dim of size {limit}")


def _row_major_strides(dims: tuple[int, ...]) -> np.ndarray:
    strides = np.ones(len(dims), dtype=np.int64)
    for i in range(len(dims) - 2, -1, -1):
        strides[i] = strides[i + 1] * dims[i + 1]
    return strides


def _size(dims) -> int:
    return int(np.prod(dims, dtype=np.int64))


def _rows(x: np.ndarray, lead: int) -> np.ndarray:
    """`x` as (product of its first `lead` dims, product of the rest); works for empty tensors."""
    return x.reshape(_size(x.shape[:lead]), _size(x.shape[lead:]))


def _last_writes(targets: np.ndarray) -> np.ndarray:
    """Positions in `targets` of the last write to each distinct target.

    OpenVINO applies updates in order, so for a repeated index the last update
    wins; NumPy's fancy assignment does not promise an order, so keep only those.
    """
    first_from_end = np.unique(targets[::-1], return_index=True)[1]
    return targets.size - 1 - first_from_end


# fmin/fmax skip NaN updates, as std::min/std::max(accumulator, update) do; a NaN already in
# the data stays (restored after the reduction).
_REDUCE = {"sum": np.add, "sub": np.subtract, "prod": np.multiply, "min": np.fmin, "max": np.fmax}
# For booleans OpenVINO's sum, sub and prod are logical or, xor and and.
_REDUCE_BOOL = {"sum": np.logical_or, "sub": np.logical_xor, "prod": np.logical_and,
                "min": np.logical_and, "max": np.logical_or}


def _neutral(reduction: str, dtype: np.dtype):
    """The start value of a reduction that leaves out the data value (use_init_val=false)."""
    if reduction in ("sum", "mean"):
        return 0
    if reduction == "prod":
        return 1
    if dtype == np.bool_:
        return reduction == "min"
    info = np.finfo(dtype) if dtype.kind == "f" else np.iinfo(dtype)
    return info.min if reduction == "max" else info.max


def scatter_rows(rows: np.ndarray, targets: np.ndarray, updates: np.ndarray, reduction: str = "none",
                 use_init_val: bool = True) -> np.ndarray:
    """A copy of `rows` (2-D) with row `targets[i]` replaced by, or reduced with, `updates[i]`.

    Repeated targets reduce in order, as OpenVINO's reference loops do (ufunc.at
    is unbuffered and ordered).  f16 accumulates in f32 like the CPU plugin.
    """
    if reduction == "none":
        out = rows.copy()
        keep = _last_writes(targets)
        out[targets[keep]] = updates[keep]
        return out
    work = rows.astype(np.float32) if rows.dtype == np.float16 else rows.copy()
    upd = updates.astype(work.dtype, copy=False)
    if not use_init_val:
        work[targets] = _neutral(reduction, rows.dtype)
    with np.errstate(all="ignore"):
        if reduction == "mean":
            np.add.at(work, targets, upd)
            hit = np.unique(targets)
            counts = (np.bincount(targets, minlength=len(work))[hit] + int(use_init_val))[:, None]
            if work.dtype.kind == "f":
                work[hit] = work[hit] / counts
            else:  # OpenVINO rounds an integer mean down (toward -inf)
                work[hit] = np.floor(work[hit].astype(np.float64) / counts).astype(work.dtype)
        else:
            stuck = np.isnan(work) if work.dtype.kind == "f" and reduction in ("min", "max") else None
            ufunc = (_REDUCE_BOOL if work.dtype == np.bool_ else _REDUCE)[reduction]
            ufunc.at(work, targets, upd)
            if stuck is not None and stuck.any():
                work[stuck] = np.nan
    return work.astype(rows.dtype, copy=False)


# ---------------------------------------------------------------- Gather

def gather_shape(data: Shape, indices: Shape, axis: int | None, batch_dims: int) -> Shape:
    """data[:axis] + indices[batch_dims:] + data[axis + 1:], batch dims merged; `axis`, `batch_dims`
    normalized (axis None: unknown, so only the rank and the batch dims are known)."""
    if data is None or indices is None:
        return None
    out: list[DimLike] = []
    for i in range(batch_dims):
        out.append(merge_dims(data[i], indices[i], f"data {format_shape(data)} and indices {format_shape(indices)} "
                                                   f"differ in batch dim {i} (batch_dims={batch_dims})"))
    rank = len(data) + len(indices) - 1 - batch_dims
    if axis is None:
        return tuple(out) + (ANY,) * (rank - batch_dims)
    return tuple(out) + tuple(data[batch_dims:axis]) + tuple(indices[batch_dims:]) + tuple(data[axis + 1:])


@register("Gather", 1, 7, 8)
class Gather(Op):
    """Gather-8 counts negative indices from the end; so does OpenVINO's reference for
    Gather-1/7 (see specs/errata/indexing.md).  Indices outside [-n, n-1] give 0."""

    @property
    def batch_dims(self) -> int:
        return self.attrs.get("batch_dims") or 0

    def infer(self, inputs):
        data, indices, axis_t = inputs
        loose = self.version == 1  # Gather-1 reads indices of any type, an axis of any numeric type
        _check_etype(indices, "Gather indices", ANY_TYPE if loose else INTEGER)
        _check_etype(axis_t, "Gather axis", NUMERIC if loose else INTEGER)
        _check_axis_shape(axis_t)
        if data.rank == 0:
            raise ShapeError("Gather data is a scalar; it needs rank 1 or more")
        batch_dims = self.batch_dims
        if indices.rank is not None:
            if not -indices.rank <= batch_dims <= indices.rank:
                raise ShapeError(f"batch_dims {batch_dims} is out of range for indices "
                                 f"{format_shape(indices.shape)} of rank {indices.rank}")
            if batch_dims < 0:
                batch_dims += indices.rank
        axis = _known_axis(axis_t, "Gather axis")
        if axis is not None and data.rank is not None:
            axis = normalize_axis(axis, data.rank, "Gather axis")
        if axis is not None and axis >= 0 and batch_dims > axis:
            raise ShapeError(f"batch_dims {batch_dims} must not exceed the axis {axis}")
        if data.rank is not None and batch_dims >= data.rank:
            raise ShapeError(f"batch_dims {batch_dims} needs data of rank above {batch_dims}, "
                             f"got {format_shape(data.shape)}")
        if batch_dims < 0:  # relative to an indices rank not known yet
            return [data.like(None)]
        return [data.like(gather_shape(data.shape, indices.shape, axis, batch_dims))]

    def quick_shapes(self, args):
        data, indices, axis = args
        if self.batch_dims or data.ndim == 0 or axis.size != 1 or axis.dtype.kind not in "iu":
            return None
        try:
            a = normalize_axis(int(axis.reshape(-1)[0]), data.ndim)
        except ShapeError:
            return None
        return (data.shape[:a] + indices.shape + data.shape[a + 1:],), (2,)

    def bind(self, step):
        """No batch dims and a constant axis: np.take, which gives the same wherever every index
        addresses an element (negative ones from the end); where one does not (0 there) or the
        indices are floats (Gather-1 truncates them), `run`."""
        data, _, axis = step.inputs
        if self.run_replaced() or self.batch_dims != 0 or axis.value is None or data.rank is None \
                or data.rank == 0:
            return None
        along = _axis_of(axis.value, data.rank, "Gather axis")
        run = self.run

        def gather(x, indices, axis_input):
            if indices.dtype.kind in "iu":
                try:
                    return np.take(x, indices, axis=along)
                except IndexError:
                    pass
            return run(x, indices, axis_input)
        return gather

    def run(self, data, indices, axis):
        axis = _axis_of(axis, data.ndim, "Gather axis")
        batch_dims = self.batch_dims + (indices.ndim if self.batch_dims < 0 else 0)
        out_shape = gather_shape(data.shape, indices.shape, axis, batch_dims)
        n = data.shape[axis]
        idx = _wrapped(indices, n)
        valid = (idx >= 0) & (idx < n)
        if n == 0 or not valid.any():
            return np.zeros(out_shape, dtype=data.dtype)
        # (batch, outer, axis, inner) by (batch, gathered): one fancy index per batch row.
        b, outer = _size(data.shape[:batch_dims]), _size(data.shape[batch_dims:axis])
        cube = data.reshape(b, outer, n, _size(data.shape[axis + 1:]))
        picks = np.where(valid, idx, 0).reshape(b, 1, -1)
        out = cube[np.arange(b)[:, None, None], np.arange(outer)[None, :, None], picks]
        if not valid.all():
            out = np.where(valid.reshape(b, 1, -1, 1), out, np.zeros((), data.dtype))
        return out.reshape(out_shape)


# ---------------------------------------------------------------- GatherElements

@register("GatherElements", 6)
class GatherElements(Op):
    def infer(self, inputs):
        data, indices = inputs
        _check_etype(indices, "GatherElements indices", I32_I64)
        for name, t in (("data", data), ("indices", indices)):
            if t.rank == 0:
                raise ShapeError(f"GatherElements {name} is a scalar; it needs rank 1 or more")
        if data.shape is None:
            return [data.like(indices.shape)]
        axis = normalize_axis(self.attrs.axis, data.rank, "GatherElements axis")
        if indices.shape is None:
            return [data.like(data.shape[:axis] + (ANY,) + data.shape[axis + 1:])]
        if data.rank != indices.rank:
            raise ShapeError(f"data {format_shape(data.shape)} and indices {format_shape(indices.shape)} "
                             f"must have the same rank")
        out = [indices.shape[i] if i == axis else
               merge_dims(d, indices.shape[i], f"data {format_shape(data.shape)} and indices "
                                               f"{format_shape(indices.shape)} differ in dim {i}, which is not "
                                               f"the axis {axis}")
               for i, d in enumerate(data.shape)]
        return [data.like(tuple(out))]

    def run(self, data, indices):
        axis = normalize_axis(self.attrs.axis, data.ndim, "GatherElements axis")
        if indices.ndim != data.ndim or any(i != d for k, (i, d) in enumerate(zip(indices.shape, data.shape))
                                            if k != axis):
            raise ShapeError(f"indices {format_shape(indices.shape)} do not fit data {format_shape(data.shape)} "
                             f"outside the axis {axis}")
        size = data.shape[axis]
        idx = _as_index(indices)
        if not idx.size or idx.min() < 0 or idx.max() >= size:     # (two passes where wrapping took four)
            idx = _wrapped(indices, size)
            _check_range(idx, size, "GatherElements index")
        if axis == data.ndim - 1 and data.size and data.flags.c_contiguous:
            # the last axis: one flat gather, rows' starts added (take_along_axis broadcasts an index
            # array per dim: 16 Mi elements 74 -> 46 ms)
            starts = np.arange(0, data.size, size, dtype=np.int64).reshape(data.shape[:-1] + (1,))
            return np.take(data.reshape(-1), idx + starts)
        return np.take_along_axis(data, idx, axis)


# ---------------------------------------------------------------- GatherND

def gather_nd_shape(data: Shape, indices: Shape, batch_dims: int) -> Shape:
    """batch dims + indices[batch_dims:-1] + data[batch_dims + k:] for index tuples of length k (GatherND-8)."""
    if data is not None:
        if len(data) == 0:
            raise ShapeError("GatherND data is a scalar; it needs rank 1 or more")
        if batch_dims >= len(data):
            raise ShapeError(f"batch_dims {batch_dims} needs data of rank above {batch_dims}, "
                             f"got {format_shape(data)}")
    if indices is not None:
        if len(indices) == 0:
            raise ShapeError("GatherND indices are a scalar; they need rank 1 or more")
        if batch_dims >= len(indices):
            raise ShapeError(f"batch_dims {batch_dims} needs indices of rank above {batch_dims}, "
                             f"got {format_shape(indices)}")
    if data is None or indices is None or not isinstance(indices[-1], int):
        return None
    k = indices[-1]
    if batch_dims + k > len(data):
        raise ShapeError(f"index tuples of length {k} (last dim of indices {format_shape(indices)}) "
                         f"plus {batch_dims} batch dims exceed the rank of data {format_shape(data)}")
    batch = [merge_dims(data[i], indices[i], f"data {format_shape(data)} and indices {format_shape(indices)} "
                                             f"differ in batch dim {i} (batch_dims={batch_dims})")
             for i in range(batch_dims)]
    return tuple(batch) + tuple(indices[batch_dims:-1]) + tuple(data[batch_dims + k:])


@register("GatherND", 5, 8)
class GatherND(Op):
    """GatherND-5 fuses the batch dims into one output dim; GatherND-8 keeps them."""

    def infer(self, inputs):
        data, indices = inputs
        _check_etype(indices, "GatherND indices", INTEGER)
        b = self.attrs.batch_dims
        shape, notes = gather_nd_shape(data.shape, indices.shape, b), None
        if shape is not None and self.version == 5 and b > 1:
            fused: DimLike = 1
            for d in shape[:b]:
                fused = dim_mul(fused, d)
            notes = {0: " * ".join(str(d) for d in shape[:b]) + f" (the {b} batch dims fused)"}
            shape = (fused,) + shape[b:]
        return [TensorType(shape, data.etype, notes=notes)]

    def run(self, data, indices):
        b = self.attrs.batch_dims
        if data.shape[:b] != indices.shape[:b]:
            raise ShapeError(f"data {format_shape(data.shape)} and indices {format_shape(indices.shape)} "
                             f"differ in the {b} batch dims")
        shape = gather_nd_shape(data.shape, indices.shape, b)
        k = indices.shape[-1]
        tuple_dims = data.shape[b:b + k]
        batch = _size(data.shape[:b])
        idx = _wrapped(indices, tuple_dims)
        _check_range(idx, tuple_dims, "GatherND index")
        idx = idx.reshape(batch, _size(indices.shape[b:-1]), k)
        rows = data.reshape(batch, _size(tuple_dims), _size(data.shape[b + k:]))
        out = rows[np.arange(batch)[:, None], idx @ _row_major_strides(tuple_dims)]
        if self.version == 5 and b > 1:
            shape = (batch,) + shape[b:]
        return out.reshape(shape)


# ---------------------------------------------------------------- ScatterUpdate

@register("ScatterUpdate", 3)
class ScatterUpdate(Op):
    """data[..., indices[j...], ...] = updates[..., j..., ...] along `axis`; the last of repeated
    indices wins.  Negative indices are an error, as in OpenVINO."""

    def infer(self, inputs):
        data, indices, updates, axis_t = inputs
        _check_etype(indices, "ScatterUpdate indices", INTEGER)
        _check_etype(axis_t, "ScatterUpdate axis", INTEGER)
        etype = _data_etype(data, updates)
        _check_axis_shape(axis_t)
        ranks = (data.rank, indices.rank, updates.rank)
        if None not in ranks and updates.rank != indices.rank + data.rank - 1:
            raise ShapeError(f"updates {format_shape(updates.shape)} must have rank {indices.rank + data.rank - 1} "
                             f"(rank of indices {format_shape(indices.shape)} + rank of data "
                             f"{format_shape(data.shape)} - 1)")
        axis = _known_axis(axis_t, "ScatterUpdate axis")
        if data.rank is not None and axis is not None:
            axis = normalize_axis(axis, data.rank, "ScatterUpdate axis")
            if None not in ranks:
                expected = data.shape[:axis] + indices.shape + data.shape[axis + 1:]
                if not all(dims_compatible(u, e) for u, e in zip(updates.shape, expected)):
                    raise ShapeError(f"updates {format_shape(updates.shape)} must have shape "
                                     f"{format_shape(expected)} (data dims before axis {axis}, indices "
                                     f"dims, data dims after it)")
        return [TensorType(data.shape, etype)]

    def run(self, data, indices, updates, axis):
        axis = _axis_of(axis, data.ndim, "ScatterUpdate axis")
        expected = data.shape[:axis] + indices.shape + data.shape[axis + 1:]
        if updates.shape != expected:
            raise ShapeError(f"updates {format_shape(updates.shape)} must have shape {format_shape(expected)}")
        idx = _as_index(indices)
        _check_range(idx, data.shape[axis], "ScatterUpdate index")
        idx = idx.reshape(-1)
        # Rows are the slices along the axis; the indices' dims of updates move to the front to match.
        moved = np.moveaxis(data, axis, 0)
        rows = _rows(moved, 1)
        j = indices.ndim
        upd = np.moveaxis(updates, list(range(axis, axis + j)), list(range(j))).reshape(idx.size, rows.shape[1])
        out = scatter_rows(rows, idx, upd)
        return np.moveaxis(out.reshape(moved.shape), 0, axis)


# ---------------------------------------------------------------- ScatterElementsUpdate

@register("ScatterElementsUpdate", 3, 12)
class ScatterElementsUpdate(Op):
    """output[..., indices[p], ...] = updates[p] with the index replacing coordinate `axis` of
    position p; v12 reduces repeated positions (sum, prod, min, max, mean)."""

    @property
    def reduction(self) -> str:
        return self.attrs.get("reduction") or "none"

    def infer(self, inputs):
        data, indices, updates, axis_t = inputs
        _check_etype(indices, "ScatterElementsUpdate indices", INTEGER_OR_BOOL)
        _check_etype(axis_t, "ScatterElementsUpdate axis", INTEGER)
        etype = _data_etype(data, updates)
        if self.reduction == "mean" and etype is etypes.boolean:
            raise ShapeError("reduction mean is not defined for boolean data")
        _check_axis_shape(axis_t, any_1d=True)
        if data.rank == 0:  # OpenVINO's shape inference lets it through; its reference then crashes
            raise ShapeError("ScatterElementsUpdate data is a scalar; it needs rank 1 or more")
        if None not in (data.rank, indices.rank) and data.rank != indices.rank:
            raise ShapeError(f"indices {format_shape(indices.shape)} must have the rank of data "
                             f"{format_shape(data.shape)}")
        if indices.shape is not None and updates.shape is not None and not (
                len(indices.shape) == len(updates.shape)
                and all(dims_compatible(i, u) for i, u in zip(indices.shape, updates.shape))):
            raise ShapeError(f"updates {format_shape(updates.shape)} must have the shape of indices "
                             f"{format_shape(indices.shape)}")
        axis = _known_axis(axis_t, "ScatterElementsUpdate axis")
        if data.rank is not None and axis is not None:
            normalize_axis(axis, data.rank, "ScatterElementsUpdate axis")
        return [TensorType(data.shape, etype)]

    def run(self, data, indices, updates, axis):
        axis = _axis_of(axis, data.ndim, "ScatterElementsUpdate axis")
        if indices.shape != updates.shape or indices.ndim != data.ndim:
            raise ShapeError(f"indices {format_shape(indices.shape)} and updates {format_shape(updates.shape)} "
                             f"must have one shape, of the rank of data {format_shape(data.shape)}")
        if any(i > d for k, (i, d) in enumerate(zip(indices.shape, data.shape)) if k != axis):
            raise ShapeError(f"indices {format_shape(indices.shape)} reach outside data {format_shape(data.shape)}")
        n = data.shape[axis]
        idx = _wrapped(indices, n)
        _check_range(idx, n, "ScatterElementsUpdate index")
        coords = list(np.ogrid[tuple(slice(0, s) for s in indices.shape)])
        coords[axis] = idx
        targets = np.ravel_multi_index(np.broadcast_arrays(*coords), data.shape).reshape(-1)
        out = scatter_rows(data.reshape(-1, 1), targets, updates.reshape(-1, 1), self.reduction,
                           self.attrs.get("use_init_val", True))
        return out.reshape(data.shape)


# ---------------------------------------------------------------- ScatterNDUpdate

@register("ScatterNDUpdate", 4, 15)
class ScatterNDUpdate(Op):
    """Each index tuple (last dim of indices) addresses an element or a slice of data;
    v15 reduces repeated positions (sum, sub, prod, min, max)."""

    def infer(self, inputs):
        data, indices, updates = inputs
        _check_etype(indices, "ScatterNDUpdate indices", I32_I64)
        etype = _data_etype(data, updates)
        if data.rank == 0 or indices.rank == 0:
            raise ShapeError(f"data {format_shape(data.shape)} and indices {format_shape(indices.shape)} "
                             f"need rank 1 or more")
        if data.shape is None or indices.shape is None or not isinstance(indices.shape[-1], int):
            return [TensorType(data.shape, etype)]
        k = indices.shape[-1]
        if k > data.rank:
            raise ShapeError(f"index tuples of length {k} (last dim of indices {format_shape(indices.shape)}) "
                             f"exceed the rank of data {format_shape(data.shape)}")
        if updates.shape is not None:
            expected = indices.shape[:-1] + data.shape[k:]
            # A single element may come as a 1-element tensor instead of a scalar.
            if len(expected) == 0 and len(updates.shape) != 0:
                return [TensorType(data.shape, etype)]
            if len(updates.shape) != len(expected) or not all(
                    dims_compatible(u, e) for u, e in zip(updates.shape, expected)):
                raise ShapeError(f"updates {format_shape(updates.shape)} must have shape {format_shape(expected)} "
                                 f"(indices dims but the last, then data dims from {k})")
        return [TensorType(data.shape, etype)]

    def run(self, data, indices, updates):
        k = indices.shape[-1]
        tuple_dims = data.shape[:k]
        idx = _wrapped(indices, tuple_dims)
        _check_range(idx, tuple_dims, "ScatterNDUpdate index")
        idx = idx.reshape(_size(indices.shape[:-1]), k)
        rows = _rows(data, k)
        if updates.size != idx.shape[0] * rows.shape[1]:
            raise ShapeError(f"updates {format_shape(updates.shape)} do not fit indices "
                             f"{format_shape(indices.shape)} and data {format_shape(data.shape)}")
        out = scatter_rows(rows, idx @ _row_major_strides(tuple_dims), updates.reshape(idx.shape[0], rows.shape[1]),
                           self.attrs.get("reduction") or "none")
        return out.reshape(data.shape)


# ---------------------------------------------------------------- OneHot

@register("OneHot", 1, 16)
class OneHot(Op):
    """on_value where the position along the new `axis` equals the index, off_value elsewhere.
    An index outside [0, depth) gives off_value all along the axis; OneHot-16 with
    negative_indices_mode=normalize first counts a negative index from the end (index + depth)."""

    def infer(self, inputs):
        indices, depth, on, off = inputs
        _check_etype(indices, "OneHot indices", INTEGER)
        _check_etype(depth, "OneHot depth", INTEGER)
        for name, t in (("depth", depth), ("on_value", on), ("off_value", off)):
            if t.rank not in (None, 0):
                raise ShapeError(f"OneHot {name} must be a scalar, got {format_shape(t.shape)}")
        try:
            etype = merge_etypes(on.etype, off.etype)
        except ShapeError:
            raise ShapeError(f"on_value ({on.etype}) and off_value ({off.etype}) must have one element type") from None
        if indices.shape is None:
            return [TensorType(None, etype)]
        axis = normalize_axis(self.attrs.axis, indices.rank + 1, "OneHot axis")
        size = None if depth.value is None else _one_hot_depth(depth.value)
        shape = indices.shape[:axis] + (ANY if size is None else size,) + indices.shape[axis:]
        return [TensorType(shape, etype, notes=None if size is None else {axis: f"depth = {size}"})]

    def run(self, indices, depth, on_value, off_value):
        size = _one_hot_depth(depth)
        axis = normalize_axis(self.attrs.axis, indices.ndim + 1, "OneHot axis")
        idx = _as_index(indices)
        if self.attrs.get("negative_indices_mode") == "normalize":
            idx = np.where(idx < 0, idx + size, idx)
        # Positions along the new axis, shaped to broadcast against the indices with that axis
        # inserted; an index outside [0, depth) matches none of them.
        positions = np.arange(size).reshape((size,) + (1,) * (indices.ndim - axis))
        hit = np.expand_dims(idx, axis) == positions
        return np.where(hit, on_value, off_value).astype(on_value.dtype, copy=False)


def _one_hot_depth(depth) -> int:
    size = _first_int(depth, "OneHot depth")
    if size < 0:
        raise ShapeError(f"OneHot depth must not be negative, got {size}")
    return size
