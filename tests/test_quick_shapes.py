"""Run-time checks of dynamic shapes (irrun/shape_check.py): the short rules ops give for concrete
shapes (`Op.quick_shapes`) against shape inference, the ops that check themselves, and a dynamic
model whose shapes change at every call against OpenVINO, errors included."""
from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset13 as ops
import pytest

import irrun
from irrun import etypes
from irrun.errors import ShapeError
from irrun.registry import Op, TensorType
from irrun.shapes import numpy_broadcast
from ovutil import assert_close, run_openvino, save

RNG = np.random.default_rng(7)


def _param(rank: int, etype=ov.Type.f32, name=None):
    return ops.parameter([-1] * rank, etype, name=name)


def _ops_under_test() -> dict[str, ov.Node]:
    """One layer per op with a rule, its attributes varied, on inputs of dynamic dims."""
    f32 = lambda r: _param(r)  # noqa: E731
    i64 = lambda r: _param(r, ov.Type.i64)  # noqa: E731
    return {
        "Add numpy": ops.add(f32(3), f32(2)),
        "Add none": ops.add(f32(2), f32(2), auto_broadcast="none"),
        "Multiply pdpd": ops.multiply(f32(3), f32(2), auto_broadcast="pdpd"),
        "LessEqual": ops.less_equal(f32(2), f32(3)),
        "BitwiseAnd": ops.bitwise_and(_param(2, ov.Type.boolean), _param(3, ov.Type.boolean)),
        "Select": ops.select(_param(3, ov.Type.boolean), f32(2), f32(3)),
        "Sqrt": ops.sqrt(f32(3)),
        "Convert": ops.convert(f32(3), ov.Type.i32),
        "Concat 0": ops.concat([f32(3), f32(3), f32(3)], 0),
        "Concat -1": ops.concat([f32(3), f32(3)], -1),
        "Gather axis 1": ops.gather(f32(3), i64(2), ops.constant(np.int64(1))),
        "Gather axis -1": ops.gather(f32(2), i64(1), ops.constant(np.int64(-1))),
        "Gather batch_dims": ops.gather(f32(3), i64(2), ops.constant(np.int64(1)), 1),
        "Broadcast numpy": ops.broadcast(f32(2), _param(1, ov.Type.i64), "numpy"),
        "Broadcast bidirectional": ops.broadcast(f32(3), _param(1, ov.Type.i64), "bidirectional"),
        "Range-4": ops.range(ops.parameter([], ov.Type.i64), ops.parameter([], ov.Type.i64),
                             ops.parameter([], ov.Type.i64), ov.Type.i64),
        "SDPA": ops.scaled_dot_product_attention(f32(4), f32(4), f32(4), f32(3), ops.constant(np.float32(0.5))),
        "SDPA causal": ops.scaled_dot_product_attention(f32(3), f32(3), f32(3), f32(2), ops.constant(np.float32(1)),
                                                        causal=True),
    }


def _random_args(node: ov.Node) -> list[np.ndarray]:
    """Concrete inputs of the node's ranks and types, dims drawn so that some agree and some do
    not; small integer inputs (targets, range bounds) get values."""
    args, base = [], [int(RNG.choice([1, 2, 3])) for _ in range(5)]
    for i in range(node.get_input_size()):
        source = node.input_value(i)
        etype = source.get_element_type()
        rank = source.get_partial_shape().rank.get_length()
        if source.get_node().get_type_name() == "Constant":
            args.append(source.get_node().get_data())
            continue
        if node.get_type_name() == "Range":
            args.append(np.array(int(RNG.integers(-6, 7)), np.int64))
            continue
        if node.get_type_name() == "Broadcast" and i == 1:   # the data's dims, some changed, some in front
            dims = [d if RNG.random() < 0.7 else int(RNG.choice([1, 2, 3])) for d in args[0].shape]
            args.append(np.array([int(RNG.choice([1, 2]))] * int(RNG.integers(0, 2)) + dims, np.int64))
            continue
        if rank and RNG.random() < 0.3:   # another rank than declared: inference at run time sees it
            rank = int(RNG.integers(max(rank - 1, 1), rank + 2))
        shape = tuple(base[k] if RNG.random() < 0.75 else int(RNG.choice([1, 2, 3])) for k in range(rank))
        dtype = np.dtype(etype.to_dtype()) if etype != ov.Type.boolean else np.dtype(bool)
        args.append(np.zeros(shape, dtype))
    return args


def _irrun_op(node: ov.Node, tmp_path) -> Op:
    params = [i.get_source_output().get_node() for i in node.inputs()]
    xml = save(ov.Model([ops.result(node)], [p for p in params if p.get_type_name() == "Parameter"]), tmp_path)
    m = irrun.load(xml)
    (found,) = [n for n in m.analysis.nodes.values() if n.layer.op_type == node.get_type_name()]
    return found.op


@pytest.mark.parametrize("name", list(_ops_under_test()))
def test_quick_rules_agree_with_shape_inference(name, tmp_path):
    """On random concrete inputs, where an op's rule gives output shapes, inference accepts the
    inputs and gives the same shapes; where inference refuses them, the rule gives none (inference
    then says what is wrong).  The rule covers the common cases: most accepted inputs."""
    node = _ops_under_test()[name]
    op = _irrun_op(node, tmp_path)
    assert type(op).quick_shapes is not Op.quick_shapes
    answered = accepted = 0
    for _ in range(600):
        args = _random_args(node)
        quick = op.quick_shapes(tuple(args))
        shown = [TensorType(a.shape, etypes.from_dtype(a.dtype), a if a.size <= 64 else None) for a in args]
        try:
            inferred = [t.shape for t in op.infer(shown)]
        except ShapeError:
            inferred = None
        accepted += inferred is not None
        if quick is not None:
            answered += 1
            shapes, read = quick
            assert inferred is not None, (name, [a.shape for a in args])
            assert [tuple(s) for s in shapes] == [tuple(s) for s in inferred], (name, [a.shape for a in args])
            assert all(0 <= i < len(args) for i in read)
    assert accepted > 50
    if name not in ("Multiply pdpd", "Gather batch_dims"):     # (no rule: inference decides)
        assert answered >= 0.9 * accepted


def test_numpy_broadcast():
    for _ in range(2000):
        a = tuple(int(RNG.choice([1, 2, 3])) for _ in range(int(RNG.integers(0, 4))))
        b = tuple(int(RNG.choice([1, 2, 3])) for _ in range(int(RNG.integers(0, 4))))
        try:
            expected = np.broadcast_shapes(a, b)
        except ValueError:
            expected = None
        assert numpy_broadcast(a, b) == expected


def test_views_and_sinks_check_themselves(tmp_path):
    """Reshape, Unsqueeze, Transpose and Slice work their output shapes out by inference's rule
    and make views: no check before them; an elementwise layer keeps its check.  A target that
    does not fit is still the Reshape's error."""
    x = _param(2, name="x")
    y = ops.unsqueeze(ops.reshape(ops.relu(x), ops.constant(np.array([0, -1, 2], np.int64)), True),
                      ops.constant(np.int64(1)))
    y = ops.slice(ops.transpose(y, ops.constant(np.array([0, 2, 1, 3], np.int64))),
                  ops.constant(np.array([1], np.int64)), ops.constant(np.array([-1], np.int64)),
                  ops.constant(np.array([1], np.int64)), ops.constant(np.array([3], np.int64)))
    xml = save(ov.Model([ops.result(y)], [x]), tmp_path)
    m = irrun.load(xml, optimize=False)
    checked = {s.node.layer.op_type: s.check is not None for s in m._plan.steps}
    assert checked["Relu"]
    assert not any(checked[t] for t in ("Reshape", "Unsqueeze", "Transpose", "Slice"))
    for rows in (4, 6, 2, 8):
        feeds = {"x": RNG.standard_normal((1, rows * 2)).astype(np.float32)}
        (expected,) = run_openvino(xml, [feeds["x"]])
        assert_close(m.infer(feeds)[0], expected)
    with pytest.raises(irrun.IrrunError, match="cannot reshape") as err:   # 3 elements into [1, -1, 2]
        m.infer({"x": np.ones((1, 3), np.float32)})
    assert err.value.layer is not None and "Reshape" in str(err.value.layer)


def test_shapes_changing_every_call_match_openvino(tmp_path):
    """A decoding step's pattern: a cache that grows by a row a call, a mask from Range and
    LessEqual over it, Broadcast to a shape computed from it, attention, Concat and Gather: every
    call brings new shapes, so every check runs its rule.  Inputs that do not fit together are
    still a located error."""
    past, new, at = _param(3, name="past"), _param(3, name="new"), _param(1, ov.Type.i64, name="at")
    cache = ops.concat([past, new], 1)                                               # [1, n + 1, 8]
    length = ops.gather(ops.shape_of(cache), ops.constant(np.int64(1)), ops.constant(np.int64(0)))
    positions = ops.range(ops.constant(np.int64(0)), length, ops.constant(np.int64(1)), ov.Type.i64)
    mask = ops.select(ops.less_equal(positions, at), ops.constant(np.float32(0)), ops.constant(np.float32(-1e9)))
    mask = ops.unsqueeze(mask, ops.constant(np.array([0, 1, 2], np.int64)))         # [1, 1, 1, n + 1]
    rows_and_width = ops.slice(ops.shape_of(cache), ops.constant(np.array([1], np.int64)),
                               ops.constant(np.array([3], np.int64)), ops.constant(np.array([1], np.int64)))
    keys = ops.broadcast(ops.unsqueeze(cache, ops.constant(np.int64(1))),
                         ops.concat([ops.constant(np.array([1, 2], np.int64)), rows_and_width], 0),
                         "bidirectional")                                            # [1, 2, n + 1, 8]
    query = ops.unsqueeze(ops.multiply(new, ops.constant(np.float32(0.5))), ops.constant(np.int64(1)))
    attended = ops.scaled_dot_product_attention(query, keys, keys, mask, ops.constant(np.float32(0.25)))
    first = ops.gather(cache, ops.constant(np.array([0], np.int64)), ops.constant(np.int64(1)))
    out = ops.add(attended, ops.sqrt(ops.abs(first)))                                # [1, 2, 1, 8]
    xml = save(ov.Model([ops.result(out)], [past, new, at]), tmp_path)
    m = irrun.load(xml)
    for n in range(1, 12):
        feeds = [RNG.standard_normal((1, n, 8)).astype(np.float32), RNG.standard_normal((1, 1, 8)).astype(np.float32),
                 np.array([n // 2], np.int64)]
        (expected,) = run_openvino(xml, feeds)
        assert_close(m.infer(feeds)[0], expected)
    with pytest.raises(irrun.IrrunError) as err:
        m.infer([np.zeros((1, 4, 8), np.float32), np.zeros((1, 1, 9), np.float32), np.zeros(1, np.int64)])
    assert err.value.layer is not None
