"""The face processor chain: a processor added by a module, a registry entry and a profile line.

A trivial processor (a stand-in ONNX model that inverts the crop) is registered for a new
contract, named in a manifest overlay and put after the swapper with ``processors=``; the render
runs it without any change to the pipeline, the app layer or the report.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import onnx
import pytest
import yaml
from onnx import TensorProto, helper

from render import standins
from render.batch import render_all
from render.config import load_config
from render.files import sha256_file
from render.processors import registry
from render.options import option
from render.processors.base import FaceProcessor
from render.processors.spec import Processor
from render.report import report_path
from render.standins import media
from render.standins import models as models_mod

from conftest import run_cli


class InvertProcessor(FaceProcessor):
    """Crops in 0..1 through the model (1 - x), back to uint8."""

    template = "arcface_128"
    size = 128

    def run(self, crops: np.ndarray) -> np.ndarray:
        x = crops.transpose(0, 3, 1, 2).astype(np.float32) / 255.0
        inp = self.lazy.session.get_inputs()[0].name
        y = self.lazy.run({inp: x})[0]
        return np.clip(np.rint(y * 255.0), 0, 255).astype(np.uint8).transpose(0, 2, 3, 1)


@dataclass(frozen=True)
class Invert:
    model: str = option("invert_standin", "the inverting stand-in")


#: its declaration: a section and the class driving its contract
INVERT = Processor("invert", Invert, drivers={"test-invert": f"{__name__}:InvertProcessor"})


def _invert_model(path: Path) -> None:
    one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    graph = helper.make_graph(
        [helper.make_node("Sub", ["one", "input"], ["output"])], "invert",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["n", 3, 128, 128])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["n", 3, 128, 128])], [one])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


@pytest.fixture
def setup(tmp_path, monkeypatch):
    models = tmp_path / "models"
    models.mkdir()
    standins.write_standins(models)
    _invert_model(models / "invert_standin.onnx")
    overlay = tmp_path / "invert.yaml"
    overlay.write_text(yaml.safe_dump({"version": 1, "models": {"invert_standin": {
        "file": "invert_standin.onnx", "sha256": sha256_file(models / "invert_standin.onnx"),
        "licence": "MIT", "commercial_use": True, "contract": "test-invert",
        "template": "arcface_128", "input_size": 128}}}))
    media.make_source_image(tmp_path / "source.png")
    truth = media.make_image_target(tmp_path / "target.png", width=640, height=360)
    registry.register(INVERT)
    yield tmp_path, models, overlay, truth
    registry.unregister(INVERT.name)


def _render(tmp: Path, models: Path, overlay: Path, name: str, chain: str,
            **keys: str) -> tuple[np.ndarray, dict]:
    out = tmp / "out" / name
    cfg = load_config({"profile": "low", "source": str(tmp / "source.png"),
                       "target": str(tmp / "target.png"), "output": str(out),
                       "models.dir": str(models), "models.manifest": str(overlay),
                       "cache_dir": str(tmp / "cache"), "lock.device": "none",
                       "progress": "off", "processors": chain, "mask.type": "box", **keys}, env={})
    render_all(cfg)
    return cv2.imread(str(out)), json.loads(report_path(out).read_text())


def test_a_registered_processor_runs_after_the_swapper(setup):
    tmp, models, overlay, truth = setup
    swapped, rep_swap = _render(tmp, models, overlay, "swap.png", "swap")
    chained, rep_chain = _render(tmp, models, overlay, "chain.png", "swap,invert_standin")
    original = cv2.imread(str(tmp / "target.png"))

    x1, y1, x2, y2 = truth.boxes[0]
    w, h = x2 - x1, y2 - y1
    inner = (slice(int(y1 + h / 4), int(y2 - h / 4)), slice(int(x1 + w / 4), int(x2 - w / 4)))
    assert not np.array_equal(swapped[inner], original[inner])            # the swapper ran
    # the inverter ran on the swapped face: inside the face, chained ≈ 255 − swapped
    error = np.abs(chained[inner].astype(int) + swapped[inner].astype(int) - 255)
    assert np.median(error) <= 2 and error.mean() < 6, (np.median(error), error.mean())
    # and nowhere else: far from the face the pixels are the swap-only render's
    far = np.ones(swapped.shape[:2], bool)
    far[max(0, int(y1 - h)):int(y2 + h), max(0, int(x1 - w)):int(x2 + w)] = False
    assert np.array_equal(chained[far], swapped[far])

    roles = [(m["role"], m["name"]) for m in rep_chain["models"]]
    assert roles == [("detect", "scrfd_2.5g"), ("embed", "arcface_w600k_r50"),
                     ("swap", "inswapper_128_fp16"), ("invert_standin", "invert_standin")]
    assert rep_chain["job_key"] != rep_swap["job_key"]


def test_the_default_chain_keeps_earlier_job_keys(standin_models, tmp_path):
    """``processors`` came later: at its default it stays out of the job key, so renders planned
    before it existed still resume and are still skipped when done."""
    from render.plan import config_values, job_key

    base = {"profile": "low", "models.dir": str(standin_models), "cache_dir": str(tmp_path)}
    cfg = load_config(base, env={})
    assert "processors" in config_values(cfg)
    ident = _identity()
    assert job_key(cfg, ident) == job_key(load_config({**base, "processors": "swap,enhance"},
                                                      env={}), ident)
    assert job_key(cfg, ident) != job_key(load_config({**base, "processors": "swap"}, env={}),
                                          ident)


def _identity():
    from render.plan import Identity

    return Identity(target_sha256="0" * 64, source_sha256="1" * 64, reference_sha256=None,
                    models={}, versions={})


@pytest.mark.parametrize("chain, message, code", [
    ("swap,nosuch_model", "nosuch_model", 4),
    ("swap,scrfd_2.5g", "processors=scrfd_2.5g: its contract is detector-scrfd", 4),
    ("", "processors=: no face processor to run", 2),
    ("swap swap.model=gfpgan_1.4 swap.precision=fp32",
     "swap.model=gfpgan_1.4: its contract is enhancer-gfpgan, swap.model needs swapper-blendswap "
     "or swapper-ghost or swapper-hyperswap or swapper-inswapper or swapper-simswap or "
     "swapper-simswap-unofficial or swapper-uniface", 4),
    ("enhance", "processors=enhance: no face processor to run (enhance runs only with", 2),
    ("colourize", "processors=colourize: no face processor to run (frame steps (colourize) run "
     "beside a face step: add swap)", 2),
])
def test_a_chain_naming_no_processor_fails_in_one_line(workdir, standin_models, chain, message,
                                                       code):
    media.make_image_target(workdir / "in" / "t.png", width=320, height=240)
    r = run_cli(f"models.dir={standin_models}", f"cache_dir={workdir / 'cache'}",
                f"input_dir={workdir / 'in'}", f"output_dir={workdir / 'out'}",
                f"processors={chain.split()[0] if chain else ''}", *chain.split()[1:],
                "progress=off", "lock.device=none")
    assert r.returncode == code, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], r.stderr
    assert not any((workdir / "out").iterdir())


def _inner(truth) -> tuple[slice, slice]:
    x1, y1, x2, y2 = truth.boxes[0]
    w, h = x2 - x1, y2 - y1
    return slice(int(y1 + h / 4), int(y2 - h / 4)), slice(int(x1 + w / 4), int(x2 - w / 4))


@pytest.fixture
def enhancers(setup):
    """The stand-in models plus CodeFormer and GPEN-BFR 256 stand-ins under their manifest names."""
    tmp, models, _, truth = setup
    models_mod.make_codeformer(models / "codeformer.onnx")
    models_mod.make_gpen(models / "gpen_bfr_256.onnx", 256)
    overlay = tmp / "enhancers.yaml"
    entry = {"licence": "test", "commercial_use": False, "precision": "fp32"}
    overlay.write_text(yaml.safe_dump({"version": 1, "models": {
        "codeformer": {**entry, "file": "codeformer.onnx", "contract": "enhancer-codeformer",
                       "sha256": sha256_file(models / "codeformer.onnx"),
                       "template": "ffhq_512", "input_size": 512},
        "gpen_bfr_256": {**entry, "file": "gpen_bfr_256.onnx", "contract": "enhancer-gpen",
                         "sha256": sha256_file(models / "gpen_bfr_256.onnx"),
                         "template": "arcface_128", "input_size": 256}}}))
    return tmp, models, overlay, truth


def test_codeformer_gets_the_weight_of_its_section(enhancers):
    """The stand-in multiplies the crop by its ``weight`` input: weight 1 gives the swapped face
    back, weight 0 a mid-grey face (-1..1 zero is 127.5)."""
    tmp, models, overlay, truth = enhancers
    inner = _inner(truth)
    swapped, _ = _render(tmp, models, overlay, "swap.png", "swap")
    keep, rep = _render(tmp, models, overlay, "w1.png", "swap,enhance", **{
        "enhance.enabled": "true", "enhance.model": "codeformer", "enhance.blend": "1",
        "enhance.weight": "1"})
    grey, _ = _render(tmp, models, overlay, "w0.png", "swap,enhance", **{
        "enhance.enabled": "true", "enhance.model": "codeformer", "enhance.blend": "1",
        "enhance.weight": "0"})
    assert np.median(np.abs(keep[inner].astype(int) - swapped[inner])) <= 2
    assert np.median(np.abs(grey[inner].astype(int) - 128)) <= 1
    assert [m["name"] for m in rep["models"]][-1] == "codeformer"


def test_gpen_256_takes_256_px_crops_on_the_arcface_128_template(enhancers):
    """The GPEN-BFR 256 stand-in has a fixed 256 x 256 input (a 512 crop fails the call) and
    returns the negative: inside the face the result is the swapped face's negative."""
    tmp, models, overlay, truth = enhancers
    inner = _inner(truth)
    swapped, _ = _render(tmp, models, overlay, "swap.png", "swap")
    neg, rep = _render(tmp, models, overlay, "gpen.png", "swap,enhance", **{
        "enhance.enabled": "true", "enhance.model": "gpen_bfr_256", "enhance.blend": "1"})
    error = np.abs(neg[inner].astype(int) + swapped[inner].astype(int) - 255)
    assert np.median(error) <= 2, np.median(error)
    assert [m["name"] for m in rep["models"]][-1] == "gpen_bfr_256"
