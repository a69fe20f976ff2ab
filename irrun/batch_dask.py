"""`irrun batch --dask ADDRESS`: the samples as tasks on an existing Dask cluster.

Each worker process loads the model once and keeps it (irrun/samples.py:
cached_model); its threads share it (a Model is thread-safe).  The workers find
the model at the caller's path (a shared filesystem), checked by fingerprint
before anything is submitted; with `ship_data` the model's files travel to the
workers that lack them (a worker plugin, so that workers joining later get them
too) and every task carries its sample's arrays instead of a path.

A task returns the sample's outputs or its SampleError, exactly what the local
modes produce; the caller writes the results.  A worker lost mid-batch loses
nothing: the scheduler runs its tasks elsewhere, and a sample whose task killed
`distributed.scheduler.allowed-failures` workers is reported as failed.

Dask's nannies start workers with one BLAS / OpenMP thread each
(`distributed.nanny.pre-spawn-environ`), and irrun's own pool on a worker takes
the same count (unless IRRUN_THREADS is set there): the cluster's threads per
worker are its parallelism.
"""
from __future__ import annotations

import os
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Iterator

from .errors import IrrunError, UsageError

try:
    import distributed
    from distributed.diagnostics.plugin import WorkerPlugin
except ImportError:  # pragma: no cover - the extra is missing; `require()` says what to install
    distributed = None
    WorkerPlugin = object

from .arrays import atomic_write
from .samples import ModelSpec, Sample, SampleError, cached_model, compute, read_sample, write_result
from .threads import set_threads

_SCATTER_BYTES = 1 << 20     # sample data above this goes to the workers by scatter, not in the task
_TASK_SECONDS = 0.25         # what a task should take, once a sample's time is known
_MAX_CHUNK = 256


def require():
    if distributed is None:
        raise UsageError('--dask needs dask.distributed: pip install "irrun[dask]"')
    return distributed


def connect(address: str):
    """A Client of the scheduler at `address` (one line, no traceback, when it cannot be reached)."""
    require()
    try:
        return distributed.Client(address)      # (waits distributed.comm.timeouts.connect)
    except (OSError, TimeoutError, ValueError) as exc:
        raise UsageError(f"cannot connect to the Dask scheduler at {address}: {exc}") from None


# ---------------------------------------------------------------- on the workers

def _shipped_dir(worker_directory: str, fingerprint: str) -> Path:
    return Path(worker_directory) / "irrun-models" / fingerprint


def _shipped_copies(spec: ModelSpec, worker=None) -> list[Path]:
    if worker is None:
        try:
            worker = distributed.get_worker()     # (in a task)
        except ValueError:   # not on a worker
            return []
    return [_shipped_dir(worker.local_directory, spec.fingerprint) / "model.xml"]


class ShippedModel(WorkerPlugin):
    """The model's files, written into each worker's local directory as it starts."""

    def __init__(self, fingerprint: str, xml: bytes, weights: bytes | None):
        self.name = f"irrun-model-{fingerprint}"
        self.fingerprint, self.xml, self.weights = fingerprint, xml, weights

    def setup(self, worker):
        where = _shipped_dir(worker.local_directory, self.fingerprint)
        where.mkdir(parents=True, exist_ok=True)
        for name, data in (("model.xml", self.xml), ("model.bin", self.weights)):
            if data is not None and not (where / name).is_file():
                with atomic_write(where / name) as f:
                    f.write(data)


def _probe(spec: ModelSpec, sample_file: str | None, dask_worker=None) -> str | None:
    """On a worker (through `Client.run`, which passes `dask_worker`): why it could not run
    this batch, or None."""
    import irrun
    try:
        spec.find(_shipped_copies(spec, dask_worker))
    except IrrunError as exc:
        return f"the model {exc.message} (irrun {irrun.__version__})"
    if sample_file is not None and not Path(sample_file).is_file():
        return f"cannot read the sample {sample_file} (no such file)"
    return None


_threads_set = False


def _size_threads() -> None:
    """irrun's threads on a Dask worker: as many as its nanny gave BLAS (OMP_NUM_THREADS, one by
    default), unless IRRUN_THREADS says otherwise; the worker's task threads are its parallelism."""
    global _threads_set
    if not _threads_set:
        if not os.environ.get("IRRUN_THREADS", "").strip():
            try:
                set_threads(max(int(os.environ.get("OMP_NUM_THREADS", "1")), 1))
            except ValueError:
                set_threads(1)
        _threads_set = True


def run_task(spec: ModelSpec, samples: list[Sample], data: list) -> tuple[float, list]:
    """Samples on a worker (`data[i]`, when not None, is sample i's inputs): the seconds they
    took and [(sample id, outputs | SampleError)]."""
    _size_threads()
    model = cached_model(spec, _shipped_copies(spec))
    start = time.perf_counter()
    done = [(s.id, compute(model, s if d is None else Sample(s.id, s.source, data=d))) for s, d in zip(samples, data)]
    return time.perf_counter() - start, done


# ---------------------------------------------------------------- on the caller

def _check_workers(client, spec: ModelSpec, samples: list[Sample], ship_data: bool, here: Path) -> None:
    """Every worker must find the model (and, without ship_data, the first sample) by path;
    with ship_data, the model's files (read from `here`) go to those that do not."""
    first_file = next((s.file for s in samples if s.data is None), None)
    problems = client.run(_probe, spec, None if ship_data else first_file, on_error="return")
    bad = {w: p for w, p in problems.items() if p is not None}
    if bad and ship_data:
        weights = here.with_suffix(".bin")
        client.register_plugin(ShippedModel(spec.fingerprint, here.read_bytes(),
                                            weights.read_bytes() if weights.is_file() else None))
        problems = client.run(_probe, spec, None, on_error="return")
        bad = {w: p for w, p in problems.items() if p is not None}
    if bad:
        worker, problem = next(iter(bad.items()))
        if isinstance(problem, BaseException):
            raise UsageError(f"Dask worker {worker} cannot run irrun: {type(problem).__name__}: {problem} "
                             f'(install irrun[dask] on every worker)')
        hint = "" if ship_data else "; without a shared filesystem, use --ship-data"
        more = f" (and {len(bad) - 1} more worker{'s' if len(bad) > 2 else ''})" if len(bad) > 1 else ""
        raise UsageError(f"Dask worker {worker}: {problem}{more}{hint}")


def results(client, spec: ModelSpec, samples: list[Sample], *, out_dir: str | None, return_outputs: bool,
            ship_data: bool, model_here: str | None = None) -> Iterator[tuple[str, object]]:
    """Yields (sample id, outputs | None | SampleError) as tasks finish; cancels what is left
    when closed early.  `model_here`: where this process reads the model's files to ship them
    (default: `spec.xml`, the path the workers look at first).

    A task costs the cluster a millisecond or more whatever it does, so once the first
    single-sample tasks tell how long a sample takes, tasks carry as many samples as fill
    about _TASK_SECONDS (fewer towards the end, so that the workers finish together).  The
    samples of a task that killed its workers are tried again one per task."""
    require()
    from distributed.scheduler import KilledWorker
    samples = [s if s.data is not None or s.file is None else
               Sample(s.id, s.source, str(Path(s.file).absolute())) for s in samples]
    _check_workers(client, spec, samples, ship_data, Path(model_here or spec.xml))
    threads = sum(client.nthreads().values()) or 1
    window = 2 * threads + 2                 # tasks in flight
    token = uuid.uuid4().hex[:12]
    todo, alone = deque(samples), deque()    # alone: from a task that killed workers
    running: dict[str, tuple] = {}           # future key -> (future, its samples)
    finished = distributed.as_completed()
    per_sample: float | None = None          # seconds, as measured on the workers

    def chunk() -> list[Sample]:
        if alone:
            return [alone.popleft()]
        size = 1 if per_sample is None else int(_TASK_SECONDS / max(per_sample, 1e-6))
        size = max(1, min(size, _MAX_CHUNK, -(-len(todo) // (2 * threads))))
        return [todo.popleft() for _ in range(min(size, len(todo)))]

    def fill():
        """Submit tasks up to the window; yields the failures of samples read here (ship_data)."""
        while len(running) < window and (todo or alone):
            part, data = [], []
            for sample in chunk():
                inputs = sample.data
                if ship_data and inputs is None:
                    try:
                        inputs = read_sample(sample)
                    except IrrunError as exc:
                        yield sample.id, SampleError(sample.id, sample.source, exc.message)
                        continue
                if inputs is not None and _nbytes(inputs) > _SCATTER_BYTES:
                    inputs = client.scatter(inputs, hash=False)
                part.append(Sample(sample.id, sample.source, sample.file))
                data.append(inputs)
            if part:
                future = client.submit(run_task, spec, part, data, key=f"irrun-{token}-{part[0].id}",
                                       pure=False)
                running[future.key] = future, part
                finished.add(future)

    try:
        yield from fill()
        for future in finished:
            _, part = running.pop(future.key)
            try:
                seconds, done = future.result()
            except KilledWorker as exc:
                if len(part) > 1:
                    alone.extend(part)
                    yield from fill()
                    continue
                done = [(part[0].id, SampleError(part[0].id, part[0].source,
                                                 f"its task killed every Dask worker that ran it ({exc})"))]
                seconds = None
            except IrrunError:
                raise
            except Exception as exc:  # noqa: BLE001 - the cluster failed us: one line, not a traceback
                raise IrrunError(f"Dask: {type(exc).__name__}: {exc}") from None
            future.release()
            if seconds is not None:
                measured = seconds / len(part)
                per_sample = measured if per_sample is None else (per_sample + measured) / 2
            by_id = {s.id: s for s in part}
            for sample_id, result in done:
                if isinstance(result, dict) and out_dir is not None:
                    result = write_result(out_dir, by_id[sample_id], result) or (result if return_outputs else None)
                yield sample_id, result
            yield from fill()
    finally:
        if running:        # closed early (fail-fast, an error, an interrupt): nothing left behind
            client.cancel([future for future, _ in running.values()], force=True)


def _nbytes(data) -> int:
    values = data.values() if isinstance(data, dict) else data if isinstance(data, (list, tuple)) else [data]
    return sum(getattr(v, "nbytes", 0) for v in values)
