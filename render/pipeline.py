"""Streaming: a reader thread, the face stage and a writer thread joined by bounded queues.

Frames in flight (decoded but not yet handed to the encoder) never exceed ``frames_in_flight``:
the reader takes a slot before it decodes a frame and the writer gives it back after encoding.
The face stage gathers the frames that are ready (a share of the slots, so decoding goes on
meanwhile) and batches their face crops through the swapper and enhancer. A frame without a
selected face goes through untouched.

The face stage has two halves. Finding the faces (detect, track, select) carries state from frame
to frame, so it runs in order, on the calling thread. Swapping, enhancing and pasting the faces
found touch only their own batch, so with ``lanes`` > 1 that half runs on a pool of lane threads,
several batches at once, each model call with its own ONNX Runtime threads; the writer takes the
batches back in frame order. A batch's pixels do not depend on which lane made them.
"""
from __future__ import annotations

import logging
import queue
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Sequence

import cv2
import numpy as np

from .faces import align
from .faces.composite import paste
from .faces.detect import Detector
from .faces.mask import PasteMask, combine
from .faces.types import Face
from .processors.base import FaceProcessor
from .progress import Progress

log = logging.getLogger(__name__)

STAGES = ("decode", "detect", "embed", "swap", "enhance", "composite", "encode")


@dataclass
class StageTimes:
    """Seconds spent per stage, summed over the threads that ran it (with several lanes, the
    swap, enhance and composite figures add up the lanes' time)."""

    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    frames: int = 0
    faces: int = 0
    frames_touched: int = 0               # frames with at least one face swapped
    first_frame_at: float | None = None   # perf_counter when the first frame was encoded
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, stage: str, dt: float) -> None:
        with self._lock:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + dt

    def merge(self, other: "StageTimes") -> None:
        """Add ``other`` (a segment's times) into these (the render's)."""
        for k, v in other.seconds.items():
            self.seconds[k] = self.seconds.get(k, 0.0) + v
        self.frames += other.frames
        self.faces += other.faces
        self.frames_touched += other.frames_touched
        if self.first_frame_at is None:
            self.first_frame_at = other.first_frame_at

    def ms_per_frame(self) -> dict[str, float]:
        n = max(self.frames, 1)
        return {k: v * 1000.0 / n for k, v in self.seconds.items()}


def _timed(times: StageTimes, stage: str, fn: Callable, *args):
    t0 = time.perf_counter()
    try:
        return fn(*args)
    finally:
        times.add(stage, time.perf_counter() - t0)


def run_batched(fn: Callable[[np.ndarray], np.ndarray], crops: np.ndarray, batch: int,
                max_batch: int | None) -> np.ndarray:
    """``fn`` over ``crops`` in chunks: ``batch`` when the model takes any batch, else its fixed one."""
    step = max(1, batch) if max_batch is None else max_batch
    return np.concatenate([fn(crops[i:i + step]) for i in range(0, len(crops), step)])


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
    ``size`` and ``max_batch``), its call bound to this render's source face, and its masks."""

    processor: FaceProcessor
    run: Callable[[np.ndarray], np.ndarray]
    masks: Sequence[PasteMask]


class FaceStage:
    """detect → select → for each step of the chain: align → run (batched) → mask → paste back."""

    def __init__(self, *, detector: Detector, select: Callable[[np.ndarray, list[Face]], list[Face]],
                 chain: Sequence[ChainStep], batch_size: int = 1, detect_every: int = 1,
                 times: StageTimes | None = None) -> None:
        self.detector = detector
        self.select = select
        self.chain = list(chain)
        self.batch_size = batch_size
        self.detect_every = detect_every
        self.times = times or StageTimes()
        self._index = 0
        self._tracker = FaceTracker() if detect_every > 1 else None

    def _faces(self, frame: np.ndarray) -> list[Face]:
        tracking = self._tracker is not None and self._index % self.detect_every != 0
        self._index += 1
        if tracking:
            tracked = _timed(self.times, "detect", self._tracker.track, frame)
            if tracked is not None:
                return tracked
        faces = _timed(self.times, "detect", self.detector.detect, frame)
        chosen = _timed(self.times, "embed", self.select, frame, faces)
        if self._tracker is not None:
            self._tracker.reset(frame, chosen)
        return chosen

    def _apply(self, frames: list[np.ndarray], faces: list[tuple[int, Face]], step: ChainStep
               ) -> None:
        """Align every face to the step's template, run it over the crops in batches, paste back
        through the step's masks."""
        proc = step.processor
        t0 = time.perf_counter()
        matrices = [align.estimate(face.kps, proc.template, proc.size) for _, face in faces]
        crops = np.stack([align.warp(frames[i], m, proc.size) for (i, _), m in zip(faces, matrices)])
        weights = combine(step.masks, crops, [face for _, face in faces])
        self.times.add("composite", time.perf_counter() - t0)
        results = _timed(self.times, proc.name, run_batched, step.run, crops, self.batch_size,
                         proc.max_batch)
        t0 = time.perf_counter()
        for k, ((i, _), crop, m) in enumerate(zip(faces, results, matrices)):
            paste(frames[i], crop, m, weights if weights.ndim == 2 else weights[k])
        self.times.add("composite", time.perf_counter() - t0)

    def find(self, frames: list[np.ndarray]) -> list[tuple[int, Face]]:
        """The selected faces of ``frames`` as (index in ``frames``, face); in frame order, one
        batch after the other (the tracker and the selection carry state between frames)."""
        faces = [(i, face) for i, frame in enumerate(frames) for face in self._faces(frame)]
        self.times.faces += len(faces)
        self.times.frames_touched += len({i for i, _ in faces})
        return faces

    def prepare(self, frames: list[np.ndarray]) -> Callable[[], None] | None:
        """Find the faces of ``frames``; returns the rest of the work (the chain and the paste
        back, in place), which touches only these frames and may run on another thread, or None
        when no face was selected."""
        faces = self.find(frames)
        if not faces:
            return None
        return lambda: self.swap(frames, faces)

    def process(self, frames: list[np.ndarray]) -> None:
        """Run the chain on the selected faces of ``frames`` in place, on this thread."""
        rest = self.prepare(frames)
        if rest is not None:
            rest()

    def swap(self, frames: list[np.ndarray], faces: list[tuple[int, Face]]) -> None:
        """Run every step of the chain on ``faces`` of ``frames``, in place."""
        for step in self.chain:
            self._apply(frames, faces, step)


_DONE = object()


class _Failure:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def stream(frames: Iterable[np.ndarray], write: Callable[[np.ndarray], None],
           process: Callable[[list[np.ndarray]], Callable[[], None] | None], *,
           frames_in_flight: int, times: StageTimes, progress: Progress | None = None,
           lanes: int | Callable[[], int] = 1) -> int:
    """Run reader → ``process`` → writer with at most ``frames_in_flight`` frames in the system.

    ``process(batch)`` runs on the calling thread, batch after batch in frame order. It may return
    the rest of the batch's work, which runs on one of ``lanes`` lane threads (on the calling
    thread when ``lanes`` is 1) before the writer takes the batch's frames, still in order. A
    batch gathers the frames that are ready, up to ``frames_in_flight // (lanes + 1)``, so that
    decoding and encoding go on while every lane works. ``lanes`` may be a callable, asked before
    every batch: the thread policy goes down to one lane once it finds ffmpeg the busier side
    (handing batches to another thread costs CPU that ffmpeg needs then).

    Returns the number of frames written. Any failure in a thread stops the others and is
    re-raised here; KeyboardInterrupt in the caller's thread stops everything too.
    """
    slots = threading.Semaphore(max(1, frames_in_flight))
    stop = threading.Event()
    in_q: queue.Queue = queue.Queue()
    out_q: queue.Queue = queue.Queue()
    lanes_now: Callable[[], int] = lanes if callable(lanes) else (lambda: lanes)
    most = max(1, lanes_now())
    pool = ThreadPoolExecutor(max_workers=most, thread_name_prefix="render-lane") \
        if most > 1 else None
    written = 0

    def acquire() -> bool:
        while not stop.is_set():
            if slots.acquire(timeout=0.1):
                return True
        return False

    def reader() -> None:
        it: Iterator[np.ndarray] = iter(frames)
        try:
            while acquire():
                t0 = time.perf_counter()
                frame = next(it, None)
                times.add("decode", time.perf_counter() - t0)
                if frame is None:
                    slots.release()
                    break
                in_q.put(frame)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            in_q.put(_Failure(exc))
            return
        in_q.put(_DONE)

    def finished(lane: Future | None) -> bool:
        """Wait for a batch's lane work; False when the stream stopped meanwhile."""
        while lane is not None and not lane.done():
            if stop.is_set():
                return False
            wait([lane], timeout=0.1)
        if lane is not None:
            lane.result()                  # re-raises the lane's failure
        return True

    def writer() -> None:
        nonlocal written
        try:
            while True:
                try:
                    item = out_q.get(timeout=0.1)
                except queue.Empty:
                    if stop.is_set():
                        return
                    continue
                if item is _DONE:
                    return
                batch, lane = item
                if not finished(lane):
                    return
                for frame in batch:
                    t0 = time.perf_counter()
                    write(frame)
                    times.add("encode", time.perf_counter() - t0)
                    written += 1
                    times.frames = written
                    if times.first_frame_at is None:
                        times.first_frame_at = time.perf_counter()
                    slots.release()
                    if progress is not None:
                        progress.update(1)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            writer_failure.append(exc)
            stop.set()

    writer_failure: list[BaseException] = []
    threads = [threading.Thread(target=reader, name="render-reader", daemon=True),
               threading.Thread(target=writer, name="render-writer", daemon=True)]
    for t in threads:
        t.start()
    try:
        done = False
        while not done:
            item = in_q.get()
            if isinstance(item, _Failure):
                raise item.exc
            if item is _DONE:
                break
            n_lanes = min(most, max(1, lanes_now()))
            gather = max(1, frames_in_flight // (n_lanes + 1))
            batch = [item]
            while len(batch) < gather:
                try:
                    nxt = in_q.get_nowait()
                except queue.Empty:
                    break
                if isinstance(nxt, _Failure):
                    raise nxt.exc
                if nxt is _DONE:
                    done = True
                    break
                batch.append(nxt)
            if writer_failure:
                raise writer_failure[0]
            rest = process(batch)
            lane: Future | None = None
            if rest is not None:
                if pool is None or n_lanes == 1:
                    rest()
                else:
                    lane = pool.submit(rest)
            out_q.put((batch, lane))
        out_q.put(_DONE)
        threads[1].join()
        if writer_failure:
            raise writer_failure[0]
    finally:
        stop.set()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)   # a model call runs to its end
        for t in threads:
            t.join(timeout=5)
    return written
