"""The face enhancer: a restoration model over each face after the swap (GFPGAN, CodeFormer,
GPEN, RestoreFormer++), pasted over the frame at ``blend``.

This module is the processor's declaration; the class lives beside it (``enhancer.py``).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...options import option, precision_option
from ..spec import Processor


@dataclass(frozen=True)
class Enhance:
    enabled: bool = option(False, "run the face enhancer after swapping")
    model: str = option("gfpgan_1.4", "face enhancer (GFPGAN, CodeFormer, GPEN or RestoreFormer++ "
                        "contract)")
    precision: str = precision_option("the enhancer's", keyed="bytes")
    blend: float = option(0.8, "share of the enhanced face over the frame (pasted at blend x its "
                          "mask)", min=0.0, max=1.0)
    weight: float = option(0.5, "CodeFormer's fidelity weight: 0 restores the most, 1 keeps "
                           "closest to the input (other enhancers have no weight input)", min=0.0,
                           max=1.0, keyed="unless-default")


_ENHANCER = "render.processors.enhance.enhancer:FaceEnhancer"

PROCESSOR = Processor("enhance", Enhance, drivers=dict.fromkeys(
    ("enhancer-gfpgan", "enhancer-codeformer", "enhancer-gpen", "enhancer-restoreformer"),
    _ENHANCER))
