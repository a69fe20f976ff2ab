"""Long 1-D convolutions by FFT (irrun/ops/fft_convolution.py) against OpenVINO: taken where the
rule says, every padding mode, strides that do and do not divide the kernel, several input
channels and samples, outputs in several blocks, two threads and one; their error against float64
beside the direct kernels'."""
import numpy as np
import openvino as ov
import openvino.opset13 as ops
import pytest

import irrun
from irrun import threads
from irrun.ops import convolution, fft_convolution, im2col
from irrun.ops.convolution import Geometry, window_layout
from ovutil import assert_close, compare, run_openvino, save


def rand(*shape, seed=0, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def spy(monkeypatch, module, name):
    calls = []
    original = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a, **k: calls.append(1) or original(*a, **k))
    return calls


def conv1d(c_in, c_out, kernel, stride, length, batch=1, pads=(0, 0), auto_pad="explicit", seed=0):
    x = ops.parameter([batch, c_in, length], np.float32, name="x")
    w = rand(c_out, c_in, kernel, seed=seed + 1, scale=1 / np.sqrt(kernel * c_in))
    node = ops.convolution(x, ops.constant(w), [stride], [pads[0]], [pads[1]], [1], auto_pad)
    return ov.Model([ops.result(node)], [x]), [rand(batch, c_in, length, seed=seed)]


@pytest.mark.parametrize("c_in, c_out, kernel, stride, length, batch, pads, auto_pad", [
    (1, 64, 512, 4, 16000, 1, (0, 0), "explicit"),        # the audio benchmark's front end
    (1, 32, 512, 4, 1024, 1, (0, 0), "same_upper"),       # CREPE-style: a frame padded to its length
    (1, 80, 251, 1, 4000, 1, (125, 125), "explicit"),     # SincNet-style: stride 1, odd taps
    (1, 16, 250, 3, 3001, 2, (7, 2), "explicit"),         # a stride that does not divide the kernel
    (2, 16, 300, 2, 2500, 2, (0, 0), "same_lower"),       # several input channels, two samples
    (4, 8, 129, 1, 700, 1, (64, 0), "explicit"),          # four channels: terms of both kinds
    (1, 8, 400, 4, 3000, 1, (0, 0), "valid"),
], ids=["audio", "crepe", "sincnet", "ragged-stride", "two-channels", "four-channels", "valid"])
def test_fft_convolution_matches_openvino(c_in, c_out, kernel, stride, length, batch, pads, auto_pad, monkeypatch,
                                          tmp_path):
    calls = spy(monkeypatch, convolution, "fft_conv")
    model, feeds = conv1d(c_in, c_out, kernel, stride, length, batch, pads, auto_pad)
    compare(model, feeds, tmp_path)
    assert calls, "the transforms were not used"


@pytest.mark.parametrize("block", [256, 1000])
def test_outputs_in_several_blocks(block, monkeypatch, tmp_path):
    """Overlap-save over blocks (their wrapped outputs dropped), the last one short."""
    monkeypatch.setattr(fft_convolution, "FFT_BLOCK_LENGTH", block)
    monkeypatch.setattr(fft_convolution, "FFT_BLOCK_TAPS", 1)
    lengths = []
    run = fft_convolution.fft_conv
    monkeypatch.setattr(convolution, "fft_conv", lambda x, f, *a: lengths.append(f.length) or run(x, f, *a))
    model, feeds = conv1d(1, 8, 200, 2, 6001, batch=2, pads=(3, 3))
    compare(model, feeds, tmp_path)
    assert lengths and lengths[0] < 3000 // 2


@pytest.mark.parametrize("c_in, kernel, stride, dilation, groups, taken", [
    (1, 512, 4, 1, 1, True),
    (1, 64, 1, 1, 1, False),        # too few taps for one channel: the direct kernels are faster
    (1, 160, 4, 1, 1, False),       # 40 taps a phase
    (16, 64, 1, 1, 1, True),        # 16 channels of 64 taps
    (64, 3, 2, 1, 1, False),        # a strided layer of many channels
    (1, 512, 4, 2, 1, False),       # dilated
    (4, 256, 1, 1, 2, False),       # grouped
])
def test_when_the_transforms_are_taken(c_in, kernel, stride, dilation, groups, taken, monkeypatch, tmp_path):
    calls = spy(monkeypatch, convolution, "fft_conv")
    x = ops.parameter([1, c_in, 3000], np.float32, name="x")
    if groups == 1:
        w = rand(8, c_in, kernel, seed=1, scale=kernel ** -0.5)
        node = ops.convolution(x, ops.constant(w), [stride], [0], [0], [dilation])
    else:
        w = rand(groups, 8, c_in // groups, kernel, seed=1, scale=kernel ** -0.5)
        node = ops.group_convolution(x, ops.constant(w), [stride], [0], [0], [dilation])
    compare(ov.Model([ops.result(node)], [x]), [rand(1, c_in, 3000)], tmp_path)
    assert bool(calls) == taken


def test_turned_off_by_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("IRRUN_FFT", "off")
    calls = spy(monkeypatch, convolution, "fft_conv")
    model, feeds = conv1d(1, 16, 512, 4, 4000)
    compare(model, feeds, tmp_path)
    assert not calls


def test_spectra_beyond_their_memory_bound_are_not_made(monkeypatch):
    geo = Geometry((4,), (1,), (0,), (0,), (0,), "explicit")
    _, counts = window_layout((16000,), (512,), geo)
    assert fft_convolution.fft_pays((1, 64, 1, 512), geo, counts)
    monkeypatch.setattr(fft_convolution, "FFT_MAX_SPECTRA_BYTES", 1 << 20)
    assert not fft_convolution.fft_pays((1, 64, 1, 512), geo, counts)


def _smooth(m: int) -> bool:
    for p in (2, 3, 5):
        while m % p == 0:
            m //= p
    return m == 1


def test_smooth_lengths():
    """The least 2^a 3^b 5^c at or above n."""
    for n in [1, 2, 7, 97, 1000, 3873, 4001, 8193, 100_000]:
        got = fft_convolution._smooth_length(n)
        assert got >= n and _smooth(got)
        assert not any(_smooth(m) for m in range(n, got))


def test_error_against_float64_within_the_direct_kernels():
    """The documented accuracy (irrun/ops/fft_convolution.py): at unit scale the transforms' largest
    error against float64 is below the direct f32 kernel's own, and float64 data stay float64."""
    rng = np.random.default_rng(7)
    for c_in, kernel, stride in [(1, 512, 4), (1, 251, 1), (2, 300, 3)]:
        x = rng.standard_normal((1, c_in, 8000)).astype(np.float32)
        w = (rng.standard_normal((32, c_in, kernel)) / np.sqrt(kernel * c_in)).astype(np.float32)
        geo = Geometry((stride,), (1,), (0,), (0,), (0,), "explicit")
        whole, counts = window_layout((8000,), (kernel,), geo)
        exact = convolution._direct(x.astype(np.float64), w[None].astype(np.float64), geo, whole, counts)
        direct = convolution._direct(x, w[None], geo, whole, counts)
        length = fft_convolution.block_length(-(-kernel // stride), counts[0])
        got = fft_convolution.fft_conv(x, fft_convolution.SpectralFilter(w, stride, length), whole, counts)
        assert got.dtype == np.float32
        assert np.abs(got - exact).max() <= np.abs(direct - exact).max()
        wide = fft_convolution.fft_conv(x.astype(np.float64),
                                        fft_convolution.SpectralFilter(w.astype(np.float64), stride, length),
                                        whole, counts)
        assert wide.dtype == np.float64 and np.abs(wide - exact).max() < 1e-12


def test_audio_front_end_with_its_pool_in_parts_and_on_one_thread(two_threads, monkeypatch, tmp_path):
    """The audio benchmark's first layer with its bias, Relu and 2 / 2 max pool in a convolution
    network: the transforms (not the pool inside im2col's blocks) in two parts; OpenVINO's outputs,
    and one thread's within rounding."""
    wave = ops.parameter([1, 1, 16000], np.float32, name="wave")
    y = ops.convolution(wave, ops.constant(rand(64, 1, 512, seed=3, scale=512 ** -0.5)), [4], [0], [0], [1])
    y = ops.relu(ops.add(y, ops.constant(rand(1, 64, 1, seed=4, scale=0.1))))
    y = ops.max_pool(y, [2], [1], [0], [0], [2]).output(0)
    y = ops.convolution(y, ops.constant(rand(128, 64, 3, seed=5, scale=192 ** -0.5)), [2], [1], [1], [1])
    xml = save(ov.Model([ops.result(y)], [wave]), tmp_path / "audio")
    calls = spy(monkeypatch, convolution, "fft_conv")
    pooled = spy(monkeypatch, im2col, "pooled_positions_major")
    splits = []
    run_parts = threads.run_parts
    monkeypatch.setattr(threads, "run_parts", lambda fn, ranges: splits.append(len(ranges)) or run_parts(fn, ranges))
    loaded = irrun.load(xml)
    assert loaded._plan.convolution_network
    audio = rand(1, 1, 16000, seed=5)
    parallel = loaded.infer([audio])[0]
    assert calls and not pooled and 2 in splits
    assert_close(parallel, run_openvino(xml, [audio])[0], rtol=1e-4, atol=1e-5)
    threads.set_threads(1)
    np.testing.assert_allclose(parallel, irrun.load(xml).infer([audio])[0], rtol=1e-5, atol=1e-6)


def test_the_filter_read_back_after_its_transforms_are_made(monkeypatch, tmp_path):
    """The transforms replace the filter in memory (its mapped pages released); asked for
    (intermediates="all"), it still reads back as it is in the file."""
    from irrun.weights import Weights
    released = []
    release = Weights.release
    monkeypatch.setattr(Weights, "release", lambda self, array: released.append(array.shape) or release(self, array))
    model, feeds = conv1d(1, 16, 512, 4, 4000)
    xml = save(model, tmp_path / "m")
    m = irrun.load(xml)
    assert released == [(16, 1, 512)]
    got = m.infer(feeds, intermediates="all")
    assert_close(got[m.outputs[0].name], run_openvino(xml, feeds)[0])
    (weights,) = [v for v in got.values() if v.shape == (16, 1, 512)]
    np.testing.assert_array_equal(weights, rand(16, 1, 512, seed=1, scale=1 / np.sqrt(512)))


def test_a_dynamic_length_runs_the_direct_kernels(monkeypatch, tmp_path):
    """Unbound (a length known only at run time): the direct kernels, OpenVINO's outputs."""
    calls = spy(monkeypatch, convolution, "fft_conv")
    model, _ = conv1d(1, 16, 512, 4, 4000)
    model.reshape({"x": ov.PartialShape([1, 1, -1])})
    for length in (3000, 5000):
        compare(model, [rand(1, 1, length, seed=length)], tmp_path / str(length))
    assert not calls
