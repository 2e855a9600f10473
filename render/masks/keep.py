"""The keep mask (``mask.keep=mouth``): where a swapper's result is not pasted, so the target's
own mouth — lips, teeth, tongue — stays and speech looks natural (Deep-Live-Cam's mouth mask).

Measured on the target's crop, before the swap: it is the target's mouth that is kept. The area
is the face parser's mouth and lip classes when ``mask.parser`` is on, else the convex hull of
the 68 landmarks' mouth points (48–67). It is grown by :data:`GROW` of the crop side (the lips'
edge, the landmarks' slack) and the weight ramps from 0 to 1 (a smoothstep of the distance) over
:data:`FEATHER` of the side beyond that: exactly 0 inside, so those frame pixels keep the
target's bytes, and 1 from ``(GROW + FEATHER) · side`` out. Both are shares of the side, so the
area covers the same part of the face at every crop size (pixel boost included).
"""
from __future__ import annotations

from typing import Sequence

import cv2
import numpy as np

from ..errors import ModelError
from ..faces.align import transform_points
from ..faces.types import Face
from .area import AREA_POINTS
from .model import resize_all
from .region import RegionMask, region_ids

#: the kept area grows by this share of the crop side (3.2 px at 128, 12.8 px at 512)
GROW = 0.025
#: the weight ramps 0 → 1 over this share of the side outside the grown area
FEATHER = 0.05
#: keep area → the parser's regions (mouth 11: inside the lips; lips 12 + 13)
PARSER_REGIONS: dict[str, tuple[str, ...]] = {"mouth": ("mouth", "lips")}


def keep_weights(area: np.ndarray) -> np.ndarray:
    """(S, S) bool ``area`` → float32 weights: 0 within ``GROW · S`` of it, a smoothstep up to 1
    over the next ``FEATHER · S``; 1 everywhere when the area is empty."""
    side = area.shape[0]
    if not area.any():
        return np.ones(area.shape, np.float32)
    # every pixel's Euclidean distance to the nearest pixel of the area (0 on it)
    dist = cv2.distanceTransform((~area).astype(np.uint8), cv2.DIST_L2, cv2.DIST_MASK_PRECISE)
    t = np.clip((dist - GROW * side) / (FEATHER * side), 0.0, 1.0)
    return (t * t * (3.0 - 2.0 * t)).astype(np.float32)


def landmark_area(landmarks: np.ndarray, matrix: np.ndarray, areas: Sequence[str],
                  side: int) -> np.ndarray:
    """(side, side) bool: each area's convex hull of the frame's 68 ``landmarks`` in the crop
    ``matrix`` maps to, drawn with sub-pixel corners."""
    out = np.zeros((side, side), np.uint8)
    points = transform_points(landmarks, matrix)
    for name in areas:
        hull = cv2.convexHull(points[list(AREA_POINTS[name])].astype(np.float32))
        cv2.fillConvexPoly(out, np.round(hull * 16.0).astype(np.int32), 1, shift=4)
    return out.astype(bool)


class KeepMask:
    """A :class:`render.faces.mask.PasteMask`: 1 − the soft areas ``mask.keep`` names, on the
    crops before the swap; ``parser``: the region mask's parser (``mask.parser``), whose classes
    then give the areas instead of the landmarks."""

    after_swap = False

    def __init__(self, areas: Sequence[str], parser: RegionMask | None = None) -> None:
        self.areas = tuple(areas)
        self.parser = parser
        self.ids = region_ids([r for a in self.areas for r in PARSER_REGIONS[a]])

    def __call__(self, crops: np.ndarray, faces: Sequence[Face],
                 matrices: Sequence[np.ndarray]) -> np.ndarray:
        return np.stack([keep_weights(a) for a in self.kept(crops, faces, matrices)])

    def kept(self, crops: np.ndarray, faces: Sequence[Face],
             matrices: Sequence[np.ndarray]) -> np.ndarray:
        """(N, S, S) bool: the areas to keep, before growing and feathering."""
        side = crops.shape[1]
        if self.parser is not None:
            chosen = np.isin(self.parser.classes(crops), self.ids).astype(np.float32)
            return resize_all(chosen, side) >= 0.5
        if any(face.landmarks is None for face in faces):
            raise ModelError("mask.keep needs the faces' 68 landmarks: none were estimated")
        return np.stack([landmark_area(face.landmarks, m, self.areas, side)
                         for face, m in zip(faces, matrices)])
