"""Manifest contract → the face processor class that drives it, imported on first use.

Light on purpose: the manifest asks it which contracts are face processors without importing
ONNX Runtime or the processors themselves.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import FaceProcessor

#: the processors that ship: contract → "module:Class" (relative to this package)
BUILT_IN: dict[str, str] = {
    "swapper-inswapper": ".inswapper:InswapperProcessor",
    "swapper-hyperswap": ".embedding_swapper:EmbeddingSwapper",
    "swapper-simswap": ".embedding_swapper:EmbeddingSwapper",
    "swapper-simswap-unofficial": ".embedding_swapper:EmbeddingSwapper",
    "swapper-ghost": ".embedding_swapper:EmbeddingSwapper",
    "swapper-blendswap": ".image_swapper:ImageSwapper",
    "swapper-uniface": ".image_swapper:ImageSwapper",
    "enhancer-gfpgan": ".enhancer:FaceEnhancer",
    "enhancer-codeformer": ".enhancer:FaceEnhancer",
    "enhancer-gpen": ".enhancer:FaceEnhancer",
    "enhancer-restoreformer": ".enhancer:FaceEnhancer",
}

_added: dict[str, type[FaceProcessor]] = {}


def register(contract: str, cls: type[FaceProcessor]) -> None:
    """Drive models of ``contract`` with ``cls`` (a plug-in or a test's processor)."""
    _added[contract] = cls


def contracts() -> frozenset[str]:
    """Every contract a face processor drives."""
    return frozenset(BUILT_IN) | frozenset(_added)


def processor_class(contract: str) -> type[FaceProcessor] | None:
    """The class for ``contract``; None when no face processor drives it."""
    if contract in _added:
        return _added[contract]
    where = BUILT_IN.get(contract)
    if where is None:
        return None
    module, name = where.split(":")
    return getattr(importlib.import_module(module, __package__), name)
