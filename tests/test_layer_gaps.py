"""benchmarks/layer_gaps.py: irrun's and OpenVINO's per-layer profiles matched into groups of
layers that both runtimes' steps cover whole."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from .benchmark_scripts import load_script


@pytest.fixture(scope="module")
def gaps():
    return load_script("layer_gaps")


def _step(names, seconds, label=None, kind=None):
    step = {"names": names, "label": label or "+".join(names), "seconds": seconds}
    if kind:
        step["kind"] = kind
    return step


def test_steps_that_share_a_layer_join_across_runtimes(gaps):
    # irrun fuses conv+add+relu and runs the pool alone; OpenVINO runs the conv alone and fuses
    # add+relu+pool: one group of all four.  A step naming no layer (none found for it) is alone.
    ours = [_step(["conv", "add", "relu"], 3.0, "conv step", "Convolution 3x3/1"), _step(["pool"], 1.0, "pool step", "MaxPool"),
            _step(["fc"], 2.0, "fc step", "MatMul")]
    theirs = [_step(["conv"], 1.5), _step(["add", "relu", "pool"], 0.5), _step(["fc", "bias"], 1.0),
              _step([], 0.25, "reorder", "Reorder")]
    found = gaps.groups(ours, theirs)
    assert [g["layers"] for g in found] == [["add", "conv", "pool", "relu"], ["bias", "fc"], []]
    first, second, alone = found
    assert (first["irrun"], first["openvino"]) == (4.0, 2.0)
    assert first["label"] == "conv step; pool step" and first["kind"] == "Convolution 3x3/1"
    assert (second["irrun"], second["openvino"], second["kind"]) == (2.0, 1.0, "MatMul")
    # a step with no layer to match stands alone, named as OpenVINO's
    assert (alone["irrun"], alone["openvino"], alone["kind"]) == (0.0, 0.25, "(OpenVINO's Reorder)")
    assert alone["label"] == "OpenVINO's reorder"


def test_a_group_is_labelled_by_its_longest_steps(gaps):
    ours = [_step(["a"], 1.0, "a", "Reshape"), _step(["b"], 5.0, "b", "MatMul"), _step(["c"], 2.0, "c", "Softmax")]
    theirs = [_step(["a", "b", "c"], 4.0)]
    (group,) = gaps.groups(ours, theirs)
    assert group["label"] == "b; c; 1 more" and group["kind"] == "MatMul"
    assert (group["irrun"], group["openvino"]) == (8.0, 4.0)


def test_the_digits_network_end_to_end(gaps, tmp_path, capsys):
    out = tmp_path / "gaps.json"
    gaps.main(["--networks", "digits", "--repeat", "2", "--rounds", "2", "--json", str(out)])
    (result,) = json.loads(out.read_text())
    found = result["groups"]
    assert result["network"] == "digits" and all(w > 0 for w in result["walls"].values())
    # both runtimes' steps are all counted, each in one group
    assert sum(g["irrun"] for g in found) > 0 and sum(g["openvino"] for g in found) > 0
    layers = [name for g in found for name in g["layers"]]
    assert len(layers) == len(set(layers))
    # the classifier's products are matched: a MatMul group both runtimes ran
    assert any(g["kind"] == "MatMul" and g["irrun"] > 0 and g["openvino"] > 0 for g in found)
    text = capsys.readouterr().out
    assert text.startswith("### digits: irrun ") and "By kind: " in text


def test_openvinos_layout_conversions_count_with_the_layer_they_feed(gaps, tmp_path):
    import numpy as np
    import openvino as ov
    import openvino.opset13 as ops

    x = ops.parameter([1, 3, 64, 64], ov.Type.f32, name="image")
    w = np.random.default_rng(0).standard_normal((16, 3, 3, 3), dtype=np.float32)
    conv = ops.convolution(x, ops.constant(w), [1, 1], [1, 1], [1, 1], [1, 1])
    conv.set_friendly_name("the_conv")
    xml = tmp_path / "conv.xml"
    ov.save_model(ov.Model([ops.result(ops.relu(conv))], [x], "conv"), str(xml), compress_to_fp16=False)
    image = np.zeros((1, 3, 64, 64), np.float32)
    steps = gaps.openvino_steps(str(xml), {"image": image}, None, 2)["steps"]
    reorders = [s for s in steps if "Reorder" in s["label"]]
    # (OpenVINO 2026.4 converts the image's layout to its blocked one, and the result's back)
    assert len(reorders) == 2, [s["label"] for s in steps]
    assert all("the_conv" in s["names"] for s in reorders)


def test_rounds_keep_each_steps_lowest_median(gaps):
    first = {"steps": [_step(["a"], 3.0, "a"), _step(["b"], 1.0, "b")], "wall": 5.0}
    second = {"steps": [_step(["a"], 2.0, "a"), _step(["b"], 4.0, "b")], "wall": 7.0}
    merged = gaps.steadiest([first, second])
    assert [(s["label"], s["seconds"]) for s in merged["steps"]] == [("a", 2.0), ("b", 1.0)]
    assert merged["wall"] == 5.0


MODELS = Path(__file__).resolve().parent / "models"


def test_an_ir_of_ones_own(gaps, tmp_path, capsys):
    out = tmp_path / "gaps.json"
    gaps.main(["--model", str(MODELS / "resnet.f32.xml"), "--inputs", str(MODELS / "resnet.npz"),
               "--repeat", "2", "--rounds", "1", "--json", str(out)])
    (result,) = json.loads(out.read_text())
    assert result["network"] == "resnet.f32.xml"
    # the exported ResNet's convolutions are matched in both runtimes
    matched = [g for g in result["groups"] if g["kind"].startswith("Convolution") and g["irrun"] > 0 and g["openvino"] > 0]
    assert len(matched) >= 5
    assert capsys.readouterr().out.startswith("### resnet.f32.xml: irrun ")


def test_inputs_the_model_does_not_take_are_one_line(gaps):
    with pytest.raises(SystemExit, match=r"^error: openvino on resnet\.f32\.xml: .*input_ids"):
        gaps.main(["--model", str(MODELS / "resnet.f32.xml"), "--inputs", str(MODELS / "bert.npz"),
                   "--repeat", "1", "--rounds", "1"])
