"""Values cached on disk (source embeddings, emap, probe results): atomic writes, damaged files
ignored.

Each caller keys its file name by the SHA-256 of everything the value depends on, so a stale entry
is never reused. A cache that cannot be written (read-only volume) only costs time.
"""
from __future__ import annotations

import gzip
import json
import logging
import os
import zlib
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)


def load_array(path: Path, shape: tuple[int, ...]) -> np.ndarray | None:
    """The float32 array at ``path`` if it exists, has ``shape`` and is finite; else None."""
    try:
        value = np.load(path, allow_pickle=False)
    except (OSError, ValueError):
        return None
    if value.shape != shape or value.dtype != np.float32 or not np.isfinite(value).all():
        log.warning("ignoring damaged cache file %s", path)
        return None
    return value


def save_array(path: Path, value: np.ndarray) -> None:
    """Write ``value`` as float32 .npy via a temp file and a rename."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            np.save(f, np.asarray(value, np.float32))
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("cannot write cache file %s: %s", path, exc)


def load_json(path: Path) -> object | None:
    """The gzip-compressed JSON value at ``path``; None when it is missing or damaged."""
    try:
        with gzip.open(path, "rb") as f:
            return json.loads(f.read())
    except FileNotFoundError:
        return None
    except (OSError, EOFError, zlib.error, ValueError):
        log.warning("ignoring damaged cache file %s", path)
        return None


def save_json(path: Path, value: object) -> None:
    """Write ``value`` as gzip-compressed JSON via a temp file and a rename."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1,
                                                    mtime=0) as f:
            f.write(json.dumps(value).encode())
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("cannot write cache file %s: %s", path, exc)
