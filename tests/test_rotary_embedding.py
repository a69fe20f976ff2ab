"""Rotary position embeddings written out by PyTorch's frontend (irrun/rotary_embedding.py): one
step with OpenVINO's values and the bits of the layers one by one; the layers themselves wherever
the inputs at run time are not the pattern."""
from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset13 as ops
import pytest

import irrun
from irrun.rotary_embedding import RotaryEmbedding
from irrun.watch import Collect
from layer_groups_check import check_both_ways, group_steps
from ovutil import assert_close, openvino_layer_outputs, run_openvino, save

pytestmark = pytest.mark.usefixtures("optimizing_by_default")
RNG = np.random.default_rng(7)
END = np.iinfo(np.int64).max


def _i64(values):
    return ops.constant(np.array(values, np.int64))


def _rotated(x, cos, sin, head: int, *, cos_first=False, stop=END, concat_read=False, negate=-1.0):
    """x * cos + rotate_half(x) * sin as the frontend writes Hugging Face's apply_rotary_pos_emb."""
    half = head // 2
    first = ops.slice(x, _i64([0]), _i64([half]), _i64([1]), _i64([-1]))
    second = ops.slice(x, _i64([half]), _i64([stop]), _i64([1]), _i64([-1]))
    rotated = ops.concat([ops.multiply(second, ops.constant(np.float32(negate))), first], -1)
    rotated.set_friendly_name("rotated")
    times_cos = ops.multiply(cos, x) if cos_first else ops.multiply(x, cos)
    out = ops.add(ops.multiply(rotated, sin), times_cos)
    return [out, ops.multiply(rotated, ops.constant(np.float32(3)))] if concat_read else [out]


def _model(x_shape, table_shape, sin_shape=None, **options):
    x = ops.parameter(x_shape, ov.Type.f32, name="x")
    cos = ops.parameter(table_shape, ov.Type.f32, name="cos")
    sin = ops.parameter(sin_shape or table_shape, ov.Type.f32, name="sin")
    outs = _rotated(x, cos, sin, x_shape[-1], **options)
    return ov.Model([ops.result(o) for o in outs], [x, cos, sin])


def _feeds(x_shape, table_shape, length: int, sin_shape=None) -> dict:
    fill = lambda shape: tuple(length if d == -1 else d for d in shape)   # noqa: E731
    angles = RNG.uniform(0, 6.3, fill(table_shape)).astype(np.float32)
    sin = np.sin(angles if sin_shape is None else RNG.uniform(0, 6.3, fill(sin_shape)).astype(np.float32))
    return {"x": RNG.standard_normal(fill(x_shape)).astype(np.float32), "cos": np.cos(angles), "sin": sin}


def _check(xml, feeds, *, reference=False) -> irrun.Model:
    return check_both_ways(xml, feeds, reference=reference)


def _fused(m: irrun.Model) -> list:
    return group_steps(m, RotaryEmbedding)


CASES = {
    "a decoding step": ([1, 8, -1, 64], [1, 1, -1, 64], {}),
    "prefill, cos first": ([1, 4, -1, 32], [1, 1, -1, 32], {"cos_first": True}),
    "a batch, tables per row": ([2, 4, -1, 16], [2, 1, -1, 16], {}),
    "tables of rank 3": ([1, 2, -1, 8], [1, -1, 8], {}),
    "the second half's stop the head's size": ([1, 4, -1, 16], [1, 1, -1, 16], {"stop": 16}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_rotary_embedding_is_one_step_with_openvinos_values(case, tmp_path):
    x_shape, table_shape, options = CASES[case]
    xml = save(_model(x_shape, table_shape, **options), tmp_path)
    for length in (1, 6):
        feeds = _feeds(x_shape, table_shape, length)
        feeds["x"][..., 0, :2] = [np.inf, np.nan]          # (special values go where the layers send them)
        m = _check(xml, feeds)
        (step,) = _fused(m)
        assert sorted(n.layer.op_type for n in step.members) == ["Add", "Concat", "Multiply", "Multiply",
                                                                 "Multiply", "Slice", "Slice"]


@pytest.mark.parametrize("cos_shape, sin_shape", [([1, 1, 3, 16], None), ([1, 1, 1, 16], [1, 1, 3, 16])],
                         ids=["both", "sin"])
def test_tables_that_widen_the_data_run_the_layers(cos_shape, sin_shape, tmp_path, monkeypatch):
    """cos and sin (or sin alone) of 3 positions against one position of x: the output widens to
    3, which the pattern's kernel declines; the layers give OpenVINO's reference values.  (The CPU
    plugin's own RoPE node answers [1, 4, 1, 16] there, x's shape: specs/errata/models.md.)"""
    declined = []
    fast = RotaryEmbedding.fast
    monkeypatch.setattr(RotaryEmbedding, "fast", lambda self, args: declined.append(fast(self, args)) or declined[-1])
    xml = save(_model([1, 4, -1, 16], cos_shape, sin_shape), tmp_path)
    feeds = _feeds([1, 4, -1, 16], cos_shape, 1, sin_shape)
    if sin_shape is None:
        assert run_openvino(xml, [feeds["x"], feeds["cos"], feeds["sin"]])[0].shape == (1, 4, 1, 16)
    _check(xml, feeds, reference=True)
    assert declined and all(d is None for d in declined)


def test_not_fused_where_the_second_half_is_not_negated(tmp_path):
    xml = save(_model([1, 4, -1, 16], [1, 1, -1, 16], negate=2.0), tmp_path)
    assert not _fused(_check(xml, _feeds([1, 4, -1, 16], [1, 1, -1, 16], 5)))


def test_not_fused_where_the_rotated_halves_are_read_elsewhere_and_watchers_see_them(tmp_path):
    xml = save(_model([1, 4, -1, 16], [1, 1, -1, 16], concat_read=True), tmp_path)
    assert not _fused(_check(xml, _feeds([1, 4, -1, 16], [1, 1, -1, 16], 5)))
    xml = save(_model([1, 4, -1, 16], [1, 1, -1, 16]), tmp_path / "watched.xml")
    feeds = _feeds([1, 4, -1, 16], [1, 1, -1, 16], 5)
    m = irrun.load(xml)
    picked = Collect(frozenset(l.id for l in m.layers.values() if l.name == "rotated"))
    m.infer(feeds, watch=[picked])
    assert_close(picked.values["rotated:0"], openvino_layer_outputs(xml, feeds)["rotated:0"], what="rotated")
