"""What this machine's CPU offers the models: the instruction sets that decide whether int8
runs fast (VNNI: AVX512-VNNI, AVX-VNNI, AMX), read from /proc/cpuinfo."""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

#: the flags that matter to ONNX Runtime's kernels, in the order they came
ISA = ("sse4_2", "avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8")
#: the ones with int8 dot products: int8 runs several times faster than fp32 where one is there
VNNI = ("avx512_vnni", "avx_vnni", "amx_int8")


@functools.lru_cache(maxsize=1)
def _cpuinfo() -> tuple[str, frozenset[str]]:
    model, flags = "", frozenset()
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return model, flags
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and not model:
            model = value.strip()
        elif key == "flags" and not flags:
            flags = frozenset(value.split())
    return model, flags


def int8_fast() -> bool:
    """Whether the CPU has VNNI (int8 dot products)."""
    return any(f in _cpuinfo()[1] for f in VNNI)


def summary() -> dict[str, Any]:
    """The report's row: the CPU's name, its instruction sets of :data:`ISA` and VNNI."""
    model, flags = _cpuinfo()
    return {"model": model, "isa": [f for f in ISA if f in flags], "vnni": int8_fast()}
