"""Range-1 and Range-4.

The length is OpenVINO's shape rule, computed in double precision:
max(ceil((stop - start) / step), 0), where an integer output first truncates
start, stop and step toward zero (Range-4 with an integer output_type;
Range-1 works in its input type).  A step that truncates to 0 gives no
elements.  The values (specs/errata/detection.md):

* a zero step is an error when known at load (as in OpenVINO) and gives no
  elements at run time (as on the CPU plugin);
* floats: start + i * step in the output type (f16 and bf16 computed in f32);
* integers: start, start + step, ... with the type's wrap-around, where
  Range-4 converts start and step to the output type as a C++ cast does
  (toward zero).  The CPU plugin saturates or rounds instead; irrun follows
  OpenVINO's reference, which agrees with its own shape inference.
"""
from __future__ import annotations

import math

import numpy as np

from .. import etypes
from ..errors import ShapeError
from ..registry import Op, TensorType, register
from ..shapes import ANY, format_shape
from .common import convert_array

_NAMES = ("start", "stop", "step")


def range_length(start: float, stop: float, step: float, integral: bool) -> int:
    """Number of elements, as OpenVINO's shape inference counts them."""
    if not (math.isfinite(start) and math.isfinite(stop)):
        raise ShapeError(f"start and stop must be finite, got start={start} stop={stop}")
    if not math.isfinite(step) or step == 0:
        raise ShapeError(f"step must be finite and non-zero, got {step}")
    if integral:
        start, stop, step = math.trunc(start), math.trunc(stop), math.trunc(step)
    if step == 0:
        return 0
    if (step > 0 and start >= stop) or (step < 0 and start <= stop):
        return 0
    return math.ceil(abs(stop - start) / abs(step))


def _compute_dtype(etype) -> np.dtype:
    """f16 and bf16 ranges are computed in f32, as OpenVINO's evaluator and the CPU plugin do."""
    return np.dtype(np.float32) if etype.is_float and etype.carrier.itemsize < 4 else etype.carrier


def range_values(start: float, step: float, count: int, etype) -> np.ndarray:
    """`count` elements of type `etype` from `start` by `step` (both cast to the type first)."""
    if etype.is_float:
        dtype = _compute_dtype(etype)
        out = dtype.type(start) + np.arange(count, dtype=dtype) * dtype.type(step)
        return out.astype(etype.carrier)
    first, stride = (convert_array(np.array([v], np.float64), etype)[0] for v in (start, step))
    # Modular arithmetic in a 64-bit type, then the low bits: the same wrap-around as
    # adding step `count` times in the narrow type.
    wide = np.uint64 if etype.kind == "uint" else np.int64
    with np.errstate(over="ignore"):
        out = wide(first) + np.arange(count, dtype=wide) * wide(stride)
    return out.astype(etype.carrier)


@register("Range", 1, 4)
class Range(Op):
    def output_type(self, inputs):
        if self.version == 4:
            etype = self.attrs.output_type
            if not (etype.is_float or etype.is_integral):
                raise ShapeError(f"output_type must be a numeric type, got {etype}")
            return etype
        kinds = {t.etype for t in inputs if t.etype is not etypes.dynamic}
        if len(kinds) > 1:
            raise ShapeError("start, stop and step must have the same element type, got "
                             + ", ".join(f"{n}={t.etype}" for n, t in zip(_NAMES, inputs)))
        etype = kinds.pop() if kinds else etypes.dynamic
        if etype is not etypes.dynamic and not (etype.is_float or etype.is_integral):
            raise ShapeError(f"start, stop and step must be numbers, got {etype}")
        return etype

    def infer(self, inputs):
        for name, t in zip(_NAMES, inputs):
            if t.rank not in (None, 0):
                raise ShapeError(f"{name} must be a scalar, got {format_shape(t.shape)}")
            if self.version == 4 and not (t.etype.is_float or t.etype.is_integral or t.etype is etypes.dynamic):
                raise ShapeError(f"{name} must be a number, got {t.etype}")
        etype = self.output_type(inputs)
        if any(t.value is None for t in inputs) or etype is etypes.dynamic:
            return [TensorType((ANY,), etype)]
        start, stop, step = (float(np.asarray(t.value).reshape(-1)[0]) for t in inputs)
        count = range_length(start, stop, step, etype.is_integral)
        note = f"ceil(({stop:g} - {start:g}) / {step:g})"
        return [TensorType((count,), etype, notes={0: note})]

    def run(self, start, stop, step):
        etype = self.attrs.output_type if self.version == 4 else etypes.from_dtype(start.dtype)
        start, stop, step = (float(np.asarray(v).reshape(-1)[0]) for v in (start, stop, step))
        # A zero step known only at run time gives no elements, as on the CPU plugin.
        count = 0 if step == 0 else range_length(start, stop, step, etype.is_integral)
        return range_values(start, step, count, etype)
