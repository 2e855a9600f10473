"""Following faces between detector runs (``detect.every`` > 1) by optical flow."""
from __future__ import annotations

import cv2
import numpy as np

from . import align
from .types import Face


class FaceTracker:
    """Carries the last detections along with the image between detector runs.

    Corner features inside and around each face box are followed with pyramidal Lucas-Kanade
    (kept only where tracking back lands within a pixel of the start); a robust similarity
    transform of those points moves the face's box and keypoints. A face that
    cannot be followed (too few points) is reported as lost, and the caller detects again.
    """

    MIN_POINTS = 6

    def __init__(self) -> None:
        self._gray: np.ndarray | None = None
        self._faces: list[Face] = []

    def reset(self, frame: np.ndarray, faces: list[Face]) -> None:
        self._gray = cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY)
        self._faces = faces

    def _features(self, face: Face) -> np.ndarray | None:
        assert self._gray is not None
        h, w = self._gray.shape
        x1, y1, x2, y2 = face.box
        mx, my = 0.15 * (x2 - x1), 0.15 * (y2 - y1)
        mask = np.zeros((h, w), np.uint8)
        mask[max(0, int(y1 - my)):min(h, int(y2 + my)), max(0, int(x1 - mx)):min(w, int(x2 + mx))] = 255
        pts = cv2.goodFeaturesToTrack(self._gray, maxCorners=64, qualityLevel=0.01,
                                      minDistance=max(2.0, 0.04 * float(x2 - x1)), mask=mask)
        return pts

    def track(self, frame: np.ndarray) -> list[Face] | None:
        """The faces moved to ``frame``, or None when any of them was lost."""
        gray = cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY)
        faces = []
        for face in self._faces:
            pts = self._features(face)
            if pts is None or len(pts) < self.MIN_POINTS:
                return None
            lk = {"winSize": (21, 21), "maxLevel": 3}
            new, status, _ = cv2.calcOpticalFlowPyrLK(self._gray, gray, pts, None, **lk)
            back, status_back, _ = cv2.calcOpticalFlowPyrLK(gray, self._gray, new, None, **lk)
            fb_error = np.linalg.norm((back - pts).reshape(-1, 2), axis=1)
            good = (status.reshape(-1) == 1) & (status_back.reshape(-1) == 1) & (fb_error < 1.0)
            if good.sum() < self.MIN_POINTS:
                return None
            m, _ = cv2.estimateAffinePartial2D(pts[good].reshape(-1, 2), new[good].reshape(-1, 2),
                                               method=cv2.RANSAC, ransacReprojThreshold=2.0)
            if m is None:
                return None
            kps = align.transform_points(face.kps, m)
            corners = align.transform_points(face.box.reshape(2, 2), m)
            faces.append(Face(box=corners.reshape(4).astype(np.float32),
                              kps=kps.astype(np.float32), score=face.score))
        self._gray, self._faces = gray, faces
        return faces
