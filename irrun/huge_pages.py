"""GEMV weights on 2 MiB pages.  A product of one row of data by a weight reads all of the weight
on every call, and a weight of many 4 KiB pages costs TLB misses where its pages outnumber the
TLB's entries (a decoding step's 17 MB of weights: 4,300 pages).  Linux gives an anonymous
mapping transparent huge pages where it asks for them (`madvise`, the kernel's default mode);
NumPy asks only for its own arrays of 4 MiB and more, and glibc's heap, where irrun keeps smaller
ones (irrun/allocator.py), never does.  So the constant weights of MatMul steps run with one row
of data, or with rows known only at run time (an LLM's), are copied into one 2 MiB-aligned
mapping that asks: the benchmark's decoder step 0.90 of its time on two threads, 0.93 on one (an
AMD EPYC of family 19h, in one process alternating with the weights where they were).  The
copies replace the weights in the plan before kernels are bound (a weight laid out anew at load
is copied there in its new layout, once); a weight mapped from the .bin leaves memory
(`release`), a folded one is freed with the plan's last reference to it, and the heap it leaves
is given back.  Loading pays for the mapping's first touch (on a virtual machine, 7-40 ms for
the decoder's 17 MB, as much as for fresh heap).  Off Linux, or where transparent huge pages are
off, nothing changes.
"""
from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np

from .allocator import give_back_freed_memory
from .blockwise_folding import Pending, write_weight
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


def _gemv_weight_slots(plan, steps: list, extra: list[int] = ()) -> list[int]:
    """The slots of constant weights (2-D floats of SMALLEST_WEIGHT or more) MatMul steps read
    with one row of data, or with rows known only at run time (an LLM's, decoding one at a time).
    Products of many rows gain little, their weights packed for BLAS on each call (BERT 0.98, the
    transformer at sequence 17 0.99), where the copy takes 15-80 ms of its load.  `extra`: slots to
    take as well (joined weights, irrun/sibling_products.py: their members' slots are views of
    them, left where they are)."""
    slots: dict[int, None] = dict.fromkeys(extra)
    joined_members = getattr(plan, "joined_weight_slots", ())
    for step in steps:
        if step.node.layer.op_type != "MatMul" or len(step.inputs) != 2 or gemm_data_rows(plan, step) not in (1, None) \
                or step.inputs[1] in joined_members or step.inputs[1] in getattr(plan, "products_by_rows", ()):
            continue
        weight = plan.constants.get(step.inputs[1])
        if isinstance(weight, (np.ndarray, Pending)) and weight.ndim == 2 and weight.dtype.kind == "f" \
                and weight.nbytes >= SMALLEST_WEIGHT and (weight.flags.c_contiguous or weight.flags.f_contiguous):
            slots[step.inputs[1]] = None
    return list(slots)


class GemvWeightPages:
    """One mapping on huge pages for the GEMV weights of a plan's steps, a place in it for each
    (none at all where they come to less than SMALLEST_TOTAL, or huge pages are off).  A weight
    laid out anew at load (irrun/optimize.py) is copied there in its new layout (`place`: one
    copy, not two), the others as they lie (`move_the_rest`)."""

    def __init__(self, plan, steps: list, joined: list[int] = ()):
        """`joined`: the slots of weights joined for one-row products (irrun/sibling_products.py),
        whose members' slots hold views of them."""
        self.plan = plan
        self.bytes = 0
        self._places: dict[int, int] = {}          # slot -> its offset in the mapping
        self._unreturned = 0
        slots = _gemv_weight_slots(plan, steps, joined)
        sizes = [-(-plan.constants[s].nbytes // _ALIGN) * _ALIGN for s in slots]
        total = sum(sizes)
        if total < SMALLEST_TOTAL or not _available():
            return
        pages = -(-total // HUGE_PAGE) * HUGE_PAGE
        mapping = mmap.mmap(-1, pages + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        self._memory = np.frombuffer(mapping, np.uint8)
        at = -self._memory.ctypes.data % HUGE_PAGE     # (the kernel backs only 2 MiB-aligned ranges so)
        try:
            mapping.madvise(mmap.MADV_HUGEPAGE, at, pages)
        except OSError:                                 # (a kernel without them: the weights stay)
            return
        for s, size in zip(slots, sizes):
            self._places[s] = at
            at += size
        self.bytes = total

    def place(self, slot: int, weight, columns_first: bool) -> np.ndarray | None:
        """`weight` (an array or a chain folded by rows, irrun/blockwise_folding.py) written to its
        place, held column by column in memory where `columns_first` (F order), else row by row;
        None where the slot has no place (or has been given one)."""
        at = self._places.pop(slot, None)
        if at is None:
            return None
        memory = self._memory[at:at + weight.nbytes].view(weight.dtype)
        copy = memory.reshape(weight.shape[::-1]).T if columns_first else memory.reshape(weight.shape)
        write_weight(copy, weight)
        self._unreturned += weight.nbytes
        if self._unreturned >= RETURN_EVERY:
            # (the heap keeps what it frees: the originals and their copies would be held at
            # once, a model's weights twice, until the end)
            give_back_freed_memory()
            self._unreturned = 0
        return copy

    def move_the_rest(self, release=None) -> int:
        """Every weight not yet placed to its place, in its layout, in the plan's slots (`release`
        told of each original); the heap the originals leave given back.  Returns the bytes that
        the mapping holds (0 where there is none)."""
        for slot in list(self._places):
            weight = self.plan.constants[slot]
            self.plan.constants[slot] = self.place(slot, weight, not weight.flags.c_contiguous)
            if release is not None:
                release(weight)
            del weight
        if self.bytes:
            give_back_freed_memory()
        return self.bytes
