"""`save_model` / `serialize`: a Model written as IR through irrun's writer (irrun/writer.py)."""
from __future__ import annotations

import warnings
from pathlib import Path

from .exceptions import as_runtime_errors, not_available


def save(model, path: Path, compress_to_fp16: bool) -> None:
    if model._reshapes or model._added:
        raise not_available("saving a model after reshape or add_outputs",
                            "irrun's writer writes a model as it was read")
    if compress_to_fp16:
        warnings.warn("save_model(compress_to_fp16=True): irrun's writer keeps the weights' precision",
                      RuntimeWarning, stacklevel=3)
    with as_runtime_errors():
        model._irrun.save(path, force=True)
