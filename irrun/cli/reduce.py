"""`irrun reduce`: the smallest IR that still shows where a model diverges from a reference."""
from __future__ import annotations

import json
from pathlib import Path

import click

from ..errors import IrrunError
from .base import cli, inputs_for, parse_size
from .compare import tolerance_options


@cli.command("reduce")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--input", "-i", "inputs", multiple=True, metavar="[NAME=]FILE",
              help="Inputs as for `irrun infer`. Repeatable.")
@click.option("--reference", "-r", required=True, metavar="REF",
              help="As for `irrun compare`: openvino (or openvino:DEVICE), a .npz, a --dump directory, or another "
                   "IR (.xml).")
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False), metavar="MIN.xml",
              help="The reduced IR to write (and its .bin, MIN.inputs.npz and MIN.expected.npz).")
@tolerance_options
@click.option("--layer", default=None, metavar="NAME",
              help="Reduce the divergence of this layer instead of the first one.")
@click.option("--max-layers", type=click.IntRange(min=1), default=None, metavar="N",
              help="The largest cut to try when the layer alone does not reproduce the divergence (default 16).")
@click.option("--force", is_flag=True, help="Allow overwriting the files MODEL, REF and the inputs are read from.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--max-memory", type=str, default=None, metavar="SIZE", help="As for `irrun infer`.")
@click.pass_context
def reduce_command(ctx, model, inputs, reference, output, rtol, atol, relative_to, layer, max_layers, force, fmt,
                   max_memory):
    """Write the smallest IR that reproduces the first divergence of MODEL from REF.

    The diverging layer with its inputs as Parameters (grown backwards when the layer alone does
    not reproduce it), with MIN.inputs.npz and MIN.expected.npz for a bug report.
    Exit code 0: nothing diverges (nothing written); 1: reduced, or not reducible; 2: usage or input error.
    """
    try:
        report = _reduce(model, inputs, reference, output, rtol, atol, relative_to, layer, max_layers, force,
                         max_memory)
    except IrrunError as exc:
        exc.exit_code = 2       # any error is 2 here: 1 says that something diverges
        raise
    click.echo(json.dumps(report.to_json(), indent=1) if fmt == "json" else report.format_text())
    ctx.exit(0 if report.status == "agrees" else 1)


def _reduce(model, inputs, reference, output, rtol, atol, relative_to, layer, max_layers, force, max_memory):
    from ..model import load
    from ..reduction import DEFAULT_MAX_LAYERS, reduce
    from .compare import check_tolerances, require_inputs
    check_tolerances(rtol, atol)
    limit = parse_size(max_memory) if max_memory else None
    m = load(model, max_memory=limit)
    require_inputs(m, inputs)
    files = [spec if Path(spec).exists() else spec.rpartition("=")[2] for spec in inputs]
    return reduce(m, inputs_for(m, inputs), reference, output, rtol=rtol, atol=atol, relative_to=relative_to,
                  layer=layer, max_layers=max_layers or DEFAULT_MAX_LAYERS, force=force, max_memory=limit,
                  protected=files, progress=lambda text: click.echo(f"{text} ...", err=True))
