"""The graph as OpenVINO's Python API shows it: `Node`, `Output`, `ConstOutput`, `Input`, rt_info.

A `GraphView` is a read-only view of one loaded irrun model: its layers become `Node`s, their
output ports `Output`s (shapes and types as inferred, names as written), in the order
`Model.get_ordered_ops()` gives: OpenVINO's own topological sort (results, sinks, then
parameters as roots, inputs visited first to last), so scripts that index ops see the same order.
Outputs that `Model.add_outputs` made are Result nodes of their own, as in OpenVINO.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..editing import added_result_name, openvino_order
from ..etypes import ElementType
from .exceptions import OVRuntimeError, not_available
from .types import PartialShape, Shape, Type

_PARAMETER_C_NAMES = {"f32": "float"}


# ---------------------------------------------------------------------- rt_info
class OVAny:
    """A value from rt_info or a property, as OpenVINO wraps it."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def get(self) -> Any:
        return self.value

    def astype(self, kind) -> Any:
        if kind is str:
            return str(self)
        if kind is bool and isinstance(self.value, str):
            return self.value.strip().lower() in ("yes", "true", "1")
        return kind(self.value)

    def aslist(self, kind=str) -> list:
        value = self.value
        items = value if isinstance(value, (list, tuple)) else str(value).split(",") if str(value) else []
        return [kind(v.strip() if isinstance(v, str) else v) for v in items]

    def __str__(self) -> str:
        return str(self.value)

    def __repr__(self) -> str:
        return "<OVAny class>"

    def __eq__(self, other) -> bool:
        other = other.value if isinstance(other, OVAny) else other
        return self.value == other or (isinstance(self.value, str) and str(other) == self.value)

    def __hash__(self) -> int:
        return hash(str(self.value))


class RTMap(Mapping):
    """rt_info: str -> OVAny (nested sections are RTMaps too)."""

    def __init__(self, values: Mapping | None = None):
        self._values = dict(values or {})

    def __getitem__(self, key: str) -> OVAny:
        try:
            value = self._values[key]
        except KeyError:
            raise KeyError(key) from None
        return OVAny(RTMap(value) if isinstance(value, Mapping) else value)

    def __setitem__(self, key: str, value: Any) -> None:
        self._values[key] = value.value if isinstance(value, OVAny) else value

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return "<RTMap>"

    def plain(self) -> dict:
        return dict(self._values)


def rt_info_values(rt_info) -> dict:
    """A layer's or port's rt_info as OpenVINO's RTMap keys it: a versioned attribute
    `<attribute name="fused_names" version="0" value="a,b"/>` as "fused_names_0" -> "a,b"."""
    if isinstance(rt_info, Mapping):
        return dict(rt_info)
    out: dict = {}
    for element in rt_info or ():
        attrs = dict(element.attrs)
        name = attrs.get("name", element.tag)
        key = f"{name}_{attrs['version']}" if "version" in attrs else name
        if element.children:
            out[key] = rt_info_values(element.children)
        else:
            out[key] = attrs.get("value", {k: v for k, v in attrs.items() if k not in ("name", "version")})
    return out


class DiscreteTypeInfo:
    """`node.get_type_info()`: the op's name and the opset its version was introduced in."""

    def __init__(self, name: str, version_id: str):
        self.name = name
        self.version_id = version_id

    def __repr__(self) -> str:
        return f"<DiscreteTypeInfo: {self.name} {self.version_id}>"

    def __eq__(self, other) -> bool:
        return isinstance(other, DiscreteTypeInfo) and (self.name, self.version_id) == (other.name, other.version_id)

    def __hash__(self) -> int:
        return hash((self.name, self.version_id))


# ---------------------------------------------------------------------- ports
class _Port:
    """What `Output` and `ConstOutput` share: a node's output port."""

    __slots__ = ("_node", "_index")

    def __init__(self, node: "Node", index: int):
        self._node, self._index = node, index

    def _desc(self) -> tuple[tuple[str, ...], Any, ElementType]:
        return self._node._graph.output_desc(self._node, self._index)

    def get_node(self) -> "Node":
        return self._node

    node = property(get_node)

    def get_index(self) -> int:
        return self._index

    index = property(get_index)

    def get_names(self) -> set[str]:
        return set(self._desc()[0])

    names = property(get_names)

    def get_any_name(self) -> str:
        names = self._desc()[0]
        if not names:
            raise OVRuntimeError(f"Attempt to get a name for a Tensor without names ({self._node.get_friendly_name()} "
                                 f"output {self._index})")
        return min(names) if len(names) > 1 else names[0]

    any_name = property(get_any_name)

    def get_partial_shape(self) -> PartialShape:
        return PartialShape.from_irrun(self._desc()[1])

    partial_shape = property(get_partial_shape)

    def get_shape(self) -> Shape:
        return self.get_partial_shape().to_shape()

    shape = property(get_shape)

    def get_element_type(self) -> Type:
        return Type(self._desc()[2])

    element_type = property(get_element_type)

    def get_target_inputs(self) -> set["Input"]:
        return set(self._node._graph.consumers(self._node, self._index))

    def get_rt_info(self) -> RTMap:
        return RTMap(self._node._graph.port_rt_info(self._node, self._index))

    rt_info = property(get_rt_info)

    def get_tensor(self) -> "_TensorDescriptor":
        return _TensorDescriptor(self)

    def set_names(self, names) -> None:
        view = self._node._graph
        view.renamed.tensors[view.tensor_of(self._node._id, self._index)] = tuple(sorted(set(names)))

    def add_names(self, names) -> None:
        self.set_names(self.get_names() | set(names))

    def _key(self):
        return (type(self), id(self._node._graph), self._node._id, self._index)

    def __eq__(self, other) -> bool:
        return isinstance(other, _Port) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        names, shape, etype = self._desc()
        return (f"<{type(self).__name__}: names[{', '.join(sorted(names))}] "
                f"shape{PartialShape.from_irrun(shape).to_string()} type: {etype.name}>")


class Output(_Port):
    """A node's output port in a `Model` (`model.output(0)`, `node.output(1)`)."""

    __slots__ = ()

    def get_consumers(self):
        return self.get_target_inputs()


class ConstOutput(_Port):
    """A compiled model's input or output (`compiled.input(0)`): the keys of its results."""

    __slots__ = ()


class _TensorDescriptor:
    def __init__(self, port: _Port):
        self._port = port

    def get_names(self) -> set[str]:
        return self._port.get_names()

    def get_any_name(self) -> str:
        return self._port.get_any_name()

    def get_partial_shape(self) -> PartialShape:
        return self._port.get_partial_shape()

    def get_shape(self) -> Shape:
        return self._port.get_shape()

    def get_element_type(self) -> Type:
        return self._port.get_element_type()

    def set_names(self, names) -> None:
        self._port.set_names(names)

    def add_names(self, names) -> None:
        self._port.add_names(names)

    names = property(get_names)
    any_name = property(get_any_name)


class Input:
    """A node's input port: where it reads from (`get_source_output`)."""

    __slots__ = ("_node", "_index")

    def __init__(self, node: "Node", index: int):
        self._node, self._index = node, index

    def get_node(self) -> "Node":
        return self._node

    def get_index(self) -> int:
        return self._index

    def get_source_output(self) -> Output:
        return self._node.input_value(self._index)

    def get_partial_shape(self) -> PartialShape:
        return self.get_source_output().get_partial_shape()

    def get_shape(self) -> Shape:
        return self.get_source_output().get_shape()

    def get_element_type(self) -> Type:
        return self.get_source_output().get_element_type()

    def get_rt_info(self) -> RTMap:
        return RTMap(rt_info_values(self._node._layer().inputs[self._index].rt_info)
                     if self._index < len(self._node._layer().inputs) else {})

    def __eq__(self, other) -> bool:
        return isinstance(other, Input) and (self._node, self._index) == (other._node, other._index)

    def __hash__(self) -> int:
        return hash((id(self._node), self._index))

    def __repr__(self) -> str:
        out = self.get_source_output()
        return f"<Input: shape{out.get_partial_shape().to_string()} type: {out.get_element_type().get_type_name()}>"


# ---------------------------------------------------------------------- nodes
class Node:
    """One operation of the model (a layer of the IR)."""

    __slots__ = ("_graph", "_id", "_outputs", "__weakref__")

    def __init__(self, graph: "GraphView", node_id: str):
        self._graph, self._id = graph, node_id
        self._outputs: dict[int, _Port] = {}

    def _layer(self):
        return self._graph.layer(self._id)

    # ------------------------------------------------------------ identity
    def get_type_name(self) -> str:
        layer = self._layer()
        return layer.op_type or layer.type

    def get_type_info(self) -> DiscreteTypeInfo:
        return DiscreteTypeInfo(self.get_type_name(), self._layer().version)

    def get_friendly_name(self) -> str:
        return self._graph.renamed.nodes.get(self._id, self._layer().name)

    def set_friendly_name(self, name: str) -> None:
        self._graph.renamed.nodes[self._id] = str(name)

    friendly_name = property(get_friendly_name, set_friendly_name)

    def get_name(self) -> str:
        """A unique name: OpenVINO numbers nodes as it creates them; irrun uses the IR layer id."""
        return f"{self.get_type_name()}_{self._id}"

    name = property(get_name)

    def get_version(self) -> int:
        return self._layer().op_version or 0

    def get_attributes(self) -> dict[str, Any]:
        return self._graph.attributes(self._id)

    def get_rt_info(self) -> RTMap:
        return RTMap(self._graph.rt_info(self._id))

    rt_info = property(get_rt_info)

    # ------------------------------------------------------------ ports
    def get_output_size(self) -> int:
        return self._graph.output_count(self._id)

    def get_input_size(self) -> int:
        return self._graph.input_count(self._id)

    def output(self, index: int) -> Output:
        count = self.get_output_size()
        if not isinstance(index, (int, np.integer)) or not 0 <= index < count:
            raise OVRuntimeError(f"{self._describe()} has {count} output{'s' if count != 1 else ''}; "
                                 f"there is no output {index}")
        index = int(index)
        port = self._outputs.get(index)
        if port is None:
            port = self._outputs[index] = Output(self, index)
        return port

    def outputs(self) -> list[Output]:
        return [self.output(i) for i in range(self.get_output_size())]

    def input(self, index: int) -> Input:
        self._check_input(index)
        return Input(self, int(index))

    def inputs(self) -> list[Input]:
        return [Input(self, i) for i in range(self.get_input_size())]

    def input_value(self, index: int) -> Output:
        self._check_input(index)
        source = self._graph.source(self._id, int(index))
        if source is None:
            raise OVRuntimeError(f"{self._describe()}: input {index} is not connected")
        return self._graph.node(source[0]).output(source[1])

    def input_values(self) -> list[Output]:
        return [self.input_value(i) for i in range(self.get_input_size())]

    def _check_input(self, index) -> None:
        count = self.get_input_size()
        if not isinstance(index, (int, np.integer)) or not 0 <= index < count:
            raise OVRuntimeError(f"{self._describe()} has {count} input{'s' if count != 1 else ''}; "
                                 f"there is no input {index}")

    def get_output_partial_shape(self, index: int) -> PartialShape:
        return self.output(index).get_partial_shape()

    def get_output_shape(self, index: int) -> Shape:
        return self.output(index).get_shape()

    def get_output_element_type(self, index: int) -> Type:
        return self.output(index).get_element_type()

    def get_output_tensor(self, index: int) -> _TensorDescriptor:
        return self.output(index).get_tensor()

    def get_input_partial_shape(self, index: int) -> PartialShape:
        return self.input_value(index).get_partial_shape()

    def get_input_shape(self, index: int) -> Shape:
        return self.input_value(index).get_shape()

    def get_input_element_type(self, index: int) -> Type:
        return self.input_value(index).get_element_type()

    def get_element_type(self) -> Type:
        if self.get_output_size() != 1:
            raise OVRuntimeError(f"get_element_type() must be called on a node with exactly one output "
                                 f"({self._describe()} has {self.get_output_size()})")
        return self.get_output_element_type(0)

    @property
    def shape(self) -> Shape:
        return self.get_output_shape(0)

    def get_output_target_inputs(self, index: int) -> set[Input]:
        return self.output(index).get_target_inputs()

    # ------------------------------------------------------------ constants and variables
    def get_data(self) -> np.ndarray:
        """A Constant's values (irrun's carrier dtype for types NumPy lacks)."""
        if self.get_type_name() != "Constant":
            raise OVRuntimeError(f"{self._describe()} is not a Constant and holds no data")
        return self._graph.constant_value(self._id)

    @property
    def data(self) -> np.ndarray:
        return self.get_data()

    def get_vector(self) -> list:
        return self.get_data().reshape(-1).tolist()

    def get_variable_id(self) -> str:
        if self.get_type_name() not in ("ReadValue", "Assign"):
            raise OVRuntimeError(f"{self._describe()} is not a ReadValue or Assign")
        return self._layer().data.get("variable_id", "")

    # ------------------------------------------------------------ the rest of OpenVINO's Node
    def set_argument(self, *args):
        raise not_available("changing a graph (Node.set_argument)", "irrun models are read-only graphs")

    set_arguments = replace_source_output = set_argument

    def _describe(self) -> str:
        return f"{self.get_type_name()} '{self.get_friendly_name()}'"

    def __repr__(self) -> str:
        shapes = [PartialShape.from_irrun(self._graph.output_desc(self, i)[1]).to_string()
                  for i in range(self.get_output_size())]
        if self.get_type_name() == "Parameter" and self.get_output_size():
            etype = self._graph.output_desc(self, 0)[2]
            shapes.append(_PARAMETER_C_NAMES.get(etype.name, repr(Type(etype))[8:-2]))
        return f"<{self.get_type_name()}: '{self.get_friendly_name()}' ({', '.join(shapes)})>"

    def __eq__(self, other) -> bool:
        return isinstance(other, Node) and other._graph is self._graph and other._id == self._id

    def __hash__(self) -> int:
        return hash((id(self._graph), self._id))


# ---------------------------------------------------------------------- the view
@dataclass
class Renamed:
    """The names a script gave: `node.set_friendly_name`, `port.set_names` / `add_names`."""

    nodes: dict[str, str] = field(default_factory=dict)
    tensors: dict[tuple[str, int], tuple[str, ...]] = field(default_factory=dict)

    def copy(self) -> "Renamed":
        return Renamed(dict(self.nodes), dict(self.tensors))


ADDED = "added:"       # node ids of the Results that add_outputs made: "added:<layer id>:<port>"


@dataclass(frozen=True)
class AddedOutput:
    """An output `Model.add_outputs` made: output `port` of layer `layer_id`, its tensor names,
    and the key irrun's `Model.infer` returns it under."""

    layer_id: str
    port: int
    names: tuple[str, ...]
    key: str

    @property
    def node_id(self) -> str:
        return f"{ADDED}{self.layer_id}:{self.port}"


class GraphView:
    """Nodes and ports of one loaded irrun model, and the Results `add_outputs` gave it.

    `model`: the `irrun.Model`; `added`: the outputs `add_outputs` made, in order.
    """

    def __init__(self, model, added: list[AddedOutput] = (), renamed: Renamed | None = None):
        self.renamed = renamed if renamed is not None else Renamed()
        self._nodes: dict[str, Node] = {}
        self.rebind(model, added)

    def rebind(self, model, added: list[AddedOutput] = ()) -> None:
        """The model after a reshape or add_outputs (or loaded again): the nodes and ports handed
        out stay valid and now describe it, as OpenVINO's do."""
        self.model = model
        self.analysis = model.analysis
        self.layers = model.document.graph.layers
        self.added = list(added)
        self._consumers: dict[tuple[str, int], list[tuple[str, int]]] | None = None
        graph = model.document.graph
        self.parameters = [l.id for l in graph.layers_of_type("Parameter")]
        self.results = [l.id for l in graph.layers_of_type("Result")] + [a.node_id for a in self.added]
        live = self.analysis.live
        self.sinks = [lid for lid, l in self.layers.items() if l.op_type == "Assign" and lid in live]
        self._input_info = dict(zip(self.parameters, model.inputs))
        self._output_info = dict(zip(self.results, model.outputs))
        self._added_names = {a.node_id: a.names for a in self.added}

    # ------------------------------------------------------------ nodes
    def node(self, node_id: str) -> Node:
        node = self._nodes.get(node_id)
        if node is None:
            node = self._nodes[node_id] = Node(self, node_id)
        return node

    def layer(self, node_id: str):
        if node_id.startswith(ADDED):
            return _added_result_layer(self, node_id)
        return self.layers[node_id]

    def added_source(self, node_id: str) -> tuple[str, int]:
        lid, _, port = node_id[len(ADDED):].rpartition(":")
        return lid, int(port)

    def ordered_ids(self) -> list[str]:
        """OpenVINO's topological sort: a stack seeded with the Results, the sinks, then the
        Parameters; a node is taken once every input's producer is (inputs pushed last to first)."""
        def producers(nid):
            sources = (self.source(nid, i) for i in range(self.input_count(nid)))
            return [src[0] if src is not None else None for src in sources]
        return openvino_order(list(self.results) + list(self.sinks) + list(self.parameters), producers)

    def ordered_nodes(self) -> list[Node]:
        return [self.node(nid) for nid in self.ordered_ids()]

    # ------------------------------------------------------------ structure
    def source(self, node_id: str, index: int) -> tuple[str, int] | None:
        if node_id.startswith(ADDED):
            return self.added_source(node_id) if index == 0 else None
        inputs = self.analysis.nodes[node_id].inputs
        return inputs[index] if index < len(inputs) else None

    def input_count(self, node_id: str) -> int:
        return 1 if node_id.startswith(ADDED) else len(self.layer(node_id).inputs)

    def output_count(self, node_id: str) -> int:
        return 1 if node_id.startswith(ADDED) else len(self.layer(node_id).outputs) or \
            (1 if self.layer(node_id).op_type in ("Result", "Assign") else 0)

    def consumers(self, node: Node, index: int) -> list[Input]:
        if self._consumers is None:
            found: dict[tuple[str, int], list[tuple[str, int]]] = {}
            for nid in self.ordered_ids():
                for i in range(self.input_count(nid)):
                    src = self.source(nid, i)
                    if src is not None:
                        found.setdefault(src, []).append((nid, i))
            self._consumers = found
        return [Input(self.node(nid), i) for nid, i in self._consumers.get((node._id, index), [])]

    # ------------------------------------------------------------ descriptions
    def output_desc(self, node: Node, index: int) -> tuple[tuple[str, ...], Any, ElementType]:
        """(tensor names, irrun shape, element type) of output `index` of `node`."""
        names, shape, etype = self._own_desc(node._id, index)
        return self.renamed.tensors.get(self.tensor_of(node._id, index), names), shape, etype

    def tensor_of(self, node_id: str, index: int) -> tuple[str, int]:
        """The output a port's tensor is: a Result's is the one it takes, as in OpenVINO."""
        if node_id.startswith(ADDED) or self.layers[node_id].op_type == "Result":
            return self.source(node_id, 0) or (node_id, index)
        return node_id, index

    def _own_desc(self, nid: str, index: int) -> tuple[tuple[str, ...], Any, ElementType]:
        info = self._input_info.get(nid) or self._output_info.get(nid)
        if info is not None:
            return tuple(info.names), info.shape, info.element_type
        if nid.startswith(ADDED):
            names = self._added_names[nid]
            nid, index = self.added_source(nid)
        else:
            layer = self.layers[nid]
            names = layer.outputs[index].names if index < len(layer.outputs) else ()
        types = self.analysis.nodes[nid].types
        t = types[index] if index < len(types) else None
        if t is None:
            from .. import etypes
            return tuple(names), None, etypes.dynamic
        return tuple(names), t.shape, t.etype

    def attributes(self, node_id: str) -> dict[str, Any]:
        if node_id.startswith(ADDED):
            return {}
        # The attributes written, in the order written (OpenVINO's serializer writes them in the
        # op's own order), typed as irrun's schema reads them (the text where it has no schema).
        anode = self.analysis.nodes[node_id]
        layer = self.layers[node_id]
        attrs = getattr(anode.op, "attrs", None) if anode.op is not None else None
        parsed = dict(attrs.items()) if attrs is not None else {}
        skip = ("offset", "size") if layer.op_type == "Constant" else ()
        return {k: _attribute_value(parsed.get(k, text), text) for k, text in layer.data.items() if k not in skip}

    def rt_info(self, node_id: str) -> dict:
        return {} if node_id.startswith(ADDED) else rt_info_values(self.layers[node_id].rt_info)

    def port_rt_info(self, node: Node, index: int) -> dict:
        if node._id.startswith(ADDED):
            return {}
        outputs = self.layers[node._id].outputs
        return rt_info_values(outputs[index].rt_info) if index < len(outputs) else {}

    def constant_value(self, node_id: str) -> np.ndarray:
        anode = self.analysis.nodes[node_id]
        t = anode.types[0] if anode.types else None
        value = getattr(t, "value", None) if t is not None else None
        if value is None and anode.op is not None:
            value = anode.op.run()
        if value is None:
            raise OVRuntimeError(f"Constant '{self.layers[node_id].name}': its data cannot be read")
        array = np.array(value, copy=True)
        array.flags.writeable = False
        return array


def _attribute_value(value: Any, text: str = "") -> Any:
    from ..shapes import Dim
    if isinstance(value, str):
        return text or value        # (enums as written: OpenVINO gives "INSIDE_SQRT" where irrun reads "inside_sqrt")
    if isinstance(value, ElementType):
        return value.name
    if isinstance(value, Dim):
        return -1
    if isinstance(value, (tuple, list)):
        return [_attribute_value(v) for v in value]
    return value


class _AddedResultLayer:
    """What a Node of an added Result needs of a layer."""

    def __init__(self, name: str):
        self.name = name
        self.op_type = self.type = "Result"
        self.version = "opset1"
        self.op_version = 1
        self.data = {}
        self.rt_info = {}
        self.inputs = [None]
        self.outputs = []


def _added_result_layer(view: GraphView, node_id: str) -> _AddedResultLayer:
    names = view._added_names[node_id]
    return _AddedResultLayer(added_result_name(names) if names else f"Result/{node_id[len(ADDED):]}")
