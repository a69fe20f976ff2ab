"""What a model holds, for `irrun info`: parameters, MACs, shapes, opsets, compression, state.

`model_stats(path)` reads any IR irrun can parse, including models it cannot run (unsupported
operations, defects): where shape inference cannot follow a layer, its declared output types
stand in (`LayerStats.declared_only`).  Nothing here formats text; `ModelStats.to_json()` is
the schema `irrun info --format json` prints (README: "irrun info").
"""
from __future__ import annotations

import re
import weakref
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from .analysis import Analysis
from .compression import find_weight_compression
from .flops import layer_macs
from .model import _document_and_analysis, _unsupported_layers, input_port, output_port
from .registry import TensorType
from .shapes import is_static

SCHEMA_VERSION = 1


def shape_json(shape) -> list | None:
    """A partial shape as JSON: ints, "?" / "2..8" for dynamic dims, null for a dynamic rank."""
    return None if shape is None else [d if isinstance(d, int) else str(d) for d in shape]


def type_json(t: TensorType | None) -> dict:
    if t is None:
        return {"shape": None, "element_type": "dynamic"}
    return {"shape": shape_json(t.shape), "element_type": t.etype.name}


@dataclass
class LayerStats:
    id: str                      # scoped inside bodies: "7/3", "7/then/3"
    name: str
    type: str
    version: int | str
    opset: str                   # the version as the XML writes it: "opset8"
    line: int
    inputs: list[tuple[str, int] | None]     # (producer id, output index), scoped like `id`
    input_types: list[TensorType | None]
    outputs: list[TensorType | None]
    macs: int | None
    live: bool = True            # reaches a Result or an Assign
    declared_only: bool = False  # output types as declared: irrun cannot infer this layer
    parent: str | None = None    # the sub-graph op whose body holds it

    @property
    def label(self) -> str:
        return f"{self.type}-{self.version}"

    def to_json(self) -> dict:
        out = {"id": self.id, "name": self.name, "type": self.type, "version": self.version,
               "opset": self.opset, "line": self.line,
               "inputs": [None if src is None else {"from": src[0], "port": src[1], **type_json(t)}
                          for src, t in zip(self.inputs, self.input_types)],
               "outputs": [type_json(t) for t in self.outputs],
               "macs": self.macs, "live": self.live, "declared_only": self.declared_only}
        if self.parent is not None:
            out["parent"] = self.parent
        return out


@dataclass
class Variable:
    """A ReadValue/Assign variable."""

    id: str
    type: TensorType | None
    read_by: list[str] = field(default_factory=list)      # ReadValue layer ids
    assigned_by: list[str] = field(default_factory=list)  # Assign layer ids

    def to_json(self) -> dict:
        return {"id": self.id, **type_json(self.type), "read_value": self.read_by, "assign": self.assigned_by}


@dataclass
class ModelStats:
    file: str
    name: str
    ir_version: int | None
    inputs: list                          # PortInfo
    outputs: list
    layers: list[LayerStats]              # every layer, bodies' too (after their op), XML order
    parameters: dict[str, int]            # element type -> elements of the weights of that type
    parameter_tensors: dict[str, int]     # element type -> number of weight Constants
    weights_bytes: int | None             # size of the .bin; None when there is none
    compression: list[dict]
    variables: list[Variable]
    errors: int                           # validation's count (run `irrun validate` for them)
    first_error: str | None               # the first of them, as `validate` prints it
    warnings: int
    unsupported: list[str]                # type-version labels irrun cannot run

    # ------------------------------------------------------------ derived
    def top_layers(self) -> Iterator[LayerStats]:
        return (l for l in self.layers if l.parent is None)

    @property
    def operations(self) -> Counter:
        return Counter(l.label for l in self.layers)

    @property
    def opsets(self) -> dict[str, int]:
        """Layers per opset as the XML names it, in the opsets' order (opset2 before opset10)."""
        found = Counter(l.opset for l in self.layers)
        return dict(sorted(found.items(), key=lambda kv: _opset_order(kv[0])))

    @property
    def parameter_count(self) -> int:
        return sum(self.parameters.values())

    def _counted(self) -> list[LayerStats]:
        return [l for l in self.top_layers() if l.live]

    @property
    def macs(self) -> int:
        """Total over the live top-level layers whose count is known (bodies count through their op)."""
        return sum(l.macs for l in self._counted() if l.macs)

    @property
    def uncounted(self) -> list[LayerStats]:
        """Live layers whose MACs are unknown (dynamic shapes, unknown ops)."""
        return [l for l in self._counted() if l.macs is None]

    @property
    def macs_by_type(self) -> dict[str, int]:
        found: Counter = Counter()
        for l in self._counted():
            if l.macs:
                found[l.label] += l.macs
        return dict(found.most_common())

    @property
    def dynamic_tensors(self) -> int:
        """Layer outputs (top level) whose shape is not static."""
        return sum(1 for l in self.top_layers() for t in l.outputs if t is None or not is_static(t.shape))

    def to_json(self) -> dict:
        def port(p):
            return {"name": p.name, "names": list(p.names), "shape": shape_json(p.shape),
                    "element_type": p.element_type.name, "layer": p.layer.id,
                    "dynamic": not is_static(p.shape)}
        return {
            "schema": SCHEMA_VERSION,
            "file": self.file, "name": self.name, "ir_version": self.ir_version,
            "inputs": [port(p) for p in self.inputs],
            "outputs": [port(p) for p in self.outputs],
            "operations": dict(self.operations.most_common()),
            "opsets": self.opsets,
            "parameters": {"total": self.parameter_count, "by_element_type": self.parameters,
                           "tensors_by_element_type": self.parameter_tensors},
            "weights_bytes": self.weights_bytes,
            "macs": {"total": self.macs, "flops": 2 * self.macs, "by_type": self.macs_by_type,
                     "uncounted": [l.id for l in self.uncounted]},
            "dynamic": {"inputs": [p.name for p in self.inputs if not is_static(p.shape)],
                        "tensors": self.dynamic_tensors},
            "compression": self.compression,
            "variables": [v.to_json() for v in self.variables],
            "diagnostics": {"errors": self.errors, "warnings": self.warnings, "first_error": self.first_error,
                            "unsupported": self.unsupported},
            "layers": [l.to_json() for l in self.layers],
        }


# ---------------------------------------------------------------- building

def _opset_order(name: str) -> tuple[str, int]:
    m = re.fullmatch(r"(\D*)(\d+)", name)
    return (m.group(1), int(m.group(2))) if m else (name, -1)


def _layer_stats(analysis: Analysis, parent: str | None) -> Iterator[LayerStats]:
    nodes = analysis.nodes
    for lid, node in nodes.items():
        layer = node.layer
        scope = layer.scope
        try:
            n = layer_macs(analysis, lid) if lid in analysis.live else None
        except Exception:  # noqa: BLE001 - a count must never keep `info` from describing the model
            n = None
        yield LayerStats(
            scope + lid, layer.name, layer.op_type or layer.type,
            layer.op_version if layer.op_version is not None else layer.version, layer.version, layer.line,
            [None if src is None else (scope + src[0], src[1]) for src in node.inputs],
            [None if src is None else analysis.type_of(src) for src in node.inputs],
            list(node.types) if node.types else [None] * len(layer.outputs),
            n, lid in analysis.live, node.declared_only, parent)
        for body in node.bodies.values():
            yield from _layer_stats(body, scope + lid)


def _walk(analysis: Analysis) -> Iterator[tuple[Analysis, str]]:
    for lid, node in analysis.nodes.items():
        yield analysis, lid
        for body in node.bodies.values():
            yield from _walk(body)


_consumer_cache: dict[int, tuple[weakref.ref, dict]] = {}


def _consumers_of(analysis: Analysis) -> dict[str, list[tuple[str, int]]]:
    """Layer id -> (consumer id, input index) of every edge leaving it."""
    key = id(analysis)
    cached = _consumer_cache.get(key)
    if cached is not None and cached[0]() is analysis:
        return cached[1]
    found: dict[str, list[tuple[str, int]]] = {}
    for lid, node in analysis.nodes.items():
        for i, src in enumerate(node.inputs):
            if src is not None:
                found.setdefault(src[0], []).append((lid, i))
    _consumer_cache[key] = (weakref.ref(analysis, lambda _: _consumer_cache.pop(key, None)), found)
    return found


def _is_weight(analysis: Analysis, lid: str, etype, consumers: dict) -> bool:
    """A Constant that holds weights: any floating type, or an integer type that is decompressed
    (consumed by a Convert); integer Constants fed to shapes, axes and indices are not, nor the
    initial values of variables (a KV cache's zeros)."""
    users = [analysis.nodes[c].layer.op_type for c, _ in consumers.get(lid, ())]
    if users and all(u == "ReadValue" for u in users):
        return False
    if etype.is_float:
        return True
    return etype.is_integral and "Convert" in users


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _parameters(analysis: Analysis) -> tuple[dict[str, int], dict[str, int]]:
    """Weight elements and Constants per element type, over the live layers, bodies included.
    A compressed weight counts its logical elements (a u4 [N, K] is N*K), and an f16 weight
    that a Convert decompresses counts once (the Convert is not a Constant)."""
    elements: Counter = Counter()
    tensors: Counter = Counter()
    for graph, lid in _walk(analysis):
        node = graph.nodes[lid]
        if node.layer.op_type != "Constant" or lid not in graph.live:
            continue
        t = node.types[0] if node.types else None
        if t is None or not is_static(t.shape):
            continue
        if _is_weight(graph, lid, t.etype, _consumers_of(graph)):
            elements[t.etype.name] += _numel(t.shape)
            tensors[t.etype.name] += 1
    return dict(elements.most_common()), dict(tensors.most_common())


def _variables(analysis: Analysis) -> list[Variable]:
    found: dict[str, Variable] = {}
    for scope_analysis, lid in _walk(analysis):
        node = scope_analysis.nodes[lid]
        layer = node.layer
        if layer.op_type not in ("ReadValue", "Assign"):
            continue
        vid = layer.data.get("variable_id", "")
        var = found.setdefault(vid, Variable(vid, None))
        if layer.op_type == "ReadValue":
            var.read_by.append(layer.scope + lid)
            if var.type is None and node.types:
                var.type = node.types[0]
        else:
            var.assigned_by.append(layer.scope + lid)
            if var.type is None and node.inputs and node.inputs[0] is not None:
                var.type = scope_analysis.type_of(node.inputs[0])
    return list(found.values())


# ---------------------------------------------------------------- weight compression

_COMPRESSED_KINDS = {"f16": "fp16", "bf16": "bf16", "i8": "int8", "u8": "int8", "i4": "int4", "u4": "int4",
                     "nf4": "nf4", "f8e4m3": "fp8", "f8e5m2": "fp8", "f8e8m0": "fp8", "f4e2m1": "fp4"}


def weight_compression(analysis: Analysis) -> list[dict]:
    """One entry per kind of compressed weight found (irrun/compression.py finds them, bodies
    included): kind ("int4" ...), element_type ("u4"), weights (how many), elements (logical),
    asymmetric (with a zero point), group_sizes ({size: weights}; "channel" / "tensor" for one scale
    per output channel / for the whole weight), consumers ({type-version: n})."""
    found: dict[tuple[str, str], dict] = {}
    for graph in {id(g): g for g, _ in _walk(analysis)}.values():
        for w in find_weight_compression(graph):
            entry = found.setdefault((w.storage,), {
                "kind": _COMPRESSED_KINDS.get(w.storage, w.storage), "element_type": w.storage, "weights": 0,
                "elements": 0, "asymmetric": 0, "group_sizes": Counter(), "consumers": Counter()})
            entry["weights"] += 1
            entry["elements"] += _numel(w.shape)
            entry["asymmetric"] += not w.symmetric
            if w.granularity != "none":
                entry["group_sizes"][w.group_size if w.granularity == "group" else w.granularity] += 1
            for c in w.consumers:
                entry["consumers"][f"{c.type}-{c.version}"] += 1
    out = []
    for entry in found.values():
        entry["group_sizes"] = {str(k): v for k, v in sorted(entry["group_sizes"].items(), key=str)}
        entry["consumers"] = dict(entry["consumers"].most_common())
        out.append(entry)
    return sorted(out, key=lambda e: -e["elements"])


def model_stats(path: str | Path) -> ModelStats:
    """Describe the IR at `path`; raises only `UnreadableFileError` (not an IR at all)."""
    document, analysis, weights = _document_and_analysis(path)
    try:
        graph = document.graph
        diags = analysis.diagnostics
        return ModelStats(
            file=str(document.path), name=document.name, ir_version=document.version,
            inputs=[input_port(analysis, l) for l in graph.layers_of_type("Parameter")],
            outputs=[output_port(analysis, l) for l in graph.layers_of_type("Result")],
            layers=list(_layer_stats(analysis, None)),
            **dict(zip(("parameters", "parameter_tensors"), _parameters(analysis))),
            weights_bytes=weights.size if weights is not None else None,
            compression=weight_compression(analysis),
            variables=_variables(analysis),
            errors=len(diags.errors), warnings=len(diags.warnings),
            first_error=diags.errors[0].format() if diags.errors else None,
            unsupported=sorted({l.label for l in _unsupported_layers(analysis)}))
    finally:
        if weights is not None:
            weights.close()
