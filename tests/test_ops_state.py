"""ReadValue-3/6 and Assign-3/6: variables kept across calls, against an OpenVINO InferRequest.

Each case runs the same IR in one OpenVINO InferRequest and one `irrun.Model`
for several calls, comparing every call's outputs and every variable's state
(`Model.state` against `InferRequest.query_state()`), then `reset_state` on
both and one more call.  Also: zeros when a ReadValue has no initializing
input, a growing (KV-cache-like) variable of dynamic shape, an Assign that no
Result depends on, integer variables, and validate's checks of variables.
"""
from __future__ import annotations

import re

import numpy as np
import openvino as ov
import openvino.opset3 as ops3
import openvino.opset6 as ops
import openvino.opset8 as ops8
import pytest
from openvino.op.util import Variable, VariableInfo
from ovutil import assert_close, compile_cpu, save

import irrun

RNG = np.random.default_rng(3)


def variable(name, shape, dtype=np.float32):
    info = VariableInfo()
    info.data_shape = ov.PartialShape(list(shape))
    info.data_type = ov.Type(dtype)
    info.variable_id = name
    return Variable(info)


def param(shape, dtype=np.float32, name=None):
    return ops.parameter(ov.PartialShape(list(shape)), dtype, name=name)


def accumulator(version=6, init=True, dtype=np.float32):
    """acc = (previous acc, or x on the first call) + x; output acc."""
    X = param([2, 3], dtype, "X")
    if version == 3:
        read = ops3.read_value(X, "acc")
        total = ops.add(read, X)
        sink = ops3.assign(total, "acc")
    else:
        var = variable("acc", [2, 3], dtype)
        read = ops.read_value(X, var) if init else ops.read_value(var)
        total = ops.add(read, X)
        sink = ops.assign(total, var)
    return ov.Model([ops.result(total)], [sink], [X], "accumulator")


def run_both(model, calls, tmp_path, *, reset_after=None):
    """Feed `calls` (lists of inputs) to one OpenVINO InferRequest and one irrun Model; compare each step."""
    xml = save(model, tmp_path)
    report = irrun.validate(xml)
    assert report.ok, [d.format() for d in report.errors]
    request = compile_cpu(xml).create_infer_request()
    m = irrun.load(xml)
    assert_same_state(m, request)
    for step, inputs in enumerate(calls):
        if step == reset_after:
            request.reset_state()
            m.reset_state()
            assert_same_state(m, request)
        expected = request.infer(inputs)
        got = m.infer(inputs)
        for (name, actual), key in zip(got.items(), request.model_outputs):
            assert_close(actual, np.asarray(expected[key]), what=f"call {step}: {name}")
        assert_same_state(m, request)
    return m


def assert_same_state(m: irrun.Model, request):
    expected = {s.name: s.state.data.copy() for s in request.query_state()}
    got = m.state
    assert set(got) == set(expected)
    for name, value in expected.items():
        assert_close(got[name], value, what=f"state {name}")


@pytest.mark.parametrize("version, init", [(6, True), (6, False), (3, True)], ids=["v6", "v6-no-init", "v3"])
def test_accumulator_over_three_calls_and_reset(version, init, tmp_path):
    calls = [[RNG.standard_normal((2, 3)).astype(np.float32)] for _ in range(4)]
    run_both(accumulator(version, init), calls, tmp_path, reset_after=3)


def test_integer_variable(tmp_path):
    calls = [[RNG.integers(-9, 9, (2, 3)).astype(np.int32)] for _ in range(3)]
    run_both(accumulator(6, True, np.int32), calls, tmp_path)


def test_growing_variable_of_dynamic_shape(tmp_path):
    """A KV-cache: each call appends its rows to the variable (shape [?,3], zero rows at first)."""
    X = param([-1, 3], name="X")
    var = variable("cache", [-1, 3])
    grown = ops.concat([ops.read_value(var), X], 0)
    model = ov.Model([ops.result(grown)], [ops.assign(grown, var)], [X], "cache")
    calls = [[RNG.standard_normal((n, 3)).astype(np.float32)] for n in (1, 2, 3, 1)]
    m = run_both(model, calls, tmp_path, reset_after=3)
    assert m.state["cache"].shape == (1, 3)


def test_assign_that_no_result_depends_on(tmp_path):
    """The Assign is a sink of its own: it still runs, and the ReadValue sees the previous call's value."""
    X = param([4], name="X")
    var = variable("last", [4])
    out = ops.add(ops.read_value(var), X)
    model = ov.Model([ops.result(out)], [ops.assign(ops.multiply(X, ops.constant(np.float32(2))), var)], [X])
    calls = [[np.full(4, i, np.float32)] for i in (1, 2, 3)]
    m = run_both(model, calls, tmp_path)
    np.testing.assert_array_equal(m.state["last"], np.full(4, 6, np.float32))


def test_two_variables_read_before_either_is_written(tmp_path):
    """a' = b, b' = a + x: a swap that only works if both reads see the values from before the call."""
    X = param([2], name="X")
    va, vb = variable("a", [2]), variable("b", [2])
    a, b = ops.read_value(va), ops.read_value(vb)
    sinks = [ops.assign(b, va), ops.assign(ops.add(a, X), vb)]
    model = ov.Model([ops.result(ops.concat([a, b], 0))], sinks, [X])
    calls = [[np.array([1, 10], np.float32) * (i + 1)] for i in range(4)]
    run_both(model, calls, tmp_path)


def test_state_is_per_model_and_copied(tmp_path):
    xml = save(accumulator(), tmp_path)
    first, second = irrun.load(xml), irrun.load(xml)
    x = np.ones((2, 3), np.float32)
    first.infer([x])
    first.infer([x])
    np.testing.assert_array_equal(next(iter(second.infer([x]).values())), 2 * x)   # its own first call
    snapshot = first.state
    snapshot["acc"][:] = 100
    np.testing.assert_array_equal(first.state["acc"], 3 * x)
    x[:] = 7      # the caller's array is not the state either
    np.testing.assert_array_equal(first.state["acc"], 3 * np.ones((2, 3), np.float32))


# ---------------------------------------------------------------- validate

def test_assign_to_an_unknown_variable(tmp_path):
    xml = save(accumulator(), tmp_path)
    text = xml.read_text()
    xml.write_text(re.sub(r'(type="Assign" version="opset6">\s*<data variable_id=")acc', r"\1other", text))
    report = irrun.validate(xml)
    errors = [d for d in report.errors if d.code == "E-VARIABLE"]
    assert errors and errors[0].layer.type == "Assign" and '"other"' in errors[0].message


def test_variable_shape_that_does_not_hold_the_init(tmp_path):
    xml = save(accumulator(), tmp_path)
    text = xml.read_text()
    xml.write_text(text.replace('variable_shape="2,3"', 'variable_shape="2,4"'))
    report = irrun.validate(xml)
    assert any(d.layer and d.layer.type == "ReadValue" and "[2,4]" in d.message for d in report.errors)


def test_assign_of_the_wrong_shape(tmp_path):
    X, A = param([2, 3], name="X"), param([2, 4], name="A")
    var = variable("v", [2, 3])
    first_columns = ops8.slice(A, [0, 0], [2, 3], [1, 1])
    model = ov.Model([ops.result(ops.add(ops.read_value(var), X))], [ops.assign(first_columns, var)], [X, A])
    xml = save(model, tmp_path)
    assert irrun.validate(xml).ok
    text = xml.read_text()
    # Drop the Slice: the Assign now takes A's [2,4] directly.
    slice_layer = re.search(r'<layer id="(\d+)" name="[^"]*" type="Slice"', text).group(1)
    a_layer = re.search(r'<layer id="(\d+)" name="A"', text).group(1)
    assign = re.search(r'<layer id="(\d+)" name="[^"]*" type="Assign"', text).group(1)
    text = re.sub(rf'<edge from-layer="{slice_layer}" from-port="\d+" to-layer="{assign}" to-port="0" />',
                  f'<edge from-layer="{a_layer}" from-port="0" to-layer="{assign}" to-port="0" />', text)
    xml.write_text(text)
    report = irrun.validate(xml)
    assert any(d.layer and d.layer.type == "Assign" and "variable" in d.message for d in report.errors), \
        [d.format() for d in report.errors]
