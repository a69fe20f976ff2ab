"""Several layers run as one step by a kernel of their own (part of `irrun.optimize.rewrite`):
what irrun/grouped_attention.py, irrun/rotary_embedding.py and irrun/rms_norm.py share.

A pattern rewrite finds its layers among the plan's steps (`Wiring`), makes one step of them
(`group_step`: its inputs are the members' inputs from outside the group, the first member's
first, so that a run-time check of shapes infers the first layer as for any fused step), and
gives it an op derived from `LayerGroup`: a fast kernel for the inputs the pattern expects, and
the layers one by one, each answering or failing as it would alone, for any other inputs.  A
group never hides a tensor something else sees: read by a layer outside it, a Result or an
Assign, or selected by a watcher that reads values (`pinned`).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

import numpy as np


class Wiring:
    """Who makes and who reads each slot of `steps`, and the slots no rewrite may hide."""

    def __init__(self, plan, steps: list, pinned: set[int]):
        self.plan, self.steps, self.pinned = plan, steps, pinned
        self.producer = {s: k for k, step in enumerate(steps) for s in step.outputs}
        self.readers: dict[int, list[tuple[int, int]]] = {}
        for k, step in enumerate(steps):
            for i, s in enumerate(step.inputs):
                self.readers.setdefault(s, []).append((k, i))

    def plain(self, k: int | None, op_type: str, n_inputs: int | None = None) -> bool:
        """Step k runs one layer of `op_type` (with `n_inputs` inputs) as the layer itself."""
        if k is None:
            return False
        step = self.steps[k]
        return (step.node.layer.op_type == op_type and not step.members and step.op is step.node.op
                and not step.op.run_replaced() and len(step.inputs) == len(step.node.inputs)
                and len(step.outputs) == 1 and (n_inputs is None or len(step.inputs) == n_inputs))

    def hidden(self, slot: int) -> bool:
        """`slot` is read by one step alone and seen by nothing else."""
        return slot not in self.pinned and len(self.readers.get(slot, ())) == 1

    def made_by(self, slot: int, op_type: str, n_inputs: int | None = None) -> int | None:
        """The step making `slot`, where it is a plain `op_type` whose output only the group reads."""
        k = self.producer.get(slot)
        return k if self.hidden(slot) and self.plain(k, op_type, n_inputs) else None

    def read_by(self, k: int, op_type: str, n_inputs: int | None = None) -> tuple[int, int] | None:
        """(step, input position) of the one reader of step k's output, a plain `op_type`, where
        that output is hidden."""
        out = self.steps[k].outputs[0]
        if not self.hidden(out):
            return None
        j, position = self.readers[out][0]
        return (j, position) if self.plain(j, op_type, n_inputs) else None

    def constant(self, k: int, position: int):
        """The value of step k's input `position` where it is one of the plan's constants, else None."""
        return self.plan.constants.get(self.steps[k].inputs[position])

    def constant_is(self, k: int, position: int, number: float) -> bool:
        """Step k's input `position` is a constant whose every element is `number`."""
        value = self.constant(k, position)
        return value is not None and np.size(value) >= 1 and bool(np.all(np.asarray(value) == number))


def group_step(plan, steps: list, members: list[int], make_op: Callable):
    """One step running `members` (step indices, in the order they run): `make_op(nodes, wiring,
    inputs)` gives its op (wiring: each member's (slots read, slot written))."""
    inputs, types_in, wiring, made = [], [], [], set()
    for k in members:
        step = steps[k]
        wiring.append((list(step.inputs), step.outputs[0]))
        for s, src in zip(step.inputs, step.node.inputs):
            if s not in made and s not in inputs:
                inputs.append(s)
                types_in.append(plan.analysis.type_of(src))
        made.add(step.outputs[0])
    first, last = steps[members[0]], steps[members[-1]]
    nodes = tuple(steps[k].node for k in members)
    return replace(first, op=make_op(nodes, wiring, inputs), inputs=inputs, outputs=list(last.outputs), free=[],
                   out_nbytes=list(last.out_nbytes), position=last.position, members=nodes, types_in=types_in,
                   key_name=last.key_name)


def with_groups(steps: list, groups: dict[int, object], taken: set[int]) -> list:
    """`steps` with each group's step at its last member's place and its other members gone."""
    if not groups:
        return steps
    return [groups[k] if k in groups else step for k, step in enumerate(steps) if k not in taken or k in groups]


class LayerGroup:
    """The op of a group's step: `fast(args)` where the pattern holds for the inputs (None where
    it does not), else the layers one by one."""

    outputs_are_new = True
    foldable = False
    head = False

    def __init__(self, plan, nodes: tuple, wiring: list, inputs: list[int]):
        self.plan, self.nodes, self.wiring, self.inputs = plan, nodes, wiring, inputs
        self.position = {s: i for i, s in enumerate(inputs)}     # a slot -> its place among the step's inputs

    def run_replaced(self) -> bool:
        return False

    def fast(self, args):
        raise NotImplementedError

    def run(self, *args):
        return self.bind(None)(*args)

    def bind(self, info):
        fast, by_layers = self.fast, self.layer_by_layer

        def group(*args):
            out = fast(args)
            return by_layers(args) if out is None else out
        return group

    def layer_by_layer(self, args):
        """The layers one by one, each answering (or failing) as it would on its own."""
        plan = self.plan
        values = dict(zip(self.inputs, args))
        out = None
        for node, (read, written) in zip(self.nodes, self.wiring):
            operands = [values[s] if s in values else plan.constants.get(s) for s in read]
            try:
                out = node.op.run(*operands)
            except Exception as exc:   # noqa: BLE001 - reported at the layer that failed
                raise plan._located(node, exc, operands) from None
            out = values[written] = out[0] if isinstance(out, (tuple, list)) else out
        return out
