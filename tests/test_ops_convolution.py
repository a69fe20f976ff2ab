"""Convolution, GroupConvolution, ConvolutionBackpropData, GroupConvolutionBackpropData against OpenVINO."""
import re

import numpy as np
import openvino as ov
import openvino.opset1 as ops
import pytest

from irxml import edge, layer, net, port, write
from ovutil import assert_blas_close, assert_close, compare, run_openvino, save
import irrun
from irrun import thin_products, threads
from irrun.errors import ModelError
from irrun.ops import convolution, im2col, row_taps, window
from irrun.shapes import format_shape

AUTO_PADS = ["explicit", "same_upper", "same_lower", "valid"]
F16 = dict(rtol=1e-3, atol=1e-3)


def rand(*shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def ints(*shape, dtype, lo=-5, hi=5, seed=0):
    return np.random.default_rng(seed).integers(lo, hi, shape, endpoint=True).astype(dtype)


def model_of(node, *params):
    return ov.Model([ops.result(node)], list(params))


def conv(x, w, strides, pads_begin, pads_end, dilations, auto_pad="explicit"):
    return ops.convolution(x, w, strides, pads_begin, pads_end, dilations, auto_pad)


def group_conv(x, w, strides, pads_begin, pads_end, dilations, auto_pad="explicit"):
    return ops.group_convolution(x, w, strides, pads_begin, pads_end, dilations, auto_pad)


def backprop(x, w, strides, pads_begin, pads_end, dilations, auto_pad="explicit", output_padding=None,
             output_shape=None):
    output_padding = output_padding or [0] * len(strides)
    return ops.convolution_backprop_data(x, w, strides, output_shape, pads_begin, pads_end, dilations, auto_pad,
                                         output_padding)


def group_backprop(x, w, strides, pads_begin, pads_end, dilations, auto_pad="explicit", output_padding=None,
                   output_shape=None):
    output_padding = output_padding or [0] * len(strides)
    return ops.group_convolution_backprop_data(x, w, strides, output_shape, pads_begin, pads_end, dilations,
                                               auto_pad, output_padding)


# Per spatial rank: data spatial size, kernel, strides, pads_begin, pads_end, dilations (asymmetric on purpose).
GEOMETRY = {
    1: ([11], [3], [2], [1], [2], [2]),
    2: ([9, 8], [3, 2], [2, 1], [1, 0], [2, 1], [1, 2]),
    3: ([5, 6, 4], [2, 3, 2], [1, 2, 2], [0, 1, 1], [1, 0, 1], [2, 1, 1]),
}


# ---------------------------------------------------------------- Convolution-1

@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("auto_pad", AUTO_PADS)
def test_convolution(rank, auto_pad, tmp_path):
    spatial, kernel, strides, pb, pe, dil = GEOMETRY[rank]
    x = ops.parameter([2, 3, *spatial], np.float32, name="x")
    w = ops.constant(rand(4, 3, *kernel, seed=1))
    compare(model_of(conv(x, w, strides, pb, pe, dil, auto_pad), x), [rand(2, 3, *spatial)], tmp_path)


@pytest.mark.parametrize("grouped", [False, True], ids=["conv", "group"])
@pytest.mark.parametrize("auto_pad", AUTO_PADS)
def test_constant_filters_bind_their_geometry_and_fed_ones_do_not(grouped, auto_pad, tmp_path):
    """A constant filter on static data: the layer's pads and output size worked out when it is
    bound (`_bind_direct`); a filter fed at run time: worked out per call by `run`.  Both are
    OpenVINO's."""
    spatial, kernel, strides, pb, pe, dil = GEOMETRY[2]
    x = ops.parameter([2, 4, *spatial], np.float32, name="x")
    shape = [2, 3, 2, *kernel] if grouped else [5, 4, *kernel]
    make = group_conv if grouped else conv
    fed = ops.parameter(shape, np.float32, name="w")
    feeds = [rand(2, 4, *spatial), rand(*shape, seed=1)]
    bound = compare(model_of(make(x, ops.constant(feeds[1]), strides, pb, pe, dil, auto_pad), x), feeds[:1],
                    tmp_path / "constant")
    per_call = compare(model_of(make(x, fed, strides, pb, pe, dil, auto_pad), x, fed), feeds, tmp_path / "fed")
    np.testing.assert_array_equal(next(iter(bound.values())), next(iter(per_call.values())))
    kinds = []
    for name in ("constant", "fed"):
        plan = irrun.load(tmp_path / name / "model.xml")._plan
        (step,) = [s for s in plan.steps if s.node.layer.op_type.endswith("Convolution")]
        kinds.append(getattr(step.kernel, "__self__", None) is step.op)     # the op's own run
    assert kinds == [False, True]


@pytest.mark.parametrize("strides, pads", [([1, 1], [0, 0]), ([2, 3], [0, 0]), ([1, 2], [1, 2])])
def test_convolution_1x1(strides, pads, tmp_path):
    x = ops.parameter([2, 8, 7, 9], np.float32, name="x")
    w = ops.constant(rand(5, 8, 1, 1, seed=1))
    compare(model_of(conv(x, w, strides, pads, pads[::-1], [1, 1]), x), [rand(2, 8, 7, 9)], tmp_path)


def test_convolution_single_input_channel(tmp_path):
    # C_in = 1 takes the per-tap (depthwise) path with many output channels.
    x = ops.parameter([2, 1, 10, 10], np.float32, name="x")
    w = ops.constant(rand(16, 1, 3, 3, seed=1))
    compare(model_of(conv(x, w, [1, 2], [1, 1], [1, 0], [2, 1]), x), [rand(2, 1, 10, 10)], tmp_path)


def test_convolution_realistic_size(tmp_path):
    x = ops.parameter([1, 32, 56, 56], np.float32, name="x")
    w = ops.constant(rand(64, 32, 3, 3, seed=1) * 0.1)
    compare(model_of(conv(x, w, [1, 1], [1, 1], [1, 1], [1, 1]), x), [rand(1, 32, 56, 56)], tmp_path)


def test_convolution_hand_checked(tmp_path):
    # Cross-correlation, not convolution: [1,2,3,4,5] * [1,0,-1] = [1-3, 2-4, 3-5].
    x = ops.parameter([1, 1, 5], np.float32, name="x")
    w = ops.constant(np.array([[[1, 0, -1]]], np.float32))
    xml = save(model_of(conv(x, w, [1], [0], [0], [1]), x), tmp_path)
    (got,) = irrun.load(xml).infer([np.arange(1, 6, dtype=np.float32).reshape(1, 1, 5)]).values()
    np.testing.assert_array_equal(got, [[[-2, -2, -2]]])


# ---------------------------------------------------------------- GroupConvolution-1

@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("auto_pad", AUTO_PADS)
@pytest.mark.parametrize("groups, c_out, c_in", [(2, 3, 2), (4, 1, 1), (4, 2, 1)], ids=["grouped", "depthwise", "depthwise-x2"])
def test_group_convolution(rank, auto_pad, groups, c_out, c_in, tmp_path):
    spatial, kernel, strides, pb, pe, dil = GEOMETRY[rank]
    x = ops.parameter([2, groups * c_in, *spatial], np.float32, name="x")
    w = ops.constant(rand(groups, c_out, c_in, *kernel, seed=1))
    compare(model_of(group_conv(x, w, strides, pb, pe, dil, auto_pad), x), [rand(2, groups * c_in, *spatial)],
            tmp_path)


def test_group_convolution_1x1(tmp_path):
    x = ops.parameter([1, 6, 5, 5], np.float32, name="x")
    w = ops.constant(rand(3, 4, 2, 1, 1, seed=1))
    compare(model_of(group_conv(x, w, [1, 1], [0, 0], [0, 0], [1, 1]), x), [rand(1, 6, 5, 5)], tmp_path)


# ---------------------------------------------------------------- ConvolutionBackpropData-1

# Output sizes for the 2-D geometry ([9, 8] input, kernel [3, 2], strides [2, 1], dilations [1, 2]):
# the natural span is [19, 10]; smaller crops, equal, and larger (zero-filled) outputs.
OUTPUT_SHAPES = [None, [16, 9], [19, 10], [21, 12]]


@pytest.mark.parametrize("output_shape", OUTPUT_SHAPES, ids=lambda s: "no-output-shape" if s is None else str(s))
@pytest.mark.parametrize("output_padding", [[0, 0], [1, 0]], ids=["op0", "op1"])
@pytest.mark.parametrize("auto_pad", AUTO_PADS)
def test_backprop(auto_pad, output_padding, output_shape, tmp_path):
    spatial, kernel, strides, pb, pe, dil = GEOMETRY[2]
    x = ops.parameter([2, 3, *spatial], np.float32, name="x")
    w = ops.constant(rand(3, 4, *kernel, seed=1))
    shape = None if output_shape is None else ops.constant(np.array(output_shape, np.int64))
    node = backprop(x, w, strides, pb, pe, dil, auto_pad, output_padding, shape)
    compare(model_of(node, x), [rand(2, 3, *spatial)], tmp_path)


@pytest.mark.parametrize("rank", [1, 3])
@pytest.mark.parametrize("auto_pad", AUTO_PADS)
def test_backprop_1d_3d(rank, auto_pad, tmp_path):
    spatial, kernel, strides, pb, pe, dil = GEOMETRY[rank]
    x = ops.parameter([1, 2, *spatial], np.float32, name="x")
    w = ops.constant(rand(2, 3, *kernel, seed=1))
    node = backprop(x, w, strides, pb, pe, dil, auto_pad, [1] * rank)
    compare(model_of(node, x), [rand(1, 2, *spatial)], tmp_path)


@pytest.mark.parametrize("auto_pad", ["same_upper", "same_lower"])
def test_backprop_odd_total_padding(auto_pad, tmp_path):
    # total crop 19 - 16 = 3 and 10 - 5 = 5: same_upper crops the odd unit at the beginning.
    x = ops.parameter([1, 2, 9, 8], np.float32, name="x")
    w = ops.constant(rand(2, 2, 3, 2, seed=1))
    node = backprop(x, w, [2, 1], [0, 0], [0, 0], [1, 2], auto_pad, output_shape=ops.constant(np.array([16, 5], np.int32)))
    compare(model_of(node, x), [rand(1, 2, 9, 8)], tmp_path)


def test_backprop_output_shape_from_parameter(tmp_path):
    # Neither the CPU plugin nor OpenVINO's evaluate runs a non-constant output_shape;
    # the same model with that shape as a Const is the oracle.
    data, target = rand(1, 2, 4, 5), np.array([8, 10], np.int64)
    w = ops.constant(rand(2, 3, 3, 3, seed=1))
    x = ops.parameter([1, 2, 4, 5], np.float32, name="x")
    shape = ops.parameter([2], np.int64, name="shape")
    fed = save(model_of(backprop(x, w, [2, 2], [0, 0], [0, 0], [1, 1], "same_upper", output_shape=shape), x, shape),
               tmp_path / "fed.xml")
    x = ops.parameter([1, 2, 4, 5], np.float32, name="x")
    fixed = save(model_of(backprop(x, w, [2, 2], [0, 0], [0, 0], [1, 1], "same_upper",
                                   output_shape=ops.constant(target)), x), tmp_path / "fixed.xml")
    assert irrun.validate(fed).ok
    (got,) = irrun.load(fed).infer([data, target]).values()
    assert_close(got, run_openvino(fixed, [data])[0])


def test_backprop_spec_example_2(tmp_path):
    # ConvolutionBackpropData-1 spec, example 2: 2x2 input, k3, s3, output_padding 2 -> 8x8.
    x = ops.parameter([1, 20, 2, 2], np.float32, name="x")
    w = ops.constant(rand(20, 10, 3, 3, seed=1))
    node = backprop(x, w, [3, 3], [0, 0], [0, 0], [1, 1], "explicit", [2, 2])
    got = compare(model_of(node, x), [rand(1, 20, 2, 2)], tmp_path)
    assert next(iter(got.values())).shape == (1, 10, 8, 8)


def test_backprop_hand_checked(tmp_path):
    # Stride 2 scatters [1, 2] over a [1, 1, 1] kernel: positions 0..2 and 2..4.
    x = ops.parameter([1, 1, 2], np.float32, name="x")
    w = ops.constant(np.ones((1, 1, 3), np.float32))
    xml = save(model_of(backprop(x, w, [2], [0], [0], [1]), x), tmp_path)
    (got,) = irrun.load(xml).infer([np.array([[[1, 2]]], np.float32)]).values()
    np.testing.assert_array_equal(got, [[[1, 1, 3, 2, 2]]])


# Transposed convolutions that run by output phases (irrun/ops/transposed_convolution.py): dilation
# 1, kernel sizes multiples of the strides, some stride below its kernel size.  Per rank: data
# spatial size, kernel, strides, pads_begin, pads_end, output_padding.
PHASE_GEOMETRY = {
    1: ([13], [8], [4], [2], [3], [1]),
    2: ([7, 6], [4, 4], [2, 2], [1, 2], [2, 0], [1, 0]),
    3: ([4, 5, 3], [4, 2, 3], [2, 1, 3], [1, 0, 1], [0, 1, 2], [0, 0, 2]),
}


@pytest.fixture
def phases_taken(monkeypatch):
    from irrun.ops import transposed_convolution
    calls = []
    run = transposed_convolution._phases
    monkeypatch.setattr(transposed_convolution, "_phases", lambda *a: calls.append(1) or run(*a))
    return calls


@pytest.mark.parametrize("output_shape", [None, "smaller", "larger"])
@pytest.mark.parametrize("auto_pad", AUTO_PADS)
@pytest.mark.parametrize("rank", [1, 2, 3])
def test_backprop_by_phases(rank, auto_pad, output_shape, phases_taken, monkeypatch, tmp_path):
    """Against OpenVINO; the filter, kept as phase filters, has its mapped pages released at load
    (and reads back right when the model is saved again: `compare`'s round trip)."""
    from irrun.weights import Weights
    released = []
    release = Weights.release
    monkeypatch.setattr(Weights, "release", lambda self, array: released.append(array.shape) or release(self, array))
    spatial, kernel, strides, pb, pe, op = PHASE_GEOMETRY[rank]
    x = ops.parameter([2, 3, *spatial], np.float32, name="x")
    w = ops.constant(rand(3, 4, *kernel, seed=1))
    natural = [(i - 1) * s + k - b - e + p for i, k, s, b, e, p in zip(spatial, kernel, strides, pb, pe, op)]
    shape = None if output_shape is None else ops.constant(np.array(
        [n + (-2 if output_shape == "smaller" else 3) for n in natural], np.int64))
    node = backprop(x, w, strides, pb, pe, [1] * rank, auto_pad, op if shape is None else None, shape)
    compare(model_of(node, x), [rand(2, 3, *spatial)], tmp_path)
    assert phases_taken
    assert (3, 4, *kernel) in released


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("groups, c_in, c_out", [(2, 3, 2), (4, 1, 1)], ids=["grouped", "depthwise"])
def test_group_backprop_by_phases(groups, c_in, c_out, dtype, phases_taken, tmp_path):
    """A decoder's upsampling (4x4, stride 2, pad 1), grouped, in f32 and f16."""
    x = ops.parameter([1, groups * c_in, 6, 5], dtype, name="x")
    w = ops.constant(rand(groups, c_in, c_out, 4, 4, dtype=dtype, seed=1))
    got = compare(model_of(group_backprop(x, w, [2, 2], [1, 1], [1, 1], [1, 1]), x),
                  [rand(1, groups * c_in, 6, 5, dtype=dtype)], tmp_path, **(F16 if dtype == np.float16 else {}))
    assert next(iter(got.values())).dtype == dtype
    assert phases_taken


def test_backprop_filter_from_parameter_by_phases(phases_taken, tmp_path):
    """A filter that is no constant: its phase filters made on each call."""
    x = ops.parameter([1, 2, 5, 5], np.float32, name="x")
    w = ops.parameter([2, 3, 4, 4], np.float32, name="w")
    compare(model_of(backprop(x, w, [2, 2], [1, 1], [1, 1], [1, 1]), x, w),
            [rand(1, 2, 5, 5), rand(2, 3, 4, 4, seed=1)], tmp_path)
    assert phases_taken


# ---------------------------------------------------------------- GroupConvolutionBackpropData-1

@pytest.mark.parametrize("output_shape", [None, [16, 9], [21, 12]], ids=lambda s: "no-output-shape" if s is None else str(s))
@pytest.mark.parametrize("auto_pad", AUTO_PADS)
@pytest.mark.parametrize("groups, c_in, c_out", [(2, 2, 3), (4, 1, 1)], ids=["grouped", "depthwise"])
def test_group_backprop(groups, c_in, c_out, auto_pad, output_shape, tmp_path):
    spatial, kernel, strides, pb, pe, dil = GEOMETRY[2]
    x = ops.parameter([2, groups * c_in, *spatial], np.float32, name="x")
    w = ops.constant(rand(groups, c_in, c_out, *kernel, seed=1))
    shape = None if output_shape is None else ops.constant(np.array(output_shape, np.int64))
    node = group_backprop(x, w, strides, pb, pe, dil, auto_pad, [1, 0], shape)
    compare(model_of(node, x), [rand(2, groups * c_in, *spatial)], tmp_path)


@pytest.mark.parametrize("rank", [1, 3])
def test_group_backprop_1d_3d(rank, tmp_path):
    spatial, kernel, strides, pb, pe, dil = GEOMETRY[rank]
    x = ops.parameter([1, 4, *spatial], np.float32, name="x")
    w = ops.constant(rand(2, 2, 3, *kernel, seed=1))
    compare(model_of(group_backprop(x, w, strides, pb, pe, dil), x), [rand(1, 4, *spatial)], tmp_path)


# ---------------------------------------------------------------- all four: types, weights, dynamic shapes

def four_ops(dtype, make_weights=None):
    """(name, builder(x), data shape) for one small case of each op."""
    make_weights = make_weights or (lambda *shape: rand(*shape, dtype=dtype, seed=1))
    return [
        ("conv", lambda x: conv(x, ops.constant(make_weights(4, 4, 3, 3)), [2, 1], [1, 0], [0, 1], [1, 2])),
        ("group_conv", lambda x: group_conv(x, ops.constant(make_weights(2, 3, 2, 3, 3)), [1, 1], [1, 1], [1, 1],
                                            [1, 1], "same_upper")),
        ("depthwise", lambda x: group_conv(x, ops.constant(make_weights(4, 1, 1, 3, 2)), [2, 2], [0, 0], [0, 0],
                                           [1, 1], "same_lower")),
        ("backprop", lambda x: backprop(x, ops.constant(make_weights(4, 2, 3, 3)), [2, 2], [1, 0], [0, 1], [1, 1],
                                        output_padding=[1, 1])),
        ("group_backprop", lambda x: group_backprop(x, ops.constant(make_weights(2, 2, 3, 2, 2)), [2, 1], [0, 0],
                                                    [0, 0], [1, 1], "same_upper",
                                                    output_shape=ops.constant(np.array([13, 9], np.int64)))),
    ]


OP_NAMES = [name for name, _ in four_ops(np.float32)]


def build(name, dtype, shape, make_weights=None):
    x = ops.parameter(shape, dtype, name="x")
    builder = dict(four_ops(dtype, make_weights))[name]
    return model_of(builder(x), x)


@pytest.mark.parametrize("name", OP_NAMES)
def test_f16(name, tmp_path):
    compare(build(name, np.float16, [2, 4, 7, 8]), [rand(2, 4, 7, 8, dtype=np.float16)], tmp_path, **F16)


@pytest.mark.parametrize("name", OP_NAMES)
def test_f64(name, tmp_path):
    # The CPU plugin computes f64 in f32.
    compare(build(name, np.float64, [1, 4, 7, 8]), [rand(1, 4, 7, 8, dtype=np.float64)], tmp_path)


@pytest.mark.parametrize("name", OP_NAMES)
def test_f16_compressed_weights(name, tmp_path):
    compare(build(name, np.float32, [1, 4, 7, 8]), [rand(1, 4, 7, 8)], tmp_path, compress=True)


@pytest.mark.parametrize("name", OP_NAMES)
@pytest.mark.parametrize("shape", [[1, 4, -1, -1], [-1, 4, 7, -1], [2, -1, 7, 8]], ids=["spatial", "batch+w", "channels"])
def test_dynamic_data_shape(name, shape, tmp_path):
    compare(build(name, np.float32, shape), [rand(2 if shape[0] != 1 else 1, 4, 7, 8)], tmp_path)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.int64])
@pytest.mark.parametrize("name", OP_NAMES)
def test_integer_in_range(name, dtype, tmp_path):
    # |sum| <= 4 channels * 9 taps < 127: no saturation (test_integer_overflow... covers that).
    lo = 0 if dtype == np.uint8 else -1
    weights = lambda *shape: ints(*shape, dtype=dtype, lo=lo, hi=1, seed=1)
    data = ints(1, 4, 7, 8, dtype=dtype, lo=lo, hi=1)
    if dtype != np.int8:
        compare(build(name, dtype, [1, 4, 7, 8], weights), [data], tmp_path)
        return
    # The CPU plugin's i8 kernels are not an oracle (specs/errata/convolution.md): its backprop at
    # times leaves the row output_padding adds unwritten (garbage in 3-12% of compiles), and on a
    # CPU without AVX-512 (an AMD EPYC of family 19h, model 1) its i8 Convolution and
    # GroupConvolution give zeros.  The same layer in f32 is the oracle, exact for these sums, cast back
    xml = save(build(name, dtype, [1, 4, 7, 8], weights), tmp_path / "int")
    as_float = save(build(name, np.float32, [1, 4, 7, 8], lambda *shape: weights(*shape).astype(np.float32)),
                    tmp_path / "f32")
    (expected,) = run_openvino(as_float, [data.astype(np.float32)])
    got = next(iter(irrun.load(xml).infer({"x": data}).values()))
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, expected.astype(dtype))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.int64])
def test_integer_overflow_follows_cpu_plugin(dtype, tmp_path):
    # OpenVINO has no reference for integer convolution; the CPU plugin sums in f32,
    # then saturates to i8/u8, wraps to i16, and clamps i32/i64 to the int32 range.
    big = {np.int8: 100, np.uint8: 200, np.int16: 300, np.int32: 60000, np.int64: 60000}[dtype]
    x = ops.parameter([1, 2, 3, 3], dtype, name="x")
    signs = np.array([1, -1] if np.dtype(dtype).kind == "i" else [1, 1])
    w = ops.constant((np.full((2, 2, 2, 2), big) * signs.reshape(2, 1, 1, 1)).astype(dtype))
    data = np.full((1, 2, 3, 3), big, dtype)
    compare(model_of(conv(x, w, [1, 1], [0, 0], [0, 0], [1, 1]), x), [data], tmp_path)


@pytest.mark.parametrize("name", ["conv", "group_conv", "backprop", "group_backprop"])
def test_large_batches_run_in_slices(name, monkeypatch, tmp_path):
    # A tiny buffer budget forces one batch element per im2col / scatter slice.
    monkeypatch.setattr(convolution, "BUFFER_ELEMENTS", 16)
    compare(build(name, np.float32, [3, 4, 7, 8]), [rand(3, 4, 7, 8)], tmp_path)


@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("kind", ["conv", "group_conv"])
@pytest.mark.parametrize("budget", [1, 200])
def test_column_matrix_built_in_blocks_of_output_rows(rank, kind, budget, monkeypatch, tmp_path):
    """A tiny budget builds im2col one output row (budget 1) or a few rows at a time; the last block
    is short, strides and dilations pick the rows, and the batch has two samples."""
    monkeypatch.setattr(im2col, "COLUMN_BLOCK_ELEMENTS", budget)
    compare_strided_case(rank, kind, [9, 7, 5], ([1, 0, 1], [1, 1, 0]), tmp_path)


def compare_strided_case(rank, kind, spatial, pads, tmp_path):
    """Two samples of 4 channels through a strided, dilated `kind` ("conv" or "group_conv") with
    asymmetric `pads` (begin, end), the first `rank` axes of each, against OpenVINO."""
    spatial, kernel = spatial[:rank], [3, 2, 3][:rank]
    x = ops.parameter([2, 4, *spatial], np.float32, name="x")
    strides, dilations = [2, 1, 1][:rank], [1, 2, 1][:rank]
    pads_begin, pads_end = pads[0][:rank], pads[1][:rank]
    if kind == "conv":
        node = conv(x, ops.constant(rand(6, 4, *kernel, seed=1)), strides, pads_begin, pads_end, dilations)
    else:
        node = group_conv(x, ops.constant(rand(2, 3, 2, *kernel, seed=1)), strides, pads_begin, pads_end, dilations)
    compare(model_of(node, x), [rand(2, 4, *spatial)], tmp_path)


@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("kind", ["conv", "group_conv"])
def test_padding_zeroed_at_the_borders_only(rank, kind, monkeypatch, tmp_path):
    """Large inputs are padded into a buffer zeroed only where the data does not go (forced here
    on small ones): asymmetric pads, strides and dilations, every rank."""
    monkeypatch.setattr(window, "BORDERS_ONLY_ELEMENTS", 0)
    compare_strided_case(rank, kind, [9, 8, 6], ([1, 0, 2], [2, 1, 0]), tmp_path)


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_padding_at_the_borders_only_with_negative_pads(rank, monkeypatch):
    """Negative pads crop while others pad: OpenVINO runs none (its CPU plugin does not compile
    them, its reference evaluation fails), so the borders-only buffer is checked against the
    zeroed one."""
    geo = convolution.Geometry((2, 1, 1)[:rank], (1, 2, 1)[:rank], (-1, 2, 0)[:rank], (1, -1, 1)[:rank],
                               (0,) * rank, "explicit")
    x, w = rand(2, 4, *(9, 8, 6)[:rank]), rand(1, 6, 4, *(3, 2, 3)[:rank], seed=1)
    zeroed = convolution.conv_forward(x, w, geo)
    monkeypatch.setattr(window, "BORDERS_ONLY_ELEMENTS", 0)
    np.testing.assert_array_equal(convolution.conv_forward(x, w, geo), zeroed)


# Stride 1, C_out <= C_in: one GEMM per tap on the flattened padded input.  Per rank: spatial size,
# kernel, pads_begin, pads_end, dilations.
TAP_GEOMETRY = {
    1: ([13], [3], [2], [1], [2]),
    2: ([9, 8], [3, 2], [1, 0], [2, 1], [1, 2]),
    3: ([5, 6, 4], [2, 3, 2], [0, 1, 1], [1, 0, 1], [2, 1, 1]),
}


@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("kind", ["conv", "group_conv"])
@pytest.mark.parametrize("block_columns", [1, 7, 27, convolution.TAP_BLOCK_COLUMNS])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_stride_one_tap_by_tap(rank, kind, block_columns, dtype, monkeypatch, tmp_path):
    """Blocks of one output column, of a few (ending mid-row) and of whole maps; two samples; for
    integers the sums are exact in f64 before the CPU plugin's rounding.  A 2-D convolution of one
    group takes the row-tap kernel (blocks of whole rows: one row, three of the ten with a last
    block of one that reaches into the bottom padding, the whole map)."""
    monkeypatch.setattr(convolution, "TAP_BLOCK_COLUMNS", block_columns)
    monkeypatch.setattr(row_taps, "ROW_TAP_BLOCK_COLUMNS", block_columns)
    calls = []
    module, path = (row_taps, "row_taps") if rank == 2 and kind == "conv" else (convolution, "_shifted_taps")
    taps = getattr(module, path)
    monkeypatch.setattr(module, path, lambda *args: calls.append(1) or taps(*args))
    spatial, kernel, pads_begin, pads_end, dilations = TAP_GEOMETRY[rank]
    make = rand if dtype != np.int32 else (lambda *shape, seed=0: ints(*shape, dtype=dtype, seed=seed))
    channels = 16 if kind == "conv" else 64
    x = ops.parameter([2, channels, *spatial], dtype, name="x")
    ones = [1] * rank
    if kind == "conv":
        node = conv(x, ops.constant(make(12, 16, *kernel, seed=1).astype(dtype)), ones, pads_begin, pads_end,
                    dilations)
    else:
        node = group_conv(x, ops.constant(make(2, 24, 32, *kernel, seed=1).astype(dtype)), ones, pads_begin,
                          pads_end, dilations)
    compare(model_of(node, x), [make(2, channels, *spatial).astype(dtype)], tmp_path,
            **(F16 if dtype == np.float16 else {}))
    assert calls, f"{path} was not used"


@pytest.mark.parametrize("size", ["small", "ResNeXt-like"])
@pytest.mark.parametrize("block_columns", [7, row_taps.ROW_TAP_BLOCK_COLUMNS])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_grouped_row_taps(size, block_columns, dtype, monkeypatch, tmp_path):
    """Groups of 32 input channels or more take the row-tap kernel, each group's GEMM in one
    batched call: two samples, dilations, uneven pads, blocks that end mid-map; the small case
    with the size rule lifted, the ResNeXt-like one (30 x 30 outputs, a convolution network whose
    blocks run in parts) as it stands."""
    monkeypatch.setattr(row_taps, "ROW_TAP_BLOCK_COLUMNS", block_columns)
    if size == "small":
        monkeypatch.setattr(row_taps, "ROW_TAP_MIN_GROUP_POSITIONS", 0)
        spatial, kernel, pads_begin, pads_end, dilations = TAP_GEOMETRY[2]
    else:
        spatial, kernel, pads_begin, pads_end, dilations = [30, 30], [3, 3], [1, 1], [1, 1], [1, 1]
    calls = []
    taps = row_taps.row_taps
    monkeypatch.setattr(row_taps, "row_taps", lambda *args: calls.append(1) or taps(*args))
    x = ops.parameter([2, 96, *spatial], dtype, name="x")
    # (weights scaled to outputs of about unit size: 288 products a sum)
    node = group_conv(x, ops.constant((rand(3, 40, 32, *kernel, seed=1) / 16).astype(dtype)), [1, 1], pads_begin,
                      pads_end, dilations)
    compare(model_of(node, x), [rand(2, 96, *spatial).astype(dtype)], tmp_path, **(F16 if dtype == np.float16 else {}))
    assert calls, "row_taps was not used"


@pytest.mark.parametrize("avx512, count", [(True, 2), (False, 2), (True, 1)])
def test_grouped_row_taps_from_16_channels_where_openblas_runs_avx512(avx512, count, monkeypatch, tmp_path):
    """Groups of 16 input channels take the row taps on more than one thread where OpenBLAS runs
    its AVX-512 kernels (`row_taps.min_group_channels`), not elsewhere; OpenVINO's output either way."""
    monkeypatch.setattr(thin_products, "_small_kernels", avx512)
    monkeypatch.setattr(threads, "threads", lambda: count)
    calls = []
    taps = row_taps.row_taps
    monkeypatch.setattr(row_taps, "row_taps", lambda *args: calls.append(1) or taps(*args))
    x = ops.parameter([1, 64, 28, 28], np.float32, name="x")
    node = group_conv(x, ops.constant(rand(4, 32, 16, 3, 3, seed=1) / 12), [1, 1], [1, 1], [1, 1], [1, 1])
    compare(model_of(node, x), [rand(1, 64, 28, 28)], tmp_path)
    assert bool(calls) is (avx512 and count > 1)


@pytest.mark.parametrize("kind", ["row taps", "channels-last columns", "depthwise rows", "depthwise windows",
                                  "depthwise taps"])
def test_laid_out_filters_bound_and_mapped_ones_released(kind, monkeypatch, tmp_path):
    """A constant filter the row taps, the channels-last columns or the depthwise kernels take is
    laid out once, at load, and its mapped pages are released (as Winograd's) where no kernel reads
    it as it is (not where the depthwise kernel tap by tap may: a multiplier on few channels); the
    output is OpenVINO's, and the filter still reads back right when asked for
    (intermediates="all")."""
    from irrun.ops import depthwise
    from irrun.weights import Weights
    released = []
    release = Weights.release
    monkeypatch.setattr(Weights, "release", lambda self, array: released.append(array.shape) or release(self, array))
    made, calls = [], []
    layout, kernel = {"row taps": ("stacked_row_filter", "row_taps"),
                      "channels-last columns": ("channels_last_filter", "channels_last_columns_times_filter"),
                      "depthwise rows": ("row_filter", "_depthwise_rows"),
                      "depthwise windows": ("windows_filter", "_depthwise_einsum"),
                      "depthwise taps": ("row_filter", "_depthwise_taps")}[kind]
    module = {"row taps": row_taps, "channels-last columns": im2col}.get(kind, depthwise)
    for name, seen in ((layout, made), (kernel, calls)):
        original = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, _f=original, _seen=seen: _seen.append(1) or _f(*a))
    if kind == "depthwise windows":
        monkeypatch.setattr(depthwise, "ROWS_FILTER_ELEMENTS", 0)
    if kind == "row taps":
        monkeypatch.setenv("IRRUN_WINOGRAD", "off")      # (F(4,3) takes 64 channels at 20x20 by default)
    channels, shape = {"row taps": (64, (64, 64, 3, 3)), "channels-last columns": (64, (64, 64, 3, 3)),
                       "depthwise rows": (96, (96, 1, 1, 3, 3)), "depthwise windows": (192, (192, 1, 1, 3, 3)),
                       "depthwise taps": (8, (8, 2, 1, 3, 3))}[kind]
    size = 10 if kind == "channels-last columns" else 20     # (100 output positions; 400 take the row taps)
    weights = rand(*shape, seed=1) / 8
    x = ops.parameter([1, channels, size, size], np.float32, name="x")
    make = conv if kind in ("row taps", "channels-last columns") else group_conv
    xml = save(model_of(make(x, ops.constant(weights), [1, 1], [1, 1], [1, 1], [1, 1]), x), tmp_path / "m")
    m = irrun.load(xml)
    assert released == ([] if kind == "depthwise taps" else [shape])
    assert len(made) == (0 if kind == "depthwise taps" else 1)
    feeds = [rand(1, channels, size, size)]
    for _ in range(2):
        assert_close(m.infer(feeds)[m.outputs[0].name], run_openvino(xml, feeds)[0])
    assert len(calls) == 2 and len(made) == (0 if kind == "depthwise taps" else 1), "laid out again"
    got = m.infer(feeds, intermediates="all")
    assert_close(got[m.outputs[0].name], run_openvino(xml, feeds)[0])
    (kept,) = [v for v in got.values() if v.shape == shape]
    np.testing.assert_array_equal(kept, weights)


@pytest.mark.parametrize("avx512, count", [(True, 2), (False, 2), (True, 1)])
def test_grouped_row_taps_only_for_wide_groups(avx512, count, monkeypatch):
    """Groups of 16 channels (on one thread, or where OpenBLAS runs no AVX-512 kernels; of 8
    everywhere), or under 28 x 28 outputs, keep the other kernels (measured slower)."""
    monkeypatch.setattr(thin_products, "_small_kernels", avx512)
    monkeypatch.setattr(threads, "threads", lambda: count)
    geo = convolution.Geometry((1, 1), (1, 1), (1, 1), (1, 1), (0, 0), "explicit")
    pays = row_taps.row_taps_pay
    assert pays((4, 32, 32, 3, 3), geo, [(-1, 57), (-1, 57)], [56, 56])
    assert pays((4, 32, 16, 3, 3), geo, [(-1, 57), (-1, 57)], [56, 56]) is (avx512 and count > 1)
    assert not pays((8, 16, 8, 3, 3), geo, [(-1, 57), (-1, 57)], [56, 56])
    assert not pays((4, 64, 64, 3, 3), geo, [(-1, 15), (-1, 15)], [14, 14])
    assert pays((1, 64, 64, 3, 3), geo, [(-1, 15), (-1, 15)], [14, 14])


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_tap_by_tap_negative_pads_agree_with_im2col(rank, monkeypatch):
    """Negative pads crop the input.  OpenVINO runs none (its CPU plugin does not compile them, its
    reference evaluation fails), so the two kernels are checked against each other."""
    geo = convolution.Geometry((1,) * rank, (1, 2, 1)[:rank], (1, -1, 0)[:rank], (-2, 1, 1)[:rank], (0,) * rank,
                               "explicit")
    x, w = rand(2, 16, *(9, 8, 6)[:rank]), rand(1, 12, 16, *(3, 2, 3)[:rank], seed=1)
    calls = []
    module, path = (row_taps, "row_taps") if rank == 2 else (convolution, "_shifted_taps")   # (2-D, one group: row taps)
    taps = getattr(module, path)
    monkeypatch.setattr(module, path, lambda *args: calls.append(1) or taps(*args))
    got = convolution.conv_forward(x, w, geo)
    monkeypatch.setattr(convolution, "TAP_MAX_CHANNELS", 0)
    monkeypatch.setattr(row_taps, "ROW_TAP_CHANNELS", (0, 0))
    assert_blas_close(got, convolution.conv_forward(x, w, geo))
    assert calls == [1]


# A stride dividing the kernel: the stride-1 row-tap kernel over the input's phases.  Per case: input
# channels, spatial size, kernel, strides, pads_begin, pads_end, auto_pad.
PHASE_CASES = {
    "YOLOv5 stem": (3, [64, 64], [6, 6], [2, 2], [2, 2], [2, 2], "explicit"),
    "uneven pads, odd size": (3, [17, 23], [4, 4], [2, 2], [0, 1], [3, 0], "explicit"),
    "stride 3": (2, [13, 14], [6, 6], [3, 3], [1, 2], [0, 1], "explicit"),
    "strides that differ": (5, [12, 9], [4, 3], [2, 1], [1, 1], [1, 1], "explicit"),
    "same_upper": (3, [15, 16], [4, 4], [2, 2], [0, 0], [0, 0], "same_upper"),
    "same_lower": (3, [15, 16], [6, 6], [2, 2], [0, 0], [0, 0], "same_lower"),
    "valid": (4, [11, 12], [4, 6], [2, 3], [0, 0], [0, 0], "valid"),
}


@pytest.mark.parametrize("case", PHASE_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_strided_kernel_over_phases(case, dtype, monkeypatch, tmp_path):
    """Two samples, against OpenVINO, then against im2col (whose GEMM adds the products in another
    order: within the tolerance, not bit for bit)."""
    channels, spatial, kernel, strides, pads_begin, pads_end, auto_pad = PHASE_CASES[case]
    calls = []
    phases = row_taps.phase_taps
    monkeypatch.setattr(row_taps, "phase_taps", lambda *args: calls.append(1) or phases(*args))
    x = ops.parameter([2, channels, *spatial], dtype, name="x")
    node = conv(x, ops.constant(rand(7, channels, *kernel, seed=1).astype(dtype)), strides, pads_begin, pads_end,
                [1, 1], auto_pad)
    data = rand(2, channels, *spatial).astype(dtype)
    got = compare(model_of(node, x), [data], tmp_path, **(F16 if dtype == np.float16 else {}))
    assert calls, "phase_taps was not used"
    monkeypatch.setattr(row_taps, "phase_taps_pay", lambda *args: False)
    by_im2col = irrun.load(tmp_path / "model.xml").infer([data])
    assert_close(next(iter(got.values())), next(iter(by_im2col.values())),
                 **(F16 if dtype == np.float16 else dict(rtol=1e-5, atol=1e-5)))


def test_strided_kernel_over_phases_negative_pads():
    """Negative pads crop (OpenVINO runs none): against im2col."""
    geo = convolution.Geometry((2, 2), (1, 1), (-1, 2), (2, -1), (0, 0), "explicit")
    x, w = rand(2, 3, 13, 12), rand(1, 5, 3, 4, 6, seed=1)
    whole, counts = convolution.window_layout(x.shape[2:], w.shape[3:], geo)
    assert row_taps.phase_taps_pay(w.shape, geo)
    np.testing.assert_allclose(row_taps.phase_taps(x, w, geo, whole, counts),
                               convolution._im2col(x, w, geo, whole, counts), rtol=1e-5, atol=1e-5)


def test_strided_kernel_over_phases_only_where_the_stride_divides_it():
    strided = convolution.Geometry((2, 2), (1, 1), (1, 1), (1, 1), (0, 0), "explicit")
    assert row_taps.phase_taps_pay((1, 16, 3, 6, 6), strided)
    assert not row_taps.phase_taps_pay((1, 16, 3, 3, 3), strided)        # 3 taps over stride 2
    assert not row_taps.phase_taps_pay((1, 16, 3, 2, 2), strided)        # one tap a phase: a 1x1 layer
    assert not row_taps.phase_taps_pay((1, 128, 64, 4, 4), strided)      # 256 channels of phases
    assert not row_taps.phase_taps_pay((2, 8, 3, 6, 6), strided)         # grouped
    dilated = convolution.Geometry((2, 2), (2, 2), (1, 1), (1, 1), (0, 0), "explicit")
    assert not row_taps.phase_taps_pay((1, 16, 3, 6, 6), dilated)
    assert not row_taps.phase_taps_pay((1, 16, 3, 6), convolution.Geometry((2,), (1,), (1,), (1,), (0,), "explicit"))


def test_tap_by_tap_not_used_for_wide_or_strided_layers():
    geo = convolution.Geometry((1, 1), (1, 1), (1, 1), (1, 1), (0, 0), "explicit")
    whole, counts = [(-1, 15), (-1, 15)], [14, 14]
    assert convolution._taps_pay((1, 16, 16, 3, 3), geo, whole, counts)
    assert not convolution._taps_pay((1, 32, 16, 3, 3), geo, whole, counts)      # C_out > C_in
    assert not convolution._taps_pay((1, 256, 256, 3, 3), geo, whole, counts)    # wide: im2col's GEMM wins
    assert not convolution._taps_pay((1, 2, 4, 3, 3), geo, whole, counts)        # narrow
    assert convolution._taps_pay((4, 32, 32, 3, 3), geo, whole, counts)
    assert not convolution._taps_pay((8, 16, 16, 3, 3), geo, whole, counts)      # many narrow groups
    strided = convolution.Geometry((2, 2), (1, 1), (1, 1), (1, 1), (0, 0), "explicit")
    assert not convolution._taps_pay((1, 16, 16, 3, 3), strided, whole, [7, 7])
    dilated = convolution.Geometry((1, 1), (6, 6), (0, 0), (0, 0), (0, 0), "explicit")
    assert not convolution._taps_pay((1, 16, 16, 3, 3), dilated, [(0, 14), (0, 14)], [2, 2])   # mostly waste


# ---------------------------------------------------------------- shape inference and validation

def ov_model_xml(tmp_path, node, *params):
    return save(model_of(node, *params), tmp_path)


@pytest.mark.parametrize("case", [
    ("conv", [1, 3, ov.Dimension(5, 10), 9], "explicit"),
    ("conv", [-1, 3, ov.Dimension(5, 10), 9], "same_upper"),
    ("backprop", [1, 4, ov.Dimension(5, 10), 9], "explicit"),
    ("backprop", [1, 4, -1, 9], "valid"),
    ("conv", [1, 3, -1, ov.Dimension(1, 10)], "explicit"),
    ("conv", None, "explicit"),
    ("backprop", None, "same_lower"),
], ids=str)
def test_partial_shapes_match_openvino(case, tmp_path):
    kind, dims, auto_pad = case
    x = ops.parameter(ov.PartialShape.dynamic() if dims is None else ov.PartialShape(dims), np.float32, name="x")
    if kind == "conv":
        node = conv(x, ops.constant(rand(6, 3, 3, 3)), [2, 2], [1, 0], [0, 0], [1, 1], auto_pad)
    else:
        node = backprop(x, ops.constant(rand(4, 2, 3, 3)), [2, 2], [1, 1], [1, 1], [1, 1], auto_pad)
    (out,) = irrun.load(ov_model_xml(tmp_path, node, x)).outputs
    assert format_shape(out.shape) == str(node.get_output_partial_shape(0))


def test_missing_window_attributes_default_like_openvino(tmp_path):
    # OpenVINO's reader fills missing strides/dilations with 1 and pads with 0.
    x = ops.parameter([1, 2, 6, 6], np.float32, name="x")
    w = ops.constant(rand(3, 2, 3, 3, seed=1))
    b = ops.constant(rand(2, 3, 3, 3, seed=2))
    xml = save(ov.Model([ops.result(conv(x, w, [1, 1], [0, 0], [0, 0], [1, 1])),
                         ops.result(backprop(x, b, [1, 1], [0, 0], [0, 0], [1, 1]))], [x]), tmp_path)
    text = re.sub(r'<data (strides|dilations)="[^"]*" [^/]*/>', "<data />", xml.read_text())
    assert text.count("<data />") == 2
    xml.write_text(text)
    data = rand(1, 2, 6, 6)
    expected = run_openvino(xml, [data])
    assert irrun.validate(xml).ok
    for got, exp in zip(irrun.load(xml).infer([data]).values(), expected):
        assert_close(got, exp)


def test_constants_sharing_bin_data(tmp_path):
    # The serializer stores identical bytes once, so both filters read offset 0.  The
    # CPU plugin then gets the ConvolutionBackpropData wrong (errata); the oracle is
    # OpenVINO on the backprop alone.
    w = rand(3, 2, 3, 3, seed=1)
    x = ops.parameter([1, 2, 6, 6], np.float32, name="x")
    shared = save(ov.Model([ops.result(conv(x, ops.constant(w), [1, 1], [0, 0], [0, 0], [1, 1])),
                            ops.result(backprop(x, ops.constant(w.reshape(2, 3, 3, 3)), [1, 1], [0, 0], [0, 0],
                                                [1, 1]))], [x]), tmp_path / "shared.xml")
    assert shared.read_text().count('offset="0"') == 2
    x = ops.parameter([1, 2, 6, 6], np.float32, name="x")
    alone = save(model_of(backprop(x, ops.constant(w.reshape(2, 3, 3, 3)), [1, 1], [0, 0], [0, 0], [1, 1]), x),
                 tmp_path / "alone.xml")
    data = rand(1, 2, 6, 6)
    _, got = irrun.load(shared).infer([data]).values()
    assert_close(got, run_openvino(alone, [data])[0])


def test_wrong_declared_dims_name_the_layer(tmp_path):
    x = ops.parameter([1, 3, 32, 32], np.float32, name="x")
    node = conv(x, ops.constant(rand(8, 3, 3, 3)), [2, 2], [0, 0], [0, 0], [1, 1], "same_upper")
    node.set_friendly_name("stem")
    xml = ov_model_xml(tmp_path, node, x)
    head, tail = xml.read_text().split('name="stem"')
    xml.write_text(head + 'name="stem"' + tail.replace("<dim>16</dim>", "<dim>32</dim>", 2))  # its output port
    (bad,) = irrun.validate(xml).errors
    assert bad.code == "E-DECLARED-SHAPE" and bad.layer.name == "stem"
    assert "ceil(32 / 2) with auto_pad=same_upper" in bad.message


def hand_written_conv(tmp_path, type_, data_dims, filter_dims, data=None, out_dims=(1, 1, 1, 1)):
    """Parameter + Const filter -> <type_> -> Result, written by hand (OpenVINO refuses to build bad ones).

    `data_dims` None: a data input of dynamic rank."""
    data = data or {"strides": "1,1", "pads_begin": "0,0", "pads_end": "0,0", "dilations": "1,1"}
    nbytes = int(np.prod(filter_dims)) * 4
    shape = "..." if data_dims is None else ",".join(map(str, data_dims))
    data_dims = data_dims or ()
    xml = net([
        layer(0, "x", "Parameter", data={"shape": shape, "element_type": "f32"},
              outputs=[port(0, data_dims, names="x")]),
        layer(1, "w", "Const", data={"element_type": "f32", "shape": ",".join(map(str, filter_dims)),
                                     "offset": 0, "size": nbytes}, outputs=[port(0, filter_dims)]),
        layer(2, "the_conv", type_, data=data, inputs=[port(0, data_dims), port(1, filter_dims)],
              outputs=[port(2, out_dims, names="y")]),
        layer(3, "out", "Result", inputs=[port(0, out_dims)]),
    ], [edge(0, 0, 2, 0), edge(1, 0, 2, 1), edge(2, 2, 3, 0)])
    return write(tmp_path, xml, bytes(nbytes))


@pytest.mark.parametrize("type_, filter_dims, message", [
    ("Convolution", (6, 4, 3, 3), "has 3 channels, filter [6,4,3,3] expects 4"),
    ("GroupConvolution", (2, 3, 2, 3, 3), "has 3 channels, filter [2,3,2,3,3] expects 4 (groups=2 x 2)"),
    ("ConvolutionBackpropData", (4, 6, 3, 3), "has 3 channels, filter [4,6,3,3] expects 4"),
    ("GroupConvolutionBackpropData", (2, 2, 3, 3, 3), "expects 4 (groups=2 x 2)"),
    ("Convolution", (6, 3, 3), "filter [6,3,3] must have rank 4"),
])
def test_inconsistent_operands_name_the_layer(type_, filter_dims, message, tmp_path):
    xml = hand_written_conv(tmp_path, type_, (1, 3, 8, 8), filter_dims)
    errors = [d for d in irrun.validate(xml).errors if d.code != "E-DECLARED-SHAPE"]
    assert len(errors) == 1 and errors[0].layer.name == "the_conv", [d.format() for d in errors]
    assert message in errors[0].message
    with pytest.raises(ModelError, match=re.escape(message)):
        irrun.load(xml)


def test_consistent_depthwise_operands_validate_clean(tmp_path):
    xml = hand_written_conv(tmp_path, "GroupConvolution", (1, 3, 8, 8), (3, 2, 1, 3, 3), out_dims=(1, 6, 6, 6))
    assert irrun.validate(xml).diagnostics == []


@pytest.mark.parametrize("attrs, code", [
    ({"strides": "0,1"}, "E-ATTR-RANGE"),
    ({"strides": "1"}, "E-ATTR-LENGTH"),
    ({"auto_pad": "notset"}, "E-ATTR-ENUM"),
])
def test_bad_attributes(attrs, code, tmp_path):
    data = {"strides": "1,1", "pads_begin": "0,0", "pads_end": "0,0", "dilations": "1,1", **attrs}
    xml = hand_written_conv(tmp_path, "Convolution", (1, 3, 8, 8), (6, 3, 3, 3), data, out_dims=(1, 6, 6, 6))
    assert code in irrun.validate(xml).codes()


def test_attribute_lengths_checked_against_filter_when_data_rank_is_dynamic(tmp_path):
    xml = hand_written_conv(tmp_path, "Convolution", None, (6, 3, 3, 3),
                            {"strides": "1,1,1", "pads_begin": "0,0", "pads_end": "0,0", "dilations": "1,1"})
    report = irrun.validate(xml)
    assert [d.code for d in report.errors] == ["E-ATTR-LENGTH"], [d.format() for d in report.diagnostics]


def test_backprop_negative_output_size(tmp_path):
    # (1 - 1) * 1 + 3 - 2 - 2 = -1: OpenVINO infers "?" and its CPU plugin then fails to compile.
    data = {"strides": "1,1", "pads_begin": "2,2", "pads_end": "2,2", "dilations": "1,1"}
    xml = hand_written_conv(tmp_path, "ConvolutionBackpropData", (1, 4, 1, 1), (4, 2, 3, 3), data)
    (error,) = irrun.validate(xml).errors
    assert error.layer.name == "the_conv" and "would be negative" in error.message


def test_kernel_larger_than_padded_input(tmp_path):
    xml = hand_written_conv(tmp_path, "Convolution", (1, 3, 2, 2), (6, 3, 3, 3), out_dims=(1, 6, 1, 1))
    (error,) = irrun.validate(xml).errors
    assert error.layer.name == "the_conv" and "larger than spatial dim 2" in error.message


@pytest.mark.parametrize("channels, out, spatial, kernel, strides, dilations, pads, auto_pad, batch", [
    (512, 64, [7, 7], [3, 3], [1, 1], [1, 1], ([1, 1], [1, 1]), "explicit", 1),     # ResNet's last stage
    (128, 96, [20, 20], [3, 3], [2, 2], [1, 1], ([1, 1], [1, 1]), "explicit", 2),   # a strided one, two samples
    (64, 32, [9, 12], [3, 3], [2, 1], [2, 2], ([2, 0], [1, 3]), "explicit", 1),     # dilated, uneven pads
    (96, 48, [11, 10], [5, 3], [1, 2], [1, 1], ([0, 0], [0, 0]), "same_upper", 1),
    (64, 40, [16, 16], [2, 2], [1, 1], [1, 1], ([0, 0], [0, 0]), "valid", 1),     # 225 positions
])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_channels_last_columns(channels, out, spatial, kernel, strides, dilations, pads, auto_pad, batch, dtype,
                               monkeypatch, tmp_path):
    """2-D layers of 64 input channels or more over at most 256 output positions, each kernel on one
    core: columns copied channels-last, by the filter laid out so at load; OpenVINO's output for
    every stride, dilation, padding and batch.  Not for a filter made at load (f16 weights'
    Convert: the layout would stay beside it), whose layer keeps im2col's columns (f16 data
    computed in f32, as the CPU plugin does)."""
    calls = []
    run = im2col.channels_last_columns_times_filter
    monkeypatch.setattr(im2col, "channels_last_columns_times_filter", lambda *a: calls.append(1) or run(*a))
    monkeypatch.setattr(irrun.pairing, "one_core_a_kernel", lambda: True)
    x = ops.parameter([batch, channels, *spatial], dtype, name="x")
    w = (rand(out, channels, *kernel, seed=3) / np.sqrt(channels * np.prod(kernel))).astype(dtype)
    node = conv(x, ops.constant(w), strides, pads[0], pads[1], dilations, auto_pad)
    compare(model_of(node, x), [rand(batch, channels, *spatial, seed=4).astype(dtype)], tmp_path,
            **(F16 if dtype == np.float16 else {}))
    assert bool(calls) == (dtype == np.float32), calls
