"""RNNCell-1, GRUCell-3, LSTMCell-1/4 and RNN/GRU/LSTMSequence-5 against OpenVINO.

* differential runs (`compare`): every direction, clip, relu/sigmoid/tanh
  activations, linear_before_reset, sequence_lengths shorter than the
  sequence (as a Parameter, which the CPU plugin runs as a TensorIterator, and
  as a Constant, which it runs as one RNN primitive), batch > 1, f16, dynamic
  shapes, f16-compressed Constant weights;
* LSTMCell-1's peepholes and input_forget, which the CPU plugin ignores (see
  specs/errata/sequence.md): checked against the same formula built from
  OpenVINO primitives (MatMul, Sigmoid, ...) and run by the CPU plugin;
* shape functions against OpenVINO's partial-shape inference, and validate.
"""
from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset1 as ops
import pytest
from irxml import hand_ir
from openvino.utils.node_factory import NodeFactory
from ovutil import assert_close, compare, compile_cpu, run_openvino, save

import irrun
from irrun.errors import ModelError, ShapeError
from irrun.etypes import from_dtype
from irrun.ops.sequence import RecurrentSequence
from irrun.registry import TensorType, implementation
from irrun.shapes import parse_partial_shape
from irrun.spec import all_specs, parse_attrs

RNG = np.random.default_rng(5)
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
DEFAULT_ACTS = {"RNN": ["tanh"], "GRU": ["sigmoid", "tanh"], "LSTM": ["sigmoid", "tanh", "tanh"]}
CELL_OPSET = {("RNN", 1): "opset3", ("GRU", 3): "opset3", ("LSTM", 4): "opset4", ("LSTM", 1): "opset1"}


def sample(shape, scale=1.0, dtype=np.float32, rng=RNG):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def attributes(kind, hidden, acts=None, clip=0.0, lbr=False, **extra):
    attrs = dict(hidden_size=hidden, activations=acts or DEFAULT_ACTS[kind], activations_alpha=[],
                 activations_beta=[], clip=clip, **extra)
    if kind == "GRU":
        attrs["linear_before_reset"] = lbr
    return attrs


def weight_shapes(kind, hidden, inputs, lbr=False, dirs=None):
    g = GATES[kind]
    shapes = [[g * hidden, inputs], [g * hidden, hidden], [(g + (1 if lbr else 0)) * hidden]]
    return shapes if dirs is None else [[dirs] + s for s in shapes]


def param(shape, dtype=np.float32):
    return ops.parameter(ov.PartialShape(shape), dtype)


# ---------------------------------------------------------------- cells

def cell_case(kind, version, batch=3, inputs=5, hidden=4, *, acts=None, clip=0.0, lbr=False, dtype=np.float32,
              dynamic=False, const_weights=False, peepholes=None, **extra):
    """(model, feeds) of one cell; weights are Parameters unless const_weights."""
    n_states = 2 if kind == "LSTM" else 1
    data_shapes = [[batch, inputs]] + [[batch, hidden]] * n_states
    shown = [[-1, inputs]] + [[-1, hidden]] * n_states if dynamic else data_shapes
    params = [param(s, dtype) for s in shown]
    feeds = [sample(s, dtype=dtype) for s in data_shapes]
    weights = [sample(s, 0.6, dtype) for s in weight_shapes(kind, hidden, inputs, lbr)]
    if const_weights:
        w_nodes = [ops.constant(w) for w in weights]
    else:
        w_nodes = [param(w.shape, dtype) for w in weights]
        params += w_nodes
        feeds += weights
    nodes = [p.output(0) for p in params[:1 + n_states]] + [w.output(0) for w in w_nodes]
    if version == 1 and kind == "LSTM":
        p = param([3 * hidden], dtype)
        params.append(p)
        feeds.append(np.zeros(3 * hidden, dtype) if peepholes is None else peepholes.astype(dtype))
        nodes.append(p.output(0))
    node = NodeFactory(CELL_OPSET[kind, version]).create(f"{kind}Cell", nodes,
                                                         attributes(kind, hidden, acts, clip, lbr, **extra))
    return ov.Model(list(node.outputs()), params), feeds


CELLS = [("RNN", 1), ("GRU", 3), ("LSTM", 4), ("LSTM", 1)]


@pytest.mark.parametrize("kind,version", CELLS)
@pytest.mark.parametrize("batch", [1, 3])
def test_cell_defaults(kind, version, batch, tmp_path):
    compare(*cell_case(kind, version, batch), tmp_path)


@pytest.mark.parametrize("kind,version", CELLS)
@pytest.mark.parametrize("clip", [0.4, 2.0, -1.0])
def test_cell_clip(kind, version, clip, tmp_path):
    """A positive clip clamps every gate pre-activation; 0 or negative clips nothing."""
    compare(*cell_case(kind, version, clip=clip), tmp_path)


@pytest.mark.parametrize("kind,version,acts", [
    ("RNN", 1, ["relu"]), ("RNN", 1, ["sigmoid"]), ("RNN", 1, ["relu", "tanh"]),   # extra names ignored
    ("GRU", 3, ["relu", "sigmoid"]), ("GRU", 3, ["tanh", "relu"]),
    ("LSTM", 4, ["relu", "sigmoid", "relu"]), ("LSTM", 4, ["tanh", "relu", "sigmoid"]),
    ("LSTM", 1, ["sigmoid", "relu", "tanh"]),
])
def test_cell_activations(kind, version, acts, tmp_path):
    compare(*cell_case(kind, version, acts=acts), tmp_path)


@pytest.mark.parametrize("clip", [0.0, 0.5])
def test_gru_cell_linear_before_reset(clip, tmp_path):
    compare(*cell_case("GRU", 3, lbr=True, clip=clip), tmp_path)


@pytest.mark.parametrize("kind,version", CELLS)
def test_cell_f16(kind, version, tmp_path):
    got = compare(*cell_case(kind, version, dtype=np.float16), tmp_path, rtol=2e-3, atol=2e-3)
    assert all(v.dtype == np.float16 for v in got.values())


@pytest.mark.parametrize("kind,version", CELLS)
def test_cell_dynamic_batch(kind, version, tmp_path):
    compare(*cell_case(kind, version, batch=2, dynamic=True), tmp_path)


@pytest.mark.parametrize("kind,version", [("GRU", 3), ("LSTM", 4)])
@pytest.mark.parametrize("compress", [False, True])
def test_cell_constant_weights(kind, version, compress, tmp_path):
    compare(*cell_case(kind, version, const_weights=True, lbr=kind == "GRU"), tmp_path, compress=compress,
            rtol=1e-3, atol=1e-4)


def lstm_v1_formula(hidden, input_forget):
    """LSTMCell-1 with peepholes as OpenVINO's reference computes it (lstm_cell_v1), from OpenVINO primitives."""
    x, h, c = param([3, 5]), param([3, hidden]), param([3, hidden])
    w, r, b, p = param([4 * hidden, 5]), param([4 * hidden, hidden]), param([4 * hidden]), param([3 * hidden])
    gates = ops.add(ops.add(ops.matmul(x, w, False, True), ops.matmul(h, r, False, True)), b)
    f, i, cand, o = ops.split(gates, ops.constant(np.int64(1)), 4).outputs()
    pf, pi, po = ops.split(p, ops.constant(np.int64(0)), 3).outputs()
    ft = ops.sigmoid(ops.add(f, ops.multiply(pf, c)))
    it = ops.subtract(ops.constant(np.float32(1)), ft) if input_forget else ops.sigmoid(ops.add(i, ops.multiply(pi, c)))
    c_new = ops.add(ops.multiply(ft, c), ops.multiply(it, ops.tanh(cand)))
    ot = ops.sigmoid(ops.add(o, ops.multiply(po, c_new)))
    return ov.Model([ops.multiply(ot, ops.tanh(c_new)), c_new], [x, h, c, w, r, b, p])


def connect_peepholes(xml, hidden):
    """Wire the P Parameter (the model's last input) to LSTMCell-1's port 6: OpenVINO's serializer drops that edge."""
    text = xml.read_text()
    cell_id = text[:text.index('type="LSTMCell"')].rsplit('<layer id="', 1)[1].split('"')[0]
    p_id = text[:text.index('<layer id="' + cell_id + '"')].rsplit('<layer id="', 1)[1].split('"')[0]
    last_in = text.index("</input>", text.index('type="LSTMCell"'))
    text = text[:last_in] + f'<port id="6" precision="FP32"><dim>{3 * hidden}</dim></port>' + text[last_in:]
    text = text.replace("<edges>", f'<edges><edge from-layer="{p_id}" from-port="0" to-layer="{cell_id}" to-port="6"/>')
    xml.write_text(text)


@pytest.mark.parametrize("input_forget", [False, True])
def test_lstm_cell_v1_peepholes_and_input_forget(input_forget, tmp_path):
    """The CPU plugin ignores P and input_forget; irrun follows the reference formula (lstm_cell_v1), run here
    as OpenVINO primitives on the CPU."""
    hidden = 4
    model, feeds = cell_case("LSTM", 1, hidden=hidden, peepholes=sample([3 * hidden]), input_forget=input_forget,
                             weights_format="fico")
    xml = save(model, tmp_path / "cell")
    connect_peepholes(xml, hidden)
    assert irrun.validate(xml).ok
    got = list(irrun.load(xml).infer(feeds).values())
    formula = compile_cpu(lstm_v1_formula(hidden, input_forget))
    for actual, expected in zip(got, formula(feeds).values()):
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)
    # ... which is not what the CPU plugin runs for this IR
    cpu = compile_cpu(xml)(feeds)
    assert not np.allclose(got[0], next(iter(cpu.values())), atol=1e-3)


@pytest.mark.parametrize("fmt", ["fico", "icof", "iofc", None])
def test_lstm_cell_v1_weights_format_keeps_fico(fmt, tmp_path):
    """OpenVINO's CPU plugin computes f, i, c, o whatever weights_format says (None: attribute left out, reads ifco)."""
    model, feeds = cell_case("LSTM", 1, weights_format=fmt or "fico")
    xml = save(model, tmp_path / "m")
    if fmt is None:
        xml.write_text(xml.read_text().replace(' weights_format="fico"', ""))
    compare_saved(xml, feeds)


def compare_saved(xml, feeds, rtol=1e-4, atol=1e-5):
    """Run an IR file already on disk (edited after saving) in OpenVINO and irrun."""
    expected = run_openvino(xml, feeds)
    assert irrun.validate(xml).ok
    got = list(irrun.load(xml).infer(feeds).values())
    for actual, exp in zip(got, expected):
        assert_close(actual, exp, rtol=rtol, atol=atol)


def test_lstm_cell_v1_without_peephole_input(tmp_path):
    """An LSTMCell-1 with six inputs (as the Model Optimizer wrote it) runs with zero peepholes."""
    model, feeds = cell_case("LSTM", 4)
    xml = save(model, tmp_path / "m")
    text = xml.read_text().replace('type="LSTMCell" version="opset4">\n\t\t\t<data hidden_size="4"',
                                   'type="LSTMCell" version="opset1">\n\t\t\t<data hidden_size="4"')
    assert 'version="opset1">\n\t\t\t<data hidden_size="4"' in text
    xml.write_text(text)
    compare_saved(xml, feeds)


# ---------------------------------------------------------------- sequences

def sequence_case(kind, direction="forward", lengths=(5, 5, 5), steps=5, inputs=3, hidden=4, *, acts=None,
                  clip=0.0, lbr=False, dtype=np.float32, const_lengths=False, dynamic=False, scale=0.6,
                  lengths_dtype=np.int32, seed=None, weights_as_inputs=False):
    """(model, feeds) of one sequence op; W, R and B are Constants, or Parameters (the last three
    inputs) with `weights_as_inputs`."""
    rng = RNG if seed is None else np.random.default_rng(seed)
    dirs = 2 if direction == "bidirectional" else 1
    batch = len(lengths)
    n_states = 2 if kind == "LSTM" else 1
    data_shapes = [[batch, steps, inputs]] + [[batch, dirs, hidden]] * n_states
    shown = [[-1, -1, inputs]] + [[-1, dirs, hidden]] * n_states if dynamic else data_shapes
    params = [param(s, dtype) for s in shown]
    feeds = [sample(s, dtype=dtype, rng=rng) for s in data_shapes]
    lengths = np.array(lengths, lengths_dtype)
    if const_lengths:
        length_node = ops.constant(lengths)
    else:
        length_node = param([-1] if dynamic else [batch], lengths_dtype)
        params.append(length_node)
        feeds.append(lengths)
    values = [sample(s, scale, dtype, rng) for s in weight_shapes(kind, hidden, inputs, lbr, dirs)]
    if weights_as_inputs:
        weights = [param(v.shape, dtype) for v in values]
        params += weights
        feeds += values
    else:
        weights = [ops.constant(v) for v in values]
    nodes = [p.output(0) for p in params[:1 + n_states]] + [length_node.output(0)] + [w.output(0) for w in weights]
    node = NodeFactory("opset5").create(f"{kind}Sequence", nodes,
                                        attributes(kind, hidden, acts, clip, lbr, direction=direction))
    return ov.Model(list(node.outputs()), params), feeds


KINDS = ["RNN", "GRU", "LSTM"]
DIRECTIONS = ["forward", "reverse", "bidirectional"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("lengths", [(5, 5), (5, 3, 1)])
def test_sequence_directions_and_lengths(kind, direction, lengths, tmp_path):
    compare(*sequence_case(kind, direction, lengths), tmp_path)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_sequence_constant_lengths(kind, direction, tmp_path):
    """Constant lengths: the CPU plugin keeps the sequence op (no TensorIterator)."""
    compare(*sequence_case(kind, direction, (2, 5, 4), const_lengths=True), tmp_path)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("lengths", [(5, 0, 2), (6, 6), (6, 2), (-1, 3)])
def test_sequence_lengths_outside_the_sequence(kind, lengths, tmp_path):
    """Forward: a row of length 0, negative or beyond T yields a final state of 0 (reference semantics)."""
    got = compare(*sequence_case(kind, "forward", lengths), tmp_path)
    final = list(got.values())[1]
    for row, n in enumerate(lengths):
        if not 1 <= n <= 5:
            assert not final[row].any()


@pytest.mark.parametrize("lengths", [(6, 2), (-1, 2)])
def test_reverse_sequence_lengths_out_of_range_refused(lengths, tmp_path):
    """OpenVINO's CPU plugin fails (its ReverseSequence checks the lengths); irrun names the layer."""
    model, feeds = sequence_case("GRU", "reverse", lengths)
    xml = save(model, tmp_path)
    with pytest.raises(ModelError, match=r"sequence_lengths \[.*\] must lie in 0\.\.5") as err:
        irrun.load(xml).infer(feeds)
    assert "GRUSequence" in str(err.value)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("clip", [0.3, 1.5])
def test_sequence_clip(kind, clip, tmp_path):
    compare(*sequence_case(kind, "bidirectional", (5, 2), clip=clip), tmp_path)


@pytest.mark.parametrize("kind,acts", [
    ("RNN", ["relu"]), ("RNN", ["sigmoid"]),
    ("GRU", ["relu", "tanh"]), ("GRU", ["tanh", "sigmoid"]),
    ("LSTM", ["relu", "sigmoid", "relu"]), ("LSTM", ["tanh", "tanh", "sigmoid"]),
])
def test_sequence_activations(kind, acts, tmp_path):
    compare(*sequence_case(kind, "reverse", (5, 4), acts=acts, scale=0.3), tmp_path)


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_gru_sequence_linear_before_reset(direction, tmp_path):
    compare(*sequence_case("GRU", direction, (5, 3), lbr=True), tmp_path)


@pytest.mark.parametrize("kind,options", [
    ("RNN", {}), ("RNN", {"clip": 0.3, "acts": ["relu"]}),
    ("GRU", {}), ("GRU", {"lbr": True, "clip": 0.5}), ("GRU", {"acts": ["tanh", "sigmoid"]}),
    ("LSTM", {}), ("LSTM", {"clip": 0.4}), ("LSTM", {"acts": ["tanh", "tanh", "sigmoid"], "scale": 0.3}),
    ("LSTM", {"dtype": np.float16}),
])
def test_bidirectional_sequences_run_both_ways_at_once(kind, options, tmp_path, monkeypatch):
    """Rows that all run every step: both directions in one stacked recurrence (the backward one
    reversed in time), checked against OpenVINO and checked to be the path taken."""
    taken = []
    run_both_ways = RecurrentSequence.run_both_ways
    monkeypatch.setattr(RecurrentSequence, "run_both_ways", lambda self, *a: taken.append(1) or run_both_ways(self, *a))
    loose = {"rtol": 3e-3, "atol": 3e-3} if options.get("dtype") is np.float16 else {}
    compare(*sequence_case(kind, "bidirectional", (7, 7, 7), steps=7, **options), tmp_path, **loose)
    assert taken


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_lstm_steps_with_default_activations_run_in_one_loop(direction, tmp_path, monkeypatch):
    """An LSTM with the default activations and no clip, every row running every step, runs its
    steps in one loop over buffers made once (`_halved_lstm_steps`): OpenVINO's result, the path
    taken, and bit for bit the values of its steps driven one call per step (`_lstm_step`, a loop
    of one step: the states carried, the backward direction's order of steps)."""
    from irrun.ops import sequence
    taken = []
    loop = sequence._halved_lstm_steps
    monkeypatch.setattr(sequence, "_halved_lstm_steps", lambda *a: taken.append(1) or loop(*a))
    model, feeds = sequence_case("LSTM", direction, (9, 9, 9), steps=9)
    compare(model, feeds, tmp_path)
    assert taken
    xml = save(model, tmp_path / "again.xml")
    fast = irrun.load(xml).infer(feeds)
    monkeypatch.setattr(sequence, "_halved_lstm_steps", loop)
    monkeypatch.setattr(sequence, "recur", _step_by_step(sequence))
    for a, b in zip(fast.values(), irrun.load(xml).infer(feeds).values()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("lbr", [False, True])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_gru_steps_with_default_activations_run_in_one_loop(lbr, direction, tmp_path, monkeypatch):
    """A GRU with the default activations and no clip, every row running every step, runs its
    steps in one loop over buffers made once (`_gru_steps`): OpenVINO's result, the path taken,
    and bit for bit the values of `_gru_step` driven one call per step; a clipped GRU does not
    take the loop."""
    from irrun.ops import sequence
    taken = []
    loop = sequence._gru_steps
    monkeypatch.setattr(sequence, "_gru_steps", lambda *a: taken.append(1) or loop(*a))
    model, feeds = sequence_case("GRU", direction, (9, 9, 9), steps=9, lbr=lbr)
    compare(model, feeds, tmp_path)
    assert taken
    xml = save(model, tmp_path / "again.xml")
    fast = irrun.load(xml).infer(feeds)
    monkeypatch.setattr(sequence, "recur", _step_by_step(sequence))
    for a, b in zip(fast.values(), irrun.load(xml).infer(feeds).values()):
        np.testing.assert_array_equal(a, b)
    monkeypatch.undo()
    taken.clear()
    monkeypatch.setattr(sequence, "_gru_steps", lambda *a: taken.append(1) or loop(*a))
    compare(*sequence_case("GRU", direction, (9, 9, 9), steps=9, lbr=lbr, clip=0.5), tmp_path / "clipped")
    assert not taken


def _step_by_step(sequence):
    """`recur` without its one-loop LSTM path: `_lstm_step` step by step."""
    def recur(kind, gx, states, lengths, reverse, p):
        steps = gx.shape[-2]
        y = np.zeros(gx.shape[:-1] + states[0].shape[-1:], dtype=gx.dtype)
        for k in range(steps):
            t = steps - 1 - k if reverse else k
            states = sequence.STEPS[kind.name](gx[..., t, :], states, p)
            y[..., t, :] = states[0]
        return y, states
    return recur


@pytest.mark.parametrize("kind,lbr", [("RNN", False), ("GRU", False), ("GRU", True), ("LSTM", False)])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_sequence_weights_fed_anew_each_call(kind, lbr, direction, tmp_path):
    """W, R and B as inputs: one loaded model fed two sets of weights gives OpenVINO's result for
    each (the laid-out weights kept for constant W, R and B must not outlive the arrays)."""
    model, feeds = sequence_case(kind, direction, (6, 6), steps=6, lbr=lbr, weights_as_inputs=True, seed=3)
    xml = save(model, tmp_path)
    m = irrun.load(xml)
    rng = np.random.default_rng(4)
    for _ in range(2):
        expected = run_openvino(xml, feeds)
        for actual, exp in zip(m.infer(feeds).values(), expected):
            assert_close(actual, exp)
        feeds = feeds[:-3] + [sample(w.shape, 0.6, rng=rng) for w in feeds[-3:]]


@pytest.mark.parametrize("kind", KINDS)
def test_sequence_f16(kind, tmp_path):
    got = compare(*sequence_case(kind, "bidirectional", (5, 3), dtype=np.float16), tmp_path, rtol=3e-3, atol=3e-3)
    assert all(v.dtype == np.float16 for v in got.values())


@pytest.mark.parametrize("kind", KINDS)
def test_sequence_dynamic_shapes(kind, tmp_path):
    compare(*sequence_case(kind, "bidirectional", (4, 4, 4), steps=4, dynamic=True), tmp_path)


@pytest.mark.parametrize("kind", KINDS)
def test_sequence_dynamic_shapes_with_short_lengths(kind, tmp_path):
    """The CPU plugin ignores sequence_lengths when the shapes are dynamic (errata); irrun gives what it
    computes for the same model with static shapes."""
    dynamic_model, feeds = sequence_case(kind, "bidirectional", (4, 2, 1), steps=4, dynamic=True, seed=1)
    static_model, _ = sequence_case(kind, "bidirectional", (4, 2, 1), steps=4, seed=1)
    expected = run_openvino(save(static_model, tmp_path / "static"), feeds)
    got = irrun.load(save(dynamic_model, tmp_path / "dynamic")).infer(feeds)
    for actual, exp in zip(got.values(), expected):
        assert_close(actual, exp)


@pytest.mark.parametrize("lengths_dtype", [np.int64, np.float32])
def test_sequence_lengths_element_types(lengths_dtype, tmp_path):
    """OpenVINO takes sequence_lengths of any numeric type."""
    compare(*sequence_case("LSTM", "forward", (5, 2), lengths_dtype=lengths_dtype), tmp_path)


@pytest.mark.parametrize("kind", KINDS)
def test_long_sequence(kind, tmp_path):
    """60 steps, hidden 32: the recurrence stays within rtol 1e-4 / atol 1e-5 of OpenVINO."""
    compare(*sequence_case(kind, "bidirectional", (60, 45), steps=60, inputs=16, hidden=32, scale=0.25), tmp_path)


def test_sequence_compressed_weights(tmp_path):
    compare(*sequence_case("LSTM", "bidirectional", (5, 3)), tmp_path, compress=True, rtol=1e-3, atol=1e-4)


def test_sequence_matches_cell_steps():
    """Hand check: a forward sequence is its cell applied step by step; the row of length 2 stops there."""
    seq = make_op("GRUSequence", 5, {"direction": "forward", "hidden_size": "4", "activations": "sigmoid,tanh"})
    cell = make_op("GRUCell", 3, {"hidden_size": "4"})
    x, h = sample([2, 3, 2]), sample([2, 1, 4])
    w, r, b = sample([1, 12, 2]), sample([1, 12, 4]), sample([1, 12])
    y, ho = seq.run(x, h, np.array([3, 2]), w, r, b)
    state = h[:, 0]
    for t in range(3):
        (state,) = cell.run(x[:, t], state, w[0], r[0], b[0])
        np.testing.assert_allclose(y[0, 0, t], state[0], rtol=1e-6)
        if t < 2:
            np.testing.assert_allclose(y[1, 0, t], state[1], rtol=1e-6)
        if t == 1:
            np.testing.assert_allclose(ho[1, 0], state[1], rtol=1e-6)
    assert not y[1, 0, 2].any()
    np.testing.assert_allclose(ho[0, 0], state[0], rtol=1e-6)


# ---------------------------------------------------------------- shape functions

def make_op(type_name, version, raw_attrs):
    spec = all_specs()[(type_name, version)]
    attrs, problems = parse_attrs(spec, raw_attrs)
    assert not [p for p in problems if p.severity == "error"], problems
    return implementation(type_name, version)(spec, attrs)


def ov_shapes(type_name, opset, shapes, attrs, types):
    """OpenVINO's output shapes for a node on Parameters of these partial shapes, or the error text."""
    params = [ops.parameter(ov.PartialShape.dynamic() if s is None else ov.PartialShape(s), t)
              for s, t in zip(shapes, types)]
    try:
        node = NodeFactory(opset).create(type_name, [p.output(0) for p in params], attrs)
    except RuntimeError as exc:
        return str(exc)
    return [parse_partial_shape(str(node.get_output_partial_shape(i))) for i in range(node.get_output_size())]


def irrun_shapes(type_name, version, shapes, raw_attrs, types):
    op = make_op(type_name, version, raw_attrs)
    try:
        out = op.infer([TensorType(None if s is None else parse_partial_shape(str(ov.PartialShape(s))),
                                   from_dtype(t)) for s, t in zip(shapes, types)])
    except ShapeError as exc:
        return exc
    return [t.shape for t in out]


D = ov.Dimension
CELL_SHAPE_CASES = [
    ("RNN", 1, [[2, 3], [2, 4], [4, 3], [4, 4], [4]], False),
    ("RNN", 1, [[2, 3], [2, 4], [4, 7], [4, 4], [4]], False),        # X's input size is not checked
    ("RNN", 1, [[2, 3], [2, 4], [5, 3], [4, 4], [4]], False),        # W rows
    ("RNN", 1, [[-1, 3], [2, -1], [-1, 3], [-1, -1], [-1]], False),
    ("RNN", 1, [[-1, 3], [2, -1], [8, 3], [-1, -1], [-1]], False),   # hidden from W's rows
    ("RNN", 1, [[3, 3], [2, 4], [4, 3], [4, 4], [4]], False),        # batch
    ("RNN", 1, [[2, 3, 1], [2, 4], [4, 3], [4, 4], [4]], False),     # rank
    ("RNN", 1, [None, None, None, None, None], False),
    ("GRU", 3, [[2, 3], [2, 4], [12, 3], [12, 4], [16]], True),
    ("GRU", 3, [[2, 3], [2, 4], [12, 3], [12, 4], [12]], True),      # B needs 4 blocks with linear_before_reset
    ("GRU", 3, [None, [2, 4], None, None, None], False),
    ("GRU", 3, [[-1, 3], [-1, -1], [D(6, 20), 3], [-1, -1], [-1]], False),
    ("GRU", 3, [[-1, 3], [-1, -1], [10, 3], [-1, -1], [-1]], False),  # 10 rows are not 3 gates
    ("LSTM", 4, [[2, 3], [2, 4], [2, 4], [16, 3], [16, 4], [16]], False),
    ("LSTM", 4, [[2, 3], [2, 4], [2, 5], [16, 3], [16, 4], [16]], False),   # C's hidden size
    ("LSTM", 4, [[2, 3], [2, 4], [2, 4], [16, 3], [16, 4], [12]], False),
    ("LSTM", 4, [[D(1, 4), 3], [-1, -1], [D(2, 8), 4], [16, 3], [-1, -1], [-1]], False),
    ("LSTM", 1, [[2, 3], [2, 4], [2, 4], [16, 3], [16, 4], [16], [12]], False),
    ("LSTM", 1, [[2, 3], [2, 4], [2, 4], [16, 3], [16, 4], [16], [11]], False),
]


@pytest.mark.parametrize("kind,version,shapes,lbr", CELL_SHAPE_CASES)
def test_cell_shape_function_matches_openvino(kind, version, shapes, lbr):
    attrs = attributes(kind, 4, lbr=lbr)
    expected = ov_shapes(f"{kind}Cell", CELL_OPSET[kind, version], shapes, attrs, [np.float32] * len(shapes))
    raw = {"linear_before_reset": str(lbr).lower()} if kind == "GRU" else {}
    raw["hidden_size"] = "4"
    got = irrun_shapes(f"{kind}Cell", version, shapes, raw, [np.float32] * len(shapes))
    if isinstance(expected, str):
        assert isinstance(got, ShapeError), f"OpenVINO refuses ({expected.splitlines()[-1]}), irrun gives {got}"
    else:
        assert got == expected


SEQ_SHAPE_CASES = [
    ("RNN", "forward", [[2, 5, 3], [2, 1, 4], [2], [1, 4, 3], [1, 4, 4], [1, 4]]),
    ("GRU", "bidirectional", [[2, 5, 3], [2, 2, 4], [2], [2, 12, 3], [2, 12, 4], [2, 12]]),
    ("GRU", "bidirectional", [[2, 5, 3], [2, 1, 4], [2], [1, 12, 3], [1, 12, 4], [1, 12]]),
    ("GRU", "forward", [[2, 5, 3], [2, 1, 4], [2], [1, 11, 3], [1, 12, 4], [1, 12]]),
    ("GRU", "forward", [[2, 5, 3], [2, 1, 4], [2], [1, 12, 7], [1, 12, 4], [1, 12]]),
    ("GRU", "forward", [[2, 5, 3], [2, 1, 4], [2], [1, 12, 3], [1, 12, 5], [1, 12]]),
    ("GRU", "forward", [[2, 5, 3], [2, 1, 4], [3], [1, 12, 3], [1, 12, 4], [1, 12]]),
    ("LSTM", "forward", [[-1, -1, 3], [-1, 1, -1], [-1, 1, -1], [-1], [1, 16, 3], [1, 16, 4], [1, 16]]),
    ("LSTM", "forward", [[-1, -1, 3], [-1, 1, -1], [-1, 1, -1], [-1], [-1, 16, 3], [-1, -1, -1], [-1, -1]]),
    ("LSTM", "reverse", [[-1, -1, 3], [-1, -1, -1], [-1, -1, -1], [-1], [1, 16, 3], [-1, -1, -1], [-1, -1]]),
    ("LSTM", "bidirectional", [None, None, None, None, None, None, None]),
    ("LSTM", "bidirectional", [[D(1, 3), 7, 3], [-1, -1, -1], [2, -1, 5], [D(2, 6)], [-1, 20, 3], [-1, -1, -1],
                               [-1, -1]]),
    ("RNN", "forward", [[2, 5, 3, 1], [2, 1, 4], [2], [1, 4, 3], [1, 4, 4], [1, 4]]),
    ("RNN", "forward", [[2, 5, 3], [2, 1, 4], [2, 1], [1, 4, 3], [1, 4, 4], [1, 4]]),
    ("RNN", "reverse", [[2, 5, 3], [2, 1, 4], [2], [2, 4, 3], [1, 4, 4], [1, 4]]),
]


@pytest.mark.parametrize("kind,direction,shapes", SEQ_SHAPE_CASES)
def test_sequence_shape_function_matches_openvino(kind, direction, shapes):
    attrs = attributes(kind, 4, direction=direction)
    types = [np.float32] * len(shapes)
    types[2 if kind != "LSTM" else 3] = np.int32
    expected = ov_shapes(f"{kind}Sequence", "opset5", shapes, attrs, types)
    got = irrun_shapes(f"{kind}Sequence", 5, shapes, {"direction": direction, "hidden_size": "4",
                                                     "activations": ",".join(attrs["activations"])}, types)
    if isinstance(expected, str):
        assert isinstance(got, ShapeError), f"OpenVINO refuses ({expected.splitlines()[-1]}), irrun gives {got}"
    else:
        assert got == expected


def test_mixed_element_types_refused():
    types = [np.float32, np.float32, np.float16, np.float32, np.float32]
    shapes = [[2, 3], [2, 4], [4, 3], [4, 4], [4]]
    assert isinstance(ov_shapes("RNNCell", "opset3", shapes, attributes("RNN", 4), types), str)
    got = irrun_shapes("RNNCell", 1, shapes, {"hidden_size": "4"}, types)
    assert isinstance(got, ShapeError) and "element types differ (W is f16, expected f32)" in got.message


# ---------------------------------------------------------------- validate

def cell_ir(tmp_path, w_rows=16, out=(2, 4), attrs=None, name="cell"):
    return hand_ir(tmp_path, "LSTMCell", [([2, 3], "FP32"), ([2, 4], "FP32"), ([2, 4], "FP32"),
                                          ([w_rows, 3], "FP32"), ([16, 4], "FP32"), ([16], "FP32")],
                   list(out), attrs if attrs is not None else {"hidden_size": "4"}, version="opset4", name=name)


def test_validate_clean_cell(tmp_path):
    report = irrun.validate(cell_ir(tmp_path))
    assert report.ok, [d.format() for d in report]


def test_validate_wrong_declared_output(tmp_path):
    errors = irrun.validate(cell_ir(tmp_path, out=(2, 5))).errors
    assert [e.code for e in errors] == ["E-DECLARED-SHAPE"]
    assert "hidden size" in errors[0].message


def test_validate_inconsistent_weights_names_layer(tmp_path):
    errors = irrun.validate(cell_ir(tmp_path, w_rows=12, name="bad_lstm")).errors
    assert any(e.layer.name == "bad_lstm" and "W [12,3]: 12 rows, expected 4 x hidden size 4 = 16" in e.message
               for e in errors), [e.format() for e in errors]


@pytest.mark.parametrize("activations,message", [
    ("sigmoid,elu,tanh", 'activation "elu" is not supported'),
    ("sigmoid,tanh", "needs 3 activation functions, got 2"),
])
def test_validate_unsupported_activations(activations, message, tmp_path):
    """OpenVINO reads these but its CPU plugin cannot compile them."""
    errors = irrun.validate(cell_ir(tmp_path, attrs={"hidden_size": "4", "activations": activations})).errors
    assert any(message in e.message for e in errors), [e.format() for e in errors]


def test_validate_sequence_without_activations(tmp_path):
    """A sequence whose activations attribute is missing reads as none: OpenVINO cannot compile it."""
    model, _ = sequence_case("RNN")
    xml = save(model, tmp_path)
    xml.write_text(xml.read_text().replace(' activations="tanh"', ""))
    errors = irrun.validate(xml).errors
    assert any("needs 1 activation function, got 0" in e.message for e in errors), [e.format() for e in errors]


def test_validate_integer_cell_unsupported(tmp_path):
    """OpenVINO infers an i32 cell; its CPU plugin rounds inside the gates (cells) or refuses (sequences):
    irrun reports E-OP-UNSUPPORTED rather than guess."""
    xml = hand_ir(tmp_path, "RNNCell", [([2, 3], "I32"), ([2, 4], "I32"), ([4, 3], "I32"), ([4, 4], "I32"),
                                        ([4], "I32")], [2, 4], {"hidden_size": "4"}, version="opset1", name="int_rnn")
    errors = irrun.validate(xml).errors
    assert [(e.code, e.layer.name) for e in errors] == [("E-OP-UNSUPPORTED", "int_rnn")], [e.format() for e in errors]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_sequence_of_no_steps_keeps_its_initial_states(kind, direction, tmp_path):
    """X with 0 time steps (the CPU plugin's TensorIterator refuses it): Y is empty and the final
    states are the initial ones, as the reference's loop of no steps leaves them (the LSTM's
    one-loop path included)."""
    model, feeds = sequence_case(kind, direction, (0, 0), steps=0)
    got = list(irrun.load(save(model, tmp_path)).infer(feeds).values())
    assert got[0].shape[2] == 0
    for final, initial in zip(got[1:], feeds[1:1 + len(got) - 1]):
        np.testing.assert_array_equal(final, initial)
