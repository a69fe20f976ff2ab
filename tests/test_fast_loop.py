"""The executor's loop and the same steps written out as code (irrun/fast_loop.py) against
OpenVINO: steps of several outputs (some unread), a dynamic batch, a skipped Result, a failing
layer; and when a plan switches from one to the other."""
from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset13 as ops
import pytest

import irrun
from irrun import fast_loop
from tests.ovutil import assert_close, run_openvino, save

RNG = np.random.default_rng(11)


def _model(batch: int) -> ov.Model:
    p = ops.parameter([batch, 12], ov.Type.f32)
    top = ops.topk(p, ops.constant(np.int64(4)), 1, "max", "value")     # indices never read
    parts = ops.split(p, ops.constant(np.int64(1)), 3)
    uneven = ops.variadic_split(p, ops.constant(np.int64(1)), ops.constant(np.array([5, 7], np.int64)))
    mixed = ops.add(ops.multiply(parts.output(0), parts.output(2)), top.output(0))
    return ov.Model([ops.result(ops.relu(mixed)), ops.result(parts.output(1)),
                     ops.result(ops.reduce_sum(uneven.output(1), ops.constant(np.int64(1)), True))], [p])


@pytest.mark.parametrize("written_out", [False, True])
@pytest.mark.parametrize("batch", [2, -1])
def test_both_ways_match_openvino(written_out, batch, tmp_path, monkeypatch):
    monkeypatch.setattr(fast_loop, "WRITE_OUT_AFTER", 0 if written_out else 1 << 62)
    xml = save(_model(batch), tmp_path)
    for optimize in (True, False):
        m = irrun.load(xml, optimize=optimize)
        for rows in (2, 2, 3) if batch == -1 else (2, 2):
            x = RNG.standard_normal((rows, 12)).astype(np.float32)
            got = list(m.infer([x]).values())
            for g, e in zip(got, run_openvino(xml, [x]), strict=True):
                assert_close(g, e)
                assert g.dtype == e.dtype
        assert (m._plan._written_out is not None) == written_out


def _matches_openvino(m, xml, x) -> None:
    for got, want in zip(m.infer([x]).values(), run_openvino(xml, [x]), strict=True):
        assert_close(got, want)


def test_written_out_after_its_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(fast_loop, "WRITE_OUT_AFTER", 3)
    xml = save(_model(2), tmp_path)
    m = irrun.load(xml)
    x = RNG.standard_normal((2, 12)).astype(np.float32)
    for _ in range(3):
        assert m._plan._written_out is None
        _matches_openvino(m, xml, x)
    assert m._plan._written_out is None
    _matches_openvino(m, xml, x)
    assert m._plan._written_out is not None
    _matches_openvino(m, xml, x)


@pytest.mark.parametrize("written_out", [False, True])
def test_the_failing_layer_is_named(written_out, tmp_path, monkeypatch):
    """A skipped Result before the failing layer: the program's entry is no longer the step's index."""
    from irrun.registry import implementation
    monkeypatch.setattr(fast_loop, "WRITE_OUT_AFTER", 0 if written_out else 1 << 62)
    p = ops.parameter([1, 4], ov.Type.f32)
    c = ops.constant(RNG.standard_normal((1, 4)).astype(np.float32))
    xml = save(ov.Model([ops.result(ops.relu(p)), ops.result(ops.softmax(ops.multiply(p, c), 1))], [p]), tmp_path)
    plan = irrun.load(xml, optimize=False)._plan
    kinds = [s.node.layer.op_type for s in plan.steps]
    assert kinds.index("Result") < kinds.index("Softmax") and plan.steps[kinds.index("Result")] not in plan._program_steps
    monkeypatch.setattr(implementation("Softmax", 8), "run", lambda self, x: 1 / 0)
    m = irrun.load(xml, optimize=False)
    with pytest.raises(irrun.ModelError, match=r"Softmax.*ZeroDivisionError"):
        m.infer([np.ones((1, 4), np.float32)])
    assert (m._plan._written_out is not None) == written_out


def test_long_plans_keep_the_loop(tmp_path, monkeypatch):
    """Writing out a plan of more than WRITE_OUT_MOST_STEPS steps would stall one run too long."""
    monkeypatch.setattr(fast_loop, "WRITE_OUT_AFTER", 0)
    xml = save(_model(2), tmp_path)
    m = irrun.load(xml, optimize=False)
    monkeypatch.setattr(fast_loop, "WRITE_OUT_MOST_STEPS", len(m._plan._program) - 1)
    x = RNG.standard_normal((2, 12)).astype(np.float32)
    _matches_openvino(m, xml, x)
    _matches_openvino(m, xml, x)
    assert m._plan._written_out is None
    monkeypatch.setattr(fast_loop, "WRITE_OUT_MOST_STEPS", len(m._plan._program))
    _matches_openvino(m, xml, x)
    assert m._plan._written_out is not None
