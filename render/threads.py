"""How the cores are shared between ONNX Runtime's models and the ffmpeg children: the thread
policy, and the /proc helpers it reads and sets the children with."""
from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable

log = logging.getLogger(__name__)


def process_threads(pid: int) -> set[int]:
    """The thread ids of process ``pid`` (/proc/PID/task); {pid} where they cannot be listed."""
    try:
        return {int(t) for t in os.listdir(f"/proc/{pid}/task")}
    except (OSError, ValueError):
        return {pid}


def renice_process(pid: int, nice: int) -> None:
    """Every thread of process ``pid`` at ``nice``; best effort.

    On Linux a nice value belongs to a thread: ``setpriority(PRIO_PROCESS, pid)`` sets only the
    one whose id is ``pid`` (an ffmpeg child's main thread, not its decoder's and encoder's
    workers). Threads started later inherit the value of the thread that starts them; the ones
    started while this runs are caught by listing again until no new one appears.
    """
    done: set[int] = set()
    for _ in range(4):
        todo = process_threads(pid) - done
        if not todo:
            return
        for tid in todo:
            try:
                os.setpriority(os.PRIO_PROCESS, tid, nice)
            except (OSError, AttributeError):
                pass
        done |= todo


def cpu_count() -> int:
    """The CPUs this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 2


def default_threads() -> int:
    """Half the CPUs this process may use: what ONNX Runtime gets when ffmpeg is the busier side."""
    return max(1, cpu_count() // 2)


def child_cpu_seconds(pid: int) -> float | None:
    """CPU seconds (user + system) a live child has used so far (/proc/PID/stat), None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


class ThreadPolicy:
    """How the cores are shared between ONNX Runtime's models and ffmpeg (``execution.threads=0``).

    **Lanes.** When the models run on the CPU provider, the face stage swaps and enhances ``LANES``
    batches at once (``render.pipeline.stream``), each model call with ``cores // LANES`` intra-op
    threads: two one-thread calls make more swaps per second than one call with both threads,
    and an encoder taking a core slows one lane instead of stalling both halves of every call.
    On a GPU provider there is one lane (two would double the activations in a capped arena).

    **Who yields.** After the first ``WARMUP`` frames of a render (session creation, first-call
    allocations), over the next frames, the policy compares the CPU time of the render process
    (the models, their pre- and post-processing, the pipes) with that of the ffmpeg decoder and
    encoder. The window closes after ``WINDOW`` frames, or sooner, once it holds ``MIN_FRAMES``
    frames and ``MIN_CPU_S`` CPU-seconds: real models decide within a few frames, light ones take
    the longer window they need for a steady figure:

    * the models run on the CPU provider and use at least ``MODELS_FIRST`` times ffmpeg's CPU
      (real models): they keep their threads, and the ffmpeg children step back (nice
      ``NICE``), so that no ONNX Runtime thread waits for an encoder holding its core; ffmpeg
      runs in the gaps;
    * otherwise (light models, or a GPU doing the inference, whose render process's CPU time is
      mostly pre- and post-processing and waits for the device, nothing that yielding the
      encoder would speed up): one lane (handing batches to lane threads costs CPU that ffmpeg
      needs), and ONNX Runtime gets half the cores; its sessions on the CPU provider are
      recreated with that at their next call if it changes their threads. ffmpeg keeps the rest
      at normal priority.

    **OpenCV** (the detector's resize, the warps, the paste-back blend) gets the same number of
    threads as one model call (``render.models.load.LoadedModels``): on cores that ffmpeg and the lanes keep
    busy, its pool's second thread only adds hand-over cost.

    The measurements behind these choices are in bench/RESULTS.md. Decided once per render; a
    fixed ``execution.threads`` or a single core leave it alone (one lane unless
    ``execution.lanes`` says otherwise). Neither choice changes an output's bytes
    (tests/test_segments.py renders with the policy and with three lanes and compares SHA-256s
    with a one-lane render).
    """

    LANES = 2
    WARMUP = 2
    WINDOW = 16
    MIN_FRAMES = 3
    MIN_CPU_S = 0.5
    MODELS_FIRST = 1.5
    NICE = 19

    def __init__(self, fixed: int, cores: int | None = None, *, lanes: int = 0,
                 on_cpu: bool | Callable[[], bool] = True,
                 apply: Callable[[], None] | None = None) -> None:
        self.cores = cores or cpu_count()
        #: gives the models and OpenCV ``threads`` once the policy has decided
        self._apply = apply
        auto = not fixed and self.cores >= 2
        #: where the models run: asked again when the window closes, since a GPU provider that
        #: failed (at creation or in a call) leaves them on the CPU (render.models.load.LoadedModels.on_cpu)
        self._on_cpu: Callable[[], bool] = on_cpu if callable(on_cpu) else (lambda: on_cpu)
        self.on_cpu = self._on_cpu()
        #: batches swapped at once (render.pipeline.stream); fixed by ``execution.lanes``
        self.lanes = lanes or (self.LANES if auto and self.on_cpu else 1)
        self._lanes_fixed = bool(lanes)
        self._fixed = bool(fixed)
        #: ONNX Runtime's intra-op threads per model call
        self.threads = fixed or max(1, self.cores // self.lanes)
        self.ffmpeg_nice = 0
        self.decided = bool(fixed) or self.cores < 2
        self.reason = f"execution.threads={fixed}" if fixed else \
            ("one core" if self.cores < 2 else "undecided")
        self._frames = 0
        self._at = 0
        self._start: tuple[float, float] | None = None

    def observe(self, frames: int, children: list[int]) -> int | None:
        """``frames`` more frames were processed while ``children`` (the ffmpeg pids) ran; returns
        ONNX Runtime's new thread count when the policy lowers it, else None. When it decides, it
        applies itself: the children run at ``ffmpeg_nice`` and the models get ``threads``."""
        if self.decided:
            return None
        threads = self._observe(frames, children)
        if self.decided:
            log.info("threads: %s", self.reason)
            self.renice(children)
            if self._apply is not None:
                self._apply()
        return threads

    def _observe(self, frames: int, children: list[int]) -> int | None:
        self._frames += frames
        if self._frames < self.WARMUP:
            return None
        cpu = [child_cpu_seconds(pid) for pid in children]
        if not cpu or any(c is None for c in cpu):
            return None
        now = (time.process_time(), sum(c for c in cpu if c is not None))
        if self._start is None:
            self._start, self._at = now, self._frames
            return None
        n = self._frames - self._at
        own, ffmpeg = now[0] - self._start[0], now[1] - self._start[1]
        if n < self.WINDOW and (n < self.MIN_FRAMES or own + ffmpeg < self.MIN_CPU_S):
            return None
        self.decided = True
        self.on_cpu = self._on_cpu()
        figures = f"render {own * 1000 / n:.0f} CPU-ms/frame, ffmpeg {ffmpeg * 1000 / n:.0f}"
        if self.on_cpu and own >= self.MODELS_FIRST * ffmpeg:
            self.ffmpeg_nice = self.NICE
            self.reason = (f"{figures}: ONNX Runtime keeps {self.lanes} lane(s) × {self.threads} "
                           f"thread(s) on {self.cores} cores, ffmpeg at nice {self.NICE}")
            return None
        if not self._lanes_fixed:
            self.lanes = 1
        threads = max(1, self.cores // 2 // self.lanes)
        self.reason = f"{figures}: ONNX Runtime gets {threads * self.lanes} of {self.cores} cores"
        if threads == self.threads:
            return None
        self.threads = threads
        return threads

    def share(self, segments: int) -> None:
        """``segments`` segments are rendered at once (``render.segment_pool``): their encoders
        take the cores they are pinned to, so the policy does not watch one segment's children
        but decides now: one lane (unless ``execution.lanes`` says otherwise), and each model
        call gets ``cores // (2 × segments)`` threads (half the cores shared out over the
        segments), ffmpeg the rest at normal priority. A fixed ``execution.threads`` stays."""
        if segments < 2 or self._fixed:
            return
        if not self._lanes_fixed:
            self.lanes = 1
        self.threads = max(1, self.cores // (2 * segments))
        self.ffmpeg_nice = 0
        self.decided = True
        self.reason = (f"{segments} segments at once: ONNX Runtime gets {self.threads} thread(s) "
                       f"per call on {self.cores} cores, the encoders the rest")
        log.info("threads: %s", self.reason)
        if self._apply is not None:
            self._apply()

    def restart(self) -> None:
        """A new segment: its ffmpeg children are new processes, so the window starts again."""
        self._start = None

    def renice(self, children: list[int]) -> None:
        """Run ``children`` (ffmpeg pids), every thread of them, at ``ffmpeg_nice``; best effort
        (a child may be gone)."""
        if not self.ffmpeg_nice:
            return
        for pid in children:
            renice_process(pid, self.ffmpeg_nice)

    def summary(self) -> dict[str, Any]:
        return {"onnxruntime_threads": self.threads, "lanes": self.lanes, "cores": self.cores,
                "ffmpeg_nice": self.ffmpeg_nice, "why": self.reason}
