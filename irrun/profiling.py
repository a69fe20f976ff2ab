"""Where the time goes: `irrun infer --profile [--repeat N] [--trace trace.json]`, `irrun.profile`.

A warm-up run, then N timed runs, each watched by a `Timings` watcher (irrun/watch.py),
which records each step's kernel time (the executor's own bookkeeping is left out).  Layers
that ran fused into one step (irrun/optimize.py) are timed together: the step's time is the
first layer's (an attention's whose keys and values were expanded by head group, where the
step starts with the expansion: irrun/grouped_attention.py), marked "+ fused: ...", and the
others show 0 with "fused into ...".  A
layer's time is its median over the runs; an op type's is the sum of its layers'.  MACs
come from irrun/flops.py at the shapes the run saw (its convention: FLOPs = 2 x MACs), and
GFLOP/s is 2 x MACs over the median time.  The trace is the run whose total is the median,
in Chrome's trace-event format: one complete ("X") event per layer, which Perfetto
(ui.perfetto.dev) and chrome://tracing open.
"""
from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .arrays import atomic_write
from .errors import UsageError
from .flops import layer_macs, macs
from .watch import StepTime, Timings

#: without --repeat: as many repeats as fit in about this many seconds, within REPEAT_RANGE
TARGET_SECONDS = 1.0
REPEAT_RANGE = (3, 100)


@dataclass
class LayerTime:
    layer: Any                  # irrun.ir.Layer
    seconds: float              # median over the runs
    input_shapes: tuple
    output_shapes: tuple
    dtypes: tuple
    macs: int | None = None     # multiply-accumulates of one run (None: unknown)
    fused: tuple = ()           # the layers whose time `seconds` includes (they ran fused with this one)
    fused_into: str = ""        # the layer whose time includes this one's

    @property
    def gflops(self) -> float | None:
        """Achieved GFLOP/s (2 x MACs per second, over 1e9)."""
        return None if not self.macs or not self.seconds else 2 * self.macs / self.seconds / 1e9


def _macs(analysis, step: StepTime) -> int | None:
    """MACs at the shapes the run saw; a sub-graph op from its bodies at the inferred shapes."""
    layer = step.node.layer
    found = macs(layer, step.input_shapes, step.output_shapes)
    if found is None and step.node.bodies and analysis is not None:
        found = layer_macs(analysis, layer.id)
    return found


@dataclass
class Profile:
    """Timed runs of one model on one input."""

    runs: list[list[StepTime]]      # per timed run, every step in order
    wall: list[float]               # per plain run, the whole `infer` call (seconds)
    analysis: Any = None            # the model's, for the MACs of sub-graph ops
    layers: list[LayerTime] = field(default_factory=list)

    def __post_init__(self):
        per_step = list(zip(*self.runs))
        self.layers = [LayerTime(steps[0].node.layer, statistics.median(s.seconds for s in steps),
                                 steps[0].input_shapes, steps[0].output_shapes, steps[0].dtypes,
                                 _macs(self.analysis, steps[0]), steps[0].fused, steps[0].fused_into)
                       for steps in per_step]

    @property
    def repeat(self) -> int:
        return len(self.runs)

    @property
    def total(self) -> float:
        """Sum of the layers' median times."""
        return sum(l.seconds for l in self.layers)

    @property
    def median_wall(self) -> float:
        return statistics.median(self.wall)

    def by_type(self) -> list[tuple[str, float, int, int | None]]:
        """(type-version, seconds, layers, MACs (None: unknown for every layer)), slowest first."""
        found: dict[str, list[LayerTime]] = {}
        for l in self.layers:
            found.setdefault(l.layer.label, []).append(l)
        rows = []
        for label, layers in found.items():
            counted = [l.macs for l in layers if l.macs is not None]
            rows.append((label, sum(l.seconds for l in layers), len(layers), sum(counted) if counted else None))
        return sorted(rows, key=lambda t: -t[1])

    def median_run(self) -> list[StepTime]:
        totals = [sum(s.seconds for s in run) for run in self.runs]
        order = sorted(range(len(totals)), key=totals.__getitem__)
        return self.runs[order[len(order) // 2]]

    def format_text(self, top: int = 15) -> str:
        total = self.total or 1e-12
        counted = [l.macs for l in self.layers if l.macs is not None]
        work = f", {_count(sum(counted))} MACs ({_rate(2 * sum(counted), self.total)} GFLOP/s in the layers)" \
            if counted else ""
        lines = [f"profile: {len(self.layers)} layers, median of {self.repeat} runs after a warm-up: "
                 f"{self.median_wall * 1e3:.3f} ms per inference, {self.total * 1e3:.3f} ms in the layers{work}"]
        lines.append(f"  {'ms':>9}  {'%':>5}  {'count':>5}  {'MACs':>7}  {'GFLOP/s':>7}  layer type")
        for label, seconds, count, n in self.by_type():
            lines.append(f"  {seconds * 1e3:9.3f}  {100 * seconds / total:5.1f}  {count:5d}  {_count(n):>7}  "
                         f"{_rate(2 * n if n else None, seconds):>7}  {label}")
        lines.append("  slowest layers:")
        lines.append(f"  {'ms':>9}  {'%':>5}  {'MACs':>7}  {'GFLOP/s':>7}  layer  (output shape)")
        for l in sorted(self.layers, key=lambda l: -l.seconds)[:top]:
            shape = l.output_shapes[0] if l.output_shapes else None
            shown = f"  {list(shape)}" if shape is not None else ""
            fused = f"  + fused: {_names(l.fused)}" if l.fused else ""
            lines.append(f"  {l.seconds * 1e3:9.3f}  {100 * l.seconds / total:5.1f}  {_count(l.macs):>7}  "
                         f"{_rate(2 * l.macs if l.macs else None, l.seconds):>7}  {l.layer.ref.describe()}{shown}{fused}")
        return "\n".join(lines)

    def trace(self) -> dict:
        """The median run as Chrome trace events (timestamps in microseconds from the run's start)."""
        run = self.median_run()
        counts = {l.layer.id: l.macs for l in self.layers}
        start = run[0].start if run else 0.0
        pid = os.getpid()
        events = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "irrun"}},
                  {"name": "thread_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "inference"}}]
        for s in run:
            layer = s.node.layer
            events.append({"name": layer.name, "cat": layer.label, "ph": "X", "ts": (s.start - start) * 1e6,
                           "dur": s.seconds * 1e6, "pid": pid, "tid": 0,
                           "args": {"id": layer.id, "type": layer.label,
                                    "input_shapes": [list(x) if x is not None else None for x in s.input_shapes],
                                    "output_shapes": [list(x) if x is not None else None for x in s.output_shapes],
                                    "dtype": str(s.dtypes[0]) if s.dtypes and s.dtypes[0] is not None else None,
                                    "MACs": counts.get(layer.id),
                                    **({"fused": list(s.fused)} if s.fused else {}),
                                    **({"fused_into": s.fused_into} if s.fused_into else {})}})
        return {"traceEvents": events, "displayTimeUnit": "ms",
                "otherData": {"runs": self.repeat, "median_inference_ms": self.median_wall * 1e3}}

    def write_trace(self, path: str | Path) -> None:
        with atomic_write(path, "w") as f:
            json.dump(self.trace(), f)


def profile(model, inputs: Any, repeat: int | None = None) -> Profile:
    """Warm up, then time `repeat` runs (default: as many as fit in about a second, 3 to 100)."""
    if repeat is not None and repeat < 1:
        raise UsageError(f"repeat must be at least 1, got {repeat}")
    start = time.perf_counter()
    model.infer(inputs)
    warm = time.perf_counter() - start
    if repeat is None:
        lo, hi = REPEAT_RANGE
        repeat = max(lo, min(hi, int(TARGET_SECONDS / 2 / max(warm, 1e-6))))
    runs, wall = [], []
    # `repeat` plain runs, timed whole, then `repeat` runs with every step timed (a watched run
    # pays some bookkeeping per step, which the plain one does not).  Not alternating: a model
    # that runs in two processes (irrun/process_pair.py) runs its watched runs in one, its worker
    # asleep; alternating, each plain run would wait for the worker to wake (the CRNN 9.4 against
    # 4.8 ms), or each timed run have it spinning beside it (its first layers up to 3.6x slower).
    for _ in range(repeat):
        start = time.perf_counter()
        model.infer(inputs)
        wall.append(time.perf_counter() - start)
    for _ in range(repeat):
        timings = Timings()
        model.infer(inputs, watch=[timings])
        runs.append(timings.steps)
    return Profile(runs, wall, model.analysis)


def _names(names: tuple, most: int = 4) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def _count(n: int | None) -> str:
    """1.82G, 118M, 25.1k, 0; "-" for unknown."""
    if n is None:
        return "-"
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= scale:
            return f"{n / scale:.3g}{suffix}"
    return str(n)


def _rate(flops: int | None, seconds: float) -> str:
    return "-" if not flops or not seconds else f"{flops / seconds / 1e9:.3g}"
