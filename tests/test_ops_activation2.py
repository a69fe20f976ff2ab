"""PRelu, Elu, Selu, Gelu-2/7, HSwish, HSigmoid, HardSigmoid, Swish, Mish, SoftPlus, SoftSign,
LogSoftmax against OpenVINO (CPU plugin, f32).

f16 is compared with rtol 1e-3: both sides compute in f32 and round to f16, so a
result next to a rounding boundary can land one f16 ulp (2**-10 relative) apart.
"""
from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset1 as ops
import openvino.opset2 as ops2
import openvino.opset4 as ops4
import openvino.opset5 as ops5
import openvino.opset7 as ops7
import openvino.opset9 as ops9
import pytest
from irxml import hand_ir
from openvino.utils.node_factory import NodeFactory
from ovutil import compare, evaluate_reference, save

import irrun
from irrun.ops import activation

FLOATS = [np.float32, np.float16]
FLOAT_IDS = ["f32", "f16"]

# NaN, infinities, signed zeros, the kinks of the piecewise ops (-3, 3), SoftPlus's overflow region
# (exp overflows f32 at 88.8), large magnitudes.
EDGES = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 0.5, -0.5, 1.0, -1.0, 2.5, -2.5, 3.0, -3.0,
         10.0, -10.0, 15.0, 20.0, -20.0, 30.0, 50.0, 88.0, 88.8, 89.0, 100.0, -100.0, 1e10, -1e10]


def c(value, dtype=np.float32):
    return ops.constant(np.array(value, dtype))


def unary_model(make, shape, dtype=np.float32) -> ov.Model:
    x = ops.parameter(shape, dtype)
    return ov.Model([make(x)], [x])


def values(dtype, edges=EDGES, seed=0) -> np.ndarray:
    """Edge values then random ones in [-6, 6]."""
    rng = np.random.default_rng(seed)
    with np.errstate(over="ignore"):   # f16: 1e10 becomes inf
        return np.concatenate([edges, rng.uniform(-6, 6, 64)]).astype(dtype)


def tol(dtype):
    return {"rtol": 1e-3, "atol": 1e-5} if dtype == np.float16 else {}


def swish(x, beta=None):
    """Swish with or without its beta input (openvino.opset4.swish always adds a beta Const)."""
    inputs = [x.output(0)] + ([beta.output(0)] if beta is not None else [])
    return NodeFactory("opset4").create("Swish", inputs, {})


def the_output(got: dict) -> np.ndarray:
    return next(iter(got.values()))


# ---------------------------------------------------------------- PRelu

PRELU_SHAPES = [([2, 3, 4, 5], [3]), ([2, 3, 4, 5], [5]), ([2, 3, 4, 5], [1]), ([2, 3, 4, 5], []),
                ([2, 3, 4, 5], [3, 1, 1]), ([2, 3, 4, 5], [4, 5]), ([2, 3, 4, 3], [3]), ([3], [3]), ([2, 3], [3]),
                ([2, 3, 4, 5], [1, 3, 1, 1]), ([2, 3, 4, 5], [2, 1, 1, 1]), ([2, 3, 4, 5], [1, 1, 1, 1, 1]),
                ([5], [1]), ([], [1]), ([], []), ([4, 3], [4, 1]), ([2, 3, 4], [3, 1])]


@pytest.mark.parametrize("data_shape,slope_shape", PRELU_SHAPES, ids=[f"{d}-{s}" for d, s in PRELU_SHAPES])
def test_prelu_slope_broadcast(data_shape, slope_shape, tmp_path):
    rng = np.random.default_rng(1)
    slope = rng.uniform(0.05, 0.9, slope_shape).astype(np.float32)
    x = rng.uniform(-5, 5, data_shape).astype(np.float32)
    compare(unary_model(lambda p: ops.prelu(p, c(slope)), data_shape), [x], tmp_path)


@pytest.mark.parametrize("slope_kind,dtype", [(k, t) for k in ("leaky", "per-channel", "signed per-channel", "zero")
                                              for t in (np.float32, np.float16)] + [("infinite", np.float32)])
def test_prelu_over_large_activations(slope_kind, dtype, tmp_path, monkeypatch):
    """Tensors of 4 Ki elements and more take min(x, 0) * slope + max(x, 0) (activation._prelu_clipped)
    where the slope is finite, np.where otherwise; infinities, NaN and zeros among the data.  (OpenVINO
    refuses an infinite f16 constant.)"""
    clipped = activation._prelu_clipped
    rng = np.random.default_rng(3)
    x = rng.uniform(-5, 5, [1, 8, 32, 32]).astype(dtype)
    x.reshape(-1)[:6] = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-30]
    slope = {"leaky": np.array([0.1]), "per-channel": rng.uniform(0.05, 0.9, [8, 1, 1]),
             "signed per-channel": rng.uniform(-0.9, 0.9, [8, 1, 1]), "zero": np.array([0.0]),
             "infinite": np.array([np.inf])}[slope_kind].astype(dtype)
    model = unary_model(lambda p: ops.prelu(p, c(slope, dtype)), list(x.shape), dtype)
    calls = []
    monkeypatch.setattr(activation, "_prelu_clipped", lambda *a: calls.append(1) or clipped(*a))
    got = the_output(compare(model, [x], tmp_path, oracle="reference", **tol(dtype)))
    assert got.dtype == dtype and bool(calls) == (slope_kind != "infinite")
    with np.errstate(invalid="ignore"):
        expected = np.where(x < 0, x * slope.reshape(-1, 1, 1)[:8], x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))


def test_prelu_channel_wins_over_last_axis(tmp_path):
    """data [1, 3, 1, 3], slope [3]: the slope runs along axis 1, not along the (equally long) last axis."""
    x = -np.ones([1, 3, 1, 3], np.float32)
    slope = np.array([0.1, 0.2, 0.3], np.float32)
    got = the_output(compare(unary_model(lambda p: ops.prelu(p, c(slope)), [1, 3, 1, 3]), [x], tmp_path))
    np.testing.assert_allclose(got[0, :, 0, 0], -slope)
    np.testing.assert_allclose(got[0, 0, 0, :], [-0.1, -0.1, -0.1])


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.int64], ids=["f32", "f16", "i32", "i64"])
def test_prelu_dtypes(dtype, tmp_path):
    x = values(dtype) if np.dtype(dtype).kind == "f" else np.arange(-20, 20, dtype=dtype)
    slope = np.array([0.25 if np.dtype(dtype).kind == "f" else 3], dtype)
    got = compare(unary_model(lambda p: ops.prelu(p, c(slope, dtype)), list(x.shape), dtype), [x], tmp_path,
                  **tol(dtype))
    assert the_output(got).dtype == dtype


def test_prelu_i8_wraps(tmp_path):
    """-100 * 2 in i8: OpenVINO's reference wraps to 56 and irrun with it; the CPU plugin saturates to -128."""
    x = np.array([-100, -3, 0, 5, 127], np.int8)
    got = compare(unary_model(lambda p: ops.prelu(p, c([2], np.int8)), [5], np.int8), [x], tmp_path,
                  oracle="reference")
    np.testing.assert_array_equal(the_output(got), np.array([56, -6, 0, 5, 127], np.int8))


def test_prelu_slope_of_another_float_type(tmp_path):
    """OpenVINO does not require the slope's type to match: an f16 slope on f32 data gives f32."""
    x = values(np.float32)
    got = compare(unary_model(lambda p: ops.prelu(p, c([0.3], np.float16)), list(x.shape)), [x], tmp_path)
    assert the_output(got).dtype == np.float32


@pytest.mark.parametrize("shape,slope_shape", [([-1, 3, -1, -1], [3]), ([-1, -1, 4, 5], [3]), ([-1, -1, 4, 5], [5])])
def test_prelu_dynamic(shape, slope_shape, tmp_path):
    """With the channel dim unknown until run time, a 1-D slope may still turn out to run along it.
    With a dynamic channel dim the CPU plugin takes every 1-D slope as per-channel and fails on a
    slope [5] for data [2, 3, 4, 5]; OpenVINO's reference broadcasts it along the last axis, and irrun too."""
    slope = np.linspace(0.1, 0.5, slope_shape[0]).astype(np.float32)
    x = np.random.default_rng(2).uniform(-5, 5, [2, 3, 4, 5]).astype(np.float32)
    oracle = "reference" if slope_shape == [5] else "cpu"
    compare(unary_model(lambda p: ops.prelu(p, c(slope)), shape), [x], tmp_path, oracle=oracle)


@pytest.mark.parametrize("slope_shape", [[7], [2], [4, 4], [2, 1, 1, 1, 1]])
def test_prelu_slope_that_fits_nowhere_names_layer(slope_shape, tmp_path):
    """OpenVINO's shape inference accepts any slope; the CPU plugin then fails to compile these
    (and its reference overruns memory).  irrun reports them at the layer."""
    xml = hand_ir(tmp_path, "PReLU", [([2, 3, 4, 5], "FP32"), (slope_shape, "FP32")], [2, 3, 4, 5], name="bad_prelu")
    report = irrun.validate(xml)
    assert any(e.layer.name == "bad_prelu" and "slope" in e.message for e in report.errors), \
        [e.format() for e in report.errors]


# ---------------------------------------------------------------- Elu, Selu

@pytest.mark.parametrize("alpha", [0.5, 1.0, 2.0, 0.0])
def test_elu(alpha, tmp_path):
    """f32, f16 and integers (computed in float, rounded: Elu(-1) with alpha 2 = round(-1.26) = -1) in one model."""
    types = [np.float32, np.float16, np.int32, np.int8]
    params = [ops.parameter([-1], t) for t in types]
    model = ov.Model([ops.elu(p, alpha) for p in params], params)
    inputs = [values(t) for t in types[:2]] + [np.arange(-12, 13, dtype=t) for t in types[2:]]
    compare(model, inputs, tmp_path, rtol=1e-3)


def test_elu_without_alpha_is_reported(tmp_path):
    """The spec requires alpha; OpenVINO's IR reader silently uses 0.  irrun does too, and says so."""
    xml = hand_ir(tmp_path, "Elu", [([2, 3], "FP32")], [2, 3], {}, name="elu")
    report = irrun.validate(xml)
    assert report.ok and any(w.code == "W-ATTR-DEFAULTED" and w.layer.name == "elu" and 'alpha="0"' in w.message
                             for w in report.warnings), [w.format() for w in report]


SELU_ALPHA, SELU_LAMBDA = 1.6732632, 1.0507009


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("param_shape", [[1], [], [1, 1]], ids=["1", "scalar", "1x1"])
def test_selu(dtype, param_shape, tmp_path):
    alpha, lam = np.full(param_shape, SELU_ALPHA, dtype), np.full(param_shape, SELU_LAMBDA, dtype)
    x = values(dtype)
    got = compare(unary_model(lambda p: ops.selu(p, c(alpha, dtype), c(lam, dtype)), list(x.shape), dtype), [x],
                  tmp_path, **tol(dtype))
    assert the_output(got).dtype == dtype


def test_selu_longer_parameters_use_first_value(tmp_path):
    """alpha and lambda should hold one value; given more, the CPU plugin uses the first, and so does irrun."""
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(2, 6)
    compare(unary_model(lambda p: ops.selu(p, c([1.6, 2.0]), c([1.05, 3.0])), [2, 6]), [x], tmp_path)


# ---------------------------------------------------------------- Gelu

GELU = {"v2": ops2.gelu, "v7-erf": lambda p: ops7.gelu(p, "erf"), "v7-tanh": lambda p: ops7.gelu(p, "tanh")}
# Infinities (1e10 is one in f16) are where the CPU plugin and the reference differ: see below.
FINITE_EDGES = [v for v in EDGES if np.isfinite(v) and abs(v) < 65504]


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("name", GELU)
def test_gelu(name, dtype, tmp_path, either_exponential):
    x = values(dtype, FINITE_EDGES + [np.nan])
    got = compare(unary_model(GELU[name], list(x.shape), dtype), [x], tmp_path, **tol(dtype))
    assert the_output(got).dtype == dtype


def test_gelu_infinities_follow_reference(tmp_path, either_exponential):
    """Gelu (erf mode) of +inf and of 3e38: the CPU plugin gives NaN and inf, OpenVINO's reference
    0.5x(1 + erf(x/sqrt 2)) gives inf and 3e38; -inf is NaN in both (-inf * 0).  irrun follows the
    reference.  The reference cannot evaluate Gelu-2, whose meaning is Gelu-7 erf."""
    x = np.array([np.inf, -np.inf, 3e38, -3e38, 1.0], np.float32)
    compare(unary_model(GELU["v7-erf"], [5]), [x], tmp_path, oracle="reference")
    expected = evaluate_reference(unary_model(GELU["v7-erf"], [5]), [x])[0]
    got = the_output(irrun.load(save(unary_model(GELU["v2"], [5]), tmp_path)).infer([x]))
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    np.testing.assert_array_equal(np.isnan(got), [False, True, False, False, False])


def test_gelu_float32_error_bound(either_exponential):
    """float32 Gelu (erf mode) uses one rational approximation of erf: on a dense grid it stays
    within 1e-6 of 0.5 x (1 + erf(x / sqrt 2)) (math.erf, in double) for x <= 4 and within
    2.5e-7 relative above, bound kernel (in place) and `run` alike."""
    import math

    from irrun.ops.activation import _gelu_erf, _gelu_erf_f32_into
    x = np.linspace(-12, 12, 240_001, dtype=np.float32)
    exact = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(np.float64)])
    error = np.abs(_gelu_erf(x).astype(np.float64) - exact)
    large = x > 4
    assert error[~large].max() < 1e-6
    assert (error[large] / exact[large]).max() < 2.5e-7
    in_place = x.copy()
    assert _gelu_erf_f32_into(in_place, in_place) is in_place
    np.testing.assert_array_equal(in_place, _gelu_erf(x))


def test_gelu_float32_saturates_beyond_its_fit(either_exponential):
    """Beyond |x| = 5.75, where float32 Gelu (erf mode) is x, or 0 for negative x, to float32
    precision, the unclamped polynomial inside tanh keeps its sign and grows: 400 001 magnitudes
    spread geometrically from 5.75 to 3.4e38 give exactly x, or zero (by tanh, whose 1 + tanh(y)
    is 0 there; by exp, x / (1 + exp(-2y)) keeps Gelu's own tiny values, under 1e-8, not NaN)."""
    from irrun.ops.activation import _gelu_erf
    beyond = np.geomspace(5.75, np.finfo(np.float32).max, 400_001).astype(np.float32)
    np.testing.assert_array_equal(_gelu_erf(beyond), beyond)
    negative = _gelu_erf(-beyond)
    if activation.EXP_BY_EXP2:
        np.testing.assert_array_equal(negative, np.zeros_like(beyond))
    else:
        tiny = (negative <= 0) & (negative >= -1e-8)
        assert tiny.all(), negative[~tiny]


def test_gelu7_mode_any_case_and_default(tmp_path):
    """OpenVINO writes approximation_mode in upper case; absent, it reads erf."""
    xml = save(unary_model(GELU["v7-tanh"], [4]), tmp_path)
    text = xml.read_text()
    assert 'approximation_mode="TANH"' in text
    x = np.array([-2.0, -0.5, 0.5, 2.0], np.float32)
    tanh = the_output(irrun.load(xml).infer([x]))
    xml.write_text(text.replace('approximation_mode="TANH"', ""))
    erf = the_output(irrun.load(xml).infer([x]))
    expected_erf = evaluate_reference(unary_model(GELU["v7-erf"], [4]), [x])[0]
    np.testing.assert_allclose(erf, expected_erf, rtol=1e-6, atol=1e-6)   # float32 Gelu: within 1e-6
    assert not np.allclose(tanh, erf, rtol=1e-6, atol=0)   # the two modes really differ


def test_gelu_spec_values():
    """Hand-checked: Gelu(1) = 0.5 (1 + erf(1/sqrt 2)) = 0.8413447; tanh mode 0.8411920."""
    from irrun.registry import implementation
    from irrun.spec import all_specs, parse_attrs
    x = np.array([1.0], np.float32)
    for mode, expected in [("erf", 0.8413447), ("tanh", 0.8411920)]:
        spec = all_specs()[("Gelu", 7)]
        op = implementation("Gelu", 7)(spec, parse_attrs(spec, {"approximation_mode": mode})[0])
        np.testing.assert_allclose(op.run(x), [expected], rtol=1e-6)


# ---------------------------------------------------------------- HSwish, HSigmoid, HardSigmoid

HARD = {"HSwish": ops4.hswish, "HSigmoid": ops5.hsigmoid}


@pytest.mark.parametrize("name", HARD)
def test_hard_activations(name, tmp_path):
    """f32, f16 and integers in one model; integers round to nearest, ties to even (HSigmoid(0) = 0.5 -> 0)."""
    types = [np.float32, np.float16, np.int32, np.int8, np.uint8]
    params = [ops.parameter([-1], t) for t in types]
    model = ov.Model([HARD[name](p) for p in params], params)
    ints = np.arange(-12, 13)
    no_nan = [v for v in EDGES if not np.isnan(v)]   # NaN: see below
    inputs = [values(np.float32, no_nan), values(np.float16, no_nan), ints.astype(np.int32), ints.astype(np.int8),
              ints[ints >= 0].astype(np.uint8)]
    compare(model, inputs, tmp_path, rtol=1e-3)


def test_hard_activations_nan_and_huge_follow_reference(tmp_path):
    """HSigmoid(NaN) is NaN in OpenVINO's reference and 0 on the CPU plugin; HSwish(3e38) overflows
    to inf in the reference (x * 6 / 6) where the CPU plugin gives 3e38.  irrun follows the reference."""
    x_param = ops.parameter([3], np.float32)
    model = ov.Model([ops5.hsigmoid(x_param), ops4.hswish(x_param)], [x_param])
    compare(model, [np.array([np.nan, 3e38, 1.0], np.float32)], tmp_path, oracle="reference")


@pytest.mark.parametrize("alpha,beta", [(0.2, 0.5), (1.0, 0.5), (-1.5, 0.1), (2.0, -0.5)])
@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_hard_sigmoid(alpha, beta, dtype, tmp_path):
    """NaN gives 1 (std::max(0, std::min(1, NaN)) in OpenVINO; the CPU plugin agrees)."""
    x = values(dtype)
    model = unary_model(lambda p: ops.hard_sigmoid(p, c(alpha, dtype), c(beta, dtype)), list(x.shape), dtype)
    got = the_output(compare(model, [x], tmp_path, **tol(dtype)))
    assert got.dtype == dtype and got[0] == 1


@pytest.mark.parametrize("alpha,beta,expected", [(1.0, 0.0, [0, 0, 0.25, 1]), (0.0, 0.3, [0.3, 0.3, 0.3, 0.3])])
def test_hard_sigmoid_zero_parameter_hand_checked(alpha, beta, expected, tmp_path):
    """A zero alpha or beta is used as zero.  The CPU plugin replaces it by the default (0.2 or 0.5:
    HardSigmoid(0) with alpha 1, beta 0 gives 0.5), and OpenVINO's reference cannot evaluate HardSigmoid."""
    model = unary_model(lambda p: ops.hard_sigmoid(p, c(alpha), c(beta)), [4])
    got = the_output(irrun.load(save(model, tmp_path)).infer([np.array([-3, 0, 0.25, 3], np.float32)]))
    np.testing.assert_allclose(got, np.array(expected, np.float32))


def test_hard_sigmoid_integers(tmp_path):
    x = np.arange(-5, 6, dtype=np.int32)
    compare(unary_model(lambda p: ops.hard_sigmoid(p, c(1, np.int32), c(2, np.int32)), [11], np.int32), [x],
            tmp_path)


@pytest.mark.parametrize("alpha_shape,beta_shape", [([1], []), ([], [2])])
def test_hard_sigmoid_parameters_must_be_scalars(alpha_shape, beta_shape, tmp_path):
    xml = hand_ir(tmp_path, "HardSigmoid", [([2, 3], "FP32"), (alpha_shape, "FP32"), (beta_shape, "FP32")], [2, 3],
                  name="hs")
    report = irrun.validate(xml)
    assert any(e.layer.name == "hs" and "scalar" in e.message for e in report.errors), \
        [e.format() for e in report.errors]


# ---------------------------------------------------------------- Swish, Mish, SoftPlus, SoftSign

@pytest.mark.parametrize("beta", [None, 1.0, 2.0, -0.7, 0.0])
@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_swish(beta, dtype, tmp_path):
    """x * sigmoid(beta x); without the beta input beta is 1."""
    x = values(dtype)
    model = unary_model(lambda p: swish(p, None if beta is None else c(beta, dtype)), list(x.shape), dtype)
    got = compare(model, [x], tmp_path, **tol(dtype))
    assert the_output(got).dtype == dtype


def test_swish_beta_fed_at_run_time(tmp_path):
    x_param, beta_param = ops.parameter([-1, 4], np.float32), ops.parameter([], np.float32)
    model = ov.Model([swish(x_param, beta_param)], [x_param, beta_param])
    x = np.random.default_rng(4).uniform(-5, 5, [3, 4]).astype(np.float32)
    compare(model, [x, np.array(1.7, np.float32)], tmp_path)


SMOOTH = {"Mish": ops4.mish, "SoftPlus": ops4.softplus, "SoftSign": ops9.softsign}

EXPONENTIAL = {"Swish": lambda p: swish(p), "Swish beta 1.7": lambda p: swish(p, c(1.7)), "Sigmoid": ops.sigmoid,
               "SoftPlus": ops4.softplus, "Mish": ops4.mish}


@pytest.mark.parametrize("name", EXPONENTIAL)
def test_exponential_activations_over_float32s_range(name, either_exponential, tmp_path):
    """irrun takes exp(a x) as exp2 of the product x a log2(e) where NumPy has AVX-512 loops, whose
    rounding error grows with |a x|, else as exp of a x (both here, whatever the CPU): every
    magnitude up to where exp overflows, densely, and tiny ones."""
    tiny = np.logspace(-8, 0, 400)
    x = np.concatenate([np.linspace(-100, 100, 40001), tiny, -tiny]).astype(np.float32)
    compare(unary_model(EXPONENTIAL[name], [x.size]), [x], tmp_path)


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("name", SMOOTH)
def test_smooth_activations(name, dtype, tmp_path):
    """Includes SoftPlus beyond its overflow threshold (88.8 and up give x itself), SoftSign(±inf) = NaN."""
    x = values(dtype)
    got = compare(unary_model(SMOOTH[name], list(x.shape), dtype), [x], tmp_path, **tol(dtype))
    assert the_output(got).dtype == dtype


def test_softplus_large_inputs_hand_checked(tmp_path):
    """log(1 + e^x) is x once e^x dwarfs 1: no overflow to inf at 89 or 1e10, 0 far below zero."""
    x = np.array([20.0, 88.0, 89.0, 1e10, np.inf, -100.0, -np.inf, 0.0], np.float32)
    got = the_output(compare(unary_model(ops4.softplus, [8]), [x], tmp_path))
    np.testing.assert_allclose(got, [20.0, 88.0, 89.0, 1e10, np.inf, 0.0, 0.0, np.log(2.0)], rtol=1e-6, atol=1e-30)


@pytest.mark.parametrize("op,version", [("Gelu", "opset7"), ("Mish", "opset4"), ("SoftPlus", "opset4"),
                                        ("SoftSign", "opset9"), ("Swish", "opset4"), ("Gelu", "opset2")])
def test_float_only_activations_reject_integers(op, version, tmp_path):
    xml = hand_ir(tmp_path, op, [([2, 3], "I32")], [2, 3], version=version, name="int_in")
    report = irrun.validate(xml)
    assert any(e.layer.name == "int_in" and "floating-point" in e.message for e in report.errors), \
        [e.format() for e in report.errors]


@pytest.mark.parametrize("inputs,words", [([([2, 3], "FP32"), ([1], "FP32")], "scalar"),
                                          ([([2, 3], "FP32"), ([], "FP16")], "element type")])
def test_swish_beta_checked(inputs, words, tmp_path):
    xml = hand_ir(tmp_path, "Swish", inputs, [2, 3], version="opset4", name="sw")
    report = irrun.validate(xml)
    assert any(e.layer.name == "sw" and words in e.message for e in report.errors), \
        [e.format() for e in report.errors]


def test_selu_parameter_type_must_match(tmp_path):
    xml = hand_ir(tmp_path, "Selu", [([2, 3], "FP32"), ([1], "FP16"), ([1], "FP32")], [2, 3], name="selu")
    report = irrun.validate(xml)
    assert any(e.layer.name == "selu" and "element type" in e.message for e in report.errors), \
        [e.format() for e in report.errors]


# ---------------------------------------------------------------- LogSoftmax

SHAPE4 = [2, 3, 4, 5]


@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -2, -3, -4])
def test_log_softmax_axes(axis, tmp_path):
    x = np.random.default_rng(axis + 10).uniform(-10, 10, SHAPE4).astype(np.float32)
    compare(unary_model(lambda p: ops5.log_softmax(p, axis), SHAPE4), [x], tmp_path)


def test_log_softmax_large_logits_and_minus_inf(tmp_path):
    """The maximum is subtracted first, so 1e30 does not overflow; a -inf entry gives -inf; a row of
    only -inf is NaN (-inf - -inf), on the CPU plugin and in irrun."""
    x = np.array([[1e30, -1e30, 0.0], [1.0, -np.inf, 2.0], [-np.inf, -np.inf, -np.inf], [1000, 999, -1000]],
                 np.float32)
    got = the_output(compare(unary_model(lambda p: ops5.log_softmax(p, 1), [4, 3]), [x], tmp_path))
    assert np.isfinite(got[3]).all() and got[1, 1] == -np.inf and np.isnan(got[2]).all()


def test_log_softmax_nan_or_inf_poisons_its_row(tmp_path):
    """A NaN or +inf in a row makes the whole row NaN in irrun (IEEE arithmetic on x - max).  The CPU
    plugin gives -inf for the row's finite entries (its exp(NaN) is inf) and OpenVINO's reference
    cannot evaluate LogSoftmax; other rows are unaffected."""
    x = np.array([[1.0, np.inf, 2.0], [np.nan, 0.0, 1.0], [0.0, 1.0, 2.0]], np.float32)
    got = the_output(irrun.load(save(unary_model(lambda p: ops5.log_softmax(p, 1), [3, 3]), tmp_path)).infer([x]))
    assert np.isnan(got[:2]).all()
    np.testing.assert_allclose(got[2], [-2.4076059, -1.4076059, -0.4076059], rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float16, np.int32], ids=["f16", "i32"])
def test_log_softmax_dtypes(dtype, tmp_path):
    """f16 stays f16; integers (accepted by OpenVINO) keep exp(x - max) in the integer type (1 at the
    maximum, 0 elsewhere), so a row's result is x - max - round(log(number of maxima))."""
    x = (np.random.default_rng(5).uniform(-6, 6, [5, 6])).astype(dtype)
    if dtype == np.int32:
        x[4] = [3, 3, 3, 0, -2, 1]   # three maxima: log 3 rounds to 1
    got = compare(unary_model(lambda p: ops5.log_softmax(p, -1), [5, 6], dtype), [x], tmp_path, **tol(dtype))
    assert the_output(got).dtype == dtype


@pytest.mark.parametrize("shape,concrete,axis", [([-1, -1, 4], [2, 3, 4], -1), ([-1, 7], [3, 7], 0),
                                                 ([], [], 0), ([], [], -1), ([0, 3], [0, 3], 1), ([-1, 3], [0, 3], 0)])
def test_log_softmax_shapes(shape, concrete, axis, tmp_path):
    """Dynamic dims, scalars (axis 0 or -1, the result is 0) and empty tensors."""
    x = np.random.default_rng(6).uniform(-3, 3, concrete).astype(np.float32)
    compare(unary_model(lambda p: ops5.log_softmax(p, axis), shape), [x], tmp_path)


@pytest.mark.parametrize("axis", ["2", "-3"])
def test_log_softmax_bad_axis_names_layer(axis, tmp_path):
    xml = hand_ir(tmp_path, "LogSoftmax", [([2, 3], "FP32")], [2, 3], {"axis": axis}, version="opset5", name="lsm")
    report = irrun.validate(xml)
    assert any(e.layer.name == "lsm" and "out of range" in e.message for e in report.errors), \
        [e.format() for e in report.errors]


# ---------------------------------------------------------------- shapes and declared shapes

ALL = {"PRelu": lambda p: ops.prelu(p, c([0.2])), "Elu": lambda p: ops.elu(p, 1.0),
       "Selu": lambda p: ops.selu(p, c([SELU_ALPHA]), c([SELU_LAMBDA])), **GELU, **HARD,
       "HardSigmoid": lambda p: ops.hard_sigmoid(p, c(0.2), c(0.5)), "Swish": swish, **SMOOTH}


@pytest.mark.parametrize("shape,concrete", [([], []), ([-1, 3], [4, 3]), ([0, 3], [0, 3]),
                                            (ov.PartialShape([2, ov.Dimension(1, 8)]), [2, 6])],
                         ids=["scalar", "dynamic", "empty", "interval"])
def test_shapes(shape, concrete, tmp_path):
    """Every activation of this file on scalars, dynamic dims and empty tensors, in one model."""
    x_param = ops.parameter(shape, np.float32)
    x = np.random.default_rng(7).uniform(-4, 4, concrete).astype(np.float32)
    compare(ov.Model([make(x_param) for make in ALL.values()], [x_param]), [x], tmp_path)


@pytest.mark.parametrize("op,version,attrs", [("HSwish", "opset4", {}), ("Elu", "opset1", {"alpha": "1"}),
                                              ("LogSoftmax", "opset5", {"axis": "1"})])
def test_declared_shape_mismatch_is_reported(op, version, attrs, tmp_path):
    xml = hand_ir(tmp_path, op, [([2, 3], "FP32")], [2, 4], attrs, version=version, name="bad_out")
    report = irrun.validate(xml)
    assert any(e.code == "E-DECLARED-SHAPE" for e in report.errors), [e.format() for e in report.errors]
