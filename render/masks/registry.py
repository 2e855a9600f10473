"""The mask models: the keys that name them, the contracts each takes and the class driving each
contract, imported on first use.

Light on purpose: the manifest asks it which contracts are maskers without importing ONNX
Runtime or the maskers themselves.
"""
from __future__ import annotations

from ..model_handle import PartRegistry

MASKS = PartRegistry(
    drivers={"occluder-xseg": "render.masks.occlusion:OcclusionMask",
             "parser-bisenet": "render.masks.region:RegionMask"},
    keys={"mask.occluder": frozenset({"occluder-xseg"}),
          "mask.parser": frozenset({"parser-bisenet"})},
    roles={"mask.occluder": "occlusion", "mask.parser": "region"},
)
