"""Point sets of the 68-point (iBUG) layout: the 5 alignment points they give, and the face's
angle snapped to quarter turns."""
from __future__ import annotations

import numpy as np


def five_from_68(points: np.ndarray) -> np.ndarray:
    """(5, 2) float32: the mean of the image-left eye (36–41), of the other eye (42–47), the nose
    tip (30) and the mouth corners (48, 54) — the detector's order."""
    p = np.asarray(points, np.float32).reshape(68, 2)
    return np.stack([p[36:42].mean(axis=0), p[42:48].mean(axis=0), p[30], p[48], p[54]]
                    ).astype(np.float32)


def quarter_angle(start: np.ndarray, end: np.ndarray) -> int:
    """The direction from ``start`` to ``end`` in degrees (image axes: y down), snapped to the
    nearest of 0, 90, 180, 270."""
    dx, dy = (np.asarray(end, np.float64) - np.asarray(start, np.float64)).reshape(2)
    theta = np.degrees(np.arctan2(dy, dx)) % 360.0
    quarters = np.array([0.0, 90.0, 180.0, 270.0, 360.0])
    return int(quarters[np.argmin(np.abs(quarters - theta))]) % 360   # a tie takes the smaller
