"""A model session for tests of one processor call at a time: a CPU session that records each
call's feeds, so a test can compare what a model was given with values it computes itself."""
from __future__ import annotations

from pathlib import Path

import onnxruntime as ort

from render.sessions import LazySession


class RecordingSession(LazySession):
    """A CPU session that records what it was fed."""

    def __init__(self, path: Path) -> None:
        super().__init__(lambda: ort.InferenceSession(str(path),
                                                      providers=["CPUExecutionProvider"]))
        self.feeds: list[dict] = []

    def run(self, feeds):
        self.feeds.append(feeds)
        return super().run(feeds)
