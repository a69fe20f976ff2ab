"""`irrun reduce`: the smallest IR that still shows a divergence `irrun compare` finds, for a bug report.

`compare` names the first diverging layer: its inputs agree with the reference, its output
does not.  `reduce` cuts that layer out of the model (irrun/extraction.py): every tensor it
reads at run time becomes a Parameter, its diverging outputs become the Results.  Beside
`MIN.xml` it writes `MIN.inputs.npz`, the values of the cut tensors in irrun's run of the
full model (keyed by the new IR's input names), and `MIN.expected.npz`, the reference's
values of the outputs (keyed by their tensor keys), so that
`irrun compare MIN.xml -i MIN.inputs.npz --reference MIN.expected.npz` shows the divergence.

A cut reproduces the divergence when the reference, computing the cut itself from the same
inputs, still disagrees with irrun under the same tolerance:

- `openvino[:DEVICE]`: OpenVINO runs the reduced IR on MIN.inputs.npz;
- saved tensors or another IR, which cannot run the reduced IR: irrun runs it on the
  reference's own values of the cut tensors, and its outputs are compared with the
  reference's.  (A reference without those values leaves only the replay check below.)

It must also replay: irrun on MIN.inputs.npz against MIN.expected.npz diverges.  When the
layer alone does not reproduce the divergence, it is numerical drift: differences within
tolerance in the layer's inputs that it carries past the tolerance.  The cut then grows
backwards, adding the layers that produce its inputs one at a time in breadth-first order,
up to `max_layers`, until one reproduces; when none does, nothing is written.

What a cut reads that does not change from run to run stays in the IR: a constant and the
layers folded from constants (weights and their decompression).  A tensor folded at load
from the shapes of the inputs (ShapeOf ...) becomes a Constant of its value, so the cut
keeps static shapes and does not pull in the layers above it.
"""
from __future__ import annotations

import os
import shlex
import tempfile
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .arrays import save_npz
from .compare import TensorDiff, _finite, _num, compare_tensors, measure
from .errors import IrrunError, UsageError
from .extraction import Tensor, extract, resolve_tensors
from .references import open_reference, openvino_device
from .tolerance import RELATIVE_TO, Tolerances
from .watch import Collect, tensor_key
from .writer import check_target, refuse_overwrite

DEFAULT_MAX_LAYERS = 16
# Layers whose outputs a cut never grows into: they are where values come from.
_SOURCES = ("Parameter", "ReadValue")


def companion_files(output: str | Path) -> tuple[Path, Path]:
    """`MIN.xml` -> (`MIN.inputs.npz`, `MIN.expected.npz`)."""
    xml = Path(output)
    return xml.with_suffix(".inputs.npz"), xml.with_suffix(".expected.npz")


@dataclass
class Attempt:
    """One cut tried: its layers, whether it reproduced the divergence, and the check's numbers."""

    layers: list[dict]                  # {"id", "name", "type"} in topological order
    reproduced: bool
    check: list[TensorDiff] = field(default_factory=list)    # the reference's values against irrun's
    replay: list[TensorDiff] = field(default_factory=list)   # irrun on the inputs file against the expected file
    note: str | None = None             # why it could not be checked, or what failed


@dataclass
class ReduceReport:
    """What `reduce` did.  `status`: "agrees" (nothing diverges, nothing written), "reduced" (the files
    were written) or "not reducible" (no cut within the limit reproduces the divergence; nothing written)."""

    model: str
    reference: str
    status: str
    divergence: dict | None = None      # the diverging layer: id, name, type, version, line
    before: list[TensorDiff] = field(default_factory=list)   # its diverging outputs in the full model
    check: str = ""                     # how a cut is checked (see the module docstring)
    attempts: list[Attempt] = field(default_factory=list)
    max_layers: int = DEFAULT_MAX_LAYERS
    files: list[str] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)          # the reduced IR's input names
    outputs: list[str] = field(default_factory=list)         # the keys of its outputs (MIN.expected.npz)
    reproduce: str | None = None        # the command line that shows the divergence
    reference_output: list[dict] = field(default_factory=list)   # openvino: its reduced outputs against the expected ones
    notes: list[str] = field(default_factory=list)

    @property
    def reduced(self) -> bool:
        return self.status == "reduced"

    @property
    def chosen(self) -> Attempt | None:
        """The cut that was written."""
        return next((a for a in self.attempts if a.reproduced), None) if self.reduced else None

    def to_json(self) -> dict:
        chosen = self.chosen
        return _finite({
            "model": self.model, "reference": self.reference, "status": self.status,
            "divergence": self.divergence, "before": [asdict(d) for d in self.before], "check": self.check,
            "layers": chosen.layers if chosen else [], "grown": bool(chosen and len(chosen.layers) > 1),
            "after": [asdict(d) for d in chosen.check] if chosen else [],
            "replay": [asdict(d) for d in chosen.replay] if chosen else [],
            "reference_output": self.reference_output,
            "attempts": [{"layers": len(a.layers), "reproduced": a.reproduced, "note": a.note,
                          "check": [asdict(d) for d in a.check]} for a in self.attempts],
            "max_layers": self.max_layers, "files": self.files, "inputs": self.inputs, "outputs": self.outputs,
            "reproduce": self.reproduce, "notes": self.notes})

    def format_text(self) -> str:
        head = f"reduce {self.model} against {self.reference}"
        if self.status == "agrees":
            return f"{head}: every compared tensor agrees; nothing to reduce, nothing written"
        d = self.divergence
        where = f", {self.model} line {d['line']}" if d.get("line") else ""
        lines = [f'{head}: layer {d["id"]} "{d["name"]}" ({d["type"]}-{d["version"]}) diverges{where}']
        lines += [f"  full model: {x.key}: {x.summary()}" for x in self.before]
        chosen = self.chosen
        if len(self.attempts) > 1 or chosen is None:
            if self.attempts and self.attempts[0].check and not self.attempts[0].reproduced:
                lines.append(f"  the layer alone does not reproduce it: numerical drift; the cut grows backwards "
                             f"({self.check}):")
            else:
                lines.append(f"  cuts tried ({self.check}):")
            for a in self.attempts:
                n = len(a.layers)
                found = a.note if a.note and not a.check else \
                    f"{_worst(a.check)}: {'reproduces' if a.reproduced else 'within tolerance'}"
                lines.append(f"    {n} layer{'s' if n != 1 else ''}: {found}")
        if chosen is None:
            size = len(self.attempts[-1].layers) if self.attempts else 0
            lines.append(f'not reducible: no cut of up to {size} layer{"s" if size != 1 else ""} ending at layer '
                         f'{d["id"]} "{d["name"]}" reproduces the divergence (limit {self.max_layers}); nothing written')
            lines += [f"note: {n}" for n in self.notes]
            return "\n".join(lines)
        n = len(chosen.layers)
        names = ", ".join(f'{x["id"]} "{x["name"]}" ({x["type"]})' for x in chosen.layers)
        lines.append(f"reproduced by {n} layer{'s' if n != 1 else ''}: {names}")
        lines += [f"  reduced: {x.key}: {x.summary()} ({self.check})" for x in chosen.check]
        lines += [f"  replay: {x.key}: {x.summary()} (irrun on the inputs file against the expected file)"
                  for x in chosen.replay]
        for r in self.reference_output:
            lines.append(f"  {self.reference.split(' (')[0]} on the reduced IR against the expected file: {r['key']}: "
                         + (r["reason"] or f"max abs {_num(r['max_abs'])}, "
                                           f"{100 * (r['mismatch_fraction'] or 0):.3g}% outside the tolerance"))
        lines += [f"note: {n}" for n in self.notes]
        lines.append(f"wrote {self.files[0]} ({n} layer{'s' if n != 1 else ''}, {len(self.inputs)} "
                     f"input{'s' if len(self.inputs) != 1 else ''}: {', '.join(self.inputs) or 'none'}), "
                     f"{self.files[2]}, {self.files[3]} ({', '.join(self.outputs)})")
        lines.append(f"reproduce: {self.reproduce}")
        return "\n".join(lines)


def _worst(diffs: list[TensorDiff]) -> str:
    d = max(diffs, key=lambda x: x.max_abs or 0)
    return f"{d.key} {d.reason}" if d.reason and d.reason != "values" else \
        f"{d.key} max abs {_num(d.max_abs)}, max rel {_num(d.max_rel)}"


# ---------------------------------------------------------------- the cuts

class _Cuts:
    """The cuts ending at one layer, growing backwards breadth-first."""

    def __init__(self, model, target: str):
        self.model = model
        analysis = model.analysis
        self.nodes = analysis.nodes
        self.rank = {lid: i for i, lid in enumerate(analysis.order)}
        self.folded = {n.id for nodes in model._plan.folded_before.values() for n in nodes}
        self.varying: set[str] = set()      # layers whose values depend on an input or a variable
        for lid in analysis.order:
            node = self.nodes[lid]
            if node.layer.op_type in _SOURCES or any(s is not None and s[0] in self.varying for s in node.inputs):
                self.varying.add(lid)
        self.target = target

    def boundary(self, region: set[str]) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
        """What a cut of `region` reads from outside: tensors fed at run time (they become Parameters)
        and tensors folded from the inputs' shapes (they become Constants)."""
        fed, fixed = [], []
        for lid in sorted(region, key=self.rank.__getitem__):
            for src in self.nodes[lid].inputs:
                if src is None or src[0] in region:
                    continue
                producer = self.nodes[src[0]].layer
                if src[0] in self.folded or producer.op_type == "Constant":
                    if src[0] in self.varying and src not in fixed:
                        fixed.append(src)
                elif src not in fed:
                    fed.append(src)
        return fed, fixed

    def regions(self, limit: int):
        """Growing sets of layers: the target alone, then one producer more at a time, breadth-first."""
        region = {self.target}
        yield set(region)
        queue = deque(src[0] for src in self.boundary(region)[0])
        while queue and len(region) < limit:
            lid = queue.popleft()
            if lid in region or self.nodes[lid].layer.op_type in _SOURCES:
                continue
            region.add(lid)
            yield set(region)
            queue.extend(src[0] for src in self.boundary({lid})[0] if src[0] not in region)

    def describe(self, region: set[str]) -> list[dict]:
        return [{"id": lid, "name": self.nodes[lid].layer.name, "type": self.nodes[lid].layer.label}
                for lid in sorted(region, key=self.rank.__getitem__)]


# ---------------------------------------------------------------- reduce

def reduce(model, inputs: Any, reference: Any, output: str | Path, *, rtol: float | None = None,
           atol: float | None = None, relative_to: str = RELATIVE_TO[0], layer: str | None = None,
           max_layers: int = DEFAULT_MAX_LAYERS,
           force: bool = False, max_memory: int | None = None, protected=(),
           progress: Callable[[str], None] | None = None) -> ReduceReport:
    """Find the first layer of `model` (a path or an `irrun.Model`) whose output on `inputs` diverges
    from `reference` (as `irrun.compare` takes it) and write the smallest IR that reproduces the
    divergence to `output` (.xml and .bin), with `<output>.inputs.npz` and `<output>.expected.npz`.
    `layer`: reduce that layer's divergence instead of the first.  `max_layers`: the largest cut tried.
    `rtol`, `atol`, `relative_to`: as for `irrun.compare`.
    `protected`: more files never to overwrite (the input files).  Nothing is overwritten that the model
    or the reference is read from, unless `force`.  See the module docstring."""
    from .model import Model, load

    if max_layers < 1:
        raise UsageError(f"max_layers must be at least 1, got {max_layers}")
    tolerances = Tolerances(rtol, atol, relative_to)
    if isinstance(model, Model):
        return _reduce(model, inputs, reference, output, tolerances, layer, max_layers, force, max_memory,
                       protected, progress)
    m = load(model, max_memory=max_memory)
    try:
        return _reduce(m, inputs, reference, output, tolerances, layer, max_layers, force, max_memory, protected,
                       progress)
    finally:
        m.close()


def _reduce(m, inputs, reference, output, tolerances, layer, max_layers, force, max_memory, protected,
            progress) -> ReduceReport:
    xml, bin_path = check_target(output, (m.path, m.path.with_suffix(".bin")), force)
    targets = (xml, bin_path, *companion_files(xml))
    refuse_overwrite(targets, (m.path, m.path.with_suffix(".bin")), force)
    refuse_overwrite(targets, _reference_files(reference, protected), force, what="an input of this command")
    chosen_layer = _resolve_layer(m, layer) if layer is not None else None
    say = progress or (lambda text: None)
    device = openvino_device(reference)

    say("comparing the full model with the reference")
    with open_reference(reference, m, inputs, max_memory) as (tensors, label):
        report = compare_tensors(m, inputs, tensors, label, tolerances)
        result = ReduceReport(m.path.name, label, "agrees", max_layers=max_layers)
        if report.ok:
            return result
        target, before = _divergence(m, report, chosen_layer)
        node = m.analysis.nodes[target]
        if node.layer.op_type == "Parameter":
            raise UsageError(f'the reference\'s value of input "{node.layer.name}" differs from the one given '
                             f"({before[0].summary()}): was the reference computed from other inputs?")
        result.divergence = {"id": target, "name": node.layer.name, "type": node.layer.op_type or node.layer.type,
                             "version": node.layer.op_version, "line": node.layer.line}
        result.before = before
        cuts = _Cuts(m, target)
        regions = list(cuts.regions(max_layers))
        wanted = {src for region in regions for part in cuts.boundary(region) for src in part}
        ours = _irrun_values(m, inputs, wanted)
        by_key = {d.key: d for d in report.layers}
        key_names = m._plan.key_names
        expected = {d.port: np.array(tensors[d.reference_key]) for d in before}
        theirs: dict[tuple[str, int], np.ndarray] = {}
        for src in wanted:
            d = by_key.get(tensor_key(key_names[src[0]], src[1]))
            if d is not None and d.reference_key in tensors:
                theirs[src] = np.array(tensors[d.reference_key])

    result.check = (f"{label.split(' (')[0]} on the reduced IR against irrun" if device is not None else
                    "irrun on the reference's own input values against the reference")
    outputs = [Tensor(node.layer, d.port) for d in before]
    chosen = _try_cuts(m, cuts, regions, outputs, ours, theirs, expected, reference if device is not None else None,
                       tolerances, result, say)
    if chosen is None:
        result.status = "not reducible"
        if len(regions) < max_layers:
            result.notes.append(f"the cut reached the model's inputs with {len(regions)} layers")
        return result
    inputs_file, expected_file = companion_files(xml)
    # The four files are written beside their places, then renamed into them: a failure leaves none of them.
    try:
        with tempfile.TemporaryDirectory(dir=xml.parent, prefix=f".{xml.stem}.") as staging:
            staged = Path(staging) / xml.name
            final = _Cut(m, outputs, *cuts.boundary({x["id"] for x in chosen.layers}), ours)
            try:
                final.write(staged, force=True)
                result.inputs, wanted = list(final.feeds), final.expected(expected)
                result.outputs = list(wanted)
                save_npz(companion_files(staged)[0], final.feeds)
                save_npz(companion_files(staged)[1], wanted)
            finally:
                final.close()
            for written, target in ((staged.with_suffix(".bin"), bin_path), (companion_files(staged)[0], inputs_file),
                                    (companion_files(staged)[1], expected_file), (staged, xml)):
                os.replace(written, target)
    except OSError as exc:
        raise IrrunError(f"cannot write {xml}: {exc.strerror or exc}", file=str(xml)) from None
    result.status = "reduced"
    result.files = [str(xml), str(bin_path), str(inputs_file), str(expected_file)]
    result.reproduce = (f"irrun compare {shlex.quote(str(xml))} -i {shlex.quote(str(inputs_file))} "
                        f"--reference {shlex.quote(str(expected_file))}{tolerances.options()}")
    return result


def _try_cuts(m, cuts: "_Cuts", regions, outputs, ours, theirs, expected, openvino, tolerances,
              result: ReduceReport, say) -> Attempt | None:
    """Each cut in turn, written to a scratch directory and checked, up to the first that reproduces
    the divergence (returned; None when none does).  Every cut tried is recorded in `result.attempts`."""
    with tempfile.TemporaryDirectory(prefix="irrun-reduce-") as scratch:
        for region in regions:
            say(f"trying a cut of {len(region)} layer{'s' if len(region) != 1 else ''}")
            cut = _Cut(m, outputs, *cuts.boundary(region), ours)
            attempt = Attempt(cuts.describe(region), False)
            result.attempts.append(attempt)
            try:
                cut.write(Path(scratch) / f"cut{len(region)}.xml", force=True)
                _check(cut, attempt, expected, openvino, theirs, tolerances, result)
            except IrrunError as exc:
                attempt.note = f"could not be checked: {exc}"
            finally:
                cut.close()
            if attempt.reproduced:
                return attempt
    return None


def _reference_files(reference: Any, protected) -> list[Path]:
    files = [Path(p) for p in protected]
    if isinstance(reference, (str, Path)) and openvino_device(reference) is None:
        files.append(Path(reference))
        if Path(reference).suffix.lower() == ".xml":
            files.append(Path(reference).with_suffix(".bin"))
    return files


def _resolve_layer(m, name: str) -> str:
    tensors = resolve_tensors(m.document.graph, name, what="--layer")
    if not tensors:
        raise UsageError(f'--layer "{name}": the Result takes no tensor')
    return tensors[0].layer.id


def _divergence(m, report, chosen: str | None) -> tuple[str, list[TensorDiff]]:
    """The layer to reduce and its diverging outputs in the full model."""
    if chosen is None:
        target = report.first_divergence.id
    else:
        target = chosen
    diverging = [d for d in report.layers if d.id == target and not d.agrees]
    if not diverging:
        layer = m.layers[target]
        first = report.first_divergence
        compared = any(d.id == target for d in report.layers)
        why = "agrees with the reference" if compared else "is not compared (the reference has no value for it)"
        raise UsageError(f'--layer "{layer.name}": its output {why}; the first divergence is layer {first.id} '
                         f'"{first.layer}"')
    read = [d for d in diverging if d.used]
    return target, read or diverging


def _irrun_values(m, inputs: Any, wanted: set[tuple[str, int]]) -> dict[tuple[str, int], np.ndarray]:
    """The tensors `wanted` in irrun's run of the full model (as the model declares their types)."""
    keep = Collect(frozenset(lid for lid, _ in wanted), ports={src: src for src in wanted})
    m.infer(inputs, watch=[keep])
    return keep.values


class _Cut:
    """One cut written as an IR, loaded, with its inputs."""

    def __init__(self, model, outputs: list[Tensor], fed, fixed, values):
        self.model, self.outputs, self.fed, self.fixed, self.values = model, outputs, fed, fixed, values
        self.loaded = None
        self.feeds: dict[str, np.ndarray] = {}

    def _tensor(self, src) -> Tensor:
        return Tensor(self.model.analysis.nodes[src[0]].layer, src[1])

    def write(self, path: Path, force: bool) -> None:
        from .model import load
        extract(self.model, path, outputs=self.outputs, inputs=[self._tensor(s) for s in self.fed],
                constants=[(self._tensor(s), self.values[s]) for s in self.fixed], force=force)
        self.loaded = load(path, **self.model.options())
        params = self.loaded.inputs
        if len(params) != len(self.fed):
            raise IrrunError(f"internal: the cut has {len(params)} inputs for {len(self.fed)} cut tensors",
                             file=str(path))
        self.feeds = {info.name: self.values[src] for info, src in zip(params, self.fed)}

    def names(self) -> list[str]:
        return [info.name for info in self.loaded.inputs]

    def key(self, port: int) -> str:
        return tensor_key(self.loaded._plan.key_names[self.outputs[0].layer.id], port)

    def expected(self, by_port: dict[int, np.ndarray]) -> dict[str, np.ndarray]:
        return {self.key(t.index): by_port[t.index] for t in self.outputs}

    def close(self) -> None:
        if self.loaded is not None:
            self.loaded.close()


def _check(cut: _Cut, attempt: Attempt, expected: dict[int, np.ndarray], openvino: str | None,
           theirs: dict[tuple[str, int], np.ndarray], tolerances: Tolerances, result: ReduceReport) -> None:
    """Does `cut` reproduce the divergence?  (see the module docstring)"""
    m = cut.loaded
    keys = {cut.key(t.index) for t in cut.outputs}
    wanted = cut.expected(expected)
    replay = compare_tensors(m, cut.feeds, wanted, "the expected values", tolerances)
    attempt.replay = [d for d in replay.layers if d.key in keys]
    if all(d.agrees for d in attempt.replay):
        attempt.note = "irrun computes the cut differently from the full model (its replay agrees)"
        return
    if openvino is not None:
        with open_reference(openvino, m, cut.feeds) as (tensors, label):
            check = compare_tensors(m, cut.feeds, tensors, label, tolerances)
            attempt.check = [d for d in check.layers if d.key in keys]
            result.reference_output = []
            for d in attempt.check:
                got = np.asarray(tensors[d.reference_key])
                want = wanted[d.key]
                t = m.analysis.nodes[cut.outputs[0].layer.id].types[d.port]
                tol = tolerances.for_tensor(t.etype.name if t is not None else None, got.dtype)
                numbers = measure(got, want, tol)
                result.reference_output.append({"key": d.key, "max_abs": numbers.get("max_abs"),
                                                "mismatch_fraction": numbers.get("mismatch_fraction"),
                                                "reason": numbers.get("reason")})
    else:
        missing = [tensor_key(cut.model._plan.key_names[s[0]], s[1]) for s in cut.fed if s not in theirs]
        if missing:
            attempt.note = (f"the reference has no values for {', '.join(missing)}: only the replay is checked")
            attempt.reproduced = True
            result.notes.append(f"not checked whether the cut, given the reference's own inputs, computes what the "
                                f"reference does: the reference has no values for {', '.join(missing)}")
            return
        feeds = {name: theirs[src] for name, src in zip(cut.names(), cut.fed)}
        check = compare_tensors(m, feeds, wanted, "the reference", tolerances)
        attempt.check = [d for d in check.layers if d.key in keys]
    attempt.reproduced = any(not d.agrees for d in attempt.check)
