"""RMS norms written out by PyTorch's frontend (irrun/rms_norm.py): one step with OpenVINO's values
and the bits of the layers one by one; the layers themselves wherever the inputs at run time are
not the pattern."""
from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset13 as ops
import pytest

import irrun
from irrun.rms_norm import RmsNorm
from irrun.watch import Collect
from layer_groups_check import check_both_ways, group_steps
from ovutil import assert_close, openvino_layer_outputs, run_openvino, save

pytestmark = pytest.mark.usefixtures("optimizing_by_default")
RNG = np.random.default_rng(3)


def _f32(value):
    return ops.constant(np.asarray(value, np.float32))


def _model(shape, *, weight="after", inverse_first=False, weight_input=False, eps_shape=(1, 1, 1),
           mean_read=False, weight_shape=None, exponent=2.0):
    """x * rsqrt(mean(x^2) + eps) * weight as the frontend writes a Llama's RMSNorm, then a residual
    Add; `weight`: "after" (Multiply(y, w)), "before" (Multiply(w, y)) or None."""
    x = ops.parameter(shape, ov.Type.f32, name="x")
    params = [x]
    square = ops.power(x, _f32(np.full((1,) * len(shape), exponent)))
    mean = ops.reduce_mean(square, ops.constant(np.array([-1], np.int64)), True)
    mean.set_friendly_name("mean")
    inverse = ops.divide(_f32(np.ones((1,) * len(shape))), ops.sqrt(ops.add(mean, _f32(np.full(eps_shape, 1e-6)))))
    y = ops.multiply(inverse, x) if inverse_first else ops.multiply(x, inverse)
    if weight is not None:
        if weight_input:
            w = ops.parameter(weight_shape or [shape[-1]], ov.Type.f32, name="w")
            params.append(w)
        else:
            w = _f32(RNG.uniform(0.5, 1.5, weight_shape or (1,) * (len(shape) - 1) + (shape[-1],)))
        y = ops.multiply(y, w) if weight == "after" else ops.multiply(w, y)
    outs = [ops.add(y, x)] + ([ops.multiply(mean, _f32(2))] if mean_read else [])
    return ov.Model([ops.result(o) for o in outs], params)


def _feeds(m: irrun.Model, rows: int, width: int, weight_shape=None) -> dict:
    feeds = {"x": (RNG.standard_normal((1, rows, width)) * 3).astype(np.float32)}
    if any(i.name == "w" for i in m.inputs):
        feeds["w"] = RNG.uniform(0.5, 1.5, weight_shape or width).astype(np.float32)
    return feeds


def _check(xml, rows: int, width: int, *, reference=False, weight_shape=None, model=None) -> irrun.Model:
    feeds = _feeds(model or irrun.load(xml), rows, width, weight_shape)
    feeds["x"][0, 0, :3] = [np.inf, np.nan, 0][:width]    # (special values go where the layers send them)
    return check_both_ways(xml, feeds, reference=reference, model=model)


def _fused(m: irrun.Model) -> list:
    return group_steps(m, RmsNorm)


@pytest.mark.parametrize("options", [{}, {"weight": "before"}, {"inverse_first": True}, {"weight": None},
                                     {"weight_input": True}], ids=str)
@pytest.mark.parametrize("rows, width", [(1, 64), (7, 96), (512, 2048)], ids=["a step", "prefill", "large"])
def test_an_rms_norm_is_one_step_with_openvinos_values(options, rows, width, tmp_path):
    xml = save(_model([1, -1, width], **options), tmp_path)
    m = _check(xml, rows, width)
    (step,) = _fused(m)
    assert [n.layer.op_type for n in step.members][:6] == ["Power", "ReduceMean", "Add", "Sqrt", "Divide", "Multiply"]


@pytest.mark.parametrize("shape", [[1, 4, 32], [1, 512, 2048]], ids=["small", "large"])
def test_a_chain_after_a_norm_runs_in_its_output_and_names_every_layer(shape, tmp_path):
    """Static shapes: the residual Add runs in the norm's output, a chain the norm's step heads;
    the chain's step names all eight layers (what profiles and watchers go by)."""
    m = _check(save(_model(shape), tmp_path), shape[1], shape[2])
    (step,) = _fused(m)
    (chain,) = [s for s in m._plan.steps if s.members and s.members[-1].layer.op_type == "Add"]
    assert chain.members == step.members + (chain.members[-1],) and len(chain.members) == 8


def test_an_eps_that_widens_the_statistics_runs_the_layers(tmp_path, monkeypatch):
    """eps of rank 4 on rank-3 data widens the output (as the layers broadcast it): the pattern's
    kernel declines, the layers give OpenVINO's reference values (the CPU plugin's own RMS node
    keeps x's shape, [1, 3, 16]: specs/errata/models.md); so does a row of one element."""
    declined = []
    fast = RmsNorm.fast
    monkeypatch.setattr(RmsNorm, "fast", lambda self, args: declined.append(fast(self, args)) or declined[-1])
    widening = save(_model([1, -1, 16], eps_shape=(1, 1, 1, 1)), tmp_path / "eps.xml")
    assert run_openvino(widening, [np.ones((1, 3, 16), np.float32)])[0].shape == (1, 3, 16)
    _check(widening, 3, 16, reference=True)
    _check(save(_model([1, -1, 1]), tmp_path / "one.xml"), 3, 1)
    assert declined and all(d is None for d in declined)


def test_a_weight_per_element_of_large_data(tmp_path):
    """A weight of the data's own shape (not one row): the large data's multiplies whole."""
    xml = save(_model([1, 512, 2048], weight_shape=(1, 512, 2048)), tmp_path)
    assert _fused(_check(xml, 512, 2048))


def test_a_weight_input_that_widens_the_data_at_the_second_call_runs_the_layers(tmp_path):
    """The weight an input of changing shape: a pattern passed for one call is not taken for
    granted at the next, whose [2, 1, 16] weight widens the output to two batches."""
    xml = save(_model([1, -1, 16], weight_input=True, weight_shape=[-1, -1, -1]), tmp_path)
    m = irrun.load(xml)
    _check(xml, 3, 16, weight_shape=(1, 1, 16), model=m)
    _check(xml, 3, 16, weight_shape=(2, 1, 16), model=m)


def test_not_fused_where_the_mean_is_read_elsewhere_or_not_of_squares_and_watchers_see_it(tmp_path):
    xml = save(_model([1, -1, 32], mean_read=True), tmp_path)
    assert not _fused(_check(xml, 4, 32))
    xml = save(_model([1, -1, 32], exponent=3.0), tmp_path / "cubes.xml")
    assert not _fused(_check(xml, 4, 32))
    xml = save(_model([1, -1, 32]), tmp_path / "watched.xml")
    m = irrun.load(xml)
    feeds = _feeds(m, 4, 32)
    picked = Collect(frozenset(l.id for l in m.layers.values() if l.name == "mean"))
    m.infer(feeds, watch=[picked])
    assert_close(picked.values["mean:0"], openvino_layer_outputs(xml, feeds)["mean:0"], what="mean")
