"""Assembly: the committed segments joined (stream copy), the audio muxed once, the result marked
and verified, and only then renamed over the output; an existing output is replaced by a
verified file only. A plan of one segment only marks, verifies and moves a hard link of it."""
from __future__ import annotations

import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Collection

from .errors import MediaError, RenderFailed
from .files import fsync_dir, sha256_file, write_atomic
from .interrupts import StopToken
from .media.streams import count_streams
from .media.reader import run_tool
from .plan import RenderPlan, SegmentPlan
from .work_folder import WorkFolder, fsync_file, temp_tag, unlink

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Assembled:
    """What an assembly hands back for the render's result: the committed output's SHA-256, the
    streams :meth:`Assembly.verify_output` counted in it, and its seconds: marking, verifying, and
    the rest (joining, muxing, committing)."""

    output_sha256: str
    output_streams: list
    mark: float
    verify: float
    assemble: float


class Assembly:
    def __init__(self, plan: RenderPlan, work: WorkFolder, stop: StopToken,
                 before_commit: Callable[[Path], None]) -> None:
        self.plan = plan
        self.work = work
        self.stop = stop
        self.before_commit = before_commit

    def missing(self) -> list[SegmentPlan]:
        return [s for s in self.plan.segments if not self.work.final(s).exists()]

    def run(self, committed: Collection[int]) -> Assembled:
        """Join the committed segments (``committed``: their indexes), mux the audio once, mark,
        verify and commit the output."""
        plan = self.plan
        asm = plan.assembly
        assert asm is not None
        out = Path(plan.output)
        missing = [s for s in plan.segments if s.index not in committed]
        if missing:
            raise RenderFailed(f"cannot assemble {out}: {len(missing)} of {len(plan.segments)} "
                               f"segments are not done: "
                               + ", ".join(f"{s.index} (frames {s.start}-{s.end - 1})" for s in missing))
        work = self.work.path
        t0 = time.perf_counter()
        what = f"assembling {out.name}"
        tmp = work / f"{out.stem}.tmp-{temp_tag()}{out.suffix}"
        try:
            if asm.mux:
                write_atomic(work / "concat.txt", asm.concat.encode())
                if asm.join:
                    write_atomic(work / "timestamps.txt", asm.timestamps.encode())
                    run_tool(asm.join, what, writes=asm.join[-1])
                    run_tool(asm.retime, what, ok=(0, 1),     # mkvmerge: 1 = warnings only
                             writes=work / "retimed")
                run_tool(list(asm.mux[:-1]) + [str(tmp)], what, writes=tmp)
            else:       # the only segment is the finished file: the committed one stays as it is
                _link_or_copy(self.work.final(plan.segments[0]), tmp, what)
            t1 = time.perf_counter()
            self.before_commit(tmp)
            t2 = time.perf_counter()
            try:
                streams = self.verify_output(tmp)
            except RenderFailed:
                if not asm.mux:     # it would fail so on every resume: that segment is not done
                    self.work.drop(plan.segments[0])
                raise
            t3 = time.perf_counter()
            fsync_file(tmp)
            self.stop.hold()    # from here a stop waits for the report (interrupts.py)
            try:
                os.replace(tmp, out)
            except OSError as exc:
                raise RenderFailed(f"cannot move {out.name} into place: {exc.strerror or exc}") from None
            fsync_dir(str(out.parent))
        except BaseException:
            unlink(tmp)
            raise
        sha256 = sha256_file(out)
        self.work.remove()
        mark, verify = t2 - t1, t3 - t2
        return Assembled(sha256, streams, mark=mark, verify=verify,
                         assemble=(time.perf_counter() - t0) - mark - verify)

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
    unlink(dst)        # this process's own temp name: left by an earlier attempt
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
