"""Stand-ins of the mask and landmark models (``shared/docs/models.md``, "Quality processors" §5
and §6), each with its model's tensor names, shapes and dtypes, and an answer a test can predict:

* ``make_xseg``: occlusion. NHWC ``input`` (1, 256, 256, 3) BGR x/255 → ``output``
  (1, 256, 256, 1): 0 (occluded) where B − R is within ``OCCLUDER_RANGE``, else 1 — a blue
  square drawn on a face is an occluder; fed RGB, 0..255 or NCHW, it is not (or the call fails).
* ``make_bisenet``: a face parser with a known class map. ``input`` (1, 3, 512, 512) RGB with
  ImageNet mean/std → ``output`` (1, 19, 512, 512) logits whose argmax is ``class_map``
  (cells of 128 px), except background (0) where the pixel is pure red (R_n > 1.5, B_n < −1).
* ``make_2dfan4``: ``input`` (1, 3, 256, 256) → ``landmarks`` (1, 68, 3) and ``heatmaps``
  (1, 68, 64, 64): each heatmap is ``peak`` at one known grid point and 0 elsewhere; the
  landmarks are the heatmaps' argmax (x, y) and maximum.
* ``make_fan_68_5``: ``input`` (1, 5, 2) → ``output`` (1, 68, 2) = ``FACE_68`` moved by the mean
  of the 5 points minus that of the ffhq_512 template: the template in gives ``FACE_68`` out.

``FACE_68`` is a plausible 68-point (iBUG order) face in ffhq_512 unit space, whose eyes, nose
tip and mouth corners are the template's 5 points.
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from render.standins.graph import Graph, PathLike, dummy_zero, finish

FFHQ_512 = np.array([[0.37691676, 0.46864664], [0.62285697, 0.46912813],
                     [0.50123859, 0.61331904], [0.39308822, 0.72541100],
                     [0.61150205, 0.72490465]], np.float32)
OCCLUDER_RANGE = (0.55, 0.9)       # B − R in 0..1 units
CELL = 128                         # the parser's class map cell, in 512-px input pixels


def _ellipse(cx: float, cy: float, rx: float, ry: float, start: float, stop: float, n: int
             ) -> np.ndarray:
    t = np.linspace(start, stop, n)
    return np.stack([cx + rx * np.cos(t), cy + ry * np.sin(t)], axis=1)


def _face_68() -> np.ndarray:
    (lx, ly), (rx, ry), (nx, ny), (mlx, mly), (mrx, mry) = FFHQ_512.astype(np.float64)
    jaw = _ellipse(0.5, 0.45, 0.25, 0.43, np.pi, 0.0, 17)                 # 0-16, through the chin
    brows = np.concatenate([np.stack([np.linspace(0.29, 0.46, 5), np.full(5, 0.40)], 1),
                            np.stack([np.linspace(0.54, 0.71, 5), np.full(5, 0.40)], 1)])
    bridge = np.stack([np.full(4, nx), np.linspace(0.47, ny, 4)], 1)     # 27-30, 30 = nose tip
    nostrils = np.stack([np.linspace(0.45, 0.55, 5), np.full(5, 0.64)], 1)
    hexagon = np.linspace(np.pi, -np.pi, 6, endpoint=False)               # mean = the centre
    eyes = np.concatenate([np.stack([x + 0.04 * np.cos(hexagon), y + 0.015 * np.sin(hexagon)], 1)
                           for x, y in ((lx, ly), (rx, ry))])
    mcx, mcy, half = (mlx + mrx) / 2, (mly + mry) / 2, (mrx - mlx) / 2
    outer = _ellipse(mcx, mcy, half, 0.04, np.pi, -np.pi, 13)[:12]         # 48 left … 54 right
    inner = _ellipse(mcx, mcy, half * 0.7, 0.02, np.pi, -np.pi, 9)[:8]
    points = np.concatenate([jaw, brows, bridge, nostrils, eyes, outer, inner]).astype(np.float32)
    points[48], points[54] = (mlx, mly), (mrx, mry)
    return points


FACE_68 = _face_68()


def _cost(g: Graph, gflops: float, weights_mb: float) -> str | None:
    """Emulated cost and weights (``graph.dummy_zero``) on ``input``: a scalar 0, or None."""
    return dummy_zero(g, "input", TensorProto.FLOAT, gflops, weights_mb)


def _output(g: Graph, zero: str | None, name: str) -> str:
    """The name the final op writes: ``name`` itself, or a tensor ``zero`` is added to after."""
    return name if zero is None else g.name(f"{name}_pre")


def _add_zero(g: Graph, zero: str | None, pre: str, name: str) -> None:
    if zero is not None:
        g.op("Add", [pre, zero], output=name)


def make_xseg(path: PathLike, *, gflops: float = 0.0, weights_mb: float = 0.0) -> None:
    g = Graph("xseg")
    zero = _cost(g, gflops, weights_mb)
    lo, hi = (g.const(np.array(v, np.float32)) for v in OCCLUDER_RANGE)
    axis = g.const(np.array([3], np.int64))

    def channel(c: int) -> str:
        return g.op("Slice", ["input", g.const(np.array([c], np.int64)),
                              g.const(np.array([c + 1], np.int64)), axis], f"channel{c}")

    d = g.op("Sub", [channel(0), channel(2)], "blue_minus_red")
    occluded = g.op("And", [g.op("Greater", [d, lo]), g.op("Less", [d, hi])], "occluded")
    out = _output(g, zero, "output")
    g.op("Sub", [g.const(np.array(1.0, np.float32)),
                 g.op("Cast", [occluded], to=TensorProto.FLOAT)], output=out)
    _add_zero(g, zero, out, "output")
    inp = [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 256, 256, 3])]
    out = [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 256, 256, 1])]
    finish(g, "xseg_standin", inp, out, path, doc="xseg stand-in: blue squares are occluders")


def make_bisenet(path: PathLike, class_map: np.ndarray, *, gflops: float = 0.0,
                 weights_mb: float = 0.0) -> None:
    """``class_map``: (4, 4) class ids, one per 128-px cell of the 512-px input."""
    cells = np.asarray(class_map, np.int64)
    onehot = (np.arange(19)[:, None, None] == cells[None]).astype(np.float32) * 10.0
    g = Graph("bisenet")
    zero = _cost(g, gflops, weights_mb)
    logits = g.op("Resize", [g.const(onehot[None], "cell_logits"), "",
                             g.const(np.array([1, 1, CELL, CELL], np.float32), "scales")],
                  "class_logits", mode="nearest")
    axis = g.const(np.array([1], np.int64))

    def channel(c: int) -> str:
        return g.op("Slice", ["input", g.const(np.array([c], np.int64)),
                              g.const(np.array([c + 1], np.int64)), axis], f"channel{c}")

    red = g.op("And", [g.op("Greater", [channel(0), g.const(np.array(1.5, np.float32))]),
                       g.op("Less", [channel(2), g.const(np.array(-1.0, np.float32))])], "red")
    background = g.const((np.arange(19) == 0).astype(np.float32).reshape(1, 19, 1, 1) * 10.0)
    out = _output(g, zero, "output")
    g.op("Where", [red, background, logits], output=out)
    _add_zero(g, zero, out, "output")
    inp = [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 512, 512])]
    out = [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 19, 512, 512])]
    finish(g, "bisenet_standin", inp, out, path, doc="bisenet stand-in: a fixed class map")


def fan_grid_points() -> np.ndarray:
    """(68, 2) int: the 2dfan4 stand-in's default points on its 64-px grid (FACE_68 scaled into
    the middle of the grid)."""
    return np.rint(FACE_68 * 48.0 + 8.0).astype(np.int64)


def make_2dfan4(path: PathLike, points: np.ndarray | None = None, peak: float = 0.9, *,
                gflops: float = 0.0, weights_mb: float = 0.0) -> None:
    """``points``: (68, 2) integer (x, y) on the 64-px grid; each heatmap is ``peak`` there."""
    grid = fan_grid_points() if points is None else np.asarray(points, np.int64)
    maps = np.zeros((1, 68, 64, 64), np.float32)
    maps[0, np.arange(68), grid[:, 1], grid[:, 0]] = peak
    g = Graph("fan2d")
    cost = _cost(g, gflops, weights_mb)
    zero = g.op("Mul", [g.op("ReduceMean", ["input"], keepdims=0),
                        g.const(np.array(0.0, np.float32))], "zero")
    if cost is not None:
        zero = g.op("Add", [zero, cost], "zero_and_cost")
    heat = g.op("Add", [g.const(maps, "maps"), zero], output="heatmaps")
    flat = g.op("Reshape", [heat, g.const(np.array([1, 68, 64 * 64], np.int64))], "flat")
    index = g.op("ArgMax", [flat], "argmax", axis=2, keepdims=1)                  # (1, 68, 1)
    side = g.const(np.array(64, np.int64))
    x = g.op("Cast", [g.op("Mod", [index, side])], "x", to=TensorProto.FLOAT)
    y = g.op("Cast", [g.op("Div", [index, side])], "y", to=TensorProto.FLOAT)
    top = g.op("ReduceMax", [flat], "peak", axes=[2], keepdims=1)
    g.op("Concat", [x, y, top], output="landmarks", axis=2)
    inp = [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 256, 256])]
    out = [helper.make_tensor_value_info("landmarks", TensorProto.FLOAT, [1, 68, 3]),
           helper.make_tensor_value_info("heatmaps", TensorProto.FLOAT, [1, 68, 64, 64])]
    finish(g, "fan2d_standin", inp, out, path, doc="2dfan4 stand-in: fixed heatmaps")


def make_fan_68_5(path: PathLike) -> None:
    g = Graph("fan_68_5")
    centre = g.op("ReduceMean", ["input"], "centre", axes=[1], keepdims=1)       # (1, 1, 2)
    offsets = (FACE_68 - FFHQ_512.mean(axis=0)).astype(np.float32)[None]
    g.op("Add", [centre, g.const(offsets, "offsets")], output="output")
    inp = [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 5, 2])]
    out = [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 68, 2])]
    finish(g, "fan_68_5_standin", inp, out, path, doc="fan_68_5 stand-in: a fixed face, moved")
