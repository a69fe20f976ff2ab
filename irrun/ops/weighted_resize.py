"""Interpolate's weighted modes (linear_onnx, cubic) on float32 data, in float32.

The general kernel (irrun/ops/resampling.py) gathers every tap of every output with `np.take`
and accumulates in float64 so as to round as the CPU plugin's fused multiply-adds do: 20 ms
for a 2x bilinear upsampling of 64 x 80 x 80, where OpenVINO takes 5-6.  Here each axis is
resampled in float32, by one of two plans made from the general kernel's own tap tables
(`_axis_taps`: OpenVINO's indices and weights):

* `PeriodicAxis`: along an axis whose scale is a ratio of small integers P / Q (a 2x or 4x
  upsampling, a halving, 5 / 4), outputs i and i + P read the same taps Q inputs further on.
  Each of the P phases of the outputs is, tap by tap, a slice of the input taken every Q
  elements times the phase's outputs' own weights (equal from period to period for scales of
  powers of two, an ulp apart where the float32 coordinates round otherwise), written into
  every P-th output; the few outputs where coordinates were clamped (the first and last) are
  summed from their own taps.  The 2x upsampling above: 2.8 ms.
* `GatheredAxis` (any other scale: align_corners, sizes such as 97 -> 224): per tap, a gather
  of the input along the axis and a product by the weights.

What differs from OpenVINO is the rounding: a product and a sum rounded separately in float32
instead of once, within an ulp or two of its result.  A resize is taken in blocks of rows of
its leading axes (each block's intermediates stay in L2), in parts on the thread pool when
large.
"""
from __future__ import annotations

from itertools import chain
from math import prod
from typing import Callable, NamedTuple

import numpy as np

from .. import threads

# The longest period of outputs looked for along an axis (each phase is a few NumPy calls)
MOST_PHASES = 16
# Output elements per block of rows
BLOCK_ELEMENTS = 1 << 17

_F32 = np.float32


class PeriodicAxis(NamedTuple):
    """How one axis resizes: outputs [lo, hi) by phases of `period` outputs, each reading
    `step` inputs further on than the output `period` before it (with weights of its own); the
    others by their own taps."""

    axis: int
    size: int                   # outputs along the axis
    period: int
    step: int
    lo: int
    hi: int
    index: np.ndarray           # [size, taps] input index of each output's taps
    weight: np.ndarray          # [size, taps] float32

    def moved(self, by: int) -> "PeriodicAxis":
        return self._replace(axis=self.axis + by)

    def resample(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        return _resample_periodic(x, self, out)


class GatheredAxis(NamedTuple):
    """How one axis resizes where its outputs have no short period: output i is the sum over the
    taps of weight[i, tap] x input[index[i, tap]]."""

    axis: int
    size: int
    index: np.ndarray           # [size, taps]
    weight: np.ndarray          # [size, taps] float32

    def moved(self, by: int) -> "GatheredAxis":
        return self._replace(axis=self.axis + by)

    def resample(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        before = (slice(None),) * self.axis
        trailing = (1,) * (x.ndim - self.axis - 1)
        for tap in range(self.index.shape[1]):
            term = x[before + (self.index[:, tap],)]
            weights = self.weight[:, tap].reshape((-1,) + trailing)
            if tap == 0:
                out = np.multiply(term, weights, term if out is None else out)
            else:
                np.multiply(term, weights, term)
                np.add(out, term, out)
        return out


def axis_plan(axis: int, index: np.ndarray, weight: np.ndarray) -> "PeriodicAxis | GatheredAxis":
    """The plan for an axis whose taps are `index` / `weight` ([outputs, taps])."""
    weight = np.asarray(weight, _F32)
    return periodic_axis(axis, index, weight) or GatheredAxis(axis, len(index), np.asarray(index, np.intp), weight)


def periodic_axis(axis: int, index: np.ndarray, weight: np.ndarray) -> PeriodicAxis | None:
    """The phases of an axis whose taps are `index` / `weight` ([outputs, taps]), or None where
    no period of at most MOST_PHASES outputs covers half of them."""
    size = len(index)
    best = None
    for period in range(1, min(MOST_PHASES, size - 1) + 1):
        shift = index[period:] - index[:-period]
        step = int(shift[len(shift) // 2, 0])
        if step < 1:
            continue
        follows = (shift == step).all(axis=1)
        first, last = _longest_run(follows)        # outputs first .. last - 1 each lead to the one a period on
        if last > first and (best is None or last - first > best[3] - best[2]):
            best = (period, step, first, last)
    if best is None or best[3] - best[2] + best[0] < size // 2:
        return None
    period, step, first, last = best
    return PeriodicAxis(axis, size, period, step, first, last + period, index, weight.astype(_F32))


def _longest_run(mask: np.ndarray) -> tuple[int, int]:
    """[start, stop) of the longest run of True in `mask` ((0, 0) for none)."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], mask.view(np.int8), [0]))))
    if not len(edges):
        return 0, 0
    starts, stops = edges[0::2], edges[1::2]
    k = int(np.argmax(stops - starts))
    return int(starts[k]), int(stops[k])


def _resample_periodic(x: np.ndarray, plan: PeriodicAxis, out: np.ndarray | None = None) -> np.ndarray:
    """x resized along `plan.axis` (float32), into `out` when given."""
    if out is None:
        shape = list(x.shape)
        shape[plan.axis] = plan.size
        out = np.empty(shape, _F32)
    before = (slice(None),) * plan.axis
    trailing = (1,) * (x.ndim - plan.axis - 1)
    index, weight, period, step = plan.index, plan.weight, plan.period, plan.step
    product = None
    for phase in range(min(period, plan.hi - plan.lo)):
        first = plan.lo + phase
        outputs = range(first, plan.hi, period)
        target = out[before + (slice(first, plan.hi, period),)]
        if product is None or product.shape != target.shape:
            product = np.empty(target.shape, _F32)
        for tap in range(index.shape[1]):
            start = int(index[first, tap])
            source = x[before + (slice(start, start + step * (len(outputs) - 1) + 1, step),)]
            weights = weight[first:plan.hi:period, tap].reshape((-1,) + trailing)
            if tap == 0:
                np.multiply(source, weights, target)
            else:
                np.multiply(source, weights, product)
                np.add(target, product, target)
    for i in chain(range(plan.lo), range(plan.hi, plan.size)):      # where coordinates were clamped
        target = out[before + (slice(i, i + 1),)]
        for tap in range(index.shape[1]):
            j = int(index[i, tap])
            term = np.multiply(x[before + (slice(j, j + 1),)], weight[i, tap])
            if tap == 0:
                target[...] = term
            else:
                np.add(target, term, target)
    return out


def resizer(shape: tuple[int, ...], plans: list) -> Callable[[np.ndarray], np.ndarray]:
    """resize(x) for float32 data of `shape`: `plans` (innermost axis first) one after the other,
    in blocks of the rows of the axes before the first resized one, in parts when large."""
    lead = min(p.axis for p in plans)
    rows = prod(shape[:lead])
    tail = list(shape[lead:])
    for p in plans:
        tail[p.axis - lead] = p.size
    out_shape = tuple(shape[:lead]) + tuple(tail)
    local = [p.moved(1 - lead) for p in plans]       # axes of a block [rows, *tail]
    per_row = prod(tail)
    block = max(1, BLOCK_ELEMENTS // max(per_row, 1))
    cost = sum(p.index.shape[1] for p in plans)

    def resize(x: np.ndarray) -> np.ndarray:
        data = np.ascontiguousarray(x).reshape((rows,) + tuple(shape[lead:]))
        out = np.empty((rows,) + tuple(tail), _F32)

        def part(a: int, b: int) -> None:
            for first in range(a, b, block):
                stop = min(first + block, b)
                work = data[first:stop]
                for k, plan in enumerate(local):
                    work = plan.resample(work, out[first:stop] if k == len(local) - 1 else None)
        threads.along_rows(part, rows, per_row, cost)
        return out.reshape(out_shape)
    return resize
