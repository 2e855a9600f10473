"""Several segments of one render at once (``execution.parallel_segments``).

A segment is rendered by its own decoder, face stage and encoder; the models' sessions are
shared (calls on a GPU provider take turns, ``sessions.LazySession``). Segments do not depend on
each other (the plan starts each one's face tracking afresh and pins the encoder's threads), so
the bytes of every segment, and of the output, are the same for any number at once.

:func:`segments_at_once` is ``auto``'s choice; :func:`run_at_once` runs the segments on a pool
of threads while the calling thread watches the stop token (its state is only touched there,
``render.interrupts``).
"""
from __future__ import annotations

import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Callable, Iterator, Sequence, TypeVar

from .interrupts import Stopped, StopToken

_T = TypeVar("_T")
_R = TypeVar("_R")

#: cores below which ``auto`` renders one segment at a time
AUTO_MIN_CORES = 8


class Aborted(Stopped):
    """A segment unwinding because another one failed or a stop was requested: not an error of
    its own (its temp file is removed, the failure reported is the first one)."""


def segments_at_once(setting: int, *, cores: int, encoder_threads: int, frames_in_flight: int,
                     models_on_cpu: bool, segments: int) -> int:
    """How many of ``segments`` to render at once: ``setting`` when it is not 0 (auto).

    Auto gives every segment's encoder its pinned threads, and on the CPU provider as many again
    to the models, whose calls all segments share: ``cores // encoder_threads`` segments with the
    models on a GPU, half that on the CPU; one below :data:`AUTO_MIN_CORES` cores, where the
    thread policy's lanes already keep every core busy. The memory strategy's frames in flight are
    shared out across the segments, at least one each, so they also cap the number.
    """
    if setting:
        n = setting
    elif cores < AUTO_MIN_CORES:
        n = 1
    else:
        per_segment = max(1, encoder_threads) * (2 if models_on_cpu else 1)
        n = max(1, min(cores // per_segment, frames_in_flight))
    return max(1, min(n, segments))


def frames_per_segment(frames_in_flight: int, at_once: int) -> int:
    """Each segment's share of the frames in flight."""
    return max(1, frames_in_flight // max(1, at_once))


def run_at_once(items: Sequence[_T], work: Callable[[_T, threading.Event], _R], at_once: int,
                stop: StopToken) -> Iterator[tuple[_T, _R]]:
    """``work(item, abort)`` for every item, ``at_once`` at a time, started in order; yields
    (item, result) as each one finishes.

    The calling thread asks ``stop`` while it waits. A stop, a failing item, or the caller leaving
    the loop sets ``abort`` (the items ask it batch by batch and raise :class:`Aborted`), waits
    for every running item to unwind, and raises the first failure (an Aborted only when nothing
    else failed).
    """
    abort = threading.Event()
    pending: dict[Future, _T] = {}
    todo = iter(items)
    pool = ThreadPoolExecutor(max_workers=max(1, at_once), thread_name_prefix="render-segment")

    def start_next() -> None:
        for item in todo:
            pending[pool.submit(work, item, abort)] = item
            return

    try:
        for _ in range(at_once):
            start_next()
        while pending:
            done, _ = wait(pending, timeout=0.1, return_when=FIRST_COMPLETED)
            stop.check()
            for fut in _in_order(done, pending):
                item = pending.pop(fut)
                yield item, fut.result()
                start_next()
    except BaseException as exc:
        abort.set()
        wait(pending)
        first = next((f.exception() for f in pending
                      if f.exception() is not None and not isinstance(f.exception(), Aborted)),
                     None)
        if isinstance(exc, Aborted) and first is not None:
            raise first from None
        raise
    finally:
        pool.shutdown(wait=True)


def _in_order(done: set[Future], pending: dict[Future, object]) -> list[Future]:
    """The finished futures in the order they were started (a failure among them raises first
    only if it came first: the plan's order, not the threads' timing, decides what is said)."""
    return [f for f in pending if f in done]
