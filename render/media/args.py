"""Pure ffmpeg argument builders: no subprocess, no I/O, unit-tested flag by flag.

Every builder returns an argv list that starts with
``ffmpeg -hide_banner -nostdin -loglevel error``.

Frame-rate mode: ``-fps_mode passthrough`` (ffmpeg >= 5.1; ``-vsync`` was removed in 9.0). Pass
``legacy_vsync=True`` to get ``-vsync passthrough`` for ffmpeg 4.x (see ``tools.ffmpeg_version``).

Reproducibility: outputs carry no metadata from the target (``-map_metadata -1``), no
timestamps or library versions (``-fflags +bitexact``, ``-flags:v/a +bitexact``). x264/x265 are
deterministic for a fixed thread count; ffmpeg's default (``threads=auto``) depends on the
machine's cores, so bit-identical re-runs are guaranteed on the same machine only, unless
``EncodeSettings.threads`` pins the count.
"""
from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

from render.errors import MediaError, UsageError

from .formats import (AUDIO_COPY, AUDIO_ENCODER, IMAGE_FORMATS, SEGMENT_MUXERS, final_ext, final_path,
                      output_format)
from .probe import MediaInfo

log = logging.getLogger(__name__)

BASE = ("ffmpeg", "-hide_banner", "-nostdin", "-loglevel", "error")
#: swscale's default bgr24<->yuv conversion rounds with a bias of about -2 levels per round trip;
#: accurate rounding and full chroma interpolation make decode → encode colour-neutral.
SWS_FLAGS = ("-sws_flags", "accurate_rnd+full_chroma_int+bitexact")

#: ffprobe color_space -> swscale matrix name
_SWS_MATRIX = {
    "bt709": "bt709",
    "fcc": "fcc",
    "bt470bg": "bt601",
    "smpte170m": "smpte170m",
    "smpte240m": "smpte240m",
    "bt2020nc": "bt2020",
    "bt2020c": "bt2020",
}
_SUBSAMPLED = re.compile(r"^(yuvj?4[12][02]|nv1[26]|nv2[01]|p01[026]|p21[06])")


@dataclass(frozen=True)
class EncodeSettings:
    """Video encoder settings (built by the config layer).

    ``crf`` is the quality knob of each codec (x264/x265/svt-av1 ``-crf``; vp9/aom ``-crf`` with
    ``-b:v 0``; nvenc ``-cq`` with ``-rc vbr``). ``preset`` is x264/x265/nvenc/svt-av1 ``-preset``,
    vp9 ``-deadline`` (good|best|realtime), aom ``-cpu-used`` (a digit). ``threads`` None keeps
    ffmpeg's default (machine dependent). ``extra`` is appended verbatim after the codec options.
    """

    codec: str = "libx264"
    crf: int | None = 18
    preset: str | None = "medium"
    pix_fmt: str = "yuv420p"
    extra: tuple[str, ...] = ()
    threads: int | None = None


# ----------------------------------------------------------------------------------------------
# helpers

def fmt_time(seconds: float) -> str:
    """Seconds as ffmpeg wants them, exact to the microsecond, no exponent: 1.5 -> '1.5'."""
    text = f"{float(seconds):.6f}".rstrip("0").rstrip(".")
    return text or "0"


def _fps_mode(legacy_vsync: bool, mode: str = "passthrough") -> list[str]:
    return ["-vsync", mode] if legacy_vsync else ["-fps_mode", mode]


def check_trim(info: MediaInfo, trim: tuple[float, float | None] | None) -> tuple[float, float | None] | None:
    """Validate ``trim=(start, end)`` in seconds from the container's start, as ``-ss`` counts
    them (end exclusive, None = to the end).

    Returns None for 'no trim' (None, or (0, None)). UsageError when malformed, MediaError when
    it starts after the end of the target's video (which starts ``video_start`` seconds in).
    """
    if trim is None:
        return None
    try:
        start, end = trim
        start = float(start)
        end = None if end is None else float(end)
    except (TypeError, ValueError):
        raise UsageError(f"trim must be (start, end) seconds, got {trim!r}") from None
    if start < 0 or (end is not None and end <= start):
        raise UsageError(f"trim must satisfy 0 <= start < end, got {trim!r}")
    video_end = info.video_start + info.duration
    if info.duration and start >= video_end:
        raise MediaError(f"trim starts at {fmt_time(start)} s, after the end of {info.path} "
                         f"({fmt_time(video_end)} s)")
    if start == 0 and end is None:
        return None
    return start, end


def _trim_input_opts(start: float, end: float | None) -> list[str]:
    opts: list[str] = []
    if start > 0:
        opts += ["-ss", fmt_time(start)]
    if end is not None:
        opts += ["-t", fmt_time(end - start)]
    return opts


# ----------------------------------------------------------------------------------------------
# decode

def decoded_size(info: MediaInfo, scale_height: int | None = None) -> tuple[int, int]:
    """(width, height) of the frames ``decode_args(info, scale_height=...)`` produces.

    Only downscales: a ``scale_height`` at or above the display height keeps the full size. When it
    scales, the height is rounded down to even and the width follows the aspect, rounded to even.
    """
    if scale_height is None or scale_height >= info.height:
        return info.width, info.height
    if scale_height < 2:
        raise UsageError(f"scale height must be >= 2, got {scale_height}")
    h = scale_height - scale_height % 2
    w = int(info.width * h / info.height / 2 + 0.5) * 2
    return max(2, w), h


def decode_args(info: MediaInfo, *, trim: tuple[float, float | None] | None = None,
                scale_height: int | None = None, legacy_vsync: bool = False) -> list[str]:
    """ffmpeg argv: the target's first video stream as raw bgr24 frames on stdout (pipe:1).

    ``trim=(start, end)``: ``-ss``/``-t`` as input options (accurate: ffmpeg decodes from the
    previous keyframe and discards up to ``start``). Frames are passed through one for one
    (no duplicates, no drops). Images give exactly one frame; trim is ignored for them.
    """
    argv = list(BASE)
    if info.kind != "image":
        t = check_trim(info, trim)
        if t is not None:
            argv += _trim_input_opts(*t)
    vmap = "0:v:0" if info.video_index is None else f"0:{info.video_index}"
    argv += ["-i", info.path, "-map", vmap, "-an", "-sn", "-dn", *SWS_FLAGS]
    w, h = decoded_size(info, scale_height)
    if (w, h) != (info.width, info.height):
        argv += ["-vf", f"scale={w}:{h}:flags=area"]
    if info.kind == "image":
        argv += ["-frames:v", "1"]
    argv += _fps_mode(legacy_vsync)
    argv += ["-f", "rawvideo", "-pix_fmt", "bgr24", "pipe:1"]
    return argv


# ----------------------------------------------------------------------------------------------
# encode

def video_codec_args(video: EncodeSettings) -> list[str]:
    c = video.codec
    args = ["-c:v", c]
    crf = None if video.crf is None else str(video.crf)
    preset = video.preset or None
    if c in ("libx264", "libx265", "libsvtav1"):
        if preset:
            args += ["-preset", preset]
        if crf is not None:
            args += ["-crf", crf]
        if c == "libx265":
            args += ["-x265-params", "log-level=error"]
    elif c.startswith("libvpx"):
        if crf is not None:
            args += ["-crf", crf, "-b:v", "0"]
        if preset in ("good", "best", "realtime"):
            args += ["-deadline", preset]
    elif c == "libaom-av1":
        if crf is not None:
            args += ["-crf", crf, "-b:v", "0"]
        if preset and preset.isdigit():
            args += ["-cpu-used", preset]
    elif c.endswith("_nvenc"):
        if preset:
            args += ["-preset", preset]
        if crf is not None:
            args += ["-rc", "vbr", "-cq", crf, "-b:v", "0"]
    else:
        if preset:
            args += ["-preset", preset]
        if crf is not None:
            args += ["-crf", crf]
    args += ["-pix_fmt", video.pix_fmt]
    if video.threads is not None:
        args += ["-threads", str(video.threads)]
    args += [str(x) for x in video.extra]
    return args


def audio_plan(info: MediaInfo, out_path: str | os.PathLike, *, trim=None, shift: bool = False) -> list[str]:
    """Per audio stream of ``info``: 'copy' or the encoder to re-encode it with.

    Copy when the output container takes the codec and nothing cuts the audio (no trim, no sync
    shift); otherwise re-encode (aac for mp4/mov/mkv, libopus for webm). Never drops a stream.
    """
    _, family = output_format(out_path)
    allowed = AUDIO_COPY[family]
    cut = shift or check_trim(info, trim) is not None
    plan = []
    for a in info.audio:
        if not cut and (allowed is None or a.codec in allowed):
            plan.append("copy")
        else:
            plan.append(AUDIO_ENCODER[family])
    return plan


#: audio sync offsets below this are left alone (well under a frame)
SYNC_TOLERANCE = 0.010


def _audio_bitrate(encoder: str, channels: int) -> str:
    ch = max(channels, 2)
    if encoder == "libopus":
        return f"{min(64 * ch, 510)}k"
    return f"{min(96 * ch, 512)}k"


def _color_args(info: MediaInfo, pix_fmt: str) -> tuple[list[str], list[str]]:
    """(filters, output options) that encode with the target's colour matrix and tags.

    ffmpeg decodes with the matrix the target is tagged with; encoding raw RGB uses BT.601 unless
    told otherwise, which would shift colours of BT.709 (HD) targets.
    """
    filters: list[str] = []
    opts: list[str] = []
    is_yuv = pix_fmt.startswith(("yuv", "nv", "p0", "p2"))
    matrix = _SWS_MATRIX.get(info.color_space or "")
    if matrix and is_yuv:
        filters.append(f"scale=out_color_matrix={matrix}:out_range=tv")
        filters.append(f"format={pix_fmt}")
        opts += ["-colorspace", str(info.color_space), "-color_range", "tv"]
        if info.color_primaries:
            opts += ["-color_primaries", info.color_primaries]
        if info.color_transfer:
            opts += ["-color_trc", info.color_transfer]
    return filters, opts


@dataclass(frozen=True)
class _Audio:
    """How the target's audio goes into an output: input options, maps, output options."""

    inputs: list[str]
    maps: list[str]
    outputs: list[str]


@dataclass(frozen=True)
class AudioSpan:
    """How the target's audio goes into an output, decided once for the mux and for the plan's
    expectations: ``plan`` per stream ('copy' or an encoder, :func:`audio_plan`); when nothing is
    copied, the span cut from the target (``start``, ``end``; seconds from the container's start)
    and ``duration``, the length every audio stream of the output will have (None: unknown, the
    audio is padded without end and ``-shortest`` ends it at the video's last frame)."""

    plan: list[str]
    start: float
    end: float | None
    duration: float | None

    @property
    def copied(self) -> bool:
        return "copy" in self.plan


def audio_span(info: MediaInfo, out_path: str | os.PathLike,
               trim: tuple[float, float | None] | None = None) -> AudioSpan:
    """The target's audio in an output: copied whole when the container takes it and nothing cuts
    it; otherwise re-encoded and cut to the video's span (from where the video starts when the
    audio starts before it, to keep them in sync)."""
    t = check_trim(info, trim)
    start, end = t if t is not None else (0.0, None)
    # keep audio in sync when it starts before the video: start it where the video starts
    shift = info.video_start > SYNC_TOLERANCE and start < info.video_start
    plan = audio_plan(info, out_path, trim=trim, shift=shift)
    if "copy" in plan:  # nothing cuts the audio (see audio_plan): the target's audio, whole
        return AudioSpan(plan, 0.0, None, None)
    # the audio span that matches the video: positions relative to the container start
    a_start = info.video_start if shift else start
    a_end = end
    if info.duration > 0:
        v_end = info.video_start + info.duration
        a_end = v_end if a_end is None else min(a_end, v_end)
    duration = a_end - a_start if a_end is not None and a_end > a_start else None
    return AudioSpan(plan, a_start, a_end if duration else None, duration)


def _audio(info: MediaInfo, out_path: str | os.PathLike, trim: tuple[float, float | None] | None,
           input_index: int) -> _Audio:
    """Every audio stream of the target, copied when the container takes it and nothing cuts it;
    otherwise re-encoded, cut (input ``-t``) and padded (``apad=whole_dur``) to the video's span."""
    if not info.audio:
        return _Audio([], [], [])
    span = audio_span(info, out_path, trim)
    plan, audio_dur = span.plan, span.duration
    inputs: list[str] = []
    if span.copied:
        inputs += ["-i", info.path]
    else:
        inputs += _trim_input_opts(span.start, span.end) + ["-i", info.path]
    maps: list[str] = []
    for a in info.audio:
        maps += ["-map", f"{input_index}:{a.index}"]
    outputs: list[str] = []
    for i, (a, how) in enumerate(zip(info.audio, plan)):
        if how == "copy":
            outputs += [f"-c:a:{i}", "copy"]
        else:
            outputs += [f"-c:a:{i}", how, f"-b:a:{i}", _audio_bitrate(how, a.channels)]
    if "copy" not in plan:
        # when the span is unknown, pad without end and let -shortest end the file at the last
        # video frame
        pad = f"apad=whole_dur={fmt_time(audio_dur)}" if audio_dur else "apad"
        for i in range(len(plan)):
            outputs += [f"-filter:a:{i}", pad]
        if not audio_dur:
            outputs += ["-shortest"]
    return _Audio(inputs, maps, outputs)


def _raw_input(width: int, height: int, fps: Fraction) -> list[str]:
    if width <= 0 or height <= 0:
        raise UsageError(f"invalid frame size {width}x{height}")
    fps = Fraction(fps)
    if fps <= 0:
        raise UsageError(f"invalid frame rate {fps}")
    # an input read on its own thread (ffmpeg 5.1 does so once the target's audio is a second
    # input; 6.0 and later always) queues 8 packets by default: 8 raw frames, 50 MB at 1080p;
    # the renderer's own frames in flight already keep the encoder fed
    return ["-f", "rawvideo", "-pix_fmt", "bgr24", "-video_size", f"{width}x{height}",
            "-framerate", str(fps), "-thread_queue_size", str(RAW_INPUT_QUEUE), "-i", "pipe:0"]


def _video_encode(info: MediaInfo, width: int, height: int, video: EncodeSettings, family: str,
                  legacy_vsync: bool) -> list[str]:
    """Filters, codec options and colour tags of the raw-frames → video encode."""
    argv: list[str] = []
    filters: list[str] = []
    if _SUBSAMPLED.match(video.pix_fmt) and (width % 2 or height % 2):
        w2, h2 = width - width % 2, height - height % 2
        log.info("cropping %dx%d to %dx%d: %s needs even dimensions", width, height, w2, h2, video.pix_fmt)
        filters.append(f"crop={w2}:{h2}:0:0")
    color_filters, color_opts = _color_args(info, video.pix_fmt)
    filters += color_filters
    if filters:
        argv += ["-filter:v", ",".join(filters)]
    argv += video_codec_args(video)
    argv += color_opts
    if video.codec in ("libx265", "hevc_nvenc") and family in ("mp4", "mov"):
        argv += ["-tag:v", "hvc1"]
    argv += _fps_mode(legacy_vsync)
    return argv


_BITEXACT = ["-fflags", "+bitexact", "-flags:v", "+bitexact"]

#: raw frames an encoder's input thread may hold (see _raw_input)
RAW_INPUT_QUEUE = 2


def encode_args(info: MediaInfo, out_path: str | os.PathLike, *, width: int, height: int, fps: Fraction,
                video: EncodeSettings, trim: tuple[float, float | None] | None = None,
                legacy_vsync: bool = False, final_name: str | None = None,
                metadata: Sequence[tuple[str, str]] = ()) -> list[str]:
    """ffmpeg argv: raw bgr24 frames on stdin + the target's audio, one pass, into ``out_path``
    (the LAST argument). A plan of one segment encodes it so (see :func:`plan.plan_render`).

    - input 0: ``-f rawvideo -pix_fmt bgr24 -video_size WxH -framerate FPS -i pipe:0``
    - input 1 (only when the target has audio): the target itself, with the same trim as input
      options; every audio stream is mapped explicitly (``-map 1:N``, no '?': a missing stream
      fails the encode instead of vanishing).
    - audio is copied when the container takes it and nothing cuts it; otherwise re-encoded and
      cut (input ``-t``) and padded (``apad=whole_dur``) to exactly the video's span. ``-shortest``
      is used only when that span is unknown, and then after ``apad`` (endless audio), so that it
      can only ever end the file at the video's last frame, never cut the video.
    - the muxer is given by ``-f`` from the FINAL extension (``clip.mp4.part-7`` -> mp4), or
      from ``final_name`` when given (a temp name in the work folder).
    - odd sizes with a subsampled pix_fmt (yuv420p) are cropped by one pixel to even.
    - ``metadata``: (key, value) container tags written after every source's metadata is dropped.
    """
    final = final_name if final_name is not None else out_path
    muxer, family = output_format(final)
    argv = list(BASE) + ["-y"] + _raw_input(width, height, fps)
    audio = _audio(info, final, trim, 1)
    argv += audio.inputs
    argv += ["-map", "0:v:0", *SWS_FLAGS] + audio.maps
    argv += _video_encode(info, width, height, video, family, legacy_vsync)
    argv += audio.outputs
    argv += ["-map_metadata", "-1", "-map_chapters", "-1", *_BITEXACT]
    if info.audio:
        argv += ["-flags:a", "+bitexact"]
    for key, value in metadata:
        argv += ["-metadata", f"{key}={value}"]
    if family in ("mp4", "mov"):
        argv += ["-movflags", "+faststart"]
    argv += ["-f", muxer, os.fspath(out_path)]
    return argv


# ----------------------------------------------------------------------------------------------
# segments: decode a frame range, encode it video-only; assemble them with the audio once

def segment_decode_args(info: MediaInfo, *, seek: float | None, frames: int,
                        scale_height: int | None = None, legacy_vsync: bool = False,
                        hwaccel: str | None = None,
                        grid: tuple[Fraction, float] | None = None, skip: float = 0.0) -> list[str]:
    """ffmpeg argv: ``frames`` raw bgr24 frames of the target from the first frame at or after
    ``seek`` seconds (from the container start; accurate seek: decoded from the keyframe before
    and discarded up to it). ``seek`` None starts at the first frame.

    ``grid=(rate, first_at)`` (a constant-frame-rate target; ``rate`` the one its frames keep,
    :func:`render.plan.grid_rate`): the frames are put on that rate's grid, the segment's first
    frame at 0 (``first_at``: the seconds ffmpeg gives it, its time from
    the container's start less ``seek``). A frame the decoder cannot decode then leaves its slot
    to the next frame it does decode, and the frames after it keep their places; passed through
    as they come, they would each move up by one and the segment would take a frame of the next.

    ``skip``: seconds of decoded frames dropped first (``trim``): where a container's seek is not
    exact, ``seek`` lies well before the segment and the frames up to it are decoded and dropped.
    """
    if frames < 1:
        raise UsageError(f"a segment needs at least one frame, got {frames}")
    argv = list(BASE)
    if hwaccel:   # NVDEC: frames come back to system memory for the bgr24 pipe
        argv += ["-hwaccel", hwaccel]
    if seek is not None and seek > 0:
        argv += ["-ss", fmt_time(seek)]
    vmap = "0:v:0" if info.video_index is None else f"0:{info.video_index}"
    argv += ["-i", info.path, "-map", vmap, "-an", "-sn", "-dn", *SWS_FLAGS]
    w, h = decoded_size(info, scale_height)
    filters = []
    if skip > 0:
        filters.append(f"trim=start={fmt_time(skip)}")
    if grid is not None:
        filters.append(f"setpts=PTS-({fmt_time(grid[1])})/TB")
    if (w, h) != (info.width, info.height):
        filters.append(f"scale={w}:{h}:flags=area")
    if filters:
        argv += ["-vf", ",".join(filters)]
    argv += ["-frames:v", str(frames)]
    if grid is not None:
        argv += _fps_mode(legacy_vsync, "cfr") + ["-r", str(grid[0])]
    else:
        argv += _fps_mode(legacy_vsync)
    argv += ["-f", "rawvideo", "-pix_fmt", "bgr24", "pipe:1"]
    return argv


def segment_encode_args(info: MediaInfo, out_path: str | os.PathLike, *, family: str, width: int,
                        height: int, fps: Fraction, video: EncodeSettings,
                        legacy_vsync: bool = False) -> list[str]:
    """ffmpeg argv: raw bgr24 frames on stdin → one video-only segment at ``out_path`` (the LAST
    argument; the muxer is given with ``-f``, so the file may have any temp name). Each segment is
    its own encode: it starts on a keyframe and its GOPs are closed."""
    muxer, _ = SEGMENT_MUXERS[family]
    argv = list(BASE) + ["-y"] + _raw_input(width, height, fps)
    argv += ["-map", "0:v:0", *SWS_FLAGS]
    argv += _video_encode(info, width, height, video, family, legacy_vsync)
    if video.codec in ("libx264", "libx265"):
        argv += ["-flags:v", "+cgop"]
    argv += ["-an", "-map_metadata", "-1", "-map_chapters", "-1", *_BITEXACT, "-f", muxer,
             os.fspath(out_path)]
    return argv


def concat_list(names: Sequence[str]) -> str:
    """The concat demuxer's list file for segment files in the same folder as the list."""
    lines = ["ffconcat version 1.0"]
    for name in names:
        if "'" in name or "/" in name or "\n" in name:
            raise ValueError(f"segment name {name!r} is not a plain file name")
        lines.append(f"file '{name}'")
    return "\n".join(lines) + "\n"


def assemble_args(info: MediaInfo, video_input: str | os.PathLike, out_path: str | os.PathLike, *,
                  final_name: str, concat: bool, trim: tuple[float, float | None] | None = None,
                  metadata: Sequence[tuple[str, str]] = ()) -> list[str]:
    """ffmpeg argv: the segments (a concat list when ``concat``, else one video file) stream-copied
    + the target's audio muxed ONCE (copied where the container takes it, else encoded once and
    cut to the video's span) into ``out_path`` (LAST argument) with the muxer of ``final_name``.

    ``metadata``: (key, value) container tags written after every source's metadata is dropped.
    """
    muxer, family = output_format(final_name)
    argv = list(BASE) + ["-y"]
    if concat:
        argv += ["-f", "concat", "-safe", "0"]
    argv += ["-i", os.fspath(video_input)]
    audio = _audio(info, final_name, trim, 1)
    argv += audio.inputs
    argv += ["-map", "0:v:0"] + audio.maps + ["-c:v", "copy"]
    argv += audio.outputs
    argv += ["-map_metadata", "-1", "-map_chapters", "-1", *_BITEXACT]
    if info.audio:
        argv += ["-flags:a", "+bitexact"]
    for key, value in metadata:
        argv += ["-metadata", f"{key}={value}"]
    if family in ("mp4", "mov"):
        argv += ["-movflags", "+faststart"]
    argv += ["-f", muxer, os.fspath(out_path)]
    return argv


def join_args(concat_file: str | os.PathLike, out_path: str | os.PathLike) -> list[str]:
    """ffmpeg argv: the segments of a concat list stream-copied into one Matroska file (the input
    of the timestamp remux of variable-frame-rate targets)."""
    return list(BASE) + ["-y", "-f", "concat", "-safe", "0", "-i", os.fspath(concat_file),
                         "-map", "0:v:0", "-c:v", "copy", "-map_metadata", "-1", *_BITEXACT,
                         "-f", "matroska", os.fspath(out_path)]


def timestamps_file(pts: Sequence[float]) -> str:
    """mkvmerge's timestamp file (format v2): one presentation time in ms per frame."""
    return "# timestamp format v2\n" + "".join(f"{1000.0 * t:.6f}\n" for t in pts)


def retime_args(video: str | os.PathLike, timestamps: str | os.PathLike,
                out_path: str | os.PathLike) -> list[str]:
    """mkvmerge argv: ``video`` (one video track) with each frame given the time in
    ``timestamps`` (exact to the ms, Matroska's time base) into ``out_path``."""
    return ["mkvmerge", "--quiet", "--no-date", "--disable-track-statistics-tags",
            "-o", os.fspath(out_path), "--timestamps", f"0:{os.fspath(timestamps)}",
            os.fspath(video)]


def image_encode_args(out_path: str | os.PathLike, *, width: int, height: int) -> list[str]:
    """ffmpeg argv: one raw bgr24 frame on stdin -> a png/jpg/webp image at ``out_path``."""
    ext = final_ext(out_path)
    try:
        codec, opts, pix_fmt = IMAGE_FORMATS[ext]
    except KeyError:
        known = ", ".join(sorted(IMAGE_FORMATS))
        raise MediaError(
            f"unsupported image output {ext or '(none)'} for {final_path(out_path)}: use one of {known}"
        ) from None
    if width <= 0 or height <= 0:
        raise UsageError(f"invalid frame size {width}x{height}")
    argv = list(BASE) + ["-y"]
    argv += ["-f", "rawvideo", "-pix_fmt", "bgr24", "-video_size", f"{width}x{height}",
             "-framerate", "1", "-i", "pipe:0"]
    argv += ["-map", "0:v:0", "-frames:v", "1", "-c:v", codec, *opts, "-pix_fmt", pix_fmt]
    argv += ["-map_metadata", "-1", "-fflags", "+bitexact", "-flags:v", "+bitexact"]
    argv += ["-update", "1", "-f", "image2", os.fspath(out_path)]
    return argv


def argv_text(argv: Sequence[str]) -> str:
    """A shell-quoted one-line rendering of argv, for debug logs."""
    import shlex

    return " ".join(shlex.quote(str(a)) for a in argv)
