"""A real classroom for the tests: ``render serve`` on 127.0.0.1 (a free port the server picks),
``render users`` for the accounts, ``render work`` workers on a fake GPU, and a client that signs
in as a person does (one-time password, then a password of their own) and talks to the JSON API."""
from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterable

import requests

from conftest import cli_env, model_args, run_cli

PASSWORD = "a long enough password"
FAKE_GPU = "fake-gpu-0"


class Classroom:
    """The folders and keys of one classroom: state, spool, locks, models, cache."""

    def __init__(self, root: Path, models: Path, signing: Iterable[str] = ()) -> None:
        self.root = Path(root)
        self.models = models
        self.signing = list(signing)
        self.state = self.root / "state"
        self.spool = self.root / "spool"
        self.locks = self.root / "locks"
        self.cache = self.root / "cache"

    @property
    def keys(self) -> list[str]:
        """What the server and the users command are given."""
        return [f"state_dir={self.state}", f"spool_dir={self.spool}", f"lock_dir={self.locks}",
                f"models.dir={self.models}", f"cache_dir={self.cache}"]

    def render_keys(self, *extra: str) -> list[str]:
        """What a worker and a CLI render of the same inputs are given (bytes compared)."""
        return [f"lock_dir={self.locks}", f"lock.device={FAKE_GPU}", "execution.threads=1",
                "segment.seconds=0.5", *model_args(self.models, self.cache), *self.signing, *extra]

    def add_user(self, name: str, role: str = "student") -> str:
        r = run_cli("users", "add", name, f"role={role}", *self.keys)
        assert r.returncode == 0, r.stderr
        m = re.search(r"one-time password: (\S+)", r.stdout)
        assert m, r.stdout
        return m.group(1)

    def incoming(self) -> list[Path]:
        d = self.state / "incoming"
        return sorted(d.iterdir()) if d.is_dir() else []

    def folders(self) -> list[Path]:
        d = self.state / "files"
        return sorted(d.iterdir()) if d.is_dir() else []

    def spool_jobs(self) -> dict[str, str]:
        return {p.stem: state for state in ("queued", "running", "done", "failed", "cancelled")
                for p in (self.spool / state).glob("*.yaml")}


class Server:
    """``python -m render serve`` as a subprocess; its log goes to a file (read for the URL)."""

    def __init__(self, classroom: Classroom, *extra: str, log: Path | None = None,
                 **env: str) -> None:
        self.log = log or classroom.root / f"serve-{time.monotonic_ns()}.log"
        self._log = open(self.log, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "render", "--verbose", "serve", "host=127.0.0.1", "port=0",
             *classroom.keys, *extra],
            env=cli_env(**env), stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.url = self._wait_for_url()

    def _wait_for_url(self, timeout: float = 60.0) -> str:
        deadline = time.time() + timeout
        while time.time() < deadline:
            text = self.log.read_text(errors="replace")
            m = re.search(r"classroom page at (http://127\.0\.0\.1:\d+)/", text)
            if m and "Application startup complete" in text:
                return m.group(1)
            if self.proc.poll() is not None:
                raise AssertionError(f"render serve exited {self.proc.returncode}:\n{text}")
            time.sleep(0.05)
        self.stop()
        raise AssertionError(f"render serve did not start:\n{self.log.read_text(errors='replace')}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()
        return self.proc.returncode

    def text(self) -> str:
        return self.log.read_text(errors="replace")


class Client:
    """One person at the JSON API: a cookie session (with its CSRF token) or a script token."""

    def __init__(self, url: str, token: str | None = None) -> None:
        self.url = url
        self.http = requests.Session()
        self.csrf: str | None = None
        if token:
            self.http.headers["Authorization"] = f"Bearer {token}"

    def request(self, method: str, path: str, *, csrf: bool = True, **kw) -> requests.Response:
        headers = dict(kw.pop("headers", {}) or {})
        if csrf and self.csrf and method not in ("GET", "HEAD"):
            headers.setdefault("X-CSRF-Token", self.csrf)
        kw.setdefault("timeout", 120)
        return self.http.request(method, self.url + path, headers=headers, **kw)

    def get(self, path: str, **kw) -> requests.Response:
        return self.request("GET", path, **kw)

    def post(self, path: str, **kw) -> requests.Response:
        return self.request("POST", path, **kw)

    def delete(self, path: str, **kw) -> requests.Response:
        return self.request("DELETE", path, **kw)

    def sign_in(self, name: str, password: str) -> requests.Response:
        r = self.post("/api/session", json={"name": name, "password": password}, csrf=False)
        if r.status_code == 200:
            self.csrf = r.json()["csrf"]
        return r

    def first_sign_in(self, name: str, one_time: str, password: str = PASSWORD) -> "Client":
        """Sign in with the one-time password and replace it, as the page makes one do."""
        r = self.sign_in(name, one_time)
        assert r.status_code == 200 and r.json()["must_change"], r.text
        assert self.get("/api/jobs").status_code == 403       # nothing before the change
        r = self.post("/api/password", json={"current": one_time, "new": password})
        assert r.status_code == 200 and not r.json()["must_change"], r.text
        return self

    def submit(self, source: Path, target: Path, *, profile: str = "low", consent: bool = True,
               names: tuple[str, str] | None = None, extras: tuple[str, ...] = (),
               **kw) -> requests.Response:
        names = names or (Path(source).name, Path(target).name)
        with open(source, "rb") as s, open(target, "rb") as t:
            data = {"profile": profile, **{name: "yes" for name in extras}}
            if consent:
                data["consent"] = "yes"
            return self.post("/api/jobs", data=data,
                             files={"source": (names[0], s), "target": (names[1], t)}, **kw)

    def wait(self, job_id: str, states: tuple[str, ...] = ("done", "failed", "cancelled"),
             timeout: float = 180.0) -> dict:
        deadline = time.time() + timeout
        seen = None
        while time.time() < deadline:
            r = self.get(f"/api/jobs/{job_id}")
            assert r.status_code == 200, r.text
            seen = r.json()
            if seen["state"] in states:
                return seen
            time.sleep(0.2)
        raise AssertionError(f"job {job_id} did not reach {states}: {seen}")


def signed_in(room: Classroom, server: Server, name: str, role: str = "student") -> Client:
    """A new account ``name`` in ``room``, signed in to ``server`` with its password changed."""
    return Client(server.url).first_sign_in(name, room.add_user(name, role))


def start_worker(classroom: Classroom, *extra: str, log: Path | None = None) -> subprocess.Popen:
    """``render work follow=true`` on the classroom's spool and fake GPU."""
    log = log or classroom.root / f"work-{time.monotonic_ns()}.log"
    out = open(log, "wb")
    try:
        return subprocess.Popen([sys.executable, "-m", "render", "--verbose", "work", "follow=true",
                                 f"spool_dir={classroom.spool}", *classroom.render_keys(*extra)],
                                env=cli_env(), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    finally:
        out.close()


def stop_worker(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def db_bytes(state: Path) -> bytes:
    """The classroom database with its WAL files, as bytes."""
    return b"".join(p.read_bytes() for p in sorted(state.glob("classroom.db*")) if p.is_file())
