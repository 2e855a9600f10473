"""What the model masks share: their model and report row, the call over crops (batched where
the graph allows) and FaceFusion's soft-edge step."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import cv2
import numpy as np

from ..faces.types import Face
from ..model_handle import ProcessorModel, accepts_batch

if TYPE_CHECKING:
    from ..options import Mask

#: the sigma of the blur before the threshold (FaceFusion: 5 px at every crop size)
EDGE_SIGMA = 5.0


def soften(mask: np.ndarray) -> np.ndarray:
    """FaceFusion's edge step for occlusion, region and area masks: blur (sigma 5), keep 0.5..1,
    stretch to 0..1 — the edge moves inward by about the blur's reach, and a hole (an occluder)
    grows by it, so nothing of the hole's edge is painted over."""
    blurred = cv2.GaussianBlur(np.clip(mask, 0.0, 1.0), (0, 0), EDGE_SIGMA)
    return ((np.clip(blurred, 0.5, 1.0) - 0.5) * 2.0).astype(np.float32)


class ModelMask:
    """Base of the masks driven by a model: a subclass implements :meth:`__call__` (a
    :class:`render.faces.mask.PasteMask`)."""

    #: True: computed on the processor's result (region); False: on the crop it is given (occlusion)
    after_swap = False

    def __init__(self, role: str, model: ProcessorModel, options: Mask) -> None:
        self.role = role
        self.model = model
        self.size = model.entry.input_size or 0

    @property
    def lazy(self):
        return self.model.lazy

    def forward(self, blobs: np.ndarray) -> np.ndarray:
        """The model's first output over ``blobs`` (its first axis the batch): in one call where
        the graph takes any batch, else one call per item."""
        session = self.lazy.session
        inp = session.get_inputs()[0]
        if accepts_batch(inp.shape) or len(blobs) == 1:
            return np.asarray(self.lazy.run({inp.name: blobs})[0])
        return np.concatenate([np.asarray(self.lazy.run({inp.name: blobs[i:i + 1]})[0])
                               for i in range(len(blobs))])

    def __call__(self, crops: np.ndarray, faces: Sequence[Face],
                 matrices: Sequence[np.ndarray]) -> np.ndarray:
        raise NotImplementedError

    def record(self) -> dict[str, Any]:
        return self.model.row(self.role)


def resize_all(images: np.ndarray, size: int) -> np.ndarray:
    """Every image of ``images`` (N, h, w[, c]) resized (bilinear) to size × size."""
    return np.stack([cv2.resize(im, (size, size), interpolation=cv2.INTER_LINEAR)
                     for im in images])
