"""The deep swapper as a face processor: the crop (``dfl_whole_face`` at the manifest's
``input_size``, which the graph's ``in_face:0`` must agree with), the DFM model run over it
(``dfm.py``), FaceFusion's conditional colour match on the raw crop (``../colour_match.py``) and the
model's own paste mask handed to the face stage (``own_mask``).

The masks as FaceFusion's deep swapper takes them: the box mask with ``mask.padding`` and the
per-side paddings and the occlusion mask on the crop given, the region and area masks on the
result, and the model's mask, all min-combined.
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ...errors import ConfigError, ModelError
from ...model_handle import ProcessorModel
from ..base import FaceProcessor, Source
from ..spec import Step
from ..colour_match import conditional_match
from .dfm import FACE_INPUT, MORPH_INPUT, DfmGraph, face_output, model_input, paste_mask, \
    read_graph


class DeepSwapper(FaceProcessor):
    template = "dfl_whole_face"
    mask_padding = True
    mask_result = True
    own_mask = True

    def __init__(self, step: Step, model: ProcessorModel) -> None:
        super().__init__(step, model)
        entry = model.entry
        self.template = entry.template or type(self).template
        if not entry.input_size:
            raise ModelError(f"model {entry.name}: its manifest entry has no input_size: declare "
                             f"the side of its {FACE_INPUT} input (the number its name ends "
                             f"with)")
        self.size = int(entry.input_size)
        #: FaceFusion's interp(morph, [0, 100], [0, 1]) as the (1,) input
        self.morph = np.array([np.interp(step.options["morph"], [0, 100], [0, 1])], np.float32)

    @functools.cached_property
    def graph(self) -> DfmGraph:
        """The model's graph, checked against the contract and the manifest (loads it)."""
        return read_graph(self.lazy.session, self.model.entry.name, self.size)

    @property
    def max_batch(self) -> int | None:
        return self.graph.batch

    def bind(self, source: Source) -> Any:
        """The source is not used (the identity is the model's); the graph is checked here, once,
        before any frame, and a morph it cannot take is refused."""
        graph = self.graph
        morph = self.step.options["morph"]
        if morph != 100 and not graph.morph:
            raise ConfigError(f"{self.name}.morph={morph}: model {self.model.entry.name} has no "
                              f"{MORPH_INPUT} input (only AMP models morph): it always puts in "
                              f"its whole identity; leave morph at 100 or pick an AMP model")
        return self.run

    def run(self, crops: np.ndarray) -> np.ndarray:
        """(N, S, S, 3) BGR uint8 → (N, S, S, 4) float32: the swapped BGR, colour matched to the
        raw crop, and the model's paste mask (``own_mask``)."""
        feeds = {FACE_INPUT: model_input(crops)}
        if self.graph.morph:
            feeds[MORPH_INPUT] = self.morph
        target_mask, face, source_mask = self.lazy.run(feeds)[:3]
        swapped = face_output(face)
        matched = np.stack([conditional_match(raw, out) for raw, out in zip(crops, swapped)])
        return np.concatenate([matched.astype(np.float32),
                               paste_mask(source_mask, target_mask)[..., None]], axis=3)
