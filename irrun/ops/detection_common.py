"""Helpers shared by the detection families (nms, multiclass_nms, ssd, proposals, roi_align):
greedy box selection in score order, the floating-point check of their inputs, and OpenVINO's
bounds of a data-dependent row count.
"""
from __future__ import annotations

import numpy as np

from .. import etypes
from ..errors import ShapeError
from ..registry import TensorType
from ..shapes import dim_bounds, make_dim


# ---------------------------------------------------------------- greedy selection by score

def greedy(candidates: np.ndarray, limit: int, suppressed) -> list[int]:
    """Greedy NMS over candidates in priority order: keep the first, drop the rest that
    `suppressed(kept, rest)` flags (one vectorised test per kept box), repeat."""
    kept: list[int] = []
    while candidates.size and len(kept) < limit:
        best, rest = int(candidates[0]), candidates[1:]
        kept.append(best)
        candidates = rest[~suppressed(best, rest)]
    return kept


def by_score(scores: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Candidates by descending score, ties by index."""
    return candidates[np.lexsort((candidates, -scores[candidates]))]


def by_score_above(scores: np.ndarray, threshold) -> np.ndarray:
    """Indices with score > threshold, by descending score, ties by index."""
    return by_score(scores, np.flatnonzero(scores > threshold))


# ---------------------------------------------------------------- data-dependent row counts

def max_length(d) -> int:
    """OpenVINO's Dimension::get_max_length(): the upper bound, -1 when unbounded."""
    hi = dim_bounds(d)[1]
    return -1 if hi is None else hi


def up_to(d):
    """Dimension(0, max): the rows of a data-dependent output."""
    top = max_length(d)
    return make_dim(0, None if top < 0 else top)


# ---------------------------------------------------------------- input checks

def check_float(t: TensorType, what: str) -> None:
    if not t.etype.is_float and t.etype is not etypes.dynamic:
        raise ShapeError(f"{what} must be floating point, got {t.etype}")
