"""Stand-ins of FaceFusion's LivePortrait set (the face editor's six files), with the tensor names,
shapes and dtypes FaceFusion feeds and reads (``render.processors.live_portrait``; the shapes
FaceFusion leaves undeclared are LivePortrait's published ones: a (1, 32, 16, 64, 64) feature
volume, 21 keypoints, the 0-d angles FaceFusion's scipy call needs), and answers a test can
compute on its own:

* feature extractor: ``input`` (1, 3, 256, 256) → ``output`` (1, 32, 16, 64, 64), channel k the
  mean of input channel k mod 3 everywhere (the crop's mean RGB, in the order it was fed);
* motion extractor: ``input`` → ``pitch``, ``yaw``, ``roll`` (0-d, degrees), ``scale`` (1, 1),
  ``translation`` (1, 3) = 0.1 · the input's mean per channel + :data:`TRANSLATION` (so RGB and
  /255 show in the keypoints, and a non-zero z), ``expression`` and ``motion_points`` (1, 21, 3):
  fixed (:func:`default_expression`, :func:`default_points`), the expression partly outside
  LivePortrait's range so its limit shows;
* eye and lip retargeters: ``input`` (1, 66) / (1, 65) → ``output`` (1, 63) = input @
  :func:`retargeter_weights`;
* stitcher: ``source``, ``target`` (1, 21, 3) → ``output`` = a·source + b·target + c
  (:data:`STITCH`): added instead of replacing, or fed the wrong way round, it shows;
* generator: ``feature_volume``, ``source``, ``target`` → ``output`` (1, 3, S, S): everywhere the
  volume's first three channels' means plus :data:`GAIN` · (mean of the source points − mean of
  the target points) per axis (x → R, y → G, z → B), so the keypoints it was given show in the
  picture's colour.

:func:`write_live_portrait` writes the six files and returns their manifest entries.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from render.files import sha256_file
from render.processors.live_portrait import EXPRESSION_MAX, EXPRESSION_MIN
from render.standins.graph import Graph, PathLike, finish

VOLUME = (1, 32, 16, 64, 64)
GAIN = 20.0
STITCH = (0.75, 0.25, 0.01)
TRANSLATION = (0.02, -0.03, 0.05)
#: the motion extractor's answer unless a test asks for another
ANGLES = (8.0, -35.0, 4.0)
SCALE = 1.3


def default_expression() -> np.ndarray:
    """(1, 21, 3) float32: values from 10 % below LivePortrait's range to 10 % above it."""
    u = np.random.RandomState(40).uniform(-0.1, 1.1, EXPRESSION_MIN.shape)
    return (EXPRESSION_MIN + (EXPRESSION_MAX - EXPRESSION_MIN) * u).astype(np.float32)


def default_points() -> np.ndarray:
    """(1, 21, 3) float32 canonical keypoints."""
    return (np.random.RandomState(21).standard_normal((1, 21, 3)) * 0.3).astype(np.float32)


def retargeter_weights(inputs: int) -> np.ndarray:
    """(inputs, 63) float32: the retargeter stand-in's matrix."""
    return np.random.RandomState(inputs).uniform(-0.05, 0.05, (inputs, 63)).astype(np.float32)


def _zero(g: Graph, source: str) -> str:
    """A 0-d 0 computed from ``source`` (every output depends on the input it is given)."""
    mean = g.op("ReduceMean", [source], "mean", keepdims=0)
    return g.op("Mul", [mean, g.const(np.array(0.0, np.float32), "zero")], "zero")


def _value(name: str, shape: tuple[int, ...]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def make_feature_extractor(path: PathLike) -> onnx.ModelProto:
    g = Graph("lp_features")
    mean = g.op("ReduceMean", ["input"], "rgb_mean", axes=[2, 3], keepdims=1)       # (1,3,1,1)
    picked = g.op("Gather", [mean, g.const(np.arange(32, dtype=np.int64) % 3, "channels")],
                  "channels", axis=1)                                                 # (1,32,1,1)
    volume = g.op("Unsqueeze", [picked, g.const(np.array([2], np.int64), "axis")], "volume")
    g.op("Expand", [volume, g.const(np.array(VOLUME, np.int64), "shape")], output="output")
    return finish(g, "live_portrait_feature_extractor_standin",
                  [_value("input", (1, 3, 256, 256))], [_value("output", VOLUME)], path,
                  doc="LivePortrait feature extractor stand-in: the input's mean colour")


def make_motion_extractor(path: PathLike, *, angles: tuple[float, float, float] = ANGLES,
                          scale: float = SCALE, expression: np.ndarray | None = None
                          ) -> onnx.ModelProto:
    """``expression``: the (1, 21, 3) it answers (default :func:`default_expression`)."""
    answer = default_expression() if expression is None else expression
    g = Graph("lp_motion")
    zero = _zero(g, "input")
    for name, angle in zip(("pitch", "yaw", "roll"), angles):
        g.op("Add", [g.const(np.array(angle, np.float32), name), zero], output=name)
    g.op("Add", [g.const(np.array([[scale]], np.float32), "scale"), zero], output="scale")
    mean = g.op("ReduceMean", ["input"], "rgb_mean", axes=[2, 3], keepdims=0)         # (1, 3)
    tenth = g.op("Mul", [mean, g.const(np.array(0.1, np.float32), "tenth")], "tenth")
    g.op("Add", [tenth, g.const(np.array([TRANSLATION], np.float32), "offset")],
         output="translation")
    g.op("Add", [g.const(np.asarray(answer, np.float32), "expression"), zero],
         output="expression")
    g.op("Add", [g.const(default_points(), "points"), zero], output="motion_points")
    outs = [_value("pitch", ()), _value("yaw", ()), _value("roll", ()), _value("scale", (1, 1)),
            _value("translation", (1, 3)), _value("expression", (1, 21, 3)),
            _value("motion_points", (1, 21, 3))]
    return finish(g, "live_portrait_motion_extractor_standin", [_value("input", (1, 3, 256, 256))],
                  outs, path, doc="LivePortrait motion extractor stand-in: a fixed motion")


def make_retargeter(path: PathLike, inputs: int) -> onnx.ModelProto:
    g = Graph(f"lp_retarget_{inputs}")
    g.op("MatMul", ["input", g.const(retargeter_weights(inputs), "weights")], output="output")
    return finish(g, f"live_portrait_retargeter_{inputs}_standin", [_value("input", (1, inputs))],
                  [_value("output", (1, 63))], path,
                  doc="LivePortrait retargeter stand-in: a fixed linear map")


def make_stitcher(path: PathLike) -> onnx.ModelProto:
    a, b, c = STITCH
    g = Graph("lp_stitch")
    mixed = g.op("Add", [g.op("Mul", ["source", g.const(np.array(a, np.float32), "a")]),
                         g.op("Mul", ["target", g.const(np.array(b, np.float32), "b")])], "mixed")
    g.op("Add", [mixed, g.const(np.array(c, np.float32), "c")], output="output")
    return finish(g, "live_portrait_stitcher_standin",
                  [_value("source", (1, 21, 3)), _value("target", (1, 21, 3))],
                  [_value("output", (1, 21, 3))], path,
                  doc="LivePortrait stitcher stand-in: a fixed mix of its inputs")


def make_generator(path: PathLike, *, side: int = 512) -> onnx.ModelProto:
    g = Graph("lp_generator")
    rgb = g.op("Slice", ["feature_volume", g.const(np.array([0], np.int64), "start"),
                         g.const(np.array([3], np.int64), "end"),
                         g.const(np.array([1], np.int64), "axis")], "rgb")
    colour = g.op("ReduceMean", [rgb], "colour", axes=[2, 3, 4], keepdims=0)         # (1, 3)
    source = g.op("ReduceMean", ["source"], "source_mean", axes=[1], keepdims=0)     # (1, 3)
    target = g.op("ReduceMean", ["target"], "target_mean", axes=[1], keepdims=0)
    shift = g.op("Mul", [g.op("Sub", [source, target], "moved"),
                         g.const(np.array(GAIN, np.float32), "gain")], "shift")
    pixel = g.op("Reshape", [g.op("Add", [colour, shift], "pixel"),
                             g.const(np.array([1, 3, 1, 1], np.int64), "pixel_shape")], "pixel4")
    g.op("Expand", [pixel, g.const(np.array([1, 3, side, side], np.int64), "shape")],
         output="output")
    return finish(g, "live_portrait_generator_standin",
                  [_value("feature_volume", VOLUME), _value("source", (1, 21, 3)),
                   _value("target", (1, 21, 3))], [_value("output", (1, 3, side, side))], path,
                  doc="LivePortrait generator stand-in: the crop's colour moved by the keypoints")


#: manifest name → (file, contract, input_size)
FILES = {
    "live_portrait": ("live_portrait_generator.onnx", "live-portrait", 512),
    "live_portrait_feature_extractor": ("live_portrait_feature_extractor.onnx",
                                        "live-portrait-feature-extractor", 256),
    "live_portrait_motion_extractor": ("live_portrait_motion_extractor.onnx",
                                       "live-portrait-motion-extractor", 256),
    "live_portrait_eye_retargeter": ("live_portrait_eye_retargeter.onnx",
                                     "live-portrait-eye-retargeter", None),
    "live_portrait_lip_retargeter": ("live_portrait_lip_retargeter.onnx",
                                     "live-portrait-lip-retargeter", None),
    "live_portrait_stitcher": ("live_portrait_stitcher.onnx", "live-portrait-stitcher", None),
}


def write_live_portrait(dir: PathLike, *, side: int = 512,
                        angles: tuple[float, float, float] = ANGLES) -> dict[str, dict[str, Any]]:
    """The six stand-ins in ``dir`` (the generator of output ``side``, the motion extractor
    answering ``angles``); returns their manifest entries, named as the shipped ones."""
    d = Path(dir)
    d.mkdir(parents=True, exist_ok=True)
    builders = {
        "live_portrait": lambda p: make_generator(p, side=side),
        "live_portrait_feature_extractor": make_feature_extractor,
        "live_portrait_motion_extractor": lambda p: make_motion_extractor(p, angles=angles),
        "live_portrait_eye_retargeter": lambda p: make_retargeter(p, 66),
        "live_portrait_lip_retargeter": lambda p: make_retargeter(p, 65),
        "live_portrait_stitcher": make_stitcher,
    }
    entries = {}
    for name, build in builders.items():
        file, contract, size = FILES[name]
        build(d / file)
        entries[name] = {"file": file, "sha256": sha256_file(d / file), "licence": "test",
                         "commercial_use": True, "contract": contract, "template": None,
                         "input_size": size}
    entries["live_portrait"]["needs"] = [n for n in FILES if n != "live_portrait"]
    return entries
