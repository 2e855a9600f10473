"""Files that matter are written temp → fsync → rename → fsync the folder: a crash at any instant
leaves the old file or the new one, never half of one."""
from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import socket
import stat
from pathlib import Path
from typing import Iterator

from .errors import MediaError


def fsync_dir(folder: str | os.PathLike) -> None:
    """fsync a folder so that a rename in it is on disk (best effort)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` through a temp file beside it (``mode``: its permission bits,
    whatever the umask; None: the umask's)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{socket.gethostname()}-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666 if mode is None else mode)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            fd = -1
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if fd >= 0:
            os.close(fd)
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def file_identity(st: os.stat_result) -> dict[str, int]:
    """What tells a file's bytes have not been touched since it was hashed: size, times, inode
    (a stamp holding these and the SHA-256 spares hashing the file again)."""
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns,
            "inode": st.st_ino}


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))


def not_regular(path: Path) -> str | None:
    """What ``path`` is when it exists (links followed) but is no regular file — "a FIFO", "a
    character device" … — else None. Reading such a thing can block for ever or never end."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def identity(path: Path) -> tuple[int, ...]:
    """What changes when a file is replaced or written to: device, inode, size, mtime and ctime."""
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def try_flock(fd: int, mode: int = fcntl.LOCK_EX) -> bool:
    """flock ``fd`` without waiting: True when taken, False when someone else holds it."""
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
        return True
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise


class FileHashes:
    """The SHA-256 of each input of a render, hashed again only when the file's identity changed;
    and the check that an input is still the file that was hashed."""

    def __init__(self) -> None:
        self._known: dict[Path, tuple[tuple[int, ...], str]] = {}   # path → (identity, sha)

    def sha(self, path: Path) -> str:
        known = self._known.get(path)
        if known is None or known[0] != identity(path):
            before = identity(path)
            sha = sha256_file(path)
            if identity(path) != before:
                raise MediaError(f"{path} changed while it was read; run again")
            self._known[path] = known = (before, sha)
        return known[1]

    def check_unchanged(self, path: Path, what: str = "target") -> None:
        """Raises MediaError when ``path`` is no longer the file hashed (nothing may be committed
        from another)."""
        known = self._known.get(path)
        try:
            same = known is None or identity(path) == known[0]
        except OSError:
            same = False
        if not same:
            raise MediaError(f"{what} {path} changed while rendering; run again")


@contextlib.contextmanager
def locked_beside(path: Path) -> Iterator[None]:
    """Serialise the processes that write ``path``: a kernel lock on ``<path>.lock`` (released
    with its holder), the lock file removed afterwards (a waiter that locked a file removed
    meanwhile locks the new one)."""
    lock_path = path.with_name(path.name + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fh = open(lock_path, "a+b")
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            if os.fstat(fh.fileno()).st_ino == os.stat(lock_path).st_ino:
                break
        except FileNotFoundError:
            pass
        fh.close()
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            lock_path.unlink()
        fh.close()
