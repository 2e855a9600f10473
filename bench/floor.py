"""The ffmpeg floor: the target decoded to a raw pipe and encoded again with the render's own
decoder and encoder settings -- what the renderer would cost with free inference."""
from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from bench.clips import Clip
from bench.machine import busy_seconds, other_load
from bench.measure import WorkerFailed
from bench.monitor import TreeMonitor


def floor_argv(target: Path, output: Path, overrides: dict[str, str]) -> tuple[list[str], list[str]]:
    """The render's own plan (one segment: the whole clip) gives the decoder and the encoder
    settings; the floor encodes in one pass with the audio, with the arguments the render's own
    encoder gets for a plan of one segment (less the synthetic-media tags)."""
    from render.config import load_config
    from render.media.probe import probe
    from render.media.timing import frame_times
    from render.media.video_args import EncodeSettings, encode_args
    from render.plan import Identity, plan_render
    from render.planner import legacy_vsync

    cfg = load_config({**overrides, "segment.seconds": "3600"}, env={})
    info = probe(target)
    plan = plan_render(cfg, source=target, target=target, output=output, info=info,
                       times=frame_times(info), legacy_vsync=legacy_vsync(),
                       identity=Identity("", "", None, {}, {}))
    enc = plan.encode
    video = EncodeSettings(codec=enc["codec"], crf=enc["crf"], preset=enc["preset"],
                           pix_fmt=enc["pix_fmt"], extra=tuple(enc["extra"]), threads=enc["threads"])
    dec = list(plan.segments[0].decode)
    enc_argv = encode_args(info, output, width=plan.width, height=plan.height, fps=info.fps,
                           video=video, legacy_vsync=legacy_vsync())
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
