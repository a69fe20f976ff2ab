"""A loaded model as `reshape` and `add_outputs` left it, as a graph for the writer.

What `openvino.save_model` writes after `Model.reshape` and `Model.add_outputs` (checked against
OpenVINO 2026.4 in tests/test_save_changes.py):

* After a reshape, each reshaped Parameter's `shape` is its new PartialShape (`?,3,1..20,16`),
  and every port, inside bodies too, declares the dims inference gives it now (-1 for every
  dynamic dim, intervals included; no dims for a dynamic rank).  A body Parameter's `shape`
  is the shape its Loop or TensorIterator now gives it.  Layers, names, attributes and
  edges stay as they were.  (OpenVINO's reshape first runs SmartReshape, which may rewrite
  some layers: a Reshape's constant target before a MatMul becomes ShapeOf -> Gather -> Concat,
  ShapeOfs of constants are folded.  irrun reshapes the graph as it is; the files differ there
  and compute the same.)
* After add_outputs, each tensor asked for that no Result takes yet gets a Result of its own,
  after the model's Results, in the order asked.  Its `output_names` are the tensor's names;
  a tensor without names is named by the key `add_outputs` returned for it (`relu:0`), on the
  producer's port too, as OpenVINO names it after the new Result.  OpenVINO names the Result
  `Result_<n>` by a process-wide counter; irrun names it `Result/<tensor name>`, the friendly
  name irrun.openvino reports for it.  OpenVINO writes a model in the order of a fresh
  topological sort, with ids counted 0, 1, 2 ... in that order; a new Result can move what it
  needs forward and so change the ids after it.  An IR written that way (one OpenVINO wrote)
  is written that way again, so its ids are OpenVINO's; any other keeps its layers and ids,
  the Results taking the next free ids.

* Names a script gave (irrun.openvino's `set_friendly_name`, `set_names`, `add_names`): a layer's
  `name` is its new friendly name; a tensor's names go on its producer's port and become the
  `output_names` of every Result that takes it, as OpenVINO writes them.

A model neither reshaped nor extended is its document's graph, untouched (written byte for
byte as it was read).
"""
from __future__ import annotations

import dataclasses
import itertools

from .analysis import Analysis
from .editing import (added_result_name, free_name, graph_of, inferred_port_types, openvino_order, parameter_shape_text,
                      port_dims)
from .ir import Edge, IRGraph, Layer, Port


def reshaped_graph(analysis: Analysis) -> IRGraph:
    """The analysed graph with every port declaring its inferred dims, and each body Parameter its
    inferred shape (bodies included).  Ports whose layer was not inferred keep theirs."""
    graph = analysis.document.graph
    layers = {}
    for lid, layer in graph.layers.items():
        node = analysis.nodes.get(lid)
        if node is None or node.declared_only or node.malformed:
            layers[lid] = layer
            continue
        input_types, output_types = inferred_port_types(node, analysis.nodes)
        new = dataclasses.replace(layer, inputs=[_with_dims(p, t) for p, t in zip(layer.inputs, input_types)],
                                  outputs=[_with_dims(p, t) for p, t in zip(layer.outputs, output_types)])
        if layer.op_type == "Parameter" and layer.scope and output_types and output_types[0] is not None:
            new.data = {**layer.data, "shape": parameter_shape_text(output_types[0].shape)}
        if node.bodies:
            new.bodies = {tag: reshaped_graph(body) for tag, body in node.bodies.items()}
        layers[lid] = new
    return IRGraph(layers, graph.edges, graph.sources, graph.producers, graph.rt_info)


def _with_dims(port: Port, t) -> Port:
    if t is None:
        return port
    dims = port_dims(t.shape)
    return port if dims == port.dims else dataclasses.replace(port, dims=dims)


def extended(graph: IRGraph, added: dict[tuple[str, int], str]) -> IRGraph:
    """`graph` with the Results of `with_added_results`, in OpenVINO's order and ids if `graph` is written in
    them (an IR OpenVINO wrote)."""
    ordered = in_openvino_order(graph)
    graph = with_added_results(graph, added)
    return renumbered(graph) if ordered else graph


def with_added_results(graph: IRGraph, added: dict[tuple[str, int], str]) -> IRGraph:
    """`graph` with a Result for each tensor of `added` ((layer id, output index) -> its key) that no
    Result takes yet, after the other layers, with the next free ids; the edge into each goes after the
    last edge from a layer written no later than its producer (where it goes in a file sorted by source)."""
    layers = dict(graph.layers)
    taken = {graph.sources.get((l.id, 0)) for l in graph.layers.values() if l.op_type == "Result"}
    names_in_use = {l.name for l in graph.layers.values()}
    ids = (str(i) for i in itertools.count(max((int(lid) for lid in layers if lid.lstrip("-").isdigit()),
                                               default=-1) + 1))
    new_edges: list[Edge] = []
    for (lid, index), key in added.items():
        if (lid, index) in taken:
            continue
        taken.add((lid, index))
        producer = layers[lid]
        port = producer.outputs[index]
        names = port.names
        if not names:
            names = (key,)
            outputs = list(producer.outputs)
            outputs[index] = port = dataclasses.replace(port, names=names)
            layers[lid] = producer = dataclasses.replace(producer, outputs=outputs)
        result_id = next(i for i in ids if i not in layers)
        name = free_name(added_result_name(names), names_in_use)
        names_in_use.add(name)
        layers[result_id] = Layer(result_id, name, "Result", "opset1", 0, {}, None,
                                  [Port("0", 0, 0, port.precision, port.etype, port.dims)], [],
                                  output_names=names, op_type="Result", op_version=1)
        new_edges.append(Edge(lid, port.id, result_id, "0", 0))
    return graph_of(layers, _merged(graph, new_edges), graph.rt_info)


def _merged(graph: IRGraph, new_edges: list[Edge]) -> list[Edge]:
    """`graph`'s edges with each of `new_edges` after the last one from a layer written no later than its
    source."""
    position = {lid: i for i, lid in enumerate(graph.layers)}
    last_at = [-1] * len(position)        # layer position -> the last edge from a layer at or before it
    for i, e in enumerate(graph.edges):
        if e.from_layer in position:
            last_at[position[e.from_layer]] = i
    for p in range(1, len(last_at)):
        last_at[p] = max(last_at[p], last_at[p - 1])
    after: dict[int, list[Edge]] = {}
    for e in new_edges:
        after.setdefault(last_at[position[e.from_layer]], []).append(e)
    edges = list(after.get(-1, ()))
    for i, e in enumerate(graph.edges):
        edges.append(e)
        edges.extend(after.get(i, ()))
    return edges


def in_openvino_order(graph: IRGraph) -> bool:
    """Whether `graph` is written as OpenVINO writes it: ids 0, 1, 2 ... in its serializer's order."""
    return list(graph.layers) == [str(i) for i in range(len(graph.layers))] and \
        serializer_order(graph) == list(graph.layers)


def serializer_order(graph: IRGraph) -> list[str] | None:
    """The order OpenVINO's serializer writes the layers of `graph` in: the Parameters, the other layers in
    OpenVINO's topological order (`get_ordered_ops` of a fresh model), the sinks (Assign), the Results;
    None where a layer reaches no Result or Assign (OpenVINO would drop it)."""
    of_type = {t: [lid for lid, l in graph.layers.items() if l.op_type == t] for t in ("Parameter", "Assign", "Result")}
    ends = set().union(*of_type.values())
    order = openvino_order(of_type["Result"] + of_type["Assign"] + of_type["Parameter"],
                           lambda lid: [src[0] if src is not None else None for src in graph.producers.get(lid, ())])
    if len(order) != len(graph.layers):
        return None
    return of_type["Parameter"] + [lid for lid in order if lid not in ends] + of_type["Assign"] + of_type["Result"]


def renumbered(graph: IRGraph) -> IRGraph:
    """`graph` with its layers in OpenVINO's serializer order, their ids counted 0, 1, 2 ... and its edges
    sorted by their source, as OpenVINO writes them (edges of one source keep their order)."""
    order = serializer_order(graph)
    if order is None:
        return graph
    new_id = {lid: str(i) for i, lid in enumerate(order)}
    layers = {new_id[lid]: dataclasses.replace(graph.layers[lid], id=new_id[lid]) for lid in order}
    edges = [dataclasses.replace(e, from_layer=new_id[e.from_layer], to_layer=new_id[e.to_layer]) for e in graph.edges]
    edges.sort(key=lambda e: int(e.from_layer))
    return graph_of(layers, edges, graph.rt_info)


@dataclasses.dataclass
class Names:
    """Names given after loading: layer id -> name; (layer id, output index) -> the tensor's names."""

    layers: dict[str, str] = dataclasses.field(default_factory=dict)
    tensors: dict[tuple[str, int], tuple[str, ...]] = dataclasses.field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.layers or self.tensors)


def renamed(graph: IRGraph, names: Names) -> IRGraph:
    """`graph` with `names` written in: layers renamed, tensors' names on their producers' ports and
    on the Results that take them.  Ids not in `graph` (a Result not yet added) are left alone."""
    layers = dict(graph.layers)
    for lid, name in names.layers.items():
        if lid in layers and layers[lid].name != name:
            layers[lid] = dataclasses.replace(layers[lid], name=name)
    for (lid, index), tensor_names in names.tensors.items():
        producer = layers.get(lid)
        if producer is None or index >= len(producer.outputs):
            continue
        outputs = list(producer.outputs)
        outputs[index] = dataclasses.replace(outputs[index], names=tuple(tensor_names))
        layers[lid] = dataclasses.replace(producer, outputs=outputs)
        for result in graph.layers.values():
            if result.op_type == "Result" and graph.sources.get((result.id, 0)) == (lid, index):
                layers[result.id] = dataclasses.replace(layers[result.id], output_names=tuple(tensor_names) or None)
    return graph_of(layers, graph.edges, graph.rt_info)
