"""The manifest contracts of the models that find and know faces: the detectors
(:mod:`.detect`) and the embedder (:mod:`.embed`). Light on purpose: the manifest checks entries
against them without importing ONNX Runtime."""

DETECTORS = ("detector-scrfd", "detector-retinaface", "detector-yunet", "detector-yoloface")
EMBEDDERS = ("embedder-arcface",)
