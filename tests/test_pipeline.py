"""Streaming and the face stage: frames in flight, pass-through, batching equality, tracking."""
from __future__ import annotations

import threading
import time

import numpy as np
import onnxruntime as ort
import pytest

from render import standins
from render.standins import media as mf
from render.faces.detect import Detector
from render.faces.mask import paste_masks
from render.faces.types import Face
from render.models.manifest import load_manifest
from render.face_stage import ChainStep, FaceStage
from render.pipeline import StageTimes, stream
from render.model_handle import ProcessorModel, run_batched
from render.processors import registry
from render.processors.base import Source
from render.processors.enhance.enhancer import FaceEnhancer
from render.processors.swap.inswapper import InswapperProcessor
from render.sessions import LazySession


def _session(path):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


class _Numbered:
    """40 frames numbered in pixel (0, 0); counts the most that were read and not yet written."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.read = self.written = self.max = 0
        self.out: list[int] = []

    def frames(self):
        for i in range(40):
            with self.lock:
                self.read += 1
                self.max = max(self.max, self.read - self.written)
            yield np.full((4, 4, 3), i, np.uint8)

    def wrote(self, frame) -> None:
        with self.lock:
            self.written += 1
        self.out.append(int(frame[0, 0, 0]))


@pytest.mark.parametrize("in_flight", [1, 3, 8])
def test_frames_in_flight_never_exceed_the_setting(in_flight):
    numbered = _Numbered()

    def write(frame):
        time.sleep(0.002)
        numbered.wrote(frame)

    def process(batch):
        assert 1 <= len(batch) <= max(1, in_flight // 2)
        time.sleep(0.001)

    n = stream(numbered.frames(), write, process, frames_in_flight=in_flight, times=StageTimes())
    assert n == 40 and numbered.out == list(range(40))          # every frame, in order
    assert numbered.max <= in_flight


def test_a_failing_writer_stops_the_stream():
    def frames():
        for _ in range(1000):
            yield np.zeros((2, 2, 3), np.uint8)

    def write(frame):
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        stream(frames(), write, lambda b: None, frames_in_flight=4, times=StageTimes())


def test_a_failing_reader_stops_the_stream():
    def frames():
        yield np.zeros((2, 2, 3), np.uint8)
        raise RuntimeError("decoder died")

    with pytest.raises(RuntimeError, match="decoder died"):
        stream(frames(), lambda f: None, lambda b: None, frames_in_flight=4, times=StageTimes())


@pytest.mark.parametrize("in_flight", [1, 4, 9])
def test_lanes_run_batches_at_once_and_the_writer_keeps_frame_order(in_flight):
    """Batches finish out of order on two lanes (the earlier one sleeps longer); frames are
    written in order, each after its batch's lane work, and frames in flight stay bounded."""
    numbered = _Numbered()
    state = {"busy": 0, "most_busy": 0}
    lock = threading.Lock()
    lanes_seen = set()

    def write(frame):
        assert frame[0, 0, 1] == 255                 # the lane's work was done before writing
        numbered.wrote(frame)

    def prepare(batch):
        assert threading.current_thread() is threading.main_thread()
        assert 1 <= len(batch) <= max(1, in_flight // 3)

        def rest():
            lanes_seen.add(threading.current_thread().name)
            with lock:
                state["busy"] += 1
                state["most_busy"] = max(state["most_busy"], state["busy"])
            time.sleep(0.004 if int(batch[0][0, 0, 0]) % 2 == 0 else 0.001)
            for f in batch:
                f[..., 1] = 255
            with lock:
                state["busy"] -= 1
        return rest

    n = stream(numbered.frames(), write, prepare, frames_in_flight=in_flight, times=StageTimes(),
               lanes=2)
    assert n == 40 and numbered.out == list(range(40))
    assert numbered.max <= in_flight
    assert all(name.startswith("render-lane") for name in lanes_seen)
    if in_flight >= 4:                                # room for two batches: both lanes work
        assert state["most_busy"] == 2 and len(lanes_seen) == 2


def test_lanes_can_go_down_to_one_mid_stream_and_order_stays():
    """The thread policy's switch to one lane: later batches run on the calling thread."""
    ran_on = []
    state = {"lanes": 2, "batches": 0}

    def frames():
        for i in range(30):
            yield np.full((2, 2, 3), i, np.uint8)

    def prepare(batch):
        state["batches"] += 1
        if state["batches"] == 5:
            state["lanes"] = 1

        def rest():
            time.sleep(0.002)
            ran_on.append((int(batch[0][0, 0, 0]), threading.current_thread().name))
        return rest

    out = []
    n = stream(frames(), lambda f: out.append(int(f[0, 0, 0])), prepare, frames_in_flight=6,
               times=StageTimes(), lanes=lambda: state["lanes"])
    assert n == 30 and out == list(range(30))
    names = [name for _, name in sorted(ran_on)]
    assert names[0].startswith("render-lane") and names[-1] == "MainThread"


def test_a_failing_lane_stops_the_stream_and_its_error_is_raised():
    def frames():
        for i in range(1000):
            yield np.full((2, 2, 3), i, np.uint16)

    def prepare(batch):
        def rest():
            if any(f[0, 0, 0] == 7 for f in batch):
                raise RuntimeError("model call failed")
        return rest

    written = []
    with pytest.raises(RuntimeError, match="model call failed"):
        stream(frames(), written.append, prepare, frames_in_flight=6, times=StageTimes(), lanes=2)
    assert len(written) < 7                          # nothing after the failed batch


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("m")
    standins.write_standins(d, dynamic_batch=True)
    return d


def _stage(models, *, batch, every=1, enhance=False, detector=None, counter=None):
    swap_sess = _session(models / "inswapper_128.onnx")
    if counter is not None:
        real = swap_sess

        class Counting:
            def get_inputs(self):
                return real.get_inputs()

            def run(self, *a, **k):
                counter.append(a[1]["target"].shape[0])
                return real.run(*a, **k)

        swap_sess = Counting()
    manifest = load_manifest(models)

    def step(cls, name, model, lazy, **options):
        entry = manifest.get(model)
        proc = cls(registry.processor(name).step(model, **options),
                   ProcessorModel(entry, models / entry.file, lazy, models / "cache"))
        source = Source(np.linspace(-1, 1, 512).astype(np.float32), lambda: None)
        return ChainStep(proc, proc.bind(source), paste_masks("feather", proc.size, 0.0, 0.3))

    chain = [step(InswapperProcessor, "swap", "inswapper_128", LazySession(lambda: swap_sess))]
    if enhance:
        chain.append(step(FaceEnhancer, "enhance", "gfpgan_1.4",
                          LazySession(lambda: _session(models / "gfpgan_1.4.onnx")), blend=0.8))
    det = detector or Detector(LazySession(lambda: _session(models / "scrfd_2.5g.onnx")),
                               "detector-scrfd", size=640, score=0.5, nms_iou=0.4)
    return FaceStage(detector=det, select=lambda frame, faces: faces, chain=chain,
                     batch_size=batch, detect_every=every, times=StageTimes())


def _frames(n=6, faces=2):
    out = []
    for i in range(n):
        specs = [(200 + 10 * i, 180, 128), (480, 200, 128)][:faces]
        frame, _ = mf.render_frame(640, 360, i, specs)
        out.append(frame)
    return out


def test_batched_results_equal_batch_size_one(models):
    a, b = _frames(), _frames()
    calls_1, calls_8 = [], []
    _stage(models, batch=1, enhance=True, counter=calls_1).process(a)
    _stage(models, batch=8, enhance=True, counter=calls_8).process(b)
    assert calls_1 == [1] * 12 and calls_8 == [8, 4]      # 6 frames × 2 faces
    for x, y in zip(a, b):
        assert np.array_equal(x, y)
    assert not np.array_equal(a[0], _frames()[0])         # and something was swapped


def test_fixed_batch_model_runs_one_by_one(tmp_path):
    standins.write_standins(tmp_path)                     # production layout: batch fixed at 1
    calls = []
    _stage(tmp_path, batch=8, counter=calls).process(_frames(3))
    assert calls == [1] * 6


def test_run_batched_chunks():
    seen = []

    def fn(x):
        seen.append(len(x))
        return x

    out = run_batched(fn, np.arange(10), 4, None)
    assert seen == [4, 4, 2] and out.tolist() == list(range(10))
    seen.clear()
    run_batched(fn, np.arange(3), 4, 1)
    assert seen == [1, 1, 1]


def test_frames_without_faces_pass_untouched_without_the_swapper(models):
    calls = []
    frames = _frames(4, faces=0)
    originals = [f.copy() for f in frames]
    _stage(models, batch=4, counter=calls).process(frames)
    assert calls == []
    assert all(np.array_equal(a, b) for a, b in zip(frames, originals))


class _CountingDetector:
    def __init__(self, inner):
        self.inner = inner
        self.calls = 0

    def detect(self, frame):
        self.calls += 1
        return self.inner.detect(frame)


def test_detect_every_n_frames_tracks_in_between(models):
    inner = Detector(LazySession(lambda: _session(models / "scrfd_2.5g.onnx")), "detector-scrfd",
                     size=640, score=0.5, nms_iou=0.4)
    det = _CountingDetector(inner)
    stage = _stage(models, batch=4, every=3, detector=det)
    frames = _frames(6, faces=1)               # the face moves 10 px right per frame
    tracked = [stage._faces(f) for f in frames]
    assert det.calls == 2                      # frames 0 and 3
    assert all(len(t) == 1 for t in tracked)
    # between detections the keypoints follow the drawn face: 10 px right per frame
    for k in (1, 2, 4, 5):
        base = tracked[k - k % 3][0]
        shift = (tracked[k][0].kps - base.kps).mean(axis=0)
        assert shift == pytest.approx([10.0 * (k % 3), 0.0], abs=1.5)
        assert (tracked[k][0].box - base.box)[[0, 2]] == pytest.approx([10.0 * (k % 3)] * 2, abs=1.5)


def test_tracking_falls_back_to_detection_when_the_face_is_lost(models):
    inner = Detector(LazySession(lambda: _session(models / "scrfd_2.5g.onnx")), "detector-scrfd",
                     size=640, score=0.5, nms_iou=0.4)
    det = _CountingDetector(inner)
    stage = _stage(models, batch=4, every=5, detector=det)
    frames = _frames(1, faces=1) + [mf.background(640, 360, 1)] * 2   # then a featureless frame
    stage._faces(frames[0])
    stage._faces(frames[1])
    assert det.calls == 2
