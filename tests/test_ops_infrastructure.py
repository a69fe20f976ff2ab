"""Parameter / Const / Result / Convert against OpenVINO."""
import numpy as np
import openvino as ov
import openvino.opset1 as ops
import pytest

from ovutil import assert_close, compare, evaluate_reference, save
import irrun

SOURCES = {
    "f32": np.array([-3.7, -2.5, -0.5, 0.5, 2.5, 127.6, 128.4, 255.5, 256.7, -129.0, 65519.0, 70000.0, 0.0],
                    np.float32),
    "i64": np.array([-300, -129, -1, 0, 1, 127, 128, 255, 256, 65536, 2**40], np.int64),
    "i32": np.array([-300, -129, -1, 0, 1, 127, 128, 255, 256, 65536], np.int32),
    "u8": np.array([0, 1, 127, 128, 255], np.uint8),
    "boolean": np.array([True, False, True]),
    "f16": np.array([-1.5, 0.0, 2.75, 65504], np.float16),
}
TARGETS = ["f32", "f16", "f64", "i64", "i32", "i16", "i8", "u8", "u16", "u32", "boolean"]


@pytest.mark.parametrize("src", sorted(SOURCES))
@pytest.mark.parametrize("dst", TARGETS)
def test_convert(src, dst, tmp_path):
    x = SOURCES[src]
    param = ops.parameter(list(x.shape), getattr(ov.Type, src), name="x")
    model = ov.Model([ops.result(ops.convert(param, getattr(ov.Type, dst)))], [param])
    # The CPU plugin computes i64 in int32, so 2**40 loses its high bits there;
    # OpenVINO's reference evaluation keeps them, and irrun follows it.
    oracle = "reference" if src == "i64" else "cpu"
    compare(model, [x], tmp_path, oracle=oracle)


def test_convert_out_of_range_follows_reference(tmp_path):
    """The CPU plugin converts f32 -> i64 through int32 and maps NaN -> False;
    OpenVINO's reference evaluation does neither.  irrun follows the reference."""
    x = np.array([1e10, -1e10, np.nan, 3.9, -3.9], np.float32)
    for dst in ("i64", "boolean", "i8", "u16"):
        param = ops.parameter([5], ov.Type.f32, name="x")
        model = ov.Model([ops.result(ops.convert(param, getattr(ov.Type, dst)))], [param])
        xml = save(model, tmp_path)
        (got,) = irrun.load(xml).infer([x]).values()
        assert_close(got, evaluate_reference(model, [x])[0], what=dst)


def test_parameter_to_result_and_constant_outputs(tmp_path):
    x = ops.parameter([2, 2], ov.Type.i32, name="x")
    const = ops.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
    model = ov.Model([ops.result(x), ops.result(const)], [x])
    compare(model, [np.array([[1, 2], [3, 4]], np.int32)], tmp_path)


def test_f16_compressed_constant(tmp_path):
    x = ops.parameter([3], ov.Type.f32, name="x")
    w = ops.constant(np.array([0.1, -7.25, 1000.5], np.float32))
    model = ov.Model([ops.result(ops.convert(w, ov.Type.f32)), ops.result(x)], [x])
    compare(model, [np.ones(3, np.float32)], tmp_path, compress=True)
