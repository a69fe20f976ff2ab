"""Add, Subtract, Multiply, Divide against OpenVINO: every auto_broadcast mode, dtypes, dynamic shapes.

Integer Divide is checked against OpenVINO's reference evaluation, not the CPU
plugin: the plugin divides integers in f32, so it truncates where the spec
floors (m_pythondiv) and loses precision above 2**24 (specs/errata/arithmetic.md).
The helper `hand_ir` (tests/irxml.py) writes single-op IRs by hand for validate tests.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset1 as ops
import pytest
from openvino.utils.node_factory import NodeFactory
from irxml import hand_ir
from ovutil import assert_close, compare, run_openvino, save

import irrun
from irrun.ops.arithmetic import broadcast_binary
from irrun.shapes import parse_partial_shape

FACTORY = NodeFactory("opset1")
PDPD_AXIS = "auto_broadcast.auto_broadcast_axis"
OPS = ["Add", "Subtract", "Multiply", "Divide"]


# ---------------------------------------------------------------- shared helpers

# ---------------------------------------------------------------- local helpers

def binary(op_type: str, a, b, mode: str = "numpy", axis: int | None = None, **attrs) -> ov.Node:
    """opset1 binary op; the Python API has no pdpd axis or m_pythondiv, the node factory does."""
    attributes = {"auto_broadcast": mode, **attrs}
    if axis is not None:
        attributes[PDPD_AXIS] = axis
    return FACTORY.create(op_type, [a.output(0), b.output(0)], attributes)


def binary_model(op_type: str, shape_a, shape_b, dtype=np.float32, **kw) -> ov.Model:
    a, b = ops.parameter(shape_a, dtype), ops.parameter(shape_b, dtype)
    return ov.Model([binary(op_type, a, b, **kw)], [a, b])


def operands(shape_a, shape_b, dtype=np.float32, seed=0):
    """Random operands; the divisor keeps away from zero so every op is well conditioned."""
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        a = rng.uniform(-4, 4, shape_a)
        b = rng.uniform(0.5, 3, shape_b) * rng.choice([-1, 1], shape_b)
    else:
        # small values: no overflow, u8 differences stay positive (the CPU plugin saturates there)
        a, b = rng.integers(10, 20, shape_a), rng.integers(1, 6, shape_b)
    return [np.asarray(a, dtype), np.asarray(b, dtype)]


# ---------------------------------------------------------------- numpy / none / pdpd

NUMPY_SHAPES = [
    ([2, 3, 4], [2, 3, 4]),
    ([2, 1, 4], [3, 1]),          # both sides stretch, ranks differ
    ([4], [2, 3, 4]),
    ([1, 3, 1, 5], [2, 1, 4, 1]),
    ([], [2, 3]),                 # scalar operands
    ([2, 3], []),
    ([], []),
]


@pytest.mark.parametrize("op_type", OPS)
@pytest.mark.parametrize("shape_a,shape_b", NUMPY_SHAPES)
def test_numpy_broadcast(op_type, shape_a, shape_b, tmp_path):
    compare(binary_model(op_type, shape_a, shape_b), operands(shape_a, shape_b), tmp_path)


@pytest.mark.parametrize("op_type", OPS)
@pytest.mark.parametrize("shape", [[5], [2, 3, 4], []])
def test_none_equal_shapes(op_type, shape, tmp_path):
    compare(binary_model(op_type, shape, shape, mode="none"), operands(shape, shape), tmp_path)


PDPD_CASES = [
    ([2, 3, 4, 5], [3, 4], 1),
    ([2, 3, 4, 5], [3, 1], 1),    # trailing 1 of input 1 broadcasts too
    ([2, 3, 4, 5], [2, 3], 0),
    ([2, 3, 4, 5], [4, 5], -1),   # -1: aligned to the end
    ([2, 3, 4, 5], [1, 4], 1),
    ([2, 3, 4, 5], [2, 3, 4, 5], -1),
    ([3, 4], [4], -1),
]


@pytest.mark.parametrize("op_type", OPS)
@pytest.mark.parametrize("shape_a,shape_b,axis", PDPD_CASES)
def test_pdpd_broadcast(op_type, shape_a, shape_b, axis, tmp_path):
    model = binary_model(op_type, shape_a, shape_b, mode="pdpd", axis=axis)
    inputs = operands(shape_a, shape_b)
    if op_type in ("Subtract", "Divide") and axis not in (-1, len(shape_a) - len(shape_b)):
        # The CPU plugin rewrites these into Add/Multiply and drops the pdpd axis: it refuses the model.
        compare(model, inputs, tmp_path, oracle="reference")
    else:
        compare(model, inputs, tmp_path)
    out = irrun.load(save(model, tmp_path)).infer(inputs)
    assert next(iter(out.values())).shape == tuple(shape_a)   # pdpd keeps input 0's shape


def test_pdpd_axis_absent_means_zero(tmp_path):
    """OpenVINO's IR reader takes axis 0 when the attribute is missing (the spec says -1)."""
    xml = hand_ir(tmp_path, "Add", [([2, 3, 4], "FP32"), ([2, 3], "FP32")], [2, 3, 4], {"auto_broadcast": "pdpd"})
    inputs = operands([2, 3, 4], [2, 3])
    expected = run_openvino(xml, inputs)[0]
    assert_close(next(iter(irrun.load(xml).infer(inputs).values())), expected)


def test_explicit_is_none(tmp_path):
    """auto_broadcast="explicit" is OpenVINO's other spelling of "none"."""
    xml = hand_ir(tmp_path, "Add", [([2, 3], "FP32"), ([2, 3], "FP32")], [2, 3], {"auto_broadcast": "explicit"})
    inputs = operands([2, 3], [2, 3])
    assert_close(next(iter(irrun.load(xml).infer(inputs).values())), run_openvino(xml, inputs)[0])
    bad = hand_ir(tmp_path, "Add", [([2, 3], "FP32"), ([1, 3], "FP32")], [2, 3], {"auto_broadcast": "explicit"})
    assert not irrun.validate(bad).ok


# ---------------------------------------------------------------- element types

# Integer Divide is left to test_divide_integers: the CPU plugin gets it wrong.
@pytest.mark.parametrize("op_type,dtype", [(op, dtype) for op in OPS
                                           for dtype in (np.float16, np.int32, np.int64, np.int8, np.uint8, np.uint32)
                                           if op != "Divide" or dtype == np.float16])
def test_element_types(op_type, dtype, tmp_path):
    got = compare(binary_model(op_type, [2, 3, 4], [3, 1], dtype), operands([2, 3, 4], [3, 1], dtype), tmp_path,
                  rtol=1e-3)
    assert next(iter(got.values())).dtype == dtype


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32])
@pytest.mark.parametrize("op_type", ["Add", "Subtract", "Multiply"])
def test_integer_overflow_wraps(op_type, dtype, tmp_path):
    """Against the reference: the CPU plugin computes i64 in i32 and saturates i8/u8."""
    info = np.iinfo(dtype)
    a = np.array([info.max, info.min, info.max // 2 + 7, 3, 1 << 28], dtype)
    b = np.array([2, 3, 5, info.max, 1 << 20], dtype)
    compare(binary_model(op_type, [5], [5], dtype), [a, b], tmp_path, oracle="reference")


@pytest.mark.parametrize("op_type", ["Add", "Subtract"])
def test_u8_wraps(op_type, tmp_path):
    a, b = np.array([250, 3, 0, 128], np.uint8), np.array([10, 5, 1, 128], np.uint8)
    compare(binary_model(op_type, [4], [4], np.uint8), [a, b], tmp_path, oracle="reference")


# ---------------------------------------------------------------- Divide

DIVIDENDS = [7, -7, 7, -7, 6, -6, 0, 1, -1, 100, -100, 2**31 - 1]
DIVISORS = [2, 2, -2, -2, 3, 3, 5, -3, 3, 7, 7, -2]


@pytest.mark.parametrize("pythondiv", [True, False])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_divide_integers(dtype, pythondiv, tmp_path):
    """Reference evaluation: the CPU plugin truncates even with m_pythondiv=true."""
    a, b = np.array(DIVIDENDS, dtype), np.array(DIVISORS, dtype)
    compare(binary_model("Divide", [12], [12], dtype, m_pythondiv=pythondiv), [a, b], tmp_path, oracle="reference")


@pytest.mark.parametrize("pythondiv", [True, False])
def test_divide_integers_broadcast(pythondiv, tmp_path):
    a = np.arange(-12, 12, dtype=np.int64).reshape(2, 3, 4)
    b = np.array([[-5], [3], [-1]], np.int64)
    compare(binary_model("Divide", [2, 3, 4], [3, 1], np.int64, m_pythondiv=pythondiv), [a, b], tmp_path, oracle="reference")


def test_divide_integers_large_i64(tmp_path):
    a = np.array([(1 << 40) + 3, -(1 << 50) - 1, (1 << 62) + 1], np.int64)
    b = np.array([1, 3, -7], np.int64)
    compare(binary_model("Divide", [3], [3], np.int64), [a, b], tmp_path, oracle="reference")


def test_divide_spec_examples():
    """Hand-checked: floor division for m_pythondiv (the default), truncation without it."""
    for pythondiv, expected in [(True, [3, -4, -4, 3]), (False, [3, -3, -3, 3])]:
        op = _divide_op(pythondiv)
        a, b = np.array([7, -7, 7, -7], np.int32), np.array([2, 2, -2, -2], np.int32)
        np.testing.assert_array_equal(op.run(a, b), expected)


def _divide_op(pythondiv: bool):
    from irrun.registry import implementation
    from irrun.spec import all_specs, parse_attrs
    spec = all_specs()[("Divide", 1)]
    attrs, problems = parse_attrs(spec, {"m_pythondiv": str(pythondiv).lower()})
    assert not problems
    return implementation("Divide", 1)(spec, attrs)


@pytest.mark.parametrize("pythondiv", [True, False])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_integer_divide_by_zero_gives_zero(dtype, pythondiv):
    """The reference raises and the CPU plugin returns garbage; irrun returns 0 without a warning."""
    op = _divide_op(pythondiv)
    a, b = np.array([5, 0, 9], dtype), np.array([0, 0, 4], dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = op.run(a, b)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, [0, 0, 2])


def test_integer_divide_min_by_minus_one_wraps():
    """INT_MIN / -1 overflows; C++ on x86 traps (the reference process dies), irrun wraps."""
    for pythondiv in (True, False):
        a, b = np.array([np.iinfo(np.int32).min], np.int32), np.array([-1], np.int32)
        np.testing.assert_array_equal(_divide_op(pythondiv).run(a, b), a)


@pytest.mark.parametrize("pythondiv", [True, False])
def test_divide_float_ignores_pythondiv(pythondiv, tmp_path):
    a = np.array([7, -7, 7, -7, 1, -1, 0, 2.5], np.float32)
    b = np.array([2, 2, -2, -2, 0, 0, 0, -0.5], np.float32)   # x/0: inf, -inf, nan
    compare(binary_model("Divide", [8], [8], m_pythondiv=pythondiv), [a, b], tmp_path)


# ---------------------------------------------------------------- dynamic shapes, constants

DYNAMIC_CASES = [
    ([-1, 3], [2, 3], [1, 3]),
    ([-1, -1], [4, 5], [5]),
    (ov.PartialShape([2, ov.Dimension(1, 8), 4]), [2, 6, 4], [1, 1, 4]),
]


@pytest.mark.parametrize("op_type", OPS)
@pytest.mark.parametrize("shape_a,concrete_a,shape_b", DYNAMIC_CASES)
def test_dynamic_shapes(op_type, shape_a, concrete_a, shape_b, tmp_path):
    compare(binary_model(op_type, shape_a, shape_b), operands(concrete_a, shape_b), tmp_path)


@pytest.mark.parametrize("op_type", OPS)
@pytest.mark.parametrize("mode", ["numpy", "pdpd"])
def test_dynamic_rank(op_type, mode, tmp_path):
    """The CPU plugin takes no dynamic-rank input: irrun on the dynamic-rank IR against OpenVINO on the static one."""
    inputs = operands([2, 3, 4], [3, 1])
    static = binary_model(op_type, [2, 3, 4], [3, 1], mode=mode, axis=-1)
    expected = run_openvino(save(static, tmp_path / "static"), inputs)
    dynamic = binary_model(op_type, ov.PartialShape.dynamic(), [3, 1], mode=mode, axis=-1)
    xml = save(dynamic, tmp_path / "dynamic")
    assert irrun.validate(xml).ok
    for (name, got), exp in zip(irrun.load(xml).infer(inputs).items(), expected):
        assert_close(got, exp, what=name)


@pytest.mark.parametrize("mode", ["numpy", "pdpd"])
def test_dynamic_shapes_pdpd_and_none(mode, tmp_path):
    model = binary_model("Add", [-1, 3, -1], [3], mode=mode, axis=1) if mode == "pdpd" else \
        binary_model("Add", [-1, 3, -1], [-1, 3, -1], mode="none")
    concrete_b = [3] if mode == "pdpd" else [2, 3, 5]
    compare(model, operands([2, 3, 5], concrete_b), tmp_path)


@pytest.mark.parametrize("compress", [False, True])
def test_constant_operand(compress, tmp_path):
    x = ops.parameter([2, 3], np.float32)
    bias = ops.constant(np.array([0.5, -1.25, 3.0], np.float32))
    scale = ops.constant(np.array([[2.0], [-0.5]], np.float32))
    model = ov.Model([ops.multiply(ops.add(x, bias), scale)], [x])
    compare(model, [np.arange(6, dtype=np.float32).reshape(2, 3)], tmp_path, compress=compress)


# ---------------------------------------------------------------- shape inference and validate

def test_shape_function_dynamic_dims():
    from irrun.shapes import ANY, Dim
    assert broadcast_binary((ANY, 3), (4, 1, 1), "numpy") == (4, ANY, 3)
    assert broadcast_binary(None, (3,), "numpy") is None
    assert broadcast_binary((2, ANY), (ANY, 5), "none") == (2, 5)
    assert broadcast_binary((2, Dim(1, 8), 4), (6, 4), "pdpd", 1) == (2, 6, 4)
    assert broadcast_binary((2, 3, 4), None, "pdpd", 1) is None
    assert broadcast_binary((2, 3, 4), (3,), "pdpd", 1) == (2, 3, 4)


def _errors(xml: Path):
    report = irrun.validate(xml)
    assert not report.ok
    return report.errors


@pytest.mark.parametrize("mode,shape_b,attrs,words", [
    ("numpy", [4], {}, "do not broadcast"),
    ("none", [1, 3], {}, "equal shapes"),
    ("pdpd", [3], {PDPD_AXIS: "0"}, "pdpd"),
    ("pdpd", [2, 3], {PDPD_AXIS: "1"}, "does not fit"),
])
def test_validate_inconsistent_operands_names_layer(mode, shape_b, attrs, words, tmp_path):
    xml = hand_ir(tmp_path, "Add", [([2, 3], "FP32"), (shape_b, "FP32")], [2, 3],
                  {"auto_broadcast": mode, **attrs}, name="bad_add")
    errors = _errors(xml)
    assert any(e.layer is not None and e.layer.name == "bad_add" and words in e.message for e in errors), \
        [e.format() for e in errors]
    assert 'bad_add' in errors[0].format()


def test_validate_mixed_element_types(tmp_path):
    xml = hand_ir(tmp_path, "Multiply", [([2, 3], "FP32"), ([2, 3], "FP16")], [2, 3], name="mixed")
    assert any(e.layer.name == "mixed" and "same element type" in e.message for e in _errors(xml))


def test_validate_wrong_declared_output(tmp_path):
    xml = hand_ir(tmp_path, "Subtract", [([2, 1, 4], "FP32"), ([3, 1], "FP32")], [2, 3, 5])
    errors = _errors(xml)
    assert [e.code for e in errors if e.layer and e.layer.name == "the_op"] == ["E-DECLARED-SHAPE"]
    assert "inferred [2,3,4]; dim 2 = broadcast of input 0's 4 and input 1's 1" in errors[0].message


def test_load_refuses_broadcast_failure(tmp_path):
    xml = hand_ir(tmp_path, "Divide", [([2, 3], "FP32"), ([4], "FP32")], [2, 3], name="bad_div")
    with pytest.raises(irrun.errors.IrrunError, match="bad_div"):
        irrun.load(xml)


# ---------------------------------------------------------------- shape function against OpenVINO's

def as_irrun_shape(shape: ov.PartialShape):
    return parse_partial_shape(str(shape))


D = ov.Dimension
# Intervals that both may be 1: OpenVINO keeps their union (1..8), broadcast_shapes widens to "?".


@pytest.mark.parametrize("mode,shape_a,shape_b,axis", [
    ("numpy", [-1, 3], [4, 1, 1], None),
    ("numpy", [D(2, 5), 3], [D(3, 8), 1], None),
    ("numpy", [-1], [1], None),
    ("numpy", [-1], [-1], None),
    ("numpy", [D(1, 5)], [3], None),
    ("numpy", [D(1, 5)], [D(3, 8)], None),
    ("numpy", [D(1, 5)], [D(1, 8)], None),
    ("numpy", ov.PartialShape.dynamic(), [3], None),
    ("none", [-1, 3], [2, -1], None),
    ("none", [D(1, 5), 3], [D(3, 8), 3], None),
    ("none", ov.PartialShape.dynamic(), [2, 3], None),
    ("pdpd", [2, -1, 4, 5], [3, 4], 1),
    ("pdpd", [2, D(2, 6), 4], [D(3, 8)], 1),
    ("pdpd", [2, 1, 4], [-1], 1),
    ("pdpd", [2, -1, 4], [4], -1),
    ("pdpd", [2, 3], ov.PartialShape.dynamic(), 0),
])
def test_shape_function_matches_openvino(mode, shape_a, shape_b, axis):
    a, b = ops.parameter(ov.PartialShape(shape_a), np.float32), ops.parameter(ov.PartialShape(shape_b), np.float32)
    expected = binary("Add", a, b, mode=mode, axis=axis).get_output_partial_shape(0)
    got = broadcast_binary(as_irrun_shape(a.get_output_partial_shape(0)),
                           as_irrun_shape(b.get_output_partial_shape(0)), mode, 0 if axis is None else axis)
    assert got == as_irrun_shape(expected)
