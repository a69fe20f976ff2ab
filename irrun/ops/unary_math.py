"""unary_math ops."""
from __future__ import annotations
