"""A big IR validates correctly, and not pathologically slowly; the shortcuts that make
it fast (the parser's fast path, shared shape inference) change no result.

Speed itself is measured by `benchmarks/validate_bench.py`, not here: the bound
below only catches a regression that makes validation quadratic or worse.
"""
import dataclasses
import re
import time
from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset1 as ops1
import openvino.opset8 as ops8
import pytest

import irrun
from irrun import analysis, ir, ir_fastpath
from irrun.model import _document_and_analysis
from benchmark_scripts import load_script
from irxml import edge, layer, net, port, write

LAYERS = 50_000
GENEROUS_SECONDS = 60


def _bench_module():
    return load_script("validate_bench")


def test_50000_layers_validate_and_a_defect_deep_inside_is_found(tmp_path):
    xml = tmp_path / "big.xml"
    _bench_module().write_model(xml, LAYERS)
    text = xml.read_text()
    assert text.count("<layer ") == LAYERS
    # Declare a wrong channel count on the output of the last Concat, far down the chain.
    start = text.rindex('type="Concat"')
    output = text.index("<output>", start)
    wrong_dim = text.index("<dim>16</dim>", output)
    xml.write_text(text[:wrong_dim] + "<dim>17</dim>" + text[wrong_dim + len("<dim>16</dim>"):])
    layer_start = text.rindex("<layer ", 0, start)
    concat_id = re.match(r'<layer id="(\d+)"', text[layer_start:]).group(1)
    # Far past line 65535, where libxml2 stops keeping exact element lines.
    layer_line = text.count("\n", 0, layer_start) + 1
    port_line = text.count("\n", 0, text.rindex("<port ", 0, wrong_dim)) + 1
    assert port_line > 10 * 65535

    began = time.perf_counter()
    report = irrun.validate(xml)
    seconds = time.perf_counter() - began

    assert seconds < GENEROUS_SECONDS
    assert [d.code for d in report.diagnostics] == ["E-DECLARED-SHAPE"]
    found = report.errors[0]
    assert (found.layer.type, found.layer.id, found.layer.line, found.line) == \
        ("Concat", concat_id, layer_line, port_line)
    assert found.declared == [1, 17, 4, 4] and found.inferred == [1, 16, 4, 4]


# ---------------------------------------------------------------- the parser's fast path

def _state(document) -> tuple:
    """Everything the parser hands on, as plain data."""
    def fields(obj):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}

    def graph(g):
        layers = {}
        for lid, l in g.layers.items():
            state = fields(l)
            state["inputs"] = [fields(p) for p in l.inputs]
            state["outputs"] = [fields(p) for p in l.outputs]
            state["bodies"] = {tag: graph(body) for tag, body in l.bodies.items()}
            layers[lid] = state
        return layers, [fields(e) for e in g.edges], g.sources

    return (document.version, document.name, document.rt_info, graph(document.graph),
            [(d.severity, d.code, d.message, d.line, d.layer, d.port) for d in document.diagnostics])


def _outcome(xml: Path) -> tuple:
    """The parsed document (or the error), and the report of `validate`."""
    try:
        parsed = _state(ir.parse_document(xml))
    except irrun.IrrunError as exc:
        parsed = (type(exc).__name__, str(exc))
    report = irrun.validate(xml)
    return parsed, [(d.severity, d.code, d.message, d.line, d.layer, d.declared, d.inferred)
                    for d in report.diagnostics]


def _both_paths(xml: Path, monkeypatch) -> tuple[tuple, tuple, bool]:
    """(fast path outcome, general path outcome, whether the fast path read the file)."""
    taken = []
    fast = ir_fastpath.parse_fast

    def watched(data, reader):
        result = fast(data, reader)
        taken.append(result is not None)
        return result

    with monkeypatch.context() as m:
        m.setattr(ir_fastpath, "parse_fast", watched)
        quick = _outcome(xml)
    with monkeypatch.context() as m:
        m.setattr(ir_fastpath, "parse_fast", lambda data, reader: None)
        general = _outcome(xml)
    return quick, general, taken[0]


def _saved_model(tmp_path: Path) -> Path:
    """An IR as OpenVINO writes it: tensor names, rt_info on layers, ports and the model."""
    x = ops8.parameter([1, 3, 8, 8], np.float32, name="x")
    x.output(0).get_tensor().set_names({"x", "input,0"})
    y = x
    for i in range(4):
        w = ops8.convert(ops8.constant(np.full((3, 3, 3, 3), i, np.float16)), "f32")
        w.get_rt_info()["decompression"] = ""
        y = ops8.relu(ops8.convolution(y, w, [1, 1], [1, 1], [1, 1], [1, 1]))
        y.get_rt_info()["fused_names"] = f"conv{i},relu{i}"
    y = ops8.reshape(y, ops8.constant(np.array([1, -1], np.int64)), special_zero=False)
    y.output(0).get_tensor().set_names({"out"})
    model = ov.Model([y], [x], "saved")
    model.set_rt_info("test", ["framework", "name"])
    xml = tmp_path / "saved.xml"
    ov.save_model(model, xml, compress_to_fp16=False)
    return xml


def _edit(text: str, pattern: str, replacement: str, count: int = 1) -> str:
    edited = re.sub(pattern, replacement, text, count=count)
    assert edited != text, pattern
    return edited


# name -> (edit of the file's text, whether the fast path reads the result)
EDITS = {
    "as written": (lambda t: t, True),
    "past line 65535": (lambda t: t.replace("<net", "\n" * 70_000 + "<net", 1), True),
    "tensor names with escaped commas": (lambda t: _edit(t, r'names="[^"]*"', r'names="a\\,b, c,,"'), True),
    "a name with > and unicode": (lambda t: _edit(t, r'(<layer [^>]*) name="', '\\1 name="a>\u00e9\u4e2d'), True),
    "an empty name": (lambda t: _edit(t, r'(<layer [^>]*) name="[^"]*"', '\\1 name=""'), True),
    "rt_info on a layer": (lambda t: _edit(t, r"(<layer [^>]*>)", r'\1<rt_info><attribute name="x" version="0" '
                                           r'value="1"/><n name=""><m value="2"/></n></rt_info>'), True),
    "rt_info after a port's dims": (lambda t: _edit(t, r"</port>", '<rt_info><attribute name="layout" '
                                                    'version="0" layout="[N,C]"/></rt_info></port>'), True),
    "no white space, past line 65535": (
        lambda t: re.sub(r">\s+<", "><", t).replace("<net", "\n" * 70_000 + "<net", 1), None),
    "a multi-line tag past line 65535": (
        lambda t: _edit(t.replace("<net", "\n" * 70_000 + "<net", 1), r'(<layer id="\d+") ', "\\1\n\t"), True),
    "a comment": (lambda t: _edit(t, r"(<port )", r"<!-- a\ncomment -->\1"), False),
    "a processing instruction": (lambda t: _edit(t, r"(<layer )", r"<?pi x?>\1"), False),
    "single quotes": (lambda t: _edit(t, r'(<layer [^>]*) name="([^"]*)"', r"\1 name='\2'"), False),
    "an entity": (lambda t: _edit(t, r'(<layer [^>]*) name="', '\\1 name="a&amp;'), False),
    "a tab in a name": (lambda t: _edit(t, r'(<layer [^>]*) name="', '\\1 name="a\t'), False),
    "an entity outside the layers": (lambda t: _edit(t, r'<net name="', '<net name="a&amp;'), True),
    "a newline in tensor names": (lambda t: _edit(t, r'names="', 'names="a\n'), False),
    "CR LF line ends": (lambda t: t.replace("\n", "\r\n"), False),
    "a byte order mark": (lambda t: "\ufeff" + t, True),
    "a second layers section": (lambda t: _edit(t, "</edges>", "</edges><layers><layer id=\"9\"/></layers>"), True),
    "a namespace": (lambda t: _edit(t, "<net ", '<net xmlns="urn:x" '), False),
    "an invalid dim": (lambda t: _edit(t, r"<dim>\d+</dim>", "<dim>?</dim>"), False),
    "an unknown precision": (lambda t: _edit(t, r'precision="FP32"', 'precision="FP99"'), False),
    "a duplicate layer id": (lambda t: _edit(t, r'<layer id="\d+"', '<layer id="0"', 2), True),
    "an edge to a missing port": (lambda t: _edit(t, r'to-port="\d+"', 'to-port="77"'), True),
    "an edge without to-port": (lambda t: _edit(t, r' to-port="\d+"', ""), False),
    "a wrong declared dim": (lambda t: _edit(t, r"(<output>\s*<port[^>]*>\s*<dim>)1<", r"\g<1>2<"), True),
    "not well-formed": (lambda t: t.replace("</layer>", "</layr>", 1), False),
}


@pytest.mark.parametrize("source", ["benchmark", "saved"])
@pytest.mark.parametrize("edit", list(EDITS))
@pytest.mark.parametrize("compile_after", [1, ir_fastpath._COMPILE_AFTER])
def test_the_fast_path_reads_what_the_general_path_reads(tmp_path, monkeypatch, source, edit, compile_after):
    if source == "benchmark":
        xml = tmp_path / "bench.xml"
        _bench_module().write_model(xml, 100)
    else:
        xml = _saved_model(tmp_path)
    change, fast_expected = EDITS[edit]
    xml.write_bytes(change(xml.read_text()).encode())
    monkeypatch.setattr(ir_fastpath, "_COMPILE_AFTER", compile_after)   # straight-line builders, or interpreted plans

    quick, general, fast_taken = _both_paths(xml, monkeypatch)

    assert quick == general
    if fast_expected is not None:
        assert fast_taken == fast_expected


def test_an_ir_of_mostly_distinct_layers_takes_the_general_path(tmp_path, monkeypatch):
    """Every Parameter -> ReLU -> Result of its own width: a form per layer, read one by one."""
    layers, edges = [], []
    for k in range(1, 201):
        p, r, o = 3 * k, 3 * k + 1, 3 * k + 2
        layers += [layer(p, f"p{k}", "Parameter", data={"shape": f"1,{k}", "element_type": "f32"},
                         outputs=[port(0, (1, k), names=f"p{k}")]),
                   layer(r, f"r{k}", "ReLU", inputs=[port(0, (1, k))], outputs=[port(1, (1, k))]),
                   layer(o, f"o{k}", "Result", inputs=[port(0, (1, k))])]
        edges += [edge(p, 0, r, 0), edge(r, 1, o, 0)]
    xml = write(tmp_path, net(layers, edges))
    monkeypatch.setattr(ir_fastpath, "_FEW_FORMS", 50)
    quick, general, fast_taken = _both_paths(xml, monkeypatch)
    assert quick == general and not fast_taken
    assert quick[1] == []


def test_a_value_too_long_for_libxml2_takes_the_general_path(tmp_path, monkeypatch):
    xml = tmp_path / "long.xml"
    _bench_module().write_model(xml, 40)
    xml.write_text(xml.read_text().replace('name="Parameter_0"', f'name="{"p" * 10_000_001}"'))
    quick, general, fast_taken = _both_paths(xml, monkeypatch)
    assert quick == general and not fast_taken
    assert quick[1][0][1] == "E-XML-SYNTAX"


# ---------------------------------------------------------------- shared shape inference

def _layer_by_layer(monkeypatch):
    monkeypatch.setattr(analysis, "_may_share", lambda node, in_types, memo: False)


def _analysis_state(xml: Path) -> tuple:
    document, result, weights = _document_and_analysis(xml)
    if weights is not None:
        weights.close()
    types = {lid: [(t.shape, t.etype, t.notes, None if t.value is None else t.value.tolist()) for t in node.types]
             for lid, node in result.nodes.items()}
    return types, [(d.code, d.message, d.line, d.layer) for d in result.diagnostics]


def _reshapes(tmp_path: Path, targets: list[tuple[int, ...]], declared: dict[int, tuple] | None = None) -> Path:
    """x [2, 12] -> Reshape to each target in turn (a Const each) -> Result; Reshape k may declare other dims."""
    declared = declared or {}
    consts = b""
    layers = [layer(0, "x", "Parameter", data={"shape": "2,12", "element_type": "f32"},
                    outputs=[port(0, (2, 12), names="x")])]
    edges, last, dims = [], (0, 0), (2, 12)
    for k, target in enumerate(targets):
        c, r = 1 + 2 * k, 2 + 2 * k
        raw = np.array(target, np.int64).tobytes()
        layers.append(layer(c, f"t{k}", "Const", data={"element_type": "i64", "shape": str(len(target)),
                                                      "offset": str(len(consts)), "size": str(len(raw))},
                            outputs=[port(0, (len(target),), "I64")]))
        consts += raw
        layers.append(layer(r, f"r{k}", "Reshape", data={"special_zero": "false"},
                            inputs=[port(0, dims), port(1, (len(target),), "I64")],
                            outputs=[port(2, declared.get(k, target))]))
        edges += [edge(*last, r, 0), edge(c, 0, r, 1)]
        last, dims = (r, 2), declared.get(k, target)
    end = 1 + 2 * len(targets)
    layers.append(layer(end, "out", "Result", inputs=[port(0, dims)]))
    edges.append(edge(*last, end, 0))
    return write(tmp_path, net(layers, edges), consts)


def test_shapes_that_depend_on_values_are_not_shared_across_values(tmp_path, monkeypatch):
    targets = [(4, 6), (3, 8), (4, 6), (6, 4), (24,), (4, 6)] * 3
    xml = _reshapes(tmp_path, targets, declared={17: (6, 4)})   # the last Reshape, to [4, 6], declares [6, 4]
    report = irrun.validate(xml)
    assert [(d.code, d.layer.name) for d in report.diagnostics] == [("E-DECLARED-SHAPE", "r17")]
    assert report.errors[0].inferred == [4, 6]
    shared = _analysis_state(xml)
    _layer_by_layer(monkeypatch)
    assert shared == _analysis_state(xml)


def test_shared_inference_matches_layer_by_layer_inference(tmp_path, monkeypatch):
    xml = tmp_path / "bench.xml"
    _bench_module().write_model(xml, 300)
    text = xml.read_text()
    # A wrong declared dim on one of many identical Add layers, and one on a Concat input.
    text = _edit(text, r'(type="Add" version="opset1">(?:(?!</layer>)[\s\S])*?<output>\s*<port[^>]*>\s*<dim>)1<',
                 r"\g<1>3<", count=2)
    text = _edit(text, r'(type="Concat" version="opset1">\s*<data[^>]*>\s*<input>\s*<port[^>]*>\s*<dim>1</dim>'
                       r'\s*<dim>)8<', r"\g<1>9<")
    xml.write_text(text)
    saved = _saved_model(tmp_path)
    results = [_analysis_state(xml), _analysis_state(saved)]
    assert any(code == "E-DECLARED-SHAPE" for code, *_ in results[0][1])
    _layer_by_layer(monkeypatch)
    assert results == [_analysis_state(xml), _analysis_state(saved)]


def test_what_a_shape_function_keeps_reaches_every_layer(tmp_path):
    """ConvertLike keeps its destination type from its shape function: every copy of it runs."""
    x = ops1.parameter([2, 3], np.float32, name="x")
    like = ops1.constant(np.zeros(1, np.int32))
    outputs = [ops1.convert_like(ops1.multiply(x, ops1.constant(np.float32(k + 1))), like) for k in range(12)]
    model = ov.Model([ops1.concat(outputs, 0)], [x], "likes")
    xml = tmp_path / "likes.xml"
    ov.save_model(model, xml, compress_to_fp16=False)
    data = np.arange(6, dtype=np.float32).reshape(2, 3) / 4
    got = irrun.load(xml).infer({"x": data})
    expected = np.concatenate([(data * (k + 1)).astype(np.int32) for k in range(12)])
    (result,) = got.values()
    assert result.dtype == np.int32 and np.array_equal(result, expected)
