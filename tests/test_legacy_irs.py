"""IRs as the Model Optimizer and POT wrote them (2020-2022): OpenVINO runs them, so irrun runs them too.

* Declared port precisions and dims that contradict inference (E-DECLARED-*): OpenVINO ignores the declared
  values.  irrun runs with the inferred ones after one DeclaredValuesWarning (one `warning:` line from the
  CLI), `irrun validate` still reports them, and `strict=True` / `infer --strict` refuse as before.
* Attributes the Model Optimizer wrote that OpenVINO ignores (`legacy` in specs/<Type>.toml, from MO's op
  classes in openvino-dev 2021.4 / 2022.1 and the Caffe parameters it copied until 2021): no W-ATTR-UNKNOWN,
  so `validate --strict` passes; an attribute nobody wrote still warns.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset1 as ops1
import openvino.opset3 as ops3
import openvino.opset4 as ops4
import openvino.opset8 as ops8
import pytest
from click.testing import CliRunner
from lxml import etree

import irrun
from irrun.cli import cli
from irrun.errors import DeclaredValuesWarning
from irrun.spec import all_specs
from ovutil import as_ir_v10, assert_close, run_openvino, save

RNG = np.random.default_rng(20)
CORE = ov.Core()


def edit_layer(xml: Path, type_name: str, edit) -> Path:
    tree = etree.parse(str(xml))
    layer = next(l for l in tree.getroot().iter("layer") if l.get("type") == type_name)
    edit(tree.getroot(), layer)
    tree.write(str(xml))
    return xml


def consumer_port(root, layer, port_id: str):
    """The input port an output port of `layer` feeds."""
    edge = next(e for e in root.iter("edge") if e.get("from-layer") == layer.get("id") and e.get("from-port") == port_id)
    target = next(l for l in root.iter("layer") if l.get("id") == edge.get("to-layer"))
    return next(p for p in target.find("input") if p.get("id") == edge.get("to-port"))


def run_irrun(xml: Path, inputs, **kw) -> tuple[list[np.ndarray], list]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = list(irrun.load(xml, **kw).infer(inputs).values())
    return got, [w for w in caught if issubclass(w.category, irrun.errors.IrrunWarning)]


# ---------------------------------------------------------------- an FP16 SSD head (MO 2020-2021)

def mo_fp16_ssd(tmp_path: Path) -> Path:
    """A tiny FP16 SSD as MO wrote it: IR v10, f16 everywhere, the prior boxes folded into an f16 Const,
    and DetectionOutput-1's output declared FP32 (MO typed that output f32 whatever the network's precision),
    with the Caffe parameters eta and visualize in its <data>."""
    image = ops1.parameter([1, 3, 16, 16], np.float16, name="data")

    def conv(x, cout, cin, k):
        w = ops1.constant((RNG.standard_normal((cout, cin, k, k)) * 0.3).astype(np.float16))
        return ops1.convolution(x, w, [1, 1], [k // 2] * 2, [k // 2] * 2, [1, 1])

    feat = ops1.max_pool(ops1.relu(conv(image, 8, 3, 3)), [4, 4], [0, 0], [0, 0], [4, 4])   # [1, 8, 4, 4]
    priors, classes = 2 * 16, 3
    flat = ops1.constant(np.array([1, -1], np.int64))
    nhwc = ops1.constant(np.array([0, 2, 3, 1], np.int64))
    loc = ops1.reshape(ops1.transpose(conv(feat, 8, 8, 1), nhwc), flat, False)
    scores = ops1.reshape(ops1.transpose(conv(feat, 2 * classes, 8, 1), nhwc),
                          ops1.constant(np.array([1, priors, classes], np.int64)), False)
    conf = ops1.reshape(ops1.softmax(scores, 2), flat, False)
    centre = RNG.uniform(0.1, 0.9, (priors, 2))
    size = RNG.uniform(0.1, 0.4, (priors, 2))
    boxes = np.concatenate([centre - size / 2, centre + size / 2], 1).reshape(1, 1, -1)
    variance = np.tile([0.1, 0.1, 0.2, 0.2], priors).reshape(1, 1, -1)
    prior = ops1.constant(np.concatenate([boxes, variance], 1).astype(np.float16))
    det = ops1.detection_output(loc, conf, prior, {
        "num_classes": classes, "keep_top_k": [20], "nms_threshold": 0.45, "top_k": 50,
        "confidence_threshold": 0.01, "code_type": "caffe.PriorBoxParameter.CENTER_SIZE",
        "background_label_id": 0, "share_location": True, "normalized": True})
    xml = as_ir_v10(save(ov.Model([det], [image]), tmp_path))

    def edit(root, layer):
        for name, value in {"eta": "1.0", "visualize": "False", "visualize_threshold": "0.6"}.items():
            layer.find("data").set(name, value)
        out = layer.find("output").find("port")
        out.set("precision", "FP32")
        consumer_port(root, layer, out.get("id")).set("precision", "FP32")
    return edit_layer(xml, "DetectionOutput", edit)


def test_fp16_ssd_with_detection_output_declared_fp32(tmp_path):
    xml = mo_fp16_ssd(tmp_path)
    image = RNG.standard_normal((1, 3, 16, 16)).astype(np.float32)
    (expected,) = run_openvino(xml, [image])         # OpenVINO runs it
    report = irrun.validate(xml)
    assert report.codes() == ["E-DECLARED-TYPE"] and report.errors[0].layer.type == "DetectionOutput"
    (got,), said = run_irrun(xml, [image])
    assert_close(got, expected)
    assert (expected[0, 0, :, 0] >= 0).sum() > 0, "no detection: the comparison would be empty"
    assert len(said) == 1 and said[0].category is DeclaredValuesWarning
    message = str(said[0].message)
    assert "declared precision FP32, inferred f16" in message and "irrun validate" in message
    with pytest.raises(irrun.ModelError) as refused:
        irrun.load(xml, strict=True)
    assert refused.value.code == "E-DECLARED-TYPE"


def test_cli_warns_once_and_strict_refuses(tmp_path):
    xml = mo_fp16_ssd(tmp_path)
    np.save(tmp_path / "image.npy", RNG.standard_normal((1, 3, 16, 16)).astype(np.float32))
    runner = CliRunner(mix_stderr=False) if "mix_stderr" in CliRunner.__init__.__code__.co_varnames else CliRunner()
    ran = runner.invoke(cli, ["infer", str(xml), "-i", str(tmp_path / "image.npy")])
    assert ran.exit_code == 0, ran.output
    warning_lines = [l for l in ran.stderr.splitlines() if l.startswith("warning:")]
    assert len(warning_lines) == 1 and "irrun validate" in warning_lines[0], ran.stderr
    refused = runner.invoke(cli, ["infer", str(xml), "-i", str(tmp_path / "image.npy"), "--strict"])
    assert refused.exit_code == 1 and "E-DECLARED-TYPE" not in refused.stdout
    assert refused.stderr.startswith("error:") and "declared precision FP32" in refused.stderr
    checked = runner.invoke(cli, ["validate", str(xml)])
    assert checked.exit_code == 1 and "E-DECLARED-TYPE" in checked.stdout


# ---------------------------------------------------------------- MaxPool-8 from POT (2022)

def test_maxpool8_unconnected_indices_declared_fp32(tmp_path):
    """POT 2022 wrote MaxPool-8's unconnected indices output as FP32 although index_element_type is i64."""
    x = ops1.parameter([1, 4, 9, 9], np.float32)
    pool = ops8.max_pool(x, [1, 1], [1, 1], [0, 0], [0, 0], [3, 3], index_element_type="i64")
    y = ops1.relu(pool.output(0))
    xml = save(ov.Model([y], [x]), tmp_path)
    edit_layer(xml, "MaxPool", lambda root, layer: layer.find("output").findall("port")[1].set("precision", "FP32"))
    inputs = [RNG.standard_normal((1, 4, 9, 9)).astype(np.float32)]
    (expected,) = run_openvino(xml, inputs)
    assert irrun.validate(xml).codes() == ["E-DECLARED-TYPE"]
    (got,), said = run_irrun(xml, inputs)
    assert_close(got, expected)
    assert [w.category for w in said] == [DeclaredValuesWarning]


def test_declared_dims_contradicting_inference_run_too(tmp_path):
    """A declared output dim that is wrong (E-DECLARED-SHAPE): OpenVINO and irrun run with the inferred shape."""
    x = ops1.parameter([1, 3, 8, 8], np.float32)
    y = ops1.avg_pool(x, [2, 2], [0, 0], [0, 0], [2, 2], True)
    xml = save(ov.Model([ops1.relu(y)], [x]), tmp_path)
    edit_layer(xml, "AvgPool", lambda root, layer: [d.__setattr__("text", "7") for d in
                                                    layer.find("output").find("port").findall("dim")[2:]])
    inputs = [RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)]
    (expected,) = run_openvino(xml, inputs)
    assert "E-DECLARED-SHAPE" in irrun.validate(xml).codes()
    (got,), said = run_irrun(xml, inputs)
    assert_close(got, expected)
    assert len(said) == 1 and "declared [1,3,7,7], inferred [1,3,4,4]" in str(said[0].message)
    with pytest.raises(irrun.ModelError):
        irrun.load(xml, strict=True)


# ---------------------------------------------------------------- legacy attributes

def _x(shape, dtype=np.float32):
    return ops1.parameter(shape, dtype)


def _w(*shape):
    return ops1.constant((RNG.standard_normal(shape) * 0.3).astype(np.float32))


def _cell_inputs(gates):
    return [_x([2, 5]), _x([2, 4])], [_w(gates * 4, 5), _w(gates * 4, 4), _w(gates * 4)]


def _lstm(make):
    (x, h), (w, r, b) = _cell_inputs(4)
    c = _x([2, 4])
    return make(x, h, c, w, r, b, 4).output(0), [x, h, c]


def _gru():
    (x, h), (w, r, b) = _cell_inputs(3)
    return ops3.gru_cell(x, h, w, r, b, 4), [x, h]


def _rnn():
    (x, h), (w, r, b) = _cell_inputs(1)
    return ops3.rnn_cell(x, h, w, r, b, 4, ["tanh"], [], []), [x, h]


def _prior(make, attrs):
    image = ops1.constant(np.array([32, 32], np.int64))
    x = _x([1, 2, 4, 4])
    shape = ops3.shape_of(x)
    hw = ops1.strided_slice(shape, ops1.constant(np.array([2], np.int64)), ops1.constant(np.array([4], np.int64)),
                            ops1.constant(np.array([1], np.int64)), [0], [0])
    return ops1.add(make(hw, image, attrs), ops1.reduce_sum(x, ops1.constant(np.array([0, 1, 2, 3], np.int64)))), [x]


def _detection():
    priors, classes = 6, 3
    loc, conf = _x([1, priors * 4]), _x([1, priors * classes])
    prior = ops1.constant(np.concatenate([np.sort(RNG.uniform(0, 1, (1, 1, priors * 4)), -1),
                                          np.full((1, 1, priors * 4), 0.1)], 1).astype(np.float32))
    return ops1.detection_output(ops1.sigmoid(loc), ops1.softmax(ops1.reshape(
        conf, ops1.constant(np.array([1, priors * classes], np.int64)), False), 1), prior,
        {"num_classes": classes, "keep_top_k": [5], "nms_threshold": 0.5, "top_k": 6, "normalized": True}), [loc, conf]


def _deformable(version):
    x, offsets = _x([1, 2, 5, 5]), _x([1, 18, 5, 5])
    make = ops1.deformable_convolution if version == 1 else ops8.deformable_convolution
    return make(x, offsets, _w(3, 2, 3, 3), [1, 1], [1, 1], [1, 1], [1, 1]), [x, offsets]


BUILDERS = {
    ("Convolution", 1): lambda: (ops1.convolution(x := _x([1, 2, 6, 6]), _w(3, 2, 3, 3), [1, 1], [1, 1], [1, 1],
                                                  [1, 1]), [x]),
    ("GroupConvolution", 1): lambda: (ops1.group_convolution(x := _x([1, 4, 6, 6]), _w(2, 3, 2, 3, 3), [1, 1],
                                                             [1, 1], [1, 1], [1, 1]), [x]),
    ("DeformableConvolution", 1): lambda: _deformable(1),
    ("DeformableConvolution", 8): lambda: _deformable(8),
    ("DetectionOutput", 1): _detection,
    ("PriorBoxClustered", 1): lambda: _prior(ops1.prior_box_clustered,
                                             {"width": [3.0, 5.0], "height": [4.0, 2.0], "step": 8.0,
                                              "offset": 0.5}),
    ("PriorBox", 1): lambda: _prior(ops1.prior_box, {"min_size": [4.0], "aspect_ratio": [2.0], "flip": True,
                                                     "offset": 0.5}),
    ("LSTMCell", 1): lambda: _lstm(ops4.lstm_cell),    # (made LSTMCell-1 with six inputs below, as MO wrote it)
    ("LSTMCell", 4): lambda: _lstm(ops4.lstm_cell),
    ("GRUCell", 3): _gru,
    ("RNNCell", 1): _rnn,
    ("MaxPool", 1): lambda: (ops1.max_pool(x := _x([1, 2, 6, 6]), [2, 2], [0, 0], [0, 0], [2, 2]), [x]),
}
# A value of the kind MO wrote for each attribute (OpenVINO does not parse them).
LEGACY_TEXT = {"output_padding": "0,0", "mode": "", "pad_value": "0", "eta": "1.0", "visualize": "False",
               "flip": "1", "img_size": "0", "exclude-pad": "false", "activation_alpha": "", "activation_beta": ""}


def test_every_legacy_list_is_tested():
    declared = {key for key in all_specs() if all_specs()[key].legacy}
    assert declared - set(BUILDERS) == {("BinaryConvolution", 1)}   # (OpenVINO's Python API has no u1 Const)


@pytest.mark.parametrize("key", sorted(BUILDERS), ids=[f"{t}-{v}" for t, v in sorted(BUILDERS)])
def test_legacy_attributes_are_known_and_ignored(key, tmp_path):
    """Every legacy attribute of the op, written into its <data>: OpenVINO reads and runs it unchanged,
    `validate --strict` passes, and irrun gives OpenVINO's result."""
    type_name, version = key
    node, params = BUILDERS[key]()
    inputs = [RNG.standard_normal(p.get_partial_shape().to_shape()).astype(np.float32) for p in params]
    xml = save(ov.Model([node], params), tmp_path)
    if key == ("LSTMCell", 1):
        xml.write_text(xml.read_text().replace('type="LSTMCell" version="opset4"', 'type="LSTMCell" version="opset1"'))
    (plain,) = run_openvino(xml, inputs)
    legacy = sorted(all_specs()[key].legacy)
    edit_layer(xml, type_name, lambda root, layer: [layer.find("data").set(n, LEGACY_TEXT.get(n, "0")) for n in legacy])
    assert all(f'{n}="' in xml.read_text() for n in legacy)
    (expected,) = run_openvino(xml, inputs)
    np.testing.assert_array_equal(expected, plain)
    report = irrun.validate(xml)
    assert not report.diagnostics, [d.format() for d in report]
    assert CliRunner().invoke(cli, ["validate", "--strict", str(xml)]).exit_code == 0
    assert_close(list(irrun.load(xml).infer(inputs).values())[0], expected)


@pytest.mark.parametrize("type_name, attribute", [("Convolution", "foo"), ("DetectionOutput", "eta")])
def test_other_attributes_still_warn(type_name, attribute, tmp_path):
    """An attribute nobody wrote warns; so does a legacy one on a version its writers never produced
    (DetectionOutput-8 came with the 2022 tools, which wrote no eta)."""
    node, params = BUILDERS[(type_name, 1)]() if type_name == "Convolution" else _detection8()
    xml = save(ov.Model([node], params), tmp_path)
    edit_layer(xml, type_name, lambda root, layer: layer.find("data").set(attribute, "1"))
    assert irrun.validate(xml).codes() == ["W-ATTR-UNKNOWN"]
    assert CliRunner().invoke(cli, ["validate", "--strict", str(xml)]).exit_code == 1


def _detection8():
    priors, classes = 6, 3
    loc, conf = _x([1, priors * 4]), _x([1, priors * classes])
    prior = ops1.constant(np.full((1, 2, priors * 4), 0.1, np.float32))
    return ops8.detection_output(loc, conf, prior, {"keep_top_k": [5], "nms_threshold": 0.5, "normalized": True}), [loc, conf]
