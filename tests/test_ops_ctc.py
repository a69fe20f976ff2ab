"""CTCGreedyDecoder-1, CTCGreedyDecoderSeqLen-6, CTCLoss-4 and GatherTree-1 against OpenVINO.

Differential runs (`compare`) against the CPU plugin.  OpenVINO's reference
evaluator has no kernel for these ops; where the CPU plugin crashes or leaves
memory unwritten (CTCLoss with an empty target, GatherTree with max_seq_len 0)
the cases are hand-checked: against a brute-force sum over every path, or
against the CPU plugin on an equivalent input.  Shape functions are checked
against OpenVINO's own partial-shape inference.  Divergences are recorded in
specs/errata/signal.md.
"""
import itertools

import numpy as np
import openvino as ov
import openvino.opset1 as ops1
import openvino.opset4 as ops4
import openvino.opset6 as ops6
import pytest

import irrun
from ovutil import check_shape_function, compare, const, edited_ir, irrun_outputs, model, param, run_openvino, save

RNG = np.random.default_rng(5)
D = ov.Dimension


def scores_for(classes: np.ndarray, num_classes: int, dtype=np.float32) -> np.ndarray:
    """Logits whose argmax along the last axis is `classes`, with a clear margin (no ties)."""
    noise = RNG.standard_normal(classes.shape + (num_classes,))
    return (noise + 6.0 * np.eye(num_classes)[classes]).astype(dtype)


# ---------------------------------------------------------------- CTCGreedyDecoder-1

# [N, T] best classes; class 3 is the blank (C = 4).  Repeats, blanks between repeats, blanks at the ends.
GREEDY_CLASSES = np.array([[0, 0, 3, 0, 1, 1, 2, 3],
                           [3, 3, 2, 2, 2, 3, 3, 1],
                           [1, 2, 1, 2, 1, 2, 1, 2]])


def greedy_masks():
    full = np.ones((8, 3))
    prefix = full.copy()
    prefix[5:, 0] = 0
    prefix[2:, 2] = 0
    resumed = prefix.copy()
    resumed[4, 2] = 1                       # a 1 after the first 0 does not resume the sequence
    empty = full.copy()
    empty[:, 1] = 0
    return {"full": full, "prefix": prefix, "resumed": resumed, "empty": empty}


@pytest.mark.parametrize("merge", [True, False])
@pytest.mark.parametrize("mask", ["full", "prefix", "resumed", "empty"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_ctc_greedy_decoder(merge, mask, dtype, tmp_path):
    p, m = param([8, 3, 4], dtype), param([8, 3], dtype)
    data = scores_for(GREEDY_CLASSES.T, 4, dtype)          # [T, N, C]
    compare(model(ops1.ctc_greedy_decoder(p, m, merge), [p, m]), [data, greedy_masks()[mask].astype(dtype)],
            tmp_path)


def test_ctc_greedy_decoder_dynamic_shapes(tmp_path):
    p, m = param([-1, -1, 4]), param([-1, -1])
    data = scores_for(GREEDY_CLASSES.T, 4)
    compare(model(ops1.ctc_greedy_decoder(p, m, True), [p, m]), [data, greedy_masks()["prefix"].astype(np.float32)],
            tmp_path)


def test_ctc_greedy_decoder_by_hand(tmp_path):
    """Row 0 is 0 0 _ 0 1 1 2 _: merged 0 0 1 2, unmerged 0 0 0 1 1 2 (the blank keeps two 0s apart)."""
    p, m = param([8, 3, 4]), param([8, 3])
    data = scores_for(GREEDY_CLASSES.T, 4)
    mask = np.ones((8, 3), np.float32)
    for merge, expected in [(True, [0, 0, 1, 2, -1, -1, -1, -1]), (False, [0, 0, 0, 1, 1, 2, -1, -1])]:
        got = compare(model(ops1.ctc_greedy_decoder(p, m, merge), [p, m]), [data, mask], tmp_path / str(merge))
        assert next(iter(got.values()))[0, :, 0, 0].tolist() == expected


# ---------------------------------------------------------------- CTCGreedyDecoderSeqLen-6

SEQ_CLASSES = np.array([[0, 0, 4, 0, 1, 1, 2, 4, 3],
                        [4, 4, 2, 2, 2, 4, 4, 1, 1],
                        [1, 2, 1, 2, 1, 2, 1, 2, 1],
                        [3, 3, 3, 3, 3, 3, 3, 3, 3]])


@pytest.mark.parametrize("merge", [True, False])
@pytest.mark.parametrize("classes_type, length_type", [("i32", "i32"), ("i64", "i64"), ("i32", "i64"), ("i64", "i32")])
@pytest.mark.parametrize("blank", [None, "scalar", "vector"])
@pytest.mark.parametrize("lengths", [[9, 9, 9, 9], [9, 5, 0, 3]])
def test_ctc_greedy_decoder_seq_len(merge, classes_type, length_type, blank, lengths, tmp_path):
    length_dtype = np.int64 if classes_type == "i64" else np.int32
    p, n = param([4, 9, 5]), param([4], length_dtype)
    blank_node = {None: None, "scalar": const(2, length_dtype), "vector": const([2], length_dtype)}[blank]
    node = ops6.ctc_greedy_decoder_seq_len(p, n, blank_node, merge, classes_type, length_type)
    compare(model(node, [p, n]), [scores_for(SEQ_CLASSES, 5), np.array(lengths, length_dtype)], tmp_path)


def test_ctc_greedy_decoder_seq_len_blank_at_run_time_and_dynamic_shapes(tmp_path):
    p, n, b = param([-1, -1, 5]), param([-1], np.int32), param([], np.int32)
    node = ops6.ctc_greedy_decoder_seq_len(p, n, b, True, "i64", "i32")
    for blank in (0, 1, 4):
        compare(model(node, [p, n, b]), [scores_for(SEQ_CLASSES, 5), np.array([9, 7, 4, 2], np.int32),
                                         np.array(blank, np.int32)], tmp_path / str(blank))


def test_ctc_greedy_decoder_seq_len_f16(tmp_path):
    p, n = param([4, 9, 5], np.float16), param([4], np.int32)
    node = ops6.ctc_greedy_decoder_seq_len(p, n, None, True)
    compare(model(node, [p, n]), [scores_for(SEQ_CLASSES, 5, np.float16), np.array([9, 8, 1, 9], np.int32)], tmp_path)


def test_ctc_greedy_decoder_seq_len_too_long_is_an_error(tmp_path):
    """The CPU plugin: "Sequence length 10 cannot be greater than according decoded classes dimension size 9"."""
    p, n = param([4, 9, 5]), param([4], np.int32)
    xml = save(model(ops6.ctc_greedy_decoder_seq_len(p, n), [p, n]), tmp_path)
    inputs = [scores_for(SEQ_CLASSES, 5), np.array([9, 10, 1, 1], np.int32)]
    with pytest.raises(RuntimeError, match="cannot be greater"):
        run_openvino(xml, inputs)
    with pytest.raises(irrun.errors.ModelError, match="sequence_length"):
        irrun.load(xml).infer(inputs)


# ---------------------------------------------------------------- CTCLoss-4

LOSS_LABELS = np.array([[0, 1, 1, 2, 0, 0, 0, 0],
                        [3, 3, 3, 1, 0, 2, 0, 0],      # 3 3 3 needs blanks between when merging
                        [2, 0, 2, 1, 2, 2, 2, 2],
                        [1, 1, 0, 0, 1, 1, 3, 3]])
LOSS_CASES = {
    # logit_length, label_length
    "full": ([8, 8, 8, 8], [4, 5, 3, 8]),
    "shorter": ([8, 6, 7, 5], [4, 5, 3, 4]),
    "tight": ([4, 5, 3, 8], [4, 5, 3, 8]),            # as many steps as labels: one alignment or none
}
FLAG_COMBOS = list(itertools.product([False, True], repeat=3))


@pytest.mark.parametrize("collapse, merge, unique", FLAG_COMBOS)
@pytest.mark.parametrize("case", list(LOSS_CASES))
def test_ctc_loss(collapse, merge, unique, case, tmp_path):
    logit_length, label_length = LOSS_CASES[case]
    params = [param([4, 8, 5]), param([4], np.int32), param([4, 8], np.int32), param([4], np.int32)]
    node = ops4.ctc_loss(*params, None, collapse, merge, unique)
    inputs = [RNG.standard_normal([4, 8, 5]).astype(np.float32), np.array(logit_length, np.int32),
              LOSS_LABELS.astype(np.int32), np.array(label_length, np.int32)]
    compare(model(node, params), inputs, tmp_path)


@pytest.mark.parametrize("merge", [False, True])
@pytest.mark.parametrize("index_type", [np.int32, np.int64])
def test_ctc_loss_blank_index(merge, index_type, tmp_path):
    params = [param([4, 8, 5]), param([4], index_type), param([4, 8], index_type), param([4], index_type)]
    labels = np.where(LOSS_LABELS == 1, 4, LOSS_LABELS)         # 1 is the blank here; class 4 is a label
    node = ops4.ctc_loss(*params, const(1, index_type), False, merge, False)
    inputs = [RNG.standard_normal([4, 8, 5]).astype(np.float32), np.array([8, 7, 8, 8], index_type),
              labels.astype(index_type), np.array([4, 5, 3, 6], index_type)]
    compare(model(node, params), inputs, tmp_path)


def test_ctc_loss_dynamic_shapes_and_f16(tmp_path):
    params = [param([-1, -1, 5], np.float16), param([-1], np.int32), param([-1, -1], np.int32), param([-1], np.int32)]
    node = ops4.ctc_loss(*params, None, False, True, False)
    inputs = [RNG.standard_normal([4, 8, 5]).astype(np.float16), np.array([8, 6, 7, 5], np.int32),
              LOSS_LABELS.astype(np.int32), np.array([4, 2, 3, 4], np.int32)]
    compare(model(node, params), inputs, tmp_path, rtol=2e-3, atol=1e-3)


def brute_force_ctc_loss(logits: np.ndarray, target: list[int], blank: int, merge: bool) -> float:
    """-ln of the summed probability of every path (all C**T of them) that decodes to `target`."""
    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    total = 0.0
    for path in itertools.product(range(logits.shape[1]), repeat=logits.shape[0]):
        merged = [c for i, c in enumerate(path) if not (merge and i and path[i - 1] == c)]
        if [c for c in merged if c != blank] == target:
            total += np.exp(sum(log_probs[t, c] for t, c in enumerate(path)))
    return -np.log(total)


@pytest.mark.parametrize("merge", [False, True])
def test_ctc_loss_against_a_sum_over_every_path(merge, tmp_path):
    """Hand-checked: 5 steps, 3 classes (blank 2), targets with a repeat, one label, and none.  The empty
    target crashes the CPU plugin (it indexes below its blank-interleaved target), so no OpenVINO run."""
    logits = RNG.standard_normal([3, 5, 3]).astype(np.float32)
    targets = [[0, 0], [1], []]
    labels = np.zeros([3, 5], np.int32)
    for row, target in enumerate(targets):
        labels[row, :len(target)] = target
    params = [param([3, 5, 3]), param([3], np.int32), param([3, 5], np.int32), param([3], np.int32)]
    node = ops4.ctc_loss(*params, None, False, merge, False)
    got, = irrun_outputs(model(node, params), [logits, np.full(3, 5, np.int32), labels,
                                               np.array([len(t) for t in targets], np.int32)], tmp_path,
                         check_validate=True)
    expected = [brute_force_ctc_loss(logits[i].astype(np.float64), t, 2, merge) for i, t in enumerate(targets)]
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_ctc_loss_collapsed_empty_target_is_the_first_label(tmp_path):
    """OpenVINO seeds the collapse with labels[n, 0], so an empty target counts as that one label: the same loss
    as label_length 1 (run on the CPU plugin, which computes the length-0 case past the end of its buffer)."""
    params = [param([4, 8, 5]), param([4], np.int32), param([4, 8], np.int32), param([4], np.int32)]
    m = model(ops4.ctc_loss(*params, None, True, True, False), params)
    inputs = [RNG.standard_normal([4, 8, 5]).astype(np.float32), np.full(4, 8, np.int32), LOSS_LABELS.astype(np.int32)]
    got, = irrun_outputs(m, inputs + [np.zeros(4, np.int32)], tmp_path, check_validate=True)
    expected, = run_openvino(save(m, tmp_path / "one"), inputs + [np.ones(4, np.int32)])
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_ctc_loss_spec_example_alignment(tmp_path):
    """The spec's example: labels (0,3,2,2,...) of length 4 with C=5; the path 0 0 4 3 2 2 4 2 4 decodes to
    0 3 2 2.  When logits pick that path with near certainty the loss is about 0; for 0 3 2 (length 3)
    that path does not decode right and the loss is large."""
    path = np.array([0, 0, 4, 3, 2, 2, 4, 2, 4])
    logits = (30.0 * np.eye(5)[path])[None].astype(np.float32)
    labels = np.array([[0, 3, 2, 2, 2, 2, 2, 4, 3]], np.int32)
    params = [param([1, 9, 5]), param([1], np.int32), param([1, 9], np.int32), param([1], np.int32)]
    m = model(ops4.ctc_loss(*params, None, False, True, False), params)
    for length, small in [(4, True), (3, False)]:
        inputs = [logits, np.array([9], np.int32), labels, np.array([length], np.int32)]
        got = compare(m, inputs, tmp_path / str(length))
        loss = float(next(iter(got.values()))[0])
        assert (loss < 1e-6) if small else (loss > 20)


def test_ctc_loss_label_longer_than_logits_is_an_error(tmp_path):
    params = [param([4, 8, 5]), param([4], np.int32), param([4, 8], np.int32), param([4], np.int32)]
    xml = save(model(ops4.ctc_loss(*params), params), tmp_path)
    inputs = [RNG.standard_normal([4, 8, 5]).astype(np.float32), np.array([8, 3, 8, 8], np.int32),
              LOSS_LABELS.astype(np.int32), np.array([4, 4, 4, 4], np.int32)]
    with pytest.raises(RuntimeError, match="Label length cannot be greater"):
        run_openvino(xml, inputs)
    with pytest.raises(irrun.errors.ModelError, match="label_length"):
        irrun.load(xml).infer(inputs)


# ---------------------------------------------------------------- GatherTree-1

def gather_tree_inputs(dtype, max_seq_len, end_token=3, time=6, batch=3, beams=4):
    step_ids = RNG.integers(0, 10, [time, batch, beams]).astype(dtype)
    parent_ids = RNG.integers(0, beams, [time, batch, beams]).astype(dtype)
    return [step_ids, parent_ids, np.array(max_seq_len, dtype), np.array(end_token, dtype)]


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.float16])
@pytest.mark.parametrize("max_seq_len", [[6, 6, 6], [4, 1, 6], [9, 2, 5]])   # 9 > max_time counts as 6
def test_gather_tree(dtype, max_seq_len, tmp_path):
    params = [param([6, 3, 4], dtype), param([6, 3, 4], dtype), param([3], dtype), param([], dtype)]
    compare(model(ops1.gather_tree(*params), params), gather_tree_inputs(dtype, max_seq_len), tmp_path)


def test_gather_tree_dynamic_shapes_and_fractional_parents(tmp_path):
    """Float parent ids are truncated (1.7 is beam 1), as OpenVINO casts them."""
    params = [param([-1, -1, -1]), param([-1, -1, -1]), param([-1]), param([])]
    inputs = gather_tree_inputs(np.float32, [6, 5, 3])
    inputs[1] = inputs[1] + RNG.uniform(0, 0.9, inputs[1].shape).astype(np.float32)
    compare(model(ops1.gather_tree(*params), params), inputs, tmp_path)


@pytest.mark.parametrize("end_token", [8.0, 0.5, 8.64], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_gather_tree_fractional_step_ids_are_not_truncated(end_token, dtype, tmp_path):
    """Step ids are compared with end_token as values: 8.64 is not the end token 8 (truncated, it would
    be), 0.64 is not 0.5; only 8.64 == 8.64 ends a beam.  Parent ids are truncated (1.7 is beam 1)."""
    inputs = gather_tree_inputs(dtype, [6, 6, 6])   # full lengths: no end_token padding
    step_ids = RNG.uniform(0, 10, inputs[0].shape).astype(dtype)
    step_ids[1, :, :2] = dtype(8.64)
    step_ids[2, :, 2:] = dtype(0.64)
    inputs[0], inputs[3] = step_ids, np.array(end_token, dtype)
    inputs[1] = (inputs[1] + RNG.uniform(0, 0.9, inputs[1].shape)).astype(dtype)
    params = [param([6, 3, 4], dtype), param([6, 3, 4], dtype), param([3], dtype), param([], dtype)]
    got = next(iter(compare(model(ops1.gather_tree(*params), params), inputs, tmp_path).values()))
    ends = got == dtype(end_token)
    if end_token == 8.64:
        assert ends.any()           # some beam went through an 8.64: everything after it is 8.64
    else:
        assert not ends.any()       # nothing equals the end token, truncated or not


def test_gather_tree_by_hand(tmp_path):
    """One batch, 2 beams, 4 steps, end_token 9: each beam's path back through its parents, then 9 from
    its first 9 on."""
    step_ids = np.array([[[10, 11]], [[20, 21]], [[9, 31]], [[40, 41]]], np.int32)
    parent_ids = np.array([[[0, 0]], [[1, 0]], [[0, 1]], [[1, 0]]], np.int32)
    params = [param([4, 1, 2], np.int32), param([4, 1, 2], np.int32), param([1], np.int32), param([], np.int32)]
    got = compare(model(ops1.gather_tree(*params), params),
                  [step_ids, parent_ids, np.array([4], np.int32), np.array(9, np.int32)], tmp_path)
    # beam 0: t3 id 40, parent 1 -> t2 id 31, parent 1 -> t1 id 21, parent 0 -> t0 id 10
    # beam 1: t3 id 41, parent 0 -> t2 id 9,  parent 0 -> t1 id 20, parent 1 -> t0 id 11; after the 9: 9
    assert next(iter(got.values()))[:, 0, :].tolist() == [[10, 11], [21, 20], [31, 9], [40, 9]]


def test_gather_tree_zero_length_is_all_end_token(tmp_path):
    """The reference kernel fills everything with end_token first; the CPU plugin leaves a batch with
    max_seq_len 0 unwritten (garbage), so this is hand-checked, with the other batches against the CPU."""
    params = [param([6, 3, 4]), param([6, 3, 4]), param([3]), param([])]
    m = model(ops1.gather_tree(*params), params)
    inputs = gather_tree_inputs(np.float32, [5, 0, 2])
    got, = irrun_outputs(m, inputs, tmp_path, check_validate=True)
    assert np.all(got[:, 1] == 3)
    cpu, = run_openvino(save(m, tmp_path / "cpu"), inputs)
    np.testing.assert_array_equal(got[:, [0, 2]], cpu[:, [0, 2]])


def test_gather_tree_parent_out_of_range_is_an_error(tmp_path):
    params = [param([6, 3, 4], np.int32), param([6, 3, 4], np.int32), param([3], np.int32), param([], np.int32)]
    xml = save(model(ops1.gather_tree(*params), params), tmp_path)
    inputs = gather_tree_inputs(np.int32, [6, 6, 6])
    inputs[1][2, 1, :] = 7
    with pytest.raises(RuntimeError, match="Wrong parent index"):
        run_openvino(xml, inputs)
    with pytest.raises(irrun.errors.ModelError, match="parent_ids"):
        irrun.load(xml).infer(inputs)


# ---------------------------------------------------------------- shape functions

@pytest.mark.parametrize("data, mask, dtype", [
    ([8, 3, 4], [8, 3], np.float32),
    ([8, 3, 4], [8, 3], np.int32),
    ([-1, 3, 4], [8, -1], np.float32),
    ([D(2, 9), -1, 4], [D(5, 12), 3], np.float32),
    (None, None, np.float32),
    (None, [8, 3], np.float32),
    ([8, 3, 4], [7, 3], np.float32),
    ([8, 3, 4], [8, 2], np.float32),
    ([8, 3], [8, 3], np.float32),
    ([8, 3, 4], [8, 3, 1], np.float32),
])
def test_ctc_greedy_decoder_shape_function(data, mask, dtype):
    check_shape_function(lambda *a: ops1.ctc_greedy_decoder(*a, True), "CTCGreedyDecoder", 1,
                         {"ctc_merge_repeated": True}, [param(data, dtype), param(mask, dtype)])


@pytest.mark.parametrize("data, lengths, blank", [
    ([4, 9, 5], [4], None),
    ([-1, 9, 5], [4], None),
    ([D(2, 6), -1, 5], [D(4, 8)], None),
    (None, None, None),
    ([4, 9, 5], [4], []),
    ([4, 9, 5], [4], [1]),
    ([4, 9, 5], [4], [-1]),
    ([4, 9, 5], [4], [2]),
    ([4, 9, 5], [4], [1, 1]),
    ([4, 9, 5], [3], None),
    ([4, 9], [4], None),
    ([4, 9, 5], [4, 1], None),
])
@pytest.mark.parametrize("types", [("i32", "i64"), ("i64", "i32")])
def test_ctc_greedy_decoder_seq_len_shape_function(data, lengths, blank, types):
    args = [param(data), param(lengths, np.int32)] + ([] if blank is None else [param(blank, np.int32)])
    attrs = {"merge_repeated": True, "classes_index_type": types[0], "sequence_length_type": types[1]}
    check_shape_function(lambda *a: ops6.ctc_greedy_decoder_seq_len(*a[:2], a[2] if len(a) > 2 else None, True, *types),
                         "CTCGreedyDecoderSeqLen", 6, attrs, args)


def test_ctc_greedy_decoder_seq_len_second_output():
    check_shape_function(lambda *a: ops6.ctc_greedy_decoder_seq_len(*a, None, True, "i64", "i32"),
                         "CTCGreedyDecoderSeqLen", 6, {"classes_index_type": "i64", "sequence_length_type": "i32"},
                         [param([D(2, 6), 9, 5]), param([-1], np.int32)], all_outputs=True)


def test_ctc_greedy_decoder_seq_len_blank_index_must_be_an_integer():
    check_shape_function(lambda *a: ops6.ctc_greedy_decoder_seq_len(*a), "CTCGreedyDecoderSeqLen", 6, {},
                         [param([4, 9, 5]), param([4], np.int32), param([], np.float32)])


@pytest.mark.parametrize("logits, lengths, labels, label_lengths, blank", [
    ([4, 8, 5], [4], [4, 8], [4], None),
    ([4, 8, 5], [4], [4, 8], [4], []),
    ([-1, -1, 5], [4], [-1, 8], [-1], None),
    (None, [-1], [3, -1], None, None),
    ([D(2, 6), 8, 5], [D(4, 9)], [-1, 8], [-1], None),
    ([4, 8, 5], [3], [4, 8], [4], None),
    ([4, 8, 5], [4], [4, 7], [4], None),
    ([4, 8, 5], [4], [4, 8], [5], None),
    ([4, 8, 5], [4], [4, 8], [4], [1]),
    ([4, 8], [4], [4, 8], [4], None),
])
def test_ctc_loss_shape_function(logits, lengths, labels, label_lengths, blank):
    args = [param(logits), param(lengths, np.int32), param(labels, np.int32), param(label_lengths, np.int32)]
    if blank is not None:
        args.append(param(blank, np.int32))
    check_shape_function(lambda *a: ops4.ctc_loss(*a[:4], a[4] if len(a) > 4 else None), "CTCLoss", 4,
                         {"ctc_merge_repeated": True}, args)


@pytest.mark.parametrize("types", [(np.int32, np.int32, np.int32), (np.float32, np.int32, np.int32),
                                   (np.float32, np.float32, np.int32), (np.float16, np.uint8, np.int64)])
def test_ctc_loss_element_types(types):
    logits, lengths, labels = types
    args = [param([4, 8, 5], logits), param([4], lengths), param([4, 8], labels), param([4], lengths)]
    check_shape_function(lambda *a: ops4.ctc_loss(*a), "CTCLoss", 4, {}, args)


@pytest.mark.parametrize("step, parent, max_len, end, dtype", [
    ([6, 3, 4], [6, 3, 4], [3], [], np.float32),
    ([6, 3, 4], [6, 3, 4], [3], [], np.uint8),
    (None, [6, -1, 4], [-1], [], np.int32),
    ([-1, -1, -1], [6, 3, -1], [D(1, 5)], [], np.float32),
    (None, None, None, None, np.float32),
    ([6, 3, 4], [6, 3, 5], [3], [], np.float32),
    ([6, 3, 4], [6, 3, 4], [2], [], np.float32),
    ([6, 3], [6, 3], [3], [], np.float32),
    ([6, 3, 4], [6, 3, 4], [3], [1], np.float32),
    ([6, 3, 4], [6, 3, 4], [3], [], np.bool_),
])
def test_gather_tree_shape_function(step, parent, max_len, end, dtype):
    args = [param(step, dtype), param(parent, dtype), param(max_len, dtype), param(end, dtype)]
    check_shape_function(lambda *a: ops1.gather_tree(*a), "GatherTree", 1, {}, args)


def test_gather_tree_mixed_element_types():
    args = [param([6, 3, 4], np.int32), param([6, 3, 4], np.int32), param([3], np.int64), param([], np.int32)]
    check_shape_function(lambda *a: ops1.gather_tree(*a), "GatherTree", 1, {}, args)


# ---------------------------------------------------------------- validate

def test_validate_ctc_greedy_decoder_seq_len_declared_length(tmp_path):
    p, n = param([4, 9, 5]), param([4], np.int32)
    xml = edited_ir(model(ops6.ctc_greedy_decoder_seq_len(p, n), [p, n]), tmp_path, "CTCGreedyDecoderSeqLen",
                    output_dims=[5], port=1)
    problems = irrun.validate(xml).errors
    assert [(e.code, e.port) for e in problems] == [("E-DECLARED-SHAPE", 1)], [e.format() for e in problems]


def test_validate_ctc_greedy_decoder_declared_shape(tmp_path):
    p, m = param([8, 3, 4]), param([8, 3])
    xml = edited_ir(model(ops1.ctc_greedy_decoder(p, m), [p, m]), tmp_path, "CTCGreedyDecoder",
                    output_dims=[8, 3, 1, 1])
    assert [e.code for e in irrun.validate(xml).errors] == ["E-DECLARED-SHAPE"]


def test_validate_ctc_loss_inconsistent_batch_names_the_layer(tmp_path):
    params = [param([4, 8, 5]), param([4], np.int32), param([4, 8], np.int32), param([4], np.int32)]
    node = ops4.ctc_loss(*params)
    node.set_friendly_name("the_loss")
    xml = edited_ir(model(node, params), tmp_path, "CTCLoss", input_dims={2: [3, 8]})    # labels become [3, 8]
    with pytest.raises(RuntimeError, match="first dimension of labels"):
        ov.Core().read_model(str(xml))
    problems = irrun.validate(xml).errors
    assert any(e.layer.name == "the_loss" and "labels [3,8]" in e.message for e in problems), \
        [e.format() for e in problems]
