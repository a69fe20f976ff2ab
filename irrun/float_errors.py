"""NumPy's floating-point error state set to "ignore" for an inference, at a third of the cost.

The executor runs every call inside `np.errstate(all="ignore")` (overflow wraps, x/0 is inf, as in
C++).  NumPy 2 builds its error-state object anew each time a block is entered: 0.7 us to enter and
leave, a sixth of a small convolution network's executor time.  `ignore()` builds the "ignore"
state once from the caller's and sets it again while the caller's state is the same object (NumPy
replaces it on every change, so a caller's `np.seterr` or `errstate` is seen): 0.24 us.  On NumPy
versions that keep the state elsewhere (before 2.0) it falls back to `np.errstate`.

    token = float_errors.ignore()
    try:
        ...
    finally:
        float_errors.restore(token)
"""
from __future__ import annotations

import numpy as np

try:    # (NumPy >= 2: the state is this context variable; `np.errstate` sets it the same way)
    from numpy._core._ufunc_config import _extobj_contextvar as _state, _make_extobj
except ImportError:                     # pragma: no cover - NumPy 1.x
    _state = None

_ignoring: tuple = (None, None)         # (the caller's state, that state with every error ignored)


if _state is not None:
    def ignore():
        """Ignore every floating-point error in this thread (and context) until `restore(token)`."""
        global _ignoring
        current = _state.get()
        pair = _ignoring                # (read once: another thread may replace it meanwhile)
        if pair[0] is not current:
            pair = _ignoring = (current, _make_extobj(all="ignore"))
        return _state.set(pair[1])

    # the state before the `ignore()` that returned the token (the variable's own method: a
    # function around it took 0.05 us more)
    restore = _state.reset
else:                                   # pragma: no cover - NumPy 1.x
    def ignore():
        block = np.errstate(all="ignore")
        block.__enter__()
        return block

    def restore(token) -> None:
        token.__exit__(None, None, None)
