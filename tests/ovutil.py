"""Differential testing against OpenVINO: build with openvino.opsetN, save IR, run both."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset1 as ops1
import pytest
from lxml import etree

import irrun
from irrun import etypes
from irrun.errors import ShapeError
from irrun.registry import TensorType, implementation
from irrun.shapes import Dim, format_shape, parse_partial_shape
from irrun.spec import all_specs, parse_attrs

_CORE = ov.Core()
CPU_F32 = {"INFERENCE_PRECISION_HINT": "f32"}
# At f32 the CPU plugin still keeps a stateful LLM's KV cache in f16 and quantizes the activations of a
# MatMul with compressed (int8/int4/nf4/f8/codebook) weights to 8 bits per group of 32
# (specs/errata/precision.md); this turns both off. Compare compressed models and LLMs with it.
CPU_F32_EXACT = {**CPU_F32, "KV_CACHE_PRECISION": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0"}


def compile_cpu(model: "ov.Model | Path | str", config: dict | None = None) -> ov.CompiledModel:
    """The one way a test compiles for OpenVINO's CPU plugin: always at f32 inference precision.
    Without the hint a CPU with bf16/AMX computes in bf16 (tests/test_oracle.py checks that no test
    module compiles any other way).  `model`: an ov.Model or the path of an IR; `config` adds
    properties (the precision hint cannot be overridden)."""
    if not isinstance(model, ov.Model):
        model = _CORE.read_model(str(model))
    return _CORE.compile_model(model, "CPU", {**(config or {}), **CPU_F32})


def save(model: ov.Model, path: Path, *, compress: bool = False) -> Path:
    xml = Path(path) / "model.xml" if Path(path).suffix != ".xml" else Path(path)
    ov.save_model(model, str(xml), compress_to_fp16=compress)
    return xml


def run_openvino(xml: Path, inputs: list[np.ndarray]) -> list[np.ndarray]:
    compiled = compile_cpu(xml)
    result = compiled(inputs)
    return [np.asarray(result[out]) for out in compiled.outputs]


def openvino_layer_outputs(xml: Path | ov.Model, feeds: dict[str, np.ndarray], *,
                           constants: bool = False) -> dict[str, np.ndarray]:
    """Every layer output as OpenVINO's CPU plugin computes it (f32), each added as a model output
    (which also keeps the plugin from fusing it away), keyed "<friendly name>:<output index>".
    `xml`: an IR file, or a model read from one (which this changes)."""
    model = xml if isinstance(xml, ov.Model) else _CORE.read_model(str(xml))
    model.add_outputs([port for op in model.get_ordered_ops() if op.get_type_name() != "Result"
                       and (constants or op.get_type_name() != "Constant") for port in op.outputs()])
    compiled = compile_cpu(model)
    result = compiled(feeds)
    found = {}
    for out, compiled_out in zip(model.outputs, compiled.outputs):
        source = out.get_node().input_value(0)
        found[f"{source.get_node().get_friendly_name()}:{source.get_index()}"] = np.asarray(result[compiled_out])
    return found


def evaluate_reference(model: ov.Model, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """OpenVINO's reference evaluation (no plugin): for ops where the CPU plugin has bugs."""
    # np.require keeps 0-d arrays 0-d (np.ascontiguousarray makes them shape (1,)).
    in_tensors = [ov.Tensor(np.require(a, requirements="C")) for a in inputs]
    # evaluate() resizes each output, so outputs with dynamic shapes work too.
    out_tensors = [ov.Tensor(o.get_element_type(), ov.Shape([])) for o in model.outputs]
    assert model.evaluate(out_tensors, in_tensors)
    return [t.data.copy() for t in out_tensors]


def evaluate_without_lpt(model: ov.Model, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """OpenVINO without its low-precision (integer) execution, for FakeQuantize (int8) models: the
    model op by op, FakeQuantize by OpenVINO's reference implementation (Node.evaluate) and every
    other op alone on the CPU plugin at f32, where nothing can fuse it into an integer kernel;
    constant inputs stay constants (an op's shape may depend on them).  (ov.Model.evaluate cannot
    run such a model whole: the core has no Convolution evaluator, and Node.evaluate of MaxPool-14
    crashes.)"""
    from openvino.utils.node_factory import NodeFactory
    values, constant = {}, set()
    for parameter, array in zip(model.get_parameters(), inputs):
        values[parameter.output(0)] = np.asarray(array)
    results = []
    for op in model.get_ordered_ops():
        kind = op.get_type_name()
        if kind == "Parameter":
            continue
        sources = [i.get_source_output() for i in op.inputs()]
        args = [values[s] for s in sources]
        if kind == "Result":
            results.append(args[0])
            continue
        if kind == "Constant":
            values[op.output(0)] = op.get_data().copy()
            constant.add(op.output(0))
            continue
        if kind == "FakeQuantize":
            out = [ov.Tensor(o.get_element_type(), ov.Shape([])) for o in op.outputs()]
            assert op.evaluate(out, [ov.Tensor(np.require(a, requirements="C")) for a in args])
            outputs = [t.data.copy() for t in out]
        else:
            params, feeds, nodes = [], [], []
            for source, a in zip(sources, args):
                if source in constant:
                    nodes.append(ov.op.Constant(np.require(a, requirements="C")).output(0))
                    continue
                p = ov.op.Parameter(ov.Type(a.dtype), ov.PartialShape(list(a.shape)))
                params.append(p)
                feeds.append(a)
                nodes.append(p.output(0))
            node = NodeFactory(op.get_type_info().version_id).create(kind, nodes, op.get_attributes())
            compiled = compile_cpu(ov.Model(node.outputs(), params))
            result = compiled(feeds)
            outputs = [np.asarray(result[o]) for o in compiled.outputs]
        for port, value in zip(op.outputs(), outputs):
            values[port] = value
    return results


def run_in_threads(target, count: int = 4, timeout: float = 120) -> bool:
    """target(k) for k in range(count), each in a thread of its own, all at once; whether every
    one ended within `timeout` seconds."""
    import threading
    callers = [threading.Thread(target=target, args=(k,)) for k in range(count)]
    for t in callers:
        t.start()
    for t in callers:
        t.join(timeout)
    return not any(t.is_alive() for t in callers)


def assert_close(actual: np.ndarray, expected: np.ndarray, *, rtol=1e-4, atol=1e-5, what="output"):
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != OpenVINO {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != OpenVINO {expected.shape}"
    if expected.dtype.kind in "fc":
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=what)


# The largest error against float64 of Winograd at unit output scale (the values' std about 1, their
# largest 4.3-4.6): 128 channels at 20x20 F(2,3) 1.7e-6 to 2.1e-6, F(4,3) 1.22e-5 to 1.5e-5 with
# OpenBLAS's AVX-512 and AVX2 kernels alike (F(4,3) at the textbook points 0, +-1, +-2: 2.9e-5); 256
# channels at 28x28 F(2,3) 2.9e-6, F(4,3) 2.5e-5 (64 at 28x28: 1.4e-6, 8.8e-6).  The direct f32
# kernel's own error is BLAS's: 2.5e-6 with its AVX-512 kernels, 1.4e-6 with its AVX2 ones on an AMD
# EPYC.  The suite's tolerance against OpenVINO: atol 1e-5, rtol 1e-4, which F(2,3) meets and
# F(4,3) from 128 channels does not: its documented bound is this one
# (tests/test_kernels_parallel.py: test_winograd_error_against_float64 holds it).
WINOGRAD_ERROR = {2: 4e-6, 4: 3e-5}


# How far apart two irrun results may be whose GEMMs BLAS ran cut or laid out differently, as a
# share of the expected values' largest magnitude (see assert_blas_close)
BLAS_ROUNDING = 1e-5


def assert_blas_close(actual: np.ndarray, expected: np.ndarray, *, what="output"):
    """Two irrun results of the same arithmetic whose GEMMs ran cut or laid out differently (other
    thread counts, parts, a product run weight first or written channels-last): equal dtypes and
    shapes, integers exactly, floats within BLAS_ROUNDING of the largest expected magnitude.
    OpenBLAS sums each product's terms in an order of its kernels' choosing and does not promise
    the same last bits for such calls: its AVX2 ("Haswell") kernels on an AMD CPU of family 1Ah
    round differently for one and two threads, for a product cut into row or column halves, and
    for x @ w.T against (w @ x.T).T (its AVX-512 kernels there, and on the Intel Xeon of earlier
    runs, gave the same bits for these).  A wrong part or layout is off by the values' own size."""
    expected = np.asarray(expected)
    finite = expected[np.isfinite(expected)] if expected.dtype.kind in "fc" else expected[:0]
    scale = float(np.abs(finite).max()) if finite.size else 0.0
    assert_close(actual, expected, rtol=0, atol=BLAS_ROUNDING * scale, what=what)


def compare(model: ov.Model, inputs: list[np.ndarray], tmp_path: Path, *, rtol=1e-4, atol=1e-5,
            compress: bool = False, check_validate: bool = True, oracle: str = "cpu") -> dict[str, np.ndarray]:
    """Save `model`, run it in OpenVINO and in irrun, compare every output.

    `oracle="cpu"`: the CPU plugin with f32 inference precision (the default);
    `oracle="reference"`: OpenVINO's reference evaluation of the IR read back,
    for the few places where the CPU plugin is known to be wrong (say why); it computes every layer in
    its declared type, so irrun runs with precision="declared" then.
    Also asserts that `irrun validate` finds no error in what OpenVINO wrote.
    """
    xml = save(model, tmp_path, compress=compress)
    if oracle == "cpu":
        expected = run_openvino(xml, inputs)
    else:
        expected = evaluate_reference(_CORE.read_model(str(xml)), inputs)
    if check_validate:
        report = irrun.validate(xml)
        assert report.ok, "validate flagged an OpenVINO-written IR:\n" + \
            "\n".join(d.format() for d in report.errors)
    m = irrun.load(xml, precision="f32" if oracle == "cpu" else "declared")
    got = m.infer(list(inputs))
    assert list(got) == [o.name for o in m.outputs]
    assert len(got) == len(expected)
    for (name, actual), exp in zip(got.items(), expected):
        assert_close(actual, exp, rtol=rtol, atol=atol, what=name)
    check_round_trip(m, xml, inputs, expected, oracle)
    return got


def check_round_trip(m: irrun.Model, xml: Path, inputs, expected: list[np.ndarray], oracle: str = "cpu") -> Path:
    """`m` (loaded from `xml`) saved by irrun: the same files as OpenVINO's, byte for byte, or else a model
    OpenVINO reads to the same outputs, bit for bit, and that irrun reads and saves again unchanged."""
    saved = m.save(xml.with_name(xml.stem + ".irrun.xml"))
    if saved.read_bytes() == xml.read_bytes() and \
            saved.with_suffix(".bin").read_bytes() == xml.with_suffix(".bin").read_bytes():
        return saved   # OpenVINO's own files: it reads the same model from them
    if oracle == "cpu":
        again = run_openvino(saved, inputs)
    else:
        again = evaluate_reference(_CORE.read_model(str(saved)), inputs)
    assert len(again) == len(expected)
    for i, (a, e) in enumerate(zip(again, expected)):
        assert_close(a, e, rtol=0, atol=0, what=f"output {i} of the IR irrun saved")
    resaved = irrun.load(saved).save(xml.with_name(xml.stem + ".irrun2.xml"))
    assert resaved.read_bytes() == saved.read_bytes(), "loading and saving again changed the XML"
    assert resaved.with_suffix(".bin").read_bytes() == saved.with_suffix(".bin").read_bytes(), \
        "loading and saving again changed the weights"
    return saved


# ---------------------------------------------------------------- building models

def param(shape, dtype=np.float32, name=None) -> ov.Node:
    """A Parameter of `shape` (a list of ints / ov.Dimensions, a PartialShape, or None: dynamic rank)."""
    if shape is None:
        shape = ov.PartialShape.dynamic()
    elif not isinstance(shape, ov.PartialShape):
        shape = ov.PartialShape(shape)
    p = ov.op.Parameter(ov.Type(np.dtype(dtype)), shape)
    if name:
        p.set_friendly_name(name)
    return p


def const(values, dtype=np.int64) -> ov.Node:
    """A Constant of `values` as `dtype` (empty ones too)."""
    values = np.asarray(values, dtype)
    if values.size == 0:  # opset1.constant refuses empty data
        return ov.op.Constant(ov.Type(values.dtype), ov.Shape(list(values.shape)), [])
    return ops1.constant(values)


def model(nodes, params) -> ov.Model:
    """A model whose outputs are every output of `nodes` (a node, a node's output, or a list of those)."""
    nodes = nodes if isinstance(nodes, (list, tuple)) else [nodes]
    outputs = [o for n in nodes for o in (n.outputs() if isinstance(n, ov.Node) else [n])]
    return ov.Model(outputs, list(params))


def model_from_arrays(build, arrays, *, consts=(), dynamic=False, static_last=()) -> tuple[ov.Model, list]:
    """The model of `build(*nodes)` with a Parameter per array (a Constant at the positions in `consts`),
    and the arrays to feed it. `dynamic` makes every Parameter dim -1, but the last dim of the inputs
    at the positions in `static_last`."""
    nodes, params, feeds = [], [], []
    for i, a in enumerate(arrays):
        a = np.asarray(a)
        if i in consts:
            nodes.append(const(a, a.dtype))
            continue
        shape = list(a.shape)
        if dynamic:
            shape = [-1] * (a.ndim - 1) + shape[-1:] if i in static_last else [-1] * a.ndim
        p = param(shape, a.dtype, name=f"in{i}")
        nodes.append(p)
        params.append(p)
        feeds.append(a)
    return model(build(*nodes), params), feeds


def random_data(rng: np.random.Generator, shape, dtype=np.float32) -> np.ndarray:
    """Booleans half true, unsigned 0..199, signed -100..99, floats standard normal."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind == "u":
        return rng.integers(0, 200, shape).astype(dtype)
    if dtype.kind == "i":
        return rng.integers(-100, 100, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def only_output(outputs: dict) -> np.ndarray:
    """The single output of a one-output `compare` (or `infer`)."""
    (value,) = outputs.values()
    return value


def irrun_outputs(m: ov.Model, inputs, tmp_path: Path, *, check_validate: bool = False) -> list[np.ndarray]:
    """irrun's outputs for `m` saved as IR (for checks other than a comparison with OpenVINO)."""
    xml = save(m, tmp_path)
    if check_validate:
        assert irrun.validate(xml).ok
    return list(irrun.load(xml).infer(list(inputs)).values())


# ---------------------------------------------------------------- editing a saved IR

def as_ir_v10(xml: Path) -> Path:
    """Make a saved IR one as the Model Optimizer wrote it before 2022: version 10, no tensor names
    (OpenVINO reads it with v10's rules: f16 inputs become f32 ones, outputs are converted)."""
    text = re.sub(r'<net name="([^"]*)" version="11">', r'<net name="\1" version="10">', Path(xml).read_text())
    Path(xml).write_text(re.sub(r' names="[^"]*"', "", text))
    return Path(xml)


def openvino_refuses(xml: Path) -> bool:
    """OpenVINO's IR reader rejects the file."""
    try:
        _CORE.read_model(str(xml))
    except RuntimeError:
        return True
    return False


def replace_in_ir(xml: Path, old: str, new: str, count: int = 1) -> Path:
    """Replace the first `count` occurrences of `old` in the IR's text (there must be that many)."""
    text = xml.read_text()
    assert text.count(old) >= count, f"{old!r} not in the IR"
    xml.write_text(text.replace(old, new, count))
    return xml


def mutated_copy(xml: Path, folder: Path, edit) -> Path:
    """A copy of the IR `xml` as `folder`/model.xml (with the same weights), `edit(root)` applied to its XML."""
    tree = etree.parse(str(xml))
    edit(tree.getroot())
    out = Path(folder) / "model.xml"
    tree.write(str(out))
    shutil.copy(Path(xml).with_suffix(".bin"), out.with_suffix(".bin"))
    return out


def layer_of(root, type_name: str):
    """The first layer of type `type_name` in a parsed IR."""
    return next(layer for layer in root.iter("layer") if layer.get("type") == type_name)


def set_port_dims(port, dims) -> None:
    """Replace the `<dim>`s of an IR `<port>` (the rank may change)."""
    for old in port.findall("dim"):
        port.remove(old)
    for d in dims:
        etree.SubElement(port, "dim").text = str(d)


def set_parameter_dims(root, parameter, dims) -> None:
    """Give the Parameter layer `parameter` of a parsed IR the static shape `dims`, and every port it feeds."""
    parameter.find("data").set("shape", ",".join(map(str, dims)))
    set_port_dims(parameter.find("output").find("port"), dims)
    layers = {layer.get("id"): layer for layer in root.iter("layer")}
    for e in root.iter("edge"):
        if e.get("from-layer") == parameter.get("id"):
            target = layers[e.get("to-layer")]
            set_port_dims(next(pt for pt in target.find("input").findall("port") if pt.get("id") == e.get("to-port")),
                          dims)


def edited_ir(m: ov.Model, tmp_path: Path, type_name: str, attrs=None, *, drop=(), output_dims=None, port=0,
              input_dims: dict | None = None, edit=None) -> Path:
    """Save `m` to a new folder under `tmp_path`, then edit its first `type_name` layer: set `attrs`
    in its `<data>`, delete the attributes in `drop`, overwrite the dims of output `port` with
    `output_dims` (same rank), give the Parameter feeding input port i the static shape
    `input_dims[i]`, and call `edit(layer)` for anything else."""
    Path(tmp_path).mkdir(parents=True, exist_ok=True)
    folder = Path(tmp_path) / f"edited{len(list(Path(tmp_path).iterdir()))}"   # never overwrite a mapped .bin
    folder.mkdir()
    xml = save(m, folder)
    tree = etree.parse(str(xml))
    root = tree.getroot()
    layer = layer_of(root, type_name)
    for name, value in (attrs or {}).items():
        layer.find("data").set(name, value)
    for name in drop:
        del layer.find("data").attrib[name]
    if output_dims is not None:
        for dim, value in zip(layer.find("output").findall("port")[port].findall("dim"), output_dims):
            dim.text = str(value)
    for input_port, dims in (input_dims or {}).items():
        edge = next(e for e in root.iter("edge")
                    if e.get("to-layer") == layer.get("id") and e.get("to-port") == str(input_port))
        set_parameter_dims(root, next(la for la in root.iter("layer") if la.get("id") == edge.get("from-layer")), dims)
    if edit is not None:
        edit(layer)
    tree.write(str(xml))
    return xml


# ---------------------------------------------------------------- shape functions vs OpenVINO's

def attr_text(value) -> str:
    """An attribute as OpenVINO writes it in IR `<data>`: bools lower-case, lists comma-separated."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value))
    return str(value)


def irrun_infer_all(type_name: str, version: int, attrs: dict, inputs: list[TensorType], *,
                    bad_attrs_refuse: bool = False) -> list[TensorType]:
    """Every output of irrun's shape function, for attributes given as Python values or IR text.
    An attribute problem fails the test, or with `bad_attrs_refuse` raises ShapeError
    (for cases where OpenVINO refuses the attribute value and validate reports it)."""
    spec = all_specs()[(type_name, version)]
    parsed, problems = parse_attrs(spec, {k: attr_text(v) for k, v in attrs.items()})
    problems = [p for p in problems if p.code != "W-ATTR-DEFAULTED"]   # (the attributes a case leaves out)
    if problems and bad_attrs_refuse:
        raise ShapeError(problems[0].message)
    assert not problems, problems
    return implementation(type_name, version)(spec, parsed).infer(inputs)


def irrun_infer(type_name: str, version: int, attrs: dict, inputs: list[TensorType]) -> TensorType:
    """Output 0 of irrun's shape function, for attributes given as Python values or IR text."""
    return irrun_infer_all(type_name, version, attrs, inputs)[0]


def as_dim(d):
    """An OpenVINO dim (an int, -1 for dynamic, or an ov.Dimension) as irrun's dim."""
    if isinstance(d, int) and d >= 0:
        return d
    d = ov.Dimension(d) if isinstance(d, int) else d
    if d.is_static:
        return d.get_length()
    hi = d.get_max_length()
    return Dim(d.get_min_length(), None if hi < 0 else hi)


def tensor_type(shape, dtype=np.float32, value=None) -> TensorType:
    """irrun's view of a tensor of `shape` (ints, -1 and ov.Dimensions; None: dynamic rank),
    with its value when it is known."""
    dims = None if shape is None else tuple(as_dim(d) for d in shape)
    return TensorType(dims, etypes.from_dtype(dtype), None if value is None else np.asarray(value, dtype))


def as_tensor_type(node_output) -> TensorType:
    """What irrun knows about an OpenVINO node's output: shape, type, value if it is a Constant."""
    node = node_output.get_node()
    ov_type = node_output.get_element_type()
    etype = etypes.BY_NAME.get(ov_type.get_type_name()) or etypes.from_dtype(ov_type.to_dtype())
    # get_data() of a sub-byte Constant (u1, i4 ...) is its packed bytes, not its values
    value = node.get_data().copy() if node.get_type_name() == "Constant" and ov_type.bitwidth >= 8 else None
    return TensorType(parse_partial_shape(str(node_output.get_partial_shape())), etype, value)


def ov_shape_text(partial_shape) -> str:
    """OpenVINO's PartialShape in irrun's notation (format_shape)."""
    return "[...]" if partial_shape.rank.is_dynamic else str(partial_shape).replace(" ", "")


def check_shape_function(ov_build, type_name: str, version: int, attrs: dict, args: list, *,
                         all_outputs: bool = False, refusal: str | None = None) -> None:
    """`args` are OpenVINO nodes; the op built from them by OpenVINO and by irrun must agree on
    the shape and element type of output 0 (of every output with `all_outputs`), or both refuse it
    (irrun with a ShapeError matching `refusal`, when given)."""
    inputs = [as_tensor_type(a.output(0)) for a in args]
    try:
        node = ov_build(*args)
    except RuntimeError as exc:
        with pytest.raises(ShapeError, match=refusal):
            got = irrun_infer_all(type_name, version, attrs, inputs)
            pytest.fail(f"OpenVINO refuses this ({str(exc).strip().splitlines()[-1]}), "
                        f"irrun infers {[format_shape(t.shape) for t in got]}")
        return
    got = irrun_infer_all(type_name, version, attrs, inputs)
    expected = node.outputs() if all_outputs else node.outputs()[:1]
    got = got if all_outputs else got[:1]
    assert [format_shape(t.shape) for t in got] == [ov_shape_text(o.get_partial_shape()) for o in expected]
    assert [t.etype.name for t in got] == [o.get_element_type().get_type_name() for o in expected]
