"""A written file's streams, read to the end through the demuxer: what verifies an output."""
from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass

from render.errors import MediaError, RenderFailed

from .ffprobe import as_float, as_int, stream_duration
from .stderr import last_meaningful_line


@dataclass(frozen=True)
class StreamCount:
    """One stream of a written file, read to its end through the demuxer (``-count_packets``)."""

    kind: str               # 'video' | 'audio' | ...
    codec: str
    packets: int
    duration: float | None  # seconds


def count_streams(path: str | os.PathLike, *, decode_keyframes: bool = False) -> list[StreamCount]:
    """Every stream of ``path`` with its packets counted by reading the file to the end: a file
    cut short (no moov, a truncated cluster) fails here. MediaError when it cannot be read.
    ``decode_keyframes``: the same pass also decodes every video keyframe; a keyframe that does
    not decode (or none at all) is a MediaError."""
    path = os.fspath(path)
    argv = ["ffprobe", "-v", "error", "-count_packets"]
    if decode_keyframes:
        argv += ["-skip_frame", "nokey", "-count_frames"]
    argv += ["-show_entries", "stream=codec_type,codec_name,nb_read_packets,nb_read_frames,"
             "duration,start_time:stream_tags=DURATION:format=duration", "-of", "json", path]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              timeout=600, check=False)
    except FileNotFoundError:
        raise RenderFailed("ffprobe not found: install ffmpeg (it provides ffprobe)") from None
    if proc.returncode != 0:
        raise MediaError(f"cannot read {path}: {last_meaningful_line(proc.stderr) or 'ffprobe failed'}")
    try:
        data = json.loads(proc.stdout or "{}")
    except ValueError:
        raise MediaError(f"cannot read {path}: ffprobe output unreadable") from None
    fmt_duration = as_float((data.get("format") or {}).get("duration"))
    if decode_keyframes:
        errors = last_meaningful_line(proc.stderr)
        videos = [s for s in data.get("streams") or () if s.get("codec_type") == "video"]
        if errors or any(not as_int(s.get("nb_read_frames")) for s in videos):
            raise MediaError(f"cannot decode {path}: {errors or 'no keyframe decodes'}")
    out = []
    for s in data.get("streams") or ():
        out.append(StreamCount(kind=str(s.get("codec_type") or ""), codec=str(s.get("codec_name") or ""),
                               packets=as_int(s.get("nb_read_packets")) or 0,
                               duration=stream_duration(s) or fmt_duration))
    return out
