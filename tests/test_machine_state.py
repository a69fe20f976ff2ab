"""benchmarks/machine_state.py: the probe printed beside each benchmark run reads numbers a
machine can have, and its line names each of them."""
from __future__ import annotations

import math

from irrun import threads

from .benchmark_scripts import load_script


def _module():
    return load_script("machine_state")


def test_probe_reads_the_machine_and_leaves_blas_as_it_was():
    probe = _module()
    before = threads.blas_threads()
    state = probe.probe()
    assert threads.blas_threads() == before
    for key in ("memory_gbs", "cache_gbs", "call_us", "cold_call_us", "gemm_gflops"):
        assert math.isfinite(state[key]) and state[key] > 0, (key, state[key])
    # (a cache is never slower than memory by much; a call on 256 floats takes under a millisecond)
    assert state["cache_gbs"] > 0.5 * state["memory_gbs"]
    assert state["call_us"] < 1000
    scaling = state["two_thread_scaling"]
    if threads.available_cpus() >= 2:
        assert 0.3 < scaling < 4
    line = probe.describe(state)
    assert f"{state['memory_gbs']:.1f} GB/s" in line and f"{state['gemm_gflops']:.0f} GFLOP/s" in line
    assert f"{state['cold_call_us']:.1f} just after" in line
    # (a state recorded before the cold call was probed still reads)
    assert "just after" not in probe.describe({k: v for k, v in state.items() if k != "cold_call_us"})
    assert ("two threads" in line) == (scaling is not None)
