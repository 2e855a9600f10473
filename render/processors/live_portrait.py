"""LivePortrait (KwaiVGI, MIT) as FaceFusion 3.8 exports and drives it: the conventions every
processor built on it shares (the face editor; the expression restorer reuses the feature
extractor, the motion extractor and the generator).

The models, by the contract of their manifest entries (FaceFusion's ONNX files, models-3.0.0):

* feature extractor (``live-portrait-feature-extractor``): ``input`` (1, 3, 256, 256) float32
  RGB 0..1 → the appearance feature volume, read as output 0 (LivePortrait's (1, 32, 16, 64, 64));
* motion extractor (``live-portrait-motion-extractor``): the same ``input`` → seven outputs read
  by position, in FaceFusion's order: pitch, yaw, roll (degrees, one value each), scale (one
  value), translation (three), expression and the canonical keypoints (21 × 3 each);
* generator (``live-portrait``, LivePortrait's warping module and SPADE decoder in one graph):
  ``feature_volume``, ``source`` (the keypoints wanted) and ``target`` (the keypoints of the
  appearance crop) → output 0, (1, 3, S, S) RGB 0..1. FaceFusion's names are the reverse of the
  usual driving/source ones; they are fed as FaceFusion feeds them.

FaceFusion never declares the shapes of the scalars: they are read here as one value per call
whatever their rank, and scale and translation are broadcast over the 21 points.

The expression limits are FaceFusion's (``processors/live_portrait.py``): LivePortrait's
expression range over its training data, per point and axis.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import cv2
import numpy as np

from ..model_handle import Session

#: the keypoints: 21 implicit 3-D points
POINTS = 21
#: the side the feature and motion extractors take (half the crop's)
INPUT_SIDE = 256

EXPRESSION_MIN = np.array([[
    [-2.88067125e-02, -8.12731311e-02, -1.70541159e-03],
    [-4.88598682e-02, -3.32196616e-02, -1.67431499e-04],
    [-6.75425082e-02, -4.28681746e-02, -1.98950816e-04],
    [-7.23103955e-02, -3.28503326e-02, -7.31324719e-04],
    [-3.87073644e-02, -6.01546466e-02, -5.50269964e-04],
    [-6.38048723e-02, -2.23840728e-01, -7.13261834e-04],
    [-3.02710701e-02, -3.93195450e-02, -8.24086510e-06],
    [-2.95799859e-02, -5.39318882e-02, -1.74219604e-04],
    [-2.92359516e-02, -1.53050944e-02, -6.30460854e-05],
    [-5.56493877e-03, -2.34344602e-02, -1.26858242e-04],
    [-4.37593013e-02, -2.77768299e-02, -2.70503685e-02],
    [-1.76926646e-02, -1.91676542e-02, -1.15090821e-04],
    [-8.34268332e-03, -3.99775570e-03, -3.27481248e-05],
    [-3.40162888e-02, -2.81868968e-02, -1.96679524e-04],
    [-2.91855410e-02, -3.97511162e-02, -2.81230678e-05],
    [-1.50395725e-02, -2.49494594e-02, -9.42573533e-05],
    [-1.67938769e-02, -2.00953931e-02, -4.00750607e-04],
    [-1.86435618e-02, -2.48535164e-02, -2.74416432e-02],
    [-4.61211195e-03, -1.21660791e-02, -2.93173041e-04],
    [-4.10017073e-02, -7.43824020e-02, -4.42762971e-02],
    [-1.90370996e-02, -3.74363363e-02, -1.34740388e-02]]], np.float32)
EXPRESSION_MAX = np.array([[
    [4.46682945e-02, 7.08772913e-02, 4.08344204e-04],
    [2.14308221e-02, 6.15894832e-02, 4.85319615e-05],
    [3.02363783e-02, 4.45043296e-02, 1.28298725e-05],
    [3.05869691e-02, 3.79812494e-02, 6.57040102e-04],
    [4.45670523e-02, 3.97259220e-02, 7.10966764e-04],
    [9.43699256e-02, 9.85926315e-02, 2.02551950e-04],
    [1.61131397e-02, 2.92906128e-02, 3.44733417e-06],
    [5.23825921e-02, 1.07065082e-01, 6.61510974e-04],
    [2.85718683e-03, 8.32320191e-03, 2.39314613e-04],
    [2.57947259e-02, 1.60935968e-02, 2.41853559e-05],
    [4.90833223e-02, 3.43903080e-02, 3.22353356e-02],
    [1.44766076e-02, 3.39248963e-02, 1.42291479e-04],
    [8.75749043e-04, 6.82212645e-03, 2.76097053e-05],
    [1.86958015e-02, 3.84016186e-02, 7.33085908e-05],
    [2.01714113e-02, 4.90544215e-02, 2.34028921e-05],
    [2.46518422e-02, 3.29151377e-02, 3.48571630e-05],
    [2.22457591e-02, 1.21796541e-02, 1.56396593e-04],
    [1.72109623e-02, 3.01626958e-02, 1.36556877e-02],
    [1.83460284e-02, 1.61141958e-02, 2.87440169e-04],
    [3.57594155e-02, 1.80554688e-01, 2.75554154e-02],
    [2.17450950e-02, 8.66811201e-02, 3.34241726e-02]]], np.float32)

#: (pitch, yaw, roll) limits in degrees (FaceFusion's ``calc_euler_limits``)
ANGLE_LIMITS = ((-30.0, 30.0), (-60.0, 60.0), (-20.0, 20.0))


def limit_expression(expression: np.ndarray) -> np.ndarray:
    """(1, 21, 3) float32 clipped to the range LivePortrait's expressions take."""
    return np.clip(expression, EXPRESSION_MIN, EXPRESSION_MAX)


def limit_angles(original: Sequence[float], wanted: Sequence[float]) -> tuple[float, ...]:
    """``wanted`` (pitch, yaw, roll) clipped to :data:`ANGLE_LIMITS`, each widened on the side
    of the ``original`` angle's sign to take the original in (a head turned past a limit may
    stay as turned, never turn further)."""
    out = []
    for o, w, (low, high) in zip(original, wanted, ANGLE_LIMITS):
        if o < 0:
            low = min(o, low)
        else:
            high = max(o, high)
        out.append(float(min(max(w, low), high)))
    return tuple(out)


def rotation(pitch: float, yaw: float, roll: float) -> np.ndarray:
    """(3, 3) float32: the rotations about x by ``pitch``, y by ``yaw`` and z by ``roll``
    (degrees), applied in that order about the fixed axes — Rz·Ry·Rx, scipy's
    ``from_euler('xyz', ...)`` (FaceFusion's ``create_rotation``); computed in float64."""
    p, y, r = (math.radians(float(a)) for a in (pitch, yaw, roll))
    rx = np.array([[1, 0, 0], [0, math.cos(p), -math.sin(p)], [0, math.sin(p), math.cos(p)]])
    ry = np.array([[math.cos(y), 0, math.sin(y)], [0, 1, 0], [-math.sin(y), 0, math.cos(y)]])
    rz = np.array([[math.cos(r), -math.sin(r), 0], [math.sin(r), math.cos(r), 0], [0, 0, 1]])
    return (rz @ ry @ rx).astype(np.float32)


@dataclass(frozen=True)
class Motion:
    """The motion extractor's answer for one crop."""

    pitch: float
    yaw: float
    roll: float
    scale: np.ndarray            # broadcast over the points: (1, 1, 1) float32
    translation: np.ndarray      # (1, 1, 3) float32
    expression: np.ndarray       # (1, 21, 3) float32
    points: np.ndarray           # (1, 21, 3) float32: the canonical keypoints

    @classmethod
    def from_outputs(cls, outputs: Sequence[np.ndarray]) -> "Motion":
        """The seven outputs, by position (FaceFusion's order)."""
        pitch, yaw, roll, scale, translation, expression, points = (
            np.asarray(o, np.float32) for o in outputs[:7])
        return cls(float(pitch.reshape(-1)[0]), float(yaw.reshape(-1)[0]),
                   float(roll.reshape(-1)[0]), scale.reshape(1, 1, 1),
                   translation.reshape(1, 1, 3), expression.reshape(1, POINTS, 3).copy(),
                   points.reshape(1, POINTS, 3))

    @property
    def angles(self) -> tuple[float, float, float]:
        return self.pitch, self.yaw, self.roll

    def keypoints(self, rotation_matrix: np.ndarray | None = None,
                  expression: np.ndarray | None = None) -> np.ndarray:
        """(1, 21, 3) float32 ``s · (kp @ Rᵀ + e) + t`` — the crop's own keypoints by default,
        else with another rotation or expression (LivePortrait's ``transform_keypoint``, the
        translation added whole as FaceFusion adds it), in FaceFusion's order of operations."""
        r = rotation(*self.angles) if rotation_matrix is None else rotation_matrix
        e = self.expression if expression is None else expression
        out = self.points @ r.T
        out += e
        out *= self.scale
        out += self.translation
        return out


def prepare(crop: np.ndarray) -> np.ndarray:
    """A (S, S, 3) BGR uint8 crop → the extractors' (1, 3, 256, 256) float32 input: resized to
    256 px by area (uint8, as FaceFusion), RGB, / 255."""
    small = cv2.resize(crop, (INPUT_SIDE, INPUT_SIDE), interpolation=cv2.INTER_AREA)
    rgb = small[:, :, ::-1].astype(np.float32) / np.float32(255.0)
    return np.ascontiguousarray(rgb.transpose(2, 0, 1)[None])


def to_crop(image: np.ndarray) -> np.ndarray:
    """The generator's (3, S, S) RGB 0..1 → (S, S, 3) BGR uint8: clipped, × 255, truncated (as
    FaceFusion casts it)."""
    rgb = np.clip(np.asarray(image, np.float32).transpose(1, 2, 0), 0.0, 1.0) * np.float32(255.0)
    return np.ascontiguousarray(rgb.astype(np.uint8)[:, :, ::-1])


def extract_features(lazy: Session, x: np.ndarray) -> np.ndarray:
    """The appearance feature volume of a prepared crop."""
    return np.asarray(lazy.run({"input": x})[0], np.float32)


def extract_motion(lazy: Session, x: np.ndarray) -> Motion:
    return Motion.from_outputs(lazy.run({"input": x}))


def generate(lazy: Session, features: np.ndarray, source: np.ndarray, target: np.ndarray
             ) -> np.ndarray:
    """(3, S, S) RGB 0..1: the appearance ``features`` moved from the keypoints ``target`` to
    the keypoints ``source`` (FaceFusion's names)."""
    out = lazy.run({"feature_volume": features, "source": source.astype(np.float32),
                    "target": target.astype(np.float32)})[0]
    return np.asarray(out, np.float32)[0]
