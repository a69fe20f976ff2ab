"""Differential testing against OpenVINO: build with openvino.opsetN, save IR, run both."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import openvino as ov
import pytest

import irrun
from irrun.errors import ShapeError
from irrun.etypes import from_dtype
from irrun.registry import TensorType, implementation
from irrun.shapes import format_shape, parse_partial_shape
from irrun.spec import all_specs, parse_attrs

_CORE = ov.Core()
CPU_F32 = {"INFERENCE_PRECISION_HINT": "f32"}


def save(model: ov.Model, path: Path, *, compress: bool = False) -> Path:
    xml = Path(path) / "model.xml" if Path(path).suffix != ".xml" else Path(path)
    ov.save_model(model, str(xml), compress_to_fp16=compress)
    return xml


def run_openvino(xml: Path, inputs: list[np.ndarray]) -> list[np.ndarray]:
    compiled = _CORE.compile_model(_CORE.read_model(str(xml)), "CPU", CPU_F32)
    result = compiled(inputs)
    return [np.asarray(result[out]) for out in compiled.outputs]


def evaluate_reference(model: ov.Model, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """OpenVINO's reference evaluation (no plugin): for ops where the CPU plugin has bugs."""
    # np.require keeps 0-d arrays 0-d (np.ascontiguousarray makes them shape (1,)).
    in_tensors = [ov.Tensor(np.require(a, requirements="C")) for a in inputs]
    # evaluate() resizes each output, so outputs with dynamic shapes work too.
    out_tensors = [ov.Tensor(o.get_element_type(), ov.Shape([])) for o in model.outputs]
    assert model.evaluate(out_tensors, in_tensors)
    return [t.data.copy() for t in out_tensors]


def assert_close(actual: np.ndarray, expected: np.ndarray, *, rtol=1e-4, atol=1e-5, what="output"):
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != OpenVINO {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != OpenVINO {expected.shape}"
    if expected.dtype.kind in "fc":
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=what)


def compare(model: ov.Model, inputs: list[np.ndarray], tmp_path: Path, *, rtol=1e-4, atol=1e-5,
            compress: bool = False, check_validate: bool = True, oracle: str = "cpu") -> dict[str, np.ndarray]:
    """Save `model`, run it in OpenVINO and in irrun, compare every output.

    `oracle="cpu"`: the CPU plugin with f32 inference precision (the default);
    `oracle="reference"`: OpenVINO's reference evaluation of the IR read back,
    for the few places where the CPU plugin is known to be wrong (say why).
    Also asserts that `irrun validate` finds no error in what OpenVINO wrote.
    """
    xml = save(model, tmp_path, compress=compress)
    if oracle == "cpu":
        expected = run_openvino(xml, inputs)
    else:
        expected = evaluate_reference(_CORE.read_model(str(xml)), inputs)
    if check_validate:
        report = irrun.validate(xml)
        assert report.ok, "validate flagged an OpenVINO-written IR:\n" + \
            "\n".join(d.format() for d in report.errors)
    m = irrun.load(xml)
    got = m.infer(list(inputs))
    assert list(got) == [o.name for o in m.outputs]
    assert len(got) == len(expected)
    for (name, actual), exp in zip(got.items(), expected):
        assert_close(actual, exp, rtol=rtol, atol=atol, what=name)
    return got


# ---------------------------------------------------------------- shape functions vs OpenVINO's

def irrun_infer(type_name: str, version: int, attrs: dict, inputs: list[TensorType]) -> TensorType:
    """Output 0 of irrun's shape function, for attributes given as Python values."""
    spec = all_specs()[(type_name, version)]
    parsed, problems = parse_attrs(spec, {k: str(v).lower() if isinstance(v, bool) else str(v)
                                          for k, v in attrs.items()})
    assert not problems, problems
    return implementation(type_name, version)(spec, parsed).infer(inputs)[0]


def as_tensor_type(node_output) -> TensorType:
    """What irrun knows about an OpenVINO node's output: shape, type, value if it is a Constant."""
    node = node_output.get_node()
    etype = from_dtype(node_output.get_element_type().to_dtype())
    value = node.get_data().copy() if node.get_type_name() == "Constant" else None
    return TensorType(parse_partial_shape(str(node_output.get_partial_shape())), etype, value)


def check_shape_function(ov_build, type_name: str, version: int, attrs: dict, args: list) -> None:
    """`args` are OpenVINO nodes; the op built from them by OpenVINO and by irrun must agree on
    the output shape and element type, or both refuse it (irrun with a ShapeError)."""
    inputs = [as_tensor_type(a.output(0)) for a in args]
    try:
        node = ov_build(*args)
    except RuntimeError as exc:
        with pytest.raises(ShapeError):
            got = irrun_infer(type_name, version, attrs, inputs)
            pytest.fail(f"OpenVINO refuses this ({str(exc).splitlines()[-1]}), irrun infers {format_shape(got.shape)}")
        return
    got = irrun_infer(type_name, version, attrs, inputs)
    assert format_shape(got.shape) == str(node.get_output_partial_shape(0))
    assert got.etype.name == node.get_output_element_type(0).get_type_name()
