"""The command line, through click's runner and as a real subprocess."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from irrun.cli import cli
from irxml import relu_model, write

ROOT = Path(__file__).resolve().parent.parent
DIGITS = ROOT / "models" / "digits"
XML = str(DIGITS / "model.xml")


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_infer_prints_summary_and_top5():
    r = run("infer", XML, "--input", DIGITS / "digit7.npy")
    assert r.exit_code == 0, r.output
    assert "probabilities: shape [1, 10] float32" in r.output
    assert "top-5: class 7" in r.output


def test_infer_named_input_and_npz_output(tmp_path):
    out = tmp_path / "out.npz"
    r = run("infer", XML, "--input", f"image={DIGITS / 'digit3.npy'}", "--output", out)
    assert r.exit_code == 0, r.output
    assert np.load(out)["probabilities"].argmax() == 3


def test_infer_npz_input(tmp_path):
    npz = tmp_path / "in.npz"
    np.savez(npz, image=np.load(DIGITS / "digit0.npy"))
    r = run("infer", XML, "--input", npz)
    assert r.exit_code == 0 and "top-5: class 0" in r.output


@pytest.mark.parametrize("make, message", [
    (lambda p: p.write_text("1 2 3"), "not a .npy/.npz"),
    (lambda p: np.save(p, np.array([object()], dtype=object)), "pickled"),
    (lambda p: np.save(p, np.zeros((2, 2), np.float32)), "expects rank 4"),
])
def test_infer_bad_inputs(tmp_path, make, message):
    bad = tmp_path / "bad.npy"
    make(bad)
    r = run("infer", XML, "--input", bad)
    assert r.exit_code == 1 and message in r.output and "Traceback" not in r.output


def test_infer_without_input_is_misuse():
    r = run("infer", XML)
    assert r.exit_code == 2 and "the model takes: image" in r.output


def test_validate_clean_and_json():
    r = run("validate", XML)
    assert r.exit_code == 0 and "0 errors, 0 warnings" in r.output
    r = run("validate", XML, "--format", "json")
    assert r.exit_code == 0 and json.loads(r.output) == []


def test_validate_errors_exit_1(tmp_path):
    path = write(tmp_path, relu_model().replace("<dim>3</dim></port></output>", "<dim>4</dim></port></output>", 1))
    r = run("validate", path, "--format", "json")
    assert r.exit_code == 1
    (diag,) = json.loads(r.output)
    assert diag["code"] == "E-DECLARED-SHAPE" and diag["layer_id"] == "0" and diag["declared"] == [1, 4]


def test_validate_strict_turns_warnings_into_errors(tmp_path):
    path = write(tmp_path, relu_model().replace('element_type="f32"', 'element_type="f32" colour="red"'))
    assert run("validate", path).exit_code == 0
    assert run("validate", path, "--strict").exit_code == 1


def test_unreadable_exits_2(tmp_path):
    r = run("validate", tmp_path / "nope.xml")
    assert r.exit_code == 2
    r = run("infer", tmp_path / "nope.xml", "--input", "x.npy")
    assert r.exit_code == 2 and r.output.startswith("error: ") and "Traceback" not in r.output


def test_info_and_ops():
    r = run("info", XML)
    assert r.exit_code == 0, r.output
    assert "image: [?,1,8,8] f32" in r.output and "MatMul-1" in r.output and "parameters:" in r.output
    r = run("ops")
    assert r.exit_code == 0 and "AvgPool-14" in r.output and "Convolution-1" in r.output
    r = run("--version")
    assert r.exit_code == 0 and "irrun" in r.output


@pytest.mark.parametrize("launcher", [[sys.executable, "-m", "irrun"], [sys.executable, str(ROOT / "cli.py")]])
def test_real_subprocess(launcher):
    p = subprocess.run([*launcher, "infer", XML, "--input", str(DIGITS / "digit7.npy")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "top-5: class 7" in p.stdout
    p = subprocess.run([*launcher, "validate", str(ROOT / "nope.xml")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "Traceback" not in p.stderr + p.stdout


def test_infer_profile():
    r = run("infer", XML, "--input", DIGITS / "digit7.npy", "--profile")
    assert r.exit_code == 0, r.output
    assert "profile:" in r.output and "MatMul-1" in r.output and "slowest layers" in r.output
    assert "top-5: class 7" in r.output


# ---------------------------------------------------------------- where outputs go

@pytest.fixture(scope="module")
def two_outputs(tmp_path_factory):
    """A model whose two outputs are named "scores/relu" and "scores:neg" (not file names)."""
    import openvino as ov
    import openvino.opset1 as ops1
    x = ops1.parameter([2, 3], np.float32, name="x")
    relu, neg = ops1.relu(x), ops1.negative(x)
    relu.output(0).get_tensor().set_names({"scores/relu"})
    neg.output(0).get_tensor().set_names({"scores:neg"})
    xml = tmp_path_factory.mktemp("two") / "model.xml"
    ov.save_model(ov.Model([relu, neg], [x]), str(xml))
    data = tmp_path_factory.mktemp("in") / "x.npy"
    np.save(data, np.array([[1, -2, 3], [-4, 5, -6]], np.float32))
    return xml, data


def test_output_npz_is_written_at_exactly_that_path(tmp_path):
    out = tmp_path / "result.npz"
    r = run("infer", XML, "-i", DIGITS / "digit7.npy", "-o", out)
    assert r.exit_code == 0, r.output
    assert r.output.strip() == f"wrote 1 output to {out}"
    assert np.load(out)["probabilities"].argmax() == 7
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.npz"]    # no temporary file left


def test_output_npy_for_a_one_output_model(tmp_path):
    out = tmp_path / "probs.npy"
    r = run("infer", XML, "-i", DIGITS / "digit7.npy", "-o", out)
    assert r.exit_code == 0, r.output
    assert r.output.strip() == f"wrote 1 output to {out}"
    assert np.load(out).argmax() == 7 and sorted(p.name for p in tmp_path.iterdir()) == ["probs.npy"]


def test_output_npy_needs_one_output(two_outputs, tmp_path):
    xml, data = two_outputs
    r = run("infer", xml, "-i", data, "-o", tmp_path / "out.npy")
    assert r.exit_code == 2 and "a .npy file holds one array and the model has 2 outputs" in r.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("form", ["existing", "trailing-slash", "no-suffix"])
def test_output_directory_of_npy_files(form, two_outputs, tmp_path):
    xml, data = two_outputs
    folder = tmp_path / "outs"
    target = {"existing": str(folder), "trailing-slash": f"{folder}/", "no-suffix": str(folder)}[form]
    if form == "existing":
        folder.mkdir()
    r = run("infer", xml, "-i", data, "-o", target)
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in folder.iterdir()) == ["scores%2Frelu.npy", "scores%3Aneg.npy"]
    assert "wrote 2 outputs to" in r.output and "scores%2Frelu.npy, scores%3Aneg.npy" in r.output
    x = np.load(data)
    np.testing.assert_array_equal(np.load(folder / "scores%2Frelu.npy"), np.maximum(x, 0))
    np.testing.assert_array_equal(np.load(folder / "scores%3Aneg.npy"), -x)


def test_output_npz_keeps_the_names(two_outputs, tmp_path):
    xml, data = two_outputs
    r = run("infer", xml, "-i", data, "-o", tmp_path / "all.npz")
    assert r.exit_code == 0, r.output
    assert sorted(np.load(tmp_path / "all.npz").files) == ["scores/relu", "scores:neg"]


def test_output_to_stdout_is_an_npz_and_the_message_goes_to_stderr():
    r = CliRunner().invoke(cli, ["infer", XML, "-i", str(DIGITS / "digit7.npy"), "-o", "-"])
    assert r.exit_code == 0, r.stderr
    import io
    assert np.load(io.BytesIO(r.stdout_bytes))["probabilities"].argmax() == 7
    assert r.stderr.strip() == "wrote 1 output to stdout (.npz)"


@pytest.mark.parametrize("target, message", [
    ("out.txt", "use NAME.npz (every output), NAME.npy"),
    ("out.npy.gz", "use NAME.npz"),
])
def test_output_with_an_unknown_suffix_is_refused_before_running(target, message, tmp_path):
    r = run("infer", XML, "-i", DIGITS / "digit7.npy", "-o", tmp_path / target)
    assert r.exit_code == 2 and message in r.output and list(tmp_path.iterdir()) == []


def test_output_directory_that_is_a_file(tmp_path):
    (tmp_path / "outs").write_text("a file")
    r = run("infer", XML, "-i", DIGITS / "digit7.npy", "-o", tmp_path / "outs")
    assert r.exit_code == 2 and "exists and is not a directory" in r.output
    assert (tmp_path / "outs").read_text() == "a file"


def test_a_failed_run_leaves_the_old_output_alone(tmp_path):
    out = tmp_path / "out.npz"
    np.savez(out, old=np.arange(3))
    bad = tmp_path / "bad.npy"
    np.save(bad, np.zeros((2, 2), np.float32))
    r = run("infer", XML, "-i", bad, "-o", out)
    assert r.exit_code == 1
    assert np.load(out).files == ["old"] and sorted(p.name for p in tmp_path.iterdir()) == ["bad.npy", "out.npz"]


def test_output_to_stdout_through_a_real_pipe(tmp_path):
    p = subprocess.run([sys.executable, "-m", "irrun", "infer", XML, "-i", str(DIGITS / "digit3.npy"), "-o", "-"],
                       capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr
    import io
    assert np.load(io.BytesIO(p.stdout))["probabilities"].argmax() == 3
    assert p.stderr.decode().strip() == "wrote 1 output to stdout (.npz)"
    assert not list(Path.cwd().glob("-*"))


# ---------------------------------------------------------------- inputs

def test_npz_with_extra_arrays_is_accepted_and_says_so(tmp_path):
    npz = tmp_path / "in.npz"
    np.savez(npz, image=np.load(DIGITS / "digit0.npy"), label=np.array(0), mask=np.ones(3))
    r = run("infer", XML, "-i", npz)
    assert r.exit_code == 0, r.output
    assert "top-5: class 0" in r.stdout
    assert r.stderr.strip() == f"note: ignored label, mask in {npz} (not inputs of the model)"


def test_npz_without_the_input_is_still_an_error(tmp_path):
    npz = tmp_path / "in.npz"
    np.savez(npz, label=np.array(0))
    r = run("infer", XML, "-i", npz)
    assert r.exit_code == 1 and "missing input: image" in r.output


@pytest.mark.parametrize("arrays, ok", [({"image": "digit3", "other": "digit0"}, True),   # by name
                                        ({"whatever": "digit3"}, True),                    # the only array
                                        ({"a": "digit3", "b": "digit0"}, False)])          # ambiguous
def test_named_input_from_an_npz(arrays, ok, tmp_path):
    npz = tmp_path / "in.npz"
    np.savez(npz, **{k: np.load(DIGITS / f"{v}.npy") for k, v in arrays.items()})
    r = run("infer", XML, "-i", f"image={npz}")
    if ok:
        assert r.exit_code == 0 and "top-5: class 3" in r.output, r.output
    else:
        assert r.exit_code == 1 and "has no array 'image' (it holds a, b)" in r.output


def test_an_input_given_twice_is_misuse(tmp_path):
    npz = tmp_path / "in.npz"
    np.savez(npz, image=np.load(DIGITS / "digit0.npy"))
    r = run("infer", XML, "-i", npz, "-i", f"image={DIGITS / 'digit3.npy'}")
    assert r.exit_code == 2 and "input 'image' given twice" in r.output


# ---------------------------------------------------------------- not an IR

@pytest.mark.parametrize("command", [["info"], ["validate"], ["infer", "-i", str(DIGITS / "digit7.npy")]])
def test_the_bin_file_is_not_an_ir(command):
    r = run(command[0], DIGITS / "model.bin", *command[1:])
    assert r.exit_code == 2, r.output
    assert "not an OpenVINO IR .xml file" in r.output and "pass model.xml" in r.output
    assert "well-formed" not in r.output and "Traceback" not in r.output
    if command[0] != "validate":
        assert len(r.output.strip().splitlines()) == 1


def test_an_array_or_any_other_file_is_not_an_ir(tmp_path):
    assert "it is an array file" in run("info", DIGITS / "digit7.npy").output
    other = tmp_path / "notes.xml"
    other.write_bytes(b"\x00\x01binary")
    r = run("info", other)
    assert r.exit_code == 2 and r.output.strip() == f"error: {other}: not an OpenVINO IR .xml file " \
                                                     f"(it does not begin with an XML tag)"


def test_not_an_ir_in_a_real_subprocess():
    p = subprocess.run([sys.executable, "-m", "irrun", "info", str(DIGITS / "model.bin")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip().startswith("error: ") and "pass model.xml" in p.stderr
