"""TensorIterator-1, Loop-5 and If-8: ops that run sub-graph bodies (see `irrun.subgraph`).

Shape inference follows OpenVINO's: the body is inferred from the types the
op's inputs feed its Parameters (a sliced input feeds one part), and the
outputs are the body Results' types, with the iteration count multiplied in
along the axis of a concatenated output when it is known at load.
"""
from __future__ import annotations

import numpy as np

from .. import etypes
from ..analysis import Analysis
from ..errors import ModelError, ShapeError
from ..registry import Op, TensorType, register
from ..shapes import ANY, format_shape, make_dim, normalize_axis
from ..subgraph import (BodyInput, BodyOutput, BodyRunner, PortMap, Slicing, infer_body, result_sources,
                        zeros_of)
from ..watch import BODY_WATCH

INT64_MAX = (1 << 63) - 1
PORT_MAP_OF = {"body": "port_map", "then_body": "then_port_map", "else_body": "else_port_map"}


# ---------------------------------------------------------------- shape helpers

def _part_shape(shape, slicing: Slicing):
    """What one iteration of a sliced input looks like: part_size along the axis."""
    if shape is None:
        return None
    axis = normalize_axis(slicing.axis, len(shape), "slicing axis")
    return shape[:axis] + (slicing.part_size,) + shape[axis + 1:]


def _widen(param, result):
    """A loop-carried Parameter's shape relaxed to also hold what the body sends back (OpenVINO's rule)."""
    if param is None or result is None or len(param) != len(result):
        return None
    return tuple(p if p == r else ANY for p, r in zip(param, result))


def _dim_union(a, b):
    if a == b:
        return a
    (alo, ahi), (blo, bhi) = [(d, d) if isinstance(d, int) else (d.lo, d.hi) for d in (a, b)]
    return make_dim(min(alo, blo), None if ahi is None or bhi is None else max(ahi, bhi))


def _shape_union(a, b):
    """The smallest partial shape holding both (If: either branch may run)."""
    if a is None or b is None or len(a) != len(b):
        return None
    return tuple(_dim_union(x, y) for x, y in zip(a, b))


def _only_value(value: np.ndarray, what: str):
    """The one element of a scalar or one-element tensor (a trip count, a condition)."""
    flat = np.asarray(value).reshape(-1)
    if flat.size != 1:
        raise ShapeError(f"{what} must have exactly one element, got shape {list(np.shape(value))}")
    return flat[0]


def _check_scalar_input(t: TensorType, what: str, integral: bool) -> None:
    if t.rank is not None and t.rank > 1:
        raise ShapeError(f"{what} must be a scalar or a 1-element 1D tensor, got {format_shape(t.shape)}")
    ok = t.etype.is_integral if integral else t.etype is etypes.boolean
    if t.etype is not etypes.dynamic and not ok:
        raise ShapeError(f"{what} must be {'an integer' if integral else 'boolean'}, got {t.etype}")


def _slice_count(dim: int, slicing: Slicing) -> int:
    """Iterations a sliced input of `dim` along the axis gives (OpenVINO's shape inference:
    start and end both included, negative ones counted from the end)."""
    if slicing.part_size <= 0 or slicing.stride == 0:
        raise ShapeError(f"slicing needs part_size > 0 and a non-zero stride, got part_size={slicing.part_size}, "
                         f"stride={slicing.stride}")
    start = slicing.start + dim if slicing.start < 0 else slicing.start
    end = slicing.end + dim if slicing.end < 0 else slicing.end
    return (abs(end - start) + 1) // slicing.part_size


def _take_part(x: np.ndarray, slicing: Slicing, i: int) -> np.ndarray:
    """Iteration i's part of a sliced input: forward from `start`, or backward from it with a negative stride."""
    axis = normalize_axis(slicing.axis, x.ndim, "slicing axis")
    dim = x.shape[axis]
    start = slicing.start + dim if slicing.start < 0 else slicing.start
    begin = start + i * slicing.stride if slicing.stride > 0 else start - slicing.part_size + 1 + i * slicing.stride
    if begin < 0 or begin + slicing.part_size > dim:
        raise ModelError(f"iteration {i} would take [{begin}, {begin + slicing.part_size}) along axis {axis} of an "
                         f"input of shape {list(x.shape)}")
    index = [slice(None)] * x.ndim
    index[axis] = slice(begin, begin + slicing.part_size)
    return x[tuple(index)]


def _concatenate(parts: list[np.ndarray], axis: int, body_type: TensorType) -> np.ndarray:
    if not parts:   # no iteration ran: empty along the axis
        empty = zeros_of(body_type)
        shape = list(empty.shape) or [0]
        shape[normalize_axis(axis, len(shape))] = 0
        return np.zeros(shape, empty.dtype)
    if parts[0].ndim == 0:
        return np.stack(parts)
    return np.concatenate(parts, axis=normalize_axis(axis, parts[0].ndim))


# ---------------------------------------------------------------- the shared base

class SubgraphOp(Op):
    """An op whose computation is one or more body graphs (`self.bodies`, set by the analysis)."""

    foldable = False      # bodies run at call time; nothing of them is folded at load
    bodies: dict[str, Analysis]
    #: the enclosing plan's limit on one tensor's size (bytes), which the bodies' plans keep too
    memory_limit: int | None = None
    #: the enclosing plan's `optimize` (irrun/optimize.py), which the bodies' plans follow too
    optimize: bool = True
    def run_body(self, tag: str, feeds: dict, iteration: int | None = None) -> dict:
        """One run of a body, shown to the watchers that ask to see inside it (irrun/watch.py)."""
        watching = BODY_WATCH.get()
        if watching is None or watching[0] is not self:
            return self.runner(tag)(feeds)
        _, watchers, scope = watching
        inner = scope.enter(self.layer.name, tag, iteration)
        found = tuple(c for w in watchers if (c := w.enter(self.layer, tag, iteration, inner)) is not None)
        return self.runner(tag)(feeds, found, inner)

    def __init__(self, spec, attrs):
        super().__init__(spec, attrs)
        self.bodies = {}
        self._maps: dict[str, PortMap] = {}
        self._runners: dict[str, BodyRunner] = {}

    def body(self, tag: str) -> Analysis:
        if tag not in self.bodies:
            raise ModelError(f"has no <{tag}>", code="E-SUBGRAPH")
        return self.bodies[tag]

    def port_map(self, tag: str = "body") -> PortMap:
        if tag not in self._maps:
            self._maps[tag] = PortMap.read(self.layer, PORT_MAP_OF[tag], self.body(tag))
        return self._maps[tag]

    def runner(self, tag: str = "body") -> BodyRunner:
        if tag not in self._runners:
            self._runners[tag] = BodyRunner(self.body(tag), [i.parameter for i in self.port_map(tag).inputs],
                                            self.memory_limit, self.optimize)
        return self._runners[tag]

    def body_type(self, tag: str, layer_id: str) -> TensorType:
        """A body layer's first output type as the body was validated (a Result: the value it takes)."""
        node = self.body(tag).nodes[layer_id]
        return node.types[0] if node.types else TensorType(None, etypes.dynamic)

    def fed_types(self, tag: str, inputs: list[TensorType]) -> dict[str, TensorType]:
        """Body Parameter id -> the type the op's inputs give it."""
        ports, body = self.port_map(tag), self.body(tag)
        fed = {}
        for bi in ports.fed_from_outside():
            t = inputs[bi.input]
            parameter = body.nodes[bi.parameter]
            own = parameter.op.attrs.element_type if parameter.op is not None else etypes.dynamic
            if etypes.dynamic not in (own, t.etype) and own is not t.etype:
                raise ShapeError(f"input {bi.input} is {t.etype} but body Parameter {bi.parameter} "
                                 f'"{parameter.layer.name}" is {own}')
            fed[bi.parameter] = TensorType(_part_shape(t.shape, bi.slicing) if bi.slicing else t.shape, t.etype)
        named = {bi.parameter for bi in ports.inputs}
        for layer in body.document.graph.layers_of_type("Parameter"):
            if layer.id not in named and layer.id in body.live:
                raise ShapeError(f'body Parameter {layer.id} "{layer.name}" is used but the port map feeds it '
                                 f"nothing")
        return fed

    # ------------------------------------------------------------ iterating (TensorIterator, Loop)
    def counter(self) -> BodyInput | None:
        """The body Parameter that gets the iteration number (Loop), unless the port map feeds it."""
        return None

    def keep_going(self, results: dict[str, np.ndarray]) -> bool:
        return True

    def iterate(self, args: tuple, limit: int | None, condition: bool) -> tuple[np.ndarray, ...]:
        """Run the body up to `limit` times (None: no limit) while `condition` and `keep_going` hold."""
        ports = self.port_map()
        feeds = {bi.parameter: args[bi.input] for bi in ports.inputs if bi.input is not None and not bi.slicing}
        sliced = [bi for bi in ports.inputs if bi.slicing and bi.input is not None]
        carried = [bi for bi in ports.inputs if bi.back_edge]
        counter = self.counter()
        if counter is not None:
            counter_type = self.body_type("body", counter.parameter)
            counter_shape = tuple(d if isinstance(d, int) else 1 for d in counter_type.shape or ())
        parts = {bo.result: [] for bo in ports.outputs if bo.slicing and bo.output is not None}
        last = None
        i = 0
        while condition and (limit is None or i < limit):
            for bi in sliced:
                feeds[bi.parameter] = _take_part(args[bi.input], bi.slicing, i)
            if counter is not None:
                feeds[counter.parameter] = np.full(counter_shape, i, counter_type.etype.carrier)
            last = self.run_body("body", feeds, i)
            for rid, collected in parts.items():
                collected.append(last[rid])
            for bi in carried:
                feeds[bi.parameter] = last[bi.back_edge]
            condition = self.keep_going(last)
            i += 1
        initial = {bi.back_edge: feeds[bi.parameter] for bi in carried} if last is None else {}
        return self.iteration_outputs(parts, last, initial)

    def iteration_outputs(self, parts: dict[str, list[np.ndarray]], last: dict[str, np.ndarray] | None,
                          initial: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
        """Concatenated and last-iteration outputs; with no iteration run, a loop-carried value
        is its initial value (`initial`, by body Result) and any other is empty."""
        outputs: list = [None] * len(self.layer.outputs)
        for bo in self.port_map().outputs:
            if bo.output is None:
                continue
            if bo.slicing:
                collected = parts[bo.result][::-1] if bo.slicing.stride < 0 else parts[bo.result]
                outputs[bo.output] = _concatenate(collected, bo.slicing.axis, self.body_type("body", bo.result))
            elif last is not None:
                outputs[bo.output] = last[bo.result]
            else:
                outputs[bo.output] = initial.get(bo.result, zeros_of(self.body_type("body", bo.result)))
        return tuple(outputs)


# ---------------------------------------------------------------- TensorIterator

@register("TensorIterator", 1)
class TensorIterator(SubgraphOp):
    """Runs the body once per part of its sliced inputs; carries values along back edges."""

    def iterations(self, shapes: list) -> int | None:
        """From the sliced inputs (they must agree), else from the first concatenated output, else 1."""
        ports = self.port_map()
        counts = []
        for bi in ports.fed_from_outside():
            if bi.slicing:
                shape = shapes[bi.input]
                dim = None if shape is None else shape[normalize_axis(bi.slicing.axis, len(shape), "slicing axis")]
                counts.append(_slice_count(dim, bi.slicing) if isinstance(dim, int) else None)
        known = sorted({c for c in counts if c is not None})
        if len(known) > 1:
            raise ShapeError(f"the sliced inputs give different iteration counts: {', '.join(map(str, known))}")
        if counts:
            return known[0] if known else None
        concat = next((bo.slicing for bo in ports.outputs if bo.slicing), None)
        if concat is not None:
            return abs(concat.end - concat.start) // max(concat.part_size, 1)
        return 1

    def infer(self, inputs):
        ports = self.port_map()
        fed = self.fed_types("body", inputs)
        self.body_inputs = {"body": fed}
        results = infer_body(self.body("body"), fed)
        count = self.iterations([t.shape for t in inputs])
        out: list = [None] * len(self.layer.outputs)
        for bo in ports.outputs:
            if bo.output is None:
                continue
            t = results[bo.result]
            shape = t.shape
            if bo.slicing and shape is not None:
                shape = shape or (1,)
                axis = normalize_axis(bo.slicing.axis, len(shape), "concatenation axis")
                # OpenVINO multiplies part_size, not the body's dim, by the count.
                length = max(count * bo.slicing.part_size, 0) if count is not None else ANY
                shape = shape[:axis] + (length,) + shape[axis + 1:]
            out[bo.output] = TensorType(shape, t.etype)
        return out

    def run(self, *args):
        return self.iterate(args, self.iterations([a.shape for a in args]), True)


# ---------------------------------------------------------------- Loop

@register("Loop", 5)
class Loop(SubgraphOp):
    """Runs the body while the trip count and the body's condition allow; input 0 trip count, 1 condition."""

    #: set by `infer`: the body's condition is a constant true, so only the trip count can end the loop
    endless_without_trip_count = False

    def counter(self):
        special = self.port_map().special_input("current_iteration")
        if special is not None and special.input is None and special.back_edge is None:
            return special
        return None

    def keep_going(self, results):
        special = self.port_map().special_output("execution_condition")
        if special is None:
            return False   # no condition output: the reference reads it as false (the CPU cannot run such a Loop)
        return bool(_only_value(results[special.result], "the body's execution condition"))

    def body_condition(self, special: BodyOutput, results: dict[str, TensorType],
                       inputs: list[TensorType]) -> bool | None:
        """The body's execution condition when known at load: a constant, or a
        pass-through Parameter fed a constant (OpenVINO looks at both)."""
        value = results[special.result].value
        if value is None:
            source = result_sources(self.body("body")).get(special.result)
            feeder = next((bi for bi in self.port_map().fed_from_outside() if source and bi.parameter == source[0]),
                          None)
            value = inputs[feeder.input].value if feeder is not None else None
        return None if value is None else bool(_only_value(value, "the body's execution condition"))

    def infer(self, inputs):
        trip, condition = inputs[0], inputs[1]
        _check_scalar_input(trip, "trip count (input 0)", integral=True)
        _check_scalar_input(condition, "execution condition (input 1)", integral=False)
        ports, body = self.port_map(), self.body("body")
        mapped = {bi.input for bi in ports.fed_from_outside()}
        unmapped = [i for i in range(2, len(inputs)) if i not in mapped]
        if unmapped:
            raise ShapeError(f"input {unmapped[0]} feeds no body Parameter (the port map does not name it)")
        fed = self.fed_types("body", inputs)
        results = infer_body(body, fed)
        widened = False
        for bi in ports.inputs:
            if bi.back_edge and bi.parameter in fed:
                sent, got = results[bi.back_edge], fed[bi.parameter]
                if etypes.dynamic not in (sent.etype, got.etype) and sent.etype is not got.etype:
                    raise ShapeError(f"back edge {bi.back_edge} -> {bi.parameter} sends {sent.etype} into a "
                                     f"{got.etype} Parameter")
                if sent.shape != got.shape:
                    fed[bi.parameter] = TensorType(_widen(got.shape, sent.shape), got.etype)
                    widened = True
        if widened:
            results = infer_body(body, fed)
        self.body_inputs = {"body": fed}

        special = ports.special_output("execution_condition")
        if special is None:   # OpenVINO's shape inference stops here, leaving every output unknown
            return [TensorType(None, etypes.dynamic) for _ in self.layer.outputs]
        never = condition.value is not None and not _only_value(condition.value, "execution condition")
        body_condition = self.body_condition(special, results, inputs)
        constant = results[special.result].value
        self.endless_without_trip_count = constant is not None and bool(_only_value(constant, "execution condition"))
        count = None
        if body_condition is False:
            count = 1                    # do-while: the body runs once
        elif body_condition is True and trip.value is not None:
            count = int(_only_value(trip.value, "trip count"))
            count = count if count >= 0 else None
        out: list = [None] * len(self.layer.outputs)
        for bo in ports.outputs:
            if bo.output is None:
                continue
            t = results[bo.result]
            shape = t.shape
            if bo.slicing:
                shape = (0,) if never else self.concatenated_shape(shape, bo.slicing.axis, count)
            elif never and shape is not None and shape and all(isinstance(d, int) for d in shape):
                shape = (0,) + shape[1:]     # OpenVINO's shape inference, when the loop cannot start
            out[bo.output] = TensorType(shape, t.etype)
        return out

    @staticmethod
    def concatenated_shape(shape, axis: int, count: int | None):
        if shape is None:
            return None
        shape = shape or (1,)
        axis = normalize_axis(axis, len(shape), "concatenation axis")
        dim = shape[axis]
        length = dim * count if isinstance(dim, int) and count is not None else ANY
        if isinstance(length, int) and length >= INT64_MAX:   # OpenVINO: as good as unbounded
            length = ANY
        return shape[:axis] + (length,) + shape[axis + 1:]

    def run(self, trip, condition, *rest):
        args = (trip, condition, *rest)
        limit = int(_only_value(trip, "trip count"))
        limit = limit if limit >= 0 else None
        for bi in self.port_map().fed_from_outside():
            if bi.slicing:     # a sliced input ends the loop when its parts run out
                x = args[bi.input]
                parts = _slice_count(x.shape[normalize_axis(bi.slicing.axis, x.ndim, "slicing axis")], bi.slicing)
                limit = parts if limit is None else min(limit, parts)
        start = bool(_only_value(condition, "execution condition"))
        if limit is None and start and self.endless_without_trip_count:
            raise ModelError("would run forever: the trip count is negative (no limit) and the body's execution "
                             "condition is always true")
        return self.iterate(args, limit, start)


# ---------------------------------------------------------------- If

@register("If", 8)
class If(SubgraphOp):
    """Runs then_body or else_body on a boolean input 0; their outputs must agree in element type."""

    def outputs_of(self, tag: str, inputs: list[TensorType]) -> dict[int, TensorType]:
        fed = self.fed_types(tag, inputs)
        self.body_inputs[tag] = fed
        results = infer_body(self.body(tag), fed)
        given = {bo.output: results[bo.result] for bo in self.port_map(tag).outputs if bo.output is not None}
        missing = [k for k in range(len(self.layer.outputs)) if k not in given]
        if missing:
            raise ShapeError(f"<{tag}> gives no value for output {missing[0]}")
        return given

    def infer(self, inputs):
        condition = inputs[0]
        _check_scalar_input(condition, "condition (input 0)", integral=False)
        self.body_inputs = {}
        then, other = self.outputs_of("then_body", inputs), self.outputs_of("else_body", inputs)
        chosen = None
        if condition.value is not None:
            chosen = then if _only_value(condition.value, "condition") else other
        out = []
        for k in range(len(self.layer.outputs)):
            a, b = then[k], other[k]
            if etypes.dynamic not in (a.etype, b.etype) and a.etype is not b.etype:
                raise ShapeError(f"output {k} is {a.etype} in then_body but {b.etype} in else_body")
            etype = b.etype if a.etype is etypes.dynamic else a.etype
            shape = chosen[k].shape if chosen is not None else _shape_union(a.shape, b.shape)
            out.append(TensorType(shape, etype))
        return out

    def run(self, condition, *rest):
        tag = "then_body" if _only_value(condition, "condition") else "else_body"
        args = (condition, *rest)
        ports = self.port_map(tag)
        results = self.run_body(tag, {bi.parameter: args[bi.input] for bi in ports.fed_from_outside()})
        outputs: list = [None] * len(self.layer.outputs)
        for bo in ports.outputs:
            if bo.output is not None:
                outputs[bo.output] = results[bo.result]
        return tuple(outputs)
