"""Row taps: a stride-1 2-D convolution as one GEMM per block of output rows, the kernel's rows
stacked into the GEMM's depth and its columns into its height (`row_taps`), and a strided layer whose
kernel the stride divides as such a layer on its input's phases (`phase_taps`).  irrun/ops/convolution.py
chooses them (`_shape_kernel`)."""
from __future__ import annotations

from math import prod
from typing import TYPE_CHECKING

import numpy as np

from .. import thin_products, threads
from .window import inside_region, tap_outputs

if TYPE_CHECKING:
    from .convolution import Geometry


# Row taps (see `row_taps`): output columns per block, at most this many elements in the stacked
# input and in the product (8192 columns: 16 -> 16 channels 10% faster on two cores than 4096),
# and the channel range measured faster than both other kernels (16 -> 16 at 160x320, 32 -> 32,
# 64 -> 64 at 40x80 and 56x56: 0.7-0.95 of the tap-by-tap kernel's time on one core, 0.75-0.9 of
# im2col's on two; 128 -> 128 about even, and Winograd takes those from 14x14).
ROW_TAP_BLOCK_COLUMNS = 8192
ROW_TAP_BLOCK_ELEMENTS = 1 << 19
ROW_TAP_CHANNELS = (16, 128)
# Grouped layers (ResNeXt-style): per group at least this many input channels, over at least this
# many output positions.  Alone, pool's parts (and beside BLAS's threads alike): 4 groups of 32 at
# 56 x 56 2.5 -> 1.9 ms, 3 of 32 at 56 x 56 2.0 -> 1.4, 2 of 64 at 28 x 28 1.45 -> 0.98, 8 of 32 at
# 28 x 28 1.30 -> 1.18, 2 of 32 at 32 x 32 0.69 -> 0.55; slower with 16 channels a group (4 at
# 56 x 56 0.96 -> 1.20; the CRNN's 0.86 -> 0.93 on the AMD EPYC of stops 56-65) and at 14 x 14
# (4 of 64: 0.70 -> 0.79).
ROW_TAP_MIN_GROUP_CHANNELS = 32
# ...but from 16 on more than one thread where OpenBLAS runs its AVX-512 kernels
# (`thin_products.small_kernels`: the same builds): on the Intel Xeon of family 6, model 207 (stop
# 67, interleaved_ab) 4 groups of 16 at 56 x 56 0.73 of the time, 4 of 16 -> 32 and 8 of 16 at
# 28 x 28 0.93, the CRNN 0.976 and 0.977 (both orders; 0.942-0.984 in stop 66); on one thread
# slower (1.14 and 1.03, the CRNN 1.005-1.04)
ROW_TAP_MIN_GROUP_CHANNELS_AVX512 = 16
ROW_TAP_MIN_GROUP_POSITIONS = 28 * 28


def row_taps_pay(filter_shape, geo: Geometry, whole, counts) -> bool:
    """Whether `row_taps` is the kernel: stride 1, 2-D, ROW_TAP_CHANNELS input channels a group
    (grouped: `min_group_channels`), and a padded row at most twice the output row (the
    columns past the edge are computed and dropped)."""
    groups, og, cg, *kernel = filter_shape
    low, high = ROW_TAP_CHANNELS
    if groups > 1 and (cg < min_group_channels() or prod(counts) < ROW_TAP_MIN_GROUP_POSITIONS):
        return False
    return (len(kernel) == 2 and all(s == 1 for s in geo.strides) and low <= cg <= high
            and og <= 2 * high and whole[1][1] - whole[1][0] <= 2 * counts[1])


def min_group_channels() -> int:
    """The fewest input channels a group for which a grouped layer takes the row taps."""
    if threads.threads() > 1 and thin_products.small_kernels():
        return ROW_TAP_MIN_GROUP_CHANNELS_AVX512
    return ROW_TAP_MIN_GROUP_CHANNELS


def stacked_row_filter(w: np.ndarray) -> np.ndarray:
    """A [G, Og, Cg, kh, kw] filter as `row_taps`' GEMM reads it: [G, kw * Og, Cg * kh]."""
    groups, og, cg, kh, kw = w.shape
    return np.ascontiguousarray(w.transpose(0, 4, 1, 2, 3).reshape(groups, kw * og, cg * kh))


def row_taps(x, w, geo: Geometry, whole, counts, stacked=None) -> np.ndarray:
    """Stride 1, 2-D: per block of output rows one GEMM [kw * C_out, C_in * kh] x
    [C_in * kh, columns] per group, the kernel's rows stacked into the GEMM's depth and its columns
    into its height, then the kw products added, each shifted by its column offset.  The stack
    holds, for each kernel row, the block's input rows padded and flattened, so a kernel column's
    shift is a contiguous slice; it is copied from the input itself, its padding columns zeroed
    once per buffer (through a padded copy of the rows first, 16 -> 16 channels at 160 x 320 took
    2.0 against 1.8 ms in parts on two cores, 2.5 against 2.3 beside BLAS's threads; the detector
    15.9 -> 15.4 ms).  A thin layer gets a GEMM BLAS runs well: 16 -> 16 channels make one of
    height 48 and depth 48 (116 GFLOP/s on one core), where im2col makes height 16, depth 144,
    and the tap-by-tap kernel nine of depth 16 (79 GFLOP/s).  (Adding the shifted products
    straight into the output, a strided view, lost to adding them in place and copying once.)"""
    groups, og, cg, kh, kw = w.shape
    n = x.shape[0]
    dh, dw = geo.dilations
    width = whole[1][1] - whole[1][0]
    slack = (kw - 1) * dw          # (the last row's shifts read past it, for outputs dropped)
    stacked_filter = stacked_row_filter(w) if stacked is None else stacked
    macs = n * groups * og * cg * kh * kw * prod(counts)
    parts = max(1, min(threads.threads(), n * counts[0], macs // threads.GEMM_MACS_PER_PART)) \
        if threads.pool_owns_cores() else 1
    columns = min(ROW_TAP_BLOCK_COLUMNS, ROW_TAP_BLOCK_ELEMENTS // (groups * max(cg * kh, kw * og)))
    rows = threads.balanced_step(counts[0], min(counts[0], max(1, columns // width)), parts if n == 1 else 1)
    blocks = [(i, first, min(first + rows, counts[0])) for i in range(n) for first in range(0, counts[0], rows)]
    out = np.empty((n, groups, og, *counts), w.dtype)
    (columns_in,), _, (columns_at,) = inside_region(x.shape[3:], whole[1:])
    row_lo, height = whole[0][0], x.shape[2]
    span = rows * width + slack

    def run_blocks(a, b):
        # one layout for every block (a shorter last block uses its first rows), so the padding
        # columns the copies never write stay zero
        stack = np.zeros((groups * cg, kh, span), w.dtype)
        grid = stack[:, :, :rows * width].reshape(groups * cg, kh, rows, width)
        depths = stack.reshape(groups, cg * kh, span)
        product_buffer = np.empty(groups * kw * og * span, w.dtype)
        for i, first, last in blocks[a:b]:
            count, length = last - first, (last - first) * width
            for r in range(kh):
                top = first + r * dh + row_lo          # the input row of the block's first row
                lo, hi = max(0, -top), min(count, height - top)
                if lo > 0:
                    grid[:, r, :lo] = 0
                if hi < count:
                    grid[:, r, max(hi, 0):count] = 0
                if hi > lo:
                    grid[:, r, lo:hi, columns_at] = x[i, :, top + lo:top + hi, columns_in]
            product = product_buffer[:groups * kw * og * (length + slack)].reshape(groups, kw * og, length + slack)
            np.matmul(stacked_filter, depths[:, :, :length + slack], out=product)
            total = product[:, :og, :length]
            for j in range(1, kw):
                total += product[:, j * og:(j + 1) * og, j * dw:j * dw + length]
            out[i, :, :, first:last] = total.reshape(groups, og, count, width)[..., :counts[1]]
    threads.run_parts(run_blocks, threads.bounds(len(blocks), min(parts, len(blocks))))
    return out


def phase_taps_pay(filter_shape, geo: Geometry) -> bool:
    """Whether `phase_taps` is the kernel: 2-D, one group, no dilation, a stride above 1 that
    divides the kernel on each axis (YOLOv5's 6x6 / 2 stem) into at least 2 x 2 taps, and few
    enough channels once the phases are (at most ROW_TAP_CHANNELS' upper end)."""
    groups, og, cg, *kernel = filter_shape
    strides = geo.strides
    return (len(kernel) == 2 and groups == 1 and all(d == 1 for d in geo.dilations) and max(strides) > 1
            and all(k % s == 0 and k // s >= 2 for k, s in zip(kernel, strides))
            and cg * prod(strides) <= ROW_TAP_CHANNELS[1])


def phase_taps(x, w, geo: Geometry, whole, counts) -> np.ndarray:
    """A strided layer whose kernel the stride divides, as a stride-1 layer on the input's phases:
    input channel c's phase (py, px), the positions (s_h i + py, s_w j + px) of the padded input,
    becomes channel (c, py, px) of an input s_h s_w times deeper and that much smaller, and the
    kernel's taps (s_h a + py, s_w b + px) that channel's taps (a, b).  The same multiply-adds,
    and `row_taps`' GEMM: YOLOv5's 3 -> 16 channel 6x6 / 2 stem at 320 x 320 becomes [48, 36] x
    [36, columns] with contiguous copies, where im2col gathers 108 rows with a stride into
    [16, 108] x [108, columns] (2.2 -> 1.4 ms on two cores beside BLAS's threads, 2.1 -> 1.7 on
    one)."""
    _, og, cg, *kernel = w.shape
    strides = geo.strides
    n = x.shape[0]
    taps = [k // s for k, s in zip(kernel, strides)]
    phased = [c + t - 1 for c, t in zip(counts, taps)]         # the phase grid's height and width
    phases = np.zeros((n, cg, *strides, *phased), x.dtype)
    for phase in np.ndindex(*strides):
        # phase-grid position q is input position q * s + p + lo: the q that land inside the input
        target, source = [], []
        for q, s, p, (lo, _), size in zip(phased, strides, phase, whole, x.shape[2:]):
            a, b = tap_outputs(size, q, s, p + lo)
            target.append(slice(a, b))
            source.append(slice(a * s + p + lo, (b - 1) * s + p + lo + 1, s))
        if all(t.stop > t.start for t in target):
            phases[(slice(None), slice(None)) + phase + tuple(target)] = x[(slice(None), slice(None)) + tuple(source)]
    filters = w[0].reshape(og, cg, taps[0], strides[0], taps[1], strides[1]).transpose(0, 1, 3, 5, 2, 4)
    filters = np.ascontiguousarray(filters).reshape(1, og, cg * prod(strides), *taps)
    flat = geo._replace(strides=(1, 1), dilations=(1, 1), pads_begin=(0, 0), pads_end=(0, 0), auto_pad="explicit")
    return row_taps(phases.reshape(n, cg * prod(strides), *phased), filters, flat,
                     [(0, size) for size in phased], counts)
