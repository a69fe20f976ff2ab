"""Whole-model differential tests: small real architectures in irrun vs OpenVINO's CPU plugin.

The IRs in tests/models/ come from torch.nn modules converted by openvino.convert_model (PyTorch and ONNX
frontends), each saved with f32 weights (`*.f32.xml`) and f16-compressed weights (`*.f16.xml`); see
tests/models/README.md.  These tests read only the committed files: they do not need torch.
When outputs differ, the failure names the first op whose output differs (`first_divergence`).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import openvino as ov
import pytest

from benchmark_scripts import load_script
from ovutil import compile_cpu, run_openvino
import irrun
from irrun.registry import implementation
from irrun.shapes import Dim

# Every test here runs with irrun/optimize.py on and off (conftest.optimize_both_ways).
pytestmark = pytest.mark.usefixtures("optimize_both_ways")

MODELS = Path(__file__).resolve().parent / "models"
STATIC_IRS = sorted(p for p in MODELS.glob("*.xml") if "_dynamic" not in p.name)
RTOL, ATOL_SCALE = 1e-3, 1e-4          # |irrun - ov| <= RTOL * |ov| + ATOL_SCALE * max|ov|
CLASSIFIER_OUTPUTS = ("logits",)       # outputs whose top-1 along the last axis must agree exactly

# Ops irrun does not implement yet, by model: {"model stem": "Type-version, ..."}.  Those models xfail
# (non-strict) until the ops land; any other W-OP-UNSUPPORTED is a failure.
PENDING_OPS: dict[str, str] = {}

_CORE = ov.Core()


def stem(xml: Path) -> str:
    return xml.name.split(".")[0]


def ir_id(xml: Path) -> str:
    return xml.name.removesuffix(".xml")


def pending(xml: Path):
    ops = PENDING_OPS.get(stem(xml))
    return pytest.param(xml, id=ir_id(xml), marks=pytest.mark.xfail(
        reason=f"irrun does not implement {ops} yet", strict=False)) if ops else pytest.param(xml, id=ir_id(xml))


def example_input(xml: Path) -> dict[str, np.ndarray]:
    with np.load(MODELS / f"{stem(xml)}.npz") as npz:
        return dict(npz)


def mismatch(actual: np.ndarray, expected: np.ndarray) -> str | None:
    """Why `actual` is not close enough to OpenVINO's `expected` (None if it is)."""
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype} != OpenVINO {expected.dtype}"
    if actual.shape != expected.shape:
        return f"shape {actual.shape} != OpenVINO {expected.shape}"
    if expected.dtype.kind not in "fc":
        return None if np.array_equal(actual, expected) else \
            f"{np.count_nonzero(actual != expected)} of {expected.size} values differ"
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    scale = float(np.max(np.abs(e), initial=0.0))
    bad = ~(np.abs(a - e) <= RTOL * np.abs(e) + ATOL_SCALE * scale) & ~(np.isnan(a) & np.isnan(e))
    if not bad.any():
        return None
    err = np.abs(a - e)[bad].max()
    return f"{np.count_nonzero(bad)} of {e.size} values off, max |irrun - OpenVINO| = {err:.3g} " \
           f"(max |OpenVINO| = {scale:.3g})"


def max_error(actual: np.ndarray, expected: np.ndarray) -> float:
    scale = float(np.max(np.abs(expected), initial=0.0)) or 1.0
    return float(np.max(np.abs(actual.astype(np.float64) - expected), initial=0.0)) / scale


def first_divergence(xml: Path, feeds: dict[str, np.ndarray], tmp_path: Path) -> str:
    """Expose every op's output as a Result, run both, and name the first op (in order) whose output differs."""
    model = _CORE.read_model(str(xml))
    probes = []
    for op in model.get_ordered_ops():
        if op.get_type_name() in ("Parameter", "Constant", "Result"):
            continue
        for port in op.outputs():
            probe = f"probe{len(probes)}"
            port.get_tensor().add_names({probe})
            probes.append((probe, port))
    model.add_outputs([port for _, port in probes])
    probe_xml = tmp_path / "probe.xml"
    ov.save_model(model, str(probe_xml), compress_to_fp16=False)

    compiled = compile_cpu(probe_xml)
    result = compiled([feeds[p.get_any_name()] for p in compiled.inputs])
    expected = {name: np.asarray(result[out]) for out in compiled.outputs for name in out.get_names()}
    m = irrun.load(probe_xml)
    actual = {name: value for info, value in zip(m.outputs, m.infer(feeds).values()) for name in info.names}
    for probe, port in probes:
        why = mismatch(actual[probe], expected[probe])
        if why:
            node = port.get_node()
            version = node.get_type_info().version_id.removeprefix("opset")
            return f"first differing op: {node.get_type_name()}-{version} {node.get_friendly_name()!r} " \
                   f"output {port.get_index()}: {why}"
    return "every op's output matches when exposed one by one"


def ov_shape(partial: ov.PartialShape) -> list:
    return [d.get_length() if d.is_static else (d.get_min_length(), d.get_max_length()) for d in partial]


def irrun_shape(shape) -> list:
    return [(d.lo, -1 if d.hi is None else d.hi) if isinstance(d, Dim) else d for d in shape]


def compare_with_openvino(xml: Path, feeds: dict[str, np.ndarray], tmp_path: Path) -> dict[str, float]:
    """Run both on `feeds`; assert every output matches.  Returns each output's max error / max |value|."""
    m = irrun.load(xml)
    expected = run_openvino(xml, [feeds[i.name] for i in m.inputs])
    actual = m.infer(feeds)
    assert len(actual) == len(expected)
    problems, errors = [], {}
    for (name, a), e in zip(actual.items(), expected):
        why = mismatch(a, e)
        if why is None and name in CLASSIFIER_OUTPUTS and not np.array_equal(a.argmax(-1), e.argmax(-1)):
            why = f"top-1 differs: irrun {a.argmax(-1).tolist()}, OpenVINO {e.argmax(-1).tolist()}"
        if why:
            problems.append(f"{name}: {why}")
        else:
            errors[name] = max_error(a, e)
    if problems:
        pytest.fail(f"{xml.name}: " + "; ".join(problems) + "\n" + first_divergence(xml, feeds, tmp_path))
    return errors


@pytest.mark.parametrize("xml", [pending(x) for x in STATIC_IRS])
def test_validate_reports_no_problem(xml):
    report = irrun.validate(xml)
    unexpected = [d.format() for d in report.diagnostics
                  if not (d.code == "W-OP-UNSUPPORTED" and stem(xml) in PENDING_OPS)]
    assert not unexpected, "\n".join(unexpected)


@pytest.mark.parametrize("xml", [pending(x) for x in STATIC_IRS])
def test_outputs_match_openvino(xml, tmp_path):
    m = irrun.load(xml)
    declared = _CORE.read_model(str(xml))
    assert [irrun_shape(o.shape) for o in m.outputs] == [ov_shape(o.get_partial_shape()) for o in declared.outputs]
    compare_with_openvino(xml, example_input(xml), tmp_path)


@pytest.mark.parametrize("name", ["mobilenet_v3", "efficientnet_b0", "yolo_n"])
def test_benchmark_networks_match_openvino(name, tmp_path):
    """The benchmark's mobile and detection networks (benchmarks/networks.py, built with openvino's
    API): depthwise layers by rows and by windows, strided, fed channels-last by their 1x1
    convolutions, Swish chains in blocks, SPPF's pools, nearest upsampling."""
    xml, feeds = load_script("networks").build_ir(name, tmp_path)
    compare_with_openvino(xml, feeds, tmp_path)


def test_every_model_has_both_precisions_and_an_input():
    stems = {stem(x) for x in MODELS.glob("*.xml")}
    assert len(stems) >= 10
    for s in stems:
        assert (MODELS / f"{s}.f32.xml").exists() and (MODELS / f"{s}.f16.xml").exists(), s
        assert "_dynamic" in s or (MODELS / f"{s}.npz").exists(), s
    # The f16 files really carry f16 weights (the point of testing them).
    assert 'element_type="f16"' in (MODELS / "resnet.f16.xml").read_text()
    assert 'element_type="f16"' not in (MODELS / "resnet.f32.xml").read_text()


# ------------------------------------------------------------------ dynamic shapes
_rng = np.random.default_rng(7)


def _bert_inputs(batch, seq, lengths):
    ids = _rng.integers(1, 100, (batch, seq))
    mask = (np.arange(seq) < np.array(lengths)[:, None]).astype(np.int64)
    return {"input_ids": ids * mask, "attention_mask": mask}


# Two or more input sizes per dynamic IR.
DYNAMIC_CASES = {
    # Odd sizes: stride-2 convs and the 3x3/2 max pool round differently per axis.
    "resnet_dynamic": ("?,3,?,?", [{"x": _rng.standard_normal((1, 3, 64, 64), np.float32)},
                                   {"x": _rng.standard_normal((3, 3, 33, 47), np.float32)}]),
    "bert_dynamic": ("?,?", [_bert_inputs(1, 7, [7]), _bert_inputs(3, 12, [12, 5, 1])]),
    # 20 tokens is past the 16 learned positions: Gather-8 gives zero rows for out-of-range indices.
    "gpt_dynamic": ("1,?", [{"input_ids": _rng.integers(0, 128, (1, 5))},
                            {"input_ids": _rng.integers(0, 128, (1, 16))},
                            {"input_ids": _rng.integers(0, 128, (1, 20))}]),
    "llama_dynamic": ("1,?", [{"input_ids": _rng.integers(0, 128, (1, 3))},
                              {"input_ids": _rng.integers(0, 128, (1, 23))}]),
    "lstm_gru_dynamic": ("?,?", [{"tokens": _rng.integers(0, 50, (1, 3))},
                                 {"tokens": _rng.integers(0, 50, (4, 20))}]),
}


@pytest.mark.parametrize("precision", ["f32", "f16"])
@pytest.mark.parametrize("model", sorted(DYNAMIC_CASES))
def test_dynamic_model_at_two_sizes(model, precision, tmp_path):
    xml = MODELS / f"{model}.{precision}.xml"
    input_shape, cases = DYNAMIC_CASES[model]
    report = irrun.validate(xml)
    assert not report.diagnostics, "\n".join(d.format() for d in report.diagnostics)
    m = irrun.load(xml)
    declared = _CORE.read_model(str(xml))
    assert str(declared.inputs[0].get_partial_shape()) == f"[{input_shape}]"
    assert [irrun_shape(o.shape) for o in m.outputs] == [ov_shape(o.get_partial_shape()) for o in declared.outputs]
    for feeds in cases:
        compare_with_openvino(xml, {i.name: feeds[i.name] for i in m.inputs}, tmp_path)


# ------------------------------------------------------------------ the harness itself
def test_first_divergence_names_the_wrong_op(monkeypatch, tmp_path):
    """A kernel made slightly wrong is caught, and the report points at it rather than at the output."""
    sigmoid = implementation("Sigmoid", 1)
    right = sigmoid.run
    monkeypatch.setattr(sigmoid, "run", lambda self, x: right(self, x) * np.float32(1.01))
    xml = MODELS / "unet_detector.f32.xml"
    with pytest.raises(pytest.fail.Exception) as failure:
        compare_with_openvino(xml, example_input(xml), tmp_path)
    assert "heatmap:" in str(failure.value) and "first differing op: Sigmoid-1" in str(failure.value)
