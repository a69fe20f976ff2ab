"""The IR reader: versions, ports, names, aliases, shapes, rt_info, snippets, safety."""
import numpy as np
import pytest

import irrun
from irrun.ir import RtElement, join_names, parse_document, split_names
from irrun.shapes import ANY, Dim, parse_partial_shape
from irrun.spec import VersionLookupError, resolve_version
from irrun import etypes
from irxml import edge, f32_bytes, layer, net, port, relu_model, write


@pytest.mark.parametrize("text, expected", [
    ("1,3,224,224", (1, 3, 224, 224)),
    ("1, 3, 4", (1, 3, 4)),
    ("?,3,-1", (ANY, 3, ANY)),
    ("1..10,..5,3..", (Dim(1, 10), Dim(0, 5), Dim(3, None))),
    ("[2,?]", (2, ANY)),
    ("", ()),
    ("...", None),
    ("4..4", (4,)),
])
def test_partial_shape_strings(text, expected):
    assert parse_partial_shape(text) == expected


@pytest.mark.parametrize("bad", ["1,,3", "a,b", "5..2", "-2", "1.5"])
def test_bad_shape_strings(bad):
    with pytest.raises(irrun.ModelError):
        parse_partial_shape(bad)


def test_names_with_escaped_commas():
    assert split_names(r"a\,b,c") == ("a,b", "c")
    assert split_names("x, y") == ("x", "y")


@pytest.mark.parametrize("type_, version, expected", [
    ("ReLU", "opset1", ("Relu", 1)), ("relu", "opset8", ("Relu", 1)), ("Const", "opset1", ("Constant", 1)),
    ("SoftMax", "opset1", ("Softmax", 1)), ("Softmax", "opset8", ("Softmax", 8)), ("PReLU", "opset1", ("PRelu", 1)),
    ("AvgPool", "opset13", ("AvgPool", 1)), ("AvgPool", "opset14", ("AvgPool", 14)),
    ("MaxPool", "opset8", ("MaxPool", 8)), ("MaxPool", "opset16", ("MaxPool", 14)),
    ("MVN", "opset1", ("MVN", 2)), ("ShapeOf", "opset3", ("ShapeOf", 3)), ("LogicalXor", "opset2", ("LogicalXor", 1)),
    ("GRUCell", "experimental", ("GRUCell", 3)),
])
def test_version_resolution(type_, version, expected):
    assert resolve_version(type_, version) == expected


@pytest.mark.parametrize("type_, version, code", [
    ("Foo", "opset1", "E-OP-UNKNOWN"), ("AvgPool", "opset99", "E-OP-VERSION"),
    ("Xor", "opset2", "E-OP-VERSION"), ("Relu", "extension", "E-OP-VERSION"),
])
def test_version_errors(type_, version, code):
    with pytest.raises(VersionLookupError) as info:
        resolve_version(type_, version)
    assert info.value.code == code


@pytest.mark.parametrize("version", [9, 12, "x"])
def test_other_ir_versions_are_refused(tmp_path, version):
    xml = write(tmp_path, relu_model().replace('version="11"', f'version="{version}"', 1))
    with pytest.raises(irrun.UnreadableFileError, match="IR version"):
        irrun.load(xml)
    report = irrun.validate(xml)
    assert report.unreadable and report.codes() == ["E-IR-VERSION"]


def test_input_index_is_position_not_id(tmp_path):
    """Port ids 9 and 3: the first <port> is input 0 whatever its id."""
    xml = net([
        layer(0, "a", "Parameter", data={"shape": "2", "element_type": "f32"}, outputs=[port(0, (2,), names="a")]),
        layer(1, "b", "Parameter", data={"shape": "2", "element_type": "f32"}, outputs=[port(0, (2,), names="b")]),
        layer(2, "sub", "Subtract", inputs=[port(9, (2,)), port(3, (2,))], outputs=[port(7, (2,), names="d")]),
        layer(3, "out", "Result", inputs=[port(0, (2,))]),
    ], [edge(0, 0, 2, 9), edge(1, 0, 2, 3), edge(2, 7, 3, 0)])
    m = irrun.load(write(tmp_path, xml))
    out = m.infer({"a": np.array([5, 5], np.float32), "b": np.array([1, 2], np.float32)})
    np.testing.assert_array_equal(out["d"], [4, 3])


def test_line_numbers_and_metadata(tmp_path):
    xml = relu_model().replace("</edges>", "</edges>\n<rt_info><info name=\"framework\" value=\"torch\"/>"
                                            "<nested><deep value=\"1\"/></nested></rt_info>")
    doc = parse_document(write(tmp_path, xml))
    relu = doc.graph.layers["1"]
    assert relu.line == xml.splitlines().index(next(l for l in xml.splitlines() if 'name="relu"' in l)) + 1
    assert (relu.op_type, relu.op_version) == ("Relu", 1)
    assert doc.rt_info["framework"] == "torch" and doc.rt_info["nested"] == {"deep": "1"}


def test_rt_info_is_kept_as_written(tmp_path):
    """Layer, port and body rt_info keep every element and attribute (the writer gives them back);
    the model's also reads as OpenVINO reads it, as nested dicts."""
    rt = ('<rt_info><attribute name="fused_names" version="0" value="a,b"/>'
          '<attribute name="layout" version="0" layout="[N,C]"/></rt_info>')
    xml = relu_model().replace('<data shape="1,3" element_type="f32"/>', '<data shape="1,3" element_type="f32"/>' + rt)
    xml = xml.replace('<dim>3</dim></port></output>', '<dim>3</dim>' + rt + '</port></output>', 1)
    xml = xml.replace("</edges>", '</edges><rt_info><info name="a b" value="1"/><n><m value="2"/></n></rt_info>')
    for text in (xml, xml.replace("<layers>", "<layers><!-- the general path, not the fast one -->")):
        doc = parse_document(write(tmp_path, text))
        param = doc.graph.layers["0"]
        expected = (RtElement("attribute", (("name", "fused_names"), ("version", "0"), ("value", "a,b"))),
                    RtElement("attribute", (("name", "layout"), ("version", "0"), ("layout", "[N,C]"))))
        assert param.rt_info == expected and param.outputs[0].rt_info == expected
        assert doc.graph.rt_info == (RtElement("info", (("name", "a b"), ("value", "1"))),
                                     RtElement("n", (), (RtElement("m", (("value", "2"),)),)))
        assert doc.rt_info == {"a b": "1", "n": {"m": "2"}}


def test_names_with_commas_split_and_join():
    assert split_names(join_names(["a,b", "c", "d\\e"])) == ("a,b", "c", "d\\e")
    assert join_names(["a,b", "c"]) == "a\\,b,c"


def test_result_output_names_win(tmp_path):
    xml = relu_model().replace('name="out" type="Result" version="opset1"',
                               'name="out" type="Result" version="opset1" output_names="foo,bar"')
    m = irrun.load(write(tmp_path, xml))
    assert m.outputs[0].name == "foo" and m.outputs[0].names == ("foo", "bar")


def test_output_falls_back_to_result_layer_name(tmp_path):
    xml = relu_model().replace(' names="y"', "")
    m = irrun.load(write(tmp_path, xml))
    assert m.outputs[0].name == "out"


def test_ir_v10_adds_friendly_names(tmp_path):
    m = irrun.load(write(tmp_path, relu_model(version=10)))
    assert "relu" in m.outputs[0].names and m.outputs[0].name == "y"
    assert m.inputs[0].names == ("x",)


def test_snippet_root_layer_is_validated(tmp_path):
    snippet = layer(0, "pool", "ReLU", inputs=[port(0, (1, 3), precision=None)], outputs=[port(1, (1, 4))])
    report = irrun.validate(write(tmp_path, snippet))
    assert report.codes() == ["E-DECLARED-SHAPE"]
    assert "declared [1,4], inferred [1,3]" in report.errors[0].message
    with pytest.raises(irrun.UsageError):
        irrun.load(write(tmp_path, snippet))


def test_unknown_rt_info_and_legacy_sections_are_ignored(tmp_path):
    xml = relu_model().replace('<data shape="1,3" element_type="f32"/>',
                               '<data shape="1,3" element_type="f32"/><rt_info><attribute name="whatever" '
                               'version="7" value="x"/></rt_info>')
    xml = xml.replace("<edges>", "<meta_data><x value='1'/></meta_data><edges>")
    assert irrun.validate(write(tmp_path, xml)).ok


def test_const_reads_bounds_checked_view(tmp_path):
    xml = net([
        layer(0, "w", "Const", data={"element_type": "f32", "shape": "2,2", "offset": 4, "size": 16},
              outputs=[port(0, (2, 2), names="w")]),
        layer(1, "out", "Result", inputs=[port(0, (2, 2))]),
    ], [edge(0, 0, 1, 0)])
    path = write(tmp_path, xml, b"\0\0\0\0" + f32_bytes([[1, 2], [3, 4]]))
    (w,) = irrun.load(path).infer([]).values()
    np.testing.assert_array_equal(w, [[1, 2], [3, 4]])
    path.with_suffix(".bin").write_bytes(b"\0" * 12)
    report = irrun.validate(path)
    assert "E-BIN-RANGE" in report.codes()
    assert "past the end" in report.errors[0].message


def test_entities_are_not_resolved(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    xml = f'<?xml version="1.0"?>\n<!DOCTYPE net [<!ENTITY x SYSTEM "file://{secret}">]>\n' + \
        relu_model().split("\n", 1)[1].replace('name="m"', 'name="&x;"')
    report = irrun.validate(write(tmp_path, xml))
    assert not report.ok and report.unreadable
    assert "TOPSECRET" not in " ".join(d.format() for d in report)


def test_malformed_xml_gives_line_and_column(tmp_path):
    report = irrun.validate(write(tmp_path, relu_model().replace("</layers>", "</layerz>")))
    assert report.unreadable and report.codes() == ["E-XML-SYNTAX"]
    assert report.errors[0].line and "column" in report.errors[0].message


def test_missing_precision_and_version(tmp_path):
    xml = relu_model().replace('<port id="1" precision="FP32" names="y">', '<port id="1" names="y">')
    xml = xml.replace('name="relu" type="ReLU" version="opset1"', 'name="relu" type="ReLU"')
    codes = irrun.validate(write(tmp_path, xml)).codes()
    assert codes.count("E-XML-ATTR") == 2


def test_element_types_are_known():
    for name in ("f64", "f32", "f16", "bf16", "i64", "i32", "i16", "i8", "u64", "u32", "u16", "u8", "boolean",
                 "u1", "u2", "u3", "u4", "u6", "i4", "nf4", "f8e4m3", "f8e5m2", "f8e8m0", "f4e2m1", "string"):
        assert etypes.element_type(name).name == name
    with pytest.raises(irrun.ModelError):
        etypes.element_type("FP32")
