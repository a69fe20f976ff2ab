"""Load-time optimisation (irrun/optimize.py): each rewrite fires where it should and nowhere else.

Every model here runs in OpenVINO and in irrun with optimize on; the optimized outputs must also be
bit for bit those of optimize=False (the fused code makes the same NumPy calls in the same order:
checking irrun against itself is the point there, on top of the differential check).
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import openvino as ov
import openvino.opset13 as ops
import pytest
from click.testing import CliRunner
from openvino.op.util import Variable, VariableInfo

import irrun
from irrun.cli import cli
from irrun.executor import CONVOLUTION_TYPES, GEMM_TYPES
from irrun.kv_caches import _BeamGather, _Growing, _Keeping
from irrun.optimize import FusedChain
from irrun.watch import Collect, Timings
from ovutil import CPU_F32, assert_blas_close, assert_close, compile_cpu, openvino_layer_outputs, run_openvino, save

RNG = np.random.default_rng(11)


pytestmark = pytest.mark.usefixtures("optimizing_by_default")


def _c(shape, scale=1.0):
    return ops.constant((RNG.standard_normal(shape) * scale).astype(np.float32))


def _named(node, name):
    node.set_friendly_name(name)
    return node


def fused_steps(m: irrun.Model) -> list[list[str]]:
    """The layer names of each fused step of the plan an unwatched call runs."""
    return [[n.layer.name for n in s.members] for s in m._plan.steps if s.members]


def check_both_ways(xml, feeds: dict, *, rtol=1e-4, atol=1e-5) -> irrun.Model:
    """OpenVINO's outputs, and optimize on == optimize off: bit for bit, or within BLAS's rounding
    where a layer's arithmetic is BLAS's (a product run weight first or written channels-last may
    come out of OpenBLAS with other last bits: ovutil.assert_blas_close); returns the optimized model."""
    on, off = irrun.load(xml, optimize=True), irrun.load(xml, optimize=False)
    expected = run_openvino(xml, [feeds[i.name] for i in on.inputs])
    got_on, got_off = on.infer(feeds), off.infer(feeds)
    blas = any(layer.op_type in GEMM_TYPES | CONVOLUTION_TYPES for layer in on.layers.values())
    for (name, a), b, e in zip(got_on.items(), got_off.values(), expected):
        assert_close(a, e, rtol=rtol, atol=atol, what=name)
        if blas:
            assert_blas_close(a, b, what=name)
        else:
            assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True), name
    return on


def _chain_model():
    """x -> Add c -> Relu -> Multiply c -> Sigmoid -> Clamp -> HSwish -> Reshape -> Tanh."""
    x = ops.parameter([2, 3, 8], ov.Type.f32, name="x")
    y = _named(ops.add(x, _c((1, 3, 1))), "add")
    y = _named(ops.relu(y), "relu")
    y = _named(ops.multiply(y, ops.constant(np.float32(1.5))), "mul")
    y = _named(ops.sigmoid(y), "sig")
    y = _named(ops.clamp(y, 0.1, 0.9), "clamp")
    y = _named(ops.hswish(y), "hswish")
    y = _named(ops.reshape(y, ops.constant(np.array([2, 24], np.int64)), False), "flat")
    y = _named(ops.tanh(y), "tanh")
    return ov.Model([ops.result(y)], [x])


def test_an_elementwise_chain_is_one_step(tmp_path):
    xml = save(_chain_model(), tmp_path)
    m = check_both_ways(xml, {"x": RNG.standard_normal((2, 3, 8)).astype(np.float32)})
    assert fused_steps(m) == [["add", "relu", "mul", "sig", "clamp", "hswish", "flat", "tanh"]]
    assert len(irrun.load(xml, optimize=False)._plan.steps) == 9       # 8 layers and the Result


@pytest.mark.parametrize("shape", [(1, 64, 128, 128), (3, 5)], ids=["large", "small"])
def test_chains_of_every_fusable_op(shape, tmp_path):
    """Large data runs the chain in parts; small data inlines the activations' NumPy calls."""
    x = ops.parameter(list(shape), ov.Type.f32, name="x")
    side = (1, shape[1]) + (1,) * (len(shape) - 2)
    y = ops.subtract(_c(side), x)                               # the data second
    y = ops.divide(y, ops.constant(np.float32(2.5)))
    y = ops.power(ops.abs(y), ops.constant(np.float32(0.5)))   # (Abs is not fused: it starts a chain)
    for make in (ops.swish, ops.mish, ops.hsigmoid, lambda t: ops.gelu(t, "tanh"), lambda t: ops.gelu(t, "erf"),
                 ops.exp, lambda t: ops.swish(t, ops.constant(np.float32(0.7))), ops.sqrt, ops.log, ops.sin, ops.cos):
        y = make(ops.add(y, ops.constant(np.float32(1.25))))
    xml = save(ov.Model([ops.result(y)], [x]), tmp_path)
    m = check_both_ways(xml, {"x": RNG.standard_normal(shape).astype(np.float32)}, rtol=1e-4, atol=1e-4)
    # Subtract, Divide; then Abs (no bound kernel: not fused) ends the chain, and Power starts another
    assert [len(chain) for chain in fused_steps(m)] == [2, 1 + 2 * 11]


def test_a_chain_after_a_head_runs_in_its_output(tmp_path):
    """MatMul -> Add bias -> Gelu, Convolution -> Add -> Relu, MVN -> Multiply -> Add (a layer norm):
    the chain runs in the array the head made."""
    x = ops.parameter([2, 4, 16], ov.Type.f32, name="x")
    y = ops.gelu(ops.add(ops.matmul(x, _c((16, 16)), False, False), _c((16,))), "erf")
    y = ops.add(ops.multiply(ops.mvn(y, ops.constant(np.array([-1])), True, 1e-5, "inside_sqrt"), _c((16,))),
                _c((16,)))
    img = ops.parameter([1, 3, 12, 12], ov.Type.f32, name="img")
    z = ops.relu(ops.add(ops.convolution(img, _c((8, 3, 3, 3)), [1, 1], [1, 1], [1, 1], [1, 1]), _c((1, 8, 1, 1))))
    xml = save(ov.Model([ops.result(y), ops.result(z)], [x, img]), tmp_path)
    m = check_both_ways(xml, {"x": RNG.standard_normal((2, 4, 16)).astype(np.float32),
                              "img": RNG.standard_normal((1, 3, 12, 12)).astype(np.float32)})
    heads = sorted(m._plan.analysis.nodes[s.members[0].id].layer.op_type for s in m._plan.steps if s.members)
    assert heads == ["Convolution", "MVN", "MatMul"]
    assert all(s.op.head for s in m._plan.steps if s.members)


def _branches():
    """a = x + c has two readers; b = Relu(a) is a Result too; d = Sigmoid(b * c) goes on."""
    x = ops.parameter([4, 8], ov.Type.f32, name="x")
    a = _named(ops.add(x, _c((1, 8))), "a")
    b = _named(ops.relu(a), "b")
    c = _named(ops.multiply(b, _c((4, 8))), "c")
    d = _named(ops.sigmoid(c), "d")
    e = _named(ops.tanh(d), "e")
    other = _named(ops.exp(a), "other")
    return ov.Model([ops.result(e), ops.result(b), ops.result(other)], [x])


def test_no_fusion_past_a_tensor_read_elsewhere(tmp_path):
    """Two readers (a) and a Result (b) end chains; b's own chain is cut there too."""
    xml = save(_branches(), tmp_path)
    m = check_both_ways(xml, {"x": RNG.standard_normal((4, 8)).astype(np.float32)})
    assert fused_steps(m) == [["c", "d", "e"]]


def test_no_fusion_past_a_tensor_an_assign_keeps(tmp_path):
    x = ops.parameter([2, 3], ov.Type.f32, name="x")
    info = VariableInfo()
    info.data_shape, info.data_type, info.variable_id = ov.PartialShape([2, 3]), ov.Type.f32, "v"
    var = Variable(info)
    read = ops.read_value(ops.constant(np.zeros((2, 3), np.float32)), var)
    kept = _named(ops.add(read, x), "kept")
    out = _named(ops.sigmoid(ops.relu(kept)), "out")
    xml = save(ov.Model([ops.result(out)], [ops.assign(kept, var)], [x]), tmp_path)
    m = irrun.load(xml)
    assert all("kept" not in names[:-1] for names in fused_steps(m))
    feed = np.full((2, 3), -1.0, np.float32)
    for step in (1, 2):
        m.infer([feed])
        np.testing.assert_array_equal(m.state["v"], step * feed)


def test_a_watcher_gets_the_values_of_fused_away_layers(tmp_path):
    """add_outputs, intermediates and a Collect of one hidden layer run a plan keeping it (equal to
    OpenVINO's values); a timing watcher runs the fused plan and sees the time on the first layer."""
    xml = save(_chain_model(), tmp_path)
    feeds = {"x": RNG.standard_normal((2, 3, 8)).astype(np.float32)}
    m = irrun.load(xml)
    expected = openvino_layer_outputs(xml, feeds)
    every = m.infer(feeds, intermediates=True)
    for key in ("add:0", "relu:0", "mul:0", "sig:0", "clamp:0", "hswish:0", "flat:0", "tanh:0"):
        assert_close(every[key], expected[key], what=key)
    picked = Collect(frozenset(l.id for l in m.layers.values() if l.name == "clamp"))
    m.infer(feeds, watch=[picked])
    assert_close(picked.values["clamp:0"], expected["clamp:0"], what="clamp")
    m.add_outputs(["sig"])
    assert_close(m.infer(feeds)["sig:0"], expected["sig:0"], what="added sig")
    timings = Timings()
    irrun.load(xml).infer(feeds, watch=[timings])
    names = [t.node.layer.name for t in timings.steps]
    assert names == ["add", "relu", "mul", "sig", "clamp", "hswish", "flat", "tanh"]
    first, rest = timings.steps[0], timings.steps[1:-1]
    assert first.fused == tuple(names[1:]) and first.seconds > 0
    assert all(t.seconds == 0 and t.fused_into == "add" for t in rest)
    assert [t.output_shapes for t in timings.steps][-2:] == [((2, 24),), ((2, 24),)]


def test_profile_attributes_a_fused_step_to_its_first_layer(tmp_path):
    xml = save(_chain_model(), tmp_path)
    r = CliRunner().invoke(cli, ["infer", str(xml), "-i", f"x={_npy(tmp_path)}", "--profile", "--repeat", "2"])
    assert r.exit_code == 0, r.output
    assert "+ fused: relu, mul, sig, clamp and 3 more" in r.output
    unfused = CliRunner().invoke(cli, ["infer", str(xml), "-i", f"x={_npy(tmp_path)}", "--profile", "--repeat", "2",
                                       "--no-optimize"])
    assert unfused.exit_code == 0 and "fused" not in unfused.output


def _npy(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, RNG.standard_normal((2, 3, 8)).astype(np.float32))
    return path


def test_a_failing_head_is_named(tmp_path):
    """A chain's head whose inputs do not fit at run time (dynamic shapes): its layer is named."""
    x = ops.parameter([-1, -1], ov.Type.f32, name="x")
    y = ops.relu(ops.add(_named(ops.matmul(x, _c((4, 8)), False, False), "mm"), _c((8,))))
    m = irrun.load(save(ov.Model([ops.result(y)], [x]), tmp_path))
    assert fused_steps(m)
    np.testing.assert_array_equal(m.infer([np.ones((2, 4), np.float32)])[0].shape, (2, 8))
    with pytest.raises(irrun.ModelError, match='"mm"'):
        m.infer([np.ones((2, 3), np.float32)])


def test_in_place_is_refused_where_another_operand_views_the_data(tmp_path):
    """Relu(a) -> Reshape -> Add(view of a): a dies at the fused step, but the step must not write
    over it (its last stage reads a through the view)."""
    x = ops.parameter([1, 4, 6, 6], ov.Type.f32, name="x")
    a = ops.add(x, _c((1, 4, 1, 1)))
    view = ops.reshape(a, ops.constant(np.array([1, 144], np.int64)), False)
    out = ops.add(view, ops.reshape(ops.relu(a), ops.constant(np.array([1, 144], np.int64)), False))
    xml = save(ov.Model([ops.result(out)], [x]), tmp_path)
    m = check_both_ways(xml, {"x": RNG.standard_normal((1, 4, 6, 6)).astype(np.float32)})
    assert fused_steps(m)


def test_dynamic_chains_and_recurring_shapes(tmp_path):
    """A dynamic model: the chain is fused; shapes that recur get kernels bound for them; other
    shapes still come out right."""
    x = ops.parameter([-1, 16], ov.Type.f32, name="x")
    y = ops.reshape(ops.sigmoid(ops.multiply(ops.add(x, _c((1, 16))), _c((16,)))),
                    ops.constant(np.array([-1, 4, 4], np.int64)), False)
    y = ops.softmax(y, -1)
    xml = save(ov.Model([ops.result(y)], [x]), tmp_path)
    m = irrun.load(xml)
    assert fused_steps(m)
    for rows in (3, 3, 3, 5, 3, 1):
        feeds = {"x": RNG.standard_normal((rows, 16)).astype(np.float32)}
        (expected,) = run_openvino(xml, [feeds["x"]])
        assert_close(m.infer(feeds)[0], expected)
    softmax = next(s for s in m._plan.steps if s.node.layer.op_type == "Softmax")
    assert softmax.check.memo[0] == ((1, 4, 4),) and softmax.check.memo[4] is None      # seen once: not bound
    m.infer({"x": np.ones((1, 16), np.float32)})
    assert softmax.check.memo[4] is not None                                             # again: bound
    # (a Reshape works its shape out by inference's own rule and makes a view: no check)
    assert next(s for s in m._plan.steps if s.node.layer.op_type == "Reshape").check is None


def test_checks_follow_the_values_shape_inference_reads(tmp_path):
    """Broadcast to a shape given as an input: same input shapes, other values, another output
    size; the memory limit still holds for it."""
    x = ops.parameter([1, 3], ov.Type.f32, name="x")
    target = ops.parameter([2], ov.Type.i64, name="target")
    y = ops.relu(ops.broadcast(ops.add(x, _c((1, 3))), target))
    xml = save(ov.Model([ops.result(y)], [x, target]), tmp_path)
    m = irrun.load(xml, max_memory=4096)
    data = RNG.standard_normal((1, 3)).astype(np.float32)
    for rows in (2, 5, 2):
        feeds = [data, np.array([rows, 3], np.int64)]
        (expected,) = run_openvino(xml, feeds)
        assert_close(m.infer(feeds)[0], expected)
    with pytest.raises(irrun.ResourceLimitError, match="memory limit"):
        m.infer([data, np.array([1000, 3], np.int64)])


# ---------------------------------------------------------------- KV caches

def _kv_model():
    """A cache [batch, 2, past, 4] per call: past = Gather(ReadValue, beam_idx); past + new keys
    (Concat on axis 2) are assigned back and attended to by the query."""
    info = VariableInfo()
    info.data_shape, info.data_type, info.variable_id = ov.PartialShape([-1, 2, -1, 4]), ov.Type.f32, "cache"
    var = Variable(info)
    new = ops.parameter([-1, 2, -1, 4], ov.Type.f32, name="new")
    query = ops.parameter([-1, 2, 1, 4], ov.Type.f32, name="query")
    beam = ops.parameter([-1], ov.Type.i32, name="beam_idx")
    # (no initializing input: zeros of the variable's shape, its dynamic dims 0; the first Gather
    # then picks rows that are not there, which gives zeros in both)
    past = ops.gather(ops.read_value(var), beam, ops.constant(np.int64(0)))
    grown = ops.concat([past, new], 2)
    scores = ops.softmax(ops.matmul(query, grown, False, True), -1)
    out = ops.matmul(scores, grown, False, False)
    return ov.Model([ops.result(out)], [ops.assign(grown, var)], [new, query, beam])


def test_a_kv_cache_grows_in_place_with_openvinos_values(tmp_path):
    xml = save(_kv_model(), tmp_path)
    m = irrun.load(xml)
    kinds = {type(s.op) for s in m._plan.steps}
    assert {_Growing, _Keeping, _BeamGather} <= kinds
    compiled = compile_cpu(xml, CPU_F32)
    request = compiled.create_infer_request()

    def both(feeds):
        expected = request.infer(feeds)[compiled.outputs[0]].copy()
        assert_close(m.infer(feeds)[0], expected)
        ov_state = {s.name: s.state.data.copy() for s in request.query_state()}
        assert_close(m.state["cache"], ov_state["cache"], rtol=0, atol=0, what="state")

    def step(batch, tokens, beam):
        return {"new": RNG.standard_normal((batch, 2, tokens, 4)).astype(np.float32),
                "query": RNG.standard_normal((batch, 2, 1, 4)).astype(np.float32),
                "beam_idx": np.array(beam, np.int32)}

    both(step(2, 5, [0, 1]))                     # prefill
    buffer = m._plan.steps[[type(s.op) for s in m._plan.steps].index(_Growing)].op.cache
    for _ in range(3):
        both(step(2, 1, [0, 1]))                 # identity beams: appended in place
    first = buffer.buffer
    both(step(2, 1, [0, 1]))
    assert buffer.buffer is first and m.state["cache"].shape == (2, 2, 9, 4)
    both(step(2, 1, [1, 1]))                     # beam search: rows reordered
    both(step(2, 1, [1, 0]))
    for _ in range(12):                          # past the buffer's room: a bigger one
        both(step(2, 1, [0, 1]))
    assert m.state["cache"].shape == (2, 2, 23, 4)
    m.reset_state()
    request.reset_state()
    both(step(1, 3, [0]))
    assert m.state["cache"].shape == (1, 2, 3, 4)


def _sliding_cache_model(window: int):
    """A streaming state [1, 2, window, 4]: Concat(ReadValue, new) on axis 2, the last `window`
    tokens kept by a Slice and assigned back; the query attends to the kept ones."""
    info = VariableInfo()
    info.data_shape, info.data_type, info.variable_id = ov.PartialShape([1, 2, window, 4]), ov.Type.f32, "state"
    var = Variable(info)
    new = ops.parameter([1, 2, 1, 4], ov.Type.f32, name="new")
    query = ops.parameter([1, 2, 1, 4], ov.Type.f32, name="query")
    past = ops.read_value(ops.constant(np.zeros((1, 2, window, 4), np.float32)), var)
    kept = ops.slice(ops.concat([past, new], 2), np.array([1]), np.array([window + 1]), np.array([1]), np.array([2]))
    out = ops.matmul(ops.softmax(ops.matmul(query, kept, False, True), -1), kept, False, False)
    return ov.Model([ops.result(out)], [ops.assign(kept, var)], [new, query])


def test_a_sliding_window_state_slides_in_its_buffer_with_openvinos_values(tmp_path):
    """Concat -> Slice -> Assign: each call's state is a window of one buffer, the new token
    written after it; a new buffer only once the room after the window is used up."""
    xml = save(_sliding_cache_model(6), tmp_path)
    m = irrun.load(xml)
    kinds = [type(s.op) for s in m._plan.steps]
    assert _Growing in kinds and _Keeping in kinds
    cache = m._plan.steps[kinds.index(_Growing)].op.cache
    compiled = compile_cpu(xml, CPU_F32)
    request = compiled.create_infer_request()
    buffers = []
    for _ in range(30):
        feeds = {"new": RNG.standard_normal((1, 2, 1, 4)).astype(np.float32),
                 "query": RNG.standard_normal((1, 2, 1, 4)).astype(np.float32)}
        expected = request.infer(feeds)[compiled.outputs[0]].copy()
        assert_close(m.infer(feeds)[0], expected)
        ov_state = {s.name: s.state.data.copy() for s in request.query_state()}
        assert_close(m.state["state"], ov_state["state"], rtol=0, atol=0, what="state")
        buffers.append(cache.buffer)       # (kept: ids of freed arrays come back)
    assert len({id(b) for b in buffers}) <= 3      # (16 tokens of room: a new buffer every 16 calls)


def test_a_failed_call_leaves_the_cache_as_it_was(tmp_path):
    xml = save(_kv_model(), tmp_path)
    m = irrun.load(xml)
    feeds = {"new": np.ones((1, 2, 3, 4), np.float32), "query": np.ones((1, 2, 1, 4), np.float32),
             "beam_idx": np.array([0], np.int32)}
    m.infer(feeds)
    before = m.state["cache"]
    with pytest.raises(irrun.IrrunError):
        m.infer({**feeds, "query": np.ones((1, 2, 1, 5), np.float32)})
    np.testing.assert_array_equal(m.state["cache"], before)
    m.infer({**feeds, "new": 2 * np.ones((1, 2, 1, 4), np.float32)})
    np.testing.assert_array_equal(m.state["cache"][:, :, :3], before)
    np.testing.assert_array_equal(m.state["cache"][:, :, 3:], 2 * np.ones((1, 2, 1, 4), np.float32))


# ---------------------------------------------------------------- switches

def _transposed_weights_model(tied: bool, shape=(2, 40, 16), transpose_b=True):
    """x through two MatMuls with [out, in] weights (transpose_b; else [in, out]), a Relu between;
    with `tied`, the first weight also feeds a Gather of ids given at run time (tied embeddings)."""
    x = ops.parameter(list(shape), ov.Type.f32, name="x")
    ids = ops.parameter([2], ov.Type.i64, name="ids")
    w1, w2 = _c((24, 16), 0.3), _c((16, 24), 0.3)
    if not transpose_b:
        w1, w2 = ops.constant(w1.get_data().T.copy()), ops.constant(w2.get_data().T.copy())
    h = _named(ops.relu(_named(ops.matmul(x, w1, False, transpose_b), "up")), "act")
    outputs = [ops.result(_named(ops.matmul(h, w2, False, transpose_b), "down"))]
    if tied:
        outputs.append(ops.result(ops.gather(w1, ids, ops.constant(np.int64(0)))))
    return ov.Model(outputs, [x, ids] if tied else [x])


@pytest.mark.parametrize("tied", [False, True], ids=["own", "tied"])
def test_transposed_gemm_weights_are_stored_transposed(tied, tmp_path):
    """The values OpenVINO computes, bit for bit those of optimize=False; a weight another layer
    reads keeps its layout."""
    xml = save(_transposed_weights_model(tied), tmp_path / "m.xml")
    feeds = {"x": RNG.standard_normal((2, 40, 16)).astype(np.float32)}
    if tied:
        feeds["ids"] = np.array([3, 0], np.int64)
    plan = check_both_ways(xml, feeds)._plan
    layouts = {s.node.layer.name: plan.constants[s.inputs[1]].flags.f_contiguous
               for s in plan.layer_steps if s.node.layer.op_type == "MatMul"}
    assert layouts == {"up": not tied, "down": True}
    assert not any(v.flags.f_contiguous and v.ndim == 2
                   for v in irrun.load(xml, optimize=False)._plan.constants.values())


@pytest.mark.parametrize("transpose_b", [True, False], ids=["out_in", "in_out"])
@pytest.mark.parametrize("shape", [(2, 17, 16), (34, 16), (1, 1, 16)], ids=["2x17", "34", "1"])
def test_few_rows_times_weights_run_weight_first(shape, transpose_b, monkeypatch, tmp_path):
    """Data of at most FEW_ROWS rows: the weights are held [out, in] row by row (as stored with
    transpose_b, else laid out so) and the products run weight first, the values of the other
    order to BLAS's rounding (optimize=False computes x @ w).  One row: the weights held [in, out]
    row by row (as stored without transpose_b, else laid out so), BLAS's GEMV through np.dot."""
    import irrun.ops.matrix as matrix
    calls, weight_first, dots, dot = [], matrix.weight_first, [], np.dot
    monkeypatch.setattr(matrix, "weight_first", lambda x, w: calls.append(x.shape) or weight_first(x, w))
    monkeypatch.setattr(np, "dot", lambda *a: dots.append(a[1].shape) or dot(*a))
    xml = save(_transposed_weights_model(False, shape, transpose_b), tmp_path / "m.xml")
    x = RNG.standard_normal(shape).astype(np.float32)
    on = check_both_ways(xml, {"x": x})
    weights = [v for v in on._plan.constants.values() if getattr(v, "ndim", 0) == 2]
    one_row = np.prod(shape[:-1]) == 1
    assert len(weights) == 2 and all((v if transpose_b else v.T).flags.c_contiguous != one_row for v in weights)
    calls.clear(), dots.clear()
    on.infer({"x": x})
    assert (len(calls), len(dots)) == ((0, 2) if one_row else (2, 0))
    run = irrun.load(xml, optimize=False)._plan.layer_steps[0].op.run      # (unbound: x @ w)
    w = next(v for v in on._plan.constants.values() if getattr(v, "shape", None) in ((24, 16), (16, 24)))
    rows = x.reshape(-1, 16)
    assert_blas_close(weight_first(rows, w if transpose_b else w.T), run(rows, w))


@pytest.mark.parametrize("transpose_b", [True, False], ids=["out_in", "in_out"])
def test_one_row_narrowed_twofold_reads_weights_out_in(transpose_b, monkeypatch, tmp_path):
    """A decoding step's feed-forward block: the down-projection (1024 -> 256, narrowing fourfold)
    holds its weight [out, in] row by row, a dot product per output through np.dot; the
    up-projection (256 -> 1024), a 512 -> 256 product (too few inputs) and the down-projection past
    NARROWING_GEMV_MOST_BYTES (lowered here) hold theirs [in, out].  OpenVINO's values each way."""
    import irrun.ops.matrix as matrix

    def block(size):
        x = ops.parameter([1, 1, 256], ov.Type.f32, name="x")
        weights = {"up": _c((1024, 256), 0.06), "down": _c((256, 1024), 0.03), "half": _c((256, 512), 0.04)}
        if not transpose_b:
            weights = {k: ops.constant(v.get_data().T.copy()) for k, v in weights.items()}
        up = ops.relu(_named(ops.matmul(x, weights["up"], False, transpose_b), "up"))
        down = _named(ops.matmul(up, weights["down"], False, transpose_b), "down")
        half = _named(ops.matmul(ops.slice(up, [0], [512], [1], [2]), weights["half"], False, transpose_b), "half")
        return save(ov.Model([ops.result(down), ops.result(half)], [x]), tmp_path / f"m{size}.xml")

    feeds = {"x": RNG.standard_normal((1, 1, 256)).astype(np.float32)}
    for most_bytes, down_out_in in ((matrix.NARROWING_GEMV_MOST_BYTES, True), ((1 << 20) - 1, False)):
        monkeypatch.setattr(matrix, "NARROWING_GEMV_MOST_BYTES", most_bytes)
        plan = check_both_ways(block(most_bytes), feeds)._plan
        out_in = {s.node.layer.name: plan.constants[s.inputs[1]] if transpose_b else plan.constants[s.inputs[1]].T
                  for s in plan.layer_steps if s.node.layer.op_type == "MatMul"}
        layouts = {name: w.flags.c_contiguous for name, w in out_in.items()}      # ([out, in] row by row)
        assert layouts == {"up": False, "down": down_out_in, "half": False}


@pytest.mark.parametrize("rows", [(2, 32), (4, 32), (3, 50)], ids=["64", "128", "150"])
def test_widening_products_of_up_to_128_rows_run_weight_first(rows, monkeypatch, tmp_path):
    """A feed-forward block at 64 and 128 rows: its up-projection (16 -> 64, widening fourfold) runs
    weight first, its weight held [out, in]; the down-projection (64 -> 16) keeps the weight
    [in, out] and runs data first, reading the up-projection's column-major output as it is.  At
    150 rows neither runs weight first.  OpenVINO's values either way."""
    import irrun.ops.matrix as matrix
    calls, weight_first = [], matrix.weight_first
    monkeypatch.setattr(matrix, "weight_first", lambda x, w: calls.append(w.shape) or weight_first(x, w))
    x = ops.parameter([*rows, 16], ov.Type.f32, name="x")
    up = _named(ops.matmul(x, _c((64, 16), 0.3), False, True), "up")
    down = _named(ops.matmul(ops.relu(up), _c((16, 64), 0.3), False, True), "down")
    xml = save(ov.Model([ops.result(down)], [x]), tmp_path / "m.xml")
    m = check_both_ways(xml, {"x": RNG.standard_normal((*rows, 16)).astype(np.float32)})
    few = np.prod(rows) <= 128
    layouts = {s.node.layer.name: m._plan.constants[s.inputs[1]].flags.c_contiguous
               for s in m._plan.layer_steps if s.node.layer.op_type == "MatMul"}
    assert layouts == {"up": few, "down": False}       # (c_contiguous: [out, in] row by row)
    calls.clear()
    m.infer({"x": RNG.standard_normal((*rows, 16)).astype(np.float32)})
    assert calls == ([(64, 16)] if few else [])


def _few_rows_encoder_block(hidden=32, heads=4) -> ov.Model:
    """2 x 17 tokens through a feed-forward block, a residual, a layer norm and one attention head
    split: every product takes few rows, so each runs weight first."""
    x = ops.parameter([2, 17, hidden], ov.Type.f32, name="x")

    def dense(t, cin, cout):
        return ops.add(ops.matmul(t, _c((cout, cin), cin ** -0.5), False, True), _c((cout,), 0.1))
    up = ops.gelu(dense(x, hidden, 4 * hidden), "erf")
    y = ops.add(x, dense(up, 4 * hidden, hidden))
    norm = ops.add(ops.multiply(ops.mvn(y, ops.constant(np.array([-1], np.int64)), True, 1e-5, "inside_sqrt"),
                                _c((hidden,))), _c((hidden,)))
    q, k = (ops.transpose(ops.reshape(dense(norm, hidden, hidden), ops.constant(np.array([2, 17, heads, -1])),
                                      False), ops.constant(np.array([0, 2, 1, 3]))) for _ in range(2))
    scores = ops.softmax(ops.matmul(q, k, False, True), -1)
    return ov.Model([ops.result(norm), ops.result(scores), ops.result(up)], [x])


def test_weight_first_products_flow_on_column_major(monkeypatch, tmp_path):
    """A product run weight first hands on (w @ x.T).T as it is, column-major: the chain after it,
    the next product (which reads its transpose row-major), a residual Add with a row-major
    tensor, a layer norm, a Reshape into heads and a Softmax compute OpenVINO's values on it."""
    import irrun.ops.matrix as matrix
    layouts, weight_first = [], matrix.weight_first

    def recording(x, w):
        out = weight_first(x, w)
        layouts.append(out.flags.f_contiguous and not out.flags.c_contiguous)
        return out
    monkeypatch.setattr(matrix, "weight_first", recording)
    xml = save(_few_rows_encoder_block(), tmp_path / "m.xml")
    check_both_ways(xml, {"x": RNG.standard_normal((2, 17, 32)).astype(np.float32)})
    assert layouts and all(layouts)


@pytest.mark.parametrize("shape", [(1, 16), (-1, 16), (2, -1, 16), (16,)], ids=["row", "rows", "batch", "vector"])
def test_a_row_or_rows_known_at_run_time_times_transposed_weights_stream_their_rows(shape, tmp_path):
    """One row of data, or rows known only at run time: the [out, in] weight held [in, out] row by
    row (BLAS's GEMV then streams its rows; NumPy's matmul runs faster so at any count of rows); a
    1-D vector, whose product NumPy runs otherwise, keeps it as stored."""
    x = ops.parameter(list(shape), ov.Type.f32, name="x")
    xml = save(ov.Model([ops.result(ops.matmul(x, _c((24, 16)), False, True))], [x]), tmp_path / "m.xml")
    m = check_both_ways(xml, {"x": RNG.standard_normal([3 if d == -1 else d for d in shape]).astype(np.float32)})
    weights = [v for v in m._plan.constants.values() if getattr(v, "ndim", 0) == 2]
    assert len(weights) == 1 and weights[0].flags.f_contiguous == (len(shape) >= 2)


def _inverted_residuals():
    """MobileNet's blocks: 1x1 expand (+ bias, HSwish) -> depthwise (+ bias, ReLU) -> 1x1 project."""
    x = ops.parameter([2, 24, 14, 15], ov.Type.f32, name="x")

    def conv(data, c_in, c_out, name, kernel=1, stride=1, groups=None):
        pad = kernel // 2
        if groups is None:
            node = ops.convolution(data, _c((c_out, c_in, kernel, kernel), 0.3), [stride] * 2, [pad] * 2, [pad] * 2,
                                   [1, 1])
        else:
            node = ops.group_convolution(data, _c((groups, c_out // groups, 1, kernel, kernel), 0.3), [stride] * 2,
                                         [pad] * 2, [pad] * 2, [1, 1])
        return ops.add(_named(node, name), _c((1, c_out, 1, 1), 0.1))

    rows = ops.hswish(conv(x, 24, 96, "expand_rows"))                    # -> depthwise by rows
    rows = ops.relu(conv(rows, 96, 96, "dw_rows", 3, groups=96))
    out = ops.add(x, conv(rows, 96, 24, "project"))
    windows = ops.hswish(conv(out, 24, 72, "expand_windows"))            # -> einsum over windows (stride 2)
    windows = ops.relu(conv(windows, 72, 72, "dw_windows", 5, 2, groups=72))
    shared = conv(out, 24, 96, "expand_shared")                          # also read by a ReduceMean
    pooled = ops.reduce_mean(shared, ops.constant(np.array([2, 3], np.int64)), True)
    shared = ops.multiply(conv(shared, 96, 96, "dw_shared", 3, groups=96), pooled)
    strided = conv(out, 24, 64, "expand_strided", 1, 2)                  # a strided 1x1: not in place
    strided = conv(strided, 64, 64, "dw_strided", 3, groups=64)
    few = conv(out, 24, 16, "expand_few")                                # tap by tap, channels first
    few = conv(few, 16, 32, "dw_few", 3, 2, groups=16)
    return ov.Model([ops.result(n) for n in (windows, shared, strided, few)], [x])


def test_a_1x1_convolution_feeding_a_depthwise_one_writes_channels_last(monkeypatch, tmp_path):
    """The 1x1 convolution whose output only a depthwise layer that works channels-last reads makes
    it channels-last (a transposed view of its GEMM's output): OpenVINO's values, those of
    optimize=False within the last bits (its GEMM runs transposed, which OpenBLAS may round
    differently for small products); none where the output has another reader, the 1x1 is strided
    or the depthwise layer works channels-first."""
    import irrun.ops.im2col as im2col
    made = []
    pointwise = im2col.pointwise_channels_last
    monkeypatch.setattr(im2col, "pointwise_channels_last",
                        lambda x, w_t: made.append(w_t.shape) or pointwise(x, w_t))
    xml = save(_inverted_residuals(), tmp_path / "m.xml")
    feeds = {"x": RNG.standard_normal((2, 24, 14, 15)).astype(np.float32)}
    on, off = irrun.load(xml), irrun.load(xml, optimize=False)
    flagged = {s.node.layer.name for s in on._plan.layer_steps if vars(s.op).get("channels_last_output")}
    assert flagged == {"expand_rows", "expand_windows"}
    got = on.infer(feeds)
    assert sorted(made) == [(24, 72), (24, 96)]
    for (name, a), b, e in zip(got.items(), off.infer(feeds).values(), run_openvino(xml, [feeds["x"]])):
        assert_close(a, e, what=name)
        assert_blas_close(a, b, what=name)


@pytest.mark.parametrize("batch, channels, size, kernel, stride, dilation, pads_begin, pads_end, taken", [
    (1, 96, [56, 57], [3, 3], [2, 2], [1, 1], [1, 1], [1, 1], True),      # EfficientNet's
    (2, 64, [64, 64], [5, 5], [2, 2], [1, 1], [2, 1], [1, 2], True),      # uneven pads
    (1, 96, [56, 56], [3, 3], [2, 3], [2, 1], [2, 1], [2, 1], True),      # dilated, strides differ
    (1, 64, [4100], [5], [2], [1], [2], [2], True),                       # 1-D
    (1, 64, [8, 32, 32], [1, 3, 3], [1, 2, 2], [1, 1, 1], [0, 1, 1], [0, 1, 1], True),   # 3-D
    (1, 96, [24, 24], [3, 3], [2, 2], [1, 1], [1, 1], [1, 1], False),     # too small: copied
    (1, 64, [64, 64], [3, 3], [1, 1], [1, 1], [1, 1], [1, 1], False),     # stride 1: by rows
])
def test_a_strided_depthwise_layer_reads_channels_last_data_where_it_lies(
        batch, channels, size, kernel, stride, dilation, pads_begin, pads_end, taken, monkeypatch, tmp_path):
    """Behind a 1x1 convolution that writes channels-last, a large strided depthwise layer takes
    the outputs whose windows lie inside the data from the data itself, and only the borders from
    a padded copy: OpenVINO's values, and optimize=False's (which copies it all) within the last
    bits (the 1x1 convolution's GEMM runs transposed there)."""
    import irrun.ops.depthwise as depthwise
    made = []
    inside = depthwise._depthwise_inside
    monkeypatch.setattr(depthwise, "_depthwise_inside", lambda *a: made.append(a[5]) or inside(*a))
    rank = len(size)
    x = ops.parameter([batch, 16, *size], ov.Type.f32, name="x")
    expand = ops.convolution(x, _c((channels, 16) + (1,) * rank, 0.3), [1] * rank, [0] * rank, [0] * rank,
                             [1] * rank)
    expand = ops.swish(ops.add(expand, _c((1, channels) + (1,) * rank, 0.1)))
    dw = ops.group_convolution(expand, _c((channels, 1, 1, *kernel), 0.3), stride, pads_begin, pads_end, dilation)
    xml = save(ov.Model([ops.result(ops.add(dw, _c((1, channels) + (1,) * rank, 0.1)))], [x]), tmp_path / "m.xml")
    feeds = {"x": RNG.standard_normal((batch, 16, *size)).astype(np.float32)}
    got = list(irrun.load(xml).infer(feeds).values())[0]
    assert bool(made) == taken
    assert_close(got, run_openvino(xml, [feeds["x"]])[0])
    np.testing.assert_allclose(got, list(irrun.load(xml, optimize=False).infer(feeds).values())[0],
                               rtol=1e-5, atol=1e-6)


def _conv_bias_relu_pool(pool, bias_shape=(1, 8, 1, 1), between=None, indices_read=False, clamp=False):
    """img -> Convolution -> Add bias -> Relu (or Clamp) [-> `between`] -> MaxPool (`pool`: version,
    kernel, stride, pads begin, pads end)."""
    version, kernel, stride, pads_begin, pads_end = pool
    img = ops.parameter([2, 3, 12, 13], ov.Type.f32, name="img")
    y = _named(ops.convolution(img, _c((8, 3, 3, 3)), [1, 1], [1, 1], [1, 1], [1, 1]), "conv")
    y = _named(ops.add(y, _c(bias_shape)), "add")
    y = _named(ops.clamp(y, -0.5, 0.75) if clamp else ops.relu(y), "act")
    if between is not None:
        y = _named(between(y), "between")
    if version == 1:
        import openvino.opset1 as ops1
        pooled = ops1.max_pool(y, [stride] * 2, pads_begin, pads_end, [kernel] * 2)
        outputs = [pooled.output(0)]
    else:
        pooled = ops.max_pool(y, [stride] * 2, [1, 1], pads_begin, pads_end, [kernel] * 2)
        outputs = [pooled.output(0)] + ([pooled.output(1)] if indices_read else [])
    _named(pooled, "pool")
    return ov.Model([ops.result(o) for o in outputs], [img])


@pytest.mark.parametrize("pool", [(8, 2, 2, [0, 0], [0, 0]), (8, 3, 2, [1, 1], [1, 1]), (1, 3, 2, [1, 0], [0, 1]),
                                  (8, 2, 1, [0, 0], [1, 1])], ids=["2x2/2", "3x3/2 padded", "v1", "stride 1"])
@pytest.mark.parametrize("clamp", [False, True], ids=["relu", "clamp"])
def test_a_max_pool_runs_before_the_bias_and_activation_it_commutes_with(pool, clamp, tmp_path):
    """Convolution -> Add bias -> Relu / Clamp -> MaxPool: the pool runs on the convolution's output
    and the bias and activation after it, on 4x fewer values, in one step: OpenVINO's values and
    bit for bit optimize=False's."""
    from irrun.optimize import _PoolFirst
    xml = save(_conv_bias_relu_pool(pool, clamp=clamp), tmp_path)
    m = check_both_ways(xml, {"img": RNG.standard_normal((2, 3, 12, 13)).astype(np.float32)})
    assert fused_steps(m) == [["add", "act", "pool"]]
    assert [type(s.op) for s in m._plan.steps if s.members] == [_PoolFirst]


def test_a_pool_first_keeps_windows_of_nan_and_minus_infinity(tmp_path):
    """Windows whose taps are all NaN or all -inf end at the lowest value as before (the maxima are
    raised to it after the bias and Relu, not before); a NaN tap among others is passed over."""
    img = ops.parameter([1, 4, 6, 6], ov.Type.f32, name="img")
    y = _named(ops.relu(_named(ops.add(img, _c((1, 4, 1, 1))), "add")), "act")
    pooled = _named(ops.max_pool(y, [2, 2], [1, 1], [0, 0], [0, 0], [2, 2]), "pool")
    xml = save(ov.Model([ops.result(pooled.output(0))], [img]), tmp_path)
    data = RNG.standard_normal((1, 4, 6, 6)).astype(np.float32)
    data[0, 0, :2, :2] = np.nan                 # a window of NaN only
    data[0, 1, :2, :2] = -np.inf                # of -inf only
    data[0, 2, 0, 0] = np.nan                   # one NaN tap
    on, off = irrun.load(xml), irrun.load(xml, optimize=False)
    assert fused_steps(on) == [["add", "act", "pool"]]
    (a,), (b,) = on.infer({"img": data}).values(), off.infer({"img": data}).values()
    np.testing.assert_array_equal(a, b)
    assert np.isfinite(a).all() and a[0, 0, 0, 0] == np.finfo(np.float32).min


@pytest.mark.parametrize("case", ["bias varies along the rows", "sigmoid before the pool", "indices read",
                                  "a window in the padding alone", "the activation read elsewhere"])
def test_no_pool_first_where_it_would_not_commute(case, tmp_path):
    """The layers a pool goes before are only those it commutes with, whose output it alone reads,
    and only where every window reads data: a bias that varies along the rows stays before it (the
    Relu alone goes after); a Sigmoid, indices read, a window in the padding alone or a second
    reader of the Relu leave it where it is."""
    pool = (8, 2, 2, [0, 0], [0, 0])
    if case == "bias varies along the rows":
        model = _conv_bias_relu_pool(pool, bias_shape=(1, 8, 12, 1))
    elif case == "sigmoid before the pool":
        model = _conv_bias_relu_pool(pool, between=ops.sigmoid)
    elif case == "indices read":
        model = _conv_bias_relu_pool(pool, indices_read=True)
    elif case == "a window in the padding alone":
        model = _conv_bias_relu_pool((8, 2, 2, [2, 2], [0, 0]))
    else:
        model = _conv_bias_relu_pool(pool)
        act = [op for op in model.get_ordered_ops() if op.get_friendly_name() == "act"][0]
        model.add_results([ops.result(act)])
    xml = save(model, tmp_path)
    m = check_both_ways(xml, {"img": RNG.standard_normal((2, 3, 12, 13)).astype(np.float32)})
    pools_first = [names for names in fused_steps(m) if "pool" in names]
    assert pools_first == ([["act", "pool"]] if case == "bias varies along the rows" else []), fused_steps(m)


def test_a_watcher_of_a_layer_before_the_pool_sees_its_values(tmp_path):
    """Intermediates run a plan that keeps the layers a pool would go before (OpenVINO's values);
    a profile sees the pool-first step's time on its first layer, the others fused into it."""
    xml = save(_conv_bias_relu_pool((8, 2, 2, [0, 0], [0, 0])), tmp_path)
    feeds = {"img": RNG.standard_normal((2, 3, 12, 13)).astype(np.float32)}
    expected = openvino_layer_outputs(xml, feeds)
    every = irrun.load(xml).infer(feeds, intermediates=True)
    for key in ("add:0", "act:0", "pool:0"):
        assert_close(every[key], expected[key], what=key)
    timings = Timings()
    irrun.load(xml).infer(feeds, watch=[timings])
    names = [t.node.layer.name for t in timings.steps]
    assert names == ["conv", "add", "act", "pool"] and timings.steps[1].fused == ("act", "pool")
    assert [t.output_shapes for t in timings.steps[1:]] == [((2, 8, 12, 13),)] * 2 + [((2, 8, 6, 6),)]


def _audio_front_end(taps=64, stride=4, pool=2, length=1000, pads=0, dilation=1, batch=1, conv_read=False,
                     pool_pads=0):
    """An audio front end: wave [batch, 1, length] -> 1-D Convolution of 16 filters -> Add bias ->
    Relu -> MaxPool of `pool` taps at stride `pool` (CREPE's first layer, shorter)."""
    wave = ops.parameter([batch, 1, length], ov.Type.f32, name="wave")
    y = _named(ops.convolution(wave, _c((16, 1, taps), taps ** -0.5), [stride], [pads], [pads], [dilation]), "conv")
    z = _named(ops.relu(_named(ops.add(y, _c((1, 16, 1), 0.1)), "add")), "act")
    pooled = _named(ops.max_pool(z, [pool], [1], [pool_pads], [0], [pool]), "pool")
    return ov.Model([ops.result(pooled.output(0))] + ([ops.result(y)] if conv_read else []), [wave])


@pytest.mark.parametrize("taps,stride,pool,length", [(64, 4, 2, 1000), (512, 4, 2, 4000), (16, 1, 3, 301),
                                                     (32, 2, 4, 777)],
                         ids=["64/4 pool 2", "512/4 pool 2", "16/1 pool 3", "32/2 pool 4"])
def test_an_audio_front_end_pools_inside_its_convolution(taps, stride, pool, length, monkeypatch, tmp_path):
    """A 1-D convolution of one sample with a long kernel, no padding, then bias, Relu and a max pool
    whose windows tile its output: the pool runs inside the convolution (each block's product
    pooled as positions-major rows), the bias and Relu after it; the outputs past the last whole
    window are never computed.  OpenVINO's values, and optimize=False's within BLAS's rounding
    (the GEMM's blocks are of other lengths).  (The transforms, which take the longest kernels,
    turned off: see "by transforms" below.)"""
    from irrun.optimize import _ConvolutionPoolFirst
    monkeypatch.setenv("IRRUN_FFT", "off")
    monkeypatch.setenv("IRRUN_PROCESSES", "1")
    xml = save(_audio_front_end(taps, stride, pool, length), tmp_path)
    m = check_both_ways(xml, {"wave": RNG.standard_normal((1, 1, length)).astype(np.float32)})
    assert fused_steps(m) == [["conv", "add", "act", "pool"]]
    assert [type(s.op) for s in m._plan.steps if s.members] == [_ConvolutionPoolFirst]


def _thin_stem(c_in=3, c_out=16, size=(12, 30), pool=(2, 2), batch=1, pads=1, conv_read=False, pool_pads=0,
               stride=1, dilation=1):
    """A VGG/CRNN-style stem: image [batch, c_in, *size] -> 3x3 Convolution (pads on each side) ->
    Add bias -> Relu -> MaxPool of `pool` windows at stride `pool`."""
    image = ops.parameter([batch, c_in, *size], ov.Type.f32, name="image")
    y = _named(ops.convolution(image, _c((c_out, c_in, 3, 3), 1 / np.sqrt(9 * c_in)), [stride] * 2, [pads] * 2,
                               [pads] * 2, [dilation] * 2), "conv")
    z = _named(ops.relu(_named(ops.add(y, _c((1, c_out, 1, 1), 0.1)), "add")), "act")
    pooled = _named(ops.max_pool(z, [*pool], [1, 1], [pool_pads] * 2, [0, 0], [*pool]), "pool")
    return ov.Model([ops.result(pooled.output(0))] + ([ops.result(y)] if conv_read else []), [image])


@pytest.mark.parametrize("c_in, size, pool, pads, stride, dilation", [
    (3, (32, 256), (2, 2), 1, 1, 1), (3, (13, 31), (2, 2), 1, 1, 1), (1, (20, 24), (3, 2), 0, 1, 1),
    (8, (10, 17), (1, 2), 1, 1, 1), (4, (9, 12), (2, 1), 1, 1, 1), (3, (33, 64), (2, 2), 1, 2, 1),
    (3, (20, 30), (2, 2), 1, 1, 2)], ids=["crnn stem", "ragged", "3x2 unpadded", "1x2", "2x1", "strided", "dilated"])
def test_a_thin_stem_pools_inside_its_convolution(c_in, size, pool, pads, stride, dilation, monkeypatch, tmp_path):
    """A 2-D convolution of one sample too thin for the row-tap kernel (fewer than 16 input
    channels), then bias, Relu and a max pool whose windows tile its output: the pool runs inside
    the convolution (each block of output rows' product made positions-major and pooled there,
    only the maxima written back), the bias and Relu after it; the outputs past the last whole
    window are never computed.  OpenVINO's values, and optimize=False's within BLAS's rounding."""
    from irrun.optimize import _ConvolutionPoolFirst
    monkeypatch.setenv("IRRUN_PROCESSES", "1")
    xml = save(_thin_stem(c_in, size=size, pool=pool, pads=pads, stride=stride, dilation=dilation), tmp_path)
    m = check_both_ways(xml, {"image": RNG.standard_normal((1, c_in, *size)).astype(np.float32)})
    assert fused_steps(m) == [["conv", "add", "act", "pool"]]
    assert [type(s.op) for s in m._plan.steps if s.members] == [_ConvolutionPoolFirst]


@pytest.mark.parametrize("processes", ["1", None], ids=["one process", "two allowed"])
def test_a_stem_pools_inside_also_where_the_network_may_run_in_two_processes(processes, two_threads,
                                                                               monkeypatch, tmp_path):
    """A CRNN-like net (a thin stem and its pool, then a product of BLAS_SPIN_MACS multiply-adds or
    more, which keeps BLAS's threads): its pool goes inside the stem in one process and where two
    are allowed too (a paired run cuts that step along its output channels: irrun/split_steps.py,
    tests/test_process_pair.py).  OpenVINO's values either way."""
    from irrun.executor import BLAS_SPIN_MACS
    if processes is None:
        monkeypatch.delenv("IRRUN_PROCESSES", raising=False)
    else:
        monkeypatch.setenv("IRRUN_PROCESSES", processes)
    stem = _thin_stem(3, 16, (32, 64))
    pooled = stem.outputs[0].get_node().input_value(0)
    flat = ops.reshape(pooled, ops.constant(np.array([1, 16 * 16 * 32], np.int64)), False)
    columns = max(64, BLAS_SPIN_MACS // (16 * 16 * 32) + 1)
    product = ops.matmul(flat, _c((16 * 16 * 32, columns), 0.01), False, False)
    xml = save(ov.Model([ops.result(product)], stem.get_parameters()), tmp_path)
    m = check_both_ways(xml, {"image": RNG.standard_normal((1, 3, 32, 64)).astype(np.float32)})
    assert m._plan.blas_network
    from irrun.optimize import _ConvolutionPoolFirst, _PoolFirst
    heads = {type(op) for s in m._plan.steps for op in (s.op, getattr(getattr(s.op, "head_step", None), "op", None))}
    assert _ConvolutionPoolFirst in heads and _PoolFirst not in heads


@pytest.mark.parametrize("case", ["two samples", "16 channels", "the convolution read", "a padded pool"])
def test_no_pool_inside_a_stem_it_does_not_suit(case, monkeypatch, tmp_path):
    """The pool stays out of a 2-D convolution of two samples, of 16 input channels (the row taps
    take it), with another reader, or under a pool whose windows do not tile its output."""
    monkeypatch.setenv("IRRUN_PROCESSES", "1")
    model = _thin_stem(**{"two samples": {"batch": 2}, "16 channels": {"c_in": 16},
                          "the convolution read": {"conv_read": True}, "a padded pool": {"pool_pads": 1}}[case])
    xml = save(model, tmp_path)
    shape = [int(d) for d in model.inputs[0].get_partial_shape().to_shape()]
    m = check_both_ways(xml, {"image": RNG.standard_normal(shape).astype(np.float32)})
    assert fused_steps(m) == [["add", "act", "pool"]], fused_steps(m)


def test_a_thin_stem_pools_inside_its_convolution_in_parts(two_threads, tmp_path):
    """The CRNN's stem (3 -> 64 channels at 32 x 256, its 2x2 / 2 pool) in a convolution network on
    two threads: its blocks of rows in parts; the values one thread gives (within BLAS's rounding:
    OpenBLAS's AVX2 kernels round a product cut otherwise a little otherwise; its AVX-512 ones gave
    the same bits)."""
    from irrun import threads
    stem = _thin_stem(3, 64, (32, 256))
    pooled = stem.outputs[0].get_node().input_value(0)
    y = ops.convolution(pooled, _c((128, 64, 3, 3), 1 / 24), [1, 1], [1, 1], [1, 1], [1, 1])   # (a network of
    xml = save(ov.Model([ops.result(y)], stem.get_parameters()), tmp_path)                   # convolutions)
    image = {"image": RNG.standard_normal((1, 3, 32, 256)).astype(np.float32)}
    from irrun.ops import im2col
    splits, inside = [], []
    run_parts, kernel = threads.run_parts, im2col.pooled_rows_positions_major

    def pooled(*args):
        inside.append(True)
        try:
            return kernel(*args)
        finally:
            inside.pop()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(threads, "run_parts", lambda fn, ranges: (inside and splits.append(len(ranges)))
                      or run_parts(fn, ranges))
        patch.setattr(im2col, "pooled_rows_positions_major", pooled)
        m = check_both_ways(xml, image)
        parallel = m.infer(image)
    assert m._plan.convolution_network and 2 in splits
    threads.set_threads(1)
    assert_blas_close(next(iter(parallel.values())), next(iter(irrun.load(xml).infer(image).values())))


@pytest.mark.parametrize("case", ["padded", "dilated", "two samples", "short kernel", "the convolution read",
                                  "a padded pool", "by transforms"])
def test_no_pool_inside_a_convolution_it_does_not_suit(case, monkeypatch, tmp_path):
    """The pool stays out of the convolution (the bias and Relu still go after it) where the
    convolution pads or dilates, runs two samples, has too short a kernel for positions-major
    columns or another reader, where the pool's windows do not tile its output, or where the
    convolution runs by transforms (irrun/ops/fft_convolution.py: a 512-tap kernel).  (In one
    process, so that each case is its own reason.)"""
    monkeypatch.setenv("IRRUN_PROCESSES", "1")
    model = _audio_front_end(**{"padded": {"pads": 3}, "dilated": {"dilation": 2}, "two samples": {"batch": 2},
                                "short kernel": {"taps": 8}, "the convolution read": {"conv_read": True},
                                "a padded pool": {"pool_pads": 1}, "by transforms": {"taps": 512}}[case])
    xml = save(model, tmp_path)
    batch = 2 if case == "two samples" else 1
    m = check_both_ways(xml, {"wave": RNG.standard_normal((batch, 1, 1000)).astype(np.float32)})
    assert fused_steps(m) == [["add", "act", "pool"]], fused_steps(m)


def test_a_watcher_of_the_convolution_before_a_pool_sees_its_values(tmp_path):
    """A watcher selecting the convolution runs it alone (OpenVINO's values); unwatched, the pool runs
    inside it, and a profile sees the fused step's time on the convolution."""
    xml = save(_audio_front_end(), tmp_path)
    feeds = {"wave": RNG.standard_normal((1, 1, 1000)).astype(np.float32)}
    expected = openvino_layer_outputs(xml, feeds)
    every = irrun.load(xml).infer(feeds, intermediates=True)
    for key in ("conv:0", "add:0", "act:0", "pool:0"):
        assert_close(every[key], expected[key], what=key)
    timings = Timings()
    irrun.load(xml).infer(feeds, watch=[timings])
    assert [t.node.layer.name for t in timings.steps] == ["conv", "add", "act", "pool"]
    assert timings.steps[0].fused == ("add", "act", "pool")


def test_optimize_off_by_argument_environment_and_cli(tmp_path, monkeypatch):
    xml = save(_chain_model(), tmp_path)
    assert irrun.load(xml).optimize and fused_steps(irrun.load(xml))
    assert not fused_steps(irrun.load(xml, optimize=False))
    monkeypatch.setenv("IRRUN_OPTIMIZE", "0")
    m = irrun.load(xml)
    assert not m.optimize and not fused_steps(m) and m.options()["optimize"] is False
    assert irrun.load(xml, optimize=True).optimize
    monkeypatch.delenv("IRRUN_OPTIMIZE")
    for args in ([], ["--no-optimize"], ["--optimize"]):
        r = CliRunner().invoke(cli, ["infer", str(xml), "-i", f"x={_npy(tmp_path)}", *args])
        assert r.exit_code == 0, r.output
    code = f"import irrun; print(irrun.load({str(xml)!r}).optimize)"
    env = {**__import__("os").environ, "IRRUN_OPTIMIZE": "off"}
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          check=True).stdout.strip() == "False"


def test_a_pickled_model_keeps_its_optimize_setting(tmp_path):
    import pickle
    xml = save(_chain_model(), tmp_path)
    again = pickle.loads(pickle.dumps(irrun.load(xml, optimize=False)))
    assert not again.optimize and not fused_steps(again)


def test_fused_chain_is_not_an_op_of_the_graph(tmp_path):
    """The model as loaded is unchanged: saving it writes the IR's layers, not the fused steps."""
    xml = save(_chain_model(), tmp_path)
    m = irrun.load(xml)
    assert all(isinstance(s.op, FusedChain) for s in m._plan.steps if s.members)
    out = m.save(tmp_path / "again.xml")
    assert "FusedChain" not in out.read_text() and out.read_text().count("<layer ") == \
        xml.read_text().count("<layer ")


def test_bodies_follow_the_models_setting(tmp_path):
    """A TensorIterator's body: its chain fused with optimize on, not with it off; OpenVINO's values."""
    x, h0 = ops.parameter([2, 4, 3], ov.Type.f32, name="x"), ops.parameter([2, 3], ov.Type.f32, name="h0")
    xi, hi = ops.parameter([2, 1, 3], ov.Type.f32), ops.parameter([2, 3], ov.Type.f32)
    h = ops.tanh(ops.sigmoid(ops.add(ops.add(ops.matmul(ops.squeeze(xi, [1]), _c((3, 3)), False, False),
                                             ops.matmul(hi, _c((3, 3)), False, False)), _c((3,)))))
    r_h = ops.result(h)
    ti = ops.tensor_iterator()
    ti.set_function(ov.Model([r_h], [xi, hi]))
    ti.set_sliced_input(xi, x.output(0), 0, 1, 1, -1, 1)
    ti.set_merged_input(hi, h0.output(0), r_h.output(0))
    xml = save(ov.Model([ops.result(ti.get_iter_value(r_h.output(0), -1))], [x, h0]), tmp_path)
    feeds = {"x": RNG.standard_normal((2, 4, 3)).astype(np.float32), "h0": np.zeros((2, 3), np.float32)}
    on = check_both_ways(xml, feeds)
    off = irrun.load(xml, optimize=False)
    for m, fused in ((on, True), (off, False)):
        op = next(s.op for s in m._plan.steps if s.node.bodies)
        runner = op.runner("body")
        assert any(s.members for s in runner.plan.steps) is fused
