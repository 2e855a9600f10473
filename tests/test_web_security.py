"""Security of the classroom, over a real server on 127.0.0.1: every API route needs a session or
a token; students see nothing of each other (404, as for what does not exist); no CSRF token, no
change; uploads over the limit stop while streaming and leave nothing (not even a framework temp
file); failed sign-ins are slowed; the database holds no password, one-time password or token;
a full disk refuses uploads and touches no finished output."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import requests

from render.standins import media as mf
from web_classroom import signed_in as student
from web_classroom import PASSWORD, Classroom, Client, Server, db_bytes


@pytest.fixture(scope="module")
def media(tmp_path_factory):
    d = tmp_path_factory.mktemp("secmedia")
    return SimpleNamespace(face=mf.make_source_image(d / "face.jpg").path,
                           clip=mf.make_clip(d / "clip.mp4", width=160, height=120, seconds=0.4).path)


@pytest.fixture(scope="module")
def room(tmp_path_factory, standin_models):
    return Classroom(tmp_path_factory.mktemp("secure"), standin_models)


@pytest.fixture(scope="module")
def server_tmp(tmp_path_factory):
    """The server's TMPDIR: nothing may be spooled there."""
    return tmp_path_factory.mktemp("server-tmp")


@pytest.fixture(scope="module")
def server(room, server_tmp):
    s = Server(room, TMPDIR=str(server_tmp))
    yield s
    assert s.stop() == 0, s.text()


@pytest.fixture(scope="module")
def teacher(room, server):
    return student(room, server, "tia", "teacher")


def nothing_kept(room: Classroom, before) -> None:
    assert room.incoming() == []
    assert (room.folders(), room.spool_jobs()) == before


def test_every_api_route_answers_401_without_a_session(room, server):
    from fastapi.routing import APIRoute

    from render.config import load_config
    from render.web.classroom import Classroom as Room
    from render.web.server import create_app

    app = create_app(Room(load_config({"state_dir": str(room.state)}), {}))
    routes = sorted((m, r.path) for r in app.routes if isinstance(r, APIRoute)
                    and r.path.startswith("/api/") for m in r.methods)
    assert len(routes) >= 16, routes
    real = Client(server.url)
    real.first_sign_in("ivy", room.add_user("ivy"))
    secret = real.http.cookies["render_session"].rpartition(".")[0]
    callers = {"nothing": ({}, {}),
               "a forged token": ({"Authorization": "Bearer rt_" + "A" * 43}, {}),
               "a forged cookie": ({}, {"render_session": secret + "." + "0" * 64}),
               "a cookie without signature": ({}, {"render_session": secret})}
    for method, path in routes:
        if (method, path) == ("POST", "/api/session"):      # the sign-in itself
            continue
        url = server.url + path.replace("{job_id}", "0badf00d").replace("{file_id}", "0" * 16)
        for who, (headers, cookies) in callers.items():
            r = requests.request(method, url, headers=headers, cookies=cookies, timeout=30)
            assert r.status_code == 401, (method, path, who, r.status_code, r.text)
    r = requests.post(server.url + "/api/session", json={"name": "ivy", "password": "wrong one"})
    assert r.status_code == 401 and "render_session" not in r.cookies
    # the pages send a visitor without a session to the sign-in page
    r = requests.get(server.url + "/student", allow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/"
    assert requests.get(server.url + "/", allow_redirects=False).headers["location"] == "/signin"


def test_a_student_gets_404_for_another_students_jobs_and_files(room, server, media):
    amy, ben = student(room, server, "amy"), student(room, server, "ben")
    job = ben.submit(media.face, media.clip).json()
    theirs = {"job": job["id"], "file": job["source"]["file"], "file2": job["target"]["file"]}
    for ids in (theirs, {"job": "0badf00d", "file": "0" * 16, "file2": "f" * 16}):
        for method, path in (("GET", f"/api/jobs/{ids['job']}"),
                             ("POST", f"/api/jobs/{ids['job']}/cancel"),
                             ("POST", f"/api/jobs/{ids['job']}/retry"),
                             ("DELETE", f"/api/jobs/{ids['job']}"),
                             ("GET", f"/api/jobs/{ids['job']}/output"),
                             ("GET", f"/api/jobs/{ids['job']}/report"),
                             ("GET", f"/api/files/{ids['file']}"),
                             ("GET", f"/api/files/{ids['file2']}")):
            r = amy.request(method, path)
            assert r.status_code == 404, (method, path, r.text)
            assert r.json()["detail"] in ("no such job", "no such file",
                                          "no such result (the job is not done)", "no such report")
    assert [j["id"] for j in amy.get("/api/jobs").json()] == []
    assert ben.get(f"/api/jobs/{job['id']}").json()["state"] == "queued"     # untouched
    assert ben.get(f"/api/files/{theirs['file']}").content == media.face.read_bytes()
    # ids that are paths or patterns find nothing either
    for bad in ("..", "%2e%2e", "*", "0badf00d0", "ZZZZZZZZ"):
        assert amy.get(f"/api/jobs/{bad}").status_code == 404, bad
    assert ben.delete(f"/api/jobs/{job['id']}").status_code == 204


def test_form_posts_without_the_csrf_token_are_refused(room, server, media):
    cal = student(room, server, "cal")
    before = (room.folders(), room.spool_jobs())
    r = cal.submit(media.face, media.clip, csrf=False)
    assert r.status_code == 403 and "CSRF" in r.json()["detail"]
    nothing_kept(room, before)
    r = cal.submit(media.face, media.clip, headers={"X-CSRF-Token": "not-the-token"})
    assert r.status_code == 403
    r = cal.submit(media.face, media.clip, headers={"Origin": "http://evil.example"})
    assert r.status_code == 403                     # the right token, from another site
    other = student(room, server, "cid")
    r = cal.submit(media.face, media.clip, headers={"X-CSRF-Token": other.csrf})
    assert r.status_code == 403                     # another session's token
    nothing_kept(room, before)
    job = cal.submit(media.face, media.clip).json()["id"]
    assert cal.post(f"/api/jobs/{job}/cancel", csrf=False).status_code == 403
    assert cal.delete(f"/api/jobs/{job}", csrf=False).status_code == 403
    assert cal.post("/api/password", json={"current": PASSWORD, "new": "x" * 12},
                    csrf=False).status_code == 403
    assert cal.get(f"/api/jobs/{job}").json()["state"] == "queued"
    assert cal.delete(f"/api/jobs/{job}").status_code == 204
    # the sign-in takes JSON only (a cross-site form cannot send it) and not from another site
    r = requests.post(server.url + "/api/session", data='{"name": "cal", "password": "%s"}' % PASSWORD,
                      headers={"Content-Type": "text/plain"})
    assert r.status_code == 422 and "render_session" not in r.cookies
    r = requests.post(server.url + "/api/session", json={"name": "cal", "password": PASSWORD},
                      headers={"Origin": "http://evil.example"})
    assert r.status_code == 403 and "render_session" not in r.cookies
    r = requests.post(server.url + "/api/session", json={"name": "cal", "password": PASSWORD})
    cookie = r.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/" in cookie


def _multipart_stream(boundary: str, target_bytes: int, face: bytes):
    yield (f"--{boundary}\r\nContent-Disposition: form-data; name=\"consent\"\r\n\r\nyes\r\n"
           f"--{boundary}\r\nContent-Disposition: form-data; name=\"source\"; filename=\"f.jpg\"\r\n"
           f"Content-Type: image/jpeg\r\n\r\n").encode()
    yield face
    yield (f"\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"target\"; "
           f"filename=\"big.mp4\"\r\nContent-Type: video/mp4\r\n\r\n").encode()
    chunk = os.urandom(64 * 1024)
    for _ in range(target_bytes // len(chunk)):
        yield chunk
    yield f"\r\n--{boundary}--\r\n".encode()


def test_an_oversized_upload_is_refused_while_streaming_and_nothing_is_kept(
        room, server, teacher, media, server_tmp, tmp_path):
    r = teacher.request("PUT", "/api/settings", json={"max_upload_mb": 1})
    assert r.status_code == 200
    dan = student(room, server, "dan")
    before = (room.folders(), room.spool_jobs())
    mib = 1024 * 1024
    try:
        big = tmp_path / "big.mp4"
        big.write_bytes(os.urandom(3 * mib))
        r = dan.submit(media.face, big)               # Content-Length says it at once
        assert r.status_code == 413, r.text
        assert "too large, the limit is 1.0 MiB per file" in r.json()["detail"]
        nothing_kept(room, before)

        middle = tmp_path / "middle.mp4"
        middle.write_bytes(os.urandom(mib + mib // 2))  # the body fits, the file does not
        r = dan.submit(media.face, middle)
        assert r.status_code == 413, r.text
        assert r.json()["detail"].startswith("target (middle.mp4) is larger than 1.0 MiB")
        nothing_kept(room, before)

        boundary = "b0und4ry"                         # chunked: no length announced at all
        r = dan.post("/api/jobs", data=_multipart_stream(boundary, 5 * mib, media.face.read_bytes()),
                     headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
        assert r.status_code == 413, r.text
        nothing_kept(room, before)
        assert list(server_tmp.iterdir()) == []       # and no framework spooled it to a temp file
        assert dan.submit(media.face, media.clip).status_code == 201   # a small one still goes in
    finally:
        teacher.request("PUT", "/api/settings", json={"max_upload_mb": 200})
    for job in dan.get("/api/jobs").json():
        assert dan.delete(f"/api/jobs/{job['id']}").status_code == 204


def test_wrong_passwords_five_times_then_the_account_is_slowed_down(room, server):
    one_time = room.add_user("gus")
    other = room.add_user("hal")
    client = Client(server.url)
    for i in range(5):
        r = client.sign_in("gus", f"guess number {i}")
        assert r.status_code == 401 and r.json()["detail"] == "wrong name or password"
    r = client.sign_in("gus", one_time)            # the right password, too soon
    assert r.status_code == 429, r.text
    assert int(r.headers["Retry-After"]) >= 25
    assert r.json()["detail"].startswith("too many failed sign-ins: try again in ")
    assert "render_session" not in client.http.cookies
    # the account is slowed, not the whole class (same address)
    assert Client(server.url).sign_in("hal", other).status_code == 200
    # a reset by the teacher lets the student in at once
    from conftest import run_cli

    r = run_cli("users", "reset", "gus", *room.keys)
    assert r.returncode == 0, r.stderr
    fresh = r.stdout.split("one-time password: ")[1].split()[0]
    assert Client(server.url).sign_in("gus", fresh).status_code == 200


def test_the_database_holds_no_plain_password_or_token(room, server):
    from conftest import run_cli

    one_time = room.add_user("kim")
    kim = Client(server.url).first_sign_in("kim", one_time, password="kim's own secret pw")
    token = kim.post("/api/tokens").json()["token"]
    r = run_cli("users", "token", "kim", *room.keys)
    cli_token = r.stdout.strip()
    data = db_bytes(room.state)
    assert b"$argon2id$" in data
    for secret in (one_time, "kim's own secret pw", PASSWORD, token, cli_token, kim.csrf,
                   kim.http.cookies["render_session"].rpartition(".")[0]):
        assert secret.encode() not in data, secret
    assert oct(os.stat(room.state / "classroom.db").st_mode & 0o777) == "0o600"
    assert oct(os.stat(room.state / "secret").st_mode & 0o777) == "0o600"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_nearly_full_disk_refuses_uploads_before_the_first_byte(room, media):
    s = Server(room, "min_free_mb=1073741824")        # a petabyte must stay free: never here
    try:
        jon = Client(s.url).first_sign_in("jon", room.add_user("jon"))
        before = (room.folders(), room.spool_jobs())
        r = jon.submit(media.face, media.clip)
        assert r.status_code == 507, r.text
        assert r.json()["detail"].startswith("the server's disk is full: the upload was refused")
        nothing_kept(room, before)
    finally:
        s.stop()


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None,
                    reason="mounting a small tmpfs needs root")
def test_a_disk_that_fills_during_the_upload_keeps_the_finished_outputs(tmp_path, standin_models,
                                                                         media):
    room = Classroom(tmp_path / "room", standin_models)
    room.state.mkdir(parents=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(room.state)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        done = room.state / "files" / "earlier" / "out"
        done.mkdir(parents=True)
        (done / "result.mp4").write_bytes(media.clip.read_bytes())
        kept = sha(done / "result.mp4")
        s = Server(room, "min_free_mb=0")
        try:
            kay = Client(s.url).first_sign_in("kay", room.add_user("kay"))
            big = tmp_path / "big.mp4"
            big.write_bytes(os.urandom(6 * 1024 * 1024))   # more than the disk, less than the limit
            r = kay.submit(media.face, big)                # announced: refused before any byte
            assert r.status_code == 507, r.text
            assert r.json()["detail"].startswith("the server's disk is full")
            boundary = "b0und4ry"                          # not announced: ENOSPC while writing
            r = kay.post("/api/jobs", headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
                         data=_multipart_stream(boundary, 6 * 1024 * 1024, media.face.read_bytes()))
            assert r.status_code == 507, r.text
            assert r.json()["detail"].startswith("the server's disk is full: the upload was refused "
                                                 "and nothing was kept; finished results are safe")
            assert room.incoming() == [] and room.spool_jobs() == {}
            assert sha(done / "result.mp4") == kept
            assert "the disk filled up while it was written" in s.text()
            assert "Traceback" not in s.text()
            assert kay.submit(media.face, media.clip).status_code == 201   # room again after it
        finally:
            s.stop()
    finally:
        subprocess.run(["umount", "-l", str(room.state)], check=False)


# -- malformed credentials, error answers, full disks, proxies -----------------------------------------
HEADER_NAMES = ("content-security-policy", "x-content-type-options", "x-frame-options",
                "referrer-policy")


def has_security_headers(r: requests.Response) -> bool:
    return all(name in r.headers for name in HEADER_NAMES)


def test_malformed_credentials_are_401_or_403_never_500(room, server):
    real = student(room, server, "mal")
    secret = real.http.cookies["render_session"].rpartition(".")[0]
    url = server.url + "/api/jobs"
    # cookies: header bytes as a client may send them (the server reads them as latin-1)
    for cookie in (b"render_session=" + secret.encode() + b"." + b"\xc3\xa9" * 32,
                   b"render_session=" + secret.encode() + b".\xff",
                   b"render_session=\xe9.\xe9",
                   b"render_session=.",
                   b"render_session=" + secret.encode() + b"." + b"0" * 5000,
                   b"render_session=" + secret.encode() + b"." + b"z" * 64,
                   b"render_session=\"" + secret.encode() + b".\xc3\xa9\""):
        r = requests.get(url, headers={"Cookie": cookie}, timeout=30)
        assert r.status_code == 401, (cookie, r.status_code, r.text)
        assert r.json()["detail"] == "not signed in"
    for auth in (b"Bearer \xff\xfe", b"Bearer rt_\xc3\xa9", b"Bearer " + b"\xe9" * 4000,
                 b"\xe9\xe9 token", b"Bearer"):
        r = requests.get(url, headers={"Authorization": auth}, timeout=30)
        assert r.status_code == 401, (auth, r.status_code, r.text)
    # the right cookie with a CSRF token, or an Origin, that is no such thing
    for headers in ({"X-CSRF-Token": b"\xc3\xa9" * 32}, {"X-CSRF-Token": b"\xff"},
                    {"X-CSRF-Token": real.csrf.encode() + b"\xe9"},
                    {"X-CSRF-Token": b"0" * 5000},
                    {"Origin": b"http://[::1"}, {"Origin": b"http://\xe9\xe9"}):
        r = real.post("/api/tokens", headers=headers)
        assert r.status_code == 403, (headers, r.status_code, r.text)
    r = requests.post(server.url + "/api/session", json={"name": "mal", "password": PASSWORD},
                      headers={"Origin": b"http://[::1"})
    assert r.status_code == 403 and "render_session" not in r.cookies
    # JSON may carry text no password or name can be (lone surrogates)
    for body in ('{"name": "mal", "password": "\\ud800 pw"}',
                 '{"name": "\\udfff", "password": "something long"}'):
        r = requests.post(server.url + "/api/session", data=body,
                          headers={"Content-Type": "application/json"}, timeout=30)
        assert r.status_code in (401, 422), (body, r.status_code, r.text)
    r = real.post("/api/password", data='{"current": "\\ud800", "new": "\\ud800 long enough"}',
                  headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    assert real.get("/api/jobs").status_code == 200          # the real session still works
    assert "Traceback" not in server.text()


def test_every_answer_carries_the_security_headers_even_a_server_error(tmp_path, standin_models):
    room = Classroom(tmp_path / "room", standin_models)
    room.root.mkdir()
    s = Server(room)
    try:
        eve = Client(s.url).first_sign_in("eve", room.add_user("eve"))
        answers = {"page": requests.get(s.url + "/signin"),
                   "asset": requests.get(s.url + "/static/style.css"),
                   "redirect": requests.get(s.url + "/", allow_redirects=False),
                   "200": eve.get("/api/jobs"),
                   "401": requests.get(s.url + "/api/jobs"),
                   "403": eve.post("/api/tokens", csrf=False),
                   "404": eve.get("/api/jobs/0badf00d"),
                   "404 route": requests.get(s.url + "/no/such/page"),
                   "405": requests.put(s.url + "/signin"),
                   "422": eve.post("/api/password", json={"current": 1})}
        for what, r in answers.items():
            assert has_security_headers(r), (what, r.status_code, dict(r.headers))
        # a fault of the server itself (its database destroyed under it) is a 500 with them too
        for p in room.state.glob("classroom.db*"):
            p.unlink()
        (room.state / "classroom.db").write_bytes(b"this is no database\n" * 512)
        r = eve.get("/api/jobs")
        assert r.status_code == 500, r.text
        assert has_security_headers(r), dict(r.headers)
        assert r.headers["cache-control"] == "no-store"
        assert r.json()["detail"].startswith("internal server error")
    finally:
        s.stop()
    assert "file is not a database" in s.text()        # the log has the cause


def _form(boundary: str, source: bytes, target: bytes, chunk: int = 4096):
    """A multipart form as a generator: sent chunked, with no length announced."""
    yield (f"--{boundary}\r\nContent-Disposition: form-data; name=\"consent\"\r\n\r\nyes\r\n"
           f"--{boundary}\r\nContent-Disposition: form-data; name=\"source\"; filename=\"f.jpg\"\r\n"
           f"Content-Type: image/jpeg\r\n\r\n").encode()
    yield source
    yield (f"\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"target\"; "
           f"filename=\"clip.mp4\"\r\nContent-Type: video/mp4\r\n\r\n").encode()
    for i in range(0, len(target), chunk):
        yield target[i:i + chunk]
    yield f"\r\n--{boundary}--\r\n".encode()


PAGE = 4096


def _pages(n: int) -> int:
    return -(-n // PAGE)


def _leave_free(folder: Path, filler: Path, pages: int) -> None:
    """Grow ``filler`` until exactly ``pages`` pages of the tmpfs at ``folder`` are free."""
    st = os.statvfs(folder)
    free = st.f_bavail * st.f_frsize
    size = filler.stat().st_size if filler.exists() else 0
    with open(filler, "r+b" if filler.exists() else "wb") as f:
        f.truncate(size + free - pages * PAGE)
        f.seek(size)
        f.write(b"\1" * (free - pages * PAGE))    # written: a sparse tail takes no pages
    st = os.statvfs(folder)
    assert st.f_bavail * st.f_frsize == pages * PAGE


@pytest.fixture
def small_disk(tmp_path, standin_models):
    """A classroom whose state folder is a 16 MiB tmpfs (root only)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    room = Classroom(tmp_path / "room", standin_models)
    room.state.mkdir(parents=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(room.state)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield room
    finally:
        subprocess.run(["umount", "-l", str(room.state)], check=False)


def test_a_full_disk_under_a_large_upload_is_507_at_every_margin(small_disk, media, tmp_path):
    """An upload larger than SQLite's "nearly full" margin (1 MiB), whose files fit but whose
    records do not: removing the upload's folder before asking whether the disk was full freed
    its space, so SQLite's "disk I/O error" read as a fault of the server (500)."""
    room = small_disk
    filler = room.state / "filler"
    clip = mf.make_clip(tmp_path / "big.mp4", width=1280, height=720, seconds=3.0, crf=0,
                        preset="ultrafast").path
    assert clip.stat().st_size > 1.5 * 1024 * 1024, clip.stat().st_size
    upload = _pages(media.face.stat().st_size) + _pages(clip.stat().st_size)
    s = Server(room, "min_free_mb=0")
    try:
        kay = Client(s.url).first_sign_in("kay", room.add_user("kay"))
        for slack in range(1, 10):
            _leave_free(room.state, filler, upload + slack)
            r = kay.submit(media.face, clip)
            assert r.status_code == 507, (slack, r.status_code, r.text)
            assert room.incoming() == [] and room.folders() == [] and room.spool_jobs() == {}
        filler.unlink()
        assert kay.submit(media.face, clip).status_code == 201
    finally:
        s.stop()


def test_a_full_disk_at_any_step_of_an_upload_is_507_and_keeps_nothing(small_disk, media):
    """The disk fills while the file is written, when the database records it, or is full
    before the request: 507 each time, and no part, folder, job or database row is kept."""
    import sqlite3

    room = small_disk
    filler = room.state / "filler"
    face, clip = media.face.read_bytes(), media.clip.read_bytes()
    upload = _pages(len(face)) + _pages(len(clip))
    s = Server(room, "min_free_mb=0")
    try:
        kay = Client(s.url).first_sign_in("kay", room.add_user("kay"))

        def refused(r: requests.Response, step: str) -> None:
            assert r.status_code == 507, (step, r.status_code, r.text)
            assert r.json()["detail"].startswith("the server's disk is full"), step
            assert has_security_headers(r), step
            assert room.incoming() == [] and room.folders() == [], step
            assert room.spool_jobs() == {}, step

        # full before the request: even reading the session needs a little room (SQLite's
        # shared-memory file)
        _leave_free(room.state, filler, 0)
        refused(kay.get("/api/jobs"), "full")
        refused(kay.submit(media.face, media.clip), "full")
        # the file write: a body of unknown length that does not fit
        _leave_free(room.state, filler, upload - 1)
        refused(kay.post("/api/jobs", data=_form("b0und4ry", face, clip),
                         headers={"Content-Type": "multipart/form-data; boundary=b0und4ry"}),
                "write")
        # the database: the files fit exactly, their records do not (no room for SQLite's
        # shared memory, then none for its log): at every margin of 1 to 9 pages (3-32 KiB over
        # the upload was a 500: the upload's own space, freed before the check, hid the full disk)
        for slack in range(1, 10):
            _leave_free(room.state, filler, upload + slack)
            refused(kay.submit(media.face, media.clip), f"database, {slack} pages left")
        filler.unlink()
        with sqlite3.connect(room.state / "classroom.db") as con:
            assert con.execute("SELECT COUNT(*) FROM files").fetchone()[0] == 0
        r = kay.submit(media.face, media.clip)                # room again after it
        assert r.status_code == 201, r.text
        assert len(room.folders()) == 1
    finally:
        s.stop()
    assert "Traceback" not in s.text(), s.text()


def test_cookies_are_secure_behind_a_trusted_proxy_only(room, server):
    from conftest import run_cli

    one_time = room.add_user("pam")
    Client(server.url).first_sign_in("pam", one_time)

    def cookie(url: str, **headers: str) -> str:
        r = requests.post(url + "/api/session", json={"name": "pam", "password": PASSWORD},
                          headers=headers, timeout=30)
        assert r.status_code == 200, r.text
        return r.headers["set-cookie"].lower()

    https = {"X-Forwarded-Proto": "https"}
    # no proxy trusted (the default): the header is anyone's word, and ignored
    assert "secure" not in cookie(server.url, **https)
    trusted = Server(room, "trusted_proxies=127.0.0.1")
    try:
        assert "secure" in cookie(trusted.url, **https).split("; ")
        assert "secure" not in cookie(trusted.url)                      # plain http
        assert "secure" not in cookie(trusted.url, **{"X-Forwarded-Proto": "http"})
        # the forwarded client address counts for the sign-in limits and the log
        r = requests.post(trusted.url + "/api/session", json={"name": "pam", "password": "wrong!!!"},
                          headers={"X-Forwarded-For": "203.0.113.7", **https}, timeout=30)
        assert r.status_code == 401
        assert "failed sign-in for 'pam' from 203.0.113.7" in trusted.text()
    finally:
        trusted.stop()
    other = Server(room, "trusted_proxies=10.0.0.0/8,192.0.2.1")   # not this address
    try:
        assert "secure" not in cookie(other.url, **https)
    finally:
        other.stop()
    r = run_cli("serve", "trusted_proxies=10.0.0.300", "port=0", *room.keys, timeout=60)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.strip().splitlines() == [
        "render: error: trusted_proxies=10.0.0.300: expected IP addresses or networks (10.0.0.1, "
        "10.0.0.0/8, ::1), comma separated"], r.stderr
