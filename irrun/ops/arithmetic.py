"""Elementwise binary arithmetic: Add, Subtract, Multiply, Divide, Maximum, Minimum,
Power, SquaredDifference, FloorMod, Mod.

`BinaryElementwise` is what every two-input elementwise op shares: the three
`auto_broadcast` modes (shape function and kernel alignment) and the rule that
both inputs have one element type.  A new op only names its element rule:

    @register("Add", 1)
    class Add(BinaryArithmetic):
        compute = staticmethod(np.add)

Comparison and logical ops subclass `BinaryElementwise` and override
`check_etype` / `output_etype`; Select uses the same broadcasting pieces
(`broadcast_binary`, `pdpd_align`, `check_equal_shapes`).  Integers wrap on
overflow, as in C++.
"""
from __future__ import annotations

from math import prod

import numpy as np

from .. import etypes, threads
from ..errors import ShapeError
from ..etypes import ElementType
from ..registry import Op, TensorType, register
from ..shapes import Shape, broadcast_shapes, dims_compatible, dim_merge, format_shape, numpy_broadcast
from .common import convert_array

PDPD_AXIS = "auto_broadcast.auto_broadcast_axis"


def merge_etypes(a: ElementType, b: ElementType) -> ElementType:
    """The one element type two inputs share (`dynamic` takes the other's)."""
    if a is etypes.dynamic:
        return b
    if b is etypes.dynamic or a is b:
        return a
    raise ShapeError(f"Arguments do not have the same element type (input 0: {a}, input 1: {b})")


def pdpd_start(rank_a: int, rank_b: int, axis: int) -> int:
    """First axis of input 0 that input 1 lines up with (pdpd broadcast)."""
    start = rank_a - rank_b if axis == -1 else axis
    if axis < -1 or start < 0 or start + rank_b > rank_a:
        raise ShapeError(f"auto_broadcast=pdpd: input 1 of rank {rank_b} does not fit into input 0 of rank "
                         f"{rank_a} from axis {axis}")
    return start


def _numpy_shape(a: Shape, b: Shape) -> Shape:
    try:
        return broadcast_shapes(a, b)
    except ShapeError as exc:
        raise ShapeError(f"auto_broadcast=numpy: {exc.message}") from None


def _none_shape(a: Shape, b: Shape) -> Shape:
    if a is None or b is None:
        return b if a is None else a
    if len(a) != len(b) or not all(dims_compatible(x, y) for x, y in zip(a, b)):
        raise ShapeError(f"auto_broadcast=none needs equal shapes, got {format_shape(a)} and {format_shape(b)}")
    return tuple(dim_merge(x, y) for x, y in zip(a, b))


def _pdpd_shape(a: Shape, b: Shape, axis: int) -> Shape:
    if a is None or b is None:
        return None
    start = pdpd_start(len(a), len(b), axis)
    out = list(a)
    for i, d in enumerate(b):
        target = a[start + i]
        # Input 1 only ever stretches to input 0: a 1 in input 0 cannot grow.
        bad = isinstance(target, int) and isinstance(d, int) and d > target
        try:
            out[start + i] = broadcast_shapes((target,), (d,))[0]
        except ShapeError:
            bad = True
        if bad:
            raise ShapeError(f"auto_broadcast=pdpd (axis {axis}): input 1 {format_shape(b)} does not broadcast "
                             f"onto input 0 {format_shape(a)} (dim {start + i}: {target} vs {d})")
    return tuple(out)


def broadcast_binary(a: Shape, b: Shape, mode: str, axis: int = -1) -> Shape:
    """Output shape of a binary elementwise op under `auto_broadcast` = mode."""
    if mode == "numpy":
        return _numpy_shape(a, b)
    if mode == "pdpd":
        return _pdpd_shape(a, b, axis)
    return _none_shape(a, b)   # "none" and its alias "explicit"


def pdpd_align(x: np.ndarray, target_ndim: int, axis: int) -> np.ndarray:
    """x reshaped so NumPy broadcasting lines it up with a rank-`target_ndim` array from `axis` (pdpd)."""
    start = pdpd_start(target_ndim, x.ndim, axis)
    return x.reshape((1,) * start + x.shape + (1,) * (target_ndim - start - x.ndim))


def check_equal_shapes(*arrays: np.ndarray) -> None:
    """auto_broadcast=none at run time (dynamic shapes can disagree only now)."""
    if any(a.shape != arrays[0].shape for a in arrays[1:]):
        raise ShapeError("auto_broadcast=none needs equal shapes, got "
                         + " and ".join(format_shape(a.shape) for a in arrays))


def broadcast_notes(out: Shape, inputs: dict[str, Shape]) -> dict[int, str] | None:
    """Per output dim, the input dims it came from (right-aligned), for diagnostics.

    `inputs` maps a name ("input 0", "cond" ...) to that input's shape.
    """
    if out is None or any(shape is None for shape in inputs.values()):
        return None

    def dim_from(shape, i):   # i counts from the end
        return str(shape[i]) if -i <= len(shape) else "none"

    def note(i):
        parts = [f"{name}'s {dim_from(shape, i)}" for name, shape in inputs.items()]
        return "broadcast of " + ", ".join(parts[:-1]) + " and " + parts[-1]

    return {len(out) + i: note(i) for i in range(-len(out), 0)}


def equal_or_numpy_broadcast(args: tuple, mode: str) -> tuple | None:
    """`Op.quick_shapes` of an elementwise op: equal shapes, or their NumPy broadcast under
    auto_broadcast=numpy (None where they do not broadcast, or for pdpd: inference says)."""
    out = args[0].shape
    if all(a.shape == out for a in args):
        return (out,), ()
    if mode != "numpy":
        return None
    for a in args[1:]:
        out = numpy_broadcast(out, a.shape)
        if out is None:
            return None
    return (out,), ()


class Broadcasting(Op):
    """An op with an `auto_broadcast` attribute (and, for pdpd, its axis)."""

    @property
    def mode(self) -> str:
        return self.attrs.get("auto_broadcast", "numpy")

    @property
    def pdpd_axis(self) -> int:
        return self.attrs.get(PDPD_AXIS, 0)   # 0 when absent, as OpenVINO's IR reader assumes


class BinaryElementwise(Broadcasting):
    """Two inputs of one element type, broadcast by `auto_broadcast`."""

    def compute(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def check_etype(self, etype: ElementType) -> None:
        """Raise ShapeError if the op does not take this element type."""

    def output_etype(self, etype: ElementType) -> ElementType:
        return etype

    def infer(self, inputs):
        a, b = inputs
        etype = merge_etypes(a.etype, b.etype)
        self.check_etype(etype)
        shape = broadcast_binary(a.shape, b.shape, self.mode, self.pdpd_axis)
        notes = broadcast_notes(shape, {"input 0": a.shape, "input 1": b.shape}) if self.mode == "numpy" else None
        return [TensorType(shape, self.output_etype(etype), notes=notes)]

    def quick_shapes(self, args):
        return equal_or_numpy_broadcast(args, self.mode)

    def run(self, a, b):
        if self.mode == "pdpd":
            b = pdpd_align(b, a.ndim, self.pdpd_axis)
        elif self.mode != "numpy":
            check_equal_shapes(a, b)
        with np.errstate(all="ignore"):   # overflow wraps, x/0 is inf or nan, as in C++
            return np.asarray(self.compute(a, b))

    def bind(self, step):
        """numpy broadcasting: `compute` itself (the executor supplies the errstate), writing into an
        input that dies here when `compute` is a ufunc and that input has the output's shape and type."""
        if self.mode != "numpy" or type(self).run is not BinaryElementwise.run:
            return None
        compute = self.compute
        if isinstance(compute, np.ufunc):
            into = next((i for i in sorted(step.consumable) if step.same_layout(i)), None)
            out = step.outputs[0]
            if out.is_static and out.etype.carrier is not None and threads.worth_parts(prod(out.shape)):
                return _ufunc_in_parts(compute, into, out.shape, out.etype.carrier)
            if into is not None:
                return _ufunc_into(compute, into)
        if step.outputs[0].rank:   # rank >= 1: the result is an array, not a NumPy scalar
            return compute
        return None


def _ufunc_into(ufunc: np.ufunc, i: int):
    """ufunc(a, b) written over input i."""
    if i == 0:
        return lambda a, b: ufunc(a, b, out=a)
    return lambda a, b: ufunc(a, b, out=b)


def _ufunc_in_parts(ufunc: np.ufunc, into: int | None, shape: tuple, dtype: np.dtype):
    """ufunc(a, b) of a large output on every core, over input `into` when given (and nothing else
    shares its memory: the parts would read what another part has already written)."""
    def apply(a, b):
        if into is None:
            out = np.empty(shape, dtype)
        else:
            out, other = (a, b) if into == 0 else (b, a)
            if np.may_share_memory(out, other):
                return ufunc(a, b, out=out)
        return threads.in_parts(ufunc, out, a, b)
    return apply


class BinaryArithmetic(BinaryElementwise):
    """Numeric inputs (no boolean or string), output of the input type; always a new array
    (the executor may hand it to a later op to overwrite)."""

    outputs_are_new = True

    def check_etype(self, etype):
        if etype.kind in ("bool", "string"):
            raise ShapeError(f"This operation does not support inputs with element type: {etype}")


@register("Add", 1)
class Add(BinaryArithmetic):
    compute = staticmethod(np.add)


@register("Subtract", 1)
class Subtract(BinaryArithmetic):
    compute = staticmethod(np.subtract)


@register("Multiply", 1)
class Multiply(BinaryArithmetic):
    compute = staticmethod(np.multiply)


@register("Divide", 1)
class Divide(BinaryArithmetic):
    """Integers: floor division (m_pythondiv, the default) or truncation toward zero.

    Integer x / 0 gives 0: OpenVINO's reference raises and its CPU plugin returns
    whatever its float conversion yields (see specs/errata/arithmetic.md).
    """

    def compute(self, a, b):
        if a.dtype.kind not in "iu":
            return np.divide(a, b)
        quotient = np.floor_divide(a, b)   # 0 where b == 0; INT_MIN / -1 wraps to INT_MIN
        if not self.attrs.m_pythondiv and a.dtype.kind == "i":
            # Truncation is one above the floor wherever the division is inexact and the signs differ.
            inexact = (quotient * b != a) & ((a < 0) != (b < 0)) & (b != 0)
            quotient = quotient + inexact.astype(quotient.dtype)
        return quotient


# ---------------------------------------------------------------- Maximum, Minimum, Power, SquaredDifference, FloorMod, Mod

def _f16_in_f32(fn, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """fn with f16 operands widened to f32 and the result rounded back: an f16 layer as declared (with the
    default precision f16 layers get f32 operands instead: irrun/precision.py)."""
    if a.dtype == np.float16:
        return np.asarray(fn(a.astype(np.float32), b.astype(np.float32))).astype(np.float16)
    return fn(a, b)


def _from_double(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A double result cast to the op's type as C++'s static_cast does on x86 (inf/NaN -> INT_MIN pattern)."""
    if dtype.kind == "f":
        return x.astype(dtype)
    if dtype == np.uint32:
        # x86-64 converts double to uint32 through a 64-bit integer: exact below 2**32, then its low bits.
        return convert_array(x, etypes.i64).astype(np.uint32)
    return convert_array(x, etypes.from_dtype(dtype))


def _truncated_remainder(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C++ `a % b` for integers; x % 0 (a trap in C++) gives what the double path of FloorMod gives: NaN cast."""
    remainder = np.fmod(a, b)   # INT_MIN % -1 is 0, where x86 traps
    return np.where(b == 0, _from_double(np.array(np.nan), a.dtype), remainder)


@register("Maximum", 1)
class Maximum(BinaryArithmetic):
    """std::max(a, b) = `a < b ? b : a`, as OpenVINO's reference: a NaN in a is kept, one in b is not,
    and max(0.0, -0.0) is 0.0 (the CPU plugin's `a > b ? a : b` does the reverse; specs/errata/elementwise.md)."""

    def compute(self, a, b):
        return np.where(a < b, b, a)


@register("Minimum", 1)
class Minimum(BinaryArithmetic):
    """std::min(a, b) = `b < a ? b : a`, NaN and signed zeros as in Maximum."""

    def compute(self, a, b):
        return np.where(b < a, b, a)


def _square_of_difference(a, b):
    difference = a - b   # integers wrap first, so the result is (a - b)**2 modulo 2**bits as in C++
    return difference * difference


@register("SquaredDifference", 1)
class SquaredDifference(BinaryArithmetic):
    def compute(self, a, b):
        return _f16_in_f32(_square_of_difference, a, b)


@register("Power", 1)
class Power(BinaryArithmetic):
    """Integers: std::pow in double, then cast, as OpenVINO's reference.

    So 2 ** -1 = 0, (-1) ** -3 = -1, and 0 ** -1 or an overflowing power is
    whatever x86 makes of the cast (INT_MIN for i32 and i64).
    """

    def compute(self, a, b):
        if a.dtype.kind in "iu":
            return _from_double(np.power(a.astype(np.float64), b.astype(np.float64)), a.dtype)
        return _f16_in_f32(np.power, a, b)

    def bind(self, step):
        """x ** 2 and x ** 0.5 of f32/f64 data by a constant scalar exponent (an RMSNorm's square, a
        decomposed norm's root): `power_ufunc`'s ufunc, written over x where x dies here."""
        x, exponent = step.inputs
        ufunc = power_ufunc(exponent.value) if x.etype.name in ("f32", "f64") and self.mode == "numpy" else None
        if ufunc is None or not step.same_layout(0) or self.run_replaced():
            return super().bind(step)
        if 0 in step.consumable:
            return lambda a, b: ufunc(a, out=a)
        return lambda a, b: ufunc(a)


def power_ufunc(exponent) -> np.ufunc | None:
    """np.square for an exponent of 2, np.sqrt for 0.5 (None for any other, or none known): the
    values np.power gives (every one of 2^20 float32 values across the range, zeros, infinities and
    NaN; numpy's power takes 3.5-4x their time: 200 Ki elements 74 against 21 us, 160 against 42),
    and the CPU plugin's."""
    if exponent is None or np.size(exponent) != 1:
        return None
    value = float(np.asarray(exponent).reshape(()))
    return np.square if value == 2 else np.sqrt if value == 0.5 else None


@register("FloorMod", 1)
class FloorMod(BinaryArithmetic):
    """Remainder with the sign of the divisor: a - b * floor(a / b).

    Floats and signed integers are computed in double as OpenVINO's reference
    does (int64 beyond 2**53 rounds there too, and x mod 0 is the cast of NaN);
    unsigned integers are exact, `a % b`.
    """

    def compute(self, a, b):
        if a.dtype.kind == "u":
            return _truncated_remainder(a, b)
        wide_a, wide_b = a.astype(np.float64), b.astype(np.float64)
        return _from_double(wide_a - wide_b * np.floor(wide_a / wide_b), a.dtype)


def _float_mod(a, b):
    return a - np.trunc(a / b) * b


@register("Mod", 1)
class Mod(BinaryArithmetic):
    """Remainder with the sign of the dividend (truncated division).

    Integers: C++ `a % b`, exact.  Floats: a - trunc(a / b) * b in f32, as the
    CPU plugin computes it (the reference has no float kernel); unlike fmod,
    mod(1, inf) is NaN.
    """

    def compute(self, a, b):
        if a.dtype.kind in "iu":
            return _truncated_remainder(a, b)
        return _f16_in_f32(_float_mod, a, b)
