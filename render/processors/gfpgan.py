"""GFPGAN 1.4 as a face processor; ``blend`` from its section (``enhance.blend``)."""
from __future__ import annotations

import numpy as np

from ..faces.enhance import Enhancer
from .base import FaceProcessor, ProcessorModel
from .steps import Step

DEFAULT_BLEND = 0.8


class GfpganProcessor(FaceProcessor):
    contracts = ("enhancer-gfpgan",)
    template = Enhancer.template
    size = Enhancer.size

    def __init__(self, step: Step, model: ProcessorModel) -> None:
        super().__init__(step, model)
        self.enhancer = Enhancer(model.lazy, float(step.options.get("blend", DEFAULT_BLEND)))

    def run(self, crops: np.ndarray) -> np.ndarray:
        return self.enhancer.enhance(crops)
