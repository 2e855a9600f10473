"""The mouth box on the student page in a real browser (Debian's headless Chromium through
Selenium, as ``test_web_browser.py``): it shows for the profile whose landmarker is in the
models folder, and ticking it queues a job with ``mask.keep=mouth``."""
from __future__ import annotations

import shutil

import pytest
import yaml

# the browser page's fixtures (browser, media) and its skip marks (pytestmark)
from test_web_browser import browser, media, pytestmark  # noqa: F401
from test_web_browser import first_sign_in, wait_for
from test_web_face_edits import add_estimator
from web_classroom import Classroom, Server


@pytest.fixture(scope="module")
def mouth(tmp_path_factory, standin_models):
    root = tmp_path_factory.mktemp("mouthbrowser")
    models = root / "models"
    shutil.copytree(standin_models, models)
    add_estimator(models)
    room = Classroom(root, models)
    server = Server(room)
    yield room, server
    assert server.stop() == 0, server.text()


def test_a_student_ticks_keep_my_mouth_and_submits(browser, mouth, media):
    from selenium.webdriver.common.by import By

    room, server = mouth
    first_sign_in(browser, server.url, "uma", room.add_user("uma"))
    wait_for(browser, lambda d: d.current_url.endswith("/student"), what="the student page")
    box = wait_for(browser, lambda d: d.find_element(By.ID, "mouth")
                   if d.find_element(By.ID, "mouth").is_displayed() else None, what="the box")
    assert "keep my mouth moving as in the video" in \
        browser.find_element(By.ID, "extras").text
    assert not browser.find_element(By.ID, "age-box").is_displayed()     # no fran here
    browser.find_element(By.ID, "source").send_keys(str(media.face))
    browser.find_element(By.ID, "target").send_keys(str(media.clip))
    box.click()
    browser.find_element(By.ID, "consent").click()
    browser.find_element(By.ID, "submit-button").click()
    row = wait_for(browser, lambda d: next(iter(d.find_elements(By.CSS_SELECTOR, "#jobs tr.job")),
                                           None), what="the job row")
    assert "own mouth kept" in row.text
    (path,) = room.spool.glob(f"*/{row.get_attribute('data-id')}.yaml")
    settings = yaml.safe_load(path.read_text())["settings"]
    assert settings["mask.keep"] == "mouth" and "processors" not in settings
