"""Local worker processes for `irrun batch --jobs N`.

Each worker is a fresh Python process (`sys.executable`) that loads the model
once and then runs the samples it is sent, writing each result itself.  It is
started with its BLAS / OpenMP thread counts and IRRUN_THREADS (irrun's own pool,
irrun/threads.py) in its environment, so that they hold before it imports NumPy:
workers x threads stay within the cores this process may use.  The weights are memory-mapped, so the
workers share one copy of the `.bin` in the page cache.

Parent and worker talk over the worker's stdin and stdout (length-prefixed
pickles; the worker points its own `sys.stdout` at stderr).  A worker whose
parent dies sees its stdin end and exits after the sample under way.  A worker
that dies (killed, out of memory) loses no sample: what it had been sent goes
to the others, and a sample running when two workers died is reported as failed.
"""
from __future__ import annotations

import os
import pickle
import queue
import signal
import struct
import subprocess
import sys
import threading
import warnings
from collections import Counter, deque
from pathlib import Path
from typing import Iterator

from .errors import IrrunError, IrrunWarning
from .samples import ModelSpec, Sample, SampleError, compute
from .threads import available_cpus

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
                    "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS", "IRRUN_THREADS")
_WINDOW = 2          # samples sent ahead to a worker: the next is there when one finishes
_DEATHS_PER_SAMPLE = 2
_HEADER = struct.Struct("<Q")
_STOP = object()


def threads_per_worker(jobs: int) -> int:
    """Workers x threads within the CPUs this process may run on (its affinity mask)."""
    return max(available_cpus() // max(jobs, 1), 1)


def _send(stream, message) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)))
    stream.write(data)
    stream.flush()


def _receive(stream):
    """The next message, or _STOP when the stream ended."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return _STOP
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        return _STOP
    return pickle.loads(data)


def worker_main() -> None:
    """The worker process: setup, then samples until its stdin ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)       # Ctrl-C is the parent's to handle
    incoming, outgoing = os.fdopen(os.dup(0), "rb"), os.fdopen(os.dup(1), "wb")
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)                                      # a stray print must not corrupt the channel
    setup = _receive(incoming)
    if setup is _STOP:
        return
    spec, out_dir, return_outputs = setup
    warnings.simplefilter("ignore", IrrunWarning)       # the parent, loading the same model, showed them
    try:
        model = spec.load()
    except IrrunError as exc:
        _send(outgoing, ("fatal", str(exc)))
        return
    except Exception as exc:  # noqa: BLE001 - reported by the parent as one line
        _send(outgoing, ("fatal", f"internal error while loading the model: {type(exc).__name__}: {exc}"))
        return
    _send(outgoing, ("ready", os.getpid()))
    while True:
        sample = _receive(incoming)
        if sample is _STOP:
            return
        result = compute(model, sample, out_dir, return_outputs)
        try:
            _send(outgoing, ("done", sample.id, result))
        except (BrokenPipeError, OSError):
            return


def _how(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class _Worker:
    def __init__(self, events: queue.SimpleQueue, setup, threads: int):
        env = dict(os.environ)
        env.update({name: str(threads) for name in THREAD_VARIABLES})
        root = str(Path(__file__).resolve().parent.parent)     # this irrun, wherever it was imported from
        command = [sys.executable, "-c",
                   f"import sys; sys.path.insert(0, {root!r}); "
                   f"from irrun.batch_workers import worker_main; worker_main()"]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.sent: deque[Sample] = deque()          # in the order the worker runs them
        self.ready = False
        self._events = events
        self._outbox: queue.SimpleQueue = queue.SimpleQueue()
        self._outbox.put(setup)
        threading.Thread(target=self._write, daemon=True, name="irrun-batch-send").start()
        threading.Thread(target=self._read, daemon=True, name="irrun-batch-receive").start()

    def send(self, sample: Sample) -> None:
        self.sent.append(sample)
        self._outbox.put(sample)

    def stop(self) -> None:
        self._outbox.put(_STOP)

    def _write(self) -> None:
        stream = self.process.stdin
        try:
            while (message := self._outbox.get()) is not _STOP:
                _send(stream, message)
        except (BrokenPipeError, OSError):
            pass                    # it died: the reader reports that
        finally:
            try:
                stream.close()
            except OSError:
                pass

    def _read(self) -> None:
        try:
            while (message := _receive(self.process.stdout)) is not _STOP:
                self._events.put((self, message))
        except Exception:  # noqa: BLE001 - a torn message is a dead worker too
            pass
        try:
            self.process.stdout.close()
        except OSError:
            pass
        self._events.put((self, None))


class LocalWorkers:
    """N worker processes; `results(samples)` yields (sample id, outputs | None | SampleError)."""

    def __init__(self, spec: ModelSpec, jobs: int, *, threads: int | None = None, out_dir: str | None = None,
                 return_outputs: bool = True):
        self.jobs = jobs
        self.threads = threads or threads_per_worker(jobs)
        self._setup = (spec, out_dir, return_outputs)
        self._events: queue.SimpleQueue = queue.SimpleQueue()
        self._workers: list[_Worker] = []

    def _start(self) -> _Worker:
        worker = _Worker(self._events, self._setup, self.threads)
        self._workers.append(worker)
        return worker

    def results(self, samples: list[Sample]) -> Iterator[tuple[str, object]]:
        todo = deque(samples)
        deaths: Counter[str] = Counter()
        failed_starts = 0
        for _ in range(min(self.jobs, len(samples))):
            self._start()
        while todo or any(w.sent for w in self._workers):
            for worker in self._workers:
                while todo and len(worker.sent) < _WINDOW:
                    worker.send(todo.popleft())
            worker, message = self._events.get()
            if message is None:                    # its output ended: it exited or died
                how = _how(worker.process.wait())
                self._workers.remove(worker)
                lost = list(worker.sent)
                if not worker.ready:
                    failed_starts += 1
                    if failed_starts >= 2:
                        raise IrrunError(f"the worker processes die while loading the model ({how})")
                elif lost:
                    culprit = lost.pop(0)
                    deaths[culprit.id] += 1
                    if deaths[culprit.id] >= _DEATHS_PER_SAMPLE:
                        yield culprit.id, SampleError(culprit.id, culprit.source,
                                                      f"the worker process running it died twice ({how})")
                    else:
                        lost.insert(0, culprit)
                todo.extendleft(reversed(lost))
                if todo:
                    self._start()
                continue
            kind = message[0]
            if kind == "ready":
                worker.ready = True
                failed_starts = 0
            elif kind == "fatal":
                raise IrrunError(message[1])
            else:
                _, sample_id, result = message
                finished = worker.sent.popleft()
                assert finished.id == sample_id, (finished.id, sample_id)
                yield sample_id, result

    def close(self, abort: bool = False) -> None:
        """Stop the workers: let them finish (they are idle once every result came back), or
        with `abort`, kill them at once (the caller removes the temporary files they leave)."""
        workers, self._workers = self._workers, []
        for w in workers:
            if abort:
                w.process.kill()
            else:
                w.stop()
        for w in workers:
            try:
                w.process.wait(timeout=None if abort else 30)
            except subprocess.TimeoutExpired:
                w.process.kill()
                w.process.wait()
