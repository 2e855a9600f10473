"""A request the classroom does not carry out, with its HTTP status and a message for people; and
how a failure reads as a full disk."""
from __future__ import annotations

import errno
import shutil
import sqlite3
from pathlib import Path

NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
NEARLY_FULL = 1024 * 1024   # SQLite's "disk I/O error" with less free than this is a full disk


class Refused(Exception):
    """``status``: 400 bad form, 403 not allowed, 404 not found (or not yours), 409 wrong state,
    413 too large, 415 not a form, 422 bad file or value, 429 too many, 503/507 the server."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(" ".join(message.split()))
        self.status = status


def not_found(what: str = "job") -> Refused:
    """The same answer for what does not exist and for what belongs to someone else."""
    return Refused(404, f"no such {what}")


def disk_full(what: str = "the upload") -> Refused:
    return Refused(507, f"the server's disk is full: {what} was refused and nothing was "
                        f"kept; finished results are safe (ask your teacher to free space)")


def out_of_space(exc: BaseException, folder: Path) -> bool:
    """Whether ``exc`` says that the disk of ``folder`` is full: ``ENOSPC``/``EDQUOT``, SQLite's
    "database or disk is full", or its "disk I/O error" while (nearly) nothing is free there
    (SQLite reports a shared-memory or log file that it cannot grow as an I/O error)."""
    if isinstance(exc, OSError):
        return exc.errno in NO_SPACE
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    name = getattr(exc, "sqlite_errorname", "")      # Python 3.11+
    if name == "SQLITE_FULL" or "database or disk is full" in str(exc):
        return True
    if name.startswith("SQLITE_IOERR") or "disk I/O error" in str(exc):
        try:
            return shutil.disk_usage(folder).free < NEARLY_FULL
        except OSError:
            return False
    return False
