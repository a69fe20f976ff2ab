"""Grouped-query attention without its expanded keys and values (part of `irrun.optimize.rewrite`).

A model with fewer key/value heads than query heads (Llama 2 70B, Llama 3, Mistral, Qwen 2,
TinyLlama: grouped-query attention) is exported by PyTorch's frontend with each of its key and
value tensors repeated for the query heads that share it before ScaledDotProductAttention:

    kv [B, KV, S, E] -> Unsqueeze(2) -> Broadcast to [B, KV, G, S, E] -> Reshape to [B, KV * G, S, E]

Run as written, a decoding step copies the whole KV cache twice per layer (the Broadcast is a view,
the Reshape of that view a copy: G times the cache) and pays for three layers' bookkeeping per
tensor.  OpenVINO's CPU plugin reads the shared heads in place.  Here the six layers and the
attention become one step that multiplies each group of G query heads by its key/value head
directly: query heads h = k G + j read kv head k, which is what the Reshape's order of heads
says.  The products are the same dot products as the expanded attention's (BLAS may round them
in a different order: a GEMM's last bit).  Where the step's inputs are not what the pattern
expects at run time (a Broadcast target other than [B, KV, G, S, E], a Reshape that does not
merge KV and G, a mask that does not broadcast by head group, a causal prefill large enough for
the attention's row blocks), the layers run one by one, as they would unfused.

Fused only where the expanded tensors are seen by nothing else (another layer, a Result, a
watcher that reads values).
"""
from __future__ import annotations

import numpy as np

from .layer_groups import LayerGroup, Wiring, group_step, with_groups
from .ops.attention import BLOCK_SCORES, additive_mask, attention_scale, causal_bias, softmax_rows

_EXPAND = ("Unsqueeze", "Broadcast", "Reshape")


def fuse_grouped_attention(plan, steps: list, pinned: set[int]) -> list:
    """`steps` with each ScaledDotProductAttention whose keys and values are expanded by head
    group run as one step (`GroupedAttention`)."""
    wiring = Wiring(plan, steps, pinned)
    groups, taken = {}, set()
    for k, step in enumerate(steps):
        if not wiring.plain(k, "ScaledDotProductAttention") or len(step.inputs) < 3:
            continue
        chains = [_expansion(wiring, step.inputs[i]) for i in (1, 2)]
        if None in chains:
            continue
        members = chains[0] + chains[1] + [k]
        if taken.intersection(members):
            continue
        taken.update(members)
        groups[k] = group_step(plan, steps, members, lambda *a: GroupedAttention(plan, *a))
    return with_groups(steps, groups, taken)


def _expansion(wiring: Wiring, slot: int) -> list[int] | None:
    """The steps [Unsqueeze, Broadcast, Reshape] making `slot` from a 4-D key or value, each
    output read by the next alone, or None."""
    found = []
    for op_type in reversed(_EXPAND):
        k = wiring.made_by(slot, op_type, 2)
        if k is None:
            return None
        found.append(k)
        slot = wiring.steps[k].inputs[0]
    unsqueeze, broadcast, _ = (wiring.steps[k] for k in found[::-1])
    axes = wiring.plan.constants.get(unsqueeze.inputs[1])
    data = wiring.plan.analysis.type_of(unsqueeze.node.inputs[0])
    if axes is None or np.size(axes) != 1 or int(np.asarray(axes).reshape(-1)[0]) not in (2, -3) \
            or data is None or data.rank != 4 or data.etype.name not in ("f32", "f64") \
            or broadcast.op.mode(2) not in ("numpy", "bidirectional"):
        return None
    return found[::-1]


def _merged_heads(pattern: list, expanded: tuple, special_zero: bool) -> bool:
    """Whether Reshape(`pattern`) of an array of shape `expanded` [B, KV, G, S, E] (no dim 0)
    gives [B, KV * G, S, E]: every dim of the pattern is that one, or the input's own where
    special_zero copies it, but for at most one -1 (which the element count then makes that one)."""
    b, kv, g, s, e = expanded
    want = (b, kv * g, s, e)
    if len(pattern) != 4 or pattern.count(-1) > 1:
        return False
    for i, p in enumerate(pattern):
        if p != want[i] and p != -1 and not (special_zero and p == 0 and expanded[i] == want[i]):
            return False
    return True


class GroupedAttention(LayerGroup):
    """The op of a fused grouped-query attention step (see the module docstring)."""

    def __init__(self, plan, nodes: tuple, wiring: list, inputs: list[int]):
        super().__init__(plan, nodes, wiring, inputs)
        self.causal = bool(nodes[-1].op.attrs.causal)
        self.special_zero = (bool(nodes[2].op.attrs.special_zero), bool(nodes[5].op.attrs.special_zero))
        # where each of the kernel's operands is among the step's inputs
        position, reads = self.position, [r for r, _ in wiring]
        self.at_key, self.at_key_target, self.at_key_shape = \
            position[reads[0][0]], position[reads[1][1]], position[reads[2][1]]
        self.at_value, self.at_value_target, self.at_value_shape = \
            position[reads[3][0]], position[reads[4][1]], position[reads[5][1]]
        self.at_query = position[reads[6][0]]
        self.at_extra = [position[s] for s in reads[6][3:]]     # mask, scale
        self.timed_member = len(nodes) - 1      # (profiles show the step's time on the attention)

    def quick_shapes(self, args):
        """The attention's output [B, H, L, Ev] for 4-D inputs whose dims agree (irrun/shape_check.py;
        the kernel checks the rest, and runs the layers one by one where the pattern does not hold)."""
        key, value, query = args[self.at_key], args[self.at_value], args[self.at_query]
        if key.ndim != 4 or value.ndim != 4 or query.ndim != 4 or query.shape[3] != key.shape[3] \
                or key.shape[:3] != value.shape[:3] or query.shape[0] != key.shape[0]:
            return None
        mask_rows = args[self.at_extra[0]].shape[-2:-1] if self.at_extra and not self.causal else ()
        if mask_rows not in ((), (1,), query.shape[2:3]):
            return None         # (a mask of more rows widens the output: the layers' own checks)
        return (query.shape[:3] + value.shape[3:],), ()

    def fast(self, args):
        """The attention over the unexpanded keys and values, or None where the pattern does not
        hold for these inputs."""
        key, value, query = args[self.at_key], args[self.at_value], args[self.at_query]
        if key.ndim != 4 or value.ndim != 4 or query.ndim != 4 or not key.size or not value.size \
                or not (query.dtype == key.dtype == value.dtype) or query.dtype.kind != "f" or query.dtype.itemsize < 4:
            return None
        b, kv, s, e = key.shape
        heads, rows = query.shape[1], query.shape[2]
        g = heads // kv if kv else 0
        if g < 1 or heads != kv * g or query.shape[0] != b or query.shape[3] != e \
                or value.shape[:3] != (b, kv, s):
            return None
        for data, target, shape, zero in ((key, self.at_key_target, self.at_key_shape, self.special_zero[0]),
                                          (value, self.at_value_target, self.at_value_shape, self.special_zero[1])):
            expanded = (b, kv, g, s, data.shape[3])
            target, shape = args[target], args[shape]
            if target.shape != (5,) or tuple(target.tolist()) != expanded or shape.ndim != 1 \
                    or not _merged_heads(shape.tolist(), expanded, zero):
                return None
        if self.causal and rows > 1 and b * heads * rows * s >= 4 * BLOCK_SCORES:
            return None             # (the attention's own row blocks: the layers one by one)
        compute = query.dtype.type
        extra = self.at_extra
        mask = args[extra[0]] if extra else None
        scale = args[extra[1]] if len(extra) > 1 else None
        if scale is not None and scale.size != 1:
            return None
        scale = attention_scale(scale, e, compute)
        if mask is not None and not self.causal:
            mask = self._grouped_mask(mask, b, kv, g, rows, s)
            if mask is None:
                return None
        # (the scores, and the attention's own helpers on them, as ScaledDotProductAttention.run)
        scores = np.matmul((query * scale).reshape(b, kv, g * rows, e), np.swapaxes(key, -1, -2))
        by_group = scores.reshape(b, kv, g, rows, s)
        if self.causal:
            by_group += causal_bias(rows, s, compute)
        elif mask is not None:
            by_group += additive_mask(mask, compute)
        softmax_rows(scores)
        return np.matmul(scores, value).reshape(b, heads, rows, value.shape[3])

    @staticmethod
    def _grouped_mask(mask, b, kv, g, rows, s):
        """The attention mask as [B or 1, KV or 1, G or 1, L or 1, S or 1], or None where it does not
        broadcast so (or would widen the output) or is neither boolean nor float."""
        if mask.ndim > 4 or mask.ndim < 1:
            return None
        m = mask if mask.ndim == 4 else mask.reshape((1,) * (4 - mask.ndim) + mask.shape)
        mb, mh, mr, ms = m.shape
        if mb not in (1, b) or mr not in (1, rows) or ms not in (1, s) or mh not in (1, kv * g):
            return None
        if m.dtype != np.bool_ and m.dtype.kind != "f":
            return None
        return m.reshape(mb, kv, g, mr, ms) if mh != 1 else m.reshape(mb, 1, 1, mr, ms)
