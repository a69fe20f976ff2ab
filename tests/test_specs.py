"""The op specs: consistent with the registry, the README, and the spec-style examples."""
import re
from pathlib import Path

import pytest

import irrun
from irrun.opdocs import ops_markdown
from irrun.registry import registered_keys
from irrun.spec import all_specs, opset_catalogue

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "specs" / "examples").glob("*.xml"))


def test_every_kernel_has_a_spec_and_every_spec_a_kernel():
    assert registered_keys() == set(all_specs())


def test_family_index_names_the_module_of_every_kernel():
    """A load imports only the op modules its types need, found through this index."""
    from irrun import registry
    registered_keys()
    modules = {type_name: cls.__module__.rsplit(".", 1)[1] for (type_name, _), cls in registry._REGISTRY.items()}
    assert registry._families() == modules


def test_a_load_imports_only_the_families_it_needs(tmp_path):
    import subprocess
    import sys
    code = ("import sys, irrun; irrun.load(sys.argv[1]); "
            "print(sorted(m for m in sys.modules if m.startswith('irrun.ops.')))")
    out = subprocess.run([sys.executable, "-c", code, str(ROOT / "models" / "digits" / "model.xml")],
                         capture_output=True, text=True, check=True).stdout
    loaded = eval(out)
    assert "irrun.ops.arithmetic" in loaded and "irrun.ops.sequence" not in loaded, loaded


def test_every_spec_is_a_real_openvino_op_version():
    catalogue = opset_catalogue()
    for type_name, version in all_specs():
        assert version in catalogue.get(type_name, {}), f"{type_name}-{version} is not in opsets 1..17"


def test_catalogue_has_all_pairs():
    assert sum(len(v) for v in opset_catalogue().values()) == 245
    assert len(opset_catalogue()) == 209


_PROBE = """<?xml version="1.0"?>
<net name="probe" version="11"><layers>
<layer id="0" name="p" type="Parameter" version="opset1"><data shape="1" element_type="f32"/>
<output><port id="0" precision="FP32"><dim>1</dim></port></output></layer>
<layer id="1" name="x" type="{type}" version="opset{opset}"><input><port id="0" precision="FP32"><dim>1</dim></port>
</input><output><port id="1" precision="FP32"><dim>1</dim></port></output></layer>
<layer id="2" name="r" type="Result" version="opset1"><input><port id="0" precision="FP32"><dim>1</dim></port></input>
</layer></layers><edges><edge from-layer="0" from-port="0" to-layer="1" to-port="0"/>
<edge from-layer="1" from-port="1" to-layer="2" to-port="0"/></edges></net>"""


def test_opset17_members_are_what_openvino_reads():
    """For every op type, OpenVINO's IR reader finds it in opset17 exactly when the catalogue says so
    (a layer it finds may still be refused for its inputs: only "doesn't contain" means absent).
    Only opset17 is probed: some earlier ops crash OpenVINO when built from this probe's one input."""
    import openvino as ov
    core, no_weights = ov.Core(), ov.Tensor(ov.Type.u8, [0])
    disagree = []
    for type_name, versions in opset_catalogue().items():
        try:
            core.read_model(_PROBE.format(type=type_name, opset=17), no_weights)
            found = True
        except RuntimeError as exc:
            found = "doesn't contain" not in str(exc)
        if found != any(17 in members for members in versions.values()):
            disagree.append(f"{type_name}: OpenVINO {'reads' if found else 'does not read'} it as opset17")
    assert not disagree, disagree
    in_17 = sorted(t for t, versions in opset_catalogue().items() if any(17 in m for m in versions.values()))
    assert in_17 == ["BGRtoNV12", "Convert", "ErfInv", "GroupedMatMul", "Parameter", "RGBtoNV12", "ShapeOf"]


def test_catalogue_reader_agrees_with_tomllib():
    """opsets.toml is read by a line reader of its own (for speed); it must read what TOML reads,
    and refuse what it does not understand."""
    import tomllib
    from irrun.spec import _Catalogue, _parse_members, _read_catalogue
    text = (ROOT / "specs" / "opsets.toml").read_text()
    whole = tomllib.loads(text)
    assert _read_catalogue(text) == whole
    with pytest.raises(ValueError, match="line 2"):
        _read_catalogue('[Abs]\n1 = { x = 1 }\n')
    # a load reads the catalogue a type at a time, as it is asked for: the same types and versions
    catalogue = _Catalogue(text)
    assert list(catalogue) == list(whole)
    assert {t: {v: sorted(m) for v, m in catalogue[t].items()} for t in reversed(list(whole))} == \
        {t: {int(v): sorted(_parse_members(m)) for v, m in versions.items()} for t, versions in whole.items()}
    # headers as the line reader takes them (white space, a comment after); a section's own lines only
    odd = '# first\n[Abs]\n1 = "1-16"\n  [ Add ]  # two\n1 = "1-3"\n7 = "7"\n'
    assert dict(_Catalogue(odd)) == {"Abs": {1: frozenset(range(1, 17))}, "Add": {1: {1, 2, 3}, 7: {7}}}


def test_readme_op_table_is_current():
    readme = (ROOT / "README.md").read_text()
    table = ops_markdown()
    assert table in readme, "README's op table is stale: paste `irrun ops --format markdown` into it"


def _expected_codes(path: Path) -> list[str]:
    m = re.search(r"<!--\s*expect:\s*([^>]*?)\s*-->", path.read_text())
    assert m, f"{path.name} has no <!-- expect: ... --> verdict"
    text = m.group(1).strip()
    return [] if text == "clean" else sorted(c.strip() for c in text.split(","))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_spec_examples_give_their_verdict(path):
    report = irrun.validate(path)
    assert sorted(report.codes()) == _expected_codes(path), "\n".join(d.format() for d in report)


def test_there_are_spec_examples():
    names = {p.name for p in EXAMPLES}
    assert {f"avgpool1-example{i}.xml" for i in range(1, 6)} <= names
    assert any(n.startswith("adaptiveavgpool8") for n in names)
    assert any(n.startswith("groupconvbackprop1") for n in names)


def test_every_package_is_installed():
    """pyproject lists irrun's packages by hand (irrun.specs maps onto specs/): a new package
    left out would be missing from a non-editable install, as CI's is."""
    import tomllib
    root = Path(__file__).resolve().parent.parent
    listed = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {str(p.parent.relative_to(root)).replace("/", ".") for p in (root / "irrun").rglob("__init__.py")}
    assert on_disk | {"irrun.specs"} == listed
