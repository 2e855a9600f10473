"""The classroom through its JSON API, over a real server: ``render serve`` on 127.0.0.1 (a port
it picks), real ``render work`` workers on a fake GPU, the stand-in models, ``render users`` for
the accounts. What a student gets back is compared byte for byte with a CLI render of the same
inputs (same output name: the C2PA manifest's title is the file name; same signing identity)."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import cv2
import pytest
import yaml

from render.standins import media as mf
from conftest import run_cli
from web_classroom import signed_in as student
from web_classroom import FAKE_GPU, PASSWORD, Classroom, Client, Server, start_worker, stop_worker


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="module")
def media(tmp_path_factory):
    d = tmp_path_factory.mktemp("webmedia")
    blank = d / "wall.jpg"
    cv2.imwrite(str(blank), mf.background(480, 480, 0))
    junk = d / "notes.mp4"
    junk.write_bytes(b"this is not a video, only its name says so\n" * 200)
    return SimpleNamespace(
        face=mf.make_source_image(d / "face.jpg").path,
        clip=mf.make_clip(d / "clip.mp4", width=320, height=240, seconds=1.0).path,
        long=mf.make_clip(d / "long.mp4", width=160, height=120, seconds=3.0).path,
        blank=blank, junk=junk)


@pytest.fixture(scope="module")
def room(tmp_path_factory, standin_models, signing):
    """A classroom whose models are the stand-ins plus the extras' (the x2 frame enhancer and
    the background remover), so the page offers both."""
    from render.standins.frame_enhancers import write_frame_enhancers
    from render.standins.matting import write_matting

    root = tmp_path_factory.mktemp("classroom")
    models = root / "models"
    shutil.copytree(standin_models, models)
    write_frame_enhancers(models, {"real_esrgan_x2": {"scale": 2, "tile": 64, "context": 4}})
    write_matting(models, "modnet", size=64, mean=(0.5,) * 3, std=(0.5,) * 3)
    return Classroom(root, models, signing)


@pytest.fixture(scope="module")
def server(room):
    s = Server(room)
    yield s
    assert s.stop() == 0, s.text()


@pytest.fixture(scope="module")
def teacher(room, server):
    return student(room, server, "tess", "teacher")


def settings(teacher: Client, **values) -> dict:
    r = teacher.request("PUT", "/api/settings", json=values)
    assert r.status_code == 200, r.text
    return r.json()


def test_a_student_job_from_upload_to_download_equals_a_cli_render(room, server, teacher, media,
                                                                   tmp_path):
    ann = student(room, server, "ann")
    r = ann.submit(media.face, media.clip, names=("me.jpg", "holiday clip.mp4"))
    assert r.status_code == 201, r.text
    job = r.json()
    assert job["state"] == "queued" and job["queue_position"] == 1 and job["consent"] is True
    assert job["owner"] == "ann" and job["target"]["name"] == "holiday clip.mp4"
    # stored by id and role, never by the uploaded name
    (folder,) = room.folders()
    assert sorted(p.name for p in folder.iterdir()) == ["out", "source.jpg", "target.mp4"]
    assert room.incoming() == []

    worker = start_worker(room)
    try:
        phases = set()
        deadline = time.time() + 180
        while time.time() < deadline:
            seen = ann.get(f"/api/jobs/{job['id']}").json()
            phases.add(seen["phase"])
            if seen["progress"]:
                assert seen["progress"]["segments_total"] >= 2
            if seen["state"] in ("done", "failed"):
                break
            time.sleep(0.1)
        assert seen["state"] == "done", seen
    finally:
        stop_worker(worker)
    assert seen["output"] == f"/api/jobs/{job['id']}/output" and seen["expires"]

    got = ann.get(seen["output"])
    assert got.status_code == 200
    assert 'filename="holiday_clip-swapped.mp4"' in got.headers["content-disposition"]
    cli_out = tmp_path / "cli" / "result.mp4"
    r = run_cli("profile=low", f"source={media.face}", f"target={media.clip}", f"output={cli_out}",
                *room.render_keys())
    assert r.returncode == 0, r.stderr
    assert sha(got.content) == sha(cli_out.read_bytes())

    report = ann.get(seen["report"]).json()
    assert report["status"] == "done" and report["synthetic"] is True
    assert report["marks"]["enabled"] is True and report["marks"]["c2pa"]["signed"] is True
    assert report["output"]["sha256"] == sha(got.content)
    assert report["job"]["owner"] == "ann" and report["job"]["submitted_by"] == "ann"
    assert report["job"]["consent"]["given"] is True
    assert report["job"]["consent"]["statement"] == "I have the consent of the people in these files"
    assert report["job"]["job"] == job["id"]
    assert report["lock"]["device"] == FAKE_GPU

    assert ann.get(f"/api/files/{job['source']['file']}").content == media.face.read_bytes()
    listing = teacher.get("/api/jobs").json()
    assert [j["owner"] for j in listing if j["id"] == job["id"]] == ["ann"]

    r = ann.delete(f"/api/jobs/{job['id']}")
    assert r.status_code == 204, r.text
    assert not folder.exists() and job["id"] not in room.spool_jobs()
    assert ann.get(f"/api/files/{job['source']['file']}").status_code == 404
    assert ann.get("/api/jobs").json() == []


def test_bad_uploads_get_one_clear_message_and_leave_nothing(room, server, teacher, media):
    bob = student(room, server, "bob")
    before = (room.folders(), room.spool_jobs())
    settings(teacher, max_clip_seconds=2)
    cases = [
        (dict(source=media.face, target=media.junk), 422, "the target 'notes.mp4' is not a video or image"),
        (dict(source=media.junk, target=media.clip), 422, "the source 'notes.mp4' is not an image"),
        (dict(source=media.clip, target=media.clip), 422, "is a video: upload a photo of the face"),
        (dict(source=media.blank, target=media.clip), 422, "no face found in the source 'wall.jpg'"),
        (dict(source=media.face, target=media.long), 422,
         "the target 'long.mp4' is 3.0 s long: the class limit is 2 s"),
        (dict(source=media.face, target=media.clip, consent=False), 422, "tick the consent box"),
        (dict(source=media.face, target=media.clip, profile="high"), 422,
         "profile 'high' is not allowed in this class"),
    ]
    try:
        for kw, status, words in cases:
            r = bob.submit(**kw)
            assert r.status_code == status, (kw, r.text)
            detail = r.json()["detail"]
            assert words in detail and "\n" not in detail, (kw, detail)
            assert str(room.root) not in detail           # no server paths in the message
            assert room.incoming() == [], kw
            assert (room.folders(), room.spool_jobs()) == before, kw
        settings(teacher, max_queued_jobs=1)
        first = bob.submit(media.face, media.clip)
        assert first.status_code == 201, first.text
        r = bob.submit(media.face, media.clip)
        assert r.status_code == 429
        assert r.json()["detail"].startswith("you have 1 job queued or running: the class limit is 1")
        assert bob.delete(f"/api/jobs/{first.json()['id']}").status_code == 204
        assert (room.folders(), room.spool_jobs()) == before and room.incoming() == []
    finally:
        settings(teacher, max_clip_seconds=60, max_queued_jobs=2)


def _lock_interval(report: dict) -> tuple[float, float]:
    end = datetime.fromisoformat(report["timing"]["ended"]).timestamp()
    return report["lock"]["acquired_ts"], end


def test_two_students_at_once_on_one_gpu_render_one_after_the_other(room, server, teacher, media):
    cleo, dan = student(room, server, "cleo"), student(room, server, "dan")
    answers: dict[str, object] = {}

    def submit(client: Client, name: str) -> None:
        answers[name] = client.submit(media.face, media.clip)

    threads = [threading.Thread(target=submit, args=(c, n)) for c, n in ((cleo, "cleo"), (dan, "dan"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert all(answers[n].status_code == 201 for n in ("cleo", "dan")), answers
    ids = {n: answers[n].json()["id"] for n in ("cleo", "dan")}
    positions = sorted(answers[n].json()["queue_position"] for n in ids)
    assert positions in ([1, 2], [1, 1])                 # both were queued, one after the other

    # two workers, one device lock slot: the lock decides who renders
    workers = [start_worker(room, "lock.slots=1") for _ in range(2)]
    phases: dict[str, set] = {n: set() for n in ids}
    holders = set()
    try:
        deadline = time.time() + 240
        states = {}
        while time.time() < deadline:
            for name, client in (("cleo", cleo), ("dan", dan)):
                seen = client.get(f"/api/jobs/{ids[name]}").json()
                phases[name].add(seen["phase"])
                if seen["phase"] == "waiting":
                    assert f"waiting for {FAKE_GPU}: held by job" in seen["waiting_for"], seen
                states[name] = seen["state"]
            status = teacher.get("/api/status").json()
            holders.update(d["owner"] for d in status["devices"] if d["held"])
            if all(s in ("done", "failed") for s in states.values()):
                break
            time.sleep(0.1)
        assert states == {"cleo": "done", "dan": "done"}, (states, phases)
    finally:
        for w in workers:
            stop_worker(w)
    assert any("waiting" in p for p in phases.values()), phases
    assert holders <= {"cleo", "dan"} and holders, holders
    reports = {n: c.get(f"/api/jobs/{ids[n]}/report").json() for n, c in (("cleo", cleo), ("dan", dan))}
    a, b = (_lock_interval(reports[n]) for n in ("cleo", "dan"))
    assert a[1] <= b[0] or b[1] <= a[0], f"the lock holds overlap: {a} {b}"
    assert reports["cleo"]["job"]["owner"] == "cleo" and reports["dan"]["job"]["owner"] == "dan"
    outputs = {n: c.get(f"/api/jobs/{ids[n]}/output").content for n, c in (("cleo", cleo), ("dan", dan))}
    assert sha(outputs["cleo"]) == sha(outputs["dan"])   # same inputs, same bytes


def test_the_teacher_sees_every_job_cancels_retries_and_sets_the_class(room, server, teacher, media):
    eve = student(room, server, "eve")
    job = eve.submit(media.face, media.clip).json()
    every = teacher.get("/api/jobs").json()
    assert job["id"] in [j["id"] for j in every]
    assert eve.get("/api/status").status_code == 403
    assert eve.post(f"/api/jobs/{job['id']}/retry").status_code == 403
    assert eve.request("PUT", "/api/settings", json={"retention_days": 1}).status_code == 403

    status = teacher.get("/api/status").json()
    assert [q["id"] for q in status["queue"]] == [job["id"]] and status["queue"][0]["owner"] == "eve"
    assert status["disk"]["free"] > 0 and status["disk"]["by_student"].get("eve", 0) > 0

    r = teacher.post(f"/api/jobs/{job['id']}/cancel")
    assert r.status_code == 200 and r.json()["state"] == "cancelled"
    assert eve.get(f"/api/jobs/{job['id']}").json()["error"] == "cancelled before it started"
    r = teacher.post(f"/api/jobs/{job['id']}/retry")
    assert r.status_code == 200 and r.json()["state"] == "queued"
    assert teacher.delete(f"/api/jobs/{job['id']}").status_code == 204
    assert eve.get(f"/api/jobs/{job['id']}").status_code == 404

    r = teacher.request("PUT", "/api/settings", json={"max_upload_mb": 0})
    assert r.status_code == 422 and r.json()["detail"] == \
        "max_upload_mb: expected a number from 1 to 100000, got 0"
    r = teacher.request("PUT", "/api/settings", json={"allowed_profiles": ["huge"]})
    assert r.status_code == 422 and r.json()["detail"].startswith("allowed_profiles: no profile huge")
    new = settings(teacher, allowed_profiles=["low", "moderate"], retention_days=3)
    assert new["allowed_profiles"] == ["low", "moderate"] and new["retention_days"] == 3
    seen = eve.get("/api/settings").json()
    assert seen["allowed_profiles"] == ["low", "moderate"] and "profiles" not in seen
    settings(teacher, allowed_profiles=["low"], retention_days=7)


def test_a_script_token_drives_the_api_without_the_page(room, server, media):
    student(room, server, "fay")
    r = run_cli("users", "token", "fay", *room.keys)
    assert r.returncode == 0, r.stderr
    script = Client(server.url, token=r.stdout.strip())
    assert script.get("/api/jobs").json() == []
    r = script.submit(media.face, media.clip)              # no cookie, no CSRF token: the token
    assert r.status_code == 201, r.text
    job = r.json()["id"]
    assert script.post(f"/api/jobs/{job}/cancel").json()["state"] == "cancelled"
    assert run_cli("users", "disable", "fay", *room.keys).returncode == 0
    assert script.get("/api/jobs").status_code == 401
    assert Client(server.url).sign_in("fay", PASSWORD).status_code == 401
    assert run_cli("users", "enable", "fay", *room.keys).returncode == 0
    fay = Client(server.url)
    assert fay.sign_in("fay", PASSWORD).status_code == 200
    assert fay.delete(f"/api/jobs/{job}").status_code == 204
    listing = run_cli("users", "list", *room.keys).stdout
    assert any(line.split()[:3] == ["fay", "student", "active"] for line in listing.splitlines())


def test_a_student_may_add_the_upscale_and_the_background_removal(room, server, media):
    """The two checkboxes become the job's chain (the remover first, the ×2 enhancer last, the
    profile's own steps between) and, with the background removed, an output that carries
    alpha; the job's view names them."""
    bo = student(room, server, "bo")
    assert bo.get("/api/settings").json()["extras"] == ["upscale", "background"]
    r = bo.submit(media.face, media.clip, extras=("upscale", "background"))
    assert r.status_code == 201, r.text
    job = r.json()
    assert job["extras"] == ["upscale", "background"]
    settings = yaml.safe_load(next((room.spool / "queued").glob(f"{job['id']}.yaml")).read_text())
    spec = settings.get("settings", settings)
    assert spec["processors"] == "background,swap,enhance,frame_enhance"
    assert spec["frame_enhance.model"] == "real_esrgan_x2"
    assert spec["output"].endswith("/out/result.webm")
    plain = bo.submit(media.face, media.clip, extras=()).json()
    assert plain["extras"] == []
    for j in (job, plain):
        assert bo.delete(f"/api/jobs/{j['id']}").status_code == 204


def test_extras_without_their_models_are_not_offered(standin_models, tmp_path):
    """A server whose models folder lacks an extra's model does not offer it, and a form that
    ticks it anyway gets one line naming the model and the command that fetches it."""
    from render.config import load_config
    from render.web.extras import available, unavailable

    cfg = load_config({"models.dir": str(standin_models), "cache_dir": str(tmp_path)}, env={})
    offered = available(cfg)
    assert offered == ["mouth"]          # the stand-ins hold 2dfan4: the mouth is kept with it
    line = unavailable({"upscale": "yes"}, offered)
    assert "real_esrgan_x2 is not fetched" in line and "render models fetch real_esrgan_x2" in line
    assert unavailable({"upscale": "no", "background": ""}, offered) is None


def test_openapi_describes_the_api(server):
    doc = Client(server.url).get("/openapi.json").json()
    paths = doc["paths"]
    for path in ("/api/jobs", "/api/jobs/{job_id}", "/api/jobs/{job_id}/cancel",
                 "/api/jobs/{job_id}/output", "/api/jobs/{job_id}/report", "/api/session",
                 "/api/tokens"):
        assert path in paths, path
    form = paths["/api/jobs"]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"]
    assert set(form["required"]) == {"source", "target", "consent"}
    assert Client(server.url).get("/docs").status_code == 404   # would load a CDN


def test_retention_removes_finished_jobs_with_their_files(tmp_path):
    from render.config import load_config
    from render.spool import Spool
    from render.web.classroom import STALE_S, Classroom as Room

    cfg = load_config({"state_dir": str(tmp_path / "state"), "spool_dir": str(tmp_path / "spool"),
                       "lock_dir": str(tmp_path / "locks")})
    room = Room(cfg, {})
    room.ensure()
    spool = Spool(cfg.spool_path)
    now = time.time()

    def job(name: str, state: str, days_ago: float) -> tuple[str, Path]:
        folder = room.folders / f"f{name}"
        (folder / "out").mkdir(parents=True)
        (folder / "out" / "result.mp4").write_bytes(b"x" * 100)
        with room.db.connect() as con:
            con.execute("INSERT INTO files VALUES (?, ?, ?, 'source', 's.jpg', ?, 1, ?)",
                        (f"file{name}", name, folder.name, str(folder / "source.jpg"), now))
        job_id = spool.submit({"output": str(folder / "out" / "result.mp4")}, owner=name,
                              meta={"classroom": {"folder": folder.name}})
        if state != "queued":
            claim = spool.claim()
            assert claim.job.id == job_id
            if state != "running":
                spool.finish(claim, state, {"error": None})
                result = spool.root / "results" / f"{job_id}.json"
                data = json.loads(result.read_text())
                data["finished"] = datetime.fromtimestamp(now - days_ago * 86400).astimezone().isoformat()
                result.write_text(json.dumps(data))
            else:
                claim.release()
        return job_id, folder

    old_done = job("ann", "done", 8)
    old_failed = job("bob", "failed", 10)
    recent = job("cat", "done", 2)
    queued = job("dan", "queued", 0)
    stray = room.folders / "left-by-a-crash"
    stray.mkdir()
    part = room.incoming / "0123.part"
    part.write_bytes(b"half an upload")
    for p in (stray, part):
        os.utime(p, (now - STALE_S - 10, now - STALE_S - 10))
    with room.db.connect() as con:     # the record of a folder whose removal a full disk cut short
        con.execute("INSERT INTO files VALUES ('fileeve', 'eve', 'fgone', 'source', 's.jpg', ?, 1, ?)",
                    (str(room.folders / "fgone" / "source.jpg"), now))

    gone = room.expire()
    assert sorted(gone) == sorted([old_done[0], old_failed[0]])
    assert not old_done[1].exists() and not old_failed[1].exists()
    assert recent[1].exists() and queued[1].exists()
    assert set(spool_states(spool)) == {recent[0], queued[0]}
    with room.db.connect() as con:
        assert sorted(r[0] for r in con.execute("SELECT owner FROM files")) == ["cat", "dan"]
    assert not stray.exists() and not part.exists()
    # the teacher makes the class keep results for one day: the two-day-old one goes too
    room.save_settings({"retention_days": 1})
    assert room.expire() == [recent[0]] and queued[1].exists()


def spool_states(spool) -> dict[str, str]:
    return {j.id: j.state for j in spool.jobs()}


def test_the_progress_line_has_segments_fps_and_eta():
    from render.spool import Job
    from render.job_progress import describe_progress

    job = Job("0badf00d", "running", {"settings": {}}, progress={
        "state": "rendering", "target": "target.mp4", "segments_done": 2, "segments_total": 5,
        "fps": 12.34, "eta_s": 75.2})
    assert describe_progress(job) == "target.mp4 segment 2/5, 12.3 fps, ETA 1 min 15 s"
    job.progress.update(frames_done=40, frames_total=150)
    assert describe_progress(job) == \
        "target.mp4 frame 40/150 (segment 2/5), 12.3 fps, ETA 1 min 15 s"
    job.progress.update(state="marking")
    assert describe_progress(job) == "target.mp4 marking"
    job.progress.update(state="rendering", device="GPU 1 (NVIDIA H100)")
    assert describe_progress(job) == \
        "target.mp4 frame 40/150 (segment 2/5), 12.3 fps, ETA 1 min 15 s on GPU 1 (NVIDIA H100)"


def test_the_job_progress_keeps_the_device_the_job_holds(tmp_path):
    """The device taken is written at once and stays while the targets' segments come and go."""
    from render.job_progress import JobProgress
    from render.spool import Spool

    spool = Spool(tmp_path / "spool")
    written: list[dict] = []
    spool.progress = lambda job_id, **data: written.append(dict(data))   # what the file gets
    progress = JobProgress(spool, "0badf00d")
    progress.device("GPU 1 (NVIDIA H100)")
    progress.segment("a.mp4", None, 0, 3)
    progress.frames("a.mp4", "rendering", 10, 100)
    assert written[0] == {"state": "starting", "device": "GPU 1 (NVIDIA H100)"}
    assert all(w["device"] == "GPU 1 (NVIDIA H100)" for w in written)


def test_a_result_is_served_with_range_requests_to_its_owner_only(room, server, media, tmp_path):
    import subprocess

    webm = tmp_path / "clip.webm"
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-i", str(media.clip), "-c:v",
                    "libvpx-vp9", "-deadline", "realtime", str(webm)], check=True)
    una = student(room, server, "una")
    r = una.submit(media.face, webm, names=("me.jpg", "our day.webm"))
    assert r.status_code == 201, r.text
    job_id = r.json()["id"]
    worker = start_worker(room)
    try:
        job = una.wait(job_id)
    finally:
        stop_worker(worker)
    assert job["state"] == "done", job
    full = una.get(job["output"])
    size = len(full.content)
    assert full.status_code == 200 and full.headers["accept-ranges"] == "bytes"
    # the upload's container and name come back: a .webm is offered as .webm
    assert 'filename="our_day-swapped.webm"' in full.headers["content-disposition"]
    assert full.content[:4] == b"\x1a\x45\xdf\xa3"              # EBML: Matroska/WebM
    part = una.get(job["output"], headers={"Range": "bytes=100-299"})
    assert part.status_code == 206 and part.content == full.content[100:300]
    assert part.headers["content-range"] == f"bytes 100-299/{size}"
    tail = una.get(job["output"], headers={"Range": "bytes=-50"})
    assert tail.status_code == 206 and tail.content == full.content[-50:]
    beyond = una.get(job["output"], headers={"Range": f"bytes={size}-"})
    assert beyond.status_code == 416 and beyond.headers["content-range"] == f"bytes */{size}"
    for bad in ("bytes=abc", "bytes=5-2", "pages=1-2", "bytes=" + "9" * 40 + "-"):
        r = una.get(job["output"], headers={"Range": bad})
        assert r.status_code in (200, 400, 416), (bad, r.status_code, r.text[:200])
    assert una.get(job["output"] + "?inline=1").headers["content-disposition"].startswith("inline")

    poster = una.get(job["poster"])
    assert poster.status_code == 200 and poster.content[:2] == b"\xff\xd8"
    card = una.get(job["card"]).json()
    assert card["status"] == "done" and card["synthetic"] is True and card["models"]
    assert card["made"]["kind"] == "video" and card["made"]["frames"] > 0
    assert card["consent"]["given"] is True and card["consent"]["by"] == "una"
    assert "/" not in json.dumps(card["made"]) and "path" not in json.dumps(card)

    # another student: every file of the job is "no such thing", with or without a range
    vic = student(room, server, "vic")
    for url in (job["output"], job["poster"], job["card"], job["report"],
                f"/api/files/{job['target']['file']}"):
        assert vic.get(url).status_code == 404, url
        assert vic.get(url, headers={"Range": "bytes=0-9"}).status_code == 404, url
    assert una.get(f"/api/files/{job['target']['file']}",
                   headers={"Range": "bytes=0-9"}).status_code == 206
    assert una.delete(f"/api/jobs/{job_id}").status_code == 204


def test_messages_are_in_the_students_terms_and_the_teachers_in_full(tmp_path):
    from render.spool import Job
    from render.web.views import job_view

    folder = "/srv/class/files/e211f66b6835a719"
    error = (f"target {folder}/target.mp4 ends at frame 31 of 50 (file truncated?); "
             f"allow_partial=true renders the 31 readable frames")
    job = Job("0badf00d", "failed", {
        "owner": "ann", "settings": {"target": f"{folder}/target.mp4",
                                     "source": f"{folder}/source.jpg",
                                     "output": f"{folder}/out/result.mp4"},
        "meta": {"classroom": {"folder": "e211f66b6835a719", "target": {"name": "My day.mp4"},
                               "source": {"name": "me.jpg"}}}},
        result={"error": error})
    seen = job_view(job, order={}, retention=7, output=None, cancelling=False, full=False)
    assert seen["error"] == "target 'My day.mp4' ends at frame 31 of 50 (file truncated?) " \
                            "(your teacher can see the details)"
    assert "/" not in seen["error"].replace("(file truncated?)", "")
    assert job_view(job, order={}, retention=7, output=None, cancelling=False,
                    full=True)["error"] == error
