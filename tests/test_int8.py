"""int8 models: ``render models convert NAME int8`` calibrates on the faces of a clip (or the
built-in faces), keeps the model only through its kind's fidelity gate, and a render with
``swap.precision=int8`` (or ``profile=auto`` on a CPU with VNNI) uses it, its bytes the same on
any schedule. Stand-ins have random weights: these tests prove the plumbing and the gate, not
the fidelity of real weights on real faces (bench/RESULTS.md and docs/models.md say so)."""
from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
import yaml
from onnx import TensorProto, helper

from render import standins
from render.cpu import int8_fast
from render.files import sha256_file
from render.standins import media

from schedules import on_every_schedule
from conftest import ROOT, cli_env, run_cli

SHARED_YUNET = ROOT.parent / "shared" / "models" / "face_detection_yunet.onnx"


def _convert(models: Path, name: str, *keys: str, **env: str) -> subprocess.CompletedProcess:
    return run_cli("models", "convert", name, "int8", f"dir={models}",
                   f"cache_dir={models.parent / 'cache'}", *keys, **env)


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """Fresh stand-ins, a clip with faces, and the swapper converted to int8 on it."""
    tmp = tmp_path_factory.mktemp("int8")
    models = tmp / "models"
    standins.write_standins(models)
    clip = media.make_clip(tmp / "clip.mp4", width=640, height=360, seconds=2.0)
    media.make_source_image(tmp / "source.png")
    r = _convert(models, "inswapper_128", f"calibrate={clip.path}")
    assert r.returncode == 0, r.stderr
    return tmp, models, clip, r.stdout


def _entry(models: Path, name: str) -> dict | None:
    return (yaml.safe_load((models / "manifest.yaml").read_text())["models"]).get(name)


def test_the_swapper_passes_its_gate_and_a_render_uses_it(converted):
    tmp, models, clip, said = converted
    assert "inswapper_128_int8:" in said and "fidelity gate passed" in said
    entry = _entry(models, "inswapper_128_int8")
    assert entry["precision"] == "int8" and entry["source"] == "inswapper_128"
    assert entry["fidelity"]["mean_levels"] <= 1.5 and entry["fidelity"]["p99_levels"] <= 8
    assert "clip.mp4" in entry["calibration"] and "held-out" in entry["calibration"]
    assert sha256_file(models / entry["file"]) == entry["sha256"]
    # the emap the renderer reads from the last initializer is the fp32 model's, unchanged
    last = onnx.load(str(models / entry["file"])).graph.initializer[-1]
    first = onnx.load(str(models / "inswapper_128.onnx")).graph.initializer[-1]
    assert last.name == first.name and last.raw_data == first.raw_data

    rows = {}
    for precision in ("fp32", "int8"):
        out = tmp / "out" / f"{precision}.mp4"
        r = run_cli("profile=low", f"source={tmp / 'source.png'}", f"target={clip.path}",
                    f"output={out}", f"models.dir={models}", f"cache_dir={tmp / 'cache'}",
                    "lock.device=none", "progress=off", f"swap.precision={precision}")
        assert r.returncode == 0, r.stderr
        rows[precision] = json.loads(Path(f"{out}.report.json").read_text())
    swap = next(m for m in rows["int8"]["models"] if m["role"] == "swap")
    assert (swap["name"], swap["precision"]) == ("inswapper_128_int8", "int8")
    assert swap["fidelity"] == entry["fidelity"]
    assert rows["int8"]["job_key"] != rows["fp32"]["job_key"]
    assert rows["int8"]["cpu"]["vnni"] == int8_fast()


@pytest.mark.parametrize("name,figure", [
    ("hyperswap_1a_256", "mean_levels"), ("gfpgan_1.4", "p99_levels"),
    ("arcface_w600k_r50", "min_cosine"), ("xseg_1", "agreement"),
    ("bisenet_resnet_34", "agreement"), ("2dfan4", "mean_error_of_face")])
def test_every_kind_of_model_is_calibrated_by_the_class_that_drives_it(converted, name, figure):
    """An identity swapper, an enhancer, the embedder, both masks and the landmarker: each run
    as a render runs it, each judged by its kind's figure (the SCRFD stand-in's boxes move under
    int8: its gate fails, in one line, and it stays fp32)."""
    tmp, models, clip, _ = converted
    r = _convert(models, name, f"calibrate={clip.path}")
    assert r.returncode == 0, r.stderr
    assert figure in _entry(models, f"{name}_int8")["fidelity"]
    r = _convert(models, "scrfd_2.5g", f"calibrate={clip.path}")
    if r.returncode != 0:
        assert "failed its fidelity gate" in r.stderr and "min_iou" in r.stderr, r.stderr


def test_calibration_is_deterministic(converted, tmp_path):
    """The same clip gives the same scales: a second conversion elsewhere, the same bytes."""
    tmp, models, clip, _ = converted
    again = tmp_path / "models"
    standins.write_standins(again)
    r = _convert(again, "inswapper_128", f"calibrate={clip.path}")
    assert r.returncode == 0, r.stderr
    assert _entry(again, "inswapper_128_int8")["sha256"] == \
        _entry(models, "inswapper_128_int8")["sha256"]


def _offset_enhancer(path: Path) -> None:
    """A GFPGAN-contract stand-in that is the identity in float (x + 1000 − 1000) and nothing
    like it in int8: the activation between spans 0..1001, 4 units a step."""
    thousand = helper.make_tensor("thousand", TensorProto.FLOAT, [], [1000.0])
    graph = helper.make_graph(
        [helper.make_node("Add", ["input", "thousand"], ["far"], name="away"),
         helper.make_node("Sub", ["far", "thousand"], ["output"], name="back")], "offset",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["n", 3, 512, 512])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["n", 3, 512, 512])],
        [thousand])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


def test_the_gate_rejects_a_sabotaged_quantisation_and_writes_nothing(converted):
    tmp, models, clip, _ = converted
    _offset_enhancer(models / "offset.onnx")
    manifest = models / "manifest.yaml"
    data = yaml.safe_load(manifest.read_text())
    data["models"]["offset_enhancer"] = {
        "file": "offset.onnx", "sha256": sha256_file(models / "offset.onnx"), "licence": "MIT",
        "commercial_use": True, "contract": "enhancer-gfpgan", "template": "ffhq_512",
        "input_size": 512}
    manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    before = manifest.read_bytes()
    r = _convert(models, "offset_enhancer", f"calibrate={clip.path}")
    assert r.returncode == 4, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "failed its fidelity gate" in lines[0], r.stderr
    assert "mean_levels" in lines[0] and "stays fp32" in lines[0]
    assert manifest.read_bytes() == before
    assert not list(models.glob("offset_int8*")) and not list(models.glob("*.partial"))


def test_bad_inputs_are_one_line_and_leave_the_models_folder_as_it_was(converted, tmp_path):
    tmp, models, clip, _ = converted
    manifest = models / "manifest.yaml"
    before = manifest.read_bytes()
    files = sorted(p.name for p in models.iterdir())

    r = _convert(models, "inswapper_128_int8", f"calibrate={clip.path}")
    assert r.returncode == 2 and "already int8" in r.stderr

    empty = media.make_clip(tmp_path / "empty.mp4", width=320, height=180, seconds=1.0,
                            faces=lambda i: [])
    r = _convert(models, "gfpgan_1.4", f"calibrate={empty.path}")
    assert r.returncode == 2 and "found 0 faces" in r.stderr and "calibrate=CLIP" in r.stderr

    r = _convert(models, "gfpgan_1.4", f"calibrate={tmp_path / 'nothing.mp4'}")
    assert r.returncode == 2 and "no such file" in r.stderr

    # a full disk: no file may grow past 64 KiB in the converting process (the embedder's int8
    # file is larger)
    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, 64 << 10))
    full = subprocess.run([sys.executable, "-m", "render", "models", "convert", "arcface_w600k_r50",
                           "int8", f"dir={models}", f"cache_dir={tmp / 'cache'}",
                           f"calibrate={clip.path}"], env=cli_env(), capture_output=True,
                          text=True, preexec_fn=small_files, timeout=300)
    assert full.returncode != 0
    assert len(full.stderr.strip().splitlines()) == 1, full.stderr
    assert "arcface_w600k_r50" in full.stderr
    assert manifest.read_bytes() == before
    assert sorted(p.name for p in models.iterdir()) == files


def test_int8_bytes_are_the_same_on_any_schedule(converted):
    """Segments one at a time on one lane, two at once on two lanes, two shards assembled, or a
    render resumed from half its segments: the same bytes (the same output name in each folder:
    the mark signs the name)."""
    tmp, models, clip, _ = converted

    def render(folder: str, *keys: str, command: tuple[str, ...] = ()) -> Path:
        out = tmp / folder / "clip.mp4"
        r = run_cli(*command, "profile=low", f"source={tmp / 'source.png'}",
                    f"target={clip.path}", f"output={out}", f"models.dir={models}",
                    f"cache_dir={tmp / 'cache'}", "lock.device=none", "progress=off",
                    "swap.precision=int8", "segment.seconds=0.5", "execution.providers=cpu", *keys)
        assert r.returncode == 0, r.stderr
        return out
    on_every_schedule(render)


def test_profile_auto_takes_int8_where_the_cpu_has_vnni(converted):
    tmp, models, clip, _ = converted
    out = tmp / "auto" / "auto.mp4"
    r = run_cli("profile=auto", f"source={tmp / 'source.png'}", f"target={clip.path}",
                f"output={out}", f"models.dir={models}", f"cache_dir={tmp / 'cache'}",
                "lock.device=none", "progress=off", "trim=0-0.5")
    assert r.returncode == 0, r.stderr
    rep = json.loads(Path(f"{out}.report.json").read_text())
    if rep["config"]["execution.providers"] != ["cpu"]:
        pytest.skip("profile=auto found a GPU here")
    swap = next(m for m in rep["models"] if m["role"] == "swap")
    assert swap["precision"] == ("int8" if int8_fast() else "fp32")
    assert rep["config"]["swap.precision"] == "auto"


@pytest.mark.skipif(not SHARED_YUNET.is_file(), reason="no real YuNet in ../shared/models")
def test_the_built_in_faces_calibrate_without_a_clip(converted, tmp_path):
    """With a real detector the built-in set (scikit-image's face photographs, augmented) gives
    enough faces; the stand-in embedder passes its gate on them."""
    tmp, models, _, _ = converted
    real = models / "yunet_real.onnx"
    real.write_bytes(SHARED_YUNET.read_bytes())
    overlay = tmp_path / "yunet.yaml"
    overlay.write_text(yaml.safe_dump({"version": 1, "models": {"yunet_real": {
        "file": real.name, "sha256": sha256_file(real), "licence": "MIT",
        "commercial_use": True, "contract": "detector-yunet", "input_size": 640}}}))
    r = run_cli("models", "convert", "arcface_w600k_r50", "int8", f"dir={models}",
                f"cache_dir={tmp / 'cache'}", "detect=yunet_real", f"models.manifest={overlay}")
    assert r.returncode == 0, r.stderr
    entry = _entry(models, "arcface_w600k_r50_int8")
    assert "built-in faces" in entry["calibration"] and entry["fidelity"]["min_cosine"] >= 0.995
