"""The expression restorer (``processors=swap,expression``, issue 40): LivePortrait redraws the
current face with the expression of the same face in the frame as decoded, with stand-ins whose
answers this file computes on its own (``render.standins.expression_restorer``): the motion
extractor puts the crop's colour into its expression (and pitch), the generator paints each
keypoint's move in its own band of the picture. So the area rows (from the table of
``shared/docs/facefusion-processors.md`` §3, written out here as text), the factor, the limit and
the keypoint formula are read from the generator's feeds and its picture; the face stage is shown
to hand the step the crop of the frame as decoded — after a step that changed the face's colour,
and after one that doubled the frame's size (FaceFusion's defect §12-1 not copied). Then renders
through the command line: the restored face's colour predicted from the target image, the report
row, the same bytes on every schedule, and bad input as one line with nothing written.
"""
from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import cv2
import numpy as np
import pytest
import yaml

from render import standins
from render.config import load_config
from render.errors import ModelError
from render.face_stage import ChainStep, FaceStage, FrameStep
from render.faces import align
from render.faces.mask import paste_masks
from render.faces.types import Face
from render.model_handle import ModelEntry, ProcessorModel
from render.models.needs import chain_steps
from render.pipeline import StageTimes
from render.processors import registry
from render.processors.base import FaceProcessor, FrameProcessor, Source
from render.processors.expression.restorer import ExpressionRestorer
from render.processors.live_portrait import EXPRESSION_MAX, EXPRESSION_MIN
from render.processors.spec import Step
from render.standins import expression_restorer as standin
from render.standins import media
from render.standins.face_editor import ANGLES, SCALE, TRANSLATION, default_points
from render.standins.frame_enhancers import entry as enhancer_entry
from render.standins.frame_enhancers import make_frame_enhancer

from conftest import run_cli
from live_portrait_checks import Recorder, prepared
from schedules import on_every_schedule

# -- FaceFusion's rows (§3), as text --------------------------------------------------------------
ROWS = {"upper-face": "1, 2, 6, 10, 11, 12, 13, 15, 16", "lower-face": "3, 7, 14, 17, 18, 19, 20"}
ALWAYS_CURRENT = "0, 4, 5, 8, 9"
BOTH = ("upper-face", "lower-face")


def rows(text: str) -> set[int]:
    return {int(r) for r in text.split(",")}


def rotation(pitch: float, yaw: float, roll: float) -> np.ndarray:
    """About the fixed x, y, z axes, in that order."""
    p, y, r = (math.radians(a) for a in (pitch, yaw, roll))
    rx = np.array([[1, 0, 0], [0, math.cos(p), -math.sin(p)], [0, math.sin(p), math.cos(p)]])
    ry = np.array([[math.cos(y), 0, math.sin(y)], [0, 1, 0], [-math.sin(y), 0, math.cos(y)]])
    rz = np.array([[math.cos(r), -math.sin(r), 0], [math.sin(r), math.cos(r), 0], [0, 0, 1]])
    return rz @ ry @ rx


def motion(crop: np.ndarray, base: np.ndarray) -> dict:
    """The motion extractor stand-in's answer, from its definition (float64)."""
    mean = prepared(crop).mean(axis=(0, 2, 3))                        # R, G, B
    return {"mean": mean, "pitch": ANGLES[0] + standin.PITCH_PER_RED * mean[0],
            "t": 0.1 * mean + np.array(TRANSLATION),
            "e": base + standin.row_weights().astype(np.float64) * (mean - 0.5)}


def expected(crop: np.ndarray, original: np.ndarray, factor: int, areas: tuple[str, ...],
             base: np.ndarray) -> dict:
    """Keypoints and picture of a restored crop, from §3 and the stand-ins' definitions: the
    rows of ``areas`` (less the rows always kept) of the original's expression mixed with the
    current one's by factor × 1.2 / 100, limited; pose, scale, translation and appearance the
    current crop's; the generator fed (source = the restored keypoints, target = the crop's)."""
    cur, orig = motion(crop, base), motion(original, base)
    f = factor * 1.2 / 100
    taken = set().union(*(rows(ROWS[a]) for a in areas)) - rows(ALWAYS_CURRENT)
    e = cur["e"].copy()
    for r in taken:
        e[0, r] = orig["e"][0, r] * f + cur["e"][0, r] * (1 - f)
    unlimited = e.copy()
    e = np.clip(e, EXPRESSION_MIN, EXPRESSION_MAX)
    rot = rotation(cur["pitch"], ANGLES[1], ANGLES[2])
    kp = default_points().astype(np.float64)
    target = SCALE * (kp @ rot.T + cur["e"]) + cur["t"]
    source = SCALE * (kp @ rot.T + e) + cur["t"]
    rgb = cur["mean"] + standin.GAIN * (source - target)[0]            # (21, 3): each band
    bgr = np.floor(np.clip(rgb, 0, 1) * 255)[:, ::-1]
    return {"source": source, "target": target, "taken": taken, "bands": bgr,
            "unlimited": unlimited, "current": cur, "original": orig}


def band_rows(side: int = 512) -> list[np.ndarray]:
    """Band j's picture rows, with a row's band r · 21 // side."""
    r = np.arange(side)
    return [r[r * 21 // side == j] for j in range(21)]


def _crop(seed: int, colour: tuple[int, int, int]) -> np.ndarray:
    """A 512-px BGR crop: noise around ``colour``."""
    noise = np.random.RandomState(seed).randint(-40, 41, (512, 512, 3))
    return np.clip(noise + np.array(colour), 0, 255).astype(np.uint8)


# -- the processor, one call at a time, its models' feeds recorded --------------------------------
def _restorer(d: Path, entries: dict, **options) -> tuple[ExpressionRestorer, dict]:
    recorders = {name: Recorder(d / e["file"]) for name, e in entries.items()}

    def model(name: str, needs: dict | None = None) -> ProcessorModel:
        e = entries[name]
        entry = ModelEntry(name=name, file=e["file"], sha256=e["sha256"], size=None, urls=(),
                           licence="test", commercial_use=True, contract=e["contract"],
                           template=None, input_size=e["input_size"], needs=tuple(needs or ()))
        return ProcessorModel(entry, d / e["file"], recorders[name], d, needs or {})

    needs = {name: model(name) for name in entries if name != "live_portrait"}
    step = registry.processor("expression").step("live_portrait", **options)
    return ExpressionRestorer(step, model("live_portrait", needs)), recorders


@pytest.fixture(scope="module")
def middle(tmp_path_factory):
    """The set with a motion extractor whose expression, for a grey crop, is the middle of
    LivePortrait's range: nothing is clipped, so only the restored rows move."""
    d = tmp_path_factory.mktemp("restorer-middle")
    base = standin.middle_expression()
    return d, standin.write_expression_restorer(d, base=base), base.astype(np.float64)


@pytest.fixture(scope="module")
def edges(tmp_path_factory):
    """The set with the default expression, partly outside LivePortrait's range."""
    d = tmp_path_factory.mktemp("restorer-edges")
    return d, standin.write_expression_restorer(d), \
        standin.face_editor.default_expression().astype(np.float64)


@pytest.mark.parametrize("areas,factor", [(BOTH, 80), (("upper-face",), 35),
                                          (("lower-face",), 100), (BOTH, 1)])
def test_the_chosen_rows_take_the_original_expression_by_the_factor(middle, areas, factor):
    """The generator is fed (source = the restored keypoints, target = the current crop's): the
    rows of the chosen areas moved by factor × 1.2 / 100 of the way to the original's
    expression, every other row still; its picture paints each keypoint's move in its band."""
    d, entries, base = middle
    proc, rec = _restorer(d, entries, factor=factor, areas=areas)
    crop, original = _crop(1, (60, 140, 200)), _crop(2, (190, 90, 40))
    out = proc.run(crop[None], original[None])[0]
    want = expected(crop, original, factor, areas, base)
    gen = rec["live_portrait"].feeds[0]
    assert gen["source"].dtype == np.float32 and gen["source"].shape == (1, 21, 3)
    assert np.allclose(gen["target"], want["target"], atol=5e-6)
    assert np.allclose(gen["source"], want["source"], atol=5e-6)
    moved = np.abs(gen["source"] - gen["target"]).max(axis=2)[0] > 1e-6
    assert set(np.nonzero(moved)[0]) == want["taken"]
    # the pose and translation are the current crop's: the original's differ (its colour)
    assert abs(want["original"]["pitch"] - want["current"]["pitch"]) > 3
    assert np.abs(want["original"]["t"] - want["current"]["t"]).max() > 0.01
    assert out.shape == (512, 512, 3) and out.dtype == np.uint8
    for j, band in enumerate(band_rows()):
        assert np.abs(out[band].astype(int) - want["bands"][j]).max() <= 1, j
    still = sorted(set(range(21)) - want["taken"])
    assert {tuple(want["bands"][j]) for j in still} == {tuple(np.floor(
        want["current"]["mean"] * 255)[::-1])}


def test_the_limit_applies_to_the_mix_and_never_to_the_crops_own_expression(edges):
    """With the expression partly outside LivePortrait's range and factor 100 (a share of 1.2,
    past the original), the restored expression is clipped after the mix; the current crop's
    own keypoints (the generator's target) are not clipped, as FaceFusion feeds them."""
    d, entries, base = edges
    proc, rec = _restorer(d, entries, factor=100)
    crop, original = _crop(3, (40, 200, 120)), _crop(4, (220, 60, 90))
    proc.run(crop[None], original[None])
    want = expected(crop, original, 100, BOTH, base)
    gen = rec["live_portrait"].feeds[0]
    assert np.allclose(gen["source"], want["source"], atol=5e-6)
    assert np.allclose(gen["target"], want["target"], atol=5e-6)
    clipped = np.abs(want["unlimited"] - np.clip(want["unlimited"], EXPRESSION_MIN,
                                                 EXPRESSION_MAX)) > 1e-4
    assert clipped.sum() >= 5
    outside = (want["current"]["e"] < EXPRESSION_MIN) | (want["current"]["e"] > EXPRESSION_MAX)
    assert outside.sum() >= 5


def test_each_crop_goes_in_halved_by_area_as_rgb_over_255(middle):
    """Per face: the feature extractor reads the current crop, the motion extractor the current
    crop and then the original one; two faces, one call each."""
    d, entries, _ = middle
    proc, rec = _restorer(d, entries)
    crops = np.stack([_crop(5, (90, 90, 90)), _crop(6, (30, 160, 220))])
    originals = np.stack([_crop(7, (200, 30, 30)), _crop(8, (120, 220, 60))])
    proc.run(crops, originals)
    for k in range(2):
        fed = rec["live_portrait_feature_extractor"].feeds[k]["input"]
        assert fed.dtype == np.float32 and fed.shape == (1, 3, 256, 256)
        assert np.allclose(fed, prepared(crops[k]), atol=1e-7)
        current, driving = rec["live_portrait_motion_extractor"].feeds[2 * k: 2 * k + 2]
        assert np.allclose(current["input"], prepared(crops[k]), atol=1e-7)
        assert np.allclose(driving["input"], prepared(originals[k]), atol=1e-7)
    for name in ("live_portrait_eye_retargeter", "live_portrait_lip_retargeter",
                 "live_portrait_stitcher"):
        assert not rec[name].feeds                                   # the editor's: not run


def test_the_factor_maps_as_facefusions_and_no_original_means_the_crop_drives(middle):
    from render.processors.expression.restorer import original_share
    assert [original_share(v) for v in (0, 50, 80, 100)] == pytest.approx([0, 0.6, 0.96, 1.2])
    d, entries, base = middle
    proc, rec = _restorer(d, entries)
    crop = _crop(9, (100, 180, 60))
    out = proc.run(crop[None])[0]                # nothing changed the frame: the crop drives
    gen = rec["live_portrait"].feeds[0]
    assert np.abs(gen["source"] - gen["target"]).max() < 1e-6
    assert (np.abs(out.astype(int) - np.floor(motion(crop, base)["mean"] * 255)[::-1]) <= 1).all()


def test_a_generator_of_another_side_or_a_missing_extractor_is_one_model_error(tmp_path):
    entries = standin.write_expression_restorer(tmp_path, side=256)
    proc, _ = _restorer(tmp_path, entries)
    with pytest.raises(ModelError, match="made a 256x256 picture; the expression restorer "
                                         "pastes back 512x512"):
        proc.run(_crop(1, (90, 90, 90))[None])
    del entries["live_portrait_motion_extractor"]
    with pytest.raises(ModelError, match="needs live-portrait-motion-extractor model"):
        _restorer(tmp_path, entries)


# -- the face stage hands the step the crop of the frame as decoded -------------------------------
class Negate(FaceProcessor):
    """A face step that changes the face's colour (a swap, as far as the restorer can tell)."""

    template, size = "arcface_128", 128

    def run(self, crops: np.ndarray) -> np.ndarray:
        return 255 - crops


class Enlarge(FrameProcessor):
    """A frame step doubling the frame's size (a ×2 frame enhancer, nearest neighbour)."""

    def output_size(self, width: int, height: int) -> tuple[int, int]:
        return 2 * width, 2 * height

    def run(self, frames: list[np.ndarray]) -> list[np.ndarray]:
        return [cv2.resize(f, None, fx=2, fy=2, interpolation=cv2.INTER_NEAREST) for f in frames]


class Found:
    """A detector that finds the same faces in every frame."""

    def __init__(self, faces: list[Face]) -> None:
        self.faces = faces

    def detect(self, frame: np.ndarray) -> list[Face]:
        return list(self.faces)


H, W = 217, 333                 # odd sizes


def _faces() -> list[Face]:
    """Two faces, their five points the arcface_128 template's shape perturbed."""
    template = align.template_points("arcface_128", 1) - 0.5
    out = []
    for k, (cx, cy, side) in enumerate([(101.3, 97.6, 70.0), (236.8, 120.2, 82.0)]):
        kps = template * side + [cx, cy] + np.random.RandomState(k).normal(0, 1.5, (5, 2))
        box = np.array([cx - side / 2, cy - side / 2, cx + side / 2, cy + side / 2], np.float32)
        out.append(Face(box=box, kps=kps.astype(np.float32), score=0.9))
    return out


def _frame(seed: int) -> np.ndarray:
    """Colourful, with detail everywhere: a crop of the wrong place or frame shows."""
    y, x = np.mgrid[0:H, 0:W]
    base = np.stack([x * 255 // W, y * 255 // H, (x + y) * 255 // (W + H)], axis=2)
    noise = np.random.RandomState(seed).randint(0, 60, (H, W, 3))
    return np.clip(base + noise, 0, 255).astype(np.uint8)


def _stage(steps: list, faces: list[Face], batch: int) -> FaceStage:
    chain = []
    for p in steps:
        if isinstance(p, FrameProcessor):
            chain.append(FrameStep(p, p.run))
        else:
            chain.append(ChainStep(p, p.bind(Source(np.zeros(512, np.float32), lambda: None)),
                                   paste_masks("box", p.size, 0.0, 0.3)))
    return FaceStage(detector=Found(faces), select=lambda frame, found: found, chain=chain,
                     batch_size=batch, times=StageTimes())


@pytest.mark.parametrize("enlarge", [False, True])
def test_the_stage_hands_the_step_the_crop_of_the_frame_as_decoded(middle, enlarge):
    """Negate (the faces' colours changed), [a ×2 frame step], the restorer: for every face the
    motion extractor reads the current crop (of the negated, enlarged frame, at the points moved
    with it) and the original one — the frame as decoded, at the face's own points there. With
    the frame enlarged, FaceFusion's crop (the decoded frame at the moved points) is elsewhere."""
    d, entries, _ = middle
    proc, rec = _restorer(d, entries)
    negate = Negate(Step("negate", ""), None)
    before = [negate, Enlarge(Step("enlarge", ""), None)] if enlarge else [negate]
    faces, scale = _faces(), (2.0 if enlarge else 1.0)
    frames = [_frame(1), _frame(2)]
    decoded = [f.copy() for f in frames]
    changed = _stage(before, faces, batch=3).process([f.copy() for f in frames]).frames
    out = _stage([*before, proc], faces, batch=3).process(frames).frames
    assert out[0].shape == (H * scale, W * scale, 3)
    feeds = rec["live_portrait_motion_extractor"].feeds
    assert len(feeds) == 2 * 2 * len(faces)
    k = 0
    for i in range(2):
        for face in faces:
            at = align.estimate(face.kps * np.float32(scale), "arcface_128", 512)
            current = align.warp(changed[i], at, 512)
            original = align.warp(decoded[i], align.estimate(face.kps, "arcface_128", 512), 512)
            assert np.array_equal(feeds[2 * k]["input"], prepared(current).astype(np.float32))
            assert np.array_equal(feeds[2 * k + 1]["input"],
                                  prepared(original).astype(np.float32))
            assert np.abs(prepared(current) - prepared(original)).mean() > 0.1
            if enlarge:                  # §12-1: the decoded frame at the enlarged frame's points
                theirs = align.warp(decoded[i], at, 512)
                assert np.abs(prepared(theirs) - prepared(original)).mean() > 0.1
            k += 1


# -- renders through the command line -------------------------------------------------------------
@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The stand-ins, the LivePortrait set and a ×2 nearest frame enhancer in a manifest overlay,
    a source face, an image target of odd size and a 2 s clip."""
    tmp = tmp_path_factory.mktemp("expression")
    models = tmp / "models"
    standins.write_standins(models)
    layer = standin.write_expression_restorer(models)
    make_frame_enhancer(models / "nearest_x2.onnx", scale=2)
    layer["nearest_x2"] = enhancer_entry("nearest_x2.onnx", models / "nearest_x2.onnx", scale=2,
                                         tile=128, pad=8, context=8)
    overlay = tmp / "expression.yaml"
    overlay.write_text(yaml.safe_dump({"version": 1, "models": layer}))
    media.make_source_image(tmp / "source.png")
    media.make_image_target(tmp / "target.png", width=641, height=359)
    media.make_clip(tmp / "clip.mp4", width=320, height=180, seconds=2.0)
    return tmp, models, overlay


def _cli(world, folder: str, *keys: str, target: str = "target.png", command: tuple = (),
         code: int = 0) -> tuple[Path, subprocess.CompletedProcess]:
    tmp, models, overlay = world
    out = tmp / folder / f"out{Path(target).suffix}"
    r = run_cli(*command, "profile=low", f"source={tmp / 'source.png'}", f"target={tmp / target}",
                f"output={out}", f"models.dir={models}", f"models.manifest={overlay}",
                f"cache_dir={tmp / 'cache'}", "lock.device=none", "progress=off",
                "execution.providers=cpu", "frame_enhance.model=nearest_x2", *keys)
    assert r.returncode == code, r.stderr
    return out, r


def _restored_pixels(world, before: str, *keys: str) -> tuple[dict, np.ndarray, list]:
    """Render ``processors=<before>,expression`` and ``processors=<before>`` (the frame the
    restorer is given), with the faces' points written out; returns the report, the output and,
    per face, (the crop transform on the output, the current crop, the decoded frame's crop,
    FaceFusion's crop of the decoded frame at the output's points)."""
    tmp = world[0]
    name = before.replace(",", "-")
    plain, _ = _cli(world, f"{name}-plain", f"processors={before}")
    faces = tmp / f"{name}-faces.jsonl"
    restored, _ = _cli(world, name, f"processors={before},expression",
                       f"debug.faces={faces}", *keys)
    decoded, current = cv2.imread(str(tmp / "target.png")), cv2.imread(str(plain))
    scale = current.shape[1] / decoded.shape[1]
    crops = []
    for face in json.loads(faces.read_text().splitlines()[-1])["faces"]:
        kps = np.array(face["used"], np.float32)
        at = align.estimate(kps * np.float32(scale), "arcface_128", 512)
        crops.append((at, align.warp(current, at, 512),
                      align.warp(decoded, align.estimate(kps, "arcface_128", 512), 512),
                      align.warp(decoded, at, 512)))
    return json.loads(Path(f"{restored}.report.json").read_text()), cv2.imread(str(restored)), \
        crops


def _band_pixels(image: np.ndarray, at: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """(band, the output's pixels) for the output pixels that fall well inside a band of the
    crop, away from its edges (profile low's box mask is 1 there; the crop's bilinear
    neighbours are in one band)."""
    lo, hi = 24, 488
    inverse = cv2.invertAffineTransform(at)
    corners = inverse @ np.array([[lo, lo, 1], [hi, lo, 1], [lo, hi, 1], [hi, hi, 1]]).T
    x1, y1 = np.maximum(np.floor(corners.min(axis=1)).astype(int), 0)
    x2, y2 = np.minimum(np.ceil(corners.max(axis=1)).astype(int), image.shape[1::-1])
    ys, xs = np.mgrid[y1:y2, x1:x2]
    u = at[0, 0] * xs + at[0, 1] * ys + at[0, 2]
    v = at[1, 0] * xs + at[1, 1] * ys + at[1, 2]
    inside = (u > lo) & (u < hi) & (v > lo) & (v < hi)
    out = []
    for j, band in enumerate(band_rows()):
        near = inside & (v > band[0] + 1.5) & (v < band[-1] - 0.5)
        if near.any():
            out.append((j, image[ys[near], xs[near]].astype(int)))
    return out


@pytest.mark.parametrize("before", ["swap", "swap,frame_enhance"])
def test_the_restored_face_has_the_expression_of_the_target_as_decoded(world, before):
    """The restored face's bands, predicted from the target image at the face's own points
    (also after a ×2 frame enhancer); the prediction from the swapped face (the frame the step is
    given) or from FaceFusion's misplaced crop after the enhancer differs visibly."""
    report, out, crops = _restored_pixels(world, before, "expression.areas=lower-face",
                                          "expression.factor=90")
    base = standin.face_editor.default_expression().astype(np.float64)
    assert crops
    for at, current, original, theirs in crops:
        want = expected(current, original, 90, ("lower-face",), base)["bands"]
        swapped = expected(current, current, 90, ("lower-face",), base)["bands"]
        misplaced = expected(current, theirs, 90, ("lower-face",), base)["bands"]
        seen = _band_pixels(out, at)
        assert [j for j, _ in seen] == list(range(1, 20))          # bands 0 and 20: at the edges
        for j, pixels in seen:
            assert np.abs(pixels - want[j]).max() <= 2, (j, pixels.min(0), want[j])
        moved = [j for j, _ in seen if j in rows(ROWS["lower-face"])]
        assert moved and max(np.abs(want[j] - swapped[j]).max() for j in moved) > 10
        if before.endswith("frame_enhance"):
            assert max(np.abs(want[j] - misplaced[j]).max() for j in moved) > 10
    row = next(m for m in report["models"] if m["role"] == "expression")
    assert row["name"] == "live_portrait" and row["sha256"]
    assert row["factor"] == 90 and row["areas"] == ["lower-face"]
    assert {n["name"] for n in row["needs"]} == {"live_portrait_feature_extractor",
                                                 "live_portrait_motion_extractor"}


def test_a_restored_clip_has_the_same_bytes_on_every_schedule(world):
    """A swap, the frame enhancer, the restorer: the frames as decoded kept for the restorer on
    one lane or two, in segments, shards and a resumed render."""
    resumed, report = on_every_schedule(lambda folder, *keys, command=(): _cli(
        world, folder, "processors=swap,frame_enhance,expression", "expression.factor=60",
        "segment.seconds=0.5", *keys, target="clip.mp4", command=command)[0])
    counts = media.probe_counts(resumed)
    assert (counts.width, counts.height, counts.frames) == (640, 360, 50)
    assert any(m["role"] == "expression" for m in report["models"])


def test_factor_0_or_no_area_leaves_the_step_out_with_a_warning(caplog):
    keys = {"profile": "low", "processors": "swap,expression"}
    assert [s.name for s in chain_steps(load_config(keys, env={}))] == ["swap", "expression"]
    for key, value, why in (("expression.factor", "0", "expression.factor is 0"),
                            ("expression.areas", "", "expression.areas is empty")):
        caplog.clear()
        assert [s.name for s in chain_steps(load_config({**keys, key: value}, env={}))] == \
            ["swap"]
        assert f"expression is left out of the chain: {why}" in caplog.text


@pytest.mark.parametrize("keys,says", [
    (("processors=swap,expression", "expression.factor=101"),
     "expression.factor: expected an integer between 0 and 100, got 101"),
    (("processors=swap,expression", "expression.areas=upper-face,mouth"),
     "expression.areas: expected a list of upper-face|lower-face, got 'upper-face,mouth'"),
    (("processors=swap,expression,expression",), "expression is named twice")])
def test_bad_input_is_one_line_and_nothing_is_written(world, keys, says):
    out, r = _cli(world, "bad", *keys, code=2)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and says in lines[0], r.stderr
    assert not out.parent.exists() or not any(out.parent.iterdir())


def test_models_list_shows_the_shared_set_not_pinned_yet():
    r = run_cli("models", "list")
    assert r.returncode == 0, r.stderr
    row = next(line for line in r.stdout.splitlines() if line.startswith("live_portrait "))
    assert "not pinned yet" in row


# -- the counted cost per call --------------------------------------------------------------------
def test_the_counted_cost_per_face_is_one_f_two_m_and_one_g():
    """The restorer runs the feature extractor once, the motion extractor twice (the current
    and the original crop) and the generator once per face; the generator dominates."""
    from bench import live_portrait_costs as costs

    f, m, g = (costs.COUNTED[n]().macs for n in ("live_portrait_feature_extractor",
                                                 "live_portrait_motion_extractor",
                                                 "live_portrait"))
    assert costs.expression_restorer_gmacs() == pytest.approx((f + 2 * m + g) / 1e9)
    assert g > 0.9 * costs.expression_restorer_gmacs() * 1e9
    assert "expression per face" in costs.table()
