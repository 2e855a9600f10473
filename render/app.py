"""One render job end to end: plan → verify models → probe → source embedding → stream → commit.

The app layer: it knows files, models and the pipeline, and wires them with the one Config.
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np

from .config import Config, parse_trim, required_models
from .errors import MediaError, ModelError, RenderError, UsageError
from .faces.detect import CONTRACTS as DETECTOR_CONTRACTS, Detector
from .faces.embed import EmbeddingCache, Embedder
from .faces.enhance import Enhancer
from .faces.mask import make_mask
from .faces.select import select_faces
from .faces.swap import Swapper, load_emap
from .faces.types import Face
from .media import args as ffargs
from .media.probe import IMAGE_EXTENSIONS, ffmpeg_version, probe
from .media.reader import FrameReader
from .media.writer import AtomicOutput, FrameWriter
from .models.manifest import ModelEntry, load_manifest
from .models.store import ModelStore, default_stamp_dir, hash_file
from .pipeline import FaceStage, StageTimes, stream
from .progress import Progress
from .runtime import LazySession, SessionFactory, strategy

log = logging.getLogger(__name__)

# what can be rendered from, and what can be written
VIDEO_EXTS = frozenset({".mp4", ".mov", ".mkv", ".webm", ".avi", ".m4v"})
IMAGE_EXTS = IMAGE_EXTENSIONS
OUTPUT_EXTS = frozenset(ffargs.VIDEO_FORMATS) | frozenset(ffargs.IMAGE_FORMATS)
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


# -- planning -------------------------------------------------------------------------------------
def _is_media(path: Path) -> bool:
    return path.is_file() and path.suffix.lower() in VIDEO_EXTS | IMAGE_EXTS \
        and not path.name.startswith(".")


def plan_jobs(cfg: Config) -> list[Job]:
    """Resolve source, targets and outputs from the config; fail before any work is done."""
    input_dir = Path(cfg.input_dir) if cfg.input_dir else None
    if cfg.source:
        source = Path(cfg.source)
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
        outputs = [out_dir / _output_name(t) for t in targets]
    jobs = []
    for t, o in zip(targets, outputs):
        if o.suffix.lower() not in OUTPUT_EXTS:
            raise UsageError(f"output {o}: cannot write '{o.suffix}' files (use one of "
                             f"{', '.join(sorted(OUTPUT_EXTS))})")
        if (o.suffix.lower() in IMAGE_EXTS) != (t.suffix.lower() in IMAGE_EXTS):
            kinds = ("an image", "a video") if o.suffix.lower() in IMAGE_EXTS else ("a video", "an image")
            raise UsageError(f"output {o} is {kinds[0]} but target {t} is {kinds[1]}")
        if o.resolve() == t.resolve():
            raise UsageError(f"output {o} would overwrite its target")
        _check_writable(o.parent)
        jobs.append(Job(source, t, o))
    return jobs


def _output_name(target: Path) -> str:
    """The target's name, with .mp4 / .png where its own type cannot be written (avi, bmp, tiff)."""
    if target.suffix.lower() in OUTPUT_EXTS:
        return target.name
    return target.stem + (".png" if target.suffix.lower() in IMAGE_EXTS else ".mp4")


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
        self.settings = strategy(cfg.execution)
        self.detector = Detector(self._lazy(self.detector_entry), self.detector_entry.contract,
                                 size=cfg.detect.size, score=cfg.detect.score, nms_iou=cfg.detect.nms)
        self.embedder = Embedder(self._lazy(self.embedder_entry))
        emap = load_emap(self.store.path(self.swapper_entry), self.swapper_entry.sha256,
                         cfg.cache_path)
        self.swapper = Swapper(self._lazy(self.swapper_entry), emap)
        self.enhancer = Enhancer(self._lazy(self.enhancer_entry), cfg.enhance.blend) \
            if self.enhancer_entry is not None else None

    def _lazy(self, entry: ModelEntry) -> LazySession:
        path = self.store.path(entry)
        return LazySession(lambda: self.factory.create(path, fp16=entry.precision == "fp16"))


# -- source face ----------------------------------------------------------------------------------
def read_image(path: Path, what: str) -> np.ndarray:
    image = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if image is None:
        raise MediaError(f"cannot read {what} image {path}: not an image file OpenCV can decode")
    return image


def face_embedding(path: Path, models: Models, cache: EmbeddingCache, what: str) -> np.ndarray:
    """Raw embedding of the largest face in ``path``, computed once per (file, model) pair."""
    source_sha = hash_file(path)
    model_sha = models.embedder_entry.sha256
    cached = cache.load(source_sha, model_sha)
    if cached is not None:
        log.debug("%s embedding from cache", what)
        return cached
    image = read_image(path, what)
    faces = models.detector.detect(image)
    if not faces:
        raise MediaError(f"no face found in {what} image {path}")
    face = max(faces, key=lambda f: (f.area, f.score))
    value = models.embedder.embed(image, face)
    cache.store(source_sha, model_sha, value)
    return value


# -- rendering ------------------------------------------------------------------------------------
class Renderer:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.models = Models(cfg)
        self.cache = EmbeddingCache(cfg.cache_path)
        self._embeddings: dict[Path, np.ndarray] = {}
        version = ffmpeg_version()
        self.legacy_vsync = version is not None and version < (5, 1)   # Ubuntu 22.04: ffmpeg 4.4

    def embedding(self, path: Path, what: str) -> np.ndarray:
        """:func:`face_embedding`, once per file for all the jobs of this renderer."""
        if path not in self._embeddings:
            self._embeddings[path] = face_embedding(path, self.models, self.cache, what)
        return self._embeddings[path]

    def _stage(self, source: Path, times: StageTimes) -> FaceStage:
        cfg, m = self.cfg, self.models
        t0 = time.perf_counter()
        embedding = self.embedding(source, "source")
        select_cfg = cfg.select
        if select_cfg.mode == "reference":
            ref_path = Path(select_cfg.reference) if select_cfg.reference else source
            if not ref_path.is_file():
                raise MediaError(f"reference image not found: {ref_path}")
            reference = self.embedding(ref_path, "reference")

            def select(frame: np.ndarray, faces: list[Face]) -> list[Face]:
                return select_faces(faces, "reference", embed=lambda f: m.embedder.embed(frame, f),
                                    reference=reference, distance=select_cfg.distance)
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

    def render(self, job: Job) -> RenderResult:
        cfg = self.cfg
        started = time.perf_counter()
        info = probe(job.target)
        if job.output.suffix.lower() in ffargs.IMAGE_FORMATS and not info.is_image:
            raise UsageError(f"output {job.output} is an image but target {job.target} is a video")
        if info.is_image and job.output.suffix.lower() not in ffargs.IMAGE_FORMATS:
            raise UsageError(f"output {job.output} is a video but target {job.target} is an image")
        times = StageTimes()
        stage = self._stage(job.source, times)
        trim = None
        scale_height = None
        total = info.frame_count
        if not info.is_image:
            t = parse_trim(cfg.trim)
            if t is not None:
                start, end = t.seconds(info.fps)
                if start >= info.duration:
                    raise UsageError(f"trim start {start:g}s is past the end of {job.target} "
                                     f"({info.duration:g}s)")
                end = info.duration if end is None else min(end, info.duration)
                trim = (start, end)
                total = max(1, round((end - start) * float(info.fps)))
            if cfg.preview and info.height > cfg.preview_height:
                scale_height = cfg.preview_height
        width, height = ffargs.decoded_size(info, scale_height)
        decode = ffargs.decode_args(info, trim=trim, scale_height=scale_height,
                                    legacy_vsync=self.legacy_vsync)
        settings = self.models.settings
        progress = Progress(total, label=job.target.name, mode=cfg.progress) \
            if cfg.progress != "off" else None
        with AtomicOutput(job.output) as out:
            if info.is_image:
                encode = ffargs.image_encode_args(out.tmp_path, width=width, height=height)
            else:
                encode = ffargs.encode_args(info, out.tmp_path, width=width, height=height, fps=info.fps,
                                            video=ffargs.EncodeSettings(
                                                codec=cfg.encode.codec, crf=cfg.encode.crf,
                                                preset=cfg.encode.preset,
                                                pix_fmt=cfg.encode.pix_fmt,
                                                threads=cfg.encode.threads or None), trim=trim,
                                            legacy_vsync=self.legacy_vsync)
            try:
                with FrameReader(decode, width, height) as reader, \
                        FrameWriter(encode, out.tmp_path) as writer:
                    frames = stream(reader, writer.write, stage.process,
                                    frames_in_flight=settings.frames_in_flight, times=times,
                                    progress=progress)
                    writer.close()
            finally:
                if progress is not None:
                    progress.close()
            if frames == 0:
                raise MediaError(f"no frames decoded from {job.target}")
            out.commit()
        seconds = time.perf_counter() - started
        log.info("%s → %s: %d frames in %.1fs (%.1f fps)", job.target.name, job.output, frames,
                 seconds, frames / max(seconds, 1e-9))
        return RenderResult(job, frames, seconds, times)


def render_all(cfg: Config) -> int:
    """Render every planned job; a bad target doesn't stop the others but makes the exit non-zero."""
    jobs = plan_jobs(cfg)
    renderer = Renderer(cfg)
    # every job shares the source: a source without a face fails once, before any target
    renderer.embedding(jobs[0].source, "source")
    failures: list[RenderError] = []
    for job in jobs:
        try:
            renderer.render(job)
        except (MediaError, UsageError) as exc:
            if len(jobs) == 1:
                raise
            log.error("%s: %s", job.target.name, exc)
            failures.append(exc)
    if failures:
        raise failures[0].__class__(f"{len(failures)} of {len(jobs)} targets failed; first: "
                                    f"{failures[0]}")
    return 0
