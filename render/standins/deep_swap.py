"""Stand-ins of DeepFaceLive's DFM identity models, with the contract FaceFusion's deep swapper
drives (``render.processors.deep_swap.dfm``): ``in_face:0`` (N, S, S, 3) float32 BGR 0..1, an
optional ``morph_value:0`` (1,), and three outputs named as DeepFaceLab exports them, in its
order: ``out_face_mask:0`` (the target's mask), ``out_celeb_face:0`` (the face),
``out_celeb_face_mask:0`` (the source's mask). Answers a test can predict:

* ``mode="identity"``: the face is the input itself (what the model was fed comes back: the
  sharpening, the layout) and the source mask is the input's channel 0 (blue: a model fed RGB
  would mask by the red channel);
* ``mode="tint"``: the face is ``in·(1 − m) + colour·m`` with ``colour`` a BGR triple and m the
  morph input (1 without one), the source mask all ones;
* in both, the target mask is a centred disc of radius ``radius``·S (:func:`disc`) whose values
  lie outside 0..1 (:data:`DISC_IN` inside, :data:`DISC_OUT` outside), so the mask's clip shows.

:func:`write_dfm_models` writes a set of them with their manifest entries into a folder's
``manifest.yaml``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np
import onnx
from onnx import TensorProto, helper

from render.files import sha256_file
from render.standins.graph import Graph, PathLike, dummy_zero, finish

MODES = ("identity", "tint")
DISC_IN, DISC_OUT = 1.25, -0.25
OUTPUTS = ("out_face_mask:0", "out_celeb_face:0", "out_celeb_face_mask:0")


def disc(side: int, radius: float) -> np.ndarray:
    """(side, side) bool: the pixels whose centres lie within ``radius``·side of the crop's
    centre."""
    c = (np.arange(side) + 0.5 - side / 2.0) ** 2
    return c[:, None] + c[None, :] < (radius * side) ** 2


def make_dfm(path: PathLike, *, side: int = 224, mode: str = "tint",
             colour: tuple[float, float, float] = (0.1, 0.5, 0.9), radius: float = 0.3,
             morph: bool = True, dynamic_batch: bool = True, gflops: float = 0.0,
             weights_mb: float = 0.0) -> onnx.ModelProto:
    """``gflops``/``weights_mb``: emulated cost and weights (``graph.dummy_zero``), answers
    unchanged."""
    assert mode in MODES, mode
    g = Graph(f"dfm_{mode}")
    x = "in_face:0"
    zero = dummy_zero(g, x, TensorProto.FLOAT, gflops, weights_mb)
    if zero is not None:
        x = g.op("Add", [x, zero], "in_face_costed")
    zeros1 = g.op("Mul", [g.op("ReduceMean", [x], "mean_c", axes=[3], keepdims=1),
                          g.const(np.array(0.0, np.float32), "zero")], "zeros1")     # (N,S,S,1)
    values = np.where(disc(side, radius), DISC_IN, DISC_OUT).astype(np.float32)
    g.op("Add", [zeros1, g.const(values.reshape(1, side, side, 1), "disc")], output=OUTPUTS[0])
    if mode == "identity":
        g.op("Identity", [x], output=OUTPUTS[1])
        g.op("Slice", [x, g.const(np.array([0], np.int64), "start"),
                       g.const(np.array([1], np.int64), "end"),
                       g.const(np.array([3], np.int64), "axis")], output=OUTPUTS[2])
    else:
        m = "morph_value:0" if morph else g.const(np.array([1.0], np.float32), "no_morph")
        kept = g.op("Mul", [x, g.op("Sub", [g.const(np.array([1.0], np.float32), "one"), m],
                                    "keep")], "kept")
        tint = g.op("Mul", [g.const(np.array(colour, np.float32), "colour"), m], "tint")
        g.op("Add", [kept, tint], output=OUTPUTS[1])
        g.op("Add", [zeros1, g.const(np.array(1.0, np.float32), "ones")], output=OUTPUTS[2])
    b = "n" if dynamic_batch else 1
    inputs = [helper.make_tensor_value_info("in_face:0", TensorProto.FLOAT, [b, side, side, 3])]
    if morph:
        inputs.append(helper.make_tensor_value_info("morph_value:0", TensorProto.FLOAT, [1]))
    outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [b, side, side, c])
               for name, c in zip(OUTPUTS, (1, 3, 1))]
    return finish(g, f"dfm_{mode}_standin", inputs, outputs, path,
                  doc=f"DFM identity model stand-in ({mode})")


def entry(path: Path, side: int) -> dict[str, Any]:
    """A deep-swapper manifest entry for the stand-in at ``path``."""
    return {"file": path.name, "sha256": sha256_file(path), "licence": "test stand-in",
            "commercial_use": False, "contract": "swapper-dfm", "template": "dfl_whole_face",
            "input_size": side, "precision": "fp32"}


def write_dfm_models(dir: PathLike, specs: Mapping[str, Mapping[str, Any]]) -> dict[str, dict]:
    """Write one stand-in ``<name>.dfm`` per ``specs`` item (name → :func:`make_dfm`'s keywords,
    plus ``input_size`` for an entry that declares another side than the graph's) into ``dir``
    and add their entries to ``dir/manifest.yaml`` (created when missing); returns the
    entries."""
    import yaml

    d = Path(dir)
    d.mkdir(parents=True, exist_ok=True)
    entries = {}
    for name, spec in specs.items():
        spec = dict(spec)
        declared = spec.pop("input_size", spec.get("side", 224))
        path = d / f"{name}.dfm"
        make_dfm(path, **spec)
        entries[name] = entry(path, declared)
    manifest = d / "manifest.yaml"
    doc = yaml.safe_load(manifest.read_text()) if manifest.is_file() else {"version": 1}
    doc.setdefault("models", {}).update(entries)
    manifest.write_text(yaml.safe_dump(doc, sort_keys=False))
    return entries
