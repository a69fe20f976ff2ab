"""When two tensors count as equal: the one table of tolerances, by element type, and the rule.

An element agrees when ``|actual - reference| <= atol + rtol * scale``, NaN agrees with NaN
and an infinity with the same infinity; integer, boolean and string tensors must be equal.
`scale` is, by default, the largest finite magnitude in the reference tensor ("tensor"):
a float sum rounds by the size of its terms, not of its result, so an output that cancels to
near zero carries the rounding of its large neighbours.  Per element (NumPy's `allclose`,
``scale = |reference|``, "element") a healthy ResNet-18 at 224 x 224 differs from OpenVINO in
58 of its 71 tensors (by at most 3.1e-6 of each tensor's largest magnitude; 9.4e-6 in the
worst of ten benchmark networks), and the "first divergence" it names is rounding.  Relative
to the tensor, rtol 1e-4 leaves ten times that margin and still finds a layer off by 0.1%.
"element" is the stricter rule for tensors whose small values matter on their own.

The floating-point tolerances follow the precision each type carries: f32 (and f64, which
OpenVINO's CPU plugin computes in f32) match to rtol 1e-4 / atol 1e-5, as irrun's tests hold
it to OpenVINO; f16 and bf16 keep about 3 and 2 significant digits, the 8-bit floats one or
less.  `irrun compare --rtol/--atol/--relative-to` (or `compare(..., rtol=, atol=,
relative_to=)`) replace them for every floating-point type.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import UsageError

RELATIVE_TO = ("tensor", "element")     # what rtol multiplies; the first is the default


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float
    relative_to: str = RELATIVE_TO[0]

    def __str__(self):
        return self.describe()

    def describe(self, scale: float | None = None) -> str:
        """"rtol 0.0001 atol 1e-05" (per element), "atol 1e-05 + rtol 0.0001 x 6.42 (largest
        |reference|)" (per tensor, with the tensor's `scale` when known)."""
        if self.relative_to == "element":
            return f"rtol {self.rtol:g} atol {self.atol:g}"
        times = "largest |reference|" if scale is None else f"{scale:.3g} (largest |reference|)"
        return f"atol {self.atol:g} + rtol {self.rtol:g} x {times}"

    def within(self, diff: np.ndarray, reference: np.ndarray, largest: float | None = None) -> np.ndarray:
        """Which elements of `|actual - reference|` (`diff`) the tolerance admits (`largest`: the
        reference's `largest_magnitude`, where known already)."""
        if self.relative_to == "element":
            scale = np.abs(reference)
        else:
            scale = largest_magnitude(reference) if largest is None else largest
        with np.errstate(invalid="ignore"):     # NaN differences are no agreement; `diff` says so
            return diff <= self.atol + self.rtol * scale


def largest_magnitude(values: np.ndarray) -> float:
    """The largest finite |value| (0 for none): what rtol multiplies per tensor."""
    finite = np.abs(values[np.isfinite(values)])
    return float(finite.max()) if finite.size else 0.0


@dataclass(frozen=True)
class Tolerances:
    """What a comparison was asked for: `rtol` / `atol` for every floating-point type (None: by
    element type) and what rtol multiplies."""
    rtol: float | None = None
    atol: float | None = None
    relative_to: str = RELATIVE_TO[0]

    def __post_init__(self):
        if self.relative_to not in RELATIVE_TO:
            raise UsageError(f"relative_to must be one of {', '.join(RELATIVE_TO)}, got {self.relative_to!r}")

    def for_tensor(self, element_type: str | None, dtype: np.dtype) -> Tolerance | None:
        return tolerance_for(element_type, dtype, self.rtol, self.atol, self.relative_to)

    def options(self) -> str:
        """The command-line options that ask for these tolerances (empty for the defaults)."""
        given = [f"--{name} {value:g}" for name, value in (("rtol", self.rtol), ("atol", self.atol))
                 if value is not None]
        if self.relative_to != RELATIVE_TO[0]:
            given.append(f"--relative-to {self.relative_to}")
        return "".join(" " + g for g in given)


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
                  atol: float | None = None, relative_to: str = RELATIVE_TO[0]) -> Tolerance | None:
    """The tolerance for a tensor of `element_type` (its IR type, which tells bf16 from the f32 that
    carries it) or else of NumPy `dtype`; None: compare exactly.  `rtol` / `atol` override."""
    base = BY_ELEMENT_TYPE.get(element_type) if element_type else None
    if base is None:
        base = _BY_DTYPE.get(np.dtype(dtype)) if np.dtype(dtype).kind == "f" else None
    if base is None:
        return None
    return Tolerance(base.rtol if rtol is None else rtol, base.atol if atol is None else atol, relative_to)
