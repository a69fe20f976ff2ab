"""Writing IR: a graph of layers as an IR v11 `.xml` and its `.bin`, as `openvino.save_model` writes them.

The XML is laid out as OpenVINO's serializer lays it out (src/core/src/pass/serialize.cpp,
written through pugixml): tab indentation, `<x ... />` for empty elements, its escaping
of attribute values, ports as `id`, `precision`, `names`, and the child order of the
sub-graph layers (a Loop's port map and back edges before its ports, an If's else map
before its then map).  Layers, ports, attributes, names and rt_info are written as they
were read, so an IR that OpenVINO wrote comes back byte for byte, and loading and saving
again changes nothing.

Constants are encoded from their values (`ElementType.encode`, the inverse of the
decoder that read them) and identical data is stored once, at the offset where it was
first written, in the order the layers are written (a body's constants where its layer
is), which is the serializer's order too.

Both files are written through temporary files renamed into place (`arrays.atomic_write`):
an interrupted save leaves the old files, never half-written ones.
"""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import os
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Callable

from .arrays import atomic_write
from .changed import Names, extended, renamed, reshaped_graph
from .errors import IrrunError, ModelError, UsageError
from .editing import convert_layer, graph_of, without_rt_info
from .ir import Edge, IRGraph, Layer, Port, RtInfo, join_names, v10_interface_type
from .spec import all_specs, parse_attrs
from .weights import Weights

IR_VERSION = 11

# The port maps, back edges and bodies of the sub-graph ops, in the order the serializer
# leaves them: it prepends a TensorIterator's or Loop's ports to the layer, then puts each
# port map before everything and the back edges right after the port map, and appends
# the bodies.
_LOOP_TYPES = ("TensorIterator", "Loop")


def escape(text: str) -> str:
    """An attribute value as pugixml writes it: `&`, `<` and `"` as entities, control characters
    as two-digit character references (`&#09;`); `>` and `'` as they are."""
    if not text.isprintable() or "&" in text or "<" in text or '"' in text:
        text = text.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;")
        if not text.isprintable():
            text = "".join(f"&#{ord(c):02d};" if ord(c) < 32 else c for c in text)
    return text


def _attributes(items) -> str:
    return "".join(f' {k}="{escape(str(v))}"' for k, v in items)


class ConstantStore:
    """The `.bin` being written: each distinct run of bytes once, at the offset it was first written at."""

    def __init__(self, file: IO[bytes]):
        self.file = file
        self.size = 0
        self._offsets: dict[tuple[int, bytes], int] = {}

    def add(self, data: bytes) -> int:
        key = (len(data), hashlib.blake2b(data, digest_size=16).digest())
        offset = self._offsets.get(key)
        if offset is None:
            offset = self._offsets[key] = self.size
            self.file.write(data)
            self.size += len(data)
        return offset


ConstantBytes = Callable[[Layer], bytes]


def constants_from(weights: Weights | None, file: str) -> ConstantBytes:
    """The bytes a Const layer's data stands for: its values read from `weights` and encoded again,
    then whatever its `size` holds past them (OpenVINO keeps a Const's `size` bytes as it read them:
    an empty Const of one byte stays one byte)."""
    spec = all_specs()[("Constant", 1)]

    def data(layer: Layer) -> bytes:
        attrs, problems = parse_attrs(spec, layer.data)
        problems = [p for p in problems if p.severity == "error"]
        if weights is None or problems:
            why = problems[0].message if problems else "the model has no .bin"
            raise ModelError(f"cannot read its data: {why}", file=file, layer=layer.ref)
        values = weights.read(attrs.offset, attrs.size, attrs.element_type, attrs.shape)
        encoded = attrs.element_type.encode(values)
        if attrs.size > len(encoded):
            encoded += weights.bytes(attrs.offset + len(encoded), attrs.size - len(encoded))
        return encoded
    return data


class _XmlWriter:
    """The XML text of one IR, line by line."""

    def __init__(self, store: ConstantStore, constant_bytes: ConstantBytes):
        self.lines: list[str] = []
        self.store = store
        self.constant_bytes = constant_bytes

    def element(self, depth: int, tag: str, attrs=(), children: Callable[[int], None] | None = None,
                text: str | None = None) -> None:
        head = "\t" * depth + f"<{tag}{_attributes(attrs)}"
        if text is not None:
            self.lines.append(f"{head}>{text}</{tag}>")
        elif children is None:
            self.lines.append(f"{head} />")
        else:
            self.lines.append(head + ">")
            children(depth + 1)
            self.lines.append("\t" * depth + f"</{tag}>")

    def rt_info(self, depth: int, elements: RtInfo, always: bool = False) -> None:
        if not elements:
            if always:
                self.element(depth, "rt_info")
            return
        self.element(depth, "rt_info", children=lambda d: self._rt_elements(d, elements))

    def _rt_elements(self, depth: int, elements: RtInfo) -> None:
        for e in elements:
            self.element(depth, e.tag, e.attrs,
                         (lambda d, kids=e.children: self._rt_elements(d, kids)) if e.children else None)

    def port(self, depth: int, port: Port, is_output: bool) -> None:
        attrs = [("id", port.id)]
        if port.precision is not None:
            attrs.append(("precision", port.precision))
        if is_output and port.names:
            attrs.append(("names", join_names(port.names)))
        if not port.dims and not port.rt_info:
            self.element(depth, "port", attrs)
            return

        def children(d):
            for dim in port.dims:
                self.element(d, "dim", text=str(dim))
            self.rt_info(d, port.rt_info)
        self.element(depth, "port", attrs, children)

    def ports(self, depth: int, tag: str, ports: list[Port]) -> None:
        if ports:
            self.element(depth, tag, children=lambda d: [self.port(d, p, tag == "output") for p in ports])

    def data(self, depth: int, layer: Layer) -> None:
        data = layer.data
        if layer.op_type == "Constant":
            blob = self.constant_bytes(layer)
            data = dict(data, offset=str(self.store.add(blob)), size=str(len(blob)))
        if data:
            self.element(depth, "data", data.items())

    def layer(self, depth: int, layer: Layer) -> None:
        attrs = [("id", layer.id), ("name", layer.name), ("type", layer.type), ("version", layer.version)]
        if layer.output_names:
            attrs.append(("output_names", join_names(layer.output_names)))
        self.element(depth, "layer", attrs, lambda d: self._layer_parts(d, layer))

    def _layer_parts(self, depth: int, layer: Layer) -> None:
        maps, bodies = layer.port_maps, layer.bodies
        if layer.op_type in _LOOP_TYPES:
            self._port_map(depth, "port_map", maps.get("port_map"))
            if layer.back_edges:
                self.element(depth, "back_edges", children=lambda d: [
                    self.element(d, "edge", _entry(e)) for e in layer.back_edges])
            self.ports(depth, "input", layer.inputs)
            self.ports(depth, "output", layer.outputs)
            self.data(depth, layer)
            self.rt_info(depth, layer.rt_info)
        else:
            self._port_map(depth, "else_port_map", maps.get("else_port_map"))
            self._port_map(depth, "then_port_map", maps.get("then_port_map"))
            self._port_map(depth, "port_map", maps.get("port_map"))
            self.data(depth, layer)
            self.rt_info(depth, layer.rt_info)
            self.ports(depth, "input", layer.inputs)
            self.ports(depth, "output", layer.outputs)
        for tag in ("body", "then_body", "else_body"):
            if tag in bodies:
                self.element(depth, tag, children=lambda d, body=bodies[tag]: self.graph(d, body))

    def _port_map(self, depth: int, tag: str, entries: list[dict] | None) -> None:
        if entries is not None:
            self.element(depth, tag, children=lambda d: [
                self.element(d, e["kind"], _entry(e)) for e in entries])

    def graph(self, depth: int, graph: IRGraph) -> None:
        self.element(depth, "layers", children=lambda d: [self.layer(d, layer) for layer in graph.layers.values()])
        self.element(depth, "edges", children=lambda d: [
            self.element(d, "edge", (("from-layer", e.from_layer), ("from-port", e.from_port),
                                     ("to-layer", e.to_layer), ("to-port", e.to_port))) for e in graph.edges]
                     if graph.edges else None)
        self.rt_info(depth, graph.rt_info, always=True)


def _entry(entry: dict):
    """A port-map entry or back edge's attributes as read (without what the reader added)."""
    return [(k, v) for k, v in entry.items() if k not in ("kind", "line")]


def check_target(path: str | Path, protected=(), force: bool = False) -> tuple[Path, Path]:
    """The `.xml` and `.bin` to write; refuses a name without `.xml`, a missing directory, and
    (unless `force`) overwriting any of the `protected` files (the model's own)."""
    xml = Path(path)
    if xml.suffix.lower() != ".xml":
        raise UsageError(f"{xml}: an IR file name must end in .xml (its weights go beside it, in .bin)")
    bin_path = xml.with_suffix(".bin")
    if not xml.parent.is_dir():
        raise UsageError(f"{xml}: no such directory: {xml.parent}")
    refuse_overwrite((xml, bin_path), protected, force)
    return xml, bin_path


def refuse_overwrite(targets, protected=(), force: bool = False, what: str = "the model's own input file") -> None:
    """Refuses (unless `force`) to write any of `targets` that is one of the `protected` files (`what`
    they are, for the message), however the path is spelled."""
    if force:
        return
    for target in targets:
        for source in protected:
            if Path(target).exists() and Path(source).exists() and os.path.samefile(target, source):
                raise UsageError(f"{target} is {what}; refusing to overwrite it "
                                 f"(pass force=True, or --force on the command line)")


def write_ir(path: str | Path, graph: IRGraph, *, name: str, constant_bytes: ConstantBytes,
             protected=(), force: bool = False, version: int = IR_VERSION) -> Path:
    """Write `graph` as `path` (.xml) and the `.bin` beside it; returns the .xml path."""
    xml, bin_path = check_target(path, protected, force)
    try:
        with ExitStack() as files:
            xml_file = files.enter_context(atomic_write(xml))
            # (entered last, renamed first: the .xml that names the new weights lands after them)
            store = ConstantStore(files.enter_context(atomic_write(bin_path)))
            writer = _XmlWriter(store, constant_bytes)
            writer.element(0, "net", (("name", name), ("version", str(version))),
                           lambda d: writer.graph(d, graph))
            lines = writer.lines
            lines.insert(0, '<?xml version="1.0"?>')
            lines.append("")
            xml_file.write("\n".join(lines).encode("utf-8"))
    except IrrunError:
        raise
    except OSError as exc:
        raise IrrunError(f"cannot write {xml}: {exc.strerror or exc}", file=str(xml)) from None
    return xml


def save(model, path: str | Path, *, force: bool = False, names: Names | None = None,
         name: str | None = None) -> Path:
    """`Model.save`: the model as it was loaded (declared shapes and types), as IR v11, with what
    `reshape` and `add_outputs` changed (irrun/changed.py), and the layer and tensor `names` and the
    model `name` a caller gave (irrun.openvino's set_friendly_name / set_names)."""
    document = model.document
    graph = reshaped_graph(model.analysis) if model._reshaped else document.graph
    if document.version == 10:
        graph = upgraded_v10(model, graph)
    if names:
        graph = renamed(graph, names)
    if model._added:
        graph = extended(graph, model._added)
    return write_ir(path, graph, name=document.name if name is None else name,
                    constant_bytes=constants_from(model.weights, str(model.path)),
                    protected=(model.path, model.path.with_suffix(".bin")), force=force)


def upgraded_v10(model, graph: IRGraph) -> IRGraph:
    """`graph`, of an IR v10 model, as IR v11, with what reading v10 does made explicit, so that
    OpenVINO and irrun read the same model from it (`update_v10_model`): each input and output
    gets the names and the type it has after reading (a Convert where the type changes: f16
    inputs are fed as f32, outputs of other types converted), and node and port rt_info,
    which the v10 reader ignores, is dropped."""
    analysis = model.analysis
    layers = {lid: without_rt_info(layer) for lid, layer in graph.layers.items()}
    ids = itertools.count(max((int(lid) for lid in layers if lid.lstrip("-").isdigit()), default=-1) + 1)
    names = {layer.name for layer in layers.values()}
    after: dict[str, list[Layer]] = {}           # layer id -> the Converts written right after it
    gives: dict[tuple[str, str], tuple[str, str]] = {}   # (layer, output port id) -> what now gives that tensor
    into: dict[tuple[str, str], tuple[str, str]] = {}    # (layer, input port id) -> what now feeds it
    edges = []

    def insert_convert(source: Layer, port_id: str, t, destination) -> Layer:
        name = f"{source.name}/convert_to_{destination.name}"
        while name in names:
            name += "_"
        names.add(name)
        convert = convert_layer(str(next(ids)), name, t, destination)
        after.setdefault(source.id, []).append(convert)
        from_layer, from_port = gives.get((source.id, port_id), (source.id, port_id))
        edges.append(Edge(from_layer, from_port, convert.id, convert.inputs[0].id, 0))
        return convert

    for info, param in zip(model.inputs, graph.layers_of_type("Parameter")):
        layer = layers[param.id]
        port = dataclasses.replace(layer.outputs[0], names=info.names)
        t = analysis.nodes[param.id].types[0]
        fed = v10_interface_type(t.etype, output=False)
        if fed is not t.etype:
            port = dataclasses.replace(port, precision=fed.precision, etype=fed)
            layer = dataclasses.replace(layer, data=dict(layer.data, element_type=fed.name))
            convert = insert_convert(layer, port.id, t.like(etype=fed), t.etype)
            gives[(layer.id, port.id)] = (convert.id, convert.outputs[0].id)
        layers[param.id] = dataclasses.replace(layer, outputs=[port])
    for info, result in zip(model.outputs, graph.layers_of_type("Result")):
        layer = dataclasses.replace(layers[result.id], output_names=info.names)
        t = analysis.nodes[result.id].types[0]
        given = v10_interface_type(t.etype, output=True)
        if given is not t.etype:
            source_id, index = graph.sources[(result.id, 0)]
            source = layers[source_id]
            convert = insert_convert(source, source.outputs[index].id, t, given)
            if source.op_type != "Parameter":
                # The converted tensor takes the names, as OpenVINO's post-processing gives them to it.
                outputs = list(source.outputs)
                convert.outputs[0].names = outputs[index].names
                outputs[index] = dataclasses.replace(outputs[index], names=())
                layers[source_id] = dataclasses.replace(source, outputs=outputs)
            layer.inputs = [dataclasses.replace(layer.inputs[0], precision=given.precision, etype=given)]
            into[(result.id, layer.inputs[0].id)] = (convert.id, convert.outputs[0].id)
        layers[result.id] = layer
    for e in graph.edges:
        from_layer, from_port = into.get((e.to_layer, e.to_port)) or gives.get((e.from_layer, e.from_port)) or \
            (e.from_layer, e.from_port)
        edges.append(Edge(from_layer, from_port, e.to_layer, e.to_port, 0))
    ordered = {}
    for lid, layer in layers.items():
        ordered[lid] = layer
        for convert in after.get(lid, ()):
            ordered[convert.id] = convert
    return graph_of(ordered, edges, graph.rt_info)
