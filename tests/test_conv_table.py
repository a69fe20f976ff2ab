"""benchmarks/run.py's convolution table: the layer's own time beside the one-layer model's inference."""
from __future__ import annotations

import pytest

from .benchmark_scripts import load_script

pytest.importorskip("openvino")


def test_layer_column_times_the_convolution_alone(tmp_path, monkeypatch):
    run = load_script("run")
    # a 1x1 layer whose 3 MiB result the inference copies out, and a grouped one (GroupConvolution)
    monkeypatch.setattr(run, "CONV_SHAPES", [("1x1", 1, 64, 256, (56, 56), (1, 1), 1, 0, 1, False),
                                              ("grouped", 4, 8, 8, (16, 16), (3, 3), 1, 1, 1, False)])
    rows = run.conv_vs_matmul(tmp_path, repeat=3)
    assert [r[0] for r in rows] == ["1x1", "grouped"]
    for label, gemm, layer, whole, matmul in rows:
        assert layer > 0 and whole > 0 and matmul > 0, label
        # the inference runs the layer and more: its rate is the lower one (noise allowed)
        assert whole < layer * 1.3, (label, layer, whole)
