"""FaceFusion's ``match_frame_color`` (``vision.py``), which its StyleGANEX age modifier applies
to every result: the result keeps its detail but takes the crop's colour at the coarsest scale.

Three passes at sides 16, 352 and 688 (``linspace(16, side, 3, endpoint=False)``, rounded to even
as FaceFusion's ``normalize_resolution`` does), then one at full size, each::

    corrected = result + cubic_up(area(corrected, s) − area(result, s))     (clipped, truncated)

starting from the crop. Only the first pass sees the crop; the later ones start from the last
corrected result, whose difference to the result is already smooth, so the net effect is the
result moved by the crop's difference to it as 16 × 16 blocks see it.
"""
from __future__ import annotations

import cv2
import numpy as np


def _even(size: float) -> int:
    """FaceFusion's ``normalize_resolution`` on one side: Python's round of half, times two."""
    return round(size / 2) * 2


def _equalise(source: np.ndarray, result: np.ndarray, side: int) -> np.ndarray:
    """``result`` plus the difference of ``source`` to it at ``side``, back at full size."""
    h, w = result.shape[:2]
    src = cv2.resize(source, (side, side), interpolation=cv2.INTER_AREA).astype(np.float32)
    res = cv2.resize(result, (side, side), interpolation=cv2.INTER_AREA).astype(np.float32)
    difference = cv2.resize(src - res, (w, h), interpolation=cv2.INTER_CUBIC)
    return np.clip(result + difference, 0, 255).astype(np.uint8)


def match_frame_colour(crop: np.ndarray, result: np.ndarray) -> np.ndarray:
    """``result`` (square BGR uint8) with the colour of ``crop`` (BGR uint8, any side)."""
    side = result.shape[0]
    corrected = crop
    for size in np.linspace(16, side, 3, endpoint=False):
        corrected = _equalise(corrected, result, _even(float(size)))
    return _equalise(corrected, result, side)
