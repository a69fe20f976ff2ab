"""glibc's malloc, tuned once for inference: freed memory stays in the process.

NumPy allocates every array with malloc.  By default glibc serves a large
array with a fresh mmap (from 128 KiB, a threshold that then follows the
largest array freed) and gives freed memory back to the kernel once 2x that
threshold is free at the top of the heap.  An inference allocates and frees
the same sizes every time, so each one paid for its tensors in page faults
again: 1,700 per inference of the benchmark detector, about a tenth of its
time.  OpenVINO keeps its tensors' memory from one inference to the next;
this does the same.

The settings are glibc's own ceilings for its dynamic ones: arrays below
32 MiB come from the heap, and up to 64 MiB of freed heap is kept.  The peak
is unchanged; memory is returned less eagerly.  IRRUN_MALLOC=default leaves
malloc alone.  No effect off glibc.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 64 << 20

_tuned: bool | None = None


def keep_freed_memory() -> bool:
    """Apply the settings (once per process); whether they are in effect."""
    global _tuned
    if _tuned is None:
        _tuned = os.environ.get("IRRUN_MALLOC", "").lower() != "default" and _mallopt()
    return _tuned


_libc = None


def _glibc():
    """glibc, loaded once; None off glibc (other libcs' mallopt take other parameters)."""
    global _libc
    if _libc is None:
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            libc.gnu_get_libc_version
            _libc = libc
        except (OSError, AttributeError):
            _libc = False
    return _libc or None


def _mallopt() -> bool:
    libc = _glibc()
    if libc is None:
        return False
    mallopt = libc.mallopt
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # (the mmap threshold first: setting either one ends glibc's dynamic adjustment of both)
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))


def give_back_freed_memory() -> None:
    """Return the heap's free memory to the kernel now (glibc's malloc_trim): after load-time
    copies that freed more than an inference will ask for again (irrun/huge_pages.py's 17 MB of
    a decoder's weights), which the settings above would otherwise keep.  No effect off glibc."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
