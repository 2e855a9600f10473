"""Which detected faces get swapped: one (largest), many (all), reference (same identity)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from .embed import identity_distance
from .types import Face


def select_faces(faces: list[Face], mode: str, *,
                 embed: Callable[[Face], np.ndarray] | None = None,
                 reference: np.ndarray | None = None, distance: float = 0.6) -> list[Face]:
    if not faces:
        return []
    if mode == "one":
        return [max(faces, key=lambda f: (f.area, f.score))]
    if mode == "many":
        return list(faces)
    if mode == "reference":
        if embed is None or reference is None:
            raise ValueError("reference selection needs an embedder and a reference embedding")
        return [f for f in faces if identity_distance(embed(f), reference) < distance]
    raise ValueError(f"unknown face selection mode {mode!r}")
