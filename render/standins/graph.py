"""ONNX graph building for the stand-in models: a tiny builder, emulated extra compute, writing a file.

Builds are byte-deterministic: fixed ``numpy.random.RandomState`` seeds, no timestamps, opset 17,
IR version 8.
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Union

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8

_DUMMY_N = 512  # side of the MatMul chain used to emulate heavier models

PathLike = Union[str, "os.PathLike[str]"]


class Graph:
    """Tiny builder: collects nodes and initializers, hands out unique tensor names."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._n = 0

    def name(self, hint: str) -> str:
        self._n += 1
        return f"{self.prefix}/{hint}_{self._n}"

    def const(self, array: np.ndarray, hint: str = "c", *, name: str | None = None) -> str:
        tname = name or self.name(hint)
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), tname))
        return tname

    def op(self, op_type: str, inputs: list[str], hint: str | None = None, *, output: str | None = None,
           **attrs) -> str:
        out = output or self.name(hint or op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=self.name(op_type), **attrs))
        return out


def np_dtype(elem_type: int):
    return np.float16 if elem_type == TensorProto.FLOAT16 else np.float32


def dummy_zero(g: Graph, source: str, elem_type: int, gflops: float, weights_mb: float = 0.0) -> str | None:
    """Emulate ``gflops`` of extra compute that depends on ``source``; returns a scalar 0 tensor name.

    Without ``weights_mb``: A = W * (1 + mean(source)); then A = A @ W, repeated. W = 1/n everywhere is
    idempotent, so values stay bounded (no inf/NaN, so ``x * 0`` is exactly 0). The final ReduceSum is
    multiplied by 0.

    With ``weights_mb``: the weights of a real model -- about ``weights_mb`` MiB of distinct n x n
    matrices W_i, each read once per call like a real network's layers, so the file size, load time
    and memory traffic per call are of the right order. A has m rows per item of the batch, chosen
    so that the chain costs ``gflops`` per item; each W_i is column-stochastic (non-negative, columns sum to 1), so every entry of
    A @ W_i is a convex combination of A's and values stay bounded.
    """
    if not gflops or gflops <= 0:
        return None
    dt = np_dtype(elem_type)
    n = _DUMMY_N
    if weights_mb and weights_mb > 0:
        k = max(1, int(round(weights_mb * 2**20 / (n * n * np.dtype(dt).itemsize))))
        m = max(1, int(round(gflops * 1e9 / (2.0 * n * n * k))))
        rs = np.random.RandomState(4242 + k)
        # one [m, n] activation per item of the batch: the cost scales with the batch, as a real
        # network's does
        t = g.op("ReduceMean", [source], "dummy_item_mean", axes=[1, 2, 3], keepdims=1)  # [b,1,1,1]
        t = g.op("Reshape", [t, g.const(np.array([-1, 1, 1], dtype=np.int64), "shape")], "dummy_t")
        a0 = g.const(np.full((m, n), 1.0 / n, dtype=dt), "dummy_a0")
        a = g.op("Add", [g.op("Mul", [a0, t]), a0], "dummy_a")                       # [b,m,n]
        for _ in range(k):
            w = rs.random_sample((n, n)).astype(np.float32) + 0.01
            w /= w.sum(axis=0, keepdims=True)
            a = g.op("MatMul", [a, g.const(w.astype(dt), "dummy_w")], "dummy_mm")
    else:
        t = g.op("ReduceMean", [source], "dummy_mean", keepdims=0)
        count = max(1, int(math.ceil(gflops * 1e9 / (2.0 * n**3))))
        w = g.const(np.full((n, n), 1.0 / n, dtype=dt), "dummy_w")
        a = g.op("Add", [g.op("Mul", [w, t]), w], "dummy_a")
        for _ in range(count):
            a = g.op("MatMul", [a, w], "dummy_mm")
    s = g.op("ReduceSum", [a], "dummy_sum", keepdims=0)
    return g.op("Mul", [s, g.const(np.array(0.0, dtype=dt), "zero")], "dummy_zero")


def finish(g: Graph, name: str, inputs, outputs, path: PathLike, *, doc: str) -> onnx.ModelProto:
    graph = helper.make_graph(g.nodes, name, inputs, outputs, initializer=g.inits)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="render-tests-standins",   # part of every file's bytes: keep
        producer_version="1",
        doc_string=doc,
    )
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    data = model.SerializeToString(deterministic=True)
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, p)
    return model


