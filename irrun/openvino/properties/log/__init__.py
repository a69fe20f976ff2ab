"""`irrun.openvino.properties.log`, as `openvino.properties.log`."""
from .._properties import _Enum, define


class Level(_Enum):
    NO = -1
    ERR = 0
    WARNING = 1
    INFO = 2
    DEBUG = 3
    TRACE = 4


define(globals(), {"level": "LOG_LEVEL"})
del define
