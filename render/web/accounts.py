"""Accounts of the classroom: users, passwords, sessions, script tokens and throttled sign-ins.

- Passwords are stored only as argon2id hashes (argon2-cffi: a random salt per hash, slow and
  memory-hard). ``render users add`` and ``render users reset`` print a one-time password that
  must be changed at the first sign-in; until then the account can do nothing else.
- Sessions and script tokens are random 256-bit secrets; the database keeps only their SHA-256.
  The session cookie carries the secret and an HMAC of it under ``state_dir/secret``, so a cookie
  not made by this server is refused before the database is asked. Each session has its own CSRF
  token (an HMAC of the session under the same key: stored nowhere), which every state-changing
  request made with the cookie must send back.
- Failed sign-ins are counted per account and per client address. After :data:`FREE_TRIES`
  failures in a row an account is refused (even with the right password) for
  :data:`BASE_DELAY_S`, doubling with each further failure up to :data:`MAX_DELAY_S`; an address
  gets :data:`FREE_TRIES_IP` failures over all accounts. A right password clears the account's
  count; an hour without failures clears either.
"""
from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
import threading
import time
from dataclasses import dataclass

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from ..errors import UsageError
from ..files import write_atomic
from .db import Database

log = logging.getLogger(__name__)

ROLES = ("student", "teacher")
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,31}$")
MIN_PASSWORD = 8
MAX_PASSWORD = 256
FREE_TRIES = 5              # failed sign-ins of one account before it is slowed down
FREE_TRIES_IP = 50          # ... of one client address over all accounts (a class behind one
                            # NAT address shares it, so it is generous)
BASE_DELAY_S = 30.0         # the first wait; doubles with every further failure
MAX_DELAY_S = 900.0
FORGET_FAILURES_S = 3600.0  # a count with no new failure for this long starts again
SESSION_IDLE_S = 12 * 3600.0
SESSION_MAX_S = 7 * 86400.0
SECRET_NAME = "secret"
COOKIE = "render_session"

_hasher = PasswordHasher()   # argon2id, RFC 9106 low-memory parameters
#: password hashes computed at once: each takes 64 MiB for its time, so a class signing in
#: together waits its turn instead of multiplying that (bench/RESULTS.md, the class at once)
HASHING_AT_ONCE = 2


class SignInRefused(Exception):
    """Wrong name or password (``retry_after`` None), or too many failures (seconds to wait)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PasswordRejected(Exception):
    """A new password that does not meet the rules, or a wrong current password."""


@dataclass(frozen=True)
class User:
    id: int
    name: str
    role: str
    must_change: bool
    disabled: bool
    created: float
    last_signin: float | None

    @property
    def teacher(self) -> bool:
        return self.role == "teacher"


@dataclass(frozen=True)
class Session:
    user: User
    key: str                # SHA-256 of the secret
    csrf: str


def _user(row) -> User:
    return User(id=row["id"], name=row["name"], role=row["role"], must_change=bool(row["must_change"]),
                disabled=bool(row["disabled"]), created=row["created"], last_signin=row["last_signin"])


def _bytes(text: str) -> bytes:
    """Any text a client sent, as bytes (lone surrogates from JSON included)."""
    return text.encode("utf-8", "surrogatepass")


def _digest(secret: str) -> str:
    return hashlib.sha256(_bytes(secret)).hexdigest()


def same_secret(sent: str, expected: str) -> bool:
    """Whether a client sent ``expected``, compared in constant time; text of any kind or length
    (non-ASCII included, which ``hmac.compare_digest`` refuses as ``str``) is simply not it."""
    return hmac.compare_digest(_bytes(sent), _bytes(expected))


def one_time_password() -> str:
    """Four groups of four letters and digits, easy to read out (no 0/O, 1/l/I)."""
    alphabet = "abcdefghjkmnpqrstuvwxyz23456789"
    return "-".join("".join(secrets.choice(alphabet) for _ in range(4)) for _ in range(4))


def check_name(name: str) -> str:
    if not NAME_RE.match(name or ""):
        raise UsageError(f"user name {name!r}: use 1-32 lowercase letters, digits, '.', '_' or "
                         f"'-', starting with a letter or digit")
    return name


def check_new_password(password: str) -> None:
    if len(password) < MIN_PASSWORD:
        raise PasswordRejected(f"the new password needs at least {MIN_PASSWORD} characters")
    if len(password) > MAX_PASSWORD:
        raise PasswordRejected(f"the new password may have at most {MAX_PASSWORD} characters")


class Accounts:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._secret: bytes | None = None
        self._dummy_hash: str | None = None
        self._hashing = threading.BoundedSemaphore(HASHING_AT_ONCE)

    def _hash(self, password: str) -> str:
        with self._hashing:
            return _hasher.hash(password)

    # -- the cookie key --------------------------------------------------------------------------
    @property
    def secret(self) -> bytes:
        """The cookie-signing key, made once (random, mode 0600) in the state folder."""
        if self._secret is None:
            path = self.db.state_path / SECRET_NAME
            if not path.exists():
                self.db.state_path.mkdir(parents=True, exist_ok=True)
                write_atomic(path, secrets.token_bytes(32), mode=0o600)
            data = path.read_bytes()
            if len(data) < 32:
                raise UsageError(f"{path} is damaged (fewer than 32 bytes): remove it (every "
                                 f"session ends) and start again")
            self._secret = data
        return self._secret

    def _sign(self, value: str) -> str:
        return hmac.new(self.secret, _bytes(value), hashlib.sha256).hexdigest()

    # -- users -----------------------------------------------------------------------------------
    def get(self, name: str) -> User | None:
        with self.db.connect() as con:
            row = con.execute("SELECT * FROM users WHERE name = ?", (name,)).fetchone()
        return _user(row) if row else None

    def users(self) -> list[User]:
        with self.db.connect() as con:
            return [_user(r) for r in con.execute("SELECT * FROM users ORDER BY role DESC, name")]

    def add(self, name: str, role: str = "student") -> str:
        """Create an account; returns its one-time password."""
        check_name(name)
        if role not in ROLES:
            raise UsageError(f"role={role}: expected student or teacher")
        password = one_time_password()
        digest = self._hash(password)
        with self.db.connect() as con:
            if con.execute("SELECT 1 FROM users WHERE name = ?", (name,)).fetchone():
                raise UsageError(f"user {name} exists (render users reset {name} gives a new "
                                 f"one-time password)")
            con.execute("INSERT INTO users (name, role, hash, must_change, disabled, created) "
                        "VALUES (?, ?, ?, 1, 0, ?)", (name, role, digest, time.time()))
        return password

    def _require(self, con, name: str):
        row = con.execute("SELECT * FROM users WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise UsageError(f"no user {name} (render users list shows them)")
        return row

    def set_disabled(self, name: str, disabled: bool) -> None:
        """Disable (every session and token ends) or enable an account."""
        with self.db.connect() as con:
            row = self._require(con, name)
            con.execute("UPDATE users SET disabled = ? WHERE id = ?", (int(disabled), row["id"]))
            if disabled:
                con.execute("DELETE FROM sessions WHERE user_id = ?", (row["id"],))
                con.execute("DELETE FROM tokens WHERE user_id = ?", (row["id"],))

    def reset(self, name: str) -> str:
        """A new one-time password (to be changed at the next sign-in); sessions and tokens end,
        the failed sign-ins are forgotten."""
        password = one_time_password()
        digest = self._hash(password)
        with self.db.connect() as con:
            row = self._require(con, name)
            con.execute("UPDATE users SET hash = ?, must_change = 1 WHERE id = ?", (digest, row["id"]))
            con.execute("DELETE FROM sessions WHERE user_id = ?", (row["id"],))
            con.execute("DELETE FROM tokens WHERE user_id = ?", (row["id"],))
            con.execute("DELETE FROM failures WHERE key = ?", (f"user:{name}",))
        return password

    def new_token(self, name: str) -> str:
        """A token for scripts (``Authorization: Bearer ...``); replaces the account's old one."""
        token = "rt_" + secrets.token_urlsafe(32)
        with self.db.connect() as con:
            row = self._require(con, name)
            if row["disabled"]:
                raise UsageError(f"user {name} is disabled")
            con.execute("DELETE FROM tokens WHERE user_id = ?", (row["id"],))
            con.execute("INSERT INTO tokens (key, user_id, created) VALUES (?, ?, ?)",
                        (_digest(token), row["id"], time.time()))
        return token

    # -- signing in ------------------------------------------------------------------------------
    def _waits(self, con, keys: list[tuple[str, int]], now: float) -> float:
        wait = 0.0
        for key, free in keys:
            row = con.execute("SELECT count, last FROM failures WHERE key = ?", (key,)).fetchone()
            if row is None or now - row["last"] > FORGET_FAILURES_S or row["count"] < free:
                continue
            delay = min(BASE_DELAY_S * 2 ** (row["count"] - free), MAX_DELAY_S)
            wait = max(wait, row["last"] + delay - now)
        return wait

    def sign_in(self, name: str, password: str, address: str) -> User:
        """The account, if ``password`` is its password and it may sign in now."""
        now = time.time()
        keys = [(f"user:{name}", FREE_TRIES), (f"ip:{address}", FREE_TRIES_IP)]
        with self.db.connect() as con:
            wait = self._waits(con, keys, now)
            row = con.execute("SELECT * FROM users WHERE name = ?", (name,)).fetchone()
        if wait > 0:
            raise SignInRefused(f"too many failed sign-ins: try again in {int(wait) + 1} s",
                                retry_after=wait)
        ok = self._verify(row["hash"] if row else None, password)
        if not ok or row is None:
            with self.db.connect() as con:
                for key, _ in keys:
                    con.execute("INSERT INTO failures (key, count, last) VALUES (?, 1, ?) "
                                "ON CONFLICT(key) DO UPDATE SET count = CASE WHEN ? - last > ? "
                                "THEN 1 ELSE count + 1 END, last = ?",
                                (key, now, now, FORGET_FAILURES_S, now))
            log.warning("failed sign-in for %r from %s", name, address)
            raise SignInRefused("wrong name or password")
        user = _user(row)
        if user.disabled:
            raise SignInRefused("this account is disabled: ask your teacher")
        with self.db.connect() as con:
            con.execute("DELETE FROM failures WHERE key = ?", (keys[0][0],))
            con.execute("UPDATE users SET last_signin = ? WHERE id = ?", (now, user.id))
            if _hasher.check_needs_rehash(row["hash"]):
                con.execute("UPDATE users SET hash = ? WHERE id = ?", (self._hash(password), user.id))
        return user

    def _verify(self, digest: str | None, password: str) -> bool:
        if digest is None:     # no such user: spend the same time as for a real one
            if self._dummy_hash is None:
                self._dummy_hash = self._hash(secrets.token_hex(16))
            digest, password = self._dummy_hash, password + "\0"
        try:
            with self._hashing:
                return _hasher.verify(digest, password)
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return False

    def change_password(self, user: User, current: str, new: str) -> None:
        with self.db.connect() as con:
            row = con.execute("SELECT hash FROM users WHERE id = ?", (user.id,)).fetchone()
        if row is None or not self._verify(row["hash"], current):
            raise PasswordRejected("the current password is wrong")
        check_new_password(new)
        if new == current:
            raise PasswordRejected("the new password must differ from the current one")
        digest = self._hash(new)
        with self.db.connect() as con:
            con.execute("UPDATE users SET hash = ?, must_change = 0 WHERE id = ?", (digest, user.id))

    # -- sessions --------------------------------------------------------------------------------
    def open_session(self, user: User) -> tuple[str, Session]:
        """(cookie value, session) of a new session of ``user``."""
        secret = secrets.token_urlsafe(32)
        key, now = _digest(secret), time.time()
        with self.db.connect() as con:
            con.execute("INSERT INTO sessions (key, user_id, created, seen) VALUES (?, ?, ?, ?)",
                        (key, user.id, now, now))
        return f"{secret}.{self._sign(secret)}", Session(user, key, self._csrf(key))

    def _csrf(self, key: str) -> str:
        return self._sign("csrf:" + key)

    def session(self, cookie: str | None) -> Session | None:
        """The live session a cookie names; None for a forged, unknown or expired one."""
        if not cookie or "." not in cookie:
            return None
        secret, _, signature = cookie.rpartition(".")
        if not same_secret(signature, self._sign(secret)):
            return None
        key, now = _digest(secret), time.time()
        with self.db.connect() as con:
            row = con.execute("SELECT s.created, s.seen, u.* FROM sessions s JOIN users u "
                              "ON u.id = s.user_id WHERE s.key = ?", (key,)).fetchone()
            if row is None:
                return None
            if now - row["seen"] > SESSION_IDLE_S or now - row["created"] > SESSION_MAX_S \
                    or row["disabled"]:
                con.execute("DELETE FROM sessions WHERE key = ?", (key,))
                return None
            if now - row["seen"] > 60:
                con.execute("UPDATE sessions SET seen = ? WHERE key = ?", (now, key))
        return Session(_user(row), key, self._csrf(key))

    def close_session(self, session: Session) -> None:
        with self.db.connect() as con:
            con.execute("DELETE FROM sessions WHERE key = ?", (session.key,))

    def close_other_sessions(self, session: Session) -> None:
        with self.db.connect() as con:
            con.execute("DELETE FROM sessions WHERE user_id = ? AND key != ?",
                        (session.user.id, session.key))

    def token_user(self, token: str) -> User | None:
        if not token:
            return None
        with self.db.connect() as con:
            row = con.execute("SELECT u.* FROM tokens t JOIN users u ON u.id = t.user_id "
                              "WHERE t.key = ?", (_digest(token),)).fetchone()
            if row is None or row["disabled"]:
                return None
            con.execute("UPDATE tokens SET last_used = ? WHERE key = ?", (time.time(), _digest(token)))
        return _user(row)

    def forget_expired(self) -> None:
        """Drop expired sessions and old failure counts."""
        now = time.time()
        with self.db.connect() as con:
            con.execute("DELETE FROM sessions WHERE ? - seen > ? OR ? - created > ?",
                        (now, SESSION_IDLE_S, now, SESSION_MAX_S))
            con.execute("DELETE FROM failures WHERE ? - last > ?", (now, FORGET_FAILURES_S))
