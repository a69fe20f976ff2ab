"""Declarative op specs: `specs/<Type>.toml` and the opset catalogue.

A spec file declares, per version, the op's inputs, outputs and attribute
schema.  It is the single source for attribute parsing, attribute diagnostics,
`irrun ops` and the README's op table.  Kernels live in `irrun/ops/`.

    type = "AvgPool"
    category = "pooling"
    summary = "..."
    [v1]
    inputs = ["data"]               # "name?" optional, "name..." variadic
    outputs = ["output"]
    [v1.attributes]
    kernel = { type = "ints", required = true, min = 1, length = "spatial" }
    pads_begin = { type = "ints", required = true, default = [], missing = "no padding" }
    [v14]
    extends = "v1"                  # inherit, then override attributes
    legacy = ["output_padding"]     # attributes old tools wrote and OpenVINO ignores (not inherited)

`required = true`: OpenVINO's op spec requires the attribute.  With no `default`,
OpenVINO's IR reader refuses a layer without it, and so does irrun (E-ATTR-MISSING).
With a `default`, the reader silently uses that value (the op's constructed default):
irrun runs with it too and `validate` warns (W-ATTR-DEFAULTED).  `missing` says what
the default means where its text alone does not ("every stride 1" for an empty list).
"""
from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache, cached_property, lru_cache
from pathlib import Path
from typing import Any

from . import etypes
from .shapes import format_shape, parse_partial_shape


def specs_dir() -> Path:
    installed = Path(__file__).with_name("specs")
    return installed if installed.is_dir() else Path(__file__).resolve().parent.parent / "specs"


ATTR_TYPES = ("int", "ints", "float", "floats", "bool", "string", "strings", "enum",
              "etype", "shape")
# Types whose texts convert faster than they are looked up (and are often unique: offsets).
_CHEAP_TYPES = ("int", "float", "bool", "string")


@dataclass(frozen=True)
class AttrSpec:
    name: str
    type: str
    required: bool = False
    default: Any = None
    values: tuple[str, ...] | None = None     # allowed values (enum, etype)
    min: float | None = None                  # every number >= min
    length: str | int | None = None           # "spatial", or a fixed count
    doc: str = ""
    missing: str = ""                         # what the default means (see the module docstring)

    @property
    def defaulted(self) -> bool:
        """Required by the op spec, but OpenVINO's reader fills in a default when it is absent."""
        return self.required and self.default is not None

    @property
    def py_name(self) -> str:
        return self.name.replace("-", "_")


@dataclass(frozen=True)
class PortSpec:
    name: str
    optional: bool = False
    variadic: bool = False


@dataclass(frozen=True)
class VersionSpec:
    type: str
    version: int
    category: str
    inputs: tuple[PortSpec, ...]
    outputs: tuple[PortSpec, ...]
    attributes: dict[str, AttrSpec]
    summary: str = ""
    #: attributes the Model Optimizer or POT wrote that OpenVINO ignores: read without a W-ATTR-UNKNOWN
    legacy: frozenset[str] = frozenset()

    @property
    def label(self) -> str:
        return f"{self.type}-{self.version}"

    def count_range(self, ports: tuple[PortSpec, ...]) -> tuple[int, int | None]:
        lo = sum(1 for p in ports if not p.optional and not p.variadic)
        if any(p.variadic for p in ports):
            return max(lo, 1), None
        return lo, len(ports)

    @cached_property
    def input_range(self):
        return self.count_range(self.inputs)

    @cached_property
    def output_range(self):
        return self.count_range(self.outputs)

    @cached_property
    def attribute_plan(self) -> tuple[tuple[str, AttrSpec, bool], ...]:
        """(name, spec, whether parsed texts are worth remembering) per attribute, for `parse_attrs`."""
        return tuple((name, a, a.type not in _CHEAP_TYPES) for name, a in self.attributes.items())

    @cached_property
    def py_names(self) -> tuple[str, ...]:
        return tuple(a.py_name for a in self.attributes.values())

    @cached_property
    def spatial_attributes(self) -> tuple[AttrSpec, ...]:
        """Attributes with `length = "spatial"` (most ops have none)."""
        return tuple(a for a in self.attributes.values() if a.length == "spatial")


def _ports(names: list[str]) -> tuple[PortSpec, ...]:
    out = []
    for n in names:
        if n.endswith("..."):
            out.append(PortSpec(n[:-3], variadic=True))
        elif n.endswith("?"):
            out.append(PortSpec(n[:-1], optional=True))
        else:
            out.append(PortSpec(n))
    return tuple(out)


class SpecFileError(Exception):
    pass


def _load_spec_file(path: Path) -> dict[int, VersionSpec]:
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    type_name = doc["type"]
    raw_versions = {k: v for k, v in doc.items() if re.fullmatch(r"v\d+", k)}
    resolved: dict[str, dict] = {}

    def resolve(key: str) -> dict:
        if key in resolved:
            return resolved[key]
        table = dict(raw_versions[key])
        base = table.pop("extends", None)
        if base:
            merged = dict(resolve(base))
            merged.pop("legacy", None)   # what one version's writers added is that version's own
            merged["attributes"] = {**merged.get("attributes", {}), **table.pop("attributes", {})}
            merged.update(table)
            table = merged
        resolved[key] = table
        return table

    versions = {}
    for key in raw_versions:
        table = resolve(key)
        attrs = {}
        for name, a in table.get("attributes", {}).items():
            if a.get("type") not in ATTR_TYPES:
                raise SpecFileError(f"{path.name}: attribute {name} has unknown type {a.get('type')}")
            attrs[name] = AttrSpec(name=name, type=a["type"], required=a.get("required", False),
                                   default=a.get("default"),
                                   values=tuple(a["values"]) if "values" in a else None,
                                   min=a.get("min"), length=a.get("length"), doc=a.get("doc", ""),
                                   missing=a.get("missing", ""))
        v = int(key[1:])
        versions[v] = VersionSpec(type=type_name, version=v, category=doc.get("category", "misc"),
                                  inputs=_ports(table.get("inputs", [])),
                                  outputs=_ports(table.get("outputs", ["output"])),
                                  attributes=attrs, summary=doc.get("summary", ""),
                                  legacy=frozenset(table.get("legacy", ())))
    return versions


class SpecTable(Mapping):
    """(type, version) -> VersionSpec, reading `specs/<Type>.toml` when a type is first asked
    for: loading a model reads the specs of its own ops (a dozen files), not all 205 (100 ms)."""

    def __init__(self, directory: Path):
        self._directory = directory
        self._by_type: dict[str, dict[int, VersionSpec]] = {}
        self._complete = False

    def _versions(self, type_name: str) -> dict[int, VersionSpec]:
        found = self._by_type.get(type_name)
        if found is None:
            path = self._directory / f"{type_name}.toml"
            # (a type name is only a file name if it is a plain word)
            plain = type_name.isidentifier() and type_name != "opsets"
            found = _load_spec_file(path) if plain and path.is_file() else {}
            self._by_type[type_name] = found
        return found

    def __getitem__(self, key: tuple[str, int]) -> VersionSpec:
        type_name, version = key
        return self._versions(type_name)[version]

    def _load_all(self) -> None:
        if not self._complete:
            for path in sorted(self._directory.glob("*.toml")):
                if path.name != "opsets.toml":
                    self._versions(path.stem)
            self._complete = True

    def __iter__(self):
        self._load_all()
        return iter(sorted((t, v) for t, versions in self._by_type.items() for v in versions))

    def __len__(self) -> int:
        self._load_all()
        return sum(len(versions) for versions in self._by_type.values())


@cache
def all_specs() -> SpecTable:
    return SpecTable(specs_dir())


# ---------------------------------------------------------------- opset catalogue

def _parse_members(text: str) -> frozenset[int]:
    members = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        members.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(members)


def _read_catalogue(text: str) -> dict[str, dict[str, str]]:
    """opsets.toml, which holds only `[Type]` headers, `version = "opsets"` lines and comments:
    read line by line, 20 times faster than `tomllib` (16 ms of every load).  Anything else in
    the file is an error (a test checks that this agrees with `tomllib`)."""
    doc: dict[str, dict[str, str]] = {}
    section = None
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("[") and line.endswith("]"):
            section = doc.setdefault(line[1:-1].strip(), {})
            continue
        key, sep, value = (part.strip() for part in line.partition("="))
        if section is None or not sep or not key.isdigit() or not re.fullmatch(r'"[0-9,-]+"', value):
            raise ValueError(f"opsets.toml line {number}: not a [Type] header or a version = \"opsets\" line")
        section[key] = value[1:-1]
    return doc


_CATALOGUE_HEADER = re.compile(r"^[ \t]*\[[ \t]*(\w+)[ \t]*\][ \t]*(?:#.*)?$", re.MULTILINE)


class _Catalogue(Mapping):
    """opsets.toml read as it is asked: its `[Type]` headers found by one search (0.3 ms), a type's
    versions read by `_read_catalogue` when first asked for (the whole file so took 2 ms of every
    load, which asks for a dozen types; a test checks that both readings agree)."""

    def __init__(self, text: str):
        self._text = text
        headers = list(_CATALOGUE_HEADER.finditer(text))
        ends = [h.start() for h in headers[1:]] + [len(text)]
        self._sections = {h.group(1): (h.start(), end) for h, end in zip(headers, ends)}
        self._read: dict[str, dict[int, frozenset[int]]] = {}

    def __getitem__(self, type_name: str) -> dict[int, frozenset[int]]:
        found = self._read.get(type_name)
        if found is None:
            start, end = self._sections[type_name]
            versions = _read_catalogue(self._text[start:end])[type_name]
            found = self._read[type_name] = {int(v): _parse_members(m) for v, m in versions.items()}
        return found

    def __iter__(self):
        return iter(self._sections)

    def __len__(self) -> int:
        return len(self._sections)


@cache
def opset_catalogue() -> Mapping[str, dict[int, frozenset[int]]]:
    """Canonical op type -> {version -> opsets containing it}."""
    return _Catalogue((specs_dir() / "opsets.toml").read_text(encoding="utf-8"))


# Serializer spellings that differ from the C++ type names.
TYPE_ALIASES = {"const": "Constant", "relu": "Relu", "prelu": "PRelu", "softmax": "Softmax"}
# Version strings the IR reader redirects to another opset.
_OPSET_REDIRECTS = {("MVN", "opset1"): "opset2", ("ROIPooling", "opset1"): "opset2",
                    ("ReorgYolo", "opset1"): "opset2"}
_OPSET6_FOR_EXTENSION = {"GRUCell", "RNNCell", "Proposal"}


@cache
def _types_by_lower() -> dict[str, str]:
    return {t.lower(): t for t in opset_catalogue()}


def canonical_type(type_name: str) -> str | None:
    lower = type_name.lower()
    return TYPE_ALIASES.get(lower) or _types_by_lower().get(lower)


class VersionLookupError(Exception):
    def __init__(self, message: str, code: str):
        super().__init__(message)
        self.code = code


@cache
def resolve_version(type_name: str, version: str) -> tuple[str, int]:
    """(`type`, `version` attribute) -> (canonical type, op version number)."""
    canonical = canonical_type(type_name)
    if canonical is None:
        raise VersionLookupError(f'unknown operation type "{type_name}"', "E-OP-UNKNOWN")
    versions = opset_catalogue()[canonical]
    known = ", ".join(f"{canonical}-{v}" for v in sorted(versions))
    version = _OPSET_REDIRECTS.get((canonical, version), version)
    if version in ("experimental", "extension") and (canonical in _OPSET6_FOR_EXTENSION
                                                     or canonical.startswith("ExperimentalDetectron")):
        version = "opset6"
    m = re.fullmatch(r"opset(\d+)", version or "")
    if not m:
        raise VersionLookupError(f'{canonical} has no version "{version}" (versions: {known})', "E-OP-VERSION")
    opset = int(m.group(1))
    for v, members in versions.items():
        if opset in members:
            return canonical, v
    raise VersionLookupError(f"{canonical} is not in {version} (versions: {known})", "E-OP-VERSION")


# ---------------------------------------------------------------- attribute parsing

class Attrs:
    """Parsed attribute values; `attrs.exclude_pad` or `attrs["exclude-pad"]`.

    Read-only: layers with equal `<data>` share one (a big model has 10^5 layers).
    """

    def __init__(self, values: dict[str, Any]):
        vars(self)["_values"] = values
        vars(self).update((k.replace("-", "_"), v) for k, v in values.items())

    def __setattr__(self, name, value):
        raise AttributeError(f"attributes are read-only (setting {name})")

    __delattr__ = __setattr__

    def __getitem__(self, name):
        return self._values[name]

    def get(self, name, default=None):
        return self._values.get(name, default)

    def items(self):
        return self._values.items()

    def copy(self) -> "Attrs":
        """Attrs of their own over the same values (which are immutable: numbers, strings, tuples)."""
        clone = Attrs.__new__(Attrs)
        vars(clone).update(vars(self))
        return clone

    def replaced(self, changes: dict[str, Any]) -> "Attrs":
        """New attributes: these with `changes` (attribute name -> value) applied."""
        return Attrs({**self._values, **changes})

    def __repr__(self):
        return f"Attrs({self._values!r})"


@dataclass
class AttrProblem:
    code: str
    attribute: str
    message: str
    severity: str = "error"


_BOOLS = {"true": True, "false": False, "1": True, "0": False}


_INTEGER = re.compile(r"[+-]?\d+")


def _number(text: str, kind: type):
    if kind is int and text.isdecimal():   # the usual case (Const offsets and sizes): no regex
        return int(text)
    text = text.strip()
    if kind is int:
        if not _INTEGER.fullmatch(text):
            raise ValueError(f'"{text}" is not an integer')
        return int(text)
    value = float(text)
    return value


def _list(text: str, kind: type) -> list:
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if not text.strip():
        return []
    return [_number(part, kind) for part in text.split(",")]


@lru_cache(maxsize=4096)
def _shape(text: str):
    """Shapes repeat (every Const of a kind has one); the result is an immutable tuple."""
    return parse_partial_shape(text)


def convert_value(spec: AttrSpec, text: str):
    """Text from the XML -> Python value; raises ValueError with a reason."""
    t = spec.type
    if t == "int":
        return _number(text, int)
    if t == "float":
        return _number(text, float)
    if t == "ints":
        return tuple(_list(text, int))
    if t == "floats":
        return tuple(_list(text, float))
    if t == "bool":
        value = _BOOLS.get(text.strip().lower())
        if value is None:
            raise ValueError(f'"{text}" is not a boolean (true/false)')
        return value
    if t == "string":
        return text
    if t == "strings":
        return tuple(s.strip() for s in text.split(",")) if text.strip() else ()
    if t == "enum":
        value = text.strip().lower()
        if spec.values and value not in spec.values:
            raise ValueError(f'"{text}" is not one of {", ".join(spec.values)}')
        return value
    if t == "etype":
        etype = etypes.BY_NAME.get(text.strip()) or (etypes.dynamic if text.strip() == "undefined" else None)
        if etype is None:
            raise ValueError(f'"{text}" is not an element type')
        if spec.values and etype.name not in spec.values:
            raise ValueError(f'"{text}" is not one of {", ".join(spec.values)}')
        return etype
    if t == "shape":
        try:
            return _shape(text)
        except Exception as exc:  # noqa: BLE001 - reported as a malformed value
            raise ValueError(str(exc)) from None
    raise AssertionError(t)


def format_value(spec: AttrSpec, value) -> str:
    """A Python value -> its text in `<data>`, as OpenVINO's serializer writes it (the inverse of
    `convert_value`): lists as `1, 2`, booleans as `true`, shapes as `1,3,?,1..10` (`...` for any
    rank), element types by name."""
    t = spec.type
    if t == "bool":
        return "true" if value else "false"
    if t in ("ints", "floats", "strings"):
        return ", ".join(format_number(v) if t == "floats" else str(v) for v in value)
    if t == "float":
        return format_number(value)
    if t == "etype":
        return value.name
    if t == "shape":
        return format_shape(value)[1:-1]
    return str(value)


def format_number(value: float) -> str:
    """A float attribute as OpenVINO's serializer writes it: the shortest text that reads back the same."""
    value = float(value)
    return str(int(value)) if value.is_integer() and abs(value) < 1e16 else repr(value)


def _default(spec: AttrSpec):
    if spec.default is None:
        return None
    if spec.type in ("ints", "floats", "strings"):
        return tuple(spec.default)
    if spec.type == "etype":
        return etypes.BY_NAME[spec.default]
    if spec.type == "shape":
        return parse_partial_shape(spec.default)
    return spec.default


def _missing(a: AttrSpec) -> AttrProblem:
    """A required attribute that is absent: an error, unless OpenVINO's reader fills it in."""
    name = a.name
    if not a.defaulted:
        return AttrProblem("E-ATTR-MISSING", name, f'missing required attribute "{name}"')
    meaning = f" ({a.missing})" if a.missing else ""
    return AttrProblem("W-ATTR-DEFAULTED", name,
                       f'missing required attribute "{name}": OpenVINO reads the layer with the default '
                       f'{name}="{format_value(a, _default(a))}"{meaning}, and so does irrun', "warning")


def _parse_value(a: AttrSpec, text: str) -> tuple[Any, list[AttrProblem]]:
    """One attribute's value (its default when unreadable) and what is wrong with it."""
    name = a.name
    try:
        value = convert_value(a, text)
    except (ValueError, OverflowError) as exc:
        code = "E-ATTR-ENUM" if a.type in ("enum", "etype") and a.values else "E-ATTR-VALUE"
        return _default(a), [AttrProblem(code, name, f'attribute {name}="{text}": {exc}')]
    problems = []
    if a.min is not None:
        numbers = value if isinstance(value, tuple) else (value,)
        bad = [n for n in numbers if isinstance(n, (int, float)) and not math.isnan(n) and n < a.min]
        if bad:
            problems.append(AttrProblem("E-ATTR-RANGE", name,
                                        f'attribute {name}="{text}": values must be >= {a.min:g}'))
    if isinstance(a.length, int) and len(value) != a.length:
        problems.append(AttrProblem("E-ATTR-LENGTH", name,
                                    f'attribute {name}="{text}" has {len(value)} values, expected {a.length}'))
    return value, problems


def parse_attrs(spec: VersionSpec, raw: dict[str, str],
                memo: dict[tuple[str, str], tuple[Any, list[AttrProblem]]] | None = None
                ) -> tuple[Attrs, list[AttrProblem]]:
    """Parse a layer's `<data>` against its schema; never raises.

    `memo` (one per spec) keeps each (attribute, text) already parsed: layers of
    one type share most attribute values even where their `<data>` differ.
    """
    values: dict[str, Any] = {}
    problems: list[AttrProblem] = []
    for name, a, remember in spec.attribute_plan:
        text = raw.get(name)
        if text is None:
            if a.required:
                problems.append(_missing(a))
            values[name] = _default(a)
            continue
        if a.type == "int" and text.isdecimal() and (a.min is None or int(text) >= a.min):
            values[name] = int(text)   # the usual int (a Const's offset and size): nothing to say about it
            continue
        if memo is None or not remember:
            value, found = _parse_value(a, text)
        else:
            parsed = memo.get((name, text))
            if parsed is None:
                parsed = memo[(name, text)] = _parse_value(a, text)
            value, found = parsed
        values[name] = value
        if found:
            problems += found
    if not raw.keys() <= spec.attributes.keys():
        for name in raw:
            if name not in spec.attributes and name not in spec.legacy:
                problems.append(AttrProblem("W-ATTR-UNKNOWN", name,
                                            f'unknown attribute "{name}" for {spec.label} (ignored)', "warning"))
    attrs = Attrs.__new__(Attrs)
    fields = vars(attrs)
    fields["_values"] = values
    fields.update(zip(spec.py_names, values.values()))
    return attrs, problems


def check_spatial_lengths(spec: VersionSpec, attrs: Attrs, spatial_rank: int) -> list[AttrProblem]:
    """Attributes with `length = "spatial"` must have one value per spatial dim."""
    problems = []
    for a in spec.spatial_attributes:
        name, value = a.name, attrs.get(a.name)
        if value is not None and len(value) not in (spatial_rank,) \
                and not (len(value) == 0 and (a.defaulted or not a.required)):
            problems.append(AttrProblem("E-ATTR-LENGTH", name,
                                        f"attribute {name} has {len(value)} values for {spatial_rank} spatial "
                                        f"dimension{'s' if spatial_rank != 1 else ''}"))
    return problems
