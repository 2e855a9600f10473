"""Manifest contract → the mask class that drives a model of it, imported on first use.

Light on purpose: the manifest asks it which contracts are maskers without importing ONNX
Runtime or the maskers themselves.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..config import Config
    from .model import ModelMask

#: contract → "module:Class" (relative to this package)
BUILT_IN: dict[str, str] = {
    "occluder-xseg": ".occlusion:OcclusionMask",
    "parser-bisenet": ".region:RegionMask",
}


#: the key naming a mask model → the kind of contract its model must have
KEY_KINDS = {"mask.occluder": "occluder-", "mask.parser": "parser-"}


def contracts() -> frozenset[str]:
    return frozenset(BUILT_IN)


def contracts_for(key: str) -> frozenset[str]:
    """The contracts a model named by ``key`` (``mask.occluder``, ``mask.parser``) may have."""
    return frozenset(c for c in BUILT_IN if c.startswith(KEY_KINDS[key]))


def mask_class(contract: str) -> type[ModelMask] | None:
    """The class for ``contract``; None when no mask drives it."""
    where = BUILT_IN.get(contract)
    if where is None:
        return None
    module, name = where.split(":")
    return getattr(importlib.import_module(module, __package__), name)


def named_models(cfg: Config) -> list[tuple[str, str]]:
    """(key, manifest name) of the mask models a render with ``cfg`` loads, in order."""
    if cfg.mask.parser and not cfg.mask.regions:
        raise ConfigError(f"mask.parser={cfg.mask.parser} with no mask.regions would keep none "
                          f"of the swapped face: name the regions to keep")
    return [*(("mask.occluder", name) for name in cfg.mask.occluder),
            *([("mask.parser", cfg.mask.parser)] if cfg.mask.parser else [])]
