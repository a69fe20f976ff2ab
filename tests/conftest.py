import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(params=["optimized", "unoptimized"])
def optimize_both_ways(request, monkeypatch):
    """Runs a test with `irrun.load`'s default optimisation on and off (IRRUN_OPTIMIZE, which the
    default honours): the whole-model modules use it, so that every change of irrun/optimize.py is
    checked against OpenVINO both ways in the normal suite.  Returns whether it is on.
    Optimised, plans also run their steps written out as code from the first inference (as a plan
    does after `fast_loop.WRITE_OUT_AFTER` runs); unoptimised, through the executor's loop."""
    from irrun import fast_loop
    optimized = request.param == "optimized"
    monkeypatch.setenv("IRRUN_OPTIMIZE", "1" if optimized else "0")
    monkeypatch.setattr(fast_loop, "WRITE_OUT_AFTER", 0 if optimized else 1 << 62)
    return optimized


@pytest.fixture
def two_threads():
    """irrun (and BLAS) on two threads for the test, the count before restored after it."""
    from irrun import threads
    before = threads.threads()
    threads.set_threads(2)
    yield
    threads.set_threads(before)


@pytest.fixture
def optimizing_by_default(monkeypatch):
    """Tests about the optimizer: `irrun.load`'s default is on whatever IRRUN_OPTIMIZE the suite
    runs under (`IRRUN_OPTIMIZE=0 python -m pytest`)."""
    monkeypatch.delenv("IRRUN_OPTIMIZE", raising=False)


@pytest.fixture(params=[True, False], ids=["exp2", "exp"])
def either_exponential(request, monkeypatch):
    """Each way the exponential activations, Softmax and Gelu are computed, whatever this CPU's way
    is: exp(a x) by exp2 and Gelu by tanh where NumPy has AVX-512 loops, by exp elsewhere
    (activation.EXP_BY_EXP2).  Returns whether by exp2."""
    from irrun.ops import activation
    monkeypatch.setattr(activation, "EXP_BY_EXP2", request.param)
    return request.param
