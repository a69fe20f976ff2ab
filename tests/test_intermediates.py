"""Every layer's output: `Model.infer(intermediates=...)`, `Model.add_outputs`, bodies per iteration and
`irrun infer --dump`, against OpenVINO's values of the same tensors (each added as a model output)."""
from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset1 as ops1
import openvino.opset13 as ops
import pytest
from click.testing import CliRunner

import irrun
from irrun.cli import cli
from irrun.registry import implementation
from irrun.watch import tensor_key
from ovutil import assert_close, compile_cpu, openvino_layer_outputs, save

# Every test here runs with irrun/optimize.py on and off (conftest.optimize_both_ways).
pytestmark = pytest.mark.usefixtures("optimize_both_ways")

MODELS = Path(__file__).resolve().parent / "models"
RNG = np.random.default_rng(5)


def example(name: str) -> dict[str, np.ndarray]:
    with np.load(MODELS / f"{name.split('.')[0].removesuffix('_dynamic')}.npz") as npz:
        return dict(npz)


def layer_keys(m: irrun.Model, key_of_openvino: str) -> bool:
    """Whether the IR itself has this output (OpenVINO's MaxPool-8/14 always has an indices
    output, which an IR may leave out)."""
    name, port = key_of_openvino.rsplit(":", 1)
    return any(l.name == name and int(port) < len(l.outputs) for l in m.layers.values())


@pytest.mark.parametrize("name", ["resnet.f32", "resnet.f16", "mobilenetv3.f32", "unet_detector.f32", "bert.f32",
                                  "gpt.f32", "vit.f32", "llama.f32", "lstm_gru.f32", "audio_stft.f32",
                                  "bert_dynamic.f32", "lstm_gru_dynamic.f16"])
def test_every_intermediate_matches_openvino(name):
    xml = MODELS / f"{name}.xml"
    feeds = example(name)
    expected = openvino_layer_outputs(xml, feeds)
    m = irrun.load(xml)
    got = m.infer(feeds, intermediates=True)
    keys = [k for k in expected if layer_keys(m, k)]
    assert len(keys) >= len(expected) - 2
    # every irrun key but the outputs' names is a layer output OpenVINO has too
    assert set(got) - {o.name for o in m.outputs} == set(keys)
    for key in keys:
        assert_close(got[key], expected[key], what=key)
    for out in m.outputs:
        assert out.name in got


def _chain_with_views():
    """x + c -> Relu -> Sigmoid -> Tanh: the bound kernels run in place, each overwriting the tensor
    before it; a Reshape view of the Add is read by a later step."""
    x = ops.parameter([2, 3, 8], ov.Type.f32, name="x")
    added = ops.add(x, ops.constant(RNG.standard_normal((1, 3, 1)).astype(np.float32)))
    added.set_friendly_name("added")
    view = ops.reshape(added, ops.constant(np.array([2, 24], np.int64)), False)
    view.set_friendly_name("view")
    relu = ops.relu(added)
    relu.set_friendly_name("relu")
    sig = ops.sigmoid(relu)
    sig.set_friendly_name("sig")
    tanh = ops.tanh(sig)
    tanh.set_friendly_name("tanh")
    flat = ops.reshape(tanh, ops.constant(np.array([2, 24], np.int64)), False)
    out = ops.add(flat, ops.multiply(view, ops.constant(np.float32(0.5))))
    out.set_friendly_name("out")
    return ov.Model([ops.result(out)], [x])


def test_values_survive_later_steps_that_write_in_place(tmp_path):
    xml = save(_chain_with_views(), tmp_path)
    feeds = {"x": RNG.standard_normal((2, 3, 8)).astype(np.float32)}
    m = irrun.load(xml)
    # the case this test is about: the steps a run that keeps every layer takes write in place
    in_place = [s.node.layer.name for s in m._plan.variant(m._plan._every_layer).steps if s.consumable]
    assert {"sig", "tanh"} <= set(in_place)
    got = m.infer(feeds, intermediates=True)
    expected = openvino_layer_outputs(xml, feeds)
    for key in ("added:0", "view:0", "relu:0", "sig:0", "tanh:0", "out:0"):
        assert_close(got[key], expected[key], what=key)
    # only what a later step overwrites is copied: the last layer's output is the model's output itself
    output = next(iter(got))
    assert got[output] is got["out:0"]


def test_add_outputs_like_openvino(tmp_path):
    """Named layers (every output), name:port keys and tensor names; a folded layer (the weights'
    f16 -> f32 Convert) reported from its constant; a TopK's second output."""
    x = ops.parameter([1, 4, 8, 8], ov.Type.f32, name="x")
    w = ops.convert(ops.constant(RNG.standard_normal((6, 4, 3, 3)).astype(np.float16)), ov.Type.f32)
    w.set_friendly_name("weights")
    conv = ops.convolution(x, w, [1, 1], [1, 1], [1, 1], [1, 1])
    conv.set_friendly_name("conv")
    flat = ops.reshape(conv, ops.constant(np.array([1, -1], np.int64)), False)
    top = ops.topk(flat, ops.constant(np.int64(5)), 1, "max", "value", ov.Type.i32)
    top.set_friendly_name("top")
    top.output(1).get_tensor().set_names({"top_indices"})
    model = ov.Model([ops.result(ops.relu(top.output(0)))], [x])
    xml = save(model, tmp_path)
    feeds = {"x": RNG.standard_normal((1, 4, 8, 8)).astype(np.float32)}
    m = irrun.load(xml)
    keys = m.add_outputs(["conv", "weights:0", "top_indices"])
    assert keys == ["conv:0", "weights:0", "top:1"]
    got = m.infer(feeds)
    assert list(got) == [m.outputs[0].name, "conv:0", "weights:0", "top:1"]
    expected = openvino_layer_outputs(xml, feeds)
    for key in keys:
        assert_close(got[key], expected[key], what=key)
    assert got["top:1"].dtype == np.int32
    # asking twice keeps one of each; the outputs themselves are unchanged
    m.add_outputs([("top", 1)])
    assert list(m.infer(feeds)) == list(got)


@pytest.mark.parametrize("names, message", [
    (["conv"], 'add_outputs "conv": no layer or tensor of that name; did you mean \'conv1\''),
    (["conv1:3"], 'add_outputs "conv1:3": layer "conv1" has 1 output (0..0)'),
    ([("conv1", 2)], 'add_outputs "conv1:2": layer "conv1" has 1 output (0..0)'),
    ([3], "add_outputs takes layer names"),
])
def test_add_outputs_refuses_unknown_names(names, message, tmp_path):
    x = ops.parameter([1, 2, 5, 5], ov.Type.f32, name="x")
    conv = ops.convolution(x, ops.constant(np.ones((2, 2, 1, 1), np.float32)), [1, 1], [0, 0], [0, 0], [1, 1])
    conv.set_friendly_name("conv1")
    result = ops.result(conv)
    result.set_friendly_name("out_result")
    m = irrun.load(save(ov.Model([result], [x]), tmp_path))
    with pytest.raises(irrun.UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        m.add_outputs(names)
    assert m.add_outputs(["out_result"]) == ["conv1:0"]      # a Result: the tensor it takes


def test_constants_only_when_asked(tmp_path):
    xml = save(_chain_with_views(), tmp_path)
    m = irrun.load(xml)
    feeds = {"x": np.ones((2, 3, 8), np.float32)}
    constants = {tensor_key(l.name, 0) for l in m.layers.values() if l.op_type == "Constant"}
    assert not constants & set(m.infer(feeds, intermediates=True))
    everything = m.infer(feeds, intermediates="all")
    assert constants <= set(everything)
    expected = openvino_layer_outputs(xml, feeds, constants=True)
    for key in constants:
        assert_close(everything[key], expected[key], what=key)
    with pytest.raises(irrun.UsageError, match="intermediates must be"):
        m.infer(feeds, intermediates="some")
    with pytest.raises(irrun.UsageError, match="pass intermediates=True too"):
        m.infer(feeds, bodies=True)


def _rnn_tensor_iterator(steps=4):
    """h = tanh(x_t W + h U) over 4 steps; outputs the last h and every h (concatenated)."""
    X, H0 = ops.parameter([2, steps, 3], ov.Type.f32, name="X"), ops.parameter([2, 5], ov.Type.f32, name="H0")
    xi, hi = ops.parameter([2, 1, 3], ov.Type.f32), ops.parameter([2, 5], ov.Type.f32)
    W = ops.constant(RNG.standard_normal((3, 5)).astype(np.float32))
    U = ops.constant(RNG.standard_normal((5, 5)).astype(np.float32))
    h = ops.tanh(ops.add(ops.matmul(ops.squeeze(xi, [1]), W, False, False), ops.matmul(hi, U, False, False)))
    h.set_friendly_name("h")
    r_h, r_seq = ops.result(h), ops.result(ops.unsqueeze(h, [1]))
    ti = ops1.tensor_iterator()
    ti.set_friendly_name("rnn")
    ti.set_function(ov.Model([r_h, r_seq], [xi, hi]))
    ti.set_sliced_input(xi, X.output(0), 0, 1, 1, -1, 1)
    ti.set_merged_input(hi, H0.output(0), r_h.output(0))
    last = ti.get_iter_value(r_h.output(0), -1)
    seq = ti.get_concatenated_slices(r_seq.output(0), 0, 1, 1, -1, 1)
    return ov.Model([last, seq], [X, H0])


def _if_model():
    cond = ops.parameter([], ov.Type.boolean, name="cond")
    x = ops.parameter([3], ov.Type.f32, name="x")
    xt, xe = ops.parameter([3], ov.Type.f32), ops.parameter([3], ov.Type.f32)
    double = ops.multiply(xt, ops.constant(np.float32(2)))
    double.set_friendly_name("double")
    negate = ops.negative(xe)
    negate.set_friendly_name("negate")
    branch = ops.if_op(cond)
    branch.set_friendly_name("choose")
    branch.set_then_body(ov.Model([ops.result(double)], [xt]))
    branch.set_else_body(ov.Model([ops.result(negate)], [xe]))
    branch.set_input(x.output(0), xt, xe)
    out = branch.set_output(branch.get_then_body().results[0], branch.get_else_body().results[0])
    return ov.Model([ops.result(out)], [cond, x])


def test_body_layers_per_iteration(tmp_path):
    """Each iteration's `h` inside a TensorIterator is OpenVINO's concatenated output at that step."""
    xml = save(_rnn_tensor_iterator(), tmp_path)
    feeds = {"X": RNG.standard_normal((2, 4, 3)).astype(np.float32), "H0": np.zeros((2, 5), np.float32)}
    compiled = compile_cpu(xml)
    every_h = np.asarray(compiled(feeds)[compiled.outputs[1]])
    m = irrun.load(xml)
    assert not any("@iter" in k for k in m.infer(feeds, intermediates=True))
    got = m.infer(feeds, intermediates=True, bodies=True)
    for i in range(4):
        assert_close(got[f"rnn/h:0@iter{i}"], every_h[:, i], what=f"iteration {i}")
    assert "rnn/h:0@iter4" not in got
    assert "rnn:1" in got          # the layer's own outputs are still there


def test_if_body_keys_name_the_branch(tmp_path):
    m = irrun.load(save(_if_model(), tmp_path))
    x = np.array([1, 2, 3], np.float32)
    then = m.infer({"cond": np.array(True), "x": x}, intermediates=True, bodies=True)
    np.testing.assert_array_equal(then["choose/then/double:0"], 2 * x)
    assert not any(k.startswith("choose/else/") for k in then)
    other = m.infer({"cond": np.array(False), "x": x}, intermediates=True, bodies=True)
    np.testing.assert_array_equal(other["choose/else/negate:0"], -x)


# ---------------------------------------------------------------- --dump

def run_cli(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.mark.parametrize("target", ["dump", "dump.npz"])
def test_dump_holds_every_intermediate(target, tmp_path):
    xml = MODELS / "bert.f32.xml"
    r = run_cli("infer", xml, "-i", MODELS / "bert.npz", "--dump", tmp_path / target)
    assert r.exit_code == 0, r.output
    expected = irrun.load(xml).infer(example("bert"), intermediates=True)
    keys = [k for k in expected if ":" in k]
    if target.endswith(".npz"):
        with np.load(tmp_path / target) as npz:
            assert sorted(npz.files) == sorted(keys)
            for k in keys:
                np.testing.assert_array_equal(npz[k], expected[k])
    else:
        index = json.loads((tmp_path / target / "index.json").read_text())["tensors"]
        assert [e["key"] for e in index] == keys      # in the order they were produced
        for entry in index:
            value = np.load(tmp_path / target / entry["file"])
            np.testing.assert_array_equal(value, expected[entry["key"]])
            assert entry["shape"] == list(value.shape) and entry["dtype"] == str(value.dtype)
            layer = irrun.load(xml).layers[entry["id"]]
            assert entry["type"] == layer.label and entry["layer"] == layer.name
            if value.dtype.kind == "f":
                assert entry["min"] == float(value.min()) and entry["max"] == float(value.max())
                assert entry["nan"] == 0 and entry["inf"] == 0
    assert [p.name for p in tmp_path.iterdir()] == [target]     # no temporary left behind


def test_dump_filter_by_type_and_by_name(tmp_path):
    xml = MODELS / "resnet.f32.xml"
    m = irrun.load(xml)
    convs = {l.name for l in m.layers.values() if l.op_type == "Convolution"}
    r = run_cli("infer", xml, "-i", MODELS / "resnet.npz", "--dump", tmp_path / "c.npz", "--dump-filter", "Convolution")
    assert r.exit_code == 0, r.output
    with np.load(tmp_path / "c.npz") as npz:
        assert {k.rsplit(":", 1)[0] for k in npz.files} == convs
    r = run_cli("infer", xml, "-i", MODELS / "resnet.npz", "--dump", tmp_path / "r", "--dump-filter", r"layers\.1\..*Relu")
    assert r.exit_code == 0, r.output
    index = json.loads((tmp_path / "r" / "index.json").read_text())["tensors"]
    assert index and all("layers.1." in e["layer"] and e["type"] == "Relu-1" for e in index)


def test_dump_of_nan_and_inf_is_counted(tmp_path):
    x = ops.parameter([4], ov.Type.f32, name="x")
    y = ops.log(x)
    y.set_friendly_name("log")
    xml = save(ov.Model([ops.result(y)], [x]), tmp_path)
    np.save(tmp_path / "x.npy", np.array([-1, 0, 1, np.e], np.float32))
    r = run_cli("infer", xml, "-i", tmp_path / "x.npy", "--dump", tmp_path / "d")
    assert r.exit_code == 0, r.output
    entry = next(e for e in json.loads((tmp_path / "d" / "index.json").read_text())["tensors"] if e["key"] == "log:0")
    assert (entry["nan"], entry["inf"], entry["min"], entry["max"]) == (1, 1, 0.0, pytest.approx(1.0))


def test_dump_bodies(tmp_path):
    xml = save(_rnn_tensor_iterator(), tmp_path)
    np.savez(tmp_path / "in.npz", X=RNG.standard_normal((2, 4, 3)).astype(np.float32),
             H0=np.zeros((2, 5), np.float32))
    r = run_cli("infer", xml, "-i", tmp_path / "in.npz", "--dump", tmp_path / "d.npz", "--dump-bodies")
    assert r.exit_code == 0, r.output
    with np.load(tmp_path / "d.npz") as npz:
        assert {f"rnn/h:0@iter{i}" for i in range(4)} <= set(npz.files)


@pytest.mark.parametrize("args, message", [
    (["--dump-filter", "Relu"], "--dump-filter and --dump-bodies go with --dump PATH"),
    (["--dump", "{tmp}/d", "--dump-filter", "nothing_like_this"], "matches no layer name and no op type"),
    (["--dump", "{tmp}/d", "--dump-filter", "(unclosed"], "is neither an op type of the model nor a regular"),
    (["--dump", "{tmp}/no/such/dir/d.npz"], "does not exist"),
    (["--dump", "{tmp}/file.txt"], "exists and is not an earlier dump"),
])
def test_dump_usage_errors(args, message, tmp_path):
    (tmp_path / "file.txt").write_text("keep me")
    r = run_cli("infer", MODELS / "resnet.f32.xml", "-i", MODELS / "resnet.npz",
                *[a.format(tmp=tmp_path) for a in args])
    assert r.exit_code == 2 and message in r.output, r.output
    assert r.output.count("\n") == 1 and r.output.startswith("error: ")
    assert (tmp_path / "file.txt").read_text() == "keep me"


def test_a_failed_run_leaves_no_dump(tmp_path, monkeypatch):
    """A kernel fails halfway: neither the archive nor the directory appears, no temporary stays."""
    sigmoid = implementation("Sigmoid", 1)
    monkeypatch.setattr(sigmoid, "run", lambda self, x: 1 / 0)
    xml = MODELS / "unet_detector.f32.xml"
    for target in ("d.npz", "d"):
        r = run_cli("infer", xml, "-i", MODELS / "unet_detector.npz", "--dump", tmp_path / target)
        assert r.exit_code == 1 and "Sigmoid-1" in r.output and "ZeroDivisionError" in r.output
    assert list(tmp_path.iterdir()) == []


def test_dump_replaces_an_earlier_dump(tmp_path):
    xml, inputs = MODELS / "resnet.f32.xml", MODELS / "resnet.npz"
    assert run_cli("infer", xml, "-i", inputs, "--dump", tmp_path / "d").exit_code == 0
    assert run_cli("infer", xml, "-i", inputs, "--dump", tmp_path / "d", "--dump-filter", "MatMul").exit_code == 0
    index = json.loads((tmp_path / "d" / "index.json").read_text())["tensors"]
    assert len(index) == 1 and len(list((tmp_path / "d").iterdir())) == 2
    assert [p.name for p in tmp_path.iterdir()] == ["d"]


def _big_chain(tmp_path, layers=24, elements=1 << 21):
    """24 layers on an 8 MiB tensor, each a new tensor that dies at the next layer."""
    x = ops.parameter([1, elements], ov.Type.f32, name="x")
    y = x
    for i in range(layers):
        y = [ops.sigmoid, ops.tanh, ops.relu][i % 3](ops.add(y, ops.constant(np.float32(0.01 * i)))
                                                     if i % 3 == 0 else y)
    return save(ov.Model([ops.result(y)], [x]), tmp_path)


def _peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("target", ["d", "d.npz"])
def test_dump_peak_memory_is_that_of_an_inference(target, tmp_path):
    """tracemalloc's peak (NumPy reports its buffers to it) of an inference with and without a dump
    of every tensor: the dump writes each tensor as it comes and keeps none."""
    xml = _big_chain(tmp_path)
    m = irrun.load(xml)
    x = {"x": RNG.standard_normal((1, 1 << 21)).astype(np.float32)}
    tensor = 8 << 20
    m.infer(x)
    plain = _peak(lambda: m.infer(x))

    def dumped():
        from irrun.dump import Dump
        with Dump(tmp_path / target) as d:
            m.infer(x, watch=[d])
        assert len(d.written) > 24
    with_dump = _peak(dumped)
    total = sum(e["shape"][1] * 4 for e in json.loads((tmp_path / "d" / "index.json").read_text())["tensors"]) \
        if target == "d" else None
    print(f"peak: inference {plain / 2**20:.1f} MiB, with --dump {target} {with_dump / 2**20:.1f} MiB")
    assert with_dump <= plain + tensor // 2      # (NaN / Inf counting makes a bool mask of a quarter tensor)
    assert with_dump < 5 * tensor
    if total is not None:
        assert total > 30 * tensor      # what holding them all would take


def test_loop_body_per_iteration(tmp_path):
    """A Loop's body Add per iteration is OpenVINO's concatenated per-iteration output."""
    from test_ops_control_flow import accumulate_loop
    model = accumulate_loop(4, True)
    loop = next(op for op in model.get_ordered_ops() if op.get_type_name() == "Loop")
    loop.set_friendly_name("acc_loop")
    body = loop.get_function()
    next(op for op in body.get_ordered_ops() if op.get_type_name() == "Add").set_friendly_name("total")
    xml = save(model, tmp_path)
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    compiled = compile_cpu(xml)
    every = np.asarray(compiled([x])[compiled.outputs[2]])
    got = irrun.load(xml).infer(x, intermediates=True, bodies=True)
    for i in range(4):
        assert_close(got[f"acc_loop/total:0@iter{i}"], every[i], what=f"iteration {i}")
    assert "acc_loop/total:0@iter4" not in got


def test_nested_scopes_compose():
    """The key form of nested bodies (the format itself, as documented)."""
    from irrun.watch import TOP
    inner = TOP.enter("outer", "body", 2).enter("choose", "then_body", None).enter("inner", "body", 5)
    assert tensor_key("layer", 1, inner) == "outer/choose/then/inner/layer:1@iter2@iter5"


def test_layers_that_share_a_name_get_keys_of_their_own(tmp_path):
    """Two layers named alike (OpenVINO allows it): each keyed "name#id", neither lost."""
    x = ops.parameter([3], ov.Type.f32, name="x")
    a = ops.multiply(x, ops.constant(np.float32(2)))
    b = ops.add(a, ops.constant(np.float32(1)))
    a.set_friendly_name("twin")
    b.set_friendly_name("twin")
    xml = save(ov.Model([ops.result(b)], [x]), tmp_path)
    m = irrun.load(xml)
    ids = {l.op_type: l.id for l in m.layers.values() if l.name == "twin"}
    got = m.infer(np.array([1, 2, 3], np.float32), intermediates=True)
    np.testing.assert_array_equal(got[f"twin#{ids['Multiply']}:0"], [2, 4, 6])
    np.testing.assert_array_equal(got[f"twin#{ids['Add']}:0"], [3, 5, 7])
    with pytest.raises(irrun.UsageError, match="several layers are named 'twin'; name one of"):
        m.add_outputs(["twin"])
    assert m.add_outputs([f"twin#{ids['Add']}"]) == [f"twin#{ids['Add']}:0"]


def test_f16_layers_are_reported_in_f16(tmp_path):
    """f16 arithmetic is carried in f32 (as the CPU plugin does), and each f16 tensor is reported
    rounded to f16, as OpenVINO returns a tensor added as an output (1e5 overflows to inf there
    while the next layer still sees 1e5)."""
    x = ops.parameter([4], ov.Type.f16, name="x")
    big = ops.multiply(x, ops.constant(np.array([1000, 2000, 3000, 0.001], np.float16)))
    big.set_friendly_name("big")
    small = ops.multiply(big, ops.constant(np.float16(0.25)))
    small.set_friendly_name("small")
    wide = ops.convert(small, ov.Type.f32)
    wide.set_friendly_name("wide")
    xml = save(ov.Model([ops.result(wide)], [x]), tmp_path)
    feeds = {"x": np.array([100, 50, 30, 1.5], np.float16)}
    expected = openvino_layer_outputs(xml, feeds)
    got = irrun.load(xml).infer(feeds, intermediates=True)
    for key in ("x:0", "big:0", "small:0", "wide:0"):
        assert_close(got[key], expected[key], rtol=1e-3, atol=1e-3, what=key)
    assert np.isinf(got["big:0"][:3]).all() and got["small:0"].dtype == np.float16
    code = CliRunner().invoke(cli, ["compare", str(xml), "-i", f"x={_saved(tmp_path, feeds['x'])}", "-r", "openvino"])
    assert code.exit_code == 0, code.output


def _saved(folder: Path, array: np.ndarray) -> Path:
    np.save(folder / "x.npy", array)
    return folder / "x.npy"


def test_positions_count_the_outputs_only():
    m = irrun.load(MODELS / "resnet.f32.xml")
    got = m.infer(example("resnet.f32"), intermediates=True)
    assert got[0] is got["logits"] and got[-1] is got["logits"]
    with pytest.raises(IndexError, match="the model has 1 output"):
        got[1]


def test_threads_sharing_a_model_see_only_their_own_bodies(tmp_path):
    """One thread watches the TensorIterator's body, another runs the same model plainly on other
    inputs at the same time: the watched values are always those of the watching thread's inputs."""
    import threading
    xml = save(_rnn_tensor_iterator(), tmp_path)
    m = irrun.load(xml)
    mine = {"X": RNG.standard_normal((2, 4, 3)).astype(np.float32), "H0": np.zeros((2, 5), np.float32)}
    other = {"X": RNG.standard_normal((2, 4, 3)).astype(np.float32), "H0": np.ones((2, 5), np.float32)}
    expected = m.infer(mine, intermediates=True, bodies=True)
    problems = []

    def watched():
        for _ in range(40):
            got = m.infer(mine, intermediates=True, bodies=True)
            if any(not np.array_equal(got[f"rnn/h:0@iter{i}"], expected[f"rnn/h:0@iter{i}"]) for i in range(4)):
                problems.append("a body value from the other thread")

    def plain():
        for _ in range(40):
            if any("@iter" in k for k in m.infer(other)):
                problems.append("body keys in a plain call")

    threads = [threading.Thread(target=watched), threading.Thread(target=plain)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not problems


def test_a_pickled_model_keeps_its_reshape_and_added_outputs():
    import pickle
    m = irrun.load(MODELS / "resnet.f32.xml")
    m.reshape({"x": [2, 3, -1, -1]})
    m.add_outputs(["__module.pool/aten::adaptive_avg_pool2d/AdaptiveAvgPool"])
    copy = pickle.loads(pickle.dumps(m))
    x = RNG.standard_normal((2, 3, 48, 40)).astype(np.float32)
    got, want = copy.infer(x), m.infer(x)
    assert list(got) == list(want) == ["logits", "__module.pool/aten::adaptive_avg_pool2d/AdaptiveAvgPool:0"]
    for key in want:
        np.testing.assert_array_equal(got[key], want[key])
