"""FaceFusion's voice extraction (3.8.1 ``voice_extractor.py``): an MDX-Net model (kim_vocal_1,
kim_vocal_2, uvr_mdxnet) keeps the voice of a 48 kHz stereo track and drops the rest (music,
noise), so that the mouths follow the words only.

The track goes through in windows of 245760 samples every 184320 (the last one cut at the
end); each sample's voice is the plain mean of the windows that cover it. A window:

1. ``prepare``: its two channels / 32767 (float32), cut into chunks of C = (the model input's
   last side − 1)·1024 samples every C − 2·3840, padded with 3840 zeros before and 3840 + P
   after (P = step − n mod step, 1..step) — rows [ch0, ch1, ch0, ch1, …];
2. ``decompose``: each row's STFT (symmetric Hann of 7680, hop 1024, SciPy's zero extension,
   the FFT unscaled), its real and imaginary parts as channels (ch0.re, ch0.im, ch1.re,
   ch1.im), the first 3072 bins: the model's ``input`` (K, 4, 3072, 256) float32;
3. the model's first output, the same shape;
4. ``compose``: the bins zero-padded back to 3841, the inverse STFT;
5. each chunk's 3840 samples cut from both ends, the chunks joined, the P padding cut:
   (n, 2) float32 in ±1.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ModelError
from ..model_handle import Session
from .dsp import hann, istft, stft_frames

WINDOW = 240 * 1024
WINDOW_HOP = 180 * 1024
TRIM = 3840
N_FFT = 7680
HOP = 1024
BINS = 3072
INT16_MAX = 32767


def chunk_size(session: Any, name: str) -> int:
    """C for the model: (its input's last side − 1)·1024 (FaceFusion reads it from the graph);
    a graph of another shape is one clear line."""
    inp = session.get_inputs()[0]
    shape = list(inp.shape)
    if len(shape) != 4 or not isinstance(shape[3], int) or shape[1:3] != [4, BINS]:
        raise ModelError(f"voice extractor {name}: its input {inp.name} is {shape}, a voice "
                         f"extractor (MDX-Net) takes (K, 4, {BINS}, frames)")
    return (shape[3] - 1) * HOP


class VoiceExtractor:
    """One MDX-Net model's session: :meth:`extract` keeps a track's voice."""

    def __init__(self, lazy: Session, name: str) -> None:
        self.lazy = lazy
        self.name = name
        self.window = hann(N_FFT, periodic=False).astype(np.float32)

    def extract(self, audio: np.ndarray) -> np.ndarray:
        """(n, 2) int16 at 48 kHz → (n, 2) float32: its voice, window by window."""
        size = chunk_size(self.lazy.session, self.name)
        total = np.zeros(audio.shape, np.float32)
        count = np.zeros(audio.shape, np.float32)
        for start in range(0, audio.shape[0], WINDOW_HOP):
            end = min(start + WINDOW, audio.shape[0])
            total[start:end] += self._window(audio[start:end], size)
            count[start:end] += 1
        return total / count

    def _window(self, audio: np.ndarray, size: int) -> np.ndarray:
        rows, pad = prepare(audio, size)
        feeds = {self.lazy.session.get_inputs()[0].name: self.decompose(rows)}
        return normalize(self.compose(self.lazy.run(feeds)[0]), size, pad)

    def decompose(self, rows: np.ndarray) -> np.ndarray:
        """(2K, C) float32 → (K, 4, 3072, frames) float32."""
        frames = stft_frames(rows, N_FFT, HOP) * self.window          # (2K, frames, 7680)
        spectra = np.fft.rfft(frames, axis=-1).transpose(0, 2, 1)      # (2K, 3841, frames)
        parts = np.stack([spectra.real, spectra.imag], axis=1)         # (2K, 2, 3841, frames)
        parts = parts.reshape(-1, 4, N_FFT // 2 + 1, parts.shape[-1])
        return np.ascontiguousarray(parts[:, :, :BINS], np.float32)

    def compose(self, output: np.ndarray) -> np.ndarray:
        """The model's (K, 4, 3072, frames) → (2K, C) float32."""
        output = np.asarray(output, np.float32)
        padded = np.pad(output, ((0, 0), (0, 0), (0, N_FFT // 2 + 1 - BINS), (0, 0)))
        parts = padded.reshape(-1, 2, N_FFT // 2 + 1, padded.shape[-1])
        return istft(parts[:, 0] + 1j * parts[:, 1], self.window, HOP).astype(np.float32)


def prepare(audio: np.ndarray, size: int) -> tuple[np.ndarray, int]:
    """(n, 2) int16 → (2K, C) float32 rows and the padding P."""
    step = size - 2 * TRIM
    pad = step - audio.shape[0] % step
    x = audio.T.astype(np.float32) / INT16_MAX
    x = np.pad(x, ((0, 0), (TRIM, TRIM + pad)))
    chunks = [x[:, i:i + size] for i in range(0, audio.shape[0] + pad, step)]
    return np.concatenate(chunks, axis=0), pad


def normalize(rows: np.ndarray, size: int, pad: int) -> np.ndarray:
    """(2K, C) → (n, 2): the chunks' inner samples joined, the padding cut."""
    chunks = rows.reshape(-1, 2, size)[:, :, TRIM:-TRIM].transpose(1, 0, 2)
    return chunks.reshape(2, -1)[:, :-pad].T
