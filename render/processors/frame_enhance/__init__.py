"""The frame enhancer: a super-resolution model over the whole frame (Real-ESRGAN, SPAN,
Swin2SR, UltraSharp, ...), run in tiles that overlap and are blended, so the frame comes out
``scale`` times larger with no seam between tiles. It runs where ``processors`` names it.

This module is the processor's declaration; the class lives beside it (``enhancer.py``), the
tiling in ``tiles.py``.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...options import option, precision_option
from ..spec import Processor

_KEYED = "unless-default"


@dataclass(frozen=True)
class FrameEnhance:
    model: str = option("real_esrgan_x2", "frame enhancer (frame-enhancer contract): its scale "
                        "sets the output's size", keyed=_KEYED)
    precision: str = precision_option("the frame enhancer's")
    blend: float = option(0.8, "share of the enhanced frame over the frame resized to the new "
                          "size (linear)", min=0.0, max=1.0, keyed=_KEYED)
    tile: int = option(0, "tile edge in input pixels, context included; 0: the model's own (its "
                       "graph's fixed side, else its manifest tile)", min=0, max=4096,
                       keyed=_KEYED)
    overlap: int = option(16, "input pixels by which neighbouring tiles overlap: the tiles' "
                          "results are cross-faded over them", min=0, max=512, keyed=_KEYED)


PROCESSOR = Processor("frame_enhance", FrameEnhance, kind="frame", drivers={
    "frame-enhancer": "render.processors.frame_enhance.enhancer:FrameEnhancer"})
