"""MatMul: batched matrix product with NumPy's (and OpenVINO's) 1-D rules."""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..registry import Op, TensorType, register
from ..shapes import Shape, broadcast_shapes, format_shape
from .arithmetic import merge_etypes


def _transposed(shape: tuple, transpose: bool) -> list:
    dims = list(shape)
    if transpose and len(dims) > 1:   # transposing a 1-D operand is a no-op
        dims[-2], dims[-1] = dims[-1], dims[-2]
    return dims


def matmul_shape(a: Shape, b: Shape, transpose_a: bool, transpose_b: bool) -> tuple[Shape, dict[int, str] | None]:
    """Output shape of MatMul and per-dim notes saying where each dim comes from."""
    if a is None or b is None:
        return None, None
    if not a or not b:
        raise ShapeError(f"MatMul does not take scalars: {format_shape(a)} x {format_shape(b)}")
    # A 1-D first operand is a row [1, K], a 1-D second one a column [K, 1].
    rows = ([1] if len(a) == 1 else []) + _transposed(a, transpose_a)
    cols = _transposed(b, transpose_b) + ([1] if len(b) == 1 else [])
    k_a, k_b = rows[-1], cols[-2]
    if isinstance(k_a, int) and isinstance(k_b, int) and k_a != k_b:
        flags = "".join(f", {name}" for name, on in (("transpose_a", transpose_a), ("transpose_b", transpose_b)) if on)
        raise ShapeError(f"MatMul inner dimensions differ: {format_shape(a)} x {format_shape(b)} "
                         f"({k_a} vs {k_b}{flags})")
    try:
        batch = broadcast_shapes(tuple(rows[:-2]), tuple(cols[:-2]))
    except ShapeError as exc:
        raise ShapeError(f"MatMul batch dimensions: {exc.message}") from None
    batch_note = f"broadcast of the batch dims of {format_shape(a)} and {format_shape(b)}"
    dims = [(d, batch_note) for d in batch]
    # The row of a 1-D first operand and the column of a 1-D second one are dropped again.
    if len(a) > 1:
        dims.append((rows[-2], f"rows of input 0 {format_shape(a)}{' transposed' if transpose_a else ''}"))
    if len(b) > 1:
        dims.append((cols[-1], f"columns of input 1 {format_shape(b)}{' transposed' if transpose_b else ''}"))
    return tuple(d for d, _ in dims), {i: note for i, (_, note) in enumerate(dims)}


@register("MatMul", 1)
class MatMul(Op):
    def infer(self, inputs):
        a, b = inputs
        etype = merge_etypes(a.etype, b.etype)
        if etype.kind in ("bool", "string"):
            raise ShapeError(f"MatMul does not support element type {etype}")
        shape, notes = matmul_shape(a.shape, b.shape, self.attrs.transpose_a, self.attrs.transpose_b)
        return [TensorType(shape, etype, notes=notes)]

    def run(self, a, b):
        if self.attrs.transpose_a and a.ndim > 1:
            a = np.swapaxes(a, -1, -2)
        if self.attrs.transpose_b and b.ndim > 1:
            b = np.swapaxes(b, -1, -2)
        if a.dtype == np.float16:
            # OpenVINO accumulates f16 products in f32; NumPy's f16 matmul would round every step.
            return np.asarray(np.matmul(a.astype(np.float32), b.astype(np.float32)), dtype=np.float16)
        with np.errstate(all="ignore"):   # integer products wrap, as in C++
            return np.asarray(np.matmul(a, b))
