"""What the whole-frame processors whose models take a square share: the frame padded to a
centred square of side ``max(w, h)`` (mirrored about its edge pixels: the model sees more of the
picture, not a band of one colour) and the model's answer cropped back — never stretched, as
FaceFusion's colouriser and background remover stretch it."""
from __future__ import annotations

import cv2
import numpy as np

#: how a frame is padded to its square
PAD = cv2.BORDER_REFLECT_101


def square(height: int, width: int) -> tuple[int, int, int]:
    """The padded square of a ``width`` × ``height`` frame: its side and the frame's top and left
    offsets in it (centred; an odd remainder goes to the bottom or right)."""
    side = max(height, width)
    return side, (side - height) // 2, (side - width) // 2


def pad_square(image: np.ndarray) -> np.ndarray:
    """``image`` (H, W[, C]) padded to its square (:func:`square`) with :data:`PAD`."""
    height, width = image.shape[:2]
    side, top, left = square(height, width)
    return cv2.copyMakeBorder(image, top, side - height - top, left, side - width - left, PAD)


def crop_back(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """A model's answer on the square (s, s[, C]) → (height, width[, C]): resized to the frame's
    padded square (INTER_LINEAR) and the frame cropped out of it."""
    side, top, left = square(height, width)
    big = cv2.resize(np.ascontiguousarray(image), (side, side), interpolation=cv2.INTER_LINEAR)
    return big[top:top + height, left:left + width]
