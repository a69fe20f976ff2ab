"""Where a paired run's halves lose: each step a network runs in halves on two processes
(irrun/process_pair.py), its two halves timed one after the other in the parent against the whole
step, all on one core.

    python benchmarks/pair_halves.py [--networks yolo_n,crnn] [--repeat 50] [--top 10] [--json halves.json]
    python benchmarks/pair_halves.py --model model.xml --inputs inputs.npz     # an IR of your own

A paired run is as fast as its slower half of each split step allows; cut perfectly, each half
takes half of the whole step's time.  Each network runs in a process of its own, on two threads,
until it pairs; then, its worker asleep (so that nothing runs beside the timings), each split
step's halves and the whole step run on the inputs of a paired run's step, BLAS on one thread and
no parts, as in a paired run, `--repeat` times each, medians counting.  Per network: the split
steps, the most time beyond half of the whole first (the larger half's "excess"), with the axis
and place of the cut (irrun/split_steps.py, irrun/convolution_halves.py); then the totals: the
whole steps', the halves', and the larger halves' (what a paired run waits for).  Stop 54 found
with it the halves of Winograd layers computing by the direct kernels, and a stem's halves each
making all of its columns.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from irrun.arrays import atomic_write  # noqa: E402
from networks import NETWORKS, build_ir, chosen_networks, own_model  # noqa: E402

def _median_seconds(calls) -> float:
    """The median time of `calls` (callables of no arguments), each timed alone."""
    times = []
    for call in calls:
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _data_copied(args: list, constant: list[bool]) -> list:
    """A step's arguments with its data copied (later steps write over their buffers, and a whole
    step may write over its own) and its constants as the plan holds them, in the layouts its
    kernels read."""
    return [a.copy() if isinstance(a, np.ndarray) and not held else a for a, held in zip(args, constant)]


def split_steps(xml: str, inputs: dict, repeat: int) -> dict:
    """{"paired": bool, "steps": [{"name", "type", "axis", "middle", "data", "output", "first", "second",
    "whole"}]} for one IR, in this process (shapes of its first input and of its output)."""
    import irrun
    from irrun import pairing, process_pair, threads
    captured: dict[int, tuple] = {}       # split index -> (its step's arguments in a paired run, which are constants)
    kernel_of = process_pair.Pair._kernel

    def capturing(pair, j, halves, final, side, firsts=None):
        kernel = kernel_of(pair, j, halves, final, side, firsts)
        if side:
            return kernel
        plan = model._plan
        step = plan._program_steps[pair.splits[j].position]
        constant = [slot in plan.constants for slot in step.inputs]

        def parent_kernel(*args):
            if j not in captured:
                captured[j] = (_data_copied(args, constant), constant)
            return kernel(*args)
        return parent_kernel
    process_pair.Pair._kernel = capturing
    model = irrun.load(xml, threads=pairing.PAIRED_THREADS)
    for _ in range(process_pair.PAIR_AFTER_RUNS + 2):
        model.infer(inputs)
    plan = model._plan
    pair = plan._pair
    if not pair:
        return {"paired": False, "steps": []}
    pair.sleep()
    found = []
    with threads.parts_off(), threads.single_threaded_blas():
        for j, split in enumerate(pair.splits):
            if j not in captured:
                continue
            args, constant = captured[j]
            middle, (first, second) = process_pair._halves(split, process_pair._arena_view(pair.arena, split))
            if split.two_phase is not None:
                # (each half with its first phase: its share of what both halves read, computed
                # into the pair's scratch memory; the other's share is the last run's there)
                phases = split.two_phase.firsts(middle)
                first, second = _after(phases[0], first), _after(phases[1], second)
            whole = plan._program[split.position][0]
            # (each whole call on data of its own, copied before the timings)
            wholes = [partial(whole, *_data_copied(args, constant)) for _ in range(repeat)]
            layer = plan._program_steps[split.position].node.layer
            found.append({"name": layer.name, "type": layer.op_type, "axis": split.axis, "middle": middle,
                          "data": list(getattr(args[0], "shape", ())), "output": list(split.final_shape),
                          "first": _median_seconds([partial(first, args)] * repeat),
                          "second": _median_seconds([partial(second, args)] * repeat),
                          "whole": _median_seconds(wholes)})
    return {"paired": True, "steps": found}


def _after(phase, half):
    """half(args) with `phase(args)` before it."""
    def both(args):
        phase(args)
        half(args)
    return both


def _measured(xml: Path, feeds: Path, repeat: int) -> dict:
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--side", str(xml), str(feeds),
                           "--repeat", str(repeat)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"error: {xml.name}: {(done.stderr.strip().splitlines() or ['no message'])[-1]}")
    return json.loads(done.stdout)


def report(name: str, result: dict, top: int) -> str:
    if not result["paired"]:
        return f"### {name}: runs in one process (no split steps)\n"
    steps = result["steps"]
    for s in steps:
        s["excess"] = max(s["first"], s["second"]) - s["whole"] / 2
    wholes, halves = sum(s["whole"] for s in steps), sum(s["first"] + s["second"] for s in steps)
    larger = sum(max(s["first"], s["second"]) for s in steps)
    lines = [f"### {name}: {len(steps)} split steps, whole {wholes * 1e3:.2f} ms, halves {halves * 1e3:.2f}, "
             f"larger halves {larger * 1e3:.2f} ({larger / wholes:.2f} of the whole; 0.50 cut perfectly)", "",
             "| step | type | data -> output | cut (axis @ middle) | whole us | halves us | larger half / whole | "
             "excess us |",
             "|---|---|---|---|---:|---:|---:|---:|"]
    for s in sorted(steps, key=lambda s: -s["excess"])[:top]:
        cut = f"{s['axis']} @ {s['middle'] if s['middle'] is not None else 'middle'}"
        shapes = f"{_dims(s.get('data'))} -> {_dims(s.get('output'))}"
        lines.append(f"| {s['name']} | {s['type']} | {shapes} | {cut} | {s['whole'] * 1e6:.0f} | {s['first'] * 1e6:.0f} + "
                     f"{s['second'] * 1e6:.0f} | {max(s['first'], s['second']) / s['whole']:.2f} | "
                     f"{s['excess'] * 1e6:+.0f} |")
    return "\n".join(lines) + "\n"


def _dims(shape) -> str:
    return "[" + ",".join(str(n) for n in shape) + "]" if shape is not None else "?"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--networks", help="comma-separated (default: run.py's; those that stay in one process "
                        "say so)")
    parser.add_argument("--model", help="an IR of your own (model.xml) instead of the networks")
    parser.add_argument("--inputs", help="with --model: an .npz of its inputs, by name")
    parser.add_argument("--repeat", type=int, default=50, help="timed runs of each half and step (default 50)")
    parser.add_argument("--top", type=int, default=10, help="steps shown per network (default 10)")
    parser.add_argument("--json", help="also write every network's steps here")
    parser.add_argument("--side", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("side_xml", nargs="?", help=argparse.SUPPRESS)
    parser.add_argument("side_npz", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.side:
        with np.load(args.side_npz) as npz:
            inputs = {k: npz[k] for k in npz.files}
        json.dump(split_steps(args.side_xml, inputs, args.repeat), sys.stdout)
        return
    results = {}
    own = own_model(parser, args)
    if own:
        model, feeds = own
        results[model.name] = _measured(model, feeds, args.repeat)
        print(report(model.name, results[model.name], args.top), flush=True)
    else:
        names = chosen_networks(parser, args.networks, NETWORKS)
        with tempfile.TemporaryDirectory(prefix="irrun-halves-") as tmp:
            for name in names:
                xml, inputs = build_ir(name, Path(tmp))
                feeds = Path(tmp) / f"{name}.inputs.npz"
                np.savez(feeds, **inputs)
                results[name] = _measured(xml, feeds, args.repeat)
                print(report(name, results[name], args.top), flush=True)
    if args.json:
        with atomic_write(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
