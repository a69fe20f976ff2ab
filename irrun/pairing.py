"""Whether a network's runs go in two processes (irrun/process_pair.py), decided from the threads
and the platform alone: kernels that choose by the cores they will get (Winograd's tile, im2col's
channels-last columns) ask it at load, before any pair exists, and the pair when it is made."""
from __future__ import annotations

import os
import platform
import sys

from . import threads

# The threads a paired run is for (irrun/process_pair.py): the pair's two processes each hold BLAS
# to one thread, so with more threads it would leave every core but two idle, where one process runs
# its GEMMs on all of them through BLAS and its convolutions in parts on the pool (the pair was
# measured against those on two cores only).
PAIRED_THREADS = 2


def paired_processes() -> bool:
    """Whether a convolution or BLAS network's runs go in two processes (irrun/process_pair.py),
    each running its half of every large step on one core: `IRRUN_PROCESSES` not 1, Linux on x86-64
    with fork, and PAIRED_THREADS threads exactly."""
    setting = os.environ.get("IRRUN_PROCESSES", "").strip()
    if setting == "1" or setting.lower() in ("0", "off", "false", "no"):
        return False
    return (sys.platform.startswith("linux") and hasattr(os, "fork")
            and platform.machine().lower() in ("x86_64", "amd64")
            and threads.threads() == PAIRED_THREADS and threads.available_cpus() >= PAIRED_THREADS)


def one_core_a_kernel() -> bool:
    """Whether each kernel runs on one core: one thread, or a network's steps in halves on two
    processes (`paired_processes`).  Kernels whose best form differs so ask it at load (Winograd's
    tile, im2col's channels-last columns)."""
    return threads.threads() == 1 or paired_processes()
