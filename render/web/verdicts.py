"""The review's verdict of a done job as the pages show it: "ok", or "look: 2 tracks" with the
first thing to look at ("missed 14 frames at 00:41.2") and how many more there are.

The verdict in a few words is in the job's record (``result["review"]``, written by the worker
from the reports' quality sections: "ok", "look: N tracks", None where nothing was reviewed): an
"ok" is shown from the record alone. Only a "look" (for its first reason) or a record without the
key (a worker of an older version) reads the job's reports, once: what they say is kept per
report file (its path, inode, size and mtime) in a bounded cache, so the pages' polling reads no
report twice."""
from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..review.verdict import summary
from ..spool import Job

CACHE = 512               # report files whose findings are kept (about 200 bytes each)
_MISSING = object()


@dataclass(frozen=True)
class Findings:
    """What one report's quality section says: tracks to look at, the first finding's text
    (the earliest frame, then the lowest track, then the track's own order) and the count of
    every finding."""

    looks: int
    first: str | None
    count: int


def findings_of(report: Path) -> Findings | None:
    """The findings of ``report``; None where it is unreadable or was not reviewed."""
    try:
        section = json.loads(Path(report).read_text()).get("quality")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(section, dict) or not isinstance(section.get("tracks"), list):
        return None
    tracks = [t for t in section["tracks"] if isinstance(t, dict)]
    found = [(_first_frame(f), int(t.get("track") or 0), k, str(f.get("text") or f.get("why")))
             for t in tracks for k, f in enumerate(t.get("look") or []) if isinstance(f, dict)]
    return Findings(looks=sum(t.get("verdict") == "look" for t in tracks),
                    first=min(found)[3] if found else None, count=len(found))


def _first_frame(finding: dict[str, Any]) -> int:
    frames = finding.get("frames")
    try:
        return int(frames[0] if isinstance(frames, list) and frames else finding.get("frame", 0))
    except (TypeError, ValueError):
        return 0


class Verdicts:
    """The verdicts of done jobs, their reports read at most once each (``limit`` kept)."""

    def __init__(self, limit: int = CACHE) -> None:
        self.limit = int(limit)
        self._seen: OrderedDict[tuple, Findings | None] = OrderedDict()
        self._lock = threading.Lock()

    def of(self, job: Job, reports: Sequence[Path]) -> dict[str, Any] | None:
        """The verdict of ``job`` for the pages (None: not done, or nothing reviewed):
        ``verdict`` ok/look, ``summary`` ("look: 2 tracks"), ``reason`` (the first finding;
        with several reports, prefixed by its output's name) and ``more`` (the other findings)."""
        if job.state != "done":
            return None
        recorded = (job.result or {}).get("review", _MISSING)
        if recorded is None:
            return None                      # the worker found no reviewed output
        if recorded == "ok":
            return {"verdict": "ok", "summary": "ok", "reason": None, "more": 0}
        read = [(Path(r), self._findings(Path(r))) for r in reports]
        found = [(path, f) for path, f in read if f is not None]
        if recorded is _MISSING or not isinstance(recorded, str):
            if not found:
                return None
            recorded = summary(sum(f.looks for _, f in found))
        if recorded == "ok":
            return {"verdict": "ok", "summary": "ok", "reason": None, "more": 0}
        reason, count = None, sum(f.count for _, f in found)
        for path, f in found:
            if f.first:
                reason = f.first if len(reports) == 1 else f"{_output_name(path)}: {f.first}"
                break
        return {"verdict": "look", "summary": recorded, "reason": reason,
                "more": max(0, count - 1) if reason else 0}

    def _findings(self, report: Path) -> Findings | None:
        try:
            st = report.stat()
        except OSError:
            return None
        key = (str(report), st.st_ino, st.st_size, st.st_mtime_ns)
        with self._lock:
            if key in self._seen:
                self._seen.move_to_end(key)
                return self._seen[key]
        found = findings_of(report)            # outside the lock: one slow disk blocks no page
        with self._lock:
            self._seen[key] = found
            self._seen.move_to_end(key)
            while len(self._seen) > self.limit:
                self._seen.popitem(last=False)
        return found

    def __len__(self) -> int:
        return len(self._seen)


def recorded_reports(job: Job) -> list[Path]:
    """The reports the worker recorded for ``job`` (a job of ``render submit``)."""
    return [Path(p) for p in _strings((job.result or {}).get("reports"))]


def _strings(value: Any) -> Iterable[str]:
    return [str(v) for v in value if isinstance(v, str) and v] if isinstance(value, list) else []


def _output_name(report: Path) -> str:
    name = report.name
    return name[:-len(".report.json")] if name.endswith(".report.json") else name


VERDICTS = Verdicts()
