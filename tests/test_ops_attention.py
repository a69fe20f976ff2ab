"""ScaledDotProductAttention-13 and Einsum-7 against OpenVINO's CPU plugin.

OpenVINO has no reference `evaluate` for this op; the CPU plugin (its own
kernel for rank 4, the decomposition otherwise) is the oracle.  Covered: rank
3/4/5, causal true/false (L == S, L < S, L > S), boolean and float masks
(full, broadcast, scalar, rank above the query's), explicit scale (scalar or
[1]), f16, dynamic shapes, broadcast batch dims, fully masked rows (NaN), and the
shape function against OpenVINO's partial-shape inference.
"""
from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset7 as ops7
import openvino.opset13 as ops
import pytest
from irxml import hand_ir
from ovutil import assert_close, compare, run_openvino, save

import irrun
from irrun.errors import ShapeError
from irrun.etypes import from_dtype
from irrun.ops.attention import sdpa_shape
from irrun.ops import attention as sdpa_module
from irrun.ops.matrix import einsum_shape
from irrun.registry import TensorType, implementation
from irrun.shapes import parse_partial_shape
from irrun.spec import all_specs, parse_attrs

RNG = np.random.default_rng(13)


def sample(shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def mask_sample(shape, kind):
    if kind == "bool":
        mask = np.asarray(RNG.random(shape) > 0.4)
        if mask.ndim:
            mask[..., 0] = True    # keep one key per row: no all-masked (NaN) rows here
        else:
            mask = np.asarray(True)
        return mask
    return (RNG.standard_normal(shape) * 2).astype(np.float32)


def sdpa_case(q_shape, k_shape, v_shape, mask=None, scale=None, causal=False, dtype=np.float32, shown=None):
    """(model, feeds); mask/scale are arrays fed through Parameters; shown overrides the Parameter shapes."""
    arrays = [sample(q_shape, dtype), sample(k_shape, dtype), sample(v_shape, dtype)]
    if mask is not None:
        arrays.append(mask.astype(dtype) if mask.dtype != np.bool_ else mask)
    elif scale is not None:
        arrays.append(np.zeros((), dtype))      # an explicit scale needs a mask before it
    if scale is not None:
        arrays.append(np.asarray(scale, dtype))
    shapes = shown or [a.shape for a in arrays]
    params = [ops.parameter(ov.PartialShape(list(s)), a.dtype) for s, a in zip(shapes, arrays)]
    model = ov.Model([ops.scaled_dot_product_attention(*params, causal=causal)], params)
    return model, arrays


@pytest.mark.parametrize("rank", [3, 4])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("lengths", [(4, 4), (3, 6), (6, 3)])
def test_plain_and_causal(rank, causal, lengths, tmp_path):
    """causal masks key j > query i from the top-left corner, also when L != S."""
    lead = [2, 3][-(rank - 2):]
    l_len, s_len = lengths
    compare(*sdpa_case(lead + [l_len, 5], lead + [s_len, 5], lead + [s_len, 7], causal=causal), tmp_path)


@pytest.mark.parametrize("q_shape, k_len", [([1, 4, 1024, 16], 1024), ([4, 1100, 16], 1024), ([2, 2, 1024, 16], 1100)],
                         ids=["prefill", "rank3-longer-queries", "longer-keys"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_causal_prefill_by_row_blocks(q_shape, k_len, dtype, tmp_path):
    """Causal attention over a thousand tokens (an LLM's prefill) runs a block of query rows at a
    time, each against only the keys it may see (ops/attention.py `_by_row_blocks`); a NaN in the
    values keeps the whole matrix, whose zero weights spread it to every row, as OpenVINO's do."""
    lead = q_shape[:-2]
    model, arrays = sdpa_case(q_shape, lead + [k_len, 16], lead + [k_len, 8], causal=True, dtype=dtype)
    tol = {"rtol": 2e-3, "atol": 2e-3} if dtype == np.float16 else {}
    compare(model, arrays, tmp_path, **tol)
    assert sdpa_module.BLOCK_SCORES * 4 <= np.prod(lead) * q_shape[-2] * k_len      # the blocks were taken
    arrays[2][..., 700, 3] = np.nan
    got = next(iter(compare(model, arrays, tmp_path / "nan", **tol).values()))
    assert np.isnan(got[..., :700, :]).any()


@pytest.mark.parametrize("kind", ["bool", "float"])
@pytest.mark.parametrize("mask_shape", [[2, 3, 4, 6], [4, 6], [1, 1, 4, 6], [2, 1, 1, 6], [3, 4, 1], [1, 6], []])
def test_masks(kind, mask_shape, tmp_path):
    """Boolean (true = keep) and float (added) masks, full or broadcasting."""
    compare(*sdpa_case([2, 3, 4, 5], [2, 3, 6, 5], [2, 3, 6, 7], mask=mask_sample(mask_shape, kind)), tmp_path)


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_mask_on_rank3(kind, tmp_path):
    compare(*sdpa_case([3, 4, 5], [3, 6, 5], [3, 6, 7], mask=mask_sample([3, 4, 6], kind)), tmp_path)


def test_mask_of_higher_rank_broadcasts_batch(tmp_path):
    """A rank-5 mask on rank-4 inputs gives a rank-5 output."""
    got = compare(*sdpa_case([2, 3, 4, 5], [2, 3, 6, 5], [2, 3, 6, 7], mask=mask_sample([2, 1, 1, 4, 6], "float")),
                  tmp_path)
    assert next(iter(got.values())).shape == (2, 2, 3, 4, 7)


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_causal_ignores_mask(kind, tmp_path):
    """With causal=true OpenVINO ignores attention_mask, even one that does not fit."""
    compare(*sdpa_case([2, 3, 4, 5], [2, 3, 6, 5], [2, 3, 6, 7], mask=mask_sample([9, 9], kind), causal=True),
            tmp_path)


@pytest.mark.parametrize("scale", [np.float32(0.25), np.array([1.7], np.float32)])
@pytest.mark.parametrize("with_mask", [False, True])
def test_explicit_scale(scale, with_mask, tmp_path):
    mask = mask_sample([4, 6], "float") if with_mask else None
    compare(*sdpa_case([2, 3, 4, 5], [2, 3, 6, 5], [2, 3, 6, 7], mask=mask, scale=scale), tmp_path)


@pytest.mark.parametrize("q_shape,k_shape,v_shape", [
    ([2, 3, 4, 5], [1, 3, 6, 5], [2, 1, 6, 7]),    # broadcast batch dims
    ([2, 1, 2, 4, 5], [2, 3, 1, 6, 5], [1, 3, 2, 6, 7]),   # rank 5
])
def test_broadcast_batch(q_shape, k_shape, v_shape, tmp_path):
    compare(*sdpa_case(q_shape, k_shape, v_shape), tmp_path)


def test_mixed_ranks(tmp_path):
    """Rank-3 query/key with a rank-4 value: the CPU plugin fails to compile it (errata); irrun broadcasts,
    checked against the same inputs with the leading 1 made explicit."""
    model, feeds = sdpa_case([3, 4, 5], [1, 6, 5], [2, 1, 6, 7])
    explicit, _ = sdpa_case([1, 3, 4, 5], [1, 1, 6, 5], [2, 1, 6, 7])
    expected = run_openvino(save(explicit, tmp_path / "explicit"), [feeds[0][None], feeds[1][None], feeds[2]])
    got = irrun.load(save(model, tmp_path / "mixed")).infer(feeds)
    assert_close(next(iter(got.values())), expected[0])


def test_fully_masked_rows_are_nan(tmp_path):
    """An all-false boolean row (or all -inf float row) is NaN, in OpenVINO and irrun."""
    mask = np.ones((4, 6), bool)
    mask[1] = False
    got = compare(*sdpa_case([1, 2, 4, 5], [1, 2, 6, 5], [1, 2, 6, 3], mask=mask), tmp_path)
    out = next(iter(got.values()))
    assert np.isnan(out[:, :, 1]).all() and not np.isnan(out[:, :, [0, 2, 3]]).any()


@pytest.mark.parametrize("causal,mask", [(False, None), (True, None), (False, "bool"), (False, "float")])
def test_f16(causal, mask, tmp_path):
    m = None if mask is None else mask_sample([4, 6], mask)
    got = compare(*sdpa_case([2, 3, 4, 8], [2, 3, 6, 8], [2, 3, 6, 8], mask=m, causal=causal, dtype=np.float16),
                  tmp_path, rtol=3e-3, atol=3e-3)
    assert next(iter(got.values())).dtype == np.float16


@pytest.mark.parametrize("causal", [False, True])
def test_dynamic_shapes(causal, tmp_path):
    shown = [[-1, 3, -1, 5], [-1, 3, -1, 5], [-1, 3, -1, 7], [-1, -1]]
    compare(*sdpa_case([2, 3, 4, 5], [2, 3, 6, 5], [2, 3, 6, 7], mask=mask_sample([4, 6], "bool"), causal=causal,
                       shown=shown), tmp_path)


def test_spec_formula_by_hand():
    """Hand-checked: one query, two keys; scores 1*1/sqrt(1) and 1*3, softmax, then the values."""
    spec = all_specs()[("ScaledDotProductAttention", 13)]
    op = implementation("ScaledDotProductAttention", 13)(spec, parse_attrs(spec, {})[0])
    q = np.array([[[1.0]]], np.float32)
    k = np.array([[[1.0], [3.0]]], np.float32)
    v = np.array([[[10.0], [20.0]]], np.float32)
    w = np.exp([1.0, 3.0]) / np.exp([1.0, 3.0]).sum()
    np.testing.assert_allclose(op.run(q, k, v), [[[10 * w[0] + 20 * w[1]]]], rtol=1e-6)
    np.testing.assert_allclose(op.run(q, k, v, np.array([[True, False]])), [[[10.0]]], rtol=1e-6)


# ---------------------------------------------------------------- shape function and validate

D = ov.Dimension
SHAPE_CASES = [
    ([[2, 3, 4, 5], [2, 3, 6, 5], [2, 3, 6, 7]], False),
    ([[2, 3, 4, 5], [2, 3, 6, 5], [2, 3, 6, 7], [4, 6]], False),
    ([[2, 3, 4, 5], [2, 3, 6, 5], [2, 3, 6, 7], [6]], False),          # rank-1 mask
    ([[2, 3, 4, 5], [2, 3, 6, 5], [2, 3, 6, 7], [9, 9]], True),        # ignored when causal
    ([[2, 3, 4, 5], [2, 3, 6, 5], [2, 3, 6, 7], [9, 9]], False),
    ([[2, 3, 4, 5], [2, 3, 6, 5], [2, 3, 6, 7], [1, 2, 3, 4, 6]], False),
    ([[3, 1, 5], [3, 6, 5], [3, 6, 7], [4, 6]], False),                # L from the mask
    ([[1, 5], [1, 6, 5], [1, 6, 7]], False),
    ([[3, 1, 5], [1, 6, 5], [2, 1, 6, 7]], False),
    ([[3, 4, 1], [3, 6, 5], [3, 6, 7]], False),                        # E must match (no broadcast)
    ([[3, 4, 5], [3, 1, 5], [3, 6, 7]], False),                        # S too
    ([[3, 4, 5], [3, 6, 5], [3, 6, 7], [4, 1]], False),                # the mask's S broadcasts
    ([[3, 4, D(1, 5)], [3, D(2, 9), D(3, 9)], [3, D(4, 12), 7], [-1, 1]], False),
    ([[2, 4, 5], [3, 6, 5], [3, 6, 7]], False),
    ([[3, 4, 5], [3, 6, 5], [3, 7, 7]], False),                        # S of key and value
    ([[-1, -1, 5], [3, -1, 5], [-1, 6, -1]], False),
    ([[D(1, 4), -1, 5], [D(2, 8), -1, 5], [-1, 6, -1], [-1, D(2, 9)]], False),
    ([None, [3, -1, 5], [-1, 6, -1]], False),
    ([[2, 4, 5], None, [2, 6, 7], None], False),
    ([[2, 4, 5], [2, 6, 5], [2, 6, 7], [4, 6], [1]], False),
    ([[2, 4, 5], [2, 6, 5], [2, 6, 7], [4, 6], [2]], False),
    ([[2, 4, 5], [2, 6, 5], [2, 6, 7], [4, 6], [1, 1]], False),
]


@pytest.mark.parametrize("shapes,causal", SHAPE_CASES)
def test_shape_function_matches_openvino(shapes, causal):
    params = [ops.parameter(ov.PartialShape.dynamic() if s is None else ov.PartialShape(s), np.float32)
              for s in shapes]
    try:
        node = ops.scaled_dot_product_attention(*params, causal=causal)
        expected = parse_partial_shape(str(node.get_output_partial_shape(0)))
    except RuntimeError:
        expected = "error"
    irrun_shapes = [None if s is None else parse_partial_shape(str(ov.PartialShape(s))) for s in shapes]
    try:
        got = sdpa_shape(irrun_shapes, causal)
    except ShapeError:
        got = "error"
    assert got == expected


@pytest.mark.parametrize("types,message", [
    ([np.float32, np.float16, np.float32], "mixed element types: key is f16"),
    ([np.int32] * 3, "query must be floating-point"),
    ([np.float32] * 3 + [np.int32], "attention_mask must be floating-point or boolean"),
    ([np.float32] * 3 + [np.bool_, np.float16], "mixed element types: scale is f16"),
])
def test_element_types_refused_like_openvino(types, message):
    shapes = [[2, 4, 5], [2, 6, 5], [2, 6, 7], [4, 6], []][:len(types)]
    params = [ops.parameter(s, t) for s, t in zip(shapes, types)]
    with pytest.raises(RuntimeError):
        ops.scaled_dot_product_attention(*params)
    spec = all_specs()[("ScaledDotProductAttention", 13)]
    op = implementation("ScaledDotProductAttention", 13)(spec, parse_attrs(spec, {})[0])
    with pytest.raises(ShapeError, match=message):
        op.infer([TensorType(tuple(s), from_dtype(t)) for s, t in zip(shapes, types)])


def test_validate_wrong_declared_output(tmp_path):
    xml = hand_ir(tmp_path, "ScaledDotProductAttention", [([2, 4, 5], "FP32"), ([2, 6, 5], "FP32"),
                                                          ([2, 6, 7], "FP32")], [2, 4, 5], version="opset13")
    errors = irrun.validate(xml).errors
    assert [e.code for e in errors] == ["E-DECLARED-SHAPE"]
    assert "last dim of value" in errors[0].message


def test_validate_inconsistent_operands_names_layer(tmp_path):
    xml = hand_ir(tmp_path, "ScaledDotProductAttention", [([2, 4, 5], "FP32"), ([2, 6, 5], "FP32"),
                                                          ([2, 7, 7], "FP32")], [2, 4, 7], version="opset13",
                  name="attn")
    errors = irrun.validate(xml).errors
    assert any(e.layer.name == "attn" and "value shape is not compatible" in e.message for e in errors), \
        [e.format() for e in errors]


# ================================================================ Einsum-7
# (Einsum lives in irrun/ops/matrix.py; its tests sit here with the attention
# patterns that use it, e.g. bhqd,bhkd->bhqk.)


def einsum_case(equation, shapes, dtype=np.float32, shown=None):
    arrays = [sample(s, dtype) if np.dtype(dtype).kind == "f" else RNG.integers(-5, 6, s).astype(dtype)
              for s in shapes]
    params = [ops7.parameter(ov.PartialShape(s), dtype) for s in (shown or shapes)]
    return ov.Model([ops7.einsum(params, equation)], params), arrays


@pytest.mark.parametrize("equation,shapes", [
    ("ij,jk->ik", [[2, 3], [3, 4]]),                          # matmul
    ("ij,jk", [[2, 3], [3, 4]]),                              # implicit output
    ("bij,bjk->bik", [[2, 3, 4], [2, 4, 5]]),                 # batched matmul
    ("bhqd,bhkd->bhqk", [[1, 2, 3, 4], [1, 2, 5, 4]]),        # attention scores
    ("bhqk,bhkd->bhqd", [[1, 2, 3, 5], [1, 2, 5, 4]]),
    ("bqhd,bkhd->bhqk", [[2, 3, 4, 5], [2, 6, 4, 5]]),        # heads in the middle, as exporters write
    ("abc,cd->ad", [[2, 3, 4], [4, 5]]),                      # b of one input alone: summed first
    ("bqd,dhk->bhqk", [[2, 3, 4], [4, 2, 5]]),                # right labels past the batch
    ("abc,cd->abd", [[2, 3, 4], [4, 5]]),                     # linear layer
    ("ba", [[2, 3]]),                                         # implicit transpose
    ("abcd->adbc", [[2, 3, 4, 5]]),                           # permutation
    ("ii->i", [[3, 3]]),                                      # diagonal
    ("ii->", [[3, 3]]),                                       # trace
    ("iij->ij", [[3, 3, 2]]),
    ("iji->j", [[3, 2, 3]]),
    ("...ii->...i", [[2, 3, 3]]),                             # batched diagonal
    ("i...i->...", [[3, 2, 3]]),
    ("i,i->", [[4], [4]]),                                    # dot
    ("i,j->ij", [[3], [4]]),                                  # outer
    ("ij->", [[2, 3]]),
    ("ab,ab,ab->a", [[2, 3], [2, 3], [2, 3]]),                # three inputs
    ("Ab,bA", [[2, 3], [3, 2]]),                              # uppercase labels
    ("bA,Ac", [[2, 3], [3, 4]]),
    ("ba,ca", [[2, 3], [4, 3]]),                              # implicit order is alphabetical: bc
    ("...ij,...jk->...ik", [[2, 1, 3, 4], [5, 4, 6]]),        # ellipsis broadcasting
    ("...ij,...jk", [[2, 3, 4], [4, 6]]),
    ("a...b->b...a", [[2, 3, 4, 5]]),
    ("i...,...", [[2, 3], [2, 3]]),                           # implicit: ... first, then i
    ("a...,a...->...", [[2, 3], [2, 1]]),
    ("ij,kj->ik", [[2, 1], [4, 3]]),                          # a label of size 1 broadcasts
    ("...ij->ij", [[2, 3, 4]]),                               # "..." not in the output: summed
    ("i...,...->i", [[2, 3], [2, 3]]),
    ("ij,jk->...", [[2, 3], [3, 4]]),                         # "..." of nothing
])
def test_einsum(equation, shapes, tmp_path):
    compare(*einsum_case(equation, shapes), tmp_path)


def test_einsum_of_two_float_inputs_is_one_matmul():
    """Two float inputs take one (batched) matrix product (np.einsum's loop took the attention scores of
    [1, 8, 256, 64] in 9.7 ms); a label repeated in a term, or a contracted one that broadcasts, not."""
    from irrun.ops.matrix import _einsum_by_matmul
    q, k = sample([1, 8, 256, 64]), sample([1, 8, 256, 64])
    got = _einsum_by_matmul(q, "bhqd", k, "bhkd", "bhqk")
    np.testing.assert_allclose(got, np.einsum("bhqd,bhkd->bhqk", q, k), rtol=1e-4, atol=1e-5)
    assert _einsum_by_matmul(sample([3, 3]), "ii", sample([3]), "i", "i") is None
    assert _einsum_by_matmul(sample([2, 1]), "ij", sample([4, 3]), "kj", "ik") is None


@pytest.mark.parametrize("dtype", [np.float16, np.int32, np.int64])
def test_einsum_element_types(dtype, tmp_path):
    tol = {"rtol": 2e-3, "atol": 2e-3} if dtype == np.float16 else {}
    got = compare(*einsum_case("bij,bjk->bik", [[2, 3, 4], [2, 4, 5]], dtype), tmp_path, **tol)
    assert next(iter(got.values())).dtype == dtype


def test_einsum_dynamic_shapes(tmp_path):
    compare(*einsum_case("...ij,...jk->...ik", [[2, 3, 4], [2, 4, 5]], shown=[[-1, -1, 4], [-1, 4, -1]]), tmp_path)


def test_einsum_constant_weights(tmp_path):
    x = ops7.parameter([2, 3, 4], np.float32)
    w = ops7.constant(sample([4, 5]))
    compare(ov.Model([ops7.einsum([x, w], "abc,cd->abd")], [x]), [sample([2, 3, 4])], tmp_path, compress=True,
            rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("equation,shapes", [
    ("ij,kj->ij", [[2, 1], [4, 3]]),
    ("ij,jk", [[2, 5], [3, 4]]),
    ("ii->i", [[3, 4]]),
    ("ii->i", [[1, 4]]),
    ("...ij,...jk", [[2, 3, 4], [5, 4, 6]]),
    ("...ij,...jk", [[-1, 3, 4], [5, 4, 6]]),
    ("...ij,...jk", [None, [5, 4, 6]]),
    ("ij,jk", [None, [3, 4]]),
    ("ij,jk", [[D(1, 5), -1], [D(2, 8), 4]]),
    ("ij,jk", [[2, 3, 4], [3, 4]]),
    ("...ij", [[3]]),
    ("...i", [[3]]),
    ("i...j,j...", [[2, 3, 4, 5], [5, 4]]),
    ("a b,bc", [[2, 3], [3, 4]]),
    ("ij,jk->iK", [[2, 3], [3, 4]]),
    ("ij,jk,kl", [[2, 3], [3, 4]]),
    ("i1,jk", [[2, 3], [3, 4]]),
    ("ij,jk->...", [[2, 3], [3, 4]]),
    ("...ij->ij", [[2, 3, 4]]),
    ("a......b", [[2, 3]]),
])
def test_einsum_shape_function_matches_openvino(equation, shapes):
    params = [ops7.parameter(ov.PartialShape.dynamic() if s is None else ov.PartialShape(s), np.float32)
              for s in shapes]
    try:
        expected = parse_partial_shape(str(ops7.einsum(params, equation).get_output_partial_shape(0)))
    except RuntimeError:
        expected = "error"
    try:
        got = einsum_shape(equation, [None if s is None else parse_partial_shape(str(ov.PartialShape(s)))
                                      for s in shapes])[0]
    except ShapeError:
        got = "error"
    assert got == expected


@pytest.mark.parametrize("equation", ["ii", "ij->jj"])
def test_einsum_repeated_output_label_refused(equation, tmp_path):
    """OpenVINO infers [3,3] for these but its CPU plugin cannot compile them; irrun reports the layer."""
    shape = [3, 3]
    xml = hand_ir(tmp_path, "Einsum", [(shape, "FP32")], [3, 3], {"equation": equation}, version="opset7",
                  name="ein")
    errors = irrun.validate(xml).errors
    assert any(e.layer.name == "ein" and "repeats label" in e.message for e in errors), [e.format() for e in errors]


def test_einsum_validate_wrong_declared_output(tmp_path):
    xml = hand_ir(tmp_path, "Einsum", [([2, 3], "FP32"), ([3, 4], "FP32")], [2, 3], {"equation": "ij,jk->ik"},
                  version="opset7")
    errors = irrun.validate(xml).errors
    assert [e.code for e in errors] == ["E-DECLARED-SHAPE"]
    assert "label k" in errors[0].message


def test_einsum_validate_mismatched_label_names_layer(tmp_path):
    xml = hand_ir(tmp_path, "Einsum", [([2, 3], "FP32"), ([5, 4], "FP32")], [2, 4], {"equation": "ij,jk->ik"},
                  version="opset7", name="mm")
    errors = irrun.validate(xml).errors
    assert any(e.layer.name == "mm" and "label j has dims 3 and 5" in e.message for e in errors), \
        [e.format() for e in errors]


A3 = [[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]], [[2.0, 4.0, 6.0], [8.0, 10.0, 12.0], [14.0, 16.0, 18.0]]]


@pytest.mark.parametrize("equation,operands,expected", [
    ("i,i->", [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], 32.0),
    ("ij,j->i", [[[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]], [4.0, 5.0, 6.0]], [32.0, 32.0]),
    ("kii->k", [A3], [15.0, 30.0]),
    ("kii->ki", [A3], [[1.0, 5.0, 9.0], [2.0, 10.0, 18.0]]),
    ("ijk->kij", [A3[:1]], [[[1.0, 4.0, 7.0]], [[2.0, 5.0, 8.0]], [[3.0, 6.0, 9.0]]]),
    ("a...->...", [A3[0]], [12.0, 15.0, 18.0]),
    ("a...,...->a...", [A3[0], [0.5]], [[0.5, 1.0, 1.5], [2.0, 2.5, 3.0], [3.5, 4.0, 4.5]]),
    ("AbC", [[[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]], [[[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]]),
])
def test_einsum_spec_examples(equation, operands, expected):
    """The worked examples 1-8 of einsum-7.rst, by hand."""
    spec = all_specs()[("Einsum", 7)]
    op = implementation("Einsum", 7)(spec, parse_attrs(spec, {"equation": equation})[0])
    got = op.run(*[np.array(a, np.float32) for a in operands])
    np.testing.assert_allclose(got, np.array(expected, np.float32))


def test_einsum_spec_xml_example_shape():
    """einsum-7.rst's second XML example: ab...,ac...,ade->...bc on [2,3,4], [2,7,1], [2,4,7] gives [4,3,7]."""
    assert einsum_shape("ab...,ac...,ade->...bc", [(2, 3, 4), (2, 7, 1), (2, 4, 7)])[0] == (4, 3, 7)
