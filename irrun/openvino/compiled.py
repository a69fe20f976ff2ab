"""`CompiledModel` and `AsyncInferQueue`.

A compiled model runs one loaded irrun model.  Requests of a model without variables share it
(an irrun Model runs calls from several threads at once).  A stateful model's requests each own
their variables, as in OpenVINO: the first request runs the compiled model's irrun model, every
other one an irrun model of its own, loaded again from the same source.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

import numpy as np

from .config import Settings
from .exceptions import OVRuntimeError, as_runtime_errors, not_available
from .graph import AddedOutput, ConstOutput, GraphView
from .model import Changes, Model, describe, find_port
from .request import InferRequest, OVDict, ProfilingInfo


class Backend:
    """One irrun model as a request runs it: inputs in order in, the compiled outputs in order out."""

    def __init__(self, irrun_model, added: list[AddedOutput]):
        self.model = irrun_model
        self.outputs = len(irrun_model.outputs)
        self.keys = [a.key for a in added]

    def run(self, arrays: list[np.ndarray], profiling: bool) -> tuple[list[np.ndarray], list]:
        with as_runtime_errors():
            if profiling:
                from ..watch import Timings
                timings = Timings()
                result = self.model.infer(arrays, watch=[timings])
                steps = timings.steps
            else:
                result, steps = self.model.infer(arrays), []
        # (by position: two outputs of one tensor share a name)
        return [result[i] for i in range(self.outputs)] + [result[key] for key in self.keys], steps

    def variables(self) -> list[str]:
        return list(self.model.state)

    @property
    def state(self) -> dict[str, np.ndarray]:
        return self.model.state

    def set_state(self, variable_id: str, value: np.ndarray) -> None:
        self.model.set_state(variable_id, value)

    def reset_state(self, variable_id: str | None = None) -> None:
        if variable_id is None:
            self.model.reset_state()
        else:
            self.model.reset_state(variable_id)


class CompiledModel:
    """A model ready to run on irrun's CPU: call it, or make requests."""

    def __init__(self, *args, **kwargs):
        raise not_available("CompiledModel(...) construction", "use Core.compile_model")

    @classmethod
    def _make(cls, model: Model, irrun_model, changes: Changes, settings: Settings) -> "CompiledModel":
        self = object.__new__(cls)
        self._source = model._source
        self._changes = changes
        self._irrun = irrun_model
        self._added = changes.added
        self._settings = settings
        self._profiling = settings.profiling
        self._view = GraphView(irrun_model, self._added, model._renamed.copy())
        self._inputs = [ConstOutput(self._view.node(pid), 0) for pid in self._view.parameters]
        self._outputs = [ConstOutput(self._view.node(rid), 0) for rid in self._view.results]
        self._name = model.get_friendly_name()
        self._lock = threading.Lock()
        self._backends_given = 0
        self._infer_request: InferRequest | None = None
        return self

    # ------------------------------------------------------------ requests
    def _backend(self) -> Backend:
        """The irrun model a new request runs: the compiled one, or for a stateful model's second
        and later requests a copy of its own."""
        with self._lock:
            first = self._backends_given == 0
            self._backends_given += 1
        if first or not self._irrun.stateful:
            return Backend(self._irrun, self._added)
        copy = self._source.load(self._settings.precision, self._settings.threads)
        self._changes.apply(copy)
        return Backend(copy, self._added)

    def create_infer_request(self) -> InferRequest:
        return InferRequest(self, self._backend())

    def _default_request(self) -> InferRequest:
        if self._infer_request is None:
            self._infer_request = self.create_infer_request()
        return self._infer_request

    def __call__(self, inputs: Any = None, share_inputs: bool = True, share_outputs: bool = False, *,
                 decode_strings: bool = True) -> OVDict:
        return self._default_request().infer(inputs, share_inputs=share_inputs, share_outputs=share_outputs,
                                             decode_strings=decode_strings)

    def infer_new_request(self, inputs: Any = None) -> OVDict:
        return self.create_infer_request().infer(inputs)

    def query_state(self) -> list:
        return self._default_request().query_state()

    def reset_state(self) -> None:
        self._default_request().reset_state()

    # ------------------------------------------------------------ ports
    @property
    def inputs(self) -> list[ConstOutput]:
        return list(self._inputs)

    @property
    def outputs(self) -> list[ConstOutput]:
        return list(self._outputs)

    def input(self, key: Any = None) -> ConstOutput:
        return _compiled_port(self._inputs, key, "input", "Input")

    def output(self, key: Any = None) -> ConstOutput:
        return _compiled_port(self._outputs, key, "output", "Output")

    # ------------------------------------------------------------ properties and the rest
    def get_property(self, key: str) -> Any:
        return self._settings.compiled_property(str(key), self._name)

    def set_property(self, properties: Any) -> None:
        raise OVRuntimeError("The compiled model's properties are read-only in irrun (set them at compile_model)")

    def get_runtime_model(self) -> Model:
        """The model as compiled: its ops in execution order, each with rt_info as OpenVINO's CPU
        plugin gives it (layerType, originalLayersNames, execOrder, runtimePrecision, ...)."""
        runtime = Model._open(self._source, self._irrun)
        runtime._changes = self._changes.copy()
        runtime._renamed = self._view.renamed.copy()
        runtime._view = RuntimeGraphView(self._irrun, self._added, runtime._renamed)
        runtime._shared = True
        runtime._frozen = True
        return runtime

    def export_model(self, *args) -> bytes:
        raise not_available("CompiledModel.export_model", "irrun compiles nothing to export; save the IR instead")

    def release_memory(self) -> None:
        """irrun keeps no scratch memory between inferences."""

    def __repr__(self) -> str:
        return describe("CompiledModel", self._name, self._inputs, self._outputs)


def _compiled_port(ports: list[ConstOutput], key: Any, kind: str, title: str) -> ConstOutput:
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool) and not 0 <= key < len(ports):
        raise OVRuntimeError(f"Cannot get {kind} for index: {key} {kind}s size is {len(ports)}")
    if key is None and len(ports) != 1:
        raise OVRuntimeError(f"{kind}() must be called on a CompiledModel with exactly one {kind} "
                             f"(this one has {len(ports)}).")
    return find_port(ports, key, kind, title, kind)


class RuntimeGraphView(GraphView):
    """The compiled model's graph, as `get_runtime_model()` shows it."""

    def rt_info(self, node_id: str) -> dict:
        node = self.node(node_id)
        order = self._exec_order()
        precisions = ",".join(node.get_output_element_type(i).get_type_name() for i in range(node.get_output_size()))
        return {"layerType": node.get_type_name(), "originalLayersNames": node.get_friendly_name(),
                "execOrder": str(order.get(node_id, -1)), "runtimePrecision": precisions.split(",")[0],
                "outputPrecisions": precisions, "primitiveType": "irrun", "execTimeMcs": "not_executed",
                "outputLayouts": ""}

    def _exec_order(self) -> dict[str, int]:
        if not hasattr(self, "_order"):
            self._order = {nid: i for i, nid in enumerate(self.ordered_ids())}
        return self._order


# ---------------------------------------------------------------------- async queue
class AsyncInferQueue:
    """A pool of requests run on threads: `start_async(inputs, userdata)` takes the next idle one;
    the callback `fn(request, userdata)` runs when it is done."""

    def __init__(self, model: CompiledModel, jobs: int = 0):
        if not isinstance(model, CompiledModel):
            raise TypeError(f"AsyncInferQueue takes a CompiledModel, not {type(model).__name__}")
        jobs = int(jobs) if jobs else model.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")
        self._requests = [model.create_infer_request() for _ in range(jobs)]
        self._userdata: list[Any] = [None] * jobs
        self._idle = list(range(jobs))
        self._condition = threading.Condition()
        self._callback: Callable | None = None
        self._errors: list[BaseException] = []
        for i, request in enumerate(self._requests):
            request._completion = lambda error, i=i: self._finished(i, error)

    def _finished(self, index: int, error: BaseException | None) -> None:
        try:
            if error is None and self._callback is not None:
                self._callback(self._requests[index], self._userdata[index])
        except BaseException as exc:  # noqa: BLE001 - raised again by wait_all / start_async
            error = exc
        finally:
            with self._condition:
                if error is not None:
                    self._errors.append(error)
                self._idle.append(index)
                self._condition.notify_all()

    def _raise_errors(self) -> None:
        with self._condition:
            errors, self._errors = self._errors, []
        if errors:
            raise errors[0]

    def set_callback(self, callback: Callable) -> None:
        self._callback = callback

    def start_async(self, inputs: Any = None, userdata: Any = None, share_inputs: bool = False) -> None:
        self._raise_errors()
        index = self.get_idle_request_id()
        with self._condition:
            self._idle.remove(index)
            self._userdata[index] = userdata
        request = self._requests[index]
        try:
            request.start_async(inputs, share_inputs=share_inputs)
        except BaseException:
            with self._condition:
                self._idle.append(index)
                self._condition.notify_all()
            raise

    def get_idle_request_id(self) -> int:
        with self._condition:
            self._condition.wait_for(lambda: self._idle)
            return self._idle[0]

    def is_ready(self) -> bool:
        with self._condition:
            return bool(self._idle)

    def wait_all(self) -> None:
        with self._condition:
            self._condition.wait_for(lambda: len(self._idle) == len(self._requests))
        self._raise_errors()

    @property
    def userdata(self) -> list:
        return list(self._userdata)

    def __len__(self) -> int:
        return len(self._requests)

    def __iter__(self):
        return iter(self._requests)

    def __getitem__(self, index: int) -> InferRequest:
        return self._requests[index]

    def __repr__(self) -> str:
        return f"<AsyncInferQueue: {len(self._requests)} jobs>"


__all__ = ["CompiledModel", "AsyncInferQueue", "ProfilingInfo"]
