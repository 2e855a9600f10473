"""ffmpeg and mkvmerge arguments of a render in segments (pure, see :mod:`.argv`): decode a frame
range, encode it video-only; join the segments, give them the target's frame times (variable frame
rate), and assemble them with the audio once."""
from __future__ import annotations

import os
from fractions import Fraction
from typing import Sequence

from render.errors import UsageError

from .argv import BASE, BITEXACT, SWS_FLAGS, fmt_time, fps_mode
from .audio_args import Soundtrack, audio_args, soundtrack_args
from .formats import has_alpha, output_format, segment_muxer
from .probe import MediaInfo
from .video_args import (EncodeSettings, decoded_size, output_args, raw_input_args,
                         video_encode_args)


def segment_decode_args(info: MediaInfo, *, seek: float | None, frames: int,
                        scale_height: int | None = None, legacy_vsync: bool = False,
                        hwaccel: str | None = None,
                        grid: tuple[Fraction, float] | None = None, skip: float = 0.0) -> list[str]:
    """ffmpeg argv: ``frames`` raw bgr24 frames of the target from the first frame at or after
    ``seek`` seconds (from the container start; accurate seek: decoded from the keyframe before
    and discarded up to it). ``seek`` None starts at the first frame.

    ``grid=(rate, first_at)`` (a constant-frame-rate target; ``rate`` the one its frames keep,
    :func:`render.segments.grid_rate`): the frames are put on that rate's grid, the segment's first
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
        argv += fps_mode(legacy_vsync, "cfr") + ["-r", str(grid[0])]
    else:
        argv += fps_mode(legacy_vsync)
    argv += ["-f", "rawvideo", "-pix_fmt", "bgr24", "pipe:1"]
    return argv


def segment_encode_args(info: MediaInfo, out_path: str | os.PathLike, *, family: str, width: int,
                        height: int, fps: Fraction, video: EncodeSettings,
                        legacy_vsync: bool = False) -> list[str]:
    """ffmpeg argv: raw bgr24 frames on stdin → one video-only segment at ``out_path`` (the LAST
    argument; the muxer is given with ``-f``, so the file may have any temp name). Each segment is
    its own encode: it starts on a keyframe and its GOPs are closed."""
    muxer, _ = segment_muxer(family, video.codec)
    argv = list(BASE) + ["-y"] + raw_input_args(width, height, fps, has_alpha(video.pix_fmt))
    argv += ["-map", "0:v:0", *SWS_FLAGS]
    argv += video_encode_args(info, width, height, video, family, legacy_vsync)
    if video.codec in ("libx264", "libx265"):
        argv += ["-flags:v", "+cgop"]
    argv += ["-an", "-map_metadata", "-1", "-map_chapters", "-1", *BITEXACT, "-f", muxer,
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
                  metadata: Sequence[tuple[str, str]] = (),
                  soundtrack: Soundtrack | None = None) -> list[str]:
    """ffmpeg argv: the segments (a concat list when ``concat``, else one video file) stream-copied
    + the target's audio muxed ONCE (copied where the container takes it, else encoded once and
    cut to the video's span) into ``out_path`` (LAST argument) with the muxer of ``final_name``.

    ``metadata``: (key, value) container tags written after every source's metadata is dropped.
    ``soundtrack``: the output's audio instead of the target's
    (:func:`.audio_args.soundtrack_args`).
    """
    muxer, family = output_format(final_name)
    argv = list(BASE) + ["-y"]
    if concat:
        argv += ["-f", "concat", "-safe", "0"]
    argv += ["-i", os.fspath(video_input)]
    audio = audio_args(info, final_name, trim, 1) if soundtrack is None else \
        soundtrack_args(info, soundtrack, final_name, 1)
    argv += audio.inputs
    argv += ["-map", "0:v:0"] + audio.maps + ["-c:v", "copy"]
    argv += audio.outputs
    return argv + output_args(info, metadata, muxer, family, out_path,
                              audio=bool(info.audio) or soundtrack is not None)


def join_args(concat_file: str | os.PathLike, out_path: str | os.PathLike) -> list[str]:
    """ffmpeg argv: the segments of a concat list stream-copied into one Matroska file (the input
    of the timestamp remux of variable-frame-rate targets)."""
    return list(BASE) + ["-y", "-f", "concat", "-safe", "0", "-i", os.fspath(concat_file),
                         "-map", "0:v:0", "-c:v", "copy", "-map_metadata", "-1", *BITEXACT,
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
