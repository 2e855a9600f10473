"""Colour match (render/faces/colour.py): Lab statistics moved onto the target's, smoothed per
track in frame order."""
from __future__ import annotations

import cv2
import numpy as np

from render.faces.colour import LabStats, SmoothedStats, inner, lab_stats, transfer


def _face(seed: int, tint) -> np.ndarray:
    base = cv2.GaussianBlur(np.random.RandomState(seed).randint(0, 256, (128, 128, 3), np.uint8),
                            (0, 0), 3)
    return np.clip(base.astype(int) + tint, 0, 255).astype(np.uint8)


def test_a_tinted_face_gets_the_targets_lab_mean_within_one_unit():
    target = _face(0, (30, -10, 5))
    swapped = _face(1, (-25, 40, 10))           # another face, another tint
    before = np.abs(lab_stats(swapped).mean - lab_stats(target).mean).max()
    out = transfer(swapped, lab_stats(swapped), lab_stats(target))
    assert before > 10
    assert np.abs(lab_stats(out).mean - lab_stats(target).mean).max() <= 1.0
    assert np.abs(lab_stats(out).spread - lab_stats(target).spread).max() <= 1.0


def test_the_statistics_are_the_inner_region_s():
    crop = np.zeros((128, 128, 3), np.uint8)
    rows, cols = inner(128)
    crop[rows, cols] = (40, 80, 120)
    stats = lab_stats(crop)
    assert np.allclose(stats.spread, 0)
    want = cv2.cvtColor(np.full((1, 1, 3), (40, 80, 120), np.uint8), cv2.COLOR_BGR2LAB)[0, 0]
    assert np.allclose(stats.mean, want)


def test_a_flat_face_is_shifted_not_stretched():
    flat = np.full((64, 64, 3), 100, np.uint8)
    target = _face(2, (0, 0, 0))[:64, :64]
    out = transfer(flat, lab_stats(flat), lab_stats(target))
    assert lab_stats(out).spread.max() < 1.0     # no noise blown up from a zero spread


def test_the_smoothing_follows_each_track_in_frame_order():
    s = SmoothedStats(smoothing=0.5)
    a = LabStats(np.array([100.0, 128, 128]), np.array([10.0, 5, 5]))
    b = LabStats(np.array([140.0, 128, 128]), np.array([20.0, 5, 5]))
    assert s.update("t1", a) is a
    mid = s.update("t1", b)
    assert np.allclose(mid.mean, [120, 128, 128]) and np.allclose(mid.spread, [15, 5, 5])
    assert s.update("t2", b) is b                 # another track starts from its own
    s.forget({"t2"})
    assert s.update("t1", b) is b                 # t1 ended: it starts afresh
