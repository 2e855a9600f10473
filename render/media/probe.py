"""Probe a target with ffprobe (through ffmpeg-python) into an immutable :class:`MediaInfo`; with
its frame times (:mod:`.timing`) from the same ffprobe run, kept in the cache.

Sizes are DISPLAY sizes: ffmpeg autorotates while decoding, so a clip stored 1920x1080 with a
90/270 degree display matrix decodes to 1080x1920 frames, and that is what ``width``/``height`` say.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Mapping

import ffmpeg

from render.cache import load_json, save_json
from render.errors import MediaError, RenderFailed

from .ffprobe import as_float, as_fraction, as_int, run_ffprobe, stream_duration, tag_value
from .formats import IMAGE_DEMUXERS, STILL_CODECS
from .info import AudioStream, MediaInfo
from .stderr import last_meaningful_line
from .timing import FrameTimes, times_from_packets
from .tools import version_text

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------------------------
# probe

def _rotation(stream: Mapping[str, Any]) -> int:
    for side in stream.get("side_data_list") or ():
        if "rotation" in side:
            r = as_float(side.get("rotation"))
            if r is not None:
                return int(round(r)) % 360
    tag = as_float(tag_value(stream.get("tags"), "rotate"))
    if tag is not None:  # legacy tag is clockwise; report counterclockwise like the matrix
        return int(round(-tag)) % 360
    return 0


def _probe_json(path: str) -> dict:
    try:
        return ffmpeg.probe(path)
    except ffmpeg.Error as exc:
        reason = last_meaningful_line(exc.stderr)
        if reason.startswith(path + ":"):
            reason = reason[len(path) + 1:].strip()
        raise MediaError(f"cannot read video {path}: {reason or 'ffprobe failed'}") from None
    except FileNotFoundError:
        raise RenderFailed("ffprobe not found: install ffmpeg (it provides ffprobe)") from None
    except ValueError as exc:  # undecodable JSON
        raise MediaError(f"cannot read video {path}: ffprobe output unreadable ({exc})") from None


def _check_path(path: str) -> None:
    if not os.path.exists(path):
        raise MediaError(f"target not found: {path}")
    if os.path.isdir(path):
        raise MediaError(f"cannot read video {path}: is a directory")


def probe(path: str | os.PathLike) -> MediaInfo:
    """Probe ``path``. MediaError when it is missing, unreadable or has no video stream."""
    path = os.fspath(path)
    _check_path(path)
    return _media_info(path, _probe_json(path))


def probe_with_times(path: str | os.PathLike, *, cache_dir: str | os.PathLike | None = None,
                     content_sha256: Callable[[], str] | None = None
                     ) -> tuple[MediaInfo, FrameTimes]:
    """:func:`probe` and :func:`frame_times` from ONE ffprobe run (streams, format and packets):
    each ffprobe start costs time that a render of a short clip notices.

    With ``cache_dir`` and ``content_sha256`` (the file's SHA-256, asked only once the file is
    known to exist), ffprobe's answer is kept in ``cache_dir/probe`` under that SHA-256 and this
    ffprobe's identity: a resumed render, every shard of a sharded one and the assembly read it
    back instead of listing every packet again (which takes longer the longer the target).
    """
    path = os.fspath(path)
    _check_path(path)
    argv = ["ffprobe", "-v", "error", "-show_format", "-show_streams",
            "-show_entries", "packet=stream_index,pts,dts,flags", "-of", "json", path]
    cached = _probe_cache_path(cache_dir, content_sha256, argv[:-1])
    answer = load_json(cached) if cached is not None else None
    if isinstance(answer, dict) and isinstance(answer.get("stdout"), str) \
            and isinstance(answer.get("stderr"), str):
        stdout, stderr = answer["stdout"], answer["stderr"]
    else:
        proc = run_ffprobe(argv, path)
        if proc.returncode != 0:
            reason = last_meaningful_line(proc.stderr)
            if reason.startswith(path + ":"):
                reason = reason[len(path) + 1:].strip()
            raise MediaError(f"cannot read video {path}: {reason or 'ffprobe failed'}")
        stdout, stderr = proc.stdout or "", proc.stderr or ""
        if cached is not None:
            save_json(cached, {"stdout": stdout, "stderr": stderr})
    try:
        data = json.loads(stdout or "{}")
    except ValueError as exc:
        raise MediaError(f"cannot read video {path}: ffprobe output unreadable ({exc})") from None
    info = _media_info(path, data)
    if info.is_image:
        return info, FrameTimes(count=1, readable=1, pts=(0.0,), first=0.0, cfr=True, declared=1)
    streams = data.get("streams") or []
    stream = next((st for st in streams if as_int(st.get("index")) == info.video_index), {})
    packets = [pk for pk in data.get("packets") or () if as_int(pk.get("stream_index")) == info.video_index]
    return info, times_from_packets(info, stream, data.get("format") or {}, packets, stderr)


def _probe_cache_path(cache_dir: str | os.PathLike | None, content_sha256: Callable[[], str] | None,
                      argv: list[str]) -> Path | None:
    """Where ffprobe's answer ``argv`` about a file of that content is kept; None without a cache
    or when the file cannot be hashed (ffprobe then says what is wrong with it)."""
    if cache_dir is None or content_sha256 is None:
        return None
    exe = shutil.which(argv[0])
    try:
        content = content_sha256()
        st = os.stat(exe) if exe else None
    except OSError:
        return None
    # the bytes ffprobe writes depend on its build (its binary and the libraries of its release)
    tool = [os.path.realpath(exe), st.st_size, st.st_mtime_ns, st.st_ino] if exe and st else None
    key = hashlib.sha256(json.dumps([content, tool, version_text("ffmpeg").split("\n", 1)[0],
                                     argv]).encode()).hexdigest()
    return Path(cache_dir) / "probe" / f"{key[:40]}.json.gz"


def _media_info(path: str, data: Mapping[str, Any]) -> MediaInfo:
    streams = data.get("streams") or []
    fmt = data.get("format") or {}

    video = None
    for s in streams:
        if s.get("codec_type") == "video" and not (s.get("disposition") or {}).get("attached_pic"):
            video = s
            break
    if video is None:
        raise MediaError(f"cannot read video {path}: no video stream")
    width, height = as_int(video.get("width")), as_int(video.get("height"))
    if not width or not height or width <= 0 or height <= 0:
        raise MediaError(f"cannot read video {path}: video stream has no size")

    rotation = _rotation(video)
    if rotation in (90, 270):
        width, height = height, width

    container = str(fmt.get("format_name") or "")
    codec = str(video.get("codec_name") or "")
    nb_frames = as_int(video.get("nb_frames")) or as_int(tag_value(video.get("tags"), "NUMBER_OF_FRAMES"))
    first_format = container.split(",")[0]
    # the kind comes from the content: a video named .png is a video
    is_image = first_format in IMAGE_DEMUXERS or first_format.endswith("_pipe")

    fps = as_fraction(video.get("avg_frame_rate")) or as_fraction(video.get("r_frame_rate"))
    duration = stream_duration(video) or as_float(fmt.get("duration")) or 0.0
    if not is_image and codec in STILL_CODECS:  # a single-frame still-image stream (e.g. mjpeg in mkv)
        frames = nb_frames if nb_frames else (duration * float(fps) if fps and duration else 1)
        is_image = frames <= 1.5
    if fps is None:
        if nb_frames and duration > 0:
            fps = Fraction(nb_frames / duration).limit_denominator(1001)
        elif is_image:
            fps = Fraction(25)
        else:
            raise MediaError(f"cannot read video {path}: unknown frame rate")

    if is_image:
        frame_count = 1
    elif nb_frames and nb_frames > 0:
        frame_count = nb_frames
    else:
        frame_count = max(1, int(round(duration * float(fps)))) if duration > 0 else 0

    audio = tuple(
        AudioStream(
            index=int(s.get("index", 0)),
            codec=str(s.get("codec_name") or "unknown"),
            channels=as_int(s.get("channels")) or 0,
            sample_rate=as_int(s.get("sample_rate")) or 0,
            duration=stream_duration(s),
        )
        for s in streams
        if s.get("codec_type") == "audio"
    )
    if is_image:
        audio = ()

    v_start, f_start = as_float(video.get("start_time")), as_float(fmt.get("start_time"))
    video_start = max(0.0, v_start - f_start) if v_start is not None and f_start is not None else 0.0

    def color(key: str) -> str | None:
        value = video.get(key)
        return None if value in (None, "", "unknown", "reserved") else str(value)

    info = MediaInfo(
        path=path,
        kind="image" if is_image else "video",
        width=width,
        height=height,
        fps=fps,
        rotation=rotation,
        pix_fmt=video.get("pix_fmt"),
        frame_count=frame_count,
        duration=float(duration),
        audio=audio,
        container=container,
        video_start=round(video_start, 6),
        color_space=color("color_space"),
        color_primaries=color("color_primaries"),
        color_transfer=color("color_transfer"),
        color_range=color("color_range"),
        video_index=as_int(video.get("index")),
    )
    log.debug("probed %s: %s", path, info)
    return info
