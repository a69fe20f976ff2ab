"""The errors `irrun.openvino` raises.

OpenVINO's Python API reports nearly every misuse (an unknown input name, a wrong shape, an
unknown port, a bad property) as a plain `RuntimeError` with a message; scripts catch
`RuntimeError`.  Here those are `OVRuntimeError`, which is both a `RuntimeError` and an
`irrun.IrrunError`.  What irrun cannot do at all (another device, building graphs with
`opsetN`, `preprocess`, transformations) is `NotAvailableError`: a `NotImplementedError`
(itself a `RuntimeError`, so `except RuntimeError` code still works) and an `IrrunError`.
`OVError`, `UserInputError` and `OVTypeError` mirror `openvino.exceptions`.
"""
from __future__ import annotations

from contextlib import contextmanager

from ..errors import IrrunError


class OVError(Exception):
    """Base class of `openvino.exceptions` (kept for scripts that name it)."""


class UserInputError(OVError):
    """User provided unexpected input."""


class OVTypeError(OVError, TypeError):
    """Type mismatch error."""


class OVRuntimeError(IrrunError, RuntimeError):
    """What OpenVINO reports as `RuntimeError`: misuse of the API, a model that cannot be read or run."""


class NotAvailableError(IrrunError, NotImplementedError):
    """A part of OpenVINO's API that irrun does not provide; the message names it."""


def not_available(what: str, why: str = "") -> NotAvailableError:
    return NotAvailableError(f"{what} is not available in irrun.openvino{': ' + why if why else ''} "
                             f"(irrun reads, checks and runs OpenVINO IR on the CPU; see the README's "
                             f"'irrun.openvino' section)")


@contextmanager
def as_runtime_errors():
    """irrun's own errors leave the API as `OVRuntimeError`, with their file, line and layer, and
    without irrun's internal frames in the traceback."""
    try:
        yield
    except RuntimeError:
        raise
    except IrrunError as exc:
        raise OVRuntimeError(exc.message, file=exc.file, line=exc.line, layer=exc.layer, code=exc.code) from None
