"""Reading IR XML (v10/v11) into layers, edges and a networkx graph.

Parsing never raises for a defect in the model: every problem becomes a
`Diagnostic`; only a file that cannot be read at all raises
`UnreadableFileError`.  The lxml parser resolves no entities, loads no DTD,
touches no network and keeps libxml2's size and depth limits.  A big IR as
serializers write it takes a fast path (see "the fast path" below) that gives
exactly what the general path gives.
"""
from __future__ import annotations

import io
import itertools
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple

from lxml import etree

from . import etypes
from .diagnostics import Diagnostics
from .errors import LayerRef, UnreadableFileError
from .etypes import ElementType
from .spec import VersionLookupError, resolve_version

if TYPE_CHECKING:
    import networkx as nx

SUBGRAPH_BODIES = ("body", "then_body", "else_body")
# The bodies and port maps of the layers that have none (nearly all of them: a big IR
# has 10^5), shared and read-only.
EMPTY = MappingProxyType({})
MAX_XML_BYTES = 2 << 30


class RtElement(NamedTuple):
    """One element of an `<rt_info>` section exactly as written (the writer gives it back as it was):
    `<attribute name="fused_names" version="0" value="a,b"/>` is
    `RtElement("attribute", (("name", "fused_names"), ("version", "0"), ("value", "a,b")), ())`."""

    tag: str
    attrs: tuple[tuple[str, str], ...]
    children: tuple["RtElement", ...] = ()


# An rt_info section: its elements in order (empty for nearly every layer and port).
RtInfo = tuple[RtElement, ...]


@dataclass(slots=True)
class Port:
    id: str
    index: int                      # position inside <input>/<output>: the real port number
    line: int
    precision: str | None = None
    etype: ElementType | None = None
    dims: tuple[int, ...] = ()      # declared; -1 = dynamic
    names: tuple[str, ...] = ()
    rt_info: RtInfo = ()


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
    rt_info: RtInfo = ()
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
    # layer id -> for each input, `sources` of it (None where nothing feeds it)
    producers: dict[str, list[tuple[str, int] | None]] = field(default_factory=dict)
    rt_info: RtInfo = ()            # the graph's own <rt_info> (a model's, or a body's)
    # (layer id, input index) -> the line of the edge into it that names a missing layer or output port
    broken_inputs: dict[tuple[str, int], int] = field(default_factory=dict)

    @cached_property
    def graph(self) -> nx.MultiDiGraph:
        """node = layer id, labelled by `layer_labels`; edge attrs: out_port, in_port (indices), line.

        Built on first use: validation and execution walk `sources` and never need it (nor the
        quarter second that importing networkx takes).
        """
        import networkx as nx
        g = nx.MultiDiGraph()
        g.add_nodes_from((lid, layer_labels(layer)) for lid, layer in self.layers.items())
        g.add_edges_from((e.from_layer, e.to_layer, {"out_port": e.out_index, "in_port": e.in_index, "line": e.line})
                         for e in self.edges if e.in_index is not None)
        return g

    def layers_of_type(self, op_type: str) -> list[Layer]:
        return [l for l in self.layers.values() if l.op_type == op_type]


def layer_labels(layer: Layer) -> dict:
    """What a graph node of a layer carries: name, type, version (a number once resolved, else as
    written), opset (as written), line and attributes (the `<data>` texts)."""
    return {"name": layer.name, "type": layer.op_type or layer.type,
            "version": layer.op_version if layer.op_version is not None else layer.version,
            "opset": layer.version, "line": layer.line, "attributes": dict(layer.data)}


@dataclass
class IRDocument:
    path: Path
    version: int | None
    name: str
    graph: IRGraph
    rt_info: dict                   # `rt_info_dict` of the model's <rt_info> (graph.rt_info holds it as written)
    snippet: bool                   # root was a single <layer>
    diagnostics: Diagnostics


def _rt_info(element) -> RtInfo:
    """The elements of an `<rt_info>` (or of one of its elements) as written; never interpreted."""
    return tuple(RtElement(child.tag, tuple(child.items()), _rt_info(child) if len(child) else ())
                 for child in element if isinstance(child.tag, str))


def rt_info_dict(elements: RtInfo) -> dict:
    """rt_info as nested dicts, as OpenVINO reads a model's: an element's key is its `name`
    attribute or else its tag; its value is its children, or its `value` attribute, or
    else all its attributes."""
    out: dict = {}
    for e in elements:
        attrs = dict(e.attrs)
        key = attrs.get("name") or e.tag
        if e.children:
            out[key] = rt_info_dict(e.children)
        else:
            out[key] = attrs.get("value", attrs)
    return out


def split_names(text: str) -> tuple[str, ...]:
    """`names="a\\,b,c"` -> ("a,b", "c"): commas separate, `\\,` escapes one."""
    if "\\" not in text:   # the usual case: nothing escaped
        if "," not in text:   # and one name
            text = text.strip()
            return (text,) if text else ()
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


def v10_interface_type(etype: ElementType, *, output: bool) -> ElementType:
    """The type OpenVINO gives an input or output of an IR v10 model when it reads it
    (`update_v10_model`): f16 inputs become f32; outputs of 32- and 64-bit integers become i32,
    every other non-f32 output f32."""
    if not output:
        return etypes.f32 if etype is etypes.f16 else etype
    if etype.is_integral and etype.bits >= 32:
        return etypes.i32
    if etype is etypes.f32 or etype.carrier is None or etype.kind in ("string", "dynamic"):
        return etype
    return etypes.f32


def join_names(names) -> str:
    """The inverse of `split_names`: ("a,b", "c") -> `a\\,b,c`."""
    return ",".join(name.replace(",", "\\,") for name in names)


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
        return Port(pid, index, line, precision, etype, dims, split_names(names) if names else (),
                    () if rt is None else _rt_info(rt))

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
                      bodies=EMPTY, port_maps=EMPTY, scope=self.scope)
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
        layer.bodies, layer.port_maps = {}, {}
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
        layer.bodies, layer.port_maps = layer.bodies or EMPTY, layer.port_maps or EMPTY
        back = kids.get("back_edges")
        if back:
            layer.back_edges = [dict(e.attrib, line=line_of(e)) for e in back[0] if isinstance(e.tag, str)]

    # -------------------------------------------------------------- graphs
    def graph(self, container, read: dict[str, Layer] | None = None,
              read_edges: list[Edge] | None = None) -> IRGraph:
        """The layers and edges of a <net> or a sub-graph body.

        `read`, `read_edges`: the layers (and edges) already read, as the file was
        parsed (the top level of a big IR).
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
        if read_edges is not None:
            return self.connect(layers, read_edges)
        rt = _children(container, "rt_info")
        rt_info = _rt_info(rt[0]) if rt else ()
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
        graph = self.connect(layers, edges)
        graph.rt_info = rt_info
        return graph

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
        producers = {lid: [None] * len(layer.inputs) for lid, layer in layers.items()}
        broken: dict[tuple[str, int], int] = {}
        find = layers.get
        for e in edges:
            src, dst = find(e.from_layer), find(e.to_layer)
            out_index = in_index = None
            if src is not None:
                port_id = e.from_port
                for p in src.outputs:   # (inline: a big IR has 10^5 edges)
                    if p.id == port_id:
                        out_index = p.index
                        break
            if dst is not None:
                port_id = e.to_port
                for p in dst.inputs:
                    if p.id == port_id:
                        in_index = p.index
                        break
            if out_index is None or in_index is None:
                self._report_broken_edge(e, src, dst, out_index, in_index)
                if in_index is not None:
                    broken[(e.to_layer, in_index)] = e.line   # unfed, through an edge that goes nowhere
                continue
            fed = (e.to_layer, in_index)
            if fed in sources:
                self.diags.error("E-EDGE-DUP", f"input port {e.to_port} has more than one incoming edge",
                                 layer=dst.ref, line=e.line)
                continue
            sources[fed] = producers[e.to_layer][in_index] = (e.from_layer, out_index)
            e.out_index, e.in_index = out_index, in_index
        return IRGraph(layers, edges, sources, producers, broken_inputs=broken)

    def _report_broken_edge(self, e: Edge, src: Layer | None, dst: Layer | None,
                            out_index: int | None, in_index: int | None) -> None:
        """An edge naming a layer or port that does not exist: which end, which id, and what the
        other end is, so the reader can find it without the XML open."""
        written = (f'edge from-layer="{e.from_layer}" from-port="{e.from_port}" to-layer="{e.to_layer}" '
                   f'to-port="{e.to_port}" (line {e.line}'
                   + (f", in the sub-graph {self.scope[:-1]})" if self.scope else ")"))
        if src is None or dst is None:
            missing = [f"{end} {lid}" for end, lid, layer in (("from-layer", e.from_layer, src),
                                                               ("to-layer", e.to_layer, dst)) if layer is None]
            said = f"{' and '.join(missing)} {'does' if len(missing) == 1 else 'do'} not exist"
            if src is not None:
                said += f"; the edge comes from {_port_phrase(src, 'output', e.from_port, out_index)}"
            elif dst is not None:
                said += f"; the edge was to feed {_port_phrase(dst, 'input', e.to_port, in_index)}"
            self.diags.error("E-EDGE-LAYER", f"{written}: {said}", line=e.line)
            return
        if out_index is None:
            self.diags.error("E-EDGE-PORT", f"{written}: layer {src.ref.id} has no output port {e.from_port} "
                             f"({_ports_list(src.outputs, 'output')})", layer=src.ref, line=e.line)
        if in_index is None:
            self.diags.error("E-EDGE-PORT", f"{written}: layer {dst.ref.id} has no input port {e.to_port} "
                             f"({_ports_list(dst.inputs, 'input')})", layer=dst.ref, line=e.line)


def _ports_list(ports, kind: str) -> str:
    if not ports:
        return f"it has no {kind} ports"
    return f"its {kind} ports: {', '.join(p.id for p in ports)}"


def _port_phrase(layer: Layer, kind: str, port_id: str, index: int | None) -> str:
    where = f"{kind} port {port_id} of {layer.ref.describe()}"
    return where if index is not None else f"{where}, which has no such port ({_ports_list(getattr(layer, kind + 's'), kind)})"


# A layer with no other parts than these has no sub-graph.
_PLAIN_LAYER_PARTS = {"data", "input", "output", "rt_info"}


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


# ---------------------------------------------------------------- the fast path

# IRs written by a serializer repeat a handful of layer forms thousands of times:
# the same tags, attribute names, dims and white space; only attribute values
# differ.  The fast path cuts the first <layers> and <edges> sections into one
# chunk per layer (edge), splits each chunk at its quotes into markup and
# attribute values, and reads the markup once per distinct form: libxml2 parses
# it, values replaced by placeholders, and a `_LayerPlan` records where each
# value goes.  Every other chunk of that form only fills the plan in.  The rest
# of the document (the <net> element, its rt_info) is parsed by libxml2 as before,
# with the two sections' contents cut out.
#
# Why that is exact: libxml2 reads every distinct markup and the rest of the file,
# with the same options; the values are checked to hold nothing libxml2 would
# refuse or change (no "<", "&", tab, newline or control character, none too
# long); and lines are counted in the markup.  Anything else (entity references,
# comments, namespaces, CR line ends, white space that libxml2's lines past 65535
# depend on, sub-graphs, and every defect that needs a diagnostic) sends the
# whole file down the general path above, so results never depend on the path.

_PH_OPEN, _PH_CLOSE = "\ue000", "\ue001"
_PROLOGUE = re.compile(r'\ufeff?(?:<\?xml(?P<decl>[^<>]*)\?>)?[ \t\n]*<net(?:[^<>"]|"[^"<]*")*>[ \t\n]*<layers>')
_ENCODING = re.compile(r'encoding[ \t\n]*=[ \t\n]*["\']([^"\']*)["\']')
_BETWEEN_SECTIONS = re.compile(r'[ \t\n]*<edges>')
_FAST_LINE_LIMIT = _LAST_EXACT_LINE
# libxml2 refuses a token (an attribute value, a text) of about 10^7 characters unless
# XML_PARSE_HUGE is on; chunks are read without libxml2 seeing their values, so longer ones
# take the general path, which reports them as it always did.
_LONGEST_CHUNK = 9_000_000
# Reading a new form costs about what the general path spends on a layer: an IR whose
# layers are mostly of forms of their own (every shape different) is read by the general
# path once that shows (with more than `_FEW_FORMS` forms, one per `_FORMS_PER_LAYER` layers).
_FEW_FORMS = 500
_FORMS_PER_LAYER = 5


class _NotPlain(Exception):
    """The file is not in the form the fast path reads exactly: take the general path."""


@dataclass(slots=True)
class _PortPlan:
    id: int                          # index of the value
    precision: int | None
    names: int | None
    dims: tuple[int, ...]
    line: int                        # lines below the chunk's first line
    rt_info: tuple | None


@dataclass(slots=True)
class _LayerPlan:
    newlines: int                    # in the markup (values hold none)
    id: int
    name: int | None
    type: int
    version: int
    output_names: int | None
    line: int
    data: tuple[tuple[str, int], ...] | None
    data_line: int
    inputs: tuple[_PortPlan, ...]
    outputs: tuple[_PortPlan, ...]
    rt_info: tuple | None


@dataclass(slots=True)
class _EdgePlan:
    newlines: int
    ends: tuple[int, int, int, int]  # from-layer, from-port, to-layer, to-port
    line: int


def _template(parts: list[str]) -> str:
    """Markup with each attribute value replaced by a placeholder naming its index."""
    if len(parts) % 2 == 0:
        raise _NotPlain("unbalanced quotes")
    return '"'.join(part if i % 2 == 0 else f"{_PH_OPEN}{i // 2}{_PH_CLOSE}" for i, part in enumerate(parts))


class _PlanBuilder:
    """Reads one template fragment: which value index each attribute holds."""

    def __init__(self, fragment: str, n_values: int, big_file: bool):
        # (The parser drops comments and processing instructions, which would move lines.)
        if "<!" in fragment or "<?" in fragment:
            raise _NotPlain("a comment, CDATA or a processing instruction")
        self.fragment = fragment
        try:
            self.root = etree.fromstring(fragment, _safe_parser())
        except (etree.XMLSyntaxError, ValueError):
            raise _NotPlain("markup libxml2 does not accept") from None
        self.big_file = big_file
        self.used: set[int] = set()
        for element in self.root.iter():
            for value in element.attrib.values():
                self.used.add(self._index(value))
        if self.used != set(range(n_values)):
            raise _NotPlain("a quote outside an attribute value")

    @staticmethod
    def _index(value: str) -> int:
        if value[:1] != _PH_OPEN or value[-1:] != _PH_CLOSE or not value[1:-1].isdigit():
            raise _NotPlain("an attribute value that is not one placeholder")
        return int(value[1:-1])

    def slot(self, element, name: str, required: bool = False) -> int | None:
        value = element.get(name)
        if value is None:
            if required:
                raise _NotPlain(f"no {name} attribute")
            return None
        return self._index(value)

    def line(self, element) -> int:
        """Lines below the fragment's first, where `line_of` gives the same in a file of any length."""
        # (The fragment's root has a tail in the file when white space ends the fragment.)
        tail = element.tail is not None or (element is self.root and self.fragment[-1:] != ">")
        if self.big_file and element.text is None and not (len(element) == 0 and tail):
            raise _NotPlain("an element whose line libxml2 does not keep exactly")
        return element.sourceline - 1

    def rt_info(self, element) -> tuple:
        """`_rt_info` of the element, with value indices for attribute values."""
        return tuple((child.tag, tuple((k, self._index(v)) for k, v in child.attrib.items()),
                      self.rt_info(child) if len(child) else ())
                     for child in element)

    def port(self, element, is_output: bool) -> _PortPlan:
        dims, rt = [], None
        for child in element:
            if child.tag == "dim":
                if len(child):
                    raise _NotPlain("a <dim> with elements inside")
                text = (child.text or "").strip()
                try:
                    value = int(text)
                except ValueError:
                    raise _NotPlain("an invalid dim") from None
                if value < -1:
                    raise _NotPlain("an invalid dim")
                dims.append(value)
            elif child.tag == "rt_info":
                if rt is None:
                    rt = self.rt_info(child)
            else:
                raise _NotPlain(f"<{child.tag}> in a port")
        precision = self.slot(element, "precision", required=is_output)
        return _PortPlan(self.slot(element, "id", required=True), precision, self.slot(element, "names"),
                         tuple(dims), self.line(element), rt)

    def ports(self, container, is_output: bool) -> tuple[_PortPlan, ...]:
        ports = []
        for element in container:
            if element.tag != "port":
                raise _NotPlain(f"<{element.tag}> among ports")
            ports.append(self.port(element, is_output))
        return tuple(ports)

    def layer(self, template: str) -> _LayerPlan:
        root = self.root
        kids = _children_by_tag(root)
        if not kids.keys() <= _PLAIN_LAYER_PARTS or any(len(v) > 1 for k, v in kids.items() if k != "data"):
            raise _NotPlain("a sub-graph or repeated layer parts")
        data = kids.get("data")
        inputs, outputs, rt = kids.get("input"), kids.get("output"), kids.get("rt_info")
        return _LayerPlan(
            template.count("\n"),
            self.slot(root, "id", required=True), self.slot(root, "name"), self.slot(root, "type", required=True),
            self.slot(root, "version", required=True), self.slot(root, "output_names"), self.line(root),
            tuple((k, self._index(v)) for k, v in data[0].items()) if data else None,
            self.line(data[0]) if data else 0,
            self.ports(inputs[0], False) if inputs else (), self.ports(outputs[0], True) if outputs else (),
            self.rt_info(rt[0]) if rt else None)

    def edge(self, template: str) -> _EdgePlan:
        root = self.root
        if len(root):
            raise _NotPlain("an edge with elements inside")
        ends = tuple(self.slot(root, name, required=True)
                     for name in ("from-layer", "from-port", "to-layer", "to-port"))
        return _EdgePlan(template.count("\n"), ends, self.line(root))


def _check_values(parts: list[str]) -> None:
    """The values (odd parts) hold no "<" (not well-formed XML), no tab or newline (libxml2 turns
    those into spaces, and lines are counted in the markup), no other unusual character, and
    none is longer than libxml2 reads."""
    values = "".join(parts[1::2])
    if "<" in values or not values.isprintable():
        raise _NotPlain("a value with <, a tab, a newline or an unusual character")
    if len(values) > _LONGEST_CHUNK and max(map(len, parts[1::2])) > _LONGEST_CHUNK:
        raise _NotPlain("a value longer than libxml2 reads without XML_PARSE_HUGE")


def _fill_rt_info(plan: tuple, values: list[str]) -> RtInfo:
    return tuple(RtElement(tag, tuple((k, values[i]) for k, i in attrs), _fill_rt_info(children, values))
                 for tag, attrs, children in plan)


# A form read this often gets a builder of its own (generated Python, no loops);
# rarer forms are built by `_build_layer`.
_COMPILE_AFTER = 8


def _build_layer(plan: _LayerPlan, values: list, line: int, lid: str, resolved: tuple[str, int]) -> Layer:
    """The layer `plan` describes, from one chunk's values (with the two absent values appended)."""
    port_lists = []
    for port_plans in (plan.inputs, plan.outputs):
        ports = []
        for index, p in enumerate(port_plans):
            precision = values[_slot(p.precision)]
            etype = etypes.BY_PRECISION.get(precision)
            if etype is None and precision is not None:
                raise _NotPlain("an unknown precision")
            names = values[_slot(p.names)]
            ports.append(Port(values[p.id], index, line + p.line, precision, etype, p.dims,
                              split_names(names) if names else (),
                              () if p.rt_info is None else _fill_rt_info(p.rt_info, values)))
        if len(ports) > 1 and len({p.id for p in ports}) < len(ports):
            raise _NotPlain("a duplicate port id")
        port_lists.append(ports)
    output_names = values[_slot(plan.output_names)]
    return Layer(lid, values[_slot(plan.name, _ABSENT_EMPTY)], values[plan.type], values[plan.version],
                 line + plan.line, {} if plan.data is None else {k: values[i] for k, i in plan.data},
                 None if plan.data is None else line + plan.data_line, port_lists[0], port_lists[1],
                 () if plan.rt_info is None else _fill_rt_info(plan.rt_info, values),
                 None if output_names is None else split_names(output_names), resolved[0], resolved[1],
                 EMPTY, EMPTY, [], "")


def _compile_builder(plan: _LayerPlan):
    """`_build_layer` for this one plan, as straight-line code."""
    names = {"Port": Port, "Layer": Layer, "split_names": split_names, "fill": _fill_rt_info,
             "by_precision": etypes.BY_PRECISION, "_NotPlain": _NotPlain, "EMPTY": EMPTY}
    code = ["def build(values, line, lid, resolved):"]
    port_lists = []
    for side, port_plans in (("i", plan.inputs), ("o", plan.outputs)):
        ports = []
        for index, p in enumerate(port_plans):
            port = f"{side}{index}"
            names[f"dims_{port}"] = p.dims
            if p.precision is None:
                code.append(f"    precision_{port} = etype_{port} = None")
            else:
                code.append(f"    precision_{port} = values[{p.precision}]")
                code.append(f"    etype_{port} = by_precision.get(precision_{port})")
                code.append(f"    if etype_{port} is None:")
                code.append("        raise _NotPlain('an unknown precision')")
            tensor_names = "()"
            if p.names is not None:
                code.append(f"    names_{port} = values[{p.names}]")
                tensor_names = f"split_names(names_{port}) if names_{port} else ()"
            rt_info = "()"
            if p.rt_info is not None:
                names[f"rt_{port}"] = p.rt_info
                rt_info = f"fill(rt_{port}, values)"
            code.append(f"    {port} = Port(values[{p.id}], {index}, line + {p.line}, precision_{port}, "
                        f"etype_{port}, dims_{port}, {tensor_names}, {rt_info})")
            ports.append(port)
        if len(ports) > 1:
            code.append(f"    if len({{{', '.join(f'{p}.id' for p in ports)}}}) < {len(ports)}:")
            code.append("        raise _NotPlain('a duplicate port id')")
        port_lists.append(f"[{', '.join(ports)}]")
    data, data_line = "{}", "None"
    if plan.data is not None:
        data = "{" + ", ".join(f"{k!r}: values[{i}]" for k, i in plan.data) + "}"
        data_line = f"line + {plan.data_line}"
    rt_info = "()"
    if plan.rt_info is not None:
        names["rt_layer"] = plan.rt_info
        rt_info = "fill(rt_layer, values)"
    name = '""' if plan.name is None else f"values[{plan.name}]"
    output_names = "None" if plan.output_names is None else f"split_names(values[{plan.output_names}])"
    code.append(f"    return Layer(lid, {name}, values[{plan.type}], values[{plan.version}], line + {plan.line}, "
                f"{data}, {data_line}, {port_lists[0]}, {port_lists[1]}, {rt_info}, {output_names}, "
                f"resolved[0], resolved[1], EMPTY, EMPTY, [], '')")
    exec("\n".join(code), names)
    return names["build"]


class _LayerForm:
    """One form of layer: its plan, and how to build a layer of it."""

    __slots__ = ("plan", "markup", "newlines", "id_at", "type_at", "version_at", "build", "uses",
                 "next_markup", "next_form")

    def __init__(self, plan: _LayerPlan | None, markup: tuple[str, ...]):
        self.plan, self.markup = plan, markup
        if plan is not None:
            self.newlines = plan.newlines
            self.id_at, self.type_at, self.version_at = plan.id, plan.type, plan.version
        self.build = self._interpret
        self.uses = 0
        self.next_markup, self.next_form = None, None   # the form that followed this one last time

    def _interpret(self, values: list, line: int, lid: str, resolved: tuple[str, int]) -> Layer:
        self.uses += 1
        if self.uses >= _COMPILE_AFTER:
            self.build = _compile_builder(self.plan)
        return _build_layer(self.plan, values, line, lid, resolved)


# Value indices of absent attributes: `_FastReader` appends these two values to each chunk's values.
_ABSENT, _ABSENT_EMPTY = -2, -1


def _slot(index: int | None, absent: int = _ABSENT) -> int:
    return absent if index is None else index


class _FastReader:
    """The first <layers> and <edges> of a plain IR, read through per-form plans.

    The loops below run once per layer of a big IR: plans are flattened into
    tuples, and an absent attribute reads one of the two values appended to
    each chunk's values (None, or "" for a name).
    """

    def __init__(self, text: str, reader: _Reader):
        self.text = text
        self.reader = reader
        # A file this short has no line past libxml2's exact ones; a longer one is read as if
        # every element were past them (stricter, and exact either way).
        self.big_file = len(text) > _FAST_LINE_LIMIT
        self.layer_forms: dict[tuple[str, ...], _LayerForm] = {}     # by markup
        self.edge_plans: dict[tuple[str, ...], tuple] = {}           # by markup: (newlines, ends, line)

    def _first(self, start: int, end: int, tag: str, start_line: int) -> tuple[int, int]:
        """Where the first `<tag ` is (or `end`), and its line; only white space may come before it."""
        # (A `<tag` without its space ends up inside a chunk, where its plan refuses it.)
        text, opening = self.text, f"<{tag} "
        at = text.find(opening, start, end)
        if at < 0:
            at = end
        if text[start:at].strip(" \t\n"):
            raise _NotPlain(f"something other than <{tag}> elements")
        return at, start_line + text.count("\n", start, at)

    def _plan_builder(self, tag: str, parts: list[str]) -> tuple[_PlanBuilder, str]:
        template = _template(parts)
        return _PlanBuilder(f"<{tag} " + template, len(parts) // 2, self.big_file), template

    def _layer_form(self, parts: list[str], markup: tuple[str, ...]) -> _LayerForm:
        builder, template = self._plan_builder("layer", parts)
        return _LayerForm(builder.layer(template), markup)

    def _edge_plan(self, parts: list[str]) -> tuple:
        builder, template = self._plan_builder("edge", parts)
        p = builder.edge(template)
        return p.newlines, p.ends, p.line

    def _chunks(self, at: int, end: int, tag: str):
        """Each `<tag ...>` of text[at:end] up to the next one, split at its quotes: markup at
        the even indices, attribute values at the odd ones."""
        text, opening = self.text, f"<{tag} "
        while at < end:
            following = text.find(opening, at + len(opening), end)
            if following < 0:
                following = end
            if following - at > _LONGEST_CHUNK:
                raise _NotPlain(f"a {tag} longer than libxml2 reads without XML_PARSE_HUGE")
            yield text[at + len(opening):following].split('"')
            at = following

    def layers(self, start: int, end: int) -> tuple[dict[str, Layer], int]:
        """The layers of text[start:end], and the line on which `end` is."""
        text, forms, add_layer = self.text, self.layer_forms, self.reader.add_layer
        versions: dict[tuple[str, str], tuple[str, int]] = {}
        layers: dict[str, Layer] = {}
        at, line = self._first(start, end, "layer", text.count("\n", 0, start) + 1)
        previous = _LayerForm(None, ())   # (a form no chunk has: where the first prediction comes from)
        for parts in self._chunks(at, end, "layer"):
            markup = tuple(parts[0::2])
            # Layers come in repeated blocks: the form that followed this one last time
            # usually follows it again, and comparing costs less than hashing.
            if markup == previous.next_markup:
                form = previous.next_form
            else:
                form = forms.get(markup)
                if form is None:
                    if len(forms) >= _FEW_FORMS and len(forms) * _FORMS_PER_LAYER > len(layers):
                        raise _NotPlain("so many forms of layer that reading them one by one is faster")
                    form = forms[markup] = self._layer_form(parts, markup)
                previous.next_markup, previous.next_form = form.markup, form
            previous = form
            _check_values(parts)
            values = parts[1::2]
            values += (None, "")
            lid, type_name, version = values[form.id_at], values[form.type_at], values[form.version_at]
            if not lid.lstrip("-").isdigit():
                raise _NotPlain("a layer id that is not an integer")
            resolved = versions.get((type_name, version))
            if resolved is None:
                try:
                    resolved = versions[(type_name, version)] = resolve_version(type_name, version)
                except VersionLookupError:
                    raise _NotPlain("an unknown operation") from None
            layer = form.build(values, line, lid, resolved)
            if lid in layers:
                add_layer(layers, layer)   # reports the duplicate
            else:
                layers[lid] = layer
            line += form.newlines
        return layers, line

    def edges(self, start: int, end: int, start_line: int) -> list[Edge]:
        at, line = self._first(start, end, "edge", start_line)
        edges = self._uniform_edges(at, end, line)
        if edges is not None:
            return edges
        plans = self.edge_plans
        edges = []
        for parts in self._chunks(at, end, "edge"):
            markup = tuple(parts[0::2])
            plan = plans.get(markup)
            if plan is None:
                plan = plans[markup] = self._edge_plan(parts)
            newlines, (a, b, c, d), line_at = plan
            _check_values(parts)
            edges.append(Edge(parts[2 * a + 1], parts[2 * b + 1], parts[2 * c + 1], parts[2 * d + 1],
                              line + line_at))
            line += newlines
        return edges

    def _uniform_edges(self, at: int, end: int, line: int) -> list[Edge] | None:
        """The edges from `at` on when all are written alike (as a serializer writes them):
        read from one split of the whole section; None when they are not."""
        text = self.text
        parts = text[at + len("<edge "):end].split('"')
        count = len(parts) // 8    # an edge has four attributes: eight parts, the last runs into the next edge
        if count < 2 or len(parts) != 8 * count + 1 or any(len(set(parts[i::8])) != 1 for i in (2, 4, 6)) \
                or len(set(parts[8:-1:8])) != 1:
            return None
        between = parts[8].split("<edge ")
        if len(between) != 2 or between[1] != parts[0]:
            return None
        head = (parts[0], parts[2], parts[4], parts[6])
        plans = self.edge_plans
        found = []
        for markup in (head + (between[0],), head + (parts[-1],)):
            plan = plans.get(markup)
            if plan is None:
                plan = plans[markup] = self._edge_plan([parts[0], "", parts[2], "", parts[4], "", parts[6], "",
                                                        markup[-1]])
            found.append(plan)
        (newlines, ends, line_at), last = found
        if last[1:] != (ends, line_at):
            return None
        _check_values(parts)
        columns = [parts[i::8] for i in (1, 3, 5, 7)]
        first = line + line_at
        lines = range(first, first + count * newlines, newlines) if newlines else itertools.repeat(first, count)
        return list(map(Edge, *(columns[i] for i in ends), lines))


def _parse_fast(data: bytes, reader: _Reader):
    """(root, top-level layers, top-level edges) through the fast path, or None where it does not apply.

    `reader` may have reported duplicate layers when None is returned: start it afresh.
    """
    # (libxml2 reads CR as a line end; values with other control characters are refused below.)
    if b"\r" in data or b"xmlns" in data:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    head = _PROLOGUE.match(text)
    if head is None or _PH_OPEN in text or _PH_CLOSE in text:
        return None
    declared = _ENCODING.search(head.group("decl") or "")
    if declared and declared.group(1).lower() not in ("utf-8", "utf8"):
        return None
    layers_start = head.end()
    layers_end = text.find("</layers>", layers_start)
    between = _BETWEEN_SECTIONS.match(text, layers_end + len("</layers>")) if layers_end >= 0 else None
    if between is None:
        return None
    edges_start = between.end()
    edges_end = text.find("</edges>", edges_start)
    if edges_end < 0:
        return None
    # An entity or character reference in a value would need resolving.  (Comments, CDATA,
    # processing instructions and nested sections are refused by the plans, unusual values
    # by `_check_values`.)
    if text.find("&", layers_start, layers_end) >= 0 or text.find("&", edges_start, edges_end) >= 0:
        return None
    fast = _FastReader(text, reader)
    try:
        layers, line = fast.layers(layers_start, layers_end)
        edges = fast.edges(edges_start, edges_end, line + text.count("\n", layers_end, edges_start))
    except _NotPlain:
        return None
    skeleton = (text[:layers_start] + text[layers_end:edges_start] + text[edges_end:]).encode("utf-8")
    try:
        root = etree.fromstring(skeleton, _safe_parser())
    except (etree.XMLSyntaxError, ValueError):
        return None
    if root.tag != "net":
        return None
    return root, layers, edges


_UTF16_32_BOMS = (b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")


def _looks_like_xml(data: bytes) -> bool:
    """XML text begins with "<" (after a byte-order mark and white space); a UTF-16/32 file is left
    to the parser."""
    if data.startswith(_UTF16_32_BOMS):
        return True
    return data.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n").startswith(b"<")


def _not_an_ir_message(path: Path) -> str:
    """What a user who passed some other file (the .bin, an array, an ONNX model) needs to hear."""
    hint = ""
    if path.suffix.lower() == ".bin" and path.with_suffix(".xml").is_file():
        hint = f": {path.name} holds the weights; pass {path.with_suffix('.xml').name}, the IR beside it"
    elif path.suffix.lower() in (".npy", ".npz"):
        hint = ": it is an array file (pass arrays with --input)"
    elif path.suffix.lower() == ".onnx":
        hint = ": it is an ONNX model (convert it with `ovc` or `openvino.convert_model` first)"
    return f"not an OpenVINO IR .xml file (it does not begin with an XML tag){hint}"


def parse_document(path: str | Path, data: bytes | None = None) -> IRDocument:
    """Parse one `.xml` (or `data`, the XML held in memory, named `path` in messages); raises only
    `UnreadableFileError` (not XML, not an IR)."""
    path = Path(path)
    if data is None:
        data = read_xml_bytes(path)
    file = str(path)
    if not data.strip():
        raise UnreadableFileError("file is empty", file=file)
    if not _looks_like_xml(data):
        raise UnreadableFileError(_not_an_ir_message(path), file=file, code="E-NOT-XML")
    if b"<!DOCTYPE" in data or b"<!ENTITY" in data:
        # Refused before parsing: no entity is ever declared, let alone expanded.
        raise UnreadableFileError("has a <!DOCTYPE> or <!ENTITY> declaration; IR files have none and irrun "
                                  "does not process DTDs or entities", file=file, line=1, code="E-XML-DTD")
    diags = Diagnostics(file)
    reader = _Reader(diags)
    fast = _parse_fast(data, reader)
    if fast is not None:
        root, top_layers, top_edges = fast
    else:
        diags.clear()   # (what the fast path reported before it gave up)
        reader, top_edges = _Reader(diags), None
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
    graph = reader.graph(root, top_layers, top_edges)
    rt = _children(root, "rt_info")
    if rt:
        graph.rt_info = _rt_info(rt[0])
    else:   # (as OpenVINO reads a legacy file: its sections become the model's rt_info)
        graph.rt_info = tuple(RtElement(legacy, (), _rt_info(found[0]))
                              for legacy in ("meta_data", "quantization_parameters")
                              for found in [_children(root, legacy)] if found)
    return IRDocument(path, version, root.get("name", path.stem), graph, rt_info_dict(graph.rt_info), False,
                      diags)
