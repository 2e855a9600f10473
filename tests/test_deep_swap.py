"""The deep swapper (``processors=...,deep_swap``): FaceFusion's DFM contract — the crop sharpened
and fed as BGR NHWC 0..1, the outputs taken by position, the model's own mask (the minimum of
its two, clipped, eroded, blurred) bounding what changes in the frame, the conditional colour
match, morph — the graph checked against the manifest, the shipped entries, a first fetch of a
``.dfm``, and renders through the CLI: the report row, the same bytes on every schedule, one
line for each bad input.

The stand-ins (``render.standins.deep_swap``) return their input (and mask by its blue
channel) or a known BGR tint, under a disc mask whose values lie outside 0..1; every expected
value here is computed from those definitions with numpy (erosion, blur, histograms), not by the
code under test.
"""
from __future__ import annotations

import io
import json
import subprocess
import sys
import zlib
from pathlib import Path

import cv2
import numpy as np
import pytest
import yaml

from render.errors import ConfigError, ModelError
from render.faces.align import estimate, template_points
from render.faces.mask import paste_masks
from render.faces.types import Face
from render.files import sha256_file
from render.model_handle import ModelEntry, ProcessorModel
from render.processors.base import Source
from render.processors.deep_swap import PROCESSOR
from render.processors.colour_match import histogram_agreement, match_frame_color
from render.processors.deep_swap.swapper import DeepSwapper
from render.report import report_path
from render import standins
from render.standins import media
from render.standins.deep_swap import DISC_IN, DISC_OUT, disc, make_dfm, write_dfm_models

from conftest import run_cli
from recording import RecordingSession
from schedules import on_every_schedule

SIDE = 224
COLOUR = (0.1, 0.5, 0.9)            # the tint stand-in's BGR


# -- the contract, computed here from its definition -----------------------------------------------
def _sharpened(crop: np.ndarray) -> np.ndarray:
    """1.75·crop − 0.75·blur(crop, σ 2), rounded and saturated to uint8."""
    blur = cv2.GaussianBlur(crop, (0, 0), 2).astype(np.float64)
    return np.clip(np.rint(1.75 * crop.astype(np.float64) - 0.75 * blur), 0, 255)


def _erode_cross(m: np.ndarray) -> np.ndarray:
    """One erosion by the 3 × 3 ellipse (a cross); outside the crop counts as no limit."""
    p = np.pad(m, 1, constant_values=np.inf)
    return np.minimum.reduce([p[1:-1, 1:-1], p[:-2, 1:-1], p[2:, 1:-1], p[1:-1, :-2],
                              p[1:-1, 2:]])


def _gaussian(m: np.ndarray, sigma: float) -> np.ndarray:
    """A separable Gaussian blur, 4σ each side (OpenCV's kernel for float images), edges mirrored
    about the edge pixel."""
    r = int(round(4 * sigma))
    k = np.exp(-np.arange(-r, r + 1) ** 2 / (2 * sigma ** 2))
    k /= k.sum()
    p = np.pad(m.astype(np.float64), r, mode="reflect")
    rows = sum(k[i] * p[:, i:i + m.shape[1]] for i in range(2 * r + 1))
    return sum(k[i] * rows[i:i + m.shape[0]] for i in range(2 * r + 1))


def _dfm_mask(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    m = np.clip(np.minimum(source, target), 0.0, 1.0)
    return _gaussian(_erode_cross(_erode_cross(m)), 6.25)


def _agreement(a: np.ndarray, b: np.ndarray) -> float:
    """(Pearson correlation of the 50 × 60 hue-saturation histograms + 1) / 2."""
    def hist(crop):
        hsv = cv2.cvtColor(crop, cv2.COLOR_BGR2HSV).reshape(-1, 3).astype(np.float64)
        h, _, _ = np.histogram2d(hsv[:, 0], hsv[:, 1], bins=[np.linspace(0, 180, 51),
                                                            np.linspace(0, 256, 61)])
        return h.ravel() - h.mean()
    x, y = hist(a), hist(b)
    return (float(x @ y / np.sqrt((x @ x) * (y @ y))) + 1.0) / 2.0


def _textured(seed: int, n: int = 1) -> np.ndarray:
    """Crops of smooth colour blobs plus fine noise (something to sharpen)."""
    rs = np.random.RandomState(seed)
    base = cv2.resize(rs.randint(0, 256, (n * 7, 7, 3)).astype(np.uint8), (SIDE, n * SIDE),
                      interpolation=cv2.INTER_CUBIC).astype(int)
    noisy = np.clip(base + rs.randint(-25, 26, base.shape), 0, 255).astype(np.uint8)
    return noisy.reshape(n, SIDE, SIDE, 3)


# -- the processor, one call at a time -------------------------------------------------------------
def _swapper(tmp: Path, *, input_size: int = SIDE, morph_option: int = 100,
             **spec) -> DeepSwapper:
    path = tmp / f"dfm-{len(list(tmp.glob('*.dfm')))}.dfm"
    make_dfm(path, side=spec.pop("side", SIDE), colour=COLOUR, **spec)
    entry = ModelEntry(name="dfm", file=path.name, sha256=sha256_file(path), size=None, urls=(),
                       licence="test", commercial_use=False, contract="swapper-dfm",
                       template="dfl_whole_face", input_size=input_size)
    return DeepSwapper(PROCESSOR.step("dfm", morph=morph_option),
                       ProcessorModel(entry, path, RecordingSession(path), tmp))


def _bound(proc: DeepSwapper):
    return proc.bind(Source(np.ones(512, np.float32),
                            lambda: pytest.fail("the deep swapper asked for the source image")))


def test_the_model_gets_the_sharpened_crop_as_bgr_nhwc_and_its_mask_is_min_clip_erode_blur(
        tmp_path):
    """The identity stand-in masks by its input's channel 0 under a disc of 1.25 / −0.25: the
    paste mask must be blur(erode²(clip(min(sharpened blue / 255, disc)))) — a model fed RGB, an
    unsharpened or NCHW crop, a mask not clipped or not eroded would each give another."""
    proc = _swapper(tmp_path, mode="identity", radius=0.35)
    crops = _textured(1, n=2)
    out = _bound(proc)(crops)
    assert out.shape == (2, SIDE, SIDE, 4) and out.dtype == np.float32
    fed = proc.lazy.feeds[-1]["in_face:0"]
    assert fed.shape == (2, SIDE, SIDE, 3) and fed.dtype == np.float32
    sharp = np.stack([_sharpened(c) for c in crops])
    assert np.abs(fed * 255.0 - sharp).max() <= 1.0 + 1e-3            # ties rounded either way
    assert np.mean(np.abs(fed * 255.0 - sharp) > 0.5) < 1e-3
    assert np.abs(sharp - crops).mean() > 5                            # the sharpening shows
    target = np.where(disc(SIDE, 0.35), DISC_IN, DISC_OUT)
    for k in range(2):
        want = _dfm_mask(fed[k, ..., 0], target)
        assert np.abs(out[k, ..., 3] - want).max() < 1e-4
        red = _dfm_mask(fed[k, ..., 2], target)
        assert np.abs(out[k, ..., 3] - red).max() > 0.05               # channel order shows
    # the morph input is fed only to a graph that declares it: this one does, at 100 %
    assert proc.lazy.feeds[-1]["morph_value:0"].tolist() == [1.0]


def test_the_face_output_is_bgr_colour_matched_to_the_raw_crop_by_histogram_agreement(
        tmp_path):
    """Flat crops make the colour match predictable: the tint stand-in gives the flat colour
    out = in·(1 − m) + COLOUR·m; matching it to a flat raw crop C gives C (less up to 2 levels
    where FaceFusion's truncations after a cubic resize of a constant fall below it), so the
    result is addWeighted(out, 1 − f, C, f) with f from the two crops' histograms."""
    raw = np.full((1, SIDE, SIDE, 3), (40, 160, 90), np.uint8)        # BGR
    for morph, m in ((100, 1.0), (35, 0.35)):
        proc = _swapper(tmp_path, morph_option=morph)
        result = _bound(proc)(raw)[0, ..., :3]
        swapped = np.rint(255 * ((40, 160, 90) / np.float64(255) * (1 - m) + np.array(COLOUR) * m))
        f = _agreement(raw[0], np.full_like(raw[0], swapped.astype(np.uint8)))
        want = swapped * (1 - f) + np.array([40, 160, 90]) * f
        error = result - want
        assert error.min() >= -2 * f - 0.5 and error.max() <= 0.5 + 1e-3, (morph, f)
        assert np.abs(error).mean() < 0.5
        assert np.abs(want - (40, 160, 90)).max() > 20    # the tint and its channels show
    assert 0.4 < f < 0.6                          # colours in other bins: about half matched


def test_the_histogram_agreement_and_the_colour_match():
    rs = np.random.RandomState(4)
    a, b = _textured(5)[0], _textured(6)[0]
    assert histogram_agreement(a, b) == pytest.approx(_agreement(a, b), abs=1e-6)
    assert histogram_agreement(a, a) == pytest.approx(1.0)
    # a swap that is the raw crop plus a smooth colour cast: the match takes the cast away
    cast = cv2.resize(rs.randint(-40, 41, (3, 3, 3)).astype(np.float32), (SIDE, SIDE),
                      interpolation=cv2.INTER_CUBIC)
    raw = cv2.GaussianBlur(a, (0, 0), 3)
    swapped = np.clip(raw + cast, 0, 255).astype(np.uint8)
    matched = match_frame_color(raw, swapped)
    assert np.abs(swapped.astype(float) - raw).mean() > 10
    assert np.abs(matched.astype(float) - raw).mean() < 2.0


def test_a_fixed_batch_graph_takes_one_face_a_call_and_batches_give_the_same_bytes(tmp_path):
    fixed = _swapper(tmp_path, dynamic_batch=False)
    any_batch = _swapper(tmp_path)
    assert (fixed.max_batch, any_batch.max_batch) == (1, None)
    crops = _textured(7, n=3)
    together = _bound(any_batch)(crops)
    alone = np.concatenate([_bound(fixed)(crops[k:k + 1]) for k in range(3)])
    assert np.array_equal(together, alone)


def test_the_graph_must_agree_with_the_manifest_and_morph_needs_a_morph_input(tmp_path):
    wrong = _swapper(tmp_path, input_size=256)
    with pytest.raises(ModelError) as info:
        _bound(wrong)
    msg = str(info.value)
    assert "in_face:0 is [" in msg and "224, 224, 3]" in msg and "input_size 256" in msg
    # a graph of another contract altogether
    from render.standins.swappers import make_embedding_swapper
    other = _swapper(tmp_path)
    make_embedding_swapper(other.model.path, size=SIDE)
    with pytest.raises(ModelError, match="not a DFM graph: it needs an input in_face:0"):
        _bound(other)
    # morph other than 100 asked of a model without the input: refused; at 100 it runs unfed
    with pytest.raises(ConfigError, match=r"deep_swap.morph=50: model dfm has no morph_value:0 "
                                          r"input"):
        _bound(_swapper(tmp_path, morph=False, morph_option=50))
    plain = _swapper(tmp_path, morph=False)
    _bound(plain)(_textured(8))
    assert set(plain.lazy.feeds[-1]) == {"in_face:0"}


def test_the_models_mask_bounds_what_changes_in_the_frame(tmp_path):
    """The stage pastes through min(box, the model's mask): on an odd-sized flat frame, with a
    face placed by perturbed points, only pixels whose crop position lies within the disc's
    radius plus the erosion and the blur's reach change; deep inside it the result is the
    colour-matched tint; the box alone reaches much further."""
    from render.face_stage import ChainStep, FaceStage

    proc = _swapper(tmp_path, radius=0.3)
    frame = np.full((217, 333, 3), (70, 110, 150), np.uint8)
    theta, scale = np.deg2rad(12.0), 0.6
    rot = scale * np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
    kps = template_points("dfl_whole_face", SIDE) @ rot.T + (90.0, 20.0)
    kps = (kps + np.random.RandomState(9).uniform(-1.5, 1.5, kps.shape)).astype(np.float32)
    face = Face(box=np.array([0, 0, 1, 1], np.float32), kps=kps, score=1.0)
    step = ChainStep(proc, _bound(proc), paste_masks("box", SIDE, 0.0, 0.0))
    out = frame.copy()
    FaceStage(detector=None, select=lambda f, found: found, chain=[step]).swap([out], [(0, face)])

    m = estimate(kps, "dfl_whole_face", SIDE).astype(np.float64)
    ys, xs = np.mgrid[0:217, 0:333]
    cx = m[0, 0] * xs + m[0, 1] * ys + m[0, 2]          # each frame pixel's place in the crop
    cy = m[1, 0] * xs + m[1, 1] * ys + m[1, 2]
    in_crop = (cx > 1) & (cx < SIDE - 1) & (cy > 1) & (cy < SIDE - 1)
    r = np.hypot(cx + 0.5 - SIDE / 2, cy + 0.5 - SIDE / 2)     # pixel centres, as disc() has
    changed = np.abs(out.astype(int) - frame).max(axis=2) > 0
    reach = 0.3 * SIDE + 2 + 4 * 6.25 + 1
    assert changed.any() and not changed[r > reach].any()
    assert (in_crop & (r > reach)).sum() > 3000          # where the box alone would have pasted
    inner = r < 0.3 * SIDE - 2 - 3 * 6.25
    swapped = np.rint(255 * np.array(COLOUR))
    f = _agreement(np.full((8, 8, 3), (70, 110, 150), np.uint8),
                   np.full((8, 8, 3), swapped, np.uint8))
    want = swapped * (1 - f) + np.array([70, 110, 150]) * f
    assert inner.sum() > 1000
    assert np.abs(out[inner].astype(float) - want).max() <= 2.0


# -- the shipped entries and a first fetch -------------------------------------------------------
def test_the_shipped_identities_are_facefusions_unpinned_dfm_files(tmp_path):
    from render.models.manifest import load_manifest

    entries = [e for e in load_manifest(tmp_path / "none") if e.contract == "swapper-dfm"]
    assert len(entries) == 5 and PROCESSOR.defaults()["morph"] == 100
    assert "iperov_elon_musk_224" in [e.name for e in entries]      # FaceFusion's default
    for e in entries:
        scope, name = e.name.split("_", 1)
        assert e.file == f"{e.name}.dfm" and (e.sha256, e.confirmed) == ("", False)
        assert e.urls == (f"https://huggingface.co/facefusion/deepfacelive-models-{scope}"
                          f"/resolve/main/{name}.dfm",)
        assert e.input_size == int(name.rsplit("_", 1)[1]) and e.template == "dfl_whole_face"
        assert not e.commercial_use
    r = run_cli("models", "list", f"models.dir={tmp_path / 'models'}")
    rows = [ln for ln in r.stdout.splitlines() if ln.startswith("iperov_")]
    assert len(rows) == 5 and all("not pinned yet" in ln for ln in rows), r.stdout


def test_a_first_fetch_pins_a_dfm_by_its_crc32_and_the_render_loads_it(tmp_path, monkeypatch):
    """The shipped entry's URL path served locally: the ``.hash`` beside ``elon_musk_224.dfm``
    is fetched first, the file is kept as ``iperov_elon_musk_224.dfm``, and it drives the deep
    swapper."""
    from render.models import commands, manifest as manifest_mod
    from render.models.manifest import load_manifest
    from test_models_fetch import FAST, Server

    shipped = yaml.safe_load(manifest_mod.SHIPPED_MANIFEST.read_text())["models"]
    entry = dict(shipped["iperov_elon_musk_224"])
    path = "/" + entry["urls"][0].split("/", 3)[3]
    data_path = tmp_path / "standin.dfm"
    make_dfm(data_path, side=SIDE)
    data = data_path.read_bytes()
    server = Server()
    try:
        server.serve(path, data)
        server.serve(path.replace(".dfm", ".hash"), b"%08x" % zlib.crc32(data))
        entry["urls"] = [server.url(path)]
        layer = tmp_path / "shipped.yaml"
        layer.write_text(yaml.safe_dump({"version": 1, "models": {"iperov_elon_musk_224": entry}}))
        monkeypatch.setattr(manifest_mod, "SHIPPED_MANIFEST", layer)
        models = tmp_path / "models"
        rc = commands.main(["fetch", "iperov_elon_musk_224"], models_dir=models,
                           cache_dir=tmp_path / "cache", manifest_paths=[], profiles={},
                           out=io.StringIO(), fetch_options=FAST)
        assert rc == 0
        assert [p for p, _ in server.requests] == [path.replace(".dfm", ".hash"), path]
    finally:
        server.close()
    assert (models / "iperov_elon_musk_224.dfm").read_bytes() == data
    pinned = load_manifest(models).get("iperov_elon_musk_224")
    assert pinned.sha256 == sha256_file(data_path)
    proc = DeepSwapper(PROCESSOR.step("iperov_elon_musk_224"),
                       ProcessorModel(pinned, models / pinned.file,
                                      RecordingSession(models / pinned.file), tmp_path))
    assert _bound(proc)(_textured(2)).shape == (1, SIDE, SIDE, 4)


def test_the_docs_overlay_example_is_a_valid_manifest(tmp_path):
    """docs/face-processors.md's overlay for another identity reads as a manifest layer."""
    from render.models.manifest import read_manifest_file

    text = (Path(__file__).resolve().parents[1] / "docs" / "face-processors.md").read_text()
    section = text.split("## deep_swap", 1)[1].split("\n## ", 1)[0]
    block = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    layer = tmp_path / "overlay.yaml"
    layer.write_text(block)
    entries = read_manifest_file(layer)
    assert len(entries) == 2
    for name, e in entries.items():
        scope, model = name.split("_", 1)
        assert (e.contract, e.file, e.sha256) == ("swapper-dfm", f"{name}.dfm", "")
        assert e.urls[0].endswith(f"deepfacelive-models-{scope}/resolve/main/{model}.dfm")
        assert e.input_size == int(model.rsplit("_", 1)[1])


# -- through the CLI -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("deep-swap-render")
    models = tmp / "models"
    standins.write_standins(models)
    write_dfm_models(models, {
        "dfm_tint": {"side": SIDE, "mode": "tint", "colour": COLOUR},
        "dfm_plain": {"side": SIDE, "mode": "tint", "morph": False},
        "dfm_wrong": {"side": SIDE, "input_size": 320}})
    media.make_source_image(tmp / "source.png")
    image = media.make_image_target(tmp / "target.png", width=333, height=217)
    clip = media.make_clip(tmp / "clip.mp4", width=320, height=180, seconds=1.0)
    return tmp, models, image, clip


def _render(world, name: str, *keys: str, target: Path | None = None, code: int = 0,
            command: tuple[str, ...] = ()):
    tmp, models, image, _ = world
    out = tmp / "out" / name
    profile = () if any(k.startswith("profile=") for k in keys) else ("profile=low",)
    r = run_cli(*command, *profile, f"source={tmp / 'source.png'}",
                f"target={target or image.path}", f"output={out}", f"models.dir={models}",
                f"cache_dir={tmp / 'cache'}", "lock.device=none", "progress=off",
                "execution.providers=cpu", "deep_swap.model=dfm_tint", *keys)
    assert r.returncode == code, r.stderr
    return out, r


def test_a_deep_swap_after_swap_changes_only_the_face_and_reports_its_row(world):
    tmp, _, image, _ = world
    out, _ = _render(world, "both/face.png", "processors=swap,deep_swap", "deep_swap.morph=60")
    swap_only, _ = _render(world, "swap/face.png", "processors=swap")
    a, b, original = (cv2.imread(str(p)) for p in (out, swap_only, image.path))
    x1, y1, x2, y2 = image.boxes[0]
    w, h = x2 - x1, y2 - y1
    inner = (slice(int(y1 + h / 3), int(y2 - h / 4)), slice(int(x1 + w / 3), int(x2 - w / 3)))
    assert np.abs(a[inner].astype(int) - b[inner]).mean() > 3
    far = np.ones(a.shape[:2], bool)
    far[max(0, int(y1 - h)):int(y2 + h), max(0, int(x1 - w)):int(x2 + w)] = False
    assert np.array_equal(a[far], original[far])
    rep = json.loads(report_path(out).read_text())
    row = next(m for m in rep["models"] if m["role"] == "deep_swap")
    assert (row["name"], row["morph"], row["file"].endswith("dfm_tint.dfm")) == ("dfm_tint", 60,
                                                                                 True)
    assert [m["role"] for m in rep["models"]][-2:] == ["swap", "deep_swap"]
    # named by its model: the declared defaults (morph 100 is not listed)
    out, _ = _render(world, "named/face.png", "processors=dfm_tint")
    row = next(m for m in json.loads(report_path(out).read_text())["models"]
               if m["name"] == "dfm_tint")
    assert row["role"] == "dfm_tint" and "morph" not in row
    # a profile's lines
    profile = tmp / "deep.yaml"
    profile.write_text("processors: [deep_swap]\ndeep_swap:\n  model: dfm_tint\n  morph: 80\n")
    out, _ = _render(world, "profile/face.png", f"profile={profile}")
    rows = json.loads(report_path(out).read_text())["models"]
    assert [(m["role"], m.get("morph")) for m in rows][2:] == [("deep_swap", 80)]


def test_a_deep_swap_render_has_the_same_bytes_on_every_schedule(world):
    _, _, _, clip = world
    out, rep = on_every_schedule(lambda folder, *keys, command=(): _render(
        world, f"{folder}/clip.mp4", "processors=deep_swap", "deep_swap.morph=70",
        "segment.seconds=0.5", *keys, target=clip.path, command=command)[0])
    assert next(m for m in rep["models"] if m["role"] == "deep_swap")["morph"] == 70


@pytest.mark.parametrize("keys,code,words", [
    (("processors=deep_swap", "deep_swap.morph=101"), 2, "deep_swap.morph"),
    (("processors=swap,deep_swap,deep_swap",), 2, "deep_swap is named twice"),
    (("processors=deep_swap", "deep_swap.model=dfm_wrong"), 4, "input_size 320"),
    (("processors=deep_swap", "deep_swap.model=dfm_plain", "deep_swap.morph=50"), 2,
     "has no morph_value:0 input"),
    (("processors=deep_swap", "deep_swap.model=inswapper_128"), 4, "needs swapper-dfm"),
])
def test_each_bad_input_is_one_line_and_nothing_is_written(world, keys, code, words):
    out, r = _render(world, f"bad-{abs(hash(keys))}/face.png", *keys, code=code)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], r.stderr
    assert not out.parent.exists() or list(out.parent.iterdir()) == []


# -- the counted cost ------------------------------------------------------------------------------
def test_the_counted_cost_keeps_deepfacelabs_own_claim_for_d_and_prints(tmp_path):
    """DeepFaceLab's help for the archi option: '-d' doubles the resolution using the same
    computation cost. The count agrees within the encoder's and the extra output convs' share
    (a side or a channel count mis-kept would be off by a factor of two or more)."""
    from onnx import TensorProto, helper, save

    from bench.deep_swap_costs import COUNTED, Saehd, buildable, file_params, saehd

    for kind in ("liae", "df"):
        ratio = saehd(Saehd(f"{kind}-ud", 224)).macs / saehd(Saehd(f"{kind}-u", 112)).macs
        assert 1.0 < ratio < 1.15, (kind, ratio)
    liae, df = saehd(Saehd("liae-ud", 224)), saehd(Saehd("df-ud", 224))
    # liae's two inters each map the 14·14·512 code to 256, then to 7·7·512 (df: one, 7·7·256)
    dense = (14 * 14 * 512 * 256 + 256) + (256 * 7 * 7 * 512 + 7 * 7 * 512)
    assert liae.params - df.params > 2 * dense - (256 * 7 * 7 * 256 + 7 * 7 * 256)
    assert not buildable(Saehd("liae-ud", 208)) and buildable(Saehd("df", 208))
    assert set(COUNTED) == {"liae-ud 224", "liae-ud 320", "df-ud 224", "df-ud 320"}
    # a file's weights: its float initializers only
    graph = helper.make_graph([], "g", [], [helper.make_tensor_value_info("w", TensorProto.FLOAT,
                                                                          [3, 5])],
                              initializer=[helper.make_tensor("w", TensorProto.FLOAT, [3, 5],
                                                              [0.0] * 15),
                                           helper.make_tensor("i", TensorProto.INT64, [4],
                                                              [0] * 4)])
    save(helper.make_model(graph), str(tmp_path / "g.onnx"))
    assert file_params(str(tmp_path / "g.onnx")) == 15
    r = subprocess.run([sys.executable, "-m", "bench.deep_swap_costs"], capture_output=True,
                       text=True, cwd=Path(__file__).resolve().parents[1], timeout=60)
    assert r.returncode == 0 and f"{liae.macs / 1e9:9.2f}" in r.stdout, r.stderr
