"""The signal processing of FaceFusion's audio chain, in numpy, with SciPy's definitions (the
functions FaceFusion 3.8.1 calls, as SciPy 1.17 computes them): windows, the short-time Fourier
transform and its inverse, FFT resampling and the pre-emphasis filter.

Here rather than a call into SciPy: SciPy is not among render's dependencies (the GPU image does
not carry it), and these few formulas are all the chain takes of it. ``tests/test_lip_sync.py``
holds each against SciPy's own function.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def hann(n: int, *, periodic: bool) -> np.ndarray:
    """float64 (n,): ``scipy.signal.windows.hann(n, sym=not periodic)`` — 0.5 + 0.5·cos over
    linspace(−π, π) of n points (symmetric) or of n + 1 with the last dropped (periodic, what
    ``get_window('hann', n)`` gives)."""
    if n <= 1:
        return np.ones(n)
    m = n + 1 if periodic else n
    w = 0.5 + 0.5 * np.cos(np.linspace(-np.pi, np.pi, m))
    return w[:n]


def triang(n: int) -> np.ndarray:
    """float64 (n,): ``scipy.signal.windows.triang(n)``, the triangle whose ends are not 0."""
    if n <= 1:
        return np.ones(n)
    k = np.arange(1, (n + 1) // 2 + 1)
    if n % 2 == 0:
        w = (2 * k - 1.0) / n
        return np.r_[w, w[::-1]]
    w = 2 * k / (n + 1.0)
    return np.r_[w, w[-2::-1]]


def stft_frames(x: np.ndarray, nperseg: int, hop: int) -> np.ndarray:
    """The segments ``scipy.signal.stft`` transforms, along the last axis of ``x``: ``x``
    extended by nperseg/2 zeros at each end (``boundary='zeros'``), then by as many zeros as
    make whole segments (``padded=True``): (..., segments, nperseg), a view."""
    half = nperseg // 2
    width = [(0, 0)] * (x.ndim - 1)
    x = np.pad(x, [*width, (half, half)])
    extra = (-(x.shape[-1] - nperseg) % hop) % nperseg
    if extra:
        x = np.pad(x, [*width, (0, extra)])
    return sliding_window_view(x, nperseg, axis=-1)[..., ::hop, :]


def istft(spectra: np.ndarray, window: np.ndarray, hop: int) -> np.ndarray:
    """``scipy.signal.istft`` of one-sided spectra (..., bins, segments) made with
    ``stft_frames``, the FFTs unscaled (SciPy's ``spectrum`` scaling and FaceFusion's
    multiplication by the window's sum cancel): each segment's inverse FFT windowed and added
    up, divided by the summed squared window where it is not tiny, the nperseg/2 extension cut
    from each end."""
    nperseg = len(window)
    segments = spectra.shape[-1]
    pieces = np.fft.irfft(spectra, n=nperseg, axis=-2)          # (..., nperseg, segments)
    win = window.astype(pieces.dtype)
    length = nperseg + (segments - 1) * hop
    out = np.zeros((*spectra.shape[:-2], length), pieces.dtype)
    norm = np.zeros(length, pieces.dtype)
    for k in range(segments):
        out[..., k * hop:k * hop + nperseg] += pieces[..., k] * win
        norm[k * hop:k * hop + nperseg] += win * win
    half = nperseg // 2
    out, norm = out[..., half:-half], norm[half:-half]
    return out / np.where(norm > 1e-10, norm, 1.0).astype(pieces.dtype)


def resample(x: np.ndarray, num: int) -> np.ndarray:
    """``scipy.signal.resample(x, num)`` of real ``x`` along axis 0: its one-sided FFT cut (or
    padded) to ``num`` samples' bins, the unpaired bin at m/2 doubled when shrinking (halved when
    growing), the inverse FFT scaled by num / n. Keeps float32 as float32."""
    n = x.shape[0]
    m = min(num, n)
    spectrum = np.fft.rfft(x, axis=0)[:m // 2 + 1]
    if m % 2 == 0 and num != n:
        spectrum[m // 2] *= 2 if num < n else 0.5
    return np.fft.irfft(spectrum / (n / num), n=num, axis=0)


def preemphasis(x: np.ndarray, coefficient: float = -0.97) -> np.ndarray:
    """``scipy.signal.lfilter([1, coefficient], [1], x)``: y[n] = x[n] + coefficient·x[n−1],
    in float64."""
    x = np.asarray(x, np.float64)
    y = x.copy()
    y[1:] += coefficient * x[:-1]
    return y
