"""The face swapper: the source's identity put on each selected face (inswapper, hyperswap,
SimSwap, Ghost, BlendSwap, UniFace), with pixel boost, the identity weight and colour match.

This module is the processor's declaration (its options and the classes that drive each model
contract); the classes live beside it and are imported when a render loads them.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...options import option, precision_option
from ..spec import Processor

#: swap.pixel_boost: off (the model's side), auto (per face), or a crop side in pixels
PIXEL_BOOST = ("off", "auto", "128", "256", "384", "512", "768", "1024")


@dataclass(frozen=True)
class Swap:
    model: str = option("inswapper_128", "face swapper (a swapper contract: inswapper, hyperswap, "
                        "simswap, ghost, blendswap, uniface)")
    precision: str = precision_option("the swapper's", keyed="bytes")
    pixel_boost: str = option("off", "swap at this crop side, in tiles of the model's own side (a "
                              "multiple of it), for faces larger than the model's crop; auto = "
                              "the smallest side at least the face's size in the frame",
                              choices=PIXEL_BOOST, keyed="unless-default")
    weight: float = option(0.5, "identity weight: below 0.5 the result keeps more of the target "
                           "face's identity, above it more of the source's", min=0.0, max=1.0,
                           keyed="unless-default")
    color_match: str = option("off", "lab: move the swapped face's colour (mean and spread per "
                              "Lab channel, inside the face) to the target face's, smoothed over "
                              "each face track, so the skin matches the neck and hands",
                              choices=("off", "lab"), keyed="unless-default")


_EMBEDDING = "render.processors.swap.embedding_swapper:EmbeddingSwapper"
_IMAGE = "render.processors.swap.image_swapper:ImageSwapper"

PROCESSOR = Processor("swap", Swap, drivers={
    "swapper-inswapper": "render.processors.swap.inswapper:InswapperProcessor",
    "swapper-hyperswap": _EMBEDDING,
    "swapper-simswap": _EMBEDDING,
    "swapper-simswap-unofficial": _EMBEDDING,
    "swapper-ghost": _EMBEDDING,
    "swapper-blendswap": _IMAGE,
    "swapper-uniface": _IMAGE,
}, helpers=("converter-crossface",))
