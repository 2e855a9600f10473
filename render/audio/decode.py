"""A voice track's audio read with ffmpeg: what ffprobe says of its first audio stream, and its
samples as FaceFusion reads them (48 kHz, two channels, int16; ``media.pcm_decode_args``)."""
from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass

import numpy as np

from ..errors import MediaError
from ..media.audio_args import pcm_decode_args
from ..media.ffprobe import as_float, as_int, run_ffprobe, stream_duration
from ..media.reader import reap, spawn

RATE = 48000
CHANNELS = 2


@dataclass(frozen=True)
class AudioFile:
    """An audio file's first audio stream: its channels and seconds (None: not said)."""

    path: str
    channels: int
    seconds: float | None


def probe_audio(path: str, what: str) -> AudioFile:
    """The first audio stream of ``path``; a MediaError naming ``what`` (the key that names the
    file) when it is missing or holds no audio ffmpeg can read."""
    if not os.path.isfile(path):
        raise MediaError(f"{what}: no such file")
    argv = ["ffprobe", "-v", "error", "-select_streams", "a:0", "-show_entries",
            "stream=channels,duration:stream_tags:format=duration", "-of", "json", path]
    done = run_ffprobe(argv, path)
    try:
        data = json.loads(done.stdout or "{}") if done.returncode == 0 else {}
    except ValueError:
        data = {}
    streams = data.get("streams") or []
    channels = as_int(streams[0].get("channels")) if streams else None
    if not channels:
        raise MediaError(f"{what}: not an audio file ffmpeg can read (it has no audio stream)")
    seconds = stream_duration(streams[0]) or as_float((data.get("format") or {}).get("duration"))
    return AudioFile(path, channels, seconds)


def read_pcm(path: str, start: float, what: str) -> np.ndarray:
    """(n, 2) int16: the first audio stream of ``path`` from ``start`` seconds at 48 kHz. The
    decoder's stderr is drained by a thread and it is always reaped; a decode that fails is a
    MediaError with its last line."""
    argv = pcm_decode_args(path, start=start, rate=RATE, channels=CHANNELS)
    proc, stderr = spawn(argv, "audio decoder", path, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE)
    try:
        data = proc.stdout.read()
        rc = proc.wait()
    finally:
        reap(proc)
        proc.stdout.close()
        stderr.join()
    if rc != 0:
        raise MediaError(f"{what}: cannot decode its audio: {stderr.last_line() or f'exit {rc}'}")
    usable = len(data) // (2 * CHANNELS) * (2 * CHANNELS)
    return np.frombuffer(data[:usable], np.int16).reshape(-1, CHANNELS)
