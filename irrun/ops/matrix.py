"""MatMul (batched matrix product with NumPy's and OpenVINO's 1-D rules), GroupedMatMul, Einsum
and Inverse.

GroupedMatMul-17 is the mixture-of-experts GEMM of OpenVINO 2026.4.1, whose shape inference takes
two layouts, both with the weights stored transposed (the spec page's [G, K, N] and its 2-D x 2-D
case are not what the runtime reads: specs/errata/misc2.md):

* [T, K] x [G, N, K] with offsets [G] (cumulative row ends): rows offsets[g-1]:offsets[g] of the
  first input times weights[g] transposed; rows past offsets[G-1] are 0;
* [G, M, K] x [G, N, K]: a batched product (offsets, if given, are not used).

OpenVINO 2026.4.1 has no kernel for it (neither the CPU plugin nor the reference evaluation);
irrun computes what its reference source does, f16 accumulated in f32 as MatMul.

Inverse-14 is OpenVINO's reference algorithm in f32: LU decomposition with partial pivoting
(the first row with the largest magnitude wins), then forward and backward substitution per
column.  adjoint=true transposes the inverse, as the CPU plugin does (the reference
source multiplies it by the determinant instead: specs/errata/misc.md).  A singular matrix
gives inf/NaN, as in OpenVINO.
"""
from __future__ import annotations

import string
from math import prod

import numpy as np

from .. import etypes, threads
from ..errors import ModelError, ShapeError
from ..registry import Op, TensorType, register
from ..shapes import ANY, Shape, broadcast_dims, broadcast_shapes, dim_merge, dims_compatible, format_shape
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
    outputs_are_new = True   # for the executor: np.matmul always makes a new array
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
            if a.dtype.kind == "f":
                return np.asarray(threads.matmul(a, b))
            return np.asarray(np.matmul(a, b))

    def bind(self, step):
        """Float32/64 data times a 2-D matrix: one GEMM over all the rows at once (NumPy would
        run one per leading index), with the output shape known at load.  Few rows
        (`runs_weight_first`) times a constant weight whose memory holds it [out, in] row by row
        (as stored with transpose_b, or laid out so by irrun/optimize.py) run weight first
        (`weight_first`).
        Other float products of two matrices or stacks of them (attention's scores and context)
        run `run`'s arithmetic without its checks and error state (the executor's is in force):
        a decoding step's scores and context 3.9 -> 2.6 and 3.3 -> 2.2 us each."""
        a, b = step.inputs
        out = step.outputs[0]
        if self.run_replaced() or a.etype is not b.etype or a.etype.name not in ("f32", "f64"):
            return None
        if self.attrs.transpose_a or b.rank != 2 or (a.rank or 0) < 2 or not (a.is_static and b.is_static):
            return self._bind_stacked(a, b)
        k, shape = a.shape[-1], out.shape
        out_in = None if b.value is None else b.value if self.attrs.transpose_b else b.value.T
        if prod(a.shape[:-1]) == 1 and out_in is not None and out_in.size < 2 * threads.GEMM_MACS_PER_PART:
            one_row = _one_row_product(out_in, self.attrs.transpose_b, k, shape)
            if one_row is not None:
                return one_row
        if runs_weight_first(prod(a.shape[:-1]), k, shape[-1]) and out_in is not None \
                and out_in.flags.c_contiguous:
            if self.attrs.transpose_b:
                return lambda x, w: weight_first(x.reshape(-1, k), w).reshape(shape)
            return lambda x, w: weight_first(x.reshape(-1, k), w.T).reshape(shape)
        if a.rank < 3:
            return self._bind_stacked(a, b)
        if self.attrs.transpose_b:
            return lambda x, w: threads.matmul(x.reshape(-1, k), w.T).reshape(shape)
        return lambda x, w: threads.matmul(x.reshape(-1, k), w).reshape(shape)

    def _bind_stacked(self, a, b):
        """`run` for float operands of rank 2 or more (no 1-D operand, whose matmul NumPy makes
        a vector of)."""
        if (a.rank or 0) < 2 or (b.rank or 0) < 2:
            return None
        matmul = threads.matmul
        if self.attrs.transpose_a and self.attrs.transpose_b:
            return lambda x, y: matmul(x.swapaxes(-1, -2), y.swapaxes(-1, -2))
        if self.attrs.transpose_a:
            return lambda x, y: matmul(x.swapaxes(-1, -2), y)
        if self.attrs.transpose_b:
            return lambda x, y: matmul(x, y.swapaxes(-1, -2))
        return matmul


# Rows of data up to which a product with a constant weight runs weight first (`weight_first`)
FEW_ROWS = 48
WIDENING_FEW_ROWS = 128


def runs_weight_first(rows: int, k: int, n: int) -> bool:
    """Whether `rows` of data times a constant [k, n] weight run weight first: up to FEW_ROWS rows,
    and up to WIDENING_FEW_ROWS where the product widens the rows at least threefold (a
    transformer's feed-forward up-projection: 128 x 256 x 1024 on two cores 176-191 -> 147-164 us,
    64 x 256 x 1024 128 -> 83, 96 x 256 x 1024 level; the other shapes measured lose from 64 rows,
    by 5-20%)."""
    return rows <= FEW_ROWS or (rows <= WIDENING_FEW_ROWS and n >= 3 * k)


# One row of data times a constant weight that narrows it (k inputs -> n outputs): from this many
# inputs, at least twice as many as outputs, up to this many bytes of weight, the weight is held
# [out, in] row by row (`one_row_reads_out_in`)
NARROWING_GEMV_MIN_INPUTS = 768
NARROWING_GEMV_MOST_BYTES = 16 << 20


def one_row_reads_out_in(k: int, n: int, nbytes: int) -> bool:
    """Whether one row of data times a constant [k, n] weight of `nbytes` reads the weight [out, in]
    row by row (OpenBLAS's GEMV a dot product per output) rather than [in, out] (its `y += x_i w_i`
    over the weight's rows): where the product narrows the data at least twofold (from
    NARROWING_GEMV_MIN_INPUTS inputs) and the weight may stay in cache (NARROWING_GEMV_MOST_BYTES).
    Measured on an AMD EPYC of family 19h, 16 MiB of weights of one shape cycled, [out, in] / [in,
    out] time: 1024 -> 256 0.72-0.85, 1024 -> 512 0.66-0.70, 1536 -> 384 0.67, 2048 -> 1024
    0.72-0.81, 4096 -> 1024 0.67-0.86, 768 -> 384 0.92; 512 -> 256 1.03-1.05; square and widening
    weights 0.84-1.6 (1.16-1.21 at 256 and 512), beyond the cache (5504 -> 2048, 8192 -> 2048,
    11008 -> 4096) 1.09-1.22.  The benchmark's decoder step: its four 1024 -> 256 down-projections
    72-77 -> 47-48 us each, the step 1107 -> 1014 us (two threads; 0.92 of its time on one)."""
    return k >= max(2 * n, NARROWING_GEMV_MIN_INPUTS) and nbytes <= NARROWING_GEMV_MOST_BYTES


def _one_row_product(out_in: np.ndarray, transpose_b: bool, k: int, shape: tuple):
    """The kernel of one row of data (a decoding step) times a constant weight (`out_in`: it
    [out, in]) held row by row either way: BLAS's GEMV through np.dot, the products summed as
    np.matmul's (the same bits, OpenBLAS's AVX-512 and AVX2 kernels alike), 0.85 us a call less than
    `weight_first`'s GEMM: 25 such calls a step of the benchmark's decoder, 2.8% of its time.  (Too
    small to cut into parts: see the caller.)  None where the weight is laid out neither way."""
    dot = np.dot
    if out_in.flags.c_contiguous:
        if transpose_b:
            return lambda x, w: dot(w, x.reshape(k)).reshape(shape)
        return lambda x, w: dot(w.T, x.reshape(k)).reshape(shape)
    if out_in.T.flags.c_contiguous:
        if transpose_b:
            return lambda x, w: dot(x.reshape(k), w.T).reshape(shape)
        return lambda x, w: dot(x.reshape(k), w).reshape(shape)
    return None


def weight_first(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """x [rows, in] @ w.T for w [out, in] as (w @ x.T).T: the same products (summed in the same
    order by OpenBLAS's AVX-512 kernels, bit for bit; its AVX2 ones, forced on an AMD EPYC, sum
    them otherwise, a unit or two in the last place apart), and faster for few rows, with OpenBLAS
    on two cores (34 x 384 x 1536: 357-396 -> 306-333 us, 17 x 1536 x 384: 237-272 -> 205, 48 x
    384 x 1536: 385-400 -> 315-363; at 64 rows 433-459 -> 521-553, hence FEW_ROWS).  Inside the
    benchmark's transformer at sequence 17, batch 2, its feed-forward products took 620 -> 578 and
    430 -> 350 us, the network 10.5 -> 9.4 ms (15.2 -> 13.8 on one thread).

    Returned as the transposed view, column-major: a row-major copy cost 30 of the 163 us of
    34 x 384 x 1536 on two cores (60 of 300 on one), and the next product by a weight reads x.T,
    row-major then, with no copy at all (the transformer at sequence 17 4.88-4.97 -> 4.74-4.85 ms,
    7.84 -> 7.71 on one thread, old and new alternating in one process).  Elementwise layers
    follow the layout; a Reshape copies where it must, as after any Transpose."""
    return threads.matmul(w, x.T).T


# ---------------------------------------------------------------- GroupedMatMul

@register("GroupedMatMul", 17)
class GroupedMatMul(Op):
    outputs_are_new = True

    def infer(self, inputs):
        a, b = inputs[0], inputs[1]
        offsets = inputs[2] if len(inputs) > 2 else None
        etype = merge_etypes(a.etype, b.etype)
        if etype.kind == "string":
            raise ShapeError(f"GroupedMatMul does not support element type {etype}")
        if offsets is not None and offsets.etype.name not in ("i32", "i64", "dynamic"):
            raise ShapeError(f"GroupedMatMul offsets must be i32 or i64, got {offsets.etype}")
        if a.shape is None or b.shape is None:
            return [TensorType(None, etype)]
        layout = f"mat_a {format_shape(a.shape)} x mat_b {format_shape(b.shape)}"

        def merge(x, y, what):
            try:
                return dim_merge(x, y)
            except ShapeError:
                raise ShapeError(f"GroupedMatMul {what} differ: {layout}") from None
        if len(a.shape) == 3 and len(b.shape) == 3:
            groups = merge(a.shape[0], b.shape[0], "group counts (dim 0)")
            merge(a.shape[2], b.shape[2], "inner dimensions (K: mat_a dim 2, mat_b dim 2)")
            return [TensorType((groups, a.shape[1], b.shape[1]), etype,
                               notes={0: "groups", 1: "rows of mat_a", 2: "rows of mat_b (weights stored [N, K])"})]
        if len(a.shape) == 2 and len(b.shape) == 3:
            if offsets is None:
                raise ShapeError(f"GroupedMatMul {layout} needs the offsets input")
            if offsets.rank not in (None, 1):
                raise ShapeError(f"GroupedMatMul offsets must be 1-D, got {format_shape(offsets.shape)}")
            merge(a.shape[1], b.shape[2], "inner dimensions (K: mat_a dim 1, mat_b dim 2)")
            return [TensorType((a.shape[0], b.shape[1]), etype,
                               notes={0: "rows of mat_a", 1: "rows of mat_b (weights stored [N, K])"})]
        raise ShapeError(f"GroupedMatMul takes mat_a [T, K] with mat_b [G, N, K] and offsets, or "
                         f"[G, M, K] with [G, N, K]; got {layout}")

    def run(self, a, b, offsets=None):
        compute = np.float32 if a.dtype == np.float16 else a.dtype   # f16 accumulates in f32, as MatMul
        weights = np.swapaxes(b, -1, -2).astype(compute, copy=False)
        if a.ndim == 3:
            with np.errstate(all="ignore"):   # integer products wrap, as in C++
                return np.matmul(a.astype(compute, copy=False), weights).astype(a.dtype, copy=False)
        ends = self._group_ends(offsets, a.shape[0], b.shape[0])
        out = np.zeros((a.shape[0], b.shape[1]), compute)
        start = 0
        with np.errstate(all="ignore"):
            for group, end in enumerate(ends):
                if end > start:
                    np.matmul(a[start:end].astype(compute, copy=False), weights[group], out=out[start:end])
                start = end
        return out.astype(a.dtype, copy=False)

    @staticmethod
    def _group_ends(offsets: np.ndarray, rows: int, groups: int) -> list[int]:
        ends = offsets.reshape(-1).astype(np.int64)
        problem = None
        if ends.size != groups:
            problem = f"{ends.size} offsets for {groups} groups (mat_b dim 0)"
        elif ends.size and (ends.min() < 0 or np.any(np.diff(ends) < 0)):
            problem = f"offsets {ends.tolist()} must be non-negative and non-decreasing"
        elif ends.size and ends[-1] > rows:
            problem = f"the last offset {int(ends[-1])} is past the {rows} rows of mat_a"
        if problem:
            raise ModelError(f"GroupedMatMul: {problem}")
        return ends.tolist()


# ---------------------------------------------------------------- Einsum

ELLIPSIS = "..."


def _labels(subscript: str, what: str) -> list[str]:
    """Letters and at most one "..." (OpenVINO allows no spaces or other characters)."""
    labels, i = [], 0
    while i < len(subscript):
        if subscript.startswith(ELLIPSIS, i) and ELLIPSIS not in labels:
            labels.append(ELLIPSIS)
            i += 3
        elif subscript[i] in string.ascii_letters:
            labels.append(subscript[i])
            i += 1
        else:
            raise ShapeError(f'Einsum {what} "{subscript}" must be letters with at most one "..."')
    return labels


def parse_einsum(equation: str) -> tuple[list[list[str]], list[str]]:
    """Input and output labels, the output recovered as OpenVINO does in implicit mode.

    Implicit output: every label of an input subscript that no other input
    subscript contains (a label repeated within one input is kept twice), sorted
    (uppercase first), after "..." when an input has one.
    """
    inputs_text, arrow, output_text = equation.partition("->")
    inputs = [_labels(sub, "input subscript") for sub in inputs_text.split(",")]
    if arrow:
        return inputs, _labels(output_text, "output subscript")
    subscripts = inputs_text.split(",")
    implicit = sorted(label for i, labels in enumerate(inputs) for label in labels
                      if label != ELLIPSIS and not any(label in other for j, other in enumerate(subscripts) if j != i))
    return inputs, ([ELLIPSIS] if any(ELLIPSIS in labels for labels in inputs) else []) + implicit


def einsum_shape(equation: str, shapes: list[Shape]) -> tuple[Shape, list[str]]:
    """Output shape and labels; dims of one label broadcast across inputs and must match within one."""
    inputs, output = parse_einsum(equation)
    if len(inputs) != len(shapes):
        raise ShapeError(f'Einsum equation "{equation}" has {len(inputs)} input subscripts for {len(shapes)} inputs')
    dims: dict[str, object] = {}
    for k, (labels, shape) in enumerate(zip(inputs, shapes)):
        if shape is None:
            for label in labels:
                dims.setdefault(label, None if label == ELLIPSIS else ANY)
            continue
        letters = len(labels) - labels.count(ELLIPSIS)
        if len(shape) < letters or (ELLIPSIS not in labels and len(shape) != letters):
            raise ShapeError(f"Einsum input {k} {format_shape(shape)} does not have the {letters} dims of "
                             f'"{"".join(labels)}"{" and more" if ELLIPSIS in labels else ""}')
        own: dict[str, object] = {}
        at = 0
        for label in labels:
            if label == ELLIPSIS:
                span = len(shape) - letters
                part, at = tuple(shape[at:at + span]), at + span
                if ELLIPSIS in dims and dims[ELLIPSIS] is not None:
                    try:
                        part = broadcast_shapes(dims[ELLIPSIS], part)
                    except ShapeError:
                        raise ShapeError(f'Einsum: the dims under "..." do not broadcast '
                                         f"({format_shape(dims[ELLIPSIS])} vs input {k} {format_shape(shape)})") from None
                elif ELLIPSIS in dims:
                    part = None
                dims[ELLIPSIS] = part
                continue
            d, at = shape[at], at + 1
            if label in own:
                try:
                    own[label] = dim_merge(own[label], d)
                except ShapeError:
                    raise ShapeError(f'Einsum: label {label} repeated in input {k} {format_shape(shape)} marks dims '
                                     f"of different sizes") from None
            else:
                own[label] = d
        for label, d in own.items():
            try:
                dims[label] = broadcast_dims(dims[label], d) if label in dims else d
            except ShapeError:
                raise ShapeError(f"Einsum: label {label} has dims {dims[label]} and {d} (input {k} "
                                 f"{format_shape(shape)}), which do not broadcast") from None
    out: list = []
    for label in output:
        if label not in dims and label != ELLIPSIS:
            raise ShapeError(f'Einsum: output label {label} is in no input subscript of "{equation}"')
        if label == ELLIPSIS:
            part = dims.get(ELLIPSIS, ())
            if part is None:
                return None, output
            out.extend(part)
        else:
            out.append(dims[label])
    return tuple(out), output


def _explicit(labels: list[str], ndim: int, spare: str) -> str:
    """A subscript with "..." replaced by the last letters of `spare` (right-aligned across inputs)."""
    if ELLIPSIS not in labels:
        return "".join(labels)
    span = ndim - (len(labels) - 1)
    at = labels.index(ELLIPSIS)
    return "".join(labels[:at]) + spare[len(spare) - span:] + "".join(labels[at + 1:])


@register("Einsum", 7)
class Einsum(Op):
    """np.einsum with OpenVINO's output rules: implicit output order, and "..." in inputs but not in
    the output summed away (NumPy refuses that)."""

    def infer(self, inputs):
        etype = etypes.dynamic
        for k, t in enumerate(inputs):
            if t.etype is etypes.dynamic:
                continue
            if not (t.etype.is_float or t.etype.is_integral):
                raise ShapeError(f"Einsum takes numbers, input {k} is {t.etype}")
            if etype is not etypes.dynamic and t.etype is not etype:
                raise ShapeError(f"Einsum inputs must share one element type (input {k} is {t.etype}, "
                                 f"input 0 is {etype})")
            etype = t.etype
        shape, output = einsum_shape(self.attrs.equation, [t.shape for t in inputs])
        repeated = sorted({label for label in output if label != ELLIPSIS and output.count(label) > 1})
        if repeated:
            raise ShapeError(f'Einsum output "{"".join(output)}" repeats label {repeated[0]}: OpenVINO infers '
                             f"its shape but cannot run it")
        notes = None
        if shape is not None and ELLIPSIS not in output:
            notes = {i: f"label {label}" for i, label in enumerate(output)}
        return [TensorType(shape, etype, notes=notes)]

    def run(self, *arrays):
        inputs, output = parse_einsum(self.attrs.equation)
        used = {label for labels in inputs for label in labels}
        spare = "".join(c for c in string.ascii_letters if c not in used)
        widest = max((a.ndim - len(labels) + 1 for labels, a in zip(inputs, arrays) if ELLIPSIS in labels), default=0)
        spare = spare[:max(widest, 0)]
        subscripts = [_explicit(labels, a.ndim, spare) for labels, a in zip(inputs, arrays)]
        out = "".join(spare if label == ELLIPSIS else label for label in output)
        dtype = arrays[0].dtype
        if dtype == np.float16:   # OpenVINO accumulates f16 in f32
            arrays = [a.astype(np.float32) for a in arrays]
        result = None
        if len(arrays) == 2 and arrays[0].dtype.kind == "f":
            result = _einsum_by_matmul(arrays[0], subscripts[0], arrays[1], subscripts[1], out)
        if result is None:
            with np.errstate(all="ignore"):   # integer products wrap, as in C++
                result = np.einsum(f"{','.join(subscripts)}->{out}", *arrays)
        return np.asarray(result, dtype=dtype)


def _einsum_by_matmul(a: np.ndarray, la: str, b: np.ndarray, lb: str, out: str) -> np.ndarray | None:
    """A two-input float Einsum as one (batched) matrix product, as OpenVINO decomposes it: labels
    of one input alone summed away first, then [batch..., left, contracted] @ [batch..., contracted,
    right] and the output's order.  None where the equation repeats a label in one term or a
    contracted label broadcasts (np.einsum then).  (np.einsum's own loop took "bhqd,bhkd->bhqk"
    over [1, 8, 256, 64] in 9.7 ms, OpenVINO 0.7.)"""
    if any(len(set(labels)) < len(labels) for labels in (la, lb, out)):
        return None
    own_a = [i for i, label in enumerate(la) if label not in lb and label not in out]
    own_b = [i for i, label in enumerate(lb) if label not in la and label not in out]
    if own_a:
        a, la = a.sum(axis=tuple(own_a)), "".join(label for i, label in enumerate(la) if i not in own_a)
    if own_b:
        b, lb = b.sum(axis=tuple(own_b)), "".join(label for i, label in enumerate(lb) if i not in own_b)
    batch = [label for label in out if label in la and label in lb]
    left = [label for label in out if label in la and label not in lb]
    right = [label for label in out if label in lb and label not in la]
    contracted = [label for label in la if label in lb and label not in out]
    if any(a.shape[la.index(label)] != b.shape[lb.index(label)] for label in contracted):
        return None
    size_a = {label: n for label, n in zip(la, a.shape)}
    size_b = {label: n for label, n in zip(lb, b.shape)}
    depth = prod(size_a[label] for label in contracted)
    a2 = a.transpose([la.index(label) for label in batch + left + contracted]).reshape(
        tuple(size_a[label] for label in batch) + (prod(size_a[label] for label in left), depth))
    b2 = b.transpose([lb.index(label) for label in batch + contracted + right]).reshape(
        tuple(size_b[label] for label in batch) + (depth, prod(size_b[label] for label in right)))
    product = np.matmul(a2, b2)
    done = batch + left + right
    product = product.reshape(product.shape[:len(batch)] + tuple(size_a[label] for label in left)
                              + tuple(size_b[label] for label in right))
    return product.transpose([done.index(label) for label in out])


# ---------------------------------------------------------------- Inverse

def lu_inverse(a: np.ndarray) -> np.ndarray:
    """Inverses of a stack of square matrices [..., n, n], in f32 as OpenVINO's reference computes them."""
    n = a.shape[-1]
    if a.size == 0:
        return a.astype(np.float32)
    u = a.reshape(-1, n, n).astype(np.float32, copy=True)
    batch = np.arange(u.shape[0])
    lower = np.zeros_like(u)
    perm = np.tile(np.arange(n), (u.shape[0], 1))
    with np.errstate(all="ignore"):
        for k in range(n):
            pivot = k + np.argmax(np.abs(u[:, k:, k]), axis=1)   # first largest, as a strict > scan
            for m in (u, lower, perm):
                row_k, row_p = m[batch, k].copy(), m[batch, pivot].copy()
                m[batch, k], m[batch, pivot] = row_p, row_k
            lower[:, k + 1:, k] = u[:, k + 1:, k] / u[:, k:k + 1, k]
            u[:, k + 1:, k:] -= lower[:, k + 1:, k:k + 1] * u[:, k:k + 1, k:]
        lower[:, np.arange(n), np.arange(n)] = 1
        # L y = P e_c for every column c at once, then U x = y.
        y = (perm[:, :, None] == np.arange(n)).astype(np.float32)
        for i in range(n):
            y[:, i] -= np.einsum("bj,bjc->bc", lower[:, i, :i], y[:, :i])
        x = np.zeros_like(y)
        for i in reversed(range(n)):
            x[:, i] = (y[:, i] - np.einsum("bj,bjc->bc", u[:, i, i + 1:], x[:, i + 1:])) / u[:, i, i:i + 1]
    return x.reshape(a.shape)


@register("Inverse", 14)
class Inverse(Op):
    """The inverse of each square matrix in the last two dims (transposed with adjoint=true)."""

    def infer(self, inputs):
        data = inputs[0]
        if data.etype is not etypes.dynamic and not data.etype.is_float:
            raise ShapeError(f"Inverse takes floating-point data, got {data.etype}")
        if data.rank is not None:
            if data.rank < 2:
                raise ShapeError(f"Inverse needs matrices (rank 2 or more), got {format_shape(data.shape)}")
            if not dims_compatible(data.shape[-1], data.shape[-2]):
                raise ShapeError(f"Inverse needs square matrices, got {format_shape(data.shape)}")
        return [data.like()]

    def run(self, data):
        # OpenVINO works in f32 for every float type.
        inverse = lu_inverse(data)
        if self.attrs.adjoint:
            inverse = np.swapaxes(inverse, -1, -2)
        return np.ascontiguousarray(inverse).astype(data.dtype)
