"""The face edits on the student page in a real browser (Debian's headless Chromium through
Selenium, as ``test_web_browser.py``): the boxes show because the classroom's models folder holds
their models; the student moves the age slider by keyboard, keeps the expression at a share of
their choosing, submits, and the job renders with those values. Screenshot:
``web-student-face-edits.png`` in the test artifacts."""
from __future__ import annotations

import shutil

import pytest
import yaml

# the browser page's fixtures (browser, media) and its skip marks (pytestmark)
from test_web_browser import browser, media, pytestmark  # noqa: F401
from test_web_browser import artifacts, first_sign_in, inside_viewport, wait_for
from test_web_face_edits import add_age_models, add_expression_models, add_lip_sync_models
from web_classroom import Classroom, Server, start_worker, stop_worker


@pytest.fixture(scope="module")
def edits(tmp_path_factory, standin_models):
    root = tmp_path_factory.mktemp("editbrowser")
    models = root / "models"
    shutil.copytree(standin_models, models)
    add_age_models(models)
    add_expression_models(models)
    add_lip_sync_models(models)
    room = Classroom(root, models)
    server = Server(room)
    worker = start_worker(room)
    yield room, server
    stop_worker(worker)
    assert server.stop() == 0, server.text()


def test_a_student_moves_the_age_slider_keeps_the_expression_and_submits(browser, edits, media):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    room, server = edits
    first_sign_in(browser, server.url, "una", room.add_user("una"))
    wait_for(browser, lambda d: d.current_url.endswith("/student"), what="the student page")
    wait_for(browser, lambda d: d.find_element(By.ID, "age-box").is_displayed(), what="the age")
    assert browser.find_element(By.ID, "expression-box").is_displayed()
    assert browser.find_element(By.ID, "voice-box").is_displayed()
    assert not browser.find_element(By.ID, "upscale").is_displayed()      # no x2 model here
    assert not browser.find_element(By.ID, "expression-factor").is_displayed()
    assert browser.find_element(By.ID, "age-text").text == "0 (unchanged)"

    browser.find_element(By.ID, "source").send_keys(str(media.face))
    browser.find_element(By.ID, "target").send_keys(str(media.clip))
    age = browser.find_element(By.ID, "age")
    age.send_keys(*[Keys.ARROW_RIGHT] * 30)
    assert age.get_attribute("value") == "30"
    assert browser.find_element(By.ID, "age-text").text == "+30 (older)"
    browser.find_element(By.ID, "expression").click()
    factor = wait_for(browser, lambda d: d.find_element(By.ID, "expression-factor")
                      if d.find_element(By.ID, "expression-factor").is_displayed() else None,
                      what="the expression's share")
    assert factor.get_attribute("value") == "80"                # the processor's default
    factor.send_keys(*[Keys.ARROW_LEFT] * 20)
    assert browser.find_element(By.ID, "expression-factor-text").text == "60 %"

    # a phone's width: the sliders and their values stay inside the screen
    browser.set_window_size(375, 900)
    wait_for(browser, lambda d: d.execute_script("return document.documentElement.clientWidth")
             <= 375, what="the narrow window")
    assert inside_viewport(browser, "#submit-form *") == []
    browser.set_window_size(1280, 1100)

    browser.find_element(By.ID, "consent").click()
    browser.save_screenshot(str(artifacts() / "web-student-face-edits.png"))
    browser.find_element(By.ID, "submit-button").click()
    row = wait_for(browser, lambda d: next(iter(d.find_elements(By.CSS_SELECTOR, "#jobs tr.job")),
                                           None), what="the job row")
    (path,) = room.spool.glob(f"*/{row.get_attribute('data-id')}.yaml")
    settings = yaml.safe_load(path.read_text())["settings"]
    assert settings["processors"] == "swap,expression,age_modifier,enhance"
    assert settings["age_modifier.direction"] == "30" and settings["expression.factor"] == "60"
    assert "lip_sync.audio" not in settings
    # the form is reset: the slider back at 0, the share hidden
    wait_for(browser, lambda d: d.find_element(By.ID, "age-text").text == "0 (unchanged)",
             what="the reset form")
    assert not browser.find_element(By.ID, "expression-factor").is_displayed()

    row = wait_for(browser, lambda d: next(iter(d.find_elements(
        By.CSS_SELECTOR, "#jobs tr.job[data-state=done]")), None), timeout=180, what="done")
    assert "low + expression kept (60 %) + age +30" in row.text
