"""Recurrent cells and sequences: RNN, GRU and LSTM, one step (`*Cell`) or a whole sequence (`*Sequence`).

All six share one recurrence.  The input projection `X @ W^T + B` is computed for
every time step in one matmul; a Python loop over time then applies the cell's
step to the whole batch at once (`_rnn_step`, `_gru_step`, `_lstm_step`, each a
few matmuls).  Gate blocks are stacked in OpenVINO's order: LSTM f, i, c, o;
GRU z, r, h.

Sequences follow OpenVINO's reference (`reference/sequences.hpp`): batch row b
runs `sequence_lengths[b]` steps (backwards over its first `length` steps for
`reverse`), its outputs past that are 0 and its final state is the state after
its last step; a length outside 1..T leaves a final state of 0.  Floats narrower
than f32 are computed in f32, as OpenVINO's CPU plugin does.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import prod

import numpy as np

from .. import etypes
from ..errors import ShapeError, UnsupportedError
from ..etypes import ElementType
from ..registry import Op, TensorType, register
from ..shapes import ANY, DimLike, dim_merge, dims_compatible, format_shape, make_dim

ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "tanh": np.tanh,
    "relu": lambda x: np.maximum(x, 0),
}


@dataclass(frozen=True)
class CellKind:
    """What distinguishes the three recurrent cells."""

    name: str          # "RNN", "GRU", "LSTM"
    gates: int         # gate blocks stacked in W, R and B
    states: int        # 1 (H) or 2 (H, C)
    activations: int   # activation functions the cell uses


RNN = CellKind("RNN", 1, 1, 1)
GRU = CellKind("GRU", 3, 1, 2)
LSTM = CellKind("LSTM", 4, 2, 3)


# ---------------------------------------------------------------- shape function

def _dim_div(d: DimLike, n: int) -> DimLike | None:
    """d / n as OpenVINO's Dimension division: exact, or None when no integer fits."""
    if isinstance(d, int):
        return d // n if d % n == 0 else None
    lo, hi = -(-d.lo // n), None if d.hi is None else d.hi // n
    return None if hi is not None and lo > hi else make_dim(lo, hi)


class _Dims:
    """Merges one named dimension (batch, hidden, directions) over several inputs."""

    def __init__(self, what: str, start: DimLike = ANY):
        self.what, self.value = what, start

    def merge(self, d: DimLike | None, source: str) -> None:
        try:
            self.value = dim_merge(self.value, ANY if d is None else d)
        except ShapeError:
            raise ShapeError(f"{self.what} {d} of {source} does not match {self.value} "
                             f"from the other inputs") from None


@dataclass
class RecurrentDims:
    batch: DimLike
    hidden: DimLike
    directions: DimLike
    steps: DimLike


def recurrent_dims(kind: CellKind, names: list[str], shapes: list, *, sequence: bool,
                   linear_before_reset: bool = False, directions: int = 1) -> RecurrentDims:
    """Check the operand shapes of a cell or sequence and deduce its dims, as OpenVINO does.

    Cell operands: X [batch, input], states [batch, hidden], W [gates*hidden, input],
    R [gates*hidden, hidden], B [gates*hidden] (GRU with linear_before_reset: 4*hidden).
    A sequence adds T to X, num_directions to states (axis 1) and to W/R/B (axis 0),
    and sequence_lengths [batch] after the states.  OpenVINO does not check the
    input size of X against W, nor the hidden_size attribute.
    """
    lead = 1 if sequence else 0
    n_state = kind.states
    w_at = 1 + n_state + lead
    ranks = [2 + lead] * (1 + n_state) + ([1] if sequence else []) + [2 + lead, 2 + lead, 1 + lead]

    def name(i):
        return f"{names[i]} {format_shape(shapes[i])}"

    for i, rank in enumerate(ranks):
        if shapes[i] is not None and len(shapes[i]) != rank:
            raise ShapeError(f"{name(i)} must have rank {rank}")

    def dim(i, axis):
        return None if shapes[i] is None else shapes[i][axis]

    batch = _Dims("batch")
    for i in range(1 + n_state + lead):
        batch.merge(dim(i, 0), name(i))
    hidden = _Dims("hidden size")
    for i in range(1, 1 + n_state):
        hidden.merge(dim(i, 1 + lead), name(i))
    hidden.merge(dim(w_at + 1, 1 + lead), name(w_at + 1))
    dirs = _Dims("num_directions", directions)
    if sequence:
        for i in list(range(1, 1 + n_state)) + [w_at, w_at + 1, w_at + 2]:
            try:
                dirs.merge(dim(i, 1 if i <= n_state else 0), name(i))
            except ShapeError:
                raise ShapeError(f"num_directions of {name(i)} does not match direction "
                                 f"({directions} direction{'s' if directions > 1 else ''})") from None

    rows = {w_at: kind.gates, w_at + 1: kind.gates,
            w_at + 2: kind.gates + (1 if linear_before_reset else 0)}
    if isinstance(hidden.value, int):
        for i, blocks in rows.items():
            d = dim(i, lead)
            if d is not None and not dims_compatible(d, hidden.value * blocks):
                raise ShapeError(f"{name(i)}: {d} rows, expected {blocks} x hidden size {hidden.value} = "
                                 f"{hidden.value * blocks}")
    else:
        for i in (w_at, w_at + 1):
            # OpenVINO tests the first dim (num_directions for a sequence) for being static
            # before it divides the rows: kept, so dynamic shapes infer the same.
            if shapes[i] is not None and isinstance(shapes[i][0], int):
                per_gate = _dim_div(shapes[i][lead], kind.gates)
                if per_gate is None:
                    raise ShapeError(f"{name(i)}: {shapes[i][lead]} rows are not {kind.gates} gate blocks")
                hidden.merge(per_gate, name(i))
    steps = ANY if not sequence or shapes[0] is None else shapes[0][1]
    return RecurrentDims(batch.value, hidden.value, dirs.value, steps)


def _data_etype(label: str, names: list[str], inputs: list[TensorType], skip: int | None) -> ElementType:
    """The one element type of the data inputs (all but sequence_lengths)."""
    etype = etypes.dynamic
    for i, t in enumerate(inputs):
        if i == skip or t.etype is etypes.dynamic:
            continue
        if etype is not etypes.dynamic and t.etype is not etype:
            raise ShapeError(f"{label}: element types differ ({names[i]} is {t.etype}, expected {etype})")
        etype = t.etype
    if etype is not etypes.dynamic and etype.is_integral:
        # OpenVINO infers integer cells; its CPU plugin rounds inside its decompositions
        # (RNNCell, GRUCell, LSTMCell) or refuses them (sequences).
        raise UnsupportedError(f"{label} on {etype} is not implemented (floating-point only)",
                               code="E-OP-UNSUPPORTED")
    if etype is not etypes.dynamic and not etype.is_float:
        raise ShapeError(f"{label} takes floating-point numbers; got {etype} inputs")
    return etype


# ---------------------------------------------------------------- the recurrence

@dataclass
class StepParams:
    """Constants of a cell step: of one direction, or of several stacked on a leading axis."""

    R: np.ndarray                              # [gates*hidden, hidden] ([dirs, gates*hidden, hidden])
    acts: tuple[Callable, ...]                 # f, g, h as the cell uses them
    clip: float
    peepholes: np.ndarray | None = None        # LSTMCell-1: [3*hidden] (f, i, o)
    input_forget: bool = False                 # LSTMCell-1: i = 1 - f
    recurrent_bias: np.ndarray | None = None   # GRU with linear_before_reset: Rb of the h gate
    halved: bool = False                       # LSTM: f, i, o arrive halved (see `_halved_lstm_params`)

    def __post_init__(self):
        self.RT = np.swapaxes(self.R, -1, -2)     # what the state multiplies: h @ RT

    def lay_out(self) -> StepParams:
        """RT copied into its own layout, for parameters made once and used many times: a step's
        product of stacked directions took 7.8 us on R's transposed view, 5.4 on this."""
        self.RT = np.ascontiguousarray(self.RT)
        return self

    def gate(self, x: np.ndarray, act: Callable) -> np.ndarray:
        if self.clip > 0:   # OpenVINO clips pre-activations only for a positive clip
            x = np.clip(x, -self.clip, self.clip)
        return act(x)


def _rnn_step(gx, states, p: StepParams):
    (h,) = states
    return (p.gate(gx + h @ p.RT, p.acts[0]),)


def _gru_step(gx, states, p: StepParams):
    (h,) = states
    n = h.shape[-1]
    zr = p.gate(gx[..., :2 * n] + h @ p.RT[..., :2 * n], p.acts[0])    # z and r in one pass
    z, r = zr[..., :n], zr[..., n:]
    if p.recurrent_bias is not None:     # linear_before_reset: r scales the recurrent product
        candidate = gx[..., 2 * n:] + r * (h @ p.RT[..., 2 * n:] + p.recurrent_bias)
    else:
        candidate = gx[..., 2 * n:] + (r * h) @ p.RT[..., 2 * n:]
    candidate = p.gate(candidate, p.acts[1])
    return ((1 - z) * candidate + z * h,)


# An LSTM with sigmoid, tanh, tanh and no clip runs its f, i and o pre-activations halved, in gx and
# R (exactly: a power of two), so that one tanh over all four blocks gives the candidate and, as
# 0.5 + 0.5 tanh(x / 2), the three sigmoids: 11 NumPy calls a step instead of 13 (14.2 against
# 16.3 us a step of two stacked directions at hidden size 128; nine since, see `_halved_lstm_steps`).
def _lstm_sigmoid_blocks(n: int) -> tuple[slice, slice]:
    return slice(0, 2 * n), slice(3 * n, 4 * n)      # f, i | o


def halve_lstm_gates(gx: np.ndarray, n: int) -> None:
    for block in _lstm_sigmoid_blocks(n):
        gx[..., block] *= gx.dtype.type(0.5)


def _halved_lstm_params(p: StepParams) -> StepParams:
    for block in _lstm_sigmoid_blocks(p.R.shape[-1]):
        p.R[..., block, :] *= p.R.dtype.type(0.5)     # (RT, a view of R, with it)
    p.halved = True
    return p


def _lstm_step(gx, states, p: StepParams):
    h, c = states
    if p.halved:
        return _halved_lstm_step(gx, states, p)
    gates = gx + h @ p.RT
    if p.peepholes is None and not p.input_forget:
        # f, i and o through their activation in one pass (the candidate's block too, unused):
        # a third of the NumPy calls of one pass per gate, the same values
        n = h.shape[-1]
        squashed = p.gate(gates, p.acts[0])
        c_new = squashed[..., :n] * c + squashed[..., n:2 * n] * p.gate(gates[..., 2 * n:3 * n], p.acts[1])
        return squashed[..., 3 * n:] * p.acts[2](c_new), c_new
    f, i, cand, o = np.split(gates, 4, axis=-1)
    if p.peepholes is not None:
        pf, pi, po = np.split(p.peepholes, 3)
        f, i = f + pf * c, i + pi * c
    ft = p.gate(f, p.acts[0])
    it = 1 - ft if p.input_forget else p.gate(i, p.acts[0])
    c_new = ft * c + it * p.gate(cand, p.acts[1])
    if p.peepholes is not None:
        o = o + po * c_new
    return p.gate(o, p.acts[0]) * p.acts[2](c_new), c_new


STEPS = {"RNN": _rnn_step, "GRU": _gru_step, "LSTM": _lstm_step}


def _projection(x: np.ndarray, W: np.ndarray, B: np.ndarray) -> np.ndarray:
    """x @ W^T plus the biases that add to it (all of B but GRU's separate recurrent h bias)."""
    return x @ W.T + B[:W.shape[0]]


def recur(kind: CellKind, gx: np.ndarray, states: tuple[np.ndarray, ...], lengths: np.ndarray | None,
          reverse: bool, p: StepParams) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """Run the cell over time: gx [batch, T, gates*hidden] projected inputs, states [batch, hidden].

    Returns Y [batch, T, hidden] and the final states.  Without `lengths` shorter than T, gx and
    the states may have more leading axes (directions stacked: [dirs, batch, ...], with `p` of
    stacked weights): every step then runs all of them in each NumPy call.
    """
    step = STEPS[kind.name]
    steps = gx.shape[-2]
    if reverse and lengths is not None and np.any((lengths < 0) | (lengths > steps)):
        raise ShapeError(f"sequence_lengths {lengths.tolist()} must lie in 0..{steps} to run in reverse "
                         f"(OpenVINO's ReverseSequence refuses them)")
    y = np.zeros(gx.shape[:-1] + states[0].shape[-1:], dtype=gx.dtype)
    if not _masked(lengths, steps) and kind.name == "LSTM" and p.halved:
        return y, _halved_lstm_steps(gx, states, reverse, p, y)
    if not _masked(lengths, steps) and kind.name == "GRU" and _runs_gru_loop(p):
        return y, (_gru_steps(gx, states, reverse, p, y),)
    if not _masked(lengths, steps):
        # every row runs every step: step k is one column of gx and y for all rows (no gathers)
        for k in range(steps):
            t = steps - 1 - k if reverse else k
            states = step(gx[..., t, :], states, p)
            y[..., t, :] = states[0]
        return y, states
    batch = gx.shape[0]
    rows = np.arange(batch)
    final = [np.zeros_like(s) for s in states]
    for k in range(steps):
        active = k < lengths
        # reverse: row b walks its first lengths[b] steps backwards (ReverseSequence), the rest in place
        t = np.where(active, lengths - 1 - k, k) if reverse else np.full(batch, k)
        states = step(gx[rows, t], states, p)
        y[rows, t] = np.where(active[:, None], states[0], 0)
        ends = lengths - 1 == k
        final = [np.where(ends[:, None], s, f) for s, f in zip(states, final)]
    return y, tuple(final)


# `_halved_lstm_steps` holds a step's values block-major, [block, *rows, hidden] with the blocks in
# this order of the gates' (candidate, f, i, o) after the cell state c, so that each NumPy call of
# a step reads and writes whole contiguous blocks of every row: a call on strided views of
# [rows, 4 * hidden] took twice the time of one on contiguous memory (0.8 against 0.35 us).
_BLOCK_ORDER = (2, 0, 1, 3)


def _blocks_of(RT: np.ndarray) -> np.ndarray:
    """RT [*dirs, hidden, gates * hidden] as the view [*dirs, gates, hidden, hidden]."""
    n = RT.shape[-2]
    return np.swapaxes(RT.reshape(RT.shape[:-1] + (RT.shape[-1] // n, n)), -2, -3)


def _block_major_recurrence(p: StepParams) -> np.ndarray:
    """RT as `_halved_lstm_steps` multiplies it: [*dirs, 4, hidden, hidden] in _BLOCK_ORDER, halved
    once more (the state it multiplies is carried doubled); made once per StepParams."""
    laid_out = getattr(p, "block_major_RT", None)
    if laid_out is None:
        laid_out = p.block_major_RT = np.ascontiguousarray(
            _blocks_of(p.RT)[..., _BLOCK_ORDER, :, :] * p.RT.dtype.type(0.5))
    return laid_out


def _gate_blocks(p: StepParams) -> np.ndarray:
    """RT as `_halved_lstm_step` and `_gru_steps` multiply it: [*dirs, gates, hidden, hidden], the
    gates' blocks in their own order; made once per StepParams."""
    laid_out = getattr(p, "gate_blocks_RT", None)
    if laid_out is None:
        laid_out = p.gate_blocks_RT = np.ascontiguousarray(_blocks_of(p.RT))
    return laid_out


def _loop_layout(gx: np.ndarray, p: StepParams, order: tuple[int, ...]):
    """What a loop over gx [*dirs, rows, T, gates * hidden] (`_halved_lstm_steps`, `_gru_steps`)
    works on: (steps, hidden, lead = [*dirs, rows], dirs, rows, the inputs by time [T, gates,
    *dirs, 1, rows, hidden] with the gates in `order`, each step's arrays contiguous)."""
    steps, gates = gx.shape[-2], len(order)
    n = gx.shape[-1] // gates
    lead = gx.shape[:-2]
    dirs = lead[:p.RT.ndim - 2]
    d, rows = len(dirs), prod(lead[len(dirs):])
    by_time = np.empty((steps, gates) + dirs + (1, rows, n), gx.dtype)
    # (transposes, not np.moveaxis: its Python-level checks took 5 us a call)
    time_first = gx.reshape(dirs + (1, rows, steps, gates, n)).transpose(
        (d + 2,) + tuple(range(d + 2)) + (d + 3, d + 4))                   # [T, *dirs, 1, rows, gates, n]
    for k, block in enumerate(order):
        by_time[:, k] = time_first[..., block, :]
    return steps, n, lead, dirs, rows, by_time


def _write_outputs(ys: np.ndarray, lead: tuple, y: np.ndarray, scale=None) -> None:
    """y [*lead, T, hidden] = the loop's ys [T, *dirs, 1, rows, hidden] (times `scale`)."""
    m = len(lead)
    by_rows = ys.reshape(ys.shape[:1] + lead + ys.shape[-1:]).transpose(tuple(range(1, m + 1)) + (0, m + 1))
    if scale is None:
        y[...] = by_rows
    else:
        np.multiply(by_rows, scale, y)


def _halved_lstm_step(gx, states, p: StepParams) -> tuple[np.ndarray, np.ndarray]:
    """One step of `_halved_lstm_steps` (masked sequences run step by step), its arithmetic on one
    step's arrays without the loop's buffers, R's blocks in the gates' own order (no copy of gx to
    reorder it) and not halved again (the state not doubled): the same products, so the same
    bits.  (A step of 3 rows at hidden size 16: 7.5 us, where the loop of one step takes 13; a
    masked bidirectional sequence of 40 steps 1362 -> 1283 us against the step before this one.)"""
    h, c = states
    n = h.shape[-1]
    lead = h.shape[:-1]
    dirs = lead[:p.RT.ndim - 2]
    d, rows = len(dirs), prod(lead[len(dirs):])
    one, half = gx.dtype.type(1), gx.dtype.type(0.5)
    pre = np.matmul(h.reshape(dirs + (1, rows, n)), _gate_blocks(p))                  # [*dirs, 4, rows, n]
    np.add(gx.reshape(dirs + (rows, 4, n)).transpose(tuple(range(d)) + (d + 1, d, d + 2)), pre, pre)
    np.tanh(pre, pre)
    u = np.add(pre, one)                     # f, i and o: 2 sigmoid (their pre-activations halved)
    c = c.reshape(dirs + (rows, n))
    c_new = np.multiply(u[..., 0, :, :], c)
    c_new += np.multiply(u[..., 1, :, :], pre[..., 2, :, :])
    np.multiply(c_new, half, c_new)
    h_new = np.tanh(c_new)
    np.multiply(h_new, u[..., 3, :, :], h_new)
    np.multiply(h_new, half, h_new)
    return h_new.reshape(lead + (n,)), c_new.reshape(lead + (n,))


def _halved_lstm_steps(gx, states, reverse: bool, p: StepParams, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`_lstm_step`'s halved case over every step (see `_halved_lstm_params`), every row running
    each, in one loop over buffers made once, block-major (_BLOCK_ORDER): with u = 1 + tanh(x / 2)
    = 2 sigmoid(x) for f, i and o, the step's products are [u_f, u_i] * [c, candidate] in one call
    and c_new their sum halved; the state is carried doubled, h2 = u_o tanh(c_new), and multiplies
    R halved (each product, so the sums, exactly as h R: the same bits); y is halved once at the
    end.  Nine NumPy calls a step, each on contiguous memory (the CRNN's 64 steps of two stacked
    directions: 855 -> 743 us, 706 -> 661 us time-major with the calls inlined, 640 -> 560
    block-major).  Writes y; returns (h, c)."""
    dtype = gx.dtype
    steps, n, lead, dirs, rows, by_time = _loop_layout(gx, p, _BLOCK_ORDER)
    d = len(dirs)
    R = _block_major_recurrence(p)              # [*dirs, 4, n, n]
    # every buffer [*dirs, 1, rows, n] a step: a step of ys is then what the next step's product reads
    shape = dirs + (1, rows, n)
    state = np.empty((5,) + shape, dtype)          # c, candidate, f, i, o
    c, c_and_candidate, pre, u = state[0], state[:2], state[1:], state[2:]
    u_fi, u_o = state[2:4], state[4]
    products = np.empty((2,) + shape, dtype)
    product_c, product_candidate = products[0], products[1]
    c[...] = np.reshape(states[1], shape)
    pre_by_dirs = pre[..., 0, :, :].transpose(tuple(range(1, d + 1)) + (0, d + 1, d + 2))   # [*dirs, 4, rows, n]
    ys = np.empty((steps,) + shape, dtype)
    hs = list(ys)
    h = np.asarray(states[0], dtype).reshape(shape) * dtype.type(2)
    gxs = list(by_time)
    one, half = dtype.type(1), dtype.type(0.5)
    matmul, add, multiply, tanh = np.matmul, np.add, np.multiply, np.tanh
    # (`out` passed positionally: 50 ns a call less than by keyword, 30 us of the CRNN's 64 steps)
    for t in range(steps - 1, -1, -1) if reverse else range(steps):
        matmul(h, R, pre_by_dirs)
        add(gxs[t], pre, pre)
        tanh(pre, pre)                       # f, i and o halved: u = 1 + tanh(x / 2) = 2 sigmoid(x)
        add(u, one, u)
        multiply(u_fi, c_and_candidate, products)
        add(product_c, product_candidate, c)
        multiply(c, half, c)
        h = hs[t]
        tanh(c, h)
        multiply(h, u_o, h)
    _write_outputs(ys, lead, y, half)
    final_h = np.multiply(ys[0 if reverse else steps - 1], half) if steps else np.multiply(h, half)   # (no steps: h0)
    return final_h.reshape(lead + (n,)), c.reshape(lead + (n,)).copy()


def _runs_gru_loop(p: StepParams) -> bool:
    """Whether a GRU's steps take `_gru_steps`: the default activations (sigmoid, tanh), no clip."""
    return p.acts[0] is ACTIVATIONS["sigmoid"] and p.acts[1] is ACTIVATIONS["tanh"] and not p.clip > 0


def _gru_steps(gx, states, reverse: bool, p: StepParams, y: np.ndarray) -> np.ndarray:
    """`_gru_step` over every step (every row running each, default activations, no clip), in one
    loop over buffers made once, block-major as `_halved_lstm_steps` ([block, *dirs, 1, rows,
    hidden], the gates z, r and the candidate in their order): each NumPy call of a step on
    contiguous memory and into a buffer of its own, the same calls in the same order as the step
    (the same bits), with linear_before_reset's recurrent product made with z's and r's.  Two
    stacked directions of 64 steps at hidden size 128, step by step against this loop: 1058 ->
    818 us (linear_before_reset 1084 -> 753), one direction 652 -> 570.  Writes y; returns h."""
    dtype = gx.dtype
    steps, n, lead, dirs, rows, by_time = _loop_layout(gx, p, (0, 1, 2))
    d = len(dirs)
    shape = dirs + (1, rows, n)
    R = _gate_blocks(p)                         # [*dirs, 3, n, n]
    lbr = p.recurrent_bias is not None
    gxs = list(by_time)
    pre = np.empty((3,) + shape, dtype)          # z, r, and the candidate's recurrent product
    zr, candidate = pre[:2], pre[2]
    z, r = pre[0], pre[1]
    by_dirs = tuple(range(1, d + 1)) + (0, d + 1, d + 2)
    products = (pre if lbr else zr)[..., 0, :, :].transpose(by_dirs)   # what h's product writes
    R_h = R if lbr else R[..., :2, :, :]
    R_candidate = R[..., 2, :, :]                # [*dirs, n, n]
    bias = None if not lbr else np.reshape(p.recurrent_bias, dirs + (1, 1, n))
    gated, keep, total = np.empty(shape, dtype), np.empty(shape, dtype), np.empty(shape, dtype)
    ys = np.empty((steps,) + shape, dtype)
    hs = list(ys)
    h = np.asarray(states[0], dtype).reshape(shape)
    one = dtype.type(1)
    matmul, add, subtract, multiply, divide, negative, exp, tanh = \
        np.matmul, np.add, np.subtract, np.multiply, np.divide, np.negative, np.exp, np.tanh
    for t in range(steps - 1, -1, -1) if reverse else range(steps):
        step_gx = gxs[t]
        matmul(h, R_h, products)
        add(step_gx[:2], zr, zr)
        negative(zr, zr)                      # sigmoid: 1 / (1 + exp(-x)), as ACTIVATIONS spells it
        exp(zr, zr)
        add(zr, one, zr)
        divide(one, zr, zr)
        if lbr:                               # r (h R + Rb)
            add(candidate, bias, candidate)
            multiply(r, candidate, candidate)
        else:                                 # (r h) R
            multiply(r, h, gated)
            matmul(gated[..., 0, :, :], R_candidate, candidate[..., 0, :, :])
        add(step_gx[2], candidate, candidate)
        tanh(candidate, candidate)
        subtract(one, z, keep)                # (1 - z) candidate + z h
        multiply(keep, candidate, keep)
        multiply(z, h, total)
        h = hs[t]
        add(keep, total, h)
    _write_outputs(ys, lead, y)
    return (ys[0 if reverse else steps - 1] if steps else h).reshape(lead + (n,)).copy()


def _masked(lengths: np.ndarray | None, steps: int) -> bool:
    """Whether some row's sequence ends before the last step."""
    return lengths is not None and bool(np.any(lengths != steps))


# ---------------------------------------------------------------- ops

def _activations(label: str, kind: CellKind, names: tuple[str, ...]) -> tuple[Callable, ...]:
    if len(names) < kind.activations:
        raise ShapeError(f"{label} needs {kind.activations} activation function"
                         f"{'s' if kind.activations > 1 else ''}, got {len(names)} ({', '.join(names) or 'none'})")
    unknown = [a for a in names[:kind.activations] if a.lower() not in ACTIVATIONS]
    if unknown:
        raise ShapeError(f'{label}: activation "{unknown[0]}" is not supported (OpenVINO runs '
                         f'{", ".join(ACTIVATIONS)})')
    return tuple(ACTIVATIONS[a.lower()] for a in names[:kind.activations])


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    """Floats narrower than f32 are computed in f32, as OpenVINO's CPU plugin does."""
    return np.dtype(np.float32) if dtype.itemsize < 4 else dtype


class RecurrentOp(Op):
    kind: CellKind
    sequence: bool = False

    @property
    def linear_before_reset(self) -> bool:
        return bool(self.attrs.get("linear_before_reset", False))

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.spec.inputs]

    def acts(self) -> tuple[Callable, ...]:
        return _activations(self.spec.label, self.kind, self.attrs.activations)

    def step_params(self, R: np.ndarray, B: np.ndarray, dtype) -> StepParams:
        hidden = R.shape[-1]
        lbr_bias = B[self.kind.gates * hidden:].astype(dtype) if self.linear_before_reset else None
        return StepParams(R.astype(dtype), self.acts(), float(self.attrs.clip), recurrent_bias=lbr_bias)


class RecurrentCell(RecurrentOp):
    """X, the states, W, R, B -> the next states, each [batch, hidden_size]."""

    def infer(self, inputs):
        self.acts()
        shapes = [t.shape for t in inputs]
        dims = recurrent_dims(self.kind, self.names, shapes, sequence=False,
                              linear_before_reset=self.linear_before_reset)
        etype = _data_etype(self.spec.label, self.names, inputs, None)
        self.check_extra(inputs, dims)
        notes = {0: "batch of X and the states", 1: "hidden size of the states and R"}
        return [TensorType((dims.batch, dims.hidden), etype, notes=notes) for _ in range(self.kind.states)]

    def check_extra(self, inputs, dims: RecurrentDims) -> None:
        """Cell-specific operand checks (LSTMCell-1's peepholes)."""

    def run(self, x, *rest):
        n = self.kind.states
        states, (W, R, B) = rest[:n], rest[n:n + 3]
        dtype = _compute_dtype(x.dtype)
        params = self.step_params(R, B, dtype)
        self.add_extras(params, rest[n + 3:], dtype)
        gx = _projection(x.astype(dtype), W.astype(dtype), B.astype(dtype))
        out = STEPS[self.kind.name](gx, tuple(s.astype(dtype) for s in states), params)
        return tuple(s.astype(x.dtype) for s in out)

    def add_extras(self, params: StepParams, extras: tuple, dtype) -> None:
        """Optional inputs after B (LSTMCell-1's peepholes)."""


@register("RNNCell", 1)
class RNNCell(RecurrentCell):
    kind = RNN


@register("GRUCell", 3)
class GRUCell(RecurrentCell):
    kind = GRU


@register("LSTMCell", 4)
class LSTMCell(RecurrentCell):
    kind = LSTM


@register("LSTMCell", 1)
class LSTMCellV1(RecurrentCell):
    """LSTMCell-1: optional peepholes P [3*hidden] (f, i, o) and input_forget, as OpenVINO's reference.

    weights_format is read but, as in OpenVINO's CPU plugin, the gates are always f, i, c, o
    (see specs/errata/sequence.md).
    """

    kind = LSTM

    def check_extra(self, inputs, dims):
        if len(inputs) > 6:
            p = inputs[6].shape
            if p is not None and p and isinstance(p[0], int) and isinstance(dims.hidden, int) \
                    and p[0] != 3 * dims.hidden:
                raise ShapeError(f"P {format_shape(p)}: expected 3 x hidden size {dims.hidden} = "
                                 f"{3 * dims.hidden} peephole weights")

    def add_extras(self, params, extras, dtype):
        if extras:
            params.peepholes = extras[0].reshape(-1).astype(dtype)
        params.input_forget = bool(self.attrs.input_forget)


class RecurrentSequence(RecurrentOp):
    """X [batch, T, input], states [batch, dirs, hidden], sequence_lengths [batch], W, R, B with a leading dirs axis.

    Outputs Y [batch, dirs, T, hidden] and the final states [batch, dirs, hidden].
    """

    sequence = True

    @property
    def directions(self) -> int:
        return 2 if self.attrs.direction == "bidirectional" else 1

    def infer(self, inputs):
        self.acts()
        lengths_at = 1 + self.kind.states
        lengths = inputs[lengths_at].etype
        if lengths is not etypes.dynamic and lengths.kind in ("bool", "string"):
            raise ShapeError(f"sequence_lengths must be numeric, got {lengths}")
        dims = recurrent_dims(self.kind, self.names, [t.shape for t in inputs], sequence=True,
                              linear_before_reset=self.linear_before_reset, directions=self.directions)
        etype = _data_etype(self.spec.label, self.names, inputs, lengths_at)
        y = TensorType((dims.batch, dims.directions, dims.steps, dims.hidden), etype,
                       notes={0: "batch of X", 1: f"direction={self.attrs.direction}", 2: "time steps of X",
                              3: "hidden size of the states and R"})
        state = TensorType((dims.batch, dims.directions, dims.hidden), etype,
                           notes={0: "batch of X", 1: f"direction={self.attrs.direction}",
                                  2: "hidden size of the states and R"})
        return [y] + [TensorType(state.shape, etype, notes=state.notes) for _ in range(self.kind.states)]

    def run(self, x, *rest):
        n = self.kind.states
        states, lengths, (W, R, B) = rest[:n], rest[n], rest[n + 1:n + 4]
        dtype = _compute_dtype(x.dtype)
        lengths = lengths.astype(np.int64)
        if self.directions == 2 and not _masked(lengths, x.shape[1]):
            return self.run_both_ways(x, states, W, R, B, dtype)
        ys, finals = [], []
        params_of = self.prepared(R, B, dtype, stacked=False)
        gxs = self.projected(x, W, B, dtype, params_of[0].halved)
        for d, params in enumerate(params_of):
            reverse = self.attrs.direction == "reverse" or d == 1
            gx = gxs[d]
            y, final = recur(self.kind, gx, tuple(s[:, d].astype(dtype) for s in states), lengths, reverse, params)
            ys.append(y)
            finals.append(final)
        out_y = np.stack(ys, axis=1).astype(x.dtype)
        out_states = [np.stack([f[i] for f in finals], axis=1).astype(x.dtype) for i in range(n)]
        return (out_y, *out_states)

    def prepared(self, R: np.ndarray, B: np.ndarray, dtype, stacked: bool) -> list[StepParams]:
        """The step parameters of each direction, or of both stacked: made once for constant R and
        B (an LSTM's transposed and halved R cost 120 us a call), kept with the arrays they are of."""
        cached = getattr(self, "_prepared", None)
        if cached is not None and cached[0] is R and cached[1] is B and cached[2] == (dtype, stacked):
            return cached[3]
        params = [self.step_params(R[d], B[d], dtype) for d in range(self.directions)]
        if stacked:
            params = [StepParams(np.stack([p.R for p in params]), params[0].acts, params[0].clip,
                                 recurrent_bias=None if params[0].recurrent_bias is None else
                                 np.stack([p.recurrent_bias for p in params])[:, None])]
        if self.kind is LSTM and not self.attrs.clip and \
                [a.lower() for a in self.attrs.activations[:3]] == ["sigmoid", "tanh", "tanh"]:
            params = [_halved_lstm_params(p) for p in params]
        params = [p.lay_out() for p in params]
        self._prepared = (R, B, (dtype, stacked), params)
        return params

    def projected(self, x: np.ndarray, W: np.ndarray, B: np.ndarray, dtype, halved: bool) -> np.ndarray:
        """Every direction's projected inputs x @ W^T + B, [dirs, batch, T, gates*hidden], an LSTM's
        f, i and o halved when its step parameters are.  W^T is laid out contiguous (and halved)
        once for constant W and B: the CRNN's two projections took 300 us on W's transposed view,
        250 on the copy."""
        cached = getattr(self, "_input_weights", None)
        if cached is not None and cached[0] is W and cached[1] is B and cached[2] == (dtype, halved):
            weights, bias = cached[3]
        else:
            weights = np.ascontiguousarray(np.swapaxes(W.astype(dtype), -1, -2))     # [dirs, input, gates]
            bias = B[:, :W.shape[1]].astype(dtype)
            if halved:
                halve_lstm_gates(weights, W.shape[1] // 4)
                halve_lstm_gates(bias, W.shape[1] // 4)
            self._input_weights = (W, B, (dtype, halved), (weights, bias))
        x = x.astype(dtype, copy=False)
        gx = np.empty((len(weights), *x.shape[:-1], weights.shape[-1]), dtype)
        for d, w in enumerate(weights):     # (a GEMM per direction: NumPy's batched one took 12% longer)
            np.matmul(x, w, out=gx[d])
        gx += bias[:, None, None]
        return gx

    def run_both_ways(self, x, states, W, R, B, dtype):
        """Both directions of unmasked sequences at once: the backward one reads its projected
        inputs reversed in time, so step k of both is one call per NumPy function (half the
        calls of one direction after the other, which is most of a small cell's time)."""
        (stacked,) = self.prepared(R, B, dtype, stacked=True)
        gx = self.projected(x, W, B, dtype, stacked.halved)
        gx[1] = gx[1, :, ::-1].copy()
        y, final = recur(self.kind, gx, tuple(np.swapaxes(s, 0, 1).astype(dtype) for s in states), None, False,
                         stacked)
        out_y = np.stack([y[0], y[1, :, ::-1]], axis=1).astype(x.dtype, copy=False)   # (a new array already)
        return (out_y, *(np.swapaxes(f, 0, 1).astype(x.dtype) for f in final))


@register("RNNSequence", 5)
class RNNSequence(RecurrentSequence):
    kind = RNN


@register("GRUSequence", 5)
class GRUSequence(RecurrentSequence):
    kind = GRU


@register("LSTMSequence", 5)
class LSTMSequence(RecurrentSequence):
    kind = LSTM
