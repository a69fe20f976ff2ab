"""`irrun compare` and `irrun.compare`: the first diverging layer against OpenVINO, saved tensors and
another IR; exit codes; bad references as one error line."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset13 as ops
import pytest
from click.testing import CliRunner
from lxml import etree

import irrun
from irrun.cli import cli
from irrun.compare import measure
from irrun.tolerance import Tolerance, tolerance_for
from ovutil import _CORE, evaluate_reference, save

MODELS = Path(__file__).resolve().parent / "models"
RESNET, RESNET_IN = MODELS / "resnet.f32.xml", MODELS / "resnet.npz"


def run_cli(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def compare_json(*args):
    r = run_cli("compare", *args, "--format", "json")
    assert r.exit_code in (0, 1), r.output
    return r.exit_code, json.loads(r.output)


def copy_ir(xml: Path, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(xml, folder / xml.name)
    shutil.copy(xml.with_suffix(".bin"), folder / xml.with_suffix(".bin").name)
    return folder / xml.name


def scale_weights(xml: Path, layer_name: str, factor: float) -> None:
    """Multiply the f32 weights (input 1) of layer `layer_name` by `factor`, in the .bin."""
    root = etree.parse(str(xml)).getroot()
    layer = next(l for l in root.iter("layer") if l.get("name") == layer_name)
    edge = next(e for e in root.iter("edge") if e.get("to-layer") == layer.get("id") and e.get("to-port") == "1")
    const = next(l for l in root.iter("layer") if l.get("id") == edge.get("from-layer"))
    data = const.find("data")
    offset, size = int(data.get("offset")), int(data.get("size"))
    raw = bytearray(xml.with_suffix(".bin").read_bytes())
    values = np.frombuffer(bytes(raw[offset:offset + size]), np.float32) * np.float32(factor)
    raw[offset:offset + size] = values.tobytes()
    xml.with_suffix(".bin").write_bytes(bytes(raw))


def line_of(xml: Path, layer_name: str) -> int:
    return next(l for l in etree.parse(str(xml)).getroot().iter("layer") if l.get("name") == layer_name).sourceline


# ---------------------------------------------------------------- the culprit, found

def test_a_planted_bad_layer_is_found_by_name(tmp_path):
    """One convolution's weights changed in a copy of the IR: against the original, the first
    divergence is that layer (its input agrees), not the layers after it."""
    bad = copy_ir(RESNET, tmp_path / "bad")
    scale_weights(bad, "Multiply_3891", 1.01)
    code, report = compare_json(bad, "-i", RESNET_IN, "--reference", RESNET)
    assert code == 1
    first = report["first_divergence"]
    assert (first["layer"], first["type"], first["id"]) == ("Multiply_3891", "Convolution", "19")
    assert first["line"] == line_of(bad, "Multiply_3891") and first["version"] == 1
    assert first["attributes"]["strides"] == "2, 2"
    assert first["mismatch_fraction"] > 0.5 and 0.99 < first["cosine"] < 1
    assert {"key": "__module.layers.0/aten::relu/Relu:0", "status": "agrees"} in first["inputs"]
    layers = report["layers"]
    index = [d["key"] for d in layers].index("Multiply_3891:0")
    assert all(d["agrees"] for d in layers[:index]) and not layers[index]["agrees"]
    assert not report["unmatched"]        # the same IR: every layer matched
    # the same culprit against the original's dump (directory and archive)
    for target in ("ref", "ref.npz"):
        assert run_cli("infer", RESNET, "-i", RESNET_IN, "--dump", tmp_path / target).exit_code == 0
        code, report = compare_json(bad, "-i", RESNET_IN, "--reference", tmp_path / target)
        assert code == 1 and report["first_divergence"]["layer"] == "Multiply_3891"
    # OpenVINO running the altered copy agrees with irrun running it
    code, report = compare_json(bad, "-i", RESNET_IN, "--reference", "openvino")
    assert code == 0 and report["first_divergence"] is None


def test_text_report_names_the_layer_and_line(tmp_path):
    bad = copy_ir(RESNET, tmp_path / "bad")
    scale_weights(bad, "Multiply_3891", 1.01)
    r = run_cli("compare", bad, "-i", RESNET_IN, "-r", RESNET)
    assert r.exit_code == 1
    lines = r.output.splitlines()
    assert lines[0].startswith("compare resnet.f32.xml against resnet.f32.xml (irrun): 35 tensors compared,")
    assert lines[1] == f'first divergence: layer 19 "Multiply_3891" (Convolution-1), resnet.f32.xml line ' \
                       f'{line_of(bad, "Multiply_3891")}'
    assert lines[2].startswith("  output Multiply_3891:0: max abs ") and "outside atol 1e-05 + rtol 0.0001 x " in lines[2]
    assert 'strides="2, 2"' in lines[3]
    assert any(line.startswith("Multiply_3891:0") and line.endswith("<- first divergence") for line in lines)


def _integer_divide():
    x = ops.parameter([8], ov.Type.i32, name="x")
    div = ops.divide(x, ops.constant(np.array([3, 3, 3, 3, -3, -3, 2, 7], np.int32)))
    div.set_friendly_name("div")
    y = ops.multiply(div, ops.constant(np.int32(2)))
    y.set_friendly_name("twice")
    return ov.Model([ops.result(y)], [x])


def test_integer_divide_where_the_cpu_plugin_truncates(tmp_path):
    """OpenVINO's CPU plugin truncates an integer Divide (pythondiv=true); its reference evaluation
    floors, and irrun follows the reference.  compare names the Divide, not the Multiply after it."""
    model = _integer_divide()
    xml = save(model, tmp_path)
    x = np.array([-7, -6, -5, 5, -7, 7, -3, -1], np.int32)
    np.save(tmp_path / "x.npy", x)
    floor = evaluate_reference(_CORE.read_model(str(xml)), [x])[0]
    m = irrun.load(xml)
    np.testing.assert_array_equal(m.infer(x)[m.outputs[0].name], floor)
    code, report = compare_json(xml, "-i", tmp_path / "x.npy", "-r", "openvino")
    assert code == 1
    first = report["first_divergence"]
    assert (first["layer"], first["type"], first["reason"]) == ("div", "Divide", "values")
    assert first["mismatch_fraction"] == pytest.approx(5 / 8)      # the negative quotients that are not whole
    twice = next(d for d in report["layers"] if d["key"] == "twice:0")
    assert not twice["agrees"] and twice["rtol"] is None           # integers: compared exactly


@pytest.mark.parametrize("name", ["resnet", "bert", "llama"])
def test_reference_openvino_agrees_on_real_models(name):
    xml = MODELS / f"{name}.f32.xml"
    code, report = compare_json(xml, "-i", MODELS / f"{name}.npz", "-r", "openvino")
    assert code == 0 and report["ok"] and report["first_divergence"] is None
    assert len(report["layers"]) > 30
    # OpenVINO's MaxPool always has an indices output; an IR that leaves the port out cannot match it
    assert all(u["side"] == "reference" and "MaxPool:1" in u["key"] for u in report["unmatched"])


def _deep_convolutions(channels=128, depth=6, size=28) -> ov.Model:
    rng = np.random.default_rng(3)
    h = x = ops.parameter([1, channels, size, size], ov.Type.f32, name="x")
    for i in range(depth):
        w = (rng.standard_normal((channels, channels, 3, 3)) * np.sqrt(2 / (9 * channels))).astype(np.float32)
        h = ops.convolution(h, ops.constant(w), [1, 1], [1, 1], [1, 1], [1, 1])
        h = ops.add(h, ops.constant((rng.standard_normal((1, channels, 1, 1)) * 0.1).astype(np.float32)))
        h = ops.relu(h)
    return ov.Model([ops.result(h)], [x])


def test_rounding_near_zero_is_no_divergence(tmp_path):
    """Six 3x3 convolutions of 128 channels, each a sum of 1152 products: where a sum cancels to near
    zero, irrun's rounding and OpenVINO's differ by more than 1e-4 of that output, not of the tensor.
    Per tensor (the default) the healthy model agrees; per element its first layers "diverge"."""
    xml = save(_deep_convolutions(), tmp_path / "deep")
    x = np.random.default_rng(4).standard_normal([1, 128, 28, 28]).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    code, report = compare_json(xml, "-i", tmp_path / "x.npy", "-r", "openvino")
    assert code == 0 and report["first_divergence"] is None and len(report["layers"]) == 19
    assert all(d["relative_to"] == "tensor" and d["max_abs"] < 1e-5 * d["reference_max"] for d in report["layers"])
    strict = irrun.compare(xml, {"x": x}, "openvino", relative_to="element")
    assert not strict.ok and strict.first_divergence.type in ("Convolution", "Add")
    assert all(d.max_abs < 1e-4 * d.reference_max for d in strict.diverging)     # all of it rounding
    with pytest.raises(irrun.UsageError, match="relative_to must be one of tensor, element"):
        irrun.compare(xml, {"x": x}, "openvino", relative_to="max")


def test_a_layer_a_tenth_of_a_percent_off_is_found(tmp_path):
    bad = copy_ir(RESNET, tmp_path / "bad")
    scale_weights(bad, "Multiply_3891", 1.001)
    code, report = compare_json(bad, "-i", RESNET_IN, "--reference", RESNET)
    assert code == 1 and report["first_divergence"]["layer"] == "Multiply_3891"


def test_reference_openvino_agrees_on_an_int4_llm():
    """A stateful LLM with int4 weights, every layer against OpenVINO's (whose Assign layers have no
    output to add: OpenVINO refused the model, "Incorrect output port number")."""
    exported = MODELS / "exported"
    code, report = compare_json(exported / "llama.int4_asym_g32.xml", "-i", exported / "llama.int4_asym_g32.npz",
                                "-r", "openvino")
    assert code == 0 and report["ok"] and report["first_divergence"] is None, report["first_divergence"]


def test_another_ir_is_matched_by_name_and_the_rest_reported(tmp_path):
    """fp32 weights against the f16-compressed twin: the Convert layers the twin adds match nothing."""
    f16 = MODELS / "resnet.f16.xml"
    code, report = compare_json(RESNET, "-i", RESNET_IN, "-r", f16)
    assert code == 1
    assert report["first_divergence"]["type"] == "Convolution"
    assert report["unmatched"] and all(u["side"] == "reference" for u in report["unmatched"])
    assert len(report["layers"]) == 35
    # a tolerance loose enough for f16 weights lets every float tensor agree; the max pool's
    # indices, integers compared exactly, see a near tie fall the other way, but nothing reads them
    r = run_cli("compare", RESNET, "-i", RESNET_IN, "-r", f16, "--rtol", "0.05", "--atol", "0.01")
    assert r.exit_code == 0 and "every compared tensor agrees but 1 that nothing reads" in r.output
    assert "__module.stem.1/aten::max_pool2d/MaxPool:1" in r.output and "differs, read by nothing" in r.output
    code, report = compare_json(RESNET, "-i", RESNET_IN, "-r", f16, "--rtol", "0.05", "--atol", "0.01")
    different = [d for d in report["layers"] if not d["agrees"]]
    assert code == 0 and report["ok"] and [d["key"] for d in different] == ["__module.stem.1/aten::max_pool2d/MaxPool:1"]
    assert different[0]["rtol"] is None and not different[0]["used"] and different[0]["mismatch_fraction"] < 0.01


def test_python_api(tmp_path):
    feeds = dict(np.load(RESNET_IN))
    report = irrun.compare(RESNET, feeds, "openvino")
    assert report.ok and report.first_divergence is None
    bad = copy_ir(RESNET, tmp_path / "bad")
    scale_weights(bad, "Multiply_3877", 0.9)
    report = irrun.compare(irrun.load(bad), feeds, irrun.load(RESNET))
    assert not report.ok and report.first_divergence.layer == "Multiply_3877"
    assert report.to_json()["first_divergence"]["layer"] == "Multiply_3877"
    arrays = irrun.load(RESNET).infer(feeds, intermediates=True)
    assert irrun.compare(RESNET, feeds, arrays).ok


# ---------------------------------------------------------------- the numbers

def test_measure_counts_what_it_says():
    """The metrics themselves (arithmetic, no OpenVINO involved)."""
    ref = np.array([1.0, 2.0, 0.0, np.nan, np.inf, -4.0], np.float32)
    got = np.array([1.0, 2.1, 1e-6, np.nan, np.inf, -4.0], np.float32)
    m = measure(got, ref, Tolerance(1e-4, 1e-5))
    assert m["max_abs"] == pytest.approx(0.1, rel=1e-5) and m["max_rel"] == pytest.approx(0.05, rel=1e-5)
    assert m["mismatch_fraction"] == pytest.approx(1 / 6)       # only 2.1; 1e-6 is within atol, NaN = NaN, inf = inf
    assert (m["nan"], m["inf"], m["reference_nan"], m["reference_inf"]) == (1, 1, 1, 1)
    assert 0.99 < m["cosine"] < 1
    assert measure(np.array([1, 2, 3]), np.array([1, 2, 4]), None)["mismatch_fraction"] == pytest.approx(1 / 3)
    assert measure(np.zeros(3), np.zeros(3), None)["cosine"] == 1.0
    assert measure(np.zeros((2, 3)), np.zeros((3, 2)), None)["reason"] == "shape [2, 3] vs reference [3, 2]"


def test_per_tensor_and_per_element():
    """rtol times the reference's largest magnitude by default; times each element's own when asked."""
    ref = np.array([0.0, 1e-3, -8.0, np.inf, np.nan], np.float32)
    got = np.array([2e-4, 1.5e-3, -8.0005, np.inf, np.nan], np.float32)
    tensor, element = Tolerance(1e-4, 1e-5), Tolerance(1e-4, 1e-5, "element")
    diff = np.abs(got[:3] - ref[:3])
    assert list(tensor.within(diff, ref[:3])) == [True, True, True]       # bound 1e-5 + 1e-4 x 8
    assert list(element.within(diff, ref[:3])) == [False, False, True]
    assert measure(got, ref, tensor)["mismatch_fraction"] == 0 and measure(got, ref, tensor)["reference_max"] == 8
    assert measure(got, ref, element)["mismatch_fraction"] == pytest.approx(2 / 5)
    assert str(tensor) == "atol 1e-05 + rtol 0.0001 x largest |reference|" and str(element) == "rtol 0.0001 atol 1e-05"
    assert tensor.describe(8.0) == "atol 1e-05 + rtol 0.0001 x 8 (largest |reference|)"
    assert Tolerance(0, 0).within(np.zeros(2), np.array([np.nan, np.inf])).all()     # nothing finite: scale 0


def test_tolerances_by_element_type():
    assert tolerance_for("f32", np.float32) == Tolerance(1e-4, 1e-5)
    assert tolerance_for("bf16", np.float32) == Tolerance(1e-2, 1e-2)     # bf16 is carried as f32
    assert tolerance_for("f16", np.float16) == Tolerance(1e-3, 1e-3)
    assert tolerance_for("i32", np.int32) is None and tolerance_for("boolean", np.bool_) is None
    assert tolerance_for("f32", np.float32, rtol=0.1) == Tolerance(0.1, 1e-5)
    assert tolerance_for("f32", np.float32, relative_to="element") == Tolerance(1e-4, 1e-5, "element")


# ---------------------------------------------------------------- bad input: one line, exit 2

def _one_error_line(r, message):
    assert r.exit_code == 2, r.output
    assert r.output.startswith("error: ") and r.output.count("\n") == 1, r.output
    assert message in r.output, r.output


def test_a_reference_file_without_the_models_keys(tmp_path):
    np.savez(tmp_path / "other.npz", a=np.zeros(3), b=np.ones(2))
    r = run_cli("compare", RESNET, "-i", RESNET_IN, "-r", tmp_path / "other.npz")
    _one_error_line(r, "has none of the model's tensors (its keys look like 'a', 'b'; the model's like 'x:0'")


def test_a_reference_file_with_missing_keys_and_a_wrong_shape(tmp_path):
    arrays = irrun.load(RESNET).infer(dict(np.load(RESNET_IN)), intermediates=True)
    keys = [k for k in arrays if ":" in k]
    kept = {k: arrays[k] for k in keys[:10]}
    np.savez(tmp_path / "part.npz", **kept)
    code, report = compare_json(RESNET, "-i", RESNET_IN, "-r", tmp_path / "part.npz")
    assert code == 0 and len(report["layers"]) == 10
    assert {u["key"] for u in report["unmatched"]} == set(keys[10:])
    kept[keys[3]] = kept[keys[3]][..., :-1]
    np.savez(tmp_path / "part.npz", **kept)
    code, report = compare_json(RESNET, "-i", RESNET_IN, "-r", tmp_path / "part.npz")
    first = report["first_divergence"]
    assert code == 1 and first["key"] == keys[3] and first["reason"].startswith("shape [1, 16, 32, 32] vs reference")
    kept[keys[3]] = arrays[keys[3]].astype(np.float64)
    np.savez(tmp_path / "part.npz", **kept)
    code, report = compare_json(RESNET, "-i", RESNET_IN, "-r", tmp_path / "part.npz")
    first = report["first_divergence"]
    assert code == 1 and first["key"] == keys[3] and first["reason"] == "dtype float32 vs reference float64"
    assert first["max_abs"] == 0          # the values themselves agree


@pytest.mark.parametrize("reference, message", [
    ("nope.npz", "no such file"),
    ("empty_dir", "a directory without index.json"),
    ("junk.npz", "not a readable .npz archive"),
    ("model.txt", "not a .npz, a dump directory or an .xml model"),
    ("pickled.npz", "cannot be read without pickle"),
])
def test_unreadable_references(reference, message, tmp_path):
    (tmp_path / "empty_dir").mkdir()
    (tmp_path / "junk.npz").write_bytes(b"PK\x03\x04 not really")
    (tmp_path / "model.txt").write_text("hello")
    np.savez(tmp_path / "pickled.npz", **{"x:0": np.array([{"a": 1}], dtype=object)})
    r = run_cli("compare", RESNET, "-i", RESNET_IN, "-r", tmp_path / reference)
    _one_error_line(r, message)


def test_openvino_not_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "openvino", None)      # `import openvino` now raises ImportError
    r = run_cli("compare", RESNET, "-i", RESNET_IN, "-r", "openvino")
    _one_error_line(r, 'needs the openvino package: pip install "irrun[openvino]"')
    with pytest.raises(irrun.UsageError, match=r"irrun\[openvino\]"):
        irrun.compare(RESNET, dict(np.load(RESNET_IN)), "openvino:GPU")


def test_usage_errors():
    _one_error_line(run_cli("compare", RESNET, "-r", "openvino"), "no --input given")
    _one_error_line(run_cli("compare", RESNET, "-i", RESNET_IN, "-r", "openvino", "--rtol", "-1"),
                    "--rtol must be a number >= 0")
    r = run_cli("compare", RESNET, "-i", RESNET_IN)
    assert r.exit_code == 2 and "Missing option '--reference'" in r.output


def test_an_openvino_device_that_does_not_exist():
    r = run_cli("compare", RESNET, "-i", RESNET_IN, "-r", "openvino:NOSUCHDEVICE")
    _one_error_line(r, "OpenVINO could not run the model on NOSUCHDEVICE")


def test_the_readme_session_int8_twin(tmp_path):
    """The README's debugging session: an int8 twin with one layer in 4 bits, found by name; the
    twin itself (i8 and i4 decompression chains) runs in irrun as in OpenVINO."""
    import subprocess
    twin = tmp_path / "resnet.int8.xml"
    done = subprocess.run([sys.executable, str(Path(__file__).parents[1] / "examples" / "int8_twin.py"), RESNET,
                           twin, "--int4", "Multiply_3898"], capture_output=True, text=True, check=True)
    assert "10 layers with compressed weights (Multiply_3898 in 4 bits)" in done.stdout
    code, report = compare_json(twin, "-i", RESNET_IN, "-r", RESNET, "--rtol", "0.05")
    assert code == 1 and report["first_divergence"]["layer"] == "Multiply_3898"
    assert [d["layer"] for d in report["layers"] if not d["agrees"] and d["used"]] == ["Multiply_3898"]
    assert {u["side"] for u in report["unmatched"]} == {"model"}      # the decompression chains
    code, report = compare_json(twin, "-i", RESNET_IN, "-r", "openvino")
    assert code == 0, report["first_divergence"]
