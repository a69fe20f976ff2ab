"""Products whose compressed weights stay compressed in memory.

An LLM exported with int4 weights (optimum-intel, NNCF) holds 4.5 bits a weight in its file; irrun
decompresses each weight once at load, to f32 (irrun/blockwise_folding.py), which is the fastest way
to run it but takes 32 bits a weight: an 8 B-parameter model's 4.5 GB become 32 GB.  OpenVINO keeps
the codes and decompresses inside its kernels.  Where the decompressed weights would not fit, a
MatMul whose weight is such a chain (`Const u4 -> Convert -> Subtract -> Multiply [-> Reshape]`, or an
f16 weight's `Convert`) keeps it as the chain, its codes read from the file as they are needed
(large 4-bit ones stay packed, irrun/weights.py), and multiplies the data by it at each call
(`CompressedProduct`):
* NNCF's decompression (an `Affine` weight) by data of up to AFFINE_MOST_ROWS rows (a decoding
  step): group by group, each group's codes times the data's group, then the group's scale and zero
  point applied to those sums; no decompressed weight is made;
* otherwise (a prompt's many rows, an f16 weight): a block of the weight's rows decompressed at a
  time by the chain's layers' own kernels, while in cache, and multiplied.

`compressed_weights` (irrun.load, `--compressed-weights`):
* "auto" (the default): decompress at load, unless the weights not yet decompressed would take more
  than AUTO_SHARE of the memory available (irrun/memory.py): then the products' weights stay
  compressed, and the load says so (`WeightsKeptCompressedWarning`);
* "decompress": always at load (a load that does not fit in memory swaps or is killed);
* "keep": always kept compressed.

The products are the same sums in another order, rounding apart: a decompressed block holds the
weight's own values; a weight [out, in] (MatMul's `transpose_b`, what PyTorch's Linear exports) gives
each block of output columns its own product; a weight [in, out] is multiplied a block of its rows at
a time and the partial products added.  A decoding step reads half a byte to a byte a weight, where
the f32 weights take 4, but works through every weight's codes at every call: the benchmark's 266
M-parameter int4 decoder step (`run.py --networks decoder_step_int4_266m`) took 206-230 ms against
66-73 decompressed, in 330 MiB against 1096, loading in 0.5 s against 2.8-3.2 (docs/performance.md,
"Memory").
"""
from __future__ import annotations

import warnings
from contextlib import nullcontext
from dataclasses import replace
from typing import NamedTuple

import numpy as np

from . import blockwise_folding, threads
from .blockwise_folding import Pending, RowChain
from .errors import IrrunWarning, UsageError
from .memory import available_memory, format_bytes

MODES = ("auto", "decompress", "keep")
# The data's rows up to which a product by an `Affine` weight is summed group by group (beyond, the
# weight decompressed a block at a time and one GEMM a block: its cost shared by the rows).
AFFINE_MOST_ROWS = 16
# Codes per block of the product group by group (2 MiB of f32: 0.57 ns a weight, against 0.66 in
# blocks of 128 Ki and 1.4 of 2 Mi).
AFFINE_BLOCK_ELEMENTS = 1 << 19
# A product runs in parts on the pool from this many weights a part, even in a network whose kernels
# run whole (irrun/threads.py, `long_parts`): with parts from 512 Ki weights the benchmark's decoder
# step (products of 256 Ki-1 Mi weights) ran level or slower (6.7-7.1 against 4.9-6.4 ms), its 266
# M-parameter version (4-64 Mi) 152-182 ms against 260-285 whole.
WEIGHTS_PER_PART = 1 << 21
# "auto" keeps the weights compressed when decompressing them would take more than this share of
# the memory available at load (the rest is for the activations, the KV cache, the process).
AUTO_SHARE = 0.75


class WeightsKeptCompressedWarning(IrrunWarning):
    """A model's compressed weights would not fit in memory decompressed: they stay compressed, and
    the products that read them work from their codes as they run (slower)."""


def check_mode(mode) -> str:
    if mode not in MODES:
        raise UsageError(f"compressed_weights={mode!r}: expected one of {', '.join(MODES)}")
    return mode


def kept_compressed(plan, steps: list, mode: str) -> set[int]:
    """The slots of the weights that stay compressed (see the module docstring): chains folded by
    rows that only `CompressedProduct`'s MatMuls read, all of them or none."""
    if mode == "decompress":
        return set()
    readers: dict[int, list[bool]] = {}
    for step in steps:
        for i, s in enumerate(step.inputs):
            if isinstance(plan.constants.get(s), RowChain):
                readers.setdefault(s, []).append(i == 1 and _product_may_keep(plan, step))
    kept = {s for s, reads in readers.items() if all(reads) and s not in plan.result_slots}
    if not kept or mode == "keep":
        return kept
    pending = sum(v.nbytes for v in plan.constants.values() if isinstance(v, Pending))
    available = available_memory()
    if pending <= AUTO_SHARE * available:
        return set()
    saved = sum(plan.constants[s].nbytes - plan.constants[s].held_bytes for s in kept)
    warnings.warn(WeightsKeptCompressedWarning(
        f"{plan.analysis.document.diagnostics.file}: decompressing its weights would take {format_bytes(pending)}, "
        f"more than {AUTO_SHARE:.0%} of the {format_bytes(available)} of memory available: the weights of "
        f"{len(kept)} MatMul layers stay compressed ({format_bytes(saved)} less), each product reading its "
        f"codes as it runs (slower; compressed_weights=\"decompress\", `--compressed-weights decompress`, "
        f"decompresses them at load)"), stacklevel=2)
    return kept


def _product_may_keep(plan, step) -> bool:
    """Whether `step` is a MatMul that `CompressedProduct` can run: f32 data times a 2-D f32 weight."""
    if step.node.layer.op_type != "MatMul" or len(step.inputs) != 2 or step.members or step.op.run_replaced() \
            or step.op.attrs.transpose_a:
        return False
    weight = plan.constants[step.inputs[1]]
    data = plan.analysis.type_of(step.node.inputs[0])
    return weight.ndim == 2 and weight.dtype == np.float32 and data is not None \
        and data.etype.carrier == np.float32 and data.rank is not None and data.rank >= 1


class Affine(NamedTuple):
    """A weight [N, K] whose value is (codes - zero point) * scale, per group of `group` inputs of
    each row: the codes' rows from `codes` ([N, K / group, group] or [N, K]), the scale and the
    scale times the zero point per group, transposed ([K / group, N], f32; no zero point: None)."""

    codes: object
    group: int
    scale: np.ndarray
    scaled_zero: np.ndarray | None


def affine_form(chain: RowChain) -> Affine | None:
    """The chain as an `Affine` weight, where its layers are NNCF's decompression: Converts (to f32:
    OpenVINO's CPU plugin computes them so, irrun/precision.py), a Subtract of a zero point, a
    Multiply by a scale (each one value per row and group, numpy broadcasting), a Reshape that
    joins the groups; else None."""
    source = chain.source
    if len(source.shape) not in (2, 3) or len(chain.shape) != 2:
        return None
    rows, group = source.shape[0], source.shape[-1]
    per_group = (rows, chain.shape[1] // group)
    zero = scale = None
    for node, flowing, args, read_constant in chain.stages:
        op_type = node.layer.op_type
        if read_constant is not None or node.types[0].etype.carrier != np.float32:
            return None
        if op_type == "Reshape":
            if scale is None or tuple(node.types[0].shape) != chain.shape:
                return None
            continue
        if op_type == "Convert":
            continue
        side = args[1 - flowing]
        if op_type not in ("Subtract", "Multiply") or node.op.mode != "numpy" or scale is not None \
                or (op_type == "Subtract" and (flowing != 0 or zero is not None)):
            return None
        grouped = _per_group(side, source.shape, per_group)
        if grouped is None:
            return None
        if op_type == "Subtract":
            zero = grouped
        else:
            scale = grouped
    if scale is None or chain.shape[1] != per_group[1] * group:
        return None
    return Affine(source, group, np.ascontiguousarray(scale.T),
                  None if zero is None else np.ascontiguousarray((scale * zero).T))


def _per_group(side, shape: tuple, per_group: tuple) -> np.ndarray | None:
    """An elementwise layer's other input, broadcast (numpy's way) against the codes' `shape`, as
    one f32 value per row and group ([N, K / group]), or None where it varies within a group."""
    if not isinstance(side, np.ndarray) or side.dtype != np.float32 or side.ndim > len(shape) \
            or (side.ndim and side.shape[-1] != 1):
        return None
    side = side.reshape((1,) * (len(shape) - side.ndim) + side.shape)
    if any(d not in (1, n) for d, n in zip(side.shape, shape)):
        return None
    return np.broadcast_to(side.reshape(side.shape[0], -1), per_group)


class CompressedProduct:
    """The op of a MatMul step whose weight stays compressed (a `RowChain`): data [..., K] times the
    weight (see the module docstring).  Never cut into halves (irrun/split_steps.py)."""

    outputs_are_new = True
    foldable = False
    whole_only = True

    def __init__(self, layer_op, affine: Affine | None):
        self.attrs = layer_op.attrs
        self.transposed = bool(layer_op.attrs.transpose_b)
        self.affine = affine if self.transposed else None

    def run_replaced(self) -> bool:
        return False

    def run(self, data: np.ndarray, weight: RowChain) -> np.ndarray:
        rows, columns = weight.shape
        inner, outer = (columns, rows) if self.transposed else (rows, columns)
        if data.shape[-1] != inner:
            raise ValueError(f"data {list(data.shape)} and a weight {list(weight.shape)} "
                             f"({'transposed' if self.transposed else 'as it is'}) do not multiply")
        flat = data.reshape(-1, inner)
        out = np.empty((flat.shape[0], outer), np.result_type(data.dtype, weight.dtype))
        if self.affine is not None and flat.shape[0] <= AFFINE_MOST_ROWS:
            return self._affine(flat, out).reshape(data.shape[:-1] + (outer,))
        step = max(1, blockwise_folding.BLOCK_ELEMENTS // columns)

        def columns_of(start: int, stop: int) -> None:       # (weight [out, in]: its rows are out's columns)
            for r in range(start, stop, step):
                end = min(r + step, stop)
                np.matmul(flat, weight.rows_at(slice(r, end)).T, out=out[:, r:end])

        def partial_sum(start: int, stop: int) -> np.ndarray:   # (weight [in, out]: its rows are terms)
            total = None
            for r in range(start, stop, step):
                end = min(r + step, stop)
                product = flat[:, r:end] @ weight.rows_at(slice(r, end))
                total = product if total is None else np.add(total, product, out=total)
            return total

        if self.transposed:
            _on_cores(columns_of, rows, weight.size, step)
        else:
            sums = _on_cores(partial_sum, rows, weight.size, step)
            np.copyto(out, sums[0])
            for more in sums[1:]:
                out += more
        return out.reshape(data.shape[:-1] + (outer,))

    def _affine(self, flat: np.ndarray, out: np.ndarray) -> np.ndarray:
        """out = flat @ W^T for an `Affine` W, summed group by group: for each group g and output n,
        the codes' dot product with the data's group (a batched product, one GEMM per group), times
        the scale, less the scale times the zero point times the sum of the data's group.  On one
        thread, codes 0-15 in groups of 32: 0.57 ns a weight, where a block decompressed by NumPy's
        passes (the zero point and scale broadcast along 32 codes at a time) and multiplied took 1.6,
        and by the layers' kernels 3.4."""
        affine = self.affine
        groups, rows = affine.scale.shape
        data = np.ascontiguousarray(flat.reshape(flat.shape[0], groups, affine.group).transpose(1, 0, 2))
        sums = data.sum(axis=2).T                          # [M, groups]
        step = max(1, AFFINE_BLOCK_ELEMENTS // (groups * affine.group))

        def columns_of(start: int, stop: int) -> None:
            for r in range(start, stop, step):
                end = min(r + step, stop)
                codes = affine.codes[r:end].reshape(end - r, groups, affine.group).astype(np.float32)
                dots = np.matmul(data, codes.transpose(1, 2, 0))                 # [groups, M, n]
                target = out[:, r:end]
                np.einsum("gmn,gn->mn", dots, affine.scale[:, r:end], out=target)
                if affine.scaled_zero is not None:
                    target -= sums @ affine.scaled_zero[:, r:end]

        _on_cores(columns_of, rows, rows * groups * affine.group, step)
        return out

    def bind(self, info):
        return self.run


def _on_cores(part, rows: int, weights: int, step: int) -> list:
    """part(start, stop) over the weight's rows in blocks of `step`, in parts of WEIGHTS_PER_PART
    weights or more on the pool (BLAS on one thread in each); the parts' results in order."""
    parts = threads.bounds(rows, threads.long_parts(weights, WEIGHTS_PER_PART, -(-rows // step)))
    with threads.single_threaded_blas() if len(parts) > 1 else nullcontext():
        return threads.run_parts(part, parts)


def compressed_product_steps(plan, steps: list) -> list:
    """`steps` with each MatMul whose weight stays compressed running `CompressedProduct`."""
    kept = getattr(plan, "products_by_rows", ())
    if not kept:
        return steps
    forms = plan.affine_weights         # (made once a plan: each variant's steps share them)
    for s in kept - forms.keys():
        forms[s] = affine_form(plan.constants[s])
    return [replace(step, op=CompressedProduct(step.op, forms[step.inputs[1]])) if step.node.layer.op_type == "MatMul"
            and len(step.inputs) == 2 and step.inputs[1] in kept and not step.members
            and step.op is step.node.op else step for step in steps]
