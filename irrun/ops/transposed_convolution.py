"""The transposed convolutions' kernel (ConvolutionBackpropData, GroupConvolutionBackpropData).

Input element i meets output position o = i * s + t * d - pads_begin through tap t.  Two ways:

  phases   (dilation 1, stride > 1) the output is s^rank interleaved grids, one per phase
           r = (o + pads_begin) mod s; grid point u = (o + pads_begin) // s sums
           W[r + s j] x[u - j] over j < J = ceil(K / s): a plain correlation of x with
           the sub-kernel of its phase.  One im2col of x over J-wide windows, then one
           GEMM for all phases [phases * C_out, C_in * J^rank] @ [C_in * J^rank, U],
           each phase written once into its strided slice of the output.  The products
           are those of the direct sum (a sub-kernel of fewer than J taps is padded
           with zeros); nothing is accumulated in the output.
  scatter  one GEMM gives every tap's contribution [C_out * K, I], then a strided add
           per tap scatters it into the output (col2im): the only way with dilations,
           and at stride 1, where there are no phases to gain.

64 -> 32 channels, 4x4 stride 2 at 28x28 (a decoder's upsampling): the scatter's 16 strided
adds took as long as its GEMM (390 against 360 us on one core); the phases take 0.73 of the
scatter's time there, 0.56 for 32 -> 16 channels at 56x56, the same for a 2x2 stride-2 kernel.
"""
from __future__ import annotations

from math import prod

import numpy as np

from .. import threads
from .convolution import Geometry, _compute_dtype, _in_batch_slices, _to_output
from .window import transposed_axis_output, transposed_pads, window_view, zero_extended


def phases_pay(kernel, geo: Geometry) -> bool:
    """Whether the phase kernel runs: dilation 1, every kernel size a multiple of its stride (no
    zero taps: 3x3 at stride 2 would multiply 16 taps for 9 and took 1.4x the scatter's time), and
    some stride below its kernel size (the scatter's adds then overlap)."""
    return all(d == 1 for d in geo.dilations) and all(k % s == 0 for k, s in zip(kernel, geo.strides)) \
        and any(k > s > 1 for k, s in zip(kernel, geo.strides))


def conv_transposed(x: np.ndarray, w: np.ndarray, geo: Geometry, output_spatial=None,
                    phase_filters: np.ndarray | None = None) -> np.ndarray:
    """x [N, G*Cg, I...], w [G, Cg, Og, K...] -> [N, G*Og, O...].  `phase_filters`: what
    `phase_filters_of(w, strides)` gives, made once for a constant filter."""
    groups, cg, og, *kernel = w.shape
    spatial = x.shape[2:]
    pb, pe = transposed_pads(spatial, kernel, geo.strides, geo.dilations, geo.pads_begin, geo.pads_end,
                             geo.output_padding, geo.auto_pad, output_spatial)
    if output_spatial is None:
        output_spatial = [transposed_axis_output(*args) for args in
                          zip(spatial, kernel, geo.strides, geo.dilations, pb, pe, geo.output_padding)]
    out_dtype, ct = x.dtype, _compute_dtype(x.dtype)
    x, w = x.astype(ct, copy=False), w.astype(ct, copy=False)
    if phases_pay(kernel, geo):
        if phase_filters is None:
            phase_filters = phase_filters_of(w, geo.strides)
        out = _in_batch_slices(lambda xs: _phases(xs, phase_filters, w.shape, geo.strides, pb, output_spatial), x,
                               groups * cg * prod(phase_filters.shape[4:]) * prod(spatial))
    else:
        out = _in_batch_slices(lambda xs: _scatter_taps(xs, w, geo, pb, output_spatial), x,
                               groups * og * prod(kernel) * prod(spatial))
    return _to_output(out.reshape(x.shape[0], groups * og, *output_spatial), out_dtype)


def phase_filters_of(w: np.ndarray, strides) -> np.ndarray:
    """w [G, Cg, Og, K...] as [G, s..., Og, Cg, J...], J = K / s (`phases_pay`: K a multiple of s):
    phase r's sub-kernel at window position a is tap r + s (J - 1 - a) (the window runs over
    x[u - J + 1 .. u])."""
    groups, cg, og, *kernel = w.shape
    rank = len(kernel)
    reach = [k // s for k, s in zip(kernel, strides)]
    picked = w
    for axis, (s, j) in enumerate(zip(strides, reach)):
        taps = np.arange(s)[:, None] + s * (j - 1 - np.arange(j))[None, :]     # [phase, window position]
        picked = np.take(picked, taps, axis=3 + 2 * axis)                       # that axis -> (phase, position)
    # picked: [G, Cg, Og, s0, J0, s1, J1, ...] -> [G, s..., Og, Cg, J...]
    phases = tuple(3 + 2 * a for a in range(rank))
    positions = tuple(4 + 2 * a for a in range(rank))
    return np.ascontiguousarray(picked.transpose((0,) + phases + (2, 1) + positions))


def _phases(x, filters, w_shape, strides, pads_begin, output_spatial) -> np.ndarray:
    groups, cg, og, *kernel = w_shape
    rank = len(kernel)
    n = x.shape[0]
    reach = filters.shape[-rank:]
    # the grid points each phase needs, and the input windows [u - J + 1, u] they read
    first = [p // s for p, s in zip(pads_begin, strides)]
    last = [(o - 1 + p) // s for o, p, s in zip(output_spatial, pads_begin, strides)]
    points = [b - a + 1 for a, b in zip(first, last)]
    region = [(a - j + 1, b + 1) for a, b, j in zip(first, last, reach)]
    axes = tuple(range(2, 2 + rank))
    windows = window_view(zero_extended(x, region), reach, axes)  # [N, G*Cg, U..., J...]
    windows = windows.reshape(n, groups, cg, *points, *reach)
    order = (0, 1, 2) + tuple(range(3 + rank, 3 + 2 * rank)) + tuple(range(3, 3 + rank))
    columns = np.ascontiguousarray(windows.transpose(order)).reshape(n, groups, cg * prod(reach), prod(points))
    phases = prod(strides)
    grids = threads.matmul(filters.reshape(groups, phases * og, cg * prod(reach)), columns)
    grids = grids.reshape(n, groups, *strides, og, *points)
    out = np.empty((n, groups, og, *output_spatial), x.dtype)    # every position is in one phase
    for phase in np.ndindex(*strides):
        # output o = u s + r - pads_begin for grid point u: from o0 = (r - pads_begin) mod s, every s-th
        start = [(r - p) % s for r, p, s in zip(phase, pads_begin, strides)]
        counts = [max(0, -(-(o - o0) // s)) for o, o0, s in zip(output_spatial, start, strides)]
        if not all(counts):
            continue
        offsets = [(o0 + p) // s - a for o0, p, s, a in zip(start, pads_begin, strides, first)]
        target = out[(slice(None),) * 3 + tuple(slice(o0, None, s) for o0, s in zip(start, strides))]
        target[...] = grids[(slice(None), slice(None)) + phase + (slice(None),)
                            + tuple(slice(b, b + c) for b, c in zip(offsets, counts))]
    return out


def _scatter_taps(x, w, geo: Geometry, pads_begin, output_spatial) -> np.ndarray:
    """One matmul for every tap's contribution, then a strided add per tap (col2im)."""
    groups, cg, og, *kernel = w.shape
    n, spatial = x.shape[0], x.shape[2:]
    per_tap = w.reshape(groups, cg, og * prod(kernel)).transpose(0, 2, 1)
    contrib = threads.matmul(per_tap, x.reshape(n, groups, cg, -1)).reshape(n, groups, og, *kernel, *spatial)
    out = np.zeros((n, groups, og, *output_spatial), x.dtype)
    everything = (slice(None),) * 3
    for tap in np.ndindex(*kernel):
        # Input element i lands on output position i * s + t * d - pads_begin.
        src, dst = [], []
        for t, size, out_size, s, d, begin in zip(tap, spatial, output_spatial, geo.strides, geo.dilations,
                                                   pads_begin):
            shift = t * d - begin
            first = max(0, -(shift // s))                 # ceil(-shift / s)
            last = min(size - 1, (out_size - 1 - shift) // s)
            if last < first:
                break
            src.append(slice(first, last + 1))
            dst.append(slice(first * s + shift, last * s + shift + 1, s))
        else:
            out[everything + tuple(dst)] += contrib[everything + tap + tuple(src)]
    return out
