"""Floating-point precision: compute like OpenVINO's CPU plugin at f32 inference precision, or as declared.

`precision="f32"` (the default) follows what the CPU plugin does with
`INFERENCE_PRECISION_HINT=f32` (specs/errata/precision.md has the sources and
the experiments):

* f16 and bf16 arithmetic is carried in f32 (the plugin's ConvertPrecision maps
  f16 -> f32): every f16/bf16 type in the graph becomes f32, and so do attributes
  that name one (Parameter element_type, Convert destination_type, Range and
  RandomUniform output_type ...).  A Convert to f16 between computed values
  therefore rounds nothing, and an f16 value past 65504 does not become inf.
* The model's inputs and outputs keep their types: an f16 input is widened on the
  way in, an f16 (bf16) output is rounded once on the way out.  (IR v10 turns f16
  inputs into f32 ones: see `ir.v10_interface_type`.)
* Constant subgraphs are folded the way OpenVINO's ConstantFolding folds them: in
  f32, except that an explicit Convert to f16/bf16 rounds, and a folded f16 result
  that a computed layer reads is rounded to f16 once (OpenVINO converts it back to
  its declared type at that edge).  Weight-decompression subgraphs
  (irrun/compression.py: `Const u8/i4/nf4/f8 -> Convert -> Subtract -> Multiply`)
  are not folded by OpenVINO but computed in f32, so nothing in or after them is
  rounded; irrun folds them once at load, in f32, which gives the same numbers.

`precision="declared"` computes every tensor in the type the IR declares (f16
results rounded after each op), as OpenVINO's reference evaluation and f16
devices do.

`prepare(analysis, precision)` gives the `Execution`: the analysis the plan runs
(for f32, a copy of the model's retyped and re-inferred) and the hooks the
model and the plan call.  The validated analysis itself is left as it is.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from . import etypes
from .analysis import Analysis, Node, infer_types
from .compression import DEQUANTIZED_STORAGE, consumers_of, find_weight_compression
from .diagnostics import Diagnostics
from .errors import IrrunWarning, UsageError
from .etypes import ElementType
from .registry import TensorType
from .ops.common import convert_array

PRECISIONS = ("f32", "declared")
_NARROW = frozenset({"f16", "bf16"})
# Ops OpenVINO's ConstantFolding evaluates in the declared type (constant_fold_utils.cpp, is_node_whitelisted):
# a constant Convert to f16 rounds, where every other op is folded in f32.
_NATIVE_CONVERTS = frozenset({"Convert", "ConvertLike", "ConvertPromoteTypes"})
# Ops whose outputs hold only values of their inputs: an f16-exact input gives an f16-exact output.
_VALUE_PRESERVING = frozenset({
    "Reshape", "Squeeze", "Unsqueeze", "Transpose", "Concat", "Split", "VariadicSplit", "Slice", "StridedSlice",
    "Gather", "GatherElements", "GatherND", "Broadcast", "Tile", "Identity", "Result", "DepthToSpace",
    "SpaceToDepth", "ShuffleChannels", "Reverse", "ReverseSequence", "Roll"})


class PrecisionFallbackWarning(IrrunWarning):
    """The model could not be retyped to f32; it runs in its declared precision."""


def check_precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise UsageError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    return precision


@dataclass
class Execution:
    """What the plan runs, and how values cross into and out of it."""

    precision: str
    analysis: Analysis
    #: the plan's `read_constant` hook (None: constants are read as folded)
    read_constant: Callable[[Node, int, np.ndarray], np.ndarray] | None = None
    _parameter_types: dict[str, ElementType] = field(default_factory=dict)

    def feed(self, parameter_id: str, value: np.ndarray) -> np.ndarray:
        """An input as the plan wants it (an f16 input widened to f32, a v10 f32 input rounded to f16 ...)."""
        etype = self._parameter_types.get(parameter_id)
        if etype is None or etype.carrier is None or value.dtype == etype.carrier:
            return value
        return convert_array(value, etype)

    @staticmethod
    def output(value: np.ndarray, reported: ElementType) -> np.ndarray:
        """An output in the type the model reports: an f16 or bf16 output computed in f32 rounded once,
        an IR v10 output converted as OpenVINO converts it (f16 to f32, i64 to i32 ...)."""
        if reported.name == "bf16":
            return etypes.round_to_bf16(value)
        if reported.carrier is None or value.dtype == reported.carrier or value.dtype == object:
            return value
        return convert_array(value, reported)


def prepare(analysis: Analysis, precision: str, retyping: Callable[[], object] | None = None) -> Execution:
    """The execution of a validated analysis in `precision` ("f32" or "declared").  `retyping()` is
    called when an f32 analysis is to be made, before it is (irrun/model.py lets the declared
    analysis's folded values go there: the f32 one reads only its Constants)."""
    check_precision(precision)
    if precision == "declared" or not _needs_retyping(analysis):
        return _execution(precision, analysis, None)
    if retyping is not None:
        retyping()
    try:
        return _f32_execution(analysis)
    except _CannotRetype as exc:
        warnings.warn(PrecisionFallbackWarning(f"{analysis.document.diagnostics.file}: cannot compute in f32 "
                                               f"({exc}); running in the declared precision"), stacklevel=3)
        return _execution("declared", analysis, None)


def _execution(precision: str, analysis: Analysis, read_constant) -> Execution:
    types = {}
    for layer in analysis.document.graph.layers_of_type("Parameter"):
        node = analysis.nodes[layer.id]
        if node.types and node.types[0] is not None:
            types[layer.id] = node.types[0].etype
    return Execution(precision, analysis, read_constant, types)


class _CannotRetype(Exception):
    pass


# ---------------------------------------------------------------- which layers are constant

def _narrow(etype: ElementType | None) -> bool:
    return etype is not None and etype.name in _NARROW


def _needs_retyping(analysis: Analysis) -> bool:
    """Whether any f16/bf16 value is computed with: a model whose only narrow floats are Consts that
    Converts widen (`compress_to_fp16`'s weights) computes the same in both precisions."""
    consumers = None
    for lid, node in analysis.nodes.items():
        if any(_narrow(t.etype) for t in node.types if t is not None):
            if node.layer.op_type != "Constant":
                return True
            consumers = consumers_of(analysis) if consumers is None else consumers
            for user, _ in consumers.get(lid, ()):
                used = analysis.nodes[user]
                if used.layer.op_type != "Convert" or any(_narrow(t.etype) for t in used.types if t is not None):
                    return True
        if node.op is not None and node.layer.op_type != "Constant" and \
                any(isinstance(v, ElementType) and _narrow(v) for _, v in node.op.attrs.items()):
            return True
        if any(_needs_retyping(body) for body in node.bodies.values()):
            return True
    return False


def constant_layers(analysis: Analysis) -> set[str]:
    """Layers the plan folds at load (executor.Plan's rule): Constants, layers whose values inference
    already knows, and foldable layers whose inputs are all constant."""
    found: set[str] = set()
    for lid in analysis.order:
        node = analysis.nodes[lid]
        if node.op is None or node.layer.op_type in ("Parameter", "Result"):
            continue
        types = node.types
        if node.layer.op_type == "Constant" or (types and all(t is not None and t.value is not None for t in types)):
            found.add(lid)
        elif node.inputs and node.op.foldable and all(src is not None and src[0] in found for src in node.inputs):
            found.add(lid)
    return found


# Ops whose dequantized weights the CPU plugin computes at run time (FullyConnected and convolution with
# compressed weights, GatherCompressed), found by experiment (specs/errata/precision.md); a dequantization
# feeding anything else (GroupConvolution, Add ...) is folded like any constant subgraph.
_DEQUANTIZING_CONSUMERS = frozenset({"MatMul", "Convolution"})
_GATHER_STORAGE = frozenset({"u8", "i8", "u4", "i4"})


def _kept_in_f32(weight) -> bool:
    """Whether OpenVINO keeps this decompression subgraph unfolded and computes it in f32."""
    if weight.storage not in DEQUANTIZED_STORAGE or not weight.consumers:
        return False
    return all(c.type in _DEQUANTIZING_CONSUMERS or (c.type == "Gather" and weight.storage in _GATHER_STORAGE)
               for c in weight.consumers)


def _dequantization_layers(analysis: Analysis, constant: set[str], consumers: dict) -> set[str]:
    """Layers OpenVINO computes at run time in f32 although their inputs are constant: the
    decompression subgraphs it keeps for its compressed-weight kernels (from the weight's Convert
    on: MarkDequantization disables its folding), and every layer that depends on them."""
    found: set[str] = set()
    todo = [w.layers[0] for w in find_weight_compression(analysis) if _kept_in_f32(w)]
    while todo:
        lid = todo.pop()
        if lid in found or lid not in constant:
            continue
        found.add(lid)
        todo.extend(c for c, _ in consumers.get(lid, ()))
    return found


def _exact_layers(analysis: Analysis, folded: set[str]) -> set[str]:
    """Folded layers whose declared-f16 outputs hold f16 values already (rounding them is a no-op)."""
    exact: set[str] = set()
    for lid in analysis.order:
        if lid not in folded:
            continue
        node = analysis.nodes[lid]
        op_type = node.layer.op_type
        if op_type == "Constant" or op_type in _NATIVE_CONVERTS:
            exact.add(lid)
        elif op_type in _VALUE_PRESERVING and all(
                src is None or src[0] in exact or not _narrow(_declared_etype(analysis, src))
                for src in node.inputs):
            exact.add(lid)
    return exact


def _declared_etype(analysis: Analysis, src: tuple[str, int]) -> ElementType | None:
    t = analysis.type_of(src)
    return t.etype if t is not None else None


def _boundaries(analysis: Analysis, constant: set[str], runtime_f32: set[str]) -> dict[tuple[str, int], ElementType]:
    """(consumer id, input index) -> the f16/bf16 type a folded value is rounded to on that edge."""
    folded = constant - runtime_f32
    exact = _exact_layers(analysis, folded)
    edges = {}
    for lid, node in analysis.nodes.items():
        if lid in folded:
            continue
        for i, src in enumerate(node.inputs):
            if src is None or src[0] not in folded or src[0] in exact:
                continue
            etype = _declared_etype(analysis, src)
            if _narrow(etype):
                edges[(lid, i)] = etype
    return edges


# ---------------------------------------------------------------- retyping

def _f32_attributes(node: Node) -> dict:
    """Every etype attribute naming f16/bf16, as f32 (a Constant keeps its storage type)."""
    if node.layer.op_type == "Constant":
        return {}
    return {name: etypes.f32 for name, value in node.op.attrs.items()
            if isinstance(value, ElementType) and _narrow(value)}


def _read_once(infer, node: Node):
    """A Constant's `infer` answering with the value the declared analysis read, where it holds
    one: int4 data is unpacked to a byte per value once, not once per analysis."""
    known = node.types[0] if node.types and len(node.types) == 1 and node.types[0] is not None else None
    if known is None or known.value is None:
        return infer

    def reused(inputs):
        if known.value is None:     # (let go since: irrun/model.py's _KnownValues)
            return infer(inputs)
        return [TensorType(known.shape, known.etype, known.value, known.notes)]
    return reused


def _widening(infer, release):
    """A Constant's `infer` giving f32 where the IR stores f16/bf16."""
    def widened(inputs):
        out = []
        for t in infer(inputs):
            if _narrow(t.etype):
                value = None
                if t.value is not None:
                    value = convert_array(t.value, etypes.f32)
                    if release is not None:
                        release(t.value)       # (the mapped f16 pages: read again only if asked for)
                t = TensorType(t.shape, etypes.f32, value, t.notes)
            out.append(t)
        return out
    return widened


def _rounding(run, etype: ElementType):
    """A constant Convert's `run` rounding to `etype` (f16/bf16) and answering in f32, as OpenVINO's
    ConstantFolding evaluates a Convert to f16 natively."""
    def rounded(*args):
        return etypes.rounded_to(run(*args), etype)
    return rounded


def _retyped_node(node: Node, constant: set[str], runtime_f32: set[str]) -> Node:
    op = node.op
    if op is None:
        return Node(node.layer, None, node.inputs, [], node.malformed, node.declared_only, node.bodies,
                    node.signature)
    changes = _f32_attributes(node)
    attrs = op.attrs.replaced(changes) if changes else op.attrs
    new = type(op)(op.spec, attrs)
    new.context = op.context
    new.layer = op.layer
    op_type = node.layer.op_type
    if op_type == "Constant":
        weights = op.context.weights if op.context is not None else None
        new.infer = _widening(_read_once(new.infer, node), weights.release if weights is not None else None)
    elif op_type in _NATIVE_CONVERTS and node.id in constant and node.id not in runtime_f32:
        declared = [t.etype for t in node.types if t is not None]
        if declared and _narrow(declared[0]):
            new.run = _rounding(new.run, declared[0])
    if hasattr(new, "on_bind"):
        new.on_bind()
        if getattr(new, "variable_id", None) is not None:
            op.context.variables[new.variable_id] = new   # the variable is the retyped reader's now
    bodies = {}
    for tag, body in node.bodies.items():
        bodies[tag] = _retyped_body(body)
    if bodies:
        new.bodies = bodies
    signature = None if changes else node.signature
    return Node(node.layer, new, node.inputs, [], node.malformed, False, bodies or node.bodies, signature)


def _retyped_nodes(analysis: Analysis, constant: set[str], runtime_f32: set[str]) -> dict[str, Node]:
    return {lid: _retyped_node(node, constant, runtime_f32) for lid, node in analysis.nodes.items()}


def _retyped_body(body: Analysis) -> Analysis:
    constant = constant_layers(body)
    nodes = _retyped_nodes(body, constant, set())
    return Analysis(body.document, nodes, body.order, body.live, body.diagnostics, body.context)


def _f32_execution(analysis: Analysis) -> Execution:
    constant = constant_layers(analysis)
    runtime_f32 = _dequantization_layers(analysis, constant, consumers_of(analysis))
    variables = dict(analysis.context.variables) if analysis.context is not None else {}
    nodes = _retyped_nodes(analysis, constant, runtime_f32)
    scratch = Diagnostics(analysis.diagnostics.file)
    retyped = Analysis(analysis.document, nodes, analysis.order, analysis.live, scratch, analysis.context)
    _rebody(retyped, scratch)
    infer_types(analysis.document, nodes, analysis.order, scratch, check_declared=False)
    known = {(d.code, d.layer) for d in analysis.diagnostics.errors}
    new = [d for d in scratch.errors if (d.code, d.layer) not in known]
    if new:
        if analysis.context is not None:
            analysis.context.variables.clear()
            analysis.context.variables.update(variables)
        first = new[0]
        where = f"{first.layer.describe()}: " if first.layer else ""
        raise _CannotRetype(f"{where}{first.message}")
    boundaries = _boundaries(analysis, constant, runtime_f32)

    def read_constant(node: Node, i: int, value: np.ndarray) -> np.ndarray:
        etype = boundaries.get((node.id, i))
        return value if etype is None else etypes.rounded_to(value, etype)

    return _execution("f32", retyped, read_constant if boundaries else None)


def _rebody(analysis: Analysis, diags: Diagnostics) -> None:
    """Retyped bodies report into the scratch diagnostics (recursively)."""
    for node in analysis.nodes.values():
        for body in node.bodies.values():
            body.diagnostics = diags
            _rebody(body, diags)
