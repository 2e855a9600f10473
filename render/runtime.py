"""ONNX Runtime sessions: providers in order, options from the memory strategy, lazy loading.

Everything a session needs comes from :class:`render.config.Execution` and is passed in; this
module keeps no state between renders.
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import onnxruntime as ort

from .config import Execution
from .errors import ModelError

log = logging.getLogger(__name__)

PROVIDER_NAMES = {
    "tensorrt": "TensorrtExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "cpu": "CPUExecutionProvider",
}

_GRAPH_LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


@dataclass(frozen=True)
class StrategySettings:
    """What one memory strategy sets (documented as a table in the README)."""

    frames_in_flight: int
    batch_size: int
    gpu_mem_limit_mb: int          # 0 = no cap
    arena_extend_strategy: str     # CUDA arena growth
    cudnn_conv_algo_search: str
    cpu_mem_arena: bool
    mem_pattern: bool
    trt_workspace_mb: int
    release_idle_models: bool      # drop the embedder after the source embedding, etc.


STRATEGIES: dict[str, StrategySettings] = {
    "low": StrategySettings(frames_in_flight=4, batch_size=1, gpu_mem_limit_mb=2560,
                            arena_extend_strategy="kSameAsRequested",
                            cudnn_conv_algo_search="HEURISTIC", cpu_mem_arena=False,
                            mem_pattern=False, trt_workspace_mb=1024, release_idle_models=True),
    "moderate": StrategySettings(frames_in_flight=8, batch_size=4, gpu_mem_limit_mb=0,
                                 arena_extend_strategy="kSameAsRequested",
                                 cudnn_conv_algo_search="HEURISTIC", cpu_mem_arena=True,
                                 mem_pattern=True, trt_workspace_mb=2048, release_idle_models=True),
    "high": StrategySettings(frames_in_flight=16, batch_size=8, gpu_mem_limit_mb=0,
                             arena_extend_strategy="kNextPowerOfTwo",
                             cudnn_conv_algo_search="EXHAUSTIVE", cpu_mem_arena=True,
                             mem_pattern=True, trt_workspace_mb=4096, release_idle_models=False),
}


def strategy(execution: Execution) -> StrategySettings:
    """The strategy's settings with the profile's explicit values (non-zero) taking precedence."""
    base = STRATEGIES[execution.memory_strategy]
    return StrategySettings(
        frames_in_flight=execution.frames_in_flight or base.frames_in_flight,
        batch_size=execution.batch_size or base.batch_size,
        gpu_mem_limit_mb=execution.gpu_mem_limit_mb or base.gpu_mem_limit_mb,
        arena_extend_strategy=base.arena_extend_strategy,
        cudnn_conv_algo_search=base.cudnn_conv_algo_search,
        cpu_mem_arena=base.cpu_mem_arena,
        mem_pattern=base.mem_pattern,
        trt_workspace_mb=execution.trt_workspace_mb or base.trt_workspace_mb,
        release_idle_models=base.release_idle_models,
    )


def default_threads() -> int:
    """Half the CPUs this process may use: the rest is for the ffmpeg decoder and encoder.

    With every core given to ONNX Runtime the two compete and both slow down (bench, 2 cores,
    swapper ≈ one floor frame: 59 ms/frame with 2 threads, 45 ms with 1 = the CPU-bound limit).
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 2
    return max(1, cpus // 2)


def gpu_identity() -> str:
    """'<gpu name>-sm<major><minor>' of GPU 0, for keying TensorRT caches; 'unknown-gpu' if none."""
    exe = shutil.which("nvidia-smi")
    if exe:
        try:
            out = subprocess.run([exe, "--query-gpu=name,compute_cap", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=10, check=True).stdout
            name, cap = [s.strip() for s in out.splitlines()[0].split(",")][:2]
            return re.sub(r"[^A-Za-z0-9._-]+", "_", f"{name}-sm{cap.replace('.', '')}")
        except (OSError, subprocess.SubprocessError, ValueError, IndexError):
            pass
    return "unknown-gpu"


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
                 available: list[str] | None = None) -> None:
        self.execution = execution
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

    def session_options(self) -> ort.SessionOptions:
        so = ort.SessionOptions()
        so.graph_optimization_level = _GRAPH_LEVELS[self.execution.graph_optimization]
        so.enable_cpu_mem_arena = self.settings.cpu_mem_arena
        so.enable_mem_pattern = self.settings.mem_pattern
        so.intra_op_num_threads = self.execution.threads or default_threads()
        # Idle ORT worker threads spin by default; next to the ffmpeg children and the pipeline's
        # own threads that burns the cores the encoder needs (bench: 0.64 → 0.81 of the floor).
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        so.add_session_config_entry("session.inter_op.allow_spinning", "0")
        so.log_severity_level = 3
        return so

    def provider_options(self, *, fp16: bool) -> list[tuple[str, dict[str, Any]]]:
        out: list[tuple[str, dict[str, Any]]] = []
        s = self.settings
        for name in self.providers:
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
                }))
            elif name == "CUDAExecutionProvider":
                opts: dict[str, Any] = {
                    "arena_extend_strategy": s.arena_extend_strategy,
                    "cudnn_conv_algo_search": s.cudnn_conv_algo_search,
                    "do_copy_in_default_stream": True,
                }
                if s.gpu_mem_limit_mb:
                    opts["gpu_mem_limit"] = s.gpu_mem_limit_mb << 20
                out.append((name, opts))
            else:
                out.append((name, {}))
        return out

    def create(self, path: Path, *, fp16: bool = False) -> ort.InferenceSession:
        providers = self.provider_options(fp16=fp16)
        try:
            return ort.InferenceSession(str(path), sess_options=self.session_options(),
                                        providers=[p for p, _ in providers],
                                        provider_options=[o for _, o in providers])
        except Exception as exc:  # noqa: BLE001 - ORT raises several unrelated types
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ModelError(f"cannot load model {path}: {first}") from exc


class LazySession:
    """A session created on first use and dropped by :meth:`release` (memory strategies)."""

    def __init__(self, create: Callable[[], ort.InferenceSession]) -> None:
        self._create = create
        self._session: ort.InferenceSession | None = None
        self._lock = threading.Lock()
        #: the execution providers the session actually got (None until it was created)
        self.providers: list[str] | None = None

    @property
    def session(self) -> ort.InferenceSession:
        if self._session is None:
            with self._lock:
                if self._session is None:
                    self._session = self._create()
                    providers = getattr(self._session, "get_providers", None)
                    self.providers = list(providers()) if providers else None
        return self._session

    @property
    def loaded(self) -> bool:
        return self._session is not None

    def release(self) -> None:
        with self._lock:
            self._session = None
