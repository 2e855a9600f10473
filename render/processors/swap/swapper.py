"""What every face swapper shares: the source identity prepared once per render, pixel boost
(``swap.pixel_boost``, ``pixel_boost.py``) and the identity weight (``swap.weight``).

A subclass says how its model takes the source (:meth:`SwapperProcessor.prepare_source`: the
inswapper latent, a normalised embedding, a converter's output) and how it runs a batch of
tiles (:meth:`SwapperProcessor.forward`); the crop's template and the model's side come from its
manifest entry.

The weight balances the prepared source with the target face's own identity, as FaceFusion's
``balance_source_embedding`` does: f = 0.35 − 0.7·w, source' = source·(1 − f) + target·f, the
target's raw ArcFace embedding L2-normalised except where the contract says raw. At the default
0.5, f = 0 and the target is never embedded.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...faces import align
from ...faces.blob import to_bgr_nhwc, to_rgb_nchw
from ...model_handle import ProcessorModel, run_batched
from ..base import FaceProcessor, Source
from ..spec import Step
from .pixel_boost import auto_size, boost_size, explode, implode


class SwapperProcessor(FaceProcessor):
    #: whether the target's embedding is normalised before the balance (ghost: raw)
    normalise_target = True
    mask_padding = True
    mask_result = True

    def __init__(self, step: Step, model: ProcessorModel) -> None:
        super().__init__(step, model)
        entry = model.entry
        self.template = entry.template or type(self).template
        #: the model's own side S
        self.native = int(entry.input_size or type(self).size)
        boost = boost_size(str(step.options["pixel_boost"]), self.native, entry.name)
        #: pixel boost auto: the side is chosen per face (crop_size)
        self.auto = boost is None
        self.size = boost if boost is not None else self.native
        self.weight = float(step.options["weight"])
        #: swap.color_match=lab: measured on the model's own crop
        if step.options["color_match"] == "lab":
            self.colour_crop = (self.template, self.native)

    @property
    def needs_target_identity(self) -> bool:  # type: ignore[override]
        """The stage embeds each target face for this step (the weight is not the default)."""
        return self.balance_factor != 0.0

    @property
    def balance_factor(self) -> float:
        return float(np.float32(np.interp(self.weight, [0.0, 1.0], [0.35, -0.35])))

    def crop_size(self, kps: np.ndarray) -> int:
        """With pixel boost auto: the smallest side the model takes that is at least the face's
        size in the frame (the frame pixels its own crop covers)."""
        if not self.auto:
            return self.size
        m = align.estimate(kps, self.template, self.native)
        scale = float(np.sqrt(abs(np.linalg.det(m[:, :2].astype(np.float64)))))
        return auto_size(self.native / max(scale, 1e-9), self.native)

    # -- what a swapper implements -----------------------------------------------------------------
    def prepare_source(self, embedding: np.ndarray) -> np.ndarray:
        """(1, D) float32: the model's source input for the raw source embedding."""
        raise NotImplementedError

    def forward(self, tiles: np.ndarray, sources: np.ndarray) -> np.ndarray:
        """(N, S, S, 3) BGR uint8 tiles and (N, D) sources → swapped tiles, one model call (N is
        within the model's batch)."""
        raise NotImplementedError

    @staticmethod
    def crop_input(tiles: np.ndarray, mean: np.ndarray | float, std: np.ndarray | float
                   ) -> np.ndarray:
        """BGR uint8 tiles → float32 RGB NCHW (x/255 − mean) / std (the contract's normalisation)."""
        x = to_rgb_nchw(tiles).astype(np.float32) / np.float32(255.0)
        return (x - np.float32(mean)) / np.float32(std)

    @staticmethod
    def crop_output(y: np.ndarray, signed: bool) -> np.ndarray:
        """A model's RGB NCHW output (in −1..1 when ``signed``, else 0..1) → BGR uint8 tiles."""
        y = np.asarray(y, np.float32)
        if signed:
            y = y * np.float32(0.5) + np.float32(0.5)
        return to_bgr_nhwc(np.rint(np.clip(y, 0.0, 1.0) * np.float32(255.0)).astype(np.uint8))

    # -- the chain's call ------------------------------------------------------------------------
    def bind(self, source: Source) -> Any:
        return self.bound(self.prepare_source(source.embedding).astype(np.float32).reshape(1, -1))

    def bound(self, prepared: np.ndarray) -> Any:
        """The chain's call with the source input ``prepared`` (one row)."""
        def run(crops: np.ndarray, targets: np.ndarray | None = None) -> np.ndarray:
            n = crops.shape[1] // self.native
            sources = self.balance(prepared, targets, len(crops))
            tiles = implode(crops, n)
            # the stage batched the crops; their n² tiles go through within the model's batch
            out = run_batched(self.forward, tiles, len(tiles), self.max_batch,
                              np.repeat(sources, n * n, axis=0))
            return explode(out, n)
        return run

    def balance(self, prepared: np.ndarray, targets: np.ndarray | None, count: int) -> np.ndarray:
        """(count, D): the prepared source for every face, balanced with ``targets`` (the faces'
        raw embeddings) when the weight is not the default."""
        f = self.balance_factor
        if f == 0.0 or targets is None:
            return np.repeat(prepared, count, axis=0)
        t = np.asarray(targets, np.float32).reshape(count, -1)
        if self.normalise_target:
            t = t / np.maximum(np.linalg.norm(t, axis=1, keepdims=True), 1e-12)
        return (prepared * np.float32(1.0 - f) + t * np.float32(f)).astype(np.float32)

    def record(self) -> dict[str, Any]:
        row = super().record()
        row.pop("pixel_boost", None)       # told as the side it swaps at, when not the model's
        if self.auto:
            row["pixel_boost"] = "auto"
        elif self.size != self.native:
            row["pixel_boost"] = self.size
        return row
