"""The swappers that take the source face's crop instead of its identity vector: BlendSwap and
UniFace (FaceFusion 3.8's conventions, ``shared/docs/models.md`` §1).

The ``source`` input is the source image's chosen face warped onto a template — BlendSwap:
arcface_112_v2 at 112 px, UniFace: ffhq_512 at 256 px — as RGB x/255 (1, 3, s, s); the target
crop is normalised per contract (BlendSwap x/255, UniFace (x/255 − 0.5)/0.5, whose output comes
back in −1..1). The identity weight does not apply to them (FaceFusion's neither); pixel boost
does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...faces import align
from ...faces.blob import to_rgb_nchw
from ...model_handle import ProcessorModel
from ..base import Source
from ..spec import Step
from .swapper import SwapperProcessor


@dataclass(frozen=True)
class SourceCrop:
    template: str
    size: int
    signed_target: bool           # target (x/255 − 0.5)/0.5 and output in −1..1 (else 0..1)


SOURCE_CROPS = {
    "swapper-blendswap": SourceCrop("arcface_112_v2", 112, False),
    "swapper-uniface": SourceCrop("ffhq_512", 256, True),
}


class ImageSwapper(SwapperProcessor):
    template = "ffhq_512"
    size = 256

    def __init__(self, step: Step, model: ProcessorModel) -> None:
        super().__init__(step, model)
        self.source_crop = SOURCE_CROPS[model.entry.contract]

    @property
    def balance_factor(self) -> float:
        return 0.0

    def bind(self, source: Source) -> Any:
        image, face = source.image_face()
        crop = self.source_crop
        m = align.estimate(face.kps, crop.template, crop.size)
        warped = align.warp(image, m, crop.size)[None]
        return self.bound(to_rgb_nchw(warped).astype(np.float32) / np.float32(255.0))

    def forward(self, tiles: np.ndarray, sources: np.ndarray) -> np.ndarray:
        signed = self.source_crop.signed_target
        x = self.crop_input(tiles, 0.5 if signed else 0.0, 0.5 if signed else 1.0)
        y = self.lazy.run({"target": x, "source": sources.astype(np.float32)})[0]
        return self.crop_output(y, signed)
