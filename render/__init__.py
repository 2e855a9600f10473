"""render: a reproducible face-swap video renderer."""

import os as _os

__version__ = "0.1.0"

# ONNX Runtime (1.3x) records telemetry in ~/.cache/Microsoft unless this is set before it is
# imported; the appliance writes nothing outside its output and caches.
_os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

# numpy's OpenBLAS starts one worker thread per core when it is loaded, and they spin after each
# call; the renderer's matrix work is 2x3 affines and a few landmarks, never worth a second thread,
# and on the cores that ffmpeg needs the spinning cost 0.9 CPU-ms per 720p frame (perf, null
# models, 2 cores: the render process 7.8 -> 6.9 CPU-ms per frame; outputs bit-identical).
# Must be set before numpy is first imported; a value the user set is kept.
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
