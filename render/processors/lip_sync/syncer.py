"""What both lip syncers share: the voice (``lip_sync.audio`` or the target's own audio), its
whole track's log-mel once per render (``render.audio``), each crop's mel slice from its frame's
number, and the output's audio (``soundtrack``).

The crop is ffhq_512 at 512 px, as FaceFusion's. A frame's slice is a pure function of its
number in the target, the render's first frame and the frame rate (``audio.mel.MelFrames``),
so every segment, shard and resumed render gives a frame the same slice.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable

import numpy as np

from ...audio import MelCache, MelFrames, VoiceExtractor, VoiceTrack, track_log_mel
from ...audio.decode import probe_audio
from ...audio.mel import SILENCE
from ...errors import ModelError, UsageError
from ...files import sha256_file
from ...media.audio_args import Soundtrack
from ...model_handle import ProcessorModel
from ..base import FaceProcessor, Source, Timeline
from ..spec import Step
from . import EXTRACTOR, OFF

log = logging.getLogger(__name__)


class LipSyncer(FaceProcessor):
    """Base of the lip syncers: a subclass implements :meth:`sync` (crops, their mel slices and
    what else it asks of the stage → its results)."""

    template = "ffhq_512"
    size = 512
    needs_frame_numbers = True

    def __init__(self, step: Step, model: ProcessorModel) -> None:
        super().__init__(step, model)
        opts = step.options
        self.weight = float(opts["weight"])
        self.mix = opts["audio_mix"] == "mix"
        path = str(opts["audio"])
        #: the voice file (``lip_sync.audio``) and the SHA-256 of its bytes; None: the target's
        self.audio = probe_audio(path, f"lip_sync.audio={path}") if path else None
        self.audio_sha256 = sha256_file(path) if path else ""
        self.extractor, self.extractor_sha256 = self._extractor(str(opts["voice_extractor"]))
        self._lock = threading.Lock()
        self._track: tuple[Any, MelFrames] | None = None

    def _extractor(self, name: str) -> tuple[VoiceExtractor | None, str]:
        if name == OFF:
            return None, ""
        found = self.model.needs.get(name)
        assert found is not None, f"the loader did not load {name} (option_models)"
        if found.entry.contract != EXTRACTOR:
            raise ModelError(f"lip_sync.voice_extractor={name}: its contract is "
                             f"{found.entry.contract}, lip_sync.voice_extractor needs "
                             f"{EXTRACTOR} (or off)")
        return VoiceExtractor(found.lazy, name), found.entry.sha256

    @property
    def max_batch(self) -> int | None:
        """Any number of crops: each goes through the model with its own slice, one a call."""
        return None

    # -- the render's audio ------------------------------------------------------------------
    def files(self) -> dict[str, str]:
        return {"lip_sync.audio": self.audio_sha256} if self.audio is not None else {}

    def soundtrack(self) -> Soundtrack | None:
        if self.audio is None:
            return None
        return Soundtrack(self.audio.path, self.audio.channels, mix=self.mix)

    def record(self) -> dict[str, Any]:
        row = super().record()
        if self.audio is not None:
            row["audio_sha256"] = self.audio_sha256
        return row

    def check_timeline(self, timeline: Timeline) -> None:
        if timeline.image:
            raise UsageError("lip_sync follows a voice over time: it needs a video target, not "
                             "an image")
        if self.audio is None and timeline.audio_start is None:
            raise UsageError(f"lip_sync: target {timeline.target} has no audio: give the voice "
                             f"to follow with lip_sync.audio=FILE")

    def _voice(self, timeline: Timeline) -> VoiceTrack:
        if self.audio is not None:
            return VoiceTrack(self.audio.path, self.audio_sha256, 0.0,
                              f"lip_sync.audio={self.audio.path}")
        return VoiceTrack(timeline.target, timeline.sha256, timeline.audio_start or 0.0,
                          f"the audio of {timeline.target}")

    def mel_frames(self, timeline: Timeline) -> MelFrames:
        """The render's voice as mel slices: computed (or read from the cache) once, by the
        first segment that asks; each of its problems said once."""
        track = self._voice(timeline)
        key = (track, self.extractor_sha256, timeline.fps)
        with self._lock:
            if self._track is None or self._track[0] != key:
                mel = track_log_mel(track, self.extractor, self.extractor_sha256,
                                    MelCache(self.model.cache_dir))
                frames = MelFrames(mel, float(timeline.fps))
                self._warn(track, frames, timeline)
                self._track = (key, frames)
            return self._track[1]

    @staticmethod
    def _warn(track: VoiceTrack, frames: MelFrames, timeline: Timeline) -> None:
        if (frames.mel == SILENCE).all():
            log.warning("lip_sync: %s is silent: every mouth is closed", track.what)
            return
        voice = (frames.columns - 1) / 80.0
        video = timeline.frames / float(timeline.fps)
        if voice < video - 1 / float(timeline.fps):
            log.warning("lip_sync: %s lasts %.2f s, the video %.2f s: the mouths of its last "
                        "%d frames are closed (silence)", track.what, voice, video,
                        timeline.frames - frames.frames())

    # -- the call ----------------------------------------------------------------------------
    def bind_timeline(self, source: Source, timeline: Timeline) -> Callable[..., np.ndarray]:
        self.check_graph()
        frames = self.mel_frames(timeline)

        def run(crops: np.ndarray, *extras: np.ndarray) -> np.ndarray:
            *asked, numbers = extras        # (the landmarks a subclass asks for,) the numbers
            mels = np.stack([frames.slice(int(n) - timeline.first) for n in numbers])
            return self.sync(crops, mels, *asked)
        return run

    def check_graph(self) -> None:
        """A graph whose inputs are not its contract's is one clear line, before any frame."""

    def sync(self, crops: np.ndarray, mels: np.ndarray, *asked: np.ndarray) -> np.ndarray:
        raise NotImplementedError


def check_inputs(session: Any, name: str, contract: str, wanted: dict[str, list[int]]) -> None:
    """The graph's inputs are ``wanted`` (name → shape, the batch aside); else a ModelError."""
    have = {i.name: list(i.shape) for i in session.get_inputs()}

    def fits(got: list, shape: list[int]) -> bool:      # a symbolic side fits any
        return len(got) == len(shape) and all(not isinstance(g, int) or g == w
                                              for g, w in zip(got[1:], shape[1:]))
    bad = [n for n, shape in wanted.items() if n not in have or not fits(have[n], shape)]
    if bad:
        said = ", ".join(f"{n} {s}" for n, s in wanted.items())
        got = ", ".join(f"{n} {s}" for n, s in have.items())
        raise ModelError(f"model {name}: its inputs are {got}; a {contract} model takes {said}")
