"""Manifest contract → the class that drives a landmark model, imported on first use; the keys
that name landmark models and the contracts each takes.

Light on purpose: the manifest asks it which contracts are landmark models without importing
ONNX Runtime or the models' classes.
"""
from __future__ import annotations

from ..model_handle import load_class

#: contract → "module:Class"
BUILT_IN: dict[str, str] = {
    "landmarker-2dfan4": "render.landmarks.fan2d:Fan2dLandmarker",
    "landmarker-fan-68-5": "render.landmarks.estimate:Landmarks68From5",
}

#: the key naming a landmark model → the contracts its model may have (a landmarker reads the
#: frame, an estimator only the 5 points), and the report's role of each
KEY_CONTRACTS: dict[str, frozenset[str]] = {
    "landmark.model": frozenset({"landmarker-2dfan4"}),
    "landmark.estimator": frozenset({"landmarker-fan-68-5"}),
}
ROLES = {"landmark.model": "landmark", "landmark.estimator": "landmark-estimate"}


def contracts() -> frozenset[str]:
    return frozenset(BUILT_IN)


def landmark_class(contract: str) -> type:
    """The class for ``contract`` (one of :func:`contracts`)."""
    return load_class(BUILT_IN[contract])
