"""Values known in part: the elements of small integer tensors computed from dynamic dims.

OpenVINO infers `Reshape(x, Concat(Gather(ShapeOf(x), [0]), [12]))` on an `x` of [?,3,4] as
[?,12]: a shape input need not be constant for its consumer to read it, as long as each element
has known bounds.  OpenVINO evaluates a lower and an upper bound tensor for such values
(src/core/src/bound_evaluate.cpp): ShapeOf gives each dim's interval (an unbounded dim's upper
bound is the largest value of the output type), most shape-arithmetic ops evaluate themselves on
the lower and on the upper bound, the binary arithmetic ops on the four combinations of their
inputs' bounds, and consumers (Reshape, Broadcast, Tile, Pad, Interpolate, ...) read the result
element by element.  A value that comes from anything but ShapeOf and constants has no bounds.

irrun does the same.  `TensorType.partial` holds, for a tensor whose `value` is unknown, one
entry per element (row-major): an int where the element is known, a `Dim(lo, hi)` where it lies
in [lo, hi] (hi None: no upper bound; lo may be negative).  When every element becomes known the
result is an ordinary `value`, so the usual folding takes over.
"""
from __future__ import annotations

import numpy as np

from . import etypes
from .errors import ShapeError
from .registry import Op, TensorType
from .shapes import ANY, Dim, DimLike, is_static, make_dim

# Tensors with more elements carry no partial value (shape vectors have a handful).
MAX_ELEMENTS = 64


# ---------------------------------------------------------------- reading

def elements(t: TensorType) -> tuple | None:
    """The elements of a small integer tensor, known or in part; None when nothing is known."""
    if t.partial is not None:
        return t.partial
    v = t.value
    if v is None or not (t.etype.is_integral or t.etype.is_float) or v.size > MAX_ELEMENTS:
        return None
    return tuple(int(x) for x in np.asarray(v).reshape(-1))


def bounds(t: TensorType) -> list[tuple[int, int | None]] | None:
    """(lower, upper) per element (upper None: unbounded), or None."""
    found = elements(t)
    if found is None:
        return None
    return [(e, e) if isinstance(e, int) else (e.lo, e.hi) for e in found]


def as_dims(t: TensorType, what: str) -> tuple[DimLike, ...] | None:
    """A shape-like input (a Broadcast target, Interpolate sizes) read as dims, as OpenVINO's
    `evaluate_as_partial_shape` does; None when its elements are not known even in part.  A known
    negative element is a dynamic dim; an interval that reaches below 0 is an error."""
    found = elements(t)
    if found is None:
        return None
    dims = []
    for e in found:
        if isinstance(e, int):
            dims.append(ANY if e < 0 else e)
        elif e.lo < 0 or (e.hi is not None and e.hi < 0):
            raise ShapeError(f"{what} has an element in [{e.lo}, {'inf' if e.hi is None else e.hi}], "
                             f"which may be negative")
        else:
            dims.append(make_dim(e.lo, e.hi))
    return tuple(dims)


def has_partial(inputs: list[TensorType]) -> bool:
    return any(t.partial is not None for t in inputs)


# ---------------------------------------------------------------- bound tensors

def _top(etype) -> int:
    """The value OpenVINO's bound tensors use for "no upper bound": the type's largest value."""
    return int(np.iinfo(etype.carrier).max)


def _bound_arrays(t: TensorType) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper bound tensors of an input (equal for a known value)."""
    if t.partial is None:
        return t.value, t.value
    dtype, top = t.etype.carrier, _top(t.etype)
    lo = np.array([e if isinstance(e, int) else e.lo for e in t.partial], dtype=dtype).reshape(t.shape)
    hi = np.array([e if isinstance(e, int) else (top if e.hi is None else e.hi) for e in t.partial],
                  dtype=dtype).reshape(t.shape)
    return lo, hi


def _set_bounds(out: TensorType, lo: np.ndarray, hi: np.ndarray, unbounded: np.ndarray | None = None) -> None:
    """Store bound tensors on an output: as its value when they agree, else element by element."""
    lo, hi = np.asarray(lo), np.asarray(hi)
    if lo.shape != hi.shape or lo.size > MAX_ELEMENTS or not is_static(out.shape) or lo.shape != tuple(out.shape):
        return
    top = _top(out.etype)
    free = (hi == top) if unbounded is None else unbounded | (hi == top)
    if not free.any() and np.array_equal(lo, hi):
        out.value = lo.astype(out.etype.carrier, copy=False)
        return
    entries = []
    for a, b, f in zip(lo.reshape(-1).tolist(), hi.reshape(-1).tolist(), free.reshape(-1).tolist()):
        entries.append(Dim(a, None) if f else a if a == b else Dim(min(a, b), max(a, b)))
    out.partial = tuple(entries)


def _integral(t: TensorType) -> bool:
    return t.etype.is_integral and t.etype.carrier is not None


# ---------------------------------------------------------------- rules, by op type

def _shape_of(op: Op, inputs: list[TensorType], out: list[TensorType]) -> None:
    shape = inputs[0].shape
    t = out[0]
    if shape is None or is_static(shape) or len(shape) > MAX_ELEMENTS or not _integral(t):
        return
    top = _top(t.etype)
    t.partial = tuple(d if isinstance(d, int) else Dim(min(d.lo, top), None if d.hi is None or d.hi >= top else d.hi)
                      for d in shape)


def _each_bound(data_inputs: tuple[int, ...] | None):
    """Ops that move or pick elements: evaluated on the lower and on the upper bound, as OpenVINO's
    default bound evaluator does.  `data_inputs`: the inputs that may be known in part (None:
    all); every other input must be known."""
    def rule(op: Op, inputs: list[TensorType], out: list[TensorType]) -> None:
        if not has_partial(inputs) or not _integral(out[0]):
            return
        lows, highs = [], []
        for i, t in enumerate(inputs):
            if t.partial is not None and (data_inputs is None or i in data_inputs):
                lo, hi = _bound_arrays(t)
            elif t.value is not None:
                lo = hi = t.value
            else:
                return
            lows.append(lo)
            highs.append(hi)
        try:
            lo, hi = op.run(*lows), op.run(*highs)
        except Exception:  # noqa: BLE001 - what the kernel cannot evaluate has no bounds
            return
        _set_bounds(out[0], lo, hi)
    return rule


def _interval(op: Op, inputs: list[TensorType], out: list[TensorType]) -> None:
    """Binary arithmetic: the least and greatest result over the four combinations of bounds
    (OpenVINO's interval_bound_evaluator).  An element with an unbounded input is unbounded,
    from 0."""
    if not has_partial(inputs) or not _integral(out[0]) or any(t.partial is None and t.value is None for t in inputs):
        return
    (a_lo, a_hi), (b_lo, b_hi) = (_bound_arrays(t) for t in inputs)
    try:
        with np.errstate(all="ignore"):
            results = [np.asarray(op.run(a, b)) for a in (a_lo, a_hi) for b in (b_lo, b_hi)]
            tops = [np.asarray(a == _top(t.etype)) for t, a in ((inputs[0], a_hi), (inputs[1], b_hi))]
            unbounded = np.broadcast_to(tops[0] | tops[1], results[0].shape)
    except Exception:  # noqa: BLE001
        return
    stack = np.stack(results)
    lo, hi = stack.min(axis=0), stack.max(axis=0)
    _set_bounds(out[0], np.where(unbounded, 0, lo), hi, unbounded)


def _convert(op: Op, inputs: list[TensorType], out: list[TensorType]) -> None:
    """To an integer or float type the elements carry over (OpenVINO keeps the bounds of a shape
    converted to f32 and back); "unbounded" stays unbounded."""
    t, etype = inputs[0], out[0].etype
    if t.partial is None or not (etype.is_integral or etype.is_float) or etype.carrier is None:
        return
    if etype.is_integral:
        out[0].partial = tuple(int(np.asarray(e).astype(etype.carrier)) if isinstance(e, int) else e
                               for e in t.partial)
    else:
        out[0].partial = t.partial


def _reduce_prod(op: Op, inputs: list[TensorType], out: list[TensorType]) -> None:
    """The product of the lower bounds and of the upper bounds; unbounded if any factor is."""
    data, axes = inputs
    if data.partial is None or axes.value is None or not _integral(out[0]):
        return
    lo, hi = _bound_arrays(data)
    free = (hi == _top(data.etype))
    try:
        out_lo = op.run(lo, axes.value)
        out_hi = op.run(np.where(free, 1, hi).astype(hi.dtype), axes.value)
        any_free = op.run((~free).astype(hi.dtype), axes.value) == 0
    except Exception:  # noqa: BLE001
        return
    _set_bounds(out[0], out_lo, out_hi, np.asarray(any_free))


RULES = {
    "ShapeOf": _shape_of,
    "Convert": _convert,
    "Gather": _each_bound((0,)),
    "Concat": _each_bound(None),
    "Reshape": _each_bound((0,)),
    "Squeeze": _each_bound((0,)),
    "Unsqueeze": _each_bound((0,)),
    "Transpose": _each_bound((0,)),
    "Tile": _each_bound((0,)),
    "Broadcast": _each_bound((0,)),
    "StridedSlice": _each_bound((0,)),
    "Slice": _each_bound((0,)),
    "Select": _each_bound((1, 2)),
    "ScatterUpdate": _each_bound((0, 2)),
    "ReduceMax": _each_bound((0,)),
    "ReduceMin": _each_bound((0,)),
    "ReduceProd": _reduce_prod,
    "Add": _interval,
    "Subtract": _interval,
    "Multiply": _interval,
    "Divide": _interval,
    "Maximum": _interval,
    "Minimum": _interval,
    "FloorMod": _interval,
}


def propagate(op: Op, inputs: list[TensorType], out: list[TensorType]) -> None:
    """Give `out` the partial (or whole) values that follow from `inputs`; never raises."""
    rule = RULES.get(op.spec.type)
    if rule is not None and out and out[0] is not None and out[0].value is None:
        rule(op, inputs, out)


# ---------------------------------------------------------------- consumers

def reshape_from_bounds(shape, pattern: list[tuple[int, int | None]], special_zero: bool) -> tuple:
    """Reshape-1's output shape for a target known element by element, as OpenVINO computes it
    (src/core/shape_inference/include/reshape_shape_inference.hpp, without symbols): equal static
    dims on both sides cancel, the rest are multiplied as intervals, and -1 takes the quotient."""
    minus_one = None
    dims: list[DimLike] = []
    for i, (lo, hi) in enumerate(pattern):
        if (lo, hi) == (-1, -1):
            if minus_one is not None:
                raise ShapeError(f"the target shape has more than one -1 (at {minus_one} and {i})")
            minus_one = i
            dims.append(ANY)
        elif lo >= 0:
            dims.append(make_dim(lo, hi))
        elif hi is None or hi >= 0:   # only the lower bound below 0: anything
            dims.append(ANY)
        else:
            raise ShapeError(f"target shape element {i} lies in [{lo}, {hi}], below 0")
    out: list[DimLike] = []
    ins: list[DimLike] = []
    outs: list[DimLike] = []
    if shape is None:
        for i, d in enumerate(dims):
            if special_zero and d == 0:
                out.append(ANY)
            else:
                out.append(d)
                if i != minus_one:
                    outs.append(d)
        if minus_one is not None:
            out[minus_one] = ANY
        return tuple(out)
    for i, d in enumerate(dims):
        copied = special_zero and d == 0
        if i == minus_one:
            out.append(ANY)
        elif copied:
            if i >= len(shape):
                raise ShapeError(f"the target shape copies dim {i} of the input (special_zero), but the input "
                                 f"has rank {len(shape)}")
            out.append(shape[i])
        else:
            out.append(d)
            outs.append(d)
        if i < len(shape) and not copied:
            ins.append(shape[i])
    ins += list(shape[len(dims):])
    if minus_one is not None:
        out[minus_one] = _minus_one_dim(ins, outs)
    return tuple(out)


def _interval_mul(a: tuple[int, int | None], b: DimLike) -> tuple[int, int | None]:
    """Interval product, as OpenVINO's Interval: 0 times anything is 0, else unbounded stays so."""
    blo, bhi = (b, b) if isinstance(b, int) else (b.lo, b.hi)
    if a[1] == 0 or bhi == 0:
        return 0, 0
    return a[0] * blo, None if a[1] is None or bhi is None else a[1] * bhi


def _minus_one_dim(ins: list[DimLike], outs: list[DimLike]) -> DimLike:
    """The -1 dim: the input dims over the other output dims.  As OpenVINO: equal static dims on
    both sides cancel; static and dynamic factors are kept apart and only joined when the static
    products differ; the quotient of intervals is [ceil(lo / max), hi / min]."""
    outs = list(outs)
    in_static, in_dyn = 1, (1, 1)
    for d in ins:
        if isinstance(d, int) and d != 0 and d in outs:
            outs.remove(d)
        elif isinstance(d, int):
            in_static *= d
        else:
            in_dyn = _interval_mul(in_dyn, d)
    out_static, out_dyn = 1, (1, 1)
    for d in outs:
        if isinstance(d, int):
            out_static *= d
        else:
            out_dyn = _interval_mul(out_dyn, d)
    if in_static != out_static:
        in_dyn = _interval_mul(in_dyn, in_static)
        out_dyn = _interval_mul(out_dyn, out_static)
    if out_static == 0:
        if in_static != 0:
            raise ShapeError("cannot infer the -1 dim: the other target dims hold 0 elements but the input "
                             "does not")
        return make_dim(in_dyn[0], in_dyn[1])
    (lo, hi), (plo, phi) = in_dyn, out_dyn
    if lo == hi and plo == phi:
        if lo % plo:
            raise ShapeError(f"cannot infer the -1 dim: {lo} input elements do not divide by {plo}")
        return lo // plo
    new_hi = hi // plo if hi is not None and plo != 0 and (plo, phi) != (0, None) else None
    new_lo = lo if phi == 0 else -(-lo // phi) if phi is not None else (1 if lo > 0 else 0)
    if new_hi is not None and new_lo > new_hi:
        raise ShapeError(f"cannot infer the -1 dim: no whole number of [{lo}, {'inf' if hi is None else hi}] "
                         f"input elements per [{plo}, {'inf' if phi is None else phi}] output elements")
    return make_dim(new_lo, new_hi)
