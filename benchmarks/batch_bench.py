"""Samples per second of `irrun.batch` in each mode, against a plain Python loop.

    python benchmarks/batch_bench.py [--rounds 2] [--digits 2000] [--resnet 400] [--resnet18 160] [--no-dask]

For a small network (models/digits, 0.1 ms an inference), a medium one
(tests/models/resnet.f32.xml, 1x3x64x64, about 1.5 ms) and a large one (benchmarks/networks.py's
ResNet-18 at 1x3x224x224, about 30 ms on two cores) it writes one `.npy` per
sample into a temporary folder, then times, from the first call to the last result
written:

- `loop: infer only`   `for x in arrays: model.infer(x)`, the arrays already in memory
- `loop: read+infer+save`  the loop people write: np.load, infer, np.savez per sample
- `batch, 1 job`       `irrun.batch.run(..., out_dir)` in this process
- `batch, 2 jobs`      two local worker processes (one BLAS thread each)
- `dask, 2 workers`    a `dask.distributed.LocalCluster` of 2 processes x 1 thread, started
                       before the timing (an existing cluster); workers load the model on first use

Every batch mode includes its start-up (worker processes, model loads) and writes every
result; each figure is the best of `--rounds`.  Next to the rate, the CPU time spent per
sample by this process and every worker (the Dask scheduler and nannies run in this
process): on a machine whose cores are shared with other work, wall-clock rates of the
parallel modes say little, while CPU per sample shows each mode's overhead.  Then it checks the memory claim: a 64 MiB
f32 MLP through 2 local workers, each worker's RSS, PSS and anonymous memory read from
/proc/PID/smaps_rollup mid-batch (the mapped weights are shared, so they count once in PSS
over the workers, not once per worker).  Prints Markdown tables.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import irrun  # noqa: E402
from irrun import batch  # noqa: E402

DIGITS = ROOT / "models" / "digits" / "model.xml"
RESNET = ROOT / "tests" / "models" / "resnet.f32.xml"


def make_samples(folder: Path, shape, count: int, seed: int = 0) -> list[np.ndarray]:
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    arrays = [rng.random(shape, dtype=np.float32) * 16 for _ in range(count)]
    for i, x in enumerate(arrays):
        np.save(folder / f"s{i:05d}.npy", x)
    return arrays


def _cpu_seconds() -> float:
    """CPU time of this process, of its children that ended (local workers) and of its live
    descendants (a LocalCluster's workers)."""
    import psutil
    total = sum(resource.getrusage(who).ru_utime + resource.getrusage(who).ru_stime
                for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    for p in psutil.Process().children(recursive=True):
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def timed(fn) -> tuple[float, float]:
    """(wall seconds, CPU seconds)."""
    cpu, start = _cpu_seconds(), time.perf_counter()
    fn()
    return time.perf_counter() - start, _cpu_seconds() - cpu


def loop_infer(xml, arrays):
    model = irrun.load(xml)
    for x in arrays:
        model.infer(x)


def loop_files(xml, folder: Path, out: Path):
    model = irrun.load(xml)
    out.mkdir()
    for path in sorted(folder.glob("*.npy")):
        np.savez(out / f"{path.stem}.npz", **model.infer(np.load(path)))


def batch_mode(xml, folder: Path, out: Path, **kw):
    run = batch.run(xml, folder, out, return_outputs=False, **kw)
    for _, result in run:
        assert not isinstance(result, Exception), result


def best_of(modes: dict, rounds: int, count: int, work: Path) -> list[tuple[str, float, float]]:
    best = {mode: (float("inf"), float("inf")) for mode in modes}
    for _ in range(rounds):
        for mode, fn in modes.items():      # modes alternate, so a busy spell hits all of them
            out = work / "out"
            shutil.rmtree(out, ignore_errors=True)
            best[mode] = min(best[mode], timed(lambda: fn(out)))
    return [(mode, count / wall, 1e3 * cpu / count) for mode, (wall, cpu) in best.items()]


def measure_network(name, xml, shape, count, rounds, work: Path, dask: bool) -> list[tuple[str, float, float]]:
    folder = work / f"{name}-in"
    arrays = make_samples(folder, shape, count)
    rows = best_of({
        "loop: infer only": lambda out: loop_infer(xml, arrays),
        "loop: read+infer+save": lambda out: loop_files(xml, folder, out),
        "batch, 1 job": lambda out: batch_mode(xml, folder, out, jobs=1),
        "batch, 2 jobs": lambda out: batch_mode(xml, folder, out, jobs=2),
    }, rounds, count, work)
    if dask:     # started only now: an idle cluster's heartbeats would count in the other modes' CPU
        import distributed
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                      dashboard_address=None) as cluster, distributed.Client(cluster) as client:
            rows += best_of({"dask, 2 workers": lambda out: batch_mode(xml, folder, out, client=client)},
                            rounds, count, work)
    return rows


def smaps(pid: int) -> dict[str, float]:
    fields = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        key, *rest = line.split()
        if rest and rest[-1] == "kB":
            fields[key.rstrip(":")] = int(rest[0]) / 1024
    return fields


def memory_check(work: Path) -> list[dict]:
    import openvino as ov
    import openvino.opset8 as ops
    import psutil
    x = ops.parameter([1, 2048], np.float32, name="x")
    h, rng = x, np.random.default_rng(0)
    for _ in range(4):
        h = ops.relu(ops.matmul(h, ops.constant((rng.standard_normal((2048, 2048)) / 45).astype(np.float32)),
                                False, False))
    xml = work / "mlp" / "model.xml"
    ov.save_model(ov.Model([ops.result(h)], [x], "mlp64"), str(xml), compress_to_fp16=False)
    folder = work / "mlp-in"
    make_samples(folder, (1, 2048), 200)
    rows = []
    run = batch.run(xml, folder, work / "mlp-out", jobs=2, return_outputs=False)
    for i, _ in enumerate(run):
        if i == 150:
            for p in psutil.Process().children():
                if "irrun.batch_workers" in " ".join(p.cmdline()):
                    rows.append({"pid": p.pid, **smaps(p.pid)})
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--digits", type=int, default=2000, help="digit samples")
    parser.add_argument("--resnet", type=int, default=400, help="ResNet samples")
    parser.add_argument("--resnet18", type=int, default=160, help="ResNet-18 (224x224) samples")
    parser.add_argument("--no-dask", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="irrun-batch-bench-"))
    try:
        tables = []
        if args.digits:
            tables += [("digits", *r) for r in measure_network("digits", DIGITS, (1, 1, 8, 8), args.digits,
                                                               args.rounds, work, not args.no_dask)]
        if args.resnet:
            tables += [("resnet", *r) for r in measure_network("resnet", RESNET, (1, 3, 64, 64), args.resnet,
                                                               args.rounds, work, not args.no_dask)]
        if args.resnet18:
            from networks import build_ir
            (work / "resnet18").mkdir()
            resnet18, _ = build_ir("resnet18", work / "resnet18")
            tables += [("resnet18 224", *r) for r in measure_network("resnet18", resnet18, (1, 3, 224, 224),
                                                                     args.resnet18, args.rounds, work,
                                                                     not args.no_dask)]
        memory = memory_check(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"cores available: {len(os.sched_getaffinity(0))}; numpy {np.__version__}\n")
    print("| network | mode | samples/s | CPU ms / sample |\n|---|---|---:|---:|")
    for network, mode, rate, cpu in tables:
        print(f"| {network} | {mode} | {rate:,.0f} | {cpu:.2f} |")
    print("\n64 MiB of f32 weights through `--jobs 2`, mid-batch (MiB):\n")
    print("| worker | RSS | PSS | file-backed PSS | anonymous |\n|---|---:|---:|---:|---:|")
    for i, row in enumerate(memory):
        print(f"| {i + 1} | {row['Rss']:.0f} | {row['Pss']:.0f} | {row.get('Pss_File', 0):.0f} | "
              f"{row['Anonymous']:.0f} |")


if __name__ == "__main__":
    main()
