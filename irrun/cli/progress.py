"""A one-line progress bar on stderr: done / total, rate, ETA.  Silent when stderr is not a
terminal (logs, CI, pipes) or when told to be; messages are printed above it either way."""
from __future__ import annotations

import shutil
import sys
import time


def _clock(seconds: float) -> str:
    seconds = int(seconds + 0.5)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    def __init__(self, total: int, *, enabled: bool = True, stream=None, every: float = 0.1):
        self.stream = stream or sys.stderr
        self.total = total
        self.enabled = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.done = self.failed = 0
        self._start = time.monotonic()
        self._every, self._last, self._shown = every, 0.0, False

    def advance(self, failed: bool = False) -> None:
        self.done += 1
        self.failed += failed
        now = time.monotonic()
        if self.enabled and (now - self._last >= self._every or self.done == self.total):
            self._last = now
            self._draw(now)

    def line(self) -> str:
        elapsed = max(time.monotonic() - self._start, 1e-9)
        rate = self.done / elapsed
        left = self.total - self.done
        eta = _clock(left / rate) if rate > 0 and left else "--:--" if left else _clock(elapsed)
        tail = f" {self.done}/{self.total}  {rate:.1f} samples/s  {'ETA ' if left else ''}{eta}"
        if self.failed:
            tail += f"  {self.failed} failed"
        width = max(shutil.get_terminal_size((80, 24)).columns - len(tail) - 12, 10)
        filled = width * self.done // max(self.total, 1)
        percent = 100 * self.done // max(self.total, 1)
        return f"[{'#' * filled}{'.' * (width - filled)}] {percent:3d}%{tail}"

    def _draw(self, now: float) -> None:
        self.stream.write("\r\x1b[2K" + self.line())
        self.stream.flush()
        self._shown = True

    def message(self, text: str) -> None:
        """`text` on its own line, the bar (if shown) redrawn under it."""
        if self._shown:
            self.stream.write("\r\x1b[2K")
        self.stream.write(text + "\n")
        if self._shown:
            self._draw(time.monotonic())
        self.stream.flush()

    def close(self) -> None:
        if self._shown:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._shown = False
