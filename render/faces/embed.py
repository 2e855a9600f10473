"""ArcFace embedder (arcface_112_v2 template, 112 px) and the on-disk source-embedding cache."""
from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

import numpy as np

from ..runtime import LazySession
from . import align
from .types import Face

log = logging.getLogger(__name__)


class Embedder:
    template = "arcface_112_v2"
    size = 112

    def __init__(self, lazy: LazySession) -> None:
        self.lazy = lazy

    def embed(self, frame: np.ndarray, face: Face) -> np.ndarray:
        """The raw (not normalised) 512-d embedding of ``face``."""
        matrix = align.estimate(face.kps, self.template, self.size)
        crop = align.warp(frame, matrix, self.size)
        x = crop[:, :, ::-1].astype(np.float32) / 127.5 - 1.0
        session = self.lazy.session
        inp = session.get_inputs()[0]
        out = session.run(None, {inp.name: x.transpose(2, 0, 1)[None]})[0]
        return np.asarray(out, np.float32).reshape(-1)


def normalise(embedding: np.ndarray) -> np.ndarray:
    return embedding / max(float(np.linalg.norm(embedding)), 1e-12)


def identity_distance(a: np.ndarray, b: np.ndarray) -> float:
    """1 − cosine similarity."""
    return 1.0 - float(np.dot(normalise(a), normalise(b)))


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class EmbeddingCache:
    """Source embeddings on disk, keyed by the source file's and the embedder's SHA-256."""

    def __init__(self, cache_dir: Path) -> None:
        self.dir = cache_dir / "embeddings"

    def path(self, source_sha: str, model_sha: str) -> Path:
        return self.dir / f"{source_sha[:32]}-{model_sha[:32]}.npy"

    def load(self, source_sha: str, model_sha: str) -> np.ndarray | None:
        p = self.path(source_sha, model_sha)
        try:
            value = np.load(p, allow_pickle=False)
        except (OSError, ValueError):
            return None
        if value.shape != (512,) or value.dtype != np.float32 or not np.isfinite(value).all():
            log.warning("ignoring damaged cached embedding %s", p)
            return None
        return value

    def store(self, source_sha: str, model_sha: str, value: np.ndarray) -> None:
        p = self.path(source_sha, model_sha)
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
            with open(tmp, "wb") as f:
                np.save(f, np.asarray(value, np.float32))
            os.replace(tmp, p)
        except OSError as exc:  # a read-only cache only costs time
            log.warning("cannot cache the source embedding in %s: %s", p.parent, exc)
