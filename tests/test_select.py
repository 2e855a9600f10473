"""Reference selection: a face embedded once per track selects the same faces as embedding every
face of every frame (on the generated test clip, with the stand-in detector and embedder)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from render.standins import media as mf
from render.faces.detect import Detector
from render.faces.embed import Embedder
from render.faces.select import ReferenceTracks, box_iou, select_faces
from render.sessions import LazySession


def _session(path: Path):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def clip_faces(standin_models, tmp_path_factory):
    import cv2

    det = Detector(LazySession(lambda: _session(standin_models / "scrfd_2.5g.onnx")),
                   "detector-scrfd", size=640, score=0.5, nms_iou=0.4)
    emb = Embedder(LazySession(lambda: _session(standin_models / "arcface_w600k_r50.onnx")))
    d = tmp_path_factory.mktemp("sel")
    src = mf.make_source_image(d / "source.jpg").path
    image = cv2.imread(str(src))
    reference = emb.embed(image, max(det.detect(image), key=lambda f: f.area))
    clip = mf.make_clip(d / "clip.mp4", width=640, height=360, seconds=3.0)
    frames = list(mf.read_frames(clip.path))
    return emb, reference, [(f, det.detect(f)) for f in frames]


@pytest.mark.parametrize("distance, fewer", [(0.6, True), (0.14, False), (0.1, False)])
def test_tracks_select_what_embedding_every_frame_selects(clip_faces, distance, fewer):
    """The default settings (margin 0.1, every 25). With the threshold inside the stand-in's range
    of distances (0.04-0.17) every face is a close call and is embedded each time: the same
    selection, no saving; with the default threshold the faces are clear and carried along."""
    emb, reference, frames = clip_faces
    tracks = ReferenceTracks(emb.embed, reference, distance=distance)
    calls = 0
    for frame, faces in frames:
        per_frame = select_faces(faces, "reference", embed=lambda f: emb.embed(frame, f),
                                 reference=reference, distance=distance)
        calls += len(faces)
        tracked = tracks(frame, faces)
        assert [tuple(f.box) for f in tracked] == [tuple(f.box) for f in per_frame]
    assert calls > 60
    if fewer:
        assert tracks.embeds < calls / 4, (tracks.embeds, calls)


def test_a_new_face_starts_a_track_and_close_calls_are_embedded_again():
    from render.faces.types import Face

    seen = []

    def embed(frame, face):
        seen.append(float(face.box[0]))
        return np.ones(4, np.float32) if face.box[0] < 100 else np.array([1, 1, 1, 0.9], np.float32)

    def face(x):
        return Face(box=np.array([x, 0, x + 50, 50], np.float32), kps=np.zeros((5, 2), np.float32),
                    score=0.9)

    ref = np.ones(4, np.float32)
    t = ReferenceTracks(embed, ref, distance=0.01, every=3, margin=0.005)
    for _ in range(4):
        t(None, [face(10)])
    assert seen == [10.0, 10.0]             # the track start, then again after 3 detections
    t(None, [face(10), face(300)])          # a new face: its own track, embedded at once
    assert seen[-1] == 300.0
    assert box_iou(face(10).box, face(35).box) == pytest.approx(25 * 50 / (75 * 50))
