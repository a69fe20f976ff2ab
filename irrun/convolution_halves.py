"""How a paired run (irrun/process_pair.py) cuts a convolution in halves, and the kernel each half
runs: along its output rows (each half reading the rows its window needs, padded only at the
data's edge) or along its output channels (whole groups of a grouped one), whichever has each
half read less (`_cut_reads`); a Winograd layer along its rows at a boundary of its tiles or along
its channels, each half by the whole layer's tile.  Each half has a kernel bound to its shapes as
the layer's own is (Winograd's transformed filter, im2col's laid-out one).  irrun/split_steps.py
makes the splits of which these are a kind.

A Winograd layer cut along its output channels runs in two phases (`TwoPhase`): each process
first transforms its share of the input channels of every tile into memory both processes map
(irrun/process_pair.py places it), and once both are done, multiplies all of them by its output
channels' transformed filter.  Each half had transformed every tile itself: ResNet's 256 -> 256
layers at 14 x 14 by F(2,3), a half 1.71 -> 1.25 and 1.89 -> 0.95 ms on one core, the whole layer
2.6-3.1; 256 -> 256 at 10 x 20 1.17 -> 0.91 and 2.17 -> 1.51 (alone, in a slow spell).
"""
from __future__ import annotations

from math import prod
from typing import Callable, NamedTuple

import numpy as np

from .ops.common import sum_of_squares
from .ops.winograd import products_of, tile_counts, transform_channels, transformed_shape

CONVOLUTIONS = frozenset({"Convolution", "GroupConvolution"})
# A Winograd layer is cut along its rows where its transformed filter (which each half then reads
# whole) is at most this size, else along its output channels; either way each half computes by the
# whole layer's tile, whatever its own shapes would take.  Three 3x3 layers and a product in a
# paired network, alternating with the cut by what the halves read, each half by the tile (or the
# direct kernels) of its own shapes, along rows: 64 -> 64 channels at 20 x 20 (a 0.56 MiB filter)
# 0.72-0.80 of the time, the YOLO-style net's such layers halves of 159-168 and 197-211 us against
# 260-266 each and the net 0.96-1.01 (three runs); 128 at 28 x 28 and at 14 x 14 (2.25 MiB)
# 0.94-0.96; 160 at 20 x 20 (3.5 MiB) 0.96-1.01; 192 at 14 x 14 (5.1 MiB) 1.08-1.15; 256 at
# 14 x 14 (9 MiB) 1.06-1.08.  Since the halves along the channels run in two phases (`TwoPhase`), a
# filter of 1-3 MiB is cut so too: ResNet-18's three 128 -> 128 layers at 28 x 28 (2.25 MiB, by
# F(4,3)) so, the network 0.937 of its time (quartiles 0.921-0.965, 40 blocks alternating in one
# process; 0.984 for two loads of the same), the detector's 128 -> 128 at 20 x 40 0.975.
WINOGRAD_ROWS_MOST_BYTES = 1 << 20
# ...and where one half would have more than this share of its rows of tiles (an odd few: five
# rows of tiles cut 2 | 3), along its output channels in two phases where it can be (one phase,
# each half transforming every tile, lost to rows: above): the YOLO-style net's four
# 64 -> 64 layers at 20 x 20 so, the net 0.941 of its time (quartiles 0.896-0.984, 40 blocks
# alternating in one process) and the same two the other way round 1.012 (0.990-1.036), where the
# tool favours the second by about 0.98; the detector's 64-channel heads at 10 x 20 and 20 x 40
# level (0.984 and, the other way round, 0.969)
WINOGRAD_ROWS_MOST_SHARE = 0.55
# A Winograd layer cut along its channels runs in two phases (`TwoPhase`) where its transformed
# tiles take at most this many bytes of the memory both processes map
TWO_PHASE_MOST_BYTES = 8 << 20


class Cut(NamedTuple):
    """A convolution's cut: along `axis` at `middle`, the halves' `kernels`; `kernels_at(middle)`
    binds them for another middle (a multiple of `granule`: a Winograd layer's tile, a grouped
    layer's channels a group), None where no half can be cut there (`kernels_at` None: cut only
    at `middle`)."""
    axis: int
    middle: int
    kernels: tuple
    kernels_at: Callable[[int], tuple | None] | None
    granule: int = 1
    two_phase: TwoPhase | None = None       # (the kernels then the second phase's)


def convolution_cut(plan, head, shape: tuple) -> Cut | None:
    """The cut of a convolution by a constant filter: along its output rows or its output channels,
    whichever has each process read less (`_cut_reads`), else the one it can be cut along; None
    where neither."""
    found = _filter_and_data(plan, head)
    if found is None or len(shape) < 3:
        return None
    weight, data = found
    by_channels = weight.shape[0] >= 2          # output channels, or groups
    tile = _whole_layer_tile(plan, head)

    def by_rows(middle=None, tile=None):
        windows = _row_windows(head, weight, data, shape, tile, middle)
        return None if windows is None else _convolution_row_halves(head, weight, data, shape, windows, tile)[1]
    if tile is not None:
        # a Winograd layer: each half by the whole layer's tile, along its rows at a boundary of
        # its tiles where each half can read all of the transformed filter and the rows of tiles
        # divide evenly enough, else along its channels
        windows = _row_windows(head, weight, data, shape, tile) \
            if (tile + 2) ** 2 * (weight.size // 9) * weight.itemsize <= WINOGRAD_ROWS_MOST_BYTES else None
        two_phase = _two_phase(plan, head, data, shape) if by_channels else None
        if windows is not None and (two_phase is None or
                                    _tile_rows_share(windows[0], shape[2], tile) <= WINOGRAD_ROWS_MOST_SHARE):
            return Cut(2, windows[0], by_rows(windows[0], tile), lambda m: by_rows(m, tile), tile)
        if not by_channels:
            return None
        return _channels_cut(head, weight, data, shape, tile=tile, two_phase=two_phase)
    windows = _row_windows(head, weight, data, shape)
    if by_channels and (windows is None or _cut_reads(head, weight, data, windows) == "channels"):
        return _channels_cut(head, weight, data, shape)
    if windows is not None:
        return Cut(2, windows[0], by_rows(windows[0]), by_rows)
    return None


def pooled_convolution_cut(plan, op, shape: tuple) -> Cut | None:
    """The cut of a convolution with its max pool inside (`Convolution.bind_pooled`; `shape`: the
    pool's output), each half's kernel bound with the pool: a 2-D one along its pooled rows where
    each half reads less so (`_cut_reads`; each half's rows of the convolution whole windows of the
    pool), else along its output channels (`_convolution_halves`); None where a half cannot be
    bound so (or the layer has fewer than two output channels).  The CRNN's stem (3 -> 64 channels
    at 32 x 256, its pool 2 x 2) along its rows: the network 0.96-0.99 of its time (three runs,
    alternating in one process with the stem along its channels, each half then making all of
    its positions' columns)."""
    head = op.head_step
    found = _filter_and_data(plan, head)
    if found is None or head.node.layer.op_type != "Convolution" or found[0].shape[0] < 2:
        return None
    weight, data = found
    pool = tuple(op.nodes[-1].op.kernel)
    convolved = plan.step_info(head).outputs[0]
    if len(pool) == 2 and len(shape) == 4 and shape[2] >= 2 and convolved is not None and convolved.shape:
        convolved_shape = tuple(convolved.shape)

        def by_rows(middle: int):       # (of the pooled rows; the convolution's rows `pool[0]` times as many)
            windows = _row_windows(head, weight, data, convolved_shape, middle=middle * pool[0])
            if windows is None:
                return None
            halves = _convolution_row_halves(head, weight, data, convolved_shape, windows,
                                             bind=lambda half, info: half.bind_pooled(info, pool))
            return None if halves is None else halves[1]
        middle = shape[2] // 2
        windows = _row_windows(head, weight, data, convolved_shape, middle=middle * pool[0])
        if windows is not None and _cut_reads(head, weight, data, windows) == "rows":
            kernels = by_rows(middle)
            if kernels is not None:
                return Cut(2, middle, kernels, by_rows)
    return _channels_cut(head, weight, data, shape, lambda info: head.op.bind_pooled(info, pool))


def _channels_cut(head, weight: np.ndarray, data, shape: tuple, bind=None, tile: int | None = None,
                  two_phase: TwoPhase | None = None) -> Cut | None:
    """A cut along the output channels (`_convolution_halves`), in whole groups of a grouped layer:
    only in the middle where the halves' kernels hold a layout of their half of the filter (`held`:
    the depthwise layers, the row-tap ones), whose halves cut at each place the balance may take
    would hold the filter again each (EfficientNet-B0 9 MiB more a place, in each process); a
    Winograd or spectral layer's halves read views of the whole layer's transforms, a 1x1 layer's
    writing channels-last its columns of the whole layer's transposed filter.  With `two_phase`, the
    halves' kernels are its second phase's, each half's own kernel its fallback."""
    per_unit = shape[1] // weight.shape[0] if head.node.layer.op_type == "GroupConvolution" else 1

    def at(middle: int):
        halves = _convolution_halves(head, weight, data, shape, bind, tile, middle // per_unit)
        if halves is None:
            return None
        return halves[1] if two_phase is None else two_phase.seconds(halves[0], halves[1])
    halves = _convolution_halves(head, weight, data, shape, bind, tile)
    if halves is None:
        return None
    middle, kernels, held = halves
    if two_phase is not None:
        kernels = two_phase.seconds(middle, kernels)
    return Cut(1, middle, kernels, at if tile is not None or not held else None, per_unit, two_phase)


class TwoPhase:
    """A Winograd layer cut along its output channels in two phases (see the module's text): the
    first (`firsts`: each half's) transforms a share of the input channels of every tile into
    `scratch` ([a, a, C_in, tiles], in memory both processes map, placed by the pair), the second
    (`seconds`) multiplies every tile by a half's output channels.  Data whose values a tile may
    not mix (an infinity, a NaN, a value too large to square: `winograd.py`) are left to each
    half's own kernel, which reads the data itself and takes the direct kernels; each process
    asks it of the whole data, so both take the same way."""

    def __init__(self, f, whole, counts, n: int):
        self.f, self.whole, self.counts, self.n = f, whole, counts, n
        self.shape = transformed_shape(f, n, counts)
        self.nbytes = prod(self.shape) * f.dtype.itemsize
        self.scratch: np.ndarray | None = None      # (set by the pair, in its shared memory,
        self.offset = 0                             # at this place in its arena)
        self.mixable = False                        # this process's data, this run: by the transforms

    def firsts(self, middle: int) -> tuple[Callable, Callable]:
        """Each half's first phase where the output channels are cut at `middle`: the input channels
        cut at the same share."""
        cut = min(max(round(middle * self.f.c_in / self.f.c_out), 0), self.f.c_in)

        def first(c0: int, c1: int) -> Callable:
            def run(args):
                x = args[0]
                self.mixable = bool(np.isfinite(sum_of_squares(x)))
                if self.mixable and c1 > c0:
                    transform_channels(x, self.f, self.whole, self.counts, c0, c1, self.scratch)
            return run
        return first(0, cut), first(cut, self.f.c_in)

    def seconds(self, middle: int, fallbacks: tuple) -> tuple[Callable, Callable]:
        """Each half's second phase where the output channels are cut at `middle` (`fallbacks`: the
        halves' own kernels)."""
        def second(start: int, stop: int, fallback: Callable) -> Callable:
            f = self.f.output_channels(start, stop)

            def run(args):
                if self.mixable:
                    return products_of(self.scratch, f, self.n, self.counts)
                return fallback(args)
            return run
        return second(0, middle, fallbacks[0]), second(middle, self.f.c_out, fallbacks[1])


def _two_phase(plan, head, data, shape: tuple) -> TwoPhase | None:
    """The two phases of a Winograd layer cut along its output channels, where its transformed tiles
    fit TWO_PHASE_MOST_BYTES and its filter has been transformed; else None."""
    found = head.op.winograd_transform_of(plan.step_info(head))      # (a Winograd layer's op: it has one)
    if found is None or head.node.layer.op_type != "Convolution" or len(shape) != 4:
        return None
    f, whole, counts = found
    if f.c_out != shape[1] or f.c_in != data.shape[1]:
        return None
    two = TwoPhase(f, whole, counts, shape[0])
    return two if two.nbytes <= TWO_PHASE_MOST_BYTES else None


def _cut_reads(head, weight: np.ndarray, data, windows) -> str:
    """"rows" or "channels": whichever way of cutting a convolution has its larger half read fewer
    elements of data and filter, along its output rows (its rows of the data and those beyond
    them its windows need, all of the filter) or along its output channels (half of the filter,
    all of the data; a grouped layer's half its groups' channels of it).  Cut along
    the cheaper way, the paired YOLO-style net took 0.975-0.982 of its time cut along rows alone,
    MobileNetV3 0.938-0.966, EfficientNet-B0 0.877-0.918 (two runs, each the median of 15
    alternating blocks of 30 inferences in one process): layers of few rows and many channels no
    longer read their whole filter in each half, nor depthwise layers their windows' extra rows
    (by channels each half reads half of the data and none of it twice).  A 1x1 layer writing
    channels-last for its depthwise one (irrun/optimize.py) is cut so too (MobileNetV3 0.962 of its
    time against those layers by rows alone, EfficientNet-B0 0.951, 15 alternating blocks)."""
    data_elements, filter_elements = prod(data.shape), weight.size
    rows = max(read[1] - read[0] for _, _, read in windows[2]) / data.shape[2] * data_elements + filter_elements
    units = weight.shape[0]
    larger = (units - units // 2) / units
    grouped = head.node.layer.op_type == "GroupConvolution"
    channels = (larger if grouped else 1.0) * data_elements + larger * filter_elements
    return "channels" if channels < rows else "rows"


def _convolution_halves(head, weight: np.ndarray, data, shape: tuple, bind=None, tile: int | None = None,
                        cut: int | None = None):
    """(where the output's channels are cut, (first half's kernel, second's), whether they hold a
    layout of their filter of their own) for a convolution by a constant filter of two or more
    output channels (groups), at `cut` of them where given, else in the middle: each half of the
    filter's output
    channels (of its groups, for a grouped one, with those groups' input channels) gets a kernel
    bound to it as the layer's own would be (Winograd's transformed filter, by the whole layer's
    `tile` where given; im2col's laid-out one), or by `bind(info)` where given (None where that
    binds no kernel).
    kernel(args) -> that half's output channels (a new array)."""
    from .executor import StepInfo
    from .ops.convolution import shape_only
    from .registry import TensorType
    grouped = head.node.layer.op_type == "GroupConvolution"
    units = weight.shape[0]                 # output channels, or groups
    per_unit = shape[1] // units if grouped else 1
    inputs_per_unit = data.shape[1] // units if grouped else data.shape[1]
    cut = units // 2 if cut is None else cut
    if not 0 < cut < units:
        return None
    kernels, held = [], False
    for start, stop in ((0, cut), (cut, units)):
        w = weight[start:stop]
        x_shape = list(data.shape)
        if grouped:
            x_shape[1] = (stop - start) * inputs_per_unit
        out_shape = list(shape)
        out_shape[1] = (stop - start) * per_unit
        info = StepInfo([TensorType(tuple(x_shape), data.etype), TensorType(w.shape, data.etype, w)],
                        [TensorType(tuple(out_shape), data.etype)], frozenset(), (True,), None)
        # (a Winograd or spectral layer's half computes by a view of the whole layer's transforms)
        op = with_attrs(head.op, {}, tile, None if grouped else (start, stop))
        op.held_layout = False
        kernel = op.bind(info) if bind is None else bind(info)
        if kernel is None and bind is not None:
            return None
        held = held or op.held_layout
        kernels.append(_convolution_kernel(kernel or op.run, w if kernel is None else shape_only(w),
                                           (start * inputs_per_unit, stop * inputs_per_unit) if grouped else None))
    return cut * per_unit, tuple(kernels), held


def _tile_rows_share(middle: int, rows: int, tile: int) -> float:
    """The larger half's share of the tile rows of a Winograd layer of `rows` output rows cut at
    `middle` (a boundary of its tiles; the last tile may be part padding)."""
    first, second = (tile_counts(tile, (n, 1))[0] for n in (middle, rows - middle))
    return max(first, second) / (first + second)


def _row_windows(head, weight: np.ndarray, data, shape: tuple, tile: int | None = None,
                 middle: int | None = None):
    """(where the output's rows are cut, the layer's (pads_begin, pads_end), and per half: its
    output rows (first, stop), its windows' rows (lo, hi) padding included, and the data's rows it
    reads) for a convolution cut along its first spatial axis: at `middle` where given, else in the
    middle or, given a Winograd `tile`, at the boundary of its tiles nearest the middle; None where
    it cannot be cut so."""
    from .ops.window import effective_kernel, resolve_pads
    if shape[2] < 2 or (tile is not None and shape[2] <= tile):
        return None
    rank = len(shape) - 2
    geo = head.op.geometry(rank)
    taps = weight.shape[-rank:]
    pads = resolve_pads(data.shape[2:], taps, geo.strides, geo.dilations, geo.pads_begin, geo.pads_end, geo.auto_pad)
    stride, reach, height = geo.strides[0], effective_kernel(taps[0], geo.dilations[0]), data.shape[2]
    if middle is None:
        middle = shape[2] // 2 if tile is None else \
            min(range(tile, shape[2], tile), key=lambda row: abs(2 * row - shape[2]))
    if not 0 < middle < shape[2]:
        return None
    halves = []
    for first, stop in ((0, middle), (middle, shape[2])):
        lo, hi = first * stride - pads[0][0], (stop - 1) * stride - pads[0][0] + reach
        if min(hi, height) <= max(lo, 0):
            return None                     # (a half whose windows lie in the padding alone)
        halves.append(((first, stop), (lo, hi), (max(lo, 0), min(hi, height))))
    return middle, pads, halves


def _convolution_row_halves(head, weight: np.ndarray, data, shape: tuple, windows, tile: int | None = None,
                            bind=None):
    """(where the output's rows are cut, (first half's kernel, second's)) for a convolution by a
    constant filter cut along its first spatial axis (`windows`: `_row_windows`): each half reads
    its rows of the data and the few beyond them its window needs, with the layer's padding where
    its rows meet the data's edge and none inside, through a kernel bound to that half's shapes as
    the layer's own would be (Winograd, by the whole layer's `tile` where given; im2col,
    pointwise), or by `bind(the half's op, info)` where given (None where that binds no kernel).
    kernel(args) -> that half's output rows (a new array)."""
    from .executor import StepInfo
    from .ops.convolution import shape_only
    from .registry import TensorType
    middle, (begin, end), halves = windows
    op = head.op
    kernels = []
    for (first, stop), (lo, hi), rows in halves:
        half = with_attrs(op, {"pads_begin": (rows[0] - lo, *begin[1:]), "pads_end": (hi - rows[1], *end[1:]),
                               "auto_pad": "explicit"}, tile)
        x_shape = (*data.shape[:2], rows[1] - rows[0], *data.shape[3:])
        out_shape = (*shape[:2], stop - first, *shape[3:])
        info = StepInfo([TensorType(x_shape, data.etype), TensorType(weight.shape, data.etype, weight)],
                        [TensorType(out_shape, data.etype)], frozenset(), (True,), None)
        kernel = half.bind(info) if bind is None else bind(half, info)
        if kernel is None and bind is not None:
            return None
        kernels.append(_convolution_kernel(kernel or half.run, weight if kernel is None else shape_only(weight),
                                           None, rows))
    return middle, tuple(kernels)


def with_attrs(op, changes: dict, tile: int | None = None, channels: tuple[int, int] | None = None):
    """A copy of `op` (its caches too) with these attributes changed, binding Winograd by `tile`
    whatever its shapes say where given, and by views of the whole layer's transforms (Winograd's,
    spectral) of its output `channels` (first, stop) where given: a half's own kernel."""
    import copy
    layouts = getattr(op, "filter_layouts", None)
    if layouts is not None:
        layouts()               # (made on the op first: its copies share it)
    half = copy.copy(op)
    if changes:
        half.attrs = op.attrs.replaced(changes)
    if tile is not None:
        half.whole_layer_tile = tile
    if channels is not None:
        half.whole_layer_channels = channels
    return half


def _whole_layer_tile(plan, head) -> int | None:
    """The tile of the Winograd kernel the whole layer binds, None where it binds another."""
    tile_of = getattr(head.op, "winograd_tile_of", None)
    return None if tile_of is None else tile_of(plan.step_info(head))


def _filter_and_data(plan, head):
    """(the constant f32 filter, the data's type) of a convolution whose halves can have kernels
    of their own, else None."""
    weight = plan.constants.get(head.inputs[1])
    if weight is not None and not isinstance(weight, np.ndarray):      # (left folded by rows: made whole)
        weight = head.op.filter_array(weight)
    data = plan.analysis.type_of(head.node.inputs[0])
    if weight is None or data is None or data.shape is None or data.etype.name != "f32" \
            or weight.dtype != np.float32 or len(head.inputs) != 2 or head.op.run_replaced() \
            or getattr(head.op, "transposed", False):
        return None
    return weight, data


def _convolution_kernel(bound, weight: np.ndarray, channels: tuple | None, rows: tuple | None = None) -> Callable:
    if rows is not None:
        def rows_kernel(args):
            y = bound(args[0][:, :, rows[0]:rows[1]], weight)
            return y[0] if type(y) is tuple else y
        return rows_kernel

    def kernel(args):
        x = args[0] if channels is None else args[0][:, channels[0]:channels[1]]
        y = bound(x, weight)
        return y[0] if type(y) is tuple else y
    return kernel
