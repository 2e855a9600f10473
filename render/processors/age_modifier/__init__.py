"""The age modifier: each selected face made older or younger (FaceFusion's ``age_modifier``):
FRAN re-ages the face by the years between its estimated age (the FairFace classifier's bucket)
and that age plus ``direction``; StyleGANEX regenerates the face with its surroundings along its
age editing direction. It runs where ``processors`` names it (``processors=swap,age_modifier``).

This module is the processor's declaration; the classes live beside it (``fran.py``,
``styleganex.py``).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...options import option, precision_option
from ..spec import Processor

#: the FairFace classifier fran's manifest entry ``needs`` for the face's age
CLASSIFIER = "classifier-fairface"
_KEYED = "unless-default"


@dataclass(frozen=True)
class AgeModifier:
    model: str = option("fran", "age modifier: fran (FRAN re-ages the face from its estimated "
                        "age) or styleganex_age (StyleGANEX regenerates the face with its "
                        "surroundings; non-commercial)", keyed=_KEYED)
    precision: str = precision_option("the age modifier's")
    direction: int = option(0, "older (+) or younger (-), -100..100: fran adds this many years "
                            "to the face's estimated age, styleganex_age edits by this share of "
                            "its full strength", min=-100, max=100, keyed=_KEYED)


_HERE = "render.processors.age_modifier"

PROCESSOR = Processor("age_modifier", AgeModifier, drivers={
    "age-modifier-fran": f"{_HERE}.fran:FranAgeModifier",
    "age-modifier-styleganex": f"{_HERE}.styleganex:StyleganexAgeModifier",
}, helpers=(CLASSIFIER,))
