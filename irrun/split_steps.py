"""Which steps of a plan run in halves on two processes (irrun/process_pair.py), and how each
half is computed.

A step splits where each row of its output (along one axis) depends only on the same rows of its
data: a MatMul's rows or batches, softmax's and a layer norm's rows, an elementwise chain's
elements; a product by a constant weight along the weight's columns (weight first, column-major,
for few rows (one: a classifier's) or a weight held [out, in]; else row-major, from COLUMNS_FROM
output columns); a convolution along its output rows or its output channels, each half with a
kernel of its own (irrun/convolution_halves.py; a Winograd layer along its channels in two
phases, the tiles' transforms shared); a max pool and the layers after it that commute
with it along the channels, and a max or average pool alone so; a Concat along an axis other than
its own; a bidirectional recurrent sequence along its directions.
`splits_of` says which steps of a plan split, or that the plan runs in one process.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Callable

import numpy as np

from .convolution_halves import CONVOLUTIONS, convolution_cut, pooled_convolution_cut, with_attrs

# a split step's estimated work (multiply-adds, or elements x passes) below which it runs whole
# in both processes: a half's hand-off and its slicing cost 3-5 us.  (2^16: BERT's and the ViT's
# layer norms split too, where the step before them was cut the same way
# (`_reading_their_own_rows`): BERT 0.971-0.979 of its time against 2^18, the ViT 0.976-0.985,
# the others level)
MIN_SPLIT_WORK = 1 << 16
MIN_SPLIT_MACS = 1 << 18
# the share of the network's multiply-adds the split steps must hold
MIN_SPLIT_SHARE = 0.8
# Output columns from which a product of more rows by a constant [in, out] weight is cut along its
# columns row-major (`_columns_split`), not along its rows: BERT's 256-column products so
# 0.976-0.990 of its time; the ViT's 192-column ones (halves of 96) made it 1.037-1.046x slower,
# its 768-column up-projections alone level (30 alternating blocks in one process each)
COLUMNS_FROM = 256
# Rows of data (all leading axes) up to which a product by a constant weight is cut along the
# weight's columns: each process reads half of the weight (a transformer at sequence 17, batch 2:
# halves of its 34 rows took 0.65-0.7 of the whole product's time, halves of the columns 0.52)
FEW_ROWS = 64

_UNSHAREABLE = frozenset({"ReadValue", "Assign", "RandomUniform", "Multinomial"})
_ROW_WISE = {"Softmax": 4.0, "LogSoftmax": 4.0, "MVN": 4.0}
_ELEMENTWISE_BINARY = frozenset({"Add", "Subtract", "Multiply", "Divide", "Maximum", "Minimum"})
_ELEMENTWISE_UNARY = frozenset({"Relu", "Gelu", "Swish", "Sigmoid", "Tanh", "HSwish", "HSigmoid",
                                "Mish", "Exp", "Erf", "Clamp", "Sqrt", "Abs", "Negative"})


@dataclass
class Split:
    """A step run in halves: `compute(inputs, destination)` on each half's views of them."""

    position: int                   # its entry in the program
    shape: tuple                    # the rows' shape: the output before any trailing Reshape
    final_shape: tuple              # the output's shape
    axis: int                       # the axis cut in two
    sliced: dict                    # step input position -> the axis of it cut alongside
                                    # (its halves: views, of any strides, of each operand and the buffer)
    compute: Callable               # compute(inputs of half h, destination of half h)
    offset: int = 0                 # in the arena
    nbytes: int = 0
    by_columns: bool = False        # its buffer holds the rows' shape column-major (a weight-first GEMM's)
    channels_last: bool = False     # its buffer holds [N, spatial..., C], seen as [N, C, spatial...] (a
                                    # 1x1 layer's output for the depthwise layer that reads it so)
    middle: int | None = None       # where the halves meet along `axis` (None: in the middle)
    # (compute of the first half, of the second) where they differ (a convolution's halves of the
    # filter, each with a kernel bound to it); `compute` is then unused
    computes: tuple | None = None
    outputs: int = 1                # the step's outputs: the first is the split one, the others unread
    # (compute of the first half, of the second) cut at another middle, a multiple of `granule`
    # (None where it cannot be cut there), for a split whose `computes` are bound to their middle;
    # a split by `compute` is cut anywhere, one by `computes` and no `computes_at` only at `middle`
    computes_at: Callable[[int], tuple | None] | None = None
    granule: int = 1
    work: int = 1                   # its multiply-adds, else its output's elements: its weight in a run
    # a Winograd layer's two phases (irrun/convolution_halves.py's TwoPhase): each half's first
    # phase (`two_phase.firsts(middle)`) runs before either half's `computes`, both processes then
    # waiting for each other, and writes the scratch memory the pair gives it
    two_phase: object | None = None

    @property
    def movable(self) -> bool:
        """Whether it can be cut elsewhere than at `middle`."""
        return self.computes is None or self.computes_at is not None

    def halves_at(self, middle: int) -> tuple | None:
        """(the middle, computes or None) of this split cut at `middle`, None where it cannot be."""
        n = self.shape[self.axis]
        if middle == self.middle or (self.middle is None and middle == n // 2):
            return middle, self.computes
        if not 0 < middle < n or middle % self.granule:
            return None
        if self.computes is None:
            return middle, None
        if self.computes_at is None:
            return None
        computes = self.computes_at(middle)
        return None if computes is None else (middle, computes)


def _rows_axis(shape: tuple, among: list[int] | None = None) -> int | None:
    """The axis cut in halves: of the axes before the last (or of `among`), the one of size above 1
    that halves most evenly (the outermost of those that do): a ViT's 3 heads of 197 queries are cut
    along the queries, BERT's 4 heads of 128 along the heads."""
    if among is not None:
        axes = [a for a in among if shape[a] > 1]
    else:
        axes = [a for a, n in enumerate(shape[:-1]) if n > 1] or ([0] if len(shape) == 1 and shape[0] > 1 else [])
    if not axes:
        return None
    return min(axes, key=lambda a: (shape[a] % 2 / shape[a], a))


def _broadcast_axis(side_shape: tuple, shape: tuple, axis: int) -> int | None | bool:
    """Where an operand broadcasting to `shape` is cut alongside `axis`: its axis (cut), None (read
    whole: it does not vary along `axis`), False (it broadcasts otherwise: not splittable)."""
    if len(side_shape) > len(shape):
        return False
    at = axis - (len(shape) - len(side_shape))
    if at < 0 or side_shape[at] == 1:
        return None
    return at if side_shape[at] == shape[axis] else False


def _matmul_slices(op, a_shape: tuple, b_shape: tuple, out_shape: tuple, axis: int, b_constant: bool):
    """{input: axis} for a MatMul whose output is cut along `axis`, or None where rows of output do
    not come from rows of its inputs alone."""
    rank = len(out_shape)
    if len(a_shape) != rank or axis >= rank - 1 or (op.attrs.transpose_a and axis >= rank - 2):
        return None
    sliced = {0: axis}
    if axis < rank - 2 and len(b_shape) == rank and b_shape[axis] != 1:
        if b_constant or b_shape[axis] != out_shape[axis]:
            return None
        sliced[1] = axis
    return sliced


def _matmul_compute(transpose_a: bool, transpose_b: bool) -> Callable:
    """compute(args, out) of a MatMul's rows (or batches): the product written into the arena."""
    matmul = np.matmul

    def compute(args, out):
        a, b = args[0], args[1]
        if transpose_a:
            a = a.swapaxes(-1, -2)
        if transpose_b:
            b = b.swapaxes(-1, -2)
        matmul(a, b, out=out)
    return compute


def _row_wise_compute(plan, step, kind: str) -> Callable | None:
    """compute(args) -> rows (a new array), or compute(args, out) writing them, for a row-wise layer;
    (function, writes) or None."""
    op = step.op
    data = plan.step_info(step).inputs[0]
    if data is None or data.shape is None:
        return None
    rank = len(data.shape)          # (a half has the whole's rank: its axes are known here)
    if kind == "Softmax":
        from .ops.activation import _softmax_into
        axis = op.attrs.axis % rank

        def softmax(args, out):
            _softmax_into(args[0], out, axis)
        return softmax, True
    if kind == "MVN" and len(step.inputs) == 2:
        from .ops.normalization import _mvn
        from .ops.reduction import normalized_axes
        axes_value = plan.constants.get(step.inputs[1])
        if axes_value is None:
            return None
        attrs = op.attrs
        reduced = normalized_axes(axes_value, rank, "MVN axis")
        variance, eps, inside = attrs.normalize_variance, attrs.eps, attrs.eps_mode == "inside_sqrt"

        def mvn(args):
            return _mvn(args[0], reduced, variance, eps, inside)
        return mvn, False
    ufunc = getattr(op, "compute", None)
    if kind in _ELEMENTWISE_BINARY and isinstance(ufunc, np.ufunc) and getattr(op, "mode", None) == "numpy":
        # written into the arena: the product into a new array and its copy there took a half
        # longer than the whole (EfficientNet-B0's squeeze-excite scalings: halves of 54, 61 and
        # 71 us, now 20, 38 and 46; the network within noise, 0.997)
        def binary(args, out):
            ufunc(args[0], args[1], out=out)
        return binary, True
    into = op.into_for(np.dtype(np.float32)) if kind in _ELEMENTWISE_UNARY and hasattr(op, "into_for") else None
    if into is not None:
        def unary(args, out):
            into(args[0], out)
        return unary, True
    run = op.run
    return (lambda args: run(*args)), False


def _split_step(plan, k: int, step) -> Split | None:
    """The split form of program entry k, or None where it runs whole in both processes."""
    from .optimize import FusedChain, _chain, _layer_step        # (optimize imports the executor's layer)
    info = plan.step_info(step)
    if step.node.layer.op_type in _RECURRENT_SEQUENCES and not step.members:
        return _directions_split(plan, k, step, info)
    if step.node.layer.op_type in _POOLS_AND_CONCAT and not step.members:
        return _pool_or_concat_split(plan, k, step, info)
    if len(step.outputs) != 1 or info.outputs[0] is None or getattr(_layer_step(step).op, "whole_only", False):
        return None
    op = step.op
    if step.members and (not isinstance(op, FusedChain) or op.head_step.members):
        return None     # (several layers run by a kernel of their own, irrun/layer_groups.py: whole)
    final = op.nodes[-1].types[0] if isinstance(op, FusedChain) else info.outputs[0]
    if not _static_f32(final):
        return None
    shapes = [t.shape if t is not None else None for t in info.inputs]
    if any(s is None or not all(isinstance(n, int) for n in s) for s in shapes):
        return None
    constant = [s in plan.constants for s in step.inputs]
    if isinstance(op, FusedChain):
        return _split_chain(plan, k, step, op, final, info, shapes, constant, _chain)
    kind = step.node.layer.op_type
    shape = tuple(final.shape)
    axis = _rows_axis(shape)
    if not _all_f32(info):
        return None
    if kind in CONVOLUTIONS:
        if _step_macs(plan, step) < MIN_SPLIT_MACS:
            return None
        cut = convolution_cut(plan, step, shape)
        if cut is None:
            return None
        copyto = np.copyto

        def computing(kernel):
            return lambda args, out: copyto(out, kernel(args))
        return _convolution_split(k, shape, shape, {}, cut, computing,
                                  channels_last=getattr(op, "channels_last_output", False))
    if kind == "MatMul" and len(step.inputs) == 2:
        depth = shapes[0][-2 if op.attrs.transpose_a else -1]
        if prod(shape) * depth < MIN_SPLIT_MACS:
            return None
        if constant[1] and len(shapes[1]) == 2 and not op.attrs.transpose_a and shape[-1] >= 2 \
                and _by_columns(plan.constants[step.inputs[1]], op.attrs.transpose_b, prod(shape[:-1])):
            return _columns_split(k, None, [], [None], shapes, shape, shape, None, step, depth)
        if constant[1] and len(shapes[1]) == 2 and not op.attrs.transpose_a and shape[-1] >= COLUMNS_FROM:
            return _columns_split(k, None, [], [None], shapes, shape, shape, None, step, depth, row_major=True)
        sliced = None if axis is None else _matmul_slices(op, shapes[0], shapes[1], shape, axis, constant[1])
        if sliced is None:
            return None
        return Split(k, shape, shape, axis, sliced, _matmul_compute(op.attrs.transpose_a, op.attrs.transpose_b))
    if kind in _REDUCTIONS and len(step.inputs) == 2:
        return _reduction_split(plan, k, step, shapes, shape, axis)
    sliced = None if axis is None else _row_wise_slices(plan, step, kind, shapes, shape, axis)
    if sliced is None or prod(shape) * _ROW_WISE.get(kind, 1.0) < MIN_SPLIT_WORK:
        return None
    found = _row_wise_compute(plan, step, kind)
    if found is None:
        return None
    rows, writes = found
    if writes:
        return Split(k, shape, shape, axis, sliced, rows)
    copyto = np.copyto

    def compute(args, out):
        copyto(out, rows(args))
    return Split(k, shape, shape, axis, sliced, compute)


_RECURRENT_SEQUENCES = frozenset({"RNNSequence", "GRUSequence", "LSTMSequence"})


def _directions_split(plan, k: int, step, info) -> Split | None:
    """A bidirectional recurrent sequence with constant weights whose final states nobody reads:
    its forward direction in one process, its reverse one in the other, each into its direction of
    Y [batch, 2, T, hidden].  (A direction's steps cost most of what both stacked do, being calls
    more than arithmetic: the CRNN's LSTM both ways 712 us on BLAS's two threads, one way 507 on
    one; run whole in each process it took 757 and made the paired network 1.09-1.11x slower.)"""
    op = step.op
    y = info.outputs[0]
    if op.attrs.direction != "bidirectional" or op.run_replaced() or not _static_f32(y) \
            or any(s not in step.free for s in step.outputs[1:]) or _step_macs(plan, step) < MIN_SPLIT_MACS:
        return None
    states = op.kind.states
    if len(step.inputs) != 5 + states:     # X, the initial states, the lengths, W, R, B
        return None
    weights = [plan.constants.get(s) for s in step.inputs[2 + states:]]
    if any(w is None or w.dtype != np.float32 for w in weights):
        return None
    copyto = np.copyto

    def direction(d: int, name: str) -> Callable:
        half = with_attrs(op, {"direction": name})
        # (its own contiguous weights, kept: the op keeps its laid-out weights while handed the same ones)
        w, r, b = (np.ascontiguousarray(w[d:d + 1]) for w in weights)
        cut = slice(d, d + 1)

        def compute(args, out):
            initial = [s[:, cut] for s in args[1:1 + states]]
            copyto(out, half.run(args[0], *initial, args[1 + states], w, r, b)[0])
        return compute
    shape = tuple(y.shape)
    return Split(k, shape, shape, 1, {}, None, middle=1, outputs=len(step.outputs),
                 computes=(direction(0, "forward"), direction(1, "reverse")))


_POOLS_AND_CONCAT = frozenset({"MaxPool", "AvgPool", "Concat"})


def _pool_or_concat_split(plan, k: int, step, info) -> Split | None:
    """A max or average pool along its batch or channels, a Concat along an axis other than its
    own: each half reads the same rows of its inputs (a YOLO-style net's SPPF pools and its
    concatenations of two branches ran whole in both processes, each copy or pool 0.1-0.3 ms)."""
    kind = step.node.layer.op_type
    out = info.outputs[0]
    if not _static_f32(out) or step.op.run_replaced() or any(s not in step.free for s in step.outputs[1:]) or not _all_f32(info):
        return None
    shape = tuple(out.shape)
    shapes = [t.shape if t is not None else None for t in info.inputs]
    if len(shape) < 2 or any(s is None or len(s) != len(shape) for s in shapes):
        return None
    if kind == "Concat":
        own = step.op.attrs.axis % len(shape)
        free, work = [a for a in range(len(shape)) if a != own], prod(shape)
    else:
        free, work = [0, 1], prod(shapes[0]) * prod(step.op.kernel)
    axis = _rows_axis(shape, free)
    if axis is None or work < MIN_SPLIT_WORK:
        return None
    if kind == "Concat":
        concatenate = np.concatenate

        def compute(args, out):
            concatenate(args, axis=own, out=out)
        return Split(k, shape, shape, axis, {i: axis for i in range(len(shapes))}, compute)
    pool = step.op
    if kind == "MaxPool":
        def compute(args, out):
            pool.values(args[0], out=out)
    else:
        copyto = np.copyto

        def compute(args, out):
            copyto(out, pool.run(args[0]))
    return Split(k, shape, shape, axis, {0: axis}, compute, outputs=len(step.outputs))


_REDUCTIONS = frozenset({"ReduceMax", "ReduceMin", "ReduceMean", "ReduceSum"})


def _reduction_split(plan, k: int, step, shapes: list, shape: tuple, axis: int | None) -> Split | None:
    """A reduction by constant axes (the CRNN's maximum over the height of 256 x 4 x 64) in halves
    along an axis it keeps: each half reduces its own slice of the data."""
    from .ops.reduction import normalized_axes
    values = plan.constants.get(step.inputs[1])
    if axis is None or values is None or prod(shapes[0]) < MIN_SPLIT_WORK:
        return None
    rank = len(shapes[0])
    reduced = normalized_axes(values, rank)
    kept = [a for a in range(rank) if a not in reduced]
    data_axis = axis if step.op.attrs.keep_dims else kept[axis] if axis < len(kept) else None
    if data_axis is None or data_axis in reduced or shapes[0][data_axis] != shape[axis]:
        return None
    bind = getattr(step.op, "bind", None)
    run, copyto = (bind(plan.step_info(step)) if bind else None) or step.op.run, np.copyto

    def compute(args, out):
        copyto(out, run(args[0], args[1]))
    return Split(k, shape, shape, axis, {0: data_axis}, compute)


def _static_f32(t) -> bool:
    """Whether a step's output type is float32 of a static shape (what an arena buffer holds)."""
    return t is not None and t.etype.name == "f32" and t.shape is not None and all(isinstance(n, int) for n in t.shape)


def _all_f32(info) -> bool:
    return all(t is None or t.value is not None or t.etype.name == "f32" for t in info.inputs)


def _row_wise_slices(plan, step, kind: str, shapes: list, shape: tuple, axis: int) -> dict | None:
    """{input: axis} for a layer whose output rows come from the same rows of its data alone."""
    if kind in ("Softmax", "LogSoftmax"):
        along = step.op.attrs.axis
        if (along + len(shape) if along < 0 else along) == axis or tuple(shapes[0]) != shape:
            return None
        return {0: axis}
    if kind == "MVN":
        if tuple(shapes[0]) != shape or len(step.inputs) != 2:
            return None
        axes = plan.constants.get(step.inputs[1])
        if axes is None or any((int(a) + len(shape) if a < 0 else int(a)) == axis for a in np.ravel(axes)):
            return None
        return {0: axis}
    if kind in _ELEMENTWISE_UNARY and len(step.inputs) == 1:
        return {0: axis} if tuple(shapes[0]) == shape else None
    if kind in _ELEMENTWISE_BINARY:
        sliced = {}
        for i, s in enumerate(shapes):
            at = _broadcast_axis(tuple(s), shape, axis)
            if at is False:
                return None
            if at is not None:
                sliced[i] = at
        return sliced or None
    return None


def _sides_sliced(stages, shapes: list, shape: tuple, axis: int) -> dict | None:
    sliced: dict = {}
    for stage in stages:
        if stage.kind == "binary":
            at = _broadcast_axis(tuple(shapes[stage.side]), shape, axis)
            if at is False:
                return None
            if at is not None:
                sliced[stage.side] = at
    return sliced


def _split_chain(plan, k: int, step, op, final, info, shapes: list, constant: list, make_chain) -> Split | None:
    """A fused step (irrun/optimize.py) in halves: its head (a MatMul, or a row-wise layer such as
    MVN) on the rows, then its chain on them; a trailing Reshape is the arena's view.  A product
    of few rows by a constant weight is cut along the weight's columns instead."""
    from .optimize import _ConvolutionPoolFirst, _PoolFirst
    if type(op) is _PoolFirst:
        return _split_pool_first(k, op, shapes, tuple(final.shape), make_chain)
    if type(op) is _ConvolutionPoolFirst:
        return _split_pooled_convolution(plan, k, step, op, shapes, tuple(final.shape), make_chain)
    stages = list(op.stages)
    while stages and stages[-1].kind == "reshape":
        stages.pop()
    if any(s.kind == "reshape" for s in stages):
        return None
    last = stages[-1].node if stages else op.head_step.node
    shape = tuple(last.types[0].shape)
    if prod(shape) != prod(final.shape) or any(
            s.node.types[0].shape is None or tuple(s.node.types[0].shape) != shape for s in stages):
        return None
    axis = _rows_axis(shape)       # (None: one row; a product by a constant weight is cut by columns)
    if not _all_f32(info) or any(s.kind not in ("unary", "binary", "none") for s in stages):
        return None
    operands = op._operands()
    cost = sum(s.cost for s in stages)
    sides = operands[1:]
    copyto = np.copyto
    final_shape = tuple(final.shape)
    if not op.head:
        if axis is None:
            return None
        data = operands[0]
        sliced = _sides_sliced(stages, shapes, shape, axis)
        if sliced is None or tuple(shapes[data]) != shape or prod(shape) * cost < MIN_SPLIT_WORK:
            return None
        sliced[data] = axis
        chain = make_chain(stages, operands, False, op._fail)

        def compute(args, out):
            chain(args[data], *[args[p] for p in sides], out)
        return Split(k, shape, final_shape, axis, sliced, compute)
    head = op.head_step
    n_head = len(head.inputs)
    kind = head.node.layer.op_type
    if kind in CONVOLUTIONS:
        return _split_convolution_chain(plan, k, step, op, stages, operands, shapes, shape, final_shape, make_chain)
    if kind == "MatMul":
        a_shape, b_shape = shapes[0], shapes[1]
        depth = a_shape[-2 if head.op.attrs.transpose_a else -1]
        if prod(shape) * depth < MIN_SPLIT_MACS:
            return None
        if constant[1] and len(b_shape) == 2 and not head.op.attrs.transpose_a and shape[-1] >= 2 \
                and _by_columns(plan.constants[step.inputs[1]], head.op.attrs.transpose_b, prod(shape[:-1])):
            return _columns_split(k, op, stages, operands, shapes, shape, final_shape, make_chain, head, depth)
        if constant[1] and len(b_shape) == 2 and not head.op.attrs.transpose_a and shape[-1] >= COLUMNS_FROM:
            return _columns_split(k, op, stages, operands, shapes, shape, final_shape, make_chain, head, depth,
                                  row_major=True)
        if axis is None:
            return None
        head_sliced = _matmul_slices(head.op, a_shape, b_shape, shape, axis, constant[1])
        if head_sliced is None:
            return None
        head_run, head_writes = _matmul_compute(head.op.attrs.transpose_a, head.op.attrs.transpose_b), True
    else:
        if axis is None:
            return None
        head_sliced = _row_wise_slices(plan, head, kind, shapes[:n_head], shape, axis)
        if head_sliced is None or prod(shape) * (_ROW_WISE.get(kind, 1.0) + cost) < MIN_SPLIT_WORK:
            return None
        found = _row_wise_compute(plan, head, kind)
        if found is None:
            return None
        head_run, head_writes = found
    sliced = _sides_sliced(stages, shapes, shape, axis)
    if sliced is None:
        return None
    sliced.update(head_sliced)
    chain = make_chain(stages, operands, head_writes, op._fail) if stages else None

    def compute(args, out):
        if head_writes:
            head_run(args[:n_head], out)
            x = out
        else:
            x = head_run(args[:n_head])
        if chain is not None:
            chain(x, *[args[p] for p in sides], out)
        elif x is not out:
            copyto(out, x)
    return Split(k, shape, final_shape, axis, sliced, compute)


def _split_pool_first(k: int, op, shapes: list, shape: tuple, make_chain) -> Split | None:
    """A max pool and the layers after it that commute with it (irrun/optimize.py's pools first:
    a bias per channel, Relu) in halves along the channels: each half pools its channels whole."""
    if len(shape) < 3 or shape[1] < 2 or prod(shapes[0]) * (1 + sum(s.cost for s in op.stages)) < MIN_SPLIT_WORK \
            or any(s.kind not in ("unary", "binary", "none") for s in op.stages):
        return None
    sliced = _sides_sliced(op.stages, shapes, shape, 1)
    if sliced is None:
        return None
    sliced[0] = 1
    pool = op.head_step.op
    chain = make_chain(op.stages, op._operands(), True, op._fail)
    sides = op._operands()[1:]

    def compute(args, out):
        pool.values(args[0], floor=False, out=out)
        chain(out, *[args[p] for p in sides], out)
    return Split(k, shape, shape, 1, sliced, compute)


def _split_pooled_convolution(plan, k: int, step, op, shapes: list, shape: tuple, make_chain) -> Split | None:
    """A convolution with its max pool inside and the layers after it that commute with the pool
    (irrun/optimize.py's pools first: a bias per channel, Relu) in halves along the channels
    (`pooled_convolution_cut`): each half's maxima, then the chain on them into the buffer."""
    if len(shape) < 3 or _step_macs(plan, step) < MIN_SPLIT_MACS \
            or any(s.kind not in ("unary", "binary", "none") for s in op.stages):
        return None
    cut = pooled_convolution_cut(plan, op, shape)
    if cut is None:
        return None
    sliced = _sides_sliced(op.stages, shapes, shape, cut.axis)
    if sliced is None:
        return None
    operands = op._operands()
    chain, sides = make_chain(op.stages, operands, False, op._fail), operands[1:]

    def computing(kernel):
        def compute(args, out):
            chain(kernel(args), *[args[p] for p in sides], out)
        return compute
    return _convolution_split(k, shape, shape, sliced, cut, computing)


def _split_convolution_chain(plan, k: int, step, op, stages, operands, shapes, shape, final_shape,
                             make_chain) -> Split | None:
    """A convolution and its chain (bias, activation, residual) in halves (`convolution_cut`)."""
    from .optimize import FusedChain
    if type(op) is not FusedChain or _step_macs(plan, step) < MIN_SPLIT_MACS:
        return None
    cut = convolution_cut(plan, op.head_step, shape)
    if cut is None:
        return None
    sliced = _sides_sliced(stages, shapes, shape, cut.axis)
    if sliced is None:
        return None
    chain = make_chain(stages, operands, False, op._fail) if stages else None
    in_place = make_chain(stages, operands, True, op._fail) if stages else None
    sides, copyto = operands[1:], np.copyto

    def computing(kernel):
        def compute(args, out):
            y = kernel(args)
            if chain is None:
                copyto(out, y)
            elif out.flags.c_contiguous:
                chain(y, *[args[p] for p in sides], out)
            else:
                # a half of the rows is a strided view of the buffer, into which NumPy's loops
                # write slowly (a division 15.0 against 8.4 us over 32 x 40 x 80): the chain on
                # the kernel's own output, contiguous and new, then one copy
                _chained_then_copied(in_place, y, [args[p] for p in sides], out)
        return compute
    channels_last = final_shape == shape and getattr(op.head_step.op, "channels_last_output", False)
    return _convolution_split(k, shape, final_shape, sliced, cut, computing, channels_last=channels_last)


def _convolution_split(k: int, shape: tuple, final_shape: tuple, sliced: dict, cut, computing: Callable,
                       channels_last: bool = False) -> Split:
    """The split of a convolution step cut so (`convolution_halves.Cut`), each half's kernel made a
    compute by `computing(kernel)`, at its middle or another."""
    def computes_at(middle: int) -> tuple | None:
        kernels = cut.kernels_at(middle)
        return None if kernels is None else tuple(computing(kernel) for kernel in kernels)
    return Split(k, shape, final_shape, cut.axis, sliced, None, middle=cut.middle, channels_last=channels_last,
                 computes=tuple(computing(kernel) for kernel in cut.kernels),
                 computes_at=computes_at if cut.kernels_at is not None else None, granule=cut.granule,
                 two_phase=cut.two_phase)


def _by_columns(weight: np.ndarray, transpose_b: bool, rows: int) -> bool:
    """Whether a product by this constant weight is cut along its columns weight first
    (`_columns_split`): few rows, or a weight held [out, in] row by row (irrun/optimize.py lays it
    out so for weight-first products).  Rows of x against such a weight read transposed are BLAS's
    slow case (64 x 256 @ [1024, 256].T: 227 against 151 us weight first).  Others are cut along
    the weight's columns row-major from COLUMNS_FROM output columns, else along their rows."""
    out_in = weight if transpose_b else weight.T
    return rows <= FEW_ROWS or out_in.flags.c_contiguous


def _columns_split(k: int, op, stages, operands, shapes: list, shape: tuple, final_shape: tuple, make_chain,
                   head, depth: int, row_major: bool = False) -> Split | None:
    """A product by a constant weight cut along the weight's columns.

    Weight first (`row_major` false): out [n, rows] = w [n, in] @ x.T, BLAS writing the arena
    directly, the buffer column-major as irrun/ops/matrix.py's `weight_first` leaves it; the chain
    then runs in place on it.

    Row-major (many rows by an [in, out] weight of COLUMNS_FROM columns or more): x @ w[:, half]
    into a new array, its chain (bias, activation, residual) in place there, then one copy into its
    columns of the buffer.  Each process packs half of the weight for BLAS instead of all of it (a
    row half of 197 x 192 x 768 on one core 158 us, a column half 141; 128 x 256 x 1024 227
    against 186), and attention's heads are the halves' own columns.  The chain on the buffer's
    strided halves instead paid NumPy's per-row loops in every pass (the ViT 1.26x slower than by
    rows)."""
    axis = len(shape) - 1
    sliced = _sides_sliced(stages, shapes, shape, axis)
    if sliced is None or 0 in sliced:
        return None
    transpose_b = head.op.attrs.transpose_b
    sliced[1] = 0 if transpose_b else 1
    chain = make_chain(stages, operands, True, op._fail) if stages else None
    sides, matmul = operands[1:], np.matmul

    if row_major:
        def compute(args, out):
            w = args[1]
            _chained_then_copied(chain, matmul(args[0], w.T if transpose_b else w), [args[p] for p in sides], out)
        return Split(k, shape, final_shape, axis, sliced, compute)

    def compute(args, out):
        w = args[1]
        matmul(w if transpose_b else w.T, args[0].reshape(-1, depth).T, out=out.reshape(-1, out.shape[-1]).T)
        if chain is not None:
            chain(out, *[args[p] for p in sides], out)
    return Split(k, shape, final_shape, axis, sliced, compute, by_columns=True)


def _chained_then_copied(chain, y: np.ndarray, sides: list, out: np.ndarray) -> None:
    """A half's chain run in place on its own new, contiguous output `y`, then one copy into its
    strided place `out` in the buffer (NumPy's loops write strided views slowly)."""
    if chain is not None:
        chain(y, *sides, y)
    np.copyto(out, y)


def _step_macs(plan, step) -> int:
    macs = plan._layer_macs
    members = step.members or (step.node,)
    return sum(macs.get(n.id, 0) for n in members)


def _reading_their_own_rows(steps, splits: list[Split]) -> list[Split]:
    """The splits but those of softmax and layer norms whose data a split step wrote cut another
    way than along the same rows or along the last axis of a row-major buffer: after a weight-first
    product's column-major halves, their halves would read rows the other process wrote half of in
    a layout slow to read (a transformer's layer norms of 2 x 17 rows split along the batch: the
    network 1.073x slower).  After row-major halves of columns each reads whole rows of both
    halves, once the step's wait is past: BERT's norms so 0.992 of its time (quartiles
    0.984-1.000) against whole in both processes, the ViT's level."""
    by_position = {s.position: s for s in splits}
    producer = {slot: k for k, step in enumerate(steps) for slot in step.outputs}

    def middle(s: Split) -> int:
        return s.shape[s.axis] // 2 if s.middle is None else s.middle
    kept = []
    for s in splits:
        step = steps[s.position]
        head = step.op.head_step if step.members and getattr(step.op, "head", False) else step
        source = by_position.get(producer.get(step.inputs[0])) if step.inputs else None
        if head.node.layer.op_type in _ROW_WISE and source is not None and (
                source.by_columns or source.final_shape != s.shape
                or (source.axis != s.axis and source.axis != len(source.shape) - 1)
                or (source.axis == s.axis and middle(source) != middle(s))):
            continue
        kept.append(s)
    return kept


def splits_of(plan) -> list[Split] | None:
    """The plan's split steps, or None where it is better run in one process."""
    steps = plan._program_steps
    if not (plan.convolution_network or plan.blas_network or plan.convolutions_wake_blas) \
            or any(step.check is not None for step in steps):
        return None
    for step in steps:
        members = step.members or (step.node,)
        if any(n.layer.op_type in _UNSHAREABLE for n in members):
            return None
    splits = _reading_their_own_rows(steps, [s for s in (_split_step(plan, k, step) for k, step in enumerate(steps))
                                             if s is not None])
    total = sum(plan._layer_macs.values())
    macs = [_step_macs(plan, steps[s.position]) for s in splits]
    for s, m in zip(splits, macs):
        s.work = max(m, prod(s.shape), 1)
    split_macs = sum(macs)
    if not splits or total <= 0 or split_macs < MIN_SPLIT_SHARE * total:
        return None
    # A large GEMM or convolution left whole would run on one core in each process where it had
    # BLAS's two threads in one (the CRNN's LSTM whole: the network 1.09-1.11x slower paired)
    from .executor import BLAS_SPIN_MACS, CONVOLUTION_TYPES, GEMM_TYPES
    wide = GEMM_TYPES | CONVOLUTION_TYPES
    split_positions = {s.position for s in splits}
    for k, step in enumerate(steps):
        if k not in split_positions and _step_macs(plan, step) >= BLAS_SPIN_MACS and any(
                n.layer.op_type in wide for n in (step.members or (step.node,))):
            return None
    return splits
