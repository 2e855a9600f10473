"""A chain step's masks from ``mask.*``: which are computed before the step runs (on the crop it
is given) and which after (on its result), as FaceFusion does.

- every step: the box mask (``mask.type`` and ``blur``; a swapper's also with ``padding`` and the
  per-side paddings, an enhancer's with none, as FaceFusion's) and the occlusion masks (several
  as one: their minimum, softened once), on the crop before the step;
- swappers only: the region and area masks, on the swapped crop (an enhancer keeps the face it
  is given, so those would cut nothing new).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

from ..faces.mask import NO_SIDES, PasteMask, paste_masks
from ..models.manifest import ModelEntry
from ..processors.base import ProcessorModel
from . import registry
from .area import AreaMask
from .model import ModelMask
from .occlusion import OcclusionMask, Occluders

if TYPE_CHECKING:
    from ..config import Config

#: the report's role of each key's masks
ROLES = {"mask.occluder": "occlusion", "mask.parser": "region"}


def step_masks(cfg: Config, size: int, contract: str, models: Sequence[ModelMask]
               ) -> tuple[list[PasteMask], list[PasteMask]]:
    """(before, after) for a step of crop side ``size`` whose model has ``contract``;
    ``models`` are the loaded occlusion and region masks."""
    mask = cfg.mask
    swapper = contract.startswith("swapper-")
    if swapper:
        sides = (mask.padding_top, mask.padding_right, mask.padding_bottom, mask.padding_left)
        before: list[PasteMask] = paste_masks(mask.type, size, mask.padding, mask.blur, sides)
    else:
        before = paste_masks(mask.type, size, 0.0, mask.blur, NO_SIDES)
    occluders = [m for m in models if isinstance(m, OcclusionMask)]
    if occluders:
        before.append(Occluders(occluders))
    before += [m for m in models if not m.after_swap and m not in occluders]
    after: list[PasteMask] = [m for m in models if m.after_swap] if swapper else []
    if mask.areas and swapper:
        after.append(AreaMask(mask.areas))
    return before, after


def load_masks(cfg: Config, entry_for: Callable[[str, str, frozenset[str]], ModelEntry],
               model_for: Callable[[ModelEntry], ProcessorModel]) -> list[ModelMask]:
    """The occlusion and region masks ``mask.occluder`` and ``mask.parser`` name, each driven by
    the class its manifest contract picks; ``entry_for(key, name, contracts)`` gives the verified
    entry (its contract checked against those ``key`` takes), ``model_for(entry)`` its model."""
    masks: list[ModelMask] = []
    for key, name in registry.named_models(cfg):
        entry = entry_for(key, name, registry.contracts_for(key))
        cls = registry.mask_class(entry.contract)
        assert cls is not None
        masks.append(cls(ROLES[key], model_for(entry), cfg.mask))
    return masks
