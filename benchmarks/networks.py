"""The benchmark networks, written once against a small graph-building interface.

Each network is a function `net(g, rng)` that adds layers to a builder `g` and
returns `(outputs, inputs)`: the output nodes and a dict input name -> example
array.  Two builders implement the interface: `OpenVINOGraph` (openvino's
Python API, saved as IR) and `OnnxGraph` (onnx.helper, for the ONNX
ReferenceEvaluator column).  The same seed gives both the same weights, so the
two files describe the same computation.
"""
from __future__ import annotations

import math
from functools import partial
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DIGITS = ROOT / "models" / "digits" / "model.xml"


# ---------------------------------------------------------------- builders

class OpenVINOGraph:
    """Builds an ov.Model; `save(path)` writes model.xml + model.bin."""

    def __init__(self, name: str):
        import openvino as ov
        import openvino.opset13 as ops
        self.ov, self.ops, self.name = ov, ops, name
        self.parameters = []

    def input(self, name, shape, dtype=np.float32):
        p = self.ops.parameter(list(shape), self.ov.Type.f32 if dtype == np.float32 else self.ov.Type.i64, name=name)
        p.output(0).set_names({name})
        self.parameters.append(p)
        return p

    def const(self, array):
        return self.ops.constant(np.asarray(array))

    def conv(self, x, w, b, stride=1, pad=0):
        y = self.ops.convolution(x, self.const(w), [stride] * 2, [pad] * 2, [pad] * 2, [1, 1])
        return self.ops.add(y, self.const(b.reshape(1, -1, 1, 1)))

    def add(self, a, b):
        return self.ops.add(a, b)

    def mul(self, a, b):
        return self.ops.multiply(a, b)

    def relu(self, x):
        return self.ops.relu(x)

    def sigmoid(self, x):
        return self.ops.sigmoid(x)

    def gelu(self, x):
        return self.ops.gelu(x, "erf")

    def max_pool(self, x, kernel, stride, pad):
        return self.ops.max_pool(x, [stride] * 2, [1, 1], [pad] * 2, [pad] * 2, [kernel] * 2).output(0)

    def global_avg_pool(self, x):
        return self.ops.reduce_mean(x, self.const(np.array([2, 3], np.int64)), False)

    def matmul(self, a, b, transpose_b=False):
        return self.ops.matmul(a, b, False, transpose_b)

    def reshape(self, x, shape):
        return self.ops.reshape(x, self.const(np.array(shape, np.int64)), True)

    def transpose(self, x, perm):
        return self.ops.transpose(x, self.const(np.array(perm, np.int64)))

    def softmax(self, x, axis):
        return self.ops.softmax(x, axis)

    def layer_norm(self, x, gamma, beta, eps=1e-12):
        y = self.ops.mvn(x, self.const(np.array([-1], np.int64)), True, eps, "inside_sqrt")
        return self.ops.add(self.ops.multiply(y, self.const(gamma)), self.const(beta))

    def gather(self, table, ids):
        return self.ops.gather(self.const(table), ids, self.const(np.int64(0)))

    def upsample2x(self, x):
        return self.ops.interpolate(x, self.const(np.array([2.0, 2.0], np.float32)), "nearest", "scales",
                                    coordinate_transformation_mode="asymmetric", nearest_mode="floor",
                                    axes=self.const(np.array([2, 3], np.int64)))

    def concat(self, xs, axis):
        return self.ops.concat(xs, axis)

    def model(self, outputs):
        results = []
        for i, y in enumerate(outputs):
            y.output(0).set_names({f"output{i}"})
            results.append(self.ops.result(y))
        return self.ov.Model(results, getattr(self, "sinks", []), self.parameters, self.name)

    def save(self, outputs, path: Path, compress_to_fp16=False) -> Path:
        self.ov.save_model(self.model(outputs), str(path), compress_to_fp16=compress_to_fp16)
        return path


class OnnxGraph:
    """Builds an onnx.ModelProto (opset 21) for onnx.reference.ReferenceEvaluator."""

    OPSET = 21

    def __init__(self, name: str):
        import onnx
        from onnx import helper, numpy_helper
        self.onnx, self.helper, self.numpy_helper, self.name = onnx, helper, numpy_helper, name
        self.nodes, self.inits, self.inputs = [], [], []
        self.count = 0

    def _fresh(self, stem):
        self.count += 1
        return f"{stem}{self.count}"

    def _node(self, op, inputs, **attrs):
        out = self._fresh(op.lower())
        self.nodes.append(self.helper.make_node(op, list(inputs), [out], **attrs))
        return out

    def input(self, name, shape, dtype=np.float32):
        elem = self.onnx.TensorProto.FLOAT if dtype == np.float32 else self.onnx.TensorProto.INT64
        self.inputs.append(self.helper.make_tensor_value_info(name, elem, list(shape)))
        return name

    def const(self, array):
        name = self._fresh("c")
        self.inits.append(self.numpy_helper.from_array(np.asarray(array), name))
        return name

    def conv(self, x, w, b, stride=1, pad=0):
        return self._node("Conv", [x, self.const(w), self.const(b)], strides=[stride] * 2, pads=[pad] * 4)

    def add(self, a, b):
        return self._node("Add", [a, b])

    def mul(self, a, b):
        return self._node("Mul", [a, b])

    def relu(self, x):
        return self._node("Relu", [x])

    def sigmoid(self, x):
        return self._node("Sigmoid", [x])

    def gelu(self, x):
        # x/2 * (1 + erf(x / sqrt 2)); spelled out: the reference evaluator runs Gelu only as a function
        half = self.mul(x, self.const(np.float32(0.5)))
        erf = self._node("Erf", [self.mul(x, self.const(np.float32(1 / math.sqrt(2))))])
        return self.mul(half, self.add(erf, self.const(np.float32(1))))

    def max_pool(self, x, kernel, stride, pad):
        return self._node("MaxPool", [x], kernel_shape=[kernel] * 2, strides=[stride] * 2, pads=[pad] * 4)

    def global_avg_pool(self, x):
        return self._node("ReduceMean", [x, self.const(np.array([2, 3], np.int64))], keepdims=0)

    def matmul(self, a, b, transpose_b=False):
        if transpose_b:
            b = self._node("Transpose", [b], perm=[0, 1, 3, 2])
        return self._node("MatMul", [a, b])

    def reshape(self, x, shape):
        return self._node("Reshape", [x, self.const(np.array(shape, np.int64))])

    def transpose(self, x, perm):
        return self._node("Transpose", [x], perm=list(perm))

    def softmax(self, x, axis):
        return self._node("Softmax", [x], axis=axis)

    def layer_norm(self, x, gamma, beta, eps=1e-12):
        return self._node("LayerNormalization", [x, self.const(gamma), self.const(beta)], axis=-1, epsilon=eps)

    def gather(self, table, ids):
        return self._node("Gather", [self.const(table), ids], axis=0)

    def upsample2x(self, x):
        scales = self.const(np.array([1, 1, 2, 2], np.float32))
        return self._node("Resize", [x, "", scales], mode="nearest",
                          coordinate_transformation_mode="asymmetric", nearest_mode="floor")

    def concat(self, xs, axis):
        return self._node("Concat", xs, axis=axis)

    def save(self, outputs, path: Path) -> Path:
        outs = []
        for i, y in enumerate(outputs):
            self.nodes.append(self.helper.make_node("Identity", [y], [f"output{i}"]))
            outs.append(self.helper.make_tensor_value_info(f"output{i}", self.onnx.TensorProto.FLOAT, None))
        graph = self.helper.make_graph(self.nodes, self.name, self.inputs, outs, self.inits)
        model = self.helper.make_model(graph, opset_imports=[self.helper.make_opsetid("", self.OPSET)])
        self.onnx.save(model, str(path))
        return path


# ---------------------------------------------------------------- weights

def conv_weights(rng, cout, cin, k):
    """He-initialised filter and a small bias (a folded BatchNorm)."""
    w = rng.standard_normal((cout, cin, k, k), dtype=np.float32) * np.float32(math.sqrt(2.0 / (cin * k * k)))
    return w, rng.standard_normal(cout, dtype=np.float32) * np.float32(0.1)


def dense_weights(rng, cin, cout):
    w = rng.standard_normal((cin, cout), dtype=np.float32) * np.float32(math.sqrt(1.0 / cin))
    return w, rng.standard_normal(cout, dtype=np.float32) * np.float32(0.02)


def conv_relu(g, rng, x, cin, cout, k=3, stride=1):
    return g.relu(g.conv(x, *conv_weights(rng, cout, cin, k), stride, k // 2))


def dense(g, rng, x, cin, cout):
    w, b = dense_weights(rng, cin, cout)
    return g.add(g.matmul(x, g.const(w)), g.const(b))


# ---------------------------------------------------------------- networks

def resnet18(g, rng):
    """ResNet-18 at 1x3x224x224: BatchNorms folded into conv biases, 1000 classes (1.8 GFLOP)."""
    x = g.input("image", (1, 3, 224, 224))
    y = g.max_pool(conv_relu(g, rng, x, 3, 64, 7, 2), 3, 2, 1)
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        for block in range(2):
            s = stride if block == 0 else 1
            branch = conv_relu(g, rng, y, cin, cout, 3, s)
            branch = g.conv(branch, *conv_weights(rng, cout, cout, 3), 1, 1)
            shortcut = g.conv(y, *conv_weights(rng, cout, cin, 1), s, 0) if s != 1 or cin != cout else y
            y, cin = g.relu(g.add(branch, shortcut)), cout
    logits = dense(g, rng, g.global_avg_pool(y), 512, 1000)
    return [logits], {"image": rng.standard_normal((1, 3, 224, 224), dtype=np.float32)}


def bert_encoder(g, rng, seq=128, hidden=256, layers=4, heads=4, vocab=8000, batch=1):
    """A BERT-style encoder: token + position embeddings, `layers` post-norm transformer blocks."""
    ids = g.input("input_ids", (batch, seq), np.int64)
    head = hidden // heads
    emb = g.gather(rng.standard_normal((vocab, hidden), dtype=np.float32) * np.float32(0.02), ids)
    pos = g.const(rng.standard_normal((1, seq, hidden), dtype=np.float32) * np.float32(0.02))
    ones, zeros = np.ones(hidden, np.float32), np.zeros(hidden, np.float32)
    x = g.layer_norm(g.add(emb, pos), ones, zeros)

    def split_heads(t):
        return g.transpose(g.reshape(t, (batch, seq, heads, head)), (0, 2, 1, 3))

    for _ in range(layers):
        q, k, v = (split_heads(dense(g, rng, x, hidden, hidden)) for _ in range(3))
        scores = g.mul(g.matmul(q, k, transpose_b=True), g.const(np.float32(1 / math.sqrt(head))))
        context = g.matmul(g.softmax(scores, -1), v)
        context = g.reshape(g.transpose(context, (0, 2, 1, 3)), (batch, seq, hidden))
        x = g.layer_norm(g.add(x, dense(g, rng, context, hidden, hidden)), ones, zeros)
        ffn = dense(g, rng, g.gelu(dense(g, rng, x, hidden, 4 * hidden)), 4 * hidden, hidden)
        x = g.layer_norm(g.add(x, ffn), ones, zeros)
    return [x], {"input_ids": rng.integers(0, vocab, (batch, seq), dtype=np.int64)}


def transformer_seq17(g, rng):
    """A sentence encoder at the short sequences users send: batch 2, sequence 17, hidden 384,
    6 layers, 6 heads (MiniLM-sized; GEMMs of 34 rows)."""
    return bert_encoder(g, rng, seq=17, hidden=384, layers=6, heads=6, vocab=8000, batch=2)


def detector(g, rng, classes=20, anchors=3):
    """A one-stage detector at 1x3x320x640: 5 stride-2 stages, an FPN (nearest 2x upsampling,
    lateral 1x1 convs) over strides 8/16/32, a 1x1 head per level, all boxes concatenated."""
    x = g.input("image", (1, 3, 320, 640))
    features, cin = [], 3
    for cout in (16, 32, 64, 128, 256):
        y = conv_relu(g, rng, x, cin, cout, 3, 2)
        x, cin = conv_relu(g, rng, y, cout, cout, 3, 1), cout
        features.append((x, cout))
    c3, c4, c5 = features[2:]
    width, per_box = 64, anchors * (5 + classes)
    p5 = g.conv(c5[0], *conv_weights(rng, width, c5[1], 1), 1, 0)
    p4 = g.add(g.upsample2x(p5), g.conv(c4[0], *conv_weights(rng, width, c4[1], 1), 1, 0))
    p3 = g.add(g.upsample2x(p4), g.conv(c3[0], *conv_weights(rng, width, c3[1], 1), 1, 0))
    boxes = []
    for p in (p3, p4, p5):
        head = g.conv(conv_relu(g, rng, p, width, width, 3, 1), *conv_weights(rng, per_box, width, 1), 1, 0)
        boxes.append(g.reshape(head, (1, per_box, -1)))
    return [g.sigmoid(g.concat(boxes, 2))], {"image": rng.standard_normal((1, 3, 320, 640), dtype=np.float32)}


def many_small_layers(g, rng, cycles=100):
    """500 cheap layers on a [1, 16] tensor (Add, Relu, Multiply, Sigmoid, Reshape): per-layer overhead."""
    x = g.input("x", (1, 16))
    y = x
    for i in range(cycles):
        y = g.relu(g.add(y, g.const(np.full((1, 16), 0.001 * i, np.float32))))
        y = g.reshape(g.sigmoid(g.mul(y, g.const(np.float32(1.01)))), (1, 16))
    return [y], {"x": rng.standard_normal((1, 16), dtype=np.float32)}


# ---------------------------------------------------------------- networks written against openvino's API alone

def _group_conv(g, x, w, stride, pad, dilation=1):
    ops = g.ops
    rank = w.ndim - 3
    return ops.group_convolution(x, g.const(w), [stride] * rank, [pad] * rank, [pad] * rank, [dilation] * rank)


def _conv_bn(g, rng, x, cin, cout, k, stride=1, groups=1, act=None, pad=None):
    """Convolution (grouped when groups > 1, depthwise when groups == cin == cout) with its folded
    BatchNorm bias and an activation."""
    ops = g.ops
    pad = k // 2 if pad is None else pad
    if groups == 1:
        w, b = conv_weights(rng, cout, cin, k)
        y = g.conv(x, w, b, stride, pad)
    else:
        w = rng.standard_normal((groups, cout // groups, cin // groups, k, k), dtype=np.float32) \
            * np.float32(math.sqrt(2.0 / (cin // groups * k * k)))
        b = rng.standard_normal(cout, dtype=np.float32) * np.float32(0.1)
        y = ops.add(_group_conv(g, x, w, stride, pad), g.const(b.reshape(1, -1, 1, 1)))
    if act == "relu":
        return ops.relu(y)
    if act == "hswish":
        return ops.hswish(y)
    if act == "swish":
        return ops.swish(y)
    return y


def mobilenet_v3(g, rng):
    """MobileNetV3-Small at 1x3x224x224: inverted residuals with depthwise 3x3 / 5x5 convolutions,
    squeeze-excite (global pool, two 1x1 layers, HSigmoid, Multiply), HSwish; 1000 classes."""
    ops = g.ops
    x = g.input("image", (1, 3, 224, 224))
    y = _conv_bn(g, rng, x, 3, 16, 3, 2, act="hswish")
    cin = 16
    # kernel, expanded, out, squeeze-excite, activation, stride
    for k, exp, cout, se, act, s in ((3, 16, 16, True, "relu", 2), (3, 72, 24, False, "relu", 2),
                                     (3, 88, 24, False, "relu", 1), (5, 96, 40, True, "hswish", 2),
                                     (5, 240, 40, True, "hswish", 1), (5, 240, 40, True, "hswish", 1),
                                     (5, 120, 48, True, "hswish", 1), (5, 144, 48, True, "hswish", 1),
                                     (5, 288, 96, True, "hswish", 2), (5, 576, 96, True, "hswish", 1),
                                     (5, 576, 96, True, "hswish", 1)):
        h = _conv_bn(g, rng, y, cin, exp, 1, act=act) if exp != cin else y
        h = _conv_bn(g, rng, h, exp, exp, k, s, groups=exp, act=act)
        if se:
            squeeze = ops.reduce_mean(h, g.const(np.array([2, 3], np.int64)), True)
            squeeze = _conv_bn(g, rng, squeeze, exp, _round8(exp // 4), 1, act="relu")
            squeeze = ops.hsigmoid(_conv_bn(g, rng, squeeze, _round8(exp // 4), exp, 1))
            h = ops.multiply(h, squeeze)
        h = _conv_bn(g, rng, h, exp, cout, 1)
        y = ops.add(h, y) if s == 1 and cin == cout else h
        cin = cout
    y = _conv_bn(g, rng, y, cin, 576, 1, act="hswish")
    y = ops.reduce_mean(y, g.const(np.array([2, 3], np.int64)), False)
    y = ops.hswish(dense(g, rng, y, 576, 1024))
    return [dense(g, rng, y, 1024, 1000)], {"image": rng.standard_normal((1, 3, 224, 224), dtype=np.float32)}


def efficientnet_b0(g, rng):
    """EfficientNet-B0 at 1x3x224x224: 16 inverted residuals (depthwise 3x3 / 5x5, squeeze-excite
    with Swish and Sigmoid, expansion 6), Swish throughout; 1000 classes."""
    ops = g.ops
    x = g.input("image", (1, 3, 224, 224))
    y = _conv_bn(g, rng, x, 3, 32, 3, 2, act="swish")
    cin = 32
    # expansion, out, kernel, stride, repeats
    for exp, cout, k, stride, repeats in ((1, 16, 3, 1, 1), (6, 24, 3, 2, 2), (6, 40, 5, 2, 2), (6, 80, 3, 2, 3),
                                          (6, 112, 5, 1, 3), (6, 192, 5, 2, 4), (6, 320, 3, 1, 1)):
        for i in range(repeats):
            s, mid = stride if i == 0 else 1, cin * exp
            h = _conv_bn(g, rng, y, cin, mid, 1, act="swish") if exp != 1 else y
            h = _conv_bn(g, rng, h, mid, mid, k, s, groups=mid, act="swish")
            squeeze = ops.reduce_mean(h, g.const(np.array([2, 3], np.int64)), True)
            squeeze = _conv_bn(g, rng, squeeze, mid, max(1, cin // 4), 1, act="swish")
            h = ops.multiply(h, ops.sigmoid(_conv_bn(g, rng, squeeze, max(1, cin // 4), mid, 1)))
            h = _conv_bn(g, rng, h, mid, cout, 1)
            y = ops.add(h, y) if s == 1 and cin == cout else h
            cin = cout
    y = _conv_bn(g, rng, y, cin, 1280, 1, act="swish")
    y = ops.reduce_mean(y, g.const(np.array([2, 3], np.int64)), False)
    return [dense(g, rng, y, 1280, 1000)], {"image": rng.standard_normal((1, 3, 224, 224), dtype=np.float32)}


def yolo_n(g, rng, size=320, outputs=255):
    """A YOLOv5n-style detector at 1x3x320x320: a 6x6 / 2 stem, strided 3x3 convolutions, C3 blocks
    (two 1x1 branches, bottlenecks with residuals, concatenated), SPPF (three chained 5x5 max pools
    at stride 1), a top-down path with nearest upsampling and concatenation, three 1x1 heads;
    Swish throughout."""
    ops = g.ops
    x = g.input("image", (1, 3, size, size))

    def cbs(h, cin, cout, k=1, s=1, pad=None):
        return _conv_bn(g, rng, h, cin, cout, k, s, act="swish", pad=pad)

    def c3(h, cin, cout, n=1, shortcut=True):
        a, b = cbs(h, cin, cout // 2), cbs(h, cin, cout // 2)
        for _ in range(n):
            t = cbs(cbs(a, cout // 2, cout // 2), cout // 2, cout // 2, 3)
            a = ops.add(a, t) if shortcut else t
        return cbs(g.concat([a, b], 1), cout, cout)

    y = c3(cbs(cbs(x, 3, 16, 6, 2, pad=2), 16, 32, 3, 2), 32, 32)                      # 32 x 80 x 80
    p3 = c3(cbs(y, 32, 64, 3, 2), 64, 64, 2)                                             # 64 x 40 x 40
    p4 = c3(cbs(p3, 64, 128, 3, 2), 128, 128, 3)                                         # 128 x 20 x 20
    y = c3(cbs(p4, 128, 256, 3, 2), 256, 256)                                            # 256 x 10 x 10
    pooled = [cbs(y, 256, 128)]
    for _ in range(3):
        pooled.append(g.max_pool(pooled[-1], 5, 1, 2))
    p5 = cbs(g.concat(pooled, 1), 512, 256)
    top = cbs(p5, 256, 128)
    p4 = c3(g.concat([g.upsample2x(top), p4], 1), 256, 128, shortcut=False)
    top = cbs(p4, 128, 64)
    p3 = c3(g.concat([g.upsample2x(top), p3], 1), 128, 64, shortcut=False)
    heads = [_conv_bn(g, rng, p, c, outputs, 1) for p, c in ((p3, 64), (p4, 128), (p5, 256))]
    return heads, {"image": rng.standard_normal((1, 3, size, size), dtype=np.float32)}


def _round8(c):
    return max(8, (c + 4) // 8 * 8)


def crnn(g, rng, classes=97, hidden=128):
    """A CRNN text recogniser at 1x3x32x256: a VGG-style backbone with grouped 3x3 convolutions,
    height pooled away, then a bidirectional LSTM over the 64 columns and a per-column classifier."""
    ops = g.ops
    x = g.input("image", (1, 3, 32, 256))
    y = g.max_pool(_conv_bn(g, rng, x, 3, 64, 3, act="relu"), 2, 2, 0)                    # 64 x 16 x 128
    y = g.max_pool(_conv_bn(g, rng, y, 64, 128, 3, groups=4, act="relu"), 2, 2, 0)        # 128 x 8 x 64
    y = _conv_bn(g, rng, y, 128, 256, 3, groups=8, act="relu")
    y = _conv_bn(g, rng, y, 256, 256, 1, act="relu")
    y = ops.max_pool(y, [2, 1], [1, 1], [0, 0], [0, 0], [2, 1]).output(0)                # 256 x 4 x 64
    y = _conv_bn(g, rng, y, 256, 256, 3, groups=16, act="relu")
    y = ops.reduce_max(y, g.const(np.array([2], np.int64)), False)                       # 1 x 256 x 64
    seq = g.transpose(y, (0, 2, 1))                                                      # 1 x 64 x 256
    scale = np.float32(1 / math.sqrt(hidden))
    w = rng.standard_normal((2, 4 * hidden, 256), dtype=np.float32) * scale
    r = rng.standard_normal((2, 4 * hidden, hidden), dtype=np.float32) * scale
    b = rng.standard_normal((2, 4 * hidden), dtype=np.float32) * np.float32(0.1)
    zeros = g.const(np.zeros((1, 2, hidden), np.float32))
    lstm = ops.lstm_sequence(seq, zeros, zeros, g.const(np.array([64], np.int32)), g.const(w), g.const(r),
                             g.const(b), hidden, "bidirectional")
    out = g.reshape(g.transpose(lstm.output(0), (0, 2, 1, 3)), (1, 64, 2 * hidden))      # 1 x 64 x 256
    return [g.softmax(dense(g, rng, out, 2 * hidden, classes), -1)], \
        {"image": rng.standard_normal((1, 3, 32, 256), dtype=np.float32)}


def audio_1d(g, rng, samples=16000, classes=12):
    """A 1-D audio classifier on one second at 16 kHz: a learned filterbank first (one input
    channel, 64 filters of 512 taps, stride 4: 90% of the work, as in pitch trackers and keyword
    spotters), then strided 1-D convolutions, global pooling, a classifier."""
    ops = g.ops
    x = g.input("audio", (1, 1, samples))

    def conv1d(y, cin, cout, k, stride, pad):
        w = rng.standard_normal((cout, cin, k), dtype=np.float32) * np.float32(math.sqrt(2.0 / (cin * k)))
        b = rng.standard_normal(cout, dtype=np.float32) * np.float32(0.1)
        z = ops.convolution(y, g.const(w), [stride], [pad], [pad], [1])
        return ops.relu(ops.add(z, g.const(b.reshape(1, -1, 1))))

    y = conv1d(x, 1, 64, 512, 4, 0)                                                        # 64 x 3873
    y = ops.max_pool(y, [2], [1], [0], [0], [2]).output(0)
    for cin, cout in ((64, 128), (128, 128), (128, 256), (256, 256)):
        y = conv1d(y, cin, cout, 3, 2, 1)
    y = ops.reduce_mean(y, g.const(np.array([2], np.int64)), False)
    return [dense(g, rng, y, 256, classes)], {"audio": rng.standard_normal((1, 1, samples), dtype=np.float32)}


def vit(g, rng, image=224, patch=16, hidden=192, layers=6, heads=3, classes=1000):
    """A ViT-Tiny-style image classifier (6 of its 12 blocks): 16x16 patches by a strided
    convolution, a class token, pre-norm transformer blocks with Gelu MLPs."""
    ops = g.ops
    x = g.input("image", (1, 3, image, image))
    tokens = (image // patch) ** 2
    w = rng.standard_normal((hidden, 3, patch, patch), dtype=np.float32) * np.float32(math.sqrt(1 / (3 * patch * patch)))
    y = g.conv(x, w, np.zeros(hidden, np.float32), patch, 0)
    y = g.transpose(g.reshape(y, (1, hidden, tokens)), (0, 2, 1))
    cls = g.const(rng.standard_normal((1, 1, hidden), dtype=np.float32) * np.float32(0.02))
    y = g.add(g.concat([cls, y], 1), g.const(rng.standard_normal((1, tokens + 1, hidden), dtype=np.float32)
                                            * np.float32(0.02)))
    ones, zeros, head, n = np.ones(hidden, np.float32), np.zeros(hidden, np.float32), hidden // heads, tokens + 1

    def split_heads(t):
        return g.transpose(g.reshape(t, (1, n, heads, head)), (0, 2, 1, 3))

    for _ in range(layers):
        h = g.layer_norm(y, ones, zeros, 1e-6)
        q, k, v = (split_heads(dense(g, rng, h, hidden, hidden)) for _ in range(3))
        scores = g.mul(g.matmul(q, k, transpose_b=True), g.const(np.float32(1 / math.sqrt(head))))
        context = g.reshape(g.transpose(g.matmul(g.softmax(scores, -1), v), (0, 2, 1, 3)), (1, n, hidden))
        y = g.add(y, dense(g, rng, context, hidden, hidden))
        h = g.layer_norm(y, ones, zeros, 1e-6)
        y = g.add(y, dense(g, rng, g.gelu(dense(g, rng, h, hidden, 4 * hidden)), 4 * hidden, hidden))
    y = g.layer_norm(y, ones, zeros, 1e-6)
    first = ops.gather(y, g.const(np.array([0], np.int64)), g.const(np.int64(1)))
    return [dense(g, rng, g.reshape(first, (1, hidden)), hidden, classes)], \
        {"image": rng.standard_normal((1, 3, image, image), dtype=np.float32)}


def _int4_weight(g, rng, rows, cols, group=32):
    """A [rows, cols] f32 weight as NNCF compresses it to int4 (asymmetric, groups of `group`
    along the input axis): u4 Const -> Convert f16 -> Subtract zero point -> Multiply scale
    -> Reshape -> Convert f32."""
    ov, ops = g.ov, g.ops
    shape = [rows, cols // group, group]
    codes = rng.integers(0, 16, shape, dtype=np.uint8)
    zero = rng.integers(6, 10, [rows, cols // group, 1], dtype=np.uint8)
    scale = (rng.random([rows, cols // group, 1], dtype=np.float32) * np.float32(0.02 / math.sqrt(cols) * 8)
             + np.float32(1e-3)).astype(np.float16)
    weight = ov.op.Constant(ov.Type.u4, ov.Shape(shape), codes.reshape(-1).tolist())
    zero_point = ov.op.Constant(ov.Type.u4, ov.Shape(list(zero.shape)), zero.reshape(-1).tolist())
    w = ops.subtract(ops.convert(weight, ov.Type.f16), ops.convert(zero_point, ov.Type.f16))
    w = ops.multiply(w, ops.constant(scale))
    return ops.convert(ops.reshape(w, g.const(np.array([rows, cols], np.int64)), False), ov.Type.f32)


def _int8_table(g, rng, rows, cols):
    """A [rows, cols] f32 embedding table as NNCF compresses it to int8 (asymmetric, per row; its
    int4 modes leave embeddings in int8): u8 Const -> Convert f16 -> Subtract zero point ->
    Multiply scale -> Convert f32."""
    ov, ops = g.ov, g.ops
    codes = rng.integers(0, 256, [rows, cols], dtype=np.uint8)
    zero = rng.integers(120, 136, [rows, 1], dtype=np.uint8)
    scale = (rng.random([rows, 1], dtype=np.float32) * np.float32(2e-4) + np.float32(1e-4)).astype(np.float16)
    w = ops.subtract(ops.convert(ops.constant(codes), ov.Type.f16), ops.convert(ops.constant(zero), ov.Type.f16))
    return ops.convert(ops.multiply(w, ops.constant(scale)), ov.Type.f32)


def decoder_step(g, rng, hidden=256, layers=4, heads=4, vocab=4096, window=128, int8_embeddings=False):
    """One decoding step of a GPT-style LLM with int4-compressed weights (as NNCF writes them) and
    a stateful KV cache (ReadValue / Assign per layer, as optimum-intel exports): the new token's
    key and value are appended and the last `window` kept (sliding-window attention, so that every
    timed call sees a cache of the same length)."""
    ov, ops = g.ov, g.ops
    from openvino.op.util import Variable, VariableInfo
    ids = g.input("input_ids", (1, 1), np.int64)
    head = hidden // heads
    if int8_embeddings:
        y = ops.gather(_int8_table(g, rng, vocab, hidden), ids, g.const(np.int64(0)))
    else:
        y = g.gather(rng.standard_normal((vocab, hidden), dtype=np.float32) * np.float32(0.02), ids)   # 1 x 1 x H
    ones, zeros = np.ones(hidden, np.float32), np.zeros(hidden, np.float32)
    sinks = []

    def linear(t, cin, cout):
        return g.matmul(t, _int4_weight(g, rng, cout, cin), transpose_b=True)

    def cache(name, new):
        info = VariableInfo()
        info.data_shape = ov.PartialShape([1, heads, window, head])
        info.data_type = ov.Type.f32
        info.variable_id = name
        var = Variable(info)
        past = ops.read_value(g.const(np.zeros((1, heads, window, head), np.float32)), var)
        grown = ops.concat([past, new], 2)
        kept = ops.slice(grown, g.const(np.array([1], np.int64)), g.const(np.array([window + 1], np.int64)),
                         g.const(np.array([1], np.int64)), g.const(np.array([2], np.int64)))
        sinks.append(ops.assign(kept, var))
        return kept

    for layer in range(layers):
        h = g.layer_norm(y, ones, zeros, 1e-5)
        q, k, v = (g.transpose(g.reshape(linear(h, hidden, hidden), (1, 1, heads, head)), (0, 2, 1, 3))
                   for _ in range(3))
        keys, values = cache(f"past_key_{layer}", k), cache(f"past_value_{layer}", v)
        scores = g.mul(g.matmul(q, keys, transpose_b=True), g.const(np.float32(1 / math.sqrt(head))))
        context = g.reshape(g.transpose(g.matmul(g.softmax(scores, -1), values), (0, 2, 1, 3)), (1, 1, hidden))
        y = g.add(y, linear(context, hidden, hidden))
        h = g.layer_norm(y, ones, zeros, 1e-5)
        y = g.add(y, linear(g.gelu(linear(h, hidden, 4 * hidden)), 4 * hidden, hidden))
    logits = linear(g.layer_norm(y, ones, zeros, 1e-5), hidden, vocab)
    g.sinks = sinks
    return [logits], {"input_ids": np.array([[17]], np.int64)}


# name -> (builder, save the IR with f16-compressed weights)
NETWORKS = {
    "resnet18": (resnet18, False),
    "resnet18_f16": (resnet18, True),
    "bert_encoder": (bert_encoder, False),
    "detector": (detector, False),
    "many_small_layers": (many_small_layers, False),
    "mobilenet_v3": (mobilenet_v3, False),
    "efficientnet_b0": (efficientnet_b0, False),
    "yolo_n": (yolo_n, False),
    "crnn": (crnn, False),
    "audio_1d": (audio_1d, False),
    "transformer_seq17": (transformer_seq17, False),
    "decoder_step_int4": (decoder_step, False),
    "vit": (vit, False),
}
# Run on request (`run.py --networks decoder_step_int4_266m`), not in the default set: the decoding
# step at the size people run (hidden 2048, 4 layers of 32 heads, 32000 words: 266 M parameters,
# int4 and the embeddings int8 as NNCF compresses them, a 220 MB .bin built in about 8 s), for its
# load time and memory as much as its step.
ON_REQUEST = {
    "decoder_step_int4_266m": (partial(decoder_step, hidden=2048, layers=4, heads=32, vocab=32000,
                                       int8_embeddings=True), False),
}
# Real exports, each a run of its own: name -> (an IR of tests/models/exported, written by optimum-intel
# and NNCF with its prompt beside it, tokens generated a run).  A Llama of 64 wide and 2 layers with
# int4 weights (groups of 32), stateful, its shapes growing by a token a call: the decoding step the
# issue found 8-16x OpenVINO's time.
EXPORTED = Path(__file__).resolve().parent.parent / "tests" / "models" / "exported"
GENERATIONS = {"llm_generate_int4": ("llama.int4_asym_g32", 32)}

# Written against openvino's API directly (grouped convolutions, LSTM, state, int4): no ONNX twin.
IR_ONLY = {"mobilenet_v3", "efficientnet_b0", "yolo_n", "crnn", "audio_1d", "decoder_step_int4", "vit"}
# The small networks (the README's second geometric mean, with digits and the LLM's generation); the
# rest are the compute-heavy ones
SMALL = {"mobilenet_v3", "efficientnet_b0", "many_small_layers"}
QUICK = ["resnet18", "bert_encoder", "detector", "many_small_layers", "mobilenet_v3", "audio_1d", "digits"]


def own_model(parser, args) -> tuple[Path, Path] | None:
    """A script's --model and --inputs (an IR of one's own and an .npz of its inputs, in place of
    the networks): (model, inputs) once checked, None where neither is given; else a usage error."""
    if not args.model:
        if args.inputs:
            parser.error("--inputs goes with --model")
        return None
    if args.networks or not args.inputs:
        parser.error("--model takes --inputs (an .npz of its inputs) and no --networks")
    for path in (args.model, args.inputs):
        if not Path(path).is_file():
            parser.error(f"no such file: {path}")
    return Path(args.model), Path(args.inputs)


def chosen_networks(parser, text: str | None, default) -> list[str]:
    """The networks a script's --networks names (comma-separated), `default` where it names none;
    a name build_ir does not know is a usage error that lists those it does."""
    known = [*NETWORKS, *ON_REQUEST, "digits"]
    names = text.split(",") if text else list(default)
    unknown = [n for n in names if n not in known]
    if unknown:
        parser.error(f"unknown network(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return names


def build_ir(name: str, directory: Path) -> tuple[Path, dict[str, np.ndarray]]:
    """Write network `name` as IR in `directory`; returns the xml path and example inputs."""
    if name == "digits":
        image = np.load(DIGITS.parent / "digit7.npy")
        return DIGITS, {"image": image}
    if name in GENERATIONS:
        xml = EXPORTED / f"{GENERATIONS[name][0]}.xml"
        with np.load(xml.with_suffix(".npz")) as prompt:
            return xml, {k: prompt[k] for k in prompt.files}
    fn, compress = NETWORKS[name] if name in NETWORKS else ON_REQUEST[name]
    g = OpenVINOGraph(name)
    outputs, inputs = fn(g, np.random.default_rng(0))
    return g.save(outputs, directory / f"{name}.xml", compress), inputs


def build_onnx(name: str, directory: Path) -> Path | None:
    """The same network as an ONNX file (None for the digits sample, which exists only as IR)."""
    if name not in NETWORKS or name in IR_ONLY:
        return None
    fn, _ = NETWORKS[name]
    g = OnnxGraph(name)
    outputs, _ = fn(g, np.random.default_rng(0))
    return g.save(outputs, directory / f"{name}.onnx")
