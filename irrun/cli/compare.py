"""`irrun compare`: every layer output against a reference, and the first layer that diverges."""
from __future__ import annotations

import json

import click

from ..compare import compare
from ..errors import IrrunError, UsageError
from ..model import load
from ..shapes import format_shape
from ..tolerance import RELATIVE_TO, defaults
from .base import cli, compressed_weights_option, inputs_for, optimize_option, parse_size


def tolerance_options(command):
    """--rtol, --atol and --relative-to, for `compare` and `reduce`."""
    for option in reversed((
            click.option("--rtol", type=float, default=None, help="Relative tolerance for every floating-point "
                         f"tensor (default by element type: {defaults('rtol')}; integers compare exactly)."),
            click.option("--atol", type=float, default=None, help="Absolute tolerance for every floating-point "
                         f"tensor (default by element type: {defaults('atol')})."),
            click.option("--relative-to", type=click.Choice(RELATIVE_TO), default=RELATIVE_TO[0], show_default=True,
                         help="What rtol multiplies: the reference tensor's largest magnitude (rounding in a sum "
                              "scales with its terms), or each element's own (NumPy's allclose).")),):
        command = option(command)
    return command


@cli.command("compare")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--input", "-i", "inputs", multiple=True, metavar="[NAME=]FILE",
              help="Inputs as for `irrun infer`. Repeatable.")
@click.option("--reference", "-r", required=True, metavar="REF",
              help="openvino (or openvino:DEVICE), a .npz, a --dump directory, or another IR (.xml).")
@tolerance_options
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--max-memory", type=str, default=None, metavar="SIZE", help="As for `irrun infer`.")
@optimize_option
@compressed_weights_option
@click.pass_context
def compare_command(ctx, model, inputs, reference, rtol, atol, relative_to, fmt, max_memory, optimize,
                    compressed_weights):
    """Compare every layer output of MODEL with REF; name the first layer that diverges.

    Exit code 0: every compared tensor agrees; 1: something diverges; 2: usage or input error.
    """
    try:
        report = _compare(model, inputs, reference, rtol, atol, relative_to, max_memory, optimize, compressed_weights)
    except IrrunError as exc:
        exc.exit_code = 2       # any error is 2 here: 1 says that something diverges
        raise
    if fmt == "json":
        click.echo(json.dumps(report.to_json(), indent=1))
    else:
        click.echo(report.format_text())
    ctx.exit(0 if report.ok else 1)


def _compare(model, inputs, reference, rtol, atol, relative_to, max_memory, optimize, compressed_weights):
    check_tolerances(rtol, atol)
    m = load(model, max_memory=parse_size(max_memory) if max_memory else None, optimize=optimize,
             compressed_weights=compressed_weights)
    require_inputs(m, inputs)
    return compare(m, inputs_for(m, inputs), reference, rtol=rtol, atol=atol, relative_to=relative_to,
                   max_memory=parse_size(max_memory) if max_memory else None)


def check_tolerances(rtol, atol) -> None:
    for name, value in (("--rtol", rtol), ("--atol", atol)):
        if value is not None and not value >= 0:
            raise UsageError(f"{name} must be a number >= 0, got {value}")


def require_inputs(m, inputs) -> None:
    if not inputs:
        want = ", ".join(f"{i.name} {format_shape(i.shape)} {i.element_type}" for i in m.inputs)
        raise UsageError(f"no --input given; the model takes: {want}")
