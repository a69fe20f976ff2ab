"""Pooling: AvgPool-1/14/16, MaxPool-1/8/14, AdaptiveAvgPool-8, AdaptiveMaxPool-8.

AvgPool and MaxPool slide a window of `kernel` taps (spaced by `dilations`)
over the padded data; the output size and pads come from `window.py`.
AdaptivePools cover the input with `output_size` windows per axis, window i
spanning [floor(i * in / out), ceil((i + 1) * in / out)).

What OpenVINO 2026.4.1 computes, beyond the op specs (specs/errata/pooling.md):

* AvgPool divisor.  exclude-pad: the real elements in the window.
  Otherwise the kernel size whenever any pad (after auto_pad) is non-zero, even
  for the part of a ceil-mode window past the end pad; with no pads at all, the
  real elements again (the ceil-mode overhang is not counted).  A window with
  no real element averages to 0 (the reference; the CPU plugin gives NaN).
* MaxPool keeps a running maximum that starts at the type's lowest value and
  moves on a strictly greater element: NaN and -inf never win, a window with
  no winner gives the lowest value and index 0 of its channel, ties go to the
  first element in row-major window order.  Indices are flat over the whole
  input, then taken modulo the size of dims [axis:].
* AdaptiveMaxPool's running maximum starts at the window's first element: a
  NaN there wins, NaN elsewhere never does.  Indices are flat per channel.
* Integer averages are rounded half to even; f16 is computed in f32 (as the
  CPU plugin does, so an empty MaxPool window becomes -inf in f16).
"""
from __future__ import annotations

from math import prod
from typing import Iterator

import numpy as np

from .. import threads
from ..errors import ShapeError
from ..registry import Op, TensorType, register
from ..shapes import ANY, format_shape, is_static_dim, normalize_axis
from .common import scalar_extremum
from .window import (SAME, axis_output, copy_gathered, effective_kernel, inside_region, resolve_pads, same_pads,
                     strided_view, tap_outputs, window_output_dims)

_POOL_RANKS = (3, 4, 5)
# MaxPool's values on one thread: channels in blocks of this many input elements (the block, its
# rows' maxima and its output then stay in a core's L2: ResNet's 3x3 / 2 pool 722 -> 680 us)
POOL_BLOCK_ELEMENTS = 1 << 18
SEPARABLE_POOL_COST = 2.0     # (see _SlidingPool.parts_cost)


# ---------------------------------------------------------------- shared helpers

def _check_data(data: TensorType) -> None:
    if data.rank is not None and data.rank not in _POOL_RANKS:
        raise ShapeError(f"data must be a 3D, 4D or 5D tensor, got {format_shape(data.shape)}")
    if data.shape is not None:
        for axis, what in ((0, "batch"), (1, "channel")):
            if data.shape[axis] == 0:
                raise ShapeError(f"{what} dimension of data {format_shape(data.shape)} is zero")


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    """Floats narrower than f32 are pooled in f32, as the CPU plugin does."""
    if dtype.kind == "f" and dtype.itemsize < 4:
        return np.dtype(np.float32)
    return dtype


def lowest_value(dtype: np.dtype):
    return np.finfo(dtype).min if dtype.kind == "f" else np.iinfo(dtype).min


def _mean_as(total: np.ndarray, count, dtype: np.dtype) -> np.ndarray:
    """total / count in `dtype`; 0 where count is 0, integer results rounded half to even."""
    count = np.asarray(count)
    if count.ndim == 0 and count > 0:
        total /= count     # one divisor for every window (total is ours to overwrite)
        mean = total
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = np.where(count > 0, total / np.maximum(count, 1), 0)
    if dtype.kind in "iu":
        mean = np.rint(mean)
    return mean.astype(dtype)


def _narrow(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Back to the input type; f32's lowest becomes -inf in f16, as on the CPU plugin."""
    if values.dtype == dtype:
        return values          # (NumPy's error state alone costs a microsecond a call)
    with np.errstate(over="ignore"):
        return values.astype(dtype, copy=False)


def _sum_dtype(dtype: np.dtype) -> np.dtype:
    """Integers are summed in f64: exact for any realistic window, and rounded once at the end."""
    return np.dtype(np.float64) if dtype.kind in "iub" else _compute_dtype(dtype)


def _flat_offsets(shape: tuple[int, ...]) -> np.ndarray:
    """(N, C, 1, ...) array of n * C * S + c * S: where each channel starts in the flat input."""
    n, c, spatial = shape[0], shape[1], prod(shape[2:])
    offsets = (np.arange(n, dtype=np.int64)[:, None] * c + np.arange(c, dtype=np.int64)[None, :]) * spatial
    return offsets.reshape((n, c) + (1,) * (len(shape) - 2))


def _flat_position(positions: list[np.ndarray], spatial: tuple[int, ...]) -> np.ndarray:
    """Row-major flat index of per-axis positions inside one channel."""
    flat = np.zeros(np.broadcast_shapes(*(p.shape for p in positions)), dtype=np.int64)
    for p, size in zip(positions, spatial):
        flat = flat * size + p
    return flat


def _along(values: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    """A 1-D array reshaped to lie along `axis` of an `ndim`-D array."""
    shape = [1] * ndim
    shape[axis] = values.size
    return values.reshape(shape)


def _separable(x: np.ndarray, combine, fill, kernel, strides, dilations, pads_begin, dims) -> np.ndarray:
    """`combine` (np.fmax, np.add) over each window's taps, one spatial axis at a time (a box's
    maximum or sum is that over one axis of those over the others): k1 + k2 passes for a k1 x k2
    window instead of k1 * k2.  The first axis first: its taps are whole rows, which NumPy's loops
    take contiguous, and the strided taps of the last axis then read the rows already reduced.
    No padded copy: a tap is taken over the outputs whose window finds it inside the data (the
    padding's `fill` changes nothing), the first two taps that every output sees starting the
    result; an output whose window finds no data holds `fill`.  Returns x itself or a view of it
    where every window is one tap.  Stride-1 windows take `_flat_grid`."""
    if all(s == 1 for s in strides) and max(kernel, default=1) > 1:
        return _flat_grid(x, combine, fill, kernel, dilations, pads_begin, dims)
    data = x
    for axis, (k, s, d, o, pb) in enumerate(zip(kernel, strides, dilations, dims, pads_begin)):
        if axis == len(kernel) - 1 and s == 1 and k > 1 and o < SHORT_ROW:
            data = _short_rows(data, combine, fill, k, d, pb, o)
            continue
        if axis == len(kernel) - 1 and s > 1 and k > 1 and combine in _ORDERLESS and data.flags.c_contiguous:
            data = _strided_last_axis(data, combine, fill, k, s, d, pb, o)
            continue
        size, before = data.shape[2 + axis], (slice(None),) * (2 + axis)
        views = []                  # (first, last output, what tap t reads for them)
        for t in range(k):
            shift = t * d - pb      # the input index of output 0's tap t
            first, last = tap_outputs(size, o, s, shift)
            if last > first:
                start = first * s + shift
                views.append((first, last, data[before + (slice(start, start + (last - first - 1) * s + 1, s),)]))
        covering = [v for v in views if v[:2] == (0, o)]
        partial = [v for v in views if v[:2] != (0, o)]
        if len(covering) == len(views) == 1:      # a window of one: the data as it is
            data = covering[0][2]
            continue
        target = np.empty(data.shape[:2 + axis] + (o,) + data.shape[3 + axis:], data.dtype)
        if len(covering) >= 2:
            combine(covering[0][2], covering[1][2], out=target)
            covering = covering[2:]
        elif covering:
            np.copyto(target, covering.pop()[2])
        else:
            target.fill(fill)
        for first, last, view in covering + partial:
            reached = target[before + (slice(first, last),)]
            combine(reached, view, out=reached)
        data = target
    return data


# Combines whose result does not depend on the order of the taps (`_strided_last_axis` takes
# them in another order than `_separable`'s: a sum's rounding would change)
_ORDERLESS = frozenset({np.fmax, np.fmin, np.maximum, np.minimum})


def _strided_last_axis(data: np.ndarray, combine, fill, k: int, s: int, d: int, pb: int, o: int) -> np.ndarray:
    """`combine` over the last axis's k taps at stride s > 1 (dilation d, pb padded before) of
    contiguous data: the windows that lie inside the data as every stride-1 window's taps combined
    on the data flattened (k - 1 contiguous passes; windows across a row's end are never read),
    then one strided copy of every s-th; the few at the edges, which reach into the padding, tap
    by tap.  Strided taps are NumPy's slow loops: ResNet's 3x3 / 2 max pool over 64 x 112 x 112,
    372 -> 295 us on one core."""
    size, span = data.shape[-1], (k - 1) * d
    first, last = min(o, -(-pb // s)), min(o, (size - 1 - span + pb) // s + 1)
    target = np.empty(data.shape[:-1] + (o,), data.dtype)
    rows = data.size // size if size else 0
    if last > first and rows and span < size:
        flat = data.reshape(-1)
        length = flat.size - span
        every = np.empty(length, data.dtype)
        combine(flat[:length], flat[d:d + length], out=every)
        for t in range(2, k):
            combine(every, flat[t * d:t * d + length], out=every)
        inside = strided_view(every[first * s - pb:], (rows, last - first), (size * data.itemsize, s * data.itemsize))
        np.copyto(target.reshape(rows, o)[:, first:last], inside)
    for j in [*range(min(first, o)), *range(max(last, first), o)]:
        taps = [i for i in range(j * s - pb, j * s - pb + span + 1, d) if 0 <= i < size]
        column = target[..., j]
        if not taps:
            column.fill(fill)
        elif len(taps) == 1:
            np.copyto(column, data[..., taps[0]])
        else:
            combine(data[..., taps[0]], data[..., taps[1]], out=column)
            for i in taps[2:]:
                combine(column, data[..., i], out=column)
    return target


def _flat_grid(x: np.ndarray, combine, fill, kernel, dilations, pads_begin, dims) -> np.ndarray:
    """`combine` over stride-1 windows with every axis's taps contiguous slices: x copied once into
    a buffer padded with `fill` to (outputs + span - 1) per axis and flattened, a tap along an axis
    is then the buffer shifted by its offset, one NumPy call over every channel (positions whose
    window runs past an axis's end read the next row or channel, and are cropped).  Contiguous
    calls over the whole block beat `_separable`'s strided ones at every size measured, though
    they cover the padded grid: YOLO's SPPF, a 5x5 / 1 max pool over 128 x 10 x 10, 68 -> 42 us;
    3x3 / 1 over 64 x 56 x 56 452 -> 245 us, over 64 x 112 x 112 2190 -> 1454 us (one thread).
    Returns a view [N, C, *dims] of the result."""
    grid = tuple(o + (k - 1) * d for o, k, d in zip(dims, kernel, dilations))
    padded = np.full(x.shape[:2] + grid, fill, x.dtype)
    source, _, target = inside_region(x.shape[2:], [(-pb, width - pb) for pb, width in zip(pads_begin, grid)])
    everything = (slice(None), slice(None))
    padded[everything + target] = x[everything + tuple(source)]
    data, spare = padded.reshape(-1), np.empty(padded.size, x.dtype)
    length = data.size
    for axis, (k, d) in enumerate(zip(kernel, dilations)):
        if k == 1:
            continue
        step = d * prod(grid[axis + 1:])
        length -= (k - 1) * step
        result = spare[:length]     # (the axis before's result, or the padded data, is read here)
        combine(data[:length], data[step:step + length], out=result)
        for t in range(2, k):
            combine(result, data[t * step:t * step + length], out=result)
        data, spare = spare, data
    return data.reshape(padded.shape)[(slice(None), slice(None)) + tuple(slice(0, o) for o in dims)]


# Output rows shorter than this take their last axis's taps by `_short_rows`: a tap over the rows
# one by one is a NumPy loop per row, most of its time overhead on short ones (YOLO's SPPF, a 5x5 /
# 1 max pool over 128 x 10 x 10: `infer` of the pool alone 147 -> 92 us).
SHORT_ROW = 32


def _tiled(x: np.ndarray, combine, kernel, dims, out: np.ndarray) -> np.ndarray:
    """`combine` over windows that tile the data (stride = kernel, no dilation, no padding, none
    reaching past the end), one pooled spatial axis at a time in `_separable`'s order: the data cut
    to the outputs' span and each pooled axis split into (outputs, taps), a view, whose taps are
    then whole rows for the first axis and every k-th element for the last.  The last pooled
    axis's pass writes into `out` (a 2 x 1 window's one pass too, where a copy followed it: the
    CRNN's 256 x 8 x 64 pool alone 33 -> 21 us).  (2x2 / 2 over 64 x 32 x 256: 330 -> 255 us;
    `_separable`'s per-tap bookkeeping and the copy from its own result into the output took the
    difference.)"""
    if _tiled_by_pairs(x, combine, kernel, dims, out):
        return out
    data = x[(slice(None), slice(None)) + tuple(slice(0, o * k) for k, o in zip(kernel, dims))]
    pooled = [axis for axis, k in enumerate(kernel) if k > 1]
    if not pooled:
        np.copyto(out, data)
        return out
    for axis in pooled:
        k, o, at = kernel[axis], dims[axis], 2 + axis
        split = data.reshape(data.shape[:at] + (o, k) + data.shape[at + 1:])
        taps = [split[(slice(None),) * (at + 1) + (t,)] for t in range(k)]
        target = out if axis == pooled[-1] else np.empty(taps[0].shape, data.dtype)
        combine(taps[0], taps[1], out=target)
        for view in taps[2:]:
            combine(target, view, out=target)
        data = target
    return data


def _tiled_by_pairs(x: np.ndarray, combine, kernel, dims, out: np.ndarray) -> bool:
    """`_tiled` for windows two taps wide on the last axis, by contiguous passes: on x flattened,
    each pooled axis's taps combined as shifted slices (as `_flat_grid` does), the last axis's
    as each element with its right neighbour, so that every window's result stands at its first
    element; those are then every other element of the rows, which `copy_gathered` copies out at
    the speed of a contiguous copy (NumPy's strided loops, which `_tiled` runs for the last axis,
    take an element at a time).  The positions past a window's reach are computed and never read.
    (The CRNN's 2x2 / 2 pool over 64 x 32 x 256: 292 -> 200 us on one thread.)  False, nothing
    written, where x is not contiguous."""
    if kernel[-1] != 2 or not x.flags.c_contiguous or not x.size:
        return False
    grid = x.shape[2:]
    data, buffers = x.reshape(-1), []
    length = x.size
    for axis, k in enumerate(kernel):
        if k == 1:
            continue
        step = prod(grid[axis + 1:])
        length -= (k - 1) * step
        if len(buffers) < 2:
            buffers.append(np.empty(x.size, x.dtype))
        target = buffers[0] if data is not buffers[0] else buffers[1]
        result = target[:length]
        combine(data[:length], data[step:step + length], out=result)
        for t in range(2, k):
            combine(result, data[t * step:t * step + length], out=result)
        data = target
    firsts = data.reshape(x.shape)[(slice(None), slice(None)) + tuple(slice(0, o * k, k) for k, o in zip(kernel, dims))]
    copy_gathered(out, firsts)
    return True


def _short_rows(data: np.ndarray, combine, fill, k: int, d: int, pb: int, o: int) -> np.ndarray:
    """`combine` over the last axis's k taps at stride 1 (dilation d, pb padded before) on short
    rows: the rows copied once into a buffer padded with `fill` to o + (k - 1) d, each tap then one
    slice of the whole buffer flattened (one NumPy loop); the positions a tap reads past a row's
    end belong to no output and are cropped.  Returns a view [..., o] of the result."""
    size, width = data.shape[-1], o + (k - 1) * d
    padded = np.full(data.shape[:-1] + (width,), fill, data.dtype)
    first, last = max(pb, 0), min(pb + size, width)
    if last > first:
        padded[..., first:last] = data[..., first - pb:last - pb]
    flat = padded.reshape(-1)
    length = flat.size - (k - 1) * d
    result = np.empty_like(flat)
    combine(flat[:length], flat[d:d + length], out=result[:length])
    for t in range(2, k):
        combine(result[:length], flat[t * d:t * d + length], out=result[:length])
    return result.reshape(padded.shape)[..., :o]


def by_channels(fn, x: np.ndarray, cost: float) -> np.ndarray:
    """fn(x) for [N, C, ...] data whose channels pool independently: in parts along C on every
    core when large (`cost`: work per element relative to an add, irrun/threads.py)."""
    parts = threads.parts_for(int(x.size * cost), most=x.shape[1]) if x.ndim > 1 else 1
    if parts == 1:
        return fn(x)
    pieces = threads.run_parts(lambda a, b: fn(x[:, a:b]), threads.bounds(x.shape[1], parts))
    return np.concatenate(pieces, axis=1)


# ---------------------------------------------------------------- AvgPool and MaxPool

class _SlidingPool(Op):
    """Shape rule and window extraction shared by AvgPool and MaxPool."""

    outputs_are_new = True    # for the executor: no output is ever a view of the input

    def spatial_rank(self, inputs):
        rank = inputs[0].rank
        return rank - 2 if rank in _POOL_RANKS else None

    @property
    def kernel(self) -> tuple[int, ...]:
        return self.attrs.kernel

    @property
    def dilations(self) -> tuple[int, ...]:
        return self.attrs.get("dilations") or (1,) * len(self.kernel)

    def _pads(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Declared pads; OpenVINO reads an empty list as zeros."""
        n = len(self.kernel)
        return self.attrs.pads_begin or (0,) * n, self.attrs.pads_end or (0,) * n

    def infer_window(self, data: TensorType) -> tuple[tuple, dict[int, str]]:
        _check_data(data)
        n = len(self.kernel)
        for name in ("strides", "pads_begin", "pads_end", "dilations"):
            value = self.attrs.get(name)
            if value and len(value) != n:
                raise ShapeError(f"{name} has {len(value)} values, kernel has {n}")
        if data.shape is None:
            return (ANY,) * (2 + n), {}
        pads_begin, pads_end = self._pads()
        dims, notes = window_output_dims(data.shape[2:], self.kernel, self.attrs.strides, self.dilations,
                                         pads_begin, pads_end, self.attrs.auto_pad, self.attrs.rounding_type)
        return tuple(data.shape[:2]) + tuple(dims), notes

    def geometry(self, spatial: tuple[int, ...]) -> tuple[list[int], list[int], list[int]]:
        """Pads after auto_pad, and the output size, for concrete spatial sizes."""
        pads_begin, pads_end = resolve_pads(spatial, self.kernel, self.attrs.strides, self.dilations,
                                            *self._pads(), self.attrs.auto_pad)
        out = [axis_output(x, k, s, d, pb, pe, self.attrs.rounding_type)
               for x, k, s, d, pb, pe in zip(spatial, self.kernel, self.attrs.strides, self.dilations,
                                             pads_begin, pads_end)]
        return pads_begin, pads_end, out

    def padded(self, x: np.ndarray, fill, pads_begin, out, dtype: np.dtype) -> np.ndarray:
        """x as `dtype`, padded with `fill` as far as the windows reach.

        The end is padded as far as the last window reaches, which can be past
        pads_end in ceil mode (that overhang holds `fill` too).
        """
        spans = [effective_kernel(k, d) for k, d in zip(self.kernel, self.dilations)]
        widths = []
        for x_len, o, s, span, pb in zip(x.shape[2:], out, self.attrs.strides, spans, pads_begin):
            reach = (o - 1) * s + span
            widths.append((pb, max(reach - pb - x_len, 0)))
        if not any(pb or pe for pb, pe in widths):
            return x.astype(dtype, copy=False)
        padded = np.empty(x.shape[:2] + tuple(n + pb + pe for n, (pb, pe) in zip(x.shape[2:], widths)), dtype)
        inside = [slice(pb, pb + n) for n, (pb, _) in zip(x.shape[2:], widths)]
        padded[(slice(None), slice(None)) + tuple(inside)] = x
        # only the border is filled (np.full would write every element twice)
        for axis, (pb, pe) in enumerate(widths):
            index = [slice(None)] * padded.ndim
            for lo, hi in ((0, pb), (padded.shape[2 + axis] - pe, padded.shape[2 + axis])):
                if hi > lo:
                    index[2 + axis] = slice(lo, hi)
                    padded[tuple(index)] = fill
        return padded

    def taps(self, padded: np.ndarray, out) -> Iterator[np.ndarray]:
        """For each kernel tap in row-major order, the (N, C, *out) view of what it sees in every window.

        Pools accumulate tap by tap: a few passes over output-sized arrays, no window copy.
        """
        everything = (slice(None), slice(None))
        for tap in np.ndindex(*self.kernel):
            yield padded[everything + tuple(slice(t * d, t * d + max((o - 1) * s + 1, 0), s) for t, d, o, s in
                                            zip(tap, self.dilations, out, self.attrs.strides))]

    def parts_cost(self) -> float:
        """Work per input element, relative to an add, for cutting a pool into parts (irrun/threads.py).
        Windows of at most 2 per axis are two strided passes at memory speed, which lost in parts at
        every size measured (MaxPool 2x2 over 1.6 Mi elements: 780 -> 856 us; AvgPool 2x2 / 2 over
        784 Ki: 411 -> 527); larger ones pay from about 512 Ki elements (MaxPool 3x3 / 2 over 784 Ki:
        651 -> 578 us; AvgPool 3x3 / 1 over 196 Ki: 589 -> 600, so not there)."""
        return SEPARABLE_POOL_COST if max(self.kernel, default=1) > 2 else 0.0

    def real_taps(self, spatial, pads_begin, out) -> np.ndarray:
        """Per output position, how many window taps land on real (not padding) elements."""
        n = len(spatial)
        count = np.ones((1,) * n, dtype=np.int64)
        for axis, (x, o, k, s, d, pb) in enumerate(zip(spatial, out, self.kernel, self.attrs.strides,
                                                        self.dilations, pads_begin)):
            real = np.zeros(o, np.int64)
            for t in range(k):
                first, last = tap_outputs(x, o, s, t * d - pb)
                real[first:max(first, last)] += 1
            count = count * _along(real, axis, n)
        return count


@register("AvgPool", 1, 14, 16)
class AvgPool(_SlidingPool):
    def infer(self, inputs):
        data = inputs[0]
        shape, notes = self.infer_window(data)
        if self.attrs.exclude_pad and data.shape is not None:
            self._check_windows_touch_data(data.shape[2:])
        return [TensorType(shape, data.etype, notes=notes)]

    def _check_windows_touch_data(self, spatial) -> None:
        """With exclude-pad, OpenVINO refuses pads that could hold a whole window."""
        for axis, (x, k, s, d) in enumerate(zip(spatial, self.kernel, self.attrs.strides, self.dilations)):
            if not is_static_dim(x):
                continue
            if self.attrs.auto_pad in SAME:
                pb, pe = same_pads(x, k, s, d, self.attrs.auto_pad)
            elif self.attrs.auto_pad == "valid":
                pb, pe = 0, 0
            else:
                pb, pe = (pads[axis] for pads in self._pads())
            span = effective_kernel(k, d)
            if pb >= span or pe >= span:
                raise ShapeError(f"with exclude-pad, a window on spatial dim {axis + 2} can lie entirely in the "
                                 f"padding (window {span}, pads {pb}/{pe}); OpenVINO requires pads smaller than "
                                 f"the window")

    def run(self, x):
        return by_channels(self.average, x, self.parts_cost())

    def average(self, x):
        spatial = x.shape[2:]
        pads_begin, pads_end, out = self.geometry(spatial)
        data = x.astype(_sum_dtype(x.dtype), copy=False)
        if tuple(self.kernel) == spatial and not any(pads_begin) and not any(pads_end) and spatial \
                and all(d == 1 for d in self.dilations):
            # one window over all the data (a classifier's global pool, 7 x 7 over 2048 channels): one
            # reduction, not a pass per tap (338 -> 80 us)
            total = data.reshape(x.shape[:2] + (-1,)).sum(axis=-1).reshape(x.shape[:2] + (1,) * len(spatial))
            return _mean_as(total, prod(spatial), x.dtype)
        total = _separable(data, np.add, 0, self.kernel, self.attrs.strides, self.dilations, pads_begin, out)
        if np.may_share_memory(total, x):      # (windows of one tap: `_mean_as` divides in place)
            total = total.copy()
        if not self.attrs.exclude_pad and (any(pads_begin) or any(pads_end)):
            count = prod(self.kernel)
        else:
            count = self.real_taps(spatial, pads_begin, out)
        return _mean_as(total, count, x.dtype)


@register("MaxPool", 1, 8, 14)
class MaxPool(_SlidingPool):
    @property
    def has_indices(self) -> bool:
        return self.version >= 8

    def infer(self, inputs):
        data = inputs[0]
        shape, notes = self.infer_window(data)
        values = TensorType(shape, data.etype, notes=notes)
        if not self.has_indices:
            return [values]
        if data.rank is not None:
            normalize_axis(self.attrs.axis, data.rank, "axis")
        return [values, TensorType(shape, self.attrs.index_element_type, notes=notes)]

    def run(self, x):
        return self.pool(x, with_indices=self.has_indices)

    def bind(self, step):
        """MaxPool-8/14 with nobody reading the indices: the values alone (unless `run` was replaced)."""
        if self.has_indices and not any(step.used[1:]) and not self.run_replaced():
            # (the IR may even leave the port out)
            return lambda x: (self.values(x), None)
        if not self.has_indices and not self.run_replaced():
            return self.values
        return None

    def values(self, x: np.ndarray, floor: bool = True, out: np.ndarray | None = None) -> np.ndarray:
        """The windows' maxima: in parts along the channels on every core when large, else a block
        of channels at a time (each block's passes then stay in cache: ResNet's 3x3 / 2 pool over
        64 x 112 x 112, 722 -> 680 us on one thread; in parts, blocks lost: 577 -> 635 us, the
        two threads' many short calls taking turns at the GIL).  `floor=False`: NaN where every tap
        is NaN, -inf where every tap is, not yet the lowest value (`floor_of`), for a caller that
        raises them so itself (irrun/optimize.py's pools before their activation).  `out`: where
        to write them (of the compute type: irrun/split_steps.py's halves write the arena)."""
        dtype = _compute_dtype(x.dtype)
        pads_begin, dims, tiled = self.windows(x.shape[2:])
        if out is None:
            out = np.empty(x.shape[:2] + dims, dtype)
        lowest = lowest_value(dtype)
        at_least_lowest = self.floor_of(dtype) if floor else (lambda maxima, target: np.copyto(target, maxima))

        def channels(a, b):
            # fmax: a NaN tap leaves the maximum as it was; all-NaN windows end as `lowest`, as padding
            data, target = x[:, a:b].astype(dtype, copy=False), out[:, a:b]
            if tiled:
                maxima = _tiled(data, np.fmax, self.kernel, dims, target)
            else:
                maxima = _separable(data, np.fmax, lowest, self.kernel, self.attrs.strides, self.dilations,
                                    pads_begin, dims)
            at_least_lowest(maxima, target)
        parts = threads.parts_for(int(x.size * self.parts_cost()), most=x.shape[1])
        if parts > 1:
            threads.run_parts(channels, threads.bounds(x.shape[1], parts))
        elif out.size:
            step = max(1, POOL_BLOCK_ELEMENTS // (x.shape[0] * prod(x.shape[2:])))
            for first in range(0, x.shape[1], step):
                channels(first, min(first + step, x.shape[1]))
        return _narrow(out, x.dtype)

    @staticmethod
    def floor_of(dtype: np.dtype):
        """`fn(maxima, out)`: the maxima raised to at least the lowest value of `dtype` (a window of
        NaN taps only ends there, as OpenVINO's running maximum from that value does)."""
        return scalar_extremum(np.fmax, lowest_value(dtype), dtype)

    def every_window_reads_data(self, spatial: tuple[int, ...]) -> bool:
        """Whether every window has a tap on the data, none lying in the padding alone."""
        pads_begin, dims, _ = self.windows(spatial)
        return bool(self.real_taps(spatial, pads_begin, dims).min(initial=1) > 0)

    def windows(self, spatial: tuple[int, ...]) -> tuple[list[int], tuple[int, ...], bool]:
        """(pads_begin, output size, whether the windows tile the data: see `_tiled`) for these
        spatial sizes, worked out once per size (tens of microseconds a call in Python)."""
        known = getattr(self, "_windows", None)
        if known is None or known[0] != spatial:
            pads_begin, _, dims = self.geometry(spatial)
            tiled = all(s == k and (d == 1 or k == 1) and pb == 0 and o * k <= size
                        for k, s, d, pb, o, size in zip(self.kernel, self.attrs.strides, self.dilations, pads_begin,
                                                        dims, spatial))
            known = self._windows = (spatial, (pads_begin, tuple(dims), tiled))
        return known[1]

    def pool(self, x: np.ndarray, with_indices: bool):
        if not with_indices:
            return self.values(x)
        dtype = _compute_dtype(x.dtype)
        # A running maximum from `lowest` that moves on strictly greater elements: NaN, -inf and
        # `lowest` itself never win, and padding (filled with `lowest`) never does either.
        lowest = lowest_value(dtype)
        spatial = x.shape[2:]
        pads_begin, _, out = self.geometry(spatial)
        taps = self.taps(self.padded(x, lowest, pads_begin, out, dtype), out)
        best = np.full(x.shape[:2] + tuple(out), lowest, dtype)
        # The first tap (row-major) holding the maximum, updated without branches: masked copies
        # (np.copyto where=, np.where) run ten times slower on the random masks a pool makes.
        index_type = np.min_scalar_type(max(prod(self.kernel) - 1, 0))
        winner = np.zeros(best.shape, index_type)
        for t, view in enumerate(taps):
            better = view > best
            np.fmax(best, view, out=best)
            winner += better * (index_type.type(t) - winner)    # t where better (unsigned wrap-around)
        n = len(spatial)
        offsets = np.unravel_index(winner, self.kernel)
        positions = [_along(np.arange(o) * s - pb, 2 + axis, 2 + n) + t * d
                     for axis, (o, s, pb, t, d) in enumerate(zip(out, self.attrs.strides, pads_begin, offsets,
                                                                 self.dilations))]
        flat = np.where(best > lowest, _flat_position(positions, spatial), 0) + _flat_offsets(x.shape)
        axis = normalize_axis(self.attrs.axis, x.ndim, "axis")
        if axis:
            flat %= prod(x.shape[axis:])
        return _narrow(best, x.dtype), flat.astype(self.attrs.index_element_type.carrier)




# ---------------------------------------------------------------- AdaptiveAvgPool and AdaptiveMaxPool

def _adaptive_bounds(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    """Window i spans [floor(i * in / out), ceil((i + 1) * in / out))."""
    i = np.arange(n_out, dtype=np.int64)
    return i * n_in // n_out, -(-(i + 1) * n_in // n_out)


class _AdaptivePool(Op):
    outputs_are_new = True    # for the executor: no output is ever a view of the input

    def spatial_rank(self, inputs):
        return None

    def infer_output(self, inputs: list[TensorType]) -> tuple:
        data, size = inputs
        _check_data(data)
        if size.rank == 0:
            raise ShapeError("output_size must be 1-D, got a scalar")
        if data.shape is None:
            return None
        n = len(data.shape) - 2
        if size.shape is not None and is_static_dim(size.shape[0]) and size.shape[0] != n:
            raise ShapeError(f"output_size has {size.shape[0]} values for {n} spatial dimensions of data "
                             f"{format_shape(data.shape)}")
        if size.value is None:
            return tuple(data.shape[:2]) + (ANY,) * n
        return tuple(data.shape[:2]) + tuple(self.output_size(size.value, n))

    @staticmethod
    def output_size(value: np.ndarray, n: int) -> list[int]:
        flat = np.asarray(value).reshape(-1)
        sizes = [int(v) for v in (np.trunc(flat) if flat.dtype.kind == "f" else flat)]
        if len(sizes) != n:
            raise ShapeError(f"output_size {sizes} has {len(sizes)} values for {n} spatial dimensions")
        if any(s < 0 for s in sizes):
            raise ShapeError(f"output_size {sizes} has a negative value")
        return sizes


@register("AdaptiveAvgPool", 8)
class AdaptiveAvgPool(_AdaptivePool):
    def infer(self, inputs):
        return [TensorType(self.infer_output(inputs), inputs[0].etype)]

    def run(self, x, output_size):
        n = x.ndim - 2
        total = x.astype(_sum_dtype(x.dtype), copy=False)
        count = np.ones((1,) * n, dtype=np.int64)
        # Sum axis by axis with a window-membership matrix: one BLAS product per axis.
        for axis, o in enumerate(self.output_size(output_size, n)):
            start, end = _adaptive_bounds(x.shape[2 + axis], o)
            cols = np.arange(x.shape[2 + axis])
            member = ((cols >= start[:, None]) & (cols < end[:, None])).astype(total.dtype)
            total = np.moveaxis(np.tensordot(total, member, axes=([2 + axis], [1])), -1, 2 + axis)
            count = count * _along(end - start, axis, n)
        return _mean_as(total, count, x.dtype)


def _adaptive_windows(x: np.ndarray, out: list[int]):
    """Every adaptive window of `x`, padded to the longest one per axis.

    Returns the taps (N, C, *out, L1 * L2 ...) in row-major window order, a
    mask of the real ones (*out, L1 * L2 ...), the window starts per axis and
    the padded window shape (L1, L2, ...).
    """
    n = x.ndim - 2
    index, valid, starts = [], np.ones((1,) * (2 * n), dtype=bool), []
    for axis, o in enumerate(out):
        size = x.shape[2 + axis]
        start, end = _adaptive_bounds(size, o)
        taps = start[:, None] + np.arange(int((end - start).max(initial=1)))[None, :]
        grid = [1] * (2 * n)
        grid[2 * axis:2 * axis + 2] = taps.shape
        index.append(np.minimum(taps, max(size - 1, 0)).reshape(grid))
        valid = valid & (taps < end[:, None]).reshape(grid)
        starts.append(start)
    # x[:, :, i1, i2, ...] has axes (N, C, o1, L1, o2, L2, ...): bring the window axes last.
    outer, inner = list(range(0, 2 * n, 2)), list(range(1, 2 * n, 2))
    windows = x[(slice(None), slice(None)) + tuple(index)].transpose([0, 1] + [2 + a for a in outer + inner])
    longest = windows.shape[2 + n:]
    taps = windows.reshape(windows.shape[:2 + n] + (prod(longest),))
    return taps, valid.transpose(outer + inner).reshape(tuple(out) + (prod(longest),)), starts, longest


@register("AdaptiveMaxPool", 8)
class AdaptiveMaxPool(_AdaptivePool):
    def infer(self, inputs):
        shape = self.infer_output(inputs)
        return [TensorType(shape, inputs[0].etype), TensorType(shape, self.attrs.index_element_type)]

    def run(self, x, output_size):
        n = x.ndim - 2
        dtype = _compute_dtype(x.dtype)
        out = self.output_size(output_size, n)
        taps, valid, starts, longest = _adaptive_windows(x.astype(dtype, copy=False), out)
        # The running maximum starts at the window's first element and moves on strictly greater
        # ones: a NaN first element wins, any other NaN is never chosen.
        floats = dtype.kind == "f"
        lowest = -np.inf if floats else lowest_value(dtype)
        candidates = np.where(valid & ~np.isnan(taps) if floats else valid, taps, lowest)
        best = candidates.argmax(axis=-1)
        if floats:
            best = np.where(np.isnan(taps[..., 0]), 0, best)
        values = np.take_along_axis(taps, best[..., None], axis=-1)[..., 0]
        offsets = np.unravel_index(best, longest)
        positions = [_along(start, 2 + axis, 2 + n) + t for axis, (start, t) in enumerate(zip(starts, offsets))]
        flat = _flat_position(positions, x.shape[2:])
        return _narrow(values, x.dtype), flat.astype(self.attrs.index_element_type.carrier)
