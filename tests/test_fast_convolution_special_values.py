"""The fast convolutions, Winograd (irrun/ops/winograd.py) and FFT (irrun/ops/fft_convolution.py),
on inputs holding a NaN, an infinity or values too large for their transforms: their transforms
would spread a NaN over a whole tile or block and turn an infinity into NaN, so such inputs run
the direct kernels, whose outputs are OpenVINO's: NaN and infinities exactly where its are."""
import numpy as np
import openvino as ov
import openvino.opset13 as ops
import pytest

import irrun
from irrun.ops import convolution, fft_convolution, winograd
from ovutil import run_openvino, save


def rand(*shape, seed=0, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def spy(monkeypatch, module, name, target=convolution):
    calls = []
    original = getattr(module, name)
    monkeypatch.setattr(target, name, lambda *a, **k: calls.append(1) or original(*a, **k))
    return calls


def assert_like_openvino(got, expected):
    """NaN where OpenVINO's are, its infinities with their signs, the rest within the standard
    bound relative to the output's scale."""
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    infinite = ~finite & ~np.isnan(expected)
    np.testing.assert_array_equal(got[infinite], expected[infinite])
    np.testing.assert_allclose(got[finite], expected[finite], rtol=1e-4, atol=1e-5 * np.abs(expected[finite]).max())


def audio_layer(tmp_path):
    x = ops.parameter([1, 1, 4000], np.float32, name="x")
    node = ops.convolution(x, ops.constant(rand(16, 1, 512, seed=1, scale=512 ** -0.5)), [4], [0], [0], [1])
    return save(ov.Model([ops.result(node)], [x]), tmp_path / "fft"), rand(1, 1, 4000)


def winograd_layer(channels, size, tmp_path):
    x = ops.parameter([1, channels, size, size], np.float32, name="x")
    w = rand(channels, channels, 3, 3, seed=1, scale=1 / np.sqrt(9 * channels))
    node = ops.convolution(x, ops.constant(w), [1, 1], [1, 1], [1, 1], [1, 1])
    return save(ov.Model([ops.result(node)], [x]), tmp_path / "winograd"), rand(1, channels, size, size)


@pytest.mark.parametrize("special", ["nan", "inf", "-inf", "huge"])
def test_fft_layer(special, monkeypatch, tmp_path):
    """Two special values among 4000 reach 2 x 128 of each channel's 873 outputs, not the block's
    every output (1e36: the sums of squares overflow, and OpenVINO's sums some of its outputs)."""
    transformed = spy(monkeypatch, fft_convolution, "fft_conv")
    xml, data = audio_layer(tmp_path)
    if special == "huge":
        data = data * np.float32(1e36)
    else:
        data[0, 0, [100, 2999]] = np.float32(special)
    expected = run_openvino(xml, [data])[0]
    got = irrun.load(xml).infer([data])[0]
    assert not transformed
    if special != "huge":
        assert 0 < (~np.isfinite(expected)).sum() < expected.size // 2
    assert_like_openvino(got, expected)


def test_fft_layer_keeps_its_transforms_for_large_finite_values(monkeypatch, tmp_path):
    """Data at 1e15 (whose squares still sum finitely): the transforms, within the standard bound
    relative to the output's scale (their rounding is relative, as the direct kernels' is)."""
    calls = spy(monkeypatch, fft_convolution, "fft_conv")
    xml, data = audio_layer(tmp_path)
    data = data * np.float32(1e15)
    expected = run_openvino(xml, [data])[0]
    got = irrun.load(xml).infer([data])[0]
    assert calls
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5 * np.abs(expected).max())


@pytest.mark.parametrize("channels, size, tile", [(64, 56, 4), (256, 14, 2)])
@pytest.mark.parametrize("special", ["nan", "inf", "-inf"])
def test_winograd_layer(channels, size, tile, special, monkeypatch, tmp_path):
    """One special value reaches the 3 x 3 outputs whose windows read it in every channel (576 for
    64 channels), not its whole 4 x 4 or 2 x 2 tile's; an infinity stays infinite.  A finite input
    of the same layer still takes Winograd (F(2,3) through IRRUN_WINOGRAD=2)."""
    monkeypatch.setenv("IRRUN_WINOGRAD", str(tile) if tile == 2 else "auto")
    tiles = []
    run = winograd.winograd_conv
    monkeypatch.setattr(convolution, "winograd_conv", lambda x, f, *a: tiles.append(f.m) or run(x, f, *a))
    xml, data = winograd_layer(channels, size, tmp_path)
    loaded = irrun.load(xml)
    assert_like_openvino(loaded.infer([data])[0], run_openvino(xml, [data])[0])
    assert tiles == [tile]
    data[0, 3, 10, 10] = np.float32(special)
    expected = run_openvino(xml, [data])[0]
    got = loaded.infer([data])[0]
    assert tiles == [tile]
    assert (~np.isfinite(expected)).sum() == 9 * channels
    assert_like_openvino(got, expected)
