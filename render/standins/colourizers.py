"""Stand-ins of the frame colourisers, with the production I/O contracts (FaceFusion's
``frame_colorizer``): ``input`` [n,3,h,w] float32 → one output, spatial side free (the
``colourize.size`` option chooses it), and answers a test can predict.

* ``make_ddcolor``: the grey as RGB 0..1 in, ``output`` [n,2,h,w] (Lab a, b) out.
  ``mode="position"``: a and b are straight lines across the model's square,
  ``a = A_SPAN · x / (w − 1) − A_SPAN / 2`` and ``b = B_SPAN · y / (h − 1) − B_SPAN / 2`` (x, y:
  the model's pixel), whatever the input: where each frame pixel's colour was taken shows in its
  a, b. ``mode="input"``: ``a = INPUT_GAIN · (R − 0.5)``, ``b = −INPUT_GAIN · (B − 0.5)``: what
  the model was fed, and at which scale, shows in the colour.
* ``make_deoldify``: the grey as RGB 0..255 in, ``output`` [n,3,h,w] RGB out: ``R = 1.5·r + 40``,
  ``G = g``, ``B = 0.5·b − 30`` (:func:`deoldify_answer`), above 255 for light greys and below 0
  for dark ones, so a colour that wraps instead of being clipped shows.

``dynamic_batch``: the first dimension symbolic (else 1); ``side``: a fixed spatial side (else
symbolic).
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from render.standins.graph import Graph, PathLike, finish

#: the DDColor stand-in's a and b across its square (position mode)
A_SPAN = 40.0
B_SPAN = -36.0
#: the DDColor stand-in's a, b per unit of input (input mode)
INPUT_GAIN = 60.0
#: the DeOldify stand-in's answer per RGB channel: gain, offset
DEOLDIFY = ((1.5, 40.0), (1.0, 0.0), (0.5, -30.0))


def deoldify_answer(grey: float) -> tuple[float, float, float]:
    """The DeOldify stand-in's R, G, B for an input grey level (0..255), before any clip."""
    return tuple(gain * grey + offset for gain, offset in DEOLDIFY)


def _f(value: float) -> np.ndarray:
    return np.array(value, np.float32)


def _io(channels_out: int, dynamic_batch: bool, side: int | None) -> tuple[list, list]:
    b = "n" if dynamic_batch else 1
    h, w = (side, side) if side else ("h", "w")
    return ([helper.make_tensor_value_info("input", TensorProto.FLOAT, [b, 3, h, w])],
            [helper.make_tensor_value_info("output", TensorProto.FLOAT, [b, channels_out, h, w])])


def _channel(g: Graph, k: int) -> str:
    """input[:, k:k+1]: [n,1,h,w]."""
    return g.op("Slice", ["input", g.const(np.array([k], np.int64), "start"),
                          g.const(np.array([k + 1], np.int64), "end"),
                          g.const(np.array([1], np.int64), "axis")], f"channel{k}")


def _ramp(g: Graph, axis: int, span: float) -> str:
    """``span · i / (len − 1) − span / 2`` along the input's ``axis`` (2: rows, 3: columns),
    shaped to broadcast over [n,1,h,w]."""
    shape = g.op("Shape", ["input"], "shape")
    length = g.op("Cast", [g.op("Gather", [shape, g.const(np.array(axis, np.int64), "axis")],
                                "len")], "len_f", to=TensorProto.FLOAT)
    index = g.op("Range", [g.const(_f(0.0), "zero"), length, g.const(_f(1.0), "one")], "index")
    last = g.op("Sub", [length, g.const(_f(1.0), "one")], "last")
    ramp = g.op("Sub", [g.op("Mul", [g.op("Div", [index, last], "unit"), g.const(_f(span))]),
                        g.const(_f(span / 2))], "ramp")
    if axis == 2:
        ramp = g.op("Unsqueeze", [ramp, g.const(np.array([1], np.int64), "axes")], "column")
    return ramp


def make_ddcolor(path: PathLike, *, mode: str = "position", dynamic_batch: bool = True,
                 side: int | None = None) -> onnx.ModelProto:
    assert mode in ("position", "input"), mode
    g = Graph(f"ddcolor_{mode}")
    red = _channel(g, 0)
    if mode == "position":
        zeros = g.op("Mul", [red, g.const(_f(0.0), "zero")], "zeros")
        a = g.op("Add", [zeros, _ramp(g, 3, A_SPAN)], "a")
        b = g.op("Add", [zeros, _ramp(g, 2, B_SPAN)], "b")
    else:
        half, gain = g.const(_f(0.5), "half"), g.const(_f(INPUT_GAIN), "gain")
        a = g.op("Mul", [g.op("Sub", [red, half]), gain], "a")
        b = g.op("Mul", [g.op("Sub", [half, _channel(g, 2)]), gain], "b")
    g.op("Concat", [a, b], output="output", axis=1)
    inputs, outputs = _io(2, dynamic_batch, side)
    return finish(g, f"ddcolor_{mode}_standin", inputs, outputs, path,
                  doc=f"DDColor stand-in ({mode}): Lab a, b out")


def make_deoldify(path: PathLike, *, dynamic_batch: bool = False,
                  side: int | None = None) -> onnx.ModelProto:
    g = Graph("deoldify")
    planes = [g.op("Add", [g.op("Mul", [_channel(g, k), g.const(_f(gain), "gain")]),
                           g.const(_f(offset), "offset")], f"rgb{k}")
              for k, (gain, offset) in enumerate(DEOLDIFY)]
    g.op("Concat", planes, output="output", axis=1)
    inputs, outputs = _io(3, dynamic_batch, side)
    return finish(g, "deoldify_standin", inputs, outputs, path,
                  doc="DeOldify stand-in: RGB out, past 0..255 at the ends")
