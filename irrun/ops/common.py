"""Helpers shared by several op families."""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from .. import threads
from ..etypes import ElementType
from ..errors import ShapeError
from ..registry import TensorType
from ..shapes import dim_merge, dims_compatible, format_shape, normalize_axis

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
    """`fn(x, out)`: `ufunc(x, value, out=out)` for np.maximum / np.minimum (or np.fmax / np.fmin)
    on `dtype` data, the same values, faster (its constants made once: looking them up was a
    third of a small call).  Float maximum / minimum by NumPy's clip ufunc to [value, inf] /
    [-inf, value], which keeps a zero's sign where np.maximum(-0.0, 0.0) gives 0.0 (as OpenVINO's
    reference Relu does): np.maximum by a scalar took 4x its time on an AMD EPYC (3136 x 72 out of
    place: 68 against 18 us; by a row of the scalar, the way integers and fmax / fmin take below,
    25), and below 2 rows, where that takes the scalar, 3x (1000 x 10: 3.5 against 1.1 us).
    (fmax, which turns NaN into `value`, by the row: a max pool's last pass over 64 x 16 x 128,
    41 against 14 us.)"""
    if dtype.kind == "f" and ufunc in (np.maximum, np.minimum):
        bounds = (value, np.inf) if ufunc is np.maximum else (-np.inf, value)
        return scalar_clamp(*bounds, dtype)
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


try:    # NumPy's clip ufunc itself: np.clip reaches it through two Python calls (1.3 us a call)
    from numpy._core.umath import clip as clip_ufunc
except ImportError:                     # pragma: no cover - NumPy 1.x
    from numpy.core.umath import clip as clip_ufunc


def scalar_clamp(low, high, dtype: np.dtype):
    """`fn(x, out)`: min(max(x, low), high) of `dtype` data, NaN staying NaN, in NumPy's clip ufunc:
    one pass where np.maximum and np.minimum take two (float32, 200 Ki elements: 33 against 66 us;
    16 elements: 0.25 against 0.68 us)."""
    lo, hi = typed_constant(low, dtype), typed_constant(high, dtype)

    def apply(x: np.ndarray, out: np.ndarray) -> np.ndarray:
        return clip_ufunc(x, lo, hi, out)
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
    with np.errstate(over="ignore", invalid="ignore"):
        if x.dtype.kind == "f" and carrier.kind == "f" and x.size >= threads.MIN_PART_ELEMENTS:
            return cast_in_parts(x, carrier)
        if x.dtype == np.float16 and carrier == np.float32 and x.size >= F16_BITS_MIN_ELEMENTS:
            return _f16_to_f32(x, np.empty(x.shape, carrier))
        return x.astype(carrier)


# NumPy converts f16 one element at a time (f32 -> f16 0.9 ns each in cache, no SIMD): four times
# the work of an add per element.  f16-compressed weights are all decompressed at load.
_F16_CAST_COST = 4.0
# f16 -> f32 by the bits (`_f16_to_f32`): f16's sign, exponent and mantissa moved to their f32 places
# by a shift of the sign-extended int16 and a mask, then a scaling by 2^(127 - 15) that rebiases the
# exponent (and makes f16's subnormals f32 normals), exact for every finite value.
_F16_FIELDS_IN_F32 = np.int32(np.uint32(0x8FFFE000).view(np.int32))
_F16_REBIAS = np.float32(2.0 ** 112)
_F16_LARGEST = 65504.0
F16_BITS_MIN_ELEMENTS = 1 << 16     # (at 16 Ki elements its six NumPy calls cost more than they save)


def _f16_to_f32(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """dst[...] = src, f16 into f32, in four vectorised passes where NumPy's cast converts one element
    at a time: 0.42 against 0.87 ns an element in cache (ResNet-18's 10 M f16 weights at load).
    An infinity or NaN (exponent 31) comes out of them as a finite 2^16 or more: such a block is
    converted again by NumPy."""
    bits = dst.view(np.int32)
    np.copyto(bits, src.view(np.int16))            # (sign-extended: the sign reaches bit 31)
    np.left_shift(bits, 13, out=bits)
    np.bitwise_and(bits, _F16_FIELDS_IN_F32, out=bits)
    np.multiply(dst, _F16_REBIAS, out=dst)
    if dst.size and (dst.max() > _F16_LARGEST or dst.min() < -_F16_LARGEST):
        np.copyto(dst, src, casting="unsafe")
    return dst


def cast_in_parts(x: np.ndarray, dtype) -> np.ndarray:
    """x.astype(dtype) on every core when large (the cast releases the GIL)."""
    out = np.empty(x.shape, dtype)
    if x.dtype == np.float16 and out.dtype == np.float32:
        return threads.in_parts(_f16_to_f32, out, x, cost=_F16_CAST_COST)
    cost = _F16_CAST_COST if np.float16 in (x.dtype, out.dtype) else 1.0
    return threads.in_parts(lambda src, dst: np.copyto(dst, src, casting="unsafe"), out, x, cost=cost)


def sum_of_squares(x: np.ndarray) -> float:
    """The sum of x's squared values, by one BLAS dot product (13 us over 64 x 56 x 56 f32, where
    a minimum and a maximum took 22): NaN or infinite where x holds a NaN or an infinity, or
    values too large to square (past about 1.8e19 in f32).  The fast convolutions (Winograd, FFT)
    ask it before mixing an input's values in their transforms: a NaN there would reach every
    output of its tile or block, an infinity become NaN, a huge value overflow, where the direct
    sums keep each to the windows that read it."""
    flat = x.reshape(-1)
    return float(np.dot(flat, flat))


def round_half_away(x: np.ndarray) -> np.ndarray:
    """C's std::round (halves away from zero) in x's own float type: x - trunc(x) is exact, so a
    half is found without the error x + 0.5 makes (0.49999997 + 0.5 is 1 in float32)."""
    whole = np.trunc(x)
    with np.errstate(invalid="ignore"):
        return np.where(np.abs(x - whole) >= 0.5, whole + np.sign(x), whole)


def axis_from(axis: int, rank: int, what: str = "axis") -> int:
    try:
        return normalize_axis(int(axis), rank, what)
    except ShapeError:
        raise


# ---------------------------------------------------------------- input checks for shape functions

def check_rank(t: TensorType, rank: int, what: str) -> None:
    if t.rank is not None and t.rank != rank:
        raise ShapeError(f"{what} must be {rank}-D, got {format_shape(t.shape)}")


def check_dim(t: TensorType, axis: int, size: int, what: str) -> None:
    if t.shape is not None and not dims_compatible(t.shape[axis], size):
        raise ShapeError(f"{what} dimension {axis} must be {size}, got {format_shape(t.shape)}")


def merge_dims(a, b, message: str):
    """dim_merge, failing with `message`."""
    try:
        return dim_merge(a, b)
    except ShapeError:
        raise ShapeError(message) from None


def channels_last_view(x: np.ndarray) -> np.ndarray:
    """x [N, C, S...] as the view [N, S..., C]: np.moveaxis(x, 1, -1) without its argument checks
    (2.3 against 0.15 us a call; MobileNetV3's depthwise and 1x1 layers make 38 an inference)."""
    return x.transpose(_channels_last_order(x.ndim))


def channels_first_view(x: np.ndarray) -> np.ndarray:
    """x [N, S..., C] as the view [N, C, S...] (`channels_last_view` undone)."""
    return x.transpose(_channels_first_order(x.ndim))


@lru_cache(maxsize=8)
def _channels_last_order(ndim: int) -> tuple[int, ...]:
    return (0, *range(2, ndim), 1)


@lru_cache(maxsize=8)
def _channels_first_order(ndim: int) -> tuple[int, ...]:
    return (0, ndim - 1, *range(1, ndim - 1))


def last_axis_sums(x: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """scale * x.sum(axis=-1, keepdims=True) of float32/float64 data as one product with a column
    of `scale`, by BLAS: 3-4x faster than NumPy's reductions on rows of 49-384 (a layer norm's
    mean, a softmax's denominator, a global average pool)."""
    return np.matmul(x, _filled_column(x.shape[-1], scale, x.dtype))


def last_axis_square_sums(x: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """scale * (x * x).sum(axis=-1, keepdims=True) of float32/float64 data: where x is
    C-contiguous, one dot product a row (np.vecdot, NumPy 2), no squares written (a layer norm's
    variance over [128, 256]: 4.0 -> 1.9 us); else the squares' `last_axis_sums` (a row-wise dot
    over rows strided in memory took 4-10x that)."""
    if _vecdot is None or not x.flags.c_contiguous:
        return last_axis_sums(np.multiply(x, x), scale)
    sums = _vecdot(x, x)[..., None]
    return np.multiply(sums, x.dtype.type(scale), out=sums)


_vecdot = getattr(np, "vecdot", None)


@lru_cache(maxsize=64)
def _filled_column(length: int, value: float, dtype: np.dtype) -> np.ndarray:
    column = np.full((length, 1), value, dtype)
    column.flags.writeable = False
    return column
