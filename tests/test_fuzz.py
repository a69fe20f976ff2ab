"""Property-based fuzzing: structured mutations of valid IRs never crash irrun.

The only acceptable outcomes are a result or an `irrun.IrrunError`; `validate`
always returns a report.  The normal run tries a few hundred cases; the long
run is opt-in:

    IRRUN_FUZZ_EXAMPLES=10000 python -m pytest tests/test_fuzz.py
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset8 as ops
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree

import irrun

EXAMPLES = int(os.environ.get("IRRUN_FUZZ_EXAMPLES", "150"))
ROOT = Path(__file__).resolve().parent.parent
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 1000,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _pool_net() -> ov.Model:
    x = ops.parameter([1, 2, 9, 9], ov.Type.f32, name="x")
    w = ops.constant(np.linspace(-1, 1, 2 * 2 * 3 * 3, dtype=np.float32).reshape(2, 2, 3, 3))
    y = ops.convolution(x, w, [2, 2], [1, 1], [0, 0], [1, 1], auto_pad="same_upper")
    y = ops.avg_pool(y, [2, 2], [0, 0], [1, 1], [2, 2], False, "ceil")
    y = ops.concat([y, y], 1)
    y = ops.reshape(y, ops.constant(np.array([0, -1], np.int64)), True)
    return ov.Model([ops.result(ops.softmax(y, -1))], [x], "pool_net")


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz-bases")
    ov.save_model(_pool_net(), str(d / "pool.xml"))
    shutil.copy(ROOT / "models/digits/model.xml", d / "digits.xml")
    shutil.copy(ROOT / "models/digits/model.bin", d / "digits.bin")
    return {name: (d / f"{name}.xml").read_bytes() for name in ("pool", "digits")} | \
        {f"{name}.bin": (d / f"{name}.bin").read_bytes() for name in ("pool", "digits")}


TEXT = st.one_of(st.sampled_from(["", "0", "-1", "1", "2,2", "a,b", "-5", "1e309", "nan", "?", "...", "1..3",
                                  "99999999999999999999", "true", "same_upper", "f32", "i4", "string",
                                  "1,1,1,1,1,1,1,1", "opset1", "opset99", "Parameter", "Result"]),
                 st.text(st.characters(min_codepoint=32, max_codepoint=0xD7FF), max_size=12),
                 st.integers(-10**12, 10**12).map(str))


@st.composite
def mutations(draw, base: bytes):
    root = etree.fromstring(base)
    elements = [e for e in root.iter() if isinstance(e.tag, str)]
    for _ in range(draw(st.integers(1, 3))):
        elements = [e for e in root.iter() if isinstance(e.tag, str)]
        target = elements[draw(st.integers(0, len(elements) - 1))]
        kind = draw(st.sampled_from(["drop", "duplicate", "reorder", "attribute", "text", "delete-attribute"]))
        parent = target.getparent()
        if kind == "drop" and parent is not None:
            parent.remove(target)
        elif kind == "duplicate" and parent is not None:
            parent.insert(parent.index(target), etree.fromstring(etree.tostring(target)))
        elif kind == "reorder" and len(target) > 1:
            children = list(target)
            order = draw(st.permutations(range(len(children))))
            for child in children:
                target.remove(child)
            for i in order:
                target.append(children[i])
        elif kind == "attribute" and target.attrib:
            name = draw(st.sampled_from(sorted(target.attrib)))
            target.set(name, draw(TEXT))
        elif kind == "delete-attribute" and target.attrib:
            del target.attrib[draw(st.sampled_from(sorted(target.attrib)))]
        elif kind == "text":
            target.text = draw(TEXT)
    return etree.tostring(root)


def _exercise(tmp_path: Path, xml: bytes, bin_bytes: bytes) -> None:
    path = tmp_path / "model.xml"
    path.write_bytes(xml)
    path.with_suffix(".bin").write_bytes(bin_bytes)
    report = irrun.validate(path)
    assert isinstance(report, irrun.Report)
    assert "E-INTERNAL" not in report.codes(), [d.format() for d in report]
    try:
        model = irrun.load(path, max_memory=64 << 20)
    except irrun.IrrunError:
        return
    feeds = []
    for info in model.inputs:
        shape = [d if isinstance(d, int) else 2 for d in (info.shape or ())]
        if int(np.prod(shape)) > 1 << 20 or info.element_type.carrier is None:
            return
        feeds.append(np.ones(shape, info.element_type.carrier))
    try:
        model.infer(feeds)
    except irrun.IrrunError:
        pass
    finally:
        model.close()


@pytest.mark.parametrize("name", ["pool", "digits"])
def test_structured_xml_mutations(bases, tmp_path_factory, name):
    tmp = tmp_path_factory.mktemp(f"fuzz-{name}")

    @FUZZ
    @given(xml=mutations(bases[name]))
    def check(xml):
        _exercise(tmp, xml, bases[f"{name}.bin"])

    check()


def test_corrupted_weights(bases, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz-bin")
    original = bases["digits.bin"]

    @FUZZ
    @given(cut=st.integers(0, len(original)),
           flips=st.lists(st.tuples(st.integers(0, len(original) - 1), st.integers(0, 255)), max_size=8))
    def check(cut, flips):
        data = bytearray(original)
        for i, value in flips:
            data[i] = value
        _exercise(tmp, bases["digits"], bytes(data[:cut]))

    check()
