"""The occlusion mask (xseg_1/2/3): 1 where the crop shows the face, 0 where something covers it
(a hand, a microphone), so the target's own pixels stay there. Computed on the crop before the
processor runs; several occluders (``mask.occluder=xseg_1,xseg_2``) give the minimum of their raw
maps, softened once (:class:`Occluders`, FaceFusion's 'many')."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..faces.types import Face
from .model import ModelMask, resize_all, soften


class OcclusionMask(ModelMask):

    def __call__(self, crops: np.ndarray, faces: Sequence[Face],
                 matrices: Sequence[np.ndarray]) -> np.ndarray:
        """(N, S, S, 3) BGR uint8 crops → (N, S, S) float32 weights."""
        return np.stack([soften(m) for m in self.raw(crops)])

    def raw(self, crops: np.ndarray) -> np.ndarray:
        """The model's maps at the crops' side, clipped to 0..1, before the soft edge."""
        side = crops.shape[1]
        size = self.size or 256
        # the graph's input is NHWC (1, 256, 256, 3), BGR, x / 255
        blobs = resize_all(crops, size).astype(np.float32) / np.float32(255.0)
        out = self.forward(blobs).reshape(len(crops), size, size)
        return resize_all(np.clip(out, 0.0, 1.0).astype(np.float32), side)


class Occluders:
    """Several occlusion masks as one: the minimum of their raw maps, then one soft edge."""

    def __init__(self, masks: Sequence[OcclusionMask]) -> None:
        self.masks = list(masks)

    def __call__(self, crops: np.ndarray, faces: Sequence[Face],
                 matrices: Sequence[np.ndarray]) -> np.ndarray:
        maps = np.minimum.reduce([m.raw(crops) for m in self.masks])
        return np.stack([soften(m) for m in maps])
