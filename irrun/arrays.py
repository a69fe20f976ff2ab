"""Array files: reading `.npy` / `.npz` safely, writing any file atomically, and putting a
model's outputs where the user says (a `.npz`, a `.npy`, a directory of `.npy`, stdout).

Everything irrun reads from or writes to array files goes through here: the CLI's
`--input`, reference tensors, batch samples, dumps and results.
"""
from __future__ import annotations

import hashlib
import io
import os
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator, Mapping

import numpy as np

from .errors import InputError, UsageError


def load_array_file(path: str | Path) -> np.ndarray | dict[str, np.ndarray]:
    """An array (`.npy`) or a dict of arrays (`.npz`), never unpickling anything."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{path}: no such input file")
    with open(p, "rb") as f:
        magic = f.read(6)
    if magic != b"\x93NUMPY" and not magic.startswith(b"PK"):
        raise InputError(f"{path}: not a .npy/.npz array file (it does not start with the NumPy or zip magic)")
    try:
        data = np.load(p, allow_pickle=False)
    except ValueError as exc:
        if "pickle" in str(exc).lower():
            raise InputError(f"{path}: holds pickled Python objects, which irrun refuses to load") from None
        raise InputError(f"{path}: not a .npy/.npz array file ({exc})") from None
    except (OSError, EOFError, zipfile.BadZipFile) as exc:
        raise InputError(f"{path}: not a readable .npy/.npz array file ({exc})") from None
    if isinstance(data, np.lib.npyio.NpzFile):
        with data:
            try:
                return {k: data[k] for k in data.files}
            except ValueError as exc:
                raise InputError(f"{path}: an array in it cannot be read without pickle ({exc})") from None
            except (OSError, EOFError, zipfile.BadZipFile) as exc:
                raise InputError(f"{path}: not a readable .npz archive ({exc})") from None
    return data


class NpzArchive(Mapping):
    """A `.npz` read lazily, one array at a time when asked for, never unpickling anything.
    Close it (or use it in a `with`)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.is_file():
            raise InputError(f"{path}: no such file")
        # (opened here, so that it is closed when NumPy cannot read it: np.load leaves a damaged
        # zip's file open, ResourceWarning)
        file = open(self.path, "rb")
        try:
            self._npz = np.load(file, allow_pickle=False)
            if not isinstance(self._npz, np.lib.npyio.NpzFile):
                raise InputError(f"{path}: is a single .npy array, not a .npz archive of named arrays")
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
            file.close()
            raise InputError(f"{path}: not a readable .npz archive ({exc})") from None
        except BaseException:
            file.close()
            raise
        self._file = file

    def __getitem__(self, key: str) -> np.ndarray:
        try:
            return self._npz[key]
        except KeyError:
            raise
        except ValueError as exc:
            raise InputError(f"{self.path}: array {key!r} cannot be read without pickle ({exc})") from None
        except (OSError, EOFError, zipfile.BadZipFile) as exc:
            raise InputError(f"{self.path}: array {key!r} is not readable ({exc})") from None

    def __iter__(self):
        return iter(self._npz.files)

    def __len__(self):
        return len(self._npz.files)

    def close(self):
        self._npz.close()
        self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _read_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# Read once, at import: setting the umask to read it is not safe while other threads create files.
_UMASK = _read_umask()


@contextmanager
def atomic_write(path: str | Path, mode: str = "wb", *, durable: bool = True) -> Iterator[IO]:
    """Write `path` through a temporary file in the same directory, renamed over it only once
    everything was written: a crash or a kill never leaves a half-written file behind.

    `durable=False` skips the fsync before the rename (milliseconds a file): a killed process
    still leaves the whole file or none, only a power cut may lose it (for many small files
    whose reader checks them, like batch results)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp makes the file 0600; the result gets the permissions a plain open() would give it.
        os.fchmod(fd, 0o666 & ~_UMASK)
        with os.fdopen(fd, mode) as f:
            yield f
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _storable(array) -> np.ndarray:
    """irrun's string tensors (object arrays of str) as NumPy str arrays: the same text,
    readable without pickle."""
    array = np.asanyarray(array)
    if array.dtype == object and all(isinstance(s, str) for s in array.reshape(-1).tolist()):
        return np.array(array.tolist(), dtype=str).reshape(array.shape)
    return array


def save_npz(path: str | Path, arrays: dict[str, np.ndarray], *, durable: bool = True) -> None:
    """`arrays` as an uncompressed `.npz` at exactly `path`, atomically, readable without
    pickle.  Written member by member as `np.savez` does, but without passing names as
    keyword arguments (an output called `file` or `allow_pickle` would not survive that).
    `durable`: as in atomic_write."""
    with atomic_write(path, durable=durable) as f:
        write_npz(f, arrays)


def write_npz(f: IO[bytes], arrays: dict[str, np.ndarray]) -> None:
    """`arrays` as an uncompressed `.npz` into an open binary file (see save_npz)."""
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, value in arrays.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, _storable(value), allow_pickle=False)


def save_npy(path: str | Path, array: np.ndarray) -> None:
    with atomic_write(path) as f:
        np.save(f, _storable(array), allow_pickle=False)


# ---------------------------------------------------------------- where outputs go

_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
_NAME_BYTES = 240     # of a file name (255 on most file systems), with room for ".npy"


def output_file_name(name: str) -> str:
    """The `.npy` file an output named `name` gets in a directory of outputs: every character but
    ASCII letters, digits, `.`, `_` and `-` (and a leading `.`) written as `%XX` per UTF-8 byte, so
    `logits/0:1` becomes `logits%2F0%3A1.npy`: a plain file name on every file system, and distinct
    names stay distinct (`%` itself is escaped).  A name too long for a file name is cut and ends
    in a hash of the whole name."""
    encoded = "".join(c if c in _SAFE and not (i == 0 and c == ".") else
                      "".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass"))
                      for i, c in enumerate(name)) or "%00"
    if len(encoded) > _NAME_BYTES:
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        encoded = f"{encoded[:_NAME_BYTES - 17]}~{digest}"
    return encoded + ".npy"


def output_target_kind(target: str) -> str:
    """How `--output TARGET` is read: "stdout" (`-`), "npz", "npy", or "dir" (an existing
    directory, a path ending in a separator, or a path without a suffix)."""
    if target == "-":
        return "stdout"
    path = Path(target)
    if path.is_dir() or target.endswith(("/", os.sep)) or not path.suffix:
        return "dir"
    suffix = path.suffix.lower()
    if suffix in (".npz", ".npy"):
        return suffix[1:]
    raise UsageError(f"--output {target}: use NAME.npz (every output), NAME.npy (a model with one output), "
                     f"a directory (one .npy per output) or - (.npz to stdout)")


def save_outputs(target: str, arrays: dict[str, np.ndarray], stdout: IO[bytes] | None = None) -> list[str]:
    """Write a model's outputs where `target` says (see `output_target_kind`), every file atomically;
    returns the files written (`["-"]` for stdout)."""
    kind = output_target_kind(target)
    if kind == "stdout":
        buffer = io.BytesIO()
        write_npz(buffer, arrays)
        stdout.write(buffer.getvalue())
        stdout.flush()
        return ["-"]
    if kind == "npz":
        save_npz(target, arrays)
        return [target]
    if kind == "npy":
        if len(arrays) != 1:
            raise UsageError(f"--output {target}: a .npy file holds one array and the model has {len(arrays)} "
                             f"outputs ({', '.join(arrays)}); use a .npz file or a directory")
        save_npy(target, next(iter(arrays.values())))
        return [target]
    folder = Path(target)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--output {target}: exists and is not a directory")
    files = {name: output_file_name(name) for name in arrays}
    seen: dict[str, str] = {}
    for name, file in files.items():
        other = seen.setdefault(file.casefold(), name)
        if other != name:   # only letter case tells them apart: one file on Windows and macOS
            raise UsageError(f"--output {target}: outputs {other!r} and {name!r} differ only in letter case; "
                             f"use a .npz file")
    folder.mkdir(parents=True, exist_ok=True)
    for name, array in arrays.items():
        save_npy(folder / files[name], array)
    return [str(folder / files[name]) for name in arrays]
