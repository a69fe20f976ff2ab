"""String tensors: StringTensorPack-15 and StringTensorUnpack-15.

irrun carries a string tensor as a NumPy object array of `str`.  Bytes that
are not valid UTF-8 (a pack may cut a character in two) survive a round trip:
they are decoded with the `surrogateescape` error handler and encoded back the
same way, so unpacking gives OpenVINO's bytes again.

OpenVINO's shape inference checks a pack's ranges whenever it sees their
values: no negative index, begins and ends each non-decreasing in row-major
order, no end past the symbols; and a begin past its end fails at run time.
irrun checks the same, in `infer` when the values are known at load and in
`run` (specs/errata/misc2.md: the spec page allows any order, and the CPU
plugin with static shapes skips the checks and reads outside the symbols).
Ranges may overlap.
"""
from __future__ import annotations

import numpy as np

from .. import etypes
from ..errors import ShapeError
from ..registry import Op, TensorType, register
from ..shapes import ANY, dim_merge, dims_compatible, format_shape

STRING = etypes.BY_NAME["string"]
_ERRORS = "surrogateescape"


def _encoded(s) -> bytes:
    return s.encode("utf-8", _ERRORS) if isinstance(s, str) else bytes(s)


@register("StringTensorPack", 15)
class StringTensorPack(Op):
    """output[i] = symbols[begins[i]:ends[i]] decoded as UTF-8; output has the shape of begins."""

    def infer(self, inputs):
        begins, ends, symbols = inputs
        known = {t.etype for t in (begins, ends) if t.etype is not etypes.dynamic}
        if any(e.name not in ("i32", "i64") for e in known) or len(known) > 1:
            raise ShapeError(f"begins and ends must both be i32 or both i64, got {begins.etype} and {ends.etype}")
        if symbols.etype not in (etypes.u8, etypes.dynamic):
            raise ShapeError(f"symbols must be u8 (UTF-8 bytes), got {symbols.etype}")
        if symbols.rank not in (None, 1):
            raise ShapeError(f"symbols must be 1-D, got {format_shape(symbols.shape)}")
        if begins.value is not None and ends.value is not None:
            n_symbols = symbols.shape[0] if symbols.shape is not None and isinstance(symbols.shape[0], int) else None
            _check_ranges(begins.value.reshape(-1).astype(np.int64), ends.value.reshape(-1).astype(np.int64),
                          n_symbols, ascending=True)
        if begins.shape is None or ends.shape is None:
            return [TensorType(begins.shape if ends.shape is None else ends.shape, STRING)]
        if len(begins.shape) != len(ends.shape) or not all(
                dims_compatible(a, b) for a, b in zip(begins.shape, ends.shape)):
            raise ShapeError(f"begins {format_shape(begins.shape)} and ends {format_shape(ends.shape)} "
                             f"must have one shape")
        return [TensorType(tuple(dim_merge(a, b) for a, b in zip(begins.shape, ends.shape)), STRING)]

    def run(self, begins, ends, symbols):
        if begins.shape != ends.shape:
            raise ShapeError(f"begins {list(begins.shape)} and ends {list(ends.shape)} must have one shape")
        b, e = begins.reshape(-1).astype(np.int64), ends.reshape(-1).astype(np.int64)
        _check_ranges(b, e, symbols.size)
        data = symbols.tobytes()
        out = np.empty(b.size, dtype=object)
        out[:] = [data[i:j].decode("utf-8", _ERRORS) for i, j in zip(b.tolist(), e.tolist())]
        return out.reshape(begins.shape)


def _check_ranges(begins: np.ndarray, ends: np.ndarray, n_symbols: int | None, *, ascending: bool = False) -> None:
    """`n_symbols` None: not known yet (shape inference), so that bound is not checked.  `ascending`:
    begins and ends must each be non-decreasing, which OpenVINO's shape inference requires of
    values it sees at load (constants); running, the CPU plugin takes ranges in any order."""
    problem = None
    if begins.size == 0 or begins.shape != ends.shape:
        return
    if begins.min() < 0 or ends.min() < 0:
        problem = "an index is negative"
    elif ascending and (np.any(np.diff(begins) < 0) or np.any(np.diff(ends) < 0)):
        problem = "begins and ends must each be non-decreasing"
    elif np.any(begins > ends):
        at = int(np.flatnonzero(begins > ends)[0])
        problem = f"string {at} begins at {begins[at]}, after its end {ends[at]}"
    elif n_symbols is not None and ends.max() > n_symbols:
        problem = f"an end ({int(ends.max())}) is past the {n_symbols} symbols"
    if problem:
        raise ShapeError(f"StringTensorPack: {problem}")


@register("StringTensorUnpack", 15)
class StringTensorUnpack(Op):
    """The UTF-8 bytes of every string, concatenated in row-major order (symbols), and where each
    string begins and ends in them (i32, the shape of the input)."""

    def infer(self, inputs):
        data = inputs[0]
        if data.etype not in (STRING, etypes.dynamic):
            raise ShapeError(f"StringTensorUnpack takes a string tensor, got {data.etype}")
        if data.value is not None:
            total = sum(len(_encoded(s)) for s in data.value.reshape(-1))
            symbols = TensorType((total,), etypes.u8, notes={0: "bytes of all strings"})
        else:
            symbols = TensorType((ANY,), etypes.u8)
        return [TensorType(data.shape, etypes.i32), TensorType(data.shape, etypes.i32), symbols]

    def run(self, data):
        encoded = [_encoded(s) for s in data.reshape(-1)]
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        ends = np.cumsum(lengths)
        begins = ends - lengths
        symbols = np.frombuffer(b"".join(encoded), dtype=np.uint8).copy()
        return begins.astype(np.int32).reshape(data.shape), ends.astype(np.int32).reshape(data.shape), symbols
