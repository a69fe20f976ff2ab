"""Benchmark irrun against OpenVINO (CPU, f32) and ONNX's ReferenceEvaluator on the same networks.

    pip install ".[test]" && python benchmarks/run.py [--quick] [--threads 1] [--networks resnet18,detector]

Builds each network of `benchmarks/networks.py` with openvino's Python API
(and the same weights with onnx.helper, when `onnx` is importable), saves it
as IR (the LLM generations take optimum-intel's exports from tests/models/exported,
a run being a greedy generation of 32 tokens, one call a token), then runs every runtime in a process of its own (`measure.py`):
median latency at batch 1, load + first inference, and peak RSS.  Three
rounds per network alternate the runtimes, each round in fresh processes;
each runtime's round with the lowest median counts (a shared machine has
busy spells that would otherwise fall on one runtime and not the other).  Prints
Markdown tables: latency, load and memory, convolution GFLOP/s against
numpy.matmul on the same GEMM, and where irrun's time goes per network.
Each output is checked against OpenVINO's (max relative error).  Before and
after, a second's probe of the machine's state (`machine_state.py`: memory and
cache bandwidth, a NumPy call's cost, GEMM speed, what two threads gain), which
`--json` keeps under "_machine".

The default run takes about 3 minutes on 2 cores (longer on a busy machine),
`--quick` (one round, 5 repeats, no f16 ResNet) under one.  On a machine other work shares, multi-threaded BLAS
stalls whenever a core is taken: `--threads 1` gives both runtimes one thread
and steadier numbers.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import irrun
from irrun.compressed_products import MODES as COMPRESSED_WEIGHTS_MODES

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))   # (measure, networks and machine_state, also where imported as a module)

from machine_state import describe, median_seconds, probe  # noqa: E402
from measure import with_threads  # noqa: E402
from networks import GENERATIONS, NETWORKS, ON_REQUEST, QUICK, build_ir, build_onnx  # noqa: E402

RUNTIMES = ("irrun", "openvino", "onnx")
ALL_NETWORKS = [*NETWORKS, *GENERATIONS, "digits"]


# ---------------------------------------------------------------- the machine

def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _memory_gib() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30


def blas() -> str:
    """The BLAS NumPy was built with, its thread count and the kernels it chose where threadpoolctl
    can tell (OpenBLAS's AVX2 kernels run GEMMs at half the speed of its AVX-512 ones on a CPU that
    has both), and OPENBLAS_CORETYPE where the environment forces OpenBLAS's choice."""
    try:
        info = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        name = f"{info.get('name')} {info.get('version', '')}".strip()
    except Exception:  # noqa: BLE001 - only descriptive
        name = "unknown BLAS"
    try:
        from threadpoolctl import threadpool_info
        found = [p for p in threadpool_info() if p.get("user_api") == "blas"]
        if found:
            name += ", " + ", ".join(f"{p['internal_api']} {p['num_threads']} threads"
                                     + (f", {p['architecture']} kernels" if p.get("architecture") else "")
                                     for p in found)
    except ImportError:
        pass
    forced = os.environ.get("OPENBLAS_CORETYPE")
    return name + (f"; OPENBLAS_CORETYPE={forced}" if forced else "")


def machine() -> str:
    import openvino as ov
    versions = [f"numpy {np.__version__} ({blas()})", f"openvino {ov.__version__.split('-')[0]}",
                f"irrun {irrun.__version__}", f"Python {platform.python_version()}"]
    if _onnx_available():
        import onnx
        versions.append(f"onnx {onnx.__version__}")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{_cpu_name()}, {os.cpu_count()} cores, {_memory_gib():.0f} GiB; load average {load:.1f} at start\n"
            + "; ".join(versions))


def _onnx_available() -> bool:
    try:
        import onnx.reference  # noqa: F401
        return True
    except ImportError:
        return False


# ---------------------------------------------------------------- one network

def measure(runtime: str, model: Path, inputs: Path, outputs: Path, args, generate: int | None = None) -> dict:
    cmd = [sys.executable, str(HERE / "measure.py"), runtime, str(model), str(inputs), str(outputs),
           "--repeat", str(args.repeat), "--budget", str(args.budget)]
    if generate:
        cmd += ["--generate", str(generate)]
    # Compiled bytecode is cached (in a directory of this run) as after `pip install`, even where
    # PYTHONDONTWRITEBYTECODE is set: load times then do not include compiling irrun's sources.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(outputs.parent / "pycache")
    if not args.optimize:
        env["IRRUN_OPTIMIZE"] = "0"
    if args.threads:
        cmd += ["--threads", str(args.threads)]
        env = with_threads(env, args.threads)
    if runtime == "irrun":
        cmd += ["--compressed-weights", args.compressed_weights]
    timeout = args.timeout
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return {"error": last}
    return json.loads(done.stdout)


def warm_up(workdir: Path, args) -> None:
    """Load the digits sample once per runtime and throw the numbers away: bytecode compiled and
    cached, shared libraries and the model files in the OS cache, for every later measurement."""
    xml, inputs = build_ir("digits", workdir)
    feeds = workdir / "warm-up.inputs.npz"
    np.savez(feeds, **inputs)
    for runtime in ("openvino", "irrun"):
        measure(runtime, xml, feeds, workdir / f"warm-up.{runtime}.npz", argparse.Namespace(**{**vars(args), "repeat": 1}))


def max_relative_error(ours: Path, reference: Path) -> float | None:
    """max |a - b| / max |b| over the outputs, in order."""
    if not (ours.exists() and reference.exists()):
        return None
    with np.load(ours) as a, np.load(reference) as b:
        errors = []
        for key in b.files:
            x, y = a[key].astype(np.float64), b[key].astype(np.float64)
            if x.shape != y.shape:
                return float("inf")
            errors.append(np.abs(x - y).max(initial=0) / max(np.abs(y).max(initial=0), 1e-30))
    return max(errors, default=0.0)


def _steadier(kept: dict | None, new: dict) -> dict:
    """Of two rounds (fresh processes) of one runtime, the one with the lower median; the lower load
    time of the two, the higher peak RSS and error.  On a shared machine a round can fall in a
    busy spell of the neighbours: rounds alternate between the runtimes, so each gets its quiet
    spells."""
    if kept is None or "error" in kept:
        return new
    if "error" in new:
        return kept
    best = dict(new if new["median_s"] < kept["median_s"] else kept)
    for key in ("load_s", "best_s"):
        best[key] = min(kept[key], new[key])
    for key in ("peak_mib", "added_mib", "error_vs_openvino"):
        values = [r[key] for r in (kept, new) if r.get(key) is not None]
        if values:
            best[key] = max(values)
    best["rounds"] = kept.get("rounds", 1) + 1
    return best


def bench_network(name: str, workdir: Path, args) -> dict:
    xml, inputs = build_ir(name, workdir)
    feeds = workdir / f"{name}.inputs.npz"
    np.savez(feeds, **inputs)
    files = {"openvino": xml, "irrun": xml}    # OpenVINO first: its outputs are the reference
    if args.onnx:
        onnx_file = build_onnx(name, workdir) if not NETWORKS.get(name, (None, False))[1] else None
        if onnx_file is not None:
            files["onnx"] = onnx_file
    results = {}
    for round_ in range(args.rounds):
        for runtime, model in files.items():
            if runtime == "onnx" and round_:
                continue                       # (seconds per inference: one round says enough)
            out = workdir / f"{name}.{runtime}.out.npz"
            result = measure(runtime, model, feeds, out, args, GENERATIONS.get(name, (None, None))[1])
            if runtime != "openvino":
                result["error_vs_openvino"] = max_relative_error(out, workdir / f"{name}.openvino.out.npz")
            results[runtime] = _steadier(results.get(runtime), result)
    results["weights_mib"] = xml.with_suffix(".bin").stat().st_size / 2**20
    return results


# ---------------------------------------------------------------- convolution vs matmul

# One layer per shape class: (class, groups, C_in per group, C_out per group, spatial, kernel, stride, pad,
# dilation, transposed).  The GEMM it is compared with is the one im2col would run:
# groups x [C_out x C_in * K] @ [C_in * K x positions] (for a transposed one, [C_out * K x C_in] @ [C_in x inputs]).
CONV_SHAPES = [
    ("thin first layer (ResNet stem)", 1, 3, 64, (224, 224), (7, 7), 2, 3, 1, False),
    ("thin first layer (detector)", 1, 3, 16, (320, 640), (3, 3), 2, 1, 1, False),
    ("3x3, 64 ch (Winograd F(4,3))", 1, 64, 64, (56, 56), (3, 3), 1, 1, 1, False),
    ("3x3, 128 ch (Winograd F(2,3))", 1, 128, 128, (28, 28), (3, 3), 1, 1, 1, False),
    ("3x3, 256 ch (Winograd F(2,3))", 1, 256, 256, (14, 14), (3, 3), 1, 1, 1, False),
    ("3x3, 512 ch", 1, 512, 512, (7, 7), (3, 3), 1, 1, 1, False),
    ("3x3, 16 ch (detector)", 1, 16, 16, (160, 320), (3, 3), 1, 1, 1, False),
    ("1x1", 1, 64, 256, (56, 56), (1, 1), 1, 0, 1, False),
    ("strided 3x3", 1, 64, 128, (56, 56), (3, 3), 2, 1, 1, False),
    ("dilated 3x3", 1, 64, 64, (56, 56), (3, 3), 1, 2, 2, False),
    ("grouped (8 x 16 ch)", 8, 16, 16, (56, 56), (3, 3), 1, 1, 1, False),
    ("grouped (4 x 32 ch, ResNeXt-style)", 4, 32, 32, (56, 56), (3, 3), 1, 1, 1, False),
    ("depthwise 3x3", 96, 1, 1, (56, 56), (3, 3), 1, 1, 1, False),
    ("depthwise 5x5 / 2", 240, 1, 1, (28, 28), (5, 5), 2, 2, 1, False),
    ("1-D, 1 ch, 512 taps / 4", 1, 1, 64, (16000,), (512,), 4, 0, 1, False),
    ("backprop-data 4x4 / 2", 1, 64, 32, (28, 28), (4, 4), 2, 1, 1, True),
]


def conv_vs_matmul(workdir: Path, repeat: int, threads: int | None = None) -> list[tuple]:
    """Per conv shape class: GFLOP/s of irrun's convolution and of numpy.matmul on the same GEMM,
    with the threads irrun uses (BLAS included): (class, GEMM, the layer's rate, the one-layer
    model's inference's rate, matmul's rate).  The layer is timed as `irrun profile` times it, by
    the executor's per-step observer; the inference also copies the input into a paired run's
    shared memory and the result out of it (`process_pair`), which a layer inside a network does
    not: around the 1x1 class's 3 MiB result, 0.4 ms of its 1.0 ms inference."""
    import openvino as ov
    import openvino.opset13 as ops
    from irrun import threads as pool
    rng = np.random.default_rng(0)
    rows = []
    for label, groups, cin, cout, spatial, kernel, s, pad, dil, transposed in CONV_SHAPES:
        rank = len(spatial)
        x = ops.parameter([1, groups * cin, *spatial], ov.Type.f32, name="x")
        taps = int(np.prod(kernel))
        if transposed:
            w = rng.standard_normal((groups * cin, cout, *kernel), dtype=np.float32)
            y = ops.convolution_backprop_data(x, ops.constant(w), [s] * rank, None, [pad] * rank, [pad] * rank,
                                              [dil] * rank)
        elif groups == 1:
            w = rng.standard_normal((cout, cin, *kernel), dtype=np.float32)
            y = ops.convolution(x, ops.constant(w), [s] * rank, [pad] * rank, [pad] * rank, [dil] * rank)
        else:
            w = rng.standard_normal((groups, cout, cin, *kernel), dtype=np.float32)
            y = ops.group_convolution(x, ops.constant(w), [s] * rank, [pad] * rank, [pad] * rank, [dil] * rank)
        xml = workdir / f"conv_{len(rows)}.xml"
        ov.save_model(ov.Model([ops.result(y)], [x], "conv"), str(xml), compress_to_fp16=False)
        model = irrun.load(xml, threads=threads)
        data = rng.standard_normal((1, groups * cin, *spatial), dtype=np.float32)
        out_shape = model.outputs[0].shape
        positions = int(np.prod(out_shape[2:]))
        if transposed:
            m, k, n = cout * taps, cin, int(np.prod(spatial))
        else:
            m, k, n = cout, cin * taps, positions
        rows.append((label, f"{groups}x[{m}x{k}x{n}]" if groups > 1 else f"{m}x{k}x{n}", (model, data),
                     (groups, m, k, n, 2 * groups * m * k * n)))
    # Timed once every model is built and OpenVINO's threads (it saved them) have gone quiet: its
    # worker threads, like OpenBLAS's, spin for a while after work, beside the pool's parts.  (A
    # pause before each class as well made them slower: a vCPU idle for 0.5 s wakes slowly.)
    time.sleep(1.0)
    # Two passes over the classes, each class's faster median counting: the first class timed
    # read 37-122 GFLOP/s in one pass (the ResNet stem; 217-247 in a loop of its own and in the
    # second pass), also with every class run three times before
    best = [float("inf")] * len(rows)
    best_layer = [float("inf")] * len(rows)
    for _ in range(2):
        for i, (_, _, (model, data), _) in enumerate(rows):
            best[i] = min(best[i], median_seconds(lambda: model.infer(data), repeat))
            best_layer[i] = min(best_layer[i], _layer_seconds(model, data, repeat))
    for i, (label, gemm, _, shape) in enumerate(rows):
        rows[i] = (label, gemm, (shape[-1] / best_layer[i] / 1e9, shape[-1] / best[i] / 1e9), shape)
    # The GEMMs after every convolution: OpenBLAS's threads, once they have worked, spin beside the
    # parts of irrun's pool for a while (up to half a second here) and would slow the next ones
    for i, (label, gemm, conv_rate, (groups, m, k, n, flops)) in enumerate(rows):
        a = rng.standard_normal((groups, m, k), dtype=np.float32)
        b = rng.standard_normal((groups, k, n), dtype=np.float32)
        out = np.empty((groups, m, n), np.float32)
        gemm_s = median_seconds(lambda: np.matmul(a, b, out=out), repeat)
        rows[i] = (label, gemm, *conv_rate, flops / gemm_s / 1e9)
    pool.set_threads(None)
    return rows


def _layer_seconds(model, data, repeat: int) -> float:
    """The median time of the one-layer model's convolution over `repeat` profiled inferences."""
    times = []
    for _ in range(repeat + 1):
        timings: list = []
        model.infer(data, profile=timings)
        times.append(sum(seconds for layer, seconds in timings if "Convolution" in layer.op_type))
    return statistics.median(times[1:])


# ---------------------------------------------------------------- report

def _ms(r: dict, key: str) -> str:
    return f"{r[key] * 1e3:.2f}" if key in r else r.get("error", "-")


def _ratio(a: dict, b: dict, key: str) -> str:
    return f"{a[key] / b[key]:.1f}x" if key in a and key in b else "-"


def _mib(r: dict, key: str) -> str:
    return f"{r[key]:.0f}" if r.get(key) is not None else "-"


def _err(r: dict) -> str:
    e = r.get("error_vs_openvino")
    return "-" if e is None else f"{e:.1e}"


def print_tables(results: dict[str, dict], onnx: bool) -> None:
    print("### Latency (median, batch 1; of each runtime's rounds, the lowest median)\n")
    head = "| network | layers (steps) | irrun ms | OpenVINO ms | irrun/OV | best irrun/OV | us/layer | " \
           "executor us/layer |"
    rule = "|---|---:|---:|---:|---:|---:|---:|---:|"
    if onnx:
        head, rule = head + " ONNX ref ms | ONNX/OV |", rule + "---:|---:|"
    print(head + " max rel. error vs OV |")
    print(rule + "---:|")
    for name, r in results.items():
        ir, ov = r["irrun"], r["openvino"]
        layers = ir.get("layers", ir.get("steps"))
        per_layer = f"{ir['median_s'] / layers / ir.get('calls_per_run', 1) * 1e6:.2f}" \
            if layers and "median_s" in ir else "-"
        overhead = f"{ir['overhead_us']:.2f}" if ir.get("overhead_us") is not None else "-"
        counted = f"{layers} ({ir['steps']})" if layers and layers != ir.get("steps") else ir.get("steps", "-")
        line = f"| {name} | {counted} | {_ms(ir, 'median_s')} | {_ms(ov, 'median_s')} | " \
               f"{_ratio(ir, ov, 'median_s')} | {_ratio(ir, ov, 'best_s')} | {per_layer} | {overhead} |"
        if onnx:
            ox = r.get("onnx", {"error": "n/a"})
            line += f" {_ms(ox, 'median_s')} | {_ratio(ox, ov, 'median_s')} |"
        print(line + f" {_err(ir)} |")

    print("\n### Load + first inference, peak RSS\n")
    print("| network | weights MiB | irrun load+1st ms | OV load+1st ms | irrun/OV | irrun peak (added) MiB | "
          "OV peak (added) MiB | irrun bound MiB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        ir, ov = r["irrun"], r["openvino"]
        bound = ir["constants_mib"] + ir["live_set_mib"] if "live_set_mib" in ir else None
        print(f"| {name} | {r['weights_mib']:.1f} | {_ms(ir, 'load_s')} | {_ms(ov, 'load_s')} | "
              f"{_ratio(ir, ov, 'load_s')} | {_mib(ir, 'peak_mib')} ({_mib(ir, 'added_mib')}) | "
              f"{_mib(ov, 'peak_mib')} ({_mib(ov, 'added_mib')}) | {'-' if bound is None else f'{bound:.0f}'} |")


def print_profiles(results: dict[str, dict]) -> None:
    print("\n### Where irrun's time goes (one profiled inference, top op types)\n")
    for name, r in results.items():
        profile = r["irrun"].get("profile")
        if profile:
            total = sum(t for _, t in profile) or 1e-12
            top = ", ".join(f"{op} {t * 1e3:.1f} ms ({t / total:.0%})" for op, t in profile[:5])
            print(f"- {name}: {top}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 repeats, 3 s per runtime, no f16 ResNet")
    parser.add_argument("--repeat", type=int, help="inferences timed per runtime (default 20, quick 5)")
    parser.add_argument("--budget", type=float, help="seconds per runtime and network before stopping "
                                                     "early (at least 3 runs; default 20, quick 3)")
    parser.add_argument("--rounds", type=int, help="rounds per network, alternating the runtimes, each in "
                                                   "fresh processes; the round with the lowest median "
                                                   "counts (default 3, quick 1)")
    parser.add_argument("--networks", help=f"comma-separated subset of {', '.join(ALL_NETWORKS)}; "
                                            f"on request also {', '.join(ON_REQUEST)}")
    parser.add_argument("--no-onnx", dest="onnx", action="store_false", help="skip the ONNX ReferenceEvaluator")
    parser.add_argument("--no-conv", dest="conv", action="store_false", help="skip convolution vs matmul")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per runtime and network")
    parser.add_argument("--threads", type=int, help="threads for both runtimes (irrun's --threads, BLAS "
                                                    "included, and OpenVINO's INFERENCE_NUM_THREADS); "
                                                    "default: each runtime's own (every core)")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    parser.add_argument("--no-optimize", dest="optimize", action="store_false",
                        help="irrun without its load-time rewriting (IRRUN_OPTIMIZE=0)")
    parser.add_argument("--compressed-weights", choices=COMPRESSED_WEIGHTS_MODES, default="auto",
                        help="irrun's compressed_weights (keep: MatMul weights stay compressed, "
                             "irrun/compressed_products.py)")
    args = parser.parse_args()
    args.repeat = args.repeat or (5 if args.quick else 20)
    args.budget = args.budget or (3.0 if args.quick else 20.0)
    args.rounds = args.rounds or (1 if args.quick else 3)
    names = args.networks.split(",") if args.networks else QUICK if args.quick else ALL_NETWORKS
    onnx_note = None
    if args.onnx and not _onnx_available():
        args.onnx, onnx_note = False, "onnx is not installed: no ReferenceEvaluator column"

    print(machine())
    if args.threads:
        print(f"--threads {args.threads}: irrun threads (BLAS included) and INFERENCE_NUM_THREADS = {args.threads}")
    if onnx_note:
        print(onnx_note)
    state = {"start": probe()}
    print(f"machine state at start: {describe(state['start'])}")
    print()
    started = time.perf_counter()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        warm_up(Path(tmp), args)
        for name in names:
            results[name] = bench_network(name, Path(tmp), args)
            print(f"  {name} done ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
        print_tables(results, args.onnx)
        print_profiles(results)
        if args.conv:
            print("\n### Convolution GFLOP/s against numpy.matmul on the same GEMM (C_out x K x positions), "
                  "per shape class\n")
            print("irrun's layer as `irrun profile` times it, and the whole inference of the one-layer model "
                  "(its input copied in and its result out)\n")
            print("| class | GEMM | irrun layer GFLOP/s | irrun inference GFLOP/s | numpy.matmul GFLOP/s | "
                  "layer/matmul |")
            print("|---|---|---:|---:|---:|---:|")
            for label, gemm, layer, whole, mm in conv_vs_matmul(Path(tmp), 3 if args.quick else 10, args.threads):
                print(f"| {label} | {gemm} | {layer:.1f} | {whole:.1f} | {mm:.1f} | {layer / mm:.2f} |")
    state["end"] = probe()
    print(f"\nmachine state at end: {describe(state['end'])}")
    print(f"{time.perf_counter() - started:.0f} s in all")
    if args.json:
        args.json.write_text(json.dumps({**results, "_machine": state}, indent=1, default=str))


if __name__ == "__main__":
    main()
