"""Sessions: providers in order, skipped ones logged once, options from the memory strategy."""
from __future__ import annotations

import logging

import pytest

from render.config import load_config
from render.errors import ModelError
from render.memory import STRATEGIES, strategy
from render.sessions import LazySession, Preload, SessionFactory, trt_cache_dir

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
    from render.threads import cpu_count, default_threads
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


# -- saved optimised graphs (render.graphcache) --------------------------------------------------
def _conv_model(path):
    """A small convolutional network (the NCHWc layout applies to it), fp32."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    rs = np.random.RandomState(7)
    w1 = helper.make_tensor("w1", TensorProto.FLOAT, [32, 16, 3, 3],
                            (rs.standard_normal((32, 16, 3, 3)) * 0.1).astype(np.float32).ravel())
    w2 = helper.make_tensor("w2", TensorProto.FLOAT, [16, 32, 3, 3],
                            (rs.standard_normal((16, 32, 3, 3)) * 0.1).astype(np.float32).ravel())
    nodes = [helper.make_node("Conv", ["input", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "input"], ["output"])]
    graph = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 16, 32, 32])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 16, 32, 32])],
                              initializer=[w1, w2])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


def _graph_models(tmp_path):
    from render import standins

    conv = tmp_path / "conv.onnx"
    _conv_model(conv)
    fp16 = tmp_path / "swapper_fp16.onnx"
    standins.make_inswapper(fp16, fp16=True, gflops=0.02, weights_mb=1.0)
    return [(conv, False), (fp16, True)]


def _outputs(session):
    import numpy as np

    rs = np.random.RandomState(3)
    feed = {}
    for i in session.get_inputs():
        dtype = np.float16 if "float16" in i.type else np.float32
        feed[i.name] = rs.random_sample([d if isinstance(d, int) else 1 for d in i.shape]).astype(dtype)
    return [o.tobytes() for o in session.run(None, feed)]


def _sha(path):
    from render.files import sha256_file
    return sha256_file(path)


def test_graph_cache_saves_once_then_loads_sessions_with_the_same_outputs(tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="render")
    cpu = ["CPUExecutionProvider"]
    plain = _factory(tmp_path / "plain", available=cpu, profile="low", **{"execution.graph_cache": "false"})
    assert plain.graphs is None
    cached = _factory(tmp_path / "cache", available=cpu, profile="low", **{"execution.graph_cache_min_mb": 0})
    for model, fp16 in _graph_models(tmp_path):
        want = _outputs(plain.create(model, fp16=fp16, sha256=_sha(model)))
        caplog.clear()
        first = cached.create(model, fp16=fp16, sha256=_sha(model))          # optimises, saves
        entries = [p for p in (tmp_path / "cache" / "onnxruntime").iterdir() if not p.name.startswith(".")]
        assert any(p.name.startswith(_sha(model)[:16]) for p in entries)
        assert not any("optimised graph from" in r.getMessage() for r in caplog.records)
        again = cached.create(model, fp16=fp16, sha256=_sha(model))          # loads the saved graph
        assert any(f"{model.name}: optimised graph from" in r.getMessage() for r in caplog.records)
        assert _outputs(first) == want and _outputs(again) == want
    # nothing is left beside the entries (no temp folders)
    assert not [p for p in (tmp_path / "cache" / "onnxruntime").iterdir() if p.name.startswith(".")]


def test_graph_cache_entry_damaged_or_copied(tmp_path, caplog):
    import shutil

    cpu = ["CPUExecutionProvider"]
    model, fp16 = _graph_models(tmp_path)[1]
    sha = _sha(model)
    f = _factory(tmp_path / "cache", available=cpu, profile="low", **{"execution.graph_cache_min_mb": 0})
    want = _outputs(f.create(model, fp16=fp16, sha256=sha))
    root = tmp_path / "cache" / "onnxruntime"
    (entry,) = list(root.iterdir())
    # copied elsewhere and back (other inode and times, same bytes): hashed again and used
    shutil.copytree(entry, tmp_path / "copy")
    shutil.rmtree(entry)
    shutil.copytree(tmp_path / "copy", entry)
    caplog.set_level(logging.DEBUG, logger="render")
    caplog.clear()
    assert _outputs(f.create(model, fp16=fp16, sha256=sha)) == want
    assert any("optimised graph from" in r.getMessage() for r in caplog.records)
    # damaged weights (cut short): removed with a warning, made again, the outputs unchanged
    data = entry / "graph.data"
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    caplog.clear()
    assert _outputs(f.create(model, fp16=fp16, sha256=sha)) == want
    assert any("removing damaged graph cache entry" in r.getMessage() and r.levelno == logging.WARNING
               for r in caplog.records)
    assert (entry / "stamp.json").is_file() and data.stat().st_size > 0
    caplog.clear()
    assert _outputs(f.create(model, fp16=fp16, sha256=sha)) == want
    assert any("optimised graph from" in r.getMessage() for r in caplog.records)
    # an entry without its stamp (entries are renamed into place whole) is made again too
    (entry / "stamp.json").unlink()
    caplog.clear()
    assert _outputs(f.create(model, fp16=fp16, sha256=sha)) == want
    assert any("(no stamp)" in r.getMessage() for r in caplog.records)
    assert (entry / "stamp.json").is_file()


def test_graph_cache_not_saved_without_room_and_killed_saves_cleaned(tmp_path, monkeypatch):
    import collections
    import fcntl
    import os

    import render.graphcache as graphcache

    cpu = ["CPUExecutionProvider"]
    model, fp16 = _graph_models(tmp_path)[1]
    f = _factory(tmp_path / "cache", available=cpu, profile="low", **{"execution.graph_cache_min_mb": 0})
    root = tmp_path / "cache" / "onnxruntime"
    Usage = collections.namedtuple("Usage", "total used free")
    with monkeypatch.context() as m:
        m.setattr(graphcache.shutil, "disk_usage", lambda p: Usage(1 << 30, 1 << 30, 100 << 20))
        assert _outputs(f.create(model, fp16=fp16, sha256=_sha(model)))
    assert not root.exists() or not list(root.iterdir())
    # temp folders: one of a render killed while saving (its lock is free) goes at the next save;
    # one whose render is saving (lock held) stays, as does one made a moment ago, not locked yet
    stale, alive, fresh = (root / f".k{i}.tmp-x{i}" for i in range(3))
    for d in (stale, alive, fresh):
        d.mkdir(parents=True)
        (d / "graph.data").write_bytes(b"0" * 1024)
    for d in (stale, alive):
        (d / graphcache.LOCK).touch()
    held = os.open(alive / graphcache.LOCK, os.O_RDWR)
    fcntl.flock(held, fcntl.LOCK_EX)
    try:
        f.create(model, fp16=fp16, sha256=_sha(model))
        assert not stale.exists() and alive.exists() and fresh.exists()
    finally:
        os.close(held)


def test_graph_cache_keeps_its_entry_through_a_sigterm_or_a_read_only_stamp(tmp_path, monkeypatch, caplog):
    import shutil

    import render.graphcache as graphcache
    import render.sessions as sessions
    from render.errors import Interrupted

    cpu = ["CPUExecutionProvider"]
    model, fp16 = _graph_models(tmp_path)[1]
    sha = _sha(model)
    f = _factory(tmp_path / "cache", available=cpu, profile="low", **{"execution.graph_cache_min_mb": 0})
    want = _outputs(f.create(model, fp16=fp16, sha256=sha))
    (entry,) = [p for p in (tmp_path / "cache" / "onnxruntime").iterdir()]
    # SIGTERM (the CLI's Interrupted) while the saved graph loads: raised as it is, entry kept
    with monkeypatch.context() as m:
        def interrupted(*a, **k):
            raise Interrupted("terminated")
        m.setattr(sessions.ort, "InferenceSession", interrupted)
        with pytest.raises(Interrupted):
            f.create(model, fp16=fp16, sha256=sha)
    assert (entry / "stamp.json").is_file() and (entry / "graph.data").is_file()
    # restored by a copy (new inode and times) into a cache whose stamp cannot be rewritten:
    # the bytes match, so the entry is used, not removed
    shutil.copytree(entry, tmp_path / "copy")
    shutil.rmtree(entry)
    shutil.copytree(tmp_path / "copy", entry)

    def read_only(*a, **k):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(graphcache.GraphCache, "_write_stamp", staticmethod(read_only))
    caplog.set_level(logging.DEBUG, logger="render")
    caplog.clear()
    assert _outputs(f.create(model, fp16=fp16, sha256=sha)) == want
    assert any("optimised graph from" in r.getMessage() for r in caplog.records)
    assert not any(r.levelno >= logging.WARNING for r in caplog.records)


def test_graph_cache_only_for_the_cpu_provider_alone_and_large_models(tmp_path):
    assert _factory(tmp_path, available=ALL, profile="low").graphs is None
    assert _factory(tmp_path, available=["CPUExecutionProvider"], profile="low",
                    **{"execution.graph_optimization": "disable"}).graphs is None
    f = _factory(tmp_path, available=["CPUExecutionProvider"], profile="low")
    model, _ = _graph_models(tmp_path)[0]
    assert f.graphs is not None and not f.graphs.wanted(model)     # 32 MiB by default
    f.create(model, sha256=_sha(model))
    assert not (tmp_path / "onnxruntime").exists()


def test_a_failing_gpu_provider_falls_back_with_one_line_and_a_bad_model_does_not(tmp_path, monkeypatch,
                                                                                    caplog):
    """ONNX Runtime's own fallback (to the CPU, its reason printed on stdout) is off; a provider that
    fails to create the session is named in one warning line with the reason and the next one in
    order is tried; a bad model file fails at once, as a ModelError, without trying others."""
    import numpy as np
    import onnxruntime as ort

    import render.sessions as sessions

    path = _identity_model(tmp_path / "relu.onnx")
    real = ort.InferenceSession
    seen: list[tuple[list[str], dict]] = []

    def gpu_out_of_memory(model, sess_options=None, providers=None, provider_options=None, **kw):
        seen.append((list(providers), kw))
        if providers[0] != "CPUExecutionProvider":
            raise RuntimeError(f"{providers[0]}: CUDA failure 2: out of memory\nsecond line")
        return real(model, sess_options=sess_options, providers=providers, **kw)

    monkeypatch.setattr(sessions.ort, "InferenceSession", gpu_out_of_memory)
    caplog.set_level(logging.INFO, logger="render")
    f = _factory(tmp_path, available=ALL, profile="moderate")
    session = f.create(path)
    x = np.array([[1.0, -2.0, 3.0, -4.0]], np.float32)
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], np.maximum(x, 0))
    assert [p[0] for p, _ in seen] == ALL and all(kw == {"enable_fallback": 0} for _, kw in seen)
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert lines == [
        "relu.onnx: the tensorrt provider failed (TensorrtExecutionProvider: CUDA failure 2: out of "
        "memory): falling back to cuda, cpu",
        "relu.onnx: the cuda provider failed (CUDAExecutionProvider: CUDA failure 2: out of memory): "
        "falling back to cpu"]

    class InvalidProtobuf(Exception):
        pass

    def bad_file(*a, **k):
        seen.append(("bad", k))
        raise InvalidProtobuf("[ONNXRuntimeError] : 7 : INVALID_PROTOBUF : Load model failed")

    monkeypatch.setattr(sessions.ort, "InferenceSession", bad_file)
    seen.clear()
    caplog.clear()
    with pytest.raises(ModelError, match="cannot load model .*relu.onnx: .*INVALID_PROTOBUF"):
        f.create(path)
    assert len(seen) == 1 and not [r for r in caplog.records if r.levelno >= logging.WARNING]
    # the last provider failing is the ModelError, with its reason
    monkeypatch.setattr(sessions.ort, "InferenceSession", lambda *a, **k: (_ for _ in ()).throw(
        RuntimeError("no memory at all")))
    with pytest.raises(ModelError, match="relu.onnx: no memory at all"):
        _factory(tmp_path, available=ALL, **{"execution.providers": "cpu"}).create(path)


def test_a_gpu_call_that_fails_moves_the_model_to_its_next_providers_with_one_line(tmp_path, caplog):
    """A call that fails on a GPU provider (ONNX Runtime raises CUDA and cuDNN errors as Fail or, from
    a bound run, RuntimeError; TensorRT's as EPFail): the model is made again on its remaining
    providers (the fallback, which keeps their options), one warning line says so, the call runs
    again there and so do later calls, also after release(); a call that fails on the CPU raises."""
    import numpy as np
    import onnxruntime as ort
    from onnxruntime.capi.onnxruntime_pybind11_state import Fail

    path = _identity_model(tmp_path / "relu.onnx")

    class FailsOnCuda:
        """A real CPU session that reports CUDA first and whose calls fail as CUDA's do."""

        def __init__(self):
            self._s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])

        def get_providers(self):
            return ["CUDAExecutionProvider", "CPUExecutionProvider"]

        def run(self, names, feed):
            raise Fail("[ONNXRuntimeError] : 1 : FAIL : CUDNN failure 4: CUDNN_STATUS_INTERNAL_ERROR")

        def run_with_iobinding(self, binding):
            raise RuntimeError("Error in execution: CUDA failure 2: out of memory\nmore")

        def __getattr__(self, name):
            return getattr(self._s, name)

    made: list[list[str]] = []

    def fallback(providers):
        made.append(list(providers))
        return ort.InferenceSession(str(path), providers=providers)

    caplog.set_level(logging.INFO, logger="render")
    x = np.array([[3.0, -1.0, 0.5, -2.0]], np.float32)
    lazy = LazySession(FailsOnCuda, fallback=fallback)
    assert lazy.session and lazy.io_binding is True
    for _ in range(3):
        np.testing.assert_array_equal(lazy.run({"x": x})[0], np.maximum(x, 0))
    assert made == [["CPUExecutionProvider"]]
    assert lazy.providers == ["CPUExecutionProvider"] and lazy.io_binding is False and lazy.calls == 3
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert lines == ["the cuda provider failed in a call (Error in execution: CUDA failure 2: out of "
                     "memory): this model runs on cpu from now on"]
    lazy.release()                                   # made again where it was moved to
    np.testing.assert_array_equal(lazy.run({"x": x})[0], np.maximum(x, 0))
    assert made == [["CPUExecutionProvider"]] * 2 and len(caplog.records) == 1

    plain = LazySession(FailsOnCuda, fallback=fallback)
    plain.session
    plain.io_binding = False                         # a plain run: CUDA's errors come as Fail
    np.testing.assert_array_equal(plain.run({"x": x})[0], np.maximum(x, 0))
    assert "CUDNN failure 4" in caplog.records[-1].getMessage()

    with pytest.raises(RuntimeError, match="CUDA failure 2"):
        LazySession(FailsOnCuda).run({"x": x})       # nowhere to go: the error itself
    on_cpu = LazySession(lambda: ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]),
                         fallback=fallback)
    caplog.clear()
    with pytest.raises(Exception, match="invalid dimensions"):
        on_cpu.run({"x": np.zeros((1, 3), np.float32)})
    assert not caplog.records and len(made) == 3     # no fallback for a CPU session's error


def test_a_fallback_keeps_the_remaining_providers_options_and_a_provider_left_out_is_said(
        tmp_path, monkeypatch, caplog):
    """The fallback's session gets the remaining providers with their own options (profile low's
    CUDA arena cap); a provider that ONNX Runtime leaves out without an error (its libraries did not
    load: it only warns on stderr) is one warning line too."""
    import onnxruntime as ort

    import render.sessions as sessions

    path = _identity_model(tmp_path / "relu.onnx")
    real = ort.InferenceSession
    seen = []

    class Session:
        def __init__(self, model, sess_options=None, providers=None, provider_options=None, **kw):
            seen.append(list(zip(providers, provider_options)))
            self._s = real(model, sess_options=sess_options, providers=["CPUExecutionProvider"])

        def get_providers(self):
            return ["CPUExecutionProvider"]

    monkeypatch.setattr(sessions.ort, "InferenceSession", Session)
    caplog.set_level(logging.INFO, logger="render")
    f = _factory(tmp_path, available=ALL, profile="low")
    f.create(path, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    (cuda, cpu), = seen
    assert cuda[0] == "CUDAExecutionProvider" and cuda[1]["gpu_mem_limit"] == 2560 << 20
    assert cpu == ("CPUExecutionProvider", {})
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert lines == ["relu.onnx: the cuda provider could not be used (ONNX Runtime left it out: its "
                     "libraries did not load): running on cpu"]


def test_the_gpu_providers_run_on_the_locked_device(tmp_path):
    """The device the render locked (its CUDA number) reaches the CUDA and TensorRT options; the
    CPU provider has none, and without a locked device the providers keep their default."""
    cfg = load_config({"profile": "low"}, env={})
    f = SessionFactory(cfg.execution, tmp_path, available=ALL, device_id=1)
    opts = dict(f.provider_options(fp16=False))
    assert opts["CUDAExecutionProvider"]["device_id"] == 1
    assert opts["TensorrtExecutionProvider"]["device_id"] == 1
    assert opts["CPUExecutionProvider"] == {}
    plain = dict(SessionFactory(cfg.execution, tmp_path, available=ALL).provider_options(fp16=False))
    assert "device_id" not in plain["CUDAExecutionProvider"]
