"""One watched run of a plan (irrun/executor.py): which of a set of watchers (irrun/watch.py) sees
which layer, worked out once per selection (`Route`), and the run that shows each layer's
outputs the moment its step ends, layers folded at load from their folded values (`Watching`).
Profiling, tracing, dumps, comparisons and `add_outputs` all watch a run this way."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING

from .watch import BODY_WATCH, Produced, Scope

if TYPE_CHECKING:
    from .analysis import Node
    from .executor import Plan, Step, Variant


class Route:
    """Which of a set of watchers (by position) sees which layer; the same for every set that
    selects alike, so it is worked out once."""

    def __init__(self, plan: Plan, variant: Variant, watchers: tuple):
        self.choices: list[tuple[int, ...]] = [()]      # distinct index tuples; 0 is "nobody"
        index: dict[tuple[int, ...], int] = {(): 0}

        def choice(node: Node) -> int:
            op_type = node.layer.op_type
            if op_type == "Result":
                return 0
            seen = tuple(i for i, w in enumerate(watchers)
                         if (w.layers is None or node.id in w.layers) and (op_type != "Constant" or w.constants))
            if seen not in index:
                index[seen] = len(self.choices)
                self.choices.append(seen)
            return index[seen]

        nodes = plan.analysis.nodes
        sources = [i for i, w in enumerate(watchers) if w.sources]
        self.parameters = [(nodes[pid], choice(nodes[pid])) for pid in plan.parameter_slots]
        # per step: its choice; a fused step: one per layer it runs
        self.steps = [tuple(choice(n) for n in step.members) if step.members else choice(step.node)
                      for step in variant.steps]
        # Folded layers a watcher wants, and the dropped ones their values need recomputed from.
        self.folded: dict[int, list[tuple[Node, int]]] = {}
        wanted = []
        for position, folded in variant.folded_before.items():
            for node in folded:
                c = choice(node)
                if any(i in sources for i in self.choices[c]):
                    self.folded.setdefault(position, []).append((node, c))
                    wanted.append(node)
        self.recompute: set[str] = set()
        self.readers: dict[str, int] = {}     # recomputed layer -> recomputed layers that read it
        todo = [n for n in wanted if any(plan.source_value((n.id, i)) is None for i in range(len(n.types)))]
        while todo:
            node = todo.pop()
            if node.id in self.recompute:
                continue
            self.recompute.add(node.id)
            for src in node.inputs:
                if plan.source_value(src) is None:
                    self.readers[src[0]] = self.readers.get(src[0], 0) + 1
                    todo.append(nodes[src[0]])
        # Recomputing runs in plan order: a layer needed only as an input is computed at its place too.
        for position, folded in variant.folded_before.items():
            listed = {n.id for n, _ in self.folded.get(position, ())}
            extra = [(n, 0) for n in folded if n.id in self.recompute and n.id not in listed]
            if extra:
                merged = self.folded.setdefault(position, []) + extra
                order = {n.id: i for i, n in enumerate(folded)}
                merged.sort(key=lambda nc: order[nc[0].id])
                self.folded[position] = merged


class Watching:
    """One watched run of a plan: hands each watcher the layers it selects (see irrun/watch.py)."""

    def __init__(self, plan: Plan, variant: Variant, watchers: tuple, scope: Scope, slots: list):
        self.plan = plan
        self.scope = scope
        self.timed = any(w.timed for w in watchers)
        route = self.route = plan.route(variant, watchers)
        sources = [w.sources for w in watchers]
        self.seeing = [tuple(watchers[i] for i in c) for c in route.choices]
        self.seeing_sources = [tuple(watchers[i] for i in c if sources[i]) for c in route.choices]
        self.makes_all = [any(watchers[i].wants_values for i in c) for c in route.choices]
        self.memo: dict[str, tuple] = {}
        self.readers = dict(route.readers)
        for node, c in route.parameters:
            event = Produced(node, (slots[plan.parameter_slots[node.id]],), scope, folded=True,
                             name=plan.key_names[node.id], report=plan.report)
            for w in self.seeing_sources[c]:
                w.produced(event)

    def folded(self, position: int) -> None:
        """Report the layers folded at load that come before step `position`."""
        for node, c in self.route.folded.get(position, ()):
            values = self._folded_values(node)
            event = Produced(node, values, self.scope, folded=True, name=self.plan.key_names[node.id],
                             report=self.plan.report)
            for w in self.seeing_sources[c]:
                w.produced(event)

    def _folded_values(self, node: Node) -> tuple:
        plan = self.plan
        if node.id not in self.route.recompute:
            return tuple(plan.source_value((node.id, i)) for i in range(len(node.types)))
        args = []
        for src in node.inputs:
            value = plan.source_value(src)
            if value is None:
                value = self.memo[src[0]][src[1]]
                self.readers[src[0]] -= 1
                if not self.readers[src[0]]:
                    del self.memo[src[0]]
            args.append(value)
        values = plan._run_step(node, node.op.run, args)
        if self.readers.get(node.id):
            self.memo[node.id] = values
        return values

    def step(self, k: int, step: Step, args: list) -> tuple:
        """Run step `k` and show its outputs to the watchers that select it."""
        choice = self.route.steps[k]
        plan = self.plan
        if type(choice) is tuple:
            return self._fused_step(step, choice, args)
        seeing = self.seeing[choice]
        if not seeing:
            return plan._run_step(step.node, step.kernel, args)
        op = step.op
        token = BODY_WATCH.set((op, seeing, self.scope)) if step.node.bodies else None
        try:
            start = time.perf_counter() if self.timed else 0.0
            # (A kernel bound to skip outputs nobody reads gives way to the op's own, which makes them all.)
            kernel = step.complete if step.complete is not None and self.makes_all[choice] else step.kernel
            out = plan._run_step(step.node, kernel, args)
            seconds = time.perf_counter() - start if self.timed else 0.0
        finally:
            if token is not None:
                BODY_WATCH.reset(token)
        event = Produced(step.node, out[:len(step.outputs)], self.scope, start, seconds, False, step.volatile, args,
                         step.key_name, plan.report)
        for w in seeing:
            w.produced(event)
        return out

    def _fused_step(self, step: Step, choices: tuple, args: list) -> tuple:
        """A fused step: each of its layers is shown (irrun/optimize.py: `member_events`); no
        watcher that reads values selects one whose output it hides (`Plan.variant_for`)."""
        if not any(self.seeing[c] for c in choices):
            return self.plan._run_step(step.node, step.kernel, args)
        from .optimize import member_events
        start = time.perf_counter()
        out = self.plan._run_step(step.node, step.kernel, args)
        seconds = time.perf_counter() - start
        for event, c in zip(member_events(step, out, args, start, seconds, self.scope, self.plan.report), choices):
            for w in self.seeing[c]:
                w.produced(event)
        return out
