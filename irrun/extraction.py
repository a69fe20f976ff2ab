"""`irrun extract`: a standalone IR of the part of a model that computes some of its tensors.

A tensor is named as a layer name (every output of that layer), `layer:1` (output 1), or
a tensor name (a port's `names`); a Result names the tensor it takes.  The named output
tensors become Results of the new IR, named by their tensor key (`layer` for a layer's only
output, `layer:index` otherwise), then by the key dumps, compare and add_outputs use
(`layer:index`, always), and then by the names the model gives them.  The tensors
named as inputs are cut: each becomes a Parameter of the type shape inference gives it
(named the same way), and nothing above it is kept; a tensor given a value (`constants`) is
cut into a Constant of that value instead.  The new IR holds only the layers the outputs
need (with their original ids), and its `.bin` only the constants they use.
"""
from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from .analysis import Analysis, declared_type
from .editing import GraphBuilder, constant_layer, graph_of, parameter_layer, result_layer, without_rt_info
from .errors import ModelError, UsageError
from .ir import IRGraph, Layer
from .registry import TensorType
from .watch import tensor_key
from .writer import constants_from, write_ir


@dataclass(frozen=True)
class Tensor:
    """One output of one layer."""

    layer: Layer
    index: int

    @property
    def key(self) -> str:
        """`layer` for the only output of a layer, `layer:index` otherwise."""
        return self.layer.name if len(self.layer.outputs) == 1 else f"{self.layer.name}:{self.index}"

    @property
    def names(self) -> tuple[str, ...]:
        """The key first (what the tensor was asked for by, in the usual case), then the key dumps,
        compare and add_outputs use (`layer:0`), then the tensor's names."""
        return tuple(dict.fromkeys((self.key, tensor_key(self.layer.name, self.index),
                                    *self.layer.outputs[self.index].names)))


def resolve_tensors(graph: IRGraph, name: str, *, what: str) -> list[Tensor]:
    """The tensors `name` stands for: a layer's outputs (a Result: what it takes), `layer:index`, or
    a tensor name.  An unknown name is an error that suggests close matches."""
    by_name = {}
    for layer in graph.layers.values():
        by_name.setdefault(layer.name, layer)
    layer = by_name.get(name)
    if layer is not None:
        if layer.op_type == "Result":
            src = graph.sources.get((layer.id, 0))
            return [Tensor(graph.layers[src[0]], src[1])] if src else []
        return [Tensor(layer, i) for i in range(len(layer.outputs))]
    base, sep, index = name.rpartition(":")
    if sep and index.isdigit() and base in by_name:
        layer = by_name[base]
        if int(index) >= len(layer.outputs):
            raise UsageError(f'{what} "{name}": layer "{base}" has {len(layer.outputs)} output'
                             f'{"s" if len(layer.outputs) != 1 else ""} (0..{len(layer.outputs) - 1})')
        return [Tensor(layer, int(index))]
    for layer in graph.layers.values():
        for i, port in enumerate(layer.outputs):
            if name in port.names:
                return [Tensor(layer, i)]
    known = list(by_name) + [n for l in graph.layers.values() for p in l.outputs for n in p.names]
    close = difflib.get_close_matches(name, known, n=5, cutoff=0.6)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else \
        " (names are layer names, layer:index, or tensor names; `irrun info` lists the model's)"
    raise UsageError(f'{what} "{name}": no layer or tensor of that name{hint}')


def _type_of(analysis: Analysis, tensor: Tensor) -> TensorType:
    t = analysis.type_of((tensor.layer.id, tensor.index))
    return t if t is not None else declared_type(tensor.layer.outputs[tensor.index])


def _tensors(graph: IRGraph, names, what: str) -> list[Tensor]:
    """The tensors of `names` (names as `resolve_tensors` reads them, or `Tensor`s), each once."""
    found: list[Tensor] = []
    for name in names:
        found += [t for t in ([name] if isinstance(name, Tensor) else resolve_tensors(graph, name, what=what))
                  if t not in found]
    return found


def extract_graph(analysis: Analysis, outputs: list, inputs: list = (),
                  constants: Mapping | list[tuple] | None = None) -> tuple[IRGraph, dict[str, bytes]]:
    """The sub-graph computing `outputs` from `inputs` (and the model's own Parameters and constants),
    and the data of the Constants that `constants` (tensor -> its value, or (tensor, value) pairs) puts
    in place of tensors.
    Tensors are named as `resolve_tensors` reads names, or given as `Tensor`s."""
    graph = analysis.document.graph
    wanted = _tensors(graph, outputs, "output")
    if not wanted:
        raise UsageError("no outputs to extract")
    cuts = _tensors(graph, inputs, "input")
    fixed: dict[tuple[str, int], np.ndarray] = {}
    for name, value in (constants.items() if isinstance(constants, Mapping) else constants or ()):
        tensors = _tensors(graph, [name], "constant")
        if len(tensors) != 1:
            raise UsageError(f'constant "{name}": names {len(tensors)} tensors; name one (layer:index)')
        fixed[(tensors[0].layer.id, tensors[0].index)] = np.asarray(value)
        cuts += [t for t in tensors if t not in cuts]
    cut_at = {(t.layer.id, t.index): t for t in cuts}

    # Walk up from the outputs; a cut tensor stops the walk.
    needed: set[str] = set()
    used_cuts: set[tuple[str, int]] = set()
    stack = [t.layer.id for t in wanted if (t.layer.id, t.index) not in cut_at]
    used_cuts |= {(t.layer.id, t.index) for t in wanted if (t.layer.id, t.index) in cut_at}
    while stack:
        lid = stack.pop()
        if lid in needed:
            continue
        needed.add(lid)
        for src in graph.producers.get(lid, ()):
            if src is None:
                continue
            if src in cut_at:
                used_cuts.add(src)
            elif src[0] not in needed:
                stack.append(src[0])
    unused = [t.key for t in cuts if (t.layer.id, t.index) not in used_cuts]
    if unused:
        raise UsageError(f"input {', '.join(repr(k) for k in unused)}: the outputs do not depend on "
                         f"{'it' if len(unused) == 1 else 'them'}")

    b = GraphBuilder()
    taken_ids, taken_names = set(graph.layers), {graph.layers[lid].name for lid in needed}
    fed: dict[tuple[str, int], tuple[str, int]] = {}      # original tensor -> (new layer, output) that gives it
    for layer in graph.layers.values():                   # the model's own Parameters first, in their order
        if layer.id in needed and layer.op_type == "Parameter":
            b.add(layer)
            fed[(layer.id, 0)] = (layer.id, 0)
    data: dict[str, bytes] = {}
    for t in cuts:
        lid = b.free_id(taken_ids)
        name = b.free_name(t.key, taken_names)
        value = fixed.get((t.layer.id, t.index))
        if value is None:
            b.add(parameter_layer(lid, name, _type_of(analysis, t), t.names))
        else:
            etype = _type_of(analysis, t).etype
            b.add(constant_layer(lid, name, TensorType(tuple(value.shape), etype), t.names))
            data[lid] = etype.encode(value)
        fed[(t.layer.id, t.index)] = (lid, 0)
    for lid, layer in graph.layers.items():
        if lid in needed and layer.op_type != "Parameter":
            b.add(layer)
            for i in range(len(layer.outputs)):
                fed.setdefault((lid, i), (lid, i))
    for lid in list(b.layers):
        for i, src in enumerate(graph.producers.get(lid, ()) if lid in graph.layers else ()):
            if src is not None:
                b.connect(fed[src], (lid, i))
    for t in wanted:
        src = fed[(t.layer.id, t.index)]
        lid = b.free_id(taken_ids)
        result = b.add(result_layer(lid, b.free_name(f"{t.key}/result", taken_names), _type_of(analysis, t), t.names))
        given = b.layers[src[0]].outputs[src[1]]   # (the Result declares what its producer declares)
        result.inputs[0] = dataclasses.replace(result.inputs[0], dims=given.dims, precision=given.precision,
                                               etype=given.etype)
        b.connect(src, (lid, 0))
    return b.graph(), data


def extract(source, path: str | Path, *, outputs: list[str], inputs: list[str] = (),
            constants: Mapping | list[tuple] | None = None, force: bool = False) -> Path:
    """Write the sub-graph of `source` (a loaded `Model`, or the path of an IR) computing `outputs` from
    `inputs` as a standalone IR at `path` (.xml, and its .bin); returns the .xml path.  `constants`
    (name -> array, or (name, array) pairs) cuts those tensors too, each becoming a Constant of that value."""
    from .model import Model, _document_and_analysis
    if isinstance(source, Model):
        document, analysis, weights, close = source.document, source.analysis, source.weights, False
    else:
        document, analysis, weights = _document_and_analysis(source)
        close = True
    file = str(document.path)
    try:
        errors = analysis.diagnostics.errors
        if document.snippet:
            raise UsageError("is a single-layer snippet, not a model", file=file)
        if errors:
            first = errors[0]
            raise ModelError(f"{first.message} (the model has {len(errors)} error{'s' if len(errors) > 1 else ''}; "
                             f"`irrun validate` lists them)", file=first.file, line=first.line, layer=first.layer,
                             code=first.code)
        graph, data = extract_graph(analysis, list(outputs), list(inputs), constants)
        if document.version == 10:   # (rt_info the IR v10 reader ignores would be read in IR v11)
            graph = graph_of({lid: without_rt_info(l) for lid, l in graph.layers.items()}, graph.edges, graph.rt_info)
        stored = constants_from(weights, file)
        return write_ir(path, graph, name=document.name,
                        constant_bytes=lambda layer: data[layer.id] if layer.id in data else stored(layer),
                        protected=(document.path, document.path.with_suffix(".bin")), force=force)
    finally:
        if close and weights is not None:
            weights.close()
