"""`irrun info` (irrun/stats.py), `irrun graph` (irrun/graph_export.py) and `infer --format json`.

Counts are checked against what the test builds (parameters by element type, compressed
weights by their logical elements), shapes against OpenVINO's own shape inference of the same
model, and the exported graphs by reading them back with networkx.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import networkx as nx
import numpy as np
import openvino as ov
import openvino.opset1 as ops1
import openvino.opset6 as ops6
import openvino.opset17 as ops17
import pytest
from click.testing import CliRunner

import irrun
from irrun.cli import cli
from irrun.stats import model_stats
from ovutil import param, save

ROOT = Path(__file__).resolve().parent.parent
MODELS = Path(__file__).resolve().parent / "models"
DIGITS = ROOT / "models" / "digits"
RNG = np.random.default_rng(0)


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def ov_shape(output) -> list:
    return [d.get_length() if d.is_static else "?" for d in output.get_partial_shape()]


# ---------------------------------------------------------------- models

def compressed_model() -> ov.Model:
    """Three MatMuls with the decompression subgraphs NNCF writes: int4 asymmetric in groups of 32
    (u4 weights and zero points, f16 scales, Reshape), int8 symmetric per channel, nf4 per channel."""
    x = param([1, 64], name="x")
    w4 = ops1.constant(RNG.integers(0, 16, (16, 2, 32)).astype(np.uint8), dtype=ov.Type.u4)
    zp = ops1.constant(RNG.integers(0, 16, (16, 2, 1)).astype(np.uint8), dtype=ov.Type.u4)
    scale = ops1.constant(RNG.random((16, 2, 1)).astype(np.float16))
    w = ops1.multiply(ops1.subtract(ops1.convert(w4, "f16"), ops1.convert(zp, "f16")), scale)
    w = ops1.convert(ops1.reshape(w, ops1.constant(np.array([16, 64], np.int64)), False), "f32")
    y = ops1.matmul(x, w, False, True)
    w8 = ops1.constant(RNG.integers(-128, 127, (32, 16)).astype(np.int8))
    y = ops1.matmul(y, ops1.multiply(ops1.convert(w8, "f32"), ops1.constant(RNG.random((32, 1)).astype(np.float32))),
                    False, True)
    nf4 = ops1.constant(RNG.standard_normal((8, 32)).astype(np.float32), dtype=ov.Type.nf4)
    y = ops1.matmul(y, ops1.multiply(ops1.convert(nf4, "f32"), ops1.constant(RNG.random((8, 1)).astype(np.float32))),
                    False, True)
    return ov.Model([y], [x], "compressed")


def stateful_model() -> ov.Model:
    from openvino.op.util import Variable, VariableInfo
    info = VariableInfo()
    info.data_shape, info.data_type, info.variable_id = ov.PartialShape([-1, 4]), ov.Type.f32, "cache"
    var = Variable(info)
    x = param([1, 4], name="x")
    grown = ops6.read_value(ops1.constant(np.zeros((1, 4), np.float32)), var)   # an initial value: not a weight
    grown = ops1.concat([grown, x], 0)
    return ov.Model([ops1.result(grown)], [ops6.assign(grown, var)], [x], "cache")


def grouped_matmul_model() -> ov.Model:
    """A mixture-of-experts layer: GroupedMatMul (opset 17)."""
    a = param([8, 16], name="a")
    b = ops1.constant(RNG.random((4, 32, 16)).astype(np.float32))
    y = ops17.grouped_matmul(a, b, ops1.constant(np.array([2, 4, 6, 8], np.int64)))
    return ov.Model([ops1.relu(y)], [a], "moe")


# ---------------------------------------------------------------- info

def test_info_json_schema_and_shapes_match_openvino():
    xml = MODELS / "bert.f32.xml"
    r = run("info", xml, "--format", "json")
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)
    assert set(info) == {"schema", "file", "name", "ir_version", "inputs", "outputs", "operations", "opsets",
                         "parameters", "weights_bytes", "macs", "dynamic", "compression", "variables",
                         "diagnostics", "layers"}
    assert info["inputs"][0] == {"name": "input_ids", "names": ["input_ids"], "shape": [2, 16], "element_type": "i64",
                                 "layer": info["inputs"][0]["layer"], "dynamic": False}
    assert info["macs"]["flops"] == 2 * info["macs"]["total"] and info["macs"]["uncounted"] == []
    assert sum(info["macs"]["by_type"].values()) == info["macs"]["total"]
    assert sum(l["macs"] or 0 for l in info["layers"] if "parent" not in l) == info["macs"]["total"]
    assert info["dynamic"] == {"inputs": [], "tensors": 0}
    assert info["diagnostics"]["errors"] == 0 and info["compression"] == [] and info["variables"] == []
    # every layer's output types are OpenVINO's
    ov_model = ov.Core().read_model(str(xml))
    by_name = {op.get_friendly_name(): op for op in ov_model.get_ops()}
    for layer in info["layers"]:
        op = by_name[layer["name"]]
        assert layer["type"] == op.get_type_name()
        expected = [{"shape": ov_shape(o), "element_type": o.get_element_type().get_type_name()}
                    for o in op.outputs()]
        assert layer["outputs"] == expected, layer["name"]
        for i, inp in enumerate(layer["inputs"]):
            assert inp["shape"] == ov_shape(op.input(i).get_source_output())
    assert info["opsets"] == dict(sorted(
        {f"opset{n}": c for n, c in _opset_counts(xml).items()}.items()))


def _opset_counts(xml: Path) -> dict:
    from lxml import etree
    found: dict = {}
    for layer in etree.parse(str(xml)).iter("layer"):
        n = int(layer.get("version").removeprefix("opset"))
        found[n] = found.get(n, 0) + 1
    return found


def test_parameters_of_f32_and_f16_twins_and_text():
    f32, f16 = model_stats(MODELS / "resnet.f32.xml"), model_stats(MODELS / "resnet.f16.xml")
    assert f32.parameter_count == f16.parameter_count == sum(f32.parameters.values())
    assert set(f32.parameters) == {"f32"} and set(f16.parameters) == {"f16"}   # each weight once, not again as f32
    assert f16.compression[0]["kind"] == "fp16" and f16.compression[0]["elements"] == f16.parameter_count
    r = run("info", MODELS / "resnet.f16.xml")
    assert r.exit_code == 0, r.output
    for text in ("x: [1,3,64,64] f32", "Convolution-1", f"parameters: {f16.parameter_count:,} (f16",
                 "compute: 3.54M MACs, 7.07M FLOPs", "heaviest layers:", "opsets: opset1 (76), opset14 (1)",
                 "fp16 (f16): 20 weights", "dynamic: none"):
        assert text in r.output, text
    assert "layers (MACs" not in r.output
    r = run("info", MODELS / "resnet.f16.xml", "--layers")
    assert "layers (MACs" in r.output and "-> [1,16,32,32] f32" in r.output


def test_compressed_weights(tmp_path):
    xml = save(compressed_model(), tmp_path / "c.xml")
    st = model_stats(xml)
    # logical elements: a u4 [16, 2, 32] is 1,024 parameters, plus its 32 zero points
    assert st.parameters == {"u4": 16 * 64 + 32, "i8": 32 * 16, "nf4": 8 * 32, "f32": 32 + 8, "f16": 32}
    kinds = {c["kind"]: c for c in st.compression}
    assert kinds["int4"] == {"kind": "int4", "element_type": "u4", "weights": 1, "elements": 1024, "asymmetric": 1,
                             "group_sizes": {"32": 1}, "consumers": {"MatMul-1": 1}}
    assert kinds["int8"]["elements"] == 512 and kinds["int8"]["asymmetric"] == 0
    assert kinds["int8"]["group_sizes"] == {"channel": 1}
    assert kinds["nf4"]["elements"] == 256
    assert st.macs == 64 * 16 + 16 * 32 + 32 * 8     # the decompression runs on constants: folded
    r = run("info", xml)
    assert "int4 (u4): 1 weights, 1,024 elements, 1 with zero points; groups of 32 1" in r.output
    assert "decompressed at load: 7.0 KiB of f32" in r.output      # (1,792 elements)


def test_variables(tmp_path):
    xml = save(stateful_model(), tmp_path / "s.xml")
    info = json.loads(run("info", xml, "--format", "json").output)
    (var,) = info["variables"]
    assert var["id"] == "cache" and var["shape"] == ["?", 4] and var["element_type"] == "f32"
    assert len(var["read_value"]) == 1 and len(var["assign"]) == 1
    assert info["dynamic"]["tensors"] > 0 and info["parameters"]["total"] == 0
    assert "cache: [?,4] f32" in run("info", xml).output


def test_info_of_an_opset17_model(tmp_path):
    xml = save(grouped_matmul_model(), tmp_path / "moe.xml")
    assert irrun.load(xml).infer([np.ones((8, 16), np.float32)])[0].shape == (8, 32)
    info = json.loads(run("info", xml, "--format", "json").output)
    gmm = next(l for l in info["layers"] if l["type"] == "GroupedMatMul")
    assert gmm["outputs"] == [{"shape": [8, 32], "element_type": "f32"}] and not gmm["declared_only"]
    assert gmm["macs"] == 8 * 32 * 16
    assert info["diagnostics"]["errors"] == 0 and info["opsets"]["opset17"] == 1


def test_info_describes_what_irrun_cannot_run(tmp_path):
    """A custom op (an extension OpenVINO itself would need a plugin for): `info` still describes the
    model, with the layer's declared types."""
    xml = save(grouped_matmul_model(), tmp_path / "moe.xml")
    xml.write_text(xml.read_text().replace('type="GroupedMatMul" version="opset17"', 'type="MoeGemm" version="extension"'))
    with pytest.raises(irrun.IrrunError):
        irrun.load(xml)
    r = run("info", xml, "--format", "json")
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)
    gemm = next(l for l in info["layers"] if l["type"] == "MoeGemm")
    assert gemm["outputs"] == [{"shape": [8, 32], "element_type": "f32"}] and gemm["declared_only"]
    assert info["diagnostics"]["errors"] >= 1 and "MoeGemm" in info["diagnostics"]["first_error"]
    r = run("info", xml)
    assert r.exit_code == 0 and "problems: " in r.output and "MoeGemm" in r.output


@pytest.mark.parametrize("content, message", [
    ("hello", "not an OpenVINO IR .xml file"),
    ("<net", "not well-formed XML"),
    ('<?xml version="1.0"?><html></html>', "expected <net>"),
])
def test_info_and_graph_of_a_non_ir_file(tmp_path, content, message):
    bad = tmp_path / "bad.xml"
    bad.write_text(content)
    for command in ("info", "graph"):
        r = run(command, bad)
        assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output
        assert r.output.count("\n") == 1 and r.output.startswith("error: ")


def test_sub_graph_layers_are_listed_with_scoped_ids(tmp_path):
    from test_ops_control_flow import rnn_ti
    xml = save(rnn_ti(), tmp_path / "ti.xml")
    st = model_stats(xml)
    ti = next(l for l in st.layers if l.type == "TensorIterator")
    body = [l for l in st.layers if l.parent == ti.id]
    assert body and all(l.id.startswith(f"{ti.id}/") for l in body)
    assert ti.macs == 5 * (2 * 3 * 4 + 2 * 4 * 4 + 2 * 4) and st.macs == ti.macs
    body_matmuls = [l for l in body if l.type == "MatMul"]
    assert sorted(l.outputs[0].shape for l in body_matmuls) == [(2, 4), (2, 4)]


# ---------------------------------------------------------------- graph

def check_graph(g: nx.MultiDiGraph, m: irrun.Model, *, text_values: bool = False) -> None:
    """One node per layer with its labels, one edge per IR edge with the tensor's shape and type."""
    assert set(g.nodes) == set(m.layers)
    assert g.number_of_edges() == sum(1 for e in m.document.graph.edges if e.in_index is not None)
    for lid, layer in m.layers.items():
        data = g.nodes[lid]
        assert str(data.get("name", data.get("layer_name"))).strip('"') == layer.name
        assert str(data["type"]).strip('"') == layer.op_type
        assert str(data["version"]).strip('"') == str(layer.op_version)
    for u, v, data in g.edges(data=True):
        out_port = int(str(data["out_port"]).strip('"'))
        t = m.analysis.type_of((u, out_port))
        assert str(data["element_type"]).strip('"') == t.etype.name
        shape = str(data["shape"]).strip('"')
        assert shape == "[" + ",".join(map(str, t.shape)) + "]"


@pytest.fixture(scope="module")
def bert():
    return irrun.load(MODELS / "bert.f32.xml")


def test_graph_graphml_round_trip(tmp_path, bert):
    out = tmp_path / "g.graphml"
    r = run("graph", bert.path, "-o", out)
    assert r.exit_code == 0, r.output
    g = nx.read_graphml(out, force_multigraph=True)
    check_graph(g, bert)
    conv = next(n for n, d in g.nodes(data=True) if d["type"] == "MatMul")
    assert g.nodes[conv]["attr.transpose_b"] in ("true", "false")


def test_graph_json_round_trip(tmp_path, bert):
    out = tmp_path / "g.json"
    assert run("graph", bert.path, "-o", out).exit_code == 0
    data = json.loads(out.read_text())
    g = nx.node_link_graph(data, edges="edges")
    assert g.is_multigraph() and g.is_directed()
    for u, v, k, d in g.edges(keys=True, data=True):
        d["shape"] = "[" + ",".join(map(str, d["shape"])) + "]"
    check_graph(g, bert)
    assert data["graph"]["format"] == "irrun-graph"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")   # (pydot's use of pyparsing)
def test_graph_dot(tmp_path, bert):
    out = tmp_path / "g.dot"
    assert run("graph", bert.path, "-o", out).exit_code == 0
    text = out.read_text()
    assert text.startswith('digraph "bert" {') and text.rstrip().endswith("}")
    assert text.count(" -> ") == sum(1 for e in bert.document.graph.edges if e.in_index is not None)
    assert '[label="[2,16,64] f32"' in text
    pydot = pytest.importorskip("pydot")   # networkx reads DOT through pydot
    assert pydot
    check_graph(nx.nx_pydot.read_dot(out), bert)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_dot_escapes_names(tmp_path):
    x = param([2], name='a "quoted" \\ name\nwith a line')
    model = ov.Model([ops1.relu(x)], [x], 'm"odel')
    xml = save(model, tmp_path / "m.xml")
    r = run("graph", xml, "--format", "dot")
    assert r.exit_code == 0, r.output
    assert '"a \\"quoted\\" \\\\ name\\nwith a line' in r.output and 'digraph "m\\"odel"' in r.output
    pydot = pytest.importorskip("pydot")
    (parsed,) = pydot.graph_from_dot_data(r.output)
    assert len(parsed.get_edges()) == 2


def test_graph_of_sub_graphs(tmp_path):
    from test_ops_control_flow import rnn_ti
    xml = save(rnn_ti(), tmp_path / "ti.xml")
    r = run("graph", xml, "--format", "dot")
    assert 'subgraph "cluster_' in r.output
    g = nx.read_graphml(_written(run, xml, tmp_path / "ti.graphml"), force_multigraph=True)
    ti = next(n for n, d in g.nodes(data=True) if d["type"] == "TensorIterator")
    inside = [n for n, d in g.nodes(data=True) if d.get("parent") == ti]
    assert inside and all(n.startswith(f"{ti}/") and g.nodes[n]["body"] == "body" for n in inside)
    assert any(u in inside and v in inside for u, v in g.edges())


def _written(runner, xml, out):
    r = runner("graph", xml, "-o", out)
    assert r.exit_code == 0, r.output
    return out


def test_graph_bad_output(tmp_path, bert):
    r = run("graph", bert.path, "-o", tmp_path / "missing" / "g.dot")
    assert r.exit_code == 2 and r.output.startswith("error: cannot write") and r.output.count("\n") == 1
    r = run("graph", bert.path, "-o", tmp_path / "g.png")
    assert r.exit_code == 2 and "--format" in r.output
    if os.geteuid() != 0:   # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(0o500)
        r = run("graph", bert.path, "-o", locked / "g.dot")
        assert r.exit_code == 2 and "cannot write" in r.output
    assert not list(tmp_path.glob("**/.g.*"))    # no temporary left behind


def test_model_graph_is_labelled(bert):
    g = bert.graph
    some = next(iter(bert.layers.values()))
    assert g.nodes[some.id]["name"] == some.name and g.nodes[some.id]["attributes"] == some.data
    u, v, data = next(iter(g.edges(data=True)))
    assert data["shape"] == bert.analysis.type_of((u, data["out_port"])).shape


# ---------------------------------------------------------------- infer --format json

def test_infer_json(tmp_path):
    out = tmp_path / "out.npz"
    r = run("infer", DIGITS / "model.xml", "-i", DIGITS / "digit7.npy", "--format", "json", "-o", out)
    assert r.exit_code == 0, r.output
    report = json.loads(r.output)
    (summary,) = report["outputs"]
    value = np.load(out)["probabilities"]
    assert summary["name"] == "probabilities" and summary["shape"] == [1, 10] and summary["dtype"] == "float32"
    assert summary["max"] == pytest.approx(float(value.max())) and summary["min"] == pytest.approx(float(value.min()))
    assert summary["nan"] == summary["inf"] == 0
    assert [t["class"] for t in summary["top"]] == list(np.argsort(-value[0])[:5])
    assert report["written_to"] == str(out)


def test_infer_json_with_profile_keeps_stdout_json():
    runner = CliRunner()
    r = runner.invoke(cli, ["infer", str(DIGITS / "model.xml"), "-i", str(DIGITS / "digit7.npy"),
                            "--format", "json", "--profile"])
    assert r.exit_code == 0
    json.loads(r.stdout)
    assert "profile:" in r.stderr


def test_tensor_summary_non_finite():
    from irrun.summary import format_summary, tensor_summary
    s = tensor_summary(np.array([1.0, np.nan, np.inf, -2.0, 5.0], np.float32))
    assert (s["min"], s["max"], s["nan"], s["inf"]) == (-2.0, 5.0, 1, 1)
    assert s["top"][0] == {"class": 2, "score": "inf"}
    json.dumps(s, allow_nan=False)
    assert "nan 1  inf 1" in format_summary("y", s)[0]
    assert tensor_summary(np.array([np.nan, np.nan], np.float32))["min"] is None
    assert tensor_summary(np.array([3, 1], np.int64))["max"] == 3
