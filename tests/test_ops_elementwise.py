"""Maximum, Minimum, Power, SquaredDifference, FloorMod, Mod, comparisons, logical and bitwise ops, Select
against OpenVINO: every auto_broadcast mode, element types, NaN/inf, empty and dynamic shapes.

The CPU plugin is the oracle, except where it is known to be wrong; those tests
use OpenVINO's reference evaluation (`oracle="reference"`) and say why
(details in specs/errata/elementwise.md):
- it computes i64 in i32 (every op) and integer FloorMod/Mod in f32 (wrong above 2**24);
- Maximum/Minimum pick the other operand on NaN and on +-0; Greater/GreaterEqual say true on NaN;
- it refuses a pdpd model whose axis is not the trailing one for comparisons,
  logical and bitwise ops, Mod and Select, and gets the shifts wrong.
The reference has no kernel for bitwise ops (except i32 shifts), float Mod, and
several narrow integer types; where neither is right, the test is hand-checked.
"""
from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset1 as ops
import pytest
from irxml import edge, layer, net, port, write
from openvino.utils.node_factory import NodeFactory
from ovutil import assert_close, compare, evaluate_reference, irrun_outputs, run_openvino, save

import irrun
from irrun.etypes import boolean, f32, from_precision
from irrun.registry import TensorType, implementation
from irrun.shapes import parse_partial_shape
from irrun.spec import all_specs, parse_attrs

PDPD_AXIS = "auto_broadcast.auto_broadcast_axis"
ARITHMETIC = ["Maximum", "Minimum", "Power", "SquaredDifference", "FloorMod", "Mod"]
COMPARISONS = ["Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual"]
LOGICAL = ["LogicalAnd", "LogicalOr", "LogicalXor", "Xor"]
BITWISE = ["BitwiseAnd", "BitwiseOr", "BitwiseXor"]
SHIFTS = ["BitwiseLeftShift", "BitwiseRightShift"]
OPSET = {**{op: "opset13" for op in BITWISE + ["BitwiseNot"]}, **{op: "opset15" for op in SHIFTS}}
BINARY = ARITHMETIC + COMPARISONS + LOGICAL + BITWISE + SHIFTS


# ---------------------------------------------------------------- helpers

def node(op_type: str, args, mode: str = "numpy", axis: int | None = None) -> ov.Node:
    """The op at the opset that has it; the node factory takes the pdpd axis the Python API lacks."""
    attributes = {} if op_type in ("LogicalNot", "BitwiseNot") else {"auto_broadcast": mode}
    if axis is not None:
        attributes[PDPD_AXIS] = axis
    return NodeFactory(OPSET.get(op_type, "opset1")).create(op_type, [a.output(0) for a in args], attributes)


def model(op_type: str, shapes, dtype=None, **kw) -> ov.Model:
    """One Parameter per shape (boolean first for Select), the op, a Result."""
    dtype = dtype or default_dtype(op_type)
    dtypes = [np.bool_] + [dtype] * 2 if op_type == "Select" else [dtype] * len(shapes)
    params = [ops.parameter(shape, t) for shape, t in zip(shapes, dtypes)]
    return ov.Model([node(op_type, params, **kw)], params)


def default_dtype(op_type: str):
    return np.bool_ if op_type in LOGICAL + ["LogicalNot"] else np.int32 if op_type.startswith("Bitwise") \
        else np.float32


def operands(op_type: str, shapes, dtype=None, seed=0) -> list[np.ndarray]:
    """Random operands that keep each op away from its edge cases (tested on their own)."""
    dtype = np.dtype(dtype or default_dtype(op_type))
    rng = np.random.default_rng(seed)
    if op_type == "Select":
        cond = rng.integers(0, 2, shapes[0]).astype(bool)
        return [cond] + operands("Maximum", shapes[1:], dtype, seed)
    if dtype == np.bool_:
        return [rng.integers(0, 2, s).astype(bool) for s in shapes]
    if op_type in SHIFTS:
        return [rng.integers(0, 100, shapes[0]).astype(dtype), rng.integers(0, 6, shapes[1]).astype(dtype)]
    lo = 0 if dtype.kind == "u" else -9
    if op_type == "Power":
        if dtype.kind == "f":
            return [rng.uniform(0.5, 3, shapes[0]).astype(dtype), rng.uniform(-2, 3, shapes[1]).astype(dtype)]
        return [rng.integers(max(lo, -4), 5, shapes[0]).astype(dtype), rng.integers(0, 4, shapes[1]).astype(dtype)]
    if op_type in ("FloorMod", "Mod"):
        divisor = rng.integers(1, 6, shapes[1]) * (1 if dtype.kind == "u" else rng.choice([-1, 1], shapes[1]))
        dividend = rng.uniform(-10, 10, shapes[0]) if dtype.kind == "f" else rng.integers(lo, 40, shapes[0])
        return [dividend.astype(dtype), divisor.astype(dtype)]
    # few distinct values, so comparisons see ties; u8 differences stay small enough to square
    return [rng.integers(lo, 10, s).astype(dtype) for s in shapes]


def make_op(op_type: str, version: int = 1, **attrs):
    """An irrun op instance, for hand-checked kernels and shape functions."""
    spec = all_specs()[(op_type, version)]
    parsed, problems = parse_attrs(spec, {k: str(v) for k, v in attrs.items()})
    assert not problems
    return implementation(op_type, version)(spec, parsed)


# ---------------------------------------------------------------- broadcasting: numpy, none, pdpd

NUMPY_SHAPES = [
    ([2, 1, 4], [3, 1]),          # both sides stretch, ranks differ
    ([], [2, 3]),                 # scalar operands
    ([2, 3, 4], [2, 3, 4]),
    ([1, 3, 1, 5], [2, 1, 4, 1]),
    ([2, 3], []),
]
# The broadcasting is shared: every op gets the first cases, one op per family gets them all.
FAMILY_REPRESENTATIVES = ["Maximum", "Less", "LogicalAnd", "BitwiseOr", "BitwiseLeftShift"]


def per_family(cases: list, every_op: int) -> list:
    """(op, *case) for the first `every_op` cases of every op, and all cases of the family representatives."""
    return [(op, *case) for op in BINARY for i, case in enumerate(cases)
            if i < every_op or op in FAMILY_REPRESENTATIVES]


@pytest.mark.parametrize("op_type,shape_a,shape_b", per_family(NUMPY_SHAPES, 2))
def test_numpy_broadcast(op_type, shape_a, shape_b, tmp_path):
    compare(model(op_type, [shape_a, shape_b]), operands(op_type, [shape_a, shape_b]), tmp_path)


@pytest.mark.parametrize("op_type", BINARY)
def test_none_equal_shapes(op_type, tmp_path):
    shapes = [[2, 3, 4], [2, 3, 4]]
    compare(model(op_type, shapes, mode="none"), operands(op_type, shapes), tmp_path)


PDPD_CASES = [
    ([2, 3, 4, 5], [3, 4], 1),
    ([2, 3, 4, 5], [4, 5], -1),   # -1: aligned to the end
    ([2, 3, 4, 5], [3, 1], 1),    # a trailing 1 of input 1 broadcasts too
    ([2, 3, 4], [2, 3, 4], 0),
]
# With a pdpd axis other than the trailing one the CPU plugin refuses these models (and gets the
# shifts wrong); it refuses float Mod with any pdpd.
CPU_NEEDS_TRAILING_PDPD = COMPARISONS + LOGICAL + BITWISE + SHIFTS + ["Mod"]
# The reference gets these wrong with a non-trailing axis: test_pdpd_greater_via_complement checks
# them through Less/LessEqual.
GREATER_COMPLEMENT = {"Greater": "LessEqual", "GreaterEqual": "Less"}


def trailing(shape_a, shape_b, axis) -> bool:
    return axis == -1 or axis == len(shape_a) - len(shape_b)


@pytest.mark.parametrize("op_type,shape_a,shape_b,axis", [
    (op, *case) for op, *case in per_family(PDPD_CASES, 2)
    # No OpenVINO path computes these: bitwise with a non-trailing axis (the reference has no kernel)
    if trailing(*case) or op not in BITWISE + list(GREATER_COMPLEMENT)])
def test_pdpd_broadcast(op_type, shape_a, shape_b, axis, tmp_path):
    oracle = "reference" if op_type == "Mod" or (op_type in CPU_NEEDS_TRAILING_PDPD
                                                  and not trailing(shape_a, shape_b, axis)) else "cpu"
    dtype = np.int32 if op_type == "Mod" else None   # the reference has no float Mod
    shapes = [shape_a, shape_b]
    m = model(op_type, shapes, dtype, mode="pdpd", axis=axis)
    got = compare(m, operands(op_type, shapes, dtype), tmp_path, oracle=oracle)
    assert next(iter(got.values())).shape == tuple(shape_a)   # pdpd keeps input 0's shape


@pytest.mark.parametrize("op_type", list(GREATER_COMPLEMENT))
def test_pdpd_greater_via_complement(op_type, tmp_path):
    """On NaN-free inputs Greater = not LessEqual: irrun's pdpd Greater against the reference's LessEqual.

    The CPU plugin refuses the model; the reference's own Greater/GreaterEqual pairs input 1's elements
    with the wrong positions here (see specs/errata/elementwise.md).
    """
    shapes = [[2, 3, 4, 5], [3, 4]]
    inputs = operands(op_type, shapes)
    got = irrun_outputs(model(op_type, shapes, mode="pdpd", axis=1), inputs, tmp_path)[0]
    complement = evaluate_reference(model(GREATER_COMPLEMENT[op_type], shapes, mode="pdpd", axis=1), inputs)[0]
    np.testing.assert_array_equal(got, ~complement)


def test_pdpd_bitwise_without_oracle(tmp_path):
    """No OpenVINO path computes BitwiseAnd with a non-trailing pdpd axis: hand-checked."""
    a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    b = np.array([1, 2, 4], np.int32)
    got = irrun_outputs(model("BitwiseAnd", [[2, 3, 4], [3]], np.int32, mode="pdpd", axis=1), [a, b], tmp_path)[0]
    np.testing.assert_array_equal(got, a & b.reshape(1, 3, 1))


def test_pdpd_axis_absent_means_zero(tmp_path):
    """As for Add: the IR reader takes axis 0 when pdpd comes without an axis."""
    m = model("Maximum", [[2, 3, 4], [2, 3]], mode="pdpd", axis=0)
    xml = save(m, tmp_path)
    text = xml.read_text()
    xml.write_text(text.replace(f' {PDPD_AXIS}="0"', ""))
    assert PDPD_AXIS not in xml.read_text()
    inputs = operands("Maximum", [[2, 3, 4], [2, 3]])
    assert_close(next(iter(irrun.load(xml).infer(inputs).values())), run_openvino(xml, inputs)[0])


# ---------------------------------------------------------------- element types

ARITHMETIC_TYPES = [np.float32, np.float16, np.int32, np.int64, np.uint8, np.int8]


# u8/i8 SquaredDifference: the CPU plugin returns 0 everywhere, the reference has no kernel
# (test_squared_difference_wraps is hand-checked).
@pytest.mark.parametrize("op_type,dtype", [(op, t) for op in ARITHMETIC for t in ARITHMETIC_TYPES
                                           if op != "SquaredDifference" or t not in (np.uint8, np.int8)])
def test_arithmetic_element_types(op_type, dtype, tmp_path):
    shapes = [[2, 3, 4], [3, 1]]
    got = compare(model(op_type, shapes, dtype), operands(op_type, shapes, dtype), tmp_path, rtol=1e-3)
    assert next(iter(got.values())).dtype == dtype


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.int64, np.uint8, np.int8, np.bool_])
@pytest.mark.parametrize("op_type", COMPARISONS)
def test_comparison_element_types(op_type, dtype, tmp_path):
    shapes = [[2, 3, 4], [3, 1]]
    got = compare(model(op_type, shapes, dtype), operands(op_type, shapes, dtype), tmp_path)
    assert next(iter(got.values())).dtype == np.bool_


BITWISE_TYPES = [np.bool_, np.int32, np.int64, np.uint8, np.int8, np.uint16]


@pytest.mark.parametrize("dtype", BITWISE_TYPES)
@pytest.mark.parametrize("op_type", BITWISE + ["BitwiseNot"])
def test_bitwise_element_types(op_type, dtype, tmp_path):
    """Negative and all-ones values; i64 stays within i32 (the CPU plugin computes i64 in i32)."""
    if dtype == np.bool_:
        a, b = operands("LogicalAnd", [[4, 5], [5]])
    else:
        info = np.iinfo(dtype)
        rng = np.random.default_rng(1)
        lo, hi = max(info.min, -(1 << 31)), min(info.max, (1 << 31) - 1)
        a = rng.integers(lo, hi, [4, 5], endpoint=True).astype(dtype)
        b = np.array([0, lo, hi, -1 if lo < 0 else 7, 0b1010], dtype)
    shapes = [[4, 5], [5]]
    inputs = [a] if op_type == "BitwiseNot" else [a, b]
    compare(model(op_type, shapes[:len(inputs)], dtype), inputs, tmp_path)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.int8, np.uint16, np.uint32])
@pytest.mark.parametrize("op_type", SHIFTS)
def test_shift_element_types(op_type, dtype, tmp_path):
    shapes = [[3, 4], [4]]
    compare(model(op_type, shapes, dtype), operands(op_type, shapes, dtype), tmp_path)


@pytest.mark.parametrize("op_type", LOGICAL)
def test_logical_truth_table(op_type, tmp_path):
    a, b = np.array([False, False, True, True]), np.array([False, True, False, True])
    compare(model(op_type, [[4], [4]], np.bool_), [a, b], tmp_path)


def test_logical_xor_is_written_as_opset2(tmp_path):
    """The serializer writes LogicalXor with version="opset2"; the parser resolves it to LogicalXor-1."""
    xml = save(model("LogicalXor", [[2], [2]], np.bool_), tmp_path)
    assert 'type="LogicalXor" version="opset2"' in xml.read_text()
    assert irrun.validate(xml).ok


@pytest.mark.parametrize("dtype", [np.bool_, np.float32, np.float16, np.int32, np.uint8])
def test_logical_not(dtype, tmp_path):
    """The spec allows boolean only; OpenVINO also takes numbers and gives x == 0 in x's type."""
    values = {np.bool_: [True, False, True], np.float32: [0, -0.0, 1.5, -2, np.nan, np.inf],
              np.float16: [0, 1, -0.5, np.nan], np.int32: [0, 1, -7, 5], np.uint8: [0, 1, 255, 0]}[dtype]
    x = np.array(values, dtype)
    got = compare(model("LogicalNot", [list(x.shape)], dtype), [x], tmp_path)
    assert next(iter(got.values())).dtype == dtype


# ---------------------------------------------------------------- Maximum, Minimum: NaN, inf, signed zeros

NAN, INF = np.nan, np.inf
SPECIAL_A = [NAN, 1, NAN, INF, -INF, 0.0, -0.0, 3, NAN, 2]
SPECIAL_B = [1, NAN, NAN, 1, 1, -0.0, 0.0, -INF, INF, 2]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("op_type", ["Maximum", "Minimum"])
def test_max_min_nan_and_signed_zero(op_type, dtype, tmp_path):
    """std::max/min as the reference: a NaN in input 0 is kept, one in input 1 is not; the CPU plugin does the reverse."""
    a, b = np.array(SPECIAL_A, dtype), np.array(SPECIAL_B, dtype)
    m = model(op_type, [[10], [10]], dtype)
    got = compare(m, [a, b], tmp_path, oracle="reference")
    expected = evaluate_reference(m, [a, b])[0]
    out = next(iter(got.values()))
    np.testing.assert_array_equal(np.signbit(out), np.signbit(expected))
    np.testing.assert_array_equal(out[:2], [NAN, 1])   # std::max(NaN, 1) and std::max(1, NaN), min alike


@pytest.mark.parametrize("op_type", ["Maximum", "Minimum", "SquaredDifference"])
def test_infinities_without_nan(op_type, tmp_path):
    """Where no NaN or signed zero is involved the CPU plugin agrees."""
    a = np.array([INF, -INF, 5, INF, -INF, 1e30], np.float32)
    b = np.array([1, 1, -INF, -INF, INF, -1e30], np.float32)
    compare(model(op_type, [[6], [6]]), [a, b], tmp_path)


@pytest.mark.parametrize("op_type", ["Maximum", "Minimum"])
def test_max_min_i64_extremes(op_type, tmp_path):
    """Reference: the CPU plugin computes i64 in i32."""
    info = np.iinfo(np.int64)
    a = np.array([3, info.max, info.min, 1 << 40, -(1 << 40)], np.int64)
    b = np.array([5, info.min, info.max, (1 << 40) + 1, 0], np.int64)
    compare(model(op_type, [[5], [5]], np.int64), [a, b], tmp_path, oracle="reference")


# ---------------------------------------------------------------- comparisons: NaN, inf, large i64

@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("op_type", COMPARISONS)
def test_comparison_nan_inf(op_type, dtype, tmp_path):
    """IEEE: NaN compares false (NotEqual true). The CPU plugin's Greater/GreaterEqual say true: reference there."""
    a, b = np.array(SPECIAL_A, dtype), np.array(SPECIAL_B, dtype)
    oracle = "reference" if op_type in ("Greater", "GreaterEqual") else "cpu"
    compare(model(op_type, [[10], [10]], dtype), [a, b], tmp_path, oracle=oracle)


@pytest.mark.parametrize("op_type", COMPARISONS)
def test_comparison_large_i64(op_type, tmp_path):
    """Reference: the CPU plugin computes i64 in i32, so 2**40 == 0 there."""
    a = np.array([1 << 40, (1 << 40) + 1, -(1 << 40), 5, np.iinfo(np.int64).max], np.int64)
    b = np.array([0, 1, (1 << 40) + 1, 5, np.iinfo(np.int64).min], np.int64)
    compare(model(op_type, [[5], [5]], np.int64), [a, b], tmp_path, oracle="reference")


def test_comparisons_hand_checked():
    """Spec-style example: Less([1, 2, 3, nan], [2, 2, 1, 1])."""
    a, b = np.array([1, 2, 3, NAN], np.float32), np.array([2, 2, 1, 1], np.float32)
    expected = {"Equal": [0, 1, 0, 0], "NotEqual": [1, 0, 1, 1], "Less": [1, 0, 0, 0], "LessEqual": [1, 1, 0, 0],
                "Greater": [0, 0, 1, 0], "GreaterEqual": [0, 1, 1, 0]}
    for op_type, want in expected.items():
        np.testing.assert_array_equal(make_op(op_type).run(a, b), np.array(want, bool), err_msg=op_type)


# ---------------------------------------------------------------- FloorMod, Mod

DIVIDENDS = [7, -7, 7, -7, 6, -6, 0, 1, -1, 100, -100, 5]
DIVISORS = [3, 3, -3, -3, 3, -3, 5, -5, 5, 7, 7, -1]


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int8, np.float32, np.float16])
@pytest.mark.parametrize("op_type", ["FloorMod", "Mod"])
def test_remainder_signs(op_type, dtype, tmp_path):
    """FloorMod takes the divisor's sign, Mod the dividend's."""
    a, b = np.array(DIVIDENDS, dtype), np.array(DIVISORS, dtype)
    compare(model(op_type, [[12], [12]], dtype), [a, b], tmp_path)


def test_remainder_spec_examples(tmp_path):
    """Hand-checked: FloorMod([7,-7,7,-7], [3,3,-3,-3]) = [1,2,-2,-1]; Mod gives [1,-1,1,-1]; floats alike."""
    for dtype in (np.int32, np.float32):
        a, b = np.array([7, -7, 7, -7, 5.5 if dtype == np.float32 else 5], dtype), np.array([3, 3, -3, -3, 2], dtype)
        for op_type, want in [("FloorMod", [1, 2, -2, -1]), ("Mod", [1, -1, 1, -1])]:
            got = irrun_outputs(model(op_type, [[5], [5]], dtype), [a, b], tmp_path / f"{op_type}{dtype.__name__}")[0]
            np.testing.assert_array_equal(got[:4], want)
            assert got[4] == (1.5 if dtype == np.float32 else 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("op_type", ["FloorMod", "Mod"])
def test_remainder_float_specials(op_type, dtype, tmp_path):
    """x mod inf and inf mod x are NaN (the formula a - b * round(a / b), unlike fmod); x mod 0 is NaN."""
    a = np.array([5.5, -5.5, 5.5, -5.5, INF, 1, NAN, 2, 0, -0.0], dtype)
    b = np.array([2, 2, -2, -2, 2, INF, 2, NAN, 0, 3], dtype)
    compare(model(op_type, [[10], [10]], dtype), [a, b], tmp_path)


@pytest.mark.parametrize("op_type", ["FloorMod", "Mod"])
def test_remainder_large_integers(op_type, tmp_path):
    """Reference: the CPU plugin computes integer remainders in f32 (16777217 mod 2 = 0 there)."""
    a = np.array([16777217, -16777217, 2**31 - 1, -2**31, 123456789], np.int32)
    b = np.array([2, 2, 10, 7, -1000], np.int32)
    compare(model(op_type, [[5], [5]], np.int32), [a, b], tmp_path, oracle="reference")
    a64 = np.array([2**40 + 3, -(2**40) - 3, 3, 2**33], np.int64)
    b64 = np.array([7, 7, 2**35, 2**32 + 1], np.int64)
    compare(model(op_type, [[4], [4]], np.int64), [a64, b64], tmp_path / "i64", oracle="reference")


def test_floor_mod_i64_beyond_double_follows_reference(tmp_path):
    """The reference computes signed FloorMod in double: (2**62 + 1) mod -10 is 0 there, not -5."""
    a, b = np.array([2**62 + 1, -(2**60) - 7], np.int64), np.array([-10, 3], np.int64)
    got = compare(model("FloorMod", [[2], [2]], np.int64), [a, b], tmp_path, oracle="reference")
    assert next(iter(got.values()))[0] == 0


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int8])
def test_floor_mod_by_zero_signed(dtype, tmp_path):
    """Reference: x - 0 * floor(x / 0.0) is NaN, cast to the type (INT_MIN for i32/i64, its low byte 0 for i8).
    The CPU plugin agrees on i32 only."""
    a, b = np.array([5, 0, -7], dtype), np.array([0, 0, 0], dtype)
    compare(model("FloorMod", [[3], [3]], dtype), [a, b], tmp_path, oracle="reference")


@pytest.mark.parametrize("op_type,dtype", [("Mod", np.int32), ("Mod", np.uint8), ("FloorMod", np.uint8)])
def test_integer_remainder_by_zero_on_cpu(op_type, dtype, tmp_path):
    """The reference dies here (C++ integer % 0); irrun gives the signed FloorMod value, as the CPU plugin does."""
    a, b = np.array([5, 0, 7], dtype), np.array([0, 0, 3], dtype)
    compare(model(op_type, [[3], [3]], dtype), [a, b], tmp_path)


def test_mod_by_zero_i64_and_int_min(tmp_path):
    """Hand-checked (the reference traps, the CPU plugin computes i64 in i32): x % 0 is INT64_MIN; INT_MIN % -1 is 0."""
    got = irrun_outputs(model("Mod", [[3], [3]], np.int64), [np.array([5, -(1 << 63), 9], np.int64),
                                                              np.array([0, -1, 4], np.int64)], tmp_path)[0]
    np.testing.assert_array_equal(got, [-(1 << 63), 0, 1])


# ---------------------------------------------------------------- Power

@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_power_integer_negative_exponents(dtype, tmp_path):
    """std::pow in double, then cast: 2 ** -1 = 0, (-1) ** -3 = -1, 0 ** -1 and overflow -> INT_MIN pattern.
    Reference for i64 (the CPU plugin computes it in i32)."""
    a = np.array([2, -2, 2, -2, 1, -1, 0, 3, -3, 0, 2, 3], dtype)
    b = np.array([3, 3, -1, -1, -5, -3, 0, 4, 5, -1, 31 if dtype == np.int32 else 62, 40], dtype)
    compare(model("Power", [[12], [12]], dtype), [a, b], tmp_path, oracle="reference" if dtype == np.int64 else "cpu")


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_power_float_specials(dtype, tmp_path):
    a = np.array([-2, NAN, 1, INF, 0.5, -8, 2, 0, -0.0, 2, 3], dtype)
    b = np.array([0.5, 0, NAN, -1, INF, 1 / 3, 0.5, -1, -1, 31, 40], dtype)
    compare(model("Power", [[11], [11]], dtype), [a, b], tmp_path)


@pytest.mark.parametrize("exponent", [2.0, 0.5, 3.0])
@pytest.mark.parametrize("exponent_shape", [[], [1], [1, 1, 1]])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("dynamic", [False, True])
def test_power_by_a_constant_square_or_root(exponent, exponent_shape, dtype, dynamic, tmp_path, monkeypatch):
    """x ** 2 and x ** 0.5 by a constant run as np.square and np.sqrt (arithmetic.power_ufunc), on
    their own and inside a fused chain (after an Add), optimised or not; other exponents np.power.
    Zeros, infinities and NaN among the data (NumPy's power and OpenVINO's give sqrt's -0 and NaN)."""
    from irrun.ops import arithmetic
    chosen = []
    real = arithmetic.power_ufunc
    monkeypatch.setattr(arithmetic, "power_ufunc", lambda e: chosen.append(real(e)) or chosen[-1])
    rng = np.random.default_rng(5)
    x = rng.uniform(-3, 3, [2, 4, 32, 32]).astype(dtype)
    x.reshape(-1)[:7] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30]
    p = ops.parameter([-1, 4, 32, 32] if dynamic else [2, 4, 32, 32], dtype)
    e = ops.constant(np.full(exponent_shape, exponent, dtype))
    alone = ops.power(p, e)
    chained = ops.power(ops.add(p, ops.constant(np.full([1, 4, 1, 1], 0.25, dtype))), e)
    m = ov.Model([ops.result(alone), ops.result(chained)], [p])
    for optimize in ("1", "0"):
        monkeypatch.setenv("IRRUN_OPTIMIZE", optimize)
        if dtype == np.float32:
            compare(m, [x], tmp_path)
        else:   # (the CPU plugin computes f64 in f32, and OpenVINO's reference has no f64 Power)
            got = list(irrun.load(save(m, tmp_path)).infer([x]).values())
            with np.errstate(all="ignore"):
                expected = [np.power(x, exponent), np.power(x + dtype(0.25), exponent)]
            for g, want in zip(got, expected, strict=True):
                np.testing.assert_array_equal(g, want)
    if exponent in (2.0, 0.5):
        assert any(u is not None for u in chosen)


def test_power_u32_above_int32(tmp_path):
    """Reference: 3 ** 20 = 3486784401 fits u32; the CPU plugin's conversion stops at 2**31."""
    a, b = np.array([2, 3, 7, 2], np.uint32), np.array([31, 20, 11, 32], np.uint32)
    compare(model("Power", [[4], [4]], np.uint32), [a, b], tmp_path, oracle="reference")


def test_power_u8_in_range(tmp_path):
    a, b = np.array([2, 3, 0, 0, 1, 15, 255, 7], np.uint8), np.array([3, 2, 0, 3, 200, 2, 1, 1], np.uint8)
    compare(model("Power", [[8], [8]], np.uint8), [a, b], tmp_path)


def test_power_narrow_overflow_wraps():
    """Hand-checked: the cast keeps the low byte (the CPU plugin saturates; the reference has no u8/i8 kernel)."""
    op = make_op("Power")
    np.testing.assert_array_equal(op.run(np.array([2, 16], np.uint8), np.array([8, 2], np.uint8)), [0, 0])
    np.testing.assert_array_equal(op.run(np.array([2, -3], np.int8), np.array([7, 5], np.int8)), [-128, 13])


# ---------------------------------------------------------------- SquaredDifference

@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int32])
def test_squared_difference_wraps(dtype):
    """Hand-checked (a - b) ** 2 modulo 2**bits: the CPU plugin gives 0 for every u8/i8 element and the
    reference has no integer kernel."""
    a, b = np.array([5, 3, 10, 1, 15, 0], dtype), np.array([3, 5, 1, 10, 0, 15], dtype)
    want = (a.astype(np.int64) - b.astype(np.int64)) ** 2
    got = make_op("SquaredDifference").run(a, b)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, want.astype(dtype))   # 81 and 225 wrap in i8 to 81 and -31


def test_squared_difference_i32_overflow(tmp_path):
    info = np.iinfo(np.int32)
    a, b = np.array([3, info.max, info.min, 0], np.int32), np.array([5, info.min, info.max, 50000], np.int32)
    compare(model("SquaredDifference", [[4], [4]], np.int32), [a, b], tmp_path)


# ---------------------------------------------------------------- shifts

@pytest.mark.parametrize("op_type", SHIFTS)
def test_shift_counts_out_of_range_i32(op_type, tmp_path):
    """Counts >= 32 or negative are taken modulo 32 (x86 shl/sar); the CPU plugin and the reference agree on i32."""
    a = np.array([1, 1, 1, 1, 1, -8, -8, 5, 5, 3, 3, -1], np.int32)
    b = np.array([0, 31, 32, 33, 64, 1, 2, -1, 40, 100, -33, 31], np.int32)
    m = model(op_type, [[12], [12]], np.int32)
    compare(m, [a, b], tmp_path)
    compare(m, [a, b], tmp_path / "ref", oracle="reference")


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.uint32])
@pytest.mark.parametrize("op_type", SHIFTS)
def test_shift_counts_out_of_range_narrow(op_type, dtype, tmp_path):
    """Narrow types are promoted to int first: u8 1 << 8 is 0 (not 1), 1 << 33 is 2 (count modulo 32)."""
    signed = np.dtype(dtype).kind == "i"
    bits = np.dtype(dtype).itemsize * 8
    a = np.array([1, 1, 1, 1, 1, -8 if signed else 200, 5, 5, 3, 3], dtype)
    b = np.array([0, bits - 1, bits, bits + 1, 33, 2, -1 if signed else 255, 40, 100, -33 if signed else 127], dtype)
    compare(model(op_type, [[10], [10]], dtype), [a, b], tmp_path)


def test_shift_i64_hand_checked():
    """The CPU plugin computes i64 in i32 and the reference has no i64 kernel: hand-checked, counts modulo 64."""
    a = np.array([1, 1, 1, -8, 5, 1 << 40], np.int64)
    b = np.array([40, 63, 64, 1, -1, 65], np.int64)
    np.testing.assert_array_equal(make_op("BitwiseLeftShift", 15).run(a, b),
                                  [1 << 40, -(1 << 63), 1, -16, -(1 << 63), 1 << 41])
    np.testing.assert_array_equal(make_op("BitwiseRightShift", 15).run(a, b), [0, 0, 1, -4, 0, 1 << 39])


# ---------------------------------------------------------------- Select

SELECT_SHAPES = [
    ([2, 3], [2, 3], [2, 3]),
    ([3], [2, 3], [2, 1]),            # three-way, ranks differ
    ([2, 1, 4], [3, 1], [1]),
    ([], [2, 3], []),                 # scalar cond and else
    ([2, 3], [], [2, 3]),
]


@pytest.mark.parametrize("shapes", SELECT_SHAPES)
def test_select_numpy(shapes, tmp_path):
    compare(model("Select", shapes), operands("Select", shapes), tmp_path)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.int64, np.uint8, np.bool_])
def test_select_element_types(dtype, tmp_path):
    shapes = [[2, 3], [2, 3], [3]]
    cond = operands("Select", shapes)[0]
    values = operands("LogicalAnd" if dtype == np.bool_ else "Maximum", shapes[1:], dtype, seed=3)
    got = compare(model("Select", shapes, dtype), [cond, *values], tmp_path)
    assert next(iter(got.values())).dtype == dtype


def test_select_nan_and_large_i64(tmp_path):
    """NaN passes through; large i64 against the reference (the CPU plugin computes i64 in i32)."""
    cond = np.array([True, False, True, False])
    compare(model("Select", [[4]] * 3), [cond, np.array([NAN, 1, INF, 3], np.float32),
                                         np.array([5, NAN, 7, -INF], np.float32)], tmp_path)
    compare(model("Select", [[4]] * 3, np.int64), [cond, np.array([1 << 40, 1, 2, 3], np.int64),
                                                   np.array([4, -(1 << 50), 6, 7], np.int64)],
            tmp_path / "i64", oracle="reference")


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64, np.uint8])
def test_select_large_in_parts(dtype, tmp_path):
    """A mask over 64 x 128 x 128 (torch.where in a segmentation head) in parts and blocks by the
    values' bits: cond broadcast over channels, else one value per channel; NaN, infinities and
    -0.0 kept."""
    shapes = [[1, 1, 128, 128], [1, 64, 128, 128], [1, 64, 1, 1]]
    rng = np.random.default_rng(8)
    cond, then, other = operands("Select", shapes)[0], rng.standard_normal(shapes[1]), rng.standard_normal(shapes[2])
    if dtype == np.float32:
        then.reshape(-1)[:4], other.reshape(-1)[:2] = [NAN, INF, -INF, -0.0], [NAN, -0.0]
    got = compare(model("Select", shapes, dtype), [cond, then.astype(dtype), (other * 9).astype(dtype)], tmp_path)
    result = next(iter(got.values()))
    assert result.dtype == dtype
    np.testing.assert_array_equal(np.signbit(result), np.signbit(np.where(cond, then.astype(dtype),
                                                                           (other * 9).astype(dtype))))


def test_select_none(tmp_path):
    shapes = [[2, 3, 4]] * 3
    compare(model("Select", shapes, mode="none"), operands("Select", shapes), tmp_path)


@pytest.mark.parametrize("shapes,axis", [
    (([2, 3, 4, 5], [2, 3, 4, 5], [4, 5]), -1),
    (([4, 5], [2, 3, 4, 5], [2, 3, 4, 5]), -1),
    (([3, 4], [2, 3, 4, 5], [3, 1]), 1),
    (([2, 3, 4, 5], [2, 3, 4, 5], [2]), 0),
    (([2, 3], [2, 3, 4], [2, 3]), 0),
])
def test_select_pdpd(shapes, axis, tmp_path):
    """Else and cond stretch into then; the CPU plugin refuses any axis but the trailing one."""
    trailing = all(axis == -1 or axis == len(shapes[1]) - len(s) for s in (shapes[0], shapes[2]))
    got = compare(model("Select", list(shapes), mode="pdpd", axis=axis), operands("Select", list(shapes)), tmp_path,
                  oracle="cpu" if trailing else "reference")
    assert next(iter(got.values())).shape == tuple(shapes[1])


# ---------------------------------------------------------------- empty tensors, dynamic shapes

@pytest.mark.parametrize("op_type", ["Maximum", "FloorMod", "Less", "LogicalOr", "BitwiseXor", "BitwiseLeftShift"])
def test_empty_tensors(op_type, tmp_path):
    shapes = [[2, 0, 3], [3]]
    got = compare(model(op_type, shapes, default_dtype(op_type)), operands(op_type, shapes), tmp_path)
    assert next(iter(got.values())).shape == (2, 0, 3)


def test_empty_select_and_not(tmp_path):
    shapes = [[0, 1], [1, 3], [3]]
    compare(model("Select", shapes), operands("Select", shapes), tmp_path)
    compare(model("LogicalNot", [[0, 2]], np.bool_), [np.zeros((0, 2), bool)], tmp_path / "not")


DYNAMIC_CASES = [
    ([-1, 3], [2, 3], [1, 3]),
    (ov.PartialShape([2, ov.Dimension(1, 8), 4]), [2, 6, 4], [1, 1, 4]),
]


@pytest.mark.parametrize("op_type,shape_a,concrete_a,shape_b", per_family(DYNAMIC_CASES, 1))
def test_dynamic_shapes(op_type, shape_a, concrete_a, shape_b, tmp_path):
    compare(model(op_type, [shape_a, shape_b]), operands(op_type, [concrete_a, shape_b]), tmp_path)


@pytest.mark.parametrize("mode", ["numpy", "none", "pdpd"])
def test_dynamic_select(mode, tmp_path):
    static = [[2, 3, 4], [2, 3, 4], [2, 3, 4] if mode == "none" else [4]]
    dynamic = [[-1, 3, -1], [2, -1, 4], [-1, -1, -1] if mode == "none" else [-1]]
    compare(model("Select", dynamic, mode=mode, axis=-1 if mode == "pdpd" else None), operands("Select", static),
            tmp_path)


@pytest.mark.parametrize("op_type", ["Power", "GreaterEqual", "LogicalXor", "BitwiseOr", "LogicalNot", "Select"])
def test_dynamic_rank(op_type, tmp_path):
    """The CPU plugin takes no dynamic-rank input: irrun on the dynamic-rank IR against OpenVINO on the static one."""
    shapes = {"LogicalNot": [[2, 3]], "Select": [[2, 3], [2, 3], [3]]}.get(op_type, [[2, 3], [3]])
    inputs = operands(op_type, shapes)
    expected = run_openvino(save(model(op_type, shapes, default_dtype(op_type)), tmp_path / "static"), inputs)
    dynamic = [ov.PartialShape.dynamic()] + shapes[1:]
    xml = save(model(op_type, dynamic, default_dtype(op_type)), tmp_path / "dynamic")
    assert irrun.validate(xml).ok
    for got, exp in zip(irrun.load(xml).infer(inputs).values(), expected):
        assert_close(got, exp)


def test_constant_operands(tmp_path):
    """Constants, f16-compressed too, feeding comparisons and Select."""
    x = ops.parameter([2, 3], np.float32)
    limit = ops.constant(np.array([0.5, -1.25, 3.0], np.float32))
    mask = ops.greater_equal(x, limit)
    clipped = ops.select(mask, ops.minimum(x, ops.constant(np.float32(2.5))), limit)
    m = ov.Model([clipped, mask], [x])
    data = [np.array([[0, 1, 4], [-2, 2, 3]], np.float32)]
    compare(m, data, tmp_path)
    compare(m, data, tmp_path / "compressed", compress=True)


# ---------------------------------------------------------------- shape function against OpenVINO's

D = ov.Dimension


def as_irrun_shape(shape: ov.PartialShape):
    return parse_partial_shape(str(shape))


@pytest.mark.parametrize("mode,shapes,axis", [
    ("numpy", ([-1], [2, -1], [D(1, 4), 3]), None),
    ("numpy", ([D(2, 5)], [3, 1], [1]), None),
    ("numpy", (ov.PartialShape.dynamic(), [2, 3], [3]), None),
    ("none", ([-1, 3], [2, -1], [2, 3]), None),
    ("none", ([D(1, 5), 3], [D(3, 8), 3], [-1, -1]), None),
    ("pdpd", ([3], [2, -1, 4], [-1, 4]), 1),
    ("pdpd", ([3, 1], [2, D(2, 6), 4], [D(3, 8)]), 1),   # else narrows then's 2..6 to 3..6, cond to 3
    ("pdpd", ([4], [2, 3, 4], ov.PartialShape.dynamic()), -1),
    ("pdpd", ([4], ov.PartialShape.dynamic(), [4]), -1),
])
def test_select_shape_function_matches_openvino(mode, shapes, axis):
    params = [ops.parameter(ov.PartialShape(s), t) for s, t in zip(shapes, (np.bool_, np.float32, np.float32))]
    expected = node("Select", params, mode=mode, axis=axis).get_output_partial_shape(0)
    op = make_op("Select", auto_broadcast=mode, **({PDPD_AXIS: axis} if axis is not None else {}))
    types = [TensorType(as_irrun_shape(p.get_output_partial_shape(0)), t) for p, t in zip(params, (boolean, f32, f32))]
    assert op.infer(types)[0].shape == as_irrun_shape(expected)


# ---------------------------------------------------------------- validate

def single_op_ir(tmp_path, op_type: str, inputs: list[tuple[list[int], str]], output: tuple[list[int], str],
                 attrs=None, version="opset1", name="the_op"):
    """Parameters -> one `op_type` layer named `name` -> Result; unlike irxml.hand_ir the output precision is free."""
    n = len(inputs)
    layers = [layer(i, f"in{i}", "Parameter", data={"shape": ",".join(map(str, dims)),
                                                    "element_type": from_precision(prec).name},
                    outputs=[port(0, dims, prec)]) for i, (dims, prec) in enumerate(inputs)]
    layers.append(layer(n, name, op_type, version, data=attrs or {},
                        inputs=[port(i, dims, prec) for i, (dims, prec) in enumerate(inputs)],
                        outputs=[port(n, *output)]))
    layers.append(layer(n + 1, "out", "Result", inputs=[port(0, *output)]))
    edges = [edge(i, 0, n, i) for i in range(n)] + [edge(n, n, n + 1, 0)]
    return write(tmp_path, net(layers, edges), name="hand")


def _errors_at(xml, name: str) -> list:
    report = irrun.validate(xml)
    assert not report.ok
    return [e for e in report.errors if e.layer is not None and e.layer.name == name]


@pytest.mark.parametrize("op_type,version,precisions,words", [
    ("Equal", "opset1", ("FP32", "FP16"), "same element type"),
    ("Maximum", "opset1", ("I32", "I64"), "same element type"),
    ("BitwiseAnd", "opset13", ("I32", "U8"), "same element type"),
    ("LogicalAnd", "opset1", ("FP32", "FP32"), "boolean"),
    ("LogicalOr", "opset1", ("I32", "I32"), "boolean"),
    ("BitwiseXor", "opset13", ("FP32", "FP32"), "integer or boolean"),
    ("BitwiseLeftShift", "opset15", ("BOOL", "BOOL"), "integer"),
    ("Power", "opset1", ("BOOL", "BOOL"), "element type"),
])
def test_validate_element_types(op_type, version, precisions, words, tmp_path):
    """irrun refuses what OpenVINO refuses, with an error at the layer."""
    params = [ov.op.Parameter(getattr(ov.Type, from_precision(p).name), ov.PartialShape([2, 3])) for p in precisions]
    with pytest.raises(RuntimeError):
        NodeFactory(version).create(op_type, [p.output(0) for p in params], {})
    xml = single_op_ir(tmp_path, op_type, [([2, 3], precisions[0]), ([2, 3], precisions[1])], ([2, 3], "BOOL"),
                       version=version, name="bad_op")
    errors = _errors_at(xml, "bad_op")
    assert any(words in e.message for e in errors), [e.format() for e in errors]
    assert "bad_op" in errors[0].format()


@pytest.mark.parametrize("op_type,inputs,attrs,words", [
    ("Less", [([2, 3], "FP32"), ([4], "FP32")], {}, "do not broadcast"),
    ("LogicalXor", [([2, 3], "BOOL"), ([1, 3], "BOOL")], {"auto_broadcast": "none"}, "equal shapes"),
    ("FloorMod", [([2, 3], "FP32"), ([2, 3], "FP32")], {"auto_broadcast": "pdpd", PDPD_AXIS: "1"}, "does not fit"),
    ("Select", [([2, 3], "BOOL"), ([2, 3], "FP32"), ([4], "FP32")], {}, "then (input 1) [2,3] does not broadcast with else (input 2) [4]"),
    ("Select", [([5], "BOOL"), ([2, 3], "FP32"), ([3], "FP32")], {}, "cond (input 0) [5] does not broadcast with then/else [2,3]"),
    ("Select", [([2, 3], "BOOL"), ([2, 3], "FP32"), ([2], "FP32")], {"auto_broadcast": "pdpd", PDPD_AXIS: "-1"},
     "else (input 2)"),
    ("Select", [([2, 3], "FP32"), ([2, 3], "FP32"), ([2, 3], "FP32")], {}, "cond (input 0) must be boolean"),
    ("Select", [([2, 3], "BOOL"), ([2, 3], "FP32"), ([2, 3], "I32")], {}, "one element type"),
])
def test_validate_inconsistent_operands_names_layer(op_type, inputs, attrs, words, tmp_path):
    out_precision = "BOOL" if op_type not in ("FloorMod", "Select") else "FP32"
    xml = single_op_ir(tmp_path, op_type, inputs, ([2, 3], out_precision), attrs, name="bad_op")
    errors = _errors_at(xml, "bad_op")
    assert any(words in e.message for e in errors), [e.format() for e in errors]
    with pytest.raises(irrun.errors.IrrunError, match="bad_op"):
        irrun.load(xml)


def test_validate_wrong_declared_output(tmp_path):
    xml = single_op_ir(tmp_path, "Select", [([3], "BOOL"), ([2, 1], "FP32"), ([4, 1, 1], "FP32")], ([4, 2, 4], "FP32"),
                       name="sel")
    errors = _errors_at(xml, "sel")
    assert [e.code for e in errors] == ["E-DECLARED-SHAPE"]
    assert "inferred [4,2,3]; dim 2 = broadcast of cond's 3, then's 1 and else's 1" in errors[0].message


def test_validate_comparison_declares_boolean(tmp_path):
    """A comparison's output is boolean: an IR that declares f32 there gets E-DECLARED-TYPE."""
    xml = single_op_ir(tmp_path, "Greater", [([2, 3], "FP32"), ([3], "FP32")], ([2, 3], "FP32"), name="gt")
    assert [e.code for e in _errors_at(xml, "gt")] == ["E-DECLARED-TYPE"]
