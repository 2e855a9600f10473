"""fan_68_5: 68 landmarks estimated from the detector's 5 points (no pixels read).

The 5 points are mapped into unit space by the similarity that fits them to the ffhq_512
template at side 1 (FaceFusion's ``estimate_face_landmark_68_5``), fed as ``input`` (1, 5, 2);
the (68, 2) output is mapped back with the inverse.
"""
from __future__ import annotations

import numpy as np

from ..faces import align
from .model import LandmarkModel

TEMPLATE = "ffhq_512"


class Landmarks68From5(LandmarkModel):

    def estimate(self, kps: np.ndarray) -> np.ndarray:
        """(68, 2) float32 frame points from the (5, 2) ``kps``."""
        matrix = align.estimate(kps, TEMPLATE, 1)
        unit = align.transform_points(kps, matrix).reshape(1, 5, 2).astype(np.float32)
        name = self.lazy.session.get_inputs()[0].name
        out = np.asarray(self.lazy.run({name: unit})[0], np.float32).reshape(68, 2)
        return align.transform_points(out, align.invert(matrix)).astype(np.float32)
