"""Processors added from outside render: a plug-in package (``tests/plugin_processors.py``) with a
face processor that has a model and an option, and two frame processors, installed through an
entry point (its registry line) and put in the chain by a profile line. Nothing of render is
edited: ``render --help``, the configuration, the report and the job key take them from their
declarations, and a frame step may change the frame's size.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import cv2
import numpy as np
import onnx
import pytest
import yaml
from onnx import TensorProto, helper

from render.config import PROFILES_DIR
from render.files import sha256_file
from render.report import report_path
from render.standins import media

from conftest import run_cli

TESTS = Path(__file__).resolve().parent
#: the plug-in's registry lines, as its package metadata would declare them
ENTRY_POINTS = """[render.processors]
tint = plugin_processors:TINT
frame_border = plugin_processors:BORDER
frame_double = plugin_processors:DOUBLE
"""


def _tint_model(path: Path) -> None:
    """input (n, 3, 128, 128) + strength (1,) → output: the tint processor's stand-in."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["input", "strength"], ["output"])], "tint",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["n", 3, 128, 128]),
         helper.make_tensor_value_info("strength", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["n", 3, 128, 128])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


@pytest.fixture
def plugin(tmp_path, standin_models):
    """The plug-in installed in a site folder (dist-info with its entry points), its model in a
    manifest overlay, a profile that puts it in the chain, a source and an image target."""
    site = tmp_path / "site"
    info = site / "render_test_plugins-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: render-test-plugins\n"
                                   "Version: 1.0\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    model = standin_models / "tint_standin.onnx"     # beside the other models (a new name)
    _tint_model(model)
    overlay = tmp_path / "tint.yaml"
    overlay.write_text(yaml.safe_dump({"version": 1, "models": {"tint_standin": {
        "file": model.name, "sha256": sha256_file(model),
        "licence": "MIT", "commercial_use": True, "contract": "test-tint",
        "template": "arcface_128", "input_size": 128}}}))
    media.make_source_image(tmp_path / "source.png")
    truth = media.make_image_target(tmp_path / "target.png", width=640, height=360)
    return tmp_path, site, overlay, truth


def _profile(tmp: Path, name: str, chain: list[str]) -> Path:
    """Profile low with one line more: the chain."""
    data = yaml.safe_load((PROFILES_DIR / "low.yaml").read_text())
    data["processors"] = chain
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _cli(tmp: Path, site: Path | None, *args: str) -> subprocess.CompletedProcess:
    path = f"{site}:{TESTS}" if site is not None else str(TESTS)
    return run_cli(*args, PYTHONPATH=f"{Path(__file__).resolve().parents[1]}:{path}")


def _render(tmp: Path, site: Path | None, models: Path, overlay: Path | None, name: str,
            profile: Path,
            *keys: str, target: str = "target.png") -> tuple[np.ndarray | None, dict]:
    out = tmp / "out" / name
    r = _cli(tmp, site, f"profile={profile}", f"source={tmp / 'source.png'}",
             f"target={tmp / target}", f"output={out}", f"models.dir={models}",
             *([f"models.manifest={overlay}"] if overlay else []), f"cache_dir={tmp / 'cache'}",
             "lock.device=none", "progress=off", *keys)
    assert r.returncode == 0, r.stderr
    image = cv2.imread(str(out)) if out.suffix == ".png" else None
    return image, json.loads(report_path(out).read_text())


def test_a_plugin_face_and_frame_processor_with_options(plugin, standin_models):
    tmp, site, overlay, truth = plugin
    r = _cli(tmp, site, "--help")
    assert r.returncode == 0, r.stderr
    assert "tint.strength=0.1" in r.stdout and "frame_border.width=4" in r.stdout
    assert "tint.model=tint_standin" in r.stdout

    swap_only = _profile(tmp, "swap", ["swap"])
    chained = _profile(tmp, "chained", ["swap", "tint", "frame_border"])
    swapped, rep_swap = _render(tmp, site, standin_models, overlay, "swap.png", swap_only)
    tinted, rep = _render(tmp, site, standin_models, overlay, "tint.png", chained,
                          "tint.strength=0.2")

    # the face step ran with its option: 0.2 of full scale added inside the face
    x1, y1, x2, y2 = truth.boxes[0]
    w, h = x2 - x1, y2 - y1
    inner = (slice(int(y1 + h / 4), int(y2 - h / 4)), slice(int(x1 + w / 4), int(x2 - w / 4)))
    room = swapped[inner] < 200
    added = tinted[inner].astype(int)[room] - swapped[inner].astype(int)[room]
    assert room.mean() > 0.5 and abs(np.median(added) - 51) <= 1, np.median(added)
    # the frame step ran after it: a black border of its default width, nothing else changed
    assert not tinted[:4].any() and not tinted[-4:].any()
    assert not tinted[:, :4].any() and not tinted[:, -4:].any()
    assert tinted[4:-4, 4:-4].reshape(-1, 3).any(axis=1).mean() > 0.99
    far = np.ones(swapped.shape[:2], bool)
    far[max(0, int(y1 - h)):int(y2 + h), max(0, int(x1 - w)):int(x2 + w)] = False
    far[:4], far[-4:], far[:, :4], far[:, -4:] = False, False, False, False
    assert np.array_equal(tinted[far], swapped[far])

    # the report: each step with its model (or none) and the options not at their default
    steps = [m for m in rep["models"] if m["role"] in ("swap", "tint", "frame_border")]
    assert [(m["role"], m.get("name")) for m in steps] == [
        ("swap", "inswapper_128_fp16"), ("tint", "tint_standin"), ("frame_border", None)]
    assert steps[1]["strength"] == 0.2 and "width" not in steps[2]
    assert rep["config"]["tint.strength"] == 0.2 and rep["config"]["frame_border.width"] == 4

    # the job key: the option is in it; installing the plug-in changes no other render's key
    _, rep_other = _render(tmp, site, standin_models, overlay, "tint3.png", chained,
                           "tint.strength=0.3")
    assert len({rep["job_key"], rep_other["job_key"], rep_swap["job_key"]}) == 3
    _, rep_plain = _render(tmp, None, standin_models, None, "plain.png", swap_only)
    assert rep_plain["job_key"] == rep_swap["job_key"]
    assert "tint.strength" not in rep_plain["config"]


def test_a_frame_step_may_change_the_size(plugin, standin_models):
    """A video through swap then a doubling frame step, in two segments: the encoder, the plan and
    the report have the new size. Before the swap, the faces move with the frame: the swap lands
    on the doubled face (far from it the frame is the doubled target's)."""
    tmp, site, overlay, truth = plugin
    media.make_clip(tmp / "clip.mp4", width=320, height=180, seconds=2.0)
    _, rep = _render(tmp, site, standin_models, overlay, "double.mp4",
                     _profile(tmp, "double", ["swap", "frame_double"]), "segment.seconds=1",
                     target="clip.mp4")
    out = tmp / "out" / "double.mp4"
    probe = json.loads(subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v:0", "-count_frames", "-show_entries",
         "stream=width,height,nb_read_frames", "-of", "json", str(out)],
        capture_output=True, text=True, check=True).stdout)["streams"][0]
    assert (probe["width"], probe["height"], int(probe["nb_read_frames"])) == (640, 360, 50)
    assert (rep["output"]["width"], rep["output"]["height"]) == (640, 360) == tuple(rep["plan"]["size"])
    assert len(rep["segments"]) == 2

    first, _ = _render(tmp, site, standin_models, overlay, "first.png",
                       _profile(tmp, "first", ["frame_double", "swap"]))
    target = cv2.imread(str(tmp / "target.png"))
    doubled = cv2.resize(target, None, fx=2, fy=2, interpolation=cv2.INTER_NEAREST)
    assert first.shape == doubled.shape
    x1, y1, x2, y2 = (2 * v for v in truth.boxes[0])
    w, h = x2 - x1, y2 - y1
    inner = (slice(int(y1 + h / 4), int(y2 - h / 4)), slice(int(x1 + w / 4), int(x2 - w / 4)))
    assert np.abs(first[inner].astype(int) - doubled[inner]).mean() > 10     # swapped here
    far = np.ones(doubled.shape[:2], bool)
    far[max(0, int(y1 - h)):int(y2 + h), max(0, int(x1 - w)):int(x2 + w)] = False
    assert np.array_equal(first[far], doubled[far])
