"""inswapper_128 as a face processor: the source face's latent is computed once per render."""
from __future__ import annotations

import numpy as np

from ...faces.swap import Swapper, load_emap
from ...model_handle import ProcessorModel
from ..spec import Step
from .swapper import SwapperProcessor


class InswapperProcessor(SwapperProcessor):
    template = Swapper.template
    size = Swapper.size

    def __init__(self, step: Step, model: ProcessorModel) -> None:
        super().__init__(step, model)
        emap = load_emap(model.path, model.entry.sha256, model.cache_dir)
        self.swapper = Swapper(model.lazy, emap)

    def prepare_source(self, embedding: np.ndarray) -> np.ndarray:
        return self.swapper.latent(embedding)

    def forward(self, tiles: np.ndarray, sources: np.ndarray) -> np.ndarray:
        return self.swapper.swap(tiles, sources)
