"""Stand-ins of the production models, each with its model's exact I/O contract.

Input/output names, shapes, dtypes, normalisation and value ranges are those of the production files
(``shared/docs/models.md``); every graph does deterministic, content-dependent work, so tests can
assert what happened to what they drew.

* ``make_scrfd``: a scale-selective centre-surround detector of "faceness" (its docstring).
* ``make_arcface``: a pooled colour projection to a 512-d raw embedding.
* ``make_inswapper``: a blend toward a colour chosen by the source latent. ``emap`` (512 x 512) is the
  LAST graph initializer, float16 in the fp16 file (every initializer is float16 there, like a
  float16-converted model), float32 otherwise: cast it to float32 before computing
  ``latent = (e . emap) / ||e||``. The fp16 swapper declares float16 inputs and output and computes in
  float16: feed it what the file declares.
* ``make_gfpgan``: tanh contrast and a colour shift.

``gflops``/``weights_mb`` add emulated compute and weights (``graph.dummy_zero``) whose result is
multiplied by 0: outputs are bit-identical with and without them.
"""
from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper

from render.standins.graph import Graph, PathLike, dummy_zero, finish, np_dtype

# Templates (x, y as fractions of the crop side), from shared/docs/models.md.
ARCFACE_112_V2 = np.array(
    [
        (0.34191607, 0.46157411),
        (0.65653393, 0.45983393),
        (0.50022500, 0.64050536),
        (0.37097589, 0.82469196),
        (0.63151696, 0.82325089),
    ],
    dtype=np.float64,
)

STRIDES = (8, 16, 32)
ANCHORS_PER_CELL = 2
SURROUND_WEIGHT = 2.0


# --------------------------------------------------------------------------------------- SCRFD
def _cell_means(g: Graph, x: str, s: int) -> str:
    """Mean of x over each s x s cell (cell (i, j) = rows [i*s, (i+1)*s)); output [1,1,H/s,W/s]."""
    return g.op("AveragePool", [x], f"cells{s}", kernel_shape=[s, s], strides=[s, s])


def _box_mean(g: Graph, cells: str, k: int, s: int) -> str:
    """Mean of x over the (k*s) x (k*s) window centred on (i*s, j*s), from its s x s cell means
    ``cells``; output [1,1,H/s,W/s].

    Output index i covers input rows [i*s - k*s/2, i*s + k*s/2), that is the cells i - k/2 ..
    i + k/2 - 1: an AveragePool of k x k cells with symmetric zero padding k/2
    (count_include_pad=1, so border windows count the padding as zeros). The padded output has
    H/s + 1 rows; drop the last. Averaging cell means reads every pixel once per stride (a
    pixel-domain window of 8s would read it 8 times per pass), so the stand-in costs little
    beside the pipeline it stands in for.
    """
    p = k // 2
    y = g.op("AveragePool", [cells], f"box{k}x{s}", kernel_shape=[k, k], strides=[1, 1],
             pads=[p, p, p, p], count_include_pad=1)
    starts = g.const(np.array([0, 0], dtype=np.int64), "starts")
    ends = g.const(np.array([-1, -1], dtype=np.int64), "ends")
    axes = g.const(np.array([2, 3], dtype=np.int64), "axes")
    return g.op("Slice", [y, starts, ends, axes], f"mean{k}x{s}")


def _local_max(g: Graph, sc: str, s: int) -> str:
    """Keep a score only where it is the maximum of its 3 x 3 cell neighbourhood (others -> 0).

    Ties are broken by a tiny fixed pattern 1e-4 * ((x mod 3) + 3 * (y mod 3)), whose 9 values are
    distinct in every 3 x 3 window, so exactly one anchor cell per square survives. Without this a
    square centred between anchors gives diagonal neighbours (IoU 0.39) that NMS at 0.4 keeps.
    """
    yy, xx = np.mgrid[0:3, 0:3]
    pat3 = g.const((1e-4 * (xx + 3 * yy)).astype(np.float32).reshape(1, 1, 3, 3), "tiebreak")
    shp = g.op("Shape", [sc], f"shape{s}")
    hw = g.op("Slice", [shp, g.const(np.array([2], np.int64), "b"), g.const(np.array([4], np.int64), "e"),
                        g.const(np.array([0], np.int64), "ax")], f"hw{s}")
    reps_hw = g.op("Div", [g.op("Add", [hw, g.const(np.array([2], np.int64), "two")]),
                           g.const(np.array([3], np.int64), "three")], f"reps_hw{s}")
    reps = g.op("Concat", [g.const(np.array([1, 1], np.int64), "ones"), reps_hw], f"reps{s}", axis=0)
    pat = g.op("Slice", [g.op("Tile", [pat3, reps], f"tiled{s}"), g.const(np.array([0, 0], np.int64), "b"), hw,
                         g.const(np.array([2, 3], np.int64), "ax")], f"tiebreak{s}")
    tb = g.op("Add", [sc, pat], f"tb{s}")
    mx = g.op("MaxPool", [tb], f"max3x3_{s}", kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    keep = g.op("Cast", [g.op("GreaterOrEqual", [tb, mx], f"is_max{s}")], f"keep{s}", to=TensorProto.FLOAT)
    return g.op("Mul", [sc, keep], f"peak{s}")


def make_scrfd(path: PathLike, *, gflops: float = 0.0, weights_mb: float = 0.0) -> onnx.ModelProto:
    """Write the SCRFD stand-in to ``path``; returns the model.

    A scale-selective centre-surround detector of "faceness" ``f = clip(R_n - B_n, 0, 1)``
    (normalised red minus normalised blue, so the fixture face colour BGR (60, 140, 230) is face and
    grey/blue backgrounds are not). A filled square of side ``D`` px (in detector-input pixels) is
    detected best at the stride ``s`` with ``4*s == D``: D=32 -> stride 8, D=64 -> stride 16,
    D=128 -> stride 32; its box (side ``4*s``) is centred on the anchor nearest the square's centre.
    score = clip(inner - 2 * ring, 0, 1), where inner is the mean faceness over the 4s x 4s window
    centred on the anchor and ring the mean over the 8s x 8s window minus the inner window (a
    surround weight of 2 rather than 1 keeps the corners of a square twice the stride's size below
    0.2, so a square gives one detection, not extra small boxes at its corners). Scores are then
    kept only at the maximum of each 3 x 3 cell neighbourhood (fixed tie-break), others set to 0, so
    a square anywhere between anchors yields exactly one box after threshold 0.5 + NMS 0.4. A square
    of side 4s gives a peak score of 1.0 when centred on an anchor and >= ~0.6 between anchors.
    """
    g = Graph("scrfd")
    x = "input"
    # faceness = clip(R_n - B_n, 0, 1); channel order is BGR.
    wf = np.array([-1.0, 0.0, 1.0], dtype=np.float32).reshape(1, 3, 1, 1)
    f = g.op("Conv", [x, g.const(wf, "faceness_w")], "red_minus_blue")
    zero = g.const(np.array(0.0, dtype=np.float32), "zero")
    one = g.const(np.array(1.0, dtype=np.float32), "one")
    f = g.op("Clip", [f, zero, one], "faceness")
    dz = dummy_zero(g, x, TensorProto.FLOAT, gflops, weights_mb)

    kps_unit = (ARCFACE_112_V2 * 4.0 - 2.0).astype(np.float32).reshape(1, 10)  # stride units
    outputs: dict[str, str] = {}
    for s in STRIDES:
        cells = _cell_means(g, f, s)
        inner = _box_mean(g, cells, 4, s)
        outer = _box_mean(g, cells, 8, s)
        # ring mean = (64*outer - 16*inner) / 48 = (4*outer - inner) / 3
        ring = g.op("Div", [g.op("Sub", [g.op("Mul", [outer, g.const(np.array(4.0, np.float32))]), inner]),
                            g.const(np.array(3.0, np.float32))], f"ring{s}")
        sc = g.op("Sub", [inner, g.op("Mul", [ring, g.const(np.array(SURROUND_WEIGHT, np.float32))])])
        sc = g.op("Clip", [sc, zero, one], f"score_map{s}")
        sc = _local_max(g, sc, s)
        # [1,1,h,w] -> [1,h,w,1] -> two anchors per cell [1,h,w,2] -> [N,1] (cell-major, then anchor)
        t = g.op("Transpose", [sc], f"nhwc{s}", perm=[0, 2, 3, 1])
        t = g.op("Concat", [t] * ANCHORS_PER_CELL, f"anchors{s}", axis=3)
        flat = g.op("Reshape", [t, g.const(np.array([-1, 1], dtype=np.int64), "shape")], f"flat{s}")
        if dz is not None:
            outputs[f"score_{s}"] = g.op("Add", [flat, dz], output=f"score_{s}")
        else:
            outputs[f"score_{s}"] = g.op("Identity", [flat], output=f"score_{s}")
        zcol = g.op("Mul", [flat, zero], f"zero_col{s}")  # [N,1] of zeros, broadcasts to [N,k]
        outputs[f"bbox_{s}"] = g.op("Add", [zcol, g.const(np.full((1, 4), 2.0, np.float32), "dist")],
                                    output=f"bbox_{s}")
        outputs[f"kps_{s}"] = g.op("Add", [zcol, g.const(kps_unit, "kps")], output=f"kps_{s}")

    inp = [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, "h", "w"])]
    outs = []
    for kind, width in (("score", 1), ("bbox", 4), ("kps", 10)):
        for s in STRIDES:
            outs.append(helper.make_tensor_value_info(f"{kind}_{s}", TensorProto.FLOAT, [f"n{s}", width]))
    return finish(g, "scrfd_standin", inp, outs, path,
                   doc="SCRFD stand-in: centre-surround detector of clip(R_n - B_n, 0, 1)")


# --------------------------------------------------------------------------------------- ArcFace
def make_arcface(path: PathLike, *, gflops: float = 0.0, weights_mb: float = 0.0) -> onnx.ModelProto:
    """ArcFace stand-in: input [1,3,112,112] RGB x/127.5-1 -> output [1,512] raw embedding."""
    rs = np.random.RandomState(112)
    w = (rs.standard_normal((192, 512)) / math.sqrt(192.0) * 8.0).astype(np.float32)
    b = (rs.standard_normal((512,)) * 0.1).astype(np.float32)
    g = Graph("arcface")
    y = g.op("AveragePool", ["input"], "pool", kernel_shape=[14, 14], strides=[14, 14])  # [1,3,8,8]
    y = g.op("Flatten", [y], "flat", axis=1)  # [1,192]
    y = g.op("MatMul", [y, g.const(w, "proj")], "proj")
    dz = dummy_zero(g, "input", TensorProto.FLOAT, gflops, weights_mb)
    if dz is not None:
        y = g.op("Add", [y, g.const(b, "bias")], "biased")
        g.op("Add", [y, dz], output="output")
    else:
        g.op("Add", [y, g.const(b, "bias")], output="output")
    inp = [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 112, 112])]
    out = [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 512])]
    return finish(g, "arcface_standin", inp, out, path, doc="ArcFace stand-in: pooled colour projection")


# --------------------------------------------------------------------------------------- inswapper
def _emap() -> np.ndarray:
    rs = np.random.RandomState(512)
    return (rs.standard_normal((512, 512)) / math.sqrt(512.0)).astype(np.float32)


def make_inswapper(path: PathLike, *, fp16: bool = False, dynamic_batch: bool = False, gflops: float = 0.0,
                   null: bool = False, weights_mb: float = 0.0) -> onnx.ModelProto:
    """inswapper stand-in: target [1,3,128,128] RGB 0..1 + source [1,512] latent -> output RGB 0..1.

    out = clip(0.6 * target + 0.4 * sigmoid((source @ emap) @ W3) + pattern, 0, 1), with a fixed
    512x3 W3 broadcast over the crop and a gentle (+-0.04) fixed spatial pattern. null=True: output =
    target exactly (emap still used, multiplied by 0). ``emap`` is the last initializer (float16 in the
    fp16 file, float32 otherwise).
    """
    et = TensorProto.FLOAT16 if fp16 else TensorProto.FLOAT
    dt = np_dtype(et)
    rs = np.random.RandomState(128)
    w3 = (rs.standard_normal((512, 3)) * 1.5).astype(dt)
    yy, xx = np.mgrid[0:128, 0:128].astype(np.float64)
    pattern = (0.04 * np.cos(2 * np.pi * xx / 32.0) * np.cos(2 * np.pi * yy / 32.0)).astype(dt)
    pattern = pattern.reshape(1, 1, 128, 128)

    g = Graph("inswapper")
    # emap goes last: build its node first but append its initializer at the very end.
    emap_name = "emap"
    lat = g.op("MatMul", ["source", emap_name], "latent_emap")  # [n,512]
    dz = dummy_zero(g, "target", et, gflops, weights_mb)
    if null:
        z = g.op("Mul", [g.op("ReduceSum", [lat], "lat_sum", keepdims=0), g.const(np.array(0.0, dt), "zero")])
        if dz is not None:
            z = g.op("Add", [z, dz], "zero_sum")
        g.op("Add", ["target", z], output="output")
    else:
        c = g.op("Sigmoid", [g.op("MatMul", [lat, g.const(w3, "w3")], "colour_logits")], "colour")  # [n,3]
        c = g.op("Reshape", [c, g.const(np.array([-1, 3, 1, 1], dtype=np.int64), "shape")], "colour4")
        y = g.op("Add", [g.op("Mul", ["target", g.const(np.array(0.6, dt), "a")]),
                         g.op("Mul", [c, g.const(np.array(0.4, dt), "b")])], "blend")
        y = g.op("Add", [y, g.const(pattern, "pattern")], "patterned")
        if dz is not None:
            y = g.op("Add", [y, dz], "plus_dummy")
        g.op("Clip", [y, g.const(np.array(0.0, dt), "lo"), g.const(np.array(1.0, dt), "hi")], output="output")
    g.const(_emap().astype(dt), name=emap_name)  # LAST initializer, like the real inswapper

    b = "n" if dynamic_batch else 1
    inp = [helper.make_tensor_value_info("target", et, [b, 3, 128, 128]),
           helper.make_tensor_value_info("source", et, [b, 512])]
    out = [helper.make_tensor_value_info("output", et, [b, 3, 128, 128])]
    return finish(g, "inswapper_standin", inp, out, path,
                   doc="inswapper stand-in: blend toward a colour chosen by the source latent")


# --------------------------------------------------------------------------------------- GFPGAN
def make_gfpgan(path: PathLike, *, dynamic_batch: bool = False, gflops: float = 0.0,
                null: bool = False, weights_mb: float = 0.0) -> onnx.ModelProto:
    """GFPGAN stand-in: input [1,3,512,512] RGB in -1..1 -> output [1,3,512,512] in -1..1.

    out = clip(tanh(1.2 * x) + 0.05 * tanh(M @ channel_means(x)), -1, 1) with a fixed 3x3 M;
    null=True: out = x exactly.
    """
    rs = np.random.RandomState(1024)
    m = rs.standard_normal((3, 3, 1, 1)).astype(np.float32)
    g = Graph("gfpgan")
    dz = dummy_zero(g, "input", TensorProto.FLOAT, gflops, weights_mb)
    if null:
        if dz is not None:
            g.op("Add", ["input", dz], output="output")
        else:
            g.op("Identity", ["input"], output="output")
    else:
        y = g.op("Tanh", [g.op("Mul", ["input", g.const(np.array(1.2, np.float32), "gain")])], "tanh")
        mean = g.op("ReduceMean", ["input"], "channel_mean", axes=[2, 3], keepdims=1)  # [n,3,1,1]
        shift = g.op("Tanh", [g.op("Conv", [mean, g.const(m, "mix")], "mix")], "shift_tanh")
        shift = g.op("Mul", [shift, g.const(np.array(0.05, np.float32), "shift_gain")], "shift")
        y = g.op("Add", [y, shift], "shifted")
        if dz is not None:
            y = g.op("Add", [y, dz], "plus_dummy")
        g.op("Clip", [y, g.const(np.array(-1.0, np.float32), "lo"), g.const(np.array(1.0, np.float32), "hi")],
             output="output")
    b = "n" if dynamic_batch else 1
    inp = [helper.make_tensor_value_info("input", TensorProto.FLOAT, [b, 3, 512, 512])]
    out = [helper.make_tensor_value_info("output", TensorProto.FLOAT, [b, 3, 512, 512])]
    return finish(g, "gfpgan_standin", inp, out, path, doc="GFPGAN stand-in: tanh contrast + colour shift")




def make_codeformer(path: PathLike) -> onnx.ModelProto:
    """CodeFormer stand-in: ``input`` [1,3,512,512] in -1..1 and ``weight`` float64 [1] ->
    ``output`` = input * weight, so the weight the renderer feeds shows in the picture (1 gives the
    crop back, 0 a mid-grey face)."""
    g = Graph("codeformer")
    w = g.op("Cast", ["weight"], "weight_f32", to=TensorProto.FLOAT)
    g.op("Mul", ["input", w], output="output")
    inp = [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 512, 512]),
           helper.make_tensor_value_info("weight", TensorProto.DOUBLE, [1])]
    out = [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, 512, 512])]
    return finish(g, "codeformer_standin", inp, out, path, doc="CodeFormer stand-in: input * weight")


def make_gpen(path: PathLike, size: int = 256) -> onnx.ModelProto:
    """GPEN-BFR stand-in: ``input`` [1,3,S,S] -> ``output`` = -input (a negative of the crop), with
    the side fixed, so a crop of another size fails the call."""
    g = Graph("gpen")
    g.op("Neg", ["input"], output="output")
    inp = [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])]
    out = [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, size, size])]
    return finish(g, f"gpen_{size}_standin", inp, out, path, doc="GPEN stand-in: -input")
