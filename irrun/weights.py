"""The `.bin` weights file: mapped read-only, every slice bounds-checked."""
from __future__ import annotations

import mmap
import os
import weakref
from pathlib import Path

import numpy as np
from numpy.lib.array_utils import byte_bounds

from .errors import ModelError
from .etypes import ElementType

MAX_CONST_ELEMENTS = 1 << 40


class Weights:
    def __init__(self, path: Path, data: bytes | None = None):
        """The `.bin` at `path`, mapped; or `data`, its bytes held in memory (`path` names it in messages)."""
        self.path = path
        if data is not None:
            self._file = None
            self.size = len(data)
            self._map = memoryview(data).cast("B").toreadonly()   # (read-only, as a mapped file is)
        else:
            self._file = open(path, "rb")
            # (closed with the weights: a file left to the garbage collector warns, ResourceWarning)
            self._closer = weakref.finalize(self, self._file.close)
            self.size = self._file.seek(0, 2)
            # mmap cannot map an empty file; an empty .bin simply holds nothing.
            self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if self.size else b""
        self._buffer = memoryview(self._map)
        self._origin = byte_bounds(np.frombuffer(self._buffer, np.uint8))[0] if self.size else 0

    def _span(self, array) -> tuple[int, int] | None:
        """The bytes of the file that `array` views, or None when it is not a view of the file."""
        if not isinstance(self._map, mmap.mmap) or not isinstance(array, np.ndarray) or not array.size:
            return None
        lo, hi = byte_bounds(array)
        origin = self._origin
        if hi <= origin or lo >= origin + self.size:
            return None
        return max(lo - origin, 0), min(hi - origin, self.size)

    def _drop(self, start: int, end: int) -> int:
        """Drop the resident pages wholly inside bytes [start, end) (the mapping stays valid: a
        page read again later comes back from the file); returns the bytes dropped."""
        if not hasattr(mmap, "MADV_DONTNEED"):
            return 0
        page = mmap.PAGESIZE
        first = -(-start // page) * page
        last = self.size if end >= self.size else end // page * page
        if last <= first:
            return 0
        self._map.madvise(mmap.MADV_DONTNEED, first, last - first)
        return last - first

    def release(self, array) -> int:
        """`array` (a Const's data) is no longer needed: its pages leave memory."""
        span = self._span(array)
        return self._drop(*span) if span else 0

    def check_unchanged(self) -> None:
        """Refuse to read a .bin that shrank since it was mapped.

        Touching a mapped page past the new end of file kills the process
        (SIGBUS); this check before each run turns that into an error.
        """
        if self._file is not None and os.fstat(self._file.fileno()).st_size < self.size:
            raise ModelError(f"{self.path.name} shrank since the model was loaded; load the model again",
                             file=str(self.path))

    def close(self):
        self._buffer.release()
        if isinstance(self._map, mmap.mmap):
            try:
                self._map.close()
            except BufferError:  # arrays still view the map; the OS frees it with them
                pass
        if self._file is not None:
            self._closer()

    def check(self, offset: int, size: int, etype: ElementType,
              shape: tuple[int, ...]) -> tuple[str, str] | None:
        """(diagnostic code, reason) why this Const cannot be read, or None."""
        if offset < 0 or size < 0:
            return "E-BIN-RANGE", f"offset {offset} and size {size} must not be negative"
        if offset + size > self.size:
            return "E-BIN-RANGE", (f"offset {offset} + size {size} = {offset + size} is past the end of "
                                   f"{self.path.name} ({self.size} bytes)")
        numel = 1
        for d in shape:
            numel *= d
        if numel > MAX_CONST_ELEMENTS:
            return "E-BIN-SIZE", f"shape {list(shape)} has {numel} elements, beyond any real weight"
        if etype.carrier is None:
            return "E-BIN-SIZE", f"a Const cannot hold element type {etype}"
        if etype.name == "string":
            return None if size >= 4 else ("E-BIN-SIZE", f"size {size} holds no packed string data")
        need = etype.nbytes(numel)
        if size < need:
            return "E-BIN-SIZE", f"size {size} is smaller than the {need} bytes that shape {list(shape)} of {etype} needs"
        return None

    def bytes(self, offset: int, size: int) -> bytes:
        """Bytes [offset, offset + size) of the file, which must hold them."""
        if offset < 0 or size < 0 or offset + size > self.size:
            raise ModelError(f"bytes {offset}..{offset + size} are outside {self.path.name} ({self.size} bytes)",
                             code="E-BIN-RANGE")
        return bytes(self._buffer[offset:offset + size])

    def read(self, offset: int, size: int, etype: ElementType, shape: tuple[int, ...]) -> np.ndarray:
        problem = self.check(offset, size, etype, shape)
        if problem:
            raise ModelError(problem[1], code=problem[0])
        numel = 1
        for d in shape:
            numel *= d
        raw = self._buffer[offset:offset + size]
        array = etype.decode(raw, numel)
        if isinstance(self._map, mmap.mmap) and array.size and self._span(array) is None:
            # (decoded into an array of its own, a 4-bit weight unpacked: the file's pages leave
            # memory now, an int4 model's packed weights no longer held beside its unpacked ones)
            self._drop(offset, offset + size)
        return array.reshape(shape)
