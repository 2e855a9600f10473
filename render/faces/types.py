"""The face record every stage passes along."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Face:
    """One detected face in frame pixel coordinates."""

    box: np.ndarray      # (4,) float32 x1, y1, x2, y2
    kps: np.ndarray      # (5, 2) float32: left eye, right eye, nose tip, left and right mouth corners
    score: float
    #: (68, 2) float32 landmarks (the landmarker's, else estimated from the 5 points) where a mask
    #: or the alignment asks for them (``render.landmarks``), else None
    landmarks: np.ndarray | None = None

    @property
    def area(self) -> float:
        x1, y1, x2, y2 = self.box
        return float(max(0.0, x2 - x1) * max(0.0, y2 - y1))


def scale_face(face: Face, sx: float, sy: float) -> Face:
    """``face`` in a frame resized by ``sx`` × ``sy``."""
    xy = np.array([sx, sy], np.float32)
    return dataclasses.replace(
        face, box=(face.box.reshape(2, 2) * xy).reshape(4), kps=face.kps * xy,
        landmarks=face.landmarks * xy if face.landmarks is not None else None)
