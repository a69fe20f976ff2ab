"""Helpers shared by several op families."""
from __future__ import annotations

import numpy as np

from ..etypes import ElementType
from ..errors import ShapeError
from ..shapes import normalize_axis

_INT32_MIN = -(1 << 31)
_INT64_MIN = -(1 << 63)


_CONSTANTS: dict[tuple, np.ndarray] = {}


def typed_constant(value, dtype: np.dtype) -> np.ndarray:
    """A read-only 0-d array of `dtype`: a ufunc takes it in a fraction of the time it spends
    converting a Python or NumPy scalar, which is most of the cost on small tensors."""
    key = (value, dtype)
    found = _CONSTANTS.get(key)
    if found is None:
        found = np.array(value, dtype)
        found.flags.writeable = False
        _CONSTANTS[key] = found
    return found


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
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(carrier)


def axis_from(axis: int, rank: int, what: str = "axis") -> int:
    try:
        return normalize_axis(int(axis), rank, what)
    except ShapeError:
        raise
