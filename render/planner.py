"""What a job will be, before anything is written: the target probed and its frames counted, the
identity of every input, model and version (the job key), and the plan of segments."""
from __future__ import annotations

import functools
import json
import logging
import shutil
from fractions import Fraction
from typing import TYPE_CHECKING

from . import __version__, report, versions
from . import mark as marking
from .errors import MediaError, RenderFailed, UsageError
from .jobs import check_pix_fmt
from .media.formats import IMAGE_FORMATS, SOFTWARE_FALLBACK, output_format
from .media.probe import probe_with_times
from .media.tools import ffmpeg_version, hw_works
from .plan import Identity, RenderPlan, plan_render
from .processors.base import Timeline
from .sources import identity_of, map_identity, read_face_map

if TYPE_CHECKING:
    from .config import Config
    from .files import FileHashes
    from .jobs import Job
    from .media.probe import MediaInfo
    from .models.load import LoadedModels
    from .source_face import SourceFaces

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=1)
def legacy_vsync() -> bool:
    """ffmpeg before 5.1 (Ubuntu 22.04 ships 4.4) knows ``-vsync``, not ``-fps_mode``."""
    version = ffmpeg_version()
    return version is not None and version < (5, 1)


def timeline_of(plan: RenderPlan) -> Timeline:
    """Where the plan's frames sit in its target, as a step that takes the frames' numbers is
    bound to it (``FaceProcessor.bind_timeline``)."""
    return Timeline(target=plan.target, sha256=str(plan.identity.get("target_sha256", "")),
                    fps=Fraction(plan.fps), first=plan.start, frames=plan.frames,
                    audio_start=plan.audio_start, image=plan.kind == "image")


class Planner:
    def __init__(self, cfg: Config, models: LoadedModels, faces: SourceFaces,
                 hashes: FileHashes) -> None:
        self.cfg = cfg
        self.models = models
        self.faces = faces
        self.hashes = hashes
        self._hw: dict[str, bool] | None = None

    def identity(self, job: Job, *, vfr: bool) -> Identity:
        """What the job key hashes besides the config. A face map is read, and its references
        embedded and checked, here: a bad one fails before anything is written."""
        sha = self.hashes.sha
        if self.cfg.select.mode == "map":
            face_map = read_face_map(self.cfg.select.map)
            self.faces.people(face_map)
            source_sha, ref = map_identity(face_map, sha), None
        else:
            source_sha, ref = identity_of(job.sources, sha), self.faces.reference_path(job.source)
        return Identity(target_sha256=sha(job.target), source_sha256=source_sha,
                        reference_sha256=sha(ref) if ref is not None else None,
                        models={**{e.name: e.sha256 for e in self.models.entries()},
                                **{key: digest for p in self.models.processors
                                   for key, digest in p.files().items()}},
                        versions=versions.keyed(vfr=vfr, mark=self.cfg.marked))

    def plan(self, job: Job) -> RenderPlan:
        """Probe the target, count its frames and plan the render; nothing is written."""
        return self.prepare(job)[0]

    def prepare(self, job: Job) -> tuple[RenderPlan, MediaInfo]:
        check_pix_fmt(self.cfg.encode.pix_fmt)
        try:
            empty = job.target.stat().st_size == 0     # ffprobe would say "Invalid data found"
        except OSError as exc:
            raise MediaError(f"cannot read target {job.target}: {exc.strerror or exc}") from None
        if empty:
            raise MediaError(f"target {job.target} is empty (0 bytes)")
        info, times = probe_with_times(job.target, cache_dir=self.cfg.cache_path,
                                       content_sha256=lambda: self.hashes.sha(job.target))
        if job.output.suffix.lower() in IMAGE_FORMATS and not info.is_image:
            raise UsageError(f"output {job.output} is an image but target {job.target} is a video")
        if info.is_image and job.output.suffix.lower() not in IMAGE_FORMATS:
            raise UsageError(f"output {job.output} is a video but target {job.target} is an image")
        if not times.cfr and shutil.which("mkvmerge") is None:
            raise RenderFailed(f"target {job.target} has a variable frame rate: keeping its frame "
                               f"times needs mkvmerge (install mkvtoolnix)")
        output = job.output.absolute()
        metadata: list[tuple[str, str]] = []
        if self.cfg.marked and not info.is_image:
            metadata = marking.metadata_pairs(__version__, output_format(output)[1])
        matte = self.models.matte_step()
        sound = next((t for t in (p.soundtrack() for p in self.models.processors)
                      if t is not None), None)
        plan = plan_render(self.cfg, source=job.source, target=job.target, output=output,
                           info=info, times=times, identity=self.identity(job, vfr=not times.cfr),
                           legacy_vsync=legacy_vsync(), metadata=metadata, hw=self.hardware(),
                           resize=self.models.output_size,
                           matte=matte.matte if matte is not None else "", soundtrack=sound)
        for step in self.models.face_steps:     # before anything is written
            if step.needs_frame_numbers:
                step.check_timeline(timeline_of(plan))
        if matte is not None:
            log.warning("%s", matte.describe_matte(plan.alpha))
        return plan, info

    def hardware(self) -> dict[str, bool]:
        """What of NVENC / NVDEC the config asks for works here; each fallback said once."""
        if self._hw is None:
            cfg, hw = self.cfg, {}
            if cfg.encode.codec in SOFTWARE_FALLBACK:
                hw[cfg.encode.codec] = hw_works(cfg.encode.codec)
                if not hw[cfg.encode.codec]:
                    log.warning("%s is not available here (no NVENC on this GPU or driver): "
                                "encoding with %s", cfg.encode.codec,
                                SOFTWARE_FALLBACK[cfg.encode.codec])
            if cfg.decode.hwaccel != "none":
                hw["cuda"] = hw_works("cuda")
                if not hw["cuda"] and cfg.decode.hwaccel == "cuda":
                    log.warning("decode.hwaccel=cuda: no CUDA device for NVDEC here: decoding in "
                                "software")
            self._hw = hw
        return self._hw

    def up_to_date(self, job: Job) -> bool:
        """The output exists, is what its report says, and the report has this render's key."""
        out = job.output
        rep = report.report_path(out.absolute())
        if not out.is_file() or not rep.is_file():
            return False
        try:
            data = json.loads(rep.read_text())
            recorded_key = data["job_key"]
            recorded_sha = data["output"]["sha256"]
        except (OSError, ValueError, KeyError, TypeError):
            return False
        if data.get("status") != "done":
            return False
        plan = self.plan(job)
        return plan.key == recorded_key and self.hashes.sha(out) == recorded_sha
