"""Pixel boost: a swapper of side S run over a crop of side P = n·S (``swap.pixel_boost``).

The crop is warped at P with the model's template scaled to P (the face keeps its framing), cut
into n² interleaved (polyphase) tiles of side S — tile k = a·n + b holds the pixels
crop[a + n·i, b + n·j] — each tile swapped on its own with the same source, and every pixel put
back where it came from (FaceFusion 3.8's ``pixel_boost``: same tile order, so real models
behave as they do there). A 128-px inswapper face then covers a 512-px face in a 1080p frame
with 512 px of detail instead of a 128-px crop stretched over it.
"""
from __future__ import annotations

import numpy as np

from ...errors import ConfigError
from . import PIXEL_BOOST

#: the crop sides pixel boost offers; a model takes those that are multiples of its own side
BOOST_SIZES = tuple(int(s) for s in PIXEL_BOOST if s.isdigit())


def allowed_sizes(native: int) -> tuple[int, ...]:
    """The boost sides a model of side ``native`` takes (its own side first)."""
    return tuple(p for p in BOOST_SIZES if p >= native and p % native == 0) or (native,)


def boost_size(setting: str, native: int, model: str) -> int | None:
    """The crop side for ``swap.pixel_boost=setting``: the model's side for off, None for auto
    (chosen per face by :func:`auto_size`)."""
    if setting in ("", "off"):
        return native
    if setting == "auto":
        return None
    allowed = allowed_sizes(native)
    if int(setting) not in allowed:
        raise ConfigError(f"swap.pixel_boost={setting}: {model} ({native} px) takes "
                          f"{', '.join(str(s) for s in allowed)} or auto")
    return int(setting)


def auto_size(face_px: float, native: int) -> int:
    """The smallest allowed side at least the face's size in the frame (``face_px``: the frame
    pixels the model's own crop covers); the largest where none is."""
    allowed = allowed_sizes(native)
    return next((p for p in allowed if p >= face_px), allowed[-1])


def implode(crops: np.ndarray, n: int) -> np.ndarray:
    """(N, n·S, n·S, C) → (N·n², S, S, C): each crop's n² polyphase tiles, tile a·n + b in place
    k = a·n + b, crop after crop."""
    if n == 1:
        return crops
    count, side, _, ch = crops.shape
    s = side // n
    tiles = crops.reshape(count, s, n, s, n, ch).transpose(0, 2, 4, 1, 3, 5)
    return np.ascontiguousarray(tiles).reshape(count * n * n, s, s, ch)


def explode(tiles: np.ndarray, n: int) -> np.ndarray:
    """The inverse of :func:`implode`."""
    if n == 1:
        return tiles
    total, s, _, ch = tiles.shape
    count = total // (n * n)
    crops = tiles.reshape(count, n, n, s, s, ch).transpose(0, 3, 1, 4, 2, 5)
    return np.ascontiguousarray(crops).reshape(count, s * n, s * n, ch)
