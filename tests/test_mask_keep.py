"""mask.keep=mouth: the target's own mouth stays through the swap, with a soft edge.

The keep mask is measured on the target's crop before the swap (the 68 landmarks' mouth hull,
or the parser's mouth and lip classes when mask.parser is on), grown by 2.5% of the crop side
and feathered over 5% more. A stand-in swapper of the inswapper contract that paints every crop
one colour shows it in the frame: the mouth's pixels are the target's bytes, the cheek is the
paint, the edge lies between.
"""
from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
import yaml
from onnx import TensorProto, helper

from render import standins
from render.batch import render_all
from render.config import load_config
from render.errors import ConfigError
from render.faces import align
from render.faces.types import Face
from render.files import sha256_file
from render.masks.build import step_masks
from render.masks.keep import KeepMask
from render.models.needs import landmark_models
from render.standins import media, quality
from render.standins.graph import Graph, finish

PAINT_RGB = (0.2, 0.6, 1.0)            # the painter's output, RGB 0..1
PAINT_BGR = np.array([255, 153, 51])   # … as it reaches the frame
#: the parser stand-in's class map (quarters of the crop): skin, with the bottom row's middle
#: cells upper lip (12) and lower lip (13)
MOUTH_MAP = np.array([[1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], [1, 12, 13, 1]])
SIDE = 128                             # the inswapper crop the debugger's transform maps to
GROW, FEATHER = 0.025, 0.05            # the documented shares of the crop side


def make_painter(path: Path) -> None:
    """The inswapper contract (target [1,3,128,128] RGB 0..1, source [1,512], emap the last
    initializer) with every output pixel PAINT_RGB."""
    g = Graph("painter")
    zero = g.const(np.array(0.0, np.float32), "zero")
    latent = g.op("MatMul", ["source", "emap"], "latent")
    nothing = g.op("Mul", [g.op("ReduceSum", [latent], keepdims=0), zero], "nothing")
    blank = g.op("Add", [g.op("Mul", ["target", zero], "blank"), nothing], "blank_too")
    g.op("Add", [blank, g.const(np.array(PAINT_RGB, np.float32).reshape(1, 3, 1, 1), "paint")],
         output="output")
    g.const(np.random.RandomState(5).standard_normal((512, 512)).astype(np.float32), name="emap")
    inp = [helper.make_tensor_value_info("target", TensorProto.FLOAT, [1, 3, 128, 128]),
           helper.make_tensor_value_info("source", TensorProto.FLOAT, [1, 512])]
    out = [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, 128, 128])]
    finish(g, "painter", inp, out, path, doc="inswapper-contract stand-in painting one colour")


def _entry(path: Path, contract: str, size: int, template: str | None = None) -> dict:
    return {"file": path.name, "sha256": sha256_file(path), "licence": "test stand-in",
            "commercial_use": True, "contract": contract, "template": template,
            "input_size": size, "precision": "fp32"}


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("models")
    standins.write_standins(d)
    make_painter(d / "painter.onnx")
    quality.make_fan_68_5(d / "fan_68_5.onnx")
    quality.make_bisenet(d / "bisenet_resnet_34.onnx", MOUTH_MAP)
    overlay = d / "keep.yaml"
    overlay.write_text(yaml.safe_dump({"version": 1, "models": {
        "painter": _entry(d / "painter.onnx", "swapper-inswapper", 128, "arcface_128"),
        "fan_68_5": _entry(d / "fan_68_5.onnx", "landmarker-fan-68-5", 5),
        "bisenet_resnet_34": _entry(d / "bisenet_resnet_34.onnx", "parser-bisenet", 512)}}))
    return d, overlay


@pytest.fixture
def target(tmp_path) -> Path:
    media.make_source_image(tmp_path / "source.png")
    media.make_image_target(tmp_path / "target.png", width=640, height=360)
    return tmp_path


def _render(tmp: Path, models: tuple[Path, Path], name: str, **keys: str
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The output, and the face's 5 points and crop transform (frame → 128-px crop) as used."""
    d, overlay = models
    out, debug = tmp / "out" / name, tmp / f"{name}.jsonl"
    cfg = load_config({"profile": "low", "source": str(tmp / "source.png"),
                       "target": str(tmp / "target.png"), "output": str(out),
                       "models.dir": str(d), "models.manifest": str(overlay),
                       "cache_dir": str(tmp / "cache"), "lock.device": "none", "progress": "off",
                       "processors": "swap", "swap.model": "painter", "swap.precision": "fp32",
                       "mask.type": "box",
                       "debug.faces": str(debug), **keys}, env={})
    render_all(cfg)
    face = json.loads(debug.read_text().splitlines()[-1])["faces"][0]
    return (cv2.imread(str(out)), np.array(face["used"], np.float32),
            np.array(face["transform"], np.float32))


def _crop_coords(shape: tuple[int, ...], matrix: np.ndarray) -> np.ndarray:
    """(h, w, 2): every frame pixel's position in the crop."""
    ys, xs = np.mgrid[0:shape[0], 0:shape[1]].astype(np.float32)
    return np.stack([xs, ys], -1) @ matrix[:, :2].T + matrix[:, 2]


def _distance(area: np.ndarray) -> np.ndarray:
    """Each pixel's distance to the nearest pixel of the bool ``area``."""
    return cv2.distanceTransform((~area).astype(np.uint8), cv2.DIST_L2, cv2.DIST_MASK_PRECISE)


def _check_frame(out: np.ndarray, original: np.ndarray, inside: np.ndarray,
                 crop_dist: np.ndarray, in_crop: np.ndarray) -> None:
    """``inside``: frame pixels of the kept area; ``crop_dist``: each frame pixel's distance to
    it in crop pixels; ``in_crop``: clear of the crop's border."""
    assert inside.sum() > 50
    assert np.array_equal(out[inside], original[inside])              # the target's own bytes
    far = in_crop & (crop_dist > (GROW + FEATHER) * SIDE + 2)
    assert far.sum() > 500 and (out[far] == PAINT_BGR).all()          # painted over
    ring = in_crop & (crop_dist > GROW * SIDE + 1) & (crop_dist < (GROW + FEATHER) * SIDE - 1)
    o, t = out[ring].astype(int), original[ring].astype(int)
    lo, hi = np.minimum(t, PAINT_BGR), np.maximum(t, PAINT_BGR)
    assert ((o >= lo - 1) & (o <= hi + 1)).all()                      # a blend of the two
    between = (np.abs(o - t).max(1) > 2) & (np.abs(o - PAINT_BGR).max(1) > 2)
    assert between.mean() > 0.5


def test_the_mouth_from_the_estimated_landmarks_keeps_the_targets_pixels(models, target):
    """Landmark path: fan_68_5's points (FACE_68 moved by the 5 points' mean in the ffhq_512 unit
    space), points 48-67 filled in the frame: exactly the target's; the cheek: the paint."""
    out, kps, matrix = _render(target, models, "mouth.png", **{"mask.keep": "mouth"})
    original = cv2.imread(str(target / "target.png"))
    unit_m = align.estimate(kps, "ffhq_512", 1)
    unit = align.transform_points(kps, unit_m)
    points = quality.FACE_68 + unit.mean(0) - quality.FFHQ_512.mean(0)
    frame_pts = align.transform_points(points, align.invert(unit_m))[48:68]
    inside = np.zeros(out.shape[:2], np.uint8)
    cv2.fillPoly(inside, [np.round(frame_pts).astype(np.int32)], 1)
    crop_area = np.zeros((SIDE, SIDE), np.uint8)
    cv2.fillPoly(crop_area, [np.round(align.transform_points(frame_pts, matrix))
                             .astype(np.int32)], 1)
    xy = _crop_coords(out.shape, matrix)
    in_crop = ((xy > 3) & (xy < SIDE - 4)).all(-1)
    ix = np.clip(np.round(xy).astype(int), 0, SIDE - 1)
    crop_dist = _distance(crop_area.astype(bool))[ix[..., 1], ix[..., 0]]
    _check_frame(out, original, inside.astype(bool), crop_dist, in_crop)


def test_the_parser_mouth_classes_are_kept_without_landmarks(models, target):
    """Parser path (no estimator, no landmarker): the stand-in's lip cells — the crop's bottom
    quarter, its middle half — keep the target's pixels; the region mask (every class chosen)
    still applies on the result, and the rest of the face is painted."""
    out, _, matrix = _render(target, models, "parser.png", **{
        "mask.keep": "mouth", "mask.parser": "bisenet_resnet_34",
        "mask.regions": "skin,mouth,lips", "landmark.estimator": ""})
    original = cv2.imread(str(target / "target.png"))
    xy = _crop_coords(out.shape, matrix)
    inside = (xy[..., 0] >= 33) & (xy[..., 0] <= 95) & (xy[..., 1] >= 97) & (xy[..., 1] <= 127)
    crop_area = np.zeros((SIDE, SIDE), bool)
    crop_area[96:, 32:96] = True
    ix = np.clip(np.round(xy).astype(int), 0, SIDE - 1)
    crop_dist = _distance(crop_area)[ix[..., 1], ix[..., 0]]
    in_crop = ((xy > 6) & (xy < SIDE - 7)).all(-1)     # clear of the region mask's soft rim
    _check_frame(out, original, inside, crop_dist, in_crop)


# ------------------------------------------------------------------------- crop-level checks
def test_the_keep_mask_is_zero_on_the_mouth_and_one_far_from_it():
    """Perturbed 68 points, a rotated and scaled crop of odd side: the weights are exactly 0 on
    the mouth polygon (points 48-67 filled here) and within 2.5% of the side of it, strictly
    between 0 and 1 on its edge, exactly 1 beyond 7.5% of the side."""
    side = 131
    rng = np.random.default_rng(7)
    points = (quality.FACE_68 * 512 + rng.uniform(-4, 4, (68, 2))).astype(np.float32)
    a, s = np.deg2rad(9.0), side / 512 * 0.93
    matrix = np.array([[s * np.cos(a), -s * np.sin(a), 6.5],
                       [s * np.sin(a), s * np.cos(a), -9.25]], np.float32)
    face = Face(box=np.zeros(4, np.float32), kps=np.zeros((5, 2), np.float32), score=1.0,
                landmarks=points)
    weights = KeepMask(["mouth"])(np.zeros((1, side, side, 3), np.uint8), [face], [matrix])[0]
    mouth = points[48:68] @ matrix[:, :2].T + matrix[:, 2]
    poly = np.zeros((side, side), np.uint8)
    cv2.fillPoly(poly, [np.round(mouth).astype(np.int32)], 1)
    dist = _distance(poly.astype(bool))
    assert weights.shape == (side, side) and weights.dtype == np.float32
    assert poly.sum() > 100 and weights[poly == 1].max() == 0.0
    assert weights[dist <= GROW * side - 1.5].max() == 0.0
    far = dist > (GROW + FEATHER) * side + 1.5
    assert far.sum() > 0.8 * side * side and weights[far].min() == 1.0
    edge = (dist > GROW * side + 1.5) & (dist < (GROW + FEATHER) * side - 1.5)
    assert edge.any() and 0.0 < weights[edge].min() and weights[edge].max() < 1.0


def test_the_keep_mask_goes_to_swappers_only_on_the_crop_before_the_step():
    """step_masks: a step with on_result (a swapper) gets the keep mask among its masks before
    the step; an enhancer's step does not; off by default."""
    mask = load_config({"mask.keep": "mouth"}, env={}).mask
    before, after = step_masks(mask, 128, [], padded=True, on_result=True)
    assert any(isinstance(m, KeepMask) for m in before)
    assert not any(isinstance(m, KeepMask) for m in after)
    before, after = step_masks(mask, 128, [], padded=False, on_result=False)
    assert not any(isinstance(m, KeepMask) for m in [*before, *after])
    default = load_config({}, env={}).mask
    assert default.keep == () and not any(
        isinstance(m, KeepMask) for m in step_masks(default, 128, [], padded=True,
                                                    on_result=True)[0])


def test_the_landmark_keep_mask_asks_for_68_points_unless_the_parser_is_on():
    def needs(**keys: str) -> dict[str, str]:
        return landmark_models(load_config({"mask.keep": "mouth", "landmark.model": "", **keys},
                                           env={}))

    assert needs() == {"landmark.estimator": "fan_68_5"}
    assert needs(**{"mask.parser": "bisenet_resnet_34"}) == {}
    with pytest.raises(ConfigError, match=r"mask.keep=mouth needs 68 landmarks: set "
                                          r"landmark.model or landmark.estimator \(or mask.parser"):
        needs(**{"landmark.estimator": ""})
    with pytest.raises(ConfigError, match="mask.keep: expected a list of mouth"):
        load_config({"mask.keep": "lips"}, env={})
