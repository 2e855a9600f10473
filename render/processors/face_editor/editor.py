"""The face editor as a face processor: each face's crop through LivePortrait with FaceFusion's
controls (``face_editor.*``; the deltas in ``controls.py``).

The crop is ffhq_512 at 512 px with the face 1.5 times smaller (FaceFusion scales the five
points by 1.5 about the nose tip; here the template's points are pulled toward its nose tip by
1/1.5, ``faces.align``: the same crop up to a shift of a third of the nose tip's misfit). Per
face, as FaceFusion 3.8's ``apply_edit``:

1. the crop, halved by area, RGB / 255, through the feature and motion extractors;
2. the crop's keypoints ``kp_o = s·(kp@Rᵀ + e) + t``;
3. the expression edited and limited, the head rotation edited and limited (``controls.py``);
4. ``kp_e = s·(kp@R'ᵀ + e') + t``, plus the eye retargeter's answer times ``|eye_open_ratio|``
   and the lip retargeter's times ``|lip_open_ratio|`` (each fed ``kp_o``, the face's eye or lip
   open ratios from its 68 landmarks and the target opening: 0 closing, 0.6 eyes / 1.0 lips
   opening); a control at 0 adds nothing, so its retargeter is not run;
5. the stitcher's answer to (source = ``kp_e``, target = ``kp_o``) replaces ``kp_e``;
6. the generator moves the appearance from ``kp_o`` to ``kp_e``; its 512-px RGB 0..1 is the new
   crop (× 255, truncated, BGR).

Masks: the box mask without the paddings (FaceFusion's padding 0), and the occlusion masks as
on every step; no region or area mask (``mask_result`` False).
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from ...errors import ModelError
from ...model_handle import ProcessorModel, Session
from .. import live_portrait as lp
from ..base import FaceProcessor
from ..spec import Step
from . import LANDMARK_CONTROLS
from .controls import edit_expression, edit_rotation

#: the crop: ffhq_512 with its points pulled toward its nose tip by 1/1.5 (``faces.align``)
TEMPLATE = "ffhq_512_x1_5"
SIZE = 512
#: each retargeter: the landmarks of its open ratios (top, bottom, left, right per ratio) and the
#: opening it is asked for when the control is below 0 and when it is not
RETARGETERS = {
    "eye_open_ratio": ("live-portrait-eye-retargeter", ((37, 40, 39, 36), (43, 46, 45, 42)),
                       (0.0, 0.6)),
    "lip_open_ratio": ("live-portrait-lip-retargeter", ((62, 66, 54, 48),), (0.0, 1.0)),
}


def distance_ratio(landmarks: np.ndarray, top: int, bottom: int, left: int, right: int
                   ) -> float:
    """‖L[top] − L[bottom]‖ / (‖L[left] − L[right]‖ + 1e-6) on the (68, 2) landmarks (in
    FaceFusion's float32)."""
    lm = np.asarray(landmarks, np.float32)
    return float(np.linalg.norm(lm[top] - lm[bottom]) /
                 (np.linalg.norm(lm[left] - lm[right]) + 1e-6))


class FaceEditorProcessor(FaceProcessor):
    template = TEMPLATE
    size = SIZE

    def __init__(self, step: Step, model: ProcessorModel) -> None:
        super().__init__(step, model)
        self.values: Mapping[str, float] = {k: float(v) for k, v in step.options.items()}
        by_contract = {m.entry.contract: m for m in model.needs.values()}
        needed = ["live-portrait-feature-extractor", "live-portrait-motion-extractor",
                  "live-portrait-stitcher",
                  *(RETARGETERS[name][0] for name in LANDMARK_CONTROLS if self.values[name])]
        missing = [c for c in needed if c not in by_contract]
        if missing:
            raise ModelError(f"{model.entry.name}: a live-portrait model needs "
                             f"{', '.join(missing)} model(s) in its manifest entry's needs (it "
                             f"has {', '.join(model.entry.needs) or 'none'})")
        self.helpers: dict[str, Session] = {c: m.lazy for c, m in by_contract.items()}
        #: the stage passes each face's 68 landmarks (frame pixels) with its crop
        self.needs_landmarks = any(self.values[name] for name in LANDMARK_CONTROLS)

    @property
    def max_batch(self) -> int | None:
        """Any number of crops: they are edited one at a time (the graphs take one)."""
        return None

    def run(self, crops: np.ndarray, landmarks: np.ndarray | None = None) -> np.ndarray:
        """(N, 512, 512, 3) BGR uint8 crops (and the faces' (N, 68, 2) landmarks where an open
        ratio is set) → the edited crops."""
        if crops.shape[1:3] != (SIZE, SIZE):
            raise ModelError(f"face_editor takes {SIZE}-px crops, got {crops.shape[1]}")
        return np.stack([self.edit(crop, None if landmarks is None else landmarks[k])
                         for k, crop in enumerate(crops)])

    def edit(self, crop: np.ndarray, landmarks: np.ndarray | None) -> np.ndarray:
        x = lp.prepare(crop)
        features = lp.extract_features(self.helpers["live-portrait-feature-extractor"], x)
        motion = lp.extract_motion(self.helpers["live-portrait-motion-extractor"], x)
        original = motion.keypoints()
        edited = motion.keypoints(edit_rotation(motion.angles, self.values),
                                  edit_expression(motion.expression, self.values))
        for name in LANDMARK_CONTROLS:
            if self.values[name]:
                edited += self.retarget(name, original, landmarks)
        stitched = self.helpers["live-portrait-stitcher"].run(
            {"source": edited, "target": original})[0]
        edited = np.asarray(stitched, np.float32).reshape(1, lp.POINTS, 3)
        image = lp.generate(self.lazy, features, edited, original)
        if image.shape[1:] != (SIZE, SIZE):
            raise ModelError(f"{self.model.entry.name}: the generator made a "
                             f"{image.shape[2]}x{image.shape[1]} picture; the face editor "
                             f"pastes back {SIZE}x{SIZE}")
        return lp.to_crop(image)

    def retarget(self, name: str, original: np.ndarray, landmarks: np.ndarray | None
                 ) -> np.ndarray:
        """(1, 21, 3): the retargeter of control ``name`` fed the crop's keypoints, the face's
        open ratios and the opening asked for, times the control's magnitude (float64, added
        into the float32 keypoints as FaceFusion adds it)."""
        assert landmarks is not None, f"face_editor.{name} needs the faces' 68 landmarks"
        contract, ratios, (closing, opening) = RETARGETERS[name]
        v = self.values[name]
        x = np.concatenate([original.ravel(), [distance_ratio(landmarks, *r) for r in ratios],
                            [closing if v < 0 else opening]])
        out = self.helpers[contract].run({"input": x.reshape(1, -1).astype(np.float32)})[0]
        return (np.asarray(out, np.float32) * np.abs(np.float64(v))).reshape(1, lp.POINTS, 3)
