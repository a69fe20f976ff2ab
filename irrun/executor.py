"""Running a model: a plan built once at load, then a tight loop per call.

The plan lists the live ops in topological order with their kernels bound and
their inputs and outputs as slot indices.  Everything computable from
constants alone is computed at load (f16 weights decompressed once, static
shape arithmetic; large weights by rows, straight to where they are to live:
irrun/blockwise_folding.py).  Each intermediate is dropped after its last consumer, an
output nobody reads right after it is made.

Binding.  An op may specialise its kernel for the types known at load by
defining `bind(step: StepInfo) -> callable | None` (None: use `run`).  The
plan tells it which outputs anyone reads and which inputs it may overwrite
(`StepInfo.consumable`), so an elementwise op can write into an input that
dies here instead of allocating.  Bound kernels run with NumPy's
floating-point errors ignored for the whole call (overflow wraps, x/0 is inf,
as in C++: irrun/float_errors.py), so they need no errstate of their own.

Overwriting an input is safe when nothing can observe its buffer afterwards.
The plan proves it from the graph: the input must be produced by an op that
declares `outputs_are_new = True` (each output is an array of its own: it
shares no memory with the inputs, the other outputs, a constant or anything
the op keeps), and the input, together with every tensor that may be a view
of it (outputs of ops without that declaration, transitively), must have no
reader after this step, must not be a Result, and must not be read by a sink
(an Assign keeps what it reads).  Another input of the same step may still
overlap it (Add(x, Reshape(x))): NumPy ufuncs handle that.
"""
from __future__ import annotations

import threading
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from functools import cached_property
from operator import itemgetter
from typing import Callable

import numpy as np

from . import fast_loop, float_errors, process_pair, threads
from .fast_loop import straight_line
from .analysis import SINK_TYPES, Analysis, Node
from .blockwise_folding import (PackedConstant, Pending, RowChain, filters_by_rows, flowing_input, may_start,
                                tables_gathered_by_rows)
from .compressed_products import kept_compressed
from .errors import IrrunError, ModelError, ResourceLimitError
from .memory import default_memory_limit
from .registry import Op, TensorType
from .shapes import format_shape, is_static
from .shape_check import StepCheck, checked
from .watch import TOP, Scope, key_names
from .watched_run import Route, Watching


@dataclass(frozen=True)
class StepInfo:
    """What the plan knows about one step when its op binds a kernel."""

    inputs: list[TensorType]        # load-time types of the inputs (values known for constants)
    outputs: list[TensorType]       # load-time types of the outputs
    consumable: frozenset[int]      # input positions whose buffers the kernel may overwrite
    used: tuple[bool, ...]          # per output: does a later step or a Result read it
    # told of a constant input the bound kernel will not read (it keeps a transform of it): its
    # mapped pages may leave memory (read again from the file if anything else asks)
    release: Callable[[np.ndarray], object] | None = None

    def same_layout(self, i: int, o: int = 0) -> bool:
        """Input i has output o's static shape and element type: a buffer the output can reuse."""
        a, b = self.inputs[i], self.outputs[o]
        return a.etype is b.etype and a.shape == b.shape and is_static(a.shape)


def _no_inputs(slots):
    return ()


@dataclass
class Step:
    node: Node
    op: Op
    inputs: list[int]          # slots read
    outputs: list[int]         # slots written
    free: list[int]            # slots whose last reader is this step (or nobody reads them)
    out_nbytes: list[int | None]   # static output sizes (None: known only at run time)
    kernel: Callable = None    # op.run, or what op.bind returned
    consumable: frozenset[int] = frozenset()
    check: Callable | None = None  # dynamic models: the check before it runs (irrun/shape_check.py)
    volatile: tuple[bool, ...] = ()   # per output: a later step may overwrite its buffer in place
    complete: Callable | None = None  # op.run, where the bound kernel may skip outputs nobody reads
    key_name: str = ""                # the name its tensors' keys use (irrun/watch.py: key_names)
    position: int = 0                 # its index among the unrewritten steps (a fused step: its last layer's)
    members: tuple = ()               # a fused step (irrun/optimize.py): every layer it runs, in order
    types_in: list | None = None      # a fused step: its inputs' types (else those of node's inputs)
    used: tuple = ()                  # per output: does a later step or a Result read it

    def program(self) -> tuple:
        """(kernel, gather inputs, spread the inputs, single output slot or None, outputs, free)."""
        n = len(self.inputs)
        gather = itemgetter(*self.inputs) if n else _no_inputs
        single = self.outputs[0] if len(self.outputs) == 1 else None
        return self.kernel, gather, n != 1, single, tuple(self.outputs), tuple(self.free)


@dataclass
class Variant:
    """One rewriting of a plan's steps, bound and ready to run (see `Plan.variant`)."""

    steps: list[Step]
    program: list[tuple]
    program_steps: list[Step]         # the step each entry of `program` runs
    results: list[int]                # the slots `program` leaves the model's results in
    folded_before: dict[int, list[Node]] = field(default_factory=dict)   # like Plan.folded_before
    routes: dict[tuple, Route] = field(default_factory=dict)

    @property
    def hidden(self) -> frozenset[str]:
        """Layers whose outputs no step of this variant produces (inside fused steps)."""
        found = getattr(self, "_hidden", None)
        if found is None:
            found = self._hidden = frozenset(n.id for step in self.steps for n in step.members[:-1])
        return found


_NO_CHANGE = nullcontext()     # (reusable: it holds no state)


def _no_change() -> nullcontext:
    return _NO_CHANGE

# A GEMM of this many multiply-adds runs on several of OpenBLAS's threads (`Plan.blas_network`)
BLAS_SPIN_MACS = 1 << 20
# A convolution of this many multiply-adds counts as large for `Plan.convolution_network`
LARGE_CONVOLUTION_MACS = 1 << 25
# Layers whose arithmetic decides `Plan.convolution_network`
CONVOLUTION_TYPES = frozenset({"Convolution", "GroupConvolution", "ConvolutionBackpropData",
                               "GroupConvolutionBackpropData", "DeformableConvolution", "BinaryConvolution"})
# Layers whose arithmetic runs as GEMMs on BLAS's threads outside a convolution network
GEMM_TYPES = frozenset({"MatMul", "GroupedMatMul", "Einsum", "ScaledDotProductAttention", "RNNCell", "GRUCell",
                        "LSTMCell", "RNNSequence", "GRUSequence", "LSTMSequence"})


def _known(node: Node) -> bool:
    """Whether the analysis knows every output value of `node` (a layer folded at load)."""
    types = node.types
    return bool(types) and all(t is not None and t.value is not None for t in types) \
        and node.layer.op_type != "Result"


def _shadowed(nodes: dict[str, Node], order: list[str]) -> set[str]:
    """Folded layers of `order` whose every reader there is folded too, into values of their own: no
    step reads theirs."""
    readers: dict[str, list[str]] = {}
    for lid in order:
        for src in nodes[lid].inputs:
            if src is not None:
                readers.setdefault(src[0], []).append(lid)

    def apart(lid: str, reader: str) -> bool:      # (a Reshape's value is a view of its input's)
        return not any(np.may_share_memory(t.value, r.value) for t in nodes[lid].types for r in nodes[reader].types)
    return {lid for lid in order if lid in readers and _known(nodes[lid])
            and all(_known(nodes[r]) and apart(lid, r) for r in readers[lid])}


class Plan:
    def __init__(self, analysis: Analysis, result_ids: list[str], parameter_ids: list[str],
                 memory_limit: int | None = None, release: Callable[[np.ndarray], object] | None = None,
                 read_constant: Callable[[Node, int, np.ndarray], np.ndarray] | None = None,
                 optimize: bool = True, compressed_weights: str = "auto"):
        """`release(array)`: told of each constant folding no longer needs (a mapped f16 weight
        once decompressed), so that its memory can go before the next one is decompressed, and
        of those a bound kernel keeps transformed (`StepInfo.release`).
        `read_constant(node, i, value)`: what `node` reads as its constant input i (irrun/precision.py
        rounds folded f16 arithmetic where OpenVINO keeps the folded result in f16); by default `value`.
        `optimize`: rewrite the steps as irrun/optimize.py does (fused chains, KV caches grown in place).
        `compressed_weights`: "auto", "decompress" or "keep" (irrun/compressed_products.py; with
        `optimize` only: without it every weight is decompressed, layer by layer)."""
        self.analysis = analysis
        self.memory_limit = memory_limit or default_memory_limit()
        self.release = release
        nodes = analysis.nodes
        self.slot_of: dict[tuple[str, int], int] = {}
        self.constants: dict[int, np.ndarray] = {}
        self.parameter_slots: dict[str, int] = {}
        self.dynamic = False

        def slot(key):
            if key not in self.slot_of:
                self.slot_of[key] = len(self.slot_of)
            return self.slot_of[key]

        for pid in parameter_ids:
            self.parameter_slots[pid] = slot((pid, 0))
        order = [lid for lid in analysis.order if lid in analysis.live and lid not in self.parameter_slots]
        # A constant only folded layers read (an f16 weight once decompressed, a shape once used)
        # is dropped after its last such reader: the plan keeps what steps and Results read.
        readers_left: dict[tuple[str, int], int] = {}
        for lid in order:
            for src in nodes[lid].inputs:
                readers_left[src] = readers_left.get(src, 0) + 1

        readers_in_all = dict(readers_left)

        def folded(node: Node, kept: list | None = None) -> None:
            """`kept`: where an input's array goes that a chain folded by rows still reads (let go once
            written)."""
            for src in node.inputs:
                readers_left[src] -= 1
                if not readers_left[src]:
                    dropped = self.constants.pop(self.slot_of.get(src), None)
                    if isinstance(dropped, Pending) or dropped is None:
                        continue
                    if kept is not None:
                        kept.append(dropped)
                    elif release is not None:
                        release(dropped)

        steps: list[Step] = []
        # Layers not run per call, for watchers: step index they precede -> layers folded there.
        self.folded_before: dict[int, list[Node]] = {}
        shadowed = _shadowed(nodes, order)
        for lid in order:
            node = nodes[lid]
            types = node.types
            if lid in shadowed:
                # (every reader has a value of its own: this one goes now, not when the walk reaches
                # the readers, so that a model's folded decompression steps are never all held at once)
                if release is not None:
                    for t in types:
                        release(t.value)
                folded(node)
                self.folded_before.setdefault(len(steps), []).append(node)
                continue
            packed = getattr(node.op, "packed", None)       # (a large 4-bit Const, read by rows as asked)
            if _known(node) or packed is not None:
                values = [PackedConstant(packed)] if packed is not None else [t.value for t in types]
                for i, value in enumerate(values):
                    self.constants[slot((lid, i))] = value
                folded(node)
                self.folded_before.setdefault(len(steps), []).append(node)
                continue
            ins = [slot(src) for src in node.inputs]
            if all(s in self.constants for s in ins) and ins and node.op.foldable:
                chain = self._by_rows(node, ins, readers_in_all, read_constant) if optimize else None
                if chain is not None:
                    self.constants[slot((lid, 0))] = chain
                    folded(node, chain.release_after)
                    self.folded_before.setdefault(len(steps), []).append(node)
                    continue
                args = [self._materialised(s) for s in ins]
                if read_constant is not None:
                    args = [read_constant(node, i, a) for i, a in enumerate(args)]
                values = self._run_step(node, node.op.run, args)
                for i, v in enumerate(values):
                    self.constants[slot((lid, i))] = v
                folded(node)
                self.folded_before.setdefault(len(steps), []).append(node)
                continue
            if read_constant is not None:
                ins = [self._constant_as_read(node, i, s, read_constant) for i, s in enumerate(ins)]
            n_out = max(len(node.layer.outputs), 1)
            outs = [slot((lid, i)) for i in range(n_out)]
            sizes = []
            for t in types[:n_out]:
                if t is not None and is_static(t.shape) and t.etype.carrier is not None:
                    sizes.append(int(np.prod(t.shape, dtype=np.int64)) * t.etype.carrier.itemsize)
                else:
                    sizes.append(None)
                    self.dynamic = True
            steps.append(Step(node, node.op, ins, outs, [], sizes, position=len(steps)))
        self.result_slots = [self.slot_of[(rid, 0)] for rid in result_ids]
        self.optimize = optimize
        for step in steps:
            if hasattr(step.op, "memory_limit"):      # an op with bodies: their plans keep this limit
                step.op.memory_limit = self.memory_limit
                step.op.optimize = optimize
            for size in step.out_nbytes:
                if size is not None:
                    self._check_size(step.node, size)
        self.n_slots = len(self.slot_of)
        self.key_names = key_names(analysis.document.graph.layers.values())
        for step in steps:
            step.key_name = self.key_names[step.node.id]
        self.layer_steps = steps          # one step per layer run, as folded at load (variants start here)
        self.tables_by_rows: set[int] = set()
        self.filters_by_rows: set[int] = set()
        self.products_by_rows: set[int] = set()
        self.affine_weights: dict = {}      # their slots -> compressed_products.Affine or None
        if optimize:
            # (before the passes that lay weights out anew: these stay as they are)
            self.products_by_rows = kept_compressed(self, steps, compressed_weights)
            from .huge_pages import GemvWeightPages
            from .optimize import lay_out_gemm_weights
            from .sibling_products import join_sibling_weights
            joined = {j.slot: j for j, _ in join_sibling_weights(self, steps, release).values()}
            self.n_slots = len(self.slot_of)
            pages = GemvWeightPages(self, steps, list(joined))
            lay_out_gemm_weights(self, steps, release, pages)
            pages.move_the_rest(release)
            self.tables_by_rows = tables_gathered_by_rows(self, steps)
            self.filters_by_rows = filters_by_rows(self, steps)
        left = self.tables_by_rows | self.filters_by_rows | self.products_by_rows
        for s in [s for s, v in self.constants.items() if isinstance(v, Pending) and s not in left]:
            self._materialised(s)
        if optimize:
            for j in joined.values():
                j.view_members(self)        # (where the joined weight now lies)
        # What every call starts from: the constants in their slots.
        self._initial: list = [None] * self.n_slots
        for s, v in self.constants.items():
            self._initial[s] = v
        # (node, port, value) -> the value as the model reports it, for watchers (set by the model
        # when it computes in other types than it declares: irrun/precision.py); None: as computed
        self.report: Callable | None = None
        self.checked_kinds: dict[tuple, list] = {}     # run-time checks passed (irrun/shape_check.py)
        self._variants: dict[frozenset, Variant] = {}
        self._variant_lock = threading.Lock()
        self.main = self.variant(frozenset())
        self.steps, self._program = self.main.steps, self.main.program
        self._program_steps, self._program_results = self.main.program_steps, self.main.results
        self._written_out, self._loop_runs = None, 0
        self._pair, self._pair_countdown = None, process_pair.PAIR_AFTER_RUNS

    def _by_rows(self, node: Node, ins: list[int], readers: dict, read_constant) -> RowChain | None:
        """`node` folded as a stage of a chain folded by rows (irrun/blockwise_folding.py): its value
        as such a chain, not yet computed; None where it is not one."""
        args = [self.constants[s] for s in ins]
        flowing = flowing_input(node, args)
        if flowing is None:
            return None
        data = args[flowing]
        if isinstance(data, RowChain):
            if readers[node.inputs[flowing]] != 1:       # (read by others too: they share one array)
                return None
        elif not may_start(node, data):
            return None
        else:
            data = RowChain(data.packed if isinstance(data, PackedConstant) else data, self._located, self.release)
        args = [None if i == flowing else self._materialised(s) for i, s in enumerate(ins)]
        if read_constant is not None:
            args = [a if a is None else read_constant(node, i, a) for i, a in enumerate(args)]
        return data.extended(node, flowing, args, read_constant)

    def _materialised(self, s: int):
        """The constant in slot `s` as an array (a chain folded by rows computed now)."""
        value = self.constants[s]
        if isinstance(value, Pending):
            value = self.constants[s] = value.value()
        return value

    def _constant_as_read(self, node: Node, i: int, s: int, read_constant) -> int:
        """The slot of constant input i as `node` reads it: a slot of its own when that differs."""
        value = self.constants.get(s)
        if value is None:
            return s
        if isinstance(value, RowChain):
            if read_constant(node, i, value.first_row) is value.first_row:
                return s
            value = self._materialised(s)
        seen = read_constant(node, i, value)
        if seen is value:
            return s
        own = len(self.slot_of)
        self.slot_of[(node.id, -1 - i)] = own     # (never a real output port)
        self.constants[own] = seen
        return own

    # ------------------------------------------------------------ variants
    def variant(self, keep: frozenset) -> Variant:
        """The steps as run when the layers in `keep` must show their outputs (a watcher reads
        them): rewritten by irrun/optimize.py where `optimize` is on, except where a fusion would
        hide one of them; frees scheduled, kernels bound.  Made once per `keep`."""
        found = self._variants.get(keep)
        if found is None:
            with self._variant_lock:
                found = self._variants.get(keep)
                if found is None:
                    if len(self._variants) > 8:
                        self._variants = {k: v for k, v in self._variants.items() if not k}
                    found = self._variants[keep] = self._make_variant(keep)
        return found

    def _make_variant(self, keep: frozenset) -> Variant:
        steps = [replace(step, free=[], check=None) for step in self.layer_steps]
        if self.optimize:
            from .optimize import rewrite
            steps = rewrite(self, steps, keep)
        self._schedule_frees(steps)
        self._bind_kernels(steps)
        program, program_steps, results = [], [], list(self.result_slots)
        for step in steps:
            if None in step.out_nbytes and (step.members or not step.node.op.checks_itself):
                step.check = StepCheck(self, step)
            if step.node.layer.op_type == "Result" and step.inputs[0] in step.free:
                # (the last reader of its tensor passes it on unchanged: the loop's run leaves it
                # where it is; a watched run, which runs every step, still runs it)
                results[results.index(step.outputs[0])] = step.inputs[0]
                continue
            entry = step.program()
            if step.check is not None:
                entry = (checked(step.check, entry[2]),) + entry[1:]
            program.append(entry)
            program_steps.append(step)
        variant = Variant(steps, program, program_steps, results)
        # folded layers: reported before the first step that comes after them in the layer order
        k = 0
        for position in sorted(self.folded_before):
            while k < len(steps) and steps[k].position < position:
                k += 1
            variant.folded_before.setdefault(k, []).extend(self.folded_before[position])
        return variant

    def variant_for(self, watchers: tuple) -> Variant:
        """The variant that shows every layer whose values a watcher reads: the main one unless it
        hides one of them; else one made keeping them all (no fusion hides what is kept)."""
        hidden = self.main.hidden
        if not hidden:
            return self.main
        wanted: set = set()
        for w in watchers:
            if w.wants_values:
                if w.layers is None:
                    return self.variant(self._every_layer)
                wanted |= w.layers
        return self.variant(frozenset(wanted)) if not hidden.isdisjoint(wanted) else self.main

    @cached_property
    def constant_roots(self) -> frozenset[int]:
        """The ids of the arrays that own the constants' memory (an array the plan keeps: one a
        call returns a view of is the plan's, not the caller's)."""
        roots = set()
        for value in self.constants.values():
            while isinstance(value, np.ndarray) and isinstance(value.base, np.ndarray):
                value = value.base
            roots.add(id(value))
        return frozenset(roots)

    @cached_property
    def _every_layer(self) -> frozenset:
        return frozenset(step.node.id for step in self.layer_steps)

    # ------------------------------------------------------------ load-time analysis
    def _last_use(self, steps: list[Step]) -> dict[int, int]:
        """Slot -> index of the last step that reads it, or of its producer when nobody does."""
        last: dict[int, int] = {}
        for k, step in enumerate(steps):
            for s in step.outputs:
                last[s] = k
            for s in step.inputs:
                last[s] = k
        return last

    def _schedule_frees(self, steps: list[Step]) -> None:
        keep = set(self.result_slots) | set(self.constants) | set(self.parameter_slots.values())
        for s, k in self._last_use(steps).items():
            if s not in keep:
                steps[k].free.append(s)

    def _consumable_slots(self, steps: list[Step]) -> tuple[dict[int, set[int]], dict[int, list[int]]]:
        """Step index -> slots it may overwrite (see the module docstring for the rule); and
        slot -> the outputs that may be views of it."""
        last = self._last_use(steps)
        producer_fresh: dict[int, bool] = {}
        view_outputs: dict[int, list[int]] = {}      # slot -> outputs that may be views of it
        pinned = set(self.result_slots)
        for step in steps:
            fresh = getattr(step.op, "outputs_are_new", False)
            for s in step.outputs:
                producer_fresh[s] = fresh
            if step.node.layer.op_type in SINK_TYPES:
                pinned.update(step.inputs)
            if not fresh:
                for s in step.inputs:
                    view_outputs.setdefault(s, []).extend(step.outputs)

        def dies_at(s: int, k: int) -> bool:
            seen, todo = {s}, [s]
            while todo:
                t = todo.pop()
                if t in pinned or last.get(t, -1) > k:
                    return False
                for v in view_outputs.get(t, ()):
                    if v not in seen:
                        seen.add(v)
                        todo.append(v)
            return True

        found: dict[int, set[int]] = {}
        for k, step in enumerate(steps):
            for s in step.inputs:
                if producer_fresh.get(s) and last.get(s) == k and dies_at(s, k):
                    found.setdefault(k, set()).add(s)
        return found, view_outputs

    def step_info(self, step: Step) -> StepInfo:
        types_in = step.types_in if step.types_in is not None else \
            [self.analysis.type_of(src) for src in step.node.inputs]
        # a constant input's value as the step reads it (an f16 network's folded weight, rounded
        # to f16 where OpenVINO keeps it so: `read_constant`), not as the analysis computed it
        types_in = [t if t is None or self.constants.get(s, t.value) is t.value
                    else TensorType(t.shape, t.etype, self.constants[s], t.notes)
                    for t, s in zip(types_in, step.inputs)]
        return StepInfo(types_in, list(step.node.types[:len(step.outputs)]), step.consumable, (True,) * len(step.outputs),
                        self.release)

    def _bind_kernels(self, steps: list[Step]) -> None:
        consumable, view_outputs = self._consumable_slots(steps)
        read = {s for step in steps for s in step.inputs} | set(self.result_slots)
        for k, step in enumerate(steps):
            bind = getattr(step.op, "bind", None)
            kernel = None
            if bind is not None:
                dying = consumable.get(k, set())
                step.consumable = frozenset(i for i, s in enumerate(step.inputs) if s in dying)
                step.used = tuple(s in read for s in step.outputs)
                info = replace(self.step_info(step), used=step.used)
                kernel = bind(info)
                if kernel is not None and not all(info.used):
                    step.complete = step.op.run
            step.kernel = kernel or step.op.run
        # What a watcher must copy to keep: buffers a step may overwrite, and the views of them.
        overwritten = {step.inputs[i] for step in steps for i in step.consumable}
        todo = list(overwritten)
        while todo:
            for v in view_outputs.get(todo.pop(), ()):
                if v not in overwritten:
                    overwritten.add(v)
                    todo.append(v)
        for step in steps:
            step.volatile = tuple(s in overwritten for s in step.outputs)

    # ------------------------------------------------------------ errors
    def _check_size(self, node: Node, nbytes: int, shape=None) -> None:
        if nbytes > self.memory_limit:
            what = f" {format_shape(shape)}" if shape is not None else ""
            raise ResourceLimitError(f"output{what} needs {nbytes / 2**20:.1f} MiB, more than the memory limit "
                                     f"of {self.memory_limit / 2**20:.1f} MiB (raise it with --max-memory)",
                                     layer=node.layer.ref, file=self.analysis.document.diagnostics.file)

    def _located(self, node: Node, exc: BaseException, args) -> IrrunError:
        """A kernel's exception as an irrun error that names the layer."""
        file = self.analysis.document.diagnostics.file
        if isinstance(exc, IrrunError):
            if exc.layer is None:
                exc.layer = node.layer.ref
                exc.line = node.layer.line
                exc.file = exc.file or file
            return exc
        if isinstance(exc, MemoryError):
            return ResourceLimitError("ran out of memory", layer=node.layer.ref, file=file)
        shapes = ", ".join(format_shape(a.shape) for a in args if hasattr(a, "shape"))
        return ModelError(f"failed on inputs {shapes}: {type(exc).__name__}: {exc}", layer=node.layer.ref, file=file)

    def _run_step(self, node: Node, kernel: Callable, args: list[np.ndarray]) -> tuple:
        try:
            out = kernel(*args)
        except Exception as exc:  # noqa: BLE001 - any kernel failure is reported at its layer
            raise self._located(node, exc, args) from None
        return out if isinstance(out, tuple) else (out,)

    @cached_property
    def _layer_macs(self) -> dict[str, int]:
        from .flops import model_macs
        return {lid: m for lid, m in model_macs(self.analysis).items() if m}

    @cached_property
    def convolution_network(self) -> bool:
        """Whether convolutions large enough to run in parts on every core do most of the
        arithmetic (of the MACs known at load).  Such a network runs with BLAS held to one thread,
        its kernels cutting their work into parts on irrun's pool (`threads.pool_owns_cores`;
        on two threads exactly, once paired, in two processes instead: irrun/process_pair.py):
        OpenBLAS's own threads spin for a while after each GEMM, on the cores those parts want
        (irrun/threads.py).  Other networks keep BLAS's threads: a transformer's GEMMs and a
        MobileNet's 1x1 convolutions take 0.1 ms, which a hand-off to the pool costs as well."""
        counts = self._layer_macs
        large = sum(m for lid, m in counts.items() if m >= LARGE_CONVOLUTION_MACS
                    and self.analysis.nodes[lid].layer.op_type in CONVOLUTION_TYPES)
        return large * 2 >= sum(counts.values()) > 0

    @cached_property
    def blas_network(self) -> bool:
        """Whether the network keeps BLAS's threads (not a `convolution_network`) and has a
        MatMul or recurrent layer (`GEMM_TYPES`) of BLAS_SPIN_MACS multiply-adds or more, whose
        GEMM wakes them: they then spin on the cores the pool's parts want, so its kernels run
        whole (`threads.parts_off`).  (Convolutions alone, below a convolution network's size,
        keep their blocks in parts, BLAS single-threaded inside: they do not wake BLAS.)
        The CRNN's convolutions in parts beside them took 15% longer than whole (its grouped
        3 x 3 layers 1509-1547 against 1253-1297 us), the network 6.37 -> 6.03 ms; a ViT's
        Gelu over 1.2 Mi elements right after a GEMM took as long in two parts as in one."""
        return not self.convolution_network and any(
            m >= BLAS_SPIN_MACS and self.analysis.nodes[lid].layer.op_type in GEMM_TYPES
            for lid, m in self._layer_macs.items())

    @cached_property
    def convolutions_wake_blas(self) -> bool:
        """Whether the network is neither a `convolution_network` nor a `blas_network` but has a
        convolution of BLAS_SPIN_MACS multiply-adds or more: its GEMM (a 1x1 layer's, im2col's
        whole) runs on BLAS's threads, which then spin on the core the pool's parts want, so its
        elementwise kernels run whole (`threads.elementwise_whole`; its convolutions keep their
        parts).  Inferences alternating between the two ways in one process: the YOLO-style net
        1.8-2.2% faster, MobileNetV3 level (-0.5 to +0.8%; 1.7-2.7% faster in processes
        alternating with the code before)."""
        return not self.convolution_network and not self.blas_network and any(
            m >= BLAS_SPIN_MACS and self.analysis.nodes[lid].layer.op_type in CONVOLUTION_TYPES
            for lid, m in self._layer_macs.items())

    # ------------------------------------------------------------ running
    def run(self, feeds: dict[str, np.ndarray], watchers: tuple = (), scope: Scope = TOP) -> list[np.ndarray]:
        """Run every step.  `watchers` (see irrun/watch.py) see each layer's outputs as its step
        ends; `scope` is where a body's keys live."""
        slots = self._initial.copy()
        for pid, s in self.parameter_slots.items():
            slots[s] = feeds[pid]
        quiet = float_errors.ignore()
        try:
            # (a paired run sets its own threads: none of the pool's, BLAS on one; a plan found not
            # to pair, `_pair` False, asks no more)
            if watchers or self._pair is False or not self._run_paired(slots):
                if self._pair:
                    self._pair.sleep()      # (not spinning beside this run)
                with self._threads_mode():
                    if watchers:
                        variant = self.variant_for(watchers)
                        self._run_checked(slots, variant, Watching(self, variant, watchers, scope, slots))
                    else:       # (the fast loop, written out once the plan has run a while)
                        (self._written_out or self._run_loop)(slots)
        finally:
            float_errors.restore(quiet)
        if watchers:
            return [slots[s] for s in self.result_slots]
        return self._results_of(slots)

    @cached_property
    def _threads_mode(self) -> Callable:
        """The block a one-process run goes in: how its kernels share the cores (irrun/threads.py)."""
        return (threads.network_parts if self.convolution_network else
                threads.parts_off if self.blas_network else
                threads.elementwise_whole if self.convolutions_wake_blas else _no_change)

    @cached_property
    def _results_of(self) -> Callable[[list], list]:
        """The run's outputs from its slots (an itemgetter: a list comprehension took 0.2 us)."""
        results = self._program_results
        if not results:
            return lambda slots: []
        get = itemgetter(*results)
        return (lambda slots: [get(slots)]) if len(results) == 1 else (lambda slots: list(get(slots)))

    def compile_program(self) -> Callable[[list], None]:
        """The fast loop for `_program` as it is now written out as code (irrun/fast_loop.py; done
        by `_run_loop` after `fast_loop.WRITE_OUT_AFTER` runs; benchmarks/measure.py swaps the
        kernels and calls it)."""
        self._written_out = straight_line(self._program, [step.inputs for step in self._program_steps],
                                          self._failed_at)
        return self._written_out

    def _run_loop(self, slots: list) -> None:
        """The fast loop: kernels are bound, nothing is looked up; sizes were checked at load, or
        are checked by the kernels of the steps that need it (`shape_check.checked`).  Once the
        plan has run a number of times, the same steps written out as code (irrun/fast_loop.py),
        which `run` then calls instead."""
        if self._loop_runs >= fast_loop.WRITE_OUT_AFTER and len(self._program) <= fast_loop.WRITE_OUT_MOST_STEPS:
            self.compile_program()(slots)
            return
        self._loop_runs += 1
        k = 0
        try:
            for k, (kernel, gather, spread, single, outs, free) in enumerate(self._program):
                args = gather(slots)
                out = kernel(*args) if spread else kernel(args)
                if single is not None:
                    slots[single] = out[0] if type(out) is tuple else out
                else:
                    for s, v in zip(outs, out if type(out) is tuple else (out,)):
                        slots[s] = v
                for s in free:
                    slots[s] = None
        except Exception as exc:  # noqa: BLE001 - any kernel failure is reported at its layer
            raise self._failed_at(k, exc, slots) from None

    def _run_paired(self, slots: list) -> bool:
        """The run in two processes (irrun/process_pair.py), once the plan has run
        PAIR_AFTER_RUNS times in one; False where it runs in one process."""
        pair = self._pair
        if pair is None:
            self._pair_countdown -= 1
            if self._pair_countdown > 0:
                return False
            pair = self._pair = process_pair.pair_for(self) or False
        if not pair:
            return False
        if pair.run(slots):
            return True
        if pair.dead:
            pair.close()
            self._pair = False
        return False

    def _failed_at(self, k: int, exc: Exception, slots: list) -> IrrunError:
        step = self._program_steps[k]
        return self._located(step.node, exc, tuple(slots[s] for s in step.inputs))

    def _run_checked(self, slots: list, variant: Variant, watching: Watching | None) -> None:
        """Dynamic shapes (sizes checked before each step that was not sized at load) and watchers."""
        steps = variant.steps
        folded = watching.route.folded if watching is not None else ()
        for k, step in enumerate(steps):
            if k in folded:
                watching.folded(k)
            args = [slots[s] for s in step.inputs]
            if step.check is not None:
                step.check(args)        # (watched runs use each step's own kernel)
            if watching is None:
                out = self._run_step(step.node, step.kernel, args)
            else:
                out = watching.step(k, step, args)
            for s, v in zip(step.outputs, out):
                slots[s] = v
            for s in step.free:
                slots[s] = None
        if len(steps) in folded:
            watching.folded(len(steps))

    # ------------------------------------------------------------ watching (irrun/watched_run.py)
    def source_value(self, src: tuple[str, int]):
        """A tensor not computed per call: a constant the plan holds or a value analysis inferred;
        None when neither holds it (a folded tensor the plan dropped once no step needed it)."""
        s = self.slot_of.get(src)
        if s in self.constants:
            value = self.constants[s]
            return value.value() if isinstance(value, Pending) else value   # (a table Gathers read by rows)
        t = self.analysis.type_of(src)
        return None if t is None else t.value

    def route(self, variant: Variant, watchers: tuple) -> Route:
        """Which of `watchers` sees which layer of `variant`, kept per selection (a few at most)."""
        key = tuple(w.selection() for w in watchers)
        found = variant.routes.get(key)
        if found is None:
            if len(variant.routes) > 16:
                variant.routes.clear()
            found = variant.routes[key] = Route(self, variant, watchers)
        return found
