"""When two tensors count as equal: the one table of tolerances, by element type.

Two elements agree when ``|actual - reference| <= atol + rtol * |reference|`` (NumPy's
`allclose` rule), NaN agrees with NaN and an infinity with the same infinity.  Integer,
boolean and string tensors must be equal.  The floating-point tolerances follow the
precision each type carries: f32 (and f64, which OpenVINO's CPU plugin computes in f32)
match to rtol 1e-4 / atol 1e-5, as irrun's tests hold it to OpenVINO; f16 and bf16 keep
about 3 and 2 significant digits, the 8-bit floats one or less.  `irrun compare
--rtol/--atol` (or `compare(..., rtol=, atol=)`) replace both numbers for every
floating-point type.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float

    def __str__(self):
        return f"rtol {self.rtol:g} atol {self.atol:g}"


F32 = Tolerance(1e-4, 1e-5)

# element type name (irrun/etypes.py) -> tolerance; types not listed compare exactly
BY_ELEMENT_TYPE: dict[str, Tolerance] = {
    "f64": F32,
    "f32": F32,
    "f16": Tolerance(1e-3, 1e-3),
    "bf16": Tolerance(1e-2, 1e-2),
    "f8e4m3": Tolerance(0.125, 0.02),
    "f8e5m2": Tolerance(0.25, 0.02),
    "f8e8m0": Tolerance(0.5, 0.0),
    "f4e2m1": Tolerance(0.5, 0.5),
    "nf4": Tolerance(0.1, 0.05),
}

def defaults(which: str) -> str:
    """"f32 0.0001, f16 0.001, bf16 0.01": the default `rtol` or `atol` of the common types, for help texts."""
    return ", ".join(f"{name} {getattr(BY_ELEMENT_TYPE[name], which):g}" for name in ("f32", "f16", "bf16"))


_BY_DTYPE = {np.dtype(np.float64): F32, np.dtype(np.float32): F32, np.dtype(np.float16): BY_ELEMENT_TYPE["f16"]}


def tolerance_for(element_type: str | None, dtype: np.dtype, rtol: float | None = None,
                  atol: float | None = None) -> Tolerance | None:
    """The tolerance for a tensor of `element_type` (its IR type, which tells bf16 from the f32 that
    carries it) or else of NumPy `dtype`; None: compare exactly.  `rtol` / `atol` override."""
    base = BY_ELEMENT_TYPE.get(element_type) if element_type else None
    if base is None:
        base = _BY_DTYPE.get(np.dtype(dtype)) if np.dtype(dtype).kind == "f" else None
    if base is None:
        return None
    return Tolerance(base.rtol if rtol is None else rtol, base.atol if atol is None else atol)
