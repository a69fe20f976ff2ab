"""The public API: `load`, `Model.infer`, `validate`."""
from __future__ import annotations

import gc
import threading
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from .allocator import keep_freed_memory
from .compressed_products import check_mode as check_compressed_weights
from .analysis import Analysis, LoadContext, analyze
from .diagnostics import Diagnostic, Diagnostics
from .errors import (DeclaredValuesWarning, InputError, IrrunError, LayerRef, ModelError, UnreadableFileError,
                     UnsupportedError, UsageError)
from . import etypes
from .etypes import ElementType
from .executor import Plan
from .fingerprint import ModelSource, fingerprint_bytes, fingerprint_files
from .ir import IRDocument, Layer, parse_document, v10_interface_type
from .optimize import optimize_default
from .precision import check_precision, prepare
from .registry import TensorType
from .results import Results
from .shapes import Dim, Shape, format_shape
from .threads import set_threads, threads as current_threads
from .watch import Collect, Timings, Watcher, split_key, tensor_key
from .weights import Weights


@dataclass(frozen=True)
class PortInfo:
    """A model input or output as OpenVINO reports it."""

    name: str                     # the name irrun keys it by
    names: tuple[str, ...]        # every tensor name
    shape: Shape
    element_type: ElementType
    layer: LayerRef

    def __repr__(self):
        return f"<{self.name} {format_shape(self.shape)} {self.element_type}>"


def _open_weights(xml: Path, diags: Diagnostics, needed: bool, data: bytes | None = None) -> Weights | None:
    """The .bin beside `xml`, or `data` (the weights held in memory, for `load_bytes`)."""
    bin_path = xml.with_suffix(".bin")
    if data is not None and (len(data) or not needed):
        return Weights(bin_path, data)
    if data is not None or not bin_path.exists():
        if needed:
            missing = "no weights were given" if data is not None else f"{bin_path.name} is missing"
            diags.error("E-BIN-MISSING", f"the model has Const layers but {missing}")
        return None
    try:
        return Weights(bin_path)
    except OSError as exc:
        diags.error("E-BIN-MISSING", f"cannot read {bin_path.name}: {exc.strerror or exc}")
        return None


@contextmanager
def _no_cyclic_gc():
    """Reading an IR makes millions of objects (layers, ports, types) that all stay alive:
    the cyclic garbage collector would walk them again and again and free nothing
    (about a third of the time of `validate` at 20,000 layers).  Reference counting
    still frees everything else."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _document_and_analysis(path: str | Path, memory: tuple[bytes, bytes | None] | None = None
                           ) -> tuple[IRDocument, Analysis, Weights | None]:
    with _no_cyclic_gc():
        document = parse_document(path, memory[0] if memory else None)
        has_consts = any(l.op_type == "Constant" for l in document.graph.layers.values())
        weights = None if document.snippet else _open_weights(document.path, document.diagnostics, has_consts,
                                                              memory[1] if memory else None)
        analysis = analyze(document, LoadContext(str(document.path), weights))
    return document, analysis, weights


def _unsupported_layers(analysis: Analysis) -> list[Layer]:
    """Live layers of known types that irrun cannot run, sub-graph bodies included."""
    found = []
    for lid, node in analysis.nodes.items():
        if lid not in analysis.live:
            continue
        if node.op is None and node.layer.op_type is not None:
            found.append(node.layer)
        for body in node.bodies.values():
            found += _unsupported_layers(body)
    return found


def _tensor_type(analysis: Analysis, layer: Layer) -> TensorType:
    node = analysis.nodes[layer.id]
    t = node.types[0] if node.types else None
    return t if t is not None else TensorType(None, etypes.dynamic)   # (a graph with a cycle is not inferred)


def input_port(analysis: Analysis, layer: Layer) -> PortInfo:
    """A Parameter as OpenVINO reports the model input it is."""
    t = _tensor_type(analysis, layer)
    names = layer.outputs[0].names if layer.outputs else ()
    if analysis.document.version == 10:
        names = tuple(dict.fromkeys((*names, layer.name)))
    return PortInfo(names[0] if names else layer.name, names, t.shape,
                    v10_interface_type(t.etype, output=False) if analysis.document.version == 10 else t.etype, layer.ref)


def output_port(analysis: Analysis, layer: Layer) -> PortInfo:
    """A Result as OpenVINO reports the model output it is."""
    t = _tensor_type(analysis, layer)
    node = analysis.nodes[layer.id]
    source = node.inputs[0] if node.inputs else None
    producer = analysis.document.graph.layers[source[0]] if source is not None else None
    port_names = producer.outputs[source[1]].names if producer and source[1] < len(producer.outputs) else ()
    if analysis.document.version == 10 and producer is not None:
        legacy = producer.name if len(producer.outputs) == 1 else f"{producer.name}.{source[1]}"
        port_names = tuple(dict.fromkeys((*port_names, legacy)))
    names = layer.output_names if layer.output_names else port_names
    name = names[0] if names else layer.name
    etype = v10_interface_type(t.etype, output=True) if analysis.document.version == 10 else t.etype
    return PortInfo(name, tuple(names) or (layer.name,), t.shape, etype, layer.ref)


# Contradictions between declared and inferred port values: OpenVINO ignores the declared ones and runs.
OVERRIDABLE = ("E-DECLARED-SHAPE", "E-DECLARED-TYPE")


def _declared_values_overridden(overridden: list, file: str) -> None:
    first = overridden[0]
    where = f"{first.layer.describe()}: " if first.layer else ""
    more = f" and {len(overridden) - 1} more" if len(overridden) > 1 else ""
    warnings.warn(DeclaredValuesWarning(
        f"{file}: declared port shapes or precisions contradict inference ({where}{first.message}{more}); "
        f"running with the inferred ones, as OpenVINO does (`irrun validate {file}` lists them)"), stacklevel=4)


class Model:
    """A loaded IR, ready to run.  Use `irrun.load(path)`.

    Threads may share one Model: each call keeps its tensors to itself, so calls on a model
    without variables run concurrently (NumPy releases the GIL in its kernels); calls on a
    stateful model (ReadValue/Assign) take turns, each seeing the state the previous one left.
    A Model pickles as its file paths and options and loads again where it is unpickled,
    refusing files whose contents differ from those loaded here; variables start afresh there.
    """

    def __init__(self, path: str | Path, *, max_memory: int | None = None, threads: int | None = None,
                 precision: str = "f32", strict: bool = False, memory: tuple[bytes, bytes | None] | None = None,
                 optimize: bool | None = None, compressed_weights: str = "auto"):
        check_precision(precision)
        self.optimize = optimize_default() if optimize is None else bool(optimize)
        self.compressed_weights = check_compressed_weights(compressed_weights)
        if compressed_weights == "keep" and not self.optimize:
            raise UsageError('compressed_weights="keep" needs the optimizer: without it every weight is '
                             'decompressed, layer by layer')
        # Process-wide, like OpenBLAS's own count: set before anything runs (constant folding too).
        set_threads(threads) if threads is not None else current_threads()
        document, analysis, weights = _document_and_analysis(path, memory)
        errors = analysis.diagnostics.errors
        overridden = [] if strict else [d for d in errors if d.code in OVERRIDABLE]
        if overridden:
            errors = [d for d in errors if d.code not in OVERRIDABLE]
        if document.snippet:
            raise UsageError("is a single-layer snippet: it can be validated but not run", file=str(path))
        unsupported = _unsupported_layers(analysis)
        if unsupported and not errors:
            first = unsupported[0]
            others = sorted({l.label for l in unsupported} - {first.label})
            more = f" (also unsupported: {', '.join(others)})" if others else ""
            raise UnsupportedError(f"{first.label} is not supported by irrun yet (see `irrun ops`){more}",
                                   file=str(document.path), layer=first.ref)
        if errors:
            first = errors[0]
            more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''}; "\
                   f"run `irrun validate` to see all)" if len(errors) > 1 else ""
            raise ModelError(first.message + more, file=first.file, line=first.line, layer=first.layer,
                             code=first.code)
        if overridden:
            _declared_values_overridden(overridden, str(document.path))
        self.path = document.path
        self.max_memory = max_memory
        self.strict = strict
        self._source = ModelSource(document.path)
        self._memory = memory            # (xml, weights) of a model `load_bytes` read
        # Calls on a stateful model are a sequence: one at a time (see the class docstring).
        self._turn = threading.RLock()
        self.weights = weights
        self.name = document.name
        self.ir_version = document.version
        self.rt_info = document.rt_info
        self._precision = precision
        self._added: dict[tuple[str, int], str] = {}     # add_outputs: (layer id, port) -> key
        self._reshaped: dict[str, str] = {}               # reshape: input name -> shape, for pickles
        keep_freed_memory()
        self._adopt(document, analysis)

    def _adopt(self, document: IRDocument, analysis: Analysis) -> None:
        """Take on an analysed document: ports, names and the plan (at load and after a reshape)."""
        self.document = document
        self.analysis = analysis
        self.layers = document.graph.layers
        params = document.graph.layers_of_type("Parameter")
        results = document.graph.layers_of_type("Result")
        self.inputs = [self._input_info(l) for l in params]
        self.outputs = [self._output_info(l) for l in results]
        self._parameters = params
        self._input_lookup: dict[str, int] = {}
        for i, (info, layer) in enumerate(zip(self.inputs, params)):
            for key in (*info.names, layer.name):
                self._input_lookup.setdefault(key, i)
        weights = self.weights
        # A constant only folding reads (an f16 weight, once decompressed) leaves memory as it is dropped.
        with _no_cyclic_gc():
            self._execution = prepare(analysis, self._precision, retyping=lambda: _KnownValues(
                (analysis,), None).forget_all_but(_held_values(analysis, "Constant")))
            self.precision = self._execution.precision
            known = _KnownValues((analysis, self._execution.analysis),
                                 weights.release if weights is not None else None)
            known.forget_all_but(_held_values(self._execution.analysis), only=analysis)
            self._plan = Plan(self._execution.analysis, [l.id for l in results], [l.id for l in params],
                              self.max_memory, release=known.release, read_constant=self._execution.read_constant,
                              optimize=self.optimize, compressed_weights=self.compressed_weights)
            known.forget_all_but(self._plan.constants.values())
        if self._execution.analysis is not analysis:
            self._plan.report = self._reported
        self.__dict__.pop("graph", None)      # (its labels carry the inferred shapes)

    def _reported(self, node, port: int, value: np.ndarray) -> np.ndarray:
        """A layer output in the type the IR declares (the plan may compute it in another)."""
        types = self.analysis.nodes[node.id].types
        t = types[port] if port < len(types) else None
        return value if t is None or t.etype.carrier is None else self._execution.output(value, t.etype)

    def reshape(self, shapes: Mapping[Any, Any]) -> None:
        """New input shapes, as OpenVINO's `Model.reshape`: `{"x": [2, 3, 320, 320]}` (by input name,
        Parameter name or index; -1 or "?" makes a dim dynamic, "1..8" an interval).  Every shape is
        inferred again; a shape the model cannot take raises ModelError naming the layer.  Variables
        (ReadValue/Assign) start again from their initial values."""
        from .reshape import reshaped_analysis
        self._adopt(*reshaped_analysis(self, shapes))
        self._reshaped = {info.name: format_shape(info.shape) for info in self.inputs}

    @cached_property
    def graph(self):
        """The layers as a networkx MultiDiGraph, built on first use: node = layer id with its labels
        (name, type, version, opset, line, attributes); edge attrs out_port, in_port, line, and the
        inferred shape and element_type of the tensor (see irrun/graph_export.py)."""
        from .graph_export import annotated_graph
        return annotated_graph(self.analysis, bodies=False)

    # ------------------------------------------------------------ naming
    def _input_info(self, layer: Layer) -> PortInfo:
        return input_port(self.analysis, layer)

    def _output_info(self, layer: Layer) -> PortInfo:
        return output_port(self.analysis, layer)

    def __repr__(self):
        return f"<irrun.Model {self.name!r}: inputs {self.inputs}, outputs {self.outputs}>"

    # ------------------------------------------------------------ running
    def _feeds(self, inputs: Any) -> dict[str, np.ndarray]:
        file = str(self.path)
        if type(inputs) is dict or isinstance(inputs, Mapping):   # (the ABC's check alone took 1.4 us)
            given: dict[int, Any] = {}
            for key, value in inputs.items():
                index = self._input_lookup.get(key) if isinstance(key, str) else \
                    key if isinstance(key, int) and 0 <= key < len(self.inputs) else None
                if index is None:
                    known = ", ".join(repr(i.name) for i in self.inputs)
                    raise InputError(f"unknown input {key!r}; the model's inputs are {known}", file=file)
                if index in given:
                    raise InputError(f"input {self.inputs[index].name!r} given twice", file=file)
                given[index] = value
        elif isinstance(inputs, (list, tuple)):
            if len(inputs) != len(self.inputs):
                raise InputError(f"got {len(inputs)} inputs, the model takes {len(self.inputs)} "
                                 f"({', '.join(i.name for i in self.inputs)})", file=file)
            given = dict(enumerate(inputs))
        else:
            if len(self.inputs) != 1:
                raise InputError(f"a single array was given, but the model takes {len(self.inputs)} inputs "
                                 f"({', '.join(i.name for i in self.inputs)}); pass a dict or a list", file=file)
            given = {0: inputs}
        missing = [self.inputs[i].name for i in range(len(self.inputs)) if i not in given]
        if missing:
            raise InputError(f"missing input{'s' if len(missing) > 1 else ''}: {', '.join(missing)}", file=file)
        feed = self._execution.feed
        return {self._parameters[i].id: feed(self._parameters[i].id, self._check_input(self.inputs[i], value))
                for i, value in given.items()}

    def _check_input(self, info: PortInfo, value: Any) -> np.ndarray:
        file = str(self.path)
        etype = info.element_type
        try:
            array = np.asarray(value)
        except Exception as exc:  # noqa: BLE001
            raise InputError(f"input {info.name!r}: cannot make an array of {type(value).__name__}: {exc}",
                             file=file) from None
        want = etype.carrier
        if etype.kind == "string":
            array = _string_array(info.name, array, file)
        elif array.dtype == object or want is None:
            raise InputError(f"input {info.name!r}: arrays of {array.dtype} are not supported", file=file)
        elif array.dtype != want or (etype.is_integral and etype.bits < 8 * want.itemsize):
            # Like OpenVINO's Python API, convert where no value class changes
            # (f64 -> f32, int -> float, any integer -> any integer type that holds its values);
            # refuse float -> int and the like.
            if not np.can_cast(array.dtype, want, casting="same_kind") and \
                    not (etype.is_integral and array.dtype.kind in "iub"):
                raise InputError(f"input {info.name!r} expects {etype} ({want}), got {array.dtype}; irrun does "
                                 f"not convert where values would change class (convert it explicitly)",
                                 file=file)
            _check_integer_range(info.name, etype, array, file)
            array = array.astype(want)
        shape = info.shape
        if shape is not None:
            if array.ndim != len(shape):
                raise InputError(f"input {info.name!r} expects rank {len(shape)} {format_shape(shape)}, "
                                 f"got shape {list(array.shape)}{_reshape_hint(info, array)}", file=file)
            for i, (d, n) in enumerate(zip(shape, array.shape)):
                if (isinstance(d, int) and d != n) or (isinstance(d, Dim) and not d.contains(n)):
                    raise InputError(f"input {info.name!r} expects shape {format_shape(shape)}, got "
                                     f"{list(array.shape)} (dim {i}: {n} is not {d}){_reshape_hint(info, array)}",
                                     file=file)
        return array

    def infer(self, inputs: Any, *, intermediates: bool | str = False, bodies: bool = False,
              profile: list | None = None, watch=()) -> Results:
        """Run the model.  `inputs`: dict by name, list in input order, or one array.  The result maps
        output names to arrays in output order; `result[0]` is the first output (irrun/results.py).

        Returns the outputs by name, then the tensors `add_outputs` asked for, then with
        `intermediates=True` every layer output keyed "<layer name>:<output index>" in
        topological order (Parameters included; Constants too with `intermediates="all"`), and
        with `bodies=True` as well the outputs of the layers inside Loop, TensorIterator and If
        bodies, per iteration (see irrun/watch.py for the key form).  `watch`: more
        `irrun.watch.Watcher`s to run.  With `profile=[]`, (layer, seconds) is appended to it for
        every layer run.
        """
        if intermediates not in (False, True, "all"):
            raise UsageError(f'intermediates must be False, True or "all", not {intermediates!r}')
        if bodies and not intermediates:
            raise UsageError("bodies=True shows the layers inside bodies along with every other layer: "
                             "pass intermediates=True too")
        feeds = self._feeds(inputs)
        if self.weights is not None:
            self.weights.check_unchanged()
        watchers = [watch] if isinstance(watch, Watcher) else list(watch) if watch else []
        added = every = timings = None
        if self._added:
            added = Collect(frozenset(lid for lid, _ in self._added), True, ports=self._added)
            watchers.append(added)
        if intermediates:
            every = Collect(None, intermediates == "all", bodies)
            watchers.append(every)
        if profile is not None:
            timings = Timings()
            watchers.append(timings)
        context = self.analysis.context
        if not context.variables:
            values = self._plan.run(feeds, tuple(watchers))
        else:
            with self._turn:
                context.assigned.clear()
                try:
                    values = self._plan.run(feeds, tuple(watchers))
                    # Assigns take effect together once the call succeeds: every ReadValue
                    # of this call saw the values from before it.
                    context.state.update(context.assigned)
                finally:
                    context.assigned.clear()
        if timings is not None:
            profile.extend((t.node.layer, t.seconds) for t in timings.steps)
        out = Results()
        # (arrays the call hands out must alias nothing the model keeps, nor one another)
        kept = list(feeds.values()) + list(context.state.values())
        roots = self._plan.constant_roots
        positions = []
        for info, value in zip(self.outputs, values):
            value = _own(self._execution.output(value, info.element_type), kept, roots)
            out.setdefault(info.name, value)
            positions.append(value)
            kept.append(value)
        out.outputs = len(out)
        out.positions = positions
        if added is not None:       # in the order they were asked for, as OpenVINO appends them
            for key in self._added.values():
                if key in added.values and key not in out:
                    out[key] = value = _own(added.values[key], kept, roots)
                    kept.append(value)
        if every is not None:
            kept = list(feeds.values())
            for key, value in every.values.items():
                out.setdefault(key, _own(value, kept))
        return out

    def add_outputs(self, names) -> list[str]:
        """Keep these tensors too, as OpenVINO's `Model.add_outputs` does: later `infer` calls
        return them beside the outputs.  `names`: layer names (every output of the layer; a
        Result: the tensor it takes), "layer:port" keys, tensor names or (layer name, port) pairs,
        resolved as `irrun extract` resolves them.  Returns their keys."""
        from .extraction import resolve_tensors
        keyed = self._plan.key_names
        own = {name: lid for lid, name in keyed.items() if name != self.layers[lid].name}   # "name#id"
        found: dict[tuple[str, int], str] = {}
        for item in [names] if isinstance(names, (str, tuple)) else names:
            if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], int):
                item = f"{item[0]}:{item[1]}"
            if not isinstance(item, str):
                raise UsageError(f"add_outputs takes layer names, 'name:port' keys, tensor names or (name, port) "
                                 f"pairs, not {item!r}")
            base, port = split_key(item)
            if base in own:
                layer = self.layers[own[base]]
                tensors = [(layer, p) for p in (range(len(layer.outputs)) if port is None else [port])]
            else:
                if sum(l.name == base for l in self.layers.values()) > 1:
                    ways = ", ".join(repr(n) for lid, n in keyed.items() if self.layers[lid].name == base)
                    raise UsageError(f"add_outputs: several layers are named {base!r}; name one of {ways}")
                tensors = [(t.layer, t.index) for t in resolve_tensors(self.document.graph, item, what="add_outputs")]
            for layer, p in tensors:
                if not 0 <= p < len(layer.outputs):
                    raise UsageError(f'add_outputs "{item}": {layer.ref.describe()} has {len(layer.outputs)} outputs')
                if layer.id not in self.analysis.live and layer.op_type != "Parameter":
                    raise UsageError(f"add_outputs: {layer.ref.describe()} does not reach any Result, so it is never "
                                     f"computed")
                found[layer.id, p] = tensor_key(keyed[layer.id], p)
        self._added.update(found)
        return list(found.values())

    __call__ = infer

    # ------------------------------------------------------------ variables (ReadValue / Assign)
    @property
    def state(self) -> dict[str, np.ndarray]:
        """Each variable's current value by variable_id, like OpenVINO's `InferRequest.query_state()`:
        what the last Assign stored, or zeros of the variable's shape before that (dynamic dims 0)."""
        context = self.analysis.context
        with self._turn:
            return {vid: np.array(context.state[vid]) if vid in context.state else reader.reset_value()
                    for vid, reader in context.variables.items()}

    @property
    def stateful(self) -> bool:
        """Whether the model has variables (ReadValue/Assign) that carry values from call to call."""
        return bool(self.analysis.context.variables)

    def reset_state(self, variable_id: str | None = None) -> None:
        """Forget every variable's value (or only `variable_id`'s), like `InferRequest.reset_state()`
        (`VariableState.reset()`): the next call starts from the initializing values again."""
        state = self.analysis.context.state
        with self._turn:
            if variable_id is None:
                state.clear()
            else:
                self._variable(variable_id)
                state.pop(variable_id, None)

    def set_state(self, variable_id: str, value: Any) -> None:
        """Give a variable a value, like OpenVINO's `VariableState.state = tensor`: the next call's
        ReadValue reads it.  The value must fit the variable's type and shape."""
        reader = self._variable(variable_id)
        variable = reader.variable
        array = np.array(value, dtype=variable.etype.carrier if variable.etype.carrier is not None else None)
        if variable.shape is not None and (array.ndim != len(variable.shape) or
                                           not all(d.contains(n) if isinstance(d, Dim) else d == n
                                                   for d, n in zip(variable.shape, array.shape))):
            raise InputError(f"variable {variable_id!r} is {format_shape(variable.shape)}, got shape "
                             f"{list(array.shape)}", file=str(self.path))
        array.flags.writeable = False     # (ReadValue hands it out as Assign's values are: read-only)
        with self._turn:
            self.analysis.context.state[variable_id] = array

    def _variable(self, variable_id: str):
        reader = self.analysis.context.variables.get(variable_id)
        if reader is None:
            known = ", ".join(repr(v) for v in self.analysis.context.variables) or "none"
            raise InputError(f"no variable {variable_id!r}; the model's variables: {known}", file=str(self.path))
        return reader

    @contextmanager
    def sequence(self):
        """`with model.sequence():` a run of calls that belong together, from this thread: the
        variables start from their initializing values, and other threads' calls on this
        stateful model wait until the block ends."""
        with self._turn:
            self.reset_state()
            yield self

    # ------------------------------------------------------------ pickling
    def fingerprint(self) -> str:
        """A digest of the loaded `.xml` and `.bin` (see irrun/fingerprint.py); refuses files
        that changed since the model was loaded."""
        if self._memory is not None:
            return fingerprint_bytes(*self._memory)
        return self._source.fingerprint()

    def options(self) -> dict:
        """What `load` was given that decides the results (a pickle carries them; threads are the
        receiving process's own)."""
        return {"max_memory": self.max_memory, "precision": self.precision, "strict": self.strict,
                "optimize": self.optimize, "compressed_weights": self.compressed_weights}

    def __reduce__(self):
        edits = {"shapes": self._reshaped, "outputs": list(self._added.values())}
        if self._memory is not None:     # a model read from memory travels as its bytes
            return _unpickle_bytes, (self._memory[0], bytes(self._memory[1]), self.path.stem, self.options(), edits)
        return _unpickle_model, (str(self._source.xml), self.options(), self.fingerprint(), edits)

    def close(self):
        if self.weights is not None:
            self.weights.close()

    # ------------------------------------------------------------ writing
    def save(self, path: str | Path, *, force: bool = False) -> Path:
        """Write the model as loaded (declared shapes and types) to `path` (.xml) and the `.bin`
        beside it, as IR v11 in the form `openvino.save_model` writes; IR v10 becomes v11.  After
        `reshape` the ports have their new dims, after `add_outputs` the tensors are Results
        (irrun/changed.py).  Refuses to overwrite the model's own files unless `force`.  Returns
        the .xml path."""
        from .writer import save
        return save(self, path, force=force)

    def extract(self, path: str | Path, *, outputs: list[str], inputs: list[str] = (), force: bool = False) -> Path:
        """Write the part of the model that computes `outputs` (layer names, `layer:index`, or tensor
        names) as a standalone IR at `path`; the tensors named in `inputs` become its Parameters.
        See `irrun.extract`."""
        from .extraction import extract
        return extract(self, path, outputs=outputs, inputs=inputs, force=force)


# Values the analyses know of at least this size are let go once the plan no longer needs them
FORGET_VALUE_BYTES = 1 << 16


class _KnownValues:
    """The large values the analyses hold (a compressed weight's int4 data unpacked to a byte per
    value, the decompression steps of small weights the analysis folded), let go as the plan drops
    them while folding and, once it is built, all it does not keep: an int4 model's load peaked at
    177 MiB for 100 MiB of decompressed weights, 25 MiB of unpacked int4 staying.  A watcher asking
    for a forgotten value has it recomputed (`Plan.source_value`)."""

    def __init__(self, analyses, release):
        self._release = release
        self._holders: dict[int, list[TensorType]] = {}
        self._analysis_of: dict[int, int] = {}      # id(TensorType) -> id(its analysis)
        for analysis in {id(a): a for a in analyses}.values():
            for t in _large_types(analysis):
                self._holders.setdefault(id(t.value), []).append(t)
                self._analysis_of[id(t)] = id(analysis)

    def release(self, array: np.ndarray) -> None:
        """The plan no longer holds `array`: its mapped pages and the analyses' references go."""
        if self._release is not None:
            self._release(array)
        for t in self._holders.pop(id(array), ()):
            t.value = None

    def forget_all_but(self, kept, only=None) -> None:
        """Every value but those in `kept` let go; with `only` (an analysis), only what that analysis
        holds, and the rest stays known.  Before the plan is built, the declared analysis's values
        go this way but for those the f32 one shares (which the plan reads): an int4 decoder's f16
        decompression steps, 13 MiB that the load's peak held while the plan folded the f32 ones."""
        keep = {id(v) for v in kept}
        for key in list(self._holders):
            if key in keep:
                continue
            holders = self._holders[key]
            left = []
            for t in holders:
                if only is None or self._analysis_of.get(id(t)) == id(only):
                    t.value = None
                else:
                    left.append(t)
            if left:
                self._holders[key] = left
            else:
                del self._holders[key]


def _large_types(analysis, op_type: str | None = None) -> list[TensorType]:
    """The tensor types of `analysis` (of layers of `op_type`, if given) whose values are worth
    letting go (FORGET_VALUE_BYTES)."""
    return [t for node in analysis.nodes.values() if op_type in (None, node.layer.op_type)
            for t in node.types or () if t is not None and getattr(t.value, "nbytes", 0) >= FORGET_VALUE_BYTES]


def _held_values(analysis, op_type: str | None = None) -> list[np.ndarray]:
    return [t.value for t in _large_types(analysis, op_type)]


def _check_integer_range(name: str, etype: ElementType, array: np.ndarray, file: str) -> None:
    """Integer values that the input's type cannot hold (300 for u8, 8 for i4, 2 for u1) are refused:
    converting would wrap them silently."""
    bounds = etype.value_range
    if bounds is None or array.dtype.kind not in "iub" or not array.size:
        return
    low, high = bounds
    if array.dtype.kind != "b" and (array.min() < low or array.max() > high):
        bad = np.flatnonzero((array < low) | (array > high))
        where = np.unravel_index(bad[0], array.shape)
        raise InputError(f"input {name!r} is {etype}, which holds {low}..{high}; got {array[where]} at index "
                         f"{list(map(int, where))} ({len(bad)} value{'s' if len(bad) != 1 else ''} out of range)",
                         file=file)


def _reshape_hint(info: PortInfo, array: np.ndarray) -> str:
    return f"; to run other shapes, reshape the model first (--shape {info.name}={format_shape(array.shape)}, " \
           f"or Model.reshape)"


def _own(value: np.ndarray, kept, constant_roots: frozenset[int] | None = None) -> np.ndarray:
    """`value`, or a copy where it may alias an input, a constant, the weights, a variable or
    another array handed out (`kept`: the inputs, the variables, the outputs so far): the caller
    gets an array of its own, as from OpenVINO.  A view is handed on as it is where its base is an
    array of this call's (a convolution's output is a reshape of its kernel's: copying the 3 MiB
    of a 256 x 56 x 56 one took a quarter of its time): C-contiguous, writeable, and owned by no
    constant (`constant_roots`, the plan's; None: every view is copied) nor by the weights' map."""
    if not value.flags.writeable:
        return value.copy()
    may_share = np.may_share_memory
    for other in kept:      # (a loop: through a generator in any(), 2.0 against 1.4 us for nine)
        if may_share(value, other):
            return value.copy()
    if value.base is None:
        return value
    root = value.base
    while isinstance(root.base, np.ndarray):
        root = root.base
    if constant_roots is None or root.base is not None or id(root) in constant_roots \
            or not value.flags.c_contiguous:
        return value.copy()
    return value


def _string_array(name: str, array: np.ndarray, file: str) -> np.ndarray:
    """A string input as irrun carries it: an object array of str.  Bytes are decoded as UTF-8;
    bytes that are not UTF-8 survive (surrogateescape), as they do in StringTensorUnpack."""
    if array.dtype.kind not in "USO":
        raise InputError(f"input {name!r} expects strings (str or bytes), got {array.dtype}", file=file)
    items = array.reshape(-1).tolist()
    if not all(isinstance(s, (str, bytes)) for s in items):
        raise InputError(f"input {name!r} expects strings (str or bytes); its object array holds other values",
                         file=file)
    out = np.empty(len(items), dtype=object)
    out[:] = [s.decode("utf-8", "surrogateescape") if isinstance(s, bytes) else s for s in items]
    return out.reshape(array.shape)


def _v10_output(value: np.ndarray, etype: ElementType) -> np.ndarray:
    """IR v10 outputs are converted by OpenVINO: integers to i32, the rest to f32."""
    carrier = v10_interface_type(etype, output=True).carrier
    return value if value.dtype == carrier else value.astype(carrier)


def _unpickle_model(path: str, options: dict, fingerprint: str, edits: dict | None = None) -> Model:
    """Checked before loading (other files may not even load) and after (they may change meanwhile)."""
    def check(found: str) -> None:
        if found != fingerprint:
            raise ModelError("is not the model that was pickled: its contents differ from the files the sender "
                             "loaded", file=path)
    try:
        check(fingerprint_files(path))
    except OSError as exc:
        raise UnreadableFileError(f"cannot read the pickled model's file: {exc.strerror or exc}", file=path) from None
    model = Model(path, **options)
    check(model.fingerprint())
    return _redo(model, edits)


def _redo(model: Model, edits: dict | None) -> Model:
    """What reshape and add_outputs did to a pickled model, done to the one unpickled."""
    if edits and edits["shapes"]:
        model.reshape(edits["shapes"])
    if edits and edits["outputs"]:
        model.add_outputs(edits["outputs"])
    return model


def _unpickle_bytes(xml: bytes, weights: bytes, name: str, options: dict, edits: dict | None = None) -> Model:
    return _redo(load_bytes(xml, weights, name=name, **options), edits)


def load_bytes(xml: bytes | str, weights: bytes | memoryview | None = None, *, name: str = "model",
               max_memory: int | None = None, threads: int | None = None, precision: str = "f32",
               strict: bool = False, optimize: bool | None = None, compressed_weights: str = "auto") -> Model:
    """Load an IR held in memory: the XML text and the bytes of its `.bin` (kept, not copied), as
    `openvino.Core().read_model(xml_bytes, weights)` reads one.  Messages name it `<memory>/NAME.xml`.
    The options are `load`'s."""
    data = xml.encode("utf-8") if isinstance(xml, str) else bytes(xml)
    return Model(Path("<memory>") / f"{name}.xml", max_memory=max_memory, threads=threads, precision=precision,
                 strict=strict, memory=(data, weights if weights is not None else b""), optimize=optimize,
                 compressed_weights=compressed_weights)


def load(path: str | Path, *, max_memory: int | None = None, threads: int | None = None,
         precision: str = "f32", strict: bool = False, optimize: bool | None = None,
         compressed_weights: str = "auto") -> Model:
    """Load `model.xml` (and the `model.bin` beside it).

    `threads`: how many threads kernels and BLAS use, for the whole process (default: the
    `IRRUN_THREADS` environment variable, else the CPUs this process may run on).
    `precision`: "f32" (default) computes f16 and bf16 layers in f32, as OpenVINO's CPU plugin does at f32
    inference precision; "declared" computes every layer in its declared type (f16 results rounded after
    each layer, as f16 devices and OpenVINO's reference evaluation do).  See irrun/precision.py.
    `strict`: refuse a model whose declared port shapes or precisions contradict inference (by default it
    runs with the inferred ones, as OpenVINO does, after a `DeclaredValuesWarning`).
    `optimize`: rewrite the plan at load in ways no output can tell apart (chains of elementwise layers
    run as one step, in the output of the layer that starts them; KV caches grown in place: see
    irrun/optimize.py); default True unless the environment sets `IRRUN_OPTIMIZE=0`.
    `compressed_weights`: what becomes of weights stored compressed (int8/int4/nf4 codes with scales,
    f16) that MatMuls read: "auto" (default) decompresses them once at load unless they would not fit
    in the memory available, "decompress" always does, "keep" keeps them compressed, each product
    working from the weight's codes as it runs (less memory, slower; needs `optimize`).
    See irrun/compressed_products.py.
    """
    return Model(path, max_memory=max_memory, threads=threads, precision=precision, strict=strict,
                 optimize=optimize, compressed_weights=compressed_weights)


@dataclass
class Report:
    """What `validate` found."""

    file: str
    diagnostics: list[Diagnostic]
    unreadable: bool = False        # the file could not be read as an IR at all

    @property
    def errors(self):
        return [d for d in self.diagnostics if d.severity == "error"]

    @property
    def warnings(self):
        return [d for d in self.diagnostics if d.severity == "warning"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def __iter__(self):
        return iter(self.diagnostics)

    def __len__(self):
        return len(self.diagnostics)

    def codes(self) -> list[str]:
        return [d.code for d in self.diagnostics]


def validate(path: str | Path, *, strict: bool = False) -> Report:
    """Check an IR file; never raises for a defect in the model.

    `strict`: every warning is reported as an error (W-ATTR-DEFAULTED, W-DEAD-LAYER, ...)."""
    file = str(path)
    try:
        # The collector stays off until the analysis is freed too: turned on while
        # it is alive, it would first walk all of it once more.
        with _no_cyclic_gc():
            document, analysis, weights = _document_and_analysis(path)
            diagnostics = list(analysis.diagnostics)
            if weights is not None:
                weights.close()
            del document, analysis, weights
    except IrrunError as exc:
        diag = Diagnostic("error", exc.code or "E-UNREADABLE", exc.message, exc.file or file, exc.line, exc.layer)
        return Report(file, [diag], unreadable=isinstance(exc, UnreadableFileError))
    except RecursionError:
        return Report(file, [Diagnostic("error", "E-TOO-DEEP", "the file nests too deeply to check", file)])
    except Exception as exc:  # noqa: BLE001 - validate reports, it never raises for a model's defect
        return Report(file, [Diagnostic("error", "E-INTERNAL", f"irrun could not check this file: "
                                        f"{type(exc).__name__}: {exc}", file)])
    diagnostics.sort(key=lambda d: (d.line or 0))
    if strict:
        for d in diagnostics:
            d.severity = "error"
    return Report(file, diagnostics)
