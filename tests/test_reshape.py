"""`Model.reshape` and `irrun infer --shape` against OpenVINO's `Model.reshape` of the same IRs."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import openvino as ov
import pytest
from click.testing import CliRunner

import irrun
from irrun.cli import cli
from irrun.shapes import Dim
from ovutil import _CORE, assert_close, compile_cpu, openvino_layer_outputs, save
from test_intermediates import _rnn_tensor_iterator

MODELS = Path(__file__).resolve().parent / "models"
RNG = np.random.default_rng(3)


def openvino_reshaped(xml: Path, shapes: dict, tmp_path: Path) -> Path:
    """The IR reshaped by OpenVINO and saved again (so that its layer outputs can be read)."""
    model = _CORE.read_model(str(xml))
    model.reshape(shapes)
    return save(model, tmp_path / "ov_reshaped")


def _bert_feeds(batch, seq):
    ids = RNG.integers(1, 100, (batch, seq))
    return {"input_ids": ids, "attention_mask": np.ones((batch, seq), np.int64)}


@pytest.mark.parametrize("name, shapes, feeds", [
    ("resnet.f32", {"x": [2, 3, 96, 80]}, {"x": RNG.standard_normal((2, 3, 96, 80), np.float32)}),
    ("resnet_dynamic.f32", {"x": [3, 3, 40, 56]}, {"x": RNG.standard_normal((3, 3, 40, 56), np.float32)}),
    ("bert_dynamic.f32", {"input_ids": [3, 10], "attention_mask": [3, 10]}, _bert_feeds(3, 10)),
    ("mobilenetv3.f16", {"x": [2, 3, 48, 48]}, {"x": RNG.standard_normal((2, 3, 48, 48), np.float32)}),
    ("llama_dynamic.f32", {"input_ids": [1, 9]}, {"input_ids": RNG.integers(0, 128, (1, 9))}),
])
def test_reshaped_like_openvino(name, shapes, feeds, tmp_path):
    """Every layer output of the reshaped model equals OpenVINO's on its reshaped model."""
    xml = MODELS / f"{name}.xml"
    m = irrun.load(xml)
    m.reshape(shapes)
    for info in m.inputs:
        assert info.shape == tuple(shapes[info.name])
    reference = _CORE.read_model(str(xml))
    reference.reshape(shapes)
    assert [str(o.get_partial_shape()) for o in reference.outputs] == \
        [str(list(o.shape)).replace(" ", "") for o in m.outputs]
    expected = openvino_layer_outputs(reference, feeds)
    got = m.infer(feeds, intermediates=True)
    # every irrun tensor is checked (OpenVINO's reshape may add a ShapeOf -> Gather -> Concat for
    # a flattening Reshape: its SmartReshape passes)
    assert set(got) - set(expected) == {o.name for o in m.outputs}
    compared = [k for k in expected if k in got]
    for key in compared:
        assert_close(got[key], expected[key], what=key)


def test_dynamic_dims_by_reshape(tmp_path):
    """A static model made dynamic ([-1, 3, -1, -1] and the text form), run at two sizes."""
    xml = MODELS / "resnet.f32.xml"
    for spec in ([-1, 3, -1, -1], "?,3,?,?"):
        m = irrun.load(xml)
        m.reshape({"x": spec})
        assert m.inputs[0].shape == (Dim(), 3, Dim(), Dim())
        reference = openvino_reshaped(xml, {"x": [-1, 3, -1, -1]}, tmp_path / str(len(spec)))
        compiled = compile_cpu(reference)
        for shape in ((1, 3, 64, 64), (2, 3, 33, 47)):
            x = RNG.standard_normal(shape, np.float32)
            assert_close(m.infer(x)["logits"], np.asarray(compiled([x])[compiled.outputs[0]]), what=str(shape))


def test_a_body_reshaped(tmp_path):
    """A TensorIterator whose body is inferred again for a new batch and sequence length."""
    xml = save(_rnn_tensor_iterator(), tmp_path)
    shapes = {"X": [3, 6, 3], "H0": [3, 5]}
    m = irrun.load(xml)
    m.reshape(shapes)
    feeds = {"X": RNG.standard_normal((3, 6, 3), np.float32), "H0": RNG.standard_normal((3, 5), np.float32)}
    reference = openvino_reshaped(xml, shapes, tmp_path)
    compiled = compile_cpu(reference)
    expected = compiled(feeds)
    for out, info in zip(compiled.outputs, m.outputs):
        assert_close(m.infer(feeds)[info.name], np.asarray(expected[out]), what=info.name)
    assert m.outputs[1].shape == (3, 6, 5)


def test_reshape_keeps_added_outputs_and_resets_state():
    m = irrun.load(MODELS / "resnet.f32.xml")
    m.add_outputs(["__module.pool/aten::adaptive_avg_pool2d/AdaptiveAvgPool"])
    m.reshape({0: [2, 3, 64, 64]})
    got = m.infer(RNG.standard_normal((2, 3, 64, 64), np.float32))
    assert got["__module.pool/aten::adaptive_avg_pool2d/AdaptiveAvgPool:0"].shape == (2, 64, 1, 1)


@pytest.mark.parametrize("name, shapes, layer, message", [
    ("bert.f32", {"input_ids": [3, 10], "attention_mask": [3, 10]}, "__module.layers.0/aten::view/Reshape",
     "cannot reshape [3,10,64] (1920 elements) to [2,16,4,16]"),
    ("lstm_gru.f32", {"tokens": [3, 7]}, "__module.lstm/aten::lstm/LSTMSequence", "does not match 3"),
    ("vit.f32", {"x": [2, 3, 32, 32]}, "aten::cat/Concat", ""),
])
def test_a_shape_the_model_cannot_take(name, shapes, layer, message):
    """OpenVINO refuses these reshapes too; irrun names the layer where inference fails."""
    xml = MODELS / f"{name}.xml"
    with pytest.raises(RuntimeError):
        _CORE.read_model(str(xml)).reshape(shapes)
    m = irrun.load(xml)
    with pytest.raises(irrun.ModelError) as info:
        m.reshape(shapes)
    err = info.value
    assert err.layer.name == layer and err.line and message in err.message
    assert err.message.startswith("the model cannot take ")
    assert m.inputs[0].shape == tuple(irrun.load(xml).inputs[0].shape)     # unchanged: still runs as before
    m.infer({i.name: np.asarray(v) for i, v in zip(m.inputs, np.load(MODELS / f"{name.split('.')[0]}.npz").values())})


def test_an_input_the_declared_dims_forbid_points_to_reshape():
    m = irrun.load(MODELS / "resnet.f32.xml")
    with pytest.raises(irrun.InputError, match=r"input 'x' expects shape \[1,3,64,64\], got \[2, 3, 64, 64\] "
                                               r"\(dim 0: 2 is not 1\); to run other shapes, reshape the model "
                                               r"first \(--shape x=\[2,3,64,64\], or Model.reshape\)"):
        m.infer(np.zeros((2, 3, 64, 64), np.float32))
    d = irrun.load(MODELS / "resnet_dynamic.f32.xml")      # dims the model leaves dynamic need no reshape
    assert d.infer(np.zeros((2, 3, 40, 40), np.float32))["logits"].shape == (2, 10)


@pytest.mark.parametrize("shapes, message", [
    ({"nope": [1, 3, 64, 64]}, "unknown input 'nope'; the model's inputs are 'x'"),
    ({"x": [1, 3, "a", 64]}, "'a' is not a dim"),
    ({"x": [1, 3, -2, 64]}, "-2 is not a dim"),
    ({"x": "1,3,?"}, "the model cannot take x=[1,3,?]"),
    ({"x": 5}, "must be a list of dims"),
    ({}, "reshape takes a mapping"),
])
def test_bad_reshape_arguments(shapes, message):
    m = irrun.load(MODELS / "resnet.f32.xml")
    with pytest.raises(irrun.IrrunError, match=message.replace("[", r"\[").replace("?", r"\?")):
        m.reshape(shapes)


def run_cli(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_cli_shape(tmp_path):
    np.save(tmp_path / "x.npy", RNG.standard_normal((2, 3, 96, 80), np.float32))
    r = run_cli("infer", MODELS / "resnet.f32.xml", "-i", tmp_path / "x.npy", "--shape", "x=[2,3,96,80]")
    assert r.exit_code == 0 and "logits: shape [2, 10]" in r.output, r.output
    r = run_cli("infer", MODELS / "resnet.f32.xml", "-i", tmp_path / "x.npy", "--shape", "[-1,3,-1,-1]")
    assert r.exit_code == 0 and "logits: shape [2, 10]" in r.output, r.output
    r = run_cli("infer", MODELS / "resnet.f32.xml", "-i", tmp_path / "x.npy")
    assert r.exit_code == 1 and "--shape x=[2,3,96,80]" in r.output


@pytest.mark.parametrize("args, code, message", [
    (["--shape", "input_ids=[3,10]", "--shape", "attention_mask=[3,10]"], 1,
     'layer 27 "__module.layers.0/aten::view/Reshape" (Reshape-1): the model cannot take input_ids=[3,10], '
     'attention_mask=[3,10]: cannot reshape'),
    (["--shape", "[3,10]"], 2, "names no input, but the model has 2 (input_ids, attention_mask)"),
    (["--shape", "input_ids=[3,10]", "--shape", "input_ids=[3,10]"], 2, "gives input 'input_ids' twice"),
    (["--shape", "input_ids=3;10"], 2, "expected NAME=[d0,d1,...]"),
])
def test_cli_shape_errors(args, code, message):
    r = run_cli("infer", MODELS / "bert.f32.xml", "-i", MODELS / "bert.npz", *args)
    assert r.exit_code == code and r.output.startswith("error: ") and r.output.count("\n") == 1, r.output
    assert message in r.output, r.output
