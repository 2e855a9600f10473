"""A per-device render lock on kernel ``flock``: two renders never load models onto one card.

Each device has ``slots`` lock files ``<device-id>-<slot>.lock`` in a shared lock folder. On a
machine with several GPUs a render takes a slot of any of them: the first free one in the order
slot 0 of every GPU, then slot 1 of every GPU..., so renders spread over the cards before two
share one; its sessions then run on that card (``Device.ordinal``). A render
takes a slot with ``flock(LOCK_EX | LOCK_NB)``, writes who holds it into the file itself, and keeps
the descriptor open (close-on-exec, so no ffmpeg child inherits it) for the whole render. The
kernel frees the lock when the holder exits or is killed, ``kill -9`` included; the JSON left in
a file that nobody holds is stale and ignored. Waiters poll every :data:`POLL_S` seconds, say once
what they are waiting for, and start by themselves when a slot is free.
"""
from __future__ import annotations

import fcntl
import getpass
import json
import logging
import os
import socket
import stat
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .devices import Device, safe_id
from .errors import RenderFailed
from .files import try_flock

log = logging.getLogger(__name__)

POLL_S = 0.1            # a freed slot is noticed within this (plus one pass over the slots)
INFO_GRACE_S = 0.5      # a holder that has just locked gets this long to write who it is
DIR_MODE = 0o1777       # shared by every user / compose project; sticky: nobody deletes others' locks
FILE_MODE = 0o666


class LockTimeout(RenderFailed):
    """The device stayed busy for longer than the lock timeout."""

    exit_code = 5


@dataclass(frozen=True)
class SlotStatus:
    """One lock file of :func:`holders`: held right now or not, and by whom."""

    path: Path
    device_id: str
    slot: int
    held: bool
    holder: dict[str, Any] | None = field(default=None)   # None when not held; {} if not yet written


def lock_path(lock_dir: Path, device_id: str, slot: int) -> Path:
    return Path(lock_dir) / f"{device_id}-{slot}.lock"


def lock_needed(env: Mapping[str, str] = os.environ) -> bool:
    """False inside a Slurm job or a Kubernetes Indexed Job's pod: the scheduler already gives
    the job its GPU."""
    return not env.get("SLURM_JOB_ID") and not env.get("JOB_COMPLETION_INDEX")


# --------------------------------------------------------------------------- files

def _ensure_dir(lock_dir: Path) -> None:
    try:
        lock_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RenderFailed(f"cannot create the lock folder {lock_dir}: {exc.strerror}") from exc
    try:
        if lock_dir.stat().st_uid == os.geteuid() and stat.S_IMODE(lock_dir.stat().st_mode) != DIR_MODE:
            os.chmod(lock_dir, DIR_MODE)          # mkdir's mode is cut by the umask
    except OSError as exc:
        log.debug("cannot chmod %s: %s", lock_dir, exc)


def _open_slot(path: Path) -> int:
    """A close-on-exec read/write fd on ``path``, created group/other writable if missing.

    An existing file is opened without O_CREAT: with fs.protected_regular, O_CREAT on another
    user's file in a sticky world-writable folder fails even when the file is 0666.
    """
    flags = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW
    for _ in range(3):
        try:
            return os.open(path, flags)
        except FileNotFoundError:
            pass
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, FILE_MODE)
        except FileExistsError:
            continue                              # another render created it just now
        try:
            os.fchmod(fd, FILE_MODE)              # the umask cut the mode
        except OSError:
            pass
        return fd
    return os.open(path, flags)


def _read_fd(fd: int) -> dict[str, Any] | None:
    """The holder JSON in an open lock file; None while it is empty or half written."""
    try:
        data = os.pread(fd, 64 * 1024, 0)
        info = json.loads(data.decode("utf-8")) if data.strip() else None
        return info if isinstance(info, dict) else None
    except (OSError, ValueError):
        return None


def read_holder(path: Path) -> dict[str, Any] | None:
    """The JSON in a lock file (may be stale: only :func:`holders` says whether it is held)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        return _read_fd(fd)
    finally:
        os.close(fd)


def holders(lock_dir: Path) -> list[SlotStatus]:
    """Every lock file in ``lock_dir``: held right now or not, and the holder's JSON if held.

    Held-ness is probed with a non-blocking shared flock on a fresh open file description, released
    at once; this works from the holding process too. A render polling at that instant just sees
    the slot busy for one more poll.
    """
    out: list[SlotStatus] = []
    lock_dir = Path(lock_dir)
    if not lock_dir.is_dir():
        return out
    for path in sorted(lock_dir.glob("*.lock")):
        device_id, _, slot = path.stem.rpartition("-")
        if not device_id or not slot.isdigit():
            continue
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            free = try_flock(fd, fcntl.LOCK_SH)
            if free:
                fcntl.flock(fd, fcntl.LOCK_UN)
            holder = None if free else (_read_fd(fd) or {})
        finally:
            os.close(fd)
        out.append(SlotStatus(path=path, device_id=device_id, slot=int(slot), held=not free,
                              holder=holder))
    return out


def describe_holder(info: Mapping[str, Any] | None) -> str:
    """'job 3f2a (pid 812, user ann, host box, since 20:14)' from a holder's JSON."""
    if not info:
        return "an unknown render"
    bits = [f"pid {info['pid']}" if info.get("pid") is not None else "",
            f"user {info['user']}" if info.get("user") else "",
            f"host {info['host']}" if info.get("host") else "",
            f"since {_hhmm(info.get('since'))}" if info.get("since") else ""]
    extra = ", ".join(b for b in bits if b)
    who = f"job {info['job']}" if info.get("job") else "a render"
    return f"{who} ({extra})" if extra else who


def _hhmm(since: Any) -> str:
    try:
        t = datetime.fromisoformat(str(since))
    except ValueError:
        return str(since)
    today = datetime.now(t.tzinfo).date()
    return t.strftime("%H:%M") if t.date() == today else t.strftime("%Y-%m-%d %H:%M")


# --------------------------------------------------------------------------- the lock

class DeviceLock:
    """One of ``slots`` exclusive slots on one of ``devices``, held from :meth:`acquire` to
    :meth:`release`; :attr:`device` is the one taken (the first of them until then).

    ``owner`` goes into the lock file (``job`` should be in it); ``timeout`` None or <= 0 waits
    forever. ``on_wait`` gets the one "waiting for ..." line (default: logged at INFO).
    """

    def __init__(self, lock_dir: Path, devices: Device | str | Sequence[Device], slots: int = 1, *,
                 owner: Mapping[str, Any], timeout: float | None,
                 on_wait: Callable[[str], None] | None = None, poll_s: float = POLL_S) -> None:
        if slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots}")
        self.lock_dir = Path(lock_dir)
        if isinstance(devices, str):
            devices = [Device(safe_id(devices), devices)]
        self.devices = [devices] if isinstance(devices, Device) else list(devices)
        if not self.devices:
            raise ValueError("no device to lock")
        self.device = self.devices[0]
        self.slots = slots
        self.owner = dict(owner)
        self.timeout = timeout if timeout and timeout > 0 else None
        self.on_wait = on_wait
        self.poll_s = poll_s
        self.slot: int | None = None
        self.path: Path | None = None
        self.holder: dict[str, Any] | None = None
        self.acquired_at: float | None = None
        self.released_at: float | None = None
        self.waited_s = 0.0
        self._fd: int | None = None

    @property
    def locked(self) -> bool:
        return self._fd is not None

    def places(self) -> list[tuple[Device, int]]:
        """(device, slot) in the order they are tried: slot 0 of every device, then slot 1..."""
        return [(d, i) for i in range(self.slots) for d in self.devices]

    def paths(self) -> list[Path]:
        return [lock_path(self.lock_dir, d.id, i) for d, i in self.places()]

    @property
    def label(self) -> str:
        """The device, or the devices a render waits for ('GPU 0 (A) or GPU 1 (B)')."""
        return " or ".join(d.label for d in self.devices)

    def acquire(self) -> DeviceLock:
        if self._fd is not None:
            return self
        _ensure_dir(self.lock_dir)
        start = time.monotonic()
        fds: list[int] = []
        said = False
        try:
            for p in self.paths():
                try:
                    fds.append(_open_slot(p))
                except OSError as exc:
                    raise RenderFailed(f"cannot open the lock file {p}: {exc.strerror}") from exc
            places = self.places()
            while True:
                for k, fd in enumerate(fds):
                    if try_flock(fd):
                        fds[k] = -1               # kept; the others are closed below
                        self._took(*places[k], fd, start)
                        if said:
                            log.info("%s is free after %.0f s of waiting, starting",
                                     self.device.label, self.waited_s)
                        return self
                waited = time.monotonic() - start
                infos = [_read_fd(fd) for fd in fds]
                if not said and (all(infos) or waited >= INFO_GRACE_S):
                    said = True
                    line = f"waiting for {self.label}: {self._busy(infos)}"
                    (self.on_wait or log.info)(line)
                if self.timeout is not None and waited >= self.timeout:
                    raise LockTimeout(
                        f"{self.label} stayed busy for {self.timeout:g} s "
                        f"({self._busy(infos)}); try again when it is free or raise the lock "
                        f"timeout")
                pause = self.poll_s
                if self.timeout is not None:
                    pause = max(0.0, min(pause, self.timeout - waited))
                time.sleep(pause)
        finally:
            for fd in fds:
                if fd >= 0:
                    os.close(fd)

    def _busy(self, infos: list[dict[str, Any] | None]) -> str:
        if len(infos) == 1:
            return f"held by {describe_holder(infos[0])}"
        return f"all {len(infos)} slots busy: " + "; ".join(describe_holder(i) for i in infos)

    def _took(self, device: Device, slot: int, fd: int, start: float) -> None:
        self.device = device
        self._fd, self.slot, self.path = fd, slot, lock_path(self.lock_dir, device.id, slot)
        self.acquired_at, self.released_at = time.time(), None
        self.waited_s = time.monotonic() - start
        info: dict[str, Any] = {"job": self.owner.get("job", "")}
        info.update(self.owner)
        info.update(pid=os.getpid(), host=socket.gethostname(), user=_user(),
                    device=self.device.label, device_id=self.device.id,
                    cuda_device=self.device.ordinal, slot=slot,
                    since=datetime.fromtimestamp(self.acquired_at).astimezone()
                    .isoformat(timespec="seconds"))
        self.holder = info
        try:
            data = (json.dumps(info, default=str) + "\n").encode("utf-8")
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
        except OSError as exc:              # the lock is what matters; the note is for people
            log.warning("cannot write the holder into %s: %s", self.path, exc.strerror)

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)             # best effort: no stale note once it is free
        except OSError:
            pass
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
            self.released_at = time.time()

    def __enter__(self) -> DeviceLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:
        fd = getattr(self, "_fd", None)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no passwd entry in a container
        return str(os.geteuid())
