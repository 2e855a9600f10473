"""A chain step's masks from ``mask.*``: which are computed before the step runs (on the crop it
is given) and which after (on its result), as FaceFusion does. The step says which apply:

- every step: the box mask (``mask.type`` and ``blur``; with ``padding`` and the per-side
  paddings where the step asks for them — a swapper, as FaceFusion's — else none) and the
  occlusion masks (several as one: their minimum, softened once), on the crop before the step;
- steps that ask for them (a swapper): the region and area masks, on the step's result (an
  enhancer keeps the face it is given, so those would cut nothing new), and the keep mask
  (``mask.keep``), on the crop before the step: it is the target's mouth that is kept.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

from ..faces.mask import NO_SIDES, PasteMask, paste_masks
from ..model_handle import ModelEntry, ProcessorModel
from .registry import MASKS
from .area import AreaMask
from .keep import KeepMask
from .model import ModelMask
from .occlusion import OcclusionMask, Occluders
from .region import RegionMask

if TYPE_CHECKING:
    from ..options import Mask


def step_masks(mask: Mask, size: int, models: Sequence[ModelMask], *, padded: bool,
               on_result: bool) -> tuple[list[PasteMask], list[PasteMask]]:
    """(before, after) for a step of crop side ``size``; ``models`` are the loaded occlusion and
    region masks; ``padded``: the box mask takes the paddings; ``on_result``: the region and
    area masks apply, on the step's result, and the keep mask, on its crop."""
    if padded:
        sides = (mask.padding_top, mask.padding_right, mask.padding_bottom, mask.padding_left)
        before: list[PasteMask] = paste_masks(mask.type, size, mask.padding, mask.blur, sides)
    else:
        before = paste_masks(mask.type, size, 0.0, mask.blur, NO_SIDES)
    occluders = [m for m in models if isinstance(m, OcclusionMask)]
    if occluders:
        before.append(Occluders(occluders))
    before += [m for m in models if not m.after_swap and m not in occluders]
    if mask.keep and on_result:
        parser = next((m for m in models if isinstance(m, RegionMask)), None)
        before.append(KeepMask(mask.keep, parser))
    after: list[PasteMask] = [m for m in models if m.after_swap] if on_result else []
    if mask.areas and on_result:
        after.append(AreaMask(mask.areas))
    return before, after


def load_masks(named: Sequence[tuple[str, str]], mask: Mask,
               entry_for: Callable[[str, str, frozenset[str]], ModelEntry],
               model_for: Callable[[ModelEntry], ProcessorModel]) -> list[ModelMask]:
    """The occlusion and region masks of ``named`` ((key, manifest name): ``mask.occluder``,
    ``mask.parser``), each driven by the class its manifest contract picks; ``entry_for(key,
    name, contracts)`` gives the verified entry (its contract checked against those ``key``
    takes), ``model_for(entry)`` its model."""
    return [MASKS.driver(entry.contract)(MASKS.roles[key], model_for(entry), mask)
            for key, name in named for entry in (entry_for(key, name, MASKS.keys[key]),)]
