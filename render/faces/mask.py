"""Paste-back masks in crop space: a hard box and a feathered box, both with padding."""
from __future__ import annotations

import cv2
import numpy as np


def box_mask(size: int, padding: float = 0.0, feather: float = 0.0) -> np.ndarray:
    """float32 (size, size) in 0..1.

    ``padding`` cuts that share of the side from each edge. ``feather`` > 0 softens the edges with
    a Gaussian whose reach is that share of the side; the mask is zero on the crop border either way,
    so nothing outside the crop can change.
    """
    mask = np.zeros((size, size), np.float32)
    pad = int(round(size * padding))
    blur = int(round(size * feather * 0.5))
    inner = max(pad, blur // 2, 1)
    mask[inner:size - inner, inner:size - inner] = 1.0
    if blur > 0:
        sigma = max(blur * 0.25, 0.5)
        mask = cv2.GaussianBlur(mask, (0, 0), sigma)
        mask[:1, :] = mask[-1:, :] = 0.0
        mask[:, :1] = mask[:, -1:] = 0.0
    return mask


def make_mask(kind: str, size: int, padding: float, blur: float) -> np.ndarray:
    if kind == "box":
        return box_mask(size, padding, 0.0)
    if kind == "feather":
        return box_mask(size, padding, blur)
    raise ValueError(f"unknown mask type {kind!r}")
