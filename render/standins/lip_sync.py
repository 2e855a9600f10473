"""Stand-ins of the lip syncer's models, with the tensor names, shapes and dtypes FaceFusion
3.8.1 feeds them (``render.processors.lip_sync``, ``render.audio.voice``), and answers a test
can predict from the mel slice each frame should get:

* ``make_wav2lip``: ``source`` (1, 1, 80, 16) and ``target`` (1, 6, 96, 96) → ``output``
  (1, 3, 96, 96). Its upper half (rows 0..47) is the target's channels 0..2 (the copy whose
  lower half is blacked out), its lower half is channel 0 = (mean(source) + 4) / 8 and
  channels 1, 2 = the target's channels 4, 5 (the whole copy): the mel slice's mean is written
  into the blue of the mouth, so a frame given another slice, a mel not scaled by 2·weight,
  RGB for BGR or the wrong half blacked out each show in the frame.
* ``make_edtalk``: ``source`` (1, 1, 80, 16), ``target`` (1, 3, 256, 256), ``weight`` (1,) →
  ``output`` (1, 3, 256, 256): the target, except channel 0 (red) of its lower half = weight ×
  (mean(source) + 4) / 8.
* ``make_voice_extractor``: MDX-Net's ``input`` (K, 4, 3072, frames) → ``output`` the same:
  the first channel's real and imaginary parts kept, the second channel's zeroed: the voice
  it gives back is the track's left channel (up to 19.2 kHz), its right channel silent.

:func:`write_lip_sync_models` writes a set with their manifest entries into a folder's
``manifest.yaml``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from render.files import sha256_file
from render.standins.graph import Graph, PathLike, finish


def _const(g: Graph, values: Any, hint: str, dtype=np.float32) -> str:
    return g.const(np.array(values, dtype), hint)


def _slice(g: Graph, x: str, starts: list[int], ends: list[int], axes: list[int], hint: str
           ) -> str:
    return g.op("Slice", [x, _const(g, starts, "starts", np.int64),
                          _const(g, ends, "ends", np.int64), _const(g, axes, "axes", np.int64)],
                hint)


def _mel_level(g: Graph) -> str:
    """(1, 1, 1, 1): (mean of ``source`` + 4) / 8."""
    mean = g.op("ReduceMean", ["source"], "mel_mean", axes=[1, 2, 3], keepdims=1)
    return g.op("Div", [g.op("Add", [mean, _const(g, 4.0, "four")], "shifted"),
                        _const(g, 8.0, "eight")], "level")


def make_wav2lip(path: PathLike) -> onnx.ModelProto:
    g = Graph("wav2lip")
    level = _mel_level(g)
    upper = _slice(g, "target", [0, 0], [3, 48], [1, 2], "upper")             # (1,3,48,96)
    zeros = g.op("Mul", [_slice(g, "target", [0, 48], [1, 96], [1, 2], "lower_0"),
                         _const(g, 0.0, "zero")], "zeros")                     # (1,1,48,96)
    blue = g.op("Add", [zeros, level], "blue")
    rest = _slice(g, "target", [4, 48], [6, 96], [1, 2], "lower_rest")        # (1,2,48,96)
    lower = g.op("Concat", [blue, rest], "lower", axis=1)
    g.op("Concat", [upper, lower], output="output", axis=2)
    inputs = [helper.make_tensor_value_info("source", TensorProto.FLOAT, [1, 1, 80, 16]),
              helper.make_tensor_value_info("target", TensorProto.FLOAT, [1, 6, 96, 96])]
    outputs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, 96, 96])]
    return finish(g, "wav2lip_standin", inputs, outputs, path,
                  doc="wav2lip stand-in: the mel slice's mean in the mouth's blue")


def make_edtalk(path: PathLike) -> onnx.ModelProto:
    g = Graph("edtalk")
    red = g.op("Mul", [_mel_level(g), "weight"], "red")                       # (1,1,1,1)
    upper = _slice(g, "target", [0], [128], [2], "upper")                    # (1,3,128,256)
    zeros = g.op("Mul", [_slice(g, "target", [0, 128], [1, 256], [1, 2], "lower_0"),
                         _const(g, 0.0, "zero")], "zeros")
    rest = _slice(g, "target", [1, 128], [3, 256], [1, 2], "lower_rest")
    lower = g.op("Concat", [g.op("Add", [zeros, red], "lower_red"), rest], "lower", axis=1)
    g.op("Concat", [upper, lower], output="output", axis=2)
    inputs = [helper.make_tensor_value_info("source", TensorProto.FLOAT, [1, 1, 80, 16]),
              helper.make_tensor_value_info("target", TensorProto.FLOAT, [1, 3, 256, 256]),
              helper.make_tensor_value_info("weight", TensorProto.FLOAT, [1])]
    outputs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, 256, 256])]
    return finish(g, "edtalk_standin", inputs, outputs, path,
                  doc="edtalk stand-in: weight x the mel slice's mean in the lower face's red")


def make_voice_extractor(path: PathLike, *, frames: int = 256) -> onnx.ModelProto:
    """``frames``: the input's last side (256 in kim_vocal_2: 261120-sample chunks)."""
    g = Graph("mdx")
    keep = _const(g, np.array([1, 1, 0, 0], np.float32).reshape(1, 4, 1, 1), "keep")
    g.op("Mul", ["input", keep], output="output")
    shape = ["batch", 4, 3072, frames]
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)]
    outputs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, shape)]
    return finish(g, "mdx_standin", inputs, outputs, path,
                  doc="MDX-Net voice extractor stand-in: the first channel kept")


#: name → (builder, contract, input_size) of the production models the stand-ins replace
MODELS = {
    "wav2lip_gan_96": (make_wav2lip, "lip-sync-wav2lip", 96),
    "wav2lip_96": (make_wav2lip, "lip-sync-wav2lip", 96),
    "edtalk_256": (make_edtalk, "lip-sync-edtalk", 256),
    "kim_vocal_2": (make_voice_extractor, "voice-extractor-mdx", None),
}


def write_lip_sync_models(dir: PathLike, names: tuple[str, ...] = tuple(MODELS),
                          **extractor: Any) -> dict[str, dict]:
    """Write the stand-ins ``names`` (production names, :data:`MODELS`) into ``dir`` and add
    their entries to ``dir/manifest.yaml`` (created when missing); ``extractor``: keywords of
    :func:`make_voice_extractor`. Returns the entries."""
    import yaml

    d = Path(dir)
    d.mkdir(parents=True, exist_ok=True)
    entries = {}
    for name in names:
        build, contract, size = MODELS[name]
        path = d / f"{name}.onnx"
        build(path, **(extractor if contract == "voice-extractor-mdx" else {}))
        entries[name] = {"file": path.name, "sha256": sha256_file(path),
                         "licence": "test stand-in", "commercial_use": False,
                         "contract": contract, "template": "ffhq_512" if size else None,
                         "input_size": size, "precision": "fp32"}
    manifest = d / "manifest.yaml"
    doc = yaml.safe_load(manifest.read_text()) if manifest.is_file() else {"version": 1}
    doc.setdefault("models", {}).update(entries)
    manifest.write_text(yaml.safe_dump(doc, sort_keys=False))
    return entries
