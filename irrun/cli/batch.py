"""`irrun batch`: many samples through one model, on local processes or a Dask cluster."""
from __future__ import annotations

import json
import sys

import click

from ..batch import FAILURES, run
from ..errors import UsageError
from ..samples import SampleError
from ..threads import available_cpus
from .base import cli, compressed_weights_option, optimize_option, parse_size, precision_options
from .progress import Progress


def _summary_text(summary: dict, how_stopped: str | None) -> list[str]:
    seconds = summary["seconds"]
    rate = f" ({summary['done'] / seconds:.1f} samples/s)" if summary["done"] and seconds > 0 else ""
    lines = [f"{summary['total']} samples: {summary['done']} done, {summary['skipped']} skipped, "
             f"{summary['failed']} failed in {seconds:.2f} s{rate}; results in {summary['out_dir']}"]
    if summary["failed"]:
        lines.append(f"failures are listed in {summary['out_dir']}/{FAILURES}")
    if how_stopped:
        lines.append(f"{how_stopped}: {summary['not_run']} samples not run; run the same command again "
                     f"to finish (finished results are kept)")
    return lines


@cli.command(name="batch")
@click.argument("model", type=click.Path(dir_okay=False))
@click.argument("inputs")
@click.option("--output", "-o", "out_dir", required=True, type=click.Path(file_okay=False), metavar="OUTDIR",
              help="Write each result to OUTDIR/<sample name>.npz, keyed by output name.")
@click.option("--jobs", "-j", default="1", show_default=True, metavar="N|auto",
              help="Local worker processes, each loading the model once (auto: one per available core).")
@click.option("--threads", type=click.IntRange(min=1), default=None, metavar="N",
              help="Threads for kernels and BLAS in each worker (default: available cores / jobs; "
                   "with one job, in this process).")
@click.option("--dask", "dask_address", metavar="ADDRESS",
              help="Run on the Dask cluster whose scheduler is at ADDRESS (tcp://host:8786).")
@click.option("--resume/--overwrite", default=True, show_default=True,
              help="Skip samples whose result is already in OUTDIR, or compute them all again.")
@click.option("--fail-fast", is_flag=True, help="Stop at the first sample that fails.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="The summary printed at the end.")
@click.option("--stacked", is_flag=True,
              help="INPUTS is one .npz (or .npy) whose arrays carry a leading sample axis.")
@click.option("--ship-data", is_flag=True,
              help="With --dask: send the samples' arrays (and the model, where a worker lacks it), not paths.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar and no notes (failures are still reported).")
@click.option("--max-memory", type=str, default=None, metavar="SIZE",
              help="Refuse any tensor larger than SIZE (e.g. 4G). Default: half of physical memory.")
@precision_options
@optimize_option
@compressed_weights_option
def batch_cmd(model, inputs, out_dir, jobs, threads, dask_address, resume, fail_fast, fmt, stacked, ship_data,
              quiet, max_memory, precision, strict, optimize, compressed_weights):
    """Run MODEL on every sample in INPUTS and write the results to OUTDIR.

    INPUTS is a directory (its .npz / .npy files) or a glob pattern: an .npz per sample keyed
    by input name, or an .npy per sample for a model with one input; or, with --stacked, one
    file holding all samples.  A sample that fails is reported and the rest go on (exit 1).
    """
    if dask_address and jobs != "1":
        raise UsageError("--jobs starts local worker processes; with --dask the cluster's workers run the samples")
    if ship_data and not dask_address:
        raise UsageError("--ship-data applies to --dask (local workers read the samples themselves)")
    batch = run(model, inputs, out_dir, jobs=jobs, client=dask_address, resume=resume, fail_fast=fail_fast,
                stacked=stacked, ship_data=ship_data, return_outputs=False, threads=threads,
                max_memory=parse_size(max_memory) if max_memory else None, precision=precision, strict=strict,
                optimize=optimize, compressed_weights=compressed_weights)
    progress = Progress(len(batch.todo), enabled=not quiet)
    if not quiet:
        if not dask_address and batch.jobs > available_cpus():
            progress.message(f"note: {batch.jobs} jobs on {available_cpus()} available cores: they take turns")
        for name in batch.ignored:
            progress.message(f"note: {inputs}: array {name!r} is not an input of the model; left out")
        if batch.skipped:
            progress.message(f"note: {len(batch.skipped)} of {batch.total} samples are already done in {out_dir} "
                             f"(--overwrite computes them again)")
    how_stopped = None
    try:
        for _, result in batch:
            failed = isinstance(result, SampleError)
            if failed:
                progress.message(f"failed: {result}")
            progress.advance(failed)
        if batch.stopped:
            how_stopped = "stopped at the first failure (--fail-fast)"
    except KeyboardInterrupt:
        batch.close()
        how_stopped = "interrupted"
    finally:
        progress.close()
    summary = batch.summary()
    if fmt == "json":
        summary["stopped"] = how_stopped
        click.echo(json.dumps(summary, indent=1))
    else:
        for line in _summary_text(summary, how_stopped):
            click.echo(line)
    sys.exit(130 if how_stopped == "interrupted" else 1 if summary["failed"] else 0)
