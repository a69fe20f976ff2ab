"""`irrun validate`: report every defect of an IR; with `--fix`, repair it."""
from __future__ import annotations

import json
import sys

import click

from ..errors import UsageError
from ..model import validate
from .base import cli


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


@cli.command(name="validate")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--strict", is_flag=True, help="Report every warning as an error (exit 1).")
@click.option("--fix", is_flag=True, help="Rewrite wrong declared dims and precisions, drop dangling edges and dead "
                                          "layers, and write the result to -o; refuse (exit 1, nothing written) when "
                                          "a defect has no safe repair.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), metavar="FIXED.xml",
              help="With --fix: the repaired IR to write (and its .bin).")
@click.option("--force", is_flag=True, help="With --fix: allow overwriting MODEL's own files.")
def validate_cmd(model, fmt, strict, fix, output, force):
    """Check MODEL and report every defect found (exit 0 clean, 1 errors, 2 unreadable)."""
    if fix or output or force:
        if not (fix and output):
            raise UsageError("--fix and -o FIXED.xml go together (--force only with them)")
        _fix(model, output, fmt, strict, force)
    report = validate(model, strict=strict)
    if fmt == "json":
        click.echo(json.dumps([d.to_json() for d in report.diagnostics], indent=2))
    else:
        for d in report.diagnostics:
            click.echo(d.format())
        click.echo(f"{model}: {_plural(len(report.errors), 'error')}, {_plural(len(report.warnings), 'warning')}")
    if report.unreadable:
        sys.exit(2)
    sys.exit(1 if report.errors or (strict and report.warnings) else 0)


def _fix(model, output, fmt, strict, force):
    from ..fix import repair
    report = repair(model, output, force=force, strict=strict)
    if fmt == "json":
        click.echo(json.dumps({"fixed": [vars(c) | {"layer": c.layer.describe() if c.layer else None}
                                         for c in report.changes],
                               "unrepairable": [d.to_json() for d in report.unrepairable],
                               "kept": [d.to_json() for d in report.kept],
                               "written": str(report.written) if report.written else None}, indent=2))
    else:
        for change in report.changes:
            click.echo(change.format())
        for d in report.unrepairable:
            click.echo(f"{d.format()} (no safe repair)")
        for d in report.kept:
            click.echo(f"{d.format()} (left as it is)")
        if report.unrepairable:
            click.echo(f"{model}: {_plural(len(report.unrepairable), 'defect')} without a safe repair; "
                       f"nothing written")
        else:
            click.echo(f"{model}: {_plural(len(report.changes), 'repair')}; wrote {report.written}")
    sys.exit(1 if report.unrepairable else 0)
