"""GEMV weights copied onto huge pages at load (irrun/huge_pages.py): those of products of one row
or of rows known only at run time, the same values as OpenVINO and as the weights where they were,
each weight in its layout, all in one 2 MiB-aligned mapping; those of many rows where they were."""
from __future__ import annotations

import mmap

import numpy as np
import openvino as ov
import openvino.opset13 as ops
import pytest

import irrun
from irrun import huge_pages
from ovutil import assert_close, run_openvino, save

RNG = np.random.default_rng(5)


@pytest.fixture(autouse=True)
def _small_models_qualify(monkeypatch):
    """Small weights moved, on any machine (where the kernel keeps huge pages off, it ignores the
    mapping's request for them)."""
    monkeypatch.delenv("IRRUN_OPTIMIZE", raising=False)
    monkeypatch.setattr(huge_pages, "_available", lambda: True)
    monkeypatch.setattr(huge_pages, "SMALLEST_WEIGHT", 1 << 10)
    monkeypatch.setattr(huge_pages, "SMALLEST_TOTAL", 1 << 12)


def _weight(shape):
    return ops.constant((RNG.standard_normal(shape) * 0.2).astype(np.float32))


def _model(rows: int, tied: bool):
    """Rows of data (-1: as many as the call has) through an [out, in] weight (transpose_b), an [in, out] one and, where `tied`, an
    [in, out] weight a Gather reads too (an LLM's tied embeddings)."""
    x = ops.parameter([rows, 64], ov.Type.f32, name="x")
    up = ops.matmul(x, _weight((96, 64)), False, True)
    down = ops.matmul(ops.relu(up), _weight((96, 48)), False, False)
    outputs = [ops.result(down)]
    params = [x]
    if tied:
        table = _weight((48, 40))
        ids = ops.parameter([3], ov.Type.i64, name="ids")
        outputs += [ops.result(ops.matmul(down, table, False, False)),
                    ops.result(ops.gather(table, ids, ops.constant(np.int64(0))))]
        params.append(ids)
    return ov.Model(outputs, params)


def _mapping_of(array):
    """The anonymous mapping `array` views, or None (the .bin's arrays view a read-only file mapping)."""
    base = array
    while isinstance(base, np.ndarray):
        base = base.base
    base = base.obj if isinstance(base, memoryview) else base
    return base if isinstance(base, mmap.mmap) and not base.closed and array.flags.writeable else None


def _gemm_weights(model: irrun.Model) -> list[np.ndarray]:
    plan = model._plan
    return [plan.constants[s.inputs[1]] for s in plan.layer_steps if s.node.layer.op_type == "MatMul"]


@pytest.mark.parametrize("tied", [False, True], ids=["own", "tied"])
@pytest.mark.parametrize("rows", [1, -1], ids=["one", "dynamic"])
def test_gemv_weights_move_to_one_mapping_in_their_layouts(rows, tied, monkeypatch, tmp_path):
    xml = save(_model(rows, tied), tmp_path / "m.xml")
    feeds = {"x": RNG.standard_normal((1 if rows == 1 else 3, 64)).astype(np.float32)}
    if tied:
        feeds["ids"] = np.array([0, 47, 5], np.int64)
    moved = irrun.load(xml)
    monkeypatch.setattr(huge_pages, "_available", lambda: False)
    kept = irrun.load(xml)
    weights, before = _gemm_weights(moved), _gemm_weights(kept)
    mappings = {id(_mapping_of(w)) for w in weights}
    assert len(mappings) == 1 and _mapping_of(weights[0]) is not None
    assert all(_mapping_of(b) is None for b in before)
    assert min(w.ctypes.data for w in weights) % huge_pages.HUGE_PAGE == 0
    for w, b in zip(weights, before):
        assert (w.flags.c_contiguous, w.flags.f_contiguous) == (b.flags.c_contiguous, b.flags.f_contiguous)
        assert np.array_equal(w, b)
    expected = run_openvino(xml, [feeds[i.name] for i in moved.inputs])
    got, got_kept = moved.infer(feeds), kept.infer(feeds)
    for (name, a), b, e in zip(got.items(), got_kept.values(), expected):
        assert_close(a, e, what=name)
        assert np.array_equal(a, b), name


@pytest.mark.parametrize("rows, smallest_total", [(1, 1 << 30), (34, 1 << 12), (200, 1 << 12)],
                         ids=["too-little", "34-rows", "200-rows"])
def test_weights_stay_below_the_smallest_total_and_for_many_rows(rows, smallest_total, monkeypatch, tmp_path):
    monkeypatch.setattr(huge_pages, "SMALLEST_TOTAL", smallest_total)
    model = irrun.load(save(_model(rows, False), tmp_path / "m.xml"))
    assert all(_mapping_of(w) is None for w in _gemm_weights(model))
