"""The review's tracks: the faces of every segment's record linked, in frame order, into one
track per face over the whole render.

Within a segment rendered with tracks (stabilize.enabled), a face continues the face of the
same track id; otherwise — the next segment's first frame, a track that ended and started anew
after a miss longer than ``stabilize.fill``, a render without tracks — a face continues the
track whose last face it overlaps (box IoU ≥ 0.3) or whose key points lie within half a face
width of its own, best pairs first, if that track's last face is at most ``gap`` frames back.
The frames between two faces of a track are its misses. Everything is decided by the records
alone, so the tracks are the same whichever schedule rendered the segments.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import numpy as np

from ..faces.select import box_iou
from .measure import key_point_jump

#: a face found again within this many seconds, where it was, is the same face (the frames
#: between are misses); later, or elsewhere, it starts a new track
LINK_SECONDS = 4.0
MIN_IOU = 0.3
MAX_DISTANCE = 0.5      # mean key point distance, in face widths


@dataclass(frozen=True)
class FaceAt:
    """One selected face in one frame (a record's row), with its sample where it has one."""

    frame: int                    # in the target
    segment: int
    track: int                    # the segment's track id (or place in the frame's selection)
    linked: bool                  # the id comes from a track linker
    how: str
    box: np.ndarray
    kps: np.ndarray
    distance: float | None = None
    colour: float | None = None
    sampled: bool = False


@dataclass
class ReviewTrack:
    id: int
    faces: list[FaceAt] = field(default_factory=list)

    @property
    def last(self) -> FaceAt:
        return self.faces[-1]


def faces_of(records: Mapping[int, Mapping[str, Any] | None]) -> list[FaceAt]:
    """Every face of the records, in frame order (then segment, then track id)."""
    out = []
    for index in sorted(records):
        record = records[index]
        if record is None:
            continue
        samples = {(n, t): (d, c) for n, t, d, c in record.get("samples", ())}
        linked = bool(record.get("tracked"))
        for row in record.get("faces", ()):
            frame, track, how, *points = row
            sample = samples.get((frame, track))
            box = np.asarray(points[:4], np.float64)
            kps = np.asarray(points[4:14], np.float64).reshape(5, 2)
            out.append(FaceAt(frame, index, track, linked, how, box, kps,
                              *(sample if sample is not None else (None, None)),
                              sampled=sample is not None))
    out.sort(key=lambda f: (f.frame, f.segment, f.track))
    return out


def _score(track: ReviewTrack, face: FaceAt) -> float | None:
    """How well ``face`` continues ``track`` (lower is better); None: it does not."""
    last = track.last
    if face.linked and last.linked and last.segment == face.segment and last.track == face.track:
        return -2.0
    overlap = box_iou(face.box, last.box)
    distance = key_point_jump(last.kps, face.kps, last.box)
    if overlap >= MIN_IOU or distance <= MAX_DISTANCE:
        return distance - overlap
    return None


def link(faces: Iterable[FaceAt], gap: int) -> list[ReviewTrack]:
    """``faces`` (in frame order) linked into tracks, numbered from 1 in the order they start."""
    tracks: list[ReviewTrack] = []
    frame_faces: list[FaceAt] = []

    def place(batch: list[FaceAt]) -> None:
        frame = batch[0].frame
        live = [t for t in tracks if frame - gap - 1 <= t.last.frame < frame]
        pairs = []
        for i, face in enumerate(batch):
            for track in live:
                score = _score(track, face)
                if score is not None:
                    pairs.append((score, track.id, i, track))
        pairs.sort(key=lambda p: p[:3])
        taken: set[int] = set()
        placed: set[int] = set()
        for _, tid, i, track in pairs:
            if tid in taken or i in placed:
                continue
            taken.add(tid)
            placed.add(i)
            track.faces.append(batch[i])
        for i, face in enumerate(batch):
            if i not in placed:
                tracks.append(ReviewTrack(len(tracks) + 1, [face]))

    for face in faces:
        if frame_faces and face.frame != frame_faces[0].frame:
            place(frame_faces)
            frame_faces = []
        frame_faces.append(face)
    if frame_faces:
        place(frame_faces)
    return tracks
