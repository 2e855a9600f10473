"""A class at once (issue 43): students sign in to a real ``render serve`` on 127.0.0.1, upload
within a window and poll their job every 2 s until it is done, while one student keeps as many
jobs queued as the class limit lets them; one ``render work`` renders with stand-in models whose
swapper costs enough that a job takes longer than the gap between arrivals, so a queue forms.

Figures: HTTP answers by status (5xx must be none), the page's and the API's p95 and the
upload's while renders run, every job done and ``render verify``-ed, the order jobs started
(every student's first before anyone's second), the place and the wait the page showed while a
job was queued against when it started, and the server's RSS over the run. Everything stays on
127.0.0.1 and ends by itself: the students, their requests and the time are all bounded.

    python -m bench.classroom_load [--students 30] [--window 60] [--job-seconds 20]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

PASSWORD = "a long enough password"
ENV = {k: v for k, v in os.environ.items() if not k.startswith("RENDER_")}
GREEDY = "greedy"


def render(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "render", *args], env=ENV,
                            stdin=subprocess.DEVNULL, **kw)


def render_ok(*args: str) -> str:
    r = subprocess.run([sys.executable, "-m", "render", *args], env=ENV, capture_output=True,
                       text=True, stdin=subprocess.DEVNULL, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"render {' '.join(args[:2])}: {r.stderr.strip()}")
    return r.stdout


@dataclass
class Record:
    """What one student saw."""

    name: str
    answers: list[tuple[str, int, float]] = field(default_factory=list)   # (kind, status, s)
    jobs: list[str] = field(default_factory=list)
    shown: dict[str, tuple[int, int | None, float]] = field(default_factory=dict)  # first place
    started: dict[str, float] = field(default_factory=dict)                # first seen running
    signed_in: float = 0.0                                                 # since the start


class Student(threading.Thread):
    """Signs in, uploads at ``at`` seconds, polls every ``poll`` s until its jobs are done; the
    greedy one keeps submitting while the class limit lets it and the others still wait."""

    def __init__(self, url: str, name: str, one_time: str, at: float, files: tuple[Path, Path],
                 poll: float, t0: float, everyone_done: threading.Event) -> None:
        super().__init__(name=f"student-{name}", daemon=True)
        self.url, self.one_time, self.at, self.files, self.poll = url, one_time, at, files, poll
        self.t0, self.everyone_done = t0, everyone_done
        self.http = requests.Session()
        self.record = Record(name)
        self.error: str | None = None

    def call(self, kind: str, method: str, path: str, **kw) -> requests.Response:
        t = time.monotonic()
        r = self.http.request(method, self.url + path, timeout=60, **kw)
        self.record.answers.append((kind, r.status_code, time.monotonic() - t))
        return r

    def sign_in(self) -> None:
        r = self.call("sign-in", "POST", "/api/session",     # argon2: slow on purpose
                      json={"name": self.record.name, "password": self.one_time})
        csrf = r.json()["csrf"]
        self.http.headers["X-CSRF-Token"] = csrf
        r = self.call("sign-in", "POST", "/api/password",
                      json={"current": self.one_time, "new": PASSWORD})
        assert r.status_code == 200, r.text

    def submit(self) -> str | None:
        source, target = self.files
        with open(source, "rb") as s, open(target, "rb") as t:
            r = self.call("upload", "POST", "/api/jobs", data={"profile": "low", "consent": "yes"},
                          files={"source": (source.name, s), "target": (target.name, t)})
        if r.status_code == 429:
            return None
        assert r.status_code == 201, r.text
        self.record.jobs.append(r.json()["id"])
        return r.json()["id"]

    def run(self) -> None:
        try:
            self.sign_in()
            self.record.signed_in = time.monotonic() - self.t0
            time.sleep(max(0.0, self.at - (time.monotonic() - self.t0)))
            greedy = self.record.name == GREEDY
            self.submit()
            polls = 0
            while True:
                if greedy and not self.everyone_done.is_set():
                    while self.submit():
                        pass
                open_jobs = 0
                for job_id in self.record.jobs:
                    job = self.call("api", "GET", f"/api/jobs/{job_id}").json()
                    now = time.monotonic() - self.t0
                    if job["state"] == "queued" and job_id not in self.record.shown:
                        self.record.shown[job_id] = (job["queue_position"], job["wait_s"], now)
                    if job["state"] != "queued" and job_id not in self.record.started:
                        self.record.started[job_id] = now
                    open_jobs += job["state"] in ("queued", "running")
                polls += 1
                if polls % 5 == 0:
                    self.call("page", "GET", "/")
                if not open_jobs and (not greedy or self.everyone_done.is_set()):
                    return
                time.sleep(self.poll)
        except Exception as exc:  # noqa: BLE001 - reported with the figures
            self.error = f"{type(exc).__name__}: {exc}"


def rss_mb(pid: int) -> float:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    m = re.search(r"VmRSS:\s+(\d+) kB", text)
    return int(m.group(1)) / 1024 if m else 0.0


def p95(values: list[float]) -> float | None:
    return round(statistics.quantiles(values, n=20)[-1] * 1000, 1) if len(values) >= 2 else None


def run(root: Path, *, students: int, window: float, job_seconds: float, poll: float = 2.0,
        limit: int = 3, seed: int = 43) -> dict[str, Any]:
    """The class in ``root`` (made here); returns the figures."""
    from render import standins
    from render.standins import media

    models, state, spool, cache = root / "models", root / "state", root / "spool", root / "cache"
    clip_s = 2.0
    # a swap call's cost so that the clip's swaps take about job_seconds on two cores
    gflops = 200.0 * job_seconds / (clip_s * 25)
    standins.write_standins(models, gflops={"inswapper_128_fp16": gflops})
    face = media.make_source_image(root / "face.jpg").path
    clip = media.make_clip(root / "clip.mp4", width=320, height=240, seconds=clip_s).path
    keys = [f"state_dir={state}", f"spool_dir={spool}", f"lock_dir={root / 'locks'}",
            f"models.dir={models}", f"cache_dir={cache}"]
    names = [GREEDY] + [f"s{k:02d}" for k in range(1, students)]
    passwords = {}
    for name in names + ["teacher"]:
        out = render_ok("users", "add", name, "role=teacher" if name == "teacher" else
                        "role=student", *keys)
        passwords[name] = re.search(r"one-time password: (\S+)", out).group(1)
    log = open(root / "serve.log", "wb")
    server = render("--verbose", "serve", "host=127.0.0.1", "port=0", *keys, stdout=log,
                    stderr=subprocess.STDOUT)
    work_log = open(root / "work.log", "wb")
    worker = None
    try:
        url = None
        deadline = time.monotonic() + 60
        while url is None and time.monotonic() < deadline and server.poll() is None:
            m = re.search(r"classroom page at (http://127\.0\.0\.1:\d+)/",
                          (root / "serve.log").read_text(errors="replace"))
            url = m.group(1) if m else None
            time.sleep(0.05)
        if url is None:
            raise RuntimeError("render serve did not start: " + (root / "serve.log").read_text())
        teacher = Student(url, "teacher", passwords["teacher"], 0, (face, clip), poll, 0, threading.Event())
        teacher.sign_in()
        assert teacher.call("api", "PUT", "/api/settings",
                            json={"max_queued_jobs": limit}).status_code == 200
        worker = render("--verbose", "work", "follow=true", f"spool_dir={spool}",
                        f"lock_dir={root / 'locks'}", "lock.device=fake-gpu-0",
                        f"models.dir={models}", f"cache_dir={cache}", stdout=work_log,
                        stderr=subprocess.STDOUT)
        rng = random.Random(seed)
        t0 = time.monotonic()
        everyone = threading.Event()
        class_ = [Student(url, n, passwords[n], 0.0 if n == GREEDY else rng.uniform(0, window),
                          (face, clip), poll, t0, everyone) for n in names]
        for s in class_:
            s.start()
        rss = [(0.0, rss_mb(server.pid))]
        limit_s = window + (students + 2 * limit) * job_seconds * 3 + 120
        while any(s.is_alive() for s in class_) and time.monotonic() - t0 < limit_s:
            if all(not s.is_alive() for s in class_[1:]):
                everyone.set()
            rss.append((round(time.monotonic() - t0, 1), rss_mb(server.pid)))
            time.sleep(poll)
        everyone.set()
        for s in class_:
            s.join(timeout=max(1.0, limit_s - (time.monotonic() - t0)))
        took = time.monotonic() - t0
    finally:
        for proc in (worker, server):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        log.close()
        work_log.close()
    return figures(class_, spool, rss, took, students=students, window=window, poll=poll)


def figures(class_: list[Student], spool: Path, rss: list[tuple[float, float]], took: float,
            **setup: Any) -> dict[str, Any]:
    answers = [a for s in class_ for a in s.record.answers]
    statuses: dict[str, int] = {}
    for _, status, _ in answers:
        statuses[str(status)] = statuses.get(str(status), 0) + 1
    results = {p.stem: json.loads(p.read_text()) for p in (spool / "results").glob("*.json")}
    owner = {job: s.record.name for s in class_ for job in s.record.jobs}
    starts = sorted((r.get("started") or "", job) for job, r in results.items() if job in owner)
    order = [owner[job] for _, job in starts]
    seen: dict[str, int] = {}
    rounds = []
    for name in order:
        rounds.append(seen.get(name, 0))
        seen[name] = rounds[-1] + 1
    first_before_second = 1 not in rounds or \
        max(i for i, r in enumerate(rounds) if r == 0) < rounds.index(1)
    verified = 0
    for r in results.values():
        for report in r.get("reports") or []:
            v = subprocess.run([sys.executable, "-m", "render", "verify", report], env=ENV,
                               capture_output=True, text=True, timeout=120)
            verified += v.returncode == 0
    shown = [(s.record.shown[j], s.record.started.get(j)) for s in class_ for j in s.record.shown]
    signed = max(s.record.signed_in for s in class_)
    rendering = [m for t, m in rss if t > signed] or [rss[-1][1]]
    estimates = [(wait, started - at) for (_, wait, at), started in shown
                 if wait is not None and started is not None]
    return {
        **setup, "seconds": round(took, 1),
        "jobs": len(owner), "done": sum(r.get("state") == "done" for r in results.values()),
        "verified": verified, "errors": [s.error for s in class_ if s.error],
        "answers": statuses, "5xx": sum(n for k, n in statuses.items() if k.startswith("5")),
        "p95_ms": {kind: p95([t for k, st, t in answers if k == kind and st < 500])
                   for kind in ("api", "page", "upload", "sign-in")},
        "start_rounds": rounds, "first_before_second": first_before_second,
        "job_seconds": sorted(r.get("seconds") for r in results.values() if r.get("seconds")),
        "places_shown": sum(1 for (place, _, _), _ in shown if place),
        "estimates": [(round(w), round(a)) for w, a in estimates],
        "rss_mb": {"start": round(rss[0][1]), "peak": round(max(m for _, m in rss)),
                   "after sign-in: min": round(min(rendering)),
                   "after sign-in: max": round(max(rendering)), "end": round(rss[-1][1])},
        "signed_in_s": round(signed, 1),
    }


def report(fig: dict[str, Any]) -> str:
    est = fig["estimates"]
    err = [abs(w - a) for w, a in est]
    lines = [
        f"class at once: {fig['students']} students, uploads over {fig['window']:g} s, polls every "
        f"{fig['poll']:g} s, one worker; {fig['seconds']:g} s in all",
        f"  jobs {fig['jobs']}, done {fig['done']}, verified {fig['verified']}; "
        f"job time median {statistics.median(fig['job_seconds']):g} s" if fig["job_seconds"] else
        f"  jobs {fig['jobs']}, done {fig['done']}",
        f"  answers {fig['answers']}; 5xx {fig['5xx']}; p95 ms {fig['p95_ms']}",
        f"  start order by round {''.join(str(min(r, 9)) for r in fig['start_rounds'])}: every "
        f"first before anyone's second: {fig['first_before_second']}",
        f"  waits shown while queued: {len(est)}, off by median "
        f"{statistics.median(err) if err else '-'} s (shown, actual: {est[:6]} ...)",
        f"  server RSS MB: {fig['rss_mb']} (everyone signed in by {fig['signed_in_s']:g} s)",
    ]
    if fig["errors"]:
        lines.append(f"  student errors: {fig['errors']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.classroom_load",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--window", type=float, default=60.0, help="uploads spread over (s)")
    parser.add_argument("--job-seconds", type=float, default=20.0, help="a job's render (about)")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="class-load-") as tmp:
        fig = run(Path(tmp), students=args.students, window=args.window,
                  job_seconds=args.job_seconds)
    print(report(fig))
    if args.json is not None:
        args.json.write_text(json.dumps(fig, indent=1))
    return 0 if not fig["5xx"] and fig["done"] == fig["jobs"] and not fig["errors"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
