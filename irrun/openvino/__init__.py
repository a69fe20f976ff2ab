"""`irrun.openvino`: the part of OpenVINO's Python API that scripts use, run by irrun.

    import irrun.openvino as ov          # instead of: import openvino as ov
    core = ov.Core()
    compiled = core.compile_model("model.xml", "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    result = compiled(inputs)[compiled.output(0)]

Reading, compiling and running IR, ports, tensors, shapes, types, properties, requests, async
queues, variables and profiling work as in OpenVINO; what irrun cannot do (other devices,
building or transforming graphs, preprocessing, other model formats) raises
`NotAvailableError` (a NotImplementedError, hence a RuntimeError) naming the missing piece.
Misuse raises `OVRuntimeError` (a RuntimeError) as OpenVINO raises RuntimeError.  The README's
"irrun.openvino" section lists what differs.  This package never imports `openvino`.
"""
from __future__ import annotations

from . import properties
from .compiled import AsyncInferQueue, CompiledModel
from .core import Core, Version, compile_model, get_version, save_model, serialize, tensor_from_file
from .exceptions import NotAvailableError, OVError, OVRuntimeError, OVTypeError, UserInputError, not_available
from .graph import ConstOutput, DiscreteTypeInfo, Input, Node, Output, OVAny, RTMap
from .model import Model
from .request import InferRequest, OVDict, ProfilingInfo, VariableState
from .tensor import Tensor
from .types import Dimension, Layout, PartialShape, Shape, Strides, Type, element

from . import exceptions  # noqa: E402,F401

__version__ = get_version()

# What OpenVINO has and irrun does not: each name raises NotAvailableError when used.
_MISSING = {
    "preprocess": "preprocessing (openvino.preprocess.PrePostProcessor)",
    "convert_model": "model conversion (openvino.convert_model)",
    "frontend": "framework front ends (openvino.frontend)",
    "op": "building graphs (openvino.op)",
    "passes": "graph transformations (openvino.passes)",
    "experimental": "openvino.experimental",
    "RemoteContext": "remote contexts (devices other than the CPU)",
    "RemoteTensor": "remote tensors (devices other than the CPU)",
    "Extension": "extensions",
    "OpExtension": "extensions",
    "set_batch": "set_batch (use Model.reshape)",
    "get_batch": "get_batch",
    "layout_helpers": "layouts on model ports (openvino.layout_helpers)",
    "shutdown": None,
}


class _Missing:
    """A stand-in for an OpenVINO module or class irrun lacks: any use raises NotAvailableError."""

    def __init__(self, what: str):
        self._what = what

    def __getattr__(self, name: str):
        raise not_available(f"{self._what}{'.' + name if not name.startswith('_') else ''}")

    def __call__(self, *args, **kwargs):
        raise not_available(self._what)

    def __repr__(self) -> str:
        return f"<not available in irrun.openvino: {self._what}>"


def shutdown() -> None:
    """Nothing to release: irrun loads no plugins."""


def __getattr__(name: str):
    if name.startswith("opset") and name[5:].isdigit():
        return _Missing(f"building graphs with openvino.{name}")
    what = _MISSING.get(name)
    if what is not None:
        return _Missing(what)
    raise AttributeError(f"module 'irrun.openvino' has no attribute '{name}'")


__all__ = ["AsyncInferQueue", "CompiledModel", "ConstOutput", "Core", "Dimension", "DiscreteTypeInfo", "InferRequest",
           "Input", "Layout", "Model", "Node", "NotAvailableError", "OVAny", "OVDict", "OVError", "OVRuntimeError",
           "OVTypeError", "Output", "PartialShape", "ProfilingInfo", "RTMap", "Shape", "Strides", "Tensor", "Type",
           "UserInputError", "VariableState", "Version", "compile_model", "element", "get_version", "properties",
           "save_model", "serialize", "shutdown", "tensor_from_file"]
