"""What the tests of irrun/layer_groups.py's rewrites share (grouped attention, rotary embeddings,
RMS norms): a model run fused, unfused and in OpenVINO; the plan's steps of one group kind."""
from __future__ import annotations

import numpy as np

import irrun
from irrun.optimize import FusedChain
from ovutil import _CORE, assert_blas_close, assert_close, evaluate_reference, run_openvino


def check_both_ways(xml, feeds: dict, *, reference=False, same_bits=True, model=None) -> irrun.Model:
    """OpenVINO's values (its reference evaluation's where the CPU plugin's own fused node differs:
    specs/errata/models.md) from the model optimized (`model`, or loaded) and not; optimized and
    not the same bits (`same_bits`), or within BLAS's rounding.  Returns the optimized model."""
    on, off = model or irrun.load(xml), irrun.load(xml, optimize=False)
    inputs = [feeds[i.name] for i in on.inputs]
    expected = evaluate_reference(_CORE.read_model(str(xml)), inputs) if reference else run_openvino(xml, inputs)
    for a, b, e in zip(on.infer(feeds).values(), off.infer(feeds).values(), expected):
        assert_close(a, e)
        if same_bits:
            assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)
        else:
            assert_blas_close(a, b)
    return on


def group_steps(m: irrun.Model, kind: type) -> list:
    """The plan's steps whose op is a `kind` (a group heading a fused chain of the layers after it:
    its own step)."""
    steps = [s.op.head_step if isinstance(s.op, FusedChain) and s.op.head else s for s in m._plan.steps]
    return [s for s in steps if isinstance(s.op, kind)]
