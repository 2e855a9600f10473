"""The face window: frames wait here for the frames after them (the look-ahead: ``fill`` or
``window`` frames, the larger), so that a face the detector missed for up to ``fill`` frames
inside a track is filled in, and then every track's points go through its stabilisation in frame
order: the line through its points ``window`` frames either side, then its One-Euro filter.

A frame enters with the faces found in it (each with its track id) and the selected tracks; it
leaves once ``fill`` later frames have entered (or at the end). When a track is found again after
a miss of at most ``fill`` frames, the frames of the miss are still waiting: each gets the track's
face interpolated between the faces before and after the miss. A track that stays away longer has
ended (``render.faces.tracks``), so nothing after it is invented.
"""
from __future__ import annotations

import dataclasses
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .faces.stabilize import FaceFilter, face_points, local_linear, with_points
from .faces.types import Face

DETECTED, TRACKED, FILLED = "detected", "tracked", "filled"


@dataclass
class TrackFace:
    """One track's face in one frame: as found (``raw``) and as used (``used``, after the filter;
    None while the frame waits or when the track is not selected)."""

    track: int
    raw: Face
    how: str                      # DETECTED, TRACKED (followed by optical flow) or FILLED
    selected: bool
    used: Face | None = None
    #: which of the render's identities the chain puts on it (select.mode=map: the person)
    source: int = 0


@dataclass
class FrameFaces:
    index: int                    # frame number within the segment's decoded frames
    frame: np.ndarray
    faces: dict[int, TrackFace] = field(default_factory=dict)


def interpolate(a: Face, b: Face, t: float) -> Face:
    """The face a share ``t`` of the way from ``a`` to ``b`` (every point linearly; landmarks
    where both have them)."""
    if (a.landmarks is None) != (b.landmarks is None):
        a, b = (dataclasses.replace(f, landmarks=None) for f in (a, b))
    pa, pb = face_points(a), face_points(b)
    return dataclasses.replace(with_points(a, (1 - t) * pa + t * pb),
                               score=min(a.score, b.score))


class FaceWindow:
    """Holds frames back for the look-ahead, fills short misses, stabilises on the way out."""

    def __init__(self, *, fill: int, make_filter: Callable[[Face], Callable[[Face], Face]] | None,
                 window: int = 0) -> None:
        self.fill = fill
        self.make_filter = make_filter
        self.window = window                 # frames either side of the centred line
        self.lookahead = max(fill, window)   # frames a frame waits for
        self._history: dict[int, deque[tuple[int, Face]]] = {}   # track -> its last raw faces
        self._waiting: deque[FrameFaces] = deque()
        self._last_seen: dict[int, tuple[int, TrackFace]] = {}   # track -> (index, its face)
        self._filters: dict[int, Callable[[Face], Face]] = {}
        self._index = 0
        self.filled = 0

    def push(self, frame: np.ndarray, faces: list[TrackFace]) -> list[FrameFaces]:
        """Add the next frame with its faces; returns the frames that may leave now, in order."""
        entry = FrameFaces(self._index, frame, {f.track: f for f in faces})
        self._index += 1
        for face in faces:
            self._fill_gap(entry.index, face)
            self._last_seen[face.track] = (entry.index, face)
        self._waiting.append(entry)
        out = []
        while self._waiting and self._waiting[0].index + self.lookahead < self._index:
            out.append(self._release(self._waiting.popleft()))
        return out

    def finish(self) -> list[FrameFaces]:
        """The frames still waiting (the end of the input)."""
        out = [self._release(e) for e in self._waiting]
        self._waiting.clear()
        return out

    def _fill_gap(self, index: int, face: TrackFace) -> None:
        seen = self._last_seen.get(face.track)
        if seen is None or index - seen[0] <= 1 or index - seen[0] - 1 > self.fill:
            return
        start, before = seen
        span = index - start
        for entry in self._waiting:
            if start < entry.index < index and face.track not in entry.faces:
                t = (entry.index - start) / span
                entry.faces[face.track] = TrackFace(
                    face.track, interpolate(before.raw, face.raw, t), FILLED,
                    before.selected and face.selected, source=before.source)
                self.filled += 1

    def _centred(self, entry: FrameFaces, tid: int) -> Face:
        """The track's face in ``entry`` on the line through its faces ``window`` frames either
        side (the frames before have left, the frames after still wait)."""
        face = entry.faces[tid].raw
        if self.window == 0:
            return face
        history = self._history.setdefault(tid, deque(maxlen=self.window))
        near = [(i, f) for i, f in history if entry.index - i <= self.window]
        near.append((entry.index, face))
        near += [(w.index, w.faces[tid].raw) for w in self._waiting
                 if tid in w.faces and w.index - entry.index <= self.window]
        history.append((entry.index, face))
        count = len(face_points(face))
        near = [(i, face_points(f)) for i, f in near if len(face_points(f)) == count]
        times = np.array([i for i, _ in near], np.float64)
        fit = local_linear(times, np.stack([p for _, p in near]), entry.index)
        return with_points(face, fit)

    def _release(self, entry: FrameFaces) -> FrameFaces:
        """Run the faces of a leaving frame through their tracks' centred line and filter."""
        for tid in sorted(entry.faces):
            face = entry.faces[tid]
            if self.make_filter is None:
                face.used = face.raw
                continue
            centred = self._centred(entry, tid)
            smooth = self._filters.get(tid)
            if smooth is None:
                smooth = self._filters[tid] = self.make_filter(centred)
            face.used = smooth(centred)
        # a track gone for longer than a fill can bridge has ended: drop its filter
        ended = [tid for tid, (i, _) in self._last_seen.items()
                 if entry.index - i > max(self.fill, self.window)]
        for tid in ended:
            self._last_seen.pop(tid)
            self._filters.pop(tid, None)
            self._history.pop(tid, None)
        return entry


def face_filter(min_cutoff: float, beta: float, d_cutoff: float
                ) -> Callable[[Face], Callable[[Face], Face]]:
    """A maker of one :class:`FaceFilter` per track, starting from the track's first face."""
    def make(first: Face) -> Callable[[Face], Face]:
        return FaceFilter(first, min_cutoff=min_cutoff, beta=beta, d_cutoff=d_cutoff)
    return make
