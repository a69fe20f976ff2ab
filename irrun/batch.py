"""Many samples through one model: `irrun batch` and `irrun.batch.run`.

    for sample_id, result in irrun.batch.run("model.xml", "samples/", "results/", jobs=2):
        ...   # result: the outputs by name, or a SampleError (one line: file and reason)

Three ways to run the same samples, with the same results and the same failures:
in this process (`jobs=1`), in N local worker processes (`jobs=N`, see
irrun/batch_workers.py) or on a Dask cluster (`client=`, see irrun/batch_dask.py).

With `out_dir`, each result is written to `<out_dir>/<sample id>.npz` (keyed by
output name) atomically, so a killed run leaves no half-written result; a rerun
(`resume`, the default) skips the samples whose result is there and not older
than the sample, and `<out_dir>/batch.json` records the model's fingerprint so
that results of two models are never mixed.  Failures are listed in
`<out_dir>/failures.json`.

A stateful model (ReadValue/Assign) starts every sample from its initial state;
a sample whose inputs carry one axis more than the model's runs as a sequence of
calls along that axis (see irrun/samples.py: infer_sample).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Iterator

from .arrays import atomic_write
from .errors import UsageError
from .model import Model
from .samples import (ModelSpec, Sample, SampleError, compute, find_samples, result_is_whole,  # noqa: F401
                      result_path, stacked_samples)
from .threads import available_cpus, set_threads

MANIFEST = "batch.json"
FAILURES = "failures.json"
_LOCK = ".irrun-batch.lock"

__all__ = ["run", "BatchRun", "Sample", "SampleError", "find_samples"]


class _ResultDir:
    """The output directory of one run: locked against a second run, checked against the
    results of another model, cleared of temporary files a killed run left."""

    def __init__(self, path: str | os.PathLike, spec: ModelSpec, overwrite: bool):
        self.path = Path(path)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self._lock = open(self.path / _LOCK, "w")
        except OSError as exc:
            raise UsageError(f"cannot write to the output directory: {exc.strerror or exc}",
                             file=str(self.path)) from None
        try:
            import fcntl
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:      # no advisory locks here (Windows): one run at a time is up to the user
            pass
        except OSError:
            self._lock.close()
            raise UsageError("another irrun batch is writing to this output directory", file=str(self.path)) from None
        self._check_manifest(spec, overwrite)
        self.remove_temporaries()

    def _check_manifest(self, spec: ModelSpec, overwrite: bool) -> None:
        manifest = self.path / MANIFEST
        if not overwrite and manifest.is_file():
            try:
                before = json.loads(manifest.read_text())
            except (OSError, ValueError):
                before = {}
            if before.get("fingerprint") not in (None, spec.fingerprint):
                self.close()
                raise UsageError(f"holds the results of another model ({before.get('model')}); use --overwrite "
                                 f"to replace them, or another output directory", file=str(self.path))
        from . import __version__
        with atomic_write(manifest, "w") as f:
            json.dump({"model": spec.xml, "fingerprint": spec.fingerprint, "irrun": __version__}, f, indent=1)

    def remove_temporaries(self) -> None:
        """What atomic_write leaves when its process is killed (the lock says no other run is
        writing here)."""
        for p in self.path.glob(".*.tmp"):
            try:
                p.unlink()
            except OSError:
                pass

    def finished(self, sample: Sample, since: float | None) -> bool:
        """A whole result, not older than its sample (an edited sample is run again)."""
        path = result_path(self.path, sample.id)
        try:
            made = path.stat().st_mtime
        except OSError:
            return False
        if sample.file is not None:
            try:
                since = os.stat(sample.file).st_mtime
            except OSError:
                return False
        return (since is None or made >= since) and result_is_whole(path)

    def write_failures(self, failures: list[SampleError]) -> None:
        path = self.path / FAILURES
        if failures:
            with atomic_write(path, "w") as f:
                json.dump([e.to_json() for e in failures], f, indent=1)
        elif path.exists():
            path.unlink()          # the failures of an earlier run are done with

    def close(self) -> None:
        if not self._lock.closed:
            self._lock.close()


def _job_count(jobs) -> int:
    if jobs in (None, 0, "auto"):
        return available_cpus()
    try:
        jobs = int(jobs)
    except (TypeError, ValueError):
        raise UsageError(f"jobs must be a number or 'auto', not {jobs!r}") from None
    if jobs < 1:
        raise UsageError(f"jobs must be at least 1, not {jobs}")
    return jobs


class BatchRun:
    """An iterator over `(sample_id, outputs | SampleError)` as samples finish (outputs is None
    when `return_outputs` is False).  Made by `run`; see its docstring."""

    def __init__(self, model, samples, out_dir=None, *, jobs=1, client=None, resume=True, fail_fast=False,
                 stacked=False, ship_data=False, return_outputs=True, threads=None, max_memory=None,
                 precision="f32", strict=False, optimize=None, compressed_weights="auto"):
        self.started = time.monotonic()
        self.model = model if isinstance(model, Model) else \
            Model(model, max_memory=max_memory, precision=precision, strict=strict, optimize=optimize,
                  compressed_weights=compressed_weights)
        self.spec = ModelSpec.of(self.model)
        self.jobs = _job_count(jobs)
        if out_dir is None and not return_outputs:
            raise UsageError("return_outputs=False without out_dir would keep nothing")
        self.ignored: list[str] = []          # arrays of a stacked file that are not model inputs
        since = None
        if stacked:
            if isinstance(samples, (list, tuple)) and len(samples) == 1:
                samples = samples[0]
            if not isinstance(samples, (str, os.PathLike)):
                raise UsageError("stacked samples come from one .npz (or .npy) file; give its path")
            self.samples, self.ignored = stacked_samples(samples, self.model)
            since = os.stat(samples).st_mtime
        else:
            self.samples = find_samples(samples)
        self.total = len(self.samples)
        self.out_dir: _ResultDir | None = None
        if out_dir is not None:
            for s in self.samples:
                if s.file is not None and os.path.abspath(s.file) == os.path.abspath(result_path(out_dir, s.id)):
                    raise UsageError(f"its result would overwrite the sample {s.source}; choose another output "
                                     f"directory", file=str(out_dir))
            self.out_dir = _ResultDir(out_dir, self.spec, overwrite=not resume)
        finished = {s.id for s in self.samples if resume and self.out_dir is not None
                    and self.out_dir.finished(s, since)}
        self.skipped = [s.id for s in self.samples if s.id in finished]
        self.todo = [s for s in self.samples if s.id not in finished]
        self.done = 0
        self.failures: list[SampleError] = []
        self.stopped = False                 # by fail_fast
        self.seconds = 0.0
        self._fail_fast, self._ship_data, self._return_outputs = fail_fast, ship_data, return_outputs
        self._threads, self._client = threads, client
        self._results = self._run()

    def __iter__(self) -> Iterator[tuple[str, object]]:
        return self

    def __next__(self):
        return next(self._results)

    def close(self) -> None:
        """Stop early: workers are stopped, tasks cancelled, the output directory released."""
        self._results.close()
        if self.out_dir is not None:
            self.out_dir.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def summary(self) -> dict:
        return {"total": self.total, "done": self.done, "skipped": len(self.skipped),
                "failed": len(self.failures), "not_run": len(self.todo) - self.done - len(self.failures),
                "seconds": round(self.seconds, 3),
                "out_dir": str(self.out_dir.path) if self.out_dir is not None else None,
                "failures": [e.to_json() for e in self.failures]}

    # ------------------------------------------------------------ the modes
    def _backend(self):
        """(results iterator, close(abort))."""
        out = str(self.out_dir.path) if self.out_dir is not None else None
        if self._client is not None:
            from . import batch_dask
            client = self._client
            if isinstance(client, str):
                client = batch_dask.connect(client)
            results = batch_dask.results(client, self.spec, self.todo, out_dir=out,
                                         return_outputs=self._return_outputs, ship_data=self._ship_data)

            def close(abort):
                results.close()
                if client is not self._client:
                    client.close()
            return results, close
        if self.jobs > 1 and len(self.todo) > 1:
            from .batch_workers import LocalWorkers
            workers = LocalWorkers(self.spec, self.jobs, threads=self._threads, out_dir=out,
                                   return_outputs=self._return_outputs)
            return workers.results(self.todo), workers.close
        if self._threads is not None:
            set_threads(self._threads)       # (process-wide, as irrun.load(threads=) is)
        return ((s.id, compute(self.model, s, out, self._return_outputs)) for s in self.todo), lambda abort: None

    def _run(self):
        clean = False
        close = lambda abort: None  # noqa: E731
        try:
            if self.todo:
                results, close = self._backend()
            else:
                results = iter(())
            for sample_id, result in results:
                if isinstance(result, SampleError):
                    self.failures.append(result)
                else:
                    self.done += 1
                yield sample_id, result
                if self._fail_fast and isinstance(result, SampleError):
                    self.stopped = True
                    break
            else:
                clean = True
        finally:
            self.seconds = time.monotonic() - self.started
            try:
                close(not clean)
            finally:
                if self.out_dir is not None:
                    if not clean:
                        self.out_dir.remove_temporaries()
                    self.out_dir.write_failures(self.failures)
                    self.out_dir.close()


def run(model, samples, out_dir=None, *, jobs=1, client=None, resume=True, fail_fast=False, stacked=False,
        ship_data=False, return_outputs=True, threads=None, max_memory=None, precision="f32",
        strict=False, optimize=None, compressed_weights="auto") -> BatchRun:
    """Run every sample through `model`; iterate the result for `(sample_id, outputs | SampleError)`
    as samples finish (in no particular order).

    model:     a path to model.xml, or a loaded Model (its path and options are used)
    samples:   a directory (its .npy / .npz files), a glob pattern, a file, a list of files,
               or a dict of sample id -> inputs; with `stacked`, one .npz / .npy file whose
               arrays carry a leading sample axis
    out_dir:   write each result to `<out_dir>/<sample id>.npz`, atomically
    jobs:      local worker processes (an int, or "auto": one per available core); each loads
               the model once and runs `threads` kernel threads (default cores // jobs)
    client:    a dask.distributed Client (or a scheduler address): run on that cluster
    resume:    skip samples whose result is already in out_dir (False: recompute them)
    fail_fast: stop at the first failure
    ship_data: with `client`, send the arrays (and the model files, where a worker lacks them)
               instead of paths
    return_outputs: False to yield None for each success (the outputs are in out_dir)
    max_memory, precision, strict, optimize, compressed_weights: as for `irrun.load` (every worker loads
               the model with them; with compressed_weights="auto", each decides for its own memory)

    Raises IrrunError for what stops the whole batch (the model, the output directory, the
    cluster); a bad sample is a SampleError yielded in its place, and the batch goes on.
    """
    return BatchRun(model, samples, out_dir, jobs=jobs, client=client, resume=resume, fail_fast=fail_fast,
                    stacked=stacked, ship_data=ship_data, return_outputs=return_outputs, threads=threads,
                    max_memory=max_memory, precision=precision, strict=strict, optimize=optimize,
                    compressed_weights=compressed_weights)
