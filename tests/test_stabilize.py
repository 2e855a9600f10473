"""Face tracks, the One-Euro filter, filling short misses, the segment's pre-roll and look-ahead in
the face stage, and the face debugger."""
from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from render.face_debug import FaceDebug
from render.face_stage import ChainStep, FaceStage, Tracking
from render.face_window import DETECTED, FILLED, FaceWindow, TrackFace, face_filter
from render.faces.align import TEMPLATES, estimate
from render.faces.mask import paste_masks
from render.faces.stabilize import FaceFilter, OneEuro, local_linear
from render.faces.tracks import TrackLinker, TrackSelection
from render.faces.types import Face
from render.pipeline import StageTimes, stream

UNIT_KPS = TEMPLATES["arcface_112_v2"]          # the 5 points in a unit face square


def face_at(cx: float, cy: float, side: float = 100.0, score: float = 0.9) -> Face:
    x1, y1 = cx - side / 2, cy - side / 2
    return Face(box=np.array([x1, y1, x1 + side, y1 + side], np.float32),
                kps=(UNIT_KPS * side + [x1, y1]).astype(np.float32), score=score)


# -- the filter -----------------------------------------------------------------------------------
def test_one_euro_steadies_a_still_point_and_follows_a_moving_one():
    rng = np.random.default_rng(0)
    still = 100 + rng.normal(0, 1.0, (200, 1, 2))           # a pixel of noise on a still point
    f = OneEuro(min_cutoff=0.02, beta=4.0, d_cutoff=0.15, scale=100.0)
    out = np.array([f(p) for p in still])
    assert np.array_equal(out[0], still[0])                  # starts where the input starts
    jitter_raw = np.diff(still[50:], 2, axis=0).std()
    jitter_out = np.diff(out[50:], 2, axis=0).std()
    assert jitter_out < jitter_raw / 4
    # a face moving 5 % of its width per frame: the cutoff opens, the lag stays near a frame
    moving = np.array([[[100 + 5.0 * i, 100.0]] for i in range(100)])
    f = OneEuro(min_cutoff=0.02, beta=4.0, d_cutoff=0.15, scale=100.0)
    out = np.array([f(p) for p in moving])
    lag_px = moving[-1, 0, 0] - out[-1, 0, 0]
    assert 0 <= lag_px < 5.0 * 1.5


def _pose(matrix: np.ndarray) -> np.ndarray:
    """(scale, angle in degrees) of a 2 x 3 similarity."""
    return np.array([np.hypot(matrix[0, 0], matrix[1, 0]),
                     np.degrees(np.arctan2(matrix[1, 0], matrix[0, 0]))])


def test_a_moving_face_keeps_its_crop_steady_in_scale_and_angle():
    """A face crossing the frame at 4 % of its width per frame, its points trembling by half a
    percent each: the crop transform's scale and angle (what the crop's corners feel most) stay
    smoothed, because the filter gives the face's pose and shape their own speeds; filtered point
    by point (the same One-Euro on every point, as before), the move opened the cutoff for the
    tremble too. The crop's centre still follows the move within a frame and a half."""
    rng = np.random.default_rng(38)
    truth = [face_at(100 + 4.0 * i, 300) for i in range(120)]
    noisy = [Face(f.box, (f.kps + rng.normal(0, 0.5, f.kps.shape)).astype(np.float32), f.score)
             for f in truth]
    params = {"min_cutoff": 0.05, "beta": 10.0, "d_cutoff": 0.15}
    smooth = FaceFilter(noisy[0], **params)
    used = [smooth(f) for f in noisy]
    each = OneEuro(**params, scale=100.0)
    by_point = [Face(f.box, each(f.kps).astype(np.float32), f.score) for f in noisy]
    jitter = {}
    for name, faces in (("raw", noisy), ("used", used), ("by point", by_point)):
        poses = np.array([_pose(estimate(f.kps, "arcface_128", 128)) for f in faces])
        jitter[name] = np.diff(poses[20:], 2, axis=0).std(axis=0)
    assert (jitter["used"] < jitter["raw"] / 3).all(), jitter
    assert (jitter["used"] < jitter["by point"] / 2).all(), jitter
    lag = (np.array([f.kps.mean(axis=0) for f in truth[20:]]) -
           np.array([f.kps.mean(axis=0) for f in used[20:]]))[:, 0].mean() / 4.0
    assert 0 <= lag < 1.5, lag


def test_the_centred_line_follows_a_steady_movement_without_lag():
    t = np.arange(7.0)
    ramp = np.stack([np.array([[10.0 + 3 * i, 5.0 - i]]) for i in t])
    assert np.allclose(local_linear(t, ramp, 3.0), ramp[3])
    assert np.allclose(local_linear(t[:4], ramp[:4], 3.0), ramp[3])     # one-sided: still no lag
    assert np.allclose(local_linear(t[:1], ramp[:1], 0.0), ramp[0])
    rng = np.random.default_rng(1)
    noisy = ramp + rng.normal(0, 1.0, ramp.shape)
    assert np.abs(local_linear(t, noisy, 3.0) - ramp[3]).max() < np.abs(noisy - ramp).max()


def test_window_with_a_centred_line_waits_for_its_frames_either_side():
    window = FaceWindow(fill=1, make_filter=face_filter(0.05, 10.0, 0.15), window=3)
    assert window.lookahead == 3
    out = []
    for i in range(10):
        out += window.push(np.zeros((2, 2, 3), np.uint8),
                           [TrackFace(0, face_at(100 + 4 * i, 100), DETECTED, True)])
    assert [e.index for e in out] == list(range(7))
    out += window.finish()
    # a steady movement of 4 px a frame: the used points trail the raw ones by well under half
    # a frame (0.4: the line adds no lag; what is left is the One-Euro's, its cutoff open)
    assert all(np.allclose(e.faces[0].used.kps, e.faces[0].raw.kps, atol=1.6) for e in out)


# -- tracks ---------------------------------------------------------------------------------------
def test_tracks_keep_their_ids_through_short_misses_and_end_after_long_ones():
    linker = TrackLinker(max_missed=2)
    a, b = face_at(100, 100), face_at(400, 100)
    assert linker.link([a, b]) == [0, 1]
    assert linker.link([face_at(404, 102), face_at(105, 98)]) == [1, 0]    # moved, swapped order
    assert linker.link([]) == [] and linker.link([]) == []                 # missed twice
    assert linker.link([face_at(110, 100)]) == [0]                         # found again
    for _ in range(3):
        linker.link([face_at(110, 100)])
    assert linker.alive() == {0}                                           # 1 missed 3 > 2: ended
    assert linker.link([face_at(404, 102), face_at(110, 100)]) == [2, 0]   # a new track


def test_selection_one_holds_its_track_until_another_face_is_clearly_larger():
    select = TrackSelection("one")
    frame = np.zeros((8, 8, 3), np.uint8)
    a, b = face_at(100, 100, 100), face_at(400, 100, 105)
    assert set(select(frame, [a], [0], {0})) == {0}
    assert set(select(frame, [a, b], [0, 1], {0, 1})) == {0}           # about the same size: held
    assert set(select(frame, [b], [1], {0, 1})) == {0}                 # 0 missed, still alive
    large = face_at(400, 100, 150)
    assert set(select(frame, [a, large], [0, 1], {0, 1})) == {1}       # 2.25 x the area: the largest
    assert set(select(frame, [a], [0], {0})) == {0}                    # track 1 ended
    assert TrackSelection("many")(frame, [a, b], [0, 1], {0, 1, 5}) == {0: 0, 1: 0, 5: 0}


def test_selection_reference_decides_once_per_track():
    """mode=reference on tracks: a face is embedded when its track starts and every
    ``embed_every`` detections; the decision holds for the track, also in frames it is missed."""
    from render.faces.select import ReferenceTracks

    reference = np.array([1.0, 0.0])
    like, unlike = np.array([1.0, 0.05]), np.array([0.0, 1.0])
    calls = []

    def embed(frame, face):
        calls.append(float(face.box[0]))
        return like if face.box[0] < 250 else unlike

    select = TrackSelection("reference", ReferenceTracks(embed, reference, distance=0.6, every=5,
                                                         margin=0.1))
    frame = np.zeros((8, 8, 3), np.uint8)
    a, b = face_at(100, 100), face_at(400, 100)
    for _ in range(4):
        assert set(select(frame, [a, b], [0, 1], {0, 1})) == {0}
    assert len(calls) == 2                                        # once per track
    assert set(select(frame, [b], [1], {0, 1})) == {0}                 # track 0 missed: still chosen
    select(frame, [a, b], [0, 1], {0, 1})     # track 1's 6th detection, track 0's 5th
    assert calls[2:] == [float(b.box[0])]                         # 5 after its embedding
    assert set(select(frame, [b], [1], {1})) == set()                  # track 0 ended


# -- the window -----------------------------------------------------------------------------------
def _push_all(window, per_frame):
    out = []
    for i, faces in enumerate(per_frame):
        out += window.push(np.full((2, 2, 3), i, np.uint8),
                           [TrackFace(0, f, DETECTED, True) for f in faces])
    return out + window.finish()


def test_window_fills_misses_up_to_fill_frames_by_interpolation():
    track = [[face_at(100 + 10 * i, 100)] for i in range(10)]
    track[3] = track[4] = []                                 # a miss of two frames
    track[7] = []                                            # and of one
    out = _push_all(FaceWindow(fill=2, make_filter=None), track)
    assert [e.index for e in out] == list(range(10))
    assert [e.faces[0].how for e in out].count(FILLED) == 3
    assert np.allclose(out[3].faces[0].used.kps, face_at(130, 100).kps, atol=1e-4)
    assert np.allclose(out[4].faces[0].used.box, face_at(140, 100).box, atol=1e-4)
    assert all(e.faces[0].selected for e in out)


def test_window_does_not_invent_a_face_after_a_long_miss_or_past_the_end():
    track = [[face_at(100, 100)]] + [[]] * 3 + [[face_at(100, 100)]] + [[]] * 2
    out = _push_all(FaceWindow(fill=2, make_filter=None), track)
    assert [sorted(e.faces) for e in out] == [[0], [], [], [], [0], [], []]


def test_window_holds_back_exactly_fill_frames():
    window = FaceWindow(fill=3, make_filter=face_filter(0.02, 4.0, 0.15))
    released = [len(window.push(np.zeros((2, 2, 3), np.uint8), [])) for _ in range(6)]
    assert released == [0, 0, 0, 1, 1, 1] and len(window.finish()) == 3


# -- the stage ------------------------------------------------------------------------------------
class ScheduledDetector:
    """Finds the faces a schedule puts in each frame; the frame's number is its pixel (0, 0)."""

    def __init__(self, schedule):
        self.schedule = schedule
        self.calls = 0

    def detect(self, frame):
        self.calls += 1
        return list(self.schedule(int(frame[0, 0, 0]) + 256 * int(frame[0, 0, 1])))


def _frames(n):
    frames = []
    for i in range(n):
        f = np.full((240, 640, 3), 90, np.uint8)
        f[0, 0, 0], f[0, 0, 1] = i % 256, i // 256
        frames.append(f)
    return frames


def _negating_chain():
    proc = SimpleNamespace(name="swap", template="arcface_128", size=128, max_batch=None,
                           crop_size=lambda kps: 128, opacity=1.0, colour_crop=None,
                           needs_target_identity=False, needs_landmarks=False, own_mask=False,
                           needs_original=False, needs_frame_numbers=False)
    return [ChainStep(proc, lambda crops: 255 - crops, paste_masks("box", 128, 0.0, 0.3))]


def _stage(schedule, *, stabilize=True, fill=3, window=3, debug=None):
    tracks = Tracking(TrackLinker(max_missed=fill), TrackSelection("one"), fill,
                      face_filter(0.05, 10.0, 0.15), window) if stabilize else None
    return FaceStage(detector=ScheduledDetector(schedule), select=lambda frame, faces: faces[:1],
                     chain=_negating_chain(), times=StageTimes(), tracks=tracks, debug=debug)


def moving(i):
    return [face_at(200 + 2 * i + (1.5 if i % 2 else -1.5), 120, 120)]   # drifting, jittering


def _swapped(frames):
    """Which frames the (negating) chain touched: the face area is no longer flat grey."""
    return [int(np.abs(f[60:180, 150:400].astype(int) - 90).max() > 0) for f in frames]


@pytest.mark.parametrize("misses", [1, 2, 3])
def test_no_frame_of_a_track_is_left_unswapped_for_misses_up_to_fill(misses):
    hidden = set(range(10, 10 + misses))
    schedule = lambda i: [] if i in hidden else moving(i)           # noqa: E731
    frames = _frames(30)
    stage = _stage(schedule)
    stage.process(frames)
    assert _swapped(frames) == [1] * 30
    old = _frames(30)
    _stage(schedule, stabilize=False).process(old)                   # before: a flash
    assert _swapped(old) == [0 if i in hidden else 1 for i in range(30)]


def test_a_miss_longer_than_fill_is_not_filled():
    schedule = lambda i: [] if 10 <= i < 14 else moving(i)          # noqa: E731
    frames = _frames(20)
    _stage(schedule, fill=3).process(frames)
    assert _swapped(frames) == [0 if 10 <= i < 14 else 1 for i in range(20)]


def test_faces_followed_between_detections_stay_in_their_track():
    """detect.every=3: the detector runs on frames 0, 3, 6 ...; in between the optical flow
    follows the selected track's face, which keeps its id and is swapped (how: tracked)."""
    rng = np.random.default_rng(5)
    texture = rng.integers(0, 255, (240, 640, 3), dtype=np.uint8)
    frames = []
    for i in range(12):
        f = texture.copy()
        f[0, 0, 0], f[0, 0, 1] = i, 0
        frames.append(f)
    tracks = Tracking(TrackLinker(max_missed=3), TrackSelection("one"), 3,
                      face_filter(0.05, 10.0, 0.15), 3)
    det = ScheduledDetector(lambda i: [face_at(300, 120, 120)])
    debug = FaceDebug(None, overlay=False)
    seen = []
    debug.frames = lambda entries, first, chain: seen.extend(entries)      # noqa: E731
    stage = FaceStage(detector=det, select=lambda frame, faces: faces, chain=_negating_chain(),
                      detect_every=3, times=StageTimes(), tracks=tracks, debug=debug)
    stage.process(frames)
    assert det.calls == 4
    assert [e.faces[0].how for e in seen] == ["detected", "tracked", "tracked"] * 4
    assert all(sorted(e.faces) == [0] and e.faces[0].selected for e in seen)
    assert stage.times.frames_touched == 12


def test_with_landmarks_the_window_stabilises_the_points_alignment_uses():
    """The landmark step runs on each selected face before the window (once, not again in the
    chain), so the 68 points and the 5 taken from them are filled and smoothed like the rest."""
    import dataclasses

    calls = []
    rng = np.random.default_rng(7)

    def landmarks(frames, faces):
        calls.append(len(faces))
        out = []
        for i, face in faces:
            noisy = face.kps + rng.normal(0, 1.0, face.kps.shape).astype(np.float32)
            points = np.repeat(noisy, 14, axis=0)[:68]
            out.append((i, dataclasses.replace(face, kps=noisy, landmarks=points)))
        return out

    schedule = lambda i: [] if i == 6 else [face_at(300, 120, 120)]   # noqa: E731
    seen = []
    debug = FaceDebug(None, overlay=False)
    debug.frames = lambda entries, first, chain: seen.extend(entries)      # noqa: E731
    stage = _stage(schedule, debug=debug)
    stage.landmarks = landmarks
    frames = _frames(16)
    stage.process(frames)
    assert sum(calls) == 15                                          # frame 6: filled instead
    used = [e.faces[0].used for e in seen]
    assert all(u.landmarks is not None and u.landmarks.shape == (68, 2) for u in used)
    assert seen[6].faces[0].how == "filled"
    raw = np.array([e.faces[0].raw.landmarks for e in seen])
    smooth = np.array([u.landmarks for u in used])
    assert np.diff(smooth[4:], 2, axis=0).std() < np.diff(raw[4:], 2, axis=0).std() / 3
    assert _swapped(frames) == [1] * 16


def _run(stage, frames, *, lanes=1, in_flight=4, preroll=0, count=None, start=0):
    stage.segment(start=start, preroll=preroll, frames=count)
    out = []
    n = stream(iter(frames), out.append, stage.prepare, frames_in_flight=in_flight,
               times=stage.times, lanes=lanes, finish=stage.finish, held=stage.lookahead)
    assert n == len(out)
    return out


def test_stream_hands_on_only_the_segment_frames_in_order_whatever_the_lanes():
    """Pre-roll and look-ahead frames are decoded and detected, never written; the written
    bytes are the same with any lanes and frames in flight (even fewer than the look-ahead)."""
    results = []
    for lanes, in_flight in ((1, 1), (3, 7), (2, 2)):
        out = _run(_stage(moving), _frames(40), lanes=lanes, in_flight=in_flight, preroll=8,
                   count=29)
        assert [int(f[0, 0, 0]) for f in out] == list(range(8, 37))
        results.append([f.tobytes() for f in out])
    assert results[0] == results[1] == results[2]


def _used_points(tmp_path, name, frames, **segment):
    path = tmp_path / name
    _run(_stage(moving, debug=FaceDebug(path, overlay=False)), frames, **segment)
    return {x["frame"]: np.array(x["faces"][0]["used"]) for x in
            map(json.loads, path.read_text().splitlines())}


def test_a_segment_starts_its_filters_from_its_pre_roll(tmp_path):
    """A segment rendered alone gives the same points every time, and its pre-roll brings them
    to within a fraction of a pixel of those of a render that saw every frame before it (the
    filter's memory decays)."""
    whole = _used_points(tmp_path, "whole.jsonl", _frames(60))
    # frames 40-49 with a pre-roll of 15 and the look-ahead of 3
    alone = _used_points(tmp_path, "alone.jsonl", _frames(60)[25:53], preroll=15, count=10,
                         start=40)
    again = _used_points(tmp_path, "again.jsonl", _frames(60)[25:53], preroll=15, count=10,
                         start=40)
    assert sorted(alone) == list(range(40, 50))
    assert all(np.array_equal(alone[i], again[i]) for i in alone)
    assert max(np.abs(alone[i] - whole[i]).max() for i in alone) < 0.25


def test_debug_writes_every_frame_and_overlay_draws_instead_of_swapping(tmp_path):
    path = tmp_path / "faces.jsonl"
    schedule = lambda i: [] if i == 5 else moving(i)                 # noqa: E731
    frames = _frames(12)
    stage = _stage(schedule, debug=FaceDebug(path, overlay=False))
    _run(stage, frames, preroll=2, count=8, start=100)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x["frame"] for x in lines] == list(range(100, 108))
    hows = [x["faces"][0]["how"] for x in lines]
    assert hows[3] == "filled" and hows.count("detected") == 7
    face = lines[0]["faces"][0]
    assert face["track"] == 0 and face["selected"] is True
    assert np.array(face["raw"]).shape == (5, 2) and np.array(face["used"]).shape == (5, 2)
    assert np.array(face["transform"]).shape == (2, 3) and len(face["box"]) == 4
    assert face["raw"] != face["used"] or lines.index(lines[0]) == 0
    drawn = _frames(12)
    _run(_stage(schedule, debug=FaceDebug(None, overlay=True)), drawn)
    assert _swapped(drawn) == [1] * 12                                # drawn into every frame
    assert all((f[60:180, 150:400] == 255 - 90).sum() == 0 for f in drawn)   # not negated


# -- through the command line ---------------------------------------------------------------------
def test_debug_faces_and_overlay_through_the_cli(workdir, standin_models, tmp_path):
    """A render in segments with profile low (stabilisation on) writes one debug line per frame,
    each frame once and in order, the face found wherever the clip has one; the overlay render
    is another job (its own key) whose frames differ from the swapped ones."""
    from conftest import model_args, run_cli
    from render.mark.tags import read_tag
    from render.standins import media as mf

    clip = mf.make_clip(tmp_path / "clip.mp4", width=640, height=360, seconds=2.0, audio=False)
    faces = tmp_path / "faces.jsonl"
    common = ["profile=low", "segment.seconds=1", "execution.threads=1",
              f"source={workdir / 'in' / 'source.jpg'}", f"target={clip.path}",
              *model_args(standin_models, workdir / "cache")]
    r = run_cli(*common, f"output={workdir / 'out' / 'swap.mp4'}", f"debug.faces={faces}")
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in faces.read_text().splitlines()]
    assert [x["frame"] for x in lines] == list(range(clip.frame_count))
    with_face = [x["frame"] for x in lines if any(f["selected"] for f in x["faces"])]
    assert set(clip.frames_with_faces()) <= set(with_face)
    r = run_cli(*common, f"output={workdir / 'out' / 'overlay.mp4'}", "debug.overlay=true")
    assert r.returncode == 0, r.stderr
    swap, overlay = (json.loads((workdir / "out" / f"{n}.mp4.report.json").read_text())
                     for n in ("swap", "overlay"))
    assert swap["job_key"] != overlay["job_key"]
    # the overlay swaps nothing: no face counted, not declared synthetic, not marked
    assert swap["swapped"]["faces"] > 0 and swap["synthetic"] and swap["marks"]["tag"]
    assert overlay["swapped"]["faces"] == overlay["swapped"]["frames_touched"] == 0
    assert overlay["synthetic"] is False and overlay["marks"]["enabled"] is False
    assert read_tag(workdir / "out" / "overlay.mp4") is None
    assert read_tag(workdir / "out" / "swap.mp4")
    assert run_cli("verify", str(workdir / "out" / "overlay.mp4")).returncode == 0
    a = mf.read_frames(workdir / "out" / "swap.mp4")
    b = mf.read_frames(workdir / "out" / "overlay.mp4")
    i = clip.frames_with_faces()[len(clip.frames_with_faces()) // 2]
    assert np.abs(a[i].astype(int) - b[i].astype(int)).max() > 64


def test_reference_selection_with_stabilisation_through_the_cli(workdir, standin_models, tmp_path):
    """select.mode=reference on tracks with profile low (stabilisation on): the face that looks
    like the reference is swapped in every frame it is in, the larger face of another identity
    never; four segments (each deciding its tracks again from its pre-roll) choose the same faces
    in every frame as one segment, and write the same bytes one at a time or three at once."""
    from conftest import model_args, run_cli
    from render.standins import media as mf

    # the default clip's faces, the second (larger, from 60 %) pure red: to the stand-in ArcFace
    # it is 0.38 from the reference, the first face 0.01-0.16 as it drifts over the background
    default = mf.default_schedule(640, 360, 50)
    clip = mf.make_clip(tmp_path / "clip.mp4", width=640, height=360, seconds=2.0, audio=False,
                        faces=lambda i: [f if len(f) < 4 else (*f[:3], (0, 0, 255))
                                         for f in default(i)])
    reference = tmp_path / "reference.png"
    mf.make_source_image(reference, colour=mf.FACE_COLOUR)       # the clip's first face
    common = ["profile=low", "execution.threads=1", "select.mode=reference", "select.distance=0.25",
              f"select.reference={reference}", f"source={workdir / 'in' / 'source.jpg'}",
              f"target={clip.path}", *model_args(standin_models, workdir / "cache")]
    chosen = {}
    for name, extra in (("one", ["segment.seconds=2"]), ("four", ["segment.seconds=0.5"]),
                        ("at-once", ["segment.seconds=0.5", "execution.parallel_segments=3"])):
        faces = tmp_path / f"{name}.jsonl"
        r = run_cli(*common, *extra, f"output={workdir / name / 'clip.mp4'}",
                    f"debug.faces={faces}")
        assert r.returncode == 0, r.stderr
        # segments rendered at once append their lines as they go: each frame once, any order
        lines = sorted((json.loads(x) for x in faces.read_text().splitlines()),
                       key=lambda x: x["frame"])
        assert [x["frame"] for x in lines] == list(range(clip.frame_count))
        chosen[name] = [[f["box"] for f in x["faces"] if f["selected"]] for x in lines]
        assert any(len(x["faces"]) == 2 for x in lines), "the second face was never found"
    for boxes, truth in zip(chosen["one"], clip.boxes):
        # the first (left) face whenever the clip has one, never the second
        assert len(boxes) == (1 if truth else 0) and (boxes[0][0] + boxes[0][2]) / 2 < 320 \
            if truth else not boxes, (boxes, truth)
    assert chosen["four"] == chosen["one"] == chosen["at-once"]
    assert (workdir / "four" / "clip.mp4").read_bytes() == \
        (workdir / "at-once" / "clip.mp4").read_bytes()
