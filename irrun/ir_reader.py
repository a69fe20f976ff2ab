"""The general IR reader: lxml elements -> layers, ports, edges and graphs (irrun/ir.py), with a
diagnostic for every defect and the line of every element, in files of any length.

The lxml parser resolves no entities, loads no DTD, touches no network and keeps
libxml2's size and depth limits.  `parse_document` (irrun/ir.py) reads with it every file
the fast path (irrun/ir_fastpath.py) does not take; on the fast path it still connects the
edges and reads the model's rt_info.
"""
from __future__ import annotations

import io

from lxml import etree

from . import etypes
from .diagnostics import Diagnostics
from .ir import EMPTY, SUBGRAPH_BODIES, Edge, IRGraph, Layer, Port, RtElement, RtInfo, split_names
from .spec import VersionLookupError, resolve_version


# Blank text is kept: past line 65535 it is what gives elements their line (see `line_of`).
_SAFE_OPTIONS = dict(resolve_entities=False, no_network=True, load_dtd=False, dtd_validation=False,
                     huge_tree=False, remove_comments=True, remove_pis=True, collect_ids=False)


def safe_parser() -> etree.XMLParser:
    return etree.XMLParser(**_SAFE_OPTIONS)


# libxml2 keeps an element's line in 16 bits.  Past that, lxml reports the line on
# which the element's first child ends, when that child is text (the blank text
# after a start tag, or a <dim>'s number), or else, for an element without
# children, the line on which its tail text ends.
LAST_EXACT_LINE = 65534


def line_of(element) -> int:
    """The line of an element's start tag, in files of any length."""
    line = element.sourceline
    if line is None or line <= LAST_EXACT_LINE:
        return line
    if element.text is not None:
        return line - element.text.count("\n")
    if len(element) == 0 and element.tail is not None:
        return line - element.tail.count("\n")
    return line   # an element that starts with a child element and no text: the child's line


def children_named(element, tag):
    return [c for c in element if c.tag == tag]


def children_by_tag(element) -> dict[str, list]:
    """Element children grouped by tag, in one pass."""
    groups: dict[str, list] = {}
    for child in element:
        if isinstance(child.tag, str):
            groups.setdefault(child.tag, []).append(child)
    return groups


def read_rt_info(element) -> RtInfo:
    """The elements of an `<rt_info>` (or of one of its elements) as written; never interpreted."""
    return tuple(RtElement(child.tag, tuple(child.items()), read_rt_info(child) if len(child) else ())
                 for child in element if isinstance(child.tag, str))


class ElementReader:
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
                    () if rt is None else read_rt_info(rt))

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
        kids = children_by_tag(element)
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
            layer.rt_info = read_rt_info(rt[0])
        output_names = element.get("output_names")
        if output_names is not None:
            layer.output_names = split_names(output_names)
        if not kids.keys() <= PLAIN_LAYER_PARTS:
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
        layers_el = children_named(container, "layers")
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
        rt = children_named(container, "rt_info")
        rt_info = read_rt_info(rt[0]) if rt else ()
        edges = []
        edges_el = children_named(container, "edges")
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
PLAIN_LAYER_PARTS = {"data", "input", "output", "rt_info"}


def parse_streaming(data: bytes, reader: ElementReader) -> tuple:
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


