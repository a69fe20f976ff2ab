"""Reading IR XML (v10/v11) into layers, edges and a networkx graph.

Parsing never raises for a defect in the model: every problem becomes a
`Diagnostic`; only a file that cannot be read at all raises
`UnreadableFileError`.  The lxml parser resolves no entities, loads no DTD,
touches no network and keeps libxml2's size and depth limits.
"""
from __future__ import annotations

from dataclasses import dataclass, field
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


@dataclass
class Port:
    id: str
    index: int                      # position inside <input>/<output>: the real port number
    line: int
    precision: str | None = None
    etype: ElementType | None = None
    dims: tuple[int, ...] = ()      # declared; -1 = dynamic
    names: tuple[str, ...] = ()
    rt_info: dict = field(default_factory=dict)


@dataclass
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


@dataclass
class Edge:
    from_layer: str
    from_port: str
    to_layer: str
    to_port: str
    line: int


@dataclass
class IRGraph:
    layers: dict[str, Layer]        # XML order
    edges: list[Edge]
    graph: nx.MultiDiGraph          # node = layer id; edge attrs: out_port, in_port (indices)
    # (layer id, input index) -> (producer id, output index)
    sources: dict[tuple[str, int], tuple[str, int]]

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


def _safe_parser() -> etree.XMLParser:
    return etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False,
                           dtd_validation=False, huge_tree=False, remove_comments=True,
                           remove_pis=True)


def _children(element, tag):
    return [c for c in element if c.tag == tag]


def _children_by_tag(element) -> dict[str, list]:
    """Element children grouped by tag, in one pass (layers are read 10^5 times in big IRs)."""
    groups: dict[str, list] = {}
    for child in element:
        if isinstance(child.tag, str):
            groups.setdefault(child.tag, []).append(child)
    return groups


class _Reader:
    def __init__(self, diags: Diagnostics):
        self.diags = diags
        self.scope = ""

    # -------------------------------------------------------------- ports
    def port(self, element, index: int, layer_ref: LayerRef, is_output: bool) -> Port:
        pid = element.get("id")
        if pid is None:
            self.diags.error("E-XML-ATTR", "port without an id", layer=layer_ref, line=element.sourceline)
            pid = f"#{index}"
        precision = element.get("precision")
        etype = None
        if precision is None:
            if is_output:
                self.diags.error("E-XML-ATTR", f"output port {pid} has no precision attribute",
                                 layer=layer_ref, line=element.sourceline)
        else:
            etype = etypes.BY_PRECISION.get(precision)
            if etype is None:
                self.diags.error("E-PORT-PRECISION", f'port {pid} has unknown precision "{precision}"',
                                 layer=layer_ref, line=element.sourceline)
        dims = []
        for d in _children(element, "dim"):
            text = (d.text or "").strip()
            try:
                value = int(text)
                if value < -1:
                    raise ValueError
            except ValueError:
                self.diags.error("E-PORT-DIM", f'port {pid} has invalid dimension "{text}" (integer >= -1 expected)',
                                 layer=layer_ref, line=d.sourceline)
                value = -1
            dims.append(value)
        names = split_names(element.get("names", "")) if element.get("names") else ()
        rt = _children(element, "rt_info")
        return Port(pid, index, element.sourceline, precision, etype, tuple(dims), names,
                    _rt_info(rt[0]) if rt else {})

    def port_list(self, container, layer_ref: LayerRef, is_output: bool) -> list[Port]:
        ports, seen = [], set()
        for element in _children(container, "port"):
            p = self.port(element, len(ports), layer_ref, is_output)
            if p.id in seen:
                self.diags.error("E-PORT-DUP", f"duplicate {'output' if is_output else 'input'} port id {p.id}",
                                 layer=layer_ref, line=element.sourceline)
            seen.add(p.id)
            ports.append(p)
        return ports

    # -------------------------------------------------------------- layers
    def layer(self, element) -> Layer:
        lid = element.get("id")
        name = element.get("name", "")
        type_name = element.get("type")
        version = element.get("version")
        line = element.sourceline
        layer = Layer(lid if lid is not None else "?", name, type_name or "?", version or "", line,
                      scope=self.scope)
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
        ref = layer.ref
        kids = _children_by_tag(element)
        data = kids.get("data")
        if data:
            layer.data = dict(data[0].attrib)
            layer.data_line = data[0].sourceline
        inputs = kids.get("input")
        if inputs:
            layer.inputs = self.port_list(inputs[0], ref, False)
            if len(inputs) > 1:
                self.diags.error("E-XML-STRUCTURE", "layer has more than one <input> element; "
                                 "OpenVINO reads only the first", layer=ref, line=inputs[1].sourceline)
        outputs = kids.get("output")
        if outputs:
            layer.outputs = self.port_list(outputs[0], ref, True)
        rt = kids.get("rt_info")
        layer.rt_info = _rt_info(rt[0]) if rt else {}
        if element.get("output_names") is not None:
            layer.output_names = split_names(element.get("output_names"))
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
                layer.port_maps[map_tag] = [dict(m.attrib, kind=m.tag, line=m.sourceline)
                                            for m in maps[0] if isinstance(m.tag, str)]
        back = kids.get("back_edges")
        if back:
            layer.back_edges = [dict(e.attrib, line=e.sourceline) for e in back[0] if isinstance(e.tag, str)]
        return layer

    # -------------------------------------------------------------- graphs
    def graph(self, container) -> IRGraph:
        layers: dict[str, Layer] = {}
        layers_el = _children(container, "layers")
        if not layers_el:
            self.diags.error("E-XML-STRUCTURE", f"<{container.tag}> has no <layers> section",
                             line=container.sourceline)
        for element in (layers_el[0] if layers_el else []):
            if element.tag != "layer":
                continue
            layer = self.layer(element)
            if layer.id in layers:
                first = layers[layer.id]
                self.diags.error("E-LAYER-DUP", f"duplicate layer id {layer.id} (first at line {first.line})",
                                 layer=layer.ref)
                continue
            layers[layer.id] = layer
        edges = []
        edges_el = _children(container, "edges")
        for element in (edges_el[0] if edges_el else []):
            if element.tag != "edge":
                continue
            attrs = [element.get(k) for k in ("from-layer", "from-port", "to-layer", "to-port")]
            if None in attrs:
                self.diags.error("E-XML-ATTR", "edge lacks from-layer/from-port/to-layer/to-port",
                                 line=element.sourceline)
                continue
            edges.append(Edge(*attrs, line=element.sourceline))
        return self.connect(layers, edges)

    def connect(self, layers: dict[str, Layer], edges: list[Edge]) -> IRGraph:
        g = nx.MultiDiGraph()
        for lid in layers:
            g.add_node(lid)
        sources: dict[tuple[str, int], tuple[str, int]] = {}
        for e in edges:
            src, dst = layers.get(e.from_layer), layers.get(e.to_layer)
            if src is None or dst is None:
                missing = e.from_layer if src is None else e.to_layer
                self.diags.error("E-EDGE-LAYER", f"edge {e.from_layer}:{e.from_port} -> {e.to_layer}:{e.to_port} "
                                 f"refers to missing layer {missing}", line=e.line)
                continue
            out_index = next((p.index for p in src.outputs if p.id == e.from_port), None)
            in_index = next((p.index for p in dst.inputs if p.id == e.to_port), None)
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
            g.add_edge(e.from_layer, e.to_layer, out_port=out_index, in_port=in_index, line=e.line)
        return IRGraph(layers, edges, g, sources)


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
    try:
        root = etree.fromstring(data, _safe_parser())
    except etree.XMLSyntaxError as exc:
        line, col = (exc.position if exc.position else (exc.lineno, 0))
        msg = str(exc.msg if hasattr(exc, "msg") else exc).split(", line ")[0]
        raise UnreadableFileError(f"not well-formed XML (line {line}, column {col}): {msg}",
                                  file=file, line=line, code="E-XML-SYNTAX") from None
    except ValueError as exc:  # e.g. a str with an encoding declaration
        raise UnreadableFileError(f"not well-formed XML: {exc}", file=file, code="E-XML-SYNTAX") from None
    if root is None:
        raise UnreadableFileError("not well-formed XML: no root element", file=file, code="E-XML-SYNTAX")
    diags = Diagnostics(file)
    reader = _Reader(diags)
    if root.tag == "layer":
        layer = reader.layer(root)
        graph = reader.connect({layer.id: layer}, [])
        return IRDocument(path, None, layer.name, graph, {}, True, diags)
    if root.tag != "net":
        raise UnreadableFileError(f"root element is <{root.tag}>, expected <net> (an OpenVINO IR) or <layer>",
                                  file=file, line=root.sourceline, code="E-XML-ROOT")
    version_text = root.get("version")
    try:
        version = int(version_text)
    except (TypeError, ValueError):
        version = None
    if version not in (10, 11):
        raise UnreadableFileError(f'IR version "{version_text}" is not supported (irrun reads IR v10 and v11, '
                                  f"as OpenVINO does)", file=file, line=root.sourceline, code="E-IR-VERSION")
    graph = reader.graph(root)
    rt = _children(root, "rt_info")
    rt_info = _rt_info(rt[0]) if rt else {}
    if not rt:
        for legacy in ("meta_data", "quantization_parameters"):
            found = _children(root, legacy)
            if found:
                rt_info[legacy] = _rt_info(found[0])
    return IRDocument(path, version, root.get("name", path.stem), graph, rt_info, False, diags)
