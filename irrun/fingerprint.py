"""Which files a loaded model came from, and a fingerprint of their contents.

A pickled `Model` travels as its paths and loads again on the other side; a
batch worker keeps one loaded model per process.  Both must know that the file
they find at a path is the one the sender loaded: the fingerprint says so
without reading gigabytes of weights (the whole `.xml`, the `.bin`'s size and
64 blocks spread over it; any retrained or replaced weights change them).
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from .errors import ModelError

_BLOCK = 4096
_BLOCKS = 64


def _stamp(path: Path) -> tuple | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns, st.st_ino


def _bin_digest(path: Path, h) -> None:
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        h.update(b"no bin")
        return
    with f:
        size = f.seek(0, 2)
        h.update(f"bin {size}".encode())
        if size <= _BLOCK * _BLOCKS:
            f.seek(0)
            h.update(f.read())
            return
        for k in range(_BLOCKS):
            f.seek((size - _BLOCK) * k // (_BLOCKS - 1))
            h.update(f.read(_BLOCK))


def fingerprint_files(xml: str | Path) -> str:
    """A digest of `xml` and of the `.bin` beside it (see the module docstring)."""
    xml = Path(xml)
    h = hashlib.sha256()
    with open(xml, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    _bin_digest(xml.with_suffix(".bin"), h)
    return h.hexdigest()[:32]


def fingerprint_bytes(xml: bytes, weights) -> str:
    """The digest of a model held in memory (`irrun.load_bytes`): all of its XML and weights."""
    h = hashlib.sha256(xml)
    h.update(f"bin {len(weights)}".encode())
    h.update(weights)
    return h.hexdigest()[:32]


class ModelSource:
    """The absolute paths of a model's files as loaded, and the fingerprint of what was loaded."""

    def __init__(self, xml: str | Path):
        self.xml = Path(xml).absolute()
        self.bin = self.xml.with_suffix(".bin")
        self._stamps = (_stamp(self.xml), _stamp(self.bin))
        self._fingerprint: str | None = None

    def fingerprint(self) -> str:
        """Refuses files that changed since the model was loaded: their digest would not be
        the loaded model's."""
        if self._fingerprint is None:
            if (_stamp(self.xml), _stamp(self.bin)) != self._stamps:
                raise ModelError("the model's files changed since it was loaded; load it again",
                                 file=str(self.xml))
            self._fingerprint = fingerprint_files(self.xml)
        return self._fingerprint
