"""Face-stage units: detector decoders, NMS, warps, masks, paste-back, selection."""
from pathlib import Path

import cv2
import numpy as np
import pytest

from render.faces import align
from render.faces.composite import paste
from render.faces.detect import decode_scrfd, decode_yoloface, decode_yunet, nms
from render.faces.embed import EmbeddingCache, identity_distance
from render.faces.mask import box_mask, make_mask
from render.faces.select import select_faces
from render.faces.types import Face

YUNET = Path(__file__).resolve().parents[2] / "shared" / "models" / "face_detection_yunet.onnx"


def _scrfd_outputs(h, w, hits):
    """Synthetic SCRFD outputs; hits = [(stride, col, row, anchor, score, dists, kps_offsets)]."""
    scores, boxes, kps = [], [], []
    for s in (8, 16, 32):
        n = (h // s) * (w // s) * 2
        scores.append(np.zeros((n, 1), np.float32))
        boxes.append(np.zeros((n, 4), np.float32))
        kps.append(np.zeros((n, 10), np.float32))
    for stride, col, row, anchor, score, dist, off in hits:
        i = (8, 16, 32).index(stride)
        idx = (row * (w // stride) + col) * 2 + anchor
        scores[i][idx] = score
        boxes[i][idx] = dist
        kps[i][idx] = off
    return scores + boxes + kps


def test_scrfd_decoder_maps_anchor_distances_to_boxes():
    off = np.array([-1, -0.5, 1, -0.5, 0, 0, -0.8, 0.8, 0.8, 0.8], np.float32)
    outs = _scrfd_outputs(640, 640, [(16, 10, 5, 1, 0.9, [2, 1, 3, 4], off),
                                     (32, 3, 2, 0, 0.3, [1, 1, 1, 1], off)])
    boxes, kps, scores = decode_scrfd(outs, (640, 640), 0.5)
    assert scores.tolist() == pytest.approx([0.9])
    # anchor centre (160, 80); distances × stride 16
    assert boxes[0].tolist() == pytest.approx([160 - 32, 80 - 16, 160 + 48, 80 + 64])
    assert kps[0][0].tolist() == pytest.approx([160 - 16, 80 - 8])
    # a leading batch dimension (some exports) decodes the same
    outs_b = [o[None] for o in outs]
    boxes_b, _, _ = decode_scrfd(outs_b, (640, 640), 0.5)
    assert np.allclose(boxes_b, boxes)


def test_scrfd_decoder_non_square_canvas():
    outs = _scrfd_outputs(384, 640, [(8, 79, 47, 0, 0.8, [1, 1, 1, 1], np.zeros(10))])
    boxes, _, _ = decode_scrfd(outs, (384, 640), 0.5)
    assert boxes[0].tolist() == pytest.approx([79 * 8 - 8, 47 * 8 - 8, 79 * 8 + 8, 47 * 8 + 8])


def test_yunet_decoder():
    h = w = 320
    outs = []
    for kind, width in (("cls", 1), ("obj", 1), ("bbox", 4), ("kps", 10)):
        for s in (8, 16, 32):
            outs.append(np.zeros((1, (h // s) * (w // s), width), np.float32))
    # stride 16 cell (col 4, row 6): cls 0.81, obj 1 → score 0.9
    idx = 6 * (w // 16) + 4
    outs[1][0, idx, 0] = 0.81
    outs[4][0, idx, 0] = 1.0
    outs[7][0, idx] = [0.5, 0.5, np.log(4), np.log(2)]
    outs[10][0, idx] = [0.25, 0.25] * 5
    boxes, kps, scores = decode_yunet(outs, (h, w), 0.5)
    assert scores.tolist() == pytest.approx([0.9])
    cx, cy = (4 + 0.5) * 16, (6 + 0.5) * 16
    assert boxes[0].tolist() == pytest.approx([cx - 32, cy - 16, cx + 32, cy + 16])
    assert kps[0][0].tolist() == pytest.approx([(4 + 0.25) * 16, (6 + 0.25) * 16])
    # by-name ordering: shuffled outputs with names decode the same
    names = [f"{k}_{s}" for k in ("cls", "obj", "bbox", "kps") for s in (8, 16, 32)]
    order = list(reversed(range(12)))
    b2, _, _ = decode_yunet([outs[i] for i in order], (h, w), 0.5, [names[i] for i in order])
    assert np.allclose(b2, boxes)


def test_yoloface_decoder():
    out = np.zeros((1, 20, 8400), np.float32)
    out[0, :5, 7] = [320, 240, 100, 120, 0.8]
    out[0, 5:20, 7] = [300, 220, 0.9] * 5
    out[0, 4, 8] = 0.2
    boxes, kps, scores = decode_yoloface([out], 0.5)
    assert scores.tolist() == pytest.approx([0.8])
    assert boxes[0].tolist() == pytest.approx([270, 180, 370, 300])
    assert kps.shape == (1, 5, 2) and kps[0, 0].tolist() == pytest.approx([300, 220])


def test_nms_keeps_best_of_overlaps():
    boxes = np.array([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30]], np.float32)
    keep = nms(boxes, np.array([0.5, 0.9, 0.7], np.float32), 0.4)
    assert keep.tolist() == [1, 2]


@pytest.mark.parametrize("template,size", [("arcface_128", 128), ("arcface_112_v2", 112),
                                           ("ffhq_512", 512)])
def test_warp_unwarp_round_trip_under_one_pixel(template, size):
    rng = np.random.default_rng(1)
    pts_crop = align.template_points(template, size)
    # a face in the frame: template rotated 20°, scaled ×1.7, moved
    angle = np.deg2rad(20)
    rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]]) * 1.7
    kps = (pts_crop @ rot.T + [400, 250] + rng.normal(0, 0.3, (5, 2))).astype(np.float32)
    m = align.estimate(kps, template, size)
    there = align.transform_points(kps, m)
    back = align.transform_points(there, align.invert(m))
    assert np.abs(back - kps).max() < 1.0
    assert np.abs(there - pts_crop).max() < 2.0
    # pixels: a frame warped to the crop and back matches inside the crop footprint
    frame = cv2.GaussianBlur(rng.integers(0, 255, (600, 800, 3), dtype=np.uint8), (0, 0), 3)
    crop = align.warp(frame, m, size)
    restored = frame.copy()
    restored[:] = 0
    paste(restored, crop, m, box_mask(size, 0.1))
    inside = box_mask(size, 0.15)
    foot = cv2.warpAffine(inside, align.invert(m), (800, 600)) > 0.99
    diff = np.abs(restored.astype(int) - frame.astype(int))[foot]
    assert np.median(diff) <= 2


def test_masks():
    box = box_mask(128, 0.1)
    assert box.dtype == np.float32 and box.shape == (128, 128)
    assert box[64, 64] == 1.0 and box[5, 64] == 0.0 and box[0, 0] == 0.0
    feather = make_mask("feather", 128, 0.0, 0.3)
    assert 0.0 < feather[12, 64] < 1.0 and feather[64, 64] == pytest.approx(1.0, abs=1e-3)
    assert 0.0 < feather[0].max() < 0.1 and 0.0 < feather[:, -1].max() < 0.1   # FaceFusion's edge
    assert np.all(np.diff(feather[64, :64]) >= -1e-6)   # rises monotonically towards the centre
    with pytest.raises(ValueError):
        make_mask("oval", 128, 0, 0)


def test_paste_changes_only_the_crop_footprint():
    frame = np.full((300, 400, 3), 100, np.uint8)
    orig = frame.copy()
    kps = align.template_points("arcface_128", 128) * 0.8 + [150, 80]
    m = align.estimate(kps.astype(np.float32), "arcface_128", 128)
    paste(frame, np.full((128, 128, 3), 200, np.uint8), m, box_mask(128, 0.0))
    changed = np.argwhere((frame != orig).any(axis=2))
    assert len(changed)
    corners = align.transform_points(np.array([[0, 0], [128, 128]]), align.invert(m))
    assert changed[:, 1].min() >= corners[:, 0].min() - 1 and changed[:, 1].max() <= corners[:, 0].max() + 1
    assert frame[0, 0].tolist() == [100, 100, 100]


def _face(x, y, s, score=0.9):
    return Face(np.array([x, y, x + s, y + s], np.float32), np.zeros((5, 2), np.float32), score)


def test_selection_modes():
    small, big = _face(0, 0, 10), _face(50, 50, 40)
    assert select_faces([small, big], "one") == [big]
    assert select_faces([small, big], "many") == [small, big]
    assert select_faces([], "one") == []
    ref = np.ones(512, np.float32)
    emb = {id(small): -ref, id(big): ref * 3}
    chosen = select_faces([small, big], "reference", embed=lambda f: emb[id(f)], reference=ref,
                          distance=0.5)
    assert chosen == [big]
    assert identity_distance(ref, -ref) == pytest.approx(2.0)


def test_embedding_cache_round_trip(tmp_path):
    cache = EmbeddingCache(tmp_path)
    v = np.arange(512, dtype=np.float32)
    assert cache.load("a" * 64, "b" * 64) is None
    cache.store("a" * 64, "b" * 64, v)
    assert np.array_equal(cache.load("a" * 64, "b" * 64), v)
    assert cache.load("a" * 64, "c" * 64) is None     # another model: not reused
    cache.path("a" * 64, "b" * 64).write_bytes(b"junk")
    assert cache.load("a" * 64, "b" * 64) is None     # damaged: recomputed


@pytest.mark.skipif(not YUNET.is_file(), reason=f"real YuNet model not present at {YUNET}")
def test_real_yunet_finds_the_astronaut():
    skimage_data = pytest.importorskip("skimage.data")
    import onnxruntime as ort

    from render.faces.detect import Detector
    from render.sessions import LazySession

    image = cv2.cvtColor(skimage_data.astronaut(), cv2.COLOR_RGB2BGR)
    session = ort.InferenceSession(str(YUNET), providers=["CPUExecutionProvider"])
    det = Detector(LazySession(lambda: session), "detector-yunet", size=512, score=0.6, nms_iou=0.4)
    faces = det.detect(image)
    assert len(faces) == 1
    face = faces[0]
    assert face.score > 0.85
    x1, y1, x2, y2 = face.box
    # the astronaut's face: centre about (224, 118), about 90 px wide
    assert abs((x1 + x2) / 2 - 224) < 15 and abs((y1 + y2) / 2 - 118) < 20
    assert 60 < x2 - x1 < 130
    left_eye, right_eye = face.kps[0], face.kps[1]
    assert left_eye[0] < right_eye[0] and abs(left_eye[1] - right_eye[1]) < 10


def test_paste_keeps_pixels_outside_the_mask_and_takes_the_crop_inside():
    rng = np.random.default_rng(3)
    frame = rng.integers(0, 256, (300, 400, 3), np.uint8)
    orig = frame.copy()
    crop = rng.integers(0, 256, (128, 128, 3), np.uint8)
    kps = align.template_points("arcface_128", 128) * 1.3 + [120, 60]
    m = align.estimate(kps.astype(np.float32), "arcface_128", 128)
    mask = make_mask("feather", 128, 0.1, 0.2)
    paste(frame, crop, m, mask)
    inv = align.invert(m)
    alpha = cv2.warpAffine(mask, inv, (400, 300), flags=cv2.INTER_LINEAR, borderValue=0.0)
    warped = cv2.warpAffine(crop, inv, (400, 300), flags=cv2.INTER_LINEAR,
                            borderMode=cv2.BORDER_REPLICATE)
    assert np.array_equal(frame[alpha == 0], orig[alpha == 0])
    assert np.array_equal(frame[alpha == 1], warped[alpha == 1])
    a = alpha[..., None]
    expect = orig * (1 - a) + warped.astype(np.float32) * a     # the blend, to rounding
    assert np.abs(frame.astype(np.float32) - expect).max() <= 0.51


def test_detector_shrink_is_an_area_mean_and_exact_on_halvings():
    from render.faces.detect import shrink
    rng = np.random.default_rng(4)
    frame = cv2.GaussianBlur(rng.integers(0, 256, (720, 1280, 3), np.uint8), (0, 0), 2)
    half = shrink(frame, 640, 360)
    assert np.array_equal(half, cv2.resize(frame, (640, 360), interpolation=cv2.INTER_AREA))
    for size, (w, h) in (((1280, 720), (320, 180)), ((1920, 1080), (320, 180)),
                         ((1279, 721), (320, 180)), ((1920, 1080), (640, 360))):
        f = cv2.resize(frame, size)
        small = shrink(f, w, h)
        assert small.shape == (h, w, 3)
        area = cv2.resize(f, (w, h), interpolation=cv2.INTER_AREA)
        assert np.abs(small.astype(int) - area).max() <= 4
    up = shrink(frame[:100, :100], 160, 160)
    assert np.array_equal(up, cv2.resize(frame[:100, :100], (160, 160), interpolation=cv2.INTER_LINEAR))


def test_crop_tensors_match_the_textbook_expressions():
    from render.faces.blob import cast, signed_input, to_rgb_nchw, unit_input, unit_output
    rng = np.random.default_rng(5)
    crops = rng.integers(0, 256, (3, 64, 48, 3), np.uint8)
    ref = (crops[..., ::-1].astype(np.float32) / 255.0).transpose(0, 3, 1, 2)
    for dtype in (np.float32, np.float16):
        got = unit_input(crops, dtype)
        assert got.dtype == dtype and got.flags.c_contiguous
        assert np.array_equal(got, ref.astype(dtype))
        assert np.array_equal(signed_input(to_rgb_nchw(crops), dtype), ((ref - 0.5) / 0.5).astype(dtype))
    y = rng.uniform(-0.2, 1.2, (3, 3, 64, 48)).astype(np.float32)
    for out in (y, y.astype(np.float16)):
        expect = np.rint(np.clip(out.astype(np.float32), 0, 1).transpose(0, 2, 3, 1)[..., ::-1] * 255)
        kept = out.copy()
        assert np.array_equal(unit_output(out), expect.astype(np.uint8))
        assert np.array_equal(out, kept)             # the model's output is not changed in place
    # every uint8 input and every finite float16 output (the conversions are lookup tables)
    every = np.arange(256, dtype=np.uint8).reshape(1, 16, 16, 1).repeat(3, axis=3)
    ref = (every[..., ::-1].astype(np.float32) / 255.0).transpose(0, 3, 1, 2)
    for dtype in (np.float32, np.float16):
        assert np.array_equal(unit_input(every, dtype), ref.astype(dtype))
        assert np.array_equal(signed_input(to_rgb_nchw(every), dtype), ((ref - 0.5) / 0.5).astype(dtype))
    half = np.arange(65536, dtype=np.uint16).view(np.float16)
    half = half[np.isfinite(half)].reshape(1, 1, 1, -1).repeat(3, axis=1)
    expect = np.rint(np.clip(half.astype(np.float32), 0, 1).transpose(0, 2, 3, 1)[..., ::-1] * 255)
    assert np.array_equal(unit_output(half), expect.astype(np.uint8))
    x = rng.standard_normal((2, 5, 7)).astype(np.float32) * 1000
    assert np.array_equal(cast(x, np.float16), x.astype(np.float16))
    assert np.array_equal(cast(x.astype(np.float16), np.float32), x.astype(np.float16).astype(np.float32))
    assert cast(x, np.float32) is x and cast(x[:0], np.float16).dtype == np.float16
