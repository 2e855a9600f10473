"""The review on the classroom's pages, over a real server (``render serve`` on 127.0.0.1, real
``render work`` workers on a fake GPU, the stand-in models): a done job's view carries its
verdict with the first thing to look at, its owner and the teacher get the review picture —
``render review``'s own contact sheet, pixel for pixel, made once however many ask at once — and
whoever else asks, or asks of a job without a review, gets one clear 404 line. Then the verdicts'
cache and the sheet makers in-process, and the two pages in Debian's Chromium."""
from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import cv2
import numpy as np
import pytest
import yaml

from render.review_sheet.command import review_sheet
from render.spool_job import Job
from render.standins import media as mf
from render.web import sheets as sheet_makers
from render.web import verdicts
from render.web.errors import Refused
from web_classroom import PASSWORD, Classroom, Client, Server, start_worker, stop_worker
from web_classroom import signed_in

LOOK = ("review.colour=1", "review.distance=0.01")     # every sampled face needs a look
CLEAN = ("review.colour=250",)                          # the stand-ins' colour shift is fine


@pytest.fixture(scope="module")
def media(tmp_path_factory):
    d = tmp_path_factory.mktemp("reviewmedia")
    picture = d / "picture.png"
    mf.make_image_target(picture, width=320, height=240)
    return SimpleNamespace(face=mf.make_source_image(d / "face.jpg").path,
                           clip=mf.make_clip(d / "clip.mp4", width=320, height=240,
                                             seconds=1.0).path,
                           picture=picture)


@pytest.fixture(scope="module")
def room(tmp_path_factory, standin_models):
    return Classroom(tmp_path_factory.mktemp("reviewclass"), standin_models)


@pytest.fixture(scope="module")
def server(room):
    s = Server(room)
    yield s
    assert s.stop() == 0, s.text()


@pytest.fixture(scope="module")
def teacher(room, server):
    return signed_in(room, server, "tina", "teacher")


def render(room: Classroom, who: Client, source: Path, target: Path, *keys: str) -> dict:
    """Submit and render one job with a worker of its own (``keys``: its review thresholds)."""
    r = who.submit(source, target)
    assert r.status_code == 201, r.text
    worker = start_worker(room, *keys)
    try:
        job = who.wait(r.json()["id"])
    finally:
        stop_worker(worker)
    assert job["state"] == "done", job
    return job


def output_of(room: Classroom, job: dict) -> Path:
    (path,) = room.spool.glob(f"*/{job['id']}.yaml")
    return Path(yaml.safe_load(path.read_text())["settings"]["output"])


def quality(output: Path) -> dict:
    return json.loads(Path(f"{output}.report.json").read_text())["quality"]


def first_finding(section: dict) -> dict:
    """The earliest finding (a track lists its own in order: a miss before a distance)."""
    return min(((f["frames"][0], t["track"], k, f) for t in section["tracks"]
                for k, f in enumerate(t["look"])), key=lambda x: x[:3])[3]


def teacher_row(teacher: Client, job_id: str, timeout: float = 30.0) -> dict:
    """The job's row in the teacher's list once it is done there (the list may show a job's
    state a moment after the job's own view does)."""
    deadline = time.time() + timeout
    while True:
        row = {j["id"]: j for j in teacher.get("/api/jobs").json()}[job_id]
        if row["state"] == "done" or time.time() > deadline:
            return row
        time.sleep(0.2)


def one_line_404(r, said: str) -> None:
    assert r.status_code == 404, (r.status_code, r.text)
    detail = r.json()["detail"]
    assert "\n" not in detail and said in detail, detail


def test_a_done_job_carries_its_verdict_and_its_owner_gets_the_review_picture(room, server,
                                                                             teacher, media):
    ann = signed_in(room, server, "ann")
    job = render(room, ann, media.face, media.clip, *LOOK)
    output = output_of(room, job)
    section = quality(output)
    assert section["verdict"] == "look" and section["summary"].startswith("look: ")
    first = first_finding(section)
    count = sum(len(t["look"]) for t in section["tracks"])
    expected = {"verdict": "look", "summary": section["summary"], "reason": first["text"],
                "more": count - 1}
    assert job["review"] == expected
    assert job["review_sheet"] == f"/api/jobs/{job['id']}/review"
    assert teacher_row(teacher, job["id"])["review"] == expected

    # three asks at once: one sheet made, the same PNG for all, render review's own pixels
    sheet = output.with_name("result.mp4.review.png")
    assert not sheet.exists()
    with ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(lambda _: ann.get(job["review_sheet"]), range(3)))
    assert [a.status_code for a in answers] == [200] * 3, [a.text for a in answers]
    assert answers[0].headers["content-type"] == "image/png"
    assert len({a.content for a in answers}) == 1
    assert server.text().count(f"job {job['id']}: review picture made") == 1
    picture = cv2.imdecode(np.frombuffer(answers[0].content, np.uint8), cv2.IMREAD_COLOR)
    drawn = review_sheet(output)
    assert picture.shape == drawn.image.shape and picture.shape[1] > 500
    assert np.array_equal(picture, drawn.image)
    assert sheet.read_bytes() == answers[0].content
    assert sorted(p.name for p in output.parent.iterdir() if p.is_file()) == \
        ["result.mp4", "result.mp4.report.json", "result.mp4.review.png"]     # no temp left

    # kept: asked again, nothing is made; the teacher gets it too, nobody else
    made = sheet.stat().st_mtime_ns
    assert ann.get(job["review_sheet"]).content == answers[0].content
    assert teacher.get(job["review_sheet"]).content == answers[0].content
    assert sheet.stat().st_mtime_ns == made
    assert server.text().count(f"job {job['id']}: review picture made") == 1
    bob = signed_in(room, server, "bob")
    one_line_404(bob.get(job["review_sheet"]), "no such job")
    assert Client(server.url).get(job["review_sheet"]).status_code == 401

    # a record from a worker that wrote no verdict: the report says it
    results = room.spool / "results" / f"{job['id']}.json"
    record = json.loads(results.read_text())
    del record["review"]
    results.write_text(json.dumps(record))
    time.sleep(0.6)                                     # the server's spool snapshot
    assert ann.get(f"/api/jobs/{job['id']}").json()["review"] == expected


def test_a_clean_render_is_ok(room, server, teacher, media):
    cai = signed_in(room, server, "cai")
    job = render(room, cai, media.face, media.clip, *CLEAN)
    section = quality(output_of(room, job))
    assert section["verdict"] == "ok" and section["tracks"]
    assert job["review"] == {"verdict": "ok", "summary": "ok", "reason": None, "more": 0}
    got = cai.get(job["review_sheet"])
    assert got.status_code == 200, got.text
    assert cv2.imdecode(np.frombuffer(got.content, np.uint8), cv2.IMREAD_COLOR).shape == \
        review_sheet(output_of(room, job)).image.shape


def test_what_has_no_review_picture_gets_one_clear_404(room, server, teacher, media):
    dan = signed_in(room, server, "dan")
    picture = render(room, dan, media.face, media.picture, *CLEAN)
    assert picture["kind"] == "image" and picture["review"] is None
    assert picture["review_sheet"] is None
    one_line_404(dan.get(f"/api/jobs/{picture['id']}/review"),
                 "no review picture: the result is a picture: only videos are reviewed")

    off = render(room, dan, media.face, media.clip, "review.enabled=false")
    assert off["review"] is None and off["review_sheet"] is None
    url = f"/api/jobs/{off['id']}/review"
    one_line_404(dan.get(url), "no review picture: this render was not reviewed")
    one_line_404(teacher.get(url), "rendered without review")      # the teacher: in full

    gone = render(room, dan, media.face, media.clip, *CLEAN)
    output_of(room, gone).unlink()
    time.sleep(0.6)
    assert dan.get(f"/api/jobs/{gone['id']}").json()["review_sheet"] is None
    one_line_404(dan.get(f"/api/jobs/{gone['id']}/review"),
                 "no review picture: the result is no longer on the server")

    queued = dan.submit(media.face, media.clip)
    assert queued.status_code == 201, queued.text
    one_line_404(dan.get(f"/api/jobs/{queued.json()['id']}/review"),
                 "no review picture: the job is queued, not done")
    one_line_404(dan.get("/api/jobs/not-a-job/review"), "no such job")
    assert dan.delete(f"/api/jobs/{queued.json()['id']}").status_code == 204
    assert "Traceback" not in server.text()


# -- in-process: the verdicts' cache and the sheet makers ---------------------------------------
def done_job(job_id: str, review=verdicts._MISSING, **more) -> Job:
    result = dict(more) if review is verdicts._MISSING else {"review": review, **more}
    return Job(id=job_id, state="done", spec={"settings": {}}, result=result)


def write_report(path: Path, tracks: list[dict]) -> Path:
    looks = sum(t["verdict"] == "look" for t in tracks)
    path.write_text(json.dumps({"quality": {
        "verdict": "look" if looks else "ok", "tracks": tracks,
        "summary": f"look: {looks} track{'s' if looks != 1 else ''}" if looks else "ok"}}))
    return path


def finding(first: int, text: str) -> dict:
    return {"frames": [first, first + 3], "frame": first, "text": text}


def test_the_verdict_reads_each_report_once_and_only_for_a_look(tmp_path, monkeypatch):
    reads: list[Path] = []
    real = verdicts.findings_of
    monkeypatch.setattr(verdicts, "findings_of", lambda p: reads.append(p) or real(p))
    report = write_report(tmp_path / "a.mp4.report.json", [
        {"track": 1, "verdict": "look", "look": [finding(40, "missed 4 frames at 00:01.6")]},
        {"track": 2, "verdict": "look", "look": [finding(12, "the crop jumped 0.40 face "
                                                          "widths at 00:00.4 (> 0.25)"),
                                                 finding(70, "colour shifted")]},
        {"track": 3, "verdict": "ok", "look": []}])
    cache = verdicts.Verdicts(limit=2)
    look = done_job("j1", "look: 2 tracks")
    for _ in range(5):
        assert cache.of(look, [report]) == {
            "verdict": "look", "summary": "look: 2 tracks", "more": 2,
            "reason": "the crop jumped 0.40 face widths at 00:00.4 (> 0.25)"}
    assert reads == [report]
    assert cache.of(done_job("j2", "ok"), [report])["summary"] == "ok"        # from the record
    assert cache.of(done_job("j3", None), [report]) is None                   # nothing reviewed
    assert cache.of(Job(id="j4", state="failed", spec={}, result={}), [report]) is None
    assert reads == [report]
    older = done_job("j5")                                  # a record without the verdict
    assert cache.of(older, [report])["summary"] == "look: 2 tracks" and reads == [report]

    os.utime(report, ns=(time.time_ns(), time.time_ns() + 10**9))   # written again: read again
    cache.of(look, [report])
    assert reads == [report, report]
    others = [write_report(tmp_path / f"{n}.mp4.report.json", []) for n in "bc"]
    for other in others:
        assert cache.of(done_job("j6"), [other])["summary"] == "ok"
    assert len(cache) == 2                                  # bounded
    assert cache.of(done_job("j7"), [tmp_path / "none.report.json"]) is None
    two = cache.of(done_job("j8", "look: 2 tracks"), [others[0], report])
    assert two["reason"] == "a.mp4: the crop jumped 0.40 face widths at 00:00.4 (> 0.25)"


def test_a_sheet_is_made_once_off_the_request_and_again_when_the_output_changes(tmp_path):
    output = tmp_path / "out" / "result.mp4"
    output.parent.mkdir()
    output.write_bytes(b"a video")
    Path(f"{output}.report.json").write_text("{}")
    release, calls = threading.Event(), []

    def slow(path: Path) -> np.ndarray:
        calls.append(path)
        assert release.wait(30)
        return np.full((40, 60, 3), len(calls) * 50, np.uint8)

    makers = sheet_makers.Sheets(None, draw=slow)
    wanted = sheet_makers.Wanted(done_job("j1"), output, full=False)

    async def asks():
        first = await makers.sheet(wanted, timeout=0.2)       # still being made: the 503
        both = asyncio.gather(makers.sheet(wanted, timeout=30), makers.sheet(wanted, timeout=30))
        await asyncio.sleep(0.1)
        release.set()
        return first, await both

    first, both = asyncio.run(asks())
    assert first is None and both == [wanted.sheet, wanted.sheet] and calls == [output]
    assert cv2.imread(str(wanted.sheet)).shape == (40, 60, 3)
    assert asyncio.run(makers.sheet(wanted, timeout=5)) == wanted.sheet and len(calls) == 1
    later = time.time_ns() + 10**9
    os.utime(output, ns=(later, later))                  # rendered again: the sheet is stale
    assert asyncio.run(makers.sheet(wanted, timeout=5)) == wanted.sheet and len(calls) == 2
    assert int(cv2.imread(str(wanted.sheet))[0, 0, 0]) == 100

    def broken(path: Path) -> np.ndarray:
        from render.errors import MediaError
        raise MediaError(f"cannot read frame 3 of {path}")

    os.utime(output, ns=(later + 10**9, later + 10**9))
    makers.draw = broken
    with pytest.raises(Refused) as refused:
        asyncio.run(makers.sheet(wanted, timeout=5))
    assert refused.value.status == 404 and str(refused.value) == \
        "no review picture: the result's frames could not be read"


# -- the two pages in a real browser -------------------------------------------------------------
from test_web_browser import (CHROMEDRIVER, CHROMIUM, SELENIUM, artifacts,  # noqa: E402, F401
                              browser, first_sign_in, wait_for)

needs_browser = [
    pytest.mark.skipif(not SELENIUM, reason="selenium is not installed (pip install -e '.[test]')"),
    pytest.mark.skipif(CHROMIUM is None or CHROMEDRIVER is None,
                       reason="Debian's chromium and chromium-driver are not installed"),
]


@needs_browser[0]
@needs_browser[1]
def test_the_card_shows_the_review_picture_and_the_teacher_page_the_verdict(browser, room, server,
                                                                            media):
    from selenium.webdriver.common.by import By

    eve = signed_in(room, server, "eve")
    job = render(room, eve, media.face, media.clip, *LOOK)
    picture = render(room, eve, media.face, media.picture, *CLEAN)
    drawn = review_sheet(output_of(room, job)).image

    browser.get(server.url + "/")
    wait_for(browser, lambda d: d.current_url.endswith("/signin"), what="the sign-in page")
    browser.find_element(By.ID, "name").send_keys("eve")
    browser.find_element(By.ID, "password").send_keys(PASSWORD)
    browser.find_element(By.ID, "signin-button").click()
    row = wait_for(browser, lambda d: next(iter(d.find_elements(
        By.CSS_SELECTOR, f"#jobs tr.job[data-id='{job['id']}'][data-state=done]")), None),
        what="the done job")
    row.find_element(By.CSS_SELECTOR, "button.report").click()
    img = wait_for(browser, lambda d: next(iter(d.find_elements(By.ID, "review-picture")), None),
                   what="the review picture")
    size = wait_for(browser, lambda d: d.execute_script(
        "const i = arguments[0]; return i.complete && i.naturalWidth ? "
        "[i.naturalWidth, i.naturalHeight] : null", img), what="the picture loaded")
    assert size == [drawn.shape[1], drawn.shape[0]]
    assert browser.find_element(By.CSS_SELECTOR, "#review figcaption").text == \
        f"Review: {job['review']['summary']}"
    browser.execute_script("document.getElementById('review').scrollIntoView()")
    browser.save_screenshot(str(artifacts() / "web-student-review.png"))

    # a picture's card: no review picture, said in words
    row = browser.find_element(By.CSS_SELECTOR, f"#jobs tr.job[data-id='{picture['id']}']")
    row.find_element(By.CSS_SELECTOR, "button.report").click()
    wait_for(browser, lambda d: "a picture is not reviewed" in
             d.find_element(By.ID, "review-note").text, what="no review picture")

    browser.delete_all_cookies()
    first_sign_in(browser, server.url, "theo", room.add_user("theo", "teacher"))
    wait_for(browser, lambda d: d.current_url.endswith("/teacher"), what="the teacher page")
    line = wait_for(browser, lambda d: next(iter(d.find_elements(
        By.CSS_SELECTOR, f"#jobs tr.job[data-id='{job['id']}'] .verdict")), None),
        what="the verdict")
    review = job["review"]
    assert line.get_attribute("data-verdict") == "look"
    assert line.text == (f"review: {review['summary']} · {review['reason']}"
                         + (f" (+{review['more']} more)" if review["more"] else ""))
    link = browser.find_element(By.CSS_SELECTOR,
                                f"#jobs tr.job[data-id='{job['id']}'] a.review-sheet")
    assert link.get_attribute("href") == server.url + job["review_sheet"]
    assert not browser.find_elements(By.CSS_SELECTOR,
                                     f"#jobs tr.job[data-id='{picture['id']}'] .verdict")
    browser.save_screenshot(str(artifacts() / "web-teacher-review.png"))
