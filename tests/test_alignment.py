"""Faces placed as the models were trained (issue 38): the 5-point fit, the enhancer's blend order
and the paste masks against FaceFusion 3.8.1's formulas, written out here from its code
(``face_helper``, ``face_masker``, ``face_enhancer/core.py``), on points and frames that do not fit
perfectly; and the alignment's version in the job key."""
from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from skimage.transform import SimilarityTransform

from render import standins
from render.config import load_config
from render.files import sha256_file
from render.report import report_path
from render.face_stage import ChainStep, FaceStage
from render.faces import align
from render.faces.mask import box_mask, combine
from render.faces.types import Face
from render.landmarks.estimate import Landmarks68From5
from render.masks.build import step_masks
from render.masks.occlusion import OcclusionMask
from render.models.manifest import ModelEntry, load_manifest
from render.pipeline import StageTimes
from render.model_handle import ProcessorModel
from render.processors.enhance import PROCESSOR as ENHANCE
from render.processors.enhance.enhancer import FaceEnhancer
from render.processors.swap.swapper import SwapperProcessor
from render.sessions import LazySession
from render.standins import media, quality
from conftest import cli_env, model_args, run_cli
from test_segments import kill_after_segments

#: every template a manifest entry or a processor uses, at the sides they are used at
IN_USE = [("arcface_112_v1", 112), ("arcface_112_v2", 112), ("arcface_128", 128),
          ("arcface_128", 256), ("arcface_128", 512), ("ffhq_512", 256), ("ffhq_512", 512)]


def least_squares(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The similarity [[a, -b, tx], [b, a, ty]] by linear least squares over the 10 equations."""
    rows, rhs = [], []
    for (x, y), (u, v) in zip(np.asarray(src, np.float64), np.asarray(dst, np.float64)):
        rows += [[x, -y, 1, 0], [y, x, 0, 1]]
        rhs += [u, v]
    a, b, tx, ty = np.linalg.lstsq(np.array(rows), np.array(rhs), rcond=None)[0]
    return np.array([[a, -b, tx], [b, a, ty]])


def faces_off_template(template: str, size: int, count: int = 40, seed: int = 38):
    """Plausible faces that do not fit the template: turned, scaled, moved, each point off by
    noise of 3 % of the eye distance, and one point off by 6-12 % more."""
    rng = np.random.default_rng(seed)
    unit = align.TEMPLATES[template].astype(np.float64)
    eyes = np.linalg.norm(unit[1] - unit[0])
    for _ in range(count):
        width = rng.uniform(80, 400)                       # the crop's side in the frame
        angle = np.radians(rng.uniform(-35, 35))
        rot = np.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])
        pts = unit @ rot.T * width + rng.uniform(200, 900, 2)
        pts += rng.normal(0, 0.03 * eyes * width, pts.shape)
        k = rng.integers(5)
        direction = rng.normal(size=2)
        pts[k] += direction / np.linalg.norm(direction) * rng.uniform(0.06, 0.12) * eyes * width
        yield pts.astype(np.float32)


def umeyama_params(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """insightface's alignment: scikit-image's similarity (Umeyama), 3 x 3."""
    src, dst = np.asarray(src, np.float64), np.asarray(dst, np.float64)
    if hasattr(SimilarityTransform, "from_estimate"):
        return SimilarityTransform.from_estimate(src, dst).params
    tform = SimilarityTransform()
    assert tform.estimate(src, dst)
    return tform.params


def mapped(matrix: np.ndarray, pts: np.ndarray) -> np.ndarray:
    return np.asarray(pts, np.float64) @ np.asarray(matrix, np.float64)[:, :2].T + matrix[:, 2]


@pytest.mark.parametrize("template,size", IN_USE)
def test_the_fit_is_the_least_squares_similarity_over_all_five_points(template, size):
    """Against linear least squares, insightface's Umeyama (scikit-image) and FaceFusion's call:
    the crop's corners agree within a thousandth of a pixel. LMEDS, the fit this replaced, is
    more than half a pixel off on some of these faces (scaled to a 512 crop)."""
    dst = align.TEMPLATES[template].astype(np.float64) * size
    square = np.array([[0, 0], [size, 0], [0, size], [size, size]], np.float64)
    lmeds_off = []
    for pts in faces_off_template(template, size):
        ours = align.estimate(pts, template, size)
        expected = least_squares(pts, dst)
        umeyama = umeyama_params(pts, dst)
        ff = cv2.estimateAffinePartial2D(pts, dst.astype(np.float32), method=cv2.RANSAC,
                                         ransacReprojThreshold=100)[0]
        assert np.abs(mapped(expected, pts) - dst).max() < 100    # FaceFusion keeps all five
        corners = mapped(cv2.invertAffineTransform(expected), square)
        for other in (ours, umeyama[:2], ff):
            here = mapped(cv2.invertAffineTransform(np.asarray(other, np.float64)), square)
            assert np.abs(here - corners).max() < 1e-3 * max(1.0, np.abs(corners).max() / 1000)
        lmeds = cv2.estimateAffinePartial2D(pts, dst.astype(np.float32), method=cv2.LMEDS)[0]
        lmeds_off.append(np.abs(mapped(lmeds, pts) - mapped(expected, pts)).max() * 512 / size)
    assert max(lmeds_off) > 0.5


def test_degenerate_points_give_a_translation():
    pts = np.full((5, 2), 7.0, np.float32)
    m = align.estimate(pts, "arcface_128", 128)
    assert np.isfinite(m).all() and m[0, 0] == 1.0 and m[0, 1] == 0.0


def test_only_the_alignment_module_fits_faces():
    """Every crop (swap, enhance, embedder, image swappers' source, fan_68_5, colour match,
    pixel boost) goes through ``align.estimate``: no other module estimates a face's
    similarity (the optical-flow tracker's robust fit of feature points is another matter)."""
    root = Path(__file__).resolve().parents[1] / "render"
    fits = re.compile(r"estimateAffinePartial2D|estimateAffine2D|getAffineTransform|"
                      r"SimilarityTransform|umeyama")
    found = sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                   if fits.search(p.read_text()) and p != root / "faces" / "align.py")
    assert found == ["faces/flow.py"], found
    text = (root / "faces" / "flow.py").read_text()
    assert len(fits.findall(text)) == 1 and "calcOpticalFlowPyrLK" in text


@pytest.fixture(scope="module")
def fan(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("fan")
    quality.make_fan_68_5(d / "fan_68_5.onnx")
    return d / "fan_68_5.onnx"


def test_fan_68_5_places_the_68_points_by_the_least_squares_fit(fan):
    """The stand-in moves its face to the mean of the 5 unit points; the least squares fit maps
    the points' mean onto the template's, so its face comes back through the fit's inverse
    exactly — computed here independently, on faces off the template."""
    entry = ModelEntry(name="fan_68_5", file=fan.name, sha256="0" * 64, size=None, urls=(),
                       licence="test", commercial_use=True, contract="landmarker-fan-68-5",
                       template=None, input_size=5)
    model = ProcessorModel(entry, fan, LazySession(lambda: ort.InferenceSession(str(fan))), fan.parent)
    estimator = Landmarks68From5("landmark-estimate", model)
    for pts in faces_off_template("ffhq_512", 1, count=20):
        m = least_squares(pts, quality.FFHQ_512)
        expected = mapped(cv2.invertAffineTransform(m), quality.FACE_68)
        out = estimator.estimate(pts.astype(np.float32))
        assert np.abs(out - expected).max() < 0.02


# ------------------------------------------------------------------------------------- masks
def ff_box_mask(size: int, blur: float, padding: tuple[float, float, float, float]) -> np.ndarray:
    """FaceFusion's ``create_box_mask`` (padding top, right, bottom, left in percent)."""
    amount = int(size * 0.5 * blur)
    area = max(amount // 2, 1)
    mask = np.ones((size, size), np.float32)
    mask[:max(area, int(size * padding[0] / 100)), :] = 0
    mask[-max(area, int(size * padding[2] / 100)):, :] = 0
    mask[:, :max(area, int(size * padding[3] / 100))] = 0
    mask[:, -max(area, int(size * padding[1] / 100)):] = 0
    if amount > 0:
        mask = cv2.GaussianBlur(mask, (0, 0), amount * 0.25)
    return mask


@pytest.mark.parametrize("size", [112, 128, 256, 384, 512, 1024])
@pytest.mark.parametrize("blur,padding", [(0.3, (0, 0, 0, 0)), (0.5, (0, 0, 0, 0)),
                                          (0.0, (0, 0, 0, 0)), (0.3, (10, 0, 20, 5)),
                                          (0.17, (3, 7, 0, 12))])
def test_the_box_mask_is_facefusions(size, blur, padding):
    ours = box_mask(size, 0.0, blur, padding)
    assert np.abs(ours - ff_box_mask(size, blur, padding)).max() < 1e-6


def _ff_soften(mask: np.ndarray) -> np.ndarray:
    return (cv2.GaussianBlur(mask.clip(0, 1), (0, 0), 5).clip(0.5, 1) - 0.5) * 2


def _fixed_occluder(path: Path, hole: tuple[slice, slice]) -> Path:
    """An occluder whose map (256², 0 = covered) is fixed: 1 but for ``hole``."""
    value = np.ones((1, 256, 256, 1), np.float32)
    value[0, hole[0], hole[1], 0] = 0.0
    nodes = [helper.make_node("ReduceMean", ["input"], ["mean"], axes=[1, 2, 3], keepdims=1),
             helper.make_node("Mul", ["mean", "zero"], ["nothing"]),
             helper.make_node("Add", ["nothing", "map"], ["output"])]
    graph = helper.make_graph(
        nodes, "fixed_occluder",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 256, 256, 3])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 256, 256, 1])],
        [helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]),
         helper.make_tensor("map", TensorProto.FLOAT, value.shape, value.ravel().tolist())])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def _mask_model(path: Path) -> OcclusionMask:
    entry = ModelEntry(name=path.stem, file=path.name, sha256="0" * 64, size=None, urls=(),
                       licence="test", commercial_use=True, contract="occluder-xseg",
                       template=None, input_size=256)
    model = ProcessorModel(entry, path, LazySession(lambda: ort.InferenceSession(str(path))),
                           path.parent)
    return OcclusionMask("occlusion", model, None)


def test_several_occluders_take_the_minimum_then_one_soft_edge(tmp_path):
    """FaceFusion's 'many': the raw maps' minimum, then the blur and threshold once. Two holes
    6 px apart: softened one by one, the strip between them kept nearly half the weight."""
    a = _mask_model(_fixed_occluder(tmp_path / "a.onnx", (slice(60, 200), slice(90, 120))))
    b = _mask_model(_fixed_occluder(tmp_path / "b.onnx", (slice(60, 200), slice(126, 156))))
    cfg = load_config({"profile": "low", "mask.type": "feather", "mask.blur": "0.3"}, env={})
    before, after = step_masks(cfg.mask, 256, [a, b], padded=True, on_result=True)
    assert after == []
    crops = np.random.default_rng(1).integers(0, 256, (2, 256, 256, 3), dtype=np.uint8)
    weights = combine(before, crops, [], [])
    sessions = [ort.InferenceSession(str(tmp_path / f"{n}.onnx")) for n in "ab"]

    def raw(session, crop):        # FaceFusion's create_occlusion_mask before its blur
        out = session.run(None, {"input": (crop.astype(np.float32) / 255.0)[None]})[0][0]
        return cv2.resize(out.clip(0, 1).astype(np.float32), (256, 256))

    box = ff_box_mask(256, 0.3, (0, 0, 0, 0))
    for k, crop in enumerate(crops):
        ra, rb = (raw(s, crop) for s in sessions)
        expected = np.minimum(box, _ff_soften(np.minimum(ra, rb)))
        assert np.abs(weights[k] - expected).max() < 1e-5
    ra, rb = (raw(s, crops[0]) for s in sessions)
    one_by_one = np.minimum(_ff_soften(ra), _ff_soften(rb))
    assert one_by_one[130, 120:126].max() > 0.3 and weights[0][130, 120:126].max() < 0.01


def test_an_enhancers_box_mask_has_no_padding():
    """FaceFusion's enhancer takes the box mask with padding 0, 0, 0, 0 whatever the swap's."""
    cfg = load_config({"profile": "low", "mask.type": "feather", "mask.blur": "0.3",
                       "mask.padding_bottom": "20", "mask.padding": "0.05"}, env={})
    (swap_box,), _ = step_masks(cfg.mask, 512, [], padded=SwapperProcessor.mask_padding,
                                on_result=SwapperProcessor.mask_result)
    (enh_box,), after = step_masks(cfg.mask, 512, [], padded=FaceEnhancer.mask_padding,
                                   on_result=FaceEnhancer.mask_result)
    assert after == []
    crops = np.zeros((1, 512, 512, 3), np.uint8)
    enhancer = enh_box(crops, [], [])
    assert np.abs(enhancer - ff_box_mask(512, 0.3, (0, 0, 0, 0))).max() < 1e-6
    assert swap_box(crops, [], [])[440, 256] < 0.1 and enhancer[440, 256] > 0.9


# -------------------------------------------------------------------------- enhancer's blend
@pytest.fixture(scope="module")
def enhancer_models(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("enh")
    standins.write_standins(d)
    return d


def ff_paste_back(frame, crop, mask, matrix):
    """``face_helper.paste_back``: whole-frame warps, the mask clipped, cast by truncation."""
    inverse = cv2.invertAffineTransform(matrix)
    size = frame.shape[:2][::-1]
    inv_mask = cv2.warpAffine(mask, inverse, size).clip(0, 1)
    inv_crop = cv2.warpAffine(crop, inverse, size, borderMode=cv2.BORDER_REPLICATE)
    out = frame.copy()
    for c in range(3):
        out[:, :, c] = inv_mask * inv_crop[:, :, c] + (1 - inv_mask) * frame[:, :, c]
    return out


def test_the_enhancers_blend_is_with_the_frame_after_the_paste(enhancer_models):
    """gfpgan stand-in, blend 0.5, on a frame of fine texture (resampled twice, a crop differs
    from it): render's result is FaceFusion's (paste, then ``addWeighted`` with the frame) within
    rounding; blended in crop space it would be tens of levels off."""
    d = enhancer_models
    rng = np.random.default_rng(4)
    frame = rng.integers(0, 256, (360, 640, 3), dtype=np.uint8)
    unit = align.TEMPLATES["ffhq_512"].astype(np.float64)
    turn = np.radians(12)
    rot = np.array([[math.cos(turn), -math.sin(turn)], [math.sin(turn), math.cos(turn)]])
    kps = (unit @ rot.T * 230 + (200, 70) + rng.normal(0, 2.5, (5, 2))).astype(np.float32)
    face = Face(np.array([220, 90, 420, 300], np.float32), kps, 0.9)

    entry = load_manifest(d).get("gfpgan_1.4")
    session = ort.InferenceSession(str(d / entry.file))
    proc = FaceEnhancer(ENHANCE.step("gfpgan_1.4", blend=0.5),
                        ProcessorModel(entry, d / entry.file, LazySession(lambda: session), d))
    cfg = load_config({"profile": "low", "mask.type": "feather", "mask.blur": "0.3"}, env={})
    before, after = step_masks(cfg.mask, 512, [], padded=proc.mask_padding,
                               on_result=proc.mask_result)
    stage = FaceStage(detector=None, select=None, chain=[ChainStep(proc, proc.run, before, after)],
                      times=StageTimes())
    ours = frame.copy()
    stage.swap([ours], [(0, face)])

    matrix = least_squares(kps, unit * 512)
    crop = cv2.warpAffine(frame, matrix, (512, 512), flags=cv2.INTER_AREA,
                          borderMode=cv2.BORDER_REPLICATE)
    blob = ((crop[:, :, ::-1] / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)[None].astype(np.float32)
    out = np.clip(session.run(None, {"input": blob})[0][0], -1, 1)
    enhanced = ((out + 1) / 2 * 255.0).transpose(1, 2, 0).round().astype(np.uint8)[:, :, ::-1]
    mask = ff_box_mask(512, 0.3, (0, 0, 0, 0))
    pasted = ff_paste_back(frame, enhanced, mask, matrix)
    expected = cv2.addWeighted(frame, 0.5, pasted, 0.5, 0)
    diff = np.abs(ours.astype(int) - expected)
    assert diff.max() <= 2 and diff.mean() < 0.3, (diff.max(), diff.mean())

    in_crop = np.clip(0.5 * enhanced + 0.5 * crop.astype(np.float64) + 0.5, 0, 255).astype(np.uint8)
    crop_space = ff_paste_back(frame, in_crop, mask, matrix)
    assert np.abs(crop_space.astype(int) - expected).max() > 20


# ------------------------------------------------------------- work made before the change
OLD = Path(__file__).with_name("old_alignment.py")


def _old_render(args: list[str]) -> None:
    """Render with the code before the change."""
    r = subprocess.run([sys.executable, str(OLD), *args], env=cli_env(), capture_output=True,
                       text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr


def test_work_from_before_the_alignment_change_is_never_mixed_in(workdir, standin_models):
    """A work folder left by a render before the change is not resumed: the new render starts
    over and writes the bytes of an uninterrupted render. A finished output and report from
    before are not taken as up to date, and ``render verify`` names the alignment's version."""
    clip = media.make_clip(workdir / "in" / "clip.mp4", width=640, height=360, seconds=4.0)
    out_dir = workdir / "out"

    def args(name: str) -> list[str]:
        return ["profile=low", "segment.seconds=1", "execution.threads=1",
                f"source={workdir / 'in' / 'source.jpg'}", f"target={clip.path}",
                f"output={out_dir / name}", *model_args(standin_models, workdir / "cache")]

    clean = {}
    for name in ("clip.mp4", "done.mp4"):      # an uninterrupted render of each, set aside
        r = run_cli(*args(name))
        assert r.returncode == 0, r.stderr
        clean[name] = sha256_file(out_dir / name)
        for p in (out_dir / name, report_path(out_dir / name)):
            p.unlink()
    kill_after_segments(args("clip.mp4"), out_dir, 1, program=(str(OLD),))
    (old,) = [p for p in out_dir.iterdir() if ".render-" in p.name]
    segments = json.loads((old / "plan.json").read_text())["segments"]
    whole = sum(s["preroll"] + s["end"] - s["start"] + s["lookahead"] for s in segments)
    r = run_cli(*args("clip.mp4"), "--verbose")
    assert r.returncode == 0, r.stderr
    assert int(re.search(r"(\d+) frames decoded", r.stderr).group(1)) == whole
    assert "resuming" not in r.stderr and not old.exists()
    assert sha256_file(out_dir / "clip.mp4") == clean["clip.mp4"]

    _old_render(args("done.mp4"))
    before = json.loads(report_path(out_dir / "done.mp4").read_text())
    assert before["versions"]["alignment"] == "1"
    check = run_cli("verify", str(report_path(out_dir / "done.mp4")))
    assert check.returncode == 1 and "alignment '2' here, '1' in the report" in check.stdout
    again = run_cli(*args("done.mp4"), "--verbose")
    assert again.returncode == 0 and "up to date" not in again.stderr, again.stderr
    assert sha256_file(out_dir / "done.mp4") == clean["done.mp4"]
    assert json.loads(report_path(out_dir / "done.mp4").read_text())["versions"]["alignment"] == "2"
