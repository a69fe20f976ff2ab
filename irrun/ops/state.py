"""ReadValue-3/6 and Assign-3/6: variables that keep their value from one `Model.infer` call to the next.

As in OpenVINO's InferRequest: a ReadValue gives the variable's value as the
previous call left it; before any Assign wrote it (or after
`Model.reset_state`) it gives its initializing input, or zeros of the
variable's shape when it has none.  Every ReadValue of a call sees the value
from before the call: Assigns write into `context.assigned`, which the model
commits when the call succeeds (`Model.infer`).
"""
from __future__ import annotations

import numpy as np

from .. import etypes
from ..errors import ModelError, ShapeError
from ..registry import Op, TensorType, register
from ..shapes import dims_compatible, format_shape
from ..subgraph import fits, zeros_of


def _compatible(a: TensorType, b: TensorType) -> bool:
    """Whether two partial types may describe the same tensor."""
    if etypes.dynamic not in (a.etype, b.etype) and a.etype is not b.etype:
        return False
    if a.shape is None or b.shape is None:
        return True
    return len(a.shape) == len(b.shape) and all(dims_compatible(x, y) for x, y in zip(a.shape, b.shape))


@register("ReadValue", 3, 6)
class ReadValue(Op):
    foldable = False     # its value changes from call to call

    #: the variable's type: from variable_type/variable_shape (v6), else from the initializing input
    variable: TensorType | None = None

    @property
    def variable_id(self) -> str:
        return self.attrs.variable_id

    def declared(self) -> TensorType | None:
        """ReadValue-6's variable_type and variable_shape; None when both are left dynamic."""
        if self.version < 6:
            return None
        shape, etype = self.attrs.variable_shape, self.attrs.variable_type
        return None if shape is None and etype is etypes.dynamic else TensorType(shape, etype)

    def on_bind(self):
        self.context.variables.setdefault(self.variable_id, self)
        self.variable = self.declared()

    def infer(self, inputs):
        declared = self.declared()
        if inputs and declared is not None and not _compatible(declared, inputs[0]):
            raise ShapeError(f'variable "{self.variable_id}" is declared {declared}, which does not hold the '
                             f"initializing value's {inputs[0]}")
        if declared is None and not inputs:
            raise ShapeError(f'variable "{self.variable_id}" has neither a declared type nor an initializing input')
        out = declared if declared is not None else inputs[0]
        if self.variable is None:   # the first (load-time) inference decides it
            self.variable = TensorType(out.shape, out.etype)
        return [TensorType(out.shape, out.etype)]

    def reset_value(self) -> np.ndarray:
        """What OpenVINO's query_state shows before anything was assigned: zeros, dynamic dims 0."""
        return zeros_of(self.variable)

    def run(self, *init):
        return self._reader()(*init)

    def bind(self, step):
        """`run` with the state's dict and the variable's id looked up once (its property and the
        attributes' lookup took half of a decoding step's 0.4 us a ReadValue)."""
        return None if self.run_replaced() else self._reader()

    def _reader(self):
        """read(*init): the variable's value, else the initializing input, else zeros."""
        state, key, reset = self.context.state, self.variable_id, self.reset_value

        def read(*init):
            value = state.get(key)
            if value is not None:
                return value
            return init[0] if init else reset()
        return read


@register("Assign", 3, 6)
class Assign(Op):
    foldable = False     # a sink: it must run on every call
    checks_itself = True  # (`run` holds the value to the variable's shape: 11 us a check in a decoding step)

    def reader(self) -> ReadValue:
        reader = self.context.variables.get(self.attrs.variable_id)
        if reader is None:
            raise ModelError(f'no ReadValue reads variable "{self.attrs.variable_id}"', code="E-VARIABLE")
        return reader

    def infer(self, inputs):
        variable = self.reader().variable
        if variable is not None and not _compatible(variable, inputs[0]):
            raise ShapeError(f'assigns {inputs[0]} to variable "{self.attrs.variable_id}", which is {variable}')
        return [inputs[0].like()]

    def run(self, value):
        variable = self.reader().variable
        if variable is not None and not fits(variable.shape, value.shape):
            raise ModelError(f'assigns shape {list(value.shape)} to variable "{self.attrs.variable_id}" of shape '
                             f"{format_shape(variable.shape)}")
        kept = np.array(value, copy=True)
        kept.flags.writeable = False     # handed out by ReadValue on later calls: nobody may change it
        self.context.assigned[self.attrs.variable_id] = kept
        return value
