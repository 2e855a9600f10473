"""A models folder of stand-ins: the files every profile names and their ``manifest.yaml``
(``write_standins``)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Union

import numpy as np

from render.files import sha256_file
from render.standins.graph import PathLike
from render.standins.models import make_arcface, make_gfpgan, make_inswapper, make_scrfd
from render.standins.quality import make_2dfan4, make_bisenet, make_xseg
from render.standins.swappers import make_embedding_swapper

FILES = {
    "scrfd_2.5g": "scrfd_2.5g.onnx",
    "arcface_w600k_r50": "arcface_w600k_r50.onnx",
    "inswapper_128": "inswapper_128.onnx",
    "inswapper_128_fp16": "inswapper_128_fp16.onnx",
    "gfpgan_1.4": "gfpgan_1.4.onnx",
    # the quality tools profiles moderate and high turn on (stand-ins of fixed, small answers)
    "hyperswap_1a_256": "hyperswap_1a_256.onnx",
    "xseg_1": "xseg_1.onnx",
    "bisenet_resnet_34": "bisenet_resnet_34.onnx",
    "2dfan4": "2dfan4.onnx",
}


Knob = Union[float, bool, Mapping[str, Union[float, bool]]]


def _knob(value: Knob, name: str, default):
    if isinstance(value, Mapping):
        return value.get(name, default)
    return value


_ENTRIES = {
    "scrfd_2.5g": dict(commercial_use=False, contract="detector-scrfd", template=None, input_size=640,
                       precision="fp32"),
    "arcface_w600k_r50": dict(commercial_use=False, contract="embedder-arcface", template="arcface_112_v2",
                              input_size=112, precision="fp32"),
    "inswapper_128": dict(commercial_use=False, contract="swapper-inswapper", template="arcface_128",
                          input_size=128, precision="fp32", variants={"fp16": "inswapper_128_fp16"}),
    "inswapper_128_fp16": dict(commercial_use=False, contract="swapper-inswapper", template="arcface_128",
                               input_size=128, precision="fp16"),
    "gfpgan_1.4": dict(commercial_use=True, contract="enhancer-gfpgan", template="ffhq_512", input_size=512,
                       precision="fp32"),
    "hyperswap_1a_256": dict(commercial_use=False, contract="swapper-hyperswap", template="arcface_128",
                             input_size=256, precision="fp32"),
    "xseg_1": dict(commercial_use=True, contract="occluder-xseg", template=None, input_size=256,
                   precision="fp32"),
    "bisenet_resnet_34": dict(commercial_use=True, contract="parser-bisenet", template=None,
                              input_size=512, precision="fp32"),
    "2dfan4": dict(commercial_use=True, contract="landmarker-2dfan4", template=None, input_size=256,
                   precision="fp32"),
}

#: the stand-in parser's classes, one per 128-px cell of its 512-px input: skin (1) in the middle,
#: hair (17) above, background (0) at the sides, so the region mask keeps the face's middle
PARSER_CELLS = np.array([[0, 17, 17, 0], [0, 1, 1, 0], [0, 1, 1, 0], [0, 1, 1, 0]])


def _dump_yaml(doc: dict) -> str:
    try:
        import yaml
    except ImportError:  # JSON is valid YAML
        import json

        return json.dumps(doc, indent=2) + "\n"
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)


def write_standins(dir: PathLike, *, gflops: Knob = 0.0, null: Knob = False,
                   dynamic_batch: Knob = False, weights_mb: Knob = 0.0,
                   yunet: PathLike | None = None) -> dict[str, dict]:
    """Write the stand-in models and ``dir/manifest.yaml``; return the manifest's ``models`` mapping.

    Knobs take a single value for every model that supports them, or a mapping from entry name
    (``scrfd_2.5g``, ``arcface_w600k_r50``, ``inswapper_128``, ``inswapper_128_fp16``, ``gfpgan_1.4``,
    ``hyperswap_1a_256``, ``xseg_1``, ``bisenet_resnet_34``, ``2dfan4``) to a value: ``gflops`` and
    ``weights_mb`` (all models; see ``graph.dummy_zero``), ``null`` (swappers and enhancer) and
    ``dynamic_batch`` (inswapper and enhancer). ``yunet``: a real YuNet file (``shared/models``),
    copied in as the manifest entry ``yunet`` (``detect.model=yunet``).
    """
    d = Path(dir)
    d.mkdir(parents=True, exist_ok=True)

    def cost(name: str) -> dict[str, float]:
        return {"gflops": float(_knob(gflops, name, 0.0)),
                "weights_mb": float(_knob(weights_mb, name, 0.0))}

    def batch_null(name: str) -> dict[str, bool]:
        return {"dynamic_batch": bool(_knob(dynamic_batch, name, False)),
                "null": bool(_knob(null, name, False))}

    builders = {
        "scrfd_2.5g": lambda p: make_scrfd(p, **cost("scrfd_2.5g")),
        "arcface_w600k_r50": lambda p: make_arcface(p, **cost("arcface_w600k_r50")),
        "inswapper_128": lambda p: make_inswapper(p, fp16=False, **batch_null("inswapper_128"),
                                                  **cost("inswapper_128")),
        "inswapper_128_fp16": lambda p: make_inswapper(p, fp16=True,
                                                       **batch_null("inswapper_128_fp16"),
                                                       **cost("inswapper_128_fp16")),
        "gfpgan_1.4": lambda p: make_gfpgan(p, **batch_null("gfpgan_1.4"), **cost("gfpgan_1.4")),
        "hyperswap_1a_256": lambda p: make_embedding_swapper(
            p, size=256, mode="identity" if _knob(null, "hyperswap_1a_256", False) else "source",
            **cost("hyperswap_1a_256")),
        "xseg_1": lambda p: make_xseg(p, **cost("xseg_1")),
        "bisenet_resnet_34": lambda p: make_bisenet(p, PARSER_CELLS, **cost("bisenet_resnet_34")),
        "2dfan4": lambda p: make_2dfan4(p, **cost("2dfan4")),
    }
    models: dict[str, dict] = {}
    for name, build in builders.items():
        path = d / FILES[name]
        build(path)
        meta = dict(_ENTRIES[name])
        entry = {
            "file": FILES[name],
            "sha256": sha256_file(path),
            "size": path.stat().st_size,
            "urls": [],
            "licence": "test stand-in",
        }
        entry.update(meta)
        models[name] = entry
    if yunet is not None:
        path = d / "face_detection_yunet.onnx"
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(Path(yunet).read_bytes())
        os.replace(tmp, path)
        models["yunet"] = {"file": path.name, "sha256": sha256_file(path), "size": path.stat().st_size,
                           "urls": [], "licence": "MIT (real OpenCV Zoo YuNet variant)",
                           "commercial_use": True, "contract": "detector-yunet", "template": None,
                           "input_size": 640, "precision": "fp32"}
    text = _dump_yaml({"version": 1, "models": models})
    tmp = d / "manifest.yaml.tmp"
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, d / "manifest.yaml")
    return models


