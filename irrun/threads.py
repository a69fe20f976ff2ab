"""The process's one thread pool, and how kernels split their work over it.

NumPy releases the GIL inside its loops (ufuncs, copies, casts, reductions), so
a large elementwise op cut into one part per core runs on every core.  BLAS has
threads of its own; the two must not fight:

* a kernel that is one big GEMM leaves it to BLAS, which uses `threads()` cores;
* a kernel that runs its parts on this pool (each part may call BLAS) runs them
  inside `single_threaded_blas()`: OpenBLAS's threads would otherwise wait for
  each other's cores, and its calls from several threads at once take a lock;
* a convolution network runs whole inside `single_threaded_blas()` (see
  `executor.Plan.convolution_network`): OpenBLAS keeps its threads spinning for
  about 0.1 s after each multi-threaded call, on the cores the pool's parts then
  want (a convolution's blocks right after a two-thread GEMM took 1.5x their
  time).  While `pool_owns_cores()`, kernels cut even single GEMMs into parts
  (`matmul`);
* a network whose GEMMs keep BLAS's threads runs with no parts at all
  (`parts_off()`, see `executor.Plan.blas_network`), for the same reason.

How many threads: `IRRUN_THREADS` if set, else the CPUs this process may run on
(its affinity mask, which `taskset`, cgroups and container limits narrow).
`set_threads(n)` (what `irrun.load(..., threads=n)` and `irrun infer --threads N`
call) changes it for the whole process, BLAS included.  A forked child starts a
pool of its own on first use: the parent's threads do not exist there.

Parts run in the pool (one worker thread per extra part); the calling thread
runs the first part itself and waits for the rest.  A part is handed over, and
back, through a lock each (a round trip on a 2-vCPU VM about 30 us bare, 75
through a `concurrent.futures` pool).  Inside `network_parts` (a convolution
network's run) the workers wait for their next part spinning on a spin lock
instead, the GIL released, as OpenBLAS's threads do, and the caller waits for
their results so.  In ResNet-18's layers in parts, 56 us a round trip went in
waiting with the locks: 31 before the worker began its part, 27 after it ended
before the caller went on; spinning, 28 (the end's wait gone; the start still
waits for the GIL, which the caller holds until its own part's first long NumPy
call): ResNet-18 and the detector 3-4% faster, the audio net 7%.  The workers
sleep again when the run ends.  A part of less than `MIN_PART_ELEMENTS`
elements costs more in hand-offs than it saves, so small tensors run whole: two
cores run an add of 256 Ki elements in two parts no faster than one (nor with
spinning hand-offs), which is also why a kernel of many short NumPy calls gains
nothing from parts (its threads would take turns at the GIL, each turn a wake).
(Parts from 256 Ki or 128 Ki elements lost: ResNet-18 22.2 -> 23.2 / 22.9 ms, a
YOLOv5n-style net 13.4 -> 13.9 / 14.3; from 256 Ki with spinning hand-offs, the
convolution networks level.)
"""
from __future__ import annotations

import contextvars
import ctypes
import os
import threading
from math import prod
from typing import Callable, Sequence

import numpy as np

from .errors import UsageError

# Measured on 2 vCPUs (numpy 2.4, AVX-512; median of 200), where a hand-off to the other core costs
# about 70 us: a float32 add in two parts takes 1.36x the time of one part at 256 Ki elements, 1.01x
# at 512 Ki, 0.77x at 1 Mi, 0.57x at 4 Mi; exp 1.62x, 1.28x, 0.81x, 0.61x.  So a part is at least
# 512 Ki elements of add-like work (at 256 Ki, ResNet-18's and the CRNN's pools ran slower in parts).
MIN_PART_ELEMENTS = 1 << 19

_lock = threading.Lock()
_threads: int | None = None        # the count in force (None: not decided yet)
_blas_limiter = None               # threadpoolctl's controller, once looked up (False: none found)
# whether there is one, once looked up (a plain bool: the controller's truth is its __len__, 0.05 us a
# test, three a convolution network's run)
_blas_found: bool | None = None


class _PartState(threading.local):
    """A thread's state: whether it runs a part (nested splits run whole) or keeps elementwise
    kernels whole.  (Defaults on the class: getattr with a default on a plain threading.local took
    0.33 us where the attribute was missing, most calls, against 0.05.)"""
    active = False
    elementwise_whole = False


_in_part = _PartState()


def available_cpus() -> int:
    """CPUs this process may run on (the affinity mask), at least 1."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def default_threads() -> int:
    """`IRRUN_THREADS` when set (a positive integer), else `available_cpus()`."""
    text = os.environ.get("IRRUN_THREADS", "").strip()
    if text:
        try:
            n = int(text)
        except ValueError:
            raise UsageError(f"IRRUN_THREADS={text!r} is not a number of threads (a positive integer)") from None
        return check_count(n, "IRRUN_THREADS")
    return available_cpus()


def check_count(n, what: str = "threads") -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise UsageError(f"{what} must be a positive integer, got {n!r}")
    return int(n)


def threads() -> int:
    """The number of threads kernels use (decided on first use)."""
    if _threads is None:
        set_threads(None)
    return _threads


def set_threads(n: int | None) -> int:
    """Use `n` threads from now on (None: `default_threads()`), for irrun's parts and for BLAS."""
    global _threads
    count = default_threads() if n is None else check_count(n)
    libs = _blas_libs()
    with _lock:
        changed = count != _threads
        _threads = count
        if changed and _single_blas_blocks:
            # BLAS stays on one thread while a block holds it (a convolution network's run, whose
            # parts call it side by side: set now, their GEMMs would all queue for BLAS's own
            # threads), and gets the new count when the last block ends, not the one from before
            for lib in libs:
                lib.before = count
            changed = False
    if changed:
        _set_blas_threads(count)
    return count


def _blas_controller():
    global _blas_limiter, _blas_found
    if _blas_limiter is None:
        try:
            from threadpoolctl import ThreadpoolController
            _blas_limiter = ThreadpoolController()
        except Exception:  # noqa: BLE001 - without threadpoolctl BLAS keeps its own count
            _blas_limiter = False
        _blas_found = bool(_blas_limiter)
    return _blas_limiter or None


_blas_libraries = None             # a _BlasLibrary per BLAS library loaded, once looked up


class _BlasLibrary:
    """A BLAS library's thread count, read and set by the library's own functions where
    threadpoolctl has found them (OpenBLAS on its own threads), called holding the GIL: 0.08 and
    0.19 us a call, against 0.33 and 0.46 through its controller, whose setter also does nothing
    at all in any Python thread but the one that first set the count.  Other libraries: through
    the controller."""

    def __init__(self, controller):
        get = put = swap = None
        if controller.internal_api == "openblas" and getattr(controller, "threading_layer", None) == "pthreads":
            find = getattr(controller, "_get_symbol", None)
            if find is not None:
                get, put = find("openblas_get_num_threads"), find("openblas_set_num_threads")
                # (OpenBLAS >= 0.3.27: sets the count and returns the one before, one call where
                # two took 0.12 us more; scipy-openblas exports it without its prefix)
                swap = find("openblas_set_num_threads_local") or \
                    getattr(getattr(controller, "dynlib", None), "openblas_set_num_threads_local", None)
                get, put, swap = (_holding_the_gil(fn) for fn in (get, put, swap))
        if get is None or put is None:
            get, put = (lambda: controller.num_threads), controller.set_num_threads
        self.get, self.set = get, put
        self.swap = swap if swap is not None and _sets_every_thread(swap, get, put) else self._get_and_set
        self.before = 1     # (its count before `single_threaded_blas` set it to one, while it is)

    def _get_and_set(self, n: int) -> int:
        count = self.get()
        if count != n:
            self.set(n)
        return count


def _sets_every_thread(swap, get, put) -> bool:
    """Whether `swap` sets the count another thread sees (OpenBLAS's pthreads builds set the
    process's, as `openblas_set_num_threads` does; one that set the caller's alone would leave
    BLAS's threads running beside a network's parts): asked once, from a thread of its own.  Not
    where BLAS is on one thread (a process started so: asking by a second would start a BLAS
    thread it does not want, and holding BLAS to one there reads its count and sets nothing)."""
    before = get()
    if before == 1:
        return False
    if swap(1) != before:
        put(before)
        return False
    seen = []
    reader = threading.Thread(target=lambda: seen.append(get()))
    reader.start()
    reader.join()
    put(before)
    return seen == [1]


def _holding_the_gil(function):
    """A C function of ints found by ctypes, called without letting go of the GIL, for functions
    that only read or write a number: 0.045 us a call less (None stays None)."""
    if function is None:
        return None
    return ctypes.PYFUNCTYPE(ctypes.c_int)(ctypes.cast(function, ctypes.c_void_p).value)


def _blas_libs() -> list[_BlasLibrary]:
    """The BLAS libraries loaded ([] without threadpoolctl), looked up once: `single_threaded_blas`
    runs once per inference of a convolution network, where threadpoolctl's limit() and its
    restore took 6 us (a third of the executor's own time in the audio net's 20 layers)."""
    global _blas_libraries
    if _blas_libraries is None:
        controller = _blas_controller()
        _blas_libraries = [] if controller is None else \
            [_BlasLibrary(lib) for lib in controller.lib_controllers if lib.user_api == "blas"]
    return _blas_libraries


def _set_blas_threads(n: int) -> None:
    for lib in _blas_libs():
        lib.set(n)


def blas_threads() -> int | None:
    """What BLAS uses now (None: unknown, threadpoolctl missing)."""
    counts = [lib.get() for lib in _blas_libs()]
    return max(counts) if counts else None


def blas_kernels() -> tuple[tuple[str, str], ...]:
    """(library, the CPU's kernels it runs) of each BLAS library loaded, as threadpoolctl names
    them (("openblas", "SkylakeX"); "" where it names none); () without threadpoolctl."""
    controller = _blas_controller()
    return () if controller is None else tuple(
        (lib.internal_api, str(getattr(lib, "architecture", None) or ""))
        for lib in controller.lib_controllers if lib.user_api == "blas")


_single_blas_blocks = 0            # callers inside single_threaded_blas (threads sharing a model)


def _hold_blas_to_one() -> None:
    """(with `_lock` held) One more caller inside `single_threaded_blas`: the first sets each
    library to one thread, each remembering its count (`_BlasLibrary.before`)."""
    global _single_blas_blocks
    _single_blas_blocks += 1
    if _single_blas_blocks == 1:
        for lib in _blas_libraries or _blas_libs():
            lib.before = lib.swap(1)


def _release_blas() -> None:
    """(with `_lock` held) One caller fewer: the last gives each library its count back."""
    global _single_blas_blocks
    _single_blas_blocks -= 1
    if _single_blas_blocks == 0:
        for lib in _blas_libraries:
            if lib.before != 1:
                lib.set(lib.before)


class _SingleThreadedBlas:
    """The context manager `single_threaded_blas` returns (one object: its state is the module's).
    A class rather than a generator, the libraries' own functions, and no setter called for a
    library already on one thread: entering and leaving 1.1 us, where a generator through
    threadpoolctl took 3.2, a tenth of the audio net's executor time (the lock's acquire and
    release called rather than `with _lock`: 1.3 us that way)."""

    def __enter__(self):
        if not _blas_found and _blas_controller() is None:   # (BLAS keeps its threads: GEMMs stay whole)
            return
        _lock.acquire()     # (0.08 us, where `with _lock` takes 0.15)
        try:
            _hold_blas_to_one()
        finally:
            _lock.release()

    def __exit__(self, kind, exc, trace):
        if not _blas_found:
            return
        _lock.acquire()
        try:
            _release_blas()
        finally:
            _lock.release()


_SINGLE_THREADED_BLAS = _SingleThreadedBlas()


def single_threaded_blas() -> _SingleThreadedBlas:
    """BLAS on one thread for the block (parts on the pool call it side by side).

    BLAS's thread count is the process's: blocks of several threads overlap, so the first to
    enter limits it and the last to leave restores it (nested limiters would restore out of
    order and leave BLAS on one thread for good)."""
    return _SINGLE_THREADED_BLAS


_spinning_runs = 0                 # `network_parts` blocks in progress (threads sharing models)


class _NetworkParts:
    """A convolution network's run (`executor.Plan.convolution_network`): BLAS on one thread
    (`single_threaded_blas`), and the pool's threads waiting for their next part spinning until
    the last such run ends, then asleep again (`_park_spinning_workers`).  (A class: see
    `parts_off`.  Both ways in one hold of `_lock`, with no call through `single_threaded_blas`:
    entering and leaving 0.9-1.2 us, where the two blocks nested took 2.3-2.5, half the audio
    net's executor time.  On the EPYC VM of stop 59 it took 2.45 us, 1.5 since OpenBLAS's count
    is set and the one before read in one call, and the workers parked only where one spins.)"""

    __slots__ = ()

    def __enter__(self):
        global _spinning_runs
        if _blas_found is None:
            _blas_controller()
        _lock.acquire()
        try:
            _spinning_runs += 1
            if _blas_found:
                _hold_blas_to_one()
        finally:
            _lock.release()

    def __exit__(self, *exc):
        global _spinning_runs
        _lock.acquire()
        try:
            _spinning_runs -= 1
            if _spinning_runs == 0:
                # the workers are parked here, or by the caller whose parts hold them now, when it
                # releases them (under `_lock` too: one of the two sees the count at 0; a caller
                # that sets one spinning after this test parks it itself so)
                for worker in _workers:
                    if worker.spinning:
                        if _workers_taken.acquire(blocking=False):
                            try:
                                _park_spinning_workers()
                            finally:
                                _workers_taken.release()
                        break
            if _blas_found:
                _release_blas()
        finally:
            _lock.release()


_NETWORK_PARTS = _NetworkParts()


def network_parts() -> _NetworkParts:
    """The block of a convolution network's run (`_NetworkParts`; one object: its state is the
    module's, and a run makes none)."""
    return _NETWORK_PARTS


def _park_spinning_workers() -> None:
    """(with `_workers_taken` held)"""
    for worker in _workers:
        worker.park()


class parts_off:
    """No parts in this thread for the block: kernels run whole (a network whose GEMMs keep
    OpenBLAS's threads spinning on the cores the parts would want: executor.Plan.blas_network).
    (A class: as a generator, entering and leaving took 0.9 us of each inference.)"""

    __slots__ = ("before",)

    def __enter__(self):
        self.before = in_part()
        _in_part.active = True

    def __exit__(self, *exc):
        _in_part.active = self.before


class elementwise_whole:
    """Elementwise kernels (`in_parts`) run whole in this thread for the block, in one piece (in
    cache-sized blocks on one thread they lost 1-1.5% of MobileNetV3 against the parts); kernels
    that cut GEMMs keep their parts (a network whose convolutions run their GEMMs on OpenBLAS's
    threads, which then spin on the core the parts would want: executor.Plan.convolutions_wake_blas)."""

    __slots__ = ("before",)

    def __enter__(self):
        self.before = _in_part.elementwise_whole
        _in_part.elementwise_whole = True

    def __exit__(self, *exc):
        _in_part.elementwise_whole = self.before


def in_part() -> bool:
    """Whether this thread runs a part now (or is inside `parts_off`): work it splits runs whole."""
    return _in_part.active


def blas_held_to_one() -> bool:
    """Whether BLAS is held to one thread (inside `single_threaded_blas`) while irrun has more."""
    return _single_blas_blocks > 0 and threads() > 1


def pool_owns_cores() -> bool:
    """Whether kernels should cut their GEMMs into parts themselves: BLAS held to one thread (a
    convolution network's whole run is: see `executor.Plan.convolution_network`), and not inside
    a part or `parts_off` (a paired run's: its second core is the worker process's; the YOLO-style
    net's row taps and Winograd blocks went to the pool there, 6.5% of the parent's time handing
    them off and waiting, its helper thread taking the core the worker was on)."""
    return blas_held_to_one() and not _in_part.active


# A GEMM is cut into parts from this many multiply-adds per part: at 50 GMAC/s on one core a
# part is then about 0.15 ms, five times what a hand-off to a spinning worker costs on a VM (the
# audio net's 24 M MAC layers then run in two parts: the net 12% faster, ResNet-18 and the
# detector level; 16 M MACs before the hand-offs spun).
GEMM_MACS_PER_PART = 1 << 23
# ...and a single product (`matmul`: a 1x1 layer, a GEMM of im2col's columns in one block) from
# half as many: each part is one BLAS call, with no copies of its own to hand over.  The
# detector's 1x1 layers of 13-15 M multiply-adds (64 -> 64 and 64 -> 75 channels at 40 x 80)
# went from one core to two: 390 -> 290 and 380 -> 264 us in profiles, the network 0.975,
# 0.985 and 0.990 of its time alternating inference by inference with one part (timed alone,
# in a loop that copied their inputs between calls, they were slower in parts: 343 -> 415 us;
# a network's timing is the one that counts).
PRODUCT_MACS_PER_PART = GEMM_MACS_PER_PART // 2


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """np.matmul(a, b, out); while `pool_owns_cores()`, a large product runs on every core, cut
    along its batch (when both operands have that leading axis), else along the longer of its
    rows and columns, one BLAS call per part (whole inside a part).  Each output element is the
    same dot product."""
    if a.ndim < 2 or b.ndim < 2 or not pool_owns_cores() or in_part():
        return np.matmul(a, b, out=out)
    rows, inner, columns = a.shape[-2], a.shape[-1], b.shape[-1]
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    macs = rows * columns * inner
    for d in batch:
        macs *= d
    parts = min(threads(), macs // PRODUCT_MACS_PER_PART)
    if parts < 2:
        return np.matmul(a, b, out=out)
    if out is None:
        out = np.empty(batch + (rows, columns), np.result_type(a, b))
    if batch and a.ndim == b.ndim and a.shape[0] == b.shape[0] >= parts:
        def part(s, e):
            np.matmul(a[s:e], b[s:e], out=out[s:e])
        run_parts(part, bounds(a.shape[0], parts))
    elif rows >= columns:
        def part(s, e):
            np.matmul(a[..., s:e, :], b, out=out[..., s:e, :])
        run_parts(part, bounds(rows, parts))
    else:
        def part(s, e):
            np.matmul(a, b[..., s:e], out=out[..., s:e])
        run_parts(part, bounds(columns, parts))
    return out


class _SpinSignal:
    """A signal one thread waits for spinning in C, the GIL released, and another posts: glibc's
    pthread spin lock through ctypes (which releases the GIL for a foreign call), taken by the
    waiter and released by the poster; each post is taken by one wait.  While a network runs in
    parts (`network_parts`), the pool's threads wait for their next part so, as OpenBLAS's own
    threads do, and the caller for their results (see the module's docstring)."""

    __slots__ = ("_cell", "_address")

    def __init__(self):
        self._cell = ctypes.c_int()
        self._address = ctypes.addressof(self._cell)
        _spin_init(self._address, 0)
        _spin_lock(self._address)          # taken: nothing posted yet

    def post(self) -> None:
        _spin_unlock(self._address)

    def wait(self) -> None:
        _spin_lock(self._address)


def _spin_functions():
    """(pthread_spin_init, _lock, _unlock) of the C library, or None where it has none."""
    try:
        lib = ctypes.CDLL(None)
        functions = lib.pthread_spin_init, lib.pthread_spin_lock, lib.pthread_spin_unlock
    except (OSError, AttributeError):
        return None
    for function in functions:
        function.restype = ctypes.c_int
        function.argtypes = [ctypes.c_void_p] + ([ctypes.c_int] if function is functions[0] else [])
    return functions


_spin_init, _spin_lock, _spin_unlock = _spin_functions() or (None,) * 3
SPIN_WAITS = _spin_lock is not None and os.environ.get("IRRUN_SPIN", "1") != "0"


class _Worker:
    """A thread of the pool.  A part is handed to it by releasing `_go` and back by releasing
    `_done`: two lock hand-offs, where a `concurrent.futures` pool's future takes a queue, a
    condition and its notification (a round trip across cores of a 2-vCPU VM 30 against 75 us;
    ResNet-18's 19 layers in parts 22.3 -> 21.9 ms, a U-Net 29.9 -> 28.6).  Inside
    `network_parts` both hand-offs spin instead (`_SpinSignal`), until the network's run ends."""

    def __init__(self, index: int):
        self._go = threading.Lock()
        self._go.acquire()
        self._done = threading.Lock()
        self._done.acquire()
        self._spin_go = self._spin_done = None
        if SPIN_WAITS:
            self._spin_go, self._spin_done = _SpinSignal(), _SpinSignal()
        self.spinning = False          # (the caller's side) whether it waits for its next part spinning
        self._job: tuple | None = None
        self._outcome: tuple = (None, None)
        threading.Thread(target=self._serve, name=f"irrun-{index}", daemon=True).start()

    def _serve(self) -> None:
        spin = False
        while True:
            if spin:
                self._spin_go.wait()
            else:
                self._go.acquire()
            job = self._job
            if job is None:            # parked: wait asleep from now on
                spin = False
                self._spin_done.post()
                continue
            context, fn, args, spin = job
            try:
                self._outcome = (context.run(_run_part, fn, *args), None)
            except BaseException as exc:  # noqa: BLE001 - raised in the thread that handed the part over
                self._outcome = (None, exc)
            self._job = None
            if spin:
                self._spin_done.post()
            else:
                self._done.release()

    def start(self, fn, args: tuple, spin: bool = False) -> None:
        """Run fn(*args) in a copy of the caller's context: NumPy's error state (the executor's
        errstate(all="ignore")) is a context variable, which a thread does not inherit.  `spin`:
        hand the part back, and wait for the next, spinning."""
        spin = spin and self._spin_go is not None
        self._job = (contextvars.copy_context(), fn, args, spin)
        if self.spinning:
            self._spin_go.post()
        else:
            self._go.release()
        self.spinning = spin

    def finish(self) -> tuple:
        """(result, exception) of the part handed over, once it has ended."""
        if self.spinning:
            self._spin_done.wait()
        else:
            self._done.acquire()
        return self._outcome

    def park(self) -> None:
        """Have the thread wait for its next part asleep, once it has taken that in."""
        if self.spinning:
            self._job = None
            self._spin_go.post()
            self._spin_done.wait()
            self.spinning = False


_workers: list[_Worker] = []
_workers_taken = threading.Lock()   # held by the one caller whose parts the workers run


def _forget_pool() -> None:
    """In a forked child: the parent's workers have no threads here and would never run a part."""
    global _lock, _single_blas_blocks, _workers, _workers_taken, _spinning_runs
    _lock = threading.Lock()
    _workers, _workers_taken = [], threading.Lock()
    _single_blas_blocks = 0
    _spinning_runs = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def parts_for(elements: int, most: int | None = None) -> int:
    """How many parts `elements` of work are worth: one per thread, none under MIN_PART_ELEMENTS."""
    if in_part():
        return 1
    n = min(threads(), elements // MIN_PART_ELEMENTS)
    if most is not None:
        n = min(n, most)
    return max(n, 1)


def bounds(total: int, parts: int) -> list[tuple[int, int]]:
    """`parts` near-equal (start, stop) ranges covering range(total), none empty."""
    parts = max(1, min(parts, total))
    edges = [total * k // parts for k in range(parts + 1)]
    return [(a, b) for a, b in zip(edges, edges[1:]) if b > a]


def balanced_step(total: int, step: int, parts: int) -> int:
    """A block length of at most `step` that cuts `total` into a multiple of `parts` near-equal
    blocks, so that no core waits for another's extra block (112 rows in blocks of 31 made
    62 + 50 rows on two cores; in blocks of 28, 56 + 56)."""
    blocks = -(-total // max(step, 1))
    blocks = -(-blocks // parts) * parts
    return max(1, -(-total // blocks))


def _run_part(fn, *args):
    before = in_part()     # (True already inside `parts_off`)
    _in_part.active = True
    try:
        return fn(*args)
    finally:
        _in_part.active = before


def long_parts(elements: int, per_part: int, most: int) -> int:
    """How many parts work of `elements` is worth at `per_part` elements a part at least: one per
    thread, also inside `parts_off` (parts of milliseconds each lose little to BLAS's threads
    spinning beside them: a 266 M-parameter decoder step's products of int4 weights kept compressed,
    irrun/compressed_products.py, 260-285 -> 152-182 ms).  Inside a part, `run_parts` finds the
    pool taken and runs them one after the other."""
    return max(1, min(threads(), elements // per_part, most))


def _finish(workers: list[_Worker]) -> list[tuple]:
    """Each worker's (result, exception), once all have ended.  Interrupted while waiting (Ctrl-C),
    the pool lets these workers go: a part they still run would hand back to the next caller."""
    try:
        return [worker.finish() for worker in workers]
    except BaseException:
        for worker in _workers:
            worker.park()
        _workers.clear()
        raise


def run_parts(fn: Callable[[int, int], object], ranges: Sequence[tuple[int, int]]) -> list:
    """fn(start, stop) for every range, on the pool (the first in this thread); their results in order.
    An exception in any part is raised here, after every part has finished.  While another thread's
    parts hold the pool (threads sharing a model), this thread runs its parts itself."""
    if len(ranges) <= 1 or not _workers_taken.acquire(blocking=False):
        return [fn(*r) for r in ranges]     # (one range: what it calls may still split its own work)
    try:
        helpers = len(ranges) - 1
        while len(_workers) < helpers:
            _workers.append(_Worker(len(_workers)))
        spin = _spinning_runs > 0
        for worker, r in zip(_workers, ranges[1:]):
            worker.start(fn, r, spin)
        try:
            first = _run_part(fn, *ranges[0])
        finally:
            outcomes = _finish(_workers[:helpers])   # (they write into shared outputs)
        for _, exc in outcomes:
            if exc is not None:
                raise exc
        return [first] + [result for result, _ in outcomes]
    finally:
        if any(worker.spinning for worker in _workers):   # (only this caller changes that now)
            _lock.acquire()
            try:
                if _spinning_runs == 0:
                    _park_spinning_workers()    # (a `network_parts` ended while these parts ran)
            finally:
                _workers_taken.release()
                _lock.release()
        else:
            _workers_taken.release()


def split_axis(shape: Sequence[int], parts: int, whole_axes: Sequence[int] = (),
               order: Sequence[int] | None = None) -> int | None:
    """The leading axis to cut an array of `shape` along: the first (in `order`, the axes from the
    outermost in memory; by default as numbered) with at least `parts` entries (each part then
    covers whole sub-blocks), else the longest; never one of `whole_axes`; None when no axis can
    be cut."""
    sizes = [1 if axis in whole_axes else size for axis, size in enumerate(shape)]
    for axis in range(len(sizes)) if order is None else order:
        if sizes[axis] >= parts:
            return axis
    if not sizes or max(sizes) < 2:
        return None
    return int(np.argmax(sizes))


def memory_order(a: np.ndarray) -> list[int]:
    """a's axes from the outermost in memory to the innermost (a transposed view's are not its
    own order: a part cut along an axis outer in memory is one run of it, not a strided comb)."""
    if a.flags.c_contiguous:
        return list(range(a.ndim))
    return sorted(range(a.ndim), key=lambda axis: -abs(a.strides[axis]) if a.shape[axis] > 1 else 0)


def _slicer(ndim_out: int, axis: int, a: np.ndarray, start: int, stop: int) -> np.ndarray:
    """a's part for output positions [start, stop) along `axis` (a broadcast against the output)."""
    own = axis - (ndim_out - a.ndim)
    if own < 0 or a.shape[own] == 1:
        return a
    index = [slice(None)] * a.ndim
    index[own] = slice(start, stop)
    return a[tuple(index)]


# A kernel that makes several passes over its data (a cost of PASS_BLOCK_MIN_COST adds or more)
# takes each part in blocks of about this many elements, every pass over a block while it is in
# the core's L2 (2 MiB), and its temporaries a block's size: Swish over 96 x 112 x 112 on one core
# 2.3 -> 1.4 ms, a Whisper-style encoder 36.7 -> 31.8 ms on two.  (Blocks of 8-32 Ki elements lost
# on two cores: each block's NumPy calls take turns at the GIL; and a bias and ReLU, two passes,
# lost 2% of the detector's time in blocks.)
PASS_BLOCK_ELEMENTS = 1 << 17
PASS_BLOCK_MIN_COST = 4


def in_parts(fn: Callable, out: np.ndarray, *inputs: np.ndarray, cost: float = 1.0,
             whole_axes: Sequence[int] = ()) -> np.ndarray:
    """fn(*inputs, out), where the inputs broadcast to `out`'s shape and each output position depends
    only on the inputs at that position, save along `whole_axes` (a softmax's axis, MVN's reduced
    axes): in parts along another axis of `out` when it is large enough, and each part in blocks
    of about PASS_BLOCK_ELEMENTS when `cost` says fn makes several passes.  `cost`: work per
    element relative to an add (a chain of transcendental functions pays sooner)."""
    if _in_part.elementwise_whole:
        fn(*inputs, out)
        return out
    parts = parts_for(int(out.size * cost))
    blocked = cost >= PASS_BLOCK_MIN_COST and out.size > parts * PASS_BLOCK_ELEMENTS
    order = memory_order(out)
    axis = split_axis(out.shape, max(parts, 2), whole_axes, order) if parts > 1 or blocked else None
    if axis is None:
        fn(*inputs, out)
        return out
    ndim = out.ndim

    def span(*ranges):
        """fn on the positions that each (axis, start, stop) of `ranges` selects."""
        arrays = inputs + (out,)
        for along, a, b in ranges:
            arrays = tuple(_slicer(ndim, along, x, a, b) for x in arrays)
        fn(*arrays)

    part = lambda a, b: span((axis, a, b))    # noqa: E731
    if blocked:
        part = _in_blocks(span, out.shape, axis, whole_axes, order)
    if parts == 1:
        part(0, out.shape[axis])
    else:
        run_parts(part, bounds(out.shape[axis], parts))
    return out


def _in_blocks(span: Callable, shape: Sequence[int], axis: int, whole_axes: Sequence[int],
               order: Sequence[int]) -> Callable:
    """part(a, b) running `span` over entries [a, b) of `axis` in blocks of about PASS_BLOCK_ELEMENTS
    elements: several entries at a time, or, where one entry is larger, pieces of it along the
    next axis in memory that may be cut."""
    entry = prod(shape) // max(shape[axis], 1)
    if entry <= PASS_BLOCK_ELEMENTS:
        step = max(1, PASS_BLOCK_ELEMENTS // max(entry, 1))

        def part(a, b):
            for first in range(a, b, step):
                span((axis, first, min(first + step, b)))
        return part
    inner = split_axis(shape, 2, tuple(whole_axes) + tuple(order[:order.index(axis) + 1]), order)
    if inner is None:
        return lambda a, b: span((axis, a, b))
    inner_step = max(1, PASS_BLOCK_ELEMENTS * shape[inner] // entry)

    def part(a, b):
        for i in range(a, b):
            for first in range(0, shape[inner], inner_step):
                span((axis, i, i + 1), (inner, first, min(first + inner_step, shape[inner])))
    return part


def worth_parts(elements: int, cost: float = 1.0) -> bool:
    """Whether a kernel of this size could ever run in parts (decided at load, to keep small
    kernels free of the check)."""
    return elements * cost >= 2 * MIN_PART_ELEMENTS


def along_rows(fn: Callable[[int, int], object], rows: int, elements_per_row: int, cost: float = 1.0) -> list:
    """fn(start, stop) over [0, rows) in parts when rows * elements_per_row is worth it."""
    parts = parts_for(int(rows * elements_per_row * cost), most=rows)
    return run_parts(fn, bounds(rows, parts))
