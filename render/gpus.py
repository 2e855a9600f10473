"""The GPUs of this machine as NVML (or nvidia-smi) sees them: their names, memory, UUIDs and
architecture, which one CUDA calls device 0, and ``profile=auto``'s choice.

Every question about the GPUs here goes through this module.
"""
from __future__ import annotations

import logging
import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeVar

log = logging.getLogger(__name__)

#: total GPU memory (MiB) below which each profile is chosen; at or above the last: high
AUTO_PROFILES = ((6 * 1024, "low"), (12 * 1024, "moderate"))

_T = TypeVar("_T")


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    memory_mib: int


def gpus() -> list[Gpu]:
    """Every NVIDIA GPU (NVML first, then nvidia-smi); [] on a machine without one."""
    found = _nvml(lambda nvml, i, h: Gpu(i, _text(nvml.nvmlDeviceGetName(h)),
                                         int(nvml.nvmlDeviceGetMemoryInfo(h).total) >> 20))
    if found is not None:
        return found
    text = _nvidia_smi("index,name,memory.total", "csv,noheader,nounits")
    out = []
    for line in (text or "").splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3 and parts[0].isdigit() and parts[2].isdigit():
            out.append(Gpu(int(parts[0]), parts[1], int(parts[2])))
    return out


def gpu_uuids() -> list[tuple[int, str, str]] | None:
    """(index, UUID, name) of every NVIDIA GPU (NVML first, then nvidia-smi); None where neither
    answers."""
    found = _nvml(lambda nvml, i, h: (i, _text(nvml.nvmlDeviceGetUUID(h)),
                                      _text(nvml.nvmlDeviceGetName(h))))
    if found is not None:
        return found
    text = _nvidia_smi("index,uuid,name", "csv,noheader")
    if text is None:
        return None
    try:
        out = []
        for line in text.splitlines():
            if line.strip():
                index, uuid, name = (s.strip() for s in line.split(",", 2))
                out.append((int(index), uuid, name))
        return out
    except ValueError as exc:
        log.debug("nvidia-smi failed: %s", exc)
        return None


def pick_gpu(gpus: Sequence[tuple[int, str, str]], first_visible: str | None
             ) -> tuple[int, str, str] | None:
    """The (index, uuid, name) CUDA calls device 0, given CUDA_VISIBLE_DEVICES' first entry.

    nvidia-smi and NVML list physical GPUs and ignore CUDA_VISIBLE_DEVICES; the entry is either
    a physical index or a (possibly shortened) UUID.
    """
    if not gpus:
        return None
    if first_visible is None:
        return min(gpus)
    if first_visible.isdigit():
        return next((g for g in gpus if g[0] == int(first_visible)), None)
    want = first_visible if first_visible.startswith("GPU-") else f"GPU-{first_visible}"
    return next((g for g in gpus if g[1].startswith(want)), None)


def gpu_identity() -> str:
    """'<gpu name>-sm<major><minor>' of GPU 0, for keying TensorRT caches; 'unknown-gpu' if none."""
    text = _nvidia_smi("name,compute_cap", "csv,noheader")
    if text is not None:
        try:
            name, cap = [s.strip() for s in text.splitlines()[0].split(",")][:2]
            return re.sub(r"[^A-Za-z0-9._-]+", "_", f"{name}-sm{cap.replace('.', '')}")
        except (ValueError, IndexError):
            pass
    return "unknown-gpu"


def nvml_handles() -> tuple[Any, list[Any]] | None:
    """NVML, initialised and left so, with a handle for every GPU: for sampling while a render
    runs (render.report.PeakMemory); None without NVML."""
    try:
        import pynvml  # type: ignore[import-not-found]

        pynvml.nvmlInit()
        n = pynvml.nvmlDeviceGetCount()
        return pynvml, [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
    except Exception:  # noqa: BLE001 - no NVML: no GPU figure
        return None


def auto_profile(found: list[Gpu] | None = None, *, cuda: bool | None = None) -> tuple[str, bool, str]:
    """(profile, cpu_only, why) for ``profile=auto``: by GPU 0's total memory; a machine without
    a usable GPU (no NVIDIA GPU, or no CUDA provider in ONNX Runtime) gets low on the CPU."""
    if cuda is None:
        try:
            import onnxruntime as ort

            cuda = "CUDAExecutionProvider" in ort.get_available_providers()
        except Exception:  # noqa: BLE001
            cuda = False
    found = gpus() if found is None else found
    if not found or not cuda:
        why = "no NVIDIA GPU" if not found else "ONNX Runtime has no CUDA provider here"
        return "low", True, f"profile=auto: {why}: low on the CPU"
    gpu = found[0]
    name = next((p for limit, p in AUTO_PROFILES if gpu.memory_mib < limit), "high")
    return name, False, (f"profile=auto: GPU {gpu.index} ({gpu.name}, "
                         f"{gpu.memory_mib / 1024:.0f} GiB): {name}")


def _nvml(read: Callable[[Any, int, Any], _T]) -> list[_T] | None:
    """``read(pynvml, index, handle)`` for every GPU NVML lists; None without NVML (not installed,
    no driver) or when a query fails."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except Exception:  # noqa: BLE001 - not installed
        return None
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - no driver
        log.debug("NVML unavailable: %s", exc)
        return None
    try:
        return [read(pynvml, i, pynvml.nvmlDeviceGetHandleByIndex(i))
                for i in range(pynvml.nvmlDeviceGetCount())]
    except Exception as exc:  # noqa: BLE001
        log.debug("NVML query failed: %s", exc)
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def _nvidia_smi(fields: str, fmt: str) -> str | None:
    """nvidia-smi's answer to ``--query-gpu=FIELDS --format=FMT``, a line per GPU; None without
    nvidia-smi or when it fails."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        return subprocess.run([exe, f"--query-gpu={fields}", f"--format={fmt}"],
                              capture_output=True, text=True, timeout=10, check=True,
                              stdin=subprocess.DEVNULL).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        log.debug("nvidia-smi failed: %s", exc)
        return None


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)
