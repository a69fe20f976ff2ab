"""The executor's plan: in-place kernels never change a tensor someone still reads, unused outputs are
skipped, and the fast loop still names the failing layer.  (Proposed as tests/test_executor.py.)"""
from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset13 as ops
import pytest
from openvino.op.util import Variable, VariableInfo

import irrun
import irrun.allocator
from tests.ovutil import compare, save

RNG = np.random.default_rng(7)


def _x(shape=(1, 4, 6, 6)):
    return RNG.standard_normal(shape).astype(np.float32)


def _c(shape):
    return ops.constant(RNG.standard_normal(shape).astype(np.float32))


def _steps_writing_in_place(xml):
    plan = irrun.load(xml, optimize=False)._plan     # (one step per layer: irrun/optimize.py fuses chains)
    return [s.node.layer.op_type for s in plan.steps if s.consumable]


def test_a_view_read_later_keeps_its_buffer(tmp_path):
    """Relu is a's last direct reader, but a Reshape view of a is read after it: no in-place Relu."""
    p = ops.parameter([1, 4, 6, 6], ov.Type.f32)
    a = ops.add(p, _c((1, 4, 1, 1)))
    view = ops.reshape(a, ops.constant(np.array([1, 144], np.int64)), False)
    r = ops.relu(a)
    out = ops.add(view, ops.reshape(r, ops.constant(np.array([1, 144], np.int64)), False))
    model = ov.Model([ops.result(out)], [p])
    compare(model, [_x()], tmp_path)
    assert "Relu" not in _steps_writing_in_place(tmp_path / "model.xml")


def test_a_tensor_read_after_stays_intact(tmp_path):
    p = ops.parameter([1, 4, 6, 6], ov.Type.f32)
    a = ops.add(p, _c((1, 4, 1, 1)))
    r = ops.sigmoid(a)
    compare(ov.Model([ops.result(ops.multiply(a, r))], [p]), [_x()], tmp_path)


def test_a_chain_runs_in_place_and_matches(tmp_path):
    p = ops.parameter([1, 4, 6, 6], ov.Type.f32)
    a = ops.add(p, _c((1, 4, 1, 1)))
    y = ops.tanh(ops.sigmoid(ops.relu(ops.multiply(a, _c((1, 4, 6, 6))))))
    y = ops.add(y, _c((1, 1, 1, 6)))
    compare(ov.Model([ops.result(y)], [p]), [_x()], tmp_path)
    assert {"Relu", "Sigmoid", "Tanh", "Add"} <= set(_steps_writing_in_place(tmp_path / "model.xml"))
    plan = irrun.load(tmp_path / "model.xml", optimize=False)._plan
    assert all(s.kernel != s.op.run for s in plan.steps if s.node.layer.op_type in ("Relu", "Sigmoid", "Tanh"))


def test_results_and_inputs_are_never_overwritten(tmp_path):
    p = ops.parameter([1, 4, 6, 6], ov.Type.f32)
    a = ops.add(p, _c((1, 4, 1, 1)))
    model = ov.Model([ops.result(a), ops.result(ops.relu(a)), ops.result(ops.relu(p))], [p])
    x = _x()
    kept = x.copy()
    compare(model, [x], tmp_path)
    m = irrun.load(tmp_path / "model.xml")
    first = m.infer([x])
    second = m.infer([x])
    np.testing.assert_array_equal(x, kept)
    for k in first:
        np.testing.assert_array_equal(first[k], second[k])


def test_assigned_value_is_not_overwritten(tmp_path):
    p = ops.parameter([2, 3], ov.Type.f32)
    info = VariableInfo()
    info.data_shape, info.data_type, info.variable_id = ov.PartialShape([2, 3]), ov.Type.f32, "v"
    var = Variable(info)
    read = ops.read_value(ops.constant(np.zeros((2, 3), np.float32)), var)
    a = ops.add(read, p)
    out = ops.relu(a)      # a's last reader, but the Assign keeps a
    model = ov.Model([ops.result(out)], [ops.assign(a, var)], [p])
    xml = save(model, tmp_path)
    m = irrun.load(xml)
    x = np.full((2, 3), -1.0, np.float32)
    m.infer([x])
    np.testing.assert_array_equal(m.state["v"], x)       # not relu(x)
    np.testing.assert_array_equal(list(m.infer([x]).values())[0], np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(m.state["v"], 2 * x)


@pytest.mark.parametrize("read_indices", [False, True])
def test_maxpool_indices_only_when_read(read_indices, tmp_path):
    p = ops.parameter([1, 2, 7, 7], ov.Type.f32)
    pool = ops.max_pool(ops.add(p, _c((1, 2, 1, 1))), [2, 2], [1, 1], [1, 1], [1, 1], [3, 3])
    results = [ops.result(pool.output(0))] + ([ops.result(pool.output(1))] if read_indices else [])
    compare(ov.Model(results, [p]), [_x((1, 2, 7, 7))], tmp_path)


def test_fast_loop_names_the_failing_layer(tmp_path, monkeypatch):
    from irrun.registry import implementation
    p = ops.parameter([1, 4], ov.Type.f32)
    xml = save(ov.Model([ops.result(ops.softmax(ops.relu(p), 1))], [p]), tmp_path)
    monkeypatch.setattr(implementation("Softmax", 8), "run", lambda self, x: 1 / 0)
    with pytest.raises(irrun.ModelError, match=r"Softmax.*ZeroDivisionError"):
        irrun.load(xml).infer([np.ones((1, 4), np.float32)])


def _resident_kib(path) -> int | None:
    """Resident KiB of this process's mappings of `path` (None where /proc/self/smaps is missing)."""
    try:
        with open("/proc/self/smaps") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    total, inside = 0, False
    for line in lines:
        fields = line.split()
        if fields and "-" in fields[0] and len(fields) >= 5:   # a mapping's header line
            inside = fields[-1] == str(path)
        elif inside and line.startswith("Rss:"):
            total += int(fields[1])
    return total


@pytest.mark.parametrize("compress", [False, True])
def test_weights_only_folding_reads_leave_memory(compress, tmp_path):
    """A 4 MiB weight: f16-compressed, it is decompressed once at load and its mapped pages are
    dropped; in f32 the MatMul reads the mapping itself, which stays resident (stored [out, in],
    the layout irrun/optimize.py keeps for two rows of data)."""
    p = ops.parameter([2, 1024], ov.Type.f32)
    w = RNG.standard_normal((1024, 1024)).astype(np.float32)
    model = ov.Model([ops.result(ops.matmul(p, ops.constant(w), False, True))], [p])
    # sums of 1024 products: the order of accumulation shows at atol 1e-5
    compare(model, [_x((2, 1024))], tmp_path, compress=compress, rtol=1e-3, atol=1e-3)
    bin_path = (tmp_path / "model.bin").resolve()
    loaded = irrun.load(tmp_path / "model.xml")
    loaded.infer([_x((2, 1024))])
    resident = _resident_kib(bin_path)
    if resident is None:
        pytest.skip("no /proc/self/smaps")
    if compress:
        assert resident < 64
    else:
        assert resident >= 4096


def test_tensors_reuse_memory_from_one_inference_to_the_next(tmp_path):
    """Eight 1 MiB outputs, dropped by the caller after each inference: glibc's own settings, whose
    trim threshold follows the largest tensor freed (2 MiB here), give the 8 MiB back to the kernel
    each time and fault it in again at the next (about 1,800 page faults an inference here, on and
    on); irrun.allocator keeps freed memory in the process, as OpenVINO keeps its own.  (Either way
    the heap takes an inference or two to settle: the pool's thread starts, a tensor more.)"""
    import resource
    import sys
    if not sys.platform.startswith("linux") or not irrun.allocator.keep_freed_memory():
        pytest.skip("glibc only")
    x = ops.parameter([1, 4, 256, 256], np.float32, name="x")
    outputs = [ops.result(ops.sigmoid(ops.add(x, ops.constant(np.float32(k))))) for k in range(8)]
    model = irrun.load(save(ov.Model(outputs, [x]), tmp_path))
    feed = {"x": np.ones((1, 4, 256, 256), np.float32)}
    for _ in range(3):
        model.infer(feed)
    faults = []
    for _ in range(5):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        model.infer(feed)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    assert sorted(faults)[2] < 200, faults


def test_malloc_left_alone_when_asked(tmp_path):
    import subprocess
    import sys
    code = "import irrun.allocator as a; print(a.keep_freed_memory())"
    for setting, expected in (("default", "False"), ("", "True" if sys.platform.startswith("linux") else "False")):
        env = {**__import__("os").environ, "IRRUN_MALLOC": setting}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        assert out.stdout.strip() == expected


def test_inference_ignores_float_errors_under_the_callers_other_settings(tmp_path, monkeypatch):
    """Every kernel runs with floating-point errors ignored (irrun/float_errors.py), whatever the
    caller set, and under the caller's buffer size; the caller's state is back afterwards, and a
    change the caller makes between calls is seen by the next one."""
    import warnings
    from irrun.registry import implementation
    p = ops.parameter([1, 4], ov.Type.f32)
    y = ops.divide(ops.exp(ops.multiply(p, _c((1, 4)))), ops.relu(p))
    compare(ov.Model([ops.result(y)], [p]), [np.array([[100, -100, 0, 3]], np.float32)], tmp_path)
    xml = tmp_path / "model.xml"
    seen = []
    relu = implementation("Relu", 1)
    kernel = relu.run
    monkeypatch.setattr(relu, "run", lambda self, x: seen.append((np.geterr(), np.getbufsize())) or kernel(self, x))
    model = irrun.load(xml, optimize=False)
    x = np.array([[100, -100, 0, 3]], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for size in (8192, 16384):
            with np.errstate(all="raise"):
                np.setbufsize(size)
                try:
                    model.infer([x])
                    assert np.geterr() == {"divide": "raise", "over": "raise", "under": "raise", "invalid": "raise"}
                finally:
                    np.setbufsize(8192)
    ignored = {"divide": "ignore", "over": "ignore", "under": "ignore", "invalid": "ignore"}
    assert seen == [(ignored, 8192), (ignored, 16384)]


def test_results_read_where_their_tensors_are(tmp_path):
    """A Result that is its tensor's last reader is not a step of the fast loop (the loop leaves the
    tensor where the Result finds it); one whose tensor a later layer reads and one of an input
    still give their values (a failing layer after a skipped Result: tests/test_fast_loop.py)."""
    p = ops.parameter([1, 4], ov.Type.f32)
    a = ops.relu(p)
    b = ops.softmax(ops.multiply(a, _c((1, 4))), 1)
    model = ov.Model([ops.result(a), ops.result(b), ops.result(p), ops.result(ops.add(a, b))], [p])
    compare(model, [_x((1, 4))], tmp_path)
    xml = tmp_path / "model.xml"
    plan = irrun.load(xml, optimize=False)._plan
    results = [k for k, s in enumerate(plan.steps) if s.node.layer.op_type == "Result"]
    skipped = [k for k in results if plan.steps[k] not in plan._program_steps]
    assert skipped and len(plan._program) == len(plan.steps) - len(skipped)
