"""The frame colourisers (``colourize``): DDColor and DeOldify stand-ins with predictable answers
(``render.standins.colourizers``) run through the drivers, every expected value computed here
from the conventions (docs/frame-processors.md): the frame padded to a square, never stretched;
DDColor fed the grey as RGB 0..1, DeOldify as RGB 0..255 with its colours clipped; the frame's
own lightness kept; the blend; the alpha; a frame with colour re-coloured and told. Then a render
through the command line with ``processors=colourize,swap``: the same bytes on any schedule, and
the colouriser's row in the report."""
from __future__ import annotations

import json
import logging
import subprocess
from pathlib import Path

import cv2
import numpy as np
import pytest
import yaml

from render.config import load_config
from render.errors import ModelError
from render.files import sha256_file
from render.model_handle import ModelEntry, ProcessorModel
from render.processors.colourize import PROCESSOR
from render.processors.colourize.colourizer import DDColor, DeOldify
from render.processors.squares import pad_square
from render.sessions import SessionFactory
from render.standins import colourizers, media

from schedules import on_every_schedule
from conftest import run_cli

CONTRACTS = {DDColor: "colourizer-ddcolor", DeOldify: "colourizer-deoldify"}


def _processor(tmp_path: Path, cls: type, build, name: str, **options):
    path = tmp_path / f"{name}.onnx"
    build(path)
    entry = ModelEntry(name=name, file=path.name, sha256=sha256_file(path), size=None, urls=(),
                       licence="test", commercial_use=True, contract=CONTRACTS[cls],
                       template=None, input_size=256)
    factory = SessionFactory(load_config({}, env={}).execution, tmp_path,
                             available=["CPUExecutionProvider"])
    return cls(PROCESSOR.step(name, **options),
               ProcessorModel(entry, path, factory.lazy(path), tmp_path))


def _lab(bgr: np.ndarray) -> np.ndarray:
    """Float Lab (L 0..100) of a BGR uint8 picture."""
    return cv2.cvtColor(bgr.astype(np.float32) / 255.0, cv2.COLOR_BGR2LAB)


def _grey(bgr: tuple[int, int, int]) -> int:
    """ITU-R 601 luma of one BGR colour, rounded: OpenCV's BGR2GRAY."""
    b, g, r = bgr
    return int(round(0.299 * r + 0.587 * g + 0.114 * b))


def _uniform(bgr: tuple[int, ...], width: int = 120, height: int = 80) -> np.ndarray:
    return np.full((height, width, len(bgr)), bgr, np.uint8)


def _place(n: int, offset: int, side: int, size: int) -> np.ndarray:
    """Where frame pixels 0..n−1, ``offset`` into the padded square of ``side``, fall in the
    model's square of ``size`` (the centre-aligned linear resize, clamped at the edges)."""
    return np.clip((np.arange(n) + offset + 0.5) * size / side - 0.5, 0, size - 1)


def _ramp(place: np.ndarray, span: float, size: int) -> np.ndarray:
    return span * place / (size - 1) - span / 2


# -- DDColor ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("width,height,size", [(333, 217, 256), (217, 333, 192), (64, 64, 384)])
def test_ddcolor_takes_each_colour_from_its_place_and_keeps_the_frames_lightness(
        tmp_path, width, height, size):
    """A non-square odd-sized frame: the stand-in's a, b are straight lines across its square, so
    each pixel's a, b say where in the square it was taken; they are those of the frame padded
    (centred) to a square, not stretched. The L is the frame's own."""
    proc = _processor(tmp_path, DDColor, colourizers.make_ddcolor, "ddcolor_position", size=size)
    frame = np.random.RandomState(7).randint(100, 171, (height, width, 3)).astype(np.uint8)
    out = proc.run([frame])[0]
    assert out.shape == frame.shape and out.dtype == np.uint8

    side = max(width, height)
    a = _ramp(_place(width, (side - width) // 2, side, size), colourizers.A_SPAN, size)
    b = _ramp(_place(height, (side - height) // 2, side, size), colourizers.B_SPAN, size)
    got, want = _lab(out), _lab(frame)
    assert np.abs(got[..., 0] - want[..., 0]).max() <= 0.5
    assert np.abs(got[..., 1] - a[None, :]).max() <= 1.0
    assert np.abs(got[..., 2] - b[:, None]).max() <= 1.0
    if width != height:     # a stretched frame would be far off: the check above can tell
        stretched_a = _ramp(_place(width, 0, width, size), colourizers.A_SPAN, size)
        stretched_b = _ramp(_place(height, 0, height, size), colourizers.B_SPAN, size)
        assert max(np.abs(stretched_a - a).max(), np.abs(stretched_b - b).max()) > 5


def test_ddcolor_is_fed_the_grey_as_rgb_from_0_to_1(tmp_path):
    """The input stand-in's a, b are 60·(R − 0.5) and −60·(B − 0.5) of its input: frames of one
    colour each, in one batch, give the a, b of their grey level / 255, under their own L.
    A frame with colour is re-coloured from its lightness, its own colour gone."""
    proc = _processor(tmp_path, DDColor, lambda p: colourizers.make_ddcolor(p, mode="input"),
                      "ddcolor_input")
    colours = [(40, 60, 90), (200, 220, 160), (200, 60, 30)]
    outs = proc.run([_uniform(c) for c in colours])
    for colour, out in zip(colours, outs):
        unit = _grey(colour) / 255.0
        want_a = colourizers.INPUT_GAIN * (unit - 0.5)
        want_b = -want_a
        got = _lab(out)[0, 0]
        assert np.abs(_lab(out) - got).max() < 1e-4                    # uniform in, uniform out
        assert got[0] == pytest.approx(_lab(_uniform(colour))[0, 0, 0], abs=0.5), colour
        assert got[1] == pytest.approx(want_a, abs=1.0) and got[2] == pytest.approx(want_b, abs=1.0)


def test_a_model_of_another_fixed_side_is_refused_in_one_line(tmp_path):
    proc = _processor(tmp_path, DDColor, lambda p: colourizers.make_ddcolor(p, side=512),
                      "ddcolor_512", size=256)
    with pytest.raises(ModelError, match=r"colourize.size=256: ddcolor_512 takes only 512x512 "
                                         r"input; set colourize.size=512"):
        proc.run([_uniform((10, 20, 30))])


def test_the_padding_mirrors_the_picture_about_its_edge_pixels():
    grey = np.arange(3 * 7, dtype=np.uint8).reshape(3, 7)
    assert np.array_equal(pad_square(grey), np.pad(grey, ((2, 2), (0, 0)), mode="reflect"))
    tall = np.arange(6 * 3, dtype=np.uint8).reshape(6, 3)
    assert np.array_equal(pad_square(tall), np.pad(tall, ((0, 0), (1, 2)), mode="reflect"))


# -- DeOldify --------------------------------------------------------------------------------------
def _deoldify_expected(frame_bgr: tuple[int, int, int], blend: float = 1.0) -> np.ndarray:
    """What one uniform frame must become: the stand-in's RGB for its grey level (0..255 in),
    clipped and rounded; that colour's a, b under the frame's L; blended over the frame."""
    rgb = np.clip(np.rint(colourizers.deoldify_answer(_grey(frame_bgr))), 0, 255)
    colour = np.array([[rgb[::-1]]], np.uint8)                           # as BGR
    lab = _lab(colour)[0, 0]
    lab[0] = _lab(np.array([[frame_bgr]], np.uint8))[0, 0, 0]
    bgr = cv2.cvtColor(lab[None, None].astype(np.float32), cv2.COLOR_LAB2BGR)[0, 0]
    merged = np.clip(np.rint(bgr * 255.0), 0, 255)
    return np.rint(np.array(frame_bgr) * (1 - blend) + merged * blend)


@pytest.mark.parametrize("blend", [1.0, 0.4])
def test_deoldify_is_fed_0_to_255_its_colours_clipped_not_wrapped(tmp_path, blend):
    """A light grey gives the stand-in R = 385 and a dark one B = −20: clipped to 255 and 0
    (wrapped, they would be 129 and 236). The lightness is the frame's L, not its blue channel
    (the blue frame's blue is 200, its L 33). The blend is computed here on top."""
    proc = _processor(tmp_path, DeOldify, colourizers.make_deoldify, "deoldify", blend=blend)
    frames = [(230, 230, 230), (20, 20, 20), (200, 60, 30)]
    assert colourizers.deoldify_answer(230)[0] > 255 and colourizers.deoldify_answer(20)[2] < 0
    outs = proc.run([_uniform(c) for c in frames])               # a fixed batch of 1: one by one
    for colour, out in zip(frames, outs):
        want = _deoldify_expected(colour, blend)
        assert np.abs(out.astype(int) - want).max() <= 1, (colour, out[0, 0], want)
        assert (out == out[0, 0]).all()
    wrapped = np.array(colourizers.deoldify_answer(230)).astype(np.int64).astype(np.uint8)
    assert wrapped[0] == 129                       # what the uint8 cast without a clip gives


def test_blend_zero_leaves_the_frames_as_they_are(tmp_path):
    proc = _processor(tmp_path, DeOldify, colourizers.make_deoldify, "deoldify", blend=0.0)
    frame = np.random.RandomState(3).randint(0, 256, (50, 70, 3)).astype(np.uint8)
    assert np.array_equal(proc.run([frame])[0], frame)


# -- both ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls,build", [(DDColor, colourizers.make_ddcolor),
                                       (DeOldify, colourizers.make_deoldify)])
def test_a_frame_with_alpha_keeps_it(tmp_path, cls, build):
    """A background step before the colouriser hands it BGRA: the BGR is colourised as without
    the alpha, and the alpha comes out as it went in."""
    proc = _processor(tmp_path, cls, build, cls.__name__.lower())
    rs = np.random.RandomState(5)
    bgr = rs.randint(60, 200, (41, 67, 3)).astype(np.uint8)
    alpha = rs.randint(0, 256, (41, 67, 1)).astype(np.uint8)
    out = proc.run([np.concatenate([bgr, alpha], axis=2)])[0]
    assert out.shape == (41, 67, 4) and np.array_equal(out[..., 3:], alpha)
    assert np.array_equal(out[..., :3], proc.run([bgr])[0])
    if cls is DeOldify:        # its uniform answer, computed here, holds with an alpha too
        frame = np.concatenate([_uniform((20, 20, 20)), np.full((80, 120, 1), 9, np.uint8)], 2)
        out = proc.run([frame])[0]
        assert np.abs(out[..., :3].astype(int) - _deoldify_expected((20, 20, 20))).max() <= 1
        assert (out[..., 3] == 9).all()


def test_a_target_with_colour_is_told_once(tmp_path, caplog):
    logger = "render.processors.colourize.colourizer"
    grey = _processor(tmp_path, DeOldify, colourizers.make_deoldify, "deoldify")
    with caplog.at_level(logging.INFO, logger=logger):
        grey.run([_uniform((90, 90, 90)), _uniform((30, 30, 30))])
    assert not caplog.records
    coloured = _processor(tmp_path, DeOldify, colourizers.make_deoldify, "deoldify")
    with caplog.at_level(logging.INFO, logger=logger):
        coloured.run([_uniform((200, 60, 30))])
        coloured.run([_uniform((200, 60, 30))])
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "already has colour" in lines[0], lines
    assert "re-coloured from its lightness" in lines[0]


# -- a render through the command line ------------------------------------------------------------
@pytest.fixture(scope="module")
def colour_render(tmp_path_factory, standin_models):
    """The colouriser stand-ins beside the other stand-ins (new names) in a manifest overlay, a
    source face and a colour clip of 2 s."""
    tmp = tmp_path_factory.mktemp("colourize")
    entries = {}
    for name, contract, build in (
            ("ddcolor_standin", "colourizer-ddcolor", colourizers.make_ddcolor),
            ("deoldify_standin", "colourizer-deoldify", colourizers.make_deoldify)):
        path = standin_models / f"{name}.onnx"
        build(path)
        entries[name] = {"file": path.name, "sha256": sha256_file(path), "licence": "test",
                         "commercial_use": True, "contract": contract, "input_size": 256}
    overlay = tmp / "colourizers.yaml"
    overlay.write_text(yaml.safe_dump({"version": 1, "models": entries}))
    media.make_source_image(tmp / "source.png")
    clip = media.make_clip(tmp / "clip.mp4", width=320, height=180, seconds=2.0)
    media.make_image_target(tmp / "target.png", width=200, height=120)
    return tmp, standin_models, overlay, clip


def _render(setup, folder: str, *keys: str, command: tuple[str, ...] = (),
            target: str = "clip.mp4") -> tuple[Path, subprocess.CompletedProcess]:
    tmp, models, overlay, _ = setup
    out = tmp / folder / f"colour{Path(target).suffix}"
    r = run_cli(*command, "profile=low", f"source={tmp / 'source.png'}", f"target={tmp / target}",
                f"output={out}", f"models.dir={models}", f"models.manifest={overlay}",
                f"cache_dir={tmp / 'cache'}", "lock.device=none", "progress=off",
                "processors=colourize,swap", "colourize.model=ddcolor_standin",
                "segment.seconds=0.5", "execution.providers=cpu", *keys)
    assert r.returncode == 0, r.stderr
    return out, r


def _first_frame(path: Path) -> np.ndarray:
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", str(path), "-frames:v", "1", "-f",
                          "rawvideo", "-pix_fmt", "bgr24", "-"], capture_output=True,
                         check=True).stdout
    return np.frombuffer(raw, np.uint8).reshape(180, 320, 3)


def test_a_render_colourises_then_swaps_with_the_same_bytes_on_any_schedule(colour_render):
    """Segments one at a time on one lane, two at once on two lanes, two shards assembled, and a
    render resumed from half its segments: the same bytes. The colour runs left to right as the
    stand-in paints it, and the report has the colouriser's row."""
    resumed, rep = on_every_schedule(lambda folder, *keys, command=(): _render(
        colour_render, folder, *keys, command=command)[0])
    first = resumed

    lab = _lab(_first_frame(first))
    assert lab[:, :40, 1].mean() < -10 < 10 < lab[:, -40:, 1].mean()
    row = next(m for m in rep["models"] if m["role"] == "colourize")
    assert row["name"] == "ddcolor_standin" and row["sha256"]
    assert [m["role"] for m in rep["models"]].index("colourize") < \
        [m["role"] for m in rep["models"]].index("swap")
    assert rep["config"]["colourize.model"] == "ddcolor_standin"


def test_a_deoldify_render_of_an_image_lists_its_options(colour_render):
    """An image through DeOldify at 192 px and blend 0.5: the row names the model and the options
    not at their default, and the options are in the job key."""
    out, r = _render(colour_render, "image", "--verbose", "colourize.model=deoldify_standin",
                     "colourize.size=192", "colourize.blend=0.5", target="target.png")
    assert "already has colour" in r.stderr, r.stderr          # the target is in colour
    rep = json.loads(Path(f"{out}.report.json").read_text())
    row = next(m for m in rep["models"] if m["role"] == "colourize")
    assert row["name"] == "deoldify_standin" and row["size"] == 192 and row["blend"] == 0.5
    assert cv2.imread(str(out)).shape == (120, 200, 3)
    plain, _ = _render(colour_render, "image-plain", "colourize.model=deoldify_standin",
                       target="target.png")
    plain_rep = json.loads(Path(f"{plain}.report.json").read_text())
    assert "size" not in next(m for m in plain_rep["models"] if m["role"] == "colourize")
    assert plain_rep["job_key"] != rep["job_key"]


def test_colour_match_after_the_colouriser_is_refused_in_one_line(colour_render):
    """swap.color_match measures the target's colour on the frame as decoded: after the
    colouriser it would give the faces the grey's colours back. One line, nothing written."""
    tmp, models, overlay, _ = colour_render
    out = tmp / "matched" / "colour.mp4"
    r = run_cli("profile=low", f"source={tmp / 'source.png'}", f"target={tmp / 'clip.mp4'}",
                f"output={out}", f"models.dir={models}", f"models.manifest={overlay}",
                f"cache_dir={tmp / 'cache'}", "lock.device=none", "progress=off",
                "processors=colourize,swap", "colourize.model=ddcolor_standin",
                "swap.color_match=lab")
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 2 and "colour match" in lines[-1], r.stderr
    assert "put colourize after swap" in lines[-1]
    assert not (tmp / "matched").exists() or not any((tmp / "matched").iterdir())


# -- the counted cost per call ---------------------------------------------------------------------
def test_the_colourisers_counted_costs():
    """DDColor's encoder is ConvNeXt: with the classifier's norm and head in place of the four
    feature norms, the count is ConvNeXt-T's and -L's published 28.59 M and 197.77 M parameters
    and 4.5 and 34.4 GFLOPs (MACs) at 224 px. The colourisers' files are not pinned yet: their
    counts are listed as such, and the bench can read their cost per call."""
    from bench import frame_costs, model_costs

    for encoder, params, gmacs in (("t", 28.589128e6, 4.5), ("l", 197.767336e6, 34.4)):
        count = frame_costs.Count()
        frame_costs.convnext(count, encoder, 224)
        dims = frame_costs.CONVNEXT[encoder][0]
        classifier = count.params - 2 * sum(dims) + 2 * dims[-1] + dims[-1] * 1000 + 1000
        assert classifier == pytest.approx(params, rel=1e-6)
        assert count.macs / 1e9 == pytest.approx(gmacs, rel=0.02)
    names = {"ddcolor", "ddcolor_artistic", "deoldify", "deoldify_artistic", "deoldify_stable"}
    assert names <= set(frame_costs.UNPINNED)
    assert model_costs.gflops("ddcolor") < model_costs.gflops("ddcolor_artistic")
    assert frame_costs.ddcolor("t", 512).macs > 3.5 * frame_costs.ddcolor("t", 256).macs
    assert all(f"{name} " in model_costs.table() for name in names)
