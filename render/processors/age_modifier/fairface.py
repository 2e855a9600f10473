"""The face's age for FRAN: FairFace's age bucket (FaceFusion's ``face_classifier``), the mean of
the years it spans.

The classifier takes the face aligned to arcface_112_v2 at 224 px, RGB, x / 255 normalised by
ImageNet's mean and std, as ``input`` (1, 3, 224, 224) float32, and gives three int64 ids, in
this order: race, gender, age (read by position, as FaceFusion does). The crop is cut from the
crop the age modifier is given (``geometry.recrop``), so the age is the age of the face as it
reaches the step: after a swap, the swapped face's (FaceFusion classifies the target frame as
decoded).
"""
from __future__ import annotations

import numpy as np

from ...errors import ModelError
from ...model_handle import ProcessorModel
from . import geometry

TEMPLATE, SIDE = "arcface_112_v2", 224
MEAN = np.array([0.485, 0.456, 0.406], np.float32).reshape(1, 3, 1, 1)
STD = np.array([0.229, 0.224, 0.225], np.float32).reshape(1, 3, 1, 1)
#: the age ids' year ranges (FaceFusion's ``categorize_age``: ``range(lo, hi)``)
BUCKETS = ((0, 2), (3, 9), (10, 19), (20, 29), (30, 39), (40, 49), (50, 59), (60, 69), (70, 100))
#: the age of each id: the mean of its range, as FaceFusion's ``numpy.mean(face.age)``
AGES = tuple(float(np.mean(range(lo, hi))) for lo, hi in BUCKETS)
#: the output that holds the age id
AGE_OUTPUT = 2


class AgeClassifier:
    """FairFace over faces cut from crops of ``template``."""

    def __init__(self, model: ProcessorModel, template: str) -> None:
        self.model = model
        self.template = template

    def blob(self, crop: np.ndarray) -> np.ndarray:
        """A BGR uint8 ``template`` crop → the classifier's (1, 3, 224, 224) input."""
        face = geometry.recrop(crop, self.template, TEMPLATE, SIDE)
        rgb = face[..., ::-1].transpose(2, 0, 1)[None].astype(np.float32) / np.float32(255.0)
        return (rgb - MEAN) / STD

    def age(self, crop: np.ndarray) -> float:
        """The age, in years, of the face in ``crop``."""
        lazy = self.model.lazy
        name = lazy.session.get_inputs()[0].name
        outputs = lazy.run({name: self.blob(crop)})
        if len(outputs) <= AGE_OUTPUT:
            raise ModelError(f"{self.model.entry.name}: {len(outputs)} outputs, a FairFace "
                             f"classifier gives race, gender and age ids")
        bucket = int(np.asarray(outputs[AGE_OUTPUT]).reshape(-1)[0])
        if not 0 <= bucket < len(AGES):
            raise ModelError(f"{self.model.entry.name}: age id {bucket}, FairFace's are 0.."
                             f"{len(AGES) - 1}")
        return AGES[bucket]
