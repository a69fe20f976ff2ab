"""The oracle itself: every OpenVINO compile in the tests runs at f32 inference precision.

Without `INFERENCE_PRECISION_HINT=f32` the CPU plugin computes in bf16 on CPUs with bf16/AMX
support, and the differential tests then fail on those machines only.  tests/ovutil.py's
`compile_cpu` is the one function that compiles; this module fails if a test module compiles
any other way.
"""
from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset1 as ops1

from ovutil import compile_cpu, run_openvino, save

TESTS = Path(__file__).parent


def compile_calls(path: Path) -> list[str]:
    """`file:line` of every call of a function or method named compile_model in a module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if name == "compile_model":
                found.append(f"{path.name}:{node.lineno}")
    return found


# Its scripts are user code run with openvino and irrun.openvino alike, so they call compile_model
# themselves; it checks that every compile of theirs in OpenVINO runs at f32 (`f32_compiles_only`).
SHARED_SCRIPTS = "test_openvino_api.py"


def test_no_test_module_compiles_outside_ovutil():
    offenders = [call for path in sorted(TESTS.glob("*.py")) if path.name not in ("ovutil.py", SHARED_SCRIPTS)
                 for call in compile_calls(path)]
    assert not offenders, ("compile through ovutil.compile_cpu (it sets INFERENCE_PRECISION_HINT=f32): "
                           + ", ".join(offenders))


def test_the_scan_finds_a_compile(tmp_path):
    """The check above is not vacuous: both spellings of a direct compile are caught."""
    module = tmp_path / "test_fake.py"
    module.write_text("import openvino as ov\n"
                      "ov.Core().compile_model('m.xml', 'CPU')\n"
                      "ov.compile_model('m.xml')\n")
    assert compile_calls(module) == ["test_fake.py:2", "test_fake.py:3"]


def test_compile_cpu_runs_at_f32(tmp_path):
    x = ops1.parameter([4], np.float32)
    m = ov.Model([ops1.multiply(x, ops1.constant(np.float32(1 / 3)))], [x])
    compiled = compile_cpu(m, {"INFERENCE_PRECISION_HINT": "bf16"})   # the hint cannot be overridden
    assert compiled.get_property("INFERENCE_PRECISION_HINT") == ov.Type.f32
    assert compile_cpu(save(m, tmp_path)).get_property("INFERENCE_PRECISION_HINT") == ov.Type.f32
    # bf16 keeps 8 bits of mantissa: 1/3 would be off by ~1e-3
    value = np.float32(1.2345678)
    (got,) = run_openvino(save(m, tmp_path / "again"), [np.full(4, value, np.float32)])
    np.testing.assert_allclose(got, np.float32(value * np.float32(1 / 3)), rtol=1e-7)

