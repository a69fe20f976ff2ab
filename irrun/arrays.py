"""Array files: reading `.npy` / `.npz` safely and writing any file atomically.

Everything irrun reads from or writes to array files goes through here: the CLI's
`--input`, reference tensors, batch samples, dumps and results.
"""
from __future__ import annotations

import os
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

import numpy as np

from .errors import InputError


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


@contextmanager
def atomic_write(path: str | Path, mode: str = "wb") -> Iterator[IO]:
    """Write `path` through a temporary file in the same directory, renamed over it only once
    everything was written: a crash or a kill never leaves a half-written file behind."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def save_npz(path: str | Path, arrays: dict[str, np.ndarray]) -> None:
    """`arrays` as an uncompressed `.npz` at exactly `path` (NumPy itself would append `.npz`
    to a name without it), atomically."""
    with atomic_write(path) as f:
        np.savez(f, **arrays)


def save_npy(path: str | Path, array: np.ndarray) -> None:
    with atomic_write(path) as f:
        np.save(f, array, allow_pickle=False)
