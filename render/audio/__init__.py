"""A voice as a lip syncer takes it, FaceFusion 3.8.1's audio chain (its voice extractor and
``audio.py``): the track decoded at 48 kHz (``decode``), its voice kept by an MDX-Net model
(``voice``), resampled to 16 kHz and turned into an 80-band log-mel with FaceFusion's own filter
bank and STFT scaling (``mel``, on the numpy versions of SciPy's functions in ``dsp``), each
video frame's 16-column slice chosen by its number and the frame rate (``mel.MelFrames``), the
whole track's columns computed once per render and kept on disk (``track``)."""
from __future__ import annotations

from .mel import MelFrames
from .track import MelCache, VoiceTrack, track_log_mel
from .voice import VoiceExtractor

__all__ = ["MelCache", "MelFrames", "VoiceExtractor", "VoiceTrack", "track_log_mel"]
