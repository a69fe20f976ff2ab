"""`irrun infer`: run a model on array files."""
from __future__ import annotations

import contextlib
import json
import sys

import click

from ..arrays import save_npz
from ..errors import UsageError
from ..model import load
from ..precision import PRECISIONS
from ..shapes import format_shape
from ..summary import format_summary, tensor_summary
from .base import cli, collect_inputs, parse_size, threads_option


def _print_profile(timings: list) -> None:
    total = sum(t for _, t in timings) or 1e-12
    by_type: dict[str, list[float]] = {}
    for layer, t in timings:
        by_type.setdefault(layer.label, []).append(t)
    click.echo(f"profile: {len(timings)} layers run in {total * 1e3:.3f} ms")
    click.echo(f"  {'ms':>9}  {'%':>5}  {'count':>5}  layer type")
    for label, ts in sorted(by_type.items(), key=lambda kv: -sum(kv[1])):
        click.echo(f"  {sum(ts) * 1e3:9.3f}  {100 * sum(ts) / total:5.1f}  {len(ts):5d}  {label}")
    click.echo("  slowest layers:")
    for layer, t in sorted(timings, key=lambda lt: -lt[1])[:10]:
        click.echo(f"  {t * 1e3:9.3f}  {layer.ref.describe()}")


@cli.command()
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--input", "-i", "inputs", multiple=True, metavar="[NAME=]FILE",
              help="x.npy (inputs in order), NAME=x.npy (by tensor or Parameter name), or in.npz (keys = names). "
                   "Repeatable.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write every output to this .npz, keyed by name.")
@click.option("--max-memory", type=str, default=None, metavar="SIZE",
              help="Refuse any tensor larger than SIZE (e.g. 4G). Default: half of physical memory.")
@click.option("--profile", is_flag=True, help="Print time per layer type and the slowest layers.")
@threads_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="How to print the outputs' summary; json: {\"outputs\": [...]} on stdout, for scripts.")
@click.option("--precision", type=click.Choice(PRECISIONS), default="f32", show_default=True,
              help="f32: f16/bf16 layers computed in f32, as OpenVINO's CPU plugin does; declared: every layer in "
                   "its declared type (f16 results rounded, as on f16 devices).")
@click.option("--strict", is_flag=True,
              help="Refuse a model whose declared port shapes or precisions contradict inference (by default it "
                   "runs with the inferred ones, as OpenVINO does).")
def infer(model, inputs, output, max_memory, profile, threads, fmt, precision, strict):
    """Run MODEL on the given inputs."""
    limit = parse_size(max_memory) if max_memory else None
    m = load(model, max_memory=limit, threads=threads, precision=precision, strict=strict)
    if not inputs:
        want = ", ".join(f"{i.name} {format_shape(i.shape)} {i.element_type}" for i in m.inputs)
        raise UsageError(f"no --input given; the model takes: {want}")
    timings: list | None = [] if profile else None
    outputs = m.infer(collect_inputs(inputs), profile=timings)
    if timings is not None:
        with contextlib.redirect_stdout(sys.stderr if fmt == "json" else sys.stdout):   # stdout: the JSON only
            _print_profile(timings)
    if output:
        save_npz(output, outputs)
    if fmt == "json":
        report = {"model": str(m.path), "outputs": [{"name": name, **tensor_summary(value)}
                                                    for name, value in outputs.items()]}
        if output:
            report["written_to"] = output
        click.echo(json.dumps(report, indent=2))
    elif output:
        click.echo(f"wrote {len(outputs)} output{'s' if len(outputs) != 1 else ''} to {output}")
    else:
        for name, value in outputs.items():
            for line in format_summary(name, tensor_summary(value)):
                click.echo(line)
