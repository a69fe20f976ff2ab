"""Interpolate-1, -4 and -11 against OpenVINO.

Four kinds of test:
* differential runs (`compare`): the model is saved as IR, run by the CPU
  plugin and by irrun, every output compared.  Sweeps put many Interpolate
  nodes on one Parameter, so one compile covers a whole row of attributes;
* the reference oracle (`oracle="reference"`) only where the CPU plugin is
  known to be wrong (each such test says why; specs/errata/resampling.md);
* shape functions alone, with OpenVINO's partial-shape inference as the oracle;
* hand-checked values: PyTorch's documented upsampling results, Pillow's
  filter arithmetic, and the Interpolate-1 coordinate quirk.
"""
from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset1 as ops1
import openvino.opset10 as ops4  # Interpolate-4 is built by opset10's (and opset4's) interpolate
import openvino.opset11 as ops11
import pytest
from ovutil import (
    compare, const, edited_ir, evaluate_reference, irrun_infer, irrun_infer_all, model, only_output, ov_shape_text,
    param, run_openvino, save, tensor_type
)

import irrun
from irrun.errors import ShapeError, UnsupportedError
from irrun.shapes import format_shape

RNG = np.random.default_rng(5)
D = ov.Dimension
TRANSFORMS = ["half_pixel", "pytorch_half_pixel", "asymmetric", "tf_half_pixel_for_nn", "align_corners"]
NEAREST_MODES = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple"]


def sample(shape, dtype=np.float32):
    dtype = np.dtype(dtype)
    if dtype == np.uint8:
        return RNG.integers(0, 256, shape).astype(dtype)
    if dtype.kind in "iu":
        return RNG.integers(-100, 100, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def interp4(x, mode, sizes=None, scales=None, axes=None, **attrs):
    """Interpolate-4; `scales` given means shape_calculation_mode=scales, else sizes."""
    n = len(sizes if scales is None else scales)
    calc = "sizes" if scales is None else "scales"
    sizes = const(sizes if sizes is not None else [1] * n, np.int64)
    scales = const(scales if scales is not None else [1.0] * n, np.float32)
    if axes is not None:
        attrs["axes"] = const(axes, np.int64)
    return ops4.interpolate(x, sizes, scales, mode, calc, **attrs)


def interp11(x, mode, sizes=None, scales=None, axes=None, **attrs):
    target = const(sizes, np.int64) if scales is None else const(scales, np.float32)
    if axes is not None:
        attrs["axes"] = const(axes, np.int64)
    return ops11.interpolate(x, target, mode, "sizes" if scales is None else "scales", **attrs)


def interp1(x, mode, sizes, axes, **attrs):
    return ops1.interpolate(x, const(sizes, np.int64), {"axes": axes, "mode": mode, **attrs})


def run_irrun(xml: Path, inputs) -> list[np.ndarray]:
    return list(irrun.load(xml).infer(list(inputs)).values())


# ---------------------------------------------------------------- Interpolate-4: modes and coordinates

# (sizes, scales) per output on [2, 3, 7, 9] data resized on axes [2, 3]: up, down, mixed, and a size-1
# output (where pytorch_half_pixel and align_corners map everything to 0).
V4_TARGETS = [([11, 20], None), ([3, 4], None), (None, [1.7, 0.6]), (None, [2.0, 2.0]), ([7, 1], None),
              (None, [0.5, 0.34])]


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("mode", ["nearest", "linear_onnx", "cubic", "linear"])
def test_v4_modes_and_transforms(mode, transform, tmp_path):
    x = param([2, 3, 7, 9])
    nodes = [interp4(x, mode, sizes, scales, [2, 3], coordinate_transformation_mode=transform)
             for sizes, scales in V4_TARGETS]
    compare(model(nodes, [x]), [sample([2, 3, 7, 9])], tmp_path)


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_v4_nearest_modes(transform, tmp_path):
    """Scales with coordinates on exact .5 ties, where the rounding modes part ways."""
    x = param([2, 2, 8, 12])
    nodes = [interp4(x, "nearest", scales=scales, axes=[2, 3], coordinate_transformation_mode=transform,
                     nearest_mode=nearest)
             for nearest in NEAREST_MODES
             for scales in ([0.5, 1.5], [2.5, 1 / 3], [3.0, 0.75], [0.25, 2.0])]
    nodes += [interp4(x, "nearest", sizes, axes=[2, 3], coordinate_transformation_mode=transform,
                      nearest_mode=nearest) for nearest in NEAREST_MODES for sizes in ([13, 5], [4, 25])]
    compare(model(nodes, [x]), [sample([2, 2, 8, 12])], tmp_path)


# (data shape, axes): 1-D, 2-D and 3-D resizing on ranks 1 to 5, including non-spatial axes.
RANK_CASES = [([10], [0]), ([4, 10], [1]), ([5, 10], [0, 1]), ([2, 3, 10], [2]), ([3, 6, 10], [0, 1, 2]),
              ([2, 3, 6, 10], [3]), ([2, 3, 6, 10], [1]), ([2, 3, 6, 10], [0, 3]), ([2, 2, 4, 6, 10], [2, 3, 4]),
              ([2, 2, 4, 6, 10], [3, 4])]


def case_id(shape, axes) -> str:
    return f"{len(shape)}d-axes{''.join(map(str, axes))}"


@pytest.mark.parametrize("shape, axes", RANK_CASES, ids=[case_id(*c) for c in RANK_CASES])
def test_v4_ranks_and_axes(shape, axes, tmp_path):
    # the CPU plugin refuses cubic on 5-D data and gets three cubic axes wrong (test_v4_cubic_where_cpu_cannot)
    modes = ["nearest", "linear_onnx", "linear"] + (["cubic"] if len(shape) < 5 and len(axes) < 3 else [])
    up = [min(2 * shape[a] + 1, 21) for a in axes]
    down = [0.6] * len(axes)
    x = param(shape)
    nodes = [interp4(x, mode, up, axes=axes) for mode in modes]
    nodes += [interp4(x, mode, scales=down, axes=axes, coordinate_transformation_mode="asymmetric") for mode in modes]
    compare(model(nodes, [x]), [sample(shape)], tmp_path)


def test_v4_without_axes_input_resizes_every_dim(tmp_path):
    x = param([2, 3, 5, 8])
    nodes = [interp4(x, "nearest", scales=[1.0, 1.0, 2.0, 0.5]), interp4(x, "linear_onnx", [2, 3, 9, 4]),
             interp4(x, "cubic", scales=[1.0, 1.0, 1.5, 1.5])]
    compare(model(nodes, [x]), [sample([2, 3, 5, 8])], tmp_path)


@pytest.mark.parametrize("mode", ["nearest", "linear_onnx", "cubic", "linear"])
def test_v4_pads(mode, tmp_path):
    """Zero padding before resizing; the scale of sizes mode is out / padded in."""
    x = param([1, 2, 5, 6])
    pads = {"pads_begin": [0, 0, 1, 2], "pads_end": [0, 0, 2, 0]}
    nodes = [interp4(x, mode, [9, 5], axes=[2, 3], **pads), interp4(x, mode, scales=[1.5, 0.7], axes=[2, 3], **pads),
             interp4(x, mode, [4, 13], axes=[2, 3], coordinate_transformation_mode="align_corners", **pads),
             # pads shorter than the rank are zero-extended, longer ones cut
             interp4(x, mode, [9, 9], axes=[2, 3], pads_begin=[0, 0, 1], pads_end=[0, 0, 1, 1, 7])]
    if mode == "nearest":
        nodes.append(interp4(x, mode, [9, 9], axes=[2, 3], pads_begin=[1, 1, 0, 0], pads_end=[0, 1, 0, 0]))
    compare(model(nodes, [x]), [sample([1, 2, 5, 6])], tmp_path)


def test_v4_scales_mode_maps_coordinates_with_the_scale(tmp_path):
    """In scales mode the given scale maps coordinates, not out / in: 5 * 1.7 -> 8, scale 1.7, not 1.6."""
    x = param([1, 1, 5, 5])
    by_scale = interp4(x, "linear_onnx", scales=[1.7, 1.7], axes=[2, 3])
    by_size = interp4(x, "linear_onnx", [8, 8], axes=[2, 3])
    got = compare(model([by_scale, by_size], [x]), [sample([1, 1, 5, 5])], tmp_path)
    first, second = got.values()
    assert first.shape == second.shape == (1, 1, 8, 8)
    assert not np.allclose(first, second)


def test_v4_scales_epsilon_in_output_size(tmp_path):
    """floor(n * (scale + 1e-6)) in float32: 10 * 0.3f is 2.9999998, yet the size is 3."""
    x = param([1, 1, 10, 7])
    nodes = [interp4(x, "nearest", scales=scales, axes=[2, 3]) for scales in ([0.3, 1 / 7], [0.29999, 3.0])]
    got = compare(model(nodes, [x]), [sample([1, 1, 10, 7])], tmp_path)
    assert [v.shape for v in got.values()] == [(1, 1, 3, 1), (1, 1, 2, 21)]


@pytest.mark.parametrize("cube_coeff", [-0.75, -0.5, -1.0])
def test_v4_cube_coeff(cube_coeff, tmp_path):
    x = param([1, 2, 6, 7])
    nodes = [interp4(x, "cubic", [11, 4], axes=[2, 3], cube_coeff=cube_coeff, coordinate_transformation_mode=t)
             for t in TRANSFORMS]
    compare(model(nodes, [x]), [sample([1, 2, 6, 7])], tmp_path)


def test_v4_linear_antialias_5d_downsampling(tmp_path):
    """The triangle filter stretched by each scale, once some axis shrinks (every axis then, even one growing)."""
    x = param([1, 2, 6, 9, 12])
    nodes = [interp4(x, "linear", scales=scales, axes=[2, 3, 4], antialias=antialias, coordinate_transformation_mode=t)
             for scales in ([0.5, 0.5, 0.5], [0.4, 1.5, 0.3]) for antialias in (False, True)
             for t in ("half_pixel", "align_corners")]
    got = compare(model(nodes, [x]), [sample([1, 2, 6, 9, 12])], tmp_path)
    plain, smoothed, *_ = got.values()
    assert not np.allclose(plain, smoothed)


def test_v4_linear_antialias_4d_uses_reference(tmp_path):
    """oracle=reference: below rank 5 the CPU plugin runs `linear` as linear_onnx and drops antialias."""
    x = param([1, 2, 9, 12])
    nodes = [interp4(x, "linear", scales=[0.5, 0.4], axes=[2, 3], antialias=True),
             interp4(x, "linear", [4, 13], axes=[2, 3], antialias=True, coordinate_transformation_mode="asymmetric")]
    compare(model(nodes, [x]), [sample([1, 2, 9, 12])], tmp_path, oracle="reference")


def test_v4_linear_antialias_5d_upsampling_uses_reference(tmp_path):
    """oracle=reference: with antialias and every axis growing the CPU plugin still narrows the filter,
    so outputs between input points get no weight and become 0; the spec and reference leave it unchanged."""
    x = param([1, 1, 3, 4, 5])
    node = interp4(x, "linear", scales=[2.0, 2.0, 2.0], axes=[2, 3, 4], antialias=True,
                   coordinate_transformation_mode="asymmetric")
    m = model([node], [x])
    data = sample([1, 1, 3, 4, 5])
    got = compare(m, [data], tmp_path, oracle="reference")
    cpu = run_openvino(save(m, tmp_path), [data])[0]
    assert (cpu == 0).sum() > (only_output(got) == 0).sum()


def test_v4_cubic_where_cpu_cannot(tmp_path):
    """oracle=reference: the CPU plugin refuses cubic on 5-D data, and on 4-D data resized on three axes
    it ignores the scale of the first (depth) axis."""
    x5, x4 = param([1, 2, 4, 5, 6]), param([2, 3, 5, 6])
    nodes = [interp4(x5, "cubic", [7, 3, 9], axes=[2, 3, 4]), interp4(x4, "cubic", [5, 8, 4], axes=[1, 2, 3])]
    compare(model(nodes, [x5, x4]), [sample([1, 2, 4, 5, 6]), sample([2, 3, 5, 6])], tmp_path, oracle="reference")


# ---------------------------------------------------------------- element types

@pytest.mark.parametrize("mode", ["nearest", "linear_onnx", "cubic", "linear"])
def test_v4_f16(mode, tmp_path):
    """f16 is computed in f32 and rounded once (tolerance: f16's half ulp)."""
    x = param([1, 3, 6, 8], np.float16)
    nodes = [interp4(x, mode, [9, 13], axes=[2, 3]), interp4(x, mode, scales=[0.5, 0.75], axes=[2, 3])]
    compare(model(nodes, [x]), [sample([1, 3, 6, 8], np.float16)], tmp_path, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int32, np.int64])
@pytest.mark.parametrize("shape", [[2, 3, 5, 6], [5, 6]], ids=["4d", "2d"])
def test_v4_integer_types(dtype, shape, tmp_path):
    """Integers round half to even and saturate.  Doubling (weights 1/4, 3/4) and halving keep every sum
    exact in float32, so the .5 ties are real ties and test the rounding rule, not summation order."""
    axes = [len(shape) - 2, len(shape) - 1]
    x = param(shape, dtype)
    nodes = [interp4(x, mode, scales=scales, axes=axes) for mode in ("nearest", "linear_onnx", "cubic")
             for scales in ([2.0, 2.0], [0.5, 0.5], [2.0, 0.5])]
    data = sample(shape, dtype)
    if dtype == np.uint8:
        data[..., ::2] = 255   # cubic overshoots above 255 and below 0: saturated
        data[..., 1::2] = 0
    compare(model(nodes, [x]), [data], tmp_path)


def test_v4_nearest_copies_large_integers_exactly(tmp_path):
    """The CPU plugin resamples i32 through float32 even in nearest mode (16777217 -> 16777216); irrun copies."""
    x = param([1, 1, 1, 4], np.int32)
    xml = save(model([interp4(x, "nearest", [1, 8], axes=[2, 3])], [x]), tmp_path)
    data = np.array([[[[16777217, 3, -2147483647, 7]]]], np.int32)
    expected = data.repeat(2, axis=3)
    np.testing.assert_array_equal(run_irrun(xml, [data])[0], expected)
    assert run_openvino(xml, [data])[0][0, 0, 0, 0] == 16777216


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_v4_linear_5d_integers_use_reference(dtype, tmp_path):
    """oracle=reference: the CPU plugin's `linear` kernel (5-D) truncates i8/u8 results toward zero where
    every other kernel rounds; the reference rounds half away from zero.  Even inputs and doubling give
    exact .5 ties."""
    x = param([1, 2, 3, 4, 4], dtype)
    nodes = [interp4(x, "linear", scales=[1.0, 2.0, 2.0], axes=[2, 3, 4])]
    data = (sample([1, 2, 3, 4, 4], dtype) // 2 * 2).astype(dtype)
    got = compare(model(nodes, [x]), [data], tmp_path, oracle="reference")
    values = only_output(got).astype(np.int64)
    assert ((values % 2) != 0).any()   # some ties landed on odd integers: rounding was exercised


# ---------------------------------------------------------------- dynamic shapes

def test_v4_dynamic_input_shapes(tmp_path):
    x = param([1, 3, -1, -1])
    nodes = [interp4(x, "linear_onnx", [8, 9], axes=[2, 3]), interp4(x, "nearest", scales=[2.0, 0.5], axes=[2, 3]),
             interp4(x, "cubic", scales=[1.5, 1.5], axes=[2, 3], pads_begin=[0, 0, 1, 1])]
    m = model(nodes, [x])
    for shape in ([1, 3, 4, 6], [1, 3, 7, 5]):
        compare(m, [sample(shape)], tmp_path)


def test_v11_sizes_known_only_at_run_time(tmp_path):
    x = param([1, 2, -1, -1])
    sizes = ov.op.Parameter(ov.Type.i64, ov.PartialShape([2]))
    node = ops11.interpolate(x, sizes, "linear_onnx", "sizes", axes=const([2, 3], np.int64))
    m = model([node], [x, sizes])
    xml = save(m, tmp_path)
    assert format_shape(irrun.load(xml).outputs[0].shape) == "[1,2,?,?]"
    compare(m, [sample([1, 2, 5, 4]), np.array([9, 3], np.int64)], tmp_path)


# ---------------------------------------------------------------- converter patterns and hand-checked values

def test_pytorch_upsample_nearest_scale_2(tmp_path):
    """nn.Upsample(scale_factor=2, mode="nearest"): Interpolate-11 nearest, asymmetric, floor, scales."""
    x = param([1, 3, 4, 5])
    node = interp11(x, "nearest", scales=[2.0, 2.0], axes=[2, 3], coordinate_transformation_mode="asymmetric",
                    nearest_mode="floor")
    data = sample([1, 3, 4, 5])
    got = only_output(compare(model([node], [x]), [data], tmp_path))
    np.testing.assert_array_equal(got, data.repeat(2, axis=2).repeat(2, axis=3))


PYTORCH_BILINEAR = {  # torch.nn.functional.interpolate([[1, 2], [3, 4]], scale_factor=2, mode="bilinear")
    False: [[1.0, 1.25, 1.75, 2.0], [1.5, 1.75, 2.25, 2.5], [2.5, 2.75, 3.25, 3.5], [3.0, 3.25, 3.75, 4.0]],
    True: [[1.0, 4 / 3, 5 / 3, 2.0], [5 / 3, 2.0, 7 / 3, 8 / 3], [7 / 3, 8 / 3, 3.0, 10 / 3],
           [3.0, 10 / 3, 11 / 3, 4.0]],
}


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("transform", ["half_pixel", "pytorch_half_pixel"])
def test_pytorch_upsample_bilinear(align_corners, transform, tmp_path):
    """mode="bilinear": linear_onnx with pytorch_half_pixel (or half_pixel), or align_corners."""
    x = param([1, 1, 2, 2])
    node = interp11(x, "linear_onnx", scales=[2.0, 2.0], axes=[2, 3],
                    coordinate_transformation_mode="align_corners" if align_corners else transform)
    data = np.array([[[[1, 2], [3, 4]]]], np.float32)
    got = only_output(compare(model([node], [x]), [data], tmp_path))
    np.testing.assert_allclose(got[0, 0], PYTORCH_BILINEAR[align_corners], rtol=1e-6)


def test_pytorch_upsample_bicubic(tmp_path):
    """mode="bicubic", align_corners=False: cubic, a = -0.75, pytorch_half_pixel; PyTorch's documented
    value for [[1, 2], [3, 4]] doubled starts 0.68359375, 1.015625, 1.5625, 1.89453125."""
    x = param([1, 1, 2, 2])
    node = interp11(x, "cubic", scales=[2.0, 2.0], axes=[2, 3], coordinate_transformation_mode="pytorch_half_pixel")
    data = np.array([[[[1, 2], [3, 4]]]], np.float32)
    got = only_output(compare(model([node], [x]), [data], tmp_path))
    np.testing.assert_allclose(got[0, 0, 0], [0.68359375, 1.015625, 1.5625, 1.89453125], rtol=1e-6)


def test_pillow_bilinear_hand_checked(tmp_path):
    """[1, 2, 3, 4] halved: window radius 2 around centre 1.0, weights 3/7, 3/7, 1/7 -> 12/7 and 23/7."""
    x = param([1, 4])
    node = interp11(x, "bilinear_pillow", [1, 2], axes=[0, 1])
    got = only_output(compare(model([node], [x]), [np.array([[1, 2, 3, 4]], np.float32)], tmp_path))
    np.testing.assert_allclose(got, [[12 / 7, 23 / 7]], rtol=1e-6)


# ---------------------------------------------------------------- Interpolate-11

PILLOW_LAYOUTS = [([1, 2, 9, 11], [2, 3]), ([2, 9, 11, 3], [1, 2]), ([9, 11], [0, 1]), ([3, 9, 11], [1, 2])]


@pytest.mark.parametrize("shape, axes", PILLOW_LAYOUTS, ids=["nchw", "nhwc", "2d", "3d"])
@pytest.mark.parametrize("mode", ["bilinear_pillow", "bicubic_pillow"])
def test_v11_pillow(mode, shape, axes, tmp_path):
    """cube_coeff -0.5 (Pillow's): the CPU plugin ignores any other value (test_v11_bicubic_pillow_cube_coeff)."""
    x = param(shape)
    nodes = [interp11(x, mode, sizes, axes=axes, cube_coeff=-0.5) for sizes in ([4, 5], [13, 6], [9, 5], [20, 23])]
    nodes.append(interp11(x, mode, scales=[0.5, 1.7], axes=axes, cube_coeff=-0.5))
    compare(model(nodes, [x]), [sample(shape)], tmp_path)


@pytest.mark.parametrize("shape, axes", [([1, 2, 9, 11], [2, 3]), ([2, 9, 11, 3], [1, 2]), ([9, 11], [0, 1])],
                         ids=["nchw", "nhwc", "2d"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_v11_pillow_integers(dtype, shape, axes, tmp_path):
    """4-D i8/u8 data stays in its type between the two passes; other ranks run in float32 throughout."""
    x = param(shape, dtype)
    nodes = [interp11(x, mode, sizes, axes=axes, cube_coeff=-0.5) for mode in ("bilinear_pillow", "bicubic_pillow")
             for sizes in ([4, 5], [13, 6], [9, 22])]
    compare(model(nodes, [x]), [sample(shape, dtype)], tmp_path)


def test_v11_bicubic_pillow_cube_coeff(tmp_path):
    """oracle=reference: the CPU plugin fixes a at -0.5 whatever cube_coeff says; the spec and the
    reference use cube_coeff (default -0.75)."""
    x = param([1, 2, 7, 9])
    nodes = [interp11(x, "bicubic_pillow", [4, 13], axes=[2, 3]),
             interp11(x, "bicubic_pillow", scales=[0.5, 0.5], axes=[2, 3], cube_coeff=-1.0)]
    compare(model(nodes, [x]), [sample([1, 2, 7, 9])], tmp_path, oracle="reference")


def test_v11_pillow_ignores_coordinate_transformation_mode(tmp_path):
    x = param([1, 2, 7, 9])
    nodes = [interp11(x, "bilinear_pillow", [4, 13], axes=[2, 3], coordinate_transformation_mode=t)
             for t in ("half_pixel", "align_corners", "asymmetric")]
    first, *others = compare(model(nodes, [x]), [sample([1, 2, 7, 9])], tmp_path).values()
    for other in others:
        np.testing.assert_array_equal(first, other)


@pytest.mark.parametrize("mode", ["nearest", "linear", "linear_onnx", "cubic"])
def test_v11_v4_modes(mode, tmp_path):
    x = param([2, 3, 6, 7])
    nodes = [interp11(x, mode, [9, 4], axes=[2, 3]), interp11(x, mode, scales=[1.5, 0.6], axes=[2, 3]),
             interp11(x, mode, scales=[1.0, 1.0, 0.5, 2.0]), interp11(x, mode, [2, 3, 3, 11], pads_end=[0, 0, 1, 1])]
    compare(model(nodes, [x]), [sample([2, 3, 6, 7])], tmp_path)


# ---------------------------------------------------------------- Interpolate-1

V1_CASES = [([2, 3, 5, 7], [2, 3]), ([2, 3, 5, 7], [3]), ([3, 5, 7], [1, 2]), ([5, 7], [0, 1]),
            ([2, 2, 3, 5, 7], [2, 3, 4]), ([2, 2, 3, 5, 7], [3, 4])]


@pytest.mark.parametrize("shape, axes", V1_CASES, ids=[case_id(*c) for c in V1_CASES])
def test_v1_modes(shape, axes, tmp_path):
    """Every mode x align_corners x padding (on the resized dims)."""
    x = param(shape)
    sizes = [2 * shape[a] + 1 if i % 2 == 0 else shape[a] - 2 for i, a in enumerate(axes)]
    pads_begin, pads_end = [0] * len(shape), [0] * len(shape)
    pads_begin[axes[0]], pads_end[axes[-1]] = 1, 2
    nodes = [interp1(x, mode, sizes, axes, align_corners=align, **pads)
             for mode in ("nearest", "linear", "cubic", "linear_onnx") for align in (True, False)
             for pads in ({}, {"pads_begin": pads_begin, "pads_end": pads_end})]
    compare(model(nodes, [x]), [sample(shape)], tmp_path)


def test_v1_linear_coordinates_quirk(tmp_path):
    """OpenVINO converts Interpolate-1 linear without align_corners to half_pixel, except on 4-D data resized
    on {2, 3}, which gets asymmetric: [0, 1, 2, 3] doubled is [0, .5, 1, ...] there, [0, .25, .75, ...] on 3-D."""
    x4, x3 = param([1, 1, 1, 4]), param([1, 1, 4])
    nodes = [interp1(x4, "linear", [1, 8], [2, 3], align_corners=False),
             interp1(x3, "linear", [8], [2], align_corners=False)]
    data = np.arange(4, dtype=np.float32)
    got = compare(model(nodes, [x4, x3]), [data.reshape(1, 1, 1, 4), data.reshape(1, 1, 4)], tmp_path)
    four_d, three_d = (v.reshape(-1) for v in got.values())
    np.testing.assert_allclose(four_d, [0, 0.5, 1, 1.5, 2, 2.5, 3, 3])
    np.testing.assert_allclose(three_d, [0, 0.25, 0.75, 1.25, 1.75, 2.25, 2.75, 3])


def test_v1_default_align_corners_and_nearest_rounding(tmp_path):
    """align_corners defaults to true and nearest truncates ('simple'): 4 -> 6 reads 0, 0, 1, 1, 2, 3."""
    x = param([1, 1, 1, 4])
    got = compare(model([interp1(x, "nearest", [1, 6], [2, 3])], [x]),
                  [np.arange(4, dtype=np.float32).reshape(1, 1, 1, 4)], tmp_path)
    np.testing.assert_array_equal(only_output(got).reshape(-1), [0, 0, 1, 1, 2, 3])


def test_v1_area_has_no_kernel(tmp_path):
    x = param([1, 1, 4, 4])
    xml = save(model([interp1(x, "area", [2, 2], [2, 3])], [x]), tmp_path)
    assert irrun.validate(xml).ok
    with pytest.raises(UnsupportedError, match="area"):
        irrun.load(xml).infer([sample([1, 1, 4, 4])])
    with pytest.raises(RuntimeError):
        run_openvino(xml, [sample([1, 1, 4, 4])])


# ---------------------------------------------------------------- shape functions against OpenVINO

SHAPE_CASES = [  # (data shape, values, axes, scales mode, pads)
    ([1, 3, -1, -1], [2.0, 0.5], [2, 3], True, None),
    ([1, 3, D(2, 10), D(3, -1)], [2.0, 0.5], [2, 3], True, None),
    ([1, 3, D(2, 10), D(3, -1)], [8, 9], [2, 3], False, None),
    ([1, 3, -1, -1], [1.5, 1.3333], [2, 3], True, ([0, 0, 1, 1], [0, 0, 1, 2])),
    ([1, 3, D(2, 10), 7], [1.0, 1.0], [2, 3], True, ([0, 0, 1, 1], [0, 0, 1, 2])),
    ([1, -1, 5, 7], [1.0, 0.3, 1.7], [1, 2, 3], True, ([0, 1, 1, 1], [0, 1, 1, 2])),
    ([5, 7, 9], [0.999, 1.0001], [0, 2], True, None),
    ([D(0, 4), 7], [3.0, 3.0], [0, 1], True, None),
    ([2, 3, 4], [5, 6, 7], None, False, None),
    (None, [5, 6], [0, 1], False, None),
]


@pytest.mark.parametrize("version", [4, 11])
@pytest.mark.parametrize("case", SHAPE_CASES, ids=lambda c: str(c[0]).replace(" ", ""))
def test_shape_function_matches_openvino(version, case):
    shape, values, axes, use_scales, pads = case
    pads_begin, pads_end = pads or ([], [])
    dtype = np.float32 if use_scales else np.int64
    x = param(ov.PartialShape.dynamic() if shape is None else shape)
    attrs = {"pads_begin": pads_begin, "pads_end": pads_end}
    if version == 4:
        node = interp4(x, "nearest", None if use_scales else values, values if use_scales else None, axes, **attrs)
        n = len(values)
        inputs = [tensor_type(shape), tensor_type([n], np.int64, [1] * n if use_scales else values),
                  tensor_type([n], np.float32, values if use_scales else [1.0] * n)]
    else:
        node = interp11(x, "nearest", None if use_scales else values, values if use_scales else None, axes, **attrs)
        inputs = [tensor_type(shape), tensor_type([len(values)], dtype, values)]
    if axes is not None:
        inputs.append(tensor_type([len(axes)], np.int64, axes))
    got = irrun_infer("Interpolate", version, node.get_attributes(), inputs)
    assert format_shape(got.shape) == ov_shape_text(node.get_output_partial_shape(0))


def test_shape_function_unknown_values():
    """Unknown sizes: the resized dims are dynamic; unknown axes: every dim is."""
    attrs = {"mode": "nearest", "shape_calculation_mode": "sizes"}
    data, axes = tensor_type([1, 3, 8, 8]), tensor_type([2], np.int64, [2, 3])
    unknown_sizes = irrun_infer("Interpolate", 11, attrs, [data, tensor_type([2], np.int64), axes])
    unknown_axes = irrun_infer("Interpolate", 11, attrs,
                               [data, tensor_type([2], np.int64, [4, 4]), tensor_type([2], np.int64)])
    for got, node in ((unknown_sizes, ops11.interpolate(param([1, 3, 8, 8]), param([2], np.int64), "nearest", "sizes",
                                                        axes=const([2, 3], np.int64))),
                      (unknown_axes, ops11.interpolate(param([1, 3, 8, 8]), const([4, 4], np.int64), "nearest", "sizes",
                                                       axes=param([2], np.int64)))):
        assert format_shape(got.shape) == ov_shape_text(node.get_output_partial_shape(0))


def test_v1_shape_function():
    attrs = {"axes": "2,3", "mode": "linear"}
    got = irrun_infer("Interpolate", 1, attrs, [tensor_type([1, 3, -1, 9]), tensor_type([2], np.int64, [5, 4])])
    node = interp1(param([1, 3, -1, 9]), "linear", [5, 4], [2, 3])
    assert format_shape(got.shape) == ov_shape_text(node.get_output_partial_shape(0)) == "[1,3,5,4]"


def _v4_inputs(sizes, axes):
    return [tensor_type([1, 3, 8, 8]), tensor_type([len(sizes)], np.int64, sizes),
            tensor_type([len(sizes)], np.float32, [1.0] * len(sizes)), tensor_type([len(axes)], np.int64, axes)]


def _v11_inputs(values, dtype):
    return [tensor_type([1, 3, 8, 8]), tensor_type([2], dtype, values), tensor_type([2], np.int64, [2, 3])]


INCONSISTENT = [  # (OpenVINO node, irrun version, attrs, irrun inputs, message)
    (lambda x: interp4(x, "nearest", [4], axes=[2, 3]), 4, {"mode": "nearest"}, _v4_inputs([4], [2, 3]),
     "sizes has 1 values for 2 axes"),
    (lambda x: interp4(x, "nearest", [4, 4], axes=[2, 4]), 4, {"mode": "nearest"}, _v4_inputs([4, 4], [2, 4]),
     "axes [2, 4] must lie in [0, 3]"),
    (lambda x: ops11.interpolate(x, const([4, 4], np.int32), "nearest", "scales", axes=const([2, 3], np.int64)),
     11, {"shape_calculation_mode": "scales"}, _v11_inputs([4, 4], np.int32), "scales element type"),
    (lambda x: ops11.interpolate(x, const([4.0, 4.0], np.float32), "nearest", "sizes", axes=const([2, 3], np.int64)),
     11, {"shape_calculation_mode": "sizes"}, _v11_inputs([4.0, 4.0], np.float32), "sizes element type"),
]


@pytest.mark.parametrize("make, version, attrs, inputs, words", INCONSISTENT, ids=[c[-1] for c in INCONSISTENT])
def test_inconsistent_operands_refused_like_openvino(make, version, attrs, inputs, words):
    with pytest.raises(RuntimeError):
        make(param([1, 3, 8, 8]))
    with pytest.raises(ShapeError) as err:
        irrun_infer_all("Interpolate", version, attrs, inputs)
    assert words in str(err.value)


# ---------------------------------------------------------------- validate

def test_validate_declared_shape_names_the_arithmetic(tmp_path):
    x = param([1, 3, 7, 8])
    xml = edited_ir(model([interp4(x, "nearest", scales=[1.5, 2.0], axes=[2, 3])], [x]), tmp_path, "Interpolate",
                    output_dims=[1, 3, 11, 16])
    problems = irrun.validate(xml).errors
    assert [e.code for e in problems] == ["E-DECLARED-SHAPE"]
    assert problems[0].layer.type == "Interpolate"
    assert "floor(7 * 1.5) = 10" in problems[0].message


def test_validate_pillow_needs_two_axes(tmp_path):
    """OpenVINO reads this IR; its reference refuses to run it, its CPU plugin resizes the last two axes only."""
    x = param([2, 3, 6, 6])
    m = model([interp11(x, "bilinear_pillow", [4, 4, 4], axes=[1, 2, 3])], [x])
    xml = save(m, tmp_path)
    with pytest.raises(RuntimeError, match="m_axes.size"):
        evaluate_reference(m, [sample([2, 3, 6, 6])])
    problems = irrun.validate(xml).errors
    assert problems and problems[0].layer.type == "Interpolate"
    assert "exactly two axes" in problems[0].message


def test_validate_v1_pads_outside_axes(tmp_path):
    """Shape inference ignores a pad on a dim that is not resized, the CPU plugin applies it."""
    x = param([1, 1, 4, 4])
    xml = save(model([interp1(x, "nearest", [6], [3], pads_begin=[0, 1, 0, 0])], [x]), tmp_path)
    cpu = run_openvino(xml, [sample([1, 1, 4, 4])])[0]
    assert cpu.shape == (1, 2, 4, 6) != tuple(ov.Core().read_model(str(xml)).output(0).get_shape())
    problems = irrun.validate(xml).errors
    assert problems and "pads dim 1" in problems[0].message


def test_missing_mode_attributes_default_like_openvino(tmp_path):
    """The spec marks mode and shape_calculation_mode required; OpenVINO reads them missing as nearest and sizes."""
    x = param([1, 2, 5, 6])
    m = model([interp4(x, "linear_onnx", [8, 4], axes=[2, 3], coordinate_transformation_mode="asymmetric")], [x])
    xml = edited_ir(m, tmp_path, "Interpolate", drop=("mode", "shape_calculation_mode"))
    assert irrun.validate(xml).ok
    data = sample([1, 2, 5, 6])
    np.testing.assert_array_equal(run_irrun(xml, [data])[0], run_openvino(xml, [data])[0])


def test_v1_unknown_mode_is_an_attribute_error(tmp_path):
    """OpenVINO reads any v1 mode string and fails only when it runs."""
    x = param([1, 1, 4, 4])
    xml = edited_ir(model([interp1(x, "linear", [6, 6], [2, 3])], [x]), tmp_path, "Interpolate", {"mode": "bogus"})
    with pytest.raises(RuntimeError):
        run_openvino(xml, [sample([1, 1, 4, 4])])
    assert [e.code for e in irrun.validate(xml).errors] == ["E-ATTR-ENUM"]
