"""state ops."""
from __future__ import annotations
