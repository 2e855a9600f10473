"""Sessions: providers in order, skipped ones logged once, options from the memory strategy."""
from __future__ import annotations

import logging

import pytest

from render.config import load_config
from render.errors import ModelError
from render.runtime import STRATEGIES, LazySession, Preload, SessionFactory, strategy, trt_cache_dir

ALL = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]


def _factory(tmp_path, available=ALL, **overrides):
    cfg = load_config({k: str(v) for k, v in overrides.items()}, env={})
    return SessionFactory(cfg.execution, tmp_path, available=available)


def test_providers_in_order_and_unavailable_ones_skipped_with_one_line(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    f = _factory(tmp_path, available=["CPUExecutionProvider"], profile="low")
    assert f.providers == ["CPUExecutionProvider"]
    lines = [r.getMessage() for r in caplog.records if "not available" in r.getMessage()]
    assert lines == ["execution providers not available here, skipped: tensorrt, cuda"]
    assert _factory(tmp_path, profile="low").providers == ALL


def test_no_usable_provider_is_a_model_error(tmp_path):
    with pytest.raises(ModelError, match="none of the execution providers cuda"):
        _factory(tmp_path, available=["CPUExecutionProvider"], **{"execution.providers": "cuda"})


def test_low_strategy_options(tmp_path):
    f = _factory(tmp_path, profile="low")
    opts = dict(f.provider_options(fp16=True))
    cuda = opts["CUDAExecutionProvider"]
    assert cuda["arena_extend_strategy"] == "kSameAsRequested"
    assert cuda["cudnn_conv_algo_search"] == "HEURISTIC"
    assert cuda["gpu_mem_limit"] == STRATEGIES["low"].gpu_mem_limit_mb << 20
    trt = opts["TensorrtExecutionProvider"]
    assert trt["trt_fp16_enable"] is True and trt["trt_engine_cache_enable"] is True
    assert trt["trt_max_workspace_size"] == 1024 << 20
    assert trt["trt_engine_cache_path"].startswith(str(tmp_path / "tensorrt"))
    so = f.session_options()
    assert so.enable_cpu_mem_arena is False and so.enable_mem_pattern is False


def test_high_strategy_options(tmp_path):
    f = _factory(tmp_path, profile="high")
    cuda = dict(f.provider_options(fp16=False))["CUDAExecutionProvider"]
    assert cuda["cudnn_conv_algo_search"] == "EXHAUSTIVE" and "gpu_mem_limit" not in cuda
    assert f.session_options().enable_cpu_mem_arena is True
    assert strategy(load_config({"profile": "high"}, env={}).execution).release_idle_models is False


def test_explicit_values_override_the_strategy(tmp_path):
    cfg = load_config({"profile": "low", "execution.frames_in_flight": "0",
                       "execution.batch_size": "0", "execution.gpu_mem_limit_mb": "1000"}, env={})
    s = strategy(cfg.execution)
    assert s.frames_in_flight == STRATEGIES["low"].frames_in_flight
    assert s.batch_size == STRATEGIES["low"].batch_size and s.gpu_mem_limit_mb == 1000
    cfg = load_config({"profile": "low", "execution.memory_strategy": "high",
                       "execution.frames_in_flight": "0"}, env={})
    assert strategy(cfg.execution).frames_in_flight == STRATEGIES["high"].frames_in_flight


def test_trt_cache_is_keyed_by_gpu_ort_and_trt_versions(tmp_path):
    import onnxruntime as ort
    d = trt_cache_dir(tmp_path)
    assert d.parent == tmp_path / "tensorrt"
    assert f"-ort{ort.__version__}-trt" in d.name


def test_lazy_session_loads_on_first_use_and_releases():
    made = []
    lazy = LazySession(lambda: made.append(1) or object())
    assert not lazy.loaded and made == []
    s1 = lazy.session
    assert lazy.session is s1 and made == [1]
    lazy.release()
    assert not lazy.loaded
    assert lazy.session is not s1 and made == [1, 1]


def test_preload_creates_sessions_on_another_thread_and_leaves_failures_to_the_first_call():
    import threading

    made_on = []
    good = LazySession(lambda: made_on.append(threading.current_thread().name) or object())

    def broken():
        raise ModelError("cannot load model swapper.onnx: truncated file")

    bad = LazySession(broken)
    Preload([bad, good]).join()
    assert good.loaded and made_on == ["render-preload"]
    s = good.session
    assert good.session is s and made_on == ["render-preload"]       # not created twice
    assert not bad.loaded
    with pytest.raises(ModelError, match="truncated file"):          # raised where it is used
        bad.session


def test_lanes_share_a_session_and_every_call_is_counted(tmp_path):
    import threading

    import numpy as np
    import onnxruntime as ort

    path = _identity_model(tmp_path / "relu.onnx")
    lazy = LazySession(lambda: ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]))
    x = np.ones((1, 4), np.float32)

    def lane():
        for _ in range(200):
            lazy.run({"x": x})

    lanes = [threading.Thread(target=lane) for _ in range(4)]
    for t in lanes:
        t.start()
    for t in lanes:
        t.join()
    assert lazy.calls == 800


def test_ort_threads_do_not_spin(tmp_path):
    so = _factory(tmp_path, profile="low").session_options()
    assert so.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert so.get_session_config_entry("session.inter_op.allow_spinning") == "0"


def test_importing_render_turns_ort_telemetry_off():
    import subprocess
    import sys
    code = "import os, render, onnxruntime; print(os.environ['ORT_DISABLE_TELEMETRY'])"
    env = {"PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=str(__import__("pathlib").Path(__file__).resolve().parents[1]))
    assert out.stdout.strip() == "1", out.stderr


def test_threads_start_with_every_cpu_and_can_be_fixed(tmp_path):
    import os
    from render.runtime import cpu_count, default_threads
    cpus = len(os.sched_getaffinity(0))
    assert cpu_count() == cpus and default_threads() == max(1, cpus // 2)
    assert _factory(tmp_path).session_options().intra_op_num_threads == cpus
    so = _factory(tmp_path, **{"execution.threads": 3}).session_options()
    assert so.intra_op_num_threads == 3

def _identity_model(path):
    import onnx
    from onnx import TensorProto, helper

    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph([node], "relu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_run_counts_calls_and_plain_runs_on_the_cpu(tmp_path):
    import numpy as np
    import onnxruntime as ort

    path = _identity_model(tmp_path / "relu.onnx")
    lazy = LazySession(lambda: ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]))
    x = np.array([[-1.0, 0.0, 2.0, -3.0]], np.float32)
    np.testing.assert_array_equal(lazy.run({"x": x})[0], np.maximum(x, 0))
    assert lazy.io_binding is False and lazy.calls == 1 and lazy.run_seconds > 0


def test_io_binding_runs_and_falls_back_to_plain_runs_with_one_line(tmp_path, caplog):
    """A session on a GPU provider runs through I/O binding (ONNX Runtime's real binding, here on a
    CPU-only build); where binding fails (a provider or an older ONNX Runtime refusing it), one
    line says so and plain runs follow."""
    import numpy as np
    import onnxruntime as ort

    path = _identity_model(tmp_path / "relu.onnx")

    class OnCuda:
        """A real CPU session that reports the CUDA provider first, as a CUDA session does."""
        refuse = False

        def __init__(self):
            self._s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])

        def get_providers(self):
            return ["CUDAExecutionProvider", "CPUExecutionProvider"]

        def io_binding(self):
            if self.refuse:
                raise RuntimeError("no CUDA device to bind to\nsecond line")
            return self._s.io_binding()

        def __getattr__(self, name):
            return getattr(self._s, name)

    caplog.set_level(logging.INFO)
    x = np.array([[1.0, -2.0, 3.0, -4.0]], np.float32)
    bound = LazySession(OnCuda)
    assert bound.session and bound.io_binding is True
    np.testing.assert_array_equal(bound.run({"x": x})[0], np.maximum(x, 0))
    assert bound.io_binding is True

    OnCuda.refuse = True
    lazy = LazySession(OnCuda)
    for _ in range(3):
        np.testing.assert_array_equal(lazy.run({"x": x})[0], np.maximum(x, 0))
    assert lazy.io_binding is False and lazy.calls == 3
    lines = [r.getMessage() for r in caplog.records if "I/O binding" in r.getMessage()]
    assert len(lines) == 1 and "plain runs from now on" in lines[0]


def test_tune_allocator_serves_frame_sized_blocks_from_the_heap():
    """After tune_allocator, allocating and freeing 3 MB frames again and again faults no new pages
    (glibc's default maps each such block afresh and faults every page of it in)."""
    import subprocess
    import sys
    code = """
import resource, numpy as np
from render.runtime import tune_allocator
def faults():
    m0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(40):
        a = np.empty(1_000_000 * 3 - 7, np.uint8); a[::4096] = 1; del a
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - m0
before = faults()
assert tune_allocator()
faults()
print(before, faults())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, after = map(int, out.stdout.split())
    assert before >= 40 and after < 10, (before, after)   # before: at least one fault per frame
