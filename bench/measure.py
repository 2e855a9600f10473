"""One measured render: a fresh ``bench/worker.py`` process in fresh HOME, TMPDIR and cache
folders, measured from outside (wall, CPU, peak RSS of the tree, bytes written)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.machine import busy_seconds, other_load
from bench.monitor import TreeMonitor, snapshot, written

WORKER = Path(__file__).resolve().with_name("worker.py")
MARK = "BENCH-RESULT "


@dataclass
class Env:
    """Fresh HOME, TMPDIR and cache folder of one model set (kept between its runs, so that the
    warm-up run fills the caches and the measured runs find them)."""

    root: Path
    extra: dict[str, str] = field(default_factory=dict)   # --worker-env
    home: Path = field(init=False)
    tmp: Path = field(init=False)
    cache: Path = field(init=False)

    def __post_init__(self) -> None:
        self.extra = dict(self.extra)
        self.home, self.tmp, self.cache = self.root / "home", self.root / "tmp", self.root / "cache"
        for d in (self.home, self.tmp, self.cache):
            d.mkdir(parents=True, exist_ok=True)

    def environ(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("RENDER_", "XDG_")) and k not in ("TMP", "TEMP")}
        env.update(HOME=str(self.home), TMPDIR=str(self.tmp), PYTHONDONTWRITEBYTECODE="1")
        env.update(self.extra)
        return env


class WorkerFailed(RuntimeError):
    pass


def run_worker(overrides: dict[str, str], env: Env, out_dir: Path, target: Path, *,
               scan_tmp: list[Path], exclude_tmp: list[Path], timeout: float,
               pyinstrument: Path | None = None, keep_output: bool = False,
               patches: tuple[str, ...] = ()) -> dict[str, Any]:
    """One render in a fresh ``python bench/worker.py``; returns the worker's JSON plus what the
    parent measured (wall, rusage, memory of the tree, bytes written)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    output = out_dir / ("out" + target.suffix)
    ov = dict(overrides, target=str(target), output=str(output), cache_dir=str(env.cache))
    spec: dict[str, Any] = {"overrides": ov}
    if pyinstrument is not None:
        spec["pyinstrument"] = str(pyinstrument)
    if patches:
        spec["patches"] = list(patches)
    watched = [env.home, env.tmp, env.cache, out_dir, target.parent]
    before = snapshot(watched, [])
    before_tmp = snapshot(scan_tmp, exclude_tmp)

    busy0 = busy_seconds()
    t_spawn = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(WORKER), json.dumps(spec)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env.environ(),
                            cwd=str(env.home))
    mon = TreeMonitor(proc.pid)
    mon.start()
    chunks: dict[str, bytes] = {}

    def drain(name: str, stream) -> None:
        chunks[name] = stream.read()

    readers = [threading.Thread(target=drain, args=("out", proc.stdout), daemon=True),
               threading.Thread(target=drain, args=("err", proc.stderr), daemon=True)]
    for t in readers:
        t.start()
    killer = threading.Timer(timeout, proc.kill)
    killer.start()
    try:
        _, status, ru = os.wait4(proc.pid, 0)
    finally:
        killer.cancel()
    t_exit = time.perf_counter()
    busy1 = busy_seconds()
    proc.returncode = os.waitstatus_to_exitcode(status)
    mon.stop.set()
    mon.join()
    for t in readers:
        t.join()
    proc.stdout.close()
    proc.stderr.close()

    after = snapshot(watched, [])
    after_tmp = snapshot(scan_tmp, exclude_tmp)
    stderr = chunks.get("err", b"").decode("utf-8", "replace")
    line = next((ln for ln in chunks.get("out", b"").decode("utf-8", "replace").splitlines()
                 if ln.startswith(MARK)), None)
    if proc.returncode != 0 or line is None:
        tail = "\n".join(stderr.strip().splitlines()[-15:])
        raise WorkerFailed(f"worker exited {proc.returncode}:\n{tail}")
    r = json.loads(line[len(MARK):])

    ignore = {str(output), str(output) + ".report.json"}   # the report beside the output is wanted
    r["written_bytes"], r["written_files"] = written(before, after, ignore)
    r["tmp_written_bytes"], r["tmp_written_files"] = written(before_tmp, after_tmp, set())
    io = r.get("proc_io") or {}
    # write_bytes counts every page the worker and its reaped children dirtied, even in files
    # deleted before writeback (cancelled_write_bytes is deliberately NOT subtracted)
    r["io_write_bound"] = (max(0, io["write_bytes"] - r["output_bytes"])
                           if "write_bytes" in io else None)
    # a render writes its segments (about one output) and the assembled file (one output); mp4/mov
    # are muxed with +faststart: a second pass moves the index to the front by rewriting the file
    # in place; pages already written back by then are dirtied (counted) again, so up to one more
    # output size is the output's own
    faststart = output.suffix.lower() in (".mp4", ".m4v", ".mov")
    r["io_write_ratio"] = (io["write_bytes"] / r["output_bytes"]
                           if "write_bytes" in io and r["output_bytes"] else None)
    r["io_write_excess"] = (max(0, io["write_bytes"] - (3 if faststart else 2) * r["output_bytes"])
                            if "write_bytes" in io else None)
    r["wall_s"] = t_exit - t_spawn
    r["cpu_s"] = ru.ru_utime + ru.ru_stime      # worker + its reaped ffmpeg children
    r["other_cores"] = other_load(busy0, busy1, r["cpu_s"], r["wall_s"])
    r["first_frame_from_spawn_s"] = (r["t_first_frame"] - t_spawn) if r.get("t_first_frame") else None
    r["startup_s"] = r["t_start"] - t_spawn     # interpreter + imports + config
    self_kb = r.get("vm_hwm_kb") or r["self"]["maxrss_kb"]   # VmHWM (render.report.vm_hwm_bytes)
    dec, enc = mon.child_peak_kb("decoder"), mon.child_peak_kb("encoder")
    largest_child = r["children"]["maxrss_kb"]   # RUSAGE_CHILDREN: the largest reaped child
    if dec and enc:
        r["ffmpeg_peak_kb"] = dec + enc
        r["rss_method"] = "sampled"
    else:  # the sampler missed them: at least the largest one, counted once
        r["ffmpeg_peak_kb"] = largest_child
        r["rss_method"] = "rusage"
    r["decoder_peak_kb"], r["encoder_peak_kb"] = dec, enc
    r["worker_peak_kb"] = self_kb
    r["tree_peak_kb"] = self_kb + r["ffmpeg_peak_kb"]
    r["tree_sampled_peak_kb"] = mon.tree_peak_kb
    r["fps"] = r["frames"] / r["seconds"] if r["seconds"] > 0 else None
    if not keep_output:
        try:
            output.unlink()
        except FileNotFoundError:
            pass
    return r
