"""Progress: a bar on a TTY, plain periodic lines (frame, fps, ETA) otherwise."""
from __future__ import annotations

import sys
import time
from typing import IO


class Progress:
    def __init__(self, total: int | None, *, label: str, mode: str = "auto",
                 stream: IO[str] | None = None, interval: float = 2.0) -> None:
        self.stream = stream or sys.stderr
        if mode == "auto":
            mode = "bar" if getattr(self.stream, "isatty", lambda: False)() else "lines"
        self.mode = mode
        self.total = total
        self.label = label
        self.interval = interval
        self.count = 0
        self._start = time.monotonic()
        self._last = self._start
        self._bar = None
        if mode == "bar":
            from tqdm import tqdm
            self._bar = tqdm(total=total, desc=label, unit="frame", file=self.stream,
                             dynamic_ncols=True, leave=True)

    def note(self, text: str) -> None:
        """One line of its own (e.g. "resuming: 7 of 12 segments done")."""
        line = f"{self.label}: {text}"
        if self._bar is not None:
            self._bar.write(line, file=self.stream)
        else:
            self.stream.write(line + "\n")
            self.stream.flush()

    def update(self, n: int = 1) -> None:
        self.count += n
        if self._bar is not None:
            self._bar.update(n)
        elif self.mode == "lines":
            now = time.monotonic()
            if now - self._last >= self.interval:
                self._last = now
                self._line(now)

    def _line(self, now: float) -> None:
        elapsed = max(now - self._start, 1e-9)
        fps = self.count / elapsed
        if self.total:
            left = max(self.total - self.count, 0)
            eta = f"{left / fps:.0f}s" if fps > 0 else "?"
            done = f"frame {self.count}/{self.total} ({100.0 * self.count / self.total:.0f}%)"
        else:
            eta, done = "?", f"frame {self.count}"
        self.stream.write(f"{self.label}: {done}, {fps:.1f} fps, ETA {eta}\n")
        self.stream.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self.mode == "lines":
            self._line(time.monotonic())
