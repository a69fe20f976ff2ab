"""DFT-7, IDFT-7, RDFT-9, IRDFT-9, STFT-15 and ISTFT-16 against OpenVINO.

Differential runs (`compare`) against the CPU plugin.  OpenVINO's reference
evaluator has no kernel for these ops, so where the CPU plugin is wrong (RDFT
and IRDFT with a -1 in signal_size or with zero-padding) the oracle is the CPU
plugin running an equivalent graph that avoids the defect (explicit sizes, or
an explicit Pad).  Shape functions are checked against OpenVINO's own partial
shape inference.  Divergences are recorded in specs/errata/signal.md.

Tolerances: rtol 1e-4 and atol 1e-5 of the output's RMS scale (Parseval:
sqrt(n) times the input's RMS for a forward transform of length n, divided by
sqrt(n) for an inverse one); f16 outputs get 1e-3 of the same scale.
"""
from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset1 as ops1
import openvino.opset7 as ops7
import openvino.opset9 as ops9
import openvino.opset12 as ops12
import openvino.opset15 as ops15
import openvino.opset16 as ops16
import pytest

import irrun
from irrun.errors import ShapeError
from ovutil import (
    as_tensor_type, assert_close, check_shape_function, compare, const, edited_ir, irrun_infer, model, param,
    run_openvino, save
)

RNG = np.random.default_rng(11)
D = ov.Dimension


def normal(shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def scaled_tolerance(x: np.ndarray, length: int, inverse: bool, dtype=np.float32) -> dict:
    """rtol/atol for a transform of `length` points of `x`, relative to the output's RMS scale."""
    rms = float(np.sqrt(np.mean(np.square(x.astype(np.float64))))) or 1.0
    scale = rms / np.sqrt(length) if inverse else rms * np.sqrt(length)
    rel = 1e-3 if np.dtype(dtype) == np.float16 else 1e-5
    return {"rtol": 1e-3 if np.dtype(dtype) == np.float16 else 1e-4, "atol": rel * scale}


def transform_length(shape, axes, sizes, complex_input: bool) -> int:
    rank = len(shape) - (1 if complex_input else 0)
    axes = [a % rank for a in axes]
    sizes = sizes or [-1] * len(axes)
    return int(np.prod([shape[a] if s == -1 else s for a, s in zip(axes, sizes)]))


def compare_with_equivalent(node_model: ov.Model, equivalent: ov.Model, inputs, tmp_path: Path, **tol):
    """irrun on `node_model`; OpenVINO's CPU plugin on `equivalent`, a graph computing the same thing."""
    xml = save(node_model, tmp_path / "irrun")
    report = irrun.validate(xml)
    assert report.ok, "\n".join(d.format() for d in report.errors)
    got = list(irrun.load(xml).infer(list(inputs)).values())
    expected = run_openvino(save(equivalent, tmp_path / "openvino"), inputs)
    assert len(got) == len(expected)
    for actual, exp in zip(got, expected):
        assert_close(actual, exp, **tol)


# ---------------------------------------------------------------- DFT / IDFT

FFT_NODES = {"dft": ops7.dft, "idft": ops7.idft}

DFT_CASES = [
    ([4, 8, 2], [1], None),
    ([3, 6, 5, 2], [0, 2], None),
    ([3, 6, 5, 2], [-1, -3], None),            # complex rank 3: -1 is axis 2, -3 axis 0
    ([2, 3, 4, 5, 2], [3, 1, 2], None),        # unsorted
    ([5, 2], [0], None),                       # a 1-D complex signal
    ([4, 6, 2], [1], [9]),                     # zero-padded
    ([4, 6, 2], [1], [4]),                     # cropped
    ([4, 6, 5, 2], [0, 1], [-1, 3]),           # -1 keeps the input length
    ([4, 6, 5, 2], [2, 0], [7, 2]),
    ([3, 6, 5, 2], [0, 1, 2], [2, -1, 8]),
    ([2, 16, 2], [-1], [16]),
]


@pytest.mark.parametrize("kind", ["dft", "idft"])
@pytest.mark.parametrize("case", range(len(DFT_CASES)))
def test_dft_idft(kind, case, tmp_path):
    shape, axes, sizes = DFT_CASES[case]
    index_type = np.int32 if case % 2 else np.int64
    p = param(shape)
    node = FFT_NODES[kind](p, const(axes, index_type), None if sizes is None else const(sizes, index_type))
    x = normal(shape)
    compare(model(node, [p]), [x], tmp_path,
            **scaled_tolerance(x, transform_length(shape, axes, sizes, True), kind == "idft"))


@pytest.mark.parametrize("kind", ["dft", "idft"])
@pytest.mark.parametrize("shape, axes, sizes", [
    ([-1, -1, 2], [0, 1], None),
    ([-1, 6, -1, 2], [1, 2], [4, -1]),
    ([D(1, 8), 5, 2], [0], [6]),
])
def test_dft_idft_dynamic_shapes(kind, shape, axes, sizes, tmp_path):
    p = param(shape)
    node = FFT_NODES[kind](p, const(axes), None if sizes is None else const(sizes))
    concrete = [4 if isinstance(d, D) or d == -1 else d for d in shape]
    x = normal(concrete)
    compare(model(node, [p]), [x], tmp_path,
            **scaled_tolerance(x, transform_length(concrete, axes, sizes, True), kind == "idft"))


@pytest.mark.parametrize("kind", ["dft", "idft"])
def test_dft_idft_axes_and_sizes_at_run_time(kind, tmp_path):
    """Axes and signal_size not known at load: every transformable dim is dynamic until run."""
    p, axes, sizes = param([3, 6, 5, 2]), param([2], np.int64), param([2], np.int64)
    node = FFT_NODES[kind](p, axes, sizes)
    assert str(node.get_output_partial_shape(0)) == "[?,?,?,2]"
    x = normal([3, 6, 5, 2])
    compare(model(node, [p, axes, sizes]), [x, np.array([2, -3]), np.array([7, 2])], tmp_path,
            **scaled_tolerance(x, 14, kind == "idft"))


@pytest.mark.parametrize("kind", ["dft", "idft"])
def test_dft_idft_f16(kind, tmp_path):
    p = param([3, 12, 2], np.float16)
    x = normal([3, 12, 2], np.float16)
    compare(model(FFT_NODES[kind](p, const([1]), const([10])), [p]), [x], tmp_path,
            **scaled_tolerance(x, 10, kind == "idft", np.float16))


def test_dft_idft_f16_compressed_constant_data(tmp_path):
    """A spectrum stored as an f32 constant, compressed to f16 on save, then inverted."""
    data = ops1.constant(normal([8, 2]))
    p = param([8, 2])
    node = ops7.idft(ops1.add(data, p), const([0]))
    x = normal([8, 2])
    compare(model(node, [p]), [x], tmp_path, compress=True, **scaled_tolerance(x, 8, True))


def test_dft_of_an_impulse_is_flat_and_idft_inverts_it(tmp_path):
    """Hand-checked: DFT of [1, 0, 0, 0] is [1, 1, 1, 1]; IDFT(DFT(x)) is x."""
    p = param([4, 2])
    got = compare(model(ops7.dft(p, const([0])), [p]), [np.array([[1, 0], [0, 0], [0, 0], [0, 0]], np.float32)],
                  tmp_path)
    np.testing.assert_allclose(next(iter(got.values())), [[1, 0]] * 4, atol=1e-7)
    q = param([5, 6, 2])
    x = normal([5, 6, 2])
    round_trip = ops7.idft(ops7.dft(q, const([0, 1])), const([1, 0]))
    got = compare(model(round_trip, [q]), [x], tmp_path / "round")
    np.testing.assert_allclose(next(iter(got.values())), x, atol=1e-5)


# ---------------------------------------------------------------- RDFT / IRDFT

RDFT_CASES = [
    ([4, 8], [1], None),
    ([3, 7], [-1], None),
    ([3, 6, 5], [0, 2], None),
    ([3, 6, 5], [2, 0], None),                 # the half spectrum is on axis 0, the last listed
    ([2, 4, 6, 5], [-3, -1], None),
    ([9], [0], None),
    ([16, 3], [0], None),
    ([4, 6], [1], [4]),
    ([4, 6, 5], [0, 1], [3, 5]),
]


@pytest.mark.parametrize("case", range(len(RDFT_CASES)))
def test_rdft(case, tmp_path):
    shape, axes, sizes = RDFT_CASES[case]
    index_type = np.int32 if case % 2 else np.int64
    p = param(shape)
    node = ops9.rdft(p, const(axes, index_type), None if sizes is None else const(sizes, index_type))
    x = normal(shape)
    compare(model(node, [p]), [x], tmp_path, **scaled_tolerance(x, transform_length(shape, axes, sizes, False), False))


IRDFT_CASES = [
    ([3, 5, 2], [1], None),
    ([3, 4, 2], [-1], None),
    ([3, 6, 5, 2], [0, 2], None),
    ([3, 6, 5, 2], [2, 0], None),
    ([5, 2], [0], None),
    ([4, 6, 2], [1], [9]),                     # odd length: 5 of the 6 bins
    ([4, 6, 2], [1], [4]),
    ([4, 6, 2], [1], [10]),                    # all 6 bins
]


@pytest.mark.parametrize("case", range(len(IRDFT_CASES)))
def test_irdft(case, tmp_path):
    shape, axes, sizes = IRDFT_CASES[case]
    index_type = np.int32 if case % 2 else np.int64
    p = param(shape)
    node = ops9.irdft(p, const(axes, index_type), None if sizes is None else const(sizes, index_type))
    x = normal(shape)
    compare(model(node, [p]), [x], tmp_path, **scaled_tolerance(x, transform_length(shape, axes, sizes, True), True))


def test_rdft_irdft_dynamic_shapes(tmp_path):
    p = param([-1, D(2, 10)])
    x = normal([3, 7])
    compare(model(ops9.rdft(p, const([1])), [p]), [x], tmp_path, **scaled_tolerance(x, 7, False))
    q = param([3, -1, 2])
    z = normal([3, 6, 2])
    compare(model(ops9.irdft(q, const([1]), const([7])), [q]), [z], tmp_path / "inverse",
            **scaled_tolerance(z, 7, True))


def test_rdft_irdft_f16(tmp_path):
    p = param([4, 10], np.float16)
    x = normal([4, 10], np.float16)
    compare(model(ops9.rdft(p, const([1])), [p]), [x], tmp_path, **scaled_tolerance(x, 10, False, np.float16))
    q = param([4, 6, 2], np.float16)
    z = normal([4, 6, 2], np.float16)
    compare(model(ops9.irdft(q, const([1])), [q]), [z], tmp_path / "inverse",
            **scaled_tolerance(z, 10, True, np.float16))


def test_rdft_irdft_round_trip(tmp_path):
    """Hand-checked: IRDFT(RDFT(x)) is x, for an odd last length given as signal_size."""
    p = param([3, 4, 7])
    x = normal([3, 4, 7])
    node = ops9.irdft(ops9.rdft(p, const([1, 2])), const([1, 2]), const([4, 7]))
    got = compare(model(node, [p]), [x], tmp_path)
    np.testing.assert_allclose(next(iter(got.values())), x, atol=1e-5)


def test_irdft_drops_the_imaginary_dc_and_nyquist_parts(tmp_path):
    """Hand-checked: bins [1+5j, 0, 2+7j] (length 4) are the real signal (1 + 2 * (-1)^n) / 4."""
    p = param([3, 2])
    got = compare(model(ops9.irdft(p, const([0])), [p]), [np.array([[1, 5], [0, 0], [2, 7]], np.float32)], tmp_path)
    np.testing.assert_allclose(next(iter(got.values())), [0.75, -0.25, 0.75, -0.25], atol=1e-6)


def test_irdft_of_one_bin_is_empty(tmp_path):
    """A last axis of 1 bin gives 2 * (1 - 1) = 0 samples, as shape inference says; the CPU plugin segfaults."""
    p = param([4, 1, 2])
    node = ops9.irdft(p, const([1]))
    assert str(node.get_output_partial_shape(0)) == "[4,0]"
    xml = save(model(node, [p]), tmp_path)
    assert irrun.validate(xml).ok
    got, = irrun.load(xml).infer([normal([4, 1, 2])]).values()
    assert got.shape == (4, 0) and got.dtype == np.float32


# The CPU plugin's RDFT/IRDFT node does not implement -1 in signal_size ("cannot create std::vector larger than
# max_size()"), RDFT refuses padding ("Signal size greater than input size is not supported yet") and IRDFT reads
# past its input when a signal size is larger than the input (more bins on the last axis, or a longer other axis).
# The oracle is an equivalent graph: explicit sizes, the padding done by a Pad.

def test_openvino_cpu_rdft_refuses_minus_one_and_padding(tmp_path):
    for sizes in ([-1, 3], [4, 9]):
        p = param([4, 6])
        xml = save(model(ops9.rdft(p, const([0, 1]), const(sizes)), [p]), tmp_path / str(sizes[1]))
        with pytest.raises(RuntimeError):
            run_openvino(xml, [normal([4, 6])])


@pytest.mark.parametrize("shape, axes, sizes, explicit, pad", [
    ([4, 6, 5], [0, 1], [-1, 3], [4, 3], None),
    ([4, 6], [1], [9], [9], [0, 3]),
    ([4, 6, 5], [2, 0], [7, -1], [7, 4], [0, 0, 2]),
    ([4, 6, 5], [-1, -2], [-1, 8], [5, 8], [0, 2, 0]),
])
def test_rdft_minus_one_and_padding(shape, axes, sizes, explicit, pad, tmp_path):
    p = param(shape)
    x = normal(shape)
    node = ops9.rdft(p, const(axes), const(sizes))
    source = p if pad is None else ops12.pad(p, const([0] * len(shape)), const(pad), "constant")
    equivalent = ops9.rdft(source, const(axes), const(explicit))
    compare_with_equivalent(model(node, [p]), model(equivalent, [p]), [x], tmp_path,
                            **scaled_tolerance(x, int(np.prod(explicit)), False))


@pytest.mark.parametrize("shape, axes, sizes, explicit, pad", [
    ([4, 6, 5, 2], [0, 1], [-1, 3], [4, 3], None),
    ([4, 6, 5, 2], [2, 0], [7, -1], [7, 6], [0, 0, 2, 0]),
    ([4, 6, 2], [1], [13], [13], [0, 1, 0]),            # 13 // 2 + 1 = 7 bins, the input has 6
    ([3, 4, 2], [-1], [12], [12], [0, 3, 0]),
    ([4, 6, 5, 2], [0, 1], [8, 7], [8, 7], [4, 0, 0, 0]),  # axis 0 zero-padded before its inverse
])
def test_irdft_minus_one_and_padding(shape, axes, sizes, explicit, pad, tmp_path):
    p = param(shape)
    z = normal(shape)
    node = ops9.irdft(p, const(axes), const(sizes))
    source = p if pad is None else ops12.pad(p, const([0] * len(shape)), const(pad), "constant")
    equivalent = ops9.irdft(source, const(axes), const(explicit))
    compare_with_equivalent(model(node, [p]), model(equivalent, [p]), [z], tmp_path,
                            **scaled_tolerance(z, int(np.prod(explicit)), True))


# ---------------------------------------------------------------- STFT

STFT_CASES = [
    # signal shape, window length, frame_size, frame_step
    ([2, 48], 8, 8, 4),
    ([2, 48], 5, 8, 3),          # window centred: one zero before, two after
    ([48], 6, 8, 8),             # 1-D signal, frames back to back
    ([3, 30], 7, 7, 10),         # odd frame size; samples between frames are skipped
    ([2, 16], 16, 16, 1),        # one frame
    ([1, 100], 32, 32, 7),
]


@pytest.mark.parametrize("transpose_frames", [False, True])
@pytest.mark.parametrize("case", range(len(STFT_CASES)))
def test_stft(case, transpose_frames, tmp_path):
    shape, window, frame_size, frame_step = STFT_CASES[case]
    index_type = np.int32 if case % 2 else np.int64
    p, w = param(shape), param([window])
    node = ops15.stft(p, w, const(frame_size, index_type), const(frame_step, index_type), transpose_frames)
    x, win = normal(shape), RNG.random(window).astype(np.float32)
    compare(model(node, [p, w]), [x, win], tmp_path, **scaled_tolerance(x, frame_size, False))


@pytest.mark.parametrize("shape", [[-1, -1], [2, -1], [-1]])
def test_stft_dynamic_signal(shape, tmp_path):
    p, w = param(shape), param([-1])
    node = ops15.stft(p, w, const(8), const(3), True)
    concrete = [2, 40][-len(shape):]
    x = normal(concrete)
    compare(model(node, [p, w]), [x, RNG.random(6).astype(np.float32)], tmp_path, **scaled_tolerance(x, 8, False))


def test_stft_frame_arguments_at_run_time(tmp_path):
    p, w, size, step = param([2, 40]), param([8]), param([], np.int64), param([], np.int64)
    node = ops15.stft(p, w, size, step, False)
    assert str(node.get_output_partial_shape(0)) == "[2,?,?,2]"
    x = normal([2, 40])
    compare(model(node, [p, w, size, step]), [x, RNG.random(8).astype(np.float32), np.array(8), np.array(5)],
            tmp_path, **scaled_tolerance(x, 8, False))


def test_stft_f16(tmp_path):
    p, w = param([2, 40], np.float16), param([8], np.float16)
    x = normal([2, 40], np.float16)
    compare(model(ops15.stft(p, w, const(8), const(4), False), [p, w]), [x, RNG.random(8).astype(np.float16)],
            tmp_path, **scaled_tolerance(x, 8, False, np.float16))


def test_stft_f16_compressed_hann_window(tmp_path):
    p = param([2, 64])
    node = ops15.stft(p, ops1.constant(np.hanning(16).astype(np.float32)), const(16), const(4), True)
    x = normal([2, 64])
    compare(model(node, [p]), [x], tmp_path, compress=True, **scaled_tolerance(x, 16, False))


# ---------------------------------------------------------------- ISTFT

ISTFT_CASES = [
    # data shape [batch?, bins, frames, 2], window, frame_size, frame_step, signal_length
    ([2, 5, 9, 2], "random 8", 8, 3, None),
    ([5, 9, 2], "random 6", 8, 3, 20),          # shorter than the default length
    ([5, 9, 2], "random 6", 8, 3, 60),          # longer: zeros at the end
    ([2, 4, 6, 2], "random 5", 7, 2, None),     # odd frame size
    ([9, 7, 2], "hann 16", 16, 4, None),        # the summed squared window is 0 at the ends
    ([2, 3, 4, 2], "random 4", 4, 6, None),     # gaps between frames: 0 there
    ([2, 5, 1, 2], "random 8", 8, 3, None),     # one frame
]


def window_values(spec: str) -> np.ndarray:
    kind, n = spec.split()
    return (np.hanning(int(n)) if kind == "hann" else RNG.random(int(n)) + 0.1).astype(np.float32)


@pytest.mark.parametrize("center, normalized", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("case", range(len(ISTFT_CASES)))
def test_istft(case, center, normalized, tmp_path):
    shape, window, frame_size, frame_step, length = ISTFT_CASES[case]
    index_type = np.int32 if case % 2 else np.int64
    p = param(shape)
    win = window_values(window)
    w = param(list(win.shape))
    args = [p, w, const(frame_size, index_type), const(frame_step, index_type), center, normalized]
    node = ops16.istft(*args) if length is None else ops16.istft(*args, const(length, index_type))
    z = normal(shape)
    compare(model(node, [p, w]), [z, win], tmp_path, **scaled_tolerance(z, frame_size, True))


@pytest.mark.parametrize("length_shape", [[], [1]])
def test_istft_signal_length_at_run_time(length_shape, tmp_path):
    p, w, n = param([2, 5, 9, 2]), param([8]), param(length_shape, np.int32)
    node = ops16.istft(p, w, const(8), const(3), True, False, n)
    assert str(node.get_output_partial_shape(0)) == "[2,?]"
    z = normal([2, 5, 9, 2])
    compare(model(node, [p, w, n]), [z, window_values("random 8"), np.array(17, np.int32).reshape(length_shape)],
            tmp_path, **scaled_tolerance(z, 8, True))


def test_istft_zero_signal_length_is_empty(tmp_path):
    """Shape inference gives [2, 0]; the CPU plugin corrupts its heap ("free(): invalid next size"), so irrun only."""
    p, w = param([2, 5, 9, 2]), param([8])
    m = model(ops16.istft(p, w, const(8), const(3), False, False, const(0)), [p, w])
    xml = save(m, tmp_path)
    assert irrun.validate(xml).ok
    got, = irrun.load(xml).infer([normal([2, 5, 9, 2]), window_values("random 8")]).values()
    assert got.shape == (2, 0) and got.dtype == np.float32


def test_istft_negative_signal_length_is_an_error(tmp_path):
    p, w, n = param([5, 9, 2]), param([8]), param([], np.int32)
    xml = save(model(ops16.istft(p, w, const(8), const(3), True, False, n), [p, w, n]), tmp_path)
    inputs = [normal([5, 9, 2]), window_values("random 8"), np.array(-1, np.int32)]
    with pytest.raises(RuntimeError, match="Value -1 not in range"):
        run_openvino(xml, inputs)
    with pytest.raises(ShapeError, match="signal_length must be >= 0"):
        irrun.load(xml).infer(inputs)


def test_istft_dynamic_frames(tmp_path):
    p, w = param([-1, 5, -1, 2]), param([8])
    node = ops16.istft(p, w, const(8), const(2), True, False)
    assert str(node.get_output_partial_shape(0)) == "[?,?]"
    z = normal([3, 5, 11, 2])
    compare(model(node, [p, w]), [z, window_values("random 8")], tmp_path, **scaled_tolerance(z, 8, True))


def test_istft_f16(tmp_path):
    p, w = param([5, 9, 2], np.float16), param([8], np.float16)
    z = normal([5, 9, 2], np.float16)
    compare(model(ops16.istft(p, w, const(8), const(3), False, True), [p, w]),
            [z, window_values("random 8").astype(np.float16)], tmp_path, **scaled_tolerance(z, 8, True, np.float16))


@pytest.mark.parametrize("center", [False, True])
def test_stft_then_istft_gives_the_signal_back(center, tmp_path):
    """Hand-checked: with a periodic Hann window at a quarter-frame hop, ISTFT(STFT(x)) is x wherever the
    window sum is not 0 (all but the first sample; with center, the STFT input is taken as already padded)."""
    p = param([2, 64])
    periodic_hann = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(16) / 16)
    window = ops1.constant(periodic_hann.astype(np.float32))
    spectrum = ops15.stft(p, window, const(16), const(4), True)
    node = ops16.istft(spectrum, window, const(16), const(4), center, False)
    x = normal([2, 64])
    got = next(iter(compare(model(node, [p]), [x], tmp_path, compress=True, **scaled_tolerance(x, 16, True)).values()))
    expected = x[:, 8:56] if center else x
    np.testing.assert_allclose(got[:, 1:], expected[:, 1:], atol=1e-4)
    if not center:
        assert np.all(got[:, 0] == 0)


# ---------------------------------------------------------------- shape functions

def index_input(values, length=-1):
    """A Constant; "unknown": a 1-D Parameter (values known only at run); "dynamic": of any rank."""
    if values == "unknown":
        return param([length], np.int64)
    if values == "dynamic":
        return param(None, np.int64)
    return const(values)


def fft_args(shape, axes, sizes=None, dtype=np.float32):
    args = [param(shape, dtype), index_input(axes)]
    if sizes is not None:
        args.append(index_input(sizes, len(axes) if isinstance(axes, list) else -1))
    return args


FFT_SHAPE_CASES = [
    ([2, 8, 2], [1], None),
    ([2, 8, 2], [-2], None),
    ([2, 8, 2], [0, 1], [3, -1]),
    ([2, 8, 2], [0, 1], "unknown"),
    ([2, 8, 2], "unknown", None),
    ([2, 8, 2], "unknown", [4]),
    ([2, 8, 2], "dynamic", None),
    ([-1, -1, 2], [0], [5]),
    ([D(2, 9), 7, -1], [1, 0], None),
    (None, [0], [4]),
    ([2, 8, 2], [2], None),                   # out of range for complex rank 2
    ([2, 8, 2], [-3], None),
    ([2, 8, 2], [1, -1], None),               # the same axis twice
    ([2, 8, 3], [0], None),                   # not complex
    ([8], [0], None),                         # rank 1
    ([2, 8, 2], [0, 1], [4]),                 # sizes do not match axes
    ([2, 8, 2], [0, 1], [4, 0]),
]


@pytest.mark.parametrize("kind", ["DFT", "IDFT", "IRDFT"])
@pytest.mark.parametrize("shape, axes, sizes", FFT_SHAPE_CASES)
def test_complex_fft_shape_functions(kind, shape, axes, sizes):
    build = {"DFT": ops7.dft, "IDFT": ops7.idft, "IRDFT": ops9.irdft}[kind]
    version = 9 if kind == "IRDFT" else 7
    check_shape_function(lambda *a: build(*a), kind, version, {}, fft_args(shape, axes, sizes))


@pytest.mark.parametrize("shape, axes, sizes", [
    ([2, 8], [1], None),
    ([2, 9], [-1], None),
    ([2, 9], [1, 0], None),
    ([2, 8], [0, 1], [3, -1]),
    ([2, 8], [0, 1], [-1, 5]),
    ([2, 8], [0, 1], "unknown"),
    ([2, 8], "unknown", None),
    ([-1, D(3, 10)], [1], None),
    ([-1, D(1, 5)], [1], None),
    ([-1, D(0, 5)], [1], None),
    ([-1, D(2, -1)], [1], None),
    (None, [0], None),
    ([2, 8], [2], None),
    ([2, 8], [-3], None),
    ([2, 8], [0, -2], None),
    ([8], [0, 1], None),
])
def test_rdft_shape_function(shape, axes, sizes):
    check_shape_function(lambda *a: ops9.rdft(*a), "RDFT", 9, {}, fft_args(shape, axes, sizes))


@pytest.mark.parametrize("kind", ["DFT", "RDFT", "IRDFT"])
def test_signal_size_below_minus_one_is_an_error(kind):
    """OpenVINO's shape inference reads signal_size -2 as a 0-length axis; irrun refuses it (see the errata)."""
    build = {"DFT": ops7.dft, "RDFT": ops9.rdft, "IRDFT": ops9.irdft}[kind]
    args = fft_args([2, 8] if kind == "RDFT" else [2, 8, 2], [1], [-2])
    assert build(*args).get_output_partial_shape(0)[1] == D(0)
    with pytest.raises(ShapeError, match="-1 or >= 0"):
        irrun_infer(kind, 7 if kind == "DFT" else 9, {}, [as_tensor_type(a.output(0)) for a in args])


@pytest.mark.parametrize("dim", [D(-1), D(3, 10), D(1, 5), D(0, 5), D(2, -1), D(1, -1), 1])
def test_irdft_length_intervals(dim):
    check_shape_function(lambda *a: ops9.irdft(*a), "IRDFT", 9, {}, fft_args([2, dim, 2], [1]))


def test_fft_element_types():
    for dtype, index_type in [(np.int32, np.int64), (np.float32, np.float32), (np.float64, np.int64)]:
        args = [param([2, 8, 2], dtype), const([0], index_type)]
        check_shape_function(lambda *a: ops7.dft(*a), "DFT", 7, {}, args)


STFT_SHAPE_CASES = [
    ([2, 48], [8], 8, 4),
    ([48], [6], 8, 3),
    ([2, 4], [4], 4, 3),                 # frame_size == signal length
    ([2, 3], [4], 4, 3),                 # frame_size > signal length
    ([2, 16], [5], 4, 3),                # window longer than a frame
    ([2, 16], [4], 4, 0),
    ([2, 16], [4], 0, 2),
    ([2, -1], [4], 4, 3),
    ([2, D(3, 10)], [4], 4, 3),
    ([2, D(1, 5)], [4], 4, 3),
    ([2, D(2, -1)], [4], 4, 3),
    ([-1, D(1, 3)], [4], 4, 3),
    (None, [4], 4, 3),
    ([2, 16], [-1], 4, 3),
    ([2, 16], [4], "unknown", 3),
    ([16], [4], 4, "unknown"),
    ([2, 3, 16], [4], 4, 3),
]


def frame_arg(value):
    return param([], np.int64) if value == "unknown" else const(value)


@pytest.mark.parametrize("transpose_frames", [False, True])
@pytest.mark.parametrize("signal, window, frame_size, frame_step", STFT_SHAPE_CASES)
def test_stft_shape_function(signal, window, frame_size, frame_step, transpose_frames):
    args = [param(signal), param(window), frame_arg(frame_size), frame_arg(frame_step)]
    check_shape_function(lambda *a: ops15.stft(*a, transpose_frames), "STFT", 15,
                         {"transpose_frames": transpose_frames}, args)


ISTFT_SHAPE_CASES = [
    ([2, 5, 9, 2], [8], 8, 3, None),
    ([5, 9, 2], [8], 8, 3, None),
    ([5, 9, 2], [6], 9, 3, None),
    ([2, 5, 9, 2], [8], 8, 3, 11),
    ([2, 5, 9, 2], [8], 8, 3, "unknown"),
    ([2, 5, 9, 2], [8], 8, 3, 0),
    ([2, 5, 9, 2], [8], 8, 3, -1),            # OpenVINO: an unknown length
    ([2, 5, -1, 2], [8], 8, 3, None),
    ([2, 5, D(3, 10), 2], [8], 8, 3, None),
    ([2, 5, D(1, 5), 2], [8], 8, 3, None),
    ([2, 5, D(2, -1), 2], [8], 8, 3, None),
    ([2, 5, D(1, -1), 2], [8], 8, 3, None),
    (None, [8], 8, 3, None),
    ([2, 5, 9, 2], [8], "unknown", 3, None),
    ([2, 4, 9, 2], [8], 8, 3, None),        # 4 bins, frame_size 8 needs 5
    ([2, 5, 9, 2], [9], 8, 3, None),
    ([2, 5, 9, 2], [8], 8, 0, None),
    ([5, 2], [8], 8, 3, None),
]


@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("data, window, frame_size, frame_step, length", ISTFT_SHAPE_CASES)
def test_istft_shape_function(data, window, frame_size, frame_step, length, center):
    args = [param(data), param(window), frame_arg(frame_size), frame_arg(frame_step)]
    if length is not None:
        args.append(frame_arg(length))
    check_shape_function(lambda *a: ops16.istft(*a[:4], center, False, *a[4:]), "ISTFT", 16,
                         {"center": center, "normalized": False}, args)


SPEC_EXAMPLES = [
    # (op, data shape, window, frame_size, frame_step, attribute, output the spec page gives)
    ("STFT", [56], 7, 11, 3, False, "[16,6,2]"),
    ("STFT", [56], 7, 11, 3, True, "[6,16,2]"),
    ("STFT", [3, 56], 7, 11, 3, False, "[3,16,6,2]"),
    ("STFT", [3, 56], 7, 11, 3, True, "[3,6,16,2]"),
    ("ISTFT", [6, 16, 2], 7, 11, 3, False, "[56]"),
    ("ISTFT", [4, 6, 16, 2], 7, 11, 3, False, "[4,56]"),
    # The spec gives 45 and [4,45] for center=true: (frames - 1) * frame_step.  OpenVINO subtracts
    # frame_size rounded down to even from the uncentred length: 15 * 3 + 11 - 10 = 46.
    ("ISTFT", [6, 16, 2], 7, 11, 3, True, "[46]"),
    ("ISTFT", [4, 6, 16, 2], 7, 11, 3, True, "[4,46]"),
]


@pytest.mark.parametrize("op, data, window, frame_size, frame_step, flag, expected", SPEC_EXAMPLES)
def test_stft_istft_spec_examples(op, data, window, frame_size, frame_step, flag, expected):
    args = [param(data), param([window]), const(frame_size), const(frame_step)]
    if op == "STFT":
        check_shape_function(lambda *a: ops15.stft(*a, flag), op, 15, {"transpose_frames": flag}, args)
        node = ops15.stft(*args, flag)
    else:
        check_shape_function(lambda *a: ops16.istft(*a, flag, False), op, 16, {"center": flag, "normalized": False},
                             args)
        node = ops16.istft(*args, flag, False)
    assert str(node.get_output_partial_shape(0)) == expected


@pytest.mark.parametrize("shape, axes, sizes, expected", [
    ([1, 161, 161, 2], [1, 2], None, "[1,161,320]"),
    ([161, 161, 2], [0, 1], None, "[161,320]"),
    ([1, 161, 161, 2], [1, 2], [512, 100], "[1,512,100]"),
    ([16, 768, 580, 320, 2], [3, 1, 2], [170, -1, 1024], "[16,768,1024,170]"),
    ([16, 768, 580, 320, 2], [3, 0, 2], [258, -1, 2056], "[16,768,2056,258]"),
])
def test_irdft_spec_examples(shape, axes, sizes, expected):
    args = fft_args(shape, axes, sizes)
    check_shape_function(lambda *a: ops9.irdft(*a), "IRDFT", 9, {}, args)
    assert str(ops9.irdft(*args).get_output_partial_shape(0)) == expected


def test_stft_istft_element_types():
    cases = [(np.float16, np.float32, np.int64), (np.int32, np.int32, np.int64), (np.float32, np.float32, np.uint8)]
    for data, window, index in cases:
        args = [param([2, 16], data), param([4], window), const(4, index), const(2, index)]
        check_shape_function(lambda *a: ops15.stft(*a, False), "STFT", 15, {"transpose_frames": False}, args)
        args = [param([2, 3, 5, 2], data), param([4], window), const(4, index), const(2, index)]
        check_shape_function(lambda *a: ops16.istft(*a, False, False), "ISTFT", 16,
                             {"center": False, "normalized": False}, args)


# ---------------------------------------------------------------- validate

def test_validate_dft_declared_shape(tmp_path):
    p = param([3, 6, 2])
    xml = edited_ir(model(ops7.dft(p, const([1]), const([9])), [p]), tmp_path, "DFT", output_dims=[3, 6, 2])
    problems = irrun.validate(xml).errors
    assert [e.code for e in problems] == ["E-DECLARED-SHAPE"], [e.format() for e in problems]
    assert "signal_size[0] = 9" in problems[0].message


def test_validate_rdft_declared_shape(tmp_path):
    p = param([3, 8])
    xml = edited_ir(model(ops9.rdft(p, const([1])), [p]), tmp_path, "RDFT", output_dims=[3, 8, 2])
    problems = irrun.validate(xml).errors
    assert [e.code for e in problems] == ["E-DECLARED-SHAPE"], [e.format() for e in problems]
    assert "n // 2 + 1" in problems[0].message


def test_validate_stft_window_longer_than_frame(tmp_path):
    p, w = param([2, 40]), param([8])
    node = ops15.stft(p, w, const(8), const(4), False)
    node.set_friendly_name("the_stft")
    xml = edited_ir(model(node, [p, w]), tmp_path, "STFT", input_dims={1: [9]})
    with pytest.raises(RuntimeError, match="Window input dimension"):
        ov.Core().read_model(str(xml))
    problems = irrun.validate(xml).errors
    assert any(e.layer.name == "the_stft" and "frame_size=8" in e.message for e in problems), \
        [e.format() for e in problems]


def test_validate_istft_bins_do_not_fit_frame_size(tmp_path):
    p, w = param([2, 5, 9, 2]), param([8])
    node = ops16.istft(p, w, const(8), const(4), False, False)
    node.set_friendly_name("the_istft")
    xml = edited_ir(model(node, [p, w]), tmp_path, "ISTFT", input_dims={0: [2, 6, 9, 2]})
    with pytest.raises(RuntimeError, match="frame_size // 2 \\+ 1"):
        ov.Core().read_model(str(xml))
    problems = irrun.validate(xml).errors
    assert any(e.layer.name == "the_istft" and "frame_size // 2 + 1 = 5" in e.message for e in problems), \
        [e.format() for e in problems]
