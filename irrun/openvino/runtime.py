"""`openvino.runtime`, the module older scripts import (`from openvino.runtime import Core`): the
same names as `irrun.openvino`."""
from . import *  # noqa: F401,F403
from . import __all__  # noqa: F401
from . import __getattr__  # noqa: F401  (opsetN and the other missing pieces, as in irrun.openvino)

# A package path, empty, so that `import irrun.openvino.runtime.opset8` reaches the finder that
# names the missing piece instead of failing on "not a package".
__path__: list[str] = []
