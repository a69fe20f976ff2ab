"""Every attribute the specs mark required, missing from a layer, checked against OpenVINO.

The cases are generated from `specs/*.toml`: for each op version, a small model that writes every
attribute (mostly with values other than the defaults, so that a wrong default shows), and for each
required attribute a mutant without it.  Its declared port dims are rewritten as OpenVINO infers
them, so the missing attribute is the only defect.  Then either

- OpenVINO reads and runs the mutant: the spec records the default its reader used (writing that
  default explicitly gives OpenVINO's own outputs), `validate` warns W-ATTR-DEFAULTED naming the
  layer, the attribute and the default, and irrun runs the mutant to OpenVINO's outputs; or
- OpenVINO refuses it (or crashes, see KNOWN_CRASHES): irrun reports an error and refuses to load.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import openvino as ov
import pytest
from lxml import etree
from openvino.utils.node_factory import NodeFactory

from ovutil import CPU_F32, assert_close, compile_cpu

import irrun
from irrun.spec import _default, all_specs, format_value, resolve_version

CORE = ov.Core()
RNG = np.random.default_rng(20)


# ---------------------------------------------------------------- model pieces

class In:
    """A model input (a Parameter fed with `data`), or a Constant when `const`."""

    def __init__(self, data, const=False):
        self.data, self.const = np.asarray(data), const


def x(*shape, dtype=np.float32, low=-2.0, high=2.0):
    return In(RNG.uniform(low, high, shape).astype(dtype))


def w(*shape):
    """Weights: a Constant, as in every real model (the CPU plugin checks a recurrent layer's
    hidden_size only against constant weights)."""
    return In(RNG.uniform(-1, 1, shape).astype(np.float32), const=True)


def c(values, dtype=None):
    values = np.asarray(values) if dtype is None else np.asarray(values, dtype)
    return In(values, const=True)


def i64(*values):
    return c(np.array(values, np.int64))


def scalar(value, dtype=np.int64):
    return c(np.array(value, dtype))


def rois(n, size, batch=1, columns=5):
    """ROIs [batch_id, x1, y1, x2, y2] inside a `size` x `size` map (or without the batch column)."""
    x1, y1 = RNG.uniform(0, size / 2, (2, n))
    x2, y2 = x1 + RNG.uniform(1, size / 2, n), y1 + RNG.uniform(1, size / 2, n)
    boxes = np.stack([x1, y1, x2, y2], 1)
    if columns == 5:
        boxes = np.concatenate([RNG.integers(0, batch, (n, 1)), boxes], 1)
    return boxes.astype(np.float32)


class Case:
    """An op built by OpenVINO's NodeFactory from `inputs` and `attrs`."""

    def __init__(self, opset, inputs, attrs, type_name=None):
        self.opset, self.inputs, self.attrs, self.type_name = opset, inputs, attrs, type_name

    def model(self, type_name: str) -> tuple[ov.Model, list[np.ndarray]]:
        params, feeds, args = [], [], []
        for item in self.inputs:
            if item.const:
                node = ov.op.Constant(item.data) if item.data.size else \
                    ov.op.Constant(ov.Type(item.data.dtype), ov.Shape(list(item.data.shape)), [])
            else:
                node = ov.op.Parameter(ov.Type(item.data.dtype), ov.PartialShape(list(item.data.shape)))
                params.append(node)
                feeds.append(item.data)
            args.append(node.output(0))
        node = NodeFactory(self.opset).create(self.type_name or type_name, args, self.attrs)
        return ov.Model(node.outputs(), params), feeds


class Stateful:
    """x -> ReadValue(x) -> Add(x) -> Assign, for the state ops' variable attributes."""

    def __init__(self, version):
        self.version = version

    def model(self, type_name):
        import openvino.opset6 as ops6
        import openvino.opset3 as ops3
        p = ov.op.Parameter(ov.Type.f32, ov.PartialShape([2, 3]))
        if self.version == 3:
            read = ops3.read_value(p, "state")
            total = ops6.add(read, p)
            assign = ops3.assign(total, "state")
        else:
            read = ops6.read_value(p, "state", ov.Type.f32, [2, 3])
            total = ops6.add(read, p)
            assign = ops6.assign(total, "state")
        m = ov.Model([ops6.result(total)], [assign], [p])
        return m, [RNG.standard_normal((2, 3)).astype(np.float32)]


class Binary:
    """FakeQuantize to 2 levels -> BinaryConvolution (the only input the CPU plugin reads as bits) over 8
    channels (fewer give no consistent result there), with filter bytes that read the same in either bit
    order (the CPU plugin's is the reverse of OpenVINO's)."""

    def __init__(self, attrs):
        self.attrs = attrs

    def model(self, type_name):
        import openvino.opset1 as ops1
        p = ov.op.Parameter(ov.Type.f32, ov.PartialShape([1, 8, 6, 6]))
        f32 = lambda v: ops1.constant(np.float32(v))   # noqa: E731
        binary = ops1.fake_quantize(p, f32(0), f32(1), f32(-1), f32(1), 2)
        bits = np.resize([1, 0, 1, 1, 1, 1, 0, 1], 3 * 8 * 3 * 3).reshape(3, 8, 3, 3)
        filters = ov.op.Constant(ov.Type.u1, ov.Shape(list(bits.shape)), bits.ravel().tolist())
        node = NodeFactory("opset1").create("BinaryConvolution", [binary.output(0), filters.output(0)], self.attrs)
        return ov.Model(node.outputs(), [p]), [RNG.uniform(-1, 2, (1, 8, 6, 6)).astype(np.float32)]


def _conv(opset, type_name=None, **extra):
    attrs = dict(strides=[2, 1], pads_begin=[1, 0], pads_end=[0, 1], dilations=[1, 2], auto_pad="explicit", **extra)
    return lambda inputs: Case(opset, inputs, attrs, type_name)


POOL = dict(kernel=[3, 2], strides=[2, 1], pads_begin=[1, 1], pads_end=[1, 0], rounding_type="floor",
            auto_pad="explicit")
SEQ_ATTRS = dict(hidden_size=4, direction="reverse", activations_alpha=[], activations_beta=[], clip=0.0)
PROPOSAL = dict(base_size=8, pre_nms_topn=30, post_nms_topn=6, nms_thresh=0.6, feat_stride=4, min_size=0,
                ratio=[0.5, 2.0], scale=[1.0, 2.0], clip_before_nms=True, clip_after_nms=False, normalize=False,
                box_size_scale=1.0, box_coordinate_scale=1.0, framework="")
DETECTION = dict(background_label_id=0, top_k=-1, variance_encoded_in_target=False, keep_top_k=[6],
                 code_type="caffe.PriorBoxParameter.CORNER", share_location=True, nms_threshold=0.45,
                 confidence_threshold=0.01, clip_after_nms=False, clip_before_nms=False, decrease_label_id=False,
                 normalized=True, input_height=1, input_width=1, objectness_score=0.0)


def _detection(version):
    priors = 6
    boxes = RNG.uniform(0, 0.5, (1, priors, 2))
    prior_boxes = np.concatenate([boxes, boxes + RNG.uniform(0.1, 0.5, (1, priors, 2))], -1).reshape(1, 1, -1)
    priors_in = c(np.concatenate([prior_boxes, np.full_like(prior_boxes, 0.1)], 1).astype(np.float32))
    attrs = dict(DETECTION, **({"num_classes": 3} if version == 1 else {}))
    return Case(f"opset{version}", [x(1, priors * 4, low=-0.3, high=0.3),
                                    In(RNG.dirichlet(np.ones(3), priors).reshape(1, -1).astype(np.float32)),
                                    priors_in], attrs)


def _regions_and_deltas(n, classes):
    boxes = rois(n, 32, columns=4)
    return [c(boxes), x(n, classes * 4, low=-0.5, high=0.5), In(RNG.uniform(0, 1, (n, classes)).astype(np.float32)),
            c(np.array([[32, 32, 1.0]], np.float32))]


def _anchors(h, w, a, stride=4.0):
    cy, cx = np.meshgrid((np.arange(h) + 0.5) * stride, (np.arange(w) + 0.5) * stride, indexing="ij")
    half = RNG.uniform(1, 2 * stride, (a, 2))[None, None] / 2
    centre = np.stack([cx, cy], -1)[:, :, None, :]
    return np.concatenate([centre - half, centre + half], -1).astype(np.float32)


def _scores(*shape):
    """Distinct scores: NMS order never depends on ties."""
    return In((RNG.permutation(np.prod(shape)).reshape(shape) / np.prod(shape)).astype(np.float32))


# (type, version) -> the model that exercises it
CASES = {
    ("AvgPool", 1): Case("opset1", [x(1, 2, 6, 5)], {**POOL, "exclude-pad": False}),
    ("AvgPool", 14): Case("opset14", [x(1, 2, 6, 5)], {**POOL, "exclude-pad": False}),
    ("AvgPool", 16): Case("opset16", [x(1, 2, 6, 5)], {**POOL, "exclude-pad": False, "dilations": [1, 1]}),
    ("MaxPool", 1): Case("opset1", [x(1, 2, 6, 5)], POOL),
    ("MaxPool", 8): Case("opset8", [x(1, 2, 6, 5)], dict(POOL, dilations=[1, 1], index_element_type="i64", axis=0)),
    ("MaxPool", 14): Case("opset14", [x(1, 2, 6, 5)], dict(POOL, dilations=[1, 1], index_element_type="i64", axis=0)),
    ("BatchNormInference", 1): Case("opset1", [c(RNG.uniform(0.5, 2, 3).astype(np.float32)), c(np.float32([0.1, 0, -1])),
                                               x(2, 3, 4), c(np.float32([0, 1, -1])), c(np.float32([0.01, 0.5, 2]))],
                                    {"epsilon": 0.05}),
    ("BatchNormInference", 5): Case("opset5", [x(2, 3, 4), c(RNG.uniform(0.5, 2, 3).astype(np.float32)),
                                               c(np.float32([0.1, 0, -1])), c(np.float32([0, 1, -1])),
                                               c(np.float32([0.01, 0.5, 2]))], {"epsilon": 0.05}),
    ("Bucketize", 3): Case("opset3", [x(2, 5), c(np.float32([-1, 0, 1]))], dict(output_type="i32",
                                                                                 with_right_bound=False)),
    ("Clamp", 1): Case("opset1", [x(2, 5)], dict(min=-0.5, max=0.7)),
    ("Col2Im", 15): Case("opset15", [x(1, 12, 9), i64(4, 4), i64(2, 2)],
                         dict(strides=[1, 1], dilations=[1, 1], pads_begin=[0, 0], pads_end=[0, 0])),
    ("Concat", 1): Case("opset1", [x(2, 3), x(2, 3)], dict(axis=1)),
    ("Constant", 1): Case("opset1", [x(2, 3), c(RNG.standard_normal((2, 3)).astype(np.float32))], {}, "Add"),
    ("Parameter", 1): Case("opset1", [x(2, 3)], {}, "Relu"),
    ("Convert", 1): Case("opset1", [x(2, 3, low=-9, high=9)], dict(destination_type="i32")),
    ("Convolution", 1): _conv("opset1")([x(1, 2, 7, 7), c(RNG.standard_normal((3, 2, 3, 3)).astype(np.float32))]),
    ("GroupConvolution", 1): _conv("opset1")([x(1, 4, 7, 7),
                                             c(RNG.standard_normal((2, 2, 2, 3, 3)).astype(np.float32))]),
    ("ConvolutionBackpropData", 1): _conv("opset1", output_padding=[0, 0])(
        [x(1, 2, 4, 4), c(RNG.standard_normal((2, 3, 3, 3)).astype(np.float32))]),
    ("GroupConvolutionBackpropData", 1): _conv("opset1", output_padding=[0, 0])(
        [x(1, 4, 4, 4), c(RNG.standard_normal((2, 2, 3, 3, 3)).astype(np.float32))]),
    ("BinaryConvolution", 1): Binary(dict(strides=[2, 1], pads_begin=[1, 0], pads_end=[0, 1], dilations=[1, 1],
                                          mode="xnor-popcount", pad_value=1.0, auto_pad="explicit")),
    ("DeformableConvolution", 1): Case("opset1", [x(1, 2, 5, 5), x(1, 18, 2, 3, low=-0.5, high=0.5),
                                                  c(RNG.standard_normal((3, 2, 3, 3)).astype(np.float32))],
                                       dict(strides=[2, 1], pads_begin=[0, 0], pads_end=[0, 0], dilations=[1, 1],
                                            auto_pad="explicit", group=1, deformable_group=1)),
    ("DeformableConvolution", 8): Case("opset8", [x(1, 2, 5, 5), x(1, 18, 2, 3, low=-0.5, high=0.5),
                                                  c(RNG.standard_normal((3, 2, 3, 3)).astype(np.float32))],
                                       dict(strides=[2, 1], pads_begin=[0, 0], pads_end=[0, 0], dilations=[1, 1],
                                            auto_pad="explicit", group=1, deformable_group=1,
                                            bilinear_interpolation_pad=False)),
    ("DeformablePSROIPooling", 1): Case("opset1", [x(1, 8, 6, 6), c(rois(3, 6))],
                                        dict(output_dim=2, spatial_scale=0.75, group_size=2, mode="bilinear_deformable",
                                             spatial_bins_x=2, spatial_bins_y=2, trans_std=0.1, part_size=2)),
    ("DepthToSpace", 1): Case("opset1", [x(1, 8, 2, 3)], dict(block_size=2, mode="depth_first")),
    ("SpaceToDepth", 1): Case("opset1", [x(1, 2, 4, 6)], dict(block_size=2, mode="depth_first")),
    ("DetectionOutput", 1): _detection(1),
    ("DetectionOutput", 8): _detection(8),
    ("Einsum", 7): Case("opset7", [x(2, 3), x(3, 4)], dict(equation="ij,jk->ik")),
    ("Elu", 1): Case("opset1", [x(2, 5)], dict(alpha=0.5)),
    ("ExperimentalDetectronDetectionOutput", 6): Case(
        "opset6", _regions_and_deltas(8, 3),
        dict(score_threshold=0.05, nms_threshold=0.5, max_delta_log_wh=2.0, num_classes=3, post_nms_count=4,
             max_detections_per_image=5, class_agnostic_box_regression=False, deltas_weights=[10.0, 10.0, 5.0, 5.0])),
    ("ExperimentalDetectronGenerateProposalsSingleImage", 6): Case(
        "opset6", [c(np.float32([24, 32, 1.0])), c(_anchors(3, 4, 2).reshape(-1, 4)),
                   x(8, 3, 4, low=-0.3, high=0.3), _scores(2, 3, 4)],
        dict(min_size=1.0, nms_threshold=0.6, pre_nms_count=16, post_nms_count=6)),
    ("ExperimentalDetectronROIFeatureExtractor", 6): Case(
        "opset6", [c(rois(4, 16, columns=4)), x(1, 2, 8, 8), x(1, 2, 4, 4)],
        dict(output_size=2, sampling_ratio=2, pyramid_scales=[2, 4], aligned=False)),
    ("ExtractImagePatches", 3): Case("opset3", [x(1, 1, 6, 6)], dict(sizes=[2, 2], strides=[2, 3], rates=[1, 1],
                                                                      auto_pad="valid")),
    ("Eye", 9): Case("opset9", [i64(3), i64(4), i64(1)], dict(output_type="f32")),
    ("FakeConvert", 13): Case("opset13", [x(2, 5), c(np.float32([1.0]))], dict(destination_type="f8e5m2")),
    ("FakeQuantize", 1): Case("opset1", [x(2, 5), c(np.float32(-1)), c(np.float32(1)), c(np.float32(-2)),
                                         c(np.float32(2))], dict(levels=5, auto_broadcast="numpy")),
    ("GRN", 1): Case("opset1", [x(2, 3, 4)], dict(bias=0.5)),
    ("GatherElements", 6): Case("opset6", [x(3, 4), c(RNG.integers(0, 3, (3, 4)))], dict(axis=1)),
    ("GRUCell", 3): Case("opset3", [x(2, 3), x(2, 4), w(12, 3), w(12, 4), w(12)],
                         dict(hidden_size=4, activations=["sigmoid", "tanh"], activations_alpha=[], activations_beta=[],
                              clip=0.0, linear_before_reset=False)),
    ("GRUSequence", 5): Case("opset5", [x(2, 5, 3), x(2, 1, 4), c(np.int32([5, 3])), w(1, 12, 3), w(1, 12, 4),
                                        w(1, 12)],
                             dict(SEQ_ATTRS, activations=["sigmoid", "tanh"], linear_before_reset=False)),
    ("LSTMCell", 1): Case("opset1", [x(2, 3), x(2, 4), x(2, 4), w(16, 3), w(16, 4), w(16)],
                          dict(hidden_size=4, activations=["sigmoid", "tanh", "tanh"], activations_alpha=[],
                               activations_beta=[], clip=0.0, input_forget=False)),
    ("LSTMCell", 4): Case("opset4", [x(2, 3), x(2, 4), x(2, 4), w(16, 3), w(16, 4), w(16)],
                          dict(hidden_size=4, activations=["sigmoid", "tanh", "tanh"], activations_alpha=[],
                               activations_beta=[], clip=0.0)),
    ("LSTMSequence", 5): Case("opset5", [x(2, 5, 3), x(2, 1, 4), x(2, 1, 4), c(np.int32([5, 3])), w(1, 16, 3),
                                         w(1, 16, 4), w(1, 16)],
                              dict(SEQ_ATTRS, activations=["sigmoid", "tanh", "tanh"])),
    ("RNNCell", 1): Case("opset3", [x(2, 3), x(2, 4), w(4, 3), w(4, 4), w(4)],
                         dict(hidden_size=4, activations=["tanh"], activations_alpha=[], activations_beta=[], clip=0.0)),
    ("RNNSequence", 5): Case("opset5", [x(2, 5, 3), x(2, 1, 4), c(np.int32([5, 3])), w(1, 4, 3), w(1, 4, 4), w(1, 4)],
                             dict(SEQ_ATTRS, activations=["tanh"])),
    ("GenerateProposals", 9): Case(
        "opset9", [c(np.float32([[24, 32, 1.0]])), c(_anchors(3, 4, 2)), x(1, 8, 3, 4, low=-0.3, high=0.3),
                   _scores(1, 2, 3, 4)],
        dict(min_size=1.0, nms_threshold=0.6, pre_nms_count=16, post_nms_count=6, normalized=False, nms_eta=1.0,
             roi_num_type="i32")),
    ("GroupNormalization", 12): Case("opset12", [x(2, 4, 3), x(4), x(4)], dict(num_groups=2, epsilon=0.5)),
    ("STFT", 15): Case("opset15", [x(2, 24), c(np.hanning(8).astype(np.float32)), scalar(8), scalar(4)],
                       dict(transpose_frames=True)),
    ("ISTFT", 16): Case("opset16", [x(4, 5, 2), c(np.hanning(6).astype(np.float32)), scalar(6), scalar(3)],
                        dict(center=True, normalized=True)),
    ("Interpolate", 1): Case("opset1", [x(1, 1, 4, 4), i64(6, 5)],
                             dict(axes=[2, 3], mode="linear", align_corners=False, antialias=False, pads_begin=[0],
                                  pads_end=[0])),
    ("Interpolate", 4): Case("opset4", [x(1, 1, 4, 4), c(np.int32([6, 5])), c(np.float32([1.5, 1.25])), i64(2, 3)],
                             dict(mode="linear_onnx", shape_calculation_mode="scales",
                                  coordinate_transformation_mode="asymmetric", nearest_mode="floor", antialias=False,
                                  pads_begin=[0], pads_end=[0], cube_coeff=-0.75)),
    ("Interpolate", 11): Case("opset11", [x(1, 1, 4, 4), c(np.float32([1.5, 1.25])), i64(2, 3)],
                              dict(mode="linear_onnx", shape_calculation_mode="scales",
                                   coordinate_transformation_mode="asymmetric", nearest_mode="floor", antialias=False,
                                   pads_begin=[0], pads_end=[0], cube_coeff=-0.75)),
    ("LRN", 1): Case("opset1", [x(1, 4, 3, 3), i64(1)], dict(alpha=0.5, beta=0.75, bias=2.0, size=3)),
    ("MVN", 2): Case("opset2", [x(2, 3, 4)], dict(eps=0.5, across_channels=True, normalize_variance=True,
                                                 reduction_axes=[])),
    ("MVN", 6): Case("opset6", [x(2, 3, 4), i64(1, 2)], dict(eps=0.5, normalize_variance=True,
                                                             eps_mode="outside_sqrt")),
    ("Multinomial", 13): Case("opset13", [In(RNG.uniform(0.1, 1, (2, 4)).astype(np.float32)), i64(3)],
                              dict(convert_type="i32", with_replacement=True, log_probs=True, global_seed=1, op_seed=2)),
    ("NormalizeL2", 1): Case("opset1", [x(2, 3, 4, low=-0.3, high=0.3), i64(1)], dict(eps=0.5, eps_mode="max")),
    ("OneHot", 1): Case("opset1", [c(np.int64([0, 2, 1, 5])), scalar(3), c(np.float32(1)), c(np.float32(-1))],
                        dict(axis=-1)),
    ("OneHot", 16): Case("opset16", [c(np.int64([0, 2, -1, 5])), scalar(3), c(np.float32(1)), c(np.float32(-1))],
                         dict(axis=-1, negative_indices_mode="normalize")),
    ("PSROIPooling", 1): Case("opset1", [x(1, 8, 6, 6), c(rois(3, 6))],
                              dict(output_dim=2, group_size=2, spatial_scale=0.75, mode="average", spatial_bins_x=1,
                                   spatial_bins_y=1)),
    ("Pad", 1): Case("opset1", [x(3, 4), i64(1, 0), i64(0, 2)], dict(pad_mode="reflect")),
    ("Pad", 12): Case("opset12", [x(3, 4), i64(1, -1), i64(0, 2)], dict(pad_mode="symmetric")),
    ("PriorBox", 1): Case("opset1", [i64(3, 4), i64(24, 32)],
                          dict(min_size=[4.0], max_size=[9.0], aspect_ratio=[2.0], density=[], fixed_ratio=[],
                               fixed_size=[], clip=False, flip=True, step=8.0, offset=0.25, variance=[0.1],
                               scale_all_sizes=True)),
    ("PriorBox", 8): Case("opset8", [i64(3, 4), i64(24, 32)],
                          dict(min_size=[4.0], max_size=[9.0], aspect_ratio=[2.0], density=[], fixed_ratio=[],
                               fixed_size=[], clip=False, flip=True, step=8.0, offset=0.25, variance=[0.1],
                               scale_all_sizes=True, min_max_aspect_ratios_order=False)),
    ("PriorBoxClustered", 1): Case("opset1", [i64(3, 4), i64(24, 32)],
                                   dict(width=[2.0, 5.0], height=[3.0, 1.5], clip=False, step=8.0, step_w=0.0,
                                        step_h=0.0, offset=0.25, variance=[0.1])),
    ("Proposal", 1): Case("opset1", [_scores(1, 8, 4, 5), x(1, 16, 4, 5, low=-0.2, high=0.2), c(np.float32([16, 20, 1]))],
                          PROPOSAL),
    ("Proposal", 4): Case("opset4", [_scores(1, 8, 4, 5), x(1, 16, 4, 5, low=-0.2, high=0.2), c(np.float32([16, 20, 1]))],
                          PROPOSAL),
    ("ROIAlign", 3): Case("opset3", [x(2, 2, 6, 6), c(rois(3, 6, columns=4)), c(np.int32([0, 1, 1]))],
                          dict(pooled_h=2, pooled_w=3, sampling_ratio=2, spatial_scale=0.75, mode="max")),
    ("ROIAlign", 9): Case("opset9", [x(2, 2, 6, 6), c(rois(3, 6, columns=4)), c(np.int32([0, 1, 1]))],
                          dict(pooled_h=2, pooled_w=3, sampling_ratio=2, spatial_scale=0.75, mode="max",
                               aligned_mode="half_pixel")),
    ("ROIAlignRotated", 15): Case("opset15", [x(2, 2, 6, 6), c(np.float32([[3, 3, 2, 3, 0.3], [2, 4, 3, 2, -0.5]])),
                                              c(np.int32([0, 1]))],
                                  dict(pooled_h=2, pooled_w=3, sampling_ratio=2, spatial_scale=0.75,
                                       clockwise_mode=True)),
    ("ROIPooling", 2): Case("opset2", [x(1, 2, 6, 6), c(rois(3, 6))],
                            dict(output_size=[2, 3], spatial_scale=0.75, method="max")),
    ("RandomUniform", 8): Case("opset8", [i64(2, 3), c(np.float32(-1)), c(np.float32(2))],
                               dict(output_type="f32", global_seed=5, op_seed=7, alignment="tensorflow")),
    ("Range", 4): Case("opset4", [In(np.int64(1)), scalar(9), scalar(2)], dict(output_type="i32")),
    ("ReadValue", 3): Stateful(3),
    ("ReadValue", 6): Stateful(6),
    ("Assign", 3): Stateful(3),
    ("Assign", 6): Stateful(6),
    ("RegionYolo", 1): Case("opset1", [x(1, 16, 3, 3)], dict(coords=4, classes=3, num=2, do_softmax=False,
                                                             mask=[0, 1], axis=1, end_axis=3, anchors=[])),
    ("ReorgYolo", 2): Case("opset2", [x(1, 4, 4, 4)], dict(stride=[2])),
    ("Reshape", 1): Case("opset1", [x(2, 3, 4), i64(0, -1)], dict(special_zero=True)),
    ("Reverse", 1): Case("opset1", [x(2, 3), c(np.array([False, True]))], dict(mode="mask")),
    ("SegmentMax", 16): Case("opset16", [x(5, 2), i64(0, 0, 2, 2, 3)], dict(fill_mode="lowest")),
    ("ShapeOf", 3): Case("opset3", [x(2, 3)], dict(output_type="i32")),
    ("Split", 1): Case("opset1", [x(4, 3), scalar(0)], dict(num_splits=2)),
    ("StridedSlice", 1): Case("opset1", [x(4, 5), i64(1, 1), i64(3, 0), i64(1, 1)],
                              dict(begin_mask=[0, 1], end_mask=[0, 1], new_axis_mask=[], shrink_axis_mask=[],
                                   ellipsis_mask=[])),
    ("TopK", 1): Case("opset1", [x(3, 5), scalar(2)], dict(axis=1, mode="min", sort="index", index_element_type="i32")),
    ("TopK", 3): Case("opset3", [x(3, 5), scalar(2)], dict(axis=1, mode="min", sort="index", index_element_type="i32")),
    ("TopK", 11): Case("opset11", [x(3, 5), scalar(2)], dict(axis=1, mode="min", sort="index", index_element_type="i32",
                                                           stable=True)),
}

# OpenVINO 2026.4.1 dies (SIGSEGV, or SIGFPE for a 0 divisor) reading or compiling a layer without these:
# irrun refuses the layer instead.  Run in a child process so that the test survives it.
KNOWN_CRASHES = {("Col2Im", 15, a) for a in ("strides", "dilations", "pads_begin", "pads_end")} | {
    ("Assign", 6, "variable_id"), ("ReadValue", 6, "variable_id"), ("DetectionOutput", 1, "keep_top_k"), ("DetectionOutput", 8, "keep_top_k"),
    ("ExperimentalDetectronDetectionOutput", 6, "deltas_weights"),
    ("ExperimentalDetectronGenerateProposalsSingleImage", 6, "post_nms_count"),
    ("ExperimentalDetectronROIFeatureExtractor", 6, "output_size"),
    ("ExperimentalDetectronROIFeatureExtractor", 6, "pyramid_scales"),
    ("Proposal", 1, "post_nms_topn"), ("Proposal", 4, "post_nms_topn"),
}


def _required() -> list[tuple[str, int, str]]:
    specs = all_specs()
    return [(t, v, name) for (t, v) in specs for name, a in specs[(t, v)].attributes.items() if a.required]


REQUIRED = _required()


def test_every_op_with_a_required_attribute_has_a_case():
    missing = sorted({(t, v) for t, v, _ in REQUIRED} - set(CASES))
    assert not missing, f"add a model to CASES for {missing}"


# ---------------------------------------------------------------- the mutants

def _layer(root, type_name: str, version: int):
    for layer in root.iter("layer"):
        try:
            if resolve_version(layer.get("type"), layer.get("version")) == (type_name, version):
                return layer
        except Exception:  # noqa: BLE001 - other layers
            continue
    raise AssertionError(f"no {type_name}-{version} layer in the model")


def _sync_declared_dims(xml: Path) -> None:
    """Rewrite every declared port dim as OpenVINO's reader infers it."""
    m = CORE.read_model(str(xml))
    ops = {op.get_friendly_name(): op for op in m.get_ordered_ops()}
    tree = etree.parse(str(xml))
    root = tree.getroot()
    layers = {l.get("id"): l for l in root.find("layers")}
    produced = {}
    for lid, layer in layers.items():
        op = ops.get(layer.get("name"))
        if op is None or layer.find("output") is None:
            continue
        for i, port in enumerate(layer.find("output").findall("port")[:op.get_output_size()]):
            shape = op.output(i).get_partial_shape()
            if shape.rank.is_dynamic:
                continue
            dims = [str(d.get_length()) if d.is_static else "-1" for d in shape]
            _set_dims(port, dims)
            produced[(lid, port.get("id"))] = dims
    for edge in root.find("edges"):
        dims = produced.get((edge.get("from-layer"), edge.get("from-port")))
        layer = layers.get(edge.get("to-layer"))
        if dims is not None and layer is not None:
            port = next(p for p in layer.find("input").findall("port") if p.get("id") == edge.get("to-port"))
            _set_dims(port, dims)
    tree.write(str(xml))


def _set_dims(port, dims) -> None:
    for d in port.findall("dim"):
        port.remove(d)
    for d in dims:
        etree.SubElement(port, "dim").text = d


def _write(folder: Path, tree, bin_path: Path) -> Path:
    folder.mkdir()
    xml = folder / "model.xml"
    tree.write(str(xml))
    if bin_path.exists():
        shutil.copy(bin_path, folder / "model.bin")
    return xml


def _defined(type_name: str, version: int, outputs: list[np.ndarray]) -> list[np.ndarray]:
    """The part of the outputs OpenVINO defines: Proposal-4's scores past the last ROI (one batch
    item here) are uninitialized memory in the CPU plugin."""
    if (type_name, version) == ("Proposal", 4):
        rois, probs = outputs
        end = next((i for i, row in enumerate(rois) if row[0] == -1), len(rois))
        return [rois[:end], probs[:end]]
    return outputs


def _run_openvino(xml: Path, feeds) -> list[np.ndarray]:
    compiled = compile_cpu(xml)
    request = compiled.create_infer_request()
    result = request.infer(feeds)
    return [np.asarray(result[o]) for o in compiled.outputs]


def _openvino_outcome(xml: Path, feeds, crashes: bool) -> list[np.ndarray] | str:
    """OpenVINO's outputs for the mutant, or why it refused it."""
    if not crashes:
        try:
            return _run_openvino(xml, feeds)
        except Exception as exc:  # noqa: BLE001 - any refusal counts
            return f"refused: {str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__}"
    np.savez(xml.with_suffix(".npz"), *feeds)
    code = textwrap.dedent(f"""
        import numpy as np, openvino as ov
        core = ov.Core()
        compiled = core.compile_model(core.read_model({str(xml)!r}), "CPU", {CPU_F32!r})
        compiled(list(np.load({str(xml.with_suffix(".npz"))!r}).values()))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode != 0, "OpenVINO no longer fails on this: take it off KNOWN_CRASHES"
    return f"refused (exit {done.returncode})"


@pytest.mark.parametrize("type_name, version, attribute", REQUIRED,
                         ids=[f"{t}-{v}-{a}" for t, v, a in REQUIRED])
def test_a_missing_required_attribute(type_name, version, attribute, tmp_path):
    spec = all_specs()[(type_name, version)].attributes[attribute]
    base_model, feeds = CASES[(type_name, version)].model(type_name)
    base = tmp_path / "base.xml"
    ov.save_model(base_model, str(base), compress_to_fp16=False)
    tree = etree.parse(str(base))
    data = _layer(tree.getroot(), type_name, version).find("data")
    assert attribute in data.attrib, f"the case's {type_name} layer does not write {attribute}"
    written = data.get(attribute)
    del data.attrib[attribute]
    mutant = _write(tmp_path / "mutant", tree, base.with_suffix(".bin"))
    outcome = _openvino_outcome(mutant, feeds, (type_name, version, attribute) in KNOWN_CRASHES)

    if isinstance(outcome, str):   # OpenVINO refuses the layer: so does irrun
        report = irrun.validate(mutant)
        assert report.errors, f"OpenVINO {outcome}; irrun found no error:\n" + \
            "\n".join(d.format() for d in report)
        if not spec.defaulted:
            assert any(d.code == "E-ATTR-MISSING" and attribute in d.message for d in report.errors)
        with pytest.raises(irrun.IrrunError):
            irrun.load(mutant).infer(feeds)
        return

    assert spec.defaulted, (f"OpenVINO reads {type_name}-{version} without {attribute} (it was {written!r}): "
                            f"record the default it uses in specs/{type_name}.toml")
    # The default in the spec is the one OpenVINO's reader uses: written out, it gives the same outputs.
    data.set(attribute, format_value(spec, _default(spec)))
    explicit = _write(tmp_path / "explicit", tree, base.with_suffix(".bin"))
    outcome = _defined(type_name, version, outcome)
    for got, want in zip(_defined(type_name, version, _run_openvino(explicit, feeds)), outcome):
        assert_close(got, want, rtol=0, atol=0, what=f"OpenVINO with {attribute}={data.get(attribute)!r}")

    _sync_declared_dims(mutant)
    report = irrun.validate(mutant)
    assert not report.errors, "\n".join(d.format() for d in report)
    warned = [d for d in report.warnings if d.code == "W-ATTR-DEFAULTED"]
    assert len(warned) == 1 and warned[0].layer.type == type_name, "\n".join(d.format() for d in report)
    assert f'"{attribute}"' in warned[0].message and f'{attribute}="{format_value(spec, _default(spec))}"' in \
        warned[0].message
    assert irrun.validate(mutant, strict=True).errors, "--strict makes the warning an error"
    got = _defined(type_name, version, list(irrun.load(mutant).infer(feeds).values()))
    assert len(got) == len(outcome)
    for i, (actual, want) in enumerate(zip(got, outcome)):
        assert_close(actual, want, what=f"output {i}")


def test_region_yolo_without_num_in_softmax_mode(tmp_path):
    """With do_softmax, OpenVINO's CPU plugin divides by num, which its reader takes as 0 when missing
    (SIGFPE); irrun refuses the layer.  (Without do_softmax num is unused: the case above.)"""
    case = Case("opset1", [x(1, 16, 3, 3)], dict(coords=4, classes=3, num=2, do_softmax=True, mask=[0, 1], axis=1,
                                                 end_axis=3, anchors=[]))
    m, feeds = case.model("RegionYolo")
    base = tmp_path / "base.xml"
    ov.save_model(m, str(base), compress_to_fp16=False)
    tree = etree.parse(str(base))
    del _layer(tree.getroot(), "RegionYolo", 1).find("data").attrib["num"]
    mutant = _write(tmp_path / "mutant", tree, base.with_suffix(".bin"))
    assert _openvino_outcome(mutant, feeds, crashes=True).startswith("refused")
    report = irrun.validate(mutant)
    assert sorted(d.code for d in report) == ["E-SHAPE", "W-ATTR-DEFAULTED"] and "num=0" in report.errors[0].message, \
        "\n".join(d.format() for d in report)
