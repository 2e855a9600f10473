"""The classroom's SQLite database (``state_dir/classroom.db``, mode 0600).

One short-lived connection per operation (the server's threads and the ``render users`` command
share the file); WAL journal, so readers never wait for a writer; every write is one transaction.
"""
from __future__ import annotations

import os
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..errors import UsageError

DB_NAME = "classroom.db"

SCHEMA = """
CREATE TABLE IF NOT EXISTS users (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    role TEXT NOT NULL CHECK (role IN ('student', 'teacher')),
    hash TEXT NOT NULL,                 -- argon2id, with its salt and parameters
    must_change INTEGER NOT NULL DEFAULT 1,
    disabled INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL,
    last_signin REAL
);
CREATE TABLE IF NOT EXISTS sessions (
    key TEXT PRIMARY KEY,               -- SHA-256 of the cookie's secret
    user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created REAL NOT NULL,
    seen REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS tokens (
    key TEXT PRIMARY KEY,               -- SHA-256 of the script token
    user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created REAL NOT NULL,
    last_used REAL
);
CREATE TABLE IF NOT EXISTS failures (
    key TEXT PRIMARY KEY,               -- 'user:NAME' or 'ip:ADDRESS'
    count INTEGER NOT NULL,
    last REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS settings (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL                 -- JSON
);
CREATE TABLE IF NOT EXISTS files (
    id TEXT PRIMARY KEY,                -- random; what the API calls the file
    owner TEXT NOT NULL,
    job TEXT NOT NULL,                  -- spool job id
    role TEXT NOT NULL,                 -- source | target | source2 | reference1 | reference2
    name TEXT NOT NULL,                 -- the uploaded name, for people only (never a path)
    path TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS files_job ON files(job);
"""


class Database:
    def __init__(self, state_path: Path) -> None:
        self.state_path = Path(state_path)
        self.path = self.state_path / DB_NAME
        self._ready = False

    def _prepare(self) -> None:
        try:
            self.state_path.mkdir(parents=True, exist_ok=True)
            if not self.path.exists():     # created private before SQLite opens it
                os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        except OSError as exc:
            raise UsageError(f"cannot create the classroom database {self.path}: "
                             f"{exc.strerror or exc}") from None
        con = sqlite3.connect(self.path, timeout=30)
        try:
            con.execute("PRAGMA journal_mode=WAL")
            con.executescript(SCHEMA)
            con.commit()
        finally:
            con.close()
        self._ready = True

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        """A connection whose block is one transaction (committed unless it raises)."""
        if not self._ready:
            self._prepare()
        con = sqlite3.connect(self.path, timeout=30)
        con.row_factory = sqlite3.Row
        con.execute("PRAGMA foreign_keys=ON")
        try:
            with con:
                yield con
        finally:
            con.close()
