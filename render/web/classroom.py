"""The page's jobs on the spool: submit checked uploads, show them to whom they belong, hand back
their files, and remove them after the retention time.

A job of the page is an ordinary spool job (``render work`` renders it under the device lock,
resumable, reported and marked like any other) whose ``owner`` is the student and whose ``meta``
carries ``classroom`` (the folder and the uploaded files), ``submitted_by`` and ``consent``; the
worker copies ``meta`` into the report's ``job`` section. A student sees only jobs whose owner is
their name and that carry ``classroom``; anything else is "no such job" (404), exactly as for an
id that does not exist.
"""
from __future__ import annotations

import logging
import os
import secrets
import shutil
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Mapping

from ..config import Config
from ..errors import RenderError
from ..files import fsync_dir
from ..job_progress import describe_progress
from ..job_spec import validate
from ..lock import describe_holder, holders
from ..queue_order import queued_in_order, typical_seconds, waits
from ..spool import FINAL, Job, Spool
from ..spool_job import is_job_id
from . import settings as class_settings
from .accounts import Accounts, User
from .db import Database
from .errors import Refused, disk_full, not_found, out_of_space
from .settings import ClassSettings
from . import extras
from .picks import check_second
from .uploads import FaceFinder, Received, check_source, check_target, result_extension
from .views import classroom_meta, iso as _iso, job_view, ts as _ts

log = logging.getLogger(__name__)

CONSENT = "I have the consent of the people in these files"
STALE_S = 3600.0          # incoming parts and unreferenced job folders older than this are removed
SNAPSHOT_S = 0.5          # the spool is read at most this often for the pages' polling
EXTRAS_S = 30.0           # the extras on offer are read from the models folder at most this often


class Classroom:
    """Everything the server does, over the state folder, the database and the spool."""

    def __init__(self, cfg: Config, overrides: Mapping[str, str], *, min_free: int = 0) -> None:
        self.cfg = cfg
        self.state = cfg.state_path
        self.db = Database(self.state)
        self.accounts = Accounts(self.db)
        self.spool = Spool(cfg.spool_path)
        self.faces = FaceFinder(overrides)
        self.min_free = int(min_free)
        self.incoming = self.state / "incoming"
        self.folders = self.state / "files"
        self._submit_lock = threading.Lock()
        self._snapshot: tuple[float, list[Job], dict[str, int]] | None = None
        self._snapshot_lock = threading.Lock()
        self._waits: dict[str, float | None] = {}
        self.offer = extras.Offer(cfg, overrides, EXTRAS_S)

    def ensure(self) -> None:
        for d in (self.state, self.incoming, self.folders):
            d.mkdir(parents=True, exist_ok=True)
        self.spool.ensure()
        _ = self.accounts.secret
        self.extras()

    # -- settings ----------------------------------------------------------------------------------
    def settings(self) -> ClassSettings:
        return class_settings.load(self.db)

    def extras(self, profile: str | None = None) -> list[str]:
        """What a student may add here with ``profile`` (None: with one of the allowed ones):
        the extras whose models are in place (render.web.extras.Offer)."""
        return self.offer.offered([profile] if profile else self.settings().allowed_profiles)

    def save_settings(self, values: Mapping[str, Any]) -> ClassSettings:
        try:
            return class_settings.save(self.db, values)
        except class_settings.SettingsRejected as exc:
            raise Refused(422, str(exc)) from None

    # -- reading the spool -------------------------------------------------------------------------
    def _jobs(self, fresh: bool = False) -> tuple[list[Job], dict[str, int]]:
        """Every job and the queue order (position from 1), read at most every SNAPSHOT_S; the
        queued jobs' estimated waits in ``self._waits``."""
        with self._snapshot_lock:
            now = time.monotonic()
            if fresh or self._snapshot is None or now - self._snapshot[0] > SNAPSHOT_S:
                jobs = self.spool.jobs()
                wall = time.time()
                order = queued_in_order(jobs, wall)
                self._waits = waits(order, [j for j in jobs if j.state == "running"],
                                    typical_seconds(jobs), wall)
                self._snapshot = (now, jobs, {j.id: i + 1 for i, j in enumerate(order)})
            return self._snapshot[1], self._snapshot[2]

    def _forget_snapshot(self) -> None:
        with self._snapshot_lock:
            self._snapshot = None

    @staticmethod
    def visible(user: User, job: Job) -> bool:
        if user.teacher:
            return True
        return job.owner == user.name and classroom_meta(job) is not None

    def jobs_for(self, user: User) -> list[dict[str, Any]]:
        jobs, order = self._jobs()
        mine = [j for j in jobs if self.visible(user, j)]
        mine.sort(key=lambda j: (j.submitted, j.id), reverse=True)
        retention = self.settings().retention_days
        return [self.view(j, order, retention, full=user.teacher) for j in mine]

    def job_for(self, user: User, job_id: str) -> Job:
        if not is_job_id(job_id):
            raise not_found()
        try:
            job = self.spool.get(job_id)
        except RenderError:
            raise not_found() from None
        if not self.visible(user, job):
            raise not_found()
        return job

    def view(self, job: Job, order: Mapping[str, int] | None = None,
             retention: int | None = None, *, full: bool = False) -> dict[str, Any]:
        """A job as the pages and the API show it (``full``: the teacher's, messages as the
        worker wrote them; else in the student's terms)."""
        if order is None:
            order = self._jobs()[1]
        if retention is None:
            retention = self.settings().retention_days
        return job_view(job, order=order, retention=retention, output=self.output_of(job),
                        wait_s=self._waits.get(job.id),
                        cancelling=job.state == "running" and self.spool.cancel_requested(job.id),
                        full=full)

    def output_of(self, job: Job) -> Path | None:
        """The output file of a page job (None for jobs that did not come from the page)."""
        c = classroom_meta(job)
        if not c or not job.settings.get("output"):
            return None
        out = Path(job.settings["output"])
        folder = self.folders / str(c.get("folder", ""))
        if folder == self.folders or folder not in out.parents:
            return None          # a job file edited by hand: nothing outside its folder is served
        return out

    def file_for(self, user: User, file_id: str) -> tuple[Path, str]:
        """(path, uploaded name) of an uploaded file the user may fetch."""
        with self.db.connect() as con:
            row = con.execute("SELECT * FROM files WHERE id = ?", (file_id,)).fetchone()
        if row is None or not (user.teacher or row["owner"] == user.name):
            raise not_found("file")
        path = Path(row["path"])
        if not path.is_file():
            raise not_found("file")
        return path, row["name"]

    # -- submitting --------------------------------------------------------------------------------
    def active(self, owner: str) -> int:
        jobs, _ = self._jobs(fresh=True)
        return sum(1 for j in jobs if j.owner == owner and j.state in ("queued", "running")
                   and classroom_meta(j) is not None)

    def check_quota(self, user: User, settings: ClassSettings) -> None:
        n = self.active(user.name)
        if n >= settings.max_queued_jobs:
            raise Refused(429, f"you have {n} job{'s' if n != 1 else ''} queued or running: the "
                               f"class limit is {settings.max_queued_jobs}; wait until one is "
                               f"done (or cancel one)")

    def submit(self, user: User, received: Received, settings: ClassSettings) -> dict[str, Any]:
        """Check what was uploaded and queue the job; the uploads are gone whatever happens,
        either moved into the job's folder or removed."""
        folder: Path | None = None
        try:
            fields = received.fields
            profile = fields.get("profile") or settings.allowed_profiles[0]
            if profile not in settings.allowed_profiles:
                raise Refused(422, f"profile {profile!r} is not allowed in this class (allowed: "
                                   f"{', '.join(settings.allowed_profiles)})")
            if fields.get("consent", "").lower() not in ("yes", "on", "true", "1"):
                raise Refused(422, f"tick the consent box: \"{CONSENT}\"")
            asked = extras.read(received, self.offer, profile)
            for name in ("source", "target"):
                f = received.files.get(name)
                if f is None:
                    raise Refused(422, f"the {name} file is missing")
                if f.bytes == 0:
                    raise Refused(422, f"the {name} {f.name!r} is empty")
            source, target = received.files["source"], received.files["target"]
            target_info, target_ext = check_target(target.path, target.name,
                                                   settings.max_clip_seconds)
            extras.check(asked, received, target_info.is_image, settings.max_clip_seconds)
            _, source_ext = check_source(source.path, source.name, self.faces,
                                         {"profile": profile})
            second = check_second(received, target, target_info, self.faces,
                                  {"profile": profile}, self.incoming)
            sid = secrets.token_hex(8)
            folder = self.folders / sid
            (folder / "out").mkdir(parents=True)
            source_path, target_path = folder / f"source{source_ext}", folder / f"target{target_ext}"
            os.replace(source.path, source_path)
            os.replace(target.path, target_path)
            stored = [("source", source.name, source_path, source.bytes, {}),
                      ("target", target.name, target_path, target.bytes, {}),
                      *(second.store(folder) if second else []), *asked.store(folder)]
            fsync_dir(folder)
            suffix = ".png" if target_info.is_image else result_extension(target.name, target_ext)
            output = folder / "out" / ("result" + asked.suffix(target_info.is_image, suffix))
            job_settings = {"profile": profile,
                            **(second.settings(source_path) if second else
                               {"source": str(source_path)}),
                            "target": str(target_path), "output": str(output),
                            **asked.settings(profile)}
            try:
                validate(job_settings, [])
            except RenderError as exc:
                raise Refused(422, str(exc)) from None
            now = time.time()
            files: dict[str, Any] = {"second": second.kind} if second else {}
            with self.db.connect() as con:
                for role, name, path, size, more in stored:
                    fid = secrets.token_hex(8)
                    con.execute("INSERT INTO files (id, owner, job, role, name, path, bytes, created) "
                                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                (fid, user.name, sid, role, name, str(path), size, now))
                    files[role] = {"file": fid, "name": name, "bytes": size, **more}
            files["target"].update(kind=target_info.kind,
                                   seconds=None if target_info.is_image else round(target_info.duration, 3))
            meta = {"classroom": {"folder": sid, **files},
                    "submitted_by": user.name,
                    "consent": {"given": True, "statement": CONSENT, "at": _iso(now)}}
            with self._submit_lock:
                self.check_quota(user, settings)
                job_id = self.spool.submit(job_settings, owner=user.name, meta=meta)
            self._forget_snapshot()
            log.info("job %s queued for %s (%s, %s)", job_id, user.name, source.name, target.name)
            return self.view(self.spool.get(job_id), full=user.teacher)
        except BaseException as exc:
            full = out_of_space(exc, self.state)    # before the folder's removal frees its space
            if folder is not None:
                self._remove_folder(folder.name)
            if full:
                log.warning("an upload was refused: the disk filled up while it was stored (%s)",
                            exc)
                raise disk_full() from None
            raise
        finally:
            received.discard()

    # -- changing jobs -----------------------------------------------------------------------------
    def cancel(self, user: User, job_id: str) -> dict[str, Any]:
        job = self.job_for(user, job_id)
        if job.state not in ("queued", "running"):
            raise Refused(409, f"job {job_id} is {job.state}: nothing to cancel")
        try:
            self.spool.cancel(job_id)
        except RenderError as exc:
            raise Refused(409, str(exc)) from None
        self._forget_snapshot()
        return self.view(self.spool.get(job_id), full=user.teacher)

    def retry(self, user: User, job_id: str) -> dict[str, Any]:
        job = self.job_for(user, job_id)
        if not user.teacher:
            raise Refused(403, "only the teacher retries jobs")
        try:
            self.spool.retry(job.id)
        except RenderError as exc:
            raise Refused(409, str(exc)) from None
        self._forget_snapshot()
        return self.view(self.spool.get(job_id), full=user.teacher)

    def delete(self, user: User, job_id: str) -> None:
        """A queued job is cancelled and removed; a finished one is removed with every file of
        it (uploads, output, report, segments); a running one must be cancelled first."""
        job = self.job_for(user, job_id)
        if job.state == "running":
            raise Refused(409, f"job {job_id} is running: cancel it first, then delete it once it "
                               f"has stopped")
        if job.state == "queued":
            try:
                self.spool.cancel(job_id)
            except RenderError as exc:
                raise Refused(409, str(exc)) from None
            job = self.spool.get(job_id)
            if job.state not in FINAL:
                raise Refused(409, f"job {job_id} has just started: cancel it, then delete it")
        self._remove_job(job)
        self._forget_snapshot()

    def _remove_job(self, job: Job) -> None:
        c = classroom_meta(job)
        try:
            self.spool.remove(job.id)
        except RenderError as exc:
            log.warning("job %s: %s", job.id, exc)
            return
        if c and c.get("folder"):
            self._remove_folder(str(c["folder"]))

    def _remove_folder(self, sid: str) -> None:
        """Remove a job's folder, then its files' records. The folder goes first: removing it
        needs no free space, and a record whose file is gone is served as "no such file" (and
        dropped by :meth:`expire`) when the database cannot be written now."""
        if not sid or "/" in sid or sid.startswith("."):
            return
        shutil.rmtree(self.folders / sid, ignore_errors=True)
        fsync_dir(self.folders)
        try:
            with self.db.connect() as con:
                con.execute("DELETE FROM files WHERE job = ?", (sid,))
        except sqlite3.Error as exc:
            log.warning("the records of folder %s stay until the next clean-up: %s", sid, exc)

    # -- upkeep ------------------------------------------------------------------------------------
    def expire(self, now: float | None = None) -> list[str]:
        """Remove finished page jobs (and all their files) older than the retention time, upload
        parts left by a crash, job folders no job refers to and records of files whose folder is
        gone; returns the removed job ids."""
        now = time.time() if now is None else now
        keep_s = self.settings().retention_days * 86400.0
        jobs, _ = self._jobs(fresh=True)
        gone = []
        for job in jobs:
            if job.state not in FINAL or classroom_meta(job) is None:
                continue
            finished = _ts((job.result or {}).get("finished")) or job.changed
            if finished and now - finished > keep_s:
                self._remove_job(job)
                gone.append(job.id)
                log.info("job %s of %s removed after %d days", job.id, job.owner,
                         self.settings().retention_days)
        referenced = {str((classroom_meta(j) or {}).get("folder")) for j in self.spool.jobs()}
        for folder in self.folders.glob("*") if self.folders.is_dir() else []:
            if folder.name not in referenced and _age(folder, now) > STALE_S:
                self._remove_folder(folder.name)
        for part in self.incoming.glob("*.part") if self.incoming.is_dir() else []:
            if _age(part, now) > STALE_S:
                part.unlink(missing_ok=True)
        with self.db.connect() as con:     # records left by a removal the full disk cut short
            folders = [r["job"] for r in con.execute("SELECT DISTINCT job FROM files")]
            for sid in folders:
                if not (self.folders / sid).is_dir():
                    con.execute("DELETE FROM files WHERE job = ?", (sid,))
        self.accounts.forget_expired()
        self._forget_snapshot()
        return gone

    def status(self) -> dict[str, Any]:
        """What the teacher page shows besides the jobs: devices, queue, disk."""
        jobs, order = self._jobs()
        by_id = {j.id: j for j in jobs}
        devices = []
        for slot in holders(self.cfg.lock_path):
            job_id = str((slot.holder or {}).get("job") or "")
            devices.append({"device": (slot.holder or {}).get("device") or slot.device_id,
                            "slot": slot.slot, "held": slot.held,
                            "holder": describe_holder(slot.holder) if slot.held else None,
                            "owner": by_id[job_id].owner if job_id in by_id else None})
        queue = sorted(((pos, by_id[i]) for i, pos in order.items()), key=lambda t: t[0])
        usage = shutil.disk_usage(self.state if self.state.exists() else self.state.parent)
        owners = {str((classroom_meta(j) or {}).get("folder")): j.owner for j in jobs}
        per_student: dict[str, int] = {}
        total = 0
        for folder in self.folders.glob("*") if self.folders.is_dir() else []:
            size = _tree_bytes(folder)
            total += size
            owner = owners.get(folder.name, "(unreferenced)")
            per_student[owner] = per_student.get(owner, 0) + size
        return {
            "devices": devices,
            "queue": [{"position": pos, "id": j.id, "owner": j.owner} for pos, j in queue],
            "running": [{"id": j.id, "owner": j.owner, "message": describe_progress(j)}
                        for j in jobs if j.state == "running"],
            "disk": {"total": usage.total, "used": usage.used, "free": usage.free,
                     "classroom": total, "by_student": dict(sorted(per_student.items())),
                     "min_free": self.min_free},
            "lock_dir": str(self.cfg.lock_path),
            "spool_dir": str(self.cfg.spool_path),
            "state_dir": str(self.state),
            "now": _iso(time.time()),
        }


def _age(path: Path, now: float) -> float:
    try:
        return now - path.stat().st_mtime
    except OSError:
        return 0.0


def _tree_bytes(folder: Path) -> int:
    total = 0
    for root, _, names in os.walk(folder):
        for name in names:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total
