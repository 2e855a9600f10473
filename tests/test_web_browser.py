"""The classroom pages in a real browser: Debian's headless Chromium driven by Selenium (PyPI)
through Debian's chromedriver, against ``render serve`` on 127.0.0.1 with a real ``render work``
worker on a fake GPU and the stand-in models.

A student signs in with the one-time password, chooses a password, uploads the demo face and
clip, waits for "done" and downloads the result; the teacher page shows two students' jobs.
Screenshots are saved as test artifacts: ``web-student-done.png`` and ``web-teacher.png`` in the
folder ``$RENDER_TEST_ARTIFACTS`` names (default ``tests/artifacts/``, ignored by git).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import cv2
import pytest

from render.standins import media as mf
from conftest import ROOT
from web_classroom import PASSWORD, Classroom, Client, Server, start_worker, stop_worker

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver") or ("/usr/bin/chromedriver"
                                                if os.path.exists("/usr/bin/chromedriver") else None)
try:
    import selenium  # noqa: F401
    SELENIUM = True
except ImportError:
    SELENIUM = False

pytestmark = [
    pytest.mark.skipif(not SELENIUM, reason="selenium is not installed (pip install -e '.[test]')"),
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed "
                                               "(apt-get install chromium; .ci/run does)"),
    pytest.mark.skipif(CHROMEDRIVER is None, reason="Debian's chromium-driver is not installed "
                                                   "(apt-get install chromium-driver; .ci/run does)"),
]

NEW_PASSWORD = "my very own password"


def artifacts() -> Path:
    d = Path(os.environ.get("RENDER_TEST_ARTIFACTS") or ROOT / "tests" / "artifacts")
    d.mkdir(parents=True, exist_ok=True)
    return d


def sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def media(tmp_path_factory):
    d = tmp_path_factory.mktemp("browsermedia")
    blank = d / "wall.jpg"
    cv2.imwrite(str(blank), mf.background(480, 480, 0))
    return SimpleNamespace(face=mf.make_source_image(d / "face.jpg").path,
                           clip=mf.make_clip(d / "clip.mp4", width=320, height=240, seconds=1.0).path,
                           blank=blank)


@pytest.fixture(scope="module")
def room(tmp_path_factory, standin_models):
    return Classroom(tmp_path_factory.mktemp("browserclass"), standin_models)


@pytest.fixture(scope="module")
def server(room):
    s = Server(room)
    worker = start_worker(room)
    yield s
    stop_worker(worker)
    assert s.stop() == 0, s.text()


@pytest.fixture
def browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    downloads = tmp_path / "downloads"
    downloads.mkdir()
    options = Options()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,1100", "--no-first-run", "--disable-extensions",
                "--disable-background-networking", "--disable-sync"):
        options.add_argument(arg)
    options.add_experimental_option("prefs", {"download.default_directory": str(downloads),
                                              "download.prompt_for_download": False,
                                              "safebrowsing.enabled": False})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.execute_cdp_cmd("Browser.setDownloadBehavior",
                           {"behavior": "allow", "downloadPath": str(downloads)})
    driver.downloads = downloads
    yield driver
    driver.quit()


def wait_for(driver, condition, timeout: float = 60.0, what: str = ""):
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.2).until(condition)
    except Exception:
        (artifacts() / "web-failure.png").write_bytes(driver.get_screenshot_as_png())
        raise AssertionError(f"waited {timeout:g} s for {what} on {driver.current_url}; the page "
                             f"said: {driver.find_element('tag name', 'body').text[:2000]}")


def first_sign_in(driver, url: str, name: str, one_time: str) -> None:
    from selenium.webdriver.common.by import By

    driver.get(url + "/")
    wait_for(driver, lambda d: d.current_url.endswith("/signin"), what="the sign-in page")
    driver.find_element(By.ID, "name").send_keys(name)
    driver.find_element(By.ID, "password").send_keys(one_time)
    driver.find_element(By.ID, "signin-button").click()
    wait_for(driver, lambda d: d.current_url.endswith("/password"), what="the password page")
    driver.find_element(By.ID, "current").send_keys(one_time)
    driver.find_element(By.ID, "new").send_keys(NEW_PASSWORD)
    driver.find_element(By.ID, "again").send_keys(NEW_PASSWORD)
    driver.find_element(By.ID, "password-button").click()


def test_a_student_uploads_waits_for_done_and_downloads_in_a_real_browser(browser, room, server,
                                                                         media):
    from selenium.webdriver.common.by import By

    first_sign_in(browser, server.url, "ana", room.add_user("ana"))
    wait_for(browser, lambda d: d.current_url.endswith("/student"), what="the student page")
    wait_for(browser, lambda d: d.find_element(By.ID, "who").text == "ana", what="the name")
    assert not browser.find_element(By.ID, "teacher-link").is_displayed()

    # a bad file first: one clear message on the page, nothing queued
    browser.find_element(By.ID, "source").send_keys(str(media.blank))
    browser.find_element(By.ID, "target").send_keys(str(media.clip))
    browser.find_element(By.ID, "consent").click()
    browser.find_element(By.ID, "submit-button").click()
    message = wait_for(browser, lambda d: d.find_element(By.ID, "submit-message").text
                       if "no face" in d.find_element(By.ID, "submit-message").text else None,
                       what="the no-face message")
    assert message == "no face found in the source 'wall.jpg': upload a clear photo of one face, " \
                      "looking at the camera"
    assert room.spool_jobs() == {}

    browser.find_element(By.ID, "source").clear()
    browser.find_element(By.ID, "source").send_keys(str(media.face))
    browser.find_element(By.ID, "submit-button").click()
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#jobs tr.job"), what="the job row")
    row = wait_for(browser, lambda d: next(iter(d.find_elements(
        By.CSS_SELECTOR, "#jobs tr.job[data-state=done]")), None), timeout=180, what="done")
    assert row.find_element(By.CSS_SELECTOR, ".phase").text == "done"
    assert "face: face.jpg" in row.text and "into: clip.mp4" in row.text

    row.find_element(By.CSS_SELECTOR, "a.download").click()
    got = wait_for(browser, lambda d: next((p for p in browser.downloads.iterdir()
                                            if p.suffix == ".mp4"), None),
                   what="the download")
    (folder,) = room.folders()
    assert got.name == "clip-swapped.mp4"
    assert sha(got) == sha(folder / "out" / "result.mp4")
    browser.save_screenshot(str(artifacts() / "web-student-done.png"))


def test_the_teacher_page_shows_two_students_jobs_in_a_real_browser(browser, room, server, media):
    from selenium.webdriver.common.by import By

    # a second student submits through the API while the first one's job is there already
    bea = Client(server.url).first_sign_in("bea", room.add_user("bea"))
    job = bea.submit(media.face, media.clip)
    assert job.status_code == 201, job.text
    bea.wait(job.json()["id"])

    first_sign_in(browser, server.url, "teo", room.add_user("teo", "teacher"))
    wait_for(browser, lambda d: d.current_url.endswith("/teacher"), what="the teacher page")
    rows = wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#jobs tr.job")
                    if len(d.find_elements(By.CSS_SELECTOR, "#jobs tr.job")) >= 2 else None,
                    what="two jobs")
    owners = sorted(r.get_attribute("data-owner") for r in rows)
    assert owners == ["ana", "bea"]
    assert all(r.get_attribute("data-state") == "done" for r in rows)
    wait_for(browser, lambda d: "fake-gpu-0" in d.find_element(By.ID, "devices").text,
             what="the device lock")
    assert "free" in browser.find_element(By.ID, "devices").text
    assert "the class uses" in browser.find_element(By.ID, "disk").text
    students = browser.find_element(By.ID, "disk-students").text
    assert "ana" in students and "bea" in students
    checked = [i.get_attribute("value") for i in
               browser.find_elements(By.CSS_SELECTOR, "#profiles input[type=checkbox]")
               if i.is_selected()]
    assert checked == ["low"]
    browser.save_screenshot(str(artifacts() / "web-teacher.png"))

    # the class settings form works from the page
    field = browser.find_element(By.ID, "max_clip_seconds")
    field.clear()
    field.send_keys("30")
    browser.find_element(By.ID, "settings-button").click()
    wait_for(browser, lambda d: d.find_element(By.ID, "settings-message").text == "saved",
             what="saved")
    assert Client(server.url).sign_in("bea", PASSWORD).status_code == 200
    assert bea.get("/api/settings").json()["max_clip_seconds"] == 30


# -- watching a render and its result -----------------------------------------------------------
LONG_NAME = ("a-clip-with-a-very-long-name-that-has-no-spaces-at-all_" * 3)[:116] + ".mp4"


@pytest.fixture(scope="module")
def slow(tmp_path_factory, standin_models):
    """A classroom whose worker renders a clip as one segment (segment.seconds=10), and a clip
    long and large enough that the per-frame progress is seen moving on the page."""
    d = tmp_path_factory.mktemp("watchclass")
    room = Classroom(d, standin_models)
    server = Server(room)
    worker = start_worker(room, "segment.seconds=10")
    clip = mf.make_clip(d / LONG_NAME, width=1280, height=720, seconds=9.0)
    yield SimpleNamespace(room=room, server=server, clip=clip)
    stop_worker(worker)
    assert server.stop() == 0, server.text()


def inside_viewport(driver, selector: str) -> list[str]:
    """The elements matching ``selector`` that are not wholly inside the window's width."""
    return driver.execute_script("""
        const w = document.documentElement.clientWidth, out = [];
        for (const e of document.querySelectorAll(arguments[0])) {
          const r = e.getBoundingClientRect();
          if (r.width && (r.left < -1 || r.right > w + 1)) out.push(`${e.className || e.tagName}: ${r.left}-${r.right} of ${w}`);
        }
        if (document.documentElement.scrollWidth > w + 1) out.push(`page ${document.documentElement.scrollWidth} wide`);
        return out;""", selector)


def test_a_student_watches_the_progress_plays_the_result_and_reads_the_report(browser, slow, media):
    from selenium.webdriver.common.by import By

    first_sign_in(browser, slow.server.url, "cleo", slow.room.add_user("cleo"))
    wait_for(browser, lambda d: d.current_url.endswith("/student"), what="the student page")
    browser.find_element(By.ID, "source").send_keys(str(media.face))
    browser.find_element(By.ID, "target").send_keys(str(slow.clip.path))
    browser.find_element(By.ID, "consent").click()
    browser.find_element(By.ID, "submit-button").click()
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#jobs tr.job"), what="the job row")

    # the progress moves within the one segment: frames, fps and time left, at least every 2 s
    seen, texts = [], set()
    deadline = time.time() + 180
    while time.time() < deadline:
        state = browser.execute_script("""
            const tr = document.querySelector('#jobs tr.job');
            const p = tr && tr.querySelector('progress');
            return tr && [tr.dataset.state, p ? +p.dataset.done : null, p ? +p.dataset.total : null,
                          tr.querySelector('td.status').innerText];""")
        if state and state[2] == slow.clip.frame_count and (not seen or seen[-1] != state[1]):
            seen.append(state[1])
            texts.add(state[3])
        if state and state[0] in ("done", "failed"):
            break
        time.sleep(0.2)
    row = browser.find_element(By.CSS_SELECTOR, "#jobs tr.job")
    assert row.get_attribute("data-state") == "done", row.text
    moving = [n for n in seen if 0 < n < slow.clip.frame_count]
    assert len(moving) >= 2, (seen, texts)
    assert any("frame " in t and " fps" in t and "left" in t for t in texts), texts

    # the 120-character name is shortened, whole on hover, and every column stays in view
    name = row.find_element(By.CSS_SELECTOR, "td.files .name[title$='.mp4']")
    assert name.get_attribute("title") == LONG_NAME and len(LONG_NAME) == 120
    assert browser.execute_script("return arguments[0].scrollWidth > arguments[0].clientWidth", name)
    assert inside_viewport(browser, "#jobs tr.job td, #jobs tr.job .actions > *, header *") == []

    # the result plays on the page beside the original, with a poster frame; it seeks
    row.find_element(By.CSS_SELECTOR, "button.watch").click()
    video = wait_for(browser, lambda d: next(iter(d.find_elements(By.CSS_SELECTOR, "video#result")), None),
                     what="the player")
    assert video.get_attribute("poster").endswith("/poster")
    assert browser.find_elements(By.CSS_SELECTOR, "video#original")
    browser.execute_script("arguments[0].muted = true; arguments[0].play();", video)
    wait_for(browser, lambda d: d.execute_script("return arguments[0].currentTime > 0.5", video),
             what="the result playing")
    browser.execute_script("document.getElementById('viewer').scrollIntoView()")
    shot = artifacts() / "web-student-playing-1280.png"
    browser.save_screenshot(str(shot))
    browser.execute_script("arguments[0].currentTime = arguments[0].duration - 1;", video)
    wait_for(browser, lambda d: d.execute_script("return arguments[0].ended", video), timeout=30,
             what="the end of the result")

    # the report as a card, the JSON one click away
    wait_for(browser, lambda d: "Marked as synthetic" in d.find_element(By.ID, "card").text,
             what="the report card")
    card = browser.find_element(By.ID, "card").text
    assert "Consent" in card and "ticked by cleo" in card and "Models" in card
    assert browser.find_element(By.ID, "report-json").get_attribute("href").endswith("/report?inline=1")

    # a phone's width: every part of the job and the player stays inside the screen
    browser.set_window_size(375, 900)
    wait_for(browser, lambda d: d.execute_script("return document.documentElement.clientWidth") <= 375,
             what="the narrow window")
    assert inside_viewport(browser, "#jobs tr.job td, #jobs tr.job .actions > *, #viewer video, "
                                    "#card dd, header *, #submit-form *") == []
    browser.execute_script("document.querySelector('#jobs tr.job').scrollIntoView()")
    browser.save_screenshot(str(artifacts() / "web-student-375.png"))

    # tokens for scripts: a page of their own, from the account menu
    browser.set_window_size(1280, 1100)
    browser.find_element(By.CSS_SELECTOR, "details.menu summary").click()
    browser.find_element(By.ID, "tokens-link").click()
    wait_for(browser, lambda d: d.current_url.endswith("/tokens"), what="the tokens page")
    wait_for(browser, lambda d: d.find_element(By.ID, "token-button").is_enabled(), what="the button")
    browser.find_element(By.ID, "token-button").click()
    wait_for(browser, lambda d: len(d.find_element(By.ID, "token").text) > 20, what="a token")


# -- a second person, their face clicked on the target ------------------------------------------
YELLOW, DARK = (30, 210, 230), (10, 20, 120)      # two people to the stand-in embedder


@pytest.fixture(scope="module")
def two_people(tmp_path_factory):
    """Photos of two people, and a clip with two faces: the yellow one moves 8 px a frame."""
    d = tmp_path_factory.mktemp("twopeople")
    return SimpleNamespace(
        photo1=mf.make_source_image(d / "me.jpg", colour=(150, 60, 240)).path,
        photo2=mf.make_source_image(d / "pal.png", colour=(20, 130, 250)).path,
        clip=mf.make_clip(d / "us.mp4", width=640, height=360, seconds=1.0, audio=False,
                          faces=lambda i: [(120 + 8 * i, 180, 64, YELLOW), (500, 180, 64, DARK)]))


def test_a_student_clicks_the_face_of_each_person_on_the_target(browser, room, server, two_people):
    """A second photo, "a second person": the page shows the chosen clip on a canvas, the slider
    goes to frame 12 by keyboard, the student clicks the yellow face for photo 1 and picks the
    dark one for photo 2 with the arrow keys and Enter; the job is a face map whose references
    are those faces, and it renders."""
    import yaml
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    first_sign_in(browser, server.url, "pia", room.add_user("pia"))
    wait_for(browser, lambda d: d.current_url.endswith("/student"), what="the student page")
    wait_for(browser, lambda d: d.find_element(By.ID, "who").text == "pia", what="the name")
    assert not browser.find_element(By.ID, "second").is_displayed()
    browser.find_element(By.ID, "source").send_keys(str(two_people.photo1))
    browser.find_element(By.ID, "target").send_keys(str(two_people.clip.path))
    browser.find_element(By.ID, "source2").send_keys(str(two_people.photo2))
    wait_for(browser, lambda d: d.find_element(By.ID, "second").is_displayed(), what="the choice")
    assert not browser.find_element(By.ID, "picker").is_displayed()
    browser.find_element(By.ID, "second-other").click()
    canvas = browser.find_element(By.ID, "pick-canvas")
    wait_for(browser, lambda d: canvas.get_attribute("data-ready") == "1", what="the frame")
    assert (browser.execute_script("return [arguments[0].width, arguments[0].height]", canvas)
            == [640, 360])

    # the slider, by keyboard, to 0.48 s: frame 12
    slider = browser.find_element(By.ID, "pick-time")
    slider.send_keys(*[Keys.ARROW_RIGHT] * 12)
    wait_for(browser, lambda d: abs(float(canvas.get_attribute("data-time") or 0) - 0.481) < 0.002,
             what="frame 12")
    assert browser.find_element(By.ID, "pick-time-text").text == "0.48 s"
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", canvas)

    def click(x: float, y: float) -> None:
        rect = browser.execute_script("const r = arguments[0].getBoundingClientRect();"
                                      "return [r.width, r.height];", canvas)
        ActionChains(browser).move_to_element_with_offset(
            canvas, int(x * rect[0] / 640 - rect[0] / 2), int(y * rect[1] / 360 - rect[1] / 2)
        ).click().perform()

    (yx1, yy1, yx2, yy2), (dx1, dy1, dx2, dy2) = two_people.clip.boxes[12]
    # the first face by a click
    # submitting with one face chosen: the page says what is missing
    click((yx1 + yx2) / 2, (yy1 + yy2) / 2)
    browser.find_element(By.ID, "consent").click()
    browser.find_element(By.ID, "submit-button").click()
    assert browser.find_element(By.ID, "submit-message").text == \
        "click on the target the face that becomes photo 2"
    # the second by keyboard: the crosshair starts at the middle (320, 180), → moves 13 px
    assert dx1 < 320 + 14 * 13 < dx2 and dy1 < 180 < dy2
    canvas.send_keys(*[Keys.ARROW_RIGHT] * 14, Keys.ENTER)
    wait_for(browser, lambda d: canvas.get_attribute("data-picks") == "2", what="two faces")
    assert browser.find_element(By.ID, "pick2-text").text == \
        "photo 2 (pal.png): the face at 502, 180, 0.48 s"
    assert browser.find_element(By.ID, "pick1-text").text.startswith(
        "photo 1 (me.jpg): the face at ")
    browser.save_screenshot(str(artifacts() / "web-student-two-people.png"))
    browser.find_element(By.ID, "submit-button").click()

    row = wait_for(browser, lambda d: next(iter(d.find_elements(
        By.CSS_SELECTOR, "#jobs tr.job")), None), what="the job row")
    job_id = row.get_attribute("data-id")
    (path,) = room.spool.glob(f"*/{job_id}.yaml")
    spec = yaml.safe_load(path.read_text())
    folder = room.state / "files" / spec["meta"]["classroom"]["folder"]
    settings = spec["settings"]
    assert "source" not in settings and settings["select.mode"] == "map"
    assert settings["select.map"] == (f"{folder / 'reference1.png'}={folder / 'source.jpg'},"
                                      f"{folder / 'reference2.png'}={folder / 'source2.png'}")
    for n, colour, other in ((1, YELLOW, DARK), (2, DARK, YELLOW)):
        ref = cv2.imread(str(folder / f"reference{n}.png")).astype(int)
        has = lambda c: (abs(ref - c).max(axis=2) < 30).sum()  # noqa: E731
        assert has(colour) == pytest.approx(64 * 64, rel=0.1) and has(other) == 0, n
    assert abs(spec["meta"]["classroom"]["reference1"]["at"] - 0.481) < 0.002

    row = wait_for(browser, lambda d: next(iter(d.find_elements(
        By.CSS_SELECTOR, f"#jobs tr.job[data-id='{job_id}'][data-state=done]")), None),
        timeout=180, what="done")
    assert "2 people" in row.text and "1: me.jpg" in row.text and "2: pal.png" in row.text
    thumbs = row.find_elements(By.CSS_SELECTOR, ".clicked img")
    assert len(thumbs) == 2 and all(browser.execute_script(
        "return arguments[0].complete && arguments[0].naturalWidth > 0", t) for t in thumbs)
    assert not browser.find_element(By.ID, "picker").is_displayed()    # the form was reset
    browser.execute_script("arguments[0].scrollIntoView()", row)
    browser.save_screenshot(str(artifacts() / "web-student-two-people-done.png"))
