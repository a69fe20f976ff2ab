"""Elementwise math (Abs ... IsNaN) and ConvertLike against OpenVINO (CPU plugin, f32).

f16 is compared with rtol 1e-3: both sides compute in f32 and round to f16,
so a result next to a rounding boundary can land one f16 ulp (2**-10
relative) apart.
"""
from __future__ import annotations

import re

import numpy as np
import openvino as ov
import openvino.opset1 as ops
import openvino.opset4 as ops4
import openvino.opset5 as ops5
import openvino.opset10 as ops10
import pytest
from irxml import hand_ir
from ovutil import assert_close, compare, evaluate_reference, run_openvino, save

import irrun

UNARY = {
    "Abs": ops.absolute, "Negative": ops.negative, "Sign": ops.sign, "Floor": ops.floor,
    "Ceiling": ops.ceiling, "Sqrt": ops.sqrt, "Exp": ops.exp, "Log": ops.log, "Erf": ops.erf,
    "Sin": ops.sin, "Cos": ops.cos, "Tan": ops.tan, "Asin": ops.asin, "Acos": ops.acos, "Atan": ops.atan,
    "Sinh": ops.sinh, "Cosh": ops.cosh, "Asinh": ops4.asinh, "Acosh": ops4.acosh, "Atanh": ops4.atanh,
    "Round-half_to_even": lambda p: ops5.round(p, "half_to_even"),
    "Round-half_away_from_zero": lambda p: ops5.round(p, "half_away_from_zero"),
}
FLOAT_TESTS = {
    "IsFinite": ops10.is_finite, "IsNaN": ops10.is_nan, "IsInf": ops10.is_inf,
    "IsInf-negative": lambda p: ops10.is_inf(p, {"detect_positive": False}),
    "IsInf-positive": lambda p: ops10.is_inf(p, {"detect_negative": False}),
    "IsInf-neither": lambda p: ops10.is_inf(p, {"detect_positive": False, "detect_negative": False}),
}

# Values at the edges of every function's domain and range: NaN, infinities, signed zeros,
# halves (rounding), 89 and -104 (exp overflows / underflows in f32), f32's extremes.
EDGES = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 0.5, -0.5, 1.0, -1.0, 1.5, -1.5, 2.0, -2.0,
         2.5, -2.5, 3.7, -3.7, 0.999, -0.999, 1.001, 20.0, -20.0, 88.0, 89.0, -104.0, 1e10, -1e10, 3e38, -3e38]


def unary_model(make, shape, dtype=np.float32) -> ov.Model:
    x = ops.parameter(shape, dtype)
    return ov.Model([make(x)], [x])


def edge_values(dtype, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    with np.errstate(over="ignore"):   # f16: 1e10 and 3e38 become inf
        return np.concatenate([EDGES, rng.uniform(-3, 3, 64)]).astype(dtype)


def tol(dtype):
    return {"rtol": 1e-3, "atol": 1e-5} if dtype == np.float16 else {}


# ---------------------------------------------------------------- floating point

@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("name", UNARY)
def test_float_edges(name, dtype, tmp_path):
    """Domain errors as OpenVINO gives them: Sqrt(-1), Log(-1), Asin(2), Acosh(0.5) are NaN,
    Log(0) = -inf, Atanh(±1) = ±inf, Exp(89) = inf in f32; f16 stays f16."""
    # The CPU plugin's Exp turns NaN into +inf; OpenVINO's reference keeps NaN, and irrun follows it.
    oracle = "reference" if name == "Exp" else "cpu"
    got = compare(unary_model(UNARY[name], [95], dtype), [edge_values(dtype)], tmp_path, oracle=oracle,
                  **tol(dtype))
    assert next(iter(got.values())).dtype == dtype


def test_erf_f32_dense_grid(tmp_path):
    """f32 Erf runs Gelu's float32 rational function: within 1e-6 of OpenVINO's (which is itself
    4.5e-7 off erf) over [-6, 6], and 1e-6 relative where erf(x) is tiny."""
    x = np.concatenate([np.linspace(-6, 6, 100001, dtype=np.float32),
                        np.float32([1e-30, -1e-20, 1e-10, 3e-8, -1e-5, 1e-3])])
    got = next(iter(compare(unary_model(ops.erf, [x.size]), [x], tmp_path, rtol=1e-6, atol=1e-6).values()))
    assert got.dtype == np.float32
    assert np.allclose(got[-6:], x[-6:] * np.float32(2 / np.sqrt(np.pi)), rtol=1e-6, atol=0)


def test_domain_errors_hand_checked(tmp_path):
    x = np.array([-1.0, 0.0, 2.0, 0.5, 1.0, -1.0], np.float32)
    x_param = ops.parameter([6], np.float32)
    model = ov.Model([ops.sqrt(x_param), ops.log(x_param), ops.asin(x_param), ops4.acosh(x_param),
                      ops4.atanh(x_param)], [x_param])
    got = list(compare(model, [x], tmp_path).values())
    np.testing.assert_array_equal(np.isnan(got[0]), [True, False, False, False, False, True])    # Sqrt
    np.testing.assert_array_equal(got[1][[1, 4]], [-np.inf, 0.0])                                  # Log
    assert np.isnan(got[2][2]) and np.isnan(got[3][3]) and got[3][4] == 0.0                        # Asin, Acosh
    np.testing.assert_array_equal(got[4][[4, 5]], [np.inf, -np.inf])                              # Atanh


@pytest.mark.parametrize("name", FLOAT_TESTS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
def test_float_class_tests(name, dtype, tmp_path):
    got = compare(unary_model(FLOAT_TESTS[name], [95], dtype), [edge_values(dtype)], tmp_path)
    assert next(iter(got.values())).dtype == np.bool_


def test_is_finite_subnormal(tmp_path):
    """1e-40 is a finite (subnormal) f32.  The CPU plugin says it is not; OpenVINO's reference
    cannot evaluate IsFinite.  irrun says True, as IEEE 754 does."""
    xml = save(unary_model(ops10.is_finite, [3]), tmp_path)
    got = next(iter(irrun.load(xml).infer([np.array([1e-40, 1.0, np.inf], np.float32)]).values()))
    np.testing.assert_array_equal(got, [True, True, False])


@pytest.mark.parametrize("mode", ["half_to_even", "half_away_from_zero"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
def test_round_halves(mode, dtype, tmp_path):
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, -3.5, 0.49, 0.51, -0.51, 1023.5, -0.0, 2.49],
                 dtype)
    got = next(iter(compare(unary_model(lambda p: ops5.round(p, mode), [14], dtype), [x], tmp_path).values()))
    expected = {"half_to_even": [0, 2, 2, -0, -2, -2, 4, -4, 0, 1, -1, 1024, 0, 2],
                "half_away_from_zero": [1, 2, 3, -1, -2, -3, 4, -4, 0, 1, -1, 1024, 0, 2]}[mode]
    np.testing.assert_array_equal(got, np.array(expected, dtype))


def test_round_just_below_half_follows_reference(tmp_path):
    """0.49999997 rounds away from zero to 0.  The CPU plugin computes trunc(x + 0.5), where the
    addition rounds up to 1.0; OpenVINO's reference (std::round) gives 0, and irrun follows it."""
    x = np.array([0.49999997, -0.49999997, 8388609.0, 2.5], np.float32)
    got = compare(unary_model(lambda p: ops5.round(p, "half_away_from_zero"), [4]), [x], tmp_path,
                  oracle="reference")
    np.testing.assert_array_equal(next(iter(got.values())), [0, -0, 8388609, 3])


# ---------------------------------------------------------------- integers

# Inputs whose results every tested integer type holds (u8 takes the non-negative ones, whose
# results are non-negative too): the CPU plugin saturates i8/u8 results that irrun, like
# OpenVINO's Convert, wraps.  Transcendental results round to nearest (Sqrt(3) = 2, Exp(1) = 3).
INT_INPUTS = {
    "Abs": [-100, -5, -1, 0, 1, 5, 100, 127], "Negative": [-127, -5, -1, 0, 1, 5, 127],
    "Sign": [-100, -1, 0, 1, 100], "Floor": [-128, -1, 0, 1, 127], "Ceiling": [-128, -1, 0, 1, 127],
    "Round-half_to_even": [-128, -1, 0, 1, 127], "Round-half_away_from_zero": [-128, -1, 0, 1, 127],
    "Sqrt": [0, 1, 2, 3, 4, 5, 8, 9, 15, 16, 99, 100], "Exp": [-9, -5, -1, 0, 1, 2, 3, 4],
    "Log": [1, 2, 3, 5, 7, 8, 20, 100, 127], "Erf": [-3, -2, -1, 0, 1, 2, 3],
    "Sin": [-5, -4, -2, -1, 0, 1, 2, 3, 7, 8, 9], "Cos": [-6, -3, -2, -1, 0, 1, 2, 5, 6, 7],
    "Tan": [-4, -3, -1, 0, 1, 3, 4, 7], "Asin": [-1, 0, 1], "Acos": [-1, 0, 1],
    "Atan": [-100, -3, -1, 0, 1, 3, 100], "Sinh": [-4, -3, -1, 0, 1, 3, 4], "Cosh": [-4, -3, -1, 0, 1, 3, 4],
    "Asinh": [-100, -5, -1, 0, 1, 5, 100], "Acosh": [1, 2, 3, 5, 100], "Atanh": [0],
}
INT_TYPES = [np.int32, np.int64, np.int8, np.uint8]


@pytest.mark.parametrize("name", UNARY)
def test_integers(name, tmp_path):
    """i32, i64, i8 and u8 in one model; the output keeps the input's integer type."""
    # Negative on u8: the CPU plugin cannot compile it, the reference cannot evaluate it (see below).
    types = [t for t in INT_TYPES if not (name == "Negative" and t == np.uint8)]
    params = [ops.parameter([-1], t) for t in types]
    model = ov.Model([UNARY[name](p) for p in params], params)
    values = np.array(INT_INPUTS[name])
    inputs = [values[values >= 0].astype(t) if t == np.uint8 else values.astype(t) for t in types]
    got = compare(model, inputs, tmp_path)
    assert [a.dtype for a in got.values()] == [np.dtype(t) for t in types]


def test_integer_domain_errors_i32(tmp_path):
    """NaN and infinite results in i32 become INT32_MIN (Convert's rule), on the CPU plugin and the reference:
    Sqrt(-4), Log(0), Log(-4), Asin(2), Acos(-4), Acosh(0), Exp(100)."""
    x_param = ops.parameter([3], np.int32)
    model = ov.Model([ops.sqrt(x_param), ops.log(x_param), ops.asin(x_param), ops.acos(x_param),
                      ops4.acosh(x_param)], [x_param])
    got = compare(model, [np.array([-4, 0, 2], np.int32)], tmp_path)
    low = np.iinfo(np.int32).min
    sqrt, log, asin, acos, acosh = got.values()
    np.testing.assert_array_equal(sqrt, [low, 0, 1])
    np.testing.assert_array_equal(log, [low, low, 1])
    np.testing.assert_array_equal(asin, [low, 0, low])
    np.testing.assert_array_equal(acos, [low, 2, low])
    np.testing.assert_array_equal(acosh, [low, low, 1])
    got = compare(unary_model(ops.exp, [2], np.int32), [np.array([100, 12], np.int32)], tmp_path)
    np.testing.assert_array_equal(next(iter(got.values())), [low, 162755])


@pytest.mark.parametrize("name", ["Sqrt", "Floor", "Ceiling", "Round-half_to_even", "Abs", "Sign", "Negative"])
def test_integers_i64_beyond_i32(name, tmp_path):
    """The CPU plugin computes i64 in i32 (2**40 loses its high bits) and Floor/Ceiling/Round of
    integers through f32 (2**31 - 1 becomes 2**31); OpenVINO's reference does neither, and irrun follows it.
    Sqrt(-1) of i64 is INT64_MIN there."""
    x = np.array([2**40, -2**40 - 1, 2**31 - 1, 2**53 + 1, 5, -1], np.int64)
    compare(unary_model(UNARY[name], [6], np.int64), [x], tmp_path, oracle="reference")


def test_integer_floor_beyond_f32_follows_reference(tmp_path):
    x = np.array([2**31 - 1, 16777217, -2**31], np.int32)
    got = compare(unary_model(ops.floor, [3], np.int32), [x], tmp_path, oracle="reference")
    np.testing.assert_array_equal(next(iter(got.values())), x)


def test_abs_and_negative_wrap(tmp_path):
    """C++ two's complement: Abs(INT_MIN) = -Negative(INT_MIN) = INT_MIN (CPU plugin and reference agree for i32).
    For i8 the CPU plugin saturates (Abs(-128) = 127); irrun wraps in i8 too."""
    x = np.array([np.iinfo(np.int32).min, -3, 3], np.int32)
    x_param = ops.parameter([3], np.int32)
    got = compare(ov.Model([ops.absolute(x_param), ops.negative(x_param)], [x_param]), [x], tmp_path)
    for out in got.values():
        assert out[0] == np.iinfo(np.int32).min


def test_negative_unsigned_wraps(tmp_path):
    """Negative of u8: the CPU plugin fails to compile it (it multiplies by a u8 -1) and the reference
    cannot evaluate u8; irrun wraps as unsigned arithmetic does: -1 -> 255, -200 -> 56."""
    xml = save(unary_model(ops.negative, [4], np.uint8), tmp_path)
    got = next(iter(irrun.load(xml).infer([np.array([0, 1, 200, 255], np.uint8)]).values()))
    np.testing.assert_array_equal(got, np.array([0, 255, 56, 1], np.uint8))


def test_integer_results_hand_checked(tmp_path):
    """Integers are computed in float and rounded to nearest: Sqrt(2) = 1, Sqrt(3) = 2, Exp(1) = 3, Log(2) = 1."""
    x_param = ops.parameter([4], np.int32)
    model = ov.Model([ops.sqrt(x_param), ops.exp(x_param), ops.log(x_param)], [x_param])
    sqrt, exp, log = compare(model, [np.array([1, 2, 3, 4], np.int32)], tmp_path).values()
    np.testing.assert_array_equal(sqrt, [1, 1, 2, 2])
    np.testing.assert_array_equal(exp, [3, 7, 20, 55])
    np.testing.assert_array_equal(log, [0, 1, 1, 1])


# ---------------------------------------------------------------- shapes

SHAPES = [([], []), ([-1, 3], [4, 3]), ([-1, -1, -1], [2, 1, 5]), ([0, 3], [0, 3]), ([-1, 4], [0, 4]),
          (ov.PartialShape([2, ov.Dimension(1, 8)]), [2, 6])]


@pytest.mark.parametrize("shape,concrete", SHAPES, ids=["scalar", "dyn-batch", "dyn-rank3", "empty", "dyn-empty",
                                                       "interval"])
def test_shapes(shape, concrete, tmp_path):
    """Every op of the family on scalars, dynamic dims (an interval too) and empty tensors, in one model."""
    x_param = ops.parameter(shape, np.float32)
    outputs = [make(x_param) for make in (*UNARY.values(), *FLOAT_TESTS.values())]
    x = np.random.default_rng(3).uniform(-0.9, 0.9, concrete).astype(np.float32)
    compare(ov.Model(outputs, [x_param]), [x], tmp_path)


def test_dynamic_rank(tmp_path):
    """The CPU plugin rejects a Parameter of dynamic rank, so OpenVINO's reference is the oracle here."""
    x_param = ops.parameter(ov.PartialShape.dynamic(), np.float32)
    model = ov.Model([ops.sqrt(x_param), ops.absolute(x_param), ops5.round(x_param, "half_to_even")], [x_param])
    compare(model, [np.arange(-6, 6, dtype=np.float32).reshape(2, 3, 2) / 4], tmp_path, oracle="reference")


# ---------------------------------------------------------------- ConvertLike

LIKE_TYPES = ["f32", "f16", "i64", "i32", "i8", "u8", "boolean"]
CONVERT_SOURCES = {
    "f32": np.array([-3.7, -2.5, -0.5, 0.0, 0.5, 2.5, 127.6, 255.5, 256.7, -129.0, 70000.0], np.float32),
    "f16": np.array([-1.5, 0.0, 2.75, 65504, -0.25], np.float16),
    "i32": np.array([-300, -129, -1, 0, 1, 127, 128, 255, 256, 65536], np.int32),
    "i64": np.array([-300, -1, 0, 1, 255, 256, 65536, 2**40], np.int64),
    "u8": np.array([0, 1, 127, 128, 255], np.uint8),
    "boolean": np.array([True, False, True]),
}


@pytest.mark.parametrize("src", CONVERT_SOURCES)
def test_convert_like(src, tmp_path):
    """data converted to each `like` type (a Const, as models have it), one model per source type."""
    x = CONVERT_SOURCES[src]
    x_param = ops.parameter(list(x.shape), getattr(ov.Type, src))
    likes = [ops.constant(np.zeros([2], getattr(ov.Type, t).to_dtype())) for t in LIKE_TYPES]
    model = ov.Model([ops.convert_like(x_param, like) for like in likes], [x_param])
    if src == "i64":
        # The CPU plugin computes i64 in int32 (2**40 loses its high bits).  OpenVINO's reference
        # cannot evaluate ConvertLike: the oracle is its evaluation of the equivalent Converts
        # (the CPU plugin, too, rewrites ConvertLike into Convert).
        expected = evaluate_reference(ov.Model([ops.convert(x_param, t) for t in LIKE_TYPES], [x_param]), [x])
        got = irrun.load(save(model, tmp_path)).infer([x])
        for (name, actual), exp in zip(got.items(), expected):
            assert_close(actual, exp, what=name)
    else:
        got = compare(model, [x], tmp_path)
    assert [str(a.dtype) for a in got.values()] == [str(getattr(ov.Type, t).to_dtype()) for t in LIKE_TYPES]


def test_convert_like_nan_hand_checked(tmp_path):
    """NaN -> boolean is True and NaN -> i32 is INT32_MIN, as OpenVINO's reference Convert gives
    (the CPU plugin gives False for boolean)."""
    x_param = ops.parameter([2], np.float32)
    likes = [ops.constant(np.zeros([1], t)) for t in (np.bool_, np.int32)]
    xml = save(ov.Model([ops.convert_like(x_param, like) for like in likes], [x_param]), tmp_path)
    boolean, i32 = irrun.load(xml).infer([np.array([np.nan, 2.9], np.float32)]).values()
    np.testing.assert_array_equal(boolean, [True, True])
    np.testing.assert_array_equal(i32, [np.iinfo(np.int32).min, 2])


def test_convert_like_parameter_and_dynamic_shape(tmp_path):
    """`like` fed at run time, of another shape: only its element type matters."""
    x_param, like_param = ops.parameter([-1, 3], np.float32), ops.parameter([-1], np.int8)
    model = ov.Model([ops.convert_like(x_param, like_param)], [x_param, like_param])
    x = np.array([[1.9, -1.9, 100.2], [0.0, 5.5, -7.5]], np.float32)
    got = compare(model, [x, np.zeros([5], np.int8)], tmp_path)
    np.testing.assert_array_equal(next(iter(got.values())), np.array([[1, -1, 100], [0, 5, -7]], np.int8))


# ---------------------------------------------------------------- validation

@pytest.mark.parametrize("op,version", [("Sqrt", "opset1"), ("Round", "opset5"), ("IsNaN", "opset10")])
def test_declared_shape_mismatch_is_reported(op, version, tmp_path):
    xml = hand_ir(tmp_path, op, [([2, 3], "FP32")], [3, 2], version=version, name="bad_out")
    report = irrun.validate(xml)
    assert any(e.code == "E-DECLARED-SHAPE" for e in report.errors), [e.format() for e in report.errors]


@pytest.mark.parametrize("op,precision", [("IsNaN", "I32"), ("IsInf", "I64"), ("IsFinite", "U8"), ("Abs", "BOOL")])
def test_unsupported_element_type_names_layer(op, precision, tmp_path):
    """IsNaN/IsInf/IsFinite take floating-point input only; Abs (like every math op) rejects boolean."""
    version = "opset1" if op == "Abs" else "opset10"
    xml = hand_ir(tmp_path, op, [([2, 3], precision)], [2, 3], version=version, name="bad_type")
    report = irrun.validate(xml)
    assert any(e.layer.name == "bad_type" and "element type" in e.message for e in report.errors), \
        [e.format() for e in report.errors]


def test_round_mode_is_checked(tmp_path):
    xml = hand_ir(tmp_path, "Round", [([2], "FP32")], [2], {"mode": "to_zero"}, version="opset5", name="r")
    report = irrun.validate(xml)
    assert any(e.code == "E-ATTR-ENUM" and e.layer.name == "r" for e in report.errors), \
        [e.format() for e in report.errors]


@pytest.mark.parametrize("absent", [["detect_negative", "detect_positive"], ["detect_negative"],
                                    ["detect_positive"]], ids=["both", "negative", "positive"])
def test_is_inf_attribute_defaults(absent, tmp_path):
    """An absent detect_negative / detect_positive reads as true, as in OpenVINO's IR reader."""
    model = unary_model(lambda p: ops10.is_inf(p, {"detect_negative": False, "detect_positive": False}), [3])
    xml = save(model, tmp_path)
    text = xml.read_text()
    for name in absent:
        text = re.sub(rf'\s{name}="\w+"', "", text)
    xml.write_text(text)
    x = np.array([np.inf, -np.inf, 1.0], np.float32)
    expected = run_openvino(xml, [x])[0]
    np.testing.assert_array_equal(expected, [name in absent for name in ("detect_positive", "detect_negative")]
                                  + [False])
    np.testing.assert_array_equal(next(iter(irrun.load(xml).infer([x]).values())), expected)
