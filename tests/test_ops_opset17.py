"""The opset17 ops of OpenVINO 2026.4.1: ErfInv, GroupedMatMul, RGBtoNV12, BGRtoNV12.

OpenVINO 2026.4.1 reads all four, but only ErfInv runs: the CPU plugin has a kernel for it, and
neither the CPU plugin nor OpenVINO's reference evaluation (`Model.evaluate`) has one for the
other three.  Their shape inference is compared with OpenVINO's everywhere; their values with an
OpenVINO model of plain ops that computes what OpenVINO's reference source for the op does
(run by `Model.evaluate`, op by op in f32, so that u8 rounding ties come out the same), and
the NV12 encoders also round-trip through OpenVINO's own NV12 decoders.  specs/errata/misc2.md
says where the spec pages differ from what the runtime reads.
"""
from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset1 as ops1
import openvino.opset8 as ops8
import openvino.opset17 as ops17
import pytest
from openvino.utils.node_factory import NodeFactory

import irrun
from irrun.errors import ModelError
from irrun.shapes import format_shape
from ovutil import (as_tensor_type, check_shape_function, compare, const, edited_ir, evaluate_reference, irrun_infer_all,
                    irrun_outputs, openvino_refuses, ov_shape_text, param, run_openvino, save)

D = ov.Dimension
RNG = np.random.default_rng(17)
OPSET17 = NodeFactory("opset17")


# ---------------------------------------------------------------- ErfInv

def erfinv_model(dtype, shape=(-1,)):
    x = param(list(shape), dtype)
    return ov.Model([ops17.erfinv(x)], [x])


def erfinv_inputs(dtype) -> np.ndarray:
    """The whole open interval, the approach to +-1 from 1e-8 away, +-1 itself, beyond, NaN, +-0, tiny."""
    near_one = 1 - np.logspace(-8, -1, 200)
    values = np.concatenate([np.linspace(-1, 1, 4001)[1:-1], near_one, -near_one, [1, -1, 1.5, -2, np.inf, -np.inf],
                             [np.nan, 0.0, -0.0, 1e-30, -1e-12, 0.9966, -0.99663, 0.99668]])
    return values.astype(dtype)


def test_erfinv_f32(tmp_path):
    """The CPU plugin's ErfInv is a JIT approximation of OpenVINO's rational function, within
    1.05e-4 relative of it (measured over every f32 in [0.9966, 0.9967], where the two polynomials
    meet, and 2.1 million more): hence rtol 1.5e-4."""
    got = compare(erfinv_model(np.float32), [erfinv_inputs(np.float32)], tmp_path, rtol=1.5e-4, atol=0)
    out = next(iter(got.values()))
    assert out[-14:-12].tolist() == [np.inf, -np.inf] and np.isnan(out[-12:-8]).all()   # +-1, |x| > 1
    assert np.isnan(out[-8]) and out[-7] == 0


def test_erfinv_f16_every_value(tmp_path):
    """All 65536 half-precision values, computed in f32 and rounded once: at most one f16 ulp from the
    CPU plugin (which is 1.05e-4 relative off OpenVINO's function)."""
    every = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    compare(erfinv_model(np.float16), [every], tmp_path, rtol=1e-3, atol=6e-8)


def test_erfinv_f64(tmp_path):
    """The CPU plugin computes f64 in f32 (so inputs here are f32 values; 1 - 1e-8 would be 1 to it),
    and brings +-inf back as +-FLT_MAX: irrun computes in f64 and keeps +-inf, the op's value at +-1
    (specs/errata/unary.md)."""
    x = erfinv_inputs(np.float32).astype(np.float64)
    inside = np.abs(x) < 1
    compare(erfinv_model(np.float64), [x[inside]], tmp_path, rtol=1.5e-4, atol=0)
    edges = np.array([1.0, -1.0])
    (cpu,) = run_openvino(save(erfinv_model(np.float64), tmp_path / "edges"), [edges])
    assert cpu.tolist() == [np.finfo(np.float32).max, -np.finfo(np.float32).max]
    assert irrun_outputs(erfinv_model(np.float64), [edges], tmp_path / "irrun")[0].tolist() == [np.inf, -np.inf]


def test_erfinv_is_openvinos_function_not_the_exact_one(tmp_path):
    """OpenVINO's tail polynomial (|x| > 0.99663) has one coefficient's sign flipped against Giles'
    paper: at 0.999 it gives 2.32191 where erfinv is 2.32675 (erf(2.32675) = 0.999)."""
    got = irrun_outputs(erfinv_model(np.float64), [np.array([0.999, 0.5])], tmp_path)[0]
    np.testing.assert_allclose(got, [2.3219063, 0.4769363], rtol=1e-6)   # OpenVINO's values
    assert abs(got[0] - 2.3267537655) > 4e-3                              # erfinv(0.999)


@pytest.mark.parametrize("shape", [[2, 3, 4], [], [0, 5], None, [D(1, 4), -1]], ids=str)
def test_erfinv_shapes(shape, tmp_path):
    x = param(shape, np.float32)
    check_shape_function(ops17.erfinv, "ErfInv", 17, {}, [x])


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.bool_])
def test_erfinv_refuses_non_float(dtype):
    check_shape_function(ops17.erfinv, "ErfInv", 17, {}, [param([3], dtype)], refusal="floating-point")


def test_erfinv_scalar_and_dynamic_dims(tmp_path):
    compare(erfinv_model(np.float32, ()), [np.array(0.25, np.float32)], tmp_path / "scalar", rtol=1.5e-4)
    compare(erfinv_model(np.float32, (-1, -1)), [RNG.uniform(-1, 1, (2, 3)).astype(np.float32)],
            tmp_path / "dynamic", rtol=1.5e-4)


# ---------------------------------------------------------------- GroupedMatMul

def grouped_model(shape_a, shape_b, offsets_shape=None, dtype=np.float32, offsets_dtype=np.int32):
    a, b = param(shape_a, dtype, name="tokens"), param(shape_b, dtype, name="experts")
    params = [a, b]
    if offsets_shape is not None:
        params.append(param(offsets_shape, offsets_dtype, name="offsets"))
    return ov.Model([ops17.grouped_matmul(*params)], params)


def masked_grouped_reference(a: np.ndarray, b: np.ndarray, offsets) -> list[np.ndarray]:
    """OpenVINO computes [T, K] x [G, N, K] with offsets as sum over g of rows_g * (a @ b[g]^T),
    rows_g the 0/1 mask of group g's rows: one non-zero term per row, so exact in any type."""
    groups, rows = b.shape[0], a.shape[0]
    mask = np.zeros((groups, rows, 1), a.dtype)
    start = 0
    for g, end in enumerate(offsets):
        mask[g, start:end] = 1
        start = end
    pa, pb = param(list(a.shape), a.dtype), param(list(b.shape), b.dtype)
    compute = np.float32 if a.dtype == np.float16 else a.dtype
    fa, fb = (ops1.convert(p, compute) if compute != a.dtype else p for p in (pa, pb))
    products = ops1.matmul(ops1.unsqueeze(fa, ops1.constant(np.int64(0))), fb, False, True)   # [G, T, N]
    total = ops1.reduce_sum(ops1.multiply(products, const(mask.astype(compute), compute)),
                            ops1.constant(np.int64(0)))
    out = ops1.convert(total, a.dtype) if compute != a.dtype else total
    return evaluate_reference(ov.Model([out], [pa, pb]), [a, b])


def sample(shape, dtype):
    if np.dtype(dtype).kind == "f":
        return RNG.standard_normal(shape).astype(dtype)
    return RNG.integers(-4, 5, shape).astype(dtype)


OFFSET_CASES = {
    "three-groups": ([3, 8, 10], 10),
    "empty-first-and-middle": ([0, 4, 4, 9], 9),
    "one-group-takes-all": ([0, 0, 7], 7),
    "trailing-rows-uncovered": ([2, 5], 8),       # rows 5..7 belong to no group: 0
    "all-empty": ([0, 0], 3),
    "no-tokens": ([0, 0, 0], 0),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.int64])
@pytest.mark.parametrize("offsets_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("case", OFFSET_CASES)
def test_grouped_matmul_routed_tokens(case, offsets_dtype, dtype, tmp_path):
    offsets, rows = OFFSET_CASES[case]
    groups, n, k = len(offsets), 5, 6
    a, b = sample((rows, k), dtype), sample((groups, n, k), dtype)
    m = grouped_model([-1, k], [groups, n, k], [groups], dtype, offsets_dtype)
    (got,) = irrun_outputs(m, [a, b, np.array(offsets, offsets_dtype)], tmp_path, check_validate=True)
    if rows:
        (expected,) = masked_grouped_reference(a, b, offsets)
    else:   # OpenVINO's reference MatMul dies of a division by zero (SIGFPE) on 0 integer rows
        expected = np.zeros((0, n), dtype)
    assert got.dtype == expected.dtype and got.shape == (rows, n)
    tolerance = {np.float16: dict(rtol=1e-3, atol=1e-3), np.float32: dict(rtol=1e-5, atol=1e-6)}.get(dtype)
    if tolerance:
        np.testing.assert_allclose(got, expected, **tolerance)
    else:
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
@pytest.mark.parametrize("with_offsets", [False, True], ids=["two-inputs", "offsets-ignored"])
def test_grouped_matmul_batched(dtype, with_offsets, tmp_path):
    """[G, M, K] x [G, N, K] is MatMul(a, b, transpose_b) per group; offsets, if given, are not used."""
    a, b = sample((3, 4, 6), dtype), sample((3, 5, 6), dtype)
    inputs = [a, b] + ([np.array([9, 0, 1], np.int32)] if with_offsets else [])
    m = grouped_model([3, 4, 6], [3, 5, 6], [3] if with_offsets else None, dtype)
    (got,) = irrun_outputs(m, inputs, tmp_path, check_validate=True)
    pa, pb = param([3, 4, 6], dtype), param([3, 5, 6], dtype)
    (expected,) = run_openvino(save(ov.Model([ops1.matmul(pa, pb, False, True)], [pa, pb]), tmp_path / "matmul"),
                               [a, b])
    assert got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-3 if dtype == np.float16 else 1e-5, atol=1e-5)


def test_grouped_matmul_moe_feed_forward(tmp_path):
    """A Mixtral-style expert layer on tokens sorted by expert: gate and up projections in one
    GroupedMatMul, SwiGLU, then the down projection, against the same layer made of masked
    MatMuls in OpenVINO."""
    tokens, hidden, ffn, experts = 12, 16, 24, 4
    offsets = np.array([3, 3, 10, 12], np.int64)
    x = RNG.standard_normal((tokens, hidden)).astype(np.float32)
    w_gate_up = (RNG.standard_normal((experts, 2 * ffn, hidden)) / 4).astype(np.float32)
    w_down = (RNG.standard_normal((experts, hidden, ffn)) / 4).astype(np.float32)

    def layer(matmul):
        gate_up = matmul(x_node, ops1.constant(w_gate_up))
        gate, up = ops1.split(gate_up, ops1.constant(np.int64(-1)), 2).outputs()
        act = ops1.multiply(ops1.multiply(gate, ops1.sigmoid(gate)), up)     # SiLU(gate) * up
        return matmul(act, ops1.constant(w_down))
    x_node = param([-1, hidden], name="x")
    off = param([experts], np.int64, name="offsets")
    grouped = ov.Model([layer(lambda a, w: ops17.grouped_matmul(a, w, off))], [x_node, off])
    (got,) = irrun_outputs(grouped, [x, offsets], tmp_path, check_validate=True)

    mask = np.zeros((experts, tokens, 1), np.float32)
    for g, (s, e) in enumerate(zip([0, *offsets[:-1]], offsets)):
        mask[g, s:e] = 1
    x_node = param([tokens, hidden], name="x")

    def masked(a, w):
        per_expert = ops1.matmul(ops1.unsqueeze(a, ops1.constant(np.int64(0))), w, False, True)
        return ops1.reduce_sum(ops1.multiply(per_expert, ops1.constant(mask)), ops1.constant(np.int64(0)))
    (expected,) = run_openvino(save(ov.Model([layer(masked)], [x_node]), tmp_path / "masked"), [x])
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_grouped_matmul_bad_offsets_are_errors(tmp_path):
    m = grouped_model([-1, 4], [3, 5, 4], [-1])
    xml = save(m, tmp_path)
    model = irrun.load(xml)
    a, b = sample((6, 4), np.float32), sample((3, 5, 4), np.float32)
    for offsets, message in [([4, 2, 6], "non-decreasing"), ([-1, 2, 6], "non-negative"), ([2, 4, 7], "past the 6 rows"),
                             ([2, 6], "2 offsets for 3 groups")]:
        with pytest.raises(ModelError, match=message):
            model.infer([a, b, np.array(offsets, np.int32)])


SHAPE_CASES = {
    "routed": ([7, 4], [3, 5, 4], [3]),
    "routed-dynamic": ([-1, -1], [-1, -1, -1], [-1]),
    "routed-intervals": ([D(2, 5), D(1, 4)], [3, 5, D(3, 6)], [3]),
    "routed-offsets-of-another-length": ([7, 4], [3, 5, 4], [2]),
    "routed-offsets-dynamic-rank": ([7, 4], [3, 5, 4], None),
    "batched": ([3, 2, 4], [3, 5, 4], "none"),
    "batched-dynamic": ([-1, -1, 4], [3, -1, -1], "none"),
    "batched-with-offsets": ([3, 2, 4], [3, 5, 4], [3]),
    "dynamic-rank": (None, [3, 5, 4], [3]),
    # refused
    "routed-without-offsets": ([7, 4], [3, 5, 4], "none"),
    "inner-mismatch": ([7, 4], [3, 5, 6], [3]),
    "batched-group-mismatch": ([2, 7, 4], [3, 5, 4], "none"),
    "batched-inner-mismatch": ([3, 2, 4], [3, 5, 6], "none"),
    "two-by-two": ([4, 7], [5, 7], [3]),
    "four-by-four": ([2, 3, 7, 4], [2, 3, 5, 4], "none"),
    "one-by-three": ([4], [3, 5, 4], [3]),
    "offsets-2d": ([7, 4], [3, 5, 4], [3, 1]),
    "offsets-scalar": ([7, 4], [3, 5, 4], []),
}


@pytest.mark.parametrize("case", SHAPE_CASES)
def test_grouped_matmul_shape_inference(case):
    shape_a, shape_b, offsets = SHAPE_CASES[case]
    args = [param(shape_a), param(shape_b)] + ([] if offsets == "none" else [param(offsets, np.int32)])
    check_shape_function(lambda *a: ops17.grouped_matmul(*a), "GroupedMatMul", 17, {}, args,
                         refusal="GroupedMatMul")


@pytest.mark.parametrize("types", [(np.float16, np.float32, np.int32), (np.float32, np.float32, np.float32),
                                   (np.float32, np.float32, np.uint8), (np.int8, np.int8, np.int64),
                                   (np.bool_, np.bool_, np.int32), (ov.Type.bf16, ov.Type.bf16, np.int32)], ids=str)
def test_grouped_matmul_element_types(types):
    a, b, off = (ov.op.Parameter(t if isinstance(t, ov.Type) else ov.Type(np.dtype(t)), ov.PartialShape(s))
                 for t, s in zip(types, ([7, 4], [3, 5, 4], [3])))
    check_shape_function(lambda *x: ops17.grouped_matmul(*x), "GroupedMatMul", 17, {}, [a, b, off])


# ---------------------------------------------------------------- RGBtoNV12, BGRtoNV12

ENCODERS = ["RGBtoNV12", "BGRtoNV12"]
PIXEL_TYPES = {"u8": np.uint8, "f32": np.float32, "f16": np.float16}


def encoder(op, x, single_plane=True):
    return OPSET17.create(op, [x.output(0) if isinstance(x, ov.Node) else x], {"single_plane": single_plane})


def pixels(shape, dtype):
    if np.dtype(dtype) == np.uint8:
        return RNG.integers(0, 256, shape).astype(np.uint8)
    return RNG.uniform(-40, 300, shape).astype(dtype)     # past [0, 255] both sides: the clamp shows


def nv12_by_plain_ops(image: np.ndarray, bgr: bool, single_plane: bool) -> list[np.ndarray]:
    """OpenVINO's reference source for the encoders, as a model of plain ops run by Model.evaluate."""
    x = param(list(image.shape), image.dtype)
    f = ops1.convert(x, np.float32)
    channels = ops1.split(f, ops1.constant(np.int64(3)), 3).outputs()
    r, g, b = (channels[2], channels[1], channels[0]) if bgr else channels
    rounds = image.dtype == np.uint8

    def c(v):
        return ops1.constant(np.float32(v))

    def clamp(v):
        return ops1.clamp(ops8.round(v, "half_away_from_zero") if rounds else v, 0.0, 255.0)

    def weighted(wr, wg, wb, bias):   # ((wr r + wg g) + wb b) + bias, the reference's order
        return clamp(ops1.add(ops1.add(ops1.add(ops1.multiply(c(wr), r), ops1.multiply(c(wg), g)),
                                       ops1.multiply(c(wb), b)), c(bias)))
    n, h, w = image.shape[:3]
    y = weighted(0.257, 0.504, 0.098, 16)
    # -0.148 r - 0.291 g + 0.439 b + 128 as the reference writes it: subtractions, not negative weights
    u = clamp(ops1.add(ops1.add(ops1.subtract(ops1.multiply(c(-0.148), r), ops1.multiply(c(0.291), g)),
                                ops1.multiply(c(0.439), b)), c(128)))
    v = clamp(ops1.add(ops1.subtract(ops1.subtract(ops1.multiply(c(0.439), r), ops1.multiply(c(0.368), g)),
                                     ops1.multiply(c(0.071), b)), c(128)))

    def block_mean(plane):
        q = ops1.reshape(plane, ops1.constant(np.array([n, h // 2, 2, w // 2, 2], np.int64)), False)

        def corner(i, j):
            return ops8.gather(ops8.gather(q, ops1.constant(np.int64(i)), ops1.constant(np.int64(2))),
                               ops1.constant(np.int64(j)), ops1.constant(np.int64(3)))
        total = ops1.add(ops1.add(ops1.add(corner(0, 0), corner(0, 1)), corner(1, 0)), corner(1, 1))
        mean = ops1.divide(total, c(4))
        return ops8.round(mean, "half_away_from_zero") if rounds else mean
    uv = ops1.concat([ops1.unsqueeze(block_mean(u), ops1.constant(np.int64(-1))),
                      ops1.unsqueeze(block_mean(v), ops1.constant(np.int64(-1)))], -1)
    outputs = [y, uv]
    if single_plane:
        flat = [ops1.reshape(t, ops1.constant(np.array([n, -1], np.int64)), False) for t in (y, uv)]
        outputs = [ops1.reshape(ops1.concat(flat, 1), ops1.constant(np.array([n, h * 3 // 2, w, 1], np.int64)), False)]
    outputs = [ops1.convert(t, image.dtype) for t in outputs]
    return evaluate_reference(ov.Model(outputs, [x]), [image])


@pytest.mark.parametrize("op", ENCODERS)
@pytest.mark.parametrize("dtype", PIXEL_TYPES)
@pytest.mark.parametrize("single_plane", [True, False], ids=["single-plane", "two-planes"])
def test_encoder_values(op, dtype, single_plane, tmp_path):
    image = pixels((2, 8, 12, 3), PIXEL_TYPES[dtype])
    x = param(list(image.shape), image.dtype)
    m = ov.Model(encoder(op, x, single_plane).outputs(), [x])
    got = irrun_outputs(m, [image], tmp_path, check_validate=True)
    expected = nv12_by_plain_ops(image, op == "BGRtoNV12", single_plane)
    assert len(got) == (1 if single_plane else 2)
    for actual, want in zip(got, expected):
        assert actual.dtype == want.dtype and actual.shape == want.shape
        if dtype == "u8":
            np.testing.assert_array_equal(actual, want)
        else:   # f16: both compute in f32 and round once
            np.testing.assert_allclose(actual, want, rtol=1e-6 if dtype == "f32" else 0, atol=0)


def test_encoder_u8_ties(tmp_path):
    """Pixels whose Y or block mean sits on a half (grey 128: y = 125.5 rounds to 126; a block of U
    values 100, 101, 100, 101 has mean 100.5 -> 101): the reference's std::round, halves away from 0."""
    image = np.zeros((1, 2, 2, 3), np.uint8)
    image[:] = 128
    x = param([1, 2, 2, 3], np.uint8)
    m = ov.Model(encoder("RGBtoNV12", x, False).outputs(), [x])
    y, uv = irrun_outputs(m, [image], tmp_path)
    # 0.257*128 + 0.504*128 + 0.098*128 + 16 = 125.952 -> 126; u = 127.99 -> 128; v = 128.0 -> 128
    assert y.reshape(-1).tolist() == [126] * 4 and uv.reshape(-1).tolist() == [128, 128]
    for got, want in zip((y, uv), nv12_by_plain_ops(image, False, False)):
        np.testing.assert_array_equal(got, want)
    gradient = RNG.integers(0, 256, (1, 64, 64, 3)).astype(np.uint8)
    xg = param([1, 64, 64, 3], np.uint8)
    got = irrun_outputs(ov.Model(encoder("RGBtoNV12", xg, False).outputs(), [xg]), [gradient], tmp_path / "g")
    for a, b in zip(got, nv12_by_plain_ops(gradient, False, False)):
        np.testing.assert_array_equal(a, b)


def test_bgr_is_rgb_reversed(tmp_path):
    image = pixels((1, 4, 6, 3), np.float32)
    x = param([1, 4, 6, 3])
    rgb = irrun_outputs(ov.Model(encoder("RGBtoNV12", x).outputs(), [x]), [image[..., ::-1].copy()], tmp_path / "r")
    bgr = irrun_outputs(ov.Model(encoder("BGRtoNV12", x).outputs(), [x]), [image], tmp_path / "b")
    np.testing.assert_array_equal(rgb[0], bgr[0])


@pytest.mark.parametrize("op", ENCODERS)
@pytest.mark.parametrize("single_plane", [True, False], ids=["single-plane", "two-planes"])
def test_encoder_round_trips_through_openvinos_decoder(op, single_plane, tmp_path):
    """irrun's NV12 fed to OpenVINO's NV12toRGB/BGR gives the image back, up to what 4:2:0 chroma
    and u8 rounding lose: a smooth image (one colour per 2x2 block) comes back within 3 levels."""
    blocks = RNG.integers(40, 216, (1, 8, 10, 3))
    image = np.repeat(np.repeat(blocks, 2, axis=1), 2, axis=2).astype(np.uint8)
    x = param(list(image.shape), np.uint8)
    planes = irrun_outputs(ov.Model(encoder(op, x, single_plane).outputs(), [x]), [image], tmp_path / "enc")
    decode = ops8.nv12_to_bgr if op == "BGRtoNV12" else ops8.nv12_to_rgb
    ps = [param(list(p.shape), np.uint8) for p in planes]
    (back,) = run_openvino(save(ov.Model([decode(*ps)], ps), tmp_path / "dec"), planes)
    assert back.shape == image.shape
    assert np.abs(back.astype(int) - image.astype(int)).max() <= 3


ENCODER_SHAPES = {
    "static": [1, 4, 4, 3],
    "batch-2": [2, 6, 8, 3],
    "dynamic": [-1, -1, -1, -1],
    "dynamic-rank": None,
    "intervals": [2, D(3, 9), D(2, 7), 3],
    "empty": [1, 0, 0, 3],
    "channels-dynamic": [1, 4, 4, -1],
    # refused
    "odd-height": [1, 5, 4, 3],
    "odd-width": [1, 4, 5, 3],
    "static-odd-interval": [2, D(3, 3), 4, 3],
    "four-channels": [1, 4, 4, 4],
    "rank-3": [4, 4, 3],
    "rank-5": [1, 1, 4, 4, 3],
}


@pytest.mark.parametrize("op", ENCODERS)
@pytest.mark.parametrize("single_plane", [True, False], ids=["single-plane", "two-planes"])
@pytest.mark.parametrize("case", ENCODER_SHAPES)
def test_encoder_shape_inference(op, single_plane, case):
    check_shape_function(lambda x: encoder(op, x, single_plane), op, 17, {"single_plane": single_plane},
                         [param(ENCODER_SHAPES[case])], all_outputs=True, refusal=op)


@pytest.mark.parametrize("single_plane", [True, False], ids=["single-plane", "two-planes"])
def test_encoder_unbounded_dims(single_plane):
    """An unbounded height stays unbounded; OpenVINO halves (or takes 3/2 of) the unbounded bound
    itself and prints 2^62 as the upper bound, an overflow artifact irrun does not copy."""
    x = param([2, D(5, -1), D(4, -1), 3])
    theirs = [ov_shape_text(o.get_partial_shape()) for o in encoder("RGBtoNV12", x, single_plane).outputs()]
    ours = [format_shape(t.shape) for t in irrun_infer_all("RGBtoNV12", 17, {"single_plane": single_plane},
                                                              [as_tensor_type(x.output(0))])]
    assert [t.replace("..4611686018427387904", "..") for t in theirs] == ours
    assert ours == (["[2,8..,4..,1]"] if single_plane else ["[2,5..,4..,1]", "[2,3..,2..,2]"])


@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.float16, np.float64, ov.Type.bf16,
                                   np.int8, np.int32, np.uint16, np.bool_], ids=str)
def test_encoder_element_types(dtype):
    x = ov.op.Parameter(dtype if isinstance(dtype, ov.Type) else ov.Type(np.dtype(dtype)), ov.PartialShape([1, 4, 4, 3]))
    check_shape_function(lambda x: encoder("RGBtoNV12", x, False), "RGBtoNV12", 17, {"single_plane": False}, [x],
                         all_outputs=True, refusal="u8 or floating-point")


def test_single_plane_defaults_to_true(tmp_path):
    """OpenVINO's IR reader takes a missing single_plane as true: one output, 3/2 the height."""
    x = param([1, 4, 4, 3], np.uint8)
    xml = edited_ir(ov.Model(encoder("RGBtoNV12", x).outputs(), [x]), tmp_path, "RGBtoNV12", drop=("single_plane",))
    assert not openvino_refuses(xml)
    assert irrun.validate(xml).ok
    (out,) = irrun.load(xml).infer([pixels((1, 4, 4, 3), np.uint8)]).values()
    assert out.shape == (1, 6, 4, 1)


def test_opset17_version_strings(tmp_path):
    """version="opset17" resolves for the four new ops and for Parameter/Convert/ShapeOf, the only
    earlier ops in OpenVINO 2026.4.1's opset17; an Add written as opset17 is refused by both."""
    x = param([2, 3])
    m = ov.Model([ops1.add(ops17.erfinv(x), ops1.convert(x, np.float32))], [x])
    xml = save(m, tmp_path)
    text = xml.read_text().replace('type="Parameter" version="opset1"', 'type="Parameter" version="opset17"')
    text = text.replace('type="Convert" version="opset1"', 'type="Convert" version="opset17"')
    xml.write_text(text)
    assert not openvino_refuses(xml) and irrun.validate(xml).ok
    xml.write_text(text.replace('type="Add" version="opset1"', 'type="Add" version="opset17"'))
    assert openvino_refuses(xml)
    assert "E-OP-VERSION" in irrun.validate(xml).codes()
