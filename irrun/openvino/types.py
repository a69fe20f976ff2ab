"""`Type`, `Dimension`, `PartialShape`, `Shape`, `Layout`: OpenVINO's value types, on irrun's.

`Type` wraps an `irrun.etypes.ElementType`; a `PartialShape` converts to and from irrun's
shapes (ints for static dims, `irrun.shapes.Dim` intervals for dynamic ones).  Names,
reprs, properties-versus-methods and errors follow OpenVINO's Python API (2026.4).
"""
from __future__ import annotations

import re
from typing import Any, Iterable

import numpy as np

from .. import etypes
from ..etypes import ElementType
from ..shapes import Dim
from .exceptions import OVRuntimeError

INT64_MAX = (1 << 63) - 1

# What OpenVINO's repr calls each type, and the dtype its `to_dtype` gives (packed and narrow
# floats come out as their storage bytes, bf16 as float16, as in OpenVINO).
_C_NAMES = {
    "boolean": "char", "bf16": "bfloat16", "f16": "float16", "f32": "float32", "f64": "double64",
    "i4": "int4_t", "i8": "int8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t",
    "u1": "uint1_t", "u2": "uint2_t", "u3": "uint3_t", "u4": "uint4_t", "u6": "uint6_t", "u8": "uint8_t",
    "u16": "uint16_t", "u32": "uint32_t", "u64": "uint64_t", "nf4": "nfloat4", "string": "string",
    "dynamic": "dynamic", "f8e4m3": "f8e4m3", "f8e5m2": "f8e5m2", "f8e8m0": "f8e8m0", "f4e2m1": "f4e2m1",
}
_DTYPES = {"bf16": np.float16, "i4": np.int8, "string": np.bytes_}
_BYTE_SIZES = {"string": 32}


class Type:
    """An element type: `Type.f32`, `Type(np.float32)`, `Type.i64.to_dtype()`."""

    _by_name: dict[str, "Type"] = {}
    __slots__ = ("_etype",)

    def __new__(cls, value: Any = None):
        if isinstance(value, Type):
            return value
        if isinstance(value, ElementType):
            return cls._by_name[value.name]
        if value is None:
            return cls._by_name["dynamic"]
        if value is float:
            return cls._by_name["f64"]
        if value is int:
            return cls._by_name["i64"]
        if value is bool:
            return cls._by_name["boolean"]
        if value is str or value is bytes:
            return cls._by_name["string"]
        try:
            dtype = np.dtype(value)
        except TypeError:
            raise TypeError(f"data type {value!r} not understood") from None
        try:
            return cls._by_name[etypes.from_dtype(dtype).name]
        except etypes.ModelError:
            raise OVRuntimeError(f"Unsupported data type: {dtype}") from None

    @classmethod
    def _make(cls, etype: ElementType) -> "Type":
        self = object.__new__(cls)
        self._etype = etype
        return self

    @property
    def etype(self) -> ElementType:
        """The irrun element type."""
        return self._etype

    def __repr__(self) -> str:
        return f"<Type: '{_C_NAMES.get(self._etype.name, self._etype.name)}'>"

    __str__ = __repr__

    def __eq__(self, other) -> bool:
        if isinstance(other, Type):
            return other._etype.name == self._etype.name
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._etype.name)

    def __reduce__(self):
        return (Type.from_name, (self._etype.name,))

    @staticmethod
    def from_name(name: str) -> "Type":
        return Type._by_name[etypes.element_type(name).name]

    def get_type_name(self) -> str:
        return self._etype.name

    to_string = get_type_name

    def to_dtype(self) -> np.dtype:
        name = self._etype.name
        if name == "dynamic":
            raise OVRuntimeError("map::at")
        if name in _DTYPES:
            return np.dtype(_DTYPES[name])
        carrier = self._etype.carrier
        return np.dtype(np.uint8) if self._etype.is_float and carrier == np.float32 and name != "f32" else carrier

    @property
    def bitwidth(self) -> int:
        return 256 if self._etype.name == "string" else self._etype.bits

    @property
    def size(self) -> int:
        return _BYTE_SIZES.get(self._etype.name, -(-self._etype.bits // 8))

    def get_bitwidth(self) -> int:
        return self.bitwidth

    def get_size(self) -> int:
        return self.size

    def is_real(self) -> bool:
        return self._etype.is_float

    def is_integral(self) -> bool:
        return self._etype.kind in ("int", "uint", "bool")

    def is_integral_number(self) -> bool:
        return self._etype.is_integral

    def is_signed(self) -> bool:
        return self._etype.kind in ("int", "float")

    def is_static(self) -> bool:
        return self._etype.name != "dynamic"

    def is_dynamic(self) -> bool:
        return not self.is_static()

    def is_quantized(self) -> bool:
        return self._etype.name in ("i4", "i8", "u1", "u4", "u8", "i16", "u16", "i32", "u32")

    def compatible(self, other: "Type") -> bool:
        return self.is_dynamic() or Type(other).is_dynamic() or self == Type(other)

    def merge(self, other: "Type") -> "Type | None":
        other = Type(other)
        if self.is_dynamic():
            return other
        return self if other.is_dynamic() or other == self else None


for _etype in etypes.BY_NAME.values():
    _t = Type._make(_etype)
    Type._by_name[_etype.name] = _t
    setattr(Type, _etype.name, _t)
Type.undefined = Type._by_name["dynamic"]


class _Element:
    """`element.f32` ...: the element types by name, as in OpenVINO's C++ `ov::element`."""

    def __getattr__(self, name: str) -> Type:
        try:
            return Type._by_name[name]
        except KeyError:
            raise AttributeError(f"no element type {name!r}") from None

    def __dir__(self):
        return list(Type._by_name)


element = _Element()


def as_type(value: Any) -> Type:
    """A `Type`, a numpy dtype, a Python type or an element-type name ("f32")."""
    if isinstance(value, str):
        try:
            return Type.from_name(value.lower())
        except etypes.ModelError:
            raise OVRuntimeError(f"Unsupported element type: {value}") from None
    return Type(value)


# ---------------------------------------------------------------------- dimensions and shapes
_INTERVAL = re.compile(r"^\s*(\d*)\s*\.\.\s*(\d*)\s*$")


class Dimension:
    """A dimension: static (`Dimension(3)`), dynamic (`Dimension()`, `Dimension(-1)`) or an interval
    (`Dimension(1, 8)`, `Dimension("1..8")`; an upper bound of -1 is unbounded)."""

    __slots__ = ("_lo", "_hi")

    def __init__(self, *args):
        if not args:
            lo, hi = 0, None
        elif len(args) == 1 and isinstance(args[0], Dimension):
            lo, hi = args[0]._lo, args[0]._hi
        elif len(args) == 1 and isinstance(args[0], str):
            lo, hi = _parse_dimension(args[0])
        elif len(args) == 1:
            n = _integer(args[0])
            lo, hi = (0, None) if n == -1 else (n, n)
            if n < -1:
                raise OVRuntimeError(f"Cannot create a dimension of length {n}")
        elif len(args) == 2:
            lo, hi = _integer(args[0]), _integer(args[1])
            hi = None if hi == -1 else hi
            lo = max(lo, 0)
            if hi is not None and hi < lo:
                raise OVRuntimeError(f"Dimension interval [{lo}, {hi}] is empty")
        else:
            raise TypeError(f"Dimension takes at most 2 arguments ({len(args)} given)")
        self._lo, self._hi = lo, hi

    @classmethod
    def from_irrun(cls, d) -> "Dimension":
        self = object.__new__(cls)
        self._lo, self._hi = (d, d) if isinstance(d, int) else (d.lo, d.hi)
        return self

    def to_irrun(self):
        """An int for a static dim, else an `irrun.shapes.Dim`."""
        return self._lo if self.is_static else Dim(self._lo, self._hi)

    @property
    def is_static(self) -> bool:
        return self._hi is not None and self._lo == self._hi

    @property
    def is_dynamic(self) -> bool:
        return not self.is_static

    def get_length(self) -> int:
        if not self.is_static:
            raise OVRuntimeError("Cannot get length of dynamic dimension")
        return self._lo

    def get_min_length(self) -> int:
        return self._lo

    def get_max_length(self) -> int:
        return -1 if self._hi is None else self._hi

    min_length = property(get_min_length)
    max_length = property(get_max_length)

    def compatible(self, other) -> bool:
        other = Dimension(other)
        return (self._hi is None or other._lo <= self._hi) and (other._hi is None or self._lo <= other._hi)

    def refines(self, other) -> bool:
        other = Dimension(other)
        return self._lo >= other._lo and (other._hi is None or (self._hi is not None and self._hi <= other._hi))

    def relaxes(self, other) -> bool:
        return Dimension(other).refines(self)

    def same_scheme(self, other) -> bool:
        other = Dimension(other)
        return (self.is_dynamic and other.is_dynamic) or (self.is_static and other.is_static and self._lo == other._lo)

    def to_string(self) -> str:
        if self.is_static:
            return str(self._lo)
        if self._hi is None:
            return "?" if self._lo == 0 else f"{self._lo}.."
        return f"{self._lo}..{self._hi}" if self._lo else f"..{self._hi}"

    __str__ = to_string

    def __repr__(self) -> str:
        return f"<Dimension: {self.to_string()}>"

    def __eq__(self, other) -> bool:
        if isinstance(other, (int, np.integer)) and not isinstance(other, bool):
            other = Dimension(int(other))
        if not isinstance(other, Dimension):
            return NotImplemented
        return (self._lo, self._hi) == (other._lo, other._hi)

    def __hash__(self) -> int:
        return hash((self._lo, self._hi))

    def __index__(self) -> int:
        return self.get_length()

    def __int__(self) -> int:
        return self.get_length()


def _integer(value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"a dimension length must be an integer, not {type(value).__name__}")
    return int(value)


def _parse_dimension(text: str) -> tuple[int, int | None]:
    text = text.strip()
    if text in ("?", "-1"):
        return 0, None
    if text.isdigit():
        return int(text), int(text)
    m = _INTERVAL.match(text)
    if m:
        lo = int(m.group(1)) if m.group(1) else 0
        hi = int(m.group(2)) if m.group(2) else None
        if hi is None or hi >= lo:
            return lo, hi
    raise OVRuntimeError(f'Cannot parse dimension: "{text}"')


def as_dimension(value) -> Dimension:
    """A dim as scripts write it: int (-1 dynamic), `Dimension`, "1..8"/"?", or a (lo, hi) pair."""
    if isinstance(value, Dimension):
        return value
    if isinstance(value, tuple) and len(value) == 2:
        return Dimension(*value)
    return Dimension(value)


class PartialShape:
    """A shape whose dims may be dynamic, or whose rank may be (`PartialShape.dynamic()`).
    `PartialShape([1, 3, -1, Dimension(1, 10)])`, `PartialShape("1,3,?,1..10")`."""

    __slots__ = ("_dims",)

    def __init__(self, value: Any = ()):
        if isinstance(value, PartialShape):
            self._dims = None if value._dims is None else list(value._dims)
        elif isinstance(value, str):
            self._dims = _parse_shape(value)
        elif isinstance(value, Shape):
            self._dims = [Dimension(d) for d in value]
        else:
            try:
                items = list(value)
            except TypeError:
                raise TypeError(f"cannot make a PartialShape of {type(value).__name__}") from None
            self._dims = [as_dimension(d) for d in items]

    @staticmethod
    def dynamic(rank: Any = None) -> "PartialShape":
        shape = PartialShape()
        if rank is None or (isinstance(rank, Dimension) and rank.is_dynamic):
            shape._dims = None
        else:
            shape._dims = [Dimension() for _ in range(int(rank))]
        return shape

    @classmethod
    def from_irrun(cls, shape) -> "PartialShape":
        self = object.__new__(cls)
        self._dims = None if shape is None else [Dimension.from_irrun(d) for d in shape]
        return self

    def to_irrun(self):
        """irrun's form: a tuple of ints and `Dim`s, or None for a dynamic rank."""
        return None if self._dims is None else tuple(d.to_irrun() for d in self._dims)

    def _static_rank(self) -> list[Dimension]:
        if self._dims is None:
            raise OVRuntimeError("Check 'rank().is_static()' failed: the shape has a dynamic rank")
        return self._dims

    @property
    def rank(self) -> Dimension:
        return Dimension() if self._dims is None else Dimension(len(self._dims))

    @property
    def is_static(self) -> bool:
        return self._dims is not None and all(d.is_static for d in self._dims)

    @property
    def is_dynamic(self) -> bool:
        return not self.is_static

    def all_non_negative(self) -> bool:
        return True

    def to_shape(self) -> "Shape":
        if not self.is_static:
            raise OVRuntimeError("to_shape was called on a dynamic shape.")
        return Shape([d.get_length() for d in self._dims])

    def get_shape(self) -> "Shape":
        return self.to_shape()

    def get_min_shape(self) -> "Shape":
        return Shape([d.get_min_length() for d in self._static_rank()])

    def get_max_shape(self) -> "Shape":
        return Shape([INT64_MAX if d.get_max_length() == -1 else d.get_max_length() for d in self._static_rank()])

    def get_dimension(self, index: int) -> Dimension:
        return self[index]

    def compatible(self, other) -> bool:
        other = _as_partial_shape(other)
        if self._dims is None or other._dims is None:
            return True
        return len(self._dims) == len(other._dims) and all(a.compatible(b) for a, b in zip(self._dims, other._dims))

    def refines(self, other) -> bool:
        other = _as_partial_shape(other)
        if other._dims is None:
            return True
        if self._dims is None:
            return False
        return len(self._dims) == len(other._dims) and all(a.refines(b) for a, b in zip(self._dims, other._dims))

    def relaxes(self, other) -> bool:
        return _as_partial_shape(other).refines(self)

    def same_scheme(self, other) -> bool:
        other = _as_partial_shape(other)
        if self._dims is None or other._dims is None:
            return self._dims is None and other._dims is None
        return len(self._dims) == len(other._dims) and all(a.same_scheme(b) for a, b in zip(self._dims, other._dims))

    def to_string(self) -> str:
        if self._dims is None:
            return "[...]"
        return "[" + ",".join(d.to_string() for d in self._dims) + "]"

    __str__ = to_string

    def __repr__(self) -> str:
        return f"<PartialShape: {self.to_string()}>"

    def __len__(self) -> int:
        return len(self._static_rank())

    def __iter__(self):
        return iter(list(self._static_rank()))

    def __getitem__(self, index):
        dims = self._static_rank()
        if isinstance(index, slice):
            return PartialShape(dims[index])
        try:
            return dims[index]
        except IndexError:
            raise IndexError(f"index {index} is out of range for a shape of rank {len(dims)}") from None

    def __setitem__(self, index: int, value) -> None:
        self._static_rank()[index] = as_dimension(value)

    def __eq__(self, other) -> bool:
        try:
            other = _as_partial_shape(other)
        except (TypeError, OVRuntimeError):
            return NotImplemented
        return self._dims == other._dims

    def __hash__(self) -> int:
        return hash(None if self._dims is None else tuple(self._dims))


def _as_partial_shape(value) -> PartialShape:
    return value if isinstance(value, PartialShape) else PartialShape(value)


def _parse_shape(text: str) -> list[Dimension] | None:
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1].strip()
    if text in ("...", "?..."):
        return None
    if not text:
        return []
    return [Dimension(field) for field in text.split(",")]


class Shape(list):
    """A static shape: a list of ints (`Shape([1, 3, 224, 224])`, `Shape("1,3,224,224")`)."""

    def __init__(self, value: Iterable = ()):
        if isinstance(value, str):
            dims = _parse_shape(value)
            if dims is None or not all(d.is_static for d in dims):
                raise OVRuntimeError(f'Cannot make a static Shape of "{value}"')
            value = [d.get_length() for d in dims]
        super().__init__(int(d) for d in value)

    def to_string(self) -> str:
        return "[" + ",".join(str(d) for d in self) + "]"

    __str__ = to_string

    def __repr__(self) -> str:
        return f"<Shape: {self.to_string()}>"

    def __eq__(self, other) -> bool:
        if isinstance(other, PartialShape):
            return other == self
        try:
            return list(self) == [int(d) for d in other]
        except (TypeError, ValueError):
            return NotImplemented

    __hash__ = None


class Strides(list):
    """Byte strides of a tensor."""

    def __str__(self) -> str:
        return ", ".join(str(s) for s in self)

    def __repr__(self) -> str:
        return f"<Strides: {{{self}}}>"


class Layout:
    """A layout such as "NCHW" or "[N,C,H,W]" ("?" and "..." allowed): names only, no conversions."""

    def __init__(self, text: str = ""):
        text = str(text).strip()
        if text.startswith("[") and text.endswith("]"):
            names = [n.strip() for n in text[1:-1].split(",")] if text[1:-1].strip() else []
        elif text in ("", "..."):
            names = None if text == "" else ["..."]
        else:
            names = [c for c in text if not c.isspace()]
        self._names = names

    @staticmethod
    def scalar() -> "Layout":
        layout = Layout()
        layout._names = []
        return layout

    @property
    def empty(self) -> bool:
        return self._names is None

    def has_name(self, name: str) -> bool:
        return bool(self._names) and name.upper() in (n.upper() for n in self._names)

    def get_index_by_name(self, name: str) -> int:
        if not self.has_name(name):
            raise OVRuntimeError(f"Layout {self.to_string()} has no dimension {name!r}")
        return [n.upper() for n in self._names].index(name.upper())

    def to_string(self) -> str:
        return "[...]" if self._names is None else "[" + ",".join(self._names) + "]"

    __str__ = to_string

    def __repr__(self) -> str:
        return f"<Layout: {self.to_string()}>"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            other = Layout(other)
        return isinstance(other, Layout) and self._names == other._names

    def __hash__(self) -> int:
        return hash(self.to_string())
