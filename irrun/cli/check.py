"""`irrun validate`: report every defect of an IR."""
from __future__ import annotations

import json
import sys

import click

from ..model import validate
from .base import cli


@cli.command(name="validate")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--strict", is_flag=True, help="Treat warnings as errors.")
def validate_cmd(model, fmt, strict):
    """Check MODEL and report every defect found (exit 0 clean, 1 errors, 2 unreadable)."""
    report = validate(model)
    if fmt == "json":
        click.echo(json.dumps([d.to_json() for d in report.diagnostics], indent=2))
    else:
        for d in report.diagnostics:
            click.echo(d.format())
        n_err, n_warn = len(report.errors), len(report.warnings)
        click.echo(f"{model}: {n_err} error{'s' if n_err != 1 else ''}, {n_warn} warning{'s' if n_warn != 1 else ''}")
    if report.unreadable:
        sys.exit(2)
    sys.exit(1 if report.errors or (strict and report.warnings) else 0)
