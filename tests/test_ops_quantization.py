"""FakeQuantize-1 against OpenVINO.

With the limits as Parameters the CPU plugin runs OpenVINO's reference formula
and agrees bit for bit, so most cases compare exactly (rtol = atol = 0), also on
values placed exactly on the rounding boundaries.  With Constant limits the CPU
plugin precomputes a scale/shift form that can land one level away at a
boundary and mishandles output_low/output_high of different shapes (see
specs/errata/sequence.md): those cases use the reference evaluation.
"""
from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset1 as ops
import pytest
from irxml import hand_ir
from ovutil import compare, save

import irrun
from irrun.errors import ShapeError, UnsupportedError
from irrun.ops.quantization import check_limit_shapes, limit_at_every_element
from irrun.shapes import parse_partial_shape

RNG = np.random.default_rng(7)
EXACT = {"rtol": 0, "atol": 0}


def fq_case(x, limits, levels, *, const_limits=False, auto_broadcast="numpy", shown=None):
    """(model, feeds): X a Parameter, the limits Parameters (fed) or Constants."""
    x_param = ops.parameter(ov.PartialShape(shown or list(x.shape)), x.dtype)
    if const_limits:
        nodes, params, feeds = [ops.constant(lim) for lim in limits], [x_param], [x]
    else:
        nodes = [ops.parameter(list(lim.shape), lim.dtype) for lim in limits]
        params, feeds = [x_param] + nodes, [x] + list(limits)
    node = ops.fake_quantize(x_param, *nodes, levels, auto_broadcast)
    return ov.Model([node], params), feeds


def ranges(shape, dtype=np.float32):
    """Limits of `shape` with in_low < in_high (however they broadcast); output ranges of either sign."""
    in_low = RNG.uniform(-2, -0.3, shape).astype(dtype)
    in_high = RNG.uniform(0.3, 3, shape).astype(dtype)
    out_low = RNG.uniform(-1, 1, shape).astype(dtype)
    out_high = (out_low + RNG.uniform(-3, 3, shape)).astype(dtype)
    return [in_low, in_high, out_low, out_high]


def on_boundaries(limits, levels, extra_axis_len, shape):
    """X whose values sit exactly at (k + 0.5) steps, one float away on either side, and at the limits."""
    in_low, in_high = (np.broadcast_to(a, shape) for a in limits[:2])
    k = np.arange(extra_axis_len) % (levels - 1)
    t = ((k + 0.5) / np.float32(levels - 1)).astype(np.float32).reshape((-1,) + (1,) * (len(shape) - 1))
    mid = (in_low + t * (in_high - in_low)).astype(np.float32)
    return np.concatenate([mid, np.nextafter(mid, np.float32(9)), np.nextafter(mid, np.float32(-9)),
                           in_low, in_high, np.nextafter(in_low, np.float32(-9))], axis=0)


@pytest.mark.parametrize("levels", [2, 3, 16, 256])
@pytest.mark.parametrize("limit_shape", [[], [1, 3, 1, 1], [1, 3, 4, 1]])
def test_rounding_boundaries_exact(levels, limit_shape, tmp_path):
    """Half steps round to even, as nearbyint; every case bit-identical to OpenVINO."""
    limits = ranges(limit_shape)
    x = on_boundaries(limits, levels, 8, [8, 3, 4, 5])
    compare(*fq_case(x, limits, levels), tmp_path, **EXACT)


@pytest.mark.parametrize("levels", [2, 256])
@pytest.mark.parametrize("shapes", [
    [[1, 3, 1, 1]] * 4,                                    # per channel
    [[1, 3, 1, 1], [1, 3, 1, 1], [], []],                  # per-channel input range, per-tensor output range
    [[], [], [1, 3, 1, 1], [1, 3, 1, 1]],
    [[1, 3, 1, 1], [], [1, 1, 1, 5], [1, 3, 4, 5]],        # every shape different
    [[3, 1, 1], [4, 5], [5], [1]],                         # lower ranks
    [[2, 3, 4, 5]] * 4,                                    # per element
])
def test_per_channel_ranges(levels, shapes, tmp_path):
    x = (RNG.standard_normal([2, 3, 4, 5]) * 2).astype(np.float32)
    limits = [ranges(s)[i] for i, s in enumerate(shapes)]
    compare(*fq_case(x, limits, levels), tmp_path, **EXACT)


@pytest.mark.parametrize("levels", [2, 255, 256])
@pytest.mark.parametrize("const_limits", [False, True])
def test_inverted_input_range(levels, const_limits, tmp_path):
    """in_low > in_high: below min(...) gives out_low, above max(...) out_high, in between the formula.
    With Constant limits the CPU plugin's levels=2 path gives out_low throughout: checked against the reference."""
    x = RNG.uniform(-3, 3, [4, 3, 8]).astype(np.float32)
    limits = [np.array([1.5, 0.2, -1], np.float32).reshape(3, 1), np.array([-1.0, -0.4, 2], np.float32).reshape(3, 1),
              np.float32(-0.5), np.float32(2.0)]
    compare(*fq_case(x, [np.asarray(a) for a in limits], levels, const_limits=const_limits), tmp_path,
            oracle="reference" if const_limits else "cpu", **EXACT)


@pytest.mark.parametrize("levels", [2, 256])
@pytest.mark.parametrize("shapes", [[[]] * 4, [[1, 3, 1, 1]] * 4, [[1, 3, 1, 1], [1, 3, 1, 1], [], []]])
def test_constant_limits(levels, shapes, tmp_path):
    """A typical model: constant limits on random data (no values on boundaries), within f32 rounding."""
    x = (RNG.standard_normal([2, 3, 4, 5]) * 2).astype(np.float32)
    limits = [ranges(s)[i] for i, s in enumerate(shapes)]
    compare(*fq_case(x, limits, levels, const_limits=True), tmp_path, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("levels", [16, 256])
def test_constant_limits_on_boundaries(levels, tmp_path):
    """The CPU plugin's scale/shift form can miss a boundary by one level: irrun follows the reference."""
    limits = ranges([1, 3, 1, 1])
    x = on_boundaries(limits, levels, 8, [8, 3, 4, 5])
    compare(*fq_case(x, limits, levels, const_limits=True), tmp_path, oracle="reference", **EXACT)


@pytest.mark.parametrize("per_channel", ["output_low", "output_high"])
def test_constant_output_limits_of_different_shapes(per_channel, tmp_path):
    """CPU plugin bug: with Constant limits where only one of output_low/output_high is per-channel it uses the
    wrong channel's value; the reference (and the CPU plugin with Parameter limits) broadcast correctly."""
    x = RNG.uniform(-6, 6, [1, 3, 5, 2]).astype(np.float32)
    limits = ranges([1, 3, 1, 1])
    if per_channel == "output_low":
        limits[3] = limits[3][:, :1]
    else:
        limits[2] = limits[2][:, :1]
    compare(*fq_case(x, limits, 256, const_limits=True), tmp_path, oracle="reference", **EXACT)


@pytest.mark.parametrize("auto_broadcast,shapes", [
    ("none", [[2, 3, 4]] * 4),
    ("pdpd", [[2, 1, 4], [], [2, 3, 4], [1]]),
])
def test_broadcast_modes(auto_broadcast, shapes, tmp_path):
    x = RNG.uniform(-3, 3, [2, 3, 4]).astype(np.float32)
    limits = [ranges(s)[i] for i, s in enumerate(shapes)]
    compare(*fq_case(x, limits, 256, auto_broadcast=auto_broadcast), tmp_path, **EXACT)


@pytest.mark.parametrize("shapes", [[[1, 3, 1]] * 4, [[1, 3, 1], [2, 3, 4], [3, 1], []], [[5, 2, 1, 4], [], [], []]])
def test_limits_larger_than_x(shapes, tmp_path):
    """OpenVINO accepts limits that broadcast beyond X; the output keeps X's shape and reads index 0 there."""
    x = RNG.uniform(-3, 3, [2, 1, 4]).astype(np.float32)
    limits = [ranges(s)[i] for i, s in enumerate(shapes)]
    compare(*fq_case(x, limits, 256), tmp_path, **EXACT)


def test_pdpd_limits_off_the_end_refused(tmp_path):
    """pdpd accepts input_low [2, 3] on X [2, 3, 4] (from axis 0), but OpenVINO's kernel then reads the limits by
    its internal strides (not by the pdpd layout): irrun refuses to guess."""
    x = RNG.uniform(-3, 3, [2, 3, 4]).astype(np.float32)
    model, feeds = fq_case(x, [ranges([2, 3])[0], np.float32(2), np.float32(0), np.float32(1)], 256,
                           auto_broadcast="pdpd")
    xml = save(model, tmp_path)
    assert irrun.validate(xml).ok
    with pytest.raises(UnsupportedError, match=r"input_low \[2,3\] does not line up with the end of X"):
        irrun.load(xml).infer(feeds)


def test_f16(tmp_path):
    x = (RNG.standard_normal([2, 3, 4, 5]) * 2).astype(np.float16)
    limits = [a.astype(np.float16) for a in ranges([1, 3, 1, 1])]
    got = compare(*fq_case(x, limits, 256), tmp_path, rtol=1e-3, atol=1e-3)
    assert next(iter(got.values())).dtype == np.float16


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_inputs(dtype, tmp_path):
    """C++ integer arithmetic: the fraction (x - in_low) / (in_high - in_low) is an integer division."""
    x = np.arange(-6, 30, dtype=dtype).reshape(2, 3, 6)
    limits = [np.array(v, dtype) for v in (3, 17, -4, 10)]
    compare(*fq_case(x, limits, 256), tmp_path, oracle="reference")


def test_dynamic_shape(tmp_path):
    x = RNG.uniform(-3, 3, [2, 3, 4]).astype(np.float32)
    compare(*fq_case(x, ranges([1, 3, 1]), 16, shown=[-1, 3, -1]), tmp_path, **EXACT)


def test_compressed_constant_limits(tmp_path):
    x = (RNG.standard_normal([2, 3, 4, 5]) * 2).astype(np.float32)
    compare(*fq_case(x, ranges([1, 3, 1, 1]), 256, const_limits=True), tmp_path, compress=True, rtol=1e-5,
            atol=1e-6)


def test_spec_example_by_hand():
    """levels 3 on [0, 2] -> [0, 10]: steps 0, 5, 10; 0.5 is a half step (rounds to even 0), 1.5 to 2."""
    from irrun.ops.quantization import fake_quantize
    x = np.array([-1, 0, 0.49, 0.5, 0.51, 1.0, 1.5, 2.0, 3.0], np.float32)
    lim = [np.float32(v) for v in (0, 2, 0, 10)]
    np.testing.assert_array_equal(fake_quantize(x, *lim, 3), [0, 0, 0, 0, 5, 5, 10, 10, 10])


# ---------------------------------------------------------------- shape function and validate

def test_limit_indexing_is_numpy_broadcasting_for_numpy_shapes():
    limit = RNG.standard_normal([3, 1, 5])
    np.testing.assert_array_equal(np.broadcast_to(limit_at_every_element(limit, (2, 3, 4, 5)), (2, 3, 4, 5)),
                                  np.broadcast_to(limit, (2, 3, 4, 5)))


D = ov.Dimension


@pytest.mark.parametrize("data,limits,mode", [
    ([2, 3, 4], [[], [1, 3, 1], [3, 1], [4]], "numpy"),
    ([2, 3, 4], [[2, 3, 4, 1], [], [], []], "numpy"),
    ([2, 1, 4], [[1, 3, 1], [], [], []], "numpy"),
    ([2, 1, 4], [[1, 3, 1], [5, 1], [], []], "numpy"),     # checked against the accumulated broadcast
    ([2, 3, 4], [[5], [], [], []], "numpy"),
    ([2, 3, 4], [[3, 4], [], [], []], "none"),
    ([2, 3, 4], [[2, 3, 4]] * 4, "none"),
    ([2, 3, 4], [[3], [], [], []], "pdpd"),
    ([2, 3, 4], [[2, 3], [2, 1, 4], [], []], "pdpd"),
    ([-1, 3, -1], [[1, 3, 1], [], [], []], "numpy"),
    ([D(1, 4), 3], [[5, 1], [], [], []], "numpy"),
    (None, [[1, 3, 1], [], [], []], "numpy"),
])
def test_shape_check_matches_openvino(data, limits, mode):
    params = [ops.parameter(ov.PartialShape.dynamic() if s is None else ov.PartialShape(s), np.float32)
              for s in [data] + limits]
    try:
        ops.fake_quantize(*params, 256, mode)
        expected = "ok"
    except RuntimeError:
        expected = "error"
    parsed = [None if s is None else parse_partial_shape(str(ov.PartialShape(s))) for s in [data] + limits]
    try:
        check_limit_shapes(parsed[0], parsed[1:], mode, 0)
        got = "ok"
    except ShapeError:
        got = "error"
    assert got == expected


def test_validate_wrong_declared_output(tmp_path):
    xml = hand_ir(tmp_path, "FakeQuantize", [([2, 3, 4], "FP32")] + [([1, 3, 1], "FP32")] * 4, [2, 3, 5],
                  {"levels": "256"})
    errors = irrun.validate(xml).errors
    assert [e.code for e in errors] == ["E-DECLARED-SHAPE"]


def test_validate_limits_that_do_not_broadcast_name_layer(tmp_path):
    xml = hand_ir(tmp_path, "FakeQuantize", [([2, 3, 4], "FP32"), ([1, 5, 1], "FP32")] + [([], "FP32")] * 3,
                  [2, 3, 4], {"levels": "256"}, name="fq")
    errors = irrun.validate(xml).errors
    assert any(e.layer.name == "fq" and "input_low [1,5,1] does not broadcast onto X [2,3,4]" in e.message
               for e in errors), [e.format() for e in errors]


def test_validate_missing_levels(tmp_path):
    """OpenVINO's reader takes a missing levels as 0 (see tests/test_required_attributes.py): a warning."""
    xml = hand_ir(tmp_path, "FakeQuantize", [([2, 3, 4], "FP32")] + [([], "FP32")] * 4, [2, 3, 4], {})
    assert irrun.validate(xml).codes() == ["W-ATTR-DEFAULTED"]


def test_clipped_float_path_is_the_reference_formula_bit_for_bit(monkeypatch):
    """Float data with ordered input limits runs the formula on data clipped to them
    (quantization._clipped_fake_quantize), keeping np.where for an end where the formula does not
    land on the output limit exactly: bit for bit the reference formula with both np.where, over
    random limits (scalar and per channel, output ranges either way round, levels 2 to 65536) and
    data with NaN, infinities and -0.0."""
    from irrun.ops import quantization

    where = np.where

    def reference(x, il, ih, ol, oh, levels):
        steps = np.float32(levels - 1)
        with np.errstate(all="ignore"):
            q = np.rint((x - il) / (ih - il) * steps) / steps * (oh - ol) + ol
        q = where(x > np.maximum(il, ih), oh, q)
        return where(x <= np.minimum(il, ih), ol, q).astype(x.dtype)

    ends = []
    monkeypatch.setattr(quantization.np, "where", lambda *a: ends.append(1) or where(*a), raising=False)
    rng = np.random.default_rng(8)
    for _ in range(300):
        c = int(rng.integers(1, 5))
        x = (rng.standard_normal((2, c, 5, 7)) * rng.uniform(0.1, 10)).astype(np.float32)
        x.reshape(-1)[:4] = [np.nan, np.inf, -np.inf, -0.0]
        shape = (1, c, 1, 1) if rng.random() < 0.5 else ()
        il = np.zeros(shape, np.float32) if rng.random() < 0.3 else rng.uniform(-5, 2, shape).astype(np.float32)
        ih = (il + rng.uniform(0.01, 8, shape)).astype(np.float32)
        ol, oh = (il, ih) if rng.random() < 0.3 else (rng.uniform(-5, 5, shape).astype(np.float32),
                                                       rng.uniform(-5, 5, shape).astype(np.float32))
        levels = int(rng.choice([2, 3, 16, 256, 65536]))
        got = quantization.fake_quantize(x, il, ih, ol, oh, levels)
        want = reference(x, il, ih, ol, oh, levels)
        np.testing.assert_array_equal(got.view(np.uint32)[~np.isnan(want)], want.view(np.uint32)[~np.isnan(want)])
        assert np.array_equal(np.isnan(got), np.isnan(want))
    assert 0 < len(ends) < 2 * 300     # some ends kept np.where, most did not need it
