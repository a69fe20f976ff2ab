"""One network under two settings in one process, blocks of inferences alternating: B's time
against A's, block by block, so that the machine's drift (on the shared VMs the benchmarks run on,
tens of percent from one minute to the next) falls on both alike.

    python benchmarks/interleaved_ab.py --networks yolo_n,detector --env IRRUN_WINOGRAD=4
    python benchmarks/interleaved_ab.py --networks crnn --set irrun.ops.row_taps.ROW_TAP_MIN_GROUP_CHANNELS_AVX512=32
    python benchmarks/interleaved_ab.py --networks resnet18 --at-run --set irrun.ops.im2col.COLUMN_BLOCK_ELEMENTS=524288
    python benchmarks/interleaved_ab.py --model model.xml --inputs inputs.npz --set ...

A is the code as it is.  B is loaded with each `--set` (a module's constant, its value a Python
literal) and `--env` (an environment variable) in force, undone once it has run its first
inferences: what the code decides at load, at binding or when a paired run forks its worker
(irrun/process_pair.py, in a model's first runs) keeps them.  `--at-run` puts them in force around
each of B's blocks as well, for a constant read on every call (the worker, a process of its own,
keeps what it was forked with).  The model loaded second gains about 2% from that alone (stop 64:
two loads of the same model, 0.98): `--reverse` loads B first; take both orders.  Per network:
each setting's median over its blocks (each block's median inference), and the median and
quartiles of B/A block by block.  Stop 66's process-alternating runs of the same settings spread
over 0.87-1.27; these, over 0.93-1.03.
"""
from __future__ import annotations

import argparse
import ast
import gc
import importlib
import json
import os
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from irrun.arrays import atomic_write  # noqa: E402
from networks import build_ir, chosen_networks, own_model  # noqa: E402

WARM_UP_RUNS = 6        # (a paired run forks its worker after irrun.process_pair.PAIR_AFTER_RUNS)


def parse_setting(text: str) -> tuple[object, str, object]:
    """"package.module.NAME=literal" -> (the module, NAME, the value); ValueError saying why not."""
    target, equals, literal = text.partition("=")
    module_name, dot, name = target.strip().rpartition(".")
    if not equals or not dot or not name:
        raise ValueError(f"--set {text!r}: expected module.NAME=value")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"--set {text!r}: no module {module_name} ({exc})") from None
    if not hasattr(module, name):
        raise ValueError(f"--set {text!r}: {module_name} has no {name}")
    try:
        value = ast.literal_eval(literal.strip())
    except (ValueError, SyntaxError):
        raise ValueError(f"--set {text!r}: {literal.strip()!r} is not a Python literal") from None
    return module, name, value


def parse_env(text: str) -> tuple[str, str]:
    name, equals, value = text.partition("=")
    if not equals or not name.strip():
        raise ValueError(f"--env {text!r}: expected NAME=value")
    return name.strip(), value


@contextmanager
def in_force(settings: list, env: list):
    """The settings (`parse_setting`'s) and environment variables in force, as they were after."""
    before_settings = [(module, name, getattr(module, name)) for module, name, _ in settings]
    before_env = [(name, os.environ.get(name)) for name, _ in env]
    try:
        for module, name, value in settings:
            setattr(module, name, value)
        for name, value in env:
            os.environ[name] = value
        yield
    finally:
        for module, name, value in reversed(before_settings):
            setattr(module, name, value)
        for name, value in reversed(before_env):
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def compare(xml: str, inputs: dict, settings: list, env: list, *, blocks: int, runs: int,
            threads: int | None = None, at_run: bool = False, reverse: bool = False) -> dict:
    """{"a_ms", "b_ms", "ratio", "quartiles"}: the two settings' medians over their blocks and B/A."""
    import irrun
    differences = {"a": ([], []), "b": (settings, env)}

    def loaded(key: str):
        with in_force(*differences[key]):
            model = irrun.load(xml, threads=threads)
            for _ in range(WARM_UP_RUNS):
                model.infer(inputs)
        return model

    models = {key: loaded(key) for key in (("b", "a") if reverse else ("a", "b"))}
    model_a, model_b = models.pop("a"), models.pop("b")
    times = {"a": [], "b": []}

    def block(key: str, model) -> None:
        with in_force(*(differences[key] if at_run else differences["a"])):
            model.infer(inputs)        # (what the settings change warms up before the timings)
            seconds = []
            for _ in range(runs):
                start = time.perf_counter()
                model.infer(inputs)
                seconds.append(time.perf_counter() - start)
        times[key].append(statistics.median(seconds))

    for k in range(blocks):
        order = (("a", model_a), ("b", model_b)) if k % 2 == 0 else (("b", model_b), ("a", model_a))
        for key, model in order:
            block(key, model)
    del model_a, model_b
    gc.collect()
    ratios = sorted(b / a for a, b in zip(times["a"], times["b"]))
    quartiles = [float(np.quantile(ratios, q)) for q in (0.25, 0.75)]
    return {"a_ms": statistics.median(times["a"]) * 1e3, "b_ms": statistics.median(times["b"]) * 1e3,
            "ratio": statistics.median(ratios), "quartiles": quartiles}


def report(name: str, result: dict, blocks: int, runs: int) -> str:
    low, high = result["quartiles"]
    return (f"{name}: A {result['a_ms']:.2f} ms, B {result['b_ms']:.2f} ms ({blocks} blocks of {runs} "
            f"inferences each); B/A {result['ratio']:.3f} (quartiles {low:.3f}-{high:.3f})")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--networks", help="comma-separated names of run.py's networks")
    parser.add_argument("--model", help="an IR of your own (model.xml) instead of the networks")
    parser.add_argument("--inputs", help="with --model: an .npz of its inputs, by name")
    parser.add_argument("--set", action="append", default=[], metavar="MODULE.NAME=VALUE",
                        help="a constant B is loaded with (repeatable)")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable B is loaded with (repeatable)")
    parser.add_argument("--at-run", action="store_true", help="also in force around each of B's blocks")
    parser.add_argument("--reverse", action="store_true", help="load B first")
    parser.add_argument("--blocks", type=int, default=30, help="blocks of each setting (default 30)")
    parser.add_argument("--runs", type=int, default=6, help="timed inferences a block (default 6)")
    parser.add_argument("--threads", type=int, help="irrun's threads (default: irrun's own)")
    parser.add_argument("--json", help="also write every network's result here")
    args = parser.parse_args(argv)
    if args.blocks < 1 or args.runs < 1:
        parser.error("--blocks and --runs must be at least 1")
    if not args.set and not args.env:
        parser.error("give B something to differ by: --set and/or --env")
    try:
        settings = [parse_setting(text) for text in args.set]
        env = [parse_env(text) for text in args.env]
    except ValueError as exc:
        parser.error(str(exc))
    options = dict(blocks=args.blocks, runs=args.runs, threads=args.threads, at_run=args.at_run,
                   reverse=args.reverse)
    results = {}
    own = own_model(parser, args)
    if own:
        model, feeds = own
        with np.load(feeds) as npz:
            inputs = {k: npz[k] for k in npz.files}
        results[model.name] = compare(str(model), inputs, settings, env, **options)
        print(report(model.name, results[model.name], args.blocks, args.runs), flush=True)
    else:
        if not args.networks:
            parser.error("give --networks (comma-separated) or --model with --inputs")
        names = chosen_networks(parser, args.networks, [])
        with tempfile.TemporaryDirectory(prefix="irrun-ab-") as tmp:
            for name in names:
                xml, inputs = build_ir(name, Path(tmp))
                results[name] = compare(str(xml), inputs, settings, env, **options)
                print(report(name, results[name], args.blocks, args.runs), flush=True)
    if args.json:
        with atomic_write(args.json, "w") as f:
            json.dump({"settings": args.set, "env": args.env, "at_run": args.at_run, "reverse": args.reverse,
                       "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
