"""One job as the spool knows it: its id's form, its job file and what the spool keeps beside
it. Below the spool and the order its queue is taken in (:mod:`render.queue_order`), which both
read it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: a job's id is this many random bytes, in hex
ID_BYTES = 4


def is_job_id(text: str) -> bool:
    """``text`` has the form of a job id (checked before a file is looked up by it)."""
    return len(text) == 2 * ID_BYTES and all(c in "0123456789abcdef" for c in text)


@dataclass
class Job:
    """One job as the spool knows it."""

    id: str
    state: str
    spec: dict[str, Any] | None        # the job file; None when it cannot be parsed
    error: str | None = None           # why the job file cannot be parsed
    result: dict[str, Any] | None = None
    progress: dict[str, Any] | None = None
    changed: float = 0.0               # when it entered its state (ctime of the renamed file)
    #: running, but no worker holds its flock: its worker died, the next worker takes it over
    worker_gone: bool = False

    @property
    def owner(self) -> str:
        return str((self.spec or {}).get("owner") or "?")

    @property
    def submitted(self) -> str:
        return str((self.spec or {}).get("submitted") or "")

    @property
    def priority(self) -> int:
        try:
            return int((self.spec or {}).get("priority") or 0)
        except (TypeError, ValueError):
            return 0

    @property
    def settings(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in ((self.spec or {}).get("settings") or {}).items()}
