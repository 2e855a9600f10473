"""FaceFusion's colour match of a face crop (``vision.py``; §2.5 of
``shared/docs/facefusion-processors.md``), shared by the processors that apply it: the deep
swapper's conditional one (:func:`conditional_match`) and StyleGANEX's unconditional one in the
age modifier (:func:`match_frame_color`). The result keeps its detail but takes the crop's
colour at coarse scales.

- ``match_frame_color(source, target)``: for sides s = 16 + k·(S − 16)/3, k = 0, 1, 2 (each
  rounded to an even number, Python's round, as FaceFusion's ``normalize_resolution``),
  ``source`` becomes ``target + cubic(area(source, s) − area(target, s))``, clipped and truncated
  to uint8, the next pass starting from that; then one pass at full size. Only the first pass
  sees the crop; the later ones start from the last corrected result, whose difference to the
  target is already smooth, so the net effect is the target moved by the crop's difference to it
  as 16 × 16 blocks see it. ``source`` may have any side;
- the conditional factor f = (correlation of the two crops' 2-D HSV histograms, 50 hue × 60
  saturation bins, + 1) / 2, and the result ``addWeighted(swapped, 1 − f, matched, f)`` (uint8,
  rounded).
"""
from __future__ import annotations

import cv2
import numpy as np


def _even(side: float) -> int:
    return int(round(side / 2) * 2)


def _equalize(source: np.ndarray, target: np.ndarray, side: int) -> np.ndarray:
    """``target`` plus the difference of the two at ``side`` px, resized back (cubic)."""
    size = (side, side)
    diff = cv2.resize(source, size, interpolation=cv2.INTER_AREA).astype(np.float32) - \
        cv2.resize(target, size, interpolation=cv2.INTER_AREA).astype(np.float32)
    diff = cv2.resize(diff, target.shape[:2][::-1], interpolation=cv2.INTER_CUBIC)
    return np.clip(target + diff, 0, 255).astype(np.uint8)


def match_frame_color(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    """``target`` (square BGR uint8) with the colour of ``source`` (BGR uint8, any side)."""
    for side in np.linspace(16, target.shape[0], 3, endpoint=False):
        source = _equalize(source, target, _even(float(side)))
    return _equalize(source, target, target.shape[0])


def histogram_agreement(source: np.ndarray, target: np.ndarray) -> float:
    """0..1: the correlation of the two crops' hue-saturation histograms, mapped from −1..1."""
    def hist(crop: np.ndarray) -> np.ndarray:
        return cv2.calcHist([cv2.cvtColor(crop, cv2.COLOR_BGR2HSV)], [0, 1], None, [50, 60],
                            [0, 180, 0, 256])
    corr = cv2.compareHist(hist(source), hist(target), cv2.HISTCMP_CORREL)
    return float(np.interp(corr, [-1.0, 1.0], [0.0, 1.0]))


def conditional_match(raw: np.ndarray, swapped: np.ndarray) -> np.ndarray:
    """The swapped crop moved toward the raw crop's colours as far as their histograms agree."""
    f = histogram_agreement(raw, swapped)
    return cv2.addWeighted(swapped, 1.0 - f, match_frame_color(raw, swapped), f, 0)
