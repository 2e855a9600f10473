"""ffmpeg arguments that decode the target into raw bgr24 frames and encode raw frames into a
video or an image in one pass (pure, see :mod:`.argv`)."""
from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

from render.errors import MediaError, UsageError

from .argv import BASE, BITEXACT, SWS_FLAGS, check_trim, fps_mode, trim_input_opts
from .audio_args import Soundtrack, audio_args, soundtrack_args
from .formats import ALPHA_FORMATS, IMAGE_FORMATS, final_ext, final_path, has_alpha, output_format
from .probe import MediaInfo

log = logging.getLogger(__name__)

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

#: raw frames an encoder's input thread may hold (see raw_input_args)
RAW_INPUT_QUEUE = 2


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
            argv += trim_input_opts(*t)
    vmap = "0:v:0" if info.video_index is None else f"0:{info.video_index}"
    argv += ["-i", info.path, "-map", vmap, "-an", "-sn", "-dn", *SWS_FLAGS]
    w, h = decoded_size(info, scale_height)
    if (w, h) != (info.width, info.height):
        argv += ["-vf", f"scale={w}:{h}:flags=area"]
    if info.kind == "image":
        argv += ["-frames:v", "1"]
    argv += fps_mode(legacy_vsync)
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


def raw_input_args(width: int, height: int, fps: Fraction, alpha: bool = False) -> list[str]:
    """Input 0 of an encode: raw bgr24 frames (bgra with ``alpha``) of ``width`` x ``height`` on
    stdin."""
    if width <= 0 or height <= 0:
        raise UsageError(f"invalid frame size {width}x{height}")
    fps = Fraction(fps)
    if fps <= 0:
        raise UsageError(f"invalid frame rate {fps}")
    # an input read on its own thread queues 8 packets (raw frames) by default; the renderer's
    # own frames in flight already keep the encoder fed
    return ["-f", "rawvideo", "-pix_fmt", "bgra" if alpha else "bgr24",
            "-video_size", f"{width}x{height}", "-framerate", str(fps), "-thread_queue_size", str(RAW_INPUT_QUEUE), "-i", "pipe:0"]


def video_encode_args(info: MediaInfo, width: int, height: int, video: EncodeSettings, family: str,
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
    argv += fps_mode(legacy_vsync)
    return argv


def encode_args(info: MediaInfo, out_path: str | os.PathLike, *, width: int, height: int, fps: Fraction,
                video: EncodeSettings, trim: tuple[float, float | None] | None = None,
                legacy_vsync: bool = False, final_name: str | None = None,
                metadata: Sequence[tuple[str, str]] = (),
                soundtrack: Soundtrack | None = None) -> list[str]:
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
    - ``soundtrack``: the output's audio instead of the target's
      (:func:`.audio_args.soundtrack_args`).
    """
    final = final_name if final_name is not None else out_path
    muxer, family = output_format(final)
    argv = list(BASE) + ["-y"] + raw_input_args(width, height, fps, has_alpha(video.pix_fmt))
    audio = audio_args(info, final, trim, 1) if soundtrack is None else \
        soundtrack_args(info, soundtrack, final, 1)
    argv += audio.inputs
    argv += ["-map", "0:v:0", *SWS_FLAGS] + audio.maps
    argv += video_encode_args(info, width, height, video, family, legacy_vsync)
    argv += audio.outputs
    return argv + output_args(info, metadata, muxer, family, out_path,
                              audio=bool(info.audio) or soundtrack is not None)


def output_args(info: MediaInfo, metadata: Sequence[tuple[str, str]], muxer: str, family: str,
                out_path: str | os.PathLike, *, audio: bool | None = None) -> list[str]:
    """The end of a finished file's argv: no inherited metadata or chapters, bit-exact muxing,
    the tags given, faststart for mp4/mov, the muxer and the path; ``audio``: the output has an
    audio stream (None: the target's audio streams say)."""
    argv = ["-map_metadata", "-1", "-map_chapters", "-1", *BITEXACT]
    if info.audio if audio is None else audio:
        argv += ["-flags:a", "+bitexact"]
    for key, value in metadata:
        argv += ["-metadata", f"{key}={value}"]
    if family in ("mp4", "mov"):
        argv += ["-movflags", "+faststart"]
    return argv + ["-f", muxer, os.fspath(out_path)]


def image_encode_args(out_path: str | os.PathLike, *, width: int, height: int,
                      alpha: bool = False) -> list[str]:
    """ffmpeg argv: one raw bgr24 frame (bgra with ``alpha``: png and webp keep it) on stdin ->
    a png/jpg/webp image at ``out_path``."""
    ext = final_ext(out_path)
    try:
        codec, opts, pix_fmt = (ALPHA_FORMATS if alpha else IMAGE_FORMATS)[ext]
    except KeyError:
        known = ", ".join(sorted(IMAGE_FORMATS))
        raise MediaError(
            f"unsupported image output {ext or '(none)'} for {final_path(out_path)}: use one of {known}"
        ) from None
    if width <= 0 or height <= 0:
        raise UsageError(f"invalid frame size {width}x{height}")
    argv = list(BASE) + ["-y"]
    argv += ["-f", "rawvideo", "-pix_fmt", "bgra" if alpha else "bgr24",
             "-video_size", f"{width}x{height}", "-framerate", "1", "-i", "pipe:0"]
    argv += ["-map", "0:v:0", "-frames:v", "1", "-c:v", codec, *opts, "-pix_fmt", pix_fmt]
    argv += ["-map_metadata", "-1", "-fflags", "+bitexact", "-flags:v", "+bitexact"]
    argv += ["-update", "1", "-f", "image2", os.fspath(out_path)]
    return argv
