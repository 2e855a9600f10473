"""Stand-ins for the production models and generated media, shared by the tests, the benchmark and
the demo (``scripts/make_demo.py``).

No real weights can be downloaded for the test suite or the benchmark, so these builders write tiny
ONNX graphs with the production files' exact I/O contracts (``shared/docs/models.md``):

``make_scrfd(path, *, gflops=0.0, weights_mb=0.0)``, ``make_arcface(...)``,
``make_inswapper(path, *, fp16=False, dynamic_batch=False, gflops=0.0, null=False, weights_mb=0.0)``,
``make_gfpgan(path, *, dynamic_batch=False, gflops=0.0, null=False, weights_mb=0.0)``
    one model file each (``models``);
``write_standins(dir, *, gflops=0.0, null=False, dynamic_batch=False, weights_mb=0.0, yunet=None)``
    all five files plus ``dir/manifest.yaml`` (entries named like the production models); returns
    the manifest's ``models`` mapping (``manifest``).

``render.standins.quality`` holds the mask and landmark stand-ins (xseg, bisenet, 2dfan4,
fan_68_5), each with an answer a test can predict.

``render.standins.media`` generates clips and images with faces the SCRFD stand-in finds, and reads
media back for checks. Every build is byte-deterministic: renders' bytes and job keys depend on it.
"""
from render.standins.manifest import FILES, write_standins
from render.standins.models import (ARCFACE_112_V2, STRIDES, make_arcface, make_gfpgan, make_inswapper,
                                    make_scrfd)

__all__ = [
    "ARCFACE_112_V2",
    "FILES",
    "STRIDES",
    "make_arcface",
    "make_gfpgan",
    "make_inswapper",
    "make_scrfd",
    "write_standins",
]
