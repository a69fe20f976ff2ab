"""Bodies of the sub-graph ops (TensorIterator, Loop, If): port maps, inference, running.

A body is an `Analysis` of its own graph (see `analysis._bind_bodies`).  The
op that owns it reads its `<port_map>` into a `PortMap`, infers the body from
the types its inputs feed in (`infer_body`), and runs it with a `BodyRunner`,
an executor `Plan` built from the body's validated types.

The port map is read as OpenVINO's IR reader reads it (`parse_input_description`,
`parse_output_description`, `parse_purpose_attribute`): entries are taken in
order of `external_port_id`, the first one winning where an id repeats; an
input with `axis` is sliced, one without `axis` whose body Parameter is the
`to-layer` of a back edge is loop-carried, any other is invariant; outputs with
`external_port_id >= 0` are numbered in that order, an output with `axis` is
concatenated over the iterations, one without it is the last iteration's value.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import etypes
from .analysis import Analysis, declared_type, infer_types
from .errors import ModelError
from .executor import Plan
from .ir import Layer
from .registry import TensorType
from .shapes import format_shape
from .watch import TOP, Scope

_SLICE_DEFAULTS = {"start": 0, "stride": 1, "end": -1, "part_size": 1}


@dataclass(frozen=True)
class Slicing:
    """How an input is cut into per-iteration parts, or an output put together from them."""

    axis: int
    start: int
    end: int
    stride: int
    part_size: int


@dataclass(frozen=True)
class BodyInput:
    parameter: str                    # body Parameter layer id
    input: int | None                 # outer input index; None: not fed from outside
    slicing: Slicing | None = None    # a sliced input
    back_edge: str | None = None      # body Result whose value the next iteration gets (loop-carried)
    purpose: str | None = None        # Loop: "current_iteration"


@dataclass(frozen=True)
class BodyOutput:
    result: str                       # body Result layer id
    output: int | None                # outer output index; None: used inside the op only
    slicing: Slicing | None = None    # concatenated over the iterations
    purpose: str | None = None        # Loop: "execution_condition"


def _int(entry: dict, name: str, map_tag: str) -> int:
    text = entry.get(name)
    if text is None:
        return _SLICE_DEFAULTS[name]
    try:
        return int(text)
    except ValueError:
        raise ModelError(f'<{map_tag}> entry at line {entry["line"]}: {name}="{text}" is not an integer',
                         code="E-SUBGRAPH") from None


def _slicing(entry: dict, map_tag: str) -> Slicing | None:
    if entry.get("axis") is None:
        return None
    return Slicing(*(_int(entry, name, map_tag) for name in ("axis", "start", "end", "stride", "part_size")))


def _by_external_id(entries: list[dict], map_tag: str) -> list[dict]:
    """Entries in order of external_port_id, the first of each id kept (as OpenVINO's reader does)."""
    chosen: dict[int, dict] = {}
    for entry in entries:
        text = entry.get("external_port_id")
        try:
            ext = int(text)
        except (TypeError, ValueError):
            raise ModelError(f'<{map_tag}> entry at line {entry["line"]}: external_port_id="{text}" is not an '
                             f"integer", code="E-SUBGRAPH") from None
        chosen.setdefault(ext, entry)
    return [chosen[k] for k in sorted(chosen)]


@dataclass
class PortMap:
    """One body's port map: how the op's inputs feed the body and its Results make the outputs."""

    inputs: list[BodyInput]
    outputs: list[BodyOutput]

    @classmethod
    def read(cls, layer: Layer, map_tag: str, body: Analysis) -> PortMap:
        """Raises ModelError (E-SUBGRAPH) where the map cannot be followed."""
        layers = body.document.graph.layers
        entries = layer.port_maps.get(map_tag, [])
        input_index = {p.id: p.index for p in layer.inputs}
        back_edges: dict[str, str] = {}
        for edge in layer.back_edges:
            back_edges.setdefault(edge.get("to-layer"), edge.get("from-layer"))

        def body_layer(entry: dict, want: str) -> str:
            lid = entry.get("internal_layer_id")
            found = layers.get(lid)
            if found is None or found.op_type != want:
                raise ModelError(f'<{map_tag}> entry at line {entry["line"]}: internal_layer_id="{lid}" is not a '
                                 f"{want} of the body", code="E-SUBGRAPH")
            return lid

        inputs = []
        for entry in _by_external_id([e for e in entries if e["kind"] == "input"], map_tag):
            parameter = body_layer(entry, "Parameter")
            ext = entry["external_port_id"]
            index = None
            if int(ext) >= 0:
                index = input_index.get(ext)
                if index is None:
                    raise ModelError(f'<{map_tag}> input at line {entry["line"]} names external port {ext}, which '
                                     f"is not an input of the layer", code="E-SUBGRAPH")
            slicing = _slicing(entry, map_tag)
            back = None if slicing else back_edges.get(parameter)
            if back is not None:
                body_layer({"internal_layer_id": back, "line": entry["line"]}, "Result")
            inputs.append(BodyInput(parameter, index, slicing, back, entry.get("purpose")))
        outputs, number = [], 0
        for entry in _by_external_id([e for e in entries if e["kind"] == "output"], map_tag):
            result = body_layer(entry, "Result")
            index = None
            if int(entry["external_port_id"]) >= 0:
                index, number = number, number + 1
            outputs.append(BodyOutput(result, index, _slicing(entry, map_tag), entry.get("purpose")))
        if number != len(layer.outputs):
            raise ModelError(f"<{map_tag}> maps {number} output{'s' if number != 1 else ''}, the layer has "
                             f"{len(layer.outputs)}", code="E-SUBGRAPH")
        return cls(inputs, outputs)

    def fed_from_outside(self) -> list[BodyInput]:
        return [i for i in self.inputs if i.input is not None]

    def special_input(self, purpose: str) -> BodyInput | None:
        return next((i for i in self.inputs if i.purpose == purpose), None)

    def special_output(self, purpose: str) -> BodyOutput | None:
        return next((o for o in self.outputs if o.purpose == purpose), None)


def result_sources(body: Analysis) -> dict[str, tuple[str, int] | None]:
    """Body Result id -> the output (layer id, port) it takes."""
    return {l.id: body.nodes[l.id].inputs[0] if body.nodes[l.id].inputs else None
            for l in body.document.graph.layers_of_type("Result")}


def infer_body(body: Analysis, parameters: dict[str, TensorType]) -> dict[str, TensorType]:
    """Types of the body's Results when its Parameters get `parameters` (a what-if run: nothing reported).

    Values are dropped from what is fed in: a body is built once for every
    iteration and every call, so nothing in it may be folded from one value.
    """
    given = {pid: [TensorType(t.shape, t.etype)] for pid, t in parameters.items()}
    types = infer_types(body.document, body.nodes, body.order, body.diagnostics, given, report=False)
    out = {}
    for rid, src in result_sources(body).items():
        if src is not None and src[1] < len(types.get(src[0], ())):
            out[rid] = types[src[0]][src[1]]
        else:
            ports = body.document.graph.layers[rid].inputs
            out[rid] = declared_type(ports[0]) if ports else TensorType(None, etypes.dynamic)
    return out


def fits(shape, actual: tuple[int, ...]) -> bool:
    """Whether a concrete shape is one the partial `shape` allows."""
    if shape is None:
        return True
    if len(shape) != len(actual):
        return False
    return all(d == n if isinstance(d, int) else d.contains(n) for d, n in zip(shape, actual))


def zeros_of(t: TensorType) -> np.ndarray:
    """An all-zero array of a partial type, dynamic dims taken as 0 (what OpenVINO shows for an unset value)."""
    shape = () if t.shape is None else tuple(d if isinstance(d, int) else 0 for d in t.shape)
    return np.zeros(shape, t.etype.carrier)


class BodyRunner:
    """Runs one body: Parameter id -> array in, Result id -> array out.

    The plan is built from the types the body was validated with; each feed
    must fit its Parameter's type, or values folded at load would be wrong.
    """

    def __init__(self, body: Analysis, parameters: list[str], memory_limit: int | None = None,
                 optimize: bool = True):
        self.results = [l.id for l in body.document.graph.layers_of_type("Result")]
        self.expected = {pid: body.nodes[pid].types[0] if body.nodes[pid].types else None for pid in parameters}
        self.layers = body.document.graph.layers
        self.plan = Plan(body, self.results, parameters, memory_limit, optimize=optimize)
        self.plan._pair = False     # (a body runs inside its parent's run: one process, irrun/process_pair.py)

    def __call__(self, feeds: dict[str, np.ndarray], watchers: tuple = (), scope: Scope = TOP) -> dict[str, np.ndarray]:
        for pid, t in self.expected.items():
            value = feeds[pid]
            if t is not None and not fits(t.shape, value.shape):
                layer = self.layers[pid]
                raise ModelError(f'body Parameter {pid} "{layer.name}" was inferred as {format_shape(t.shape)} '
                                 f"but gets {list(value.shape)}")
        return dict(zip(self.results, self.plan.run(feeds, watchers, scope)))
