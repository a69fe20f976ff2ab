"""Compressing float weights to f16 as `openvino.save_model(..., compress_to_fp16=True)` does.

OpenVINO's rule (transformations/common_optimizations/compress_float_constants.cpp and
mark_precision_sensitive_shapeof_subgraphs.cpp):

* a model already optimized is left alone: one with FakeQuantize or FakeConvert, or with weights
  compressed to integers or f8 (Const -> Convert [-> Subtract] -> Multiply by a Const);
* Consts on the path of a *precision-sensitive* input (a Reshape's target shape, a Broadcast's,
  a StridedSlice's begin/end/strides ...; `PRECISION_SENSITIVE`), walking up from it and
  stopping at ShapeOf, keep their type, as do Consts marked `disable_fp16_compression`;
  (those get `DisablePrecisionConversion` in their rt_info);
* every other f32 or f64 Const becomes an f16 Const named `<name>_compressed` (values beyond
  f16's range clamped to +-65504; its tensor names stay on it) followed by a Convert back to its
  type, named as the Const was and marked `decompression` in its rt_info; unless f16 would lose
  too much of it (`to_f16`, OpenVINO's check_f16_compression, measured against 2026.4).

Only the top-level graph is compressed (Consts inside Loop, TensorIterator and If bodies keep
their type).  Layer ids that count 0, 1, 2 ... in the order written (as OpenVINO writes them)
are counted again with the new layers in place, edges sorted by their source, so that an IR
OpenVINO wrote compresses to the IR OpenVINO writes.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from . import etypes
from .analysis import Analysis
from .editing import convert_layer, graph_of
from .ir import Edge, IRGraph, Layer, RtElement
from .registry import TensorType

# The inputs OpenVINO marks precision-sensitive in each op's constructor: op type -> input indices,
# or op type -> {version: input indices} where versions differ.
PRECISION_SENSITIVE = {
    "Reshape": (1,), "Broadcast": (1,), "Tile": (1,), "OneHot": (1,), "TopK": (1,), "Pad": (1, 2),
    "Interpolate": {0: (1,), 4: (1, 2), 11: (1,)},
    "StridedSlice": (1, 2, 3), "BatchToSpace": (1, 2, 3), "SpaceToBatch": (1, 2, 3),
    "ConvolutionBackpropData": (2,), "GroupConvolutionBackpropData": (2,),
}


def _sensitive_inputs(layer: Layer) -> tuple[int, ...]:
    found = PRECISION_SENSITIVE.get(layer.op_type, ())
    return found.get(layer.op_version, ()) if isinstance(found, dict) else found
_INTEGER_OR_F8_STORAGE = frozenset({"i4", "u4", "i8", "u8", "nf4", "f8e4m3", "f8e5m2"})
_F16_MAX = 65504.0
_F16_TINY = 2.0 ** -24          # the smallest f16 subnormal
KEEP_THRESHOLD = 0.75

DECOMPRESSION = RtElement("attribute", (("name", "decompression"), ("version", "0")), ())
KEEP_PRECISION = RtElement("attribute", (("name", "DisablePrecisionConversion"), ("version", "0"),
                                         ("value", "dynamic:f16")), ())


def _with(rt_info, element: RtElement):
    """rt_info with one more attribute, in OpenVINO's order (by name)."""
    return tuple(sorted(tuple(rt_info) + (element,), key=lambda e: dict(e.attrs).get("name", e.tag)))


def is_optimized(analysis: Analysis) -> bool:
    """OpenVINO's `is_model_optimized`: a FakeQuantize or FakeConvert, or a weight compressed to an
    integer or f8 type: Multiply(Convert(Const) [-> Subtract(zero point)], Const), either order,
    the scale a Const itself (a Convert in front of it does not match, as in OpenVINO)."""
    nodes = analysis.nodes

    def layer(src):
        return nodes[src[0]].layer if src is not None else None

    def stored(src) -> bool:
        convert = layer(src)
        if convert is None or convert.op_type != "Convert" or not nodes[src[0]].inputs:
            return False
        weight = nodes[src[0]].inputs[0]
        t = nodes[weight[0]].types[0] if weight is not None and nodes[weight[0]].types else None
        return layer(weight).op_type == "Constant" and t is not None and t.etype.name in _INTEGER_OR_F8_STORAGE

    def decompressed(src) -> bool:
        node = layer(src)
        if node is not None and node.op_type == "Subtract" and len(nodes[src[0]].inputs) == 2:
            zero_point = nodes[src[0]].inputs[1]
            zp = layer(zero_point)
            zp_ok = zp is not None and (zp.op_type == "Constant" or (zp.op_type == "Convert" and nodes[zero_point[0]].inputs
                                                                      and layer(nodes[zero_point[0]].inputs[0]).op_type == "Constant"))
            return zp_ok and stored(nodes[src[0]].inputs[0])
        return stored(src)

    for lid, node in nodes.items():
        op_type = node.layer.op_type
        if op_type in ("FakeQuantize", "FakeConvert"):
            return True
        if op_type == "Multiply" and len(node.inputs) == 2:
            a, b = node.inputs
            for x, y in ((a, b), (b, a)):
                if layer(y) is not None and layer(y).op_type == "Constant" and decompressed(x):
                    return True
    return False


def precision_sensitive_consts(analysis: Analysis) -> set[str]:
    """Const layers on the path of a precision-sensitive input, up to (not past) ShapeOf."""
    nodes = analysis.nodes
    marked: set[str] = set()
    visited: set[str] = set()
    for lid in analysis.live:
        node = nodes[lid]
        for index in _sensitive_inputs(node.layer):
            if index >= len(node.inputs) or node.inputs[index] is None:
                continue
            stack = [node.inputs[index][0]]
            while stack:
                current = stack.pop()
                if current in visited:
                    continue
                visited.add(current)
                layer = nodes[current].layer
                if layer.op_type == "ShapeOf":
                    continue
                if layer.op_type == "Constant":
                    marked.add(current)
                stack.extend(src[0] for src in nodes[current].inputs if src is not None)
    return marked


def _disabled(layer: Layer) -> bool:
    return any(dict(e.attrs).get("name") == "disable_fp16_compression" for e in layer.rt_info)


def to_f16(values: np.ndarray) -> np.ndarray | None:
    """The f16 values OpenVINO stores (clamped to +-65504), or None where the Const stays as it is:
    one value that f16 would move by more than 1, or 75% or more of its values rejected (beyond
    f16's range, nonzero below its smallest subnormal, or, for f32, moved by more than 1e-3 of
    themselves, 1e-4 for a single value: a scale such a value multiplies everything by)."""
    if values.size == 0:
        return None
    flat = values.reshape(-1)
    magnitude = np.abs(flat)
    outside = (magnitude > _F16_MAX) | ((magnitude < _F16_TINY) & (flat != 0))
    with np.errstate(over="ignore", invalid="ignore"):
        small = np.clip(flat, -_F16_MAX, _F16_MAX).astype(np.float16)
        if values.dtype == np.float32:
            error = np.abs(flat.astype(np.float64) - small.astype(np.float64))
            inside = ~outside
            if np.any(error[inside] > 1.0):
                return None
            tolerance = 1e-4 if flat.size == 1 else 1e-3
            outside |= inside & (flat != 0) & (error > tolerance * magnitude)
    if np.count_nonzero(outside) / flat.size >= KEEP_THRESHOLD:
        return None
    return small.reshape(values.shape)


def _data_key(layer: Layer) -> tuple:
    return layer.name, layer.data.get("offset"), layer.data.get("element_type")


def compressed_graph(analysis: Analysis, constant_bytes: Callable[[Layer], bytes], graph: IRGraph | None = None
                     ) -> tuple[IRGraph, Callable[[Layer], bytes], int]:
    """The top-level graph (`graph`: the analysed one, or one made from it with the same layer ids and
    more layers that are no Consts) with its float Consts compressed, the bytes of every Const of it,
    and how many Consts were compressed (0: the graph as it was)."""
    graph = analysis.document.graph if graph is None else graph
    if is_optimized(analysis):
        return graph, constant_bytes, 0
    keep = precision_sensitive_consts(analysis)
    compressed: dict[str, np.ndarray] = {}
    for lid, layer in graph.layers.items():
        if layer.op_type != "Constant" or lid in keep or lid not in analysis.live or _disabled(layer):
            continue
        t = analysis.nodes[lid].types[0] if analysis.nodes[lid].types else None
        if t is None or t.etype.name not in ("f32", "f64"):
            continue
        value = t.value if t.value is not None else analysis.nodes[lid].op.run()
        small = to_f16(np.asarray(value))
        if small is not None:
            compressed[lid] = small
    if not compressed:
        return graph, constant_bytes, 0

    sequential = list(graph.layers) == [str(i) for i in range(len(graph.layers))]
    fresh = iter(range(max((int(i) for i in graph.layers if i.lstrip("-").isdigit()), default=-1) + 1, 1 << 62))
    layers: dict[str, Layer] = {}
    renamed: dict[str, str] = {}              # old id -> new id (of the Convert, for a compressed Const)
    stored: dict[tuple, bytes] = {}           # a new Const's (name, offset, type) -> its f16 bytes (ids may change)
    new_edges: list[tuple[Edge, str]] = []    # (edge, the old id it sorts with)
    for lid, layer in graph.layers.items():
        if lid not in compressed:
            new_id = str(len(layers)) if sequential else lid
            rt_info = _with(layer.rt_info, KEEP_PRECISION) if lid in keep and not _disabled(layer) else layer.rt_info
            layers[new_id] = dataclasses.replace(layer, id=new_id, rt_info=rt_info)
            renamed[lid] = new_id
            continue
        small = compressed[lid]
        const_id = str(len(layers)) if sequential else str(next(fresh))
        port = layer.outputs[0]
        const = dataclasses.replace(
            layer, id=const_id, name=f"{layer.name}_compressed",
            data={k: ("f16" if k == "element_type" else v) for k, v in layer.data.items()},
            outputs=[dataclasses.replace(port, precision=etypes.f16.precision, etype=etypes.f16)])
        layers[const_id] = const
        stored[_data_key(const)] = small.tobytes()
        convert_id = str(len(layers)) if sequential else str(next(fresh))
        t = analysis.nodes[lid].types[0]
        convert = convert_layer(convert_id, layer.name, TensorType(t.shape, etypes.f16), t.etype)
        convert = dataclasses.replace(convert, rt_info=_with(layer.rt_info, DECOMPRESSION), line=layer.line,
                                      inputs=[dataclasses.replace(convert.inputs[0], dims=port.dims)],
                                      outputs=[dataclasses.replace(convert.outputs[0], dims=port.dims)])
        layers[convert_id] = convert
        renamed[lid] = convert_id
        new_edges.append((Edge(const_id, const.outputs[0].id, convert_id, convert.inputs[0].id, 0), const_id))
    for e in graph.edges:
        source = renamed[e.from_layer]
        from_port = layers[source].outputs[0].id if e.from_layer in compressed else e.from_port
        new_edges.append((Edge(source, from_port, renamed[e.to_layer], e.to_port, e.line), source))
    order = {lid: i for i, lid in enumerate(layers)}
    edges = [e for e, _ in sorted(new_edges, key=lambda pair: order[pair[1]])]

    def data(layer: Layer) -> bytes:
        found = stored.get(_data_key(layer))
        return found if found is not None else constant_bytes(layer)

    return graph_of(layers, edges, graph.rt_info), data, len(compressed)
