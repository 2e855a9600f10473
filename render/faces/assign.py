"""select.mode=map: which person of the face map each face track is, decided per track.

Each person has a reference embedding (what they look like in the target). A track is embedded
when it starts, every ``every`` detections, on a close call (its distance within ``margin`` of
the threshold), while its face overlaps another face and in every frame where the number of
faces found changes or a track starts (where faces cross, hide one another or part, the linker
may hand a track the other person's face). It is the person whose reference is nearest, if that is
under ``distance``; a track nobody matches is left as it is, and may be matched later.

A matched track keeps its person: it moves to another only when the other is clearly nearer
(by ``margin``) and its own is no longer under the threshold — what a linking error at a
crossing looks like — so a person is never swapped back and forth within a track. A new
instance per segment, fed from the segment's first decoded frame: the same decisions whoever
renders the segment.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from .embed import identity_distance
from .select import box_iou
from .types import Face


@dataclass
class _Person:
    person: int | None          # index into the references; None: nobody matched
    distances: np.ndarray       # to every reference, at the last embedding
    since: int = 0              # detections since then


def _crowded(faces: Sequence[Face]) -> set[int]:
    """The faces whose boxes overlap another's."""
    out: set[int] = set()
    for i in range(len(faces)):
        for j in range(i + 1, len(faces)):
            if box_iou(faces[i].box, faces[j].box) > 0.0:
                out |= {i, j}
    return out


class MapTracks:
    def __init__(self, embed: Callable[[np.ndarray, Face], np.ndarray],
                 references: Sequence[np.ndarray], *, distance: float, every: int = 25,
                 margin: float = 0.1) -> None:
        self.embed = embed
        self.references = list(references)
        self.threshold = distance
        self.every = max(1, every)
        self.margin = margin
        self.by_id: dict[int, _Person] = {}
        self._crowded: set[int] = set()    # tracks that overlapped another face last frame
        self._count = 0                    # faces found in the last frame
        self.embeds = 0

    def _fresh(self, state: _Person | None, crowded: bool) -> bool:
        if state is None or crowded or state.since + 1 >= self.every:
            return True
        nearest = float(state.distances.min())
        return abs(nearest - self.threshold) < self.margin

    def _choose(self, state: _Person | None, distances: np.ndarray) -> int | None:
        nearest = int(np.argmin(distances))       # ties: the first person (the map's order)
        if distances[nearest] >= self.threshold:
            nearest_ok = None
        else:
            nearest_ok = nearest
        if state is None or state.person is None:
            return nearest_ok
        own = float(distances[state.person])
        if nearest_ok is not None and nearest != state.person and own >= self.threshold \
                and distances[nearest] + self.margin <= own:
            return nearest
        return state.person

    def decide(self, frame: np.ndarray, faces: list[Face], ids: list[int], alive: set[int]
               ) -> dict[int, int]:
        """track id → person, for the tracks among ``alive`` that are someone (``ids``: the
        track of each of this frame's ``faces``); a track not found in this frame keeps its
        last decision."""
        crowded = {ids[k] for k in _crowded(faces)}
        # faces meeting, parting or hiding one another are when a linker may hand a track the
        # wrong face: every face is embedded again where the faces found change
        unsettled = len(faces) != self._count or any(tid not in self.by_id for tid in ids)
        self._count = len(faces)
        for face, tid in zip(faces, ids):
            state = self.by_id.get(tid)
            if self._fresh(state, unsettled or tid in crowded or tid in self._crowded):
                self.embeds += 1
                e = self.embed(frame, face)
                distances = np.array([identity_distance(e, r) for r in self.references])
                self.by_id[tid] = _Person(self._choose(state, distances), distances)
            else:
                state.since += 1
        self._crowded = crowded
        self.by_id = {tid: s for tid, s in self.by_id.items() if tid in alive}
        return {tid: s.person for tid, s in self.by_id.items() if s.person is not None}
