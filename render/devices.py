"""The devices a render may lock and run on: every GPU CUDA lets this process see, in CUDA's
numbering (``Device.ordinal``, its sessions' ``device_id``), else the CPU (``render.lock`` takes
a free one)."""
from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from .gpus import gpu_uuids, pick_gpu

log = logging.getLogger(__name__)

_GPU_PROVIDERS = {"cuda", "tensorrt"}
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Device:
    """What a render locks: ``id`` names the lock files, ``label`` is for people, ``ordinal`` is
    the CUDA device number of this GPU in this process (its sessions' ``device_id``; None for
    the CPU)."""

    id: str
    label: str
    ordinal: int | None = None


def safe_id(name: str) -> str:
    """``name`` with everything but letters, digits, ``.``, ``_`` and ``-`` replaced by ``_``."""
    out = _UNSAFE.sub("_", name.strip()).strip(".")
    return out or "device"


def detect_devices(providers: Sequence[str], *, fake: str = "",
                   env: Mapping[str, str] = os.environ,
                   available: Sequence[str] | None = None,
                   found: Sequence[tuple[int, str, str]] | None = None) -> list[Device]:
    """The devices a render with these execution providers may use, in CUDA's numbering: every
    GPU that CUDA_VISIBLE_DEVICES lets this process see (all of them, in PCI order, without it),
    else the CPU.

    ``fake`` (tests, or a name to lock instead of the detected ones): comma-separated names, each
    a device numbered by its place. ``available`` defaults to ONNX Runtime's
    ``get_available_providers()``, ``found`` to :func:`~render.gpus.gpu_uuids`. Anything that
    fails while asking the GPUs gives the CPU.
    """
    if fake:
        names = [n.strip() for n in fake.split(",") if n.strip()]
        return [Device(id=safe_id(n), label=n, ordinal=i) for i, n in enumerate(names)]
    if not _GPU_PROVIDERS.intersection(p.lower() for p in providers):
        return [_CPU]
    if available is None:
        try:
            import onnxruntime as ort
            available = ort.get_available_providers()
        except Exception:  # noqa: BLE001 - no (working) onnxruntime: no GPU
            return [_CPU]
    if "CUDAExecutionProvider" not in available:
        return [_CPU]
    visible = env.get("CUDA_VISIBLE_DEVICES")
    entries = None if visible is None else [e.strip() for e in visible.split(",")]
    if entries is not None and all(e.startswith("MIG-") for e in entries if e):
        return [Device(id=safe_id(f"gpu-{e}"), label=f"GPU ({e})", ordinal=i)
                for i, e in enumerate(_valid_prefix(entries))] or [_CPU]
    gpus = list(gpu_uuids() or []) if found is None else list(found)
    if not gpus:
        return [_CPU]
    picked = sorted(gpus) if entries is None else []
    for entry in _valid_prefix(entries or []):
        gpu = pick_gpu(gpus, entry)
        if gpu is None:       # CUDA ignores the entries from the first one that matches no GPU
            log.debug("CUDA_VISIBLE_DEVICES=%s: %s matches none of the GPUs %s", visible, entry,
                      gpus)
            break
        picked.append(gpu)
    return [Device(id=safe_id(f"gpu-{uuid}"), label=f"GPU {index} ({name})", ordinal=i)
            for i, (index, uuid, name) in enumerate(picked)] or [_CPU]


def _valid_prefix(entries: list[str]) -> list[str]:
    """CUDA_VISIBLE_DEVICES' entries up to the first that hides every later one ('', -1,
    NoDevFiles)."""
    out = []
    for e in entries:
        if e == "" or e.startswith("-") or e.lower() == "nodevfiles":
            break
        out.append(e)
    return out


def detect_device(providers: Sequence[str], *, fake: str = "",
                  env: Mapping[str, str] = os.environ,
                  available: Sequence[str] | None = None) -> Device:
    """The first of :func:`detect_devices` (device 0 as CUDA numbers it)."""
    return detect_devices(providers, fake=fake, env=env, available=available)[0]


_CPU = Device(id="cpu", label="cpu")
