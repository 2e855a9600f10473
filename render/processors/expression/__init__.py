"""The expression restorer: each selected face given back the expression it had in the target
frame as decoded (FaceFusion's ``expression_restorer``), after earlier steps (a swap) changed it.
LivePortrait redraws the current face (its feature volume, pose, scale and translation) with the
expression rows of the chosen areas taken from the original face. It runs where ``processors``
names it (``processors=swap,expression``).

This module is the processor's declaration: its options (FaceFusion's factor 0..100, default 80,
and its areas) and what leaves it out of the chain (factor 0, no area). The class lives beside it
(``restorer.py``).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...options import option, precision_option
from ..spec import Processor

_KEYED = "unless-default"
#: FaceFusion's expression restorer areas (its ``--expression-restorer-areas`` choices)
AREAS = ("upper-face", "lower-face")


@dataclass(frozen=True)
class Expression:
    model: str = option("live_portrait", "expression restorer model set (live-portrait "
                        "contract: the generator's entry; the feature and motion extractors it "
                        "needs run too)", keyed=_KEYED)
    precision: str = precision_option("the generator's")
    factor: int = option(80, "how much of the original expression comes back, 0..100 "
                         "(FaceFusion's --expression-restorer-factor): the original's share is "
                         "factor × 1.2 / 100, so 80 gives 0.96 and above 83 it overshoots",
                         min=0, max=100, keyed=_KEYED)
    areas: tuple[str, ...] = option(list(AREAS), "the face areas whose expression is restored "
                                    "(FaceFusion's --expression-restorer-areas); the rest of the "
                                    "expression stays the current face's", choices=AREAS,
                                    keyed=_KEYED)


def idle(section: Expression) -> str:
    """Why a restorer with these options changes nothing ("" when it changes something): with
    factor 0 or no area the driving expression is the face's own, and FaceFusion would only
    redraw the face."""
    if section.factor == 0:
        return "expression.factor is 0 (the faces would only be redrawn as they are)"
    if not section.areas:
        return "expression.areas is empty (the faces would only be redrawn as they are)"
    return ""


#: the contracts of the models the generator's entry needs that the restorer runs (the entry,
#: shared with the face editor, also needs its retargeters and stitcher)
HELPERS = ("live-portrait-feature-extractor", "live-portrait-motion-extractor")

PROCESSOR = Processor("expression", Expression, drivers={
    "live-portrait": "render.processors.expression.restorer:ExpressionRestorer"},
    helpers=HELPERS, idle=idle)
