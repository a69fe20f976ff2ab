"""benchmarks/pair_halves.py: each split step of a paired run, its halves timed against the whole."""
from __future__ import annotations

import json
import platform
import sys
from pathlib import Path

import numpy as np
import pytest

from irrun import threads

from .benchmark_scripts import load_script

MODELS = Path(__file__).resolve().parent / "models"

pytestmark = pytest.mark.skipif(
    not (sys.platform.startswith("linux") and platform.machine().lower() in ("x86_64", "amd64")
         and threads.available_cpus() >= 2),
    reason="paired runs need Linux on x86-64 and two CPUs")


@pytest.fixture(scope="module")
def halves():
    return load_script("pair_halves")


def _paired_network(tmp_path: Path) -> tuple[Path, Path]:
    """A 3x3 convolution of 64 channels at 16 x 16 (Winograd's, cut along its rows at a tile) with
    its bias and Relu, then a product large enough to pair the network."""
    import openvino as ov
    import openvino.opset13 as ops
    rng = np.random.default_rng(0)
    x = ops.parameter([1, 64, 16, 16], np.float32, name="x")
    w = (rng.standard_normal((64, 64, 3, 3)) / 24).astype(np.float32)
    y = ops.relu(ops.add(ops.convolution(x, ops.constant(w), [1, 1], [1, 1], [1, 1], [1, 1]),
                         ops.constant(rng.standard_normal((1, 64, 1, 1)).astype(np.float32))))
    y = ops.reshape(y, ops.constant(np.array([1, 64, 256], np.int64)), False)
    y = ops.matmul(y, ops.constant((rng.standard_normal((256, 1152)) / 16).astype(np.float32)), False, False)
    xml = tmp_path / "paired.xml"
    ov.save_model(ov.Model([y], [x]), str(xml))
    feeds = tmp_path / "paired.npz"
    np.savez(feeds, x=rng.standard_normal((1, 64, 16, 16)).astype(np.float32))
    return xml, feeds


def test_a_paired_network_has_its_split_steps_timed(halves, tmp_path, capsys):
    xml, feeds = _paired_network(tmp_path)
    out = tmp_path / "halves.json"
    halves.main(["--model", str(xml), "--inputs", str(feeds), "--repeat", "3", "--json", str(out)])
    result = json.loads(out.read_text())["paired.xml"]
    assert result["paired"]
    steps = {s["type"]: s for s in result["steps"]}
    assert set(steps) == {"Convolution", "MatMul"}
    convolution = steps["Convolution"]
    assert (convolution["axis"], convolution["middle"]) == (2, 8)     # (irrun/convolution_halves.py)
    for s in result["steps"]:
        assert 0 < s["first"] and 0 < s["second"] and 0 < s["whole"]
    text = capsys.readouterr().out
    assert text.startswith("### paired.xml: 2 split steps, whole ")
    assert "| Convolution | [1,64,16,16] -> [1,64,256] | 2 @ 8 |" in text     # (its Reshape fused after it)


def test_a_network_in_one_process_says_so(halves, capsys):
    halves.main(["--model", str(MODELS / "resnet.f32.xml"), "--inputs", str(MODELS / "resnet.npz"), "--repeat", "1"])
    assert capsys.readouterr().out.startswith("### resnet.f32.xml: runs in one process")


def test_the_report_orders_steps_by_the_larger_halfs_excess(halves):
    steps = [{"name": "a", "type": "MatMul", "axis": 1, "middle": None, "data": [2, 8], "output": [2, 4],
              "first": 50e-6, "second": 50e-6, "whole": 100e-6},
             {"name": "b", "type": "Convolution", "axis": 2, "middle": 8, "data": [1, 3, 16, 16], "output": [1, 8, 16, 16],
              "first": 300e-6, "second": 200e-6, "whole": 400e-6}]
    text = halves.report("net", {"paired": True, "steps": steps}, top=10)
    assert "larger halves 0.35 (0.70 of the whole" in text
    rows = [line for line in text.splitlines() if line.startswith("| a ") or line.startswith("| b ")]
    assert rows[0] == "| b | Convolution | [1,3,16,16] -> [1,8,16,16] | 2 @ 8 | 400 | 300 + 200 | 0.75 | +100 |"
    assert rows[1] == "| a | MatMul | [2,8] -> [2,4] | 1 @ middle | 100 | 50 + 50 | 0.50 | +0 |"


def test_a_model_without_its_inputs_is_refused(halves):
    with pytest.raises(SystemExit):
        halves.main(["--model", str(MODELS / "resnet.f32.xml")])
