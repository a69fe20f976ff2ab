"""The `irrun` command line: infer, validate, info, ops."""
from __future__ import annotations

import json
import os
import re
import sys
import zipfile
from collections import Counter
from pathlib import Path

import click
import numpy as np

from . import __version__
from .errors import InputError, IrrunError, UsageError
from .model import Model, load, validate
from .shapes import format_shape

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    m = _SIZE.match(text)
    if not m:
        raise click.BadParameter(f"{text!r} is not a size (examples: 512M, 4G, 1000000)")
    return int(float(m.group(1)) * 1024 ** " kmgt".index(m.group(2).lower() or " "))


def _load_array_file(path: str):
    """Arrays from .npy / .npz, never unpickling anything."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{path}: no such input file")
    with open(p, "rb") as f:
        magic = f.read(6)
    if magic != b"\x93NUMPY" and not magic.startswith(b"PK"):
        raise InputError(f"{path}: not a .npy/.npz array file (it does not start with the NumPy or zip magic)")
    try:
        data = np.load(p, allow_pickle=False)
    except ValueError as exc:
        if "pickle" in str(exc).lower():
            raise InputError(f"{path}: holds pickled Python objects, which irrun refuses to load") from None
        raise InputError(f"{path}: not a .npy/.npz array file ({exc})") from None
    except (OSError, EOFError, zipfile.BadZipFile) as exc:
        raise InputError(f"{path}: not a readable .npy/.npz array file ({exc})") from None
    if isinstance(data, np.lib.npyio.NpzFile):
        with data:
            try:
                return {k: data[k] for k in data.files}
            except ValueError as exc:
                raise InputError(f"{path}: an array in it cannot be read without pickle ({exc})") from None
    return data


def collect_inputs(specs: tuple[str, ...]):
    """`--input` values -> a dict (named) or a list (positional)."""
    named, positional = {}, []
    for spec in specs:
        name, sep, path = spec.rpartition("=")
        if sep and name and not Path(spec).exists():
            named[name] = _load_array_file(path)
            continue
        loaded = _load_array_file(spec)
        if isinstance(loaded, dict):
            named.update(loaded)
        else:
            positional.append(loaded)
    if named and positional:
        raise UsageError("mix of named (NAME=file.npy / .npz) and positional --input values; use one style")
    return named if named else positional


def _summary(name: str, value: np.ndarray) -> list[str]:
    lines = [f"{name}: shape {list(value.shape)} {value.dtype}"]
    if value.size and value.dtype.kind in "biuf":
        v = value.astype(np.float64)
        lines[0] += f"  min {np.nanmin(v):.6g}  mean {np.nanmean(v):.6g}  max {np.nanmax(v):.6g}"
    scores = value.reshape(-1) if value.ndim <= 2 and value.size == max(value.shape or (0,)) else None
    if scores is not None and value.dtype.kind == "f" and 2 < scores.size <= 100000:
        top = np.argsort(-scores, kind="stable")[:5]
        lines.append("  top-5: " + ", ".join(f"class {i} ({scores[i]:.4g})" for i in top))
    return lines


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


class _Group(click.Group):
    """Turns irrun errors into one `error: ...` line and the right exit code."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except IrrunError as exc:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"error: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("error: interrupted", err=True)
            ctx.exit(130)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except BrokenPipeError:
            # The reader went away (`irrun ... | head`): stop quietly, as Unix tools do.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            ctx.exit(1)
        except Exception as exc:  # noqa: BLE001 - an irrun bug still gets one line, not a traceback
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"error: internal error: {type(exc).__name__}: {exc} (rerun with --debug for details)",
                       err=True)
            ctx.exit(1)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="irrun")
@click.option("--debug", is_flag=True, help="Show Python tracebacks for errors.")
@click.pass_context
def cli(ctx, debug):
    """Run, validate and inspect OpenVINO IR models (model.xml + model.bin)."""
    ctx.obj = {"debug": debug}


@cli.command()
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--input", "-i", "inputs", multiple=True, metavar="[NAME=]FILE",
              help="x.npy (inputs in order), NAME=x.npy (by tensor or Parameter name), or in.npz (keys = names). "
                   "Repeatable.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write every output to this .npz, keyed by name.")
@click.option("--max-memory", type=str, default=None, metavar="SIZE",
              help="Refuse any tensor larger than SIZE (e.g. 4G). Default: half of physical memory.")
@click.option("--profile", is_flag=True, help="Print time per layer type and the slowest layers.")
def infer(model, inputs, output, max_memory, profile):
    """Run MODEL on the given inputs."""
    limit = parse_size(max_memory) if max_memory else None
    m = load(model, max_memory=limit)
    if not inputs:
        want = ", ".join(f"{i.name} {format_shape(i.shape)} {i.element_type}" for i in m.inputs)
        raise UsageError(f"no --input given; the model takes: {want}")
    timings: list | None = [] if profile else None
    outputs = m.infer(collect_inputs(inputs), profile=timings)
    if timings is not None:
        _print_profile(timings)
    if output:
        np.savez(output, **outputs)
        click.echo(f"wrote {len(outputs)} output{'s' if len(outputs) != 1 else ''} to {output}")
        return
    for name, value in outputs.items():
        for line in _summary(name, value):
            click.echo(line)


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


@cli.command()
@click.argument("model", type=click.Path(dir_okay=False))
def info(model):
    """Inputs, outputs, op histogram, parameter count and weights size of MODEL."""
    m: Model = load(model)
    click.echo(f"model: {m.name}  (IR v{m.ir_version}, {len(m.layers)} layers)")
    click.echo("inputs:")
    for i in m.inputs:
        click.echo(f"  {i.name}: {format_shape(i.shape)} {i.element_type}")
    click.echo("outputs:")
    for o in m.outputs:
        click.echo(f"  {o.name}: {format_shape(o.shape)} {o.element_type}")
    histogram = Counter(f"{l.op_type}-{l.op_version}" for l in m.layers.values())
    click.echo("operations:")
    for label, count in sorted(histogram.items(), key=lambda kv: (-kv[1], kv[0])):
        click.echo(f"  {count:6d}  {label}")
    consts = [m.analysis.nodes[l.id].types[0] for l in m.layers.values() if l.op_type == "Constant"]
    params = sum(int(np.prod(t.shape)) for t in consts if t is not None and t.etype.is_float)
    size = m.weights.size if m.weights is not None else 0
    click.echo(f"parameters: {params:,} (floating-point constant elements)")
    click.echo(f"weights: {size:,} bytes in {m.path.with_suffix('.bin').name}")


@cli.command()
@click.option("--format", "fmt", type=click.Choice(["text", "markdown"]), default="text", show_default=True)
def ops(fmt):
    """List the supported operations (type-version)."""
    from .opdocs import ops_markdown, ops_text
    click.echo(ops_markdown() if fmt == "markdown" else ops_text())


def main(argv=None):
    cli.main(args=argv, prog_name="irrun")


if __name__ == "__main__":
    main()
