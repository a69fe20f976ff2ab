"""`openvino.runtime`, the module older scripts import (`from openvino.runtime import Core`): the
same names as `irrun.openvino`."""
from . import *  # noqa: F401,F403
from . import __all__  # noqa: F401
