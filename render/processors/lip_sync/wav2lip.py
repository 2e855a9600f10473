"""Wav2Lip as FaceFusion's lip syncer drives it (3.8.1 ``lip_syncer/core.py``), per face:

1. the box of the 68 landmarks in the 512-px ffhq crop (the stage gives them in crop pixels);
   the crop warped onto 96 × 96 by the affine map of the box's corners (x1, y1) → (0, 0),
   (x2, y1) → (96, 0), (x1, y2) → (0, 96): non-uniform, black outside the crop;
2. the model's ``target`` (1, 6, 96, 96) float32 /255, BGR: that crop with rows 48..95 set to 0,
   then the crop itself; ``source`` (1, 1, 80, 16): the frame's log-mel slice × 2·weight;
3. its output (1, 3, 96, 96) in 0..1, BGR, ×255 truncated, warped back onto the 512 crop by the
   box map's inverse (edge pixels replicated outside it);
4. the paste mask: the lower-face area of the 68 landmarks (jaw 3..13 and the nose's base),
   filled and softened as FaceFusion's area mask, returned as the fourth channel
   (``own_mask``), min-combined with the step's box and occlusion masks.
"""
from __future__ import annotations

import cv2
import numpy as np

from ...masks.area import AREA_POINTS
from ...masks.model import soften
from .syncer import LipSyncer, check_inputs

SIDE = 96
CROP = 512


def box_matrix(landmarks: np.ndarray, side: int = SIDE) -> np.ndarray:
    """FaceFusion's ``warp_face_by_bounding_box`` map, float64 2×3: the 68 points' box (its
    corners in float32) onto side × side — the affine map of (x1, y1), (x2, y1), (x1, y2) onto
    (0, 0), (side, 0), (0, side), a scale per axis and a shift (not a face's similarity fit)."""
    (x1, y1), (x2, y2) = (np.min(landmarks, axis=0).astype(np.float32),
                          np.max(landmarks, axis=0).astype(np.float32))
    sx, sy = side / (float(x2) - float(x1)), side / (float(y2) - float(y1))
    return np.array([[sx, 0.0, -float(x1) * sx], [0.0, sy, -float(y1) * sy]])


def model_input(mouth: np.ndarray) -> np.ndarray:
    """(96, 96, 3) BGR uint8 → (1, 6, 96, 96) float32: the lower half blacked out, then whole."""
    masked = mouth.copy()
    masked[mouth.shape[0] // 2:] = 0
    both = np.concatenate([masked, mouth], axis=2)[None]
    return both.transpose(0, 3, 1, 2).astype(np.float32) / 255.0


def lower_face_mask(landmarks: np.ndarray, side: int = CROP) -> np.ndarray:
    """(side, side) float32: FaceFusion's area mask of ``lower-face`` for crop-pixel points."""
    mask = np.zeros((side, side), np.float32)
    hull = cv2.convexHull(landmarks[list(AREA_POINTS["lower-face"])].astype(np.int32))
    cv2.fillConvexPoly(mask, hull, 1.0)
    return soften(mask)


class Wav2LipSyncer(LipSyncer):
    own_mask = True
    needs_landmarks = True
    landmarks_in_crop = True

    def check_graph(self) -> None:
        check_inputs(self.lazy.session, self.model.entry.name, "lip-sync-wav2lip",
                     {"source": [1, 1, 80, 16], "target": [1, 6, SIDE, SIDE]})

    def sync(self, crops: np.ndarray, mels: np.ndarray, *asked: np.ndarray) -> np.ndarray:
        """(N, 512, 512, 3) BGR uint8, (N, 80, 16) log-mel, (N, 68, 2) crop points →
        (N, 512, 512, 4) float32: the new BGR and the lower-face paste mask."""
        (landmarks,) = asked
        out = np.empty((*crops.shape[:3], 4), np.float32)
        for k, (crop, mel, points) in enumerate(zip(crops, mels, landmarks)):
            matrix = box_matrix(points)
            mouth = cv2.warpAffine(crop, matrix, (SIDE, SIDE), flags=cv2.INTER_LINEAR)
            source = (mel * self.weight * 2.0)[None, None]
            drawn = self.lazy.run({"source": source, "target": model_input(mouth)})[0]
            face = (np.asarray(drawn[0], np.float32).transpose(1, 2, 0).clip(0, 1) * 255
                    ).astype(np.uint8)
            out[k, ..., :3] = cv2.warpAffine(face, cv2.invertAffineTransform(matrix),
                                             (CROP, CROP), borderMode=cv2.BORDER_REPLICATE)
            out[k, ..., 3] = lower_face_mask(points)
        return out
