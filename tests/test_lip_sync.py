"""The lip syncer (``processors=...,lip_sync``): Wav2Lip's crop (the 68 points' box, warped
non-uniformly onto 96 px, its lower half blacked out), its mel input scaled by 2·weight and its
lower-face mask; EDTalk's RGB input, weight and bicubic way back; each frame's mel slice from its
number, across segments, shards and resumes; the output's audio (the voice file alone or over the
target's, cut and padded to the video, in sync); the shipped entries; the report row; one line
for each bad input.

The stand-ins (``render.standins.lip_sync``) write their mel input's mean into the mouth (the
blue of Wav2Lip's lower half, the red of EDTalk's); every expected value is computed here from
FaceFusion's formulas (``test_lip_sync_audio``'s SciPy chain on the voice's own samples), not by
the code under test.
"""
from __future__ import annotations

import json
import subprocess
import sys
import wave
from fractions import Fraction
from pathlib import Path

import cv2
import numpy as np
import pytest
import yaml

from render.faces.align import estimate, template_points
from render.faces.mask import paste_masks
from render.faces.types import Face
from render.files import sha256_file
from render.model_handle import ModelEntry, ProcessorModel
from render.processors.base import Source, Timeline
from render.processors.lip_sync import PROCESSOR
from render.processors.lip_sync.edtalk import EdTalkSyncer
from render.processors.lip_sync.wav2lip import Wav2LipSyncer
from render.report import report_path
from render import standins
from render.standins import media, quality
from render.standins.lip_sync import make_edtalk, make_wav2lip, write_lip_sync_models
from render.standins.readback import probe_counts, read_frames

from conftest import run_cli
from recording import RecordingSession
from schedules import on_every_schedule
from test_lip_sync_audio import _voice, ff_frames, ff_mel, ff_prepare_frame

FACE = (300, 170, 128)             # the clip's face: centre and side
#: a patch of the mouth: where the lower-face hull and the lower half of the 68 points' box
#: overlap (the stand-in landmarks' mouth, between the nose's base and the chin)
MOUTH = (slice(201, 208), slice(297, 304))


def _wav(path: Path, samples: np.ndarray) -> Path:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(48000)
        w.writeframes(samples.astype("<i2").tobytes())
    return path


def _samples(seconds: float, seed: int = 1) -> np.ndarray:
    return (_voice(seconds, seed) * 32767).clip(-32767, 32767).astype(np.int16)


def expected_slices(samples: np.ndarray, fps: float = 25.0) -> list[np.ndarray]:
    """Each frame's log-mel slice by FaceFusion's formulas (no voice extraction: the int16
    samples / 32767), its index in int64."""
    return [ff_prepare_frame(s) for s in ff_frames(ff_mel(samples.astype(np.float32) / 32767),
                                                    fps, np.int64)]


def level(mel: np.ndarray) -> int:
    """What the stand-ins write for a mel input: (mean + 4) / 8 in 0..1, ×255 truncated."""
    return int(np.clip((np.mean(mel, dtype=np.float64) + 4) / 8, 0, 1) * 255)


# -- the processors, one call at a time -----------------------------------------------------------
def _processor(tmp: Path, kind: type, voice: Path, cache: Path | None = None, **options):
    path = tmp / f"{kind.__name__}.onnx"
    (make_wav2lip if kind is Wav2LipSyncer else make_edtalk)(path)
    contract = "lip-sync-wav2lip" if kind is Wav2LipSyncer else "lip-sync-edtalk"
    entry = ModelEntry(name="syncer", file=path.name, sha256=sha256_file(path), size=None,
                       urls=(), licence="test", commercial_use=False, contract=contract,
                       template="ffhq_512", input_size=96 if kind is Wav2LipSyncer else 256)
    step = PROCESSOR.step("syncer", audio=str(voice), voice_extractor="off", **options)
    return kind(step, ProcessorModel(entry, path, RecordingSession(path), cache or tmp / "cache"))


def _placed_face(seed: int, shape=(217, 333)) -> tuple[np.ndarray, Face]:
    """An odd-sized flat frame and a face placed by perturbed points: rotated, scaled, its 68
    points (the stand-in estimator's face) and 5 points each moved by up to 1.5 px."""
    rs = np.random.RandomState(seed)
    frame = np.full((*shape, 3), (70, 110, 150), np.uint8)
    theta, scale = np.deg2rad(9.0), 0.33
    rot = scale * np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
    kps = template_points("ffhq_512", 512) @ rot.T + (80.0, 10.0)
    landmarks = quality.FACE_68 * 512 @ rot.T + (80.0, 10.0)
    face = Face(box=np.array([0, 0, 1, 1], np.float32),
                kps=(kps + rs.uniform(-1.5, 1.5, kps.shape)).astype(np.float32), score=1.0,
                landmarks=(landmarks + rs.uniform(-1.5, 1.5, landmarks.shape)).astype(np.float32))
    return frame, face


def _run_stage(proc, frame: np.ndarray, face: Face, number: int, fps: float = 25.0) -> np.ndarray:
    from render.face_stage import ChainStep, FaceStage

    timeline = Timeline(target="t", sha256="", fps=Fraction(fps), first=0, frames=30,
                        audio_start=None)
    run = proc.bind_timeline(Source(np.ones(512, np.float32), lambda: pytest.fail("source")),
                             timeline)
    step = ChainStep(proc, run, paste_masks("box", 512, 0.0, 0.0))
    out = frame.copy()
    FaceStage(detector=None, select=lambda f, found: found, chain=[step]).swap(
        [out], [(0, face)], numbers=[number])
    return out


def test_wav2lip_gets_the_landmark_box_lower_half_blacked_bgr_and_the_mel_times_2_weight(tmp_path):
    samples = _samples(1.2)
    voice = _wav(tmp_path / "v.wav", samples)
    proc = _processor(tmp_path, Wav2LipSyncer, voice, weight=0.7)
    assert proc.files() == {"lip_sync.audio": sha256_file(voice)}        # the job key's
    frame, face = _placed_face(2)
    out = _run_stage(proc, frame, face, 9)
    fed = proc.lazy.feeds[-1]
    # the mel: frame 9's slice by FaceFusion's rule, × 2 · 0.7
    want = expected_slices(samples)[9]
    assert fed["source"].shape == (1, 1, 80, 16) and fed["source"].dtype == np.float32
    assert np.abs(fed["source"][0, 0] - want * np.float32(1.4)).max() < 1e-3
    # the crop: the 68 points' box of the ffhq_512 crop onto 96 × 96 (non-uniform), BGR / 255
    m = estimate(face.kps, "ffhq_512", 512)
    crop = cv2.warpAffine(frame, m, (512, 512), flags=cv2.INTER_LINEAR,
                          borderMode=cv2.BORDER_REPLICATE)
    points = face.landmarks @ m[:, :2].T + m[:, 2]
    (x1, y1), (x2, y2) = points.min(axis=0), points.max(axis=0)
    box = cv2.getAffineTransform(np.float32([[x1, y1], [x2, y1], [x1, y2]]),
                                 np.float32([[0, 0], [96, 0], [0, 96]]))
    assert abs(box[0, 0] / box[1, 1] - (y2 - y1) / (x2 - x1)) < 1e-4    # non-uniform
    mouth = cv2.warpAffine(crop, box, (96, 96), flags=cv2.INTER_LINEAR)
    target = fed["target"][0].transpose(1, 2, 0) * 255
    assert target.shape == (96, 96, 6)
    assert np.abs(target[:48, :, :3] - mouth[:48]).max() < 1e-3 and (target[48:, :, :3] == 0).all()
    assert np.abs(target[..., 3:] - mouth).max() < 1e-3
    assert tuple(np.rint(target[70, 48, 3:])) == (70, 110, 150)           # BGR, not flipped
    # in the frame: the mouth's blue is the slice's level, where the lower-face area is whole
    hull = cv2.convexHull(face.landmarks[[3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 35, 34, 33, 32,
                                           31]].astype(np.int32))
    inside = np.zeros(frame.shape[:2], np.uint8)
    cv2.fillConvexPoly(inside, hull, 1)
    deep = cv2.erode(inside, np.ones((9, 9), np.uint8)).astype(bool)
    lower = (np.mgrid[:217, :333][0] > (face.landmarks[:, 1].min() + face.landmarks[:, 1].max())
             / 2 + 3)
    assert (deep & lower).sum() > 40
    blue = out[..., 0][deep & lower]
    assert np.abs(blue.astype(int) - level(want * np.float32(1.4))).max() <= 1
    assert np.array_equal(out[..., 1:][deep & lower], frame[..., 1:][deep & lower])
    grown = cv2.dilate(inside, np.ones((25, 25), np.uint8)).astype(bool)
    assert np.array_equal(out[~grown], frame[~grown])                    # the mask bounds it


def test_edtalk_gets_the_crop_as_rgb_at_256_its_weight_and_the_unscaled_mel(tmp_path):
    samples = _samples(1.2)
    voice = _wav(tmp_path / "v.wav", samples)
    proc = _processor(tmp_path, EdTalkSyncer, voice, weight=0.35)
    frame, face = _placed_face(3)
    out = _run_stage(proc, frame, face, 4)
    fed = proc.lazy.feeds[-1]
    want = expected_slices(samples)[4]
    assert np.abs(fed["source"][0, 0] - want).max() < 1e-3               # not × 2·weight
    assert fed["weight"].tolist() == [np.float32(0.35)] and fed["weight"].dtype == np.float32
    m = estimate(face.kps, "ffhq_512", 512)
    crop = cv2.warpAffine(frame, m, (512, 512), flags=cv2.INTER_LINEAR,
                          borderMode=cv2.BORDER_REPLICATE)
    small = cv2.resize(crop, (256, 256), interpolation=cv2.INTER_AREA)
    assert fed["target"].shape == (1, 3, 256, 256)
    assert np.abs(fed["target"][0].transpose(1, 2, 0) * 255 - small[..., ::-1]).max() < 1e-3
    # the lower half of the crop: red = 0.35 · level, back through BGR and the bicubic resize
    inner = np.array([[256, 400]], np.float32)                          # crop pixels
    x, y = (inner @ cv2.invertAffineTransform(m)[:, :2].T + cv2.invertAffineTransform(m)[:, 2])[0]
    patch = out[int(y) - 1:int(y) + 2, int(x) - 1:int(x) + 2]
    red = int(np.clip(0.35 * (np.mean(want, dtype=np.float64) + 4) / 8, 0, 1) * 255)
    assert np.abs(patch[..., 2].astype(int) - red).max() <= 1
    assert np.abs(patch[..., :2].astype(int) - (70, 110)).max() <= 1


# -- the output's audio and the decoder, as ffmpeg arguments -----------------------------------
def test_the_soundtrack_and_decode_arguments():
    from render.media.audio_args import Soundtrack, pcm_decode_args, soundtrack_args
    from render.media.probe import AudioStream, MediaInfo
    from render.media.segment_args import assemble_args

    target = MediaInfo(path="t.mp4", kind="video", width=64, height=48, fps=Fraction(25),
                       rotation=0, pix_fmt="yuv420p", frame_count=30, duration=1.2,
                       audio=(AudioStream(2, "aac", 2, 44100, 1.2),
                              AudioStream(3, "aac", 6, 48000)))
    track = Soundtrack("v.flac", 1, seconds=1.2, target_start=0.5)
    replace = soundtrack_args(target, track, "out.mp4", 1)
    assert replace.inputs == ["-t", "1.2", "-i", "v.flac"] and replace.maps == ["-map", "1:a:0"]
    assert replace.outputs == ["-filter:a:0", "apad=whole_dur=1.2", "-c:a:0", "aac", "-b:a:0",
                               "192k"]
    mix = soundtrack_args(target, Soundtrack("v.flac", 2, True, 1.2, 0.5), "out.webm", 1)
    assert mix.inputs == ["-t", "1.2", "-i", "v.flac", "-ss", "0.5", "-t", "1.2", "-i", "t.mp4"]
    graph = mix.outputs[mix.outputs.index("-filter_complex") + 1]
    assert graph == ("[1:a:0]apad=whole_dur=1.2[voice];[2:2]apad=whole_dur=1.2[target];"
                     "[target][voice]amix=inputs=2:duration=first:dropout_transition=0[mixed]")
    assert mix.maps == ["-map", "[mixed]"] and mix.outputs[-4:] == ["-c:a:0", "libopus",
                                                                     "-b:a:0", "128k"]
    silent = MediaInfo(**{**target.__dict__, "audio": ()})
    argv = assemble_args(silent, "concat.txt", "out.mp4", final_name="out.mp4", concat=True,
                         soundtrack=Soundtrack("v.flac", 2, True, 1.2))
    maps = [b for a, b in zip(argv, argv[1:]) if a == "-map"]
    assert "amix" not in " ".join(argv) and maps == ["0:v:0", "1:a:0"]   # no target audio
    assert "+bitexact" in argv[argv.index("-flags:a") + 1]       # audio from the soundtrack
    assert pcm_decode_args("v.flac", start=2.5) == [
        "ffmpeg", "-hide_banner", "-nostdin", "-loglevel", "error", "-ss", "2.5", "-i", "v.flac",
        "-map", "0:a:0", "-vn", "-sn", "-dn", "-acodec", "pcm_s16le", "-ar", "48000", "-ac", "2",
        "-f", "s16le", "pipe:1"]


# -- through the CLI ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lip-sync-render")
    models = tmp / "models"
    standins.write_standins(models)
    write_lip_sync_models(models, frames=32)
    quality.make_fan_68_5(models / "fan_68_5.onnx")
    doc = yaml.safe_load((models / "manifest.yaml").read_text())
    doc["models"]["fan_68_5"] = {"file": "fan_68_5.onnx", "licence": "test",
                                 "sha256": sha256_file(models / "fan_68_5.onnx"),
                                 "commercial_use": False, "contract": "landmarker-fan-68-5",
                                 "template": None, "input_size": 5}
    (models / "manifest.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    media.make_source_image(tmp / "source.png")
    clip = media.make_clip(tmp / "clip.mp4", width=640, height=360, seconds=1.2,
                           faces=lambda i: [FACE])
    voices = {"voice": _samples(1.2), "short": _samples(0.4, seed=2),
              "silent": np.zeros((48000, 2), np.int16)}
    for name, samples in voices.items():
        _wav(tmp / f"{name}.wav", samples)
    return tmp, models, clip, voices


def _render(world, name: str, *keys: str, target: Path | None = None, code: int = 0,
            command: tuple[str, ...] = ()):
    tmp, models, clip, _ = world
    out = tmp / "out" / name
    r = run_cli(*command, "profile=low", f"source={tmp / 'source.png'}",
                f"target={target or clip.path}", f"output={out}", f"models.dir={models}",
                f"cache_dir={tmp / 'cache'}", "lock.device=none", "progress=off",
                "execution.providers=cpu", *keys)
    assert r.returncode == code, r.stderr
    return out, r


LOSSLESS = ("encode.codec=ffv1", "encode.pix_fmt=bgr0")


def test_every_frame_gets_its_own_mel_slice_across_segments(world):
    """Lossless output in three segments: each frame's mouth is the level of the slice
    FaceFusion's rule gives its number — off by one frame it would not be (asserted too)."""
    tmp, _, clip, voices = world
    out, r = _render(world, "frames/clip.mkv", "processors=lip_sync", *LOSSLESS,
                     f"lip_sync.audio={tmp / 'voice.wav'}", "lip_sync.voice_extractor=off",
                     "lip_sync.weight=0.7", "segment.seconds=0.5")
    report = json.loads(report_path(out).read_text())
    assert len(report["segments"]) == 3 and "lip_sync" not in r.stderr
    slices = expected_slices(voices["voice"])
    want = [level(s * np.float32(1.4)) for s in slices] + [0] * (clip.frame_count - len(slices))
    got = [int(np.median(f[MOUTH][..., 0])) for f in read_frames(out)]
    assert len(got) == clip.frame_count == 30 and len(slices) == 26     # the last d - 1 = 4
    assert max(abs(a - b) for a, b in zip(got, want)) <= 1, (got, want)
    shifted = sum(abs(a - b) > 2 for a, b in zip(got[1:26], want[:25]))
    assert shifted > 15                                   # one frame off shows on most frames


def test_the_voice_file_replaces_or_joins_the_audio_cut_padded_and_in_sync(world):
    tmp, _, clip, voices = world
    for mix, voice in (("replace", "voice"), ("mix", "voice"), ("replace", "short")):
        out, _ = _render(world, f"audio-{mix}-{voice}/clip.mp4", "processors=lip_sync",
                         f"lip_sync.audio={tmp / f'{voice}.wav'}", f"lip_sync.audio_mix={mix}",
                         "lip_sync.voice_extractor=off")
        counts = probe_counts(out)
        assert abs(counts.audio_duration - 1.2) < 0.03, (mix, voice, counts)
        heard = _decoded_audio(out)
        blocks = _loudness(heard)
        voice_blocks = _loudness(voices[voice].astype(np.float64).mean(axis=1) / 32767)
        n = min(len(voice_blocks), len(blocks)) - 2     # 10 ms blocks, lags of -20..20 ms
        lags = {lag: np.corrcoef(blocks[2 + lag:n + lag], voice_blocks[2:n])[0, 1]
                for lag in range(-2, 3)}
        others = max(v for lag, v in lags.items() if lag)
        assert lags[0] > 0.7 and lags[0] > others + 0.5, (mix, voice, lags)
        tone = _tone_share(heard, 440.0)              # the target's own audio: a 440 Hz sine
        assert (tone > 0.2) == (mix == "mix"), (mix, voice, tone)
        if voice == "short":              # padded with silence after the voice's 0.4 s
            assert np.abs(heard[int(0.5 * 48000):]).max() < 1e-3


def _decoded_audio(path: Path) -> np.ndarray:
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", str(path), "-vn", "-ac", "1", "-ar",
                          "48000", "-f", "f32le", "-"], capture_output=True, check=True).stdout
    return np.frombuffer(raw, np.float32)


def _loudness(x: np.ndarray) -> np.ndarray:
    """log RMS of each 10 ms block (the voice's loudness jumps at each)."""
    n = len(x) // 480
    return np.log10(np.sqrt((x[:n * 480].reshape(n, 480) ** 2).mean(axis=1)) + 1e-6)


def _tone_share(x: np.ndarray, hz: float) -> float:
    spectrum = np.abs(np.fft.rfft(x)) ** 2
    f = np.fft.rfftfreq(len(x), 1 / 48000)
    return float(spectrum[np.abs(f - hz) < 5].sum() / spectrum.sum())


def test_a_lip_sync_render_has_the_same_bytes_on_every_schedule(world):
    """The voice extracted (the stand-in MDX-Net), mixed over the target's audio: segments,
    lanes, shards and a resume give the same bytes (each computes or reads the same mel)."""
    tmp, _, _, _ = world
    out, rep = on_every_schedule(lambda folder, *keys, command=(): _render(
        world, f"{folder}/clip.mp4", "processors=swap,lip_sync",
        f"lip_sync.audio={tmp / 'voice.wav'}",
        "lip_sync.audio_mix=mix", "segment.seconds=0.5", *keys, command=command)[0])
    row = next(m for m in rep["models"] if m["role"] == "lip_sync")
    assert row["audio_mix"] == "mix" and row["audio_sha256"] == sha256_file(tmp / "voice.wav")
    assert [n["name"] for n in row["needs"]] == ["kim_vocal_2"]


def test_the_report_row_and_a_profile_line(world):
    tmp, _, _, _ = world
    out, _ = _render(world, "row/clip.mp4", "processors=swap,lip_sync", "lip_sync.weight=0.8")
    rows = json.loads(report_path(out).read_text())["models"]
    row = next(m for m in rows if m["role"] == "lip_sync")
    assert (row["name"], row["weight"]) == ("wav2lip_gan_96", 0.8) and "audio_sha256" not in row
    assert row["needs"][0]["role"] == "lip_sync-kim_vocal_2"
    assert [m["role"] for m in rows][2:4] == ["swap", "lip_sync"]
    assert any(m["name"] == "fan_68_5" for m in rows)             # wav2lip's 68 points
    profile = tmp / "lips.yaml"
    profile.write_text("processors: [swap, lip_sync]\nlip_sync:\n  model: edtalk_256\n"
                       "  weight: 0.3\n  voice_extractor: 'off'\n")
    out, _ = _render(world, "profile/clip.mp4", f"profile={profile}")
    rows = json.loads(report_path(out).read_text())["models"]
    assert [(m["role"], m["name"], m.get("weight")) for m in rows][2:4] == [
        ("swap", "inswapper_128", None), ("lip_sync", "edtalk_256", 0.3)]


def test_a_short_or_silent_voice_is_one_warning_and_closed_mouths(world):
    """Past the voice's end (0.4 s of 1.2) and all along a silent one, each frame gets
    silence's slice (−4 everywhere: a level of 0, FaceFusion's NaN left out); the render goes
    on, its audio padded with silence to the video's length."""
    tmp, _, _, voices = world
    out, r = _render(world, "short/clip.mkv", "processors=lip_sync", *LOSSLESS,
                     f"lip_sync.audio={tmp / 'short.wav'}", "lip_sync.voice_extractor=off")
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "short.wav lasts 0.40 s, the video 1.20 s: the mouths of its " \
        "last 24 frames are closed" in lines[0], r.stderr
    slices = expected_slices(voices["short"])
    got = [int(np.median(f[MOUTH][..., 0])) for f in read_frames(out)]
    assert len(slices) == 6 and got[6:] == [0] * 24
    assert max(abs(a - level(s)) for a, s in zip(got, slices)) <= 1 and max(got[:6]) > 20
    out, r = _render(world, "silent/clip.mkv", "processors=lip_sync", *LOSSLESS,
                     f"lip_sync.audio={tmp / 'silent.wav'}", "lip_sync.voice_extractor=off")
    assert r.stderr.strip().endswith("silent.wav is silent: every mouth is closed"), r.stderr
    assert [int(np.median(f[MOUTH][..., 0])) for f in read_frames(out)] == [0] * 30


def test_a_ten_minute_voice_works_past_409_6_seconds(world, tmp_path):
    """A 10-minute voice: the render of the 1.2 s clip takes its start (its audio cut to 1.2 s);
    the frames past 409.6 s (32767 columns, where FaceFusion's int16 index wraps) get the
    columns FaceFusion's formula gives them in int64 (read from the mel the render cached)."""
    tmp, models, _, _ = world
    samples = _samples(600.0, seed=5)
    long = _wav(tmp_path / "long.wav", samples)
    out, _ = _render(world, "long/clip.mp4", "processors=lip_sync", f"lip_sync.audio={long}",
                     "lip_sync.voice_extractor=off")
    assert abs(probe_counts(out).audio_duration - 1.2) < 0.03
    proc = _processor(tmp_path, Wav2LipSyncer, long, cache=tmp / "cache")    # the render's
    frames = proc.mel_frames(Timeline(target="t", sha256="", fps=Fraction(25), first=0,
                                      frames=15000, audio_start=None))
    spectrogram = ff_mel(samples.astype(np.float32) / 32767)
    expected = ff_frames(spectrogram, 25.0, np.int64)
    wrapped = ff_frames(spectrogram, 25.0)
    assert frames.frames() == len(expected) == 14996
    for n in (0, 10234, 10236, 12000, 14995):            # 10236: the first past column 32767
        assert np.abs(frames.slice(n) - ff_prepare_frame(expected[n])).max() < 1e-3, n
    assert len(wrapped) < 10236 or not np.array_equal(wrapped[10236], expected[10236])


@pytest.mark.parametrize("keys,code,words", [
    (("lip_sync.weight=1.5",), 2, "lip_sync.weight"),
    (("processors=swap,lip_sync,lip_sync",), 2, "lip_sync is named twice"),
    (("lip_sync.audio_mix=blend",), 2, "lip_sync.audio_mix"),
    (("lip_sync.audio={tmp}/source.png",), 3, "source.png: not an audio file ffmpeg can read"),
    (("lip_sync.audio={tmp}/none.wav",), 3, "none.wav: no such file"),
    (("lip_sync.voice_extractor=edtalk_256",), 4, "its contract is lip-sync-edtalk, "
                                                  "lip_sync.voice_extractor needs"),
    (("target={tmp}/mute.mp4",), 2, "has no audio: give the voice to follow with lip_sync.audio"),
    (("target={tmp}/face.png", "output={tmp}/out/bad-image/face.png"), 2, "needs a video target"),
])
def test_each_bad_input_is_one_line_and_nothing_is_written(world, keys, code, words):
    tmp, _, _, _ = world
    if not (tmp / "mute.mp4").exists():
        media.make_clip(tmp / "mute.mp4", width=320, height=180, seconds=0.4, audio=False)
        media.make_image_target(tmp / "face.png", width=333, height=217)
    keys = tuple(k.format(tmp=tmp) for k in keys)
    name = f"bad-{abs(hash(keys))}/clip.mp4"
    out, r = _render(world, name, "processors=swap,lip_sync", *keys, code=code)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], r.stderr
    for folder in (out.parent, tmp / "out" / "bad-image"):
        assert not folder.exists() or list(folder.iterdir()) == []


def test_a_voice_model_is_not_calibrated_to_int8_on_faces(world):
    tmp, models, _, _ = world
    for name in ("wav2lip_gan_96", "kim_vocal_2"):
        r = run_cli("models", "convert", name, "int8", f"models.dir={models}",
                    f"cache_dir={tmp / 'cache'}")
        assert r.returncode == 2 and r.stderr.strip().splitlines() == [
            f"render: error: model {name} takes a voice, which int8 calibration's faces do not "
            f"give: convert it to fp16, or run it at fp32"], r.stderr
    assert not list(models.glob("*int8*"))


# -- the shipped entries and the counted cost ------------------------------------------------------
def test_the_shipped_entries_are_facefusions_unpinned_files(tmp_path):
    from render.models.manifest import load_manifest

    shipped = {e.name: e for e in load_manifest(tmp_path / "none")}
    bases = {"wav2lip_96": "3.0.0", "wav2lip_gan_96": "3.0.0", "edtalk_256": "3.3.0",
             "kim_vocal_1": "3.4.0", "kim_vocal_2": "3.0.0", "uvr_mdxnet": "3.4.0"}
    for name, base in bases.items():
        e = shipped[name]
        assert (e.file, e.sha256, e.confirmed) == (f"{name}.onnx", "", False)
        assert e.urls == (f"https://github.com/facefusion/facefusion-assets/releases/download/"
                          f"models-{base}/{name}.onnx",
                          f"https://huggingface.co/facefusion/models-{base}/resolve/main/"
                          f"{name}.onnx")
    assert {shipped[n].contract for n in ("wav2lip_96", "wav2lip_gan_96")} == {"lip-sync-wav2lip"}
    assert (shipped["edtalk_256"].contract, shipped["edtalk_256"].input_size) == (
        "lip-sync-edtalk", 256)
    assert {shipped[n].contract for n in ("kim_vocal_1", "kim_vocal_2", "uvr_mdxnet")} == {
        "voice-extractor-mdx"}
    assert [n for n, e in shipped.items() if e.commercial_use and n in bases] == [
        "edtalk_256", "uvr_mdxnet"]
    defaults = PROCESSOR.defaults()
    assert (defaults["weight"], defaults["voice_extractor"]) == (0.5, "kim_vocal_2")
    r = run_cli("models", "list", f"models.dir={tmp_path / 'models'}")
    rows = [ln for ln in r.stdout.splitlines() if ln.split(" ", 1)[0] in bases]
    assert len(rows) == 6 and all("not pinned yet" in ln for ln in rows), r.stdout


def test_the_counted_cost_of_wav2lip_is_its_published_size_and_prints():
    from bench.lip_sync_costs import PUBLISHED_PARAMS, wav2lip

    count = wav2lip()
    assert round(count.params / 1e6, 2) == PUBLISHED_PARAMS["wav2lip"]
    # the face encoder's first layer alone: 7·7·6·16 MACs at each of 96·96 pixels
    assert count.macs > 7 * 7 * 6 * 16 * 96 * 96 and 3.5e9 < count.macs < 4.5e9
    r = subprocess.run([sys.executable, "-m", "bench.lip_sync_costs"], capture_output=True,
                       text=True, cwd=Path(__file__).resolve().parents[1], timeout=60)
    assert r.returncode == 0 and f"{count.macs / 1e9:9.2f}" in r.stdout, r.stderr
