"""Broadcast-1/3, Tile-1 and Pad-1/12: a tensor grown to a larger shape (Pad also crops).

Each op's output shape comes from one function of the input shape and the values of its
target/repeats/pads inputs.  Shape inference calls it with partial shapes at load time; the
kernel calls it with the concrete shape, so the two cannot disagree.  Broadcast and cropping
Pad return NumPy views; Tile and padding Pad copy.
"""
from __future__ import annotations

import numpy as np

from .. import etypes, partial_values
from ..errors import ShapeError
from ..registry import Op, TensorType, register
from ..shapes import (
    ANY, DimLike, Shape, broadcast_shapes, dim_bounds, dim_mul, dims_compatible, format_shape, is_static,
    is_static_dim, make_dim, numpy_broadcast,
)
from .arithmetic import pdpd_align, pdpd_start
from .shape_inputs import as_ints, index_input, may_be_one, vector_length


# ---------------------------------------------------------------- Broadcast

def _target_dims(values: list[int]) -> tuple:
    """A target shape input's values as dims (OpenVINO reads a negative value as a dynamic dim)."""
    return tuple(ANY if v < 0 else v for v in values)


def broadcast_numpy_shape(data: Shape, target: tuple) -> tuple:
    """mode=numpy: the output is the target; data lines up with its trailing dims."""
    if data is not None:
        if len(data) > len(target):
            raise ShapeError(f"cannot broadcast {format_shape(data)} to the target {format_shape(target)} of "
                             f"smaller rank (mode numpy)")
        for i, d in enumerate(data):
            t = target[len(target) - len(data) + i]
            # OpenVINO checks static dims only (a 2..5 data dim passes for a target of 7).
            if is_static_dim(d) and is_static_dim(t) and d not in (1, t):
                raise ShapeError(f"cannot broadcast {format_shape(data)} to {format_shape(target)} (mode numpy): "
                                 f"data dim {i} is {d}, which is neither 1 nor {t}")
    return target


def broadcast_explicit_shape(data: Shape, target: tuple, axes: list[int] | None) -> tuple:
    """mode=explicit: data dim i becomes target dim axes[i]; axes must be increasing."""
    if data is None or axes is None:
        return target
    if sorted(axes) != list(axes):
        raise ShapeError(f"axes_mapping {axes} is not in increasing order (Broadcast cannot transpose)")
    for i, a in enumerate(axes):
        if not 0 <= a < len(target):
            raise ShapeError(f"axes_mapping[{i}]={a} is out of range for the target {format_shape(target)}")
        if not data:  # OpenVINO places a scalar at a target dim that may be 1
            if i == 0 and not may_be_one(target[a]):
                raise ShapeError(f"cannot broadcast a scalar to {format_shape(target)} with axes_mapping {axes}: "
                                 f"target dim {a} is {target[a]}, not 1")
            continue
        d = data[i]
        if not (may_be_one(d) or dims_compatible(d, target[a])):
            raise ShapeError(f"cannot broadcast {format_shape(data)} to {format_shape(target)} with axes_mapping "
                             f"{axes}: data dim {i} is {d}, target dim {a} is {target[a]}")
    return target


def _check_axes_count(data: Shape, count: int) -> None:
    """axes_mapping has one value per data dim (a scalar takes one or more)."""
    if data is not None and count != len(data) and not (len(data) == 0 and count > 0):
        raise ShapeError(f"axes_mapping has {count} values for data {format_shape(data)} of rank {len(data)}; "
                         f"it needs one per data dim")


def broadcast_pdpd_shape(data: Shape, target: tuple, axis: int) -> tuple:
    """mode=pdpd: data lines up with the target from `axis` (-1: the trailing dims); 1s on either side stretch."""
    if data is None:
        return tuple(ANY for _ in target)
    start = pdpd_start(len(target), len(data), axis)
    out = list(target)
    for i, d in enumerate(data):
        try:
            out[start + i] = broadcast_shapes((d,), (target[start + i],))[0]
        except ShapeError:
            raise ShapeError(f"cannot broadcast {format_shape(data)} to {format_shape(target)} (mode pdpd, axis "
                             f"{axis}): data dim {i} is {d}, target dim {start + i} is {target[start + i]}") from None
    return tuple(out)


@register("Broadcast", 1, 3)
class Broadcast(Op):
    def mode(self, n_inputs: int) -> str:
        mode = self.attrs.mode
        if mode is None:  # Broadcast-1 without the attribute: OpenVINO picks by the number of inputs
            mode = "explicit" if n_inputs == 3 else "numpy"
        return "explicit" if mode == "none" else mode

    @property
    def pdpd_axis(self) -> int:
        return self.attrs.get("mode.mode.axis") or 0

    def infer(self, inputs):
        data, target_t = inputs[:2]
        mode = self.mode(len(inputs))
        if self.version == 3 and (mode == "explicit") != (len(inputs) == 3):
            raise ShapeError("Broadcast-3 takes an axes_mapping input in explicit mode and only then")
        if mode == "explicit" and len(inputs) < 3:
            raise ShapeError("Broadcast in explicit mode needs the axes_mapping input")
        target = index_input(target_t, "the Broadcast target shape")
        axes = None
        if mode == "explicit":
            axes = index_input(inputs[2], "axes_mapping")
            if is_static(inputs[2].shape) and inputs[2].rank == 1:
                _check_axes_count(data.shape, inputs[2].shape[0])
        if target is None and target_t.partial is not None:
            dims = partial_values.as_dims(target_t, "the Broadcast target shape")
            return [data.like(self._shape(mode, data.shape, dims, axes))]
        if target is None:
            length = vector_length(target_t)
            if not isinstance(length, int):
                return [data.like(None)]
            if mode == "bidirectional":
                return [data.like(broadcast_shapes(data.shape, (ANY,) * length))]
            return [data.like((ANY,) * length)]
        return [data.like(self._shape(mode, data.shape, _target_dims(target), axes))]

    def _shape(self, mode: str, data: Shape, target: tuple, axes) -> Shape:
        if mode == "numpy":
            return broadcast_numpy_shape(data, target)
        if mode == "explicit":
            return broadcast_explicit_shape(data, target, axes)
        if mode == "bidirectional":
            try:
                return broadcast_shapes(data, target)
            except ShapeError as exc:
                raise ShapeError(f"mode bidirectional: {exc.message}") from None
        return broadcast_pdpd_shape(data, target, self.pdpd_axis)

    def quick_shapes(self, args):
        if len(args) != 2 or args[1].ndim != 1 or args[1].dtype.kind not in "iu":
            return None
        mode, target = self.mode(2), tuple(args[1].tolist())
        shape = args[0].shape
        if min(target, default=0) < 0:
            return None
        if mode == "bidirectional":
            out = numpy_broadcast(shape, target)
            return None if out is None else ((out,), (1,))
        if mode == "numpy":
            try:
                return (broadcast_numpy_shape(shape, target),), (1,)
            except ShapeError:
                return None
        return None

    def bind(self, step):
        """numpy and bidirectional modes: the target read at each call and checked by
        `numpy_broadcast` (a decoding step's targets change with its cache: `run`'s rule took 4
        of its 6.5 us); anything it does not cover goes to `run`, which says why."""
        if self.run_replaced() or len(step.inputs) != 2 or self.mode(2) not in ("numpy", "bidirectional"):
            return None
        one_way, run = self.mode(2) == "numpy", self.run

        def broadcast(x, target):
            if target.ndim == 1 and target.dtype.kind in "iu":
                wanted = tuple(target.tolist())
                out = numpy_broadcast(x.shape, wanted) if min(wanted, default=0) >= 0 else None
                if out is not None and (out == wanted or not one_way):
                    if out == x.shape:
                        return x.view()
                    return np.empty(out, x.dtype) if 0 in out else np.broadcast_to(x, out)
            return run(x, target)
        return broadcast

    def run(self, x, target, axes=None):
        mode = self.mode(2 if axes is None else 3)
        target = tuple(as_ints(target))
        if any(d < 0 for d in target):
            raise ShapeError(f"the Broadcast target shape {list(target)} has a negative dim")
        if mode == "explicit":
            axes = as_ints(axes)
            _check_axes_count(x.shape, len(axes))
            broadcast_explicit_shape(x.shape, target, axes)
            placed = [1] * len(target)
            for i, a in enumerate(axes[:x.ndim]):
                placed[a] = x.shape[i]
            return np.broadcast_to(x.reshape(placed), target)
        out = self._shape(mode, x.shape, target, None)
        if mode == "pdpd":
            x = pdpd_align(x, len(target), self.pdpd_axis)
        elif out == x.shape:
            return x.view()     # (what broadcast_to would give, less its 2.5 us)
        return np.broadcast_to(x, out)


# ---------------------------------------------------------------- Tile

def tile_shape(shape: Shape, repeats: list[DimLike]) -> tuple[tuple, dict[int, str]]:
    """Output shape of Tile: the shorter of shape and repeats is padded with leading 1s; negative repeats are 0."""
    # (a repeat known only as an interval comes from a value known in part: irrun/partial_values.py)
    repeats = [max(r, 0) if isinstance(r, int) else make_dim(r.lo, r.hi) for r in repeats]
    rank = max(len(shape), len(repeats))
    shape = (1,) * (rank - len(shape)) + tuple(shape)
    repeats = [1] * (rank - len(repeats)) + repeats
    out = tuple(dim_mul(d, r) for d, r in zip(shape, repeats))
    notes = {i: f"{d} * {r} = {o}" for i, (d, r, o) in enumerate(zip(shape, repeats, out)) if r != 1}
    return out, notes


@register("Tile", 1)
class Tile(Op):
    def infer(self, inputs):
        data, repeats_t = inputs
        repeats = index_input(repeats_t, "Tile repeats")
        if repeats is None:
            repeats = partial_values.elements(repeats_t)
        length = vector_length(repeats_t)
        if data.shape is None:
            return [data.like(None)]
        if repeats is None:
            return [data.like((ANY,) * max(data.rank, length) if isinstance(length, int) else None)]
        shape, notes = tile_shape(data.shape, repeats)
        return [TensorType(shape, data.etype, notes=notes or None)]

    def run(self, x, repeats):
        repeats = [max(r, 0) for r in as_ints(repeats)]
        return np.tile(x, repeats) if repeats else x


# ---------------------------------------------------------------- Pad

def _padded_dim(d: DimLike, total: int) -> DimLike:
    """A dim grown (or, negative, cropped) by `total` elements."""
    lo, hi = dim_bounds(d)
    if hi is not None and hi + total < 0:
        raise ShapeError(f"pads of {total} in total crop more than the {d} elements of the dim")
    return make_dim(max(lo + total, 0), None if hi is None else hi + total)


def pad_shape(shape: Shape, begins: list[int], ends: list[int], mode: str) -> tuple[tuple, dict[int, str]]:
    """Output shape of Pad; negative pads crop.  reflect needs pads < dim, symmetric pads <= dim."""
    for name, pads in (("pads_begin", begins), ("pads_end", ends)):
        if len(pads) != len(shape):
            raise ShapeError(f"{name} {pads} has {len(pads)} values for an input {format_shape(shape)} of rank "
                             f"{len(shape)}")
    out, notes = [], {}
    for i, (d, b, e) in enumerate(zip(shape, begins, ends)):
        if not (isinstance(b, int) and isinstance(e, int)):   # pads known as intervals
            out.append(_padded_by_interval(d, b, e))
            notes[i] = f"{b} + {d} + {e} = {out[i]}"
            continue
        if isinstance(d, int):
            _check_pad_mode(mode, d, b, e, i)
        out.append(d if b == e == 0 else _padded_dim(d, b + e))
        if b or e:
            notes[i] = f"{b} + {d} + {e} = {out[i]}"
    return tuple(out), notes


def _padded_by_interval(d: DimLike, begin, end) -> DimLike:
    lo, hi = dim_bounds(d)
    for pad in (begin, end):
        p_lo, p_hi = (pad, pad) if isinstance(pad, int) else (pad.lo, pad.hi)
        lo, hi = lo + p_lo, None if hi is None or p_hi is None else hi + p_hi
    return make_dim(max(lo, 0), hi)


def _check_pad_mode(mode: str, dim: int, begin: int, end: int, axis: int) -> None:
    """OpenVINO's limits on the pads of a static dim (checked even where the dim is only cropped)."""
    largest = max(begin, end)
    if mode == "edge" and largest > 0 and dim < 1:
        raise ShapeError(f"pad_mode=edge pads axis {axis}, which has no elements to repeat")
    if mode == "reflect" and (largest >= dim or largest > 0 and dim < 2):
        raise ShapeError(f"pad_mode=reflect with pads {begin}, {end} on axis {axis} of {dim} elements; each pad "
                         f"must be less than the dim")
    if mode == "symmetric" and largest > dim:
        raise ShapeError(f"pad_mode=symmetric with pads {begin}, {end} on axis {axis} of {dim} elements; each pad "
                         f"must not exceed the dim")


def _constant_padded(x: np.ndarray, grow: list[tuple[int, int]], fill) -> np.ndarray:
    """np.pad(x, grow, constant_values=fill): the output filled, then x copied into it (fill cast
    by assignment, as np.pad does), without np.pad's 15 us of Python a call (64 x 56 x 56 padded by
    one: 89 -> 52 us; 16 x 10: 16 -> 1 us)."""
    out = np.empty(tuple(n + b + e for n, (b, e) in zip(x.shape, grow)), x.dtype)
    out[...] = np.asarray(fill)
    out[tuple(slice(b, b + n) for n, (b, _) in zip(x.shape, grow))] = x
    return out


@register("Pad", 1, 12)
class Pad(Op):
    def infer(self, inputs):
        data, begins_t, ends_t = inputs[:3]
        if len(inputs) == 4 and self.attrs.pad_mode == "constant":  # other modes ignore pad_value
            value = inputs[3]
            if value.etype != data.etype and etypes.dynamic not in (value.etype, data.etype):
                raise ShapeError(f"pad_value has element type {value.etype}, data has {data.etype}; they must match")
            if value.rank not in (None, 0):
                raise ShapeError(f"pad_value must be a scalar, got shape {format_shape(value.shape)}")
        begins = index_input(begins_t, "pads_begin")
        ends = index_input(ends_t, "pads_end")
        if (begins is None or ends is None) and (begins_t.partial is not None or ends_t.partial is not None):
            begins, ends = partial_values.elements(begins_t), partial_values.elements(ends_t)
        if data.shape is None:
            return [data.like(None)]
        if begins is None or ends is None:
            for name, t in (("pads_begin", begins_t), ("pads_end", ends_t)):
                n = vector_length(t)
                if isinstance(n, int) and n > data.rank:
                    raise ShapeError(f"{name} has {n} values for an input {format_shape(data.shape)} of rank "
                                     f"{data.rank}")
            return [data.like((ANY,) * data.rank)]
        shape, notes = pad_shape(data.shape, begins, ends, self.attrs.pad_mode)
        return [TensorType(shape, data.etype, notes=notes or None)]

    def run(self, x, begins, ends, value=None):
        begins, ends = as_ints(begins), as_ints(ends)
        mode = self.attrs.pad_mode
        pad_shape(x.shape, begins, ends, mode)
        # Pad first with the positive amounts, then crop: padding values come from the whole input.
        grow = [(max(b, 0), max(e, 0)) for b, e in zip(begins, ends)]
        if any(b or e for b, e in grow):
            if mode == "constant":
                fill = 0 if value is None else np.asarray(value).reshape(()).item()
                x = _constant_padded(x, grow, fill)
            else:
                x = np.pad(x, grow, mode=mode)
        crop = tuple(slice(max(-b, 0), n - max(-e, 0)) for n, b, e in zip(x.shape, begins, ends))
        return x[crop]
