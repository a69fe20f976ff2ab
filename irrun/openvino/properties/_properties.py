"""Properties as OpenVINO's Python API spells them: `props.hint.performance_mode` is the string
"PERFORMANCE_HINT" (usable as a config key), and calling it with a value gives the
(key, value) pair.  Which ones irrun honours is in irrun/openvino/config.py."""
from __future__ import annotations

import enum
from typing import Any


class Property(str):
    """A property key that is also callable: `prop()` is the key, `prop(value)` the (key, value) pair."""

    def __call__(self, *args: Any):
        if not args:
            return str(self)
        if len(args) == 1:
            return (str(self), args[0])
        raise TypeError(f"property {str(self)} takes one value, got {len(args)}")


def define(namespace: dict, keys: dict[str, str]) -> None:
    for attr, key in keys.items():
        namespace[attr] = Property(key)


class _Enum(enum.Enum):
    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"
