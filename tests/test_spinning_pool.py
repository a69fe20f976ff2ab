"""The pool's threads waiting for their parts spinning while a convolution network runs
(irrun/threads.py: `network_parts`, `_SpinSignal`), and asleep again once it has ended."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import irrun
from irrun import threads
from ovutil import assert_close, run_in_threads, run_openvino, save
from test_kernels_parallel import convolution_network, rand

pytestmark = pytest.mark.skipif(not threads.SPIN_WAITS, reason="no pthread spin locks in this C library")


def spinning_workers() -> list[bool]:
    return [worker.spinning for worker in threads._workers]


def test_parts_hand_off_spinning_inside_a_network_run_and_asleep_after(two_threads):
    """Inside `network_parts` the worker keeps spinning between parts; after it, a part is handed
    over through the locks again.  Runs begin right after the one before ends (as inferences do):
    a worker told to park must have taken that in before the next part is handed over."""
    inside, after, spinning = [], [], []
    for k in range(2000):
        with threads.network_parts():
            inside.append(threads.run_parts(lambda a, b: (k, a, b), [(0, 1), (1, 2)]))
            inside.append(threads.run_parts(lambda a, b: (k, -a, -b), [(0, 1), (1, 2)]))
            spinning += spinning_workers()
        after.append(threads.run_parts(lambda a, b: (k, a, b), [(0, 1), (1, 2)]))
    assert inside == [r for k in range(2000) for r in ([(k, 0, 1), (k, 1, 2)], [(k, 0, -1), (k, -1, -2)])]
    assert after == [[(k, 0, 1), (k, 1, 2)] for k in range(2000)]
    assert all(spinning) and spinning_workers() == [False]


def test_a_failing_part_inside_a_network_run(two_threads):
    def part(a, b):
        if a:
            raise ValueError("part failed")
        return a

    with threads.network_parts():
        with pytest.raises(ValueError, match="part failed"):
            threads.run_parts(part, [(0, 1), (1, 2)])
        assert threads.run_parts(lambda a, b: a, [(0, 1), (1, 2)]) == [0, 1]
    assert spinning_workers() == [False]


def test_a_network_run_ending_while_another_threads_parts_hold_the_pool(two_threads):
    """The last run to end finds the workers taken by another thread's parts: those parts' caller
    parks them when it lets them go."""
    entered, release = threading.Event(), threading.Event()

    def slow(a, b):
        if a == 0:
            entered.set()
            release.wait(10)
        return a

    with threads.network_parts():
        holder = threading.Thread(target=lambda: threads.run_parts(slow, [(0, 1), (1, 2)]))
        holder.start()
        assert entered.wait(10)
    release.set()
    holder.join(10)
    assert spinning_workers() == [False]


def test_a_convolution_network_leaves_the_pool_asleep(two_threads, monkeypatch, tmp_path):
    """A convolution network's inference matches OpenVINO, its parts handed over spinning; once
    it returns, no thread of the pool spins (the process uses no CPU time while it waits)."""
    xml = save(convolution_network(), tmp_path / "net")
    loaded = irrun.load(xml)
    assert loaded._plan.convolution_network
    image = rand(1, 64, 56, 56, seed=3)
    seen = []
    start = threads._Worker.start
    monkeypatch.setattr(threads._Worker, "start",
                        lambda worker, fn, args, spin=False: seen.append(spin) or start(worker, fn, args, spin))
    got = loaded.infer([image])[0]
    assert seen and all(seen)
    assert_close(got, run_openvino(xml, [image])[0], rtol=1e-4, atol=1e-5)
    assert spinning_workers() == [False]
    before = time.process_time()
    time.sleep(0.3)
    assert time.process_time() - before < 0.1


def test_threads_sharing_a_convolution_network(two_threads, tmp_path, monkeypatch):
    """Four threads inferring at once: each gets what one thread alone gets (OpenVINO's result),
    and the pool sleeps once they are done.  (In one process: a paired run's rows and channels in
    halves round otherwise than the pool's parts, which the threads left out of the pair run.)"""
    monkeypatch.setenv("IRRUN_PROCESSES", "1")
    xml = save(convolution_network(), tmp_path / "net")
    loaded = irrun.load(xml)
    images = [rand(1, 64, 56, 56, seed=s) for s in range(4)]
    expected = [loaded.infer([image])[0] for image in images]
    for image, alone in zip(images, expected):
        assert_close(alone, run_openvino(xml, [image])[0], rtol=1e-4, atol=1e-5)
    failures = []

    def caller(k):
        for _ in range(5):
            if not np.array_equal(loaded.infer([images[k]])[0], expected[k]):
                failures.append(k)

    assert run_in_threads(caller)
    assert not failures and spinning_workers() == [False]


def test_without_spin_locks_parts_go_through_the_locks(two_threads, monkeypatch):
    monkeypatch.setattr(threads, "SPIN_WAITS", False)
    worker = threads._Worker(99)
    worker.start(lambda a, b: a + b, (1, 2), spin=True)
    assert not worker.spinning
    assert worker.finish() == (3, None)
