"""StyleGANEX's age editing model as a face processor: FaceFusion's ``age_modifier`` with
``styleganex_age``, its geometry done in one place.

FaceFusion cuts two crops from the frame — the face (ffhq_512, 256 px: the model's ``target``)
and the face with its surroundings (the five points scaled 0.875 times about the nose tip onto
styleganex_384, 384 px: ``target_with_background``) — and pastes the model's output, resized to
1024 px, by the second crop's matrix scaled to 1024. Here the face stage cuts only that crop,
at the 1024 px it is pasted at (template styleganex_384_extended, the 0.875 folded in:
``faces.align``), and computes every mask on it; this class cuts the rest from it:

1. ``target_with_background``: the crop area-averaged to 384 px;
2. ``target``: the 256-px face cut from that by the fixed similarity between the two templates
   (``geometry``) — the face crop FaceFusion cuts from the frame, for any face;
3. ``direction``: a scalar float32, ``interp(direction, [−100, 100], [2.5, −2.5])`` (the model
   ages for negative values);
4. the output (1, 3, S, S), RGB in −1..1, clipped, to 0..255 (truncated), BGR, area-resized to
   1024 px; then FaceFusion's colour match to the crop (``colour``), always.

So nothing is carried between crops of different templates by a matrix here: the occlusion mask
the stage computes on the crop lands where the occluder is (FaceFusion warps its mask from the
face crop by ``inv(M)·E`` where ``E·inv(M)`` was meant: its defect §12-2), and the resizes keep
pixel centres in place, so the result lies over the crop it came from.
"""
from __future__ import annotations

import numpy as np

from . import geometry
from ..colour_match import match_frame_color
from .modifier import AgeModifier, to_input

#: the crop the stage cuts and pastes back, and its side (FaceFusion's ``256 * 4``)
TEMPLATE, SIDE = "styleganex_384_extended", 1024
#: the model's two crops: the face with its surroundings, and the face
EXTENDED_SIDE = 384
FACE_TEMPLATE, FACE_SIDE = "ffhq_512", 256
#: the editing strength at direction −100 and 100
STRENGTH = (2.5, -2.5)


def styleganex_direction(direction: int) -> np.ndarray:
    """The scalar float32 the model takes for ``direction`` (−100..100)."""
    return np.array(np.interp(direction, [-100, 100], STRENGTH), np.float32)


def model_crops(crop: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(``target_with_background``, ``target``) crops, BGR uint8, of a ``SIDE`` crop."""
    extended, to_extended = geometry.shrink(crop, EXTENDED_SIDE)
    to_face = geometry.then(geometry.resize_matrix(EXTENDED_SIDE, crop.shape[0]),
                            geometry.between(TEMPLATE, crop.shape[0], FACE_TEMPLATE, FACE_SIDE))
    return extended, geometry.cut(extended, to_face, FACE_SIDE)


def to_crop(output: np.ndarray, side: int) -> np.ndarray:
    """A (3, S, S) RGB −1..1 output → (side, side, 3) BGR uint8 (FaceFusion's truncation)."""
    rgb = ((np.clip(np.asarray(output, np.float32), -1.0, 1.0) + 1.0) / 2.0).transpose(1, 2, 0)
    bgr = np.ascontiguousarray((rgb * np.float32(255.0)).astype(np.uint8)[..., ::-1])
    if bgr.shape[0] == side:
        return bgr
    return geometry.shrink(bgr, side)[0]


class StyleganexAgeModifier(AgeModifier):
    template = TEMPLATE
    size = SIDE

    def run(self, crops: np.ndarray) -> np.ndarray:
        direction = styleganex_direction(self.direction)
        out = []
        for crop in crops:
            extended, face = model_crops(crop)
            y = self.lazy.run(self.feed({"target": to_input(face, 0.5, 0.5),
                                         "target_with_background": to_input(extended, 0.5, 0.5),
                                         "direction": direction}))[0]
            out.append(match_frame_color(crop, to_crop(np.asarray(y)[0], crop.shape[0])))
        return np.stack(out)
