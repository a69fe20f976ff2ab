"""Parameter, Constant, Result, Convert, ConvertLike, ConvertPromoteTypes and Identity: the ops every IR has."""
from __future__ import annotations

from .. import etypes
from ..errors import ShapeError

from ..errors import ModelError
from ..registry import Op, TensorType, register
from ..shapes import is_static
from .common import convert_array


@register("Parameter", 1)
class Parameter(Op):
    foldable = False

    def infer(self, inputs):
        return [TensorType(self.attrs.shape, self.attrs.element_type)]

    def run(self):
        raise ModelError("a Parameter is fed by the caller, not run")


@register("Constant", 1)
class Constant(Op):
    def infer(self, inputs):
        shape, etype = self.attrs.shape, self.attrs.element_type
        if not is_static(shape):
            raise ModelError(f"Const shape must be static, got {self.layer.data.get('shape')}", code="E-CONST-SHAPE")
        weights = self.context.weights
        if weights is None:  # reported once for the model (E-BIN-MISSING); the shape is still known
            return [TensorType(shape, etype)]
        self.packed = weights.packed_rows(self.attrs.offset, self.attrs.size, etype, shape)
        if self.packed is not None:     # (read by the plan, by rows: irrun/blockwise_folding.py)
            return [TensorType(shape, etype)]
        try:   # `read` checks the range and size first (once: Consts are a third of a big model)
            value = weights.read(self.attrs.offset, self.attrs.size, etype, shape)
        except ModelError as exc:
            if exc.code not in ("E-BIN-RANGE", "E-BIN-SIZE"):
                raise
            raise ModelError(f"Const data: {exc.message}", code=exc.code) from None
        return [TensorType(shape, etype, value=value)]

    packed = None

    def run(self):
        return self.context.weights.read(self.attrs.offset, self.attrs.size, self.attrs.element_type,
                                         self.attrs.shape)


@register("Result", 1)
class Result(Op):
    foldable = False

    def infer(self, inputs):
        return [inputs[0].like()]

    def run(self, x):
        return x


@register("Convert", 1)
class Convert(Op):
    def infer(self, inputs):
        return [inputs[0].like(etype=self.attrs.destination_type)]

    def quick_shapes(self, args):
        return (args[0].shape,), ()

    def bind(self, step):
        """Integer and boolean data: `convert_array`'s cast (a wrap to a narrower integer, a float,
        nonzero as true), without its checks for float data (a decoding step's masks and positions,
        every call: 4.4 -> 1 us)."""
        source, carrier = step.inputs[0].etype.carrier, self.attrs.destination_type.carrier
        if self.run_replaced() or source is None or carrier is None or source.kind not in "iub":
            return None
        if source == carrier:
            return lambda x: x
        return lambda x: x.astype(carrier) if x.dtype == source else convert_array(x, self.attrs.destination_type)

    def run(self, x):
        return convert_array(x, self.attrs.destination_type)


@register("ConvertLike", 1)
class ConvertLike(Op):
    """Convert to the element type of a second input, whose values are never read."""

    def infer(self, inputs):
        data, like = inputs
        self.destination = like.etype
        return [data.like(etype=like.etype)]

    def run(self, x, like):
        return convert_array(x, self.destination)


# ---------------------------------------------------------------- ConvertPromoteTypes

_PROMOTABLE = {"dynamic", "boolean", "f16", "f32", "f64", "i4", "i8", "i16", "i32", "i64", "u1", "u4", "u8", "u16",
               "u32", "u64", "f8e4m3", "f8e5m2", "bf16"}
_SIGNED_BY_BITS = {4: "i4", 8: "i8", 16: "i16", 32: "i32", 64: "i64"}


def _signed(etype) -> bool:
    return etype.kind in ("int", "float")


def promoted_type(a: TensorType, b: TensorType, promote_unsafe: bool, pytorch_scalar_promotion: bool,
                  u64_target) -> "etypes.ElementType":
    """The common element type, by OpenVINO's rules (src/core/src/op/convert_promote_types.cpp)."""
    x, y = a.etype, b.etype
    for t in (x, y):
        if t.name not in _PROMOTABLE:
            raise ShapeError(f"ConvertPromoteTypes does not take {t}")
    if etypes.dynamic in (x, y):
        return etypes.dynamic
    if x is y:
        return x
    if x is etypes.boolean or y is etypes.boolean:
        return y if x is etypes.boolean else x
    if x.is_float != y.is_float:
        real, integer = (x, y) if x.is_float else (y, x)
        if not promote_unsafe and real.bits < 2 * integer.bits:
            raise ShapeError(f"{integer} cannot be safely promoted to {real} (set promote_unsafe)")
        return real
    scalar_x, scalar_y = a.shape == (), b.shape == ()
    if pytorch_scalar_promotion and scalar_x != scalar_y:
        target, scalar = (y, x) if scalar_x else (x, y)
        safe = (_signed(target) == _signed(scalar) and target.bits >= scalar.bits) or \
            (_signed(target) and not _signed(scalar) and 2 * target.bits >= scalar.bits)
        if not promote_unsafe and not safe:
            raise ShapeError(f"scalar {scalar} cannot be safely promoted to {target} (set promote_unsafe)")
        return target
    if _signed(x) != _signed(y):
        unsigned, signed = (y, x) if _signed(x) else (x, y)
        if unsigned.bits <= 32 and (promote_unsafe or 2 * unsigned.bits <= signed.bits):
            return etypes.BY_NAME[_SIGNED_BY_BITS[max(2 * unsigned.bits, signed.bits)]]
        if not promote_unsafe:
            raise ShapeError(f"{unsigned} and {signed} have no safe common signed type (set promote_unsafe)")
        return u64_target
    if x.bits != y.bits:
        return x if x.bits > y.bits else y
    if promote_unsafe and {x.name, y.name} == {"f8e4m3", "f8e5m2"}:
        return etypes.f16
    if promote_unsafe and {x.name, y.name} == {"f16", "bf16"}:
        return etypes.f32
    raise ShapeError(f"ConvertPromoteTypes has no rule for {x} and {y} with these attributes")


@register("ConvertPromoteTypes", 14)
class ConvertPromoteTypes(Op):
    """Both inputs converted to their common element type (two outputs)."""

    def infer(self, inputs):
        a = self.attrs
        self.destination = promoted_type(inputs[0], inputs[1], a.promote_unsafe, a.pytorch_scalar_promotion,
                                         a.u64_integer_promotion_target)
        return [t.like(etype=self.destination) for t in inputs]

    def run(self, x, y):
        return convert_array(x, self.destination), convert_array(y, self.destination)


# ---------------------------------------------------------------- Identity

@register("Identity", 16)
class Identity(Op):
    """A copy of its input."""

    def infer(self, inputs):
        return [inputs[0].like()]

    def run(self, x):
        return x.copy()
