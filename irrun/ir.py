"""The OpenVINO IR format (v10/v11) as irrun holds it, and `parse_document`, the way in.

The data model: layers, ports, edges, graphs (with sub-graph bodies), documents, tensor
names and rt_info, which the reader builds and the writer, analysis and editing use.

Parsing never raises for a defect in the model: every problem becomes a
`Diagnostic`; only a file that cannot be read at all raises
`UnreadableFileError`.  `irrun/ir_reader.py` reads any IR with lxml (it resolves no
entities, loads no DTD, touches no network and keeps libxml2's size and depth limits);
a big IR as serializers write it takes the fast path of `irrun/ir_fastpath.py`, which
gives exactly what the general path gives.
"""
from __future__ import annotations

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
    # Imported here, not at the top: the readers build this module's classes and so import
    # it, and this module holds the data model and this entry point alike (its importers
    # expect both here).  Later calls find the modules loaded.
    from .ir_fastpath import parse_fast
    from .ir_reader import ElementReader, children_named, line_of, parse_streaming, read_rt_info

    diags = Diagnostics(file)
    reader = ElementReader(diags)
    fast = parse_fast(data, reader)
    if fast is not None:
        root, top_layers, top_edges = fast
    else:
        diags.clear()   # (what the fast path reported before it gave up)
        reader, top_edges = ElementReader(diags), None
        try:
            root, top_layers = parse_streaming(data, reader)
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
    rt = children_named(root, "rt_info")
    if rt:
        graph.rt_info = read_rt_info(rt[0])
    else:   # (as OpenVINO reads a legacy file: its sections become the model's rt_info)
        graph.rt_info = tuple(RtElement(legacy, (), read_rt_info(found[0]))
                              for legacy in ("meta_data", "quantization_parameters")
                              for found in [children_named(root, legacy)] if found)
    return IRDocument(path, version, root.get("name", path.stem), graph, rt_info_dict(graph.rt_info), False,
                      diags)
