"""The frame enhancer as a frame processor: every frame through a super-resolution model in
overlapping tiles (``tiles.py``), ``scale`` times larger, blended over the frame resized to the
new size.

The model's contract (``frame-enhancer``, FaceFusion's): ``input`` (N, 3, T, T) float32 RGB in
0..1 → output 0 (N, 3, T·s, T·s) RGB in 0..1. FaceFusion's fp16 files take and give float32 too:
the input is fed in the type the graph declares. The manifest entry's ``params`` give ``scale``,
``tile`` (edge, context included), ``pad`` (around the frame) and ``context`` (discarded per side).

The tile's edge is ``frame_enhance.tile`` where set, else the graph's input side where it is
fixed, else the manifest's ``tile``. The memory strategy sets only how many tiles go into one
call (its ``batch_size``, where the graph takes any batch, and at most :data:`CALL_PIXELS`
output pixels a call): the tile's edge changes the output's bytes and the memory strategy is not
in the job key, so the strategy must not choose it (a larger tile: ``frame_enhance.tile``).

A frame with an alpha channel (BGRA: a background step ran before) has its colour enhanced and
its alpha resized to the new size (INTER_LINEAR), as FaceFusion resizes its mask.
"""
from __future__ import annotations

import threading

import cv2
import numpy as np

from ...errors import ConfigError, ModelError
from ...faces.blob import owned_float32, unit_input
from ...faces.swap import input_dtype
from ...model_handle import ProcessorModel, accepts_batch, fill_batch
from ..base import FrameProcessor
from ..spec import Step
from .tiles import Tiling, enhance

#: output pixels of one model call at most (a batch of tiles): the activations of a
#: super-resolution network at its output size are what fills the device's memory
CALL_PIXELS = 4 << 20


def _fixed_side(shape: list) -> int | None:
    """The graph input's side where its height and width are fixed and equal, else None."""
    h, w = shape[2:4] if len(shape) == 4 else (None, None)
    if isinstance(h, int) and isinstance(w, int) and h > 0 and w > 0:
        return h if h == w else -1
    return None


class FrameEnhancer(FrameProcessor):

    def __init__(self, step: Step, model: ProcessorModel) -> None:
        super().__init__(step, model)
        entry, params = model.entry, model.entry.params
        if "scale" not in params:
            raise ModelError(f"frame_enhance.model={entry.name}: its manifest entry has no "
                             f"params.scale (frame-enhancer models need scale, tile, pad, context)")
        self.scale = int(params["scale"])
        self.context = int(params.get("context", 0))
        self.pad = int(params.get("pad", 0))
        self.blend = float(step.options["blend"])
        self.overlap = int(step.options["overlap"])
        self.option_tile = int(step.options["tile"])
        self.model_tile = int(params.get("tile") or entry.input_size or 256)
        self._check(self.option_tile or self.model_tile)
        self._resolved: tuple[Tiling, int] | None = None
        self._lock = threading.Lock()

    def _check(self, tile: int) -> Tiling:
        tiling = Tiling(tile, self.scale, self.context, self.overlap, self.pad)
        why = tiling.problem()
        if why is not None:
            key = "frame_enhance.tile" if self.option_tile else f"{self.step.model}'s tile"
            raise ConfigError(f"{key}={tile} with frame_enhance.overlap={self.overlap} and "
                              f"{self.step.model}'s context of {self.context} px: {why}")
        return tiling

    def output_size(self, width: int, height: int) -> tuple[int, int]:
        return width * self.scale, height * self.scale

    def tiling(self) -> tuple[Tiling, int]:
        """The tiling and the tiles per call, read from the graph on first use."""
        if self._resolved is None:
            with self._lock:
                if self._resolved is None:
                    self._resolved = self._resolve()
        return self._resolved

    def _resolve(self) -> tuple[Tiling, int]:
        inp = self.lazy.session.get_inputs()[0]
        side = _fixed_side(list(inp.shape))
        if side == -1:
            raise ModelError(f"frame_enhance.model={self.step.model}: its input {inp.shape} is "
                             f"not square")
        if side is not None and self.option_tile and self.option_tile != side:
            raise ConfigError(f"frame_enhance.tile={self.option_tile}: {self.step.model} takes "
                              f"only {side}-px tiles (set frame_enhance.tile=0 or {side})")
        tiling = self._check(self.option_tile or side or self.model_tile)
        if not accepts_batch(list(inp.shape)):
            return tiling, int(inp.shape[0])
        batch = self.memory.batch_size if self.memory is not None else 1
        return tiling, max(1, min(batch, CALL_PIXELS // (tiling.tile * self.scale) ** 2))

    def record(self) -> dict:
        row = super().record()
        row["scale"] = self.scale
        if self._resolved is not None:
            row["tiles"] = {"tile": self._resolved[0].tile, "context": self.context,
                            "overlap": self.overlap, "pad": self.pad,
                            "per_call": self._resolved[1]}
        return row

    def run(self, frames: list[np.ndarray]) -> list[np.ndarray]:
        return [self._frame(frame) for frame in frames]

    def _frame(self, frame: np.ndarray) -> np.ndarray:
        height, width = frame.shape[:2]
        size = self.output_size(width, height)
        colour = np.ascontiguousarray(frame[..., :3])
        if self.blend > 0.0:
            tiling, per_call = self.tiling()
            out = enhance(colour, self.enhance_tiles, tiling, per_call=per_call, finish=_to_bytes)
            if self.blend < 1.0:
                out = blend(out, cv2.resize(colour, size, interpolation=cv2.INTER_LINEAR),
                            self.blend)
        else:                   # nothing of the model's: the frame resized, the model not run
            out = cv2.resize(colour, size, interpolation=cv2.INTER_LINEAR)
        if frame.shape[2] == 4:
            alpha = cv2.resize(np.ascontiguousarray(frame[..., 3]), size,
                               interpolation=cv2.INTER_LINEAR)
            out = np.concatenate([out, alpha[..., None]], axis=2)
        return out

    def enhance_tiles(self, tiles: np.ndarray) -> np.ndarray:
        """One model call: (N, T, T, 3) BGR uint8 tiles → (N, T·s, T·s, 3) BGR float32 in 0..1."""
        inp = self.lazy.session.get_inputs()[0]
        n = len(tiles)
        if not accepts_batch(list(inp.shape)):        # a fixed batch: the last call filled up
            tiles = fill_batch(tiles, int(inp.shape[0]))
        y = self.lazy.run({inp.name: unit_input(tiles, input_dtype(inp.type))})[0][:n]
        expect = (n, 3, tiles.shape[1] * self.scale, tiles.shape[2] * self.scale)
        if tuple(y.shape) != expect:
            raise ModelError(f"frame_enhance.model={self.step.model} gave {tuple(y.shape)} for "
                             f"tiles {tuple(tiles.shape)}, not {expect} (its manifest scale is "
                             f"{self.scale})")
        return owned_float32(y)[:, ::-1].transpose(0, 2, 3, 1)


def _to_bytes(rows: np.ndarray) -> np.ndarray:
    """Float rows in 0..1 → uint8: ·255, clipped, rounded (in place)."""
    np.multiply(rows, 255.0, out=rows)
    np.clip(rows, 0.0, 255.0, out=rows)
    np.rint(rows, out=rows)
    return rows.astype(np.uint8)


def blend(enhanced: np.ndarray, resized: np.ndarray, share: float) -> np.ndarray:
    """``share`` of ``enhanced`` over ``resized`` (both uint8): rint(share·e + (1 − share)·r)."""
    out = enhanced.astype(np.float32) * np.float32(share)
    out += resized.astype(np.float32) * np.float32(1.0 - share)
    np.rint(out, out=out)
    return out.astype(np.uint8)
