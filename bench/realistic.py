"""The realistic-cost cases of ``make bench``: stand-ins that cost what the production models cost.

The production files cannot be downloaded here, so the stand-ins of ``render.standins`` keep each
real model's I/O contract and get its per-call cost and weight size: the cost counted layer by
layer from its published architecture, the size its pin's (``bench/model_costs.py``, whose
docstring gives the sources; ``python -m bench.model_costs`` prints the table):

================== ============ ============= =========================================
model              GFLOP / call weights (MiB) note
================== ============ ============= =========================================
inswapper_128      349          530 (265 fp16) one call per swapped face
arcface_w600k_r50  12.6         166           source/reference once, then once per track
gfpgan_1.4         396          325           one call per face when enhance.enabled
hyperswap_1a_256   349          384           assumed inswapper's; n² calls with pixel boost
xseg_1             27.6         67            one call per face (``mask.occluder``)
bisenet_resnet_34  46.9         89            one call per face (``mask.parser``)
2dfan4             50.5         93            one call per face (``landmark.model``)
real_esrgan_x2     588          64 (counted)  one call per 256-px tile: 24 a 720p frame
modnet             31.1         25 (counted)  one call per frame (``processors=background``)
yunet              real                       ``shared/models/face_detection_yunet.onnx``
================== ============ ============= =========================================

The face processors' models (the deep swapper's DFM, LivePortrait's, fran and FairFace) and
their cases: ``bench/face_models.py``.

Realistic figures dated before 2026-12-06 used guessed costs instead (bench/RESULTS.md).

The extra compute is a chain of MatMuls over distinct weight matrices that sum to the file size,
so load time and the memory traffic of every call are of the right order (``_dummy_zero``).
The clip is the astronaut portrait (a real face the real YuNet finds) drifting over a background.

Yardsticks, measured in the same bench run (issue 13):

* the ffmpeg **floor**: decode → raw pipe → libx264 veryfast crf 10 → audio copy;
* the **compute bound** of a case: 1 / (Σ per frame of each model call's time alone in ONNX
  Runtime with all cores + the floor's time per frame). Model times alone are measured here with the
  renderer's own model layer (``render.faces``) on a frame of the clip, timing ONNX Runtime only
  (``LazySession.run``), exactly like the in-render figures the worker reports.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from bench import face_models, model_costs

ROOT = Path(__file__).resolve().parents[1]
YUNET = ROOT.parent / "shared" / "models" / "face_detection_yunet.onnx"

#: the realistic set's entries (``render.standins.FILES``) that get a production model's cost
REAL_MODELS = ("arcface_w600k_r50", "inswapper_128", "inswapper_128_fp16", "gfpgan_1.4",
               "hyperswap_1a_256", "xseg_1", "bisenet_resnet_34", "2dfan4")
#: per-call cost (GFLOP) and weight size (MiB) of the production models
REAL_GFLOPS = {name: round(model_costs.gflops(name), 1) for name in REAL_MODELS}
REAL_WEIGHTS_MB = {name: round(model_costs.weights_mib(name), 1) for name in REAL_MODELS}
#: the frame enhancer of the 720p → 1440p case: its stand-in's manifest params (the production
#: entry's), cost per tile and weights (counted: the file is pinned at its first fetch)
FRAME_MODEL = "real_esrgan_x2"
FRAME_STANDIN = {"scale": 2, "tile": 256, "pad": 16, "context": 8,
                 "gflops": round(model_costs.gflops(FRAME_MODEL), 1),
                 "weights_mb": round(model_costs.counted_mib(FRAME_MODEL), 1)}
#: the frame case's chain over FaceFusion's settings: the swap, then the x2 enhancer
FRAME_SETTINGS = {"processors": "swap,frame_enhance", "frame_enhance.model": FRAME_MODEL}
#: the background remover of the 720p case: MODNet's input side, normalisation, counted cost and
#: weights; its chain: the remover, then the swap (the output is an MP4: laid over the fill)
MATTING_MODEL = "modnet"
MATTING_STANDIN = {"size": 512, "mean": (0.5, 0.5, 0.5), "std": (0.5, 0.5, 0.5),
                   "gflops": round(model_costs.gflops(MATTING_MODEL), 1),
                   "weights_mb": round(model_costs.counted_mib(MATTING_MODEL), 1)}
MATTING_SETTINGS = {"processors": "background,swap", "background.model": MATTING_MODEL}

#: the settings of the side-by-side comparison with FaceFusion 3.8.1 (issue 13): reference
#: selection, box mask, yunet at 640, fp32 swapper, the floor's encoder settings, CPU provider
EQUAL_SETTINGS = {"profile": "moderate", "detect.model": "yunet", "detect.size": "640",
                  "select.mode": "reference", "mask.type": "box", "swap.precision": "fp32",
                  "encode.codec": "libx264", "encode.preset": "veryfast", "encode.crf": "10",
                  # FaceFusion's defaults have none of profile moderate's quality tools
                  "mask.occluder": "", "landmark.model": "", "swap.color_match": "off",
                  "stabilize.enabled": "false"}

#: each profile's own settings; the detector is yunet because no real SCRFD is available here
PROFILE_SETTINGS = {p: {"profile": p, "detect.model": "yunet"} for p in ("low", "moderate", "high")}


def case_settings(name: str) -> dict[str, str]:
    """A realistic case's settings: ``real-720p-low`` (…-moderate, …-high) its profile's own,
    ``real-720p-frame-x2`` FaceFusion's with the x2 frame enhancer after the swap,
    ``real-720p-background`` with the background remover before it, the face processors' cases
    (``face_models.CASES``) with theirs, the others FaceFusion's (``EQUAL_SETTINGS``)."""
    if name in face_models.CASES:
        return {**EQUAL_SETTINGS, **face_models.CASES[name].settings}
    if name.endswith("-frame-x2"):
        return {**EQUAL_SETTINGS, **FRAME_SETTINGS}
    if name.endswith("-background"):
        return {**EQUAL_SETTINGS, **MATTING_SETTINGS}
    return dict(PROFILE_SETTINGS.get(name.rsplit("-", 1)[-1], EQUAL_SETTINGS))


#: the clip lengths (seconds) of the cases that default to a few frames: the x2 frame enhancer
#: (14 TFLOP a frame: 2 frames) and the face processors' heavy ones (``face_models.CASES``)
CASE_SECONDS = {"real-720p-frame-x2": 0.08,
                **{k: c.seconds for k, c in face_models.CASES.items() if c.seconds}}


def case_clip(name: str, seconds: float, given: bool) -> tuple[str, float]:
    """A realistic case's clip: its key among the bench's clips and its length: ``seconds``
    (``--real-seconds``) when ``given``, else the case's own default (:data:`CASE_SECONDS`)."""
    res = "1080p" if "1080p" in name else "720p"
    own = seconds if given else CASE_SECONDS.get(name, seconds)
    return (f"photo-{res}" if own == seconds else f"photo-{res}-{own:g}s"), own


def yunet_path() -> Path | None:
    return YUNET if YUNET.is_file() else None


def real_models(home: Path, log) -> Path:
    """The realistic stand-in set, written once into ``home`` (about 3.2 GB, a minute) and
    reused while the stand-in models' source and the costs are unchanged."""
    import render.standins as standins
    from render.standins.frame_enhancers import write_frame_enhancers
    from render.standins.matting import write_matting

    src = b"".join(p.read_bytes() for p in sorted(Path(standins.__file__).parent.glob("*.py"))
                   if p.name not in ("media.py", "readback.py"))
    key = hashlib.sha256(src + repr((REAL_GFLOPS, REAL_WEIGHTS_MB, FRAME_STANDIN,
                                     MATTING_STANDIN, face_models.key())).encode()
                         + YUNET.read_bytes()).hexdigest()[:12]
    d = home / f"models-real-{key}"
    if (d / "manifest.yaml").is_file():
        log(f"  realistic models: cached {d}")
        return d
    for old in home.glob("models-real-*"):
        shutil.rmtree(old, ignore_errors=True)
    tmp = home / f"models-real-{key}.tmp-{os.getpid()}"
    t0 = time.perf_counter()
    standins.write_standins(tmp, gflops=REAL_GFLOPS, weights_mb=REAL_WEIGHTS_MB, yunet=YUNET)
    write_frame_enhancers(tmp, {FRAME_MODEL: FRAME_STANDIN})
    write_matting(tmp, MATTING_MODEL, **MATTING_STANDIN)
    face_models.write_face_models(tmp)
    os.replace(tmp, d)
    log(f"  realistic models: written in {time.perf_counter() - t0:.0f}s ({d})")
    return d


def real_clip(clips_dir: Path, width: int, height: int, seconds: float, fresh: bool, log) -> tuple[Path, int]:
    from render.standins import media as mf

    src = Path(mf.__file__).read_bytes()
    key = hashlib.sha256(src).hexdigest()[:10]
    path = clips_dir / f"photo-{width}x{height}-{seconds:g}s-{key}.mp4"
    if path.is_file() and not fresh:
        from render.media.probe import probe

        return path, int(probe(path).frame_count or 0) or int(round(seconds * 25))
    clips_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + f".tmp-{os.getpid()}.mp4")
    n = mf.make_photo_clip(tmp, width=width, height=height, seconds=seconds)
    os.replace(tmp, path)
    log(f"  clip photo {width}x{height} {seconds:g}s: generated {path.name} ({n} frames)")
    return path, n


def source_image(path: Path) -> Path:
    """The source face: the astronaut portrait itself (so the reference, which defaults to the
    source, matches the face in the clip)."""
    import cv2

    from render.standins import media as mf

    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(path), mf.photo_face())
    return path


#: a model call alone that takes longer than this (s, its first call after the warm-up) is timed
#: HEAVY_CALLS times: the x2 frame enhancer's 26 s, a face editor's 10 s
HEAVY_S, HEAVY_CALLS = 5.0, 3


def time_alone(overrides: dict[str, str], clip: Path, threads: int, *, calls: int = 9,
               models: bool = False) -> dict[str, Any]:
    """:func:`time_alone_here` in a fresh process: nothing else runs in it, and what it loads goes
    with it (measured in the bench's own process, each measurement left about 1.3 GB behind,
    and a full bench's later cases ran with the page cache squeezed)."""
    import json
    import subprocess
    import sys

    spec = json.dumps({"overrides": overrides, "clip": str(clip), "threads": threads, "calls": calls,
                       "models": models})
    proc = subprocess.run([sys.executable, "-m", "bench.realistic", spec], cwd=ROOT,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"timing the models alone failed (exit {proc.returncode}): {last}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def time_alone_here(overrides: dict[str, str], clip: Path, threads: int, *, calls: int = 9,
                    models: bool = False) -> dict[str, Any]:
    """ms per model call of each model of ``overrides`` run alone (nothing else running) with
    ``threads`` intra-op threads, on the first face of the middle frame of ``clip``: ONNX
    Runtime's own time per call, median of ``calls`` after one warm-up. Per *call*, like the
    render's counts (``LoadedModels.named_sessions``): a pixel-boosted swap of one face makes
    n² calls, and the bound multiplies by the calls the render made. A step's helper models (a
    face editor's five, fran's FairFace: ``<step>-<need>``) are timed per call within its calls.
    A call that takes over :data:`HEAVY_S` is timed ``HEAVY_CALLS`` times, not ``calls``.
    ``models``: return ``{"ms": those figures, "models": each session's manifest entry}``."""
    import numpy as np

    from render.models.load import load_models
    from render.config import load_config
    from render.faces import align
    from render.processors.base import Source

    cfg = load_config({**overrides, "execution.threads": str(threads)}, env={})
    loaded = load_models(cfg)
    frame, number = _middle_frame(clip)
    faces = loaded.detector.detect(frame)
    if not faces:
        raise RuntimeError(f"the detector finds no face in the middle frame of {clip}")
    face = faces[0]
    source = Source(np.ones(512, np.float32), lambda: (frame, face))
    sessions = loaded.named_sessions()
    name_of = {id(lazy): name for name, lazy in sessions.items()}
    work = {"detect": lambda: loaded.detector.detect(frame),
            "embed": lambda: loaded.embedder.embed(frame, face)}
    points = loaded.landmarks.face(frame, face).landmarks if loaded.landmarks is not None else None
    for proc in loaded.face_steps:
        work[proc.name] = face_models.face_call(
            proc, source, frame, face, identity=lambda: loaded.embedder.embed(frame, face),
            landmarks=points, clip=clip, number=number)
    if loaded.face_steps:                   # the masks on the first face step's crop
        first = loaded.face_steps[0]
        m = align.estimate(face.kps, first.template, first.size)
        crop = align.warp(frame, m, first.size)[None]
        for mask in loaded.masks:
            work[name_of[id(mask.lazy)]] = lambda mask=mask, crop=crop, m=m: mask(crop, [face], [m])
    if loaded.landmarks is not None:
        for lm in loaded.landmarks.models:
            work[name_of[id(lm.lazy)]] = lambda: loaded.landmarks.face(frame, face)
    for proc in loaded.processors:          # a frame enhancer: one call of its tiles
        if hasattr(proc, "enhance_tiles"):
            tiling, per_call = proc.tiling()
            tiles = np.stack([frame[:tiling.tile, :tiling.tile]] * per_call)
            work[proc.name] = lambda proc=proc, tiles=tiles: proc.enhance_tiles(tiles)
        elif getattr(proc, "matte", ""):    # a background remover: one frame's matte
            work[proc.name] = lambda proc=proc: proc.matte_of(frame)
    helpers = {p.name: [f"{p.name}-{k}" for k in p.model.needs]
               for p in loaded.processors if p.model is not None}
    out: dict[str, float] = {}
    for name, fn in work.items():
        lazy = sessions[name]
        own = {h: sessions[h] for h in helpers.get(name, ()) if h in sessions and h not in work}
        fn()                                   # warm-up: session creation, first-call allocations
        walls, runs, helper_runs = [], [], {h: [] for h in own}
        heavy = False
        while len(runs) < (min(calls, HEAVY_CALLS) if heavy else calls):
            for s in (lazy, *own.values()):
                s.run_seconds, s.calls = 0.0, 0
            t0 = time.perf_counter()
            fn()
            n = max(lazy.calls, 1)
            heavy = heavy or time.perf_counter() - t0 > HEAVY_S
            walls.append((time.perf_counter() - t0) / n)
            runs.append(lazy.run_seconds / n)
            for h, s in own.items():
                if s.calls:
                    helper_runs[h].append(s.run_seconds / s.calls)
        out[name] = statistics.median(runs) * 1000.0                 # ONNX Runtime's own time
        out[f"{name}_with_pre_post"] = statistics.median(walls) * 1000.0
        out.update({h: statistics.median(v) * 1000.0 for h, v in helper_runs.items() if v})
    if models:
        return {"ms": out, "models": {k: e.name for k, e in loaded.named_entries().items()}}
    return out


def _middle_frame(clip: Path):
    import subprocess

    import numpy as np

    from render.media.probe import probe

    info = probe(clip)
    t = (info.duration or 1.0) / 2
    if info.frame_count and info.frame_count < 2:   # a seek into a one-frame clip finds none
        t = 0.0                                      # its only frame
    raw = subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-ss", f"{t:.3f}", "-i", str(clip),
                          "-frames:v", "1", "-f", "rawvideo", "-pix_fmt", "bgr24", "pipe:1"],
                         capture_output=True, check=True).stdout
    frame = np.frombuffer(raw, np.uint8).reshape(info.height, info.width, 3).copy()
    return frame, int(t * float(info.fps or 25))


def bound(alone_ms: dict[str, float], calls_per_frame: dict[str, float], floor_ms: float
          ) -> dict[str, Any]:
    """The compute bound of one case: models alone × calls per frame + the floor, per frame."""
    models_ms = sum(alone_ms.get(k, 0.0) * n for k, n in calls_per_frame.items())
    total = models_ms + floor_ms
    return {"models_ms": models_ms, "floor_ms": floor_ms, "ms": total, "fps": 1000.0 / total}


if __name__ == "__main__":        # time_alone's child: one JSON spec in, one JSON line out
    import json
    import sys

    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print("usage: python -m bench.realistic SPEC\n\ntime_alone's child process: one JSON "
              "spec in, one JSON line out (the realistic cases are run by python -m bench.run)")
        sys.exit(0 if sys.argv[1:] in (["-h"], ["--help"]) else 2)
    _spec = json.loads(sys.argv[1])
    print(json.dumps(time_alone_here(_spec["overrides"], Path(_spec["clip"]), _spec["threads"],
                                     calls=_spec["calls"], models=_spec.get("models", False))))
