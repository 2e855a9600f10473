"""The background remover: a matting model's matte over the whole frame (MODNet, RMBG, BiRefNet,
U²-Net, ...), written as the output's alpha channel where its format carries one (PNG, WebP,
WebM VP9, MOV ProRes 4444), else used to lay the person over a fill colour or a background
picture; the frame is padded to the model's square, not stretched. It runs where
``processors`` names it.

This module is the processor's declaration; the class lives beside it (``remover.py``).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...options import option, precision_option
from ..spec import Processor

#: where the matte goes: ``auto`` the alpha channel where the output carries one, else the fill;
#: ``alpha`` the alpha channel or a usage error; ``fill`` always the fill
OUTPUTS = ("auto", "alpha", "fill")
_KEYED = "unless-default"


@dataclass(frozen=True)
class Background:
    model: str = option("modnet", "matting model (matting contracts)", keyed=_KEYED)
    precision: str = precision_option("the matting model's")
    output: str = option("auto", "where the matte goes: auto (the alpha channel where the "
                         "output's format carries one, else the fill), alpha (or an error), "
                         "fill (always)", choices=OUTPUTS, keyed=_KEYED)
    fill: str = option("0,0,0", "the colour laid behind the person where the matte is not "
                       "written as alpha: R,G,B (0-255)", keyed=_KEYED)
    image: str = option("", "a picture laid behind the person instead of the fill colour "
                        "(resized to cover the frame)", keyed=_KEYED)
    despill: str = option("", "a screen colour R,G,B[,A] to take out of the edges (green "
                          "screen: 0,255,0); empty: none", keyed=_KEYED)


PROCESSOR = Processor("background", Background, kind="frame", drivers=dict.fromkeys(
    ("matting", "matting-u2net-cloth", "matting-corridor-key"),
    "render.processors.background.remover:BackgroundRemover"))
