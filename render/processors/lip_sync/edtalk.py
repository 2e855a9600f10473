"""EDTalk as FaceFusion's lip syncer drives it (3.8.1 ``lip_syncer/core.py``), per face: the
512-px ffhq crop shrunk to 256 by area, RGB /255, NCHW float32 as ``target``; the frame's
log-mel slice (not scaled by the weight) as ``source`` (1, 1, 80, 16); ``weight`` (1,) the
lip syncer weight; its first output (1, 3, 256, 256) in 0..1, RGB, ×255 truncated, back to BGR
and enlarged to 512 by bicubic. Pasted through the step's box mask (with ``mask.padding`` and
the per-side paddings, as FaceFusion's edtalk) and occlusion masks.
"""
from __future__ import annotations

import cv2
import numpy as np

from .syncer import LipSyncer, check_inputs

SIDE = 256
CROP = 512


class EdTalkSyncer(LipSyncer):
    mask_padding = True

    def check_graph(self) -> None:
        check_inputs(self.lazy.session, self.model.entry.name, "lip-sync-edtalk",
                     {"source": [1, 1, 80, 16], "target": [1, 3, SIDE, SIDE], "weight": [1]})

    def sync(self, crops: np.ndarray, mels: np.ndarray, *asked: np.ndarray) -> np.ndarray:
        """(N, 512, 512, 3) BGR uint8, (N, 80, 16) log-mel → (N, 512, 512, 3) BGR uint8."""
        weight = np.array([self.weight], np.float32)
        out = np.empty_like(crops)
        for k, (crop, mel) in enumerate(zip(crops, mels)):
            small = cv2.resize(crop, (SIDE, SIDE), interpolation=cv2.INTER_AREA)
            target = (small[:, :, ::-1] / 255.0).transpose(2, 0, 1)[None].astype(np.float32)
            drawn = self.lazy.run({"source": mel[None, None], "target": target,
                                   "weight": weight})[0]
            face = (np.asarray(drawn[0], np.float32).transpose(1, 2, 0).clip(0, 1) * 255
                    ).astype(np.uint8)[:, :, ::-1]
            out[k] = cv2.resize(face, (CROP, CROP), interpolation=cv2.INTER_CUBIC)
        return out
