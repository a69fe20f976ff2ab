"""`irrun.openvino.properties.intel_auto`, as `openvino.properties.intel_auto`."""
from .._properties import define

define(globals(), {"device_bind_buffer": "DEVICE_BIND_BUFFER", "enable_runtime_fallback": "ENABLE_RUNTIME_FALLBACK",
                   "enable_startup_fallback": "ENABLE_STARTUP_FALLBACK", "schedule_policy": "SCHEDULE_POLICY"})
del define
