"""The age modifier (``processors=swap,age_modifier``, issue 40): FRAN with the FairFace age it
needs, StyleGANEX with its two crops cut from the one the stage pastes back, FaceFusion's colour
match, and the occlusion mask where the occluder is (FaceFusion's §12-2 defect not copied).

The stand-ins (``render.standins.age_modifiers``) have answers computed here on their own: FRAN
shifts the red plane by the age step it is asked for, StyleGANEX gives its extended crop back
(enlarged) with red stripes as strong as its direction, FairFace reads the age from the red of
the nose tip. Crops are checked against FaceFusion's own recipe written out here with OpenCV
(``estimateAffinePartial2D`` on landmarks scaled about the nose tip), on perturbed points and
frames of odd sizes.
"""
from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from render.config import load_config
from render.face_stage import ChainStep, FaceStage
from render.faces import align
from render.faces.mask import paste_masks
from render.faces.types import Face
from render.masks.occlusion import OcclusionMask
from render.model_handle import ModelEntry, ProcessorModel
from render.processors.age_modifier import PROCESSOR
from render.processors.colour_match import match_frame_color
from render.processors.age_modifier.fairface import AgeClassifier
from render.processors.age_modifier.fran import FranAgeModifier
from render.processors.age_modifier.styleganex import StyleganexAgeModifier, model_crops
from render.sessions import SessionFactory
from render.standins import quality
from render.standins.age_modifiers import (AGE_WINDOW, STRIPE, STRIPE_GAIN, make_fairface,
                                           make_fran, make_styleganex)

#: FaceFusion's templates, written out here (face_helper.WARP_TEMPLATE_SET)
FFHQ_512 = np.array([[0.37691676, 0.46864664], [0.62285697, 0.46912813], [0.50123859, 0.61331904],
                     [0.39308822, 0.72541100], [0.61150205, 0.72490465]])
STYLEGANEX_384 = np.array([[0.42353745, 0.52289879], [0.57725008, 0.52319972],
                           [0.50123859, 0.61331904], [0.43364461, 0.68337652],
                           [0.57015325, 0.68306005]])
ARCFACE_112_V2 = np.array([[0.34191607, 0.46157411], [0.65653393, 0.45983393],
                           [0.50022500, 0.64050536], [0.37097589, 0.82469196],
                           [0.63151696, 0.82325089]])
#: FairFace's age buckets' means (FaceFusion: numpy.mean(range(lo, hi)))
BUCKET_AGES = (0.5, 5.5, 14.0, 24.0, 34.0, 44.0, 54.0, 64.0, 84.5)
H, W = 251, 333                              # odd on purpose


def facefusion_matrix(points: np.ndarray, template: np.ndarray, side: int) -> np.ndarray:
    """FaceFusion's warp matrix (face_helper.warp_face_by_face_landmark_5)."""
    return cv2.estimateAffinePartial2D(points.astype(np.float32),
                                       (template * side).astype(np.float32),
                                       method=cv2.RANSAC, ransacReprojThreshold=100)[0]


def facefusion_extend(points: np.ndarray) -> np.ndarray:
    """FaceFusion's scale_face_landmark_5(points, 0.875): about the nose tip."""
    return (points - points[2]) * 0.875 + points[2]


def _kps(centre: tuple[float, float], side: float, seed: int, jitter: float = 2.5) -> np.ndarray:
    """A face's five points: ffhq_512 at ``side`` px, centred, moved by up to ``jitter`` px each
    and turned a little (a real face never fits a template)."""
    rs = np.random.RandomState(seed)
    pts = (FFHQ_512 - 0.5) * side
    turn = np.deg2rad(rs.uniform(-12, 12))
    rot = np.array([[np.cos(turn), -np.sin(turn)], [np.sin(turn), np.cos(turn)]])
    return (pts @ rot.T + centre + rs.uniform(-jitter, jitter, (5, 2))).astype(np.float32)


def _face(kps: np.ndarray) -> Face:
    lo, hi = kps.min(axis=0), kps.max(axis=0)
    return Face(box=np.concatenate([lo, hi]).astype(np.float32), kps=kps, score=1.0)


def _texture(h: int, w: int, seed: int, sigma: float = 2.0) -> np.ndarray:
    """Blurred noise in 40..215: detail a misplaced paste would show, room for shifts."""
    noise = np.random.RandomState(seed).randint(0, 256, (h, w, 3)).astype(np.uint8)
    smooth = cv2.GaussianBlur(noise, (0, 0), sigma).astype(np.float32)
    smooth = (smooth - smooth.mean()) / smooth.std() * 30 + 128
    return np.clip(smooth, 40, 215).astype(np.uint8)


def _warp(frame: np.ndarray, matrix: np.ndarray, side: int) -> np.ndarray:
    return cv2.warpAffine(frame, matrix, (side, side), flags=cv2.INTER_LINEAR,
                          borderMode=cv2.BORDER_REPLICATE)


# -- the crops ------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_extended_template_is_facefusions_scaled_points_but_for_a_seventh_of_the_nose(seed):
    """FaceFusion fits the points scaled 0.875 times about the nose tip to styleganex_384; the
    stage fits the points themselves to styleganex_384_extended. Same rotation and scale; the
    translations differ by a seventh of the nose tip's residual in the unscaled fit."""
    kps = _kps((160.0, 120.0), 150.0, seed)
    theirs = facefusion_matrix(facefusion_extend(kps), STYLEGANEX_384, 384)
    ours = align.estimate(kps, "styleganex_384_extended", 384)
    assert np.allclose(ours[:, :2], theirs[:, :2], atol=2e-5)
    plain = facefusion_matrix(kps, STYLEGANEX_384, 384)
    residual = kps[2] @ plain[:, :2].T + plain[:, 2] - STYLEGANEX_384[2] * 384
    assert np.abs(residual).max() > 0.5                        # the points do not fit exactly
    assert np.allclose(ours[:, 2] - theirs[:, 2], residual / 7, atol=2e-3)


@pytest.mark.parametrize("seed", [3, 4])
def test_styleganex_crops_are_the_ones_facefusion_cuts_from_the_frame(seed):
    """From the stage's 1024-px extended crop: ``target_with_background`` is that crop at 384 px
    (pixel centres kept: FaceFusion's own 384 crop but for the seventh above and that half-pixel
    of the resize) and ``target`` is FaceFusion's ffhq_512 256-px crop of the frame itself."""
    frame = _texture(H, W, seed, sigma=3.0)
    kps = _kps((170.0, 128.0), 120.0, seed)
    crop = _warp(frame, align.estimate(kps, "styleganex_384_extended", 1024), 1024)
    extended, face = model_crops(crop)
    assert extended.shape == (384, 384, 3) and face.shape == (256, 256, 3)
    truth = _warp(frame, facefusion_matrix(kps, FFHQ_512, 256), 256)
    error = np.abs(face.astype(int) - truth)
    assert error.mean() < 1.0 and np.percentile(error, 99) <= 4, (error.mean(), error.max())
    m = facefusion_matrix(facefusion_extend(kps), STYLEGANEX_384, 384)
    shift = 0.5 * 384 / 1024 - 0.5                             # the area resize's pixel centres
    nose = (kps[2] @ m[:, :2].T + m[:, 2]) - STYLEGANEX_384[2] * 384
    m[:, 2] += shift + nose / 7
    error = np.abs(extended.astype(int) - _warp(frame, m, 384))
    assert error.mean() < 1.5, error.mean()
    shifted = np.abs(np.roll(extended, 1, axis=1).astype(int) - _warp(frame, m, 384))
    assert shifted.mean() > 3 * error.mean()                  # a pixel off would show


def test_fairfaces_crop_is_cut_from_the_ffhq_crop_near_where_facefusion_cuts_it():
    """arcface_112_v2 is not a similarity image of ffhq_512: the templates' own fit stands in
    for the face's, a pixel or so off at 224 px for points that fit their templates this badly."""
    frame = _texture(H, W, 5, sigma=4.0)
    kps = _kps((165.0, 125.0), 160.0, 5, jitter=1.5)
    crop = _warp(frame, align.estimate(kps, "ffhq_512", 1024), 1024)
    from render.processors.age_modifier.geometry import recrop
    face = recrop(crop, "ffhq_512", "arcface_112_v2", 224)
    truth = _warp(frame, facefusion_matrix(kps, ARCFACE_112_V2, 224), 224)
    error = np.abs(face.astype(int) - truth)
    assert error.mean() < 3.0, error.mean()


# -- the processors, one call at a time ---------------------------------------------------------
def _model(tmp: Path, name: str, contract: str, template: str, side: int,
           needs: dict | None = None) -> ProcessorModel:
    factory = SessionFactory(load_config({}, env={}).execution, tmp,
                             available=["CPUExecutionProvider"])
    path = tmp / f"{name}.onnx"
    entry = ModelEntry(name=name, file=path.name, sha256="", size=None, urls=(), licence="test",
                       commercial_use=True, contract=contract, template=template,
                       input_size=side, needs=tuple(needs or ()))
    return ProcessorModel(entry, path, factory.lazy(path), tmp, needs or {})


def _fran(tmp: Path, direction: int, background: bool = False) -> FranAgeModifier:
    make_fran(tmp / "fran.onnx", background=background)
    make_fairface(tmp / "fairface.onnx")
    fairface = _model(tmp, "fairface", "classifier-fairface", "arcface_112_v2", 224)
    model = _model(tmp, "fran", "age-modifier-fran", "ffhq_512", 1024, {"fairface": fairface})
    return FranAgeModifier(PROCESSOR.step("fran", direction=direction), model)


def _styleganex(tmp: Path, direction: int) -> StyleganexAgeModifier:
    make_styleganex(tmp / "styleganex_age.onnx")
    model = _model(tmp, "styleganex_age", "age-modifier-styleganex", "styleganex_384", 384)
    return StyleganexAgeModifier(PROCESSOR.step("styleganex_age", direction=direction), model)


def _painted(red_face: int, red_around: int, kps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A frame whose red is ``red_face`` on a disc round the nose tip (half the eyes' distance
    across) and ``red_around`` elsewhere, green and blue textured; and the disc (bool)."""
    frame = _texture(H, W, 9)
    frame[..., 2] = red_around
    disc = np.zeros((H, W), np.uint8)
    eyes = float(np.linalg.norm(kps[1] - kps[0]))
    cv2.circle(disc, tuple(int(round(v)) for v in kps[2]), int(0.5 * eyes), 1, -1)
    frame[disc == 1, 2] = red_face
    return frame, disc == 1


@pytest.mark.parametrize("red,bucket", [(20, 0), (100, 3), (150, 5), (250, 8)])
def test_the_age_is_the_mean_of_fairfaces_bucket(tmp_path, red, bucket):
    """The stand-in reads floor(9 · red / 255) on the nose tip of the 224-px arcface_112_v2
    crop (RGB, ImageNet-normalised, third output): the red round the face never counts."""
    kps = _kps((166.0, 126.0), 170.0, 6)
    frame, _ = _painted(red, 255 - red, kps)
    crop = _warp(frame, align.estimate(kps, "ffhq_512", 1024), 1024)
    assert int(np.floor(9 * red / 255)) == bucket
    make_fairface(tmp_path / "fairface.onnx")
    classifier = AgeClassifier(_model(tmp_path, "fairface", "classifier-fairface",
                                      "arcface_112_v2", 224), "ffhq_512")
    assert classifier.age(crop) == BUCKET_AGES[bucket]
    rows, cols = AGE_WINDOW                                    # the window is the nose tip's
    assert rows.start < ARCFACE_112_V2[2, 1] * 224 < rows.stop
    assert cols.start < ARCFACE_112_V2[2, 0] * 224 < cols.stop


def _stage(proc, masks=None) -> FaceStage:
    before = list(masks) if masks is not None else paste_masks("feather", proc.size, 0.0, 0.3)
    step = ChainStep(proc, proc.bind(None), before)
    return FaceStage(detector=None, select=lambda f, found: found, chain=[step])


def _inner(m: np.ndarray, size: int, margin: float) -> np.ndarray:
    """Frame pixels whose place in the ``size`` crop of matrix ``m`` is at least ``margin`` of
    its side from its edges (where the feathered mask is 1)."""
    ys, xs = np.mgrid[0:H, 0:W]
    cx = m[0, 0] * xs + m[0, 1] * ys + m[0, 2]
    cy = m[1, 0] * xs + m[1, 1] * ys + m[1, 2]
    lo, hi = margin * size, (1 - margin) * size
    return (cx > lo) & (cx < hi) & (cy > lo) & (cy < hi)


@pytest.mark.parametrize("direction,red,around", [(30, 100, 90), (90, 150, 60),
                                                   (-60, 150, 130)])
def test_fran_shifts_the_face_by_the_age_step_it_asks_for(tmp_path, direction, red, around):
    """Through the stage (an odd frame, perturbed points): the face's red moves by
    255 · (clip((age + d) / 100) − age / 100), age the bucket's mean (read on the nose tip);
    green and blue stay; nothing outside the crop changes."""
    kps = _kps((166.0, 126.0), 170.0, 7)
    frame, disc = _painted(red, around, kps)
    age = BUCKET_AGES[int(np.floor(9 * red / 255))]
    step = 255 * (min(max((age + direction) / 100, 0.0), 1.0) - age / 100)
    before = frame.copy()
    _stage(_fran(tmp_path, direction)).swap([frame], [(0, _face(kps))])
    m = facefusion_matrix(kps, FFHQ_512, 1024)
    inner = _inner(m, 1024, 0.2) & ~cv2.dilate(disc.astype(np.uint8), np.ones((5, 5))).astype(bool)
    shift = frame.astype(float) - before
    assert abs(shift[inner][:, 2].mean() - step) < 1.0, (shift[inner][:, 2].mean(), step)
    assert np.abs(shift[inner][:, :2].mean(axis=0)).max() < 0.5
    assert np.abs(shift[inner][:, :2]).mean() < 1.0           # the geometry: green, blue in place
    outside = ~_inner(m, 1024, -0.01)
    assert np.array_equal(frame[outside], before[outside])


def test_fran_feeds_the_same_crop_as_both_crops_where_the_graph_takes_both(tmp_path):
    """A graph that also declares target_with_background is fed the crop there too (the
    stand-in returns their mean): the result is the crop shifted, as with one input."""
    kps = _kps((166.0, 126.0), 170.0, 8)
    crop = _warp(_painted(100, 90, kps)[0], align.estimate(kps, "ffhq_512", 1024), 1024)
    one = _fran(tmp_path, 40).run(crop[None])
    (tmp_path / "both").mkdir()
    two = _fran(tmp_path / "both", 40, background=True).run(crop[None])
    assert np.array_equal(one, two)
    assert abs(one[0, ..., 2].astype(int) - crop[..., 2]).mean() > 20


def _stripes(side: int) -> np.ndarray:
    """The stand-in's stripes at the crop's side: ±1 in bands of STRIPE output px of the model's
    1536, area-resized as the result is (a band edge falls inside a pixel here and there)."""
    row = np.where((np.arange(1536) // STRIPE) % 2 == 0, 1.0, -1.0).astype(np.float32)
    return cv2.resize(np.tile(row, (4, 1)), (side, 4), interpolation=cv2.INTER_AREA)[0]


@pytest.mark.parametrize("direction", [100, -40, 0])
def test_styleganex_direction_is_reversed_scaled_and_survives_the_colour_match(tmp_path,
                                                                                direction):
    """direction d is fed as interp(d, [−100, 100], [2.5, −2.5]): the stand-in's red stripes come
    out 127.5 · STRIPE_GAIN · that strong (levels, on the red plane only: RGB in, BGR out), and
    the colour match, which takes the crop's colour at 16-px blocks, leaves them."""
    proc = _styleganex(tmp_path, direction)
    crop = _warp(_texture(H, W, 11, sigma=3.0),
                 align.estimate(_kps((166.0, 126.0), 130.0, 11), "styleganex_384_extended",
                                1024), 1024)
    out = proc.run(crop[None])[0]
    assert out.shape == crop.shape and out.dtype == np.uint8
    change = out.astype(float) - crop
    pattern = _stripes(1024)
    strength = -2.5 * direction / 100
    for channel, want in ((2, 127.5 * STRIPE_GAIN * strength), (1, 0.0), (0, 0.0)):
        amplitude = (change[64:-64, 64:-64, channel] * pattern[64:-64]).mean() / \
            (pattern[64:-64] ** 2).mean()
        assert abs(amplitude - want) < 0.6, (channel, amplitude, want)
    assert abs(change.mean()) < 1.0                   # the colour match: no shift of the whole


def test_the_colour_match_takes_the_crops_colour_at_the_coarsest_scale_only():
    """A result 25 levels brighter than its crop, with detail of its own: matched, it has the
    crop's colour (16-px blocks) and keeps its own detail (FaceFusion's match_frame_color; each
    of its passes truncates, which costs up to half a level a pass)."""
    crop = _texture(512, 512, 12, sigma=20.0)
    detail = (_texture(512, 512, 13, sigma=1.0).astype(int) - 128) // 4
    result = np.clip(crop.astype(int) + 25 + detail, 0, 255).astype(np.uint8)
    out = match_frame_color(crop, result).astype(int)
    assert abs((out - crop).mean()) < 1.6
    kept = out - crop
    assert np.corrcoef(kept.ravel(), detail.ravel())[0, 1] > 0.95


@pytest.mark.parametrize("seed,centre,side", [(14, (166.0, 126.0), 100.0),
                                               (15, (120.0, 140.0), 80.0)])
def test_a_styleganex_that_edits_nothing_gives_the_frame_back(tmp_path, seed, centre, side):
    """The stand-in at direction 0 returns its extended crop enlarged: through the two crops, the
    model's 1536 px, the 1024 px, the colour match and the paste by the stage's matrix, the
    frame comes back up to resampling (a pixel's shift would be three times further off), and
    untouched outside the crop."""
    frame = _texture(H, W, seed)
    before = frame.copy()
    kps = _kps(centre, side, seed)
    _stage(_styleganex(tmp_path, 0)).swap([frame], [(0, _face(kps))])
    m = facefusion_matrix(facefusion_extend(kps), STYLEGANEX_384, 1024)
    inner = _inner(m, 1024, 0.16)
    assert inner.sum() > 5000
    error = np.abs(frame.astype(int) - before)[inner]
    shifted = np.abs(np.roll(before, 1, axis=1).astype(int) - before)[inner]
    assert error.mean() < shifted.mean() / 3, (error.mean(), shifted.mean())
    assert error.mean() < 2.5
    outside = ~_inner(m, 1024, -0.01)
    assert np.array_equal(frame[outside], before[outside])


def test_the_occlusion_mask_keeps_the_occluder_where_it_is_in_the_frame(tmp_path):
    """The xseg stand-in calls blue (B − R in 0.55..0.9) an occluder. With the occlusion mask on
    the styleganex step, a blue square beside the nose keeps its pixels exactly while the
    stripes change the face round it: the mask is computed on the crop the stage pastes by, so
    it lands where the square is (FaceFusion warps its mask by inv(M)·E: §12-2)."""
    frame = _texture(H, W, 16)
    kps = _kps((166.0, 126.0), 110.0, 16)
    x, y = int(kps[2, 0]) + 8, int(kps[2, 1]) - 12
    frame[y:y + 22, x:x + 22] = (230, 60, 20)                 # BGR: blue, B − R = 0.82
    before = frame.copy()
    quality.make_xseg(tmp_path / "xseg.onnx")
    occluder = OcclusionMask("occlusion", _model(tmp_path, "xseg", "occluder-xseg", "", 256),
                             load_config({}, env={}).mask)
    proc = _styleganex(tmp_path, 100)
    masks = [*paste_masks("feather", proc.size, 0.0, 0.3), occluder]
    _stage(proc, masks).swap([frame], [(0, _face(kps))])
    inside = (slice(y + 3, y + 19), slice(x + 3, x + 19))     # the soft edge rounds the corners
    assert np.array_equal(frame[inside], before[inside])
    ring = np.zeros((H, W), bool)
    ring[y - 30:y + 52, x - 30:x + 52] = True
    ring[y - 12:y + 34, x - 12:x + 34] = False                # clear of the mask's soft edge
    assert np.abs(frame[ring].astype(int) - before[ring])[:, 2].mean() > 4


# -- through the CLI ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from render import standins
    from render.standins import media
    from render.standins.age_modifiers import write_age_modifiers

    tmp = tmp_path_factory.mktemp("age-modifier-render")
    models = tmp / "models"
    standins.write_standins(models)
    write_age_modifiers(models)
    clip = media.make_clip(tmp / "clip.mp4", width=320, height=180, seconds=1.0)
    media.make_source_image(tmp / "source.png")
    image = media.make_image_target(tmp / "target.png", width=331, height=241)
    return tmp, models, clip, image


def _render(world, folder: str, *keys: str, command: tuple[str, ...] = (),
            target: Path | None = None, name: str = "clip.mp4", code: int = 0):
    from conftest import run_cli

    tmp, models, clip, _ = world
    out = tmp / folder / name
    r = run_cli(*command, "profile=low", f"source={tmp / 'source.png'}",
                f"target={target or clip.path}", f"output={out}", f"models.dir={models}",
                f"cache_dir={tmp / 'cache'}", "lock.device=none", "progress=off",
                "execution.providers=cpu", "processors=swap,age_modifier", *keys)
    assert r.returncode == code, r.stderr
    return out, r


def test_a_fran_render_has_the_same_bytes_on_any_schedule_and_its_report_row(world):
    """Segments on one lane and on two, shards assembled, a render resumed: one SHA-256; the
    faces' red is raised by the age step (the swap-only render's frames differ); the report's
    row names fran, its changed direction and the classifier it needs."""
    from render.standins import media
    from schedules import on_every_schedule

    out, rep = on_every_schedule(lambda folder, *keys, command=(): _render(
        world, folder, "segment.seconds=0.5", "age_modifier.direction=20", *keys,
        command=command)[0])
    plain, _ = _render(world, "swap-only", "segment.seconds=0.5", "processors=swap")
    aged, swapped = media.read_frames(out), media.read_frames(plain)
    _, _, clip, _ = world
    k = next(i for i, boxes in enumerate(clip.boxes) if boxes)
    x1, y1, x2, y2 = (int(v) for v in clip.boxes[k][0])
    raised = aged[k][y1:y2, x1:x2].astype(int) - swapped[k][y1:y2, x1:x2]
    assert raised[..., 2].mean() > 15 and abs(raised[..., :2].mean()) < 3
    row = next(m for m in rep["models"] if m["role"] == "age_modifier")
    assert (row["name"], row["direction"]) == ("fran", 20)
    assert [(n["role"], n["name"]) for n in row["needs"]] == [("age_modifier-fairface",
                                                              "fairface")]


def test_styleganex_changes_the_face_and_nothing_far_from_it(world):
    """An image through swap, then styleganex at direction 100: its stripes change the face;
    far from the face's extended crop the pixels are the swap-only render's."""
    tmp, _, _, image = world
    aged, r = _render(world, "styleganex", "age_modifier.model=styleganex_age",
                      "age_modifier.direction=100", target=image.path, name="aged.png")
    plain, _ = _render(world, "plain", "processors=swap", target=image.path, name="plain.png")
    a, p = cv2.imread(str(aged)).astype(int), cv2.imread(str(plain)).astype(int)
    x1, y1, x2, y2 = (int(v) for v in image.boxes[0])
    assert np.abs(a - p)[y1:y2, x1:x2, 2].mean() > 3
    assert np.abs(a - p)[y1:y2, x1:x2, :2].mean() < 1.5
    far = np.ones(a.shape[:2], bool)
    w, h = x2 - x1, y2 - y1
    far[max(0, y1 - 2 * h):y2 + 2 * h, max(0, x1 - 2 * w):x2 + 2 * w] = False
    assert far.any() and np.array_equal(a[far], p[far])
    from render.report import report_path

    row = next(m for m in json.loads(report_path(aged).read_text())["models"]
               if m["role"] == "age_modifier")
    assert (row["name"], row["direction"]) == ("styleganex_age", 100)
    assert "needs" not in row


@pytest.mark.parametrize("key,words,code", [
    ("age_modifier.direction=101", "age_modifier.direction", 2),
    ("age_modifier.direction=-101", "age_modifier.direction", 2),
    ("age_modifier.direction=old", "age_modifier.direction", 2),
    ("processors=swap,age_modifier,age_modifier", "age_modifier is named twice", 2),
    ("age_modifier.model=fairface", "age_modifier.model needs age-modifier-fran or", 4),
])
def test_bad_input_is_one_line_and_nothing_is_written(world, key, words, code):
    """Out of range, not a number, the step named twice (exit 2), a model of another contract
    (exit 4): one line each, before anything is written."""
    out, r = _render(world, f"bad-{key.replace('=', '-').replace(',', '-')}", key, code=code)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], r.stderr
    assert not out.parent.exists() or list(out.parent.iterdir()) == []


def test_a_fran_without_its_classifier_is_one_line(world, tmp_path):
    """A fran entry whose needs name no FairFace classifier: refused before any frame."""
    import yaml

    tmp, models, _, _ = world
    entry = yaml.safe_load((models / "manifest.yaml").read_text())["models"]["fran"]
    overlay = tmp_path / "fran.yaml"
    overlay.write_text(yaml.safe_dump({"version": 1, "models": {
        "fran_alone": {**entry, "needs": []}}}))
    out, r = _render(world, "alone", f"models.manifest={overlay}", "age_modifier.model=fran_alone",
                     code=4)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "classifier-fairface" in lines[0], r.stderr
    assert not out.exists()


def test_models_list_shows_the_age_models_as_not_pinned_yet():
    from conftest import run_cli

    r = run_cli("models", "list")
    assert r.returncode == 0, r.stderr
    rows = {line.split()[0]: line for line in r.stdout.splitlines() if line.strip()}
    for name in ("fran", "styleganex_age", "fairface"):
        assert "not pinned yet" in rows[name], rows.get(name)
    assert "NON-COMMERCIAL" in rows["styleganex_age"] and "NON-COMMERCIAL" not in rows["fran"]


def test_the_counted_parameters_are_the_published_ones():
    """FRAN's 31.4 M (ry-lu's README), ResNet-34's 21.8 M (torchvision, its 1000-way head), the
    StyleGAN2 1024-px generator's 30.0 M: the counts the age costs are built on."""
    from bench import age_costs

    published = age_costs.PUBLISHED_PARAMS
    assert age_costs.fran().params / 1e6 == pytest.approx(published["fran"], rel=0.005)
    assert age_costs.resnet34(1000, bn=True).params / 1e6 == pytest.approx(published["resnet34"],
                                                                          rel=0.005)
    assert age_costs.stylegan2_generator(mapping=True).params / 1e6 == pytest.approx(
        published["stylegan2_1024"], rel=0.015)
    # FairFace's head: 18 outputs instead of 1000; the generator's spatial work grows with the
    # extended crop's side squared
    assert age_costs.resnet34(1000).params - age_costs.fairface().params == 512 * 982 + 982
    small, large = age_costs.stylegan2_generator(24), age_costs.stylegan2_generator(48)
    assert large.params == small.params and large.macs == pytest.approx(4 * small.macs, rel=0.02)
