"""`irrun extract`: commands that write a new IR from a model."""
from __future__ import annotations

import click

from .base import cli


def _names(values: tuple[str, ...]) -> list[str]:
    """`--outputs a,b --outputs c` -> [a, b, c] (a name with a comma is written `\\,`)."""
    from ..ir import split_names
    return [name for value in values for name in split_names(value)]


@cli.command()
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--outputs", "outputs", multiple=True, required=True, metavar="NAME[,NAME...]",
              help="The tensors to compute: a layer name (all its outputs), LAYER:INDEX, or a tensor name. "
                   "Repeatable.")
@click.option("--inputs", "inputs", multiple=True, metavar="NAME[,NAME...]",
              help="Tensors to cut at: each becomes a Parameter (of the shape and type inference gives it). "
                   "Repeatable.")
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False), metavar="SUB.xml",
              help="The IR to write (and its .bin).")
@click.option("--force", is_flag=True, help="Allow overwriting MODEL's own files.")
def extract(model, outputs, inputs, output, force):
    """Write the part of MODEL that computes --outputs (from --inputs) as a standalone IR."""
    from ..extraction import extract as extract_ir
    from ..ir import parse_document
    written = extract_ir(model, output, outputs=_names(outputs), inputs=_names(inputs), force=force)
    graph = parse_document(written).graph
    count = {t: sum(1 for l in graph.layers.values() if l.op_type == t) for t in ("Parameter", "Result")}
    click.echo(f"wrote {written}: {len(graph.layers)} layers, {count['Parameter']} input"
               f"{'s' if count['Parameter'] != 1 else ''}, {count['Result']} output{'s' if count['Result'] != 1 else ''}")
