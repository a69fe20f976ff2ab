"""Diagnostics: what `validate` reports and what `load` turns into errors."""
from __future__ import annotations

from dataclasses import dataclass

from .errors import LayerRef


@dataclass
class Diagnostic:
    severity: str                 # "error" | "warning"
    code: str
    message: str
    file: str | None = None
    line: int | None = None
    layer: LayerRef | None = None
    port: int | None = None
    declared: list | None = None  # shape mismatches: declared / inferred dims
    inferred: list | None = None

    def format(self) -> str:
        where = f"{self.file}:{self.line or 0}:"
        who = f" {self.layer.describe()}" if self.layer else ""
        return f"{where} {self.severity} {self.code}{who}: {self.message}"

    def to_json(self) -> dict:
        layer = self.layer
        return {"file": self.file, "line": self.line, "severity": self.severity, "code": self.code,
                "layer_id": layer.id if layer else None, "name": layer.name if layer else None,
                "type": layer.type if layer else None, "version": layer.version if layer else None,
                "port": self.port, "message": self.message,
                "declared": self.declared, "inferred": self.inferred}


class Diagnostics(list):
    """A list of `Diagnostic`s bound to one file."""

    def __init__(self, file: str | None = None):
        super().__init__()
        self.file = file

    def add(self, severity: str, code: str, message: str, *, layer: LayerRef | None = None,
            line: int | None = None, **extra) -> Diagnostic:
        diag = Diagnostic(severity, code, message, self.file,
                          line if line is not None else (layer.line if layer else None), layer, **extra)
        self.append(diag)
        return diag

    def error(self, code: str, message: str, **kw) -> Diagnostic:
        return self.add("error", code, message, **kw)

    def warning(self, code: str, message: str, **kw) -> Diagnostic:
        return self.add("warning", code, message, **kw)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self if d.severity == "error"]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self if d.severity == "warning"]
