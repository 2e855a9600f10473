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
