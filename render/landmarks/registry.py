"""Manifest contract → the class that drives a landmark model, imported on first use.

Light on purpose: the manifest asks it which contracts are landmark models without importing
ONNX Runtime or the models' classes.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..config import Config
    from .model import LandmarkModel

#: contract → "module:Class" (relative to this package)
BUILT_IN: dict[str, str] = {
    "landmarker-2dfan4": ".fan2d:Fan2dLandmarker",
    "landmarker-fan-68-5": ".estimate:Landmarks68From5",
}

#: the key naming a landmark model → the contracts its model may have: a landmarker reads the
#: frame, an estimator only the 5 points
KEY_CONTRACTS: dict[str, frozenset[str]] = {
    "landmark.model": frozenset({"landmarker-2dfan4"}),
    "landmark.estimator": frozenset({"landmarker-fan-68-5"}),
}


def contracts() -> frozenset[str]:
    return frozenset(BUILT_IN)


def landmark_class(contract: str) -> type[LandmarkModel] | None:
    """The class for ``contract``; None when nothing drives it."""
    where = BUILT_IN.get(contract)
    if where is None:
        return None
    module, name = where.split(":")
    return getattr(importlib.import_module(module, __package__), name)


def named_models(cfg: Config) -> dict[str, str]:
    """key → manifest name of the landmark models a render with ``cfg`` loads: the landmarker
    when ``landmark.model`` is set, else the estimator when ``mask.areas`` needs 68 points."""
    if cfg.landmark.model:
        return {"landmark.model": cfg.landmark.model}
    if cfg.mask.areas:
        if not cfg.landmark.estimator:
            raise ConfigError(f"mask.areas={','.join(cfg.mask.areas)} needs 68 landmarks: set "
                              f"landmark.model or landmark.estimator")
        return {"landmark.estimator": cfg.landmark.estimator}
    return {}
