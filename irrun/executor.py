"""Running a model: a plan built once at load, then a tight loop per call.

The plan lists the live ops in topological order with their kernels bound and
their inputs and outputs as slot indices.  Everything computable from
constants alone is computed at load (f16 weights decompressed once, static
shape arithmetic).  Each intermediate is dropped after its last consumer.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np

from .analysis import Analysis, Node
from .errors import IrrunError, ModelError, ResourceLimitError
from .registry import Op, TensorType
from .shapes import format_shape, is_static


def physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def default_memory_limit() -> int:
    """Largest single tensor irrun will allocate by default: half of physical memory."""
    return physical_memory() // 2


@dataclass
class Step:
    node: Node
    op: Op
    inputs: list[int]          # slots read
    outputs: list[int]         # slots written
    free: list[int]            # slots whose last reader is this step
    out_nbytes: list[int | None]   # static output sizes (None: known only at run time)


class Plan:
    def __init__(self, analysis: Analysis, result_ids: list[str], parameter_ids: list[str],
                 memory_limit: int | None = None):
        self.analysis = analysis
        self.memory_limit = memory_limit or default_memory_limit()
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
        steps: list[Step] = []
        for lid in analysis.order:
            if lid not in analysis.live or lid in self.parameter_slots:
                continue
            node = nodes[lid]
            types = node.types
            if types and all(t is not None and t.value is not None for t in types) and node.layer.op_type != "Result":
                for i, t in enumerate(types):
                    self.constants[slot((lid, i))] = t.value
                continue
            ins = [slot(src) for src in node.inputs]
            if all(s in self.constants for s in ins) and ins and node.op.foldable:
                values = self._run_step(node, node.op, [self.constants[s] for s in ins])
                for i, v in enumerate(values):
                    self.constants[slot((lid, i))] = v
                continue
            n_out = max(len(node.layer.outputs), 1)
            outs = [slot((lid, i)) for i in range(n_out)]
            sizes = []
            for t in types[:n_out]:
                if t is not None and is_static(t.shape) and t.etype.carrier is not None:
                    sizes.append(int(np.prod(t.shape, dtype=np.int64)) * t.etype.carrier.itemsize)
                else:
                    sizes.append(None)
                    self.dynamic = True
            steps.append(Step(node, node.op, ins, outs, [], sizes))
        self.result_slots = [self.slot_of[(rid, 0)] for rid in result_ids]
        keep = set(self.result_slots) | set(self.constants)
        last_reader: dict[int, int] = {}
        for k, step in enumerate(steps):
            for s in step.inputs:
                last_reader[s] = k
        for s, k in last_reader.items():
            if s not in keep:
                steps[k].free.append(s)
        self.steps = steps
        self.n_slots = len(self.slot_of)
        for step in steps:
            for size in step.out_nbytes:
                if size is not None:
                    self._check_size(step.node, size)

    def _check_size(self, node: Node, nbytes: int, shape=None) -> None:
        if nbytes > self.memory_limit:
            what = f" {format_shape(shape)}" if shape is not None else ""
            raise ResourceLimitError(f"output{what} needs {nbytes / 2**20:.1f} MiB, more than the memory limit "
                                     f"of {self.memory_limit / 2**20:.1f} MiB (raise it with --max-memory)",
                                     layer=node.layer.ref, file=self.analysis.document.diagnostics.file)

    def _run_step(self, node: Node, op: Op, args: list[np.ndarray]) -> tuple:
        try:
            out = op.run(*args)
        except IrrunError as exc:
            if exc.layer is None:
                exc.layer = node.layer.ref
                exc.line = node.layer.line
                exc.file = exc.file or self.analysis.document.diagnostics.file
            raise
        except MemoryError:
            raise ResourceLimitError("ran out of memory", layer=node.layer.ref,
                                     file=self.analysis.document.diagnostics.file) from None
        except Exception as exc:  # noqa: BLE001 - any kernel failure is reported at its layer
            shapes = ", ".join(format_shape(a.shape) for a in args if hasattr(a, "shape"))
            raise ModelError(f"failed on inputs {shapes}: {type(exc).__name__}: {exc}", layer=node.layer.ref,
                             file=self.analysis.document.diagnostics.file) from None
        return out if isinstance(out, tuple) else (out,)

    def _check_runtime_types(self, step: Step, args: list[np.ndarray]) -> None:
        """Dynamic models: re-infer with the actual shapes before allocating."""
        node = step.node
        in_types = [TensorType(tuple(a.shape), t.etype, a if a.size <= 64 else None)
                    for a, t in zip(args, (self.analysis.type_of(src) for src in node.inputs))]
        try:
            types = node.op.infer(in_types)
        except IrrunError as exc:
            raise ModelError(exc.message, layer=node.layer.ref, file=self.analysis.document.diagnostics.file) from None
        for t in types:
            if t is not None and is_static(t.shape) and t.etype.carrier is not None:
                self._check_size(node, int(np.prod(t.shape, dtype=np.int64)) * t.etype.carrier.itemsize, t.shape)

    def run(self, feeds: dict[str, np.ndarray], timings: list | None = None) -> list[np.ndarray]:
        """Run every step; with `timings`, append (layer, seconds) for each step."""
        slots: list = [None] * self.n_slots
        for s, v in self.constants.items():
            slots[s] = v
        for pid, s in self.parameter_slots.items():
            slots[s] = feeds[pid]
        check = self.dynamic
        for step in self.steps:
            args = [slots[s] for s in step.inputs]
            if check and None in step.out_nbytes:
                self._check_runtime_types(step, args)
            if timings is None:
                out = self._run_step(step.node, step.op, args)
            else:
                start = time.perf_counter()
                out = self._run_step(step.node, step.op, args)
                timings.append((step.node.layer, time.perf_counter() - start))
            for s, v in zip(step.outputs, out):
                slots[s] = v
            for s in step.free:
                slots[s] = None
        return [slots[s] for s in self.result_slots]
