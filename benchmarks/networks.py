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
        return self.ov.Model(results, self.parameters, self.name)

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


def bert_encoder(g, rng, seq=128, hidden=256, layers=4, heads=4, vocab=8000):
    """A BERT-style encoder: token + position embeddings, `layers` post-norm transformer blocks."""
    ids = g.input("input_ids", (1, seq), np.int64)
    head = hidden // heads
    emb = g.gather(rng.standard_normal((vocab, hidden), dtype=np.float32) * np.float32(0.02), ids)
    pos = g.const(rng.standard_normal((1, seq, hidden), dtype=np.float32) * np.float32(0.02))
    ones, zeros = np.ones(hidden, np.float32), np.zeros(hidden, np.float32)
    x = g.layer_norm(g.add(emb, pos), ones, zeros)

    def split_heads(t):
        return g.transpose(g.reshape(t, (1, seq, heads, head)), (0, 2, 1, 3))

    for _ in range(layers):
        q, k, v = (split_heads(dense(g, rng, x, hidden, hidden)) for _ in range(3))
        scores = g.mul(g.matmul(q, k, transpose_b=True), g.const(np.float32(1 / math.sqrt(head))))
        context = g.matmul(g.softmax(scores, -1), v)
        context = g.reshape(g.transpose(context, (0, 2, 1, 3)), (1, seq, hidden))
        x = g.layer_norm(g.add(x, dense(g, rng, context, hidden, hidden)), ones, zeros)
        ffn = dense(g, rng, g.gelu(dense(g, rng, x, hidden, 4 * hidden)), 4 * hidden, hidden)
        x = g.layer_norm(g.add(x, ffn), ones, zeros)
    return [x], {"input_ids": rng.integers(0, vocab, (1, seq), dtype=np.int64)}


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


# name -> (builder, save the IR with f16-compressed weights)
NETWORKS = {
    "resnet18": (resnet18, False),
    "resnet18_f16": (resnet18, True),
    "bert_encoder": (bert_encoder, False),
    "detector": (detector, False),
    "many_small_layers": (many_small_layers, False),
}
QUICK = ["resnet18", "bert_encoder", "detector", "many_small_layers", "digits"]


def build_ir(name: str, directory: Path) -> tuple[Path, dict[str, np.ndarray]]:
    """Write network `name` as IR in `directory`; returns the xml path and example inputs."""
    if name == "digits":
        image = np.load(DIGITS.parent / "digit7.npy")
        return DIGITS, {"image": image}
    fn, compress = NETWORKS[name]
    g = OpenVINOGraph(name)
    outputs, inputs = fn(g, np.random.default_rng(0))
    return g.save(outputs, directory / f"{name}.xml", compress), inputs


def build_onnx(name: str, directory: Path) -> Path | None:
    """The same network as an ONNX file (None for the digits sample, which exists only as IR)."""
    if name not in NETWORKS:
        return None
    fn, _ = NETWORKS[name]
    g = OnnxGraph(name)
    outputs, _ = fn(g, np.random.default_rng(0))
    return g.save(outputs, directory / f"{name}.onnx")
