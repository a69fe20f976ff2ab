"""Watching a run: what every observer of a layer's outputs shares.

The executor (`Plan.run(feeds, watchers)`) hands each watcher a `Produced` for
every layer it selects, the moment the layer's step ends: before a later step
may overwrite a buffer in place and before the step's frees drop it.  Layers
that are not run in the call (Parameters, and layers folded into constants at
load) are reported at their place in the order from their values.  Profiling,
traces, intermediates, dumps, comparisons and `Model.add_outputs` are all
watchers; with none attached the executor runs its fast loop untouched.

Tensor keys.  A layer output is named `"<layer name>:<output index>"` (the index
is the output's position among the layer's outputs, as OpenVINO's
`node.output(i)`).  Inside a sub-graph body the key is prefixed by the path of
the layers that own it and suffixed with the iteration: a Loop or
TensorIterator body gives `loop/layer:0@iter3`, an If body `if/then/layer:0` or
`if/else/layer:0`, and nested bodies compose (`outer/inner/layer:0@iter2@iter5`,
iterations outermost first).  Where two layers share a name, each of them is keyed by
`"<name>#<layer id>"` instead (`key_names`).  `tensor_key` is the only place that spells keys.
"""
from __future__ import annotations

from collections import Counter
from contextvars import ContextVar
from dataclasses import dataclass, field

import numpy as np

BODY_TAGS = {"body": "", "then_body": "then/", "else_body": "else/"}

#: While a watched step of a sub-graph op runs: (that op, its watchers, the scope).  A context
#: variable, so that threads sharing a model each see only their own call's watchers.
BODY_WATCH: ContextVar[tuple | None] = ContextVar("irrun_body_watch", default=None)


@dataclass(frozen=True)
class Scope:
    """Where a body layer runs: the path of owning layers and the iteration numbers."""

    prefix: str = ""                    # "loop/", "if/then/", "outer/inner/"
    iterations: tuple[int, ...] = ()    # one per enclosing Loop / TensorIterator, outermost first

    def enter(self, owner_name: str, tag: str, iteration: int | None) -> Scope:
        iterations = self.iterations if iteration is None else self.iterations + (iteration,)
        return Scope(f"{self.prefix}{owner_name}/{BODY_TAGS.get(tag, tag + '/')}", iterations)


TOP = Scope()


def tensor_key(layer_name: str, port: int, scope: Scope = TOP) -> str:
    """The key of output `port` of the layer `layer_name` (see the module docstring)."""
    key = f"{scope.prefix}{layer_name}:{port}"
    return key + "".join(f"@iter{i}" for i in scope.iterations) if scope.iterations else key


def key_names(layers) -> dict[str, str]:
    """Layer id -> the name its keys use: its own, or "name#id" where two layers share it."""
    layers = list(layers)
    counts = Counter(l.name for l in layers)
    return {l.id: l.name if counts[l.name] == 1 else f"{l.name}#{l.id}" for l in layers}


def split_key(key: str) -> tuple[str, int | None]:
    """`"name:1"` -> ("name", 1); a bare layer name -> (name, None).  Top-level keys only."""
    name, sep, port = key.rpartition(":")
    if sep and port.isdigit():
        return name, int(port)
    return key, None


@dataclass(slots=True)
class Produced:
    """One layer's outputs as a watcher sees them."""

    node: object                # analysis.Node: .layer (id, name, type, line ...), .types, .inputs
    values: tuple               # the outputs in port order (None where a port is absent)
    scope: Scope
    start: float = 0.0          # perf_counter() at the step's start (timed watchers only)
    seconds: float = 0.0        # the kernel's time (timed watchers only; 0 for what was not run)
    folded: bool = False        # a Parameter, a Constant or a layer folded at load: not run in this call
    volatile: tuple = ()        # per output: a later step may overwrite its buffer in place
    inputs: tuple = ()          # the step's input arrays, for their shapes and dtypes (an input the
                                # step overwrote in place no longer holds its values)
    name: str = ""              # the name the layer's keys use (see `key_names`)
    report: object = None       # (node, port, value) -> the value in the type the model reports, or None
    fused: tuple = ()           # a layer that ran fused with others (irrun/optimize.py): their names (its
                                # `seconds` cover them all)
    fused_into: str = ""        # a layer run inside another's fused step: that layer's name (`seconds` 0;
                                # an output the step never makes is a stand-in with only .shape and .dtype)

    def key(self, port: int) -> str:
        return tensor_key(self.name or self.node.layer.name, port, self.scope)

    def value(self, port: int) -> np.ndarray:
        """Output `port` in the type the model declares for it, as OpenVINO returns a tensor added as
        an output (an f16 tensor computed in f32 rounded back to f16: irrun/precision.py)."""
        value = self.values[port]
        return value if self.report is None or value is None else self.report(self.node, port, value)

    def keep(self, port: int) -> np.ndarray:
        """`value(port)` as an array that stays valid after the run (copied only where a later step
        may overwrite its buffer)."""
        value = self.value(port)
        return value.copy() if self.volatile and self.volatile[port] and value is self.values[port] else value


class Watcher:
    """Base of the observers `Plan.run` calls.  Subclasses override `produced` and, to see
    inside sub-graph bodies, `enter`."""

    #: layer ids to watch (None: every layer)
    layers: frozenset[str] | None = None
    #: also Constant layers (they are left out by default)
    constants: bool = False
    #: also Parameters and layers folded at load (not run in this call)
    sources: bool = True
    #: wants each step's start time and duration
    timed: bool = False
    #: reads the values (not only shapes and times): outputs a bound kernel skips are then made
    wants_values: bool = True

    def produced(self, event: Produced) -> None:
        raise NotImplementedError

    def enter(self, layer, tag: str, iteration: int | None, scope: Scope) -> "Watcher | None":
        """A watcher for one run of a body of `layer` (`tag`: "body", "then_body", "else_body";
        `iteration` for Loop and TensorIterator; `scope`: where the body's keys live), or None to
        leave the body unwatched."""
        return None

    def selection(self) -> tuple:
        return (self.layers, self.constants, self.sources)


@dataclass(eq=False)
class Collect(Watcher):
    """Keeps layer outputs by key: `Model.infer(intermediates=...)` and `Model.add_outputs`."""

    layers: frozenset[str] | None = None
    constants: bool = False
    bodies: bool = False
    #: (layer id, port) -> key, to keep only those outputs (None: every output of the selected layers)
    ports: dict[tuple[str, int], str] | None = None
    scope: Scope = TOP
    values: dict[str, np.ndarray] = field(default_factory=dict)

    def produced(self, event: Produced) -> None:
        lid = event.node.layer.id
        for port, value in enumerate(event.values):
            if value is None:
                continue
            if self.ports is None:
                self.values[event.key(port)] = event.keep(port)
            elif (lid, port) in self.ports:
                self.values[self.ports[lid, port]] = event.keep(port)

    def enter(self, layer, tag, iteration, scope):
        if not self.bodies:
            return None
        return Collect(None, self.constants, True, None, scope, self.values)


@dataclass(frozen=True, slots=True)
class StepTime:
    """One step of a timed run: what profiles and traces show."""

    node: object
    start: float
    seconds: float
    input_shapes: tuple         # tuples of ints (None where an input is no array)
    output_shapes: tuple
    dtypes: tuple               # of the outputs: NumPy dtypes (None where an output is no array)
    fused: tuple = ()           # see Produced.fused and Produced.fused_into
    fused_into: str = ""


@dataclass(eq=False)
class Timings(Watcher):
    """Every step run, in order, with its start, duration and shapes (no values are kept)."""

    sources: bool = False
    timed: bool = True
    wants_values: bool = False
    steps: list[StepTime] = field(default_factory=list)

    def produced(self, event: Produced) -> None:
        # (cheap on purpose: this runs after every step of a profiled run)
        self.steps.append(StepTime(event.node, event.start, event.seconds,
                                   tuple([getattr(a, "shape", None) for a in event.inputs]),
                                   tuple([getattr(v, "shape", None) for v in event.values]),
                                   tuple([getattr(v, "dtype", None) for v in event.values]),
                                   event.fused, event.fused_into))
