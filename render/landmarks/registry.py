"""The landmark models: the keys that name them (a landmarker reads the frame, an estimator only
the 5 points), the contracts each takes and the class driving each contract, imported on first
use.

Light on purpose: the manifest asks it which contracts are landmark models without importing
ONNX Runtime or the models' classes.
"""
from __future__ import annotations

from ..model_handle import PartRegistry

LANDMARKS = PartRegistry(
    drivers={"landmarker-2dfan4": "render.landmarks.fan2d:Fan2dLandmarker",
             "landmarker-fan-68-5": "render.landmarks.estimate:Landmarks68From5"},
    keys={"landmark.model": frozenset({"landmarker-2dfan4"}),
          "landmark.estimator": frozenset({"landmarker-fan-68-5"})},
    roles={"landmark.model": "landmark", "landmark.estimator": "landmark-estimate"},
)
