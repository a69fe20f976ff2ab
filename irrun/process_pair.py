"""Two processes for one network: its large steps in halves, the second half in a forked worker,
both halves meeting in memory the two processes share.

Threads of one process take turns at the GIL: on a 2-vCPU VM a part handed to another thread and
back costs 20-70 us of futex wake-ups, so irrun runs the elementwise work of a BLAS network on
one core and leaves the second to OpenBLAS's GEMMs (irrun/threads.py).  Two processes share no
GIL: a worker spinning on a flag in a shared mapping takes its half and hands it back in about
2 us (benchmarks/two_processes.py measures the pieces).

How a run goes (`Pair.run`).  Both processes run the same steps, each on its own copy of every
value, except the *split* steps: a large GEMM and the chain fused to it, attention's products,
softmax, a large layer norm or elementwise chain, each of whose output rows depends only on the
same rows of its data (irrun/split_steps.py checks it op by op).  Such a step writes half of its rows
(along the axis before the last that halves most evenly: BERT's heads, a ViT's 197 queries) in
the parent and the other half in the worker, into a buffer in the shared arena both processes
map at the same address; each then waits for the other's half.  A product by a constant weight
of few rows, or whose weight is held [out, in] (a weight-first product: irrun/ops/matrix.py), is
cut along the weight's columns instead, each process reading half of the weight, and so is one
of many rows by an [in, out] weight of 256 columns or more, into a row-major buffer; a convolution
along its output rows or its output channels, whichever has each half read less of its data and
filter (a Winograd layer along its channels in two phases, each process first transforming its
share of the input channels of every tile into scratch memory in the arena, both waiting for each
other between: irrun/convolution_halves.py's `TwoPhase`); a max pool and the bias and Relu after
it, or a pool alone, along the channels; a Concat
along an axis other than its own; a bidirectional recurrent sequence one direction in each
process (irrun/split_steps.py).  The cheap steps
between (Transposes, Reshapes, small layer norms, an embedding Gather) run in both processes,
which costs no time: the other would wait anyway.
Each half's arithmetic is a whole step's on fewer rows or columns: the results are the
one-process results up to a GEMM's rounding.

The halves are halves only to start with.  Each process times its own halves, run by run; the
parent moves every split step's cut (`SHARES`: from 35% to 65% of its rows, columns or channels
in the parent, to the nearest place the step can be cut; a step that cannot move, left out of the
times) towards the share at which each process takes as long as the other (`Pair._balance`), since the two vCPUs of the VM the benchmarks run on
take turns at being up to 1.5x slower than the other for seconds at a time.  Where the cut of a
GEMM moves, its rounding may move with it: a paired run's last bits can differ from those of the
run before (`IRRUN_PROCESSES=1` keeps every run's bits those of the first).

* The worker is forked once the plan has run `PAIR_AFTER_RUNS` times in one process (a single
  `irrun infer` never forks), with BLAS on one thread; the parent holds BLAS to one thread while
  a paired run goes (a worker spinning beside OpenBLAS's own threads made BERT 2-2.6x slower).
* Between runs the worker spins for `SPIN_AFTER_RUN_S` (not where a run in one process follows:
  `Pair.sleep`), then sleeps on a pipe until the next run wakes it (a wake costs one futex
  round trip, once a run; a worker woken for each half lost the gain: BERT 1.019x).  It exits when the plan is collected, at exit, or when its parent dies.
* A worker that died, or failed on its half, has its halves done by the parent; a dead one is
  not replaced (the plan runs in one process from then on).  A parent's failure reports the
  layer as a one-process run does, and the worker drops that run.
* Only where the halves can pay: Linux on x86-64 (fork; the spin-wait relies on x86's ordering
  of stores), two threads exactly (`--threads 1` keeps one process, and so do three or more: the
  pair would use two cores of them, one process uses every one), static shapes, no state
  (ReadValue/Assign) or random layers, a network of large GEMMs or convolutions (a
  `convolution_network`, a `blas_network`, or one whose `convolutions_wake_blas`:
  irrun/executor.py) whose split steps hold most of its multiply-adds and leave no large GEMM or
  convolution whole (it would run on one core in each process where it had two threads: the
  CRNN's LSTM whole made it 1.09-1.11x slower; a bidirectional one now runs one direction in
  each process).
  Convolution networks pair since stop 55.  In one process their layers run in parts on irrun's
  pool, and each layer's hand-off waits for the GIL: each of the detector's 17 hand-offs a run
  lost 30-60 us before the worker began its part and 8-10 after (1 ms of its 13-15); once a
  Winograd layer's halves kept the whole layer's tile (stop 54), halves in two processes beat
  that (medians of processes alternating with the one-process run: the detector 0.89 of its
  time, ResNet-18 0.965, with f16 weights 0.925, the audio net 0.87; and in the VM's slow
  spells, whose wake-ups slow the pool's hand-offs most, ResNet-18 20.0 against 27.9 ms).
  Before that, with the halves of Winograd layers computed by the direct kernels, ResNet-18
  paired was 1.075x slower.
  Watchers (profile, dump, compare) run in one process.  `IRRUN_PROCESSES=1` turns it off.

A 1x1 convolution that writes channels-last for the depthwise layer reading it (irrun/optimize.py)
has a channels-last buffer, seen channels-first, so that neither half's output nor the depthwise
layer's read transposes it (MobileNetV3 0.913 of its time, EfficientNet-B0 0.911, against
channels-first buffers).

Memory: each split step's output has a place in the arena, taken again by a later split step
once what it held is read no more (`_lay_out_arena`; `Pair.arena_bytes`: BERT's 1.4 MiB, the
YOLO-style net's 6.2); the worker shares the parent's pages until it writes them, and holds
alone its copies of the values both compute (5-13 MiB for the benchmark's networks).
"""
from __future__ import annotations

import mmap
import os
import select
import signal
import threading
import warnings
import weakref
from math import prod
from time import perf_counter
from typing import Callable

import numpy as np

from . import fast_loop, pairing, threads
from .ops.common import channels_first_view
from .fast_loop import straight_line
from .split_steps import Split, splits_of

PAIR_AFTER_RUNS = 3
# The parent's share of each split step at each level of balance (each step cut at the nearest
# place it can be: a Winograd layer at a boundary of its tiles, a grouped one between groups, a
# recurrent sequence's directions only in the middle).  A pair starts in the middle and moves run
# by run to the level at which each process takes as long over its halves as the other
# (`Pair._balance`): the two vCPUs of the VM the benchmarks run on take turns at being 15-25%
# slower for seconds at a time, and halves of one size had the faster process wait for the other
# (the detector's parent 7.4 ms of a 33 ms run, HISTORY, stop 57).
SHARES = (0.35, 0.38, 0.41, 0.44, 0.47, 0.5, 0.53, 0.56, 0.59, 0.62, 0.65)
EVEN = SHARES.index(0.5)
BALANCE_RATE = 0.3          # of the gap between the estimate and a run's measure, taken each run
BALANCE_AFTER_RUNS = 2      # paired runs not counted
SPIN_AFTER_RUN_S = 0.005
ARENA_MOST_BYTES = 256 << 20
_ALIGN = 4096

# the control block: int64 words, each process's progress on a cache line of its own
_RUN, _PARKED, _STOP, _ABORT, _FAILED, _SLEEP, _LEVEL = 0, 1, 2, 3, 4, 5, 6
_PROGRESS = (8, 16)          # split steps done: the parent's, the worker's
_WORKER_BUSY, _WORKER_BUSY_RUN = 17, 18     # (the worker's time in its halves, in ns, and the run's number)
_MIDWAY = (24, 32)           # first phases of two-phase split steps done: the parent's, the worker's
_CONTROL_WORDS = 40
_POLL = 0x3FFF               # spins between checks for a dead or parked peer

# forks of this process so far in its line: a pair made before a fork (os.fork, multiprocessing)
# belongs to the process that made it, its worker not the child's
_generation = 0


def _forked() -> None:
    global _generation
    _generation += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


class _Abandon(Exception):
    """The worker drops the run (its parent failed, or it did)."""


class Pair:
    """A plan's worker process and the programs the two processes run (see the module's text)."""

    def __init__(self, plan, splits: list[Split]):
        self.splits = splits
        steps = plan._program_steps
        offset = _ALIGN
        feeds = []
        for s, param in sorted((s, pid) for pid, s in plan.parameter_slots.items()):
            t = plan.analysis.type_of((param, 0))
            if t is None or t.etype.carrier is None or t.shape is None \
                    or not all(isinstance(n, int) for n in t.shape):
                raise ValueError("a feed of no static shape")
            feeds.append((s, tuple(t.shape), t.etype.carrier, offset))
            offset += -(-max(prod(t.shape) * np.dtype(t.etype.carrier).itemsize, 1) // _ALIGN) * _ALIGN
        offset = _lay_out_arena(plan, splits, offset)
        self.arena_bytes = offset
        if offset > ARENA_MOST_BYTES:
            raise MemoryError("arena")
        self.arena = mmap.mmap(-1, offset, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
        for split in splits:
            two = split.two_phase
            if two is not None:
                two.scratch = np.ndarray(two.shape, two.f.dtype, self.arena, two.offset)
        buffer = np.frombuffer(self.arena, np.uint8)
        self.control = np.frombuffer(self.arena, np.int64, _CONTROL_WORDS, 0)
        self.feed_views = [(s, np.ndarray(shape, dtype, self.arena, off)) for s, shape, dtype, off in feeds]
        self.buffer = buffer
        self.run_number = 0
        self.alone = False
        self.lock = threading.Lock()
        self.initial = plan._initial
        self.result_slots = list(plan._program_results)
        self._plan_program = list(plan._program)
        self._program_steps = steps
        self._failed_at = plan._failed_at
        split_positions = {split.position for split in splits}
        self._unconsuming = {k: _rebound_without_consuming(plan, step) for k, step in enumerate(steps)
                             if step.consumable and k not in split_positions}
        self.busy = [0.0]               # this process's time in its halves that move, this run
        self.level = EVEN
        self.share = SHARES[EVEN]       # the parent's share the balance aims at (`_balance`)
        self._runs: dict[int, tuple] = {}
        self._shares: dict[int, float] = {}
        self._pending: dict[int, tuple] = {}
        self._runs_at(EVEN)             # (made now: a split that cannot be laid out fails here)
        self.pid = None
        self.wake = None
        self.dead = False
        self.generation = _generation

    def _runs_at(self, level: int) -> tuple:
        """(the parent's run, the worker's run) with each split step cut at its place for this
        level of balance, made on first use in each process (both make the same).  The worker's
        failing to make them fails its run (the parent then does its halves, as cut at the level)."""
        runs = self._runs.get(level)
        if runs is None:
            runs = self._runs[level] = self._programs(level)
        return runs

    def _usable_level(self, level: int) -> int:
        """(The parent) `level`, its programs made, or the middle one where its halves cannot be made
        (the level then never taken again: a level is a speed-up, never a reason for a run to fail)."""
        if level not in self._runs:
            try:
                self._runs_at(level)
            except Exception:                           # noqa: BLE001 - the middle level runs instead
                return self._dropped(level)
        return level

    def _dropped(self, level: int) -> int:
        """The middle level, `level` never taken again (its share never the nearest to one)."""
        self._shares[level] = -1.0
        return EVEN

    def _programs(self, level: int) -> tuple:
        """The two programs at this level: the parent's whole, the worker's up to its last split
        step and only the steps its split steps need, each split step's halves cut at its place."""
        splits, steps = self.splits, self._program_steps
        parent_program, worker_program = list(self._plan_program), list(self._plan_program)
        share = 0.0
        for j, split in enumerate(splits):
            out = _arena_view(self.arena, split)
            final = out.reshape(split.final_shape)
            if not np.may_share_memory(final, self.buffer):
                raise ValueError("a split step's output is no view of its buffer")
            middle, halves = _halves(split, out, SHARES[level])
            if split.movable:
                share += split.work * middle / split.shape[split.axis]
            entry = self._plan_program[split.position]
            result = final if split.outputs == 1 else (final,) + (None,) * (split.outputs - 1)
            firsts = None if split.two_phase is None else split.two_phase.firsts(middle)
            parent_program[split.position] = (self._kernel(j, halves, result, 0, firsts),) + entry[1:]
            worker_program[split.position] = (self._kernel(j, halves, result, 1, firsts),) + entry[1:]
        movable = sum(split.work for split in splits if split.movable)
        self._shares[level] = share / movable if movable else 0.5
        for k, kernel in self._unconsuming.items():
            # both processes run it: it must not write over a buffer the other one reads
            parent_program[k] = (kernel,) + parent_program[k][1:]
            worker_program[k] = (kernel,) + worker_program[k][1:]
        inputs = [step.inputs for step in steps]
        needed = _needed_by(steps, splits)
        return (straight_line(parent_program, inputs, self._failed_at),
                straight_line([worker_program[k] for k in needed], [inputs[k] for k in needed], _abandoned))

    # ------------------------------------------------------------ kernels of split steps
    def _kernel(self, j: int, halves, final, side: int, firsts=None):
        """Split step j's kernel in the parent (side 0) or the worker (1): its half, its mark, the
        other's mark awaited; the other half done here where the worker cannot (the parent's side).
        With `firsts` (a two-phase step's first phases: irrun/split_steps.py), its first phase
        before, the other's first phase's mark awaited between (or that phase done here)."""
        control, mine, theirs = self.control, halves[side], halves[1 - side]
        done_mine, done_other = _PROGRESS[side], _PROGRESS[1 - side]
        count = len(self.splits)
        wait = self._wait_for_worker if side == 0 else self._wait_for_parent
        # (a step that cannot move: its time is no measure of the balance)
        busy, clock = self.busy if self.splits[j].movable else [0.0], perf_counter
        if firsts is not None:
            first_mine, first_theirs = firsts[side], firsts[1 - side]
            midway_mine, midway_other = _MIDWAY[side], _MIDWAY[1 - side]

        def stage(own, other, done_mine: int, done_other: int, mark: int, args) -> None:
            """`own` timed, its mark set, the other process's awaited (`other` done here where that
            process cannot)."""
            start = clock()
            own(args)
            busy[0] += clock() - start
            control[done_mine] = mark
            if self.alone or (control[done_other] < mark and not wait(mark, done_other)):
                other(args)

        def kernel(*args):
            mark = self.run_number * count + j + 1
            if firsts is not None:
                stage(first_mine, first_theirs, midway_mine, midway_other, mark, args)
            stage(mine, theirs, done_mine, done_other, mark, args)
            return final
        return kernel

    def _wait_for_worker(self, mark: int, index: int = _PROGRESS[1]) -> bool:
        """Spin until the worker's half is done (or, `index` _MIDWAY's, its first phase); False if
        it failed on this run or died."""
        return _spin_until(self.control, index, mark, self._worker_still_on)

    def _worker_still_on(self) -> bool:
        if self.control[_FAILED] == self.run_number or not self._worker_alive():
            self.alone = True
            return False
        if self.control[_PARKED]:
            self._wake()            # (a wake the worker missed as it went to sleep)
        return True

    def _wait_for_parent(self, mark: int, index: int = _PROGRESS[0]) -> bool:
        """(The worker) spin until the parent's half is done (or its first phase: as
        `_wait_for_worker`); the run dropped if the parent failed."""
        return _spin_until(self.control, index, mark, self._parent_still_on)

    def _parent_still_on(self) -> bool:
        if self.control[_ABORT] == self.run_number:
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
                if not spins & 0x3FF and (control[_SLEEP] or perf_counter() - start > SPIN_AFTER_RUN_S):
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
            busy = self.busy
            busy[0] = 0.0
            try:
                self._runs_at(int(control[_LEVEL]))[1](slots)
                control[_WORKER_BUSY] = int(busy[0] * 1e9)
                control[_WORKER_BUSY_RUN] = seen
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
        feeds are not the shapes the arena holds, the threads are no longer
        `pairing.PAIRED_THREADS`, another thread runs the pair, the worker is gone."""
        for s, view in self.feed_views:
            value = slots[s]
            if value.shape != view.shape or value.dtype != view.dtype:
                return False
        if self.generation != _generation:
            self.dead = True            # (a forked copy of the process that made the pair)
            return False
        if threads.threads() != pairing.PAIRED_THREADS or not self.lock.acquire(blocking=False):
            return False
        try:
            if self.alone and not self._worker_alive():
                self.dead = True
                return False
            for s, view in self.feed_views:
                np.copyto(view, slots[s])
            level = self.level = self._usable_level(self.level)
            parent_run = self._runs[level][0]
            self.run_number += 1
            self.alone = False
            control = self.control
            control[_SLEEP] = 0
            control[_LEVEL] = level
            control[_RUN] = self.run_number
            if control[_PARKED]:
                self._wake()
            self.busy[0] = 0.0
            try:
                # (no parts on irrun's pool either: its threads would take the core the worker has)
                with threads.parts_off(), threads.single_threaded_blas():
                    parent_run(slots)
            except BaseException:
                control[_ABORT] = self.run_number
                raise
            if not self.alone:
                self._balance(level)
            elif level != EVEN:
                # (the worker failed, perhaps at making this level's halves: not taken again)
                self.level = self._dropped(level)
            # A result lying in the arena is copied out while the lock is held: the next paired
            # run, which another thread sharing the model may start as soon as it is released,
            # writes the arena again (four threads sharing a strided convolution got one another's
            # outputs when model.py's `_own` copied them after)
            buffer, may_share = self.buffer, np.may_share_memory
            for s in self.result_slots:
                value = slots[s]
                if isinstance(value, np.ndarray) and may_share(value, buffer):
                    slots[s] = value.copy()
            return True
        finally:
            self.lock.release()

    def _balance(self, level: int) -> None:
        """Move the level of balance for the next runs towards the share of the work that has each
        process as long over its halves as the other: from each process's time in its halves at
        its share, the two processes' speeds (the worker's reported once its run is done, so at
        most a run late; a pair's first runs, slowed by first touches of memory, not counted), their
        estimate smoothed over runs."""
        pending = self._pending
        if self.run_number > BALANCE_AFTER_RUNS:
            pending[self.run_number] = (self.busy[0], self._shares[level])
        reported = int(self.control[_WORKER_BUSY_RUN])
        found = pending.pop(reported, None)
        for run in [run for run in pending if run < reported or run < self.run_number - 2]:
            del pending[run]
        if found is None:
            return
        parent_busy, share = found
        worker_busy = int(self.control[_WORKER_BUSY]) * 1e-9
        if parent_busy <= 0.0 or worker_busy <= 0.0 or not 0.0 < share < 1.0:
            return
        parent_speed, worker_speed = share / parent_busy, (1.0 - share) / worker_busy
        balanced = min(max(parent_speed / (parent_speed + worker_speed), SHARES[0]), SHARES[-1])
        self.share += BALANCE_RATE * (balanced - self.share)
        shares = self._shares
        self.level = min(range(len(SHARES)), key=lambda k: abs(shares.get(k, SHARES[k]) - self.share))

    def sleep(self) -> None:
        """Have the worker sleep now rather than spin out its SPIN_AFTER_RUN_S: a run in one
        process follows (a watched one, as a profile's timed runs are: beside the spinning worker
        the CRNN's stem took 2.53 against 0.55 ms); the next paired run wakes it."""
        self.control[_SLEEP] = 1

    def close(self) -> None:
        if self.pid is not None:
            self._finalizer()


def _spin_until(control: np.ndarray, index: int, mark: int, still_on: Callable[[], bool]) -> bool:
    """Spin until control[index] reaches `mark`, asking `still_on()` every _POLL + 1 spins whether
    to go on waiting; False where it said no."""
    spins = 0
    while control[index] < mark:
        spins += 1
        if not spins & _POLL and not still_on():
            return False
    return True


def _lay_out_arena(plan, splits: list[Split], offset: int) -> int:
    """Give each split step's output a place in the arena from `offset` on; returns the arena's end.

    A place is taken again by a later split step once every reader of what it held (through any
    view of it) has run and a split step's wait lies between: both processes are past those
    readers then (each waits at every split step for the other's half, and runs its steps in
    order).  A Result's place is its own.  (Arenas with places taken again against one place a
    step: the YOLO-style net's 6.2 against 12.3 MiB, EfficientNet-B0's 10.0 against 30.2, BERT's
    1.4 against 7.0, the ViT's 2.5 against 14.2.)"""
    steps = plan._program_steps
    last = plan._last_use(steps)
    _, views = plan._consumable_slots(steps)
    pinned = set(plan.result_slots) | set(plan._program_results)
    positions = [split.position for split in splits]

    def freed_after(slot: int) -> int | None:
        """The position of the first split step at or after the last read of `slot` or its views
        (None: never, in this run)."""
        seen, todo, end = {slot}, [slot], -1
        while todo:
            t = todo.pop()
            if t in pinned:
                return None
            end = max(end, last.get(t, -1))
            for v in views.get(t, ()):
                if v not in seen:
                    seen.add(v)
                    todo.append(v)
        return next((p for p in positions if p >= end), None)

    places: list[list] = []             # [offset, size, freed after (split position) or None]
    for split in splits:
        split.nbytes = prod(split.shape) * 4
        size = -(-split.nbytes // _ALIGN) * _ALIGN
        free = [place for place in places if place[2] is not None and place[2] < split.position
                and place[1] >= size]
        if free:
            place = min(free, key=lambda place: place[1])
        else:
            place = [offset, size, None]
            offset += size
            places.append(place)
        split.offset = place[0]
        place[2] = freed_after(steps[split.position].outputs[0])
    # The scratch of two-phase split steps: one place for all, each step's read by both processes
    # before either passes the step's last wait, so before the next such step writes it
    phased = [split.two_phase for split in splits if split.two_phase is not None]
    if phased:
        for two in phased:
            two.offset = offset
        offset += -(-max(two.nbytes for two in phased) // _ALIGN) * _ALIGN
    return offset


def _arena_view(arena, split: Split) -> np.ndarray:
    """The split step's buffer in the arena, in its rows' shape."""
    if split.channels_last:
        n, c, *spatial = split.shape
        return channels_first_view(np.ndarray((n, *spatial, c), np.float32, arena, split.offset))
    if not split.by_columns:
        return np.ndarray(split.shape, np.float32, arena, split.offset)
    columns = split.shape[-1]
    return np.ndarray((columns, split.nbytes // 4 // columns), np.float32, arena, split.offset).T.reshape(split.shape)


def _halves(split: Split, out: np.ndarray, share: float = 0.5) -> tuple[int, tuple[Callable, Callable]]:
    """(the middle, (first half, second half)): each computes its rows of the split step into
    `out`, the first `share` of them (to the nearest multiple of the split's granule; in the middle
    where the split cannot be cut there), or in its middle for a share of one half."""
    n = split.shape[split.axis]
    middle, computes = n // 2 if split.middle is None else split.middle, split.computes
    if share != 0.5:
        granule = split.granule
        found = split.halves_at(round(share * n / granule) * granule)
        if found is not None:
            middle, computes = found
    sliced = sorted(split.sliced.items())

    def half(start: int, stop: int) -> Callable:
        compute = computes[start > 0] if computes else split.compute
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
    return middle, (half(0, middle), half(middle, n))


def _rebound_without_consuming(plan, step):
    """The step's kernel bound as if no input died there (both processes run it on the same
    arena buffers: neither may write over them)."""
    from dataclasses import replace
    bind = getattr(step.op, "bind", None)
    if bind is None:
        return step.kernel
    info = replace(plan.step_info(step), consumable=frozenset(), used=step.used or (True,) * len(step.outputs))
    return bind(info) or step.op.run


def _needed_by(steps: list, splits: list[Split]) -> list[int]:
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
    """A started pair for the plan, or None where it runs in one process (also a plan of more
    steps than irrun/fast_loop.py writes out: both processes' programs are written out, at once)."""
    if not pairing.paired_processes() or len(plan._program) > fast_loop.WRITE_OUT_MOST_STEPS:
        return None
    splits = splits_of(plan)
    if splits is None:
        return None
    try:
        pair = Pair(plan, splits)
    except (MemoryError, ValueError):
        return None
    return pair if pair.start() else None
