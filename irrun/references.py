"""What `irrun compare` compares against: tensors by key (`"<layer name>:<output index>"`).

- `openvino` / `openvino:GPU` ...: OpenVINO runs the same IR with every layer output
  added as a model output (which also keeps its plugins from fusing those layers away),
  at f32 inference precision.  openvino is an optional dependency (`irrun[openvino]`),
  imported only here and only when asked for.
- a `.npz` archive or a `--dump` directory: read lazily, one tensor at a time.
- another IR (`.xml`) or an `irrun.Model`: run by irrun on the same inputs, every layer output kept.
- any mapping of arrays by key.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np

from .arrays import NpzArchive
from .errors import IrrunError, UsageError
from .watch import Collect, tensor_key

OPENVINO_HINT = 'pip install "irrun[openvino]"'


@contextmanager
def open_reference(reference: Any, model, inputs: Any, max_memory: int | None = None) \
        -> Iterator[tuple[Mapping[str, np.ndarray], str]]:
    """(tensors by key, a label for reports) for a `compare` reference (see the module docstring)."""
    from .model import Model, load

    if isinstance(reference, Model):
        yield run_irrun(reference, inputs), f"{reference.path.name} (irrun)"
        return
    if isinstance(reference, Mapping):
        yield reference, "the given arrays"
        return
    if not isinstance(reference, (str, Path)):
        raise UsageError(f"a reference is 'openvino[:DEVICE]', a path or a mapping of arrays, not "
                         f"{type(reference).__name__}")
    device = openvino_device(reference)
    if device is not None:
        yield run_openvino(model, inputs, device), f"openvino ({device}, f32)"
        return
    text = str(reference)
    path = Path(text)
    if path.is_dir():
        from .dump import DumpDirectory
        yield DumpDirectory(path), str(path)
    elif path.suffix.lower() == ".npz":
        with NpzArchive(path) as archive:
            yield archive, str(path)
    elif path.suffix.lower() == ".xml":
        other = load(path, max_memory=max_memory, optimize=model.optimize)
        try:
            yield run_irrun(other, inputs), f"{path.name} (irrun)"
        finally:
            other.close()
    elif not path.exists():
        raise UsageError(f"--reference {text}: no such file; give openvino[:DEVICE], a .npz, a dump directory "
                         f"or another model's .xml")
    else:
        raise UsageError(f"--reference {text}: not a .npz, a dump directory or an .xml model")


def openvino_device(reference: Any) -> str | None:
    """The device of a reference `openvino` / `openvino:DEVICE` ("CPU" by default); None for any other
    reference (a file of that name included)."""
    if not isinstance(reference, (str, Path)):
        return None
    kind, _, device = str(reference).partition(":")
    return (device or "CPU") if kind.lower() == "openvino" and not Path(reference).exists() else None


def run_irrun(model, inputs: Any) -> dict[str, np.ndarray]:
    """Every layer output of `model` run by irrun (Parameters included, Constants not)."""
    kept = Collect()
    model.infer(inputs, watch=[kept])
    return kept.values


def import_openvino():
    try:
        import openvino
    except ImportError:
        raise UsageError(f"--reference openvino needs the openvino package: {OPENVINO_HINT}") from None
    return openvino


def run_openvino(model, inputs: Any, device: str = "CPU") -> dict[str, np.ndarray]:
    """Every layer output (Constants and Results left out) of the IR OpenVINO computes on `device`."""
    ov = import_openvino()
    feeds = model._feeds(inputs)
    try:
        core = ov.Core()
        ov_model = core.read_model(str(model.path))
        # (an Assign, a sink, has no output OpenVINO can add: "Incorrect output port number")
        ov_model.add_outputs([port for op in ov_model.get_ordered_ops()
                              if op.get_type_name() not in ("Result", "Constant", "Assign") for port in op.outputs()])
        # f32 inference precision: OpenVINO would otherwise compute in bf16 or f16 where the CPU allows.
        # (Every layer an output also keeps the CPU plugin from fusing compressed MatMuls, whose
        # activations it would quantize to int8.)
        compiled = core.compile_model(ov_model, device, {"INFERENCE_PRECISION_HINT": "f32"})
        by_name = {p.id: p.name for p in model._parameters}
        names = {op.get_friendly_name(): i for i, op in enumerate(ov_model.get_parameters())}
        ordered: list = [None] * len(names)
        for pid, value in feeds.items():
            ordered[names[by_name[pid]]] = np.ascontiguousarray(value)
        result = compiled(ordered)
    except RuntimeError as exc:
        last = (str(exc).strip().splitlines() or ["no message"])[-1]
        raise IrrunError(f"OpenVINO could not run the model on {device}: {last}", file=str(model.path)) from None
    found = {}
    for out, compiled_out in zip(ov_model.outputs, compiled.outputs):
        source = out.get_node().input_value(0)
        found[tensor_key(source.get_node().get_friendly_name(), source.get_index())] = np.asarray(result[compiled_out])
    return found
