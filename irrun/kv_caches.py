"""Load-time rewrite of a stateful LLM's KV caches (part of `irrun.optimize.rewrite`): each
ReadValue -> [Gather(beam_idx)] -> Concat -> [Slice] -> Assign keeps its variable in a buffer with
room to grow, so that a decoding step writes its new tokens after the old ones instead of copying
the whole cache twice; the values are those of the layers run one by one."""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np


def grow_kv_caches_in_place(plan, steps: list) -> list:
    """ReadValue(v) -> [Gather(beam_idx, axis 0)] -> Concat -> [Slice] -> Assign(v): the Concat
    appends into a buffer with room to spare (`_Growing`), the Assign keeps its output without
    copying it, and the Gather hands its input on when beam_idx leaves every row where it is.  A
    Slice (a view) keeping the last tokens makes a sliding window: the next call's cache is a
    window of the buffer, which grows on from its end (a streaming model's state, an LLM with
    windowed attention)."""
    producer = {s: k for k, step in enumerate(steps) for s in step.outputs}
    out = list(steps)
    for k, step in enumerate(steps):
        if step.node.layer.op_type != "Assign" or step.members or step.op.run_replaced():
            continue
        c = producer.get(step.inputs[0])
        if c is not None and steps[c].node.layer.op_type == "Slice" and not steps[c].members \
                and not steps[c].op.run_replaced():
            c = producer.get(steps[c].inputs[0])
        concat = steps[c] if c is not None else None
        if concat is None or concat.node.layer.op_type != "Concat" or len(concat.inputs) != 2 \
                or concat.members or concat.op.run_replaced():
            continue
        p = producer.get(concat.inputs[0])
        gather = None
        if p is not None and _identity_gather_ok(plan, steps[p]):
            gather, p = p, producer.get(steps[p].inputs[0])
        past = steps[p] if p is not None else None
        if past is None or past.node.layer.op_type != "ReadValue" or past.op.variable_id != step.op.attrs.variable_id:
            continue
        t = concat.node.types[0] if concat.node.types else None
        if t is None or t.shape is None or not t.shape:
            continue
        cache = _Cache(concat.op.attrs.axis % len(t.shape))
        out[c] = replace(concat, op=_Growing(concat.op, cache))
        out[k] = replace(step, op=_Keeping(step.op, cache))
        if gather is not None:
            out[gather] = replace(steps[gather], op=_BeamGather(steps[gather].op))
    return out


def _identity_gather_ok(plan, step) -> bool:
    """A Gather along axis 0 with no batch dims whose indices are computed (beam_idx)."""
    node = step.node
    if node.layer.op_type != "Gather" or step.members or step.op.run_replaced() or step.op.batch_dims != 0:
        return False
    axis = plan.source_value(node.inputs[2])
    return axis is not None and np.asarray(axis).size == 1 and int(np.asarray(axis).reshape(-1)[0]) == 0


@dataclass
class _Cache:
    """A variable's buffer: its value is a window of it along `axis` (a prefix while it grows)."""

    axis: int
    buffer: np.ndarray | None = None
    address: int = 0               # where the buffer's data starts
    # (the window the Concat returned last and where it starts; then the one the Assign kept and
    # where it starts, which the next call's Concat most often gets back: its start known
    # without `_window_start`, whose __array_interface__ took 3.6% of the int4 decoder's step)
    returned: tuple = (None, 0)
    kept: tuple = (None, 0)


class _Rebound:
    """A layer's op with another kernel bound (it still infers, names and runs unbound as itself)."""

    outputs_are_new = False

    def __init__(self, op):
        self.op = op

    def __getattr__(self, name):
        return getattr(self.op, name)


class _Growing(_Rebound):
    """Concat(past, new) into `cache.buffer` when `past` is a window of the buffer along the axis
    (the last call's value of the variable: its prefix, or a later window once a Slice dropped
    the oldest tokens) and there is room after it: `new` is written after it, nothing else moves.
    Otherwise a new buffer with half as much room again is made, `past` copied to its start.  The
    windows never change afterwards (later calls write only beyond them), so the Assign may keep
    one as it is."""

    def __init__(self, op, cache: _Cache):
        super().__init__(op)
        self.cache = cache

    def bind(self, info):
        cache, run, axis = self.cache, self.op.run, self.cache.axis
        before = (slice(None),) * axis

        def grow(past, new):
            buf = cache.buffer
            length, added = past.shape[axis], new.shape[axis]
            known, at = cache.kept
            start = None if buf is None else at if past is known and past.base is buf else \
                _window_start(buf, cache.address, past, axis)
            if start is None or start + length + added > buf.shape[axis] \
                    or new.shape[:axis] != buf.shape[:axis] or new.shape[axis + 1:] != buf.shape[axis + 1:]:
                if past.ndim != new.ndim or past.shape[:axis] != new.shape[:axis] or \
                        past.shape[axis + 1:] != new.shape[axis + 1:] or past.dtype != new.dtype:
                    return run(past, new)          # (the layer's own error)
                shape = list(past.shape)
                end = length + added
                shape[axis] = end + max(end // 2, 16)
                buf = cache.buffer = np.empty(shape, past.dtype)
                cache.address = buf.__array_interface__["data"][0]
                buf[before + (slice(0, length),)] = past
                start = 0
            end = start + length + added
            buf[before + (slice(start + length, end),)] = new
            window = buf[before + (slice(start, end),)]
            cache.returned = (window, start)
            return window
        return grow


def _window_start(buf: np.ndarray, address: int, view: np.ndarray, axis: int) -> int | None:
    """i where `view` is buf[..., i:i + n, ...] along `axis` (whole along every other), else None;
    `address`: where buf's data starts."""
    if view.base is not buf or view.strides != buf.strides or view.shape[:axis] != buf.shape[:axis] \
            or view.shape[axis + 1:] != buf.shape[axis + 1:]:
        return None
    offset = view.__array_interface__["data"][0] - address
    step = buf.strides[axis]
    if step <= 0 or offset < 0 or offset % step:
        return None
    return offset // step


class _Keeping(_Rebound):
    """Assign: a value that is a prefix of its cache's buffer is kept as it is (read-only view)."""

    def __init__(self, op, cache: _Cache):
        super().__init__(op)
        self.cache = cache

    def bind(self, info):
        cache, op = self.cache, self.op
        from .subgraph import fits
        assigned, variable_id, fitting = op.context.assigned, op.attrs.variable_id, set()

        def keep(value):
            if cache.buffer is None or value.base is not cache.buffer:
                return op.run(value)
            if value.shape not in fitting:       # (the variable's shape is the reader's, once bound)
                variable = op.reader().variable
                if variable is not None and not fits(variable.shape, value.shape):
                    return op.run(value)           # (its error)
                if len(fitting) >= 64:
                    fitting.clear()                # (a cache's shape is new at every call)
                fitting.add(value.shape)
            kept = value.view()
            kept.flags.writeable = False
            returned, at = cache.returned
            cache.kept = (kept, at) if value is returned else (None, 0)
            assigned[variable_id] = kept
            return value
        return keep


class _BeamGather(_Rebound):
    """Gather(past, beam_idx, 0) where beam_idx is 0, 1, ..., n - 1: `past` itself."""

    def bind(self, info):
        kernel = self.op.bind(info) if hasattr(self.op, "bind") else None
        kernel = kernel or self.op.run
        ranges: dict[tuple, bytes] = {}     # (n, indices' dtype) -> the bytes of 0, 1, ..., n - 1

        def gather(data, indices, axis):
            n = data.shape[0] if data.ndim else -1
            if indices.ndim == 1 and indices.shape[0] == n:
                key = (n, indices.dtype)
                order = ranges.get(key)
                if order is None:
                    if len(ranges) > 64:
                        ranges.clear()
                    order = ranges[key] = np.arange(n, dtype=indices.dtype).tobytes() \
                        if indices.dtype.kind in "iu" else None
                # (bytes, where np.array_equal took 2.5 us of a decoding step's 3.8 a cache)
                if order is not None and indices.tobytes() == order:
                    return data
            return kernel(data, indices, axis)
        return gather
