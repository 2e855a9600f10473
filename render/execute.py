"""Execute a :class:`~render.plan.RenderPlan`: render the segments not yet committed, then assemble.

A segment is encoded under a temp name in the work folder (``render.work_folder``) and committed
there only once its frame count is verified and its SHA-256 recorded; the assembly
(``render.assembly``) joins the committed segments into the output. A plan of one segment encodes
the finished file in that segment's pass (audio, tags, muxer).

Who runs which segments is the only difference between a render (all), a resumed render (the
missing ones) and a shard of a cluster job (its own): the bytes depend on the plan alone.
"""
from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from .assembly import Assembly
from .errors import MediaError
from .files import sha256_file
from .interrupts import PROCESS, StopToken
from .media.reader import FrameReader
from .media.writer import FrameWriter
from .pipeline import Ready, StageTimes, stream
from .progress import Progress
from .review import store as review_store
from .segment_pool import Aborted, frames_per_segment, run_at_once, segments_at_once
from .work_folder import AlreadyDone, SegmentRecord, WorkFolder, unlink

if TYPE_CHECKING:
    from .face_stage import FaceStage
    from .plan import RenderPlan, SegmentPlan
    from .sessions import Preload
    from .threads import ThreadPolicy

log = logging.getLogger(__name__)


@dataclass
class Hooks:
    """What an :class:`Executor` asks and tells its caller while it runs.

    ``stop`` is asked between segments and batch by batch within them (a stop drops the unfinished
    segment and keeps the committed ones); ``segment_done(record, done, total)`` is told when a
    segment is committed, and once with ``record=None`` as the rendering starts (``done`` counts
    the segments found committed); ``before_commit(tmp)`` gets the finished temp file before it
    is verified and replaces the output (marking); ``inputs_unchanged()`` raises when the target
    is no longer the file the render started from, asked before every commit; ``already_done()``
    is asked after waiting for another render of the same job: True ends this one (AlreadyDone).
    ``progress(stage, done, total)`` is told the stage ("rendering", "assembling", "marking") and
    the frames of the wanted segments done so far: frame by frame while rendering, from the
    writer thread (so it must be quick: rate-limit what it writes).
    """

    stop: StopToken = field(default_factory=lambda: PROCESS)
    segment_done: Callable[["SegmentRecord | None", int, int], None] | None = None
    before_commit: Callable[[Path], None] | None = None
    inputs_unchanged: Callable[[], None] | None = None
    already_done: Callable[[], bool] | None = None
    progress: Callable[[str, int, int], None] | None = None


class _Frames:
    """What ``stream`` updates per frame: the terminal progress (if any) and ``Hooks.progress``;
    the writer threads of several segments rendered at once take turns."""

    def __init__(self, bar: Progress | None, hook: Callable[[str, int, int], None] | None,
                 done: int, total: int) -> None:
        self.bar, self.hook, self.done, self.total = bar, hook, done, total
        self._lock = threading.Lock()

    def update(self, n: int = 1) -> None:
        with self._lock:
            self.done += n
            if self.bar is not None:
                self.bar.update(n)
            if self.hook is not None:
                self.hook("rendering", self.done, self.total)


@dataclass
class ExecResult:
    plan: RenderPlan
    segments: list[SegmentRecord]
    rendered: int                    # segments this run rendered
    resumed: int                     # segments found committed
    frames_decoded: int
    times: StageTimes = field(default_factory=StageTimes)
    assembled: bool = False
    output_sha256: str | None = None
    output_streams: list = field(default_factory=list)   # what verify_output counted
    threads: dict | None = None      # ThreadPolicy.summary(): who got the cores
    parallel_segments: int = 1       # segments rendered at once
    #: seconds spent on what segmenting adds to a render: committing segments (flush, count,
    #: hash), joining and muxing them, verifying the result, and marking it
    overhead: dict[str, float] = field(default_factory=lambda: {"commit": 0.0, "assemble": 0.0,
                                                                "verify": 0.0, "mark": 0.0})
    #: the report's quality section (render.review), from every segment's review record
    quality: dict | None = None


class Executor:
    """Runs a plan's segments through the face stage and assembles them.

    ``make_stage(times)`` builds a fresh :class:`FaceStage` for each segment (the detector's
    tracking, the face tracks and their filters restart on the first frame the segment decodes:
    its pre-roll's, on a multiple of ``detect.every``), so a segment's bytes do not depend on
    the segments before it, and ``parallel_segments`` of them (0 = auto,
    ``render.segment_pool``) can be rendered at once, sharing the ``frames_in_flight``.
    """

    def __init__(self, plan: RenderPlan, make_stage: Callable[[StageTimes], FaceStage], *,
                 frames_in_flight: int, progress: str = "off", hooks: Hooks | None = None,
                 threads: ThreadPolicy | None = None,
                 preload: Callable[[], Preload] | None = None, parallel_segments: int = 1,
                 encoder_threads: int = 1) -> None:
        self.plan = plan
        self.parallel_segments = parallel_segments
        self.encoder_threads = encoder_threads
        self.preload = preload
        self.threads = threads
        self.hooks = hooks or Hooks()
        self.make_stage = make_stage
        self.frames_in_flight = frames_in_flight
        self.progress_mode = progress
        self.work = WorkFolder(plan)
        self.assembly = Assembly(plan, self.work, self.hooks.stop, self.before_commit)
        self._frames_total = 1 if plan.kind == "image" else 0    # the frames Hooks.progress counts

    # -- segments ------------------------------------------------------------------------------
    def run(self, segments: Iterable[int] | None = None, *, assemble: bool = True,
            refuse_other: bool = False) -> ExecResult:
        plan = self.plan
        stop = self.hooks.stop
        if plan.kind == "image":
            with stop.polled(), self._preloading(True):
                return self._image()
        wanted = set(range(len(plan.segments))) if segments is None else set(segments)
        self.work.open(refuse_other=refuse_other, exclusive=assemble)
        if self.work.waited and self.hooks.already_done is not None and self.hooks.already_done():
            self.work.remove()
            raise AlreadyDone(f"{Path(plan.output).name} was rendered meanwhile by another render")
        times = StageTimes()
        records: dict[int, SegmentRecord] = {}
        try:
            todo = []
            commit_s = 0.0
            for seg in plan.segments:
                rec = self.work.committed(seg)
                if rec is not None:
                    rec.resumed = True
                    records[seg.index] = rec
                elif seg.index in wanted:
                    todo.append(seg)
            done_before = sum(1 for i in records if i in wanted)
            decoded = 0
            progress = Progress(sum(s.frames for s in todo), label=Path(plan.target).name,
                                mode=self.progress_mode) if self.progress_mode != "off" and todo \
                else None
            if done_before:
                note = f"resuming: {done_before} of {len(wanted)} segments done"
                if progress is not None:
                    progress.note(note)
                else:
                    log.info("%s: %s", Path(plan.output).name, note)
            done_hook = self.hooks.segment_done
            if done_hook is not None:
                done_hook(None, done_before, len(wanted))
            frames = _Frames(progress, self.hooks.progress,
                             sum(r.end - r.start for i, r in records.items() if i in wanted),
                             sum(s.frames for s in plan.segments if s.index in wanted))
            self._frames_total = frames.total
            if self.hooks.progress is not None and todo:
                self.hooks.progress("rendering", frames.done, frames.total)
            at_once = self._at_once(len(todo))
            with stop.polled(), self._preloading(bool(todo)):
                try:
                    for seg, (rec, n, c) in self._render(todo, times, frames, at_once):
                        decoded += n
                        commit_s += c
                        records[seg.index] = rec
                        if done_hook is not None:
                            done_hook(rec, len([i for i in records if i in wanted]), len(wanted))
                finally:
                    if progress is not None:
                        progress.close()
            result = ExecResult(plan, [records[i] for i in sorted(records)], rendered=len(todo),
                                resumed=done_before, frames_decoded=decoded, times=times,
                                threads=self.threads.summary() if self.threads else None,
                                parallel_segments=at_once)
            result.overhead["commit"] = commit_s
            if assemble:
                self._stage("assembling")
                result.quality = review_store.render_quality(plan)   # before the folder goes
                done = self.assembly.run({r.index for r in result.segments})
                result.assembled = True
                result.output_sha256 = done.output_sha256
                result.output_streams = done.output_streams
                result.overhead.update(mark=done.mark, verify=done.verify, assemble=done.assemble)
            return result
        finally:
            self.work.close()

    def _at_once(self, segments: int) -> int:
        """Segments to render at once (``execution.parallel_segments``); the thread policy is
        told, since it shares the cores out over them."""
        policy = self.threads
        n = segments_at_once(self.parallel_segments, cores=policy.cores if policy else 1,
                             encoder_threads=self.encoder_threads,
                             frames_in_flight=self.frames_in_flight,
                             models_on_cpu=policy.on_cpu if policy else True,
                             segments=max(1, segments))
        if policy is not None and n > 1:
            policy.share(n)
        return n

    def _render(self, todo: list[SegmentPlan], times: StageTimes, frames: _Frames, at_once: int
                ) -> Iterator[tuple[SegmentPlan, tuple[SegmentRecord, int, float]]]:
        """Render ``todo``: one after the other on this thread, or ``at_once`` at a time on a pool
        (each with its share of the frames in flight); yields each segment as it is committed."""
        stop = self.hooks.stop
        if at_once == 1:
            for seg in todo:
                stop.check()
                yield seg, self._segment(seg, times, frames, self.frames_in_flight, stop.check)
            return
        share = frames_per_segment(self.frames_in_flight, at_once)
        lock = threading.Lock()

        def one(seg: SegmentPlan, abort: threading.Event) -> tuple[SegmentRecord, int, float]:
            def check() -> None:
                if abort.is_set():
                    raise Aborted("another segment stopped")
            return self._segment(seg, times, frames, share, check, lock)

        yield from run_at_once(todo, one, at_once, stop)

    def _lanes(self) -> int:
        """Batches swapped at once now: the thread policy's choice (one without a policy)."""
        return self.threads.lanes if self.threads is not None else 1

    @contextlib.contextmanager
    def _preloading(self, needed: bool) -> Iterator[None]:
        """While there is work, the large models' sessions load in the background (Preload)."""
        loading = self.preload() if needed and self.preload is not None else None
        try:
            yield
        finally:
            if loading is not None:
                loading.join()

    def _stage(self, stage: str) -> None:
        """Tell Hooks.progress that every wanted frame is rendered and ``stage`` begins."""
        if self.hooks.progress is not None:
            self.hooks.progress(stage, self._frames_total, self._frames_total)

    def _segment(self, seg: SegmentPlan, times: StageTimes, progress: _Frames,
                 frames_in_flight: int, check: Callable[[], None],
                 merge_lock: threading.Lock | None = None) -> tuple[SegmentRecord, int, float]:
        """Render and commit one segment: its record, the frames decoded, seconds committing.
        ``check`` is asked before each batch (it raises to stop); ``merge_lock`` guards ``times``
        when segments run at once."""
        plan = self.plan
        tmp = self.work.temp(seg)
        encode = list(seg.encode[:-1]) + [str(tmp)]
        seg_times = StageTimes()
        stage = self.make_stage(seg_times)
        stage.segment(start=seg.start, preroll=seg.preroll, frames=seg.frames)
        t0 = time.perf_counter()
        with FrameReader(seg.decode, plan.width, plan.height) as reader, \
                FrameWriter(encode, tmp, name=f"segment {seg.index} of {Path(plan.output).name}",
                            width=plan.output_size[0], height=plan.output_size[1],
                            channels=4 if plan.alpha else 3) as writer:
            prepare = self._stoppable(self._with_policy(stage.prepare, reader, writer), check)
            frames = stream(reader, writer.write, prepare,
                            frames_in_flight=frames_in_flight, times=seg_times,
                            progress=progress, lanes=self._lanes, finish=stage.finish,
                            held=stage.lookahead)
            if frames < seg.frames:
                writer.abort()
                # the probe found every packet inside the file (a file that ends early is caught
                # by the plan, where allow_partial can cut it): the data of some is damaged
                raise MediaError(f"target {plan.target}: frames {seg.start}-{seg.end - 1} decode to "
                                 f"{frames} frames of {seg.frames}: the file is damaged there"
                                 f"{_decoder_note(reader)}")
            writer.close()
        errors = _decoder_note(reader)
        if errors:
            log.warning("decoding %s, frames %d-%d:%s", Path(plan.target).name, seg.start,
                        seg.end - 1, errors)
        with merge_lock or contextlib.nullcontext():
            times.merge(seg_times)
        record = SegmentRecord(index=seg.index, start=seg.start, end=seg.end, sha256="", bytes=0,
                               seconds=round(time.perf_counter() - t0, 3), faces=seg_times.faces,
                               frames_touched=seg_times.frames_touched,
                               host=socket.gethostname())
        try:
            self.check_inputs()
        except BaseException:
            unlink(tmp)
            raise
        t1 = time.perf_counter()
        if getattr(stage, "review", None) is not None:     # beside the segment, before its commit
            review_store.save(self.work.path, seg, stage.review)
        record = self.work.commit(seg, tmp, record)
        return record, reader.frames_read, time.perf_counter() - t1

    def _stoppable(self, process: Callable[[list], Any],
                   check: Callable[[], None] | None = None) -> Callable[[list], Any]:
        """``process`` that asks ``check`` (default: the stop hook) before each batch: a stop
        within a segment unwinds the stream, and the writer's abort removes the unfinished temp
        segment."""
        check = check or self.hooks.stop.check

        def checked(batch: list) -> Any:
            check()
            return process(batch)
        return checked

    def _with_policy(self, prepare: Callable[[list], Ready], reader: FrameReader,
                     writer: FrameWriter) -> Callable[[list], Ready]:
        """``prepare`` that also lets the thread policy watch this segment's ffmpeg children."""
        policy = self.threads
        if policy is None:
            return prepare
        children = [reader.proc.pid, writer.proc.pid]
        policy.restart()
        policy.renice(children)

        def watched(batch: list) -> Ready:
            rest = prepare(batch)
            if not policy.decided:
                policy.observe(len(batch), children)     # once decided, it applies itself
            return rest
        return watched

    # -- images ----------------------------------------------------------------------------------
    def _image(self) -> ExecResult:
        from .media.writer import AtomicOutput

        plan = self.plan
        times = StageTimes()
        stage = self.make_stage(times)
        seg = plan.segments[0]
        t0 = time.perf_counter()
        with AtomicOutput(plan.output) as out:
            encode = list(seg.encode[:-1]) + [out.tmp_path]
            with FrameReader(seg.decode, plan.width, plan.height) as reader, \
                    FrameWriter(encode, out.tmp_path, width=plan.output_size[0],
                                height=plan.output_size[1],
                                channels=4 if plan.alpha else 3) as writer:
                frames = stream(reader, writer.write, self._stoppable(stage.process),
                                frames_in_flight=self.frames_in_flight, times=times,
                                progress=_Frames(None, self.hooks.progress, 0, 1))
                writer.close()
            if frames == 0:
                raise MediaError(f"no frames decoded from {plan.target}")
            self.before_commit(Path(out.tmp_path))
            self.hooks.stop.hold()    # from here a stop waits for the report (interrupts.py)
            out.commit()
        rec = SegmentRecord(index=0, start=0, end=1, sha256="", bytes=0,
                            seconds=round(time.perf_counter() - t0, 3), faces=times.faces,
                            frames_touched=times.frames_touched, host=socket.gethostname())
        result = ExecResult(plan, [rec], rendered=1, resumed=0, frames_decoded=frames, times=times,
                            assembled=True)
        result.output_sha256 = sha256_file(Path(plan.output))
        return result

    def check_inputs(self) -> None:
        if self.hooks.inputs_unchanged is not None:
            self.hooks.inputs_unchanged()

    def missing(self) -> list[SegmentPlan]:
        """The segments not committed yet."""
        return self.assembly.missing()

    def before_commit(self, tmp: Path) -> None:
        """The finished temp file, before it is verified and replaces the output (marks)."""
        self.check_inputs()
        if self.hooks.before_commit is not None:
            self._stage("marking")
            self.hooks.before_commit(tmp)

def _decoder_note(reader: FrameReader) -> str:
    line = reader.stderr_last_line()
    return f" (decoder: {line})" if line else ""
