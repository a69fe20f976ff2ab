"""The samples of a batch: finding them, reading them, running one, writing its result.

Everything here runs wherever a sample runs (in the calling process, in a local
worker process, on a Dask worker), so a sample gives the same outputs and the
same failure, word for word, in every mode.
"""
from __future__ import annotations

import glob
import os
import threading
import zipfile
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from .arrays import load_array_file, save_npz
from .errors import InputError, IrrunError, ModelError, UsageError
from .fingerprint import fingerprint_files
from .model import Model
from .results import Results

SAMPLE_SUFFIXES = (".npz", ".npy")


@dataclass(frozen=True)
class Sample:
    """One sample: its id (the stem of its result file), where its inputs come from (`file`, an
    array file, or `data`, the inputs themselves) and how messages name it (`source`)."""

    id: str
    source: str
    file: str | None = None
    data: Any = None


class SampleError(IrrunError):
    """One sample could not be run.  `str()` is `<source>: <reason>`, one line."""

    def __init__(self, sample: str, source: str, reason: str):
        super().__init__(reason, file=source)
        self.sample = sample
        self.reason = reason

    def __reduce__(self):
        return SampleError, (self.sample, self.file, self.reason)

    def to_json(self) -> dict:
        return {"sample": self.sample, "source": self.file, "error": self.reason}


# ---------------------------------------------------------------- finding samples

def _check_id(sample_id: str) -> str:
    if not sample_id or sample_id.startswith(".") or any(c in sample_id for c in "/\\\0") \
            or len(sample_id) > 200:
        raise UsageError(f"{sample_id!r} cannot name a result file (<id>.npz): use a plain name, no path "
                         f"separators, not starting with a dot")
    return sample_id


def _expand(text: str) -> list[str]:
    """A directory (its .npy and .npz files), a file, or a glob pattern -> sample files, sorted."""
    path = Path(text)
    if path.is_dir():
        found = sorted(str(p) for p in path.iterdir()
                       if p.suffix in SAMPLE_SUFFIXES and not p.name.startswith(".") and p.is_file())
        if not found:
            raise UsageError(f"{text}: no .npy or .npz files in this directory")
        return found
    if path.is_file():
        return [text]
    if glob.has_magic(text):
        found = sorted(p for p in glob.glob(text, recursive=True) if os.path.isfile(p))
        if not found:
            raise UsageError(f"{text}: the pattern matches no files")
        return found
    raise UsageError(f"{text}: no such file or directory")


def find_samples(inputs: str | os.PathLike | Iterable | Mapping) -> list[Sample]:
    """Samples from a directory, a glob pattern, a file, a list of files (or of `Sample`s), or a
    mapping of sample id -> inputs (a dict by input name, a list, or one array)."""
    if isinstance(inputs, Mapping):
        samples = [Sample(_check_id(str(k)), str(k), data=v) for k, v in inputs.items()]
    else:
        items = _expand(os.fspath(inputs)) if isinstance(inputs, (str, os.PathLike)) else list(inputs)
        samples = []
        for item in items:
            if isinstance(item, Sample):
                samples.append(item)
                continue
            text = os.fspath(item)
            samples.append(Sample(_check_id(Path(text).stem), text, file=text))
    seen: dict[str, Sample] = {}
    for s in samples:
        if s.id in seen:
            raise UsageError(f"{seen[s.id].source} and {s.source} would both write the result {s.id}.npz; "
                             f"rename one")
        seen[s.id] = s
    return samples


def _input_info(model: Model, key):
    """The model input a key of a sample names (None: not an input; infer will say so)."""
    if isinstance(key, int):
        return model.inputs[key] if 0 <= key < len(model.inputs) else None
    return next((i for i in model.inputs if key == i.name or key in i.names), None)


def stacked_samples(path: str | os.PathLike, model: Model) -> tuple[list[Sample], list[str]]:
    """The samples of one array file whose arrays carry a leading sample axis, and the names of
    its arrays that are not inputs of the model (left out).

    An array of the input's rank keeps a sample as a batch of one (the model's own batch axis
    counts the samples); an array with more axes gives each sample its leading slice."""
    text = os.fspath(path)
    loaded = load_array_file(text)
    if not isinstance(loaded, dict) and len(model.inputs) != 1:
        raise UsageError(f"{text}: an .npy holds one array, but the model takes {len(model.inputs)} inputs; "
                         f"stack them in an .npz keyed by input name")
    arrays = loaded if isinstance(loaded, dict) else {model.inputs[0].name: loaded}
    used, ignored = {}, []
    for key, array in arrays.items():
        info = _input_info(model, key)
        if info is None:
            ignored.append(key)
        else:
            used[key] = (array, info)
    if not used:
        names = ", ".join(repr(i.name) for i in model.inputs)
        raise UsageError(f"{text}: none of its arrays is an input of the model (its inputs are {names})")
    counts = {}
    for key, (array, info) in used.items():
        if array.ndim == 0:
            raise UsageError(f"{text}: array {key!r} is a scalar; with --stacked its first axis counts the samples")
        counts[key] = array.shape[0]
    if len(set(counts.values())) > 1:
        raise UsageError(f"{text}: the arrays give different sample counts along their first axis: "
                         + ", ".join(f"{k} {n}" for k, n in counts.items()))
    n = next(iter(counts.values()))
    width = len(str(max(n - 1, 0)))

    def part(array, info, i):
        keeps_axis = info.shape is not None and array.ndim == len(info.shape)
        return array[i:i + 1] if keeps_axis else array[i]

    samples = [Sample(f"{i:0{width}d}", f"{text}[{i}]",
                      data={key: part(array, info, i) for key, (array, info) in used.items()})
               for i in range(n)]
    return samples, [str(k) for k in ignored]


# ---------------------------------------------------------------- running one sample

def read_sample(sample: Sample) -> Any:
    """The sample's inputs: its data, or what its array file holds (never unpickled)."""
    if sample.data is not None:
        return sample.data
    try:
        return load_array_file(sample.file)
    except InputError as exc:
        # Its messages start with the path, which the failure names already.
        prefix = f"{sample.file}: "
        reason = exc.message[len(prefix):] if exc.message.startswith(prefix) else exc.message
        raise InputError(reason) from None


def _steps(model: Model, inputs) -> tuple[int | None, Any]:
    """A stateful model's sample as a sequence: the number of steps (None: a single call) and a
    function giving step t's inputs.  An input with one axis more than the model's is a
    sequence along that axis; one of the model's rank is the same at every step."""
    named = dict(inputs) if isinstance(inputs, Mapping) else \
        dict(enumerate(inputs)) if isinstance(inputs, (list, tuple)) else {0: inputs}
    arrays = {k: np.asarray(v) for k, v in named.items()}
    lengths = {}
    for key, value in arrays.items():
        info = _input_info(model, key)
        if info is not None and info.shape is not None and value.ndim == len(info.shape) + 1:
            lengths[key] = value.shape[0]
    if not lengths:
        return None, None
    if len(set(lengths.values())) > 1:
        raise InputError("the sequence inputs have different lengths: "
                         + ", ".join(f"{k} {n} steps" for k, n in lengths.items()))
    steps = next(iter(lengths.values()))
    if steps == 0:
        raise InputError("the sequence has no steps (its first axis is 0)")

    def step(t):
        at = {k: v[t] if k in lengths else v for k, v in arrays.items()}
        return at if isinstance(inputs, Mapping) else [at[i] for i in range(len(at))] \
            if isinstance(inputs, (list, tuple)) else at[0]
    return steps, step


def infer_sample(model: Model, inputs) -> dict[str, np.ndarray]:
    """Run one sample.  A stateful model (ReadValue/Assign) starts each sample from its initial
    state; a sample whose inputs carry one more axis than the model's runs step by step along
    it, the state carried from step to step, and each output is stacked along a new first axis."""
    if not model.stateful:
        return model.infer(inputs)
    with model.sequence():
        steps, step = _steps(model, inputs)
        if steps is None:
            return model.infer(inputs)
        results = [model.infer(step(t)) for t in range(steps)]
    stacked = Results()
    for name in results[0]:
        shapes = {r[name].shape for r in results}
        if len(shapes) > 1:
            raise ModelError(f"output {name!r} changes shape from step to step ({', '.join(map(str, shapes))}); "
                             f"the steps cannot be stacked into one result")
        stacked[name] = np.stack([r[name] for r in results])
    return stacked


def result_path(out_dir: str | os.PathLike, sample_id: str) -> Path:
    return Path(out_dir) / f"{sample_id}.npz"


def result_is_whole(path: Path) -> bool:
    """Whether a result file is a complete archive (its zip directory, written last, reads)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return bool(archive.namelist())
    except (OSError, zipfile.BadZipFile, ValueError):
        return False


def _reason(exc: IrrunError) -> str:
    return f"{exc.layer.describe()}: {exc.message}" if exc.layer is not None else exc.message


def compute(model: Model, sample: Sample, out_dir: str | None = None, return_outputs: bool = True):
    """Outputs (None when only written), or the SampleError saying why not; never raises for
    a bad sample.  With `out_dir` the result is written there, atomically."""
    try:
        inputs = read_sample(sample)
        if not isinstance(inputs, (Mapping, list, tuple)) and len(model.inputs) != 1:
            names = ", ".join(i.name for i in model.inputs)
            raise InputError(f"holds one array, but the model takes {len(model.inputs)} inputs ({names}); "
                             f"give each sample as an .npz keyed by input name")
        outputs = infer_sample(model, inputs)
    except IrrunError as exc:
        return SampleError(sample.id, sample.source, _reason(exc))
    except MemoryError:
        return SampleError(sample.id, sample.source, "ran out of memory")
    except RecursionError:
        return SampleError(sample.id, sample.source, "nests too deeply to run")
    except Exception as exc:  # noqa: BLE001 - a sample never stops the batch with a traceback
        return SampleError(sample.id, sample.source, f"internal error: {type(exc).__name__}: {exc}")
    if out_dir is not None:
        failure = write_result(out_dir, sample, outputs)
        if failure is not None:
            return failure
    return outputs if return_outputs else None


def write_result(out_dir: str | os.PathLike, sample: Sample, outputs: dict) -> SampleError | None:
    """Atomic, but not fsynced (milliseconds a file, most of a small model's time): a killed
    run leaves each result whole or absent; what a power cut could tear, `result_is_whole`
    catches before a rerun counts it as finished."""
    path = result_path(out_dir, sample.id)
    try:
        save_npz(path, outputs, durable=False)
    except OSError as exc:
        return SampleError(sample.id, sample.source, f"cannot write its result {path}: {exc.strerror or exc}")
    return None


# ---------------------------------------------------------------- one model per process

@dataclass(frozen=True)
class ModelSpec:
    """What a worker needs to load the caller's model: where, with which options, and the
    fingerprint the files it finds must have."""

    xml: str
    fingerprint: str
    options: tuple = ()          # Model.options() as (name, value) pairs

    @classmethod
    def of(cls, model: Model) -> "ModelSpec":
        return cls(str(model._source.xml), model.fingerprint(), tuple(sorted(model.options().items())))

    def find(self, elsewhere: Iterable[Path] = ()) -> Path:
        """The model's .xml on this machine: at its path, or at one of `elsewhere` (a shipped
        copy), whichever has the fingerprint."""
        for place in (Path(self.xml), *elsewhere):
            if place.is_file() and fingerprint_files(place) == self.fingerprint:
                return place
        if Path(self.xml).is_file():
            raise ModelError("differs here from the caller's model (another version of the files)", file=self.xml)
        raise ModelError("cannot be read here (no such file)", file=self.xml)

    def load(self, elsewhere: Iterable[Path] = ()) -> Model:
        model = Model(self.find(elsewhere), **dict(self.options))
        if model.fingerprint() != self.fingerprint:
            raise ModelError("changed while it was being loaded", file=self.xml)
        return model


_models: OrderedDict[ModelSpec, Model] = OrderedDict()
_models_lock = threading.Lock()
_KEEP_MODELS = 2


def cached_model(spec: ModelSpec, elsewhere: Iterable[Path] = ()) -> Model:
    """This process's loaded copy of the model (loaded once, whatever the number of threads
    asking; the last two models are kept)."""
    with _models_lock:
        model = _models.get(spec)
        if model is None:
            model = _models[spec] = spec.load(elsewhere)
            while len(_models) > _KEEP_MODELS:
                _models.popitem(last=False)
        _models.move_to_end(spec)
        return model
