"""ONNX Runtime sessions: providers in order, options from the memory strategy, lazy loading.

Everything a session needs comes from :class:`render.options.Execution` and is passed in; this
module keeps no state between renders.
"""
from __future__ import annotations

import contextlib

import logging
import threading
import time
from pathlib import Path
from typing import Any, Callable

import onnxruntime as ort

from .errors import Interrupted, ModelError
from .gpus import gpu_identity
from .graphcache import DATA as GRAPH_DATA
from .graphcache import GraphCache
from .memory import strategy
from .options import Execution
from .threads import cpu_count

log = logging.getLogger(__name__)

PROVIDER_NAMES = {
    "tensorrt": "TensorrtExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "cpu": "CPUExecutionProvider",
}

#: ONNX Runtime's errors that say the model file itself is bad: no other provider would load it
_MODEL_FAULTS = ("InvalidProtobuf", "InvalidGraph", "NoSuchFile", "NoModel")


def _short(provider: str) -> str:
    """``CUDAExecutionProvider`` -> ``cuda`` (the config's name)."""
    return next((k for k, v in PROVIDER_NAMES.items() if v == provider), provider)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


_GRAPH_LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


def tensorrt_version() -> str:
    try:
        import tensorrt  # type: ignore[import-not-found]
        return str(tensorrt.__version__)
    except Exception:  # noqa: BLE001 - any import failure means "not installed"
        return "none"


def trt_cache_dir(cache_dir: Path) -> Path:
    """Engines are valid only for one GPU architecture + ORT version + TensorRT version."""
    key = f"{gpu_identity()}-ort{ort.__version__}-trt{tensorrt_version()}"
    return cache_dir / "tensorrt" / key


class SessionFactory:
    """Creates sessions for one render with the providers and options its config asks for."""

    def __init__(self, execution: Execution, cache_dir: Path, *,
                 available: list[str] | None = None, device_id: int | None = None) -> None:
        self.execution = execution
        #: the CUDA device the GPU providers run on (the locked GPU; None: their default, 0)
        self.device_id = device_id
        self.settings = strategy(execution)
        self.cache_dir = cache_dir
        available = ort.get_available_providers() if available is None else available
        wanted = [PROVIDER_NAMES[p] for p in execution.providers]
        self.providers = [p for p in wanted if p in available]
        skipped = [p for p in execution.providers if PROVIDER_NAMES[p] not in available]
        if skipped:
            log.info("execution providers not available here, skipped: %s", ", ".join(skipped))
        if not self.providers:
            raise ModelError(f"none of the execution providers {', '.join(execution.providers)} is "
                             f"available (available: {', '.join(available)}); add cpu to "
                             f"execution.providers")
        self._trt_dir: Path | None = None
        #: saved optimised graphs (the CPU provider alone: a GPU provider's graph is another)
        self.graphs = GraphCache(Path(cache_dir) / "onnxruntime", execution.graph_cache_min_mb << 20) \
            if execution.graph_cache and self.providers == ["CPUExecutionProvider"] \
            and execution.graph_optimization != "disable" else None
        #: ONNX Runtime's intra-op threads for the sessions created from now on (ThreadPolicy)
        self.threads = execution.threads or cpu_count()

    def session_options(self) -> ort.SessionOptions:
        so = ort.SessionOptions()
        so.graph_optimization_level = _GRAPH_LEVELS[self.execution.graph_optimization]
        so.enable_cpu_mem_arena = self.settings.cpu_mem_arena
        so.enable_mem_pattern = self.settings.mem_pattern
        so.intra_op_num_threads = self.threads
        # Idle ORT worker threads spin by default; next to the ffmpeg children and the pipeline's
        # own threads that burns the cores the encoder needs.
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        so.add_session_config_entry("session.inter_op.allow_spinning", "0")
        so.log_severity_level = 3
        return so

    def provider_options(self, *, fp16: bool, only: list[str] | None = None
                         ) -> list[tuple[str, dict[str, Any]]]:
        """(provider, options) in order: this render's providers, or those of them in ``only``
        (a model that fell back keeps its remaining providers' options, the arena cap too)."""
        out: list[tuple[str, dict[str, Any]]] = []
        s = self.settings
        for name in self.providers:
            if only is not None and name not in only:
                continue
            if name == "TensorrtExecutionProvider":
                if self._trt_dir is None:
                    self._trt_dir = trt_cache_dir(self.cache_dir)
                    self._trt_dir.mkdir(parents=True, exist_ok=True)
                out.append((name, {
                    "trt_fp16_enable": fp16,
                    "trt_engine_cache_enable": True,
                    "trt_engine_cache_path": str(self._trt_dir),
                    "trt_timing_cache_enable": True,
                    "trt_timing_cache_path": str(self._trt_dir),
                    "trt_max_workspace_size": s.trt_workspace_mb << 20,
                    **self._device(),
                }))
            elif name == "CUDAExecutionProvider":
                opts: dict[str, Any] = {
                    "arena_extend_strategy": s.arena_extend_strategy,
                    "cudnn_conv_algo_search": s.cudnn_conv_algo_search,
                    "do_copy_in_default_stream": True,
                    **self._device(),
                }
                if s.gpu_mem_limit_mb:
                    opts["gpu_mem_limit"] = s.gpu_mem_limit_mb << 20
                out.append((name, opts))
            else:
                out.append((name, {}))
        return out

    def _device(self) -> dict[str, Any]:
        return {} if self.device_id is None else {"device_id": self.device_id}

    def create(self, path: Path, *, fp16: bool = False, sha256: str = "",
               providers: list[str] | None = None) -> ort.InferenceSession:
        """A session of the model at ``path``; with its ``sha256`` and the graph cache on, from
        the saved optimised graph, saving it first when there is none (:mod:`render.graphcache`).
        ``providers``: only these of the render's providers (a model that fell back)."""
        graphs = self.graphs if sha256 and self.graphs is not None and self.graphs.wanted(path) \
            and providers is None else None
        if graphs is None:
            return self._session(path, self.session_options(), fp16=fp16, only=providers)
        key = graphs.key(sha256, ort.__version__, self.execution.graph_optimization)
        saved = graphs.lookup(key)
        target: Path | None = None
        if saved is not None:
            so = self.session_options()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            try:
                session = self._session(saved, so, fp16=fp16)
                log.debug("%s: optimised graph from %s", path.name, saved.parent)
                return session
            except ModelError as exc:
                graphs.discard(key, str(exc))
        try:
            with graphs.saving(key, path) as target:
                so = self.session_options()
                if target is not None:
                    so.optimized_model_filepath = str(target)
                    so.add_session_config_entry(
                        "session.optimized_model_external_initializers_file_name", GRAPH_DATA)
                    so.add_session_config_entry(
                        "session.optimized_model_external_initializers_min_size_in_bytes", "1024")
                return self._session(path, so, fp16=fp16)
        except ModelError:
            if target is None:
                raise
            log.debug("saving the optimised graph of %s failed; loading it plainly", path.name,
                      exc_info=True)
            return self._session(path, self.session_options(), fp16=fp16)

    def lazy(self, path: Path, *, fp16: bool = False, sha256: str = "") -> "LazySession":
        """The model at ``path`` as a :class:`LazySession` that can fall back to this render's
        later providers."""
        return LazySession(lambda: self.create(path, fp16=fp16, sha256=sha256),
                           fallback=lambda only: self.create(path, fp16=fp16, sha256=sha256,
                                                             providers=only))

    def _session(self, path: Path, so: ort.SessionOptions, *, fp16: bool,
                 only: list[str] | None = None) -> ort.InferenceSession:
        """The session on the first provider in order that loads the model. A provider that
        fails (CUDA out of memory, a driver or cuDNN error) is said in one warning line, with
        ONNX Runtime's reason, and the next one is tried; a bad model file fails at once.
        ONNX Runtime's own fallback is off: it switches to the CPU and says why only on stdout,
        never in the render's log. A provider whose libraries do not load makes no error (ONNX
        Runtime warns on stderr and leaves it out): that too is one warning line here."""
        providers = self.provider_options(fp16=fp16, only=only)
        while True:
            try:
                session = ort.InferenceSession(str(path), sess_options=so,
                                               providers=[p for p, _ in providers],
                                               provider_options=[o for _, o in providers],
                                               enable_fallback=0)
                got = getattr(session, "get_providers", None)
                got = list(got()) if got else []
                if got and providers[0][0] not in got:
                    log.warning("%s: the %s provider could not be used (ONNX Runtime left it out: "
                                "its libraries did not load): running on %s", path.name,
                                _short(providers[0][0]), ", ".join(_short(p) for p in got))
                return session
            except Interrupted:
                raise                      # SIGTERM while loading: not a broken model
            except Exception as exc:  # noqa: BLE001 - ORT raises several unrelated types
                if len(providers) > 1 and type(exc).__name__ not in _MODEL_FAULTS:
                    log.warning("%s: the %s provider failed (%s): falling back to %s", path.name,
                                _short(providers[0][0]), _first_line(exc),
                                ", ".join(_short(p) for p, _ in providers[1:]))
                    providers = providers[1:]
                    continue
                raise ModelError(f"cannot load model {path}: {_first_line(exc)}") from exc


#: providers whose sessions can keep outputs in device memory (I/O binding)
DEVICE_PROVIDERS = ("TensorrtExecutionProvider", "CUDAExecutionProvider")


class LazySession:
    """A session created on first use and dropped by :meth:`release` (memory strategies).

    On a GPU provider, :meth:`run` uses ONNX Runtime's I/O binding: the inputs are copied to the
    device once and the outputs are written to buffers on the device that ONNX Runtime reuses
    from call to call, then copied back in one step. If binding fails (an older ONNX Runtime, a
    provider that refuses it), one line says so and the session runs plainly from then on. A call
    that fails on a GPU provider moves the model to its remaining providers (``fallback``, see
    :meth:`_fall_back`).

    Calls from several threads (lanes, segments rendered at once) run side by side on the CPU
    provider, and one after the other on a GPU provider: each call there takes its activations
    from the session's arena, so concurrent calls would raise the peak GPU memory past what the
    memory strategy caps, for no gain on a device that runs one call's kernels at a time.
    """

    def __init__(self, create: Callable[[], ort.InferenceSession], *,
                 fallback: Callable[[list[str]], ort.InferenceSession] | None = None) -> None:
        self._create = create
        #: makes the session on only the given providers (a call failed on a GPU provider)
        self._fallback = fallback
        #: the providers this model was moved to after such a failure (kept across release())
        self._only: list[str] | None = None
        self._session: ort.InferenceSession | None = None
        self._lock = threading.Lock()
        self._device_calls = threading.Lock()    # one call at a time on a GPU provider
        #: the execution providers the session actually got (None until it was created)
        self.providers: list[str] | None = None
        #: whether :meth:`run` binds inputs and outputs on the device (GPU providers)
        self.io_binding = False
        #: model calls made through :meth:`run` and the seconds spent inside ONNX Runtime
        self.calls = 0
        self.run_seconds = 0.0

    @property
    def session(self) -> ort.InferenceSession:
        if self._session is None:
            with self._lock:
                if self._session is None:
                    self._adopt(self._create() if self._only is None
                                else self._fallback(self._only))
        return self._session

    def _adopt(self, session: ort.InferenceSession) -> None:
        self._session = session
        providers = getattr(session, "get_providers", None)
        self.providers = list(providers()) if providers else None
        self.io_binding = bool(self.providers) and self.providers[0] in DEVICE_PROVIDERS

    def run(self, feed: dict[str, Any]) -> list[Any]:
        """All outputs of one call, timed (``calls``, ``run_seconds``: the model's own cost inside
        a render, comparable with the same model run alone)."""
        session = self.session
        on_device = bool(self.providers) and self.providers[0] in DEVICE_PROVIDERS
        with self._device_calls if on_device else contextlib.nullcontext():
            t0 = time.perf_counter()
            try:
                out = self._call(session, feed)
            except Interrupted:
                raise
            except Exception as exc:  # noqa: BLE001 - ORT raises several unrelated types
                out = self._call(self._fall_back(session, exc), feed)
            dt = time.perf_counter() - t0
        with self._lock:                   # lanes call one session from several threads
            self.run_seconds += dt
            self.calls += 1
        return out

    def _call(self, session: ort.InferenceSession, feed: dict[str, Any]) -> list[Any]:
        return self._run_bound(session, feed) if self.io_binding else session.run(None, feed)

    def _run_bound(self, session: ort.InferenceSession, feed: dict[str, Any]) -> list[Any]:
        try:
            binding = session.io_binding()
            for name, value in feed.items():
                binding.bind_cpu_input(name, value)
            for output in session.get_outputs():
                binding.bind_output(output.name, "cuda")
        except Exception as exc:  # noqa: BLE001 - ORT raises several unrelated types
            log.info("I/O binding on %s failed (%s): plain runs from now on",
                     (self.providers or ["?"])[0], _first_line(exc))
            self.io_binding = False
            return session.run(None, feed)
        session.run_with_iobinding(binding)   # a failure here is the model's: run() handles it
        return binding.copy_outputs_to_cpu()

    def _fall_back(self, session: ort.InferenceSession, exc: Exception) -> ort.InferenceSession:
        """The session to run a call again on after it failed on a GPU provider (a CUDA or cuDNN
        error, CUDA out of memory, TensorRT's EPFail): the model is made again on the remaining
        providers, with their own options, said in one warning line, and stays there for the
        rest of the render. A call that fails on the CPU, or on the last provider, raises."""
        with self._lock:
            if self._session is not None and self._session is not session:
                return self._session       # another lane moved it already
            current = self.providers or []
            if self._fallback is None or len(current) < 2 or current[0] not in DEVICE_PROVIDERS:
                raise exc
            rest = current[1:]
            log.warning("the %s provider failed in a call (%s): this model runs on %s from now "
                        "on", _short(current[0]), _first_line(exc), ", ".join(_short(p) for p in rest))
            self._only = rest
            self._adopt(self._fallback(rest))
            return self._session

    @property
    def loaded(self) -> bool:
        return self._session is not None

    def release(self) -> None:
        with self._lock:
            self._session = None


class Preload:
    """Creates sessions on a background thread ahead of their first call.

    The swapper's and the enhancer's sessions (the large ones: seconds to load and optimise) are
    made while the render probes its input, starts ffmpeg, embeds the source and detects the
    first faces, instead of after all that. A session that fails to load is left to its first
    call, which raises the error where it is reported. :meth:`join` before the render returns,
    so that no session is still being created when the process ends.
    """

    def __init__(self, sessions: list[LazySession]) -> None:
        self._thread = threading.Thread(target=self._create, args=(sessions,),
                                        name="render-preload", daemon=True)
        self._thread.start()

    @staticmethod
    def _create(sessions: list[LazySession]) -> None:
        for lazy in sessions:
            try:
                lazy.session
            except Exception:  # noqa: BLE001 - raised again by the first call, where it is reported
                log.debug("preloading a session failed; its first call will say why", exc_info=True)

    def join(self) -> None:
        self._thread.join()
