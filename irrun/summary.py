"""What one tensor looks like at a glance: shape, dtype, min/max/mean, NaN/Inf counts, top classes.

Shared by everything that reports on tensors (`irrun infer`'s summary in text and JSON,
dumps' index files): one definition of the statistics.
"""
from __future__ import annotations

import numpy as np

TOP_K = 5
_MAX_CLASSES = 100000


def class_scores(value: np.ndarray) -> np.ndarray | None:
    """The scores when `value` looks like one vector of class scores ([N] or [1, N], floating, 3..1e5)."""
    if value.dtype.kind != "f" or value.ndim > 2 or value.size != max(value.shape or (0,)):
        return None
    scores = value.reshape(-1)
    return scores if 2 < scores.size <= _MAX_CLASSES else None


def tensor_summary(value: np.ndarray, *, top: int = TOP_K) -> dict:
    """JSON-ready: shape, dtype, min/max/mean over the finite values (None when there are none
    or the dtype has no numbers), nan and inf counts, and top-k classes for a score vector."""
    value = np.asarray(value)
    out: dict = {"shape": list(value.shape), "dtype": str(value.dtype),
                 "min": None, "max": None, "mean": None, "nan": 0, "inf": 0}
    if value.size and value.dtype.kind in "biuf":
        # No float64 copy of the tensor (a dump summarises every tensor of a model as it goes):
        # min and max in its own type, the mean accumulated in float64.
        v = value
        if value.dtype.kind == "f":
            finite = np.isfinite(v)
            nonfinite = v.size - int(np.count_nonzero(finite))
            if nonfinite:
                out["nan"] = int(np.count_nonzero(np.isnan(v)))
                out["inf"] = nonfinite - out["nan"]
                v = v[finite]
            del finite
        if v.size:
            out["min"], out["max"] = _number(v.min()), _number(v.max())
            out["mean"] = _number(np.mean(v, dtype=np.float64))
    scores = class_scores(value)
    if scores is not None:
        order = np.argsort(-np.where(np.isnan(scores), -np.inf, scores), kind="stable")[:top]
        out["top"] = [{"class": int(i), "score": _number(scores[i])} for i in order]
    return out


def _number(x) -> int | float | str:
    """A JSON number; a non-finite float as its text ("inf", "nan"), which JSON has no number for."""
    if isinstance(x, (np.integer, np.bool_, int)):
        return int(x)
    x = float(x)
    return x if np.isfinite(x) else str(x)


def format_summary(name: str, s: dict) -> list[str]:
    """The text form: one line, and a top-5 line for a score vector."""
    line = f"{name}: shape {s['shape']} {s['dtype']}"
    if s["min"] is not None:
        line += f"  min {_text(s['min'])}  mean {_text(s['mean'])}  max {_text(s['max'])}"
    if s["nan"] or s["inf"]:
        line += f"  nan {s['nan']}  inf {s['inf']}"
    lines = [line]
    if s.get("top"):
        lines.append(f"  top-{len(s['top'])}: " + ", ".join(f"class {t['class']} ({_text(t['score'], 4)})" for t in s["top"]))
    return lines


def _text(x, digits: int = 6) -> str:
    return x if isinstance(x, str) else f"{x:.{digits}g}"
