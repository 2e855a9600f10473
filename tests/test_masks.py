"""The occlusion, region, area and per-side box masks: each computed on the crop FaceFusion
computes it on, with its model's conventions, so the stand-ins' known answers reach the frame.

Stand-ins (render.standins.quality): the xseg stand-in marks blue squares as occluders (read as
NHWC, BGR, x/255), the bisenet stand-in has a fixed class map (and calls pure red background,
read as RGB with ImageNet mean/std), fan_68_5 returns a known face moved to the 5 points.
"""
from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
import yaml

from render import standins
from render.batch import render_all
from render.config import load_config
from render.faces.types import Face
from render.files import sha256_file
from render.masks.area import AreaMask
from render.masks.model import soften
from render.masks.region import RegionMask
from render.model_handle import ModelEntry, ProcessorModel
from render.report import report_path
from render.sessions import LazySession
from render.standins import media, quality

OCCLUDER_BGR = (200, 60, 20)        # B − R = 0.71: inside the xseg stand-in's range
#: the parser stand-in's class map (128-px cells of its 512 input, i.e. quarters of the crop's
#: width): the crop's left half is left eyebrow (2), its right half right eyebrow (3)
CLASS_MAP = np.array([[2, 2, 3, 3]] * 4)


def _entry(name: str, path: Path, contract: str, size: int) -> dict:
    return {"file": path.name, "sha256": sha256_file(path), "licence": "test stand-in",
            "commercial_use": True, "contract": contract, "template": None, "input_size": size,
            "precision": "fp32"}


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> tuple[Path, Path]:
    """The stand-in models and an overlay naming the mask and landmark stand-ins like the
    shipped entries (xseg_1, bisenet_resnet_34) and fan_68_5."""
    d = tmp_path_factory.mktemp("models")
    standins.write_standins(d)
    quality.make_xseg(d / "xseg_1.onnx")
    quality.make_bisenet(d / "bisenet_resnet_34.onnx", CLASS_MAP)
    quality.make_fan_68_5(d / "fan_68_5.onnx")
    quality.make_2dfan4(d / "2dfan4.onnx")
    overlay = d / "quality.yaml"
    overlay.write_text(yaml.safe_dump({"version": 1, "models": {
        "xseg_1": _entry("xseg_1", d / "xseg_1.onnx", "occluder-xseg", 256),
        "bisenet_resnet_34": _entry("bisenet_resnet_34", d / "bisenet_resnet_34.onnx",
                                    "parser-bisenet", 512),
        "fan_68_5": _entry("fan_68_5", d / "fan_68_5.onnx", "landmarker-fan-68-5", 5),
        "2dfan4": _entry("2dfan4", d / "2dfan4.onnx", "landmarker-2dfan4", 256)}}))
    return d, overlay


def _render(tmp: Path, models: tuple[Path, Path], target: Path, name: str, **keys: str
            ) -> tuple[np.ndarray, dict]:
    d, overlay = models
    out = tmp / "out" / name
    cfg = load_config({"profile": "low", "source": str(tmp / "source.png"), "target": str(target),
                       "output": str(out), "models.dir": str(d), "models.manifest": str(overlay),
                       "cache_dir": str(tmp / "cache"), "lock.device": "none", "progress": "off",
                       "processors": "swap", "mask.type": "box", **keys}, env={})
    render_all(cfg)
    return cv2.imread(str(out)), json.loads(report_path(out).read_text())


@pytest.fixture
def target(tmp_path):
    media.make_source_image(tmp_path / "source.png")
    truth = media.make_image_target(tmp_path / "target.png", width=640, height=360)
    return tmp_path, truth


def test_an_occluded_square_keeps_the_targets_pixels(models, target):
    """A blue square on the face: with mask.occluder=xseg_1 those frame pixels are the target's
    own, while the rest of the face is swapped as without the occluder."""
    tmp, truth = target
    image = cv2.imread(str(tmp / "target.png"))
    x1, y1, x2, y2 = truth.boxes[0]
    sq = (slice(y1 + 70, y1 + 110), slice(x1 + 70, x1 + 110))
    image[sq] = OCCLUDER_BGR
    cv2.imwrite(str(tmp / "occluded.png"), image)
    plain, _ = _render(tmp, models, tmp / "occluded.png", "plain.png")
    kept, report = _render(tmp, models, tmp / "occluded.png", "kept.png",
                           **{"mask.occluder": "xseg_1"})

    # 4 px in: the soft edge step rounds the hole's corners (a corner blurs to 0.75, not 0.5)
    inside = (slice(sq[0].start + 4, sq[0].stop - 4), slice(sq[1].start + 4, sq[1].stop - 4))
    assert np.array_equal(kept[inside], image[inside])          # untouched: the target's pixels
    assert not np.array_equal(plain[inside], image[inside])     # the swap alone paints over it
    face = (slice(y1 + 20, y1 + 50), slice(x1 + 20, x2 - 20))   # away from the square
    assert (np.abs(kept[face].astype(int) - image[face]).max(axis=2) > 8).mean() > 0.9
    assert np.abs(kept[face].astype(int) - plain[face]).max() <= 1
    assert ("occlusion", "xseg_1") in [(m["role"], m["name"]) for m in report["models"]]


def _halves(truth) -> tuple[tuple[slice, slice], tuple[slice, slice]]:
    """Bands of the face left and right of its middle, clear of the mask's soft edges."""
    x1, y1, x2, y2 = truth.boxes[0]
    cx, rows = (x1 + x2) // 2, slice(y1 + 30, y2 - 30)
    return (rows, slice(x1 + 14, cx - 20)), (rows, slice(cx + 20, x2 - 14))


def _swapped(out: np.ndarray, original: np.ndarray, where: tuple[slice, slice]) -> bool:
    return bool((np.abs(out[where].astype(int) - original[where]).max(axis=2) > 8).mean() > 0.9)


@pytest.mark.parametrize("regions, left, right", [
    ("eyebrows", True, True), ("left-eyebrow", True, False), ("right-eyebrow", False, True),
])
def test_the_region_mask_selects_exactly_the_named_regions(models, target, regions, left, right):
    tmp, truth = target
    original = cv2.imread(str(tmp / "target.png"))
    out, report = _render(tmp, models, tmp / "target.png", f"{regions}.png",
                          **{"mask.parser": "bisenet_resnet_34", "mask.regions": regions})
    lh, rh = _halves(truth)
    assert _swapped(out, original, lh) == left
    assert _swapped(out, original, rh) == right
    for half, swapped in ((lh, left), (rh, right)):
        if not swapped:
            assert np.array_equal(out[half], original[half])
    assert ("region", "bisenet_resnet_34") in [(m["role"], m["name"]) for m in report["models"]]


def test_regions_the_parser_never_finds_leave_the_frame_untouched(models, target):
    tmp, _ = target
    original = cv2.imread(str(tmp / "target.png"))
    out, _ = _render(tmp, models, tmp / "target.png", "none.png",
                     **{"mask.parser": "bisenet_resnet_34", "mask.regions": "skin,nose,lips"})
    assert np.array_equal(out, original)


def test_the_lower_face_area_from_the_estimated_68_points(models, target):
    """mask.areas=lower-face with fan_68_5's points: the lower face (below the nostrils) is
    swapped, the eyes' band is the target's."""
    tmp, truth = target
    original = cv2.imread(str(tmp / "target.png"))
    out, report = _render(tmp, models, tmp / "target.png", "lower.png",
                          **{"mask.areas": "lower-face"})
    x1, y1, x2, y2 = truth.boxes[0]
    upper = (slice(y1 + 5, y1 + 70), slice(x1 + 5, x2 - 5))
    lower = (slice(y1 + 110, y1 + 124), slice(x1 + 44, x2 - 44))
    assert np.array_equal(out[upper], original[upper])
    assert _swapped(out, original, lower)
    assert ("landmark-estimate", "fan_68_5") in [(m["role"], m["name"]) for m in report["models"]]


def test_per_side_box_padding_cuts_each_side_in_facefusions_order(models, target):
    """mask.padding_top=50: the top half of the crop keeps the target's pixels (the face's top
    rows), the bottom is swapped; padding_left=50 does the same for the left half."""
    tmp, truth = target
    original = cv2.imread(str(tmp / "target.png"))
    x1, y1, x2, y2 = truth.boxes[0]
    top_rows = (slice(y1 + 5, y1 + 30), slice(x1 + 20, x2 - 20))
    bottom_rows = (slice(y2 - 30, y2 - 5), slice(x1 + 20, x2 - 20))
    out, _ = _render(tmp, models, tmp / "target.png", "top.png", **{"mask.padding_top": "50"})
    assert np.array_equal(out[top_rows], original[top_rows]) and _swapped(out, original,
                                                                          bottom_rows)
    lh, rh = _halves(truth)
    out, _ = _render(tmp, models, tmp / "target.png", "left.png", **{"mask.padding_left": "50"})
    assert np.array_equal(out[lh], original[lh]) and _swapped(out, original, rh)


def test_every_mask_and_the_landmarker_on_give_the_same_bytes_on_any_lanes(models, tmp_path):
    """Occlusion, region, area masks and 2dfan4 on a clip: one lane with small batches and three
    lanes with other threads and frames in flight write the same bytes."""
    d, overlay = models
    media.make_source_image(tmp_path / "source.png")
    clip = media.make_clip(tmp_path / "clip.mp4", width=640, height=360, seconds=0.8)
    outputs = []
    for run, lanes in (("a", "execution.lanes=1 execution.batch_size=1"),
                       ("b", "execution.lanes=3 execution.threads=1 "
                             "execution.frames_in_flight=7")):
        out = tmp_path / run / "clip.mp4"
        keys = dict(k.split("=") for k in lanes.split())
        cfg = load_config({"profile": "low", "source": str(tmp_path / "source.png"),
                           "target": str(clip.path), "output": str(out), "models.dir": str(d),
                           "models.manifest": str(overlay), "cache_dir": str(tmp_path / "cache"),
                           "lock.device": "none", "progress": "off", "skip_done": "false",
                           "encode.threads": "2", "mask.occluder": "xseg_1",
                           "mask.parser": "bisenet_resnet_34", "mask.regions": "eyebrows",
                           "mask.areas": "upper-face,mouth", "landmark.model": "2dfan4", **keys},
                          env={})
        render_all(cfg)
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize("keys, message", [
    ({"mask.areas": "mouth", "landmark.estimator": ""}, "mask.areas=mouth needs 68 landmarks"),
    ({"mask.parser": "bisenet_resnet_34", "mask.regions": ""}, "with no mask.regions"),
])
def test_masks_that_could_not_work_are_refused_before_loading(keys, message):
    from render.models.needs import required_models
    from render.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        required_models(load_config({"profile": "low", **keys}, env={}))


# ------------------------------------------------------------------------- crop-level checks
def _model(path: Path, contract: str, size: int) -> ProcessorModel:
    import onnxruntime as ort

    entry = ModelEntry(name=path.stem, file=path.name, sha256="0" * 64, size=None, urls=(),
                       licence="test", commercial_use=True, contract=contract, template=None,
                       input_size=size)
    return ProcessorModel(entry, path, LazySession(lambda: ort.InferenceSession(str(path))),
                          path.parent)


def test_the_parser_reads_rgb_with_imagenet_normalisation(models):
    """The stand-in calls pure red (R_n > 1.5, B_n < −1) background: a red square in a crop of
    selected class comes out of the region mask only when the crop is fed RGB and normalised."""
    d, _ = models
    cfg = load_config({"mask.regions": "eyebrows"}, env={})
    mask = RegionMask("region", _model(d / "bisenet_resnet_34.onnx", "parser-bisenet", 512),
                      cfg.mask)
    crop = np.full((1, 128, 128, 3), (60, 140, 230), np.uint8)
    crop[0, 40:88, 40:88] = (0, 0, 255)                                   # BGR red
    weights = mask(crop, [], [])[0]
    assert weights[56:72, 56:72].max() == 0.0
    assert weights[8:24, 8:24].min() > 0.99 and weights[104:120, 104:120].min() > 0.99


#: FaceFusion's area point sets (shared/docs/models.md §5), written out here independently
AREAS = {"upper-face": [0, 1, 2, 31, 32, 33, 34, 35, 14, 15, 16, *range(26, 16, -1)],
         "lower-face": [*range(3, 14), *range(35, 30, -1)], "mouth": list(range(48, 68))}


@pytest.mark.parametrize("areas", [["upper-face"], ["lower-face"], ["mouth"],
                                   ["upper-face", "mouth"]])
def test_area_masks_cover_the_hull_of_their_points(areas):
    """Known 68 points (the stand-ins' face at 512 px, the crop matrix shifting by (5, -3)): the
    mask is 1 deep inside the hull of the areas' points and 0 well outside it."""
    side = 512
    matrix = np.array([[1, 0, 5], [0, 1, -3]], np.float32)
    points = quality.FACE_68 * side
    face = Face(box=np.zeros(4, np.float32), kps=np.zeros((5, 2), np.float32), score=1.0,
                landmarks=points)
    weights = AreaMask(areas)(np.zeros((1, side, side, 3), np.uint8), [face], [matrix])[0]
    hull = cv2.convexHull((points[[i for a in areas for i in AREAS[a]]] + (5, -3))
                          .astype(np.float32))
    ys, xs = np.mgrid[0:side:4, 0:side:4]
    dist = np.array([cv2.pointPolygonTest(hull, (float(x), float(y)), True)
                     for x, y in zip(xs.ravel(), ys.ravel())]).reshape(xs.shape)
    sampled = weights[::4, ::4]
    assert (dist > 15).any() and sampled[dist > 15].min() > 0.99
    assert sampled[dist < -2].max() == 0.0


def test_soften_keeps_a_hole_clear_of_its_edge():
    """FaceFusion's edge step: blur (sigma 5), 0.5..1 stretched to 0..1 — an occluded square
    stays 0 up to its straight edges (its corners round off), and the mask is 1 far from it."""
    mask = np.ones((128, 128), np.float32)
    mask[40:80, 40:80] = 0.0
    out = soften(mask)
    assert out[40, 48:72].max() == 0.0 and out[48:72, 79].max() == 0.0
    assert out[44:76, 44:76].max() == 0.0 and out[:20].min() > 0.999
