"""Manifest contract → the mask class that drives a model of it, imported on first use; the
keys that name mask models and the contracts each takes.

Light on purpose: the manifest asks it which contracts are maskers without importing ONNX
Runtime or the maskers themselves.
"""
from __future__ import annotations

from ..model_handle import load_class

#: contract → "module:Class"
BUILT_IN: dict[str, str] = {
    "occluder-xseg": "render.masks.occlusion:OcclusionMask",
    "parser-bisenet": "render.masks.region:RegionMask",
}

#: the key naming a mask model → the contracts its model may have, and the report's role of
#: its masks
KEY_CONTRACTS: dict[str, frozenset[str]] = {
    "mask.occluder": frozenset({"occluder-xseg"}),
    "mask.parser": frozenset({"parser-bisenet"}),
}
ROLES = {"mask.occluder": "occlusion", "mask.parser": "region"}


def contracts() -> frozenset[str]:
    return frozenset(BUILT_IN)


def mask_class(contract: str) -> type:
    """The class for ``contract`` (one of :func:`contracts`)."""
    return load_class(BUILT_IN[contract])
