"""What both age modifiers share: one face per call, inputs fed by the names the graph declares,
and the crop ↔ tensor steps.

FaceFusion feeds ``target``, ``target_with_background`` and ``direction`` each only where the
graph declares that name; so does :meth:`AgeModifier.feed`, and it refuses a graph that
declares a name no age modifier feeds, or a fixed shape other than the one fed (one line, before
the first face goes wrong). ``direction`` has no batch axis (fran's is (2,), StyleGANEX's a
scalar), so every call is one face: ``max_batch`` is 1 whatever the graph declares.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from ...errors import ModelError
from ...faces.blob import cast
from ...faces.swap import input_dtype
from ...model_handle import ProcessorModel
from ..base import FaceProcessor
from ..spec import Step

#: the inputs FaceFusion's age modifier binds by name
INPUTS = ("target", "target_with_background", "direction")


def to_input(crop: np.ndarray, mean: float, std: float) -> np.ndarray:
    """A BGR uint8 crop → (1, 3, s, s) float32 RGB, (x / 255 − mean) / std."""
    rgb = crop[..., ::-1].transpose(2, 0, 1)[None].astype(np.float32) / np.float32(255.0)
    return (rgb - np.float32(mean)) / np.float32(std)


def _fits(declared: list, shape: tuple[int, ...]) -> bool:
    """Whether an array of ``shape`` fits a graph input declared ``declared`` (symbolic
    dimensions fit any size)."""
    return len(declared) == len(shape) and all(
        not isinstance(d, int) or d <= 0 or d == s for d, s in zip(declared, shape))


class AgeModifier(FaceProcessor):
    """Base of the age modifiers: a subclass sets ``template`` and ``size`` and implements
    :meth:`run`, one face per model call through :meth:`feed`."""

    def __init__(self, step: Step, model: ProcessorModel) -> None:
        super().__init__(step, model)
        self.direction = int(step.options["direction"])
        self._checked = False

    @property
    def max_batch(self) -> int | None:
        return 1

    def feed(self, values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The graph's declared inputs from ``values`` (by name), in the graph's dtypes."""
        inputs = self.lazy.session.get_inputs()
        if not self._checked:
            self._check(inputs, values)
            self._checked = True
        return {i.name: cast(values[i.name], input_dtype(i.type)) for i in inputs}

    def _check(self, inputs: list, values: Mapping[str, np.ndarray]) -> None:
        entry = self.model.entry
        for i in inputs:
            if i.name not in values:
                fed = ", ".join(n for n in INPUTS if n in values)
                raise ModelError(f"{entry.name}: its input {i.name!r} is not one an "
                                 f"{entry.contract} model is fed ({fed}): check its contract")
            if not _fits(i.shape, values[i.name].shape):
                raise ModelError(f"{entry.name}: its input {i.name} is {i.shape}, an "
                                 f"{entry.contract} model is fed {list(values[i.name].shape)}: "
                                 f"check its contract")
