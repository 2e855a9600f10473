"""The face edits on the classroom page (issue 40): the target's expression kept, the age slider
and the lips moved to an uploaded voice, over a real server (``render serve`` on 127.0.0.1, a
``render work`` worker on a fake GPU, the stand-in models with the age modifier's, the
LivePortrait set and the lip syncer's written into the classroom's models folder).

Each is offered only where every model it loads is in that folder; the job's chain is built by
the server (swap, expression, age_modifier, lip_sync, then the profile's enhancer); a value is
held to its processor's declared range; a bad value or voice file is one line and keeps nothing.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from render.files import sha256_file
from render.standins import media as mf
from web_classroom import Classroom, Client, Server, signed_in, start_worker, stop_worker


def _add_to_manifest(models: Path, entries: dict) -> None:
    manifest = models / "manifest.yaml"
    doc = yaml.safe_load(manifest.read_text())
    doc.setdefault("models", {}).update(entries)
    manifest.write_text(yaml.safe_dump(doc, sort_keys=False))


def add_age_models(models: Path) -> None:
    from render.standins.age_modifiers import write_age_modifiers

    write_age_modifiers(models, fran_side=512)


def add_expression_models(models: Path) -> None:
    from render.standins.expression_restorer import write_expression_restorer

    _add_to_manifest(models, write_expression_restorer(models))


def add_estimator(models: Path) -> None:
    """The 68-point estimator profile low finds the mouth with (the shipped manifest has no
    entry for it: an overlay adds one, docs/models.md)."""
    from render.standins import quality

    quality.make_fan_68_5(models / "fan_68_5.onnx")
    _add_to_manifest(models, {"fan_68_5": {
        "file": "fan_68_5.onnx", "sha256": sha256_file(models / "fan_68_5.onnx"),
        "licence": "test", "commercial_use": False, "contract": "landmarker-fan-68-5",
        "template": None, "input_size": 5}})


def add_lip_sync_models(models: Path, *, estimator: bool = True) -> None:
    """The lip syncer's stand-ins (Wav2Lip, the voice extractor) and, with ``estimator``, the
    68-point estimator profile low places Wav2Lip's mouth box with (:func:`add_estimator`)."""
    from render.standins.lip_sync import write_lip_sync_models

    write_lip_sync_models(models, ("wav2lip_gan_96", "kim_vocal_2"), frames=32)
    if estimator:
        add_estimator(models)


def _config(models: Path, cache: Path, profile: str = "low"):
    from render.config import load_config

    return load_config({"profile": profile, "models.dir": str(models), "cache_dir": str(cache)},
                       env={})


def test_each_face_edit_is_offered_once_every_model_it_loads_is_there(standin_models, tmp_path):
    """Its model, what that one needs (fran: fairface; live_portrait: its five), the voice
    extractor its options name and the landmarker its profile places the mouth with."""
    from render.web.extras import available, missing_models

    models = tmp_path / "models"
    shutil.copytree(standin_models, models)
    cache = tmp_path / "cache"
    missing = missing_models(_config(models, cache))
    assert missing["age"] == ["fran", "fairface"] and missing["expression"][0] == "live_portrait"
    assert missing["voice"] == ["wav2lip_gan_96", "kim_vocal_2", "fan_68_5"]
    assert available(_config(models, cache)) == []

    add_age_models(models)
    (models / "fairface.onnx").unlink()                    # fran without the age it needs
    assert missing_models(_config(models, cache))["age"] == ["fairface"]
    add_age_models(models)
    add_expression_models(models)
    add_lip_sync_models(models, estimator=False)
    assert available(_config(models, cache)) == ["expression", "age"]
    assert missing_models(_config(models, cache))["voice"] == ["fan_68_5"]
    # profile moderate places the crops with 2dfan4 (a stand-in): lip sync is there for it, and
    # the mouth kept (test_web_keep_mouth.py), which finds the mouth with the same landmarker
    assert available(_config(models, cache, "moderate")) == ["expression", "age", "voice",
                                                             "mouth"]
    add_lip_sync_models(models)
    assert available(_config(models, cache)) == ["expression", "age", "voice", "mouth"]


def test_the_chain_puts_the_face_edits_right_after_the_swap():
    from render.web.extras import Asked, describe
    from render.web.voice import Voice

    voice = Voice(upload=None, ext=".wav", seconds=1.0, path=Path("/s/voice.wav"))  # type: ignore
    every = Asked(upscale=True, background=True, expression=80, age=30, voice=voice,
                  voice_mix="mix").settings("high")
    assert every["processors"] == \
        "background,swap,expression,age_modifier,lip_sync,enhance,frame_enhance"
    assert describe(every) == ["upscale", "background", "expression kept", "age +30",
                               "lips to your voice over the clip's sound"]
    younger = Asked(age=-20, expression=55).settings("low")
    assert younger == {"processors": "swap,expression,age_modifier,enhance",
                       "age_modifier.direction": "-20", "expression.factor": "55"}
    assert describe(younger) == ["expression kept (55 %)", "age -20"]
    assert Asked().settings("low") == {}


# -- over a real server --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def media(tmp_path_factory):
    d = tmp_path_factory.mktemp("editmedia")

    def tone(name: str, seconds: float) -> Path:
        path = d / name
        subprocess.run(["ffmpeg", "-v", "error", "-nostdin", "-f", "lavfi", "-i",
                        f"sine=frequency=220:duration={seconds}", "-ac", "2", "-y", str(path)],
                       check=True)
        return path

    junk = d / "speech.wav"
    junk.write_bytes(b"RIFF but not really a wave file\n" * 100)
    playlist = d / "list.mp3"
    playlist.write_text(f"#EXTM3U\n#EXTINF:1,\n{d / 'voice.wav'}\n")
    return SimpleNamespace(
        face=mf.make_source_image(d / "face.jpg").path,
        clip=mf.make_clip(d / "clip.mp4", width=320, height=240, seconds=1.0).path,
        mute=mf.make_clip(d / "mute.mp4", width=160, height=120, seconds=1.0, audio=False).path,
        picture=mf.make_image_target(d / "picture.png", width=320, height=240).path,
        voice=tone("voice.wav", 1.0), long=tone("long.mp3", 3.0), junk=junk, playlist=playlist)


@pytest.fixture(scope="module")
def room(tmp_path_factory, standin_models):
    root = tmp_path_factory.mktemp("editclass")
    models = root / "models"
    shutil.copytree(standin_models, models)
    add_age_models(models)
    add_expression_models(models)
    add_lip_sync_models(models)
    return Classroom(root, models)


@pytest.fixture(scope="module")
def server(room):
    s = Server(room)
    yield s
    assert s.stop() == 0, s.text()


def send(client: Client, media, *, target: Path | None = None, voice: Path | None = None,
         **fields: str):
    """POST /api/jobs with the face, the target (the clip), ``voice`` and text ``fields``."""
    target = target or media.clip
    opened = {"source": open(media.face, "rb"), "target": open(target, "rb")}
    if voice is not None:
        opened["voice"] = open(voice, "rb")
    try:
        files = {k: (Path(f.name).name, f) for k, f in opened.items()}
        return client.post("/api/jobs", data={"profile": "low", "consent": "yes", **fields},
                           files=files)
    finally:
        for f in opened.values():
            f.close()


def spooled(room: Classroom, job_id: str) -> dict:
    (path,) = room.spool.glob(f"*/{job_id}.yaml")
    return yaml.safe_load(path.read_text())


def test_the_page_offers_the_face_edits_with_their_ranges(room, server, media, standin_models,
                                                        tmp_path):
    eve = signed_in(room, server, "eve")
    s = eve.get("/api/settings").json()
    assert s["extras"] == ["expression", "age", "voice", "mouth"]     # fan_68_5: the mouth too
    assert s["extras_by_profile"] == {"low": ["expression", "age", "voice", "mouth"]}
    assert s["extra_ranges"] == {
        "expression": {"key": "expression.factor", "min": 0, "max": 100, "default": 80},
        "age": {"key": "age_modifier.direction", "min": -100, "max": 100, "default": 0}}

    # a server whose models folder has none of their models offers none, and says why
    (tmp_path / "bare").mkdir()
    bare = Classroom(tmp_path / "bare", standin_models)
    other = Server(bare)
    try:
        ian = signed_in(bare, other, "ian")
        assert ian.get("/api/settings").json()["extras"] == []
        for fields, voice, words in (
                ({"age": "30"}, None,
                 "age is not offered on this server with profile low: its models fran, fairface "
                 "are not fetched (the teacher can run `render models fetch fran fairface`)"),
                ({"expression": "yes"}, None, "expression is not offered on this server with "
                                              "profile low: its models live_portrait, "),
                ({}, media.voice, "lip sync (the voice file) is not offered on this server with "
                                  "profile low: its models wav2lip_gan_96, kim_vocal_2 are not "
                                  "fetched (the teacher can run `render models fetch "
                                  "wav2lip_gan_96 kim_vocal_2`) and fan_68_5 is not in the "
                                  "server's models manifest (the teacher adds it: "
                                  "docs/models.md)")):
            r = send(ian, media, voice=voice, **fields)
            assert r.status_code == 422 and words in r.json()["detail"], (fields, r.text)
            assert "\n" not in r.json()["detail"]
        # what the page does not offer adds nothing: no edit is asked for
        r = send(ian, media, age="0", expression="no")
        assert r.status_code == 201, r.text
        assert "processors" not in spooled(bare, r.json()["id"])["settings"]
        assert r.json()["extras"] == []
    finally:
        assert other.stop() == 0, other.text()


def test_the_spooled_job_carries_the_chain_and_the_values(room, server, media):
    fay = signed_in(room, server, "fay")
    r = send(fay, media, voice=media.voice, age="30", expression="yes", voice_mix="mix")
    assert r.status_code == 201, r.text
    job = r.json()
    assert job["extras"] == ["expression kept", "age +30",
                             "lips to your voice over the clip's sound"]
    assert job["voice"]["name"] == "voice.wav" and job["voice"]["seconds"] == pytest.approx(1.0)
    spec = spooled(room, job["id"])
    folder = room.state / "files" / spec["meta"]["classroom"]["folder"]
    settings = spec["settings"]
    assert settings["processors"] == "swap,expression,age_modifier,lip_sync,enhance"
    assert settings["age_modifier.direction"] == "30"
    assert settings["expression.factor"] == "80"
    assert settings["lip_sync.audio"] == str(folder / "voice.wav")
    assert settings["lip_sync.audio_mix"] == "mix"
    assert (folder / "voice.wav").read_bytes() == media.voice.read_bytes()
    assert fay.get(f"/api/files/{job['voice']['file']}").content == media.voice.read_bytes()
    assert sorted(p.name for p in folder.iterdir()) == ["out", "source.jpg", "target.mp4",
                                                        "voice.wav"]

    assert fay.delete(f"/api/jobs/{job['id']}").status_code == 204
    assert not folder.exists()

    # one edit alone: only its processor, its value as sent; an mp3 voice is stored as one
    r = send(fay, media, age="-20")
    assert r.status_code == 201, r.text
    assert r.json()["extras"] == ["age -20"]
    assert spooled(room, r.json()["id"])["settings"]["processors"] == "swap,age_modifier,enhance"
    r2 = send(fay, media, expression="55", voice=media.long)
    assert r2.status_code == 201, r2.text
    assert r2.json()["extras"] == ["expression kept (55 %)", "lips to your voice"]
    settings = spooled(room, r2.json()["id"])["settings"]
    assert settings["processors"] == "swap,expression,lip_sync,enhance"
    assert Path(settings["lip_sync.audio"]).name == "voice.mp3"
    assert "lip_sync.audio_mix" not in settings            # the page always sends it; a script
    for j in (r.json(), r2.json()):
        assert fay.delete(f"/api/jobs/{j['id']}").status_code == 204


def test_bad_values_and_voices_are_one_line_and_keep_nothing(room, server, media):
    gus = signed_in(room, server, "gus")
    before = (room.folders(), room.spool_jobs())
    cases = [
        (dict(age="101"), "age: age_modifier.direction: expected an integer between -100 and "
                          "100, got 101"),
        (dict(age="-101"), "expected an integer between -100 and 100, got -101"),
        (dict(age="2.5"), "age: age_modifier.direction: expected an integer"),
        (dict(age="old"), "got 'old'"),
        (dict(expression="101"), "expression: expression.factor: expected an integer between "
                                 "0 and 100, got 101"),
        (dict(expression="-1"), "expression.factor: expected an integer between 0 and 100"),
        (dict(voice=media.voice, voice_mix="loud"),
         "voice_mix: lip_sync.audio_mix: expected one of replace, mix, got 'loud'"),
        (dict(voice_mix="mix"), "voice_mix given without a voice file"),
        (dict(voice=media.junk), "the voice 'speech.wav' is not an audio file this renderer "
                                 "can read: upload wav, mp3"),
        (dict(voice=media.playlist), "the voice 'list.mp3' is not an audio file this renderer "
                                     "can read"),
        (dict(voice=media.face), "the voice 'face.jpg' is not an audio file"),
        (dict(voice=media.mute), "the voice 'mute.mp4' has no sound this renderer can read"),
        (dict(voice=media.long), "the voice 'long.mp3' is 3.0 s long: the class limit is 2 s"),
        (dict(voice=media.voice, target=media.picture),
         "the voice 'voice.wav': the lips move to a voice only in a video"),
    ]
    teacher = signed_in(room, server, "hal", "teacher")
    assert teacher.request("PUT", "/api/settings", json={"max_clip_seconds": 2}).status_code == 200
    try:
        for kw, words in cases:
            r = send(gus, media, **kw)
            assert r.status_code == 422, (kw, r.text)
            detail = r.json()["detail"]
            assert words in detail and "\n" not in detail, (kw, detail)
            assert str(room.root) not in detail
            assert room.incoming() == [], kw
            assert (room.folders(), room.spool_jobs()) == before, kw
    finally:
        teacher.request("PUT", "/api/settings", json={"max_clip_seconds": 60})


def test_a_job_with_age_and_expression_renders_to_done(room, server, media):
    """The stand-ins: fran adds the age step to the face's red, LivePortrait redraws it; the
    report's rows name both with the values the page sent."""
    ida = signed_in(room, server, "ida")
    r = send(ida, media, age="30", expression="60")
    assert r.status_code == 201, r.text
    worker = start_worker(room)
    try:
        done = ida.wait(r.json()["id"])
    finally:
        stop_worker(worker)
    assert done["state"] == "done", done
    assert done["extras"] == ["expression kept (60 %)", "age +30"]
    report = ida.get(done["report"]).json()
    rows = {m["role"]: m for m in report["models"]}
    assert rows["age_modifier"]["name"] == "fran" and rows["age_modifier"]["direction"] == 30
    assert rows["expression"]["name"] == "live_portrait"
    assert report["config"]["processors"] == ["swap", "expression", "age_modifier", "enhance"]
    assert ida.delete(f"/api/jobs/{done['id']}").status_code == 204



def test_a_job_with_lips_to_a_voice_renders_with_that_voice(room, server, media):
    """The lip syncer's row names the voice by its bytes; the result's sound is the voice over
    the clip's (mix)."""
    from render.media.probe import probe

    zoe = signed_in(room, server, "zoe")
    r = send(zoe, media, voice=media.voice, voice_mix="mix")
    assert r.status_code == 201, r.text
    worker = start_worker(room)
    try:
        done = zoe.wait(r.json()["id"])
    finally:
        stop_worker(worker)
    assert done["state"] == "done", done
    assert done["extras"] == ["lips to your voice over the clip's sound"]
    report = zoe.get(done["report"]).json()
    row = next(m for m in report["models"] if m["role"] == "lip_sync")
    assert row["name"] == "wav2lip_gan_96" and row["audio_sha256"] == sha256_file(media.voice)
    (folder,) = [f for f in room.folders() if (f / "voice.wav").is_file()]
    assert probe(folder / "out" / "result.mp4").audio
    assert zoe.delete(f"/api/jobs/{done['id']}").status_code == 204
