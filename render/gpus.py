"""The GPUs of this machine as NVML (or nvidia-smi) sees them, and ``profile=auto``'s choice."""
from __future__ import annotations

import logging
import shutil
import subprocess
from dataclasses import dataclass

log = logging.getLogger(__name__)

#: total GPU memory (MiB) below which each profile is chosen; at or above the last: high
AUTO_PROFILES = ((6 * 1024, "low"), (12 * 1024, "moderate"))


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    memory_mib: int


def gpus() -> list[Gpu]:
    """Every NVIDIA GPU (NVML first, then nvidia-smi); [] on a machine without one."""
    try:
        import pynvml  # type: ignore[import-not-found]

        pynvml.nvmlInit()
        try:
            out = []
            for i in range(pynvml.nvmlDeviceGetCount()):
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                name = pynvml.nvmlDeviceGetName(h)
                name = name.decode() if isinstance(name, bytes) else str(name)
                out.append(Gpu(i, name, int(pynvml.nvmlDeviceGetMemoryInfo(h).total) >> 20))
            return out
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no NVML: ask nvidia-smi
        pass
    exe = shutil.which("nvidia-smi")
    if not exe:
        return []
    try:
        text = subprocess.run([exe, "--query-gpu=index,name,memory.total",
                               "--format=csv,noheader,nounits"], capture_output=True, text=True,
                              timeout=10, check=True, stdin=subprocess.DEVNULL).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    out = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3 and parts[0].isdigit() and parts[2].isdigit():
            out.append(Gpu(int(parts[0]), parts[1], int(parts[2])))
    return out


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
