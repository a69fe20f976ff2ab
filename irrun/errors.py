"""One exception hierarchy for everything irrun refuses.

Every error can name where it applies: the file, the XML line, and the layer
(id, name, type-version).  ``str(err)`` renders all of it as one line, which is
what the CLI prints after ``error:``.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LayerRef:
    """Enough of a layer to name it in a message."""

    id: str
    name: str
    type: str
    version: str | int | None = None
    line: int | None = None

    def describe(self) -> str:
        label = f"{self.type}-{self.version}" if self.version not in (None, "") else self.type
        return f'layer {self.id} "{self.name}" ({label})'


class IrrunError(Exception):
    """Base of every error irrun raises on purpose."""

    exit_code = 1

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 layer: LayerRef | None = None, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.file = file
        self.layer = layer
        self.line = line if line is not None else (layer.line if layer else None)
        self.code = code

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = f"{self.file}:{self.line}: " if self.line else f"{self.file}: "
        who = f"{self.layer.describe()}: " if self.layer else ""
        return f"{where}{who}{self.message}"


class UnreadableFileError(IrrunError):
    """The file cannot be read or is not an IR at all (exit 2)."""

    exit_code = 2


class UsageError(IrrunError):
    """The command or API was called wrongly (exit 2)."""

    exit_code = 2


class ModelError(IrrunError):
    """The model is defective: structure, attributes, weights or shapes."""


class UnsupportedError(ModelError):
    """A valid model uses something irrun does not implement yet."""


class InputError(IrrunError):
    """The inputs given to ``infer`` do not fit the model."""


class ShapeError(ModelError):
    """Operands are inconsistent; raised by shape functions and kernels."""


class ResourceLimitError(IrrunError):
    """A tensor would exceed the memory limit."""


class IrrunWarning(UserWarning):
    """Base of every warning irrun gives (the CLI prints each as one `warning: ...` line)."""


class DeclaredValuesWarning(IrrunWarning):
    """The model declares port shapes or precisions that contradict inference; it runs with the
    inferred ones, as OpenVINO does (`irrun validate` lists them; `strict=True` refuses instead)."""
