"""The face editor: FaceFusion's 14 controls of each selected face's expression and head pose
(eyebrows, gaze, eye and lip opening, five of the mouth, head pitch, yaw and roll), made by
LivePortrait (its feature and motion extractors, eye and lip retargeters, stitcher and
generator). It runs where ``processors`` names it.

This module is the processor's declaration: its options (FaceFusion's names and ranges, each
−1..1, 0 = unchanged), what leaves it out of the chain (every control at 0) and what it needs
of the landmark step (the eye and lip open ratios are measured on the 68 landmarks). The class
lives beside it (``editor.py``), the controls' deltas in ``controls.py``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ...options import option, precision_option
from ..spec import Processor

_KEYED = "unless-default"


def _control(help: str) -> Any:
    return option(0.0, help, min=-1.0, max=1.0, keyed=_KEYED)


@dataclass(frozen=True)
class FaceEditor:
    model: str = option("live_portrait", "face editor model set (live-portrait contract: the "
                        "generator's entry, which needs the other five)", keyed=_KEYED)
    precision: str = precision_option("the generator's")
    eyebrow_direction: float = _control("eyebrow direction (FaceFusion's "
                                        "--face-editor-eyebrow-direction)")
    eye_gaze_horizontal: float = _control("eye gaze, sideways")
    eye_gaze_vertical: float = _control("eye gaze, up or down")
    eye_open_ratio: float = _control("eyes opened (> 0) or closed (< 0) by the eye retargeter; "
                                     "needs the 68 landmarks (landmark.model or "
                                     "landmark.estimator)")
    lip_open_ratio: float = _control("lips opened (> 0) or closed (< 0) by the lip retargeter; "
                                     "needs the 68 landmarks")
    mouth_grim: float = _control("mouth grim")
    mouth_pout: float = _control("mouth pout")
    mouth_purse: float = _control("mouth purse")
    mouth_smile: float = _control("smile (> 0) or its reverse")
    mouth_position_horizontal: float = _control("mouth moved sideways")
    mouth_position_vertical: float = _control("mouth moved up or down")
    head_pitch: float = _control("head pitch: turned up to 20 degrees about the horizontal axis")
    head_yaw: float = _control("head yaw: turned up to 60 degrees about the vertical axis")
    head_roll: float = _control("head roll: turned up to 15 degrees in the picture's plane")


#: the controls, in the section's order
CONTROLS = tuple(f.name for f in dataclasses.fields(FaceEditor)
                 if f.name not in ("model", "precision"))
#: the controls measured on the 68 landmarks (their retargeter's input)
LANDMARK_CONTROLS = ("eye_open_ratio", "lip_open_ratio")


def idle(section: FaceEditor) -> str:
    """Why a face editor with these controls changes nothing ("" when it changes something):
    with every control at 0 FaceFusion still sends each face through the generator, which
    only redraws it; here the step is left out."""
    if any(getattr(section, name) != 0.0 for name in CONTROLS):
        return ""
    return "every face_editor control is 0 (the faces would only be redrawn as they are)"


def landmark_uses(section: FaceEditor) -> list[str]:
    """The settings that need each face's 68 landmarks, as ``key=value``."""
    return [f"face_editor.{name}={getattr(section, name)}" for name in LANDMARK_CONTROLS
            if getattr(section, name) != 0.0]


#: the contracts of the models the generator's entry needs (its manifest ``needs``)
HELPERS = ("live-portrait-feature-extractor", "live-portrait-motion-extractor",
           "live-portrait-eye-retargeter", "live-portrait-lip-retargeter",
           "live-portrait-stitcher")

PROCESSOR = Processor("face_editor", FaceEditor, drivers={
    "live-portrait": "render.processors.face_editor.editor:FaceEditorProcessor"},
    helpers=HELPERS, idle=idle, landmarks=landmark_uses)
