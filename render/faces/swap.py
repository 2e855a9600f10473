"""inswapper_128: arcface_128 crops in, swapped crops out; emap from the last initializer."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..cache import load_array, save_array
from ..errors import ModelError
from ..sessions import LazySession
from .blob import unit_input, unit_output

_ORT_DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16}


def read_emap(path: Path) -> np.ndarray:
    """The 512×512 matrix stored as the model's LAST graph initializer."""
    import onnx  # imported here: slow to import, and only needed when the cached emap is missing
    from onnx import numpy_helper

    model = onnx.load(str(path), load_external_data=False)
    if not model.graph.initializer:
        raise ModelError(f"swapper {path} has no initializers; expected emap as the last one")
    emap = numpy_helper.to_array(model.graph.initializer[-1]).astype(np.float32)
    if emap.shape != (512, 512):
        raise ModelError(f"swapper {path}: last initializer has shape {emap.shape}, expected emap "
                         f"(512, 512)")
    return emap


def load_emap(path: Path, model_sha: str, cache_dir: Path) -> np.ndarray:
    """:func:`read_emap`, cached as .npy by the model's SHA-256 (the whole model is parsed to
    read it)."""
    cached = cache_dir / "emap" / f"{model_sha[:32]}.npy"
    emap = load_array(cached, (512, 512))
    if emap is None:
        emap = read_emap(path)
        save_array(cached, emap)
    return emap


def input_dtype(type_name: str) -> type:
    try:
        return _ORT_DTYPES[type_name]
    except KeyError:
        raise ModelError(f"unsupported model input type {type_name}") from None


class Swapper:
    template = "arcface_128"
    size = 128

    def __init__(self, lazy: LazySession, emap: np.ndarray) -> None:
        self.lazy = lazy
        self.emap = emap

    def latent(self, embedding: np.ndarray) -> np.ndarray:
        """(e · emap) / ‖e‖ for the raw source embedding e."""
        e = np.asarray(embedding, np.float32).reshape(1, -1)
        return (e @ self.emap) / max(float(np.linalg.norm(e)), 1e-12)

    def swap(self, crops: np.ndarray, latent: np.ndarray) -> np.ndarray:
        """(N,128,128,3) BGR uint8 crops → (N,128,128,3) BGR uint8, in one call; ``latent`` is
        one (1, 512) for every crop or (N, 512), one each."""
        session = self.lazy.session
        inputs = {i.name: i for i in session.get_inputs()}
        if "target" not in inputs or "source" not in inputs:
            raise ModelError(f"swapper inputs are {sorted(inputs)}, expected 'target' and 'source'")
        t_dtype = input_dtype(inputs["target"].type)
        s_dtype = input_dtype(inputs["source"].type)
        n = crops.shape[0]
        latent = latent.reshape(-1, latent.shape[-1])
        source = latent if len(latent) == n else np.repeat(latent, n, axis=0)
        out = self.lazy.run({"target": unit_input(crops, t_dtype),
                             "source": source.astype(s_dtype)})[0]
        return unit_output(out)
