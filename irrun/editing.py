"""Building and changing graphs of layers for the writer: copies, new Parameters, Converts and
Results in the form OpenVINO's serializer gives them, layer ids and names that are free.

Everything here makes new objects; a parsed document is never changed (a loaded model keeps
running on it).
"""
from __future__ import annotations

import dataclasses
import itertools

from .etypes import ElementType
from .ir import Edge, IRGraph, Layer, Port
from .registry import TensorType
from .shapes import Dim
from .spec import all_specs, format_value


def port_dims(shape) -> tuple[int, ...]:
    """A shape as a port's `<dim>`s: -1 for every dynamic dim (a port keeps no bounds), none for a
    dynamic rank."""
    if shape is None:
        return ()
    return tuple(-1 if isinstance(d, Dim) else int(d) for d in shape)


def new_port(port_id: int | str, t: TensorType, names: tuple[str, ...] = ()) -> Port:
    return Port(str(port_id), 0, 0, t.etype.precision, t.etype, port_dims(t.shape), tuple(names))


def _attr_text(op_type: str, name: str, value) -> str:
    return format_value(all_specs()[(op_type, 1)].attributes[name], value)


def parameter_shape_text(shape) -> str:
    """A Parameter's `shape` attribute as OpenVINO writes a PartialShape: `?,3,1..20,..8,2..`, `...` for
    any rank."""
    return _attr_text("Parameter", "shape", shape)


def parameter_layer(layer_id: str, name: str, t: TensorType, names: tuple[str, ...]) -> Layer:
    """A Parameter of type `t` (its data shape keeps `t`'s bounds; its port, as every port, only -1)."""
    data = {"shape": parameter_shape_text(t.shape),
            "element_type": _attr_text("Parameter", "element_type", t.etype)}
    return Layer(layer_id, name, "Parameter", "opset1", 0, data, None, [], [new_port(0, t, names)],
                 op_type="Parameter", op_version=1)


def constant_layer(layer_id: str, name: str, t: TensorType, names: tuple[str, ...]) -> Layer:
    """A Const of the static type `t`; the writer fills in its `offset` and `size` as it stores the data."""
    data = {"element_type": _attr_text("Constant", "element_type", t.etype),
            "shape": _attr_text("Constant", "shape", t.shape), "offset": "0", "size": "0"}
    return Layer(layer_id, name, "Const", "opset1", 0, data, None, [], [new_port(0, t, names)],
                 op_type="Constant", op_version=1)


def convert_layer(layer_id: str, name: str, t: TensorType, destination: ElementType) -> Layer:
    """A Convert of a tensor of type `t` to `destination`."""
    data = {"destination_type": _attr_text("Convert", "destination_type", destination)}
    return Layer(layer_id, name, "Convert", "opset1", 0, data, None, [new_port(0, t)],
                 [new_port(1, t.like(etype=destination))], op_type="Convert", op_version=1)


def added_result_name(names: tuple[str, ...]) -> str:
    """The name of the Result `add_outputs` makes for a tensor of these names (OpenVINO numbers
    it by a process-wide counter, `Result_130`)."""
    return f"Result/{min(names)}"


def free_name(base: str, taken) -> str:
    """`base`, or `base_1`, `base_2` ... where a name in `taken` is that."""
    name, n = base, 0
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    return name


def inferred_port_types(node, nodes) -> tuple[list, list]:
    """The inferred types of an analysed layer's inputs (its producers' outputs; None where not fed)
    and outputs."""
    inputs = []
    for src in node.inputs:
        producer = nodes.get(src[0]) if src is not None else None
        inputs.append(producer.types[src[1]] if producer is not None and src[1] < len(producer.types) else None)
    return inputs, list(node.types)


def result_layer(layer_id: str, name: str, t: TensorType, output_names: tuple[str, ...] | None) -> Layer:
    return Layer(layer_id, name, "Result", "opset1", 0, {}, None, [new_port(0, t)], [],
                 output_names=output_names or None, op_type="Result", op_version=1)


def openvino_order(roots, producers) -> list[str]:
    """OpenVINO's topological sort (`get_ordered_ops` of a model just read or cloned): a stack seeded
    with `roots` (its Results, sinks, then Parameters; the last is taken first); a node is taken once
    every input's producer is, its inputs pushed last to first.  `producers(node)`: the ids of the
    layers that feed its inputs, in input order (None where nothing does)."""
    stack = list(roots)
    done: set[str] = set()
    order = []
    while stack:
        nid = stack[-1]
        if nid in done:
            stack.pop()
            continue
        pending = [src for src in reversed(producers(nid)) if src is not None and src not in done]
        if pending:
            stack.extend(pending)
        else:
            done.add(nid)
            order.append(nid)
            stack.pop()
    return order


class GraphBuilder:
    """A new graph: layers in the order added, edges between their ports by position."""

    def __init__(self, rt_info=()):
        self.layers: dict[str, Layer] = {}
        self.edges: list[Edge] = []
        self.rt_info = rt_info
        self._ids = itertools.count()
        self._names: set[str] = set()

    def free_id(self, taken=()) -> str:
        while True:
            candidate = str(next(self._ids))
            if candidate not in self.layers and candidate not in taken:
                return candidate

    def free_name(self, base: str, taken=()) -> str:
        """`base`, or `base_1`, `base_2` ... where another layer has that name."""
        return free_name(base, self._names.union(taken))

    def add(self, layer: Layer) -> Layer:
        self.layers[layer.id] = layer
        self._names.add(layer.name)
        return layer

    def connect(self, src: tuple[str, int], dst: tuple[str, int]) -> None:
        """An edge from output `src[1]` of layer `src[0]` to input `dst[1]` of layer `dst[0]`."""
        out_port = self.layers[src[0]].outputs[src[1]]
        in_port = self.layers[dst[0]].inputs[dst[1]]
        self.edges.append(Edge(src[0], out_port.id, dst[0], in_port.id, 0, src[1], dst[1]))

    def graph(self) -> IRGraph:
        return graph_of(self.layers, self.edges, self.rt_info)


def graph_of(layers: dict[str, Layer], edges: list[Edge], rt_info=()) -> IRGraph:
    """An IRGraph of `layers` and the `edges` between their ports (named by id, as in the XML)."""
    def position(ports, port_id):
        return next(i for i, p in enumerate(ports) if p.id == port_id)
    connected = [dataclasses.replace(e, out_index=position(layers[e.from_layer].outputs, e.from_port),
                                     in_index=position(layers[e.to_layer].inputs, e.to_port)) for e in edges]
    sources = {(e.to_layer, e.in_index): (e.from_layer, e.out_index) for e in connected}
    producers = {lid: [sources.get((lid, i)) for i in range(len(layer.inputs))] for lid, layer in layers.items()}
    return IRGraph(layers, connected, sources, producers, rt_info)


def renumber_ports(layer: Layer) -> Layer:
    """`layer` with its port ids counted from 0 over its inputs then its outputs, as the serializer numbers them."""
    inputs = [dataclasses.replace(p, id=str(i), index=i) for i, p in enumerate(layer.inputs)]
    outputs = [dataclasses.replace(p, id=str(len(inputs) + i), index=i) for i, p in enumerate(layer.outputs)]
    return dataclasses.replace(layer, inputs=inputs, outputs=outputs)


def without_rt_info(layer: Layer) -> Layer:
    """`layer` (and the layers of its bodies) without node and port rt_info."""
    bodies = layer.bodies
    if bodies:
        bodies = {tag: IRGraph({lid: without_rt_info(l) for lid, l in body.layers.items()}, body.edges,
                               body.sources, body.producers, body.rt_info)
                  for tag, body in bodies.items()}
    return dataclasses.replace(layer, rt_info=(), bodies=bodies,
                               inputs=[dataclasses.replace(p, rt_info=()) for p in layer.inputs],
                               outputs=[dataclasses.replace(p, rt_info=()) for p in layer.outputs])

