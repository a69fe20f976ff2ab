"""benchmarks/interleaved_ab.py: one network under two settings in one process, blocks alternating."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import irrun
from irrun.ops import im2col

from .benchmark_scripts import load_script

MODELS = Path(__file__).resolve().parent / "models"
MARK = "IRRUN_TEST_INTERLEAVED_AB"


@pytest.fixture(scope="module")
def ab():
    return load_script("interleaved_ab")


def test_settings_are_in_force_inside_and_as_they_were_after(ab, monkeypatch):
    monkeypatch.delenv(MARK, raising=False)
    monkeypatch.setenv(MARK + "_KEPT", "before")
    before = im2col.COLUMN_BLOCK_ELEMENTS
    setting = ab.parse_setting(f"irrun.ops.im2col.COLUMN_BLOCK_ELEMENTS={before * 2}")
    with ab.in_force([setting], [(MARK, "1"), (MARK + "_KEPT", "during")]):
        assert im2col.COLUMN_BLOCK_ELEMENTS == before * 2
        assert os.environ[MARK] == "1" and os.environ[MARK + "_KEPT"] == "during"
    assert im2col.COLUMN_BLOCK_ELEMENTS == before
    assert MARK not in os.environ and os.environ[MARK + "_KEPT"] == "before"
    with pytest.raises(RuntimeError), ab.in_force([setting], []):
        raise RuntimeError
    assert im2col.COLUMN_BLOCK_ELEMENTS == before


@pytest.mark.parametrize("text, says", [
    ("COLUMN_BLOCK_ELEMENTS", "expected module.NAME=value"),
    ("irrun.no_such_module.X=1", "no module irrun.no_such_module"),
    ("irrun.ops.im2col.NO_SUCH_NAME=1", "has no NO_SUCH_NAME"),
    ("irrun.ops.im2col.COLUMN_BLOCK_ELEMENTS=1 << 19", "is not a Python literal"),
])
def test_a_setting_it_cannot_apply_says_why(ab, text, says):
    with pytest.raises(ValueError, match=says):
        ab.parse_setting(text)


@pytest.mark.parametrize("reverse", [False, True])
def test_b_is_loaded_with_its_settings_and_a_without(ab, monkeypatch, tmp_path, capsys, reverse):
    monkeypatch.delenv(MARK, raising=False)
    seen = []
    load = irrun.load

    def recording(*args, **kwargs):
        seen.append(os.environ.get(MARK))
        return load(*args, **kwargs)
    monkeypatch.setattr(irrun, "load", recording)
    digits = MODELS.parent.parent / "models" / "digits"
    feeds = tmp_path / "digit.npz"
    np.savez(feeds, image=np.load(digits / "digit7.npy"))
    out = tmp_path / "ab.json"
    ab.main(["--model", str(digits / "model.xml"), "--inputs", str(feeds), "--env", f"{MARK}=1",
             "--blocks", "2", "--runs", "1", "--json", str(out)] + (["--reverse"] if reverse else []))
    assert seen == (["1", None] if reverse else [None, "1"])
    assert MARK not in os.environ
    result = json.loads(out.read_text())
    assert result["env"] == [f"{MARK}=1"] and result["reverse"] is reverse
    numbers = result["results"]["model.xml"]
    assert numbers["a_ms"] > 0 and numbers["b_ms"] > 0
    assert numbers["quartiles"][0] <= numbers["ratio"] <= numbers["quartiles"][1]
    assert capsys.readouterr().out.startswith("model.xml: A ")


def test_b_must_differ_and_a_bad_setting_is_one_line(ab, capsys):
    with pytest.raises(SystemExit):
        ab.main(["--networks", "digits"])
    assert "give B something to differ by" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        ab.main(["--networks", "digits", "--set", "irrun.ops.im2col.NO_SUCH_NAME=1"])
    assert "has no NO_SUCH_NAME" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        ab.main(["--networks", "no_such_network", "--env", "X=1"])
    assert "unknown network(s) no_such_network" in capsys.readouterr().err
