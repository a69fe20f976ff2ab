"""Range-1/4, Eye-9, RandomUniform-8 and Multinomial-13.

Range: the length is OpenVINO's shape rule, computed in double precision:
max(ceil((stop - start) / step), 0), where an integer output first truncates
start, stop and step toward zero (Range-4 with an integer output_type;
Range-1 works in its input type).  A step that truncates to 0 gives no
elements.  The values (specs/errata/detection.md):

* a zero step is an error when known at load (as in OpenVINO) and gives no
  elements at run time (as on the CPU plugin);
* floats: start + i * step in the output type (f16 and bf16 computed in f32);
* integers: start, start + step, ... with the type's wrap-around, where
  Range-4 converts start and step to the output type as a C++ cast does
  (toward zero).  The CPU plugin saturates or rounds instead; irrun follows
  OpenVINO's reference, which agrees with its own shape inference.

Eye: ones where column - row == diagonal_index, in front of any batch_shape.

RandomUniform reproduces OpenVINO's generators bit for bit (specs/errata/misc.md):
alignment=tensorflow is Philox4x32-10 keyed by global_seed with op_seed as the
high counter word (the reference and the CPU plugin), alignment=pytorch is
MT19937 seeded by global_seed alone.  The 32-bit words become values as
OpenVINO's reference converts them; the CPU plugin differs where it computes
f16, bf16, f64 in f32 and i64 in i32.

Multinomial follows the CPU plugin, which draws its uniform samples from
std::mt19937 seeded by std::seed_seq{global_seed, op_seed} (not Philox) and
works in f32.  Both generators are deterministic for any seeds here; OpenVINO
picks a time-based seed when both seeds are 0, and the CPU plugin advances its
RandomUniform state on every inference.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from .. import etypes
from ..etypes import round_to_bf16
from ..errors import ModelError, ShapeError
from ..registry import Op, TensorType, register
from ..shapes import ANY, dims_compatible, format_shape
from .common import convert_array

_NAMES = ("start", "stop", "step")


def range_length(start: float, stop: float, step: float, integral: bool) -> int:
    """Number of elements, as OpenVINO's shape inference counts them."""
    if not (math.isfinite(start) and math.isfinite(stop)):
        raise ShapeError(f"start and stop must be finite, got start={start} stop={stop}")
    if not math.isfinite(step) or step == 0:
        raise ShapeError(f"step must be finite and non-zero, got {step}")
    if integral:
        start, stop, step = math.trunc(start), math.trunc(stop), math.trunc(step)
    if step == 0:
        return 0
    if (step > 0 and start >= stop) or (step < 0 and start <= stop):
        return 0
    return math.ceil(abs(stop - start) / abs(step))


def _compute_dtype(etype) -> np.dtype:
    """f16 and bf16 ranges are computed in f32, as OpenVINO's evaluator and the CPU plugin do."""
    return np.dtype(np.float32) if etype.is_float and etype.carrier.itemsize < 4 else etype.carrier


@lru_cache(maxsize=None)
def _type_bounds(dtype: np.dtype) -> tuple[int, int]:
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def range_values(start: float, step: float, count: int, etype) -> np.ndarray:
    """`count` elements of type `etype` from `start` by `step` (both cast to the type first)."""
    if etype.is_float:
        dtype = _compute_dtype(etype)
        out = dtype.type(start) + np.arange(count, dtype=dtype) * dtype.type(step)
        return out.astype(etype.carrier)
    low, high = _type_bounds(etype.carrier)
    if low <= start <= high and low <= step <= high:
        first, stride = math.trunc(start), math.trunc(step)    # (what the cast below gives them)
        stop = first + count * stride
        if low <= stop - stride <= high and abs(stop) < 2 ** 53:
            # no wrap-around: NumPy's own range (its length, from these ints, is count exactly),
            # one call where the general way takes four (a decoding step's positions, every call)
            return np.arange(first, stop, stride, dtype=etype.carrier) if count else \
                np.empty(0, etype.carrier)
    else:
        first, stride = (convert_array(np.array([v], np.float64), etype)[0] for v in (start, step))
    # Modular arithmetic in a 64-bit type, then the low bits: the same wrap-around as
    # adding step `count` times in the narrow type.
    wide = np.uint64 if etype.kind == "uint" else np.int64
    with np.errstate(over="ignore"):
        out = wide(first) + np.arange(count, dtype=wide) * wide(stride)
    return out.astype(etype.carrier)


@register("Range", 1, 4)
class Range(Op):
    def output_type(self, inputs):
        if self.version == 4:
            etype = self.attrs.output_type
            if not (etype.is_float or etype.is_integral):
                raise ShapeError(f"output_type must be a numeric type, got {etype}")
            return etype
        kinds = {t.etype for t in inputs if t.etype is not etypes.dynamic}
        if len(kinds) > 1:
            raise ShapeError("start, stop and step must have the same element type, got "
                             + ", ".join(f"{n}={t.etype}" for n, t in zip(_NAMES, inputs)))
        etype = kinds.pop() if kinds else etypes.dynamic
        if etype is not etypes.dynamic and not (etype.is_float or etype.is_integral):
            raise ShapeError(f"start, stop and step must be numbers, got {etype}")
        return etype

    def infer(self, inputs):
        for name, t in zip(_NAMES, inputs):
            if t.rank not in (None, 0):
                raise ShapeError(f"{name} must be a scalar, got {format_shape(t.shape)}")
            if self.version == 4 and not (t.etype.is_float or t.etype.is_integral or t.etype is etypes.dynamic):
                raise ShapeError(f"{name} must be a number, got {t.etype}")
        etype = self.output_type(inputs)
        if any(t.value is None for t in inputs) or etype is etypes.dynamic:
            return [TensorType((ANY,), etype)]
        start, stop, step = (float(np.asarray(t.value).reshape(-1)[0]) for t in inputs)
        count = range_length(start, stop, step, etype.is_integral)
        note = f"ceil(({stop:g} - {start:g}) / {step:g})"
        return [TensorType((count,), etype, notes={0: note})]

    def _run_etype(self, start: np.ndarray):
        """The output's element type for inputs of start's type (as `output_type` decided at load)."""
        return self.attrs.output_type if self.version == 4 else etypes.from_dtype(start.dtype)

    def quick_shapes(self, args):
        if any(a.size != 1 for a in args):
            return None
        etype = self._run_etype(args[0])
        try:
            count = range_length(*(float(a.reshape(-1)[0]) for a in args), etype.is_integral)
        except ShapeError:
            return None
        return ((count,),), (0, 1, 2)

    def run(self, start, stop, step):
        etype = self._run_etype(start)
        start, stop, step = (float(np.asarray(v).reshape(-1)[0]) for v in (start, stop, step))
        # A zero step known only at run time gives no elements, as on the CPU plugin.
        count = 0 if step == 0 else range_length(start, stop, step, etype.is_integral)
        return range_values(start, step, count, etype)


# ---------------------------------------------------------------- shared input checks

def _index_scalar(t: TensorType, name: str) -> int | None:
    """A scalar or one-element 1-D i32/i64 input; its value when known at load."""
    if t.etype is not etypes.dynamic and t.etype.name not in ("i32", "i64"):
        raise ShapeError(f"{name} must be i32 or i64, got {t.etype}")
    if t.rank not in (None, 0) and not (t.rank == 1 and dims_compatible(t.shape[0], 1)):
        raise ShapeError(f"{name} must be a scalar or hold one element, got shape {format_shape(t.shape)}")
    return None if t.value is None else int(np.asarray(t.value).reshape(-1)[0])


def _shape_from_input(t: TensorType, name: str):
    """The dims a 1-D shape input describes: values (negative as 0, as OpenVINO clamps them),
    or one `?` per element, or a dynamic rank."""
    if t.etype is not etypes.dynamic and not t.etype.is_integral:
        raise ShapeError(f"{name} must be an integer tensor, got {t.etype}")
    if t.rank is not None and t.rank != 1:
        raise ShapeError(f"{name} must be a 1D tensor, got shape {format_shape(t.shape)}")
    if t.value is not None:
        return tuple(max(int(v), 0) for v in np.asarray(t.value).reshape(-1))
    if t.shape is not None and isinstance(t.shape[0], int):
        return (ANY,) * t.shape[0]
    return None


# ---------------------------------------------------------------- Eye

@register("Eye", 9)
class Eye(Op):
    """Ones on the diagonal `diagonal_index` (positive: above the main one) of a rows x columns matrix."""

    def infer(self, inputs):
        names = ("num_rows", "num_columns", "diagonal_index")
        rows, cols, _ = (_index_scalar(t, n) for t, n in zip(inputs, names))
        dims = []
        for name, value in (("num_rows", rows), ("num_columns", cols)):
            if value is not None and value < 0:
                raise ShapeError(f"{name} must be >= 0, got {value}")
            dims.append(ANY if value is None else value)
        batch: tuple | None = ()
        if len(inputs) > 3:
            if inputs[3].etype is not etypes.dynamic and inputs[3].etype.name not in ("i32", "i64"):
                raise ShapeError(f"batch_shape must be i32 or i64, got {inputs[3].etype}")
            batch = _shape_from_input(inputs[3], "batch_shape")
        etype = self.attrs.output_type
        if batch is None:
            return [TensorType(None, etype)]
        shape = batch + tuple(dims)
        return [TensorType(shape, etype, notes={len(batch): "num_rows", len(batch) + 1: "num_columns"})]

    def run(self, rows, cols, diagonal, batch_shape=None):
        rows, cols, k = (int(np.asarray(v).reshape(-1)[0]) for v in (rows, cols, diagonal))
        if rows < 0 or cols < 0:
            raise ModelError(f"Eye needs num_rows and num_columns >= 0, got {rows} and {cols}")
        matrix = np.eye(rows, cols, k, dtype=self.attrs.output_type.carrier)
        batch = () if batch_shape is None else tuple(max(int(v), 0) for v in np.asarray(batch_shape).reshape(-1))
        return np.ascontiguousarray(np.broadcast_to(matrix, batch + matrix.shape))


# ---------------------------------------------------------------- random number generators

_LOW32 = np.uint64(0xFFFFFFFF)
_PHILOX_ROUNDS = 10
_PHILOX_MULTIPLIERS = (np.uint64(0xD2511F53), np.uint64(0xCD9E8D57))
_PHILOX_KEY_STEPS = (np.uint64(0x9E3779B9), np.uint64(0xBB67AE85))


def philox_words(global_seed: int, op_seed: int, count: int) -> np.ndarray:
    """`count` uint32 words of Philox4x32-10 as OpenVINO runs it: key = global_seed, counter
    words (n, op_seed) with n = 0, 1, ... per block of four words."""
    blocks = -(-count // 4)
    n = np.arange(blocks, dtype=np.uint64)
    seed = np.uint64(op_seed)
    n_lo, n_hi = n & _LOW32, n >> np.uint64(32)
    c_lo, c_hi = np.full(blocks, seed & _LOW32), np.full(blocks, seed >> np.uint64(32))
    key = np.uint64(global_seed)
    k_lo, k_hi = key & _LOW32, key >> np.uint64(32)
    m_n, m_c = _PHILOX_MULTIPLIERS
    for _ in range(_PHILOX_ROUNDS):
        p_n, p_c = m_n * n_lo, m_c * c_lo      # 32 x 32 -> 64-bit products, no overflow
        n_lo, n_hi, c_lo, c_hi = ((p_c >> np.uint64(32)) ^ n_hi ^ k_lo, p_c & _LOW32,
                                  (p_n >> np.uint64(32)) ^ c_hi ^ k_hi, p_n & _LOW32)
        k_lo = (k_lo + _PHILOX_KEY_STEPS[0]) & _LOW32
        k_hi = (k_hi + _PHILOX_KEY_STEPS[1]) & _LOW32
    return np.stack([n_lo, n_hi, c_lo, c_hi], axis=1).astype(np.uint32).reshape(-1)[:count]


def mt19937_words(key: np.ndarray, count: int) -> np.ndarray:
    """`count` outputs of MT19937 started from the 624-word state `key` (as std::mt19937 after seeding)."""
    generator = np.random.MT19937()
    generator.state = {"bit_generator": "MT19937", "state": {"key": key.astype(np.uint32), "pos": 624}}
    return generator.random_raw(count).astype(np.uint32)


def mt19937_seeded(seed: int) -> np.ndarray:
    """MT19937 state for init_genrand(seed), the classic 32-bit seeding (PyTorch's CPU generator)."""
    key = [seed & 0xFFFFFFFF]
    for i in range(1, 624):   # the seeding recurrence is sequential: 624 steps, once per run
        key.append((1812433253 * (key[-1] ^ (key[-1] >> 30)) + i) & 0xFFFFFFFF)
    return np.array(key, dtype=np.uint32)


def seed_seq_state(seeds: tuple[int, ...]) -> np.ndarray:
    """MT19937 state from std::seed_seq(seeds) as the C++ standard defines its generate()."""
    n, mask = 624, 0xFFFFFFFF
    v = [s & mask for s in seeds]
    b = [0x8B8B8B8B] * n
    t, p = 11, (624 - 11) // 2
    q = p + t

    def mix(x):
        return x ^ (x >> 27)

    m = max(len(v) + 1, n)
    for k in range(m):   # sequential by definition: 624 + 624 integer steps, once per run
        r1 = 1664525 * mix(b[k % n] ^ b[(k + p) % n] ^ b[(k - 1) % n]) & mask
        r2 = (r1 + (len(v) if k == 0 else k % n + v[k - 1] if k <= len(v) else k % n)) & mask
        b[(k + p) % n] = (b[(k + p) % n] + r1) & mask
        b[(k + q) % n] = (b[(k + q) % n] + r2) & mask
        b[k % n] = r2
    for k in range(m, m + n):
        r3 = 1566083941 * mix((b[k % n] + b[(k + p) % n] + b[(k - 1) % n]) & mask) & mask
        r4 = (r3 - k % n) & mask
        b[(k + p) % n] ^= r3
        b[(k + q) % n] ^= r4
        b[k % n] = r4
    key = np.array(b, dtype=np.uint32)
    if not key[0] & 0x80000000 and not key[1:].any():   # mt19937's rule against an all-zero state
        key[0] = 0x80000000
    return key


def _wrap_add(low: np.ndarray, lo, etype) -> np.ndarray:
    """low + lo in the unsigned type of etype's width, read back as etype (C++ unsigned arithmetic)."""
    wide = np.uint64 if etype.bits == 64 else np.uint32
    with np.errstate(over="ignore"):
        return (low.astype(wide) + np.asarray(lo).astype(etype.carrier).view(wide)).view(etype.carrier)


def _integer_range(lo, hi, etype) -> np.uint64:
    """max - min as the unsigned divisor C++ uses (wrapping)."""
    wide = np.uint64 if etype.bits == 64 else np.uint32
    with np.errstate(over="ignore"):
        return (np.asarray(hi).astype(etype.carrier).view(wide) - np.asarray(lo).astype(etype.carrier).view(wide))


def _pairs(words: np.ndarray, high_first: bool) -> np.ndarray:
    """uint64 values from consecutive word pairs."""
    pairs = words.reshape(-1, 2).astype(np.uint64)
    high, low = (pairs[:, 0], pairs[:, 1]) if high_first else (pairs[:, 1], pairs[:, 0])
    return (high << np.uint64(32)) | low


def _tensorflow_values(words: np.ndarray, lo, hi, etype) -> np.ndarray:
    """Philox words -> values, as OpenVINO's reference converts them (one word per value; two for 64-bit)."""
    name = etype.name
    if name == "f32":
        unit = ((words & np.uint32(0x7FFFFF)) | np.uint32(0x3F800000)).view(np.float32) - np.float32(1)
        return unit * (np.float32(hi) - np.float32(lo)) + np.float32(lo)
    if name == "f16":   # float16 arithmetic, rounded after every operation
        unit = ((words & np.uint32(0x3FF)).astype(np.uint16) | np.uint16(0x3C00)).view(np.float16) - np.float16(1)
        return unit * (np.float16(hi) - np.float16(lo)) + np.float16(lo)
    if name == "bf16":
        unit = ((words & np.uint32(0x7F)) | np.uint32(0x3F80)) << np.uint32(16)
        span = round_to_bf16(np.float32(hi) - np.float32(lo))
        return round_to_bf16(round_to_bf16((unit.view(np.float32) - np.float32(1)) * span) + np.float32(lo))
    if name == "f64":
        pairs = words.reshape(-1, 2).astype(np.uint64)
        mantissa = ((pairs[:, 0] & np.uint64(0xFFFFF)) << np.uint64(32)) | pairs[:, 1]
        unit = (mantissa | np.uint64(0x3FF0000000000000)).view(np.float64) - 1.0
        return unit * (np.float64(hi) - np.float64(lo)) + np.float64(lo)
    if name == "i32":
        return _wrap_add(words % _integer_range(lo, hi, etype), lo, etype)
    if name == "i64":
        return _wrap_add(_pairs(words, high_first=False) % _integer_range(lo, hi, etype), lo, etype)
    raise ShapeError(f"RandomUniform does not produce {etype}")


def _pytorch_values(words: np.ndarray, lo, hi, etype) -> np.ndarray:
    """MT19937 words -> values, as OpenVINO's reference converts them for alignment=pytorch."""
    name = etype.name
    if name in ("f32", "f16", "bf16"):
        digits = {"f32": 24, "f16": 11, "bf16": 8}[name]
        unit = (words & np.uint32((1 << digits) - 1)).astype(np.float32) * np.float32(2.0 ** -digits)
        if name == "f32":
            return unit * (np.float32(hi) - np.float32(lo)) + np.float32(lo)
        # The span is computed in the narrow type, the rest in f32, then rounded once.
        if name == "f16":
            span = np.float32(np.float16(hi) - np.float16(lo))
            return (unit * span + np.float32(lo)).astype(np.float16)
        span = round_to_bf16(np.float32(hi) - np.float32(lo))
        return round_to_bf16(unit * span + np.float32(lo))
    if name == "f64":
        unit = (_pairs(words, high_first=True) & np.uint64((1 << 53) - 1)).astype(np.float64) * 2.0 ** -53
        return unit * (np.float64(hi) - np.float64(lo)) + np.float64(lo)
    if name == "i32":
        return _wrap_add(words % _integer_range(lo, hi, etype), lo, etype)
    if name == "i64":
        if _pytorch_i64_uses_one_word(lo, hi):
            # Signed arithmetic here: (int64)word % (max - min) + min.
            return words.astype(np.int64) % (np.int64(hi) - np.int64(lo)) + np.int64(lo)
        return _wrap_add(_pairs(words, high_first=True) % _integer_range(lo, hi, etype), lo, etype)
    raise ShapeError(f"RandomUniform does not produce {etype}")


def _pytorch_i64_uses_one_word(lo, hi) -> bool:
    """PyTorch draws one 32-bit word per i64 value when both bounds fit in uint32."""
    return int(lo) <= 0xFFFFFFFF and int(hi) <= 0xFFFFFFFF


# ---------------------------------------------------------------- RandomUniform

_RANDOM_TYPES = ("f16", "bf16", "f32", "f64", "i32", "i64")


@register("RandomUniform", 8)
class RandomUniform(Op):
    """Uniform values in [min, max) from OpenVINO's Philox (tensorflow) or Mersenne (pytorch) stream."""

    foldable = False   # OpenVINO draws afresh on every inference; never a load-time constant

    def infer(self, inputs):
        shape_in, low, high = inputs
        etype = self.attrs.output_type
        if etype.name not in _RANDOM_TYPES:
            raise ShapeError(f"output_type must be one of {', '.join(_RANDOM_TYPES)}, got {etype}")
        if shape_in.etype is not etypes.dynamic and shape_in.etype.name not in ("i32", "i64"):
            raise ShapeError(f"shape must be i32 or i64, got {shape_in.etype}")
        for name, t in (("min_val", low), ("max_val", high)):
            if t.etype is not etypes.dynamic and t.etype is not etype:
                raise ShapeError(f"{name} has element type {t.etype}; it must be output_type {etype}")
            if t.rank not in (None, 0, 1) or (t.rank == 1 and isinstance(t.shape[0], int) and t.shape[0] != 1):
                raise ShapeError(f"{name} must be a scalar or one-element 1D tensor, got {format_shape(t.shape)}")
        if low.value is not None and high.value is not None:
            lo, hi = (np.asarray(t.value).reshape(-1)[0] for t in (low, high))
            if not lo < hi:
                raise ShapeError(f"min_val must be less than max_val, got min_val={lo} max_val={hi}")
        dims = _shape_from_input(shape_in, "shape")
        return [TensorType(dims, etype)]

    def run(self, shape, low, high):
        etype = self.attrs.output_type
        dims = tuple(max(int(v), 0) for v in np.asarray(shape).reshape(-1))
        count = int(np.prod(dims, dtype=np.int64))
        lo, hi = (np.asarray(v).reshape(-1)[0] for v in (low, high))
        pytorch = self.attrs.alignment == "pytorch"
        two_words = etype.bits == 64 and not (pytorch and etype.name == "i64" and _pytorch_i64_uses_one_word(lo, hi))
        words_needed = count * (2 if two_words else 1)
        with np.errstate(over="ignore", invalid="ignore"):
            if pytorch:
                words = mt19937_words(mt19937_seeded(self.attrs.global_seed), words_needed)
                values = _pytorch_values(words, lo, hi, etype)
            else:
                words = philox_words(self.attrs.global_seed, self.attrs.op_seed, words_needed)
                values = _tensorflow_values(words, lo, hi, etype)
        return np.asarray(values, dtype=etype.carrier).reshape(dims)


# ---------------------------------------------------------------- Multinomial

@register("Multinomial", 13)
class Multinomial(Op):
    """num_samples class indices per row of probs, drawn from the row's (log-)probabilities."""

    foldable = False

    def infer(self, inputs):
        probs, num = inputs
        if probs.etype is not etypes.dynamic and not probs.etype.is_float:
            raise ShapeError(f"probs must be floating-point, got {probs.etype}")
        if num.etype is not etypes.dynamic and not num.etype.is_integral:
            raise ShapeError(f"num_samples must be an integer, got {num.etype}")
        if num.rank not in (None, 0, 1):
            raise ShapeError(f"num_samples must be a scalar or 1D tensor, got {format_shape(num.shape)}")
        etype = self.attrs.convert_type
        if not etype.is_integral:
            raise ShapeError(f"convert_type must be an integer type, got {etype}")
        if probs.rank is not None and probs.rank != 2:
            raise ShapeError(f"probs must be 2D [batch, classes], got {format_shape(probs.shape)}")
        samples = ANY if num.value is None else max(int(np.asarray(num.value).reshape(-1)[0]), 0)
        if probs.shape is None:
            return [TensorType(None, etype)]
        return [TensorType((probs.shape[0], samples), etype, notes={1: "num_samples"})]

    def run(self, probs, num_samples):
        samples = max(int(np.asarray(num_samples).reshape(-1)[0]), 0)
        batch, classes = probs.shape
        if not self.attrs.with_replacement and samples > classes:
            raise ModelError(f"Multinomial without replacement cannot draw {samples} samples from {classes} classes")
        # The CPU plugin works in f32 whatever the input type.
        p = probs.astype(np.float32)
        with np.errstate(all="ignore"):
            if self.attrs.log_probs:
                p = np.exp(p.astype(np.float64)).astype(np.float32)
            cdf = np.cumsum(p, axis=1, dtype=np.float32)
            words = mt19937_words(seed_seq_state((self.attrs.global_seed, self.attrs.op_seed)), batch * samples)
            uniform = (words.astype(np.float32) / np.float32(2.0 ** 32)).reshape(batch, samples)
            if classes:
                cdf = cdf / np.maximum(cdf[:, -1:], np.finfo(np.float32).tiny)
            drawn = _draw_with_replacement(cdf, uniform) if self.attrs.with_replacement \
                else _draw_without_replacement(cdf, uniform)
        return drawn.astype(self.attrs.convert_type.carrier)


def _draw_with_replacement(cdf: np.ndarray, uniform: np.ndarray) -> np.ndarray:
    """Per row, the first class whose cumulative probability reaches the sample."""
    if cdf.shape[1] == 0:
        return np.zeros(uniform.shape, np.int64)
    # One sorted search over all rows: row r lives in [2r, 2r + 1] (cdf values are in [0, 1]).
    offset = 2.0 * np.arange(cdf.shape[0])[:, None]
    flat = (cdf.astype(np.float64) + offset).reshape(-1)
    found = np.searchsorted(flat, (uniform.astype(np.float64) + offset).reshape(-1), side="left")
    classes = found.reshape(uniform.shape) - cdf.shape[1] * np.arange(cdf.shape[0])[:, None]
    return np.minimum(classes, cdf.shape[1] - 1)


def _draw_without_replacement(cdf: np.ndarray, uniform: np.ndarray) -> np.ndarray:
    """Sample by sample (vectorised over rows): draw, then remove the class and renormalize in f32."""
    batch, classes = cdf.shape
    rows = np.arange(batch)
    drawn = np.zeros(uniform.shape, np.int64)
    position = np.arange(classes)
    one = np.float32(1)
    for j in range(uniform.shape[1]):
        chosen = np.minimum((cdf < uniform[:, j:j + 1]).sum(axis=1), classes - 1)
        drawn[:, j] = chosen
        below = np.where(chosen > 0, cdf[rows, np.maximum(chosen - 1, 0)], np.float32(0))
        mass = (cdf[rows, chosen] - below).astype(np.float32)
        shifted = np.where(position >= chosen[:, None], cdf - mass[:, None], cdf)
        cdf = (shifted / (one - mass)[:, None]).astype(np.float32)
    return drawn
