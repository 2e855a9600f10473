"""The identity-vector swappers (hyperswap, SimSwap, Ghost), pixel boost and the identity weight
(issue 29, items 1-3), with stand-ins that make a wrong convention visible: an identity swapper
through pixel boost gives the boosted crop back exactly, a tile-mean swapper shows polyphase
tiles, a scaling converter shows what it was fed."""
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
from render.errors import ConfigError
from render.files import sha256_file
from render.model_handle import ModelEntry, ProcessorModel
from render.processors.base import Source
from render.processors.swap import PROCESSOR as SWAP
from render.processors.swap.embedding_swapper import EmbeddingSwapper
from render.processors.swap.pixel_boost import (allowed_sizes, auto_size, boost_size, explode,
                                                implode)
from render.report import report_path
from render.sessions import SessionFactory
from render.standins import media
from render.standins.swappers import make_crossface, make_embedding_swapper

from conftest import run_cli


# -- pixel boost's tiles --------------------------------------------------------------------------
def test_tiles_are_polyphase_in_row_major_phase_order():
    crops = np.random.RandomState(0).randint(0, 256, (2, 12, 12, 3), np.uint8)
    tiles = implode(crops, 3)
    assert tiles.shape == (18, 4, 4, 3)
    for f in range(2):
        for a in range(3):
            for b in range(3):
                assert np.array_equal(tiles[f * 9 + a * 3 + b], crops[f, a::3, b::3])
    assert np.array_equal(explode(tiles, 3), crops)


def test_allowed_sizes_follow_the_model_side():
    assert allowed_sizes(128) == (128, 256, 384, 512, 768, 1024)
    assert allowed_sizes(256) == (256, 512, 768, 1024)
    assert allowed_sizes(512) == (512, 1024)
    assert boost_size("off", 256, "m") == 256 and boost_size("auto", 256, "m") is None
    assert boost_size("768", 256, "m") == 768
    with pytest.raises(ConfigError, match=r"swap.pixel_boost=384: m \(256 px\) takes 256, 512, "
                                          r"768, 1024 or auto"):
        boost_size("384", 256, "m")
    assert [auto_size(px, 128) for px in (90, 128, 129, 300, 2000)] == [128, 128, 256, 384, 1024]


# -- the processors, one call at a time ------------------------------------------------------------
def _entry(name: str, path: Path, contract: str, size: int, template: str = "arcface_128",
           needs: tuple[str, ...] = ()) -> ModelEntry:
    return ModelEntry(name=name, file=path.name, sha256=sha256_file(path), size=None, urls=(),
                      licence="test", commercial_use=False, contract=contract, template=template,
                      input_size=size, needs=needs)


def _source(embedding: np.ndarray) -> Source:
    """A source of this embedding only (the identity-vector swappers take no image)."""
    return Source(embedding, lambda: pytest.fail("an identity swapper asked for the image"))


def _processor(tmp_path: Path, mode: str, contract: str = "swapper-hyperswap", *,
               boost: str = "off", weight: float = 0.5, converter: float | None = None
               ) -> EmbeddingSwapper:
    factory = SessionFactory(load_config({}, env={}).execution, tmp_path,
                             available=["CPUExecutionProvider"])
    path = tmp_path / f"{mode}.onnx"
    make_embedding_swapper(path, size=256, mode=mode, dynamic_batch=True)
    needs = {}
    if converter is not None:
        cpath = tmp_path / "crossface.onnx"
        make_crossface(cpath, scale=converter)
        centry = _entry("crossface", cpath, "converter-crossface", 512, template=None)
        needs = {"crossface": ProcessorModel(centry, cpath, factory.lazy(cpath), tmp_path)}
    entry = _entry(mode, path, contract, 256, needs=tuple(needs))
    step = SWAP.step(mode, pixel_boost=boost, weight=weight)
    return EmbeddingSwapper(step, ProcessorModel(entry, path, factory.lazy(path), tmp_path, needs))


def test_an_identity_swapper_through_pixel_boost_gives_the_boosted_crop_back(tmp_path):
    """Normalisation (x/255 → −1..1 → back) and the tiles' order and place: any slip changes
    pixels of the 512-px crop that four 256-px calls swapped."""
    proc = _processor(tmp_path, "identity", boost="512")
    assert (proc.native, proc.size) == (256, 512)
    crops = np.random.RandomState(1).randint(0, 256, (2, 512, 512, 3), np.uint8)
    run = proc.bind(_source(np.ones(512, np.float32)))
    assert np.array_equal(run(crops), crops)


def test_each_tile_is_a_whole_face_at_a_quarter_of_the_pixels(tmp_path):
    """A swapper that returns each tile's mean colour: polyphase tiles of a crop that is black on
    the left and white on the right all have the crop's mean, so the result is one grey; quadrant
    tiles would give a black and a white half."""
    proc = _processor(tmp_path, "tile-mean", boost="512")
    crop = np.zeros((1, 512, 512, 3), np.uint8)
    crop[:, :, 256:] = 255
    out = proc.bind(_source(np.ones(512, np.float32)))(crop)
    assert out.min() >= 126 and out.max() <= 129, (out.min(), out.max())


def test_the_converter_gets_the_raw_embedding_and_ghost_keeps_its_output_raw(tmp_path):
    raw = np.random.RandomState(2).standard_normal(512).astype(np.float32) * 3.0
    ghost = _processor(tmp_path, "source", "swapper-ghost", converter=2.0)
    assert np.allclose(ghost.prepare_source(raw), 2.0 * raw, rtol=1e-6)
    simswap = _processor(tmp_path, "source", "swapper-simswap", converter=2.0)
    assert np.allclose(simswap.prepare_source(raw), raw / np.linalg.norm(raw), rtol=1e-5)
    hyper = _processor(tmp_path, "source", "swapper-hyperswap")
    assert np.allclose(hyper.prepare_source(raw), raw / np.linalg.norm(raw), rtol=1e-5)


def test_a_converted_swapper_without_its_converter_is_a_model_error(tmp_path):
    from render.errors import ModelError

    with pytest.raises(ModelError, match="needs one converter-crossface model"):
        _processor(tmp_path, "source", "swapper-simswap")


@pytest.mark.parametrize("weight,f", [(0.0, 0.35), (1.0, -0.35), (0.25, 0.175)])
def test_the_weight_balances_source_and_target_as_facefusion_does(tmp_path, weight, f):
    src = np.random.RandomState(3).standard_normal((1, 512)).astype(np.float32)
    tgt = np.random.RandomState(4).standard_normal((2, 512)).astype(np.float32) * 5.0
    hyper = _processor(tmp_path, "source", weight=weight)
    assert hyper.needs_target_identity
    unit = tgt / np.linalg.norm(tgt, axis=1, keepdims=True)
    assert np.allclose(hyper.balance(src, tgt, 2), src * (1 - f) + unit * f, atol=1e-6)
    ghost = _processor(tmp_path, "source", "swapper-ghost", weight=weight, converter=1.0)
    assert np.allclose(ghost.balance(src, tgt, 2), src * (1 - f) + tgt * f, atol=1e-5)
    default = _processor(tmp_path, "source")
    assert not default.needs_target_identity
    assert np.array_equal(default.balance(src, tgt, 2), np.repeat(src, 2, axis=0))


# -- renders ------------------------------------------------------------------------------------
@pytest.fixture
def hyperswap(tmp_path):
    """The stand-in models plus hyperswap stand-ins (identity and source-tinting) named in a
    manifest overlay."""
    models = tmp_path / "models"
    models.mkdir()
    standins.write_standins(models)
    entry = {"licence": "test", "commercial_use": False, "contract": "swapper-hyperswap",
             "template": "arcface_128", "input_size": 256}
    layer = {}
    for mode in ("identity", "source"):
        path = models / f"hyperswap_{mode}.onnx"
        make_embedding_swapper(path, size=256, mode=mode)
        layer[f"hyperswap_{mode}"] = {**entry, "file": path.name, "sha256": sha256_file(path)}
    overlay = tmp_path / "hyperswap.yaml"
    overlay.write_text(yaml.safe_dump({"version": 1, "models": layer}))
    media.make_source_image(tmp_path / "source.png")
    truth = media.make_image_target(tmp_path / "target.png", width=640, height=360)
    return tmp_path, models, overlay, truth


def _render(tmp: Path, models: Path, overlay: Path, name: str, **keys: str):
    out = tmp / "out" / name
    cfg = load_config({"profile": "low", "source": str(tmp / "source.png"),
                       "target": str(tmp / "target.png"), "output": str(out),
                       "models.dir": str(models), "models.manifest": str(overlay),
                       "cache_dir": str(tmp / "cache"), "lock.device": "none",
                       "progress": "off", "swap.precision": "fp32", **keys}, env={})
    render_all(cfg)
    return cv2.imread(str(out)), json.loads(report_path(out).read_text())


def test_an_identity_hyperswap_with_pixel_boost_leaves_the_face_as_it_was(hyperswap):
    tmp, models, overlay, truth = hyperswap
    original = cv2.imread(str(tmp / "target.png"))
    x1, y1, x2, y2 = truth.boxes[0]
    face = (slice(int(y1), int(y2)), slice(int(x1), int(x2)))
    out, rep = _render(tmp, models, overlay, "id.png", **{"swap.model": "hyperswap_identity",
                                                          "swap.pixel_boost": "512"})
    error = np.abs(out[face].astype(int) - original[face])
    assert np.median(error) == 0 and error.mean() < 1.5, (np.median(error), error.mean())
    swap = rep["models"][2]
    assert (swap["role"], swap["name"], swap["pixel_boost"]) == ("swap", "hyperswap_identity", 512)


def test_the_weight_changes_the_face_and_the_job_key(hyperswap):
    """swap.weight=0 balances the source toward the target's identity: the tint the stand-in
    takes from its source input changes inside the face, nothing outside it; the key differs."""
    tmp, models, overlay, truth = hyperswap
    keys = {"swap.model": "hyperswap_source"}
    half, rep_half = _render(tmp, models, overlay, "half.png", **keys)
    zero, rep_zero = _render(tmp, models, overlay, "zero.png", **keys, **{"swap.weight": "0"})
    x1, y1, x2, y2 = truth.boxes[0]
    w, h = x2 - x1, y2 - y1
    inner = (slice(int(y1 + h / 4), int(y2 - h / 4)), slice(int(x1 + w / 4), int(x2 - w / 4)))
    assert np.abs(half[inner].astype(int) - zero[inner]).mean() > 2
    far = np.ones(half.shape[:2], bool)
    far[max(0, int(y1 - h)):int(y2 + h), max(0, int(x1 - w)):int(x2 + w)] = False
    assert np.array_equal(half[far], zero[far])
    assert rep_zero["models"][2]["weight"] == 0.0 and "weight" not in rep_half["models"][2]
    assert rep_zero["job_key"] != rep_half["job_key"]


def test_a_boost_the_model_does_not_take_is_one_line_exit_2(hyperswap):
    """384 is not a multiple of hyperswap's 256: one line naming the sizes it takes, exit 2,
    before any frame; 768 is, and renders."""
    tmp, models, overlay, _ = hyperswap
    common = [f"source={tmp / 'source.png'}", f"target={tmp / 'target.png'}",
              f"models.dir={models}", f"models.manifest={overlay}", f"cache_dir={tmp / 'cache'}",
              "lock.device=none", "swap.model=hyperswap_identity", "swap.precision=fp32"]
    r = run_cli(*common, f"output={tmp / 'out' / 'bad.png'}", "swap.pixel_boost=384")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "swap.pixel_boost=384: hyperswap_identity (256 px) takes 256, 512, 768, 1024" in r.stderr
    assert not (tmp / "out" / "bad.png").exists()
    r = run_cli(*common, f"output={tmp / 'out' / 'ok.png'}", "swap.pixel_boost=768")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("scale,want", [(0.5, 256), (1.0, 256), (1.5, 512), (2.5, 768), (5.0, 1024)])
def test_auto_boost_takes_the_smallest_side_at_least_the_face(tmp_path, scale, want):
    """A face whose 256-px crop covers scale × 256 frame pixels gets the first allowed side that
    is at least that (1024 at most)."""
    from render.faces.align import template_points

    proc = _processor(tmp_path, "identity", boost="auto")
    kps = template_points("arcface_128", 256) * scale + np.float32(40.0)
    assert proc.crop_size(kps) == want


def test_auto_boost_swaps_faces_of_two_sizes_in_one_frame_at_their_own_sides(tmp_path):
    """The stage groups the faces by the side the processor chose: a small and a large face in
    one frame are swapped at 256 and 768 px, each through masks of its own side."""
    from render.face_stage import ChainStep, FaceStage
    from render.faces.align import template_points
    from render.faces.mask import paste_masks
    from render.faces.types import Face

    proc = _processor(tmp_path, "identity", boost="auto")
    seen: list[int] = []
    run = proc.bind(_source(np.ones(512, np.float32)))

    def recording(crops):
        seen.append(crops.shape[1])
        return run(crops)
    small = template_points("arcface_128", 256) * 0.6 + np.float32([50, 50])
    large = template_points("arcface_128", 256) * 2.6 + np.float32([300, 20])
    faces = [Face(box=np.array([0, 0, 1, 1], np.float32), kps=k.astype(np.float32), score=1.0)
             for k in (small, large)]
    noise = np.random.RandomState(5).randint(0, 256, (720, 1280, 3), np.uint8)
    frame = cv2.GaussianBlur(noise, (0, 0), 8)          # smooth: resampling changes it little
    before = frame.copy()
    step = ChainStep(proc, recording, paste_masks("box", 256, 0.0, 0.0),
                     masks_for=lambda size: (paste_masks("box", size, 0.0, 0.0), ()))
    stage = FaceStage(detector=None, select=lambda f, found: found, chain=[step])
    stage.swap([frame], [(0, faces[0]), (0, faces[1])])
    assert sorted(seen) == [256, 768]
    assert np.abs(frame.astype(int) - before).mean() < 2      # an identity swap changes little


def test_an_identity_hyperswap_with_auto_boost_leaves_the_face_as_it_was(hyperswap):
    tmp, models, overlay, truth = hyperswap
    original = cv2.imread(str(tmp / "target.png"))
    x1, y1, x2, y2 = truth.boxes[0]
    face = (slice(int(y1), int(y2)), slice(int(x1), int(x2)))
    out, rep = _render(tmp, models, overlay, "auto.png", **{"swap.model": "hyperswap_identity",
                                                            "swap.pixel_boost": "auto"})
    assert np.median(np.abs(out[face].astype(int) - original[face])) == 0
    assert rep["models"][2]["pixel_boost"] == "auto"


@pytest.mark.parametrize("contract,source_size,signed", [("swapper-blendswap", 112, False),
                                                         ("swapper-uniface", 256, True)])
def test_image_swappers_take_the_source_face_crop_in_rgb(tmp_path, contract, source_size, signed):
    """The stand-in returns the mean colour of its ``source`` input (a fixed-side crop): a source
    image of one colour comes back as that colour, channels in place, through the contract's
    output range; the weight does not apply."""
    from render.faces.align import template_points
    from render.faces.types import Face
    from render.processors.swap.image_swapper import ImageSwapper
    from render.standins.swappers import make_image_swapper

    factory = SessionFactory(load_config({}, env={}).execution, tmp_path,
                             available=["CPUExecutionProvider"])
    path = tmp_path / "image_swapper.onnx"
    make_image_swapper(path, size=256, source_size=source_size, signed=signed)
    entry = _entry("img", path, contract, 256, template="ffhq_512")
    proc = ImageSwapper(SWAP.step("img", weight=0.0, pixel_boost="512"),
                        ProcessorModel(entry, path, factory.lazy(path), tmp_path))
    assert not proc.needs_target_identity
    image = np.full((400, 400, 3), (10, 100, 200), np.uint8)       # BGR
    face = Face(box=np.array([100, 100, 300, 300], np.float32),
                kps=(template_points("arcface_128", 200) + 100).astype(np.float32), score=1.0)
    run = proc.bind(Source(np.ones(512, np.float32), lambda: (image, face)))
    out = run(np.zeros((1, 512, 512, 3), np.uint8))
    assert out.shape == (1, 512, 512, 3)
    assert np.abs(out.reshape(-1, 3).astype(int) - (10, 100, 200)).max() <= 1


def test_colour_match_moves_the_swapped_face_to_the_targets_lab_mean(hyperswap):
    """The source-tinting stand-in shifts the face's colour; with swap.color_match=lab the face's
    inner region has the target's Lab mean again (within 1 unit, measured on the output frame
    through the crop transform the face debugger records)."""
    from render.faces import align
    from render.faces.colour import lab_stats

    tmp, models, overlay, truth = hyperswap
    debug = tmp / "faces.jsonl"
    keys = {"swap.model": "hyperswap_source", "debug.faces": str(debug)}
    tinted, _ = _render(tmp, models, overlay, "tinted.png", **keys)
    matched, rep = _render(tmp, models, overlay, "matched.png", **keys,
                           **{"swap.color_match": "lab"})
    original = cv2.imread(str(tmp / "target.png"))
    face = json.loads(debug.read_text().splitlines()[-1])["faces"][0]
    m = align.estimate(np.array(face["used"], np.float32), "arcface_128", 256)

    def mean(frame):
        return lab_stats(align.warp(frame, m, 256)).mean
    assert np.abs(mean(tinted) - mean(original)).max() > 5          # the stand-in tints
    assert np.abs(mean(matched) - mean(original)).max() <= 1.0
    assert rep["models"][2]["color_match"] == "lab"
