"""The deep swapper: a DeepFaceLive identity model (a DeepFaceLab model exported as a ``.dfm``
ONNX graph, FaceFusion's ``deep_swapper``) puts the one face it was trained on on each selected
face. The identity is in the model, so the render's source image does not change the face put in
(``source=`` still picks the reference face of select.mode=reference, and is still required).

This module is the processor's declaration; the class lives beside it (``swapper.py``), the
model's contract (input, outputs, its mask) in ``dfm.py``, FaceFusion's conditional colour match
in ``render/processors/colour_match.py``.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...options import option, precision_option
from ..spec import Processor

_KEYED = "unless-default"


@dataclass(frozen=True)
class DeepSwap:
    model: str = option("iperov_elon_musk_224", "DeepFaceLive identity model (swapper-dfm "
                        "contract; docs/face-processors.md says how to add others)",
                        keyed=_KEYED)
    precision: str = precision_option("the deep swapper's")
    morph: int = option(100, "percent of the model's identity put in, for models with a "
                        "morph_value input (AMP models; others always put in all of it): 0 "
                        "keeps the target's face as the model sees it", min=0, max=100,
                        keyed=_KEYED)


PROCESSOR = Processor("deep_swap", DeepSwap, drivers={
    "swapper-dfm": "render.processors.deep_swap.swapper:DeepSwapper"})
