"""Shape values known in part (irrun/partial_values.py), against OpenVINO's own shape inference.

ShapeOf of a dynamic tensor, then Gather/Concat/arithmetic, then Reshape/Broadcast/Tile/Pad/...:
OpenVINO tracks a lower and an upper bound of every element and infers [?,12] where a
value-only inference gives [?,?].  Every layer's inferred shape must equal what OpenVINO's
`read_model` reports for it, intervals included.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset11 as ops11
import openvino.opset13 as ops
import pytest
from lxml import etree

from ovutil import assert_close, run_openvino, save

import irrun
from irrun.model import _document_and_analysis
from irrun.shapes import Dim, format_shape

ROOT = Path(__file__).resolve().parent
MODELS = ROOT / "models"
CORE = ov.Core()
RNG = np.random.default_rng(3)


def _dim(d: ov.Dimension):
    if d.is_static:
        return d.get_length()
    hi = d.get_max_length()
    return Dim(d.get_min_length(), None if hi < 0 else hi)


def _openvino_shape(shape: ov.PartialShape):
    return None if shape.rank.is_dynamic else tuple(_dim(d) for d in shape)


def mismatches(xml: Path) -> list[str]:
    """Every layer output whose shape irrun infers differently from OpenVINO's reader."""
    model = CORE.read_model(str(xml))
    _, analysis, weights = _document_and_analysis(xml)
    try:
        nodes = {node.layer.name: node for node in analysis.nodes.values()}
        bad = []
        for op in model.get_ordered_ops():
            node = nodes[op.get_friendly_name()]
            for i, output in enumerate(op.outputs()):
                want = _openvino_shape(output.get_partial_shape())
                got = node.types[i].shape
                if got != want:
                    bad.append(f"{op.get_type_name()} {op.get_friendly_name()} output {i}: OpenVINO "
                               f"{format_shape(want)}, irrun {format_shape(got)}")
        assert not analysis.diagnostics.errors, [d.format() for d in analysis.diagnostics.errors]
        return bad
    finally:
        if weights is not None:
            weights.close()


# ---------------------------------------------------------------- the real networks, layer by layer

DYNAMIC = ["resnet_dynamic", "bert_dynamic", "gpt_dynamic", "llama_dynamic", "lstm_gru_dynamic"]
STATIC = ["resnet", "bert", "gpt", "llama", "vit", "lstm_gru", "mobilenetv3", "unet_detector", "audio_stft",
          "bert_onnx"]


def _reshaped(name: str, how: str, tmp_path: Path) -> Path:
    """The fixture with its inputs' first dim made dynamic (or an interval), the other dynamic dims
    intervals, saved again by OpenVINO."""
    model = CORE.read_model(str(MODELS / f"{name}.f32.xml"))
    shapes = {}
    for inp in model.inputs:
        dims = list(inp.get_partial_shape())
        if how == "dynamic batch":
            dims[0] = ov.Dimension()
        elif how == "intervals":
            dims = [ov.Dimension(1, 4) if i == 0 else ov.Dimension(2, 40) if d.is_dynamic else d
                    for i, d in enumerate(dims)]
        else:   # lower bounds only
            dims = [ov.Dimension(2, -1) if i == 0 else ov.Dimension(3, 64) if d.is_dynamic else d
                    for i, d in enumerate(dims)]
        shapes[inp.get_any_name()] = ov.PartialShape(dims)
    model.reshape(shapes)
    xml = tmp_path / f"{name}.xml"
    ov.save_model(model, str(xml), compress_to_fp16=False)
    return xml


@pytest.mark.parametrize("name", DYNAMIC)
def test_dynamic_fixture_layer_by_layer(name):
    assert mismatches(MODELS / f"{name}.f32.xml") == []


@pytest.mark.parametrize("how", ["intervals", "lower bounds"])
@pytest.mark.parametrize("name", DYNAMIC)
def test_dynamic_fixture_with_interval_dims_layer_by_layer(name, how, tmp_path):
    assert mismatches(_reshaped(name, how, tmp_path)) == []


@pytest.mark.parametrize("name", STATIC)
def test_fixture_with_a_dynamic_batch_layer_by_layer(name, tmp_path):
    assert mismatches(_reshaped(name, "dynamic batch", tmp_path)) == []


def test_the_dynamic_fixtures_need_partial_values(monkeypatch):
    """Without partial values, llama's rotary halves, repeat_interleave and lstm_gru's zero states lose
    their known dims (the case for all of this)."""
    from irrun import partial_values
    monkeypatch.setattr(partial_values, "RULES", {})
    assert mismatches(MODELS / "llama_dynamic.f32.xml")
    assert mismatches(MODELS / "lstm_gru_dynamic.f32.xml")


# ---------------------------------------------------------------- the patterns, op by op

def i64(*values):
    return ops.constant(np.array(values, np.int64))


def _parameter(shape, dtype=ov.Type.f32):
    return ops.parameter(ov.PartialShape([ov.Dimension(*d) if isinstance(d, tuple) else d for d in shape]), dtype)


class Net:
    """x of [2..5, 3, ?] and its shape; `extra` makes further Parameters."""

    def __init__(self):
        self.x = _parameter([(2, 5), 3, -1])
        self.params = [self.x]
        self.shape = ops.shape_of(self.x)
        self.first = ops.gather(self.shape, i64(0), i64(0))        # [2..5], a 1-element vector
        self.last = ops.gather(self.shape, i64(2), i64(0))         # unbounded

    def extra(self, shape, dtype=ov.Type.f32):
        p = _parameter(shape, dtype)
        self.params.append(p)
        return p


def fill(target):
    return ops.broadcast(ops.constant(np.float32(1)), target)


PATTERNS = {
    # target through one op each, read by Broadcast
    "ShapeOf": lambda n: fill(n.shape),
    "ShapeOf i32": lambda n: fill(ops.shape_of(n.x, "i32")),
    "Gather": lambda n: fill(ops.gather(n.shape, i64(0, 2), i64(0))),
    "Concat": lambda n: fill(ops.concat([n.shape, i64(7)], 0)),
    "Unsqueeze": lambda n: fill(ops.unsqueeze(ops.gather(n.shape, ops.constant(np.int64(0)), i64(0)), i64(0))),
    "Squeeze": lambda n: fill(ops.unsqueeze(ops.squeeze(n.first, i64(0)), i64(0))),
    "Reshape": lambda n: fill(ops.reshape(n.shape, i64(3), False)),
    "Convert i32": lambda n: fill(ops.convert(n.shape, "i32")),
    "Convert f32 and back": lambda n: fill(ops.convert(ops.convert(n.shape, "f32"), "i64")),
    "StridedSlice": lambda n: fill(ops.strided_slice(n.shape, i64(0), i64(2), i64(1), [0], [0])),
    "Slice": lambda n: fill(ops.slice(n.shape, i64(1), i64(3), i64(1))),
    "Transpose": lambda n: fill(ops.transpose(n.shape, i64(0))),
    "Tile": lambda n: fill(ops.tile(n.first, i64(2))),
    "Broadcast": lambda n: fill(ops.broadcast(n.first, i64(2))),
    "Select": lambda n: fill(ops.select(ops.constant(np.array([True, False, True])), n.shape, i64(9, 9, 9))),
    "ScatterUpdate": lambda n: fill(ops.scatter_update(n.shape, i64(1), i64(8), i64(0))),
    "Add": lambda n: fill(ops.add(n.shape, i64(1, 1, 1))),
    "Subtract": lambda n: fill(ops.subtract(i64(10, 10, 10), n.shape)),
    "Multiply": lambda n: fill(ops.multiply(n.shape, i64(2, 2, 2))),
    "Multiply two intervals": lambda n: fill(ops.multiply(n.first, n.first)),
    "Divide": lambda n: fill(ops.divide(n.shape, i64(2, 2, 2))),
    "Maximum": lambda n: fill(ops.maximum(n.shape, i64(3, 3, 3))),
    "Minimum": lambda n: fill(ops.minimum(n.shape, i64(3, 3, 3))),
    "FloorMod": lambda n: fill(ops.floor_mod(n.shape, i64(2, 2, 2))),
    "ReduceProd": lambda n: fill(ops.reduce_prod(ops.gather(n.shape, i64(0, 1), i64(0)), i64(0), True)),
    "ReduceProd unbounded": lambda n: fill(ops.reduce_prod(n.shape, i64(0), True)),
    "ReduceMax": lambda n: fill(ops.reduce_max(ops.gather(n.shape, i64(0, 1), i64(0)), i64(0), True)),
    "ReduceMin": lambda n: fill(ops.reduce_min(ops.gather(n.shape, i64(0, 1), i64(0)), i64(0), True)),
    "Range of a known element": lambda n: ops.range(ops.constant(np.int64(0)), ops.squeeze(
        ops.gather(n.shape, i64(1), i64(0)), i64(0)), ops.constant(np.int64(1)), ov.Type.i64),
    # the consumers
    "Reshape [first, 12]": lambda n: ops.reshape(n.extra([-1, 3, 4]), ops.concat(
        [ops.gather(ops.shape_of(n.params[-1]), i64(0), i64(0)), i64(12)], 0), False),
    "Reshape [first, -1]": lambda n: ops.reshape(n.x, ops.concat([n.first, i64(-1)], 0), False),
    "Reshape [0, last, -1]": lambda n: ops.reshape(n.x, ops.concat([i64(0), n.last, i64(-1)], 0), True),
    "Reshape [first * 3, -1]": lambda n: ops.reshape(n.x, ops.concat([ops.multiply(n.first, i64(3)), i64(-1)], 0),
                                                     False),
    "Reshape [first, 3, last]": lambda n: ops.reshape(n.x, ops.concat([n.first, i64(3), n.last], 0), False),
    "Reshape flatten [prod, -1]": lambda n: ops.reshape(n.x, ops.concat(
        [ops.reduce_prod(ops.gather(n.shape, i64(0, 1), i64(0)), i64(0), True), i64(-1)], 0), False),
    "Reshape i32 [first, -1]": lambda n: ops.reshape(n.x, ops.concat(
        [ops.gather(ops.shape_of(n.x, "i32"), ops.constant(np.int32([0])), ops.constant(np.int32(0))),
         ops.constant(np.int32([-1]))], 0), False),
    "Broadcast explicit": lambda n: ops.broadcast(n.extra([3]), n.shape, i64(1), "explicit"),
    "Broadcast bidirectional": lambda n: ops.broadcast(n.extra([1, 3, 1]), n.shape, "bidirectional"),
    "Tile repeats": lambda n: ops.tile(n.extra([2, 3]), ops.concat([n.first, i64(2)], 0)),
    "Tile unbounded repeats": lambda n: ops.tile(n.extra([2, 3]), ops.concat([n.last, i64(2)], 0)),
    "Pad": lambda n: ops.pad(n.extra([4, 4]), ops.concat([n.first, i64(1)], 0), i64(0, 0), "constant"),
    "Interpolate sizes": lambda n: ops11.interpolate(n.extra([1, 1, 4, 4]), ops.concat([n.first, i64(8)], 0),
                                                     "nearest", "sizes", axes=i64(2, 3)),
}


def _pattern_model(name) -> ov.Model:
    net = Net()
    out = PATTERNS[name](net)
    return ov.Model([ops.result(out)], net.params)


@pytest.mark.parametrize("name", PATTERNS)
def test_pattern_layer_by_layer(name, tmp_path):
    assert mismatches(save(_pattern_model(name), tmp_path)) == []


def test_the_issue_example(tmp_path):
    """ShapeOf of [?,3,4], then a Reshape to [?,12] three ways."""
    x = _parameter([-1, 3, 4])
    first = ops.gather(ops.shape_of(x), i64(0), i64(0))
    targets = [ops.concat([first, i64(12)], 0), i64(0, -1), i64(-1, 12)]
    outs = [ops.reshape(x, t, special_zero=(i == 1)) for i, t in enumerate(targets)]
    xml = save(ov.Model(outs, [x]), tmp_path)
    assert [format_shape(o.shape) for o in irrun.load(xml).outputs] == ["[?,12]"] * 3
    data = RNG.standard_normal((5, 3, 4)).astype(np.float32)
    for got, want in zip(irrun.load(xml).infer([data]).values(), run_openvino(xml, [data])):
        assert_close(got, want)


def test_a_declared_dim_is_checked_against_a_partly_known_target(tmp_path):
    """[?,12] is known, so a declared [?,13] is a defect (before, anything went)."""
    x = _parameter([-1, 3, 4])
    out = ops.reshape(x, ops.concat([ops.gather(ops.shape_of(x), i64(0), i64(0)), i64(12)], 0), False)
    out.set_friendly_name("flat")
    xml = save(ov.Model([out], [x]), tmp_path)
    tree = etree.parse(str(xml))
    layer = next(l for l in tree.getroot().iter("layer") if l.get("name") == "flat")
    layer.find("output/port").findall("dim")[1].text = "13"
    tree.write(str(xml))
    report = irrun.validate(xml)
    assert [(d.code, d.layer.name) for d in report.errors] == [("E-DECLARED-SHAPE", "flat")], \
        [d.format() for d in report]


def test_an_incompatible_operand_is_caught_through_a_partly_known_target(tmp_path):
    """Broadcasting [4] to [?, 3] (3 known from the shape of x) fails at load, as in OpenVINO."""
    x = _parameter([-1, 3])
    xml = save(ov.Model([ops.add(ops.broadcast(ops.constant(np.float32([1, 2, 3])), ops.shape_of(x)), x)], [x]),
               tmp_path)
    tree = etree.parse(str(xml))
    const = next(l for l in tree.getroot().iter("layer") if l.get("type") == "Const" and
                 l.find("data").get("shape") == "3")
    const.find("data").set("shape", "4")
    const.find("data").set("size", "16")
    const.find("output/port/dim").text = "4"
    Path(xml.with_suffix(".bin")).write_bytes(Path(xml.with_suffix(".bin")).read_bytes() + bytes(4))
    tree.write(str(xml))
    report = irrun.validate(xml)
    assert "E-SHAPE" in report.codes(), [d.format() for d in report]
    with pytest.raises(RuntimeError):
        CORE.read_model(str(xml))


@pytest.mark.parametrize("name", ["Reshape [first, -1]", "Reshape [0, last, -1]", "Tile repeats", "Pad",
                                  "Interpolate sizes", "Broadcast bidirectional", "Reshape flatten [prod, -1]"])
def test_pattern_runs_as_openvino_runs_it(name, tmp_path):
    m = _pattern_model(name)
    xml = save(m, tmp_path)
    feeds = [RNG.standard_normal([4 if d.is_dynamic else d.get_length() for d in p.get_partial_shape()]).astype(
        np.float32) for p in m.get_parameters()]
    got = irrun.load(xml).infer(feeds)
    for actual, expected in zip(got.values(), run_openvino(xml, feeds)):
        assert_close(actual, expected)


def test_layers_alike_but_for_their_partial_targets_do_not_share_inference(tmp_path):
    """Shape inference is shared between layers of one kind with equal input types: a value known in
    part must be part of what counts as equal."""
    x = _parameter([(2, 5), 3, -1])
    y = _parameter([(6, 9), 3, -1])
    outs = [ops.reshape(p, ops.concat([ops.gather(ops.shape_of(p), i64(0), i64(0)), i64(-1)], 0), False)
            for p in (x, y)]
    xml = save(ov.Model(outs, [x, y]), tmp_path)
    assert [format_shape(o.shape) for o in irrun.load(xml).outputs] == ["[2..5,?]", "[6..9,?]"]
    assert mismatches(xml) == []
