"""`irrun.openvino.properties.streams`, as `openvino.properties.streams`."""
from .._properties import define


class Num(int):
    """A number of streams; `Num.AUTO` (-1) and `Num.NUMA` (-2) as in OpenVINO."""

    def __repr__(self) -> str:
        return {-1: "AUTO", -2: "NUMA"}.get(int(self), str(int(self)))


Num.AUTO = Num(-1)
Num.NUMA = Num(-2)

define(globals(), {"num": "NUM_STREAMS"})
del define
