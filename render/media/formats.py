"""The format and codec tables: which file extensions are what, which codecs each container
family holds, and how each output format is written; with the lookups of an output's format by
its name."""
from __future__ import annotations

import os
import re

from render.errors import MediaError

# ----------------------------------------------------------------------------------------------
# inputs

#: Extensions of the videos a folder of targets is rendered from.
VIDEO_EXTS = frozenset({".mp4", ".mov", ".mkv", ".webm", ".avi", ".m4v"})
#: Extensions treated as still images (the target is one frame, the output is one image).
IMAGE_EXTS = frozenset({".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff"})
#: ffprobe format names of still-image demuxers (besides every ``*_pipe`` one).
IMAGE_DEMUXERS = frozenset({"image2", "png_pipe", "jpeg_pipe", "webp_pipe", "bmp_pipe", "tiff_pipe"})
#: Codecs that make a single-frame stream a still image.
STILL_CODECS = frozenset({"mjpeg", "png", "webp", "bmp", "tiff", "jpegls", "jpeg2000", "qoi", "ppm", "pam"})

#: An uploaded video or image by ffprobe's first format name → the extension it is stored with;
#: the formats the classroom page takes, named as its messages name them.
UPLOAD_VIDEOS = {"mov": ".mp4", "matroska": ".mkv", "avi": ".avi"}
UPLOAD_IMAGES = {"png_pipe": ".png", "jpeg_pipe": ".jpg", "webp_pipe": ".webp",
                 "bmp_pipe": ".bmp", "tiff_pipe": ".tif"}
UPLOAD_VIDEO_NAMES = "mp4, mov, mkv, webm or avi"
UPLOAD_IMAGE_NAMES = "png, jpg, webp, bmp or tiff"
#: An uploaded video's own extension → the stored extension of the container it names.
UPLOAD_NAMED = {".mkv": ".mkv", ".webm": ".mkv", ".mp4": ".mp4", ".m4v": ".mp4", ".mov": ".mp4"}

# ----------------------------------------------------------------------------------------------
# outputs

#: final extension -> (ffmpeg muxer, container family used by the audio policy)
VIDEO_FORMATS = {
    ".mp4": ("mp4", "mp4"),
    ".m4v": ("mp4", "mp4"),
    ".mov": ("mov", "mov"),
    ".mkv": ("matroska", "mkv"),
    ".webm": ("webm", "webm"),
}
#: final extension -> (encoder, options, output pix_fmt)
IMAGE_FORMATS = {
    ".png": ("png", (), "rgb24"),
    ".jpg": ("mjpeg", ("-q:v", "2"), "yuvj444p"),
    ".jpeg": ("mjpeg", ("-q:v", "2"), "yuvj444p"),
    ".webp": ("libwebp", ("-quality", "95"), "yuv420p"),
}
#: the outputs that carry an alpha channel (a background remover's matte): final extension ->
#: (encoder, options, output pix_fmt)
ALPHA_FORMATS = {
    ".png": ("png", (), "rgba"),
    ".webp": ("libwebp", ("-quality", "95"), "yuva420p"),
    ".webm": ("libvpx-vp9", (), "yuva420p"),
    ".mov": ("prores_ks", ("-profile:v", "4444"), "yuva444p10le"),
}
#: Extensions an output may have.
OUTPUT_EXTS = frozenset(VIDEO_FORMATS) | frozenset(IMAGE_FORMATS)

#: container of the committed segments, by the output's container family: the same family, so the
#: concat demuxer stream-copies them without a timestamp change (mp4 keeps the exact time base)
SEGMENT_MUXERS = {"mp4": ("mp4", ".mp4"), "mov": ("mp4", ".mp4"), "mkv": ("matroska", ".mkv"),
                  "webm": ("matroska", ".mkv")}


def segment_muxer(family: str, codec: str) -> tuple[str, str]:
    """(muxer, extension) of the committed segments of an output of ``family`` encoded with
    ``codec``: ProRes goes into mov only."""
    if codec == "prores_ks":
        return "mov", ".mov"
    return SEGMENT_MUXERS[family]


def has_alpha(pix_fmt: str) -> bool:
    """Whether frames of ``pix_fmt`` carry an alpha channel (raw frames in are then bgra)."""
    return pix_fmt.startswith(("yuva", "rgba", "bgra", "argb", "abgr", "gbrap", "ya"))

# ----------------------------------------------------------------------------------------------
# video codecs

#: which video codecs each output container family may hold; the first is the family's default
CODECS = {
    "mp4": ("libx264", "libx265", "h264_nvenc", "hevc_nvenc", "libsvtav1", "libaom-av1",
            "libvpx-vp9"),
    "mov": ("libx264", "libx265", "h264_nvenc", "hevc_nvenc", "prores_ks"),
    "mkv": None,   # anything
    "webm": ("libvpx-vp9", "libvpx", "libaom-av1", "libsvtav1"),
}

#: software encoders that stand in for a hardware one this machine lacks
SOFTWARE_FALLBACK = {"h264_nvenc": "libx264", "hevc_nvenc": "libx265"}

#: the presets each encoder takes verbatim as ``-preset`` (other encoders: not checked here; vp9's
#: and aom's are filtered by the argument builder)
PRESETS = {
    "libx264": ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower",
                "veryslow", "placebo"),
    "libsvtav1": tuple(str(n) for n in range(-1, 14)),
    "h264_nvenc": ("default", "slow", "medium", "fast", "hp", "hq", "bd", "ll", "llhq", "llhp",
                   "lossless", "losslesshp", *(f"p{n}" for n in range(1, 8))),
}
PRESETS["libx265"] = PRESETS["libx264"]
PRESETS["hevc_nvenc"] = PRESETS["h264_nvenc"]

# ----------------------------------------------------------------------------------------------
# audio codecs

_PCM = frozenset({"pcm_s16le", "pcm_s16be", "pcm_s24le", "pcm_s24be", "pcm_s32le", "pcm_s32be",
                  "pcm_f32le", "pcm_f32be"})
_MP4_AUDIO = frozenset({"aac", "mp3", "alac", "ac3", "eac3", "opus"})
#: audio codecs each container family takes as a stream copy (None = anything)
AUDIO_COPY = {
    "mp4": _MP4_AUDIO,
    "mov": (_MP4_AUDIO - {"opus"}) | _PCM,  # ffmpeg 5.1: "opus only supported in MP4"
    "mkv": None,
    "webm": frozenset({"opus", "vorbis"}),
}
#: re-encoder per container family when a copy is impossible
AUDIO_ENCODER = {"mp4": "aac", "mov": "aac", "mkv": "aac", "webm": "libopus"}

# ----------------------------------------------------------------------------------------------
# an output's format by its name

_PART = re.compile(r"\.part(-\d+)?$")


def final_path(path: str | os.PathLike) -> str:
    """The name an output will have once committed: strips ``.part`` / ``.part-<pid>``."""
    return _PART.sub("", os.fspath(path))


def final_ext(path: str | os.PathLike) -> str:
    """The lower-case extension of :func:`final_path`."""
    return os.path.splitext(final_path(path))[1].lower()


def output_format(out_path: str | os.PathLike) -> tuple[str, str]:
    """(ffmpeg muxer, container family) from the FINAL extension of ``out_path``."""
    ext = final_ext(out_path)
    try:
        return VIDEO_FORMATS[ext]
    except KeyError:
        known = ", ".join(sorted(VIDEO_FORMATS))
        raise MediaError(
            f"unsupported output format {ext or '(none)'} for {final_path(out_path)}: use one of {known}"
        ) from None


def is_image_path(path: str | os.PathLike) -> bool:
    return final_ext(path) in IMAGE_FORMATS
