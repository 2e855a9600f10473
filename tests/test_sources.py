"""Several source images (their mean identity) and the face map (a source per person), with the
stand-in detector, embedder and swapper: the stand-in ArcFace is a pooled colour projection, so
a face's colour is its identity, and the stand-in inswapper blends the crop toward a colour the
source identity chooses, so an output face's colour says which source it got."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import cv2
import numpy as np
import onnxruntime as ort
import pytest

from render.config import load_config
from render.faces.detect import Detector
from render.faces.embed import Embedder, normalise
from render.files import FileHashes, sha256_file
from render.models.load import load_models
from render.report import report_path
from render.sessions import LazySession
from render.source_face import SourceFaces
from render.standins import media as mf
from tests.conftest import model_args, run_cli
from tests.schedules import on_every_schedule

#: two identities the stand-ins tell apart (identity distance ≈ 0.48), both faces to the
#: detector; and two source identities
RED, YELLOW = (30, 60, 230), (30, 210, 230)
PINK, ORANGE = (150, 60, 240), (20, 130, 250)
W, H, SIDE = 640, 360, 64
FRAMES = 50


def _session(path: Path):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def people(tmp_path_factory):
    """Source and reference images, and a clip where a red and a yellow face cross: the yellow
    one passes in front of the red one."""
    d = tmp_path_factory.mktemp("people")
    for name, colour in (("red", RED), ("yellow", YELLOW), ("pink", PINK),
                         ("orange", ORANGE)):
        mf.make_source_image(d / f"{name}.png", colour=colour)

    def schedule(i: int):
        t = i / (FRAMES - 1)
        red_x, yellow_x = int(80 + 480 * t), int(560 - 480 * t)
        return [(red_x, 180, SIDE, RED), (yellow_x, 180, SIDE, YELLOW)]

    mf.make_clip(d / "cross.mp4", width=W, height=H, seconds=FRAMES / 25, faces=schedule,
                 audio=False)
    return d, schedule


def _render(d: Path, models: Path, out: Path, *keys: str, command=()
            ) -> subprocess.CompletedProcess:
    return run_cli(*command, "profile=low", f"target={d / 'cross.mp4'}", f"output={out}",
                   *model_args(models, d / "cache"), "lock.device=none", "progress=off",
                   "processors=swap", "execution.providers=cpu", "select.distance=0.25", *keys)


def test_the_mean_identity_is_the_mean_of_the_normalised_embeddings(people, standin_models,
                                                                     tmp_path):
    """Computed here from the model layer: mean of the L2-normalised embeddings at the mean raw
    length; the same bits whatever order the images come in."""
    d, _ = people
    det = Detector(LazySession(lambda: _session(standin_models / "scrfd_2.5g.onnx")),
                   "detector-scrfd", size=640, score=0.5, nms_iou=0.4)
    emb = Embedder(LazySession(lambda: _session(standin_models / "arcface_w600k_r50.onnx")))
    paths = [d / "pink.png", d / "orange.png", d / "red.png"]
    raws = []
    for p in sorted(paths, key=sha256_file):
        image = cv2.imread(str(p))
        raws.append(emb.embed(image, max(det.detect(image), key=lambda f: f.area)))
    want = np.mean([normalise(r) for r in raws], axis=0) * np.mean(
        [np.linalg.norm(r) for r in raws])
    cfg = load_config({"profile": "low", "models.dir": str(standin_models),
                       "cache_dir": str(tmp_path / "cache"), "execution.providers": "cpu",
                       "processors": "swap"})
    faces = SourceFaces(cfg, load_models(cfg), FileHashes())
    got = faces.identity(paths)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert np.array_equal(got, faces.identity(paths[::-1]))
    assert np.array_equal(faces.identity(paths[:1]), faces.source(paths[0]))
    # a swapper that takes one source crop gets the photo closest to the mean identity
    ordered = sorted(paths, key=sha256_file)
    closest = ordered[int(np.argmax([np.dot(normalise(r), normalise(want)) for r in raws]))]
    image, face = faces.best_face(paths[::-1])
    assert np.array_equal(image, cv2.imread(str(closest)))
    assert face.box[2] - face.box[0] > 100                    # its 128-px face


def test_several_sources_in_any_order_give_the_same_bytes_and_are_listed(people,
                                                                          standin_models):
    d, _ = people
    outs = []
    for n, source in enumerate((f"{d / 'pink.png'},{d / 'orange.png'}",
                                f"{d / 'orange.png'},{d / 'pink.png'}", str(d / "pink.png"))):
        out = d / f"several-{n}" / "out.mp4"
        r = _render(d, standin_models, out, f"source={source}")
        assert r.returncode == 0, r.stderr
        outs.append(out)
    assert sha256_file(outs[0]) == sha256_file(outs[1]) != sha256_file(outs[2])
    report = json.loads(report_path(outs[0]).read_text())
    assert [(Path(s["path"]).name, s["faces"]) for s in report["sources"]] == \
        [("pink.png", 1), ("orange.png", 1)]
    assert report["sources"][0]["sha256"] == sha256_file(d / "pink.png")
    folder = d / "folder"
    folder.mkdir()
    for name in ("orange.png", "pink.png"):
        (folder / name).write_bytes((d / name).read_bytes())
    out = d / "several-folder" / "out.mp4"
    r = _render(d, standin_models, out, f"source={folder}")
    assert r.returncode == 0, r.stderr
    assert sha256_file(out) == sha256_file(outs[0])           # a folder: the same two images
    verify = run_cli("verify", str(outs[0]))
    assert verify.returncode == 0, verify.stdout + verify.stderr


def _face_colours(video: Path, schedule) -> dict[str, list]:
    """Each person's mean colour inside the middle of their face box, per frame where their box
    does not touch the other's (None where it does)."""
    frames = mf.read_frames(video)
    out: dict[str, list] = {"red": [], "yellow": []}
    for i, frame in enumerate(frames):
        (rx, ry, s, _), (yx, yy, _, _) = schedule(i)
        apart = abs(rx - yx) > s + 8
        for name, (cx, cy) in (("red", (rx, ry)), ("yellow", (yx, yy))):
            patch = frame[cy - s // 6:cy + s // 6, cx - s // 6:cx + s // 6].reshape(-1, 3)
            out[name].append(patch.mean(axis=0) if apart else None)
    return out


def test_each_person_keeps_their_own_source_through_a_crossing(people, standin_models):
    """The red person becomes pink and the yellow one orange in every frame where they are
    apart, before and after the yellow face passes in front of the red one; the same bytes on
    every schedule (four segments, shards, resumed)."""
    d, schedule = people
    face_map = d / "faces.yaml"
    face_map.write_text("- reference: yellow.png\n  source: orange.png\n"
                        "- reference: red.png\n  source: [pink.png]\n")

    def render(folder: str, *keys: str, command: tuple[str, ...] = ()) -> Path:
        out = d / folder / "map.mp4"
        r = _render(d, standin_models, out, "select.mode=map", f"select.map={face_map}",
                    "stabilize.enabled=true", "segment.seconds=0.5", *keys, command=command)
        assert r.returncode == 0, r.stderr
        return out

    out, report = on_every_schedule(render)
    assert [Path(p["reference"]["path"]).name for p in report["face_map"]["people"]] and \
        {Path(p["reference"]["path"]).name: [Path(s["path"]).name for s in p["sources"]]
         for p in report["face_map"]["people"]} == {"red.png": ["pink.png"],
                                                    "yellow.png": ["orange.png"]}
    original = _face_colours(d / "cross.mp4", schedule)
    swapped = _face_colours(out, schedule)
    apart = [i for i, c in enumerate(original["red"]) if c is not None]
    assert len(apart) < FRAMES - 4                        # they do cross and touch
    assert apart[0] == 0 and apart[-1] == FRAMES - 1      # apart before and after
    # each person's swapped colour, from their first frame: every other frame has it, and it is
    # far from the other person's
    first = {name: swapped[name][0] for name in swapped}
    assert np.abs(first["red"] - first["yellow"]).max() > 20
    for name in ("red", "yellow"):
        assert np.abs(first[name] - original[name][0]).max() > 10      # swapped at all
        for i in apart:
            assert np.abs(swapped[name][i] - first[name]).max() < 8, (name, i, swapped[name][i])
    # the inline form, the entries in another order: the same bytes
    inline = f"{d / 'red.png'}={d / 'pink.png'},{d / 'yellow.png'}={d / 'orange.png'}"
    other = d / "inline" / "map.mp4"
    r = _render(d, standin_models, other, "select.mode=map", f"select.map={inline}",
                "stabilize.enabled=true", "segment.seconds=0.5")
    assert r.returncode == 0, r.stderr
    assert sha256_file(other) == sha256_file(out)


def test_a_person_not_in_the_map_is_left_as_they_are(people, standin_models):
    """Only the red person is mapped: the yellow face keeps the target's pixels."""
    d, schedule = people
    out = d / "only-red" / "out.mp4"
    r = _render(d, standin_models, out, "select.mode=map",
                f"select.map={d / 'red.png'}={d / 'pink.png'}")
    assert r.returncode == 0, r.stderr
    original, swapped = _face_colours(d / "cross.mp4", schedule), _face_colours(out, schedule)
    for i in (0, 5, FRAMES - 1):
        assert np.abs(swapped["yellow"][i] - original["yellow"][i]).max() < 6
        assert np.abs(swapped["red"][i] - original["red"][i]).max() > 10


@pytest.mark.parametrize("case", ["missing", "no-face", "one-person", "no-mode", "no-map",
                                  "with-source", "bad-yaml", "bad-inline", "empty-folder"])
def test_a_bad_face_map_or_source_list_is_one_line_and_nothing_is_written(people, standin_models,
                                                                          tmp_path, case):
    d, _ = people
    blank = tmp_path / "blank.png"
    cv2.imwrite(str(blank), np.full((200, 200, 3), (200, 120, 40), np.uint8))   # no face
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("- reference: red.png\n  source: pink.png\n  extra: 1\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    keys, says = {
        "missing": (["select.mode=map", f"select.map={d / 'red.png'}={tmp_path / 'gone.png'}"],
                    "face map source image not found"),
        "no-face": (["select.mode=map", f"select.map={blank}={d / 'pink.png'}"],
                    "no face found in face map reference image"),
        "one-person": (["select.mode=map", f"select.map={d / 'red.png'}={d / 'pink.png'},"
                        f"{d / 'pink.png'}={d / 'orange.png'},"
                        f"{d / 'orange.png'}={d / 'red.png'}"], "look like one person"),
        "no-mode": ([f"select.map={d / 'red.png'}={d / 'pink.png'}"], "select.mode=map"),
        "no-map": (["select.mode=map"], "select.mode=map needs select.map"),
        "with-source": (["select.mode=map", f"source={d / 'pink.png'}",
                         f"select.map={d / 'red.png'}={d / 'pink.png'}"], "source= is not used"),
        "bad-yaml": (["select.mode=map", f"select.map={bad_yaml}"],
                     "entry 1 needs exactly reference: and source:"),
        "bad-inline": (["select.mode=map", f"select.map={d / 'red.png'}"],
                       "is not REFERENCE=SOURCE"),
        "empty-folder": ([f"source={empty}"], "holds no image"),
    }[case]
    out = tmp_path / "out" / "x.mp4"
    r = _render(d, standin_models, out, *keys)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode != 0 and lines[-1].startswith("render: error: "), r.stderr
    assert says in lines[-1], lines[-1]
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_job_file_takes_its_sources_and_face_map_from_its_own_folder(tmp_path):
    """``render submit`` job files: every path of a source list and of an inline map is taken
    from the job file's folder (a YAML map keeps its own folder for what it names)."""
    from render.job_spec import read_job_file

    job = tmp_path / "jobs" / "job.yaml"
    job.parent.mkdir()
    job.write_text("source: [a.png, photos/b.png]\ntarget: clip.mp4\noutput: out.mp4\n"
                   "overrides:\n  select.map: ref.png=a.png+b.png,ref2.png=c.png\n")
    settings, _, _ = read_job_file(job)
    base = job.parent.resolve()
    assert settings["source"] == f"{base / 'a.png'},{base / 'photos' / 'b.png'}"
    assert settings["select.map"] == (f"{base / 'ref.png'}={base / 'a.png'}+{base / 'b.png'},"
                                      f"{base / 'ref2.png'}={base / 'c.png'}")
    job.write_text("select.map: maps/faces.yaml\ntarget: clip.mp4\noutput: out.mp4\n")
    assert read_job_file(job)[0]["select.map"] == str(base / "maps" / "faces.yaml")
