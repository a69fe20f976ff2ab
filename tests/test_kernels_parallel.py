"""The fast kernel paths (Winograd, depthwise blocks, long 1-D kernels, kernels in parts over the
thread pool) against OpenVINO, each checked to be taken, and multi-threaded results against
single-threaded ones; the thread pool's settings (irrun/threads.py)."""
import os
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import openvino as ov
import openvino.opset13 as ops
import pytest

import irrun
from irrun import pairing, threads
from irrun.errors import UsageError
from irrun.ops import convolution, depthwise, im2col, row_taps, winograd
from ovutil import WINOGRAD_ERROR, assert_close, compare, run_in_threads, run_openvino, save


def rand(*shape, seed=0, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def model_of(node, *params):
    return ov.Model([ops.result(node)], list(params))


def spy(monkeypatch, module, name):
    calls = []
    original = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a, **k: calls.append(1) or original(*a, **k))
    return calls


def record_parts(monkeypatch, what):
    """A list that gets what(fn, ranges) of every `threads.run_parts` call from here on."""
    recorded = []
    run_parts = threads.run_parts
    monkeypatch.setattr(threads, "run_parts", lambda fn, ranges: recorded.append(what(fn, ranges)) or run_parts(fn, ranges))
    return recorded


def conv3x3(ci, co, size, batch=1, pads=(1, 1), auto_pad="explicit", seed=0, grouped=False):
    x = ops.parameter([batch, ci, *size], np.float32, name="x")
    w = rand(co, ci, 3, 3, seed=seed + 1, scale=1 / np.sqrt(9 * ci))
    if grouped:
        node = ops.group_convolution(x, ops.constant(w[None]), [1, 1], [pads[0]] * 2, [pads[1]] * 2, [1, 1], auto_pad)
    else:
        node = ops.convolution(x, ops.constant(w), [1, 1], [pads[0]] * 2, [pads[1]] * 2, [1, 1], auto_pad)
    return model_of(node, x), [rand(batch, ci, *size, seed=seed)]


# ---------------------------------------------------------------- Winograd

@pytest.mark.parametrize("ci, co, size, batch, pads, auto_pad, grouped", [
    (128, 128, [14, 14], 1, (1, 1), "explicit", False),
    (128, 160, [15, 17], 2, (1, 1), "explicit", False),     # tiles past the edge, two samples
    (144, 128, [16, 20], 1, (0, 2), "explicit", False),     # asymmetric pads
    (128, 128, [14, 18], 1, (0, 0), "same_upper", False),
    (128, 128, [16, 16], 1, (0, 0), "valid", False),
    (128, 128, [14, 14], 1, (1, 1), "explicit", True),      # GroupConvolution with one group
], ids=["square", "ragged-batch2", "asymmetric", "same_upper", "valid", "one-group"])
def test_winograd_f23_matches_openvino(ci, co, size, batch, pads, auto_pad, grouped, monkeypatch, tmp_path):
    """F(2,3) (for 128+ channels): within the standard bound (rtol 1e-4, atol 1e-5)."""
    monkeypatch.setenv("IRRUN_WINOGRAD", "2")
    calls = spy(monkeypatch, convolution, "winograd_conv")
    model, feeds = conv3x3(ci, co, size, batch, pads, auto_pad, grouped=grouped)
    compare(model, feeds, tmp_path)
    assert calls, "Winograd was not used"


def test_winograd_releases_the_mapped_filter(monkeypatch, tmp_path):
    """The filter Winograd keeps transformed leaves memory at load (its mapped pages dropped); it
    still reads back right when asked for (intermediates="all"), and the output is OpenVINO's."""
    from irrun.weights import Weights
    released = []
    release = Weights.release
    monkeypatch.setattr(Weights, "release", lambda self, array: released.append(array.shape) or release(self, array))
    monkeypatch.setenv("IRRUN_WINOGRAD", "2")
    calls = spy(monkeypatch, convolution, "winograd_conv")
    model, feeds = conv3x3(128, 128, [14, 14])
    xml = save(model, tmp_path / "m")
    m = irrun.load(xml)
    assert released == [(128, 128, 3, 3)]
    got = m.infer(feeds, intermediates="all")
    assert calls
    assert_close(got[m.outputs[0].name], run_openvino(xml, feeds)[0])
    (weights,) = [v for v in got.values() if v.shape == (128, 128, 3, 3)]
    np.testing.assert_array_equal(weights, rand(128, 128, 3, 3, seed=1, scale=1 / np.sqrt(9 * 128)))


def test_winograd_f43_within_documented_bound(monkeypatch, tmp_path):
    """F(4,3) (IRRUN_WINOGRAD=4): within 1e-4 of the output's largest magnitude (documented in
    irrun/ops/winograd.py and the README)."""
    monkeypatch.setenv("IRRUN_WINOGRAD", "4")
    calls = spy(monkeypatch, convolution, "winograd_conv")
    model, feeds = conv3x3(64, 64, [28, 30], batch=2)
    xml = save(model, tmp_path)
    expected = run_openvino(xml, feeds)[0]
    got = irrun.load(xml).infer(feeds)
    (value,) = got.values()
    assert calls
    scale = np.abs(expected).max()
    np.testing.assert_allclose(value, expected, rtol=0, atol=1e-4 * scale)


@pytest.mark.parametrize("setting, ci, size, taken", [
    ("2", 128, [14, 14], True), ("2", 64, [56, 56], False), ("2", 512, [7, 7], False),
    ("off", 128, [14, 14], False), ("4", 32, [28, 28], True), ("4", 16, [28, 28], False),
])
@pytest.mark.parametrize("count", [1, 2])
def test_winograd_setting(setting, ci, size, taken, count, monkeypatch, tmp_path):
    """IRRUN_WINOGRAD=2, 4 and off, on any number of threads."""
    before = threads.threads()
    threads.set_threads(count)
    monkeypatch.setenv("IRRUN_WINOGRAD", setting)
    calls = spy(monkeypatch, convolution, "winograd_conv")
    model, feeds = conv3x3(ci, ci, size)
    try:
        compare(model, feeds, tmp_path, **({} if setting != "4" else dict(atol=1e-4, rtol=1e-3)))
    finally:
        threads.set_threads(before)
    assert bool(calls) == taken


@pytest.mark.parametrize("ci, co, size, cores, tile", [
    (64, 64, [28, 28], "one", 4), (64, 64, [28, 30], "two", 4),
    (64, 64, [14, 14], "two", 4), (64, 64, [13, 14], "two", None),     # too few outputs
    (32, 32, [40, 40], "two", None),                                    # too few channels
    (64, 128, [28, 28], "two", 4),
    (128, 128, [14, 14], "one", 4), (128, 128, [20, 20], "two", 4),   # (one block, in two parts)
    (256, 256, [14, 14], "two", 4),                                     # F(4,3)'s filter 9 MiB
    (256, 256, [14, 14], "one", 2),                                     # over 8 MiB on one thread
    (384, 384, [14, 14], "two", None),                                  # 20 MiB; F(2,3)'s 9 MiB
    (384, 384, [14, 14], "one", 2),
    (512, 512, [7, 7], "one", None),
    # two processes, each running its half of a layer on one core: the one-thread rule
    (64, 64, [28, 30], "paired", 4), (256, 256, [14, 14], "paired", 2), (384, 384, [14, 14], "paired", 2),
])
def test_winograd_auto_rule(ci, co, size, cores, tile, monkeypatch, tmp_path):
    """By default ("auto"): F(4,3) from 64 channels over 14x14 outputs where its transformed filter
    fits 16 MiB (8 MiB on one thread, or in a network run in two processes), F(2,3) from 128 over
    14x14 where its fits 4 MiB (at any size on one thread); within the standard bound of OpenVINO
    either way.  ("two": two threads in one process, `IRRUN_PROCESSES=1`.)"""
    monkeypatch.delenv("IRRUN_WINOGRAD", raising=False)
    monkeypatch.delenv("IRRUN_PROCESSES", raising=False)
    if cores == "two":
        monkeypatch.setenv("IRRUN_PROCESSES", "1")
    tiles = []
    run = convolution.winograd_conv
    monkeypatch.setattr(convolution, "winograd_conv", lambda x, f, *a: tiles.append(f.m) or run(x, f, *a))
    before = threads.threads()
    threads.set_threads(1 if cores == "one" else pairing.PAIRED_THREADS)
    model, feeds = conv3x3(ci, co, size)
    try:
        if cores == "paired" and not pairing.paired_processes():
            pytest.skip("no paired runs on this machine (Linux on x86-64, two CPUs or more)")
        # (F(4,3) within its documented bound: `test_winograd_error_against_float64`)
        compare(model, feeds, tmp_path, **({"atol": WINOGRAD_ERROR[4]} if tile == 4 else {}))
    finally:
        threads.set_threads(before)
    assert tiles == ([] if tile is None else [tile])


@pytest.mark.parametrize("channels, size", [(128, 20), (256, 28)])
def test_winograd_error_against_float64(channels, size):
    """The documented error at unit output scale: F(2,3) within 4e-6, F(4,3) within 3e-5 of float64."""
    x, w = rand(1, channels, size, size), rand(channels, channels, 3, 3, seed=1, scale=1 / np.sqrt(9 * channels))
    geo = convolution.Geometry((1, 1), (1, 1), (1, 1), (1, 1), (0, 0), "explicit")
    exact = convolution.conv_forward(x.astype(np.float64), w[None].astype(np.float64), geo)
    whole, counts = [(-1, size + 1), (-1, size + 1)], [size, size]
    for m, bound in WINOGRAD_ERROR.items():
        got = winograd.winograd_conv(x, winograd.WinogradFilter(w, m, np.float32), whole, counts)
        assert np.abs(got - exact).max() <= bound


def test_winograd_in_tile_row_blocks(two_threads, monkeypatch, tmp_path):
    """F(4,3) (the default rule) over 64 channels at 57x58, two samples: blocks of 3 tile rows, the
    last one short, run in parts on two threads; OpenVINO's output, and the bits of one thread."""
    monkeypatch.delenv("IRRUN_WINOGRAD", raising=False)
    model, feeds = conv3x3(64, 64, [57, 58], batch=2)
    xml = save(model, tmp_path)
    loaded = irrun.load(xml)
    splits = record_parts(monkeypatch, lambda fn, ranges: len(ranges))
    calls = spy(monkeypatch, convolution, "winograd_conv")
    parallel = loaded.infer(feeds)[0]
    assert calls and splits[0] == 2     # (the blocks; not the GEMMs of one block cut in two)
    assert_close(parallel, run_openvino(xml, feeds)[0])
    threads.set_threads(1)
    np.testing.assert_array_equal(parallel, irrun.load(xml).infer(feeds)[0])


@pytest.mark.parametrize("shape", [[1, 256, 14, 14], [2, 256, 17, 15]], ids=["resnet", "batch-cropped"])
def test_winograd_one_block_in_parts(shape, two_threads, monkeypatch, tmp_path):
    """ResNet's 256 -> 256 layer at 14x14 (F(2,3) here, IRRUN_WINOGRAD=2, its 4 MiB filter
    outweighing the tiles: one block), and two samples at 17x15 (tiles cropped on both axes), while
    the pool owns the cores: the tiles transformed in two parts by input channel, then multiplied
    and put back in two parts by output channel; OpenVINO's output, and one thread's within float
    rounding (OpenBLAS rounds a GEMM of 128 rows apart from one of 256 in the last bit; Winograd's
    transforms carry that to 1.5e-6)."""
    monkeypatch.setenv("IRRUN_WINOGRAD", "2")
    xml, loaded = convolution_alone(shape, (256, 256, 3, 3), 1, 1, tmp_path / "one-block")
    splits = record_parts(monkeypatch, lambda fn, ranges: (fn.__qualname__, list(ranges)))
    calls = spy(monkeypatch, convolution, "winograd_conv")
    image = rand(*shape, seed=7)
    parallel = loaded.infer([image])[0]
    assert calls and [ranges for name, ranges in splits if name.startswith("_one_block_in_parts")] == \
        [[(0, 128), (128, 256)]] * 2
    assert_close(parallel, run_openvino(xml, [image])[0], rtol=1e-4, atol=1e-5)
    threads.set_threads(1)
    np.testing.assert_allclose(parallel, irrun.load(xml).infer([image])[0], rtol=1e-5, atol=5e-6)


@pytest.mark.parametrize("m, ci, co", [(2, 256, 200), (4, 128, 131)], ids=["F23-256", "F43-ragged-blocks"])
def test_winograd_filter_transformed_in_parts(m, ci, co, two_threads, monkeypatch):
    """A large filter is transformed at load in parts (blocks of output channels, the last one
    short): every block is written, the bits are those of one thread, and U is G g G^T."""
    w = rand(co, ci, 3, 3, seed=3)
    splits = record_parts(monkeypatch, lambda fn, ranges: len(ranges))
    parallel = winograd.WinogradFilter(w, m, np.float32).u
    assert splits == [2]
    threads.set_threads(1)
    np.testing.assert_array_equal(parallel, winograd.WinogradFilter(w, m, np.float32).u)
    _, g, _ = winograd.TRANSFORMS[m]
    expected = np.einsum("ik,ockl,jl->ijoc", g, w.astype(np.float64), g).reshape(len(g) ** 2, co, ci)
    np.testing.assert_allclose(parallel, expected, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- depthwise and long 1-D kernels

@pytest.mark.parametrize("channels, multiplier, size, kernel, stride, dilation, path", [
    (16, 1, [23, 19], [3, 3], [1, 1], [1, 1], "rows"),            # by rows, few channels
    (144, 1, [12, 11], [5, 5], [1, 1], [2, 1], "rows"),           # by rows, dilated
    (40, 1, [31], [5], [1], [2], "rows"),                         # 1-D by rows
    (24, 1, [5, 6, 7], [3, 2, 3], [1, 1, 1], [1, 2, 1], "rows"),  # 3-D by rows
    (16, 1, [23, 19], [3, 3], [2, 2], [1, 1], "rows"),            # strided: two phases of columns
    (40, 1, [23, 20], [5, 5], [1, 3], [1, 2], "rows"),            # three phases, dilated, one short
    (8, 1, [9, 17], [3, 2], [2, 4], [1, 1], "rows"),              # a phase no tap reads
    (72, 1, [31], [5], [3], [2], "rows"),                         # 1-D, strided and dilated
    (8, 1, [5, 6, 7], [3, 2, 3], [1, 2, 1], [1, 1, 2], "rows"),   # 3-D, strided
    (16, 2, [23, 19], [3, 3], [2, 1], [1, 1], "taps"),            # tap by tap, blocks of channels
    (192, 1, [15, 14], [5, 5], [2, 2], [1, 1], "einsum large"),   # einsum over channels-last windows
    (192, 1, [9, 10], [3, 3], [1, 1], [1, 1], "einsum"),          # too many channels for rows
    (160, 2, [9, 10], [3, 3], [1, 2], [2, 1], "einsum"),          # einsum with a multiplier, dilated
    (24, 3, [11, 12], [3, 3], [2, 1], [1, 1], "einsum"),          # einsum: 72 output channels
    (32, 2, [11, 12], [3, 3], [1, 1], [1, 1], "einsum"),          # a multiplier: not by rows
    (170, 1, [31], [5], [3], [2], "einsum large"),                # 1-D
    (168, 1, [5, 6, 7], [3, 2, 3], [1, 2, 1], [1, 1, 2], "einsum large"),  # 3-D, einsum
    (240, 1, [14, 14], [5, 5], [1, 1], [1, 1], "rows beyond"),    # rows beyond their channels
    (192, 1, [12, 11], [3, 3], [2, 2], [1, 1], "einsum large"),   # strided: rows only to their channels
    (192, 1, [6, 80], [3, 3], [1, 1], [1, 1], "einsum large"),    # rows' repeated filter too large
])
@pytest.mark.parametrize("block", [7, depthwise.DEPTHWISE_BLOCK_ELEMENTS])
def test_depthwise(channels, multiplier, size, kernel, stride, dilation, path, block, monkeypatch, tmp_path):
    """Each kernel against OpenVINO.  "einsum": where rows could take the layer too, they are
    held to their channel counts (ROWS_FILTER_ELEMENTS 0); "rows beyond": rows beyond those, their
    filter small enough; "einsum large": rows' filter repeated along an output row too large."""
    monkeypatch.setattr(depthwise, "DEPTHWISE_BLOCK_ELEMENTS", block)
    if path == "einsum":
        monkeypatch.setattr(depthwise, "ROWS_FILTER_ELEMENTS", 0)
    path = path.split()[0]
    calls = {name: spy(monkeypatch, depthwise, f"_depthwise_{name}") for name in ("rows", "einsum", "taps")}
    rank = len(size)
    x = ops.parameter([2, channels, *size], np.float32, name="x")
    w = rand(channels, multiplier, 1, *kernel, seed=1)
    pads = [k // 2 for k in kernel]
    node = ops.group_convolution(x, ops.constant(w), stride, pads, [1] * rank, dilation)
    compare(model_of(node, x), [rand(2, channels, *size)], tmp_path)
    assert {name for name, made in calls.items() if made} == {path}


@pytest.mark.parametrize("pads_begin, pads_end", [([2, 0], [1, 2]), ([0, 0], [0, 0])])
@pytest.mark.parametrize("channels, strides, path", [(192, [1, 2], "_depthwise_einsum"), (96, [1, 1], "_depthwise_rows")])
def test_depthwise_pads_as_it_turns_channels_last(pads_begin, pads_end, channels, strides, path, monkeypatch,
                                                  tmp_path):
    """The channels-last copy is also the padding (the einsum's: rows held to their channels)."""
    monkeypatch.setattr(depthwise, "ROWS_FILTER_ELEMENTS", 0)
    calls = spy(monkeypatch, depthwise, path)
    x = ops.parameter([1, channels, 13, 12], np.float32, name="x")
    node = ops.group_convolution(x, ops.constant(rand(channels, 1, 1, 3, 3, seed=1)), strides, pads_begin, pads_end,
                                 [1, 1])
    compare(model_of(node, x), [rand(1, channels, 13, 12)], tmp_path)
    assert calls


@pytest.mark.parametrize("channels, path", [(192, "_depthwise_einsum"), (48, "_depthwise_rows")])
def test_depthwise_negative_pads_agree_with_tap_by_tap(channels, path, monkeypatch):
    """Negative pads crop the input as the channels-last copy is made.  OpenVINO runs none (its
    CPU plugin does not compile them, its reference evaluation fails), so the depthwise kernels
    are checked against the tap-by-tap one."""
    geo = convolution.Geometry((1, 2), (1, 1), (1, -1), (-2, 1), (0, 0), "explicit")
    x, w = rand(2, channels, 13, 12), rand(channels, 1, 1, 3, 3, seed=1)
    monkeypatch.setattr(depthwise, "ROWS_FILTER_ELEMENTS", 0)
    calls = spy(monkeypatch, depthwise, path)
    got = convolution.conv_forward(x, w, geo)
    assert calls
    monkeypatch.setattr(depthwise, "DEPTHWISE_EINSUM_CHANNELS", 1 << 30)
    monkeypatch.setattr(depthwise, "DEPTHWISE_ROWS_CHANNELS", 0)
    taps = spy(monkeypatch, depthwise, "_depthwise_taps")
    np.testing.assert_allclose(got, convolution.conv_forward(x, w, geo), rtol=1e-6, atol=1e-6)
    assert len(calls) == 1 and taps


@pytest.mark.parametrize("c_out, kernel, stride, length", [(64, 512, 4, 4000), (8, 33, 2, 301), (3, 40, 16, 400)])
def test_long_1d_kernel_single_channel(c_out, kernel, stride, length, monkeypatch, tmp_path):
    """An audio front end: one input channel, a long kernel, a stride; positions-major im2col (the
    transforms, which take the longest kernels: tests/test_fft_convolution.py, turned off)."""
    monkeypatch.setenv("IRRUN_FFT", "off")
    calls = spy(monkeypatch, convolution, "_im2col")
    x = ops.parameter([2, 1, length], np.float32, name="x")
    w = rand(c_out, 1, kernel, seed=1, scale=1 / np.sqrt(kernel))
    node = ops.convolution(x, ops.constant(w), [stride], [kernel // 4], [0], [1])
    compare(model_of(node, x), [rand(2, 1, length)], tmp_path)
    assert calls


@pytest.mark.parametrize("c_in, c_out, kernel, stride, length, pads", [
    (1, 64, 512, 4, 16000, (0, 0)),      # the audio net's front end, in parts
    (3, 8, 33, 2, 301, (0, 1)),          # several input channels; a pad end no window reaches
    (2, 5, 16, 16, 200, (0, 0)),         # windows that do not overlap, 8 elements left over
])
def test_long_1d_kernel_one_sample_unpadded(c_in, c_out, kernel, stride, length, pads, monkeypatch, tmp_path):
    """One sample whose windows need no padding: positions-major blocks from one view of the
    windows (`_positions_major_blocks`), against OpenVINO; with two threads and one (the transforms
    turned off)."""
    monkeypatch.setenv("IRRUN_FFT", "off")
    calls = spy(monkeypatch, im2col, "_positions_major_blocks")
    x = ops.parameter([1, c_in, length], np.float32, name="x")
    w = rand(c_out, c_in, kernel, seed=1, scale=1 / np.sqrt(kernel * c_in))
    node = ops.convolution(x, ops.constant(w), [stride], [pads[0]], [pads[1]], [1])
    data = rand(1, c_in, length)
    got = compare(model_of(node, x), [data], tmp_path)
    assert calls
    before = threads.threads()
    threads.set_threads(1)
    try:
        alone = irrun.load(tmp_path / "model.xml").infer([data])
    finally:
        threads.set_threads(before)
    for key in got:
        np.testing.assert_allclose(got[key], alone[key], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("x_shape, kernel, strides, path", [
    ((1, 96, 30, 29), (3, 3), (1, 1), "_depthwise_rows"),
    ((1, 192, 30, 29), (3, 3), (1, 2), "_depthwise_einsum"),
    ((2, 64, 301), (5,), (1,), "_depthwise_rows"),            # 1-D: parts along the run
    ((1, 48, 30, 29), (3, 3), (2, 2), "_depthwise_rows"),     # strided: phases in each part
    ((1, 96, 58, 57), (3, 3), (2, 2), "_depthwise_inside"),   # channels-last data (as a 1x1 layer writes it)
])
def test_depthwise_in_parts_equal_one_thread(x_shape, kernel, strides, path, two_threads, monkeypatch, tmp_path):
    """A large depthwise layer on two threads gives the bits of one thread, and OpenVINO's values."""
    monkeypatch.setattr(threads, "MIN_PART_ELEMENTS", 1)
    monkeypatch.setattr(depthwise, "ROWS_FILTER_ELEMENTS", 0)     # (rows held to their channels)
    w = rand(x_shape[1], 1, 1, *kernel, seed=1)
    if path == "_depthwise_inside":       # (channels innermost in memory)
        x = np.moveaxis(rand(x_shape[0], *x_shape[2:], x_shape[1]), -1, 1)
    else:
        x = rand(*x_shape)
    rank = len(kernel)
    geo = convolution.Geometry(strides, (1,) * rank, (1,) * rank, (1,) * rank, (0,) * rank, "explicit")
    calls = spy(monkeypatch, depthwise, path)
    splits = record_parts(monkeypatch, lambda fn, ranges: len(ranges))
    parallel = convolution.conv_forward(x, w, geo)
    assert splits == [2] and calls
    threads.set_threads(1)
    np.testing.assert_array_equal(parallel, convolution.conv_forward(x, w, geo))
    data = ops.parameter(list(x_shape), np.float32, name="x")
    node = ops.group_convolution(data, ops.constant(w), list(strides), [1] * rank, [1] * rank, [1] * rank)
    expected, = run_openvino(save(model_of(node, data), tmp_path), [np.ascontiguousarray(x)])
    assert_close(parallel, expected)


def test_im2col_blocks_in_parts_equal_one_thread(two_threads, monkeypatch):
    """im2col blocks on two threads (BLAS single-threaded inside) give the bits of one thread."""
    monkeypatch.setattr(threads, "MIN_PART_ELEMENTS", 1)
    monkeypatch.setattr(im2col, "COLUMN_BLOCK_ELEMENTS", 3000)    # the same blocks either way
    x, w = rand(1, 3, 41, 37), rand(1, 16, 3, 5, 5, seed=1)
    geo = convolution.Geometry((2, 2), (1, 1), (2, 2), (2, 2), (0, 0), "explicit")
    calls = spy(monkeypatch, threads, "run_parts")
    parallel = convolution.conv_forward(x, w, geo)
    assert calls
    threads.set_threads(1)
    np.testing.assert_array_equal(parallel, convolution.conv_forward(x, w, geo))


@pytest.mark.parametrize("total, step, parts, expected", [
    (112, 31, 2, 28),     # 4 blocks of 28 (56 + 56 rows per core), not 31, 31, 31, 19 (62 + 50)
    (7, 16, 2, 4),        # one block that fits would leave a core idle: 4 + 3
    (10, 3, 1, 3),        # one part: the step as given
    (5, 1, 2, 1),         # never below one row
    (3, 8, 4, 1),         # more parts than rows: one row each
])
def test_balanced_blocks(total, step, parts, expected):
    got = threads.balanced_step(total, step, parts)
    assert got == expected and got <= max(step, 1)
    blocks = -(-total // got)
    assert blocks % parts == 0 or blocks == total


def test_im2col_columns_buffer_reused_across_blocks(monkeypatch):
    """Blocks of unequal length (the last one short) copy into one buffer per part: stale columns
    of a longer block must not leak into a shorter one's product."""
    monkeypatch.setattr(im2col, "COLUMN_BLOCK_ELEMENTS", 1000)
    x, w = rand(2, 3, 23, 19), rand(1, 8, 3, 3, 3, seed=2)
    geo = convolution.Geometry((1, 2), (1, 1), (1, 0), (2, 1), (0, 0), "explicit")
    blocked = convolution.conv_forward(x, w, geo)
    monkeypatch.setattr(im2col, "COLUMN_BLOCK_ELEMENTS", 1 << 30)
    np.testing.assert_allclose(blocked, convolution.conv_forward(x, w, geo), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- elementwise kernels in parts

ACTIVATIONS = {
    "relu": ops.relu, "sigmoid": ops.sigmoid, "tanh": ops.tanh,
    "clamp": lambda x: ops.clamp(x, -0.5, 1.5),
    "gelu": lambda x: ops.gelu(x, "erf"), "gelu_tanh": lambda x: ops.gelu(x, "tanh"),
    "swish": ops.swish, "swish_beta": lambda x: ops.swish(x, ops.constant(np.float32(0.7))),
    "hswish": ops.hswish, "hsigmoid": ops.hsigmoid, "mish": ops.mish,
    "softmax": lambda x: ops.softmax(x, 1), "softmax_last": lambda x: ops.softmax(x, -1),
    "mvn": lambda x: ops.mvn(x, ops.constant(np.array([2, 3], np.int64)), True, 1e-6, "inside_sqrt"),
    "add": lambda x: ops.add(x, ops.constant(rand(1, 64, 1, 1, seed=3))),
    "multiply": lambda x: ops.multiply(x, x),
    "avg_pool": lambda x: ops.avg_pool(x, [2, 2], [1, 1], [0, 0], [3, 3], False),
    "max_pool": lambda x: ops.max_pool(x, [2, 2], [1, 1], [1, 1], [1, 1], [3, 3]).output(0),
}


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_large_tensors_in_parts(name, two_threads, monkeypatch, tmp_path):
    """Tensors large enough to run in parts, against OpenVINO; and the parts' result equals the
    whole's bit for bit (every kernel here computes each output from its own inputs alone)."""
    calls = spy(monkeypatch, threads, "run_parts")
    x = ops.parameter([2, 64, 64, 128], np.float32, name="x")     # 1 Mi elements: two parts of 512 Ki
    data = rand(2, 64, 64, 128) * np.float32(3)
    got = compare(model_of(ACTIVATIONS[name](x), x), [data], tmp_path, check_validate=False)
    assert calls, "no part ran on the pool"
    threads.set_threads(1)
    alone = irrun.load(tmp_path / "model.xml").infer([data])
    for key in got:
        np.testing.assert_array_equal(got[key], alone[key])


@pytest.mark.parametrize("count", [1, 2])
def test_kernels_of_several_passes_run_in_blocks(count, monkeypatch, tmp_path):
    """A kernel of several passes (cost 2 or more) takes each part in blocks that stay in cache:
    blocks of several entries of the cut axis and pieces of one entry (a block size that divides
    nothing), an MVN across its whole axes; OpenVINO's values, and bit for bit those of one block."""
    monkeypatch.setattr(threads, "MIN_PART_ELEMENTS", 1 << 12)
    x = ops.parameter([12, 5, 15, 17], np.float32, name="x")
    y = ops.swish(ops.add(x, ops.constant(rand(1, 5, 1, 1, seed=2))))
    y = ops.hswish(ops.mish(ops.sigmoid(ops.multiply(y, ops.constant(np.float32(3))))))
    y = ops.mvn(ops.gelu(y, "erf"), ops.constant(np.array([1, 3], np.int64)), True, 1e-6, "inside_sqrt")
    data = [rand(12, 5, 15, 17, scale=3)]
    blocks = spy(monkeypatch, threads, "_in_blocks")
    before = threads.threads()
    threads.set_threads(count)
    try:
        for block in (997, 5 * 15 * 17 * 2 + 5):
            monkeypatch.setattr(threads, "PASS_BLOCK_ELEMENTS", block)
            got = compare(model_of(y, x), data, tmp_path, check_validate=False)
        monkeypatch.setattr(threads, "PASS_BLOCK_ELEMENTS", 1 << 40)
        whole = irrun.load(tmp_path / "model.xml").infer(data)
    finally:
        threads.set_threads(before)
    assert len(blocks) >= 2
    for key in got:
        np.testing.assert_array_equal(got[key], whole[key])


def test_networks_whose_convolutions_wake_blas_run_elementwise_kernels_whole(two_threads, monkeypatch, tmp_path):
    """A 1x1 convolution of 4 M multiply-adds (its GEMM on OpenBLAS's threads: too small for a
    convolution network), then a Sigmoid over 1 Mi elements: the Sigmoid runs whole; OpenVINO's
    values.  The Sigmoid alone still runs in parts."""
    calls = spy(monkeypatch, threads, "run_parts")
    x = ops.parameter([1, 4, 256, 256], np.float32, name="x")
    y = ops.sigmoid(ops.convolution(x, ops.constant(rand(16, 4, 1, 1, seed=1)), [1, 1], [0, 0], [0, 0], [1, 1]))
    data = rand(1, 4, 256, 256)
    compare(model_of(y, x), [data], tmp_path, check_validate=False)
    model = irrun.load(tmp_path / "model.xml")
    plan = model._plan
    assert plan.convolutions_wake_blas and not plan.convolution_network and not plan.blas_network
    calls.clear()
    model.infer([data])
    assert not calls
    (tmp_path / "alone").mkdir()
    s = ops.parameter([1, 16, 256, 256], np.float32, name="s")
    compare(model_of(ops.sigmoid(s), s), [rand(1, 16, 256, 256)], tmp_path / "alone", check_validate=False)
    assert calls


def test_networks_whose_gemms_keep_blas_threads_run_their_kernels_whole(two_threads, monkeypatch, tmp_path):
    """A MatMul that wakes OpenBLAS's threads, then a Sigmoid over 1 Mi elements: the Sigmoid runs
    whole (OpenBLAS's threads spin on the other core after the GEMM); OpenVINO's values."""
    calls = spy(monkeypatch, threads, "run_parts")
    x = ops.parameter([2, 64, 64, 128], np.float32, name="x")
    y = ops.sigmoid(ops.matmul(x, ops.constant(rand(128, 128, seed=1, scale=0.1)), False, False))
    compare(model_of(y, x), [rand(2, 64, 64, 128)], tmp_path, check_validate=False)
    model = irrun.load(tmp_path / "model.xml")
    assert model._plan.blas_network and not model._plan.convolution_network
    calls.clear()
    model.infer([rand(2, 64, 64, 128)])
    assert not calls


def test_f16_input_widened_in_parts(two_threads, monkeypatch, tmp_path):
    calls = spy(monkeypatch, threads, "run_parts")
    x = ops.parameter([2, 64, 64, 128], np.float16, name="x")
    data = rand(2, 64, 64, 128).astype(np.float16)
    compare(model_of(ops.convert(x, ov.Type.f32), x), [data], tmp_path)
    assert calls


def test_small_tensors_run_whole(two_threads, monkeypatch, tmp_path):
    calls = spy(monkeypatch, threads, "run_parts")
    x = ops.parameter([1, 16, 8, 8], np.float32, name="x")
    compare(model_of(ops.sigmoid(ops.add(x, x)), x), [rand(1, 16, 8, 8)], tmp_path)
    assert not [c for c in calls]


def test_in_place_add_of_overlapping_views_runs_whole(two_threads, monkeypatch):
    """An input written in place must not be read by another part: with a view of it as the other
    input, the ufunc runs whole (NumPy then handles the overlap)."""
    from irrun.ops.arithmetic import _ufunc_in_parts
    monkeypatch.setattr(threads, "MIN_PART_ELEMENTS", 1)
    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    expected = a + a[::-1]
    add = _ufunc_in_parts(np.add, 0, a.shape, a.dtype)
    np.testing.assert_array_equal(add(a, a[::-1]), expected)


# ---------------------------------------------------------------- the pool

def test_thread_count_settings(monkeypatch):
    before = threads.threads()
    try:
        monkeypatch.setenv("IRRUN_THREADS", "1")
        assert threads.default_threads() == 1
        monkeypatch.setenv("IRRUN_THREADS", "many")
        with pytest.raises(UsageError, match="IRRUN_THREADS"):
            threads.default_threads()
        monkeypatch.delenv("IRRUN_THREADS")
        assert threads.default_threads() == len(os.sched_getaffinity(0))
        for bad in (0, -1, 1.5, True):
            with pytest.raises(UsageError):
                threads.set_threads(bad)
        threads.set_threads(1)
        assert threads.threads() == 1 and threads.blas_threads() in (1, None)
        threads.set_threads(2)
        assert threads.blas_threads() in (2, None)
        with threads.single_threaded_blas():
            assert threads.blas_threads() in (1, None)
        assert threads.blas_threads() in (2, None)
    finally:
        threads.set_threads(before)


def test_bounds_and_split_axis():
    assert threads.bounds(10, 3) == [(0, 3), (3, 6), (6, 10)]
    assert threads.bounds(2, 4) == [(0, 1), (1, 2)]
    assert threads.split_axis((1, 64, 8), 2) == 1
    assert threads.split_axis((1, 64, 8), 2, whole_axes=(1,)) == 2
    assert threads.split_axis((1, 1), 2) is None


def test_a_failing_part_raises_after_all_parts_end(two_threads):
    done = []

    def part(a, b):
        if a:
            raise ValueError("part failed")
        done.append((a, b))

    with pytest.raises(ValueError, match="part failed"):
        threads.run_parts(part, [(0, 1), (1, 2)])
    assert done == [(0, 1)]


def test_parts_run_on_the_pool_threads_and_callers_share_it(two_threads):
    """The parts after the first run on the pool's workers; callers in several threads at once
    all get every part run (the one holding the workers, the others running theirs themselves)."""
    names = threads.run_parts(lambda a, b: threading.current_thread().name, [(0, 1), (1, 2)])
    assert names[0] == threading.current_thread().name and names[1].startswith("irrun-")
    # one range is no part: what it runs may still split its own work (a single Winograd block's GEMMs)
    assert threads.run_parts(lambda a, b: threads.in_part(), [(0, 1)]) == [False]

    def caller(k, results):
        for _ in range(200):
            out = threads.run_parts(lambda a, b: (k, a, b), [(0, 1), (1, 2)])
            if out != [(k, 0, 1), (k, 1, 2)]:
                results.append(out)
                return
        results.append("ok")

    results = []
    assert run_in_threads(lambda k: caller(k, results), timeout=60)
    assert results == ["ok"] * 4


def test_blas_held_to_one_thread_from_any_thread(two_threads):
    """single_threaded_blas works in a thread other than the one that set BLAS's count (through
    threadpoolctl's controller, whose setter ignores every thread but the first to set it, a
    batch worker thread's convolution network ran beside BLAS's own threads)."""
    threads._set_blas_threads(2)           # (this thread sets the count first)
    seen = []

    def in_another_thread():
        with threads.single_threaded_blas():
            seen.append(threads.blas_threads())
        seen.append(threads.blas_threads())
    worker = threading.Thread(target=in_another_thread)
    worker.start()
    worker.join()
    assert seen == [1, 2]


@pytest.mark.parametrize("setter", ["one call", "read then set"])
def test_a_convolution_networks_run_holds_blas_to_one_thread_and_gives_its_count_back(two_threads, monkeypatch,
                                                                                     setter):
    """`network_parts` (a convolution network's run) sets BLAS to one thread and back, through
    OpenBLAS's setter that returns the count before or through a read and a set; a library
    already on one thread is not set back (nor at all, read then set)."""
    libs = threads._blas_libs()
    if not libs:
        pytest.skip("threadpoolctl cannot read BLAS's thread count here")
    calls = []
    for lib in libs:
        if setter == "read then set":
            monkeypatch.setattr(lib, "swap", lib._get_and_set)
        monkeypatch.setattr(lib, "set", lambda n, set=lib.set: calls.append(n) or set(n))
    threads._set_blas_threads(2)
    calls.clear()
    with threads.network_parts():
        assert threads.blas_threads() == 1
        with threads.single_threaded_blas():
            assert threads.blas_threads() == 1
        assert threads.blas_threads() == 1
    set_to_one = [1] if setter == "read then set" else []
    assert threads.blas_threads() == 2 and sorted(calls) == sorted((set_to_one + [2]) * len(libs))
    threads._set_blas_threads(1)
    calls.clear()
    with threads.network_parts():
        assert threads.blas_threads() == 1
    assert threads.blas_threads() == 1 and calls == []
    threads._set_blas_threads(2)


def test_a_setter_of_the_calling_threads_count_alone_is_not_used():
    """`openblas_set_num_threads_local` is taken as the one-call setter only where it sets the count
    other threads see (a setter of the caller's own count would leave BLAS's threads running beside
    a network's parts)."""
    counts, local = {"process": 2}, threading.local()

    def get():
        return getattr(local, "count", counts["process"])

    def put(n):
        counts["process"] = n

    def swap_process(n):
        before, counts["process"] = get(), n
        return before

    def swap_local(n):
        before, local.count = get(), n
        return before
    assert threads._sets_every_thread(swap_process, get, put) and counts["process"] == 2
    assert not threads._sets_every_thread(swap_local, get, put) and counts["process"] == 2
    # a process whose BLAS is on one thread is not asked (a second would start a BLAS thread)
    counts["process"] = 1
    local.__dict__.clear()
    asked = []
    assert not threads._sets_every_thread(lambda n: asked.append(n) or 1, get, put) and asked == []


def test_thread_count_set_while_blas_is_held_takes_effect_when_released(two_threads, monkeypatch):
    """set_threads inside a single_threaded_blas block (another thread's call, or the first use of
    `threads()`, which sets the default count) leaves BLAS on one thread until the block ends, then
    gives it the new count, not the one from before the block."""
    if threads.blas_threads() is None:
        pytest.skip("threadpoolctl cannot read BLAS's thread count here")
    with threads.single_threaded_blas():
        threads.set_threads(1)
        assert threads.blas_threads() == 1
        threads.set_threads(2)
        assert threads.blas_threads() == 1 and threads.threads() == 2
    assert threads.blas_threads() == 2
    with threads.single_threaded_blas():
        threads.set_threads(1)
    assert threads.blas_threads() == 1 and threads.threads() == 1
    threads.set_threads(2)
    monkeypatch.setattr(threads, "_threads", None)     # (a process whose first kernel runs inside a block)
    with threads.single_threaded_blas():
        assert threads.threads() == threads.default_threads() and threads.blas_threads() == 1
    assert threads.blas_threads() == threads.default_threads()


def test_without_threadpoolctl_blas_keeps_its_threads_and_gemms_stay_whole(two_threads, monkeypatch):
    """Where threadpoolctl cannot hold BLAS to one thread, kernels must not cut their GEMMs into
    parts (each would run on BLAS's threads too)."""
    monkeypatch.setattr(threads, "_blas_limiter", False)
    monkeypatch.setattr(threads, "_blas_found", False)
    with threads.single_threaded_blas():
        assert not threads.pool_owns_cores()
    monkeypatch.undo()
    with threads.single_threaded_blas():
        assert threads.pool_owns_cores()


def test_parts_keep_the_callers_numpy_error_state(two_threads):
    """A worker runs its part under the caller's np.errstate: an overflow the executor ignores must
    not warn from the pool's threads."""
    x = np.full(1 << 20, 1000, np.float32)
    out = np.empty_like(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="ignore"):
            threads.run_parts(lambda a, b: np.exp(x[a:b], out=out[a:b]), [(0, 1 << 19), (1 << 19, 1 << 20)])
    assert np.isinf(out).all()


def test_a_failing_first_part_waits_for_the_others(two_threads):
    """The caller's own part failing still waits for the workers' (they write into shared outputs)."""
    ended = []

    def part(a, b):
        if a == 0:
            raise ValueError("first part failed")
        time.sleep(0.05)
        ended.append(a)

    with pytest.raises(ValueError, match="first part failed"):
        threads.run_parts(part, [(0, 1), (1, 2)])
    assert ended == [1]


def test_load_threads_option_and_cli(tmp_path):
    xml = irrun.__file__.replace("irrun/__init__.py", "models/digits/model.xml")
    before = threads.threads()
    try:
        irrun.load(xml, threads=1)
        assert threads.threads() == 1
        with pytest.raises(UsageError):
            irrun.load(xml, threads=0)
    finally:
        threads.set_threads(before)
    done = subprocess.run([sys.executable, "-m", "irrun", "infer", xml, "--threads", "1", "-i",
                           xml.replace("model.xml", "digit7.npy")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "class 7" in done.stdout, done.stderr


def test_forked_child_runs_parts():
    """A child forked after the pool ran starts a pool of its own (the parent's threads are not
    there: without that, a part would wait forever)."""
    code = """
import os, numpy as np
from irrun import threads
threads.set_threads(2)
threads.MIN_PART_ELEMENTS = 1
out = np.empty(100)
threads.in_parts(lambda a, o: np.add(a, 1, out=o), out, np.zeros(100))
pid = os.fork()
if pid == 0:
    o = np.empty(100)
    threads.in_parts(lambda a, o: np.add(a, 2, out=o), o, np.zeros(100))
    os._exit(0 if o.sum() == 200 else 1)
print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""
    if not hasattr(os, "fork"):
        pytest.skip("no fork here")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "0", done.stderr


@pytest.mark.parametrize("name", ["hswish", "hsigmoid", "swish", "swish_beta", "mish", "gelu", "sigmoid", "clamp",
                                  "softmax"])
@pytest.mark.parametrize("shape", [[1, 8, 5, 5], [2, 64, 64, 128]], ids=["small", "in-parts"])
def test_activation_over_its_dying_input(name, shape, two_threads, tmp_path):
    """The activation may overwrite Add's output, which nobody reads after it: in place (HSwish,
    Swish and Mish read their input after their temporary is made, and write it last)."""
    x = ops.parameter(shape, np.float32, name="x")
    compare(model_of(ACTIVATIONS[name](ops.add(x, x)), x), [rand(*shape)], tmp_path, check_validate=False)


@pytest.mark.parametrize("cin, kernel, stride", [(3, 16, 16), (5, 17, 3)])
def test_positions_major_2d(cin, kernel, stride, monkeypatch, tmp_path):
    """A ViT's patch embedding: a 2-D kernel of 16+ taps per row makes positions-major columns."""
    calls = spy(monkeypatch, convolution, "_im2col")
    x = ops.parameter([2, cin, 64, 48], np.float32, name="x")
    w = rand(24, cin, kernel, kernel, seed=1, scale=1 / kernel)
    node = ops.convolution(x, ops.constant(w), [stride, stride], [1, 0], [0, 2], [1, 1])
    compare(model_of(node, x), [rand(2, cin, 64, 48)], tmp_path)
    assert calls


# ---------------------------------------------------------------- convolution networks: the pool owns the cores

@pytest.mark.parametrize("a_shape, b_shape, axis", [
    ((4, 8, 5), (4, 5, 6), "batch"), ((10, 7), (7, 3), "rows"), ((3, 7), (7, 10), "columns"),
    ((2, 1, 6, 5), (3, 5, 4), "rows"),
])
def test_matmul_in_parts_while_the_pool_owns_the_cores(a_shape, b_shape, axis, two_threads, monkeypatch):
    monkeypatch.setattr(threads, "PRODUCT_MACS_PER_PART", 1)
    splits = record_parts(monkeypatch, lambda fn, ranges: list(ranges))
    a, b = rand(*a_shape), rand(*b_shape, seed=1)
    threads.matmul(a, b)
    assert not splits                       # BLAS has its threads: one call
    with threads.single_threaded_blas():
        assert threads.pool_owns_cores()
        got = threads.matmul(a, b)
    expected = np.matmul(a, b)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    cut = {"batch": a_shape[0], "rows": a_shape[-2], "columns": b_shape[-1]}[axis]
    assert splits == [threads.bounds(cut, 2)]


def test_a_1x1_layers_product_of_13_m_macs_runs_in_two_parts(two_threads, monkeypatch):
    """The detector's 1x1 layers (64 -> 64 channels at 40 x 80): below a part of GEMM_MACS_PER_PART
    but in two parts as a single product, each the same dot products."""
    splits = record_parts(monkeypatch, lambda fn, ranges: list(ranges))
    w, x = rand(1, 64, 64), rand(1, 1, 64, 40 * 80, seed=1)
    assert 64 * 64 * 3200 < 2 * threads.GEMM_MACS_PER_PART
    with threads.single_threaded_blas():
        got = threads.matmul(w, x)
        # (each half as a part computes it, on one BLAS thread: OpenBLAS's AVX2 kernels on two
        # threads cut the product otherwise and round otherwise)
        halves = [np.matmul(w, x[..., :1600]), np.matmul(w, x[..., 1600:])]
    assert splits == [threads.bounds(3200, 2)]
    np.testing.assert_array_equal(got, np.concatenate(halves, -1))


def convolution_network():
    """Convolutions of 50-115 M MACs each: tap-eligible 64 -> 64, a 1x1 stride-2 projection,
    Winograd-eligible 128 -> 128 at 28x28, a strided 128 -> 256, and a classifier."""
    x = ops.parameter([1, 64, 56, 56], np.float32, name="x")

    def conv(data, c_in, c_out, k, stride):
        w = ops.constant(rand(c_out, c_in, k, k, seed=c_out + k, scale=1 / np.sqrt(c_in * k * k)))
        return ops.relu(ops.convolution(data, w, [stride] * 2, [k // 2] * 2, [k // 2] * 2, [1, 1]))
    y = conv(x, 64, 64, 3, 1)
    y = conv(y, 64, 128, 1, 2)
    y = conv(y, 128, 128, 3, 1)
    y = conv(y, 128, 256, 3, 2)
    pooled = ops.reduce_mean(y, ops.constant(np.array([2, 3], np.int64)), False)
    logits = ops.matmul(pooled, ops.constant(rand(256, 10, seed=9)), False, False)
    return model_of(logits, x)


def test_a_convolution_network_runs_its_kernels_in_parts_and_matches_openvino(two_threads, monkeypatch, tmp_path):
    """BLAS held to one thread for the whole run, im2col blocks (not the tap-by-tap kernel),
    Winograd's GEMMs and the GEMMs of whole-column convolutions cut on the pool; the outputs are
    OpenVINO's and, within float rounding, those of one thread."""
    monkeypatch.setenv("IRRUN_WINOGRAD", "2")
    model = convolution_network()
    xml = save(model, tmp_path / "net")
    loaded = irrun.load(xml)
    assert loaded._plan.convolution_network
    taps = spy(monkeypatch, convolution, "_shifted_taps")
    splits = record_parts(monkeypatch, lambda fn, ranges: len(ranges))
    matmuls = spy(monkeypatch, threads, "matmul")
    image = rand(1, 64, 56, 56, seed=3)
    expected = run_openvino(xml, [image])[0]
    parallel = loaded.infer([image])[0]
    assert not taps and matmuls and max(splits) == 2
    assert_close(parallel, expected, rtol=1e-4, atol=1e-5)
    threads.set_threads(1)
    np.testing.assert_allclose(parallel, irrun.load(xml).infer([image])[0], rtol=1e-5, atol=1e-6)


def convolution_alone(data_shape, filter_shape, stride, pad, path):
    """(xml, loaded model) of one convolution large enough to make a convolution network."""
    x = ops.parameter(data_shape, np.float32, name="x")
    fan_in = int(np.prod(filter_shape[1:]))
    w = ops.constant(rand(*filter_shape, seed=2, scale=1 / np.sqrt(fan_in)))
    xml = save(model_of(ops.convolution(x, w, [stride] * 2, [pad] * 2, [pad] * 2, [1, 1]), x), path)
    loaded = irrun.load(xml)
    assert loaded._plan.convolution_network
    return xml, loaded


def test_im2col_blocks_run_in_parts_for_their_gemms(two_threads, monkeypatch, tmp_path):
    """A strided 32 -> 64 layer at 80 x 160: its columns (0.9 Mi elements) are too few to split for
    their copy, its GEMMs (59 M multiply-adds) are not: two parts while the pool owns the cores."""
    xml, loaded = convolution_alone([1, 32, 80, 160], (64, 32, 3, 3), 2, 1, tmp_path / "strided")
    splits = record_parts(monkeypatch, lambda fn, ranges: len(ranges))
    image = rand(1, 32, 80, 160, seed=4)
    assert_close(loaded.infer([image])[0], run_openvino(xml, [image])[0], rtol=1e-4, atol=1e-5)
    assert splits == [2]


def test_one_block_of_columns_cut_along_the_input_channels(two_threads, monkeypatch, tmp_path):
    """ResNet's last stage, 512 -> 512 channels at 7 x 7 (116 M multiply-adds): its columns (4608 x 49)
    fit one block, which two parts copy and multiply half the input channels each, their products
    then added; OpenVINO's output, and one thread's within float rounding (the sum in another
    order).  (Two threads in one process: one core a kernel takes the channels-last columns.)"""
    monkeypatch.setenv("IRRUN_PROCESSES", "1")
    xml, loaded = convolution_alone([1, 512, 7, 7], (512, 512, 3, 3), 1, 1, tmp_path / "last-stage")
    splits = record_parts(monkeypatch, lambda fn, ranges: (fn.__qualname__, len(ranges)))
    image = rand(1, 512, 7, 7, seed=4)
    parallel = loaded.infer([image])[0]
    assert splits == [("_split_depth.<locals>.depth", 2)]
    assert_close(parallel, run_openvino(xml, [image])[0], rtol=1e-4, atol=1e-5)
    threads.set_threads(1)
    # (sums of 4608 products in two orders: 1.3e-6 apart at most here)
    np.testing.assert_allclose(parallel, irrun.load(xml).infer([image])[0], rtol=1e-5, atol=5e-6)


def test_grouped_columns_of_a_batch_cut_along_the_input_channels(two_threads, monkeypatch, tmp_path):
    """Two groups of 37 -> 600 channels (halves of 18 and 19), strided 3x3 over 14 x 14, two samples:
    the columns fit one block, cut along each group's input channels; OpenVINO's output, which
    the parts' products miss when the second part's is not added (the test sees both parts)."""
    x = ops.parameter([2, 74, 14, 14], np.float32, name="x")
    w = rand(2, 600, 37, 3, 3, seed=5, scale=1 / np.sqrt(9 * 37))
    model = model_of(ops.group_convolution(x, ops.constant(w), [2, 2], [1, 1], [1, 1], [1, 1]), x)
    xml = save(model, tmp_path / "grouped")
    loaded = irrun.load(xml)
    assert loaded._plan.convolution_network
    splits = record_parts(monkeypatch, lambda fn, ranges: (fn.__qualname__, list(ranges)))
    image = rand(2, 74, 14, 14, seed=6)
    expected = run_openvino(xml, [image])[0]
    assert_close(loaded.infer([image])[0], expected, rtol=1e-4, atol=1e-5)
    assert splits == [("_split_depth.<locals>.depth", [(0, 18), (18, 37)])]
    monkeypatch.setattr(im2col.np, "add", lambda a, b, out: out)
    with pytest.raises(AssertionError):
        assert_close(loaded.infer([image])[0], expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("groups, c_in, c_out, size, taken", [
    (4, 16, 32, [16, 128], True),       # the CRNN's 64 -> 128 layer
    (8, 16, 32, [8, 64], False),        # a group's block would span 512 positions
    (16, 16, 16, [16, 128], False),     # 16 output channels a group
    (4, 8, 32, [32, 64], False),        # a GEMM depth of 72
])
def test_grouped_im2col_a_group_at_a_time(groups, c_in, c_out, size, taken, two_threads, monkeypatch, tmp_path):
    """Where BLAS's own threads run a grouped layer's GEMMs (irrun on one thread here), wide groups
    over many positions take their blocks one group at a time: OpenVINO's output, and that of
    blocks of every group's columns within their GEMMs' rounding (OpenBLAS sums a product of
    another width in another order); on the pool's two threads (a convolution network), never."""
    x = ops.parameter([1, groups * c_in, *size], np.float32, name="x")
    w = rand(groups, c_out, c_in, 3, 3, seed=7, scale=1 / np.sqrt(9 * c_in))
    xml = save(model_of(ops.group_convolution(x, ops.constant(w), [1, 1], [1, 1], [1, 1], [1, 1]), x), tmp_path)
    image = rand(1, groups * c_in, *size, seed=8)
    expected = run_openvino(xml, [image])[0]
    # (im2col's way: not the row taps that groups of 16 channels take where OpenBLAS runs AVX-512)
    monkeypatch.setattr(row_taps, "ROW_TAP_MIN_GROUP_CHANNELS_AVX512", row_taps.ROW_TAP_MIN_GROUP_CHANNELS)
    by_group = spy(monkeypatch, im2col, "_by_group")
    threads.set_threads(1)
    one = irrun.load(xml).infer([image])[0]
    assert bool(by_group) == taken
    assert_close(one, expected, rtol=1e-4, atol=1e-5)
    monkeypatch.setattr(im2col, "GROUP_AT_A_TIME_OUTPUTS", 1 << 30)
    np.testing.assert_allclose(one, irrun.load(xml).infer([image])[0], rtol=1e-5, atol=1e-6)
    monkeypatch.undo()
    threads.set_threads(2)
    by_group = spy(monkeypatch, im2col, "_by_group")
    loaded = irrun.load(xml)
    assert_close(loaded.infer([image])[0], expected, rtol=1e-4, atol=1e-5)
    assert not by_group or not loaded._plan.convolution_network


def test_strided_stem_over_phases_in_parts(two_threads, monkeypatch, tmp_path):
    """A YOLOv5-style 6x6 / 2 stem, 3 -> 32 channels at 320 x 320 (88 M multiply-adds): the row-tap
    kernel over the input's phases, its blocks in two parts; OpenVINO's outputs, and one thread's."""
    xml, loaded = convolution_alone([1, 3, 320, 320], (32, 3, 6, 6), 2, 2, tmp_path / "stem")
    phases = spy(monkeypatch, row_taps, "phase_taps")
    splits = record_parts(monkeypatch, lambda fn, ranges: len(ranges))
    image = rand(1, 3, 320, 320, seed=4)
    parallel = loaded.infer([image])[0]
    assert phases and 2 in splits
    assert_close(parallel, run_openvino(xml, [image])[0], rtol=1e-4, atol=1e-5)
    threads.set_threads(1)
    np.testing.assert_allclose(parallel, irrun.load(xml).infer([image])[0], rtol=1e-5, atol=1e-6)


def test_audio_front_end_pools_inside_its_convolution_in_parts(two_threads, monkeypatch, tmp_path):
    """The audio benchmark's first layer (64 filters of 512 taps, stride 4, over one second at
    16 kHz: a convolution network) with its bias, Relu and 2 / 2 max pool: the pool inside the
    convolution's blocks, run in two parts; OpenVINO's outputs, and one thread's within BLAS's
    rounding.  (With the transforms turned off: they take this layer, tests/test_fft_convolution.py.)"""
    monkeypatch.setenv("IRRUN_FFT", "off")
    wave = ops.parameter([1, 1, 16000], np.float32, name="wave")
    y = ops.convolution(wave, ops.constant(rand(64, 1, 512, seed=3, scale=512 ** -0.5)), [4], [0], [0], [1])
    y = ops.relu(ops.add(y, ops.constant(rand(1, 64, 1, seed=4, scale=0.1))))
    xml = save(model_of(ops.max_pool(y, [2], [1], [0], [0], [2]).output(0), wave), tmp_path / "audio")
    pooled = spy(monkeypatch, im2col, "pooled_positions_major")
    splits = record_parts(monkeypatch, lambda fn, ranges: len(ranges))
    loaded = irrun.load(xml)
    assert loaded._plan.convolution_network
    audio = rand(1, 1, 16000, seed=5)
    parallel = loaded.infer([audio])[0]
    assert pooled and 2 in splits
    assert_close(parallel, run_openvino(xml, [audio])[0], rtol=1e-4, atol=1e-5)
    threads.set_threads(1)
    np.testing.assert_allclose(parallel, irrun.load(xml).infer([audio])[0], rtol=1e-5, atol=1e-6)


def test_networks_of_gemms_and_small_convolutions_keep_blas_threads(tmp_path):
    x = ops.parameter([1, 17, 64], np.float32, name="x")
    gemm = ops.matmul(x, ops.constant(rand(64, 64)), False, False)
    assert not irrun.load(save(model_of(gemm, x), tmp_path / "gemm"))._plan.convolution_network
    image = ops.parameter([1, 16, 28, 28], np.float32, name="image")
    small = ops.convolution(image, ops.constant(rand(16, 16, 3, 3)), [1, 1], [1, 1], [1, 1], [1, 1])
    assert not irrun.load(save(model_of(small, image), tmp_path / "small"))._plan.convolution_network
