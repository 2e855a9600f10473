"""The area mask: the convex hull of chosen areas of the face's 68 landmarks (upper face, lower
face, mouth), in crop space. Computed on the swapper's result; the landmarks come from
``render.landmarks`` (the landmarker's, else estimated from the 5 points)."""
from __future__ import annotations

from typing import Sequence

import cv2
import numpy as np

from ..errors import ModelError
from ..faces.align import transform_points
from ..faces.types import Face
from .model import soften

#: area → indices of the 68 points (FaceFusion's sets; 68-point iBUG order)
AREA_POINTS: dict[str, tuple[int, ...]] = {
    "upper-face": (0, 1, 2, 31, 32, 33, 34, 35, 14, 15, 16, 26, 25, 24, 23, 22, 21, 20, 19, 18,
                   17),
    "lower-face": (3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 35, 34, 33, 32, 31),
    "mouth": tuple(range(48, 68)),
}


def area_polygon(landmarks: np.ndarray, matrix: np.ndarray, areas: Sequence[str]) -> np.ndarray:
    """The hull's corners (int32, crop pixels) of ``areas`` of the frame's 68 ``landmarks``."""
    index = [i for a in areas for i in AREA_POINTS[a]]
    points = transform_points(landmarks, matrix)[index]
    return cv2.convexHull(points.astype(np.int32))


class AreaMask:
    """A :class:`render.faces.mask.PasteMask` over the areas ``mask.areas`` names."""

    after_swap = True

    def __init__(self, areas: Sequence[str]) -> None:
        self.areas = tuple(areas)

    def __call__(self, crops: np.ndarray, faces: Sequence[Face],
                 matrices: Sequence[np.ndarray]) -> np.ndarray:
        side = crops.shape[1]
        out = np.zeros((len(crops), side, side), np.float32)
        for k, (face, matrix) in enumerate(zip(faces, matrices)):
            if face.landmarks is None:
                raise ModelError("mask.areas needs the faces' 68 landmarks: none were estimated")
            cv2.fillConvexPoly(out[k], area_polygon(face.landmarks, matrix, self.areas), 1.0)
            out[k] = soften(out[k])
        return out
