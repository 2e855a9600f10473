"""Stand-ins of the identity-vector swappers (hyperswap, SimSwap, Ghost) and of the crossface
embedding converter, with their production I/O contracts (``shared/docs/models.md`` §1).

* ``make_embedding_swapper``: ``target`` [1,3,S,S] float32 (normalised crop) and ``source``
  [1,512] float32 → ``output`` [1,3,S,S]. ``mode="identity"`` returns ``target`` (a swapper that
  swaps nothing: normalisation, tiles and paste-back must give the crop back);
  ``mode="source"`` returns 0.5·target + 0.5·tanh(source @ W) per channel (the source input
  shows in the colour); ``mode="tile-mean"`` returns each tile's own mean colour everywhere (a
  polyphase tile's mean is the crop's; a quadrant's is not).
* ``make_image_swapper``: BlendSwap / UniFace, the source face's crop as ``source``.
* ``make_crossface``: ``input`` [1,512] → ``output`` [1,512] = ``scale`` · input, so what the
  converter was fed (raw or normalised) shows in the swapper's source.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from render.standins.graph import Graph, PathLike, dummy_zero, finish

MODES = ("identity", "source", "tile-mean")


def make_embedding_swapper(path: PathLike, *, size: int = 256, mode: str = "identity",
                           dynamic_batch: bool = False, gflops: float = 0.0,
                           weights_mb: float = 0.0) -> onnx.ModelProto:
    """``gflops``/``weights_mb``: emulated cost and weights (``graph.dummy_zero``), outputs
    unchanged."""
    assert mode in MODES, mode
    g = Graph(f"swapper_{mode}")
    zero = dummy_zero(g, "target", TensorProto.FLOAT, gflops, weights_mb)
    out = "output" if zero is None else g.name("swapped")
    if mode == "identity":
        g.op("Identity", ["target"], output=out)
    elif mode == "tile-mean":
        mean = g.op("ReduceMean", ["target"], "tile_mean", axes=[2, 3], keepdims=1)
        g.op("Add", [g.op("Mul", ["target", g.const(np.array(0.0, np.float32), "zero")], "zeros"),
                     mean], output=out)
    else:
        w = (np.random.RandomState(256).standard_normal((512, 3)) * 0.5).astype(np.float32)
        colour = g.op("Tanh", [g.op("MatMul", ["source", g.const(w, "w")], "logits")], "colour")
        colour = g.op("Reshape", [colour, g.const(np.array([-1, 3, 1, 1], np.int64), "shape")],
                      "colour4")
        half = g.const(np.array(0.5, np.float32), "half")
        g.op("Add", [g.op("Mul", ["target", half], "kept"), g.op("Mul", [colour, half], "tint")],
             output=out)
    if zero is not None:
        g.op("Add", [out, zero], output="output")
    b = "n" if dynamic_batch else 1
    inp = [helper.make_tensor_value_info("target", TensorProto.FLOAT, [b, 3, size, size]),
           helper.make_tensor_value_info("source", TensorProto.FLOAT, [b, 512])]
    out = [helper.make_tensor_value_info("output", TensorProto.FLOAT, [b, 3, size, size])]
    return finish(g, f"embedding_swapper_{mode}_standin", inp, out, path,
                  doc=f"identity-vector swapper stand-in ({mode})")


def make_crossface(path: PathLike, *, scale: float = 2.0) -> onnx.ModelProto:
    g = Graph("crossface")
    g.op("Mul", ["input", g.const(np.array(scale, np.float32), "scale")], output="output")
    inp = [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 512])]
    out = [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 512])]
    return finish(g, "crossface_standin", inp, out, path, doc="crossface stand-in: scale x input")


def make_image_swapper(path: PathLike, *, size: int = 256, source_size: int = 112,
                       signed: bool = False) -> onnx.ModelProto:
    """BlendSwap / UniFace stand-in: ``target`` [1,3,S,S] and ``source`` [1,3,s,s] (the source
    face's crop, RGB x/255, fixed side: a crop of another side fails the call) → ``output``: the
    source crop's mean colour everywhere (in −1..1 when ``signed``), so what was fed as the
    source, and in which channel order, shows in the swapped face."""
    g = Graph("image_swapper")
    mean = g.op("ReduceMean", ["source"], "source_mean", axes=[2, 3], keepdims=1)
    if signed:
        mean = g.op("Sub", [g.op("Mul", [mean, g.const(np.array(2.0, np.float32), "two")]),
                            g.const(np.array(1.0, np.float32), "one")], "signed_mean")
    zeros = g.op("Mul", ["target", g.const(np.array(0.0, np.float32), "zero")], "zeros")
    g.op("Add", [zeros, mean], output="output")
    inp = [helper.make_tensor_value_info("target", TensorProto.FLOAT, [1, 3, size, size]),
           helper.make_tensor_value_info("source", TensorProto.FLOAT, [1, 3, source_size,
                                                                       source_size])]
    out = [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, size, size])]
    return finish(g, "image_swapper_standin", inp, out, path,
                  doc="BlendSwap/UniFace stand-in: the source crop's mean colour")
