"""The swappers that take the source as an identity vector: hyperswap, SimSwap and Ghost
(FaceFusion 3.8's conventions, ``shared/docs/models.md`` §1).

Each contract fixes how the crop is normalised (RGB x/255, then (x − mean) / std), whether the
output comes back in −1..1, and what the ``source`` input is: the source's L2-normalised ArcFace
embedding (hyperswap), or its raw embedding through the crossface converter the manifest entry
``needs`` (``input`` (1, 512) raw → ``output``), then normalised (SimSwap) or not (Ghost). The
template and the side are the manifest entry's. Inputs are fed by name (``target``, ``source``)
and the first output is read.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import ModelError
from ...faces.embed import normalise
from ...model_handle import ProcessorModel
from ..spec import Step
from .swapper import SwapperProcessor


@dataclass(frozen=True)
class Convention:
    mean: tuple[float, float, float]          # on RGB x/255
    std: tuple[float, float, float]
    signed_output: bool                       # output in −1..1 (else 0..1)
    converter: bool                           # the raw embedding goes through a converter
    normalised_source: bool                   # the source input is L2-normalised
    normalised_target: bool = True            # swap.weight balances with a normalised target


HALF = (0.5, 0.5, 0.5)
CONVENTIONS = {
    "swapper-hyperswap": Convention(HALF, HALF, True, False, True),
    "swapper-simswap": Convention((0.485, 0.456, 0.406), (0.229, 0.224, 0.225), False, True, True),
    "swapper-simswap-unofficial": Convention((0.0, 0.0, 0.0), (1.0, 1.0, 1.0), False, True, True),
    "swapper-ghost": Convention(HALF, HALF, True, True, False, normalised_target=False),
}


class EmbeddingSwapper(SwapperProcessor):
    template = "arcface_128"
    size = 256

    def __init__(self, step: Step, model: ProcessorModel) -> None:
        super().__init__(step, model)
        self.convention = CONVENTIONS[model.entry.contract]
        self.normalise_target = self.convention.normalised_target
        converters = [m for m in model.needs.values() if m.entry.contract == "converter-crossface"]
        if self.convention.converter and len(converters) != 1:
            raise ModelError(f"{model.entry.name}: a {model.entry.contract} model needs one "
                             f"converter-crossface model in its manifest entry's needs (it has "
                             f"{', '.join(model.entry.needs) or 'none'})")
        self.converter = converters[0] if self.convention.converter else None
        self._mean = np.array(self.convention.mean, np.float32).reshape(1, 3, 1, 1)
        self._std = np.array(self.convention.std, np.float32).reshape(1, 3, 1, 1)

    def prepare_source(self, embedding: np.ndarray) -> np.ndarray:
        e = np.asarray(embedding, np.float32).reshape(1, -1)
        if self.converter is not None:
            lazy = self.converter.lazy
            name = lazy.session.get_inputs()[0].name
            e = np.asarray(lazy.run({name: e})[0], np.float32).reshape(1, -1)
        return normalise(e) if self.convention.normalised_source else e

    def forward(self, tiles: np.ndarray, sources: np.ndarray) -> np.ndarray:
        x = self.crop_input(tiles, self._mean, self._std)
        y = self.lazy.run({"target": x, "source": sources.astype(np.float32)})[0]
        return self.crop_output(y, self.convention.signed_output)
