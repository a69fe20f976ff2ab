"""TopK-1/3/11, NonZero-3 and Range-1/4 against OpenVINO.

Differential runs (`compare`) against the CPU plugin; the reference evaluator
where the CPU plugin is known to be wrong (each case says why); shape
functions against OpenVINO's own partial-shape inference; and validate tests.
Divergences are recorded in specs/errata/detection.md.
"""

import numpy as np
import openvino as ov
import openvino.opset1 as ops1
import openvino.opset3 as ops3
import openvino.opset11 as ops11
import openvino.opset16 as ops16
import pytest

from ovutil import (
    compare, edited_ir, irrun_infer, irrun_infer_all, model, openvino_refuses, ov_shape_text, param, run_openvino,
    save, tensor_type
)
import irrun
from irrun.ops import sorting
from irrun.errors import ShapeError
from irrun.shapes import format_shape

RNG = np.random.default_rng(7)
D = ov.Dimension
TOPK = {1: ops1, 3: ops3, 11: ops11}


def distinct(shape, dtype=np.float32):
    """Values without ties (TopK without stable=true may order ties any way on the CPU plugin)."""
    n = int(np.prod(shape))
    values = RNG.permutation(n) - n // 2
    if np.dtype(dtype).kind == "u":
        values = values + n // 2
    if np.dtype(dtype).kind == "f":
        values = values * 0.37
    return values.reshape(shape).astype(dtype)


# ---------------------------------------------------------------- TopK differential

def topk_model(version, shape, k, axis, mode, sort, dtype=np.float32, index_type="i32", stable=False, k_dtype=np.int64):
    p = param(shape, dtype)
    k_node = ops1.constant(np.array(k, dtype=k_dtype))
    if version == 11:
        node = ops11.topk(p, k_node, axis, mode, sort, index_type, stable)
    else:
        node = TOPK[version].topk(p, k_node, axis, mode, sort, index_type) if version == 3 else \
            ops1.topk(p, k_node, axis, mode, sort, index_type)
    return model(node, [p])


TOPK_CASES = [(version, mode, sort) for version in (1, 3, 11) for mode in ("max", "min")
              for sort in ("value", "index", "none")]


@pytest.mark.parametrize("version, mode, sort", TOPK_CASES)
@pytest.mark.parametrize("shape, axis, k", [([2, 9], 1, 4), ([3, 5, 4], -2, 5), ([6, 2, 3], 0, 1), ([17], 0, 17)])
def test_topk_modes(version, mode, sort, shape, axis, k, tmp_path):
    compare(topk_model(version, shape, k, axis, mode, sort), [distinct(shape)], tmp_path)


@pytest.mark.parametrize("dtype", [np.float16, np.int32, np.int64, np.int8, np.uint8])
@pytest.mark.parametrize("index_type", ["i32", "i64"])
def test_topk_element_types(dtype, index_type, tmp_path):
    shape = [3, 40]
    m = topk_model(11, shape, 7, 1, "max", "value", dtype, index_type)
    compare(m, [distinct(shape, dtype) if np.dtype(dtype).itemsize > 1 else
                np.stack([RNG.permutation(40) + (i * 10) for i in range(3)]).astype(dtype)], tmp_path)


@pytest.mark.parametrize("k_dtype", [np.int32, np.uint8, np.int64])
def test_topk_k_element_types(k_dtype, tmp_path):
    compare(topk_model(3, [4, 6], 3, -1, "min", "value", k_dtype=k_dtype), [distinct([4, 6])], tmp_path)


@pytest.mark.parametrize("mode", ["max", "min"])
@pytest.mark.parametrize("sort", ["value", "index"])
def test_topk_stable_ties(mode, sort, tmp_path):
    """Many ties: with stable=true equal values keep their input order.

    sort=index: the CPU plugin picks a different subset among the tied values at the
    cut (it ignores `stable` there; errata), so the reference is the oracle."""
    x = RNG.integers(0, 4, (5, 33)).astype(np.float32)
    m = topk_model(11, [5, 33], 12, 1, mode, sort, stable=True)
    compare(m, [x], tmp_path, oracle="reference" if sort == "index" else "cpu")


@pytest.mark.parametrize("mode", ["max", "min"])
@pytest.mark.parametrize("sort, data", [("value", "distinct"), ("index", "distinct"), ("none", "distinct"),
                                        ("value", "ties"), ("index", "ties"), ("value", "integers"),
                                        ("index", "integers")])
def test_topk_few_of_many(mode, sort, data, tmp_path):
    """k a small share of a long axis (a classifier's top 5, 100 of a detector's scores, an LLM's top
    40 of its vocabulary): chosen by partition, not a full sort; ties at the k-th value keep input
    order (stable=true; for sort=index the reference, as in test_topk_stable_ties; sort=none cannot
    be stable, and OpenVINO orders its ties as it likes)."""
    shape, k = [3, 4000], 40
    dtype = np.int32 if data == "integers" else np.float32
    x = {"distinct": lambda: distinct(shape),
         "ties": lambda: RNG.integers(0, 300, shape).astype(np.float32),       # ~13 of each value
         "integers": lambda: RNG.integers(-1000, 1000, shape).astype(np.int32)}[data]()
    m = topk_model(11, shape, k, 1, mode, sort, dtype, stable=sort != "none")
    got = compare(m, [x], tmp_path, oracle="reference" if sort == "index" and data != "distinct" else "cpu")
    order = np.argsort(-x if mode == "max" else x, axis=1, kind="stable")[:, :k]
    np.testing.assert_array_equal(sorting._top_k_by_partition(x, k, mode == "max"), order)    # the path taken
    if sort == "index":
        order = np.sort(order, axis=1)
    np.testing.assert_array_equal(list(got.values())[1], order)


@pytest.mark.parametrize("mode", ["max", "min"])
@pytest.mark.parametrize("shape, axis", [([2, 21, 40, 48], 1), ([3, 700], 1), ([5, 6], 0)],
                         ids=["classes", "long", "short-first"])
@pytest.mark.parametrize("data", ["distinct", "ties"])
def test_topk_one(mode, shape, axis, data, tmp_path):
    """k = 1, an argmax (a segmentation head's over 21 classes, a classifier's over 700): the first
    of equal extremes, as the CPU plugin (stable=true)."""
    x = distinct(shape) if data == "distinct" else RNG.integers(0, 3, shape).astype(np.float32)
    got = compare(topk_model(11, shape, 1, axis, mode, "value", stable=True), [x], tmp_path)
    expected = (np.argmax if mode == "max" else np.argmin)(x, axis=axis, keepdims=True)
    np.testing.assert_array_equal(list(got.values())[1], expected)


@pytest.mark.parametrize("mode, expected", [("max", [[1], [0]]), ("min", [[0], [2]])])
def test_topk_one_with_nan(mode, expected, tmp_path):
    """NaN ranks largest: first for max, never the minimum (while other values are)."""
    x = np.array([[1, np.nan, 3, 2], [7, 2, 1, 5]], np.float32)
    got = list(irrun.load(save(topk_model(11, [2, 4], 1, 1, mode, "value"), tmp_path)).infer([x]).values())
    np.testing.assert_array_equal(got[1], expected)


def test_topk_few_of_many_with_nan(tmp_path):
    """A NaN in the data takes the full sort (NaN ranks largest)."""
    x = distinct([2, 1000])
    x[0, 17] = np.nan
    got = list(irrun.load(save(topk_model(11, [2, 1000], 5, 1, "max", "value"), tmp_path)).infer([x]).values())
    assert got[1][0, 0] == 17 and np.isnan(got[0][0, 0])
    np.testing.assert_array_equal(got[1][1], np.argsort(-x[1], kind="stable")[:5])


def test_topk_ties_keep_input_order_by_hand(tmp_path):
    x = np.array([[3, 1, 3, 2, 1, 3]], np.float32)
    got = list(irrun.load(save(topk_model(1, [1, 6], 4, 1, "max", "value"), tmp_path)).infer([x]).values())
    np.testing.assert_array_equal(got[0], [[3, 3, 3, 2]])
    np.testing.assert_array_equal(got[1], [[0, 2, 5, 3]])


@pytest.mark.parametrize("mode, values, indices", [("max", [np.nan, np.nan, 5, 3], [2, 5, 6, 0]),
                                                   ("min", [1, 1, 2, 3], [1, 7, 4, 0])])
def test_topk_nan_is_largest(mode, values, indices, tmp_path):
    """OpenVINO's NaN order is undefined (test_openvino_topk_nan_order_is_undefined); irrun ranks NaN
    above +inf, so max puts NaN first and min never reaches it while numbers remain."""
    x = np.array([[3, 1, np.nan, 3, 2, np.nan, 5, 1]], np.float32)
    got = list(irrun.load(save(topk_model(11, [1, 8], 4, 1, mode, "value"), tmp_path)).infer([x]).values())
    np.testing.assert_array_equal(got[0], [values])
    np.testing.assert_array_equal(got[1], [indices])


def test_openvino_topk_nan_order_is_undefined(tmp_path):
    """The CPU plugin's answer for the first 3 of a slice with NaN depends on k (errata)."""
    x = np.array([[3, 1, np.nan, 3, 2, np.nan, 5, 1]], np.float32)
    top3 = run_openvino(save(topk_model(11, [1, 8], 3, 1, "max", "value"), tmp_path / "a.xml"), [x])[0]
    top8 = run_openvino(save(topk_model(11, [1, 8], 8, 1, "max", "value"), tmp_path / "b.xml"), [x])[0]
    assert not np.array_equal(top3, top8[:, :3], equal_nan=True)


def test_topk_dynamic_k_and_shape(tmp_path):
    p = param([-1, D(3, 20)])
    k = param([], np.int32)
    m = model(ops11.topk(p, k, 1, "max", "index", "i64"), [p, k])
    compare(m, [distinct([3, 12]), np.array(5, np.int32)], tmp_path)


def test_topk_k_zero_gives_empty_axis(tmp_path):
    got = list(irrun.load(save(topk_model(3, [2, 5], 0, 1, "max", "value"), tmp_path)).infer(
        [distinct([2, 5])]).values())
    assert got[0].shape == got[1].shape == (2, 0)


TOPK_SHAPES = [[2, 8], [2, -1], [2, D(3, 9)], [D(1, 4), 6], None]


@pytest.mark.parametrize("data_shape", TOPK_SHAPES, ids=str)
@pytest.mark.parametrize("k", [3, 0, None])
def test_topk_shape_function(data_shape, k, tmp_path):
    """Output shapes against OpenVINO's shape inference (k known, k zero, k from a Parameter)."""
    k_node = param([], np.int64) if k is None else ops1.constant(np.int64(k))
    node = ops11.topk(param(data_shape), k_node, 1, "max", "value", "i64")
    out = irrun_infer_all("TopK", 11, {"axis": "1", "mode": "max", "sort": "value", "index_element_type": "i64"},
                          [tensor_type(data_shape), tensor_type([], np.int64, k)])
    assert [format_shape(t.shape) for t in out] == [ov_shape_text(o.get_partial_shape()) for o in node.outputs()]
    assert [t.etype.name for t in out] == ["f32", "i64"]


@pytest.mark.parametrize("attrs, words", [({"axis": "2"}, "axis 2"), ({"axis": "-3"}, "axis -3")])
def test_topk_bad_axis(attrs, words, tmp_path):
    xml = edited_ir(topk_model(1, [2, 8], 3, 1, "max", "value"), tmp_path, "TopK", attrs)
    assert openvino_refuses(xml)
    problems = irrun.validate(xml).errors
    assert any(words in e.message and e.layer.type == "TopK" for e in problems), [e.format() for e in problems]


def test_topk_k_larger_than_axis_is_an_error(tmp_path):
    """OpenVINO reads it, but the CPU plugin refuses to compile: K (10) exceeds the axis dimension (8)."""
    xml = save(topk_model(11, [2, 8], 10, 1, "max", "value"), tmp_path)
    with pytest.raises(RuntimeError, match="exceeds"):
        run_openvino(xml, [distinct([2, 8])])
    problems = irrun.validate(xml).errors
    assert [e.layer.type for e in problems] == ["TopK"] and "k=10 exceeds" in problems[0].message


def test_topk_declared_shape(tmp_path):
    xml = edited_ir(topk_model(3, [2, 8], 3, 1, "max", "value"), tmp_path, "TopK", output_dims=[2, 4], port=1)
    problems = irrun.validate(xml).errors
    assert [(e.code, e.port) for e in problems] == [("E-DECLARED-SHAPE", 1)]
    assert "k = 3" in problems[0].message


# ---------------------------------------------------------------- NonZero

def nonzero_model(shape, dtype=np.float32, output_type="i64"):
    p = param(shape, dtype)
    return model(ops3.non_zero(p, output_type), [p])


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.int64, np.uint8, np.int8, np.bool_])
@pytest.mark.parametrize("output_type", ["i32", "i64"])
def test_nonzero_element_types(dtype, output_type, tmp_path):
    x = (RNG.integers(0, 3, (3, 4, 5)) * (RNG.random((3, 4, 5)) > 0.4)).astype(dtype)
    compare(nonzero_model([3, 4, 5], dtype, output_type), [x], tmp_path)


@pytest.mark.parametrize("x", [
    np.array([0.0, -0.0, np.nan, np.inf, 1e-30], np.float32),     # -0 is zero, NaN is not
    np.zeros((2, 3), np.float32),                                 # empty selection: shape [2, 0]
    np.ones((2, 1, 3, 2), np.float32),                            # everything, 4-D
    np.array(2.5, np.float32),                                    # scalar: [[0]]
    np.array(0.0, np.float32),                                    # zero scalar: [1, 0] on the CPU plugin
], ids=["signed-zero-nan", "all-zero", "all-4d", "scalar", "zero-scalar"])
def test_nonzero_adversarial(x, tmp_path):
    compare(nonzero_model(list(x.shape)), [x], tmp_path)


def test_nonzero_dynamic_input(tmp_path):
    compare(nonzero_model([-1, D(2, 8)], np.int32), [RNG.integers(-1, 2, (5, 6)).astype(np.int32)], tmp_path)


@pytest.mark.parametrize("data_shape", [[2, 5], [], [3], [2, -1], [D(1, 4), 3], [D(2, -1), 3], None, [0, 3],
                                        [2, D(0, 3)]], ids=str)
def test_nonzero_shape_function(data_shape):
    node = ops3.non_zero(param(data_shape), "i32")
    out = irrun_infer_all("NonZero", 3, {"output_type": "i32"}, [tensor_type(data_shape)])
    assert format_shape(out[0].shape) == ov_shape_text(node.get_output_partial_shape(0))
    assert out[0].etype.name == "i32"


def test_nonzero_of_a_constant_is_static(tmp_path):
    c = ops1.constant(np.array([[0, 1.0], [np.nan, -0.0]], np.float32))
    node = ops3.non_zero(c)
    out = irrun_infer_all("NonZero", 3, {}, [tensor_type([2, 2], np.float32, c.get_data())])
    assert format_shape(out[0].shape) == ov_shape_text(node.get_output_partial_shape(0)) == "[2,2]"


# ---------------------------------------------------------------- Range

def range_model(version, start, stop, step, dtype, output_type=None, const=False):
    """Range on three scalars, as Parameters (the default) or Constants."""
    values = [np.array(v, dtype=dtype) for v in (start, stop, step)]
    nodes = [ops1.constant(v) for v in values] if const else [param([], dtype, n) for n in ("start", "stop", "step")]
    node = ops1.range(*nodes) if version == 1 else ops16.range(*nodes, output_type)
    return model(node, [] if const else nodes), ([] if const else values)


RANGE_CPU_CASES = [
    (1, 0, 5, 1, np.float32, None), (1, 0.5, 2.2, 0.5, np.float32, None), (1, 0, 1, 0.1, np.float32, None),
    (1, 5, 0, -1.5, np.float32, None), (1, 0, 5, 1, np.int32, None), (1, 7, -3, -3, np.int64, None),
    (1, 0, 10, 3, np.uint8, None), (1, 10, 0, -3, np.int8, None), (1, 0.5, 3, 0.3, np.float16, None),
    (1, 3, 3, 1, np.float32, None), (1, 0, 5, 7, np.int32, None),
    (4, 0.5, 5.7, 1.3, np.float32, "f32"), (4, 0, 5, 1, np.int32, "f32"), (4, 1, 10, 3, np.int64, "f16"),
    (4, 0, 1, 0.1, np.float32, "f16"), (4, 0.5, 2, 0.25, np.float64, "f64"), (4, 3, -5, -2, np.int32, "u32"),
    (4, 2, 30, 4, np.int32, "i64"), (4, 250, 0, -7, np.int32, "u8"), (4, -10, 10, 3, np.int64, "i8"),
]


@pytest.mark.parametrize("version, start, stop, step, dtype, output_type", RANGE_CPU_CASES, ids=str)
def test_range(version, start, stop, step, dtype, output_type, tmp_path):
    m, inputs = range_model(version, start, stop, step, dtype, output_type)
    compare(m, inputs, tmp_path)


# The CPU plugin differs from OpenVINO's reference (and its own shape inference) here: errata.
RANGE_REFERENCE_CASES = [
    (1, 0, 5, -1, np.float32, None),             # step away from stop: CPU counts the other way
    (4, 0.5, 5.7, 1.3, np.float32, "i32"),       # integer output: CPU rounds start + i * step
    (4, -2.7, 5.7, 1.9, np.float32, "i64"),      # instead of truncating start, stop, step first
    (4, 0, 3, 0.9, np.float32, "i32"),           # step truncates to 0: no elements
    (4, 0, 300, 7, np.int32, "u8"),              # wrap-around: CPU saturates
    (4, 0, 300, 70, np.float32, "i8"),
    (4, 3.9, -5.5, -2.5, np.float32, "u32"),
]


@pytest.mark.parametrize("version, start, stop, step, dtype, output_type", RANGE_REFERENCE_CASES, ids=str)
def test_range_where_cpu_plugin_differs(version, start, stop, step, dtype, output_type, tmp_path):
    m, inputs = range_model(version, start, stop, step, dtype, output_type)
    compare(m, inputs, tmp_path, oracle="reference")


@pytest.mark.parametrize("case", RANGE_CPU_CASES[:4] + RANGE_REFERENCE_CASES[1:3], ids=str)
def test_range_constant_inputs_fold(case, tmp_path):
    version, start, stop, step, dtype, output_type = case
    m, _ = range_model(version, start, stop, step, dtype, output_type, const=True)
    compare(m, [], tmp_path)


RANGE_SHAPE_VALUES = [(0, 5, 1), (0.5, 2.2, 0.5), (0, 1, 0.1), (5, 0, -1.5), (0, 5, -1), (-2.7, 5.7, 1.9),
                      (0, 3, 0.9), (3.9, -5.5, -2.5), (1e3, -1e3, -0.7), (0.1, 0.3, 0.1), (2, 2, 3)]


@pytest.mark.parametrize("start, stop, step", RANGE_SHAPE_VALUES, ids=str)
@pytest.mark.parametrize("version, dtype, output_type", [(1, np.float32, None), (1, np.int32, None),
                                                         (4, np.float32, "i32"), (4, np.float32, "f32"),
                                                         (4, np.float64, "u8")])
def test_range_shape_function(start, stop, step, version, dtype, output_type):
    """Lengths from known values against OpenVINO's shape inference."""
    values = [np.array(v, dtype) for v in (start, stop, step)]
    consts = [ops1.constant(v) for v in values]
    try:
        node = ops1.range(*consts) if version == 1 else ops16.range(*consts, output_type)
        expected = ov_shape_text(node.get_output_partial_shape(0))
    except RuntimeError:
        expected = "error"
    attrs = {} if version == 1 else {"output_type": output_type}
    try:
        got = format_shape(irrun_infer("Range", version, attrs, [tensor_type([], dtype, v) for v in values]).shape)
    except ShapeError:
        got = "error"
    assert got == expected


def test_range_unknown_values_give_dynamic_length():
    out = irrun_infer_all("Range", 4, {"output_type": "i64"}, [tensor_type([], np.float32)] * 3)
    assert format_shape(out[0].shape) == "[?]" and out[0].etype.name == "i64"


@pytest.mark.parametrize("step", [0, np.nan])
def test_range_invalid_constant_step(step, tmp_path):
    """OpenVINO refuses a known step of 0 or NaN; built with 1, then edited in the .bin."""
    m, _ = range_model(1, 0, 5, 1, np.float32, const=True)
    xml = save(m, tmp_path)
    blob = bytearray(xml.with_suffix(".bin").read_bytes())
    blob[8:12] = np.float32(step).tobytes()           # start, stop, step: 4 bytes each
    xml.with_suffix(".bin").write_bytes(bytes(blob))
    assert openvino_refuses(xml)
    problems = irrun.validate(xml).errors
    assert any(e.layer.type == "Range" and "step" in e.message for e in problems), [e.format() for e in problems]


def test_range_mixed_input_types_v1(tmp_path):
    """Range-1 needs one element type for start, stop and step (hand-written IR: OpenVINO won't build it)."""
    from irxml import edge, layer, net, port, write
    layers = [layer(i, n, "Parameter", data={"shape": "", "element_type": t}, outputs=[port(0, (), p)])
              for i, (n, t, p) in enumerate([("a", "f32", "FP32"), ("b", "i32", "I32"), ("c", "f32", "FP32")])]
    layers.append(layer(3, "the_range", "Range", "opset1", inputs=[port(i, (), p) for i, p in
                                                                   enumerate(["FP32", "I32", "FP32"])],
                        outputs=[port(3, (-1,), "FP32")]))
    layers.append(layer(4, "out", "Result", inputs=[port(0, (-1,), "FP32")]))
    xml = write(tmp_path, net(layers, [edge(i, 0, 3, i) for i in range(3)] + [edge(3, 3, 4, 0)]))
    assert openvino_refuses(xml)
    problems = irrun.validate(xml).errors
    assert any(e.layer.name == "the_range" and "same element type" in e.message for e in problems)
