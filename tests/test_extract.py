"""`irrun extract`: the extracted IR runs in OpenVINO, and its outputs are those layers' outputs in
the full model (OpenVINO `add_outputs` on the full model, CPU at f32).

The two runs are separate compilations, so the CPU plugin may fuse the layers differently (a
Convolution with the Add after it, say): values are compared within the suite's float bounds
(rtol 1e-4, atol 1e-5); integer and boolean tensors exactly.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import openvino as ov
import pytest
from click.testing import CliRunner
from ovutil import assert_close, compile_cpu, run_openvino, save

import irrun
from irrun.cli import cli
from irrun.ir import parse_document

MODELS = Path(__file__).resolve().parent / "models"
CORE = ov.Core()


def full_model_tensors(xml: Path, feeds: list[np.ndarray], keys: list[str]) -> list[np.ndarray]:
    """The tensors `keys` (`layer` or `layer:index`) of the full model, as OpenVINO computes them."""
    model = CORE.read_model(str(xml))
    by_name = {op.get_friendly_name(): op for op in model.get_ops()}
    ports = []
    for key in keys:
        name, index = (key, 0) if key in by_name else (key.rpartition(":")[0], int(key.rpartition(":")[2]))
        ports.append(by_name[name].output(index))
    added = model.add_outputs(ports)   # (a port that is an output already gives that output)
    at = [next(k for k, o in enumerate(model.outputs) if o.get_node() == a.get_node()) for a in added]
    compiled = compile_cpu(model)
    result = compiled(feeds)
    return [np.asarray(result[compiled.outputs[k]]) for k in at]


def layer_names(xml: Path, type_: str) -> list[str]:
    return [l.name for l in parse_document(xml).graph.layers.values() if l.type == type_]


def check_against_full_model(full: Path, sub: Path, feeds: list[np.ndarray], keys: list[str],
                             sub_feeds: list[np.ndarray] | None = None) -> None:
    expected = full_model_tensors(full, feeds, keys)
    inputs = feeds if sub_feeds is None else sub_feeds
    got = run_openvino(sub, inputs)
    assert len(got) == len(expected)
    for g, e, key in zip(got, expected, keys):
        assert_close(g, e, what=key)
    for g, e, key in zip(irrun.load(sub).infer(inputs).values(), expected, keys):   # and irrun agrees
        assert_close(g, e, rtol=1e-3, atol=1e-4, what=key)


def test_a_middle_layer_of_resnet(tmp_path):
    full = MODELS / "resnet.f16.xml"
    x = np.load(MODELS / "resnet.npz")["x"]
    relu = layer_names(full, "ReLU")[3]
    sub = irrun.extract(full, tmp_path / "sub.xml", outputs=[relu])
    check_against_full_model(full, sub, [x], [relu])
    m = irrun.load(sub)
    assert [i.name for i in m.inputs] == ["x"] and [o.name for o in m.outputs] == [relu]
    graph = parse_document(sub).graph
    assert not any(l.type == "MatMul" for l in graph.layers.values())
    # Only the constants still used: every Const feeds a layer, and the .bin is smaller.
    consts = [l.id for l in graph.layers.values() if l.op_type == "Constant"]
    assert consts and all(any(e.from_layer == c for e in graph.edges) for c in consts)
    assert sub.with_suffix(".bin").stat().st_size < full.with_suffix(".bin").stat().st_size
    assert irrun.validate(sub).ok and not list(irrun.validate(sub))


def test_cut_at_an_input_tensor_becomes_a_parameter(tmp_path):
    """--inputs: the tensor becomes a Parameter (shape and type from inference), nothing above it is kept."""
    full = MODELS / "resnet.f32.xml"
    x = np.load(MODELS / "resnet.npz")["x"]
    cut = layer_names(full, "ReLU")[2]
    sub = irrun.extract(full, tmp_path / "sub.xml", outputs=["logits"], inputs=[cut])
    graph = parse_document(sub).graph
    params = [l for l in graph.layers.values() if l.op_type == "Parameter"]
    original = next(l for l in parse_document(full).graph.layers.values() if l.name == cut).outputs[0].names
    assert [p.name for p in params] == [cut] and params[0].outputs[0].names == (cut, f"{cut}:0", *original)
    (cut_value,) = full_model_tensors(full, [x], [cut])
    assert params[0].data == {"shape": ",".join(map(str, cut_value.shape)), "element_type": "f32"}
    assert len(graph.layers) < len(parse_document(full).graph.layers) - 10
    result = next(l for l in graph.layers.values() if l.op_type == "Result")
    key = _producer_key(full, "logits")
    assert result.output_names == (key, f"{key}:0", "logits")
    check_against_full_model(full, sub, [x], [_producer_key(full, "logits")], sub_feeds=[cut_value])


def _producer_key(xml: Path, tensor: str) -> str:
    for layer in parse_document(xml).graph.layers.values():
        for i, port in enumerate(layer.outputs):
            if tensor in port.names:
                return layer.name if len(layer.outputs) == 1 else f"{layer.name}:{i}"
    raise KeyError(tensor)


def test_one_output_of_a_multi_output_layer(tmp_path):
    """`layer:1`: the LSTMSequence's hidden state; the layer name alone: all three of its outputs."""
    full = MODELS / "lstm_gru.f32.xml"
    tokens = np.load(MODELS / "lstm_gru.npz")["tokens"]
    lstm = layer_names(full, "LSTMSequence")[0]
    sub = irrun.extract(full, tmp_path / "one.xml", outputs=[f"{lstm}:1"])
    assert [o.name for o in irrun.load(sub).outputs] == [f"{lstm}:1"]
    check_against_full_model(full, sub, [tokens], [f"{lstm}:1"])
    every = irrun.extract(full, tmp_path / "all.xml", outputs=[lstm])
    assert [o.name for o in irrun.load(every).outputs] == [f"{lstm}:{i}" for i in range(3)]
    check_against_full_model(full, every, [tokens], [f"{lstm}:{i}" for i in range(3)])


def test_outputs_that_need_only_one_of_two_inputs(tmp_path):
    """BERT's embeddings need input_ids only: the attention mask Parameter is not kept."""
    full = MODELS / "bert.f32.xml"
    feeds = dict(np.load(MODELS / "bert.npz"))
    gather = layer_names(full, "Gather")[0]
    sub = irrun.extract(full, tmp_path / "sub.xml", outputs=[gather])
    m = irrun.load(sub)
    assert [i.name for i in m.inputs] == ["input_ids"]
    names = [i.name for i in irrun.load(full).inputs]
    expected = full_model_tensors(full, [feeds[n] for n in names], [gather])
    assert_close(run_openvino(sub, [feeds["input_ids"]])[0], expected[0])


def test_a_result_and_a_tensor_name_stand_for_their_tensors(tmp_path):
    full = MODELS / "resnet.f32.xml"
    result = layer_names(full, "Result")[0]
    by_result = irrun.extract(full, tmp_path / "a.xml", outputs=[result])
    by_tensor = irrun.extract(full, tmp_path / "b.xml", outputs=["logits"])
    assert by_result.read_text() == by_tensor.read_text()
    key = _producer_key(full, "logits")
    assert irrun.load(by_tensor).outputs[0].names == (key, f"{key}:0", "logits")


def test_a_sub_graph_op_is_taken_whole(tmp_path):
    from test_ops_control_flow import rnn_ti, ti_feeds
    model = rnn_ti(invariant=True)
    full = save(model, tmp_path / "full")
    ti = layer_names(full, "TensorIterator")[0]
    sub = irrun.extract(full, tmp_path / "sub.xml", outputs=[f"{ti}:1"])
    feeds = ti_feeds(model)
    check_against_full_model(full, sub, feeds, [f"{ti}:1"])


def test_dynamic_dims_of_a_cut_come_from_inference(tmp_path):
    full = MODELS / "resnet_dynamic.f32.xml"
    cut = layer_names(full, "ReLU")[2]   # (after the first residual Add: everything later depends on it alone)
    sub = irrun.extract(full, tmp_path / "sub.xml", outputs=["logits"], inputs=[cut])
    (param,) = [l for l in parse_document(sub).graph.layers.values() if l.op_type == "Parameter"]
    assert param.data["shape"] == "?,16,1..,1.." and param.outputs[0].dims == (-1, 16, -1, -1)   # (bounds kept)
    for size in (32, 48):
        x = np.random.default_rng(size).standard_normal((2, 3, size, size)).astype(np.float32)
        (cut_value,) = full_model_tensors(full, [x], [cut])
        check_against_full_model(full, sub, [x], [_producer_key(full, "logits")], sub_feeds=[cut_value])


def test_model_extract_and_path_extract_write_the_same(tmp_path):
    full = MODELS / "mobilenetv3.f16.xml"
    relu = layer_names(full, "HSwish")[2]
    a = irrun.load(full).extract(tmp_path / "a.xml", outputs=[relu])
    b = irrun.extract(full, tmp_path / "b.xml", outputs=[relu])
    assert a.read_bytes() == b.read_bytes()
    assert a.with_suffix(".bin").read_bytes() == b.with_suffix(".bin").read_bytes()


def test_from_ir_v10_the_sub_graph_in_its_declared_types(tmp_path):
    """From an IR v10 model: an IR v11 sub-graph of the layers as declared (no v10 input or output
    conversion; OpenVINO's add_outputs gives those layers' outputs unconverted too), without the layer
    rt_info that the v10 reader ignores."""
    from irxml import relu_model, write
    rt = '<rt_info><attribute name="old_api_map_order" version="0" value="1,0"/></rt_info>'
    full = write(tmp_path, relu_model(version=10).replace('<input>', rt + '<input>', 1))
    sub = irrun.extract(full, tmp_path / "sub.xml", outputs=["relu"])
    assert 'version="11"' in sub.read_text() and "old_api_map_order" not in sub.read_text()
    x = np.array([[1, -2, 3]], np.float32)
    check_against_full_model(full, sub, [x], ["relu"])


# ---------------------------------------------------------------- bad names

def test_unknown_names_are_clear_errors_with_suggestions(tmp_path):
    full = MODELS / "resnet.f32.xml"
    conv = layer_names(full, "Convolution")[0]
    with pytest.raises(irrun.UsageError, match=rf'output "{conv[:-1]}": no layer or tensor of that name; '
                                               rf"did you mean .*'{conv}'"):
        irrun.extract(full, tmp_path / "s.xml", outputs=[conv[:-1]])
    with pytest.raises(irrun.UsageError, match=r'input "nothing_like_it": no layer or tensor of that name \(names'):
        irrun.extract(full, tmp_path / "s.xml", outputs=[conv], inputs=["nothing_like_it"])
    with pytest.raises(irrun.UsageError, match=rf'layer "{re.escape(conv)}" has 1 output \(0..0\)'):
        irrun.extract(full, tmp_path / "s.xml", outputs=[f"{conv}:3"])
    assert not (tmp_path / "s.xml").exists()


def test_an_input_the_outputs_do_not_need_is_refused(tmp_path):
    full = MODELS / "resnet.f32.xml"
    early, late = layer_names(full, "ReLU")[0], layer_names(full, "ReLU")[4]
    with pytest.raises(irrun.UsageError, match=f"input '{re.escape(late)}': the outputs do not depend on it"):
        irrun.extract(full, tmp_path / "s.xml", outputs=[early], inputs=[late])


def test_cli(tmp_path):
    full = MODELS / "resnet.f32.xml"
    relus = layer_names(full, "ReLU")
    out = tmp_path / "sub.xml"
    run = CliRunner().invoke(cli, ["extract", str(full), "--outputs", f"{relus[3]},{relus[4]}", "--inputs", relus[2],
                                   "-o", str(out)])
    assert run.exit_code == 0, run.output
    assert re.fullmatch(rf"wrote {re.escape(str(out))}: \d+ layers, 1 input, 2 outputs\n", run.output)
    assert [o.name for o in irrun.load(out).outputs] == relus[3:5]
    run = CliRunner().invoke(cli, ["extract", str(full), "--outputs", "Multiply_387", "-o", str(out)])
    assert run.exit_code == 2 and run.output.startswith('error: output "Multiply_387": no layer or tensor')
    run = CliRunner().invoke(cli, ["extract", str(full), "--outputs", relus[0], "-o", str(full)])
    assert run.exit_code == 2 and "refusing to overwrite it" in run.output
