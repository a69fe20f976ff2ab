"""How long validating and loading a huge IR takes, next to OpenVINO's `read_model`.

    python benchmarks/validate_bench.py [--layers 20000 100000 200000] [--repeat 2]

Writes, for each size, an IR (model.xml + model.bin, in the format
`openvino.save_model` writes) made of a realistic mix of layers: repeated
blocks of Convolution (3x3 and 1x1), Add (bias), ReLU, Reshape and Concat, each
with its Const weights, bias or target shape.  Then it measures, each in a
fresh process so that peak RSS belongs to that one step:

- `irrun.validate(xml)`      parse, bind, check structure, infer every shape
- `irrun.load(xml)`          the same, plus the execution plan
- `openvino.Core().read_model(xml)`

Each process first runs its step on a 40-layer IR, so that imports and
one-time set-up (irrun's op registry and specs, OpenVINO's IR frontend) are
not timed.  Wall and CPU time are the best of `--repeat` processes; peak RSS
is the process's maximum resident set (interpreter and libraries included).
Prints a Markdown table.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CHANNELS = 8
HEIGHT = WIDTH = 4
PRECISION = {"f32": "FP32", "i64": "I64"}


class IRWriter:
    """Writes layers and edges as `openvino.save_model` does (IR v11)."""

    def __init__(self):
        self.layers: list[str] = []
        self.edges: list[str] = []
        self.weights = bytearray()
        self.shared_offsets: dict[bytes, int] = {}
        self.output_port: dict[int, int] = {}    # layer id -> id of its (only) output port

    @property
    def count(self) -> int:
        return len(self.layers)

    def _ports(self, tag: str, ports: list[tuple[list[int], str]], first_id: int, named: bool) -> str:
        text = []
        for i, (dims, etype) in enumerate(ports):
            pid = first_id + i
            names = f' names="t{self.count}.{pid}"' if named else ""
            dim_text = "".join(f"\t\t\t\t\t<dim>{d}</dim>\n" for d in dims)
            text.append(f'\t\t\t\t<port id="{pid}" precision="{PRECISION[etype]}"{names}>\n{dim_text}\t\t\t\t</port>\n')
        return f"\t\t\t<{tag}>\n{''.join(text)}\t\t\t</{tag}>\n"

    def layer(self, type_name: str, data: dict[str, str], inputs: list[tuple[int, list[int], str]],
              outputs: list[tuple[list[int], str]]) -> int:
        """Add a layer fed by `inputs` [(producer id, dims, etype)]; returns its id (output port = len(inputs))."""
        lid = self.count
        data_text = " ".join(f'{k}="{v}"' for k, v in data.items())
        body = f"\t\t\t<data {data_text} />\n" if data else ""
        if inputs:
            body += self._ports("input", [(dims, et) for _, dims, et in inputs], 0, named=False)
        if outputs:
            body += self._ports("output", outputs, len(inputs), named=type_name != "Const")
        self.layers.append(f'\t\t<layer id="{lid}" name="{type_name}_{lid}" type="{type_name}" '
                           f'version="opset1">\n{body}\t\t</layer>\n')
        for port, (producer, _, _) in enumerate(inputs):
            self.edges.append(f'\t\t<edge from-layer="{producer}" from-port="{self.output_port[producer]}" '
                              f'to-layer="{lid}" to-port="{port}" />\n')
        self.output_port[lid] = len(inputs)   # output port ids follow the input ports
        return lid

    def const(self, array: np.ndarray, share: bool = False) -> int:
        """A Const layer; `share` reuses identical bytes already written (as the serializer does)."""
        raw = array.tobytes()
        offset = self.shared_offsets.get(raw) if share else None
        if offset is None:
            offset = len(self.weights)
            self.weights += raw
            if share:
                self.shared_offsets[raw] = offset
        etype = {np.dtype(np.float32): "f32", np.dtype(np.int64): "i64"}[array.dtype]
        data = {"element_type": etype, "shape": ", ".join(map(str, array.shape)),
                "offset": str(offset), "size": str(len(raw))}
        return self.layer("Const", data, [], [(list(array.shape), etype)])

    def save(self, xml: Path) -> None:
        xml.write_text('<?xml version="1.0"?>\n<net name="bench" version="11">\n\t<layers>\n'
                       + "".join(self.layers) + "\t</layers>\n\t<edges>\n" + "".join(self.edges)
                       + "\t</edges>\n\t<rt_info />\n</net>\n")
        xml.with_suffix(".bin").write_bytes(bytes(self.weights))


def _block(w: IRWriter, x: int, rng: np.random.Generator) -> int:
    """Conv3x3 + bias + ReLU, a Reshape round trip, Concat with the ReLU, Conv1x1 back: 12 layers."""
    c, hw = CHANNELS, [1, CHANNELS, HEIGHT, WIDTH]
    conv_data = {"strides": "1, 1", "dilations": "1, 1", "pads_begin": "1, 1", "pads_end": "1, 1",
                 "auto_pad": "explicit"}
    k3 = w.const(rng.standard_normal((c, c, 3, 3)).astype(np.float32))
    y = w.layer("Convolution", conv_data, [(x, hw, "f32"), (k3, [c, c, 3, 3], "f32")], [(hw, "f32")])
    bias = w.const(rng.standard_normal((1, c, 1, 1)).astype(np.float32))
    y = w.layer("Add", {"auto_broadcast": "numpy"}, [(y, hw, "f32"), (bias, [1, c, 1, 1], "f32")], [(hw, "f32")])
    relu = w.layer("ReLU", {}, [(y, hw, "f32")], [(hw, "f32")])
    flat = [1, c, HEIGHT * WIDTH]
    target = w.const(np.array(flat, np.int64), share=True)
    y = w.layer("Reshape", {"special_zero": "false"}, [(relu, hw, "f32"), (target, [3], "i64")], [(flat, "f32")])
    target = w.const(np.array(hw, np.int64), share=True)
    y = w.layer("Reshape", {"special_zero": "false"}, [(y, flat, "f32"), (target, [4], "i64")], [(hw, "f32")])
    wide = [1, 2 * c, HEIGHT, WIDTH]
    y = w.layer("Concat", {"axis": "1"}, [(relu, hw, "f32"), (y, hw, "f32")], [(wide, "f32")])
    k1 = w.const(rng.standard_normal((c, 2 * c, 1, 1)).astype(np.float32))
    conv_data = dict(conv_data, pads_begin="0, 0", pads_end="0, 0")
    return w.layer("Convolution", conv_data, [(y, wide, "f32"), (k1, [c, 2 * c, 1, 1], "f32")], [(hw, "f32")])


def write_model(xml: Path, n_layers: int, seed: int = 0) -> None:
    """An IR with exactly `n_layers` layers: Parameter, blocks, ReLUs to fill up, Result."""
    rng = np.random.default_rng(seed)
    w = IRWriter()
    hw = [1, CHANNELS, HEIGHT, WIDTH]
    x = w.layer("Parameter", {"shape": ", ".join(map(str, hw)), "element_type": "f32"}, [], [(hw, "f32")])
    while w.count + 12 < n_layers:
        x = _block(w, x, rng)
    while w.count + 1 < n_layers:
        x = w.layer("ReLU", {}, [(x, hw, "f32")], [(hw, "f32")])
    w.layer("Result", {}, [(x, hw, "f32")], [])
    w.save(xml)


# ---------------------------------------------------------------- measuring (one process per step)

def _measure(step: str, xml: str, warmup_xml: str) -> dict:
    """Run `step` once on a small IR (imports, op registry, specs, OpenVINO's IR frontend:
    once per process), then time it once on `xml`."""
    import resource
    if step == "read_model":
        import openvino as ov
        core = ov.Core()
        run = core.read_model
    else:
        import irrun
        run = irrun.validate if step == "validate" else irrun.load
    run(warmup_xml)
    wall, cpu = time.perf_counter(), time.process_time()
    result = run(xml)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if step == "validate" and not result.ok:
        raise SystemExit(f"validate found errors: {result.errors[:3]}")
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"seconds": wall, "cpu_seconds": cpu, "peak_rss_mib": peak_kib / 1024}


def _run_step(step: str, xml: Path, warmup_xml: Path) -> dict:
    out = subprocess.run([sys.executable, __file__, "--measure", step, str(xml), str(warmup_xml)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _best_of(runs: list[dict]) -> dict:
    return {key: min(run[key] for run in runs) for key in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[20_000, 100_000, 200_000])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--steps", nargs="+", default=["validate", "load", "read_model"])
    parser.add_argument("--measure", nargs=3, metavar=("STEP", "XML", "WARMUP_XML"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(_measure(*args.measure)))
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        warmup = Path(tmp) / "warmup.xml"
        write_model(warmup, 40)
        for n in args.layers:
            xml = Path(tmp) / f"model_{n}.xml"
            write_model(xml, n)
            sizes = (xml.stat().st_size, xml.with_suffix(".bin").stat().st_size)
            # Steps take turns, so that load from other work on the machine hits them alike.
            runs: dict[str, list[dict]] = {step: [] for step in args.steps}
            for _ in range(args.repeat):
                for step in args.steps:
                    runs[step].append(_run_step(step, xml, warmup))
            results = {step: _best_of(r) for step, r in runs.items()}
            rows.append((n, sizes, results))
            print(f"{n} layers: " + ", ".join(f"{s} {r['seconds']:.2f} s" for s, r in results.items()),
                  file=sys.stderr, flush=True)
    compare = "validate" in args.steps and "read_model" in args.steps
    header = ["layers", ".xml / .bin MiB"] + [f"{s} s (CPU s)" for s in args.steps]
    header += ["validate / read_model"] if compare else []
    header += ["peak RSS MiB: " + " / ".join(args.steps)]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for n, (xml_bytes, bin_bytes), results in rows:
        cells = [f"{n:,}", f"{xml_bytes / 2**20:.0f} / {bin_bytes / 2**20:.0f}"]
        cells += [f"{r['seconds']:.2f} ({r['cpu_seconds']:.2f})" for r in results.values()]
        if compare:
            cells.append(f"{results['validate']['seconds'] / results['read_model']['seconds']:.2f}")
        cells.append(" / ".join(f"{r['peak_rss_mib']:.0f}" for r in results.values()))
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
