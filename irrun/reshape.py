"""`Model.reshape` / `irrun infer --shape`: new input shapes, every shape inferred again.

As OpenVINO's `Model.reshape`: each named input's Parameter gets the new shape (a dim of
-1 or "?" is dynamic, "1..8" an interval), then shape inference runs over the whole graph
again, sub-graph bodies included.  The dims the XML declares for the other ports describe
the shapes the model was saved with, so they are no longer compared.  A shape the model
cannot take (a Reshape whose constant target no longer holds, a batch that two inputs of
an LSTM disagree on) is a `ModelError` naming the layer where inference fails.
"""
from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Mapping

from .analysis import Analysis, LoadContext, analyze
from .diagnostics import Diagnostics
from .editing import parameter_shape_text
from .errors import IrrunError, ModelError, UsageError
from .ir import IRDocument, IRGraph
from .shapes import ANY, Dim, Shape, format_shape, parse_partial_shape

_OPTION = re.compile(r"^\s*(?:(?P<name>[^=\[]+?)\s*=\s*)?(?P<shape>\[.*\]|[-\d?.,\s]*)\s*$")


def parse_shape_option(text: str) -> tuple[str | None, Shape]:
    """`--shape x=[2,3,320,320]` -> ("x", shape); `--shape [1,3,-1,-1]` -> (None, shape)."""
    m = _OPTION.match(text)
    if not m or not m.group("shape").strip():
        raise UsageError(f"--shape {text!r}: expected NAME=[d0,d1,...] (a dim may be -1 or ? for dynamic, or "
                         f"lo..hi), or [d0,d1,...] for a model with one input")
    return m.group("name"), as_shape(m.group("shape"), text)


def shape_options(model, options: tuple[str, ...]) -> dict:
    """`--shape` values -> `Model.reshape`'s mapping (an unnamed shape: the model's only input)."""
    shapes: dict = {}
    for text in options:
        name, shape = parse_shape_option(text)
        if name is None:
            if len(model.inputs) != 1:
                raise UsageError(f"--shape {text!r} names no input, but the model has {len(model.inputs)} "
                                 f"({', '.join(i.name for i in model.inputs)}); write NAME=[...]")
            name = model.inputs[0].name
        if name in shapes:
            raise UsageError(f"--shape gives input {name!r} twice")
        shapes[name] = shape
    return shapes


def as_shape(value: Any, what: str) -> Shape:
    """A shape given as text ("[2,3,?,?]", "1..8,3") or a sequence (ints, -1 dynamic, `Dim`s)."""
    if isinstance(value, str):
        try:
            shape = parse_partial_shape(value)
        except IrrunError as exc:
            raise UsageError(f"shape {what!r}: {exc.message}") from None
        if shape is None:
            raise UsageError(f"shape {what!r}: a dynamic rank cannot be run; give every dim")
        return shape
    try:
        dims = list(value)
    except TypeError:
        raise UsageError(f"shape for {what!r} must be a list of dims, got {type(value).__name__}") from None
    shape = []
    for d in dims:
        if isinstance(d, Dim):
            shape.append(d)
        elif isinstance(d, int) and not isinstance(d, bool) and d >= -1:
            shape.append(ANY if d == -1 else int(d))
        elif hasattr(d, "__index__") and int(d) >= -1:
            shape.append(ANY if int(d) == -1 else int(d))
        else:
            raise UsageError(f"shape for {what!r}: {d!r} is not a dim (an integer >= 0, or -1 for dynamic)")
    return tuple(shape)


def reshaped_analysis(model, shapes: Mapping[Any, Any]) -> tuple[IRDocument, Analysis]:
    """The document with the Parameters of `shapes` (by input name, Parameter name or index) reshaped,
    and its analysis.  Raises UsageError for unknown inputs or bad shapes, ModelError where the model
    cannot take the shapes."""
    if not isinstance(shapes, Mapping) or not shapes:
        raise UsageError("reshape takes a mapping of input name -> shape, e.g. {'x': [2, 3, 320, 320]}")
    document = model.document
    layers = dict(document.graph.layers)
    given = []
    for key, value in shapes.items():
        index = model._input_lookup.get(key) if isinstance(key, str) else \
            key if isinstance(key, int) and 0 <= key < len(model.inputs) else None
        if index is None:
            known = ", ".join(repr(i.name) for i in model.inputs)
            raise UsageError(f"reshape: unknown input {key!r}; the model's inputs are {known}")
        info, parameter = model.inputs[index], model._parameters[index]
        shape = as_shape(value, info.name)
        given.append(f"{info.name}={format_shape(shape)}")
        port = parameter.outputs[0]
        dims = tuple(d if isinstance(d, int) else -1 for d in shape)
        layers[parameter.id] = replace(parameter, data={**parameter.data, "shape": parameter_shape_text(shape)},
                                       outputs=[replace(port, dims=dims)] + list(parameter.outputs[1:]))
    graph = document.graph
    new_graph = IRGraph(layers, graph.edges, graph.sources, graph.producers, graph.rt_info)
    diagnostics = Diagnostics(document.diagnostics.file)
    new_document = IRDocument(document.path, document.version, document.name, new_graph, document.rt_info,
                              document.snippet, diagnostics)
    analysis = analyze(new_document, LoadContext(str(document.path), model.weights), check_declared=False)
    errors = analysis.diagnostics.errors
    if errors:
        first = errors[0]
        raise ModelError(f"the model cannot take {', '.join(given)}: {first.message}", file=first.file,
                         line=first.line, layer=first.layer, code=first.code)
    return new_document, analysis
