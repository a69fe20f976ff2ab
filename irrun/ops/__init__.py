"""Op families; importing a module registers its ops (see `irrun.registry`)."""
from . import (activation, arithmetic, attention, convolution, detection, generation,  # noqa: F401
               indexing, infrastructure, layout, logical, matrix, movement, normalization, pooling,
               quantization, reduction, resampling, sequence, sorting, unary_math)
