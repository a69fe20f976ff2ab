"""FakeQuantize-1 and FakeConvert-13.

FakeQuantize-1: clamp to [input_low, input_high], snap to `levels` steps, map onto [output_low, output_high].

Computed as OpenVINO's reference (`reference/fake_quantize.hpp`), in the input's
type, operation for operation:

    x <= min(in_low, in_high)  -> out_low
    x >  max(in_low, in_high)  -> out_high
    otherwise  nearbyint((x - in_low) / (in_high - in_low) * (levels - 1)) / (levels - 1)
               * (out_high - out_low) + out_low

nearbyint rounds half to even.  Integer inputs use C++ integer arithmetic
(truncating division).  f16 is computed in f32, as the CPU plugin does.  The
output has the shape of X: the four limits only have to broadcast against it.

FakeConvert-13 emulates a round trip through an fp8 type, as the CPU plugin computes it
(specs/errata/misc.md): y = x * scale - shift in f32, rounded to f16, then to the nearest
f8 value (ties to even, saturating at the largest finite value, inf included), then
(y + shift) * (1 / scale) in f32.  NaN follows OpenVINO's reference (f8e4m3: +-448 by the
sign bit; f8e5m2: NaN); the CPU plugin turns it into -max.
"""
from __future__ import annotations

import numpy as np

from .. import etypes
from ..errors import ShapeError, UnsupportedError
from ..etypes import from_dtype
from ..registry import Op, TensorType, register
from ..shapes import Shape, broadcast_shapes, dim_merge, dims_compatible, format_shape
from .arithmetic import PDPD_AXIS, broadcast_binary
from .common import convert_array
from ..etypes import round_to_bf16

_LIMITS = ("input_low", "input_high", "output_low", "output_high")


def check_limit_shapes(data: Shape, limits: list[Shape], mode: str, axis: int) -> None:
    """The limits must broadcast onto X (accumulated, as OpenVINO merges them one by one)."""
    merged = data
    for name, limit in zip(_LIMITS, limits):
        try:
            if mode in ("none", "explicit"):
                merged = None if merged is None or limit is None else \
                    _merge_equal(merged, limit)
            else:
                merged = broadcast_binary(merged, limit, mode, axis)
        except ShapeError:
            raise ShapeError(f"{name} {format_shape(limit)} does not broadcast onto X {format_shape(data)} "
                             f"(auto_broadcast={mode})") from None


def _merge_equal(a: tuple, b: tuple) -> tuple:
    if len(a) != len(b):
        raise ShapeError("ranks differ")
    return tuple(dim_merge(x, y) for x, y in zip(a, b))


def limit_at_every_element(limit: np.ndarray, shape: tuple[int, ...], name: str = "limit") -> np.ndarray:
    """The limit value OpenVINO's reference uses at each position of X (broadcastable to `shape`).

    Right-aligned; an axis of the limit advances only where its size equals X's.
    For NumPy-broadcastable limits that is plain broadcasting; for a limit larger
    than X (which OpenVINO accepts) the extra positions are never read.  A limit
    axis that is neither 1 nor X's size against an X axis other than 1 (pdpd
    layouts) makes OpenVINO's kernel read by its internal strides: refused.
    """
    if limit.size == 1:
        return limit.reshape(())
    index: np.ndarray | int = 0
    stride = 1
    for axis in range(1, len(shape) + 1):
        n = shape[-axis]
        m = limit.shape[-axis] if axis <= limit.ndim else 1
        if m == n:
            index = index + (np.arange(n) * stride).reshape((n,) + (1,) * (axis - 1))
            stride *= n
        elif m != 1 and n != 1:
            raise UnsupportedError(f"FakeQuantize {name} {format_shape(limit.shape)} does not line up with the "
                                   f"end of X {format_shape(shape)}; OpenVINO's kernel then reads it by internal "
                                   f"strides, which irrun does not reproduce")
    return limit.reshape(-1)[index]


def _trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C++ integer division (toward zero); x / 0 gives 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.floor_divide(a, b)
        q = q + ((q * b != a) & ((a < 0) != (b < 0)) & (b != 0)).astype(q.dtype)
    return np.where(b == 0, np.zeros((), q.dtype), q)


def fake_quantize(x, in_low, in_high, out_low, out_high, levels: int) -> np.ndarray:
    """The reference formula on arrays that broadcast against x; returns x's dtype."""
    if x.dtype.kind == "f":
        return float_fake_quantize(in_low, in_high, out_low, out_high, levels, x.dtype)(x)
    steps = _steps(levels, x.dtype)
    with np.errstate(all="ignore"):   # in_low == in_high divides by zero, as in C++
        # C++: the fraction is an integer division; nearbyint then promotes to double.
        wide = [a.astype(np.int64) for a in (x, in_low, in_high, out_low, out_high)]
        k = _trunc_div(wide[0] - wide[1], wide[2] - wide[1]) * float(steps)
        q = np.rint(k.astype(np.float64)) / float(steps) * (wide[4] - wide[3]) + wide[3]
        q = convert_array(q, from_dtype(x.dtype))
    return _outside_to_limits(x, q, in_low, in_high, out_low, out_high)


def _steps(levels: int, dtype: np.dtype) -> np.ndarray:
    # levels is a size_t in OpenVINO: levels 0 (what its reader takes a missing attribute as) makes
    # levels - 1 the largest 64-bit value, and the snapping vanishes (the map is linear).
    return np.asarray((levels - 1) % (1 << 64)).astype(dtype)


def _snapped(x, in_low, in_high, out_low, out_high, steps, out=None):
    """rint((x - in_low) / (in_high - in_low) * steps) / steps * (out_high - out_low) + out_low, the
    reference formula, in one buffer (`out`, which may be x; by default a new one of every operand's
    broadcast shape and promoted type)."""
    operands = (x, in_low, in_high, out_low, out_high, steps)
    if out is None:
        out = np.empty(np.broadcast_shapes(*(np.shape(a) for a in operands)), np.result_type(*operands))
    q = np.subtract(x, in_low, out=out)
    np.divide(q, in_high - in_low, out=q)
    np.multiply(q, steps, out=q)
    np.rint(q, out=q)
    np.divide(q, steps, out=q)
    np.multiply(q, out_high - out_low, out=q)
    return np.add(q, out_low, out=q)


def _outside_to_limits(x, q, in_low, in_high, out_low, out_high):
    q = np.where(x > np.maximum(in_low, in_high), out_high, q)
    return np.where(x <= np.minimum(in_low, in_high), out_low, q).astype(x.dtype)


def float_fake_quantize(in_low, in_high, out_low, out_high, levels: int, dtype: np.dtype):
    """`fake_quantize` of float data for these limits (made once where they are constants).

    Where the input limits are ordered (in_low < in_high everywhere), the formula on x clipped to
    [in_low, in_high]: it gives out_low at in_low and, where the formula's value at in_high,
    (out_high - out_low) + out_low, is out_high itself (out_low 0, say), out_high at in_high, the
    same values as replacing the data outside the range by np.where, whose mispredicted branches
    took 3.5 ns an element where the data's sign decides (ReLU outputs quantized from 0: 744 of
    1231 us over 64 x 56 x 56).  An end the formula does not land on bit for bit keeps np.where."""
    steps = _steps(levels, dtype)
    with np.errstate(all="ignore"):
        ordered = bool(np.all(in_low < in_high))
        exact_top = ordered and _same_bits(_snapped(in_high, in_low, in_high, out_low, out_high, steps), out_high)
        exact_bottom = ordered and _same_bits(_snapped(in_low, in_low, in_high, out_low, out_high, steps), out_low)

    def quantize(x):
        with np.errstate(all="ignore"):   # in_low == in_high divides by zero, as in C++
            if not ordered:
                q = _snapped(x, in_low, in_high, out_low, out_high, steps)
                return _outside_to_limits(x, q, in_low, in_high, out_low, out_high)
            # (in the clipped data's buffer: 288 -> 166 us over 64 x 56 x 56, against a new array a step)
            q = np.clip(x, in_low, in_high)
            _snapped(q, in_low, in_high, out_low, out_high, steps, out=q)
        if not exact_top:
            q = np.where(x > in_high, out_high, q)
        if not exact_bottom:
            q = np.where(x <= in_low, out_low, q)
        return q.astype(x.dtype, copy=False)
    return quantize


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether a and b, broadcast together, hold the same float values bit for bit (-0.0 is not 0.0)."""
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    bits = np.dtype(f"u{a.dtype.itemsize}")
    return a.dtype == b.dtype and np.array_equal(a.view(bits), b.view(bits))


@register("FakeQuantize", 1)
class FakeQuantize(Op):
    @property
    def mode(self) -> str:
        return self.attrs.auto_broadcast

    def infer(self, inputs):
        etype = etypes.dynamic
        for name, t in zip(("X",) + _LIMITS, inputs):
            if t.etype is etypes.dynamic:
                continue
            if t.etype.kind in ("bool", "string"):
                raise ShapeError(f"FakeQuantize takes numbers, {name} is {t.etype}")
            if etype is etypes.dynamic:
                etype = t.etype
        check_limit_shapes(inputs[0].shape, [t.shape for t in inputs[1:]], self.mode,
                           self.attrs.get(PDPD_AXIS, 0))
        return [TensorType(inputs[0].shape, inputs[0].etype if inputs[0].etype is not etypes.dynamic else etype,
                           notes={i: "as X" for i in range(len(inputs[0].shape or ()))})]

    def run(self, x, *limits):
        dtype = x.dtype
        compute = np.float32 if dtype == np.float16 else dtype
        aligned = [limit_at_every_element(np.asarray(lim).astype(compute), x.shape, name)
                   for lim, name in zip(limits, _LIMITS)]
        return fake_quantize(x.astype(compute), *aligned, self.attrs.levels).astype(dtype)

    def bind(self, step):
        """f32/f64 data of a static shape with constant limits (how POT and NNCF write activations'
        FakeQuantize): the limits aligned and the float kernel prepared once, not per call."""
        x, *limits = step.inputs
        if x.etype.name not in ("f32", "f64") or not x.is_static or any(t.value is None for t in limits) \
                or self.run_replaced():
            return None
        dtype = x.etype.carrier
        aligned = [limit_at_every_element(np.asarray(t.value).astype(dtype), tuple(x.shape), name)
                   for t, name in zip(limits, _LIMITS)]
        quantize = float_fake_quantize(*aligned, self.attrs.levels, dtype)
        return lambda data, *_: quantize(data)


# ---------------------------------------------------------------- FakeConvert

def _positive_grid(etype) -> np.ndarray:
    """The finite values >= 0 of an 8-bit float type, ascending; index = code (so parity = mantissa parity)."""
    values = etype.decode(np.arange(128, dtype=np.uint8).tobytes(), 128).astype(np.float64)
    return values[np.isfinite(values)]


def round_to_f8(x: np.ndarray, etype) -> np.ndarray:
    """x (f32) through f16, then to the nearest value of the f8 type (ties to the even code), saturating."""
    grid = _positive_grid(etype)
    with np.errstate(over="ignore"):
        magnitude = np.minimum(np.abs(x.astype(np.float16).astype(np.float64)), grid[-1])   # inf saturates too
    upper = np.clip(np.searchsorted(grid, magnitude), 1, grid.size - 1)
    low, high = grid[upper - 1], grid[upper]
    tie = magnitude - low == high - magnitude
    pick_high = (magnitude - low > high - magnitude) | (tie & (upper % 2 == 0))
    rounded = np.where(magnitude <= low, low, np.where(pick_high, high, low))
    out = np.copysign(rounded, x).astype(np.float32)
    nan = np.isnan(x)
    if etype.name == "f8e4m3":   # the reference clamps NaN to the largest value, keeping its sign
        return np.where(nan, np.copysign(np.float32(grid[-1]), x), out)
    return np.where(nan, x, out)


def _unidirectional(data: Shape, other: Shape, name: str) -> None:
    if data is None or other is None:
        return
    try:
        merged = broadcast_shapes(data, other)
    except ShapeError:
        merged = None
    if merged is None or len(merged) != len(data) or not all(dims_compatible(m, d) for m, d in zip(merged, data)):
        raise ShapeError(f"FakeConvert {name} {format_shape(other)} does not broadcast onto data {format_shape(data)}")


@register("FakeConvert", 13)
class FakeConvert(Op):
    """Round trip through f8e4m3 or f8e5m2: scale and shift in, round, shift and scale back."""

    def infer(self, inputs):
        data = inputs[0]
        for t in inputs:
            if t.etype is not etypes.dynamic and t.etype.name not in ("f32", "f16", "bf16"):
                raise ShapeError(f"FakeConvert takes f32, f16 or bf16, got {t.etype}")
        if len({t.etype for t in inputs if t.etype is not etypes.dynamic}) > 1:
            raise ShapeError("FakeConvert inputs must share one element type, got "
                             + ", ".join(str(t.etype) for t in inputs))
        if len(inputs) > 2 and inputs[1].shape is not None and inputs[2].shape is not None:
            scale, shift = inputs[1].shape, inputs[2].shape
            if len(scale) != len(shift) or not all(dims_compatible(a, b) for a, b in zip(scale, shift)):
                raise ShapeError(f"FakeConvert shift {format_shape(shift)} must have the shape of scale "
                                 f"{format_shape(scale)}")
        for name, t in zip(("scale", "shift"), inputs[1:]):
            _unidirectional(data.shape, t.shape, name)
        etype = next((t.etype for t in inputs if t.etype is not etypes.dynamic), etypes.dynamic)
        self.etype = etype   # bf16 travels as f32: run() needs the true type to round the result
        return [data.like(etype=etype)]

    def run(self, x, scale, shift=None):
        f32 = np.float32
        dst = etypes.BY_NAME[self.attrs.destination_type]
        with np.errstate(all="ignore"):
            s = scale.astype(f32)
            v = x.astype(f32) * s
            if shift is not None:
                v = v - shift.astype(f32)
            v = round_to_f8(v, dst)
            if shift is not None:
                v = v + shift.astype(f32)
            y = np.broadcast_to(v * (f32(1) / s), x.shape)
        if getattr(self, "etype", None) is etypes.BY_NAME["bf16"]:
            return round_to_bf16(y)
        return y.astype(x.dtype)
