"""Probe a target with ffprobe (through ffmpeg-python) into an immutable :class:`MediaInfo`.

Sizes are DISPLAY sizes: ffmpeg autorotates while decoding, so a clip stored 1920x1080 with a
90/270 degree display matrix decodes to 1080x1920 frames, and that is what ``width``/``height`` say.
"""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Mapping

import ffmpeg

from render.cache import load_json, save_json
from render.errors import MediaError, RenderFailed

from .formats import IMAGE_DEMUXERS, STILL_CODECS

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AudioStream:
    """One audio stream of the target. ``index`` is the stream's index in the file (``-map 1:N``)."""

    index: int
    codec: str
    channels: int
    sample_rate: int
    duration: float | None = None


@dataclass(frozen=True)
class MediaInfo:
    """What the renderer needs to know about a target.

    - ``width``/``height``: display size (already swapped for rotation 90/270), i.e. the size of
      the frames the decoder produces.
    - ``fps``: ``avg_frame_rate`` (falling back to ``r_frame_rate``) as a Fraction, e.g. 30000/1001.
    - ``rotation``: 0/90/180/270, counterclockwise, ffprobe's display-matrix convention.
    - ``frame_count``: ``nb_frames`` when the container records it, else ``round(duration * fps)``:
      an ESTIMATE for variable-frame-rate files and for containers without a frame count
      (mkv/webm). Use it for progress bars, never to size or cut anything.
    - ``duration``: seconds of the video stream (container duration when the stream has none).
    - ``video_start``: seconds from the container's start to the first video timestamp (> 0 when
      the audio starts before the video; the encoder uses it to keep audio in sync).
    - ``color_*``: ffprobe's colour tags of the video stream (None when untagged).
    - ``video_index``: the video stream's index in the file (None: the first video stream).
    """

    path: str
    kind: str  # 'video' | 'image'
    width: int
    height: int
    fps: Fraction
    rotation: int
    pix_fmt: str | None
    frame_count: int
    duration: float
    audio: tuple[AudioStream, ...] = ()
    container: str = ""
    video_start: float = 0.0
    color_space: str | None = None
    color_primaries: str | None = None
    color_transfer: str | None = None
    color_range: str | None = None
    video_index: int | None = None

    @property
    def is_image(self) -> bool:
        return self.kind == "image"

    @property
    def has_audio(self) -> bool:
        return bool(self.audio)


# ----------------------------------------------------------------------------------------------
# ffmpeg stderr helpers (shared by reader/writer)

_GENERIC_PREFIXES = (
    "conversion failed",
    "last message repeated",    # ffmpeg's log de-duplication: the line before says what
    "exiting normally",
    "error initializing output stream",
    "could not write header for output file",
    "error while opening encoder",
    "error opening output file",
    "error opening output files",
    "error splitting the argument list",
    "error closing file",
    "received > 3 system signals",
    "nothing was written into output file",
)
_ADDRESS = re.compile(r" @ 0x[0-9a-fA-F]+\]")


def last_meaningful_line(text: str | bytes | None) -> str:
    """The last stderr line that says something specific (not 'Conversion failed!' & co).

    ``[libx264 @ 0x55d0...] msg`` becomes ``[libx264] msg``. Returns '' when there is nothing.
    """
    if not text:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    lines = [ln.strip() for ln in text.replace("\r", "\n").splitlines()]
    lines = [ln for ln in lines if ln]
    if not lines:
        return ""
    chosen = lines[-1]
    for ln in reversed(lines):
        body = _ADDRESS.sub("]", ln)
        if not body.lower().startswith(_GENERIC_PREFIXES) and body.strip(" -"):
            chosen = ln
            break
    return " ".join(_ADDRESS.sub("]", chosen).split())


@functools.lru_cache(maxsize=None)  # the installed binary does not change under us
def _version_text(cmd: str) -> str:
    try:
        return subprocess.run([cmd, "-hide_banner", "-version"] if "ffmpeg" in cmd else
                              [cmd, "--version"], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


@functools.lru_cache(maxsize=None)
def ffmpeg_output_pixel_formats(cmd: str = "ffmpeg") -> frozenset[str] | None:
    """The pixel formats ffmpeg can convert frames to (``-pix_fmts``, flag O), None when it
    cannot be asked."""
    try:
        text = subprocess.run([cmd, "-hide_banner", "-pix_fmts"], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    lines = text.splitlines()
    try:
        body = lines[next(i for i, ln in enumerate(lines) if ln.startswith("-----")) + 1:]
    except StopIteration:
        return None
    names = {parts[1] for parts in (ln.split() for ln in body)
             if len(parts) >= 2 and len(parts[0]) >= 2 and parts[0][1] == "O"}
    return frozenset(names) or None


def ffmpeg_version(cmd: str = "ffmpeg") -> tuple[int, int] | None:
    """(major, minor) of the installed ffmpeg, or None if it cannot be told (git builds).

    ``-fps_mode`` exists from 5.1 on and ``-vsync`` is gone in 9.0: pass
    ``legacy_vsync=(version < (5, 1))`` to the argument builders.
    """
    m = re.search(r"version\s+n?(\d+)\.(\d+)", _version_text(cmd))
    return (int(m.group(1)), int(m.group(2))) if m else None


# ----------------------------------------------------------------------------------------------
# probe

def _fraction(value: Any) -> Fraction | None:
    try:
        f = Fraction(str(value))
    except (ValueError, ZeroDivisionError, TypeError):
        return None
    return f if f > 0 else None


def _float(value: Any) -> float | None:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if f == f and f not in (float("inf"), float("-inf")) else None


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _tag(tags: Mapping[str, Any] | None, name: str) -> Any:
    """Case-insensitive tag lookup that also accepts language-suffixed keys (DURATION-eng)."""
    if not tags:
        return None
    name = name.lower()
    for key, value in tags.items():
        k = key.lower()
        if k == name or k.startswith(name + "-"):
            return value
    return None


def _hms(value: Any) -> float | None:
    """'00:01:02.500000000' (matroska DURATION tag) -> 62.5"""
    if not isinstance(value, str):
        return None
    m = re.fullmatch(r"\s*(\d+):(\d+):(\d+(?:\.\d+)?)\s*", value)
    if not m:
        return None
    return int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3))


def _stream_duration(stream: Mapping[str, Any]) -> float | None:
    """A stream's duration: ``duration``, else matroska's DURATION tag, which is the stream's END
    timestamp (so its start_time is subtracted)."""
    d = _float(stream.get("duration"))
    if d:
        return d
    end = _hms(_tag(stream.get("tags"), "DURATION"))
    if end is None:
        return None
    return round(max(0.0, end - max(0.0, _float(stream.get("start_time")) or 0.0)), 6) or None


def _rotation(stream: Mapping[str, Any]) -> int:
    for side in stream.get("side_data_list") or ():
        if "rotation" in side:
            r = _float(side.get("rotation"))
            if r is not None:
                return int(round(r)) % 360
    tag = _float(_tag(stream.get("tags"), "rotate"))
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
    each ffprobe start costs about 0.1 s, which a render of a short clip notices.

    With ``cache_dir`` and ``content_sha256`` (the file's SHA-256, asked only once the file is
    known to exist), ffprobe's answer is kept in ``cache_dir/probe`` under that SHA-256 and this
    ffprobe's identity: a resumed render, every shard of a sharded one and the assembly read it
    back instead of listing every packet again (0.14 s for 10 s of 720p, 0.66 s for 6 minutes,
    growing with the length).
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
        proc = _run_ffprobe(argv, path)
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
    stream = next((st for st in streams if _int(st.get("index")) == info.video_index), {})
    packets = [pk for pk in data.get("packets") or () if _int(pk.get("stream_index")) == info.video_index]
    return info, _frame_times(info, stream, data.get("format") or {}, packets, stderr)


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
    key = hashlib.sha256(json.dumps([content, tool, _version_text("ffmpeg").split("\n", 1)[0],
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
    width, height = _int(video.get("width")), _int(video.get("height"))
    if not width or not height or width <= 0 or height <= 0:
        raise MediaError(f"cannot read video {path}: video stream has no size")

    rotation = _rotation(video)
    if rotation in (90, 270):
        width, height = height, width

    container = str(fmt.get("format_name") or "")
    codec = str(video.get("codec_name") or "")
    nb_frames = _int(video.get("nb_frames")) or _int(_tag(video.get("tags"), "NUMBER_OF_FRAMES"))
    first_format = container.split(",")[0]
    # the kind comes from the content: a video named .png is a video
    is_image = first_format in IMAGE_DEMUXERS or first_format.endswith("_pipe")

    fps = _fraction(video.get("avg_frame_rate")) or _fraction(video.get("r_frame_rate"))
    duration = _stream_duration(video) or _float(fmt.get("duration")) or 0.0
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
            channels=_int(s.get("channels")) or 0,
            sample_rate=_int(s.get("sample_rate")) or 0,
            duration=_stream_duration(s),
        )
        for s in streams
        if s.get("codec_type") == "audio"
    )
    if is_image:
        audio = ()

    v_start, f_start = _float(video.get("start_time")), _float(fmt.get("start_time"))
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
        video_index=_int(video.get("index")),
    )
    log.debug("probed %s: %s", path, info)
    return info


# ----------------------------------------------------------------------------------------------
# frame timing: counted once from the packets (a demux, not a decode)

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
    f = _fraction(value)
    return f if f is not None else Fraction(1, 1000)


def frame_times(info: MediaInfo) -> FrameTimes:
    """Count the frames of ``info``'s video stream from its packets, with their timestamps."""
    if info.is_image:
        return FrameTimes(count=1, readable=1, pts=(0.0,), first=0.0, cfr=True, declared=1)
    stream = "v:0" if info.video_index is None else str(info.video_index)
    argv = ["ffprobe", "-v", "error", "-select_streams", stream,
            "-show_entries", "stream=time_base,nb_frames:format=start_time:packet=pts,dts,flags",
            "-of", "json", info.path]
    proc = _run_ffprobe(argv, info.path)
    try:
        data = json.loads(proc.stdout or "{}")
    except ValueError:
        data = {}
    streams = data.get("streams") or [{}]
    return _frame_times(info, streams[0], data.get("format") or {}, data.get("packets") or (),
                        proc.stderr or "")


def _run_ffprobe(argv: list[str], path: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              timeout=600, check=False)
    except FileNotFoundError:
        raise RenderFailed("ffprobe not found: install ffmpeg (it provides ffprobe)") from None
    except subprocess.TimeoutExpired:
        raise MediaError(f"cannot read video {path}: counting its frames took over 10 min") from None


def _frame_times(info: MediaInfo, stream: Mapping[str, Any], fmt: Mapping[str, Any],
                 packets, stderr: str) -> FrameTimes:
    """The frame times of ``info``'s video stream from its ffprobe stream entry and packets."""
    tb = _time_base(stream.get("time_base"))
    declared = _int(stream.get("nb_frames"))
    ticks, key_ticks = [], []
    for p in packets:
        flags = str(p.get("flags", ""))
        if "D" in flags:   # discarded by an edit list: never decoded into a frame
            continue
        t = _int(p.get("pts"))
        if t is None:
            t = _int(p.get("dts"))
        if t is not None:
            ticks.append(t)
            if "K" in flags:
                d = _int(p.get("dts"))
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
    start = _float(fmt.get("start_time")) or 0.0
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
    fmt_duration = _float((data.get("format") or {}).get("duration"))
    if decode_keyframes:
        errors = last_meaningful_line(proc.stderr)
        videos = [s for s in data.get("streams") or () if s.get("codec_type") == "video"]
        if errors or any(not _int(s.get("nb_read_frames")) for s in videos):
            raise MediaError(f"cannot decode {path}: {errors or 'no keyframe decodes'}")
    out = []
    for s in data.get("streams") or ():
        out.append(StreamCount(kind=str(s.get("codec_type") or ""), codec=str(s.get("codec_name") or ""),
                               packets=_int(s.get("nb_read_packets")) or 0,
                               duration=_stream_duration(s) or fmt_duration))
    return out


def ffmpeg_version_line(cmd: str = "ffmpeg") -> str:
    """ffmpeg's first ``-version`` line (the build that decides the bytes), '' if unknown."""
    out = _version_text(cmd)
    return out.splitlines()[0].strip() if out else ""


def mkvmerge_version(cmd: str = "mkvmerge") -> str:
    out = _version_text(cmd)
    return out.splitlines()[0].strip() if out else ""


@functools.lru_cache(maxsize=None)   # the device and driver do not change while a process runs
def hw_works(what: str) -> bool:
    """Whether ffmpeg can use ``what`` here: an encoder name (``h264_nvenc``: encodes one frame)
    or ``cuda`` (a CUDA hardware device for NVDEC can be opened)."""
    if what == "cuda":
        argv = ["ffmpeg", "-hide_banner", "-v", "error", "-init_hw_device", "cuda=gpu",
                "-f", "lavfi", "-i", "nullsrc=s=64x64:d=0.04", "-frames:v", "1", "-f", "null", "-"]
    else:
        argv = ["ffmpeg", "-hide_banner", "-v", "error", "-f", "lavfi", "-i",
                "nullsrc=s=256x256:d=0.04", "-frames:v", "1", "-c:v", what, "-f", "null", "-"]
    try:
        return subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL, timeout=60,
                              check=False).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False
