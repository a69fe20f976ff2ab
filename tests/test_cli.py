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
