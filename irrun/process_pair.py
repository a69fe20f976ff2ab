"""Two processes for one network: the large steps of a transformer in halves, the second half in
a forked worker, both halves meeting in memory the two processes share.

Threads of one process take turns at the GIL: on a 2-vCPU VM a part handed to another thread and
back costs 20-70 us of futex wake-ups, so irrun runs the elementwise work of a BLAS network on
one core and leaves the second to OpenBLAS's GEMMs (irrun/threads.py).  Two processes share no
GIL: a worker spinning on a flag in a shared mapping takes its half and hands it back in about
2 us (benchmarks/two_processes.py measures the pieces).

How a run goes (`Pair.run`).  Both processes run the same steps, each on its own copy of every
value, except the *split* steps: a large GEMM and the chain fused to it, attention's products,
softmax, a large layer norm or elementwise chain, each of whose output rows depends only on the
same rows of its data (`_split_step` checks it op by op).  Such a step writes half of its rows
(along the axis before the last that halves most evenly: BERT's heads, a ViT's 197 queries) in
the parent and the other half in the worker, into a buffer in the shared arena both processes
map at the same address; each then waits for the other's half.  A product by a constant weight
of few rows, or whose weight is held [out, in] (a weight-first product: irrun/ops/matrix.py), is
cut along the weight's columns instead, each process reading half of the weight
(`_columns_split`).  The cheap steps between (Transposes, Reshapes, small layer norms, an
embedding Gather) run in both processes, which costs no time: the other would wait anyway.
Each half's arithmetic is a whole step's on fewer rows or columns: the results are the
one-process results up to a GEMM's rounding.

* The worker is forked once the plan has run `PAIR_AFTER_RUNS` times in one process (a single
  `irrun infer` never forks), with BLAS on one thread; the parent holds BLAS to one thread while
  a paired run goes (a worker spinning beside OpenBLAS's own threads made BERT 2-2.6x slower).
* Between runs the worker spins for `SPIN_AFTER_RUN_S`, then sleeps on a pipe until the next
  run wakes it (a wake costs one futex round trip, once a run; a worker woken for each half lost
  the gain: BERT 1.019x).  It exits when the plan is collected, at exit, or when its parent dies.
* A worker that died, or failed on its half, has its halves done by the parent; a dead one is
  not replaced (the plan runs in one process from then on).  A parent's failure reports the
  layer as a one-process run does, and the worker drops that run.
* Only where the halves can pay: Linux on x86-64 (fork; the spin-wait relies on x86's ordering
  of stores), two or more threads (`--threads 1` keeps one process), static shapes, no state
  (ReadValue/Assign) or random layers, a BLAS network (`executor.Plan.blas_network`) whose split
  steps hold most of its multiply-adds.  Convolution networks stay in one process: their
  Winograd layers in halves on two processes took 0.86-1.08 of their time on two threads.
  Watchers (profile, dump, compare) run in one process.  `IRRUN_PROCESSES=1` turns it off.

Memory: each split step's output has its own place in the arena (reused from run to run, not
within one), so the arena holds every split output of an inference at once (`Pair.arena_bytes`:
BERT's 7 MiB, the ViT's 15); the worker shares the parent's pages until it writes them, and
holds alone its copies of the values both compute (5-9 MiB for those networks).
"""
from __future__ import annotations

import mmap
import os
import platform
import select
import signal
import sys
import threading
import warnings
import weakref
from dataclasses import dataclass
from math import prod
from typing import Callable

import numpy as np

from . import threads
from .fast_loop import straight_line

PAIR_AFTER_RUNS = 3
SPIN_AFTER_RUN_S = 0.005
# a split step's estimated work (multiply-adds, or elements x passes) below which it runs whole
# in both processes: a half's hand-off and its slicing cost 3-5 us
MIN_SPLIT_WORK = 1 << 18
MIN_SPLIT_MACS = 1 << 18
# the share of the network's multiply-adds the split steps must hold
MIN_SPLIT_SHARE = 0.8
# Rows of data (all leading axes) up to which a product by a constant weight is cut along the
# weight's columns: each process reads half of the weight (a transformer at sequence 17, batch 2:
# halves of its 34 rows took 0.65-0.7 of the whole product's time, halves of the columns 0.52)
FEW_ROWS = 64
ARENA_MOST_BYTES = 256 << 20
_ALIGN = 4096

# the control block: int64 words, each process's progress on a cache line of its own
_RUN, _PARKED, _STOP, _ABORT, _FAILED = 0, 1, 2, 3, 4
_PROGRESS = (8, 16)          # split steps done: the parent's, the worker's
_CONTROL_WORDS = 32
_POLL = 0x3FFF               # spins between checks for a dead or parked peer

_UNSHAREABLE = frozenset({"ReadValue", "Assign", "RandomUniform", "Multinomial"})
_ROW_WISE = {"Softmax": 4.0, "LogSoftmax": 4.0, "MVN": 4.0}
_ELEMENTWISE_BINARY = frozenset({"Add", "Subtract", "Multiply", "Divide", "Maximum", "Minimum"})
_ELEMENTWISE_UNARY = frozenset({"Relu", "Gelu", "Swish", "Sigmoid", "Tanh", "HSwish", "HSigmoid",
                                "Mish", "Exp", "Erf", "Clamp", "Sqrt", "Abs", "Negative"})


# forks of this process so far in its line: a pair made before a fork (os.fork, multiprocessing)
# belongs to the process that made it, its worker not the child's
_generation = 0


def _forked() -> None:
    global _generation
    _generation += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def wanted() -> bool:
    """Whether paired runs are on for this process (IRRUN_PROCESSES, the platform, the threads)."""
    setting = os.environ.get("IRRUN_PROCESSES", "").strip()
    if setting == "1" or setting.lower() in ("0", "off", "false", "no"):
        return False
    return (sys.platform.startswith("linux") and hasattr(os, "fork")
            and platform.machine().lower() in ("x86_64", "amd64")
            and threads.threads() >= 2 and threads.available_cpus() >= 2)


# ---------------------------------------------------------------- which steps split

@dataclass
class _Split:
    """A step run in halves: `compute(inputs, destination)` on each half's views of them."""

    position: int                   # its entry in the program
    shape: tuple                    # the rows' shape: the output before any trailing Reshape
    final_shape: tuple              # the output's shape
    axis: int                       # the axis cut in two
    sliced: dict                    # step input position -> the axis of it cut alongside
                                    # (its halves: views, of any strides, of each operand and the buffer)
    compute: Callable               # compute(inputs of half h, destination of half h)
    offset: int = 0                 # in the arena
    nbytes: int = 0
    by_columns: bool = False        # its buffer holds the rows' shape column-major (a weight-first GEMM's)


def _rows_axis(shape: tuple) -> int | None:
    """The axis cut in halves: of the axes before the last, the one of size above 1 that halves
    most evenly (the outermost of those that do): a ViT's 3 heads of 197 queries are cut along the
    queries, BERT's 4 heads of 128 along the heads."""
    axes = [a for a, n in enumerate(shape[:-1]) if n > 1] or ([0] if len(shape) == 1 and shape[0] > 1 else [])
    if not axes:
        return None
    return min(axes, key=lambda a: (shape[a] % 2 / shape[a], a))


def _broadcast_axis(side_shape: tuple, shape: tuple, axis: int) -> int | None | bool:
    """Where an operand broadcasting to `shape` is cut alongside `axis`: its axis (cut), None (read
    whole: it does not vary along `axis`), False (it broadcasts otherwise: not splittable)."""
    if len(side_shape) > len(shape):
        return False
    at = axis - (len(shape) - len(side_shape))
    if at < 0 or side_shape[at] == 1:
        return None
    return at if side_shape[at] == shape[axis] else False


def _matmul_slices(op, a_shape: tuple, b_shape: tuple, out_shape: tuple, axis: int, b_constant: bool):
    """{input: axis} for a MatMul whose output is cut along `axis`, or None where rows of output do
    not come from rows of its inputs alone."""
    rank = len(out_shape)
    if len(a_shape) != rank or axis >= rank - 1 or (op.attrs.transpose_a and axis >= rank - 2):
        return None
    sliced = {0: axis}
    if axis < rank - 2 and len(b_shape) == rank and b_shape[axis] != 1:
        if b_constant or b_shape[axis] != out_shape[axis]:
            return None
        sliced[1] = axis
    return sliced


def _matmul_compute(transpose_a: bool, transpose_b: bool) -> Callable:
    """compute(args, out) of a MatMul's rows (or batches): the product written into the arena."""
    matmul = np.matmul

    def compute(args, out):
        a, b = args[0], args[1]
        if transpose_a:
            a = a.swapaxes(-1, -2)
        if transpose_b:
            b = b.swapaxes(-1, -2)
        matmul(a, b, out=out)
    return compute


def _row_wise_compute(plan, step, kind: str) -> Callable | None:
    """compute(args) -> rows (a new array), or compute(args, out) writing them, for a row-wise layer;
    (function, writes) or None."""
    op = step.op
    if kind == "Softmax":
        from .ops.activation import _softmax_into
        axis = op.attrs.axis

        def softmax(args, out):
            _softmax_into(args[0], out, axis % args[0].ndim)
        return softmax, True
    if kind == "MVN" and len(step.inputs) == 2:
        from .ops.normalization import _mvn
        from .ops.reduction import normalized_axes
        axes_value = plan.constants.get(step.inputs[1])
        if axes_value is None:
            return None
        attrs = op.attrs
        variance, eps, inside = attrs.normalize_variance, attrs.eps, attrs.eps_mode == "inside_sqrt"

        def mvn(args):
            x = args[0]
            return _mvn(x, normalized_axes(axes_value, x.ndim, "MVN axis"), variance, eps, inside)
        return mvn, False
    run = op.run
    return (lambda args: run(*args)), False


def _split_step(plan, k: int, step) -> _Split | None:
    """The split form of program entry k, or None where it runs whole in both processes."""
    from .optimize import FusedChain, _chain        # (optimize imports the executor's layer)
    info = plan.step_info(step)
    if len(step.outputs) != 1 or info.outputs[0] is None:
        return None
    op = step.op
    final = op.nodes[-1].types[0] if isinstance(op, FusedChain) else info.outputs[0]
    if final.etype.name != "f32" or final.shape is None or not all(isinstance(n, int) for n in final.shape):
        return None
    shapes = [t.shape if t is not None else None for t in info.inputs]
    if any(s is None or not all(isinstance(n, int) for n in s) for s in shapes):
        return None
    constant = [s in plan.constants for s in step.inputs]
    if isinstance(op, FusedChain):
        return _split_chain(plan, k, step, op, final, info, shapes, constant, _chain)
    kind = step.node.layer.op_type
    shape = tuple(final.shape)
    axis = _rows_axis(shape)
    if axis is None or not _all_f32(info):
        return None
    if kind == "MatMul" and len(step.inputs) == 2:
        sliced = _matmul_slices(op, shapes[0], shapes[1], shape, axis, constant[1])
        if sliced is None or constant[1] or prod(shape) * shapes[0][-2 if op.attrs.transpose_a else -1] < MIN_SPLIT_MACS:
            return None
        return _Split(k, shape, shape, axis, sliced, _matmul_compute(op.attrs.transpose_a, op.attrs.transpose_b))
    sliced = _row_wise_slices(plan, step, kind, shapes, shape, axis)
    if sliced is None or prod(shape) * _ROW_WISE.get(kind, 1.0) < MIN_SPLIT_WORK:
        return None
    found = _row_wise_compute(plan, step, kind)
    if found is None:
        return None
    rows, writes = found
    if writes:
        return _Split(k, shape, shape, axis, sliced, rows)
    copyto = np.copyto

    def compute(args, out):
        copyto(out, rows(args))
    return _Split(k, shape, shape, axis, sliced, compute)


def _all_f32(info) -> bool:
    return all(t is None or t.value is not None or t.etype.name == "f32" for t in info.inputs)


def _row_wise_slices(plan, step, kind: str, shapes: list, shape: tuple, axis: int) -> dict | None:
    """{input: axis} for a layer whose output rows come from the same rows of its data alone."""
    if kind in ("Softmax", "LogSoftmax"):
        along = step.op.attrs.axis
        if (along + len(shape) if along < 0 else along) == axis or tuple(shapes[0]) != shape:
            return None
        return {0: axis}
    if kind == "MVN":
        if tuple(shapes[0]) != shape or len(step.inputs) != 2:
            return None
        axes = plan.constants.get(step.inputs[1])
        if axes is None or any((int(a) + len(shape) if a < 0 else int(a)) == axis for a in np.ravel(axes)):
            return None
        return {0: axis}
    if kind in _ELEMENTWISE_UNARY and len(step.inputs) == 1:
        return {0: axis} if tuple(shapes[0]) == shape else None
    if kind in _ELEMENTWISE_BINARY:
        sliced = {}
        for i, s in enumerate(shapes):
            at = _broadcast_axis(tuple(s), shape, axis)
            if at is False:
                return None
            if at is not None:
                sliced[i] = at
        return sliced or None
    return None


def _sides_sliced(stages, shapes: list, shape: tuple, axis: int) -> dict | None:
    sliced: dict = {}
    for stage in stages:
        if stage.kind == "binary":
            at = _broadcast_axis(tuple(shapes[stage.side]), shape, axis)
            if at is False:
                return None
            if at is not None:
                sliced[stage.side] = at
    return sliced


def _split_chain(plan, k: int, step, op, final, info, shapes: list, constant: list, make_chain) -> _Split | None:
    """A fused step (irrun/optimize.py) in halves: its head (a MatMul, or a row-wise layer such as
    MVN) on the rows, then its chain on them; a trailing Reshape is the arena's view.  A product
    of few rows by a constant weight is cut along the weight's columns instead."""
    stages = list(op.stages)
    while stages and stages[-1].kind == "reshape":
        stages.pop()
    if any(s.kind == "reshape" for s in stages):
        return None
    last = stages[-1].node if stages else op.head_step.node
    shape = tuple(last.types[0].shape)
    if prod(shape) != prod(final.shape) or any(
            s.node.types[0].shape is None or tuple(s.node.types[0].shape) != shape for s in stages):
        return None
    axis = _rows_axis(shape)
    if axis is None or not _all_f32(info) or any(s.kind not in ("unary", "binary", "none") for s in stages):
        return None
    operands = op._operands()
    cost = sum(s.cost for s in stages)
    sides = operands[1:]
    copyto = np.copyto
    final_shape = tuple(final.shape)
    if not op.head:
        data = operands[0]
        sliced = _sides_sliced(stages, shapes, shape, axis)
        if sliced is None or tuple(shapes[data]) != shape or prod(shape) * cost < MIN_SPLIT_WORK:
            return None
        sliced[data] = axis
        chain = make_chain(stages, operands, False, op._fail)

        def compute(args, out):
            chain(args[data], *[args[p] for p in sides], out)
        return _Split(k, shape, final_shape, axis, sliced, compute)
    head = op.head_step
    n_head = len(head.inputs)
    kind = head.node.layer.op_type
    if kind == "MatMul":
        a_shape, b_shape = shapes[0], shapes[1]
        depth = a_shape[-2 if head.op.attrs.transpose_a else -1]
        if prod(shape) * depth < MIN_SPLIT_MACS:
            return None
        if constant[1] and len(b_shape) == 2 and not head.op.attrs.transpose_a and shape[-1] >= 2 \
                and _by_columns(plan.constants[step.inputs[1]], head.op.attrs.transpose_b, prod(shape[:-1])):
            return _columns_split(k, op, stages, operands, shapes, shape, final_shape, make_chain, head, depth)
        head_sliced = _matmul_slices(head.op, a_shape, b_shape, shape, axis, constant[1])
        if head_sliced is None:
            return None
        head_run, head_writes = _matmul_compute(head.op.attrs.transpose_a, head.op.attrs.transpose_b), True
    else:
        head_sliced = _row_wise_slices(plan, head, kind, shapes[:n_head], shape, axis)
        if head_sliced is None or prod(shape) * (_ROW_WISE.get(kind, 1.0) + cost) < MIN_SPLIT_WORK:
            return None
        found = _row_wise_compute(plan, head, kind)
        if found is None:
            return None
        head_run, head_writes = found
    sliced = _sides_sliced(stages, shapes, shape, axis)
    if sliced is None:
        return None
    sliced.update(head_sliced)
    chain = make_chain(stages, operands, head_writes, op._fail) if stages else None

    def compute(args, out):
        if head_writes:
            head_run(args[:n_head], out)
            x = out
        else:
            x = head_run(args[:n_head])
        if chain is not None:
            chain(x, *[args[p] for p in sides], out)
        elif x is not out:
            copyto(out, x)
    return _Split(k, shape, final_shape, axis, sliced, compute)


def _by_columns(weight: np.ndarray, transpose_b: bool, rows: int) -> bool:
    """Whether a product by this constant weight is cut along its columns: few rows, or a weight
    held [out, in] row by row (irrun/optimize.py lays it out so for weight-first products).  Rows
    of x against such a weight read transposed are BLAS's slow case (64 x 256 @ [1024, 256].T:
    227 against 151 us weight first); [in, out] weights of many rows are cut along the rows (all
    of BERT's products by columns made it 1.08x slower, these two ways 0.88-0.91x)."""
    out_in = weight if transpose_b else weight.T
    return rows <= FEW_ROWS or out_in.flags.c_contiguous


def _columns_split(k: int, op, stages, operands, shapes: list, shape: tuple, final_shape: tuple, make_chain,
                   head, depth: int) -> _Split | None:
    """A product by a constant weight cut along the weight's columns, each half weight first
    (out [n, rows] = w [n, in] @ x.T, BLAS writing the arena directly), the buffer column-major
    as irrun/ops/matrix.py's `weight_first` leaves it; the chain then runs in place on it."""
    axis = len(shape) - 1
    sliced = _sides_sliced(stages, shapes, shape, axis)
    if sliced is None or 0 in sliced:
        return None
    transpose_b = head.op.attrs.transpose_b
    sliced[1] = 0 if transpose_b else 1
    chain = make_chain(stages, operands, True, op._fail) if stages else None
    sides, matmul = operands[1:], np.matmul

    def compute(args, out):
        w = args[1]
        matmul(w if transpose_b else w.T, args[0].reshape(-1, depth).T, out=out.reshape(-1, out.shape[-1]).T)
        if chain is not None:
            chain(out, *[args[p] for p in sides], out)
    return _Split(k, shape, final_shape, axis, sliced, compute, by_columns=True)


def _step_macs(plan, step) -> int:
    macs = plan._layer_macs
    members = step.members or (step.node,)
    return sum(macs.get(n.id, 0) for n in members)


def splits_of(plan) -> list[_Split] | None:
    """The plan's split steps, or None where it is better run in one process."""
    steps = plan._program_steps
    if not plan.blas_network or any(step.check is not None for step in steps):
        return None
    for step in steps:
        members = step.members or (step.node,)
        if any(n.layer.op_type in _UNSHAREABLE for n in members):
            return None
    splits = [s for s in (_split_step(plan, k, step) for k, step in enumerate(steps)) if s is not None]
    total = sum(plan._layer_macs.values())
    split_macs = sum(_step_macs(plan, steps[s.position]) for s in splits)
    if not splits or total <= 0 or split_macs < MIN_SPLIT_SHARE * total:
        return None
    return splits


# ---------------------------------------------------------------- the pair

class _Abandon(Exception):
    """The worker drops the run (its parent failed, or it did)."""


class Pair:
    """A plan's worker process and the programs the two processes run (see the module's text)."""

    def __init__(self, plan, splits: list[_Split]):
        self.splits = splits
        steps = plan._program_steps
        offset = _ALIGN
        self.feeds = []
        for s, param in sorted((s, pid) for pid, s in plan.parameter_slots.items()):
            t = plan.analysis.type_of((param, 0))
            if t is None or t.etype.carrier is None or t.shape is None \
                    or not all(isinstance(n, int) for n in t.shape):
                raise ValueError("a feed of no static shape")
            self.feeds.append((s, tuple(t.shape), t.etype.carrier, offset))
            offset += -(-max(prod(t.shape) * np.dtype(t.etype.carrier).itemsize, 1) // _ALIGN) * _ALIGN
        for split in splits:
            split.offset, split.nbytes = offset, prod(split.shape) * 4
            offset += -(-split.nbytes // _ALIGN) * _ALIGN
        self.arena_bytes = offset
        if offset > ARENA_MOST_BYTES:
            raise MemoryError("arena")
        self.arena = mmap.mmap(-1, offset, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
        buffer = np.frombuffer(self.arena, np.uint8)
        self.control = np.frombuffer(self.arena, np.int64, _CONTROL_WORDS, 0)
        self.feed_views = [(s, np.ndarray(shape, dtype, self.arena, off)) for s, shape, dtype, off in self.feeds]
        self.buffer = buffer
        self.run_number = 0
        self.alone = False
        self.lock = threading.Lock()
        initial = plan._initial
        self.initial = initial
        # the two programs: the parent's whole, the worker's up to its last split step and only
        # the steps its split steps need
        parent_program, worker_program = list(plan._program), list(plan._program)
        for j, split in enumerate(splits):
            out = _arena_view(self.arena, split)
            final = out.reshape(split.final_shape)
            if not np.may_share_memory(final, buffer):
                raise ValueError("a split step's output is no view of its buffer")
            halves = _halves(split, out)
            entry = plan._program[split.position]
            parent_program[split.position] = (self._kernel(j, halves, final, 0),) + entry[1:]
            worker_program[split.position] = (self._kernel(j, halves, final, 1),) + entry[1:]
        for k, step in enumerate(steps):
            if step.consumable and k not in {s.position for s in splits}:
                # both processes run it: it must not write over a buffer the other one reads
                kernel = _rebound_without_consuming(plan, step)
                parent_program[k] = (kernel,) + parent_program[k][1:]
                worker_program[k] = (kernel,) + worker_program[k][1:]
        inputs = [step.inputs for step in steps]
        needed = _needed_by(steps, splits)
        self.parent_run = straight_line(parent_program, inputs, plan._failed_at)
        self.worker_run = straight_line([worker_program[k] for k in needed], [inputs[k] for k in needed],
                                        _abandoned)
        self.pid = None
        self.wake = None
        self.dead = False
        self.generation = _generation

    # ------------------------------------------------------------ kernels of split steps
    def _kernel(self, j: int, halves, final, side: int):
        """Split step j's kernel in the parent (side 0) or the worker (1): its half, its mark, the
        other's mark awaited; the other half done here where the worker cannot (the parent's side)."""
        control, mine, theirs = self.control, halves[side], halves[1 - side]
        done_mine, done_other = _PROGRESS[side], _PROGRESS[1 - side]
        count = len(self.splits)
        wait = self._wait_for_worker if side == 0 else self._wait_for_parent

        def kernel(*args):
            mine(args)
            mark = self.run_number * count + j + 1
            control[done_mine] = mark
            if self.alone or (control[done_other] < mark and not wait(mark)):
                theirs(args)
            return final
        return kernel

    def _wait_for_worker(self, mark: int) -> bool:
        """Spin until the worker's half is done; False if it failed on this run or died."""
        control, spins = self.control, 0
        done = _PROGRESS[1]
        while control[done] < mark:
            spins += 1
            if not spins & _POLL:
                if control[_FAILED] == self.run_number or not self._worker_alive():
                    self.alone = True
                    return False
                if control[_PARKED]:
                    self._wake()
        return True

    def _wait_for_parent(self, mark: int) -> bool:
        """(The worker) spin until the parent's half is done; the run dropped if the parent failed."""
        control, spins = self.control, 0
        done = _PROGRESS[0]
        while control[done] < mark:
            spins += 1
            if not spins & _POLL:
                if control[_ABORT] == self.run_number:
                    raise _Abandon
                if os.getppid() != self.parent_pid:
                    os._exit(0)
        return True

    # ------------------------------------------------------------ the worker process
    def start(self) -> bool:
        """Fork the worker (BLAS on one thread there); False where fork failed."""
        read_end, write_end = os.pipe()
        self.parent_pid = os.getpid()
        try:
            with warnings.catch_warnings():
                # (Python 3.12 warns of fork in a process with threads: the worker only runs NumPy
                # and BLAS, whose state forks cleanly: threads.py and OpenBLAS reset theirs)
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
        except OSError:
            os.close(read_end)
            os.close(write_end)
            return False
        if pid == 0:                                    # (the worker: it never returns)
            code = 0
            try:
                os.close(write_end)
                self._serve(read_end)
            except BaseException:                       # noqa: BLE001 - nothing may escape a fork
                code = 1
            finally:
                os._exit(code)
        os.close(read_end)
        self.pid, self.wake = pid, write_end
        self._finalizer = weakref.finalize(self, _stop_worker, self.control, pid, write_end, self.parent_pid)
        return True

    def _serve(self, wake_end: int) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)    # (Ctrl-C is the parent's to handle)
        threads.set_threads(1)
        control, seen = self.control, 0
        from time import perf_counter
        while True:
            start, spins = perf_counter(), 0
            while control[_RUN] == seen and not control[_STOP]:
                spins += 1
                if not spins & 0x3FF and perf_counter() - start > SPIN_AFTER_RUN_S:
                    control[_PARKED] = 1
                    while control[_RUN] == seen and not control[_STOP]:
                        ready, _, _ = select.select([wake_end], [], [], 1.0)
                        if ready and not os.read(wake_end, 4096):
                            return                      # (the parent is gone)
                        if os.getppid() != self.parent_pid:
                            return
                    control[_PARKED] = 0
            if control[_STOP]:
                return
            seen = int(control[_RUN])
            self.run_number = seen
            slots = self.initial.copy()
            for s, view in self.feed_views:
                slots[s] = view
            try:
                self.worker_run(slots)
            except _Abandon:
                pass
            except Exception:                           # noqa: BLE001 - the parent does this half
                control[_FAILED] = seen
            del slots

    def _worker_alive(self) -> bool:
        try:
            return os.waitpid(self.pid, os.WNOHANG) == (0, 0)
        except ChildProcessError:
            return False

    def _wake(self) -> None:
        try:
            os.write(self.wake, b"w")
        except OSError:
            pass

    # ------------------------------------------------------------ a run
    def run(self, slots: list) -> bool:
        """Run the program with the worker; False (nothing run) where this run must go alone: the
        feeds are not the shapes the arena holds, another thread runs the pair, the worker is gone."""
        for s, view in self.feed_views:
            value = slots[s]
            if value.shape != view.shape or value.dtype != view.dtype:
                return False
        if self.generation != _generation:
            self.dead = True            # (a forked copy of the process that made the pair)
            return False
        if threads.threads() < 2 or not self.lock.acquire(blocking=False):
            return False
        try:
            if self.alone and not self._worker_alive():
                self.dead = True
                return False
            for s, view in self.feed_views:
                np.copyto(view, slots[s])
            self.run_number += 1
            self.alone = False
            control = self.control
            control[_RUN] = self.run_number
            if control[_PARKED]:
                self._wake()
            try:
                with threads.single_threaded_blas():
                    self.parent_run(slots)
            except BaseException:
                control[_ABORT] = self.run_number
                raise
            # (a result lying in the arena is a view of the mapping: model.py's `_own` copies it)
            return True
        finally:
            self.lock.release()

    def close(self) -> None:
        if self.pid is not None:
            self._finalizer()


def _arena_view(arena, split: _Split) -> np.ndarray:
    """The split step's buffer in the arena, in its rows' shape."""
    if not split.by_columns:
        return np.ndarray(split.shape, np.float32, arena, split.offset)
    columns = split.shape[-1]
    return np.ndarray((columns, split.nbytes // 4 // columns), np.float32, arena, split.offset).T.reshape(split.shape)


def _halves(split: _Split, out: np.ndarray) -> tuple[Callable, Callable]:
    """(first half, second half): each computes its rows of the split step into `out`."""
    n = split.shape[split.axis]
    middle = n // 2
    compute, sliced = split.compute, sorted(split.sliced.items())

    def half(start: int, stop: int) -> Callable:
        cut = (slice(None),) * split.axis + (slice(start, stop),)
        destination = out[cut]
        if split.by_columns and not np.may_share_memory(destination.reshape(-1, destination.shape[-1]), out):
            raise ValueError("a half's columns are no view of the buffer")     # (BLAS would write a copy)
        cuts = [(i, (slice(None),) * axis + (slice(start, stop),)) for i, axis in sliced]

        def run(args):
            args = list(args)
            for i, c in cuts:
                args[i] = args[i][c]
            compute(args, destination)
        return run
    return half(0, middle), half(middle, n)


def _rebound_without_consuming(plan, step):
    """The step's kernel bound as if no input died there (both processes run it on the same
    arena buffers: neither may write over them)."""
    from dataclasses import replace
    bind = getattr(step.op, "bind", None)
    if bind is None:
        return step.kernel
    info = replace(plan.step_info(step), consumable=frozenset(), used=step.used or (True,) * len(step.outputs))
    return bind(info) or step.op.run


def _needed_by(steps: list, splits: list[_Split]) -> list[int]:
    """The program entries the worker runs: those its split steps' inputs come from."""
    last = splits[-1].position
    positions = {s.position for s in splits}
    needed_slots: set[int] = set()
    keep = []
    for k in range(last, -1, -1):
        step = steps[k]
        if k in positions or any(s in needed_slots for s in step.outputs):
            keep.append(k)
            needed_slots.update(step.inputs)
    return keep[::-1]


def _abandoned(k: int, exc: BaseException, slots: list) -> BaseException:
    return exc


def _stop_worker(control: np.ndarray, pid: int, wake: int, parent: int) -> None:
    """Ask the worker to exit (it reads the flag while spinning, and wakes on the pipe), and reap it
    (only in the process that forked it: a forked copy of that process leaves it be)."""
    if os.getpid() != parent:
        return
    try:
        control[_STOP] = 1
        os.write(wake, b"s")
    except (OSError, ValueError):
        pass
    try:
        os.close(wake)
    except OSError:
        pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def pair_for(plan) -> Pair | None:
    """A started pair for the plan, or None where it runs in one process."""
    if not wanted():
        return None
    splits = splits_of(plan)
    if splits is None:
        return None
    try:
        pair = Pair(plan, splits)
    except (MemoryError, ValueError):
        return None
    return pair if pair.start() else None
