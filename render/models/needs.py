"""What a config needs of the models: the chain's steps, the mask and landmark models its keys
name, and every model a render with it loads (verified before any frame is decoded)."""
from __future__ import annotations

import dataclasses
import logging
from typing import Callable

from ..config import Config, load_config, profile_names
from ..errors import ConfigError
from ..processors import registry
from ..processors.spec import Step, own_options

log = logging.getLogger(__name__)


def chain_steps(cfg: Config) -> list[Step]:
    """The steps a render with ``cfg`` runs, in order. A name that is not a processor's section
    is a model's manifest name, run with its processor's declared defaults; whether such a model
    exists and what drives it is the loader's to check. A step named twice is refused: each
    has one section of options, one report row and one session."""
    twice = next((n for k, n in enumerate(cfg.processors) if n in cfg.processors[:k]), None)
    if twice is not None:
        raise ConfigError(f"processors={','.join(cfg.processors)}: {twice} is named twice; a "
                          f"step runs once per render (name it once)")
    steps = []
    for name in cfg.processors:
        processor = registry.processor(name)
        if processor is None:
            steps.append(Step(name, name))
            continue
        values = dataclasses.asdict(getattr(cfg, name))
        if not values.get("enabled", True):
            continue
        idle = _idle(cfg, name)
        if idle:
            log.warning("%s is left out of the chain: %s", name, idle)
            continue
        steps.append(Step(name, values.get("model", ""), values.get("precision", "fp32"),
                          own_options(getattr(cfg, name)), processor.defaults()))
    return steps


def _idle(cfg: Config, name: str) -> str:
    """Why the processor section ``name`` would change nothing with its options ("" when it
    would, or when it does not say: ``Processor.idle``)."""
    processor = registry.processor(name)
    return processor.idle(getattr(cfg, name)) if processor and processor.idle else ""


def _chain_landmark_uses(cfg: Config) -> list[str]:
    """The settings of the chain's processors that need each face's 68 landmarks
    (``Processor.landmarks``: a face editor's eye and lip open ratios)."""
    uses = []
    for name in cfg.processors:
        processor = registry.processor(name)
        if processor is None or processor.landmarks is None or \
                not getattr(getattr(cfg, name), "enabled", True) or _idle(cfg, name):
            continue
        uses += processor.landmarks(getattr(cfg, name))
    return uses


def mask_models(cfg: Config) -> list[tuple[str, str]]:
    """(key, manifest name) of the mask models a render with ``cfg`` loads, in order."""
    if cfg.mask.parser and not cfg.mask.regions:
        raise ConfigError(f"mask.parser={cfg.mask.parser} with no mask.regions would keep none "
                          f"of the swapped face: name the regions to keep")
    return [*(("mask.occluder", name) for name in cfg.mask.occluder),
            *([("mask.parser", cfg.mask.parser)] if cfg.mask.parser else [])]


def landmark_models(cfg: Config) -> dict[str, str]:
    """key → manifest name of the landmark models a render with ``cfg`` loads: the landmarker
    when ``landmark.model`` is set, else the estimator when ``mask.areas`` needs 68 points, or
    ``mask.keep`` does (it takes the parser's classes instead when ``mask.parser`` is on), or a
    processor of the chain does (``Processor.landmarks``)."""
    if cfg.landmark.model:
        return {"landmark.model": cfg.landmark.model}
    uses = [f"{key}={','.join(areas)}" for key, areas in (
        ("mask.areas", cfg.mask.areas), ("mask.keep", () if cfg.mask.parser else cfg.mask.keep))
        if areas] + _chain_landmark_uses(cfg)
    if not uses:
        return {}
    if not cfg.landmark.estimator:
        also = " (or mask.parser, whose mouth classes it then takes)" \
            if uses[0].startswith("mask.keep") else ""
        raise ConfigError(f"{uses[0]} needs 68 landmarks: set landmark.model or "
                          f"landmark.estimator{also}")
    return {"landmark.estimator": cfg.landmark.estimator}


def fixed(name: str, precision: str) -> str:
    """A precision as written, ``auto`` read as fp32 (where nothing is known of the machine)."""
    return "fp32" if precision == "auto" else precision


def required_models(cfg: Config, steps: list[Step] | None = None,
                    precision: Callable[[str, str], str] = fixed) -> list[tuple[str, str]]:
    """(manifest name, precision) of every model a render with ``cfg`` (and its chain
    ``steps``, computed when not given) loads; ``precision(name, written)`` makes each key's
    precision concrete (``auto``)."""
    steps = chain_steps(cfg) if steps is None else steps
    return [(cfg.detect.model, precision(cfg.detect.model, cfg.detect.precision)),
            (cfg.embed.model, precision(cfg.embed.model, cfg.embed.precision)),
            *((s.model, precision(s.model, s.precision)) for s in steps if s.model),
            *((name, precision(name, cfg.mask.precision)) for _, name in mask_models(cfg)),
            *((name, precision(name, cfg.landmark.precision))
              for name in landmark_models(cfg).values())]


def profile_models() -> dict[str, list[tuple[str, str]]]:
    """Profile name → the models it needs (for ``render models list`` and ``fetch profile=all``)."""
    return {name: required_models(load_config({"profile": name}, env={}))
            for name in profile_names()}
