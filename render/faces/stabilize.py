"""Stabilised alignment: a face track's key points through a centred local line and a One-Euro
filter.

The centred local line: each frame's points are replaced by the straight line fitted through the
track's points of the frames up to ``window`` before and after it (the face stage holds frames
back for its look-ahead anyway). It takes most of the detector's frame-to-frame noise away and,
being centred, adds no lag to a steady movement; at a sudden stop or start it rounds the corner
symmetrically over the window.

The One-Euro filter (Casiez, Roussel and Vogel, CHI 2012) is a low-pass filter whose cutoff rises
with the speed of what it filters: ``cutoff = min_cutoff + beta * |speed|``. While a face holds
still, the detector's noise of a pixel or two is smoothed hard; while it moves, the cutoff opens
and the points follow with little lag. Time is counted in frames (cutoffs in cycles per frame) and
positions in face widths (the width of the first box the filter saw), so the same parameters
hold for any resolution.

The filter runs on the 5 key points, the box's two corners and the 68 landmarks where the face
has them (the points alignment and the masks use), split into the face's pose and shape
(:class:`PoseFilter`), each part with its own speeds. Its state starts from the first face it is
given: a segment gets the same state whoever renders it, because it is always fed from the same
first frame (the plan's pre-roll).
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from .align import similarity
from .types import Face


def smoothing(cutoff: np.ndarray | float) -> np.ndarray | float:
    """The exponential smoothing factor of a first-order low-pass at ``cutoff`` cycles per frame,
    sampled once per frame."""
    tau = 1.0 / (2.0 * math.pi * np.maximum(cutoff, 1e-9))
    return 1.0 / (1.0 + tau)


def face_points(face: Face) -> np.ndarray:
    """The points stabilisation moves, as one (N, 2) array: the 5 key points, the box's two
    corners and, where the face has them (the landmark step), its 68 landmarks."""
    parts = [face.kps.reshape(-1, 2), face.box.reshape(2, 2)]
    if face.landmarks is not None:
        parts.append(face.landmarks.reshape(-1, 2))
    return np.concatenate(parts).astype(np.float64)


def with_points(face: Face, points: np.ndarray) -> Face:
    """``face`` with the points of :func:`face_points` replaced by ``points``."""
    p = np.asarray(points, np.float32)
    return dataclasses.replace(face, kps=p[:5], box=p[5:7].reshape(4),
                               landmarks=p[7:] if face.landmarks is not None else None)


def local_linear(times: np.ndarray, values: np.ndarray, at: float) -> np.ndarray:
    """The least-squares straight line through ``values`` (one row per time of ``times``)
    evaluated at ``at``: with as many frames after ``at`` as before, the mean of the window, which
    follows a steady movement without lag."""
    t = np.asarray(times, np.float64)
    v = np.asarray(values, np.float64).reshape(len(t), -1)
    if len(t) == 1:
        return v[0].reshape(np.shape(values)[1:])
    dt = t - t.mean()
    mean = v.mean(axis=0)
    slope = (dt[:, None] * (v - mean)).sum(axis=0) / max(float((dt ** 2).sum()), 1e-12)
    return (mean + slope * (at - t.mean())).reshape(np.shape(values)[1:])


class OneEuro:
    """A One-Euro filter over a (N, 2) array of points, one speed per point."""

    def __init__(self, *, min_cutoff: float, beta: float, d_cutoff: float, scale: float) -> None:
        self.min_cutoff, self.beta, self.d_cutoff = min_cutoff, beta, d_cutoff
        self.scale = max(scale, 1e-6)      # positions are filtered in units of this length
        self._x: np.ndarray | None = None  # the last filtered points (scaled)
        self._dx: np.ndarray | None = None  # the filtered speed (scaled, per frame)

    def __call__(self, points: np.ndarray) -> np.ndarray:
        x = np.asarray(points, np.float64) / self.scale
        if self._x is None:
            self._x, self._dx = x, np.zeros_like(x)
            return x * self.scale
        assert self._dx is not None
        raw_speed = x - self._x
        self._dx = self._dx + smoothing(self.d_cutoff) * (raw_speed - self._dx)
        speed = np.linalg.norm(self._dx, axis=1, keepdims=True)
        alpha = smoothing(self.min_cutoff + self.beta * speed)
        self._x = self._x + alpha * (x - self._x)
        return self._x * self.scale


class PoseFilter:
    """A One-Euro filter over a face's points split into its pose and its shape.

    The pose is the similarity (``align.similarity``) that carries the track's first 5 key points
    onto this frame's: its centre, and its scale and angle (as the distance a point half a face
    width out moves). The shape is every point carried back by that pose. Each part has its own
    speeds: while a face crosses the frame its centre moves fast and the filter lets it follow,
    but its scale, angle and shape hardly change and stay smoothed hard. Filtered point by point
    instead, the speed of the move opened the cutoff for all of it, and the detector's noise in
    the points' shape went through as a tremble of the crop's scale and angle, largest at its
    corners."""

    def __init__(self, first: np.ndarray, **params: float) -> None:
        kps = np.asarray(first, np.float64)[:5]
        self.reference = kps - kps.mean(axis=0)
        self.pose = OneEuro(**params)
        self.shape = OneEuro(**params)

    def __call__(self, points: np.ndarray) -> np.ndarray:
        p = np.asarray(points, np.float64)
        m = similarity(self.reference, p[:5])
        a, b = m[0, 0], m[1, 0]
        scale, angle = math.hypot(a, b), math.atan2(b, a)
        half = 0.5 * self.pose.scale
        pose = self.pose(np.array([m[:, 2], [math.log(scale) * half, angle * half]]))
        shape = self.shape((p - m[:, 2]) @ np.linalg.inv(m[:, :2]).T)
        scale, angle = math.exp(pose[1, 0] / half), pose[1, 1] / half
        rot = scale * np.array([[math.cos(angle), -math.sin(angle)],
                                [math.sin(angle), math.cos(angle)]])
        return shape @ rot.T + pose[0]


class FaceFilter:
    """One track's filter: a face in, the face with its points (:func:`face_points`) smoothed
    out. A face with other points than the last (landmarks that came or went) starts the filter
    afresh from itself."""

    def __init__(self, first: Face, *, min_cutoff: float, beta: float, d_cutoff: float) -> None:
        self._params = {"min_cutoff": min_cutoff, "beta": beta, "d_cutoff": d_cutoff,
                        "scale": float(first.box[2] - first.box[0])}
        self._filter = PoseFilter(face_points(first), **self._params)
        self._count = len(face_points(first))

    def __call__(self, face: Face) -> Face:
        points = face_points(face)
        if len(points) != self._count:
            self._filter, self._count = PoseFilter(points, **self._params), len(points)
        return with_points(face, self._filter(points))
