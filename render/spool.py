"""The job spool: small YAML job files in state folders, every change an atomic rename.

```
spool/queued/ID.yaml ─rename─► running/ID.yaml ─rename─► done/ | failed/ | cancelled/
spool/locks/ID.lock     flock held by the worker that runs the job (dies with it)
spool/results/ID.json   how it ended (reports, error), written before the final rename
spool/progress/ID.json  what it is doing (waiting for the GPU, segments, fps, ETA)
spool/cancel/ID         a cancel request for a running job
```
A job file is written under a temp name in ``spool/tmp`` and renamed into ``queued/``, so no crash
leaves a half-written job. A worker first takes the job's flock, then renames it from ``queued/``
to ``running/``: two workers never take the same job. A job in ``running/`` whose flock nobody
holds was left by a worker that died; the next worker takes it and resumes its segments. Until
then it is listed as running with ``worker_gone`` set: the same flock, not a pid, tells.
"""
from __future__ import annotations

import fcntl
import getpass
import json
import logging
import os
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

import yaml

from .errors import UsageError
from .files import fsync_dir, try_flock
from .queue_order import FAIR_WINDOW_S, queued_in_order
from .spool_job import ID_BYTES, Job

log = logging.getLogger(__name__)

STATES = ("queued", "running", "done", "failed", "cancelled")
FINAL = ("done", "failed", "cancelled")
_FOLDERS = STATES + ("locks", "results", "progress", "cancel", "tmp")


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no passwd entry in a container
        return str(os.geteuid())


@dataclass
class Claim:
    """A job this process holds (its flock) while it runs it."""

    job: Job
    fd: int
    reclaimed: bool = False            # taken over from a worker that died

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class Spool:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    # -- layout ----------------------------------------------------------------------------------
    def ensure(self) -> None:
        for name in _FOLDERS:
            (self.root / name).mkdir(parents=True, exist_ok=True)

    def _file(self, state: str, job_id: str) -> Path:
        return self.root / state / f"{job_id}.yaml"

    def _write(self, path: Path, data: bytes) -> None:
        """temp (in spool/tmp, same filesystem) → fsync → rename."""
        tmp = self.root / "tmp" / f"{path.name}.{os.getpid()}.{secrets.token_hex(3)}"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)

    # -- submit ----------------------------------------------------------------------------------
    def submit(self, settings: Mapping[str, str], *, owner: str | None = None, priority: int = 0,
               meta: Mapping[str, Any] | None = None) -> str:
        """Queue a job; returns its id (random, unique in this spool, not a timestamp)."""
        self.ensure()
        for _ in range(100):
            job_id = secrets.token_hex(ID_BYTES)
            try:   # the lock file is created exclusively: the id is ours
                fd = os.open(self.root / "locks" / f"{job_id}.lock",
                             os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_CLOEXEC, 0o666)
                os.close(fd)
                break
            except FileExistsError:
                continue
        else:  # pragma: no cover - 2^32 ids
            raise UsageError(f"spool {self.root}: no free job id")
        spec = {"id": job_id, "submitted": _now_iso(), "owner": owner or _user(),
                "priority": int(priority), "settings": {str(k): str(v) for k, v in settings.items()},
                "meta": dict(meta or {})}
        self._write(self._file("queued", job_id), yaml.safe_dump(spec, sort_keys=True).encode())
        return job_id

    # -- reading ---------------------------------------------------------------------------------
    def _load(self, state: str, path: Path) -> Job:
        job_id = path.stem
        try:
            st = path.stat()
            spec = yaml.safe_load(path.read_text())
            if not isinstance(spec, dict) or not isinstance(spec.get("settings") or {}, dict):
                raise ValueError("expected a mapping with a 'settings' mapping")
            job = Job(job_id, state, spec, changed=st.st_ctime)
        except FileNotFoundError:
            raise
        except (OSError, ValueError, yaml.YAMLError) as exc:
            reason = " ".join(str(exc).split())
            job = Job(job_id, state, None, error=f"job file {path.name} cannot be read: {reason}",
                      changed=_ctime(path))
        job.result = _read_json(self.root / "results" / f"{job_id}.json")
        job.progress = _read_json(self.root / "progress" / f"{job_id}.json")
        if state == "running":
            job.worker_gone = not self.held(job_id) and path.exists()   # not finished meanwhile
        return job

    def jobs(self, states: tuple[str, ...] = STATES, *,
             finished_since: float | None = None) -> list[Job]:
        """The jobs in ``states``; ``finished_since``: of the finished ones, only those that
        ended since then (the others are not read)."""
        out = []
        for state in states:
            folder = self.root / state
            if not folder.is_dir():
                continue
            for path in folder.glob("*.yaml"):
                if finished_since is not None and state in FINAL and \
                        _ctime(path) < finished_since:
                    continue
                try:
                    out.append(self._load(state, path))
                except FileNotFoundError:   # moved on while we looked
                    continue
        return out

    def get(self, job_id: str) -> Job:
        for state in STATES:
            path = self._file(state, job_id)
            if path.exists():
                try:
                    return self._load(state, path)
                except FileNotFoundError:
                    continue
        raise UsageError(f"no job {job_id} in {self.root}")

    def queue(self) -> list[Job]:
        """Queued jobs in the order workers take them: priority (high first), then a fair share
        per owner (:mod:`render.queue_order`)."""
        now = time.time()
        jobs = self.jobs(("queued", "running", "done", "failed"),
                         finished_since=now - FAIR_WINDOW_S)
        return queued_in_order(jobs, now)

    # -- claiming ------------------------------------------------------------------------------
    def _lock(self, job_id: str) -> int | None:
        fd = os.open(self.root / "locks" / f"{job_id}.lock", os.O_CREAT | os.O_RDWR | os.O_CLOEXEC,
                     0o666)
        try:
            if try_flock(fd):
                return fd
        except OSError:
            os.close(fd)
            raise
        os.close(fd)
        return None

    def held(self, job_id: str) -> bool:
        """Someone holds the job's flock (its worker is alive). Asked with a shared lock on a
        read-only descriptor: a reader of the spool needs no write access to it."""
        try:
            fd = os.open(self.root / "locks" / f"{job_id}.lock", os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            return not try_flock(fd, fcntl.LOCK_SH)
        finally:
            os.close(fd)

    def claim(self) -> Claim | None:
        """The next job to run, flock held: first a running job whose worker died (it resumes),
        then the head of the queue."""
        self.ensure()
        for job in sorted(self.jobs(("running",)), key=lambda j: (j.submitted, j.id)):
            fd = self._lock(job.id)
            if fd is None:
                continue
            if not self._file("running", job.id).exists():   # finished meanwhile
                os.close(fd)
                continue
            log.info("job %s: its worker died; resuming it", job.id)
            return Claim(self._load("running", self._file("running", job.id)), fd, reclaimed=True)
        for job in self.queue():
            fd = self._lock(job.id)
            if fd is None:
                continue
            try:
                os.rename(self._file("queued", job.id), self._file("running", job.id))
            except FileNotFoundError:          # cancelled or taken meanwhile
                os.close(fd)
                continue
            fsync_dir(self.root / "running")
            self._progress(job.id, {"state": "starting"})
            return Claim(self._load("running", self._file("running", job.id)), fd)
        return None

    # -- state changes -------------------------------------------------------------------------
    def _move(self, job_id: str, src: str, dst: str) -> None:
        os.rename(self._file(src, job_id), self._file(dst, job_id))
        fsync_dir(self.root / dst)

    def finish(self, claim: Claim, state: str, result: Mapping[str, Any]) -> None:
        """Record how the job ended, then move it to ``state`` (done, failed or cancelled)."""
        assert state in FINAL
        job_id = claim.job.id
        started = claim.job.changed             # it entered running/ then
        data = {"state": state, "finished": _now_iso(),
                "started": datetime.fromtimestamp(started, timezone.utc).isoformat(
                    timespec="milliseconds") if started else None,
                "seconds": round(time.time() - started, 1) if started else None, **result}
        self._write(self.root / "results" / f"{job_id}.json",
                    (json.dumps(data, indent=1, sort_keys=True) + "\n").encode())
        self._move(job_id, "running", state)
        _unlink(self.root / "cancel" / job_id)
        _unlink(self.root / "progress" / f"{job_id}.json")
        claim.release()

    def requeue(self, claim: Claim) -> None:
        """Back to the queue (SIGTERM): the next worker resumes its segments."""
        self._move(claim.job.id, "running", "queued")
        _unlink(self.root / "progress" / f"{claim.job.id}.json")
        claim.release()

    def fail_unreadable(self, job: Job) -> None:
        """A job file that cannot be parsed goes to failed with the parse error."""
        fd = self._lock(job.id)
        if fd is None:
            return
        claim = Claim(job, fd)
        try:
            if job.state == "queued":
                self._move(job.id, "queued", "running")
            self.finish(claim, "failed", {"error": job.error})
        finally:
            claim.release()

    def cancel(self, job_id: str) -> str:
        """Queued: cancelled at once. Running: asked to stop; its worker stops within a segment."""
        job = self.get(job_id)
        if job.state == "queued":
            fd = self._lock(job_id)
            if fd is not None:
                try:
                    self._move(job_id, "queued", "cancelled")
                    self._write(self.root / "results" / f"{job_id}.json",
                                json.dumps({"state": "cancelled", "finished": _now_iso(),
                                            "error": "cancelled before it started"}).encode())
                    return "cancelled"
                except FileNotFoundError:
                    pass
                finally:
                    os.close(fd)
            job = self.get(job_id)
        if job.state == "running":
            self._write(self.root / "cancel" / job_id, _now_iso().encode())
            return "cancelling"
        raise UsageError(f"job {job_id} is {job.state}: nothing to cancel")

    def cancel_requested(self, job_id: str) -> bool:
        return (self.root / "cancel" / job_id).exists()

    def retry(self, job_id: str) -> None:
        """A failed or cancelled job back to the queue (its finished segments are reused)."""
        job = self.get(job_id)
        if job.state not in ("failed", "cancelled"):
            raise UsageError(f"job {job_id} is {job.state}: only failed or cancelled jobs are retried")
        if job.spec is None:
            raise UsageError(f"job {job_id} cannot be retried: {job.error}")
        self._move(job_id, job.state, "queued")
        _unlink(self.root / "results" / f"{job_id}.json")
        _unlink(self.root / "cancel" / job_id)

    def remove(self, job_id: str) -> None:
        """Forget a finished job (its files in the spool; not its outputs)."""
        job = self.get(job_id)
        if job.state not in FINAL:
            raise UsageError(f"job {job_id} is {job.state}: cancel it first")
        self._forget(job)

    def _forget(self, job: Job) -> None:
        _unlink(self._file(job.state, job.id))
        for p in (self.root / "results" / f"{job.id}.json", self.root / "progress" / f"{job.id}.json",
                  self.root / "cancel" / job.id, self.root / "locks" / f"{job.id}.lock"):
            _unlink(p)

    def clean(self, older_s: float) -> list[str]:
        """Remove finished jobs that ended more than ``older_s`` seconds ago."""
        cutoff = time.time() - older_s
        gone = []
        for job in self.jobs(FINAL):
            if job.changed and job.changed < cutoff:
                self._forget(job)
                gone.append(job.id)
        return gone

    # -- progress ------------------------------------------------------------------------------
    def _progress(self, job_id: str, data: Mapping[str, Any]) -> None:
        payload = {"updated": _now_iso(), "pid": os.getpid(), **data}
        try:
            self._write(self.root / "progress" / f"{job_id}.json",
                        json.dumps(payload, sort_keys=True).encode())
        except OSError as exc:      # progress is for people; the job goes on
            log.debug("cannot write progress of job %s: %s", job_id, exc)

    def progress(self, job_id: str, **data: Any) -> None:
        self._progress(job_id, data)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _ctime(path: Path) -> float:
    try:
        return path.stat().st_ctime
    except OSError:
        return 0.0


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def parse_age(text: str) -> float:
    """'7d', '12h', '30m', '90s' (or plain seconds) → seconds."""
    text = text.strip().lower()
    units = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    try:
        if text and text[-1] in units:
            return float(text[:-1]) * units[text[-1]]
        return float(text)
    except ValueError:
        raise UsageError(f"older={text!r}: expected an age like 7d, 12h, 30m") from None
