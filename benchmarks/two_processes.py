"""What a second *process* would win where irrun's second thread cannot: a GEMM and its bias and
activation in halves, one in a forked worker spinning on shared memory, against today's way
(OpenBLAS on every core for the GEMM, the epilogue on one).

Threads of one process take turns at the GIL: on a 2-vCPU VM a part handed to another thread
and back costs 30-75 us of wake-ups (irrun/threads.py), so irrun runs elementwise kernels of
BLAS-heavy networks on one core.  Two processes share no GIL: a worker spinning on a flag in a
shared mapping takes a part and hands it back in about 2 us.  Each half is the same arithmetic
as the whole (a GEMM's rows, an activation's elements): the results are checked bit for bit.

    python benchmarks/two_processes.py

Linux only (fork, MAP_SHARED).  The measurement behind irrun/process_pair.py, which runs a
transformer's large steps so (activations in a shared arena, BLAS on one thread in each process).
"""
from __future__ import annotations

import mmap
import os
import platform
import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits

from irrun import allocator
from irrun.ops.activation import LOG2_E, _gelu_erf_f32_into
from machine_state import median_seconds

# (label, output rows, depth, columns, activation): a transformer's feed-forward up-projection
# (weight first: [out, in] @ x^T) and a 1x1 convolution ([C_out, C_in] @ [C_in, positions])
CASES = [
    ("BERT FFN up 128 x 256 -> 1024 + Gelu", 1024, 256, 128, "gelu"),
    ("ViT FFN up 197 x 192 -> 768 + Gelu", 768, 192, 197, "gelu"),
    ("transformer FFN up 34 x 384 -> 1536 + Gelu", 1536, 384, 34, "gelu"),
    ("1x1 conv 32 -> 32 at 80x80 + Swish", 32, 32, 6400, "swish"),
    ("1x1 conv 64 -> 128 at 40x40 + Swish", 128, 64, 1600, "swish"),
]
SPIN_TIMEOUT_S = 5.0


def _swish_into(x, out):
    """x / (1 + exp(-x)) as irrun's Swish computes it (irrun/ops/activation.py)."""
    t = np.multiply(x, np.float32(-LOG2_E))
    np.exp2(t, out=t)
    np.add(t, np.float32(1), out=t)
    return np.divide(x, t, out=out)


def _epilogue(kind):
    activation = _swish_into if kind == "swish" else _gelu_erf_f32_into

    def run(v, bias):
        np.add(v, bias, v)
        activation(v, v)
    return run


def _median_us(fn, repeat=600):
    return median_seconds(fn, repeat, warm_up=50) * 1e6


def measure(rows, depth, columns, kind, rng):
    """(one process: BLAS on every core and the epilogue on one; all on one thread; halves in two
    processes) in us, and whether the halves gave the same bits."""
    arena = mmap.mmap(-1, 4096 + 4 * (depth * columns + rows * columns) + 8192,
                      flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
    control = np.frombuffer(arena, np.int64, 8, 0)      # [posted, done, stop, first row, last row]
    x = np.frombuffer(arena, np.float32, depth * columns, 4096).reshape(depth, columns)
    out = np.frombuffer(arena, np.float32, rows * columns, 4096 + 4 * depth * columns + 4096).reshape(rows, columns)
    x[:] = rng.standard_normal(x.shape)
    weight = (rng.standard_normal((rows, depth)) / np.sqrt(depth)).astype(np.float32)
    bias = rng.standard_normal((rows, 1)).astype(np.float32)
    epilogue = _epilogue(kind)

    def whole():
        np.matmul(weight, x, out=out)
        epilogue(out, bias)
    today = _median_us(whole)
    expected = out.copy()
    with threadpool_limits(1):
        one_thread = _median_us(whole)
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:                      # the worker: rows [first, last) of each posted task
            seen, idle = 0, 0
            while True:
                posted = int(control[0])
                if posted == seen:
                    idle += 1
                    if idle % (1 << 20) == 0 and os.getppid() != parent:
                        os._exit(1)       # (the parent died without stopping it: do not spin on)
                    continue
                idle = 0
                seen = posted
                if control[2]:
                    os._exit(0)
                a, b = int(control[3]), int(control[4])
                np.matmul(weight[a:b], x, out=out[a:b])
                epilogue(out[a:b], bias[a:b])
                control[1] = posted
        posted = [0]

        def halves():
            half = rows // 2
            posted[0] += 1
            control[3], control[4], control[0] = half, rows, posted[0]
            np.matmul(weight[:half], x, out=out[:half])
            epilogue(out[:half], bias[:half])
            deadline = time.monotonic() + SPIN_TIMEOUT_S
            while control[1] != posted[0]:
                if time.monotonic() > deadline:
                    raise RuntimeError("the worker process did not answer")
        try:
            two = _median_us(halves)
            same = bool(np.array_equal(out, expected))
        finally:
            posted[0] += 1
            control[2], control[0] = 1, posted[0]
            os.waitpid(pid, 0)
    return today, one_thread, two, same


def main():
    if platform.system() != "Linux":
        sys.exit("two_processes.py: Linux only (fork and shared anonymous mappings)")
    allocator.keep_freed_memory()
    rng = np.random.default_rng(0)
    print(f"{os.cpu_count()} CPUs; times are medians of 600 runs, us\n")
    print("| GEMM and epilogue | BLAS on every core, epilogue on one | one thread | halves in two processes "
          "| two processes / today | same bits |")
    print("|---|---:|---:|---:|---:|---|")
    for label, rows, depth, columns, kind in CASES:
        today, one, two, same = measure(rows, depth, columns, kind, rng)
        print(f"| {label} | {today:.0f} | {one:.0f} | {two:.0f} | {two / today:.2f} | {'yes' if same else 'no'} |")


if __name__ == "__main__":
    main()
