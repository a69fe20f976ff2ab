"""ScaledDotProductAttention-13: softmax(Q K^T * scale + mask) V over broadcast batch dims.

As OpenVINO computes it (its decomposition pass and CPU kernel agree):
* scale defaults to 1 / sqrt(E), E the last dim of the query;
* a boolean mask keeps the positions that are true (the others get -inf), a
  float mask is added; either broadcasts NumPy-style against [..., L, S];
* causal=true masks key j > query i (top-left aligned when L != S) and then
  ignores the attention_mask input altogether;
* a row with every position masked is NaN (softmax of all -inf).
f16 is computed in f32, as the CPU plugin does.
"""
from __future__ import annotations

from math import prod

import numpy as np

from .. import etypes
from ..errors import ShapeError
from ..registry import Op, TensorType, register
from ..shapes import ANY, Shape, broadcast_dims, broadcast_shapes, dim_merge, format_shape, is_static, numpy_broadcast

_NAMES = ("query", "key", "value", "attention_mask", "scale")
# Scores in a block of query rows, over every head (`ScaledDotProductAttention._by_row_blocks`): 4 MiB
# of f32 (of 2^17 to 2^20, the fastest for 8 heads of 1024 tokens and 32 heads of 512)
BLOCK_SCORES = 1 << 20


def _merge_batch(batch: Shape, other: Shape, what: str, shapes: list[Shape]) -> Shape:
    try:
        return broadcast_shapes(batch, other)
    except ShapeError:
        raise _incompatible(what, shapes) from None


def _incompatible(what: str, shapes: list[Shape]) -> ShapeError:
    listed = ", ".join(f"{n} {format_shape(s)}" for n, s in zip(_NAMES, shapes))
    return ShapeError(f"{what} shape is not compatible with the other inputs ({listed})")


def _merged_dim(a, b, what, shapes, *, broadcast=False):
    try:
        return broadcast_dims(a, b) if broadcast else dim_merge(a, b)
    except ShapeError:
        raise _incompatible(what, shapes) from None


def sdpa_shape(shapes: list[Shape], causal: bool) -> Shape:
    """Output shape [*batch, L, Ev] as OpenVINO infers it.

    batch is the broadcast of the leading dims of query, key, value (and of a
    rank >= 3 attention_mask unless causal); E (query, key) and S (key, value)
    must match, and the mask's last two dims broadcast against L and S.
    """
    query, key, value = shapes[:3]
    if query is not None and len(query) < 3:
        raise ShapeError(f"query {format_shape(query)} must have rank 3 or more")
    batch, l_dim, e_dim = (query[:-2], query[-2], query[-1]) if query is not None else (None, ANY, ANY)
    s_dim = ev_dim = ANY
    if key is not None:
        if len(key) < 3:
            raise _incompatible("key", shapes)
        batch = _merge_batch(batch, key[:-2], "key", shapes)
        e_dim = _merged_dim(e_dim, key[-1], "key", shapes)
        s_dim = key[-2]
    if value is not None:
        if len(value) < 3:
            raise _incompatible("value", shapes)
        batch = _merge_batch(batch, value[:-2], "value", shapes)
        s_dim = _merged_dim(s_dim, value[-2], "value", shapes)
        ev_dim = value[-1]
    mask = shapes[3] if len(shapes) > 3 else None
    if mask is not None and not causal and len(mask) > 0:
        if len(mask) < 2:
            raise _incompatible("attention_mask", shapes)
        l_dim = _merged_dim(l_dim, mask[-2], "attention_mask", shapes, broadcast=True)
        s_dim = _merged_dim(s_dim, mask[-1], "attention_mask", shapes, broadcast=True)
        if len(mask) >= 3:
            batch = _merge_batch(batch, mask[:-2], "attention_mask", shapes)
    scale = shapes[4] if len(shapes) > 4 else None
    if is_static(scale) and scale not in ((), (1,)):   # OpenVINO checks a static scale shape only
        raise ShapeError(f"scale {format_shape(scale)} must be a scalar or have one element")
    return None if batch is None else tuple(batch) + (l_dim, ev_dim)


def attention_scale(scale, depth: int, compute):
    """The scores' scale: the input's (a scalar) in the compute type, else 1 / sqrt(E)."""
    return 1 / np.sqrt(compute(depth)) if scale is None else scale.astype(compute).reshape(())


def causal_bias(rows: int, cols: int, compute) -> np.ndarray:
    """0 where query row i may see key j (j <= i), -inf above: [rows, cols]."""
    return np.where(np.arange(cols) > np.arange(rows)[:, None], -np.inf, 0).astype(compute)


def additive_mask(mask: np.ndarray, compute) -> np.ndarray:
    """An attention mask as what is added to the scores: a boolean one as 0 (attend) / -inf."""
    if mask.dtype == np.bool_:
        return np.where(mask, compute(0), compute(-np.inf))
    return mask.astype(compute, copy=False)


def softmax_rows(scores: np.ndarray) -> None:
    """Softmax along the last axis, in place (the ufuncs' reduce without the methods' Python-level
    wrappers: a decoding step's attention is all call overhead)."""
    scores -= np.maximum.reduce(scores, axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= np.add.reduce(scores, axis=-1, keepdims=True)


@register("ScaledDotProductAttention", 13)
class ScaledDotProductAttention(Op):
    def infer(self, inputs):
        etype = etypes.dynamic
        for name, t in zip(_NAMES, inputs):
            if name == "attention_mask" and t.etype is etypes.boolean:
                continue
            if t.etype is etypes.dynamic:
                continue
            if not t.etype.is_float:
                what = "attention_mask must be floating-point or boolean" if name == "attention_mask" \
                    else f"{name} must be floating-point"
                raise ShapeError(f"{what}, got {t.etype}")
            if etype is not etypes.dynamic and t.etype is not etype:
                raise ShapeError(f"mixed element types: {name} is {t.etype}, the query is {etype}")
            etype = t.etype
        shape = sdpa_shape([t.shape for t in inputs], self.attrs.causal)
        notes = None if shape is None else {
            len(shape) - 2: "query rows L (broadcast with the mask's)",
            len(shape) - 1: "last dim of value"}
        return [TensorType(shape, etype, notes=notes)]

    def quick_shapes(self, args):
        """`sdpa_shape` for inputs whose E and S dims agree and whose batch dims and mask broadcast."""
        query, key, value = (a.shape for a in args[:3])
        if min(len(query), len(key), len(value)) < 3 or query[-1] != key[-1] or key[-2] != value[-2]:
            return None
        rows, shapes = query[-2], [query[:-2], key[:-2], value[:-2]]
        if len(args) > 3 and not self.attrs.causal and args[3].ndim:
            mask = args[3].shape
            if len(mask) < 2 or 1 not in (rows, mask[-2]) and rows != mask[-2] \
                    or 1 not in (key[-2], mask[-1]) and key[-2] != mask[-1]:
                return None
            rows = mask[-2] if rows == 1 else rows
            if len(mask) >= 3:
                shapes.append(mask[:-2])
        if len(args) > 4 and args[4].shape not in ((), (1,)):
            return None
        batch = shapes[0]
        for shape in shapes[1:]:
            batch = numpy_broadcast(batch, shape)
            if batch is None:
                return None
        return (batch + (rows, value[-1]),), ()

    def run(self, query, key, value, mask=None, scale=None):
        dtype = query.dtype
        compute = (np.dtype(np.float32) if dtype.itemsize < 4 else dtype).type
        q, k, v = (a.astype(compute, copy=False) for a in (query, key, value))
        scale = attention_scale(scale, q.shape[-1], compute)
        rows, cols = q.shape[-2], k.shape[-2]
        if self.attrs.causal and rows > 1:          # (a decoding step's one row: none of this)
            batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])    # (causal: no mask)
            if prod(batch) * rows * cols >= 4 * BLOCK_SCORES and np.isfinite(v).all():
                return np.asarray(self._by_row_blocks(q * scale, k, v, batch, compute), dtype=dtype)
        scores = (q * scale) @ np.swapaxes(k, -1, -2)
        if self.attrs.causal:
            scores = scores + causal_bias(*scores.shape[-2:], compute)
        elif mask is not None:
            scores = scores + additive_mask(mask, compute)
        # (scores is an array of this call's own: the softmax in place)
        with np.errstate(invalid="ignore"):   # an all-masked row is NaN, as in OpenVINO
            softmax_rows(scores)
        return np.asarray(scores @ v, dtype=dtype)

    def _by_row_blocks(self, q, k, v, batch, compute) -> np.ndarray:
        """Causal attention a block of query rows at a time, each block's products with only the keys
        its rows may see: half the multiply-adds of the whole [..., L, S] matrix, whose masked half
        also went through memory six times (prefill of 1024 tokens, 8 heads of 64: 47 -> 20-27 ms,
        OpenVINO 14-22; 512 tokens of 32 heads of 128: 64 -> 43-64, OpenVINO 30-50).  Rows' values
        are those of the whole matrix: the keys left out would add exp(-inf) = 0 to the sums (`run`
        takes this path only for finite values, whose products by 0 are 0).  Without a causal mask,
        blocks lost (BERT-large's 384 tokens with a mask 47 -> 58-69 ms, a ViT's 577 26 -> 31-35)."""
        rows, cols = q.shape[-2], k.shape[-2]
        keys = np.swapaxes(k, -1, -2)
        out = np.empty(batch + (rows, v.shape[-1]), compute)
        step = max(1, BLOCK_SCORES // max(1, prod(batch) * cols))
        for first in range(0, rows, step):
            last = min(first + step, rows)
            seen = min(cols, last)                        # the keys j <= i of the block's rows i
            scores = q[..., first:last, :] @ keys[..., :seen]
            np.copyto(scores, -np.inf, where=np.arange(seen) > np.arange(first, last)[:, None])
            with np.errstate(invalid="ignore"):
                softmax_rows(scores)
            np.matmul(scores, v[..., :seen, :], out=out[..., first:last, :])
        return out
