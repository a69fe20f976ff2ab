"""The scripts of benchmarks/ as modules, for their tests."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def load_script(name: str):
    """benchmarks/<name>.py as a module, sys.path as it was (a script puts benchmarks/ first, for
    its measure and networks)."""
    before = list(sys.path)
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = before
    return module
