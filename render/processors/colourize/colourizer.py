"""The frame colourisers: DDColor and DeOldify over whole frames, each frame padded to the model's
square (never stretched) and given back its own lightness.

Both run the same way, and differ in what the model takes and gives:

1. the frame's grey (``BGR2GRAY``) is padded to a square of side ``max(w, h)``, centred, with
   ``BORDER_REFLECT_101`` (the picture mirrored about its edge pixels: the model sees more of
   the picture, not a band of one colour), and resized to ``colourize.size`` (INTER_LINEAR);
2. the model's colours are resized back to the padded square (INTER_LINEAR) and the frame is
   cropped back out of it, so a pixel's colour comes from the place the model saw it;
3. the colours' Lab a, b are merged with the frame's own L (float Lab of the frame / 255),
   converted back to BGR, ·255, rounded; ``colourize.blend`` lays that over the frame as
   ``addWeighted(frame, 1 − blend, colour, blend)`` (rounded).

DDColor takes the grey as RGB in 0..1 (through Lab with a = b = 0, as its authors feed it) and
gives a, b. DeOldify takes the grey as RGB in 0..255 and gives an RGB picture, clipped to
0..255 and rounded (FaceFusion lets values outside wrap round in its uint8 cast) before its a, b
are taken; the lightness is the frame's L (FaceFusion takes the frame's blue channel for it).

A frame with an alpha channel (a background step before) is colourised in its BGR and keeps its
alpha. A frame that already has colour is re-coloured from its lightness, as FaceFusion does;
the first frames the colouriser sees are measured and one line says so.
"""
from __future__ import annotations

import logging
import threading

import cv2
import numpy as np

from ...errors import ModelError
from ...faces.blob import owned_float32
from ...faces.swap import input_dtype
from ...model_handle import ProcessorModel, accepts_batch, run_batched
from ..base import FrameProcessor
from ..squares import crop_back, pad_square
from ..spec import Step

log = logging.getLogger(__name__)

#: mean HSV saturation (0..255) of the first frames above which the target is told to have colour
COLOURFUL = 16
#: how many of the first frames are measured, and the step between the pixels measured
_MEASURED_FRAMES = 8
_MEASURED_STEP = 4


def back_to_frame(planes: np.ndarray, height: int, width: int) -> np.ndarray:
    """A model output (C, s, s) float → (height, width, C) float (:func:`squares.crop_back`)."""
    out = crop_back(planes.transpose(1, 2, 0), height, width)
    return out.reshape(height, width, -1)


def lightness(bgr: np.ndarray) -> np.ndarray:
    """L (0..100, float32) of a BGR uint8 picture, in float Lab of picture / 255."""
    return cv2.cvtColor(bgr.astype(np.float32) / np.float32(255.0), cv2.COLOR_BGR2LAB)[..., 0]


def merge_lab(light: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Float Lab planes → BGR uint8: ``LAB2BGR`` (clipped to 0..1), ·255, rounded."""
    lab = cv2.merge([light, np.ascontiguousarray(a, np.float32),
                     np.ascontiguousarray(b, np.float32)])
    bgr = cv2.cvtColor(lab, cv2.COLOR_LAB2BGR)
    return np.clip(np.rint(bgr * np.float32(255.0)), 0, 255).astype(np.uint8)


def saturation(frames: list[np.ndarray]) -> float:
    """Mean HSV saturation (0..255) of the first of ``frames`` (every few pixels)."""
    picked = [np.ascontiguousarray(f[::_MEASURED_STEP, ::_MEASURED_STEP, :3])
              for f in frames[:_MEASURED_FRAMES]]
    return float(np.mean([cv2.cvtColor(p, cv2.COLOR_BGR2HSV)[..., 1].mean() for p in picked]))


class Colourizer(FrameProcessor):
    """What both colourisers share: the square, the batches, the Lab merge, the blend, the alpha
    and the line about a target with colour. A subclass gives the model's input from the padded
    grey (:meth:`model_input`) and the a, b of its output at the frame's size (:meth:`colours`)."""

    recolours = True

    def __init__(self, step: Step, model: ProcessorModel) -> None:
        super().__init__(step, model)
        self.size = int(step.options["size"])
        self.blend = float(step.options["blend"])
        self._measured = False
        self._lock = threading.Lock()

    def model_input(self, grey: np.ndarray) -> np.ndarray:
        """The padded grey (side, side) uint8 → the model's (3, size, size) float32 input."""
        raise NotImplementedError

    def colours(self, output: np.ndarray, height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
        """One frame's model output (C, s, s) float32 → its a, b planes at the frame's size."""
        raise NotImplementedError

    def run(self, frames: list[np.ndarray]) -> list[np.ndarray]:
        if not frames:
            return []
        self._tell_colour(frames)
        if self.blend == 0.0:                # nothing of the colours shows: the frames as they are
            return list(frames)
        x = np.stack([self.model_input(pad_square(cv2.cvtColor(
            np.ascontiguousarray(f[..., :3]), cv2.COLOR_BGR2GRAY))) for f in frames])
        batch = self.memory.batch_size if self.memory is not None else 1
        outputs = run_batched(self._infer, x, batch, self._max_batch())
        return [self._finish(frame, out) for frame, out in zip(frames, outputs)]

    def _max_batch(self) -> int | None:
        """None when the graph takes any batch, else its fixed one; a graph whose side is fixed
        at another than ``colourize.size`` is refused in one line."""
        shape = self.lazy.session.get_inputs()[0].shape
        sides = [d for d in shape[2:4] if isinstance(d, int) and d > 0]
        if any(d != self.size for d in sides):
            taken = "x".join(map(str, shape[2:4]))
            raise ModelError(f"colourize.size={self.size}: {self.model.entry.name} takes only "
                             f"{taken} input; set colourize.size={sides[0]}")
        return None if accepts_batch(shape) else int(shape[0])

    def _infer(self, x: np.ndarray) -> np.ndarray:
        inp = self.lazy.session.get_inputs()[0]
        return owned_float32(self.lazy.run({inp.name: x.astype(input_dtype(inp.type))})[0])

    def _finish(self, frame: np.ndarray, output: np.ndarray) -> np.ndarray:
        """The frame with the model's colours under its own lightness, blended, alpha kept."""
        bgr = np.ascontiguousarray(frame[..., :3])
        height, width = bgr.shape[:2]
        a, b = self.colours(output, height, width)
        colour = merge_lab(lightness(bgr), a, b)
        if self.blend != 1.0:
            colour = cv2.addWeighted(bgr, 1.0 - self.blend, colour, self.blend, 0.0)
        if frame.shape[-1] == 3:
            return colour
        out = frame.copy()
        out[..., :3] = colour
        return out

    def _tell_colour(self, frames: list[np.ndarray]) -> None:
        """One line when the first frames the colouriser sees already have colour."""
        with self._lock:
            if self._measured:
                return
            self._measured = True
        found = saturation(frames)
        if found > COLOURFUL:
            log.info("colourize: the target already has colour (mean saturation %.0f of 255 on "
                     "its first frames): it is re-coloured from its lightness", found)


class DDColor(Colourizer):
    """DDColor (``colourizer-ddcolor``): the grey as RGB 0..1 in, a and b out."""

    def model_input(self, grey: np.ndarray) -> np.ndarray:
        small = cv2.resize(grey.astype(np.float32) / np.float32(255.0), (self.size, self.size),
                           interpolation=cv2.INTER_LINEAR)
        lab = cv2.cvtColor(cv2.cvtColor(small, cv2.COLOR_GRAY2RGB), cv2.COLOR_RGB2LAB)
        lab[..., 1:] = 0.0                   # its authors' input: the grey's L, no colour
        return cv2.cvtColor(lab, cv2.COLOR_LAB2RGB).transpose(2, 0, 1)

    def colours(self, output: np.ndarray, height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
        ab = back_to_frame(output[:2], height, width)
        return ab[..., 0], ab[..., 1]


class DeOldify(Colourizer):
    """DeOldify (``colourizer-deoldify``): the grey as RGB 0..255 in, an RGB picture out."""

    def model_input(self, grey: np.ndarray) -> np.ndarray:
        small = cv2.resize(grey, (self.size, self.size), interpolation=cv2.INTER_LINEAR)
        return np.repeat(small[None].astype(np.float32), 3, axis=0)

    def colours(self, output: np.ndarray, height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
        rgb = back_to_frame(output[:3], height, width)
        picture = np.clip(np.rint(rgb), 0, 255).astype(np.uint8)     # clipped, never wrapped
        lab = cv2.cvtColor(picture.astype(np.float32) / np.float32(255.0), cv2.COLOR_RGB2LAB)
        return lab[..., 1], lab[..., 2]
