"""The target's own mouth kept on the classroom page (issue 42): the box ``mouth=yes`` adds the
key ``mask.keep=mouth`` (a key extra, not a processor: the chain stays the profile's), over a
real server (``render serve`` on 127.0.0.1, a ``render work`` worker on a fake GPU, the stand-in
models with the 68-point estimator profile low finds the mouth with).

It is offered only where the models the keep mask finds the mouth with are pinned and in the
models folder, per profile: low's estimator fan_68_5 (a manifest overlay), moderate's and high's
landmarker 2dfan4 (and high's parser, whose mouth classes it then takes); a form that asks for
it anyway gets one line naming them and keeps nothing.
"""
from __future__ import annotations

import shutil

import pytest

from test_web_face_edits import add_estimator, media, send, spooled  # noqa: F401 (fixture)
from web_classroom import Classroom, Server, signed_in, start_worker, stop_worker

MOUTH = "keeping the video's own mouth is not offered on this server with profile"


def _config(models, cache, profile: str = "low", **keys: str):
    from render.config import load_config

    return load_config({"profile": profile, "models.dir": str(models), "cache_dir": str(cache),
                        **keys}, env={})


def test_the_mouth_is_offered_where_its_landmarker_is_there_per_profile(standin_models,
                                                                        tmp_path):
    from render.web.extras import Offer, key_models, missing_models

    models, cache = tmp_path / "models", tmp_path / "cache"
    shutil.copytree(standin_models, models)
    missing = lambda profile: missing_models(_config(models, cache, profile))["mouth"]  # noqa
    # low finds the mouth with the estimator (no manifest entry yet), moderate with 2dfan4, high
    # with 2dfan4's crops and the parser's mouth and lip classes
    assert key_models(_config(models, cache), "mouth") == ["fan_68_5"]
    assert key_models(_config(models, cache, "high"), "mouth") == ["2dfan4", "bisenet_resnet_34"]
    assert (missing("low"), missing("moderate"), missing("high")) == (["fan_68_5"], [], [])
    (models / "2dfan4.onnx").unlink()
    assert (missing("moderate"), missing("high")) == (["2dfan4"], ["2dfan4"])
    offer = Offer(_config(models, cache), {"models.dir": str(models),
                                           "cache_dir": str(cache)})
    assert offer.by_profile(["low", "moderate"]) == {"low": [], "moderate": []}
    assert offer.refusal(["mouth"], "moderate") == (
        f"{MOUTH} moderate: its model 2dfan4 is not fetched (the teacher can run `render models "
        f"fetch 2dfan4`)")
    assert offer.refusal(["mouth"], "low") == (
        f"{MOUTH} low: its model fan_68_5 is not in the server's models manifest (the teacher "
        f"adds it: docs/models.md)")
    add_estimator(models)
    assert missing("low") == []
    assert Offer(_config(models, cache), {"models.dir": str(models), "cache_dir": str(cache)}
                 ).by_profile(["low", "moderate"]) == {"low": ["mouth"], "moderate": []}
    # a server whose estimator is off cannot find the mouth: not offered
    assert missing_models(_config(models, cache, **{"landmark.estimator": ""}))["mouth"] == \
        ["a 68-point landmarker"]


def test_the_mouth_is_a_key_not_a_step_of_the_chain():
    from render.web.extras import Asked, describe

    alone = Asked(mouth=True).settings("low")
    assert alone == {"mask.keep": "mouth"}                  # the profile's own chain
    assert describe(alone) == ["own mouth kept"]
    older = Asked(mouth=True, age=10).settings("low")
    assert older == {"processors": "swap,age_modifier,enhance", "mask.keep": "mouth",
                     "age_modifier.direction": "10"}
    assert describe(older) == ["age +10", "own mouth kept"]
    assert describe({"profile": "low"}) == [] and Asked(mouth=False).settings("low") == {}


# -- over a real server --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def room(tmp_path_factory, standin_models):
    root = tmp_path_factory.mktemp("mouthclass")
    models = root / "models"
    shutil.copytree(standin_models, models)
    add_estimator(models)
    return Classroom(root, models)


@pytest.fixture(scope="module")
def server(room):
    s = Server(room)
    yield s
    assert s.stop() == 0, s.text()


def test_the_page_offers_the_mouth_and_the_job_renders_to_done(room, server, media):
    """The box is on the page; the spooled job carries ``mask.keep=mouth`` and no chain of its
    own; the worker renders it with the stand-ins and the report's config keeps the mouth."""
    kit = signed_in(room, server, "kit")
    s = kit.get("/api/settings").json()
    assert s["extras"] == ["mouth"] and s["extras_by_profile"] == {"low": ["mouth"]}

    r = send(kit, media, mouth="no")
    assert r.status_code == 201, r.text
    assert r.json()["extras"] == []
    assert "mask.keep" not in spooled(room, r.json()["id"])["settings"]
    assert kit.delete(f"/api/jobs/{r.json()['id']}").status_code == 204

    r = send(kit, media, mouth="yes")
    assert r.status_code == 201, r.text
    assert r.json()["extras"] == ["own mouth kept"]
    settings = spooled(room, r.json()["id"])["settings"]
    assert settings["mask.keep"] == "mouth" and "processors" not in settings
    worker = start_worker(room)
    try:
        done = kit.wait(r.json()["id"])
    finally:
        stop_worker(worker)
    assert done["state"] == "done", done
    assert done["extras"] == ["own mouth kept"]
    report = kit.get(done["report"]).json()
    assert report["config"]["mask.keep"] == ["mouth"]
    assert report["config"]["processors"] == ["swap", "enhance"]
    # the mouth found with the estimator, as the offer said
    assert [m["name"] for m in report["models"] if m["role"] == "landmark-estimate"] == \
        ["fan_68_5"]
    assert kit.delete(f"/api/jobs/{done['id']}").status_code == 204


def test_asking_for_the_mouth_without_its_models_is_one_line_and_keeps_nothing(
        standin_models, media, tmp_path):
    """No fan_68_5 for low, 2dfan4 taken out for moderate: each profile's line names its own."""
    models = tmp_path / "models"
    shutil.copytree(standin_models, models)
    (models / "2dfan4.onnx").unlink()
    bare = Classroom(tmp_path, models)
    other = Server(bare)
    try:
        teacher = signed_in(bare, other, "ned", "teacher")
        assert teacher.request("PUT", "/api/settings", json={
            "allowed_profiles": ["low", "moderate"]}).status_code == 200
        lea = signed_in(bare, other, "lea")
        s = lea.get("/api/settings").json()
        assert "mouth" not in s["extras"]
        assert s["extras_by_profile"] == {"low": [], "moderate": []}
        before = (bare.folders(), bare.spool_jobs())
        for profile, words in (
                ("low", f"{MOUTH} low: its model fan_68_5 is not in the server's models "
                        f"manifest (the teacher adds it: docs/models.md)"),
                ("moderate", f"{MOUTH} moderate: its model 2dfan4 is not fetched (the teacher "
                             f"can run `render models fetch 2dfan4`)")):
            r = send(lea, media, mouth="yes", profile=profile)
            assert r.status_code == 422, (profile, r.text)
            assert r.json()["detail"] == words
            assert bare.incoming() == [] and (bare.folders(), bare.spool_jobs()) == before
    finally:
        assert other.stop() == 0, other.text()
