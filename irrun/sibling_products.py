"""One row of data times several constant weights (an LLM decoding step's q, k and v projections
of one hidden state), as one GEMV: the weights are joined side by side at load, and the first of
the products to run in an inference computes the row's products by all of them at once.

Each layer's step still makes its own output: its columns of the joined product, a slice no
other output overlaps.  A step finds the joined product computed for its own data (the same
array, read by no step in between that may overwrite it: the data lives until the last of them)
and not yet taken by itself, else computes it; the last step to take it lets it go, so nothing
is kept from one inference to the next.  A step that runs apart from the others (in a watched
run's variant, or one process of a pair) computes the product itself.

The joined weight is held as one row of products streams it best (`matrix.one_row_reads_out_in`
on the joined shape: [in, out] rows for the widening q, k and v projections).  The layers'
own weight slots keep their values as views of it, for what reads the folded constants (dumps,
comparisons) and for a step run apart.  Measured on an AMD EPYC of family 19h with the rest of
a decoding step's 17 MiB of weights around them: q, k and v of 256 channels 57 -> 37 us a layer,
the step 0.87 of its time; alone, three 512 x 512 weights 147 -> 70 us, 1024 x 1024 377 -> 267,
2048 x 2048 1336 -> 1086.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .blockwise_folding import Pending, write_weight
from .ops.matrix import one_row_reads_out_in


@dataclass
class JoinedWeight:
    """Weights of one-row products of the same data, joined: the plan's `slot` holds them side by
    side, [k, total] ([in, out] rows), or [total, k] where `out_in`; `columns` are each member's
    outputs in the joined product, `weight_slots` each member's own weight slot, `transposed`
    whether it reads its weight [out, in] (transpose_b)."""

    slot: int
    k: int
    out_in: bool
    columns: list[tuple[int, int]] = field(default_factory=list)
    weight_slots: list[int] = field(default_factory=list)
    transposed: list[bool] = field(default_factory=list)

    def view_members(self, plan) -> None:
        """Each member's weight slot holding its part of the joined weight, as its layer reads it."""
        joined = plan.constants[self.slot]
        for (a, b), s, transposed in zip(self.columns, self.weight_slots, self.transposed):
            in_out = joined[a:b].T if self.out_in else joined[:, a:b]
            plan.constants[s] = in_out.T if transposed else in_out


def join_sibling_weights(plan, steps: list, release=None) -> dict[str, tuple[JoinedWeight, int]]:
    """Join the weights of the one-row MatMul steps that share their data (see the module
    docstring): each in a slot of its own, a value written where the plan puts it (irrun/
    huge_pages.py), the members' weight slots made views of it then (`view_members`).  Returns
    {layer id: (joined weight, the layer's place among its members)}, also kept as
    `plan.joined_weights`; `plan.joined_weight_slots` holds the members' weight slots (which
    irrun/optimize.py and irrun/huge_pages.py leave as they are)."""
    from .optimize import gemm_data_rows, slot_readers
    readers = slot_readers(plan, steps)
    by_data: dict[tuple, list] = {}
    for step in steps:
        weight = _joinable_weight(plan, step, readers, gemm_data_rows)
        if weight is not None:
            transposed = bool(step.op.attrs.transpose_b)
            by_data.setdefault((step.inputs[0], weight.dtype.str, weight.shape[transposed]), []).append(
                (step, weight.shape[1 - transposed], transposed))
        del weight
    found: dict[str, tuple[JoinedWeight, int]] = {}
    plan.joined_weight_slots = set()
    for (_, dtype, k), members in by_data.items():
        if len(members) < 2:
            continue
        total = sum(n for _, n, _ in members)
        out_in = one_row_reads_out_in(k, total, k * total * np.dtype(dtype).itemsize)
        slot = plan.slot_of[(members[0][0].node.id, "joined")] = len(plan.slot_of)
        joined = JoinedWeight(slot, k, out_in)
        joined_value = _JoinedValue((total, k) if out_in else (k, total), np.dtype(dtype), out_in, release)
        at = 0
        for i, (step, n, transposed) in enumerate(members):
            joined_value.members.append((at, at + n, transposed, plan.constants.pop(step.inputs[1])))
            joined.columns.append((at, at + n))
            joined.weight_slots.append(step.inputs[1])
            joined.transposed.append(transposed)
            plan.joined_weight_slots.add(step.inputs[1])
            found[step.node.id] = (joined, i)
            at += n
        plan.constants[slot] = joined_value
    plan.joined_weights = found
    return found


class _JoinedValue(Pending):
    """A joined weight's value, written where the plan puts it (irrun/huge_pages.py), each member
    into its part and let go (a large model's weights are never held twice over: an LLM's q, k
    and v decompressed to f32, one after the other)."""

    def __init__(self, shape: tuple[int, int], dtype: np.dtype, out_in: bool, release):
        self.shape, self.dtype, self.out_in, self._release = shape, dtype, out_in, release
        self.members: list[tuple] = []        # (first column, end, read transposed, weight)

    def write_into(self, dest: np.ndarray) -> None:
        while self.members:
            a, b, transposed, weight = self.members.pop(0)
            part = dest[a:b] if self.out_in else dest[:, a:b]
            write_weight(part if self.out_in == transposed else part.T, weight)
            if self._release is not None:
                self._release(weight)
            del weight


def _joinable_weight(plan, step, readers: dict, gemm_data_rows):
    """The constant weight of a MatMul step of one row of float data that it alone reads, else None."""
    if step.node.layer.op_type != "MatMul" or len(step.inputs) != 2 or step.op.run_replaced() \
            or step.op.attrs.transpose_a or readers.get(step.inputs[1]) != 1 or gemm_data_rows(plan, step) != 1 \
            or step.inputs[1] in getattr(plan, "products_by_rows", ()):
        return None
    weight = plan.constants.get(step.inputs[1])
    data = plan.analysis.type_of(step.node.inputs[0])
    if not isinstance(weight, (np.ndarray, Pending)) or weight.ndim != 2 or weight.dtype not in (np.float32, np.float64) \
            or data is None or data.etype.carrier != weight.dtype:
        return None
    return weight


class _Taken:
    """A variant's joined product in flight: (data, product, members that took it), or None."""

    __slots__ = ("current",)

    def __init__(self):
        self.current = None


class SiblingProduct:
    """The op of a joined weight's member step: its columns of the joined product (see the module
    docstring).  Never cut into halves (irrun/split_steps.py)."""

    outputs_are_new = True     # (a slice of the product that no other output overlaps)
    foldable = False
    whole_only = True

    def __init__(self, layer_op, plan, joined: JoinedWeight, index: int, taken: _Taken):
        self.plan, self.joined, self.index, self.taken = plan, joined, index, taken
        self.attrs = layer_op.attrs

    def run_replaced(self) -> bool:
        return False

    def run(self, x, w):
        return self.bind(None)(x, w)

    def bind(self, info):
        joined, index, taken = self.joined, self.index, self.taken
        weight = self.plan.constants[joined.slot]
        a, b = joined.columns[index]
        members, k = len(joined.columns), joined.k
        dot = np.dot
        out_in = joined.out_in

        def kernel(x, w):
            current = taken.current
            if current is None or current[0] is not x or index in current[2]:
                row = x.reshape(k)
                product = dot(weight, row) if out_in else dot(row, weight)
                taken.current = (x, product, {index})
            else:
                product = current[1]
                current[2].add(index)
                if len(current[2]) == members:
                    taken.current = None
            return product[a:b].reshape(x.shape[:-1] + (b - a,))
        return kernel


def sibling_steps(plan, steps: list) -> list:
    """`steps` with each joined weight's member steps running `SiblingProduct` (one shared product
    per joined weight for this variant)."""
    found = getattr(plan, "joined_weights", None)
    if not found:
        return steps
    taken: dict[int, _Taken] = {}
    out = []
    for step in steps:
        member = found.get(step.node.id)
        if member is None or step.members or step.op is not step.node.op:
            out.append(step)
            continue
        joined, index = member
        shared = taken.setdefault(joined.slot, _Taken())
        out.append(replace(step, op=SiblingProduct(step.op, plan, joined, index, shared)))
    return out
