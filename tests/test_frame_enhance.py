"""The frame enhancer (``processors=...,frame_enhance``): tiles that overlap and are cross-faded,
the blend over the resized frame, the alpha carried, the output's size in the plan, the report
and the file, the same bytes on any schedule, and the size limit before any work.

The stand-ins (``render.standins.frame_enhancers``) have answers a test can predict: nearest
neighbour enlarges each tile (the tiled frame must be ``cv2.resize(INTER_NEAREST)``), and the
tile's mean everywhere (neighbouring tiles disagree: a seam would show as a step). Tile counts,
overlaps and the blend are computed here from their definitions, not taken from the code.
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import cv2
import numpy as np
import onnxruntime as ort
import pytest

from render.errors import ConfigError
from render.memory import STRATEGIES
from render.model_handle import ModelEntry, ProcessorModel
from render.plan import frame_size_problem
from render.processors import registry
from render.processors.frame_enhance.enhancer import FrameEnhancer
from render.processors.frame_enhance.tiles import Tiling, enhance
from render import standins
from render.standins import media
from render.standins.frame_enhancers import make_frame_enhancer, write_frame_enhancers

from schedules import on_every_schedule
from conftest import run_cli

H, W = 217, 333                 # odd on purpose: no tile count divides them


class _Lazy:
    """The part of a LazySession the driver uses, counting the model's calls."""

    def __init__(self, path: Path) -> None:
        self.session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        self.providers = ["CPUExecutionProvider"]
        self.calls = 0
        self.batches: list[int] = []

    def run(self, feed: dict) -> list:
        self.calls += 1
        self.batches.append(len(next(iter(feed.values()))))
        return self.session.run(None, feed)


def _driver(path: Path, *, scale: int, model_tile: int, context: int, pad: int,
            batch: int = 1, **options) -> tuple[FrameEnhancer, _Lazy]:
    entry = ModelEntry(name=path.stem, file=path.name, sha256="", size=None, urls=(),
                       licence="MIT", commercial_use=True, contract="frame-enhancer",
                       template=None, input_size=model_tile,
                       params={"scale": scale, "tile": model_tile, "pad": pad, "context": context})
    step = registry.processor("frame_enhance").step(model=path.stem, **options)
    lazy = _Lazy(path)
    driver = FrameEnhancer(step, ProcessorModel(entry, path, lazy, path.parent))
    driver.memory = dataclasses.replace(STRATEGIES["low"], batch_size=batch)
    return driver, lazy


def _count(length: int, core: int, stride: int, pad: int) -> int:
    """Cores starting at −pad, one every ``stride`` px, until one reaches ``length + pad``."""
    n = 1
    while -pad + (n - 1) * stride + core < length + pad:
        n += 1
    return n


def _overlaps(length: int, n: int, core: int, stride: int, pad: int, scale: int) -> np.ndarray:
    """Output pixels along an axis that two cores cover."""
    cover = np.zeros(length * scale, int)
    for i in range(n):
        a, b = (-pad + i * stride) * scale, (-pad + i * stride + core) * scale
        cover[max(a, 0):max(b, 0)] += 1
    return cover > 1


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("frame-enhancers")
    make_frame_enhancer(d / "nearest_x2.onnx", scale=2)
    make_frame_enhancer(d / "nearest_x3.onnx", scale=3)
    make_frame_enhancer(d / "mean_x2.onnx", scale=2, mode="tile-mean")
    make_frame_enhancer(d / "fixed_x2.onnx", scale=2, side=48, dynamic_batch=False)
    return d


@pytest.fixture(scope="module")
def noise() -> np.ndarray:
    return np.random.RandomState(41).randint(0, 256, (H, W, 3)).astype(np.uint8)


@pytest.mark.parametrize("name,scale,tile,context,pad,overlap", [
    ("nearest_x2", 2, 64, 4, 8, 16), ("nearest_x3", 3, 40, 2, 0, 7),
    ("nearest_x2", 2, 256, 8, 16, 16)])
def test_the_identity_stand_in_gives_the_nearest_resize(models, noise, name, scale, tile,
                                                        context, pad, overlap):
    driver, lazy = _driver(models / f"{name}.onnx", scale=scale, model_tile=tile, context=context,
                           pad=pad, overlap=overlap, blend=1.0)
    assert driver.output_size(W, H) == (W * scale, H * scale)
    out = driver.run([noise])[0]
    core, stride = tile - 2 * context, tile - 2 * context - overlap
    ny, nx = _count(H, core, stride, pad), _count(W, core, stride, pad)
    assert lazy.calls == ny * nx and lazy.batches == [1] * (ny * nx)
    truth = cv2.resize(noise, (W * scale, H * scale), interpolation=cv2.INTER_NEAREST)
    assert out.shape == truth.shape and out.dtype == np.uint8
    seams = _overlaps(H, ny, core, stride, pad, scale)[:, None] | \
        _overlaps(W, nx, core, stride, pad, scale)[None, :]
    diff = np.abs(out.astype(int) - truth).max(axis=2)
    assert (ny > 1 or nx > 1) == seams.any()
    assert (diff[~seams] == 0).all()
    assert diff.max() <= 1


def test_tiles_in_one_call_give_the_same_bytes(models, noise):
    one, lazy1 = _driver(models / "mean_x2.onnx", scale=2, model_tile=64, context=4, pad=8,
                         blend=1.0)
    many, lazy4 = _driver(models / "mean_x2.onnx", scale=2, model_tile=64, context=4, pad=8,
                          blend=1.0, batch=4)
    a, b = one.run([noise])[0], many.run([noise])[0]
    n = _count(H, 56, 40, 8) * _count(W, 56, 40, 8)
    assert lazy1.calls == n and lazy4.calls == math.ceil(n / 4) and max(lazy4.batches) == 4
    assert np.array_equal(a, b)


def _blocks(h: int, w: int, side: int = 37) -> np.ndarray:
    """Blocks of random grey levels: neighbouring tiles' means differ."""
    levels = np.random.RandomState(7).randint(0, 256, (h // side + 1, w // side + 1))
    grey = np.kron(levels, np.ones((side, side)))[:h, :w].astype(np.uint8)
    return np.dstack([grey, 255 - grey, grey // 2])


def _tile_means(frame: np.ndarray, n: tuple[int, int], tile: int, stride: int, before: int
                ) -> np.ndarray:
    """The mean colour of each tile of the frame mirrored at its edges (float, 0..255)."""
    need = [(k - 1) * stride + tile for k in n]
    h, w = frame.shape[:2]
    padded = np.pad(frame.astype(float), [(before, need[0] - h - before),
                                          (before, need[1] - w - before), (0, 0)], "reflect")
    return np.array([[padded[r * stride:r * stride + tile, c * stride:c * stride + tile]
                      .mean(axis=(0, 1)) for c in range(n[1])] for r in range(n[0])])


def test_no_step_between_tiles_beyond_what_the_cross_fade_allows(models):
    """The tile-mean stand-in: each tile's result is flat, neighbours differ by D levels. The
    smoothstep ramp over R output px moves at most 1.5·D/R levels a pixel (+1 for the
    rounding); hard seams (overlap 0) step by D, which this frame makes large."""
    frame = _blocks(H, W)
    tile, context, pad, overlap, s = 64, 4, 8, 16, 2
    core, stride = tile - 2 * context, tile - 2 * context - overlap
    n = (_count(H, core, stride, pad), _count(W, core, stride, pad))
    means = _tile_means(frame, n, tile, stride, pad + context)
    jumps = max(np.abs(np.diff(means, axis=0)).max(), np.abs(np.diff(means, axis=1)).max())
    assert jumps > 40                     # the frame is hard on seams
    allowed = jumps * 1.5 / (overlap * s) + 1

    def steps(out: np.ndarray) -> float:
        out = out.astype(int)
        return max(np.abs(np.diff(out, axis=0)).max(), np.abs(np.diff(out, axis=1)).max())

    driver, _ = _driver(models / "mean_x2.onnx", scale=s, model_tile=tile, context=context, pad=pad,
                        overlap=overlap, blend=1.0)
    out = driver.run([frame])[0]
    assert steps(out) <= allowed, (steps(out), allowed)
    # the cores' middles are the tiles' means (the result is not flattened everywhere)
    r, c = 1, 2
    y, x = (-pad + r * stride + core // 2) * s, (-pad + c * stride + core // 2) * s
    assert np.abs(out[y, x].astype(float) - means[r, c]).max() <= 1.0
    hard, _ = _driver(models / "mean_x2.onnx", scale=s, model_tile=tile, context=context, pad=pad,
                      overlap=0, blend=1.0)
    assert steps(hard.run([frame])[0]) > 3 * allowed


def test_the_blend_is_the_formula(models, noise):
    """blend b: rint(b · enhanced + (1 − b) · the frame resized INTER_LINEAR); the enhanced
    frame is the nearest resize here (the test above)."""
    b = 0.3
    driver, _ = _driver(models / "nearest_x2.onnx", scale=2, model_tile=64, context=4, pad=8,
                        blend=b)
    out = driver.run([noise])[0].astype(int)
    size = (2 * W, 2 * H)
    near = cv2.resize(noise, size, interpolation=cv2.INTER_NEAREST).astype(float)
    linear = cv2.resize(noise, size, interpolation=cv2.INTER_LINEAR).astype(float)
    assert np.abs(near - linear).mean() > 20          # the two parts differ: the share shows
    exact = b * near + (1 - b) * linear
    tie = np.abs(exact - np.floor(exact) - 0.5) < 1e-3
    assert (out[~tie] == np.rint(exact[~tie])).all()
    assert np.abs(out - exact).max() <= 0.5 + 1e-3

    none, lazy = _driver(models / "nearest_x2.onnx", scale=2, model_tile=64, context=4, pad=8,
                         blend=0.0)
    assert np.array_equal(none.run([noise])[0], linear.astype(np.uint8)) and lazy.calls == 0


def test_bgra_frames_keep_their_alpha(models, noise):
    alpha = np.tile(np.linspace(0, 255, W).astype(np.uint8), (H, 1))
    alpha[50:120, 100:200] = 0
    bgra = np.dstack([noise, alpha])
    driver, _ = _driver(models / "mean_x2.onnx", scale=2, model_tile=64, context=4, pad=8,
                        blend=0.6)
    out = driver.run([bgra, noise])
    assert out[0].shape == (2 * H, 2 * W, 4) and out[1].shape == (2 * H, 2 * W, 3)
    assert np.array_equal(out[0][..., 3], cv2.resize(alpha, (2 * W, 2 * H),
                                                     interpolation=cv2.INTER_LINEAR))
    assert np.array_equal(out[0][..., :3], out[1])


def test_a_fixed_graph_sets_the_tile_and_bad_tiles_are_one_error(models, noise):
    """The graph takes 48-px tiles of batch 1: the manifest's 64 gives way to it; a tile option
    it cannot take, or one without room for the overlap, is a ConfigError."""
    driver, lazy = _driver(models / "fixed_x2.onnx", scale=2, model_tile=64, context=4, pad=0,
                           overlap=8, blend=1.0, batch=8)
    out = driver.run([noise])[0]
    n = _count(H, 40, 32, 0) * _count(W, 40, 32, 0)
    assert lazy.calls == n and set(lazy.batches) == {1}
    assert np.array_equal(out, cv2.resize(noise, (2 * W, 2 * H),
                                          interpolation=cv2.INTER_NEAREST))
    wrong, _ = _driver(models / "fixed_x2.onnx", scale=2, model_tile=96, context=4, pad=0,
                       tile=96)
    with pytest.raises(ConfigError, match="takes only 48-px tiles"):
        wrong.run([noise])
    # the tile option must leave a core longer than the overlap: 2 x 4 + 16 + 1 px at least
    with pytest.raises(ConfigError, match=r"at least 25 px"):
        _driver(models / "nearest_x2.onnx", scale=2, model_tile=64, context=4, pad=0,
                tile=24, overlap=16)
    _driver(models / "nearest_x2.onnx", scale=2, model_tile=64, context=4, pad=0,
            tile=25, overlap=16)


def test_the_tilings_weights_sum_to_one():
    for tiling in (Tiling(64, 2, 4, 16, 8), Tiling(30, 3, 2, 20, 0), Tiling(64, 1, 0, 0, 0)):
        ones = enhance(np.zeros((H, W, 3), np.uint8),
                       lambda t, s=tiling.scale: np.ones((len(t), t.shape[1] * s,
                                                          t.shape[2] * s, 3), np.float32),
                       tiling)
        assert np.abs(ones - 1.0).max() < 1e-6


def test_the_size_rule():
    assert frame_size_problem(7680, 4320) is None          # 4K by 2, 1080p by 4
    assert frame_size_problem(8192, 4352) is None and frame_size_problem(4352, 8192) is None
    assert "macroblocks" in frame_size_problem(8192, 4368)  # 512 x 273 blocks
    assert frame_size_problem(8208, 2000) is not None       # a side over 8192
    assert frame_size_problem(15360, 8640) is not None      # 4K by 4
    assert frame_size_problem(15360, 8640, image=True) is None
    assert frame_size_problem(16384, 100, image=True) is not None


# -- through the CLI ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("frame-enhance-render")
    models = tmp / "models"
    standins.write_standins(models)
    write_frame_enhancers(models, {
        "nearest_x2": {"scale": 2, "tile": 128, "pad": 8, "context": 8},
        "nearest_x4": {"scale": 4, "tile": 128, "pad": 8, "context": 8}})
    clip = media.make_clip(tmp / "clip.mp4", width=320, height=180, seconds=2.0)
    media.make_source_image(tmp / "source.png")
    return tmp, models, clip


def _render(world, folder: str, *keys: str, command: tuple[str, ...] = (),
            target: Path | None = None, code: int = 0):
    tmp, models, clip = world
    out = tmp / folder / "clip.mp4"
    r = run_cli(*command, "profile=low", f"source={tmp / 'source.png'}",
                f"target={target or clip.path}", f"output={out}", f"models.dir={models}",
                f"cache_dir={tmp / 'cache'}", "lock.device=none", "progress=off",
                "processors=swap,frame_enhance", "frame_enhance.model=nearest_x2",
                "execution.providers=cpu", *keys)
    assert r.returncode == code, r.stderr
    return out, r


def test_a_render_at_twice_the_size_has_the_same_bytes_on_any_schedule(world):
    """Segments one at a time on one lane, two at once on two lanes, two shards assembled, a
    render resumed from half its segments: the same bytes, at 640x360 in the file, the plan and
    the report."""
    out, rep = on_every_schedule(lambda folder, *keys, command=(): _render(
        world, folder, "segment.seconds=0.5", *keys, command=command)[0])

    p = media.probe_counts(out)
    assert (p.width, p.height, p.frames) == (640, 360, 50)
    assert (rep["output"]["width"], rep["output"]["height"]) == (640, 360)
    assert tuple(rep["plan"]["size"]) == (640, 360)
    row = next(m for m in rep["models"] if m["role"] == "frame_enhance")
    assert row["name"] == "nearest_x2" and row["scale"] == 2


def test_preview_and_trim_at_the_new_size(world):
    out, _ = _render(world, "preview", "preview=true", "preview_height=90")
    p = media.probe_counts(out)
    assert (p.width, p.height, p.frames) == (320, 180, 50)
    out, _ = _render(world, "trim", "trim=0.4-1.2")
    p = media.probe_counts(out)
    assert (p.width, p.height, p.frames) == (640, 360, 20)
    assert p.audio_duration == pytest.approx(20 / 25, abs=1 / 25 + 1e-3)


def test_the_face_overlay_goes_through_the_frame_steps(world):
    """debug.overlay draws what the stage saw instead of swapping; the frame steps still run, so
    the output has the chain's size (the plan's)."""
    out, _ = _render(world, "overlay", "debug.overlay=true", "trim=0-0.4")
    p = media.probe_counts(out)
    assert (p.width, p.height, p.frames) == (640, 360, 10)


def test_an_output_too_large_to_encode_is_one_line_before_any_work(world):
    tmp, _, _ = world
    uhd = media.make_clip(tmp / "uhd.mp4", width=3840, height=2160, seconds=0.12)
    out, r = _render(world, "uhd", "frame_enhance.model=nearest_x4", target=uhd.path, code=2)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "3840x2160" in lines[0] and "15360x8640" in lines[0]
    assert "real_esrgan_x2" in lines[0] and "macroblocks" in lines[0]
    assert list(out.parent.iterdir()) == []
