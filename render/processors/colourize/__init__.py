"""The frame colouriser: a model that gives a grey frame its colours (DDColor, DeOldify),
keeping the frame's own lightness; the frame is padded to the model's square, not stretched.
It runs where ``processors`` names it.

This module is the processor's declaration; the classes live beside it (``colourizer.py``).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...options import option, precision_option
from ..spec import Processor

#: the model input sides FaceFusion offers (``--frame-colorizer-size``)
SIZES = (192, 256, 384, 512)
_KEYED = "unless-default"


@dataclass(frozen=True)
class Colourize:
    model: str = option("ddcolor", "frame colouriser (colourizer-ddcolor or colourizer-deoldify "
                        "contract)", keyed=_KEYED)
    precision: str = precision_option("the colouriser's")
    size: int = option(256, "side of the square the frame is padded and resized to for the model",
                       choices=SIZES, keyed=_KEYED)
    blend: float = option(1.0, "share of the colours over the frame", min=0.0, max=1.0,
                          keyed=_KEYED)


_COLOURIZER = "render.processors.colourize.colourizer"

PROCESSOR = Processor("colourize", Colourize, kind="frame", drivers={
    "colourizer-ddcolor": f"{_COLOURIZER}:DDColor",
    "colourizer-deoldify": f"{_COLOURIZER}:DeOldify"})
