"""Face enhancers (GFPGAN, CodeFormer, GPEN): aligned crops in −1..1, enhanced crops out. The
blend with the frame happens at the paste back (the step's ``opacity``), as FaceFusion blends
the pasted frame with the original. CodeFormer's graph has a second input, ``weight`` (float64
[1], its fidelity: 0 = the most restored, 1 = the closest to the input)."""
from __future__ import annotations

import numpy as np

from ..errors import ModelError
from ..sessions import LazySession
from .blob import owned_float32, signed_input, to_bgr_nhwc, to_rgb_nchw
from .swap import input_dtype


class Enhancer:
    def __init__(self, lazy: LazySession, weight: float = 0.5) -> None:
        self.lazy = lazy
        self.weight = weight

    def enhance(self, crops: np.ndarray) -> np.ndarray:
        """(N,S,S,3) BGR uint8 → enhanced (N,S,S,3) BGR uint8."""
        session = self.lazy.session
        inputs = session.get_inputs()
        inp = next((i for i in inputs if i.name != "weight"), inputs[0])
        if len(inp.shape) != 4:
            raise ModelError(f"enhancer input {inp.name} has shape {inp.shape}, expected NCHW")
        planes = to_rgb_nchw(crops)
        feed = {inp.name: signed_input(planes, input_dtype(inp.type))}
        if any(i.name == "weight" for i in inputs):
            feed["weight"] = np.array([self.weight], np.float64)
        out = owned_float32(self.lazy.run(feed)[0])     # RGB NCHW
        np.clip(out, -1.0, 1.0, out=out)                  # (clip(y) + 1) / 2 * 255, in place
        np.add(out, 1.0, out=out)
        np.divide(out, 2.0, out=out)
        np.multiply(out, 255.0, out=out)
        np.rint(out, out=out)
        np.clip(out, 0, 255, out=out)
        return to_bgr_nhwc(out.astype(np.uint8))
