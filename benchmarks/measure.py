"""Measure one runtime on one model, in a process of its own; prints one JSON object.

    python benchmarks/measure.py irrun|openvino|onnx MODEL INPUTS.npz OUTPUTS.npz [--repeat N] [--budget S]

A fresh process per (runtime, model) keeps peak RSS honest: the runtime's
module is imported first, then the peak-RSS counter is reset, so `peak_mib`
is the process's high-water mark while it loads and runs the model, and
`added_mib` that peak minus the resident size just before loading.

Timings: `load_s` is from the imported module to the end of the first
inference (irrun.load + infer; Core() + read_model + compile_model + infer;
ReferenceEvaluator() + run).  After two untimed warm-up runs, `median_s` is the
median of `repeat` further inferences, fewer once `budget` seconds are spent (at
least 3), more while they add up to less than `min_seconds` (a network that runs
in a millisecond needs hundreds of runs for a steady median).
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np


def _status_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def private_kib(pid: int) -> int:
    """Memory process `pid` holds alone (its private pages, clean and dirty), from smaps_rollup."""
    total = 0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith(("Private_Clean:", "Private_Dirty:")):
                total += int(line.split()[1])
    except OSError:
        pass
    return total


def reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False where that is not possible."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_kib() -> int:
    hwm = _status_kib("VmHWM")
    return hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


# ---------------------------------------------------------------- runtimes: load() -> (run(inputs) -> list of
# arrays, the loaded model, reset() of its state or None)

def load_irrun(path: str, threads: int | None = None, compressed_weights: str = "auto"):
    import irrun
    model = irrun.load(path, threads=threads, compressed_weights=compressed_weights)
    return lambda inputs: list(model.infer(inputs).values()), model, model.reset_state


def openvino_config(threads: int | None = None) -> dict:
    """OpenVINO's CPU configuration for the arithmetic irrun does, as the tests' oracle computes it
    (tests/ovutil.py, CPU_F32_EXACT): f32, not the bf16 of an AMX machine; no int8 quantization of
    the activations that meet compressed weights, no u8 KV cache (OpenVINO's defaults there: the
    int4 decoder step's logits 0.037 off, 0.40 instead of 0.47 ms)."""
    config = {"INFERENCE_PRECISION_HINT": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0", "KV_CACHE_PRECISION": "f32"}
    if threads:
        config["INFERENCE_NUM_THREADS"] = threads
    return config


def with_threads(env: dict, threads: int) -> dict:
    """`env` for a process of `threads` threads: irrun's, BLAS's and OpenMP's counts (OpenVINO's is
    its INFERENCE_NUM_THREADS, `openvino_config`)."""
    return {**env, **{var: str(threads) for var in ("IRRUN_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                                      "MKL_NUM_THREADS")}}


def load_openvino(path: str, threads: int | None = None):
    import openvino as ov
    core = ov.Core()
    compiled = core.compile_model(core.read_model(path), "CPU", openvino_config(threads))
    request = compiled.create_infer_request()

    def run(inputs):
        request.infer(inputs)
        return [request.get_output_tensor(i).data for i in range(len(compiled.outputs))]
    return run, compiled, request.reset_state


def load_onnx(path: str, threads: int | None = None):
    from onnx.reference import ReferenceEvaluator
    evaluator = ReferenceEvaluator(path)
    return lambda inputs: evaluator.run(None, inputs), evaluator, None


def generating(run: Callable, reset: Callable, tokens: int) -> Callable:
    """`run` made a greedy generation of `tokens` tokens from a prompt, one call a token, by
    optimum-intel's stateful LLM IRs (tests/greedy_decoding.py, which the tests run both runtimes
    with): the state reset, the prompt's inputs in, the next token's after; returns the prompt's
    logits and the ids generated."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from greedy_decoding import decode

    def generate(prompt):
        reset()
        ids, first = decode(lambda feeds: run(feeds)[0], prompt, tokens)
        return [first, np.array(ids, np.int64)]
    return generate


LOADERS = {"irrun": load_irrun, "openvino": load_openvino, "onnx": load_onnx}
MODULES = {"irrun": "irrun", "openvino": "openvino", "onnx": "onnx.reference"}


# ---------------------------------------------------------------- irrun extras

def live_set_bytes(plan) -> int:
    """Largest total size of intermediates alive at once in an irrun plan (static sizes only)."""
    sizes = {s: n for step in plan.steps for s, n in zip(step.outputs, step.out_nbytes) if n}
    live, peak = 0, 0
    for step in plan.steps:
        live += sum(sizes.get(s, 0) for s in step.outputs)
        peak = max(peak, live)
        live -= sum(sizes.get(s, 0) for s in step.free)
    return peak


def constant_bytes(plan) -> int:
    """Bytes the plan's constants hold, each buffer counted once (mapped weights included)."""
    seen, total = set(), 0
    for value in plan.constants.values():
        base = value
        while isinstance(base, np.ndarray) and base.base is not None and isinstance(base.base, np.ndarray):
            base = base.base
        if id(base) not in seen:
            seen.add(id(base))
            # (a table Gathers read by rows holds its compressed source, not its f32 value)
            total += base.nbytes if isinstance(base, np.ndarray) else getattr(value, "held_bytes", value.nbytes)
    return total


def executor_overhead_us(model, inputs, repeat: int = 50) -> float | None:
    """Per layer run, what irrun's executor costs around the kernels: the plan's own loop timed with
    every kernel swapped for one that does nothing, over the layers it runs (a fused step runs
    several: irrun/optimize.py) (static plans only; None otherwise)."""
    plan = model._plan
    program = getattr(plan, "_program", None)    # (older plans have no program to swap)
    if program is None or plan.dynamic or not plan.steps:
        return None
    feeds = model._feeds(inputs)
    # (plans that write their loop out as code make it again from the program: irrun/fast_loop.py)
    recompile = getattr(plan, "compile_program", lambda: None)
    plan._program = [(_nothing,) + entry[1:] for entry in program]
    recompile()
    # (the one-process loop: a paired run has programs of its own, and a pair made now would be
    # made from the swapped kernels)
    pair = getattr(plan, "_pair", None)
    plan._pair = False
    try:
        best = min(_timed(lambda: plan.run(feeds)) for _ in range(repeat))
    finally:
        plan._program = program
        recompile()
        plan._pair = pair
    return best / len(getattr(plan, "layer_steps", plan.steps)) * 1e6


def _nothing(*args):
    return None


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def irrun_details(model, inputs) -> dict:
    plan = model._plan
    timings: list = []
    model.infer(inputs, profile=timings)
    by_type: dict[str, float] = {}
    for layer, seconds in timings:
        by_type[layer.op_type] = by_type.get(layer.op_type, 0.0) + seconds
    return {"steps": len(plan.steps), "layers": len(getattr(plan, "layer_steps", plan.steps)),
            "live_set_mib": live_set_bytes(plan) / 2**20,
            "constants_mib": constant_bytes(plan) / 2**20, "overhead_us": executor_overhead_us(model, inputs),
            "profile": sorted(by_type.items(), key=lambda kv: -kv[1])}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("runtime", choices=sorted(LOADERS))
    parser.add_argument("model")
    parser.add_argument("inputs")
    parser.add_argument("outputs")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--budget", type=float, default=20.0)
    parser.add_argument("--min-seconds", type=float, default=1.0)
    parser.add_argument("--threads", type=int, help="irrun's threads / OpenVINO's INFERENCE_NUM_THREADS")
    parser.add_argument("--compressed-weights", default="auto", help="irrun's (auto, decompress, keep)")
    parser.add_argument("--generate", type=int, metavar="TOKENS",
                        help="a run is a greedy generation of this many tokens from the inputs (a prompt)")
    args = parser.parse_args()

    __import__(MODULES[args.runtime])
    with np.load(args.inputs) as npz:
        inputs = {k: npz[k] for k in npz.files}
    exact_peak = reset_peak()
    before = _status_kib("VmRSS") or 0

    start = time.perf_counter()
    options = {"compressed_weights": args.compressed_weights} if args.runtime == "irrun" else {}
    run, handle, reset = LOADERS[args.runtime](args.model, args.threads, **options)
    if args.generate:
        run = generating(run, reset, args.generate)
    outputs = run(inputs)
    load = time.perf_counter() - start
    np.savez(args.outputs, *[np.asarray(o) for o in outputs])

    def more() -> bool:
        elapsed = time.perf_counter() - spent
        if len(times) < args.repeat:
            return len(times) < 3 or elapsed < args.budget
        return elapsed < args.min_seconds and len(times) < 100_000

    for _ in range(2):
        run(inputs)
    times: list[float] = []
    spent = time.perf_counter()
    while more():
        t = time.perf_counter()
        run(inputs)
        times.append(time.perf_counter() - t)
    peak = peak_kib()
    # irrun's second process (irrun/process_pair.py): what it holds beyond the pages it shares
    # with this one (its own copies of the values both compute) counts towards the peak
    pair = getattr(getattr(handle, "_plan", None), "_pair", None) if args.runtime == "irrun" else None
    second = private_kib(pair.pid) if pair else 0
    peak += second
    result = {"load_s": load, "median_s": statistics.median(times), "best_s": min(times), "runs": len(times),
              "calls_per_run": args.generate or 1,
              "peak_mib": peak / 1024, "added_mib": (peak - before) / 1024 if exact_peak else None}
    if args.runtime == "irrun":
        result["second_process_mib"] = second / 1024
        if args.generate:
            handle.reset_state()        # (the profile's run takes the prompt)
        result.update(irrun_details(handle, inputs))
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
