"""A model's graph for people and tools: networkx, Graphviz DOT, GraphML, node-link JSON.

One node per layer (`ir.layer_labels`: name, type, version, opset, line, attributes) and one
edge per IR edge, with the inferred shape and element type of the tensor it carries.

Sub-graph bodies (TensorIterator, Loop, If) are included: their layers are nodes with scoped
ids, as irrun's messages name them (`7/3` is layer 3 of layer 7's body, `7/then/3` and
`7/else/3` the branches of an If), with `parent` = the owning layer's id and `body` = the body's
tag; their edges join scoped ids.  No edge joins a body to its owner (the port map is not an
IR edge); DOT draws each body as a cluster.
"""
from __future__ import annotations

import io
import json
from pathlib import Path
from typing import TYPE_CHECKING

from .analysis import Analysis
from .arrays import atomic_write
from .errors import UsageError
from .ir import layer_labels
from .shapes import format_shape

if TYPE_CHECKING:
    import networkx as nx

FORMATS = ("dot", "graphml", "json")
_SUFFIXES = {".dot": "dot", ".gv": "dot", ".graphml": "graphml", ".xml": "graphml", ".json": "json"}
SCHEMA_VERSION = 1


def annotated_graph(analysis: Analysis, *, bodies: bool = True) -> nx.MultiDiGraph:
    """The layers as a networkx MultiDiGraph: nodes labelled as `ir.layer_labels` says (plus
    `parent` and `body` inside bodies), edges with out_port, in_port, line, shape (a tuple of
    ints and `Dim`s, None for a dynamic rank) and element_type (its name)."""
    import networkx as nx
    g = nx.MultiDiGraph(name=analysis.document.name)
    _add(g, analysis, None, None, bodies)
    return g


def _add(g, analysis: Analysis, parent: str | None, tag: str | None, bodies: bool) -> None:
    for lid, node in analysis.nodes.items():
        layer = node.layer
        labels = layer_labels(layer)
        if parent is not None:
            labels.update(parent=parent, body=tag)
        g.add_node(layer.scope + lid, **labels)
    scope = next(iter(analysis.nodes.values())).layer.scope if analysis.nodes else ""
    for e in analysis.document.graph.edges:
        if e.in_index is None:   # an edge that connects no real ports (validation reports it)
            continue
        t = analysis.type_of((e.from_layer, e.out_index))
        g.add_edge(scope + e.from_layer, scope + e.to_layer, out_port=e.out_index, in_port=e.in_index,
                   line=e.line, shape=None if t is None else t.shape,
                   element_type="dynamic" if t is None else t.etype.name)
    if bodies:
        for lid, node in analysis.nodes.items():
            for body_tag, body in node.bodies.items():
                _add(g, body, scope + lid, body_tag, bodies)


# ---------------------------------------------------------------- formats

def format_for(path: str | None, fmt: str | None) -> str:
    """The format asked for, else the one the output's suffix names."""
    if fmt:
        return fmt
    if path and path != "-":
        found = _SUFFIXES.get(Path(path).suffix.lower())
        if found:
            return found
        raise UsageError(f"cannot tell the format from {path!r}; pass --format {'|'.join(FORMATS)}")
    return "dot"


def to_json(g: nx.MultiDiGraph, model_file: str | None = None) -> dict:
    """networkx's node-link form (`networkx.node_link_graph(data, edges="edges")` reads it back),
    shapes as lists (dynamic dims as text: "?", "1..8"; null for a dynamic rank)."""
    from .stats import shape_json
    nodes = [{"id": n, **data} for n, data in g.nodes(data=True)]
    edges = [{"source": u, "target": v, "key": k, **{**data, "shape": shape_json(data.get("shape"))}}
             for u, v, k, data in g.edges(keys=True, data=True)]
    return {"directed": True, "multigraph": True,
            "graph": {"name": g.graph.get("name"), "file": model_file, "format": "irrun-graph",
                      "schema": SCHEMA_VERSION},
            "nodes": nodes, "edges": edges}


def _graphml_ready(g: nx.MultiDiGraph) -> nx.MultiDiGraph:
    """A copy whose every value is a GraphML scalar: attributes flattened to `attr.<name>`,
    shapes as text, nothing None."""
    import networkx as nx
    out = nx.MultiDiGraph(name=str(g.graph.get("name") or ""))
    for n, data in g.nodes(data=True):
        flat = {k: (str(v) if k == "version" else v) for k, v in data.items()
                if k != "attributes" and v is not None}
        flat.update({f"attr.{k}": str(v) for k, v in data.get("attributes", {}).items()})
        out.add_node(n, **flat)
    for u, v, k, data in g.edges(keys=True, data=True):
        flat = {key: value for key, value in data.items() if value is not None and key != "shape"}
        flat["shape"] = format_shape(data.get("shape"))
        out.add_edge(u, v, key=k, **flat)
    return out


def _dot_quote(text) -> str:
    """A DOT double-quoted string: backslashes and quotes escaped, line breaks as \\n."""
    text = str(text).replace("\\", "\\\\").replace('"', '\\"')
    return '"' + text.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\n") + '"'


_DOT_STYLE = {
    "Parameter": 'shape=invhouse, fillcolor="#c6e5ff"',
    "Result": 'shape=house, fillcolor="#c6e5ff"',
    "Constant": 'shape=note, fillcolor="#eeeeee", fontsize=9',
}
_HEAVY = ("Convolution", "GroupConvolution", "ConvolutionBackpropData", "GroupConvolutionBackpropData",
          "DeformableConvolution", "BinaryConvolution", "MatMul", "Einsum", "ScaledDotProductAttention",
          "LSTMCell", "GRUCell", "RNNCell", "LSTMSequence", "GRUSequence", "RNNSequence")


def to_dot(g: nx.MultiDiGraph) -> str:
    """Graphviz DOT: box per layer (name, type-version), an edge label per tensor (shape, type),
    a cluster per sub-graph body; every label, id and attribute quoted and escaped."""
    out = io.StringIO()
    w = out.write
    w(f"digraph {_dot_quote(g.graph.get('name') or 'model')} {{\n")
    w('  graph [rankdir=TB, fontname="Helvetica"];\n')
    w('  node [shape=box, style="rounded,filled", fillcolor="#ffffff", fontname="Helvetica", fontsize=10];\n')
    w('  edge [fontname="Helvetica", fontsize=8];\n')
    by_parent: dict[tuple[str | None, str | None], list] = {}
    for n, data in g.nodes(data=True):
        by_parent.setdefault((data.get("parent"), data.get("body")), []).append((n, data))

    def node_line(n, data, indent):
        label = f"{data['name']}\n{data['type']}-{data['version']}"
        attrs = [f"label={_dot_quote(label)}"]
        # ("name" would clash with the node's own id in DOT readers such as pydot)
        attrs.append(f"layer_name={_dot_quote(data['name'])}")
        for key in ("type", "version", "opset", "line"):
            attrs.append(f"{key}={_dot_quote(data[key])}")
        attrs += [f"{_dot_quote('attr.' + k)}={_dot_quote(v)}" for k, v in data.get("attributes", {}).items()]
        tooltip = "\n".join(f"{k}={v}" for k, v in data.get("attributes", {}).items())
        attrs.append(f"tooltip={_dot_quote(tooltip or data['name'])}")
        style = _DOT_STYLE.get(data["type"]) or ('fillcolor="#ffe3b3"' if data["type"] in _HEAVY else None)
        if style:
            attrs.append(style)
        w(f"{indent}{_dot_quote(n)} [{', '.join(attrs)}];\n")

    def emit(parent, tag, indent):
        for n, data in by_parent.get((parent, tag), ()):
            node_line(n, data, indent)
            for (p, body_tag) in sorted((k for k in by_parent if k[0] == n), key=str):
                w(f"{indent}subgraph {_dot_quote(f'cluster_{n}/{body_tag}')} {{\n")
                title = f"{data['name']} ({body_tag})"
                w(f"{indent}  label={_dot_quote(title)}; style=dashed;\n")
                emit(p, body_tag, indent + "  ")
                w(f"{indent}}}\n")

    emit(None, None, "  ")
    for u, v, k, data in g.edges(keys=True, data=True):
        label = f"{format_shape(data.get('shape'))} {data.get('element_type')}"
        w(f"  {_dot_quote(u)} -> {_dot_quote(v)} [label={_dot_quote(label)}, out_port={data['out_port']}, "
          f"in_port={data['in_port']}, shape={_dot_quote(format_shape(data.get('shape')))}, "
          f"element_type={_dot_quote(data.get('element_type'))}];\n")
    w("}\n")
    return out.getvalue()


def render(g: nx.MultiDiGraph, fmt: str, model_file: str | None = None) -> bytes:
    if fmt == "dot":
        return to_dot(g).encode("utf-8")
    if fmt == "json":
        return (json.dumps(to_json(g, model_file), indent=1, ensure_ascii=False) + "\n").encode("utf-8")
    if fmt == "graphml":
        import networkx as nx
        buf = io.BytesIO()
        nx.write_graphml(_graphml_ready(g), buf, encoding="utf-8")
        return buf.getvalue()
    raise UsageError(f"unknown graph format {fmt!r} (one of {', '.join(FORMATS)})")


def write_graph(g: nx.MultiDiGraph, path: str | Path, fmt: str, model_file: str | None = None) -> None:
    """Write the graph to `path` atomically; an unwritable path is one `UsageError`."""
    data = render(g, fmt, model_file)
    try:
        with atomic_write(path) as f:
            f.write(data)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
