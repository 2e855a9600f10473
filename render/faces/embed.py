"""ArcFace embedder (arcface_112_v2 template, 112 px) and the on-disk source-embedding cache."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..cache import load_array, save_array
from ..sessions import LazySession
from . import align
from .contracts import EMBEDDERS
from .types import Face

#: the manifest contract of the models this drives
CONTRACTS = EMBEDDERS


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
        out = self.lazy.run({inp.name: x.transpose(2, 0, 1)[None]})[0]
        return np.asarray(out, np.float32).reshape(-1)


def normalise(embedding: np.ndarray) -> np.ndarray:
    return embedding / max(float(np.linalg.norm(embedding)), 1e-12)


def identity_distance(a: np.ndarray, b: np.ndarray) -> float:
    """1 − cosine similarity."""
    return 1.0 - float(np.dot(normalise(a), normalise(b)))


class EmbeddingCache:
    """Source embeddings on disk, keyed by the source file's and the embedder's SHA-256."""

    def __init__(self, cache_dir: Path) -> None:
        self.dir = cache_dir / "embeddings"

    def path(self, source_sha: str, model_sha: str) -> Path:
        return self.dir / f"{source_sha[:32]}-{model_sha[:32]}.npy"

    def load(self, source_sha: str, model_sha: str) -> np.ndarray | None:
        return load_array(self.path(source_sha, model_sha), (512,))

    def store(self, source_sha: str, model_sha: str, value: np.ndarray) -> None:
        save_array(self.path(source_sha, model_sha), value)

    def load_faces(self, source_sha: str, model_sha: str) -> int | None:
        """How many faces the image had when its embedding was stored (None: not recorded)."""
        value = load_array(self.path(source_sha, model_sha).with_suffix(".faces"), (1,))
        return int(value[0]) if value is not None else None

    def store_faces(self, source_sha: str, model_sha: str, faces: int) -> None:
        save_array(self.path(source_sha, model_sha).with_suffix(".faces"),
                   np.array([faces], np.float32))
