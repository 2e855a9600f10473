"""Face tracks: the faces of consecutive frames linked into tracks with stable ids, and the
selection (one / many / reference / map) decided per track.

A face joins the track whose last face it overlaps (box IoU) or whose key points lie close to its
own (mean distance in face widths), best pairs first; a face that joins none starts a new track.
A track missed by the detector lives on for ``max_missed`` frames, so a face found again after a
short miss keeps its id (and its misses can be filled, ``render.face_window``). Ids count up from
0 in the order tracks start: a new instance per segment, fed from the same first frame whoever
renders the segment.
"""
from __future__ import annotations

from dataclasses import dataclass
import numpy as np

from .assign import MapTracks
from .select import ReferenceTracks, box_iou
from .types import Face


@dataclass
class Track:
    id: int
    face: Face          # the last face found for it
    missed: int = 0     # frames since then


def key_point_distance(a: Face, b: Face) -> float:
    """Mean distance of the two faces' key points, in widths of ``a``'s box."""
    width = max(float(a.box[2] - a.box[0]), 1e-6)
    return float(np.linalg.norm(a.kps - b.kps, axis=1).mean()) / width


class TrackLinker:
    """Links each frame's faces to the live tracks; returns each face's track id."""

    def __init__(self, *, max_missed: int, iou: float = 0.3, distance: float = 0.5) -> None:
        self.max_missed = max_missed
        self.iou = iou
        self.distance = distance
        self.tracks: list[Track] = []
        self._next_id = 0

    def follow(self, ids: list[int], faces: list[Face]) -> None:
        """Faces of known tracks followed into this frame by optical flow (nothing else was
        looked for: the other tracks miss no frame)."""
        moved = dict(zip(ids, faces))
        for track in self.tracks:
            if track.id in moved:
                track.face, track.missed = moved[track.id], 0

    def link(self, faces: list[Face]) -> list[int]:
        """The track id of every face the detector found in this frame; a live track it did not
        find missed a frame."""
        pairs = []
        for i, face in enumerate(faces):
            for j, track in enumerate(self.tracks):
                overlap = box_iou(face.box, track.face.box)
                dist = key_point_distance(track.face, face)
                if overlap >= self.iou or dist <= self.distance:
                    pairs.append((dist - overlap, i, j))
        pairs.sort()
        ids: list[int | None] = [None] * len(faces)
        taken: set[int] = set()
        for _, i, j in pairs:
            if ids[i] is not None or j in taken:
                continue
            taken.add(j)
            track = self.tracks[j]
            track.face, track.missed = faces[i], 0
            ids[i] = track.id
        for j, track in enumerate(self.tracks):
            if j not in taken:
                track.missed += 1
        self.tracks = [t for t in self.tracks if t.missed <= self.max_missed]
        for i, face in enumerate(faces):
            if ids[i] is None:
                self.tracks.append(Track(self._next_id, face))
                ids[i] = self._next_id
                self._next_id += 1
        return [i for i in ids if i is not None]

    def alive(self) -> set[int]:
        return {t.id for t in self.tracks}


class TrackSelection:
    """Which tracks get swapped. ``one``: the largest face's track, held until another track's
    face is ``switch`` times larger (two faces of about the same size do not take turns, and a
    missed frame does not hand the swap to the other face); ``many``: every track;
    ``reference``: the tracks whose identity is close to the reference (decided by
    :class:`ReferenceTracks` per track: embedded when the track starts, every ``embed_every``
    detections and on close calls)."""

    def __init__(self, mode: str, reference: ReferenceTracks | None = None, *,
                 switch: float = 1.25, people: MapTracks | None = None) -> None:
        if mode == "reference" and reference is None:
            raise ValueError("reference selection needs a reference")
        if mode == "map" and people is None:
            raise ValueError("map selection needs the face map's people")
        self.mode = mode
        self.reference = reference
        self.people = people
        self.switch = switch
        self._chosen: int | None = None
        self._area = 0.0            # the chosen track's last face's area

    def __call__(self, frame: np.ndarray, faces: list[Face], ids: list[int],
                 alive: set[int]) -> dict[int, int]:
        """The selected track ids among ``alive`` after this frame's ``faces`` (with ``ids``),
        each with the identity the chain puts on it (0 but in mode map: the person)."""
        if self.mode == "map":
            assert self.people is not None
            return self.people.decide(frame, faces, ids, alive)
        return dict.fromkeys(sorted(self._chosen_tracks(frame, faces, ids, alive)), 0)

    def _chosen_tracks(self, frame: np.ndarray, faces: list[Face], ids: list[int],
                       alive: set[int]) -> set[int]:
        if self.mode == "many":
            return set(alive)
        if self.mode == "reference":
            assert self.reference is not None
            return self.reference.decide(frame, faces, ids, alive)
        if self._chosen not in alive:
            self._chosen, self._area = None, 0.0
        for face, tid in zip(faces, ids):
            if tid == self._chosen:
                self._area = face.area
        if faces:
            best = max(range(len(faces)), key=lambda k: (faces[k].area, faces[k].score))
            if self._chosen is None or faces[best].area > self.switch * self._area:
                self._chosen, self._area = ids[best], faces[best].area
        return set() if self._chosen is None else {self._chosen}
