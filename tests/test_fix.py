"""`irrun validate --fix`: one-defect mutants of real IRs (tests/models, a TensorIterator) are
repaired into an IR that validates clean and computes what the unbroken original computes (here:
the repaired files are the original's, byte for byte); mutants without a safe repair write nothing.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from lxml import etree
from ovutil import assert_close, mutated_copy, run_openvino, save, set_port_dims

import irrun
from irrun.cli import cli

MODELS = Path(__file__).resolve().parent / "models"


def fixture(name: str, tmp_path: Path) -> Path:
    folder = tmp_path / "original"
    folder.mkdir(exist_ok=True)
    for suffix in (".xml", ".bin"):
        shutil.copy(MODELS / f"{name}{suffix}", folder / f"model{suffix}")
    return folder / "model.xml"


def mutant(original: Path, edit) -> Path:
    """A copy of `original` (in a folder beside its own) with `edit(root)` applied to its XML."""
    folder = original.parent.parent / "mutant"
    folder.mkdir(exist_ok=True)
    return mutated_copy(original, folder, edit)


def layer_named(root, name):
    return next(l for l in root.iter("layer") if l.get("name") == name)


def nth_of_type(root, type_, n=0):
    return [l for l in root.iter("layer") if l.get("type") == type_][n]


def ports(layer, side):
    return layer.find(side).findall("port")


def add_layer(root, xml_text: str):
    root.find("layers").append(etree.fromstring(xml_text))


def add_edge(root, a, ap, b, bp):
    etree.SubElement(root.find("edges"), "edge", {"from-layer": str(a), "from-port": str(ap), "to-layer": str(b),
                                                  "to-port": str(bp)})


def relu_xml(lid, name, dims):
    d = "".join(f"<dim>{x}</dim>" for x in dims)
    return (f'<layer id="{lid}" name="{name}" type="ReLU" version="opset1"><input><port id="0" precision="FP32">{d}'
            f'</port></input><output><port id="1" precision="FP32">{d}</port></output></layer>')


# Each: (fixture, edit, the codes of the repairs, how many)
def _wrong_conv_dim(root):
    set_port_dims(ports(nth_of_type(root, "Convolution", 2), "output")[0], [1, 17, 16, 16])


def _wrong_rank(root):
    set_port_dims(ports(nth_of_type(root, "ReLU", 1), "output")[0], [1, 16, 16, 16, 1])


def _wrong_precision(root):
    ports(nth_of_type(root, "Add", 3), "output")[0].set("precision", "I64")


def _wrong_input_dims(root):
    set_port_dims(ports(nth_of_type(root, "Convolution", 4), "input")[0], [1, 16, 9, 9])


def _wrong_parameter_dims(root):
    set_port_dims(ports(nth_of_type(root, "Parameter"), "output")[0], [1, 3, 32, 32])


def _wrong_const_dims(root):
    set_port_dims(ports(nth_of_type(root, "Const", 3), "output")[0], [2, 2])


def _dead_chain(root):
    conv = nth_of_type(root, "Convolution", 1)
    dims = [d.text for d in ports(conv, "output")[0].findall("dim")]
    add_layer(root, relu_xml(900, "dead1", dims))
    add_layer(root, relu_xml(901, "dead2", dims))
    add_edge(root, conv.get("id"), ports(conv, "output")[0].get("id"), 900, 0)
    add_edge(root, 900, 1, 901, 0)


def _dangling_edges(root):
    conv = nth_of_type(root, "Convolution", 1)
    add_edge(root, conv.get("id"), ports(conv, "output")[0].get("id"), 999, 0)          # to a missing layer
    relu = nth_of_type(root, "ReLU", 0)
    add_edge(root, conv.get("id"), ports(conv, "output")[0].get("id"), relu.get("id"), 7)   # to a missing port


def _repeated_edge(root):
    edges = root.find("edges")
    edges.append(etree.fromstring(etree.tostring(edges.findall("edge")[5])))


def _lstm_wrong_sequence_output(root):
    lstm = nth_of_type(root, "LSTMSequence", 0)
    ports(lstm, "output")[1].set("precision", "FP16")
    set_port_dims(ports(lstm, "output")[0], [2, 2, 12])


def _everything_at_once(root):
    for edit in (_wrong_conv_dim, _wrong_precision, _dead_chain, _dangling_edges, _wrong_const_dims):
        edit(root)


REPAIRABLE = {
    "wrong-dim": ("resnet.f16", _wrong_conv_dim, ["E-DECLARED-SHAPE"]),
    "wrong-rank": ("resnet.f16", _wrong_rank, ["E-DECLARED-SHAPE"]),
    "wrong-precision": ("resnet.f16", _wrong_precision, ["E-DECLARED-TYPE"]),
    "wrong-input-dims": ("resnet.f32", _wrong_input_dims, ["E-DECLARED-SHAPE"]),
    "wrong-parameter-dims": ("resnet.f32", _wrong_parameter_dims, ["E-DECLARED-SHAPE"]),
    "wrong-const-dims": ("resnet.f16", _wrong_const_dims, ["E-DECLARED-SHAPE"]),
    "dead-layers": ("resnet.f32", _dead_chain, ["W-DEAD-LAYER", "W-DEAD-LAYER"]),
    "dangling-edges": ("resnet.f16", _dangling_edges, ["E-EDGE-LAYER", "E-EDGE-PORT"]),
    "repeated-edge": ("bert.f32", _repeated_edge, ["E-EDGE-DUP"]),
    "lstm-outputs": ("lstm_gru.f32", _lstm_wrong_sequence_output, ["E-DECLARED-SHAPE", "E-DECLARED-TYPE"]),
    "all-at-once": ("resnet.f16", _everything_at_once,
                    sorted(["E-DECLARED-SHAPE", "E-DECLARED-TYPE", "W-DEAD-LAYER", "W-DEAD-LAYER", "E-EDGE-LAYER",
                            "E-EDGE-PORT", "E-DECLARED-SHAPE"])),
}


@pytest.mark.parametrize("case", sorted(REPAIRABLE))
def test_one_defect_mutants_are_repaired(case, tmp_path):
    name, edit, codes = REPAIRABLE[case]
    original = fixture(name, tmp_path)
    broken = mutant(original, edit)
    report = irrun.validate(broken)
    assert report.diagnostics, "the mutant must be broken"
    fixed = tmp_path / "fixed.xml"
    result = irrun.repair(broken, fixed)
    assert result.ok and result.written == fixed
    assert sorted(c.code for c in result.changes) == codes
    after = irrun.validate(fixed)
    assert not list(after), [d.format() for d in after]
    # The repair restores exactly what OpenVINO wrote: the same files, so the same outputs.
    assert fixed.read_bytes() == original.read_bytes()
    assert fixed.with_suffix(".bin").read_bytes() == original.with_suffix(".bin").read_bytes()


def test_repaired_ir_runs_in_openvino_like_the_original(tmp_path):
    """Where the repair cannot give the original's files back (the original declared dims it never had):
    the repaired IR still computes, in OpenVINO, exactly what the original computes."""
    original = fixture("resnet.f32", tmp_path)
    broken = mutant(original, lambda root: (_wrong_conv_dim(root), _dead_chain(root)))
    fixed = irrun.repair(broken, tmp_path / "fixed.xml").written
    x = np.load(MODELS / "resnet.npz")["x"]
    for a, b in zip(run_openvino(fixed, [x]), run_openvino(original, [x])):
        assert_close(a, b, rtol=0, atol=0)
    for a, b in zip(irrun.load(fixed).infer([x]).values(), run_openvino(original, [x])):
        assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_repairs_inside_a_sub_graph_body(tmp_path):
    from test_ops_control_flow import rnn_ti
    original = save(rnn_ti(invariant=True), tmp_path / "original")

    def edit(root):
        body_add = next(l for l in root.iter("layer") if l.get("type") == "Add")
        set_port_dims(ports(body_add, "output")[0], [2, 5])
    broken = mutant(original, edit)
    assert [d.code for d in irrun.validate(broken).errors] == ["E-DECLARED-SHAPE"]
    result = irrun.repair(broken, tmp_path / "fixed.xml")
    assert [(c.code, c.layer.id.count("/")) for c in result.changes] == [("E-DECLARED-SHAPE", 1)]
    assert result.written.read_bytes() == original.read_bytes()


def test_an_ir_v10_model_stays_ir_v10(tmp_path):
    """The repaired model is the same model: an IR v10 file is repaired into an IR v10 file, which
    OpenVINO reads (f16 input fed as f32, names, output types) as it reads the unbroken original."""
    from irxml import layer, net, port, write, edge
    good = net([
        layer(0, "x", "Parameter", data={"shape": "1,3", "element_type": "f16"}, outputs=[port(0, (1, 3), "FP16", "x")]),
        layer(1, "relu", "ReLU", inputs=[port(0, (1, 3), "FP16")], outputs=[port(1, (1, 3), "FP16", names="y")]),
        layer(2, "out", "Result", inputs=[port(0, (1, 3), "FP16")]),
    ], [edge(0, 0, 1, 0), edge(1, 1, 2, 0)], version=10)
    original = write(tmp_path, good, name="good")
    broken = write(tmp_path, good.replace('<port id="1" precision="FP16" names="y"><dim>1</dim><dim>3</dim>',
                                          '<port id="1" precision="FP16" names="y"><dim>1</dim><dim>4</dim>'),
                   name="broken")
    result = irrun.repair(broken, tmp_path / "fixed.xml")
    assert [c.code for c in result.changes] == ["E-DECLARED-SHAPE"]
    assert 'version="10"' in result.written.read_text() and not list(irrun.validate(result.written))
    x = np.array([[1.5, -2, 3]], np.float32)
    for a, b in zip(run_openvino(result.written, [x]), run_openvino(original, [x])):
        assert_close(a, b, rtol=0, atol=0)


# ---------------------------------------------------------------- no safe repair

def _missing_layer(root):
    root.find("layers").remove(nth_of_type(root, "ReLU", 2))


def _weights_out_of_range(root):
    nth_of_type(root, "Const", 4).find("data").set("offset", "99999999")


def _cycle(root):
    first_relu, later_add = nth_of_type(root, "ReLU", 0), nth_of_type(root, "Add", 4)
    edge = next(e for e in root.iter("edge") if e.get("to-layer") == first_relu.get("id"))
    edge.set("from-layer", later_add.get("id"))
    edge.set("from-port", ports(later_add, "output")[0].get("id"))


def _duplicate_id(root):
    nth_of_type(root, "ReLU", 1).set("id", nth_of_type(root, "ReLU", 0).get("id"))


def _unknown_op(root):
    nth_of_type(root, "ReLU", 1).set("type", "Frobnicate")


def _conflicting_edge(root):
    conv, add = nth_of_type(root, "Convolution", 0), nth_of_type(root, "Add", 2)
    add_edge(root, conv.get("id"), ports(conv, "output")[0].get("id"), add.get("id"), ports(add, "input")[0].get("id"))


UNREPAIRABLE = {"missing-layer": (_missing_layer, "E-INPUT-UNCONNECTED"),
                "weights-out-of-range": (_weights_out_of_range, "E-BIN-RANGE"),
                "cycle": (_cycle, "E-CYCLE"), "duplicate-id": (_duplicate_id, "E-LAYER-DUP"),
                "unknown-op": (_unknown_op, "E-OP-UNKNOWN"), "conflicting-edge": (_conflicting_edge, "E-EDGE-DUP")}


@pytest.mark.parametrize("case", sorted(UNREPAIRABLE))
def test_mutants_without_a_safe_repair_write_nothing(case, tmp_path):
    edit, code = UNREPAIRABLE[case]
    broken = mutant(fixture("resnet.f16", tmp_path), lambda root: (edit(root), _wrong_conv_dim(root)))
    fixed = tmp_path / "fixed.xml"
    result = irrun.repair(broken, fixed)
    assert not result.ok and result.written is None and not result.changes
    assert code in [d.code for d in result.unrepairable]
    assert not fixed.exists() and not fixed.with_suffix(".bin").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mutant", "original"]


# ---------------------------------------------------------------- the command line

def test_cli_reports_each_repair_and_exits_0(tmp_path):
    broken = mutant(fixture("resnet.f16", tmp_path), _everything_at_once)
    fixed = tmp_path / "fixed.xml"
    run = CliRunner().invoke(cli, ["validate", str(broken), "--fix", "-o", str(fixed)])
    assert run.exit_code == 0, run.output
    lines = run.output.splitlines()
    assert len([l for l in lines if " fixed " in l]) == 7
    assert any("fixed W-DEAD-LAYER" in l and '"dead2"' in l and "dropped" in l for l in lines)
    assert any("fixed E-DECLARED-SHAPE" in l and "declared [1,17,16,16] -> [1,16,16,16]" in l for l in lines)
    assert any("fixed E-EDGE-LAYER" in l and "layer 999 does not exist" in l for l in lines)
    assert lines[-1] == f"{broken}: 7 repairs; wrote {fixed}"
    run = CliRunner().invoke(cli, ["validate", str(fixed)])
    assert run.exit_code == 0 and run.output.strip().endswith("0 errors, 0 warnings")


def test_cli_refuses_and_writes_nothing(tmp_path):
    broken = mutant(fixture("resnet.f16", tmp_path), _missing_layer)
    fixed = tmp_path / "fixed.xml"
    run = CliRunner().invoke(cli, ["validate", str(broken), "--fix", "-o", str(fixed)])
    assert run.exit_code == 1
    assert "E-INPUT-UNCONNECTED" in run.output and "(no safe repair)" in run.output
    assert run.output.splitlines()[-1].endswith("without a safe repair; nothing written")
    assert not fixed.exists()


def test_cli_fix_needs_an_output_and_keeps_the_models_files(tmp_path):
    broken = mutant(fixture("resnet.f16", tmp_path), _wrong_conv_dim)
    run = CliRunner().invoke(cli, ["validate", str(broken), "--fix"])
    assert run.exit_code == 2 and "--fix and -o FIXED.xml go together" in run.output
    before = broken.read_bytes()
    run = CliRunner().invoke(cli, ["validate", str(broken), "--fix", "-o", str(broken)])
    assert run.exit_code == 2 and "refusing to overwrite it" in run.output and broken.read_bytes() == before
    run = CliRunner().invoke(cli, ["validate", str(broken), "--fix", "-o", str(broken), "--force"])
    assert run.exit_code == 0 and irrun.validate(broken).ok


def test_cli_fix_json(tmp_path):
    import json
    broken = mutant(fixture("resnet.f16", tmp_path), _wrong_precision)
    run = CliRunner().invoke(cli, ["validate", str(broken), "--fix", "-o", str(tmp_path / "f.xml"), "--format", "json"])
    out = json.loads(run.output)
    assert run.exit_code == 0 and [c["code"] for c in out["fixed"]] == ["E-DECLARED-TYPE"]
    assert out["unrepairable"] == [] and out["written"] == str(tmp_path / "f.xml")
