"""The Python API on the shipped sample model and on hand-made IRs."""
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

import irrun
from ovutil import assert_close, run_openvino
from irxml import edge, layer, net, port, relu_model, write

ROOT = Path(__file__).resolve().parent.parent
DIGITS = ROOT / "models" / "digits"


@pytest.fixture(scope="module")
def digits():
    return irrun.load(DIGITS / "model.xml")


def test_sample_model_io(digits):
    (inp,), (out,) = digits.inputs, digits.outputs
    assert inp.name == "image" and str(inp.element_type) == "f32" and inp.shape[1:] == (1, 8, 8)
    assert out.name == "probabilities" and out.shape[1:] == (10,)
    assert isinstance(digits.graph, nx.MultiDiGraph) and digits.graph.number_of_nodes() == len(digits.layers)


def test_sample_model_matches_openvino_on_the_test_set(digits):
    data = np.load(DIGITS / "test_set.npz")
    images, labels = data["images"], data["labels"]
    got = digits.infer({"image": images})["probabilities"]
    (expected,) = run_openvino(DIGITS / "model.xml", [images])
    assert_close(got, expected)
    assert (got.argmax(1) == expected.argmax(1)).all()
    assert (got.argmax(1) == labels).mean() > 0.95


@pytest.mark.parametrize("digit", [0, 3, 7])
def test_sample_inputs_are_classified(digits, digit):
    x = np.load(DIGITS / f"digit{digit}.npy")
    for call in (lambda: digits.infer(x), lambda: digits.infer([x]), lambda: digits.infer({"image": x}),
                 lambda: digits(x)):
        assert call()["probabilities"].argmax() == digit


def test_inputs_by_parameter_layer_name(tmp_path):
    xml = relu_model().replace(' names="x"', ' names="tensor_x"')
    m = irrun.load(write(tmp_path, xml))
    a = np.array([[-1, 0, 2]], np.float32)
    assert (m.infer({"x": a})["y"] == m.infer({"tensor_x": a})["y"]).all()


@pytest.mark.parametrize("bad, message", [
    ({"nope": np.zeros((1, 3), np.float32)}, "unknown input 'nope'"),
    ({}, "missing input"),
    ([np.zeros((1, 3), np.float32)] * 2, "got 2 inputs"),
    (np.zeros((1, 4), np.float32), r"expects shape \[1,3\], got \[1, 4\]"),
    (np.zeros((3,), np.float32), "expects rank 2"),
    (np.zeros((1, 3), np.complex64), "expects f32"),
    (np.array([["a", "b", "c"]]), "expects f32"),
])
def test_input_errors_are_clear(tmp_path, bad, message):
    m = irrun.load(write(tmp_path, relu_model()))
    with pytest.raises(irrun.InputError, match=message):
        m.infer(bad)


@pytest.mark.parametrize("value", [np.array([[-1.0, 2.0, 3.0]]), np.array([[-1, 2, 3]], np.int32),
                                   np.array([[-1, 2, 3]], np.int64)])
def test_inputs_are_converted_within_their_kind_like_openvino(tmp_path, value):
    m = irrun.load(write(tmp_path, relu_model()))
    out = m.infer(value)["y"]
    assert out.dtype == np.float32 and out.tolist() == [[0, 2, 3]]


def test_float_input_to_integer_parameter_is_refused(tmp_path):
    """OpenVINO's Python API would truncate 1.7 to 1 silently; irrun asks for an explicit conversion."""
    m = irrun.load(write(tmp_path, relu_model().replace('element_type="f32"', 'element_type="i32"')
                         .replace('precision="FP32"', 'precision="I32"')))
    with pytest.raises(irrun.InputError, match="expects i32"):
        m.infer(np.array([[1.7, 2, 3]], np.float32))
    assert m.infer(np.array([[1, -2, 3]], np.int64))["y"].tolist() == [[1, 0, 3]]


def test_nan_and_inf_are_computed(tmp_path):
    m = irrun.load(write(tmp_path, relu_model()))
    out = m.infer(np.array([[np.nan, np.inf, -np.inf]], np.float32))["y"]
    # Relu(NaN) is NaN in OpenVINO's reference (its CPU plugin gives 0; see specs/errata/arithmetic.md).
    assert np.isnan(out[0, 0]) and out[0, 1] == np.inf and out[0, 2] == 0


def test_dynamic_input_shapes(tmp_path):
    m = irrun.load(write(tmp_path, relu_model(shape="?,1..4", dims=(-1, -1))))
    assert m.inputs[0].shape == (irrun.shapes.ANY, irrun.shapes.Dim(1, 4))
    assert m.infer(np.ones((5, 2), np.float32))["y"].shape == (5, 2)
    with pytest.raises(irrun.InputError, match="dim 1: 5 is not 1..4"):
        m.infer(np.ones((5, 5), np.float32))


def test_dead_layers_are_kept_in_the_graph_but_not_run(tmp_path):
    xml = net([
        layer(0, "x", "Parameter", data={"shape": "2", "element_type": "f32"}, outputs=[port(0, (2,), names="x")]),
        layer(1, "relu", "ReLU", inputs=[port(0, (2,))], outputs=[port(1, (2,))]),
        layer(2, "dead", "Sigmoid", inputs=[port(0, (2,))], outputs=[port(1, (2,))]),
        layer(3, "out", "Result", inputs=[port(0, (2,))]),
    ], [edge(0, 0, 1, 0), edge(0, 0, 2, 0), edge(1, 1, 3, 0)])
    path = write(tmp_path, xml)
    report = irrun.validate(path)
    assert report.ok and report.codes() == ["W-DEAD-LAYER"] and report.warnings[0].layer.name == "dead"
    m = irrun.load(path)
    assert "2" in m.graph and all(step.node.id != "2" for step in m._plan.steps)


def test_memory_limit_refuses_big_tensors(tmp_path):
    m = irrun.load(write(tmp_path, relu_model(shape="?,?", dims=(-1, -1))), max_memory=1000)
    with pytest.raises(irrun.ResourceLimitError, match="memory limit"):
        m.infer(np.ones((100, 100), np.float32))


def test_validate_never_raises(tmp_path):
    for content in ["", "garbage", "<net/>", "<net version='11'></net>", "\x00\x01\x02"]:
        path = tmp_path / "bad.xml"
        path.write_text(content)
        report = irrun.validate(path)
        assert not report.ok
    assert not irrun.validate(tmp_path / "missing.xml").ok


def test_bin_that_shrinks_after_load_is_refused(tmp_path):
    import shutil
    for name in ("model.xml", "model.bin"):
        shutil.copy(DIGITS / name, tmp_path / name)
    m = irrun.load(tmp_path / "model.xml")
    x = np.load(DIGITS / "digit0.npy")
    m.infer(x)
    with open(tmp_path / "model.bin", "r+b") as f:
        f.truncate(100)
    with pytest.raises(irrun.ModelError, match="shrank"):
        m.infer(x)


def test_outputs_never_alias_inputs_or_weights(tmp_path):
    """Parameter -> Result and Const -> Result: the caller owns what infer returns."""
    xml = net([
        layer(0, "x", "Parameter", data={"shape": "2", "element_type": "f32"}, outputs=[port(0, (2,), names="x")]),
        layer(1, "w", "Const", data={"element_type": "f32", "shape": "2", "offset": 0, "size": 8},
              outputs=[port(0, (2,), names="w")]),
        layer(2, "out_x", "Result", inputs=[port(0, (2,))]),
        layer(3, "out_w", "Result", inputs=[port(0, (2,))]),
    ], [edge(0, 0, 2, 0), edge(1, 0, 3, 0)])
    path = write(tmp_path, xml, np.array([5, 6], np.float32).tobytes())
    m = irrun.load(path)
    x = np.array([1, 2], np.float32)
    out = m.infer(x)
    out["x"][0] = 99
    out["w"][0] = 99
    assert x[0] == 1 and m.infer(x)["w"][0] == 5


def test_outputs_alias_neither_one_another_nor_what_the_model_keeps(tmp_path):
    """A convolution and a Reshape of it (views of the convolution's own array: the first handed
    on without a copy, the second then copied), a Reshape of a constant and a stateful cache's
    contents: every array returned is the caller's, and none shares memory with another."""
    import openvino as ov
    import openvino.opset6 as ops6
    import openvino.opset13 as ops
    from openvino.op.util import Variable, VariableInfo
    rng = np.random.default_rng(4)
    x = ops.parameter([1, 8, 6, 6], np.float32, name="x")
    conv = ops.convolution(x, ops.constant(rng.standard_normal((4, 8, 3, 3)).astype(np.float32)), [1, 1],
                           [1, 1], [1, 1], [1, 1])
    flat = ops.reshape(conv, ops.constant(np.array([1, -1], np.int64)), False)
    table = ops.reshape(ops.constant(np.arange(6, dtype=np.float32)), ops.constant(np.array([2, 3], np.int64)),
                        False)
    info = VariableInfo()
    info.data_shape, info.data_type, info.variable_id = ov.PartialShape([1, -1]), ov.Type.f32, "cache"
    variable = Variable(info)
    past = ops6.read_value(ops.constant(np.zeros((1, 0), np.float32)), variable)
    grown = ops.concat([past, ops.reshape(ops.reduce_sum(x, ops.constant(np.array([1, 2, 3], np.int64))),
                                          ops.constant(np.array([1, 1], np.int64)), False)], 1)
    assign = ops6.assign(grown, variable)
    model = ov.Model([ops.result(n) for n in (conv, flat, table, grown)], [assign], [x])
    xml = tmp_path / "m.xml"
    ov.save_model(model, str(xml))
    m = irrun.load(xml)
    data = rng.standard_normal((1, 8, 6, 6)).astype(np.float32)
    first = m.infer(data)
    arrays = [first[i] for i in range(4)]
    for got, want in zip(arrays, run_openvino(xml, [data])):
        assert_close(got, want)
    for i, a in enumerate(arrays):
        assert not np.shares_memory(a, data)
        for b in arrays[i + 1:]:
            assert not np.shares_memory(a, b)
    assert arrays[0].base is not None           # the convolution's output, not copied
    expected = [a.copy() for a in arrays]
    for a in arrays:
        a[...] = 7
    second = m.infer(data)
    for i in range(3):
        np.testing.assert_array_equal(second[i], expected[i])
    np.testing.assert_array_equal(second[3][:, :1], expected[3])     # the cache kept its first value
    np.testing.assert_array_equal(arrays[0], 7)                     # and the call did not reuse the caller's


# ---------------------------------------------------------------- results by position

def two_output_model(tmp_path):
    import openvino as ov
    import openvino.opset1 as ops1
    x = ops1.parameter([2, 3], np.float32, name="x")
    relu, neg = ops1.relu(x), ops1.negative(x)
    relu.output(0).get_tensor().set_names({"scores/relu"})
    neg.output(0).get_tensor().set_names({"scores:neg"})
    xml = tmp_path / "two.xml"
    ov.save_model(ov.Model([relu, neg], [x]), str(xml))
    return xml


def test_results_by_position_like_openvino(tmp_path):
    xml = two_output_model(tmp_path)
    x = np.array([[1, -2, 3], [-4, 5, -6]], np.float32)
    got = irrun.load(xml).infer([x])
    expected = run_openvino(xml, [x])                  # OpenVINO: result[0], result[1] are the outputs in order
    assert isinstance(got, dict) and isinstance(got, irrun.Results)
    assert list(got) == list(got.keys()) == ["scores/relu", "scores:neg"]
    for i, name in enumerate(got):
        assert got[i] is got[name] and got[i - 2] is got[name] and got[np.int64(i)] is got[name]
        assert_close(got[i], expected[i])
    assert got.get(5) is None and got.get(1) is got["scores:neg"] and got.get("nope", 0) == 0
    with pytest.raises(IndexError, match=r"output index 2 is out of range: the model has 2 outputs"):
        got[2]
    with pytest.raises(KeyError):
        got["nope"]
    with pytest.raises(KeyError):
        got[True]                                       # a bool is not a position
    assert len(got) == 2 and [v.shape for v in got.values()] == [(2, 3), (2, 3)]


def test_two_results_of_one_tensor_are_two_outputs_by_position(tmp_path):
    """Two Results read one tensor: OpenVINO names both outputs alike and returns two tensors;
    irrun's result has one entry by that name (the first) and two arrays by position, apart
    (irrun.openvino: tests/test_openvino_api.py)."""
    import openvino as ov
    import openvino.opset13 as ops
    x = ops.parameter([2, 3], np.float32, name="x")
    relu = ops.relu(x)
    xml = tmp_path / "twice.xml"
    ov.save_model(ov.Model([ops.result(relu), ops.result(relu), ops.result(ops.negative(x))], [x]), str(xml))
    data = np.array([[1, -2, 3], [-4, 5, -6]], np.float32)
    expected = run_openvino(xml, [data])
    got = irrun.load(xml).infer([data])
    assert len(expected) == 3 and len(got) == 2
    for i in range(3):
        assert_close(got[i], expected[i])
    assert got[0] is got[next(iter(got))] and not np.shares_memory(got[0], got[1])
    with pytest.raises(IndexError, match=r"the model has 3 outputs"):
        got[3]


# ---------------------------------------------------------------- integer inputs out of their type's range

def sub_byte_model(tmp_path, etype: str):
    import openvino as ov
    import openvino.opset1 as ops1
    p = ov.op.Parameter(getattr(ov.Type, etype), ov.PartialShape([4]))
    xml = tmp_path / f"{etype}.xml"
    ov.save_model(ov.Model([ops1.convert(p, np.int32)], [p]), str(xml))
    return xml


@pytest.mark.parametrize("etype, good", [("u4", [1, 15, 3, 9]), ("i4", [-8, 7, -1, 2])])
def test_sub_byte_inputs_in_range_match_openvino(etype, good, tmp_path):
    """OpenVINO takes u4/i4 inputs as packed tensors (two values a byte, low nibble first)."""
    import openvino as ov
    xml = sub_byte_model(tmp_path, etype)
    tensor = ov.Tensor(getattr(ov.Type, etype), ov.Shape([4]))
    nibbles = np.array(good) & 0xF
    tensor.data[:] = (nibbles[0::2] | (nibbles[1::2] << 4)).astype(tensor.data.dtype)
    (expected,) = run_openvino(xml, [tensor])
    for given in (np.array(good, np.int64), np.array(good, np.int8)):
        assert irrun.load(xml).infer([given])[0].tolist() == expected.tolist() == good


@pytest.mark.parametrize("etype, bad, message", [
    ("u4", [1, 16, 3, 9], r"is u4, which holds 0\.\.15; got 16 at index \[1\]"),
    ("u4", [1, -1, 3, 9], r"holds 0\.\.15; got -1"),
    ("i4", [-9, 0, 8, 1], r"is i4, which holds -8\.\.7; got -9 at index \[0\] \(2 values out of range\)"),
    ("u2", [0, 1, 2, 4], r"is u2, which holds 0\.\.3; got 4"),
    ("u1", [0, 1, 2, 1], r"is u1, which holds 0\.\.1; got 2"),
    ("u8", [0, 256, 1, 1], r"is u8, which holds 0\.\.255; got 256"),
    ("i32", [0, 2**31, 1, 1], r"is i32, which holds -2147483648\.\.2147483647"),
])
def test_integer_inputs_outside_their_type_are_refused(etype, bad, message, tmp_path):
    """Converting would wrap them silently (16 as u4 is 0, 256 as u8 is 0)."""
    m = irrun.load(sub_byte_model(tmp_path, etype))
    with pytest.raises(irrun.InputError, match=message):
        m.infer([np.array(bad, np.int64)])
    if etype in ("u4", "u2", "u1"):   # also when the array already has the carrier's dtype
        with pytest.raises(irrun.InputError, match=message.split(";")[0]):
            m.infer([np.array(bad, np.int64).astype(np.uint8)]) if min(bad) >= 0 else m.infer([np.array(bad)])


# ---------------------------------------------------------------- not an IR

def test_load_and_validate_of_the_bin_say_it_is_not_an_ir():
    report = irrun.validate(DIGITS / "model.bin")
    assert report.unreadable and report.codes() == ["E-NOT-XML"]
    assert "pass model.xml" in report.errors[0].message
    with pytest.raises(irrun.UnreadableFileError, match="not an OpenVINO IR .xml file") as info:
        irrun.load(DIGITS / "model.bin")
    assert info.value.exit_code == 2


@pytest.mark.parametrize("prefix", [b"", b"\xef\xbb\xbf"], ids=["plain", "bom"])
def test_xml_with_a_byte_order_mark_is_still_xml(prefix, tmp_path):
    path = tmp_path / "model.xml"
    path.write_bytes(prefix + relu_model().encode())
    assert irrun.validate(path).ok
    path.write_bytes(prefix + b"  \n" + relu_model().encode())   # XML, but the declaration must come first
    assert irrun.validate(path).codes() == ["E-XML-SYNTAX"]


def test_a_dropped_model_closes_its_weights_file():
    """The mapped .bin's file is closed with the model, not left to the garbage collector (which
    warns: ResourceWarning, an error under `-W error`)."""
    import gc
    import warnings
    xml = Path(irrun.__file__).resolve().parent.parent / "models" / "digits" / "model.xml"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = irrun.load(xml)
        m.infer(np.load(xml.parent / "digit7.npy"))
        del m
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]
