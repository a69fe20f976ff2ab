"""Rotary position embeddings as one step (part of `irrun.optimize.rewrite`).

Hugging Face's Llama, Mistral, Qwen, Gemma and Phi-3 rotate each query and key head by its
position as `x * cos + rotate_half(x) * sin`, where rotate_half(x) = concat(-x2, x1) of the
head's halves x1, x2; PyTorch's frontend writes that out as seven layers:

    Multiply(x, cos)                                               -> a
    Slice(x, half:) -> Multiply(-1) ; Slice(x, :half) -> Concat    -> r
    Multiply(r, sin) -> Add(a, .)                                  -> y

which OpenVINO's CPU plugin runs as one `RoPE` node.  Here they are one step too (a decoding step
of optimum-intel's tiny Llama ran 28 of its ~170 steps for them): y = x * cos, then y's first half
minus x2 * sin's first half and its second half plus x1 * sin's second half, in place.  The same
bits as the layers': negating is exact, and a + (-c) is a - c.  Inputs at run time that are not
the pattern (cos or sin that would widen x, a head of another size) run the layers one by one.
"""
from __future__ import annotations

import numpy as np

from .layer_groups import LayerGroup, Wiring, group_step, with_groups
from .shapes import numpy_broadcast


def fuse_rotary_embeddings(plan, steps: list, pinned: set[int]) -> list:
    """`steps` with each written-out rotary embedding run as one step (`RotaryEmbedding`)."""
    wiring = Wiring(plan, steps, pinned)
    groups, taken = {}, set()
    for k in range(len(steps)):
        found = _rotation(wiring, k)
        if found is None or taken.intersection(found[0]):
            continue
        members, half = found
        taken.update(members)
        groups[members[-1]] = group_step(plan, steps, members, lambda *a, half=half: RotaryEmbedding(plan, half, *a))
    return with_groups(steps, groups, taken)


def _slice_of(wiring: Wiring, slot: int) -> tuple[int, int, int] | None:
    """(step, start, stop) of the plain Slice by one along the last axis making `slot`."""
    k = wiring.made_by(slot, "Slice", 5)
    if k is None:
        return None
    data = wiring.plan.analysis.type_of(wiring.steps[k].node.inputs[0])
    start, stop, step, axes = (wiring.constant(k, i) for i in range(1, 5))
    if data is None or data.rank is None or data.etype.name not in ("f32", "f64") \
            or any(v is None or np.size(v) != 1 for v in (start, stop, step, axes)) \
            or int(np.asarray(step).reshape(-1)[0]) != 1 \
            or int(np.asarray(axes).reshape(-1)[0]) % data.rank != data.rank - 1:
        return None
    return k, int(np.asarray(start).reshape(-1)[0]), int(np.asarray(stop).reshape(-1)[0])


def _rotation(wiring: Wiring, k: int) -> tuple[list[int], int] | None:
    """The members of the rotary embedding whose Concat is step k, and half the head's size."""
    steps = wiring.steps
    if not wiring.plain(k, "Concat", 2):
        return None
    concat = steps[k]
    negated, low = wiring.made_by(concat.inputs[0], "Multiply", 2), _slice_of(wiring, concat.inputs[1])
    if negated is None or low is None:
        return None
    for position in (0, 1):
        high = _slice_of(wiring, steps[negated].inputs[position])
        if high is not None and wiring.constant_is(negated, 1 - position, -1.0):
            break
    else:
        return None
    x = steps[low[0]].inputs[0]
    half = low[2]
    rank = wiring.plan.analysis.type_of(steps[low[0]].node.inputs[0]).rank
    if steps[high[0]].inputs[0] != x or low[1] != 0 or half <= 0 or high[1] != half or high[2] < 2 * half \
            or concat.op.attrs.axis % rank != rank - 1:
        return None
    found = wiring.read_by(k, "Multiply", 2)
    if found is None:
        return None
    times_sin, _ = found
    found = wiring.read_by(times_sin, "Add", 2)
    if found is None:
        return None
    add, position = found
    times_cos = wiring.made_by(steps[add].inputs[1 - position], "Multiply", 2)
    if times_cos is None or x not in steps[times_cos].inputs:
        return None
    return sorted([times_cos, high[0], negated, low[0], k, times_sin, add]), half


class RotaryEmbedding(LayerGroup):
    """The op of a fused rotary embedding step (see the module docstring)."""

    def __init__(self, plan, half: int, nodes: tuple, wiring: list, inputs: list[int]):
        super().__init__(plan, nodes, wiring, inputs)
        self.half = half
        by_type: dict[str, list] = {}
        for node, (read, written) in zip(nodes, wiring):
            by_type.setdefault(node.layer.op_type, []).append((read, written))
        x = by_type["Slice"][0][0][0]            # (both Slices read x)
        rotated = by_type["Concat"][0][1]
        times_cos = next(read for read, _ in by_type["Multiply"] if x in read)
        times_sin = next(read for read, _ in by_type["Multiply"] if rotated in read)
        self.at_x = self.position[x]
        self.at_cos = self.position[next(s for s in times_cos if s != x)]
        self.at_sin = self.position[next(s for s in times_sin if s != rotated)]

    def quick_shapes(self, args):
        """x's shape where cos and sin broadcast onto x without widening it (irrun/shape_check.py)."""
        x, cos, sin = args[self.at_x], args[self.at_cos], args[self.at_sin]
        if numpy_broadcast(x.shape, cos.shape) != x.shape or numpy_broadcast(x.shape, sin.shape) != x.shape:
            return None
        return (x.shape,), ()

    def fast(self, args):
        """x cos + rotate_half(x) sin, or None where the inputs are not the pattern's."""
        x, cos, sin = args[self.at_x], args[self.at_cos], args[self.at_sin]
        half = self.half
        if x.ndim == 0 or x.shape[-1] != 2 * half or not (x.dtype == cos.dtype == sin.dtype) or x.dtype.kind != "f" \
                or numpy_broadcast(x.shape, cos.shape) != x.shape or numpy_broadcast(x.shape, sin.shape) != x.shape:
            return None
        y = np.multiply(x, cos)
        first, second = y[..., :half], y[..., half:]
        one_value = sin.ndim == 0 or sin.shape[-1] == 1
        sin_first, sin_second = (sin, sin) if one_value else (sin[..., :half], sin[..., half:])
        np.subtract(first, np.multiply(x[..., half:], sin_first), out=first)
        np.add(second, np.multiply(x[..., :half], sin_second), out=second)
        return y
