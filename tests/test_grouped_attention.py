"""Grouped-query attention run over its unexpanded keys and values (irrun/grouped_attention.py):
fused where PyTorch's export expands them by head group, with OpenVINO's values, and the layers one
by one wherever the inputs at run time are not that pattern."""
from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset13 as ops
import pytest

import irrun
from irrun.grouped_attention import GroupedAttention
from irrun.watch import Collect, Timings
from layer_groups_check import check_both_ways, group_steps
from ovutil import assert_close, openvino_layer_outputs, save

pytestmark = pytest.mark.usefixtures("optimizing_by_default")
RNG = np.random.default_rng(5)


def _i64(values):
    return ops.constant(np.array(values, np.int64))


def _expanded(kv, groups: int, computed: bool, merge_kv: int | None = None):
    """kv [B, KV, S, E] repeated for its `groups` query heads as optimum-intel's exports do it:
    Unsqueeze(2) -> Broadcast to [B, KV, G, S, E] -> Reshape to [B, KV * G, S, E], the target and
    shape computed from kv's ShapeOf (`computed`) or constants with special_zero's 0 and a -1.
    `merge_kv`: broadcast a kv of one head to this many (not the pattern: the layers run one by one)."""
    shape = ops.shape_of(kv)
    gather = lambda idx: ops.gather(shape, _i64(idx), _i64(0))   # noqa: E731
    heads = merge_kv or 0
    if computed or merge_kv:
        kv_dim = _i64([merge_kv]) if merge_kv else gather([1])
        target = ops.concat([gather([0]), kv_dim, _i64([groups]), gather([2, 3])], 0)
        merged = ops.multiply(kv_dim, _i64([groups]))
        pattern = ops.concat([gather([0]), merged, gather([2, 3])], 0)
        special_zero = False
    else:
        heads = kv.get_partial_shape()[1].get_length()
        target = ops.concat([gather([0, 1]), _i64([groups]), gather([2, 3])], 0)
        pattern = _i64([0, heads * groups, -1, kv.get_partial_shape()[3].get_length()])
        special_zero = True
    wide = ops.broadcast(ops.unsqueeze(kv, _i64(2)), target)
    return ops.reshape(wide, pattern, special_zero)


def _model(q_shape, kv_shape, *, causal=False, mask=None, scale=None, computed=True, merge_kv=None,
           expanded_read=False):
    """Attention of q over keys and values of fewer heads; inputs q, k, v (and mask)."""
    groups = q_shape[1] // (merge_kv or kv_shape[1])
    q = ops.parameter(q_shape, ov.Type.f32, name="q")
    k = ops.parameter(kv_shape, ov.Type.f32, name="k")
    v = ops.parameter(kv_shape, ov.Type.f32, name="v")
    params = [q, k, v]
    keys, values = _expanded(k, groups, computed, merge_kv), _expanded(v, groups, computed, merge_kv)
    keys.set_friendly_name("keys")
    extra = []
    if mask is not None:
        m = ops.parameter(mask[0], ov.Type(mask[1]), name="mask")
        params.append(m)
        extra.append(m)
    if scale is not None:
        if not extra:
            extra.append(ops.constant(np.float32(0)))
        extra.append(ops.constant(np.float32(scale)))
    out = ops.scaled_dot_product_attention(q, keys, values, *extra, causal=causal)
    results = [ops.result(out)]
    if expanded_read:
        results.append(ops.result(ops.multiply(keys, ops.constant(np.float32(2)))))
    return ov.Model(results, params)


def _feeds(q, kv, s, mask=None):
    feeds = {"q": RNG.standard_normal(q).astype(np.float32),
             "k": RNG.standard_normal(kv[:2] + (s, kv[3])).astype(np.float32),
             "v": RNG.standard_normal(kv[:2] + (s, kv[3])).astype(np.float32)}
    if mask is not None:
        shape, dtype = mask
        shape = tuple(s if d == -1 else d for d in shape)
        noise = RNG.standard_normal(shape).astype(np.float32)
        feeds["mask"] = RNG.random(shape) > 0.3 if dtype == np.bool_ else \
            np.where(RNG.random(shape) > 0.3, 0, -np.inf).astype(np.float32) + noise
    return feeds


def _grouped(m: irrun.Model) -> list:
    return group_steps(m, GroupedAttention)


def _check(xml, feeds: dict) -> irrun.Model:
    """One grouped step; OpenVINO's values; optimize off within BLAS's rounding (the products are
    the expanded attention's, in batches of other shapes)."""
    return check_both_ways(xml, feeds, same_bits=False)


CASES = {
    # name: q shape, kv shape (S dynamic), model options, mask (shape with -1 for S, dtype) or None
    "a decoding step": ((1, 8, 1, 16), (1, 2, -1, 16), {}, ((1, 1, 1, -1), np.float32)),
    "a step, constants with special_zero": ((1, 8, 1, 16), (1, 2, -1, 16), {"computed": False}, None),
    "a step, its scale given": ((1, 8, 1, 16), (1, 2, -1, 16), {"scale": 0.37}, ((1, 1, 1, -1), np.float32)),
    "multi-query (one kv head)": ((1, 4, 1, 8), (1, 1, -1, 8), {}, None),
    "causal prefill": ((1, 8, 5, 16), (1, 2, -1, 16), {"causal": True}, None),
    "a bool mask per head": ((2, 6, 3, 8), (2, 3, -1, 8), {}, ((2, 6, 3, -1), np.bool_)),
    "a mask per row": ((1, 8, 4, 16), (1, 4, -1, 16), {}, ((1, 1, 4, -1), np.float32)),
    "a mask of rank 2": ((1, 8, 4, 16), (1, 4, -1, 16), {}, ((4, -1), np.float32)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_grouped_query_attention_runs_as_one_step_with_openvinos_values(case, tmp_path):
    q, kv, options, mask = CASES[case]
    xml = save(_model(q, kv, mask=mask, **options), tmp_path)
    for s in (7, 12):           # (a cache that grows: shapes new at each call)
        m = _check(xml, _feeds(q, kv, s, mask))
        (step,) = _grouped(m)
        assert [n.layer.op_type for n in step.members] == ["Unsqueeze", "Broadcast", "Reshape"] * 2 + [
            "ScaledDotProductAttention"]


def test_the_layers_run_one_by_one_where_the_inputs_are_not_the_pattern(tmp_path, monkeypatch):
    """A mask whose rows widen a one-row query's output, a kv head broadcast to two before the
    groups: the fused step's check declines and the layers give OpenVINO's values."""
    declined = []
    attend = GroupedAttention.fast
    monkeypatch.setattr(GroupedAttention, "fast", lambda self, args: declined.append(attend(self, args)) or
                        declined[-1])
    xml = save(_model((1, 8, 1, 16), (1, 2, -1, 16), mask=((1, 1, 3, -1), np.float32)), tmp_path / "rows.xml")
    _check(xml, _feeds((1, 8, 1, 16), (1, 2, -1, 16), 9, ((1, 1, 3, -1), np.float32)))
    xml = save(_model((1, 8, 1, 16), (1, 1, -1, 16), merge_kv=2), tmp_path / "heads.xml")
    _check(xml, _feeds((1, 8, 1, 16), (1, 1, -1, 16), 9))
    assert declined and all(d is None for d in declined)


def test_not_fused_where_the_expanded_keys_are_read_elsewhere(tmp_path):
    xml = save(_model((1, 8, 1, 16), (1, 2, -1, 16), expanded_read=True), tmp_path)
    m = _check(xml, _feeds((1, 8, 1, 16), (1, 2, -1, 16), 6))
    assert not _grouped(m)


def test_watchers_see_the_expanded_keys_and_the_profile_the_fused_step(tmp_path):
    xml = save(_model((1, 8, 1, 16), (1, 2, -1, 16)), tmp_path)
    feeds = _feeds((1, 8, 1, 16), (1, 2, -1, 16), 6)
    m = irrun.load(xml)
    expected = openvino_layer_outputs(xml, feeds)
    picked = Collect(frozenset(l.id for l in m.layers.values() if l.name == "keys"))
    m.infer(feeds, watch=[picked])
    assert_close(picked.values["keys:0"], expected["keys:0"], what="keys")
    timings = Timings()
    m.infer(feeds, watch=[timings])
    (fused,) = [t for t in timings.steps if t.fused]      # the time on the attention, not its expansions
    assert fused.node.layer.op_type == "ScaledDotProductAttention" and len(fused.fused) == 6 and fused.seconds > 0
    others = [t for t in timings.steps if t.fused_into]
    assert len(others) == 6 and all(t.fused_into == fused.node.layer.name and t.seconds == 0 for t in others)


@pytest.mark.parametrize("pattern, special_zero, merges", [
    ([1, 8, 9, 16], False, True), ([0, 8, -1, 16], True, True), ([-1, 8, 9, 16], False, True),
    ([1, 8, 9, -1], False, True), ([0, 8, 9, 16], False, False), ([1, -1, -1, 16], False, False),
    ([1, 2, 36, 16], False, False), ([1, 8, 144], False, False), ([0, 0, 9, 16], True, False),
], ids=str)
def test_which_reshapes_merge_the_kv_heads_and_groups(pattern, special_zero, merges):
    """[B, KV, G, S, E] = [1, 2, 4, 9, 16] to [1, 8, 9, 16]: spelled out, with special_zero's copies
    (a 0 copies the 5-D input's dim: KV, not KV * G, at index 1) and a -1."""
    from irrun.grouped_attention import _merged_heads
    assert _merged_heads(pattern, (1, 2, 4, 9, 16), special_zero) is merges
