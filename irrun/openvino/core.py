"""`Core`: reading and compiling models; `save_model`, `serialize`, `get_version`."""
from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import numpy as np

from .. import __version__ as irrun_version
from ..threads import set_threads
from . import config as cfg
from .compiled import CompiledModel
from .exceptions import OVRuntimeError, as_runtime_errors, not_available
from .model import Model, Source
from .tensor import Tensor


class Version:
    """`Core.get_versions(...)[device]`, `get_version()`."""

    def __init__(self, description: str):
        self.description = description
        self.build_number = cfg.version_string()
        parts = (irrun_version.split(".") + ["0", "0", "0"])[:3]
        self.major, self.minor, self.patch = (int(p) if p.isdigit() else 0 for p in parts)

    def __repr__(self) -> str:
        return f"<Version: {self.build_number} {self.description}>"


def get_version() -> str:
    return cfg.version_string()


def _memory_bytes(value: Any, what: str) -> bytes:
    if isinstance(value, Tensor):
        return np.ascontiguousarray(value.data).tobytes() if value.data.dtype != np.uint8 else value.data.tobytes()
    if isinstance(value, io.BytesIO):
        return value.getvalue()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, np.ndarray):
        return value.tobytes()
    raise TypeError(f"{what} must be bytes, a Tensor or a BytesIO, not {type(value).__name__}")


def _path(value: Any) -> Path | None:
    if isinstance(value, Path):
        return value
    if isinstance(value, str) and not value.lstrip().startswith("<"):
        return Path(value)
    return None


def read(model: Any, weights: Any = None) -> tuple[Source, Any]:
    """(source, irrun model) for what `read_model` accepts: a path (str or Path; `weights` a path
    to the .bin, else the one beside it), or the XML itself (bytes, or str with weights in
    memory) with its weights as bytes, a Tensor or a BytesIO."""
    if isinstance(model, io.BytesIO):
        model = model.getvalue()
    path = _path(model)
    if path is not None:
        if path.suffix.lower() == ".onnx" or path.suffix.lower() in (".pb", ".tflite", ".pdmodel"):
            raise not_available(f"reading {path.suffix} models ({path.name})", "irrun reads OpenVINO IR (.xml + .bin); "
                                "convert the model with OpenVINO's ovc first")
        if not path.exists():
            raise OVRuntimeError(f'Could not open the file: "{path}"')
        if path.is_dir():
            raise OVRuntimeError(f'"{path}" is a directory, not an IR .xml file')
        if weights is not None and not isinstance(weights, (str, os.PathLike)):
            source = Source(None, path.read_bytes(), _memory_bytes(weights, "weights"), name=path.stem)
        elif weights is not None and Path(weights).resolve() != path.with_suffix(".bin").resolve():
            bin_path = Path(weights)
            if not bin_path.exists():
                raise OVRuntimeError(f'Could not open the file: "{bin_path}"')
            source = Source(None, path.read_bytes(), bin_path.read_bytes(), name=path.stem)
        else:
            source = Source(path)
        return source, source.load()
    if isinstance(model, str):
        model = model.encode("utf-8")
    if not isinstance(model, (bytes, bytearray, memoryview)):
        raise TypeError(f"read_model takes a path, or the XML as bytes or str, not {type(model).__name__}")
    if isinstance(weights, (str, os.PathLike)):
        weights = Path(weights).read_bytes()
    source = Source(None, bytes(model), b"" if weights is None else _memory_bytes(weights, "weights"))
    return source, source.load()


class Core:
    """Reads and compiles models.  irrun's one device is the CPU (AUTO picks it)."""

    def __init__(self, xml_config_file: str = ""):
        self._defaults: dict[str, Any] = {}

    @property
    def available_devices(self) -> list[str]:
        return [cfg.DEVICE]

    def get_available_devices(self) -> list[str]:
        return self.available_devices

    def read_model(self, model: Any, weights: Any = None, config: dict | None = None) -> Model:
        if isinstance(model, Model):
            return model
        source, irrun_model = read(model, weights)
        return Model._open(source, irrun_model)

    def compile_model(self, model: Any, device_name: str | None = None, config: dict | None = None, *,
                      weights: bytes | None = None) -> CompiledModel:
        cfg.check_device(device_name)
        settings = cfg.Settings(self._defaults, cfg.parse(cfg.normalize(config)))
        settings.warn_precision()
        if settings.threads is not None:
            with as_runtime_errors():
                set_threads(settings.threads)
        if not isinstance(model, Model):
            model = self.read_model(model, weights)
        irrun_model, changes = model._take(settings.precision, settings.threads)
        return CompiledModel._make(model, irrun_model, changes, settings)

    def query_model(self, model: Model, device_name: str, config: dict | None = None) -> dict[str, str]:
        """Every op irrun runs, on the CPU (reading the model already refused what it cannot run)."""
        cfg.check_device(device_name)
        return {node.get_friendly_name(): cfg.DEVICE for node in model.get_ordered_ops()}

    def set_property(self, device_name: Any = None, properties: Any = None) -> None:
        if properties is None and not isinstance(device_name, str):
            device_name, properties = None, device_name
        if device_name is not None:
            cfg.check_device(device_name)
        self._defaults.update(cfg.parse(cfg.normalize(properties)))

    def get_property(self, device_name: str, name: str | None = None, arguments: Any = None) -> Any:
        if name is None:
            name, device_name = device_name, cfg.DEVICE
        cfg.check_device(device_name)
        return cfg.device_property(str(name), self._defaults)

    def get_versions(self, device_name: str) -> dict[str, Version]:
        cfg.check_device(device_name)
        return {str(device_name): Version("irrun_cpu")}

    def import_model(self, *args, **kwargs):
        raise not_available("Core.import_model", "irrun has no compiled blobs; read the IR instead")

    def register_plugin(self, *args, **kwargs):
        raise not_available("plugins (Core.register_plugin)")

    register_plugins = unload_plugin = register_plugin

    def add_extension(self, *args, **kwargs):
        raise not_available("extensions (Core.add_extension)", "irrun runs the ops it implements (`irrun ops`)")

    def create_context(self, *args, **kwargs):
        raise not_available("remote contexts (Core.create_context)", "irrun runs on the CPU only")

    get_default_context = create_context

    def __repr__(self) -> str:
        return "<Core>"


def compile_model(model: Any, device_name: str | None = "AUTO", config: dict | None = None) -> CompiledModel:
    """`openvino.compile_model(path_or_model, device, config)`: read and compile in one call."""
    return Core().compile_model(model, device_name, config)


def save_model(model: Model, output_model: str | os.PathLike, compress_to_fp16: bool = True) -> None:
    """Write `model` as IR (`.xml` and the `.bin` beside it) through irrun's writer."""
    from .saving import save
    save(model, Path(output_model), compress_to_fp16)


def serialize(model: Model, xml_path: str | os.PathLike, bin_path: str | os.PathLike | None = None,
              version: Any = None) -> None:
    """Write `model` as IR without compressing its weights (the .bin beside the .xml)."""
    if bin_path is not None and Path(bin_path).resolve() != Path(xml_path).with_suffix(".bin").resolve():
        raise not_available("serialize(..., bin_path) to another name than the .xml's",
                            "irrun writes the .bin beside the .xml")
    save_model(model, xml_path, compress_to_fp16=False)


def tensor_from_file(path: str) -> Tensor:
    return Tensor(np.fromfile(path, dtype=np.uint8))
