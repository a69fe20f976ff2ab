"""The command group, error handling and option helpers shared by every command."""
from __future__ import annotations

import os
import re
import sys
import warnings
from pathlib import Path

import click

from .. import __version__
from ..arrays import load_array_file
from ..compressed_products import MODES as COMPRESSED_WEIGHTS_MODES
from ..errors import InputError, IrrunError, IrrunWarning, UsageError

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    m = _SIZE.match(text)
    if not m:
        raise click.BadParameter(f"{text!r} is not a size (examples: 512M, 4G, 1000000)")
    return int(float(m.group(1)) * 1024 ** " kmgt".index(m.group(2).lower() or " "))


def precision_options(command):
    """`--precision` and `--strict`, shared by the commands that run a model."""
    from ..precision import PRECISIONS
    command = click.option("--strict", is_flag=True,
                           help="Refuse a model whose declared port shapes or precisions contradict inference (by "
                                "default it runs with the inferred ones, as OpenVINO does).")(command)
    return click.option("--precision", type=click.Choice(PRECISIONS), default="f32", show_default=True,
                        help="f32: f16/bf16 layers computed in f32, as OpenVINO's CPU plugin does; declared: every "
                             "layer in its declared type (f16 results rounded, as on f16 devices).")(command)


def optimize_option(command):
    """`--no-optimize`, shared by the commands that run a model."""
    return click.option("--optimize/--no-optimize", default=None,
                        help="Rewrite the graph at load where no output can tell (fused elementwise chains, KV "
                             "caches grown in place); --no-optimize runs every layer on its own. Default: on, "
                             "unless IRRUN_OPTIMIZE=0.")(command)


def compressed_weights_option(command):
    """`--compressed-weights`, shared by the commands that run a model."""
    return click.option("--compressed-weights", type=click.Choice(COMPRESSED_WEIGHTS_MODES), default="auto",
                        show_default=True,
                        help="Weights stored compressed (int8/int4/nf4 codes with scales, f16) that MatMuls read: "
                             "decompress them once at load (the fastest), keep them compressed (less memory; each "
                             "product reads its weight's codes as it runs), or auto: decompress unless they would "
                             "not fit in the memory available.")(command)


def threads_option(command):
    """`--threads N`, shared by the commands that run a model."""
    return click.option("--threads", type=click.IntRange(min=1), default=None, metavar="N",
                        help="Threads for kernels and BLAS. Default: IRRUN_THREADS, else every CPU this "
                             "process may use.")(command)


def collect_inputs(specs: tuple[str, ...], model_inputs: set[str] | None = None):
    """`--input` values -> (a dict by name or a list in order, {archive: names ignored}).

    `NAME=file.npz` takes the array NAME of the archive (or its only array).  With `model_inputs`
    (every name the model's inputs answer to), arrays of a `.npz` given whole that are not among
    them are left out and reported, so one archive can hold more than a model needs."""
    named, positional, origin = {}, [], {}
    for spec in specs:
        name, sep, path = spec.rpartition("=")
        if sep and name and not Path(spec).exists():
            _add(named, origin, name, _pick(load_array_file(path), name, path), path)
            continue
        loaded = load_array_file(spec)
        if isinstance(loaded, dict):
            for key, value in loaded.items():
                _add(named, origin, key, value, spec, archive=True)
        else:
            positional.append(loaded)
    ignored: dict[str, list[str]] = {}
    if model_inputs is not None:
        for key, (source, archive) in origin.items():
            if archive and key not in model_inputs:
                ignored.setdefault(source, []).append(key)
                del named[key]
    if origin and positional:
        raise UsageError("mix of named (NAME=file.npy / .npz) and positional --input values; use one style")
    return (named if origin else positional), ignored


def inputs_for(model, specs: tuple[str, ...]):
    """`--input` values for `model` (see `collect_inputs`), noting on stderr what an archive held
    that the model does not take."""
    names = {n for i in model.inputs for n in (i.name, *i.names, i.layer.name)}
    feeds, ignored = collect_inputs(specs, names)
    for archive, extra in ignored.items():
        click.echo(f"note: ignored {', '.join(extra)} in {archive} (not inputs of the model)", err=True)
    return feeds


def _pick(loaded, name: str, path: str):
    """The array for `NAME=path`: the file's array, or the archive's array NAME, or its only array."""
    if not isinstance(loaded, dict):
        return loaded
    if name in loaded:
        return loaded[name]
    if len(loaded) == 1:
        return next(iter(loaded.values()))
    raise InputError(f"{path}: has no array {name!r} (it holds {', '.join(loaded) or 'none'}); "
                     f"pass {name}=FILE.npy or name the arrays after the inputs")


def _add(named: dict, origin: dict, name: str, value, source: str, archive: bool = False) -> None:
    if name in named:
        raise UsageError(f"input {name!r} given twice ({origin[name][0]} and {source})")
    named[name] = value
    origin[name] = (source, archive)


def _show_warning(message, category, filename, lineno, file=None, line=None):
    """An irrun warning is one `warning: ...` line on stderr; any other keeps Python's form."""
    if issubclass(category, IrrunWarning):
        click.echo(f"warning: {message}", err=True)
    else:
        _python_show_warning(message, category, filename, lineno, file, line)


_python_show_warning = warnings.showwarning


class _Group(click.Group):
    """Turns irrun errors into one `error: ...` line and the right exit code."""

    def invoke(self, ctx):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("always", IrrunWarning)
                warnings.showwarning = _show_warning
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


def main(argv=None):
    cli.main(args=argv, prog_name="irrun")
