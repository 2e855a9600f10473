"""Paste an aligned crop back into its frame through the inverse warp, weighted by a mask."""
from __future__ import annotations

import math

import cv2
import numpy as np

from .align import invert, transform_points


def paste(frame: np.ndarray, crop: np.ndarray, matrix: np.ndarray, mask: np.ndarray) -> None:
    """Blend ``crop`` (aligned by ``matrix``) into ``frame`` in place.

    Only the bounding rectangle of the crop's footprint is touched; pixels where the mask is zero
    keep their exact values.
    """
    size = crop.shape[0]
    h, w = frame.shape[:2]
    inv = invert(matrix)
    corners = transform_points(np.array([[0, 0], [size, 0], [0, size], [size, size]]), inv)
    x0 = max(int(math.floor(corners[:, 0].min())) - 1, 0)
    y0 = max(int(math.floor(corners[:, 1].min())) - 1, 0)
    x1 = min(int(math.ceil(corners[:, 0].max())) + 1, w)
    y1 = min(int(math.ceil(corners[:, 1].max())) + 1, h)
    if x1 <= x0 or y1 <= y0:
        return
    roi_inv = inv.copy()
    roi_inv[:, 2] -= (x0, y0)
    dsize = (x1 - x0, y1 - y0)
    warped = cv2.warpAffine(crop, roi_inv, dsize, flags=cv2.INTER_LINEAR,
                            borderMode=cv2.BORDER_REPLICATE)
    alpha = cv2.warpAffine(mask, roi_inv, dsize, flags=cv2.INTER_LINEAR,
                           borderMode=cv2.BORDER_CONSTANT, borderValue=0.0)
    region = frame[y0:y1, x0:x1]
    # (warped * a + region * (1 - a)) / (1 + 1e-5), rounded, in one SIMD pass; where a == 0 (and
    # where a == 1) the 1e-5 can never move a whole value across a rounding boundary, so pixels
    # outside the mask keep their exact values
    np.copyto(region, cv2.blendLinear(warped, region, alpha, 1.0 - alpha))
