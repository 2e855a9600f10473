"""The stand-in models keep the production I/O contracts, and the generated media fits them."""
from __future__ import annotations

import hashlib
import time
from fractions import Fraction
from pathlib import Path

import cv2
import numpy as np
import onnx
import onnxruntime as ort
import pytest

from render import standins
from render.standins import media as mf

STRIDES = (8, 16, 32)


# ----------------------------------------------------------------------------- helpers
def _session(path) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = 2
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def _sha(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _detector_blob(frame: np.ndarray, size: int = 640):
    """Scale to fit ``size`` (longest side), paste top-left on a zero canvas, (x - 127.5) / 128, BGR."""
    h, w = frame.shape[:2]
    scale = size / float(max(h, w))
    nw, nh = int(round(w * scale)), int(round(h * scale))
    canvas = np.zeros((size, size, 3), dtype=np.uint8)
    canvas[:nh, :nw] = cv2.resize(frame, (nw, nh), interpolation=cv2.INTER_AREA)
    blob = ((canvas.astype(np.float32) - 127.5) / 128.0).transpose(2, 0, 1)[None]
    return np.ascontiguousarray(blob), scale


def _nms(dets: np.ndarray, thresh: float) -> list:
    x1, y1, x2, y2, sc = dets[:, 0], dets[:, 1], dets[:, 2], dets[:, 3], dets[:, 4]
    areas = (x2 - x1) * (y2 - y1)
    order = sc.argsort()[::-1]
    keep = []
    while order.size > 0:
        i = order[0]
        keep.append(i)
        xx1 = np.maximum(x1[i], x1[order[1:]])
        yy1 = np.maximum(y1[i], y1[order[1:]])
        xx2 = np.minimum(x2[i], x2[order[1:]])
        yy2 = np.minimum(y2[i], y2[order[1:]])
        inter = np.maximum(0.0, xx2 - xx1) * np.maximum(0.0, yy2 - yy1)
        iou = inter / (areas[i] + areas[order[1:]] - inter)
        order = order[1:][iou <= thresh]
    return keep


def _decode_scrfd(outs, in_h: int, in_w: int, thresh: float = 0.5, nms: float = 0.4):
    """Reference SCRFD decoder (insightface order): returns boxes [k,5], kps [k,5,2], strides [k]."""
    boxes, kpss, strides = [], [], []
    for i, s in enumerate(STRIDES):
        scores = outs[i][:, 0]
        dist = outs[i + 3] * s
        kd = outs[i + 6] * s
        h, w = in_h // s, in_w // s
        centres = (np.stack(np.mgrid[:h, :w][::-1], axis=-1).astype(np.float32) * s).reshape(-1, 2)
        centres = np.stack([centres] * 2, axis=1).reshape(-1, 2)
        assert scores.shape[0] == centres.shape[0] == h * w * 2
        keep = np.where(scores >= thresh)[0]
        c = centres[keep]
        b = np.stack([c[:, 0] - dist[keep, 0], c[:, 1] - dist[keep, 1],
                      c[:, 0] + dist[keep, 2], c[:, 1] + dist[keep, 3], scores[keep]], axis=1)
        k = np.stack([c[:, None, 0] + kd[keep, 0::2], c[:, None, 1] + kd[keep, 1::2]], axis=2)
        boxes.append(b)
        kpss.append(k)
        strides.append(np.full(len(keep), s))
    boxes = np.concatenate(boxes)
    kpss = np.concatenate(kpss)
    strides = np.concatenate(strides)
    if len(boxes) == 0:
        return boxes, kpss, strides
    keep = _nms(boxes, nms)
    return boxes[keep], kpss[keep], strides[keep]


def _detect(sess, frame: np.ndarray, size: int = 640):
    blob, scale = _detector_blob(frame, size)
    outs = sess.run(None, {"input": blob})
    boxes, kps, strides = _decode_scrfd(outs, size, size)
    return boxes, kps, strides, scale


def _check_found(boxes, strides, scale, truth_boxes):
    """Every truth square found once, centred within one stride, at the stride of its size."""
    assert len(boxes) == len(truth_boxes), (boxes, truth_boxes)
    for tb in truth_boxes:
        side_det = (tb[2] - tb[0]) * scale
        tcx, tcy = (tb[0] + tb[2]) / 2 * scale, (tb[1] + tb[3]) / 2 * scale
        cx = (boxes[:, 0] + boxes[:, 2]) / 2
        cy = (boxes[:, 1] + boxes[:, 3]) / 2
        j = int(np.argmin(np.hypot(cx - tcx, cy - tcy)))
        s = strides[j]
        assert abs(cx[j] - tcx) <= s and abs(cy[j] - tcy) <= s, (boxes[j], tb, scale)
        assert s == int(round(side_det / 4)), (s, side_det)
        assert boxes[j, 2] - boxes[j, 0] == pytest.approx(4 * s)


# ----------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("standins")
    t0 = time.perf_counter()
    manifest = standins.write_standins(d)
    elapsed = time.perf_counter() - t0
    return {"dir": d, "manifest": manifest, "elapsed": elapsed}


@pytest.fixture(scope="module")
def scrfd(models):
    return _session(models["dir"] / "scrfd_2.5g.onnx")


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    d = tmp_path_factory.mktemp("media")
    truth = mf.make_clip(d / "clip.mp4", seconds=2.0)
    return truth


# ----------------------------------------------------------------------------- manifest / files
def test_manifest_entries_and_hashes(models):
    d, m = models["dir"], models["manifest"]
    assert models["elapsed"] < 3.0
    assert set(m) == {"scrfd_2.5g", "arcface_w600k_r50", "inswapper_128", "inswapper_128_fp16", "gfpgan_1.4",
                      "hyperswap_1a_256", "xseg_1", "bisenet_resnet_34", "2dfan4"}
    # every model a profile names has its stand-in, so every profile renders in the tests
    from render.models.needs import profile_models
    assert {name for req in profile_models().values() for name, _ in req} <= set(m)
    for name, e in m.items():
        p = d / e["file"]
        assert p.is_file()
        assert e["file"] == standins.FILES[name]
        assert e["sha256"] == _sha(p)
        assert e["size"] == p.stat().st_size
        assert e["urls"] == []
        assert e["licence"] == "test stand-in"
    assert m["inswapper_128"]["variants"] == {"fp16": "inswapper_128_fp16"}
    assert m["inswapper_128_fp16"]["precision"] == "fp16"
    assert m["scrfd_2.5g"]["contract"] == "detector-scrfd" and m["scrfd_2.5g"]["template"] is None
    assert m["arcface_w600k_r50"]["template"] == "arcface_112_v2"
    assert m["inswapper_128"]["template"] == "arcface_128" and m["inswapper_128"]["input_size"] == 128
    assert m["gfpgan_1.4"]["template"] == "ffhq_512" and m["gfpgan_1.4"]["input_size"] == 512
    yaml = pytest.importorskip("yaml")
    doc = yaml.safe_load((d / "manifest.yaml").read_text())
    assert doc == {"version": 1, "models": m}


def test_byte_deterministic(tmp_path, models):
    m2 = standins.write_standins(tmp_path)
    assert {k: v["sha256"] for k, v in m2.items()} == {k: v["sha256"] for k, v in models["manifest"].items()}
    assert (tmp_path / "manifest.yaml").read_bytes() == (models["dir"] / "manifest.yaml").read_bytes()


CONTRACTS = {
    "scrfd_2.5g.onnx": (
        [("input", onnx.TensorProto.FLOAT, [1, 3, "h", "w"])],
        [(f"{k}_{s}", onnx.TensorProto.FLOAT, [None, w]) for k, w in (("score", 1), ("bbox", 4), ("kps", 10))
         for s in STRIDES],
    ),
    "arcface_w600k_r50.onnx": (
        [("input", onnx.TensorProto.FLOAT, [1, 3, 112, 112])],
        [("output", onnx.TensorProto.FLOAT, [1, 512])],
    ),
    "inswapper_128.onnx": (
        [("target", onnx.TensorProto.FLOAT, [1, 3, 128, 128]), ("source", onnx.TensorProto.FLOAT, [1, 512])],
        [("output", onnx.TensorProto.FLOAT, [1, 3, 128, 128])],
    ),
    "inswapper_128_fp16.onnx": (
        [("target", onnx.TensorProto.FLOAT16, [1, 3, 128, 128]), ("source", onnx.TensorProto.FLOAT16, [1, 512])],
        [("output", onnx.TensorProto.FLOAT16, [1, 3, 128, 128])],
    ),
    "gfpgan_1.4.onnx": (
        [("input", onnx.TensorProto.FLOAT, [1, 3, 512, 512])],
        [("output", onnx.TensorProto.FLOAT, [1, 3, 512, 512])],
    ),
}


def _dims(vi):
    return [d.dim_param if d.HasField("dim_param") else d.dim_value for d in vi.type.tensor_type.shape.dim]


@pytest.mark.parametrize("fname", sorted(CONTRACTS))
def test_io_contract(models, fname):
    path = models["dir"] / fname
    model = onnx.load(str(path))
    onnx.checker.check_model(model)
    assert model.ir_version == 8
    assert [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] == [17]
    want_in, want_out = CONTRACTS[fname]
    for got, want in ((model.graph.input, want_in), (model.graph.output, want_out)):
        assert [v.name for v in got] == [w[0] for w in want]
        for v, (_, et, shape) in zip(got, want):
            assert v.type.tensor_type.elem_type == et
            dims = _dims(v)
            assert len(dims) == len(shape)
            for dg, dw in zip(dims, shape):
                if dw is None:
                    assert isinstance(dg, str) and dg
                else:
                    assert dg == dw
    _session(path)  # loads in onnxruntime CPU


@pytest.mark.parametrize("fname,dtype", [("inswapper_128.onnx", np.float32), ("inswapper_128_fp16.onnx", np.float16)])
def test_emap_is_last_initializer(models, fname, dtype):
    model = onnx.load(str(models["dir"] / fname))
    last = model.graph.initializer[-1]
    assert last.name == "emap"
    emap = onnx.numpy_helper.to_array(last)
    assert emap.shape == (512, 512) and emap.dtype == dtype
    # latent = (e . emap) / |e| has roughly unit scale for the stand-in
    e = np.random.RandomState(0).standard_normal(512).astype(np.float32)
    lat = e @ emap.astype(np.float32) / np.linalg.norm(e)
    assert 0.5 < np.linalg.norm(lat) < 2.0


# ----------------------------------------------------------------------------- SCRFD
def test_scrfd_anchor_order_and_offsets(scrfd):
    """A 64 px square centred on cell (x=7, y=5) of stride 16: argmax at (5*W/16 + 7)*2 + {0,1}."""
    h, w = 256, 384
    img = np.zeros((h, w, 3), np.uint8)
    img[:] = (200, 120, 100)
    mf.draw_face(img, 7 * 16, 5 * 16, 64, eyes=False)
    blob = ((img.astype(np.float32) - 127.5) / 128.0).transpose(2, 0, 1)[None]
    outs = scrfd.run(None, {"input": np.ascontiguousarray(blob)})
    for i, s in enumerate(STRIDES):
        n = (h // s) * (w // s) * 2
        assert outs[i].shape == (n, 1) and outs[i + 3].shape == (n, 4) and outs[i + 6].shape == (n, 10)
        assert outs[i].dtype == np.float32
    sc16 = outs[1][:, 0]
    best = int(np.argmax(sc16))
    assert best // 2 == 5 * (w // 16) + 7
    assert sc16[best] == pytest.approx(1.0, abs=1e-5)
    assert sc16[best ^ 1] == sc16[best]  # both anchors of the cell
    assert outs[0][:, 0].max() < 0.5 and outs[2][:, 0].max() < 0.5
    np.testing.assert_allclose(outs[4][best], [2, 2, 2, 2])
    kps = outs[7][best].reshape(5, 2) * 16 + np.array([7 * 16, 5 * 16])
    want = np.array([7 * 16 - 32, 5 * 16 - 32]) + standins.ARCFACE_112_V2 * 64
    np.testing.assert_allclose(kps, want, atol=1e-3)


@pytest.mark.parametrize("side,stride", [(32, 8), (64, 16), (128, 32)])
def test_scrfd_scale_selective_unaligned(scrfd, side, stride):
    frame = mf.background(640, 640, 3)
    rs = np.random.RandomState(side)
    truth = []
    for cx, cy in ((150, 170), (450, 460)):
        cx += int(rs.randint(-7, 8))
        cy += int(rs.randint(-7, 8))
        truth.append(mf.draw_face(frame, cx, cy, side))
    # centred between four anchors: the worst case (diagonal neighbours have IoU 0.39 < 0.4)
    truth.append(mf.draw_face(frame, 160 + stride // 2, 480 + stride // 2, side, mf.ALT_FACE_COLOUR))
    boxes, _, strides, scale = _detect(scrfd, frame)
    assert scale == 1.0
    _check_found(boxes, strides, scale, truth)


def test_scrfd_gflops_does_not_change_results(tmp_path, scrfd):
    p = tmp_path / "heavy.onnx"
    standins.make_scrfd(p, gflops=0.6)
    model = onnx.load(str(p))
    assert sum(n.op_type == "MatMul" for n in model.graph.node) >= 3
    frame = mf.background(320, 320, 1)
    mf.draw_face(frame, 100, 140, 64)
    blob, _ = _detector_blob(frame, 320)
    a = scrfd.run(None, {"input": blob})
    b = _session(p).run(None, {"input": blob})
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_scrfd_finds_clip_faces(scrfd, clip):
    assert clip.frame_count == 50 and clip.fps == Fraction(25, 1)
    frames = mf.read_frames(clip.path)
    assert frames.shape == (50, 720, 1280, 3)
    seen = set()
    for i in (0, 4, 5, 12, 25, 30, 31, 40, 49):
        boxes, kps, strides, scale = _detect(scrfd, frames[i])
        assert scale == pytest.approx(0.5)
        _check_found(boxes, strides, scale, clip.boxes[i])
        seen.add(len(clip.boxes[i]))
        for b, k in zip(boxes, kps):  # keypoints inside their box
            assert (k[:, 0] > b[0]).all() and (k[:, 0] < b[2]).all()
            assert (k[:, 1] > b[1]).all() and (k[:, 1] < b[3]).all()
    assert seen == {0, 1, 2}
    # truth boxes are the ones that were drawn
    x1, y1, x2, y2 = clip.boxes[20][0]
    patch = frames[20, y1 + 4:y1 + 12, x1 + 4:x2 - 4].reshape(-1, 3).mean(0)
    assert np.abs(patch - np.array(mf.FACE_COLOUR)).max() < 8


# ----------------------------------------------------------------------------- embedder / swapper / enhancer
def _crop_blob(img: np.ndarray, box, size: int) -> np.ndarray:
    x1, y1, x2, y2 = box
    crop = cv2.resize(img[y1:y2, x1:x2], (size, size), interpolation=cv2.INTER_AREA)
    return crop[:, :, ::-1].astype(np.float32).transpose(2, 0, 1)[None]  # RGB 0..255


def test_arcface_embeddings_depend_on_face(models, tmp_path):
    sess = _session(models["dir"] / "arcface_w600k_r50.onnx")
    src = mf.make_source_image(tmp_path / "source.png")
    tgt = mf.make_image_target(tmp_path / "target.jpg")
    src_img = mf.read_frames(src.path)[0]
    tgt_img = mf.read_frames(tgt.path)[0]
    assert src_img.shape == (640, 640, 3) and tgt_img.shape == (720, 1280, 3)

    def emb(img, box):
        return sess.run(None, {"input": _crop_blob(img, box, 112) / 127.5 - 1.0})[0]

    a, a2, b = emb(src_img, src.boxes[0]), emb(src_img, src.boxes[0]), emb(tgt_img, tgt.boxes[0])
    assert a.shape == (1, 512) and a.dtype == np.float32
    np.testing.assert_array_equal(a, a2)
    cos = float((a @ b.T).item() / np.linalg.norm(a) / np.linalg.norm(b))
    assert cos < 0.99


def test_swapper_depends_on_source_latent(models):
    sess = _session(models["dir"] / "inswapper_128.onnx")
    rs = np.random.RandomState(7)
    target = rs.uniform(0, 1, (1, 3, 128, 128)).astype(np.float32)
    s1 = rs.standard_normal((1, 512)).astype(np.float32)
    s2 = rs.standard_normal((1, 512)).astype(np.float32)
    o1 = sess.run(None, {"target": target, "source": s1})[0]
    o1b = sess.run(None, {"target": target, "source": s1})[0]
    o2 = sess.run(None, {"target": target, "source": s2})[0]
    assert o1.shape == (1, 3, 128, 128) and o1.dtype == np.float32
    assert o1.min() >= 0.0 and o1.max() <= 1.0
    np.testing.assert_array_equal(o1, o1b)
    assert np.abs(o1 - o2).mean() > 0.02  # source changes the face
    assert np.abs(o1 - target).mean() > 0.05  # the crop visibly changes
    o3 = sess.run(None, {"target": np.zeros_like(target), "source": s1})[0]
    assert np.abs(o1 - o3).mean() > 0.1  # and the target still shows through


def test_swapper_fp16_runs_in_float16(models):
    f32 = _session(models["dir"] / "inswapper_128.onnx")
    f16 = _session(models["dir"] / "inswapper_128_fp16.onnx")
    assert [i.type for i in f16.get_inputs()] == ["tensor(float16)", "tensor(float16)"]
    rs = np.random.RandomState(3)
    target = rs.uniform(0, 1, (1, 3, 128, 128)).astype(np.float32)
    src = (rs.standard_normal((1, 512)) * 0.1).astype(np.float32)
    o32 = f32.run(None, {"target": target, "source": src})[0]
    o16 = f16.run(None, {"target": target.astype(np.float16), "source": src.astype(np.float16)})[0]
    assert o16.dtype == np.float16
    np.testing.assert_allclose(o16.astype(np.float32), o32, atol=0.02)


def test_swapper_variants(tmp_path):
    rs = np.random.RandomState(5)
    target = rs.uniform(0, 1, (3, 3, 128, 128)).astype(np.float32)
    src = rs.standard_normal((3, 512)).astype(np.float32)
    p = tmp_path / "dyn.onnx"
    standins.make_inswapper(p, dynamic_batch=True, gflops=0.3)
    model = onnx.load(str(p))
    assert model.graph.initializer[-1].name == "emap"
    assert _dims(model.graph.input[0])[0] == "n" and _dims(model.graph.output[0])[0] == "n"
    out = _session(p).run(None, {"target": target, "source": src})[0]
    assert out.shape == (3, 3, 128, 128)
    single = tmp_path / "single.onnx"
    standins.make_inswapper(single)
    one = _session(single).run(None, {"target": target[1:2], "source": src[1:2]})[0]
    np.testing.assert_allclose(out[1:2], one, atol=1e-6)
    pn = tmp_path / "null.onnx"
    standins.make_inswapper(pn, null=True, dynamic_batch=True)
    assert onnx.load(str(pn)).graph.initializer[-1].name == "emap"
    np.testing.assert_array_equal(_session(pn).run(None, {"target": target, "source": src})[0], target)
    pn16 = tmp_path / "null16.onnx"
    standins.make_inswapper(pn16, null=True, fp16=True)
    t16 = target[:1].astype(np.float16)
    np.testing.assert_array_equal(_session(pn16).run(None, {"target": t16, "source": src[:1].astype(np.float16)})[0],
                                  t16)


def test_gfpgan_contract(models, tmp_path):
    sess = _session(models["dir"] / "gfpgan_1.4.onnx")
    rs = np.random.RandomState(11)
    x = rs.uniform(-1, 1, (1, 3, 512, 512)).astype(np.float32)
    y = sess.run(None, {"input": x})[0]
    assert y.shape == x.shape and y.dtype == np.float32
    assert y.min() >= -1.0 and y.max() <= 1.0
    assert 0.01 < np.abs(y - x).mean() < 0.3
    x2 = np.clip(x + 0.3, -1, 1)
    y2 = sess.run(None, {"input": x2})[0]
    shift = (y2 - np.tanh(1.2 * x2)).mean(axis=(2, 3)) - (y - np.tanh(1.2 * x)).mean(axis=(2, 3))
    assert np.abs(shift).max() > 1e-3  # content-dependent channel shift
    pn = tmp_path / "g_null.onnx"
    standins.make_gfpgan(pn, null=True, dynamic_batch=True, gflops=0.3)
    xb = np.concatenate([x, x2])
    np.testing.assert_array_equal(_session(pn).run(None, {"input": xb})[0], xb)


# ----------------------------------------------------------------------------- media
def test_clip_probe(clip):
    pc = mf.probe_counts(clip.path)
    assert pc.frames == 50 and pc.fps == Fraction(25, 1)
    assert (pc.width, pc.height) == (1280, 720)
    assert pc.video_codec == "h264" and pc.audio_codec == "aac"
    assert pc.audio_duration == pytest.approx(2.0, abs=0.1)
    assert clip.frames_with_faces()[0] == 5
    assert all(not clip.boxes[i] for i in range(5))
    assert len(clip.boxes[49]) == 2
    sides = sorted(b[2] - b[0] for b in clip.boxes[49])
    assert sides == [128, 256]


def test_small_clip_without_audio(tmp_path):
    truth = mf.make_clip(tmp_path / "small.mkv", width=320, height=240, fps=30, seconds=0.5, audio=False)
    pc = mf.probe_counts(truth.path)
    assert pc.frames == truth.frame_count == 15 and pc.audio_duration is None and pc.fps == 30
    frames = mf.read_frames(truth.path, max_frames=4)
    assert frames.shape == (4, 240, 320, 3)
    assert frames.flags.writeable
    assert mf.face_side(16, 320, 240) == 32 and mf.face_side(32, 320, 240) == 64


def test_weights_padded_to_a_real_size_keep_outputs_and_scale_with_the_batch(tmp_path):
    """weights_mb: distinct weight matrices summing to the file size (the realistic bench set);
    the outputs are those of the plain stand-in, emap stays last, and the cost follows the batch."""
    rs = np.random.RandomState(6)
    target = rs.uniform(0, 1, (4, 3, 128, 128)).astype(np.float32)
    src = rs.standard_normal((4, 512)).astype(np.float32)
    heavy, plain = tmp_path / "heavy.onnx", tmp_path / "plain.onnx"
    standins.make_inswapper(heavy, dynamic_batch=True, gflops=0.5, weights_mb=6)
    standins.make_inswapper(plain, dynamic_batch=True)
    size = heavy.stat().st_size
    assert 6 * 2**20 <= size <= 7.5 * 2**20, size
    model = onnx.load(str(heavy))
    assert model.graph.initializer[-1].name == "emap"
    matmuls = [n for n in model.graph.node if n.op_type == "MatMul" and "dummy_mm" in n.output[0]]
    assert len(matmuls) == 6        # one per MiB: distinct 512 x 512 float32 matrices
    out = _session(heavy).run(None, {"target": target, "source": src})[0]
    np.testing.assert_array_equal(out, _session(plain).run(None, {"target": target, "source": src})[0])
    # the dummy chain's activations are [batch, m, 512]: the work follows the batch
    shapes = onnx.shape_inference.infer_shapes(model)
    dims = {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
            for v in shapes.graph.value_info}
    first = dims[matmuls[0].output[0]]
    assert len(first) == 3 and first[2] == 512 and not isinstance(first[0], int), first
    yunet = Path(__file__).resolve().parents[2] / "shared" / "models" / "face_detection_yunet.onnx"
    if yunet.is_file():
        models = standins.write_standins(tmp_path / "set", yunet=yunet)
        assert models["yunet"]["contract"] == "detector-yunet"
        assert (tmp_path / "set" / models["yunet"]["file"]).read_bytes() == yunet.read_bytes()


@pytest.mark.parametrize("name", ["hyperswap_1a_256", "xseg_1", "bisenet_resnet_34", "2dfan4"])
def test_quality_standins_with_a_real_cost_keep_their_answers(tmp_path, name):
    """The cost knobs of the quality tools' stand-ins (the realistic bench set) add weights of the
    asked size and leave every output bit-identical."""
    plain = standins.write_standins(tmp_path / "plain")[name]
    heavy = standins.write_standins(tmp_path / "heavy", gflops={name: 0.2},
                                    weights_mb={name: 3})[name]
    assert heavy["size"] - plain["size"] >= 3 * 2**20
    a = _session(tmp_path / "plain" / plain["file"])
    b = _session(tmp_path / "heavy" / heavy["file"])
    rs = np.random.RandomState(7)
    feeds = {i.name: (rs.uniform(0, 1, i.shape) if i.name != "source"
                      else rs.standard_normal(i.shape)).astype(np.float32) for i in a.get_inputs()}
    for x, y in zip(a.run(None, feeds), b.run(None, feeds)):
        np.testing.assert_array_equal(x, y)
