"""Profiling: `irrun infer --profile --repeat N --trace FILE` and `irrun.profile`."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import irrun
from irrun.cli import cli
from ovutil import _CORE

MODELS = Path(__file__).resolve().parent / "models"
BERT, BERT_IN = MODELS / "bert.f32.xml", MODELS / "bert.npz"


def run_cli(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_profile_table():
    r = run_cli("infer", BERT, "-i", BERT_IN, "--profile", "--repeat", "4")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0].startswith("profile: ") and "median of 4 runs after a warm-up" in lines[0]
    assert lines[1].split() == ["ms", "%", "count", "MACs", "GFLOP/s", "layer", "type"]
    assert " MACs (" in lines[0] and "GFLOP/s in the layers)" in lines[0]
    rows = [l.split() for l in lines[2:lines.index("  slowest layers:")]]
    assert {"MatMul-1", "MVN-6", "Softmax-8"} <= {r[5] for r in rows}
    assert [float(r[0]) for r in rows] == sorted((float(r[0]) for r in rows), reverse=True)
    matmul = next(r for r in rows if r[5] == "MatMul-1")
    assert matmul[3] != "-" and float(matmul[4]) > 0            # MACs and GFLOP/s of the contractions
    assert next(r for r in rows if r[5] == "Softmax-8")[3:5] == ["0", "-"]
    assert sum(float(r[1]) for r in rows) == pytest.approx(100, abs=0.5)
    # every layer run, those run inside a fused step too (irrun/optimize.py); the Results are no layers
    steps = len(irrun.load(BERT)._plan.layer_steps) - len(irrun.load(BERT).outputs)
    assert sum(int(r[2]) for r in rows) == steps


def test_trace_macs_of_convolutions_from_openvinos_shapes(tmp_path):
    """MACs in the trace: output elements x input channels x kernel taps, at OpenVINO's shapes."""
    xml = MODELS / "resnet.f32.xml"
    r = run_cli("infer", xml, "-i", MODELS / "resnet.npz", "--trace", tmp_path / "t.json", "--repeat", "3")
    assert r.exit_code == 0, r.output
    events = {e["name"]: e for e in json.loads((tmp_path / "t.json").read_text())["traceEvents"] if e["ph"] == "X"}
    convolutions = [op for op in _CORE.read_model(str(xml)).get_ordered_ops() if op.get_type_name() == "Convolution"]
    assert len(convolutions) == 9
    for op in convolutions:
        out, weights = list(op.output(0).get_shape()), list(op.input(1).get_shape())
        assert events[op.get_friendly_name()]["args"]["MACs"] == int(np.prod(out)) * int(np.prod(weights[1:]))
    assert events["__module.fc/aten::linear/MatMul"]["args"]["MACs"] == 64 * 10


def test_trace_is_chrome_trace_events(tmp_path):
    """Every layer run, in order, as a complete event; output shapes as OpenVINO infers them."""
    r = run_cli("infer", BERT, "-i", BERT_IN, "--trace", tmp_path / "trace.json", "--repeat", "3")
    assert r.exit_code == 0, r.output
    assert "profile:" not in r.output                 # the table only with --profile
    trace = json.loads((tmp_path / "trace.json").read_text())
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    m = irrun.load(BERT)
    run = [n.layer for s in m._plan.steps for n in (s.members or (s.node,)) if n.layer.op_type != "Result"]
    assert [e["name"] for e in events] == [l.name for l in run]
    assert [e["cat"] for e in events] == [l.label for l in run]
    for e in events:
        assert {"ts", "dur", "pid", "tid", "args"} <= set(e) and e["dur"] >= 0
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
    assert all(b["ts"] >= a["ts"] + a["dur"] - 1e-3 for a, b in zip(events, events[1:]))   # one after another
    ov_shapes = {op.get_friendly_name(): [list(o.get_shape()) for o in op.outputs()]
                 for op in _CORE.read_model(str(BERT)).get_ordered_ops()}
    for e in events:
        assert e["args"]["output_shapes"] == ov_shapes[e["name"]][:len(e["args"]["output_shapes"])], e["name"]
    assert {"process_name", "thread_name"} <= {e["name"] for e in trace["traceEvents"] if e["ph"] == "M"}


def test_python_api():
    m = irrun.load(BERT)
    feeds = dict(np.load(BERT_IN))
    p = irrun.profile(m, feeds, repeat=3)
    assert p.repeat == 3 and len(p.wall) == 3
    assert len(p.layers) == len([s for s in m._plan.layer_steps if s.node.layer.op_type != "Result"])
    assert sum(row[1] for row in p.by_type()) == pytest.approx(p.total)
    assert 0 < p.total and 0 < p.median_wall
    timings = []
    m.infer(feeds, profile=timings)        # the one-run form
    assert len(timings) == len(p.layers) and all(t >= 0 for _, t in timings)
    default = irrun.profile(irrun.load(MODELS / "resnet.f32.xml"), dict(np.load(MODELS / "resnet.npz")))
    assert 3 <= default.repeat <= 100


def test_plain_runs_come_first_then_the_timed_ones(monkeypatch):
    """`repeat` plain runs, then `repeat` watched ones, not alternating: a model that runs in two
    processes runs its watched runs in one, and alternating would have each plain run wait for the
    worker to wake (or each watched run have it spinning beside it)."""
    m = irrun.load(BERT)
    calls, infer = [], m.infer
    monkeypatch.setattr(m, "infer", lambda feeds, **kw: calls.append(bool(kw.get("watch"))) or infer(feeds, **kw))
    irrun.profile(m, dict(np.load(BERT_IN)), repeat=3)
    assert calls == [False] * 4 + [True] * 3          # (a warm-up first)


@pytest.mark.parametrize("args, message", [
    (["--repeat", "3"], "--repeat goes with --profile or --trace"),
    (["--profile", "--repeat", "0"], "repeat must be at least 1"),
])
def test_usage_errors(args, message):
    r = CliRunner().invoke(cli, ["infer", str(BERT), "-i", str(BERT_IN), *args])
    assert r.exit_code == 2 and message in r.output and r.output.startswith("error: "), r.output
