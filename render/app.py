"""One render job end to end: plan → verify models → probe → source embedding → stream → commit.

The app layer: it knows files, models and the pipeline, and wires them with the one Config.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import cv2
import numpy as np

from .config import Config, required_models
from . import __version__, report
from . import mark as marking
from .errors import Interrupted, MediaError, ModelError, RenderError, RenderFailed, UsageError
from .faces.detect import CONTRACTS as DETECTOR_CONTRACTS, Detector
from .faces.embed import EmbeddingCache, Embedder
from .faces.enhance import Enhancer
from .faces.mask import make_mask
from .faces.select import ReferenceTracks, select_faces
from .faces.swap import Swapper, load_emap
from .faces.types import Face
from .media import formats as ffargs
from .execute import AlreadyDone, ExecResult, Executor, Hooks
from .interrupts import PROCESS, StopToken
from .lock import DeviceLock, detect_device, lock_needed
from .media.formats import IMAGE_EXTS, OUTPUT_EXTS, SOFTWARE_FALLBACK, VIDEO_EXTS
from .media.probe import MediaInfo, probe_with_times
from .media.tools import (ffmpeg_output_pixel_formats, ffmpeg_version, ffmpeg_version_line, hw_works,
                          mkvmerge_version)
from .models.manifest import ModelEntry, load_manifest
from .files import identity, not_regular
from .models.store import ModelStore, default_stamp_dir, hash_file
from .pipeline import FaceStage, StageTimes
from .plan import Identity, RenderPlan, plan_render, shard_of, shard_segments
from .runtime import LazySession, Preload, SessionFactory, ThreadPolicy, strategy, tune_allocator

log = logging.getLogger(__name__)

SOURCE_NAMES = ("source.jpg", "source.jpeg", "source.png", "source.webp")


@dataclass(frozen=True)
class Job:
    source: Path
    target: Path
    output: Path


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


# -- planning -------------------------------------------------------------------------------------
def _is_media(path: Path) -> bool:
    return path.is_file() and path.suffix.lower() in VIDEO_EXTS | IMAGE_EXTS \
        and not path.name.startswith(".")


def plan_jobs(cfg: Config) -> list[Job]:
    """Resolve source, targets and outputs from the config; fail before any work is done."""
    input_dir = Path(cfg.input_dir) if cfg.input_dir else None
    if cfg.source:
        source = Path(cfg.source)
        _check_regular(source, "source")
        if not source.is_file():
            raise MediaError(f"source image not found: {source}")
    elif input_dir is not None:
        found = [input_dir / n for n in SOURCE_NAMES if (input_dir / n).is_file()]
        if not found:
            raise MediaError(f"no source face: put source.jpg or source.png in {input_dir} "
                             f"(or give source=PATH)")
        source = found[0]
    else:
        raise UsageError("no source given: source=PATH (the image with the face to put in)")

    if cfg.target:
        target = Path(cfg.target)
        if not target.exists():
            raise MediaError(f"target not found: {target}")
        if not target.is_dir():
            _check_regular(target, "target")
        targets = sorted(p for p in target.iterdir() if _is_media(p)) if target.is_dir() \
            else [target]
        folder = target if target.is_dir() else None
    elif input_dir is not None:
        if not input_dir.is_dir():
            raise MediaError(f"input folder not found: {input_dir}")
        targets = sorted(p for p in input_dir.iterdir() if _is_media(p))
        folder = input_dir
    else:
        raise UsageError("no target given: target=PATH (the video or image to render)")
    targets = [t for t in targets if t.resolve() != source.resolve()]
    if not targets:
        if folder is None:
            raise UsageError(f"target {cfg.target} is the source image itself")
        raise MediaError(f"nothing to render in {folder}: no video or image besides the source")

    if cfg.output and (folder is None):
        outputs = [Path(cfg.output)]
    else:
        out_dir = Path(cfg.output) if cfg.output else Path(cfg.output_dir) if cfg.output_dir else None
        if out_dir is None:
            raise UsageError("no output given: output=PATH (or output_dir=DIR)")
        if out_dir.suffix.lower() in OUTPUT_EXTS | VIDEO_EXTS and not out_dir.is_dir():
            # a folder of targets writes a folder of outputs: never make a folder named clip.mp4
            raise UsageError(f"target {folder} is a folder, so the output is a folder too: "
                             f"{out_dir} names a file (give output_dir=DIR)")
        outputs = [out_dir / _output_name(t) for t in targets]
    inputs = {"the source image": source}
    if cfg.select.reference:
        inputs["the reference image"] = Path(cfg.select.reference)
        _check_regular(inputs["the reference image"], "reference image")
    jobs = []
    for t, o in zip(targets, outputs):
        if o.suffix.lower() not in OUTPUT_EXTS:
            raise UsageError(f"output {o}: cannot write '{o.suffix}' files (use one of "
                             f"{', '.join(sorted(OUTPUT_EXTS))})")
        written = o.resolve()
        for what, path in {"its target": t, **inputs}.items():
            if written == path.resolve():
                raise UsageError(f"output {o} would overwrite {what}")
        if o.is_dir():
            raise UsageError(f"output {o} is a folder: give the file to write (or output_dir=)")
        _check_writable(o.parent)
        _check_name_length(o)
        jobs.append(Job(source, t, o))
    return jobs


def _check_regular(path: Path, what: str) -> None:
    """An input that exists but is no regular file (a FIFO, /dev/zero behind a link) would block
    or never end when it is hashed or decoded: refused before anything reads it."""
    kind = not_regular(path)
    if kind is not None:
        raise MediaError(f"{what} {path} is {kind}, not a regular file")


def _output_name(target: Path) -> str:
    """The target's name, with .mp4 / .png where its own type cannot be written (avi, bmp, tiff)."""
    if target.suffix.lower() in OUTPUT_EXTS:
        return target.name
    return target.stem + (".png" if target.suffix.lower() in IMAGE_EXTS else ".mp4")


#: pixel formats taken without asking ffmpeg (asking costs a process start)
COMMON_PIX_FMTS = frozenset({"yuv420p", "yuvj420p", "yuv422p", "yuv444p", "yuv420p10le",
                             "yuv422p10le", "yuv444p10le", "nv12", "p010le", "rgb24", "bgr24", "gbrp"})


def _check_pix_fmt(pix_fmt: str) -> None:
    """encode.pix_fmt is a format ffmpeg can write: a typo failed the encoder at the first frame
    (exit 5, work folder left) instead of exit 2 before any work."""
    if pix_fmt in COMMON_PIX_FMTS:
        return
    known = ffmpeg_output_pixel_formats()
    if known is not None and pix_fmt not in known:
        raise UsageError(f"encode.pix_fmt={pix_fmt} is not a pixel format ffmpeg can write "
                         f"(e.g. yuv420p, yuv444p, yuv420p10le; `ffmpeg -pix_fmts` lists them)")


def _check_name_length(output: Path) -> None:
    """The output's name leaves room for the longest name made from it: the work folder
    ``.NAME.render-KEY16``, the report's temp ``.NAME.report.json.tmp-HOST-PID``, the assembly's
    ``STEM.tmp-HOST-PID.EXT`` and its marking temp ``.STEM.tmp-HOST-PID.EXT.PID.c2pa.tmp`` (a
    render that found out at one of them ended with "internal error: File name too long")."""
    try:
        limit = os.pathconf(output.parent, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    me = f"{socket.gethostname()}-{'9' * 7}"          # a pid has at most 7 digits (pid_max 2^22)
    made = (f"..render-{'0' * 16}", f"..report.json.tmp-{me}", f"..tmp-{me}.{'9' * 7}.c2pa.tmp")
    extra = max(len(os.fsencode(m)) for m in made)
    size = len(os.fsencode(output.name))
    if size + extra > limit:
        raise UsageError(f"output name {output.name[:40]}... is too long: {size} bytes, at most "
                         f"{limit - extra} here (the work folder and temp names add {extra})")


def _check_writable(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create output folder {folder}: {exc.strerror or exc}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"output folder {folder} is not writable by this user (uid {os.getuid()})")


# -- models ---------------------------------------------------------------------------------------
def _check_contract(entry: ModelEntry, key: str, allowed: tuple[str, ...]) -> None:
    if entry.contract not in allowed:
        raise ModelError(f"{key}={entry.name}: its contract is {entry.contract}, "
                         f"{key} needs {' or '.join(allowed)}")


class Models:
    """The verified model files of one config and their lazily created sessions."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        manifest = load_manifest(cfg.models_dir, [Path(p) for p in cfg.models.manifest])
        self.store = ModelStore(cfg.models_dir, manifest, default_stamp_dir(cfg.cache_path))
        resolved = self.store.verify_required(required_models(cfg))  # before any frame is decoded
        entry = {key[0]: e for key, e in resolved.items()}
        self.detector_entry = entry[cfg.detect.model]
        self.embedder_entry = entry[cfg.embed.model]
        self.swapper_entry = resolved[(cfg.swap.model, cfg.swap.precision)]
        self.enhancer_entry = resolved.get((cfg.enhance.model, cfg.enhance.precision)) \
            if cfg.enhance.enabled else None
        _check_contract(self.detector_entry, "detect.model", DETECTOR_CONTRACTS)
        _check_contract(self.embedder_entry, "embed.model", ("embedder-arcface",))
        _check_contract(self.swapper_entry, "swap.model", ("swapper-inswapper",))
        if self.enhancer_entry is not None:
            _check_contract(self.enhancer_entry, "enhance.model", ("enhancer-gfpgan",))
        self.factory = SessionFactory(cfg.execution, cfg.cache_path)
        #: who gets the cores (ONNX Runtime or ffmpeg), decided once by the first render
        self.threads = ThreadPolicy(cfg.execution.threads, lanes=cfg.execution.lanes,
                                    on_cpu=self.on_cpu)
        self.factory.threads = self.threads.threads
        cv2.setNumThreads(self.threads.threads)
        self.settings = strategy(cfg.execution)
        self.detector = Detector(self._lazy(self.detector_entry), self.detector_entry.contract,
                                 size=cfg.detect.size, score=cfg.detect.score, nms_iou=cfg.detect.nms)
        self.embedder = Embedder(self._lazy(self.embedder_entry))
        emap = load_emap(self.store.path(self.swapper_entry), self.swapper_entry.sha256,
                         cfg.cache_path)
        self.swapper = Swapper(self._lazy(self.swapper_entry), emap)
        self.enhancer = Enhancer(self._lazy(self.enhancer_entry), cfg.enhance.blend) \
            if self.enhancer_entry is not None else None

    def on_cpu(self) -> bool:
        """Whether the models run on the CPU provider: the providers the swapper's session (else
        the enhancer's, else the detector's) actually got, once it exists — a GPU provider that
        failed at creation or in a call leaves the model on the CPU — else the configured first."""
        for name in ("swapper", "enhancer", "detector"):
            lazy = getattr(getattr(self, name, None), "lazy", None)
            if lazy is not None and lazy.providers:
                return lazy.providers[0] == "CPUExecutionProvider"
        return self.factory.providers[0] == "CPUExecutionProvider"

    def apply_threads(self) -> None:
        """Sessions on the CPU provider are recreated at their next call with the policy's threads;
        OpenCV's pool (resize, warps, blends: process-wide) gets the same number."""
        cv2.setNumThreads(self.threads.threads)
        if self.factory.threads == self.threads.threads:
            return
        self.factory.threads = self.threads.threads
        for holder in (self.detector, self.embedder, self.swapper, self.enhancer):
            lazy = getattr(holder, "lazy", None)
            if lazy is not None and lazy.loaded and (lazy.providers or ["CPUExecutionProvider"])[0] \
                    == "CPUExecutionProvider":
                lazy.release()

    def preload(self) -> Preload:
        """Create the swapper's and enhancer's sessions in the background (:class:`Preload`)."""
        return Preload([h.lazy for h in (self.swapper, self.enhancer) if h is not None])

    def _lazy(self, entry: ModelEntry) -> LazySession:
        path = self.store.path(entry)
        return self.factory.lazy(path, fp16=entry.precision == "fp16", sha256=entry.sha256)


# -- source face ----------------------------------------------------------------------------------
def read_image(path: Path, what: str) -> np.ndarray:
    image = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if image is None:
        raise MediaError(f"cannot read {what} image {path}: not an image file OpenCV can decode")
    return image


def face_embedding(path: Path, models: Models, cache: EmbeddingCache, what: str,
                   face_index: int = 0) -> np.ndarray:
    """Raw embedding of the ``face_index``-th largest face in ``path`` (0 = the largest), computed
    once per (file, face, model)."""
    source_sha = hash_file(path)
    model_sha = models.embedder_entry.sha256
    cache_key = source_sha if face_index == 0 else f"{source_sha[:24]}-face{face_index}"
    cached = cache.load(cache_key, model_sha)
    if cached is not None:
        log.debug("%s embedding from cache", what)
        return cached
    image = read_image(path, what)
    faces = models.detector.detect(image)
    if not faces:
        raise MediaError(f"no face found in {what} image {path}")
    faces = sorted(faces, key=lambda f: (f.area, f.score), reverse=True)
    if face_index >= len(faces):
        raise UsageError(f"source_face={face_index}: {what} image {path} has {len(faces)} "
                         f"face{'s' if len(faces) > 1 else ''}")
    if len(faces) > 1:
        choice = "the largest" if face_index == 0 else f"face {face_index} by size"
        log.info("%s image %s has %d faces: using %s (source_face=N picks another)", what,
                 path.name, len(faces), choice)
    value = models.embedder.embed(image, faces[face_index])
    cache.store(cache_key, model_sha, value)
    return value


# -- rendering ------------------------------------------------------------------------------------
def versions(*, vfr: bool = False, mark: bool = False) -> dict[str, str]:
    """Versions of everything that decides an output's bytes (part of the job key)."""
    import onnxruntime

    from . import __version__

    out = {"render": __version__, "ffmpeg": ffmpeg_version_line(), "onnxruntime": onnxruntime.__version__,
           "opencv": cv2.__version__, "numpy": np.__version__}
    if vfr:
        out["mkvmerge"] = mkvmerge_version()
    if mark:
        out["c2pa"] = marking.c2pa_version() or "none"
    return out


class Renderer:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        tune_allocator()
        report.prefetch_installation()
        self.models = Models(cfg)
        if cfg.mark.enabled:   # while the render starts, not at the end of the first render
            # not a daemon: the interpreter waits for it (≈ 0.1 s) before it finalises. A daemon
            # thread still importing then (a quick `render verify`) ends inside the Rust code of
            # c2pa or cryptography, which aborts the process ("FATAL: exception not rethrown")
            threading.Thread(target=marking.load_libraries, name="render-mark-libraries",
                             daemon=False).start()
        self.cache = EmbeddingCache(cfg.cache_path)
        self._embeddings: dict[tuple[Path, int], np.ndarray] = {}
        version = ffmpeg_version()
        self.legacy_vsync = version is not None and version < (5, 1)   # Ubuntu 22.04: ffmpeg 4.4
        self._hashes: dict[Path, tuple[tuple[int, ...], str]] = {}   # path → (identity, sha)
        self._hw: dict[str, bool] | None = None

    def embedding(self, path: Path, what: str, face_index: int = 0) -> np.ndarray:
        """:func:`face_embedding`, once per file for all the jobs of this renderer."""
        key = (path, face_index)
        if key not in self._embeddings:
            self._embeddings[key] = face_embedding(path, self.models, self.cache, what, face_index)
        return self._embeddings[key]

    def source_embedding(self, path: Path) -> np.ndarray:
        return self.embedding(path, "source", self.cfg.source_face)

    def _sha(self, path: Path) -> str:
        """The file's SHA-256, hashed again only when its identity changed since."""
        known = self._hashes.get(path)
        if known is None or known[0] != identity(path):
            before = identity(path)
            sha = hash_file(path)
            if identity(path) != before:
                raise MediaError(f"{path} changed while it was read; run again")
            self._hashes[path] = known = (before, sha)
        return known[1]

    def check_unchanged(self, path: Path) -> None:
        """The file is still the one hashed for this render (nothing is committed from another)."""
        known = self._hashes.get(path)
        try:
            same = known is None or identity(path) == known[0]
        except OSError:
            same = False
        if not same:
            raise MediaError(f"target {path} changed while rendering; run again")

    def _reference_path(self, source: Path) -> Path | None:
        if self.cfg.select.mode != "reference":
            return None
        ref = Path(self.cfg.select.reference) if self.cfg.select.reference else source
        if not ref.is_file():
            raise MediaError(f"reference image not found: {ref}")
        return ref

    def make_stage(self, source: Path, times: StageTimes) -> FaceStage:
        cfg, m = self.cfg, self.models
        t0 = time.perf_counter()
        embedding = self.source_embedding(source)
        select_cfg = cfg.select
        ref_path = self._reference_path(source)
        if ref_path is not None:
            reference = self.embedding(ref_path, "reference")
            select = ReferenceTracks(m.embedder.embed, reference, distance=select_cfg.distance,
                                     every=select_cfg.embed_every, margin=select_cfg.margin)
        else:
            if self.models.settings.release_idle_models:
                m.embedder.lazy.release()   # not needed again: the source embedding is cached

            def select(frame: np.ndarray, faces: list[Face]) -> list[Face]:
                return select_faces(faces, select_cfg.mode)
        times.add("embed", time.perf_counter() - t0)
        mask = cfg.mask
        return FaceStage(
            detector=m.detector, select=select, swapper=m.swapper,
            latent=m.swapper.latent(embedding),
            swap_mask=make_mask(mask.type, m.swapper.size, mask.padding, mask.blur),
            enhancer=m.enhancer,
            enhance_mask=make_mask(mask.type, 512, mask.padding, mask.blur) if m.enhancer else None,
            batch_size=self.models.settings.batch_size, detect_every=cfg.detect.every, times=times)

    # -- planning -----------------------------------------------------------------------------
    def identity(self, job: Job, *, vfr: bool) -> Identity:
        ref = self._reference_path(job.source)
        m = self.models
        models = {e.name: e.sha256 for e in (m.detector_entry, m.embedder_entry, m.swapper_entry,
                                             m.enhancer_entry) if e is not None}
        return Identity(target_sha256=self._sha(job.target), source_sha256=self._sha(job.source),
                        reference_sha256=self._sha(ref) if ref is not None else None,
                        models=models, versions=versions(vfr=vfr, mark=self.cfg.mark.enabled))

    def plan(self, job: Job) -> RenderPlan:
        """Probe the target, count its frames and plan the render; nothing is written."""
        return self.prepare(job)[0]

    def prepare(self, job: Job) -> tuple[RenderPlan, MediaInfo]:
        _check_pix_fmt(self.cfg.encode.pix_fmt)
        info, times = probe_with_times(job.target, cache_dir=self.cfg.cache_path,
                                       content_sha256=lambda: self._sha(job.target))
        if job.output.suffix.lower() in ffargs.IMAGE_FORMATS and not info.is_image:
            raise UsageError(f"output {job.output} is an image but target {job.target} is a video")
        if info.is_image and job.output.suffix.lower() not in ffargs.IMAGE_FORMATS:
            raise UsageError(f"output {job.output} is a video but target {job.target} is an image")
        if not times.cfr and shutil.which("mkvmerge") is None:
            raise RenderFailed(f"target {job.target} has a variable frame rate: keeping its frame "
                               f"times needs mkvmerge (install mkvtoolnix)")
        output = job.output.absolute()
        metadata: list[tuple[str, str]] = []
        if self.cfg.mark.enabled and not info.is_image:
            metadata = marking.metadata_pairs(__version__, ffargs.output_format(output)[1])
        plan = plan_render(self.cfg, source=job.source, target=job.target, output=output,
                           info=info, times=times, identity=self.identity(job, vfr=not times.cfr),
                           legacy_vsync=self.legacy_vsync, metadata=metadata,
                           hw=self.hardware())
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

    # -- rendering ----------------------------------------------------------------------------
    def marker(self, plan: RenderPlan, marks: dict) -> Callable[[Path], None]:
        """Marks the finished temp file as synthetic (metadata tag, C2PA manifest) before it is
        verified and committed; what was done goes into ``marks`` (the report's)."""
        output = Path(plan.output)
        return marking.Marker.for_render(self.cfg.mark, kind=plan.kind, output=output,
                                         cache_dir=self.cfg.cache_path,
                                         instance=f"{plan.key}:{output.name}",
                                         version=__version__, record=marks)

    def executor(self, job: Job, plan: RenderPlan, marks: dict | None = None, *,
                 stop: StopToken | None = None, on_segment: Callable | None = None) -> Executor:
        hooks = Hooks(stop=stop or PROCESS, segment_done=on_segment,
                      before_commit=self.marker(plan, marks if marks is not None else {}),
                      inputs_unchanged=lambda: self.check_unchanged(job.target),
                      already_done=lambda: self.up_to_date(job))
        return Executor(plan, lambda times: self.make_stage(job.source, times),
                        frames_in_flight=self.models.settings.frames_in_flight,
                        progress=self.cfg.progress, hooks=hooks, threads=self.models.threads,
                        apply_threads=self.models.apply_threads, preload=self.models.preload)

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
        return plan.key == recorded_key and hash_file(out) == recorded_sha

    def render(self, job: Job, *, meta: Mapping[str, Any] | None = None,
               lock: Mapping[str, Any] | None = None, stop: StopToken | None = None,
               on_segment: Callable | None = None,
               segments: list[int] | None = None) -> RenderResult:
        """Plan, execute, and write the report beside the output (into the work folder when the
        render fails or is interrupted)."""
        started, t0 = report.now(), time.perf_counter()
        memory = report.PeakMemory()
        plan = info = result = None
        marks: dict = {}
        with (stop or PROCESS).guarded():   # a stop after the commit waits for the report
            try:
                plan, info = self.prepare(job)
                result = self.executor(job, plan, marks, stop=stop, on_segment=on_segment).run(
                    segments)
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
                                            job=meta, lock=lock)
                        report.write(data, Path(plan.work_dir) / report.FAILED_NAME)
                    except Exception:  # noqa: BLE001 - the failure itself is what gets reported
                        log.debug("cannot write the failure report", exc_info=True)
                raise
            usage = memory.stop()
            seconds = time.perf_counter() - t0
            data = report.build(plan=plan, result=result, models=self.models, target_info=info,
                                started=started, ended=report.now(), memory=usage, marks=marks,
                                job=meta, lock=lock)
            report.write(data, report.report_path(Path(plan.output)))
        frames = plan.frames
        resumed = f", {result.resumed} of {len(plan.segments)} segments resumed" \
            if result.resumed else ""
        log.info("%s → %s: %d frames in %.1fs (%.1f fps; %d frames decoded%s)", job.target.name,
                 job.output, frames, seconds, frames / max(seconds, 1e-9), result.frames_decoded,
                 resumed)
        return RenderResult(job, frames, seconds, result.times, plan=plan, result=result,
                            report=data)


@dataclass
class Batch:
    """What :func:`render_all` did: rendered, up to date (skipped), failed (job, error)."""

    rendered: list[RenderResult] = field(default_factory=list)
    skipped: list[Job] = field(default_factory=list)
    failed: list[tuple[Job, RenderError]] = field(default_factory=list)

    def summary(self) -> str:
        parts = [f"{len(self.rendered)} rendered"]
        if self.skipped:
            parts.append(f"{len(self.skipped)} up to date")
        text = ", ".join(parts)
        if self.failed:
            text += f", {len(self.failed)} failed: " + "; ".join(
                f"{job.target.name} — {exc}" for job, exc in self.failed)
        return text


class BatchFailed(RenderError):
    """Some targets of a folder failed (the others were rendered)."""

    def __init__(self, batch: Batch) -> None:
        super().__init__(batch.summary())
        self.batch = batch
        self.exit_code = batch.failed[0][1].exit_code


@contextmanager
def device_lock(cfg: Config, owner: Mapping[str, Any],
                on_wait: Callable[[str], None] | None = None):
    """The render lock of the device this config renders on (a GPU by its UUID, else ``cpu``),
    held for the whole block; None where no lock is taken (``lock.device=none``, or under Slurm,
    whose scheduler hands out the GPUs)."""
    if cfg.lock.device == "none" or not lock_needed():
        yield None
        return
    device = detect_device(cfg.execution.providers, fake=cfg.lock.device)
    held = DeviceLock(cfg.lock_path, device, cfg.lock.slots, owner=owner,
                      timeout=cfg.lock.timeout or None,
                      on_wait=lambda line: (log.warning("%s", line),
                                            on_wait(line) if on_wait else None))
    with held:
        yield held


def lock_record(held: DeviceLock | None) -> dict | None:
    if held is None:
        return None
    return {"device": held.device.label, "device_id": held.device.id, "slot": held.slot,
            "acquired": report.iso(held.acquired_at), "acquired_ts": held.acquired_at,
            "waited_s": round(held.waited_s, 3)}


def render_all(cfg: Config, *, meta: Mapping[str, Any] | None = None,
               stop: StopToken | None = None,
               on_segment: Callable[[Job, Any, int, int], None] | None = None,
               on_wait: Callable[[str], None] | None = None) -> Batch:
    """Render every planned job under the device lock. In folder mode a failing target does not
    stop the others: the batch goes on and ends with a summary ("9 rendered, 1 failed: clip7.mov —
    reason"), raised as :class:`BatchFailed` when any failed. Outputs that are complete and whose
    report has this render's job key are skipped (``skip_done``)."""
    jobs = plan_jobs(cfg)
    owner = {"job": (meta or {}).get("job") or f"cli-{os.getpid()}",
             "target": jobs[0].target.name if len(jobs) == 1 else str(jobs[0].target.parent)}
    batch = Batch()
    with device_lock(cfg, owner, on_wait) as held:
        renderer = Renderer(cfg)
        # every job shares the source: a source without a face fails once, before any target
        renderer.source_embedding(jobs[0].source)
        for job in jobs:
            try:
                if cfg.skip_done and renderer.up_to_date(job):
                    log.info("%s: up to date (%s), skipped", job.target.name, job.output.name)
                    batch.skipped.append(job)
                    continue
                hook = (lambda rec, done, total, job=job: on_segment(job, rec, done, total)) \
                    if on_segment is not None else None
                batch.rendered.append(renderer.render(job, meta=meta, lock=lock_record(held),
                                                      stop=stop, on_segment=hook))
            except AlreadyDone as done:
                log.info("%s: up to date (%s), skipped", job.target.name, done)
                batch.skipped.append(job)
            except (MediaError, UsageError, RenderFailed) as exc:
                if len(jobs) == 1:
                    raise
                log.error("%s: %s", job.target.name, exc)
                batch.failed.append((job, exc))
    if batch.failed:
        raise BatchFailed(batch)
    if len(jobs) > 1:
        log.info("%s", batch.summary())
    return batch


# -- beyond one machine ---------------------------------------------------------------------------
#: where an array task's index comes from: Slurm arrays, Kubernetes Indexed Jobs
INDEX_VARIABLES = ("SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX")


def shard_index(cfg: Config, env: Mapping[str, str] | None = None) -> tuple[int, int]:
    """(index, count) of this shard: ``shard.index``, else the scheduler's task index."""
    env = os.environ if env is None else env
    count = cfg.shard.count
    index = cfg.shard.index
    if index < 0:
        for var in INDEX_VARIABLES:
            if env.get(var, "").strip():
                try:
                    index = int(env[var])
                except ValueError:
                    raise UsageError(f"{var}={env[var]!r} is not a shard index") from None
                break
        else:
            raise UsageError(f"shard.count={count} needs the shard's index: shard=I/{count}, "
                             f"shard.index=I, or {' / '.join(INDEX_VARIABLES)} from the scheduler")
    if not 0 <= index < count:
        raise UsageError(f"shard index {index} is outside 0..{count - 1} (shard.count={count})")
    return index, count


def _single_job(cfg: Config, what: str) -> Job:
    jobs = plan_jobs(cfg)
    if len(jobs) != 1:
        raise UsageError(f"{what} works on one target, not a folder ({len(jobs)} targets): give "
                         f"target=FILE and output=FILE")
    return jobs[0]


def render_shard(cfg: Config, *, stop: StopToken | None = None) -> ExecResult:
    """Render this shard's segments of the plan into the shared work folder, then exit; a re-run
    skips the segments already committed. Refused when the work folder holds another job's plan.
    ``stop`` is asked between and within segments (:class:`~render.execute.Hooks`)."""
    index, count = shard_index(cfg)
    job = _single_job(cfg, "a shard")
    owner = {"job": f"shard-{index}-of-{count}", "target": job.target.name}
    with device_lock(cfg, owner):
        renderer = Renderer(cfg)
        plan = renderer.plan(job)
        if plan.kind != "video":
            raise UsageError("only videos are sharded: render an image in one process")
        mine = shard_segments(len(plan.segments), count, index)
        log.info("shard %d of %d: segments %s of %d", index, count,
                 f"{mine[0]}-{mine[-1]}" if mine else "none", len(plan.segments))
        result = renderer.executor(job, plan, stop=stop).run(mine, assemble=False,
                                                             refuse_other=True)
    log.info("shard %d of %d done: %d segments rendered, %d were done", index, count,
             result.rendered, len(mine) - result.rendered)
    return result


def assemble(cfg: Config) -> RenderResult | None:
    """Join the committed segments of every shard, mux the audio once, verify and commit — as a
    local render does. Names the missing segments and their shards when some are not done."""
    job = _single_job(cfg, "assemble")
    renderer = Renderer(cfg)
    plan = renderer.plan(job)
    if plan.kind != "video":
        raise UsageError("only videos are sharded: render an image in one process")
    executor = renderer.executor(job, plan)
    missing = executor.missing()
    if missing:
        count = cfg.shard.count
        where = (lambda s: f", shard {shard_of(s.index, len(plan.segments), count)} of {count}") \
            if count else (lambda s: "")
        raise RenderFailed(
            f"cannot assemble {job.output.name}: {len(missing)} of {len(plan.segments)} segments "
            f"are not done: " + ", ".join(f"{s.index} (frames {s.start}-{s.end - 1}{where(s)})"
                                          for s in missing[:12])
            + (" ..." if len(missing) > 12 else ""))
    try:
        return renderer.render(job, segments=[])
    except AlreadyDone as done:
        log.info("%s", done)
        return None
