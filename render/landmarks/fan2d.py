"""2dfan4: 68 landmarks and a score from a 256-px crop around the face's box.

The crop (FaceFusion's ``detect_with_2dfan4``): scale = 195 / the box's longer side, translated so
the box's centre is the crop's centre, then turned about the centre by the face's angle (snapped
to quarter turns) so the face is upright; the crop goes through an RGB→Lab→RGB round trip on the
BGR pixels (CLAHE on L when the crop is dark) and is fed as BGR x / 255, NCHW. Outputs:
landmarks (1, 68, ≥2) on a 64-px grid and heatmaps (1, 68, 64, 64); the score is the mean of
the heatmaps' maxima mapped 0..0.9 → 0..1.
"""
from __future__ import annotations

import cv2
import numpy as np

from ..faces.align import invert, transform_points
from ..faces.types import Face
from .model import LandmarkModel
from .points import quarter_angle

SIZE = 256
GRID = 64
BOX_SCALE = 195.0
FULL_SCORE = 0.9         # the mean heatmap maximum that scores 1
DARK = 30                # mean L below which the crop's contrast is raised


def crop_matrices(face: Face) -> tuple[np.ndarray, np.ndarray]:
    """(frame → unturned crop, unturned crop → crop): scale and translate, then the turn."""
    x1, y1, x2, y2 = (float(v) for v in face.box)
    scale = BOX_SCALE / max(x2 - x1, y2 - y1, 1.0)
    tx, ty = (SIZE - (x1 + x2) * scale) * 0.5, (SIZE - (y1 + y2) * scale) * 0.5
    affine = np.array([[scale, 0.0, tx], [0.0, scale, ty]], np.float64)
    # the angle of the eye line: on a face, parallel to the 68 set's 0 → 16 that FaceFusion reads
    # from its 5-point estimate, and the same once snapped to a quarter turn
    angle = quarter_angle(face.kps[0], face.kps[1])
    turn = cv2.getRotationMatrix2D((SIZE / 2, SIZE / 2), angle, 1.0)
    return affine, turn


def raise_contrast(crop: np.ndarray) -> np.ndarray:
    """FaceFusion's ``conditional_optimize_contrast``: the BGR crop through cv2's RGB→Lab and back
    (lossy, always), with CLAHE (clip 2) on L when its mean is below 30."""
    lab = cv2.cvtColor(crop, cv2.COLOR_RGB2Lab)
    if np.mean(lab[:, :, 0]) < DARK:
        lab[:, :, 0] = cv2.createCLAHE(clipLimit=2).apply(lab[:, :, 0])
    return cv2.cvtColor(lab, cv2.COLOR_Lab2RGB)


class Fan2dLandmarker(LandmarkModel):

    def crop(self, frame: np.ndarray, face: Face) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The model's input crop (256², BGR uint8) and its two matrices."""
        affine, turn = crop_matrices(face)
        crop = cv2.warpAffine(frame, affine, (SIZE, SIZE), flags=cv2.INTER_LINEAR,
                              borderMode=cv2.BORDER_CONSTANT)
        crop = cv2.warpAffine(crop, turn, (SIZE, SIZE), flags=cv2.INTER_LINEAR)
        return raise_contrast(crop), affine, turn

    def detect(self, frame: np.ndarray, face: Face) -> tuple[np.ndarray, float]:
        """(68, 2) float32 frame points and the score in 0..1."""
        crop, affine, turn = self.crop(frame, face)
        blob = crop.transpose(2, 0, 1)[None].astype(np.float32) / np.float32(255.0)
        name = self.lazy.session.get_inputs()[0].name
        landmarks, heatmaps = self.lazy.run({name: blob})[:2]
        points = np.asarray(landmarks, np.float32)[0, :, :2] * (SIZE / GRID)
        points = transform_points(points, invert(turn.astype(np.float32)))
        points = transform_points(points, invert(affine.astype(np.float32)))
        peak = float(np.mean(np.amax(np.asarray(heatmaps, np.float32), axis=(2, 3))))
        score = float(np.interp(peak, [0.0, FULL_SCORE], [0.0, 1.0]))
        return points.astype(np.float32), score
