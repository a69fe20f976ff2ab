"""Op families; importing a module registers its ops (see `irrun.registry`).

A load imports only the families its ops need (`irrun.registry.implementation`
finds a type's module by its `@register("Type", ...)` line); `import_all`
registers every family.
"""
from __future__ import annotations

import importlib

FAMILIES = ("activation", "arithmetic", "attention", "color", "control_flow", "convolution", "ctc",
            "detection", "embedding", "generation", "indexing", "infrastructure", "layout", "logical",
            "matrix", "movement", "normalization", "patches", "pooling", "quantization", "reduction",
            "reorder", "resampling", "sequence", "signal", "sorting", "state", "strings", "unary_math")


def import_family(name: str) -> None:
    importlib.import_module(f"{__name__}.{name}")


def import_all() -> None:
    for name in FAMILIES:
        import_family(name)
