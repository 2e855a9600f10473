"""The installed ffmpeg and mkvmerge: their versions (which decide the bytes of an output) and what
they can do here (pixel formats, hardware encoders and decoders)."""
from __future__ import annotations

import functools
import re
import subprocess


@functools.lru_cache(maxsize=None)  # the installed binary does not change under us
def version_text(cmd: str) -> str:
    """What ``cmd -version`` (ffmpeg, ffprobe) or ``cmd --version`` says, '' when it cannot run."""
    try:
        return subprocess.run([cmd, "-hide_banner", "-version"] if "ffmpeg" in cmd else
                              [cmd, "--version"], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def ffmpeg_version(cmd: str = "ffmpeg") -> tuple[int, int] | None:
    """(major, minor) of the installed ffmpeg, or None if it cannot be told (git builds).

    ``-fps_mode`` exists from 5.1 on and ``-vsync`` is gone in 9.0: pass
    ``legacy_vsync=(version < (5, 1))`` to the argument builders.
    """
    m = re.search(r"version\s+n?(\d+)\.(\d+)", version_text(cmd))
    return (int(m.group(1)), int(m.group(2))) if m else None


def ffmpeg_version_line(cmd: str = "ffmpeg") -> str:
    """ffmpeg's first ``-version`` line (the build that decides the bytes), '' if unknown."""
    out = version_text(cmd)
    return out.splitlines()[0].strip() if out else ""


def mkvmerge_version(cmd: str = "mkvmerge") -> str:
    out = version_text(cmd)
    return out.splitlines()[0].strip() if out else ""


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
