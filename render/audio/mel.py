"""FaceFusion's voice → mel chain after the voice extraction (3.8.1 ``audio.py``), and its rule
for which mel slice a video frame gets (``extract_audio_frames``), without its two defects: no
NaN for a silent voice, no int16 wrap after 409.6 s.

1. ``prepare_voice``: the 48 kHz voice FFT-resampled to 16 kHz (round(N/3) samples), the mean
   of its two channels, divided by its largest magnitude (a silent voice stays all zeros), then
   pre-emphasised (y[n] = x[n] − 0.97·x[n−1]).
2. ``mel_spectrogram``: the STFT with an 800-sample periodic Hann window, hop 200 (80 columns a
   second, column c centred on sample 200c), SciPy's zero extension and padding and its
   ``spectrum`` scaling (the FFT divided by the window's sum, 400); its magnitude through
   FaceFusion's own 80-filter bank (``mel_bank``: one triangle per interval between 82 points
   equally spaced in mel from 55 to 7600 Hz, no area normalisation): (80, columns).
3. ``log_mel``: max(x, 1e-5) → 1.6·log10 + 3.2 → clipped to −4..4 → float32, what FaceFusion's
   lip syncer does to each slice (element by element, so once for the whole track here). A
   silent or missing slice is −4 everywhere.
4. ``MelFrames``: frame i (counted from the output's first frame) ends at column
   e = ⌊(i + d)·80/fps⌋, d the number of leading multiples of 80/fps below 16 (5 at 25 fps, 6
   at 30): its slice is columns [e − 16, e); past the track it is silence's.
"""
from __future__ import annotations

import math

import numpy as np

from .dsp import hann, preemphasis, resample, stft_frames, triang

VOICE_RATE = 48000
MEL_RATE = 16000
N_FFT = 800
HOP = 200
MELS = 80
FMIN, FMAX = 55.0, 7600.0
#: the columns of one frame's slice (0.2 s)
SLICE = 16
#: the columns a second (the sample rate over the hop)
COLUMNS_PER_SECOND = MEL_RATE // HOP
#: FaceFusion's floor under the mel before its log: numpy.exp(-5·ln 10)
FLOOR = float(np.exp(-5 * np.log(10)))
#: the value of every element of a silent (or missing) slice after log_mel
SILENCE = -4.0
#: frames of the STFT transformed at once (bounds the memory of a long track)
_CHUNK = 4096


def prepare_voice(voice: np.ndarray) -> np.ndarray:
    """(n, 2) float32 voice at 48 kHz → (round(n/3),) float64 at 16 kHz, mono, at most 1 in
    magnitude, pre-emphasised. All-zero in, all-zero out (FaceFusion divides 0 by 0)."""
    num = round(voice.shape[0] * MEL_RATE / VOICE_RATE)
    if num == 0:
        return np.zeros(0)
    x = np.mean(resample(voice, num), axis=1)
    peak = np.max(np.abs(x))
    if peak > 0:
        x = x / peak
    return preemphasis(x)


def hertz_to_mel(hertz: float) -> float:
    return 2595 * np.log10(1 + hertz / 700)


def mel_to_hertz(mel: np.ndarray) -> np.ndarray:
    return 700 * (10 ** (mel / 2595) - 1)


def mel_bank() -> np.ndarray:
    """(80, 401) float64: filter i is ``triang(k[i+1] − k[i])`` over FFT bins [k[i], k[i+1]),
    k = ⌊801·hz(m)/16000⌋ for 82 mel points m from 55 to 7600 Hz."""
    points = np.linspace(hertz_to_mel(FMIN), hertz_to_mel(FMAX), MELS + 2)
    k = np.floor((N_FFT + 1) * mel_to_hertz(points) / MEL_RATE).astype(np.int64)
    bank = np.zeros((MELS, N_FFT // 2 + 1))
    for i in range(MELS):
        bank[i, k[i]:k[i + 1]] = triang(int(k[i + 1] - k[i]))
    return bank


def mel_spectrogram(x: np.ndarray) -> np.ndarray:
    """(80, columns) float64: the mel filter bank over the STFT magnitude of ``x`` (16 kHz)."""
    window = hann(N_FFT, periodic=True)
    frames = stft_frames(np.asarray(x, np.float64), N_FFT, HOP)
    bank = mel_bank()
    out = np.empty((MELS, frames.shape[0]))
    for a in range(0, frames.shape[0], _CHUNK):
        spectrum = np.fft.rfft(frames[a:a + _CHUNK] * window, axis=-1) / window.sum()
        out[:, a:a + _CHUNK] = bank @ np.abs(spectrum).T
    return out


def log_mel(mel: np.ndarray) -> np.ndarray:
    """FaceFusion's ``prepare_audio_frame`` before the model's own scaling: float32."""
    x = np.maximum(FLOOR, mel)
    return (np.log10(x) * 1.6 + 3.2).clip(-4, 4).astype(np.float32)


def voice_log_mel(voice: np.ndarray) -> np.ndarray:
    """(80, columns) float32: the whole chain after the extraction, for a (n, 2) 48 kHz voice."""
    return log_mel(mel_spectrogram(prepare_voice(voice)))


def dropped(fps: float) -> int:
    """d: how many of the multiples k·80/fps FaceFusion drops for ending before column 16."""
    step = COLUMNS_PER_SECOND / fps
    d = 0
    while int(d * step) < SLICE:
        d += 1
    return d


def slice_end(index: int, fps: float, columns: int) -> int | None:
    """The column after frame ``index``'s slice (the output's frame ``index``, 0 its first), or
    None where the track has no slice for it: FaceFusion's ``numpy.arange(0, columns, 80/fps)``
    truncated to whole columns, the first ``dropped(fps)`` left out, in int64 (no wrap)."""
    step = COLUMNS_PER_SECOND / fps
    k = index + dropped(fps)
    if index < 0 or k >= math.ceil(columns / step):
        return None
    return int(k * step)


class MelFrames:
    """The whole track's log-mel (80, columns) and the frame rate: each frame's slice."""

    def __init__(self, log_mel_columns: np.ndarray, fps: float) -> None:
        self.mel = log_mel_columns
        self.fps = float(fps)

    @property
    def columns(self) -> int:
        return self.mel.shape[1]

    def slice(self, index: int) -> np.ndarray:
        """(80, 16) float32: the output's frame ``index``'s slice; silence's past the track."""
        end = slice_end(index, self.fps, self.columns)
        if end is None:
            return np.full((MELS, SLICE), SILENCE, np.float32)
        return self.mel[:, end - SLICE:end]

    def frames(self) -> int:
        """How many frames, from the first, have a slice of the track."""
        step = COLUMNS_PER_SECOND / self.fps
        return max(0, math.ceil(self.columns / step) - dropped(self.fps))
