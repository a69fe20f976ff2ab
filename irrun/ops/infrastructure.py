"""Parameter, Constant, Result, Convert and ConvertLike: the ops every IR has."""
from __future__ import annotations


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
        problem = weights.check(self.attrs.offset, self.attrs.size, etype, shape)
        if problem:
            raise ModelError(f"Const data: {problem[1]}", code=problem[0])
        return [TensorType(shape, etype, value=weights.read(self.attrs.offset, self.attrs.size, etype, shape))]

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
