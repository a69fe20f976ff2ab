"""im2col: a convolution as a GEMM of its filters by the columns of its input's windows.

The column matrix is C_in * K (K the kernel's taps) by the output's positions: a strided view of
the padded input (`window.window_view`), copied, then one batched matmul [G, C_out, C_in * K] @
[N, G, C_in * K, positions].  Large layers run on every core while irrun's pool owns them
(`threads.pool_owns_cores`): blocks of output rows, each copied and multiplied in one part, or,
where the columns are one block, the copy and the GEMM cut by input channels (`_split_depth`).
A 1x1 layer's input is its columns already (`pointwise`, `pointwise_channels_last`); small layers
of many channels, each kernel on one core, copy their columns channels-last
(`channels_last_columns_times_filter`).
"""
from __future__ import annotations

from math import prod
from typing import TYPE_CHECKING

import numpy as np

from .. import pairing, thin_products, threads
from .common import channels_first_view
from .window import channels_last, effective_kernel, strided_view, window_view, zero_extended

if TYPE_CHECKING:
    from .convolution import Geometry


# Largest im2col column matrix (elements) built at once: 1 MiB of f32, which the GEMM then reads
# from the core's L2 (2 MiB on the Xeon measured here) where it was just written.  Over the im2col
# layers of the benchmark's networks (two threads, min of 2 x 25): 20.3 ms in all against 20.9 at
# 2 MiB and 21.9 at 512 KiB (ResNet-18's strided 64 -> 128 layer 1.00 -> 0.86 ms; 256 -> 256 at 14x14 1.32 ms,
# 1.59 at 512 KiB).  Grouped layers copy every group's columns before the first group's GEMM reads
# its own, so theirs are half of it: the CRNN's 4-, 8- and 16-group layers 0.90, 0.42, 0.28 ms at
# 1 MiB, 0.78, 0.40, 0.29 at 512 KiB (0.82, 0.57, 0.35 at 2 MiB).  On an AMD EPYC with 1 MiB of L2,
# 512 and 256 KiB were slower still (ResNet-18 13.05 -> 14.43 and 17.53 ms), 2 MiB level.
COLUMN_BLOCK_ELEMENTS = 1 << 18

# A kernel axis this long makes positions-major columns (see `columns_times_filter`)
POSITIONS_MAJOR_TAPS = 16
# Output rows shorter than this make a copy of short runs (see `_gather_cost`)
GATHER_SHORT_RUN = 16
# Input channels per part, at least, where one block of columns is cut along them (`_split_depth`;
# a 3-channel stem cut 1 : 2 would leave one core waiting)
SPLIT_DEPTH_CHANNELS = 8


def pointwise(x, w, strides) -> np.ndarray:
    """1x1 kernel: the (strided) input is already the im2col matrix."""
    groups, og, cg = w.shape[:3]
    strided = x[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in strides)]
    return thin_products.matmul(w.reshape(groups, og, cg), strided.reshape(x.shape[0], groups, cg, -1))


def pointwise_channels_last(x, w_t) -> np.ndarray:
    """A 1x1, stride-1, unpadded convolution of one group written channels-last: [N, P, C_in] @
    w_t [C_in, C_out] (BLAS reads x's channels as they are), returned as the [N, C_out, S...]
    view of that [N, S..., C_out] array."""
    n, c = x.shape[:2]
    product = thin_products.matmul(x.reshape(n, c, -1).swapaxes(1, 2), w_t)
    return channels_first_view(product).reshape(n, w_t.shape[1], *x.shape[2:])


def pointwise_unpadded(filter_shape, geo: Geometry, whole, spatial) -> bool:
    """A 1x1 filter [G, Og, Cg, 1...] of one group at stride 1 whose window covers the data as it
    is (no padding): what `pointwise_channels_last` computes."""
    return filter_shape[0] == 1 and all(k == 1 for k in filter_shape[3:]) and all(s == 1 for s in geo.strides) \
        and list(whole) == [(0, size) for size in spatial]


# Channels-last columns (`channels_last_columns_times_filter`): 2-D layers of one group with at least
# this many input channels over at most this many output positions, where each kernel runs on one
# core (`pairing.one_core_a_kernel`) and the filter comes from the file (convolution.py).  On one
# core of the AMD EPYC of family 19h (stop 63), against the kernel the layer took: 512 -> 512 at
# 7x7 0.92 of the time (im2col), 256 -> 256 at 10x10
# 0.87, 128 -> 256 from 20x20 at stride 2 0.85, 256 -> 512 from 14x14 at stride 2 0.88, 64 -> 64
# from 20x20 at stride 2 0.64, 128 -> 128 at 10x10 0.68 (row taps); 128 -> 256 from 28x28 at
# stride 2 (196 positions) 0.96; at more positions the channel-major columns win (64 -> 128 from
# 56x56 at stride 2 1.35, 16 -> 32 from 160x160 2.09).  On two threads in one process im2col's
# columns cut along the input channels win (the channels-last copy on one core, the product cut
# along its columns: 512 -> 512 at 7x7 1.11, 128 -> 256 from 28x28 at stride 2 1.48).
CHANNELS_LAST_MIN_CHANNELS = 64
CHANNELS_LAST_MOST_POSITIONS = 256
# ... and filters of at most this many elements: the layout is made at load, in fresh memory, from
# the file's pages touched out of order (ResNet-18's 512-channel filters, 2.4 Mi elements, 10-30 ms
# each on this VM: its load and first inference 172 -> 255 ms for 0.96 of an inference on one core)
CHANNELS_LAST_MOST_FILTER_ELEMENTS = 1 << 19


def channels_last_pays(filter_shape, counts) -> bool:
    """Whether `channels_last_columns_times_filter` is the kernel for a filter [G, Og, Cg, K...]."""
    groups, _, cg, *kernel = filter_shape
    return groups == 1 and len(kernel) == 2 and prod(kernel) > 1 and cg >= CHANNELS_LAST_MIN_CHANNELS \
        and prod(counts) <= CHANNELS_LAST_MOST_POSITIONS and prod(filter_shape) <= CHANNELS_LAST_MOST_FILTER_ELEMENTS \
        and pairing.one_core_a_kernel()


def channels_last_filter(w: np.ndarray) -> np.ndarray:
    """A filter [1, Og, Cg, K...] as `channels_last_columns_times_filter` reads it: [K x Cg, Og]."""
    og = w.shape[1]
    return np.ascontiguousarray(w[0].transpose(*range(2, w.ndim - 1), 1, 0).reshape(-1, og))


def channels_last_columns_times_filter(x, laid_out: np.ndarray, kernel, geo: Geometry, whole, counts) -> np.ndarray:
    """x [N, C_in, S...] by a filter of these taps laid out by `channels_last_filter` -> [N, 1, C_out,
    O...]: the windows copied channels-last, [N, positions, K x C_in], each tap's run of channels
    contiguous where channel-major columns copy runs of an output row (7 elements at 7x7), then
    one product [positions, K x C_in] @ [K x C_in, C_out] and the output transposed back (few
    positions: a small copy)."""
    n, channels = x.shape[:2]
    padded = channels_last(x, whole)                       # [N, S'..., C]
    steps, rank = padded.strides, len(counts)
    windows = strided_view(padded, (n, *counts, *kernel, channels),
                           (steps[0], *(steps[1 + a] * geo.strides[a] for a in range(rank)),
                            *(steps[1 + a] * geo.dilations[a] for a in range(rank)), steps[-1]))
    columns = np.ascontiguousarray(windows).reshape(n, prod(counts), -1)
    product = threads.matmul(columns, laid_out)            # [N, positions, C_out]
    return np.ascontiguousarray(product.transpose(0, 2, 1)).reshape(n, 1, laid_out.shape[1], *counts)


def columns_times_filter(xs, w, geo: Geometry, whole, counts) -> np.ndarray:
    """xs [N, G*C_in, S...] convolved with w [G, C_out, C_in, K...] (`whole`: the (lo, hi) range of
    xs each spatial axis covers once padded; `counts`: the output's size) -> [N, G, C_out, O...].

    The column matrix is `rows` = C_in * K times the size of the output: built a block of output
    rows (first spatial axis) at a time, it stays within COLUMN_BLOCK_ELEMENTS (still thousands of
    GEMM columns, as BLAS likes).  Large convolutions
    run their blocks on every core (each block's copy and GEMM in one thread, BLAS single-threaded):
    the copies are then parallel too.

    Columns are positions-major ([positions, C_in * K], each row the input's contiguous runs along
    the last kernel axis) when that axis is long: a 512-tap 1-D kernel copies 512-element runs
    instead of gathering with a stride (60% of the time of channel-major columns there)."""
    groups, og, cg, *kernel = w.shape
    rank = len(kernel)
    spans = [effective_kernel(k, d) for k, d in zip(kernel, geo.dilations)]
    axes = tuple(range(2, 2 + rank))
    rows = cg * prod(kernel)
    filters = w.reshape(groups, og, rows)
    positions_major = kernel[-1] >= POSITIONS_MAJOR_TAPS and geo.dilations[-1] == 1
    # the windows, split by group, are [n, G, Cg, O..., K...]
    outputs, taps = tuple(range(3, 3 + rank)), tuple(range(3 + rank, 3 + 2 * rank))
    order = (0, 1) + (outputs + (2,) + taps if positions_major else (2,) + taps + outputs)

    n = xs.shape[0]
    out = np.empty((n, groups, og, *counts), filters.dtype)
    row_elements = n * groups * rows * prod(counts[1:])
    first_output_axis = 2 if positions_major else 3 + rank

    def rows_view(first, last):
        """The windows of output rows [first, last), of the input padded once for them: a
        block is then a slice of them, and a part pads the rows it reads itself (the detector's
        first layers spent 0.3 ms padding before their parts began)."""
        lo = whole[0][0] + first * geo.strides[0]
        region = [(lo, lo + (last - first - 1) * geo.strides[0] + spans[0])] + list(whole[1:])
        view = window_view(zero_extended(xs, region), kernel, axes, geo.strides, geo.dilations)
        return view.reshape(n, groups, cg, *view.shape[2:]).transpose(order)

    def times_filter(view, first, last, buffer, offset, g0=0, g1=groups):
        """Output rows [first, last) of groups [g0, g1) (`view` begins at row `offset`): their
        column matrix (copied into `buffer`) times the filters, written into `out`."""
        block = view[(slice(None), slice(g0, g1)) + (slice(None),) * (first_output_axis - 2)
                     + (slice(first - offset, last - offset),)]
        # Into a buffer each part keeps, not a new array per block: fresh memory is page-faulted
        # in (a 7x7 stem's copies took twice as long) one core at a time
        columns = buffer[:block.size].reshape(block.shape)
        np.copyto(columns, block)
        target = out[:, g0:g1, :, first:last].reshape(n, g1 - g0, og, -1)
        if positions_major:
            # columns @ filters^T, then transposed into place: OpenBLAS runs [484, 512] x [512, 64]
            # 25% faster than [64, 512] x [512, 484] with the columns transposed (the audio
            # net's 512-tap layer 1.99-2.09 -> 1.86 ms alone, the net 4.05 -> 3.96 ms)
            np.copyto(target, np.matmul(columns.reshape(n, g1 - g0, -1, rows),
                                        filters[g0:g1].swapaxes(-1, -2)).swapaxes(-1, -2))
        else:
            thin_products.matmul(filters[g0:g1], columns.reshape(n, g1 - g0, rows, -1), out=target)

    by_group = not positions_major and _group_at_a_time(groups, og, rows, n * prod(counts[1:]), counts[0])
    if by_group:
        return _by_group(groups, counts, row_elements // groups, rows_view, times_filter, out)
    budget = COLUMN_BLOCK_ELEMENTS if groups == 1 else COLUMN_BLOCK_ELEMENTS // 2
    step = max(1, budget // max(row_elements, 1))
    # parts for the copies' size or for the GEMMs' (a strided 32 -> 64 layer at 80 x 160 has
    # columns too small to split for their copy, but 59 M multiply-adds: 2.1 -> 1.4 ms)
    parts = _block_parts(row_elements * counts[0], counts[0], row_elements * counts[0] * og)
    if step >= counts[0] and (threads.pool_owns_cores() or (parts == 1 and not positions_major)):
        # the columns fit one block: while the pool owns the cores, cut along the input channels
        # (`_split_depth`; cut into blocks of output rows, 512 -> 512 channels at 7x7 made GEMMs
        # of 28 and 21 columns, too narrow), else one GEMM (`threads.matmul` may cut it along
        # the filters); on one thread, the same GEMM the blocks would run without their
        # bookkeeping (a VAD's 1-D layers on 2-8 positions, 38 -> 25 us)
        view = rows_view(0, counts[0])
        target = out.reshape(n, groups, og, -1)
        depth_parts = min(threads.threads(), cg // SPLIT_DEPTH_CHANNELS,
                          row_elements * counts[0] * og // threads.GEMM_MACS_PER_PART)
        if threads.pool_owns_cores() and not positions_major and depth_parts > 1:
            _split_depth(view, filters, target, depth_parts)
            return out
        buffer = np.empty(row_elements * counts[0], filters.dtype)
        columns = buffer.reshape(view.shape)
        _copy_in_parts(view, columns, _gather_cost(counts, positions_major))
        if positions_major:
            threads.matmul(filters, columns.reshape(n, groups, -1, rows).swapaxes(-1, -2), out=target)
        else:
            thin_products.matmul(filters, columns.reshape(n, groups, rows, -1), out=target)
        return out
    step = threads.balanced_step(counts[0], step, parts)
    blocks = [(a, min(a + step, counts[0])) for a in range(0, counts[0], step)]
    # A 1-D layer of one sample whose windows need no padding (an audio front end): its windows
    # as one [positions, C_in, taps] view made before the parts, which then run nothing but
    # `_positions_major_blocks` (see there)
    windows = filters_t = None
    if one_view_of_windows(w.shape, n, geo, whole, counts, xs.shape[2:]):
        windows = _windows_of_one_sample(xs, kernel[0], geo, whole, counts)
        filters_t = filters[0].T     # (a view: a contiguous copy a call was no faster, 1.001-1.004)

    def run_blocks(a, b):
        buffer = np.empty(row_elements * step, filters.dtype)
        if windows is not None:
            _positions_major_blocks(windows, filters_t, out.reshape(og, -1), blocks[a:b], buffer)
            return
        offset = blocks[a][0]
        view = rows_view(offset, blocks[b - 1][1])
        for first, last in blocks[a:b]:
            times_filter(view, first, last, buffer, offset)

    _blocks_in_parts(run_blocks, len(blocks), parts)
    return out


def _block_parts(elements: int, most: int, macs: int) -> int:
    """Parts for blocks of im2col columns: for the copies' size (`elements`), or, while the pool
    owns the cores, for the GEMMs' (`macs`); at most `most`."""
    parts = threads.parts_for(elements, most=most)
    if threads.pool_owns_cores():
        parts = max(parts, min(threads.threads(), most, macs // threads.GEMM_MACS_PER_PART))
    return parts


def _blocks_in_parts(run_blocks, count: int, parts: int) -> None:
    """run_blocks(a, b) over blocks [0, count): whole, or in `parts` on the pool, BLAS on one thread
    each."""
    if parts == 1 or count == 1:
        run_blocks(0, count)
    else:
        with threads.single_threaded_blas():
            threads.run_parts(run_blocks, threads.bounds(count, parts))


def _group_at_a_time(groups: int, og: int, rows: int, row_positions: int, output_rows: int) -> bool:
    """Whether a grouped layer's blocks take one group each (`_by_group`): where BLAS's own
    threads run its GEMMs and a group's is wide enough to gain from spanning more positions,
    measured (two cores, blocks of all groups' columns against blocks of one group's, each of
    COLUMN_BLOCK_ELEMENTS): 4 groups of 16 -> 32 channels at 16 x 128 0.82-0.90 of the time (the
    CRNN 2.83 -> 2.79 and 2.87 -> 2.80 ms, alternating), 8 at 16 x 128 0.87-0.88; but 16 groups
    of 16 -> 16 at 16 x 128 1.07, 8 of 16 -> 32 at 8 x 64 (512 positions) 1.23-1.28, groups of
    4-8 channels 1.26-1.34, and in parts on the pool (BLAS on one thread each) 1.14-1.18."""
    if groups < 2 or threads.blas_held_to_one():
        return False
    positions = max(1, min(COLUMN_BLOCK_ELEMENTS // max(rows * row_positions, 1), output_rows)) * row_positions
    return og >= GROUP_AT_A_TIME_OUTPUTS and rows >= GROUP_AT_A_TIME_DEPTH and positions >= GROUP_AT_A_TIME_POSITIONS


# `_group_at_a_time`: output channels a group, GEMM depth (input channels a group times taps) and
# output positions a block of one group's columns spans, at least
GROUP_AT_A_TIME_OUTPUTS = 32
GROUP_AT_A_TIME_DEPTH = 144
GROUP_AT_A_TIME_POSITIONS = 1024


def _by_group(groups: int, counts, group_row_elements: int, rows_view, times_filter, out) -> np.ndarray:
    """A grouped layer's im2col a group at a time: blocks of output rows of one group's columns,
    COLUMN_BLOCK_ELEMENTS each, every GEMM on BLAS's threads (`_group_at_a_time`)."""
    step = max(1, COLUMN_BLOCK_ELEMENTS // max(group_row_elements, 1))
    buffer = np.empty(group_row_elements * step, out.dtype)
    view = rows_view(0, counts[0])
    for g in range(groups):
        for first in range(0, counts[0], step):
            times_filter(view, first, min(first + step, counts[0]), buffer, 0, g, g + 1)
    return out


def _split_depth(windows: np.ndarray, filters: np.ndarray, out: np.ndarray, parts: int) -> None:
    """out[...] = filters @ columns ([N, G, C_out, P]), where columns is the copy of `windows`
    ([N, G, C_in, K..., O...]), in `parts` on every core cut along the input channels: each part
    copies its channels' columns and multiplies them by its share of the filters' depth, and the
    parts' products are then added.  Cut along the filters instead, every part needs all the
    columns: they are copied first, one core busy or a hand-off more, then the GEMM (ResNet-18's
    128 -> 256 / 2 layer 503 -> 451 us, its 512 -> 512 layers at 7x7 1087 -> 1053; the audio
    net's strided 1-D layers 5-13% faster, the net 2.12 -> 2.03 ms; profiles alternating with the
    cut along the filters).  Each output is the same sum in another order (the parts' partial
    sums added), not the bits of one thread."""
    channels = windows.shape[2]
    taps = filters.shape[-1] // channels
    n, groups = windows.shape[:2]
    ranges = threads.bounds(channels, parts)
    partial = {first: out if first == 0 else np.empty_like(out) for first, _ in ranges}

    def depth(first, last):
        columns = np.empty((n, groups, last - first) + windows.shape[3:], filters.dtype)
        np.copyto(columns, windows[:, :, first:last])
        np.matmul(filters[..., first * taps:last * taps], columns.reshape(n, groups, (last - first) * taps, -1),
                  out=partial[first])
    threads.run_parts(depth, ranges)
    for first, _ in ranges[1:]:
        np.add(out, partial[first], out=out)


def _copy_in_parts(windows: np.ndarray, columns: np.ndarray, cost: float) -> None:
    """columns[...] = windows ([N, G, then channels or outputs, ...]), cut along axis 2 on every
    core while the pool owns them and the copy is large for its `cost` (see `_gather_cost`);
    elsewhere BLAS's threads, spinning after the GEMMs, would take the core a part wants."""
    parts = threads.parts_for(int(columns.size * cost), most=columns.shape[2]) if threads.pool_owns_cores() else 1
    if parts == 1:
        np.copyto(columns, windows)
        return

    def copy(a, b):
        np.copyto(columns[:, :, a:b], windows[:, :, a:b])
    threads.run_parts(copy, threads.bounds(columns.shape[2], parts))


def _gather_cost(counts, positions_major: bool) -> float:
    """Work per element of an im2col copy relative to an add (irrun/threads.py): a window's runs
    are the output's rows read with the stride, or the kernel's last axis positions-major.  Runs
    shorter than GATHER_SHORT_RUN cost most per element: 512 channels at 7 x 7, 4608 x 49 columns,
    0.52 ns an element (118 us on one core, about ten adds), a 1-D layer's 968-long runs 0.25.
    (Positions-major runs, 16 taps or more, contiguous: taken as two adds, not measured apart.)"""
    if positions_major:
        return 2.0
    return 8.0 if counts[-1] < GATHER_SHORT_RUN else 4.0


def _positions_major_blocks(windows, filters_t, out, blocks, buffer, pool: int = 1) -> None:
    """For each block [first, last) of positions: windows[first:last] ([positions, C_in, taps])
    copied into `buffer`, times the filters transposed ([C_in * taps, C_out]), written transposed
    into out ([C_out, positions]).  Three NumPy calls a block and little Python between them: a
    part's Python runs while the other part waits for the GIL (the audio net's 512-tap layer in
    `times_filter`'s blocks: 1.5 ms a part against 1.3 here; the net 3.5-3.6% faster, old and new
    alternating inference by inference).  `pool` > 1 (blocks a multiple of it long): the product's
    maxima (np.fmax) over each `pool` consecutive positions are written instead, at first // pool
    (`pooled_positions_major`)."""
    rows = filters_t.shape[0]
    for first, last in blocks:
        block = buffer[:(last - first) * rows].reshape(last - first, *windows.shape[1:])
        np.copyto(block, windows[first:last])
        product = np.matmul(block.reshape(last - first, rows), filters_t)
        if pool > 1:
            product, first, last = _maxima([product[tap::pool] for tap in range(pool)]), first // pool, last // pool
        np.copyto(out[:, first:last], product.T)


def one_view_of_windows(w_shape, n: int, geo: Geometry, whole, counts, spatial) -> bool:
    """Whether the layer's windows are one [positions, C_in, taps] view of its input
    (`_windows_of_one_sample`): one sample, one group, 1-D, no padding and no dilation, a kernel long
    enough for positions-major columns (an audio front end).  `pooled_positions_major` takes such
    layers."""
    groups, _, _, *kernel = w_shape
    return (n == 1 and groups == 1 and len(kernel) == 1 and kernel[0] >= POSITIONS_MAJOR_TAPS
            and geo.dilations[0] == 1 and whole[0][0] >= 0
            and whole[0][0] + (counts[0] - 1) * geo.strides[0] + kernel[0] <= spatial[0])


def _windows_of_one_sample(xs, taps: int, geo: Geometry, whole, counts) -> np.ndarray:
    """The windows of a layer that `one_view_of_windows` takes: [positions, C_in, taps], a view."""
    lo = whole[0][0]
    return window_view(xs[:, :, lo:lo + (counts[0] - 1) * geo.strides[0] + taps], [taps], (2,), geo.strides,
                       geo.dilations)[0].transpose(1, 0, 2)


def pooled_positions_major(xs, w, geo: Geometry, whole, counts, pool: int) -> np.ndarray:
    """A 1-D convolution of one sample (`one_view_of_windows`) and the max pool of `pool` taps at
    stride `pool` after it (no padding; the outputs past the last whole window dropped), in one:
    xs [1, C_in, S] -> [1, 1, C_out, counts[0] // pool], the maxima by np.fmax, NaN taps skipped,
    not yet raised to the lowest value (irrun/optimize.py's pools first, whose floor does that).
    Each block's product is pooled while in cache, as positions-major rows: `pool` rows a window,
    contiguous, where the pool over the layer's output reads a strided comb; and the transposed
    write of the product is `pool` times smaller."""
    _, og, cg, taps = w.shape
    rows, pooled = cg * taps, counts[0] // pool
    windows = _windows_of_one_sample(xs, taps, geo, whole, counts)
    filters_t = w.reshape(og, rows).T
    out = np.empty((1, 1, og, pooled), w.dtype)
    parts = _block_parts(rows * pooled * pool, pooled, rows * pooled * pool * og)
    step = threads.balanced_step(pooled, max(1, COLUMN_BLOCK_ELEMENTS // rows // pool), parts) * pool
    blocks = [(a, min(a + step, pooled * pool)) for a in range(0, pooled * pool, step)]

    def run_blocks(a, b):
        _positions_major_blocks(windows, filters_t, out.reshape(og, pooled), blocks[a:b],
                                np.empty(rows * step, w.dtype), pool)
    _blocks_in_parts(run_blocks, len(blocks), parts)
    return out


# A 2-D layer takes `pooled_rows_positions_major` at most this deep (C_in times taps): thin layers
# (the CRNN's 3-channel stem, 27), whose channel-major GEMM BLAS runs worst
POOLED_2D_MAX_DEPTH = 256
THIN_GEMM_COST = 2


def pooled_2d_suits(w_shape, n: int, counts, pool) -> bool:
    """Whether `pooled_rows_positions_major` takes a 2-D layer [1, Og, Cg, kh, kw] of one sample, at
    most POOLED_2D_MAX_DEPTH deep, whose output has a window of the max pool `pool` at least."""
    _, _, cg, *kernel = w_shape
    return n == 1 and cg * prod(kernel) <= POOLED_2D_MAX_DEPTH and all(c >= p for c, p in zip(counts, pool))


def _maxima(taps: list[np.ndarray]) -> np.ndarray:
    """np.fmax over a pool's taps (NaN taps skipped), into a new array (the only tap as it is)."""
    if len(taps) == 1:
        return taps[0]
    maxima = np.fmax(taps[0], taps[1])
    for tap in taps[2:]:
        np.fmax(maxima, tap, out=maxima)
    return maxima


def pooled_rows_positions_major(xs, w, geo: Geometry, whole, counts, pool) -> np.ndarray:
    """A thin 2-D convolution of one sample and the max pool of `pool` = (ph, pw) windows tiling its
    output after it, in one (`pooled_2d_suits`): xs [1, C_in, H, W] -> [1, 1, C_out, Ho // ph,
    Wo // pw], the maxima by np.fmax, NaN taps skipped, not yet raised to the lowest value
    (irrun/optimize.py's pools first, whose floor does that).  Per block of ph-row bands: the
    band's columns copied channel-major as im2col copies them, the product made positions-major
    (columns^T @ filters^T: BLAS runs the CRNN stem's [8192, 27] x [27, 64] 1.8x as fast as
    [64, 27] x [27, 8192]), pooled there over contiguous runs (rows of a window ph product rows
    apart, its columns neighbours), and only the pooled values written transposed into place: the
    CRNN's 3 -> 64 stem and its 2x2 / 2 pool 867 -> 560 us on one thread."""
    _, og, cg, kh, kw = w.shape
    ph, pw = pool
    rows, (height, width) = cg * kh * kw, counts
    pooled_h, pooled_w = height // ph, width // pw
    filters_t = np.ascontiguousarray(w.reshape(og, rows).T)
    out = np.empty((1, 1, og, pooled_h, pooled_w), w.dtype)
    spans = [effective_kernel(k, d) for k, d in zip((kh, kw), geo.dilations)]
    # (parts by the GEMMs' time: a thin GEMM's multiply-adds cost about twice a wide one's, the
    # CRNN stem's 14 M 340 us on one core; it took 440 us in two parts against 575 in one)
    parts = _block_parts(rows * pooled_h * ph * width, pooled_h, THIN_GEMM_COST * rows * pooled_h * ph * width * og)
    step = threads.balanced_step(pooled_h, max(1, COLUMN_BLOCK_ELEMENTS // (rows * ph * width)), parts)
    blocks = [(a, min(a + step, pooled_h)) for a in range(0, pooled_h, step)]

    def run_blocks(a, b):
        buffer = np.empty(rows * step * ph * width, w.dtype)
        for first, last in blocks[a:b]:
            top, count = first * ph, (last - first) * ph         # output rows [top, top + count)
            lo = whole[0][0] + top * geo.strides[0]
            region = [(lo, lo + (count - 1) * geo.strides[0] + spans[0]), whole[1]]
            view = window_view(zero_extended(xs, region), (kh, kw), (2, 3), geo.strides, geo.dilations)
            columns = buffer[:rows * count * width].reshape(cg, kh, kw, count, width)
            np.copyto(columns, view[0].transpose(0, 3, 4, 1, 2))
            product = thin_products.matmul(columns.reshape(rows, -1).T, filters_t).reshape(last - first, ph, width, og)
            maxima = _maxima([product[:, r] for r in range(ph)])
            bands = maxima[:, :pooled_w * pw].reshape(last - first, pooled_w, pw, og)
            out[0, 0, :, first:last] = _maxima([bands[:, :, c] for c in range(pw)]).transpose(2, 0, 1)
    _blocks_in_parts(run_blocks, len(blocks), parts)
    return out
