#!/usr/bin/env python3
"""Benchmark of the renderer against the ffmpeg floor (``make bench`` runs this).

What it does, with nothing but ffmpeg, the repository and its test fixtures:

* generates its own clips with ``tests/media_fixtures.make_clip`` (faces the stand-in detector
  finds, audio on): 720p and 1080p of 10 s, and a 60 s 720p one for the memory case. Clips are
  cached in ``--clips-dir`` (keyed by their parameters and the fixture's source), so a second run
  does not pay for them again;
* writes stand-in models with ``tests/standins.write_standins``: *null* models (swapper and
  enhancer return their input), models with the compute knobs of the command line
  (``--swapper-gflops`` ...), and an *overlap* swapper whose cost is calibrated on this machine to
  about one ffmpeg-floor frame time;
* runs every measured render in a fresh child process (``bench/worker.py``) with HOME, TMPDIR and
  ``cache_dir`` pointed at fresh folders, after one warm-up render that fills the caches, and
  measures it from outside: wall time, CPU, the peak RSS of the process tree (worker + ffmpeg
  children), the time to first frame and every byte written outside the output;
* measures, in the same run and interleaved with the renders, the ffmpeg floor: the target decoded
  to a raw pipe and encoded again by two ffmpeg processes built with ``render.media.args``
  (``decode_args``/``encode_args``, same encoder settings, same audio) -- what the renderer would
  cost with free inference;
* prints per-case figures, the targets and a markdown summary for the README.

The targets are reported as figures, never asserted; the exit status is non-zero only when a
render fails or produces the wrong number of frames (``--quick`` is the smoke check).
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
WORKER = Path(__file__).resolve().with_name("worker.py")
MARK = "BENCH-RESULT "
STAGES = ("decode", "detect", "embed", "swap", "enhance", "composite", "encode")
MODEL_STAGES = ("detect", "embed", "swap", "enhance")
REAL_CASES = ("real-720p-swap", "real-720p-enhance", "real-1080p-swap", "real-1080p-enhance",
              "real-720p-low")
ALL_CASES = ("null-720p", "null-1080p", "models-720p", "overlap-720p", "memory-60s") + REAL_CASES
MiB = 1024 * 1024

# the bench reads the fixtures and stand-ins of the test suite (no pytest needed)
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

import realistic  # noqa: E402 - bench/realistic.py, after the path set-up


# ---------------------------------------------------------------------------------- small helpers
def log(msg: str = "") -> None:
    print(msg, flush=True)


def median(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def fmt(value: float | None, spec: str = ".1f", none: str = "n/a") -> str:
    return none if value is None else format(value, spec)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def ffmpeg_version_text() -> str:
    try:
        out = subprocess.run(["ffmpeg", "-hide_banner", "-version"], capture_output=True, text=True,
                             timeout=10).stdout
        return out.split()[2] if out.startswith("ffmpeg version") else out.splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return "unknown"


def ort_version() -> str:
    try:
        import onnxruntime
        return onnxruntime.__version__
    except ImportError:
        return "not installed"


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


# ---------------------------------------------------------------------------------- clips
@dataclass(frozen=True)
class ClipSpec:
    name: str
    width: int
    height: int
    seconds: float
    fps: int = 25

    def key(self) -> str:
        src = (TESTS / "media_fixtures.py").read_bytes()
        h = hashlib.sha256(src).hexdigest()[:10]
        return f"{self.width}x{self.height}-{self.seconds:g}s-{self.fps}fps-audio-{h}"


@dataclass
class Clip:
    spec: ClipSpec
    path: Path
    frames: int
    face_frames: int
    faces: int


def make_clip(spec: ClipSpec, clips_dir: Path, fresh: bool) -> Clip:
    import media_fixtures as mf

    clips_dir.mkdir(parents=True, exist_ok=True)
    path = clips_dir / f"{spec.key()}.mp4"
    meta = path.with_suffix(".json")
    if not fresh and path.is_file() and meta.is_file():
        m = json.loads(meta.read_text())
        log(f"  clip {spec.name}: cached {path.name}")
        return Clip(spec, path, m["frames"], m["face_frames"], m["faces"])
    t0 = time.perf_counter()
    tmp = path.with_name(path.stem + f".tmp-{os.getpid()}.mp4")
    truth = mf.make_clip(tmp, width=spec.width, height=spec.height, fps=spec.fps,
                         seconds=spec.seconds, audio=True)
    os.replace(tmp, path)
    m = {"frames": truth.frame_count, "face_frames": len(truth.frames_with_faces()),
         "faces": sum(len(b) for b in truth.boxes)}
    meta.write_text(json.dumps(m))
    log(f"  clip {spec.name}: generated {path.name} ({truth.frame_count} frames) in "
        f"{time.perf_counter() - t0:.1f}s")
    return Clip(spec, path, m["frames"], m["face_frames"], m["faces"])


# ---------------------------------------------------------------------------------- files written
Snapshot = dict[str, tuple[int, int, int]]   # path -> (inode, size, mtime_ns)


def snapshot(dirs: list[Path], exclude: list[Path]) -> Snapshot:
    snap: Snapshot = {}
    excl = [str(e) for e in exclude]
    for d in dirs:
        for root, subdirs, files in os.walk(d, onerror=lambda e: None):
            if any(root == e or root.startswith(e + os.sep) for e in excl):
                subdirs[:] = []
                continue
            for name in files:
                p = os.path.join(root, name)
                try:
                    st = os.lstat(p)
                except OSError:
                    continue
                snap[p] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return snap


def written(before: Snapshot, after: Snapshot, ignore: set[str]) -> tuple[int, list[tuple[str, int]]]:
    """Bytes of every file created (or replaced) or grown between two snapshots; rewritten
    same-size files count whole."""
    total, files = 0, []
    for p, (ino, size, mtime) in after.items():
        if p in ignore:
            continue
        old = before.get(p)
        if old is None or old[0] != ino:
            n = size
        elif size > old[1]:
            n = size - old[1]
        elif mtime != old[2]:
            n = size
        else:
            continue
        total += n
        files.append((p, n))
    return total, sorted(files, key=lambda f: -f[1])


# ---------------------------------------------------------------------------------- machine load
_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def busy_seconds() -> float | None:
    """CPU seconds the whole machine has spent busy (all cores; /proc/stat), or None."""
    try:
        with open("/proc/stat") as fh:
            f = [int(x) for x in fh.readline().split()[1:]]
        # user nice system idle iowait irq softirq steal (guest is inside user)
        return (f[0] + f[1] + f[2] + f[5] + f[6] + f[7]) / _HZ
    except (OSError, ValueError, IndexError):
        return None


def other_load(busy0: float | None, busy1: float | None, ours: float, wall: float) -> float | None:
    """Cores kept busy by other processes during ``wall`` seconds (machine busy minus ours)."""
    if busy0 is None or busy1 is None or wall <= 0:
        return None
    return max(0.0, (busy1 - busy0 - ours) / wall)


# ---------------------------------------------------------------------------------- memory monitor
def _read_status(pid: int) -> tuple[int, int] | None:
    """(VmHWM, VmRSS) in KiB."""
    try:
        hwm = rss = 0
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
                elif line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
        return hwm, rss
    except (OSError, ValueError, IndexError):
        return None


def _ppids() -> dict[int, int]:
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                data = fh.read()
            out[int(name)] = int(data[data.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return out


def _role(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "other"
    if b"pipe:1" in argv:
        return "decoder"
    if b"pipe:0" in argv:
        return "encoder"
    return "other"


class TreeMonitor(threading.Thread):
    """Samples the RSS of a process and its descendants: per-process peak (VmHWM) and the peak
    of their sum. Descendants are looked up every ``scan`` seconds, sizes every ``interval``."""

    def __init__(self, pid: int, interval: float = 0.1, scan: float = 0.5) -> None:
        super().__init__(name=f"monitor-{pid}", daemon=True)
        self.pid, self.interval, self.scan = pid, interval, scan
        self.stop = threading.Event()
        self.peaks: dict[int, int] = {}      # pid -> VmHWM KiB
        self.roles: dict[int, str] = {}
        self.tree_peak_kb = 0

    def run(self) -> None:
        known = [self.pid]
        next_scan = 0.0
        while not self.stop.is_set():
            now = time.monotonic()
            if now >= next_scan:
                ppids = _ppids()
                tree, frontier = [self.pid], [self.pid]
                while frontier:
                    kids = [p for p, pp in ppids.items() if pp in frontier]
                    tree += kids
                    frontier = kids
                known = tree
                for p in tree:
                    if p != self.pid and p not in self.roles:
                        self.roles[p] = _role(p)
                next_scan = now + self.scan
            total = 0
            for p in known:
                st = _read_status(p)
                if st is None:
                    continue
                hwm, rss = st
                self.peaks[p] = max(self.peaks.get(p, 0), hwm)
                total += rss
            self.tree_peak_kb = max(self.tree_peak_kb, total)
            self.stop.wait(self.interval)

    def child_peak_kb(self, role: str) -> int:
        return sum(v for p, v in self.peaks.items() if self.roles.get(p) == role)


# ---------------------------------------------------------------------------------- one render
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


# ---------------------------------------------------------------------------------- ffmpeg floor
def floor_argv(target: Path, output: Path, overrides: dict[str, str]) -> tuple[list[str], list[str]]:
    """The render's own plan (one segment: the whole clip) gives the decoder and the encoder
    settings; the floor encodes in one pass with the audio, with the arguments the render's own
    encoder gets for a plan of one segment (less the synthetic-media tags)."""
    from render.config import load_config
    from render.media import args as ffargs
    from render.media.probe import ffmpeg_version, frame_times, probe
    from render.plan import Identity, plan_render

    cfg = load_config({**overrides, "segment.seconds": "3600"}, env={})
    info = probe(target)
    version = ffmpeg_version()
    legacy = version is not None and version < (5, 1)
    plan = plan_render(cfg, source=target, target=target, output=output, info=info,
                       times=frame_times(info), legacy_vsync=legacy,
                       identity=Identity("", "", None, {}, {}))
    enc = plan.encode
    video = ffargs.EncodeSettings(codec=enc["codec"], crf=enc["crf"], preset=enc["preset"],
                                  pix_fmt=enc["pix_fmt"], extra=tuple(enc["extra"]),
                                  threads=enc["threads"])
    dec = list(plan.segments[0].decode)
    enc_argv = ffargs.encode_args(info, output, width=plan.width, height=plan.height,
                                  fps=info.fps, video=video, legacy_vsync=legacy)
    return dec, enc_argv


def run_floor(clip: Clip, out_dir: Path, overrides: dict[str, str], *, relay: bool = False
              ) -> dict[str, Any]:
    """decoder → pipe → encoder. ``relay``: a Python loop copies the pipe (like the renderer's
    reader/writer threads do, without any processing)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    output = out_dir / ("floor" + clip.path.suffix)
    dec_argv, enc_argv = floor_argv(clip.path, output, overrides)
    busy0 = busy_seconds()
    t0 = time.perf_counter()
    dec = subprocess.Popen(dec_argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
    if relay:
        enc = subprocess.Popen(enc_argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
        frame = clip.spec.width * clip.spec.height * 3
        buf = bytearray(frame)
        view = memoryview(buf)
        while True:
            got = 0
            while got < frame:
                n = dec.stdout.readinto(view[got:])
                if not n:
                    break
                got += n
            if got < frame:
                break
            enc.stdin.write(view)
        enc.stdin.close()
    else:
        enc = subprocess.Popen(enc_argv, stdin=dec.stdout, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    dec.stdout.close()
    errs = {}

    def drain(name: str, p: subprocess.Popen) -> None:
        errs[name] = p.stderr.read()

    ts = [threading.Thread(target=drain, args=(n, p), daemon=True) for n, p in (("dec", dec), ("enc", enc))]
    for t in ts:
        t.start()
    # their VmHWM: wait4's ru_maxrss carries this (large) process's own peak across the exec
    mons = {p.pid: TreeMonitor(p.pid, scan=3600.0) for p in (dec, enc)}
    for m in mons.values():
        m.start()
    _, enc_status, enc_ru = os.wait4(enc.pid, 0)
    _, dec_status, dec_ru = os.wait4(dec.pid, 0)
    for m in mons.values():
        m.stop.set()
    seconds = time.perf_counter() - t0
    busy1 = busy_seconds()
    enc.returncode = os.waitstatus_to_exitcode(enc_status)
    dec.returncode = os.waitstatus_to_exitcode(dec_status)
    for t in ts:
        t.join()
    for p in (dec, enc):
        p.stderr.close()
    if enc.returncode != 0 or dec.returncode != 0:
        raise WorkerFailed(f"ffmpeg floor failed (decoder {dec.returncode}, encoder "
                           f"{enc.returncode}): {errs.get('enc', b'')[-500:]!r} "
                           f"{errs.get('dec', b'')[-500:]!r}")
    size = output.stat().st_size
    output.unlink()
    cpu = sum(r.ru_utime + r.ru_stime for r in (enc_ru, dec_ru))
    return {"frames": clip.frames, "seconds": seconds, "fps": clip.frames / seconds, "cpu_s": cpu,
            "other_cores": other_load(busy0, busy1, cpu, seconds),
            "decoder_peak_kb": mons[dec.pid].peaks.get(dec.pid) or dec_ru.ru_maxrss,
            "encoder_peak_kb": mons[enc.pid].peaks.get(enc.pid) or enc_ru.ru_maxrss,
            "output_bytes": size}


# ---------------------------------------------------------------------------------- calibration
def time_swapper(models_dir: Path, cache: Path, overrides: dict[str, str], min_s: float = 1.0
                 ) -> tuple[float, float]:
    """(wall ms, CPU ms) of one ``Swapper.swap`` call on one crop, as the renderer makes it."""
    import resource

    import numpy as np
    from render.app import Models
    from render.config import load_config

    cfg = load_config(dict(overrides, **{"models.dir": str(models_dir), "cache_dir": str(cache)}),
                      env={})
    models = Models(cfg)
    sw = models.swapper
    crops = np.random.RandomState(0).randint(0, 256, (1, sw.size, sw.size, 3), dtype=np.uint8)
    latent = sw.latent(np.ones(512, np.float32))
    for _ in range(3):
        sw.swap(crops, latent)
    walls, n = [], 0
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t_end = time.perf_counter() + min_s
    while n < 5 or time.perf_counter() < t_end:
        t0 = time.perf_counter()
        sw.swap(crops, latent)
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
    import standins

    def measure(g: float) -> tuple[float, float]:
        d = work / f"calib-{g:.3f}"
        standins.write_standins(d, gflops=swapper_knob(g))
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


# ---------------------------------------------------------------------------------- cases
@dataclass
class Case:
    name: str
    clip: str                   # ClipSpec name
    models: str                 # model set name
    floor: bool                 # measure the ffmpeg floor alongside
    note: str = ""
    frame_bytes: int = 0        # one raw bgr24 frame of its clip
    clip_name: str = ""         # e.g. "720p 10s"
    runs: list[dict] = field(default_factory=list)
    floors: list[dict] = field(default_factory=list)
    relays: list[dict] = field(default_factory=list)
    error: str | None = None
    overrides: dict[str, str] | None = None        # realistic cases: their own settings
    floor_overrides: dict[str, str] | None = None  # the floor's settings when not the case's
    alone: dict[str, dict[str, float]] = field(default_factory=dict)   # threads -> model -> ms/call
    bound: dict[str, Any] | None = None             # realistic.bound() of the medians
    #: realistic cases: the models timed alone (all cores) right after each render run, so that
    #: each run is judged against the bound of its own moment on a machine whose speed drifts
    alone_runs: list[dict[str, float]] = field(default_factory=list)
    after_run: Callable[["Case"], None] | None = None

    def run_bounds(self) -> list[dict[str, Any]]:
        """realistic.bound() per run: its own alone timing and its own (interleaved) floor."""
        cpf = self.calls_per_frame()
        return [realistic.bound(a, cpf, 1000.0 / f["fps"])
                for a, f in zip(self.alone_runs, self.floors)]

    def calls_per_frame(self) -> dict[str, float]:
        names = {k for r in self.runs for k in r.get("model_calls", {})}
        return {k: self.med(lambda r, k=k: r.get("model_calls", {}).get(k, {}).get("calls", 0)
                            / max(r["frames"], 1)) or 0.0 for k in names}

    def in_render_ms(self, model: str) -> float | None:
        return self.med(lambda r: r.get("model_calls", {}).get(model, {}).get("ms_per_call"))

    @property
    def bound_ratio(self) -> float | None:
        """median over the runs of (fps / the compute bound's fps), each run against the bound
        measured next to it when there is one."""
        if not self.bound or not self.runs:
            return None
        per_run = self.run_bounds()
        if len(per_run) == len(self.runs):
            return median([r["fps"] / b["fps"] for r, b in zip(self.runs, per_run)])
        return self.med(lambda r: r["fps"] / self.bound["fps"])

    def med(self, fn: Callable[[dict], float | None], runs: list[dict] | None = None) -> float | None:
        return median([fn(r) for r in (self.runs if runs is None else runs)])

    @property
    def fps(self) -> float | None:
        return self.med(lambda r: r["fps"])

    @property
    def floor_fps(self) -> float | None:
        return self.med(lambda r: r["fps"], self.floors) if self.floors else None

    @property
    def ratio(self) -> float | None:
        """median over the interleaved (floor, render) pairs of render fps / floor fps."""
        if not self.floors or not self.runs:
            return None
        return median([r["fps"] / f["fps"] for r, f in zip(self.runs, self.floors)])

    def stage(self, name: str) -> float | None:
        return self.med(lambda r: r["ms_per_frame"].get(name))

    @property
    def segment_share(self) -> float | None:
        """Median share of render() spent on what segments add: committing them, joining and
        muxing, verifying the result (marking is counted apart: it is not segmenting)."""
        vals = [sum(r["overhead_s"][k] for k in ("commit", "assemble", "verify")) / r["seconds"]
                for r in self.runs if r.get("overhead_s")]
        return median(vals) if vals else None

    @property
    def rss_mib(self) -> float | None:
        return self.med(lambda r: r["tree_peak_kb"] / 1024)

    @property
    def ttff(self) -> float | None:
        return self.med(lambda r: r["first_frame_s"])

    @property
    def written(self) -> int | None:
        vals = [r["written_bytes"] for r in self.runs]
        return max(vals) if vals else None


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
                   help="length of the realistic-cost clips (4; 1 with --quick)")
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
    if a.real_seconds is None:
        a.real_seconds = 1.0 if a.quick else 4.0
    a.cases = [c.strip() for c in a.cases.split(",") if c.strip()]
    return a


def bench_home() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "render-bench"


# ---------------------------------------------------------------------------------- reporting
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
    for m in MODEL_STAGES:
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
    out.append("| " + " | ".join(hdr) + " |")
    out.append("|" + "|".join("---" for _ in hdr) + "|")
    for c in cases.values():
        if c.name in REAL_CASES:
            continue
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
            [f"{s} ms" for s in STAGES] + ["swap ms/call render / alone", "enhance ms/call render / alone"]
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
                [fmt(c.stage(s), ".1f") for s in STAGES] + [pair("swap"), pair("enhance")]
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


def _short(path: str) -> str:
    """A written file's path from its env folder on (``home/.cache/...``)."""
    parts = Path(path).parts
    if "env" in parts:
        i = len(parts) - 1 - parts[::-1].index("env")
        if len(parts) > i + 3:
            name = {"home": "$HOME", "tmp": "$TMPDIR", "cache": "cache_dir"}.get(parts[i + 2],
                                                                              parts[i + 2])
            return name + "/" + "/".join(parts[i + 3:])
    return path


def _met(ok: bool | None) -> str:
    return "n/a" if ok is None else ("yes" if ok else "**no**")


def targets(cases: dict[str, Case], overlap: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    rows = []
    for name in ("null-720p", "null-1080p"):
        c = cases.get(name)
        if c and not c.error and c.ratio is not None:
            rows.append((f"null models ({name}): fps ≥ 0.9 × floor",
                         f"{c.fps:.1f} / {c.floor_fps:.1f} fps = {c.ratio:.2f}", _met(c.ratio >= 0.9)))
    c = cases.get("null-720p")
    if c and not c.error and c.segment_share is not None:
        rows.append(("segmenting costs ≤ 3 % fps (null-720p: commit + join/mux + verify, share of "
                     "render())", f"{c.segment_share * 100:.1f} %", _met(c.segment_share <= 0.03)))
    if overlap:
        rows.append((f"swapper of S ms/frame ({overlap['case']}): wall ≈ max(S, floor) + a little",
                     f"S {overlap['s_frame']:.1f}, floor {overlap['floor_ms']:.1f}: max "
                     f"{overlap['max']:.1f}, sum {overlap['sum']:.1f}, measured "
                     f"{overlap['measured']:.1f} ms/frame"
                     f" (CPU-bound bound on {cores()} cores {overlap['cpu_bound']:.1f})",
                     _met(overlap["measured"] <= 1.15 * overlap["max"])))
    mem, ref = cases.get("memory-60s"), cases.get("null-720p")
    if mem and ref and not mem.error and not ref.error and mem.rss_mib and ref.rss_mib:
        ratio = mem.rss_mib / ref.rss_mib
        rows.append((f"peak RSS {mem.clip_name} ≤ 1.1 × {ref.clip_name}",
                     f"{mem.rss_mib:.0f} / {ref.rss_mib:.0f} MiB = {ratio:.2f}", _met(ratio <= 1.1)))
    ok = [c for c in cases.values() if not c.error and c.runs]
    if ok:
        frame = min(c.frame_bytes for c in ok)
        largest = max((n for c in ok for r in c.runs for _, n in r["written_files"]), default=0)
        bounds = [r["io_write_bound"] for c in ok for r in c.runs if r["io_write_bound"] is not None]
        bound = max(bounds) if bounds else None
        excess = [r["io_write_excess"] for c in ok for r in c.runs if r.get("io_write_excess") is not None]
        worst = max(excess) if excess else None
        frames_ok = largest < frame and (worst is None or worst < frame)
        rows.append(("zero bytes of frames on disk",
                     f"largest file left outside the output {largest} B; /proc io write_bytes "
                     f"of the render tree minus the output ≤ {fmt(bound, '.0f')} B, minus the "
                     f"segments, the assembled file and the mp4 +faststart rewrite (3 × output) ≤ "
                     f"{fmt(worst, '.0f')} B; one raw frame is {frame} B", _met(frames_ok)))
        ratios = [r["io_write_ratio"] for c in ok for r in c.runs if r.get("io_write_ratio")]
        if ratios:
            rows.append(("bytes written per render ≤ about 2 × output (segments + assembled file; "
                         "+1 for the mp4 faststart rewrite)", f"max {max(ratios):.2f} × output",
                         _met(max(ratios) <= 3.1)))
        total = max(c.written for c in ok)
        files = sorted({_short(p) for c in ok for r in c.runs for p, _ in r["written_files"]})
        rows.append(("no bytes left outside the output (HOME, TMPDIR, cache_dir, output and "
                     "target folders; the work folder is removed)", f"max {total} B per render"
                     + (f" ({', '.join(files[:3])})" if files else ""), _met(total == 0)))
    yardsticks = {"real-720p-swap": (0.10, "equal settings, 720p swap ≥ 0.10 × floor (2 × FaceFusion)"),
                  "real-1080p-swap": (0.20, "equal settings, 1080p swap ≥ 0.20 × floor (2 × FaceFusion)"),
                  "real-720p-low": (0.15, "profile low's own settings, 720p ≥ 0.15 × floor (3 × FaceFusion)")}
    for name, (need, text) in yardsticks.items():
        c = cases.get(name)
        if c and not c.error and c.ratio is not None:
            rows.append((text, f"{c.fps:.2f} / {c.floor_fps:.1f} fps = {c.ratio:.3f}", _met(c.ratio >= need)))
    for c in cases.values():
        if c.name in REAL_CASES and not c.error and c.bound_ratio is not None:
            rows.append((f"{c.name} ≥ 0.85 of its compute bound",
                         f"median of each run / its own bound {c.bound_ratio:.2f} (medians "
                         f"{c.fps:.2f} / {c.bound['fps']:.2f} fps)",
                         _met(c.bound_ratio >= 0.85)))
    ttffs = [(c.name, c.ttff) for c in cases.values()
             if not c.error and c.ttff is not None and c.name not in REAL_CASES]
    if ttffs:
        worst = max(ttffs, key=lambda t: t[1])
        rows.append(("time to first frame ≤ 2 s, models cached",
                     f"worst {worst[1]:.2f} s ({worst[0]})", _met(worst[1] <= 2.0)))
    return rows


# ---------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    t_begin = time.perf_counter()
    import onnxruntime  # noqa: F401 - fail early with a clear error when missing

    import standins
    import media_fixtures as mf

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
    if any(c in REAL_CASES for c in args.cases) and realistic.yunet_path() is None:
        log(f"the realistic cases need the real YuNet detector at {realistic.YUNET}; skipped")
        args.cases = [c for c in args.cases if c not in REAL_CASES]

    # -- clips --------------------------------------------------------------------------------
    s, ms = args.seconds, args.memory_seconds
    specs = {"720p": ClipSpec(f"720p {s:g}s", 1280, 720, s),
             "1080p": ClipSpec(f"1080p {s:g}s", 1920, 1080, s),
             "720p-long": ClipSpec(f"720p {ms:g}s", 1280, 720, ms)}
    need = {"null-720p": ["720p"], "null-1080p": ["1080p"], "models-720p": ["720p"],
            "overlap-720p": ["720p"], "memory-60s": ["720p-long", "720p"]}
    log("clips:")
    clips: dict[str, Clip] = {}
    for case in args.cases:
        for k in need.get(case, []):
            if k not in clips:
                clips[k] = make_clip(specs[k], clips_dir, args.fresh_clips)
    rs = args.real_seconds
    for case in args.cases:
        if case in REAL_CASES:
            k = "photo-1080p" if "1080p" in case else "photo-720p"
            if k not in clips:
                spec = ClipSpec(f"{k} {rs:g}s", 1920 if "1080p" in k else 1280,
                                1080 if "1080p" in k else 720, rs)
                path, n = realistic.real_clip(clips_dir, spec.width, spec.height, rs,
                                              args.fresh_clips, log)
                clips[k] = Clip(spec, path, n, n, n)
    source = work / "source.jpg"
    mf.make_source_image(source)

    # -- model sets ---------------------------------------------------------------------------
    model_dirs: dict[str, Path] = {}
    envs: dict[str, Env] = {}
    worker_env = {}
    for kv in args.worker_env:
        k, sep, v = kv.partition("=")
        if not sep:
            log(f"--worker-env {kv}: expected KEY=VALUE")
            return 2
        worker_env[k] = v
    patches = ("no-spin",) if args.ort_no_spin else ()

    def model_set(name: str, **knobs: Any) -> None:
        d = work / "models" / name
        standins.write_standins(d, **knobs)
        model_dirs[name] = d
        envs[name] = Env(work / "env" / name, extra=worker_env)

    model_set("null", null=True)
    if any(c in REAL_CASES for c in args.cases):
        model_dirs["real"] = realistic.real_models(home, log)
        envs["real"] = Env(work / "env" / "real", extra=worker_env)
        real_source = realistic.source_image(work / "photo-source.png")
    enhance = args.enhance or args.enhancer_gflops > 0
    model_set("models", null=args.null, gflops={
        "scrfd_2.5g": args.detector_gflops, "arcface_w600k_r50": args.embedder_gflops,
        **swapper_knob(args.swapper_gflops), "gfpgan_1.4": args.enhancer_gflops})

    base = {"profile": args.profile, "execution.providers": args.providers, "progress": "off",
            "select.mode": args.select, "source": str(source)}
    for kv in args.set:
        k, sep, v = kv.partition("=")
        if not sep:
            log(f"--set {kv}: expected KEY=VALUE")
            return 2
        base[k.strip()] = v

    def overrides_for(models: str) -> dict[str, str]:
        ov = dict(base, **{"models.dir": str(model_dirs[models])})
        if models == "models" and enhance:
            ov["enhance.enabled"] = "true"
        return ov

    scan_tmp = [system_tmp] if system_tmp.is_dir() else []
    warmed: set[str] = set()
    failures = 0

    def warm(models: str, ov: dict[str, str] | None = None, clip: Clip | None = None) -> None:
        # each model file (swapper precision, enhancer) is verified and its caches filled once,
        # and each clip's probe is cached once (cache_dir/probe is keyed by the target)
        clip = clip or clips.get("720p") or next(iter(clips.values()))
        key = "|".join([models, str(clip.path)] + [f"{k}={(ov or {}).get(k, '')}" for k in
                                   ("profile", "swap.precision", "enhance.enabled", "detect.model")])
        if key in warmed:
            return
        ov = dict(ov or overrides_for(models), trim="0-1")   # 1 s fills every cache
        t0 = time.perf_counter()
        run_worker(ov, envs[models], work / "out" / f"warm-{models}", clip.path, scan_tmp=[],
                   exclude_tmp=[], timeout=args.timeout, patches=patches)
        warmed.add(key)
        log(f"  warm-up of the {models!r} model set (1 s of {clip.spec.name}): {time.perf_counter() - t0:.1f}s")

    def measure(case: Case) -> None:
        nonlocal failures
        clip = clips[case.clip]
        case.frame_bytes = clip.spec.width * clip.spec.height * 3
        case.clip_name = clip.spec.name
        t_case = time.perf_counter()
        log(f"\n== {case.name}: {clip.spec.name} ({clip.frames} frames, {clip.faces} faces), "
            f"{case.models!r} model set" + (f" -- {case.note}" if case.note else ""))
        ov = case.overrides or overrides_for(case.models)
        try:
            warm(case.models, ov, clip)
            for i in range(args.repeat):
                if case.floor:
                    case.floors.append(run_floor(clip, work / "out" / f"{case.name}-floor",
                                                 case.floor_overrides or ov))
                    if args.relay:
                        case.relays.append(run_floor(clip, work / "out" / f"{case.name}-relay",
                                                     case.floor_overrides or ov, relay=True))
                r = run_worker(ov, envs[case.models],
                               work / "out" / f"{case.name}-{i}", clip.path, scan_tmp=scan_tmp,
                               exclude_tmp=exclude_tmp, timeout=args.timeout, patches=patches)
                if r["frames"] != clip.frames:
                    raise WorkerFailed(f"rendered {r['frames']} frames, the clip has {clip.frames}")
                case.runs.append(r)
                if case.after_run is not None:
                    case.after_run(case)
        except WorkerFailed as exc:
            case.error = str(exc)
            failures += 1
        report_case(case)
        log(f"  ({case.name} took {time.perf_counter() - t_case:.0f}s)")

    cases: dict[str, Case] = {}
    overlap: dict[str, Any] | None = None
    if "null-720p" in args.cases:
        cases["null-720p"] = Case("null-720p", "720p", "null", floor=True)
        measure(cases["null-720p"])
    if "null-1080p" in args.cases:
        cases["null-1080p"] = Case("null-1080p", "1080p", "null", floor=True)
        measure(cases["null-1080p"])
    if "models-720p" in args.cases:
        knobs = (f"swapper {args.swapper_gflops:g}, enhancer {args.enhancer_gflops:g}"
                 f"{' (on)' if enhance else ' (off)'}, detector {args.detector_gflops:g}, "
                 f"embedder {args.embedder_gflops:g} GFLOP{', null' if args.null else ''}")
        cases["models-720p"] = Case("models-720p", "720p", "models", floor=False, note=f"models-720p: {knobs}")
        measure(cases["models-720p"])
    if "overlap-720p" in args.cases:
        ref = cases.get("null-720p")
        case = Case("overlap-720p", "720p", "overlap", floor=True)
        cases[case.name] = case
        try:
            if ref and ref.floor_fps:
                floor_ms = 1000.0 / ref.floor_fps
            else:
                floor_ms = 1000.0 / run_floor(clips["720p"], work / "out" / "calib-floor",
                                              overrides_for("null"))["fps"]
            clip = clips["720p"]
            swaps = (clip.faces if args.select == "many" else clip.face_frames) / clip.frames
            if args.overlap_gflops is not None:
                g = args.overlap_gflops
                d = work / "calib-given"
                standins.write_standins(d, gflops=swapper_knob(g))
                s_wall, s_cpu = time_swapper(d, work / "calib-cache", base)
            else:
                log(f"\ncalibrating the overlap swapper to ~{floor_ms / swaps:.1f} ms per call "
                    f"({swaps:.2f} swaps per frame → one floor frame, {floor_ms:.1f} ms, per frame)")
                g, s_wall, s_cpu = calibrate_overlap(work, base, floor_ms / swaps,
                                                     min_s=0.3 if args.quick else 0.6)
            log(f"  swapper +{g:.2f} GFLOP: {s_wall:.1f} ms per call alone ({s_cpu:.1f} ms CPU)")
            case.note = (f"overlap-720p: swapper +{g:.2f} GFLOP = {s_wall:.1f} ms per call alone, "
                         f"{s_wall * swaps:.1f} ms per frame ({swaps:.2f} swaps per frame), "
                         f"calibrated to one floor frame ({floor_ms:.1f} ms)")
            model_set("overlap", gflops=swapper_knob(g))
            measure(case)
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
            failures += 1
            report_case(case)
    for name in REAL_CASES:
        if name not in args.cases:
            continue
        res = "1080p" if "1080p" in name else "720p"
        ov = dict(realistic.LOW_SETTINGS if name.endswith("-low") else realistic.EQUAL_SETTINGS)
        ov.update({"execution.providers": args.providers, "progress": "off",
                   "source": str(real_source), "models.dir": str(model_dirs["real"])})
        if name.endswith("-enhance"):
            ov["enhance.enabled"] = "true"
        ov.update(kv.split("=", 1) for kv in args.set)
        floor_ov = dict(ov, **{k: realistic.EQUAL_SETTINGS[k] for k in
                               ("encode.codec", "encode.preset", "encode.crf")})
        case = Case(name, f"photo-{res}", "real", floor=True, overrides=ov, floor_overrides=floor_ov,
                    note=f"{name}: " + " ".join(f"{k}={v}" for k, v in ov.items()
                                                if k not in ("source", "models.dir", "progress")))
        alone_ov = dict(ov, cache_dir=str(envs["real"].cache))

        def after(c: Case, alone_ov: dict[str, str] = alone_ov) -> None:
            try:
                c.alone_runs.append(realistic.time_alone(alone_ov, clips[c.clip].path, cores()))
            except Exception as exc:  # noqa: BLE001 - the bound falls back to one timing
                log(f"  timing the models alone failed: {exc}")
        case.after_run = after
        cases[name] = case
        measure(case)
        if case.error or not case.runs:
            continue
        try:
            threads_used = int(case.med(lambda r: r.get("ort_threads") or 0) or 0)
            if case.alone_runs:
                case.alone[str(cores())] = {k: median([a.get(k) for a in case.alone_runs]) or 0.0
                                            for k in case.alone_runs[0]}
            for t in sorted({cores(), threads_used} - {0} - {int(k) for k in case.alone}):
                case.alone[str(t)] = realistic.time_alone(alone_ov, clips[case.clip].path, t)
            floor_ms = 1000.0 / case.floor_fps
            case.bound = realistic.bound(case.alone[str(cores())], case.calls_per_frame(), floor_ms)
            report_real(case, threads_used)
        except Exception as exc:  # noqa: BLE001 - a failed side measurement must not lose the case
            log(f"  compute bound of {name} failed: {exc}")
    if "memory-60s" in args.cases:
        case = Case("memory-60s", "720p-long", "null", floor=False,
                    note="memory-60s uses null models (the 60 s clip with real compute would not fit "
                         "the time budget); compare with null-720p")
        cases[case.name] = case
        measure(case)

    # -- optional profiles --------------------------------------------------------------------
    if args.pyinstrument:
        args.pyinstrument.mkdir(parents=True, exist_ok=True)
        for c in cases.values():
            if c.error or c.name == "memory-60s":
                continue
            path = args.pyinstrument.resolve() / f"{c.name}.txt"
            try:
                run_worker(overrides_for(c.models), envs[c.models], work / "out" / f"{c.name}-prof",
                           clips[c.clip].path, scan_tmp=[], exclude_tmp=[], timeout=args.timeout,
                           pyinstrument=path, patches=patches)
                log(f"pyinstrument profile of {c.name}: {path}")
            except WorkerFailed as exc:
                log(f"pyinstrument run of {c.name} failed: {exc}")

    # -- summary ------------------------------------------------------------------------------
    log("\n== targets")
    for t in targets(cases, overlap):
        log(f"  {t[0]}: {t[1]} -- met: {t[2].strip('*')}")
    log("\n== summary (markdown)\n")
    log(summary(cases, args, info, overlap))
    log(f"\nbench finished in {time.perf_counter() - t_begin:.0f}s"
        + (f"; {failures} case(s) FAILED" if failures else ""))

    if args.json:
        def strip(c: Case) -> dict:
            return {"name": c.name, "clip": c.clip, "models": c.models, "note": c.note,
                    "error": c.error, "runs": c.runs, "floors": c.floors, "relays": c.relays}
        args.json.write_text(json.dumps({"info": info, "args": {k: str(v) for k, v in vars(args).items()},
                                         "overlap": overlap,
                                         "cases": [strip(c) for c in cases.values()]}, indent=1))
    if not args.keep and not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
