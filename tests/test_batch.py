"""`irrun batch` and `irrun.batch.run`: many samples, local worker processes, a Dask cluster.

The oracle for a batch is the same model run one sample at a time with `Model.infer`
(itself tested against OpenVINO elsewhere): every mode must give results identical
to it, bit for bit, and the same failures word for word.  The stateful-model case
and the digits accuracy check compare against OpenVINO directly.
"""
from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from io import StringIO
from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset6 as ops
import pytest
from click.testing import CliRunner
from openvino.op.util import Variable, VariableInfo
from ovutil import assert_blas_close, assert_close, compile_cpu, save

import irrun
from irrun import batch, batch_dask
from irrun.cli import cli
from irrun.cli.progress import Progress
from irrun.errors import ModelError, UsageError
from irrun.samples import ModelSpec, Sample, SampleError

ROOT = Path(__file__).resolve().parent.parent
DIGITS = ROOT / "models" / "digits" / "model.xml"
RESNET = ROOT / "tests" / "models" / "resnet.f32.xml"
N_SAMPLES = 300
# The bad samples mixed into the good ones, and what each must be reported with.
BAD = {
    "not_an_array": "not a .npy/.npz array file",
    "pickled": "holds pickled Python objects",
    "wrong_rank": "expects rank 4",
    "wrong_dtype": "expects f32",
    "unknown_input": "unknown input 'picture'",
}


def _images():
    return np.load(ROOT / "models" / "digits" / "test_set.npz")["images"]


def _write_bad_samples(folder: Path) -> None:
    (folder / "not_an_array.npy").write_text("1 2 3")
    np.save(folder / "pickled.npy", np.array([{"x": 1}], dtype=object), allow_pickle=True)
    np.save(folder / "wrong_rank.npy", np.zeros((8, 8), np.float32))
    np.save(folder / "wrong_dtype.npy", np.zeros((1, 1, 8, 8), np.complex64))
    np.savez(folder / "unknown_input.npz", picture=np.zeros((1, 1, 8, 8), np.float32))


@pytest.fixture(scope="module")
def digits_set(tmp_path_factory):
    """N_SAMPLES digit images as one .npy (or .npz, every third) per sample, plus the bad ones;
    and the outputs of one-at-a-time `infer`."""
    folder = tmp_path_factory.mktemp("digits")
    images = _images()[:N_SAMPLES]
    model = irrun.load(DIGITS)
    expected = {}
    for i, image in enumerate(images):
        sample = image[None]
        if i % 3:
            np.save(folder / f"img{i:03d}.npy", sample)
        else:
            np.savez(folder / f"img{i:03d}.npz", image=sample)
        expected[f"img{i:03d}"] = model.infer(sample)
    _write_bad_samples(folder)
    return folder, expected


def check_results(out: Path, expected: dict) -> None:
    """Every expected result is in `out`, equal to one-at-a-time infer (to BLAS's rounding: a worker
    runs its GEMMs on other thread counts: ovutil.assert_blas_close); no other result."""
    found = {p.stem for p in out.glob("*.npz")}
    assert found == set(expected)
    for sample_id, outputs in expected.items():
        with np.load(out / f"{sample_id}.npz", allow_pickle=False) as got:
            assert set(got.files) == set(outputs)
            for name, value in outputs.items():
                assert_blas_close(got[name], value, what=sample_id)
    assert not list(out.glob(".*.tmp")), "temporary files left behind"


def check_failures(out: Path) -> dict[str, str]:
    listed = {f["sample"]: f["error"] for f in json.loads((out / "failures.json").read_text())}
    assert set(listed) == set(BAD)
    for sample_id, words in BAD.items():
        assert words in listed[sample_id], (sample_id, listed[sample_id])
    return listed


def cli_run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


# ---------------------------------------------------------------- local modes

def test_local_jobs_2_matches_infer_and_reports_bad_samples(digits_set, tmp_path):
    folder, expected = digits_set
    r = cli_run("batch", DIGITS, folder, "-o", tmp_path / "out", "--jobs", 2)
    assert r.exit_code == 1, r.output
    assert "Traceback" not in r.output
    for sample_id in BAD:
        assert f"failed: {folder}/{sample_id}." in r.output
    assert f"{N_SAMPLES + len(BAD)} samples: {N_SAMPLES} done, 0 skipped, {len(BAD)} failed" in r.output
    check_results(tmp_path / "out", expected)
    local = check_failures(tmp_path / "out")
    # One process gives the very same failures.
    r = cli_run("batch", DIGITS, folder, "-o", tmp_path / "one", "--format", "json")
    assert r.exit_code == 1
    summary = json.loads(r.stdout)
    assert (summary["done"], summary["failed"], summary["skipped"]) == (N_SAMPLES, len(BAD), 0)
    assert check_failures(tmp_path / "one") == local
    check_results(tmp_path / "one", expected)


def test_python_api_yields_outputs_and_errors(digits_set):
    """... and the workers' pipes are closed, not left to the garbage collector (ResourceWarning)."""
    import gc
    import warnings
    folder, expected = digits_set
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        seen = dict(batch.run(DIGITS, folder, jobs=2))
        time.sleep(0.2)          # (each worker's reader closes its pipe once the worker has exited)
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]
    assert set(seen) == set(expected) | set(BAD)
    for sample_id, outputs in expected.items():
        assert_blas_close(seen[sample_id]["probabilities"], outputs["probabilities"], what=sample_id)
    for sample_id in BAD:
        error = seen[sample_id]
        assert isinstance(error, SampleError) and error.sample == sample_id
        assert str(error).startswith(str(folder / sample_id)) and "\n" not in str(error)


def test_in_memory_samples_and_a_loaded_model():
    images = _images()[:5]
    model = irrun.load(DIGITS)
    got = dict(batch.run(model, {f"s{i}": {"image": x[None]} for i, x in enumerate(images)}))
    for i, x in enumerate(images):
        assert_blas_close(got[f"s{i}"]["probabilities"], model.infer(x[None])["probabilities"])


def test_workers_share_the_cores(digits_set, tmp_path):
    """Each worker's BLAS / OpenMP / irrun threads are set before it starts: workers x threads <= cores."""
    psutil = pytest.importorskip("psutil")
    from irrun.threads import available_cpus
    folder, _ = digits_set
    run = batch.run(DIGITS, folder, jobs=2)
    next(run)
    workers = [p for p in psutil.Process().children() if "irrun.batch_workers" in " ".join(p.cmdline())]
    assert len(workers) == 2
    threads = max(available_cpus() // 2, 1)
    for w in workers:
        env = w.environ()
        for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "IRRUN_THREADS"):
            assert env[name] == str(threads)
    run.close()
    for w in workers:
        w.wait(timeout=10)
    assert not any(w.is_running() for w in workers)


def test_a_local_worker_killed_mid_batch_loses_no_sample(tmp_path):
    psutil = pytest.importorskip("psutil")
    run = batch.run(RESNET, {f"r{i}": {"x": np.full((1, 3, 64, 64), i / 40, np.float32)} for i in range(40)},
                    tmp_path / "out", jobs=2)
    seen = [next(run) for _ in range(3)]
    victim = next(p for p in psutil.Process().children() if "irrun.batch_workers" in " ".join(p.cmdline()))
    victim.kill()
    seen += list(run)
    assert sorted(i for i, _ in seen) == sorted(f"r{i}" for i in range(40))
    assert not run.failures
    model = irrun.load(RESNET)
    for i in range(40):
        with np.load(tmp_path / "out" / f"r{i}.npz") as got:
            assert_blas_close(got["logits"], model.infer(np.full((1, 3, 64, 64), i / 40, np.float32))["logits"])


class _KillsItsWorker:
    """Sample data whose unpickling ends the process that receives it, like a crash in a kernel."""

    def __reduce__(self):
        return os._exit, (3,)


def test_a_sample_that_kills_workers_is_reported_and_the_rest_complete(tmp_path):
    images = _images()[:12]
    samples = {f"s{i:02d}": {"image": x[None]} for i, x in enumerate(images)}
    samples["s05"] = _KillsItsWorker()
    got = dict(batch.run(DIGITS, samples, jobs=2))
    assert str(got["s05"]) == "s05: the worker process running it died twice (exit code 3)"
    model = irrun.load(DIGITS)
    for i, x in enumerate(images):
        if i != 5:
            assert_blas_close(got[f"s{i:02d}"]["probabilities"], model.infer(x[None])["probabilities"])


def test_killed_run_resumes_without_redoing_finished_samples(tmp_path):
    """SIGKILL the whole `irrun batch --jobs 2` half-way; the rerun finishes the set, and the
    results the killed run wrote are untouched (same mtime), none half-written."""
    folder = tmp_path / "in"
    folder.mkdir()
    count = 200
    rng = np.random.default_rng(0)
    inputs = {f"x{i:03d}": rng.standard_normal((1, 3, 64, 64)).astype(np.float32) for i in range(count)}
    for name, x in inputs.items():
        np.save(folder / f"{name}.npy", x)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "irrun", "batch", str(RESNET), str(folder), "-o", str(out), "-j", "2"]
    run = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while len(list(out.glob("x*.npz"))) < count // 3 and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    run.send_signal(signal.SIGKILL)
    run.communicate()
    time.sleep(1.0)      # its orphaned workers see their input end and exit after the sample under way
    first = {p.stem: p.stat().st_mtime_ns for p in out.glob("x*.npz")}
    assert count // 3 <= len(first) < count, "the kill came too late to test anything"
    rerun = subprocess.run(command + ["--format", "json"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    summary = json.loads(rerun.stdout)
    assert summary["skipped"] == len(first) and summary["done"] == count - len(first)
    for name, mtime in first.items():
        assert (out / f"{name}.npz").stat().st_mtime_ns == mtime, f"{name} was computed again"
    model = irrun.load(RESNET)
    check_results(out, {name: model.infer(x) for name, x in inputs.items()})


def test_ctrl_c_stops_workers_and_keeps_finished_results(tmp_path):
    psutil = pytest.importorskip("psutil")
    folder = tmp_path / "in"
    folder.mkdir()
    # (enough samples that the batch cannot end before the signal even when the machine stalls
    # this process for a while: 200 once did, in a full run of the suite)
    for i in range(1000):
        np.save(folder / f"x{i:04d}.npy", np.full((1, 3, 64, 64), i / 1000, np.float32))
    out = tmp_path / "out"
    # (Ctrl-C's default action restored in the batch: a suite started in the background by a shell
    # without job control inherits SIGINT ignored, and Python then installs no handler for it)
    run = subprocess.Popen([sys.executable, "-m", "irrun", "batch", str(RESNET), str(folder), "-o", str(out), "-j", "2"],
                           cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while len(list(out.glob("x*.npz"))) < 20 and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    workers = psutil.Process(run.pid).children()
    run.send_signal(signal.SIGINT)
    stdout, stderr = run.communicate(timeout=60)
    assert 20 <= len(list(out.glob("x*.npz"))) < 1000 and run.returncode == 130, stderr
    assert "interrupted: " in stdout and "samples not run; run the same command again" in stdout
    assert "Traceback" not in stderr
    assert len(workers) == 2 and not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers)
    assert not list(out.glob(".*.tmp"))
    assert all(batch.result_is_whole(p) for p in out.glob("x*.npz"))


def test_resume_overwrite_and_model_check(digits_set, tmp_path):
    folder, expected = digits_set
    subset = tmp_path / "in"
    subset.mkdir()
    for name in ("img001", "img002", "img004"):
        shutil.copy(folder / f"{name}.npy", subset)
    out = tmp_path / "out"
    assert cli_run("batch", DIGITS, subset, "-o", out, "-q").exit_code == 0
    stamps = {p.name: p.stat().st_mtime_ns for p in out.glob("*.npz")}
    # Resume (the default): nothing to do.
    r = cli_run("batch", DIGITS, subset, "-o", out)
    assert r.exit_code == 0 and "3 samples: 0 done, 3 skipped, 0 failed" in r.stdout
    assert stamps == {p.name: p.stat().st_mtime_ns for p in out.glob("*.npz")}
    # An edited sample and a torn result are run again; the rest stay.
    time.sleep(0.01)
    np.save(subset / "img001.npy", np.load(folder / "img005.npy"))
    (out / "img002.npz").write_bytes((out / "img002.npz").read_bytes()[:100])
    r = cli_run("batch", DIGITS, subset, "-o", out, "--format", "json")
    summary = json.loads(r.stdout)
    assert (summary["done"], summary["skipped"]) == (2, 1)
    assert (out / "img004.npz").stat().st_mtime_ns == stamps["img004.npz"]
    with np.load(out / "img001.npz") as got:
        assert_blas_close(got["probabilities"], expected["img005"]["probabilities"])
    # --overwrite computes everything again.
    r = cli_run("batch", DIGITS, subset, "-o", out, "--overwrite", "--format", "json")
    assert json.loads(r.stdout)["done"] == 3
    # Results of another model are never mixed in.
    r = cli_run("batch", RESNET, subset, "-o", out)
    assert r.exit_code == 2 and "holds the results of another model" in r.output and "--overwrite" in r.output


def test_one_run_at_a_time_per_output_directory(digits_set, tmp_path):
    folder, _ = digits_set
    with batch.run(DIGITS, folder, tmp_path / "out"):
        r = cli_run("batch", DIGITS, folder, "-o", tmp_path / "out")
        assert r.exit_code == 2 and "another irrun batch is writing to this output directory" in r.output
    assert cli_run("batch", DIGITS, folder / "img001.npy", "-o", tmp_path / "out").exit_code == 0


def test_fail_fast_stops_at_the_first_failure(digits_set, tmp_path):
    folder, _ = digits_set
    r = cli_run("batch", DIGITS, folder, "-o", tmp_path / "out", "--fail-fast")
    assert r.exit_code == 1
    assert "stopped at the first failure (--fail-fast)" in r.stdout and r.output.count("failed: ") == 1
    assert len(json.loads((tmp_path / "out" / "failures.json").read_text())) == 1
    assert not list((tmp_path / "out").glob(".*.tmp"))


def test_stacked_test_set_through_the_classifier(tmp_path):
    """The digits test set as one file: `image` (450 x 1x1x8x8) carries the samples along the
    model's batch axis, `labels` is not an input and is left out; the batch classifies like
    OpenVINO."""
    data = np.load(ROOT / "models" / "digits" / "test_set.npz")
    images, labels = data["images"], data["labels"]
    stacked = tmp_path / "test_set.npz"
    np.savez(stacked, image=images, labels=labels)
    out = tmp_path / "out"
    r = cli_run("batch", DIGITS, stacked, "-o", out, "--stacked", "-j", 2)
    assert r.exit_code == 0, r.output
    assert "array 'labels' is not an input of the model; left out" in r.output
    assert len(list(out.glob("*.npz"))) == len(images)
    compiled = compile_cpu(DIGITS)
    expected = compiled(images)[0]
    got = np.concatenate([np.load(out / f"{i:03d}.npz")["probabilities"] for i in range(len(images))])
    assert_close(got, expected)
    assert (got.argmax(1) == labels).mean() > 0.9
    # A stacked .npy for a one-input model; a leading axis beyond the model's rank is dropped.
    np.save(tmp_path / "images.npy", images[:20, None])          # 20 x 1x1x1x8x8
    from_npy = dict(batch.run(DIGITS, tmp_path / "images.npy", stacked=True))
    assert sorted(from_npy) == [f"{i:02d}" for i in range(20)]
    for i in range(20):
        assert_blas_close(from_npy[f"{i:02d}"]["probabilities"], got[i:i + 1])


def test_sample_errors_and_misuse(digits_set, tmp_path):
    folder, _ = digits_set
    (tmp_path / "empty").mkdir()
    r = cli_run("batch", DIGITS, tmp_path / "empty", "-o", tmp_path / "out")
    assert r.exit_code == 2 and "no .npy or .npz files in this directory" in r.output
    twins = tmp_path / "twins"
    twins.mkdir()
    np.save(twins / "a.npy", np.zeros((1, 1, 8, 8), np.float32))
    np.savez(twins / "a.npz", image=np.zeros((1, 1, 8, 8), np.float32))
    r = cli_run("batch", DIGITS, twins, "-o", tmp_path / "out")
    assert r.exit_code == 2 and "would both write the result a.npz" in r.output
    r = cli_run("batch", DIGITS, twins / "a.npz", "-o", twins)
    assert r.exit_code == 2 and "would overwrite the sample" in r.output
    r = cli_run("batch", DIGITS, folder, "-o", tmp_path / "out", "--ship-data")
    assert r.exit_code == 2 and "--ship-data applies to --dask" in r.output
    r = cli_run("batch", DIGITS, str(folder / "*.nothing"), "-o", tmp_path / "out")
    assert r.exit_code == 2 and "matches no files" in r.output


def test_npy_sample_for_a_model_with_two_inputs(tmp_path):
    a, b = ops.parameter([2], np.float32, name="a"), ops.parameter([2], np.float32, name="b")
    xml = save(ov.Model([ops.result(ops.add(a, b))], [a, b], "two"), tmp_path)
    np.save(tmp_path / "one.npy", np.zeros(2, np.float32))
    np.savez(tmp_path / "both.npz", a=np.ones(2, np.float32), b=np.ones(2, np.float32))
    got = dict(batch.run(xml, [tmp_path / "one.npy", tmp_path / "both.npz"]))
    assert "holds one array, but the model takes 2 inputs (a, b)" in str(got["one"])
    assert np.array_equal(next(iter(got["both"].values())), [2, 2])


def test_missing_dask_says_what_to_install(digits_set, tmp_path, monkeypatch):
    monkeypatch.setattr(batch_dask, "distributed", None)
    folder, _ = digits_set
    r = cli_run("batch", DIGITS, folder, "-o", tmp_path / "out", "--dask", "tcp://127.0.0.1:1")
    assert r.exit_code == 2
    assert r.output.strip().splitlines()[-1] == 'error: --dask needs dask.distributed: pip install "irrun[dask]"'


def test_unreachable_scheduler_is_one_line(digits_set, tmp_path):
    dask = pytest.importorskip("dask")
    pytest.importorskip("distributed")
    folder, _ = digits_set
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        r = cli_run("batch", DIGITS, folder, "-o", tmp_path / "out", "--dask", "tcp://127.0.0.1:9")
    assert r.exit_code == 2 and "cannot connect to the Dask scheduler at tcp://127.0.0.1:9" in r.output
    assert "Traceback" not in r.output


# ---------------------------------------------------------------- Dask

@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


def test_dask_matches_infer_and_local_failures(digits_set, tmp_path, dask_client):
    folder, expected = digits_set
    address = dask_client.scheduler.address
    r = cli_run("batch", DIGITS, folder, "-o", tmp_path / "out", "--dask", address)
    assert r.exit_code == 1, r.output
    assert f"{N_SAMPLES} done, 0 skipped, {len(BAD)} failed" in r.stdout
    check_results(tmp_path / "out", expected)
    dask_failures = check_failures(tmp_path / "out")
    local = dict(batch.run(DIGITS, folder))
    assert dask_failures == {k: v.reason for k, v in local.items() if isinstance(v, SampleError)}
    # The arrays shipped instead of paths: the same results.
    r = cli_run("batch", DIGITS, folder, "-o", tmp_path / "shipped", "--dask", address, "--ship-data", "-q")
    assert r.exit_code == 1
    check_results(tmp_path / "shipped", expected)
    assert check_failures(tmp_path / "shipped") == dask_failures


def _models_held():
    from irrun import samples
    return [id(m) for m in samples._models.values()]


def _irrun_threads():
    from irrun import threads
    return threads.threads()


def test_dask_workers_load_the_model_once_and_keep_it(dask_client):
    images = _images()[:40]
    inputs = {f"s{i}": {"image": x[None]} for i, x in enumerate(images)}
    list(batch.run(DIGITS, inputs, client=dask_client))
    held = dask_client.run(_models_held)
    assert any(held.values())
    list(batch.run(DIGITS, inputs, client=dask_client, ship_data=True))
    for worker, ids in dask_client.run(_models_held).items():
        assert set(held.get(worker, ())) <= set(ids)        # the same Model objects: not loaded again
    # irrun's pool takes the one BLAS thread Dask's nannies give each worker.
    assert set(dask_client.run(_irrun_threads).values()) == {1}


def test_dask_worker_killed_mid_batch_loses_no_sample(tmp_path, dask_client):
    inputs = {f"r{i}": {"x": np.full((1, 3, 64, 64), i / 80, np.float32)} for i in range(80)}
    run = batch.run(RESNET, inputs, tmp_path / "out", client=dask_client)
    seen = [next(run) for _ in range(5)]
    pids = dask_client.run(os.getpid)
    os.kill(next(iter(pids.values())), signal.SIGKILL)
    seen += list(run)
    assert sorted(i for i, _ in seen) == sorted(inputs) and not run.failures
    model = irrun.load(RESNET)
    check_results(tmp_path / "out", {k: model.infer(v) for k, v in inputs.items()})
    dask_client.wait_for_workers(2, timeout=60)


def test_dask_ships_the_model_to_workers_that_lack_it(tmp_path, dask_client):
    """Workers told a path they cannot read get the files (a worker plugin) with --ship-data;
    without it, one line says what is wrong."""
    model = irrun.load(DIGITS)
    elsewhere = ModelSpec(str(tmp_path / "not-on-the-workers" / "model.xml"), model.fingerprint(),
                          ModelSpec.of(model).options)
    images = _images()[:6]
    samples = [Sample(f"s{i}", f"s{i}", data=x[None]) for i, x in enumerate(images)]
    with pytest.raises(UsageError, match="the model cannot be read here .*use --ship-data"):
        list(batch_dask.results(dask_client, elsewhere, samples, out_dir=None, return_outputs=True,
                                ship_data=False, model_here=str(DIGITS)))
    got = dict(batch_dask.results(dask_client, elsewhere, samples, out_dir=None, return_outputs=True,
                                  ship_data=True, model_here=str(DIGITS)))
    # Sample paths the workers cannot read: said before anything is submitted.
    unseen = [Sample("u", "u.npy", file=str(tmp_path / "elsewhere" / "u.npy"))]
    with pytest.raises(UsageError, match="cannot read the sample .*u.npy"):
        list(batch_dask.results(dask_client, ModelSpec.of(model), unseen, out_dir=None, return_outputs=True,
                                ship_data=False))
    for i, x in enumerate(images):
        assert_blas_close(got[f"s{i}"]["probabilities"], model.infer(x[None])["probabilities"])


# ---------------------------------------------------------------- Model: pickling, threads, state

def test_model_pickles_as_its_paths_and_loads_again(tmp_path):
    shutil.copy(DIGITS, tmp_path / "model.xml")
    shutil.copy(DIGITS.with_suffix(".bin"), tmp_path / "model.bin")
    model = irrun.load(tmp_path / "model.xml")
    data = pickle.dumps(model)
    assert len(data) < 1000                          # paths and options, not weights
    again = pickle.loads(data)
    x = np.load(ROOT / "models" / "digits" / "digit3.npy")
    assert np.array_equal(again.infer(x)["probabilities"], model.infer(x)["probabilities"])
    assert again.max_memory is None and str(again.path) == str((tmp_path / "model.xml").absolute())
    # Other weights at the same path: refused where it is unpickled ...
    unpickled_before = irrun.load(tmp_path / "model.xml")
    weights = np.fromfile(tmp_path / "model.bin", np.uint8)
    weights[::2] ^= 1
    weights.tofile(tmp_path / "model.bin")
    with pytest.raises(ModelError, match="is not the model that was pickled"):
        pickle.loads(data)
    # ... and a model whose files changed since it was loaded is not pickled as what it holds.
    with pytest.raises(ModelError, match="changed since it was loaded"):
        pickle.dumps(unpickled_before)


def f16_chain_ir(tmp_path) -> Path:
    """f16 arithmetic whose result depends on the precision it is computed in."""
    x = ops.parameter([8], np.float16, name="x")
    y = ops.multiply(x, ops.constant(np.full(8, 1 / 3, np.float16)))
    for _ in range(5):
        y = ops.add(ops.multiply(y, ops.constant(np.full(8, 1.37, np.float16))), ops.constant(np.full(8, 0.011, np.float16)))
    return save(ov.Model([ops.result(y)], [x], "chain"), tmp_path)


def test_load_options_travel_with_the_model(tmp_path):
    """precision and strict decide the results: a pickle and every batch worker load with them (and
    with optimize, which does not)."""
    xml = f16_chain_ir(tmp_path)
    declared = irrun.load(xml, precision="declared", strict=True, optimize=False)
    again = pickle.loads(pickle.dumps(declared))
    assert again.options() == declared.options() == {"max_memory": None, "precision": "declared", "strict": True,
                                                     "optimize": False, "compressed_weights": "auto"}
    samples = {f"s{i}": np.linspace(0.1, 7 + i, 8).astype(np.float16) for i in range(6)}
    expected = {k: declared.infer(v) for k, v in samples.items()}
    assert any(not np.array_equal(next(iter(irrun.load(xml).infer(v).values())),
                                  next(iter(expected[k].values()))) for k, v in samples.items())
    for jobs in (1, 2):
        got = dict(batch.run(xml, samples, jobs=jobs, precision="declared"))
        for k in samples:
            assert np.array_equal(next(iter(got[k].values())), next(iter(expected[k].values()))), (jobs, k)


def test_threads_share_one_model(tmp_path):
    """Concurrent calls (in-place kernels, dynamic shapes re-checked per call) equal serial ones."""
    rng = np.random.default_rng(1)
    static = irrun.load(RESNET)
    dynamic = irrun.load(ROOT / "tests" / "models" / "resnet_dynamic.f32.xml")
    cases = [(static, rng.standard_normal((1, 3, 64, 64)).astype(np.float32)) for _ in range(16)]
    cases += [(dynamic, rng.standard_normal((n, 3, s, s)).astype(np.float32))
              for n, s in [(1, 32), (2, 48), (1, 64), (3, 40)] * 4]
    serial = [m.infer(x) for m, x in cases]
    with ThreadPoolExecutor(8) as pool:
        for _ in range(2):
            concurrent = list(pool.map(lambda case: case[0].infer(case[1]), cases))
            for a, b in zip(concurrent, serial):
                for k in b:
                    assert_blas_close(a[k], b[k], what=k)


def test_threads_running_kernels_in_parts_leave_blas_as_it_was(tmp_path):
    """Strided convolutions run their im2col blocks in parts, BLAS on one thread meanwhile; the
    blocks of several calling threads overlap, and BLAS must get its thread count back after."""
    from irrun import threads
    if threads.blas_threads() is None:
        pytest.skip("threadpoolctl does not see a BLAS here")
    before = threads.threads()
    threads.set_threads(2)
    try:
        x = ops.parameter([1, 32, 112, 112], np.float32, name="x")
        w = ops.constant(np.random.default_rng(0).standard_normal((64, 32, 3, 3)).astype(np.float32) / 24)
        xml = save(ov.Model([ops.result(ops.convolution(x, w, [2, 2], [1, 1], [1, 1], [1, 1]))], [x], "conv"),
                   tmp_path)
        model = irrun.load(xml)
        xs = [np.random.default_rng(i).standard_normal((1, 32, 112, 112)).astype(np.float32) for i in range(12)]
        serial = [next(iter(model.infer(v).values())) for v in xs]
        for _ in range(3):
            with ThreadPoolExecutor(4) as pool:
                for got, expected in zip(pool.map(lambda v: next(iter(model.infer(v).values())), xs), serial):
                    assert_blas_close(got, expected)
            assert threads.blas_threads() == 2
    finally:
        threads.set_threads(before)


def accumulator_ir(tmp_path) -> Path:
    """acc = (previous acc, or x on the first call) + x; outputs acc."""
    x = ops.parameter([2, 3], np.float32, name="x")
    info = VariableInfo()
    info.data_shape, info.data_type, info.variable_id = ov.PartialShape([2, 3]), ov.Type.f32, "acc"
    var = Variable(info)
    total = ops.add(ops.read_value(x, var), x)
    total.output(0).set_names({"acc"})
    return save(ov.Model([ops.result(total)], [ops.assign(total, var)], [x], "accumulator"), tmp_path)


def test_stateful_samples_are_sequences_with_fresh_state(tmp_path):
    """Each sample starts from the initial state; one extra leading axis makes it a sequence of
    calls.  Against one OpenVINO InferRequest, reset before each sample."""
    xml = accumulator_ir(tmp_path)
    rng = np.random.default_rng(2)
    samples = {"seq5": rng.standard_normal((5, 2, 3)).astype(np.float32),
               "seq2": rng.standard_normal((2, 2, 3)).astype(np.float32),
               "single": rng.standard_normal((2, 3)).astype(np.float32)}
    request = compile_cpu(xml).create_infer_request()
    for jobs in (1, 2):
        got = dict(batch.run(xml, samples, jobs=jobs))
        for name, x in samples.items():
            request.reset_state()
            steps = x if x.ndim == 3 else [x]
            expected = np.stack([request.infer([s])[0].copy() for s in steps])
            assert_close(got[name]["acc"], expected if x.ndim == 3 else expected[0], what=name)
    # Threads running sequences on one model take turns: each sees only its own state.
    model = irrun.load(xml)

    def sequence(x):
        with model.sequence():
            return [model.infer(s)["acc"] for s in x]
    xs = [rng.standard_normal((4, 2, 3)).astype(np.float32) for _ in range(8)]
    with ThreadPoolExecutor(4) as pool:
        for x, outs in zip(xs, pool.map(sequence, xs)):
            assert np.allclose(outs[-1], x.sum(0) + x[0], atol=1e-5)     # 2 x0 + x1 + x2 + x3


def test_progress_bar_only_on_a_terminal():
    class Terminal(StringIO):
        def isatty(self):
            return True
    screen = Terminal()
    bar = Progress(20, stream=screen, every=0)
    for i in range(10):
        bar.advance(failed=i == 3)
    bar.message("failed: x.npy: reason")
    assert "10/20" in screen.getvalue() and "samples/s" in screen.getvalue() and "ETA" in screen.getvalue()
    assert "1 failed" in screen.getvalue() and "failed: x.npy: reason\n" in screen.getvalue()
    log = StringIO()
    quiet = Progress(20, stream=log, every=0)
    quiet.advance()
    quiet.message("note")
    assert log.getvalue() == "note\n"
