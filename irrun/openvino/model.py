"""`Model`: what `Core.read_model` returns, on a loaded `irrun.Model`.

A Model remembers where it came from (a path, or XML and weights in memory) and the changes made
to it (`reshape`, `add_outputs`), so it can be loaded again: `compile_model` takes the loaded
model over as it is, and a later change to the Model loads a fresh copy first (copy on
write), so a compiled model never changes under its requests, as in OpenVINO.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..model import load
from .exceptions import OVRuntimeError, as_runtime_errors, not_available
from .graph import ADDED, AddedOutput, GraphView, Node, Output, OVAny, Renamed, RTMap, _Port
from .tensor import Tensor
from .types import Dimension, PartialShape, Shape


@dataclass
class Changes:
    """What was done to a model since it was read, in order, to do again on a fresh load."""

    reshapes: list[dict[int, tuple]] = field(default_factory=list)
    added: list[AddedOutput] = field(default_factory=list)

    def copy(self) -> "Changes":
        return Changes(list(self.reshapes), list(self.added))

    def __bool__(self) -> bool:
        return bool(self.reshapes or self.added)

    def apply(self, irrun_model) -> None:
        with as_runtime_errors():
            for shapes in self.reshapes:
                irrun_model.reshape(shapes)
            if self.added:
                irrun_model.add_outputs([irrun_item(irrun_model, a.layer_id, a.port) for a in self.added])


def irrun_item(irrun_model, layer_id: str, port: int) -> tuple[str, int]:
    """What `irrun.Model.add_outputs` takes for output `port` of a layer: its key name and the port."""
    from ..watch import key_names
    return key_names(irrun_model.layers.values())[layer_id], port


@dataclass(frozen=True)
class Source:
    """Where a model's files are: a path, or the XML and weights themselves."""

    xml: Path | None = None
    xml_bytes: bytes | None = None
    weights: Any = None         # bytes-like, for xml_bytes
    name: str = "model"

    def load(self, precision: str = "f32", threads: int | None = None):
        with as_runtime_errors():
            if self.xml is not None:
                return load(self.xml, precision=precision, threads=threads)
            from ..model import load_bytes
            return load_bytes(self.xml_bytes, self.weights, name=self.name, precision=precision, threads=threads)


class Model:
    """A model read from IR.  Building one from nodes (`ov.Model(results, parameters)`) needs
    OpenVINO's graph-building API, which irrun does not have."""

    def __init__(self, *args, **kwargs):
        raise not_available("building a Model from nodes (ov.Model(results, parameters), opsetN)",
                            "build and save the model with OpenVINO, then read the IR here")

    @classmethod
    def _open(cls, source: Source, irrun_model, precision: str = "f32") -> "Model":
        self = object.__new__(cls)
        self._source = source
        self._precision = precision
        self._irrun = irrun_model
        self._shared = False          # a compiled model runs on self._irrun: load a copy before changing it
        self._changes = Changes()
        self._renamed = Renamed()
        self._name = None
        self._rt_overrides: dict = {}
        self._view = None
        self._frozen = False          # a runtime model: read-only
        return self

    # ------------------------------------------------------------ loading and sharing
    def _loaded(self, precision: str | None = None, threads: int | None = None):
        """A freshly loaded irrun model with this Model's changes."""
        irrun_model = self._source.load(precision or self._precision, threads)
        self._changes.apply(irrun_model)
        return irrun_model

    def _writable(self) -> None:
        if self._frozen:
            raise OVRuntimeError("a compiled model's runtime model cannot be changed")
        if self._shared:
            self._irrun = self._loaded()
            self._shared = False
            self._changed()

    def _take(self, precision: str, threads: int | None):
        """The irrun model a compiled model runs (this Model's, where it fits) and the changes in it."""
        if precision == self._precision and not self._shared:
            self._shared = True
            return self._irrun, self._changes.copy()
        return self._loaded(precision, threads), self._changes.copy()

    def _graph(self) -> GraphView:
        if self._view is None:
            self._view = GraphView(self._irrun, self._changes.added, self._renamed)
        return self._view

    def _changed(self) -> None:
        if self._view is not None:
            self._view.rebind(self._irrun, self._changes.added)

    # ------------------------------------------------------------ inputs and outputs
    @property
    def inputs(self) -> list[Output]:
        view = self._graph()
        return [view.node(pid).output(0) for pid in view.parameters]

    @property
    def outputs(self) -> list[Output]:
        view = self._graph()
        return [view.node(rid).output(0) for rid in view.results]

    def input(self, key: Any = None) -> Output:
        return find_port(self.inputs, key, "input", "Input", "parameter")

    def output(self, key: Any = None) -> Output:
        return find_port(self.outputs, key, "output", "Output", "result")

    def get_parameters(self) -> list[Node]:
        return [port.get_node() for port in self.inputs]

    def get_results(self) -> list[Node]:
        view = self._graph()
        return [view.node(rid) for rid in view.results]

    def get_sinks(self) -> list[Node]:
        view = self._graph()
        return [view.node(sid) for sid in view.sinks]

    def get_ordered_ops(self) -> list[Node]:
        return self._graph().ordered_nodes()

    get_ops = get_ordered_ops

    def get_output_size(self) -> int:
        return len(self._graph().results)

    def get_output_op(self, index: int) -> Node:
        return self.output(index).get_node()

    def get_output_partial_shape(self, index: int) -> PartialShape:
        return self.output(index).get_partial_shape()

    def get_output_shape(self, index: int) -> Shape:
        return self.output(index).get_shape()

    def get_output_element_type(self, index: int):
        return self.output(index).get_element_type()

    def get_parameter_index(self, parameter: Node) -> int:
        params = self.get_parameters()
        return params.index(parameter) if parameter in params else -1

    def get_result_index(self, value) -> int:
        if isinstance(value, Node):
            results = self.get_results()
            return results.index(value) if value in results else -1
        outputs = self.outputs
        return outputs.index(value) if value in outputs else -1

    def is_dynamic(self) -> bool:
        return any(port.get_partial_shape().is_dynamic for port in self.inputs + self.outputs) or \
            any(node.get_output_partial_shape(i).is_dynamic for node in self.get_ordered_ops()
                for i in range(node.get_output_size()))

    # ------------------------------------------------------------ names and rt_info
    def get_friendly_name(self) -> str:
        return self._name if self._name is not None else self._irrun.name

    def set_friendly_name(self, name: str) -> None:
        self._name = str(name)

    friendly_name = property(get_friendly_name, set_friendly_name)

    def get_name(self) -> str:
        return self.get_friendly_name()

    def _rt_values(self) -> dict:
        values = _plain(self._irrun.rt_info)
        values.update(self._rt_overrides)
        return values

    def get_rt_info(self, path: Any = None):
        values = self._rt_values()
        if path is None:
            return RTMap(values)
        value = _rt_lookup(values, path)
        return OVAny(RTMap(value) if isinstance(value, Mapping) else value)

    def has_rt_info(self, path: Any) -> bool:
        try:
            _rt_lookup(self._rt_values(), path)
        except OVRuntimeError:
            return False
        return True

    def set_rt_info(self, value: Any, path: Any) -> None:
        keys = [path] if isinstance(path, str) else list(path)
        target = self._rt_overrides
        for key in keys[:-1]:
            target = target.setdefault(key, dict(_rt_lookup(self._rt_values(), keys[:keys.index(key) + 1]))
                                       if self.has_rt_info(keys[:keys.index(key) + 1]) else {})
        target[keys[-1]] = value.value if isinstance(value, OVAny) else value

    # ------------------------------------------------------------ changing the model
    def reshape(self, shapes: Any, variables_shapes: Any = None) -> None:
        """New input shapes, as OpenVINO's `Model.reshape`: one shape (a model of one input), or a
        dict keyed by input index, tensor name or port; a shape is a PartialShape, a list of dims
        (ints, -1, Dimension, (lo, hi) pairs) or a string ("1,3,?,?", "1..8,3")."""
        if variables_shapes:
            raise not_available("reshape(..., variables_shapes)", "irrun infers variable shapes from the model")
        by_index = self._shapes_by_input(shapes)
        self._writable()
        with as_runtime_errors():
            self._irrun.reshape(by_index)
        self._changes.reshapes.append(by_index)
        self._changed()

    def _shapes_by_input(self, shapes: Any) -> dict[int, tuple]:
        inputs = self.inputs
        if isinstance(shapes, Mapping):
            found = {}
            for key, value in shapes.items():
                index = inputs.index(find_port(inputs, key, "input", "Input", "parameter"))
                found[index] = _irrun_shape(value)
            return found
        if len(inputs) != 1:
            raise OVRuntimeError("reshape with one shape must be called on a Model with exactly one parameter "
                                 f"(this one has {len(inputs)}: give a dict of input name -> shape)")
        return {0: _irrun_shape(shapes)}

    def add_outputs(self, outputs: Any) -> list[Output]:
        """More outputs, as OpenVINO's `Model.add_outputs`: tensor names, (operation name, port)
        pairs, `Output` ports, or a list of them.  Returns the new outputs."""
        items = outputs if isinstance(outputs, list) else [outputs]
        wanted = [self._output_source(item) for item in items]
        self._writable()
        found = []
        for lid, port in wanted:
            existing = self._existing_output(lid, port)
            if existing is None:
                with as_runtime_errors():
                    (key,) = self._irrun.add_outputs([irrun_item(self._irrun, lid, port)])
                # (a tensor without names is named by its key, as irrun's writer names it: irrun/changed.py)
                names = self._graph().node(lid).output(port).get_names() or {key}
                self._changes.added.append(AddedOutput(lid, port, tuple(sorted(names)), key))
                self._changed()
                existing = self.outputs[-1]
            found.append(existing)
        return found

    def _existing_output(self, lid: str, port: int) -> Output | None:
        view = self._graph()
        for rid in view.results:
            if view.source(rid, 0) == (lid, port):
                return view.node(rid).output(0)
        return None

    def _output_source(self, item: Any) -> tuple[str, int]:
        view = self._graph()
        if isinstance(item, _Port):
            node = item.get_node()
            if node._graph is not view:
                raise OVRuntimeError(f"{item!r} is not a port of this model")
            if node._id.startswith(ADDED) or node.get_type_name() == "Result":
                return view.source(node._id, 0)
            return node._id, item.get_index()
        if isinstance(item, str):
            for node in view.ordered_nodes():
                for i in range(node.get_output_size()):
                    if node.get_type_name() != "Result" and item in node.output(i).get_names():
                        return node._id, i
            raise OVRuntimeError(f"Model::add_output. Tensor name '{item}' was not found.")
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
            name, port = item
            node = next((n for n in view.ordered_nodes() if n.get_friendly_name() == name), None)
            if node is None:
                raise OVRuntimeError(f"Model::add_output. Operation with name '{name}' was not found.")
            if not isinstance(port, (int, np.integer)) or not 0 <= port < node.get_output_size():
                raise OVRuntimeError(f"Cannot add output to port {port} operation {name} has only "
                                     f"{node.get_output_size()} outputs.")
            return node._id, int(port)
        raise TypeError(f"add_outputs takes tensor names, (operation name, port) pairs or Output ports, "
                        f"not {type(item).__name__}")

    # ------------------------------------------------------------ the rest
    def evaluate(self, output_tensors: list, input_tensors: list, evaluation_context: Any = None) -> bool:
        """Run the model once on `input_tensors`, writing `output_tensors` (resized as needed)."""
        with as_runtime_errors():
            result = self._irrun.infer([t.data if isinstance(t, Tensor) else np.asarray(t) for t in input_tensors])
        values = [result[i] for i in range(len(self._irrun.outputs))]     # (by position: see Results)
        for target, value in zip(output_tensors, values):
            target.shape = value.shape
            target.data[...] = value
        return True

    def validate_nodes_and_infer_types(self) -> None:
        """Shapes and types are inferred when the model is read and after every reshape."""

    def clone(self) -> "Model":
        copy = object.__new__(Model)
        copy.__dict__.update(self.__dict__)
        copy._changes = self._changes.copy()
        copy._renamed, copy._rt_overrides = self._renamed.copy(), dict(self._rt_overrides)
        copy._view, copy._frozen = None, False
        self._shared = copy._shared = True
        return copy

    __copy__ = clone

    def __deepcopy__(self, memo) -> "Model":
        return self.clone()

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc) -> None:
        pass

    def __repr__(self) -> str:
        return describe("Model", self.get_friendly_name(), self.inputs, self.outputs)

    def __getattr__(self, name: str):
        if name in _GRAPH_EDITING:
            raise not_available(f"Model.{name}", "irrun models are read-only graphs")
        raise AttributeError(f"'Model' object has no attribute '{name}'")


_GRAPH_EDITING = {"add_parameters", "add_results", "add_sinks", "remove_parameter", "remove_result",
                  "remove_sink", "replace_parameter", "add_variables", "remove_variable", "get_variables",
                  "get_variable_by_id"}


def describe(kind: str, name: str, inputs: list, outputs: list) -> str:
    """A model's repr as OpenVINO writes it (its ports shown as ConstOutputs)."""
    def ports(items):
        return ",\n".join("<ConstOutput:" + repr(p).split(":", 1)[1] for p in items)
    return f"<{kind}: '{name}'\ninputs[\n{ports(inputs)}\n]\noutputs[\n{ports(outputs)}\n]>" if kind == "Model" \
        else f"<{kind}:\ninputs[\n{ports(inputs)}\n]\noutputs[\n{ports(outputs)}\n]>"


def find_port(ports: list, key: Any, kind: str, title: str, node_kind: str):
    """`input(key)` / `output(key)`: key None (the only one), an index, a tensor name, or a port."""
    if key is None:
        if len(ports) != 1:
            raise OVRuntimeError(f"{kind}() must be called on a Model with exactly one {node_kind} "
                                 f"(this one has {len(ports)}).")
        return ports[0]
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        if not 0 <= key < len(ports):
            raise IndexError(f"{kind} index {key} is out of range: there {'is' if len(ports) == 1 else 'are'} "
                             f"{len(ports)} {kind}{'s' if len(ports) != 1 else ''}")
        return ports[int(key)]
    if isinstance(key, str):
        for port in ports:
            if key in port.get_names():
                return port
        raise OVRuntimeError(f"{title} for tensor name '{key}' is not found.")
    if isinstance(key, _Port):
        if key in ports:
            return key
        names = key.get_names()
        for port in ports:
            if names and port.get_names() == names:
                return port
        raise OVRuntimeError(f"{title} {key!r} is not found.")
    raise TypeError(f"{kind}() takes an index, a tensor name or a port, not {type(key).__name__}")


def _irrun_shape(value: Any) -> tuple:
    if isinstance(value, PartialShape):
        shape = value
    elif isinstance(value, Dimension):
        shape = PartialShape([value])
    else:
        try:
            shape = PartialShape(value)
        except TypeError:
            raise TypeError(f"a shape must be a PartialShape, a list of dims or a string, "
                            f"not {type(value).__name__}") from None
    dims = shape.to_irrun()
    if dims is None:
        raise not_available("a dynamic rank (PartialShape.dynamic())", "irrun runs models whose inputs have a rank")
    return dims


def _plain(rt_info) -> dict:
    if isinstance(rt_info, Mapping):
        return {k: _plain(v) if isinstance(v, Mapping) else v for k, v in rt_info.items()}
    return {}


def _rt_lookup(values: dict, path: Any):
    keys = [path] if isinstance(path, str) else list(path)
    value: Any = values
    for key in keys:
        if not isinstance(value, Mapping) or key not in value:
            raise OVRuntimeError(f"Cannot get runtime attribute. Path to runtime attribute is incorrect: "
                                 f"{'/'.join(map(str, keys))}")
        value = value[key]
    return value
