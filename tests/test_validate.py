"""Mutation tests for `irrun validate`: one defect at a time in valid IRs.

Each mutation must be reported with its code at the right layer.  Each case
also records whether OpenVINO's own `read_model` notices it; the cases it
misses are what README's "What validate checks" section promises.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset1 as ops1
import openvino.opset8 as ops
import pytest
from lxml import etree
from ovutil import mutated_copy

import irrun
from ovutil import compile_cpu


def _conv_net() -> ov.Model:
    rng = np.random.default_rng(0)
    x = ops.parameter([1, 3, 16, 16], ov.Type.f32, name="image")
    conv = ops.convolution(x, ops.constant(rng.standard_normal((8, 3, 3, 3)).astype(np.float32)),
                           [1, 1], [1, 1], [1, 1], [1, 1])
    conv.set_friendly_name("conv")
    bias = ops.add(conv, ops.constant(rng.standard_normal((1, 8, 1, 1)).astype(np.float32)))
    bias.set_friendly_name("bias")
    relu = ops.relu(bias)
    relu.set_friendly_name("relu")
    pool = ops1.max_pool(relu, [2, 2], [0, 0], [0, 0], [2, 2])
    pool.set_friendly_name("pool")
    flat = ops.reshape(pool.output(0), ops.constant(np.array([1, -1], np.int64)), False)
    flat.set_friendly_name("flat")
    fc = ops.matmul(flat, ops.constant(rng.standard_normal((512, 10)).astype(np.float32)), False, False)
    fc.set_friendly_name("fc")
    probs = ops.softmax(fc, 1)
    probs.set_friendly_name("probs")
    return ov.Model([ops.result(probs)], [x], "convnet")


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("base")
    ov.save_model(_conv_net(), str(d / "model.xml"))
    return d / "model.xml"


def _layer(root, name):
    return root.find(f".//layer[@name='{name}']")


def _layer_of_type(root, type_):
    return root.find(f".//layer[@type='{type_}']")


def _edge_into(root, layer_id, port=None):
    for e in root.iter("edge"):
        if e.get("to-layer") == layer_id and (port is None or e.get("to-port") == port):
            return e
    raise AssertionError


# Each mutation: (edit the tree in place, expected code, name of the layer it must name or None,
# whether OpenVINO's read_model + compile_model rejects the result).
def dup_layer_id(root):
    _layer(root, "relu").set("id", _layer(root, "conv").get("id"))


def dup_port_id(root):
    ports = _layer(root, "bias").find("input").findall("port")
    ports[1].set("id", ports[0].get("id"))


def edge_from_missing_layer(root):
    _edge_into(root, _layer(root, "relu").get("id")).set("from-layer", "999")


def edge_to_missing_port(root):
    _edge_into(root, _layer(root, "relu").get("id")).set("to-port", "77")


def two_edges_into_one_port(root):
    relu_id = _layer(root, "relu").get("id")
    e = _edge_into(root, relu_id)
    dup = etree.SubElement(root.find("edges"), "edge", dict(e.attrib))
    dup.set("from-layer", _layer(root, "conv").get("id"))
    dup.set("from-port", _layer(root, "conv").find("output/port").get("id"))


def unconnected_input(root):
    e = _edge_into(root, _layer(root, "relu").get("id"))
    e.getparent().remove(e)


def cycle(root):
    relu, conv = _layer(root, "relu"), _layer(root, "conv")
    e = _edge_into(root, conv.get("id"), conv.find("input").findall("port")[0].get("id"))
    e.set("from-layer", relu.get("id"))
    e.set("from-port", relu.find("output/port").get("id"))


def dead_layer(root):
    relu = _layer(root, "relu")
    dead = etree.fromstring(etree.tostring(relu))
    dead.set("id", "500")
    dead.set("name", "orphan")
    root.find("layers").append(dead)
    e = _edge_into(root, relu.get("id"))
    etree.SubElement(root.find("edges"), "edge", {"from-layer": e.get("from-layer"), "from-port": e.get("from-port"),
                                                  "to-layer": "500", "to-port": dead.find("input/port").get("id")})


def no_result(root):
    result = _layer_of_type(root, "Result")
    for e in list(root.iter("edge")):
        if e.get("to-layer") == result.get("id"):
            e.getparent().remove(e)
    result.getparent().remove(result)


def unknown_type(root):
    _layer(root, "relu").set("type", "Rectify")


def bad_version(root):
    _layer(root, "pool").set("version", "opset99")


def extra_input(root):
    _layer(root, "relu").find("input").append(etree.fromstring('<port id="9" precision="FP32"><dim>1</dim></port>'))
    etree.SubElement(root.find("edges"), "edge", {"from-layer": "0", "from-port": "0",
                                                  "to-layer": _layer(root, "relu").get("id"), "to-port": "9"})


def unknown_attribute(root):
    _layer(root, "pool").find("data").set("colour", "red")


def missing_attribute(root):
    del _layer(root, "pool").find("data").attrib["kernel"]


def conv_without_strides(root):
    del _layer(root, "conv").find("data").attrib["strides"]


def pool_without_pads_begin(root):
    del _layer(root, "pool").find("data").attrib["pads_begin"]


def reshape_without_special_zero(root):
    del _layer(root, "flat").find("data").attrib["special_zero"]


def malformed_attribute(root):
    _layer(root, "pool").find("data").set("kernel", "a,b")


def zero_stride(root):
    _layer(root, "pool").find("data").set("strides", "0,2")


def wrong_length(root):
    _layer(root, "pool").find("data").set("pads_begin", "0,0,0")


def bad_enum(root):
    _layer(root, "pool").find("data").set("auto_pad", "middle")


def const_past_end(root):
    _layer_of_type(root, "Const").find("data").set("offset", "100000000")


def const_too_small(root):
    data = next(l for l in root.iter("layer") if l.get("type") == "Const" and
                l.find("data").get("shape").replace(" ", "") == "8,3,3,3").find("data")
    data.set("size", "100")


def const_bad_etype(root):
    _layer_of_type(root, "Const").find("data").set("element_type", "f31")


def declared_dims(root):
    _layer(root, "pool").find("output/port").findall("dim")[2].text = "9"


def declared_precision(root):
    _layer(root, "relu").find("output/port").set("precision", "I64")


def _const_behind(root, layer_name, port_index):
    """The Const feeding an input, through the f16 decompression Convert if there is one."""
    target = _layer(root, layer_name)
    e = _edge_into(root, target.get("id"), target.find("input").findall("port")[port_index].get("id"))
    layer = next(l for l in root.iter("layer") if l.get("id") == e.get("from-layer"))
    if layer.get("type") == "Convert":
        e = _edge_into(root, layer.get("id"))
        layer = next(l for l in root.iter("layer") if l.get("id") == e.get("from-layer"))
    return layer


def broadcast_failure(root):
    data = _const_behind(root, "bias", 1).find("data")
    data.set("shape", "1,7,1,1")
    data.set("size", str(7 * 2))


def reshape_count(root):
    flat_id = _layer(root, "flat").get("id")
    e = _edge_into(root, flat_id, _layer(root, "flat").find("input").findall("port")[1].get("id"))
    target = next(l for l in root.iter("layer") if l.get("id") == e.get("from-layer"))
    target.find("data").set("offset", _layer_of_type(root, "Const").find("data").get("offset"))


def missing_version(root):
    del _layer(root, "relu").attrib["version"]


def missing_precision(root):
    del _layer(root, "relu").find("output/port").attrib["precision"]


def non_integer_id(root):
    relu = _layer(root, "relu")
    old = relu.get("id")
    relu.set("id", "r1")
    for e in root.iter("edge"):
        for end in ("from-layer", "to-layer"):
            if e.get(end) == old:
                e.set(end, "r1")


def edge_into_parameter(root):
    param = _layer_of_type(root, "Parameter")
    etree.SubElement(param, "input").append(etree.fromstring('<port id="5" precision="FP32"/>'))
    etree.SubElement(root.find("edges"), "edge", {"from-layer": _layer(root, "relu").get("id"),
                                                  "from-port": _layer(root, "relu").find("output/port").get("id"),
                                                  "to-layer": param.get("id"), "to-port": "5"})


MUTATIONS = [
    (dup_layer_id, "E-LAYER-DUP", "relu", True),
    (dup_port_id, "E-PORT-DUP", "bias", True),
    (edge_from_missing_layer, "E-EDGE-LAYER", None, True),
    (edge_to_missing_port, "E-EDGE-PORT", "relu", True),
    (two_edges_into_one_port, "E-EDGE-DUP", "relu", True),
    (unconnected_input, "E-INPUT-UNCONNECTED", "relu", True),
    (cycle, "E-CYCLE", None, True),
    (dead_layer, "W-DEAD-LAYER", "orphan", False),
    (no_result, "E-NO-RESULT", None, False),
    (unknown_type, "E-OP-UNKNOWN", "relu", True),
    (bad_version, "E-OP-VERSION", "pool", True),
    (extra_input, "E-OP-INPUTS", "relu", True),
    (unknown_attribute, "W-ATTR-UNKNOWN", "pool", False),
    (missing_attribute, "E-ATTR-MISSING", "pool", True),
    (conv_without_strides, "W-ATTR-DEFAULTED", "conv", False),
    (pool_without_pads_begin, "W-ATTR-DEFAULTED", "pool", False),
    (reshape_without_special_zero, "W-ATTR-DEFAULTED", "flat", False),
    (malformed_attribute, "E-ATTR-VALUE", "pool", True),
    (zero_stride, "E-ATTR-RANGE", "pool", True),
    (wrong_length, "E-ATTR-LENGTH", "pool", True),
    (bad_enum, "E-ATTR-ENUM", "pool", True),
    (const_past_end, "E-BIN-RANGE", None, True),
    (const_too_small, "E-BIN-SIZE", None, True),
    (const_bad_etype, "E-ATTR-VALUE", None, True),
    (declared_dims, "E-DECLARED-SHAPE", "pool", False),
    (declared_precision, "E-DECLARED-TYPE", "relu", False),
    (broadcast_failure, "E-SHAPE", "bias", True),
    (reshape_count, "E-SHAPE", "flat", True),
    (missing_version, "E-XML-ATTR", "relu", True),
    (missing_precision, "E-XML-ATTR", "relu", True),
    (non_integer_id, "E-LAYER-ID", "relu", None),
    (edge_into_parameter, "E-PARAMETER-INPUT", None, True),
]


def _openvino_rejects(xml: Path) -> bool:
    try:
        compile_cpu(xml)
    except Exception:  # noqa: BLE001 - any refusal counts
        return True
    return False


def test_base_is_clean(base):
    report = irrun.validate(base)
    assert report.diagnostics == [], [d.format() for d in report]


@pytest.mark.parametrize("mutation, code, layer_name, openvino_rejects", MUTATIONS,
                         ids=[m[0].__name__ for m in MUTATIONS])
def test_mutation_is_reported(base, tmp_path, mutation, code, layer_name, openvino_rejects):
    xml = mutated_copy(base, tmp_path, mutation)
    report = irrun.validate(xml)
    hits = [d for d in report.diagnostics if d.code == code]
    assert hits, f"{code} not reported; got:\n" + "\n".join(d.format() for d in report)
    if layer_name is not None:
        assert any(d.layer is not None and d.layer.name == layer_name for d in hits), \
            "\n".join(d.format() for d in hits)
    assert all(d.line for d in hits if d.code != "E-NO-RESULT"), "every diagnostic names its line"
    if code.startswith("E-"):
        assert not report.ok
    if openvino_rejects is not None:
        assert _openvino_rejects(xml) == openvino_rejects


def test_what_openvino_misses_is_documented():
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    for _, code, _, rejects in MUTATIONS:
        if rejects is False:
            assert code in readme.split("## What `validate` checks")[1], code


def test_every_defect_in_one_run(base, tmp_path):
    """Several independent defects: all of them in one report."""
    def several(root):
        declared_dims(root)
        declared_precision(root)
        unknown_attribute(root)
        broadcast_failure(root)
    report = irrun.validate(mutated_copy(base, tmp_path, several))
    assert {"E-DECLARED-SHAPE", "E-DECLARED-TYPE", "W-ATTR-UNKNOWN", "E-SHAPE"} <= set(report.codes())


def test_sorted_by_line_and_json_fields(base, tmp_path):
    def several(root):
        declared_dims(root)
        declared_precision(root)
    report = irrun.validate(mutated_copy(base, tmp_path, several))
    lines = [d.line for d in report.diagnostics]
    assert lines == sorted(lines)
    doc = report.diagnostics[0].to_json()
    assert set(doc) == {"file", "line", "severity", "code", "layer_id", "name", "type", "version", "port",
                        "message", "declared", "inferred"}


# ---------------------------------------------------------------- edges that name what does not exist

def _edge_line(xml: Path, **ends) -> int:
    for e in etree.parse(str(xml)).getroot().iter("edge"):
        if all(e.get(k.replace("_", "-")) == v for k, v in ends.items()):
            return e.sourceline
    raise AssertionError(ends)


def _to_missing_layer(root):
    _edge_into(root, _layer(root, "relu").get("id")).set("to-layer", "998")


def _both_ends_missing(root):
    e = _edge_into(root, _layer(root, "relu").get("id"))
    e.set("from-layer", "999")
    e.set("to-layer", "998")


def _from_missing_port(root):
    _edge_into(root, _layer(root, "relu").get("id")).set("from-port", "42")


# mutation, the edge's ends after it, code, what the message must say, the layer it names (None: none)
BROKEN_EDGES = [
    (edge_from_missing_layer, {"from_layer": "999"}, "E-EDGE-LAYER",
     ["from-layer 999 does not exist", 'feed input port 0 of layer 7 "relu"'], None),
    (_to_missing_layer, {"to_layer": "998"}, "E-EDGE-LAYER",
     ["to-layer 998 does not exist", 'comes from output port 2 of layer 6 "bias"'], None),
    (_both_ends_missing, {"from_layer": "999", "to_layer": "998"}, "E-EDGE-LAYER",
     ["from-layer 999 and to-layer 998 do not exist"], None),
    (edge_to_missing_port, {"to_port": "77"}, "E-EDGE-PORT", ["no input port 77", "its input ports: 0"], "relu"),
    (_from_missing_port, {"from_port": "42"}, "E-EDGE-PORT", ["no output port 42", "its output ports: 2"], "bias"),
]


@pytest.mark.parametrize("mutation, ends, code, says, layer_name", BROKEN_EDGES,
                         ids=[m[0].__name__.strip("_") for m in BROKEN_EDGES])
def test_a_broken_edge_names_the_missing_end_and_its_line(base, tmp_path, mutation, ends, code, says, layer_name):
    xml = mutated_copy(base, tmp_path, mutation)
    line = _edge_line(xml, **ends)
    report = irrun.validate(xml)
    hits = [d for d in report.diagnostics if d.code == code]
    assert len(hits) == 1, "\n".join(d.format() for d in report)
    hit = hits[0]
    assert hit.line == line and f"(line {line})" in hit.message, hit.format()
    for text in says:
        assert text in hit.message, hit.format()
    assert (hit.layer.name if hit.layer else None) == layer_name
    # The port the broken edge was to feed is unfed, and says which edge it has.
    if "from_layer" in ends and "to_layer" not in ends or "from_port" in ends:
        unfed = [d for d in report.diagnostics if d.code == "E-INPUT-UNCONNECTED"]
        assert len(unfed) == 1 and f"its edge (line {line}) comes from nowhere" in unfed[0].message, \
            "\n".join(d.format() for d in report)
    assert _openvino_rejects(xml)
    with pytest.raises(irrun.ModelError) as raised:
        irrun.load(xml)
    assert raised.value.code == code and says[0] in str(raised.value)


def test_a_broken_edge_inside_a_loop_body_names_the_body(tmp_path):
    import openvino.opset13 as ops13
    x = ops13.parameter([2, 3], ov.Type.f32, name="x")
    body_in = ops13.parameter([2, 3], ov.Type.f32)
    body_out = ops13.relu(body_in)
    body = ov.Model([ops13.result(body_out), ops13.result(ops13.constant(True))], [body_in])
    loop = ops13.loop(ops13.constant(np.int64(2)), ops13.constant(True))
    loop.set_function(body)
    loop.set_special_body_ports([-1, 1])
    loop.set_merged_input(body_in, x.output(0), body_out.output(0))
    out = loop.get_iter_value(body_out.output(0), -1)
    xml = tmp_path / "loop.xml"
    ov.save_model(ov.Model([ops13.result(out)], [x]), str(xml))
    tree = etree.parse(str(xml))
    loop_layer = _layer_of_type(tree.getroot(), "Loop")
    body_edge = loop_layer.find("body/edges/edge")
    body_edge.set("from-layer", "777")
    tree.write(str(xml))
    report = irrun.validate(xml)
    hits = [d for d in report.diagnostics if d.code == "E-EDGE-LAYER"]
    assert len(hits) == 1 and "from-layer 777 does not exist" in hits[0].message, \
        "\n".join(d.format() for d in report)
    assert hits[0].line == _edge_line(xml, from_layer="777")
    assert f"in the sub-graph {loop_layer.get('id')}" in hits[0].message


def test_strict_makes_a_defaulted_attribute_an_error(base, tmp_path):
    """`validate --strict`: the warning is reported as an error and the command fails."""
    from click.testing import CliRunner
    from irrun.cli import cli
    xml = mutated_copy(base, tmp_path, conv_without_strides)
    assert irrun.validate(xml).ok
    report = irrun.validate(xml, strict=True)
    assert [(d.severity, d.code) for d in report] == [("error", "W-ATTR-DEFAULTED")]
    warned = report.diagnostics[0]
    assert warned.layer.name == "conv" and 'strides=""' in warned.message and "every stride 1" in warned.message
    loose = CliRunner().invoke(cli, ["validate", str(xml)])
    strict = CliRunner().invoke(cli, ["validate", "--strict", str(xml)])
    assert loose.exit_code == 0 and "warning W-ATTR-DEFAULTED" in loose.output
    assert strict.exit_code == 1 and "error W-ATTR-DEFAULTED" in strict.output and "1 error, 0 warnings" in strict.output
