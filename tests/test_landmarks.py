"""2dfan4 and fan_68_5: the crop, the conventions and the maps back to the frame, checked with
stand-ins whose answers are known (render.standins.quality): 2dfan4's heatmaps peak at known
points of its 64-px grid, fan_68_5 returns a known face moved to the 5 points it is given."""
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
from render.landmarks.estimate import Landmarks68From5
from render.landmarks.fan2d import Fan2dLandmarker
from render.landmarks.refine import FaceLandmarks
from render.report import report_path
from render.standins import media, quality

from test_masks import _entry, _model

BOX = (200.0, 90.0, 330.0, 210.0)            # 130 x 120: scale 195 / 130 = 1.5


def _five(points: np.ndarray) -> np.ndarray:
    """The 5 points of 68 (shared/docs/models.md §6), written out here independently."""
    return np.array([points[36:42].mean(0), points[42:48].mean(0), points[30], points[48],
                     points[54]])


def _face(kps: np.ndarray) -> Face:
    return Face(box=np.array(BOX, np.float32), kps=kps.astype(np.float32), score=0.9)


UPRIGHT = np.array([[240, 130], [290, 130], [265, 155], [245, 180], [285, 180]], np.float32)


@pytest.fixture(scope="module")
def fan(tmp_path_factory):
    d = tmp_path_factory.mktemp("fan")
    quality.make_2dfan4(d / "2dfan4.onnx")
    quality.make_2dfan4(d / "2dfan4_weak.onnx", peak=0.36)               # score 0.4
    quality.make_fan_68_5(d / "fan_68_5.onnx")
    return d


def test_2dfan4_maps_its_grid_points_back_to_the_frame(fan):
    """Upright face: frame point = (grid · 4 − translation) / scale, with scale = 195 / the box's
    longer side and the box's centre moved to the crop's centre; score = peak / 0.9."""
    marker = Fan2dLandmarker("landmark", _model(fan / "2dfan4.onnx", "landmarker-2dfan4", 256))
    points, score = marker.detect(np.zeros((360, 640, 3), np.uint8), _face(UPRIGHT))
    x1, y1, x2, y2 = BOX
    scale = 195.0 / 130.0
    t = np.array([256 - (x1 + x2) * scale, 256 - (y1 + y2) * scale]) / 2
    expected = (quality.fan_grid_points() * 4.0 - t) / scale
    np.testing.assert_allclose(points, expected, atol=1e-3)
    assert score == pytest.approx(1.0)


def test_2dfan4_turns_a_sideways_face_upright_and_back(fan):
    """Eyes one above the other (the face turned a quarter): the crop is turned by 90° about its
    centre before the model, so the grid's (gx, gy) is the unturned crop's (256 − 4·gy, 4·gx)."""
    marker = Fan2dLandmarker("landmark", _model(fan / "2dfan4.onnx", "landmarker-2dfan4", 256))
    sideways = np.array([[265, 120], [265, 170], [240, 145], [215, 125], [215, 165]], np.float32)
    points, _ = marker.detect(np.zeros((360, 640, 3), np.uint8), _face(sideways))
    grid = quality.fan_grid_points() * 4.0
    unturned = np.stack([256.0 - grid[:, 1], grid[:, 0]], axis=1)
    x1, y1, x2, y2 = BOX
    scale = 195.0 / 130.0
    t = np.array([256 - (x1 + x2) * scale, 256 - (y1 + y2) * scale]) / 2
    np.testing.assert_allclose(points, (unturned - t) / scale, atol=1e-3)


@pytest.mark.parametrize("model, refined", [("2dfan4.onnx", True), ("2dfan4_weak.onnx", False)])
def test_the_68_points_place_the_crops_only_above_the_score(fan, model, refined):
    """landmark.score 0.5: the stand-in scoring 1.0 replaces the 5 points by those of its 68;
    the one scoring 0.4 keeps the detector's, and its 68 points are kept for the masks."""
    marker = Fan2dLandmarker("landmark", _model(fan / model, "landmarker-2dfan4", 256))
    step = FaceLandmarks(marker, None, 0.5)
    frame = np.zeros((360, 640, 3), np.uint8)
    [(index, face)] = step([frame], [(0, _face(UPRIGHT))])
    points, score = marker.detect(frame, _face(UPRIGHT))
    assert index == 0 and np.array_equal(face.landmarks, points)
    expected = _five(points) if refined else UPRIGHT
    np.testing.assert_allclose(face.kps, expected, atol=1e-4)
    assert (score > 0.5) == refined


@pytest.mark.parametrize("angle", [0.0, 30.0])
def test_fan_68_5_maps_the_5_points_through_the_ffhq_unit_template(fan, angle):
    """The 5 points = the ffhq_512 template scaled by 180, turned and moved: the stand-in's face
    comes back scaled, turned and moved the same way (a wrong template or a missing inverse
    moves it)."""
    estimator = Landmarks68From5("landmark-estimate",
                                 _model(fan / "fan_68_5.onnx", "landmarker-fan-68-5", 5))
    a = np.radians(angle)
    turn = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])

    def place(unit: np.ndarray) -> np.ndarray:
        return unit.astype(np.float64) @ turn.T * 180.0 + (210.0, 95.0)

    out = estimator.estimate(place(quality.FFHQ_512).astype(np.float32))
    np.testing.assert_allclose(out, place(quality.FACE_68), atol=0.05)


# ------------------------------------------------------------------------------- in a render
@pytest.fixture(scope="module")
def render_models(tmp_path_factory, fan) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("models")
    standins.write_standins(d)
    overlay = d / "landmarks.yaml"
    (d / "2dfan4.onnx").write_bytes((fan / "2dfan4.onnx").read_bytes())
    overlay.write_text(yaml.safe_dump({"version": 1, "models": {
        "2dfan4": _entry("2dfan4", d / "2dfan4.onnx", "landmarker-2dfan4", 256)}}))
    return d, overlay


def _render(tmp: Path, models: tuple[Path, Path], name: str, **keys: str
            ) -> tuple[np.ndarray, dict]:
    d, overlay = models
    out = tmp / "out" / name
    cfg = load_config({"profile": "low", "source": str(tmp / "source.png"),
                       "target": str(tmp / "target.png"), "output": str(out),
                       "models.dir": str(d), "models.manifest": str(overlay),
                       "cache_dir": str(tmp / "cache"), "lock.device": "none", "progress": "off",
                       "processors": "swap", **keys}, env={})
    render_all(cfg)
    return cv2.imread(str(out)), json.loads(report_path(out).read_text())


def test_a_render_with_the_landmarker_places_the_crop_by_its_points(render_models, tmp_path):
    """With landmark.model=2dfan4 the swapped face moves (the stand-in's points are not the
    detector's); the report lists the landmarker and the job key changes. Below its score the
    5 points stay the detector's and the render is the one without it, byte for byte."""
    media.make_source_image(tmp_path / "source.png")
    media.make_image_target(tmp_path / "target.png", width=640, height=360)
    plain, plain_report = _render(tmp_path, render_models, "plain.png")
    placed, report = _render(tmp_path, render_models, "placed.png",
                             **{"landmark.model": "2dfan4"})
    weak, weak_report = _render(tmp_path, render_models, "weak.png",
                                **{"landmark.model": "2dfan4", "landmark.score": "1"})
    assert not np.array_equal(placed, plain)
    assert np.array_equal(weak, plain)
    assert ("landmark", "2dfan4") in [(m["role"], m["name"]) for m in report["models"]]
    assert len({plain_report["job_key"], report["job_key"], weak_report["job_key"]}) == 3


def test_the_new_keys_at_their_defaults_keep_earlier_job_keys(standin_models, tmp_path):
    from render.plan import Identity, job_key

    ident = Identity(target_sha256="0" * 64, source_sha256="1" * 64, reference_sha256=None,
                     models={}, versions={})
    base = {"profile": "low", "models.dir": str(standin_models), "cache_dir": str(tmp_path)}
    explicit = {**base, "mask.padding_top": "0", "mask.occluder": "", "mask.parser": "",
                "mask.regions": "skin,eyebrows,eyes,glasses,nose,mouth,lips", "mask.areas": "",
                "landmark.model": "", "landmark.score": "0.5", "landmark.estimator": "fan_68_5"}
    key = job_key(load_config(base, env={}), ident)
    assert job_key(load_config(explicit, env={}), ident) == key
    assert job_key(load_config({**base, "mask.padding_left": "10"}, env={}), ident) != key
