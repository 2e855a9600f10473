"""Colour match (``swap.color_match=lab``): the swapped face's colour statistics moved to the
target face's, so that the face's skin tone matches the neck and hands around it.

Statistics are the mean and spread of each channel in CIE Lab (OpenCV's 8-bit Lab, L scaled
to 0..255) over the face's inner region: the crop's middle, away from the mask's edge, where
both crops show the face. The target's statistics are taken frame by frame in order and
smoothed per face track (an exponential average), so a flicker of light or of the crop's place
does not make the face's colour flicker; the swapped face's are taken from each swap and moved
onto them:

    lab' = (lab − mean_swapped) · (spread_target / spread_swapped) + mean_target

Smoothing state starts empty for every segment and warms up over the segment's pre-roll, so a
segment's colours do not depend on who renders it.
"""
from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from . import align

#: the inner region: the middle of the crop, this share of its side cut from each edge
INNER_MARGIN = 0.25
#: weight of the newest frame's statistics in the smoothed ones
SMOOTHING = 0.2
#: spreads below this (flat colour) are not stretched: the ratio would amplify noise
MIN_SPREAD = 1.0


@dataclass(frozen=True)
class LabStats:
    mean: np.ndarray       # (3,) float64 L, a, b
    spread: np.ndarray     # (3,) float64 standard deviations


def inner(size: int) -> tuple[slice, slice]:
    m = int(round(size * INNER_MARGIN))
    return slice(m, size - m), slice(m, size - m)


def lab_stats(crop: np.ndarray) -> LabStats:
    """Statistics of a BGR uint8 crop's inner region."""
    rows, cols = inner(crop.shape[0])
    lab = cv2.cvtColor(np.ascontiguousarray(crop[rows, cols]), cv2.COLOR_BGR2LAB)
    pixels = lab.reshape(-1, 3).astype(np.float64)
    return LabStats(pixels.mean(axis=0), pixels.std(axis=0))


def transfer(crop: np.ndarray, source: LabStats, target: LabStats) -> np.ndarray:
    """``crop`` (whose statistics are ``source``) with the statistics of ``target``, BGR uint8."""
    lab = cv2.cvtColor(crop, cv2.COLOR_BGR2LAB).astype(np.float32)
    ratio = np.where(source.spread >= MIN_SPREAD,
                     target.spread / np.maximum(source.spread, MIN_SPREAD), 1.0)
    scale = ratio.astype(np.float32)
    shift = (target.mean - source.mean * ratio).astype(np.float32)
    lab = lab * scale + shift
    out = np.clip(np.rint(lab), 0, 255).astype(np.uint8)
    return cv2.cvtColor(out, cv2.COLOR_LAB2BGR)


class SmoothedStats:
    """The target statistics of each track, smoothed frame after frame (in frame order)."""

    def __init__(self, smoothing: float = SMOOTHING) -> None:
        self.smoothing = smoothing
        self._state: dict[object, LabStats] = {}

    def update(self, track: object, stats: LabStats) -> LabStats:
        """Fold this frame's ``stats`` of ``track`` in; the smoothed statistics."""
        old = self._state.get(track)
        if old is not None:
            a = self.smoothing
            stats = LabStats(old.mean * (1 - a) + stats.mean * a,
                             old.spread * (1 - a) + stats.spread * a)
        self._state[track] = stats
        return stats


class ColourMatch:
    """What the face stage runs for a swapper step with ``color_match=lab``: the target's
    smoothed statistics per track, taken in frame order on the step's own crop (its template at
    the model's side), and the transfer of each swapped crop onto them."""

    def __init__(self, template: str, size: int) -> None:
        self.template, self.size = template, size
        self.smoothed = SmoothedStats()

    def target(self, track: object, frame: np.ndarray, kps: np.ndarray) -> LabStats:
        m = align.estimate(kps, self.template, self.size)
        return self.smoothed.update(track, lab_stats(align.warp(frame, m, self.size)))

    @staticmethod
    def apply(crops: np.ndarray, targets: list[LabStats]) -> np.ndarray:
        return np.stack([transfer(c, lab_stats(c), t) for c, t in zip(crops, targets)])
