"""From a parsed document to bound ops and inferred types.

`analyze` binds every layer to its op implementation, parses attributes
against the op's spec, checks the structure, then runs shape inference over
the graph in topological order.  Problems become diagnostics; inference goes
on past a failing layer wherever its outputs can still be described, so one
run reports every problem.
"""
from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass, field

import numpy as np

from . import etypes, partial_values
from .diagnostics import Diagnostics
from .errors import IrrunError
from .ir import EMPTY, IRDocument, IRGraph, Layer
from .registry import Op, TensorType, implementation
from .shapes import ANY, Dim, format_shape, is_static
from .spec import AttrProblem, Attrs, VersionSpec, all_specs, check_spatial_lengths, parse_attrs
from .weights import Weights

# Tensors this small are computed during inference when all inputs are known,
# so shape arithmetic (ShapeOf -> Gather -> Concat -> Reshape) resolves.
FOLD_LIMIT = 1 << 16

# Attribute problems after which the op would run on a default value: skip its inference.
_UNREADABLE_ATTR = ("E-ATTR-MISSING", "E-ATTR-VALUE", "E-ATTR-ENUM", "E-ATTR-LENGTH")

# Ops whose shape function reads more than their attributes, input types and number
# of outputs (an Assign checks its variable's type): never shared between layers.  (Nor
# are layers with sub-graph parts, nor ops that see the model before inference.)
_SEES_THE_MODEL = frozenset({"Assign"})

# Ops an IR needs that are not computations.
SOURCE_TYPES = ("Parameter", "Constant")
SINK_TYPES = ("Result", "Assign")


@dataclass
class LoadContext:
    """What ops may need beyond their attributes; one per loaded model, shared by its bodies."""

    file: str
    weights: Weights | None = None
    # ReadValue/Assign variables (irrun/ops/state.py): variable id -> its ReadValue op,
    # the values kept across calls, and the values Assigns wrote in the call under way.
    variables: dict[str, Op] = field(default_factory=dict)
    state: dict[str, np.ndarray] = field(default_factory=dict)
    assigned: dict[str, np.ndarray] = field(default_factory=dict)
    # Shape inference shared by layers of one kind, attributes and input types (see `_memo_key`).
    shape_memo: dict[tuple, tuple | object] = field(default_factory=dict)


@dataclass(slots=True)
class Node:
    layer: Layer
    op: Op | None = None
    inputs: list[tuple[str, int] | None] = field(default_factory=list)
    types: list[TensorType | None] = field(default_factory=list)
    malformed: bool = False          # wrong port count or unreadable attribute: not inferred
    declared_only: bool = False      # types are the declared ones, not inferred (unsupported or failed)
    bodies: dict[str, "Analysis"] = field(default_factory=dict)   # sub-graph bodies by tag ("body", "then_body")
    # Equal for layers of one kind with equal attributes (see `_OpKind.parse`); None: never
    # share shape inference with another layer.
    signature: int | None = None

    @property
    def id(self) -> str:
        return self.layer.id

    @property
    def body_nodes(self) -> list[dict[str, "Node"]]:
        return [body.nodes for body in self.bodies.values()]


@dataclass
class Analysis:
    document: IRDocument
    nodes: dict[str, Node]
    order: list[str]                 # topological order of every layer (empty on a cycle)
    live: set[str]                   # layers that reach a Result or Assign
    diagnostics: Diagnostics
    context: LoadContext | None = None

    def type_of(self, source: tuple[str, int]) -> TensorType | None:
        node = self.nodes.get(source[0])
        if node is None or source[1] >= len(node.types):
            return None
        return node.types[source[1]]


@dataclass
class _OpKind:
    """What every layer of one (type, version) shares: looked up once per model."""

    spec: VersionSpec | None
    impl: type[Op] | None
    # a layer's `<data>` items -> (parsed attributes, problems, signature): most layers
    # of a type repeat the attributes of another (same strides, same axis ...)
    parsed: dict[tuple, tuple[Attrs, list[AttrProblem], int]] = field(default_factory=dict)
    # (attribute, text) -> (value, problems), for <data> seen for the first time
    values: dict[tuple[str, str], tuple] = field(default_factory=dict)
    supported: bool = field(init=False)
    binds: bool = field(init=False)   # the op sees the model before inference (a ReadValue declares its variable)
    input_counts: range = field(init=False)    # the numbers of inputs and outputs the spec allows
    output_counts: range = field(init=False)

    def __post_init__(self):
        self.supported = self.spec is not None and self.impl is not None
        self.binds = hasattr(self.impl, "on_bind")
        if self.spec is not None:
            self.input_counts, self.output_counts = (range(lo, sys.maxsize if hi is None else hi + 1)
                                                     for lo, hi in (self.spec.input_range, self.spec.output_range))

    def parse(self, data: dict[str, str]) -> tuple[Attrs, list[AttrProblem], int]:
        """Attributes (shared: they are read-only), problems, and a signature that is
        the same for equal `<data>` of this kind and differs from every other."""
        key = tuple(data.items())
        found = self.parsed.get(key)
        if found is None:
            attrs, problems = parse_attrs(self.spec, data, self.values)
            found = self.parsed[key] = (attrs, problems, next(_signatures))
        return found


_signatures = itertools.count()


def _count_problem(what: str, n: int, limits: tuple[int, int | None], verb: str, spec: VersionSpec) -> str | None:
    """`has 3 inputs, Relu-1 takes 1`, or None when `n` is within `limits`."""
    lo, hi = limits
    if lo <= n and (hi is None or n <= hi):
        return None
    want = f"{lo}" if lo == hi else f"{lo}..{hi if hi is not None else ''}"
    return f"has {n} {what}{'s' if n != 1 else ''}, {spec.label} {verb} {want}"


def bind_ops(document: IRDocument, context: LoadContext, diags: Diagnostics) -> dict[str, Node]:
    graph, nodes = document.graph, {}
    producers = graph.producers
    specs = all_specs()
    kinds: dict[tuple[str, int], _OpKind] = {}
    for lid, layer in graph.layers.items():
        inputs = producers.get(lid)
        if inputs is None:   # (a graph not made by `ir.connect`)
            inputs = [graph.sources.get((lid, i)) for i in range(len(layer.inputs))]
        node = nodes[lid] = Node(layer, None, inputs, [], False, False, EMPTY, None)
        if layer.op_type is None:
            continue  # unknown type or version: already reported by the parser
        key = (layer.op_type, layer.op_version)
        kind = kinds.get(key)
        if kind is None:
            kind = kinds[key] = _OpKind(specs.get(key), implementation(*key))
        if not kind.supported:
            # Not a defect of the model: validation goes on from the declared outputs.
            diags.warning("W-OP-UNSUPPORTED", f"{layer.op_type}-{layer.op_version} is a valid OpenVINO operation "
                          f"that irrun does not implement yet; its outputs are taken as declared",
                          layer=layer.ref)
            continue
        spec = kind.spec
        if len(layer.inputs) not in kind.input_counts:
            node.malformed = True
            diags.error("E-OP-INPUTS", _count_problem("input", len(layer.inputs), spec.input_range, "takes", spec),
                        layer=layer.ref)
        if len(layer.outputs) not in kind.output_counts:
            diags.error("E-OP-OUTPUTS", _count_problem("output", len(layer.outputs), spec.output_range, "gives",
                                                       spec), layer=layer.ref)
        data = layer.data
        if layer.output_names is not None and layer.op_type == "Result":
            data = {k: v for k, v in data.items() if k != "output_names"}
        attrs, problems, signature = kind.parsed.get(tuple(data.items())) or kind.parse(data)
        if problems:
            line = layer.data_line or layer.line
            for p in problems:
                diags.add(p.severity, p.code, p.message, layer=layer.ref, line=line)
            node.malformed |= any(p.code in _UNREADABLE_ATTR for p in problems)
        op = kind.impl(spec, attrs)
        op.context = context
        op.layer = layer
        node.op = op
        if kind.binds:
            op.on_bind()   # e.g. a ReadValue declares its variable before any layer is inferred
        elif layer.op_type not in _SEES_THE_MODEL and not (layer.bodies or layer.port_maps or layer.back_edges):
            node.signature = signature
    return nodes


def _topological_order(layers: dict[str, Layer], sources: dict) -> list[str] | None:
    """Kahn's algorithm over the connected edges, generation by generation (as networkx's
    `topological_sort`, so the order is the same as it always was); None on a cycle."""
    consumers: dict[str, list[str]] = {}          # producer -> its consumers, once per edge, in edge order
    pending = dict.fromkeys(layers, 0)            # layer -> edges not yet satisfied
    for (consumer, _), (producer, _) in sources.items():
        fed = consumers.get(producer)
        if fed is None:
            consumers[producer] = [consumer]
        else:
            fed.append(consumer)
        pending[consumer] += 1
    order = [lid for lid, n in pending.items() if n == 0]
    for lid in order:   # grows while it is walked
        fed = consumers.get(lid)
        if fed is None:
            continue
        if len(fed) == 1:
            consumer = fed[0]
            n = pending[consumer] = pending[consumer] - 1
            if n == 0:
                order.append(consumer)
            continue
        # All of this layer's edges first, then its consumers that are ready, in the order
        # they were first fed (a consumer fed twice by it appears once).
        for consumer in fed:
            pending[consumer] -= 1
        for consumer in fed:
            if pending[consumer] == 0:
                order.append(consumer)
                pending[consumer] = -1
    return order if len(order) == len(layers) else None


def _live_layers(nodes: dict[str, Node], sinks: list[str]) -> set[str]:
    """Every layer some sink depends on: one walk up the inputs from all sinks at once."""
    live = set(sinks)
    stack = list(sinks)
    while stack:
        for src in nodes[stack.pop()].inputs:
            if src is not None and src[0] not in live:
                live.add(src[0])
                stack.append(src[0])
    return live


def check_structure(document: IRDocument, nodes: dict[str, Node], diags: Diagnostics) -> tuple[list[str], set[str]]:
    graph: IRGraph = document.graph
    if not document.snippet:
        for node in nodes.values():
            layer = node.layer
            if None in node.inputs:
                for i, src in enumerate(node.inputs):
                    if src is None:
                        broken = graph.broken_inputs.get((layer.id, i))
                        why = "no incoming edge" if broken is None else \
                            f"no working edge: its edge (line {broken}) comes from nowhere"
                        diags.error("E-INPUT-UNCONNECTED", f"input port {layer.inputs[i].id} has {why}",
                                    layer=layer.ref, line=layer.inputs[i].line)
            op_type = layer.op_type
            if op_type == "Parameter" and layer.inputs:
                diags.error("E-PARAMETER-INPUT", "a Parameter takes no inputs", layer=layer.ref)
            if op_type == "Result" and layer.outputs:
                diags.error("E-RESULT-OUTPUT", "a Result has no outputs", layer=layer.ref)
        if not any(l.op_type == "Result" for l in graph.layers.values()):
            diags.error("E-NO-RESULT", "the model has no Result layer, so it computes nothing")
    order = _topological_order(graph.layers, graph.sources)
    if order is None:
        import networkx as nx   # only here: importing it takes a quarter second
        cycle = nx.find_cycle(graph.graph)
        ids = [u for u, *_ in cycle]
        names = " -> ".join(f'{i} "{graph.layers[i].name}"' for i in ids + ids[:1])
        first = graph.layers[ids[0]]
        diags.error("E-CYCLE", f"the graph has a cycle: {names}", layer=first.ref)
        order = []
    sinks = [lid for lid, l in graph.layers.items() if l.op_type in SINK_TYPES]
    live = _live_layers(nodes, sinks)
    if not document.snippet and sinks:
        for lid, layer in graph.layers.items():
            if lid not in live and layer.op_type != "Parameter":
                diags.warning("W-DEAD-LAYER", "does not reach any Result; OpenVINO drops it and irrun skips it",
                              layer=layer.ref)
    return order, live


def declared_type(port) -> TensorType:
    """The type a port's XML declares (snippet inputs)."""
    shape = tuple(ANY if d == -1 else d for d in port.dims)
    return TensorType(shape, port.etype or etypes.dynamic)


def _dims_match(declared: tuple[int, ...], inferred) -> int | None:
    """Index of the first dim that contradicts, -1 for rank, None if consistent."""
    if inferred is None:
        return None
    if len(declared) != len(inferred):
        return -1
    for i, (d, t) in enumerate(zip(declared, inferred)):
        if d == -1:
            continue
        if isinstance(t, int) and t != d:
            return i
        if isinstance(t, Dim) and not t.contains(d):
            return i
    return None


def _compare_declared(node: Node, diags: Diagnostics) -> None:
    layer = node.layer
    for i, (port, t) in enumerate(zip(layer.outputs, node.types)):
        if t is None:
            continue
        bad = None if port.dims == t.shape else _dims_match(port.dims, t.shape)
        if bad is not None:
            why = ""
            if bad >= 0 and t.notes and bad in t.notes:
                why = f"; dim {bad} = {t.notes[bad]}"
            elif bad == -1:
                why = f"; rank {len(port.dims)} declared, {len(t.shape)} inferred"
            diags.error("E-DECLARED-SHAPE", f"output {i}: declared {format_shape(tuple(port.dims))}, "
                        f"inferred {format_shape(t.shape)}{why}", layer=layer.ref, line=port.line, port=i,
                        declared=list(port.dims), inferred=[d if isinstance(d, int) else str(d) for d in t.shape])
        if port.etype is not None and t.etype is not etypes.dynamic and port.etype is not t.etype:
            diags.error("E-DECLARED-TYPE", f"output {i}: declared precision {port.precision}, inferred {t.etype}",
                        layer=layer.ref, line=port.line, port=i)


def _compare_inputs(node: Node, in_types: list[TensorType], nodes: dict[str, Node], diags: Diagnostics) -> None:
    """Declared input dims against what flows in (unless the producer's own port already said it)."""
    for i, (port, t, src) in enumerate(zip(node.layer.inputs, in_types, node.inputs)):
        if port.dims == t.shape:
            continue
        producer_port = nodes[src[0]].layer.outputs[src[1]] if src and src[1] < len(nodes[src[0]].layer.outputs) else None
        if producer_port is not None and producer_port.dims == port.dims:
            continue
        bad = _dims_match(port.dims, t.shape)
        if bad is not None:
            diags.error("E-DECLARED-SHAPE", f"input {i}: declared {format_shape(port.dims)}, "
                        f"but {format_shape(t.shape)} flows in", layer=node.layer.ref, line=port.line, port=i,
                        declared=list(port.dims), inferred=[d if isinstance(d, int) else str(d) for d in t.shape])


def infer_node(node: Node, in_types: list[TensorType], shown: list[TensorType] | None = None) -> list[TensorType]:
    """Shape-infer one node; folds its value when all inputs are known and small.

    `shown`: what the op's shape function gets instead of `in_types` (the same types, watched).
    """
    op = node.op
    out = op.infer(in_types if shown is None else shown)
    if not op.foldable or not in_types:
        return out
    if all(t.value is not None for t in in_types):
        if all(is_static(t.shape) and int(np.prod(t.shape)) <= FOLD_LIMIT for t in out):
            values = op.run(*[t.value for t in in_types])
            if not isinstance(values, tuple):
                values = (values,)
            for t, v in zip(out, values):
                t.value = v
    elif op.spec.type in partial_values.RULES:
        partial_values.propagate(op, in_types, out)
    return out


# ---------------------------------------------------------------- shared shape inference
#
# Big models repeat the same layer (same kind, attributes and input types) thousands
# of times.  A shape function is a function of exactly those (see `_SEES_THE_MODEL`),
# and of the values of its inputs where it reads them.  So the first layer of each
# (kind and attributes, input shapes and types) is inferred with its inputs' values
# watched: if the shape function read none, every such layer shares the result; if
# it read some, the small values (shapes, axes) become part of the key.  Only
# successful inferences without values are shared, and an op that keeps something
# from its shape function (a ConvertLike's destination type) gets it on every layer.

_SMALL_VALUE = 64       # elements: larger values are never part of a key
_UNSHARED = object()    # memo entry: this key's inference is done layer by layer
_BY_VALUE = object()    # memo entry: the shape function reads values; look up with them
_MISSING = object()
_KEEPABLE = (etypes.ElementType, str, int, float, bool, type(None))


class _WatchedValue(TensorType):
    """An input type that records whether the shape function read its value."""

    looked = False

    @property
    def value(self):
        vars(self)["looked"] = True
        return vars(self)["_value"]

    @value.setter
    def value(self, v):
        vars(self)["_value"] = v


def _may_share(node: Node, in_types: list[TensorType], memo: dict | None) -> bool:
    # (No inputs: a Parameter or a Constant, whose attributes are its own.  A sub-graph op's
    # types depend on its bodies: see `bind_ops`.)
    return node.signature is not None and memo is not None and bool(in_types) and not node.malformed \
        and not node.bodies


def _memo_key(node: Node, in_types: list[TensorType]) -> tuple:
    key = [node.signature, len(node.layer.outputs)]
    for t in in_types:
        # (a value known in part is part of the key: shape functions read it)
        key += (t.shape, t.etype.name, t.value is not None if t.partial is None else t.partial)
    return tuple(key)


def _values_key(in_types: list[TensorType]) -> tuple | None:
    """The inputs' small values, False for a large one; None when a value cannot be compared."""
    key = []
    for t in in_types:
        v = t.value
        if v is None:
            key.append(None)
        elif type(v) is not np.ndarray or v.dtype.hasobject:
            return None
        else:
            key.append((v.dtype.str, v.shape, v.tobytes()) if v.size <= _SMALL_VALUE else False)
    return tuple(key)


def _infer_and_remember(node: Node, in_types: list[TensorType], memo: dict, key: tuple,
                        by_value: bool) -> list[TensorType]:
    op = node.op
    before = dict(vars(op))
    shown = [t if t.value is None else _WatchedValue(t.shape, t.etype, t.value, t.notes, t.partial) for t in in_types]
    out = list(infer_node(node, in_types, shown))
    shareable = True
    for i, t in enumerate(out):
        if isinstance(t, _WatchedValue):   # an input handed back as it came: the real one
            out[i] = in_types[next(k for k, s in enumerate(shown) if s is t)]
            shareable = False
    looked = [i for i, t in enumerate(shown) if isinstance(t, _WatchedValue) and t.looked]
    if looked and not by_value:
        memo[key] = _BY_VALUE
        values = _values_key(in_types)
        if values is None:
            return out
        key = (key, values)
    if looked and any(_values_key([in_types[i]]) in (None, (False,)) for i in looked):
        shareable = False   # it read a large value
    after = vars(op)
    kept = {k: v for k, v in after.items() if before.get(k, _MISSING) is not v}
    if (not shareable or len(after) != len(before) + sum(k not in before for k in kept)
            or any(not isinstance(v, _KEEPABLE) for v in kept.values())
            or any(t is None or t.value is not None or t.partial is not None for t in out)):
        memo[key] = _UNSHARED
    else:
        memo[key] = (tuple((t.shape, t.etype, t.notes) for t in out), kept or None)
    return out


def _inferred_types(node: Node, in_types: list[TensorType], diags: Diagnostics,
                    memo: dict | None = None) -> list[TensorType] | None:
    """The op's own shape function on `in_types`; None where it cannot say."""
    layer = node.layer
    op = node.op
    if op is None or node.malformed:
        return None
    key, by_value = None, False
    if _may_share(node, in_types, memo):
        key = _memo_key(node, in_types)
        found = memo.get(key)
        if found is _BY_VALUE:
            values = _values_key(in_types)
            key, by_value = (None, False) if values is None else ((key, values), True)
            found = memo.get(key) if key is not None else None
        if found is _UNSHARED:
            key = None
        elif found is not None:
            outputs, kept = found
            if kept:
                vars(op).update(kept)
            return [TensorType(shape, etype, None, notes) for shape, etype, notes in outputs]
    if op.spec.spatial_attributes:
        spatial = op.spatial_rank(in_types)
        problems = check_spatial_lengths(op.spec, op.attrs, spatial) if spatial is not None else []
        for p in problems:
            diags.error(p.code, p.message, layer=layer.ref, line=layer.data_line or layer.line)
        if problems:
            return None
    try:
        if key is not None:
            return _infer_and_remember(node, in_types, memo, key, by_value)
        return infer_node(node, in_types)
    except IrrunError as exc:
        # A sub-graph op that cannot follow its port map: the map's defects are already reported.
        if not (exc.code == "E-SUBGRAPH" and any(d.code == exc.code and d.layer == layer.ref for d in diags)):
            diags.error(exc.code or "E-SHAPE", exc.message, layer=layer.ref)
    except Exception as exc:  # noqa: BLE001 - a shape-function bug must not hide the report
        diags.error("E-SHAPE", f"shape inference failed: {type(exc).__name__}: {exc}", layer=layer.ref)
    return None


def infer_types(document: IRDocument, nodes: dict[str, Node], order: list[str], diags: Diagnostics,
                given: dict[str, list[TensorType]] | None = None,
                report: bool = True, check_declared: bool = True) -> dict[str, list[TensorType]]:
    """Types of every layer's outputs, in `order`; returned by layer id.

    `given` fixes the types of some layers: a body's Parameters, as the op that
    owns the body feeds them.  With `report` False this is a what-if run for
    that op's shape function: nothing is reported and `node.types` stays as it is.
    With `check_declared` False the types are not compared with the declared ones
    (a graph retyped on purpose: see irrun/precision.py).
    """
    if not report:
        diags = Diagnostics(diags.file)
    types: dict[str, list[TensorType]] = {}
    snippet = document.snippet
    memo = next((getattr(n.op.context, "shape_memo", None) for n in nodes.values() if n.op is not None), None)
    dynamic = etypes.dynamic
    for lid in order:
        node = nodes[lid]
        layer = node.layer
        if snippet:
            in_types = [declared_type(p) for p in layer.inputs]
        else:
            in_types = []
            for src, port in zip(node.inputs, layer.inputs):
                produced = types.get(src[0]) if src is not None else None
                in_types.append(produced[src[1]] if produced is not None and src[1] < len(produced)
                                else declared_type(port))
        outputs = layer.outputs
        if given and lid in given:
            inferred = given[lid]
        else:
            # The usual case in a big model, a layer like one seen before, without a call to
            # `_inferred_types` (which does the rest).
            found = None
            if node.signature is not None and memo is not None and in_types and not node.malformed \
                    and not node.bodies:   # (as `_may_share` and `_memo_key`)
                key = [node.signature, len(outputs)]
                for t in in_types:
                    key += (t.shape, t.etype.name, t.value is not None if t.partial is None else t.partial)
                found = memo.get(tuple(key))
            if type(found) is tuple:
                shared, kept = found
                if kept:
                    vars(node.op).update(kept)
                inferred = [TensorType(shape, etype, None, notes) for shape, etype, notes in shared]
            else:
                inferred = _inferred_types(node, in_types, diags, memo)
        if inferred is None:
            # An unknown op or a failed layer: carry on from what the file declares,
            # so every layer after it is still checked.
            out_types = [declared_type(p) for p in outputs]
        else:
            # Ports the op does not describe (none do, normally) keep their declared types.
            out_types = list(inferred)
            if len(outputs) > len(out_types):
                out_types += [declared_type(p) for p in outputs[len(out_types):]]
        types[lid] = out_types
        if not report:
            continue
        node.types = out_types
        node.declared_only = inferred is None
        if inferred is not None and check_declared:
            # (The usual case, everything as declared, is seen here without a call.)
            for port, t in zip(outputs, out_types):
                if t is not None and (port.dims != t.shape or port.etype is not t.etype and port.etype is not None
                                      and t.etype is not dynamic):
                    _compare_declared(node, diags)
                    break
            if not snippet:
                for port, t in zip(layer.inputs, in_types):
                    if port.dims != t.shape:
                        _compare_inputs(node, in_types, nodes, diags)
                        break
        if node.bodies:
            _infer_bodies(node, diags, check_declared)
    return types


_BODY_OF_MAP = {"port_map": "body", "then_port_map": "then_body", "else_port_map": "else_body"}


def _check_port_maps(layer: Layer, diags: Diagnostics) -> None:
    """port_map / back_edges of TensorIterator, Loop and If name real ports and body layers."""
    outer_in = {p.id for p in layer.inputs}
    outer_out = {p.id for p in layer.outputs}
    for map_tag, entries in layer.port_maps.items():
        body = layer.bodies.get(_BODY_OF_MAP[map_tag])
        if body is None:
            diags.error("E-SUBGRAPH", f"<{map_tag}> without its <{_BODY_OF_MAP[map_tag]}>", layer=layer.ref)
            continue
        for entry in entries:
            kind, line = entry["kind"], entry["line"]
            ext, internal = entry.get("external_port_id"), entry.get("internal_layer_id")
            if kind not in ("input", "output") or ext is None or internal is None:
                diags.error("E-SUBGRAPH", f"<{map_tag}> entry <{kind}> needs external_port_id and internal_layer_id",
                            layer=layer.ref, line=line)
                continue
            ports, want = (outer_in, "Parameter") if kind == "input" else (outer_out, "Result")
            if ext != "-1" and ext not in ports:
                diags.error("E-SUBGRAPH", f"<{map_tag}> {kind} refers to external port {ext}, which the layer "
                            f"does not have", layer=layer.ref, line=line)
            target = body.layers.get(internal)
            if target is None or target.op_type != want:
                what = "no such layer" if target is None else f"a {target.op_type or target.type}"
                diags.error("E-SUBGRAPH", f"<{map_tag}> {kind} refers to body layer {internal} ({what}); "
                            f"it must be a body {want}", layer=layer.ref, line=line)
    body = layer.bodies.get("body")
    for edge in layer.back_edges:
        for end, want in (("from-layer", "Result"), ("to-layer", "Parameter")):
            target = body.layers.get(edge.get(end)) if body else None
            if target is None or target.op_type != want:
                diags.error("E-SUBGRAPH", f"back edge {end}={edge.get(end)} must name a body {want}",
                            layer=layer.ref, line=edge["line"])


def _bind_bodies(document: IRDocument, nodes: dict[str, Node], context: LoadContext,
                 diags: Diagnostics) -> None:
    """Bind and check every sub-graph body (recursively) before anything is inferred.

    The op that owns a body gets it as `op.bodies` (tag -> `Analysis`): its
    shape function infers the body from the types its inputs feed in.
    """
    pending = [nodes]
    while pending:
        for node in pending.pop().values():
            layer = node.layer
            if not layer.bodies and not layer.port_maps:
                continue
            _check_port_maps(layer, diags)
            node.bodies = {}
            for tag, body in layer.bodies.items():
                sub = IRDocument(document.path, document.version, layer.name, body, {}, False, diags)
                body_nodes = bind_ops(sub, context, diags)
                order, live = check_structure(sub, body_nodes, diags)
                node.bodies[tag] = Analysis(sub, body_nodes, order, live, diags, context)
                pending.append(body_nodes)
            if node.op is not None:
                node.op.bodies = node.bodies


def _infer_bodies(node: Node, diags: Diagnostics, check_declared: bool = True) -> None:
    """Validate each body with the Parameter types its op fed it (declared ones if it could not say).

    An op with bodies records them in its `infer` as `self.body_inputs`:
    body tag -> {body Parameter id: TensorType}.
    """
    fed = getattr(node.op, "body_inputs", None) or {}
    for tag, body in node.bodies.items():
        given = {pid: [t] for pid, t in fed.get(tag, {}).items()}
        infer_types(body.document, body.nodes, body.order, diags, given, check_declared=check_declared)


def analyze(document: IRDocument, context: LoadContext, check_declared: bool = True) -> Analysis:
    """`check_declared` False: the declared port dims are not compared (a reshaped model: irrun/reshape.py)."""
    diags = document.diagnostics
    nodes = bind_ops(document, context, diags)
    _bind_bodies(document, nodes, context, diags)
    order, live = check_structure(document, nodes, diags)
    infer_types(document, nodes, order, diags, check_declared=check_declared)
    return Analysis(document, nodes, order, live, diags, context)
