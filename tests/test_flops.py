"""MAC counts (irrun/flops.py) against independent arithmetic.

The expected numbers are written from each architecture's hyperparameters (channels, kernel,
sequence length ...), not read off the IR: the IR only goes through OpenVINO and irrun.  Where
published figures exist they are quoted: torchvision's ResNet-18 at 224x224 is 1.81 G MACs in its
convolutions and classifier (fvcore, ptflops' aten backend) and 1.82 G with the per-element work
(ptflops' module backend, the usual tables).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset1 as ops1
import openvino.opset4 as ops4
import openvino.opset5 as ops5
import openvino.opset7 as ops7
import openvino.opset8 as ops8
import openvino.opset13 as ops13
import openvino.opset14 as ops14
import pytest

from irrun.flops import layer_macs, macs, model_macs
from irrun.model import _document_and_analysis
from irrun.stats import model_stats
from ovutil import const, param, save

MODELS = Path(__file__).resolve().parent / "models"
RNG = np.random.default_rng(0)


def analysis_of(model: ov.Model, tmp_path: Path):
    xml = save(model, tmp_path / "model.xml")
    return _document_and_analysis(xml)[1]


def macs_by_type(analysis) -> dict[str, int]:
    found: dict[str, int] = {}
    for lid, n in model_macs(analysis).items():
        if n:
            t = analysis.nodes[lid].layer.op_type
            found[t] = found.get(t, 0) + n
    return found


def only(analysis, op_type: str) -> int | None:
    (lid,) = [lid for lid, node in analysis.nodes.items() if node.layer.op_type == op_type]
    return layer_macs(analysis, lid)


def weights(*shape, dtype=np.float32):
    return ops1.constant((RNG.standard_normal(shape) * 0.05).astype(dtype))


# ---------------------------------------------------------------- ResNet-18, 224x224

def resnet18(image=224, classes=1000) -> ov.Model:
    """torchvision's resnet18 as its IR looks after conversion: each BatchNorm folded into its
    convolution's weights and a per-channel bias Add; ReLU; 3x3/2 max pool; global ReduceMean; fc."""
    def conv(x, cin, cout, k, stride):
        y = ops1.convolution(x, weights(cout, cin, k, k), [stride] * 2, [k // 2] * 2, [k // 2] * 2, [1, 1])
        return ops1.add(y, weights(1, cout, 1, 1))

    def block(x, cin, cout, stride):
        y = ops1.relu(conv(x, cin, cout, 3, stride))
        y = conv(y, cout, cout, 3, 1)
        shortcut = conv(x, cin, cout, 1, stride) if stride != 1 or cin != cout else x
        return ops1.relu(ops1.add(y, shortcut))

    x = param([1, 3, image, image], name="x")
    y = ops1.relu(conv(x, 3, 64, 7, 2))
    y = ops14.max_pool(y, [2, 2], [1, 1], [1, 1], [1, 1], [3, 3]).output(0)
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        y = block(y, cin, cout, stride)
        y = block(y, cout, cout, 1)
        cin = cout
    y = ops1.reduce_mean(y, const([2, 3]), keep_dims=False)
    y = ops1.add(ops1.matmul(y, weights(classes, 512), False, True), weights(1, classes))
    return ov.Model([y], [x], "resnet18")


@pytest.fixture(scope="module")
def resnet18_stats(tmp_path_factory):
    xml = save(resnet18(), tmp_path_factory.mktemp("resnet18") / "resnet18.xml")
    return model_stats(xml)


def test_resnet18_224_is_1_82_gmacs(resnet18_stats):
    st = resnet18_stats
    # Convolutions, from the architecture: Cout * Hout * Wout * Cin * k * k each.
    stem = 64 * 112 * 112 * 3 * 7 * 7                                     # 118,013,952
    layer1 = 4 * (64 * 56 * 56 * 64 * 9)                                  # 462,422,016
    later = 0
    for c, hw in ((128, 28), (256, 14), (512, 7)):
        later += c * hw * hw * (c // 2) * 9 + 3 * (c * hw * hw * c * 9)   # 3x3 convs, the first one strided
        later += c * hw * hw * (c // 2)                                   # the 1x1 projection
    fc = 512 * 1000
    contractions = stem + layer1 + later + fc
    assert contractions == 1_814_073_344     # fvcore / ptflops (aten): 1.81 G
    by_type = st.macs_by_type
    assert by_type["Convolution-1"] + by_type["MatMul-1"] == contractions
    # Per-element work: a bias Add on every convolution output, the 8 residual Adds, the fc bias,
    # the 3x3 max pool's taps and the global average's inputs.
    conv_outputs = 64 * 112 * 112 + 4 * 64 * 56 * 56 + 5 * 128 * 28 * 28 + 5 * 256 * 14 * 14 + 5 * 512 * 7 * 7
    residual = 2 * (64 * 56 * 56 + 128 * 28 * 28 + 256 * 14 * 14 + 512 * 7 * 7)
    assert by_type["Add-1"] == conv_outputs + residual + 1000
    assert by_type["MaxPool-14"] == 64 * 56 * 56 * 9
    assert by_type["ReduceMean-1"] == 512 * 7 * 7
    assert st.macs == 1_819_142_120 and round(st.macs / 1e9, 2) == 1.82
    assert st.uncounted == []


def test_resnet18_parameters(resnet18_stats):
    # torchvision counts 11,689,512; folding each BatchNorm's scale into its convolution leaves one
    # bias per channel instead of a weight and a bias: 4,800 BatchNorm channels fewer.
    assert resnet18_stats.parameters == {"f32": 11_689_512 - 4_800}


# ---------------------------------------------------------------- the test IRs (tests/models)

def fixture(name):
    return _document_and_analysis(MODELS / f"{name}.f32.xml")[1]


def transformer_encoder_macs(batch, seq, hidden, ffn, layers):
    """QKV and output projections, Q K^T and the weighting of V, the two FFN matmuls."""
    return layers * (4 * batch * seq * hidden * hidden + 2 * batch * seq * seq * hidden
                     + 2 * batch * seq * hidden * ffn)


def test_transformer_formula_gives_bert_base():
    # BERT-base at sequence 128: 11.2 G MACs, the published ~22 GFLOPs
    assert round(transformer_encoder_macs(1, 128, 768, 3072, 12) / 1e9, 1) == 11.2


def test_bert():
    got = macs_by_type(fixture("bert"))
    b, s, h = 2, 16, 64
    pooler, classifier = b * h * h, b * h * 3
    assert got["MatMul"] == transformer_encoder_macs(b, s, h, 2 * h, 2) + pooler + classifier


def test_bert_f16_twin_counts_the_same():
    # The f16 twin's decompression Converts run on constants: folded at load, not counted.
    f16 = _document_and_analysis(MODELS / "bert.f16.xml")[1]
    assert macs_by_type(f16) == macs_by_type(fixture("bert"))


def test_vit():
    got = macs_by_type(fixture("vit"))
    image, patch, h, depth = 32, 4, 64, 2
    patches = (image // patch) ** 2
    tokens = patches + 1
    assert got["Convolution"] == patches * h * 3 * patch * patch
    per_block_matmul = 3 * tokens * h * h + tokens * h * h + 2 * tokens * h * 2 * h   # in_proj, out_proj, MLP
    assert got["MatMul"] == depth * per_block_matmul + h * 10                           # head on the class token
    assert got["ScaledDotProductAttention"] == depth * tokens * tokens * 2 * h


def test_lstm_gru():
    got = macs_by_type(fixture("lstm_gru"))
    b, t, embed, hidden = 2, 12, 16, 24
    lstm = b * t * 2 * (4 * hidden * embed + 4 * hidden * hidden)
    lstm += b * t * 2 * (4 * hidden * 2 * hidden + 4 * hidden * hidden)
    gru = b * t * (3 * 32 * 2 * hidden + 3 * 32 * 32)
    assert got["LSTMSequence"] == lstm and got["GRUSequence"] == gru
    assert got["MatMul"] == b * t * 32 * 5


def test_gpt_attention():
    got = macs_by_type(fixture("gpt"))
    t, h, vocab = 16, 64, 128
    assert got["ScaledDotProductAttention"] == 2 * t * t * 2 * h
    assert got["MatMul"] == 2 * (t * h * 3 * h + t * h * h + 2 * t * h * 4 * h) + t * h * vocab


def test_dynamic_model_is_uncounted_not_wrong():
    a = _document_and_analysis(MODELS / "resnet_dynamic.f32.xml")[1]
    counts = model_macs(a)
    convs = [lid for lid in counts if a.nodes[lid].layer.op_type == "Convolution"]
    assert convs and all(counts[lid] is None for lid in convs)


# ---------------------------------------------------------------- op by op

@pytest.mark.parametrize("a_shape, b_shape, ta, tb, expected", [
    ([3, 1, 4, 5], [2, 5, 6], False, False, 3 * 2 * 4 * 6 * 5),     # batch broadcast
    ([2, 5, 4], [2, 6, 5], True, True, 2 * 4 * 6 * 5),
    ([5], [5, 6], False, False, 6 * 5),                              # 1-D operands
    ([4, 5], [5], False, False, 4 * 5),
    ([5], [5], False, False, 5),
])
def test_matmul(a_shape, b_shape, ta, tb, expected, tmp_path):
    y = ops1.matmul(param(a_shape), param(b_shape), ta, tb)
    a = analysis_of(ov.Model([y], [y.input_value(0).node, y.input_value(1).node]), tmp_path)
    assert only(a, "MatMul") == expected


@pytest.mark.parametrize("equation, shapes, expected", [
    ("bij,bjk->bik", [[2, 3, 4], [2, 4, 5]], 2 * 3 * 4 * 5),
    ("ij,jk,kl->il", [[2, 3], [3, 4], [4, 5]], 2 * 3 * 4 + 2 * 4 * 5),   # left to right, j summed first
    ("...ij,...jk->...ik", [[7, 2, 3], [1, 3, 4]], 7 * 2 * 3 * 4),
    ("ij->ji", [[2, 3]], 0),
    ("ij->i", [[2, 3]], 6),
])
def test_einsum(equation, shapes, expected, tmp_path):
    params = [param(s) for s in shapes]
    a = analysis_of(ov.Model([ops7.einsum(params, equation)], params), tmp_path)
    assert only(a, "Einsum") == expected


def test_convolutions(tmp_path):
    x = param([1, 8, 10, 10])
    outputs = [
        ops1.group_convolution(x, weights(2, 4, 4, 3, 3), [1, 1], [1, 1], [1, 1], [1, 1]),     # 2 groups
        ops1.group_convolution(x, weights(8, 1, 1, 3, 3), [1, 1], [1, 1], [1, 1], [1, 1]),     # depthwise
        ops1.convolution_backprop_data(x, weights(8, 6, 3, 3), [2, 2]),
        ops1.group_convolution_backprop_data(x, weights(2, 4, 3, 3, 3), [2, 2]),
        ops8.deformable_convolution(x, param([1, 2 * 9, 10, 10]), weights(5, 8, 3, 3), [1, 1], [1, 1],
                                    [1, 1], [1, 1]),
        ops1.binary_convolution(x, ops1.constant(np.ones((5, 8, 3, 3), np.float32)).output(0),
                                [1, 1], [1, 1], [1, 1], [1, 1], "xnor-popcount", 0.0),
    ]
    params = [x, outputs[4].input_value(1).node]
    a = analysis_of(ov.Model(outputs, params), tmp_path)
    got = {node.layer.op_type: layer_macs(a, lid) for lid, node in a.nodes.items()
           if node.layer.op_type not in ("Parameter", "Constant", "Result", "Convert")}
    groups = sorted(layer_macs(a, lid) for lid, node in a.nodes.items() if node.layer.op_type == "GroupConvolution")
    assert groups == [8 * 100 * 9, 8 * 100 * 4 * 9]      # depthwise; two groups of 4 channels
    assert got["ConvolutionBackpropData"] == 8 * 100 * 6 * 9        # every input element, Cout x taps
    assert got["GroupConvolutionBackpropData"] == 8 * 100 * 3 * 9   # per group: Cout/G x taps
    assert got["DeformableConvolution"] == 5 * 100 * 8 * 9
    assert got["BinaryConvolution"] == 5 * 100 * 8 * 9


def test_attention_and_cells(tmp_path):
    q, k, v = param([2, 4, 10, 8]), param([2, 4, 12, 8]), param([2, 4, 12, 16])
    x, h, c = param([3, 5]), param([3, 7]), param([3, 7])
    seq, h0 = param([2, 6, 5]), param([2, 1, 7])
    lengths = const([6, 6], np.int32)
    outputs = [
        ops13.scaled_dot_product_attention(q, k, v, causal=False).output(0),
        ops4.lstm_cell(x, h, c, weights(28, 5), weights(28, 7), weights(28), 7).output(0),
        ops4.gru_cell(x, h, weights(21, 5), weights(21, 7), weights(21), 7).output(0),
        ops4.rnn_cell(x, h, weights(7, 5), weights(7, 7), weights(7), 7, ["tanh"], [], []).output(0),
        ops5.rnn_sequence(seq, h0, lengths, weights(1, 7, 5), weights(1, 7, 7), weights(1, 7), 7,
                          "forward").output(0),
    ]
    a = analysis_of(ov.Model(outputs, [q, k, v, x, h, c, seq, h0]), tmp_path)
    assert only(a, "ScaledDotProductAttention") == 2 * 4 * 10 * 12 * (8 + 16)
    assert only(a, "LSTMCell") == 3 * (4 * 7 * 5 + 4 * 7 * 7)
    assert only(a, "GRUCell") == 3 * (3 * 7 * 5 + 3 * 7 * 7)
    assert only(a, "RNNCell") == 3 * (7 * 5 + 7 * 7)
    assert only(a, "RNNSequence") == 2 * 6 * (7 * 5 + 7 * 7)


def test_constant_subgraphs_are_folded_not_counted(tmp_path):
    x = param([4, 16])
    w = ops1.multiply(weights(8, 16), weights(8, 1))          # runs once, at load
    y = ops1.matmul(x, w, False, True)
    a = analysis_of(ov.Model([y], [x]), tmp_path)
    assert only(a, "Multiply") == 0 and only(a, "MatMul") == 4 * 8 * 16


def test_sub_graphs(tmp_path):
    from test_ops_control_flow import accumulate_loop, rnn_ti
    a = analysis_of(rnn_ti(), tmp_path)
    (ti,) = [lid for lid, n in a.nodes.items() if n.layer.op_type == "TensorIterator"]
    # per step: x_t [2,3] @ [3,4], h [2,4] @ [4,4], the Add of the two; 5 steps
    assert layer_macs(a, ti) == 5 * (2 * 3 * 4 + 2 * 4 * 4 + 2 * 4)
    body = a.nodes[ti].bodies["body"]
    matmul = next(lid for lid, n in body.nodes.items() if n.layer.op_type == "MatMul")
    assert layer_macs(a, f"{ti}/{matmul}") in (2 * 3 * 4, 2 * 4 * 4)
    a = analysis_of(accumulate_loop(4, True), tmp_path / "loop")
    (loop,) = [lid for lid, n in a.nodes.items() if n.layer.op_type == "Loop"]
    assert layer_macs(a, loop) == 4 * 2 * 3                   # acc + x, four times
    a = analysis_of(accumulate_loop("param", True), tmp_path / "runtime")
    (loop,) = [lid for lid, n in a.nodes.items() if n.layer.op_type == "Loop"]
    assert layer_macs(a, loop) is None                        # the trip count comes at run time


def test_macs_api_on_plain_shapes():
    from irrun.ir import Layer
    conv = Layer("1", "c", "Convolution", "opset1", 1, op_type="Convolution", op_version=1)
    assert macs(conv, [(1, 3, 8, 8), (4, 3, 3, 3)], [(1, 4, 6, 6)]) == 4 * 36 * 27
    assert macs(conv, [(1, 3, 8, 8), None], [(1, 4, 6, 6)]) is None
    relu = Layer("2", "r", "Relu", "opset1", 1, op_type="Relu", op_version=1)
    assert macs(relu, [(1, 4, 6, 6)], [(1, 4, 6, 6)]) == 0
    unknown = Layer("3", "u", "MyOp", "extension", 1)
    assert macs(unknown, [(1,)], [(1,)]) is None
