"""inswapper_128 as a face processor: the source face's latent is computed once per render."""
from __future__ import annotations

import numpy as np

from ..faces.swap import Swapper, load_emap
from .base import CropsFn, FaceProcessor, ProcessorModel
from .steps import Step


class InswapperProcessor(FaceProcessor):
    contracts = ("swapper-inswapper",)
    template = Swapper.template
    size = Swapper.size

    def __init__(self, step: Step, model: ProcessorModel) -> None:
        super().__init__(step, model)
        emap = load_emap(model.path, model.entry.sha256, model.cache_dir)
        self.swapper = Swapper(model.lazy, emap)

    def bind(self, source: np.ndarray) -> CropsFn:
        latent = self.swapper.latent(source)
        return lambda crops: self.swapper.swap(crops, latent)
