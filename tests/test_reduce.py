"""`irrun reduce` and `irrun.reduce`: the smallest IR that still shows a divergence, checked against OpenVINO.

Each case checks the files reduce writes against OpenVINO (CPU at f32, tests/ovutil.compile_cpu):
the reduced IR runs in OpenVINO; on MIN.inputs.npz it still diverges from MIN.expected.npz where
the divergence lives in the cut, and the expected values are what OpenVINO computes for that
layer in the reference model.  Planted divergences: one convolution's weights changed in a copy
of a fixture IR (against the unmodified IR, and against its dump), an integer Divide where the
CPU plugin truncates and irrun floors as OpenVINO's reference does (against OpenVINO), and
drift: every MatMul of an MLP perturbed by 4e-4, at a tolerance only the sum of three exceeds.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset13 as ops
import pytest
from ovutil import _CORE, assert_close, evaluate_reference, openvino_layer_outputs, run_openvino, save
from test_compare import _integer_divide, copy_ir, run_cli, scale_weights

import irrun
from irrun.ir import parse_document

MODELS = Path(__file__).resolve().parent / "models"
RESNET, RESNET_IN = MODELS / "resnet.f32.xml", MODELS / "resnet.npz"


def reduce_json(*args):
    r = run_cli("reduce", *args, "--format", "json")
    assert r.exit_code in (0, 1), r.output
    return r.exit_code, json.loads(r.stdout)


def files_of(xml: Path) -> tuple[Path, Path]:
    return xml.with_suffix(".inputs.npz"), xml.with_suffix(".expected.npz")


def computing_layers(xml: Path) -> list[str]:
    """The layers of an IR other than Parameters, Constants and Results, by type."""
    return [l.type for l in parse_document(xml).graph.layers.values()
            if l.type not in ("Parameter", "Const", "Result")]


def openvino_on(xml: Path, arrays: dict[str, np.ndarray]) -> list[np.ndarray]:
    """OpenVINO's outputs of `xml` fed by name, in the order of the model's inputs."""
    names = [p.get_friendly_name() for p in _CORE.read_model(str(xml)).get_parameters()]
    return run_openvino(xml, [arrays[n] for n in names])


def diverges(actual: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> bool:
    return not np.allclose(actual, expected, rtol=rtol, atol=atol)


# ---------------------------------------------------------------- one bad layer

def test_a_planted_bad_convolution_is_cut_out(tmp_path):
    """One convolution's weights x1.01 in a copy of resnet, against the unmodified IR: the reduced IR is
    that convolution fed by its input; OpenVINO runs it and still diverges from the expected values,
    while the unmodified layer, cut the same way, gives them."""
    bad = copy_ir(RESNET, tmp_path / "bad")
    scale_weights(bad, "Multiply_3891", 1.01)
    out = tmp_path / "min.xml"
    code, report = reduce_json(bad, "-i", RESNET_IN, "--reference", RESNET, "-o", out)
    assert code == 1 and report["status"] == "reduced" and not report["grown"]
    assert [x["name"] for x in report["layers"]] == ["Multiply_3891"]
    assert report["divergence"]["type"] == "Convolution" and report["before"][0]["mismatch_fraction"] > 0.5
    assert computing_layers(out) == ["Convolution"]
    inputs_file, expected_file = files_of(out)
    assert report["files"] == [str(out), str(out.with_suffix(".bin")), str(inputs_file), str(expected_file)]
    feeds, expected = dict(np.load(inputs_file)), dict(np.load(expected_file))
    relu = "__module.layers.0/aten::relu/Relu"
    assert list(feeds) == [relu] == [i.name for i in irrun.load(out).inputs] and list(expected) == ["Multiply_3891:0"]
    # what was saved is what OpenVINO computes in the full models: the bad one's input, the good one's output
    x = dict(np.load(RESNET_IN))
    assert_close(feeds[relu], openvino_layer_outputs(bad, x)[f"{relu}:0"])
    assert_close(expected["Multiply_3891:0"], openvino_layer_outputs(RESNET, x)["Multiply_3891:0"])
    (got,) = openvino_on(out, feeds)
    assert diverges(got, expected["Multiply_3891:0"], 1e-4, 1e-5)           # OpenVINO reproduces it
    good = irrun.extract(RESNET, tmp_path / "good.xml", outputs=["Multiply_3891"], inputs=[relu])
    assert_close(openvino_on(good, feeds)[0], expected["Multiply_3891:0"])   # the unmodified layer does not
    # the line it prints reproduces it
    r = run_cli("compare", out, "-i", inputs_file, "--reference", expected_file, "--format", "json")
    assert r.exit_code == 1 and json.loads(r.output)["first_divergence"]["layer"] == "Multiply_3891"
    assert report["reproduce"] == f"irrun compare {out} -i {inputs_file} --reference {expected_file}"


def test_the_same_layer_against_a_dump_of_the_unmodified_model(tmp_path):
    bad = copy_ir(RESNET, tmp_path / "bad")
    scale_weights(bad, "Multiply_3877", 0.9)
    assert run_cli("infer", RESNET, "-i", RESNET_IN, "--dump", tmp_path / "ref.npz").exit_code == 0
    out = tmp_path / "min.xml"
    r = run_cli("reduce", bad, "-i", RESNET_IN, "-r", tmp_path / "ref.npz", "-o", out)
    assert r.exit_code == 1, r.output
    lines = r.stdout.splitlines()
    assert lines[0].startswith('reduce resnet.f32.xml against ') and 'layer 8 "Multiply_3877" (Convolution-1) ' \
        'diverges' in lines[0]
    assert lines[1].startswith("  full model: Multiply_3877:0: max abs ")
    assert 'reproduced by 1 layer: 8 "Multiply_3877" (Convolution-1)' in lines
    assert any(l.startswith("  reduced: Multiply_3877:0:") and
               l.endswith("(irrun on the reference's own input values against the reference)") for l in lines)
    assert lines[-1] == f"reproduce: irrun compare {out} -i {out.with_suffix('.inputs.npz')} " \
                        f"--reference {out.with_suffix('.expected.npz')}"
    feeds, expected = dict(np.load(out.with_suffix(".inputs.npz"))), dict(np.load(out.with_suffix(".expected.npz")))
    assert diverges(openvino_on(out, feeds)[0], expected["Multiply_3877:0"], 1e-4, 1e-5)
    assert "comparing the full model with the reference ..." in r.stderr


def _integer_divide_inside():
    """Integer arithmetic around a Divide, so that the cut leaves layers out on both sides."""
    x = ops.parameter([8], ov.Type.i32, name="x")
    shifted = ops.add(x, ops.constant(np.int32(-3)))
    shifted.set_friendly_name("shifted")
    div = ops.divide(shifted, ops.constant(np.array([3, 3, 3, 3, -3, -3, 2, 7], np.int32)))
    div.set_friendly_name("div")
    y = ops.multiply(div, ops.constant(np.int32(2)))
    y.set_friendly_name("twice")
    return ov.Model([ops.result(ops.convert(y, "f32"))], [x])


@pytest.mark.parametrize("build", [_integer_divide, _integer_divide_inside])
def test_integer_divide_against_openvino(build, tmp_path):
    """The CPU plugin truncates an integer Divide; irrun floors as OpenVINO's reference evaluation does.
    The reduced IR is the Divide alone; OpenVINO runs it and gives exactly MIN.expected.npz (its
    truncated quotients), while irrun gives the floored ones."""
    xml = save(build(), tmp_path)
    x = np.array([-4, -3, -2, 8, -4, 10, 0, 2], np.int32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "min.xml"
    code, report = reduce_json(xml, "-i", tmp_path / "x.npy", "-r", "openvino", "-o", out)
    assert code == 1 and report["status"] == "reduced"
    assert [x["name"] for x in report["layers"]] == ["div"] and computing_layers(out) == ["Divide"]
    assert report["check"] == "openvino on the reduced IR against irrun"
    assert report["reference_output"] == [{"key": "div:0", "max_abs": 0.0, "mismatch_fraction": 0.0, "reason": None}]
    feeds, expected = dict(np.load(files_of(out)[0])), dict(np.load(files_of(out)[1]))
    (got,) = openvino_on(out, feeds)
    np.testing.assert_array_equal(got, expected["div:0"])                 # OpenVINO: as in the full model
    assert got.dtype == expected["div:0"].dtype == np.int32
    floor = evaluate_reference(_CORE.read_model(str(out)), [feeds[next(iter(feeds))]])[0]
    mine = irrun.load(out).infer(feeds)[0]
    np.testing.assert_array_equal(mine, floor)                            # irrun: the reference's floor
    assert (mine != got).sum() >= 3 and report["after"][0]["mismatch_fraction"] == pytest.approx((mine != got).mean())


def test_the_readme_session_4_bit_convolution(tmp_path):
    """The README's example: the int8 twin's 4-bit convolution cut out with its i4 weights and their
    decompression; OpenVINO runs the cut to what it computes for that layer in the whole twin, which
    diverges from the fp32 model's value (the expected file)."""
    import subprocess
    import sys
    twin = tmp_path / "resnet.int8.xml"
    subprocess.run([sys.executable, str(Path(__file__).parents[1] / "examples" / "int8_twin.py"), RESNET, twin,
                    "--int4", "Multiply_3898"], capture_output=True, text=True, check=True)
    out = tmp_path / "conv4bit.xml"
    r = run_cli("reduce", twin, "-i", RESNET_IN, "--reference", RESNET, "--rtol", "0.05", "-o", out)
    assert r.exit_code == 1, r.output
    assert 'reproduced by 1 layer: 39 "Multiply_3898" (Convolution-1)' in r.stdout.splitlines()
    assert r.stdout.splitlines()[-1] == f"reproduce: irrun compare {out} -i {files_of(out)[0]} --reference " \
                                        f"{files_of(out)[1]} --rtol 0.05"
    graph = parse_document(out).graph
    assert sorted(l.type for l in graph.layers.values()) == \
        ["Const", "Const", "Convert", "Convolution", "Multiply", "Parameter", "Result"]
    assert any(l.data.get("element_type") == "i4" for l in graph.layers.values())
    assert out.with_suffix(".bin").stat().st_size == 4736
    feeds, expected = dict(np.load(files_of(out)[0])), dict(np.load(files_of(out)[1]))
    (got,) = openvino_on(out, feeds)
    assert_close(got, openvino_layer_outputs(twin, dict(np.load(RESNET_IN)))["Multiply_3898:0"])
    assert diverges(got, expected["Multiply_3898:0"], 0.05, 0.05)


# ---------------------------------------------------------------- drift: the cut grows

def _mlp(tmp_path: Path, width: int = 64, depth: int = 4) -> Path:
    rng = np.random.default_rng(7)
    x = ops.parameter([4, width], ov.Type.f32, name="x")
    y = x
    for i in range(depth):
        w = (rng.standard_normal([width, width]) / np.sqrt(width)).astype(np.float32)
        y = ops.matmul(y, ops.constant(w), False, False)
        y.set_friendly_name(f"fc{i}")
        y = ops.relu(y)
        y.set_friendly_name(f"act{i}")
    return save(ov.Model([ops.result(y)], [x]), tmp_path / "mlp")


def _perturbed_mlp(tmp_path: Path) -> tuple[Path, Path, Path]:
    """An MLP, and a copy with every MatMul's weights x(1 + 4e-4): each layer adds 4e-4 of relative
    difference, so at rtol 1e-3 the first layer to diverge is the third MatMul, and only the three
    together reproduce it."""
    ref = _mlp(tmp_path)
    bad = copy_ir(ref, tmp_path / "bad")
    for i in range(4):
        scale_weights(bad, f"fc{i}", 1 + 4e-4)
    np.save(tmp_path / "x.npy", np.random.default_rng(8).standard_normal([4, 64]).astype(np.float32))
    return ref, bad, tmp_path / "x.npy"


TUNED = ("--rtol", "1e-3", "--atol", "1e-5")


def test_drift_grows_the_cut_until_it_reproduces(tmp_path):
    ref, bad, x = _perturbed_mlp(tmp_path)
    out = tmp_path / "min.xml"
    code, report = reduce_json(bad, "-i", x, "-r", ref, "-o", out, *TUNED)
    assert code == 1 and report["status"] == "reduced" and report["grown"]
    assert report["divergence"]["name"] == "fc2"
    assert [(a["layers"], a["reproduced"]) for a in report["attempts"]] == \
        [(1, False), (2, False), (3, False), (4, False), (5, True)]
    assert [x["name"] for x in report["layers"]] == ["fc0", "act0", "fc1", "act1", "fc2"]
    assert computing_layers(out) == ["MatMul", "ReLU", "MatMul", "ReLU", "MatMul"]
    feeds, expected = dict(np.load(files_of(out)[0])), dict(np.load(files_of(out)[1]))
    assert list(feeds) == ["x"] and list(expected) == ["fc2:0"]
    # Against OpenVINO: the three perturbed MatMuls (the reduced IR) diverge from the expected values ...
    (got,) = openvino_on(out, feeds)
    assert diverges(got, expected["fc2:0"], 1e-3, 1e-5)
    # ... which are OpenVINO's fc2 of the unperturbed MLP, and the perturbed fc2 alone, fed the reference's
    # own act1, stays within the tolerance: the single layer does not reproduce the divergence.
    theirs = openvino_layer_outputs(ref, {"x": np.load(x)})
    assert_close(expected["fc2:0"], theirs["fc2:0"])
    alone = irrun.extract(bad, tmp_path / "alone.xml", outputs=["fc2"], inputs=["act1"])
    assert not diverges(openvino_on(alone, {"act1": theirs["act1:0"]})[0], expected["fc2:0"], 1e-3, 1e-5)
    r = run_cli("reduce", bad, "-i", x, "-r", ref, "-o", tmp_path / "again.xml", *TUNED)
    assert "  the layer alone does not reproduce it: numerical drift; the cut grows backwards" in r.stdout
    assert "    5 layers: fc2:0 max abs " in r.stdout and r.stdout.count("within tolerance") == 4
    ids = {l.name: l.id for l in parse_document(bad).graph.layers.values()}
    assert "reproduced by 5 layers: " + ", ".join(f'{ids[n]} "{n}" ({t})' for n, t in [
        ("fc0", "MatMul-1"), ("act0", "Relu-1"), ("fc1", "MatMul-1"), ("act1", "Relu-1"), ("fc2", "MatMul-1")]) \
        in r.stdout.splitlines()
    r = run_cli("compare", out, "-i", files_of(out)[0], "-r", files_of(out)[1], *TUNED)
    assert r.exit_code == 1


def test_drift_beyond_the_limit_writes_nothing(tmp_path):
    ref, bad, x = _perturbed_mlp(tmp_path)
    assert run_cli("infer", ref, "-i", x, "--dump", tmp_path / "dump").exit_code == 0
    out = tmp_path / "min.xml"
    r = run_cli("reduce", bad, "-i", x, "-r", tmp_path / "dump", "-o", out, *TUNED, "--max-layers", "4")
    assert r.exit_code == 1, r.output
    assert 'not reducible: no cut of up to 4 layers ending at layer ' in r.stdout
    assert '"fc2" reproduces the divergence (limit 4); nothing written' in r.stdout
    assert not list(tmp_path.glob("min*"))
    report = irrun.reduce(bad, {"x": np.load(x)}, tmp_path / "dump", out, rtol=1e-3, atol=1e-5, max_layers=4)
    assert report.status == "not reducible" and not report.files and len(report.attempts) == 4
    assert all(not a.reproduced and a.check[0].agrees for a in report.attempts)
    assert not list(tmp_path.glob("min*"))


def test_drift_in_bert_against_openvino(tmp_path):
    """A real case: at rtol 1e-6 per element the first layer where irrun and OpenVINO part is a MatMul of BERT.
    With OpenBLAS's AVX-512 kernels OpenVINO computes that MatMul alone from irrun's input exactly
    as irrun does: the difference comes from the layer norm (MVN) before it, and the cut takes
    both.  With its AVX2 kernels (forced on an AMD EPYC) the MatMul alone parts from OpenVINO, and
    the cut is that layer."""
    out = tmp_path / "min.xml"
    code, report = reduce_json(MODELS / "bert.f32.xml", "-i", MODELS / "bert.npz", "-r", "openvino", "-o", out,
                               "--relative-to", "element", "--rtol", "1e-6", "--atol", "1e-7")
    assert code == 1 and report["status"] == "reduced"
    assert report["reproduce"].endswith(" --rtol 1e-06 --atol 1e-07 --relative-to element")
    first = report["attempts"][0]
    assert report["grown"] == (not first["reproduced"])
    if report["grown"]:
        assert first["check"][0]["agrees"] and len(report["layers"]) > 1
    else:
        assert [x["name"] for x in report["layers"]] == [report["divergence"]["name"]]
    assert report["layers"][-1]["name"] == report["divergence"]["name"]
    feeds = dict(np.load(files_of(out)[0]))
    (got,) = openvino_on(out, feeds)
    mine = irrun.load(out).infer(feeds)[0]
    assert diverges(mine, got, 1e-6, 1e-7)                    # OpenVINO and irrun still part on the cut
    assert_close(mine, got)                                   # (by far less than the suite's bounds)


# ---------------------------------------------------------------- folded shapes, --layer

def test_a_folded_shape_input_becomes_a_constant(tmp_path):
    """--layer: llama's rotary Multiply reads a cos table folded at load from the input's shape (ShapeOf ->
    Range ...): the cut holds it as a Constant, so it keeps static shapes and none of the layers above."""
    full = MODELS / "llama.f32.xml"
    layer = "__module.blocks.0/aten::mul/Multiply"
    out = tmp_path / "rope.xml"
    code, report = reduce_json(full, "-i", MODELS / "llama.npz", "-r", MODELS / "llama.f16.xml", "-o", out,
                               "--layer", layer)
    assert code == 1 and [x["name"] for x in report["layers"]] == [layer]
    graph = parse_document(out).graph
    assert sorted(l.type for l in graph.layers.values()) == ["Const", "Multiply", "Parameter", "Result"]
    assert irrun.validate(out).ok
    feeds = dict(np.load(files_of(out)[0]))
    x = dict(np.load(MODELS / "llama.npz"))
    assert_close(openvino_on(out, feeds)[0], openvino_layer_outputs(full, x)[f"{layer}:0"])


def test_python_api(tmp_path):
    x = np.array([-4, -3, -2, 8, -4, 10, 0, 2], np.int32)
    xml = save(_integer_divide(), tmp_path)
    report = irrun.reduce(xml, x, "openvino", tmp_path / "min.xml")
    assert isinstance(report, irrun.ReduceReport) and report.reduced
    assert [a["name"] for a in report.chosen.layers] == ["div"] and report.inputs == ["x"]
    assert report.outputs == ["div:0"] and report.to_json()["status"] == "reduced"
    assert report.format_text().splitlines()[-1].startswith("reproduce: irrun compare ")
    model = irrun.load(xml)
    assert irrun.reduce(model, x, "openvino", tmp_path / "min.xml", force=True).reduced


def test_a_failed_write_leaves_no_file(tmp_path, monkeypatch):
    """The disk fills up while the expected values are written: neither of the four files is left,
    nor the staging directory, and the error is one line."""
    import irrun.reduction
    xml = save(_integer_divide(), tmp_path / "model")
    np.save(tmp_path / "x.npy", np.array([-4, -3, -2, 8, -4, 10, 0, 2], np.int32))
    calls = []

    def full_disk(path, arrays):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        irrun.arrays.save_npz(path, arrays)
    monkeypatch.setattr(irrun.reduction, "save_npz", full_disk)
    out = tmp_path / "out"
    out.mkdir()
    r = run_cli("reduce", xml, "-i", tmp_path / "x.npy", "-r", "openvino", "-o", out / "min.xml")
    _one_error_line(r, f"cannot write {out / 'min.xml'}: No space left on device")
    assert len(calls) == 2 and list(out.iterdir()) == []


# ---------------------------------------------------------------- nothing to reduce, bad input

def test_nothing_diverges(tmp_path):
    out = tmp_path / "min.xml"
    r = run_cli("reduce", RESNET, "-i", RESNET_IN, "-r", "openvino", "-o", out)
    assert r.exit_code == 0, r.output
    assert r.stdout == "reduce resnet.f32.xml against openvino (CPU, f32): every compared tensor agrees; " \
                       "nothing to reduce, nothing written\n"
    assert list(tmp_path.iterdir()) == []
    code, report = reduce_json(RESNET, "-i", RESNET_IN, "-r", RESNET, "-o", out)
    assert code == 0 and report["status"] == "agrees" and report["files"] == [] and list(tmp_path.iterdir()) == []


def _one_error_line(r, message):
    assert r.exit_code == 2, r.output
    assert r.stdout == "" and r.stderr.count("error: ") == 1 and r.stderr.rstrip().splitlines()[-1].startswith(
        "error: "), r.stderr
    assert message in r.stderr, r.stderr


@pytest.fixture
def bad_resnet(tmp_path):
    bad = copy_ir(RESNET, tmp_path / "bad")
    scale_weights(bad, "Multiply_3891", 1.01)
    return bad


def test_refuses_to_overwrite_what_it_reads(bad_resnet, tmp_path):
    before = bad_resnet.read_bytes()
    _one_error_line(run_cli("reduce", bad_resnet, "-i", RESNET_IN, "-r", RESNET, "-o", bad_resnet),
                    "is the model's own input file; refusing to overwrite it")
    assert bad_resnet.read_bytes() == before
    ref = copy_ir(RESNET, tmp_path / "ref")
    _one_error_line(run_cli("reduce", bad_resnet, "-i", RESNET_IN, "-r", ref, "-o", ref),
                    "is an input of this command; refusing to overwrite it")
    # MIN.inputs.npz / MIN.expected.npz are targets too: a reference or an input file of that name is kept
    shutil.copy(RESNET_IN, tmp_path / "min.inputs.npz")
    _one_error_line(run_cli("reduce", bad_resnet, "-i", tmp_path / "min.inputs.npz", "-r", RESNET,
                            "-o", tmp_path / "min.xml"), "min.inputs.npz is an input of this command")
    assert run_cli("reduce", bad_resnet, "-i", tmp_path / "min.inputs.npz", "-r", RESNET, "-o", tmp_path / "min.xml",
                   "--force").exit_code == 1


@pytest.mark.parametrize("args, message", [
    (["--layer", "nosuch"], '--layer "nosuch": no layer or tensor of that name'),
    (["--layer", "Multiply_387"], "did you mean 'Multiply_3877'"),
    (["--layer", "Multiply_3870"], '--layer "Multiply_3870": its output agrees with the reference; the first '
                                   'divergence is layer 19 "Multiply_3891"'),
    (["-o", "{tmp}/min.onnx"], "an IR file name must end in .xml"),
    (["-o", "{tmp}/nodir/min.xml"], "no such directory"),
    (["-r", "{tmp}/nope.npz"], "nope.npz: no such file"),
    (["-i", "nosuch=" + str(RESNET_IN)], "unknown input 'nosuch'"),
    (["--rtol", "-1"], "--rtol must be a number >= 0"),
])
def test_bad_input_is_one_line(args, message, bad_resnet, tmp_path):
    base = {"-i": str(RESNET_IN), "-r": str(RESNET), "-o": str(tmp_path / "min.xml")}
    extra = []
    it = iter(args)
    for flag, value in zip(it, it):
        value = value.replace("{tmp}", str(tmp_path))
        if flag in base:
            base[flag] = value
        else:
            extra += [flag, value]
    r = run_cli("reduce", bad_resnet, *[a for kv in base.items() for a in kv], *extra)
    _one_error_line(r, message)
    assert not list(tmp_path.glob("min*"))


def test_a_reference_from_other_inputs(bad_resnet, tmp_path):
    assert run_cli("infer", RESNET, "-i", RESNET_IN, "--dump", tmp_path / "ref.npz").exit_code == 0
    np.save(tmp_path / "other.npy", np.load(RESNET_IN)["x"] + 1)
    r = run_cli("reduce", bad_resnet, "-i", tmp_path / "other.npy", "-r", tmp_path / "ref.npz", "-o",
                tmp_path / "min.xml")
    _one_error_line(r, "the reference's value of input \"x\" differs from the one given (max abs 1,")
    assert "was the reference computed from other inputs?" in r.stderr


def test_no_input(bad_resnet, tmp_path):
    _one_error_line(run_cli("reduce", bad_resnet, "-r", RESNET, "-o", tmp_path / "min.xml"),
                    "no --input given; the model takes: x [1,3,64,64] f32")
