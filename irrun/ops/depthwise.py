"""Depthwise convolution (one input channel per group), the kernels `convolution` takes for it.

NumPy has no multiply-add that keeps a sum in registers across taps, so every kernel here adds
one tap's products at a time into an accumulator; what differs is how long the loops NumPy runs
are, and so how much of the time is NumPy's per-loop overhead:

* `_depthwise_rows` (stride 1, one output per channel, up to DEPTHWISE_ROWS_CHANNELS channels):
  channels-last, an output row's positions and channels are one contiguous run, and so is each
  tap's input for it; one `einsum` runs a loop of (row length x channels) per row and tap.
* `_depthwise_einsum` (64 channels or more otherwise): one `einsum` over channels-last windows,
  a loop over the channels per output position and tap.
* `_depthwise_taps` (fewer channels): a multiply and an add per tap over blocks of channels.
"""
from __future__ import annotations

from math import prod
from typing import TYPE_CHECKING

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .. import threads
from .window import inside_region, window_view, zero_extended

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
# The most channels of a stride-1 layer taken by rows: by then a loop over the channels alone is
# long enough (one core, us: 32 ch at 112x112 3x3 2007 by windows, 1266 tap by tap, 466 by rows;
# 144 at 56x56 862 -> 632; 240 at 28x28 5x5 645 -> 667; 672 at 14x14 5x5 375 -> 477).
DEPTHWISE_ROWS_CHANNELS = 160


def depthwise_pays(filter_shape) -> bool:
    """Whether these kernels take a filter [G, Og, Cg, K...]."""
    groups, og, cg, *kernel = filter_shape
    return cg == 1 and og <= DEPTHWISE_MAX_MULTIPLIER and (groups > 1 or prod(kernel) <= DEPTHWISE_MAX_TAPS)


def rows_pay(filter_shape, geo: Geometry) -> bool:
    groups, og, *_ = filter_shape
    return og == 1 and groups <= DEPTHWISE_ROWS_CHANNELS and all(s == 1 for s in geo.strides)


def works_channels_last(filter_shape, geo: Geometry) -> bool:
    """Whether `depthwise` turns the data channels-last for this filter (a producer that writes it
    so saves the transposing copy: irrun/optimize.py)."""
    return depthwise_pays(filter_shape) and (rows_pay(filter_shape, geo) or
                                             filter_shape[0] * filter_shape[1] >= DEPTHWISE_EINSUM_CHANNELS)


def row_filter(w: np.ndarray, counts) -> np.ndarray:
    """A [G, 1, 1, K...] filter as `_depthwise_rows` reads it, [K..., O_last * G]: each tap's
    weights repeated along the last output axis (made once per layer where it is bound)."""
    groups, _, _, *kernel = w.shape
    taps = np.moveaxis(w.reshape(groups, *kernel), 0, -1)[..., None, :]            # [K..., 1, G]
    return np.ascontiguousarray(np.broadcast_to(taps, (*kernel, counts[-1], groups))).reshape(*kernel, -1)


def depthwise(x, w, geo: Geometry, whole, counts, rows_filter=None) -> np.ndarray:
    """x [N, G, S...] with a filter [G, Og, 1, K...] -> [N, G, Og, O...] (`whole`: the padded
    range of each spatial axis; `rows_filter`: `row_filter(w, counts)` where made already)."""
    if rows_pay(w.shape, geo):
        if rows_filter is None:
            rows_filter = row_filter(w, counts)
        return _depthwise_rows(_channels_last(x, whole), rows_filter, geo, counts)
    if w.shape[0] * w.shape[1] >= DEPTHWISE_EINSUM_CHANNELS:
        return _depthwise_einsum(_channels_last(x, whole), w, geo, counts)
    return _depthwise_taps(zero_extended(x, whole), w, geo, counts)


def _channels_last(x: np.ndarray, region) -> np.ndarray:
    """x [N, C, S...] as [N, S'..., C], zero-extended to `region` ((lo, hi) per spatial axis, as
    `zero_extended`) in the same copy: a padded copy and a transposed one took twice as long
    (MobileNetV3's depthwise layers, 0.7 ms of padding)."""
    inside, widths, target = inside_region(x.shape[2:], region)
    shape = (x.shape[0], *(hi - lo for lo, hi in region), x.shape[1])
    out = np.zeros(shape, x.dtype) if any(left or right for left, right in widths) else np.empty(shape, x.dtype)
    out[(slice(None),) + target] = np.moveaxis(x[(slice(None), slice(None)) + tuple(inside)], 1, -1)
    return out


def _to_channels_first(out: np.ndarray, groups: int, og: int, counts) -> np.ndarray:
    """[N, O..., G * Og] as the [N, G, Og, O...] view the caller takes."""
    n = out.shape[0]
    return np.moveaxis(out.reshape(n, *counts, groups * og), -1, 1).reshape(n, groups, og, *counts)


def _depthwise_rows(xl, rows_filter, geo: Geometry, counts) -> np.ndarray:
    """Stride 1, one output per channel: out[n, o..., w, g] = sum over taps t of
    xl[n, o + t..., w + t_last, g] * rows_filter[t..., (w, g)] (dilated taps as far apart).

    Channels-last, one output row's (w, g) is a contiguous run and so is the input each tap
    reads for it, at offset t_last * G: a strided view [N, O_lead..., K..., O_last * G] of the
    padded input (no copy) and one `einsum` whose inner loop is the whole run.  Large layers
    run in parts along their first output axis (or along the run for 1-D ones).  xl: [N, S..., G],
    padded and C-contiguous."""
    n, *spatial, groups = xl.shape
    rank = len(spatial)
    kernel = rows_filter.shape[:-1]
    run = rows_filter.shape[-1]
    lead = tuple(counts[:-1])
    steps = xl.strides
    view = as_strided(xl, (n, *lead, *kernel, run),
                      (steps[0], *steps[1:rank], *(s * d for s, d in zip(steps[1:1 + rank], geo.dilations)),
                       steps[-1]), writeable=False)
    out = np.empty((n, *lead, run), xl.dtype)
    letters, taps = "abcdefgh"[:rank - 1], "ijklmnop"[:rank]
    subscripts = f"z{letters}{taps}x,{taps}x->z{letters}x"
    if rank > 1:
        def part(a, b):
            np.einsum(subscripts, view[:, a:b], rows_filter, out=out[:, a:b])
        length = lead[0]
    else:
        def part(a, b):
            np.einsum(subscripts, view[..., a:b], rows_filter[..., a:b], out=out[..., a:b])
        length = run
    # (a multiply-add per element and tap; a part pays from about a million of them)
    parts = threads.parts_for(out.size * prod(kernel) // 4, most=length)
    threads.run_parts(part, threads.bounds(length, parts))
    return _to_channels_first(out, groups, 1, counts)


def _depthwise_einsum(xl, w, geo: Geometry, counts) -> np.ndarray:
    """One `einsum` over channels-last windows,
    out[n, o..., g, m] = sum over taps of window[n, o..., g, tap] * w[tap, g, m].

    NumPy's einsum runs this as one multiply-add loop over the contiguous channels per output
    position and tap, the accumulator a row of channels in L1: 3-4x faster than a multiply and
    an add per tap over whole blocks (240 channels at 14x14, 5x5: 0.69 -> 0.16 ms; 144 at
    56x56, 3x3: 2.0 -> 0.87 ms), with the same products summed in the same order.  The layout
    changes (to channels-last, padded, and back) are two copies of the data.  Large layers run
    in rows of outputs on the cores: one GIL-free call per part.  xl: [N, S..., G], padded."""
    groups, og, _, *kernel = w.shape
    n, rank = xl.shape[0], len(kernel)
    windows = window_view(xl, kernel, range(1, 1 + rank), geo.strides, geo.dilations)   # [N, O..., G, K...]
    wl = np.ascontiguousarray(np.moveaxis(w.reshape(groups, og, *kernel), (0, 1), (-2, -1)))   # [K..., G, Og]
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
