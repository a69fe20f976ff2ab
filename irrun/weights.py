"""The `.bin` weights file: mapped read-only, every slice bounds-checked."""
from __future__ import annotations

import mmap
import os
from pathlib import Path

import numpy as np
from numpy.lib.array_utils import byte_bounds

from .errors import ModelError
from .etypes import ElementType

MAX_CONST_ELEMENTS = 1 << 40


class Weights:
    def __init__(self, path: Path):
        self.path = path
        self._file = open(path, "rb")
        self.size = self._file.seek(0, 2)
        # mmap cannot map an empty file; an empty .bin simply holds nothing.
        self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if self.size else b""
        self._buffer = memoryview(self._map)

    def release_pages_except(self, arrays) -> int:
        """Drop the resident pages of the file that none of `arrays` views (f16 weights once
        decompressed, shapes once folded); returns the bytes released.

        The mapping stays valid: a page read again later comes back from the file.
        """
        if not isinstance(self._map, mmap.mmap) or not hasattr(mmap, "MADV_DONTNEED"):
            return 0
        origin = byte_bounds(np.frombuffer(self._buffer, np.uint8))[0]
        page = mmap.PAGESIZE
        kept = sorted((max(lo - origin, 0) // page * page, -(-min(hi - origin, self.size) // page) * page)
                      for lo, hi in (byte_bounds(a) for a in arrays if isinstance(a, np.ndarray) and a.size)
                      if lo < origin + self.size and hi > origin)
        released, start = 0, 0
        for lo, hi in kept + [(self.size, self.size)]:
            if lo > start:
                # (the last span may end within the final partial page: madvise rounds the length up)
                self._map.madvise(mmap.MADV_DONTNEED, start, lo - start)
                released += lo - start
            start = max(start, hi)
        return released

    def check_unchanged(self) -> None:
        """Refuse to read a .bin that shrank since it was mapped.

        Touching a mapped page past the new end of file kills the process
        (SIGBUS); this check before each run turns that into an error.
        """
        if os.fstat(self._file.fileno()).st_size < self.size:
            raise ModelError(f"{self.path.name} shrank since the model was loaded; load the model again",
                             file=str(self.path))

    def close(self):
        self._buffer.release()
        if isinstance(self._map, mmap.mmap):
            try:
                self._map.close()
            except BufferError:  # arrays still view the map; the OS frees it with them
                pass
        self._file.close()

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

    def read(self, offset: int, size: int, etype: ElementType, shape: tuple[int, ...]) -> np.ndarray:
        problem = self.check(offset, size, etype, shape)
        if problem:
            raise ModelError(problem[1], code=problem[0])
        numel = 1
        for d in shape:
            numel *= d
        raw = self._buffer[offset:offset + size]
        array = etype.decode(raw, numel)
        return array.reshape(shape)
