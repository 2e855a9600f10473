"""What a spool job is doing, recorded in its progress file for ``render jobs`` and the pages:
the stage (waiting for the device, rendering, assembling, marking), the device it holds,
segments and frames done, fps and ETA. Frames are told one by one from the render's writer thread; the file is rewritten
(atomically, by :meth:`Spool.progress`) at most every ``every_s`` seconds, and at once when the
stage or a segment changes. :func:`describe_progress` tells a job's progress, or how it ended, in
one line."""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

from .spool import Spool
from .spool_job import Job

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


def _duration(seconds: float) -> str:
    """'45 s', '3 min 20 s', '1 h 05 min'."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def describe_progress(job: Job) -> str:
    """What ``job`` is doing, or how it ended, in one line (``render jobs`` and the pages)."""
    p = job.progress or {}
    if job.state == "running" and job.worker_gone:
        where = f"{p.get('target', '')} segment {p['segments_done']}/{p['segments_total']}".strip() \
            if p.get("segments_total") else ""
        return f"worker gone{f' at {where}' if where else ''}: the next worker resumes it"
    if job.state == "running":
        if p.get("state") == "waiting":
            return p.get("waiting") or "waiting for the device"
        if p.get("segments_total") or p.get("frames_total"):
            stage = p.get("state") if p.get("state") in ("assembling", "marking") else ""
            where = f"frame {p['frames_done']}/{p['frames_total']}" if p.get("frames_total") \
                else ""
            if p.get("segments_total"):
                seg = f"segment {p['segments_done']}/{p['segments_total']}"
                where = f"{where} ({seg})" if where else seg
            text = f"{p.get('target', '')} {stage or where}"
            if p.get("fps") and not stage:
                text += f", {p['fps']:.1f} fps"
            if p.get("eta_s") is not None and not stage:
                text += f", ETA {_duration(p['eta_s'])}"
            return text.strip() + (f" on {p['device']}" if p.get("device") else "")
        return (p.get("state") or "starting") + (f" on {p['device']}" if p.get("device") else "")
    if job.result:
        if job.state == "done":
            n = job.result.get("rendered", 0)
            u = job.result.get("up_to_date", 0)
            review = job.result.get("review")      # render.review's verdict: ok, look: N tracks
            return f"{n} rendered" + (f", {u} up to date" if u else "") + \
                (f"; {review}" if review else "")
        return str(job.result.get("error") or "")
    return job.error or ""
