"""Hostile and broken input: a clear error and the right exit code, in bounded time, never a traceback."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import irrun
from click.testing import CliRunner
from irrun.cli import cli as irrun_cli
from irxml import edge, f32_bytes, layer, net, port, relu_model, write

ROOT = Path(__file__).resolve().parent.parent
DIGITS = ROOT / "models" / "digits"
BODY = relu_model().split("\n", 1)[1]      # the IR without its XML declaration


def cli(*args):
    """Run the `irrun` command in-process; return (exit code, stdout + stderr, seconds)."""
    start = time.perf_counter()
    result = CliRunner().invoke(irrun_cli, [str(a) for a in args])
    unexpected = result.exception if not isinstance(result.exception, SystemExit) else None
    out = result.output + (f"\nTraceback: {unexpected!r}" if unexpected else "")
    return result.exit_code, out, time.perf_counter() - start


def real_cli(*args, timeout=120):
    """The same through a real `python -m irrun` process."""
    start = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "irrun", *map(str, args)], capture_output=True, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout + p.stderr, time.perf_counter() - start


def assert_refused(path: Path, code: int, message: str | None = None, *, commands=("validate", "info", "infer")):
    for command in commands:
        extra = ["--input", DIGITS / "digit0.npy"] if command == "infer" else []
        rc, out, seconds = cli(command, path, *extra)
        assert rc == code, (command, rc, out)
        assert message is None or message in out, (command, out)
        assert "Traceback" not in out and seconds < 30
        assert out.startswith("error: ") if command != "validate" else " error E-" in out, out
    # The Python API: load raises an IrrunError, validate returns a report.
    with pytest.raises(irrun.IrrunError):
        irrun.load(path)
    assert not irrun.validate(path).ok


# ---------------------------------------------------------------- XML attacks

def test_external_entity_is_never_read(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET-CONTENT")
    xml = f'<?xml version="1.0"?>\n<!DOCTYPE net [<!ENTITY x SYSTEM "file://{secret}">]>\n' + \
        BODY.replace('name="m"', 'name="&x;"')
    path = write(tmp_path, xml)
    assert_refused(path, 2, "DOCTYPE")
    for command in ("validate", "info"):
        rc, out, _ = real_cli(command, path)
        assert rc == 2 and "TOPSECRET" not in out and "Traceback" not in out


def test_billion_laughs(tmp_path):
    entities = '<!ENTITY lol "lol">' + "".join(
        f'<!ENTITY lol{i} "{"&lol" + (str(i - 1) if i > 1 else "") + ";" * 1}' * 10 + '">' for i in range(1, 10))
    xml = f'<?xml version="1.0"?>\n<!DOCTYPE lolz [{entities}]>\n' + BODY.replace('name="m"', 'name="&lol9;"')
    assert_refused(write(tmp_path, xml), 2, "DOCTYPE")


def test_dtd_from_a_url_is_not_fetched(tmp_path):
    xml = '<?xml version="1.0"?>\n<!DOCTYPE net SYSTEM "http://203.0.113.1/evil.dtd">\n' + BODY
    assert_refused(write(tmp_path, xml), 2, "DOCTYPE")


def test_very_deep_nesting(tmp_path):
    xml = "<net version='11'>" + "<a>" * 100000 + "</a>" * 100000 + "</net>"
    assert_refused(write(tmp_path, xml), 2, "not well-formed", commands=("validate", "info"))


def test_very_long_attribute(tmp_path):
    xml = relu_model().replace('name="relu"', 'name="' + "r" * 5_000_000 + '"')
    path = write(tmp_path, xml)
    rc, out, seconds = cli("validate", path)
    assert rc in (0, 2) and "Traceback" not in out and seconds < 30


CONTENTS = {"empty": b"", "blank": b"   \n", "utf16-garbage": b"\xff\xfe\x00garbage",
            "all-bytes": bytes(range(256)) * 40,
            "invalid-utf8": b"<net version='11'><layers><layer id='0' name='\xc3\x28' type='Parameter'/></layers></net>",
            "png": b"\x89PNG\r\n\x1a\n" + b"\0" * 100}


@pytest.mark.parametrize("name", CONTENTS)
def test_empty_binary_and_invalid_utf8(tmp_path, name):
    path = tmp_path / "model.xml"
    path.write_bytes(CONTENTS[name])
    assert_refused(path, 2)


# ---------------------------------------------------------------- weights

def _const_model(offset, size, shape="2,2", element_type="f32"):
    dims = tuple(int(d) if d.isdigit() else -1 for d in shape.split(",")) if shape else ()
    return net([
        layer(0, "w", "Const", data={"element_type": element_type, "shape": shape, "offset": offset, "size": size},
              outputs=[port(0, dims, names="w")]),
        layer(1, "out", "Result", inputs=[port(0, dims)]),
    ], [edge(0, 0, 1, 0)])


@pytest.mark.parametrize("offset, size, shape, code", [
    (-4, 16, "2,2", "E-ATTR-RANGE"), (0, -16, "2,2", "E-ATTR-RANGE"), (1 << 40, 16, "2,2", "E-BIN-RANGE"),
    (0, 1 << 40, "2,2", "E-BIN-RANGE"), (0, 8, "2,2", "E-BIN-SIZE"),
    (0, 16, "1000000000,1000000000", "E-BIN-SIZE"), (0, 16, "100000,100000", "E-BIN-SIZE"),
    ("x", 16, "2,2", "E-ATTR-VALUE"), (0, 16, "2,a", "E-ATTR-VALUE"),
])
def test_bad_const_slices(tmp_path, offset, size, shape, code):
    path = write(tmp_path, _const_model(offset, size, shape), f32_bytes([1, 2, 3, 4]))
    report = irrun.validate(path)
    assert code in report.codes(), [d.format() for d in report]
    # `info` describes any readable IR: the defects are summed up, not a reason to fail.
    rc, out, _ = cli("info", path)
    assert rc == 0 and "problems: " in out and "Traceback" not in out


def test_missing_bin(tmp_path):
    path = write(tmp_path, _const_model(0, 16))
    assert "E-BIN-MISSING" in irrun.validate(path).codes()
    rc, out, _ = cli("info", path)
    assert rc == 0 and "E-BIN-MISSING" in out and "model.bin" in out


# ---------------------------------------------------------------- graph

@pytest.mark.parametrize("mutate, code", [
    (lambda x: x.replace('to-layer="1" to-port="0"', 'to-layer="1" to-port="0"/>\n<edge from-layer="1" '
                         'from-port="1" to-layer="1" to-port="0"'), "E-EDGE-DUP"),
    (lambda x: x.replace('<edge from-layer="0" from-port="0" to-layer="1" to-port="0"/>',
                         '<edge from-layer="1" from-port="1" to-layer="1" to-port="0"/>'), "E-CYCLE"),
    (lambda x: x.replace('id="2" name="out"', 'id="1" name="out"'), "E-LAYER-DUP"),
    (lambda x: x.replace('id="1" name="relu"', 'id="one" name="relu"'), "E-LAYER-ID"),
    (lambda x: x.replace('<port id="1" precision="FP32" names="y">', '<port precision="FP32" names="y">'),
     "E-XML-ATTR"),
    (lambda x: x.split("<layers>")[0] + "<edges/></net>", "E-XML-STRUCTURE"),
])
def test_broken_graphs(tmp_path, mutate, code):
    path = write(tmp_path, mutate(relu_model()))
    report = irrun.validate(path)
    assert code in report.codes(), [d.format() for d in report]
    rc, out, seconds = cli("infer", path, "--input", DIGITS / "digit0.npy")
    assert rc == 1 and out.startswith("error: ") and "Traceback" not in out and seconds < 30


def test_large_chain_validates_without_recursion(tmp_path):
    n = 20000
    layers = [layer(0, "x", "Parameter", data={"shape": "1,4", "element_type": "f32"},
                    outputs=[port(0, (1, 4), names="x")])]
    edges = []
    for i in range(1, n + 1):
        layers.append(layer(i, f"r{i}", "ReLU", inputs=[port(0, (1, 4))], outputs=[port(1, (1, 4))]))
        edges.append(edge(i - 1, 0 if i == 1 else 1, i, 0))
    layers.append(layer(n + 1, "out", "Result", inputs=[port(0, (1, 4))]))
    edges.append(edge(n, 1, n + 1, 0))
    path = write(tmp_path, net(layers, edges))
    start = time.perf_counter()
    assert irrun.validate(path).ok
    assert time.perf_counter() - start < 30
    out = irrun.load(path).infer(np.array([[-1, 2, -3, 4]], np.float32))
    assert out["out"].tolist() == [[0, 2, 0, 4]]


# ---------------------------------------------------------------- inputs to infer

@pytest.mark.parametrize("make, message", [
    (lambda p: p.write_text("0.5 0.25"), "not a .npy/.npz"),
    (lambda p: np.save(p, np.array([{"a": 1}], dtype=object)), "pickled"),
    (lambda p: p.write_bytes(b"\x93NUMPY\x01\x00garbage"), "not a .npy/.npz"),
    (lambda p: np.save(p, np.zeros((1, 1, 8, 8), np.float32)[..., :4]), "expects shape"),
    (lambda p: np.save(p, np.zeros((1, 1, 8, 8), np.complex64)), "expects f32"),
], ids=["text", "pickle", "truncated", "shape", "dtype"])
def test_bad_input_files(tmp_path, make, message):
    bad = tmp_path / "x.npy"
    make(bad)
    rc, out, _ = cli("infer", DIGITS / "model.xml", "--input", bad)
    assert rc == 1 and message in out and "Traceback" not in out


def test_unknown_and_missing_input_names(tmp_path):
    rc, out, _ = cli("infer", DIGITS / "model.xml", "--input", f"nope={DIGITS / 'digit0.npy'}")
    assert rc == 1 and "unknown input 'nope'" in out and "image" in out


def test_nan_and_inf_inputs_are_computed():
    x = np.full((1, 1, 8, 8), np.nan, np.float32)
    out = irrun.load(DIGITS / "model.xml").infer(x)["probabilities"]
    assert np.isnan(out).all()


def test_memory_limit_from_the_cli(tmp_path):
    np.save(tmp_path / "big.npy", np.zeros((4096, 1, 8, 8), np.float32))
    rc, out, _ = cli("infer", DIGITS / "model.xml", "--input", tmp_path / "big.npy", "--max-memory", "64K")
    assert rc == 1 and "memory limit" in out and "layer" in out
    rc, out, _ = cli("infer", DIGITS / "model.xml", "--input", tmp_path / "big.npy", "--max-memory", "lots")
    assert rc == 2 and "not a size" in out


def test_debug_shows_the_traceback(tmp_path):
    rc, out, _ = real_cli("--debug", "infer", tmp_path / "missing.xml", "--input", "x.npy")
    assert rc != 0 and "Traceback" in out
