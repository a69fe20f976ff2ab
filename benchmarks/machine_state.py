"""What the machine delivers at the moment: a second's probe printed before and after a benchmark.

A shared virtual machine changes speed under a run: on the 2-vCPU AMD EPYC of stops 44-45 the same
code's decoder step took 1.15-1.89 ms from one run to the next, and a cycle of its GEMVs 0.36 ms in
one minute and 1.28 in another, with no steal time counted.  Ratios against OpenVINO taken in the
same minutes survive that; absolute times and comparisons between runs do not.  This probe puts
numbers on the state of the machine beside each run's table, so that a slow spell reads as one and
not as a regression:

* memory:   GEMVs cycling over 32 MiB of f32 weights, one BLAS thread (GB/s of weights read);
* cache:    the same over 2 MiB (what stays in the caches between calls);
* call:     one NumPy ufunc call on 256 floats (us), what a small layer's every step pays;
* cold call: the same call, alone, just after 32 MiB were copied (us): what the first calls of a
  small step pay after a large one has pushed the interpreter's and NumPy's own memory out of the
  caches (on the Intel Xeon VM of stop 66: 17-44 us against 0.5-1.0; after 8,192 pages touched
  once each, the TLB emptied but few cache lines, 1.6; a transformer's layer norm of 13 Ki values
  36 us hot, 62 after a GEMM that streamed 2.4 MB of weights);
* GEMM:     512^3 in f32 on one BLAS thread (GFLOP/s);
* 2 threads: two threads each running one-thread GEMMs, their throughput against one thread's
  (1.09-2.1x on that VM from one minute to the next: what parts on the two cores can gain).

    python benchmarks/machine_state.py        # the probe alone, one line
"""
from __future__ import annotations

import statistics
import threading
import time
from typing import Callable

import numpy as np

from irrun import threads

GEMV_SIDE = 256                   # each weight [256, 256]: 256 KiB
MEMORY_MIB, CACHE_MIB = 32, 2
GEMM_SIDE = 512
SCALING_SIDE = 256


def median_seconds(fn: Callable[[], None], repeat: int, warm_up: int = 1) -> float:
    """The median time of `repeat` calls of fn, after `warm_up` untimed ones (the benchmarks' timer)."""
    for _ in range(warm_up):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _gemv_gbs(rng, mib: int) -> float:
    """GB/s of weights read by GEMVs cycling over `mib` MiB of them."""
    count = mib * (1 << 20) // (GEMV_SIDE * GEMV_SIDE * 4)
    weights = [rng.standard_normal((GEMV_SIDE, GEMV_SIDE), dtype=np.float32) for _ in range(count)]
    x = rng.standard_normal(GEMV_SIDE, dtype=np.float32)

    def cycle():
        for w in weights:
            np.dot(x, w)
    seconds = median_seconds(cycle, max(3, 64 // mib))
    return count * weights[0].nbytes / seconds / 1e9


def _call_us(rng) -> float:
    a = rng.standard_normal(256, dtype=np.float32)
    c = np.float32(0.5)

    def calls():
        for _ in range(1000):
            np.add(a, c, a)
    return median_seconds(calls, 5) * 1e3


def _cold_call_us(rng, repeat: int = 15) -> float:
    """One small NumPy call just after copying MEMORY_MIB MiB (the median of `repeat`)."""
    source = rng.standard_normal(MEMORY_MIB * (1 << 20) // 4, dtype=np.float32)
    target, a, c = np.empty_like(source), rng.standard_normal(256, dtype=np.float32), np.float32(0.5)
    times = []
    for _ in range(repeat):
        np.copyto(target, source)
        start = time.perf_counter()
        np.add(a, c, a)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def _gemm_gflops(rng, side: int, seconds: float = 0.3) -> float:
    a, b = (rng.standard_normal((side, side), dtype=np.float32) for _ in range(2))
    out = np.empty((side, side), np.float32)
    np.matmul(a, b, out=out)
    runs, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        np.matmul(a, b, out=out)
        runs += 1
    return 2 * side ** 3 * runs / (time.perf_counter() - start) / 1e9


def _two_thread_scaling(rng) -> float:
    """Throughput of two threads each running one-thread GEMMs, against one thread's."""
    one = _gemm_gflops(rng, SCALING_SIDE)
    rates = [0.0, 0.0]

    def work(i):
        rates[i] = _gemm_gflops(np.random.default_rng(i), SCALING_SIDE)
    pair = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in pair:
        t.start()
    for t in pair:
        t.join()
    return sum(rates) / one


def probe() -> dict:
    """The machine's state now (about a second): see the module's text."""
    rng = np.random.default_rng(0)
    with threads.single_threaded_blas():
        state = {"memory_gbs": _gemv_gbs(rng, MEMORY_MIB), "cache_gbs": _gemv_gbs(rng, CACHE_MIB),
                 "call_us": _call_us(rng), "cold_call_us": _cold_call_us(rng),
                 "gemm_gflops": _gemm_gflops(rng, GEMM_SIDE)}
        state["two_thread_scaling"] = _two_thread_scaling(rng) if threads.available_cpus() >= 2 else None
    return state


def describe(state: dict) -> str:
    scaling = state.get("two_thread_scaling")
    cold = state.get("cold_call_us")      # (states recorded before stop 66 have none)
    return (f"GEMVs {state['memory_gbs']:.1f} GB/s over {MEMORY_MIB} MiB, {state['cache_gbs']:.1f} over "
            f"{CACHE_MIB} MiB; a NumPy call {state['call_us']:.2f} us"
            + ("" if cold is None else f" ({cold:.1f} just after {MEMORY_MIB} MiB copied)")
            + f"; {GEMM_SIDE}^3 GEMM {state['gemm_gflops']:.0f} GFLOP/s on one thread"
            + ("" if scaling is None else f"; two threads of GEMMs {scaling:.2f}x one"))


if __name__ == "__main__":
    print(describe(probe()))
