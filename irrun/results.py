"""What `Model.infer` returns: the outputs by name, and by position as in OpenVINO.

    out = model.infer(x)
    out["logits"]          # by name (the output's first tensor name)
    out[0], out[-1]        # by position in model.outputs, like OpenVINO's `result[0]`
    list(out), out.keys()  # the names, in output order

It is a plain `dict` otherwise (keys are the names); an int key is a position, never a name
(output names are strings).
"""
from __future__ import annotations

from typing import Any

import numpy as np


class Results(dict):
    """Output name -> array, in the model's output order; an int indexes by position.  Tensors
    `Model.infer` adds after the outputs (`add_outputs`, intermediates) have no position."""

    #: how many of the entries are the model's outputs (None: all)
    outputs: int | None = None
    #: the outputs by position (None: the first `outputs` entries): two outputs of one name (two
    #: Results of one tensor) are one entry, the first, as in OpenVINO, but two positions
    positions: list | None = None

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            values = self.positions if self.positions is not None else list(self.values())[:self.outputs]
            try:
                return values[key]
            except IndexError:
                raise IndexError(f"output index {key} is out of range: the model has {len(values)} "
                                 f"output{'s' if len(values) != 1 else ''} ({', '.join(list(self)[:self.outputs])})") from None
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        try:
            return self[key]
        except (KeyError, IndexError):
            return default

    def __repr__(self) -> str:
        return f"Results({dict.__repr__(self)})"
