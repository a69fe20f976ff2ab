"""TensorIterator-1, Loop-5 and If-8 against OpenVINO.

* differential runs (`compare`): a TensorIterator RNN over a sequence
  (forward, reversed slicing, reversed concatenation, invariant inputs,
  f16-compressed weights, dynamic batch, integer bodies); Loops with a
  constant trip count and concatenated outputs, a data-dependent exit, a
  runtime trip count, an unlimited trip count, the current-iteration
  Parameter, a loop-carried value that grows; If on a runtime condition both
  ways, branches of different shapes, a Loop nested in an If;
* shape functions against OpenVINO's partial shapes (unknown trip counts,
  If's merged branches), and validate: broken port maps (E-SUBGRAPH), wrong
  declared dims, inconsistent operands named at their layer.
"""
from __future__ import annotations

import re

import numpy as np
import openvino as ov
import openvino.opset1 as ops1
import openvino.opset8 as ops
import pytest
from ovutil import compare, run_openvino, save

import irrun
from irrun.shapes import Dim, parse_partial_shape

RNG = np.random.default_rng(11)


def sample(shape, dtype=np.float32, scale=1.0):
    if np.issubdtype(dtype, np.integer):
        return RNG.integers(-5, 6, size=shape).astype(dtype)
    return (RNG.standard_normal(shape) * scale).astype(dtype)


def param(shape, dtype=np.float32, name=None):
    return ops.parameter(ov.PartialShape(list(shape)), dtype, name=name)


def shapes_of(model: ov.Model) -> list:
    """OpenVINO's partial output shapes in irrun's notation."""
    return [parse_partial_shape(str(o.get_partial_shape())) for o in model.outputs]


# ---------------------------------------------------------------- TensorIterator

def rnn_ti(batch=2, steps=5, features=3, hidden=4, *, start=0, stride=1, end=-1, out_stride=1, axis=1,
           dtype=np.float32, invariant=False):
    """h = tanh(x_t @ W + h @ U [+ bias]) over the sequence axis; outputs: last h and every h."""
    seq_shape = [batch, steps, features] if axis == 1 else [steps, batch, features]
    X, H0 = param(seq_shape, dtype, "X"), param([batch if isinstance(batch, int) else -1, hidden], dtype, "H0")
    part = list(seq_shape)
    part[axis] = 1
    xi, hi = param(part, dtype, "xi"), param([batch if isinstance(batch, int) else -1, hidden], dtype, "hi")
    W, U = ops.constant(sample([features, hidden], dtype, 0.5)), ops.constant(sample([hidden, hidden], dtype, 0.5))
    pre = ops.add(ops.matmul(ops.squeeze(xi, [axis]), W, False, False), ops.matmul(hi, U, False, False))
    params, body_params = [X, H0], [xi, hi]
    if invariant:
        bias, bi = param([hidden], dtype, "bias"), param([hidden], dtype, "bi")
        pre = ops.add(pre, bi)
        params.append(bias)
        body_params.append(bi)
    h = ops.tanh(pre) if dtype != np.int32 else ops.clamp(pre, -10, 10)
    r_h, r_seq = ops.result(h), ops.result(ops.unsqueeze(h, [axis]))
    ti = ops1.tensor_iterator()
    ti.set_function(ov.Model([r_h, r_seq], body_params))
    ti.set_sliced_input(xi, X.output(0), start, stride, 1, end, axis)
    ti.set_merged_input(hi, H0.output(0), r_h.output(0))
    if invariant:
        ti.set_invariant_input(bi, bias.output(0))
    last = ti.get_iter_value(r_h.output(0), -1)
    out_start, out_end = (0, -1) if out_stride > 0 else (-1, 0)
    seq = ti.get_concatenated_slices(r_seq.output(0), out_start, out_stride, 1, out_end, axis)
    return ov.Model([last, seq], params)


def ti_feeds(model, batch=2):
    feeds = []
    for p in model.get_parameters():
        shape = [batch if d.is_dynamic else d.get_length() for d in p.get_partial_shape()]
        feeds.append(sample(shape, p.get_element_type().to_dtype()))
    return feeds


@pytest.mark.parametrize("slicing", [{}, {"start": -1, "stride": -1, "end": 0}, {"out_stride": -1},
                                     {"start": -1, "stride": -1, "end": 0, "out_stride": -1}, {"axis": 0}],
                         ids=["forward", "reversed-input", "reversed-output", "reversed-both", "axis0"])
def test_tensor_iterator_rnn(slicing, tmp_path):
    model = rnn_ti(**slicing)
    compare(model, ti_feeds(model), tmp_path)


def test_tensor_iterator_invariant_input_and_compressed_weights(tmp_path):
    model = rnn_ti(invariant=True)
    compare(model, ti_feeds(model), tmp_path, compress=True, rtol=2e-3, atol=2e-3)


def test_tensor_iterator_dynamic_batch(tmp_path):
    model = rnn_ti(batch=-1)
    assert shapes_of(model) == [(Dim(), 4), (Dim(), 5, 4)]
    compare(model, ti_feeds(model, batch=3), tmp_path)


def test_tensor_iterator_integer_body(tmp_path):
    model = rnn_ti(dtype=np.int32)
    compare(model, ti_feeds(model), tmp_path)


def test_tensor_iterator_lstm_cell_body(tmp_path):
    """The shape frontends give recurrent layers: an LSTMCell-4 body with two loop-carried states."""
    import openvino.opset4 as ops4
    X, H0, C0 = param([2, 6, 3], name="X"), param([2, 4], name="H0"), param([2, 4], name="C0")
    xi, hi, ci = param([2, 1, 3], name="xi"), param([2, 4], name="hi"), param([2, 4], name="ci")
    cell = ops4.lstm_cell(ops.squeeze(xi, [1]), hi, ci, ops.constant(sample([16, 3], scale=0.5)),
                          ops.constant(sample([16, 4], scale=0.5)), ops.constant(sample([16], scale=0.5)), 4)
    r_h, r_c = ops.result(cell.output(0)), ops.result(cell.output(1))
    r_seq = ops.result(ops.unsqueeze(cell.output(0), [1]))
    ti = ops1.tensor_iterator()
    ti.set_function(ov.Model([r_h, r_c, r_seq], [xi, hi, ci]))
    ti.set_sliced_input(xi, X.output(0), 0, 1, 1, -1, 1)
    ti.set_merged_input(hi, H0.output(0), r_h.output(0))
    ti.set_merged_input(ci, C0.output(0), r_c.output(0))
    outs = [ti.get_concatenated_slices(r_seq.output(0), 0, 1, 1, -1, 1), ti.get_iter_value(r_h.output(0), -1),
            ti.get_iter_value(r_c.output(0), -1)]
    model = ov.Model(outs, [X, H0, C0])
    compare(model, [sample([2, 6, 3]), sample([2, 4]), sample([2, 4])], tmp_path)


def test_tensor_iterator_slice_of_two(tmp_path):
    """part_size = stride = 2: each iteration sees two steps."""
    X, xi = param([3, 6], name="X"), param([3, 2], name="xi")
    r = ops.result(ops.multiply(xi, xi))
    ti = ops1.tensor_iterator()
    ti.set_function(ov.Model([r], [xi]))
    ti.set_sliced_input(xi, X.output(0), 0, 2, 2, -1, 1)
    model = ov.Model([ti.get_concatenated_slices(r.output(0), 0, 2, 2, -1, 1), ti.get_iter_value(r.output(0), -1)],
                     [X])
    assert shapes_of(model) == [(3, 6), (3, 2)]
    compare(model, [sample([3, 6])], tmp_path)


def test_tensor_iterator_start_offset_follows_the_spec(tmp_path):
    """start=1: OpenVINO infers 4 iterations, but its CPU plugin slices from 0
    (specs/errata/control_flow.md); irrun takes steps 1..4 as the spec says."""
    X, xi = param([2, 5], name="X"), param([2, 1], name="xi")
    r = ops.result(ops.negative(xi))
    ti = ops1.tensor_iterator()
    ti.set_function(ov.Model([r], [xi]))
    ti.set_sliced_input(xi, X.output(0), 1, 1, 1, -1, 1)
    model = ov.Model([ti.get_concatenated_slices(r.output(0), 0, 1, 1, -1, 1)], [X])
    xml = save(model, tmp_path)
    x = sample([2, 5])
    cpu = run_openvino(xml, [x])[0]
    assert cpu.shape == (2, 4) and np.array_equal(cpu, -x[:, :4])     # the CPU plugin's reading
    got = irrun.load(xml).infer([x])
    np.testing.assert_array_equal(next(iter(got.values())), -x[:, 1:])


# ---------------------------------------------------------------- Loop

def accumulate_loop(trip, condition, *, limit=None, x_shape=(2, 3), trip_type=np.int64):
    """acc += x while (no limit or sum(acc) < limit); outputs: last acc, every iteration number, every acc."""
    X = param(x_shape, name="X")
    params = [X]
    if trip == "param":
        trip_node = param([], trip_type, "trip")
        params.append(trip_node)
    else:
        trip_node = ops.constant(np.array(trip, trip_type))
    if condition == "param":
        cond_node = param([], np.bool_, "cond")
        params.append(cond_node)
    else:
        cond_node = ops.constant(condition)
    it, xb, acc = param([], np.int64, "it"), param(x_shape, name="xb"), param(x_shape, name="acc")
    total = ops.add(acc, xb)
    keep = ops.constant(True) if limit is None else ops.less(ops.reduce_sum(total, [0, 1]),
                                                             ops.constant(np.float32(limit)))
    r_cond, r_acc = ops.result(keep), ops.result(total)
    r_it = ops.result(ops.unsqueeze(ops.convert(it, "f32"), [0]))
    r_each = ops.result(ops.unsqueeze(total, [0]))
    loop = ops.loop(trip_node, cond_node)
    loop.set_function(ov.Model([r_cond, r_acc, r_it, r_each], [it, xb, acc]))
    loop.set_special_body_ports([0, 0])
    loop.set_invariant_input(xb, X.output(0))
    loop.set_merged_input(acc, X.output(0), r_acc.output(0))
    outputs = [loop.get_iter_value(r_acc.output(0), -1),
               loop.get_concatenated_slices(r_it.output(0), 0, 1, 1, -1, 0),
               loop.get_concatenated_slices(r_each.output(0), 0, 1, 1, -1, 0)]
    return ov.Model(outputs, params)


def test_loop_constant_trip_count_concatenates(tmp_path):
    model = accumulate_loop(4, True)
    assert shapes_of(model) == [(2, 3), (4,), (4, 2, 3)]
    got = compare(model, [sample([2, 3])], tmp_path)
    m = irrun.load(tmp_path / "model.xml")
    assert [o.shape for o in m.outputs] == [(2, 3), (4,), (4, 2, 3)]
    np.testing.assert_array_equal(list(got.values())[1], [0, 1, 2, 3])


def test_loop_data_dependent_exit(tmp_path):
    """A while loop: trip count 10, the body stops when sum(acc) reaches 20."""
    model = accumulate_loop(10, True, limit=20)
    assert shapes_of(model) == [(2, 3), (Dim(),), (Dim(), 2, 3)]
    got = compare(model, [np.ones((2, 3), np.float32)], tmp_path)
    assert list(got.values())[1].shape == (3,)


@pytest.mark.parametrize("trip", [1, 3, 50, -1])
def test_loop_runtime_trip_count(trip, tmp_path):
    """The trip count is an input; -1 means no limit (the body's condition ends it)."""
    model = accumulate_loop("param", True, limit=30)
    compare(model, [np.ones((2, 3), np.float32), np.array(trip, np.int64)], tmp_path)


@pytest.mark.parametrize("trip, condition", [(3, False), (0, True)], ids=["condition-false", "trip-count-0"])
def test_loop_that_never_runs(trip, condition, tmp_path):
    """No iteration: the loop-carried output keeps its initial value, concatenations are empty."""
    model = accumulate_loop("param", "param")
    x = sample([2, 3])
    got = list(compare(model, [x, np.array(trip, np.int64), np.array(condition)], tmp_path).values())
    np.testing.assert_array_equal(got[0], x)
    assert got[1].shape == (0,) and got[2].shape == (0, 2, 3)


def test_loop_that_cannot_end_is_refused(tmp_path):
    """Trip count -1 and a constant-true body condition: OpenVINO would spin forever; irrun says why."""
    model = accumulate_loop("param", True)
    m = irrun.load(save(model, tmp_path))
    with pytest.raises(irrun.errors.ModelError, match="forever"):
        m.infer([sample([2, 3]), np.array(-1, np.int64)])


def test_loop_without_condition_output(tmp_path):
    """No purpose="execution_condition": OpenVINO leaves the outputs unknown and its reference runs the body
    once; its CPU plugin cannot run this Loop at all (specs/errata/control_flow.md)."""
    X, xb, acc = param([2], name="X"), param([2], name="xb"), param([2], name="acc")
    total = ops.result(ops.add(acc, xb))
    loop = ops.loop(ops.constant(np.int64(3)), ops.constant(True))
    loop.set_function(ov.Model([total], [xb, acc]))
    loop.set_special_body_ports([-1, -1])
    loop.set_invariant_input(xb, X.output(0))
    loop.set_merged_input(acc, X.output(0), total.output(0))
    model = ov.Model([loop.get_iter_value(total.output(0), -1)], [X])
    assert shapes_of(model) == [None]
    xml = save(model, tmp_path)
    assert irrun.validate(xml).ok
    m = irrun.load(xml)
    assert m.outputs[0].shape is None
    np.testing.assert_array_equal(next(iter(m.infer([np.ones(2, np.float32)]).values())), [2, 2])


def test_loop_i32_trip_count_and_runtime_condition(tmp_path):
    model = accumulate_loop("param", "param", trip_type=np.int32)
    compare(model, [sample([2, 3]), np.array(3, np.int32), np.array(True)], tmp_path)


def test_loop_current_iteration_feeds_the_body(tmp_path):
    """x * i summed over i = 0..4, the iteration number taken from the current_iteration Parameter (i32)."""
    X = param([3], name="X")
    it, xb, acc = param([1], np.int32, "it"), param([3], name="xb"), param([3], name="acc")
    total = ops.add(acc, ops.multiply(xb, ops.convert(it, "f32")))
    r_cond, r_acc = ops.result(ops.constant(True)), ops.result(total)
    loop = ops.loop(ops.constant(np.int64(5)), ops.constant(True))
    loop.set_function(ov.Model([r_cond, r_acc], [it, xb, acc]))
    loop.set_special_body_ports([0, 0])
    loop.set_invariant_input(xb, X.output(0))
    loop.set_merged_input(acc, X.output(0), r_acc.output(0))
    model = ov.Model([loop.get_iter_value(r_acc.output(0), -1)], [X])
    x = sample([3])
    got = compare(model, [x], tmp_path)
    np.testing.assert_allclose(next(iter(got.values())), x * 11, rtol=1e-5)


def test_loop_carried_value_grows(tmp_path):
    """A back edge whose shape changes each iteration: the body Parameter is widened to [?,2]."""
    X, H = param([3, 2], name="X"), param([1, 2], name="H")
    xi, hi = param([1, 2], name="xi"), param([1, 2], name="hi")
    grown = ops.concat([hi, xi], 0)
    r_cond, r_grown = ops.result(ops.constant(True)), ops.result(grown)
    loop = ops.loop(ops.constant(np.int64(3)), ops.constant(True))
    loop.set_function(ov.Model([r_cond, r_grown], [xi, hi]))
    loop.set_special_body_ports([-1, 0])
    loop.set_sliced_input(xi, X.output(0), 0, 1, 1, -1, 0)
    loop.set_merged_input(hi, H.output(0), r_grown.output(0))
    model = ov.Model([loop.get_iter_value(r_grown.output(0), -1)], [X, H])
    assert shapes_of(model) == [(Dim(1), 2)]
    got = compare(model, [sample([3, 2]), sample([1, 2])], tmp_path)
    assert next(iter(got.values())).shape == (4, 2)
    assert irrun.load(tmp_path / "model.xml").outputs[0].shape == (Dim(1), 2)


def test_loop_dynamic_input_shape(tmp_path):
    model = accumulate_loop(3, True, x_shape=(-1, 3))
    compare(model, [sample([4, 3])], tmp_path)


@pytest.mark.parametrize("trip, condition, body_limit, expected", [
    (10, True, None, [(2, 3), (10,), (10, 2, 3)]),
    (10, True, 20, [(2, 3), (Dim(),), (Dim(), 2, 3)]),
    ("param", True, None, [(2, 3), (Dim(),), (Dim(), 2, 3)]),
    (-1, True, 20, [(2, 3), (Dim(),), (Dim(), 2, 3)]),
    (10, False, None, [(0, 3), (0,), (0,)]),          # cannot start: OpenVINO's shapes
    (10, "param", None, [(2, 3), (10,), (10, 2, 3)]),
    (2**63 - 1, True, 20, [(2, 3), (Dim(),), (Dim(), 2, 3)]),     # ONNX's "no limit"
    (2**63 - 1, True, None, [(2, 3), (Dim(),), (Dim(), 2, 3)]),
])
def test_loop_shape_function_matches_openvino(trip, condition, body_limit, expected, tmp_path):
    model = accumulate_loop(trip, condition, limit=body_limit)
    assert shapes_of(model) == expected
    xml = save(model, tmp_path)
    assert irrun.validate(xml).ok
    assert [o.shape for o in irrun.load(xml).outputs] == expected


# ---------------------------------------------------------------- If

def branchy_if(cond=None):
    """then: (2*x, relu(x)); else: (concat(x, y), -x). Output 0 is [2,3] or [6,3]."""
    C = param([], np.bool_, "c") if cond is None else ops.constant(cond)
    X, Y = param([2, 3], name="X"), param([4, 3], name="Y")
    xt = param([2, 3], name="xt")
    then = ov.Model([ops.result(ops.multiply(xt, ops.constant(np.float32(2)))), ops.result(ops.relu(xt))], [xt])
    xe, ye = param([2, 3], name="xe"), param([4, 3], name="ye")
    other = ov.Model([ops.result(ops.concat([xe, ye], 0)), ops.result(ops.negative(xe))], [xe, ye])
    node = ops.if_op(C)
    node.set_then_body(then)
    node.set_else_body(other)
    node.set_input(X.output(0), xt, xe)
    node.set_input(Y.output(0), None, ye)
    outs = [node.set_output(then.get_results()[i], other.get_results()[i]) for i in range(2)]
    return ov.Model(outs, ([C] if cond is None else []) + [X, Y])


@pytest.mark.parametrize("cond", [True, False])
def test_if_runtime_condition(cond, tmp_path):
    got = compare(branchy_if(), [np.array(cond), sample([2, 3]), sample([4, 3])], tmp_path)
    assert next(iter(got.values())).shape == ((2, 3) if cond else (6, 3))


def test_if_shapes_merge_both_branches(tmp_path):
    model = branchy_if()
    assert shapes_of(model) == [(Dim(2, 6), 3), (2, 3)]
    m = irrun.load(save(model, tmp_path))
    assert [o.shape for o in m.outputs] == [(Dim(2, 6), 3), (2, 3)]


@pytest.mark.parametrize("cond", [True, False])
def test_if_constant_condition_takes_one_branch(cond, tmp_path):
    model = branchy_if(cond)
    expected = [(2, 3) if cond else (6, 3), (2, 3)]
    assert shapes_of(model) == expected
    compare(model, [sample([2, 3]), sample([4, 3])], tmp_path)
    assert [o.shape for o in irrun.load(tmp_path / "model.xml").outputs] == expected


def test_if_one_element_condition(tmp_path):
    """cond may be a 1-D tensor of one element; the branch reads a value of cond too."""
    C, X = param([1], np.bool_, "c"), param([3], np.int32, "X")
    ct, xt = param([1], np.bool_, "ct"), param([3], np.int32, "xt")
    then = ov.Model([ops.result(ops.select(ct, xt, ops.negative(xt)))], [ct, xt])
    xe = param([3], np.int32, "xe")
    other = ov.Model([ops.result(ops.multiply(xe, xe))], [xe])
    node = ops.if_op(C)
    node.set_then_body(then)
    node.set_else_body(other)
    node.set_input(C.output(0), ct, None)
    node.set_input(X.output(0), xt, xe)
    model = ov.Model([node.set_output(then.get_results()[0], other.get_results()[0])], [C, X])
    for cond in (True, False):
        compare(model, [np.array([cond]), sample([3], np.int32)], tmp_path / str(cond))


def loop_in_if() -> ov.Model:
    """then: a Loop summing x three times; else: x - 1."""
    C, X = param([], np.bool_, "c"), param([2, 2], name="X")
    xt = param([2, 2], name="xt")
    xb, acc = param([2, 2], name="xb"), param([2, 2], name="acc")
    total = ops.add(acc, xb)
    r_cond, r_acc = ops.result(ops.constant(True)), ops.result(total)
    loop = ops.loop(ops.constant(np.int64(3)), ops.constant(True))
    loop.set_function(ov.Model([r_cond, r_acc], [xb, acc]))
    loop.set_special_body_ports([-1, 0])
    loop.set_invariant_input(xb, xt.output(0))
    loop.set_merged_input(acc, xt.output(0), r_acc.output(0))
    then = ov.Model([ops.result(loop.get_iter_value(r_acc.output(0), -1))], [xt])
    xe = param([2, 2], name="xe")
    other = ov.Model([ops.result(ops.subtract(xe, ops.constant(np.float32(1))))], [xe])
    node = ops.if_op(C)
    node.set_then_body(then)
    node.set_else_body(other)
    node.set_input(X.output(0), xt, xe)
    return ov.Model([node.set_output(then.get_results()[0], other.get_results()[0])], [C, X])


@pytest.mark.parametrize("cond", [True, False])
def test_loop_nested_in_if(cond, tmp_path):
    x = sample([2, 2])
    got = next(iter(compare(loop_in_if(), [np.array(cond), x], tmp_path).values()))
    np.testing.assert_allclose(got, 4 * x if cond else x - 1, rtol=1e-5)


# ---------------------------------------------------------------- validate

@pytest.mark.parametrize("build", [lambda: rnn_ti(invariant=True), lambda: accumulate_loop("param", "param", limit=5),
                                   lambda: branchy_if()], ids=["TensorIterator", "Loop", "If"])
def test_openvino_written_ir_is_clean(build, tmp_path):
    """Not even a warning: bodies, port maps and back edges as OpenVINO writes them."""
    report = irrun.validate(save(build(), tmp_path))
    assert not list(report), [d.format() for d in report]


def _edit(xml, pattern, replacement, count=1):
    text = xml.read_text()
    new, n = re.subn(pattern, replacement, text, count=count)
    assert n == count, pattern
    xml.write_text(new)
    return xml


def codes_at(report, code):
    return [d for d in report.errors if d.code == code]


def test_unsupported_op_inside_a_body(tmp_path, monkeypatch):
    """An op irrun lacks (Relu, removed from the registry for this test) inside an If branch:
    validate warns and checks on; load refuses, naming it."""
    import irrun.registry
    irrun.registry.implementation("Relu", 1)          # the registry is filled before we edit it
    monkeypatch.delitem(irrun.registry._REGISTRY, ("Relu", 1))
    xml = save(branchy_if(), tmp_path)
    report = irrun.validate(xml)
    assert report.ok and "W-OP-UNSUPPORTED" in report.codes()
    with pytest.raises(irrun.errors.UnsupportedError, match="Relu-1"):
        irrun.load(xml)


def test_port_map_naming_a_missing_body_layer(tmp_path):
    xml = save(rnn_ti(), tmp_path)
    _edit(xml, r'(<input axis="1" external_port_id="0" internal_layer_id=")\d+', r"\g<1>99")
    report = irrun.validate(xml)
    found = codes_at(report, "E-SUBGRAPH")
    assert found and "99" in found[0].message and found[0].layer.type == "TensorIterator"
    with pytest.raises(irrun.errors.ModelError):
        irrun.load(xml)


def test_back_edge_to_a_result_is_reported(tmp_path):
    xml = save(accumulate_loop(3, True), tmp_path)
    _edit(xml, r'<edge from-layer="(\d+)" to-layer="(\d+)" />\s*</back_edges>',
          r'<edge from-layer="\1" to-layer="\1" /></back_edges>')
    assert codes_at(irrun.validate(xml), "E-SUBGRAPH")


def test_wrong_declared_concatenation_length(tmp_path):
    xml = save(accumulate_loop(4, True), tmp_path)
    text = xml.read_text()
    # the iteration-number output: <dim>4</dim> on the Loop's output port -> 5
    port = re.search(r'<port id="\d+" precision="FP32" names="[^"]*">\s*<dim>4</dim>\s*</port>', text).group(0)
    xml.write_text(text.replace(port, port.replace("<dim>4</dim>", "<dim>5</dim>")))
    errors = codes_at(irrun.validate(xml), "E-DECLARED-SHAPE")
    assert errors and errors[0].layer.type == "Loop"


def test_wrong_declared_dims_inside_a_body(tmp_path):
    xml = save(rnn_ti(), tmp_path)
    _edit(xml, r'(<layer id="\d+" name="[^"]*" type="Tanh" version="opset1">\s*<input>\s*<port id="0" '
               r'precision="FP32">\s*<dim>2</dim>\s*<dim>)4', r"\g<1>7")
    errors = codes_at(irrun.validate(xml), "E-DECLARED-SHAPE")
    assert errors and errors[0].layer.type == "Tanh" and "/" in errors[0].layer.id


def test_trip_count_of_rank_two_names_the_loop(tmp_path):
    xml = save(accumulate_loop("param", True), tmp_path)
    _edit(xml, r'<data shape="" element_type="i64" />\s*<output>\s*<port id="0" precision="I64" names="trip" />',
          '<data shape="1,1" element_type="i64" /><output><port id="0" precision="I64" names="trip">'
          '<dim>1</dim><dim>1</dim></port>')
    report = irrun.validate(xml)
    assert any(d.layer and d.layer.type == "Loop" and "trip count" in d.message for d in report.errors)


def test_if_branches_of_different_element_types(tmp_path):
    xml = save(branchy_if(), tmp_path)
    text = xml.read_text()
    else_body = text[text.index("<else_body>"):text.index("</else_body>")]
    changed = else_body.replace('type="Negative" version="opset1">', 'type="Convert" version="opset1">\n'
                                '<data destination_type="f16" />', 1)
    changed = re.sub(r'(type="Convert" version="opset1">\s*<data destination_type="f16" />\s*<input>.*?</input>\s*'
                     r'<output>\s*<port id="\d+" precision=)"FP32"', r'\1"FP16"', changed, flags=re.DOTALL)
    xml.write_text(text.replace(else_body, changed))
    report = irrun.validate(xml)
    assert any(d.layer and d.layer.type == "If" and "else_body" in d.message for d in report.errors), \
        [d.format() for d in report.errors]


def test_bodies_keep_the_models_memory_limit(tmp_path):
    """A 4 MiB tensor inside a branch, under a 1 MiB limit: refused when the branch first runs,
    not only outside bodies (the model's own tensors are all small)."""
    C, X = param([], np.bool_, "c"), param([1], name="X")
    xt = param([1], name="xt")
    big = ops.broadcast(xt, ops.constant(np.array([1024, 1024], np.int64)))
    then = ov.Model([ops.result(ops.reduce_sum(big, ops.constant(np.array([0, 1], np.int64)), False))], [xt])
    xe = param([1], name="xe")
    other = ov.Model([ops.result(ops.reduce_sum(xe, ops.constant(np.array([0], np.int64)), False))], [xe])
    node = ops.if_op(C)
    node.set_then_body(then)
    node.set_else_body(other)
    node.set_input(X.output(0), xt, xe)
    out = node.set_output(then.get_results()[0], other.get_results()[0])
    xml = save(ov.Model([out], [C, X]), tmp_path)
    feeds = {"c": np.array(True), "X": np.ones(1, np.float32)}
    assert irrun.load(xml).infer(feeds)
    small = irrun.load(xml, max_memory=1 << 20)
    assert small.infer({**feeds, "c": np.array(False)})
    with pytest.raises(irrun.IrrunError, match="limit of 1.0 MiB"):
        small.infer(feeds)
