"""Where irrun's time and OpenVINO's part, layer by layer: both runtimes' per-layer profiles of
each network (irrun's `irrun.profile`, OpenVINO's PERF_COUNT counters), matched through the IR's
layer names, the largest differences first.

    python benchmarks/layer_gaps.py [--networks resnet18,vit] [--threads 1] [--top 10] [--json gaps.json]
    python benchmarks/layer_gaps.py --model model.xml --inputs inputs.npz     # an IR of your own

Each runtime fuses layers into steps of its own (irrun/optimize.py's chains; a node of OpenVINO's
runtime model, whose `originalLayersNames` lists the layers it runs): a *group* is the smallest set
of layers that the steps of both cover whole (steps that share a layer join), timed in each
runtime as the sum of its steps' median times.  OpenVINO's layout conversions (Reorder nodes,
which run no layer of the IR) count with the nearest node that runs one (the one they feed, or
for an output, the one they follow); a node OpenVINO made itself and named after no layer of the
IR (the two LSTMSequence it splits a bidirectional one into) is a group of its own, its kind in
parentheses.  A group is labelled by irrun's steps in it, the longest first: its first layer's
name and type, a convolution's kernel, stride and channels or a product's shapes, and the types
fused after it.  Below the groups, the differences
summed by the kind of each group's longest step in irrun (a convolution by kernel and stride).

Each runtime runs in a process of its own, as in `run.py`, with `run.py`'s OpenVINO configuration
(the arithmetic irrun does), in rounds that alternate the runtimes, each step's lowest median of
the rounds counting (on a shared machine a busy spell falls on one round); irrun's profile runs
in one process (a network `run.py` finds irrun running in two is profiled in one here).  The
sums of the steps leave out each runtime's cost between steps; the report gives both runtimes'
median inference beside them.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from irrun.arrays import atomic_write  # noqa: E402
from measure import openvino_config, with_threads  # noqa: E402
from networks import NETWORKS, SMALL, build_ir, chosen_networks, own_model  # noqa: E402

CONVOLUTIONS = {"Convolution", "GroupConvolution", "ConvolutionBackpropData", "GroupConvolutionBackpropData"}


# ---------------------------------------------------------------- one runtime's steps (in its own process)

def irrun_steps(xml: str, inputs: dict, threads: int | None, repeat: int) -> dict:
    """irrun's steps: {"steps": [{"names", "label", "kind", "seconds"}], "wall": median seconds}."""
    import irrun
    from irrun.profiling import profile
    model = irrun.load(xml, threads=threads)
    for _ in range(3):
        model.infer(inputs)
    found = profile(model, inputs, repeat)
    types = {t.layer.name: _type(t) for t in found.layers}
    steps = []
    for t in found.layers:
        if t.fused_into:
            continue
        names = [t.layer.name, *t.fused]
        fused = "".join(f"+{types.get(n, '?')}" for n in t.fused)
        steps.append({"names": names, "label": f"{t.layer.name} ({_describe(t)}{fused})",
                      "kind": _kind(t), "seconds": t.seconds})
    return {"steps": steps, "wall": found.median_wall}


def _describe(t) -> str:
    """A layer's type and the shapes that decide its kernel."""
    kind = _type(t)
    shapes = [tuple(s) if s is not None else None for s in t.input_shapes]
    out = tuple(t.output_shapes[0]) if t.output_shapes and t.output_shapes[0] is not None else None
    window = _window(t)
    if window and out:
        groups = f" {shapes[1][0]} groups" if kind.startswith("Group") else ""
        return f"{kind} {window} {shapes[0][1]}->{out[1]}{groups} at {'x'.join(map(str, out[2:]))}"
    if kind == "MatMul" and len(shapes) == 2 and all(shapes):
        return f"MatMul {list(shapes[0])} x {list(shapes[1])}"
    return f"{kind} {list(out)}" if out is not None else kind


def _kind(t) -> str:
    """What the differences are summed by: the layer's type, a convolution's with its window."""
    window = _window(t)
    return f"{_type(t)} {window}" if window else _type(t)


def _type(t) -> str:
    return t.layer.op_type or t.layer.type


def _window(t) -> str | None:
    """A convolution's kernel and stride ("3x3/2x2"); None for other layers."""
    kind = _type(t)
    if kind not in CONVOLUTIONS or len(t.input_shapes) < 2 or t.input_shapes[1] is None:
        return None
    kernel = t.input_shapes[1][3:] if kind.startswith("Group") else t.input_shapes[1][2:]
    stride = t.layer.data.get("strides", "1").replace(" ", "").replace(",", "x")
    return f"{'x'.join(map(str, kernel))}/{stride}"


def openvino_steps(xml: str, inputs: dict, threads: int | None, repeat: int) -> dict:
    """OpenVINO's executed nodes: {"steps": [{"names", "label", "kind", "seconds"}], "wall": median seconds}."""
    import openvino as ov
    compiled = ov.Core().compile_model(xml, "CPU", {**openvino_config(threads), "PERF_COUNT": "YES"})
    request = compiled.create_infer_request()
    for _ in range(3):
        request.infer(inputs)
    times: dict[str, list[float]] = {}
    walls = []
    for _ in range(repeat):
        start = time.perf_counter()
        request.infer(inputs)
        walls.append(time.perf_counter() - start)
        for info in request.profiling_info:
            if info.status == info.Status.EXECUTED:
                times.setdefault(info.node_name, []).append(info.real_time.total_seconds())
    runtime = compiled.get_runtime_model()
    layers, kinds, neighbours = {}, {}, {}
    for op in runtime.get_ordered_ops():
        rt = op.get_rt_info()
        name = op.get_friendly_name()
        kinds[name] = rt["layerType"].astype(str) if "layerType" in rt else op.get_type_name()
        original = rt["originalLayersNames"].astype(str) if "originalLayersNames" in rt else ""
        # (the model's inputs and outputs run no step of irrun's: a conversion next to one counts
        # with the layer on its other side)
        layers[name] = [] if kinds[name] in ("Input", "Output") else [n for n in original.split(",") if n]
        neighbours[name] = [t.get_node().get_friendly_name() for out in op.outputs() for t in out.get_target_inputs()] \
            + [value.get_node().get_friendly_name() for value in op.input_values()]
    steps = []
    for name, seconds in times.items():
        names, seen, todo = list(layers.get(name, ())), {name}, list(neighbours.get(name, ()))
        while not names and todo:               # a Reorder: the layers of the nearest node that has some
            near = todo.pop(0)
            if near not in seen:
                seen.add(near)
                names = list(layers.get(near, ()))
                todo += neighbours.get(near, [])
        kind = kinds.get(name, "?")
        steps.append({"names": names, "label": f"{name} ({kind})", "kind": kind, "seconds": statistics.median(seconds)})
    return {"steps": steps, "wall": statistics.median(walls)}


# ---------------------------------------------------------------- matching

def groups(ours: list[dict], theirs: list[dict]) -> list[dict]:
    """The steps of both runtimes joined into groups of layers that each covers whole (see the module
    docstring), in irrun's order: {"label", "kind", "irrun", "openvino" (seconds), "layers"}.  A step
    with no layer of the IR (nothing to match it by) is a group of its own.  (A step is {"names":
    the layers it runs, "label", "kind", "seconds"}.)"""
    parent: dict[str, str] = {}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for step in ours + theirs:
        for name in step["names"]:
            parent.setdefault(name, name)
        for name in step["names"][1:]:
            parent[root(name)] = root(step["names"][0])
    found: dict = {}
    for side, steps in (("irrun", ours), ("openvino", theirs)):
        for k, step in enumerate(steps):
            key = root(step["names"][0]) if step["names"] else (side, k)
            group = found.setdefault(key, {"irrun": 0.0, "openvino": 0.0, "layers": set(), "steps": {"irrun": [], "openvino": []}})
            group[side] += step["seconds"]
            group["layers"].update(step["names"])
            group["steps"][side].append(step)
    result = []
    for group in found.values():
        steps = group.pop("steps")
        longest = sorted(steps["irrun"], key=lambda step: -step["seconds"])
        if longest:
            labels = [step["label"] for step in longest]
            kind = longest[0]["kind"]
        else:       # (a node OpenVINO made, named after no layer irrun runs)
            labels = [f"OpenVINO's {step['label']}" for step in steps["openvino"]]
            kind = f"(OpenVINO's {steps['openvino'][0].get('kind', '?')})"
        shown = "; ".join(labels[:2]) + (f"; {len(labels) - 2} more" if len(labels) > 2 else "")
        result.append({**group, "label": shown, "kind": kind, "layers": sorted(group["layers"])})
    return result


# ---------------------------------------------------------------- report

def network_gaps(name: str, workdir: Path, args) -> dict:
    xml, inputs = build_ir(name, workdir)
    feeds = workdir / f"{name}.inputs.npz"
    np.savez(feeds, **inputs)
    return model_gaps(name, xml, feeds, args)


def model_gaps(name: str, xml: Path, feeds: Path, args) -> dict:
    """The groups of one IR (`feeds`: an .npz of its inputs), both runtimes in `args.rounds` rounds."""
    rounds: dict[str, list[dict]] = {"openvino": [], "irrun": []}
    for _ in range(args.rounds):
        for side, found in rounds.items():
            found.append(_side(side, xml, feeds, args))
    sides = {side: steadiest(found) for side, found in rounds.items()}
    return {"network": name, "walls": {side: s["wall"] for side, s in sides.items()},
            "groups": groups(sides["irrun"]["steps"], sides["openvino"]["steps"])}


def steadiest(rounds: list[dict]) -> dict:
    """One runtime's rounds (fresh processes, alternating with the other runtime's) as one: each
    step at its lowest median of the rounds, the inference at its lowest (a shared machine's busy
    spells fall on one round and not the next; `run.py` keeps each runtime's fastest round so)."""
    lowest: dict[str, float] = {}
    for found in rounds:
        for step in found["steps"]:
            lowest[step["label"]] = min(lowest.get(step["label"], step["seconds"]), step["seconds"])
    steps = [{**step, "seconds": lowest[step["label"]]} for step in rounds[0]["steps"]]
    return {"steps": steps, "wall": min(found["wall"] for found in rounds)}


def _side(side: str, xml: Path, feeds: Path, args) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--side", side, str(xml), str(feeds),
           "--repeat", str(args.repeat)]
    env = dict(os.environ)
    if args.threads:
        cmd += ["--threads", str(args.threads)]
        env = with_threads(env, args.threads)
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"error: {side} on {xml.name}: {(done.stderr.strip().splitlines() or ['no message'])[-1]}")
    return json.loads(done.stdout)


def report(result: dict, top: int) -> str:
    found = result["groups"]
    ours, theirs = (sum(g[side] for g in found) for side in ("irrun", "openvino"))
    gap = ours - theirs
    walls = result["walls"]
    lines = [f"### {result['network']}: irrun {ours * 1e3:.2f} ms in its steps ({walls['irrun'] * 1e3:.2f} ms an "
             f"inference), OpenVINO {theirs * 1e3:.2f} ({walls['openvino'] * 1e3:.2f}): {gap * 1e3:+.2f} ms", "",
             "| group (irrun's steps) | irrun us | OpenVINO us | irrun/OV | difference us | of the difference |",
             "|---|---:|---:|---:|---:|---:|"]
    ranked = sorted(found, key=lambda g: g["openvino"] - g["irrun"])
    for g in ranked[:top]:
        ratio = f"{g['irrun'] / g['openvino']:.2f}" if g["openvino"] else "-"
        share = f"{(g['irrun'] - g['openvino']) / gap:.0%}" if gap > 0 else "-"
        lines.append(f"| {g['label']} | {g['irrun'] * 1e6:.0f} | {g['openvino'] * 1e6:.0f} | {ratio} | "
                     f"{(g['irrun'] - g['openvino']) * 1e6:+.0f} | {share} |")
    rest = ranked[top:]
    if rest:
        lines.append(f"| the other {len(rest)} groups | {sum(g['irrun'] for g in rest) * 1e6:.0f} | "
                     f"{sum(g['openvino'] for g in rest) * 1e6:.0f} | | "
                     f"{sum(g['irrun'] - g['openvino'] for g in rest) * 1e6:+.0f} | |")
    by_kind: dict[str, float] = {}
    for g in found:
        by_kind[g["kind"]] = by_kind.get(g["kind"], 0.0) + g["irrun"] - g["openvino"]
    kinds = sorted(by_kind.items(), key=lambda kv: -kv[1])
    lines += ["", "By kind: " + ", ".join(f"{kind} {seconds * 1e3:+.2f} ms" for kind, seconds in kinds), ""]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--networks", help="comma-separated (default: the compute-heavy ones of run.py)")
    parser.add_argument("--model", help="an IR of your own (model.xml) instead of the networks")
    parser.add_argument("--inputs", help="with --model: an .npz of its inputs, by name")
    parser.add_argument("--threads", type=int, help="irrun's threads and OpenVINO's INFERENCE_NUM_THREADS")
    parser.add_argument("--repeat", type=int, default=30, help="profiled runs per round (default 30)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds per runtime, alternating, each step's lowest median counting (default 3)")
    parser.add_argument("--top", type=int, default=10, help="groups shown per network (default 10)")
    parser.add_argument("--json", help="also write the groups of every network here")
    parser.add_argument("--side", choices=("irrun", "openvino"), help=argparse.SUPPRESS)
    parser.add_argument("side_xml", nargs="?", help=argparse.SUPPRESS)
    parser.add_argument("side_npz", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.rounds < 1:
        parser.error("--repeat and --rounds must be at least 1")
    if args.side:
        with np.load(args.side_npz) as npz:
            inputs = {k: npz[k] for k in npz.files}
        steps = irrun_steps if args.side == "irrun" else openvino_steps
        json.dump(steps(args.side_xml, inputs, args.threads, args.repeat), sys.stdout)
        return
    own = own_model(parser, args)
    if own:
        model, feeds = own
        results = [model_gaps(model.name, model, feeds, args)]
        print(report(results[0], args.top), flush=True)
    else:
        results = _networks_gaps(parser, args)
    if args.json:
        with atomic_write(args.json, "w") as f:
            json.dump(results, f, indent=1)


def _networks_gaps(parser, args) -> list[dict]:
    names = chosen_networks(parser, args.networks, [n for n in NETWORKS if n not in SMALL])
    results = []
    with tempfile.TemporaryDirectory(prefix="irrun-gaps-") as tmp:
        for name in names:
            results.append(network_gaps(name, Path(tmp), args))
            print(report(results[-1], args.top), flush=True)
    return results


if __name__ == "__main__":
    main()
