"""Load-time rewriting of a plan's steps that no output can tell apart beyond the rounding of a
GEMM's last bit (`load(optimize=True)`).

The plan (irrun/executor.py) has already folded everything computable from constants: weight
decompression chains and FakeQuantize on weights run once at load, in f32 (irrun/precision.py
says where OpenVINO rounds).  On the steps left, `rewrite` makes:

* **Fused elementwise chains.**  A run of float32/float64 elementwise layers (Add, Subtract,
  Multiply, Divide, Power by a tensor that does not widen the data; the activations with a
  bound kernel: Relu, Clamp, Sigmoid, Tanh, Swish, HSwish, HSigmoid, Gelu, Mish; Exp, Sqrt, Log,
  the trigonometric functions; static Reshape/Squeeze/Unsqueeze; Convert to the same type),
  each intermediate read by the next layer only, becomes one step.  Its code is generated at
  load: the same NumPy calls the layers' own bound kernels make, in the same order, on one
  buffer, so the result is bit for bit theirs.  A large tensor runs the chain in parts on
  every core (irrun/threads.py), one hand-off for the whole chain.
* **Heads.**  The chain may start at the layer that makes its first input, when that layer
  returns an array of its own (`outputs_are_new`: a Convolution and its bias and activation,
  a MatMul and its bias, MVN and a layer norm's scale and shift): the chain then runs in that
  array.  (Running the chain inside the convolution's kernel, on each block of output while it
  is in cache, was measured 2-9% slower than whole-tensor passes on this NumPy: not done; so
  was running it in the kernel's parts on two cores, on each part's rows of output: ResNet-18's
  Winograd layers 3-7% slower.)
* **Max pools first.**  A max pool after layers it commutes with (a bias per channel, Relu,
  Clamp) runs before them, on their input, and they on its smaller output, in one step
  (`_pools_first`; the same bits).  Where the pool's data is an audio front end's 1-D
  convolution or a thin 2-D stem (`_pooled_convolution`), the pool runs inside it, on each block
  of its product while in cache (values to the GEMM's rounding: its blocks are of other
  lengths); a paired run cuts that step along its output channels (irrun/split_steps.py).
* **1x1 convolutions writing channels-last** for the depthwise layer that alone reads them, where
  that one works channels-last (see `_channels_last_into_depthwise`): the same GEMM run
  transposed, which OpenBLAS's kernels for small products may round in the last bit otherwise
  (every other rewrite here gives the bits of optimize=False).
* **Grouped-query attention over its own keys and values** (irrun/grouped_attention.py): the
  Unsqueeze -> Broadcast -> Reshape that repeat a key or value head for the query heads sharing
  it, and the attention reading them, become one step that reads the shared heads in place.
* **Rotary embeddings as one step** (irrun/rotary_embedding.py): Hugging Face's
  x cos + rotate_half(x) sin, seven layers as PyTorch's frontend writes it (the same bits).
* **RMS norms as one step** (irrun/rms_norm.py): Power, ReduceMean, Add, Sqrt, Divide and the
  Multiplies that PyTorch's frontend writes for x rsqrt(mean(x^2) + eps) w (the same bits).
* **KV caches grown in place** (irrun/kv_caches.py): ReadValue -> [Gather(beam_idx)] -> Concat
  -> [Slice] -> Assign keeps the variable in a buffer with room to grow; each step writes the
  new tokens after the old ones instead of copying the whole cache twice (a Slice dropping
  the oldest makes the state a window sliding along the buffer), and a Gather whose beam_idx
  keeps every row where it is hands its input on.

What a fused step gains is the executor's work per layer and an allocation per chain (most
intermediates were already computed in place: executor.StepInfo.consumable); on large tensors
the time is the NumPy passes', fused or not.

An intermediate is never fused away when it is a Result, an Assign reads it, another layer reads
it, or a watcher that reads values selects its layer: watched runs use a variant of the plan
made without the fusions that would hide what the watchers select (`Plan.variant_for`); a
watcher that only times steps (a profile) runs the optimized steps and sees a fused step's
time on its first layer, `Produced.fused` naming the others, which report 0 s and
`fused_into`.  `optimize=False` (CLI `--no-optimize`, environment `IRRUN_OPTIMIZE=0` for
the default) runs the layers one by one.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from functools import lru_cache
from math import prod
from typing import Callable

import numpy as np

from . import threads
from .analysis import SINK_TYPES, Node
from .blockwise_folding import gathered_rows_steps, write_weight
from .compressed_products import compressed_product_steps
from .errors import IrrunError
from .grouped_attention import fuse_grouped_attention
from .kv_caches import grow_kv_caches_in_place
from .ops.matrix import one_row_reads_out_in, runs_weight_first
from .rms_norm import fuse_rms_norms
from .rotary_embedding import fuse_rotary_embeddings
from .shapes import is_static
from .sibling_products import sibling_steps
from .watch import Produced

ENV = "IRRUN_OPTIMIZE"
_FLOATS = ("f32", "f64")
# Binary ops whose float kernel is exactly this ufunc of (input 0, input 1) (irrun/ops/arithmetic.py)
_UFUNCS = {"Add": np.add, "Subtract": np.subtract, "Multiply": np.multiply, "Divide": np.divide,
           "Power": np.power}
# Below this many elements a fused chain's unary layers are inlined as their NumPy calls (where a
# kernel's own tricks for large arrays do not apply: irrun/ops/common.py's scalar_extremum).
INLINE_ELEMENTS = 1 << 15


def optimize_default() -> bool:
    """`load`'s default: on, unless the environment sets IRRUN_OPTIMIZE to 0, off, no or false."""
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "off", "no", "false")


# ---------------------------------------------------------------- stages

@dataclass
class Stage:
    """One layer of a chain, as code on the chain's buffer."""

    node: Node
    kind: str                      # "unary" fn(x, out) | "binary" fn(a, b, out) | "reshape" | "none"
    fn: Callable | None = None
    data: int = 0                  # the input the chain flows through
    shape: tuple | None = None     # reshape: the static shape after it
    cost: float = 1.0              # work per element relative to an add
    side: int | None = None        # binary: index of the other operand among the fused step's inputs
    ufuncs: list | None = None     # unary: fn spelled as NumPy calls (Activation.ufuncs), inlined on small data


def _float_type(t) -> bool:
    return t is not None and t.etype.name in _FLOATS and t.shape is not None


def _fits_data(side, data) -> bool:
    """Whether `side` broadcasts onto `data` without widening it (static side dims 1 or data's own)."""
    if side is None or not is_static(side.shape) or len(side.shape) > len(data.shape):
        return False
    return all(s == 1 or s == d for s, d in zip(reversed(side.shape), reversed(data.shape)))


def stage_of(plan, step, data: int) -> Stage | None:
    """`step` as a stage of a chain flowing through its input `data`, or None where it cannot be one."""
    node, op = step.node, step.op
    if op is None or node.bodies or len(step.outputs) != 1 or op.run_replaced() or len(step.inputs) != len(node.inputs):
        return None     # (the last: a step fused already, whose inputs are its layers')
    types = [plan.analysis.type_of(src) for src in node.inputs]
    x, out = types[data], node.types[0] if node.types else None
    if not (_float_type(x) and _float_type(out)) or x.etype is not out.etype or not x.shape:
        return None
    from .ops.activation import Activation, Swish
    from .ops.arithmetic import BinaryElementwise, power_ufunc
    from .ops.infrastructure import Convert
    from .ops.reshaping import ShapeRelabel
    from .ops.unary_math import FloatFunction
    dtype = x.etype.carrier
    if isinstance(op, ShapeRelabel):
        if data == 0 and is_static(x.shape) and is_static(out.shape):
            return Stage(node, "reshape", shape=tuple(out.shape))
        return None
    if type(op) is Convert:
        return Stage(node, "none") if len(types) == 1 else None
    if isinstance(op, Activation):
        if data != 0 or type(op).whole_axes is not Activation.whole_axes:
            return None
        if isinstance(op, Swish) and len(types) == 2:
            beta = plan.source_value(node.inputs[1])
            if beta is None:
                return None
            op.beta = float(np.asarray(beta).reshape(()))
        elif len(types) != 1:
            return None
        into = op.into_for(dtype)
        if into is None:
            return None
        return Stage(node, "unary", into, cost=op.cost, ufuncs=op.ufuncs(dtype))
    if isinstance(op, FloatFunction) and isinstance(op.function, np.ufunc) and len(types) == 1:
        fn = op.function
        return Stage(node, "unary", lambda a, o, fn=fn: fn(a, out=o), cost=3.0, ufuncs=[(fn, None)])
    if node.layer.op_type == "Power" and data == 0 and len(types) == 2 and op.mode == "numpy":
        square_or_root = power_ufunc(plan.source_value(node.inputs[1]))
        if square_or_root is not None and _fits_data(types[1], x):
            return Stage(node, "unary", lambda a, o, fn=square_or_root: fn(a, out=o), ufuncs=[(square_or_root, None)])
    if isinstance(op, BinaryElementwise) and node.layer.op_type in _UFUNCS and op.mode == "numpy" \
            and type(op).run is BinaryElementwise.run and len(types) == 2:
        if not _fits_data(types[1 - data], x):
            return None
        return Stage(node, "binary", _UFUNCS[node.layer.op_type], data=data)
    return None


def _head_ok(step) -> bool:
    """Whether `step` may start a chain with its output (a fresh array the chain may overwrite)."""
    node = step.node
    t = node.types[0] if node.types else None
    return (getattr(step.op, "outputs_are_new", False) and len(step.outputs) == 1 and not node.bodies
            and node.layer.op_type not in SINK_TYPES and _float_type(t) and not step.op.run_replaced())


# ---------------------------------------------------------------- finding chains

def rewrite(plan, steps: list, keep: frozenset) -> list:
    """The steps with Gathers from compressed tables computing their rows (irrun/blockwise_folding.py),
    products of weights kept compressed working from their codes (irrun/compressed_products.py),
    one-row products of joined weights (irrun/sibling_products.py), grouped-query attention over
    its unexpanded keys and values, rotary embeddings and RMS norms as one step each, every chain
    fused (none hiding an output of a layer in `keep`), 1x1 convolutions writing channels-last for
    the depthwise ones they feed, and KV caches grown in place."""
    pinned = _pinned(plan, steps, keep)
    steps = compressed_product_steps(plan, gathered_rows_steps(plan, steps))
    steps = fuse_grouped_attention(plan, sibling_steps(plan, steps), pinned)
    steps = fuse_rms_norms(plan, fuse_rotary_embeddings(plan, steps, pinned), pinned)
    steps = _fuse_chains(plan, _pools_first(plan, steps, keep), keep)
    _channels_last_into_depthwise(plan, steps)
    return grow_kv_caches_in_place(plan, steps)


def _pools_first(plan, steps: list, keep: frozenset) -> list:
    """A max pool after elementwise layers that commute with it (adding a constant per channel,
    Relu, Clamp: max(f(a), f(b)) = f(max(a, b)) for f non-decreasing, rounding included) runs
    first, on their input, and they after it, on its output, smaller by the pool's window: one
    step, the pool's maxima then the layers (the CRNN's three convolutions' bias and Relu over 4x
    and 2x fewer values: 2.85 -> 2.78 and 2.99 -> 2.83 ms alternating; ResNet-18 level).  The
    maxima are raised to the lowest value only after the layers, as the pool alone does, so that a
    window of NaN or -inf taps ends as it did (the same bits).  Not where a window lies in the
    padding alone (its maximum would pass through the layers)."""
    producer, readers = {}, {}
    for k, step in enumerate(steps):
        for s in step.outputs:
            producer[s] = k
        for s in step.inputs:
            readers[s] = readers.get(s, 0) + 1
    pinned = _pinned(plan, steps, keep)
    replaced, taken = {}, set()
    for k, pool in enumerate(steps):
        if not _pool_may_go_first(plan, pool, readers, pinned, keep):
            continue
        run, s = [], pool.inputs[0]       # (index, stage) back from the pool
        while s in producer and readers.get(s) == 1 and s not in pinned and producer[s] not in taken:
            stage = _commuting_stage(plan, steps[producer[s]])
            if stage is None:
                break
            run.append((producer[s], stage))
            s = steps[producer[s]].inputs[stage.data]
        if not run:
            continue
        run.reverse()
        taken.update(j for j, _ in run)
        convolution = _pooled_convolution(plan, steps, pool, producer.get(s), readers, pinned, keep, taken)
        if convolution is not None:
            taken.add(convolution)
        replaced[k] = _pool_first_step(plan, steps, pool, run, s, convolution)
    if not replaced:
        return steps
    return [replaced.get(k, step) for k, step in enumerate(steps) if k not in taken]


def _pool_may_go_first(plan, step, readers, pinned, keep) -> bool:
    """Whether `step` is a max pool of float data whose maxima alone are read (none of its
    windows in the padding alone), and no watcher selects it."""
    from .ops.pooling import MaxPool
    op = step.op
    if not isinstance(op, MaxPool) or op.run_replaced() or step.node.id in keep or len(step.inputs) != 1 \
            or any(readers.get(s) or s in pinned for s in step.outputs[1:]):
        return False
    data = plan.analysis.type_of(step.node.inputs[0])
    return _float_type(data) and is_static(data.shape) and len(data.shape) >= 3 \
        and op.every_window_reads_data(tuple(data.shape[2:]))


def _commuting_stage(plan, step) -> Stage | None:
    """`step` as a stage that commutes with a max pool over its output's spatial axes, else None:
    Relu, Clamp, or data + / - a finite constant that is the same at every position of a channel."""
    op_type = step.node.layer.op_type
    if op_type in ("Relu", "Clamp"):
        stage = stage_of(plan, step, 0)
        return stage if stage is not None and stage.kind == "unary" else None
    if op_type not in ("Add", "Subtract"):
        return None
    for data in (0, 1) if op_type == "Add" else (0,):
        stage = stage_of(plan, step, data)
        if stage is None or stage.kind != "binary" or len(step.inputs) != 2:
            continue
        value = plan.constants.get(step.inputs[1 - data])
        shape = plan.analysis.type_of(step.node.inputs[data]).shape
        if value is None or value.ndim > len(shape) or not np.all(np.isfinite(value)):
            continue
        dims = (1,) * (len(shape) - value.ndim) + value.shape
        if all(d == 1 for i, d in enumerate(dims) if i != 1):
            return stage
    return None


def _pooled_convolution(plan, steps: list, pool, k: int | None, readers, pinned, keep, taken):
    """The index of the convolution making a pools-first step's data where the pool can run inside
    it (`_pooled_kernel`: an audio front end's 1-D layer or a thin 2-D one such as a CRNN's stem,
    whose product is pooled while in cache),
    else None: the convolution alone reads nothing fused and its output nothing else reads, nor a
    watcher."""
    from .ops.convolution import Convolution
    if k is None or k in taken:
        return None
    conv = steps[k]
    if type(conv.op) is not Convolution or conv.members or conv.node.id in keep \
            or any(readers.get(s) != 1 or s in pinned for s in conv.outputs):
        return None
    if not pool.op.windows(tuple(plan.analysis.type_of(pool.node.inputs[0]).shape[2:]))[2]:
        return None       # (windows that tile the data: stride = kernel, no padding, none past the end)
    return None if _pooled_kernel(plan, conv, pool.op) is None else k


def _pooled_kernel(plan, conv, pool_op):
    """The convolution step's kernel with the max pool's windows inside (`Convolution.bind_pooled`)."""
    return conv.op.bind_pooled(plan.step_info(conv), tuple(pool_op.kernel))


def _pool_first_step(plan, steps: list, pool, run: list, data: int, convolution=None):
    """The step of `_pools_first`: the pool on slot `data` heading the run's stages and its floor;
    with `convolution` (a step index: `_pooled_convolution`), the convolution making `data` and
    the pool in one kernel heading them."""
    if convolution is None:
        head, fused = replace(pool, inputs=[data]), _PoolFirst
        types_in = [plan.analysis.type_of(steps[run[0][0]].node.inputs[run[0][1].data])]
    else:
        head, fused = steps[convolution], _ConvolutionPoolFirst
        types_in = [plan.analysis.type_of(src) for src in head.node.inputs]
    inputs = list(head.inputs)
    _add_side_operands(plan, [(steps[j], stage) for j, stage in run], inputs, types_in)
    stages = [stage for _, stage in run]
    from .ops.pooling import lowest_value
    dtype = pool.node.types[0].etype.carrier
    stages.append(Stage(pool.node, "unary", pool.op.floor_of(dtype), ufuncs=[(np.fmax, dtype.type(lowest_value(dtype)))]))
    nodes = (() if convolution is None else (head.node,)) + tuple(steps[j].node for j, _ in run) + (pool.node,)
    op = fused(plan, head, nodes, stages, True, inputs)
    return replace(pool, op=op, inputs=inputs, outputs=pool.outputs[:1], free=[], out_nbytes=pool.out_nbytes[:1],
                   members=nodes, types_in=types_in)


def _channels_last_into_depthwise(plan, steps: list) -> None:
    """A 1x1 convolution (with the chain fused after it) whose output only a depthwise convolution
    reads, where that one works channels-last (irrun/ops/depthwise.py), makes its output in that
    layout: the same GEMM transposed, and no transposing copy of the whole tensor in the depthwise
    layer (EfficientNet's 96 channels at 112x112: 1.0 ms).  The values are the same; only the
    strides of the array differ, which the elementwise layers between follow (threads.in_parts
    cuts along the axis outermost in memory)."""
    from .ops.convolution import window_layout
    from .ops.im2col import pointwise_unpadded
    from .ops.depthwise import works_channels_last
    producers, readers = {}, {}
    for step in steps:
        for s in step.outputs:
            producers[s] = step
        for s in step.inputs:
            readers[s] = readers.get(s, 0) + 1
    for s in plan.result_slots:
        readers[s] = readers.get(s, 0) + 1
    for step in steps:
        layer = _layer_step(step)
        if layer.node.layer.op_type != "GroupConvolution" or len(layer.inputs) != 2 or layer.op.run_replaced():
            continue
        data, filt = plan.analysis.type_of(layer.node.inputs[0]), plan.constants.get(layer.inputs[1])
        if data is None or not is_static(data.shape) or filt is None or filt.ndim != len(data.shape) + 1 \
                or readers.get(layer.inputs[0]) != 1:
            continue
        if not works_channels_last(filt.shape):
            continue
        head = _layer_step(producers[layer.inputs[0]]) if layer.inputs[0] in producers else None
        if head is None or head.node.layer.op_type != "Convolution" or len(head.inputs) != 2 or head.op.run_replaced():
            continue
        weights = plan.constants.get(head.inputs[1])
        source = plan.analysis.type_of(head.node.inputs[0])
        if weights is None or source is None or not is_static(source.shape) or weights.ndim != len(source.shape):
            continue
        geo = head.op.geometry(weights.ndim - 2)
        whole, _ = window_layout(source.shape[2:], weights.shape[2:], geo)
        if pointwise_unpadded((1, *weights.shape), geo, whole, source.shape[2:]):
            head.op.channels_last_output = True


def gemm_data_rows(plan, step) -> int | None:
    """The rows of data a MatMul step multiplies (its first input's elements over its last axis),
    where known at load."""
    data = plan.analysis.type_of(step.node.inputs[0])
    if data is None or data.rank is None or data.rank < 1 or not is_static(data.shape):
        return None
    return prod(data.shape[:-1])


def slot_readers(plan, steps: list) -> dict[int, int]:
    """Slot -> how many step inputs and Results read it."""
    readers: dict[int, int] = {}
    for step in steps:
        for s in step.inputs:
            readers[s] = readers.get(s, 0) + 1
    for s in plan.result_slots:
        readers[s] = readers.get(s, 0) + 1
    return readers


def lay_out_gemm_weights(plan, steps: list, release=None, pages=None) -> int:
    """Constant MatMul weights stored in the memory layout their GEMM runs fastest with (the same
    values): [in, out] rows for data of many rows (BLAS's faster layout: 128 x 256 x 768 on two
    cores 213 -> 182 us, for weights PyTorch and OpenVINO's FullyConnected keep as [out, in] and
    MatMul reads transposed), [out, in] rows for few (`runs_weight_first`: at most 48, or at most
    128 widened threefold or more), which run weight first (irrun/ops/matrix.py); and [in, out]
    rows for one row of data (an LLM's decoding step), whose GEMV then streams the weight's rows
    (OpenBLAS's `y += x_i w_i`) where [out, in] rows make it take a dot product per output: the
    benchmark's decoder step 0.77-0.83 of its time on an AMD EPYC of family 19h, on two threads and
    on one -- but [out, in] rows where the product narrows the row at least twofold and the weight
    may stay in cache (`one_row_reads_out_in`: its down-projections 0.65 of their time).  Data
    whose rows are known only at run time (an LLM's, exported with dynamic dimensions) gets [in,
    out] rows too: without weight first, NumPy's matmul runs faster so at every count of rows
    measured there (1 to 512 rows by 256-1024 x 256-1024 weights: 0.57-0.95
    of the time), the benchmark's decoder step reshaped to dynamic input 0.88.  (The GEMMs'
    products are bit for bit those of the other layout, measured; a GEMV's are summed in another
    order.)  Only a weight no other step or Result reads (a Gather of tied embeddings wants its
    rows contiguous).  The original's mapped pages are released.  `pages` (irrun/huge_pages.py),
    where given, takes the new copy of a weight it has a place for.  Returns how many weights were
    laid out."""
    readers = slot_readers(plan, steps)
    done = 0
    for step in steps:
        if step.node.layer.op_type != "MatMul":
            continue
        attrs = step.op.attrs
        if attrs.transpose_a or len(step.inputs) != 2 or readers.get(step.inputs[1]) != 1 or step.op.run_replaced() \
                or step.inputs[1] in getattr(plan, "joined_weight_slots", ()) \
                or step.inputs[1] in getattr(plan, "products_by_rows", ()):
            continue
        data = plan.analysis.type_of(step.node.inputs[0])
        if data is None or data.rank is None or data.rank < 2:
            continue
        weight = plan.constants.get(step.inputs[1])
        if weight is None or weight.ndim != 2 or weight.dtype.kind != "f" or weight.dtype.itemsize < 4 \
                or not weight.flags.c_contiguous:
            continue
        k, n = weight.shape[::-1] if attrs.transpose_b else weight.shape
        rows = gemm_data_rows(plan, step)
        rows_out_in = rows is not None and (runs_weight_first(rows, k, n) if rows > 1 else      # [out, in] in memory
                                            one_row_reads_out_in(k, n, weight.nbytes))
        if rows_out_in == bool(attrs.transpose_b):
            continue                                        # (as stored already)
        placed = None if pages is None else pages.place(step.inputs[1], weight, columns_first=True)
        if placed is None:
            placed = np.empty(weight.shape[::-1], weight.dtype).T
            write_weight(placed, weight)
        plan.constants[step.inputs[1]] = placed
        if release is not None:
            release(weight)
        done += 1
    return done


def _fuse_chains(plan, steps: list, keep: frozenset) -> list:
    readers: dict[int, list[tuple[int, int]]] = {}
    for k, step in enumerate(steps):
        for i, s in enumerate(step.inputs):
            readers.setdefault(s, []).append((k, i))
    pinned = _pinned(plan, steps, keep)
    taken: set[int] = set()
    fused: dict[int, object] = {}          # index of a chain's last step -> the fused step
    for k, step in enumerate(steps):
        if k in taken:
            continue
        first = _start(plan, step)
        if first is None:
            continue
        members, stages, at = [k], [first] if first != "head" else [], k
        while True:
            out = steps[at].outputs[0]
            if out in pinned:
                break
            found = readers.get(out, ())
            if len(found) != 1:
                break
            j, position = found[0]
            if j in taken:
                break
            stage = stage_of(plan, steps[j], position)
            if stage is None:
                break
            members.append(j)
            stages.append(stage)
            at = j
        if len(members) < 2:
            continue
        taken.update(members)
        fused[members[-1]] = _fused_step(plan, steps, members, stages, first == "head")
    if not fused:
        return steps
    return [fused[k] if k in fused else step for k, step in enumerate(steps) if k not in taken or k in fused]


def _start(plan, step):
    """How `step` may start a chain: "head", its Stage (through input 0, else 1), or None."""
    for data in range(min(len(step.inputs), 2)):
        stage = stage_of(plan, step, data)
        if stage is not None and stage.kind not in ("reshape", "none"):
            return stage
    return "head" if _head_ok(step) else None


def _fused_step(plan, steps: list, members: list[int], stages: list[Stage], head: bool):
    """One step for the chain: the first layer's inputs, then the other operands of the rest."""
    first = steps[members[0]]
    inputs = list(first.inputs)
    types_in = [plan.analysis.type_of(src) for src in first.node.inputs]
    _add_side_operands(plan, [(steps[k], stage) for k, stage in zip(members[1:], stages if head else stages[1:])],
                       inputs, types_in)
    if not head:
        stages[0].side = 1 - stages[0].data if stages[0].kind == "binary" else None
    last = steps[members[-1]]
    # (a head that runs several layers itself, irrun/layer_groups.py's, brings them all)
    nodes = (first.members or (first.node,)) + tuple(steps[k].node for k in members[1:])
    op = FusedChain(plan, first, nodes, stages, head, inputs)
    return replace(first, op=op, inputs=inputs, outputs=list(last.outputs), free=[], out_nbytes=list(last.out_nbytes),
                   position=last.position, members=nodes, types_in=types_in, key_name=last.key_name)


def _pinned(plan, steps: list, keep: frozenset) -> set[int]:
    """Slots no rewrite may hide: Results, what an Assign (or other sink) reads, and the outputs
    of layers a watcher selects (`keep`)."""
    pinned = set(plan.result_slots)
    for step in steps:
        if step.node.layer.op_type in SINK_TYPES:
            pinned.update(step.inputs)
        if step.node.id in keep:
            pinned.update(step.outputs)
    return pinned


def _add_side_operands(plan, members: list, inputs: list[int], types_in: list) -> None:
    """The operands of each (step, stage) of `members` but its data appended to a fused step's
    `inputs` (their types to `types_in`), a binary stage's `side` set to its operand's place."""
    for step, stage in members:
        if stage.kind == "binary":
            stage.side = len(inputs)
        for i, (s, src) in enumerate(zip(step.inputs, step.node.inputs)):
            if i != stage.data:
                inputs.append(s)
                types_in.append(plan.analysis.type_of(src))


def _layer_step(step):
    """The step of the layer that heads a fused step (the step itself otherwise)."""
    return step.op.head_step if isinstance(step.op, FusedChain) and step.op.head else step


# ---------------------------------------------------------------- fused kernels

class FusedChain:
    """The op of a fused step: binds the head (if any) and generates the chain's code."""

    outputs_are_new = True
    foldable = False

    def __init__(self, plan, first, nodes: tuple, stages: list[Stage], head: bool, inputs: list[int]):
        self.plan, self.head_step, self.nodes, self.stages, self.head = plan, first, nodes, stages, head
        self.fused_inputs = inputs      # the fused step's input slots

    def run_replaced(self) -> bool:
        return False

    def run(self, *args):
        return self.bind(None)(*args)

    def bind(self, info):
        plan = self.plan
        n_head = len(self.head_step.inputs)
        operands = self._operands()
        step_inputs = self.fused_inputs
        # Overwriting the data in place: only where no other operand may be a view of it (a later
        # stage would read what an earlier one overwrote); constants never are.
        risky = [p for p in operands[1:] if step_inputs[p] not in plan.constants]
        consumed = self.head or (info is not None and self.stages[0].data in info.consumable)
        out_type = self.nodes[-1].types[0]
        static = info is not None and is_static(out_type.shape)
        small = static and prod(out_type.shape) < INLINE_ELEMENTS
        constants = {i: plan.constants[step_inputs[p]] for i, p in enumerate(operands) if i and p >= 0
                     and step_inputs[p] in plan.constants}
        cost = sum(s.cost for s in self.stages)
        if any(s.kind == "reshape" for s in self.stages):
            parts = "never"                 # (a part's shape is not the shape a Reshape names)
        elif static:
            parts = "always" if threads.worth_parts(prod(out_type.shape), cost) else "never"
        else:
            parts = "when large"
        head = self._head_kernel(info, n_head) if self.head else None
        return _kernel(self.stages, operands, len(step_inputs), head, n_head, consumed, risky, parts, cost, small,
                       constants, self._fail)

    def _operands(self) -> list[int]:
        """Step input positions of the chain's data (-1: the head's output) and of each binary
        stage's other operand; a stage's `side_operand` is its place in this list."""
        picks = [-1 if self.head else self.stages[0].data]
        for stage in self.stages:
            if stage.kind == "binary":
                picks.append(stage.side)
                stage.side_operand = len(picks) - 1
        return picks

    def _head_kernel(self, info, n_head: int):
        """The head's kernel, bound as it would be on its own."""
        head = self.head_step
        kernel = None
        if info is not None and hasattr(head.op, "bind"):
            kernel = head.op.bind(replace(self.plan.step_info(head),
                                          consumable=frozenset(i for i in info.consumable if i < n_head)))
        return kernel or head.op.run

    def _head_failed(self, exc: BaseException, args) -> IrrunError:
        return self.plan._located(self.head_step.node, exc, args)

    def _fail(self, i: int, exc: BaseException, args) -> IrrunError:
        if i < 0:
            return self._head_failed(exc, args)
        return self.plan._located(self.stages[i].node, exc, args)


class _PoolFirst(FusedChain):
    """The op of a `_pools_first` step: the pool's maxima, not yet raised to the lowest value (the
    chain's last stage does that), then the chain."""

    def _head_kernel(self, info, n_head: int):
        pool = self.head_step.op
        return lambda x: pool.values(x, floor=False)


class _ConvolutionPoolFirst(FusedChain):
    """The op of a `_pools_first` step headed by the convolution making the pool's data: its kernel
    with the pool inside (`_pooled_convolution`), then the chain (the audio net 0.93-0.97 of its
    time, old and new alternating inference by inference, loaded in either order)."""

    def _head_kernel(self, info, n_head: int):
        return _pooled_kernel(self.plan, self.head_step, self.nodes[-1].op)


def _out(ufunc, name: str) -> str:
    """How generated code passes `out`: positionally (the fastest way), but by keyword to maximum
    and minimum (numpy 2.4 takes 1.3 us for a positional out there, 0.25 us by keyword)."""
    return f"out={name}" if ufunc in (np.maximum, np.minimum) else name


def _body(stages: list[Stage], side, in_place: bool, small: bool, constants: dict, names: dict):
    """The stages as lines of code on the registers x (the data, read only unless `in_place`) and
    out (the buffer written; every kernel may write over its input).  `side(j)`: the expression of
    operand j.
    `small`: static data of fewer than INLINE_ELEMENTS elements, where a unary stage's NumPy calls
    are written out (a Python call is a third of the time of a ufunc on 16 elements), a Reshape to
    the shape the data has already is left out, and a Multiply by a constant (`constants`: operand
    -> its value) followed by a negation multiplies by the negated constant (x * -c is -(x * c)
    exactly).  Returns [(line, stage)]."""
    body: list[tuple[str, int]] = []
    cur = "out" if in_place else "x"
    shape = None          # the data's static shape where known (small chains: from the first reshape on)
    negated = False       # the next stage's leading np.negative is done already
    for k, stage in enumerate(stages):
        if stage.kind == "none":
            continue
        if stage.kind == "reshape":
            if small and stage.shape == shape:
                continue
            shape = names[f"shape{k}"] = stage.shape
            for register in {cur, "out"}:
                body.append((f"{register} = {register}.reshape(shape{k})", k))
            continue
        names[f"f{k}"] = stage.fn
        dst = "out"
        if stage.kind == "unary" and small and stage.ufuncs is not None:
            src, calls = cur, stage.ufuncs[1:] if negated else stage.ufuncs
            if negated and src != dst:
                body.append((f"copyto({dst}, {src})", k))
                src = dst
            for j, (ufunc, constant) in enumerate(calls):
                names[f"f{k}_{j}"] = ufunc
                if isinstance(constant, tuple):       # (clip's bounds)
                    names.update({f"c{k}_{j}_{i}": value for i, value in enumerate(constant)})
                    bounds = ", ".join(f"c{k}_{j}_{i}" for i in range(len(constant)))
                    body.append((f"f{k}_{j}({src}, {bounds}, {dst})", k))
                elif constant is not None:
                    names[f"c{k}_{j}"] = constant
                    body.append((f"f{k}_{j}({src}, c{k}_{j}, {_out(ufunc, dst)})", k))
                else:
                    body.append((f"f{k}_{j}({src}, {dst})", k))
                src = dst
            negated = False
        elif stage.kind == "unary":
            body.append((f"f{k}({cur}, {dst})", k))
        else:
            operand = side(stage.side_operand)
            following = stages[k + 1] if k + 1 < len(stages) else None
            value = constants.get(stage.side_operand)
            if small and stage.fn is np.multiply and value is not None and following is not None \
                    and following.kind == "unary" and following.ufuncs and following.ufuncs[0] == (np.negative, None):
                names[f"c{k}"] = np.negative(value)
                operand, negated = f"c{k}", True
            out = _out(stage.fn, dst)
            body.append((f"f{k}({cur}, {operand}, {out})" if stage.data == 0 else f"f{k}({operand}, {cur}, {out})", k))
        cur = dst
    return body


def _compile(lines: list[str], body: list[tuple[str, int]], first: int, names: dict, name: str) -> Callable:
    """`lines` (a function whose body lines start at `first`) compiled in `names`; a failing line
    is put down to its stage through `stage_at`."""
    names.setdefault("stage_at", {}).update({first + n: k for n, (_, k) in enumerate(body)})
    exec(_compiled("\n".join(lines)), names)
    return names[name]


@lru_cache(maxsize=1024)
def _compiled(source: str):
    """Chains of one form share their code object (ResNet-18's 22 chains are 9 sources; a compile
    is about 80 us)."""
    return compile(source, "<irrun fused chain>", "exec")


def _chain(stages, operands, in_place, fail, small=False, constants=None) -> Callable:
    """`chain(x, *sides, out)`: the stages with the result left in `out` (`x` is `out` when
    `in_place`): what a part of a large tensor runs (threads.in_parts)."""
    names = {"copyto": np.copyto, "fail": fail}
    sides = [f"s{j}" for j in range(1, len(operands))]
    body = _body(stages, lambda j: f"s{j}", in_place, small, constants or {}, names)
    lines = [f"def chain(x, {''.join(s + ', ' for s in sides)}out):"]
    lines.append("    try:")
    first = len(lines) + 1
    lines += ["        " + line for line, _ in body]
    lines += ["        return out", "    except Exception as exc:",
              "        raise fail(stage_at.get(exc.__traceback__.tb_lineno, 0), exc, (x,)) from None"]
    return _compile(lines, body, first, names, "chain")


def _kernel(stages, operands, n_inputs: int, head, n_head: int, consumed: bool, risky: list[int], parts: str,
            cost: float, small: bool, constants: dict, fail) -> Callable:
    """The fused step's kernel, one generated function of the step's inputs: the head's kernel
    (if any), the buffer the chain writes (the head's output; the data where it dies here and no
    other operand is a view of it; else a new one), then the stages, or the chain in parts on
    every core for a large tensor (`parts`: "never", "always", "when large")."""
    names = {"empty_like": np.empty_like, "copyto": np.copyto, "fail": fail, "head": head,
             "may_share": np.may_share_memory, "in_parts": threads.in_parts, "errstate": np.errstate,
             "LARGE": -(-2 * threads.MIN_PART_ELEMENTS // max(int(cost), 1)), "COST": cost}
    inputs = [f"i{n}" for n in range(n_inputs)]
    sides = ", ".join(f"i{p}" for p in operands[1:])
    lines = [f"def fused({', '.join(inputs)}):"]
    if head is not None:
        arguments = ", ".join(inputs[:n_head])
        lines += ["    try:", f"        x = head({arguments})",
                  "        if type(x) is tuple:", "            x = x[0]", "    except Exception as exc:",
                  f"        raise fail(-1, exc, ({arguments},)) from None",
                  "    out = x"]
        in_place = True
    else:
        lines.append(f"    x = i{operands[0]}")
        in_place = consumed
        if consumed and risky:
            names["fresh"] = _chain(stages, operands, False, fail, small, constants)
            shared = " or ".join(f"may_share(x, i{p})" for p in risky)
            lines += [f"    if {shared}:", f"        return fresh(x, {sides + ', ' if sides else ''}empty_like(x))"]
        lines.append("    out = x" if consumed else "    out = empty_like(x)")
    if parts != "never":
        names["chain"] = _chain(stages, operands, in_place, fail, small, constants)
        call = f"in_parts(chain, out, x, {sides + ', ' if sides else ''}cost=COST)"
        if parts == "always":
            lines += ["    with errstate(all='ignore'):", f"        return {call}"]
        else:
            lines += ["    if x.size >= LARGE:", "        with errstate(all='ignore'):", f"            return {call}"]
    body = _body(stages, lambda j: f"i{operands[j]}", in_place, small, constants, names)
    lines.append("    try:")
    first = len(lines) + 1
    lines += ["        " + line for line, _ in body]
    lines += ["        return out", "    except Exception as exc:",
              "        raise fail(stage_at.get(exc.__traceback__.tb_lineno, 0), exc, (x,)) from None"]
    return _compile(lines, body, first, names, "fused")


# ---------------------------------------------------------------- watching fused steps

class StandIn:
    """What a watcher that reads no values sees of an output a fused step never makes."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, dtype


def member_events(step, out: tuple, args: list, start: float, seconds: float, scope, report) -> list[Produced]:
    """One Produced per layer of a fused step: one carries the time (the first, or the layer a group
    names as doing the work: `timed_member`, an attention after the layers that expand its keys),
    the last the output."""
    members = step.members
    names = tuple(n.layer.name for n in members)
    op = step.op.head_step.op if isinstance(step.op, FusedChain) and step.op.head else step.op
    timed = getattr(op, "timed_member", 0)
    final = out[0]
    events = []
    for k, node in enumerate(members):
        last = k == len(members) - 1
        if last:
            values = (final,)
        else:
            t = node.types[0]
            shape = tuple(t.shape) if is_static(t.shape) else final.shape
            values = (StandIn(shape, final.dtype),)
        ins = tuple(args[:len(node.inputs)]) if k == 0 else ()
        own = k == timed
        events.append(Produced(node, values, scope, start if k <= timed else start + seconds, seconds if own else 0.0,
                               False,
                               step.volatile if last else (False,), ins, step.key_name if last else node.layer.name,
                               report, names[:k] + names[k + 1:] if own else (), "" if own else names[timed]))
    return events
