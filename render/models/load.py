"""``load_models(cfg)``: the verified models of one Config, their sessions and the face chain.

Used by the renderer, the web page's face check (``load_detector``) and the report. Every model a
config needs is verified against its pin before any frame is decoded; sessions are created on
their first call (``sessions.LazySession``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import cv2

from ..config import Config
from ..cpu import int8_fast
from ..errors import ConfigError, ModelError
from ..faces.detect import CONTRACTS as DETECTOR_CONTRACTS, Detector
from ..faces.embed import CONTRACTS as EMBEDDER_CONTRACTS, Embedder
from ..landmarks.refine import FaceLandmarks, load_landmarks
from ..masks.build import load_masks
from ..masks.model import ModelMask
from ..memory import StrategySettings, strategy
from ..model_handle import ModelEntry, ProcessorModel, model_row
from ..processors import registry
from ..processors.base import ChainProcessor, FaceProcessor, FrameProcessor
from ..processors.spec import Processor, Step
from ..sessions import LazySession, Preload, SessionFactory
from ..threads import ThreadPolicy
from .manifest import load_manifest
from .needs import chain_steps, fixed, landmark_models, mask_models, required_models
from .store import ModelStore, default_stamp_dir


def _check_contract(entry: ModelEntry, key: str, allowed: tuple[str, ...] | frozenset[str]) -> None:
    if entry.contract not in allowed:
        raise ModelError(f"{key}={entry.name}: its contract is {entry.contract}, "
                         f"{key} needs {' or '.join(sorted(allowed))}")


def model_store(cfg: Config) -> ModelStore:
    """The manifest layers and model folder ``cfg`` names."""
    manifest = load_manifest(cfg.models_dir, [Path(p) for p in cfg.models.manifest])
    return ModelStore(cfg.models_dir, manifest, default_stamp_dir(cfg.cache_path))


def auto_precision(manifest: Any, on_cpu: bool) -> Callable[[str, str], str]:
    """A key's precision made concrete: ``auto`` is int8 where the models run on the CPU
    provider of a CPU with VNNI and a gated int8 file exists for the model, else fp32."""
    fast = on_cpu and int8_fast()

    def precision(name: str, written: str) -> str:
        if written != "auto":
            return written
        if fast and any(e.source == name and e.precision == "int8" for e in manifest):
            return "int8"
        return "fp32"
    return precision


def load_detector(cfg: Config, store: ModelStore, factory: SessionFactory,
                  entry: ModelEntry | None = None) -> tuple[ModelEntry, Detector]:
    """The face detector ``cfg`` names with ``detect.*`` settings; verified here unless its
    verified ``entry`` is given."""
    if entry is None:
        key = (cfg.detect.model, fixed(cfg.detect.model, cfg.detect.precision))
        entry = store.verify_required([key])[key]
    _check_contract(entry, "detect.model", DETECTOR_CONTRACTS)
    lazy = factory.lazy(store.path(entry), fp16=entry.precision == "fp16", sha256=entry.sha256)
    return entry, Detector(lazy, entry.contract, size=cfg.detect.size, score=cfg.detect.score,
                           nms_iou=cfg.detect.nms)


@dataclass
class LoadedModels:
    """The models of one render: detector, embedder and the chain's processors."""

    cfg: Config
    store: ModelStore
    factory: SessionFactory
    settings: StrategySettings
    #: who gets the cores (ONNX Runtime or ffmpeg), decided once by the first render
    threads: ThreadPolicy
    detector_entry: ModelEntry
    detector: Detector
    embedder_entry: ModelEntry
    embedder: Embedder
    #: the chain's processors, in order: face and frame steps
    processors: list[ChainProcessor]
    #: the occlusion and region masks (``mask.occluder``, ``mask.parser``)
    masks: list[ModelMask] = field(default_factory=list)
    #: the landmark step (``landmark.model``, or the estimator for ``mask.areas`` and
    #: ``mask.keep``), or None
    landmarks: FaceLandmarks | None = None

    @property
    def face_steps(self) -> list[FaceProcessor]:
        return [p for p in self.processors if isinstance(p, FaceProcessor)]

    def output_size(self, width: int, height: int) -> tuple[int, int]:
        """The size of the chain's frames out for frames of ``width`` × ``height`` in."""
        for p in self.processors:
            if isinstance(p, FrameProcessor):
                width, height = p.output_size(width, height)
        return width, height

    def matte_step(self) -> FrameProcessor | None:
        """The chain's last step that makes a matte (a background remover), or None."""
        return next((p for p in reversed(self.processors)
                     if isinstance(p, FrameProcessor) and p.matte), None)

    def _with_models(self) -> list[ChainProcessor]:
        return [p for p in self.processors if p.model is not None]

    def _extras(self) -> list[Any]:
        """The mask and landmark models: anything with ``lazy``, ``model`` and ``record()``."""
        return [*self.masks, *(self.landmarks.models if self.landmarks is not None else [])]

    def sessions(self) -> list[LazySession]:
        return list(self.named_sessions().values())

    def named_sessions(self) -> dict[str, LazySession]:
        """Every session by the name its calls are counted under (the bench's per-model rows):
        ``detect``, ``embed``, each processor's step name, each mask's and landmark model's
        report role, and ``<step>-<need>`` for a processor's helper models (a converter)."""
        return {name: lazy for name, lazy, _ in self._named()}

    def named_entries(self) -> dict[str, ModelEntry]:
        """The manifest entry behind each of :meth:`named_sessions`."""
        return {name: entry for name, _, entry in self._named()}

    def entries(self) -> list[ModelEntry]:
        return [entry for _, _, entry in self._named()]

    def _named(self) -> list[tuple[str, LazySession, ModelEntry]]:
        triples = [("detect", self.detector.lazy, self.detector_entry),
                   ("embed", self.embedder.lazy, self.embedder_entry),
                   *((p.name, p.lazy, p.model.entry) for p in self._with_models()),
                   *((m.role, m.lazy, m.model.entry) for m in self._extras()),
                   *((f"{p.name}-{key}", m.lazy, m.entry) for p in self._with_models()
                     for key, m in p.model.needs.items())]
        seen: dict[str, int] = {}
        named: list[tuple[str, LazySession, ModelEntry]] = []
        for name, lazy, entry in triples:     # several occluders: occlusion, occlusion-2, ...
            seen[name] = n = seen.get(name, 0) + 1
            named.append((name if n == 1 else f"{name}-{n}", lazy, entry))
        return named

    def on_cpu(self) -> bool:
        """Whether the models run on the CPU provider: the providers the chain's first session
        (else the detector's) actually got, once it exists — a GPU provider that failed at
        creation or in a call leaves the model on the CPU — else the configured first."""
        for lazy in [*(p.lazy for p in self._with_models()), self.detector.lazy]:
            if lazy.providers:
                return lazy.providers[0] == "CPUExecutionProvider"
        return self.factory.providers[0] == "CPUExecutionProvider"

    def apply_threads(self) -> None:
        """Sessions on the CPU provider are recreated at their next call with the policy's threads;
        OpenCV's pool (resize, warps, blends: process-wide) gets the same number."""
        cv2.setNumThreads(self.threads.threads)
        if self.factory.threads == self.threads.threads:
            return
        self.factory.threads = self.threads.threads
        for lazy in self.sessions():
            if lazy.loaded and (lazy.providers or ["CPUExecutionProvider"])[0] \
                    == "CPUExecutionProvider":
                lazy.release()

    def preload(self) -> Preload:
        """Create the face processors' sessions in the background (:class:`Preload`)."""
        return Preload([*(p.lazy for p in self._with_models()),
                        *(m.lazy for m in self._extras())])

    def records(self) -> list[dict[str, Any]]:
        """The report's rows: each model with its file, SHA-256 and the providers it got."""
        return [model_row("detect", self.detector_entry, self.store.path(self.detector_entry),
                          self.detector.lazy),
                model_row("embed", self.embedder_entry, self.store.path(self.embedder_entry),
                          self.embedder.lazy),
                *(p.record() for p in self.processors), *(m.record() for m in self._extras())]


def _step_processor(step: Step, manifest: Any) -> tuple[Processor, str]:
    """The processor of ``step`` and the key its model is named by: a section's own, checked
    against the contracts it drives (before the model's precision is looked at), or the
    processor driving the contract of the model a step names directly."""
    processor = registry.processor(step.name)
    if processor is not None:
        if step.model:
            _check_contract(manifest.get(step.model), f"{step.name}.model",
                            processor.contracts)
        return processor, f"{step.name}.model"
    entry = manifest.get(step.model)
    _check_contract(entry, "processors", registry.contracts())
    found = registry.for_contract(entry.contract)
    assert found is not None
    return found, "processors"


def _check_colour_match(cfg: Config, processors: list[ChainProcessor]) -> None:
    """A face step's colour match measures the target's colour on the frame as decoded: after a
    step that gives the frame other colours it would undo them on the faces."""
    for k, step in enumerate(processors):
        if isinstance(step, FrameProcessor) and step.recolours:
            later = next((p for p in processors[k + 1:] if isinstance(p, FaceProcessor)
                          and p.colour_crop is not None), None)
            if later is not None:
                raise ConfigError(
                    f"processors={','.join(cfg.processors)}: {later.name}'s colour match would "
                    f"give the faces the target's colours from before {step.name}: put "
                    f"{step.name} after {later.name}, or set {later.name}.color_match=off")


def load_models(cfg: Config, *, device_id: int | None = None) -> LoadedModels:
    """Verify every model ``cfg`` needs and wire detector, embedder and the chain; their
    sessions on a GPU provider run on CUDA device ``device_id`` (None: device 0)."""
    store = model_store(cfg)
    steps = chain_steps(cfg)
    kinds = [_step_processor(step, store.manifest) for step in steps]
    if not any(processor.kind == "face" for processor, _ in kinds):
        frames = [processor.name for processor, _ in kinds]
        why = (f"frame steps ({', '.join(frames)}) run beside a face step: add swap"
               if frames else "enhance runs only with enhance.enabled=true")
        raise ConfigError(f"processors={','.join(cfg.processors)}: no face processor to run "
                          f"({why})")
    factory = SessionFactory(cfg.execution, cfg.cache_path, device_id=device_id)
    precision = auto_precision(store.manifest,
                               factory.providers[0] == "CPUExecutionProvider")
    steps = [dataclasses.replace(s, precision=precision(s.model, s.precision)) for s in steps]
    # the models a step's options name besides its model (a lip syncer's voice extractor); a
    # step named by its model has its processor's declared defaults
    named = [processor.option_models(dict(step.options) or processor.defaults())
             if processor.option_models else () for step, (processor, _) in zip(steps, kinds)]
    required = required_models(cfg, steps, precision) + [(n, "fp32") for ns in named for n in ns]
    resolved = store.verify_required(required)                      # before any frame is decoded
    models: LoadedModels | None = None
    threads = ThreadPolicy(cfg.execution.threads, lanes=cfg.execution.lanes,
                           on_cpu=lambda: models.on_cpu() if models is not None else
                           factory.providers[0] == "CPUExecutionProvider",
                           apply=lambda: models.apply_threads() if models is not None else None)
    factory.threads = threads.threads
    cv2.setNumThreads(threads.threads)

    def lazy(entry: ModelEntry) -> LazySession:
        return factory.lazy(store.path(entry), fp16=entry.precision == "fp16", sha256=entry.sha256)

    def model_for(entry: ModelEntry, needs: dict[str, ProcessorModel] | None = None
                  ) -> ProcessorModel:
        return ProcessorModel(entry, store.path(entry), lazy(entry), cfg.cache_path, needs or {})

    detector_entry, detector = load_detector(cfg, store, factory, resolved[required[0]])
    embedder_entry = resolved[required[1]]
    _check_contract(embedder_entry, "embed.model", EMBEDDER_CONTRACTS)
    processors: list[ChainProcessor] = []
    for step, (processor, key), extra in zip(steps, kinds, named):
        if not step.model:
            processors.append(registry.driver(processor)(step, None))
            continue
        entry = resolved[(step.model, step.precision)]
        _check_contract(entry, key, processor.contracts)
        if key == "processors":     # named by its model: the processor's declared defaults
            step = dataclasses.replace(step, options=processor.defaults(),
                                       defaults=processor.defaults())
        needs = {name: model_for(resolved[(name, "fp32")]) for name in (*entry.needs, *extra)}
        processors.append(registry.driver(processor, entry.contract)(step,
                                                                      model_for(entry, needs)))
    _check_colour_match(cfg, processors)

    def entry_for(key: str, name: str, allowed: frozenset[str]) -> ModelEntry:
        written = cfg.mask.precision if key.startswith("mask.") else cfg.landmark.precision
        entry = resolved[(name, precision(name, written))]
        _check_contract(entry, key, allowed)
        return entry

    settings = strategy(cfg.execution)
    for p in processors:
        p.memory = settings
    models = LoadedModels(cfg=cfg, store=store, factory=factory, settings=settings,
                          threads=threads, detector_entry=detector_entry, detector=detector,
                          embedder_entry=embedder_entry, embedder=Embedder(lazy(embedder_entry)),
                          processors=processors,
                          masks=load_masks(mask_models(cfg), cfg.mask, entry_for, model_for),
                          landmarks=load_landmarks(landmark_models(cfg), cfg.landmark.score,
                                                   entry_for, model_for))
    return models
