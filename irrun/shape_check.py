"""Dynamic shapes at run time: each step whose output size was unknown at load is checked
before it runs (its types inferred again from the actual inputs, its outputs held to the memory
limit) — once per distinct input signature, not once per call.

A step's shape inference is a function of its inputs' shapes and of the values of the small
inputs it reads (a Reshape's target, a Broadcast's shape, a Range's bounds: what it is shown,
inputs of at most `VALUE_ELEMENTS` elements).  `StepCheck` shows it values through stand-ins that
record which ones it reads, and keys its memo on the input shapes and the bytes of those values
only: a decode step whose `position_ids` change every call but whose shapes do not is checked
once, where keying on every small input's values checked it every call.  (Inference is
deterministic: on inputs that agree in everything it read, it reads the same and answers the same.)

Where shapes change at every call (a decoding step's cache grows by a token), an op's short rule
for concrete shapes answers first (`Op.quick_shapes`: an elementwise op's broadcast, a Concat's
sum, a Broadcast's target; tests/test_quick_shapes.py holds each to inference), and layers whose
kernels work their shapes out by inference's own rule and make views (`Op.checks_itself`:
Reshape, Squeeze, Unsqueeze, Transpose, Slice; and Assign, which holds its value to the
variable's shape) have no check: a decoding step of optimum-intel's tiny Llama took 1.9 -> 0.8
ms with these and the kernels' own paths for dynamic shapes.

Dynamic plans run the same fast loop as static ones (irrun/executor.py): a step that needs a
check gets its kernel wrapped by `checked`.
"""
from __future__ import annotations

from math import prod
from operator import attrgetter
from typing import Callable

from .errors import IrrunError, ModelError
from .registry import Op, TensorType
from .shapes import is_static

#: inputs up to this many elements are shown to shape inference with their values
VALUE_ELEMENTS = 64
#: checks passed, remembered per plan (layer kind and input shapes) and per kind (small values)
KINDS_KEPT = 4096
VALUES_KEPT = 8


class _Shown(TensorType):
    """A TensorType whose `value` notes that inference read it."""

    def __init__(self, shape, etype, value, reads: list, position: int):
        self.shape, self.etype, self.notes = shape, etype, None
        self._value, self._reads, self._position = value, reads, position

    @property
    def value(self):
        if self._value is not None:
            self._reads.append(self._position)
        return self._value


class StepCheck:
    """The run-time check of one step: inference again on the actual inputs, memoised; and the
    step's kernel bound again for input shapes that recur (`kernel_for`)."""

    __slots__ = ("plan", "step", "memo", "kind", "bindable", "quick", "out_etypes", "out_itemsizes", "constant")

    def __init__(self, plan, step):
        self.plan, self.step = plan, step
        # (input shapes, inputs whose values inference read, their bytes, the output types, the kernel
        # bound for them or None) of the last check: one tuple, replaced whole (threads sharing a
        # model check concurrently)
        self.memo: tuple = (None, (), (), None, None)
        # layers of one kind, attributes and input types infer alike (analysis: Node.signature): a
        # check passed by one passes for all (a decoder's layers all see the same shapes)
        node = step.node
        self.kind = None if node.signature is None or node.bodies else \
            (node.signature, tuple(t.etype.name if t is not None else None
                                   for t in (plan.analysis.type_of(src) for src in node.inputs)))
        op = step.op
        self.bindable = op is node.op and hasattr(op, "bind") and not step.members and not op.run_replaced()
        # the op's rule for concrete shapes (`Op.quick_shapes`; a fused step's own, where its op has
        # one, for the last layer's outputs), where the outputs' types are known
        own = getattr(op, "quick_shapes", None) if step.members else None
        last = step.members[-1] if own is not None else node
        out_types = list(last.types[:len(step.outputs)]) if last.types else [None]
        self.out_etypes = tuple(t.etype for t in out_types if t is not None and t.etype.carrier is not None)
        rule = own if own is not None else node.op.quick_shapes if not step.members \
            and type(node.op).quick_shapes is not Op.quick_shapes else None
        self.quick = rule if len(self.out_etypes) == len(out_types) else None
        self.out_itemsizes = tuple(e.carrier.itemsize for e in self.out_etypes)
        # inputs that are the plan's constants: the same at every call, so never compared again
        # (a norm's axes, an exponent: 1 us a check of a decoding step's steps whose shapes recur)
        self.constant = frozenset(i for i, s in enumerate(step.inputs) if s in plan.constants)

    def __call__(self, args) -> None:
        self.kernel_for(args)

    def kernel_for(self, args) -> Callable:
        """Check `args` and return the kernel to run them: the step's own, or one bound for these
        input shapes (and read values) the second time in a row a call brings them."""
        shapes = tuple(map(_SHAPE, args))
        memo = self.memo
        if shapes == memo[0] and (not memo[1] or all(args[i].tobytes() == v for i, v in zip(memo[1], memo[2]))):
            if memo[4] is not None:
                return memo[4]
            if self.bindable and memo[3] is not None:
                bound = self._bind(args, memo[3]) or self.step.kernel
                self.memo = memo[:4] + (bound,)
                return bound
            return self.step.kernel
        if self.quick is not None:
            found = self.quick(args)
            if found is not None:
                out, read = found       # (the memo keeps these shapes: `_bind` makes their types)
                limit = self.plan.memory_limit
                for shape, size in zip(out, self.out_itemsizes):
                    if prod(shape) * size > limit:
                        self.plan._check_size(self.step.node, prod(shape) * size, shape)
                self._remember(shapes, read, args, out)
                return self.step.kernel
        if self.kind is not None:
            for read, values, types in self.plan.checked_kinds.get((self.kind, shapes), ()):
                if all(args[i].tobytes() == v for i, v in zip(read, values)):
                    self._remember(shapes, read, args, types)
                    return self.step.kernel
        self._infer(args, shapes)
        return self.step.kernel

    def _infer(self, args, shapes: tuple) -> None:
        plan, node = self.plan, self.step.node
        reads: list[int] = []
        declared = [plan.analysis.type_of(src) for src in node.inputs]
        shown = [_Shown(tuple(a.shape), t.etype, a if a.size <= VALUE_ELEMENTS else None, reads, i)
                 for i, (a, t) in enumerate(zip(args, declared))]
        try:
            types = node.op.infer(shown)
        except IrrunError as exc:
            raise ModelError(exc.message, layer=node.layer.ref, file=plan.analysis.document.diagnostics.file) from None
        for t in types:
            if t is not None and is_static(t.shape) and t.etype.carrier is not None:
                plan._check_size(node, prod(t.shape) * t.etype.carrier.itemsize, t.shape)
        read = tuple(sorted(set(reads)))
        values = tuple(args[i].tobytes() for i in read)
        types = tuple(types)
        self._remember(shapes, read, args, types)
        if self.kind is not None:       # (every value read: another step of the kind has other constants)
            known = plan.checked_kinds
            if len(known) > KINDS_KEPT:
                known.clear()
            entries = known.setdefault((self.kind, shapes), [])
            if len(entries) < VALUES_KEPT:
                entries.append((read, values, types))

    def _remember(self, shapes: tuple, read: tuple, args, outputs: tuple) -> None:
        """The memo of a check passed: the values it read but the constants, to compare next time."""
        read = tuple(i for i in read if i not in self.constant)
        self.memo = (shapes, read, tuple([args[i].tobytes() for i in read]) if read else (), outputs, None)

    def _bind(self, args, outputs: tuple) -> Callable | None:
        """The op's kernel bound for these inputs (static shapes; constants as at load); `outputs`:
        their types as inference gave them, or their shapes as the op's rule did."""
        from .executor import StepInfo
        step, plan = self.step, self.plan
        types = [t if isinstance(t, TensorType) or t is None else TensorType(t, self.out_etypes[i])
                 for i, t in enumerate(outputs)]
        if not all(t is not None and is_static(t.shape) for t in types[:len(step.outputs)]):
            return None
        declared = plan.step_info(step)
        inputs = [TensorType(tuple(a.shape), t.etype, t.value) for a, t in zip(args, declared.inputs)]
        info = StepInfo(inputs, [TensorType(t.shape, t.etype) for t in types[:len(step.outputs)]],
                        step.consumable, step.used or declared.used)
        try:
            return step.op.bind(info)
        except Exception:  # noqa: BLE001 - a kernel bound for load-time types is still there
            return None


def checked(check: StepCheck, spread: bool) -> Callable:
    """The step's kernel behind `check` (the fast loop's calling convention: spread arguments, or
    the one argument itself)."""
    kernel_for = check.kernel_for
    if spread:
        def run(*args):
            return kernel_for(args)(*args)
    else:
        def run(arg):
            return kernel_for((arg,))(arg)
    run.kernel_for = kernel_for     # (irrun/fast_loop.py calls it itself: a call fewer a step)
    return run


_SHAPE = attrgetter("shape")
