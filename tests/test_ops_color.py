"""NV12toRGB/BGR-8 and I420toRGB/BGR-8 against OpenVINO.

The CPU plugin is the only oracle: OpenVINO's reference evaluation has no
kernel for these ops (`Model.evaluate` fails).  Divergences from the spec page
are in specs/errata/misc2.md.
"""
import numpy as np
import openvino as ov
import openvino.opset8 as ops8
import pytest

from ovutil import check_shape_function, compare, save
from irxml import hand_ir
import irrun

D = ov.Dimension
RNG = np.random.default_rng(8)

BUILD = {"NV12toRGB": ops8.nv12_to_rgb, "NV12toBGR": ops8.nv12_to_bgr,
         "I420toRGB": ops8.i420_to_rgb, "I420toBGR": ops8.i420_to_bgr}
OPS = list(BUILD)
DTYPES = {"u8": np.uint8, "f32": np.float32, "f16": np.float16}


def param(shape, dtype=np.uint8):
    shape = ov.PartialShape.dynamic() if shape is None else ov.PartialShape(shape)
    return ov.op.Parameter(ov.Type(np.dtype(dtype)), shape)


def pixels(shape, dtype):
    """u8: the whole range; floats: a range past [0, 255] on both sides, so the clamp shows."""
    if np.dtype(dtype) == np.uint8:
        return RNG.integers(0, 256, shape).astype(np.uint8)
    return RNG.uniform(-40, 300, shape).astype(dtype)


def plane_shapes(op, n, h, w, single):
    """Input shapes of one image: [N, 3H/2, W, 1] single-plane, else the separate planes."""
    if single:
        return [[n, h * 3 // 2, w, 1]]
    if op.startswith("NV12"):
        return [[n, h, w, 1], [n, h // 2, w // 2, 2]]
    return [[n, h, w, 1], [n, h // 2, w // 2, 1], [n, h // 2, w // 2, 1]]


def color_model(op, shapes, dtype, param_shapes=None):
    params = [param(s, dtype) for s in (param_shapes or shapes)]
    return ov.Model([BUILD[op](*params)], params)


# ---------------------------------------------------------------- differential runs

@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("single", [True, False], ids=["single-plane", "separate-planes"])
def test_conversion(op, dtype, single, tmp_path):
    shapes = plane_shapes(op, 2, 16, 24, single)
    inputs = [pixels(s, DTYPES[dtype]) for s in shapes]
    tol = {"rtol": 1e-3, "atol": 0.25} if dtype == "f16" else {}
    compare(color_model(op, shapes, DTYPES[dtype]), inputs, tmp_path, **tol)


@pytest.mark.parametrize("op", OPS)
def test_u8_rounding_of_every_chroma_pair(op, tmp_path):
    """Every (U, V) pair once, with 4 luma values per 2x2 block: u8 results round half to even
    (ties happen), as the CPU plugin does."""
    u, v = np.meshgrid(np.arange(256, dtype=np.uint8), np.arange(256, dtype=np.uint8), indexing="ij")
    u, v = u[None, ..., None], v[None, ..., None]
    y = RNG.integers(0, 256, (1, 512, 512, 1)).astype(np.uint8)
    if op.startswith("NV12"):
        inputs = [y, np.concatenate([u, v], axis=-1)]
    else:
        inputs = [y, u, v]
    compare(color_model(op, [a.shape for a in inputs], np.uint8), inputs, tmp_path)


def test_hand_checked_pixel(tmp_path):
    """Y=100, U=90, V=200 by the formula: r = 1.164*84 + 1.596*72 = 212.688 -> 213,
    g = 97.776 + 14.858 - 58.536 = 54.098 -> 54, b = 97.776 - 76.684 = 21.092 -> 21."""
    y = np.full((1, 2, 2, 1), 100, np.uint8)
    uv = np.array([90, 200], np.uint8).reshape(1, 1, 1, 2)
    got = compare(color_model("NV12toRGB", [y.shape, uv.shape], np.uint8), [y, uv], tmp_path)
    assert np.all(next(iter(got.values())) == [213, 54, 21])


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("single", [True, False], ids=["single-plane", "separate-planes"])
def test_dynamic_shapes(op, single, tmp_path):
    shapes = plane_shapes(op, 1, 8, 6, single)
    dynamic = [[-1, -1, -1, s[3]] for s in shapes]
    inputs = [pixels(s, np.float32) for s in shapes]
    compare(color_model(op, shapes, np.float32, dynamic), inputs, tmp_path)


# ---------------------------------------------------------------- shape functions against OpenVINO's

def _nodes(shapes, dtype=np.uint8):
    return [param(s, dtype) for s in shapes]


SINGLE_PLANE = [[1, 6, 4, 1], [2, 12, 8, -1], [-1, -1, -1, -1], [1, D(3, 12), D(2, 9), 1], [1, D(6, 30), 4, 1],
                [1, 9, 4, 1], [1, 7, 4, 1], [1, 6, 5, 1], [1, 6, 4, 2], [1, 6, 4], None, [1, D(4, 5), 4, 1]]
NV12_PLANES = [([1, 4, 4, 1], [1, 2, 2, 2]), ([-1, -1, -1, 1], [2, 3, 5, 2]), ([2, 4, 6, 1], [-1, -1, -1, -1]),
               (None, [1, 2, 3, 2]), ([1, 4, 4, 1], None), ([1, 4, 4, 1], [1, 2, 3, 2]), ([1, 4, 4, 1], [1, 2, 2, 1]),
               ([1, 4, 4, 1], [2, 2, 2, 2]), ([1, D(2, 8), 4, 1], [1, D(1, 2), 2, 2]), ([1, 4, 4, 1], [1, 2, 2])]
I420_PLANES = [([1, 4, 4, 1], [1, 2, 2, 1], [1, 2, 2, 1]), ([-1, -1, -1, 1], [2, 3, -1, 1], [-1, -1, 5, 1]),
               (None, None, [1, 2, 3, 1]), ([1, 4, 4, 1], [1, 2, 2, 1], [1, 2, 3, 1]),
               ([1, 4, 4, 1], [1, 2, 2, 2], [1, 2, 2, 2]), ([1, 4, 6, 1], [1, 2, 2, 1], [1, 2, 2, 1]),
               ([1, D(2, 8), 4, 1], [1, D(1, 2), 2, 1], [1, -1, 2, 1])]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape", SINGLE_PLANE, ids=str)
def test_single_plane_shape_function(op, shape):
    check_shape_function(BUILD[op], op, 8, {}, _nodes([shape]))


@pytest.mark.parametrize("shapes", NV12_PLANES, ids=str)
def test_nv12_planes_shape_function(shapes):
    check_shape_function(BUILD["NV12toRGB"], "NV12toRGB", 8, {}, _nodes(shapes, np.float32))


@pytest.mark.parametrize("shapes", I420_PLANES, ids=str)
def test_i420_planes_shape_function(shapes):
    check_shape_function(BUILD["I420toBGR"], "I420toBGR", 8, {}, _nodes(shapes, np.float32))


@pytest.mark.parametrize("types", [[np.int32], [np.float16], [np.float64], [np.int8], [np.uint8, np.float32]], ids=str)
def test_element_types(types):
    shapes = [[1, 6, 4, 1]] if len(types) == 1 else [[1, 4, 4, 1], [1, 2, 2, 2]]
    nodes = [param(s, t) for s, t in zip(shapes, types)]
    check_shape_function(BUILD["NV12toRGB"], "NV12toRGB", 8, {}, nodes)


# ---------------------------------------------------------------- validate

def test_wrong_declared_output_is_reported(tmp_path):
    xml = hand_ir(tmp_path, "NV12toRGB", [([1, 6, 4, 1], "U8")], [1, 6, 4, 3], version="opset8")
    report = irrun.validate(xml)
    assert "E-DECLARED-SHAPE" in report.codes()


def test_inconsistent_planes_name_the_layer(tmp_path):
    xml = hand_ir(tmp_path, "I420toRGB", [([1, 4, 4, 1], "U8"), ([1, 2, 2, 1], "U8"), ([1, 2, 3, 1], "U8")],
                  [1, 4, 4, 3], version="opset8", name="to_rgb")
    report = irrun.validate(xml)
    assert not report.ok
    assert any("to_rgb" in d.format() and "U and V" in d.message for d in report.errors)


def test_two_planes_for_i420_is_an_error(tmp_path):
    xml = hand_ir(tmp_path, "I420toBGR", [([1, 4, 4, 1], "U8"), ([1, 2, 2, 1], "U8")], [1, 4, 4, 3],
                  version="opset8")
    assert not irrun.validate(xml).ok


def test_ir_written_by_openvino_validates(tmp_path):
    m = color_model("NV12toBGR", [[1, 12, 8, 1]], np.uint8)
    assert irrun.validate(save(m, tmp_path)).ok
