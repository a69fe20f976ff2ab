"""Op families; importing a module registers its ops (see `irrun.registry`).

A load imports only the families its ops need (`irrun.registry.implementation`
finds a type's module by its `@register("Type", ...)` line); `import_all`
registers every family.  A new module here is a family: nothing lists them.
"""
from __future__ import annotations

import importlib
import pkgutil


def families() -> list[str]:
    """The modules of this package (helpers such as `common` and `window` among them)."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__))


def import_family(name: str) -> None:
    importlib.import_module(f"{__name__}.{name}")


def import_all() -> None:
    for name in families():
        import_family(name)
