"""The review's measurements of one face: its mean colour in CIE Lab, the colour shift between
two of them (ΔE), and how far a face's key points moved between two frames (in face widths).

The colour is taken from a small crop placed like the embedder's (``arcface_112_v2``), over its
middle (``render.faces.colour.inner``), where any crop shows face and not background."""
from __future__ import annotations

import cv2
import numpy as np

from ..faces import align
from ..faces.colour import inner
from ..faces.types import Face

#: side of the crop the colour is taken from: enough pixels for a mean, cheap to warp
COLOUR_CROP = 32
COLOUR_TEMPLATE = "arcface_112_v2"


def lab_mean(frame: np.ndarray, face: Face) -> np.ndarray:
    """The mean colour (L*, a*, b*) of ``face``'s middle in a BGR(A) uint8 ``frame``."""
    matrix = align.estimate(face.kps, COLOUR_TEMPLATE, COLOUR_CROP)
    crop = align.warp(frame, matrix, COLOUR_CROP)
    rows, cols = inner(COLOUR_CROP)
    middle = np.ascontiguousarray(crop[rows, cols, :3]).astype(np.float32) / 255.0
    lab = cv2.cvtColor(middle, cv2.COLOR_BGR2LAB)
    return lab.reshape(-1, 3).mean(axis=0).astype(np.float64)


def delta_e(a: np.ndarray, b: np.ndarray) -> float:
    """CIE76 ΔE between two Lab colours (2.3 is about the smallest difference one sees)."""
    return float(np.linalg.norm(np.asarray(a, np.float64) - np.asarray(b, np.float64)))


def key_point_jump(before: np.ndarray, after: np.ndarray, box: np.ndarray) -> float:
    """Mean movement of the five key points from ``before`` to ``after``, in widths of ``box``
    (the earlier face's): how far the crop placed by them jumped."""
    width = max(float(box[2] - box[0]), 1e-6)
    moved = np.linalg.norm(np.asarray(after, np.float64) - np.asarray(before, np.float64), axis=1)
    return float(moved.mean()) / width
