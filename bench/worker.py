"""One measured render in a fresh process; prints one JSON line for bench/run.py.

Usage (bench/run.py does this; rarely useful by hand)::

    python bench/worker.py '{"overrides": {"profile": "low", "source": ..., "target": ...,
                                           "output": ..., "models.dir": ..., "cache_dir": ...}}'

It builds the Config with ``render.config.load_config(overrides, env={})`` (no RENDER_* variables
leak in), constructs ``render.renderer.Renderer`` and runs ``render(Job(source, target, output))``.
The JSON line (prefixed ``BENCH-RESULT``) holds frames, seconds, the per-stage milliseconds
per frame, the time to first frame counted from just before the Renderer is constructed (so
model verification, emap and session loading count), the process's own peak RSS (VmHWM) and that of its
largest reaped child (``RUSAGE_CHILDREN``: the ffmpeg decoder/encoder), and /proc/self/io.

All clock values are ``time.perf_counter()`` readings, which on Linux is CLOCK_MONOTONIC and
therefore comparable with the parent's readings (the parent uses them to count Python start-up
and imports into the time to first frame).

Optional ``"patches": ["no-spin"]`` turns ONNX Runtime's spin-waiting off (a what-if experiment,
not the shipped behaviour). Optional ``"pyinstrument": PATH`` in the spec profiles the render (not the construction) with
pyinstrument and writes its text report to PATH; the figures of such a run are not comparable.
"""
from __future__ import annotations

import time

T_PROCESS = time.perf_counter()  # first thing: before any heavy import

import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402

MARK = "BENCH-RESULT "


def _proc_io() -> dict[str, int] | None:
    try:
        with open("/proc/self/io") as fh:
            return {k.strip(): int(v) for k, v in (line.split(":", 1) for line in fh if ":" in line)}
    except (OSError, ValueError):
        return None


def _rusage(who: int) -> dict[str, float]:
    r = resource.getrusage(who)
    return {"maxrss_kb": r.ru_maxrss, "utime": r.ru_utime, "stime": r.ru_stime,
            "oublock": r.ru_oublock, "inblock": r.ru_inblock}


def _model_calls(renderer) -> dict[str, dict[str, float]]:
    """Per model: calls made inside the render and ms per call spent in ONNX Runtime (LazySession)."""
    return {name: {"calls": lazy.calls, "ms_per_call": lazy.run_seconds * 1000.0 / lazy.calls}
            for name, lazy in renderer.models.named_sessions().items() if lazy.calls}


def _ort_threads(renderer) -> int | None:
    from render.sessions import SessionFactory

    factory = getattr(renderer.models, "factory", None)
    return factory.session_options().intra_op_num_threads if isinstance(factory, SessionFactory) else None


def main(argv: list[str]) -> int:
    if len(argv) > 1 and argv[1] in ("-h", "--help"):
        sys.stdout.write(__doc__)
        return 0
    spec = json.loads(argv[1] if len(argv) > 1 else sys.stdin.read())
    overrides = {str(k): str(v) for k, v in spec["overrides"].items()}

    t_import = time.perf_counter()
    from render.jobs import Job
    from render.renderer import Renderer
    from render.config import load_config
    from render.report import vm_hwm_bytes
    t_imported = time.perf_counter()

    if "no-spin" in spec.get("patches", ()):   # what-if experiment, see run.py --ort-no-spin
        from render.sessions import SessionFactory
        original = SessionFactory.session_options

        def session_options(self):
            so = original(self)
            so.add_session_config_entry("session.intra_op.allow_spinning", "0")
            so.add_session_config_entry("session.inter_op.allow_spinning", "0")
            return so
        SessionFactory.session_options = session_options

    cfg = load_config(overrides, env={})
    job = Job(Path(cfg.source), Path(cfg.target), Path(cfg.output))
    children_before = _rusage(resource.RUSAGE_CHILDREN)

    t_start = time.perf_counter()            # before the Renderer: model loading counts
    renderer = Renderer(cfg)
    t_constructed = time.perf_counter()
    profiler = None
    if spec.get("pyinstrument"):
        from pyinstrument import Profiler   # pip install pyinstrument
        profiler = Profiler(interval=0.001)
        profiler.start()
    result = renderer.render(job)
    t_done = time.perf_counter()
    if profiler is not None:
        profiler.stop()
        Path(spec["pyinstrument"]).write_text(profiler.output_text(unicode=True, color=False,
                                                                    show_all=False))

    times = result.times
    out = {
        "frames": result.frames,
        "faces": times.faces,
        "seconds": result.seconds,                       # render(): probe → commit
        "ms_per_frame": times.ms_per_frame(),
        "stage_seconds": dict(times.seconds),
        "first_frame_s": (times.first_frame_at - t_start) if times.first_frame_at else None,
        "construct_s": t_constructed - t_start,
        "render_call_s": t_done - t_constructed,
        "import_s": t_imported - t_import,
        "t_process": T_PROCESS,
        "t_start": t_start,
        "t_first_frame": times.first_frame_at,
        "t_done": t_done,
        "self": _rusage(resource.RUSAGE_SELF),
        # VmHWM, not ru_maxrss: Linux carries the forking bench's peak across exec (report.py)
        "vm_hwm_kb": (vm_hwm_bytes("self") or 0) // 1024 or None,
        "children": _rusage(resource.RUSAGE_CHILDREN),
        "children_before_render": children_before,
        "proc_io": _proc_io(),
        "output_bytes": job.output.stat().st_size if job.output.exists() else 0,
        "threads": cfg.execution.threads,
        "ort_threads": _ort_threads(renderer),
        "lanes": renderer.models.threads.lanes,
        "model_calls": _model_calls(renderer),
        "overhead_s": dict(result.result.overhead) if result.result is not None else None,
        "pid": os.getpid(),
    }
    sys.stdout.write(MARK + json.dumps(out) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except Exception:  # noqa: BLE001 - the parent shows this
        traceback.print_exc()
        sys.exit(1)
