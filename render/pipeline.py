"""Streaming: a reader thread, the face stage and a writer thread joined by bounded queues.

Frames in flight (decoded but not yet handed to the encoder) never exceed ``frames_in_flight``:
the reader takes a slot before it decodes a frame and the writer gives it back after encoding.
The face stage (``render.face_stage``) gathers the frames that are ready (a share of the slots, so
decoding goes on meanwhile) and batches their face crops through the chain of face processors.

The face stage has two halves. Finding the faces carries state from frame to frame, so it runs
in order, on the calling thread. Running the chain and pasting the faces found touch only their
own batch, so with ``lanes`` > 1 that half runs on a pool of lane threads, several batches at
once, each model call with its own ONNX Runtime threads; the writer takes the batches back in
frame order. A batch's pixels do not depend on which lane made them.
"""
from __future__ import annotations

import logging
import queue
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

import numpy as np

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


@dataclass
class Ready:
    """What the face stage hands on from ``stream``'s ``process``: the frames to write now, in order
    (frames of earlier batches when it holds frames back for a look-ahead), the rest of their
    work (None: nothing to do), and how many frames it let go of without writing (a segment's
    pre-roll and look-ahead: decoded to find faces, not encoded)."""

    frames: list[np.ndarray]
    rest: Callable[[], None] | None = None
    dropped: int = 0


def timed(times: StageTimes, stage: str, fn: Callable, *args):
    t0 = time.perf_counter()
    try:
        return fn(*args)
    finally:
        times.add(stage, time.perf_counter() - t0)


_DONE = object()


class _Failure:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def stream(frames: Iterable[np.ndarray], write: Callable[[np.ndarray], None],
           process: Callable[[list[np.ndarray]], Ready | Callable[[], None] | None], *,
           frames_in_flight: int, times: StageTimes, progress: Progress | None = None,
           lanes: int | Callable[[], int] = 1, finish: Callable[[], Ready] | None = None,
           held: int = 0) -> int:
    """Run reader → ``process`` → writer with at most ``frames_in_flight`` frames in the system.

    ``process(batch)`` runs on the calling thread, batch after batch in frame order. It may return
    the rest of the batch's work, which runs on one of ``lanes`` lane threads (on the calling
    thread when ``lanes`` is 1) before the writer takes the batch's frames, still in order. It
    may instead return a :class:`Ready`: then the writer takes the frames that names (the stage
    holds up to ``held`` frames back for a look-ahead, and ``finish()`` hands them on at the end
    of the input); the held frames come on top of ``frames_in_flight`` (else they would take
    the slots the lanes' batches need), so the stage always gets the frame it waits for. A
    batch gathers the frames that are ready, up to ``frames_in_flight // (lanes + 1)``, so that
    decoding and encoding go on while every lane works. ``lanes`` may be a callable, asked before
    every batch: the thread policy goes down to one lane once it finds ffmpeg the busier side
    (handing batches to another thread costs CPU that ffmpeg needs then).

    Returns the number of frames written. Any failure in a thread stops the others and is
    re-raised here; KeyboardInterrupt in the caller's thread stops everything too.
    """
    slots = threading.Semaphore(max(1, frames_in_flight) + max(0, held))
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

    def hand_on(ready: Ready, n_lanes: int) -> None:
        """Start the rest of a batch's work (here or on a lane) and queue its frames to write."""
        for _ in range(ready.dropped):
            slots.release()
        lane: Future | None = None
        if ready.rest is not None:
            if pool is None or n_lanes == 1:
                ready.rest()
            else:
                lane = pool.submit(ready.rest)
        if ready.frames or lane is not None:
            out_q.put((ready.frames, lane))

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
            ready = process(batch)
            if not isinstance(ready, Ready):
                ready = Ready(batch, ready)
            hand_on(ready, n_lanes)
        if finish is not None:
            hand_on(finish(), min(most, max(1, lanes_now())))
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
