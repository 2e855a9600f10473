"""The chain's steps as the config names them (``processors``), resolved to models."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from ..config import Config

#: config sections that configure a processor (``model``, ``precision``, optionally ``enabled`` —
#: False leaves the step out — and the processor's own options), each with the kind of contract
#: its model must have: ``swap.model`` names a swapper, ``enhance.model`` an enhancer
SECTIONS = {"swap": "swapper-", "enhance": "enhancer-"}


@dataclass(frozen=True)
class Step:
    """One step of the chain."""

    name: str                      # a section ("swap", "enhance") or a model's manifest name
    model: str                     # manifest name
    precision: str = "fp32"
    options: Mapping[str, Any] = field(default_factory=dict)   # the section's other keys


def chain_steps(cfg: Config) -> list[Step]:
    """The steps a render with ``cfg`` runs, in order. A name that is not a section is a model's
    manifest name, run with its processor's defaults; whether such a model exists and what
    drives it is the loader's to check."""
    steps = []
    for name in cfg.processors:
        if name not in SECTIONS:
            steps.append(Step(name, name))
            continue
        values = dataclasses.asdict(getattr(cfg, name))
        if not values.pop("enabled", True):
            continue
        steps.append(Step(name, values.pop("model"), values.pop("precision", "fp32"), values))
    return steps
