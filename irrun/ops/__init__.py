"""Op families; importing a module registers its ops (see `irrun.registry`)."""
from . import (activation, arithmetic, convolution, infrastructure, matrix,  # noqa: F401
               movement, pooling)
