"""Review: the report's quality section and ``render review``'s contact sheet name exactly the
frames that need a look — a gap in the face longer than stabilize.fill, and the frames where a
stand-in swapper fails — and a clean clip is "ok" for every track, the same section whichever
schedule rendered it."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import cv2
import numpy as np
import pytest
import yaml
from onnx import TensorProto, helper

from conftest import model_args, run_cli
from render.config import load_config
from render.face_selection import Tracking
from render.face_stage import ChainStep, FaceStage
from render.face_window import face_filter
from render.faces import align
from render.faces.mask import paste_masks
from render.faces.tracks import TrackLinker, TrackSelection
from render.faces.types import Face
from render.files import sha256_file
from render.job_progress import describe_progress
from render.models.load import load_models
from render.pipeline import StageTimes, stream
from render.review.quality import quality_section
from render.review_sheet import sheet as contact_sheet
from render.review.recorder import SegmentReview
from render.review_sheet.reports import verdict_of_reports
from render.review.verdict import timecode
from render.spool_job import Job
from render.standins import media as mf
from render.standins.graph import Graph, finish
from render.standins.manifest import _ENTRIES
from render.standins.models import _emap
from schedules import on_every_schedule

FPS = 25
FRAMES = 60
SIDE = 128                          # a stride-16 face at detect.size 320 on a 640 x 360 frame
RED = (0, 0, 255)                   # the clip's face: far from the source to the stand-in ArcFace
MARKER = (0, 255, 255)              # yellow: as much "faceness" as red, so found the same
GAP = range(21, 29)                 # no face: 8 frames, across the segment boundary at 25
SHORT_GAP = range(47, 49)           # no face: 2 frames, which stabilize.fill bridges
FAILS = (8, 9, 10, 40)              # the marker on the face: the stand-in swapper fails there


def clip_faces(marked: bool, gaps: bool):
    """The clip's schedule: one face drifting right; the gaps and the marked frames."""
    def faces(i: int):
        if gaps and (i in GAP or i in SHORT_GAP):
            return []
        cx, cy = 280 + i, 170
        out = [(cx, cy, SIDE, RED)]
        if marked and i in FAILS:
            out.append((cx, cy, 40, MARKER))          # drawn over the face's middle
        return out
    return faces


# -- a stand-in swapper that fails where the face carries the marker ------------------------------
def make_marked_swapper(path: Path, swapped: np.ndarray) -> None:
    """The inswapper contract: where the crop's middle is yellow (green above 0.8, which no
    face or background of these clips reaches) the crop
    comes back unchanged — the output keeps the target's identity —, elsewhere ``swapped`` (the
    source face's own crop, RGB 0..1 NCHW): a perfect swap to the stand-in ArcFace."""
    g = Graph("marked")
    middle = g.op("Slice", ["target", g.const(np.array([1, 56, 56], np.int64)),
                            g.const(np.array([2, 72, 72], np.int64)),
                            g.const(np.array([1, 2, 3], np.int64))], "middle")
    green = g.op("ReduceMean", [middle], "green", axes=[1, 2, 3], keepdims=1)
    marked = g.op("Greater", [green, g.const(np.array(0.8, np.float32))], "marked")
    unused = g.op("Mul", [g.op("ReduceSum", [g.op("MatMul", ["source", "emap"])], keepdims=0),
                          g.const(np.array(0.0, np.float32))], "unused")
    out = g.op("Where", [marked, "target", g.const(swapped.astype(np.float32), "swapped")])
    g.op("Add", [out, unused], output="output")
    g.const(_emap(), name="emap")                 # the last initializer, as the contract wants
    finish(g, "marked_swapper", [helper.make_tensor_value_info("target", TensorProto.FLOAT,
                                                               [1, 3, 128, 128]),
                                 helper.make_tensor_value_info("source", TensorProto.FLOAT,
                                                               [1, 512])],
           [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, 128, 128])], path,
           doc="inswapper stand-in failing on a marker")


@pytest.fixture(scope="module")
def review_setup(tmp_path_factory, standin_models):
    """A source, the marked swapper as an overlay of the stand-ins, and three clips."""
    tmp = tmp_path_factory.mktemp("review")
    source = tmp / "source.png"
    mf.make_source_image(source)
    cfg = load_config({"profile": "low", "models.dir": str(standin_models),
                       "cache_dir": str(tmp / "cache"), "execution.providers": "cpu"})
    image = cv2.imread(str(source))
    face = max(load_models(cfg).detector.detect(image), key=lambda f: f.area)
    crop = align.warp(image, align.estimate(face.kps, "arcface_128", 128), 128)
    model = standin_models / "inswapper_marked.onnx"
    make_marked_swapper(model, (crop[:, :, ::-1].astype(np.float32) / 255).transpose(2, 0, 1)[None])
    entry = {k: v for k, v in _ENTRIES["inswapper_128"].items() if k != "variants"}
    overlay = tmp / "marked.yaml"
    overlay.write_text(yaml.safe_dump({"version": 1, "models": {"inswapper_128": {
        **entry, "file": model.name, "sha256": sha256_file(model), "licence": "test stand-in"}}}))
    clips = {}
    for name, marked, gaps in (("flawed", True, True), ("clean", False, False)):
        clips[name] = mf.make_clip(tmp / f"{name}.mp4", width=640, height=360, fps=FPS,
                                   seconds=FRAMES / FPS, audio=False,
                                   faces=clip_faces(marked, gaps))
    return SimpleNamespace(tmp=tmp, source=source, overlay=overlay, models=standin_models,
                           clips=clips)


def render_args(s, clip: str, output: Path, *keys: str) -> list[str]:
    return ["profile=low", f"source={s.source}", f"target={s.clips[clip].path}",
            f"output={output}", *model_args(s.models, s.tmp / "cache"),
            f"models.manifest={s.overlay}", "swap.precision=fp32", "segment.seconds=1",
            "lock.device=none", "progress=off", "review.every=1", "review.distance=0.15",
            "review.colour=250", *keys]


def quality(output: Path) -> dict:
    return json.loads(Path(f"{output}.report.json").read_text())["quality"]


def named_frames(section: dict) -> dict[str, set[int]]:
    """The frames each kind of finding names: missed ranges, flagged samples."""
    out: dict[str, set[int]] = {}
    for track in section["tracks"]:
        for f in track["look"]:
            a, b = f["frames"]
            out.setdefault(f["why"], set()).update(f.get("sampled") or range(a, b + 1))
    return out


def tile_frames(stdout: str) -> dict[str, set[int]]:
    """The frames ``render review``'s tile lines name, by kind ("missed", "far from")."""
    out: dict[str, set[int]] = {}
    for line in stdout.splitlines():
        if not line.startswith("track "):
            continue
        why = "missed" if " missed " in line else "distance" if "far from the source" in line \
            else line
        frames = line.rsplit("[", 1)[1].rstrip("]")
        if "sampled" in frames:
            named = {int(n) for n in frames.split("sampled ")[1].split(", ")}
        else:
            a, _, b = frames.split(" ", 1)[1].partition("-")
            named = set(range(int(a), int(b or a) + 1))
        out.setdefault(why, set()).update(named)
    return out


def tile_pixels(image: np.ndarray, k: int) -> np.ndarray:
    """The picture of the sheet's tile ``k`` (first row)."""
    top, side, gap = contact_sheet.HEADER, contact_sheet.TILE, contact_sheet.GAP
    x = gap + k * (side + gap)
    return image[top:top + side, x:x + side]


def red_share(pixels: np.ndarray) -> float:
    """The share of the clip's red face (unswapped) in ``pixels``."""
    b, g, r = (pixels[..., c].astype(int) for c in range(3))
    return float(((r > 200) & (g < 60) & (b < 60)).mean())


# -- through the command line ---------------------------------------------------------------------
@pytest.mark.parametrize("stabilize", ["true", "false"])
def test_the_report_and_the_sheet_name_exactly_the_gap_and_the_failed_frames(review_setup,
                                                                            stabilize):
    s = review_setup
    out = s.tmp / f"stabilize-{stabilize}" / "flawed.mp4"
    r = run_cli(*render_args(s, "flawed", out, f"stabilize.enabled={stabilize}"))
    assert r.returncode == 0, r.stderr
    section = quality(out)
    assert section["verdict"] == "look" and section["summary"] == "look: 1 track"
    [track] = section["tracks"]                     # one face, linked over the gaps
    expected = {"missed": set(GAP), "distance": set(FAILS)}
    assert named_frames(section) == expected
    with_face = [i for i in range(FRAMES) if i not in GAP and i not in SHORT_GAP]
    bridged = stabilize == "true"
    assert track["frames"] == [0, FRAMES - 1]
    assert track["swapped"] == len(with_face) + (len(SHORT_GAP) if bridged else 0)
    assert track["filled"] == (len(SHORT_GAP) if bridged else 0)
    assert track["misses"] == [[GAP[0], GAP[-1]]] + ([] if bridged else
                                                     [[SHORT_GAP[0], SHORT_GAP[-1]]])
    assert [n for n, _, _ in track["samples"]] == sorted(with_face + (list(SHORT_GAP)
                                                                      if bridged else []))
    far = {n for n, d, _ in track["samples"] if d > 0.15}
    assert far == set(FAILS)
    missed = next(f for f in track["look"] if f["why"] == "missed")
    assert missed["text"] == f"missed {len(GAP)} frames at {timecode(GAP[0] / FPS)}"

    sheet = s.tmp / f"sheet-{stabilize}.png"
    r = run_cli("review", str(out), "--out", str(sheet))
    assert r.returncode == 0, r.stderr
    assert tile_frames(r.stdout) == expected
    assert r.stdout.splitlines()[-1] == f"flawed.mp4: look: 1 track; contact sheet {sheet}"
    tiles = [tile_pixels(cv2.imread(str(sheet)), k) for k in range(3)]   # frames 8, 21, 40
    assert [red_share(t) > 0.2 for t in tiles] == [True, False, True]    # 21 has no face


def test_a_clean_clip_is_ok_for_every_track_and_still_gets_a_sheet(review_setup):
    s = review_setup
    out = s.tmp / "clean" / "clean.mp4"
    r = run_cli(*render_args(s, "clean", out))
    assert r.returncode == 0, r.stderr
    section = quality(out)
    assert section["verdict"] == "ok" and section["tracks"]
    assert all(t["verdict"] == "ok" and t["look"] == [] for t in section["tracks"])
    assert section["tracks"][0]["missed"] == 0
    assert max(d for _, d, _ in section["tracks"][0]["samples"]) < 0.15
    r = run_cli("review", str(out))
    assert r.returncode == 0, r.stderr
    sheet = out.with_name("clean.mp4.review.png")
    assert r.stdout == f"clean.mp4: ok; contact sheet {sheet}\n"
    assert cv2.imread(str(sheet)) is not None


def test_the_quality_section_is_the_same_on_every_schedule(review_setup, signing):
    """Sampled by the frame's number in the target (every 4th here: not a multiple of the
    pre-roll's start), one record per segment:
    one section, to the byte, rendered whole, two at once, sharded and resumed."""
    s = review_setup

    def render(folder: str, *keys: str, command: tuple[str, ...] = ()) -> Path:
        out = s.tmp / "schedules" / folder / "flawed.mp4"
        r = run_cli(*command, *render_args(s, "flawed", out, "review.every=4", *signing,
                                           "segment.seconds=0.5", *keys))
        assert r.returncode == 0, r.stderr
        return out

    resumed, _ = on_every_schedule(render)
    folders = [resumed.parent.parent / f for f in ("schedule-0", "schedule-1", "sharded")]
    sections = [quality(p / "flawed.mp4") for p in folders] + [quality(resumed)]
    digests = {hashlib.sha256(json.dumps(q, sort_keys=True, separators=(",", ":")).encode())
               .hexdigest() for q in sections}
    assert len(digests) == 1, digests
    section = sections[0]
    assert [n for n, _, _ in section["tracks"][0]["samples"]] == \
        [n for n in range(0, FRAMES, 4) if n not in GAP]
    assert named_frames(section) == {"missed": set(GAP), "distance": {8, 40}}


def test_render_jobs_shows_each_done_jobs_verdict(review_setup):
    s = review_setup
    spool = f"spool_dir={s.tmp / 'spool'}"
    r = run_cli("submit", *render_args(s, "flawed", s.tmp / "queued" / "flawed.mp4"), spool)
    assert r.returncode == 0, r.stderr
    r = run_cli("work", spool)
    assert r.returncode == 0, r.stderr
    r = run_cli("jobs", spool)
    assert r.returncode == 0 and "1 rendered; look: 1 track" in r.stdout, r.stdout


def test_render_review_refuses_what_it_cannot_review_in_one_line(review_setup):
    s = review_setup
    image = s.tmp / "picture.png"
    mf.make_image_target(image, width=320, height=180)
    off = s.tmp / "off" / "clean.mp4"
    assert run_cli(*render_args(s, "clean", off, "review.enabled=false")).returncode == 0
    assert quality(off) is None
    cases = [((str(s.clips["clean"].path),), "has no report beside it"),
             ((str(image),), "is an image"),
             ((str(s.tmp / "nothing.mp4"),), "no such file"),
             ((str(off),), "rendered without review"),
             ((), "usage: render review OUTPUT"),
             ((str(off), "--out", str(s.tmp / "sheet.jpg")), "is a .png file")]
    for args, said in cases:
        r = run_cli("review", *args)
        assert r.returncode in (2, 3) and r.stdout == "", (args, r.stdout)
        lines = r.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("render: error:") and said in lines[0], \
            (args, r.stderr)


# -- the recorder and the merge in the face stage, without ffmpeg --------------------------------
UNIT = align.TEMPLATES["arcface_112_v2"]


def face_at(cx: float, cy: float, side: float = 100.0) -> Face:
    x1, y1 = cx - side / 2, cy - side / 2
    return Face(box=np.array([x1, y1, x1 + side, y1 + side], np.float32),
                kps=(UNIT * side + [x1, y1]).astype(np.float32), score=0.9)


class Numbered:
    """A detector of a schedule's faces in frames that carry their number in pixel (0, 0)."""

    def __init__(self, schedule):
        self.schedule = schedule

    def detect(self, frame):
        return list(self.schedule(int(frame[0, 0, 0]) + 256 * int(frame[0, 0, 1])))


def numbered_frames(n: int, dark: set[int] = frozenset()) -> list[np.ndarray]:
    """Flat grey frames, their number in pixel (0, 0); in ``dark`` frames the face is darker."""
    frames = []
    for i in range(n):
        f = np.full((240, 640, 3), 90, np.uint8)
        if i in dark:
            f[60:180, 150:450] = 40
        f[0, 0, 0], f[0, 0, 1] = i % 256, i // 256
        frames.append(f)
    return frames


def brightness(frame: np.ndarray, face: Face) -> np.ndarray:
    """A stand-in identity: the face middle's brightness, as a direction."""
    crop = align.warp(frame, align.estimate(face.kps, "arcface_112_v2", 16), 16)[4:12, 4:12]
    v = float(crop.mean()) / 255
    return np.array([v, 1 - v], np.float32)


def negate_unless_dark(crops: np.ndarray) -> np.ndarray:
    """Swaps (negates) every crop but one whose middle is dark: that one fails."""
    dark = crops[:, 56:72, 56:72].reshape(len(crops), -1).mean(axis=1) < 60
    return np.where(dark[:, None, None, None], crops, 255 - crops)


def stage_with_review(schedule, *, tracked: bool, every: int) -> FaceStage:
    proc = SimpleNamespace(name="swap", template="arcface_128", size=128, max_batch=None,
                           crop_size=lambda kps: 128, opacity=1.0, colour_crop=None,
                           needs_target_identity=False, needs_landmarks=False, own_mask=False,
                           needs_original=False, needs_frame_numbers=False)
    tracks = Tracking(TrackLinker(max_missed=3), TrackSelection("one"), 3,
                      face_filter(0.05, 10.0, 0.15), 3) if tracked else None
    source = brightness(np.full((240, 640, 3), 165, np.uint8), face_at(300, 120))
    review = SegmentReview(every=every, embed=brightness, identity=lambda i: source,
                           tracked=tracked)
    return FaceStage(detector=Numbered(schedule), select=lambda frame, faces: faces[:1],
                     chain=[ChainStep(proc, negate_unless_dark, paste_masks("box", 128, 0.0, 0.3))],
                     times=StageTimes(), tracks=tracks, review=review)


def plan_of(segments, frames: int, **review) -> SimpleNamespace:
    config = {"review.enabled": True, "review.every": 1, "review.distance": 0.05,
              "review.misses": 3, "review.jump": 0.25, "review.colour": 500.0, **review}
    return SimpleNamespace(start=0, end=frames, frames=frames, fps="25", width=640, height=240,
                           output_size=(640, 240), config=config, kind="video",
                           segments=[SimpleNamespace(index=i, start=a, end=b)
                                     for i, (a, b) in enumerate(segments)])


def render_segments(schedule, bounds, frames, *, tracked, every=1, lanes=1, dark=frozenset()):
    """Each segment [a, b) through its own stage with a pre-roll of 15 and the look-ahead, as
    the executor renders it; the records by segment."""
    records = {}
    all_frames = numbered_frames(frames, dark)
    for index, (a, b) in enumerate(bounds):
        stage = stage_with_review(schedule, tracked=tracked, every=every)
        first = max(0, a - 15)
        stage.segment(start=a, preroll=a - first, frames=b - a)
        decoded = all_frames[first:min(frames, b + stage.lookahead)]
        stream(iter(decoded), lambda f: None, stage.prepare, frames_in_flight=4,
               times=stage.times, lanes=lanes, finish=stage.finish, held=stage.lookahead)
        records[index] = stage.review.record(index, a, b)
    return records


def moving(i):
    return [face_at(200 + 2 * i, 120, 120)]


@pytest.mark.parametrize("tracked", [True, False])
def test_segments_merge_into_one_track_whatever_the_cut(tracked):
    """A miss across a segment boundary and failed swaps: one track over the whole render,
    and the same section cut into one segment or three, on one lane or two."""
    hidden = set(range(18, 25))
    dark = {5, 6, 33}
    schedule = lambda i: [] if i in hidden else moving(i)          # noqa: E731
    sections = []
    for bounds, lanes in (([(0, 40)], 1), ([(0, 20), (20, 30), (30, 40)], 2)):
        records = render_segments(schedule, bounds, 40, tracked=tracked, lanes=lanes, dark=dark)
        sections.append(quality_section(plan_of(bounds, 40), records))
    for s in sections:
        s.pop("unreviewed")
    assert sections[0] == sections[1]
    [track] = sections[0]["tracks"]
    assert track["misses"] == [[18, 24]] and track["missed"] == 7
    assert named_frames(sections[0]) == {"missed": set(hidden), "distance": dark}
    assert track["detected"] == 40 - len(hidden)


def test_sampling_follows_the_frames_number_in_the_target():
    """The second segment's decoded frames start at 7 (its pre-roll): its samples still fall
    on the target's multiples of 4."""
    records = render_segments(moving, [(0, 22), (22, 40)], 40, tracked=True, every=4)
    section = quality_section(plan_of([(0, 22), (22, 40)], 40, **{"review.every": 4}), records)
    assert [n for n, _, _ in section["tracks"][0]["samples"]] == list(range(0, 40, 4))
    assert section["verdict"] == "ok"


def test_a_segment_without_a_record_is_unreviewed_and_leaves_no_miss():
    records = render_segments(moving, [(0, 10), (10, 20), (20, 30)], 30, tracked=True)
    records[1] = None                                   # rendered with review.enabled=false
    section = quality_section(plan_of([(0, 10), (10, 20), (20, 30)], 30), records)
    assert section["unreviewed"] == [[10, 19]]
    assert section["verdict"] == "ok" and section["tracks"][0]["missed"] == 0


def test_colour_shift_and_crop_jumps_are_flagged_where_they_happen():
    """The chain's negation moves the face's colour far from the target's (flagged at a low
    review.colour); a face that leaps 60 px in one frame is a crop jump."""
    schedule = lambda i: [face_at(200 + (60 if i >= 12 else 0) + i, 120, 120)]   # noqa: E731
    records = render_segments(schedule, [(0, 20)], 20, tracked=False, every=5)
    section = quality_section(plan_of([(0, 20)], 20, **{"review.colour": 20.0,
                                                         "review.distance": 2.0}), records)
    [track] = section["tracks"]
    jumps = [f for f in track["look"] if f["why"] == "jump"]
    assert [f["frames"] for f in jumps] == [[12, 12]] and jumps[0]["value"] > 0.25
    colour = [f for f in track["look"] if f["why"] == "colour"]
    assert [f["sampled"] for f in colour] == [[0, 5, 10, 15]]
    assert all(c > 20 for _, _, c in track["samples"])


def test_time_codes_and_the_verdict_of_a_jobs_reports(tmp_path):
    assert [timecode(s) for s in (0, 41.24, 59.99, 3723.4)] == \
        ["00:00.0", "00:41.2", "00:59.9", "1:02:03.4"]
    reports = []
    for name, verdicts in (("a", ["ok", "look"]), ("b", ["look"]), ("c", None)):
        path = tmp_path / f"{name}.report.json"
        section = None if verdicts is None else {"tracks": [{"verdict": v} for v in verdicts]}
        path.write_text(json.dumps({"quality": section}))
        reports.append(path)
    assert verdict_of_reports(reports) == "look: 2 tracks"
    assert verdict_of_reports(reports[2:]) is None
    job = Job("j1", "done", {}, result={"rendered": 2, "review": "ok"})
    assert describe_progress(job) == "2 rendered; ok"
