"""The lip syncer: each selected face's mouth moved to a voice (FaceFusion's ``lip_syncer``):
Wav2Lip redraws the lower half of the face's landmark box at 96 px from the frame's 0.2 s of
the voice's mel spectrogram; EDTalk redraws the whole face at 256 px. The voice is a file
(``lip_sync.audio``) or the target's own audio, with its voice taken out of the music and
noise first (``lip_sync.voice_extractor``); with a file, the output's audio is that file (or
the file over the target's audio). It runs where ``processors`` names it.

This module is the processor's declaration; the classes live beside it (``syncer.py``, the
common part: the voice, its mel and each frame's slice; ``wav2lip.py``, ``edtalk.py``); the
audio chain is ``render.audio``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ...options import option, precision_option
from ..spec import Processor

#: ``lip_sync.voice_extractor``'s word for no extraction
OFF = "off"
#: what the output's audio is with ``lip_sync.audio``
MIXES = ("replace", "mix")
#: the contract of the models ``lip_sync.voice_extractor`` names
EXTRACTOR = "voice-extractor-mdx"
#: the contracts whose models take a voice (its mel, or the track): no faces alone calibrate them
VOICE_CONTRACTS = ("lip-sync-wav2lip", "lip-sync-edtalk", EXTRACTOR)
_KEYED = "unless-default"


@dataclass(frozen=True)
class LipSync:
    model: str = option("wav2lip_gan_96", "lip syncer: wav2lip_gan_96 or wav2lip_96 (Wav2Lip "
                        "redraws the lower face at 96 px; non-commercial), edtalk_256 (EDTalk "
                        "redraws the face at 256 px)", keyed=_KEYED)
    precision: str = precision_option("the lip syncer's")
    weight: float = option(0.5, "FaceFusion's lip syncer weight: Wav2Lip's mel input is "
                           "multiplied by 2 x weight (0.5 leaves it as it is, 0 closes the "
                           "mouth), EDTalk takes it as its weight input", min=0.0, max=1.0,
                           keyed=_KEYED)
    audio: str = option("", "the voice the mouths follow: an audio (or video) file ffmpeg "
                        "reads, from its start at the output's first frame; its bytes enter the "
                        "job key, not its path; empty: the target's own audio", keyed="never")
    audio_mix: str = option("replace", "the output's audio with lip_sync.audio: replace (that "
                            "file alone) or mix (it over the target's audio, each at half "
                            "level); cut or padded with silence to the video's length",
                            choices=MIXES, keyed=_KEYED)
    voice_extractor: str = option("kim_vocal_2", "the model that takes the voice out of the "
                                  "music and noise before its mel (voice-extractor-mdx "
                                  "contract: kim_vocal_1, kim_vocal_2, uvr_mdxnet; FaceFusion "
                                  "always extracts); off: the track as it is", keyed=_KEYED)


def option_models(options: Mapping[str, Any]) -> tuple[str, ...]:
    """The voice extractor ``lip_sync.voice_extractor`` names (none when off)."""
    name = str(options["voice_extractor"])
    return () if name == OFF else (name,)


def landmark_uses(section: LipSync) -> list[str]:
    """Wav2Lip's mouth box and lower-face mask are placed by each face's 68 landmarks (the
    section cannot tell an EDTalk model, which needs none, from its name)."""
    return [f"lip_sync.model={section.model}"]


_HERE = "render.processors.lip_sync"

PROCESSOR = Processor("lip_sync", LipSync, drivers={
    "lip-sync-wav2lip": f"{_HERE}.wav2lip:Wav2LipSyncer",
    "lip-sync-edtalk": f"{_HERE}.edtalk:EdTalkSyncer",
}, helpers=(EXTRACTOR,), landmarks=landmark_uses, option_models=option_models)
