"""The files marking reads and rewrites: what a file is (by its first bytes, else its name),
which formats C2PA covers, and reading and atomically rewriting them with one-line errors."""
from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import MediaError
from ..files import write_atomic
from .errors import MarkError

# Extension -> MIME type for every format c2pa-python 0.38.1 signed and validated here.
# mkv and webm are missing on purpose: c2pa-rs does not support Matroska ("type is unsupported").
C2PA_MIME = {
    ".mp4": "video/mp4",
    ".m4v": "video/x-m4v",
    ".mov": "video/quicktime",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".webp": "image/webp",
}

PNG_SIG = b"\x89PNG\r\n\x1a\n"


def ext(path_or_ext: str | os.PathLike) -> str:
    """The lower-case extension with its dot, of a path or of ``"mp4"`` / ``".mp4"``."""
    s = os.fspath(path_or_ext).lower()
    if "/" not in s and os.sep not in s and "." not in s.lstrip("."):
        return "." + s.lstrip(".")  # "mp4" or ".mp4"
    return Path(s).suffix


def sniff(head: bytes) -> str | None:
    """MIME type from the first bytes, for the formats marking handles; None otherwise."""
    if head.startswith(PNG_SIG):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head[4:8] == b"ftyp":
        brand = head[8:12]
        if brand == b"qt  ":
            return "video/quicktime"
        return "video/x-m4v" if brand.startswith(b"M4V") else "video/mp4"
    return None


def sniff_file(path: Path) -> str | None:
    """:func:`sniff` of the first bytes of ``path``."""
    with open_file(path) as f:
        return sniff(f.read(16))


def mime_of(path: Path) -> str | None:
    """The C2PA MIME type of ``path``: by content when recognised, else by extension; None for a
    format C2PA does not cover."""
    with open_file(path) as f:
        head = f.read(16)
    if head[:4] == b"\x1a\x45\xdf\xa3":  # EBML: Matroska/WebM, whatever its name
        return None
    return sniff(head) or C2PA_MIME.get(ext(path))


def open_file(path: Path):
    """``path`` opened for reading; ``MediaError`` when it cannot be."""
    try:
        return open(path, "rb")
    except OSError as exc:
        raise MediaError(f"cannot read {path}: {exc.strerror or exc}") from None


def read_bytes(path: Path) -> bytes:
    with open_file(path) as f:
        return f.read()


def make_private_dir(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)


def replace_bytes(path: Path, data: bytes) -> None:
    """Rewrite ``path`` with ``data`` atomically, keeping its permission bits."""
    try:
        write_atomic(path, data, stat.S_IMODE(path.stat().st_mode))
    except OSError as exc:
        raise MarkError(f"cannot rewrite {path}: {exc.strerror or exc}") from None
