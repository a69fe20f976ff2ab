"""MatMul against OpenVINO: transposes, 1-D operands, batch broadcasting, dtypes, f16 weights."""
from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset1 as ops
import pytest
from ovutil import compare
from irxml import hand_ir

import irrun
from irrun.ops.matrix import matmul_shape
from irrun.shapes import ANY, Dim, parse_partial_shape


def swap_last(shape, transpose: bool) -> list:
    """The stored shape of an operand that MatMul transposes back to `shape`."""
    shape = list(shape)
    if transpose and len(shape) > 1:
        shape[-2], shape[-1] = shape[-1], shape[-2]
    return shape


def matmul_model(shape_a, shape_b, ta=False, tb=False, dtype=np.float32) -> ov.Model:
    a, b = ops.parameter(shape_a, dtype), ops.parameter(shape_b, dtype)
    return ov.Model([ops.matmul(a, b, ta, tb)], [a, b])


def sample(shape, dtype=np.float32, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(-3, 4, shape).astype(dtype)   # small: no product leaves i8's range


def run_case(shape_a, shape_b, ta, tb, tmp_path, dtype=np.float32, concrete=None):
    """MatMul of operands whose logical (untransposed) shapes are shape_a x shape_b."""
    stored_a, stored_b = swap_last(shape_a, ta), swap_last(shape_b, tb)
    concrete_a, concrete_b = concrete or (stored_a, stored_b)
    got = compare(matmul_model(stored_a, stored_b, ta, tb, dtype),
                  [sample(concrete_a, dtype, 1), sample(concrete_b, dtype, 2)], tmp_path,
                  rtol=1e-3 if dtype == np.float16 else 1e-4, atol=1e-3 if dtype == np.float16 else 1e-5)
    assert next(iter(got.values())).dtype == dtype


TRANSPOSES = [(False, False), (True, False), (False, True), (True, True)]


@pytest.mark.parametrize("ta,tb", TRANSPOSES)
@pytest.mark.parametrize("shape_a,shape_b", [([3, 4], [4, 5]), ([2, 3, 4], [2, 4, 5]), ([1, 7], [7, 1])])
def test_transposes(shape_a, shape_b, ta, tb, tmp_path):
    run_case(shape_a, shape_b, ta, tb, tmp_path)


@pytest.mark.parametrize("ta,tb", TRANSPOSES)
@pytest.mark.parametrize("shape_a,shape_b", [
    ([4], [4, 5]),          # 1-D first: a row, its 1 dropped from the output
    ([3, 4], [4]),          # 1-D second: a column
    ([4], [4]),             # dot product: a scalar
    ([2, 3, 4], [4]),
    ([4], [2, 4, 5]),
])
def test_one_dimensional_operands(shape_a, shape_b, ta, tb, tmp_path):
    """transpose_a/transpose_b are ignored on a 1-D operand."""
    run_case(shape_a, shape_b, ta, tb, tmp_path)


@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("shape_a,shape_b", [
    ([2, 1, 3, 4], [5, 4, 6]),
    ([1, 3, 4], [7, 4, 2]),
    ([3, 4], [2, 2, 4, 5]),
    ([6, 2, 3, 4], [6, 1, 4, 5]),
])
def test_batch_broadcasting(shape_a, shape_b, tb, tmp_path):
    run_case(shape_a, shape_b, False, tb, tmp_path)


@pytest.mark.parametrize("dtype", [np.float16, np.int32, np.int64, np.int8])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, True)])
def test_element_types(dtype, ta, tb, tmp_path):
    run_case([2, 3, 8], [8, 5], ta, tb, tmp_path, dtype)


def test_i32_products_wrap(tmp_path):
    """Against the reference evaluation: C++ accumulates in int32 and wraps."""
    a = np.array([[1 << 30, 3], [-(1 << 30), 1 << 29]], np.int32)
    b = np.array([[4, 1], [1 << 30, -5]], np.int32)
    compare(matmul_model([2, 2], [2, 2], dtype=np.int32), [a, b], tmp_path, oracle="reference")


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_constant_weights(compress, tb, tmp_path):
    """A fully connected layer: Const weights, f16-compressed (Const f16 -> Convert) when compress."""
    weights = sample([16, 10] if tb else [10, 16], seed=3)
    x = ops.parameter([4, 10], np.float32)
    model = ov.Model([ops.matmul(x, ops.constant(weights), False, tb)], [x])
    compare(model, [sample([4, 10], seed=4)], tmp_path, compress=compress, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("shape_a,shape_b,concrete_a,concrete_b", [
    ([-1, 4], [4, 5], [3, 4], [4, 5]),
    ([-1, -1, 4], [4, -1], [2, 3, 4], [4, 6]),
    ([ov.Dimension(1, 4), 3, 4], [-1, 4, 2], [3, 3, 4], [1, 4, 2]),
    ([-1], [-1, 3], [5], [5, 3]),
])
def test_dynamic_shapes(shape_a, shape_b, concrete_a, concrete_b, tmp_path):
    run_case(ov.PartialShape(shape_a), ov.PartialShape(shape_b), False, False, tmp_path,
             concrete=(concrete_a, concrete_b))


def test_spec_example():
    """Hand-checked: [[1, 2], [3, 4]] x [5, 6] = [17, 39] (second operand a column)."""
    from irrun.registry import implementation
    from irrun.spec import all_specs, parse_attrs
    spec = all_specs()[("MatMul", 1)]
    op = implementation("MatMul", 1)(spec, parse_attrs(spec, {})[0])
    np.testing.assert_array_equal(op.run(np.array([[1, 2], [3, 4]], np.int32), np.array([5, 6], np.int32)), [17, 39])


# ---------------------------------------------------------------- shape function and validate

def test_shape_function():
    assert matmul_shape((2, 3), (3, 5), False, False)[0] == (2, 5)
    assert matmul_shape((3, 2), (5, 3), True, True)[0] == (2, 5)
    assert matmul_shape((3,), (3,), True, True)[0] == ()
    assert matmul_shape((ANY, 3), (ANY, 5), False, False)[0] == (ANY, 5)
    assert matmul_shape((Dim(1, 4), 2, 3), (ANY, 3, 7), False, False)[0] == (ANY, 2, 7)
    assert matmul_shape((5, 2, 3), (ANY, 3, 7), False, False)[0] == (5, 2, 7)
    assert matmul_shape(None, (3, 5), False, False)[0] is None
    assert matmul_shape((ANY, ANY), (4,), False, False)[0] == (ANY,)


D = ov.Dimension
# OpenVINO keeps 2..6 where one side may be 1 and the other may not; broadcast_shapes widens to "?".


@pytest.mark.parametrize("ta,tb", TRANSPOSES)
@pytest.mark.parametrize("shape_a,shape_b", [
    ([-1, 4], [4, -1]),
    ([D(2, 6), 3, 4], [-1, 4, 5]),
    ([D(2, 6), 3, 4], [D(4, 9), 4, 5]),
    ([1, -1, -1], [7, -1, -1]),
    ([-1], [-1, -1, -1]),
    ([-1, -1, -1], [-1]),
    ([D(2, 5), 3], [D(4, 8), 2]),    # inner dims 3 vs 4..8: OpenVINO does not check dynamic ones
    (None, [4, 5]),                  # dynamic rank
])
def test_shape_function_matches_openvino(shape_a, shape_b, ta, tb):
    """Logical (untransposed) shapes; each operand is stored transposed when its flag is set."""
    def stored(shape, transpose):
        return ov.PartialShape.dynamic() if shape is None else ov.PartialShape(swap_last(shape, transpose))
    a, b = ops.parameter(stored(shape_a, ta), np.float32), ops.parameter(stored(shape_b, tb), np.float32)
    expected = ops.matmul(a, b, ta, tb).get_output_partial_shape(0)
    got, _ = matmul_shape(parse_partial_shape(str(a.get_output_partial_shape(0))),
                          parse_partial_shape(str(b.get_output_partial_shape(0))), ta, tb)
    assert got == parse_partial_shape(str(expected))


def _errors(xml):
    report = irrun.validate(xml)
    assert not report.ok
    return report.errors


@pytest.mark.parametrize("attrs,shape_a,shape_b,message", [
    ({}, [2, 3], [4, 5], "MatMul inner dimensions differ: [2,3] x [4,5] (3 vs 4)"),
    ({"transpose_b": "true"}, [2, 3], [4, 5], "MatMul inner dimensions differ: [2,3] x [4,5] (3 vs 5, transpose_b)"),
    ({}, [4], [3], "(4 vs 3)"),
    ({}, [2, 2, 3], [3, 3, 4], "batch"),
    ({}, [], [3], "scalars"),
])
def test_validate_inconsistent_operands_names_layer(attrs, shape_a, shape_b, message, tmp_path):
    xml = hand_ir(tmp_path, "MatMul", [(shape_a, "FP32"), (shape_b, "FP32")], [2, 5], attrs, name="bad_matmul")
    errors = _errors(xml)
    assert any(e.layer.name == "bad_matmul" and message in e.message for e in errors), [e.format() for e in errors]
    assert "bad_matmul" in errors[0].format()


def test_validate_wrong_declared_output_explains_dim(tmp_path):
    xml = hand_ir(tmp_path, "MatMul", [([2, 3], "FP32"), ([4, 3], "FP32")], [2, 3], {"transpose_b": "true"})
    errors = _errors(xml)
    assert [e.code for e in errors] == ["E-DECLARED-SHAPE"]
    assert "columns of input 1 [4,3] transposed" in errors[0].message


def test_validate_mixed_element_types(tmp_path):
    xml = hand_ir(tmp_path, "MatMul", [([2, 3], "FP32"), ([3, 4], "FP16")], [2, 4], name="mixed")
    assert any(e.layer.name == "mixed" and "same element type" in e.message for e in _errors(xml))
