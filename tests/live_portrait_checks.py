"""What the LivePortrait tests (the face editor's and the expression restorer's) share: the
extractors' input computed here from its definition, and a session that records its feeds."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort


def prepared(crop: np.ndarray) -> np.ndarray:
    """The extractors' input: 2 × 2 blocks averaged with rounding, RGB, / 255, NCHW."""
    side = crop.shape[0] // 2
    blocks = crop.astype(np.int64).reshape(side, 2, side, 2, 3).sum(axis=(1, 3))
    return (((blocks + 2) // 4)[:, :, ::-1] / 255.0).transpose(2, 0, 1)[None]


class Recorder:
    """The part of a session the processor uses, recording each call's feeds."""

    def __init__(self, path: Path) -> None:
        self.session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        self.providers = ["CPUExecutionProvider"]
        self.feeds: list[dict] = []

    def run(self, feeds: dict) -> list:
        self.feeds.append({k: np.array(v) for k, v in feeds.items()})
        return self.session.run(None, feeds)
