"""How a render's frames are cut into work: the frames a trim selects (and a truncated target
allows), segments whose bounds are multiples of ``detect.every``, where each segment's decoder
seeks, the rate grid a constant-frame-rate segment is put on, and which segments each shard
renders. Arithmetic over the probed frame times; nothing here touches a file."""
from __future__ import annotations

import math
from fractions import Fraction

from .config import Config, parse_trim
from .errors import MediaError, UsageError
from .media.probe import MediaInfo
from .media.timing import FrameTimes


def frame_range(cfg: Config, info: MediaInfo, times: FrameTimes) -> tuple[int, int, bool]:
    """[start, end) of the target's frames that the render covers, and whether allow_partial cut it.

    A target whose container promises more frames than can be read is truncated: an error unless
    ``allow_partial=true``, which renders the readable part.
    """
    total = times.count
    partial = False
    if times.readable < total:
        if not cfg.allow_partial:
            raise MediaError(f"target {info.path} ends at frame {times.readable} of {total} "
                             f"(file truncated?); allow_partial=true renders the "
                             f"{times.readable} readable frames")
        total, partial = times.readable, True
    trim = parse_trim(cfg.trim)
    if trim is None:
        return 0, total, partial
    if trim.unit == "f":
        start = int(trim.start)
        end = total if trim.end is None else min(int(trim.end), total)
    else:
        start = _frame_at(times, info.fps, trim.start, total)
        end = total if trim.end is None else _frame_at(times, info.fps, trim.end, total)
    if start >= total:
        at = f"frame {start}" if trim.unit == "f" else \
            f"{trim.start:g}s (frame {math.ceil(trim.start * float(info.fps) - 1e-6)})"
        raise UsageError(f"trim starts at {at}, past the end of {info.path} "
                         f"({total} frames, {info.duration:g}s)")
    if end <= start:
        raise UsageError(f"trim {cfg.trim} selects no frame of {info.path}")
    return start, end, partial


def _frame_at(times: FrameTimes, fps: Fraction, seconds: float, total: int) -> int:
    """The first frame shown at or after ``seconds`` from the first frame."""
    eps = 1e-6
    if times.cfr or not times.pts:
        return min(total, max(0, math.ceil(seconds * float(fps) - eps)))
    for i, t in enumerate(times.pts[:total]):
        if t >= seconds - eps:
            return i
    return total


def frame_time(times: FrameTimes, fps: Fraction, i: int) -> float:
    """Frame ``i``'s time in seconds from the first frame; past the last timestamp known, at
    ``fps``."""
    if i < len(times.pts):
        return times.pts[i]
    last = len(times.pts) - 1
    return (times.pts[last] if last >= 0 else 0.0) + (i - last) / float(fps)


#: containers whose seek lands near the time asked, not on a keyframe before it (MPEG transport
#: streams: decoding then starts at the next keyframe, after the segment's first frames): a
#: segment is decoded from well before it
INEXACT_SEEK = frozenset({"mpegts"})

#: seconds before a segment that an inexact seek aims at where the keyframes are not known
SEEK_BACK_UNKNOWN_KEYS = 10.0


def keyframe_seek(times: FrameTimes, fps: Fraction, a: int, seek: float
                  ) -> tuple[float | None, float]:
    """(where to seek, seconds of decoded frames to drop) so that decoding starts on the last
    keyframe shown at or before frame ``a``: at that keyframe's decoding time (its packet's place:
    the seek stops at the last packet at or before the time asked, so the decoder's first packet
    is the keyframe and nothing before it is decoded)."""
    ta = frame_time(times, fps, a)
    keys = [dts for pts, dts in times.keys if pts <= ta + 1e-6]
    start = times.first + (keys[-1] if keys else ta - SEEK_BACK_UNKNOWN_KEYS)
    if start <= 0:
        return None, seek        # from the file's start: no seek at all
    return start, seek - start


def grid_rate(times: FrameTimes, fps: Fraction) -> Fraction | None:
    """The rate the frames' own timestamps keep (every frame within a quarter of a frame of its
    place): the container's average ``fps`` where it does, else the usual rate nearest to theirs
    (30, 30000/1001 ...: an odd last frame's duration moves the average), else their own; None
    when none does."""
    n = len(times.pts)
    if n < 2 or times.pts[-1] <= 0:
        return None
    measured = (n - 1) / times.pts[-1]
    for rate in (Fraction(fps), Fraction(round(measured)), Fraction(round(measured * 1.001) * 1000, 1001),
                 Fraction(measured).limit_denominator(1001)):
        if rate > 0 and on_grid(times, rate, 0, n):
            return rate
    return None


def on_grid(times: FrameTimes, rate: Fraction, a: int, b: int) -> bool:
    """Whether frames [a, b) lie on ``rate``'s grid from frame a within a quarter of a frame, so
    that ffmpeg's constant-rate output (duplicating past half a frame late, dropping past 1.1
    early) gives every frame of an undamaged target once, as it comes."""
    step = 1 / float(rate)
    end = min(b, len(times.pts))
    if a >= end:
        return False
    base = times.pts[a]
    return all(abs(times.pts[i] - base - (i - a) * step) <= 0.25 * step for i in range(a, end))


def segment_bounds(start: int, end: int, length: int, every: int) -> list[tuple[int, int]]:
    """Split frames [start, end) into runs of ``length`` frames (rounded up to a multiple of
    ``every``), each boundary at start + a multiple of ``every`` (the detector's schedule restarts
    on each segment's first frame), the last run taking the rest."""
    every = max(1, every)
    length = max(every, -(-max(1, length) // every) * every)
    bounds = []
    a = start
    while a < end:
        b = min(end, a + length)
        bounds.append((a, b))
        a = b
    return bounds


def shard_segments(count: int, shards: int, index: int) -> list[int]:
    """The segments shard ``index`` of ``shards`` renders: a contiguous run (one seek into the
    target), the runs as even as whole segments allow."""
    if shards < 1 or not 0 <= index < shards:
        raise UsageError(f"shard {index} of {shards} does not exist (0 <= index < count)")
    return [i for i in range(count) if i * shards // count == index]


def shard_of(segment: int, count: int, shards: int) -> int:
    return segment * shards // count
