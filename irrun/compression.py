"""Finding compressed weights: the decompression subgraphs NNCF and `compress_to_fp16` write.

A compressed weight is a Const of a narrow type that the graph widens before use:

    Const u8/i8/u4/i4/nf4/f4e2m1/f8* -> Convert(f16|f32) [-> Subtract(zero point)] -> Multiply(scale)
        [-> Reshape (grouped scales)] [-> Convert(f32)] -> MatMul / Convolution / Gather ...
    Const f16/bf16 -> Convert(f32) -> ...                    (float compression, no scale)

The zero point and the scale may come through their own Convert and a Reshape or
Unsqueeze (a zero point is often `Const u8 -> Convert f16`).  This is the pattern of
OpenVINO's `MarkDequantization` (src/common/transformations/src/transformations/
low_precision/mark_dequantization_subgraph.cpp): the Convert must be the weight's
only consumer, the Subtract is optional, the Multiply is not (for integer and
small-float storage), and Multiply's operands may come in either order.

`find_weight_compression(analysis)` lists every such weight of a model's top-level
graph (bodies of Loop / TensorIterator / If are not searched).  `irrun.precision`
uses it to follow OpenVINO's CPU plugin, which computes these subgraphs in f32.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .analysis import Analysis, Node
from .errors import LayerRef

#: Storage types OpenVINO's MarkDequantization recognises (MOCTransformations' list).
DEQUANTIZED_STORAGE = frozenset({"u8", "i8", "u4", "i4", "nf4", "f4e2m1", "f8e4m3", "f8e5m2", "f8e8m0"})
#: Float storage that is widened by a Convert alone (`compress_to_fp16`).
FLOAT_STORAGE = frozenset({"f16", "bf16"})
# Layers between the decompressed weight and the op that uses it.
_PASSING = frozenset({"Reshape", "Convert", "Transpose", "Unsqueeze", "Squeeze"})
_SIDE_INPUT = frozenset({"Reshape", "Unsqueeze"})


@dataclass(frozen=True)
class WeightCompression:
    """One compressed weight and how it is decompressed."""

    weight: LayerRef                  # the Const holding the stored values
    storage: str                      # its element type: "u8", "i4", "nf4", "f8e4m3", "f16" ...
    shape: tuple[int, ...]            # its shape ([N, groups, group size] for grouped scales)
    zero_point: LayerRef | None       # the zero point's source layer (behind Convert / Reshape), if any
    zero_point_storage: str | None
    scale: LayerRef | None            # the scale's source layer, None for float compression
    scale_storage: str | None
    granularity: str                  # "tensor", "channel", "group" or "none" (no scale)
    group_size: int | None            # elements sharing one scale along the grouped axis
    decompressed_type: str            # element type of the decompressed weight where it is used
    consumers: tuple[LayerRef, ...]   # the layers that use the decompressed weight
    layers: tuple[str, ...]           # ids of the decompression layers (Convert ... last Convert)

    @property
    def symmetric(self) -> bool:
        return self.zero_point is None

    def describe(self) -> str:
        """One line: `u4 [4096,32,128] asymmetric (u4 zero point), f16 scale per group of 128 -> MatMul`."""
        shape = ",".join(map(str, self.shape))
        text = f"{self.storage} [{shape}]"
        if self.granularity != "none":
            zp = "symmetric" if self.symmetric else f"asymmetric ({self.zero_point_storage} zero point)"
            per = {"tensor": "per tensor", "channel": "per channel",
                   "group": f"per group of {self.group_size}"}[self.granularity]
            text += f" {zp}, {self.scale_storage} scale {per}"
        users = sorted({c.type for c in self.consumers})
        return text + (f" -> {', '.join(users)}" if users else "")


def consumers_of(analysis: Analysis) -> dict[str, list[tuple[str, int]]]:
    """Layer id -> (consumer id, input index) for every edge leaving it (any output port)."""
    found: dict[str, list[tuple[str, int]]] = {}
    for lid, node in analysis.nodes.items():
        for i, src in enumerate(node.inputs):
            if src is not None:
                found.setdefault(src[0], []).append((lid, i))
    return found


def _type_name(node: Node | None) -> str | None:
    if node is None or not node.types or node.types[0] is None:
        return None
    return node.types[0].etype.name


def _source(analysis: Analysis, src: tuple[str, int] | None, through_convert: bool = True
            ) -> tuple[Node | None, list[str]]:
    """The layer behind an optional Reshape/Unsqueeze and an optional Convert (either order), and the
    ids of the layers passed on the way."""
    passed: list[str] = []
    node = analysis.nodes.get(src[0]) if src is not None else None
    for _ in range(3):
        if node is None:
            break
        op_type = node.layer.op_type
        if op_type in _SIDE_INPUT or (op_type == "Convert" and through_convert):
            passed.append(node.id)
            node = analysis.nodes.get(node.inputs[0][0]) if node.inputs and node.inputs[0] else None
        else:
            break
    return node, passed


def _is_const(node: Node | None) -> bool:
    return node is not None and node.layer.op_type == "Constant"


def _shape(node: Node) -> tuple[int, ...] | None:
    t = node.types[0] if node.types else None
    shape = t.shape if t is not None else None
    return tuple(shape) if shape is not None and all(isinstance(d, int) for d in shape) else None


def _granularity(weight: tuple[int, ...] | None, scale: tuple[int, ...] | None, regrouped: bool
                 ) -> tuple[str, int | None]:
    """("tensor" | "channel" | "group", group size) from the weight's and the scale's shapes."""
    if weight is None or scale is None:
        return "channel", None
    if int(np.prod(scale, dtype=np.int64)) <= 1:
        return "tensor", None
    scale = (1,) * (len(weight) - len(scale)) + tuple(scale)
    reduced = [i for i, (w, s) in enumerate(zip(weight, scale)) if s == 1 and w > 1]
    varying = [i for i, s in enumerate(scale) if s > 1]
    # NNCF's grouped scales: weight [..., groups, group size], scale [..., groups, 1], then a Reshape
    # merges the last two axes.
    if regrouped and reduced and varying and reduced[-1] == len(weight) - 1 and varying[-1] == len(weight) - 2:
        return "group", weight[-1]
    return "channel", None


def _downstream(analysis: Analysis, consumers: dict, start: str) -> tuple[list[str], list[str], str | None]:
    """From the end of a decompression: the layers passed (Reshape, Convert ...), the ids of the
    layers using the weight, and the element type that reaches them."""
    passed: list[str] = []
    last = start
    while True:
        users = consumers.get(last, [])
        if len(users) != 1:
            break
        user = analysis.nodes[users[0][0]]
        if user.layer.op_type not in _PASSING:
            break
        passed.append(user.id)
        last = user.id
    users = [lid for lid, _ in consumers.get(last, [])]
    return passed, users, _type_name(analysis.nodes[last])


def find_weight_compression(analysis: Analysis) -> list[WeightCompression]:
    """Every compressed weight of the model's top-level graph, in the order of the weights' layers."""
    consumers = consumers_of(analysis)
    found: dict[str, WeightCompression] = {}
    nodes = analysis.nodes
    for lid, node in nodes.items():
        if node.layer.op_type != "Convert" or not node.inputs or node.inputs[0] is None:
            continue
        weight = nodes.get(node.inputs[0][0])
        storage = _type_name(weight)
        if not _is_const(weight) or storage is None or len(consumers.get(lid, [])) != 1:
            continue
        if storage not in DEQUANTIZED_STORAGE and storage not in FLOAT_STORAGE:
            continue
        chain = [lid]
        after = nodes[consumers[lid][0][0]]
        zero_point = zp_storage = None
        if after.layer.op_type == "Subtract" and after.inputs[0] == (lid, 0):
            zp_node, zp_passed = _source(analysis, after.inputs[1])
            if zp_node is not None:
                zero_point, zp_storage = zp_node.layer.ref, _type_name(zp_node)
            chain += [*zp_passed, after.id]
            users = consumers.get(after.id, [])
            after = nodes[users[0][0]] if len(users) == 1 else None
        multiply = after if after is not None and after.layer.op_type == "Multiply" else None
        if multiply is not None:
            data_side = chain[-1]
            if (data_side, 0) not in multiply.inputs:
                multiply = None
        if multiply is None:
            if storage not in FLOAT_STORAGE or zero_point is not None:
                continue      # an integer Const that is only cast, not dequantized
            passed, users, decompressed = _downstream(analysis, consumers, lid)
            found[weight.id] = WeightCompression(
                weight.layer.ref, storage, _shape(weight) or (), None, None, None, None, "none", None,
                decompressed or "", tuple(nodes[u].layer.ref for u in users), tuple(chain + passed))
            continue
        scale_src = multiply.inputs[1] if multiply.inputs[0] == (chain[-1], 0) else multiply.inputs[0]
        scale_node, scale_passed = _source(analysis, scale_src)
        # A Const scale: its storage; a computed one (NVFP4's f8 * factor): the type the Multiply gets.
        scale_type = _type_name(scale_node) if _is_const(scale_node) else \
            (analysis.type_of(scale_src).etype.name if analysis.type_of(scale_src) is not None else None)
        chain += [*scale_passed, multiply.id]
        passed, users, decompressed = _downstream(analysis, consumers, multiply.id)
        regrouped = any(nodes[p].layer.op_type == "Reshape" for p in passed)
        scale_shape = _shape(nodes[scale_src[0]]) if scale_src is not None else None
        granularity, group = _granularity(_shape(weight), scale_shape, regrouped)
        found[weight.id] = WeightCompression(
            weight.layer.ref, storage, _shape(weight) or (), zero_point, zp_storage,
            scale_node.layer.ref if scale_node is not None else None, scale_type,
            granularity, group, decompressed or "", tuple(nodes[u].layer.ref for u in users),
            tuple(chain + passed))
    # A decompressed scale or zero point (NVFP4's `Const f8e4m3 -> Convert -> Multiply(factor)`) is part
    # of the weight it scales, not a weight of its own.
    inside = {lid for w in found.values() for lid in w.layers}
    weights = [w for w in found.values() if not any(c.id in inside for c in w.consumers)]
    return sorted(weights, key=lambda w: w.weight.line or 0)
