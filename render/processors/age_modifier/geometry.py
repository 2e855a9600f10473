"""One aligned crop cut from another: the age modifiers' second crops (StyleGANEX's 256-px face,
FairFace's 224-px face) come from the crop the face stage gives them, not from the frame again.

Both crops are fits of the same five points, each to its own template, by least squares; that
fit commutes with a similarity applied to the template, so where one template is a similarity
image of the other (ffhq_512 and styleganex_384_extended: one is the other shrunk about the
nose tip) the matrix between the two crops is the one between the templates, for any face.
Where it is not (ffhq_512 and arcface_112_v2) the templates' own best fit stands in for it, off
by the order of the points' fit residuals. Pixel centres sit at whole coordinates in every crop,
as in ``cv2.warpAffine``; an area resize maps x to (x + 0.5)·f − 0.5, not x·f.
"""
from __future__ import annotations

import math

import cv2
import numpy as np

from ...faces import align


def between(source: str, source_side: int, target: str, target_side: int) -> np.ndarray:
    """2×3: a pixel of the ``source``-template crop of side ``source_side`` → the same point in
    the ``target``-template crop of side ``target_side``."""
    return align.similarity(align.template_points(source, source_side),
                            align.template_points(target, target_side))


def resize_matrix(side: int, new_side: int) -> np.ndarray:
    """2×3: a pixel of a ``side`` image → the same point after ``cv2.resize`` to ``new_side``."""
    f = new_side / side
    return np.array([[f, 0.0, 0.5 * f - 0.5], [0.0, f, 0.5 * f - 0.5]])


def then(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """2×3: ``first``, then ``second``."""
    return second @ np.vstack([first, [0.0, 0.0, 1.0]])


def shrink(crop: np.ndarray, side: int) -> tuple[np.ndarray, np.ndarray]:
    """``crop`` area-averaged to ``side`` (each pixel the mean of the ones it covers), and the
    2×3 from its pixels to the result's."""
    small = cv2.resize(crop, (side, side), interpolation=cv2.INTER_AREA)
    return small, resize_matrix(crop.shape[0], side)


def cut(image: np.ndarray, matrix: np.ndarray, side: int) -> np.ndarray:
    """The ``side`` crop of ``image`` through ``matrix`` (bilinear, edges repeated: the stage's
    own warp)."""
    return cv2.warpAffine(image, matrix.astype(np.float32), (side, side), flags=cv2.INTER_LINEAR,
                          borderMode=cv2.BORDER_REPLICATE)


def recrop(crop: np.ndarray, source: str, target: str, side: int) -> np.ndarray:
    """The ``target``-template crop of ``side`` cut from a ``source``-template ``crop``: shrunk
    first by area averaging to about the size it is cut at (a bilinear warp that shrinks more
    than twice skips pixels), then warped."""
    matrix = between(source, crop.shape[0], target, side)
    scale = math.hypot(matrix[0, 0], matrix[1, 0])
    if scale >= 0.5:
        return cut(crop, matrix, side)
    small, to_small = shrink(crop, math.ceil(crop.shape[0] * scale))
    return cut(small, then(cv2.invertAffineTransform(to_small), matrix), side)
