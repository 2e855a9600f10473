"""The expression restorer as a face processor: each face's current crop (after the steps before
it, a swap) redrawn by LivePortrait with the expression of the same face in the frame as decoded
(``expression.*``; FaceFusion 3.8's ``expression_restorer``).

The crop is arcface_128 at 512 px. The face stage hands the step, beside each current crop, the
crop of the frame as decoded, aligned at the face's own points there (``needs_original``): the
right face also where a frame step before it resized the frames (FaceFusion warps the original
frame with the points scaled to the resized one, its defect §12-1). Per face, as FaceFusion's
``apply_restore``:

1. both crops halved by area, RGB / 255; the current one through the feature extractor (the
   appearance) and the motion extractor (pitch, yaw, roll, scale, translation, expression ``e_p``
   and canonical keypoints ``kp``), the original one through the motion extractor for its
   expression ``e_t`` (the driving expression; the rest of its motion is not used);
2. ``e_t``'s rows outside the chosen areas, and rows 0, 4, 5, 8, 9 always, replaced by ``e_p``'s;
3. ``e = limit(e_t·f + e_p·(1 − f))`` with ``f = factor × 1.2 / 100`` (in float32);
4. the generator moves the appearance from ``s·(kp@Rᵀ + e_p) + t`` (fed as ``target``) to
   ``s·(kp@Rᵀ + e) + t`` (fed as ``source``: FaceFusion's names, the reverse of the usual ones);
   its 512-px RGB 0..1 is the new crop (× 255, truncated, BGR).

Masks: the box mask without the paddings (FaceFusion's padding 0) and the occlusion masks, both
on the current crop; no region or area mask (``mask_result`` False).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ...errors import ModelError
from ...model_handle import ProcessorModel, Session
from .. import live_portrait as lp
from ..base import FaceProcessor
from ..spec import Step
from . import HELPERS

TEMPLATE = "arcface_128"
SIZE = 512
#: LivePortrait's expression rows of each area (FaceFusion's ``restrict_expression_areas``)
AREA_ROWS = {"upper-face": (1, 2, 6, 10, 11, 12, 13, 15, 16),
             "lower-face": (3, 7, 14, 17, 18, 19, 20)}
#: the rows that are always the current face's, whatever the areas
KEPT_ROWS = (0, 4, 5, 8, 9)


def original_share(factor: int) -> float:
    """The driving expression's share for ``expression.factor``: FaceFusion's
    ``interp(factor, [0, 100], [0, 1.2])``."""
    return float(np.interp(float(factor), [0.0, 100.0], [0.0, 1.2]))


def restored_expression(driving: np.ndarray, current: np.ndarray, areas: Sequence[str],
                        share: float) -> np.ndarray:
    """(1, 21, 3) float32: the rows of ``areas`` of the ``driving`` expression mixed with the
    ``current`` one by ``share`` (the other rows the current one's), limited to LivePortrait's
    range — FaceFusion's float32 arithmetic (a Python float times a float32 array)."""
    driving = np.array(driving, np.float32)
    current = np.asarray(current, np.float32)
    for area, rows in AREA_ROWS.items():
        if area not in areas:
            driving[:, rows] = current[:, rows]
    driving[:, KEPT_ROWS] = current[:, KEPT_ROWS]
    mixed = driving * np.float32(share) + current * np.float32(1.0 - share)
    return lp.limit_expression(mixed)


class ExpressionRestorer(FaceProcessor):
    template = TEMPLATE
    size = SIZE
    #: the stage passes each face's crop of the frame as decoded beside its current crop
    needs_original = True

    def __init__(self, step: Step, model: ProcessorModel) -> None:
        super().__init__(step, model)
        self.share = original_share(step.options["factor"])
        self.areas = tuple(step.options["areas"])
        by_contract = {m.entry.contract: m for m in model.needs.values()}
        missing = [c for c in HELPERS if c not in by_contract]
        if missing:
            raise ModelError(f"{model.entry.name}: the expression restorer needs "
                             f"{', '.join(missing)} model(s) in its manifest entry's needs (it "
                             f"has {', '.join(model.entry.needs) or 'none'})")
        self.helpers: dict[str, Session] = {c: by_contract[c].lazy for c in HELPERS}
        #: the entry's needs it runs (the shared entry also needs the face editor's models)
        self.used = tuple(name for name, m in model.needs.items() if m.entry.contract in HELPERS)

    @property
    def max_batch(self) -> int | None:
        """Any number of crops: they are restored one at a time (the graphs take one)."""
        return None

    def record(self) -> dict[str, Any]:
        """The report's row, its ``needs`` the models the restorer ran."""
        row = super().record()
        row["needs"] = [r for r in row.get("needs", ()) if r.get("name") in self.used]
        return row

    def run(self, crops: np.ndarray, originals: np.ndarray | None = None) -> np.ndarray:
        """(N, 512, 512, 3) BGR uint8 current crops and the same faces' crops of the frames as
        decoded (None: the crops are those — nothing changed the frames before this step) →
        the restored crops."""
        if crops.shape[1:3] != (SIZE, SIZE):
            raise ModelError(f"expression takes {SIZE}-px crops, got {crops.shape[1]}")
        originals = crops if originals is None else originals
        return np.stack([self.restore(crop, original)
                         for crop, original in zip(crops, originals)])

    def restore(self, crop: np.ndarray, original: np.ndarray) -> np.ndarray:
        x = lp.prepare(crop)
        features = lp.extract_features(self.helpers["live-portrait-feature-extractor"], x)
        motion = lp.extract_motion(self.helpers["live-portrait-motion-extractor"], x)
        driving = lp.extract_motion(self.helpers["live-portrait-motion-extractor"],
                                    lp.prepare(original)).expression
        rotation = lp.rotation(*motion.angles)
        expression = restored_expression(driving, motion.expression, self.areas, self.share)
        image = lp.generate(self.lazy, features, motion.keypoints(rotation, expression),
                            motion.keypoints(rotation))
        if image.shape[1:] != (SIZE, SIZE):
            raise ModelError(f"{self.model.entry.name}: the generator made a "
                             f"{image.shape[2]}x{image.shape[1]} picture; the expression "
                             f"restorer pastes back {SIZE}x{SIZE}")
        return lp.to_crop(image)
