"""Which detected faces get swapped: one (largest), many (all), reference (same identity)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from .embed import identity_distance
from .types import Face


def select_faces(faces: list[Face], mode: str, *,
                 embed: Callable[[Face], np.ndarray] | None = None,
                 reference: np.ndarray | None = None, distance: float = 0.6) -> list[Face]:
    if not faces:
        return []
    if mode == "one":
        return [max(faces, key=lambda f: (f.area, f.score))]
    if mode == "many":
        return list(faces)
    if mode == "reference":
        if embed is None or reference is None:
            raise ValueError("reference selection needs an embedder and a reference embedding")
        return [f for f in faces if identity_distance(embed(f), reference) < distance]
    raise ValueError(f"unknown face selection mode {mode!r}")


def box_iou(a: np.ndarray, b: np.ndarray) -> float:
    x1, y1 = max(a[0], b[0]), max(a[1], b[1])
    x2, y2 = min(a[2], b[2]), min(a[3], b[3])
    inter = max(0.0, float(x2 - x1)) * max(0.0, float(y2 - y1))
    union = (float(a[2] - a[0]) * float(a[3] - a[1]) + float(b[2] - b[0]) * float(b[3] - b[1])
             - inter)
    return inter / union if union > 0 else 0.0


class _Track:
    __slots__ = ("box", "distance", "since")

    def __init__(self, box: np.ndarray, distance: float) -> None:
        self.box, self.distance, self.since = box, distance, 0


class ReferenceTracks:
    """Reference selection that embeds a face once per track instead of once per frame.

    Faces are linked between consecutive detections by box overlap (IoU ≥ ``iou``, greedily, best
    overlap first, as FaceFusion 3.8's tracker does). A face is embedded again only when its track
    starts, every ``every`` detections, or when its last distance was within ``margin`` of the
    threshold (a close call is never carried over). A new instance per segment: the selection
    does not depend on what came before the segment.
    """

    def __init__(self, embed: Callable[[np.ndarray, Face], np.ndarray], reference: np.ndarray, *,
                 distance: float, every: int = 25, margin: float = 0.1, iou: float = 0.5) -> None:
        self.embed = embed
        self.reference = reference
        self.threshold = distance
        self.every = max(1, every)
        self.margin = margin
        self.iou = iou
        self.tracks: list[_Track] = []
        self.by_id: dict[int, _Track] = {}     # decide(): the state of each linked track
        self.embeds = 0

    def _fresh(self, track: _Track | None) -> bool:
        return track is None or track.since + 1 >= self.every or \
            abs(track.distance - self.threshold) < self.margin

    def _embedded(self, frame: np.ndarray, face: Face) -> _Track:
        self.embeds += 1
        return _Track(face.box, identity_distance(self.embed(frame, face), self.reference))

    def decide(self, frame: np.ndarray, faces: list[Face], ids: list[int], alive: set[int]
               ) -> set[int]:
        """The tracks (linked by ``render.faces.tracks``: ``ids`` of ``faces``, ``alive`` every
        live track) whose identity is the reference's; a track not found in this frame keeps
        its last decision."""
        for face, tid in zip(faces, ids):
            track = self.by_id.get(tid)
            if self._fresh(track):
                self.by_id[tid] = self._embedded(frame, face)
            else:
                track.box, track.since = face.box, track.since + 1
        self.by_id = {tid: t for tid, t in self.by_id.items() if tid in alive}
        return {tid for tid, t in self.by_id.items() if t.distance < self.threshold}

    def __call__(self, frame: np.ndarray, faces: list[Face]) -> list[Face]:
        pairs = sorted(((box_iou(f.box, t.box), i, j) for i, f in enumerate(faces)
                        for j, t in enumerate(self.tracks)), reverse=True)
        matched: dict[int, _Track] = {}
        used: set[int] = set()
        for overlap, i, j in pairs:
            if overlap < self.iou:
                break
            if i in matched or j in used:
                continue
            matched[i] = self.tracks[j]
            used.add(j)
        tracks, chosen = [], []
        for i, face in enumerate(faces):
            track = matched.get(i)
            if self._fresh(track):
                track = self._embedded(frame, face)
            else:
                track.box, track.since = face.box, track.since + 1
            tracks.append(track)
            if track.distance < self.threshold:
                chosen.append(face)
        self.tracks = tracks
        return chosen
