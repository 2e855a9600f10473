"""The source face (and the reference face): raw embeddings, computed once per (file, face,
embedder) and cached on disk and for the renderer's life."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import cv2
import numpy as np

from .config import Config
from .errors import MediaError, UsageError
from .faces.embed import EmbeddingCache, identity_distance, normalise
from .faces.types import Face
from .files import FileHashes
from .models.load import LoadedModels
from .sources import FaceMap

log = logging.getLogger(__name__)


def read_image(path: Path, what: str) -> np.ndarray:
    image = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if image is None:
        raise MediaError(f"cannot read {what} image {path}: not an image file OpenCV can decode")
    return image


@dataclass(frozen=True)
class Person:
    """One person of the face map as the face stage uses it: their reference image's raw
    embedding (what the tracks are matched to) and their source images."""

    reference: Path
    embedding: np.ndarray
    sources: tuple[Path, ...]


class SourceFaces:
    """Embeddings of the faces a render puts in (``source``) or looks for (``reference``)."""

    def __init__(self, cfg: Config, models: LoadedModels, hashes: FileHashes) -> None:
        self.cfg = cfg
        self.models = models
        self.hashes = hashes
        self.cache = EmbeddingCache(cfg.cache_path)
        self._embeddings: dict[tuple[Path, int], np.ndarray] = {}
        self._faces_found: dict[tuple[Path, int], tuple[np.ndarray, Face]] = {}
        self._counts: dict[Path, int] = {}         # faces in each source image embedded
        self._said_best: set[Path] = set()

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

    def identity(self, paths: Sequence[Path]) -> np.ndarray:
        """The identity of one person given by ``paths``: one image's raw embedding, or for
        several the mean of their L2-normalised embeddings (FaceFusion's rule for its normalised
        identity) at the mean length of their raw ones, so contracts that take the raw vector
        get one of the length they were trained on. Summed in the order of the files' SHA-256:
        the order they are given in changes no byte."""
        if len(paths) == 1:
            return self.source(paths[0])
        raws = [self.source(p) for p in self._by_sha(paths)]
        length = np.mean([np.linalg.norm(r) for r in raws])
        mean = np.mean(np.stack([normalise(r) for r in raws]), axis=0)
        return (mean * length).astype(np.float32)

    def best_face(self, paths: Sequence[Path]) -> tuple[np.ndarray, Face]:
        """For a swapper that takes the source's crop: of several images, the one whose face is
        closest to their mean identity (said once), with its face."""
        if len(paths) == 1:
            return self.face(paths[0])
        mean = normalise(self.identity(paths))
        ordered = self._by_sha(paths)
        best = max(ordered, key=lambda p: float(np.dot(normalise(self.source(p)), mean)))
        if best not in self._said_best:
            self._said_best.add(best)
            log.info("the swapper takes one source crop: using %s, the closest of the %d source "
                     "images to their mean identity", best.name, len(paths))
        return self.face(best)

    def described(self, paths: Sequence[Path]) -> list[dict]:
        """The report's rows of ``paths`` (embedded before): each image's SHA-256 and how many
        faces it has."""
        return [{"path": str(p), "sha256": self.hashes.sha(p), "faces": self._counts.get(p)}
                for p in paths]

    def _by_sha(self, paths: Sequence[Path]) -> list[Path]:
        return sorted(paths, key=self.hashes.sha)

    def people(self, face_map: FaceMap) -> list[Person]:
        """The face map's people in the order of their reference images' SHA-256 (the order of
        the map's entries changes no byte), each reference embedded and each source checked;
        two references of one person (closer than ``select.distance``) are refused."""
        people = [Person(e.reference, self.embedding(e.reference, "face map reference"),
                         e.sources) for e in sorted(face_map.entries,
                                                     key=lambda e: self.hashes.sha(e.reference))]
        for person in people:
            self.identity(person.sources)
        limit = self.cfg.select.distance
        for i, a in enumerate(people):
            for b in people[i + 1:]:
                d = identity_distance(a.embedding, b.embedding)
                if d < limit:
                    raise UsageError(f"face map {face_map.origin}: references {a.reference.name} "
                                     f"and {b.reference.name} look like one person (identity "
                                     f"distance {d:.2f} < select.distance {limit:g})")
        return people

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
            self._counts[path] = count
            return cached
        image = read_image(path, what)
        faces = self._faces(image, path, what, face_index)
        self._say_which(path, what, len(faces), face_index)
        value = cached
        if value is None:
            value = self.models.embedder.embed(image, faces[face_index])
            self.cache.store(cache_key, model_sha, value)
        self.cache.store_faces(cache_key, model_sha, len(faces))
        self._counts[path] = len(faces)
        return value
