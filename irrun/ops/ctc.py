"""CTCGreedyDecoder-1, CTCGreedyDecoderSeqLen-6, CTCLoss-4 and GatherTree-1.

Greedy decoding takes the first best class per step (argmax), drops blanks
and, with merging, a class equal to the previous step's class; a blank in
between keeps both.  Decoded rows are left-aligned and padded with -1.

CTCLoss is the standard CTC forward (alpha) recursion in log space over the
blank-interleaved label sequence, vectorised over the batch; with
ctc_merge_repeated=false every label is emitted at exactly one step.

What OpenVINO 2026.4.1 does beyond the op specs (specs/errata/signal.md):

* CTCGreedyDecoder stops a sequence at its first 0 in sequence_mask; later
  1s do not resume it.
* CTCLoss with an empty target is -ln of the all-blank path, as the spec
  defines it (the CPU plugin crashes on it); with preprocess_collapse_repeated
  an empty target counts as [labels[n, 0]], as OpenVINO computes it.
* GatherTree casts parent ids and max_seq_len to integers by truncation, and
  compares step ids with end_token as values (8.64 is not the end token 8).
  A batch with max_seq_len 0 is all end_token (the CPU plugin leaves it
  unwritten).
"""
from __future__ import annotations

import numpy as np

from ..errors import ModelError, ShapeError
from ..registry import Op, TensorType, register
from ..shapes import ANY, dims_compatible, format_shape
from .common import check_rank, merge_dims


def _check_types(t: TensorType, kind: str, what: str) -> None:
    """kind "float" or "int": the element-type family OpenVINO requires of this input."""
    if t.etype.name == "dynamic":
        return
    if not (t.etype.is_float if kind == "float" else t.etype.is_integral):
        wanted = "a floating-point type" if kind == "float" else "an integer type"
        raise ShapeError(f"{what} must be {wanted}, got {t.etype}")


def _check_single_value(t: TensorType, what: str) -> None:
    """A scalar, or a 1-D tensor of one element."""
    if t.rank is None or t.rank == 0:
        return
    if t.rank != 1 or not dims_compatible(t.shape[0], 1):
        raise ShapeError(f"{what} must be a scalar or hold one value, got {format_shape(t.shape)}")


def _scalar(x: np.ndarray) -> int:
    return int(np.asarray(x).reshape(-1)[0])


def _left_align(values: np.ndarray, keep: np.ndarray, fill) -> np.ndarray:
    """Per row, the kept values in order, then `fill` ([rows, steps] -> [rows, steps])."""
    order = np.argsort(~keep, axis=1, kind="stable")      # kept steps first, in time order
    packed = np.take_along_axis(values, order, axis=1)
    count = keep.sum(axis=1, keepdims=True)
    return np.where(np.arange(values.shape[1]) < count, packed, fill)


def _greedy_keep(classes: np.ndarray, valid: np.ndarray, blank, merge: bool) -> np.ndarray:
    """[rows, steps] mask of decoded steps: valid, not blank, and (merging) not the previous step's class."""
    keep = valid & (classes != blank)
    if merge:
        repeat = np.zeros_like(keep)
        repeat[:, 1:] = classes[:, 1:] == classes[:, :-1]
        keep &= ~repeat
    return keep


# ---------------------------------------------------------------- CTCGreedyDecoder-1

@register("CTCGreedyDecoder", 1)
class CTCGreedyDecoder(Op):
    """[T, N, C] logits and a [T, N] mask to [N, T, 1, 1] classes in the logits' type; blank = C - 1."""

    def infer(self, inputs):
        data, mask = inputs
        check_rank(data, 3, "data [T, N, C]")
        check_rank(mask, 2, "sequence_mask [T, N]")
        time, batch = (ANY, ANY) if data.shape is None else data.shape[:2]
        if mask.shape is not None:
            time = merge_dims(time, mask.shape[0], f"data {format_shape(data.shape)} and sequence_mask "
                                                   f"{format_shape(mask.shape)} differ in T (dimension 0)")
            batch = merge_dims(batch, mask.shape[1], f"data {format_shape(data.shape)} and sequence_mask "
                                                     f"{format_shape(mask.shape)} differ in N (dimension 1)")
        return [TensorType((batch, time, 1, 1), data.etype)]

    def run(self, data, mask):
        if mask.shape != data.shape[:2]:
            raise ShapeError(f"sequence_mask {list(mask.shape)} must be [T, N] of data {list(data.shape)}")
        classes = np.argmax(data, axis=2).T                    # [N, T]
        # A sequence ends at its first 0 in the mask.
        valid = np.cumprod(mask.T != 0, axis=1).astype(bool)
        keep = _greedy_keep(classes, valid, data.shape[2] - 1, self.attrs.ctc_merge_repeated)
        decoded = _left_align(classes, keep, -1)
        return decoded.astype(data.dtype)[:, :, None, None]


# ---------------------------------------------------------------- CTCGreedyDecoderSeqLen-6

@register("CTCGreedyDecoderSeqLen", 6)
class CTCGreedyDecoderSeqLen(Op):
    """[N, T, C] logits over the first sequence_length[n] steps; blank_index defaults to C - 1."""

    def infer(self, inputs):
        data, lengths = inputs[:2]
        if len(inputs) == 3:
            _check_types(inputs[2], "int", "blank_index")
            _check_single_value(inputs[2], "blank_index")
        check_rank(data, 3, "data [N, T, C]")
        check_rank(lengths, 1, "sequence_length [N]")
        batch, time = (ANY, ANY) if data.shape is None else data.shape[:2]
        if lengths.shape is not None:
            batch = merge_dims(batch, lengths.shape[0], f"data {format_shape(data.shape)} and sequence_length "
                                                        f"{format_shape(lengths.shape)} differ in N")
        return [TensorType((batch, time), self.attrs.classes_index_type),
                TensorType((batch,), self.attrs.sequence_length_type)]

    def run(self, data, lengths, blank_index=None):
        batch, steps, classes_count = data.shape
        if lengths.shape != (batch,):
            raise ShapeError(f"sequence_length {list(lengths.shape)} must be [N] of data {list(data.shape)}")
        if np.any((lengths < 0) | (lengths > steps)):
            raise ModelError(f"sequence_length {lengths.tolist()} must be in [0, T={steps}]")
        lengths = lengths.astype(np.int64)
        blank = classes_count - 1 if blank_index is None else _scalar(blank_index)
        classes = np.argmax(data, axis=2)                        # [N, T]
        valid = np.arange(steps) < lengths[:, None]
        keep = _greedy_keep(classes, valid, blank, self.attrs.merge_repeated)
        decoded = _left_align(classes, keep, -1)
        return (decoded.astype(self.attrs.classes_index_type.carrier),
                keep.sum(axis=1).astype(self.attrs.sequence_length_type.carrier))


# ---------------------------------------------------------------- CTCLoss-4

def _decode_targets(labels: np.ndarray, lengths: np.ndarray, unique: bool, collapse: bool):
    """Per row, the label sequence the alignments must decode to: [N, L] padded, and the lengths."""
    width = labels.shape[1]
    position = np.arange(width)
    valid = position < lengths[:, None]
    if unique:
        # Keep the first occurrence of each value among the valid labels.
        same = labels[:, :, None] == labels[:, None, :]
        earlier = np.tril(np.ones((width, width), bool), k=-1)
        keep = valid & ~np.any(same & earlier & valid[:, None, :], axis=2)
    elif collapse:
        keep = valid.copy()
        keep[:, 1:] &= labels[:, 1:] != labels[:, :-1]
        # OpenVINO collapses an empty target to [labels[n, 0]] (it seeds the collapse with it).
        keep[:, :1] |= (lengths == 0)[:, None]
    else:
        keep = valid
    return _left_align(labels, keep, 0), keep.sum(axis=1)


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    peak = np.max(x, axis=-1, keepdims=True)
    return x - peak - np.log(np.sum(np.exp(x - peak), axis=-1, keepdims=True))


def _logaddexp(*terms: np.ndarray) -> np.ndarray:
    out = terms[0]
    for t in terms[1:]:
        out = np.logaddexp(out, t)
    return out


@register("CTCLoss", 4)
class CTCLoss(Op):
    def infer(self, inputs):
        logits, logit_length, labels, label_length = inputs[:4]
        _check_types(logits, "float", "logits")
        for t, what in ((logit_length, "logit_length"), (labels, "labels"), (label_length, "label_length")):
            _check_types(t, "int", what)
        for t, rank, what in ((logits, 3, "logits [N, T, C]"), (logit_length, 1, "logit_length [N]"),
                              (labels, 2, "labels [N, T]"), (label_length, 1, "label_length [N]")):
            check_rank(t, rank, what)
        if len(inputs) == 5:
            _check_types(inputs[4], "int", "blank_index")
            check_rank(inputs[4], 0, "blank_index")
        batch, time = (ANY, ANY) if logits.shape is None else logits.shape[:2]
        for t, what in ((logit_length, "logit_length"), (labels, "labels"), (label_length, "label_length")):
            if t.shape is not None:
                batch = merge_dims(batch, t.shape[0], f"{what} {format_shape(t.shape)} and logits "
                                                      f"{format_shape(logits.shape)} differ in N (dimension 0)")
        if labels.shape is not None and not dims_compatible(labels.shape[1], time):
            raise ShapeError(f"labels {format_shape(labels.shape)} and logits {format_shape(logits.shape)} "
                             "differ in T (dimension 1)")
        return [TensorType((batch,), logits.etype)]

    def run(self, logits, logit_length, labels, label_length, blank_index=None):
        batch, steps, classes = logits.shape
        if labels.shape != (batch, steps) or logit_length.shape != (batch,) or label_length.shape != (batch,):
            raise ShapeError(f"labels {list(labels.shape)}, logit_length {list(logit_length.shape)} and label_length "
                             f"{list(label_length.shape)} do not fit logits {list(logits.shape)}")
        logit_length, label_length = logit_length.astype(np.int64), label_length.astype(np.int64)
        if np.any((logit_length < 0) | (logit_length > steps) | (label_length < 0) | (label_length > logit_length)):
            raise ModelError(f"need 0 <= label_length {label_length.tolist()} <= logit_length "
                             f"{logit_length.tolist()} <= T={steps}")
        blank = classes - 1 if blank_index is None else _scalar(blank_index)
        if not 0 <= blank < classes:
            raise ModelError(f"blank_index {blank} is outside [0, {classes})")
        targets, target_length = _decode_targets(labels.astype(np.int64), label_length,
                                                 self.attrs.unique, self.attrs.preprocess_collapse_repeated)
        in_target = np.arange(targets.shape[1]) < target_length[:, None]
        if np.any(in_target & ((targets < 0) | (targets >= classes))):
            raise ModelError(f"labels must be class indices in [0, {classes})")
        loss = self._negative_log_likelihood(_log_softmax(logits), logit_length, np.where(in_target, targets, blank),
                                             target_length, blank)
        return loss.astype(logits.dtype)

    def _negative_log_likelihood(self, log_probs, logit_length, targets, target_length, blank):
        """The alpha recursion over the states blank, l1, blank, l2, ..., lL, blank."""
        batch, steps, _ = log_probs.shape
        states = 2 * targets.shape[1] + 1
        ext = np.full((batch, states), blank, np.int64)
        ext[:, 1::2] = targets
        is_label = np.zeros(states, bool)
        is_label[1::2] = True
        # A step over the blank between two labels; with merging it needs two different labels.
        skip = np.zeros((batch, states), bool)
        skip[:, 2:] = is_label[2:]
        if self.attrs.ctc_merge_repeated:
            skip[:, 2:] &= ext[:, 2:] != ext[:, :-2]
        # Without merging a label is emitted at exactly one step: label states have no self-loop.
        stay = np.ones(states, bool) if self.attrs.ctc_merge_repeated else ~is_label
        rows = np.arange(batch)[:, None]
        neg_inf = np.full((batch, states), -np.inf)
        alpha = neg_inf.copy()
        emit = log_probs[rows, 0, ext] if steps else neg_inf
        alpha[:, :2] = emit[:, :2]
        for t in range(1, steps):
            prev = alpha
            from_prev = np.concatenate([neg_inf[:, :1], prev[:, :-1]], axis=1)
            from_skip = np.where(skip, np.concatenate([neg_inf[:, :2], prev[:, :-2]], axis=1), -np.inf)
            with np.errstate(invalid="ignore"):
                step = _logaddexp(np.where(stay, prev, -np.inf), from_prev, from_skip) + log_probs[rows, t, ext]
            alpha = np.where((t < logit_length)[:, None], step, prev)
        last = 2 * target_length
        final = np.logaddexp(alpha[np.arange(batch), last],
                             np.where(last > 0, alpha[np.arange(batch), np.maximum(last - 1, 0)], -np.inf))
        # A sequence of no steps has one (empty) alignment, and only for an empty target.
        final = np.where(logit_length == 0, np.where(target_length == 0, 0.0, -np.inf), final)
        return -final


# ---------------------------------------------------------------- GatherTree-1

def _as_indices(x: np.ndarray) -> np.ndarray:
    """Values read as integer indices: floats truncate, as OpenVINO's static_cast does."""
    if x.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            return np.trunc(x).astype(np.int64)
    return x.astype(np.int64)


@register("GatherTree", 1)
class GatherTree(Op):
    def infer(self, inputs):
        step_ids, parent_ids, max_seq_len, end_token = inputs
        etypes = {t.etype for t in inputs if t.etype.name != "dynamic"}
        if len(etypes) > 1:
            raise ShapeError("step_ids, parent_ids, max_seq_len and end_token must have one element type, got "
                             + ", ".join(str(t.etype) for t in inputs))
        etype = next(iter(etypes)) if etypes else step_ids.etype
        if etype.name != "dynamic" and not (etype.is_float or etype.is_integral):
            raise ShapeError(f"inputs must be numeric, got {etype}")
        shape = step_ids.shape
        if shape is None:
            shape = parent_ids.shape
        elif parent_ids.shape is not None:
            if len(parent_ids.shape) != len(shape):
                raise ShapeError(f"step_ids {format_shape(step_ids.shape)} and parent_ids "
                                 f"{format_shape(parent_ids.shape)} must have the same shape")
            shape = tuple(merge_dims(a, b, f"step_ids {format_shape(step_ids.shape)} and parent_ids "
                                       f"{format_shape(parent_ids.shape)} must have the same shape")
                          for a, b in zip(shape, parent_ids.shape))
        if shape is not None and len(shape) != 3:
            raise ShapeError(f"step_ids must be 3-D [max_time, batch, beam], got {format_shape(shape)}")
        check_rank(max_seq_len, 1, "max_seq_len [batch]")
        check_rank(end_token, 0, "end_token")
        if shape is not None and max_seq_len.shape is not None:
            batch = merge_dims(shape[1], max_seq_len.shape[0],
                               f"max_seq_len {format_shape(max_seq_len.shape)} does not match the batch of "
                               f"step_ids {format_shape(shape)}")
            shape = (shape[0], batch, shape[2])
        return [TensorType(shape, etype)]

    def run(self, step_ids, parent_ids, max_seq_len, end_token):
        if step_ids.ndim != 3 or parent_ids.shape != step_ids.shape or max_seq_len.shape != step_ids.shape[1:2]:
            raise ShapeError(f"step_ids {list(step_ids.shape)}, parent_ids {list(parent_ids.shape)} and max_seq_len "
                             f"{list(max_seq_len.shape)} do not fit")
        max_time, batch, beams = step_ids.shape
        parents = _as_indices(parent_ids)
        lengths = np.minimum(_as_indices(max_seq_len), max_time)
        if np.any(lengths < 0):
            raise ModelError(f"max_seq_len {max_seq_len.tolist()} must be >= 0")
        end = end_token.reshape(()).astype(step_ids.dtype)
        out = np.full(step_ids.shape, end, step_ids.dtype)
        rows = np.arange(batch)[:, None]
        beam = np.broadcast_to(np.arange(beams), (batch, beams)).copy()
        for t in range(max_time - 1, -1, -1):
            starts = (t == lengths - 1)[:, None]              # this row's last step: each beam is itself
            inside = (t < lengths - 1)[:, None]
            beam = np.where(starts, np.arange(beams), beam)
            active = starts | inside
            if np.any(active & ((beam < 0) | (beam >= beams))):
                raise ModelError(f"parent_ids at step {t + 1} point outside [0, {beams})")
            safe = np.where(active, beam, 0)
            out[t] = np.where(active, step_ids[t, rows, safe], out[t])
            beam = np.where(active, parents[t, rows, safe], beam)
        # After the first end_token of a beam, everything is end_token.  The CPU plugin compares the
        # values themselves (`*final == endToken`); only indices are truncated.
        hit = out == end
        after_end = (np.cumsum(hit, axis=0) - hit) > 0
        return np.where(after_end, end, out)
