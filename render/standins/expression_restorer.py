"""Stand-ins of the LivePortrait files the expression restorer runs, with the tensor names, shapes
and dtypes of the face editor's (``render.standins.face_editor``: FaceFusion's names, LivePortrait's
published shapes), and answers that make the restorer's conventions visible:

* motion extractor: ``input`` (1, 3, 256, 256) → ``pitch`` (0-d) = the first of ``ANGLES`` +
  :data:`PITCH_PER_RED` · the input's mean red, ``yaw``, ``roll`` (0-d, fixed), ``scale`` (1, 1),
  ``translation`` (1, 3) = 0.1 · the mean RGB + ``TRANSLATION``, ``expression`` (1, 21, 3) =
  a base + :func:`row_weights` · (the mean RGB − 0.5), axis x ← R, y ← G, z ← B, and
  ``motion_points`` (1, 21, 3), fixed. The crop's colour is in its expression, so the driving
  crop (the frame as decoded) and the current one (after a swap) answer differently; its pose
  follows the colour too, so a pose taken from the driving crop would show;
* generator: ``feature_volume``, ``source``, ``target`` (1, 21, 3) → ``output`` (1, 3, S, S)
  painting its keypoints: the picture's rows in 21 bands (row r in band r · 21 // S), band j the
  volume's mean colour + :data:`GAIN` · (source[j] − target[j]) (x → R, y → G, z → B). Each
  keypoint's move shows in its own band: the area rows, the factor and which input is which;
* feature extractor: the face editor's (the crop's mean colour, in the order it was fed).

:func:`write_expression_restorer` writes the face editor's six files with these two in place (the
``live_portrait`` entry needs all five others) and returns the manifest entries.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from render.files import sha256_file
from render.processors.live_portrait import EXPRESSION_MAX, EXPRESSION_MIN
from render.standins import face_editor
from render.standins.face_editor import ANGLES, SCALE, TRANSLATION, VOLUME, default_points
from render.standins.graph import Graph, PathLike, finish

POINTS = 21
GAIN = 25.0
PITCH_PER_RED = 10.0


def row_weights() -> np.ndarray:
    """(1, 21, 3) float32: how far each expression value moves per unit of its channel's mean,
    0.3 to 0.7 of LivePortrait's range of that value (so rows differ, and a colour difference of
    a third moves a value by about a sixth of its range)."""
    u = np.random.RandomState(3).uniform(0.3, 0.7, EXPRESSION_MIN.shape)
    return ((EXPRESSION_MAX - EXPRESSION_MIN) * u).astype(np.float32)


def middle_expression() -> np.ndarray:
    """(1, 21, 3) float32: the middle of LivePortrait's range (nothing clipped nearby)."""
    return ((EXPRESSION_MIN + EXPRESSION_MAX) / 2).astype(np.float32)


def bands(side: int) -> np.ndarray:
    """(21, side) float32: 1 where picture row r is in keypoint j's band (r · 21 // side)."""
    out = np.zeros((POINTS, side), np.float32)
    out[np.arange(side) * POINTS // side, np.arange(side)] = 1.0
    return out


def _value(name: str, shape: tuple[int, ...]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def make_motion_extractor(path: PathLike, *, base: np.ndarray | None = None) -> onnx.ModelProto:
    """``base``: the expression of a crop of mean colour 0.5 (default: the face editor's, partly
    outside LivePortrait's range)."""
    base = face_editor.default_expression() if base is None else base
    g = Graph("er_motion")
    mean = g.op("ReduceMean", ["input"], "rgb_mean", axes=[2, 3], keepdims=0)         # (1, 3)
    zero = g.op("Mul", [g.op("ReduceMean", [mean], "total", keepdims=0),
                        g.const(np.array(0.0, np.float32), "nought")], "zero")
    red = g.op("ReduceMean", [g.op("Mul", [mean, g.const(np.array([[3, 0, 0]], np.float32),
                                                         "red_only")], "red3")], "red",
               keepdims=0)
    pitch = g.op("Add", [g.op("Mul", [red, g.const(np.array(PITCH_PER_RED, np.float32),
                                                   "per_red")], "pitch_shift"),
                         g.const(np.array(ANGLES[0], np.float32), "pitch0")], "pitch")
    angles = [pitch] + [g.op("Add", [g.const(np.array(a, np.float32), n), zero], n)
                        for n, a in (("yaw", ANGLES[1]), ("roll", ANGLES[2]))]
    scalar = g.const(np.zeros(0, np.int64), "scalar")
    for name, angle in zip(("pitch", "yaw", "roll"), angles):     # 0-d, as FaceFusion's scipy needs
        g.op("Reshape", [angle, scalar], output=name)
    g.op("Add", [g.const(np.array([[SCALE]], np.float32), "scale"), zero], output="scale")
    tenth = g.op("Mul", [mean, g.const(np.array(0.1, np.float32), "tenth")], "tenth")
    g.op("Add", [tenth, g.const(np.array([TRANSLATION], np.float32), "offset")],
         output="translation")
    centred = g.op("Sub", [g.op("Unsqueeze", [mean, g.const(np.array([1], np.int64), "axis1")],
                                "mean3"), g.const(np.array(0.5, np.float32), "half")], "centred")
    moved = g.op("Mul", [centred, g.const(row_weights(), "weights")], "moved")      # (1, 21, 3)
    g.op("Add", [moved, g.const(np.asarray(base, np.float32), "base")], output="expression")
    g.op("Add", [g.const(default_points(), "points"), zero], output="motion_points")
    outs = [_value("pitch", ()), _value("yaw", ()), _value("roll", ()), _value("scale", (1, 1)),
            _value("translation", (1, 3)), _value("expression", (1, POINTS, 3)),
            _value("motion_points", (1, POINTS, 3))]
    return finish(g, "live_portrait_motion_extractor_colour_standin",
                  [_value("input", (1, 3, 256, 256))], outs, path,
                  doc="LivePortrait motion extractor stand-in: the crop's colour in its "
                      "expression and pitch")


def make_generator(path: PathLike, *, side: int = 512) -> onnx.ModelProto:
    g = Graph("er_generator")
    rgb = g.op("Slice", ["feature_volume", g.const(np.array([0], np.int64), "start"),
                         g.const(np.array([3], np.int64), "end"),
                         g.const(np.array([1], np.int64), "axis")], "rgb")
    mean = g.op("ReduceMean", [rgb], "mean", axes=[2, 3, 4], keepdims=0)                # (1, 3)
    colour = g.op("Unsqueeze", [mean, g.const(np.array([2, 3], np.int64), "axes23")], "colour")
    moved = g.op("Transpose", [g.op("Sub", ["source", "target"], "moved")], "moved_t",
                 perm=[0, 2, 1])                                                     # (1, 3, 21)
    rows = g.op("MatMul", [moved, g.const(bands(side), "bands")], "rows")            # (1, 3, S)
    rows = g.op("Mul", [rows, g.const(np.array(GAIN, np.float32), "gain")], "rows_gain")
    column = g.op("Unsqueeze", [rows, g.const(np.array([3], np.int64), "axis3")], "column")
    painted = g.op("Add", [column, colour], "painted")                               # (1,3,S,1)
    g.op("Expand", [painted, g.const(np.array([1, 3, side, side], np.int64), "shape")],
         output="output")
    return finish(g, "live_portrait_generator_bands_standin",
                  [_value("feature_volume", VOLUME), _value("source", (1, POINTS, 3)),
                   _value("target", (1, POINTS, 3))], [_value("output", (1, 3, side, side))],
                  path, doc="LivePortrait generator stand-in: each keypoint's move in its band")


def write_expression_restorer(dir: PathLike, *, side: int = 512,
                              base: np.ndarray | None = None) -> dict[str, dict[str, Any]]:
    """The LivePortrait set in ``dir`` with this module's motion extractor (expression ``base``)
    and generator (output ``side``); returns the manifest entries, named as the shipped ones."""
    d = Path(dir)
    entries = face_editor.write_live_portrait(d, side=side)
    for name, build in (("live_portrait_motion_extractor",
                         lambda p: make_motion_extractor(p, base=base)),
                        ("live_portrait", lambda p: make_generator(p, side=side))):
        path = d / entries[name]["file"]
        build(path)
        entries[name]["sha256"] = sha256_file(path)
    return entries
