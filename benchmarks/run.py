"""Benchmark irrun against OpenVINO (CPU, f32) on the same IRs, in one run.

    pip install ".[test]" && python benchmarks/run.py [--repeat 20]

Builds each network with openvino's Python API, saves it as IR in a temporary
directory, then measures for both runtimes: load (+ first inference) time and
median latency at batch 1.  Prints a Markdown table with the ratios and the
BLAS NumPy uses.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset8 as ops

import irrun

RNG = np.random.default_rng(0)


def _w(*shape):
    return ops.constant((RNG.standard_normal(shape) * (2.0 / np.prod(shape[1:])) ** 0.5).astype(np.float32))


def conv_bn_relu(x, cin, cout, k=3, stride=1):
    pad = k // 2
    y = ops.convolution(x, _w(cout, cin, k, k), [stride, stride], [pad, pad], [pad, pad], [1, 1])
    y = ops.add(y, ops.constant(RNG.standard_normal((1, cout, 1, 1)).astype(np.float32) * 0.1))
    return ops.relu(y)


def small_cnn():
    """A ResNet-flavoured CNN at 1x3x112x112: conv stem, max pool, 6 conv blocks, avg pool, FC."""
    x = ops.parameter([1, 3, 112, 112], ov.Type.f32, name="image")
    y = conv_bn_relu(x, 3, 32, 7, 2)
    y = ops.max_pool(y, [2, 2], [1, 1], [1, 1], [3, 3], auto_pad="explicit").output(0)
    c = 32
    for cout, stride in ((32, 1), (64, 2), (64, 1), (128, 2), (128, 1), (256, 2)):
        y = conv_bn_relu(y, c, cout, 3, stride)
        c = cout
    y = ops.avg_pool(y, [1, 1], [0, 0], [0, 0], [4, 4], True, auto_pad="valid")
    y = ops.reshape(y, ops.constant(np.array([1, -1], np.int64)), False)
    y = ops.softmax(ops.matmul(y, _w(c * 1, 1000), False, False), 1)
    return ov.Model([ops.result(y)], [x], "small_cnn"), [RNG.standard_normal((1, 3, 112, 112)).astype(np.float32)]


def mlp():
    x = ops.parameter([1, 512], ov.Type.f32, name="x")
    y = x
    for _ in range(4):
        y = ops.relu(ops.add(ops.matmul(y, _w(512, 512), False, False), _w(1, 512)))
    return ov.Model([ops.result(y)], [x], "mlp"), [RNG.standard_normal((1, 512)).astype(np.float32)]


def many_small_layers(n=400):
    """Hundreds of cheap layers: measures per-layer overhead."""
    x = ops.parameter([1, 16], ov.Type.f32, name="x")
    y = x
    for i in range(n // 2):
        y = ops.relu(ops.add(y, ops.constant(np.full((1, 16), 0.001 * i, np.float32))))
    return ov.Model([ops.result(y)], [x], "many_small_layers"), [RNG.standard_normal((1, 16)).astype(np.float32)]


NETWORKS = [small_cnn, mlp, many_small_layers]


def _median_latency(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _blas() -> str:
    try:
        config = np.show_config(mode="dicts")
        blas = config["Build Dependencies"]["blas"]
        return f"{blas.get('name')} {blas.get('version', '')}".strip()
    except Exception:  # noqa: BLE001
        return "unknown"


def bench(build, repeat, workdir: Path):
    model, inputs = build()
    xml = workdir / f"{model.get_friendly_name()}.xml"
    ov.save_model(model, str(xml), compress_to_fp16=False)
    core = ov.Core()

    t = time.perf_counter()
    compiled = core.compile_model(core.read_model(str(xml)), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()
    request.infer(inputs)
    ov_load = time.perf_counter() - t
    ov_lat = _median_latency(lambda: request.infer(inputs), repeat)

    t = time.perf_counter()
    m = irrun.load(xml)
    m.infer(inputs)
    ir_load = time.perf_counter() - t
    ir_lat = _median_latency(lambda: m.infer(inputs), repeat)
    layers = len(m._plan.steps)
    return model.get_friendly_name(), layers, ir_lat, ov_lat, ir_load, ov_load


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    print(f"numpy {np.__version__} ({_blas()}), openvino {ov.__version__.split('-')[0]}, irrun {irrun.__version__}")
    print()
    print("| network | steps | irrun ms | OpenVINO ms | ratio | irrun load+1st ms | OpenVINO load+1st ms |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for build in NETWORKS:
            name, layers, ir, ovl, ir_load, ov_load = bench(build, args.repeat, Path(tmp))
            print(f"| {name} | {layers} | {ir * 1e3:.2f} | {ovl * 1e3:.3f} | {ir / ovl:.1f}x | "
                  f"{ir_load * 1e3:.1f} | {ov_load * 1e3:.1f} |")


if __name__ == "__main__":
    main()
