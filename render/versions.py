"""Versions of everything a render depends on: the installation (for the report) and the part of
it that decides an output's bytes (for the job key)."""
from __future__ import annotations

import functools
import os
import platform
import socket
import threading
from typing import Any

from . import __version__


_ASKING = threading.Lock()


def _installation() -> dict[str, Any]:
    """The installation's versions, found once: a caller while the prefetch thread is still
    asking waits for its answer instead of starting the same subprocesses again."""
    with _ASKING:
        return _ask_installation()


@functools.lru_cache(maxsize=1)   # what is installed does not change while a process runs
def _ask_installation() -> dict[str, Any]:
    import cv2
    import numpy as np
    import onnxruntime as ort

    from .faces import align
    from .media.tools import ffmpeg_version_line, mkvmerge_version
    from .sessions import tensorrt_version

    env = os.environ
    image = None
    if env.get("RENDER_IMAGE_VERSION"):
        image = {"version": env.get("RENDER_IMAGE_VERSION"), "revision": env.get("RENDER_IMAGE_REVISION"),
                 "base": env.get("RENDER_IMAGE_BASE"),
                 "onnxruntime_package": env.get("RENDER_IMAGE_ORT_PACKAGE")}
    trt = tensorrt_version()
    return {
        "render": __version__,
        "alignment": align.VERSION,
        "image": image,
        "python": platform.python_version(),
        "onnxruntime": ort.__version__,
        "onnxruntime_providers": ort.get_available_providers(),
        "tensorrt": None if trt == "none" else trt,
        "cuda": env.get("CUDA_VERSION") or None,          # set by the nvidia/cuda base images
        "cudnn": env.get("NV_CUDNN_VERSION") or env.get("CUDNN_VERSION") or None,
        "ffmpeg": ffmpeg_version_line() or None,
        "mkvmerge": mkvmerge_version() or None,
        "opencv": cv2.__version__,
        "numpy": np.__version__,
        "c2pa": _c2pa_version(),
        "host": socket.gethostname(),
    }


def _c2pa_version() -> str:
    from .mark import c2pa_version

    return c2pa_version() or "none"


def installation() -> dict[str, Any]:
    """Versions of this installation and, inside the image, its build identity."""
    return dict(_installation())


def prefetch_installation() -> None:
    """Find the versions on a daemon thread while the models load (a few subprocesses)."""
    threading.Thread(target=_installation, name="render-versions", daemon=True).start()


def keyed(*, vfr: bool = False, mark: bool = False) -> dict[str, str]:
    """Versions of everything that decides an output's bytes (part of the job key; ``alignment``:
    how faces are placed and pasted, :data:`render.faces.align.VERSION`): mkvmerge only
    where a variable frame rate is kept, c2pa only where outputs are marked."""
    inst = _installation()
    out = {"render": inst["render"], "alignment": inst["alignment"],
           "ffmpeg": inst["ffmpeg"] or "", "onnxruntime": inst["onnxruntime"],
           "opencv": inst["opencv"], "numpy": inst["numpy"]}
    if vfr:
        out["mkvmerge"] = inst["mkvmerge"] or ""
    if mark:
        out["c2pa"] = inst["c2pa"]
    return out
