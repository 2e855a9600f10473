"""render: a reproducible face-swap video renderer."""

import os as _os

__version__ = "0.1.0"

# ONNX Runtime (1.3x) records telemetry in ~/.cache/Microsoft unless this is set before it is
# imported; the appliance writes nothing outside its output and caches.
_os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
