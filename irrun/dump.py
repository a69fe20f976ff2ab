"""`irrun infer --dump PATH`: every layer's output written to disk the moment it is produced.

A dump is a watcher (irrun/watch.py): each tensor is written when its step ends and is then
left to the executor, which frees it after its last reader as in any inference, so a dump
holds no more in memory than a normal run.  `PATH` ending in `.npz` is one uncompressed
archive keyed like `Model.infer(intermediates=True)`, written entry by entry; any other
`PATH` is a directory with one `.npy` per tensor and `index.json` describing each (key,
file, layer, id, type, port, shape, dtype, min, max, mean, NaN and Inf counts).  Either
appears only once complete (written under a temporary name, then renamed): an interrupted
dump leaves nothing half-written behind.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import zipfile
from contextlib import ExitStack
from pathlib import Path
from typing import Mapping

import numpy as np

from .arrays import atomic_write, load_array_file
from .errors import InputError, UsageError
from .summary import tensor_summary
from .watch import Produced, Scope, Watcher

INDEX = "index.json"
_STATS = ("min", "max", "mean", "nan", "inf")      # of irrun/summary.py's tensor_summary, in each index entry


def storable(value: np.ndarray) -> np.ndarray:
    """A tensor as a `.npy` can hold it without pickle (strings as fixed-width unicode)."""
    if value.dtype == object:
        return np.array(value.tolist(), dtype=str).reshape(value.shape)
    return value


def select_layers(model, pattern: str | None) -> frozenset[str] | None:
    """`--dump-filter`: an op type ("Convolution", "Convolution-1") selects the layers of that type,
    anything else is a regular expression searched in the layer names.  None: every layer."""
    if pattern is None:
        return None
    layers = model.layers.values()
    by_type = {l.id for l in layers if pattern in (l.op_type, l.type, l.label)}
    if by_type:
        return frozenset(by_type)
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise UsageError(f"--dump-filter {pattern!r} is neither an op type of the model nor a regular expression "
                         f"({exc})") from None
    found = frozenset(l.id for l in layers if regex.search(l.name))
    if not found:
        types = sorted({l.op_type or l.type for l in layers})
        raise UsageError(f"--dump-filter {pattern!r} matches no layer name and no op type of the model "
                         f"(its types: {', '.join(types)})")
    return found


_CHUNK = 1 << 20


def write_npy(out, value: np.ndarray) -> None:
    """`value` in `.npy` format to the open binary stream `out`, a contiguous array in 1 MiB pieces
    (NumPy's own writer copies up to 16 MiB at a time into a stream that is not a real file)."""
    if not value.flags.c_contiguous or value.dtype.hasobject:
        np.lib.format.write_array(out, value, allow_pickle=False)
        return
    header = np.lib.format.header_data_from_array_1_0(value)
    try:
        np.lib.format.write_array_header_1_0(out, header)
    except ValueError:      # a header too long for format 1.0 (a shape of thousands of dims)
        np.lib.format.write_array_header_2_0(out, header)
    data = memoryview(value.reshape(-1).view(np.uint8))
    for start in range(0, len(data), _CHUNK):
        out.write(data[start:start + _CHUNK])


def _file_name(number: int, key: str) -> str:
    """A file name safe on every file system for any key: a running number keeps them unique."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", key).strip("._")[:80]
    return f"{number:05d}_{safe or 'tensor'}.npy"


class Dump(Watcher):
    """Writes tensors as they are produced; use as a context manager around `Model.infer(watch=[dump])`:
    the dump appears at `path` when the block ends without an error."""

    def __init__(self, path: str | Path, layers: frozenset[str] | None = None, *, constants: bool = False,
                 bodies: bool = False):
        self.path = Path(path)
        self.layers = layers
        self.constants = constants
        self.bodies = bodies
        self.written: list[dict] = []
        self._keys: set[str] = set()
        self._stack: ExitStack | None = None
        self._dir: Path | None = None
        self._check_target()

    # ------------------------------------------------------------ where it goes
    @property
    def archive(self) -> bool:
        return self.path.suffix.lower() == ".npz"

    def _check_target(self) -> None:
        p = self.path
        if not p.parent.is_dir():
            raise UsageError(f"--dump {p}: the directory {p.parent} does not exist")
        if self.archive:
            if p.is_dir():
                raise UsageError(f"--dump {p}: is a directory; a path ending in .npz is written as one archive")
        elif p.exists() and not (p.is_dir() and (not any(p.iterdir()) or (p / INDEX).is_file())):
            raise UsageError(f"--dump {p}: exists and is not an earlier dump (a directory with {INDEX}); "
                             f"choose another path")

    def __enter__(self):
        self._stack = ExitStack()
        if self.archive:
            f = self._stack.enter_context(atomic_write(self.path))
            self._zip = self._stack.enter_context(zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True))
        else:
            self._dir = Path(tempfile.mkdtemp(dir=self.path.parent, prefix=f".{self.path.name}."))
            self._stack.callback(self._discard_directory)
        return self

    def __exit__(self, kind, exc, tb):
        try:
            if kind is None and not self.archive:
                self._finish_directory()
        finally:
            self._stack.__exit__(kind, exc, tb)

    def _discard_directory(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)

    def _finish_directory(self) -> None:
        with atomic_write(self._dir / INDEX, "w") as f:
            json.dump({"tensors": self.written}, f, indent=1)
        old = None
        if self.path.exists():
            old = self.path.with_name(f".{self.path.name}.old-{os.getpid()}")
            os.replace(self.path, old)
        os.replace(self._dir, self.path)
        self._dir = None
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)

    # ------------------------------------------------------------ writing
    def produced(self, event: Produced) -> None:
        layer = event.node.layer
        for port, value in enumerate(event.values):
            if value is None:
                continue
            value = event.value(port)
            key = event.key(port)
            if key in self._keys:       # (two layers of one name: the first keeps the key)
                continue
            self._keys.add(key)
            value = storable(np.asarray(value))
            entry = {"key": key, "layer": layer.name, "id": layer.id, "type": layer.label, "port": port,
                     "shape": list(value.shape), "dtype": str(value.dtype)}
            if self.archive:
                with self._zip.open(f"{key}.npy", "w", force_zip64=True) as out:
                    write_npy(out, value)
            else:
                entry["file"] = _file_name(len(self.written), key)
                with open(self._dir / entry["file"], "wb") as out:
                    write_npy(out, value)
            entry.update({k: v for k, v in tensor_summary(value, top=0).items() if k in _STATS})
            self.written.append(entry)

    def enter(self, layer, tag: str, iteration: int | None, scope: Scope):
        return _BodyDump(self) if self.bodies else None


class _BodyDump(Watcher):
    """The part of a dump inside one run of a body: every layer, keyed in its scope."""

    def __init__(self, dump: Dump):
        self.dump = dump
        self.constants = dump.constants

    def produced(self, event: Produced) -> None:
        self.dump.produced(event)

    def enter(self, layer, tag, iteration, scope):
        return self


class DumpDirectory(Mapping):
    """A dump directory read back: key -> array, each loaded when asked for."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        index = self.path / INDEX
        try:
            entries = json.loads(index.read_text())["tensors"]
            self.files = {e["key"]: e["file"] for e in entries}
        except FileNotFoundError:
            raise InputError(f"{path}: a directory without {INDEX}, so not a dump of `irrun infer --dump`") from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InputError(f"{index}: not a dump index ({type(exc).__name__}: {exc})") from None
        for key, name in self.files.items():
            if not isinstance(name, str) or Path(name).name != name:
                raise InputError(f"{index}: entry {key!r} names the file {name!r}, outside the dump")

    def __getitem__(self, key: str) -> np.ndarray:
        value = load_array_file(self.path / self.files[key])
        if isinstance(value, dict):
            raise InputError(f"{self.path / self.files[key]}: an archive where the dump has one array")
        return value

    def __iter__(self):
        return iter(self.files)

    def __len__(self):
        return len(self.files)
