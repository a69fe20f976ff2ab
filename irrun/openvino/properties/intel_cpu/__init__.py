"""`irrun.openvino.properties.intel_cpu`, as `openvino.properties.intel_cpu`."""
from .._properties import define

define(globals(), {"denormals_optimization": "CPU_DENORMALS_OPTIMIZATION",
                   "sparse_weights_decompression_rate": "CPU_SPARSE_WEIGHTS_DECOMPRESSION_RATE",
                   "tbb_partitioner": "TBB_PARTITIONER"})
del define
