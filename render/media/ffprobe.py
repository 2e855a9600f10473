"""Running ffprobe, and reading the values of its JSON answer (strings, numbers or missing)."""
from __future__ import annotations

import re
import subprocess
from fractions import Fraction
from typing import Any, Mapping

from render.errors import MediaError, RenderFailed


def run_ffprobe(argv: list[str], path: str) -> subprocess.CompletedProcess:
    """ffprobe ``argv`` about ``path``, its output captured as text; its exit status unchecked."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              timeout=600, check=False)
    except FileNotFoundError:
        raise RenderFailed("ffprobe not found: install ffmpeg (it provides ffprobe)") from None
    except subprocess.TimeoutExpired:
        raise MediaError(f"cannot read video {path}: counting its frames took over 10 min") from None


def as_fraction(value: Any) -> Fraction | None:
    """A positive fraction ('30000/1001'), else None."""
    try:
        f = Fraction(str(value))
    except (ValueError, ZeroDivisionError, TypeError):
        return None
    return f if f > 0 else None


def as_float(value: Any) -> float | None:
    """A finite number, else None."""
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if f == f and f not in (float("inf"), float("-inf")) else None


def as_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def tag_value(tags: Mapping[str, Any] | None, name: str) -> Any:
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


def stream_duration(stream: Mapping[str, Any]) -> float | None:
    """A stream's duration: ``duration``, else matroska's DURATION tag, which is the stream's END
    timestamp (so its start_time is subtracted)."""
    d = as_float(stream.get("duration"))
    if d:
        return d
    end = _hms(tag_value(stream.get("tags"), "DURATION"))
    if end is None:
        return None
    return round(max(0.0, end - max(0.0, as_float(stream.get("start_time")) or 0.0)), 6) or None
