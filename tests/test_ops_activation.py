"""Relu, Sigmoid, Tanh, Clamp, Softmax-1/8 against OpenVINO (CPU plugin, f32)."""
from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset1 as ops
import openvino.opset8 as ops8
import pytest
from ovutil import assert_close, compare, evaluate_reference, run_openvino, save
from irxml import hand_ir

import irrun
from irrun.ops import activation

UNARY = {"Relu": ops.relu, "Sigmoid": ops.sigmoid, "Tanh": ops.tanh}
DTYPES = [np.float32, np.float16, np.int32, np.int64, np.int8, np.uint8]


def unary_model(make, shape, dtype=np.float32) -> ov.Model:
    x = ops.parameter(shape, dtype)
    return ov.Model([make(x)], [x])


def sample(shape, dtype=np.float32, spread=5.0, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.uniform(-spread, spread, shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -100), min(info.max, 100), shape, endpoint=True).astype(dtype)


def check(model, inputs, tmp_path, dtype=np.float32):
    got = compare(model, inputs, tmp_path, rtol=1e-3 if dtype == np.float16 else 1e-4)
    assert next(iter(got.values())).dtype == dtype


# ---------------------------------------------------------------- Relu, Sigmoid, Tanh

@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dtype", DTYPES)
def test_unary_dtypes(name, dtype, tmp_path):
    """Integer inputs keep their type; Sigmoid and Tanh round to nearest (Sigmoid(1) = 1, Sigmoid(0) = 0)."""
    check(unary_model(UNARY[name], [2, 3, 17], dtype), [sample([2, 3, 17], dtype)], tmp_path, dtype)


@pytest.mark.parametrize("name", UNARY)
def test_unary_extremes(name, tmp_path):
    x = np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, -100, 100, 1e-30, -1e-30, 88.8, -88.8], np.float32)
    # The CPU plugin's Relu turns NaN into 0; OpenVINO's reference keeps NaN, and irrun follows it.
    oracle = "reference" if name == "Relu" else "cpu"
    compare(unary_model(UNARY[name], [11]), [x], tmp_path, oracle=oracle)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8])
def test_relu_large_tensor(dtype, tmp_path):
    """Past 32768 elements Relu takes a row-broadcast path (faster in NumPy than a scalar); a size
    that is not a multiple of the row leaves a tail; NaN and -0.0 as the reference gives them."""
    x = sample([3, 16411], dtype)
    if dtype == np.float32:
        x[0, ::97], x[1, -5:] = np.nan, -0.0
    # (NaN: the reference, as in test_unary_extremes; it has no u8 Relu, the CPU plugin has)
    oracle = "reference" if dtype == np.float32 else "cpu"
    compare(unary_model(ops.relu, list(x.shape), dtype), [x], tmp_path, oracle=oracle)


@pytest.mark.parametrize("size", [11, 40000])
def test_relu_keeps_negative_zero_and_nan_bit_for_bit(size, tmp_path):
    """OpenVINO's reference replaces what is below 0 with 0, so -0.0 and NaN pass through: irrun's
    NumPy clip to [0, inf] gives the same bits, alone and inlined in a small fused chain (Multiply
    by 1 -> Relu), where np.maximum would make -0.0 into 0.0."""
    x = np.resize(np.array([np.nan, -0.0, 0.0, -np.inf, np.inf, -3.5, 2.25, -1e-40], np.float32), size)
    param = ops.parameter([size], ov.Type.f32, name="x")
    model = ov.Model([ops.relu(param), ops.relu(ops.multiply(param, ops.constant(np.float32(1))))], [param])
    (expected, _) = evaluate_reference(model, [x])
    for got in irrun.load(save(model, tmp_path)).infer({"x": x}).values():
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("shape,concrete", [([], []), ([-1, 3], [4, 3]), ([-1, -1, -1], [2, 1, 5])])
def test_unary_shapes(name, shape, concrete, tmp_path):
    compare(unary_model(UNARY[name], shape), [sample(concrete)], tmp_path)


# ---------------------------------------------------------------- Clamp

@pytest.mark.parametrize("lo,hi", [(-0.5, 0.5), (0.0, 6.0), (-2.5, 2.5), (0.3, 7.9), (1.0, 1.0), (-1e30, 1e30)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_clamp(lo, hi, dtype, tmp_path):
    """Integer inputs clamp to [ceil(min), floor(max)]; bounds past the type's range saturate."""
    x = sample([3, 40], dtype, spread=10)
    model = unary_model(lambda p: ops.clamp(p, lo, hi), [3, 40], dtype)
    if dtype in (np.int8, np.uint8) and not (lo.is_integer() and hi.is_integer()):
        # The CPU plugin truncates fractional bounds for i8/u8 (0.3 -> 0) where OpenVINO rounds inward.
        compare(model, [x], tmp_path, oracle="reference")
    else:
        check(model, [x], tmp_path, dtype)


@pytest.mark.parametrize("dtype", [np.int32, np.uint8])
def test_clamp_range_emptied_by_rounding(dtype, tmp_path):
    """min 2.3, max 2.7 on integers: ceil(min) = 3 > floor(max) = 2; the CPU plugin gives 2 everywhere."""
    x = np.arange(0, 6, dtype=dtype)
    compare(unary_model(lambda p: ops.clamp(p, 2.3, 2.7), [6], dtype), [x], tmp_path)


def test_clamp_nan_stays_nan(tmp_path):
    """The CPU plugin's Clamp turns NaN into min; OpenVINO's reference keeps NaN, and irrun follows it."""
    x = np.array([np.nan, -np.inf, np.inf, -0.0, 0.25], np.float32)
    compare(unary_model(lambda p: ops.clamp(p, -2.0, 2.0), [5]), [x], tmp_path, oracle="reference")
    got = irrun.load(tmp_path / "model.xml").infer([x])
    assert np.isnan(next(iter(got.values()))[0])


def test_clamp_keeps_the_sign_of_zero_as_the_reference(tmp_path):
    """Clamp(-0.0) with min 0 is -0.0 in OpenVINO's reference (std::max(-0.0, 0.0) keeps its first
    argument) and in irrun's kernels, bound or not (the CPU plugin gives +0.0)."""
    from ovutil import evaluate_reference
    x = np.array([-0.0, 0.0, -1.0, 7.0] * 16, np.float32)
    model = unary_model(lambda p: ops.clamp(p, 0.0, 6.0), [64])
    expected = evaluate_reference(model, [x])[0]
    compare(model, [x], tmp_path, oracle="reference")
    for optimize in (True, False):
        got = next(iter(irrun.load(tmp_path / "model.xml", optimize=optimize).infer([x]).values()))
        np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))
    assert np.signbit(activation.Clamp.run(irrun.load(tmp_path / "model.xml")._plan.steps[0].op, x)[0])


def test_clamp_dynamic(tmp_path):
    compare(unary_model(lambda p: ops.clamp(p, -1, 1), [-1, 4]), [sample([3, 4])], tmp_path)


def test_clamp_min_above_max_is_an_error(tmp_path):
    xml = hand_ir(tmp_path, "Clamp", [([2, 3], "FP32")], [2, 3], {"min": "2", "max": "1"}, name="bad_clamp")
    report = irrun.validate(xml)
    assert any(e.layer.name == "bad_clamp" and "greater than max" in e.message for e in report.errors), \
        [e.format() for e in report.errors]


# ---------------------------------------------------------------- Softmax

SOFTMAX_SHAPE = [2, 3, 4, 5]


@pytest.mark.parametrize("axis", [0, 1, 2, 3])
def test_softmax_v1_each_axis(axis, tmp_path):
    compare(unary_model(lambda p: ops.softmax(p, axis), SOFTMAX_SHAPE), [sample(SOFTMAX_SHAPE)], tmp_path)


@pytest.mark.parametrize("axis", [-4, -3, -2, -1, 0, 3])
def test_softmax_v8_axes(axis, tmp_path):
    compare(unary_model(lambda p: ops8.softmax(p, axis), SOFTMAX_SHAPE), [sample(SOFTMAX_SHAPE)], tmp_path)


@pytest.mark.parametrize("make", [lambda p: ops.softmax(p, 1), lambda p: ops8.softmax(p, -1)], ids=["v1", "v8"])
def test_softmax_large_logits_stay_finite(make, tmp_path):
    """exp(1000) overflows; subtracting the maximum first keeps every result finite."""
    x = np.array([[1000.0, 999.0, -1000.0], [-5000.0, -5001.0, -5000.5]], np.float32)
    got = compare(unary_model(make, [2, 3]), [x], tmp_path)
    assert np.isfinite(next(iter(got.values()))).all()


def _attention_scores(kind):
    x = np.random.default_rng(3).standard_normal((2, 4, 16, 40)).astype(np.float32) * 4
    if kind == "whole-row-low":
        x[0, 1, 2] -= 60           # every score of a row near -60: no row maximum needed still
    elif kind == "masked":
        x[1, :, :, 30:] = -1e4     # padded keys, as BERT's mask adds them
    elif kind == "wide":
        x *= 30                    # beyond +-64: rows keep their maxima
    elif kind == "specials":
        x[0, 0, 0, 0], x[0, 0, 1, 1], x[1, 2, 3, :] = np.inf, np.nan, -np.inf
    return x


@pytest.mark.parametrize("axis", [-1, 2, 0])
@pytest.mark.parametrize("kind", ["plain", "whole-row-low", "masked", "wide", "specials"])
def test_softmax_of_attention_sized_scores(kind, axis, either_exponential, tmp_path):
    """Scores within +-64 skip the rows' maxima (exp cannot overflow or underflow a row there);
    masked, wide and non-finite ones keep them.  A row with NaN or +inf is all NaN in OpenVINO's
    reference evaluation and irrun, while the CPU plugin gives 0 at its finite scores.  exp by
    exp2 within the caches where NumPy has AVX-512 loops, by exp beyond them or without them (both
    here)."""
    x = _attention_scores(kind)
    compare(unary_model(lambda p: ops8.softmax(p, axis), list(x.shape)), [x], tmp_path,
            oracle="reference" if kind == "specials" else "cpu")


@pytest.mark.parametrize("dtype", [np.float16, np.int32])
def test_softmax_dtypes(dtype, tmp_path):
    """f16 stays f16; integers (the CPU plugin accepts them) round to 0 or 1."""
    x = sample([4, 6], dtype, spread=6)
    check(unary_model(lambda p: ops8.softmax(p, -1), [4, 6], dtype), [x], tmp_path, dtype)


def test_softmax_integers_round_to_nearest(tmp_path):
    """[0, 1] -> [0.27, 0.73] -> [0, 1]; a tie [5, 5] -> [0.5, 0.5] -> [0, 0] (to even)."""
    x = np.array([[0, 1], [5, 5], [-2, 7]], np.int32)
    got = compare(unary_model(lambda p: ops8.softmax(p, -1), [3, 2], np.int32), [x], tmp_path)
    np.testing.assert_array_equal(next(iter(got.values())), [[0, 1], [0, 0], [0, 1]])


@pytest.mark.parametrize("shape,concrete,axis", [([-1, -1, 4], [2, 3, 4], -1), ([-1, 7], [3, 7], 0), ([], [], 0)])
def test_softmax_shapes(shape, concrete, axis, tmp_path):
    compare(unary_model(lambda p: ops8.softmax(p, axis), shape), [sample(concrete)], tmp_path)


def test_softmax_spec_example():
    """Hand-checked: softmax([0, ln 3]) = [1/4, 3/4] along the last axis."""
    from irrun.registry import implementation
    from irrun.spec import all_specs, parse_attrs
    spec = all_specs()[("Softmax", 8)]
    op = implementation("Softmax", 8)(spec, parse_attrs(spec, {"axis": "-1"})[0])
    np.testing.assert_allclose(op.run(np.array([[0.0, np.log(3.0)]], np.float32)), [[0.25, 0.75]], rtol=1e-6)


@pytest.mark.parametrize("version,implied_axis", [("opset1", 0), ("opset8", 1)])
def test_softmax_axis_absent(version, implied_axis, tmp_path):
    """OpenVINO's IR reader takes axis 0 for a SoftMax-1 without one (the spec says 1), 1 for SoftMax-8."""
    xml = hand_ir(tmp_path, "SoftMax", [([2, 3], "FP32")], [2, 3], {}, version=version)
    x = sample([2, 3])
    expected = run_openvino(xml, [x])[0]
    assert_close(next(iter(irrun.load(xml).infer([x]).values())), expected)
    other = np.exp(x) / np.exp(x).sum(axis=1 - implied_axis, keepdims=True)
    assert not np.allclose(expected, other)   # the two axes really give different answers


@pytest.mark.parametrize("version,axis,words", [("opset1", "2", "out of range"), ("opset8", "-3", "out of range"),
                                                ("opset1", "-1", "non-negative")])
def test_softmax_bad_axis_names_layer(version, axis, words, tmp_path):
    xml = hand_ir(tmp_path, "SoftMax", [([2, 3], "FP32")], [2, 3], {"axis": axis}, version=version, name="bad_sm")
    report = irrun.validate(xml)
    assert any(e.layer.name == "bad_sm" and words in e.message for e in report.errors), \
        [e.format() for e in report.errors]
