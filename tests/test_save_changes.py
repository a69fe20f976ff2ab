"""`Model.save` after `reshape` and `add_outputs`: what `openvino.save_model` writes after OpenVINO's own
`Model.reshape` / `Model.add_outputs` of the same model.

Each test does the change in OpenVINO and in irrun, saves both, and compares the files (byte for byte
where OpenVINO's reshape leaves the graph as it is; layer for layer where its SmartReshape rewrites
some of it), then runs irrun's file in OpenVINO against OpenVINO's own changed model, and reloads it
in irrun against OpenVINO too.  OpenVINO names the Results `add_outputs` makes `Result_<n>` by a
process-wide counter (and a tensor without names after them); irrun's are `Result/<tensor name>` and
the key `add_outputs` returned: the comparisons map one onto the other and nothing else.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset15 as ops
import pytest
from irxml import edge, layer, net, port, write
from lxml import etree
from ovutil import as_ir_v10, assert_close, compile_cpu, save

import irrun
import irrun.openvino as iov

MODELS = Path(__file__).resolve().parent / "models"
CORE = ov.Core()


# ---------------------------------------------------------------- models and inputs

def shape_zoo() -> ov.Model:
    """Ops whose output shapes follow the input's in different ways: convolutions and pools with
    auto_pad (OpenVINO writes their pads as 0), a deconvolution, a ShapeOf -> Gather -> Concat target of a
    Reshape, TopK, StridedSlice with masks, Interpolate by scales, MaxPool indices."""
    rng = np.random.default_rng(0)

    def weights(*shape):
        return ops.constant(rng.standard_normal(shape).astype(np.float32))
    x = ops.parameter([1, 3, 17, 19], np.float32, name="x")
    x.output(0).set_names({"x"})
    c = ops.convolution(x, weights(8, 3, 3, 3), [2, 2], [0, 0], [0, 0], [1, 1], auto_pad="same_upper", name="conv")
    c.output(0).set_names({"conv_out"})
    g = ops.group_convolution(c, weights(8, 1, 1, 3, 3), [1, 1], [1, 1], [1, 1], [1, 1], auto_pad="same_lower",
                              name="gconv")
    mp = ops.max_pool(g, [2, 2], [1, 1], [0, 0], [0, 0], [3, 3], auto_pad="same_upper", name="maxpool")
    ap = ops.avg_pool(mp.output(0), [2, 2], [0, 0], [0, 0], [2, 2], False, auto_pad="valid", name="avgpool")
    d = ops.convolution_backprop_data(ap, weights(8, 4, 3, 3), [2, 2], auto_pad="same_upper", name="deconv")
    dims = ops.gather(ops.shape_of(d, name="shape"), ops.constant(np.array([0, 1], np.int64)),
                      ops.constant(np.int64(0)), name="gather")
    flat = ops.reshape(d, ops.concat([dims, ops.constant(np.array([-1], np.int64))], 0, name="target"), False,
                       name="flatten")
    top = ops.topk(flat, ops.constant(np.int64(3)), -1, "max", "value", name="topk")
    sliced = ops.strided_slice(d, *(ops.constant(np.array(v, np.int64)) for v in ([0, 0, 1, 1], [0, 0, -1, -1],
                                                                                  [1, 1, 2, 2])),
                               [1, 1, 0, 0], [1, 1, 0, 0], name="slice")
    interp = ops.interpolate(sliced, ops.constant(np.array([2.0, 2.0], np.float32)), "nearest", "scales",
                             axes=ops.constant(np.array([2, 3], np.int64)), name="interp")
    return ov.Model([top.output(0), top.output(1), interp.output(0), mp.output(1)], [x], "zoo")


def sub_graph_model(kind: str) -> ov.Model:
    from test_ops_control_flow import accumulate_loop, branchy_if, loop_in_if, rnn_ti
    return {"TensorIterator": lambda: rnn_ti(invariant=True),
            "Loop": lambda: accumulate_loop("param", "param", limit=5),
            "If": branchy_if, "Loop in If": loop_in_if}[kind]()


def source(kind: str, tmp_path: Path) -> Path:
    """The IR a case starts from: a fixture, or a model built here and saved by OpenVINO."""
    if kind.endswith(".xml"):
        return MODELS / kind
    return save(shape_zoo() if kind == "zoo" else sub_graph_model(kind), tmp_path / "source")


def feeds(model: ov.Model, shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
    """Inputs for `model` of the given shapes (by input name), the values each kind of input takes."""
    rng = np.random.default_rng(7)
    out = {}
    for p in model.inputs:
        name = p.get_any_name()
        shape = shapes.get(name) or tuple(d.get_length() for d in p.get_partial_shape())
        dtype = p.get_element_type().to_dtype()
        if name == "attention_mask":
            value = np.ones(shape, dtype)
        elif name == "position_ids":
            value = np.broadcast_to(np.arange(shape[-1], dtype=dtype), shape).copy()
        elif name == "beam_idx":
            value = np.zeros(shape, dtype)
        elif name == "trip":
            value = np.array(3, dtype)
        elif dtype == np.bool_:
            value = np.array(True) if shape == () else rng.random(shape) < 0.5
        elif dtype.kind in "iu":
            value = rng.integers(0, 40, shape).astype(dtype)
        else:
            value = rng.standard_normal(shape).astype(dtype)
        out[name] = value
    return out


def run_compiled(model: ov.Model | Path, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    compiled = compile_cpu(model)
    result = compiled(inputs)
    return [np.asarray(result[o]) for o in compiled.outputs]


def check_runs_alike(saved: Path, changed: ov.Model, inputs: dict[str, np.ndarray], *, exact: bool) -> None:
    """OpenVINO reads irrun's file and computes what OpenVINO's own changed model computes; irrun reloads
    the file and computes what OpenVINO computes for these inputs' shapes (its changed model made static
    for them: the CPU plugin pads a MaxPool-8 with indices wrongly on dynamic shapes, specs/errata/pooling.md)."""
    bound = dict(rtol=0, atol=0) if exact else {}
    for i, (got, expected) in enumerate(zip(run_compiled(saved, inputs), run_compiled(changed, inputs), strict=True)):
        assert_close(got, expected, what=f"OpenVINO on irrun's file, output {i}", **bound)
    static = changed.clone()
    static.reshape({name: list(value.shape) for name, value in inputs.items()})
    want = run_compiled(static, inputs)
    for i, (got, expected) in enumerate(zip(irrun.load(saved).infer(inputs).values(), want, strict=True)):
        assert_close(got, expected, what=f"irrun on its file, output {i}")


def same_files(a: Path, b: Path) -> bool:
    return a.read_bytes() == b.read_bytes() and a.with_suffix(".bin").read_bytes() == b.with_suffix(".bin").read_bytes()


# ---------------------------------------------------------------- reshape

# (the source, the shapes given to reshape, the shapes to run it with)
RESHAPES = {
    "static": ("zoo", {"x": "2,3,32,40"}, {}),
    "dynamic": ("zoo", {"x": "?,3,?,?"}, {"x": (2, 3, 21, 27)}),
    "intervals": ("zoo", {"x": "1..3,3,20..40,?"}, {"x": (3, 3, 20, 33)}),
    "upper-bounds": ("zoo", {"x": "1,3,..64,31"}, {"x": (1, 3, 9, 31)}),
    "TensorIterator": ("TensorIterator", {"X": "3,7,3", "H0": "3,4"}, {}),
    "TensorIterator-dynamic": ("TensorIterator", {"X": "1..4,?,3", "H0": "?,4"}, {"X": (4, 6, 3), "H0": (4, 4)}),
    "Loop": ("Loop", {"X": "?,3"}, {"X": (5, 3)}),
    "If": ("If", {"X": "?,3", "Y": "?,3"}, {"X": (4, 3), "Y": (4, 3)}),
    "Loop in If": ("Loop in If", {"X": "?,?"}, {"X": (3, 5)}),
    "unet": ("unet_detector.f32.xml", {"x": "1,3,128,96"}, {}),
    "bert": ("bert.f32.xml", {"input_ids": "?,?", "attention_mask": "?,?"},
             {"input_ids": (2, 16), "attention_mask": (2, 16)}),   # (its Reshapes hold 2x16)
    "bert-interval": ("bert_dynamic.f32.xml", {"input_ids": "1,1..64", "attention_mask": "1,1..64"},
                      {"input_ids": (1, 9), "attention_mask": (1, 9)}),
    "gpt": ("gpt_dynamic.f32.xml", {"input_ids": "1,7"}, {}),
}


def reshaped_by_openvino(xml: Path, shapes: dict[str, str], target: Path) -> ov.Model:
    model = CORE.read_model(str(xml))
    model.reshape({name: ov.PartialShape(shape) for name, shape in shapes.items()})
    ov.save_model(model, str(target), compress_to_fp16=False)
    return model


@pytest.mark.parametrize("case", list(RESHAPES))
def test_a_reshaped_model_is_written_as_openvino_writes_it(case, tmp_path):
    """The same files as OpenVINO's save_model after its reshape, byte for byte: each reshaped Parameter's
    PartialShape (`?`, intervals, upper bounds), every port's re-inferred dims (inside bodies too, and
    body Parameters' shapes), pads of auto_pad ops as they were."""
    kind, shapes, run_shapes = RESHAPES[case]
    xml = source(kind, tmp_path)
    theirs = tmp_path / "openvino.xml"
    changed = reshaped_by_openvino(xml, shapes, theirs)
    m = irrun.load(xml)
    m.reshape(shapes)
    ours = m.save(tmp_path / "irrun.xml")
    assert same_files(ours, theirs)
    check_runs_alike(ours, changed, feeds(changed, run_shapes), exact=True)
    again = irrun.load(ours).save(tmp_path / "again.xml")     # (and a fixed point, as any saved IR)
    assert same_files(again, ours)


def layers_by_name(xml: Path) -> dict[str, etree._Element]:
    return {el.get("name"): el for el in etree.parse(str(xml)).getroot().find("layers")}


def without_offsets(el: etree._Element) -> bytes:
    el = etree.fromstring(etree.tostring(el))
    for data in el.iter("data"):
        data.attrib.pop("offset", None)
    el.attrib.pop("id")
    return etree.tostring(el)


# OpenVINO's reshape runs SmartReshape first: a Reshape feeding a MatMul gets a ShapeOf -> Gather -> Concat
# target instead of its constant one, ShapeOfs of constants are folded, equal constants merged.  irrun
# reshapes the graph as it is: the files differ there, and compute the same.
SMART_RESHAPES = {
    "resnet": ("resnet.f32.xml", {"x": "2,3,96,80"}, {}),
    "mobilenet-dynamic": ("mobilenetv3.f32.xml", {"x": "?,3,?,?"}, {"x": (2, 3, 64, 48)}),
    "audio": ("audio_cnn.f32.xml", {"audio": "2,1,?"}, {"audio": (2, 1, 1600)}),
    "lstm": ("lstm_gru.f32.xml", {"tokens": "2,7"}, {}),   # (?,? OpenVINO cannot compile, its own model neither)
    "llama": ("exported/llama.fp32.xml",
              {"input_ids": "1,?", "attention_mask": "1,?", "position_ids": "1,?", "beam_idx": "1"},
              {"input_ids": (1, 5), "attention_mask": (1, 5), "position_ids": (1, 5), "beam_idx": (1,)}),
}


@pytest.mark.parametrize("case", list(SMART_RESHAPES))
def test_where_openvino_rewrites_the_graph_the_layers_both_write_are_alike(case, tmp_path):
    """Every layer both files have is written alike (attributes, ports, dims, names), but for the ShapeOfs
    of constants OpenVINO folds; OpenVINO computes the same from irrun's file as from its own model."""
    kind, shapes, run_shapes = SMART_RESHAPES[case]
    xml = source(kind, tmp_path)
    changed = reshaped_by_openvino(xml, shapes, tmp_path / "openvino.xml")
    m = irrun.load(xml)
    m.reshape(shapes)
    ours = m.save(tmp_path / "irrun.xml")
    theirs, mine = layers_by_name(tmp_path / "openvino.xml"), layers_by_name(ours)
    common = [name for name in mine if name in theirs]
    assert len(common) > 0.9 * len(mine)
    folded = [n for n in common if theirs[n].get("type") == "Const" and mine[n].get("type") == "ShapeOf"]
    differ = [n for n in common if n not in folded and without_offsets(theirs[n]) != without_offsets(mine[n])]
    assert not differ, f"{len(differ)} layers written differently, the first {differ[0]!r}"
    check_runs_alike(ours, changed, feeds(changed, run_shapes), exact=False)


def test_reshaping_to_the_same_shapes_changes_nothing(tmp_path):
    for kind in ("zoo", "unet_detector.f32.xml", "Loop in If"):
        xml = source(kind, tmp_path)
        m = irrun.load(xml)
        m.reshape({i.name: list(i.shape) for i in m.inputs})
        assert same_files(m.save(tmp_path / "same.xml", force=True), xml), kind


def test_a_reshaped_ir_v10_model(tmp_path):
    """IR v10 (written as v11 with its input and output conversions made explicit): OpenVINO reads the same
    outputs, of the new shapes, from irrun's file as from its own reshape of the v10 file."""
    v10 = as_ir_v10(save(shape_zoo(), tmp_path / "zoo"))
    changed = CORE.read_model(str(v10))
    changed.reshape({"x": ov.PartialShape("2,3,?,?")})
    m = irrun.load(v10)
    m.reshape({"x": "2,3,?,?"})
    saved = m.save(tmp_path / "v11.xml")
    assert 'version="11"' in saved.read_text()
    assert [str(o.get_partial_shape()) for o in CORE.read_model(str(saved)).outputs] == \
        [str(o.get_partial_shape()) for o in changed.outputs]
    check_runs_alike(saved, changed, feeds(changed, {"x": (2, 3, 24, 30)}), exact=False)


# ---------------------------------------------------------------- add_outputs

def added_names_as_irrun(text: str, ours: list[tuple[str, tuple[str, ...]]]) -> str:
    """OpenVINO's file with its added Results named as irrun names them: `ours` lists irrun's added
    Results (name, output_names) in order; OpenVINO's are the `Result_<n>` after its own Results."""
    theirs = re.findall(r'<layer id="\d+" name="(Result_\d+)" type="Result"', text)[-len(ours):]
    for old, (name, names) in zip(theirs, ours):
        text = text.replace(f'name="{old}"', f'name="{name}"')
        text = re.sub(rf'(names|output_names)="{old}"', lambda m: f'{m.group(1)}="{",".join(names)}"', text)
    return text


def added_results(xml: Path, count: int) -> list[tuple[str, tuple[str, ...]]]:
    results = [el for el in etree.parse(str(xml)).getroot().find("layers") if el.get("type") == "Result"]
    return [(el.get("name"), tuple(el.get("output_names").split(","))) for el in results[-count:]]


def assert_same_files_but_names(ours: Path, theirs: Path, added: int) -> None:
    """The same layers (once OpenVINO's added Results are named as irrun's), the same edges (OpenVINO sorts
    them by source with an unstable sort: as a set), the same .bin."""
    mine = ours.read_text().split("<edges>")
    other = added_names_as_irrun(theirs.read_text(), added_results(ours, added)).split("<edges>")
    assert mine[0] == other[0]
    assert sorted(mine[1].splitlines()) == sorted(other[1].splitlines())
    assert ours.with_suffix(".bin").read_bytes() == theirs.with_suffix(".bin").read_bytes()


# (the source, what add_outputs is given (OpenVINO's forms; irrun's "layer:port" for (layer, port)),
# how many Results it adds, the shapes to run with)
ADDS = {
    "zoo": ("zoo", [("gather", 0), ("conv", 0), "x", ("topk", 1), ("avgpool", 0)], 4),
    "resnet": ("resnet.f32.xml", [("Multiply_3877", 0), "x"], 2),
    "llama": ("exported/llama.fp32.xml", ["179", ("__module.model.layers.1.mlp.down_proj/aten::linear/MatMul", 0)], 2),
}
LLAMA_RUN = {"input_ids": (1, 5), "attention_mask": (1, 5), "position_ids": (1, 5), "beam_idx": (1,)}


def irrun_form(item) -> str:
    return f"{item[0]}:{item[1]}" if isinstance(item, tuple) else item


@pytest.mark.parametrize("case", list(ADDS))
def test_added_outputs_are_written_as_openvino_writes_them(case, tmp_path):
    """A Result per tensor not yet an output (topk:1 is one), after the model's Results, in the order
    asked, with the ids OpenVINO gives them; layers in OpenVINO's order again (a new Result moves what it
    needs forward, here the Gather of the zoo, and every id after it); a stateful model's Assigns stay
    before the Results.  Its output_names are the tensor's names, or the key add_outputs returned."""
    kind, items, count = ADDS[case]
    xml = source(kind, tmp_path)
    changed = CORE.read_model(str(xml))
    changed.add_outputs(items)
    ov.save_model(changed, str(tmp_path / "openvino.xml"), compress_to_fp16=False)
    m = irrun.load(xml)
    m.add_outputs([irrun_form(item) for item in items])
    ours = m.save(tmp_path / "irrun.xml")
    assert_same_files_but_names(ours, tmp_path / "openvino.xml", count)

    # OpenVINO's outputs, read back, as irrun's but for the names OpenVINO made up for nameless tensors
    ours_added = added_results(ours, count)
    expected = [o.get_names() for o in changed.outputs]
    for i, (o, (_, names)) in enumerate(zip(changed.outputs[-count:], ours_added)):
        if o.get_names() == {o.get_node().get_friendly_name()}:
            expected[len(expected) - count + i] = set(names)
    assert [o.get_names() for o in CORE.read_model(str(ours)).outputs] == expected
    inputs = feeds(changed, LLAMA_RUN if case == "llama" else {})
    check_runs_alike(ours, changed, inputs, exact=True)


def test_irrun_returns_the_added_outputs_of_a_saved_model_by_their_names(tmp_path):
    """Saved and loaded again, the added tensors are outputs: a tensor without names under the key
    add_outputs gave it, a named one under its name; the values are the ones add_outputs gave."""
    xml = source("zoo", tmp_path)
    m = irrun.load(xml)
    assert m.add_outputs(["gather", "conv:0", "topk:1"]) == ["gather:0", "conv:0", "topk:1"]
    x = feeds(CORE.read_model(str(xml)), {})
    before = m.infer(x)
    again = irrun.load(m.save(tmp_path / "extended.xml"))
    after = again.infer(x)
    assert list(after) == [o.name for o in m.outputs] + ["gather:0", "conv_out"]
    for key, name in (("gather:0", "gather:0"), ("conv:0", "conv_out")):
        np.testing.assert_array_equal(after[name], before[key])
    assert again.outputs[-2].names == ("gather:0",) and again.outputs[-1].names == ("conv_out",)
    assert [l.name for l in again.layers.values() if l.op_type == "Result"][-2:] == ["Result/gather:0",
                                                                                   "Result/conv_out"]


def test_adding_an_output_that_is_one_changes_nothing(tmp_path):
    xml = source("zoo", tmp_path)
    m = irrun.load(xml)
    m.add_outputs(["topk:0", "maxpool:1"])
    assert same_files(m.save(tmp_path / "same.xml"), xml)


def test_added_outputs_of_an_ir_openvino_did_not_write(tmp_path):
    """Ids not counted from 0 and a layer order that is not OpenVINO's: the layers and their ids stay, the
    Result gets the next free id and its edge goes after the other edges from its producer."""
    dims = (2, 3)
    path = write(tmp_path, net([
        layer(10, "x", "Parameter", data={"shape": "2,3", "element_type": "f32"}, outputs=[port(0, dims, names="x")]),
        layer(30, "neg", "Negative", inputs=[port(0, dims)], outputs=[port(1, dims)]),
        layer(20, "relu", "ReLU", inputs=[port(0, dims)], outputs=[port(1, dims, names="y")]),
        layer(40, "out", "Result", inputs=[port(0, dims)]),
    ], [edge(10, 0, 30, 0), edge(30, 1, 20, 0), edge(20, 1, 40, 0)]))
    m = irrun.load(path)
    m.add_outputs(["neg"])
    saved = m.save(tmp_path / "saved.xml")
    text = saved.read_text()
    assert re.findall(r'<layer id="(\d+)"', text) == ["10", "30", "20", "40", "41"]
    assert '<layer id="41" name="Result/neg:0" type="Result" version="opset1" output_names="neg:0">' in text
    assert re.findall(r'from-layer="(\d+)" from-port="\d+" to-layer="(\d+)"', text) == \
        [("10", "30"), ("30", "20"), ("30", "41"), ("20", "40")]
    changed = CORE.read_model(str(path))
    changed.add_outputs([("neg", 0)])
    check_runs_alike(saved, changed, {"x": np.arange(-3, 3, dtype=np.float32).reshape(dims)}, exact=True)


# ---------------------------------------------------------------- both, through irrun.openvino

@pytest.mark.parametrize("compress", [False, True], ids=["plain", "f16"])
def test_save_model_after_reshape_and_add_outputs(compress, tmp_path):
    """irrun.openvino.save_model of a reshaped and extended model: OpenVINO's files (f16 weights
    compressed as OpenVINO compresses them, with the Results added), named as irrun names them."""
    xml = source("zoo", tmp_path)
    for module, target in ((ov, tmp_path / "openvino.xml"), (iov, tmp_path / "irrun.xml")):
        model = module.Core().read_model(str(xml))
        model.reshape({"x": module.PartialShape("?,3,16..64,?")})
        model.add_outputs([("gather", 0), "conv_out"])
        module.save_model(model, str(target), compress_to_fp16=compress)
    assert_same_files_but_names(tmp_path / "irrun.xml", tmp_path / "openvino.xml", 2)
    changed = CORE.read_model(str(tmp_path / "openvino.xml"))     # (what OpenVINO wrote: weights in f16)
    check_runs_alike(tmp_path / "irrun.xml", changed, feeds(changed, {"x": (2, 3, 20, 25)}), exact=True)


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "f16"])
def test_save_model_writes_the_names_a_script_gave(compress, tmp_path):
    """Friendly names of layers and of the model, and tensor names set or added on inputs, outputs and
    inner tensors, are written as OpenVINO writes them: byte for byte the same files."""
    xml = source("zoo", tmp_path)
    for module, target in ((ov, tmp_path / "openvino.xml"), (iov, tmp_path / "irrun.xml")):
        model = module.Core().read_model(str(xml))
        model.set_friendly_name("renamed_zoo")
        model.input(0).get_tensor().set_names({"image", "pixels"})
        model.output(2).get_tensor().set_names({"upsampled"})
        for node in model.get_ordered_ops():
            if node.get_friendly_name() == "conv":
                node.set_friendly_name("first_conv")
                node.output(0).get_tensor().add_names({"features"})
            if node.get_friendly_name() == "gather":
                node.output(0).get_tensor().set_names({"kept_dims"})
        module.save_model(model, str(target), compress_to_fp16=compress)
    assert (tmp_path / "irrun.xml").read_bytes() == (tmp_path / "openvino.xml").read_bytes()
    assert (tmp_path / "irrun.bin").read_bytes() == (tmp_path / "openvino.bin").read_bytes()
    again = iov.Core().read_model(str(tmp_path / "irrun.xml"))
    assert again.get_friendly_name() == "renamed_zoo"
    assert again.input(0).get_names() == {"image", "pixels"}
    assert again.output(2).get_names() == {"upsampled"}
    assert {op.get_friendly_name() for op in again.get_ordered_ops()} >= {"first_conv", "gather"}
