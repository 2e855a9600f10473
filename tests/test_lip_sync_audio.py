"""The lip syncer's audio chain (``render.audio``) against FaceFusion 3.8.1's own calls: the
windows, STFT, inverse STFT, FFT resampling and pre-emphasis against SciPy's functions; the mel
bank, the spectrogram, the log and each frame's slice against FaceFusion's ``audio.py`` written
out here with SciPy (its int16 index wrap and its 0/0 on silence shown, and not copied); the MDX
voice extraction against ``voice_extractor.py`` written out here, through a stand-in that keeps
the left channel; the decoder against samples written here. Nothing here calls the code under
test twice to get its expected values.
"""
from __future__ import annotations

import math
import wave
from fractions import Fraction
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import scipy.signal

from render.audio import dsp
from render.audio.decode import probe_audio, read_pcm
from render.audio.mel import MelFrames, dropped, log_mel, mel_bank, mel_spectrogram, \
    prepare_voice, slice_end, voice_log_mel
from render.audio.voice import VoiceExtractor
from render.errors import MediaError
from render.standins.lip_sync import make_voice_extractor


# -- FaceFusion 3.8.1, written out with SciPy ------------------------------------------------------
def ff_mel(voice: np.ndarray) -> np.ndarray:
    """``audio.py``: prepare_voice → create_spectrogram (80, columns) float64."""
    audio = scipy.signal.resample(voice, round(len(voice) * 16000 / 48000))
    audio = np.mean(audio, axis=1)
    audio = audio / np.max(np.abs(audio), axis=0)
    audio = scipy.signal.lfilter([1.0, -0.97], [1.0], audio)
    mels = np.linspace(2595 * np.log10(1 + 55.0 / 700), 2595 * np.log10(1 + 7600.0 / 700), 82)
    k = np.floor(801 * 700 * (10 ** (mels / 2595) - 1) / 16000).astype(np.int16)
    bank = np.zeros((80, 401))
    for i in range(80):
        bank[i, k[i]:k[i + 1]] = scipy.signal.windows.triang(k[i + 1] - k[i])
    return bank @ np.abs(scipy.signal.stft(audio, nperseg=800, nfft=800, noverlap=600)[2])


def ff_frames(spectrogram: np.ndarray, fps: float, index_dtype=np.int16) -> list[np.ndarray]:
    """``extract_audio_frames``, with its int16 cast (or another, to leave the wrap out)."""
    indices = np.arange(0, spectrogram.shape[1], 80 / fps).astype(index_dtype)
    return [spectrogram[:, max(0, i - 16):i] for i in indices[indices >= 16]]


def ff_prepare_frame(frame: np.ndarray) -> np.ndarray:
    """``lip_syncer.prepare_audio_frame`` before the model's own scaling."""
    x = np.maximum(np.exp(-5 * np.log(10)), frame)
    return (np.log10(x) * 1.6 + 3.2).clip(-4, 4).astype(np.float32)


def ff_extract(audio: np.ndarray, run, frames: int) -> np.ndarray:
    """``voice_extractor.batch_extract_voice(audio, 245760, 184320)``."""
    def extract(chunk: np.ndarray) -> np.ndarray:
        size, trim = (frames - 1) * 1024, 3840
        x = chunk.T
        step = size - 2 * trim
        pad = step - x.shape[1] % step
        x = np.pad(x.astype(np.float32) / np.iinfo(np.int16).max, ((0, 0), (trim, trim + pad)))
        rows = np.concatenate([x[:, i:i + size] for i in range(0, chunk.shape[0] + pad, step)])
        window = scipy.signal.windows.hann(7680)
        z = scipy.signal.stft(rows, nperseg=7680, noverlap=6656, window=window)[2]
        z = np.stack((z.real, z.imag), axis=-1).transpose((0, 3, 1, 2))
        z = z.reshape(-1, 2, 2, 3841, z.shape[-1]).reshape(-1, 4, 3841, z.shape[-1])[:, :, :3072]
        z /= np.sqrt(1.0 / window.sum() ** 2)
        y = np.pad(run(z), ((0, 0), (0, 0), (0, 3841 - 3072), (0, 0)))
        y = y.reshape(-1, 2, 3841, y.shape[-1]).transpose((0, 2, 3, 1))
        y = scipy.signal.istft(y[..., 0] + 1j * y[..., 1], nperseg=7680, noverlap=6656,
                               window=window)[1] * np.sqrt(1.0 / window.sum() ** 2)
        y = y.reshape((-1, 2, size))[:, :, trim:-trim].transpose(1, 0, 2)
        return y.reshape(2, -1)[:, :-pad].T

    total = np.zeros((audio.shape[0], 2), np.float32)
    count = np.zeros((audio.shape[0], 2), np.float32)
    for start in range(0, audio.shape[0], 184320):
        end = min(start + 245760, audio.shape[0])
        total[start:end] += extract(audio[start:end])
        count[start:end] += 1
    return total / count


def _voice(seconds: float, seed: int = 1) -> np.ndarray:
    """(n, 2) float32 at 48 kHz: noise whose loudness jumps every 10 ms (over 60 dB)."""
    rs = np.random.RandomState(seed)
    n = int(seconds * 48000)
    loud = 10 ** rs.uniform(-3, 0, n // 480 + 1)
    return (rs.randn(n, 2) * np.repeat(loud, 480)[:n, None] * 0.3).astype(np.float32)


# -- SciPy's functions --------------------------------------------------------------------------
def test_windows_stft_istft_resample_and_preemphasis_are_scipys():
    for n in (1, 2, 7, 8, 800, 7680):
        assert np.array_equal(dsp.hann(n, periodic=False), scipy.signal.windows.hann(n))
        assert np.allclose(dsp.hann(n, periodic=True), scipy.signal.get_window("hann", n),
                           atol=1e-15)
    for n in range(12):
        assert np.allclose(dsp.triang(n), scipy.signal.windows.triang(n), atol=1e-15)
    rs = np.random.RandomState(0)
    x = rs.randn(3, 5001)                     # not a whole number of hops: padded
    window = dsp.hann(800, periodic=True)
    ours = np.fft.rfft(dsp.stft_frames(x, 800, 200) * window, axis=-1) / window.sum()
    theirs = scipy.signal.stft(x, nperseg=800, noverlap=600)[2]
    assert np.abs(np.moveaxis(ours, -1, -2) - theirs).max() < 1e-12
    spectra = rs.randn(2, 401, 30) + 1j * rs.randn(2, 401, 30)
    sym = dsp.hann(800, periodic=False)
    expected = scipy.signal.istft(spectra, nperseg=800, noverlap=600, window=sym)[1] * \
        (1 / sym.sum())
    assert np.abs(dsp.istft(spectra, sym, 200) - expected).max() < 1e-12
    for n, num in ((48001, 16000), (48000, 16000), (1001, 334), (10, 21)):
        y = rs.randn(n, 2).astype(np.float32)
        ours = dsp.resample(y, num)
        assert ours.dtype == np.float32 and ours.shape == (num, 2)
        assert np.abs(ours - scipy.signal.resample(y, num)).max() < 5e-6
    y = rs.randn(100).astype(np.float32)
    assert np.array_equal(dsp.preemphasis(y), scipy.signal.lfilter([1.0, -0.97], [1.0], y))


# -- the mel chain -------------------------------------------------------------------------------
def test_the_mel_bank_is_one_triangle_per_interval_without_area_normalisation():
    bank = mel_bank()
    assert bank.shape == (80, 401)
    hz = 700 * (10 ** (np.linspace(2595 * math.log10(1 + 55 / 700),
                                   2595 * math.log10(1 + 7600 / 700), 82) / 2595) - 1)
    k = [math.floor(801 * f / 16000) for f in hz]
    assert (k[0], k[-1]) == (2, 380)
    for i in range(80):
        row = bank[i]
        width = k[i + 1] - k[i]
        assert np.count_nonzero(row) == width                   # one interval, not two
        assert np.all(row[:k[i]] == 0) and np.all(row[k[i + 1]:] == 0)
        if width:
            assert np.isclose(row.max(), 1.0 if width % 2 else 1 - 1 / width)   # no 2/(f2-f0)
    # librosa's slaney bank would overlap its neighbours: here each bin is in at most one filter
    assert (np.count_nonzero(bank, axis=0) <= 1).all()


def test_the_chain_gives_facefusions_mel_and_slices_at_every_frame_rate():
    voice = _voice(3.0) [:3 * 48000 + 123]
    theirs = ff_mel(voice)
    ours = mel_spectrogram(prepare_voice(voice))
    assert ours.shape == theirs.shape
    assert np.abs(ours - theirs).max() < 1e-6 * theirs.max()
    logged = log_mel(ours)
    for fps in (25.0, 24.0, 30.0, 30000 / 1001, 60.0, 1.0):
        frames = MelFrames(logged, fps)
        expected = ff_frames(theirs, fps)
        assert frames.frames() == len(expected), fps
        for i, slice_ in enumerate(expected):
            assert np.abs(frames.slice(i) - ff_prepare_frame(slice_)).max() < 1e-3, (fps, i)
        # past the track: silence's slice, -4 everywhere (FaceFusion's empty frame)
        assert (frames.slice(len(expected)) == -4).all() and (frames.slice(-1) == -4).all()


def test_the_frame_rule_drops_the_slices_before_column_16_and_never_wraps():
    """At 25 fps frame n's slice is [⌊3.2n⌋, ⌊3.2n⌋ + 16) (FaceFusion drops 0, 3, 6, 9, 12);
    6 are dropped at 30 fps, 5 at 24. Past 32767 columns (409.6 s) FaceFusion's int16 index
    wraps to the track's start; here it does not."""
    assert (dropped(25.0), dropped(30.0), dropped(24.0), dropped(60.0)) == (5, 6, 5, 12)
    columns = 60 * 80 * 10 + 1                  # a 10-minute track
    for n in (0, 1, 7, 100, 10238, 10239, 14995):
        end = slice_end(n, 25.0, columns)
        assert end - 16 == math.floor(Fraction(16, 5) * n)
    for fps in (Fraction(30000, 1001), Fraction(24)):
        d = dropped(float(fps))
        for n in (0, 5, 12345, 14000):
            exact = math.floor((n + d) * 80 / fps)
            assert slice_end(n, float(fps), columns) == exact
    assert slice_end(14995, 25.0, columns) == 48000 > 32767
    spectrogram = np.arange(columns, dtype=np.float64)[None].repeat(2, axis=0)
    wrapped = ff_frames(spectrogram, 25.0)                       # FaceFusion's int16
    kept = ff_frames(spectrogram, 25.0, index_dtype=np.int64)
    assert len(kept) == 14996 > len(wrapped)
    assert kept[14000][0, -1] == slice_end(14000, 25.0, columns) - 1 == 44815
    assert slice_end(14996, 25.0, columns) is None            # the track ends there


def test_a_silent_voice_gives_silences_slices_not_nan():
    silent = np.zeros((48000, 2), np.float32)
    with np.errstate(invalid="ignore"):
        assert np.isnan(ff_mel(silent)).all()                  # FaceFusion's 0 / 0
    logged = voice_log_mel(silent)
    assert np.isfinite(logged).all() and (logged == -4).all()
    frames = MelFrames(logged, 25.0)
    assert all((frames.slice(i) == -4).all() for i in range(frames.frames()))


# -- the voice extraction -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def extractor(tmp_path_factory):
    path = tmp_path_factory.mktemp("mdx") / "mdx.onnx"
    make_voice_extractor(path, frames=32)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])

    class Lazy:
        def __init__(self):
            self.session = session
            self.feeds = []

        def run(self, feeds):
            self.feeds.append(feeds)
            return session.run(None, feeds)
    return Lazy()


def test_the_voice_extraction_is_facefusions_windowed_mdx_pass(extractor):
    """Two windows overlapping (300000 samples): the stand-in keeps the first channel's real and
    imaginary parts, so the voice is the left channel (its inside exactly, up to the 19.2 kHz
    the model's 3072 bins reach) and the right is silent — a layout of ch0.re, ch1.re, ... or
    a lost window scaling would give neither."""
    n = 300000
    t = np.arange(n) / 48000
    audio = np.stack([np.sin(2 * np.pi * 440 * t) * 12000,
                      np.sin(2 * np.pi * 1000 * t) * 8000], axis=1).astype(np.int16)
    ours = VoiceExtractor(extractor, "mdx").extract(audio)
    fed = [f["input"] for f in extractor.feeds]
    assert len(fed) == 2 and all(f.shape[1:] == (4, 3072, 32) and f.dtype == np.float32
                                 for f in fed)
    theirs = ff_extract(audio, lambda z: z * np.array([1, 1, 0, 0]).reshape(1, 4, 1, 1), 32)
    assert ours.shape == (n, 2) and ours.dtype == np.float32
    assert np.abs(ours - theirs).max() < 1e-5
    # away from where a window cuts the track (its ends, the second window's start at 184320,
    # the first's end at 245760: the cut's spectrum above 19.2 kHz is lost there, and FaceFusion
    # averages the windows without a cross-fade)
    left = audio[:, 0] / 32767
    inside = np.r_[2000:182000, 187000:243000, 248000:n - 2000]
    assert np.abs(ours[inside, 0] - left[inside]).max() < 1e-3
    for cut in (184320, 245760):
        assert np.abs(ours[cut - 30:cut + 30, 0] - left[cut - 30:cut + 30]).max() > 1e-3
    assert np.abs(ours[:, 1]).max() == 0


# -- the decoder ------------------------------------------------------------------------------
def _wav(path: Path, samples: np.ndarray, rate: int) -> Path:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(samples.shape[1])
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(samples.astype("<i2").tobytes())
    return path


def test_the_decoder_reads_48k_stereo_int16_from_where_it_is_told(tmp_path):
    samples = (np.random.RandomState(3).randint(-20000, 20000, (48000, 2))).astype(np.int16)
    path = _wav(tmp_path / "v.wav", samples, 48000)
    assert np.array_equal(read_pcm(str(path), 0.0, "v"), samples)
    assert np.array_equal(read_pcm(str(path), 0.25, "v"), samples[12000:])
    info = probe_audio(str(path), "lip_sync.audio=v.wav")
    assert (info.channels, info.seconds) == (2, 1.0)
    mono = _wav(tmp_path / "m.wav", samples[:22050, :1], 22050)
    pcm = read_pcm(str(mono), 0.0, "m")
    assert pcm.shape == (48000, 2) and np.array_equal(pcm[:, 0], pcm[:, 1])
    (tmp_path / "t.txt").write_text("not audio")
    with pytest.raises(MediaError, match=r"^x: not an audio file ffmpeg can read"):
        probe_audio(str(tmp_path / "t.txt"), "x")
    with pytest.raises(MediaError, match=r"^y: no such file$"):
        probe_audio(str(tmp_path / "none.wav"), "y")
