"""The metadata tag: ``tag_text(version)`` ("Synthetic media: face-swapped by render ...") in
the output's own metadata, where any player or ffprobe shows it.

- Video: given to ffmpeg at encode time, as the (key, value) pairs of ``metadata_pairs(version,
  container)``. Checked with ffmpeg 5.1 + ffprobe, also with ``-map_metadata -1 -fflags
  +bitexact``: mp4/m4v keep ``comment`` and ``description``, mov keeps ``comment`` only (its
  muxer drops ``description`` unless ``-movflags use_metadata_tags``, which would clash with the
  encoder's own ``-movflags``), mkv/webm keep both (as COMMENT/DESCRIPTION).
- Images: ffmpeg's png, mjpeg and libwebp writers drop every ``-metadata`` key, so ``tag_image``
  writes it in Python after the encode (image_tags.py says how, per format).
- ``read_tag`` reads it back (images: parsed from the file, found by magic bytes, not by name;
  video: ffprobe's format tags).

None of this needs c2pa-python.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from ..errors import MediaError
from . import image_tags
from .declaration import TAG_PREFIX, tag_text
from .errors import MarkError
from .formats import open_file, read_bytes, replace_bytes, sniff

# ffmpeg -metadata keys that survive into the written file, per container (see the docstring).
_VIDEO_TAG_KEYS = {
    "mp4": ("comment", "description"),
    "m4v": ("comment", "description"),
    "mov": ("comment",),
    "mkv": ("comment", "description"),
    "matroska": ("comment", "description"),
    "webm": ("comment", "description"),
}
# Image containers: ffmpeg drops -metadata there, tag_image writes the tag instead.
_IMAGE_CONTAINERS = frozenset({"png", "jpg", "jpeg", "mjpeg", "webp", "image2"})


def metadata_pairs(version: str, container: str) -> list[tuple[str, str]]:
    """The (key, value) container tags that write ``tag_text(version)`` into a ``container``
    file when ffmpeg is given them as ``-metadata KEY=VALUE``.

    ``container``: an extension or muxer name (mp4, m4v, mov, mkv/matroska, webm). Image
    containers (png, jpg/jpeg/mjpeg, webp, image2) get ``[]``: ffmpeg drops the keys there, call
    ``tag_image`` on the written file instead. ``-map_metadata -1`` and ``-fflags +bitexact`` do
    not remove them. ``ValueError`` for a container no tag is known for.
    """
    name = container.lower().lstrip(".")
    if name in _IMAGE_CONTAINERS:
        return []
    keys = _VIDEO_TAG_KEYS.get(name)
    if keys is None:
        raise ValueError(f"no synthetic-media tag is known for container {container!r}")
    text = tag_text(version)
    return [(key, text) for key in keys]


def tag_image(path: Path, *, version: str) -> None:
    """Write ``tag_text(version)`` into the PNG, JPEG or WebP image at ``path`` (found by magic).

    Replaces an earlier render tag, so it is idempotent. The file is rewritten through a temp file
    beside it (fsync, then rename). Raises ``MarkError`` if the image already carries a C2PA
    manifest (tag first, then sign) or is of another type, ``MediaError`` if it is unreadable.
    """
    path = Path(path)
    data = read_bytes(path)
    write = image_tags.WRITERS.get(sniff(data))
    if write is None:
        raise MarkError(f"cannot tag {path}: not a PNG, JPEG or WebP image (video gets its tag "
                        "from metadata_pairs at encode time)")
    new = write(data, tag_text(version), path)
    if new != data:
        replace_bytes(path, new)


def read_tag(path: Path) -> str | None:
    """The render synthetic-media tag in ``path`` (text starting with ``TAG_PREFIX``), or None.

    Images (PNG text chunks, JPEG COM segments, WebP XMP) are parsed directly; anything else is
    asked of ffprobe (format tags ``comment``, then ``description``, any case). A file ffprobe
    cannot read has no tag: None.
    """
    path = Path(path)
    with open_file(path) as f:
        head = f.read(16)
    texts = image_tags.READERS.get(sniff(head))
    if texts is not None:
        try:
            found = texts(read_bytes(path))
        except ValueError:
            return None
        return next((t for t in found if t.startswith(TAG_PREFIX)), None)
    return _video_tag(path)


def _video_tag(path: Path) -> str | None:
    cmd = ["ffprobe", "-v", "error", "-show_entries", "format_tags", "-of", "json", os.fspath(path)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise MediaError("ffprobe not found on PATH: install ffmpeg") from None
    except subprocess.TimeoutExpired:
        raise MediaError(f"ffprobe took over 60 s to read the tags of {path}") from None
    if proc.returncode != 0:
        return None
    try:
        tags = json.loads(proc.stdout or "{}").get("format", {}).get("tags", {})
    except (ValueError, AttributeError):
        return None
    by_key = {str(k).lower(): str(v) for k, v in tags.items()}
    for key in ("comment", "description"):
        if by_key.get(key, "").startswith(TAG_PREFIX):
            return by_key[key]
    return next((v for v in by_key.values() if v.startswith(TAG_PREFIX)), None)
