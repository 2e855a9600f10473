"""Benchmark of the renderer against the ffmpeg floor (``make bench`` = ``python -m bench.run``).

What it does, with nothing but ffmpeg, the repository and its test fixtures:

* generates its own clips with ``render.standins.media.make_clip`` (faces the stand-in detector
  finds, audio on): 720p and 1080p of 10 s, and a 60 s 720p one for the memory case. Clips are
  cached in ``--clips-dir`` (keyed by their parameters and the generator's source), so a second run
  does not pay for them again;
* writes stand-in models with ``render.standins.write_standins``: *null* models (swapper and
  enhancer return their input), models with the compute knobs of the command line
  (``--swapper-gflops`` ...), and an *overlap* swapper whose cost is calibrated on this machine to
  about one ffmpeg-floor frame time;
* runs every measured render in a fresh child process (``bench/worker.py``) with HOME, TMPDIR and
  ``cache_dir`` pointed at fresh folders, after one warm-up render that fills the caches, and
  measures it from outside: wall time, CPU, the peak RSS of the process tree (worker + ffmpeg
  children), the time to first frame and every byte written outside the output;
* measures, in the same run and interleaved with the renders, the ffmpeg floor: the target decoded
  to a raw pipe and encoded again by two ffmpeg processes built with
  ``render.media.video_args`` (``decode_args``/``encode_args``, same encoder settings, same audio)
  -- what the renderer would cost with free inference;
* prints per-case figures, the targets and a markdown summary for the README.

The targets are reported as figures, never asserted; the exit status is non-zero only when a
render fails or produces the wrong number of frames (``--quick`` is the smoke check).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import realistic, stability
from bench.calibrate import swapper_knob
from bench.cases import ALL_CASES, REAL_CASES, Case
from bench.clips import Clip, ClipSpec, make_clip
from bench.figures import log
from bench.machine import cores, cpu_model, ffmpeg_version_text, ort_version
from bench.report import model_costs_table, summary
from bench.session import Bench
from bench.targets import targets
from render.standins import media


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="smoke run: short clips (2 s; 4 s for memory), --repeat 1")
    p.add_argument("--repeat", type=int, default=None, help="measured runs per case (default 3)")
    p.add_argument("--profile", default="low", help="render profile (default low)")
    p.add_argument("--providers", default="cpu", help="execution.providers (default cpu)")
    p.add_argument("--select", default="many", help="select.mode (default many: every face)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="extra config override for every render, e.g. execution.threads=1")
    p.add_argument("--swapper-gflops", type=float, default=0.0,
                   help="extra GFLOP per swapper call in the 'models' case")
    p.add_argument("--enhancer-gflops", type=float, default=0.0,
                   help="extra GFLOP per enhancer call in the 'models' case (> 0 enables the enhancer)")
    p.add_argument("--detector-gflops", type=float, default=0.0,
                   help="extra GFLOP per detector call in the 'models' case")
    p.add_argument("--embedder-gflops", type=float, default=0.0,
                   help="extra GFLOP per embedder call in the 'models' case")
    p.add_argument("--enhance", action="store_true", help="enable the enhancer in the 'models' case")
    p.add_argument("--null", action="store_true",
                   help="'models' case with null swapper/enhancer (return their input)")
    p.add_argument("--overlap-gflops", type=float, default=None,
                   help="swapper GFLOP of the overlap case (default: calibrated so that one swap "
                        "costs about one floor frame time)")
    p.add_argument("--cases", default=",".join(ALL_CASES),
                   help="comma separated subset of the cases (default: all)")
    p.add_argument("--seconds", type=float, default=None, help="length of the 720p/1080p clips (10)")
    p.add_argument("--memory-seconds", type=float, default=None, help="length of the memory clip (60)")
    p.add_argument("--real-seconds", type=float, default=None,
                   help="length of the realistic-cost clips (2; 1 with --quick; the heaviest "
                        "cases default to a few frames: 0.08 s for real-720p-frame-x2, 0.16 s "
                        "for real-720p-face-editor and real-720p-age)")
    p.add_argument("--ort-no-spin", action="store_true",
                   help="what-if experiment: the worker patches SessionFactory.session_options to "
                        "turn ONNX Runtime's thread spin-waiting off (not what render ships)")
    p.add_argument("--worker-env", action="append", default=[], metavar="KEY=VALUE",
                   help="extra environment variable for the render processes, e.g. "
                        "ORT_DISABLE_TELEMETRY=1")
    p.add_argument("--relay", action="store_true",
                   help="also measure a floor with a Python loop copying the pipe")
    p.add_argument("--pyinstrument", type=Path, default=None, metavar="DIR",
                   help="after measuring, profile one render per case with pyinstrument into DIR")
    p.add_argument("--workdir", type=Path, default=None,
                   help="scratch folder (default: a fresh folder under ~/.cache/render-bench)")
    p.add_argument("--clips-dir", type=Path, default=None,
                   help="where generated clips are cached (default ~/.cache/render-bench/clips)")
    p.add_argument("--fresh-clips", action="store_true", help="regenerate cached clips")
    p.add_argument("--keep", action="store_true", help="keep the scratch folder")
    p.add_argument("--json", type=Path, default=None, help="write every raw figure to this file")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds allowed per render")
    a = p.parse_args(argv)
    if a.repeat is None:
        a.repeat = 1 if a.quick else 3
    if a.seconds is None:
        a.seconds = 2.0 if a.quick else 10.0
    if a.memory_seconds is None:
        a.memory_seconds = 4.0 if a.quick else 60.0
    a.real_seconds_given = a.real_seconds is not None
    if a.real_seconds is None:
        a.real_seconds = 1.0 if a.quick else 2.0
    a.cases = [c.strip() for c in a.cases.split(",") if c.strip()]
    return a


def bench_home() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "render-bench"

def make_clips(args: argparse.Namespace, clips_dir: Path) -> dict[str, Clip]:
    """The clips the chosen cases need, generated or found in ``clips_dir``."""
    s, ms = args.seconds, args.memory_seconds
    specs = {"720p": ClipSpec(f"720p {s:g}s", 1280, 720, s),
             "1080p": ClipSpec(f"1080p {s:g}s", 1920, 1080, s),
             "720p-long": ClipSpec(f"720p {ms:g}s", 1280, 720, ms)}
    need = {"null-720p": ["720p"], "null-1080p": ["1080p"], "models-720p": ["720p"],
            "overlap-720p": ["720p"], "memory-60s": ["720p-long", "720p"]}
    clips: dict[str, Clip] = {}
    for case in args.cases:
        for k in need.get(case, []):
            if k not in clips:
                clips[k] = make_clip(specs[k], clips_dir, args.fresh_clips)
    for case in args.cases:
        if case in REAL_CASES or case == "model-costs":
            k, rs = realistic.case_clip(case, args.real_seconds, args.real_seconds_given)
            if k not in clips:
                big = "1080p" in k
                spec = ClipSpec(f"photo-{'1080p' if big else '720p'} {rs:g}s",
                                1920 if big else 1280, 1080 if big else 720, rs)
                path, n = realistic.real_clip(clips_dir, spec.width, spec.height, rs,
                                              args.fresh_clips, log)
                clips[k] = Clip(spec, path, n, n, n)
    return clips


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    t_begin = time.perf_counter()
    import onnxruntime  # noqa: F401 - fail early with a clear error when missing

    home = bench_home()
    clips_dir = args.clips_dir or home / "clips"
    if args.workdir:
        work = args.workdir
        work.mkdir(parents=True, exist_ok=True)
    else:
        home.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="run-", dir=home))
    system_tmp = Path(tempfile.gettempdir())
    exclude_tmp = [p for p in (work, clips_dir, home) if str(p).startswith(str(system_tmp))]

    info = {"date": datetime.date.today().isoformat(), "cpu": cpu_model(), "cores": cores(),
            "ffmpeg": ffmpeg_version_text(), "ort": ort_version(),
            "python": platform.python_version()}
    log(f"render bench {info['date']}: {info['cpu']}, {info['cores']} cores, ffmpeg {info['ffmpeg']}, "
        f"onnxruntime {info['ort']}, Python {info['python']}")
    log(f"profile {args.profile}, providers {args.providers}, select.mode {args.select}, "
        f"repeat {args.repeat}{', quick' if args.quick else ''}; scratch {work}")
    if args.set or args.worker_env or args.ort_no_spin:
        log(f"experiment: {' '.join(args.set + args.worker_env)}"
            f"{' ORT spinning off (patched)' if args.ort_no_spin else ''}")

    unknown = [c for c in args.cases if c not in ALL_CASES]
    if unknown:
        log(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(ALL_CASES)}")
        return 2
    needs_real = REAL_CASES + ("model-costs",)
    if any(c in needs_real for c in args.cases) and realistic.yunet_path() is None:
        log(f"the realistic cases need the real YuNet detector at {realistic.YUNET}; skipped")
        args.cases = [c for c in args.cases if c not in needs_real]

    log("clips:")
    clips = make_clips(args, clips_dir)
    source = work / "source.jpg"
    media.make_source_image(source)

    worker_env = {}
    for kv in args.worker_env:
        k, sep, v = kv.partition("=")
        if not sep:
            log(f"--worker-env {kv}: expected KEY=VALUE")
            return 2
        worker_env[k] = v
    base = {"profile": args.profile, "execution.providers": args.providers, "progress": "off",
            "select.mode": args.select, "source": str(source)}
    bench = Bench(args, work, clips, worker_env, base,
                  scan_tmp=[system_tmp] if system_tmp.is_dir() else [], exclude_tmp=exclude_tmp)

    # -- model sets ---------------------------------------------------------------------------
    bench.model_set("null", null=True)
    if any(c in needs_real for c in args.cases):
        bench.real_model_set(home)
        real_source = realistic.source_image(work / "photo-source.png")
    bench.model_set("models", null=args.null, gflops={
        "scrfd_2.5g": args.detector_gflops, "arcface_w600k_r50": args.embedder_gflops,
        **swapper_knob(args.swapper_gflops), "gfpgan_1.4": args.enhancer_gflops})
    for kv in args.set:
        k, sep, v = kv.partition("=")
        if not sep:
            log(f"--set {kv}: expected KEY=VALUE")
            return 2
        base[k.strip()] = v

    # -- cases --------------------------------------------------------------------------------
    cases: dict[str, Case] = {}
    overlap: dict[str, Any] | None = None
    if "null-720p" in args.cases:
        cases["null-720p"] = Case("null-720p", "720p", "null", floor=True)
        bench.measure(cases["null-720p"])
    if "null-1080p" in args.cases:
        cases["null-1080p"] = Case("null-1080p", "1080p", "null", floor=True)
        bench.measure(cases["null-1080p"])
    if "models-720p" in args.cases:
        knobs = (f"swapper {args.swapper_gflops:g}, enhancer {args.enhancer_gflops:g}"
                 f"{' (on)' if bench.enhance else ' (off)'}, detector {args.detector_gflops:g}, "
                 f"embedder {args.embedder_gflops:g} GFLOP{', null' if args.null else ''}")
        cases["models-720p"] = Case("models-720p", "720p", "models", floor=False, note=f"models-720p: {knobs}")
        bench.measure(cases["models-720p"])
    if "overlap-720p" in args.cases:
        case = Case("overlap-720p", "720p", "overlap", floor=True)
        cases[case.name] = case
        overlap = bench.overlap(case, cases.get("null-720p"))
    for name in REAL_CASES:
        if name in args.cases:
            cases[name] = bench.real(name, real_source)
    if "memory-60s" in args.cases:
        case = Case("memory-60s", "720p-long", "null", floor=False,
                    note="memory-60s uses null models (the 60 s clip with real compute would not fit "
                         "the time budget); compare with null-720p")
        cases[case.name] = case
        bench.measure(case)

    costs: list[dict[str, Any]] | None = None
    if "model-costs" in args.cases:   # issue 29: each model's cost per call at its real cost
        log("\n== model-costs: each realistic stand-in alone, all cores, ms per call")
        costs = bench.model_costs(real_source)

    stable: dict[str, Any] | None = None
    if "stability" in args.cases:     # issue 30: how still the swapped face holds (bench/stability.py)
        log("\n== stability")
        stable = stability.measure()
        log(stability.report(stable) if stable is not None else
            f"  skipped: the real YuNet detector is not at {realistic.YUNET}")

    if args.pyinstrument:
        bench.profile(cases, args.pyinstrument)

    # -- summary ------------------------------------------------------------------------------
    log("\n== targets")
    for t in targets(cases, overlap):
        log(f"  {t[0]}: {t[1]} -- met: {t[2].strip('*')}")
    log("\n== summary (markdown)\n")
    log(summary(cases, args, info, overlap))
    if costs:
        log("\nModel costs (`model-costs`, realistic stand-ins alone, all cores):\n")
        log(model_costs_table(costs))
    log(f"\nbench finished in {time.perf_counter() - t_begin:.0f}s"
        + (f"; {bench.failures} case(s) FAILED" if bench.failures else ""))

    if args.json:
        def strip(c: Case) -> dict:
            return {"name": c.name, "clip": c.clip, "models": c.models, "note": c.note,
                    "error": c.error, "runs": c.runs, "floors": c.floors, "relays": c.relays}
        args.json.write_text(json.dumps({"info": info, "args": {k: str(v) for k, v in vars(args).items()},
                                         "overlap": overlap, "stability": stable,
                                         "model_costs": costs,
                                         "cases": [strip(c) for c in cases.values()]}, indent=1))
    if not args.keep and not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if bench.failures else 0
