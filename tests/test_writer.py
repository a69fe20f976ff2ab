"""`Model.save`: IR v11 as `openvino.save_model` writes it.

Every model `compare` runs is also saved by irrun (ovutil.check_round_trip): the files must
be OpenVINO's own, byte for byte, or else give OpenVINO's outputs bit for bit.  Here: the
whole-model fixtures, every element type, names that need escaping, sub-graphs, state,
dynamic shapes, IRs OpenVINO did not write (hand-written, IR v10), and the refusals.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset8 as ops8
import openvino.opset15 as ops
import pytest
from irxml import edge, f32_bytes, layer, net, port, relu_model, write
from ovutil import assert_close, check_round_trip, run_openvino, save

import irrun
from irrun import etypes, writer
from irrun.ir import parse_document
from irrun.spec import AttrSpec, convert_value, format_value

MODELS = Path(__file__).resolve().parent / "models"
CORE = ov.Core()


def same_files(a: Path, b: Path) -> bool:
    return a.read_bytes() == b.read_bytes() and a.with_suffix(".bin").read_bytes() == b.with_suffix(".bin").read_bytes()


def saved_by_irrun(xml: Path, tmp_path: Path, name: str = "saved.xml") -> Path:
    return irrun.load(xml).save(tmp_path / name)


@pytest.mark.parametrize("xml", sorted(MODELS.glob("*.xml")), ids=lambda p: p.name.removesuffix(".xml"))
def test_whole_models_come_back_byte_for_byte(xml, tmp_path):
    """Every fixture (f32 and f16-compressed weights, static and dynamic, PyTorch and ONNX front ends):
    the XML and the .bin irrun writes are OpenVINO's, byte for byte."""
    assert same_files(saved_by_irrun(xml, tmp_path), xml)


def test_every_element_type_shared_constants_and_escaped_names(tmp_path):
    """Consts of every element type (packed sub-byte, f8, bf16, strings), identical data stored once even
    across types, names with characters XML escapes, tensor names with commas, model rt_info."""
    x = ops.parameter([2, 3], np.float32, name='a<b>&"c\',d\te')
    x.output(0).get_tensor().set_names({"in,1", 'in<&>"', "alpha"})
    twice = [ops.constant(np.array([1, 2, 3], np.float32)) for _ in range(2)]
    y = ops.add(ops.add(x, twice[0]), twice[1])
    strings = ops.string_tensor_unpack(ov.op.Constant(ov.Tensor(np.array(["ab", "", "héllo"]))))
    consts = [ov.op.Constant(getattr(ov.Type, name), ov.Shape([5]), [1, 0, 1, 1, 0])
              for name in ("u1", "u2", "u3", "u4", "u6", "i4", "nf4", "f4e2m1", "f8e4m3", "f8e5m2", "f8e8m0",
                           "bf16", "f16", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "boolean")]
    outputs = [y.output(0), *strings.outputs()] + [ops.convert(c, np.float32).output(0) for c in consts]
    model = ov.Model(outputs, [x], "everything")
    model.outputs[0].get_tensor().set_names({"out,z"})
    model.set_rt_info({"a": "1", "b": {"c": "2"}}, "nested")
    xml = save(model, tmp_path)
    consts = [l.data for l in parse_document(xml).graph.layers.values() if l.op_type == "Constant"]
    assert len({(c["offset"], c["size"]) for c in consts}) < len(consts) - 5   # (stored once: u4, i4 and nf4 ...)
    saved = saved_by_irrun(xml, tmp_path)
    assert same_files(saved, xml)
    feed = np.arange(6, dtype=np.float32).reshape(2, 3)
    for got, want in zip(irrun.load(saved).infer([feed]).values(), run_openvino(xml, [feed])):
        assert_close(got, want, rtol=0, atol=1e-37)   # (the CPU plugin flushes f8e8m0's 2^-127 to 0)


def test_constants_keep_their_size_as_openvino_does(tmp_path):
    """OpenVINO keeps a Const's `size` bytes as it read them: an empty Const of one byte, bytes past the
    values.  irrun's save gives what OpenVINO's own read_model + save_model gives."""
    from ovutil import const
    x = ops.parameter([2, 3, 4], np.float32, name="x")
    model = ov.Model([ops.add(ops.transpose(x, const([])), ops.constant(np.array([1, 2], np.float32)))], [x])
    xml = save(model, tmp_path / "empty")
    assert 'shape="0" offset="0" size="1"' in xml.read_text()
    text = xml.read_text().replace('shape="2" offset="1" size="8"', 'shape="2" offset="1" size="12"')
    edited = write(tmp_path, text, xml.with_suffix(".bin").read_bytes() + b"\xaa\xbb\xcc\xdd", name="edited")
    by_openvino = tmp_path / "by_openvino.xml"
    ov.save_model(CORE.read_model(str(edited)), str(by_openvino), compress_to_fp16=False)
    assert b"\xaa\xbb\xcc\xdd" in by_openvino.with_suffix(".bin").read_bytes()
    assert same_files(saved_by_irrun(edited, tmp_path), by_openvino)


def sub_graph_models():
    from test_ops_control_flow import accumulate_loop, branchy_if, loop_in_if, rnn_ti
    return {"TensorIterator": rnn_ti(invariant=True), "Loop": accumulate_loop("param", "param", limit=5),
            "If": branchy_if(), "Loop in If": loop_in_if()}


@pytest.mark.parametrize("kind", ["TensorIterator", "Loop", "If", "Loop in If"])
def test_sub_graphs_come_back_byte_for_byte(kind, tmp_path):
    """Bodies, port maps (sliced, merged, invariant, concatenated, purposes), back edges, constants
    inside bodies sharing data with those outside."""
    xml = save(sub_graph_models()[kind], tmp_path)
    assert same_files(saved_by_irrun(xml, tmp_path), xml)


@pytest.mark.parametrize("version", [3, 6])
def test_state_comes_back_and_keeps_accumulating(version, tmp_path):
    from test_ops_state import accumulator
    xml = save(accumulator(version), tmp_path)
    saved = saved_by_irrun(xml, tmp_path)
    assert same_files(saved, xml)
    m = irrun.load(saved)
    x = np.ones((2, 3), np.float32)
    for step in range(1, 4):
        np.testing.assert_array_equal(next(iter(m.infer([x]).values())), (step + 1) * x)


def test_rt_info_of_layers_and_ports_comes_back(tmp_path):
    """layout on a port, decompression and fused_names (written in by hand, as OpenVINO writes it) on layers."""
    x = ops.parameter([1, 3, 4, 4], np.float32, name="x")
    x.set_layout(ov.Layout("NCHW"))
    model = ov.Model([ops.add(ops.relu(x), ops.constant(np.ones((1, 3, 4, 4), np.float32)))], [x])
    xml = save(model, tmp_path, compress=True)
    text = xml.read_text()
    assert 'name="decompression"' in text and 'layout="[N,C,H,W]"' in text
    relu = text.index('type="ReLU" version="opset1">') + len('type="ReLU" version="opset1">')
    xml.write_text(text[:relu] + '\n\t\t\t<rt_info>\n\t\t\t\t<attribute name="fused_names" version="0" value="a,b" />'
                   '\n\t\t\t</rt_info>' + text[relu:])
    assert same_files(saved_by_irrun(xml, tmp_path), xml)


@pytest.mark.parametrize("shape", [[-1, 3, ov.Dimension(2, 9)], None, []], ids=["intervals", "any-rank", "scalar"])
def test_dynamic_shapes_come_back(shape, tmp_path):
    x = ops.parameter(ov.PartialShape.dynamic() if shape is None else ov.PartialShape(shape), np.float32, name="x")
    xml = save(ov.Model([ops.relu(x)], [x]), tmp_path)
    saved = saved_by_irrun(xml, tmp_path)
    assert same_files(saved, xml)


def test_check_round_trip_runs_openvino_on_an_ir_it_did_not_write(tmp_path):
    """A hand-written IR (legacy type names, unsorted port ids, weights at an odd offset, data past what
    the Const's values need): the saved IR differs from the file, OpenVINO reads it to the same outputs bit for
    bit, and irrun saving it again changes nothing (the fixed point)."""
    xml = net([
        layer(0, "x", "Parameter", data={"shape": "2,2", "element_type": "f32"}, outputs=[port(5, (2, 2), names="x")]),
        layer(1, "w", "Const", data={"element_type": "f32", "shape": "2,2", "offset": 4, "size": 20},
              outputs=[port(0, (2, 2))]),
        layer(2, "sum", "Add", data={"auto_broadcast": "numpy"}, inputs=[port(3, (2, 2)), port(1, (2, 2))],
              outputs=[port(7, (2, 2), names="y")]),
        layer(3, "relu", "ReLU", inputs=[port(0, (2, 2))], outputs=[port(1, (2, 2), names="z")]),
        layer(4, "out", "Result", inputs=[port(0, (2, 2))]),
    ], [edge(0, 5, 2, 3), edge(1, 0, 2, 1), edge(2, 7, 3, 0), edge(3, 1, 4, 0)])
    path = write(tmp_path, xml, b"\0" * 4 + f32_bytes([[1, -2], [3, -4]]) + b"\x99" * 8)
    x = np.array([[0.5, 1], [-5, 2]], np.float32)
    m = irrun.load(path)
    saved = check_round_trip(m, path, [x], run_openvino(path, [x]))
    assert not same_files(saved, path)
    # (the bytes past the values stay, as OpenVINO keeps a Const's size; the 4 bytes before them go)
    assert saved.with_suffix(".bin").read_bytes() == f32_bytes([[1, -2], [3, -4]]) + b"\x99" * 4
    assert 'offset="0" size="20"' in saved.read_text()


def test_ir_v10_is_written_as_v11_with_what_reading_it_does(tmp_path):
    """IR v10: f16 inputs are fed as f32, outputs converted to i32 / f32, layer names added as tensor
    names (`update_v10_model`); the v11 IR irrun writes makes that explicit, so OpenVINO reads the same
    inputs and outputs (names, types, values) from it as from the v10 file."""
    dims = (1, 3)
    xml = net([
        layer(0, "x", "Parameter", data={"shape": "1,3", "element_type": "f16"}, outputs=[port(0, dims, "FP16", "x")]),
        layer(1, "relu", "ReLU", inputs=[port(0, dims, "FP16")], outputs=[port(1, dims, "FP16", names="y")]),
        layer(2, "cv", "Convert", data={"destination_type": "i64"}, inputs=[port(0, dims, "FP16")],
              outputs=[port(1, dims, "I64")]),
        layer(3, "floor", "Floor", inputs=[port(0, dims, "FP16")], outputs=[port(1, dims, "FP16")]),
        layer(4, "out", "Result", inputs=[port(0, dims, "FP16")]),
        layer(5, "out2", "Result", inputs=[port(0, dims, "I64")]),
        layer(6, "out3", "Result", inputs=[port(0, dims, "FP16")]),
    ], [edge(0, 0, 1, 0), edge(1, 1, 4, 0), edge(1, 1, 2, 0), edge(2, 1, 5, 0), edge(0, 0, 3, 0), edge(3, 1, 6, 0)],
        version=10)
    path = write(tmp_path, xml)
    saved = irrun.load(path).save(tmp_path / "v11.xml")
    assert 'version="11"' in saved.read_text()
    old, new = CORE.read_model(str(path)), CORE.read_model(str(saved))
    assert [(p.get_names(), p.get_element_type()) for p in old.inputs] == \
        [(p.get_names(), p.get_element_type()) for p in new.inputs]
    assert [(o.get_names(), o.get_element_type()) for o in old.outputs] == \
        [(o.get_names(), o.get_element_type()) for o in new.outputs]
    x = np.array([[1.5, -2.25, 3.75]], np.float32)
    for a, b in zip(run_openvino(path, [x]), run_openvino(saved, [x])):
        assert_close(b, a, rtol=0, atol=0)
    m = irrun.load(saved)
    assert [set(o.names) for o in m.outputs] == [o.get_names() for o in new.outputs]
    assert irrun.validate(saved).ok and not list(irrun.validate(saved))
    for a, b in zip(m.infer([x]).values(), run_openvino(path, [x])):
        assert_close(a, b, rtol=0, atol=0)
    assert m.save(tmp_path / "again.xml").read_bytes() == saved.read_bytes()


def test_layer_and_port_rt_info_of_ir_v10_is_dropped(tmp_path):
    """The v10 reader ignores node and port rt_info; written into v11, OpenVINO would start reading it."""
    rt = '<rt_info><attribute name="old_api_map_order" version="0" value="1,0"/></rt_info>'
    xml = relu_model(version=10).replace('<data shape="1,3" element_type="f32"/>',
                                         '<data shape="1,3" element_type="f32"/>' + rt)
    saved = irrun.load(write(tmp_path, xml)).save(tmp_path / "v11.xml")
    assert "rt_info>" not in saved.read_text() and "old_api_map_order" not in saved.read_text()


# ---------------------------------------------------------------- refusals and atomicity

def test_saving_over_the_models_own_files_is_refused_unless_forced(tmp_path):
    from test_ops_control_flow import ti_feeds
    model = sub_graph_models()["TensorIterator"]
    xml = save(model, tmp_path)
    m = irrun.load(xml)
    feeds = ti_feeds(model)
    before = m.infer(feeds)
    original = xml.read_bytes(), xml.with_suffix(".bin").read_bytes()
    (tmp_path / "link.bin").symlink_to(xml.with_suffix(".bin"))
    for target in (xml, Path(os.path.relpath(xml)), tmp_path / "link.xml"):
        with pytest.raises(irrun.UsageError, match="the model's own input file; refusing to overwrite it"):
            m.save(target)
    assert (xml.read_bytes(), xml.with_suffix(".bin").read_bytes()) == original
    m.save(xml, force=True)
    assert (xml.read_bytes(), xml.with_suffix(".bin").read_bytes()) == original
    for a, b in zip(m.infer(feeds).values(), before.values()):   # (its weights stay mapped: it still runs)
        np.testing.assert_array_equal(a, b)


def test_bad_targets_are_usage_errors(tmp_path):
    m = irrun.load(write(tmp_path, relu_model()))
    with pytest.raises(irrun.UsageError, match="must end in .xml"):
        m.save(tmp_path / "model.txt")
    with pytest.raises(irrun.UsageError, match="no such directory"):
        m.save(tmp_path / "nowhere" / "model.xml")


def test_a_failed_save_leaves_nothing_behind(tmp_path, monkeypatch):
    """Temp files and renames: an error half-way (here a Const that cannot be encoded) leaves neither a
    new file nor a temporary one, and keeps old files as they were."""
    xml = save(sub_graph_models()["TensorIterator"], tmp_path / "src")
    target = tmp_path / "out.xml"
    target.write_text("old")
    calls = []

    def failing(layer):
        calls.append(layer.id)
        raise irrun.ModelError("boom")
    monkeypatch.setattr(writer, "constants_from", lambda weights, file: failing)
    with pytest.raises(irrun.ModelError, match="boom"):
        irrun.load(xml).save(target)
    assert calls and target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.xml", "src"]


# ---------------------------------------------------------------- attribute text forms

@pytest.mark.parametrize("type_, value, text", [
    ("shape", (1, 3, 224, 224), "1,3,224,224"), ("shape", None, "..."), ("shape", (), ""),
    ("ints", (2, 2), "2, 2"), ("bool", True, "true"), ("etype", etypes.BY_NAME["f8e4m3"], "f8e4m3"),
    ("float", 0.5, "0.5"), ("floats", (1.0, 0.25), "1, 0.25"), ("strings", ("a", "b"), "a, b"),
])
def test_attribute_text_forms_read_back(type_, value, text):
    spec = AttrSpec("x", type_)
    assert format_value(spec, value) == text
    assert convert_value(spec, text) == value


def test_parameter_shapes_as_openvino_writes_them(tmp_path):
    """A Parameter's partial shape text (intervals, any rank, scalar) is what OpenVINO writes."""
    from irrun.editing import parameter_layer
    from irrun.registry import TensorType
    from irrun.shapes import parse_partial_shape
    for shape in ("1..10,?,3", "...", "", "?,..5,3.."):
        x = ops.parameter(ov.PartialShape(shape) if shape not in ("", "...") else
                          (ov.PartialShape([]) if shape == "" else ov.PartialShape.dynamic()), np.float32, name="x")
        xml = save(ov.Model([ops.relu(x)], [x]), tmp_path / (shape.replace(".", "d").replace(",", "_") or "scalar"))
        written = parse_document(xml).graph.layers["0"].data["shape"]
        made = parameter_layer("0", "x", TensorType(parse_partial_shape(written), etypes.f32), ("x",))
        assert made.data["shape"] == written
