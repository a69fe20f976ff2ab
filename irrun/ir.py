"""Reading IR XML (v10/v11) into layers, edges and a networkx graph.

Parsing never raises for a defect in the model: every problem becomes a
`Diagnostic`; only a file that cannot be read at all raises
`UnreadableFileError`.  The lxml parser resolves no entities, loads no DTD,
touches no network and keeps libxml2's size and depth limits.
"""
from __future__ import annotations

import io
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import networkx as nx
from lxml import etree

from . import etypes
from .diagnostics import Diagnostics
from .errors import LayerRef, UnreadableFileError
from .etypes import ElementType
from .spec import VersionLookupError, resolve_version

SUBGRAPH_BODIES = ("body", "then_body", "else_body")
MAX_XML_BYTES = 2 << 30


@dataclass(slots=True)
class Port:
    id: str
    index: int                      # position inside <input>/<output>: the real port number
    line: int
    precision: str | None = None
    etype: ElementType | None = None
    dims: tuple[int, ...] = ()      # declared; -1 = dynamic
    names: tuple[str, ...] = ()
    rt_info: dict = field(default_factory=dict)


@dataclass(slots=True)
class Layer:
    id: str
    name: str
    type: str                       # as written
    version: str                    # as written: "opset1", "extension", ...
    line: int
    data: dict[str, str] = field(default_factory=dict)
    data_line: int | None = None
    inputs: list[Port] = field(default_factory=list)
    outputs: list[Port] = field(default_factory=list)
    rt_info: dict = field(default_factory=dict)
    output_names: tuple[str, ...] | None = None   # Result only
    op_type: str | None = None      # canonical type, when the catalogue knows it
    op_version: int | None = None   # resolved version number
    bodies: dict[str, "IRGraph"] = field(default_factory=dict)
    port_maps: dict[str, list[dict]] = field(default_factory=dict)
    back_edges: list[dict] = field(default_factory=list)
    scope: str = ""                 # "" at the top; "7/" inside the body of layer 7, "7/then/" in an If

    @property
    def ref(self) -> LayerRef:
        return LayerRef(self.scope + self.id, self.name, self.op_type or self.type,
                        self.op_version if self.op_version is not None else self.version, self.line)

    @property
    def label(self) -> str:
        return f"{self.op_type or self.type}-{self.op_version or self.version}"


@dataclass(slots=True)
class Edge:
    from_layer: str
    from_port: str
    to_layer: str
    to_port: str
    line: int
    out_index: int | None = None    # port positions, once the edge is found to connect real ports
    in_index: int | None = None


@dataclass
class IRGraph:
    layers: dict[str, Layer]        # XML order
    edges: list[Edge]               # as written; the connected ones have out_index/in_index
    # (layer id, input index) -> (producer id, output index)
    sources: dict[tuple[str, int], tuple[str, int]]

    @cached_property
    def graph(self) -> nx.MultiDiGraph:
        """node = layer id; edge attrs: out_port, in_port (indices), line.

        Built on first use: validation walks `sources` and never needs it.
        """
        g = nx.MultiDiGraph()
        g.add_nodes_from(self.layers)
        g.add_edges_from((e.from_layer, e.to_layer, {"out_port": e.out_index, "in_port": e.in_index, "line": e.line})
                         for e in self.edges if e.in_index is not None)
        return g

    def layers_of_type(self, op_type: str) -> list[Layer]:
        return [l for l in self.layers.values() if l.op_type == op_type]


@dataclass
class IRDocument:
    path: Path
    version: int | None
    name: str
    graph: IRGraph
    rt_info: dict
    snippet: bool                   # root was a single <layer>
    diagnostics: Diagnostics


def _rt_info(element) -> dict:
    """`<rt_info>` as nested dicts; unknown entries kept, never interpreted."""
    out: dict = {}
    if element is None:
        return out
    for child in element:
        if not isinstance(child.tag, str):
            continue
        key = child.get("name") or child.tag
        if len(child):
            out[key] = _rt_info(child)
        else:
            out[key] = child.get("value", dict(child.attrib))
    return out


def split_names(text: str) -> tuple[str, ...]:
    """`names="a\\,b,c"` -> ("a,b", "c"): commas separate, `\\,` escapes one."""
    if "\\" not in text:   # the usual case: nothing escaped
        return tuple(name for name in (part.strip() for part in text.split(",")) if name)
    names, current, i = [], [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and text[i + 1] == ",":
            current.append(",")
            i += 2
            continue
        if ch == ",":
            names.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
        i += 1
    names.append("".join(current).strip())
    return tuple(n for n in names if n)


# Blank text is kept: past line 65535 it is what gives elements their line (see `line_of`).
_SAFE_OPTIONS = dict(resolve_entities=False, no_network=True, load_dtd=False, dtd_validation=False,
                     huge_tree=False, remove_comments=True, remove_pis=True, collect_ids=False)


def _safe_parser() -> etree.XMLParser:
    return etree.XMLParser(**_SAFE_OPTIONS)


# libxml2 keeps an element's line in 16 bits.  Past that, lxml reports the line on
# which the element's first child ends, when that child is text (the blank text
# after a start tag, or a <dim>'s number), or else, for an element without
# children, the line on which its tail text ends.
_LAST_EXACT_LINE = 65534


def line_of(element) -> int:
    """The line of an element's start tag, in files of any length."""
    line = element.sourceline
    if line is None or line <= _LAST_EXACT_LINE:
        return line
    if element.text is not None:
        return line - element.text.count("\n")
    if len(element) == 0 and element.tail is not None:
        return line - element.tail.count("\n")
    return line   # an element that starts with a child element and no text: the child's line


def _children(element, tag):
    return [c for c in element if c.tag == tag]


def _children_by_tag(element) -> dict[str, list]:
    """Element children grouped by tag, in one pass."""
    groups: dict[str, list] = {}
    for child in element:
        if isinstance(child.tag, str):
            groups.setdefault(child.tag, []).append(child)
    return groups


class _Reader:
    """XML elements -> layers, ports and edges, with a diagnostic for every defect.

    Big IRs have 10^5 layers and 10^6 <dim>s, so each element is visited once,
    and LayerRefs (for messages) are only made when there is something to say.
    """

    def __init__(self, diags: Diagnostics):
        self.diags = diags
        self.scope = ""
        # The texts of a port's <dim>s -> its valid dims.  The same shapes repeat
        # thousands of times; this converts each once and keeps one tuple of it.
        self._dims_by_text: dict[tuple[str | None, ...], tuple[int, ...]] = {}

    # -------------------------------------------------------------- ports
    def dims(self, texts: tuple[str | None, ...], element, pid: str, layer: Layer) -> tuple[int, ...]:
        dims = self._dims_by_text.get(texts)
        if dims is None:
            dims, valid = self._parse_dims(texts, element, pid, layer)
            if valid:
                self._dims_by_text[texts] = dims
        return dims

    def _parse_dims(self, texts, element, pid: str, layer: Layer) -> tuple[tuple[int, ...], bool]:
        dims, valid = [], True
        for i, raw in enumerate(texts):
            text = (raw or "").strip()
            try:
                value = int(text)
                if value < -1:
                    raise ValueError
            except ValueError:
                line = line_of([d for d in element if d.tag == "dim"][i])
                self.diags.error("E-PORT-DIM", f'port {pid} has invalid dimension "{text}" (integer >= -1 expected)',
                                 layer=layer.ref, line=line)
                value, valid = -1, False
            dims.append(value)
        return tuple(dims), valid

    def port(self, element, index: int, layer: Layer, is_output: bool) -> Port:
        line = line_of(element)
        pid = element.get("id")
        if pid is None:
            self.diags.error("E-XML-ATTR", "port without an id", layer=layer.ref, line=line)
            pid = f"#{index}"
        precision = element.get("precision")
        etype = None
        if precision is None:
            if is_output:
                self.diags.error("E-XML-ATTR", f"output port {pid} has no precision attribute",
                                 layer=layer.ref, line=line)
        else:
            etype = etypes.BY_PRECISION.get(precision)
            if etype is None:
                self.diags.error("E-PORT-PRECISION", f'port {pid} has unknown precision "{precision}"',
                                 layer=layer.ref, line=line)
        dim_texts, rt = [], None
        for child in element:   # one pass: the <dim>s, and now and then an <rt_info>
            if child.tag == "dim":
                dim_texts.append(child.text)
            elif child.tag == "rt_info" and rt is None:
                rt = child
        dims = self.dims(tuple(dim_texts), element, pid, layer)
        names = element.get("names")
        return Port(pid, index, line, precision, etype, dims, split_names(names) if names else (), _rt_info(rt))

    def port_list(self, container, layer: Layer, is_output: bool) -> list[Port]:
        ports, seen = [], set()
        for element in container:
            if element.tag != "port":
                continue
            p = self.port(element, len(ports), layer, is_output)
            if p.id in seen:
                self.diags.error("E-PORT-DUP", f"duplicate {'output' if is_output else 'input'} port id {p.id}",
                                 layer=layer.ref, line=p.line)
            seen.add(p.id)
            ports.append(p)
        return ports

    # -------------------------------------------------------------- layers
    def layer(self, element) -> Layer:
        lid = element.get("id")
        name = element.get("name", "")
        type_name = element.get("type")
        version = element.get("version")
        line = line_of(element)
        layer = Layer(lid if lid is not None else "?", name, type_name or "?", version or "", line,
                      scope=self.scope)
        if lid is None or type_name is None or version is None:
            for attr, value in (("id", lid), ("type", type_name), ("version", version)):
                if value is None:
                    self.diags.error("E-XML-ATTR", f"layer has no {attr} attribute", layer=layer.ref, line=line)
        if lid is not None and not lid.lstrip("-").isdigit():
            self.diags.error("E-LAYER-ID", f'layer id "{lid}" is not an integer', layer=layer.ref, line=line)
        if type_name is not None and version is not None:
            try:
                layer.op_type, layer.op_version = resolve_version(type_name, version)
            except VersionLookupError as exc:
                self.diags.error(exc.code, str(exc), layer=layer.ref, line=line)
        kids = _children_by_tag(element)
        data = kids.get("data")
        if data:
            layer.data = dict(data[0].items())
            layer.data_line = line_of(data[0])
        inputs = kids.get("input")
        if inputs:
            layer.inputs = self.port_list(inputs[0], layer, False)
            if len(inputs) > 1:
                self.diags.error("E-XML-STRUCTURE", "layer has more than one <input> element; "
                                 "OpenVINO reads only the first", layer=layer.ref, line=line_of(inputs[1]))
        outputs = kids.get("output")
        if outputs:
            layer.outputs = self.port_list(outputs[0], layer, True)
        rt = kids.get("rt_info")
        if rt:
            layer.rt_info = _rt_info(rt[0])
        output_names = element.get("output_names")
        if output_names is not None:
            layer.output_names = split_names(output_names)
        if not kids.keys() <= _PLAIN_LAYER_PARTS:
            self._subgraph_parts(layer, kids)
        return layer

    def _subgraph_parts(self, layer: Layer, kids: dict[str, list]) -> None:
        """Bodies, port maps and back edges of TensorIterator, Loop and If."""
        for body_tag in SUBGRAPH_BODIES:
            bodies = kids.get(body_tag)
            if bodies:
                outer_scope = self.scope
                self.scope = f"{outer_scope}{layer.id}/" + ("" if body_tag == "body" else body_tag[:-5] + "/")
                try:
                    layer.bodies[body_tag] = self.graph(bodies[0])
                finally:
                    self.scope = outer_scope
        for map_tag in ("port_map", "then_port_map", "else_port_map"):
            maps = kids.get(map_tag)
            if maps:
                layer.port_maps[map_tag] = [dict(m.attrib, kind=m.tag, line=line_of(m))
                                            for m in maps[0] if isinstance(m.tag, str)]
        back = kids.get("back_edges")
        if back:
            layer.back_edges = [dict(e.attrib, line=line_of(e)) for e in back[0] if isinstance(e.tag, str)]

    # -------------------------------------------------------------- graphs
    def graph(self, container, read: dict[str, Layer] | None = None) -> IRGraph:
        """The layers and edges of a <net> or a sub-graph body.

        `read`: the layers already read, as the file was parsed (the top level of a big IR).
        """
        layers_el = _children(container, "layers")
        if not layers_el:
            self.diags.error("E-XML-STRUCTURE", f"<{container.tag}> has no <layers> section",
                             line=line_of(container))
        layers = read if read is not None else {}
        if read is None:
            for element in (layers_el[0] if layers_el else ()):
                if element.tag == "layer":
                    self.add_layer(layers, self.layer(element))
        edges = []
        edges_el = _children(container, "edges")
        for element in (edges_el[0] if edges_el else ()):
            if element.tag != "edge":
                continue
            get = element.get
            edge = Edge(get("from-layer"), get("from-port"), get("to-layer"), get("to-port"), line_of(element))
            if None in (edge.from_layer, edge.from_port, edge.to_layer, edge.to_port):
                self.diags.error("E-XML-ATTR", "edge lacks from-layer/from-port/to-layer/to-port",
                                 line=edge.line)
                continue
            edges.append(edge)
        return self.connect(layers, edges)

    def add_layer(self, layers: dict[str, Layer], layer: Layer) -> None:
        first = layers.get(layer.id)
        if first is not None:
            self.diags.error("E-LAYER-DUP", f"duplicate layer id {layer.id} (first at line {first.line})",
                             layer=layer.ref)
            return
        layers[layer.id] = layer

    def connect(self, layers: dict[str, Layer], edges: list[Edge]) -> IRGraph:
        """Resolve each edge's ports to their positions; `sources` maps every fed input to its producer."""
        sources: dict[tuple[str, int], tuple[str, int]] = {}
        for e in edges:
            src, dst = layers.get(e.from_layer), layers.get(e.to_layer)
            if src is None or dst is None:
                missing = e.from_layer if src is None else e.to_layer
                self.diags.error("E-EDGE-LAYER", f"edge {e.from_layer}:{e.from_port} -> {e.to_layer}:{e.to_port} "
                                 f"refers to missing layer {missing}", line=e.line)
                continue
            out_index = _port_index(src.outputs, e.from_port)
            in_index = _port_index(dst.inputs, e.to_port)
            if out_index is None:
                self.diags.error("E-EDGE-PORT", f"edge from missing output port {e.from_port}",
                                 layer=src.ref, line=e.line)
                continue
            if in_index is None:
                self.diags.error("E-EDGE-PORT", f"edge into missing input port {e.to_port}",
                                 layer=dst.ref, line=e.line)
                continue
            if (e.to_layer, in_index) in sources:
                self.diags.error("E-EDGE-DUP", f"input port {e.to_port} has more than one incoming edge",
                                 layer=dst.ref, line=e.line)
                continue
            sources[(e.to_layer, in_index)] = (e.from_layer, out_index)
            e.out_index, e.in_index = out_index, in_index
        return IRGraph(layers, edges, sources)


# A layer with no other parts than these has no sub-graph.
_PLAIN_LAYER_PARTS = {"data", "input", "output", "rt_info"}


def _port_index(ports: list[Port], port_id: str) -> int | None:
    for p in ports:
        if p.id == port_id:
            return p.index
    return None


def read_xml_bytes(path: Path) -> bytes:
    try:
        size = path.stat().st_size
        if size > MAX_XML_BYTES:
            raise UnreadableFileError(f"file is {size} bytes; larger than the {MAX_XML_BYTES} byte limit",
                                      file=str(path))
        return path.read_bytes()
    except UnreadableFileError:
        raise
    except IsADirectoryError:
        raise UnreadableFileError("is a directory, not an IR .xml file", file=str(path)) from None
    except FileNotFoundError:
        raise UnreadableFileError("no such file", file=str(path)) from None
    except OSError as exc:
        raise UnreadableFileError(f"cannot read: {exc.strerror or exc}", file=str(path)) from None


def _parse_streaming(data: bytes, reader: _Reader) -> tuple:
    """Parse the XML, reading each top-level layer as soon as the parser has finished it.

    A read layer's elements are dropped at once, so the whole tree of a big IR
    (several times the size of the file) is never in memory; what is left is
    the root with its edges and rt_info.  Returns the root and the layers of
    the first <layers> section of a <net> root, by id.
    """
    layers: dict[str, Layer] = {}
    first_section = None
    parsing = etree.iterparse(io.BytesIO(data), events=("end",), tag="layer", **_SAFE_OPTIONS)
    for _, element in parsing:
        section = element.getparent()
        net = section.getparent() if section is not None else None
        if net is None or net.tag != "net" or net.getparent() is not None or element.tag != "layer":
            continue   # a layer inside a sub-graph body: read with the layer that owns it
        if first_section is None:
            first_section = net.find("layers")
        if section is not first_section:
            continue   # OpenVINO reads the first <layers> only
        reader.add_layer(layers, reader.layer(element))
        element.clear(keep_tail=True)
        while element.getprevious() is not None:
            del section[0]
    return parsing.root, layers


def parse_document(path: str | Path) -> IRDocument:
    """Parse one `.xml`; raises only `UnreadableFileError` (not XML, not an IR)."""
    path = Path(path)
    data = read_xml_bytes(path)
    file = str(path)
    if not data.strip():
        raise UnreadableFileError("file is empty", file=file)
    if b"<!DOCTYPE" in data or b"<!ENTITY" in data:
        # Refused before parsing: no entity is ever declared, let alone expanded.
        raise UnreadableFileError("has a <!DOCTYPE> or <!ENTITY> declaration; IR files have none and irrun "
                                  "does not process DTDs or entities", file=file, line=1, code="E-XML-DTD")
    diags = Diagnostics(file)
    reader = _Reader(diags)
    try:
        root, top_layers = _parse_streaming(data, reader)
    except etree.XMLSyntaxError as exc:
        line, col = (exc.position if exc.position else (exc.lineno, 0))
        msg = str(exc.msg if hasattr(exc, "msg") else exc).split(", line ")[0]
        raise UnreadableFileError(f"not well-formed XML (line {line}, column {col}): {msg}",
                                  file=file, line=line, code="E-XML-SYNTAX") from None
    except ValueError as exc:  # e.g. a str with an encoding declaration
        raise UnreadableFileError(f"not well-formed XML: {exc}", file=file, code="E-XML-SYNTAX") from None
    if root is None:
        raise UnreadableFileError("not well-formed XML: no root element", file=file, code="E-XML-SYNTAX")
    if root.tag == "layer":
        layer = reader.layer(root)
        graph = reader.connect({layer.id: layer}, [])
        return IRDocument(path, None, layer.name, graph, {}, True, diags)
    if root.tag != "net":
        raise UnreadableFileError(f"root element is <{root.tag}>, expected <net> (an OpenVINO IR) or <layer>",
                                  file=file, line=line_of(root), code="E-XML-ROOT")
    version_text = root.get("version")
    try:
        version = int(version_text)
    except (TypeError, ValueError):
        version = None
    if version not in (10, 11):
        raise UnreadableFileError(f'IR version "{version_text}" is not supported (irrun reads IR v10 and v11, '
                                  f"as OpenVINO does)", file=file, line=line_of(root), code="E-IR-VERSION")
    graph = reader.graph(root, top_layers)
    rt = _children(root, "rt_info")
    rt_info = _rt_info(rt[0]) if rt else {}
    if not rt:
        for legacy in ("meta_data", "quantization_parameters"):
            found = _children(root, legacy)
            if found:
                rt_info[legacy] = _rt_info(found[0])
    return IRDocument(path, version, root.get("name", path.stem), graph, rt_info, False, diags)
