"""`save_model` / `serialize`: a Model written as IR through irrun's writer (irrun/writer.py) as it is
now (after `reshape` and `add_outputs`: irrun/changed.py), its float weights compressed to f16 as
OpenVINO compresses them (irrun/compress.py)."""
from __future__ import annotations

import warnings
from pathlib import Path

from .exceptions import as_runtime_errors


def save(model, path: Path, compress_to_fp16: bool) -> None:
    from ..changed import Names, in_openvino_order, renamed, renumbered, reshaped_graph, with_added_results
    from ..compress import compressed_graph
    from ..writer import constants_from, save as write_model, write_ir

    irrun_model = model._irrun
    given = model._renamed
    names = Names(dict(given.nodes), dict(given.tensors))
    name = model.get_friendly_name()
    with as_runtime_errors():
        if not compress_to_fp16 or irrun_model.ir_version != 11:
            if compress_to_fp16:
                warnings.warn("save_model: an IR v10 model is written as IR v11 with its weights as they are "
                              "(compress_to_fp16 applies to IR v11 models)", RuntimeWarning, stacklevel=3)
            write_model(irrun_model, path, names=names, name=name)
            return
        own = (irrun_model.path, irrun_model.path.with_suffix(".bin"))
        # Results added before compressing (it looks layers up by the ids analysed), the order made OpenVINO's after
        graph = reshaped_graph(irrun_model.analysis) if irrun_model._reshaped else irrun_model.document.graph
        ordered = in_openvino_order(graph)
        if names:
            graph = renamed(graph, names)
        if irrun_model._added:
            graph = with_added_results(graph, irrun_model._added)
        graph, data, _ = compressed_graph(irrun_model.analysis, constants_from(irrun_model.weights, str(irrun_model.path)),
                                          graph)
        if irrun_model._added and ordered:
            graph = renumbered(graph)
        write_ir(path, graph, name=name, constant_bytes=data, protected=own)
