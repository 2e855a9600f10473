"""One benchmark run: its scratch folder, clips and model sets, and the measurement of each case
(warm-up, interleaved floor and render runs, the overlap calibration, the realistic bounds)."""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from bench import realistic
from bench.calibrate import calibrate_overlap, swapper_knob, time_swapper
from bench.cases import Case
from bench.clips import Clip
from bench.figures import fmt, log, median
from bench.floor import run_floor
from bench.machine import cores
from bench.measure import Env, WorkerFailed, run_worker
from bench.report import report_case, report_real
from render.standins import write_standins


class Bench:
    """The state the cases share: options, scratch folder, clips, model sets and their
    environments, the warm-ups done and the failures counted."""

    def __init__(self, args: argparse.Namespace, work: Path, clips: dict[str, Clip],
                 worker_env: dict[str, str], base: dict[str, str], *, scan_tmp: list[Path],
                 exclude_tmp: list[Path]) -> None:
        self.args, self.work, self.clips = args, work, clips
        self.worker_env, self.base = worker_env, base
        self.scan_tmp, self.exclude_tmp = scan_tmp, exclude_tmp
        self.patches = ("no-spin",) if args.ort_no_spin else ()
        self.enhance = args.enhance or args.enhancer_gflops > 0
        self.model_dirs: dict[str, Path] = {}
        self.envs: dict[str, Env] = {}
        self.warmed: set[str] = set()
        self.failures = 0

    def model_set(self, name: str, **knobs: Any) -> None:
        d = self.work / "models" / name
        write_standins(d, **knobs)
        self.model_dirs[name] = d
        self.envs[name] = Env(self.work / "env" / name, extra=self.worker_env)

    def real_model_set(self, home: Path) -> None:
        self.model_dirs["real"] = realistic.real_models(home, log)
        self.envs["real"] = Env(self.work / "env" / "real", extra=self.worker_env)

    def overrides_for(self, models: str) -> dict[str, str]:
        ov = dict(self.base, **{"models.dir": str(self.model_dirs[models])})
        if models == "models" and self.enhance:
            ov["enhance.enabled"] = "true"
        return ov

    def warm(self, models: str, ov: dict[str, str] | None = None, clip: Clip | None = None) -> None:
        # each model file (swapper precision, enhancer) is verified and its caches filled once,
        # and each clip's probe is cached once (cache_dir/probe is keyed by the target)
        clip = clip or self.clips.get("720p") or next(iter(self.clips.values()))
        key = "|".join([models, str(clip.path)] + [f"{k}={(ov or {}).get(k, '')}" for k in
                                   ("profile", "swap.precision", "enhance.enabled", "detect.model",
                                    "processors")])
        if key in self.warmed:
            return
        ov = dict(ov or self.overrides_for(models), trim="0-1")   # 1 s fills every cache
        t0 = time.perf_counter()
        run_worker(ov, self.envs[models], self.work / "out" / f"warm-{models}", clip.path, scan_tmp=[],
                   exclude_tmp=[], timeout=self.args.timeout, patches=self.patches)
        self.warmed.add(key)
        log(f"  warm-up of the {models!r} model set (1 s of {clip.spec.name}): {time.perf_counter() - t0:.1f}s")

    def measure(self, case: Case) -> None:
        args, work = self.args, self.work
        clip = self.clips[case.clip]
        case.frame_bytes = clip.spec.width * clip.spec.height * 3
        case.clip_name = clip.spec.name
        t_case = time.perf_counter()
        log(f"\n== {case.name}: {clip.spec.name} ({clip.frames} frames, {clip.faces} faces), "
            f"{case.models!r} model set" + (f" -- {case.note}" if case.note else ""))
        ov = case.overrides or self.overrides_for(case.models)
        try:
            self.warm(case.models, ov, clip)
            for i in range(args.repeat):
                if case.floor:
                    case.floors.append(run_floor(clip, work / "out" / f"{case.name}-floor",
                                                 case.floor_overrides or ov))
                    if args.relay:
                        case.relays.append(run_floor(clip, work / "out" / f"{case.name}-relay",
                                                     case.floor_overrides or ov, relay=True))
                r = run_worker(ov, self.envs[case.models],
                               work / "out" / f"{case.name}-{i}", clip.path, scan_tmp=self.scan_tmp,
                               exclude_tmp=self.exclude_tmp, timeout=args.timeout, patches=self.patches)
                if r["frames"] != clip.frames:
                    raise WorkerFailed(f"rendered {r['frames']} frames, the clip has {clip.frames}")
                case.runs.append(r)
                if case.after_run is not None:
                    case.after_run(case)
        except WorkerFailed as exc:
            case.error = str(exc)
            self.failures += 1
        report_case(case)
        log(f"  ({case.name} took {time.perf_counter() - t_case:.0f}s)")

    def overlap(self, case: Case, ref: Case | None) -> dict[str, Any] | None:
        """The overlap case: a swapper whose cost is about one floor frame, calibrated here unless
        ``--overlap-gflops`` gives it; returns the overlap figures for the targets."""
        args, work, clips = self.args, self.work, self.clips
        overlap = None
        try:
            if ref and ref.floor_fps:
                floor_ms = 1000.0 / ref.floor_fps
            else:
                floor_ms = 1000.0 / run_floor(clips["720p"], work / "out" / "calib-floor",
                                              self.overrides_for("null"))["fps"]
            clip = clips["720p"]
            swaps = (clip.faces if args.select == "many" else clip.face_frames) / clip.frames
            if args.overlap_gflops is not None:
                g = args.overlap_gflops
                d = work / "calib-given"
                write_standins(d, gflops=swapper_knob(g))
                s_wall, s_cpu = time_swapper(d, work / "calib-cache", self.base)
            else:
                log(f"\ncalibrating the overlap swapper to ~{floor_ms / swaps:.1f} ms per call "
                    f"({swaps:.2f} swaps per frame → one floor frame, {floor_ms:.1f} ms, per frame)")
                g, s_wall, s_cpu = calibrate_overlap(work, self.base, floor_ms / swaps,
                                                     min_s=0.3 if args.quick else 0.6)
            log(f"  swapper +{g:.2f} GFLOP: {s_wall:.1f} ms per call alone ({s_cpu:.1f} ms CPU)")
            case.note = (f"overlap-720p: swapper +{g:.2f} GFLOP = {s_wall:.1f} ms per call alone, "
                         f"{s_wall * swaps:.1f} ms per frame ({swaps:.2f} swaps per frame), "
                         f"calibrated to one floor frame ({floor_ms:.1f} ms)")
            self.model_set("overlap", gflops=swapper_knob(g))
            self.measure(case)
            if not case.error and case.runs:
                swaps = case.med(lambda r: r["faces"] / max(r["frames"], 1))
                s_frame = s_wall * swaps
                f_ms = 1000.0 / case.floor_fps
                floor_cpu = case.med(lambda f: f["cpu_s"] / f["frames"] * 1000, case.floors)
                overlap = {"case": case.name, "s_call": s_wall, "swaps_per_frame": swaps,
                           "s_frame": s_frame, "floor_ms": f_ms, "max": max(s_frame, f_ms),
                           "sum": s_frame + f_ms, "measured": case.med(lambda r: 1000 / r["fps"]),
                           "swap_stage_ms": case.stage("swap"),
                           "cpu_bound": max(s_frame, f_ms, (floor_cpu + s_cpu * swaps) / cores())}
                log(f"  overlap: S = {s_wall:.1f} ms × {swaps:.2f} swaps/frame = {s_frame:.1f} ms/frame; "
                    f"floor {f_ms:.1f} ms/frame → expected max() {overlap['max']:.1f}, sum "
                    f"{overlap['sum']:.1f}, measured {overlap['measured']:.1f} ms/frame (swap stage "
                    f"inside the render {fmt(overlap['swap_stage_ms'])} ms/frame); with every stage "
                    f"on these {cores()} CPU cores the floor alone takes {floor_cpu:.1f} CPU-ms/frame, "
                    f"so the best possible is ≈ {overlap['cpu_bound']:.1f} ms/frame")
        except WorkerFailed as exc:
            case.error = str(exc)
            self.failures += 1
            report_case(case)
        return overlap

    def real(self, name: str, real_source: Path) -> Case:
        """A realistic-cost case, each run followed by the models timed alone, and its compute bound."""
        args = self.args
        clip, _ = realistic.case_clip(name, args.real_seconds,
                                      getattr(args, "real_seconds_given", True))
        ov = realistic.case_settings(name)
        ov.update({"execution.providers": args.providers, "progress": "off",
                   "source": str(real_source), "models.dir": str(self.model_dirs["real"])})
        if name.endswith("-enhance"):
            ov["enhance.enabled"] = "true"
        ov.update(kv.split("=", 1) for kv in args.set)
        floor_ov = dict(ov, **{k: realistic.EQUAL_SETTINGS[k] for k in
                               ("encode.codec", "encode.preset", "encode.crf")})
        case = Case(name, clip, "real", floor=True, overrides=ov, floor_overrides=floor_ov,
                    note=f"{name}: " + " ".join(f"{k}={v}" for k, v in ov.items()
                                                if k not in ("source", "models.dir", "progress"))
                    + (f" ({realistic.face_models.CASES[name].why})"
                       if name in realistic.face_models.CASES else ""))
        alone_ov = dict(ov, cache_dir=str(self.envs["real"].cache))

        def after(c: Case, alone_ov: dict[str, str] = alone_ov) -> None:
            try:
                c.alone_runs.append(realistic.time_alone(alone_ov, self.clips[c.clip].path, cores()))
            except Exception as exc:  # noqa: BLE001 - the bound falls back to one timing
                log(f"  timing the models alone failed: {exc}")
        case.after_run = after
        self.measure(case)
        if case.error or not case.runs:
            return case
        try:
            threads_used = int(case.med(lambda r: r.get("ort_threads") or 0) or 0)
            if case.alone_runs:
                case.alone[str(cores())] = {k: median([a.get(k) for a in case.alone_runs]) or 0.0
                                            for k in case.alone_runs[0]}
            for t in sorted({cores(), threads_used} - {0} - {int(k) for k in case.alone}):
                case.alone[str(t)] = realistic.time_alone(alone_ov, self.clips[case.clip].path, t)
            floor_ms = 1000.0 / case.floor_fps
            case.bound = realistic.bound(case.alone[str(cores())], case.calls_per_frame(), floor_ms)
            report_real(case, threads_used)
        except Exception as exc:  # noqa: BLE001 - a failed side measurement must not lose the case
            log(f"  compute bound of {name} failed: {exc}")
        return case

    def model_costs(self, real_source: Path) -> list[dict[str, Any]]:
        """Each realistic stand-in's ms per call alone with all cores, on the first face of the
        720p photo clip's middle frame: FaceFusion's settings (inswapper fp32, ArcFace) and
        profiles moderate (fp16 swapper, xseg, 2dfan4) and high (hyperswap, bisenet, GFPGAN)."""
        clip = self.clips["photo-720p"]
        rows: list[dict[str, Any]] = []
        seen: set[str] = set()
        for settings in (realistic.EQUAL_SETTINGS, *realistic.PROFILE_SETTINGS.values()):
            ov = dict(settings, **{"execution.providers": self.args.providers, "progress": "off",
                                   "source": str(real_source), "models.dir": str(self.model_dirs["real"]),
                                   "cache_dir": str(self.envs["real"].cache)})
            alone = realistic.time_alone(ov, clip.path, cores(), calls=5, models=True)
            for session, model in alone["models"].items():
                if model in seen:
                    continue
                seen.add(model)
                ms = alone["ms"].get(session)
                rows.append({"model": model, "session": session, "ms": ms,
                             "gflops": realistic.REAL_GFLOPS.get(model)})
                log(f"  {model} ({session}): {fmt(ms, '.1f')} ms per call alone")
        return rows

    def profile(self, cases: dict[str, Case], out: Path) -> None:
        """``--pyinstrument``: one more render per case, profiled (its figures are not comparable)."""
        out.mkdir(parents=True, exist_ok=True)
        for c in cases.values():
            if c.error or c.name == "memory-60s":
                continue
            path = out.resolve() / f"{c.name}.txt"
            try:
                run_worker(self.overrides_for(c.models), self.envs[c.models], self.work / "out" / f"{c.name}-prof",
                           self.clips[c.clip].path, scan_tmp=[], exclude_tmp=[], timeout=self.args.timeout,
                           pyinstrument=path, patches=self.patches)
                log(f"pyinstrument profile of {c.name}: {path}")
            except WorkerFailed as exc:
                log(f"pyinstrument run of {c.name} failed: {exc}")

