"""The face editor (``processors=...,face_editor``, issue 40): FaceFusion's 14 controls through
LivePortrait's six models, with stand-ins whose answers this file computes on its own
(``render.standins.face_editor``): each control's delta on the keypoints from the table of
``shared/docs/facefusion-processors.md`` §6 (written out here as text), the rotation from
rotations about the fixed axes, the crop's preparation from 2 × 2 pixel blocks, the retargeters'
inputs from the landmarks, the stitcher replacing the keypoints and the generator's naming — all
read from what each model was fed. Then renders through the command line: the report row, the
same bytes on every schedule, the step left out when every control is 0, and bad input as one
line with nothing written.
"""
from __future__ import annotations

import json
import math
import re
import subprocess
from pathlib import Path

import cv2
import numpy as np
import pytest
import yaml

from render import standins
from render.config import load_config
from render.errors import ConfigError, ModelError
from render.faces import align
from render.files import sha256_file
from render.model_handle import ModelEntry, ProcessorModel
from render.models.needs import chain_steps, landmark_models
from render.processors import live_portrait as lp
from render.processors import registry
from render.processors.face_editor import CONTROLS
from render.processors.face_editor.editor import FaceEditorProcessor
from render.standins import face_editor as standin
from render.standins import media, quality

from conftest import run_cli
from live_portrait_checks import Recorder, prepared
from schedules import on_every_schedule

# -- FaceFusion's table (§6), as text -------------------------------------------------------------
TABLE = {
    "eyebrow_direction": ("e[1,1]+=.015; e[2,1]-=.020",
                          "e[1,0]-=.015; e[2,0]+=.020; e[1,1]+=.005; e[2,1]-=.005"),
    "eye_gaze_horizontal": ("e[11,0]+=.015; e[15,0]+=.020", "e[11,0]+=.020; e[15,0]+=.015"),
    "eye_gaze_vertical": ("e[1,1]+=.0025; e[2,1]-=.0025; e[11,1]-=.010; e[13,1]-=.005; "
                          "e[15,1]-=.010; e[16,1]-=.005",) * 2,
    "mouth_grim": ("e[17,2]-=.005; e[19,2]+=.01; e[20,1]-=.06; e[20,2]-=.03",
                   "e[19,1]-=.05; e[19,2]-=.02; e[20,2]-=.03"),
    "mouth_position_horizontal": ("e[19,0]+=.05; e[20,0]+=.04",) * 2,
    "mouth_position_vertical": ("e[19,1]-=.04; e[20,1]-=.02", "e[19,1]-=.05; e[20,1]-=.04"),
    "mouth_pout": ("e[19,1]-=.022; e[19,2]+=.025; e[20,2]-=.002",
                   "e[19,1]+=.022; e[19,2]+=.025; e[20,2]-=.002"),
    "mouth_purse": ("e[19,1]-=.04; e[19,2]-=.02",
                    "e[14,1]-=.02; e[17,2]+=.01; e[19,2]-=.015; e[20,2]-=.002"),
    "mouth_smile": ("e[20,1]-=.015; e[14,1]-=.025; e[17,1]+=.01; e[17,2]+=.004; e[3,1]-=.0045; "
                    "e[7,1]-=.0045",
                    "e[14,1]-=.02; e[17,1]+=.003; e[19,1]+=.02; e[19,2]-=.005; e[20,2]+=.01; "
                    "e[3,1]+=.0045; e[7,1]+=.0045"),
}
#: head control → (angle index, degrees per unit: pitch − 20 v, yaw − 60 v, roll + 15 v)
HEAD = {"head_pitch": (0, -20.0), "head_yaw": (1, -60.0), "head_roll": (2, 15.0)}
LIMITS = ((-30.0, 30.0), (-60.0, 60.0), (-20.0, 20.0))
FFHQ_512 = np.array([[.37691676, .46864664], [.62285697, .46912813], [.50123859, .61331904],
                     [.39308822, .72541100], [.61150205, .72490465]])


def changes(name: str, v: float) -> list[tuple[int, int, float]]:
    """(point, axis, delta) of control ``name`` at ``v``, read from the table's text."""
    text = TABLE[name][0 if v > 0 else 1]
    return [(int(k), int(a), (1 if s == "+" else -1) * float(c) * v)
            for k, a, s, c in re.findall(r"e\[(\d+),(\d)\]([+-])=(\.\d+)", text)]


def rotation(pitch: float, yaw: float, roll: float) -> np.ndarray:
    """Rotations about the fixed x, y, z axes, in that order (Rodrigues' formula per axis)."""
    def about(axis: int, degrees: float) -> np.ndarray:
        k = np.eye(3)[axis]
        t = math.radians(degrees)
        cross = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
        return np.eye(3) * math.cos(t) + math.sin(t) * cross + (1 - math.cos(t)) * np.outer(k, k)
    return about(2, roll) @ about(1, yaw) @ about(0, pitch)


def limited(original: tuple[float, ...], wanted: list[float]) -> list[float]:
    out = []
    for o, w, (low, high) in zip(original, wanted, LIMITS):
        low, high = (min(o, low), high) if o < 0 else (low, max(o, high))
        out.append(min(max(w, low), high))
    return out


# -- the processor, one call at a time, its models' feeds recorded --------------------------------
def _editor(d: Path, entries: dict, **values: float) -> tuple[FaceEditorProcessor, dict]:
    recorders = {name: Recorder(d / e["file"]) for name, e in entries.items()}

    def model(name: str, needs: dict | None = None) -> ProcessorModel:
        e = entries[name]
        entry = ModelEntry(name=name, file=e["file"], sha256=e["sha256"], size=None, urls=(),
                           licence="test", commercial_use=True, contract=e["contract"],
                           template=None, input_size=e["input_size"],
                           needs=tuple(needs or ()))
        return ProcessorModel(entry, d / e["file"], recorders[name], d, needs or {})

    needs = {name: model(name) for name in entries if name != "live_portrait"}
    step = registry.processor("face_editor").step("live_portrait", **values)
    return FaceEditorProcessor(step, model("live_portrait", needs)), recorders


@pytest.fixture(scope="module")
def set_(tmp_path_factory):
    """The six stand-ins (the motion extractor's default answer)."""
    d = tmp_path_factory.mktemp("live-portrait")
    return d, standin.write_live_portrait(d)


@pytest.fixture(scope="module")
def in_range(tmp_path_factory):
    """The six stand-ins with a motion extractor whose expression is the middle of LivePortrait's
    range, so no delta of the table is clipped away."""
    d = tmp_path_factory.mktemp("live-portrait-middle")
    entries = standin.write_live_portrait(d)
    middle = (lp.EXPRESSION_MIN + lp.EXPRESSION_MAX) / 2
    standin.make_motion_extractor(d / entries["live_portrait_motion_extractor"]["file"],
                                  expression=middle)
    return d, entries, middle.astype(np.float64)


def _crop(seed: int) -> np.ndarray:
    return np.random.RandomState(seed).randint(0, 256, (512, 512, 3)).astype(np.uint8)


def _expected(crop: np.ndarray, expression0: np.ndarray, values: dict,
              angles: tuple[float, float, float] = standin.ANGLES
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(kp_o, kp_e before the retargeters, the edited expression), from the definitions."""
    x = prepared(crop)
    t = 0.1 * x.mean(axis=(2, 3)).reshape(1, 1, 3) + np.array(standin.TRANSLATION)
    kp, s = standin.default_points().astype(np.float64), standin.SCALE
    e = expression0.copy()
    for name in TABLE:
        for point, axis, delta in changes(name, values.get(name, 0.0)):
            e[0, point, axis] += delta
    e = np.clip(e, lp.EXPRESSION_MIN, lp.EXPRESSION_MAX)
    wanted = list(angles)
    for name, (index, per_unit) in HEAD.items():
        wanted[index] += per_unit * values.get(name, 0.0)
    kp_o = s * (kp @ rotation(*angles).T + expression0) + t
    kp_e = s * (kp @ rotation(*limited(angles, wanted)).T + e) + t
    return kp_o, kp_e, e


@pytest.mark.parametrize("name", list(TABLE))
@pytest.mark.parametrize("v", [0.65, -0.4])
def test_each_control_moves_the_keypoints_by_its_delta(in_range, name, v):
    """The stitcher is fed (source = the edited keypoints, target = the crop's own): each
    control's delta, from the table, scaled by the crop's scale, on exactly its values."""
    d, entries, middle = in_range
    proc, rec = _editor(d, entries, **{name: v})
    crop = _crop(1)
    proc.run(crop[None])
    kp_o, kp_e, e = _expected(crop, middle, {name: v})
    fed = rec["live_portrait_stitcher"].feeds[0]
    assert np.allclose(fed["target"], kp_o, atol=5e-6)
    assert np.allclose(fed["source"], kp_e, atol=5e-6)
    moved = np.abs(fed["source"] - fed["target"]) > 1e-4
    assert {(k, a) for k, a in zip(*np.nonzero(moved[0]))} == \
        {(k, a) for k, a, _ in changes(name, v)}


def test_every_control_at_once_in_facefusions_order(set_):
    """All 14 controls, the expression partly outside LivePortrait's range (limited after the
    edits, never before), the retargeters' answers added, the stitcher's answer replacing the
    keypoints, the generator moving the appearance from the crop's keypoints to those: its
    picture is the crop's colour moved by them, in BGR, truncated."""
    d, entries = set_
    values = dict(zip(CONTROLS, np.round(np.random.RandomState(5).uniform(-1, 1, 14), 2)))
    proc, rec = _editor(d, entries, **values)
    crop = _crop(2)
    landmarks = quality.FACE_68 * 300 + np.random.RandomState(6).normal(0, 2.0, (68, 2))
    out = proc.run(crop[None], landmarks[None].astype(np.float32))[0]
    kp_o, kp_e, _ = _expected(crop, standin.default_expression().astype(np.float64), values)
    for name, inputs, ratios, (closing, opening) in (
            ("eye_open_ratio", 66, ((37, 40, 39, 36), (43, 46, 45, 42)), (0.0, 0.6)),
            ("lip_open_ratio", 65, ((62, 66, 54, 48),), (0.0, 1.0))):
        v = values[name]
        measured = [np.linalg.norm(landmarks[a] - landmarks[b]) /
                    (np.linalg.norm(landmarks[c] - landmarks[w]) + 1e-6) for a, b, c, w in ratios]
        x = np.concatenate([kp_o.ravel(), measured, [closing if v < 0 else opening]])
        fed = rec[f"live_portrait_{name.split('_')[0]}_retargeter"].feeds[0]["input"]
        assert fed.shape == (1, inputs) and np.allclose(fed[0], x, atol=1e-5)
        kp_e = kp_e + (x @ standin.retargeter_weights(inputs)).reshape(1, 21, 3) * abs(v)
    stitch = rec["live_portrait_stitcher"].feeds[0]
    assert np.allclose(stitch["source"], kp_e, atol=1e-5)
    a, b, c = standin.STITCH
    stitched = a * kp_e + b * kp_o + c
    gen = rec["live_portrait"].feeds[0]
    assert np.allclose(gen["source"], stitched, atol=1e-5)
    assert np.allclose(gen["target"], kp_o, atol=5e-6)
    rgb = prepared(crop).mean(axis=(0, 2, 3)) + standin.GAIN * (stitched - kp_o).mean(axis=(0, 1))
    expected = np.floor(np.clip(rgb, 0, 1) * 255)[::-1]
    assert out.shape == (512, 512, 3) and (out == out[0, 0]).all()
    assert np.abs(out[0, 0] - expected).max() <= 1, (out[0, 0], expected)
    assert np.abs(expected - np.floor(prepared(crop).mean(axis=(0, 2, 3)) * 255)[::-1]).max() > 5


def test_the_crop_is_fed_halved_by_area_as_rgb_over_255(set_):
    d, entries = set_
    proc, rec = _editor(d, entries, mouth_smile=0.3)
    crops = np.stack([_crop(3), _crop(4)])
    proc.run(crops)
    for k, crop in enumerate(crops):
        for name in ("live_portrait_feature_extractor", "live_portrait_motion_extractor"):
            fed = rec[name].feeds[k]["input"]
            assert fed.dtype == np.float32 and fed.shape == (1, 3, 256, 256)
            assert np.allclose(fed, prepared(crop), atol=1e-7)
    assert not rec["live_portrait_eye_retargeter"].feeds       # its control is 0: not run


@pytest.mark.parametrize("angles,head", [
    ((-40.0, 70.0, 10.0), {"head_pitch": 1.0, "head_yaw": -1.0, "head_roll": 1.0}),
    ((-40.0, 70.0, 10.0), {"head_pitch": -1.0, "head_yaw": 1.0, "head_roll": -0.5}),
    ((25.0, -10.0, -18.0), {"head_pitch": -0.6, "head_yaw": 0.3, "head_roll": -0.8})])
def test_head_controls_are_limited_around_the_crops_own_pose(tmp_path, angles, head):
    """pitch − 20 v, yaw − 60 v, roll + 15 v, clipped to ±30, ±60, ±20 widened to take in the
    crop's own angle (a head already past a limit may keep its pose, never go further)."""
    entries = standin.write_live_portrait(tmp_path, angles=angles)
    proc, rec = _editor(tmp_path, entries, **head)
    crop = _crop(7)
    proc.run(crop[None])
    _, kp_e, _ = _expected(crop, standin.default_expression().astype(np.float64), head, angles)
    assert np.allclose(rec["live_portrait_stitcher"].feeds[0]["source"], kp_e, atol=5e-6)


def test_the_rotation_is_about_the_fixed_axes_x_then_y_then_z():
    for angles in [(8.0, -35.0, 4.0), (-40.0, 70.0, 10.0), (90.0, 0.0, 0.0), (0.0, 0.0, -90.0)]:
        assert np.allclose(lp.rotation(*angles), rotation(*angles), atol=1e-6)
    # a yaw of 90° takes x to −z, a pitch of 90° takes y to z
    assert np.allclose(lp.rotation(0, 90, 0) @ [1, 0, 0], [0, 0, -1], atol=1e-6)
    assert np.allclose(lp.rotation(90, 0, 0) @ [0, 1, 0], [0, 0, 1], atol=1e-6)
    scipy = pytest.importorskip("scipy.spatial.transform")
    matrix = scipy.Rotation.from_euler("xyz", [12.0, -33.0, 7.5], degrees=True).as_matrix()
    assert np.allclose(lp.rotation(12.0, -33.0, 7.5), matrix, atol=1e-6)


def test_limit_angles_widens_the_side_of_the_original_sign():
    assert lp.limit_angles((0, 0, 0), (-45, 80, 25)) == (-30, 60, 20)
    assert lp.limit_angles((-40, 70, -25), (-50, 90, -30)) == (-40, 70, -25)
    assert lp.limit_angles((-40, 70, -25), (50, -90, 30)) == (30, -60, 20)
    assert lp.limit_angles((35, -65, 22), (-50, -70, 25)) == (-30, -65, 22)
    assert (lp.EXPRESSION_MIN < lp.EXPRESSION_MAX).all() and lp.EXPRESSION_MIN.shape == (1, 21, 3)


def test_the_pulled_template_is_facefusions_crop_up_to_a_third_of_the_nose_misfit():
    """FaceFusion fits the five points scaled 1.5 times about the nose tip to ffhq_512 at 512
    (cv2.estimateAffinePartial2D, RANSAC, threshold 100). ffhq_512_x1_5 (its points pulled
    toward its nose tip by 1/1.5) fits the unscaled points: the same rotation and scale, and a
    translation that differs by a third of the nose tip's misfit in the crop — 0 for a face
    shaped like the template."""
    def facefusion(kps: np.ndarray) -> np.ndarray:
        scaled = (kps - kps[2]) * 1.5 + kps[2]
        return cv2.estimateAffinePartial2D(scaled, FFHQ_512 * 512, method=cv2.RANSAC,
                                           ransacReprojThreshold=100)[0]

    turn = math.radians(17)
    similar = 180 * FFHQ_512 @ np.array([[math.cos(turn), math.sin(turn)],
                                         [-math.sin(turn), math.cos(turn)]]) + [301.5, 97.25]
    assert np.allclose(align.estimate(similar, "ffhq_512_x1_5", 512), facefusion(similar),
                       atol=1e-3)
    kps = similar + np.random.RandomState(9).normal(0, 5.0, (5, 2))
    ours, theirs = align.estimate(kps, "ffhq_512_x1_5", 512), facefusion(kps)
    assert np.allclose(ours[:, :2], theirs[:, :2], atol=1e-5)
    fit = cv2.estimateAffinePartial2D(kps, FFHQ_512 * 512, method=cv2.RANSAC,
                                      ransacReprojThreshold=100)[0]
    misfit = fit[:, :2] @ kps[2] + fit[:, 2] - FFHQ_512[2] * 512
    assert np.linalg.norm(misfit) > 1.0
    assert np.allclose(theirs[:, 2] - ours[:, 2], misfit / 3, atol=0.02)


def test_a_generator_of_another_side_or_a_missing_helper_is_one_model_error(tmp_path):
    entries = standin.write_live_portrait(tmp_path, side=256)
    proc, _ = _editor(tmp_path, entries, mouth_pout=0.5)
    with pytest.raises(ModelError, match="made a 256x256 picture; the face editor pastes back "
                                         "512x512"):
        proc.run(_crop(8)[None])
    del entries["live_portrait_stitcher"]
    with pytest.raises(ModelError, match="needs live-portrait-stitcher model"):
        _editor(tmp_path, entries, mouth_pout=0.5)


def test_all_zero_controls_leave_the_step_out_and_open_ratios_need_68_landmarks(caplog):
    keys = {"profile": "low", "processors": "swap,face_editor"}
    assert [s.name for s in chain_steps(load_config(keys, env={}))] == ["swap"]
    assert "every face_editor control is 0" in caplog.text
    edited = load_config({**keys, "face_editor.mouth_smile": "0.2"}, env={})
    assert [s.name for s in chain_steps(edited)] == ["swap", "face_editor"]
    assert landmark_models(edited) == {}
    eyes = {**keys, "face_editor.eye_open_ratio": "-0.5"}
    assert landmark_models(load_config(eyes, env={})) == {"landmark.estimator": "fan_68_5"}
    with pytest.raises(ConfigError, match=r"^face_editor.eye_open_ratio=-0.5 needs 68 landmarks: "
                                          r"set landmark.model or landmark.estimator$"):
        landmark_models(load_config({**eyes, "landmark.estimator": ""}, env={}))


# -- renders through the command line -------------------------------------------------------------
@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The stand-ins, the LivePortrait set and fan_68_5 in a manifest overlay, a source face, an
    image target of odd size and a 2 s clip."""
    tmp = tmp_path_factory.mktemp("face-editor")
    models = tmp / "models"
    standins.write_standins(models)
    layer = standin.write_live_portrait(models)
    quality.make_fan_68_5(models / "fan_68_5.onnx")
    layer["fan_68_5"] = {"file": "fan_68_5.onnx", "sha256": sha256_file(models / "fan_68_5.onnx"),
                         "licence": "test", "commercial_use": True,
                         "contract": "landmarker-fan-68-5", "template": None, "input_size": 5}
    overlay = tmp / "live_portrait.yaml"
    overlay.write_text(yaml.safe_dump({"version": 1, "models": layer}))
    media.make_source_image(tmp / "source.png")
    truth = media.make_image_target(tmp / "target.png", width=641, height=359)
    media.make_clip(tmp / "clip.mp4", width=320, height=180, seconds=2.0)
    return tmp, models, overlay, truth


def _cli(world, folder: str, *keys: str, target: str = "target.png", command: tuple = (),
         code: int = 0) -> tuple[Path, subprocess.CompletedProcess]:
    tmp, models, overlay, _ = world
    out = tmp / folder / f"edited{Path(target).suffix}"
    r = run_cli(*command, "profile=low", f"source={tmp / 'source.png'}", f"target={tmp / target}",
                f"output={out}", f"models.dir={models}", f"models.manifest={overlay}",
                f"cache_dir={tmp / 'cache'}", "lock.device=none", "progress=off",
                "execution.providers=cpu", *keys)
    assert r.returncode == code, r.stderr
    return out, r


def test_an_edited_image_changes_the_face_only_and_reports_the_model_set(world):
    tmp, _, _, truth = world
    plain, _ = _cli(world, "plain", "processors=swap")
    edited, _ = _cli(world, "edited", "processors=swap,face_editor", "face_editor.head_yaw=0.5",
                     "face_editor.eye_open_ratio=0.4")
    a, b = cv2.imread(str(plain)), cv2.imread(str(edited))
    assert a.shape == b.shape == (359, 641, 3)
    x1, y1, x2, y2 = truth.boxes[0]
    cx, cy, side = (x1 + x2) / 2, (y1 + y2) / 2, max(x2 - x1, y2 - y1)
    face = (slice(int(cy - side / 4), int(cy + side / 4)), slice(int(cx - side / 4),
                                                                 int(cx + side / 4)))
    assert np.abs(a[face].astype(int) - b[face]).mean() > 3
    far = np.ones(a.shape[:2], bool)
    far[max(0, int(cy - 2 * side)):int(cy + 2 * side), max(0, int(cx - 2 * side)):
        int(cx + 2 * side)] = False
    assert far.any() and np.array_equal(a[far], b[far])
    report = json.loads(Path(f"{edited}.report.json").read_text())
    row = next(m for m in report["models"] if m["role"] == "face_editor")
    assert row["name"] == "live_portrait" and row["sha256"]
    assert row["head_yaw"] == 0.5 and row["eye_open_ratio"] == 0.4 and "mouth_smile" not in row
    assert {n["name"] for n in row["needs"]} == {
        "live_portrait_feature_extractor", "live_portrait_motion_extractor",
        "live_portrait_eye_retargeter", "live_portrait_lip_retargeter", "live_portrait_stitcher"}
    assert any(m.get("name") == "fan_68_5" for m in report["models"])


def test_an_edited_clip_has_the_same_bytes_on_every_schedule(world):
    resumed, report = on_every_schedule(lambda folder, *keys, command=(): _cli(
        world, folder, "processors=swap,face_editor", "face_editor.mouth_smile=0.7",
        "face_editor.lip_open_ratio=-0.6", "segment.seconds=0.5", *keys, target="clip.mp4",
        command=command)[0])
    assert media.probe_counts(resumed).frames == 50
    assert any(m["role"] == "face_editor" for m in report["models"])


def test_all_zero_controls_render_as_the_swap_alone_with_one_warning(world):
    plain, _ = _cli(world, "zero-plain", "processors=swap")
    idle, r = _cli(world, "zero", "processors=swap,face_editor")
    assert "face_editor is left out of the chain: every face_editor control is 0" in r.stderr
    assert np.array_equal(cv2.imread(str(plain)), cv2.imread(str(idle)))
    report = json.loads(Path(f"{idle}.report.json").read_text())
    assert not any(m["role"] == "face_editor" for m in report["models"])


@pytest.mark.parametrize("keys,says", [
    (("processors=swap,face_editor", "face_editor.head_yaw=1.5"),
     "face_editor.head_yaw: expected a number between -1 and 1, got 1.5"),
    (("processors=swap,face_editor,face_editor", "face_editor.head_yaw=0.5"),
     "face_editor is named twice"),
    (("processors=swap,face_editor", "face_editor.lip_open_ratio=0.5", "landmark.estimator="),
     "face_editor.lip_open_ratio=0.5 needs 68 landmarks")])
def test_bad_input_is_one_line_and_nothing_is_written(world, keys, says):
    out, r = _cli(world, "bad", *keys, code=2)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and says in lines[0], r.stderr
    assert not out.parent.exists() or not any(out.parent.iterdir())


def test_models_list_shows_the_set_not_pinned_yet():
    r = run_cli("models", "list")
    assert r.returncode == 0, r.stderr
    rows = [line for line in r.stdout.splitlines() if line.startswith("live_portrait")]
    assert len(rows) == 6 and all("not pinned yet" in row for row in rows), rows


# -- the counted cost per call --------------------------------------------------------------------
def test_the_counted_costs_match_liveportraits_published_parameters():
    """Each count, layer by layer from LivePortrait's code, has the parameters its authors
    publish (F 0.84 M, M 28.12 M, W 45.53 M, G 55.37 M, S and both R 0.23 M); the generator is
    W and G in one graph, and dominates the face editor's cost per face."""
    from bench import live_portrait_costs as costs

    published = costs.PUBLISHED_PARAMS
    pairs = [(costs.feature_extractor(), published["feature_extractor"]),
             (costs.motion_extractor(), published["motion_extractor"]),
             (costs.warping(), published["warping"]), (costs.spade(), published["spade"])]
    for count, millions in pairs:
        assert count.params / 1e6 == pytest.approx(millions, abs=0.006)
    mlps = costs.stitcher().params + costs.lip_retargeter().params + costs.eye_retargeter().params
    assert mlps / 1e6 == pytest.approx(published["stitching_retargeting"], abs=0.006)
    generator = costs.generator()
    assert generator.params == costs.warping().params + costs.spade().params
    assert set(costs.COUNTED) == set(standin.FILES)
    assert generator.macs > 0.9 * costs.face_editor_gmacs() * 1e9
    assert "face_editor per face" in costs.table()
