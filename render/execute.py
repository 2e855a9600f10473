"""Execute a :class:`~render.plan.RenderPlan`: render the segments not yet committed, then assemble.

The work folder (beside the output, named by the job key) holds ``plan.json`` and the committed
segments. A segment is encoded under a temp name, flushed, its frame count verified, its SHA-256
written to a sidecar ``seg-NNNN.EXT.json`` (temp-then-rename) and only then renamed to its final
name: a segment whose final name exists and whose bytes match its sidecar is committed, nothing
else is trusted. Assembly joins the segments (stream copy), muxes the audio once, verifies the
result and renames it over the output; an existing output is replaced by a verified file only. A
plan of one segment encodes the finished file in that segment's pass (audio, tags, muxer): its
assembly only marks, verifies and moves a hard link of it.

Who runs which segments is the only difference between a render (all), a resumed render (the
missing ones) and a shard of a cluster job (its own): the bytes depend on the plan alone.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

from .errors import MediaError, RenderFailed, UsageError
from .interrupts import PROCESS, StopToken, Stopped  # noqa: F401 - Stopped: where a stop surfaces
from .media import mp4index
from .media.streams import count_streams
from .media.reader import FrameReader, run_tool
from .files import fsync_dir, sha256_file, try_flock, write_atomic
from .media.writer import FrameWriter
from .pipeline import FaceStage, StageTimes, stream
from .plan import RenderPlan, SegmentPlan
from .progress import Progress
from .runtime import Preload, ThreadPolicy

log = logging.getLogger(__name__)

PLAN_FILE = "plan.json"
LOCK_FILE = ".lock"


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _me() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class SegmentRecord:
    """The sidecar of a committed segment (and what the report lists)."""

    index: int
    start: int
    end: int
    sha256: str
    bytes: int
    seconds: float
    faces: int = 0
    frames_touched: int = 0
    host: str = ""
    resumed: bool = False      # found committed when this run started (not rendered by it)

    def to_json(self) -> bytes:
        data = asdict(self)
        data.pop("resumed")
        return json.dumps(data, sort_keys=True).encode()


class AlreadyDone(Exception):
    """Another render of the same job finished the output while this one waited for it."""


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
    """

    stop: StopToken = field(default_factory=lambda: PROCESS)
    segment_done: Callable[["SegmentRecord | None", int, int], None] | None = None
    before_commit: Callable[[Path], None] | None = None
    inputs_unchanged: Callable[[], None] | None = None
    already_done: Callable[[], bool] | None = None


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
    #: seconds spent on what segmenting adds to a render: committing segments (flush, count,
    #: hash), joining and muxing them, verifying the result, and marking it (issue of its own)
    overhead: dict[str, float] = field(default_factory=lambda: {"commit": 0.0, "assemble": 0.0,
                                                                "verify": 0.0, "mark": 0.0})


class WorkFolder:
    """The work folder of one plan; held with a shared flock while anyone executes in it, so a
    stale folder is removed only when nobody uses it."""

    def __init__(self, plan: RenderPlan) -> None:
        self.plan = plan
        self.path = Path(plan.work_dir)
        self._lock_fd: int | None = None
        self.waited = False            # another render of this job held the folder first

    # -- opening -------------------------------------------------------------------------------
    def open(self, *, refuse_other: bool = False, exclusive: bool = False) -> None:
        """Create (or join) the folder and write the plan; remove work folders of the same output
        left by other jobs (other inputs, config, models or versions) that nobody is using.
        ``refuse_other``: a shard refuses to run beside another job's work folder instead."""
        out = Path(self.plan.output)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for other in sorted(out.parent.glob(f".{glob_escape(out.name)}.render-*")):
            if other == self.path or not other.is_dir():
                continue
            other_key = _plan_key(other)
            if refuse_other:
                raise UsageError(f"{other} holds segments of another job for {out} (job key "
                                 f"{(other_key or '?')[:16]}, this shard's {self.plan.key[:16]}): "
                                 f"its inputs, config, models or versions differ; refusing to mix")
            if not _remove_if_unused(other):
                raise UsageError(f"another render of {out} with other settings is running "
                                 f"(work folder {other}); wait for it or choose another output")
            log.info("removed the work folder of an earlier render of %s with other settings",
                     out.name)
        self._lock_fd = self._hold(fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        plan_path = self.path / PLAN_FILE
        if plan_path.exists():
            key = _plan_key(self.path)
            if key != self.plan.key:
                raise UsageError(f"work folder {self.path} holds the plan of another job "
                                 f"(key {(key or '?')[:16]}, this one {self.plan.key[:16]}); "
                                 f"refusing to mix their segments")
        else:
            write_atomic(plan_path, self.plan.to_json().encode())
        self.clean_temps()

    def _hold(self, mode: int) -> int:
        """Create the folder and flock its lock file: shared for shards (they render side by side),
        exclusive for a whole render, whose end removes the folder. A render that finds the lock
        taken waits for it (``waited``); a folder removed meanwhile is made again."""
        self.waited = False
        while True:
            try:
                self.path.mkdir(exist_ok=True)
            except OSError as exc:
                raise RenderFailed(f"cannot create work folder {self.path}: "
                                   f"{exc.strerror or exc}") from None
            lock = self.path / LOCK_FILE
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                if not try_flock(fd, mode):
                    log.warning("%s: another render of the same job is running: waiting for it",
                                Path(self.plan.output).name)
                    self.waited = True
                    fcntl.flock(fd, mode)
                try:
                    same = os.stat(lock).st_ino == os.fstat(fd).st_ino
                except FileNotFoundError:
                    same = False
            except BaseException:
                os.close(fd)
                raise
            if same:
                return fd
            os.close(fd)

    def close(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def clean_temps(self) -> None:
        """Remove the temp files of this host's dead processes (other hosts' are theirs)."""
        host = socket.gethostname()
        for p in self.path.iterdir():
            marker = ".tmp-"
            if marker not in p.name:
                continue
            owner = p.name.split(marker, 1)[1].split(".", 1)[0]
            h, _, pid = owner.rpartition("-")
            if h == host and pid.isdigit() and (int(pid) == os.getpid() or not _pid_alive(int(pid))):
                _unlink(p)

    # -- segments ------------------------------------------------------------------------------
    def final(self, seg: SegmentPlan) -> Path:
        return self.path / seg.name

    def sidecar(self, seg: SegmentPlan) -> Path:
        return self.path / f"{seg.name}.json"

    def temp(self, seg: SegmentPlan) -> Path:
        stem, ext = os.path.splitext(seg.name)
        return self.path / f"{stem}.tmp-{_me()}{ext}"

    def committed(self, seg: SegmentPlan, *, check_hash: bool = True) -> SegmentRecord | None:
        """The record of ``seg`` if it is committed and its bytes are what was committed; a
        damaged segment is removed (it will be rendered again) and None returned."""
        final, side = self.final(seg), self.sidecar(seg)
        if not final.exists():
            return None
        try:
            data = json.loads(side.read_text())
            record = SegmentRecord(**data)
        except (OSError, ValueError, TypeError):
            log.warning("segment %s has no valid record: rendering it again", seg.name)
            _unlink(final)
            return None
        ok = (record.start, record.end) == (seg.start, seg.end) and \
            final.stat().st_size == record.bytes and \
            (not check_hash or sha256_file(final) == record.sha256)
        if not ok:
            log.warning("segment %s is damaged (its bytes differ from its record): rendering it "
                        "again", seg.name)
            _unlink(final)
            _unlink(side)
            return None
        return record

    def commit(self, seg: SegmentPlan, tmp: Path, record: SegmentRecord) -> SegmentRecord:
        """Verify the frame count of ``tmp``, record its hash, rename it to its final name."""
        _fsync_file(tmp)
        # the MP4 index read in-process (no ffprobe start per segment); ffprobe for anything else
        got = mp4index.sample_count(tmp) if tmp.suffix.lower() in (".mp4", ".m4v", ".mov") else None
        if got is None:
            video = [s for s in count_streams(tmp) if s.kind == "video"]
            got = video[0].packets if len(video) == 1 else 0
        if got != seg.frames:
            _unlink(tmp)
            raise RenderFailed(f"segment {seg.index} of {Path(self.plan.output).name}: the encoder "
                               f"wrote {got} frames, {seg.frames} were rendered")
        record.sha256 = sha256_file(tmp)
        record.bytes = tmp.stat().st_size
        write_atomic(self.sidecar(seg), record.to_json())
        os.replace(tmp, self.final(seg))
        fsync_dir(str(self.path))
        return record

    def drop(self, seg: SegmentPlan) -> None:
        """Un-commit ``seg``: a later run renders it again."""
        _unlink(self.final(seg))
        _unlink(self.sidecar(seg))
        fsync_dir(str(self.path))

    def remove(self) -> None:
        """rm -r the folder while still holding its lock: a render waiting for it wakes to find
        its lock file gone (and the output done), never a folder that is being emptied."""
        shutil.rmtree(self.path, ignore_errors=True)
        self.close()


def glob_escape(name: str) -> str:
    import glob

    return glob.escape(name)


def _plan_key(folder: Path) -> str | None:
    try:
        return json.loads((folder / PLAN_FILE).read_text()).get("key")
    except (OSError, ValueError, AttributeError):
        return None


def _remove_if_unused(folder: Path) -> bool:
    """rm -r ``folder`` if no process holds its lock; False when one does."""
    try:
        fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)
        return True
    try:
        if not try_flock(fd):
            return False
        shutil.rmtree(folder, ignore_errors=True)
        return True
    finally:
        os.close(fd)


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


# ---------------------------------------------------------------------------------------------
class Executor:
    """Runs a plan's segments through the face stage and assembles them.

    ``make_stage(times)`` builds a fresh :class:`FaceStage` for each segment (the detector's
    tracking restarts on a segment's first frame, which the plan put on a multiple of
    ``detect.every``), so a segment's bytes do not depend on the segments before it.
    """

    def __init__(self, plan: RenderPlan, make_stage: Callable[[StageTimes], FaceStage], *,
                 frames_in_flight: int, progress: str = "off", hooks: Hooks | None = None,
                 threads: ThreadPolicy | None = None,
                 apply_threads: Callable[[], None] | None = None,
                 preload: Callable[[], Preload] | None = None) -> None:
        self.plan = plan
        self.preload = preload
        self.threads = threads
        self.apply_threads = apply_threads
        self.hooks = hooks or Hooks()
        self.make_stage = make_stage
        self.frames_in_flight = frames_in_flight
        self.progress_mode = progress
        self.work = WorkFolder(plan)

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
            with stop.polled(), self._preloading(bool(todo)):
                try:
                    for seg in todo:
                        stop.check()
                        rec, n, c = self._segment(seg, times, progress)
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
                                threads=self.threads.summary() if self.threads else None)
            result.overhead["commit"] = commit_s
            if assemble:
                self._assemble(result)
            return result
        finally:
            self.work.close()

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

    def _segment(self, seg: SegmentPlan, times: StageTimes, progress: Progress | None
                 ) -> tuple[SegmentRecord, int, float]:
        """Render and commit one segment: its record, the frames decoded, seconds committing."""
        plan = self.plan
        tmp = self.work.temp(seg)
        encode = list(seg.encode[:-1]) + [str(tmp)]
        seg_times = StageTimes()
        stage = self.make_stage(seg_times)
        t0 = time.perf_counter()
        with FrameReader(seg.decode, plan.width, plan.height) as reader, \
                FrameWriter(encode, tmp, name=f"segment {seg.index} of {Path(plan.output).name}") as writer:
            prepare = self._stoppable(self._with_policy(stage.prepare, reader, writer))
            frames = stream(reader, writer.write, prepare,
                            frames_in_flight=self.frames_in_flight, times=seg_times,
                            progress=progress, lanes=self._lanes)
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
        times.merge(seg_times)
        record = SegmentRecord(index=seg.index, start=seg.start, end=seg.end, sha256="", bytes=0,
                               seconds=round(time.perf_counter() - t0, 3), faces=seg_times.faces,
                               frames_touched=seg_times.frames_touched,
                               host=socket.gethostname())
        try:
            self.check_inputs()
        except BaseException:
            _unlink(tmp)
            raise
        t1 = time.perf_counter()
        record = self.work.commit(seg, tmp, record)
        return record, reader.frames_read, time.perf_counter() - t1

    def _stoppable(self, process: Callable[[list], Callable[[], None] | None]
                   ) -> Callable[[list], Callable[[], None] | None]:
        """``process`` that asks the stop hook before each batch: a stop within a segment unwinds
        the stream, and the writer's abort removes the unfinished temp segment."""
        check = self.hooks.stop.check

        def checked(batch: list) -> Callable[[], None] | None:
            check()
            return process(batch)
        return checked

    def _with_policy(self, prepare: Callable[[list], Callable[[], None] | None], reader: FrameReader,
                     writer: FrameWriter) -> Callable[[list], Callable[[], None] | None]:
        """``prepare`` that also lets the thread policy watch this segment's ffmpeg children."""
        policy = self.threads
        if policy is None:
            return prepare
        children = [reader.proc.pid, writer.proc.pid]
        policy.restart()
        policy.renice(children)

        def watched(batch: list) -> Callable[[], None] | None:
            rest = prepare(batch)
            if not policy.decided:
                policy.observe(len(batch), children)
                if policy.decided:
                    log.info("threads: %s", policy.reason)
                    policy.renice(children)
                    if self.apply_threads is not None:
                        self.apply_threads()
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
                    FrameWriter(encode, out.tmp_path) as writer:
                frames = stream(reader, writer.write, self._stoppable(stage.process),
                                frames_in_flight=self.frames_in_flight, times=times)
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

    def before_commit(self, tmp: Path) -> None:
        """The finished temp file, before it is verified and replaces the output (marks)."""
        self.check_inputs()
        if self.hooks.before_commit is not None:
            self.hooks.before_commit(tmp)

    # -- assembly --------------------------------------------------------------------------------
    def missing(self) -> list[SegmentPlan]:
        return [s for s in self.plan.segments if not self.work.final(s).exists()]

    def _assemble(self, result: ExecResult) -> None:
        plan = self.plan
        asm = plan.assembly
        assert asm is not None
        out = Path(plan.output)
        missing = [s for s in plan.segments if s.index not in {r.index for r in result.segments}]
        if missing:
            raise RenderFailed(f"cannot assemble {out}: {len(missing)} of {len(plan.segments)} "
                               f"segments are not done: "
                               + ", ".join(f"{s.index} (frames {s.start}-{s.end - 1})" for s in missing))
        work = self.work.path
        took = result.overhead
        t0 = time.perf_counter()
        what = f"assembling {out.name}"
        tmp = work / f"{out.stem}.tmp-{_me()}{out.suffix}"
        try:
            if asm.mux:
                write_atomic(work / "concat.txt", asm.concat.encode())
                if asm.join:
                    write_atomic(work / "timestamps.txt", asm.timestamps.encode())
                    run_tool(asm.join, what)
                    run_tool(asm.retime, what, ok=(0, 1))     # mkvmerge: 1 = warnings only
                run_tool(list(asm.mux[:-1]) + [str(tmp)], what)
            else:       # the only segment is the finished file: the committed one stays as it is
                _link_or_copy(self.work.final(plan.segments[0]), tmp, what)
            t1 = time.perf_counter()
            self.before_commit(tmp)
            t2 = time.perf_counter()
            try:
                result.output_streams = self.verify_output(tmp)
            except RenderFailed:
                if not asm.mux:     # it would fail so on every resume: that segment is not done
                    self.work.drop(plan.segments[0])
                raise
            t3 = time.perf_counter()
            _fsync_file(tmp)
            self.hooks.stop.hold()    # from here a stop waits for the report (interrupts.py)
            try:
                os.replace(tmp, out)
            except OSError as exc:
                raise RenderFailed(f"cannot move {out.name} into place: {exc.strerror or exc}") from None
            fsync_dir(str(out.parent))
        except BaseException:
            _unlink(tmp)
            raise
        result.assembled = True
        result.output_sha256 = sha256_file(out)
        self.work.remove()
        took["mark"] = t2 - t1
        took["verify"] = t3 - t2
        took["assemble"] = (time.perf_counter() - t0) - took["mark"] - took["verify"]

    def verify_output(self, path: Path) -> list:
        """Before it may replace anything: readable to the end, the planned frame count, the video
        duration within one frame, every audio stream present with the right duration, and every
        keyframe decodes."""
        plan, exp = self.plan, self.plan.expect
        assert exp is not None
        name = Path(plan.output).name
        try:
            streams = count_streams(path, decode_keyframes=True)
        except MediaError as exc:
            why = _complaint(exc, path)     # the temp name means nothing to a user
            mux = plan.final_mux
            copied = any(a.startswith("-c:a") and b == "copy" for a, b in zip(mux, mux[1:]))
            try:        # audio copied as it is from a target that does not decode cleanly itself
                if copied:
                    count_streams(Path(plan.target), decode_keyframes=True)
            except MediaError as bad:
                raise MediaError(f"assembled {name} does not decode ({why}), nor does its target "
                                 f"{plan.target} ({_complaint(bad, plan.target)}): "
                                 f"the target is damaged") from None
            raise RenderFailed(f"assembled {name} is unreadable: {why}") from None
        video = [s for s in streams if s.kind == "video"]
        audio = [s for s in streams if s.kind == "audio"]
        if len(video) != 1 or video[0].packets != exp.frames:
            raise RenderFailed(f"assembled {name} has {video[0].packets if video else 0} frames, "
                               f"the plan {exp.frames}")
        tol = exp.frame_interval + 0.002
        if video[0].duration is not None and abs(video[0].duration - exp.duration) > tol:
            raise RenderFailed(f"assembled {name} lasts {video[0].duration:.3f} s, the plan "
                               f"{exp.duration:.3f} s")
        if len(audio) != exp.audio:
            raise RenderFailed(f"assembled {name} has {len(audio)} audio streams, the target {exp.audio}")
        if exp.audio_duration:
            for a in audio:
                if a.duration is None or abs(a.duration - exp.audio_duration) > tol + 0.05:
                    raise RenderFailed(f"assembled {name}: audio lasts {a.duration} s, "
                                       f"{exp.audio_duration:.3f} s expected")
        return streams


def _link_or_copy(src: Path, dst: Path, what: str) -> None:
    """``dst`` with the bytes of ``src``: a hard link where the filesystem has them (marking
    replaces ``dst`` by a new file, never writes into it), else a copy."""
    _unlink(dst)        # this process's own temp name: left by an earlier attempt
    try:
        os.link(src, dst)
        return
    except OSError as exc:
        log.debug("no hard link %s -> %s (%s): copying", src.name, dst.name, exc.strerror or exc)
    try:
        shutil.copyfile(src, dst)
    except OSError as exc:
        raise RenderFailed(f"{what}: cannot copy {src.name}: {exc.strerror or exc}") from None


def _complaint(exc: MediaError, path: str | Path) -> str:
    """ffprobe's complaint about ``path`` without the path (``cannot decode PATH: why``)."""
    return str(exc).replace(f" {path}:", "")


def _decoder_note(reader: FrameReader) -> str:
    line = reader.stderr_last_line()
    return f" (decoder: {line})" if line else ""
