"""The region mask (bisenet_resnet_18/34, CelebAMask-HQ classes): the swap keeps only the
regions ``mask.regions`` names. Computed on the swapper's result."""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..faces.types import Face
from ..model_handle import ProcessorModel
from .model import ModelMask, resize_all, soften

if TYPE_CHECKING:
    from ..options import Mask

#: region name → the parser's class ids (yakhyo/CelebAMask-HQ: 0 background, 1 skin, 2/3 left and
#: right eyebrow, 4/5 eyes, 6 glasses, 7/8 ears, 9 earring, 10 nose, 11 mouth (inner), 12/13
#: upper and lower lip, 14 neck, 15 necklace, 16 cloth, 17 hair, 18 hat)
REGION_IDS: dict[str, tuple[int, ...]] = {
    "skin": (1,), "eyebrows": (2, 3), "eyes": (4, 5), "glasses": (6,), "nose": (10,),
    "mouth": (11,), "lips": (12, 13), "left-eyebrow": (2,), "right-eyebrow": (3,),
    "left-eye": (4,), "right-eye": (5,), "upper-lip": (12,), "lower-lip": (13,),
}
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)    # RGB
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)


def region_ids(regions: Sequence[str]) -> tuple[int, ...]:
    return tuple(sorted({i for r in regions for i in REGION_IDS[r]}))


class RegionMask(ModelMask):
    after_swap = True

    def __init__(self, role: str, model: ProcessorModel, options: Mask) -> None:
        super().__init__(role, model, options)
        self.ids = np.array(region_ids(options.regions), np.int64)

    def classes(self, crops: np.ndarray) -> np.ndarray:
        """(N, S, S, 3) BGR uint8 crops → (N, size, size) class ids at the parser's side."""
        size = self.size or 512
        # the graph's input is NCHW (1, 3, 512, 512): RGB, x / 255, ImageNet mean and std
        rgb = resize_all(crops, size)[..., ::-1].astype(np.float32) / np.float32(255.0)
        blobs = ((rgb - IMAGENET_MEAN) / IMAGENET_STD).transpose(0, 3, 1, 2)
        logits = self.forward(np.ascontiguousarray(blobs, np.float32))     # (N, 19, size, size)
        return logits.argmax(axis=1)

    def __call__(self, crops: np.ndarray, faces: Sequence[Face],
                 matrices: Sequence[np.ndarray]) -> np.ndarray:
        """(N, S, S, 3) BGR uint8 crops → (N, S, S) float32 weights."""
        chosen = np.isin(self.classes(crops), self.ids).astype(np.float32)
        return np.stack([soften(m) for m in resize_all(chosen, crops.shape[1])])
