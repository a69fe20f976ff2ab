"""Products of a thin depth in pieces that OpenBLAS's small-matrix kernels take.

OpenBLAS copies both operands of a GEMM into packed blocks before its kernel runs, and a
product whose depth is a few dozen or less does not repay the copies: Winograd's transforms
([6, 6] x [6, 38,400] ran at 13-15 GFLOP/s in ResNet-18 and the detector), a stem's im2col
([16, 27] x [27, columns]), a 1x1 layer of 16-32 input channels.  Its builds for AVX-512 cores
(the SkylakeX, Cooperlake and SapphireRapids kernels) have kernels that read the operands where
they lie, which it takes for a product of at most 100^3 multiply-adds unless, as NumPy's
row-major operands reach it, B is transposed (`sgemm_small_kernel_permit_skylakex.c`, in its
column-major terms a transposed A).  Such a product cut along its long side into pieces of
at most that many is 1.2-3x faster, measured on one core of an Intel Xeon of family 6, model 207
(OpenBLAS 0.3.31; median of 40-100 alternating calls, pieces against the whole):

* wide ([rows, depth] x [depth, columns], its columns cut): [6, 6] x [6, 38,400] 184 -> 67 us,
  [4, 6] x [6, 43,008] 93 -> 45, [16, 27] x [27, 8,640] 1.28x, [16, 32] x [32, 12,544] 1.17x; at
  40,000 columns 1.1-3.1x for up to 48 rows of depth up to 32, 0.70-1.11x from 64 rows, and
  depth 36-48 1.0-1.2x for 16 rows but 0.88-0.93 for 48 (at 9,600 columns 0.89-0.97);
* tall ([rows, depth] x [depth, columns], its rows cut): 40,000 rows 1.16-2.0x for every
  column count up to 144 and depth up to 48 ([12,544, 16] x [16, 96] 1.39x), and so with A
  transposed (a 1x1 layer writing channels-last reads its input so: 1.32x; the CRNN's stem's
  [8,192, 27] x [27, 64] 1.34x); B transposed, 0.92-0.93 (its kernels decline it);
* pieces of the largest size under the bound did best ([6, 6] x [6, 38,400]: 67 us against 74
  in pieces of 8,192 columns and 166 of 1,024).

In a network, on one core, Winograd's transforms in ResNet-18 went 2.6 -> 1.5 ms a run and the
detector's 1.04 -> 0.76; in a paired run (irrun/process_pair.py) each half's 0.91 -> 0.45 and
0.45 -> 0.21.  Elsewhere (other BLAS libraries; OpenBLAS's builds for other cores, AVX2's
included, have no such kernels) `threads.matmul` as it is.  The pieces round each output as
the small kernels do, which may differ from the packed kernels' in the last bit.
"""
from __future__ import annotations

from math import prod

import numpy as np

from . import threads

# OpenBLAS's bound for its small kernels (0: never cut)
SMALL_KERNEL_MACS = 100 ** 3
# A product is cut where its depth is at most THIN_DEPTH and its short side at most NARROW_ROWS
# rows (its columns cut) or NARROW_COLUMNS columns (its rows cut)
THIN_DEPTH = 32
NARROW_ROWS = 48
NARROW_COLUMNS = 144
# (the names threadpoolctl gives OpenBLAS's kernels for these cores, lower case)
SMALL_KERNEL_CORES = frozenset({"skylakex", "cooperlake", "sapphirerapids"})

_small_kernels: bool | None = None     # whether every BLAS library loaded has them, once asked


def small_kernels() -> bool:
    """Whether the BLAS NumPy calls has OpenBLAS's small-matrix kernels for float32 (every BLAS
    library loaded being OpenBLAS running the kernels of such a core), asked once."""
    global _small_kernels
    if _small_kernels is None:
        kernels = threads.blas_kernels()
        _small_kernels = bool(kernels) and all(
            library == "openblas" and core.lower() in SMALL_KERNEL_CORES for library, core in kernels)
    return _small_kernels


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """a @ b (`threads.matmul`, on every core while the pool owns them), a product of a thin depth
    in pieces the small kernels take where the BLAS has them (see the module's text)."""
    cut = _cut(a, b, out)
    if cut is None:
        return threads.matmul(a, b, out)
    out, a2, b2, out2, along_rows, pieces = cut

    def run(first: int, last: int) -> None:
        for start, stop in pieces[first:last]:
            if along_rows:
                np.matmul(a2[start:stop], b2, out=out2[start:stop])
            else:
                np.matmul(a2, b2[:, start:stop], out=out2[:, start:stop])
    parts = 1
    if threads.pool_owns_cores() and not threads.in_part():
        parts = min(threads.threads(), len(pieces), prod(a2.shape) * b2.shape[1] // threads.PRODUCT_MACS_PER_PART)
    if parts > 1:
        threads.run_parts(run, threads.bounds(len(pieces), parts))
    else:
        run(0, len(pieces))
    return out


def cuts(rows: int, depth: int, columns: int) -> bool:
    """Whether a float32 product [rows, depth] x [depth, columns] of matrices laid out for the
    small kernels is cut (its shapes known, the caller may take `threads.matmul` itself where not:
    the test costs 0.6 us a call)."""
    return _piece_length(rows, depth, columns) > 0


def _piece_length(rows: int, depth: int, columns: int) -> int:
    """The longest piece of the product's long side within the small kernels' bound, or 0 where it
    is taken whole: not thin, within the bound already, a short side too wide, or the BLAS without
    small kernels."""
    limit = SMALL_KERNEL_MACS
    if depth > THIN_DEPTH or not limit or rows * depth * columns <= limit:
        return 0
    along_rows = rows > columns
    short = columns if along_rows else rows
    length = limit // (short * depth)
    if short > (NARROW_COLUMNS if along_rows else NARROW_ROWS) or length < 8 or not small_kernels():
        return 0
    return length


def _cut(a, b, out):
    """(out, a and b and out as matrices, whether the rows are cut, the pieces (start, stop) of
    even lengths), or None where the product is taken whole (`_piece_length`), not float32, not a
    product of matrices (leading axes of one element apart), or B transposed."""
    if a.dtype != np.float32 or b.dtype != np.float32 or a.ndim < 2 or b.ndim < 2:
        return None
    (rows, depth), columns = a.shape[-2:], b.shape[-1]
    length = _piece_length(rows, depth, columns)
    if not length or prod(a.shape[:-2]) != 1 or prod(b.shape[:-2]) != 1:
        return None
    a2, b2 = _matrix(a), _matrix(b)
    if b2.strides[1] != b2.itemsize or a2.itemsize not in a2.strides:
        return None                 # (B transposed: OpenBLAS's small kernels decline it)
    if out is None:
        out = np.empty(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (rows, columns), np.float32)
    elif out.dtype != np.float32 or out.shape[-2:] != (rows, columns) or prod(out.shape[:-2]) != 1:
        return None
    out2 = _matrix(out)
    if out2.strides[1] != out2.itemsize:
        return None
    along_rows = rows > columns
    long_side = rows if along_rows else columns
    length = -(-long_side // -(-long_side // length))
    return out, a2, b2, out2, along_rows, [(s, min(s + length, long_side)) for s in range(0, long_side, length)]


def _matrix(x: np.ndarray) -> np.ndarray:
    """The matrix of an array whose leading axes hold one element: a view."""
    return x if x.ndim == 2 else x[(0,) * (x.ndim - 2)]
