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
# 4-bit Consts of this many elements or more are read by rows, as asked (`PackedRows`): none that
# shape inference folds (analysis.FOLD_LIMIT); from this size too chains folded by rows start
# (irrun/blockwise_folding.SMALLEST_ELEMENTS)
ROWS_AS_ASKED_FROM = 1 << 18


def maps_the_file(array) -> bool:
    """Whether `array` is a view of a weights file's mapping (`Weights`), whose pages leave memory
    when released (a layout of it made at load then replaces it), not an array made at load."""
    while isinstance(array, np.ndarray) and array.base is not None:
        array = array.base
    return isinstance(array, (memoryview, mmap.mmap))


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
        """`array` (a Const's data, or its `PackedRows`) is no longer needed: its pages leave memory."""
        if isinstance(array, PackedRows) and array.weights is self and isinstance(self._map, mmap.mmap):
            return self._drop(array.offset, array.offset + array.row_bytes * array.shape[0])
        span = self._span(array)
        return self._drop(*span) if span else 0

    def packed_rows(self, offset: int, size: int, etype: ElementType, shape: tuple[int, ...]) -> "PackedRows | None":
        """The Const's data to be read by rows (see `PackedRows`), or None where it is read whole: not
        4-bit, under ROWS_AS_ASKED_FROM elements, rows not whole bytes, or not readable (`check`)."""
        if etype.bits != 4 or etype.decode is None or len(shape) < 2 or self.check(offset, size, etype, shape):
            return None
        width = 1
        for d in shape[1:]:
            width *= d
        if width % 2 or width * shape[0] < ROWS_AS_ASKED_FROM:
            return None
        return PackedRows(self, offset, etype, tuple(shape), width)

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


class PackedRows:
    """A large 4-bit Const (u4, i4, nf4, f4e2m1: an LLM's compressed weight) read a block of rows at
    a time, as asked (`rows[i:j]`, or an array of row numbers), never unpacked whole unless asked
    (`decoded`): the plan's chains folded by rows decompress it block by block (irrun/
    blockwise_folding.py), where reading it whole first made a byte of every value (a 266M-parameter
    decoder's 266 MB, on top of its f32 weights).  Shape inference knows its shape, not its values."""

    def __init__(self, weights: Weights, offset: int, etype: ElementType, shape: tuple[int, ...], width: int):
        self.weights, self.offset, self.etype, self.shape = weights, offset, etype, shape
        self.row_bytes = width * etype.bits // 8
        self._width = width
        self.dtype = etype.carrier

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return self.shape[0] * self._width

    def __getitem__(self, rows) -> np.ndarray:
        packed = np.frombuffer(self.weights._buffer, np.uint8, count=self.row_bytes * self.shape[0],
                               offset=self.offset).reshape(self.shape[0], self.row_bytes)[rows]
        return self.etype.decode(np.ascontiguousarray(packed).data, packed.shape[0] * self._width
                                 ).reshape((packed.shape[0],) + self.shape[1:])

    def decoded(self) -> np.ndarray:
        """The whole value, as `Weights.read` gives it."""
        return self[:]
