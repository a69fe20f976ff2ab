"""Element types: names, port precisions, bit widths, and `.bin` decoding and encoding.

An array in irrun is a NumPy array in a *carrier* dtype.  Types NumPy lacks are
widened to the nearest carrier that holds every value exactly (bf16, the fp8 and
fp4 kinds and nf4 -> float32; i4 -> int8; u1/u2/u3/u4/u6 -> uint8); the
`ElementType` travelling with the tensor keeps the IR's true type.

`encode` is the inverse of `decode`: `encode(decode(data))` gives back `data` for
every bit pattern of every type (the padding bits of a packed type's last byte
are written as zeros, as OpenVINO writes them).  The small float formats decode
their NaN codes to NaNs that carry the code in their payload, so that even the
three NaN codes of f8e5m2 survive a round trip.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .errors import ModelError


@dataclass(frozen=True)
class ElementType:
    name: str                    # canonical IR name: f32, boolean, u1 ...
    precision: str               # legacy port precision: FP32, BOOL, BIN ...
    bits: int                    # storage bits per element (0: not storable)
    carrier: np.dtype | None     # dtype of irrun's arrays of this type
    kind: str                    # "float", "int", "uint", "bool", "string", "dynamic"
    decode: Callable[[memoryview | bytes, int], np.ndarray] | None = field(default=None, compare=False, repr=False)
    # array (of this type's values, in any dtype that holds them) -> the bytes a `.bin` stores
    encode: Callable[[np.ndarray], bytes] | None = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return self.name

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_integral(self) -> bool:
        return self.kind in ("int", "uint")

    @property
    def value_range(self) -> tuple[int, int] | None:
        """(lowest, highest) value of an integer type, sub-byte ones included (i4: -8..7, u1: 0..1)."""
        if self.kind == "int":
            return -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1
        if self.kind == "uint":
            return 0, (1 << self.bits) - 1
        return None

    def nbytes(self, count: int) -> int:
        """Bytes that `count` packed elements occupy in a `.bin`."""
        if self.name == "u3":
            return -(-count // 8) * 3
        if self.name == "u6":
            return -(-count // 4) * 3
        return -(-count * self.bits // 8)


def _plain(dtype):
    def decode(buf, count):
        return np.frombuffer(buf, dtype=dtype, count=count)
    return decode


def _nibbles(buf, count):
    """Two 4-bit fields per byte, element 0 in the low nibble: each byte widened to a little-endian
    uint16 whose low byte holds its low nibble and high byte its high one, four contiguous passes
    (0.37 ns an element, where writing the two halves through strided views took 1.19)."""
    raw = np.frombuffer(buf, dtype=np.uint8, count=-(-count // 2))
    pairs = raw.astype("<u2")
    high = pairs & 0xF0
    pairs &= 0x0F
    high <<= 4
    pairs |= high
    return pairs.view(np.uint8)[:count]


def _decode_u1(buf, count):
    raw = np.frombuffer(buf, dtype=np.uint8, count=-(-count // 8))
    return np.unpackbits(raw, bitorder="big")[:count]


def _decode_u2(buf, count):
    raw = np.frombuffer(buf, dtype=np.uint8, count=-(-count // 4))
    fields = (raw[:, None] >> np.array([0, 2, 4, 6], dtype=np.uint8)) & 0x3
    return fields.reshape(-1)[:count]


def _decode_u3(buf, count):
    # 8 elements in 3 bytes: two bytes of 2-bit low fields (MSB first), then
    # one byte of the high bits (MSB first).
    groups = -(-count // 8)
    raw = np.frombuffer(buf, dtype=np.uint8, count=groups * 3).reshape(groups, 3)
    shifts = np.array([6, 4, 2, 0], dtype=np.uint8)
    low = ((raw[:, :2, None] >> shifts) & 0x3).reshape(groups, 8)
    high = np.unpackbits(raw[:, 2:3], axis=1, bitorder="big")
    return ((high << 2) | low).reshape(-1)[:count]


def _decode_u6(buf, count):
    # 4 elements in 3 bytes: two bytes of low nibbles (element 0 in the high
    # nibble), then one byte of 2-bit high fields (MSB first).
    groups = -(-count // 4)
    raw = np.frombuffer(buf, dtype=np.uint8, count=groups * 3).reshape(groups, 3)
    low = np.stack([raw[:, 0] >> 4, raw[:, 0] & 0xF, raw[:, 1] >> 4, raw[:, 1] & 0xF], axis=1)
    high = (raw[:, 2:3] >> np.array([6, 4, 2, 0], dtype=np.uint8)) & 0x3
    return ((high << 4) | low).reshape(-1)[:count]


def _decode_i4(buf, count):
    values = _nibbles(buf, count).astype(np.int8)
    return np.where(values > 7, values - 16, values).astype(np.int8)


def _decode_bf16(buf, count):
    halves = np.frombuffer(buf, dtype=np.uint16, count=count)
    return (halves.astype(np.uint32) << 16).view(np.float32)


def _minifloat_table(exp_bits: int, man_bits: int, *, bias: int, ieee_inf: bool,
                     nan_codes: tuple[int, ...], signed: bool = True) -> np.ndarray:
    """Every value of a small float format, indexed by its bit pattern."""
    total = (1 if signed else 0) + exp_bits + man_bits
    table = np.empty(1 << total, dtype=np.float64)
    for code in range(1 << total):
        sign = -1.0 if signed and code >> (exp_bits + man_bits) & 1 else 1.0
        exp = (code >> man_bits) & ((1 << exp_bits) - 1)
        man = code & ((1 << man_bits) - 1)
        if man_bits == 0:
            value = 2.0 ** (exp - bias)
        elif exp == 0:
            value = man / (1 << man_bits) * 2.0 ** (1 - bias)
        else:
            value = (1 + man / (1 << man_bits)) * 2.0 ** (exp - bias)
        if ieee_inf and exp == (1 << exp_bits) - 1:
            value = np.inf if man == 0 else np.nan
        table[code] = sign * value
    with np.errstate(over="ignore"):   # (f8e8m0's NaN code would be 2^128)
        table = table.astype(np.float32)
    bits = table.view(np.uint32)
    for code in range(1 << total):
        if code in nan_codes or np.isnan(table[code]):
            # A quiet NaN with the code as payload (and the code's sign): `encode` finds the code again.
            negative = signed and code >> (exp_bits + man_bits) & 1
            bits[code] = (0x80000000 if negative else 0) | 0x7FC00000 | code
    return table


def _lut(table: np.ndarray, unpack=None):
    def decode(buf, count):
        codes = unpack(buf, count) if unpack else np.frombuffer(buf, dtype=np.uint8, count=count)
        return table[codes]
    return decode


# ---------------------------------------------------------------- encoding (the inverse of each decoder)

def _integers(values, bits: int, name: str, signed: bool = False) -> np.ndarray:
    """`values` as uint8 fields of `bits` bits (two's complement when `signed`), range-checked."""
    v = np.asarray(values).reshape(-1)
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if v.size and (v.dtype.kind not in "biu" or v.min() < lo or v.max() > hi):
        raise ModelError(f"{name} holds integers {lo}..{hi}; these values do not fit")
    return (v.astype(np.int64) & ((1 << bits) - 1)).astype(np.uint8)


def _padded(fields: np.ndarray, group: int) -> np.ndarray:
    """`fields` zero-padded to whole groups, one group per row."""
    rows = -(-fields.size // group)
    out = np.zeros(rows * group, dtype=np.uint8)
    out[:fields.size] = fields
    return out.reshape(rows, group)


def _pack_nibbles(fields: np.ndarray) -> bytes:
    pairs = _padded(fields, 2)
    return (pairs[:, 0] | (pairs[:, 1] << 4)).tobytes()


def _plain_encoder(dtype):
    def encode(values):
        return np.ascontiguousarray(values, dtype=dtype).tobytes()
    return encode


def _encode_boolean(values):
    return np.ascontiguousarray(values, dtype=np.bool_).view(np.uint8).tobytes()


def _encode_u1(values):
    return np.packbits(_integers(values, 1, "u1"), bitorder="big").tobytes()


def _encode_u2(values):
    groups = _padded(_integers(values, 2, "u2"), 4)
    return (groups[:, 0] | groups[:, 1] << 2 | groups[:, 2] << 4 | groups[:, 3] << 6).astype(np.uint8).tobytes()


def _encode_u3(values):
    groups = _padded(_integers(values, 3, "u3"), 8)
    low = (groups & 0x3).reshape(-1, 2, 4) << np.array([6, 4, 2, 0], dtype=np.uint8)
    out = np.empty((groups.shape[0], 3), dtype=np.uint8)
    out[:, :2] = np.bitwise_or.reduce(low, axis=2)
    out[:, 2:] = np.packbits(groups >> 2, axis=1, bitorder="big")
    return out.tobytes()


def _encode_u6(values):
    groups = _padded(_integers(values, 6, "u6"), 4)
    low, high = groups & 0xF, groups >> 4
    out = np.empty((groups.shape[0], 3), dtype=np.uint8)
    out[:, 0] = low[:, 0] << 4 | low[:, 1]
    out[:, 1] = low[:, 2] << 4 | low[:, 3]
    out[:, 2] = high[:, 0] << 6 | high[:, 1] << 4 | high[:, 2] << 2 | high[:, 3]
    return out.tobytes()


def _encode_u4(values):
    return _pack_nibbles(_integers(values, 4, "u4"))


def _encode_i4(values):
    return _pack_nibbles(_integers(values, 4, "i4", signed=True))


def _encode_bf16(values):
    """The upper half of each f32, rounded to nearest even (exact for values that are bf16 already)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).reshape(-1).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = np.isnan(np.ascontiguousarray(values, dtype=np.float32).reshape(-1))
    rounded = np.where(nan, (bits >> 16) | 0x40, rounded)   # a NaN stays a NaN (its quiet bit set)
    return rounded.astype(np.uint16).tobytes()


def _lut_encoder(table: np.ndarray, name: str, pack=None):
    """Each value's code in `table`, matched by bit pattern (so -0 and NaN payloads are told apart)."""
    bits = table.view(np.uint32)
    order = np.argsort(bits, kind="stable")
    sorted_bits = bits[order]

    def encode(values):
        v = np.ascontiguousarray(values, dtype=np.float32).reshape(-1).view(np.uint32)
        at = np.minimum(np.searchsorted(sorted_bits, v), len(sorted_bits) - 1)
        found = sorted_bits[at] == v
        if not found.all():
            bad = v[~found][0:1].view(np.float32)[0]
            raise ModelError(f"value {bad} is not one of the {len(table)} values an {name} element holds")
        codes = order[at].astype(np.uint8)
        return pack(codes) if pack else codes.tobytes()
    return encode


def _encode_string(values):
    """The packed form `_decode_string` reads: `int32 N`, `N+1` int32 offsets, the UTF-8 bytes."""
    items = [s if isinstance(s, bytes) else str(s).encode("utf-8", errors="surrogateescape")
             for s in np.asarray(values, dtype=object).reshape(-1)]
    offsets = np.zeros(len(items) + 1, dtype=np.int64)
    np.cumsum([len(s) for s in items], out=offsets[1:])
    if offsets[-1] > np.iinfo(np.int32).max:
        raise ModelError("string constant holds more than 2 GiB of text; the packed form cannot index it")
    return np.int32(len(items)).tobytes() + offsets.astype(np.int32).tobytes() + b"".join(items)


NF4_CODEBOOK = np.array([
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
    -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
    0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
    0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0], dtype=np.float32)

_F8E4M3 = _minifloat_table(4, 3, bias=7, ieee_inf=False, nan_codes=(0x7F, 0xFF))
_F8E5M2 = _minifloat_table(5, 2, bias=15, ieee_inf=True, nan_codes=())
_F8E8M0 = _minifloat_table(8, 0, bias=127, ieee_inf=False, nan_codes=(0xFF,), signed=False)
_F4E2M1 = _minifloat_table(2, 1, bias=1, ieee_inf=False, nan_codes=())


def _decode_string(buf, count):
    """`int32 N`, `N+1` int32 offsets, then the concatenated UTF-8 bytes."""
    data = bytes(buf)
    if len(data) < 4:
        raise ModelError("string constant has no element count in its packed data")
    n = int(np.frombuffer(data, dtype=np.int32, count=1)[0])
    if n != count or len(data) < 8 + 4 * n:
        raise ModelError(f"string constant packs {n} strings in {len(data)} bytes; the shape needs {count}")
    offsets = np.frombuffer(data, dtype=np.int32, count=n + 1, offset=4)
    body = data[8 + 4 * n:]
    if np.any(np.diff(offsets) < 0) or offsets[0] != 0 or offsets[-1] > len(body):
        raise ModelError("string constant has offsets outside its packed data")
    out = np.empty(n, dtype=object)
    for i in range(n):
        # surrogateescape keeps bytes that are not UTF-8, so StringTensorUnpack gives them back
        out[i] = body[offsets[i]:offsets[i + 1]].decode("utf-8", errors="surrogateescape")
    return out


def _t(name, precision, bits, carrier, kind, decode=None, encode=None):
    return ElementType(name, precision, bits, np.dtype(carrier) if carrier else None, kind,
                       decode or (_plain(carrier) if carrier else None),
                       encode or (_plain_encoder(carrier) if carrier else None))


_TYPES = [
    _t("f64", "FP64", 64, np.float64, "float"),
    _t("f32", "FP32", 32, np.float32, "float"),
    _t("f16", "FP16", 16, np.float16, "float"),
    _t("bf16", "BF16", 16, np.float32, "float", _decode_bf16, _encode_bf16),
    _t("f8e4m3", "F8E4M3", 8, np.float32, "float", _lut(_F8E4M3), _lut_encoder(_F8E4M3, "f8e4m3")),
    _t("f8e5m2", "F8E5M2", 8, np.float32, "float", _lut(_F8E5M2), _lut_encoder(_F8E5M2, "f8e5m2")),
    _t("f8e8m0", "F8E8M0", 8, np.float32, "float", _lut(_F8E8M0), _lut_encoder(_F8E8M0, "f8e8m0")),
    _t("f4e2m1", "F4E2M1", 4, np.float32, "float", _lut(_F4E2M1, _nibbles),
       _lut_encoder(_F4E2M1, "f4e2m1", _pack_nibbles)),
    _t("nf4", "NF4", 4, np.float32, "float", _lut(NF4_CODEBOOK, _nibbles),
       _lut_encoder(NF4_CODEBOOK, "nf4", _pack_nibbles)),
    _t("i64", "I64", 64, np.int64, "int"),
    _t("i32", "I32", 32, np.int32, "int"),
    _t("i16", "I16", 16, np.int16, "int"),
    _t("i8", "I8", 8, np.int8, "int"),
    _t("i4", "I4", 4, np.int8, "int", _decode_i4, _encode_i4),
    _t("u64", "U64", 64, np.uint64, "uint"),
    _t("u32", "U32", 32, np.uint32, "uint"),
    _t("u16", "U16", 16, np.uint16, "uint"),
    _t("u8", "U8", 8, np.uint8, "uint"),
    _t("u6", "U6", 6, np.uint8, "uint", _decode_u6, _encode_u6),
    _t("u4", "U4", 4, np.uint8, "uint", _nibbles, _encode_u4),
    _t("u3", "U3", 3, np.uint8, "uint", _decode_u3, _encode_u3),
    _t("u2", "U2", 2, np.uint8, "uint", _decode_u2, _encode_u2),
    _t("u1", "BIN", 1, np.uint8, "uint", _decode_u1, _encode_u1),
    _t("boolean", "BOOL", 8, np.bool_, "bool", lambda buf, n: np.frombuffer(buf, np.uint8, n) != 0, _encode_boolean),
    _t("string", "STRING", 8, np.object_, "string", _decode_string, _encode_string),
    _t("dynamic", "UNSPECIFIED", 0, None, "dynamic"),
]

BY_NAME: dict[str, ElementType] = {t.name: t for t in _TYPES}
_ALIASES = {"undefined": "dynamic"}
# Port precisions: legacy upper-case names and canonical lower-case ones, case-sensitive.
BY_PRECISION: dict[str, ElementType] = {t.precision: t for t in _TYPES}
BY_PRECISION.update({t.name: t for t in _TYPES})
BY_PRECISION.update({"U1": BY_NAME["u1"], "undefined": BY_NAME["dynamic"]})

f64, f32, f16 = BY_NAME["f64"], BY_NAME["f32"], BY_NAME["f16"]
i64, i32, i8, u8 = BY_NAME["i64"], BY_NAME["i32"], BY_NAME["i8"], BY_NAME["u8"]
boolean, dynamic = BY_NAME["boolean"], BY_NAME["dynamic"]

_BY_CARRIER = {np.dtype(np.float64): f64, np.dtype(np.float32): f32, np.dtype(np.float16): f16,
               np.dtype(np.int64): i64, np.dtype(np.int32): i32, np.dtype(np.int16): BY_NAME["i16"],
               np.dtype(np.int8): i8, np.dtype(np.uint64): BY_NAME["u64"],
               np.dtype(np.uint32): BY_NAME["u32"], np.dtype(np.uint16): BY_NAME["u16"],
               np.dtype(np.uint8): u8, np.dtype(np.bool_): boolean}


def element_type(name: str) -> ElementType:
    """An `element_type` / `destination_type` attribute value (lower-case names)."""
    etype = BY_NAME.get(_ALIASES.get(name, name))
    if etype is None:
        raise ModelError(f'unknown element type "{name}" (known: {", ".join(BY_NAME)})')
    return etype


def from_precision(text: str) -> ElementType:
    """A port `precision` attribute value."""
    etype = BY_PRECISION.get(text)
    if etype is None:
        raise ModelError(f'unknown port precision "{text}"')
    return etype


def round_to_bf16(x: np.ndarray) -> np.ndarray:
    """f32 values rounded to bfloat16 (to nearest, ties to even), kept in f32."""
    bits = np.asarray(x, np.float32).view(np.uint32)
    rounded = (bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))) & np.uint32(0xFFFF0000)
    return np.where(np.isnan(x), x, rounded.view(np.float32))


def rounded_to(x: np.ndarray, etype: ElementType) -> np.ndarray:
    """Float values rounded to the nearest value of f16 or bf16, in f32 (other types: unchanged)."""
    if etype.name == "f16":
        return np.asarray(x).astype(np.float16).astype(np.float32)
    if etype.name == "bf16":
        return round_to_bf16(np.asarray(x, np.float32))
    return x


def from_dtype(dtype) -> ElementType:
    dtype = np.dtype(dtype)
    if dtype.kind in "OUS":
        return BY_NAME["string"]
    etype = _BY_CARRIER.get(dtype)
    if etype is None:
        raise ModelError(f"no IR element type for numpy dtype {dtype}")
    return etype
