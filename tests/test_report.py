"""The report beside every output, ``render verify``, and the synthetic-media marks."""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from render.standins import media as mf
from conftest import model_args, run_cli

pytest.importorskip("c2pa", reason="c2pa-python is not installed (pip install c2pa-python)")


def sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def flip(path: Path, at: float = 0.5) -> None:
    data = bytearray(path.read_bytes())
    data[int(len(data) * at)] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.fixture(scope="module")
def rendered(tmp_path_factory, standin_models):
    """One stand-in render (own copy of the models, so that they can be damaged) and its report."""
    d = tmp_path_factory.mktemp("report")
    models = d / "models"
    shutil.copytree(standin_models, models)
    (d / "in").mkdir()
    source = mf.make_source_image(d / "in" / "source.jpg").path
    clip = mf.make_clip(d / "in" / "clip.mp4", width=320, height=240, seconds=3.0)
    out = d / "out" / "clip.mp4"
    r = run_cli("profile=low", "segment.seconds=1", f"source={source}", f"target={clip.path}",
                f"output={out}", *model_args(models, d / "cache"))
    assert r.returncode == 0, r.stderr
    report = out.with_name("clip.mp4.report.json")
    return {"dir": d, "models": models, "source": source, "clip": clip, "out": out,
            "report": report, "data": json.loads(report.read_text())}


def test_report_holds_every_field_with_real_values(rendered):
    import cv2
    import numpy
    import onnxruntime

    import render

    data, out = rendered["data"], rendered["out"]
    assert data["schema"] == 1 and data["status"] == "done" and data["error"] is None
    inst = data["installation"]
    assert inst["render"] == render.__version__ and inst["onnxruntime"] == onnxruntime.__version__
    assert inst["opencv"] == cv2.__version__ and inst["numpy"] == numpy.__version__
    assert inst["python"].count(".") == 2 and inst["ffmpeg"].startswith("ffmpeg version")
    assert data["output"]["sha256"] == sha(out)
    assert data["target"]["sha256"] == sha(rendered["clip"].path)
    assert data["source"]["sha256"] == sha(rendered["source"])
    assert data["output"]["frames"] == data["target"]["frames"] == rendered["clip"].frame_count
    assert data["target"]["fps"] == "25" and data["target"]["audio"][0]["codec"] == "aac"
    for m in data["models"]:
        assert m["sha256"] == sha(Path(m["file"]))
        assert m["providers"] in (None, ["CPUExecutionProvider"])   # None: never loaded
    swap = next(m for m in data["models"] if m["role"] == "swap")
    assert swap["providers"] == ["CPUExecutionProvider"]
    assert len(data["job_key"]) == 64 and len(data["config_hash"]) == 64
    assert data["config"]["profile"] == "low" and data["config"]["segment.seconds"] == 1.0
    assert len(data["segments"]) == 3 and all(s["state"] == "rendered" for s in data["segments"])
    assert [s["frames"] for s in data["segments"]] == [[0, 25], [25, 50], [50, 75]]
    t = data["timing"]
    assert t["fps"] > 0 and t["started"] < t["ended"] and t["stage_ms_per_frame"]["swap"] >= 0
    over = t["overhead_s"]                               # what segmenting adds, and marking
    assert set(over) == {"commit", "assemble", "verify", "mark"}
    assert all(v > 0 for v in over.values()) and sum(over.values()) < t["seconds"]
    assert data["memory"]["rss_bytes"]["renderer"] > 10 << 20
    assert data["memory"]["gpu_bytes"] is None           # no NVML here: null, never made up
    assert data["synthetic"] is True
    assert data["swapped"]["faces"] > 0 and 0 < data["swapped"]["frames_touched"] <= 75
    assert data["marks"]["enabled"] is True and data["marks"]["c2pa"]["signed"] is True


def test_peak_memory_is_each_processes_own_not_inherited_across_exec():
    """A child started while this process holds 300 MiB reports its own ~60 MiB, not the 300
    that ``ru_maxrss`` would carry over from the fork; this process's own peak covers the 300."""
    import subprocess
    import sys

    import numpy as np

    from render.report import PeakMemory

    held = np.ones(300 << 17)                          # 300 MiB of float64, resident
    memory = PeakMemory(interval=0.05)
    child = subprocess.run([sys.executable, "-c", "import time\nb = bytearray(60 << 20)\n"
                            "b[::4096] = b'x' * len(b[::4096])\ntime.sleep(1.0)"], check=True)
    rss = memory.stop()["rss_bytes"]
    assert child.returncode == 0 and held.sum() > 0
    assert rss["renderer"] >= 300 << 20
    assert 60 << 20 <= rss["largest_child"] < 200 << 20, rss


def test_config_hash_changes_with_any_key():
    from render.config import SCHEMA, load_config
    from render.plan import config_hash, config_values

    base = config_values(load_config({"profile": "low"}, env={}))
    seen = {config_hash(base)}
    for key in ("mask.padding", "encode.crf", "segment.seconds", "progress", "execution.threads"):
        changed = dict(base)
        v = base[key]
        changed[key] = (v + 1) if isinstance(v, (int, float)) and not isinstance(v, bool) else \
            ("off" if v != "off" else "lines")
        seen.add(config_hash(changed))
    assert len(seen) == 6
    assert set(base) == set(SCHEMA)


def verify(report: Path, *args: str):
    return run_cli("verify", str(report), *args)


def test_verify_passes_on_an_untouched_output(rendered):
    r = verify(rendered["report"])
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[-1].startswith("verify: OK") and all(ln.startswith("ok ") for ln in lines[:-1])
    assert any("C2PA manifest: valid" in ln and "compositeWithTrainedAlgorithmicMedia" in ln
               for ln in lines)
    assert any(ln.startswith("ok   job key") for ln in lines)


def test_verify_rerender_one_segment(rendered):
    r = verify(rendered["report"], "rerender=1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ok   segment 1 (frames 25-49) re-rendered: bytes match" in r.stdout


@pytest.mark.parametrize("what", ["output", "target", "model"])
def test_verify_fails_when_a_byte_of_a_file_flips(rendered, tmp_path, what):
    data = rendered["data"]
    path = {"output": Path(data["output"]["path"]), "target": Path(data["target"]["path"]),
            "model": Path(next(m["file"] for m in data["models"] if m["role"] == "swap"))}[what]
    backup = tmp_path / "backup"
    shutil.copyfile(path, backup)
    try:
        flip(path)
        r = verify(rendered["report"])
        assert r.returncode == 1, r.stdout
        fail = [ln for ln in r.stdout.splitlines() if ln.startswith("FAIL")]
        assert any(str(path) in ln and "SHA-256 mismatch" in ln and sha(path) in ln for ln in fail), \
            r.stdout
        assert r.stdout.strip().splitlines()[-1].startswith("verify: FAILED")
    finally:
        shutil.copyfile(backup, path)


def test_verify_checks_the_output_beside_the_report_after_a_copy(rendered, tmp_path):
    """An output and its report copied elsewhere: verify checks the copy beside the report, not
    the file at the path recorded inside (a replaced or deleted copy passed)."""
    out = Path(rendered["data"]["output"]["path"])
    copy = tmp_path / "copied" / out.name
    copy.parent.mkdir()
    shutil.copyfile(out, copy)
    report = copy.with_name(copy.name + ".report.json")
    shutil.copyfile(rendered["report"], report)
    r = verify(report)
    assert r.returncode == 0, r.stdout + r.stderr
    copy.write_bytes(b"not the render")
    r = verify(report)
    assert r.returncode == 1
    assert any(ln.startswith("FAIL output") and str(copy) in ln and "SHA-256 mismatch" in ln
               for ln in r.stdout.splitlines()), r.stdout
    copy.unlink()
    r = verify(report)
    assert r.returncode == 1 and f"FAIL output {copy}: missing" in r.stdout, r.stdout


def test_verify_fails_when_the_config_in_the_report_is_edited(rendered, tmp_path):
    data = json.loads(rendered["report"].read_text())
    data["config"]["mask.padding"] = 0.2
    edited = tmp_path / "edited.report.json"
    edited.write_text(json.dumps(data))
    r = verify(edited)
    assert r.returncode == 1
    assert "FAIL config: hash mismatch (edited?)" in r.stdout


def test_resumed_render_report_names_the_resumed_segments(workdir, standin_models, tmp_path):
    from test_segments import kill_after_segments, render_args

    clip = mf.make_clip(tmp_path / "r.mp4", width=640, height=360, seconds=5.0)
    ref = workdir / "ref" / "r.mp4"
    assert run_cli(*render_args(workdir, standin_models, clip.path, ref, "mark.enabled=false")
                   ).returncode == 0
    out = workdir / "out" / "r.mp4"
    args = render_args(workdir, standin_models, clip.path, out, "mark.enabled=false")
    kill_after_segments(args, workdir / "out", 2)
    assert run_cli(*args).returncode == 0
    data = json.loads(out.with_name("r.mp4.report.json").read_text())
    states = [s["state"] for s in data["segments"]]
    assert states[:2] == ["resumed", "resumed"] and states[-1] == "rendered"
    assert data["output"]["sha256"] == sha(out) == sha(ref)
    assert data["marks"] == {"enabled": False, "tag": None, "c2pa": None}


def test_failed_render_leaves_its_report_in_the_work_folder(workdir, standin_models, tmp_path):
    clip = mf.make_clip(tmp_path / "f.mp4", width=320, height=240, seconds=2.0)
    out = workdir / "out" / "f.mkv"
    # the encoder fails once the work has started (mkv takes any codec name)
    r = run_cli("profile=low", "segment.seconds=0.5", "encode.codec=nonexistent_codec",
                f"source={workdir / 'in' / 'source.jpg'}", f"target={clip.path}", f"output={out}",
                *model_args(standin_models, workdir / "cache"))
    assert r.returncode == 5, r.stderr
    assert [p.name for p in (workdir / "out").iterdir() if not p.name.startswith(".")] == []
    (work,) = [p for p in (workdir / "out").iterdir() if ".render-" in p.name]
    failed = json.loads((work / "report.json").read_text())
    assert failed["status"] == "failed" and "nonexistent_codec" in failed["error"]
    assert failed["output"] is None and failed["segments"] == []


# -- marks ---------------------------------------------------------------------------------------------
def test_mp4_carries_the_tag_and_a_valid_c2pa_manifest(rendered):
    from render import mark

    out = rendered["out"]
    tags = json.loads(subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format_tags",
                                      "-of", "json", str(out)], capture_output=True, text=True,
                                     check=True).stdout)["format"]["tags"]
    assert tags["comment"].startswith("Synthetic media: face-swapped by render")
    info = mark.read_manifest(out)
    assert info.present and info.valid and info.synthetic
    assert info.digital_source_type.endswith("compositeWithTrainedAlgorithmicMedia")
    assert "render" in (info.claim_generator or "")


@pytest.mark.parametrize("ext", ["png", "jpg"])
def test_image_outputs_carry_the_tag_and_a_manifest(workdir, standin_models, ext):
    from render import mark

    target = mf.make_image_target(workdir / "in" / f"p.{ext}", width=320, height=240)
    out = workdir / "out" / f"p.{ext}"
    r = run_cli("profile=low", f"source={workdir / 'in' / 'source.jpg'}", f"target={target.path}",
                f"output={out}", *model_args(standin_models, workdir / "cache"))
    assert r.returncode == 0, r.stderr
    assert mark.read_tag(out).startswith("Synthetic media: face-swapped by render")
    info = mark.read_manifest(out)
    assert info.present and info.valid and info.synthetic
    data = json.loads(out.with_name(f"p.{ext}.report.json").read_text())
    assert data["output"]["sha256"] == sha(out)
    assert verify(out.with_name(f"p.{ext}.report.json")).returncode == 0


def test_webm_gets_the_tag_and_says_why_there_is_no_manifest(workdir, standin_models, tmp_path):
    clip = mf.make_clip(tmp_path / "w.mp4", width=320, height=240, seconds=1.0)
    out = workdir / "out" / "w.webm"
    r = run_cli("profile=low", f"source={workdir / 'in' / 'source.jpg'}", f"target={clip.path}",
                f"output={out}", *model_args(standin_models, workdir / "cache"))
    assert r.returncode == 0, r.stderr
    from render import mark

    assert mark.read_tag(out).startswith("Synthetic media")
    data = json.loads(out.with_name("w.webm.report.json").read_text())
    assert data["marks"]["c2pa"]["signed"] is False and ".webm" in data["marks"]["c2pa"]["reason"]
