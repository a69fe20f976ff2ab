"""`irrun info` and `irrun ops`: what a model holds, what irrun supports."""
from __future__ import annotations

import json

import click

from ..memory import format_bytes
from ..shapes import format_shape, is_static
from ..stats import LayerStats, ModelStats, model_stats
from .base import cli

HEAVIEST = 10


def _si(n: float) -> str:
    """1819140000 -> 1.82G."""
    for factor, unit in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= factor:
            return f"{n / factor:.3g}{unit}"
    return f"{n:g}"


def _types(types) -> str:
    return ", ".join("?" if t is None else f"{format_shape(t.shape)} {t.etype}" for t in types)


def _layer_line(layer: LayerStats, total: int) -> str:
    macs = "" if layer.macs is None else f"{_si(layer.macs):>7}" if layer.macs else f"{'':>7}"
    share = f"{100 * layer.macs / total:5.1f}%" if layer.macs and total else f"{'':>6}"
    shown = f'{layer.id} "{layer.name}" {layer.label}'
    return f"  {macs if layer.macs is not None else '      ?'} {share}  {shown}  -> {_types(layer.outputs)}"


def _print_text(st: ModelStats, show_layers: bool) -> None:
    echo = click.echo
    top = list(st.top_layers())
    where = f", {len(st.layers) - len(top)} more in sub-graph bodies" if len(st.layers) > len(top) else ""
    echo(f"model: {st.name}  (IR v{st.ir_version}, {len(top)} layers{where})")
    echo("inputs:")
    for p in st.inputs:
        echo(f"  {p.name}: {format_shape(p.shape)} {p.element_type}")
    echo("outputs:")
    for p in st.outputs:
        echo(f"  {p.name}: {format_shape(p.shape)} {p.element_type}")
    echo("operations:")
    for label, count in sorted(st.operations.items(), key=lambda kv: (-kv[1], kv[0])):
        echo(f"  {count:6d}  {label}")
    echo("opsets: " + ", ".join(f"{name} ({n})" for name, n in st.opsets.items()))
    by_type = ", ".join(f"{t} {n:,}" for t, n in st.parameters.items())
    echo(f"parameters: {st.parameter_count:,}" + (f" ({by_type})" if by_type else ""))
    if st.weights_bytes is not None:
        echo(f"weights: {st.weights_bytes:,} bytes")
    total = st.macs
    uncounted = st.uncounted
    more = f"; {len(uncounted)} layer{'s' if len(uncounted) != 1 else ''} not counted " \
           f"(dynamic shapes or unknown ops)" if uncounted else ""
    echo(f"compute: {_si(total)} MACs, {_si(2 * total)} FLOPs per inference{more}")
    for label, n in list(st.macs_by_type.items())[:HEAVIEST]:
        echo(f"  {_si(n):>7} {100 * n / total:5.1f}%  {label}")
    heavy = sorted((l for l in st.top_layers() if l.live and l.macs), key=lambda l: -l.macs)[:HEAVIEST]
    if heavy:
        echo("heaviest layers:")
        for layer in heavy:
            echo(_layer_line(layer, total))
    dynamic_inputs = [p for p in st.inputs if not is_static(p.shape)]
    if dynamic_inputs or st.dynamic_tensors:
        echo(f"dynamic: inputs {', '.join(f'{p.name} {format_shape(p.shape)}' for p in dynamic_inputs) or 'none'}; "
             f"{st.dynamic_tensors} layer output{'s' if st.dynamic_tensors != 1 else ''} with dynamic dims")
    else:
        echo("dynamic: none (every shape is static)")
    if st.compression:
        echo("weight compression:")
        for c in st.compression:
            groups = ", ".join(f"{'per channel' if g == 'channel' else f'groups of {g}'} {n}"
                               for g, n in c["group_sizes"].items())
            users = ", ".join(f"{u} {n}" for u, n in c["consumers"].items())
            echo(f"  {c['kind']} ({c['element_type']}): {c['weights']} weights, {c['elements']:,} elements"
                 + (f", {c['asymmetric']} with zero points" if c["asymmetric"] else "")
                 + (f"; {groups}" if groups else "") + f"; used by {users}")
        f32 = sum(c["elements"] for c in st.compression) * 4
        echo(f"  decompressed at load: {format_bytes(f32)} of f32 (`--compressed-weights keep` leaves the "
             f"MatMuls' compressed)")
    else:
        echo("weight compression: none")
    if st.variables:
        echo("variables:")
        for v in st.variables:
            t = "?" if v.type is None else f"{format_shape(v.type.shape)} {v.type.etype}"
            echo(f"  {v.id}: {t}  (ReadValue {', '.join(v.read_by) or '-'}; Assign {', '.join(v.assigned_by) or '-'})")
    if st.errors or st.warnings or st.unsupported:
        notes = [f"{st.errors} error{'s' if st.errors != 1 else ''}, {st.warnings} warning"
                 f"{'s' if st.warnings != 1 else ''} (run `irrun validate`)"]
        if st.unsupported:
            notes.append(f"not supported by irrun: {', '.join(st.unsupported)} (their outputs as declared)")
        echo("problems: " + "; ".join(notes))
        if st.first_error:
            echo(f"  first: {st.first_error}")
    if show_layers:
        echo("layers (MACs, share, id \"name\" type -> output shapes; Constants left out):")
        for layer in st.layers:
            if layer.type != "Constant":
                echo(_layer_line(layer, total))


@cli.command()
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--layers", "show_layers", is_flag=True,
              help="Text: also list every layer with its MACs and output shapes (JSON always has them).")
def info(model, fmt, show_layers):
    """Inputs, outputs, operations and opsets, parameters per type, MACs, dynamic dims,
    weight compression and variables of MODEL, at the shapes irrun infers.

    Works on any readable IR, also one irrun cannot run (its unsupported layers' outputs are
    taken as declared).
    """
    st = model_stats(model)
    if fmt == "json":
        click.echo(json.dumps(st.to_json(), indent=1))
    else:
        _print_text(st, show_layers)


@cli.command()
@click.option("--format", "fmt", type=click.Choice(["text", "markdown"]), default="text", show_default=True)
def ops(fmt):
    """List the supported operations (type-version)."""
    from ..opdocs import ops_markdown, ops_text
    click.echo(ops_markdown() if fmt == "markdown" else ops_text())
