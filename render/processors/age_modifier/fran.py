"""FRAN (ry-lu's U-Net after Disney's "Production-Ready Face Re-Aging") as a face processor:
FaceFusion's ``age_modifier`` with ``fran``.

The crop is the manifest entry's (ffhq_512 at 1024 px), fed RGB x / 255 as ``target`` (and as
``target_with_background`` where the graph declares it); ``direction`` (2,) float32 is the
face's age and the age asked for, in hundreds of years, each clipped to 0..1:
``clip([age, age + direction] / 100, 0, 1)``; the age is FairFace's (``fairface.py``), the
model the manifest entry ``needs``. ``direction=0`` still runs the model. The output (1, 3, s,
s) is RGB in 0..1, clipped, back to BGR uint8 (rounded) and pasted by the crop's matrix.
"""
from __future__ import annotations

import numpy as np

from ...errors import ModelError
from ...model_handle import ProcessorModel
from ..spec import Step
from . import CLASSIFIER
from .fairface import AgeClassifier
from .modifier import AgeModifier, to_input


def fran_direction(age: float, direction: int) -> np.ndarray:
    """(2,) float32: the face's age and the age asked for, / 100, clipped to 0..1."""
    return np.clip(np.array([age, age + direction], np.float32) / np.float32(100.0), 0.0, 1.0)


def to_crop(output: np.ndarray) -> np.ndarray:
    """A (3, s, s) RGB 0..1 output → (s, s, 3) BGR uint8."""
    rgb = np.clip(np.asarray(output, np.float32), 0.0, 1.0).transpose(1, 2, 0)
    return np.rint(rgb[..., ::-1] * np.float32(255.0)).astype(np.uint8)


class FranAgeModifier(AgeModifier):

    def __init__(self, step: Step, model: ProcessorModel) -> None:
        super().__init__(step, model)
        self.template = model.entry.template or "ffhq_512"
        self.size = model.entry.input_size or 1024
        classifiers = [m for m in model.needs.values() if m.entry.contract == CLASSIFIER]
        if len(classifiers) != 1:
            raise ModelError(f"{model.entry.name}: a fran model needs one {CLASSIFIER} model in "
                             f"its manifest entry's needs (it has "
                             f"{', '.join(model.entry.needs) or 'none'})")
        self.classifier = AgeClassifier(classifiers[0], self.template)

    def run(self, crops: np.ndarray) -> np.ndarray:
        out = []
        for crop in crops:
            x = to_input(crop, 0.0, 1.0)
            direction = fran_direction(self.classifier.age(crop), self.direction)
            y = self.lazy.run(self.feed({"target": x, "target_with_background": x,
                                         "direction": direction}))[0]
            out.append(to_crop(np.asarray(y)[0]))
        return np.stack(out)
