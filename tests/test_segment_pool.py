"""Several segments of one render at once (render/segment_pool.py): auto's choice, that the
segments really run side by side, and how a failure or a stop ends them. The renders' bytes for
N = 1, 2, 3 are compared in tests/test_segments.py."""
from __future__ import annotations

import threading
import time

import pytest

from render.interrupts import Stopped, StopToken
from render.segment_pool import Aborted, frames_per_segment, run_at_once, segments_at_once


@pytest.mark.parametrize("setting,cores,enc,fif,on_cpu,segments,want", [
    (0, 2, 4, 4, True, 10, 1),       # this class of machine: one at a time
    (0, 4, 4, 16, False, 10, 1),     # below 8 cores
    (0, 16, 4, 16, False, 10, 4),    # 16 cores, models on a GPU: an encoder's 4 threads each
    (0, 16, 4, 16, True, 10, 2),     # models on the CPU take as many again
    (0, 16, 4, 2, False, 10, 2),     # the frames in flight cap it: one frame each at least
    (0, 32, 4, 16, False, 3, 3),     # never more than the segments left
    (0, 16, 2, 16, False, 10, 8),    # fewer encoder threads, more segments
    (3, 2, 4, 4, True, 10, 3),       # an explicit value is taken as it is
    (5, 2, 4, 4, True, 2, 2),        # ... but not past the segments to render
])
def test_segments_at_once(setting, cores, enc, fif, on_cpu, segments, want):
    assert segments_at_once(setting, cores=cores, encoder_threads=enc, frames_in_flight=fif,
                            models_on_cpu=on_cpu, segments=segments) == want


def test_frames_in_flight_are_shared_out():
    assert [frames_per_segment(8, n) for n in (1, 2, 3, 4, 8, 16)] == [8, 4, 2, 2, 1, 1]


def test_items_run_side_by_side_and_come_back_as_they_finish():
    """Three items that each wait for the other two at a barrier: they finish only when they run
    at the same time. The fourth starts when a place is free."""
    barrier = threading.Barrier(3, timeout=10)
    started: list[int] = []

    def work(item: int, abort: threading.Event) -> int:
        started.append(item)
        if item < 3:
            barrier.wait()
            time.sleep(0.05 * item)          # item 0 first, then 1, then 2
        return item * 10

    got = list(run_at_once([0, 1, 2, 3], work, 3, StopToken()))
    assert sorted(got) == [(0, 0), (1, 10), (2, 20), (3, 30)]
    assert got[0] == (0, 0)
    assert started.index(3) == 3


def test_a_failing_item_aborts_the_running_ones_and_starts_no_more():
    seen_abort: list[int] = []
    started: list[int] = []

    def work(item: int, abort: threading.Event) -> int:
        started.append(item)
        if item == 1:
            time.sleep(0.2)
            raise ValueError("segment 1 is damaged")
        while not abort.wait(0.01):
            pass
        seen_abort.append(item)
        raise Aborted("another segment stopped")

    with pytest.raises(ValueError, match="segment 1 is damaged"):
        list(run_at_once([0, 1, 2, 3, 4], work, 3, StopToken()))
    assert sorted(started) == [0, 1, 2] and sorted(seen_abort) == [0, 2]


def test_a_stop_on_the_calling_thread_aborts_every_item():
    stop = StopToken()
    aborted: list[int] = []

    def work(item: int, abort: threading.Event) -> int:
        if item == 0:
            stop.reason = "cancelled"          # what a watched poll or the handler sets
        while not abort.wait(0.01):
            pass
        aborted.append(item)
        raise Aborted("stopped")

    with pytest.raises(Stopped, match="cancelled"):
        list(run_at_once([0, 1], work, 2, stop))
    assert sorted(aborted) == [0, 1]


def test_leaving_the_loop_early_waits_for_the_running_items():
    """The caller breaking out (its own failure) aborts the running items and waits for them."""
    running = threading.Event()
    ended: list[int] = []

    def work(item: int, abort: threading.Event) -> int:
        if item == 0:
            return 0
        running.set()
        while not abort.wait(0.01):
            pass
        ended.append(item)
        raise Aborted("stopped")

    for item, _ in run_at_once([0, 1], work, 2, StopToken()):
        assert running.wait(5)
        break
    assert ended == [1]
