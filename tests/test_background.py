"""The background remover: each matting model's normalisation (from the manifest), the frame
padded to a square and cropped back, u2net_cloth's classes, corridor_key's key and frame, the
despill, the fill — and the matte as the output's alpha channel in PNG and WebM (read back with
ffmpeg), over the fill in MP4, an error where alpha is asked of MP4.

The stand-ins' matte is the input's green channel (``render.standins.matting``), so every
expected alpha here is the target's own green channel, computed from the target in the test.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import cv2
import numpy as np
import onnxruntime as ort
import pytest
import yaml

from render.errors import ConfigError
from render.model_handle import ModelEntry, ProcessorModel
from render.models.manifest import load_manifest
from render.processors.background import PROCESSOR
from render.processors.background.remover import BackgroundRemover, despill
from render.report import report_path
from render.sessions import LazySession
from render.standins import media
from render.standins.matting import IMAGENET, make_matting
from render.files import sha256_file
from render.media import decode_args, probe

from schedules import on_every_schedule
from conftest import model_args, run_cli


def _remover(tmp: Path, contract: str = "matting", size: int = 64, mean=(0.5,) * 3,
             std=(0.5,) * 3, **options) -> BackgroundRemover:
    path = tmp / f"{contract}-{size}.onnx"
    make_matting(path, size=size, contract=contract, mean=mean, std=std)
    entry = ModelEntry(name="m", file=path.name, sha256=sha256_file(path), size=None, urls=(),
                       licence="MIT", commercial_use=True, contract=contract, template=None,
                       input_size=size, params={"mean": list(mean), "std": list(std)})
    lazy = LazySession(lambda: ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]))
    model = ProcessorModel(entry, path, lazy, tmp)
    return BackgroundRemover(PROCESSOR.step("m", **options), model)


def _frame(width: int, height: int, seed: int = 3) -> np.ndarray:
    """A frame of flat blocks (so resampling leaves their insides exact)."""
    rs = np.random.RandomState(seed)
    blocks = rs.randint(0, 256, (height // 24 + 1, width // 24 + 1, 3)).astype(np.uint8)
    return np.ascontiguousarray(np.repeat(np.repeat(blocks, 24, 0), 24, 1)[:height, :width])


def test_every_shipped_matting_model_is_normalised_as_its_manifest_says(tmp_path):
    """A flat frame through each shipped entry's mean and std: the stand-in undoes them, so the
    matte is G/255 only where the remover applied exactly those."""
    manifest = load_manifest(tmp_path / "none")
    entries = [e for e in manifest if e.contract.startswith("matting")]
    assert len(entries) == 15
    frame = np.full((30, 50, 3), (40, 200, 90), np.uint8)
    for e in entries:
        if e.contract != "matting":
            continue
        remover = _remover(tmp_path, size=32, mean=e.params["mean"], std=e.params["std"])
        matte, _ = remover.matte_of(frame)
        assert np.abs(matte - 200 / 255).max() < 1e-5, e.name
    wrong = _remover(tmp_path, size=32, mean=IMAGENET[0], std=IMAGENET[1])
    wrong.mean, wrong.std = np.zeros(3, np.float32), np.ones(3, np.float32)
    assert np.abs(wrong.matte_of(frame)[0] - 200 / 255).max() > 0.05


def test_the_frame_is_padded_to_a_square_not_stretched(tmp_path):
    """An odd-sized frame with a green square: in the model's input the square stays square
    and the padding mirrors the frame about its edge; the matte comes back at the frame's place."""
    remover = _remover(tmp_path, size=111)
    frame = np.zeros((217, 333, 3), np.uint8)
    frame[80:140, 150:210] = (0, 255, 0)
    seen = {}
    run = remover.lazy.run
    remover.lazy.run = lambda feeds: seen.setdefault("x", feeds["input"]) is not None and run(feeds)
    matte, _ = remover.matte_of(frame)
    x = seen["x"][0, 1] * 0.5 + 0.5                         # green, back in [0, 1]
    ys, xs = np.nonzero(x > 0.5)
    height, width = ys.max() - ys.min() + 1, xs.max() - xs.min() + 1
    assert abs(height - width) <= 1 and abs(width - 60 * 111 / 333) <= 1.5
    top = (333 - 217) // 2 * 111 / 333                      # the pad above the frame, scaled
    assert abs(ys.min() - (top + 80 * 111 / 333)) <= 1.5
    # the matte: 1 inside the square, 0 away from it, at the frame's own coordinates
    assert matte.shape == (217, 333)
    assert matte[90:130, 160:200].min() > 0.99 and matte[:60].max() < 0.01
    assert matte[:, :120].max() < 0.01 and matte[:, 240:].max() < 0.01


def test_u2net_cloth_classes_and_corridor_key(tmp_path):
    frame = _frame(64, 64)
    cloth = _remover(tmp_path, "matting-u2net-cloth", size=64, mean=IMAGENET[0], std=IMAGENET[1])
    matte, keyed = cloth.matte_of(frame)
    assert keyed is None
    assert np.array_equal(matte, (frame[..., 1] / 255.0 > 0.5).astype(np.float32))

    key = _remover(tmp_path, "matting-corridor-key", size=64, mean=IMAGENET[0], std=IMAGENET[1])
    matte, keyed = key.matte_of(frame)
    f = frame.astype(np.float64) / 255.0
    coarse = 1.0 - np.clip(2.0 * (f[..., 1] - np.maximum(f[..., 0], f[..., 2])), 0.0, 1.0)
    assert np.abs(matte - coarse).max() < 1e-5
    assert not keyed[..., 2].any()                                  # its frame replaced the RGB
    assert np.abs(keyed[..., :2].astype(int) - frame[..., :2]).max() <= 1


def test_despill_and_fill_as_the_formulas_say(tmp_path):
    frame = _frame(48, 40)
    screen = (0, 255, 0, 128)
    out = despill(frame, screen)
    b, g, r = (frame[..., c].astype(np.float64) for c in range(3))
    expected_g = g + (np.minimum(g, 0.5 * (b + r)) - g) * (128 / 255)
    assert np.abs(out[..., 1] - np.rint(expected_g)).max() <= 1
    assert np.array_equal(out[..., 0], frame[..., 0]) and np.array_equal(out[..., 2], frame[..., 2])
    # a blue screen pulls the blue channel only (the screen's R,G,B land on B,G,R)
    out = despill(frame, (0, 0, 255))
    expected_b = np.minimum(b, 0.5 * (g + r))
    assert np.abs(out[..., 0] - np.rint(expected_b)).max() <= 1
    assert np.array_equal(out[..., 1:], frame[..., 1:])

    remover = _remover(tmp_path, size=48, fill="255,0,10", despill="")
    filled = remover.bind(False)([frame])[0]
    m = frame[..., 1:2].astype(np.float64) / 255.0
    expected = frame * m + np.array([10, 0, 255]) * (1 - m)           # BGR of the fill
    assert filled.shape == frame.shape and np.abs(filled - np.rint(expected)).max() <= 1
    alpha = remover.bind(True)([frame])[0]
    assert alpha.shape == (40, 48, 4) and np.array_equal(alpha[..., :3], frame)
    assert np.abs(alpha[..., 3].astype(int) - frame[..., 1]).max() <= 1

    for bad in ("1,2", "0,0,300", "red"):
        with pytest.raises(ConfigError, match="background.fill"):
            _remover(tmp_path, fill=bad)
    with pytest.raises(ConfigError, match="background.image"):
        _remover(tmp_path, image=str(tmp_path / "missing.png"))


@pytest.fixture
def matting(tmp_path, standin_models):
    """A matting stand-in as ``modnet`` whose input side is the target's width, so the matte
    is the target's green channel exactly; a source, an image target and a clip."""
    model = standin_models / "modnet_standin_320.onnx"      # beside the other models
    make_matting(model, size=320, mean=(0.5,) * 3, std=(0.5,) * 3)
    overlay = tmp_path / "matting.yaml"
    overlay.write_text(yaml.safe_dump({"version": 1, "models": {"modnet": {
        "file": model.name, "sha256": sha256_file(model), "licence": "Apache-2.0",
        "commercial_use": True, "contract": "matting", "template": None, "input_size": 320,
        "params": {"mean": [0.5] * 3, "std": [0.5] * 3}}}}))
    media.make_source_image(tmp_path / "source.png")
    media.make_image_target(tmp_path / "target.png", width=320, height=180)
    media.make_clip(tmp_path / "clip.mp4", width=320, height=180, seconds=2.0)
    return tmp_path, overlay


def _render(tmp: Path, models: Path, overlay: Path, target: str, out: str, *keys: str):
    output = tmp / "out" / out
    r = run_cli("profile=low", f"source={tmp / 'source.png'}", f"target={tmp / target}",
                f"output={output}", *model_args(models, tmp / "cache"),
                f"models.manifest={overlay}", "lock.device=none", "progress=off", *keys)
    return output, r


def _decode(path: Path, codec: list[str] = ()) -> np.ndarray:
    raw = subprocess.run(["ffmpeg", "-v", "error", *codec, "-i", str(path), "-f", "rawvideo",
                          "-pix_fmt", "bgra", "-"], capture_output=True, check=True).stdout
    probe = json.loads(subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
         "stream=width,height", "-of", "json", str(path)],
        capture_output=True, text=True, check=True).stdout)["streams"][0]
    return np.frombuffer(raw, np.uint8).reshape(-1, probe["height"], probe["width"], 4)


def _decoded_as_render_does(path: Path) -> np.ndarray:
    """The target's frames as the render decodes them (its scaler's flags): what the remover
    was given."""
    info = probe(path)
    raw = subprocess.run(decode_args(info), capture_output=True, check=True).stdout
    return np.frombuffer(raw, np.uint8).reshape(-1, info.height, info.width, 3)


def test_the_matte_is_the_alpha_of_png_and_webm_and_the_fill_of_mp4(matting, standin_models):
    tmp, overlay = matting
    chain = "processors=background,swap"
    target = cv2.imread(str(tmp / "target.png"))
    out, r = _render(tmp, standin_models, overlay, "target.png", "cut.png", chain)
    assert r.returncode == 0, r.stderr
    assert "background: the matte is the output's alpha channel" in r.stderr
    png = cv2.imread(str(out), cv2.IMREAD_UNCHANGED)
    assert png.shape == (180, 320, 4)
    assert np.array_equal(png[..., 3], target[..., 1])              # exactly the matte
    rep = json.loads(report_path(out).read_text())
    assert any(m["role"] == "background" and m["name"] == "modnet" for m in rep["models"])
    assert rep["plan"]["alpha"] is True

    # a video in two segments: VP9 with alpha in WebM, read back with libvpx's decoder
    out, r = _render(tmp, standin_models, overlay, "clip.mp4", "cut.webm", chain,
                     "segment.seconds=1")
    assert r.returncode == 0, r.stderr
    frames = _decode(out, ["-c:v", "libvpx-vp9"])
    source = _decoded_as_render_does(tmp / "clip.mp4")
    assert frames.shape == (50, 180, 320, 4) and source.shape == (50, 180, 320, 3)
    error = np.abs(frames[..., 3].astype(int) - source[..., 1])
    assert error.mean() < 1.0 and np.percentile(error, 99) <= 4, (error.mean(), error.max())

    # ProRes 4444 in MOV, segments in mov too
    out, r = _render(tmp, standin_models, overlay, "clip.mp4", "cut.mov", chain,
                     "segment.seconds=1")
    assert r.returncode == 0, r.stderr
    frames = _decode(out)
    error = np.abs(frames[..., 3].astype(int) - source[..., 1])
    assert frames.shape == (50, 180, 320, 4) and error.max() <= 1, error.max()

    # MP4 carries no alpha: the person over the fill, one line saying so
    out, r = _render(tmp, standin_models, overlay, "clip.mp4", "filled.mp4", chain,
                     "background.fill=0,0,255")
    assert r.returncode == 0, r.stderr
    assert "carries no alpha channel" in r.stderr and "0,0,255" in r.stderr
    filled = _decode(out)[..., :3].astype(float)
    m = source[..., 1:2] / 255.0
    expected = source[..., :3] * m + np.array([255, 0, 0]) * (1 - m)
    far = np.s_[:, :, :60]                                            # away from the face
    assert np.abs(filled[far] - expected[far]).mean() < 4.0


def test_alpha_asked_of_mp4_is_one_line_and_nothing_is_written(matting, standin_models):
    tmp, overlay = matting
    out, r = _render(tmp, standin_models, overlay, "clip.mp4", "no.mp4",
                     "processors=background,swap", "background.output=alpha")
    assert r.returncode == 2, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert "cannot carry an alpha channel" in lines[-1] and "background.output=fill" in lines[-1]
    assert not (tmp / "out").exists() or not any((tmp / "out").iterdir())
    # an alpha pixel format with nothing that makes a matte, and one without alpha for a matte
    for keys, says in ((("processors=swap", "encode.pix_fmt=yuva420p"), "makes none"),
                       (("processors=background,swap", "encode.pix_fmt=yuv420p"),
                        "only in yuva420p")):
        out, r = _render(tmp, standin_models, overlay, "clip.mp4", "no.webm", *keys)
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        assert r.returncode == 2 and says in lines[-1], r.stderr
        assert not (tmp / "out").exists() or not any((tmp / "out").iterdir())


def test_alpha_bytes_are_the_same_on_any_schedule(matting, standin_models):
    """A WebM with alpha rendered one segment at a time, two at once on two lanes, as two
    shards assembled, and resumed from half its segments: the same bytes (the same output name
    in each folder: the mark signs the name)."""
    tmp, overlay = matting

    def render(folder: str, *keys: str, command: tuple[str, ...] = ()) -> Path:
        out = tmp / folder / "cut.webm"
        r = run_cli(*command, "profile=low", f"source={tmp / 'source.png'}",
                    f"target={tmp / 'clip.mp4'}", f"output={out}",
                    *model_args(standin_models, tmp / "cache"), f"models.manifest={overlay}",
                    "lock.device=none", "progress=off", "processors=background,swap",
                    "segment.seconds=0.5", "execution.providers=cpu", *keys)
        assert r.returncode == 0, r.stderr
        return out
    resumed, _ = on_every_schedule(render)
    assert _decode(resumed, ["-c:v", "libvpx-vp9"])[..., 3].std() > 10     # the alpha is there


def test_a_background_picture_and_its_bytes_are_in_the_job_key(matting, standin_models):
    """Laid over a picture in MP4: far from the person the picture shows; another picture of
    the same name gives another job key (its bytes decide the output)."""
    tmp, overlay = matting
    picture = tmp / "beach.png"
    cv2.imwrite(str(picture), np.full((90, 400, 3), (200, 100, 0), np.uint8))
    keys = ("processors=background,swap", f"background.image={picture}")
    out, r = _render(tmp, standin_models, overlay, "target.png", "beach.jpg", *keys)
    assert r.returncode == 0, r.stderr
    assert f"laid over the picture {picture}" in r.stderr
    target = cv2.imread(str(tmp / "target.png")).astype(float)
    m = target[..., 1:2] / 255.0
    expected = target * m + np.array([200, 100, 0]) * (1 - m)
    got = cv2.imread(str(out)).astype(float)
    assert np.abs(got[:, :60] - expected[:, :60]).mean() < 3.0
    first = json.loads(report_path(out).read_text())["job_key"]
    cv2.imwrite(str(picture), np.full((90, 400, 3), (0, 100, 200), np.uint8))
    out, r = _render(tmp, standin_models, overlay, "target.png", "beach2.jpg", *keys)
    assert r.returncode == 0, r.stderr
    assert json.loads(report_path(out).read_text())["job_key"] != first
    cv2.imwrite(str(picture), np.full((90, 400, 3), (200, 100, 0), np.uint8))
    out, r = _render(tmp, standin_models, overlay, "target.png", "beach3.jpg", *keys)
    assert json.loads(report_path(out).read_text())["job_key"] == first
