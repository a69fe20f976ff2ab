"""Winograd convolution for 3x3 kernels at stride 1: F(2x2, 3x3) and F(4x4, 3x3).

Each m x m block of outputs ("tile") is computed from an a x a block of input (a = m + 2) as

    Y = A^T [ sum over input channels of (G g G^T) * (B^T d B) ] A

(Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2015): a^2 products per
tile and channel pair instead of 9 m^2, so F(2,3) does 16 where the direct method does 36 and
F(4,3) 36 where it does 144.  The filter transform U = G g G^T is made once, when the layer is
bound at load.  Per call:

  1. the input tiles (overlapping a x a windows, m apart) copied once as [a, a, C_in, tiles];
  2. V = B^T d B, one axis of the tile at a time: two GEMMs of depth a;
  3. M[k] = U[k] @ V[k] for each of the a^2 transform points: one batched GEMM (the bulk);
  4. Y = A^T M A, one axis at a time, the second with the tile's column last (a tile row's m
     outputs then side by side), and each of the m rows of the tiles put back in place by one
     copy (edges cropped).

Steps 2 and 4 as one GEMM each by the Kronecker products (B^T kron B^T, [a^2, a^2]) did a^2 / 2
times the work (F(4,3): 1296 multiply-adds per tile and channel instead of 432), and putting
whole tiles back in one copy read the GEMM's output with a stride of a^2 planes for every
element.  This way (each layer alone, min of four alternating runs): ResNet's 64 -> 64 at 56x56
by F(4,3) 1042 -> 802 us on one thread, 514 -> 472 in two parts; 128 -> 128 at 28x28 by F(2,3)
1084 -> 950 and 541 -> 511; 256 -> 256 at 14x14 by F(2,3) 829 -> 782 and 607 -> 541.  In the
networks, old and new alternating in one process: ResNet-18 13.83 -> 13.40 ms on two threads,
22.6 -> 21.0 on one; the benchmark's detector 9.54 -> 9.36.  (The m x m output positions put back
by a strided copy each, after a GEMM of A^T as in step 2, won on one thread and lost on two,
ResNet's 64-channel layers 2-9% slower: each part rewrote every cache line of its output m times.)
The rounding differs a little, no worse (64-128 channels at unit scale against float64: the
largest error F(4,3) 1.0-1.5e-5 either way, RMS 1.33-1.46e-6 against 1.39-1.52e-6).

Accuracy.  The transforms add and subtract values of different sizes, so the rounding error in
f32 grows with the tile: against float64 direct convolution, over random data and filters with
64-512 input channels, F(2,3) stays within 1.5x and F(4,3) within about 5x of the direct f32
method's own largest error (tests/test_kernels_parallel.py measures both).  At unit output scale
F(2,3) meets the standard bound against OpenVINO (rtol 1e-4, atol 1e-5), and F(4,3) at 64
channels (8.8e-6 against float64); from 128 channels, where the default rule takes F(4,3) since
stop 49, its largest error is 1.5e-5 (128 at 20x20) to 2.5e-5 (256 at 28x28), about 6e-6 of the
output's largest magnitude: the documented bound there is 3e-5 at unit scale, which the tests of
the default rule check (IRRUN_WINOGRAD=2 keeps the standard one).  F(4,3) from 32 channels
(IRRUN_WINOGRAD=4) is tested within 1e-4 of the output's scale.  Only float32 and float64 data
take this path, and only inputs whose sum of squares is finite (irrun/ops/convolution.py; `common.sum_of_squares`): the transforms would spread
a NaN over its whole tile and turn an infinity into NaN, where the direct sums keep each to the
windows that read it.
"""
from __future__ import annotations

import copy
import os
from math import prod

import numpy as np

from .. import pairing, thin_products, threads
from .window import strided_view, zero_extended

# Transform matrices (Toom-Cook), in float64: F(2,3) at the points 0, 1, -1, inf; F(4,3) at 0, 1, -1,
# 1/2, -2, inf, whose rounding error is smaller than that of the textbook 0, +-1, +-2 (Barabasz et
# al., "Error analysis and improving the accuracy of Winograd convolution", 2020): against float64,
# 64 channels at 28x28, RMS 4.7x the direct f32 kernel's error instead of 7.2x, the largest 5.4x
# instead of 11.7x (the best of 190 pairs of points tried beside 0 and +-1).
_F23 = (
    np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64),          # B^T
    np.array([[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]], np.float64),                  # G
    np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64),                                      # A^T
)
_F43 = (
    np.array([[1, -3 / 2, -2, 3 / 2, 1, 0], [0, -1, 1 / 2, 5 / 2, 1, 0], [0, 1, -5 / 2, 1 / 2, 1, 0],
              [0, -2, -1, 2, 1, 0], [0, 1 / 2, -1, -1 / 2, 1, 0], [0, 1, -3 / 2, -2, 3 / 2, 1]], np.float64),
    np.array([[1, 0, 0], [1 / 3, 1 / 3, 1 / 3], [-1 / 3, 1 / 3, -1 / 3], [-16 / 15, -8 / 15, -4 / 15],
              [1 / 15, -2 / 15, 4 / 15], [0, 0, 1]], np.float64),
    np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 1 / 2, -2, 0], [0, 1, 1, 1 / 4, 4, 0], [0, 1, -1, 1 / 8, -8, 1]],
             np.float64),
)
TRANSFORMS = {2: _F23, 4: _F43}

# Tile elements (a^2 x channels x tiles) a block of tile rows holds: its tiles, their transform and
# their products then stay in the core's L2 (2 MiB) from one GEMM to the next.  Unblocked, ResNet's
# 64 -> 64 layer at 56x56 spent 1.3 ms in a [16, 16] x [16, 50176] product that takes 0.56 ms on
# data in cache.  A filter larger than this sets the block instead: each block reads the whole
# transformed filter, which for 256 channels and more outweighs the tiles.
TILE_BLOCK_ELEMENTS = 1 << 18


# Filter elements transformed at once: their float64 products (a^2 / 9 as many, 512 KiB for
# F(4,3)) are then cast into the filter from the core's L2 (a 256 x 256 filter 6.7-7.0 -> 5.4-5.7
# ms at 2^14 against 2^16, on one thread in warm memory)
WINOGRAD_TRANSFORM_ELEMENTS = 1 << 14
# Work per transformed element relative to an add (irrun/threads.py): the float64 copy, its share of
# the GEMM and the cast into the filter's fresh memory, whose page faults are most of a load's cost
WINOGRAD_TRANSFORM_COST = 4


class WinogradFilter:
    """A 3x3 filter [C_out, C_in, 3, 3] transformed for F(m x m, 3 x 3): an array, or a filter the
    plan left folded by rows (irrun/blockwise_folding.py: `rows_at(slice)` gives the values of a
    block of output channels), read a block at a time, so that its whole f32 values are never made
    (f16 weights' Convert: the f16 ResNet-18's layer3 filters, 7 MiB of fresh memory)."""

    def __init__(self, w, m: int, dtype: np.dtype):
        bt, g, at = TRANSFORMS[m]
        rows = w.rows_at if hasattr(w, "rows_at") else w.__getitem__
        self.m, self.a = m, m + 2
        self.c_out, self.c_in = w.shape[:2]
        # G w G^T in float64 as one GEMM, kron(G, G) [a^2, 9] times the 3x3 taps of every channel
        # pair (8x faster than einsums: a 512 x 512 filter in 8 ms), a few output channels at a time:
        # the float64 temporaries of a whole 512-channel filter (40 MiB) would stay in the heap
        self.u = np.empty((self.a * self.a, self.c_out, self.c_in), dtype)
        both = np.kron(g, g)
        step = max(1, WINOGRAD_TRANSFORM_ELEMENTS // max(self.c_in * 9, 1))
        firsts = range(0, self.c_out, step)

        def transform(a, b):
            # (into float64 buffers each part makes once, not new arrays a block: their fresh pages
            # took 1,800 page faults of the f16 ResNet-18's load, 4.4 us each on this VM)
            taps = np.empty((step * self.c_in, 9))
            product = np.empty((self.a * self.a, step * self.c_in))
            for first in firsts[a:b]:
                block = rows(slice(first, first + step)).reshape(-1, 9)
                n = block.shape[0]
                np.copyto(taps[:n], block)
                np.matmul(both, taps[:n].T, out=product[:, :n])
                np.copyto(self.u[:, first:first + step].reshape(self.a * self.a, n), product[:, :n])
        # Blocks of output channels in parts on every core (ResNet-18's load + first inference,
        # medians of alternating processes: f32 weights 62.7 -> 58.9 ms, f16 90.1 -> 85.5), BLAS on
        # one thread in each: its own threads would spin for 0.1 s after the load, on the cores the
        # first inferences' parts want (ResNet-18's first three took 53, 43 and 34 ms, not 27)
        parts = threads.parts_for(self.u.size * WINOGRAD_TRANSFORM_COST, most=len(firsts))
        with threads.single_threaded_blas():
            threads.run_parts(transform, threads.bounds(len(firsts), parts))
        self.bt = bt.astype(dtype)      # [a, a]: B^T, applied to each axis of a tile in turn
        self.at = at.astype(dtype)      # [m, a]: A^T, likewise
        self.a_columns = np.ascontiguousarray(self.at.T)    # [a, m]: A, for the tiles' columns
        self.dtype = np.dtype(dtype)

    def output_channels(self, first: int, stop: int) -> WinogradFilter:
        """Output channels [first, stop) as a filter of their own, a view of this one's transform (a
        paired run's half of a layer cut along its channels: no second copy of its filter)."""
        part = copy.copy(self)
        part.u = self.u[:, first:stop]
        part.c_out = stop - first
        return part


def winograd_conv(x: np.ndarray, f: WinogradFilter, whole, counts) -> np.ndarray:
    """x [N, C_in, H, W] (any float type, computed in f.dtype); `whole`: the padded (lo, hi) range
    of each spatial axis; `counts`: output size.  Returns [N, C_out, *counts] in f.dtype.

    Blocks of tile rows (TILE_BLOCK_ELEMENTS) run on every core while irrun's pool owns them, each
    block's GEMMs in the thread that copied its tiles; one block alone runs in parts by input
    channel, then by output channel (`_one_block_in_parts`)."""
    m, a = f.m, f.a
    n = x.shape[0]
    tiles_h, tiles_w = tile_counts(m, counts)
    out = np.empty((n, f.c_out, counts[0], counts[1]), f.dtype)
    per_row = a * a * max(f.c_in, f.c_out) * n * tiles_w
    rows = max(1, min(tiles_h, max(TILE_BLOCK_ELEMENTS, f.u.size) // max(per_row, 1)))
    blocks = -(-tiles_h // rows)
    parts = min(threads.threads(), blocks) if blocks > 1 and threads.pool_owns_cores() else 1
    if parts > 1:
        rows = threads.balanced_step(tiles_h, rows, parts)
    starts = range(0, tiles_h, rows)

    def run_blocks(first_block, last_block):
        for first in starts[first_block:last_block]:
            last = min(first + rows, tiles_h)
            _tile_rows(_padded_rows(x, f, whole, first, last, tiles_w), f, last - first, tiles_w,
                       out[:, :, first * m:last * m])

    macs = a * a * f.c_out * f.c_in * n * tiles_h * tiles_w
    # (a part per GEMM_MACS_PER_PART begun: 128 channels at 20x20, 14.7 M, F(4,3) 0.60 -> 0.40 ms)
    one_block_parts = min(threads.threads(), -(-macs // threads.GEMM_MACS_PER_PART))
    if blocks == 1 and threads.pool_owns_cores() and one_block_parts > 1:
        _one_block_in_parts(_padded_rows(x, f, whole, 0, tiles_h, tiles_w), f, tiles_h, tiles_w, out,
                            one_block_parts)
    else:
        threads.run_parts(run_blocks, threads.bounds(len(starts), parts))
    return out


def _padded_rows(x, f: WinogradFilter, whole, first: int, last: int, tiles_w: int) -> np.ndarray:
    """The input that tile rows [first, last) read, padded, contiguous, in f's type."""
    lo_h = whole[0][0] + first * f.m
    region = [(lo_h, lo_h + (last - first) * f.m + 2), (whole[1][0], whole[1][0] + tiles_w * f.m + 2)]
    return np.ascontiguousarray(zero_extended(x, region), dtype=f.dtype)


def _tile_rows(xp, f: WinogradFilter, th: int, tw: int, out) -> None:
    """Steps 1 to 4 (see the module's docstring) for the tiles of `xp`, written into `out`."""
    v = np.empty((f.a, f.a, xp.shape[1], xp.shape[0] * th * tw), f.dtype)
    _transformed_tiles(xp, f, th, tw, 0, xp.shape[1], v)
    _products_in_place(v, f, th, tw, 0, f.c_out, out)


def _one_block_in_parts(xp, f: WinogradFilter, th: int, tw: int, out, parts: int) -> None:
    """`_tile_rows` on every core where the tiles are one block (the filter outweighs them: each
    block would read all of it): the tiles copied and transformed in parts by input channel, then
    multiplied, transformed back and put in place in parts by output channel, each part reading
    its share of the filter.  (Before, only the GEMMs were cut, along the transform points, the
    copies and transforms on one core: ResNet's 256-channel layers at 14x14 709 -> 682 and 717 ->
    677 us in profiles alternating the two, the network 0.5% faster.)"""
    v = np.empty((f.a, f.a, xp.shape[1], xp.shape[0] * th * tw), f.dtype)
    threads.run_parts(lambda c0, c1: _transformed_tiles(xp, f, th, tw, c0, c1, v), threads.bounds(xp.shape[1], parts))
    threads.run_parts(lambda o0, o1: _products_in_place(v, f, th, tw, o0, o1, out), threads.bounds(f.c_out, parts))


def _transformed_tiles(xp, f: WinogradFilter, th: int, tw: int, c0: int, c1: int, v) -> None:
    """Steps 1 and 2 for input channels [c0, c1): v[:, :, c0:c1] ([a, a, C_in, tiles]) = B^T d B."""
    m, a = f.m, f.a
    n = xp.shape[0]
    s_n, s_c, s_h, s_w = xp.strides
    tiles = strided_view(xp[:, c0:c1], (a, a, c1 - c0, n, th, tw), (s_h, s_w, s_c, s_n, m * s_h, m * s_w))
    d = np.ascontiguousarray(tiles)
    # (on every core while irrun's pool owns them, outside parts; thin: in the small kernels' pieces)
    rows = thin_products.matmul(f.bt, d.reshape(a, -1)).reshape(a, a, -1)     # B^T over the tiles' rows
    threads.matmul(f.bt, rows, out=v[:, :, c0:c1].reshape(a, a, -1))    # then over their columns


def _products_in_place(v, f: WinogradFilter, th: int, tw: int, o0: int, o1: int, out) -> None:
    """Steps 3 and 4 for output channels [o0, o1) of out ([N, C_out, outputs of th x tw tiles,
    cropped]); v as `_transformed_tiles` makes it."""
    m, a = f.m, f.a
    n = v.shape[-1] // (th * tw)
    product = threads.matmul(f.u[:, o0:o1], v.reshape(a * a, f.c_in, -1))      # [a^2, C_out, tiles]
    rows = thin_products.matmul(f.at, product.reshape(a, -1)).reshape(m, a, -1)
    # A over the tiles' columns with the tile's column last: a tile row's m outputs side by side
    y = threads.matmul(rows.transpose(0, 2, 1), f.a_columns).reshape(m, o1 - o0, n, th, tw * m)
    # row i of every tile is out[:, :, i::m], cropped to the outputs that exist
    height, width = out.shape[2:]
    for i in range(min(m, height)):
        target = out[:, o0:o1, i::m]
        np.copyto(target, y[i, :, :, :target.shape[2], :width].swapaxes(0, 1))


def tile_counts(m: int, counts) -> tuple[int, int]:
    """The rows and columns of m x m tiles that cover outputs of `counts` (the last ones cropped)."""
    return -(-counts[0] // m), -(-counts[1] // m)


def transformed_shape(f: WinogradFilter, n: int, counts) -> tuple[int, int, int, int]:
    """The shape of every tile of the data transformed ([a, a, C_in, tiles]), which
    `transform_channels` fills and `products_of` reads."""
    th, tw = tile_counts(f.m, counts)
    return f.a, f.a, f.c_in, n * th * tw


def transform_channels(x: np.ndarray, f: WinogradFilter, whole, counts, c0: int, c1: int, v: np.ndarray) -> None:
    """Steps 1 and 2 for input channels [c0, c1) of every tile, into v (`transformed_shape`): the
    first phase of a layer cut along its output channels in two processes (irrun/
    convolution_halves.py), each transforming its share of the channels into memory both read."""
    th, tw = tile_counts(f.m, counts)
    _transformed_tiles(_padded_rows(x[:, c0:c1], f, whole, 0, th, tw), f, th, tw, 0, c1 - c0, v[:, :, c0:c1])


def products_of(v: np.ndarray, f: WinogradFilter, n: int, counts) -> np.ndarray:
    """Steps 3 and 4 of every tile transformed into v (`transform_channels`), by f's output
    channels: [N, f.c_out, *counts]."""
    out = np.empty((n, f.c_out, counts[0], counts[1]), f.dtype)
    _products_in_place(v, f, *tile_counts(f.m, counts), 0, f.c_out, out)
    return out


def winograd_tile(c_in: int, c_out: int, counts) -> int | None:
    """The tile size m for a 3x3 stride-1 convolution of these sizes, None where the direct kernels
    are used.  `IRRUN_WINOGRAD`: "auto" (the default, below), "2" F(2,3) from 128 channels, "4"
    F(4,3) from 32 channels (faster, less accurate), "off" never; each over 14x14 outputs or more.

    "auto" (AUTO_TILES): F(4,3) for 64 channels or more over 14x14 outputs or more where its
    transformed filter fits 16 MiB (256 channels: 9 MiB), 8 MiB on one thread; F(2,3) for 128 or
    more over 14x14 or more where its fits 4 MiB -- on one thread at any size.  "One thread" counts
    a layer of a network run in two processes too (`pairing.one_core_a_kernel`), each of which runs
    its half of the layer on one core: ResNet-18's three 256 -> 256 layers at 14x14 then by F(2,3),
    their halves (by output channels, one after the other on one core, alternating with F(4,3)'s in
    one process, three runs) 0.88-0.90 of their time, the detector's 256 -> 256 at 10x20 0.76, all
    the halves of the two networks 0.980-0.982 and 0.966; the transformed filters 16 MiB smaller in
    ResNet-18, its load and first inference 0.94 of the time (stop 63).  (Decided at load: a
    network that runs in one process after all, its steps not cut, keeps those tiles.)  Measured
    alone on the AMD EPYC of family 19h (stop 49; ms a layer, the best of 40 runs, in
    `network_parts`):
      layer                  two threads                one thread
                             direct  F(2,3)  F(4,3)     direct  F(2,3)  F(4,3)
      128 -> 128 at 28x28    1.43    0.88    0.60       2.78    1.95    1.17
      128 -> 128 at 20x40    1.45    0.89    0.61       2.74    1.91    0.96
      128 -> 128 at 14x14    0.53    0.32    0.29
      192 -> 192 at 14x14    0.84    0.49    0.42       1.52    0.91    0.65
      256 -> 256 at 14x14    1.39    0.88    0.62       2.85    1.94    2.34
      256 -> 256 at 10x20    1.41    0.86    0.61       2.84    1.94    1.42
      256 -> 256 at 28x28    5.65    3.23    2.40
      512 -> 512 at 14x14    6.37    3.50    3.83      13.9     7.28    8.01
      512 -> 512 at 7x7      1.76    1.75    1.90
      64 -> 64 at 14x14      0.24    0.17    0.17       0.24    0.16    0.15
    (128 -> 128 at 20x20 F(4,3) took 0.60 before one block's 14.7 M multiply-adds ran in two
    parts, 0.40 after.)  Alternating inference by inference with the rule before: ResNet-18 0.94
    of its time, the detector 0.95.  F(4,3)'s error is 5-8x F(2,3)'s (see the module docstring);
    ResNet-18's logits stay within 7.3e-7 of OpenVINO's largest either way.
    The rule before (stop 29), measured in place in ResNet-18 and the benchmark's detector on
    an Intel Xeon (ms per layer, profiles of 20 runs; on one thread the rule before this one took
    F(2,3) from 128 channels):
      layer                  two threads                one thread
                             direct  F(2,3)  F(4,3)     direct  F(2,3)  F(4,3)
      64 -> 64 at 56x56      1.45    1.74    1.23       2.20            1.94
      64 -> 64 at 40x80      1.56    1.67    1.21       2.25            1.79
      64 -> 64 at 20x40      0.71    0.75    0.63       0.65            0.59
      64 -> 64 at 10x20      0.30    0.29    0.33
      128 -> 128 at 28x28    1.51    1.30    1.53               2.03
      256 -> 256 at 14x14    1.51    1.56    1.72       2.40    2.02
      32 -> 32 at 80x160     1.93    2.74    1.98
    On several cores the layers whose transformed filter outgrows a core's L2 (F(4,3) for 128
    channels: 2.25 MiB, F(2,3) for 256: 4 MiB) were bound by reading it (every block's batched
    GEMM reads all of it) and lost what the fewer multiplications won; under 64 channels the
    transforms cost more than the GEMMs save.  On an AMD EPYC (1 MiB of L2 a core, a 32 MiB L3)
    with the pool's hand-offs spinning, alone on two threads: 256 -> 256 at 14x14 0.78 ms direct,
    0.60 F(2,3), 0.64 F(4,3); 128 -> 128 at 28x28 0.75, 0.55, 0.55; 512 -> 512 at 7x7 0.87,
    0.83, 1.78 (too few outputs to count).  F(2,3) at 256 channels, alternating inference by
    inference: ResNet-18 2.1-2.9% faster (1.8-3.0% with f16 weights), the detector 1.7%; its
    three such layers take 5 MiB more.  The transformed filter is (m + 2)^2 / 9 the size of the
    filter it replaces (its pages released): ResNet-18 takes 8 MiB more on two threads."""
    choice = os.environ.get("IRRUN_WINOGRAD", "auto").strip().lower()
    positions = prod(counts)
    if choice in ("off", "0", "no") or positions < WINOGRAD_MIN_POSITIONS:
        return None
    if choice == "4":
        return 4 if min(c_in, c_out) >= F43_MIN_CHANNELS else None
    if choice != "auto":
        return 2 if min(c_in, c_out) >= F23_MIN_CHANNELS else None
    one_core = pairing.one_core_a_kernel()
    for m, fewest_channels, fewest_positions, most_bytes, most_bytes_one_thread in AUTO_TILES:
        if one_core:
            most_bytes = most_bytes_one_thread
        fits = most_bytes is None or (m + 2) ** 2 * c_in * c_out * 4 <= most_bytes
        if min(c_in, c_out) >= fewest_channels and positions >= fewest_positions and fits:
            return m
    return None


F23_MIN_CHANNELS = 128
F43_MIN_CHANNELS = 32
WINOGRAD_MIN_POSITIONS = 14 * 14
# "auto": (tile, fewest channels, fewest output positions, largest transformed filter in bytes, the
# same on one thread: None for any size), the larger tile first
AUTO_TILES = ((4, 64, WINOGRAD_MIN_POSITIONS, 16 << 20, 8 << 20),
              (2, F23_MIN_CHANNELS, WINOGRAD_MIN_POSITIONS, 1 << 22, None))
