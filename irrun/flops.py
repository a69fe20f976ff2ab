"""Multiply-accumulates (MACs) per layer, from static shapes.

The convention (FLOPs = 2 x MACs):

* **Contractions** count their multiply-accumulates exactly: Convolution (output elements x
  input channels x kernel taps), GroupConvolution (per group), the backprop-data forms (input
  elements x output channels per group x kernel taps), DeformableConvolution and
  BinaryConvolution as the convolution they compute (the offset sampling and the XNOR trick
  are not counted), MatMul (output elements x the contracted dim), Einsum (pairwise, left to
  right, as OpenVINO evaluates it: each step costs the product of every label it touches),
  GroupedMatMul (opset 17: output elements x K), ScaledDotProductAttention (Q K^T and the weighting of V), and the RNN cells and sequences
  (batch x steps x the elements of W and R; the gates' elementwise work is not counted).
  Biases are separate Add layers in an IR and count as those.
* **Elementwise arithmetic** (Add, Subtract, Multiply, Divide, SquaredDifference, Power,
  Maximum, Minimum, Mod, FloorMod) counts one per output element, BatchNormInference one per
  element, and the statistics-then-normalize ops (MVN, GroupNormalization, NormalizeL2) two:
  what a folded BatchNorm, a bias or a residual becomes is not free.
* **Pooling and reductions** count one per element accumulated: MaxPool / AvgPool output
  elements x kernel taps; adaptive pools and Reduce* (not the logical ones) their input elements.
* **Everything else counts 0**: activations and other unary math, softmax, data movement,
  shape arithmetic, comparisons, gathers, conversions.  A layer whose inputs all come from
  Constants is folded once at load (by OpenVINO as by irrun), not computed per inference: 0.
* **Unknown (None)**: a shape that is not static, an op irrun does not know, the DFT family,
  an If whose condition is not known at load and a Loop whose trip count is not; a Loop with a
  known trip count counts that many runs of its body (an upper bound when its condition may
  end it sooner), a TensorIterator one per slice.

With this, torchvision's ResNet-18 at 224x224 is 1.814 G MACs in its convolutions and its
classifier (what fvcore and ptflops' aten backend report as 1.81 G) and 1.819 G in all (the
1.82 G of ptflops' module backend and of the usual tables).
"""
from __future__ import annotations

import math
import weakref
from typing import TYPE_CHECKING, Sequence

from .ir import Layer

if TYPE_CHECKING:
    from .analysis import Analysis

# Inputs holding W and R, by op type.
_RECURRENT = {
    "LSTMCell": (3, 4), "GRUCell": (2, 3), "RNNCell": (2, 3),
    "LSTMSequence": (4, 5), "GRUSequence": (3, 4), "RNNSequence": (3, 4),
}
_ELEMENTWISE = frozenset({"Add", "Subtract", "Multiply", "Divide", "SquaredDifference", "Power", "Maximum",
                          "Minimum", "Mod", "FloorMod", "BatchNormInference"})
_NORMALIZE = frozenset({"MVN", "GroupNormalization", "NormalizeL2"})
_WINDOW_POOLS = frozenset({"MaxPool", "AvgPool"})
_WHOLE_INPUT = frozenset({"AdaptiveAvgPool", "AdaptiveMaxPool", "ReduceSum", "ReduceMean", "ReduceMax",
                          "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2"})
_NOT_MODELLED = frozenset({"DFT", "IDFT", "RDFT", "IRDFT", "STFT", "ISTFT"})
_SUBGRAPH = frozenset({"TensorIterator", "Loop", "If"})


def _numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


def _flag(layer: Layer, name: str) -> bool:
    return layer.data.get(name, "false").strip().lower() in ("true", "1")


def _ints(text: str | None) -> list[int] | None:
    try:
        return [int(t) for t in text.split(",")] if text else None
    except ValueError:
        return None


def _get(shapes: Sequence, index: int):
    return shapes[index] if index < len(shapes) else None


def _einsum_macs(equation: str, shapes: Sequence) -> int | None:
    from .ops.matrix import ELLIPSIS, parse_einsum
    inputs, output = parse_einsum(equation)
    if len(inputs) != len(shapes) or any(s is None for s in shapes):
        return None
    sizes: dict[str, int] = {}
    operands: list[set[str]] = []
    for labels, shape in zip(inputs, shapes):
        letters = [l for l in labels if l != ELLIPSIS]
        span = len(shape) - len(letters)
        if span < 0 or (span and ELLIPSIS not in labels):
            return None
        named: list[str] = []
        for label in labels:
            # "..." dims are named by their position from the right, so that they broadcast
            named += [f"...{span - k}" for k in range(span)] if label == ELLIPSIS else [label]
        for label, dim in zip(named, shape):
            sizes[label] = max(sizes.get(label, 1), dim)
        operands.append(set(named))
    wanted = {l for l in output if l != ELLIPSIS} | {l for l in sizes if l.startswith("...") and ELLIPSIS in output}
    if len(operands) == 1:
        # a transpose or diagonal moves values; a sum over a label accumulates every element
        return _numel(sizes[l] for l in operands[0]) if operands[0] - wanted else 0
    total, current = 0, operands[0]
    for k in range(1, len(operands)):
        touched = current | operands[k]
        total += _numel(sizes[l] for l in touched)
        later = wanted.union(*operands[k + 1:])
        current = touched & later
    return total


def macs(layer: Layer, input_shapes: Sequence, output_shapes: Sequence) -> int | None:
    """Multiply-accumulates of one run of `layer` on inputs and outputs of these shapes.

    Shapes are tuples of ints; one that is not statically known may be None.  Returns None
    when the count is unknown, 0 for a layer without arithmetic (see the module's convention).
    Sub-graph ops need their bodies: see `layer_macs`.
    """
    op = layer.op_type
    if op is None or op in _NOT_MODELLED or op in _SUBGRAPH:
        return None
    out = _get(output_shapes, 0)
    if op in ("Convolution", "BinaryConvolution", "DeformableConvolution"):
        w = _get(input_shapes, 2 if op == "DeformableConvolution" else 1)
        return None if out is None or w is None else _numel(out) * _numel(w[1:])
    if op == "GroupConvolution":
        w = _get(input_shapes, 1)
        return None if out is None or w is None else _numel(out) * _numel(w[2:])
    if op in ("ConvolutionBackpropData", "GroupConvolutionBackpropData"):
        x, w = _get(input_shapes, 0), _get(input_shapes, 1)
        skip = 1 if op == "ConvolutionBackpropData" else 2
        return None if x is None or w is None else _numel(x) * _numel(w[skip:])
    if op == "MatMul":
        a = _get(input_shapes, 0)
        if out is None or a is None or not a:
            return None
        k = a[0] if len(a) == 1 else a[-2] if _flag(layer, "transpose_a") else a[-1]
        return _numel(out) * k
    if op == "GroupedMatMul":
        # [tokens, K] x [G, N, K] (each token row through its group's weights) or [G, M, K] x [G, N, K]
        a = _get(input_shapes, 0)
        return None if out is None or a is None or not a else _numel(out) * a[-1]
    if op == "Einsum":
        try:
            return _einsum_macs(layer.data.get("equation", ""), input_shapes)
        except Exception:  # noqa: BLE001 - a malformed equation is reported by validation, not here
            return None
    if op == "ScaledDotProductAttention":
        q, k, v = (_get(input_shapes, i) for i in range(3))
        if out is None or q is None or k is None or v is None or len(k) < 2:
            return None
        return _numel(out[:-1]) * k[-2] * (q[-1] + v[-1])
    if op in _RECURRENT:
        x = _get(input_shapes, 0)
        w, r = (_get(input_shapes, i) for i in _RECURRENT[op])
        if x is None or w is None or r is None or len(x) < 2:
            return None
        steps = x[0] * x[1] if op.endswith("Sequence") else x[0]
        return steps * (_numel(w) + _numel(r))
    if op in _ELEMENTWISE or op in _NORMALIZE:
        return None if out is None else _numel(out) * (2 if op in _NORMALIZE else 1)
    if op in _WINDOW_POOLS:
        kernel = _ints(layer.data.get("kernel"))
        return None if out is None or kernel is None else _numel(out) * _numel(kernel)
    if op in _WHOLE_INPUT:
        x = _get(input_shapes, 0)
        return None if x is None else _numel(x)
    return 0


# ---------------------------------------------------------------- from an analysis

_folded_cache: dict[int, tuple[weakref.ref, set[str]]] = {}


def _folded_layers(analysis: Analysis) -> set[str]:
    """Layers whose inputs all come from Constants (through other such layers): computed once at load."""
    key = id(analysis)
    found = _folded_cache.get(key)
    if found is not None and found[0]() is analysis:
        return found[1]
    folded: set[str] = set()
    nodes = analysis.nodes
    for lid in analysis.order:
        node = nodes[lid]
        layer = node.layer
        if layer.op_type == "Constant":
            folded.add(lid)
        elif node.inputs and layer.op_type not in ("ReadValue", "Parameter") and not layer.bodies \
                and all(src is not None and src[0] in folded for src in node.inputs):
            folded.add(lid)
    _folded_cache[key] = (weakref.ref(analysis, lambda _: _folded_cache.pop(key, None)), folded)
    return folded


def _static(t) -> tuple[int, ...] | None:
    if t is None or t.shape is None or not all(isinstance(d, int) for d in t.shape):
        return None
    return tuple(t.shape)


def _resolve(analysis: Analysis, layer_id: str) -> tuple[Analysis, str] | None:
    """A top-level id, or a body layer's scoped id ("7/3", "7/then/3") -> its analysis and own id."""
    if layer_id in analysis.nodes:
        return analysis, layer_id
    head, sep, rest = layer_id.partition("/")
    outer = analysis.nodes.get(head)
    if not sep or outer is None:
        return None
    tag = "body"
    branch, sep, tail = rest.partition("/")
    if branch in ("then", "else") and sep:
        tag, rest = f"{branch}_body", tail
    body = outer.bodies.get(tag)
    return None if body is None else _resolve(body, rest)


def body_macs(body: Analysis) -> int | None:
    """One run of a sub-graph body (or a whole model): the sum over its live layers; None if one is unknown."""
    total = 0
    for lid in body.order:
        if lid not in body.live:
            continue
        n = layer_macs(body, lid)
        if n is None:
            return None
        total += n
    return total


def _subgraph_macs(analysis: Analysis, node) -> int | None:
    op, layer = node.op, node.layer
    in_types = [analysis.type_of(src) if src is not None else None for src in node.inputs]
    if op is None:
        return None
    try:
        if layer.op_type == "TensorIterator":
            runs = op.iterations([t.shape if t is not None else None for t in in_types])
            tag = "body"
        elif layer.op_type == "Loop":
            trip = in_types[0].value if in_types and in_types[0] is not None else None
            runs = int(trip.reshape(-1)[0]) if trip is not None and trip.size == 1 else None
            runs = runs if runs is not None and runs >= 0 else None
            tag = "body"
        else:   # If
            cond = in_types[0].value if in_types and in_types[0] is not None else None
            runs = 1 if cond is not None and cond.size == 1 else None
            tag = "then_body" if runs and bool(cond.reshape(-1)[0]) else "else_body"
    except Exception:  # noqa: BLE001 - a body the analysis could not follow is reported by validation
        return None
    body = node.bodies.get(tag)
    if runs is None or body is None:
        return None
    one = body_macs(body)
    return None if one is None else one * runs


def layer_macs(analysis: Analysis, layer_id: str) -> int | None:
    """MACs of one layer at the shapes the analysis inferred (see `macs`); scoped ids reach into bodies."""
    found = _resolve(analysis, layer_id)
    if found is None:
        raise KeyError(f"no layer {layer_id!r}")
    analysis, lid = found
    node = analysis.nodes[lid]
    if lid in _folded_layers(analysis):
        return 0
    if node.layer.op_type in _SUBGRAPH:
        return _subgraph_macs(analysis, node)
    inputs = [_static(analysis.type_of(src)) if src is not None else None for src in node.inputs]
    outputs = [_static(t) for t in node.types]
    return macs(node.layer, inputs, outputs)


def model_macs(analysis: Analysis) -> dict[str, int | None]:
    """Every live top-level layer's MACs, by id, in topological order."""
    return {lid: layer_macs(analysis, lid) for lid in analysis.order if lid in analysis.live}
