"""The benchmark's printed figures: per case, for the realistic cases, and the markdown summary."""
from __future__ import annotations

import argparse
from typing import Any

from bench.cases import MODEL_STAGES, REAL_CASES, STAGES, Case
from bench.figures import fmt, log, median
from bench.machine import cores
from bench.targets import targets


def stage_line(c: Case) -> str:
    return "  ".join(f"{s} {fmt(c.stage(s), '.1f')}" for s in STAGES)


def report_case(c: Case) -> None:
    if c.error:
        log(f"  FAILED: {c.error}")
        return
    n = len(c.runs)
    log(f"  fps {fmt(c.fps, '.2f')} (runs: {', '.join(fmt(r['fps'], '.2f') for r in c.runs)}); "
        f"wall {fmt(c.med(lambda r: 1000 / r['fps']), '.1f')} ms/frame; "
        f"CPU {fmt(c.med(lambda r: r['cpu_s'] / r['wall_s'] / cores() * 100), '.0f')}% of {cores()} cores, "
        f"{fmt(c.med(lambda r: r['cpu_s'] / r['frames'] * 1000), '.1f')} CPU-ms/frame (worker "
        f"{fmt(c.med(lambda r: (r['self']['utime'] + r['self']['stime']) / r['frames'] * 1000), '.1f')}); "
        f"other processes kept {fmt(c.med(lambda r: r.get('other_cores')), '.2f')} cores busy")
    if c.floors:
        log(f"  ffmpeg floor fps {fmt(c.floor_fps, '.2f')} (runs: "
            f"{', '.join(fmt(f['fps'], '.2f') for f in c.floors)}); render/floor "
            f"{fmt(c.ratio, '.2f')}; floor CPU {fmt(c.med(lambda f: f['cpu_s'] / f['seconds'] / cores() * 100, c.floors), '.0f')}%, "
            f"{fmt(c.med(lambda f: f['cpu_s'] / f['frames'] * 1000, c.floors), '.1f')} CPU-ms/frame; "
            f"other processes kept {fmt(c.med(lambda f: f.get('other_cores'), c.floors), '.2f')} cores busy")
    if c.segment_share is not None:
        o = lambda k: fmt(c.med(lambda r: r["overhead_s"][k]), ".2f")   # noqa: E731
        log(f"  segments' own cost: commit {o('commit')} s + join/mux {o('assemble')} s + verify "
            f"{o('verify')} s = {c.segment_share * 100:.1f} % of render() (marking {o('mark')} s, "
            f"apart)")
    if c.relays:
        log(f"  python-relay floor fps {fmt(c.med(lambda f: f['fps'], c.relays), '.2f')}")
    log(f"  ms/frame: {stage_line(c)}  (decode/encode overlap inference: reader/writer threads)")
    log(f"  peak RSS of the tree {fmt(c.rss_mib, '.0f')} MiB = worker "
        f"{fmt(c.med(lambda r: r['worker_peak_kb'] / 1024), '.0f')} + decoder "
        f"{fmt(c.med(lambda r: r['decoder_peak_kb'] / 1024), '.0f')} + encoder "
        f"{fmt(c.med(lambda r: r['encoder_peak_kb'] / 1024), '.0f')} MiB "
        f"(sampled concurrent sum {fmt(c.med(lambda r: r['tree_sampled_peak_kb'] / 1024), '.0f')} MiB"
        + (f"; floor ffmpegs {fmt(c.med(lambda f: (f['decoder_peak_kb'] + f['encoder_peak_kb']) / 1024, c.floors), '.0f')} MiB"
           if c.floors else "") + ")")
    log(f"  time to first frame {fmt(c.ttff, '.2f')} s after Renderer() (construct "
        f"{fmt(c.med(lambda r: r['construct_s']), '.2f')} s); "
        f"{fmt(c.med(lambda r: r['first_frame_from_spawn_s']), '.2f')} s from process start "
        f"(interpreter + imports {fmt(c.med(lambda r: r['startup_s']), '.2f')} s)")
    files = {p for r in c.runs for p, _ in r["written_files"]}
    log(f"  bytes written outside the output: {c.written} (max of {n} runs)"
        + (f": {', '.join(sorted(files)[:5])}" if files else "")
        + f"; /proc io write_bytes - output (upper bound incl. ffmpeg children; the mp4 "
        f"+faststart rewrite can count the output twice): "
        f"{fmt(max((r['io_write_bound'] or 0) for r in c.runs), '.0f')} max (output "
        f"{fmt(c.med(lambda r: r['output_bytes']), '.0f')}); /tmp (shared with other processes) "
        f"{max(r['tmp_written_bytes'] for r in c.runs)}")


def report_real(c: Case, threads_used: int) -> None:
    b = c.bound
    cpf = c.calls_per_frame()
    lanes = int(c.med(lambda r: r.get("lanes") or 0) or 0)
    log(f"  × floor {fmt(c.ratio, '.3f')}; compute bound {b['fps']:.2f} fps = models alone with "
        f"{cores()} threads {b['models_ms']:.1f} ms/frame + floor {b['floor_ms']:.1f} ms/frame; "
        f"render reaches {fmt(c.bound_ratio, '.2f')} of it (in the render: {lanes or '?'} lane(s) "
        f"× {threads_used} ONNX Runtime thread(s) per call)")
    if c.alone_runs:
        bounds = [b["fps"] for b in c.run_bounds()]
        shares = [r["fps"] / b for r, b in zip(c.runs, bounds)]
        log(f"  bound measured after each run (models alone, with that run's floor): "
            f"{', '.join(f'{b:.2f}' for b in bounds)} fps; each run / its bound "
            f"{', '.join(f'{x:.2f}' for x in shares)}")
    for m in [*MODEL_STAGES, *c.other_models()]:
        if m not in cpf:
            continue
        alone = c.alone.get(str(threads_used), {}).get(m)
        log(f"  {m}: {cpf[m]:.2f} calls/frame; ms/call in the render {fmt(c.in_render_ms(m), '.1f')}, "
            f"alone with the same {threads_used} threads {fmt(alone, '.1f')}, alone with all "
            f"{cores()} {fmt(c.alone[str(cores())].get(m), '.1f')}")


def summary(cases: dict[str, Case], args: argparse.Namespace, info: dict[str, Any],
            overlap: dict[str, Any] | None) -> str:
    out = []
    out.append(f"### Performance (`make bench`, {info['date']})")
    out.append("")
    out.append(f"{info['cpu']}, {info['cores']} cores; ffmpeg {info['ffmpeg']}, "
               f"onnxruntime {info['ort']}, Python {info['python']}. Profile `{args.profile}` "
               f"(execution.providers={args.providers}, select.mode={args.select}"
               + (", " + ", ".join(args.set) if args.set else "")
               + ("; worker env " + " ".join(args.worker_env) if args.worker_env else "")
               + ("; ORT spin-waiting patched off" if args.ort_no_spin else "")
               + f"), stand-in models, median of {args.repeat} run(s). fps counts `render()` "
               "(probe → commit); the floor is ffmpeg decode → raw pipe → encode with the same "
               "encoder settings and audio; decode/encode ms are measured in the reader/writer "
               "threads and overlap inference.")
    out.append("")
    loads = [r.get("other_cores") for c in cases.values() for r in c.runs + c.floors]
    out.append(f"Other processes on the machine kept {fmt(median(loads), '.2f')} of its "
               f"{info['cores']} cores busy during the runs (median).")
    out.append("")
    hdr = ["case", "clip", "models", "fps", "floor fps", "render/floor", "CPU ms/frame render / floor"] + \
        [f"{s} ms" for s in STAGES] + ["peak RSS MiB", "first frame s", "bytes outside output"]
    plain = [c for c in cases.values() if c.name not in REAL_CASES]
    if plain:
        out.append("| " + " | ".join(hdr) + " |")
        out.append("|" + "|".join("---" for _ in hdr) + "|")
    for c in plain:
        if c.error:
            out.append(f"| {c.name} | {c.clip_name} | {c.models} | failed | | | | " + " | " * len(STAGES) + " | | |")
            continue
        cpu = fmt(c.med(lambda r: r["cpu_s"] / r["frames"] * 1000), ".0f")
        if c.floors:
            cpu += " / " + fmt(c.med(lambda f: f["cpu_s"] / f["frames"] * 1000, c.floors), ".0f")
        row = [c.name, c.clip_name, c.models, fmt(c.fps, ".1f"), fmt(c.floor_fps, ".1f", ""),
               fmt(c.ratio, ".2f", ""), cpu] + [fmt(c.stage(s), ".1f") for s in STAGES] + \
            [fmt(c.rss_mib, ".0f"), fmt(c.ttff, ".2f"), str(c.written)]
        out.append("| " + " | ".join(row) + " |")
    real = [c for c in cases.values() if c.name in REAL_CASES]
    if real:
        out.append("")
        out.append("Realistic-cost cases (stand-ins with the production models' cost and weight sizes, "
                   "real YuNet, the astronaut clip; `bench/realistic.py`). Bound = compute bound: "
                   "1 / (models alone with all cores + floor), per frame. ms/call: ONNX Runtime's "
                   "own time per call inside the render / alone with the same threads.")
        out.append("")
        hdr = ["case", "fps", "floor fps", "× floor", "bound fps", "of bound", "CPU %"] + \
            [f"{s} ms" for s in STAGES] + ["swap ms/call render / alone", "enhance ms/call render / alone",
                                           "other models ms/call render / alone", "peak RSS MiB"]
        out.append("| " + " | ".join(hdr) + " |")
        out.append("|" + "|".join("---" for _ in hdr) + "|")
        for c in real:
            if c.error or not c.runs:
                out.append(f"| {c.name} | failed |" + " |" * (len(hdr) - 2))
                continue
            threads = str(int(c.med(lambda r: r.get("ort_threads") or 0) or 0))

            def pair(m: str) -> str:
                alone = c.alone.get(threads, {}).get(m)
                return "" if c.in_render_ms(m) is None else \
                    f"{fmt(c.in_render_ms(m), '.0f')} / {fmt(alone, '.0f')}"
            row = [c.name, fmt(c.fps, ".2f"), fmt(c.floor_fps, ".1f"), fmt(c.ratio, ".3f"),
                   fmt(c.bound["fps"] if c.bound else None, ".2f"), fmt(c.bound_ratio, ".2f"),
                   fmt(c.med(lambda r: r["cpu_s"] / r["wall_s"] / cores() * 100), ".0f")] + \
                [fmt(c.stage(s), ".1f") for s in STAGES] + [pair("swap"), pair("enhance")] + \
                [", ".join(f"{m} {pair(m)}" for m in c.other_models()),
                 fmt(c.rss_mib, ".0f")]
            out.append("| " + " | ".join(row) + " |")
    out.append("")
    out.append("| target | figure | met |")
    out.append("|---|---|---|")
    for t in targets(cases, overlap):
        out.append(f"| {t[0]} | {t[1]} | {t[2]} |")
    notes = [c.note for c in cases.values() if c.note]
    if notes:
        out.append("")
        out.extend(f"- {n}" for n in notes)
    return "\n".join(out)


def model_costs_table(rows: list[dict[str, Any]]) -> str:
    """The ``model-costs`` case: each realistic stand-in's cost per call alone, all cores."""
    out = ["| model | session | GFLOP/call (from its architecture) | ms/call alone | GFLOP/s |",
           "|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['model']} | {r['session']} | {fmt(r['gflops'], '.1f')} | "
                   f"{fmt(r['ms'], '.0f')} | {fmt(r['gflops'] / r['ms'] * 1000 if r['gflops'] else None, '.0f')} |")
    return "\n".join(out)
