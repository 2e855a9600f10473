"""The thread policy: the busy side (ONNX Runtime's models or the ffmpeg children) gets the cores."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from render.threads import ThreadPolicy, child_cpu_seconds

BURN = "import time\nt = time.time()\nwhile time.time() - t < 60: pass\n"


def _child(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _feed(policy: ThreadPolicy, pids: list[int], *, busy_s: float, frames: int) -> list[int | None]:
    changes = []
    for _ in range(frames):
        t = time.process_time()
        if busy_s:
            while time.process_time() - t < busy_s:   # this process's own work (the "models")
                pass
        else:
            time.sleep(0.02)
        changes.append(policy.observe(1, pids))
    return changes


@pytest.fixture
def busy_child():
    p = _child(BURN)
    yield p
    p.kill()
    p.wait()


@pytest.fixture
def idle_child():
    """A child that uses no CPU from the first frame on: coreutils' sleep (a Python child's own
    start-up, 50-100 ms of CPU on a slow machine, fell into the policy's window and made it look
    busier than the "models"), waited for until the kernel has it asleep."""
    p = subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        with open(f"/proc/{p.pid}/stat") as fh:
            if fh.read().rsplit(")", 1)[1].split()[0] == "S":
                break
        time.sleep(0.01)
    yield p
    p.kill()
    p.wait()


def test_child_cpu_seconds_reads_a_live_child_and_none_for_a_reaped_one(busy_child):
    time.sleep(0.3)
    assert child_cpu_seconds(busy_child.pid) > 0.05
    p = _child("pass")
    p.wait()
    assert child_cpu_seconds(p.pid) is None


def test_cores_are_shared_out_over_lanes_on_the_cpu_provider():
    assert (ThreadPolicy(0, cores=2).lanes, ThreadPolicy(0, cores=2).threads) == (2, 1)
    assert (ThreadPolicy(0, cores=16).lanes, ThreadPolicy(0, cores=16).threads) == (2, 8)
    assert (ThreadPolicy(0, cores=8, lanes=4).lanes, ThreadPolicy(0, cores=8, lanes=4).threads) == (4, 2)
    gpu = ThreadPolicy(0, cores=8, on_cpu=False)      # one lane: a capped GPU arena, one call at once
    assert (gpu.lanes, gpu.threads) == (1, 8)


def test_ffmpeg_busier_gives_onnx_runtime_half_the_cores(busy_child):
    policy = ThreadPolicy(0, cores=4, on_cpu=False)
    assert policy.threads == 4 and policy.ffmpeg_nice == 0
    changes = _feed(policy, [busy_child.pid], busy_s=0.0,
                    frames=ThreadPolicy.WARMUP + ThreadPolicy.WINDOW + 1)
    assert [c for c in changes if c is not None] == [2]
    assert policy.decided and policy.threads == 2 and policy.ffmpeg_nice == 0
    assert "ONNX Runtime gets 2 of 4 cores" in policy.reason
    assert _feed(policy, [busy_child.pid], busy_s=0.0, frames=3) == [None] * 3   # decided once


def test_ffmpeg_busier_leaves_one_lane_with_half_the_cores(busy_child):
    policy = ThreadPolicy(0, cores=8)
    assert (policy.lanes, policy.threads) == (2, 4)
    changes = _feed(policy, [busy_child.pid], busy_s=0.0,
                    frames=ThreadPolicy.WARMUP + ThreadPolicy.WINDOW + 1)
    assert all(c is None for c in changes)            # 4 threads per call before and after
    assert (policy.lanes, policy.threads) == (1, 4)
    assert "ONNX Runtime gets 4 of 8 cores" in policy.reason
    fixed = ThreadPolicy(0, cores=8, lanes=2)         # execution.lanes=2 stays
    changes = _feed(fixed, [busy_child.pid], busy_s=0.0,
                    frames=ThreadPolicy.WARMUP + ThreadPolicy.WINDOW + 1)
    assert [c for c in changes if c is not None] == [2] and fixed.lanes == 2


def test_models_busier_keep_their_threads_and_ffmpeg_steps_back(idle_child):
    policy = ThreadPolicy(0, cores=2)
    changes = _feed(policy, [idle_child.pid], busy_s=0.01,
                    frames=ThreadPolicy.WARMUP + ThreadPolicy.WINDOW + 1)
    assert all(c is None for c in changes)
    assert policy.decided and (policy.lanes, policy.threads) == (2, 1)
    assert policy.ffmpeg_nice == ThreadPolicy.NICE
    assert "2 lane(s) × 1 thread(s) on 2 cores, ffmpeg at nice" in policy.reason


THREADED = ("import sys, threading, time\n"
            "for _ in range(3):\n"
            "    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
            "print('ready', flush=True)\n"
            "time.sleep(60)\n")


def _nice_of_threads(pid: int) -> dict[int, int]:
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/stat") as fh:
            out[int(tid)] = int(fh.read().rsplit(")", 1)[1].split()[16])
    return out


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux /proc")
def test_ffmpeg_steps_back_with_every_thread_it_already_started():
    """A nice value is per thread on Linux: setpriority(pid) alone left an encoder's worker
    threads (started before the policy decided) at nice 0, competing with the models."""
    child = subprocess.Popen([sys.executable, "-c", THREADED], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        assert len(_nice_of_threads(child.pid)) == 4 and set(_nice_of_threads(child.pid).values()) == {0}
        policy = ThreadPolicy(0, cores=2)
        policy.ffmpeg_nice = ThreadPolicy.NICE       # as decided for models busier than ffmpeg
        policy.renice([child.pid])
        assert _nice_of_threads(child.pid) == dict.fromkeys(_nice_of_threads(child.pid), ThreadPolicy.NICE)
    finally:
        child.kill()
        child.wait()


def test_fixed_threads_or_one_core_are_left_alone(busy_child):
    for policy in (ThreadPolicy(3, cores=8), ThreadPolicy(0, cores=1)):
        assert policy.decided and policy.lanes == 1
        assert _feed(policy, [busy_child.pid], busy_s=0.0, frames=25) == [None] * 25
    assert ThreadPolicy(3, cores=8).threads == 3
    assert ThreadPolicy(0, cores=1).threads == 1
    assert ThreadPolicy(3, cores=8, lanes=2).lanes == 2


def test_a_new_segment_restarts_the_window(busy_child, idle_child):
    policy = ThreadPolicy(0, cores=2, on_cpu=False)
    _feed(policy, [idle_child.pid], busy_s=0.0, frames=ThreadPolicy.WARMUP + 3)
    policy.restart()                                  # new children: their CPU counts from zero
    changes = _feed(policy, [busy_child.pid], busy_s=0.0, frames=ThreadPolicy.WINDOW + 2)
    assert [c for c in changes if c is not None] == [1]


def test_heavy_models_are_recognised_within_a_few_frames(idle_child):
    """Real models (here 0.2 CPU-s of this process per frame) decide after WARMUP + MIN_FRAMES
    frames, not after the whole window: until then ffmpeg competes with them at normal priority."""
    policy = ThreadPolicy(0, cores=2)
    _feed(policy, [idle_child.pid], busy_s=0.2, frames=ThreadPolicy.WARMUP + ThreadPolicy.MIN_FRAMES + 1)
    assert policy.decided and policy.ffmpeg_nice == ThreadPolicy.NICE


def test_opencv_gets_the_same_threads_as_onnx_runtime(standin_models, tmp_path):
    """OpenCV's pool (the detector's resize, the warps, the paste-back blend) is sized like one
    model call: on busy cores a second OpenCV thread only costs CPU that ffmpeg or a lane needs."""
    import cv2

    from render.models.load import load_models
    from render.config import load_config

    before = cv2.getNumThreads()
    try:
        cfg = load_config({"profile": "low", "execution.providers": "cpu", "execution.threads": "2",
                           "models.dir": str(standin_models), "cache_dir": str(tmp_path)}, env={})
        models = load_models(cfg)
        assert cv2.getNumThreads() == models.factory.threads == 2
        models.threads.threads = 1            # what the policy does when ffmpeg is the busier side
        models.apply_threads()
        assert cv2.getNumThreads() == models.factory.threads == 1
    finally:
        cv2.setNumThreads(before)


def test_models_on_a_gpu_never_send_ffmpeg_back(idle_child):
    """On a GPU provider the render process's CPU time is pre- and post-processing and waits for
    the device: however much it is, the encoder keeps its priority (on an H200 the policy had put
    the encoder, the slowest stage, at nice 19) and ONNX Runtime gets half the cores."""
    policy = ThreadPolicy(0, cores=4, on_cpu=False)
    changes = _feed(policy, [idle_child.pid], busy_s=0.01,
                    frames=ThreadPolicy.WARMUP + ThreadPolicy.WINDOW + 1)
    assert [c for c in changes if c is not None] == [2]
    assert policy.decided and policy.ffmpeg_nice == 0 and (policy.lanes, policy.threads) == (1, 2)
    assert "ONNX Runtime gets 2 of 4 cores" in policy.reason


def test_models_that_fell_back_from_the_gpu_to_the_cpu_get_the_cpu_policy(idle_child):
    """Configured for a GPU (one lane, all cores), but the models ended up on the CPU provider (a
    GPU provider failed): where they run is asked again when the window closes, and real models
    on the CPU keep their threads while ffmpeg steps back."""
    where = {"cpu": False}
    policy = ThreadPolicy(0, cores=2, on_cpu=lambda: where["cpu"])
    assert not policy.on_cpu and (policy.lanes, policy.threads) == (1, 2)
    where["cpu"] = True                               # the sessions were made on the CPU provider
    changes = _feed(policy, [idle_child.pid], busy_s=0.01,
                    frames=ThreadPolicy.WARMUP + ThreadPolicy.WINDOW + 1)
    assert all(c is None for c in changes)
    assert policy.decided and policy.on_cpu and policy.ffmpeg_nice == ThreadPolicy.NICE
    assert (policy.lanes, policy.threads) == (1, 2)


def test_models_report_where_their_sessions_actually_run(standin_models, tmp_path):
    from render.models.load import load_models
    from render.config import load_config

    cfg = load_config({"profile": "low", "execution.providers": "cpu",
                       "models.dir": str(standin_models), "cache_dir": str(tmp_path)}, env={})
    models = load_models(cfg)
    assert models.on_cpu() and models.threads.on_cpu            # nothing loaded: the configured
    models.detector.lazy.providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    assert not models.on_cpu()                                  # the only session made so far
    models.processors[0].lazy.providers = ["CPUExecutionProvider"]   # the swapper fell back
    assert models.on_cpu()


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="OpenBLAS starts no worker on one core")
def test_importing_render_keeps_numpy_blas_to_one_thread():
    """numpy's OpenBLAS would start a spinning worker per core (on the cores ffmpeg needs); render
    sets OPENBLAS_NUM_THREADS=1 before numpy loads, unless the user set it."""
    code = ("import os, render, numpy as np; a = np.ones((64, 64)); a @ a; "
            "print(os.environ['OPENBLAS_NUM_THREADS'], len(os.listdir('/proc/self/task')))")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True).stdout.split()
    assert out == ["1", "1"]
    env["OPENBLAS_NUM_THREADS"] = "2"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True).stdout.split()
    assert out[0] == "2"
