"""Helpers shared by several op families."""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

import numpy as np

from ..etypes import ElementType
from ..errors import ShapeError
from ..shapes import normalize_axis

_INT32_MIN = -(1 << 31)
_INT64_MIN = -(1 << 63)


_CONSTANTS: dict[tuple, np.ndarray] = {}


def typed_constant(value, dtype: np.dtype, length: int | None = None) -> np.ndarray:
    """A read-only 0-d array of `dtype` (a row of `length` copies, if given): a ufunc takes it in a
    fraction of the time it spends converting a Python or NumPy scalar, which is most of the cost
    on small tensors."""
    key = (value, dtype, length)
    found = _CONSTANTS.get(key)
    if found is None:
        found = np.full(() if length is None else length, value, dtype)
        found.flags.writeable = False
        _CONSTANTS[key] = found
    return found


# NumPy's maximum / minimum against a scalar run a loop 4x slower than against a contiguous row
# (numpy 2.4, x86-64); a 64 KiB row of the scalar, broadcast, takes the fast loop.
_ROW = 1 << 14


@lru_cache(maxsize=None)
def scalar_extremum(ufunc, value, dtype: np.dtype):
    """`fn(x, out)`: `ufunc(x, value, out=out)` for np.maximum / np.minimum on `dtype` data, the
    same result, faster (its constants made once: looking them up was a third of a small call)."""
    scalar, row = typed_constant(value, dtype), typed_constant(value, dtype, _ROW)

    def apply(x: np.ndarray, out: np.ndarray) -> np.ndarray:
        if x.size < 2 * _ROW or not (x.flags.c_contiguous and out.flags.c_contiguous) \
                or x.dtype != dtype or out.dtype != dtype:
            return ufunc(x, scalar, out=out)
        flat_x, flat_out = x.reshape(-1), out.reshape(-1)
        body = x.size // _ROW * _ROW
        ufunc(flat_x[:body].reshape(-1, _ROW), row, out=flat_out[:body].reshape(-1, _ROW))
        ufunc(flat_x[body:], scalar, out=flat_out[body:])
        return out
    return apply


def convert_array(x: np.ndarray, dst: ElementType) -> np.ndarray:
    """Convert as OpenVINO's reference does.

    float -> integer truncates toward zero; a value outside int32 (or NaN)
    becomes INT32_MIN before narrower types keep its low bits, as the x86
    conversion OpenVINO compiles to does.  64-bit targets go through int64 the
    same way.  integer -> narrower integer wraps.
    """
    carrier = dst.carrier
    if x.dtype == carrier:
        return x
    if x.dtype.kind == "f" and dst.is_integral:
        t = np.trunc(x.astype(np.float64))
        wide = dst.bits > 32
        limit = float(1 << 63) if wide else float(1 << 31)
        bad = ~((t >= -limit) & (t < limit))
        t = np.where(bad, _INT64_MIN if wide else _INT32_MIN, t).astype(np.int64)
        return t.astype(carrier)
    if x.dtype == np.float16 and carrier == np.float32 and x.size >= _PARALLEL_WIDENING:
        return _widen_in_threads(x, carrier)
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(carrier)


# NumPy converts f16 one element at a time (4-5 ns each, no SIMD), and f16-compressed weights are
# all decompressed at load: 57 ms for ResNet-18.  The cast releases the GIL, so from 256 Ki elements
# on, halves on two cores take 0.55 of the time.
_PARALLEL_WIDENING = 1 << 18
_pool = None


def _forget_pool() -> None:
    """In a forked child: the parent's pool has no threads there, and would never run a part."""
    global _pool
    _pool = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _widen_in_threads(x: np.ndarray, carrier: np.dtype) -> np.ndarray:
    global _pool
    workers = min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 4)
    if workers < 2:
        return x.astype(carrier)
    if _pool is None:
        _pool = ThreadPoolExecutor(workers - 1, thread_name_prefix="irrun-widen")
    out = np.empty(x.shape, carrier)
    flat_x, flat_out = x.reshape(-1), out.reshape(-1)    # (a copy of x if it is not contiguous)
    bounds = [flat_x.size * k // workers for k in range(workers + 1)]
    parts = [(flat_out[a:b], flat_x[a:b]) for a, b in zip(bounds, bounds[1:])]
    pending = [_pool.submit(np.copyto, *part) for part in parts[1:]]
    np.copyto(*parts[0])
    for done in pending:
        done.result()
    return out


def axis_from(axis: int, rank: int, what: str = "axis") -> int:
    try:
        return normalize_axis(int(axis), rank, what)
    except ShapeError:
        raise
