"""`irrun validate --fix`: rewrite what validation proves wrong, or refuse.

What has a safe repair, and what it is:

* E-DECLARED-SHAPE / E-DECLARED-TYPE: a port declares dims, a rank or a precision that
  shape and type inference contradict.  OpenVINO ignores declared dims and precisions
  and infers its own (so the repaired IR computes what the original computes); the
  port gets the inferred ones (-1 where a dim is dynamic).  Every port is checked, input
  ports too, also those validation does not report because their producer's port
  already says the same wrong thing.
* W-DEAD-LAYER: a layer that reaches no Result or Assign.  OpenVINO drops it when it
  reads the IR; so does the repair, with its edges.  A defect inside a dead layer goes
  with it.
* E-EDGE-LAYER / E-EDGE-PORT: an edge to or from a layer or port that does not exist.
  The edge is dropped; if that leaves a live layer's input unfed (the edge came from a
  missing layer), there is nothing to feed it with, and the model is refused.
* E-EDGE-DUP: a second edge into an input.  Dropped when it repeats the first one's source;
  refused when it names another (which one was meant cannot be known).

Anything else (a missing layer, weights out of range, a cycle, duplicate ids, an unknown
op, a bad attribute, inconsistent shapes) has no safe repair: nothing is written.

The repaired IR is written in the IR version the model came in: an IR v10 model stays one,
so that it is read as before (its inputs and outputs converted as reading IR v10 does).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from . import etypes
from .analysis import Analysis, Node, _dims_match
from .diagnostics import Diagnostic
from .editing import graph_of, inferred_port_types, port_dims
from .errors import LayerRef, UsageError
from .ir import Edge, IRGraph, Layer
from .shapes import format_shape
from .writer import IR_VERSION, check_target, constants_from, write_ir

# Defects a repair takes away.
REPAIRABLE = frozenset({"E-DECLARED-SHAPE", "E-DECLARED-TYPE", "W-DEAD-LAYER", "E-EDGE-LAYER", "E-EDGE-PORT",
                        "E-EDGE-DUP"})


@dataclass
class Change:
    """One repair, reported as one line under the code validation reports the defect with."""

    code: str
    message: str
    file: str
    line: int | None = None
    layer: LayerRef | None = None

    def format(self) -> str:
        who = f" {self.layer.describe()}" if self.layer else ""
        return f"{self.file}:{self.line or 0}: fixed {self.code}{who}: {self.message}"


@dataclass
class RepairReport:
    file: str
    changes: list[Change] = field(default_factory=list)
    unrepairable: list[Diagnostic] = field(default_factory=list)   # why nothing was written
    kept: list[Diagnostic] = field(default_factory=list)           # warnings that are not defects to repair
    written: Path | None = None

    @property
    def ok(self) -> bool:
        return not self.unrepairable


class _Repairer:
    def __init__(self, analysis: Analysis, file: str):
        self.analysis = analysis
        self.file = file
        self.changes: list[Change] = []

    def change(self, code: str, message: str, layer: Layer | None = None, line: int | None = None) -> None:
        self.changes.append(Change(code, message, self.file, line if line is not None else (layer.line if layer else None),
                                   layer.ref if layer else None))

    # ------------------------------------------------------------ ports
    def _port(self, node: Node, port, t, what: str, code_shape: bool = True):
        """`port` with the dims and precision of `t` where they contradict it (each change reported)."""
        layer = node.layer
        if t is None:
            return port
        if port.dims != t.shape and _dims_match(port.dims, t.shape) is not None:
            dims = port_dims(t.shape)
            self.change("E-DECLARED-SHAPE", f"{what}: declared {format_shape(port.dims)} -> {format_shape(dims)}",
                        layer, port.line)
            port = dataclasses.replace(port, dims=dims)
        if port.etype is not None and t.etype is not etypes.dynamic and port.etype is not t.etype:
            self.change("E-DECLARED-TYPE", f"{what}: declared precision {port.precision} -> {t.etype.precision}",
                        layer, port.line)
            port = dataclasses.replace(port, precision=t.etype.precision, etype=t.etype)
        return port

    def _ports(self, node: Node, nodes: dict[str, Node]) -> Layer:
        layer = node.layer
        if node.declared_only or node.malformed:
            return layer   # nothing inferred to compare with
        input_types, output_types = inferred_port_types(node, nodes)
        outputs = [self._port(node, p, t, f"output {i}") for i, (p, t) in enumerate(zip(layer.outputs, output_types))]
        inputs = [self._port(node, p, t, f"input {i}") for i, (p, t) in enumerate(zip(layer.inputs, input_types))]
        if all(a is b for a, b in zip(inputs + outputs, layer.inputs + layer.outputs)):
            return layer
        return dataclasses.replace(layer, inputs=inputs, outputs=outputs)

    # ------------------------------------------------------------ graphs
    def graph(self, analysis: Analysis) -> IRGraph:
        graph = analysis.document.graph
        nodes, live = analysis.nodes, analysis.live
        layers: dict[str, Layer] = {}
        for lid, layer in graph.layers.items():
            if lid not in live and layer.op_type != "Parameter":
                self.change("W-DEAD-LAYER", "dropped: it reaches no Result or Assign (OpenVINO drops it too)", layer)
                continue
            node = nodes[lid]
            repaired = self._ports(node, nodes)
            if node.bodies:
                repaired = dataclasses.replace(repaired, bodies={tag: self.graph(body)
                                                                 for tag, body in node.bodies.items()})
            layers[lid] = repaired
        edges = []
        for e in graph.edges:
            if e.in_index is None:   # (the reader connects every edge it can)
                self._dangling(graph, e)
            elif e.from_layer in layers and e.to_layer in layers:   # (else a dropped layer's: reported with it)
                edges.append(e)
        return graph_of(layers, edges, graph.rt_info)

    def _dangling(self, graph: IRGraph, e: Edge) -> None:
        if e.from_layer not in graph.layers or e.to_layer not in graph.layers:
            missing = e.from_layer if e.from_layer not in graph.layers else e.to_layer
            self.change("E-EDGE-LAYER", f"dropped edge {_edge_text(e)}: layer {missing} does not exist", line=e.line)
        elif (e.to_layer, _input_index(graph, e)) in graph.sources:
            self.change("E-EDGE-DUP", f"dropped edge {_edge_text(e)}: it repeats the edge into that input",
                        line=e.line)
        else:
            self.change("E-EDGE-PORT", f"dropped edge {_edge_text(e)}: it names a port that does not exist",
                        line=e.line)


def _edge_text(e: Edge) -> str:
    return f"{e.from_layer}:{e.from_port} -> {e.to_layer}:{e.to_port}"


def _input_index(graph: IRGraph, e: Edge) -> int | None:
    layer = graph.layers.get(e.to_layer)
    return next((p.index for p in layer.inputs if p.id == e.to_port), None) if layer else None


def _scoped_live(analysis: Analysis, scope: str = "") -> set[str]:
    """Every live layer, bodies included, by the id diagnostics name it with (`7/3` inside layer 7's body)."""
    live = set()
    for lid in analysis.live:
        live.add(scope + lid)
        node = analysis.nodes[lid]
        for tag, body in node.bodies.items():
            inner = f"{scope}{lid}/" + ("" if tag == "body" else tag[:-5] + "/")
            live |= _scoped_live(body, inner)
    return live


def _unrepairable(analysis: Analysis, diagnostics: list[Diagnostic], strict: bool) -> tuple[list, list]:
    """(the defects that have no safe repair, the warnings left as they are)."""
    live = _scoped_live(analysis)
    refused, kept = [], []
    for d in diagnostics:
        if d.code == "E-EDGE-DUP":
            # a second edge into an input: safe to drop only when it repeats the first one's source
            if not _repeats_source(analysis, d):
                refused.append(d)
            continue
        if d.code in REPAIRABLE:
            continue
        if d.layer is not None and d.layer.id not in live and d.code != "E-CYCLE":
            continue   # inside a layer the repair drops
        if d.severity == "error" or strict:
            refused.append(d)
        else:
            kept.append(d)
    return refused, kept


def _repeats_source(analysis: Analysis, d: Diagnostic) -> bool:
    graph = analysis.document.graph
    if d.layer is None or "/" in d.layer.id:
        return False   # (inside a body: not worth the bookkeeping; refused)
    for e in graph.edges:
        if e.line == d.line and e.to_layer == d.layer.id and e.in_index is None:
            index = _input_index(graph, e)
            src_layer = graph.layers.get(e.from_layer)
            out = next((p.index for p in src_layer.outputs if p.id == e.from_port), None) if src_layer else None
            return graph.sources.get((e.to_layer, index)) == (e.from_layer, out)
    return False


def repair(path: str | Path, output: str | Path, *, force: bool = False, strict: bool = False) -> RepairReport:
    """Repair the IR at `path` into `output` (.xml, with its .bin); see the module's docstring.

    Nothing is written when a defect has no safe repair (`report.unrepairable` says which)."""
    from .model import _document_and_analysis
    file = str(path)
    source = Path(path)
    check_target(output, (source, source.with_suffix(".bin")), force)
    document, analysis, weights = _document_and_analysis(path)
    try:
        if document.snippet:
            raise UsageError("is a single-layer snippet, not a model: there is no IR to write", file=file)
        diagnostics = list(analysis.diagnostics)
        report = RepairReport(file)
        report.unrepairable, report.kept = _unrepairable(analysis, diagnostics, strict)
        if report.unrepairable:
            return report
        repairer = _Repairer(analysis, file)
        graph = repairer.graph(analysis)
        report.changes = repairer.changes
        # (in the IR version it came in: an IR v10 model stays one, read as IR v10 is read)
        report.written = write_ir(output, graph, name=document.name, constant_bytes=constants_from(weights, file),
                                  protected=(source, source.with_suffix(".bin")), force=force,
                                  version=document.version or IR_VERSION)
        return report
    finally:
        if weights is not None:
            weights.close()

