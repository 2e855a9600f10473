"""Small arrays cached on disk (source embeddings, emap): atomic writes, damaged files ignored.

Each caller keys its file name by the SHA-256 of everything the value depends on, so a stale entry
is never reused. A cache that cannot be written (read-only volume) only costs time.
"""
from __future__ import annotations

import logging
import os
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
