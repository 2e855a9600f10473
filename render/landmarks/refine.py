"""The chain's first step when landmarks are on: each selected face gets its 68 points, and the
landmarker's 5 points replace the detector's where its score is above ``landmark.score``
(strictly, as FaceFusion's ``5/68`` set), so every crop of the chain is placed by them."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

import numpy as np

from ..faces.types import Face
from ..model_handle import ModelEntry, ProcessorModel
from .registry import LANDMARKS
from .estimate import Landmarks68From5
from .fan2d import Fan2dLandmarker
from .points import five_from_68


class FaceLandmarks:
    """``landmarker`` (68 points from the frame) or, without one, ``estimator`` (68 from 5)."""

    def __init__(self, landmarker: Fan2dLandmarker | None, estimator: Landmarks68From5 | None,
                 score: float) -> None:
        assert landmarker is not None or estimator is not None
        self.landmarker = landmarker
        self.estimator = estimator
        self.score = score

    @property
    def models(self) -> list[Any]:
        return [m for m in (self.landmarker, self.estimator) if m is not None]

    def face(self, frame: np.ndarray, face: Face) -> Face:
        """``face`` with its 68 points, and the landmarker's 5 points if it scored high enough."""
        if self.landmarker is not None:
            points, score = self.landmarker.detect(frame, face)
            kps = five_from_68(points) if score > self.score else face.kps
            return dataclasses.replace(face, kps=kps, landmarks=points)
        assert self.estimator is not None
        return dataclasses.replace(face, landmarks=self.estimator.estimate(face.kps))

    def __call__(self, frames: list[np.ndarray], faces: list[tuple[int, Face]]
                 ) -> list[tuple[int, Face]]:
        return [(i, self.face(frames[i], face)) for i, face in faces]


def load_landmarks(named: Mapping[str, str], score: float,
                   entry_for: Callable[[str, str, frozenset[str]], ModelEntry],
                   model_for: Callable[[ModelEntry], ProcessorModel]) -> FaceLandmarks | None:
    """The landmark step of ``named`` (key → manifest name: ``landmark.model``, or
    ``landmark.estimator`` for ``mask.areas``), or None; ``score``: ``landmark.score``;
    ``entry_for`` and ``model_for`` as in ``masks.build.load_masks``."""
    found: dict[str, Any] = {}
    for key, name in named.items():
        entry = entry_for(key, name, LANDMARKS.keys[key])
        found[key] = LANDMARKS.driver(entry.contract)(LANDMARKS.roles[key], model_for(entry))
    if not found:
        return None
    return FaceLandmarks(found.get("landmark.model"), found.get("landmark.estimator"), score)
