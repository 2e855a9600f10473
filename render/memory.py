"""Memory strategies (what ``execution.memory_strategy`` low, moderate and high set) and the C
heap's tuning for the per-frame buffers."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

from .options import Execution


@dataclass(frozen=True)
class StrategySettings:
    """What one memory strategy sets (the table in docs/configuration.md)."""

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


#: glibc mallopt() parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: blocks below this come from the heap and are reused; glibc's largest allowed value on 64-bit
HEAP_BLOCK_MAX = 32 << 20
#: free memory at the top of the heap kept for reuse rather than handed back to the kernel
HEAP_KEEP = 256 << 20


def tune_allocator() -> bool:
    """Keep the per-frame buffers (frames, crops, tensors, ONNX Runtime's scratch when its arena is
    off) in the C heap, to be reused, instead of fresh ``mmap`` pages for every block over 128 KiB.

    glibc's default serves each such block with a new mapping whose pages fault in on first touch,
    and returns it to the kernel on free, so every frame would pay those faults again.
    Process-wide and idempotent; False where the C library has no ``mallopt`` (musl).
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, HEAP_BLOCK_MAX)) and \
        bool(mallopt(_M_TRIM_THRESHOLD, HEAP_KEEP))

