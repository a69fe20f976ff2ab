"""Op families; importing a module registers its ops (see `irrun.registry`)."""
from . import infrastructure  # noqa: F401
