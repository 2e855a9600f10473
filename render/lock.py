"""A per-device render lock on kernel ``flock``: two renders never load models onto one card.

Each device has ``slots`` lock files ``<device-id>-<slot>.lock`` in a shared lock folder. A render
takes one with ``flock(LOCK_EX | LOCK_NB)``, writes who holds it into the file itself, and keeps
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
import re
import socket
import stat
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .errors import RenderFailed
from .files import try_flock
from .gpus import gpu_uuids, pick_gpu

log = logging.getLogger(__name__)

POLL_S = 0.1            # a freed slot is noticed within this (plus one pass over the slots)
INFO_GRACE_S = 0.5      # a holder that has just locked gets this long to write who it is
DIR_MODE = 0o1777       # shared by every user / compose project; sticky: nobody deletes others' locks
FILE_MODE = 0o666
_GPU_PROVIDERS = {"cuda", "tensorrt"}
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class LockTimeout(RenderFailed):
    """The device stayed busy for longer than the lock timeout."""

    exit_code = 5


@dataclass(frozen=True)
class Device:
    """What a render locks: ``id`` names the lock files, ``label`` is for people."""

    id: str
    label: str


@dataclass(frozen=True)
class SlotStatus:
    """One lock file of :func:`holders`: held right now or not, and by whom."""

    path: Path
    device_id: str
    slot: int
    held: bool
    holder: dict[str, Any] | None = field(default=None)   # None when not held; {} if not yet written


def safe_id(name: str) -> str:
    """``name`` with everything but letters, digits, ``.``, ``_`` and ``-`` replaced by ``_``."""
    out = _UNSAFE.sub("_", name.strip()).strip(".")
    return out or "device"


def lock_path(lock_dir: Path, device_id: str, slot: int) -> Path:
    return Path(lock_dir) / f"{device_id}-{slot}.lock"


def lock_needed(env: Mapping[str, str] = os.environ) -> bool:
    """False inside a Slurm job or a Kubernetes Indexed Job's pod: the scheduler already gives
    the job its GPU."""
    return not env.get("SLURM_JOB_ID") and not env.get("JOB_COMPLETION_INDEX")


# --------------------------------------------------------------------------- device detection

def detect_device(providers: Sequence[str], *, fake: str = "",
                  env: Mapping[str, str] = os.environ,
                  available: Sequence[str] | None = None) -> Device:
    """The device a render with these execution providers will use (GPU 0 as CUDA numbers it).

    ``fake`` (tests) is used as id and label. ``available`` defaults to ONNX Runtime's
    ``get_available_providers()``. Anything that fails while asking the GPU gives ``cpu``.
    """
    if fake:
        return Device(id=safe_id(fake), label=fake)
    if not _GPU_PROVIDERS.intersection(p.lower() for p in providers):
        return _CPU
    if available is None:
        try:
            import onnxruntime as ort
            available = ort.get_available_providers()
        except Exception:  # noqa: BLE001 - no (working) onnxruntime: no GPU
            return _CPU
    if "CUDAExecutionProvider" not in available:
        return _CPU
    visible = env.get("CUDA_VISIBLE_DEVICES")
    first = None if visible is None else visible.split(",")[0].strip()
    if first is not None and (first == "" or first.startswith("-")
                              or first.lower() == "nodevfiles"):
        return _CPU                      # CUDA sees no GPU at all
    if first is not None and first.startswith("MIG-"):
        return Device(id=safe_id(f"gpu-{first}"), label=f"GPU ({first})")
    gpus = gpu_uuids()
    if not gpus:
        return _CPU
    gpu = pick_gpu(gpus, first)
    if gpu is None:
        log.debug("CUDA_VISIBLE_DEVICES=%s matches none of the GPUs %s", visible, gpus)
        return _CPU
    index, uuid, name = gpu
    return Device(id=safe_id(f"gpu-{uuid}"), label=f"GPU {index} ({name})")


_CPU = Device(id="cpu", label="cpu")


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
    """One of ``slots`` exclusive slots on ``device``, held from :meth:`acquire` to :meth:`release`.

    ``owner`` goes into the lock file (``job`` should be in it); ``timeout`` None or <= 0 waits
    forever. ``on_wait`` gets the one "waiting for ..." line (default: logged at INFO).
    """

    def __init__(self, lock_dir: Path, device: Device | str, slots: int = 1, *,
                 owner: Mapping[str, Any], timeout: float | None,
                 on_wait: Callable[[str], None] | None = None, poll_s: float = POLL_S) -> None:
        if slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots}")
        self.lock_dir = Path(lock_dir)
        self.device = device if isinstance(device, Device) else Device(safe_id(device), device)
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

    def paths(self) -> list[Path]:
        return [lock_path(self.lock_dir, self.device.id, i) for i in range(self.slots)]

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
            while True:
                for slot, fd in enumerate(fds):
                    if try_flock(fd):
                        fds[slot] = -1            # kept; the others are closed below
                        self._took(slot, fd, start)
                        if said:
                            log.info("%s is free after %.0f s of waiting, starting",
                                     self.device.label, self.waited_s)
                        return self
                waited = time.monotonic() - start
                infos = [_read_fd(fd) for fd in fds]
                if not said and (all(infos) or waited >= INFO_GRACE_S):
                    said = True
                    line = f"waiting for {self.device.label}: {self._busy(infos)}"
                    (self.on_wait or log.info)(line)
                if self.timeout is not None and waited >= self.timeout:
                    raise LockTimeout(
                        f"{self.device.label} stayed busy for {self.timeout:g} s "
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
        if self.slots == 1:
            return f"held by {describe_holder(infos[0])}"
        return f"all {self.slots} slots busy: " + "; ".join(describe_holder(i) for i in infos)

    def _took(self, slot: int, fd: int, start: float) -> None:
        self._fd, self.slot, self.path = fd, slot, lock_path(self.lock_dir, self.device.id, slot)
        self.acquired_at, self.released_at = time.time(), None
        self.waited_s = time.monotonic() - start
        info: dict[str, Any] = {"job": self.owner.get("job", "")}
        info.update(self.owner)
        info.update(pid=os.getpid(), host=socket.gethostname(), user=_user(),
                    device=self.device.label, device_id=self.device.id, slot=slot,
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
