"""`irrun.openvino.properties`, as `openvino.properties`: `import irrun.openvino.properties as props`."""
from ._properties import Property, _Enum, define


class CacheMode(_Enum):
    OPTIMIZE_SIZE = 0
    OPTIMIZE_SPEED = 1


class WorkloadType(_Enum):
    DEFAULT = 0
    EFFICIENT = 1


define(globals(), {
    "auto_batch_timeout": "AUTO_BATCH_TIMEOUT", "available_devices": "AVAILABLE_DEVICES", "cache_dir": "CACHE_DIR",
    "cache_mode": "CACHE_MODE", "compilation_num_threads": "COMPILATION_NUM_THREADS",
    "enable_mmap": "ENABLE_MMAP", "enable_profiling": "PERF_COUNT", "execution_devices": "EXECUTION_DEVICES",
    "inference_num_threads": "INFERENCE_NUM_THREADS", "key_cache_group_size": "KEY_CACHE_GROUP_SIZE",
    "key_cache_precision": "KEY_CACHE_PRECISION", "loaded_from_cache": "LOADED_FROM_CACHE",
    "max_batch_size": "MAX_BATCH_SIZE", "model_name": "NETWORK_NAME", "num_streams": "NUM_STREAMS",
    "optimal_batch_size": "OPTIMAL_BATCH_SIZE",
    "optimal_number_of_infer_requests": "OPTIMAL_NUMBER_OF_INFER_REQUESTS",
    "range_for_async_infer_requests": "RANGE_FOR_ASYNC_INFER_REQUESTS", "range_for_streams": "RANGE_FOR_STREAMS",
    "supported_properties": "SUPPORTED_PROPERTIES", "value_cache_group_size": "VALUE_CACHE_GROUP_SIZE",
    "value_cache_precision": "VALUE_CACHE_PRECISION", "weights_path": "WEIGHTS_PATH",
    "workload_type": "WORKLOAD_TYPE",
})

from . import device, hint, intel_auto, intel_cpu, log, streams  # noqa: E402

del define
