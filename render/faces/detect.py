"""Face detectors: the SCRFD/RetinaFace 9-output format, the YuNet 12-output format and yoloface.

The contract is named by the manifest entry (``detector-scrfd``, ``detector-retinaface``,
``detector-yunet``, ``detector-yoloface``), never guessed from tensor shapes. Decoders are pure numpy functions so they
can be tested without a model.
"""
from __future__ import annotations

import functools
import math

import cv2
import numpy as np

from ..sessions import LazySession
from .contracts import DETECTORS
from .types import Face

STRIDES = (8, 16, 32)
CONTRACTS = DETECTORS
# (scale, mean): input = (BGR pixel - mean) * scale, per contract
_NORMALISE = {
    "detector-scrfd": (1 / 128.0, 127.5),
    "detector-retinaface": (1 / 128.0, 127.5),
    "detector-yunet": (1.0, 0.0),
    "detector-yoloface": (1 / 255.0, 0.0),
}


def nms(boxes: np.ndarray, scores: np.ndarray, iou: float) -> np.ndarray:
    """Indices kept by greedy non-maximum suppression, best first."""
    if len(boxes) == 0:
        return np.zeros(0, dtype=np.int64)
    x1, y1, x2, y2 = boxes.T
    areas = np.maximum(x2 - x1, 0) * np.maximum(y2 - y1, 0)
    order = np.argsort(-scores, kind="stable")
    keep = []
    while order.size:
        i = order[0]
        keep.append(i)
        rest = order[1:]
        w = np.maximum(0.0, np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest]))
        h = np.maximum(0.0, np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest]))
        inter = w * h
        union = areas[i] + areas[rest] - inter
        overlap = np.where(union > 0, inter / np.maximum(union, 1e-12), 0.0)
        order = rest[overlap <= iou]
    return np.asarray(keep, dtype=np.int64)


@functools.lru_cache(maxsize=64)
def _cells(rows: int, cols: int, repeat: int = 1) -> np.ndarray:
    """(rows·cols·repeat, 2) float32 (x, y) cell indices, row-major, each repeated ``repeat``
    times in a row; read-only, shared between calls (a detector's canvas rarely changes size)."""
    ys, xs = np.mgrid[:rows, :cols]
    cells = np.stack([xs, ys], axis=-1).reshape(-1, 2).astype(np.float32)
    if repeat > 1:
        cells = np.repeat(cells, repeat, axis=0)
    cells.flags.writeable = False
    return cells


def decode_scrfd(outputs: list[np.ndarray], input_hw: tuple[int, int], threshold: float
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """SCRFD/RetinaFace: scores ×3, box distances ×3, keypoint offsets ×3 (strides 8, 16, 32).

    Returns boxes (N,4), keypoints (N,5,2) and scores (N,) in input-canvas pixels.
    """
    if len(outputs) != 9:
        raise ValueError(f"SCRFD format has 9 outputs, the model gave {len(outputs)}")
    h, w = input_hw
    all_boxes, all_kps, all_scores = [], [], []
    for i, stride in enumerate(STRIDES):
        scores = np.asarray(outputs[i], np.float32).reshape(-1)
        rows, cols = math.ceil(h / stride), math.ceil(w / stride)
        anchors = scores.size // (rows * cols)
        if anchors * rows * cols != scores.size:
            raise ValueError(f"stride {stride}: {scores.size} scores do not fit a {cols}x{rows} grid")
        keep = np.flatnonzero(scores >= threshold)   # only the kept anchors are decoded
        if not keep.size:
            continue
        c = _cells(rows, cols, anchors)[keep] * stride
        d = np.asarray(outputs[i + 3], np.float32).reshape(-1, 4)[keep] * stride
        kps = np.asarray(outputs[i + 6], np.float32).reshape(-1, 10)[keep] * stride
        all_boxes.append(np.concatenate([c - d[:, :2], c + d[:, 2:]], axis=1))
        all_kps.append(kps.reshape(-1, 5, 2) + c[:, None, :])
        all_scores.append(scores[keep])
    if not all_scores:
        return np.zeros((0, 4), np.float32), np.zeros((0, 5, 2), np.float32), np.zeros(0, np.float32)
    return np.concatenate(all_boxes), np.concatenate(all_kps), np.concatenate(all_scores)


YUNET_NAMES = tuple(f"{kind}_{s}" for kind in ("cls", "obj", "bbox", "kps") for s in STRIDES)


def decode_yunet(outputs: list[np.ndarray], input_hw: tuple[int, int], threshold: float,
                 names: list[str] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """YuNet: cls ×3, obj ×3, bbox ×3, kps ×3; one anchor per cell; score = √(cls·obj).

    bbox = (dx, dy, log w, log h) in stride units from the cell's corner; keypoints likewise.
    """
    if len(outputs) != 12:
        raise ValueError(f"YuNet format has 12 outputs, the model gave {len(outputs)}")
    if names and set(names) == set(YUNET_NAMES):  # order by name when the file names them
        by_name = dict(zip(names, outputs))
        outputs = [by_name[n] for n in YUNET_NAMES]
    h, w = input_hw
    all_boxes, all_kps, all_scores = [], [], []
    for i, stride in enumerate(STRIDES):
        cls = np.clip(np.asarray(outputs[i], np.float32).reshape(-1), 0, 1)
        obj = np.clip(np.asarray(outputs[i + 3], np.float32).reshape(-1), 0, 1)
        bbox = np.asarray(outputs[i + 6], np.float32).reshape(-1, 4)
        kps = np.asarray(outputs[i + 9], np.float32).reshape(-1, 10)
        rows, cols = h // stride, w // stride
        if cls.size != rows * cols:
            raise ValueError(f"stride {stride}: {cls.size} scores do not fit a {cols}x{rows} grid")
        scores = np.sqrt(cls * obj)
        keep = scores >= threshold
        if not keep.any():
            continue
        cell = _cells(rows, cols)[keep]
        b = bbox[keep]
        centre = (cell + b[:, :2]) * stride
        size = np.exp(b[:, 2:]) * stride
        all_boxes.append(np.concatenate([centre - size / 2, centre + size / 2], axis=1))
        all_kps.append((kps[keep].reshape(-1, 5, 2) + cell[:, None, :]) * stride)
        all_scores.append(scores[keep])
    if not all_scores:
        return np.zeros((0, 4), np.float32), np.zeros((0, 5, 2), np.float32), np.zeros(0, np.float32)
    return np.concatenate(all_boxes), np.concatenate(all_kps), np.concatenate(all_scores)


def decode_yoloface(outputs: list[np.ndarray], threshold: float
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """yoloface_8n: one [1, 20, A] output: cx, cy, w, h, score, then 5 × (x, y, visibility)."""
    if len(outputs) != 1:
        raise ValueError(f"yoloface format has 1 output, the model gave {len(outputs)}")
    pred = np.asarray(outputs[0], np.float32).reshape(20, -1).T
    keep = pred[:, 4] >= threshold
    pred = pred[keep]
    centre, size = pred[:, 0:2], pred[:, 2:4]
    boxes = np.concatenate([centre - size / 2, centre + size / 2], axis=1)
    kps = pred[:, 5:20].reshape(-1, 5, 3)[:, :, :2]
    return boxes, np.ascontiguousarray(kps), pred[:, 4]


def _ceil32(v: float) -> int:
    return int(math.ceil(v / 32.0) * 32)


def shrink(frame: np.ndarray, width: int, height: int) -> np.ndarray:
    """``frame`` resized to ``width`` x ``height`` for a detector.

    A downscale by two or more is an area average. OpenCV's general area resampling is slow on
    a full frame, but its exact halving is a fast SIMD 2 x 2 mean; so the frame is halved while it is at least twice the size asked (and
    its sides are even), and the rest of the way (less than 2x) is bilinear.
    """
    img = frame
    while True:
        h, w = img.shape[:2]
        if w % 2 or h % 2 or w < 2 * width or h < 2 * height:
            break
        img = cv2.resize(img, (w // 2, h // 2), interpolation=cv2.INTER_AREA)
    h, w = img.shape[:2]
    if (w, h) == (width, height):
        return img
    area = w >= 2 * width or h >= 2 * height     # odd sides left a large step: average it
    return cv2.resize(img, (width, height), interpolation=cv2.INTER_AREA if area else cv2.INTER_LINEAR)


class Detector:
    """Runs a detector on a frame downscaled to fit ``size`` and maps faces back to the frame."""

    def __init__(self, lazy: LazySession, contract: str, *, size: int, score: float, nms_iou: float
                 ) -> None:
        if contract not in CONTRACTS:
            raise ValueError(f"unsupported detector contract {contract!r}")
        self.lazy = lazy
        self.contract = contract
        self.size = size
        self.score = score
        self.nms_iou = nms_iou

    def _canvas_hw(self, scaled_hw: tuple[int, int]) -> tuple[int, int]:
        shape = self.lazy.session.get_inputs()[0].shape
        fixed = [d for d in shape[2:] if isinstance(d, int) and d > 0]
        if len(fixed) == 2:
            return int(shape[2]), int(shape[3])
        return _ceil32(scaled_hw[0]), _ceil32(scaled_hw[1])

    def detect(self, frame: np.ndarray) -> list[Face]:
        fh, fw = frame.shape[:2]
        scale = min(self.size / fh, self.size / fw)
        sh, sw = max(1, round(fh * scale)), max(1, round(fw * scale))
        ch, cw = self._canvas_hw((sh, sw))
        scale = min(scale, ch / fh, cw / fw)   # a fixed-size input may be smaller than asked
        sh, sw = max(1, round(fh * scale)), max(1, round(fw * scale))
        resized = shrink(frame, sw, sh)
        canvas = np.zeros((ch, cw, 3), np.uint8)
        canvas[:sh, :sw] = resized
        session = self.lazy.session
        scale, mean = _NORMALISE[self.contract]
        blob = cv2.dnn.blobFromImage(canvas, scalefactor=scale, mean=(mean, mean, mean),
                                     swapRB=False, crop=False)   # BGR, NCHW float32
        inp = session.get_inputs()[0]
        outputs = self.lazy.run({inp.name: blob})
        if self.contract == "detector-yunet":
            names = [o.name for o in session.get_outputs()]
            boxes, kps, scores = decode_yunet(outputs, (ch, cw), self.score, names)
        elif self.contract == "detector-yoloface":
            boxes, kps, scores = decode_yoloface(outputs, self.score)
        else:
            boxes, kps, scores = decode_scrfd(outputs, (ch, cw), self.score)
        keep = nms(boxes, scores, self.nms_iou)
        sx, sy = fw / sw, fh / sh
        factor = np.array([sx, sy], np.float32)
        faces = []
        for i in keep:
            box = (boxes[i].reshape(2, 2) * factor).reshape(4)
            box = np.clip(box, 0, [fw, fh, fw, fh]).astype(np.float32)
            if box[2] - box[0] < 2 or box[3] - box[1] < 2:
                continue
            faces.append(Face(box=box, kps=(kps[i] * factor).astype(np.float32),
                              score=float(scores[i])))
        return faces
