"""The voice a student uploads for the lip syncer (the form's ``voice`` file): an audio file, or a
video with sound, that the renderer reads as ``lip_sync.audio``.

It streams in with the other uploads (:func:`render.web.uploads.receive`: the same size limit per
file, the same disk checks) and is checked before anything is stored, each refusal one line
(422): a container outside :data:`FORMATS` (ffprobe is told to open no other: a playlist or a
concat list naming other files never gets opened), no audio stream ffmpeg can read (the lip
syncer's own probe, ``render.audio.decode.probe_audio``), longer than the class's clip limit, or
a target that is a picture (there is no mouth to move in time). It is then stored in the job's
folder as ``voice.EXT`` (the extension of the container ffprobe found, never the uploaded name).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..audio.decode import probe_audio
from ..errors import MediaError
from ..media.ffprobe import run_ffprobe
from .errors import Refused
from .uploads import ReceivedFile

#: ffprobe's demuxer → the stored extension: the audio files phones and recorders make, and
#: the video containers a target may come in (their sound is the voice)
FORMATS = {"wav": ".wav", "mp3": ".mp3", "flac": ".flac", "ogg": ".ogg", "aac": ".aac",
           "amr": ".amr", "mov": ".m4a", "matroska": ".mka", "avi": ".avi"}
NAMES = "wav, mp3, m4a, aac, flac, ogg, opus, amr, or a video with sound (mp4, mov, mkv, webm, avi)"


@dataclass
class Voice:
    """A checked voice upload: :meth:`store` moves it into the job's folder."""

    upload: ReceivedFile
    ext: str
    seconds: float | None
    path: Path | None = None

    def store(self, folder: Path) -> list[tuple[str, str, Path, int, dict[str, Any]]]:
        """Move the file into ``folder``; its row for the job's files (role, name, path, bytes,
        more for the job's record)."""
        self.path = folder / f"voice{self.ext}"
        os.replace(self.upload.path, self.path)
        seconds = None if self.seconds is None else round(self.seconds, 3)
        return [("voice", self.upload.name, self.path, self.upload.bytes, {"seconds": seconds})]


def container(path: Path) -> str | None:
    """The first name of the demuxer ffprobe opens ``path`` with, among :data:`FORMATS` only
    (None: none of them reads it)."""
    argv = ["ffprobe", "-v", "error", "-format_whitelist", ",".join(FORMATS),
            "-protocol_whitelist", "file", "-show_entries", "format=format_name", "-of", "json",
            str(path)]
    done = run_ffprobe(argv, str(path))
    try:
        data = json.loads(done.stdout or "{}") if done.returncode == 0 else {}
    except ValueError:
        return None
    name = str((data.get("format") or {}).get("format_name") or "").split(",")[0]
    return name if name in FORMATS else None


def check_voice(upload: ReceivedFile, target_is_image: bool, max_seconds: float) -> Voice:
    """The voice upload checked (Refused 422 with one line)."""
    what = f"the voice {upload.name!r}"
    if upload.bytes == 0:
        raise Refused(422, f"{what} is empty")
    if target_is_image:
        raise Refused(422, f"{what}: the lips move to a voice only in a video: upload a video "
                           f"as the target, or leave the voice out")
    name = container(upload.path)
    if name is None:
        raise Refused(422, f"{what} is not an audio file this renderer can read: upload {NAMES}")
    try:
        audio = probe_audio(str(upload.path), what)
    except MediaError:
        raise Refused(422, f"{what} has no sound this renderer can read: upload {NAMES}") from None
    if audio.seconds is not None and audio.seconds > max_seconds:
        raise Refused(422, f"{what} is {audio.seconds:.1f} s long: the class limit is "
                           f"{max_seconds:g} s (cut it shorter)")
    return Voice(upload, FORMATS[name], audio.seconds)
