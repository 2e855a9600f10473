"""Stand-ins of the frame enhancers, with the production I/O contract (FaceFusion's
``frame_enhancer``): ``input`` [n,3,T,T] float32 RGB 0..1 → ``output`` [n,3,T·s,T·s], and answers
a test can predict.

* ``mode="nearest"``: the tile enlarged ``scale`` times by nearest neighbour (a Resize node,
  ``asymmetric`` coordinates, ``floor``): through the tiler the frame must come out as
  ``cv2.resize(frame, INTER_NEAREST)`` exactly, the overlaps within a level (their cross-fade
  of equal values);
* ``mode="tile-mean"``: every pixel of the result the tile's own mean colour, so neighbouring
  tiles disagree by the difference of their means: a seam between tiles shows as a step of
  that size, a cross-fade as a ramp.

``side``: a fixed spatial side T (else symbolic: any tile); ``dynamic_batch``: the first
dimension symbolic (else 1). ``gflops``/``weights_mb``: emulated cost and weights
(``graph.dummy_zero``), the answer unchanged (the realistic bench's x2 enhancer).

:func:`write_frame_enhancers` writes a set of them with their manifest entries (``params``:
scale, tile, pad, context) into a models folder's ``manifest.yaml``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np
import onnx
from onnx import TensorProto, helper

from render.files import sha256_file
from render.standins.graph import Graph, PathLike, dummy_zero, finish

MODES = ("nearest", "tile-mean")


def make_frame_enhancer(path: PathLike, *, scale: int = 2, mode: str = "nearest",
                        side: int | None = None, dynamic_batch: bool = True,
                        gflops: float = 0.0, weights_mb: float = 0.0) -> onnx.ModelProto:
    assert mode in MODES, mode
    g = Graph(f"frame_enhancer_{mode}")
    zero = dummy_zero(g, "input", TensorProto.FLOAT, gflops, weights_mb)
    scales = g.const(np.array([1.0, 1.0, scale, scale], np.float32), "scales")
    big = g.op("Resize", ["input", "", scales], "enlarged", mode="nearest",
               coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    out = "output" if zero is None else g.name("enhanced")
    if mode == "nearest":
        g.op("Identity", [big], output=out)
    else:
        mean = g.op("ReduceMean", ["input"], "tile_mean", axes=[2, 3], keepdims=1)
        zeros = g.op("Mul", [big, g.const(np.array(0.0, np.float32), "zero")], "zeros")
        g.op("Add", [zeros, mean], output=out)
    if zero is not None:
        g.op("Add", [out, zero], output="output")
    b = "n" if dynamic_batch else 1
    t_in = (side, side) if side else ("h", "w")
    t_out = (side * scale, side * scale) if side else ("H", "W")
    inp = [helper.make_tensor_value_info("input", TensorProto.FLOAT, [b, 3, *t_in])]
    outs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, [b, 3, *t_out])]
    return finish(g, f"frame_enhancer_{mode}_standin", inp, outs, path,
                  doc=f"frame enhancer stand-in ({mode}, x{scale})")


def entry(file: str, path: Path, *, scale: int, tile: int, pad: int = 0, context: int = 0
          ) -> dict[str, Any]:
    """A frame-enhancer manifest entry for the stand-in at ``path``."""
    return {"file": file, "sha256": sha256_file(path), "licence": "MIT", "commercial_use": True,
            "contract": "frame-enhancer", "template": None, "input_size": tile,
            "precision": "fp32", "params": {"scale": scale, "tile": tile, "pad": pad,
                                            "context": context}}


def write_frame_enhancers(dir: PathLike, specs: Mapping[str, Mapping[str, Any]]
                          ) -> dict[str, dict]:
    """Write one stand-in per ``specs`` item (name → :func:`make_frame_enhancer`'s keywords plus
    ``tile``, ``pad`` and ``context``, the entry's params) into ``dir`` and add their entries to
    ``dir/manifest.yaml`` (created when missing); returns the entries."""
    import yaml

    d = Path(dir)
    d.mkdir(parents=True, exist_ok=True)
    entries = {}
    for name, spec in specs.items():
        spec = dict(spec)
        params = {k: spec.pop(k) for k in ("tile", "pad", "context") if k in spec}
        params.setdefault("tile", spec.get("side") or 64)
        path = d / f"{name}.onnx"
        make_frame_enhancer(path, **spec)
        entries[name] = entry(path.name, path, scale=spec.get("scale", 2), **params)
    manifest = d / "manifest.yaml"
    doc = yaml.safe_load(manifest.read_text()) if manifest.is_file() else {"version": 1}
    doc.setdefault("models", {}).update(entries)
    manifest.write_text(yaml.safe_dump(doc, sort_keys=False))
    return entries
