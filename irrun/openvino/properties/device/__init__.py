"""`irrun.openvino.properties.device`, as `openvino.properties.device`."""
from .._properties import _Enum, define


class Type(_Enum):
    INTEGRATED = 0
    DISCRETE = 1


class Capability:
    FP32 = "FP32"
    BF16 = "BF16"
    FP16 = "FP16"
    INT8 = "INT8"
    INT16 = "INT16"
    BIN = "BIN"
    WINOGRAD = "WINOGRAD"
    EXPORT_IMPORT = "EXPORT_IMPORT"


define(globals(), {
    "architecture": "DEVICE_ARCHITECTURE", "capabilities": "OPTIMIZATION_CAPABILITIES",
    "full_name": "FULL_DEVICE_NAME", "id": "DEVICE_ID", "priorities": "MULTI_DEVICE_PRIORITIES",
    "properties": "DEVICE_PROPERTIES", "type": "DEVICE_TYPE", "uuid": "DEVICE_UUID", "luid": "DEVICE_LUID",
    "gops": "DEVICE_GOPS", "thermal": "DEVICE_THERMAL", "pci_info": "DEVICE_PCI_INFO",
})
del define
