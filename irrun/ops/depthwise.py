"""Depthwise convolution (one input channel per group), the kernels `convolution` takes for it.

NumPy has no multiply-add that keeps a sum in registers across taps, so most kernels here add
one tap's products at a time into an accumulator; what differs is how long the loops NumPy runs
are, and so how much of the time is NumPy's per-loop overhead.  The exception is
`_depthwise_toeplitz` (1-D, stride 1, TOEPLITZ_MIN_TAPS taps or more: a Conformer's 31), which
hands the sums to BLAS as products of blocks of outputs by a banded matrix of each channel's taps.

* `_depthwise_rows` (one output per channel, up to DEPTHWISE_ROWS_CHANNELS channels, and more at
  stride 1 while its filter, repeated along an output row, stays within ROWS_FILTER_ELEMENTS):
  channels-last, the last axis cut into its stride's
  phases, an output row's positions and channels are one contiguous run, and so is each tap's
  input for it; one `einsum` runs a loop of (row length x channels) per row and tap.
* `_depthwise_einsum` (64 output channels or more otherwise): one `einsum` over channels-last
  windows, a loop over the channels per output position and tap.
* `_depthwise_taps` (fewer: a multiplier of 2-4 on few channels): a multiply and an add per tap
  over blocks of channels.

Each takes a channels-last copy of the data, padded, except `_depthwise_inside` (large strided
layers whose data a 1x1 convolution wrote channels-last: see INSIDE_MIN_CHANNELS), which runs
`_depthwise_einsum`'s product over the data as it lies for the outputs whose windows are inside
it, and copies only what the border outputs read.
"""
from __future__ import annotations

from math import prod
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .. import threads
from .common import channels_first_view, channels_last_view
from .window import (channels_last, effective_kernel, phased_channels_last, strided_view, tap_outputs,
                     window_view, zero_extended)

if TYPE_CHECKING:
    from .convolution import Geometry

# The most outputs per input channel (beyond, and for one group with a long kernel, im2col's GEMM
# is faster: a 1-channel 1-D kernel of 512 taps into 64 channels ran tap by tap at 3.5 GFLOP/s),
# and the most taps of a one-group kernel taken here.
DEPTHWISE_MAX_MULTIPLIER = 4
DEPTHWISE_MAX_TAPS = 27
# The output channels from which one einsum over channels-last windows is used (below, its inner
# loop over channels is too short: 16 channels at 112x112 took 0.65 ms against 0.42 tap by tap, 32
# at 112x112 2.5 against 1.3 ms); and the outputs per block tap by tap (the accumulator and a
# product stay in L2).
DEPTHWISE_EINSUM_CHANNELS = 64
DEPTHWISE_BLOCK_ELEMENTS = 1 << 16
# The channels of a layer always taken by rows (one core, us, rows against the einsum over
# windows: 32 ch at 112x112 3x3 436 against 1848, tap by tap 1288; 144 at 56x56 538 against 828).
# Strided, the phases cost a copy of their own, and up to this many channels rows still pay: 96
# ch at 112x112 3x3 / 2 1557 against 1735, 128 there 2593 against 2762, 160 3096 against 3169, 128
# at 56x56 5x5 / 2 565 against 680, 160 at 28x28 5x5 / 2 196 against 213 (stop 36; 80 channels
# before, from older measurements); beyond, they are level or slower (192 at 28x28 3x3 / 2 160
# against 159, 240 there 193 against 187, 256 at 112x112 6348 against 5846).
DEPTHWISE_ROWS_CHANNELS = 160
# Beyond those channels at stride 1, rows too while the filter as `row_filter` repeats it along an
# output row (taps x row length x channels) has at most this many elements (512 KiB in f32, half
# of L2): the longer loop still pays against the einsum over windows (one core, us: 240 ch at
# 14x14 5x5 242 -> 206, 576 at 7x7 5x5 150 -> 134, 480 at 14x14 3x3 216 -> 196, 256 at 56x56 3x3
# 2850 -> 2574, 192 there 1509 -> 1169; none slower), but the repeated filter is memory the layer
# keeps (EfficientNet-B0's would be 7.7 MiB in all, its filters 0.5).
ROWS_FILTER_ELEMENTS = 1 << 17


# A strided layer of this many channels or more, and input elements per sample, whose data is
# channels-last already (a 1 x 1 convolution wrote it so: irrun/optimize.py) reads it where it is
# for the outputs whose windows lie inside it, when they are at least INSIDE_MIN_SHARE of all, and
# copies only the data the border outputs read, padded (`_depthwise_inside`): a strided layer's
# output is a quarter of its input, so the padded copy took as long as the arithmetic.  One core,
# us: 96 channels at 112x112, 3x3 / 2 1320 -> 830; 64 there 864 (by rows) -> 720; 144 at 56x56
# 5x5 / 2 704 -> 609; 96 at 56x56 300 -> 255.  Smaller layers lost to the kernel by rows or to the
# einsum over a copy: 72 at 56x56 194 -> 235, 80 there 223 -> 238, 128 at 28x28 97 -> 121.
INSIDE_MIN_CHANNELS = 64
INSIDE_MIN_ELEMENTS = 1 << 18
INSIDE_MIN_SHARE = 0.85


def depthwise_pays(filter_shape) -> bool:
    """Whether these kernels take a filter [G, Og, Cg, K...]."""
    groups, og, cg, *kernel = filter_shape
    return cg == 1 and og <= DEPTHWISE_MAX_MULTIPLIER and (groups > 1 or prod(kernel) <= DEPTHWISE_MAX_TAPS)


def rows_pay(filter_shape, geo: Geometry, counts) -> bool:
    """Whether `_depthwise_rows` takes this depthwise filter (see DEPTHWISE_ROWS_CHANNELS and
    ROWS_FILTER_ELEMENTS) for outputs of `counts` per spatial axis."""
    groups, og, _, *kernel = filter_shape
    strided = any(s > 1 for s in geo.strides)
    return og == 1 and (groups <= DEPTHWISE_ROWS_CHANNELS or
                        not strided and prod(kernel) * counts[-1] * groups <= ROWS_FILTER_ELEMENTS)


def works_channels_last(filter_shape) -> bool:
    """Whether `depthwise` turns the data channels-last for this filter (a producer that writes it
    so saves the transposing copy: irrun/optimize.py): by rows or by the einsum over windows,
    which take every filter of one output per channel (beyond the rows' channels, the einsum's
    DEPTHWISE_EINSUM_CHANNELS) and the rest from that many output channels."""
    return depthwise_pays(filter_shape) and (filter_shape[1] == 1 or
                                             filter_shape[0] * filter_shape[1] >= DEPTHWISE_EINSUM_CHANNELS)


def row_filter(w: np.ndarray, geo: Geometry, counts) -> list[tuple[int, int, int, np.ndarray]]:
    """A [G, 1, 1, K...] filter as `_depthwise_rows` reads it (made once per layer where it is
    bound): per phase p of the last axis's stride s (the input columns p, p + s, ...), the taps
    that read it, j * dilation = p + s * offset, as (p, first offset, offset step, weights
    [K_lead..., taps, O_last * G]), each tap's weights repeated along the last output axis."""
    groups, _, _, *kernel = w.shape
    stride, dilation = geo.strides[-1], geo.dilations[-1]
    taps = np.moveaxis(w.reshape(groups, *kernel), 0, -1)          # [K..., G]
    phases = []
    for phase in range(stride):
        picked = [j for j in range(kernel[-1]) if j * dilation % stride == phase]
        if picked:
            offsets = [j * dilation // stride for j in picked]
            weights = np.broadcast_to(taps[..., picked, None, :], (*kernel[:-1], len(picked), counts[-1], groups))
            phases.append((phase, offsets[0], offsets[-1] - offsets[-2] if len(picked) > 1 else 0,
                           np.ascontiguousarray(weights).reshape(*kernel[:-1], len(picked), -1)))
    return phases


class LaidOut(NamedTuple):
    """A constant filter as the kernels read it, made once where the layer is bound: `rows`,
    `row_filter`'s phases (None where the rows do not take the layer); `windows`,
    `windows_filter`'s [K..., G, Og] (0.8-12 us a call for 96-1152 channels), None where neither
    the einsum over windows nor `_depthwise_inside` can take it."""

    rows: list | None
    windows: np.ndarray | None


def layout_of(w: np.ndarray, geo: Geometry, counts) -> LaidOut:
    """What the kernels that may take this filter read (every kernel but `_depthwise_taps`, which
    reads the filter as it is: `works_channels_last` tells the two apart)."""
    groups, og, *_ = w.shape
    rows = row_filter(w, geo, counts) if rows_pay(w.shape, geo, counts) else None
    einsum = rows is None and groups * og >= DEPTHWISE_EINSUM_CHANNELS
    return LaidOut(rows, windows_filter(w) if einsum or _inside_may_pay(w.shape, geo) else None)


def windows_filter(w: np.ndarray) -> np.ndarray:
    """[G, Og, 1, K...] as the einsums over windows read it: [K..., G, Og]."""
    groups, og, _, *kernel = w.shape
    return np.ascontiguousarray(w.reshape(groups, og, *kernel).transpose((*range(2, 2 + len(kernel)), 0, 1)))


def depthwise(x, w, geo: Geometry, whole, counts, bound: LaidOut | None = None) -> np.ndarray:
    """x [N, G, S...] with a filter [G, Og, 1, K...] -> [N, G, Og, O...] (`whole`: the padded
    range of each spatial axis; `bound`: `layout_of(w, geo, counts)` where made already)."""
    if _toeplitz_pays(w.shape, geo) and x.dtype == np.float32 and np.isfinite(x).all():
        span = -(-counts[0] // TOEPLITZ_BLOCK) * TOEPLITZ_BLOCK + w.shape[-1] - 1     # whole blocks of outputs
        return _depthwise_toeplitz(zero_extended(x, [(whole[0][0], whole[0][0] + span)]), w, counts[0])
    inside = _inside_outputs(x, w.shape, geo, whole, counts)
    if inside is not None:
        return _depthwise_inside(x, w, geo, whole, counts, inside, None if bound is None else bound.windows)
    if rows_pay(w.shape, geo, counts):
        phases = bound.rows if bound is not None and bound.rows is not None else row_filter(w, geo, counts)
        return _depthwise_rows(phased_channels_last(x, whole, geo.strides[-1]), phases, geo, counts)
    if w.shape[0] * w.shape[1] >= DEPTHWISE_EINSUM_CHANNELS:
        return _depthwise_einsum(channels_last(x, whole), w, geo, counts, None if bound is None else bound.windows)
    return _depthwise_taps(zero_extended(x, whole), w, geo, counts)


# A 1-D depthwise layer of one output per channel, stride 1, with at least this many taps (a
# Conformer's 31, a 1-D ConvNeXt's 7) takes `_depthwise_toeplitz`, its outputs TOEPLITZ_BLOCK at a time
TOEPLITZ_MIN_TAPS = 7
TOEPLITZ_BLOCK = 32


def _toeplitz_pays(filter_shape, geo: Geometry) -> bool:
    groups, og, cg, *kernel = filter_shape
    return len(kernel) == 1 and og == 1 and cg == 1 and kernel[0] >= TOEPLITZ_MIN_TAPS \
        and geo.strides[0] == 1 and geo.dilations[0] == 1


def _depthwise_toeplitz(xp: np.ndarray, w: np.ndarray, outputs: int) -> np.ndarray:
    """A 1-D depthwise convolution as one batched product: each channel's outputs in blocks of B, a
    block reading B + K - 1 inputs against a banded [B + K - 1, B] matrix of the channel's taps
    (made per call: 2 MiB for 256 channels of 31 taps), so that BLAS keeps the sums in registers
    where a pass per tap went through memory (a Conformer's 256 channels x 1000, 31 taps: 1.6 ->
    0.4 ms; OpenVINO 0.4-0.6).  Finite data only: the band's zeros times an infinity would be NaN.
    xp [N, C, blocks * B + K - 1] (zero-extended to whole blocks) -> [N, C, 1, outputs]."""
    n, channels, _ = xp.shape
    taps = w.shape[-1]
    block = TOEPLITZ_BLOCK
    blocks = -(-outputs // block)
    band = np.zeros((channels, block + taps - 1, block), xp.dtype)
    weights = w.reshape(channels, taps)
    for j in range(block):
        band[:, j:j + taps, j] = weights
    step = xp.strides[2]
    windows = np.lib.stride_tricks.as_strided(xp, (n, channels, blocks, block + taps - 1),
                                              (xp.strides[0], xp.strides[1], block * step, step))
    out = np.matmul(np.ascontiguousarray(windows), band).reshape(n, channels, blocks * block)
    return np.ascontiguousarray(out[..., :outputs]).reshape(n, channels, 1, outputs)


def _inside_may_pay(filter_shape, geo: Geometry) -> bool:
    """Whether the layer's own attributes let `_depthwise_inside` take it (its data decides the rest)."""
    groups, og = filter_shape[:2]
    return og == 1 and groups >= INSIDE_MIN_CHANNELS and any(s > 1 for s in geo.strides)


def _inside_outputs(x, filter_shape, geo: Geometry, whole, counts) -> list[tuple[int, int]] | None:
    """Per spatial axis, the outputs [first, stop) whose windows lie inside the data, where
    `_depthwise_inside` pays for this layer (see INSIDE_MIN_CHANNELS); else None."""
    kernel = filter_shape[3:]
    # (the layer's own attributes first: most depthwise layers leave at the first test)
    if not _inside_may_pay(filter_shape, geo) or \
            prod(x.shape[1:]) < INSIDE_MIN_ELEMENTS or not channels_last_view(x).flags.c_contiguous:
        return None
    inside = []
    for size, (lo, _), k, s, d, count in zip(x.shape[2:], whole, kernel, geo.strides, geo.dilations, counts):
        first, _ = tap_outputs(size, count, s, lo)
        _, stop = tap_outputs(size, count, s, lo + effective_kernel(k, d) - 1)
        if stop <= first:
            return None
        inside.append((first, stop))
    if prod(b - a for a, b in inside) < INSIDE_MIN_SHARE * prod(counts):
        return None
    return inside


def _depthwise_inside(x, w, geo: Geometry, whole, counts, inside, bound_windows=None) -> np.ndarray:
    """`_depthwise_einsum` on channels-last data as it lies: the outputs `inside` (a box of whole
    windows) from windows of the data itself, each border slab (the outputs before and after the
    box along an axis, within the box along the axes before it) from a padded copy of the data it
    reads.  x: [N, G, S...] whose channels are its innermost axis in memory; `bound_windows`:
    `windows_filter(w)` where made already."""
    groups, _, _, *kernel = w.shape
    n, rank = x.shape[0], len(kernel)
    spans = [effective_kernel(k, d) for k, d in zip(kernel, geo.dilations)]
    wl = (windows_filter(w) if bound_windows is None else bound_windows)[..., 0]      # [K..., G]
    out = np.empty((n, *counts, groups), np.result_type(x, w))
    letters, taps = "abcdefgh"[:rank], "ijklmnop"[:rank]
    subscripts = f"z{letters}g{taps},{taps}g->z{letters}g"
    axes = range(1, 1 + rank)

    start = tuple(slice(lo + a * s, None) for (lo, _), (a, _), s in zip(whole, inside, geo.strides))
    windows = window_view(channels_last_view(x)[(slice(None),) + start], kernel, axes, geo.strides, geo.dilations)
    windows = windows[(slice(None),) + tuple(slice(0, b - a) for a, b in inside)]
    target = out[(slice(None),) + tuple(slice(a, b) for a, b in inside)]

    def rows(a, b):
        np.einsum(subscripts, windows[:, a:b], wl, out=target[:, a:b])
    # (a multiply-add per element and tap; a part pays from about a million of them)
    length = inside[0][1] - inside[0][0]
    threads.run_parts(rows, threads.bounds(length, threads.parts_for(target.size * prod(kernel) // 4, most=length)))
    for axis in range(rank):
        for lo_out, hi_out in ((0, inside[axis][0]), (inside[axis][1], counts[axis])):
            if hi_out <= lo_out:
                continue
            slab = [inside[b] if b < axis else (lo_out, hi_out) if b == axis else (0, counts[b]) for b in range(rank)]
            region = [(lo + a * s, lo + (b - 1) * s + span)
                      for (lo, _), (a, b), s, span in zip(whole, slab, geo.strides, spans)]
            border = window_view(channels_last(x, region), kernel, axes, geo.strides, geo.dilations)
            np.einsum(subscripts, border, wl, out=out[(slice(None),) + tuple(slice(a, b) for a, b in slab)])
    return _to_channels_first(out, groups, 1, counts)


def _to_channels_first(out: np.ndarray, groups: int, og: int, counts) -> np.ndarray:
    """[N, O..., G * Og] as the [N, G, Og, O...] view the caller takes."""
    n = out.shape[0]
    return channels_first_view(out.reshape(n, *counts, groups * og)).reshape(n, groups, og, *counts)


def _depthwise_rows(xp, rows_filter, geo: Geometry, counts) -> np.ndarray:
    """One output per channel: out[n, o..., w, g] = sum over taps t of
    x[n, s o + d t..., s_last w + d_last t_last, g] * w[t..., g] (s the strides, d the dilations).

    Channels-last, with the last axis cut into its stride's phases (`window.phased_channels_last`), tap
    t_last reads phase (d_last t_last) % s_last at offset (d_last t_last) // s_last, where one
    output row's (w, g) is a contiguous run and so is what the tap reads for it: per phase, a
    strided view [N, O_lead..., K_lead..., its taps, O_last * G] of the input (no copy) and one
    `einsum` whose inner loop is the whole run; the phases' sums added.  Large layers run in parts
    along their first output axis (or along the run for 1-D ones).  xp: [N, S_lead..., s_last,
    S_last / s_last, G], C-contiguous; rows_filter: `row_filter`'s phases."""
    n, *lead_sizes, _, _, groups = xp.shape
    rank = len(lead_sizes) + 1
    lead = tuple(counts[:-1])
    run = counts[-1] * groups
    steps = xp.strides
    letters, taps = "abcdefgh"[:rank - 1], "ijklmnop"[:rank]
    subscripts = f"z{letters}{taps}x,{taps}x->z{letters}x"
    views = []
    for phase, offset, offset_step, weights in rows_filter:
        column = xp[(slice(None),) * rank + (phase, slice(offset, None))]
        views.append((strided_view(column, (n, *lead, *weights.shape[:-1], run),
                                   (steps[0], *(steps[1 + a] * geo.strides[a] for a in range(rank - 1)),
                                    *(steps[1 + a] * geo.dilations[a] for a in range(rank - 1)),
                                    offset_step * steps[-2], steps[-1])), weights))
    out = np.empty((n, *lead, run), xp.dtype)

    def rows_of(a, b, cut):
        target = out[cut(a, b)]
        for k, (view, weights) in enumerate(views):
            pick = weights[(Ellipsis, slice(a, b))] if rank == 1 else weights
            if k == 0:
                np.einsum(subscripts, view[cut(a, b)], pick, out=target)
            else:
                target += np.einsum(subscripts, view[cut(a, b)], pick)

    if rank > 1:
        def part(a, b):
            rows_of(a, b, lambda a, b: (slice(None), slice(a, b)))
        length = lead[0]
    else:
        def part(a, b):
            rows_of(a, b, lambda a, b: (Ellipsis, slice(a, b)))
        length = run
    # (a multiply-add per element and tap; a part pays from about a million of them)
    parts = threads.parts_for(out.size * sum(v[1].size // run for v in views) // 4, most=length)
    threads.run_parts(part, threads.bounds(length, parts))
    return _to_channels_first(out, groups, 1, counts)


def _depthwise_einsum(xl, w, geo: Geometry, counts, bound_windows=None) -> np.ndarray:
    """One `einsum` over channels-last windows,
    out[n, o..., g, m] = sum over taps of window[n, o..., g, tap] * w[tap, g, m].

    NumPy's einsum runs this as one multiply-add loop over the contiguous channels per output
    position and tap, the accumulator a row of channels in L1: 3-4x faster than a multiply and
    an add per tap over whole blocks (240 channels at 14x14, 5x5: 0.69 -> 0.16 ms; 144 at
    56x56, 3x3: 2.0 -> 0.87 ms), with the same products summed in the same order.  The layout
    changes (to channels-last, padded, and back) are two copies of the data.  Large layers run
    in rows of outputs on the cores: one GIL-free call per part.  xl: [N, S..., G], padded;
    `bound_windows`: `windows_filter(w)` where made already."""
    groups, og, _, *kernel = w.shape
    n, rank = xl.shape[0], len(kernel)
    windows = window_view(xl, kernel, range(1, 1 + rank), geo.strides, geo.dilations)   # [N, O..., G, K...]
    wl = windows_filter(w) if bound_windows is None else bound_windows     # [K..., G, Og]
    out = np.empty((n, *counts, groups, og), np.result_type(xl, w))
    letters = "abcdefgh"[:rank]
    taps = "ijklmnop"[:rank]
    subscripts = f"z{letters}g{taps},{taps}gm->z{letters}gm"
    if og == 1:   # (a trailing axis of 1 would cut einsum's inner loop to one element)
        subscripts = subscripts.replace("gm", "g")
        wl, result = wl[..., 0], out[..., 0]
    else:
        result = out

    def rows(a, b):
        np.einsum(subscripts, windows[:, a:b], wl, out=result[:, a:b])
    # (a multiply-add per element and tap; a part pays from about a million of them)
    parts = threads.parts_for(out.size * prod(kernel) // 4, most=counts[0])
    threads.run_parts(rows, threads.bounds(counts[0], parts))
    return _to_channels_first(out, groups, og, counts)


def _depthwise_taps(x, w, geo: Geometry, counts) -> np.ndarray:
    """out += patch * w[tap], tap by tap, over blocks of channels of about DEPTHWISE_BLOCK_ELEMENTS
    outputs (NumPy makes two passes per tap, a multiply and an add: the block stays in cache)."""
    groups, og, _, *kernel = w.shape
    n = x.shape[0]
    out = np.empty((n, groups, og, *counts), x.dtype)
    per_group = prod(counts) * og
    step = max(1, DEPTHWISE_BLOCK_ELEMENTS // per_group)
    spread = (1,) * len(counts)
    taps = [tuple(slice(t * d, t * d + (c - 1) * s + 1, s) for t, d, s, c in zip(tap, geo.dilations, geo.strides, counts))
            for tap in np.ndindex(*kernel)]
    weights = [w[(slice(None), slice(None), 0) + tap].reshape(groups, og, *spread) for tap in np.ndindex(*kernel)]
    for i in range(n):
        for first in range(0, groups, step):
            last = min(first + step, groups)
            acc = out[i, first:last]
            tmp = np.empty_like(acc)
            for k, (tap, weight) in enumerate(zip(taps, weights)):
                patch = x[(i, slice(first, last), None) + tap]
                if k == 0:
                    np.multiply(patch, weight[first:last], out=acc)
                else:
                    np.multiply(patch, weight[first:last], out=tmp)
                    acc += tmp
    return out
