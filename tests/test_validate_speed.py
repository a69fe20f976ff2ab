"""A big IR validates correctly, and not pathologically slowly.

Speed itself is measured by `benchmarks/validate_bench.py`, not here: the bound
below only catches a regression that makes validation quadratic or worse.
"""
import importlib.util
import re
import time
from pathlib import Path

import irrun

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "validate_bench.py"
LAYERS = 50_000
GENEROUS_SECONDS = 60


def _bench_module():
    spec = importlib.util.spec_from_file_location("validate_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_50000_layers_validate_and_a_defect_deep_inside_is_found(tmp_path):
    xml = tmp_path / "big.xml"
    _bench_module().write_model(xml, LAYERS)
    text = xml.read_text()
    assert text.count("<layer ") == LAYERS
    # Declare a wrong channel count on the output of the last Concat, far down the chain.
    start = text.rindex('type="Concat"')
    output = text.index("<output>", start)
    wrong_dim = text.index("<dim>16</dim>", output)
    xml.write_text(text[:wrong_dim] + "<dim>17</dim>" + text[wrong_dim + len("<dim>16</dim>"):])
    layer_start = text.rindex("<layer ", 0, start)
    concat_id = re.match(r'<layer id="(\d+)"', text[layer_start:]).group(1)
    # Far past line 65535, where libxml2 stops keeping exact element lines.
    layer_line = text.count("\n", 0, layer_start) + 1
    port_line = text.count("\n", 0, text.rindex("<port ", 0, wrong_dim)) + 1
    assert port_line > 10 * 65535

    began = time.perf_counter()
    report = irrun.validate(xml)
    seconds = time.perf_counter() - began

    assert seconds < GENEROUS_SECONDS
    assert [d.code for d in report.diagnostics] == ["E-DECLARED-SHAPE"]
    found = report.errors[0]
    assert (found.layer.type, found.layer.id, found.layer.line, found.line) == \
        ("Concat", concat_id, layer_line, port_line)
    assert found.declared == [1, 17, 4, 4] and found.inferred == [1, 16, 4, 4]
