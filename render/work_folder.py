"""The work folder of a render: beside the output (same filesystem, so renames are atomic), named by
the job key, holding ``plan.json``, the committed segments and a flock.

A segment is committed by writing its SHA-256 to a sidecar ``seg-NNNN.EXT.json`` (temp, then
rename) and only then renaming it to its final name: a segment whose final name exists and whose
bytes match its sidecar is committed, nothing else is trusted. A whole render holds the folder's
lock exclusively (shards share it), so two renders of one job never remove each other's files.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import socket
from dataclasses import asdict, dataclass
from pathlib import Path

from .errors import RenderFailed, UsageError
from .files import fsync_dir, sha256_file, try_flock, write_atomic
from .media import mp4index
from .media.streams import count_streams
from .plan import RenderPlan, SegmentPlan

log = logging.getLogger(__name__)

PLAN_FILE = "plan.json"
LOCK_FILE = ".lock"


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temp_tag() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class SegmentRecord:
    """The sidecar of a committed segment (and what the report lists)."""

    index: int
    start: int
    end: int
    sha256: str
    bytes: int
    seconds: float
    faces: int = 0
    frames_touched: int = 0
    host: str = ""
    resumed: bool = False      # found committed when this run started (not rendered by it)

    def to_json(self) -> bytes:
        data = asdict(self)
        data.pop("resumed")
        return json.dumps(data, sort_keys=True).encode()


class AlreadyDone(Exception):
    """Another render of the same job finished the output while this one waited for it."""


class WorkFolder:
    """The work folder of one plan; held with a shared flock while anyone executes in it, so a
    stale folder is removed only when nobody uses it."""

    def __init__(self, plan: RenderPlan) -> None:
        self.plan = plan
        self.path = Path(plan.work_dir)
        self._lock_fd: int | None = None
        self.waited = False            # another render of this job held the folder first

    # -- opening -------------------------------------------------------------------------------
    def open(self, *, refuse_other: bool = False, exclusive: bool = False) -> None:
        """Create (or join) the folder and write the plan; remove work folders of the same output
        left by other jobs (other inputs, config, models or versions) that nobody is using.
        ``refuse_other``: a shard refuses to run beside another job's work folder instead."""
        out = Path(self.plan.output)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for other in sorted(out.parent.glob(f".{glob_escape(out.name)}.render-*")):
            if other == self.path or not other.is_dir():
                continue
            other_key = _plan_key(other)
            if refuse_other:
                raise UsageError(f"{other} holds segments of another job for {out} (job key "
                                 f"{(other_key or '?')[:16]}, this shard's {self.plan.key[:16]}): "
                                 f"its inputs, config, models or versions differ; refusing to mix")
            if not _remove_if_unused(other):
                raise UsageError(f"another render of {out} with other settings is running "
                                 f"(work folder {other}); wait for it or choose another output")
            log.info("removed the work folder of an earlier render of %s with other settings",
                     out.name)
        self._lock_fd = self._hold(fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        plan_path = self.path / PLAN_FILE
        if plan_path.exists():
            key = _plan_key(self.path)
            if key != self.plan.key:
                raise UsageError(f"work folder {self.path} holds the plan of another job "
                                 f"(key {(key or '?')[:16]}, this one {self.plan.key[:16]}); "
                                 f"refusing to mix their segments")
        else:
            write_atomic(plan_path, self.plan.to_json().encode())
        self.clean_temps()

    def _hold(self, mode: int) -> int:
        """Create the folder and flock its lock file: shared for shards (they render side by side),
        exclusive for a whole render, whose end removes the folder. A render that finds the lock
        taken waits for it (``waited``); a folder removed meanwhile is made again."""
        self.waited = False
        while True:
            try:
                self.path.mkdir(exist_ok=True)
            except OSError as exc:
                raise RenderFailed(f"cannot create work folder {self.path}: "
                                   f"{exc.strerror or exc}") from None
            lock = self.path / LOCK_FILE
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                if not try_flock(fd, mode):
                    log.warning("%s: another render of the same job is running: waiting for it",
                                Path(self.plan.output).name)
                    self.waited = True
                    fcntl.flock(fd, mode)
                try:
                    same = os.stat(lock).st_ino == os.fstat(fd).st_ino
                except FileNotFoundError:
                    same = False
            except BaseException:
                os.close(fd)
                raise
            if same:
                return fd
            os.close(fd)

    def close(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def clean_temps(self) -> None:
        """Remove the temp files of this host's dead processes (other hosts' are theirs)."""
        host = socket.gethostname()
        for p in self.path.iterdir():
            marker = ".tmp-"
            if marker not in p.name:
                continue
            owner = p.name.split(marker, 1)[1].split(".", 1)[0]
            h, _, pid = owner.rpartition("-")
            if h == host and pid.isdigit() and (int(pid) == os.getpid() or not _pid_alive(int(pid))):
                unlink(p)

    # -- segments ------------------------------------------------------------------------------
    def final(self, seg: SegmentPlan) -> Path:
        return self.path / seg.name

    def sidecar(self, seg: SegmentPlan) -> Path:
        return self.path / f"{seg.name}.json"

    def temp(self, seg: SegmentPlan) -> Path:
        stem, ext = os.path.splitext(seg.name)
        return self.path / f"{stem}.tmp-{temp_tag()}{ext}"

    def committed(self, seg: SegmentPlan, *, check_hash: bool = True) -> SegmentRecord | None:
        """The record of ``seg`` if it is committed and its bytes are what was committed; a
        damaged segment is removed (it will be rendered again) and None returned."""
        final, side = self.final(seg), self.sidecar(seg)
        if not final.exists():
            return None
        try:
            data = json.loads(side.read_text())
            record = SegmentRecord(**data)
        except (OSError, ValueError, TypeError):
            log.warning("segment %s has no valid record: rendering it again", seg.name)
            unlink(final)
            return None
        ok = (record.start, record.end) == (seg.start, seg.end) and \
            final.stat().st_size == record.bytes and \
            (not check_hash or sha256_file(final) == record.sha256)
        if not ok:
            log.warning("segment %s is damaged (its bytes differ from its record): rendering it "
                        "again", seg.name)
            unlink(final)
            unlink(side)
            return None
        return record

    def commit(self, seg: SegmentPlan, tmp: Path, record: SegmentRecord) -> SegmentRecord:
        """Verify the frame count of ``tmp``, record its hash, rename it to its final name."""
        fsync_file(tmp)
        # the MP4 index read in-process (no ffprobe start per segment); ffprobe for anything else
        got = mp4index.sample_count(tmp) if tmp.suffix.lower() in (".mp4", ".m4v", ".mov") else None
        if got is None:
            video = [s for s in count_streams(tmp) if s.kind == "video"]
            got = video[0].packets if len(video) == 1 else 0
        if got != seg.frames:
            unlink(tmp)
            raise RenderFailed(f"segment {seg.index} of {Path(self.plan.output).name}: the encoder "
                               f"wrote {got} frames, {seg.frames} were rendered")
        record.sha256 = sha256_file(tmp)
        record.bytes = tmp.stat().st_size
        write_atomic(self.sidecar(seg), record.to_json())
        os.replace(tmp, self.final(seg))
        fsync_dir(str(self.path))
        return record

    def drop(self, seg: SegmentPlan) -> None:
        """Un-commit ``seg``: a later run renders it again."""
        unlink(self.final(seg))
        unlink(self.sidecar(seg))
        fsync_dir(str(self.path))

    def remove(self) -> None:
        """rm -r the folder while still holding its lock: a render waiting for it wakes to find
        its lock file gone (and the output done), never a folder that is being emptied."""
        shutil.rmtree(self.path, ignore_errors=True)
        self.close()


def glob_escape(name: str) -> str:
    import glob

    return glob.escape(name)


def _plan_key(folder: Path) -> str | None:
    try:
        return json.loads((folder / PLAN_FILE).read_text()).get("key")
    except (OSError, ValueError, AttributeError):
        return None


def _remove_if_unused(folder: Path) -> bool:
    """rm -r ``folder`` if no process holds its lock; False when one does."""
    try:
        fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)
        return True
    try:
        if not try_flock(fd):
            return False
        shutil.rmtree(folder, ignore_errors=True)
        return True
    finally:
        os.close(fd)


def unlink(path: Path) -> None:
    """Remove ``path`` if it is there."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
