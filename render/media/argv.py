"""The pieces every ffmpeg argument builder shares: the argv head, the bit-exact flags, the frame
rate mode, times and trims. The builders are pure (no subprocess, no I/O) and unit-tested flag by
flag: :mod:`.video_args` (decode, encode), :mod:`.audio_args` (the target's audio in an output),
:mod:`.segment_args` (segments, their assembly, the timestamp remux).

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

from typing import Sequence

from render.errors import MediaError, UsageError

from .probe import MediaInfo

BASE = ("ffmpeg", "-hide_banner", "-nostdin", "-loglevel", "error")
#: swscale's default bgr24<->yuv conversion rounds with a bias of about -2 levels per round trip;
#: accurate rounding and full chroma interpolation make decode → encode colour-neutral.
SWS_FLAGS = ("-sws_flags", "accurate_rnd+full_chroma_int+bitexact")
#: no timestamps or library versions in the container and the video stream
BITEXACT = ["-fflags", "+bitexact", "-flags:v", "+bitexact"]


def fmt_time(seconds: float) -> str:
    """Seconds as ffmpeg wants them, exact to the microsecond, no exponent: 1.5 -> '1.5'."""
    text = f"{float(seconds):.6f}".rstrip("0").rstrip(".")
    return text or "0"


def fps_mode(legacy_vsync: bool, mode: str = "passthrough") -> list[str]:
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


def trim_input_opts(start: float, end: float | None) -> list[str]:
    """The input options (``-ss``, ``-t``) that read [start, end) seconds of an input."""
    opts: list[str] = []
    if start > 0:
        opts += ["-ss", fmt_time(start)]
    if end is not None:
        opts += ["-t", fmt_time(end - start)]
    return opts


def argv_text(argv: Sequence[str]) -> str:
    """A shell-quoted one-line rendering of argv, for debug logs."""
    import shlex

    return " ".join(shlex.quote(str(a)) for a in argv)
