"""The face stage: detect → tracks → select → (the face window: fill, stabilise) → for each face
processor of the chain: align → run → paste.

Finding the faces (detect, track, select, the window) carries state from frame to frame, so it
runs in order; running the chain touches only its own batch of frames (``pipeline.stream`` may
run it on a lane thread). A frame without a selected face goes through untouched.
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import cv2
import numpy as np

from .config import Config
from .faces import align
from .faces.colour import ColourMatch
from .faces.composite import paste
from .faces.detect import Detector
from .faces.mask import PasteMask, combine
from .faces.select import ReferenceTracks, select_faces
from .faces.types import Face
from .masks.build import step_masks
from .face_debug import FaceDebug
from .face_window import DETECTED, TRACKED, FaceWindow, FrameFaces, TrackFace, face_filter
from .faces.tracks import TrackLinker, TrackSelection
from .models.load import LoadedModels
from .pipeline import Ready, StageTimes, run_batched, timed
from .processors.base import FaceProcessor
from .source_face import SourceFaces


class FaceTracker:
    """Carries the last detections along with the image between detector runs.

    Corner features inside and around each face box are followed with pyramidal Lucas-Kanade
    (kept only where tracking back lands within a pixel of the start); a robust similarity
    transform of those points moves the face's box and keypoints. A face that
    cannot be followed (too few points) is reported as lost, and the caller detects again.
    """

    MIN_POINTS = 6

    def __init__(self) -> None:
        self._gray: np.ndarray | None = None
        self._faces: list[Face] = []

    def reset(self, frame: np.ndarray, faces: list[Face]) -> None:
        self._gray = cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY)
        self._faces = faces

    def _features(self, face: Face) -> np.ndarray | None:
        assert self._gray is not None
        h, w = self._gray.shape
        x1, y1, x2, y2 = face.box
        mx, my = 0.15 * (x2 - x1), 0.15 * (y2 - y1)
        mask = np.zeros((h, w), np.uint8)
        mask[max(0, int(y1 - my)):min(h, int(y2 + my)), max(0, int(x1 - mx)):min(w, int(x2 + mx))] = 255
        pts = cv2.goodFeaturesToTrack(self._gray, maxCorners=64, qualityLevel=0.01,
                                      minDistance=max(2.0, 0.04 * float(x2 - x1)), mask=mask)
        return pts

    def track(self, frame: np.ndarray) -> list[Face] | None:
        """The faces moved to ``frame``, or None when any of them was lost."""
        gray = cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY)
        faces = []
        for face in self._faces:
            pts = self._features(face)
            if pts is None or len(pts) < self.MIN_POINTS:
                return None
            lk = {"winSize": (21, 21), "maxLevel": 3}
            new, status, _ = cv2.calcOpticalFlowPyrLK(self._gray, gray, pts, None, **lk)
            back, status_back, _ = cv2.calcOpticalFlowPyrLK(gray, self._gray, new, None, **lk)
            fb_error = np.linalg.norm((back - pts).reshape(-1, 2), axis=1)
            good = (status.reshape(-1) == 1) & (status_back.reshape(-1) == 1) & (fb_error < 1.0)
            if good.sum() < self.MIN_POINTS:
                return None
            m, _ = cv2.estimateAffinePartial2D(pts[good].reshape(-1, 2), new[good].reshape(-1, 2),
                                               method=cv2.RANSAC, ransacReprojThreshold=2.0)
            if m is None:
                return None
            kps = align.transform_points(face.kps, m)
            corners = align.transform_points(face.box.reshape(2, 2), m)
            faces.append(Face(box=corners.reshape(4).astype(np.float32),
                              kps=kps.astype(np.float32), score=face.score))
        self._gray, self._faces = gray, faces
        return faces


@dataclass(frozen=True)
class ChainStep:
    """One face processor as the stage runs it: the processor (its ``name``, ``template``,
    ``size`` and ``max_batch``), its call bound to this render's source face, its masks computed
    on the crops it is given and those computed on its results (``masks.build``)."""

    processor: FaceProcessor
    run: Callable[[np.ndarray], np.ndarray]
    masks: Sequence[PasteMask]
    masks_after: Sequence[PasteMask] = ()
    #: the (before, after) masks for crops of another side (a processor choosing its side per
    #: face)
    masks_for: Callable[[int], tuple[Sequence[PasteMask], Sequence[PasteMask]]] | None = None


@dataclass
class Tracking:
    """What stabilize.enabled adds to the stage: the track linker, the selection of tracks, the
    frames a miss may last and still be filled, the maker of each track's filter, and the frames
    either side of the centred line."""

    linker: TrackLinker
    select: TrackSelection
    fill: int
    make_filter: Callable[[Face], Callable[[Face], Face]] | None
    window: int = 0


class FaceStage:
    """detect → link into tracks → select → (wait, fill, stabilise) → for each step of the chain:
    align → run (batched) → mask → paste back.

    Without ``tracks`` (stabilize.enabled=false) every frame's selected faces are used as found.
    With it, frames wait in a :class:`FaceWindow` for the look-ahead's later frames, so short
    misses are filled and the points are stabilised before alignment. A segment's pre-roll
    (frames before its first, :meth:`segment`) and look-ahead (frames after its last) pass through
    detection and the window but are never written.
    """

    def __init__(self, *, detector: Detector, select: Callable[[np.ndarray, list[Face]], list[Face]],
                 chain: Sequence[ChainStep], batch_size: int = 1, detect_every: int = 1,
                 times: StageTimes | None = None, tracks: Tracking | None = None,
                 debug: FaceDebug | None = None,
                 embed: Callable[[np.ndarray, Face], np.ndarray] | None = None,
                 landmarks: Callable[[list[np.ndarray], list[tuple[int, Face]]],
                                     list[tuple[int, Face]]] | None = None,
                 colour: ColourMatch | None = None) -> None:
        self.detector = detector
        #: the target faces' identities, for steps that balance the source with them (swap.weight)
        self.embed = embed
        self.select = select
        self.chain = list(chain)
        self.landmarks = landmarks
        #: swap.color_match: the targets' smoothed colour per track, for the swapper step
        self.colour = colour
        self.batch_size = batch_size
        self.detect_every = detect_every
        self.times = times or StageTimes()
        self.tracks = tracks
        self.debug = debug
        self._index = 0
        self._tracker = FaceTracker() if detect_every > 1 else None
        self._window = FaceWindow(fill=tracks.fill if tracks else 0,
                                  make_filter=tracks.make_filter if tracks else None,
                                  window=tracks.window if tracks else 0)
        self._ids: list[int] = []           # track ids of the faces the optical flow follows
        self._selected: set[int] = set()
        self._first, self._count = 0, None  # frames written: [first, first + count) decoded
        self._start = 0                     # the target's number of the frame at _first

    @property
    def lookahead(self) -> int:
        """Frames the stage holds back before it hands a frame on."""
        return self._window.lookahead

    def segment(self, *, start: int, preroll: int, frames: int | None) -> None:
        """The decoded frames are ``preroll`` frames before the segment's first frame ``start``
        (in the target), then its ``frames`` frames, then its look-ahead: only the segment's own
        frames are handed on."""
        self._start, self._first, self._count = start, preroll, frames

    def _faces(self, frame: np.ndarray) -> list[Face]:
        tracking = self._tracker is not None and self._index % self.detect_every != 0
        self._index += 1
        if tracking:
            tracked = timed(self.times, "detect", self._tracker.track, frame)
            if tracked is not None:
                return tracked
        faces = timed(self.times, "detect", self.detector.detect, frame)
        chosen = timed(self.times, "embed", self.select, frame, faces)
        if self._tracker is not None:
            self._tracker.reset(frame, chosen)
        return chosen

    def _track_faces(self, frame: np.ndarray) -> list[TrackFace]:
        """This frame's faces in their tracks (stabilize.enabled)."""
        assert self.tracks is not None
        tracking = self._tracker is not None and self._index % self.detect_every != 0
        self._index += 1
        if tracking:
            followed = timed(self.times, "detect", self._tracker.track, frame)
            if followed is not None:
                self.tracks.linker.follow(self._ids, followed)
                return [TrackFace(tid, face, TRACKED, tid in self._selected)
                        for tid, face in zip(self._ids, followed)]
        faces = timed(self.times, "detect", self.detector.detect, frame)
        ids = self.tracks.linker.link(faces)
        self._selected = timed(self.times, "embed", self.tracks.select, frame, faces, ids,
                               self.tracks.linker.alive())
        if self._tracker is not None:
            kept = [(tid, f) for tid, f in zip(ids, faces) if tid in self._selected]
            self._ids = [tid for tid, _ in kept]
            self._tracker.reset(frame, [f for _, f in kept])
        return [TrackFace(tid, face, DETECTED, tid in self._selected)
                for tid, face in zip(ids, faces)]

    def _found(self, frames: list[np.ndarray]) -> list[list[TrackFace]]:
        """Each frame's faces, in frame order. With tracks the selected ones get the landmark
        step's points here, before they wait in the window, so the points stabilised are those
        the alignment uses (without tracks the step runs with the chain, in ``swap``)."""
        if self.tracks is None:
            return [[TrackFace(k, face, DETECTED, True) for k, face in enumerate(self._faces(f))]
                    for f in frames]
        found = [self._track_faces(frame) for frame in frames]
        if self.landmarks is not None:
            chosen = [(k, tf) for k, faces in enumerate(found) for tf in faces if tf.selected]
            refined = timed(self.times, "landmark", self.landmarks, frames,
                            [(k, tf.raw) for k, tf in chosen])
            for (_, tf), (_, face) in zip(chosen, refined):
                tf.raw = face
        return found

    def _hand_on(self, entries: list[FrameFaces]) -> Ready:
        """The frames of ``entries`` to write (pre-roll and look-ahead dropped) and their swaps."""
        kept = [e for e in entries if e.index >= self._first and
                (self._count is None or e.index < self._first + self._count)]
        frames = [e.frame for e in kept]
        faces = [(i, f.used) for i, e in enumerate(kept)
                 for f in (e.faces[t] for t in sorted(e.faces)) if f.selected and f.used is not None]
        colours = self._colours(entries, kept) if self.colour is not None else None
        if self.debug is not None:
            self.debug.frames(kept, self._start - self._first, self.chain)
        ready = Ready(frames, dropped=len(entries) - len(kept))
        if self.debug is not None and self.debug.overlay:     # drawn, not swapped: not counted
            ready.rest = (lambda: self.debug.draw(kept)) if kept else None
        elif faces:
            self.times.faces += len(faces)
            self.times.frames_touched += len({i for i, _ in faces})
            ready.rest = lambda: self.swap(frames, faces, colours)
        return ready

    def _colours(self, entries: list[FrameFaces], kept: list[FrameFaces]) -> list:
        """The smoothed target colour of every face ``_hand_on`` passes on, in its order; every
        entry's faces (the pre-roll's too) go through the smoothing, in frame order."""
        assert self.colour is not None
        stats = {(e.index, t): self.colour.target(t, e.frame, f.used.kps)
                 for e in entries for t in sorted(e.faces)
                 for f in (e.faces[t],) if f.selected and f.used is not None}
        return [stats[(e.index, t)] for e in kept for t in sorted(e.faces)
                if e.faces[t].selected and e.faces[t].used is not None]

    def _apply(self, frames: list[np.ndarray], faces: list[tuple[int, Face]], step: ChainStep,
               identities: np.ndarray | None = None, colours: list | None = None) -> None:
        """Align every face to the step's template, run it over the crops in batches, paste back
        through the step's masks; ``identities`` (the faces' raw embeddings) go with the crops to
        a step that asks for them. A processor that chooses its crop side per face
        (``crop_size``: pixel boost auto) gets the faces of each side together."""
        proc = step.processor
        sizes = [proc.crop_size(face.kps) for _, face in faces]
        if not getattr(proc, "color_match", False):
            colours = None
        if all(size == proc.size for size in sizes):
            self._apply_at(frames, faces, step, proc.size, (step.masks, step.masks_after),
                           identities, colours)
            return
        for size in sorted(set(sizes)):
            pick = [k for k, s in enumerate(sizes) if s == size]
            masks = (step.masks, step.masks_after) if size == proc.size or step.masks_for is None \
                else step.masks_for(size)
            self._apply_at(frames, [faces[k] for k in pick], step, size, masks,
                           identities[pick] if identities is not None else None,
                           [colours[k] for k in pick] if colours is not None else None)

    def _apply_at(self, frames: list[np.ndarray], faces: list[tuple[int, Face]], step: ChainStep,
                  size: int, masks: tuple[Sequence[PasteMask], Sequence[PasteMask]],
                  identities: np.ndarray | None, colours: list | None = None) -> None:
        before, after = masks
        proc = step.processor
        t0 = time.perf_counter()
        matrices = [align.estimate(face.kps, proc.template, size) for _, face in faces]
        crops = np.stack([align.warp(frames[i], m, size) for (i, _), m in zip(faces, matrices)])
        weights = combine(before, crops, [face for _, face in faces], matrices)
        self.times.add("composite", time.perf_counter() - t0)
        wants = getattr(proc, "needs_target_identity", False)
        results = timed(self.times, proc.name, run_batched, step.run, crops, self.batch_size,
                        proc.max_batch, identities if wants else None)
        t0 = time.perf_counter()
        if colours is not None:
            results = self.colour.apply(results, colours)
        if after:
            weights = np.minimum(weights, combine(after, results,
                                                  [face for _, face in faces], matrices))
        if proc.opacity != 1.0:
            weights = weights * np.float32(proc.opacity)
        for k, ((i, _), crop, m) in enumerate(zip(faces, results, matrices)):
            paste(frames[i], crop, m, weights if weights.ndim == 2 else weights[k])
        self.times.add("composite", time.perf_counter() - t0)

    def prepare(self, frames: list[np.ndarray]) -> Ready:
        """Find the faces of ``frames`` (in frame order: tracks, the selection and the filters
        carry state between frames); returns the frames that may be written now and the rest of
        their work (the chain and the paste back, in place), which touches only those frames
        and may run on another thread."""
        return self._hand_on([e for frame, faces in zip(frames, self._found(frames))
                              for e in self._window.push(frame, faces)])

    def finish(self) -> Ready:
        """The frames still held back at the end of the input, and their work."""
        return self._hand_on(self._window.finish())

    def process(self, frames: list[np.ndarray]) -> None:
        """Run the chain on the selected faces of ``frames`` in place, on this thread (the whole
        input at once: nothing is held back afterwards)."""
        for ready in (self.prepare(frames), self.finish()):
            if ready.rest is not None:
                ready.rest()

    def swap(self, frames: list[np.ndarray], faces: list[tuple[int, Face]],
             colours: list | None = None) -> None:
        """Run every step of the chain on ``faces`` of ``frames``, in place (after the landmark
        step, when on, which may move the points the crops are placed by). The faces' identities
        are taken first, from the frames as decoded, when a step asks for them."""
        if self.landmarks is not None and self.tracks is None:   # with tracks: in _found
            faces = timed(self.times, "landmark", self.landmarks, frames, faces)
        identities = None
        if self.embed is not None and any(getattr(s.processor, "needs_target_identity", False)
                                          for s in self.chain):
            identities = timed(self.times, "embed", lambda: np.stack(
                [self.embed(frames[i], face) for i, face in faces]))
        for step in self.chain:
            self._apply(frames, faces, step, identities, colours)


def build_face_stage(cfg: Config, models: LoadedModels, faces: SourceFaces, source: Path,
                     times: StageTimes) -> FaceStage:
    """The face stage of a render of ``source``'s face with ``cfg``: the selection its
    ``select.*`` asks for and the chain bound to the source face."""
    t0 = time.perf_counter()
    embedding = faces.source(source)
    select_cfg = cfg.select
    ref_path = faces.reference_path(source)
    reference_tracks = None
    if ref_path is not None:
        reference = faces.embedding(ref_path, "reference")
        select = reference_tracks = ReferenceTracks(
            models.embedder.embed, reference, distance=select_cfg.distance,
            every=select_cfg.embed_every, margin=select_cfg.margin)
    else:
        needed = any(getattr(p, "needs_target_identity", False) for p in models.processors)
        if models.settings.release_idle_models and not needed:
            models.embedder.lazy.release()   # not needed again: the source embedding is cached

        def select(frame: np.ndarray, found: list[Face]) -> list[Face]:
            return select_faces(found, select_cfg.mode)
    times.add("embed", time.perf_counter() - t0)

    @functools.lru_cache(maxsize=None)
    def masks(size: int, contract: str) -> tuple[tuple[PasteMask, ...], tuple[PasteMask, ...]]:
        before, after = step_masks(cfg, size, contract, models.masks)
        return tuple(before), tuple(after)
    chain = [ChainStep(p, p.bind_face(*faces.face(source)) if p.takes_source_image
                       else p.bind(embedding), *masks(p.size, p.model.entry.contract),
                       masks_for=functools.partial(lambda size, c: masks(size, c),
                                                   c=p.model.entry.contract))
             for p in models.processors]
    stab = cfg.stabilize
    tracks = None
    if stab.enabled:
        tracks = Tracking(TrackLinker(max_missed=stab.fill),
                          TrackSelection(select_cfg.mode, reference_tracks), stab.fill,
                          face_filter(stab.min_cutoff, stab.beta, stab.d_cutoff), stab.window)
    debug = FaceDebug.from_config(cfg.debug)
    swapper = next((p for p in models.processors if getattr(p, "color_match", False)), None)
    colour = ColourMatch(swapper.template, swapper.native) if swapper is not None else None
    return FaceStage(detector=models.detector, select=select, chain=chain,
                     batch_size=models.settings.batch_size, detect_every=cfg.detect.every,
                     times=times, tracks=tracks, debug=debug, embed=models.embedder.embed,
                     landmarks=models.landmarks, colour=colour)
