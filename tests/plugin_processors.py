"""A plug-in's processors, as a package outside render would ship them (tests/test_processors.py
installs them through an entry point): a face processor with a model and an option, a frame
processor with an option and none, and a frame processor that doubles the frame's size."""
from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from render.options import option
from render.processors.base import FaceProcessor, FrameProcessor
from render.processors.spec import Processor


@dataclass(frozen=True)
class Tint:
    model: str = option("tint_standin", "the tinting model (manifest name)")
    strength: float = option(0.1, "added to every channel of the face, as a share of full scale",
                             min=0.0, max=1.0)


class TintProcessor(FaceProcessor):
    """The crop through the model with its ``strength`` input: x/255 + strength, back to uint8."""

    template = "arcface_128"
    size = 128

    def run(self, crops: np.ndarray) -> np.ndarray:
        x = crops.transpose(0, 3, 1, 2).astype(np.float32) / np.float32(255.0)
        strength = np.array([self.step.options["strength"]], np.float32)
        y = self.lazy.run({"input": x, "strength": strength})[0]
        return np.clip(np.rint(y * 255.0), 0, 255).astype(np.uint8).transpose(0, 2, 3, 1)


@dataclass(frozen=True)
class FrameBorder:
    width: int = option(4, "pixels of black painted along each edge of the frame", min=1, max=64)


class BorderProcessor(FrameProcessor):
    def run(self, frames: list[np.ndarray]) -> list[np.ndarray]:
        w = self.step.options["width"]
        out = []
        for frame in frames:
            framed = frame.copy()
            framed[:w], framed[-w:], framed[:, :w], framed[:, -w:] = 0, 0, 0, 0
            out.append(framed)
        return out


@dataclass(frozen=True)
class FrameDouble:
    enabled: bool = option(True, "double the frame's width and height (nearest neighbour)")


class DoubleProcessor(FrameProcessor):
    def output_size(self, width: int, height: int) -> tuple[int, int]:
        return 2 * width, 2 * height

    def run(self, frames: list[np.ndarray]) -> list[np.ndarray]:
        return [cv2.resize(f, None, fx=2, fy=2, interpolation=cv2.INTER_NEAREST) for f in frames]


TINT = Processor("tint", Tint, drivers={"test-tint": f"{__name__}:TintProcessor"})
BORDER = Processor("frame_border", FrameBorder, kind="frame",
                   drivers={"": f"{__name__}:BorderProcessor"})
DOUBLE = Processor("frame_double", FrameDouble, kind="frame",
                   drivers={"": f"{__name__}:DoubleProcessor"})
