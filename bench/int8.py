"""int8 against fp32 at each model's counted cost: each model converted with
``render models convert NAME int8`` on the realistic photo clip (faces found by the real YuNet),
its gate's figures, and the milliseconds per call of both files on this machine's cores.

    python -m bench.int8 [--calls 5] [--threads 2]     prints a markdown table

The realistic stand-ins (``bench/realistic.py``) have each production model's layers and cost
but random weights: the gate's figures say how int8 treats these graphs on real faces, not how
close a real model's int8 output stays to its fp32 one. The end-to-end figure is
``python -m bench.run --cases real-720p-low`` with and without ``--set swap.precision=int8``.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench import realistic
from bench.cli import bench_home

#: the models compared, with the realistic set's detector last (real weights)
MODELS = ("inswapper_128", "hyperswap_1a_256", "arcface_w600k_r50", "gfpgan_1.4", "xseg_1",
          "bisenet_resnet_34", "2dfan4", "yunet")


def _convert(models: Path, cache: Path, name: str, clip: Path) -> tuple[str, float]:
    """The command's last line and its seconds (the conversion is skipped when done)."""
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "render", "models", "convert", name, "int8",
                        f"calibrate={clip}", "detect=yunet", f"dir={models}",
                        f"cache_dir={cache}"], capture_output=True, text=True)
    said = (r.stdout or r.stderr).strip().splitlines()[-1]
    return said, time.perf_counter() - t0


def _ms_per_call(path: Path, entry, threads: int, calls: int) -> float:
    import onnxruntime as ort

    from render.models.convert import _fixed_inputs

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.log_severity_level = 3
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    feeds = _fixed_inputs(session, entry)
    session.run(None, feeds)                     # warm-up
    walls = []
    for _ in range(calls):
        t0 = time.perf_counter()
        session.run(None, feeds)
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls) * 1000.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    from render.models.manifest import load_manifest

    home = bench_home()
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    models = realistic.real_models(home, log)
    clip, _ = realistic.real_clip(home / "clips", 1280, 720, 4.0, False, log)
    cache = home / "int8-cache"
    rows = []
    for name in MODELS:
        said, seconds = _convert(models, cache, name, clip)
        log(f"  {name}: {said[:160]} ({seconds:.0f} s)")
        manifest = load_manifest(models)
        fp32 = manifest.get(name)
        int8 = next((e for e in manifest if e.source == name and e.precision == "int8"), None)
        ms32 = _ms_per_call(models / fp32.file, fp32, args.threads, args.calls)
        if int8 is None:
            rows.append((name, "stays fp32: " + said.split("held-out faces: ")[-1].split(";")[0],
                         ms32, None))
            continue
        gate = ", ".join(f"{k} {v:g}" for k, v in int8.fidelity.items())
        rows.append((name, gate, ms32,
                     _ms_per_call(models / int8.file, fp32, args.threads, args.calls)))
    print(f"| model | GFLOP/call | gate on held-out faces | fp32 ms | int8 ms | int8 speed-up |")
    print("|---|---|---|---|---|---|")
    for name, gate, ms32, ms8 in rows:
        gflop = realistic.REAL_GFLOPS.get(name, "real")
        faster = f"{ms32 / ms8:.2f}×" if ms8 else "—"
        print(f"| {name} | {gflop} | {gate} | {ms32:.1f} | "
              f"{f'{ms8:.1f}' if ms8 else '—'} | {faster} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
