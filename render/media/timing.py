"""A target's frame times, counted once from its video packets (a demux, not a decode)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Mapping

from render.errors import MediaError

from .ffprobe import as_float, as_fraction, as_int, run_ffprobe
from .info import MediaInfo
from .stderr import last_meaningful_line


@dataclass(frozen=True)
class FrameTimes:
    """The video stream's frames as the packets tell them.

    - ``count``: frames the renderer will plan for: the container's own count where it records one
      (mp4/mov ``nb_frames``), else the packets counted; ``readable`` is the packets actually read
      (fewer than ``count`` when the file is truncated).
    - ``pts``: each readable frame's presentation time in seconds from the first frame, in
      presentation order (``pts[0] == 0``).
    - ``first``: the first frame's presentation time in seconds from the container's start (what an
      input ``-ss`` is measured from).
    - ``cfr``: every frame interval equals 1/fps within one tick of the time base (or 1 ms).
    - ``keys``: each keyframe's (presentation, decoding) time, in seconds from the first frame like
      ``pts`` (its packet lies at its decoding time, earlier when frames are reordered; empty when
      not known).
    """

    count: int
    readable: int
    pts: tuple[float, ...]
    first: float
    cfr: bool
    declared: int | None = None
    keys: tuple[tuple[float, float], ...] = ()


def _time_base(value: Any) -> Fraction:
    f = as_fraction(value)
    return f if f is not None else Fraction(1, 1000)


def frame_times(info: MediaInfo) -> FrameTimes:
    """Count the frames of ``info``'s video stream from its packets, with their timestamps."""
    if info.is_image:
        return FrameTimes(count=1, readable=1, pts=(0.0,), first=0.0, cfr=True, declared=1)
    stream = "v:0" if info.video_index is None else str(info.video_index)
    argv = ["ffprobe", "-v", "error", "-select_streams", stream,
            "-show_entries", "stream=time_base,nb_frames:format=start_time:packet=pts,dts,flags",
            "-of", "json", info.path]
    proc = run_ffprobe(argv, info.path)
    try:
        data = json.loads(proc.stdout or "{}")
    except ValueError:
        data = {}
    streams = data.get("streams") or [{}]
    return times_from_packets(info, streams[0], data.get("format") or {}, data.get("packets") or (),
                              proc.stderr or "")


def times_from_packets(info: MediaInfo, stream: Mapping[str, Any], fmt: Mapping[str, Any],
                       packets, stderr: str) -> FrameTimes:
    """The frame times of ``info``'s video stream from its ffprobe stream entry and packets."""
    tb = _time_base(stream.get("time_base"))
    declared = as_int(stream.get("nb_frames"))
    ticks, key_ticks = [], []
    for p in packets:
        flags = str(p.get("flags", ""))
        if "D" in flags:   # discarded by an edit list: never decoded into a frame
            continue
        t = as_int(p.get("pts"))
        if t is None:
            t = as_int(p.get("dts"))
        if t is not None:
            ticks.append(t)
            if "K" in flags:
                d = as_int(p.get("dts"))
                key_ticks.append((t, t if d is None else d))
    partial = "partial file" in stderr
    if ticks and partial:
        ticks.pop()   # the file ends inside this packet: it cannot be decoded
    if not ticks:
        reason = last_meaningful_line(stderr) or "no video packets"
        raise MediaError(f"cannot read video {info.path}: {reason}")
    ticks.sort()
    if partial and len(ticks) > 2:
        # frames after a lost one (reordered B-frames past the cut) are not a readable run: keep
        # the frames up to the first gap
        steps = sorted(b - a for a, b in zip(ticks, ticks[1:]))
        usual = steps[len(steps) // 2]
        for i, (a, b) in enumerate(zip(ticks, ticks[1:])):
            if b - a > 1.5 * usual:
                ticks = ticks[:i + 1]
                break
    start = as_float(fmt.get("start_time")) or 0.0
    first = float(ticks[0] * tb) - start
    pts = tuple(round(float((t - ticks[0]) * tb), 6) for t in ticks)
    cfr = True
    if len(ticks) > 1 and info.fps:
        step = 1 / info.fps
        slack = max(tb, Fraction(1, 1000))
        cfr = all(abs((b - a) * tb - step) <= slack for a, b in zip(ticks, ticks[1:]))
    readable = len(ticks)
    count = declared if declared and declared > 0 else readable
    keys = tuple((round(float((t - ticks[0]) * tb), 6), round(float((d - ticks[0]) * tb), 6))
                 for t, d in sorted(key_ticks))
    return FrameTimes(count=count, readable=readable, pts=pts, first=round(max(0.0, first), 6),
                      cfr=cfr, declared=declared, keys=keys)
