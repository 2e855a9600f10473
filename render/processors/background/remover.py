"""The background remover as a frame processor: the frame padded to a square, never stretched
(``processors.squares``), shrunk to the model's side with INTER_AREA (FaceFusion's linear
resize aliases at 1080p), normalised as its model was trained (the manifest's ``params``: mean
and std per RGB channel after /255), the model's matte cropped back to the frame; then the
despill, and the matte either as the frame's alpha channel or laid over the fill (a colour or a
picture).

Contracts (FaceFusion 3.8.1's background_remover): ``matting`` — ``input`` (1,3,S,S) →
``[0]`` (1,1,S,S) in [0,1]; ``matting-u2net-cloth`` — ``[0]`` (1,C,S,S) class scores, any class
but 0 is foreground; ``matting-corridor-key`` — ``input`` (1,4,S,S), the fourth channel a coarse
key from the green screen, → (matte, frame) by position, the frame replacing the RGB.
"""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import cv2
import numpy as np

from ...errors import ConfigError, ModelError
from ...faces.swap import input_dtype
from ...model_handle import ProcessorModel
from ..base import FrameProcessor, FramesFn
from ..spec import Step
from ..squares import crop_back, pad_square


def parse_colour(text: str, key: str, channels: tuple[int, ...] = (3, 4)) -> tuple[int, ...]:
    """``R,G,B`` (or ``R,G,B,A``) of 0-255 values; one clear line for anything else."""
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        values = ()
    if len(values) not in channels or not all(0 <= v <= 255 for v in values):
        shape = ",".join("RGBA"[:channels[0]]) + ("[,A]" if 4 in channels and 3 in channels
                                                    else "")
        raise ConfigError(f"{key}={text}: expected {shape} with each value 0-255")
    return values


def despill(bgr: np.ndarray, colour: tuple[int, ...]) -> np.ndarray:
    """FaceFusion's despill: each channel pulled towards half the sum of the other two, by the
    screen colour's weight of that channel and its alpha (the whole frame, float, rounded)."""
    rgb = np.array(colour[:3], np.float32)
    strength = (colour[3] if len(colour) == 4 else 255) / 255.0
    weights = rgb[::-1] / max(float(rgb.max()), 1.0)            # BGR order
    x = bgr.astype(np.float32)
    others = 0.5 * (np.roll(x, 1, axis=2) + np.roll(x, -1, axis=2))
    limit = np.minimum(x, others)
    out = x + (limit - x) * (strength * weights)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def cover(picture: np.ndarray, width: int, height: int) -> np.ndarray:
    """``picture`` scaled to cover ``width`` × ``height`` and cropped about its centre."""
    ph, pw = picture.shape[:2]
    scale = max(width / pw, height / ph)
    w, h = max(width, round(pw * scale)), max(height, round(ph * scale))
    scaled = cv2.resize(picture, (w, h), interpolation=cv2.INTER_AREA if scale < 1
                        else cv2.INTER_LINEAR)
    x, y = (w - width) // 2, (h - height) // 2
    return scaled[y:y + height, x:x + width]


class BackgroundRemover(FrameProcessor):
    """One matting model over every frame; ``background.*`` says where the matte goes."""

    def __init__(self, step: Step, model: ProcessorModel) -> None:
        super().__init__(step, model)
        entry = model.entry
        self.contract = entry.contract
        self.side = int(entry.input_size or 512)
        self._fixed: int | None = None
        self.mean = np.array(entry.params.get("mean", (0.0, 0.0, 0.0)), np.float32)
        self.std = np.array(entry.params.get("std", (1.0, 1.0, 1.0)), np.float32)
        opts = step.options
        self.matte = str(opts["output"])
        self.fill = parse_colour(str(opts["fill"]), "background.fill", (3,))
        self.despill = parse_colour(str(opts["despill"]), "background.despill") \
            if opts["despill"] else None
        self.picture_path = str(opts["image"])
        self.picture, self.picture_sha256 = self._read_picture(self.picture_path) \
            if self.picture_path else (None, "")

    @staticmethod
    def _read_picture(path: str) -> tuple[np.ndarray, str]:
        """The picture and the SHA-256 of the bytes it was decoded from."""
        try:
            data = Path(path).expanduser().read_bytes()
        except OSError:
            data = b""
        picture = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR) if data else None
        if picture is None:
            raise ConfigError(f"background.image={path}: not a picture render can read (png, "
                              f"jpg, webp, bmp or tiff)")
        return picture, hashlib.sha256(data).hexdigest()

    def files(self) -> dict[str, str]:
        return {"background.image": self.picture_sha256} if self.picture is not None else {}

    def describe_matte(self, alpha: bool) -> str:
        if alpha:
            return "background: the matte is the output's alpha channel"
        behind = f"the picture {self.picture_path}" if self.picture is not None else \
            f"the colour {','.join(map(str, self.fill))} (background.fill)"
        why = "background.output=fill" if self.matte == "fill" else \
            "the output's format carries no alpha channel (png, webp, webm and mov do)"
        return f"background: the person is laid over {behind}: {why}"

    def bind(self, alpha: bool) -> FramesFn:
        def run(frames: list[np.ndarray]) -> list[np.ndarray]:
            return [self._frame(frame, alpha) for frame in frames]
        return run

    def run(self, frames: list[np.ndarray]) -> list[np.ndarray]:
        return self.bind(False)(frames)

    def matte_of(self, bgr: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """The frame's matte (float32 in [0,1], the frame's size) and, for a model that gives
        one, its frame (BGR uint8), else None."""
        height, width = bgr.shape[:2]
        padded = pad_square(bgr)
        side = self._side()
        shrink = cv2.INTER_AREA if padded.shape[0] > side else cv2.INTER_LINEAR
        rgb = cv2.resize(padded, (side, side), interpolation=shrink)[..., ::-1]
        x = (rgb.astype(np.float32) / np.float32(255.0) - self.mean) / self.std
        x = x.transpose(2, 0, 1)[None]
        if self.contract == "matting-corridor-key":
            x = np.concatenate([x, self._coarse_key(padded, side, shrink)[None, None]], axis=1)
        inp = self.lazy.session.get_inputs()[0]
        outputs = self.lazy.run({inp.name: np.ascontiguousarray(x, input_dtype(inp.type))})
        raw = outputs[0][0].astype(np.float32)
        if self.contract == "matting-u2net-cloth":
            matte = (np.argmax(raw, axis=0) > 0).astype(np.float32)
        else:
            matte = np.clip(raw.reshape(side, side), 0.0, 1.0)
        keyed = None
        if self.contract == "matting-corridor-key":
            frame = np.clip(np.rint(outputs[1][0].astype(np.float32).transpose(1, 2, 0) * 255.0),
                            0, 255).astype(np.uint8)
            keyed = np.ascontiguousarray(crop_back(frame, height, width)[..., ::-1])
        return np.clip(crop_back(matte, height, width), 0.0, 1.0), keyed

    def _side(self) -> int:
        """The model's input side: the graph's where it is fixed (a manifest's other
        ``input_size`` is one line), else the manifest's."""
        if self._fixed is None:
            shape = list(self.lazy.session.get_inputs()[0].shape)
            fixed = shape[2] if len(shape) == 4 and isinstance(shape[2], int) else 0
            if fixed and fixed != self.side:
                raise ModelError(f"background.model={self.step.model}: its graph takes "
                                 f"{fixed}-px frames, its manifest entry says input_size "
                                 f"{self.side}: correct the entry")
            self._fixed = fixed or self.side
        return self._fixed

    @staticmethod
    def _coarse_key(padded: np.ndarray, side: int, shrink: int) -> np.ndarray:
        """corridor_key's fourth channel: 1 − clip(2·(G − max(R, B))), at full size, resized."""
        x = padded.astype(np.float32) / np.float32(255.0)
        bias = x[..., 1] - np.maximum(x[..., 0], x[..., 2])
        coarse = 1.0 - np.clip(2.0 * bias, 0.0, 1.0)
        return cv2.resize(coarse, (side, side), interpolation=shrink)

    def _frame(self, frame: np.ndarray, alpha: bool) -> np.ndarray:
        bgr = np.ascontiguousarray(frame[..., :3])
        matte, keyed = self.matte_of(bgr)
        if keyed is not None:
            bgr = keyed
        if self.despill is not None:
            bgr = despill(bgr, self.despill)
        if alpha:
            a = np.rint(matte * 255.0).astype(np.uint8)
            if frame.shape[2] == 4:
                a = np.minimum(a, frame[..., 3])
            return np.dstack([bgr, a])
        m = matte[..., None]
        out = bgr.astype(np.float32) * m + self._behind(*bgr.shape[:2]) * (1.0 - m)
        return np.clip(np.rint(out), 0, 255).astype(np.uint8)

    @functools.lru_cache(maxsize=2)
    def _behind(self, height: int, width: int) -> np.ndarray:
        """What the person is laid over, as float32: the picture covering a frame of this size
        (scaled once per size, not per frame), else the fill colour (BGR)."""
        if self.picture is not None:
            return cover(self.picture, width, height).astype(np.float32)
        return np.array(self.fill[::-1], np.float32)
