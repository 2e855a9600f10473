#!/usr/bin/env python3
"""Smoke check of the benchmark, without pytest: ``python bench/smoke.py``.

Runs ``python bench/run.py --quick`` and checks that it exits 0 within the time limit, that every
case rendered every frame, that each run reports the stage times, peak RSS, time to first frame
and bytes written, and that the markdown summary was printed. Exit status 0 = OK.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES = {"null-720p", "null-1080p", "models-720p", "overlap-720p", "memory-60s"}
STAGES = {"decode", "detect", "embed", "swap", "enhance", "composite", "encode"}
LIMIT_S = 120.0


def main() -> int:
    import argparse

    argparse.ArgumentParser(prog="python bench/smoke.py",
                            description=__doc__.splitlines()[0]).parse_args()
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-smoke-") as tmp:
        raw = Path(tmp) / "bench.json"
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, str(HERE / "run.py"), "--quick", "--json", str(raw)],
                              capture_output=True, text=True, timeout=4 * LIMIT_S)
        elapsed = time.perf_counter() - t0
        if proc.returncode != 0:
            problems.append(f"run.py --quick exited {proc.returncode}")
        if elapsed > LIMIT_S:
            problems.append(f"run.py --quick took {elapsed:.0f}s (limit {LIMIT_S:.0f}s)")
        if "| target | figure | met |" not in proc.stdout:
            problems.append("no markdown summary in the output")
        data = json.loads(raw.read_text()) if raw.is_file() else {"cases": []}
    seen = {c["name"] for c in data["cases"]}
    if seen != CASES:
        problems.append(f"cases {sorted(seen)}, expected {sorted(CASES)}")
    for c in data["cases"]:
        if c["error"]:
            problems.append(f"{c['name']}: {c['error']}")
            continue
        if not c["runs"]:
            problems.append(f"{c['name']}: no runs")
        for r in c["runs"]:
            if r["frames"] <= 0 or not r["fps"]:
                problems.append(f"{c['name']}: {r['frames']} frames, fps {r['fps']}")
            if set(r["ms_per_frame"]) != STAGES:
                problems.append(f"{c['name']}: stages {sorted(r['ms_per_frame'])}")
            if r["tree_peak_kb"] <= 0 or not r["first_frame_s"] or r["first_frame_s"] <= 0:
                problems.append(f"{c['name']}: peak RSS {r['tree_peak_kb']} KiB, first frame "
                                f"{r['first_frame_s']}")
            if "written_bytes" not in r:
                problems.append(f"{c['name']}: no bytes-written figure")
        if c["name"] in ("null-720p", "null-1080p", "overlap-720p") and not c["floors"]:
            problems.append(f"{c['name']}: no ffmpeg floor")
    if problems:
        print("bench smoke: FAILED\n  " + "\n  ".join(problems))
        print("--- run.py output (tail) ---\n" + "\n".join((proc.stdout + proc.stderr).splitlines()[-40:]))
        return 1
    print(f"bench smoke: OK ({elapsed:.0f}s, {len(seen)} cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
