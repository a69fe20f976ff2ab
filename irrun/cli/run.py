"""`irrun infer`: run a model on array files."""
from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

import click

from ..arrays import output_target_kind, save_outputs
from ..dump import Dump, select_layers
from ..errors import UsageError
from ..model import load
from ..profiling import profile as run_profile
from ..reshape import shape_options
from ..shapes import format_shape
from ..summary import format_summary, tensor_summary
from .base import (cli, compressed_weights_option, inputs_for, optimize_option, parse_size, precision_options,
                   threads_option)




@cli.command()
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--input", "-i", "inputs", multiple=True, metavar="[NAME=]FILE",
              help="x.npy (inputs in order), NAME=x.npy (by tensor or Parameter name), or in.npz (keys = names). "
                   "Repeatable.")
@click.option("--output", "-o", metavar="OUT",
              help="Write the outputs to OUT: a .npz (every output, keyed by name), a .npy (a model with one output), "
                   "a directory (existing, ending in /, or without a suffix: one NAME.npy per output, see README), "
                   "or - (the .npz to stdout).")
@click.option("--max-memory", type=str, default=None, metavar="SIZE",
              help="Refuse any tensor larger than SIZE (e.g. 4G). Default: half of physical memory.")
@click.option("--shape", "shapes", multiple=True, metavar="[NAME=][DIMS]",
              help="Reshape an input before running, e.g. x=[2,3,320,320]; -1 or ? makes a dim dynamic. "
                   "Repeatable.")
@click.option("--profile", is_flag=True,
              help="After a warm-up, time --repeat runs; print the median time per op type and the slowest layers.")
@click.option("--repeat", type=int, default=None, metavar="N",
              help="Runs to take the median of with --profile/--trace (default: about a second's worth, 3 to 100).")
@click.option("--trace", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write the median run as a Chrome trace (trace.json: open in ui.perfetto.dev or chrome://tracing).")
@click.option("--dump", type=click.Path(), metavar="PATH",
              help="Write every layer's output as it is produced: PATH.npz is one archive, any other PATH a "
                   "directory of .npy files with index.json.")
@click.option("--dump-filter", metavar="REGEX|TYPE",
              help="Dump only the layers of this op type, or whose names match this regular expression.")
@click.option("--dump-bodies", is_flag=True,
              help="Dump the layers inside Loop, TensorIterator and If bodies too, per iteration.")
@threads_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="How to print the outputs' summary; json: {\"outputs\": [...]} on stdout, for scripts.")
@precision_options
@optimize_option
@compressed_weights_option
def infer(model, inputs, output, max_memory, shapes, profile, repeat, trace, dump, dump_filter, dump_bodies, threads,
          fmt, precision, strict, optimize, compressed_weights):
    """Run MODEL on the given inputs."""
    if output is not None:
        output_target_kind(output)      # a bad --output is refused before the model runs
        if output == "-" and fmt == "json":
            raise UsageError("--output - and --format json both write to stdout; write the outputs to a file")
    limit = parse_size(max_memory) if max_memory else None
    m = load(model, max_memory=limit, threads=threads, precision=precision, strict=strict, optimize=optimize,
             compressed_weights=compressed_weights)
    if shapes:
        m.reshape(shape_options(m, shapes))
    if not inputs:
        want = ", ".join(f"{i.name} {format_shape(i.shape)} {i.element_type}" for i in m.inputs)
        raise UsageError(f"no --input given; the model takes: {want}")
    if (dump_filter or dump_bodies) and not dump:
        raise UsageError("--dump-filter and --dump-bodies go with --dump PATH")
    if repeat is not None and not (profile or trace):
        raise UsageError("--repeat goes with --profile or --trace")
    feeds = inputs_for(m, inputs)
    to_stdout = output == "-"
    if dump:
        with Dump(dump, select_layers(m, dump_filter), bodies=dump_bodies) as dumped:
            outputs = m.infer(feeds, watch=[dumped])
        click.echo(f"dumped {len(dumped.written)} tensors to {dump}", err=True)
    else:
        outputs = m.infer(feeds)
    if profile or trace:
        timed = run_profile(m, feeds, repeat)
        if profile:
            with contextlib.redirect_stdout(sys.stderr if fmt == "json" or to_stdout else sys.stdout):
                click.echo(timed.format_text())             # stdout carries the JSON or the .npz only
        if trace:
            timed.write_trace(trace)
            click.echo(f"wrote a trace of {len(timed.layers)} layers to {trace}", err=True)
    # (sys.stdout's own buffer: click.get_binary_stream is deprecated, to go in Click 9.0)
    written = save_outputs(output, outputs, stdout=sys.stdout.buffer) if output is not None else None
    if fmt == "json":
        report = {"model": str(m.path), "outputs": [{"name": name, **tensor_summary(value)}
                                                    for name, value in outputs.items()]}
        if written:
            report["written_to"] = output
            report["files"] = written
        click.echo(json.dumps(report, indent=2))
    elif written:
        click.echo(f"wrote {len(outputs)} output{'s' if len(outputs) != 1 else ''} to {_where(output, written)}",
                   err=to_stdout)
    else:
        for name, value in outputs.items():
            for line in format_summary(name, tensor_summary(value)):
                click.echo(line)


def _where(target: str, written: list[str]) -> str:
    """The message's account of what `save_outputs` wrote: the file, stdout, or the directory and its files."""
    if written == ["-"]:
        return "stdout (.npz)"
    if output_target_kind(target) != "dir":
        return written[0]
    folder = str(Path(written[0]).parent) if written else target.rstrip("/" + os.sep)
    return f"{folder}{os.sep} ({', '.join(Path(w).name for w in written)})"
