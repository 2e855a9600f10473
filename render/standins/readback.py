"""Reading media back for checks, with ffprobe and ffmpeg directly (independently of
``render.media``): frame counts, rates, sizes, durations and codecs; decoded frames."""
from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from fractions import Fraction
from typing import Optional, Union

import numpy as np

PathLike = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class ProbeCounts:
    frames: Optional[int]
    fps: Optional[Fraction]
    width: Optional[int]
    height: Optional[int]
    duration: Optional[float]  # container duration, seconds
    video_codec: Optional[str]
    audio_codec: Optional[str]
    audio_duration: Optional[float]  # seconds; None when there is no audio stream


def _ffprobe(path: PathLike, count: bool) -> dict:
    cmd = ["ffprobe", "-v", "error"]
    if count:
        cmd += ["-count_frames"]
    cmd += ["-show_entries",
            "stream=index,codec_type,codec_name,width,height,r_frame_rate,avg_frame_rate,nb_frames,"
            "nb_read_frames,duration:stream_tags=DURATION:format=duration",
            "-of", "json", str(path)]
    res = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if res.returncode != 0:
        raise RuntimeError(f"ffprobe failed on {path}: {res.stderr.decode('utf-8', 'replace').strip()}")
    return json.loads(res.stdout.decode("utf-8"))


def _float(v) -> Optional[float]:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _tag_duration(stream: dict) -> Optional[float]:
    tag = (stream.get("tags") or {}).get("DURATION")
    if not tag:
        return None
    try:
        h, m, s = tag.split(":")
        return int(h) * 3600 + int(m) * 60 + float(s)
    except ValueError:
        return None


def _rate(v) -> Optional[Fraction]:
    try:
        r = Fraction(v)
    except (TypeError, ValueError, ZeroDivisionError):
        return None
    return r if r > 0 else None


def probe_counts(path: PathLike) -> ProbeCounts:
    """Frame count (ffprobe -count_frames), fps, size, durations and codecs of a media file."""
    info = _ffprobe(path, count=True)
    streams = info.get("streams", [])
    v = next((s for s in streams if s.get("codec_type") == "video"), None)
    a = next((s for s in streams if s.get("codec_type") == "audio"), None)
    fmt_dur = _float((info.get("format") or {}).get("duration"))
    frames = fps = width = height = None
    if v is not None:
        nr = v.get("nb_read_frames", v.get("nb_frames"))
        frames = int(nr) if nr not in (None, "N/A") else None
        fps = _rate(v.get("avg_frame_rate")) or _rate(v.get("r_frame_rate"))
        width, height = v.get("width"), v.get("height")
    audio_duration = None
    if a is not None:
        audio_duration = _float(a.get("duration")) or _tag_duration(a) or fmt_dur
    return ProbeCounts(frames=frames, fps=fps, width=width, height=height, duration=fmt_dur,
                       video_codec=v.get("codec_name") if v else None,
                       audio_codec=a.get("codec_name") if a else None, audio_duration=audio_duration)


def read_frames(path: PathLike, *, max_frames: Optional[int] = None) -> np.ndarray:
    """Decode every frame (or the first max_frames) of a video or image to [n, h, w, 3] bgr24."""
    info = _ffprobe(path, count=False)
    v = next((s for s in info.get("streams", []) if s.get("codec_type") == "video"), None)
    if v is None:
        raise RuntimeError(f"no video stream in {path}")
    w, h = int(v["width"]), int(v["height"])
    cmd = ["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-i", str(path), "-map", "0:v:0",
           "-vsync", "0"]
    if max_frames is not None:
        cmd += ["-frames:v", str(int(max_frames))]
    cmd += ["-f", "rawvideo", "-pix_fmt", "bgr24", "pipe:1"]
    res = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if res.returncode != 0:
        raise RuntimeError(f"ffmpeg failed decoding {path}: {res.stderr.decode('utf-8', 'replace').strip()}")
    frame_bytes = w * h * 3
    n = len(res.stdout) // frame_bytes
    return np.frombuffer(bytearray(res.stdout[: n * frame_bytes]), dtype=np.uint8).reshape(n, h, w, 3)
