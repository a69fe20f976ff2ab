"""`irrun compare`: every layer output against a reference, and the first layer that diverges.

The model runs in irrun with a watcher (irrun/watch.py) that compares each layer output
with the reference tensor of the same key (`"<layer name>:<output index>"`) the moment it
is produced, keeping only the numbers, so a comparison holds no more of the model's
tensors than an inference does.  The references (irrun/references.py): OpenVINO running
the same IR with every layer output added, saved tensors (`.npz`, a `--dump` directory),
or another IR run by irrun, its layers matched by name.

Each tensor gets max abs and max rel difference, the fraction of elements outside the
tolerance (irrun/tolerance.py), cosine similarity, NaN/Inf counts and shape/dtype checks.
The first divergence is the earliest layer, in topological order, whose output diverges
while every compared input of it agrees: the layer that goes wrong, not one that inherits
it.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from .errors import UsageError
from .tolerance import RELATIVE_TO, Tolerance, Tolerances, largest_magnitude
from .watch import Produced, Watcher, tensor_key


@dataclass
class TensorDiff:
    """One layer output against its reference."""

    key: str
    layer: str                  # layer name
    id: str
    type: str
    version: int | str | None
    port: int
    line: int | None
    shape: list[int]
    dtype: str
    reference_key: str
    reference_shape: list[int] | None = None
    reference_dtype: str | None = None
    max_abs: float | None = None
    max_rel: float | None = None
    mismatch_fraction: float | None = None
    cosine: float | None = None
    nan: int = 0
    inf: int = 0
    reference_nan: int = 0
    reference_inf: int = 0
    rtol: float | None = None   # None: compared exactly
    atol: float | None = None
    relative_to: str | None = None  # what rtol multiplies: "tensor" (its largest magnitude) or "element"
    reference_max: float | None = None  # the reference's largest finite magnitude
    agrees: bool = True
    reason: str | None = None   # why it diverges: "values", "shape [..] vs reference [..]", "dtype ..."
    used: bool = True           # some layer or Result reads it (a difference nothing reads cannot matter)

    def summary(self) -> str:
        if self.reason and self.reason != "values":
            return self.reason
        tol = Tolerance(self.rtol, self.atol, self.relative_to).describe(self.reference_max) \
            if self.rtol is not None else "exact comparison"
        text = f"max abs {_num(self.max_abs)}, max rel {_num(self.max_rel)}, " \
               f"{100 * (self.mismatch_fraction or 0):.3g}% outside {tol}, cosine {_cos(self.cosine)}"
        if self.nan != self.reference_nan or self.inf != self.reference_inf:
            text += f"; NaN/Inf {self.nan}/{self.inf} vs reference {self.reference_nan}/{self.reference_inf}"
        return text


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def _cos(x: float | None) -> str:
    return "-" if x is None else f"{x:.6f}"


def measure(actual: np.ndarray, reference: np.ndarray, tol: Tolerance | None) -> dict:
    """The numbers of one comparison (see TensorDiff); `tol` None compares exactly."""
    out: dict[str, Any] = {}
    numeric = actual.dtype.kind in "biuf" and reference.dtype.kind in "biuf"
    if actual.shape != reference.shape:
        out["reason"] = f"shape {list(actual.shape)} vs reference {list(reference.shape)}"
        return out
    if not numeric:
        same = np.asarray(actual == reference) if actual.dtype.kind == reference.dtype.kind else np.zeros(1, bool)
        out["mismatch_fraction"] = 1.0 - float(same.mean()) if same.size else 0.0
        return out
    a, r = actual.astype(np.float64), reference.astype(np.float64)
    a_nan, r_nan = np.isnan(a), np.isnan(r)
    out.update(nan=int(a_nan.sum()), inf=int(np.isinf(a).sum()), reference_nan=int(r_nan.sum()),
               reference_inf=int(np.isinf(r).sum()))
    with np.errstate(invalid="ignore"):     # inf - inf: NaN, and counted by `same` below
        diff = np.abs(a - r)
    same = (a == r) | (a_nan & r_nan)
    out["reference_max"] = largest_magnitude(r)
    ok = same if tol is None else same | tol.within(diff, r, out["reference_max"])
    finite = np.isfinite(a) & np.isfinite(r)
    d = diff[finite]
    out["max_abs"] = float(d.max()) if d.size else 0.0
    nonzero = finite & (r != 0)
    rel = diff[nonzero] / np.abs(r[nonzero])
    out["max_rel"] = float(rel.max()) if rel.size else (0.0 if out["max_abs"] == 0 else math.inf)
    out["mismatch_fraction"] = 1.0 - float(ok.mean()) if ok.size else 0.0
    fa, fr = a[finite], r[finite]
    na, nr = float(np.linalg.norm(fa)), float(np.linalg.norm(fr))
    out["cosine"] = 1.0 if na == nr == 0 else (0.0 if na == 0 or nr == 0 else float(fa @ fr) / (na * nr))
    return out


class CompareWatcher(Watcher):
    """Compares each layer output as it is produced; keeps only the numbers."""

    def __init__(self, reference: Mapping[str, np.ndarray], match: dict[str, str], read: set,
                 tolerances: Tolerances = Tolerances(), declared=None):
        self.reference = reference
        self.declared = declared        # layer id -> the types the IR declares (tolerances go by those)
        self.read = read                # (layer id, port) some layer reads
        self.match = match              # model key -> reference key
        self.tolerances = tolerances
        self.diffs: list[TensorDiff] = []

    def produced(self, event: Produced) -> None:
        layer = event.node.layer
        for port, value in enumerate(event.values):
            key = event.key(port)
            ref_key = self.match.get(key)
            if value is None or ref_key is None:
                continue
            value = event.value(port)
            reference = np.asarray(self.reference[ref_key])
            declared = self.declared(event.node.id) if event.report is not None and self.declared else event.node.types
            t = declared[port] if port < len(declared) else None
            tol = self.tolerances.for_tensor(t.etype.name if t is not None else None, value.dtype)
            diff = TensorDiff(key, layer.name, layer.id, layer.op_type or layer.type, layer.op_version, port,
                              layer.line, list(value.shape), str(value.dtype), ref_key, list(reference.shape),
                              str(reference.dtype), rtol=tol.rtol if tol else None, atol=tol.atol if tol else None,
                              relative_to=tol.relative_to if tol else None)
            for name, number in measure(value, reference, tol).items():
                setattr(diff, name, number)
            if diff.reason is None and value.dtype != reference.dtype:
                diff.reason = f"dtype {value.dtype} vs reference {reference.dtype}"
            if diff.reason is None and diff.mismatch_fraction:
                diff.reason = "values"
            diff.agrees = diff.reason is None
            diff.used = (layer.id, port) in self.read
            self.diffs.append(diff)


@dataclass
class CompareReport:
    """What `compare` found.  `ok`: every compared tensor that something reads agrees (an output
    nothing reads, such as a MaxPool's indices, is reported but cannot make the model diverge)."""

    model: str
    reference: str
    layers: list[TensorDiff]
    unmatched: list[dict]               # {"key", "side": "model" | "reference"}
    first_divergence: TensorDiff | None
    attributes: dict[str, str] = field(default_factory=dict)     # the first divergent layer's
    inputs: list[tuple[str, str]] = field(default_factory=list)  # its inputs: (key, "agrees" | ...)

    @property
    def ok(self) -> bool:
        return not self.diverging

    @property
    def diverging(self) -> list[TensorDiff]:
        return [d for d in self.layers if not d.agrees and d.used]

    def to_json(self) -> dict:
        first = None
        if self.first_divergence is not None:
            d = self.first_divergence
            first = {"layer": d.layer, "id": d.id, "type": d.type, "version": d.version, "line": d.line,
                     "key": d.key, "port": d.port, "reason": d.reason, "max_abs": d.max_abs, "max_rel": d.max_rel,
                     "mismatch_fraction": d.mismatch_fraction, "cosine": d.cosine, "attributes": self.attributes,
                     "inputs": [{"key": k, "status": s} for k, s in self.inputs]}
        return _finite({"model": self.model, "reference": self.reference, "ok": self.ok, "first_divergence": first,
                        "layers": [asdict(d) for d in self.layers], "unmatched": self.unmatched})

    def format_text(self) -> str:
        lines = [f"compare {self.model} against {self.reference}: {len(self.layers)} tensors compared, "
                 f"{len(self.diverging)} diverge, {len(self.unmatched)} unmatched"]
        d = self.first_divergence
        if d is not None:
            where = f"{self.model} line {d.line}" if d.line else self.model
            lines.append(f'first divergence: layer {d.id} "{d.layer}" ({d.type}-{d.version}), {where}')
            lines.append(f"  output {d.key}: {d.summary()}")
            if self.attributes:
                lines.append("  attributes: " + " ".join(f'{k}="{v}"' for k, v in self.attributes.items()))
            if self.inputs:
                lines.append("  inputs: " + ", ".join(f"{k} ({s})" for k, s in self.inputs))
        elif self.ok:
            unread = sum(not x.agrees for x in self.layers)
            lines.append("every compared tensor agrees" if not unread else
                         f"every compared tensor agrees but {unread} that nothing reads")
        width = min(max((len(x.key) for x in self.layers), default=6), 60)
        lines.append(f"{'tensor':<{width}}  {'max abs':>9}  {'max rel':>9}  {'outside':>8}  {'cosine':>9}")
        for x in self.layers:
            key = x.key if len(x.key) <= width else x.key[:width // 2 - 1] + "..." + x.key[-(width - width // 2 - 2):]
            mark = "" if x.agrees else ("  <- first divergence" if x is d else
                                        "  diverges" if x.used else "  differs, read by nothing")
            if x.reason and x.reason != "values":
                lines.append(f"{key:<{width}}  {x.reason}{mark}")
                continue
            lines.append(f"{key:<{width}}  {_num(x.max_abs):>9}  {_num(x.max_rel):>9}  "
                         f"{100 * (x.mismatch_fraction or 0):7.3g}%  {_cos(x.cosine):>9}{mark}")
        if self.unmatched:
            for side in ("model", "reference"):
                keys = [u["key"] for u in self.unmatched if u["side"] == side]
                if keys:
                    more = f" ... and {len(keys) - 8} more" if len(keys) > 8 else ""
                    lines.append(f"only in the {side} ({len(keys)}): {', '.join(keys[:8])}{more}")
        return "\n".join(lines)


def _finite(obj):
    """JSON has no NaN or infinity: those numbers become the strings "nan", "inf", "-inf"."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def match_keys(model, model_keys: list[str], reference_keys) -> tuple[dict[str, str], list[dict]]:
    """Model key -> reference key: the same key, else a tensor name of that output, else the bare
    layer name (one-output layers).  Returns the matches and what found no partner."""
    reference_keys = list(reference_keys)
    available = set(reference_keys)
    aliases: dict[str, list[str]] = {}
    key_names = model._plan.key_names
    for layer in model.layers.values():
        for port, out in enumerate(layer.outputs):
            names = list(out.names)
            if len(layer.outputs) == 1:
                names.append(layer.name)
            aliases[tensor_key(key_names[layer.id], port)] = names
    match: dict[str, str] = {}
    for key in model_keys:
        if key in available:
            match[key] = key
            continue
        found = next((n for n in aliases.get(key, ()) if n in available), None)
        if found is not None:
            match[key] = found
    used = set(match.values())
    unmatched = [{"key": k, "side": "model"} for k in model_keys if k not in match]
    unmatched += [{"key": k, "side": "reference"} for k in reference_keys if k not in used]
    return match, unmatched


def first_divergence(model, diffs: list[TensorDiff]) -> tuple[TensorDiff | None, list[tuple[str, str]]]:
    """The earliest diverging tensor (topological order) whose layer's compared inputs all agree,
    and the status of that layer's inputs."""
    analysis = model.analysis
    rank = {lid: i for i, lid in enumerate(analysis.order)}
    by_key = {d.key: d for d in diffs}
    for d in sorted((d for d in diffs if not d.agrees and d.used), key=lambda d: (rank.get(d.id, 0), d.port)):
        node = analysis.nodes[d.id]
        statuses = []
        for src in node.inputs:
            key = tensor_key(model._plan.key_names[src[0]], src[1])
            found = by_key.get(key)
            status = "not compared" if found is None else ("agrees" if found.agrees else "diverges")
            statuses.append((key, status))
        if all(s != "diverges" for _, s in statuses):
            return d, statuses
    return None, []


def compare(model, inputs: Any, reference: Any, *, rtol: float | None = None, atol: float | None = None,
            relative_to: str = RELATIVE_TO[0], max_memory: int | None = None) -> CompareReport:
    """Run `model` (a path or an `irrun.Model`) on `inputs` and compare every layer output with
    `reference`: "openvino" / "openvino:DEVICE", a path to a `.npz`, a `--dump` directory or
    another IR (`.xml`), an `irrun.Model`, or a mapping of arrays by key.  `rtol` / `atol` replace
    the tolerances by element type; `relative_to` "tensor" scales rtol by each reference tensor's
    largest magnitude, "element" by each element's own (irrun/tolerance.py)."""
    from .model import Model, load
    from .references import open_reference

    tolerances = Tolerances(rtol, atol, relative_to)
    m = model if isinstance(model, Model) else load(model, max_memory=max_memory)
    with open_reference(reference, m, inputs, max_memory) as (tensors, label):
        return compare_tensors(m, inputs, tensors, label, tolerances)


def compare_tensors(m, inputs: Any, tensors: Mapping[str, np.ndarray], label: str,
                    tolerances: Tolerances = Tolerances()) -> CompareReport:
    """`compare` of the loaded model `m` against reference tensors at hand (by key; `label` names
    them in reports)."""
    keys = _model_keys(m)
    match, unmatched = match_keys(m, keys, tensors.keys())
    if not match:
        theirs = ", ".join(repr(k) for k in list(tensors.keys())[:3])
        ours = ", ".join(repr(k) for k in keys[:3])
        raise UsageError(f"the reference {label} has none of the model's tensors (its keys look like {theirs}; "
                         f"the model's like {ours})")
    read = {src for lid, node in m.analysis.nodes.items() if lid in m.analysis.live for src in node.inputs}
    watcher = CompareWatcher(tensors, match, read, tolerances, lambda lid: m.analysis.nodes[lid].types)
    m.infer(inputs, watch=[watcher])
    diffs = watcher.diffs
    first, statuses = first_divergence(m, diffs)
    attributes = dict(m.layers[first.id].data) if first is not None else {}
    return CompareReport(str(Path(m.path).name), label, diffs, unmatched, first, attributes, statuses)


def _model_keys(m) -> list[str]:
    """Keys of every output of the layers a run shows a watcher (Constants and Results left out)."""
    analysis = m.analysis
    keys = []
    for lid in analysis.order:
        layer = m.layers[lid]
        if layer.op_type in ("Constant", "Result") or (lid not in analysis.live and layer.op_type != "Parameter"):
            continue
        keys += [tensor_key(m._plan.key_names[lid], p) for p in range(len(layer.outputs))]
    return keys
