"""RMS norms written out op by op, as one step (part of `irrun.optimize.rewrite`).

Every Llama, Mistral, Qwen, Gemma, Phi-3 and T5 that optimum-intel exports carries its RMS norms
as the PyTorch frontend writes `x * rsqrt(mean(x^2) + eps) * weight`:

    Power(x, 2) -> ReduceMean(last axis, keep_dims) -> Add(eps) -> Sqrt -> Divide(1, .)
      -> Multiply(x, .) [-> Multiply(weight)]

which OpenVINO's CPU plugin runs as one `RMS` node.  Run as seven layers, a decoding step of
optimum-intel's tiny Llama paid about 20 us a norm where its arithmetic takes a third of that:
each layer's kernel bookkeeping and, shapes changing at every call, a check before most of them.
Here they are one step making the layers' own NumPy calls in their order (the same bits): the
squares, their sums by BLAS as the bound ReduceMean takes them, the mean, eps, root and inverse on
the [..., 1] statistics, then x times the inverse and the weight, on every core for large data as
the fused elementwise chain did.  Inputs at run time that are not the pattern's (an eps or weight
that would widen x, a row of one element) run the layers one by one.

(Stop 52 tried it first as a kernel of its own, one dot product a row without the squares
written: no faster than the layers for large data, which run their last two multiplies in parts,
and of other last bits; this one keeps both.)
"""
from __future__ import annotations

import numpy as np

from . import threads
from .layer_groups import LayerGroup, Wiring, group_step, with_groups
from .ops.common import last_axis_sums
from .shapes import numpy_broadcast


def fuse_rms_norms(plan, steps: list, pinned: set[int]) -> list:
    """`steps` with each written-out RMS norm run as one step (`RmsNorm`)."""
    wiring = Wiring(plan, steps, pinned)
    groups, taken = {}, set()
    for k in range(len(steps)):
        members = _rms_norm(wiring, k)
        if members is None or taken.intersection(members):
            continue
        taken.update(members)
        groups[members[-1]] = group_step(plan, steps, members, lambda *a: RmsNorm(plan, *a))
    return with_groups(steps, groups, taken)


def _rms_norm(wiring: Wiring, k: int) -> list[int] | None:
    """The members of the RMS norm whose Power is step k, in the order they run, or None."""
    steps = wiring.steps
    if not wiring.plain(k, "Power", 2) or not wiring.constant_is(k, 1, 2.0) or steps[k].op.mode != "numpy":
        return None
    x = steps[k].inputs[0]
    data = wiring.plan.analysis.type_of(steps[k].node.inputs[0])
    if data is None or not data.rank or data.etype.name not in ("f32", "f64"):
        return None
    found = wiring.read_by(k, "ReduceMean", 2)
    if found is None or found[1] != 0:
        return None
    mean = found[0]
    axes = wiring.constant(mean, 1)
    if axes is None or np.size(axes) != 1 or int(np.asarray(axes).reshape(-1)[0]) % data.rank != data.rank - 1 \
            or not steps[mean].op.attrs.keep_dims:
        return None
    members = [k, mean]
    for op_type in ("Add", "Sqrt", "Divide", "Multiply"):
        found = wiring.read_by(members[-1], op_type)
        if found is None or getattr(steps[found[0]].op, "mode", "numpy") != "numpy":
            return None
        members.append(found[0])
    add, _, divide, times_x = (steps[m] for m in members[2:])
    if len(add.inputs) != 2 or len(divide.inputs) != 2 or divide.inputs[1] != steps[members[3]].outputs[0] \
            or not wiring.constant_is(members[4], 0, 1.0) or x not in times_x.inputs:
        return None
    found = wiring.read_by(members[-1], "Multiply", 2)
    if found is not None and getattr(steps[found[0]].op, "mode", "numpy") == "numpy":
        members.append(found[0])
    if any(steps[m].node.types[0].etype is not data.etype for m in members):
        return None
    return members


class RmsNorm(LayerGroup):
    """The op of a fused RMS norm step (see the module docstring)."""

    def __init__(self, plan, nodes: tuple, wiring: list, inputs: list[int]):
        super().__init__(plan, nodes, wiring, inputs)
        reads = [read for read, _ in wiring]
        x, mean, scaled = reads[0][0], wiring[1][1], wiring[5][1]
        self.at_x = self.position[x]
        self.at_eps = self.position[next(s for s in reads[2] if s != mean)]
        self.at_one = self.position[reads[4][0]]
        self.at_weight = None
        if len(wiring) == 7:
            self.at_weight = self.position[next(s for s in reads[6] if s != scaled)]
        operands = [self.at_eps, self.at_one] + ([self.at_weight] if self.at_weight is not None else [])
        self.constant_operands = all(inputs[i] in plan.constants for i in operands)
        self.fitted: tuple | None = None        # (shape, dtype) of the last x `_fits` passed

    def quick_shapes(self, args):
        """x's shape where eps, the 1 and the weight do not widen it (irrun/shape_check.py)."""
        return ((args[self.at_x].shape,), ()) if self._fits(args) else None

    def _fits(self, args) -> bool:
        """The pattern holds for these inputs: float x with rows of 2 or more, eps and the 1 single
        values of its type and rank at most its, a weight of its type that does not widen it.
        Where those three are constants, the answer for x's shape and type is remembered."""
        x = args[self.at_x]
        key = (x.shape, x.dtype)
        if key == self.fitted:
            return True
        if not x.ndim or x.shape[-1] < 2 or x.dtype.kind != "f":
            return False
        for i in (self.at_eps, self.at_one):
            if args[i].size != 1 or args[i].ndim > x.ndim or args[i].dtype != x.dtype:
                return False
        if self.at_weight is not None:
            weight = args[self.at_weight]
            if weight.dtype != x.dtype or numpy_broadcast(x.shape, weight.shape) != x.shape:
                return False
        if self.constant_operands:
            self.fitted = key
        return True

    def fast(self, args):
        """The layers' arithmetic in one step, or None where the inputs are not the pattern's."""
        if not self._fits(args):
            return None
        x = args[self.at_x]
        n = x.shape[-1]
        sums = last_axis_sums(np.square(x).reshape(-1, n)).reshape(x.shape[:-1] + (1,))
        inverse = np.divide(args[self.at_one], np.sqrt(np.add(sums / n, args[self.at_eps])))
        if self.at_weight is None:
            return np.multiply(x, inverse)       # (either order: a product is the same both ways)
        out = np.empty(x.shape, x.dtype)
        if not threads.worth_parts(x.size, 2):          # (a decoding step's row: no parts' bookkeeping)
            _scaled(x, inverse, args[self.at_weight], out)
            return out
        # (on every core for large data, as the fused chain of the layers ran the two multiplies)
        return threads.in_parts(_scaled, out, x, inverse, args[self.at_weight], cost=2)


def _scaled(x, inverse, weight, out):
    np.multiply(x, inverse, out)
    np.multiply(out, weight, out)
