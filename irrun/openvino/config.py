"""Devices and properties: what `Core.compile_model(..., config)`, `Core.set_property` and the
`get_property` calls accept and report.

irrun has one device, the CPU (AUTO, AUTO:CPU, MULTI:CPU and HETERO:CPU name it too).  The keys
that change what irrun does:

* INFERENCE_PRECISION_HINT: "f32" (irrun's default, OpenVINO's CPU plugin at f32).  "f16" and
  "bf16" are accepted but irrun still computes as the CPU plugin does at f32 (it cannot round
  activations as the plugin's bf16/f16 kernels do); a RuntimeWarning says so once per compile.
  EXECUTION_MODE_HINT=ACCURACY asks for f32 too.
* IRRUN_PRECISION: irrun's own key: "f32" (default) or "declared" (every f16 layer rounded to
  f16, as f16 devices and OpenVINO's reference evaluation do; see `irrun.load`).
* INFERENCE_NUM_THREADS: irrun's thread count (for the whole process, as `irrun.load(threads=)`).
* PERF_COUNT (props.enable_profiling): every inference is timed per layer for
  `InferRequest.get_profiling_info()`.
* PERFORMANCE_HINT, PERFORMANCE_HINT_NUM_REQUESTS, NUM_STREAMS: decide
  OPTIMAL_NUMBER_OF_INFER_REQUESTS (how many requests `AsyncInferQueue(compiled)` makes):
  1 for LATENCY, else NUM_STREAMS or irrun's thread count, capped by the number of requests.

The other keys OpenVINO's CPU plugin and Core accept (CACHE_DIR, ENABLE_MMAP, KV_CACHE_PRECISION,
DYNAMIC_QUANTIZATION_GROUP_SIZE, ENABLE_CPU_PINNING, LOG_LEVEL ...) are accepted, kept and
reported back, and change nothing: irrun keeps KV caches in their declared precision and never
quantizes activations.  Unknown keys are refused as OpenVINO refuses them.
"""
from __future__ import annotations

import enum
import re
import warnings
from typing import Any, Mapping

from .. import __version__ as irrun_version
from ..threads import available_cpus, threads as current_threads
from .exceptions import NotAvailableError, OVRuntimeError
from .properties import CacheMode
from .properties.device import Type as DeviceType
from .properties.hint import ExecutionMode, PerformanceMode, Priority, SchedulingCoreType
from .properties.log import Level
from .types import Type

DEVICE = "CPU"
FULL_DEVICE_NAME = "irrun (pure-Python OpenVINO IR interpreter on NumPy)"

_PRECISIONS = {"f32": Type.f32, "f16": Type.f16, "bf16": Type.bf16}

# key -> (default, parser): the parser turns a script's value into the stored one or raises ValueError
_ENUMS = {"PERFORMANCE_HINT": PerformanceMode, "EXECUTION_MODE_HINT": ExecutionMode, "MODEL_PRIORITY": Priority,
          "SCHEDULING_CORE_TYPE": SchedulingCoreType, "LOG_LEVEL": Level, "CACHE_MODE": CacheMode}


def _as_bool(value) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().upper()
    if text in ("YES", "TRUE", "1"):
        return True
    if text in ("NO", "FALSE", "0"):
        return False
    raise ValueError


def _as_count(value) -> int:
    n = int(str(value).strip()) if not isinstance(value, bool) else None
    if n is None or n < 0:
        raise ValueError
    return n


def _as_streams(value) -> int:
    text = str(int(value) if not isinstance(value, str) else value).strip().upper()
    if text in ("AUTO", "-1"):
        return -1
    if text in ("NUMA", "-2"):
        return -2
    return _as_count(text)


def _as_precision(value) -> Type:
    name = value.get_type_name() if isinstance(value, Type) else str(value).strip().lower()
    if name in ("undefined", "dynamic"):
        return Type.f32
    if name not in _PRECISIONS:
        raise ValueError
    return _PRECISIONS[name]


def _as_type(value) -> Type:
    if isinstance(value, Type):
        return value
    return Type.from_name(str(value).strip().lower())


def _as_irrun_precision(value) -> str:
    text = str(value).strip().lower()
    if text not in ("f32", "declared"):
        raise ValueError
    return text


def _as_enum(kind):
    def parse(value):
        if isinstance(value, kind):
            return value
        text = str(value).strip().upper().rpartition(".")[2]
        return kind[text]
    return parse


def _any(value):
    return value


def _as_str(value) -> str:
    return str(value)


_WRITABLE: dict[str, tuple[Any, Any]] = {
    "INFERENCE_PRECISION_HINT": (Type.f32, _as_precision),
    "IRRUN_PRECISION": ("f32", _as_irrun_precision),
    "INFERENCE_NUM_THREADS": (0, _as_count),
    "PERF_COUNT": (False, _as_bool),
    "PERFORMANCE_HINT": (PerformanceMode.LATENCY, _as_enum(PerformanceMode)),
    "PERFORMANCE_HINT_NUM_REQUESTS": (0, _as_count),
    "NUM_STREAMS": (-1, _as_streams),          # AUTO: as the performance hint decides
    "EXECUTION_MODE_HINT": (ExecutionMode.PERFORMANCE, _as_enum(ExecutionMode)),
    "ENABLE_CPU_PINNING": (False, _as_bool),
    "ENABLE_CPU_RESERVATION": (False, _as_bool),
    "ENABLE_HYPER_THREADING": (True, _as_bool),
    "SCHEDULING_CORE_TYPE": (SchedulingCoreType.ANY_CORE, _as_enum(SchedulingCoreType)),
    "MODEL_DISTRIBUTION_POLICY": (set(), _any),
    "MODEL_PRIORITY": (Priority.MEDIUM, _as_enum(Priority)),
    "DEVICE_ID": ("", _as_str),
    "CPU_DENORMALS_OPTIMIZATION": (False, _as_bool),
    "LOG_LEVEL": (Level.NO, _as_enum(Level)),
    "CPU_SPARSE_WEIGHTS_DECOMPRESSION_RATE": (1.0, float),
    "ENABLE_TENSOR_PARALLEL": (False, _as_bool),
    "TBB_PARTITIONER": ("STATIC", _as_str),
    "DYNAMIC_QUANTIZATION_GROUP_SIZE": (0, _as_count),
    "KV_CACHE_PRECISION": (Type.f32, _as_type),
    "KEY_CACHE_PRECISION": (Type.f32, _as_type),
    "VALUE_CACHE_PRECISION": (Type.f32, _as_type),
    "KEY_CACHE_GROUP_SIZE": (0, _as_count),
    "VALUE_CACHE_GROUP_SIZE": (0, _as_count),
    "ENABLE_WEIGHTLESS": (False, _as_bool),
    "WEIGHTS_PATH": ("", _as_str),
    # Core's own keys (OpenVINO handles them above the plugin)
    "CACHE_DIR": ("", _as_str),
    "CACHE_MODE": (CacheMode.OPTIMIZE_SPEED, _as_enum(CacheMode)),
    "ENABLE_MMAP": (True, _as_bool),
    "COMPILATION_NUM_THREADS": (0, _as_count),
    "ALLOW_AUTO_BATCHING": (True, _as_bool),
    "AUTO_BATCH_TIMEOUT": (1000, _as_count),
    "FORCE_TBB_TERMINATE": (False, _as_bool),
    "CACHE_ENCRYPTION_CALLBACKS": (None, _any),
}


def normalize(config: Any) -> dict[str, Any]:
    """A config as scripts give it: a dict (keys strings or `props.*`), one (key, value) pair, or a
    list of pairs."""
    if config is None:
        return {}
    if isinstance(config, tuple) and len(config) == 2 and isinstance(config[0], str):
        config = [config]
    if isinstance(config, Mapping):
        items = config.items()
    else:
        try:
            items = [tuple(pair) for pair in config]
        except TypeError:
            raise TypeError(f"a config must be a dict of property -> value, not {type(config).__name__}") from None
    out = {}
    for key, value in items:
        if not isinstance(key, str):
            raise TypeError(f"a property key must be a string, not {type(key).__name__}")
        out[str(key)] = value
    return out


def parse(config: Mapping[str, Any], what: str = "CPU plugin") -> dict[str, Any]:
    """Checked values by key: an unknown key or a value of the wrong kind is refused as OpenVINO refuses it."""
    parsed = {}
    for key, value in config.items():
        if key not in _WRITABLE:
            if key in _READ_ONLY:
                raise OVRuntimeError(f"Property {key} is read-only and cannot be set")
            raise OVRuntimeError(f"NotFound: Unsupported property {key} by {what}.")
        try:
            parsed[key] = _WRITABLE[key][1](value)
        except (ValueError, KeyError, TypeError):
            raise OVRuntimeError(f"Wrong value {_show(value)} for property key {key}.{_supported_values(key)}") from None
    return parsed


def _show(value) -> str:
    return value.get_type_name() if isinstance(value, Type) else value.name if isinstance(value, enum.Enum) else str(value)


def _supported_values(key: str) -> str:
    if key == "INFERENCE_PRECISION_HINT":
        return " Supported values: bf16, f16, f32, undefined"
    if key == "IRRUN_PRECISION":
        return " Supported values: f32, declared"
    if key in _ENUMS:
        return " Supported values: " + ", ".join(_ENUMS[key].__members__)
    return ""


def check_device(device_name: str | None) -> str:
    """The device a script names, if it is the CPU (or lets AUTO/MULTI/HETERO pick it); else a clear error."""
    name = "AUTO" if device_name is None else str(device_name).strip()
    base, _, rest = name.partition(":")
    base = base.split(".")[0].upper()
    if base == DEVICE:
        return DEVICE
    if base in ("AUTO", "MULTI", "HETERO", "BATCH"):
        candidates = [d.strip().split("(")[0].split(".")[0].upper() for d in re.split(r"[,:]", rest) if d.strip()]
        if not candidates or DEVICE in candidates:
            return DEVICE
        raise NotAvailableError(f'device "{name}" lists no CPU; irrun runs models on the CPU only '
                                f"(available devices: {DEVICE})")
    raise NotAvailableError(f'device "{name}" is not available: irrun runs models on the CPU only '
                            f'(available devices: {DEVICE}; use "CPU" or "AUTO")')


class Settings:
    """The properties in force for one compiled model: Core's defaults, then the call's config."""

    def __init__(self, *configs: Mapping[str, Any]):
        self.values = {key: default for key, (default, _) in _WRITABLE.items()}
        for config in configs:
            self.values.update(config)

    @property
    def precision(self) -> str:
        """irrun's load precision."""
        return self.values["IRRUN_PRECISION"]

    @property
    def threads(self) -> int | None:
        return self.values["INFERENCE_NUM_THREADS"] or None

    @property
    def profiling(self) -> bool:
        return self.values["PERF_COUNT"]

    def warn_precision(self) -> None:
        hint = self.values["INFERENCE_PRECISION_HINT"]
        if hint != Type.f32 and self.values["EXECUTION_MODE_HINT"] != ExecutionMode.ACCURACY:
            warnings.warn(f"INFERENCE_PRECISION_HINT={hint.get_type_name()}: irrun computes as OpenVINO's CPU plugin "
                          f"does at f32 (it cannot reproduce {hint.get_type_name()} kernels); results are "
                          f"OpenVINO's at INFERENCE_PRECISION_HINT=f32", RuntimeWarning, stacklevel=4)

    def optimal_requests(self) -> int:
        if self.values["PERFORMANCE_HINT"] == PerformanceMode.LATENCY:
            return 1
        streams = self.values["NUM_STREAMS"]
        n = streams if streams > 0 else (self.threads or current_threads())
        cap = self.values["PERFORMANCE_HINT_NUM_REQUESTS"]
        return max(1, min(n, cap) if cap else n)

    def compiled_property(self, key: str, model_name: str) -> Any:
        if key == "SUPPORTED_PROPERTIES":
            return {k: "RO" for k in _COMPILED_KEYS}
        if key == "NETWORK_NAME":
            return model_name
        if key == "OPTIMAL_NUMBER_OF_INFER_REQUESTS":
            return self.optimal_requests()
        if key == "INFERENCE_NUM_THREADS":
            return self.threads or current_threads()
        if key == "INFERENCE_PRECISION_HINT":
            return Type.f32
        if key == "EXECUTION_DEVICES":
            return [DEVICE]
        if key == "NUM_STREAMS":
            return self.values["NUM_STREAMS"] if self.values["NUM_STREAMS"] > 0 else self.optimal_requests()
        if key == "LOADED_FROM_CACHE":
            return False
        if key in _COMPILED_KEYS and key in self.values:
            return self.values[key]
        raise OVRuntimeError(f"Unsupported property: {key}")


_READ_ONLY = {
    "SUPPORTED_PROPERTIES", "AVAILABLE_DEVICES", "RANGE_FOR_ASYNC_INFER_REQUESTS", "RANGE_FOR_STREAMS",
    "EXECUTION_DEVICES", "FULL_DEVICE_NAME", "OPTIMIZATION_CAPABILITIES", "DEVICE_TYPE", "DEVICE_ARCHITECTURE",
    "NETWORK_NAME", "OPTIMAL_NUMBER_OF_INFER_REQUESTS", "LOADED_FROM_CACHE",
}
_COMPILED_KEYS = ("SUPPORTED_PROPERTIES", "NETWORK_NAME", "OPTIMAL_NUMBER_OF_INFER_REQUESTS", "NUM_STREAMS",
                  "INFERENCE_NUM_THREADS", "PERF_COUNT", "INFERENCE_PRECISION_HINT", "IRRUN_PRECISION",
                  "PERFORMANCE_HINT", "EXECUTION_MODE_HINT", "PERFORMANCE_HINT_NUM_REQUESTS", "EXECUTION_DEVICES",
                  "KV_CACHE_PRECISION", "DYNAMIC_QUANTIZATION_GROUP_SIZE", "LOG_LEVEL", "LOADED_FROM_CACHE")


def device_property(key: str, defaults: Mapping[str, Any]) -> Any:
    """`Core.get_property("CPU", key)`."""
    if key == "SUPPORTED_PROPERTIES":
        return {**{k: "RO" for k in sorted(_READ_ONLY - {"NETWORK_NAME", "OPTIMAL_NUMBER_OF_INFER_REQUESTS",
                                                         "LOADED_FROM_CACHE"})},
                **{k: "RW" for k in _WRITABLE}}
    if key == "AVAILABLE_DEVICES":
        return [""]
    if key == "RANGE_FOR_ASYNC_INFER_REQUESTS":
        return (1, available_cpus(), 1)
    if key == "RANGE_FOR_STREAMS":
        return (1, available_cpus())
    if key == "EXECUTION_DEVICES":
        return [DEVICE]
    if key == "FULL_DEVICE_NAME":
        return FULL_DEVICE_NAME
    if key == "OPTIMIZATION_CAPABILITIES":
        return ["FP32", "FP16", "INT8", "BIN"]
    if key == "DEVICE_TYPE":
        return DeviceType.INTEGRATED
    if key == "DEVICE_ARCHITECTURE":
        return "irrun"
    if key == "INFERENCE_NUM_THREADS":
        return defaults.get(key) or 0
    if key == "NUM_STREAMS":
        return defaults.get(key, 1)
    if key in _WRITABLE:
        return defaults.get(key, _WRITABLE[key][0])
    raise OVRuntimeError(f"Cannot get unsupported property: {key}")


def version_string() -> str:
    return f"irrun-{irrun_version}"
