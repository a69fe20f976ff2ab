"""`irrun info` and `irrun ops`: what a model holds, what irrun supports."""
from __future__ import annotations

from collections import Counter

import click
import numpy as np

from ..model import Model, load
from ..shapes import format_shape
from .base import cli


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
    from ..opdocs import ops_markdown, ops_text
    click.echo(ops_markdown() if fmt == "markdown" else ops_text())
