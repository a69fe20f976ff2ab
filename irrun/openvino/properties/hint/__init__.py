"""`irrun.openvino.properties.hint`, as `openvino.properties.hint`."""
from .._properties import _Enum, define


class PerformanceMode(_Enum):
    LATENCY = 1
    THROUGHPUT = 2
    CUMULATIVE_THROUGHPUT = 3


class ExecutionMode(_Enum):
    PERFORMANCE = 1
    ACCURACY = 2


class Priority(_Enum):
    LOW = 0
    MEDIUM = 1
    HIGH = 2
    DEFAULT = 1


class SchedulingCoreType(_Enum):
    ANY_CORE = 0
    PCORE_ONLY = 1
    ECORE_ONLY = 2


class ModelDistributionPolicy(_Enum):
    TENSOR_PARALLEL = 0
    PIPELINE_PARALLEL = 1


define(globals(), {
    "activations_scale_factor": "ACTIVATIONS_SCALE_FACTOR", "allow_auto_batching": "ALLOW_AUTO_BATCHING",
    "dynamic_quantization_group_size": "DYNAMIC_QUANTIZATION_GROUP_SIZE",
    "enable_cpu_pinning": "ENABLE_CPU_PINNING", "enable_cpu_reservation": "ENABLE_CPU_RESERVATION",
    "enable_hyper_threading": "ENABLE_HYPER_THREADING", "execution_mode": "EXECUTION_MODE_HINT",
    "inference_precision": "INFERENCE_PRECISION_HINT", "kv_cache_precision": "KV_CACHE_PRECISION",
    "model_distribution_policy": "MODEL_DISTRIBUTION_POLICY", "model_priority": "MODEL_PRIORITY",
    "num_requests": "PERFORMANCE_HINT_NUM_REQUESTS", "performance_mode": "PERFORMANCE_HINT",
    "scheduling_core_type": "SCHEDULING_CORE_TYPE",
})
del define
