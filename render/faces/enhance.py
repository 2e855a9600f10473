"""GFPGAN 1.4: ffhq_512 crops in −1..1, enhanced crops out, blended with the input crop."""
from __future__ import annotations

import numpy as np

from ..errors import ModelError
from ..sessions import LazySession
from .blob import owned_float32, signed_input, to_bgr_nhwc, to_rgb_nchw
from .swap import input_dtype


class Enhancer:
    template = "ffhq_512"
    size = 512

    def __init__(self, lazy: LazySession, blend: float) -> None:
        self.lazy = lazy
        self.blend = blend

    def enhance(self, crops: np.ndarray) -> np.ndarray:
        """(N,512,512,3) BGR uint8 → enhanced and blended (N,512,512,3) BGR uint8."""
        session = self.lazy.session
        inp = session.get_inputs()[0]
        if len(inp.shape) != 4:
            raise ModelError(f"enhancer input {inp.name} has shape {inp.shape}, expected NCHW")
        planes = to_rgb_nchw(crops)
        x = signed_input(planes, input_dtype(inp.type))
        out = owned_float32(self.lazy.run({inp.name: x})[0])     # RGB NCHW
        np.clip(out, -1.0, 1.0, out=out)                  # (clip(y) + 1) / 2 * 255, in place
        np.add(out, 1.0, out=out)
        np.divide(out, 2.0, out=out)
        np.multiply(out, 255.0, out=out)
        np.multiply(out, self.blend, out=out)             # blend * enhanced + (1 - blend) * crop
        rest = planes.astype(np.float32)
        np.multiply(rest, 1.0 - self.blend, out=rest)
        np.add(out, rest, out=out)
        np.rint(out, out=out)
        np.clip(out, 0, 255, out=out)
        return to_bgr_nhwc(out.astype(np.uint8))
