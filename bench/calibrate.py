"""The overlap case's swapper: its cost calibrated on this machine to about one floor frame."""
from __future__ import annotations

import statistics
import time
from pathlib import Path

from bench.figures import log
from render.standins import write_standins


def time_swapper(models_dir: Path, cache: Path, overrides: dict[str, str], min_s: float = 1.0
                 ) -> tuple[float, float]:
    """(wall ms, CPU ms) of one swapper call on one crop, as the renderer makes it."""
    import resource

    import numpy as np
    from render.models.load import load_models
    from render.config import load_config
    from render.processors.base import Source

    cfg = load_config(dict(overrides, **{"models.dir": str(models_dir), "cache_dir": str(cache)}),
                      env={})
    sw = load_models(cfg).face_steps[0]
    crops = np.random.RandomState(0).randint(0, 256, (1, sw.size, sw.size, 3), dtype=np.uint8)
    swap = sw.bind(Source(np.ones(512, np.float32), lambda: None))
    for _ in range(3):
        swap(crops)
    walls, n = [], 0
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t_end = time.perf_counter() + min_s
    while n < 5 or time.perf_counter() < t_end:
        t0 = time.perf_counter()
        swap(crops)
        walls.append(time.perf_counter() - t0)
        n += 1
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) / n
    return statistics.median(walls) * 1000.0, cpu * 1000.0


def swapper_knob(g: float) -> dict[str, float]:
    return {"inswapper_128": g, "inswapper_128_fp16": g}


def calibrate_overlap(work: Path, overrides: dict[str, str], target_ms: float, *, min_s: float = 0.6
                      ) -> tuple[float, float, float]:
    """Swapper gflops whose ``swap()`` of one crop costs about ``target_ms`` here (secant steps
    from 1 GFLOP; the MatMul chain comes in steps of 0.27 GFLOP); (gflops, wall ms, CPU ms)."""

    def measure(g: float) -> tuple[float, float]:
        d = work / f"calib-{g:.3f}"
        write_standins(d, gflops=swapper_knob(g))
        wall, cpu = time_swapper(d, work / "calib-cache", overrides, min_s=min_s)
        log(f"  calibration: +{g:.2f} GFLOP → {wall:.1f} ms per call ({cpu:.1f} ms CPU)")
        return wall, cpu

    base, _ = measure(0.0)
    g = 1.0
    wall, cpu = measure(g)
    for _ in range(3):
        if abs(wall - target_ms) <= 0.1 * target_ms or wall <= base:
            break
        g = min(max(0.27, g * (target_ms - base) / (wall - base)), 400.0)
        wall, cpu = measure(g)
    return g, wall, cpu
