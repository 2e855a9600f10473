"""The classroom's second photo (issue 42), through the JSON API of a real ``render serve`` on
127.0.0.1 with a real ``render work`` worker and the stand-in models: another photo of the same
person (``source=P1,P2``), or a second person whose face is clicked on the target (the server
crops the clicked faces as a face map's references), and every bad input as one line.

The stand-in embedder's identity is a face's colour: YELLOW and DARK are two people to it
(identity distance about 1.0), RED and YELLOW are near enough (about 0.48, under the default
``select.distance`` 0.6) that the renderer would take them for one person."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import cv2
import numpy as np
import pytest
import yaml

from render.report import report_path
from render.standins import media as mf
from web_classroom import Classroom, Client, Server, signed_in, start_worker, stop_worker

RED, YELLOW, DARK = (30, 60, 230), (30, 210, 230), (10, 20, 120)
PINK, ORANGE = (150, 60, 240), (20, 130, 250)
W, H, SIDE, FPS = 640, 360, 64, 25


def yellow_x(i: int) -> int:
    """The yellow face moves 8 px a frame: the wrong frame would put it 8 px off."""
    return 120 + 8 * i


def people(i: int):
    return [(yellow_x(i), 180, SIDE, YELLOW), (500, 180, SIDE, DARK)]


@pytest.fixture(scope="module")
def media(tmp_path_factory):
    d = tmp_path_factory.mktemp("secondmedia")
    wall = d / "wall.jpg"
    cv2.imwrite(str(wall), mf.background(480, 480, 0))
    return SimpleNamespace(
        photo1=mf.make_source_image(d / "me.jpg", colour=PINK).path,
        photo2=mf.make_source_image(d / "friend.png", colour=ORANGE).path,
        clip=mf.make_clip(d / "two people.mp4", width=W, height=H, seconds=1.0, faces=people,
                          audio=False),
        lookalike=mf.make_clip(d / "lookalike.mp4", width=W, height=H, seconds=1.0, audio=False,
                               faces=lambda i: [(160, 180, SIDE, RED), (480, 180, SIDE, YELLOW)]),
        picture=mf.make_image_target(d / "picture.png", width=W, height=H,
                                     faces=[(160, 180, SIDE, YELLOW), (480, 180, SIDE, DARK)]),
        wall=wall)


@pytest.fixture(scope="module")
def room(tmp_path_factory, standin_models):
    return Classroom(tmp_path_factory.mktemp("secondclass"), standin_models)


@pytest.fixture(scope="module")
def server(room):
    s = Server(room)
    yield s
    assert s.stop() == 0, s.text()


def submit(client: Client, source: Path, target: Path, source2: Path | None = None,
           **fields: str):
    files = {"source": (source.name, source.read_bytes()),
             "target": (target.name, target.read_bytes())}
    if source2 is not None:
        files["source2"] = (source2.name, source2.read_bytes())
    return client.post("/api/jobs", data={"profile": "low", "consent": "yes", **fields},
                       files=files)


def spec(room: Classroom, job_id: str) -> dict:
    (path,) = [p for p in room.spool.glob(f"*/{job_id}.yaml")]
    return yaml.safe_load(path.read_text())


def pick(clip, index: int, face: int, t: float | None = None, dx: int = 0) -> str:
    """The centre of face ``face`` in frame ``index``, at the time that frame is shown."""
    x1, y1, x2, y2 = clip.boxes[index][face]
    t = index / FPS + 0.01 if t is None else t
    return f"{t:.3f},{(x1 + x2) // 2 + dx},{(y1 + y2) // 2}"


def near(image: np.ndarray, colour) -> np.ndarray:
    return (np.abs(image.astype(int) - np.array(colour)).max(axis=2) < 30)


def test_another_photo_of_the_same_person_gives_both_as_the_source(room, server, media):
    ann = signed_in(room, server, "ann")
    r = submit(ann, media.photo1, media.clip.path, media.photo2, source2_is="same-person")
    assert r.status_code == 201, r.text
    job = r.json()
    assert job["mode"] == "2 photos of one person" and job["references"] == []
    assert job["source"]["name"] == "me.jpg" and job["source2"]["name"] == "friend.png"
    folder = room.state / "files" / spec(room, job["id"])["meta"]["classroom"]["folder"]
    settings = spec(room, job["id"])["settings"]
    assert settings["source"] == f"{folder / 'source.jpg'},{folder / 'source2.png'}"
    assert "select.mode" not in settings and "select.map" not in settings
    assert (folder / "source2.png").read_bytes() == media.photo2.read_bytes()
    assert ann.get(f"/api/files/{job['source2']['file']}").content == media.photo2.read_bytes()
    assert room.incoming() == []
    tess = signed_in(room, server, "tess", "teacher")          # the teacher's list says it too
    assert [j["mode"] for j in tess.get("/api/jobs").json() if j["id"] == job["id"]] == \
        ["2 photos of one person"]

    worker = start_worker(room)
    try:
        done = ann.wait(job["id"])
    finally:
        stop_worker(worker)
    assert done["state"] == "done", done
    report = json.loads(report_path(Path(settings["output"])).read_text())
    assert sorted(Path(s["path"]).name for s in report["sources"]) == ["source.jpg", "source2.png"]
    assert ann.delete(f"/api/jobs/{job['id']}").status_code == 204
    assert not folder.exists()


def test_a_second_person_is_a_face_map_of_the_faces_clicked(room, server, media):
    """Photo 1 goes to the (moving) yellow face clicked in frame 12, photo 2 to the dark one
    clicked in frame 20; the references are cut around those faces in those very frames; the job
    renders, each person with their own photo."""
    bo = signed_in(room, server, "bo")
    clip = media.clip
    r = submit(bo, media.photo1, clip.path, media.photo2, source2_is="second-person",
               pick1=pick(clip, 12, 0), pick2=pick(clip, 20, 1))
    assert r.status_code == 201, r.text
    job = r.json()
    assert job["mode"] == "2 people"
    assert [ref["name"] for ref in job["references"]] == ["face 1.png", "face 2.png"]
    classroom = spec(room, job["id"])["meta"]["classroom"]
    folder = room.state / "files" / classroom["folder"]
    settings = spec(room, job["id"])["settings"]
    assert "source" not in settings and settings["select.mode"] == "map"
    assert settings["select.map"] == (f"{folder / 'reference1.png'}={folder / 'source.jpg'},"
                                      f"{folder / 'reference2.png'}={folder / 'source2.png'}")

    for n, index, face, colour, other in ((1, 12, 0, YELLOW, DARK), (2, 20, 1, DARK, YELLOW)):
        ref = cv2.imread(str(folder / f"reference{n}.png"))
        record = classroom[f"reference{n}"]
        assert abs(record["at"] - index / FPS - 0.01) < 1e-6
        # the whole clicked face, from that frame: where the truth box falls around the
        # detected box the reference is centred on
        x1, y1, x2, y2 = clip.boxes[index][face]
        bx1, by1, bx2, by2 = record["box"]
        assert bx1 <= (x1 + x2) / 2 <= bx2 and by1 <= (y1 + y2) / 2 <= by2
        ys, xs = np.nonzero(near(ref, colour))
        assert xs.max() - xs.min() + 1 == pytest.approx(SIDE, abs=2)
        assert ys.max() - ys.min() + 1 == pytest.approx(SIDE, abs=2)
        centre = ref.shape[1] / 2
        assert xs.min() == pytest.approx(x1 - (bx1 + bx2) / 2 + centre, abs=2), (n, xs.min())
        assert ys.min() == pytest.approx(y1 - (by1 + by2) / 2 + centre, abs=2)
        assert not near(ref, other).any()                   # the other person is not in it
        assert ref.shape[0] == ref.shape[1] >= 5 * SIDE - 2
        assert bo.get(f"/api/files/{record['file']}").content == \
            (folder / f"reference{n}.png").read_bytes()

    worker = start_worker(room)
    try:
        done = bo.wait(job["id"])
    finally:
        stop_worker(worker)
    assert done["state"] == "done", done
    output = Path(settings["output"])
    report = json.loads(report_path(output).read_text())
    assert {Path(p["reference"]["path"]).name: [Path(s["path"]).name for s in p["sources"]]
            for p in report["face_map"]["people"]} == {"reference1.png": ["source.jpg"],
                                                       "reference2.png": ["source2.png"]}
    # each person got a photo of their own: the two faces come out in two other colours
    frames = mf.read_frames(output)
    for i in (0, 12, 24):
        (ya, yb, _, _), (da, db, _, _) = clip.boxes[i]
        yellow = frames[i][170:190, ya + 22:ya + 42].reshape(-1, 3).mean(axis=0)
        dark = frames[i][170:190, da + 22:da + 42].reshape(-1, 3).mean(axis=0)
        assert np.abs(yellow - np.array(YELLOW)).max() > 10, (i, yellow)
        assert np.abs(dark - np.array(DARK)).max() > 10, (i, dark)
        assert np.abs(yellow - dark).max() > 20, (i, yellow, dark)
    assert bo.delete(f"/api/jobs/{job['id']}").status_code == 204


def test_a_second_person_on_a_picture_target(room, server, media):
    cy = signed_in(room, server, "cy")
    picture = media.picture
    (a, b) = [f"0,{(x1 + x2) // 2},{(y1 + y2) // 2}" for x1, y1, x2, y2 in picture.boxes]
    r = submit(cy, media.photo1, picture.path, media.photo2, source2_is="second-person",
               pick1=b, pick2=a)
    assert r.status_code == 201, r.text
    job = r.json()
    folder = room.state / "files" / spec(room, job["id"])["meta"]["classroom"]["folder"]
    assert near(cv2.imread(str(folder / "reference1.png")), DARK).any()
    assert not near(cv2.imread(str(folder / "reference1.png")), YELLOW).any()
    assert near(cv2.imread(str(folder / "reference2.png")), YELLOW).any()
    assert cy.delete(f"/api/jobs/{job['id']}").status_code == 204


def test_bad_second_photos_and_picks_are_one_line_and_leave_nothing(room, server, media):
    dee = signed_in(room, server, "dee")
    clip = media.clip
    good1, good2 = pick(clip, 12, 0), pick(clip, 12, 1)
    before = (room.folders(), room.spool_jobs())
    cases = [
        (dict(pick1=good1), "a second person: click on the target the face that becomes each"),
        (dict(pick2=good2), "a second person: click on the target the face that becomes each"),
        (dict(pick1="abc", pick2=good2), "pick1: expected seconds,x,y (e.g. 1.5,320,180), "
                                         "got 'abc'"),
        (dict(pick1=good1, pick2="0.5,300"), "pick2: expected seconds,x,y"),
        (dict(pick1="nan,10,10", pick2=good2), "pick1: expected seconds,x,y"),
        (dict(pick1=good1, pick2="0.5,700,180"),
         "pick2 (700, 180) is outside the frame of the target 'two people.mp4' (640 × 360 pixels)"),
        (dict(pick1="0.5,-1,180", pick2=good2), "pick1 (-1, 180) is outside the frame"),
        (dict(pick1="1.5,200,180", pick2=good2),
         "pick1 is at 1.5 s, past the end of the target 'two people.mp4' (1.00 s long)"),
        (dict(pick1="-0.5,200,180", pick2=good2), "pick1 is at -0.5 s: a time from 0 on"),
        (dict(pick1=good1, pick2="0.5,320,330"),
         "pick2: no face at (320, 330) at 0.50 s in the target 'two people.mp4' (the server "
         "finds 2 faces in that frame): click inside a face"),
        (dict(pick1=good1, pick2=pick(clip, 12, 0, dx=10)),
         "pick1 and pick2 are on the same face: click a different person for each photo"),
    ]
    for fields, says in cases:
        check(room, dee, before, submit(dee, media.photo1, clip.path, media.photo2,
                                        source2_is="second-person", **fields), says)
    # the two faces of a clip the renderer would take for one person
    look = media.lookalike
    check(room, dee, before, submit(dee, media.photo1, look.path, media.photo2,
                                    source2_is="second-person", pick1=pick(look, 5, 0),
                                    pick2=pick(look, 5, 1)),
          "the two faces you clicked look like one person to the renderer")
    # the second photo itself, and what it is
    check(room, dee, before, submit(dee, media.photo1, clip.path, media.wall,
                                    source2_is="same-person"),
          "no face found in the second photo 'wall.jpg': upload a clear photo of one face")
    check(room, dee, before, submit(dee, media.photo1, clip.path, media.photo2),
          "say what the second photo 'friend.png' is: source2_is=same-person")
    check(room, dee, before, submit(dee, media.photo1, clip.path, media.photo2,
                                    source2_is="both"), "say what the second photo")
    check(room, dee, before, submit(dee, media.photo1, clip.path, media.photo2,
                                    source2_is="same-person", pick1=good1, pick2=good2),
          "pick1 and pick2 are for a second person: leave them out")
    check(room, dee, before, submit(dee, media.photo1, clip.path, source2_is="second-person",
                                    pick1=good1, pick2=good2),
          "source2_is, pick1, pick2 given without a second photo")
    check(room, dee, before, submit(dee, media.photo1, clip.path, media.clip.path,
                                    source2_is="same-person"),
          "the second photo 'two people.mp4' is a video: upload a photo")
    # a picture has no time but 0
    picture = media.picture
    check(room, dee, before, submit(dee, media.photo1, picture.path, media.photo2,
                                    source2_is="second-person", pick1="0.5,160,180",
                                    pick2="0,480,180"),
          "pick1 is at 0.5 s, past the end: the target 'picture.png' is a picture")
    assert dee.get("/api/jobs").json() == []


def check(room: Classroom, client: Client, before, r, says: str) -> None:
    assert r.status_code == 422, (says, r.status_code, r.text)
    detail = r.json()["detail"]
    assert says in detail and "\n" not in detail, (says, detail)
    assert str(room.root) not in detail
    assert room.incoming() == [], says
    assert (room.folders(), room.spool_jobs()) == before, says


def test_the_second_photo_reads_as_the_students_files_in_messages():
    from render.spool import Job
    from render.web.views import job_view
    from render.web.wording import people

    folder = "/srv/class/files/e211f66b6835a719"
    error = (f"face map select.map: no face found in face map reference image "
             f"{folder}/reference2.png; or {folder}/source2.png, not {folder}/target.mp4")
    settings = {"select.mode": "map", "target": f"{folder}/target.mp4",
                "select.map": f"{folder}/reference1.png={folder}/source.jpg,"
                              f"{folder}/reference2.png={folder}/source2.png",
                "output": f"{folder}/out/result.mp4"}
    job = Job("0badf00d", "failed", {
        "owner": "ann", "settings": settings,
        "meta": {"classroom": {"folder": "e211f66b6835a719", "target": {"name": "My day.mp4"},
                               "source": {"name": "me.jpg"}, "source2": {"name": "pal.png"},
                               "reference1": {"name": "face 1.png", "file": "a"},
                               "reference2": {"name": "face 2.png", "file": "b"}}}},
        result={"error": error})
    seen = job_view(job, order={}, retention=7, output=None, cancelling=False, full=False)
    assert seen["error"] == ("face map select.map: no face found in face map reference image "
                             "the face you clicked for the second photo; or 'pal.png', not "
                             "'My day.mp4'")
    assert seen["mode"] == "2 people" and [r["file"] for r in seen["references"]] == ["a", "b"]
    assert people({"source": "/a/source.jpg,/a/source2.jpg"}) == "2 photos of one person"
    assert people({"source": "/a/source.jpg"}) is None


@pytest.mark.parametrize("folder_name", ["plain", "a=b+c", "with,comma"])
def test_the_face_map_is_named_inline_or_by_a_yaml_file_when_a_path_would_break_it(
        tmp_path, folder_name):
    """The inline form splits on ',', '=' and '+': a classroom folder whose path holds one of
    them gets a faces.yaml beside the uploads instead (the renderer reads the same map back);
    two photos of one person cannot be named with a comma in the path: one line, 503."""
    from render.sources import read_face_map
    from render.web.errors import Refused
    from render.web.picks import OTHER, SAME, Pick, Reference, Second
    from render.web.uploads import ReceivedFile

    folder = tmp_path / folder_name
    folder.mkdir()
    source = folder / "source.jpg"
    source.write_bytes(b"first photo")
    image = np.full((50, 50, 3), 127, np.uint8)

    def second(kind: str) -> Second:
        part = tmp_path / f"{kind}.part"
        part.write_bytes(b"second photo")
        refs = [Reference(Pick(n, 0.0, 10, 10), (0, 0, 20, 20), image) for n in (1, 2)] \
            if kind == OTHER else []
        return Second(kind, ReceivedFile("source2", "pal.png", part, 12), ".png", refs)

    other = second(OTHER)
    rows = other.store(folder)
    assert [r[0] for r in rows] == ["source2", "reference1", "reference2"]
    assert (folder / "source2.png").read_bytes() == b"second photo"
    assert (cv2.imread(str(folder / "reference2.png")) == image).all()
    keys = other.settings(source)
    assert keys["select.mode"] == "map" and "source" not in keys
    entries = [(e.reference, e.sources) for e in read_face_map(keys["select.map"]).entries]
    assert entries == [(folder / "reference1.png", (source,)),
                       (folder / "reference2.png", (folder / "source2.png",))]
    assert keys["select.map"].endswith("faces.yaml") == (folder_name != "plain")

    same = second(SAME)
    same.store(folder)
    if folder_name == "with,comma":
        with pytest.raises(Refused) as refused:
            same.settings(source)
        assert refused.value.status == 503 and "comma" in str(refused.value)
    else:
        assert same.settings(source) == {"source": f"{source},{folder / 'source2.png'}"}
