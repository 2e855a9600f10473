"""Peak memory and time of one frame-enhancer call per tile size: Real-ESRGAN x2's own
architecture (RRDBNet: pixel-unshuffle, 23 RRDBs of 3 dense blocks of 5 convs, nearest ×2
upsamplings, ``bench/frame_costs.py``) built as an ONNX graph with random weights, run once per
tile size in a fresh process on the CPU provider: the process's peak resident memory over its
memory with the session created, and the call's time.

    python -m bench.tile_memory [--tiles 128,256,512] [--batch 1]

What it shows is how the activations grow with the tile (the weights are the real model's 16.7 M
parameters); a GPU provider's arena holds about the same activations, rounded up to its blocks.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

NF, GC, BLOCKS = 64, 32, 23


def build(path: Path) -> None:
    """RRDBNet x2 with a dynamic tile side, random weights (seeded), to ``path``."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rs = np.random.RandomState(7)
    nodes, inits = [], []
    count = [0]

    def name(hint: str) -> str:
        count[0] += 1
        return f"{hint}_{count[0]}"

    def conv(x: str, cin: int, cout: int, k: int = 3, act: bool = False) -> str:
        w, b = name("w"), name("b")
        scale = np.sqrt(2.0 / (cin * k * k)) * 0.1
        inits.append(numpy_helper.from_array((rs.standard_normal((cout, cin, k, k)) * scale)
                                             .astype(np.float32), w))
        inits.append(numpy_helper.from_array(np.zeros(cout, np.float32), b))
        y = name("conv")
        nodes.append(helper.make_node("Conv", [x, w, b], [y], pads=[k // 2] * 4))
        if act:
            z = name("lrelu")
            nodes.append(helper.make_node("LeakyRelu", [y], [z], alpha=0.2))
            return z
        return y

    def scaled_add(x: str, residual: str) -> str:
        c = name("c")
        inits.append(numpy_helper.from_array(np.array(0.2, np.float32), c))
        m, y = name("mul"), name("add")
        nodes.append(helper.make_node("Mul", [residual, c], [m]))
        nodes.append(helper.make_node("Add", [m, x], [y]))
        return y

    def dense_block(x: str) -> str:
        feats = [x]
        for i in range(4):
            cat = name("cat")
            nodes.append(helper.make_node("Concat", feats, [cat], axis=1))
            feats.append(conv(cat, NF + i * GC, GC, act=True))
        cat = name("cat")
        nodes.append(helper.make_node("Concat", feats, [cat], axis=1))
        return scaled_add(x, conv(cat, NF + 4 * GC, NF))

    def upsample(x: str) -> str:
        scales, y = name("scales"), name("up")
        inits.append(numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), scales))
        nodes.append(helper.make_node("Resize", [x, "", scales], [y], mode="nearest"))
        return y

    unshuffled = name("unshuffle")
    nodes.append(helper.make_node("SpaceToDepth", ["input"], [unshuffled], blocksize=2))
    first = conv(unshuffled, 12, NF)
    x = first
    for _ in range(BLOCKS):
        y = x
        for _ in range(3):
            y = dense_block(y)
        x = scaled_add(x, y)
    body = conv(x, NF, NF)
    feat = name("trunk")
    nodes.append(helper.make_node("Add", [first, body], [feat]))
    feat = conv(upsample(feat), NF, NF, act=True)
    feat = conv(upsample(feat), NF, NF, act=True)
    out = conv(conv(feat, NF, NF, act=True), NF, 3)
    nodes.append(helper.make_node("Identity", [out], ["output"]))
    graph = helper.make_graph(
        nodes, "rrdbnet_x2",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["n", 3, "h", "w"])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["n", 3, "H", "W"])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


def one(path: str, tile: int, batch: int, threads: int) -> dict:
    """In this process: create the session, then one call on ``batch`` tiles of ``tile``."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    x = np.random.RandomState(1).random_sample((batch, 3, tile, tile)).astype(np.float32)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    y = session.run(None, {"input": x})[0]
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert y.shape == (batch, 3, 2 * tile, 2 * tile), y.shape
    return {"tile": tile, "batch": batch, "seconds": round(seconds, 2),
            "session_mib": round(before / 1024), "call_mib": round((peak - before) / 1024)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.tile_memory", description=__doc__)
    p.add_argument("--tiles", default="128,256,512")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--one", nargs=2, metavar=("MODEL", "TILE"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one[0], int(args.one[1]), args.batch, args.threads)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "rrdbnet_x2.onnx"
        build(model)
        print(f"RRDBNet x2 (real architecture, random weights), {model.stat().st_size >> 20} MiB, "
              f"batch {args.batch}, {args.threads} threads, CPU provider")
        print("tile  output   call s  session MiB  call's extra peak MiB")
        for tile in (int(t) for t in args.tiles.split(",")):
            r = subprocess.run([sys.executable, "-m", "bench.tile_memory", "--one", str(model),
                                str(tile), "--batch", str(args.batch), "--threads",
                                str(args.threads)], capture_output=True, text=True, check=True)
            row = json.loads(r.stdout)
            print(f"{tile:4d}  {2 * tile:6d}  {row['seconds']:7.2f}  {row['session_mib']:11d}  "
                  f"{row['call_mib']:21d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
