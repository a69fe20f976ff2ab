"""Sliding-window arithmetic shared by convolutions and pools (written once).

For one spatial axis with input size `x`, kernel `k`, stride `s`, dilation `d`
(effective kernel `dk = (k - 1) * d + 1`) and pads `pb`/`pe`:

    explicit, floor:  out = floor((x + pb + pe - dk) / s) + 1
    explicit, ceil:   out = ceil((x + pb + pe - dk) / s) + 1
    ceil_torch:       as ceil, minus 1 when the last window would start in the end padding
    valid:            pads are 0 (then the explicit rule)
    same_upper/lower: total pad = max(0, (ceil(x / s) - 1) * s + dk - x), split
                      evenly, the odd unit at the end (upper) or beginning (lower),
                      then the rule above: out = ceil(x / s) with floor rounding,
                      possibly more with ceil (9, kernel 2, stride 3: 4, not 3)

OpenVINO's IR reader refuses `auto_pad="notset"`.  Shape inference calls `window_output_dims`
(works on dynamic dims, returns a note per dim for diagnostics); kernels call
`resolve_pads` with the actual sizes.
"""
from __future__ import annotations

import sys
from math import prod
from typing import Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .. import etypes
from ..errors import ShapeError
from ..shapes import ANY, DimLike, dim_map, format_shape

SAME = ("same_upper", "same_lower")


def effective_kernel(k: int, d: int) -> int:
    return (k - 1) * d + 1


def window_view(x: np.ndarray, kernel: Sequence[int], axes: Sequence[int], strides: Sequence[int] | None = None,
                dilations: Sequence[int] | None = None) -> np.ndarray:
    """x's windows, read-only: each of `axes` becomes the windows' positions along it (every
    stride-th) and a trailing axis per kernel axis their taps (every dilation-th element), as
    sliding_window_view(x, spans, axis=axes)[..., ::stride, ..., ::dilation] (whose Python took
    40-50 us per convolution inside a network, 5-10 times this).  x must be at least as long as
    each window's span along its axis."""
    strides = strides or (1,) * len(axes)
    dilations = dilations or (1,) * len(axes)
    shape, steps = list(x.shape), list(x.strides)
    for axis, k, s, d in zip(axes, kernel, strides, dilations):
        shape[axis] = (x.shape[axis] - effective_kernel(k, d)) // s + 1
        steps[axis] = x.strides[axis] * s
    return strided_view(x, shape + list(kernel), steps + [x.strides[a] * d for a, d in zip(axes, dilations)])


def strided_view(x: np.ndarray, shape: Sequence[int], strides: Sequence[int]) -> np.ndarray:
    """A read-only view of x's memory with this shape and these strides, which must stay within
    x: NumPy's as_strided, made straight on x's buffer where x is contiguous (0.3 against 2.1 us;
    a MobileNetV3 inference makes 14 such views)."""
    if x.size and x.flags.c_contiguous:
        view = np.ndarray(tuple(shape), x.dtype, x, 0, tuple(strides))
        view.flags.writeable = False
        return view
    return as_strided(x, shape, strides, writeable=False)


# An element of 1, 2 or 4 bytes and its pair with the next one as one unsigned integer: cast to the
# narrow one, the pair gives back its first element (the low half, on a little-endian machine)
_PAIR_CARRIERS = {1: (np.uint16, np.uint8), 2: (np.uint32, np.uint16), 4: (np.uint64, np.uint32)} \
    if sys.byteorder == "little" else {}
# Below this many elements a gather is a plain copy (the pairs' view costs a few microseconds)
PAIR_GATHER_ELEMENTS = 1 << 12


def copy_gathered(target: np.ndarray, source: np.ndarray) -> None:
    """np.copyto(target, source) of the same shape and type, where source's last axis may take
    every other element (a max pool's windows two wide): NumPy copies such a strided axis an
    element at a time, about 0.28 ns an element on this machine, but casts a contiguous array of
    pairs, each read as one integer twice as wide, to its first halves at the speed of a plain copy
    (0.14).  The pairs are a view of the same memory, the last pair's second half included, which
    NumPy checks lies inside source's buffer (else the plain copy).  (im2col's gathers of stride-2
    layers so: 59 -> 35 us for the audio net's 64 -> 128 / 2 columns alone, but its layers level or
    slower in the networks, 0.99-1.04x: not used there.)"""
    carriers = _PAIR_CARRIERS.get(source.dtype.itemsize)
    if carriers is not None and source.ndim and source.strides[-1] == 2 * source.itemsize \
            and source.size >= PAIR_GATHER_ELEMENTS and source.dtype.kind in "fiub":
        pairs = _pairs_view(source, carriers[0])
        if pairs is not None:
            np.copyto(target.view(carriers[1]), pairs, casting="unsafe")
            return
    np.copyto(target, source)


def _pairs_view(source: np.ndarray, wide) -> np.ndarray | None:
    """source's elements each read with the next one as one `wide` integer, a view; None where
    NumPy cannot place it in the buffer source lies in (its last pair reaching past the end)."""
    base = source
    while isinstance(base.base, np.ndarray):
        base = base.base
    if not base.flags.c_contiguous:
        return None
    offset = source.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    try:
        return np.ndarray(source.shape, wide, base, offset, source.strides)
    except (TypeError, ValueError):
        return None


def same_pads(x: int, k: int, s: int, d: int, auto_pad: str) -> tuple[int, int]:
    out = -(-x // s)
    total = max(0, (out - 1) * s + effective_kernel(k, d) - x)
    small, large = total // 2, total - total // 2
    return (small, large) if auto_pad == "same_upper" else (large, small)


def axis_output(x: int, k: int, s: int, d: int, pb: int, pe: int, rounding: str = "floor") -> int:
    span = x + pb + pe - effective_kernel(k, d)
    if rounding == "floor":
        return span // s + 1
    out = -(-span // s) + 1
    if rounding == "ceil_torch" and (out - 1) * s >= x + pb:
        out -= 1
    return out


def resolve_pads(spatial: Sequence[int], kernel, strides, dilations, pads_begin, pads_end,
                 auto_pad: str) -> tuple[list[int], list[int]]:
    """Actual pads for static spatial sizes, after auto_pad."""
    if auto_pad in SAME:
        pairs = [same_pads(x, k, s, d, auto_pad) for x, k, s, d in zip(spatial, kernel, strides, dilations)]
        return [p[0] for p in pairs], [p[1] for p in pairs]
    if auto_pad == "valid":
        return [0] * len(spatial), [0] * len(spatial)
    return list(pads_begin), list(pads_end)


def window_output_dims(spatial: Sequence[DimLike], kernel, strides, dilations, pads_begin, pads_end,
                       auto_pad: str, rounding: str = "floor", first_axis: int = 2,
                       what: str = "kernel") -> tuple[list[DimLike], dict[int, str]]:
    """Output spatial dims and, per output axis index, the arithmetic behind it."""
    if 0 in strides:
        raise ShapeError(f"strides {list(strides)} has a zero value")
    if dilations is not None and 0 in dilations:
        raise ShapeError(f"dilations {list(dilations)} has a zero value")
    dilations = dilations or [1] * len(spatial)
    dims, notes = [], {}
    for i, (x, k, s, d) in enumerate(zip(spatial, kernel, strides, dilations)):
        dk = effective_kernel(k, d)
        axis = first_axis + i
        if auto_pad in SAME and rounding == "floor":
            dims.append(dim_map(lambda v, s=s: -(-v // s), x))
            notes[axis] = f"ceil({x} / {s}) with auto_pad={auto_pad}"
            continue
        if auto_pad in SAME:
            # Pools with ceil rounding round the padded extent up; a dynamic dim
            # stays ? (as in OpenVINO).
            if not isinstance(x, int):
                dims.append(ANY)
                continue
            pb, pe = same_pads(x, k, s, d, auto_pad)
        else:
            pb, pe = (0, 0) if auto_pad == "valid" else (pads_begin[i], pads_end[i])
        if isinstance(x, int) and x + pb + pe < dk:
            raise ShapeError(f"{what} after dilation ({dk}) is larger than spatial dim {axis} after padding "
                             f"({x} + {pb} + {pe} = {x + pb + pe})")
        # Every window position that exists yields an output, so a dynamic dim
        # gives at least one (OpenVINO's lower bound too).
        dims.append(dim_map(lambda v, k=k, s=s, d=d, pb=pb, pe=pe: max(axis_output(v, k, s, d, pb, pe, rounding), 1), x))
        op = "floor" if rounding == "floor" else "ceil"
        fix = " (minus 1 if the last window starts in the padding)" if rounding == "ceil_torch" else ""
        dil = f"({k} - 1) * {d} + 1" if d != 1 else f"{k}"
        notes[axis] = f"{op}(({x} + {pb} + {pe} - {dil}) / {s}) + 1{fix}" + \
            (f" with auto_pad={auto_pad}" if auto_pad != "explicit" else "")
    return dims, notes


# ---------------------------------------------------------------- transposed convolution
# ConvolutionBackpropData and GroupConvolutionBackpropData scatter every input
# element over a dilated kernel footprint.  Along one axis the scattered values
# span `(x - 1) * s + dk` positions; the pads crop that span and output_padding
# extends it at the end:
#
#     out = (x - 1) * s + dk - pb - pe + output_padding
#
# Output element o is span position o + pb (positions past the span are 0).
# Without an output_shape input, auto_pad same_upper/same_lower/valid all mean
# pads 0 (OpenVINO 2026.4.1).  With one, the output size is given and the pads
# follow from it:
#
#     total = max(0, (x - 1) * s + dk - out + output_padding)
#     same_upper: pb = total - total // 2  (the odd unit at the beginning)
#     same_lower: pb = total // 2          (the odd unit at the end)
#     explicit:   pb, pe as given;  valid: 0, 0

def transposed_axis_output(x: int, k: int, s: int, d: int, pb: int, pe: int, output_padding: int) -> int:
    return (x - 1) * s + effective_kernel(k, d) - pb - pe + output_padding


def transposed_pads(spatial: Sequence[int], kernel, strides, dilations, pads_begin, pads_end, output_padding,
                    auto_pad: str, output_spatial: Sequence[int] | None = None) -> tuple[list[int], list[int]]:
    """Actual pads of a transposed convolution for static sizes, after auto_pad."""
    n = len(spatial)
    if output_spatial is None:
        if auto_pad == "explicit":
            return list(pads_begin), list(pads_end)
        return [0] * n, [0] * n
    if auto_pad == "explicit":
        return list(pads_begin), list(pads_end)
    if auto_pad == "valid":
        return [0] * n, [0] * n
    begins, ends = [], []
    for x, k, s, d, op, out in zip(spatial, kernel, strides, dilations, output_padding, output_spatial):
        total = max(0, transposed_axis_output(x, k, s, d, 0, 0, op) - out)
        small, large = total // 2, total - total // 2
        begin, end = (large, small) if auto_pad == "same_upper" else (small, large)
        begins.append(begin)
        ends.append(end)
    return begins, ends


def transposed_output_dims(spatial: Sequence[DimLike], kernel, strides, dilations, pads_begin, pads_end,
                           output_padding, auto_pad: str, first_axis: int = 2) -> tuple[list[DimLike], dict[int, str]]:
    """Output spatial dims of a transposed convolution without an output_shape input, with notes."""
    if 0 in strides:
        raise ShapeError(f"strides {list(strides)} has a zero value")
    if 0 in dilations:
        raise ShapeError(f"dilations {list(dilations)} has a zero value")
    explicit = auto_pad == "explicit"
    dims, notes = [], {}
    for i, (x, k, s, d, op) in enumerate(zip(spatial, kernel, strides, dilations, output_padding)):
        pb, pe = (pads_begin[i], pads_end[i]) if explicit else (0, 0)
        axis = first_axis + i
        largest = x if isinstance(x, int) else x.hi
        if largest is not None and transposed_axis_output(largest, k, s, d, pb, pe, op) < 0:
            raise ShapeError(f"output spatial dim {axis} would be negative: ({largest} - 1) * {s} + "
                             f"{effective_kernel(k, d)} - {pb} - {pe} + {op} = "
                             f"{transposed_axis_output(largest, k, s, d, pb, pe, op)}")
        # A dynamic input axis has at least one element (as OpenVINO's interval arithmetic assumes).
        dims.append(dim_map(lambda v, k=k, s=s, d=d, pb=pb, pe=pe, op=op:
                            max(transposed_axis_output(max(v, 1), k, s, d, pb, pe, op), 0), x))
        dil = f"({k} - 1) * {d} + 1" if d != 1 else f"{k}"
        notes[axis] = f"({x} - 1) * {s} + {dil} - {pb} - {pe} + {op}" + \
            ("" if explicit else f" (pads are 0 with auto_pad={auto_pad} and no output_shape input)")
    return dims, notes


def window_layout(spatial, kernel, geo) -> tuple[list[tuple[int, int]], list[int]]:
    """(whole, counts): the (lo, hi) range of the input each spatial axis covers once padded,
    and the output's spatial size."""
    pb, pe = resolve_pads(spatial, kernel, geo.strides, geo.dilations, geo.pads_begin, geo.pads_end, geo.auto_pad)
    whole = [(-b, size + e) for size, b, e in zip(spatial, pb, pe)]
    counts = [(hi - lo - effective_kernel(k, d)) // s + 1
              for (lo, hi), k, d, s in zip(whole, kernel, geo.dilations, geo.strides)]
    return whole, counts


def tap_outputs(size: int, outputs: int, stride: int, shift: int) -> tuple[int, int]:
    """(first, last): the outputs j in [first, last) whose tap at input index j * stride + shift
    lies inside an axis of `size` elements (the others read padding); first >= last when none."""
    return max(0, -(shift // stride)), min(outputs, (size - 1 - shift) // stride + 1)


def inside_region(spatial, region) -> tuple[list[slice], list[tuple[int, int]], tuple[slice, ...]]:
    """For a (lo, hi) per spatial axis: the part of each axis that exists, the zeros to add
    before and after it, and where that part lands in the extended axes."""
    inside, widths = [], []
    for (lo, hi), size in zip(region, spatial):
        a = max(lo, 0)
        b = max(min(hi, size), a)
        inside.append(slice(a, b))
        widths.append((a - lo, hi - b))
    target = tuple(slice(left, left + s.stop - s.start) for s, (left, _) in zip(inside, widths))
    return inside, widths, target


def zero_extended(x: np.ndarray, region) -> np.ndarray:
    """x[:, :, lo:hi, ...] for a (lo, hi) per spatial axis that may reach past x's edges (zeros
    there, as padding) or stop short of them (negative padding): a view when it needs no zeros."""
    inside, widths, target = inside_region(x.shape[2:], region)
    block = x[(slice(None), slice(None)) + tuple(inside)]
    if not any(left or right for left, right in widths):
        return block
    # (np.pad spends about 100 us in Python per call, holding the GIL that parts share)
    shape = x.shape[:2] + tuple(s.stop - s.start + left + right for s, (left, right) in zip(inside, widths))
    everything = (slice(None), slice(None))
    if prod(shape) < BORDERS_ONLY_ELEMENTS:
        out = np.zeros(shape, x.dtype)
    else:   # zeros where the data does not go only (16 ch at 160x320: 349 -> 250 us, the copy 222)
        out = np.empty(shape, x.dtype)
        for axis, (left, right) in enumerate(widths):
            before = everything + (slice(None),) * axis
            if left:
                out[before + (slice(0, left),)] = 0
            if right:
                out[before + (slice(shape[2 + axis] - right, None),)] = 0
    out[everything + target] = block
    return out


BORDERS_ONLY_ELEMENTS = 1 << 18     # below it, np.zeros and one copy make fewer calls


def channels_last(x: np.ndarray, region) -> np.ndarray:
    """x [N, C, S...] as [N, S'..., C], zero-extended to `region` ((lo, hi) per spatial axis, as
    `zero_extended`) in the same copy: a padded copy and a transposed one took twice as long
    (MobileNetV3's depthwise layers, 0.7 ms of padding; im2col's channels-last columns)."""
    out = phased_channels_last(x, region, 1)
    return out.reshape(*out.shape[:-3], *out.shape[-2:])


def phased_channels_last(x: np.ndarray, region, stride: int) -> np.ndarray:
    """`channels_last` with the last spatial axis cut into its `stride` phases: [N, S'_lead...,
    stride, ceil(S'_last / stride), C], phase p holding the columns p, p + stride, ... of the
    zero-extended data (one copy either way)."""
    inside, widths, target = inside_region(x.shape[2:], region)
    n, channels = x.shape[:2]
    width = region[-1][1] - region[-1][0]
    shape = (n, *(hi - lo for lo, hi in region[:-1]), stride, -(-width // stride), channels)
    padded = any(left or right for left, right in widths) or width % stride
    out = np.zeros(shape, x.dtype) if padded else np.empty(shape, x.dtype)
    data = x[(slice(None), slice(None)) + tuple(inside)].transpose((0, *range(2, x.ndim), 1))
    first, last = target[-1].start, target[-1].stop       # the data's columns in the extended frame
    for phase in range(stride):
        start = first + (phase - first) % stride
        if start < last:
            count = len(range(start, last, stride))
            out[(slice(None),) + tuple(target[:-1]) + (phase, slice(start // stride, start // stride + count))] = \
                data[..., start - first::stride, :]
    return out


def padded_rows(sample: np.ndarray, buffer: np.ndarray, whole, first: int, height: int, slack: int) -> np.ndarray:
    """Rows [first, first + height) of `sample` [..., C, spatial...] padded to `whole` ((lo, hi) per
    spatial axis), flattened per channel and followed by `slack` zeros, in `buffer`: the input of
    the tap-by-tap convolution kernel, whose shifts are then contiguous slices."""
    lead, padded = sample.shape[:-len(whole)], [hi - lo for lo, hi in whole[1:]]
    row = prod(padded)
    slab = buffer[:prod(lead) * (height * row + slack)].reshape(*lead, -1)
    slab.fill(0)
    region = [(whole[0][0] + first, whole[0][0] + first + height)] + list(whole[1:])
    inside, _, target = inside_region(sample.shape[-len(region):], region)
    if all(s.stop > s.start for s in inside):
        slab[..., :height * row].reshape(*lead, height, *padded)[(Ellipsis, *target)] = sample[(Ellipsis, *inside)]
    return slab


# ---------------------------------------------------------------- convolutions' output shapes

def forward_spatial(spatial, kernel, geo):
    """A convolution's output spatial dims and their notes (`geo`: its Geometry)."""
    # A dynamic kernel size leaves the output dynamic unless same_* ignores it.
    known = [k if isinstance(k, int) else 1 for k in kernel]
    dims, notes = window_output_dims(spatial, known, geo.strides, geo.dilations, geo.pads_begin, geo.pads_end,
                                     geo.auto_pad)
    if geo.auto_pad not in SAME:
        for i, k in enumerate(kernel):
            if not isinstance(k, int):
                dims[i] = ANY
                notes.pop(2 + i, None)
    return dims, notes


def transposed_spatial(spatial, kernel, geo, output_shape):
    """A transposed convolution's output spatial dims and their notes, from its attributes or from its
    `output_shape` input (a TensorType, or None)."""
    n = len(spatial)
    if output_shape is None:
        known = [k if isinstance(k, int) else 1 for k in kernel]
        dims, notes = transposed_output_dims(spatial, known, geo.strides, geo.dilations, geo.pads_begin,
                                             geo.pads_end, geo.output_padding, geo.auto_pad)
        for i, k in enumerate(kernel):
            if not isinstance(k, int):
                dims[i] = ANY
                notes.pop(2 + i, None)
        return dims, notes
    if output_shape.rank not in (None, 1):
        raise ShapeError(f"output_shape must be 1-D, got {format_shape(output_shape.shape)}")
    if output_shape.etype is not etypes.dynamic and not output_shape.etype.is_integral:
        raise ShapeError(f"output_shape must be an integer tensor, got {output_shape.etype}")
    count = output_shape.shape[0] if output_shape.rank == 1 else None
    if output_shape.value is not None:
        count = int(output_shape.value.size)
    if isinstance(count, int) and count != n:
        raise ShapeError(f"output_shape has {count} values for {n} spatial dimension{'s' if n != 1 else ''}")
    if output_shape.value is None:
        return [ANY] * n, {}
    dims = [int(v) for v in output_shape.value.reshape(-1)]
    if any(d < 0 for d in dims):
        raise ShapeError(f"output_shape {dims} has a negative value")
    return dims, {2 + i: "given by the output_shape input" for i in range(n)}
