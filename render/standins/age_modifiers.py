"""Stand-ins of the age modifier's models (FaceFusion's ``age_modifier`` and ``face_classifier``),
with their tensor names, shapes and dtypes and answers a test can compute on its own:

* ``make_fran``: ``target`` (1, 3, S, S) float32 RGB 0..1 and ``direction`` (2,) float32 →
  ``output`` (1, 3, S, S) = ``target`` with ``direction[1] − direction[0]`` added to its red
  plane only: the age step asked for shows as a red shift of 255 × that (a wrong channel order,
  scale or direction shows). ``background=True`` also declares ``target_with_background`` and
  returns the mean of the two crops (fed the same crop, nothing changes).
* ``make_styleganex``: ``target`` (1, 3, 256, 256), ``target_with_background`` (1, 3, 384, 384),
  both RGB in −1..1, and a scalar ``direction`` → ``output`` (1, 3, 1536, 1536):
  ``target_with_background`` enlarged 4 times (bilinear, pixel centres kept), plus
  ``STRIPE_GAIN · direction`` on the red plane in vertical stripes of ±1, ``STRIPE`` output px
  wide: a result that lies over its crop (the paste's geometry), and a direction that survives
  the colour match (each stripe pair averages to 0 over the 16-px blocks it works on).
* ``make_fairface``: ``input`` (1, 3, 224, 224) RGB with ImageNet's mean and std → ``race``,
  ``gender``, ``age`` (1,) int64: race 6 and gender 1 always, age ``floor(9 · r)`` clipped to
  0..8, r the mean red (0..1, the normalisation undone) of a 16-px window on the crop's nose tip
  (arcface_112_v2): reading another output, or another place, gives another age.

:func:`write_age_modifiers` writes the three with their manifest entries (named ``fran``,
``styleganex_age`` and ``fairface``, as the shipped ones) into a models folder's overlay.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from render.files import sha256_file
from render.standins.graph import Graph, PathLike, finish

#: StyleGANEX stand-in: the stripes' width in output pixels, and their gain per unit direction
STRIPE = 48
STRIPE_GAIN = 0.04
#: FairFace stand-in: the window the age is read from (rows, columns of the 224-px crop)
AGE_WINDOW = (slice(136, 152), slice(104, 120))
IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
_RED = np.array([1.0, 0.0, 0.0], np.float32).reshape(1, 3, 1, 1)


def _info(name: str, shape: list, elem: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def make_fran(path: PathLike, *, side: int = 1024, background: bool = False) -> onnx.ModelProto:
    g = Graph("fran")
    first = g.op("Slice", ["direction", g.const(np.array([0], np.int64), "start"),
                           g.const(np.array([1], np.int64), "end")], "age")
    second = g.op("Slice", ["direction", g.const(np.array([1], np.int64), "start"),
                            g.const(np.array([2], np.int64), "end")], "asked")
    step = g.op("Reshape", [g.op("Sub", [second, first], "step"),
                            g.const(np.array([1, 1, 1, 1], np.int64), "shape")], "step4")
    face = "target"
    if background:
        face = g.op("Mul", [g.op("Add", ["target", "target_with_background"], "sum"),
                            g.const(np.array(0.5, np.float32), "half")], "mean")
    g.op("Add", [face, g.op("Mul", [step, g.const(_RED, "red")], "shift")], output="output")
    crops = ["target", "target_with_background"] if background else ["target"]
    inputs = [_info(n, [1, 3, side, side]) for n in crops] + [_info("direction", [2])]
    return finish(g, "fran_standin", inputs, [_info("output", [1, 3, side, side])], path,
                  doc="fran stand-in: the crop, its red plane shifted by the age step")


def make_styleganex(path: PathLike) -> onnx.ModelProto:
    g = Graph("styleganex")
    big = g.op("Resize", ["target_with_background", "",
                          g.const(np.array([1, 1, 4, 4], np.float32), "scales")], "enlarged",
               mode="linear", coordinate_transformation_mode="half_pixel")
    stripes = np.where((np.arange(4 * 384) // STRIPE) % 2 == 0, 1.0, -1.0).astype(np.float32)
    pattern = g.const((stripes.reshape(1, 1, 1, -1) * _RED * STRIPE_GAIN).astype(np.float32),
                      "stripes")
    g.op("Add", [big, g.op("Mul", ["direction", pattern], "edit")], output="output")
    inputs = [_info("target", [1, 3, 256, 256]), _info("target_with_background", [1, 3, 384, 384]),
              _info("direction", [])]
    return finish(g, "styleganex_standin", inputs, [_info("output", [1, 3, 1536, 1536])], path,
                  doc="styleganex stand-in: the extended crop x4, red stripes x direction")


def make_fairface(path: PathLike) -> onnx.ModelProto:
    g = Graph("fairface")
    rows, cols = AGE_WINDOW
    window = g.op("Slice", ["input", g.const(np.array([0, rows.start, cols.start], np.int64), "s"),
                            g.const(np.array([1, rows.stop, cols.stop], np.int64), "e"),
                            g.const(np.array([1, 2, 3], np.int64), "axes")], "window")
    red = g.op("ReduceMean", [window], "red_n", keepdims=0)
    (mean, _, _), (std, _, _) = IMAGENET
    red = g.op("Add", [g.op("Mul", [red, g.const(np.array(std, np.float32), "std")]),
                       g.const(np.array(mean, np.float32), "mean")], "red")
    bucket = g.op("Clip", [g.op("Floor", [g.op("Mul", [red, g.const(np.array(9.0, np.float32),
                                                                      "nine")])]),
                           g.const(np.array(0.0, np.float32), "lo"),
                           g.const(np.array(8.0, np.float32), "hi")], "bucket")
    one = g.const(np.array([1], np.int64), "one")
    g.op("Reshape", [g.op("Cast", [bucket], to=TensorProto.INT64), one], output="age")
    zero = g.op("Cast", [g.op("Mul", [red, g.const(np.array(0.0, np.float32), "zero")])],
                to=TensorProto.INT64)
    for name, value in (("race", 6), ("gender", 1)):
        g.op("Reshape", [g.op("Add", [zero, g.const(np.array(value, np.int64), name)]), one],
             output=name)
    outputs = [_info(n, [1], TensorProto.INT64) for n in ("race", "gender", "age")]
    return finish(g, "fairface_standin", [_info("input", [1, 3, 224, 224])], outputs, path,
                  doc="fairface stand-in: age from the red of the nose window")


def _entry(path: Path, contract: str, template: str, side: int, **more: Any) -> dict[str, Any]:
    return {"file": path.name, "sha256": sha256_file(path), "licence": "test",
            "commercial_use": True, "contract": contract, "template": template,
            "input_size": side, "precision": "fp32", **more}


def write_age_modifiers(dir: PathLike, *, fran_side: int = 1024) -> dict[str, dict]:
    """The three stand-ins in ``dir`` and their entries in ``dir/manifest.yaml`` (created when
    missing); returns the entries."""
    import yaml

    d = Path(dir)
    d.mkdir(parents=True, exist_ok=True)
    make_fran(d / "fran.onnx", side=fran_side)
    make_styleganex(d / "styleganex_age.onnx")
    make_fairface(d / "fairface.onnx")
    entries = {
        "fran": _entry(d / "fran.onnx", "age-modifier-fran", "ffhq_512", fran_side,
                       needs=["fairface"]),
        "styleganex_age": _entry(d / "styleganex_age.onnx", "age-modifier-styleganex",
                                 "styleganex_384", 384),
        "fairface": _entry(d / "fairface.onnx", "classifier-fairface", "arcface_112_v2", 224),
    }
    manifest = d / "manifest.yaml"
    doc = yaml.safe_load(manifest.read_text()) if manifest.is_file() else {"version": 1}
    doc.setdefault("models", {}).update(entries)
    manifest.write_text(yaml.safe_dump(doc, sort_keys=False))
    return entries
