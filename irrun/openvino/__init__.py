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

import importlib.abc
import sys

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
    "preprocess": "preprocessing",
    "convert_model": "converting models from other frameworks (use OpenVINO's ovc, then read the IR)",
    "frontend": "framework front ends",
    "op": "building graphs",
    "passes": "graph transformations",
    "experimental": "OpenVINO's experimental API",
    "RemoteContext": "devices other than the CPU",
    "RemoteTensor": "devices other than the CPU",
    "Extension": "extensions",
    "OpExtension": "extensions",
    "set_batch": "changing the batch (use Model.reshape)",
    "get_batch": "layouts on model ports",
    "layout_helpers": "layouts on model ports",
}


class _Missing:
    """A stand-in for an OpenVINO module or class irrun lacks: any use raises NotAvailableError."""

    def __init__(self, path: str, why: str):
        self._path, self._why = path, why

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        raise not_available(f"{self._path}.{name}", self._why)

    def __call__(self, *args, **kwargs):
        raise not_available(self._path, self._why)

    def __repr__(self) -> str:
        return f"<not available in irrun.openvino: {self._path}>"


def shutdown() -> None:
    """Nothing to release: irrun loads no plugins."""


def _why_missing(name: str) -> str | None:
    if name.startswith("opset") and name[5:].isdigit():
        return ("building graphs needs OpenVINO's graph API; build and save the model with OpenVINO, "
                "then read the IR here")
    return _MISSING.get(name)


def __getattr__(name: str):
    why = _why_missing(name)
    if why is not None:
        return _Missing(f"openvino.{name}", why)
    raise AttributeError(f"module 'irrun.openvino' has no attribute '{name}'")


class _MissingModuleFinder(importlib.abc.MetaPathFinder):
    """`import irrun.openvino.opset13 as ops` (and `irrun.openvino.runtime.opset8`, `.passes`, ...)
    raises NotAvailableError naming the missing piece, as attribute access does, rather than
    ModuleNotFoundError.  Last on sys.meta_path, so it is asked only about modules that do not exist."""

    def find_spec(self, fullname, path=None, target=None):
        for package in ("irrun.openvino.runtime.", "irrun.openvino."):
            if fullname.startswith(package):
                name = fullname[len(package):]
                why = _why_missing(name) if "." not in name else None
                if why is not None:
                    raise not_available(f"openvino.{name}", why)
                return None
        return None


if not any(isinstance(finder, _MissingModuleFinder) for finder in sys.meta_path):
    sys.meta_path.append(_MissingModuleFinder())


__all__ = ["AsyncInferQueue", "CompiledModel", "ConstOutput", "Core", "Dimension", "DiscreteTypeInfo", "InferRequest",
           "Input", "Layout", "Model", "Node", "NotAvailableError", "OVAny", "OVDict", "OVError", "OVRuntimeError",
           "OVTypeError", "Output", "PartialShape", "ProfilingInfo", "RTMap", "Shape", "Strides", "Tensor", "Type",
           "UserInputError", "VariableState", "Version", "compile_model", "element", "get_version", "properties",
           "save_model", "serialize", "shutdown", "tensor_from_file"]
