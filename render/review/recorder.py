"""The review's recorder: what the face stage did with each selected face of one segment, kept
for the report's quality section (``render.review.quality``).

Per written frame and per selected face: its track, how it was got (detected, tracked, filled),
its box and the five key points the crop was placed by. On sampled frames — every
``review.every``-th frame by its number in the target, so the same frames whoever renders the
segment — also the identity distance between the face embedded from the OUTPUT frame (after the
whole chain ran) and the identity the chain put on it (the source's raw embedding, or with a face
map the person's: ``TrackFace.source``), and the colour shift of the face's middle between the
target frame and the output (ΔE). Frames inside a track's life without a face are its misses:
they are found when the segments are merged (a miss can span a segment boundary).

The cost per frame is a few list appends; the embedding and the colour crops happen on sampled
frames only. :meth:`observe` runs on the stage's thread, in frame order, before the chain; the
measurement after the chain runs where the chain runs (a lane thread), before the frames are
written.
"""
from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ..face_window import FrameFaces
from ..faces.embed import identity_distance
from ..faces.types import Face, scale_face
from .measure import delta_e, lab_mean

if TYPE_CHECKING:
    from ..config import Config
    from ..pipeline import Ready, StageTimes

#: the record's format (``render.review.store``)
RECORD_VERSION = 1

Embed = Callable[[np.ndarray, Face], np.ndarray]
#: the raw embedding of the render's identity number N (TrackFace.source; None: not measured)
IdentityEmbedding = Callable[[int], "np.ndarray | None"]


def face_row(frame: int, track: int, how: str, face: Face) -> list:
    """One face as the record keeps it: [frame, track, how, x1, y1, x2, y2, 10 key point
    coordinates], positions to 1/100 px."""
    points = np.concatenate([face.box.reshape(-1), face.kps.reshape(-1)]).astype(np.float64)
    return [frame, track, how, *np.round(points, 2).tolist()]


class SegmentReview:
    """Records one segment's faces (a new one per segment, like the face stage)."""

    def __init__(self, *, every: int, embed: Embed, identity: IdentityEmbedding,
                 tracked: bool, times: StageTimes | None = None) -> None:
        self.every = max(1, int(every))
        self.embed = embed
        self.identity = identity
        #: track ids come from the stage's track linker; without one they are a face's place in
        #: its frame's selection, which links nothing
        self.tracked = tracked
        #: where the measuring after the chain adds its seconds (stage "review")
        self.times = times
        self.faces: list[list] = []
        self._samples: dict[tuple[int, int], tuple[float | None, float]] = {}
        self._lock = threading.Lock()

    @classmethod
    def for_render(cls, cfg: Config, embed: Embed | None, identity: IdentityEmbedding, *,
                   tracked: bool, times: StageTimes | None = None) -> "SegmentReview | None":
        """The recorder ``cfg`` asks for (``tracked``: the stage links faces into tracks);
        None where review is off or the faces are drawn instead of swapped (debug.overlay)."""
        if not cfg.review.enabled or cfg.debug.overlay or embed is None:
            return None
        return cls(every=cfg.review.every, embed=embed, identity=identity, tracked=tracked,
                   times=times)

    def observe(self, kept: list[FrameFaces], offset: int, ready: Ready) -> None:
        """The frames ``kept`` about to be written (``ready``; a frame's number in the target is
        its index plus ``offset``): record their selected faces, take the target's colour of the
        sampled ones, and make ``ready``'s rest measure the sampled faces once the chain ran."""
        sampled = []
        for i, entry in enumerate(kept):
            number = entry.index + offset
            for track in sorted(entry.faces):
                face = entry.faces[track]
                if not face.selected or face.used is None:
                    continue
                self.faces.append(face_row(number, track, face.how, face.used))
                if number % self.every == 0:
                    sampled.append((i, number, track, face.source, face.used,
                                    lab_mean(entry.frame, face.used)))
        if not sampled:
            return
        rest = ready.rest
        size = kept[0].frame.shape[:2]

        def measured() -> None:
            if rest is not None:
                rest()
            t0 = time.perf_counter()
            self._measure(ready.frames, sampled, size)
            if self.times is not None:
                self.times.add("review", time.perf_counter() - t0)
        ready.rest = measured

    def _measure(self, frames: list[np.ndarray], sampled: list[tuple[Any, ...]],
                 size: tuple[int, int]) -> None:
        """Identity distance and colour shift of each sampled face in the finished ``frames``
        (of ``size`` as decoded: a frame step may have resized them)."""
        for i, number, track, identity, face, before in sampled:
            frame = frames[i]
            if frame.shape[:2] != size:
                face = scale_face(face, frame.shape[1] / size[1], frame.shape[0] / size[0])
            after = lab_mean(frame, face)
            source = self.identity(identity)
            distance = None
            if source is not None:
                bgr = np.ascontiguousarray(frame[..., :3]) if frame.shape[2] == 4 else frame
                distance = identity_distance(self.embed(bgr, face), source)
            with self._lock:
                self._samples[(number, track)] = (distance, delta_e(before, after))

    def record(self, segment: int, start: int, end: int) -> dict[str, Any]:
        """This segment's record (frames [start, end) of the target), as JSON data."""
        with self._lock:
            samples = [[number, track, None if d is None else round(d, 4), round(c, 2)]
                       for (number, track), (d, c) in sorted(self._samples.items())]
        return {"version": RECORD_VERSION, "segment": segment, "frames": [start, end],
                "every": self.every, "tracked": self.tracked, "faces": self.faces,
                "samples": samples}
