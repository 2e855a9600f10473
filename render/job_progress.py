"""What a spool job is doing, recorded in its progress file for ``render jobs`` and the pages:
the stage (waiting for the device, rendering, assembling, marking), the device it holds,
segments and frames done, fps and ETA. Frames are told one by one from the render's writer thread; the file is rewritten
(atomically, by :meth:`Spool.progress`) at most every ``every_s`` seconds, and at once when the
stage or a segment changes."""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

from .spool import Spool

EVERY_S = 1.0


class JobProgress:
    def __init__(self, spool: Spool, job_id: str, *, every_s: float = EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.spool, self.job_id, self.every_s, self.clock = spool, job_id, every_s, clock
        self.data: dict[str, Any] = {}
        self._written = float("-inf")
        self._pace: tuple[float, int] | None = None      # (when, frames done then) of this target
        self._lock = threading.Lock()

    def waiting(self, line: str) -> None:
        """Waiting for the device: the lock's line says who holds it."""
        with self._lock:
            self.data = {"state": "waiting", "waiting": line}
            self._write()

    def device(self, label: str) -> None:
        """The device lock was taken: the job renders on ``label`` (a GPU, or the CPU)."""
        with self._lock:
            self.data = {"state": "starting", "device": label}
            self._write()

    def segment(self, target: str, record: Any, done: int, total: int) -> None:
        """A segment committed (``record=None``: the target starts, ``done`` of them resumed)."""
        with self._lock:
            if record is None:
                self._pace = None
                self.data = {"state": "rendering", "target": target,
                             **({"device": self.data["device"]} if "device" in self.data else {})}
            self.data.update(segments_done=done, segments_total=total)
            self._write()

    def frames(self, target: str, stage: str, done: int, total: int) -> None:
        """``done`` of ``total`` frames of this target; ``stage`` rendering, assembling, marking."""
        with self._lock:
            now = self.clock()
            if self._pace is None:
                self._pace = (now, done)
            changed = stage != self.data.get("state") or "frames_total" not in self.data
            self.data.update(state=stage, target=target, frames_done=done, frames_total=total)
            since, base = self._pace
            rate = (done - base) / (now - since) if now > since and done > base else None
            self.data["fps"] = round(rate, 2) if rate else None
            self.data["eta_s"] = round((total - done) / rate, 1) if rate else None
            if stage != "rendering":
                self.data["eta_s"] = None
            if changed or now - self._written >= self.every_s or done == total:
                self._write()

    def _write(self) -> None:
        self._written = self.clock()
        self.spool.progress(self.job_id, **self.data)
