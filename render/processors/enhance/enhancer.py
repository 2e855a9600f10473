"""The face enhancers (GFPGAN, CodeFormer, GPEN, RestoreFormer++) as a face processor: the crop's template and size
come from the model's manifest entry (GPEN-BFR 256 uses arcface_128 at 256 px); ``blend`` and
CodeFormer's ``weight`` from the step's section (``enhance.blend``, ``enhance.weight``). The blend
is the step's opacity: the enhanced face is pasted over the frame at ``blend`` times the mask, so
the rest is the frame's own pixels (FaceFusion: paste, then ``addWeighted`` with the frame)."""
from __future__ import annotations

import numpy as np

from ...faces.enhance import Enhancer
from ...model_handle import ProcessorModel
from ..base import FaceProcessor
from ..spec import Step


class FaceEnhancer(FaceProcessor):

    def __init__(self, step: Step, model: ProcessorModel) -> None:
        super().__init__(step, model)
        self.template = model.entry.template or "ffhq_512"
        self.size = model.entry.input_size or 512
        self.opacity = float(step.options["blend"])
        self.enhancer = Enhancer(model.lazy, float(step.options["weight"]))

    def run(self, crops: np.ndarray) -> np.ndarray:
        return self.enhancer.enhance(crops)
