"""Convolution, GroupConvolution and their transposed forms (the *BackpropData ops);
DeformableConvolution and BinaryConvolution build on them in `special_convolutions`.

The four (de)convolutions share one shape function and two kernels.  They
differ only in where the filter keeps its groups and channels:

    Convolution                   [C_out, C_in, k...]
    GroupConvolution              [G, C_out, C_in, k...]
    ConvolutionBackpropData       [C_in, C_out, k...]
    GroupConvolutionBackpropData  [G, C_in, C_out, k...]

with data [N, G*C_in, spatial...] and output [N, G*C_out, spatial...].

Kernels (BLAS through `matmul`, Python loops only over kernel taps):
  forward     im2col (`im2col`): a strided view of the padded input, copied, then
              one batched matmul [G, C_out, C_in*K] @ [N, G, C_in*K, O].  A 1x1
              kernel needs no im2col; depthwise (C_in = 1): `depthwise`.
              Stride 1, 2-D, 16-128 input channels (a group): one GEMM per block of
              rows with the kernel's rows stacked into its depth and its columns into
              its height, the column products added shifted (`row_taps.row_taps`).  Other
              stride-1 layers with few channels (C_out <= C_in, 16 <= C_in <= 128): one
              GEMM per tap on the flattened padded input, where each tap's shift is a
              contiguous slice (no im2col copy).  1-D layers with long kernels and a
              constant filter: real FFTs, overlap-save (`fft_convolution`).
  transposed  by output phases or by scattered taps: `transposed_convolution`.

Arithmetic of output sizes and pads: `irrun.ops.window`.
"""
from __future__ import annotations

from math import prod
from typing import Callable, NamedTuple

import numpy as np

from .. import etypes, thin_products, threads
from ..errors import ShapeError
from ..registry import Op, TensorType, register
from ..shapes import ANY, DimLike, dim_mul, dims_compatible, format_shape
from ..weights import maps_the_file
from . import im2col, row_taps
from .common import sum_of_squares
from .depthwise import depthwise, depthwise_pays, layout_of, works_channels_last
from .fft_convolution import SpectralFilter, block_length, fft_conv, fft_pays, fft_suits
from .winograd import WinogradFilter, winograd_conv, winograd_tile
from .window import effective_kernel, forward_spatial, padded_rows, transposed_spatial, window_layout, zero_extended


class Geometry(NamedTuple):
    """The window attributes with OpenVINO's fill-ins for missing ones."""

    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...]
    pads_end: tuple[int, ...]
    output_padding: tuple[int, ...]
    auto_pad: str


# ---------------------------------------------------------------- numerics

def _compute_dtype(dtype: np.dtype) -> type:
    if dtype == np.float64:
        return np.float64
    if dtype.kind == "f":
        return np.float32                  # f16 (and bf16's f32 carrier): accumulate in f32
    return np.float64                      # integers: exact sums, rounded as OpenVINO does below


_F32_BELOW_2_31 = float(np.nextafter(np.float32(2 ** 31), np.float32(0)))


def _to_output(acc: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The accumulator as the op's output type.

    Integer convolution has no reference implementation in OpenVINO; its CPU
    plugin accumulates in f32, then saturates to i8/u8, wraps to i16/u16, and
    clamps every 32- and 64-bit type to the int32 range (in f32, so the top is
    2**31 - 128).
    """
    if dtype.kind == "f":
        return acc.astype(dtype, copy=False)
    acc = acc.astype(np.float32).astype(np.float64)
    if dtype.itemsize == 1:
        info = np.iinfo(dtype)
        return np.clip(acc, info.min, info.max).astype(dtype)
    if dtype.itemsize == 2:
        return acc.astype(np.int64).astype(dtype)
    return np.clip(acc, -2.0 ** 31, _F32_BELOW_2_31).astype(np.int64).astype(dtype)


# ---------------------------------------------------------------- kernels

# Largest im2col / per-tap contribution buffer (elements) built at once; bigger
# batches are processed in slices so memory stays near the output's own size.
BUFFER_ELEMENTS = 1 << 25
# The tap-by-tap path: output columns per block (the block's sum and one tap's product stay in
# cache; the fastest of 1024..8192 for 16-128 channels), and the most input channels it is used for
# (above, the GEMMs of [C_out, 9 C_in] columns win; 16 -> 16 is 2.4x faster tap by tap, 128 -> 128
# 1.3x, 256 -> 256 1.3x slower).
TAP_BLOCK_COLUMNS = 2048
TAP_MAX_CHANNELS = 128
TAP_MIN_CHANNELS = 16          # (16 -> 16 gains 2.4x; 4 -> 2 loses 15%)
TAP_MIN_GROUP_CHANNELS = 32    # grouped: 4 groups of 32 gain 1.5x; 8 groups of 16 lose 25%


def _in_batch_slices(fn, x: np.ndarray, per_sample: int) -> np.ndarray:
    step = max(1, BUFFER_ELEMENTS // max(per_sample, 1))
    if step >= x.shape[0]:
        return fn(x)
    return np.concatenate([fn(x[i:i + step]) for i in range(0, x.shape[0], step)])


def _im2col(x, w, geo: Geometry, whole, counts) -> np.ndarray:
    """The convolution by im2col (`im2col.columns_times_filter`), a slice of the batch at a time."""
    groups, _, cg, *kernel = w.shape
    return _in_batch_slices(lambda xs: im2col.columns_times_filter(xs, w, geo, whole, counts), x,
                            groups * cg * prod(kernel) * prod(counts))


def _taps_pay(filter_shape, geo: Geometry, whole, counts) -> bool:
    """Whether `_shifted_taps` is the faster kernel: stride 1, few channels but not too few (per
    group: 4 -> 2 or 8 groups of 16 -> 16 are faster through im2col), and a padded grid at most
    twice the output (a wide dilated kernel on a narrow input computes mostly waste)."""
    groups, og, cg, *_ = filter_shape
    padded_row = prod(hi - lo for lo, hi in whole[1:])
    fewest = TAP_MIN_CHANNELS if groups == 1 else TAP_MIN_GROUP_CHANNELS
    return (all(s == 1 for s in geo.strides) and og <= cg and fewest <= cg <= TAP_MAX_CHANNELS
            and padded_row <= 2 * prod(counts[1:]))


def _im2col_in_parts(filter_shape, n: int, counts) -> bool:
    """Whether im2col's blocks will run on several cores with BLAS on one thread each: then they
    beat the tap-by-tap kernel, whose small GEMMs ([16, 16] x [16, 2048]) run on one core, or on
    two poorly (16 -> 16 channels at 160x320: 2.7 against 3.6 ms on two cores; 4.4 against
    3.1 ms on one)."""
    groups, og, cg, *kernel = filter_shape
    return threads.pool_owns_cores() and \
        threads.parts_for(n * groups * cg * prod(kernel) * prod(counts), most=counts[0]) > 1


def _shifted_taps(x, w, geo: Geometry, whole, counts) -> np.ndarray:
    """Stride 1: the output is the sum over taps of filter[tap] @ (padded input shifted by the tap).
    With the padded input flattened, each shift is a contiguous slice: a GEMM per tap, no im2col.
    Outputs are computed on the padded grid (whole padded rows) and those past the edge dropped."""
    groups, og, cg, *kernel = w.shape
    n, rank = x.shape[0], len(kernel)
    spans = [effective_kernel(k, d) for k, d in zip(kernel, geo.dilations)]
    padded = [hi - lo for lo, hi in whole]
    flat_strides = [prod(padded[i + 1:]) for i in range(rank)]
    row = flat_strides[0]
    offsets = [sum(t * d * f for t, d, f in zip(tap, geo.dilations, flat_strides)) for tap in np.ndindex(*kernel)]
    filters = [np.ascontiguousarray(w[(slice(None),) * 3 + tap]) for tap in np.ndindex(*kernel)]
    slack = sum((span - 1) * f for span, f in zip(spans[1:], flat_strides[1:]))   # the last shifts' overrun
    rows = min(counts[0], -(-TAP_BLOCK_COLUMNS // row))
    slab_buffer = np.empty(groups * cg * ((rows + spans[0] - 1) * row + slack), w.dtype)
    sum_buffer = np.empty(groups * og * rows * row, w.dtype)
    product_buffer = np.empty_like(sum_buffer)
    valid = (slice(None),) * 3 + tuple(slice(0, c) for c in counts[1:])   # [G, Og, rows, ...]
    out = np.empty((n, groups, og, *counts), w.dtype)
    for sample, sample_out in zip(x.reshape(n, groups, cg, *x.shape[2:]), out):
        for first in range(0, counts[0], rows):
            last = min(first + rows, counts[0])
            height, length = last - first + spans[0] - 1, (last - first) * row
            slab = padded_rows(sample, slab_buffer, whole, first, height, slack)
            total = sum_buffer[:groups * og * length].reshape(groups, og, length)
            product = product_buffer[:groups * og * length].reshape(groups, og, length)
            for k, (tap_filter, offset) in enumerate(zip(filters, offsets)):
                shifted = slab[:, :, offset:offset + length]
                if k == 0:
                    np.matmul(tap_filter, shifted, out=total)
                else:
                    np.matmul(tap_filter, shifted, out=product)
                    total += product
            sample_out[:, :, first:last] = total.reshape(groups, og, last - first, *padded[1:])[valid]
    return out


_UNDECIDED = "undecided"


def _shape_kernel(filter_shape, geo: Geometry, whole, counts, channels_last: bool = True) -> str | None:
    """The kernel `_direct` takes where the shapes alone decide it: "depthwise", "pointwise",
    "phase taps", "channels-last columns" or "row taps"; None for the rest (tap by tap or im2col,
    which the pool's state at the call decides)."""
    if depthwise_pays(filter_shape):
        return "depthwise"
    if all(k == 1 for k in filter_shape[3:]):
        return "pointwise"
    if row_taps.phase_taps_pay(filter_shape, geo):
        return "phase taps"
    if channels_last and im2col.channels_last_pays(filter_shape, counts):
        return "channels-last columns"
    if row_taps.row_taps_pay(filter_shape, geo, whole, counts):
        return "row taps"
    return None


def laid_out_filter(w: np.ndarray, geo: Geometry, counts, kind: str | None):
    """(layout, alone): the filter as the kernel `kind` (`_shape_kernel`'s) reads it, where that
    kernel would lay it out on every call (bound once for a constant filter): the depthwise
    kernels' (`depthwise.layout_of`), the row taps' (`row_taps.stacked_row_filter`: 38 us a call
    for 128 -> 128 channels, a sixth of the layer at 10 x 10) and the channels-last columns', else
    None; and whether the kernel reads that layout alone, never the filter as it is (not the
    depthwise kernel tap by tap).  (The phase taps' filter, a stem's, is small: laid out per call.)"""
    if kind == "depthwise":
        return layout_of(w, geo, counts), works_channels_last(w.shape)
    if kind == "row taps":
        return row_taps.stacked_row_filter(w), True
    if kind == "channels-last columns":
        return im2col.channels_last_filter(w), True
    return None, False


_LAID_OUT_ALONE = ("row taps", "channels-last columns")    # the kernels that read a layout alone


def shape_only(w: np.ndarray) -> np.ndarray:
    """An array of w's shape and type that holds none of its values (zeros, one element's memory):
    what a kernel that reads a layout of the filter alone keeps of the filter."""
    return np.broadcast_to(np.zeros((), w.dtype), w.shape)


def conv_forward(x: np.ndarray, w: np.ndarray, geo: Geometry) -> np.ndarray:
    """x [N, G*Cg, S...], w [G, Og, Cg, K...] -> [N, G*Og, O...]."""
    whole, counts = window_layout(x.shape[2:], w.shape[3:], geo)
    out_dtype, ct = x.dtype, _compute_dtype(x.dtype)
    return _to_output(_direct(x.astype(ct, copy=False), w.astype(ct, copy=False), geo, whole, counts), out_dtype)


def _direct(x: np.ndarray, w: np.ndarray, geo: Geometry, whole, counts, laid_out=None,
            kind: str | None = _UNDECIDED) -> np.ndarray:
    """The convolution in x's (compute) type by the kernel that suits its shape (`laid_out`: the
    layout `laid_out_filter` gives for these shapes, where the layer was bound; `kind`: what
    `_shape_kernel` gives for them, where already known)."""
    groups, og = w.shape[:2]
    if kind is _UNDECIDED:
        kind = _shape_kernel(w.shape, geo, whole, counts)
    if min(counts, default=1) <= 0:
        out = np.zeros((x.shape[0], groups, og, *(max(c, 0) for c in counts)), x.dtype)
    elif kind == "depthwise":
        out = depthwise(x, w, geo, whole, counts, laid_out)
    elif kind == "pointwise":
        out = im2col.pointwise(zero_extended(x, whole), w, geo.strides)
    elif kind == "phase taps":
        out = row_taps.phase_taps(x, w, geo, whole, counts)
    elif kind == "row taps":
        out = row_taps.row_taps(x, w, geo, whole, counts, laid_out)
    elif kind == "channels-last columns" and laid_out is not None:
        out = im2col.channels_last_columns_times_filter(x, laid_out, w.shape[3:], geo, whole, counts)
    elif _taps_pay(w.shape, geo, whole, counts) and not _im2col_in_parts(w.shape, x.shape[0], counts):
        out = _shifted_taps(x, w, geo, whole, counts)
    else:
        out = _im2col(x, w, geo, whole, counts)
    return out.reshape(x.shape[0], groups * og, *counts)


# ---------------------------------------------------------------- the ops

def _element_type(data: TensorType, filt: TensorType):
    known = [t.etype for t in (data, filt) if t.etype is not etypes.dynamic]
    if len(known) == 2 and known[0] is not known[1]:
        raise ShapeError(f"data is {data.etype} but filter is {filt.etype}: their element types must match")
    etype = known[0] if known else etypes.dynamic
    if etype is not etypes.dynamic and not (etype.is_float or etype.is_integral):
        raise ShapeError(f"element type {etype} is not numeric")
    return etype


class _ConvolutionFamily(Op):
    outputs_are_new = True   # for the executor: every kernel here returns an array of its own
    grouped: bool = False       # filter has a leading groups axis
    transposed: bool = False    # filter is [.., C_in, C_out, ..] and the op scatters

    # -- attributes

    def geometry(self, rank: int) -> Geometry:
        a = self.attrs
        ones, zeros = (1,) * rank, (0,) * rank
        return Geometry(a.strides or ones, a.dilations or ones, a.pads_begin or zeros, a.pads_end or zeros,
                        a.get("output_padding") or zeros, a.auto_pad)

    # -- shapes

    def spatial_rank(self, inputs):
        rank = super().spatial_rank(inputs)
        if rank is None and len(inputs) > 1 and inputs[1].rank is not None:
            rank = inputs[1].rank - 2 - (1 if self.grouped else 0)
        return rank

    def layout(self, fshape: tuple) -> tuple[DimLike, DimLike, DimLike, tuple]:
        """(groups, C_in per group, C_out per group, kernel) of a filter shape."""
        groups, rest = (fshape[0], fshape[1:]) if self.grouped else (1, fshape)
        first, second, kernel = rest[0], rest[1], tuple(rest[2:])
        c_in, c_out = (first, second) if self.transposed else (second, first)
        return groups, c_in, c_out, kernel

    def describe_filter(self) -> str:
        channels = "C_in, C_out" if self.transposed else "C_out, C_in"
        return f"[{'G, ' if self.grouped else ''}{channels}, k...]"

    def check_channels(self, data_shape: tuple, filter_shape: tuple) -> None:
        groups, c_in, _, _ = self.layout(filter_shape)
        channels, expected = data_shape[1], dim_mul(groups, c_in)
        if not dims_compatible(channels, expected):
            why = f" (groups={groups} x {c_in})" if self.grouped else ""
            raise ShapeError(f"data {format_shape(data_shape)} has {channels} channels, filter "
                             f"{format_shape(filter_shape)} expects {expected}{why}")

    def element_type(self, data: TensorType, filt: TensorType):
        return _element_type(data, filt)

    def infer(self, inputs):
        data, filt = inputs[0], inputs[1]
        etype = self.element_type(data, filt)
        extra = 1 if self.grouped else 0
        rank = data.rank if data.rank is not None else None if filt.rank is None else filt.rank - extra
        if rank is None:
            return [TensorType(None, etype)]
        if rank not in (3, 4, 5):
            raise ShapeError(f"data must have rank 3, 4 or 5 (1-D, 2-D or 3-D), got {format_shape(data.shape)}")
        if filt.rank is not None and filt.rank != rank + extra:
            raise ShapeError(f"filter {format_shape(filt.shape)} must have rank {rank + extra} "
                             f"{self.describe_filter()} for data {format_shape(data.shape)}")
        dshape = data.shape if data.shape is not None else (ANY,) * rank
        fshape = filt.shape if filt.shape is not None else (ANY,) * (rank + extra)
        self.check_channels(dshape, fshape)
        groups, _, c_out, kernel = self.layout(fshape)
        geo = self.geometry(rank - 2)
        if self.transposed:
            spatial, notes = transposed_spatial(dshape[2:], kernel, geo, inputs[2] if len(inputs) > 2 else None)
        else:
            spatial, notes = forward_spatial(dshape[2:], kernel, geo)
        return [TensorType((dshape[0], dim_mul(groups, c_out), *spatial), etype, notes=notes)]

    # -- kernel

    winograd_capable = False    # Convolution, and GroupConvolution with one group
    # Set on the copy of the op that computes one half of a layer a paired run cuts
    # (irrun/convolution_halves.py): the Winograd tile of the whole layer, which the half keeps
    # whatever tile (or none) its own shapes would take
    whole_layer_tile: int | None = None
    # a paired run's half of a Winograd or spectral layer's output channels: (first, stop) of the
    # whole layer's (irrun/convolution_halves.py)
    whole_layer_channels: tuple[int, int] | None = None
    # Set at load (irrun/optimize.py) where a 1x1 convolution feeds a depthwise one that works
    # channels-last: its output is then made in that layout (the same values; a strided view)
    channels_last_output = False
    # The kernel `_bind_direct` took for the layer (`_shape_kernel`'s kind): a paired run's halves,
    # copies of the op, take the channels-last columns only where the whole layer did
    direct_kind: str | None = "not bound"
    # Set by `bind` where the kernel it binds holds a layout of the filter of its own (a transform,
    # a transposed or stacked copy): a paired run cuts such a layer's channels only in the middle,
    # where each place it cut them at would hold the filter again (irrun/convolution_halves.py)
    held_layout = False

    def bind(self, step):
        """3x3 stride-1 float convolutions with a constant filter, where Winograd pays
        (`winograd.winograd_tile`): the filter transformed once, here.  Transposed ones with a
        constant filter that run by phases: their phase filters made once, here.  The filter's
        mapped pages are then released (ResNet-18: 9 MiB).  Other f32/f64 convolutions of a
        static shape with a constant filter: their padding and output size worked out here."""
        if self.transposed:
            return self._bind_phases(step)
        if self.run_replaced() or len(step.inputs) != 2:
            return None
        return self._bind_winograd(step) or self._bind_spectral(step) or self._bind_direct(step)

    def _filter_shape(self, step) -> tuple | None:
        """The filter's shape as [G, Og, Cg, K...] where a kernel can be bound to it: constant, over
        f32/f64 data of its own type and of a static shape whose channels it fits (else `run` says why)."""
        data, filt = step.inputs
        value = filt.value
        if value is None or not data.is_static or data.rank is None or filt.etype is not data.etype \
                or data.etype.name not in ("f32", "f64") or value.ndim != data.rank + self.grouped \
                or value.dtype != data.etype.carrier:
            return None
        shape = tuple(value.shape) if self.grouped else (1, *value.shape)
        return shape if shape[2] * shape[0] == data.shape[1] else None

    def filter_layouts(self) -> dict:
        """Layouts of this layer's constant filter that depend on the filter alone, made once:
        shared with the copies of the op that bind a paired run's halves of the layer's rows
        (irrun/convolution_halves.py), at every place the rows are cut."""
        return self.__dict__.setdefault("_filter_layouts", {})

    def _laid_out_once(self, source, kind: str, make):
        """make(): a layout of the filter `source` of this kind, made once per filter."""
        self.held_layout = True
        layouts = self.filter_layouts()
        found = layouts.get((kind, id(source)))
        if found is None or found[0] is not source:
            found = layouts[kind, id(source)] = (source, make())
        return found[1]

    def _whole_layers_columns(self, kind: str, rows: int) -> np.ndarray | None:
        """For a paired run's half of the layer's output channels (`whole_layer_channels`): its
        columns of the whole layer's layout of this kind ([rows, C_out], made where the layer was
        bound), a view; None where the layer made no such layout (or this is no such half)."""
        channels = self.whole_layer_channels
        if channels is None:
            return None
        for (kind_made, _), (_, layout) in self.filter_layouts().items():
            if kind_made == kind and layout.shape[0] == rows and layout.shape[1] >= channels[1]:
                return layout[:, channels[0]:channels[1]]
        return None

    def _constant_filter(self, step) -> np.ndarray | None:
        """The filter as [G, Og, Cg, K...] where a kernel can be bound to it (`_filter_shape`)."""
        if self._filter_shape(step) is None:
            return None
        value = self.filter_array(step.inputs[1].value)
        return value if self.grouped else value[None]

    def filter_array(self, value) -> np.ndarray:
        """The filter as an array.  A filter left folded by rows for a Winograd layer to transform
        a block of output channels at a time (irrun/blockwise_folding.py, `filters_by_rows`) is
        computed whole where anything else wants it (the direct kernels on an input that a transform
        would spread, a paired run's halves), once per op."""
        if isinstance(value, np.ndarray):
            return value
        whole = getattr(self, "_whole_filter", None)
        if whole is None or whole[0] is not value:
            whole = self._whole_filter = (value, value.value())
        return whole[1]

    def transforms_filter_by_rows(self, step) -> bool:
        """Whether the kernel bound for `step` would read its filter only to transform it for
        Winograd, a block of output channels at a time (`WinogradFilter`)."""
        return not self.grouped and not self.run_replaced() and len(step.inputs) == 2 \
            and self._winograd_layout(step) is not None

    def _bind_direct(self, step):
        """What `run` does but the kernel itself, done once: checking the channels, reading the
        attributes, resolving the pads (40 us a layer inside a network, a fifth of MobileNetV3's
        time in its 52 small convolutions)."""
        weights = self._constant_filter(step)
        if weights is None:
            return None
        data = step.inputs[0]
        geo = self.geometry(data.rank - 2)
        whole, counts = window_layout(data.shape[2:], weights.shape[3:], geo)
        if min(counts, default=1) <= 0:
            return None
        source = step.inputs[1].value
        if im2col.pointwise_unpadded(weights.shape, geo, whole, data.shape[2:]) and not depthwise_pays(weights.shape):
            og, cg = weights.shape[1:3]
            if self.channels_last_output:
                # (a paired run's half of the output channels: its columns of the whole layer's)
                w_t = self._whole_layers_columns("transposed", cg)
                if w_t is None:
                    w_t = self._laid_out_once(source, "transposed",
                                              lambda: np.ascontiguousarray(weights[0].reshape(og, cg).T))
                return lambda x, w: im2col.pointwise_channels_last(x, w_t)
            # the GEMM alone: a squeeze-excite layer's 1x1 on one position took 20-40 us, half of
            # it `_direct`'s choice of kernel and the padding check (EfficientNet has 32); the
            # YOLO-style net's 34 1x1 layers spent 0.9% of its time slicing and reshaping
            shape, columns = (data.shape[0], og, *counts), (data.shape[0], 1, cg, -1)
            filters = weights.reshape(1, og, cg)
            # (the pieces decided here, where the shapes are known: their test took 0.6 us a call)
            matmul = thin_products.matmul if data.shape[0] == 1 and thin_products.cuts(og, cg, prod(counts)) \
                else threads.matmul
            return lambda x, w: matmul(filters, x.reshape(columns)).reshape(shape)
        # the kernel the shapes choose, chosen here (1% of the YOLO-style net's time on each call)
        kind = _shape_kernel(weights.shape, geo, whole, counts)
        if kind == "channels-last columns" and (not maps_the_file(source)
                                                 or self.direct_kind not in ("not bound", kind)):
            # (a filter made at load, f16 weights' Convert, would stay beside its layout: ResNet-18's
            # five such layers 33 MiB more, where the file's pages leave memory; and a paired run's
            # half of a layer that took other columns would lay its filter out anew, at each level)
            kind = _shape_kernel(weights.shape, geo, whole, counts, channels_last=False)
        self.direct_kind = kind
        if kind in _LAID_OUT_ALONE:
            # (a paired run's half of the output channels of channels-last columns: its columns of
            # the whole layer's layout)
            laid_out = self._whole_layers_columns(kind, weights[0, 0].size) if kind != "row taps" else None
            if laid_out is None:
                laid_out = self._laid_out_once(source, kind, lambda: laid_out_filter(weights, geo, counts, kind)[0])
            alone = True
            weights = shape_only(weights)       # (nor does it keep the filter's values)
        else:
            laid_out, alone = laid_out_filter(weights, geo, counts, kind)
            self.held_layout = laid_out is not None
        if alone and step.release is not None:
            # the kernel reads its laid-out copy alone: the filter's mapped pages go, as Winograd's do
            step.release(step.inputs[1].value)
        return lambda x, w: _direct(x, weights, geo, whole, counts, laid_out, kind)

    def bind_pooled(self, step, pool: tuple[int, ...]):
        """The kernel of this layer with a max pool whose windows `pool` tile its output after it
        (stride = kernel, no padding), as irrun/optimize.py's pools first fuses them: the maxima
        not yet raised to the lowest value.  A 1-D layer of one sample with positions-major
        windows (an audio front end: `im2col.pooled_positions_major`) or a thin 2-D layer of one
        sample that im2col would take (the CRNN's stem: `im2col.pooled_rows_positions_major`);
        None for other layers."""
        weights = None if self.transposed or self.run_replaced() or len(step.inputs) != 2 \
            else self._constant_filter(step)
        data = step.inputs[0]
        if weights is None or len(pool) != weights.ndim - 3 or max(pool) < 2:
            return None
        geo = self.geometry(data.rank - 2)
        whole, counts = window_layout(data.shape[2:], weights.shape[3:], geo)
        if len(pool) == 2:
            if weights.shape[0] != 1 or not im2col.pooled_2d_suits(weights.shape, data.shape[0], counts, pool) or \
                    _shape_kernel(weights.shape, geo, whole, counts) is not None:
                return None
            shape = (1, weights.shape[1], counts[0] // pool[0], counts[1] // pool[1])
            return lambda x, w: im2col.pooled_rows_positions_major(x, weights, geo, whole, counts, pool).reshape(shape)
        (pool,) = pool
        if fft_pays(weights.shape, geo, counts, weights.itemsize):
            return None     # (the transforms win by more than the pool inside the GEMM's blocks)
        if min(counts, default=1) < pool or not im2col.one_view_of_windows(weights.shape, data.shape[0], geo, whole,
                                                                               counts, data.shape[2:]):
            return None
        shape = (1, weights.shape[1], counts[0] // pool)
        return lambda x, w: im2col.pooled_positions_major(x, weights, geo, whole, counts, pool).reshape(shape)

    def _winograd_layout(self, step):
        """(filter shape [1, C_out, C_in, 3, 3], geometry, whole, counts, tile m) where this layer
        runs by Winograd (`winograd.winograd_tile`, or `whole_layer_tile` where set), else None."""
        if not self.winograd_capable:
            return None
        data = step.inputs[0]
        shape = self._filter_shape(step)
        if shape is None or data.rank != 4 or shape[0] != 1:
            return None
        geo = self.geometry(2)
        if shape[3:] != (3, 3) or tuple(geo.strides) != (1, 1) or tuple(geo.dilations) != (1, 1):
            return None
        whole, counts = window_layout(data.shape[2:], (3, 3), geo)
        if min(counts) <= 0:
            return None
        m = self.whole_layer_tile or winograd_tile(shape[2], shape[1], counts)
        return None if m is None else (shape, geo, whole, counts, m)

    def winograd_transform_of(self, step):
        """(the layer's transformed filter, whole, counts) where it runs by Winograd and its filter
        has been transformed (a paired run's two-phase halves read it: irrun/convolution_halves.py),
        else None."""
        found = self._winograd_layout(step)
        cached = getattr(self, "_transformed", None)
        if found is None or cached is None or cached[1] != found[-1]:
            return None
        return cached[2], found[2], found[3]

    def winograd_tile_of(self, step) -> int | None:
        """The tile m of the Winograd kernel this layer binds for `step`'s shapes, None where it
        binds another."""
        found = self._winograd_layout(step)
        return None if found is None else found[-1]

    def _bind_winograd(self, step):
        found = self._winograd_layout(step)
        if found is None:
            return None
        shape, geo, whole, counts, m = found
        data, filt = step.inputs
        value = filt.value
        # (made once per layer: a plan variant that binds the layer again takes the same one)
        cached = getattr(self, "_transformed", None)
        channels = self.whole_layer_channels
        if channels is not None and cached is not None and cached[1] == m \
                and cached[2].c_out >= channels[1] and cached[2].c_in == shape[2]:
            # a paired run's half of the layer's output channels (irrun/convolution_halves.py): a
            # view of the whole layer's transform, which its copy of the layer's op keeps
            transformed = cached[2].output_channels(*channels)
        else:
            made_whole = getattr(self, "_whole_filter", (None, None))    # (the chain's values, where made)
            if cached is None or cached[1] != m or not (cached[0] is value or (
                    made_whole[0] is cached[0] and made_whole[1] is value)):
                # (a filter folded by rows, f16 weights' Convert: read by rows, never made whole)
                source = self.filter_array(value)[0] if self.grouped else value
                cached = self._transformed = (value, m, WinogradFilter(source, m, data.etype.carrier))
            if step.release is not None:
                step.release(value) if isinstance(value, np.ndarray) else value.let_go()
            transformed = cached[2]
            self.held_layout = True

        def whole_filter():     # (by `value`: the step's type lets go of it once it is released)
            w = self.filter_array(value)
            return w if self.grouped else w[None]
        return _unless_values_spread(lambda x: winograd_conv(x, transformed, whole, counts),
                                     lambda x: np.isfinite(sum_of_squares(x)), whole_filter, geo, whole, counts)

    def _bind_spectral(self, step):
        """Long 1-D kernels where the transforms pay (`fft_convolution.fft_pays`): the filter's
        transforms made once, here."""
        weights = self._constant_filter(step)
        if weights is None or weights.ndim != 4:
            return None
        data = step.inputs[0]
        geo = self.geometry(1)
        whole, counts = window_layout(data.shape[2:], weights.shape[3:], geo)
        if not fft_pays(weights.shape, geo, counts, weights.itemsize):
            return None
        stride = geo.strides[0]
        length = block_length(-(-weights.shape[3] // stride), counts[0])
        # (made once per layer: a plan variant that binds the layer again takes the same one)
        cached = getattr(self, "_spectra", None)
        channels = self.whole_layer_channels
        if channels is not None and cached is not None and cached[1] == (stride, length) \
                and cached[2].c_out >= channels[1] and cached[2].c_in == weights.shape[2]:
            # a paired run's half of the layer's output channels (irrun/convolution_halves.py): a
            # view of the whole layer's transforms, which its copy of the layer's op keeps
            spectral = cached[2].output_channels(*channels)
        else:
            self.held_layout = True
            if cached is None or cached[0] is not step.inputs[1].value or cached[1] != (stride, length):
                spectral = SpectralFilter(weights[0], stride, length)
                cached = self._spectra = (step.inputs[1].value, (stride, length), spectral)
            if step.release is not None:
                step.release(step.inputs[1].value)
            spectral = cached[2]
        return _unless_values_spread(lambda x: fft_conv(x, spectral, whole, counts), lambda x: fft_suits(x, spectral),
                                     lambda: weights, geo, whole, counts)

    def _bind_phases(self, step):
        from .transposed_convolution import phase_filters_of, phases_pay
        filt = step.inputs[1]
        if self.run_replaced() or filt.value is None or filt.rank is None:
            return None
        geo = self.geometry(filt.rank - 2 - self.grouped)
        weights = filt.value if self.grouped else filt.value[None]
        if not phases_pay(weights.shape[3:], geo):
            return None
        cached = getattr(self, "_phase_filters", None)    # (a plan variant binding again takes it)
        if cached is None or cached[0] is not filt.value:
            filters = phase_filters_of(weights.astype(_compute_dtype(weights.dtype), copy=False), geo.strides)
            cached = self._phase_filters = (filt.value, filters)
        if step.release is not None:
            step.release(filt.value)
        return lambda x, w, output_shape=None: self.run(x, w, output_shape, cached[1])

    def run(self, x, w, output_shape=None, phase_filters=None):
        w = self.filter_array(w)
        self.check_channels(x.shape, w.shape)
        geo = self.geometry(x.ndim - 2)
        if not self.grouped:
            w = w[None]
        if self.transposed:
            from .transposed_convolution import conv_transposed
            spatial = None if output_shape is None else [int(v) for v in np.asarray(output_shape).reshape(-1)]
            return conv_transposed(x, w, geo, spatial, phase_filters)
        return conv_forward(x, w, geo)


def _unless_values_spread(fast, suits, weights: Callable[[], np.ndarray], geo: Geometry, whole, counts):
    """A bound kernel running `fast` (a transform's: Winograd, FFT) where `suits(x)`, else the direct
    kernels by the filter `weights()` gives: a transform mixes an input's values, so it would spread
    a NaN over a whole tile or block, turn an infinity into NaN or overflow, where the direct sums
    keep each value to the windows that read it (`common.sum_of_squares`)."""
    def kernel(x, w):
        return fast(x) if suits(x) else _direct(x, weights(), geo, whole, counts)
    return kernel


@register("Convolution", 1)
class Convolution(_ConvolutionFamily):
    winograd_capable = True


@register("GroupConvolution", 1)
class GroupConvolution(_ConvolutionFamily):
    grouped = True
    winograd_capable = True


@register("ConvolutionBackpropData", 1)
class ConvolutionBackpropData(_ConvolutionFamily):
    transposed = True


@register("GroupConvolutionBackpropData", 1)
class GroupConvolutionBackpropData(_ConvolutionFamily):
    grouped = True
    transposed = True
