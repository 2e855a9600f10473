"""What a face step takes besides its crops, in the order its call takes them, each only where
the step declares it (``render.processors.base.FaceProcessor``): the target faces' identities,
their 68 landmarks (in frame pixels, or in the crop's), their frames' numbers in the target, and
their crops of the frames as decoded (before any step changed them)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .faces import align
from .faces.types import Face
from .processors.base import FaceProcessor


def step_extras(proc: FaceProcessor, faces: Sequence[tuple[int, Face]],
                matrices: Sequence[np.ndarray], size: int, *, identities: np.ndarray | None,
                numbers: Sequence[int] | None,
                originals: Sequence[tuple[np.ndarray, Face]] | None) -> list:
    """The extra arguments of ``proc``'s call for ``faces`` (frame index, face), cropped by
    ``matrices`` at ``size``; None stands for one it does not take."""
    extras: list = [identities if proc.needs_target_identity else None]
    if proc.needs_landmarks:    # the landmark step gave every face its 68 points
        points = [face.landmarks for _, face in faces]
        if proc.landmarks_in_crop:
            points = [align.transform_points(p, m) for p, m in zip(points, matrices)]
        extras.append(np.stack(points).astype(np.float32))
    if proc.needs_frame_numbers:
        extras.append(np.array([numbers[i] for i, _ in faces], np.int64))
    if proc.needs_original:     # aligned at the face's own points on the frame as decoded
        extras.append(np.stack([align.warp(frame, align.estimate(face.kps, proc.template, size),
                                           size) for frame, face in originals]))
    return extras


def decoded_copies(frames: Sequence[np.ndarray], faces: Sequence[tuple[int, Face]]
                   ) -> list[tuple[np.ndarray, Face]]:
    """Each face with a copy of its frame as it is now (BGR) and the face as found on it: what
    ``needs_original`` takes, kept before the chain changes the frames (a frame step that
    resizes them later leaves this geometry as it is)."""
    copies = {i: frames[i][..., :3].copy() for i in {i for i, _ in faces}}
    return [(copies[i], face) for i, face in faces]
