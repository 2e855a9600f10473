"""One render job end to end: plan → verify models → probe → source embedding → stream → commit.

The app layer: it knows files, models and the pipeline, and wires them with the one Config.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from . import __version__, report, versions
from . import mark as marking
from .errors import Interrupted
from .encoder import PINNED_ENCODE_THREADS
from .execute import ExecResult, Executor, Hooks
from .face_stage import build_face_stage
from .files import FileHashes
from .interrupts import PROCESS, StopToken
from .memory import tune_allocator
from .models.load import load_models
from .pipeline import StageTimes
from .planner import Planner, timeline_of
from .source_face import SourceFaces
from .sources import read_face_map

if TYPE_CHECKING:
    from .config import Config
    from .jobs import Job
    from .plan import RenderPlan

log = logging.getLogger(__name__)


@dataclass
class RenderResult:
    job: Job
    frames: int
    seconds: float
    times: StageTimes = field(default_factory=StageTimes)
    plan: RenderPlan | None = None
    result: ExecResult | None = None
    report: dict | None = None

    @property
    def report_path(self) -> Path | None:
        return report.report_path(Path(self.plan.output)) if self.plan is not None else None


class Renderer:
    """Renders the jobs of one Config: its models loaded once, the source face embedded once,
    on CUDA device ``device_id`` (the GPU whose lock the render holds; None: CUDA's device 0)."""

    def __init__(self, cfg: Config, *, device_id: int | None = None) -> None:
        self.cfg = cfg
        tune_allocator()                # before any thread starts allocating
        versions.prefetch_installation()
        self.models = load_models(cfg, device_id=device_id)
        if cfg.marked:   # while the render starts, not at the end of the first render
            # not a daemon: a daemon thread still importing at exit aborts the process in native code
            threading.Thread(target=marking.load_libraries, name="render-mark-libraries",
                             daemon=False).start()
        self.hashes = FileHashes()
        self.faces = SourceFaces(cfg, self.models, self.hashes)
        self.planner = Planner(cfg, self.models, self.faces, self.hashes)

    def check_sources(self, job: Job) -> None:
        """Find and embed the job's source faces (a face map's people too): a source without a
        face fails here, once, before any target."""
        if self.cfg.select.mode == "map":
            self.faces.people(read_face_map(self.cfg.select.map))
        else:
            self.faces.identity(job.sources)

    def sources_record(self, job: Job) -> dict[str, Any]:
        """The report's rows of the source images (each with its SHA-256 and face count), or of
        the face map's people."""
        if self.cfg.select.mode != "map":
            return {"sources": self.faces.described(job.sources)}
        face_map = read_face_map(self.cfg.select.map)
        return {"face_map": {"map": face_map.origin, "people": [
            {"reference": self.faces.described([p.reference])[0],
             "sources": self.faces.described(p.sources)}
            for p in self.faces.people(face_map)]}}

    def plan(self, job: Job) -> RenderPlan:
        """Probe the target, count its frames and plan the render; nothing is written."""
        return self.planner.plan(job)

    def up_to_date(self, job: Job) -> bool:
        return self.planner.up_to_date(job)

    def marker(self, plan: RenderPlan, marks: dict) -> Callable[[Path], None]:
        """Marks the finished temp file as synthetic (metadata tag, C2PA manifest) before it is
        verified and committed; what was done goes into ``marks`` (the report's)."""
        output = Path(plan.output)
        return marking.Marker.for_render(self.cfg.mark, kind=plan.kind, output=output,
                                         cache_dir=self.cfg.cache_path,
                                         instance=f"{plan.key}:{output.name}",
                                         version=__version__, record=marks,
                                         enabled=self.cfg.marked)

    def executor(self, job: Job, plan: RenderPlan, marks: dict | None = None, *,
                 stop: StopToken | None = None, on_segment: Callable | None = None,
                 on_progress: Callable | None = None) -> Executor:
        hooks = Hooks(stop=stop or PROCESS, segment_done=on_segment, progress=on_progress,
                      before_commit=self.marker(plan, marks if marks is not None else {}),
                      inputs_unchanged=lambda: self.hashes.check_unchanged(job.target),
                      already_done=lambda: self.up_to_date(job))
        timeline = timeline_of(plan)
        return Executor(plan, lambda times: build_face_stage(self.cfg, self.models, self.faces,
                                                             job.sources, times, plan.alpha,
                                                             timeline),
                        frames_in_flight=self.models.settings.frames_in_flight,
                        progress=self.cfg.progress, hooks=hooks, threads=self.models.threads,
                        preload=self.models.preload,
                        parallel_segments=self.cfg.execution.parallel_segments,
                        encoder_threads=int(plan.encode.get("threads") or PINNED_ENCODE_THREADS))

    def render(self, job: Job, *, meta: Mapping[str, Any] | None = None,
               lock: Mapping[str, Any] | None = None, stop: StopToken | None = None,
               on_segment: Callable | None = None, on_progress: Callable | None = None,
               segments: list[int] | None = None) -> RenderResult:
        """Plan, execute, and write the report beside the output (into the work folder when the
        render fails or is interrupted)."""
        started, t0 = report.now(), time.perf_counter()
        memory = report.PeakMemory()
        plan = info = result = None
        marks: dict = {}
        with (stop or PROCESS).guarded():   # a stop after the commit waits for the report
            try:
                plan, info = self.planner.prepare(job)
                result = self.executor(job, plan, marks, stop=stop, on_segment=on_segment,
                                       on_progress=on_progress).run(segments)
            except BaseException as exc:
                usage = memory.stop()
                if plan is not None and info is not None and Path(plan.work_dir).is_dir():
                    status = "interrupted" if isinstance(exc, (KeyboardInterrupt, Interrupted)) \
                        else "failed"
                    text = "interrupted" if isinstance(exc, KeyboardInterrupt) else \
                        " ".join(str(exc).split()) or type(exc).__name__
                    try:
                        data = report.build(plan=plan, result=result, models=self.models,
                                            target_info=info, started=started, ended=report.now(),
                                            memory=usage, marks=marks, status=status, error=text,
                                            job=meta, lock=lock, sources=self.sources_record(job))
                        report.write(data, Path(plan.work_dir) / report.FAILED_NAME)
                    except Exception:  # noqa: BLE001 - the failure itself is what gets reported
                        log.debug("cannot write the failure report", exc_info=True)
                raise
            usage = memory.stop()
            seconds = time.perf_counter() - t0
            data = report.build(plan=plan, result=result, models=self.models, target_info=info,
                                started=started, ended=report.now(), memory=usage, marks=marks,
                                job=meta, lock=lock, sources=self.sources_record(job))
            report.write(data, report.report_path(Path(plan.output)))
        frames = plan.frames
        resumed = f", {result.resumed} of {len(plan.segments)} segments resumed" \
            if result.resumed else ""
        log.info("%s → %s: %d frames in %.1fs (%.1f fps; %d frames decoded%s)", job.target.name,
                 job.output, frames, seconds, frames / max(seconds, 1e-9), result.frames_decoded,
                 resumed)
        return RenderResult(job, frames, seconds, result.times, plan=plan, result=result,
                            report=data)
