"""Stand-ins of the matting models (the background remover's), with the real tensor contracts
and a matte a test can compute on its own: the matte is the input's green channel, G/255, found
by undoing the model's normalisation (so a wrong mean or std shows as a wrong matte).

- ``matting``: ``input`` (1,3,S,S) → ``output`` (1,1,S,S) = G/255.
- ``matting-u2net-cloth``: → (1,4,S,S) class scores: class 0 scores 0.5, class 1 G/255 (so any
  pixel with G/255 > 0.5 is foreground), classes 2 and 3 score 0.
- ``matting-corridor-key``: ``input`` (1,4,S,S) → ``mask`` (1,1,S,S) = the fourth channel (the
  coarse key) and ``frame`` (1,3,S,S) = the RGB denormalised, with its red channel zeroed.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper

from render.standins.graph import Graph, PathLike, dummy_zero, finish

IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))


def _channel(g: Graph, source: str, index: int) -> str:
    return g.op("Slice", [source, g.const(np.array([index], np.int64), "start"),
                          g.const(np.array([index + 1], np.int64), "end"),
                          g.const(np.array([1], np.int64), "axis")], f"channel{index}")


def _denormalised(g: Graph, mean: Sequence[float], std: Sequence[float], channels: int = 3) -> str:
    """The input's first three channels back in [0,1]: x·std + mean."""
    x = "input"
    if channels != 3:
        x = g.op("Slice", ["input", g.const(np.array([0], np.int64), "start"),
                           g.const(np.array([3], np.int64), "end"),
                           g.const(np.array([1], np.int64), "axis")], "rgb")
    s = g.const(np.array(std, np.float32).reshape(1, 3, 1, 1), "std")
    m = g.const(np.array(mean, np.float32).reshape(1, 3, 1, 1), "mean")
    return g.op("Add", [g.op("Mul", [x, s]), m], "rgb01")


def make_matting(path: PathLike, *, size: int = 512, contract: str = "matting",
                 mean: Sequence[float] = (0.5, 0.5, 0.5), std: Sequence[float] = (0.5, 0.5, 0.5),
                 gflops: float = 0.0, weights_mb: float = 0.0) -> onnx.ModelProto:
    """Write the stand-in of a ``contract`` matting model of input side ``size`` whose manifest
    entry gives ``mean`` and ``std``; ``gflops`` emulates the real model's cost."""
    g = Graph("matting")
    channels = 4 if contract == "matting-corridor-key" else 3
    rgb = _denormalised(g, mean, std, channels)
    green = _channel(g, rgb, 1)
    dz = dummy_zero(g, "input", TensorProto.FLOAT, gflops, weights_mb)
    if dz is not None:
        green = g.op("Add", [green, dz], "plus_dummy")
    shape = [1, 1, size, size]
    if contract == "matting-u2net-cloth":
        half = g.op("Add", [g.op("Mul", [green, g.const(np.array(0.0, np.float32), "z")]),
                            g.const(np.array(0.5, np.float32), "half")], "class0")
        zero = g.op("Mul", [green, g.const(np.array(0.0, np.float32), "z2")], "class23")
        g.op("Concat", [half, green, zero, zero], output="output", axis=1)
        outputs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 4, size, size])]
    elif contract == "matting-corridor-key":
        g.op("Identity", [_channel(g, "input", 3)], output="mask")
        keep = g.const(np.array([0.0, 1.0, 1.0], np.float32).reshape(1, 3, 1, 1), "no_red")
        g.op("Mul", [rgb, keep], output="frame")
        outputs = [helper.make_tensor_value_info("mask", TensorProto.FLOAT, shape),
                   helper.make_tensor_value_info("frame", TensorProto.FLOAT, [1, 3, size, size])]
    else:
        g.op("Identity", [green], output="output")
        outputs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, shape)]
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                            [1, channels, size, size])]
    return finish(g, "matting_standin", inputs, outputs, path,
                  doc=f"{contract} stand-in: the matte is the input's green channel")


def write_matting(dir: PathLike, name: str, *, size: int, mean: Sequence[float],
                  std: Sequence[float], gflops: float = 0.0, weights_mb: float = 0.0) -> dict:
    """Write a ``matting`` stand-in as ``name`` into ``dir`` and add its entry to
    ``dir/manifest.yaml`` (created when missing); returns the entry."""
    import yaml

    from render.files import sha256_file

    d = Path(dir)
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{name}.onnx"
    make_matting(path, size=size, mean=mean, std=std, gflops=gflops, weights_mb=weights_mb)
    entry = {"file": path.name, "sha256": sha256_file(path), "licence": "MIT",
             "commercial_use": True, "contract": "matting", "template": None, "input_size": size,
             "precision": "fp32", "params": {"mean": list(mean), "std": list(std)}}
    manifest = d / "manifest.yaml"
    doc = yaml.safe_load(manifest.read_text()) if manifest.is_file() else {"version": 1}
    doc.setdefault("models", {})[name] = entry
    manifest.write_text(yaml.safe_dump(doc, sort_keys=False))
    return entry
