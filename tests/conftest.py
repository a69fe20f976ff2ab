import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(params=["optimized", "unoptimized"])
def optimize_both_ways(request, monkeypatch):
    """Runs a test with `irrun.load`'s default optimisation on and off (IRRUN_OPTIMIZE, which the
    default honours): the whole-model modules use it, so that every change of irrun/optimize.py is
    checked against OpenVINO both ways in the normal suite.  Returns whether it is on."""
    monkeypatch.setenv("IRRUN_OPTIMIZE", "1" if request.param == "optimized" else "0")
    return request.param == "optimized"
