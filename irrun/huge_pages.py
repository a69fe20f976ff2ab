"""GEMV weights on 2 MiB pages.  A product of one row of data by a weight reads all of the weight
on every call, and a weight of many 4 KiB pages costs TLB misses where its pages outnumber the
TLB's entries (a decoding step's 17 MB of weights: 4,300 pages).  Linux gives an anonymous
mapping transparent huge pages where it asks for them (`madvise`, the kernel's default mode);
NumPy asks only for its own arrays of 4 MiB and more, and glibc's heap, where irrun keeps smaller
ones (irrun/allocator.py), never does.  So the constant weights of MatMul steps run with one row
of data, or with rows known only at run time (an LLM's), are copied into one 2 MiB-aligned
mapping that asks: the benchmark's decoder step 0.90 of its time on two threads, 0.93 on one (an
AMD EPYC of family 19h, in one process alternating with the weights where they were).  The
copies replace the weights in the plan before kernels are bound; a weight mapped from the .bin
leaves memory (`release`), a folded one is freed with the plan's last reference to it, and the
heap it leaves is given back.  Off Linux, or where transparent huge pages are off, nothing changes.
"""
from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np

from .allocator import give_back_freed_memory
from .optimize import gemm_data_rows

HUGE_PAGE = 2 << 20
# Weights from this size are moved, and only where they come to this much in all (fewer pages
# than the TLB holds gain nothing; the last page's unused part is memory taken)
SMALLEST_WEIGHT = 64 << 10
SMALLEST_TOTAL = 4 << 20
# Freed originals are given back to the kernel every this many bytes copied
RETURN_EVERY = 8 << 20
_ALIGN = 64
_THP_MODE = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def _available() -> bool:
    """Whether an anonymous mapping can ask for huge pages and get them."""
    if not hasattr(mmap, "MADV_HUGEPAGE"):
        return False
    try:
        return "[never]" not in _THP_MODE.read_text()
    except OSError:
        return False


def _gemm_weight_slots(plan, steps: list) -> list[int]:
    """The slots of constant weights (2-D floats of SMALLEST_WEIGHT or more) MatMul steps read
    with one row of data, or with rows known only at run time (an LLM's, decoding one at a time).
    Products of many rows gain little, their weights packed for BLAS on each call (BERT 0.98, the
    transformer at sequence 17 0.99), where the copy takes 15-80 ms of its load."""
    slots: dict[int, None] = {}
    for step in steps:
        if step.node.layer.op_type != "MatMul" or len(step.inputs) != 2 or gemm_data_rows(plan, step) not in (1, None):
            continue
        weight = plan.constants.get(step.inputs[1])
        if isinstance(weight, np.ndarray) and weight.ndim == 2 and weight.dtype.kind == "f" \
                and weight.nbytes >= SMALLEST_WEIGHT and (weight.flags.c_contiguous or weight.flags.f_contiguous):
            slots[step.inputs[1]] = None
    return list(slots)


def gemm_weights_on_huge_pages(plan, steps: list, release=None) -> int:
    """Copy the constant weights of `plan`'s MatMul steps into one mapping on huge pages, each in
    its own memory layout, and put the copies in their slots; `release` is told of each original.
    Returns how many bytes were moved (0 where nothing was)."""
    slots = _gemm_weight_slots(plan, steps)
    sizes = [-(-plan.constants[s].nbytes // _ALIGN) * _ALIGN for s in slots]
    total = sum(sizes)
    if total < SMALLEST_TOTAL or not _available():
        return 0
    pages = -(-total // HUGE_PAGE) * HUGE_PAGE
    mapping = mmap.mmap(-1, pages + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    memory = np.frombuffer(mapping, np.uint8)
    skip = -memory.ctypes.data % HUGE_PAGE          # (the kernel backs only 2 MiB-aligned ranges so)
    mapping.madvise(mmap.MADV_HUGEPAGE, skip, pages)
    at, unreturned = skip, 0
    for s, size in zip(slots, sizes):
        weight = plan.constants[s]
        rows = weight if weight.flags.c_contiguous else weight.T      # (as it lies in memory)
        copy = memory[at:at + weight.nbytes].view(weight.dtype).reshape(rows.shape)
        copy[...] = rows
        plan.constants[s] = copy if rows is weight else copy.T
        if release is not None:
            release(weight)
        at, unreturned = at + size, unreturned + size
        del weight, rows
        if unreturned >= RETURN_EVERY:
            # (the heap keeps what it frees: the originals and their copies would be held at
            # once, a model's weights twice, until the end)
            give_back_freed_memory()
            unreturned = 0
    give_back_freed_memory()
    return total
