"""One-row products of the same data joined into one GEMV at load (irrun/sibling_products.py): an
LLM decoding step's q, k and v projections give OpenVINO's values, each layer's own output, with
one product per inference; a layer run apart computes its own; watchers see every layer."""
from __future__ import annotations

import mmap

import numpy as np
import openvino as ov
import openvino.opset13 as ops
import pytest

import irrun
from irrun import huge_pages, sibling_products, split_steps
from ovutil import assert_blas_close, assert_close, openvino_layer_outputs, run_openvino, save

RNG = np.random.default_rng(23)


@pytest.fixture(autouse=True)
def _optimizing(monkeypatch):
    monkeypatch.delenv("IRRUN_OPTIMIZE", raising=False)


def _named(node, name):
    node.set_friendly_name(name)
    return node


def _weight(shape, scale=0.1):
    return ops.constant((RNG.standard_normal(shape) * scale).astype(np.float32))


def _attention_inputs(transpose_b: bool, hidden=64, heads=4, rows=(1, 1), compressed=False):
    """x [*rows, hidden] through q, k and v projections (weights [out, in] with transpose_b, else
    [in, out]; q's with a bias, v's an int8 weight decompressed by Convert -> Subtract ->
    Multiply where `compressed`), each reshaped into heads; and an unrelated product of another
    tensor."""
    x = ops.parameter([*rows, hidden], ov.Type.f32, name="x")

    def weight(name):
        w = (RNG.standard_normal((hidden, hidden)) * 0.1).astype(np.float32)
        if name == "v" and compressed:
            codes = RNG.integers(-8, 8, (hidden, hidden)).astype(np.int8)
            scale = (RNG.random((hidden, 1)) * 0.02).astype(np.float32)
            w8 = ops.multiply(ops.subtract(ops.convert(ops.constant(codes), ov.Type.f32),
                                           ops.constant(np.float32(1))), ops.constant(scale))
            return _named(w8, "v_weight") if transpose_b else _named(ops.transpose(w8, ops.constant([1, 0])), "v_weight")
        return ops.constant(w if transpose_b else w.T.copy())

    outputs = []
    for name in ("q", "k", "v"):
        y = _named(ops.matmul(x, weight(name), False, transpose_b), name)
        if name == "q":
            y = ops.add(y, _weight((hidden,)))
        split = ops.reshape(y, ops.constant(np.array([*rows, heads, hidden // heads], np.int64)), False)
        outputs.append(ops.result(_named(split, name + "_heads")))
    other = ops.parameter([*rows, hidden], ov.Type.f32, name="other")
    outputs.append(ops.result(_named(ops.matmul(other, weight("o"), False, transpose_b), "o")))
    return ov.Model(outputs, [x, other])


def _feeds(rows=(1, 1), hidden=64):
    return {"x": RNG.standard_normal((*rows, hidden)).astype(np.float32),
            "other": RNG.standard_normal((*rows, hidden)).astype(np.float32)}


def _check(xml, feeds, model=None):
    model = model or irrun.load(xml)
    expected = run_openvino(xml, [feeds[i.name] for i in model.inputs])
    for (name, got), want in zip(model.infer(feeds).items(), expected):
        assert_close(got, want, what=name)
        assert got.dtype == want.dtype and got.shape == want.shape, name
    return model


def _counting_dots(monkeypatch) -> list:
    calls, dot = [], np.dot
    monkeypatch.setattr(np, "dot", lambda *a: calls.append(tuple(np.shape(v) for v in a)) or dot(*a))
    return calls


@pytest.mark.parametrize("compressed", [False, True], ids=["f32", "int8_v"])
@pytest.mark.parametrize("transpose_b", [True, False], ids=["out_in", "in_out"])
def test_q_k_and_v_of_one_row_run_as_one_product(transpose_b, compressed, monkeypatch, tmp_path):
    xml = save(_attention_inputs(transpose_b, compressed=compressed), tmp_path / "m.xml")
    calls = _counting_dots(monkeypatch)         # (before the kernels are bound)
    model = irrun.load(xml)
    plan = model._plan
    joined = {plan.analysis.nodes[lid].layer.name: index for lid, (_, index) in plan.joined_weights.items()}
    assert set(joined) == {"q", "k", "v"} and sorted(joined.values()) == [0, 1, 2]
    weight, = {id(j): plan.constants[j.slot] for j, _ in plan.joined_weights.values()}.values()
    assert weight.shape == (64, 192) and weight.flags.c_contiguous         # [in, out] rows: widening
    for step in plan.layer_steps:       # each layer's own weight: a view of the joined one, as it reads it
        if step.node.layer.name in joined:
            own = plan.constants[step.inputs[1]]
            assert np.shares_memory(own, weight) and own.shape == (64, 64)
    calls.clear()
    for _ in range(2):
        feeds = _feeds()
        _check(xml, feeds, model)
    assert calls.count(((64,), (64, 192))) == 2 and len(calls) == 4       # and o's own, twice
    off = irrun.load(xml, optimize=False).infer(feeds)
    for name, value in model.infer(feeds).items():
        assert_blas_close(value, off[name], what=name)


def test_data_changed_in_place_between_inferences_is_read_anew(tmp_path):
    """The joined product is let go by the last layer that takes it: a caller's input array changed
    in place (the same object) gives the new values."""
    xml = save(_attention_inputs(True, rows=(1,)), tmp_path / "m.xml")
    model = irrun.load(xml)
    feeds = _feeds(rows=(1,))
    _check(xml, feeds, model)
    feeds["x"][...] = RNG.standard_normal(feeds["x"].shape)
    _check(xml, feeds, model)


def test_a_layer_run_apart_computes_its_own(tmp_path):
    """The kernels of one variant: a member called with other data, or twice with the same, computes
    the joined product itself; q's and v's columns are OpenVINO's q and v of that data either way."""
    xml = save(_attention_inputs(True), tmp_path / "m.xml")
    plan = irrun.load(xml)._plan
    taken, nodes = sibling_products._Taken(), plan.analysis.nodes
    kernels = {nodes[lid].layer.name: sibling_products.SiblingProduct(nodes[lid].op, plan, joined, index, taken).bind(None)
               for lid, (joined, index) in plan.joined_weights.items()}
    feeds = {name: _feeds() for name in ("x", "y")}
    x, y = feeds["x"]["x"], feeds["y"]["x"]
    expected = {name: openvino_layer_outputs(xml, f) for name, f in feeds.items()}
    got = [("x", "q", kernels["q"](x, None)),
           ("y", "v", kernels["v"](y, None)),        # other data: its own
           ("x", "v", kernels["v"](x, None)),        # x's product was replaced by y's: computed again
           ("x", "v", kernels["v"](x, None))]        # taken already: computed again
    for data, layer, value in got:
        assert_close(value, expected[data][layer + ":0"], what=f"{layer} of {data}")


def test_watchers_see_every_layer(tmp_path):
    """Every layer's output (the folded int8 weight's too) as OpenVINO's layers give them, and a
    profile's time for each product."""
    xml = save(_attention_inputs(True, compressed=True), tmp_path / "m.xml")
    model = irrun.load(xml)
    feeds = _feeds()
    got = model.infer(feeds, intermediates="all")
    reference = openvino_layer_outputs(xml, feeds, constants=True)
    for name in ("q:0", "k:0", "v:0", "v_weight:0", "q_heads:0"):
        assert_close(got[name], reference[name], what=name)
    profile = []
    model.infer(feeds, profile=profile)
    assert {"q", "k", "v"} <= {layer.name for layer, _ in profile}


def test_joined_weight_moves_to_huge_pages_with_its_members_viewing_it(monkeypatch, tmp_path):
    monkeypatch.setattr(huge_pages, "_available", lambda: True)
    monkeypatch.setattr(huge_pages, "SMALLEST_WEIGHT", 1 << 10)
    monkeypatch.setattr(huge_pages, "SMALLEST_TOTAL", 1 << 12)
    xml = save(_attention_inputs(False), tmp_path / "m.xml")
    model = _check(xml, _feeds())
    plan = model._plan
    joined = next(iter(plan.joined_weights.values()))[0]
    weight = plan.constants[joined.slot]
    base = weight
    while isinstance(base, np.ndarray):
        base = base.base
    assert isinstance(base.obj if isinstance(base, memoryview) else base, mmap.mmap)
    assert all(np.shares_memory(plan.constants[s], weight) for s in joined.weight_slots)


def test_products_of_many_rows_or_other_data_stay_apart(tmp_path):
    """Two rows of data, or products of different data (the o projection): no joined weight."""
    xml = save(_attention_inputs(True, rows=(2, 1)), tmp_path / "m.xml")
    model = _check(xml, _feeds(rows=(2, 1)))
    assert model._plan.joined_weights == {}
    assert irrun.load(xml, optimize=False)._plan.__dict__.get("joined_weights") is None


def test_member_steps_are_never_split_for_two_processes(monkeypatch, tmp_path):
    monkeypatch.setattr(split_steps, "MIN_SPLIT_MACS", 1)
    xml = save(_attention_inputs(True, hidden=256), tmp_path / "m.xml")
    plan = irrun.load(xml)._plan
    kinds = {step.node.layer.name: split_steps._split_step(plan, k, step) for k, step in enumerate(plan.steps)}
    assert kinds["o"] is not None
    assert all(kinds[s.node.layer.name] is None for s in plan.steps
               if isinstance(s.op, sibling_products.SiblingProduct)
               or isinstance(getattr(getattr(s.op, "head_step", None), "op", None), sibling_products.SiblingProduct))
