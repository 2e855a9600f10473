"""A voice track's whole log-mel, once per render: decoded, its voice extracted (when a voice
extractor is on), through the mel chain (``mel``) and kept on disk, keyed by the SHA-256 of the
audio's bytes, where it starts, and the extractor's SHA-256, like the source embeddings'
cache. Every segment, shard and resumed render of the render reads the same columns."""
from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .decode import read_pcm
from .mel import MELS, voice_log_mel
from .voice import VoiceExtractor

log = logging.getLogger(__name__)

#: bumped when the chain computes other values: older cache files are then left unread
CHAIN_VERSION = 1


@dataclass(frozen=True)
class VoiceTrack:
    """Where a render's voice comes from: an audio (or video) file, the SHA-256 of its bytes,
    the seconds of it at the output's first frame, and how messages name it."""

    path: str
    sha256: str
    start: float
    what: str


def cache_key(track: VoiceTrack, extractor_sha256: str) -> str:
    """The name of the track's cached log-mel: a hash of everything its columns depend on."""
    text = json.dumps({"audio": track.sha256, "start": round(track.start, 6),
                       "extractor": extractor_sha256, "chain": CHAIN_VERSION}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


class MelCache:
    """Log-mels on disk (``cache_dir/voice``), float32 (80, columns)."""

    def __init__(self, cache_dir: Path) -> None:
        self.dir = Path(cache_dir) / "voice"

    def path(self, key: str) -> Path:
        return self.dir / f"{key[:48]}.npy"

    def load(self, key: str) -> np.ndarray | None:
        try:
            value = np.load(self.path(key), allow_pickle=False)
        except (OSError, ValueError):
            return None
        if value.ndim != 2 or value.shape[0] != MELS or value.dtype != np.float32 \
                or not np.isfinite(value).all():
            log.warning("ignoring damaged cache file %s", self.path(key))
            return None
        return value

    def store(self, key: str, value: np.ndarray) -> None:
        path = self.path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            with open(tmp, "wb") as f:
                np.save(f, value)
            os.replace(tmp, path)
        except OSError as exc:
            log.warning("cannot write cache file %s: %s", path, exc)


def track_log_mel(track: VoiceTrack, extractor: VoiceExtractor | None,
                  extractor_sha256: str, cache: MelCache) -> np.ndarray:
    """(80, columns) float32: the track's log-mel, from the cache or computed and stored."""
    key = cache_key(track, extractor_sha256 if extractor is not None else "off")
    cached = cache.load(key)
    if cached is not None:
        return cached
    audio = read_pcm(track.path, track.start, track.what)
    if extractor is not None:
        log.info("extracting the voice of %s (%.1f s) with %s", track.what,
                 audio.shape[0] / 48000, extractor.name)
        voice = extractor.extract(audio)
    else:
        voice = audio.astype(np.float32) / np.float32(32767)
    mel = voice_log_mel(voice)
    cache.store(key, mel)
    return mel
