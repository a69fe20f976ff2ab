"""Op families; importing a module registers its ops (see `irrun.registry`)."""
from . import (activation, arithmetic, attention, color, control_flow, convolution, ctc,  # noqa: F401
               detection, embedding, generation, indexing, infrastructure, layout, logical, matrix,
               movement, normalization, patches, pooling, quantization, reduction, reorder, resampling,
               sequence, signal, sorting, state, strings, unary_math)
