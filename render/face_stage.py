"""The face stage: detect → tracks → select → (the face window: fill, stabilise) → the chain:
for each face step align → run → paste, for each frame step the whole frames.

Finding the faces (detect, track, select, the window) carries state from frame to frame, so it
runs in order; running the chain touches only its own batch of frames (``pipeline.stream`` may
run it on a lane thread). A frame without a selected face goes through the frame steps alone.
The stage runs steps by what they declare (``processors.base``), never by what they are.
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from .config import Config
from .face_debug import FaceDebug
from .face_selection import Tracking, build_selection
from .face_window import DETECTED, TRACKED, FaceWindow, FrameFaces, TrackFace
from .faces import align
from .faces.colour import ColourMatch
from .faces.composite import paste
from .faces.detect import Detector
from .faces.flow import FaceTracker
from .faces.mask import PasteMask, combine
from .faces.types import Face, scale_face
from .masks.build import step_masks
from .model_handle import run_batched
from .models.load import LoadedModels
from .pipeline import Ready, StageTimes, timed
from .processors.base import FaceProcessor, FrameProcessor, FramesFn, Timeline
from .review.recorder import SegmentReview
from .source_face import SourceFaces
from .step_inputs import decoded_copies, step_extras


@dataclass(frozen=True)
class ChainStep:
    """One face processor as the stage runs it: the processor (its ``name``, ``template``,
    ``size`` and ``max_batch``), its call bound to this render's source face, its masks computed
    on the crops it is given and those computed on its results (``masks.build``). A frame
    processor stands in the chain as itself."""

    processor: FaceProcessor
    run: Callable[[np.ndarray], np.ndarray]
    masks: Sequence[PasteMask]
    masks_after: Sequence[PasteMask] = ()
    #: the (before, after) masks for crops of another side (a processor choosing its side per
    #: face)
    masks_for: Callable[[int], tuple[Sequence[PasteMask], Sequence[PasteMask]]] | None = None
    #: its calls bound to the render's other identities (select.mode=map: person 1, 2, ...)
    others: Sequence[Callable[[np.ndarray], np.ndarray]] = ()

    def run_for(self, source: int) -> Callable[[np.ndarray], np.ndarray]:
        """Its call bound to identity ``source`` (0: ``run``)."""
        return self.run if source == 0 else self.others[source - 1]


@dataclass(frozen=True)
class FrameStep:
    """One frame processor as the stage runs it: the processor (its ``name``) and its call bound
    to this render's output (whether it carries a matte as alpha)."""

    processor: FrameProcessor
    run: FramesFn

    @property
    def name(self) -> str:
        return self.processor.name


class FaceStage:
    """detect → link into tracks → select → (wait, fill, stabilise) → for each face step of the
    chain: align → run (batched) → mask → paste back; for each frame step: the whole frames.

    Without ``tracks`` (stabilize.enabled=false) every frame's selected faces are used as found.
    With it, frames wait in a :class:`FaceWindow` for the look-ahead's later frames, so short
    misses are filled and the points are stabilised before alignment. A segment's pre-roll
    (frames before its first, :meth:`segment`) and look-ahead (frames after its last) pass through
    detection and the window but are never written.
    """

    def __init__(self, *, detector: Detector, select: Callable[[np.ndarray, list[Face]], list[Face]],
                 chain: Sequence[ChainStep | FrameStep], batch_size: int = 1,
                 detect_every: int = 1,
                 times: StageTimes | None = None, tracks: Tracking | None = None,
                 debug: FaceDebug | None = None,
                 embed: Callable[[np.ndarray, Face], np.ndarray] | None = None,
                 landmarks: Callable[[list[np.ndarray], list[tuple[int, Face]]],
                                     list[tuple[int, Face]]] | None = None,
                 colour: ColourMatch | None = None,
                 review: SegmentReview | None = None) -> None:
        self.detector = detector
        self.review = review                # the written frames' review record (render.review)
        #: the target faces' identities, for steps that balance the source with them (swap.weight)
        self.embed = embed
        self.select = select
        self.chain = list(chain)
        self.landmarks = landmarks
        #: colour match: the targets' smoothed colour per track, for the steps with a colour_crop
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
        self._selected: dict[int, int] = {}     # selected track → the identity put on it
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

    def _follow(self, frame: np.ndarray) -> list[Face] | None:
        """The faces followed into ``frame`` by optical flow between detector runs; None where
        the detector runs (its turn, or a face was lost)."""
        following = self._tracker is not None and self._index % self.detect_every != 0
        self._index += 1
        if not following:
            return None
        return timed(self.times, "detect", self._tracker.track, frame)

    def _faces(self, frame: np.ndarray) -> list[Face]:
        followed = self._follow(frame)
        if followed is not None:
            return followed
        faces = timed(self.times, "detect", self.detector.detect, frame)
        chosen = timed(self.times, "embed", self.select, frame, faces)
        if self._tracker is not None:
            self._tracker.reset(frame, chosen)
        return chosen

    def _track_faces(self, frame: np.ndarray) -> list[TrackFace]:
        """This frame's faces in their tracks (stabilize.enabled)."""
        assert self.tracks is not None
        followed = self._follow(frame)
        if followed is not None:
            self.tracks.linker.follow(self._ids, followed)
            return [TrackFace(tid, face, TRACKED, tid in self._selected,
                              source=self._selected.get(tid, 0))
                    for tid, face in zip(self._ids, followed)]
        faces = timed(self.times, "detect", self.detector.detect, frame)
        ids = self.tracks.linker.link(faces)
        self._selected = timed(self.times, "embed", self.tracks.select, frame, faces, ids,
                               self.tracks.linker.alive())
        if self._tracker is not None:
            kept = [(tid, f) for tid, f in zip(ids, faces) if tid in self._selected]
            self._ids = [tid for tid, _ in kept]
            self._tracker.reset(frame, [f for _, f in kept])
        return [TrackFace(tid, face, DETECTED, tid in self._selected,
                          source=self._selected.get(tid, 0))
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
        used = [(i, f) for i, e in enumerate(kept)
                for f in (e.faces[t] for t in sorted(e.faces)) if f.selected and f.used is not None]
        faces = [(i, f.used) for i, f in used]
        sources = [f.source for _, f in used] if any(f.source for _, f in used) else None
        colours = self._colours(entries, kept) if self.colour is not None else None
        if self.debug is not None:
            first = next((s.processor for s in self.chain if isinstance(s, ChainStep)), None)
            self.debug.frames(kept, self._start - self._first,
                              (first.template, first.size) if first is not None else None)
        ready = Ready(frames, dropped=len(entries) - len(kept))
        if self.debug is not None and self.debug.overlay:     # drawn, not swapped: not counted
            ready.rest = (lambda: self._overlay(kept, frames)) if kept else None
        elif faces or (kept and self._frame_steps):
            self.times.faces += len(faces)
            self.times.frames_touched += len({i for i, _ in faces})
            numbers = [self._start - self._first + e.index for e in kept]
            ready.rest = lambda: self.swap(frames, faces, colours, sources, numbers)
        if self.review is not None:          # records the faces; measures them after the chain
            timed(self.times, "review", self.review.observe, kept, self._start - self._first,
                  ready)
        return ready

    def _overlay(self, kept: list[FrameFaces], frames: list[np.ndarray]) -> None:
        """debug.overlay: what the stage saw drawn into the frames, which then go through the
        frame steps only (the output has the chain's size and alpha)."""
        self.debug.draw(kept)
        if self._frame_steps:
            self.swap(frames, [])

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
               identities: np.ndarray | None = None, colours: list | None = None,
               sources: Sequence[int] | None = None,
               numbers: Sequence[int] | None = None,
               originals: Sequence[tuple[np.ndarray, Face]] | None = None) -> None:
        """Align every face to the step's template, run it over the crops in batches (with what
        else it takes: ``render.step_inputs``), paste back through the step's masks. The faces
        of each crop side (``crop_size``: pixel boost auto) and of each identity (``sources``:
        select.mode=map, each to the call bound to it) go together."""
        proc = step.processor
        sizes = [proc.crop_size(face.kps) for _, face in faces]
        sources = sources or [0] * len(faces)
        if proc.colour_crop is None:
            colours = None
        if all(size == proc.size for size in sizes) and not any(sources):
            self._apply_at(frames, faces, step, proc.size, (step.masks, step.masks_after),
                           identities, colours, numbers=numbers, originals=originals)
            return
        for size, source in sorted(set(zip(sizes, sources))):
            pick = [k for k, (s, i) in enumerate(zip(sizes, sources)) if (s, i) == (size, source)]
            masks = (step.masks, step.masks_after) if size == proc.size or step.masks_for is None \
                else step.masks_for(size)
            self._apply_at(frames, [faces[k] for k in pick], step, size, masks,
                           identities[pick] if identities is not None else None,
                           [colours[k] for k in pick] if colours is not None else None, source,
                           numbers, [originals[k] for k in pick] if originals is not None else None)

    def _apply_at(self, frames: list[np.ndarray], faces: list[tuple[int, Face]], step: ChainStep,
                  size: int, masks: tuple[Sequence[PasteMask], Sequence[PasteMask]],
                  identities: np.ndarray | None, colours: list | None = None,
                  source: int = 0, numbers: Sequence[int] | None = None,
                  originals: Sequence[tuple[np.ndarray, Face]] | None = None) -> None:
        before, after = masks
        proc = step.processor
        t0 = time.perf_counter()
        matrices = [align.estimate(face.kps, proc.template, size) for _, face in faces]
        crops = np.stack([align.warp(frames[i], m, size) for (i, _), m in zip(faces, matrices)])
        weights = combine(before, crops, [face for _, face in faces], matrices)
        self.times.add("composite", time.perf_counter() - t0)
        extras = step_extras(proc, faces, matrices, size, identities=identities,
                             numbers=numbers, originals=originals)
        results = timed(self.times, proc.name, run_batched, step.run_for(source), crops,
                        self.batch_size, proc.max_batch, *extras)
        t0 = time.perf_counter()
        if proc.own_mask:           # the step's BGR and its own paste mask, in one array
            weights = np.minimum(weights, results[..., 3])
            results = results[..., :3].astype(np.uint8)
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

    def process(self, frames: list[np.ndarray]) -> Ready:
        """Run the chain on ``frames`` on this thread (the whole input at once: nothing is held
        back afterwards); returns the frames to write (a frame step's are new ones)."""
        done = Ready([])
        for ready in (self.prepare(frames), self.finish()):
            if ready.rest is not None:
                ready.rest()
            done.frames.extend(ready.frames)
            done.dropped += ready.dropped
        return done

    @property
    def _frame_steps(self) -> bool:
        return any(isinstance(s, FrameStep) for s in self.chain)

    def swap(self, frames: list[np.ndarray], faces: list[tuple[int, Face]],
             colours: list | None = None, sources: Sequence[int] | None = None,
             numbers: Sequence[int] | None = None) -> None:
        """Run every step of the chain on ``frames`` and their ``faces``, in place (after the
        landmark step, when on, which may move the points the crops are placed by); each face
        gets the identity ``sources`` gives it (None: the render's one). The faces' identities
        are taken first, from the frames as decoded, when a step asks for them. ``numbers``: each
        frame's number in the target (None: counted from the segment's first)."""
        if numbers is None:
            numbers = range(self._start, self._start + len(frames))
        if faces and self.landmarks is not None and self.tracks is None:   # tracks: in _found
            faces = timed(self.times, "landmark", self.landmarks, frames, faces)
        identities = None
        if faces and self.embed is not None and any(
                isinstance(s, ChainStep) and s.processor.needs_target_identity
                for s in self.chain):
            identities = timed(self.times, "embed", lambda: np.stack(
                [self.embed(frames[i], face) for i, face in faces]))
        originals = self._originals(frames, faces)
        for step in self.chain:
            if isinstance(step, FrameStep):
                faces = self._frames(frames, faces, step)
            elif faces and frames[0].shape[2] == 4:     # a matte made earlier: faces on the BGR
                colour = [np.ascontiguousarray(f[..., :3]) for f in frames]
                self._apply(colour, faces, step, identities, colours, sources, numbers,
                            originals)
                for frame, bgr in zip(frames, colour):
                    frame[..., :3] = bgr
            elif faces:
                self._apply(frames, faces, step, identities, colours, sources, numbers,
                            originals)

    def _originals(self, frames: list[np.ndarray], faces: list[tuple[int, Face]]
                   ) -> list[tuple[np.ndarray, Face]] | None:
        """The faces' frames as decoded, for a step that takes them (``needs_original``)."""
        if faces and any(isinstance(s, ChainStep) and s.processor.needs_original
                         for s in self.chain):
            return decoded_copies(frames, faces)
        return None

    def _frames(self, frames: list[np.ndarray], faces: list[tuple[int, Face]],
                step: FrameStep) -> list[tuple[int, Face]]:
        """Run a frame step over ``frames`` (the list's items replaced in place, so whoever
        holds it writes the new frames); the faces move with the frames to their new size."""
        height, width = frames[0].shape[:2]
        frames[:] = timed(self.times, step.name, step.run, list(frames))
        new_h, new_w = frames[0].shape[:2]
        if (new_w, new_h) == (width, height):
            return faces
        return [(i, scale_face(face, new_w / width, new_h / height)) for i, face in faces]


def build_face_stage(cfg: Config, models: LoadedModels, faces: SourceFaces,
                     sources: Sequence[Path], times: StageTimes, alpha: bool = False,
                     timeline: Timeline | None = None) -> FaceStage:
    """The face stage of a render of the face of ``sources`` (one image, or several for their
    mean identity) with ``cfg``: the selection its ``select.*`` asks for and the chain bound to
    the render's identities (and, for a step that makes a matte, to whether the output carries
    it as ``alpha``; for a step that takes the frames' numbers, to the render's ``timeline``)."""
    t0 = time.perf_counter()
    selection = build_selection(cfg, models, faces, sources)
    times.add("embed", time.perf_counter() - t0)

    @functools.lru_cache(maxsize=None)
    def masks(size: int, padded: bool, on_result: bool
              ) -> tuple[tuple[PasteMask, ...], tuple[PasteMask, ...]]:
        before, after = step_masks(cfg.mask, size, models.masks, padded=padded,
                                   on_result=on_result)
        return tuple(before), tuple(after)

    def chain_step(p: FaceProcessor) -> ChainStep:
        def masks_for(size: int) -> tuple[Sequence[PasteMask], Sequence[PasteMask]]:
            return masks(size, p.mask_padding, p.mask_result)
        first, *others = selection.identities
        bind: Callable = p.bind
        if p.needs_frame_numbers:
            assert timeline is not None, f"{p.name} takes the frames' numbers: give a timeline"
            bind = functools.partial(p.bind_timeline, timeline=timeline)
        return ChainStep(p, bind(first), *masks_for(p.size), masks_for=masks_for,
                         others=tuple(bind(i) for i in others))

    chain = [chain_step(p) if isinstance(p, FaceProcessor) else FrameStep(p, p.bind(alpha))
             for p in models.processors]
    debug = FaceDebug.from_config(cfg.debug)
    crop = next((p.colour_crop for p in models.face_steps if p.colour_crop is not None), None)
    colour = ColourMatch(*crop) if crop is not None else None
    review = SegmentReview.for_render(cfg, models.embedder.embed,
                                      lambda i: selection.identities[i].embedding,
                                      tracked=selection.tracks is not None, times=times)
    return FaceStage(detector=models.detector, select=selection.select, chain=chain,
                     batch_size=models.settings.batch_size, detect_every=cfg.detect.every,
                     times=times, tracks=selection.tracks, debug=debug,
                     embed=models.embedder.embed, landmarks=models.landmarks, colour=colour,
                     review=review)
