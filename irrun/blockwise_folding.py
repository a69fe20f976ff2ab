"""Large constants folded at load in blocks of rows, each written once, where it is to live.

A compressed LLM weight is decompressed by a chain of layers the plan folds at load (NNCF's
`Const u4 -> Convert -> Subtract(zero point) -> Multiply(scale) -> Reshape`, irrun/compression.py).
Folded layer by layer, each layer makes a new array of the whole weight, and the weight is then
copied again: into the layout its GEMM runs fastest with (irrun/optimize.py), beside its siblings
(irrun/sibling_products.py), onto huge pages (irrun/huge_pages.py).  A 266M-parameter int4
decoder touched about 4 GiB of fresh memory so, and loaded in 3.7 s where OpenVINO takes 0.9.

Here such a chain is a recipe, `RowChain`, until its destination is known: then each block of
rows is computed through all of its layers while in cache and written once, in the layout the
destination has.  The layers' own kernels compute each block (an elementwise op's value at a
position depends on its inputs there alone; a Reshape that keeps the leading axis keeps each
row's values in the row), so the values are those of the layers folded one by one, bit for bit.

A chain is what the plan folds through layers of `ROW_WISE` types from one large constant
(`SMALLEST_ELEMENTS`), each one's value read by the next alone.  Whatever reads a chain's value
otherwise gets it as an array (`value`), but a table only Gathers read (an LLM's compressed
embeddings): they compute the rows they ask for (`GatheredRows`).  `copy_into` is the same
writing for arrays: a copy that changes the layout, in strips of rows (NumPy's own transposing
copy takes 5.7 ns an element, in strips 1.1).
"""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Callable

import numpy as np

from . import threads
from .weights import ROWS_AS_ASKED_FROM

#: Ops whose folded value a chain computes a block of rows at a time.
ELEMENTWISE = frozenset({"Convert", "Subtract", "Multiply", "Add"})
ROW_WISE = ELEMENTWISE | {"Reshape"}
#: A chain starts at a constant of this many elements or more (smaller ones fold as before): the
#: size from which 4-bit Consts are read by rows, for chains to start from.
SMALLEST_ELEMENTS = ROWS_AS_ASKED_FROM
# A block of rows holds about this many elements (each layer's temporaries stay in the core's L2).
BLOCK_ELEMENTS = threads.PASS_BLOCK_ELEMENTS
# Rows written at a time into a destination of another layout: a strip's row ends are then
# whole 64-byte lines of f32 (16 rows 1.1 ns an element; 8: 2.0, 64: 2.9).
STRIP_ROWS = 16


class Pending:
    """A constant's value not yet computed, where the plan decides where a weight goes: it answers
    as the array `value()` would give (`shape`, `dtype`, `ndim`, `size`, `nbytes`, `flags`), and
    `write_into(dest)` computes it into `dest`, any array of its shape (a transposed view, a part
    of a joined weight, a place on huge pages)."""

    shape: tuple[int, ...]
    dtype: np.dtype

    def write_into(self, dest: np.ndarray) -> None:
        raise NotImplementedError

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def flags(self):
        return SimpleNamespace(c_contiguous=True, f_contiguous=sum(d > 1 for d in self.shape) <= 1)

    def value(self) -> np.ndarray:
        """The value as an array of its own (C order)."""
        out = np.empty(self.shape, self.dtype)
        self.write_into(out)
        return out


class PackedConstant(Pending):
    """A large 4-bit Const the plan holds as its `PackedRows` (irrun/weights.py): a chain folded by
    rows may start from it, decompressing it block by block; anything else reads it whole."""

    def __init__(self, packed):
        self.packed, self.shape, self.dtype = packed, packed.shape, packed.dtype

    def write_into(self, dest: np.ndarray) -> None:
        dest[...] = self.packed.decoded()

    def value(self) -> np.ndarray:
        return self.packed.decoded()


class RowChain(Pending):
    """The value of a chain of row-wise layers folded from one large constant (see the module
    docstring)."""

    def __init__(self, source: np.ndarray, located: Callable, release: Callable | None):
        self._source = source
        self._stages: list[tuple] = []     # (node, flowing input index, args as read, read_constant)
        self._located = located            # (node, exception, args) -> the error to raise
        self._release = release
        # originals to let go once the value is written (a 4-bit source read by rows: its file pages)
        self.release_after: list = [] if isinstance(source, np.ndarray) else [source]
        self.first_row: np.ndarray | None = None
        self.shape = tuple(source.shape)

    def extended(self, node, flowing: int, args: list, read_constant) -> "RowChain":
        """This chain followed by `node`'s layer, its value flowing in as input `flowing` (the
        other `args` whole, as read); its first row computed now, so that a kernel's failure is
        reported as the layer folds."""
        chain = RowChain(self._source, self._located, self._release)
        chain._stages = self._stages + [(node, flowing, args, read_constant)]
        chain.release_after = self.release_after
        chain.shape = tuple(node.types[0].shape)
        chain.first_row = chain._rows(0, 1)
        return chain

    @property
    def dtype(self) -> np.dtype:
        return self.first_row.dtype

    @property
    def source(self):
        """The large constant the chain starts from (a `PackedRows` where read by rows)."""
        return self._source

    @property
    def stages(self) -> list[tuple]:
        """Its layers, in order: (node, the input its value flows into, the other inputs as read,
        read_constant)."""
        return self._stages

    @property
    def held_bytes(self) -> int:
        """What the recipe holds: its source (packed, where read by rows) and its layers' other inputs."""
        source = self._source
        total = source.nbytes if isinstance(source, np.ndarray) else source.row_bytes * source.shape[0]
        return total + sum(a.nbytes for _, _, args, _ in self._stages for a in args if isinstance(a, np.ndarray))

    def _rows(self, start: int, stop: int) -> np.ndarray:
        return self.rows_at(slice(start, stop))

    def rows_at(self, rows) -> np.ndarray:
        """The value's rows `rows` (a slice, or an array of row numbers in range)."""
        x = self._source[rows]
        count = len(x)
        whole = self._source.shape
        for node, flowing, args, read_constant in self._stages:
            if read_constant is not None:
                x = read_constant(node, flowing, x)
            if node.layer.op_type != "Reshape":
                block = [x if i == flowing else _rows_of(a, x.ndim, rows) for i, a in enumerate(args)]
                try:
                    out = node.op.run(*block)
                except Exception as exc:  # noqa: BLE001 - reported at its layer, as the plan's folding does
                    shown = [SimpleNamespace(shape=whole) if i == flowing else a for i, a in enumerate(args)]
                    raise self._located(node, exc, shown) from None
                x = out[0] if isinstance(out, tuple) else out
            whole = tuple(node.types[0].shape)
            x = x.reshape((count,) + whole[1:])
        return x

    def write_into(self, dest: np.ndarray) -> None:
        """The value computed into `dest` (its shape), block by block, the blocks on every core."""
        _write_by_rows(dest, self._rows, _across(dest))
        self.let_go()

    def value(self) -> np.ndarray:
        """The value as an array of its own: a chain of one layer computes it whole, as that layer
        does (blocks would add a copy of each, f16 ResNet-18's weights converted to f32 +7% load)."""
        if len(self._stages) > 1:
            return super().value()
        whole = self._rows(0, self.shape[0])
        self.let_go()
        return whole

    def let_go(self) -> None:
        """Its originals released (their mapped pages leave memory; read again, they come back from
        the file): the value is written, or a Winograd layer has transformed it (`filters_by_rows`)."""
        if self._release is not None:
            for original in self.release_after:
                self._release(original)
        self.release_after.clear()


def _rows_of(a, ndim: int, rows):
    """Side input `a`'s part for output rows `rows` of an elementwise layer of rank `ndim` (whole
    where it broadcasts along the leading axis)."""
    if not isinstance(a, np.ndarray) or a.ndim < ndim or a.shape[0] == 1:
        return a
    return a[rows]


def may_start(node, value) -> bool:
    """Whether a chain folded by rows may start at `node` from its constant input `value`: a large
    one, through a layer that computes (arithmetic, a Convert to another type), not one that hands
    its input on as it is (a Reshape, a Convert to the type it has: the f32 weights of an f16 IR,
    widened as they are read), unless it is a 4-bit Const read by rows (nf4's f32 codebook values
    converted to f16, which irrun carries in f32)."""
    if not isinstance(value, (np.ndarray, PackedConstant)) or value.size < SMALLEST_ELEMENTS or value.ndim < 1:
        return False
    op_type = node.layer.op_type
    if isinstance(value, PackedConstant):
        return True
    if op_type == "Convert":
        return node.op.attrs.destination_type.carrier != value.dtype
    return op_type != "Reshape"


def flowing_input(node, args: list) -> int | None:
    """The input of a `ROW_WISE` layer a value may flow through by rows: one of its output's shape
    and rows (the others broadcast to it whole, or row for row); None where the layer is not
    row-wise for these inputs."""
    op_type = node.layer.op_type
    out = node.types[0] if node.types and len(node.types) == 1 else None
    if op_type not in ROW_WISE or out is None or out.shape is None or not out.shape \
            or not all(isinstance(d, int) for d in out.shape) \
            or not all(isinstance(a, (np.ndarray, RowChain, PackedConstant)) for a in args):
        return None
    shape = tuple(out.shape)
    rows = shape[0]
    if op_type == "Reshape":
        data = args[0]
        return 0 if data.ndim >= 1 and data.shape[0] == rows and rows > 1 else None
    if op_type == "Convert":
        return 0 if tuple(args[0].shape) == shape else None
    candidates = [i for i, a in enumerate(args) if tuple(a.shape) == shape]
    if not candidates or len(args) != 2:
        return None
    pending = [i for i in candidates if isinstance(args[i], RowChain)]
    flowing = pending[0] if pending else candidates[0]
    side = args[1 - flowing]
    if side.ndim > len(shape) or (side.ndim == len(shape) and side.shape[0] not in (1, rows)):
        return None
    return flowing


def _across(dest: np.ndarray) -> bool:
    """Whether `dest` is laid out across its rows (a transposed view: each row a comb)."""
    return dest.ndim == 2 and dest.shape[0] > 1 and dest.shape[1] > 1 and dest.strides[0] < dest.strides[1]


def _write_by_rows(dest: np.ndarray, rows_of: Callable[[int, int], np.ndarray], across: bool) -> None:
    """dest[i:j] = rows_of(i, j) over all of dest's rows, in blocks of about BLOCK_ELEMENTS, the
    blocks in parts on every core; where `across`, each block written in strips of STRIP_ROWS."""
    rows = dest.shape[0]
    size = int(np.prod(dest.shape, dtype=np.int64))
    step = max(BLOCK_ELEMENTS // max(size // max(rows, 1), 1), 1)
    if across:
        step = max(step // STRIP_ROWS, 1) * STRIP_ROWS

    def part(start: int, stop: int) -> None:
        for r in range(start, stop, step):
            block = rows_of(r, min(r + step, stop))
            if not across:
                dest[r:r + len(block)] = block
                continue
            for at in range(0, len(block), STRIP_ROWS):
                dest[r + at:r + min(at + STRIP_ROWS, len(block))] = block[at:at + STRIP_ROWS]

    parts = threads.parts_for(size)
    threads.run_parts(part, threads.bounds(rows, parts) if rows >= parts * step else [(0, rows)])


def copy_into(dest: np.ndarray, source: np.ndarray) -> None:
    """`dest[...] = source` for two arrays of one shape, on every core; where `dest` is laid out
    across the rows `source` holds (a transposed copy), in strips of rows."""
    if source.ndim != 2 or source.size < SMALLEST_ELEMENTS:
        dest[...] = source
        return
    _write_by_rows(dest, lambda i, j: source[i:j], _across(dest) and not _across(source))


def write_weight(dest: np.ndarray, value) -> None:
    """A constant's value (an array or a `Pending` one) written into `dest`, an array of its shape."""
    if isinstance(value, Pending):
        value.write_into(dest)
    else:
        copy_into(dest, value)


class GatheredRows:
    """The op of a Gather step whose table is a chain folded by rows that nothing else reads (an
    LLM's compressed embeddings, `Const u8 -> Convert -> Subtract -> Multiply -> Gather`, as
    OpenVINO's GatherCompressed): the rows asked for are computed at each call, the table never
    (a 32000 x 2048 table: 250 MiB of f32 not made).  Integer indices, a constant axis 0, no batch
    dims; an index outside [-n, n-1] gives zeros, as Gather's.  Never cut into halves
    (irrun/split_steps.py)."""

    outputs_are_new = True
    foldable = False
    whole_only = True

    def __init__(self, layer_op):
        self.attrs = layer_op.attrs

    def run_replaced(self) -> bool:
        return False

    def run(self, table: RowChain, indices: np.ndarray, axis=None) -> np.ndarray:
        n = table.shape[0]
        flat = indices.reshape(-1)
        if flat.dtype.kind == "u":
            inside = flat < n
            rows = table.rows_at(np.where(inside, flat, 0).astype(np.int64))
        else:
            flat = flat.astype(np.int64, copy=False)
            inside = (flat >= -n) & (flat < n)
            rows = table.rows_at(np.where(inside, flat % n, 0))
        if not inside.all():
            rows[~inside] = 0
        return rows.reshape(indices.shape + table.shape[1:])

    def bind(self, info):
        return self.run


def gathers_rows(plan, step) -> bool:
    """Whether `step` is a Gather of rows (constant axis 0, no batch dims, integer indices) from a
    table the plan holds as a chain folded by rows."""
    if step.node.layer.op_type != "Gather" or len(step.inputs) != 3 or step.op.run_replaced() \
            or (step.op.attrs.get("batch_dims") or 0) != 0:
        return False
    axis = plan.constants.get(step.inputs[2])
    indices = plan.analysis.type_of(step.node.inputs[1])
    return isinstance(plan.constants.get(step.inputs[0]), RowChain) and isinstance(axis, np.ndarray) \
        and axis.size == 1 and int(axis.reshape(-1)[0]) == 0 and indices is not None \
        and indices.etype.carrier is not None and indices.etype.carrier.kind in "iu"


def tables_gathered_by_rows(plan, steps: list) -> set[int]:
    """The slots of chains folded by rows that only such Gathers read (`gathers_rows`): left as
    chains, their steps made `GatheredRows` (`gathered_rows_steps`)."""
    return _chains_read_only(plan, steps, lambda step, i: i == 0 and gathers_rows(plan, step))


def filters_by_rows(plan, steps: list) -> set[int]:
    """The slots of chains folded by rows that only convolutions read as a filter they transform
    for Winograd (`transforms_filter_by_rows`: a block of output channels at a time, ops/winograd.py):
    left as chains, their whole values never made.  An f16-compressed network's 3x3 weights
    (`Const f16 -> Convert`, what `openvino.save_model` writes by default), or an int8 one's."""
    def transformed(step, i: int) -> bool:
        by_rows = getattr(step.op, "transforms_filter_by_rows", None)
        return i == 1 and by_rows is not None and by_rows(plan.step_info(step))
    return _chains_read_only(plan, steps, transformed)


def _chains_read_only(plan, steps: list, reads: Callable) -> set[int]:
    """The slots of chains folded by rows (not results) whose every reader, (step, input position),
    `reads` so."""
    chains = {s for s, v in plan.constants.items() if isinstance(v, RowChain) and s not in plan.result_slots}
    readers: dict[int, list[bool]] = {}
    for step in steps if chains else ():
        for i, s in enumerate(step.inputs):
            if s in chains:
                readers.setdefault(s, []).append(reads(step, i))
    return {s for s in chains if readers.get(s) and all(readers[s])}


def gathered_rows_steps(plan, steps: list) -> list:
    """`steps` with each Gather from a table left as a chain running `GatheredRows`."""
    tables = getattr(plan, "tables_by_rows", ())
    if not tables:
        return steps
    return [replace(step, op=GatheredRows(step.op)) if step.inputs and step.inputs[0] in tables
            and not step.members and step.op is step.node.op else step for step in steps]
