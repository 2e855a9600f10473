"""GFPGAN 1.4: ffhq_512 crops in −1..1, enhanced crops out, blended with the input crop."""
from __future__ import annotations

import numpy as np

from ..errors import ModelError
from ..runtime import LazySession
from .swap import accepts_batch, input_dtype


class Enhancer:
    template = "ffhq_512"
    size = 512

    def __init__(self, lazy: LazySession, blend: float) -> None:
        self.lazy = lazy
        self.blend = blend

    @property
    def max_batch(self) -> int | None:
        shape = self.lazy.session.get_inputs()[0].shape
        return None if accepts_batch(shape) else int(shape[0])

    def enhance(self, crops: np.ndarray) -> np.ndarray:
        """(N,512,512,3) BGR uint8 → enhanced and blended (N,512,512,3) BGR uint8."""
        session = self.lazy.session
        inp = session.get_inputs()[0]
        if len(inp.shape) != 4:
            raise ModelError(f"enhancer input {inp.name} has shape {inp.shape}, expected NCHW")
        x = (crops[..., ::-1].astype(np.float32) / 255.0 - 0.5) / 0.5
        x = np.ascontiguousarray(x.transpose(0, 3, 1, 2), dtype=input_dtype(inp.type))
        out = np.asarray(self.lazy.run({inp.name: x})[0], np.float32)
        out = (np.clip(out, -1.0, 1.0) + 1.0) / 2.0 * 255.0
        out = out.transpose(0, 2, 3, 1)[..., ::-1]
        mixed = self.blend * out + (1.0 - self.blend) * crops.astype(np.float32)
        return np.clip(np.rint(mixed), 0, 255).astype(np.uint8)
