"""`InferRequest` and what it hands out: `OVDict` results, `VariableState`, `ProfilingInfo`.

An InferRequest owns one tensor per input and per output, as OpenVINO's does: `infer(inputs)`
copies (or, with `share_inputs=True`, wraps) the given arrays into its input tensors, runs the
model, and writes the results into its output tensors, whose arrays stay the same objects while
their shape holds (a view taken before `infer` sees the new values).  Requests of a stateful
model each own their variables: every request but the compiled model's first runs on an irrun
model of its own (see `CompiledModel`).
"""
from __future__ import annotations

import datetime
import enum
import threading
import time
import warnings
from collections.abc import Mapping
from typing import Any, Callable

import numpy as np

from .exceptions import OVRuntimeError, as_runtime_errors
from .graph import ConstOutput, Output, _Port
from .tensor import Tensor
from .types import PartialShape, Type


# ---------------------------------------------------------------------- results
class OVDict(Mapping):
    """Inference results: indexed by output port (`ConstOutput`), position or tensor name.
    `to_dict()` gives the plain dict by port, `to_tuple()` the arrays in output order."""

    __slots__ = ("_dict", "_names", "__weakref__")

    def __init__(self, values: dict):
        self._dict = values
        self._names = None

    def __iter__(self):
        return iter(self._dict)

    def __len__(self) -> int:
        return len(self._dict)

    def __repr__(self) -> str:
        return repr(self._dict)

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, ConstOutput):
            return self._dict[key]
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            try:
                return self._dict[list(self._dict)[key]]
            except IndexError:
                raise KeyError(key) from None
        if isinstance(key, str):
            for port, names in zip(self._dict, self.names()):
                if key in names:
                    return self._dict[port]
            raise KeyError(key)
        raise TypeError(f"Unknown key type: {type(key)}")

    def keys(self):
        return self._dict.keys()

    def values(self):
        return self._dict.values()

    def items(self):
        return self._dict.items()

    def names(self) -> tuple[set[str], ...]:
        if self._names is None:
            self._names = tuple(port.get_names() for port in self._dict)
        return self._names

    def to_dict(self) -> dict:
        return self._dict

    def to_tuple(self) -> tuple:
        return tuple(self._dict.values())


# ---------------------------------------------------------------------- profiling
class ProfilingInfo:
    """One layer's time in the last inference (`InferRequest.get_profiling_info()`)."""

    class Status(enum.Enum):
        NOT_RUN = 0
        OPTIMIZED_OUT = 1
        EXECUTED = 2

        def __str__(self) -> str:
            return f"Status.{self.name}"

    NOT_RUN, OPTIMIZED_OUT, EXECUTED = Status.NOT_RUN, Status.OPTIMIZED_OUT, Status.EXECUTED

    def __init__(self, node_name: str = "", node_type: str = "", exec_type: str = "",
                 real_time: datetime.timedelta = datetime.timedelta(0), cpu_time: datetime.timedelta = None,
                 status: "ProfilingInfo.Status" = None):
        self.node_name = node_name
        self.node_type = node_type
        self.exec_type = exec_type
        self.real_time = real_time
        self.cpu_time = real_time if cpu_time is None else cpu_time
        self.status = ProfilingInfo.Status.NOT_RUN if status is None else status

    def __repr__(self) -> str:
        return "<ProfilingInfo>"


def profiling_infos(steps) -> list[ProfilingInfo]:
    """irrun's per-step timings (`irrun.watch.Timings`: every layer run, in order) as OpenVINO's
    per-node records, each EXECUTED, `exec_type` "irrun_<its output type>"; a layer run inside
    another's fused step (irrun/optimize.py) is OPTIMIZED_OUT with no time, as OpenVINO reports a
    node it fused into another."""
    infos = []
    for step in steps:
        layer = step.node.layer
        dtypes = [d for d in step.dtypes if d is not None]
        exec_type = f"irrun_{Type(dtypes[0]).get_type_name()}" if dtypes and _known_dtype(dtypes[0]) else "irrun"
        elapsed = datetime.timedelta(seconds=step.seconds)
        status = ProfilingInfo.Status.OPTIMIZED_OUT if step.fused_into else ProfilingInfo.Status.EXECUTED
        infos.append(ProfilingInfo(layer.name, layer.op_type or layer.type, exec_type, elapsed, elapsed, status))
    return infos


def _known_dtype(dtype) -> bool:
    try:
        Type(np.dtype(dtype))
        return True
    except Exception:  # noqa: BLE001 - a dtype OpenVINO has no element type for
        return False


# ---------------------------------------------------------------------- variables
class VariableState:
    """One variable of a stateful model (ReadValue/Assign), in one request."""

    def __init__(self, request: "InferRequest", variable_id: str):
        self._request = request
        self._id = variable_id

    @property
    def name(self) -> str:
        return self._id

    def get_name(self) -> str:
        return self._id

    def get_state(self) -> Tensor:
        """A copy of the value (writing into it changes nothing: set `state` to change the variable)."""
        value = self._request._backend.state[self._id]
        return Tensor._wrap(value, Type(value.dtype) if value.dtype != object else Type.string)

    def set_state(self, tensor: Any) -> None:
        if not isinstance(tensor, Tensor):
            raise TypeError(f"set_state takes a Tensor, not {type(tensor).__name__}")
        with as_runtime_errors():
            self._request._backend.set_state(self._id, tensor.data)

    state = property(get_state, set_state)

    def reset(self) -> None:
        with as_runtime_errors():
            self._request._backend.reset_state(self._id)

    def __repr__(self) -> str:
        return "<VariableState>"


# ---------------------------------------------------------------------- the request
class InferRequest:
    """Runs a compiled model: synchronously (`infer`) or on a thread of its own (`start_async`)."""

    def __init__(self, compiled, backend):
        self._compiled = compiled
        self._backend = backend            # irrun.openvino.compiled.Backend: one irrun model and its outputs
        self._inputs = [_empty_tensor(port) for port in compiled.inputs]
        self._outputs = [_empty_tensor(port) for port in compiled.outputs]
        self._lock = threading.Lock()
        self._busy = False
        self._done = threading.Event()
        self._done.set()
        self._error: BaseException | None = None
        self._callback: Callable | None = None
        self._userdata = None
        self._latency = 0.0
        self._profile: list = []
        self._completion: Callable | None = None     # set by an AsyncInferQueue

    # ------------------------------------------------------------ running
    def infer(self, inputs: Any = None, share_inputs: bool = False, share_outputs: bool = False, *,
              decode_strings: bool = True) -> OVDict:
        self._claim()
        try:
            self._dispatch(inputs, share_inputs)
            self._run()
        finally:
            self._release()
        return self._results(share_outputs, decode_strings)

    def start_async(self, inputs: Any = None, userdata: Any = None, share_inputs: bool = False) -> None:
        self._claim()
        try:
            self._dispatch(inputs, share_inputs)
        except BaseException:
            self._release()
            raise
        if userdata is not None and self._callback is None and self._completion is None:
            warnings.warn("There is no callback function!", RuntimeWarning, stacklevel=2)
        self._error = None
        self._done.clear()
        threading.Thread(target=self._run_async, name="irrun-infer-request", daemon=True).start()

    def _run_async(self) -> None:
        error = None
        try:
            self._run()
        except BaseException as exc:  # noqa: BLE001 - handed to wait() or to the queue
            error = exc
        if self._completion is not None:     # a request of an AsyncInferQueue: the queue takes it from here
            self._release()
            self._done.set()
            self._completion(error)
            return
        try:
            if error is None and self._callback is not None:
                self._callback(self._userdata)
        except BaseException as exc:  # noqa: BLE001 - handed to wait()
            error = exc
        finally:
            self._error = error
            self._release()
            self._done.set()

    def wait(self) -> None:
        self._done.wait()
        self._raise_error()

    def wait_for(self, timeout: int) -> bool:
        """Waits up to `timeout` milliseconds (-1: for ever); True when the request is done."""
        done = self._done.wait(None if timeout is None or timeout < 0 else timeout / 1000)
        if done:
            self._raise_error()
        return done

    def _raise_error(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error

    def cancel(self) -> None:
        """irrun cannot stop a running inference; it finishes."""

    def set_callback(self, callback: Callable, userdata: Any = None) -> None:
        self._callback, self._userdata = callback, userdata

    @property
    def userdata(self) -> Any:
        return self._userdata

    def _claim(self) -> None:
        with self._lock:
            if self._busy:
                raise OVRuntimeError("Infer Request is busy")
            self._busy = True

    def _release(self) -> None:
        with self._lock:
            self._busy = False

    def _run(self) -> None:
        start = time.perf_counter()
        values, self._profile = self._backend.run([t.data for t in self._inputs], self._compiled._profiling)
        for tensor, value in zip(self._outputs, values):
            _store(tensor, value)
        self._latency = (time.perf_counter() - start) * 1e3

    def _results(self, share_outputs: bool, decode_strings: bool) -> OVDict:
        out = {}
        for port, tensor in zip(self._compiled.outputs, self._outputs):
            value = tensor.data
            if value.dtype == object:
                value = np.array(value.tolist(), dtype=str if decode_strings else bytes).reshape(value.shape) \
                    if decode_strings else tensor.bytes_data
            elif not share_outputs:
                value = value.copy()
            out[port] = value
        return OVDict(out)

    @property
    def results(self) -> OVDict:
        return self._results(False, True)

    @property
    def latency(self) -> float:
        """The last inference's time in milliseconds."""
        return self._latency

    # ------------------------------------------------------------ inputs
    def _dispatch(self, inputs: Any, share: bool) -> None:
        if inputs is None:
            return
        ports = self._compiled.inputs
        if isinstance(inputs, (Tensor, np.ndarray, np.generic, int, float, str, bytes)) or \
                (not isinstance(inputs, (Mapping, list, tuple, OVDict)) and hasattr(inputs, "__array__")):
            self._set_value(self._single_input_index(), inputs, share)
            return
        if isinstance(inputs, OVDict):
            items = list(enumerate(inputs.values()))
        elif isinstance(inputs, Mapping):
            items = list(inputs.items())
        elif isinstance(inputs, list) and len(ports) == 1 and _simple_list(inputs):
            items = [(0, inputs)]
        elif isinstance(inputs, (list, tuple)):
            items = list(enumerate(inputs))
        else:
            raise TypeError(f"Incompatible inputs of type: {type(inputs)}")
        for key, value in items:
            if not isinstance(key, (str, int, np.integer, _Port)) or isinstance(key, bool):
                raise TypeError(f"Incompatible key type for input: {key}")
            kind, index = self._port_index(key)
            if kind == "output":
                self.set_output_tensor(index, value if isinstance(value, Tensor) else Tensor(np.asarray(value)))
            else:
                self._set_value(index, value, share)

    def _single_input_index(self) -> int:
        if len(self._inputs) != 1:
            raise OVRuntimeError("get_input_tensor() must be called on a function with exactly one parameter.")
        return 0

    def _set_value(self, index: int, value: Any, share: bool) -> None:
        if isinstance(value, Tensor):
            self.set_input_tensor(index, value)
            return
        if not isinstance(value, (np.ndarray, np.generic, int, float, str, bytes, list)) and not hasattr(value, "__array__"):
            raise TypeError(f"Incompatible inputs of type: {type(value)} under {index} key!")
        port = self._compiled.inputs[index]
        t = port.get_element_type()
        if t == Type.string:
            self._check_fits(index, np.shape(value), "input")
            self._inputs[index] = Tensor(np.asarray(value))
            return
        array = np.asarray(value)
        if array.dtype.kind in "USO":
            raise OVRuntimeError(f"input {port.get_any_name() if port.get_names() else index} is "
                                 f"{t.get_type_name()}: cannot convert {array.dtype} values to it")
        carrier = t.etype.carrier
        if array.ndim == 0 and port.get_partial_shape().rank.is_static and len(port.get_partial_shape()) > 0:
            array = array.reshape([1] * len(port.get_partial_shape()))
        self._check_fits(index, array.shape, "input")
        if share and array.dtype == carrier and array.flags.c_contiguous and array.flags.writeable:
            self._inputs[index] = Tensor._wrap(array, t)
        else:
            tensor = self._inputs[index]
            if tensor.data.dtype != carrier or not tensor.data.flags.writeable:
                tensor = self._inputs[index] = _empty_tensor(port)
            tensor.shape = array.shape
            tensor.data[...] = array.astype(carrier, copy=False)

    def _port_index(self, key: Any) -> tuple[str, int]:
        """("input" | "output", index) of a key: an input index, a tensor name, or a port."""
        if isinstance(key, (int, np.integer)):
            if not 0 <= key < len(self._inputs):
                raise OVRuntimeError(f"Cannot find the input of index {key}: the model has "
                                     f"{len(self._inputs)} input{'s' if len(self._inputs) != 1 else ''}")
            return "input", int(key)
        for kind, ports in (("input", self._compiled.inputs), ("output", self._compiled.outputs)):
            for i, port in enumerate(ports):
                if (isinstance(key, str) and key in port.get_names()) or \
                        (isinstance(key, _Port) and (key == port or (key.get_names() and key.get_names() == port.get_names()
                                                                      and isinstance(key, Output) == (kind == "input")))):
                    return kind, i
        if isinstance(key, str):
            raise OVRuntimeError(f"Port for tensor name {key} was not found.")
        raise OVRuntimeError(f"Port {key!r} was not found.")

    def _check_fits(self, index: int, shape, kind: str) -> None:
        port = (self._compiled.inputs if kind == "input" else self._compiled.outputs)[index]
        partial = port.get_partial_shape()
        if not partial.compatible(PartialShape(list(shape))):
            raise OVRuntimeError(f"Can't set the {kind} tensor with index: {index}, because the model {kind} "
                                 f"(shape={partial}) and the tensor (shape=({'.'.join(map(str, shape))})) are "
                                 f"incompatible")

    def _check_type(self, index: int, tensor: Tensor, kind: str) -> None:
        port = (self._compiled.inputs if kind == "input" else self._compiled.outputs)[index]
        if tensor.element_type != port.get_element_type():
            raise OVRuntimeError(f"ParameterMismatch: Failed to set tensor for {kind} with precision: "
                                 f"{tensor.element_type.get_type_name()}, since the model {kind} tensor precision "
                                 f"is: {port.get_element_type().get_type_name()}")

    # ------------------------------------------------------------ tensors
    def get_tensor(self, key: Any) -> Tensor:
        if not isinstance(key, (str, _Port)):
            raise TypeError(f"get_tensor() takes a tensor name or a port, not {type(key).__name__}")
        kind, index = self._port_index(key)
        return (self._inputs if kind == "input" else self._outputs)[index]

    def set_tensor(self, key: Any, tensor: Tensor) -> None:
        if not isinstance(key, (str, _Port)):
            raise TypeError(f"set_tensor() takes a tensor name or a port, not {type(key).__name__}")
        kind, index = self._port_index(key)
        (self.set_input_tensor if kind == "input" else self.set_output_tensor)(index, tensor)

    def set_tensors(self, tensors: Mapping) -> None:
        for key, tensor in tensors.items():
            self.set_tensor(key, tensor)

    def get_input_tensor(self, index: int | None = None) -> Tensor:
        if index is None:
            return self._inputs[self._single_input_index()]
        return self._inputs[self._port_index(int(index))[1]]

    def get_output_tensor(self, index: int | None = None) -> Tensor:
        if index is None:
            if len(self._outputs) != 1:
                raise OVRuntimeError("get_output_tensor() must be called on a function with exactly one result.")
            index = 0
        if not 0 <= index < len(self._outputs):
            raise OVRuntimeError(f"Cannot find the output of index {index}: the model has {len(self._outputs)} "
                                 f"output{'s' if len(self._outputs) != 1 else ''}")
        return self._outputs[index]

    def set_input_tensor(self, *args) -> None:
        index, tensor = (self._single_input_index(), args[0]) if len(args) == 1 else (self._port_index(int(args[0]))[1], args[1])
        if not isinstance(tensor, Tensor):
            raise TypeError(f"set_input_tensor takes a Tensor, not {type(tensor).__name__}")
        self._check_type(index, tensor, "input")
        self._check_fits(index, tuple(tensor.shape), "input")
        self._inputs[index] = tensor

    def set_output_tensor(self, *args) -> None:
        if len(args) == 1:
            if len(self._outputs) != 1:
                raise OVRuntimeError("set_output_tensor() must be called on a function with exactly one result.")
            index, tensor = 0, args[0]
        else:
            index, tensor = int(args[0]), args[1]
            if not 0 <= index < len(self._outputs):
                raise OVRuntimeError(f"Cannot find the output of index {index}")
        if not isinstance(tensor, Tensor):
            raise TypeError(f"set_output_tensor takes a Tensor, not {type(tensor).__name__}")
        self._check_type(index, tensor, "output")
        if tensor.size:
            self._check_fits(index, tuple(tensor.shape), "output")
        self._outputs[index] = tensor

    def set_input_tensors(self, tensors: Any) -> None:
        items = tensors.items() if isinstance(tensors, Mapping) else enumerate(tensors)
        for key, tensor in items:
            self.set_input_tensor(key, tensor)

    def set_output_tensors(self, tensors: Mapping) -> None:
        for key, tensor in tensors.items():
            self.set_output_tensor(key, tensor)

    @property
    def input_tensors(self) -> list[Tensor]:
        return list(self._inputs)

    @property
    def output_tensors(self) -> list[Tensor]:
        return list(self._outputs)

    @property
    def model_inputs(self) -> list[ConstOutput]:
        return self._compiled.inputs

    @property
    def model_outputs(self) -> list[ConstOutput]:
        return self._compiled.outputs

    def get_compiled_model(self):
        return self._compiled

    # ------------------------------------------------------------ state and profiling
    def query_state(self) -> list[VariableState]:
        return [VariableState(self, vid) for vid in self._backend.variables()]

    def reset_state(self) -> None:
        self._backend.reset_state()

    def get_profiling_info(self) -> list[ProfilingInfo]:
        """Each layer's time in the last inference (with PERF_COUNT / props.enable_profiling); without
        it, every layer NOT_RUN with no time, as OpenVINO reports it."""
        if self._compiled._profiling:
            return profiling_infos(self._profile)
        return [ProfilingInfo(node.get_friendly_name(), node.get_type_name(), "undef")
                for node in self._compiled._view.ordered_nodes() if node.get_type_name() != "Constant"]

    profiling_info = property(get_profiling_info)

    def __repr__(self) -> str:
        from .model import describe
        return describe("InferRequest", "", self._compiled.inputs, self._compiled.outputs)


def _simple_list(values: list) -> bool:
    return all(isinstance(v, (str, float, int, bytes)) or
               (isinstance(v, list) and all(isinstance(x, (str, float, int, bytes)) for x in v)) for v in values)


def _empty_tensor(port) -> Tensor:
    """A request's tensor before any input: zeros of the port's shape, dynamic dims 0."""
    partial = port.get_partial_shape()
    shape = [] if not partial.rank.is_static else [d.get_length() if d.is_static else 0 for d in partial]
    t = port.get_element_type()
    if t == Type.string:
        return Tensor._wrap(np.full(shape, "", dtype=object), t)
    if t.is_dynamic():
        return Tensor._wrap(np.zeros(shape, np.float32), Type.f32)
    return Tensor(t, shape)


def _store(tensor: Tensor, value: np.ndarray) -> None:
    """An output into the request's tensor: into its array where shape and dtype allow (views of it
    stay valid, as in OpenVINO), else the tensor takes the new array."""
    array = tensor.data
    if array.shape == value.shape and array.dtype == value.dtype and array.flags.writeable and value.dtype != object:
        np.copyto(array, value)
    else:
        tensor._array = value
