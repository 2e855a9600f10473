"""The machine a benchmark runs on: CPU, cores, versions, and how busy other processes keep it."""
from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def ffmpeg_version_text() -> str:
    try:
        out = subprocess.run(["ffmpeg", "-hide_banner", "-version"], capture_output=True, text=True,
                             timeout=10).stdout
        return out.split()[2] if out.startswith("ffmpeg version") else out.splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return "unknown"


def ort_version() -> str:
    try:
        import onnxruntime
        return onnxruntime.__version__
    except ImportError:
        return "not installed"


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1



_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def busy_seconds() -> float | None:
    """CPU seconds the whole machine has spent busy (all cores; /proc/stat), or None."""
    try:
        with open("/proc/stat") as fh:
            f = [int(x) for x in fh.readline().split()[1:]]
        # user nice system idle iowait irq softirq steal (guest is inside user)
        return (f[0] + f[1] + f[2] + f[5] + f[6] + f[7]) / _HZ
    except (OSError, ValueError, IndexError):
        return None


def other_load(busy0: float | None, busy1: float | None, ours: float, wall: float) -> float | None:
    """Cores kept busy by other processes during ``wall`` seconds (machine busy minus ours)."""
    if busy0 is None or busy1 is None or wall <= 0:
        return None
    return max(0.0, (busy1 - busy0 - ours) / wall)
