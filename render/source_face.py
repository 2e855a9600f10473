"""The source face (and the reference face): raw embeddings, computed once per (file, face,
embedder) and cached on disk and for the renderer's life."""
from __future__ import annotations

import logging
from pathlib import Path

import cv2
import numpy as np

from .config import Config
from .errors import MediaError, UsageError
from .faces.embed import EmbeddingCache
from .faces.types import Face
from .files import FileHashes
from .models.load import LoadedModels

log = logging.getLogger(__name__)


def read_image(path: Path, what: str) -> np.ndarray:
    image = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if image is None:
        raise MediaError(f"cannot read {what} image {path}: not an image file OpenCV can decode")
    return image


class SourceFaces:
    """Embeddings of the faces a render puts in (``source``) or looks for (``reference``)."""

    def __init__(self, cfg: Config, models: LoadedModels, hashes: FileHashes) -> None:
        self.cfg = cfg
        self.models = models
        self.hashes = hashes
        self.cache = EmbeddingCache(cfg.cache_path)
        self._embeddings: dict[tuple[Path, int], np.ndarray] = {}
        self._faces_found: dict[tuple[Path, int], tuple[np.ndarray, Face]] = {}

    def source(self, path: Path) -> np.ndarray:
        """The raw embedding of the face ``source_face`` picks in the source image."""
        return self.embedding(path, "source", self.cfg.source_face)

    def face(self, path: Path) -> tuple[np.ndarray, Face]:
        """The source image and the face ``source_face`` picks in it (for swappers that take the
        source's crop instead of its embedding); detected once per renderer."""
        key = (path, self.cfg.source_face)
        if key not in self._faces_found:
            image = read_image(path, "source")
            faces = self._faces(image, path, "source", self.cfg.source_face)
            self._faces_found[key] = (image, faces[self.cfg.source_face])
        return self._faces_found[key]

    def reference_path(self, source: Path) -> Path | None:
        """The image whose face ``select.mode=reference`` looks for; None in the other modes."""
        if self.cfg.select.mode != "reference":
            return None
        ref = Path(self.cfg.select.reference) if self.cfg.select.reference else source
        if not ref.is_file():
            raise MediaError(f"reference image not found: {ref}")
        return ref

    def embedding(self, path: Path, what: str, face_index: int = 0) -> np.ndarray:
        """Raw embedding of the ``face_index``-th largest face in ``path`` (0 = the largest)."""
        key = (path, face_index)
        if key not in self._embeddings:
            self._embeddings[key] = self._embed(path, what, face_index)
        return self._embeddings[key]

    def _faces(self, image: np.ndarray, path: Path, what: str, face_index: int) -> list[Face]:
        """The faces of the image, largest first."""
        faces = self.models.detector.detect(image)
        if not faces:
            raise MediaError(f"no face found in {what} image {path}")
        faces = sorted(faces, key=lambda f: (f.area, f.score), reverse=True)
        if face_index >= len(faces):
            raise UsageError(f"source_face={face_index}: {what} image {path} has {len(faces)} "
                             f"face{'s' if len(faces) > 1 else ''}")
        return faces

    @staticmethod
    def _say_which(path: Path, what: str, faces: int, face_index: int) -> None:
        if faces > 1:
            choice = "the largest" if face_index == 0 else f"face {face_index} by size"
            log.info("%s image %s has %d faces: using %s (source_face=N picks another)", what,
                     path.name, faces, choice)

    def _embed(self, path: Path, what: str, face_index: int) -> np.ndarray:
        source_sha = self.hashes.sha(path)
        model_sha = self.models.embedder_entry.sha256
        cache_key = source_sha if face_index == 0 else f"{source_sha[:24]}-face{face_index}"
        cached = self.cache.load(cache_key, model_sha)
        count = self.cache.load_faces(cache_key, model_sha) if cached is not None else None
        if cached is not None and count is not None:
            # the face count is stored with the embedding: which face is used is said at every
            # render, without loading the detector for it
            log.debug("%s embedding from cache", what)
            self._say_which(path, what, count, face_index)
            return cached
        image = read_image(path, what)
        faces = self._faces(image, path, what, face_index)
        self._say_which(path, what, len(faces), face_index)
        value = cached
        if value is None:
            value = self.models.embedder.embed(image, faces[face_index])
            self.cache.store(cache_key, model_sha, value)
        self.cache.store_faces(cache_key, model_sha, len(faces))
        return value
