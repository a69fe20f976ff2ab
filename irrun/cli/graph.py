"""`irrun graph`: the model's graph as Graphviz DOT, GraphML or node-link JSON."""
from __future__ import annotations

import sys

import click

from ..graph_export import FORMATS, annotated_graph, format_for, render, write_graph
from ..model import _document_and_analysis
from .base import cli


@cli.command()
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="Default: from the suffix of -o (.dot/.gv, .graphml, .json), else dot.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Write here (atomically); without it, or with '-', to standard output.")
def graph(model, fmt, output):
    """One node per layer (id, name, type, version, attributes), one edge per IR edge (shape, type).

    Sub-graph bodies are included, with scoped ids (7/3) and, in DOT, drawn as clusters.
    Works on any readable IR, also one irrun cannot run.
    """
    fmt = format_for(output, fmt)
    document, analysis, weights = _document_and_analysis(model)
    if weights is not None:
        weights.close()
    g = annotated_graph(analysis)
    if output is None or output == "-":
        sys.stdout.buffer.write(render(g, fmt, str(document.path)))
        sys.stdout.flush()
        return
    write_graph(g, output, fmt, str(document.path))
    click.echo(f"wrote {g.number_of_nodes()} layers and {g.number_of_edges()} edges to {output} ({fmt})", err=True)
