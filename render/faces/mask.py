"""Paste-back masks in crop space: a hard box and a feathered box, both with padding.

A mask is a function of the aligned crops, their faces and the crops' matrices (frame → crop)
giving weights in 0..1, one (size, size) map shared by every crop or one per crop; the face stage
combines a step's masks (the per-pixel minimum) and pastes each crop back through it. The model
and landmark masks (occlusion, region, area) are in :mod:`render.masks`.
"""
from __future__ import annotations

from typing import Protocol, Sequence

import cv2
import numpy as np

from .types import Face


class PasteMask(Protocol):
    def __call__(self, crops: np.ndarray, faces: Sequence[Face],
                 matrices: Sequence[np.ndarray]) -> np.ndarray:
        """float32 (size, size) for every crop, or (N, size, size) one per crop."""


class StaticMask:
    """The same weights for every crop."""

    def __init__(self, weights: np.ndarray) -> None:
        self.weights = weights

    def __call__(self, crops: np.ndarray, faces: Sequence[Face],
                 matrices: Sequence[np.ndarray]) -> np.ndarray:
        return self.weights


def combine(masks: Sequence[PasteMask], crops: np.ndarray, faces: Sequence[Face],
            matrices: Sequence[np.ndarray]) -> np.ndarray:
    """The per-pixel minimum of ``masks`` (a single mask's weights as they are)."""
    weights = [m(crops, faces, matrices) for m in masks]
    out = weights[0]
    for w in weights[1:]:
        out = np.minimum(out, w)
    return out


#: per-side padding in percent: top, right, bottom, left (FaceFusion's order)
Sides = tuple[float, float, float, float]
NO_SIDES: Sides = (0.0, 0.0, 0.0, 0.0)


def box_mask(size: int, padding: float = 0.0, feather: float = 0.0,
             sides: Sides = NO_SIDES) -> np.ndarray:
    """float32 (size, size) in 0..1, FaceFusion's box mask.

    ``padding`` cuts that share of the side from each edge; ``sides`` (top, right, bottom, left,
    in percent of the side, truncated to whole pixels as FaceFusion does) cut more from one edge
    where larger. ``feather`` > 0 softens the edges with a Gaussian: its amount is that share of
    half the side, truncated to whole pixels, half of it cut from each edge and a quarter of it
    the sigma (the blurred edge reaches a few hundredths at the crop's border, as FaceFusion's).
    Without feather the outermost pixels are cut, so the crop's border never shows.
    """
    mask = np.zeros((size, size), np.float32)
    pad = int(round(size * padding))
    blur = int(size * feather * 0.5)
    inner = max(pad, blur // 2, 1)
    top, right, bottom, left = (max(inner, int(size * s / 100.0)) for s in sides)
    mask[top:max(top, size - bottom), left:max(left, size - right)] = 1.0
    if blur > 0:
        mask = cv2.GaussianBlur(mask, (0, 0), blur * 0.25)
    return mask


def make_mask(kind: str, size: int, padding: float, blur: float,
              sides: Sides = NO_SIDES) -> np.ndarray:
    if kind == "box":
        return box_mask(size, padding, 0.0, sides)
    if kind == "feather":
        return box_mask(size, padding, blur, sides)
    raise ValueError(f"unknown mask type {kind!r}")


def paste_masks(kind: str, size: int, padding: float, blur: float,
                sides: Sides = NO_SIDES) -> list[PasteMask]:
    """The box mask ``mask.*`` asks for, for crops of ``size``."""
    return [StaticMask(make_mask(kind, size, padding, blur, sides))]
