#!/usr/bin/env python3
"""The prepared GPU check (issue 13): ``python -m bench.gpu_check``, run by ``bench/gpu_check.sh`` on a
lent GPU machine.

Prints, in this order, and writes every figure to ``--json`` when given:

1. the machine: GPU name and memory (NVML or nvidia-smi), ONNX Runtime's providers, ffmpeg's
   hardware decoders (``-hwaccels``) and NVENC encoders;
2. ms per call of each model stand-in with the production models' cost and weight size
   (``bench/realistic.py``) at batch 1/4/8, swapper fp32 and fp16, on the first GPU provider,
   through the renderer's own session factory and ``LazySession.run`` (I/O binding on CUDA);
3. renders of a generated 1080p clip with profiles low, moderate and high on the GPU: fps, the
   peak GPU memory NVML saw during the render (the report's ``memory.gpu_bytes``; target for low,
   whose memory strategy caps the CUDA arena: ≤ 3.0 GB) and the providers every model got;
4. NVDEC (``decode.hwaccel=cuda``) and NVENC (``encode.codec=h264_nvenc``): what the plan used
   and the fallback line when the driver or card lacks one (H100/H200 have NVDEC but no NVENC);
5. segments at once (issue 32): profiles low and moderate on a longer 1080p clip with
   ``execution.parallel_segments`` = 1, 2, 4 and auto (fps, peak GPU memory, CPU use = CPU-seconds
   of the render and its ffmpeg children per wall second), and two renders started together on
   one GPU (``lock.slots=2``): each one's fps and the frames per second of both.

It uses the SCRFD stand-in as the detector and ``render.standins.media.make_clip``'s clips (the
real YuNet and scikit-image may be absent there). TensorRT is left out by default (engine builds
take minutes); ``--providers tensorrt,cuda,cpu`` includes it. ``--cpu`` runs every step on the CPU
provider with a short clip: the dry run that keeps this script working on machines without a GPU.
"""
from __future__ import annotations

import argparse
import importlib
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

GiB = 1 << 30
#: words of a render's log lines kept as its notes (fallbacks, providers, the GPU memory cap)
NOTE_WORDS = ("fall", "nvenc", "nvdec", "hwaccel", "provider", "cuda", "arena", "gpu", "profile")


def log(msg: str = "") -> None:
    print(msg, flush=True)


def machine(providers: list[str]) -> dict[str, Any]:
    import onnxruntime as ort

    from render.gpus import gpus

    info: dict[str, Any] = {"onnxruntime": ort.__version__,
                            "available_providers": ort.get_available_providers(),
                            "gpus": [g.__dict__ for g in gpus()]}
    ff = shutil.which("ffmpeg")
    info["ffmpeg"] = ff
    if ff:
        def text(*args: str) -> str:
            return subprocess.run([ff, "-hide_banner", *args], capture_output=True, text=True,
                                  stdin=subprocess.DEVNULL).stdout
        info["hwaccels"] = [ln.strip() for ln in text("-hwaccels").splitlines()[1:] if ln.strip()]
        info["nvenc_encoders"] = [ln.split()[1] for ln in text("-encoders").splitlines()
                                  if "nvenc" in ln and len(ln.split()) > 1]
    try:
        from render.gpus import auto_profile

        info["auto_profile"] = auto_profile()[2]
    except Exception as exc:  # noqa: BLE001 - a figure, not a step
        info["auto_profile"] = f"failed: {exc}"
    try:
        importlib.import_module("c2pa")
        info["c2pa"] = True
    except Exception:  # noqa: BLE001
        info["c2pa"] = False
    log(f"GPUs: {info['gpus'] or 'none'}; {info['auto_profile']}")
    log(f"onnxruntime {info['onnxruntime']}: providers {', '.join(info['available_providers'])}; "
        f"asked for {', '.join(providers)}")
    log(f"ffmpeg: {ff or 'missing (render steps skipped)'}; hwaccels {info.get('hwaccels')}; "
        f"NVENC encoders {info.get('nvenc_encoders')}")
    return info


def write_models(d: Path) -> Path:
    from bench import realistic
    from render import standins

    t0 = time.perf_counter()
    gflops = dict(realistic.REAL_GFLOPS, **{"scrfd_2.5g": 2.5})
    weights = dict(realistic.REAL_WEIGHTS_MB, **{"scrfd_2.5g": 3.0})
    standins.write_standins(d, gflops=gflops, weights_mb=weights,
                            dynamic_batch={"inswapper_128": True, "inswapper_128_fp16": True,
                                           "gfpgan_1.4": True})
    log(f"realistic stand-ins written in {time.perf_counter() - t0:.0f}s")
    return d


def per_call(models: Path, providers: list[str], batches: list[int], calls: int) -> list[dict[str, Any]]:
    import numpy as np

    from render.config import load_config
    from render.sessions import SessionFactory

    cfg = load_config({"execution.providers": ",".join(providers), "profile": "moderate"}, env={})
    factory = SessionFactory(cfg.execution, cfg.cache_path)
    rows = []
    specs = [("arcface_w600k_r50", "fp32", {"input": (3, 112, 112)}, [1]),
             ("scrfd_2.5g", "fp32", {"input": (3, 640, 640)}, [1]),
             ("inswapper_128", "fp32", {"target": (3, 128, 128), "source": (512,)}, batches),
             ("inswapper_128_fp16", "fp16", {"target": (3, 128, 128), "source": (512,)}, batches),
             ("gfpgan_1.4", "fp32", {"input": (3, 512, 512)}, batches)]
    for name, precision, shapes, sizes in specs:
        lazy = factory.lazy(models / f"{name}.onnx", fp16=precision == "fp16")
        dtype = np.float16 if precision == "fp16" else np.float32
        for b in sizes:
            feed = {k: np.random.RandomState(b).rand(b, *s).astype(dtype) for k, s in shapes.items()}
            lazy.run(feed)                           # warm-up (arena, cuDNN search)
            lazy.calls, lazy.run_seconds = 0, 0.0
            for _ in range(calls):
                lazy.run(feed)
            ms = lazy.run_seconds * 1000.0 / lazy.calls
            rows.append({"model": name, "precision": precision, "batch": b, "ms_per_call": ms,
                         "ms_per_item": ms / b, "providers": lazy.providers})
            log(f"  {name:20s} {precision} batch {b}: {ms:8.2f} ms/call, {ms / b:8.2f} ms/face "
                f"({(lazy.providers or ['?'])[0]})")
        lazy.release()
    return rows


def render(models: Path, clip: Path, source: Path, out: Path, overrides: dict[str, str],
           timeout: float) -> dict[str, Any]:
    args = [sys.executable, "-m", "render", "--verbose", f"source={source}", f"target={clip}", f"output={out}",
            f"models.dir={models}", "progress=off", f"cache_dir={out.parent / 'cache'}",
            *(f"{k}={v}" for k, v in overrides.items())]
    t0, cpu0 = time.perf_counter(), children_cpu_s()
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, cwd=str(ROOT),
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        lines = [ln for ln in err.splitlines() if ln.strip()] + [f"killed after {timeout:g}s"]
        return {"overrides": overrides, "rc": "timeout", "wall_s": timeout, "log": lines[-8:],
                "stderr": lines[:400], "stdout": [],
                "notes": [ln for ln in lines if any(k in ln.lower() for k in NOTE_WORDS)]}
    wall = time.perf_counter() - t0
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    row: dict[str, Any] = {"overrides": overrides, "rc": p.returncode, "wall_s": wall,
                           "cpu_use": round((children_cpu_s() - cpu0) / wall, 2),
                           "log": lines[-8:], "stderr": lines[:400],
                           "stdout": [ln for ln in p.stdout.splitlines() if ln.strip()][:100],
                           "notes": [ln for ln in lines if any(k in ln.lower() for k in NOTE_WORDS)]}
    report = Path(str(out) + ".report.json")
    if p.returncode == 0 and report.is_file():
        r = json.loads(report.read_text())
        row.update(fps=r["timing"]["fps"], stage_ms=r["timing"]["stage_ms_per_frame"],
                   parallel_segments=r["timing"].get("parallel_segments"),
                   frames=r["swapped"]["frames"],
                   threads=r["timing"].get("threads"), lock=r.get("lock"),
                   gpu_bytes=r["memory"]["gpu_bytes"], gpu_source=r["memory"]["gpu_source"],
                   providers={m["role"]: m["providers"] for m in r["models"]},
                   plan={k: r["plan"].get(k) for k in ("codec", "hwaccel", "encode", "decode")
                         if isinstance(r.get("plan"), dict) and k in r["plan"]})
    return row


def children_cpu_s() -> float:
    """CPU seconds (user + system) of the reaped children: a render and its ffmpeg children."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def segments_at_once(models: Path, work: Path, source: Path, base: dict[str, str], *,
                     size: tuple[int, int], seconds: float, segment_s: float,
                     timeout: float) -> list[dict[str, Any]]:
    """Step 5: N segments at once, and two renders sharing one GPU."""
    from render.standins import media as mf

    clip = work / f"long-{size[0]}x{size[1]}.mp4"
    mf.make_clip(clip, width=size[0], height=size[1], seconds=seconds)
    rows = []
    common = {**base, "segment.seconds": str(segment_s), "lock_dir": str(work / "locks")}
    for profile in ("low", "moderate"):
        for n in ("1", "2", "4", "auto"):
            row = render(models, clip, source, work / f"seg-{profile}-{n}.mp4",
                         {"profile": profile, "execution.parallel_segments": n, **common}, timeout)
            row["name"] = f"profile {profile}, parallel_segments={n}"
            rows.append(row)
            gb = row.get("gpu_bytes")
            log(f"  {row['name']}: rc {row['rc']}, {row.get('fps') or 0:.2f} fps "
                f"(N={row.get('parallel_segments')}), CPU use {row['cpu_use']:.1f} cores, "
                f"peak GPU memory {'n/a' if gb is None else f'{gb / 1e9:.2f} GB'}"
                + ("" if row["rc"] == 0 else f"; {row['log'][-1:]}"))
    # two workers on one GPU: two renders started together, two lock slots on the card
    args = {"profile": "low", "lock.slots": "2", **common}
    t0, cpu0 = time.perf_counter(), children_cpu_s()
    with ThreadPoolExecutor(2) as pool:
        pair = list(pool.map(lambda i: render(models, clip, source, work / f"pair-{i}.mp4", args,
                                              timeout), (0, 1)))
    wall = time.perf_counter() - t0
    frames = sum(r.get("frames") or 0 for r in pair if r["rc"] == 0)
    row = {"name": "two renders on one GPU (profile low, lock.slots=2)", "wall_s": wall,
           "cpu_use": round((children_cpu_s() - cpu0) / wall, 2),
           "fps_each": [r.get("fps") for r in pair], "rc": [r["rc"] for r in pair],
           "gpu_bytes_each": [r.get("gpu_bytes") for r in pair],
           "devices": [(r.get("lock") or {}).get("device") for r in pair],
           "fps_both": round(frames / wall, 2)}
    rows.append(row)
    log(f"  {row['name']}: rc {row['rc']}, fps each {row['fps_each']}, both "
        f"{row['fps_both']:.2f} frames/s, CPU use {row['cpu_use']:.1f} cores, devices "
        f"{row['devices']}")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--providers", default="cuda,cpu")
    ap.add_argument("--cpu", action="store_true", help="dry run on the CPU provider, short clip")
    ap.add_argument("--seconds", type=float, default=None, help="clip length (default 4; 1 with --cpu)")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--timeout", type=float, default=90.0, help="seconds per render")
    a = ap.parse_args(argv)
    providers = ["cpu"] if a.cpu else [p.strip() for p in a.providers.split(",") if p.strip()]
    seconds = a.seconds or (1.0 if a.cpu else 4.0)
    work = a.workdir or Path(tempfile.mkdtemp(prefix="gpu-check-"))
    work.mkdir(parents=True, exist_ok=True)
    t_begin = time.perf_counter()
    result: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M"), "providers": providers}

    def save() -> None:  # after every step, so that a run cut short still leaves its figures
        if a.json:
            a.json.write_text(json.dumps(result, indent=1, default=str))

    log("== machine")
    result["machine"] = machine(providers)
    save()
    log("\n== realistic stand-ins")
    models = write_models(work / "models")

    log("\n== ms per call (ONNX Runtime's own time, mean of the calls after a warm-up)")
    try:
        result["per_call"] = per_call(models, providers, [1, 4, 8] if not a.cpu else [1, 4],
                                      calls=10 if not a.cpu else 2)
    except Exception as exc:  # noqa: BLE001 - report and go on with the renders
        log(f"  FAILED: {exc}")
        result["per_call_error"] = str(exc)
    save()

    if not shutil.which("ffmpeg"):
        log("\nno ffmpeg here: the render steps are skipped")
    else:
        from render.standins import media as mf

        w, h = (1920, 1080) if not a.cpu else (640, 360)
        clip = work / f"clip-{w}x{h}.mp4"
        mf.make_clip(clip, width=w, height=h, seconds=seconds)
        source = work / "source.png"
        mf.make_source_image(source)
        prov = ",".join(providers)
        base = {"execution.providers": prov}
        if not result["machine"].get("c2pa"):
            base["mark.enabled"] = "false"
            log("c2pa-python is missing here: renders run with mark.enabled=false")
        log(f"\n== renders of a {w}x{h} {seconds:g} s clip ({prov})")
        renders = []
        for profile in ("low", "moderate", "high"):
            row = render(models, clip, source, work / f"out-{profile}.mp4",
                         {"profile": profile, **base}, a.timeout)
            row["name"] = f"profile {profile}"
            renders.append(row)
            result["renders"] = renders
            save()
            gb = row.get("gpu_bytes")
            target = " (target for low ≤ 3.0 GB)" if profile == "low" else ""
            log(f"  profile {profile}: rc {row['rc']}, {row.get('fps', 0):.2f} fps, peak GPU memory "
                f"{'n/a' if gb is None else f'{gb / 1e9:.2f} GB'}{target}; providers "
                f"{row.get('providers')}" + ("" if row["rc"] == 0 else f"; {row['log'][-1:]}"))
        log("\n== NVDEC / NVENC")
        for name, ov in (("nvdec", {"decode.hwaccel": "cuda"}),
                         ("nvenc", {"encode.codec": "h264_nvenc"}),
                         ("nvdec+nvenc", {"decode.hwaccel": "cuda", "encode.codec": "h264_nvenc"})):
            row = render(models, clip, source, work / f"out-{name}.mp4",
                         {"profile": "moderate", **base, **ov}, a.timeout)
            row["name"] = name
            renders.append(row)
            save()
            fallback = [ln for ln in row["notes"] if any(k in ln.lower() for k in
                                                         ("fall", "nvenc", "nvdec", "hwaccel"))]
            log(f"  {name}: rc {row['rc']}, {row.get('fps', 0):.2f} fps; plan {row.get('plan')}; "
                f"{'; '.join(fallback) or 'no fallback line'}")
        result["renders"] = renders
        save()
        log("\n== segments at once (execution.parallel_segments) and two renders on one GPU")
        result["segments_at_once"] = segments_at_once(
            models, work, source, base, size=(w, h), seconds=8.0 if not a.cpu else 2.0,
            segment_s=2.0 if not a.cpu else 0.5, timeout=a.timeout)
    result["seconds"] = time.perf_counter() - t_begin
    log(f"\ngpu check finished in {result['seconds']:.0f}s; scratch {work}")
    save()
    if not a.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
