"""A DFM model's contract (DeepFaceLab's ``export_dfm``, as FaceFusion 3.8.1's deep_swapper
drives it; ``shared/docs/facefusion-processors.md`` §7):

- input ``in_face:0`` (N, H, W, 3) float32: the crop in **BGR**, NHWC, 0..1, after an unsharp
  mask (``addWeighted(crop, 1.75, GaussianBlur(crop, σ 2), −0.75)``, uint8 saturating);
- input ``morph_value:0`` (1,) float32, only in graphs that declare it (AMP models): morph/100;
- outputs taken by position: [0] the target's face mask, [1] the face (N, H, W, 3) BGR 0..1,
  [2] the source's face mask, the masks (N, H, W, 1) in 0..1;
- the paste mask: the minimum of the two masks, clipped to 0..1, eroded twice by a 3 × 3
  ellipse, then blurred with σ 6.25 (in crop pixels).
"""
from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from ...errors import ModelError

FACE_INPUT = "in_face:0"
MORPH_INPUT = "morph_value:0"
#: the paste mask's erosion (a 3 × 3 ellipse, twice) and blur
ERODE_KERNEL = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (3, 3))
ERODE_TIMES = 2
MASK_SIGMA = 6.25


@dataclass(frozen=True)
class DfmGraph:
    """What a DFM graph declares: its crop side, whether it has a morph input and the batch it
    takes (None: any)."""

    side: int
    morph: bool
    batch: int | None


def read_graph(session, name: str, input_size: int) -> DfmGraph:
    """The graph of model ``name`` checked against the DFM contract and its manifest's
    ``input_size`` (the side the crop is declared to be; the graph must agree)."""
    inputs = {i.name: i for i in session.get_inputs()}
    face = inputs.get(FACE_INPUT)
    if face is None or len(face.shape) != 4 or len(session.get_outputs()) != 3:
        raise ModelError(f"model {name} is not a DFM graph: it needs an input {FACE_INPUT} "
                         f"(N, H, W, 3) and three outputs (has inputs {sorted(inputs)}, "
                         f"{len(session.get_outputs())} outputs)")
    n, h, w, c = face.shape
    fixed = [d for d in (h, w) if isinstance(d, int) and d > 0]    # else symbolic: any side
    if (isinstance(c, int) and c != 3) or any(d != input_size for d in fixed):
        raise ModelError(f"model {name}: its graph's {FACE_INPUT} is {list(face.shape)} but its "
                         f"manifest entry says input_size {input_size} (square crops of that "
                         f"side, NHWC): fix input_size in the manifest overlay")
    return DfmGraph(input_size, MORPH_INPUT in inputs,
                    int(n) if isinstance(n, int) and n > 0 else None)


def model_input(crops: np.ndarray) -> np.ndarray:
    """(N, S, S, 3) BGR uint8 crops → ``in_face:0``: each crop sharpened (uint8 saturating, as
    OpenCV's addWeighted rounds), /255, float32, BGR NHWC."""
    sharp = np.stack([cv2.addWeighted(c, 1.75, cv2.GaussianBlur(c, (0, 0), 2), -0.75, 0)
                      for c in crops])
    return (sharp / 255.0).astype(np.float32)


def face_output(face: np.ndarray) -> np.ndarray:
    """Output [1] (N, S, S, 3) BGR 0..1 → uint8 crops, rounded (FaceFusion truncates: its faces
    come out darker by half a level on average)."""
    return np.rint(np.clip(np.asarray(face, np.float32) * 255.0, 0.0, 255.0)).astype(np.uint8)


def paste_mask(source_mask: np.ndarray, target_mask: np.ndarray) -> np.ndarray:
    """Outputs [2] and [0] → (N, S, S) float32 paste masks: their minimum, clipped, eroded,
    blurred."""
    both = np.minimum(np.asarray(source_mask, np.float32), np.asarray(target_mask, np.float32))
    both = np.clip(both.reshape(both.shape[:3]), 0.0, 1.0)
    return np.stack([cv2.GaussianBlur(cv2.erode(m, ERODE_KERNEL, iterations=ERODE_TIMES),
                                      (0, 0), MASK_SIGMA) for m in both])
