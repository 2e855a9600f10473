"""probe / FrameReader / FrameWriter against real ffmpeg, on tiny generated clips."""
from __future__ import annotations

import _thread
import os
import shutil
import subprocess
import threading
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from render.errors import MediaError, RenderFailed
from render.media import (
    AtomicOutput,
    EncodeSettings,
    FrameReader,
    FrameWriter,
    MediaInfo,
    decode_args,
    decoded_size,
    encode_args,
    ensure_output_dir,
    image_encode_args,
    probe,
)

pytestmark = pytest.mark.skipif(shutil.which("ffmpeg") is None or shutil.which("ffprobe") is None,
                                reason="ffmpeg/ffprobe not installed")

W, H = 64, 48
FAST = EncodeSettings(codec="libx264", crf=23, preset="ultrafast")


def ff(*args: str) -> None:
    subprocess.run(["ffmpeg", "-hide_banner", "-nostdin", "-loglevel", "error", "-y", *map(str, args)],
                   check=True, capture_output=True)


def src(rate: str = "25", duration: float = 2.0, size: str = f"{W}x{H}") -> list[str]:
    return ["-f", "lavfi", "-i", f"testsrc2=size={size}:rate={rate}:duration={duration}"]


def sine(duration: float = 2.0) -> list[str]:
    return ["-f", "lavfi", "-i", f"sine=frequency=440:sample_rate=48000:duration={duration}"]


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("media")
    m = {k: d / v for k, v in dict(
        c25="c25.mp4", c2997="c2997.mp4", flac="flac.mkv", rot="rot.mp4", png="face.png",
        c709="c709.mp4", corrupt="corrupt.mp4", wav="tone.wav",
    ).items()}
    ff(*src("25"), *sine(), "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p",
       "-c:a", "aac", "-shortest", m["c25"])
    ff(*src("30000/1001", 1.0), *sine(1.0), "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p",
       "-c:a", "aac", "-shortest", m["c2997"])
    ff(*src("25"), *sine(), "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p",
       "-c:a", "flac", "-shortest", m["flac"])
    ff("-i", m["c25"], "-c", "copy", "-metadata:s:v:0", "rotate=90", m["rot"])
    ff(*src("1", 1.0), "-frames:v", "1", m["png"])
    ff(*src("25", 1.0), "-vf", "scale=out_color_matrix=bt709:out_range=tv", "-c:v", "libx264",
       "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-colorspace", "bt709", "-color_primaries", "bt709",
       "-color_trc", "bt709", m["c709"])
    m["corrupt"].write_bytes(b"\x00\x00\x00\x18ftypmp42" + os.urandom(4096))
    ff(*sine(1.0), m["wav"])
    return m


def reaped(pid: int) -> bool:
    """True when ``pid`` is not a zombie child of ours (it was waited for)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def decode_all(info: MediaInfo, **kw) -> list[np.ndarray]:
    w, h = decoded_size(info, kw.get("scale_height"))
    with FrameReader(decode_args(info, **kw), w, h) as frames:
        return [f for f in frames]


def render(info: MediaInfo, out: Path, *, trim=None, video: EncodeSettings = FAST) -> int:
    """decode -> (identity) -> encode into ``out`` through AtomicOutput; returns frames written."""
    ensure_output_dir(out)
    w, h = decoded_size(info)
    with AtomicOutput(out) as target:
        argv = encode_args(info, target.tmp_path, width=w, height=h, fps=info.fps, video=video, trim=trim)
        with FrameReader(decode_args(info, trim=trim), w, h, buffers=3) as frames, \
                FrameWriter(argv, target.tmp_path, width=w, height=h) as enc:
            for frame in frames:
                enc.write(frame)
            n = enc.frames_written
        target.commit()
    return n


def no_partials(directory: Path) -> bool:
    return not [p for p in directory.iterdir() if ".part" in p.name]


# ---------------------------------------------------------------------------------- probe

def test_probe_25fps_with_audio(media):
    info = probe(media["c25"])
    assert info.kind == "video" and (info.width, info.height) == (W, H)
    assert info.fps == Fraction(25) and isinstance(info.fps, Fraction)
    assert info.frame_count == 50 and info.duration == pytest.approx(2.0, abs=0.05)
    assert info.rotation == 0 and info.pix_fmt == "yuv420p" and "mp4" in info.container
    assert len(info.audio) == 1
    a = info.audio[0]
    assert (a.codec, a.channels, a.sample_rate, a.index) == ("aac", 1, 48000, 1)
    assert a.duration == pytest.approx(2.0, abs=0.05)


def test_probe_ntsc_rate(media):
    info = probe(media["c2997"])
    assert info.fps == Fraction(30000, 1001)
    assert info.frame_count == 30


def test_probe_mkv_estimates_frame_count(media):
    info = probe(media["flac"])
    assert info.fps == Fraction(25) and info.frame_count == 50
    assert info.audio[0].codec == "flac"


def test_probe_rotated_swaps_size(media):
    info = probe(media["rot"])
    if info.rotation == 0:
        pytest.skip("this ffmpeg cannot write a rotation with -metadata:s:v rotate=90")
    assert info.rotation in (90, 270)
    assert (info.width, info.height) == (H, W)
    frames = decode_all(info)
    assert len(frames) == 50 and frames[0].shape == (W, H, 3)


def test_probe_image(media):
    info = probe(media["png"])
    assert info.kind == "image" and info.frame_count == 1 and info.audio == ()
    frames = decode_all(info)
    assert len(frames) == 1 and frames[0].shape == (H, W, 3)


def test_probe_missing(tmp_path):
    with pytest.raises(MediaError, match="target not found: .*nope.mp4"):
        probe(tmp_path / "nope.mp4")


def test_probe_corrupt(media):
    with pytest.raises(MediaError) as e:
        probe(media["corrupt"])
    msg = str(e.value)
    assert msg.startswith(f"cannot read video {media['corrupt']}: ") and "\n" not in msg
    assert e.value.exit_code == 3


def test_probe_audio_only(media):
    with pytest.raises(MediaError, match="no video stream"):
        probe(media["wav"])


def test_probe_with_times_is_probe_plus_frame_times_in_one_run(media, tmp_path):
    """One ffprobe start instead of two; the same MediaInfo and FrameTimes, truncated files too."""
    from render.media.probe import probe_with_times
    from render.media.timing import frame_times

    cut = tmp_path / "cut.mp4"
    ff("-i", media["c25"], "-c", "copy", "-movflags", "+faststart", tmp_path / "fast.mp4")
    data = (tmp_path / "fast.mp4").read_bytes()
    cut.write_bytes(data[:int(len(data) * 0.6)])
    for path in (media["c25"], media["c2997"], media["flac"], media["rot"], media["png"], cut):
        info, times = probe_with_times(path)
        assert info == probe(path)
        assert times == frame_times(info), path
    assert probe_with_times(cut)[1].readable < probe_with_times(cut)[1].count
    for bad, match in ((media["corrupt"], "cannot read video"), (media["wav"], "no video stream"),
                       (tmp_path / "nope.mp4", "target not found")):
        with pytest.raises(MediaError, match=match):
            probe_with_times(bad)


def test_probe_cache_answers_for_the_same_content_only(media, tmp_path, monkeypatch):
    """ffprobe's answer is kept under the file's SHA-256: a copy of the file (another path, same
    bytes) is answered from the cache with its own path, changed bytes are probed again, and a
    damaged cache file is probed again and replaced."""
    import importlib

    from render.files import sha256_file

    probe_mod = importlib.import_module("render.media.probe")   # render.media.probe is also a function

    cache = tmp_path / "cache"
    runs: list[str] = []
    real_run = probe_mod.run_ffprobe

    def counted(argv, path):
        runs.append(path)
        return real_run(argv, path)

    monkeypatch.setattr(probe_mod, "run_ffprobe", counted)

    def cached_probe(path):
        return probe_mod.probe_with_times(path, cache_dir=cache, content_sha256=lambda: sha256_file(path))

    first = cached_probe(media["c25"])
    assert len(runs) == 1 and len(list((cache / "probe").iterdir())) == 1
    copy = tmp_path / "copy.mp4"
    shutil.copyfile(media["c25"], copy)
    info, times = cached_probe(copy)
    assert len(runs) == 1                                   # no ffprobe run
    assert info == probe(copy) and info.path == str(copy) and times == first[1]
    changed = tmp_path / "changed.mp4"
    shutil.copyfile(media["c2997"], changed)
    assert cached_probe(changed)[0] == probe(changed) and len(runs) == 2
    for f in (cache / "probe").iterdir():
        f.write_bytes(b"not gzip")
    assert cached_probe(copy) == (info, times) and len(runs) == 3
    assert cached_probe(copy) == (info, times) and len(runs) == 3   # rewritten, read back
    with pytest.raises(MediaError, match="target not found"):  # checked before it is hashed
        cached_probe(tmp_path / "nope.mp4")
    probe_mod.probe_with_times(copy)                         # no cache asked for: ffprobe runs
    assert len(runs) == 4


# ---------------------------------------------------------------------------------- reader

def test_reader_frames_and_reaping(media):
    info = probe(media["c25"])
    r = FrameReader(decode_args(info), W, H)
    with r:
        frames = list(r)
    assert len(frames) == 50 and frames[0].dtype == np.uint8 and frames[0].shape == (H, W, 3)
    assert not np.shares_memory(frames[0], frames[1])
    assert r.returncode == 0 and reaped(r.proc.pid)


def test_reader_buffer_ring(media):
    info = probe(media["c25"])
    with FrameReader(decode_args(info), W, H, buffers=2) as r:
        ids = [id(f) for f in r]
    assert len(ids) == 50 and len(set(ids)) == 2


def test_reader_trim_and_scale(media):
    info = probe(media["c25"])
    frames = decode_all(info, trim=(0.5, 1.5), scale_height=24)
    assert len(frames) == 25
    assert frames[0].shape == (24, 32, 3)


def test_reader_corrupt_raises_media_error(media):
    fake = MediaInfo(path=str(media["corrupt"]), kind="video", width=W, height=H, fps=Fraction(25),
                     rotation=0, pix_fmt="yuv420p", frame_count=10, duration=1.0)
    r = FrameReader(decode_args(fake), W, H)
    with pytest.raises(MediaError) as e:
        with r:
            list(r)
    assert str(media["corrupt"]) in str(e.value) and "\n" not in str(e.value)
    assert reaped(r.proc.pid)


def test_reader_truncated_frame(media):
    info = probe(media["c25"])
    r = FrameReader(decode_args(info), W + 1, H)  # 50 frames do not divide into 65x48 frames
    with pytest.raises(RenderFailed, match="truncated frame"):
        with r:
            list(r)
    assert reaped(r.proc.pid)


def test_reader_keyboard_interrupt_in_loop_reaps(media):
    info = probe(media["c25"])
    r = FrameReader(decode_args(info), W, H)
    with pytest.raises(KeyboardInterrupt):
        with r:
            for i, _ in enumerate(r):
                if i == 3:
                    raise KeyboardInterrupt
    assert r.proc.poll() is not None and reaped(r.proc.pid)


def test_reader_keyboard_interrupt_while_reading_endless_stream():
    argv = ["ffmpeg", "-hide_banner", "-nostdin", "-loglevel", "error", "-f", "lavfi", "-i",
            f"testsrc2=size={W}x{H}:rate=25", "-f", "rawvideo", "-pix_fmt", "bgr24", "pipe:1"]
    r = FrameReader(argv, W, H, buffers=1)
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            for _ in r:  # no context manager: the iterator itself must clean up
                pass
    finally:
        timer.cancel()
    assert r.frames_read > 0
    assert r.proc.poll() is not None and reaped(r.proc.pid)


# ---------------------------------------------------------------------------------- writer

def test_roundtrip_copies_audio(media, tmp_path):
    info = probe(media["c25"])
    out = tmp_path / "sub" / "out.mp4"
    assert render(info, out) == 50
    o = probe(out)
    assert o.frame_count == 50 and o.fps == Fraction(25) and (o.width, o.height) == (W, H)
    assert len(o.audio) == 1 and o.audio[0].codec == "aac"
    assert o.audio[0].duration == pytest.approx(info.audio[0].duration, abs=1 / 25)
    assert no_partials(out.parent)


def test_roundtrip_ntsc_rate(media, tmp_path):
    info = probe(media["c2997"])
    out = tmp_path / "out.mov"
    assert render(info, out) == 30
    o = probe(out)
    assert o.frame_count == 30 and o.fps == Fraction(30000, 1001)
    assert o.audio and abs(o.audio[0].duration - o.duration) <= 1001 / 30000 + 0.03


def test_roundtrip_flac_into_mp4_is_reencoded_not_dropped(media, tmp_path):
    info = probe(media["flac"])
    out = tmp_path / "out.mp4"
    assert render(info, out) == 50
    o = probe(out)
    assert o.frame_count == 50
    assert [a.codec for a in o.audio] == ["aac"]
    assert o.audio[0].duration == pytest.approx(o.duration, abs=1 / 25 + 0.03)


def test_roundtrip_trim(media, tmp_path):
    info = probe(media["c25"])
    out = tmp_path / "out.mkv"
    assert render(info, out, trim=(0.5, 1.5)) == 25
    o = probe(out)
    assert o.frame_count == 25 and o.fps == Fraction(25)
    assert o.audio and o.audio[0].duration == pytest.approx(1.0, abs=1 / 25 + 0.03)


def test_roundtrip_webm_reencodes_to_opus(media, tmp_path):
    info = probe(media["c25"])
    out = tmp_path / "out.webm"
    video = EncodeSettings(codec="libvpx-vp9", crf=40, preset="realtime")
    assert render(info, out, trim=(0, 1.0), video=video) == 25
    o = probe(out)
    assert len(decode_all(o)) == 25 and o.fps == Fraction(25)
    assert [a.codec for a in o.audio] == ["opus"]
    assert o.audio[0].duration == pytest.approx(1.0, abs=1 / 25 + 0.03)


def test_roundtrip_keeps_bt709_colours(media, tmp_path):
    info = probe(media["c709"])
    out = tmp_path / "out.mp4"
    render(info, out, video=EncodeSettings(crf=10, preset="ultrafast"))
    o = probe(out)
    assert o.color_space == "bt709"
    a = np.stack(decode_all(info)).astype(int)
    b = np.stack(decode_all(o)).astype(int)
    # no matrix mix-up (BT.601 vs BT.709 shifts whole channels by several levels) and small
    # differences only: this tiny testsrc2 clip has sharp, saturated chroma edges that clip at
    # 0/255, so about one level of bias remains whatever the scaler flags
    assert np.abs((a - b).mean(axis=(0, 1, 2))).max() < 1.5
    assert np.abs(a - b).mean() < 4.0


def test_rerun_is_bit_identical(media, tmp_path):
    info = probe(media["c25"])
    render(info, tmp_path / "a.mp4")
    render(info, tmp_path / "b.mp4")
    assert (tmp_path / "a.mp4").read_bytes() == (tmp_path / "b.mp4").read_bytes()


def test_image_roundtrip(media, tmp_path):
    info = probe(media["png"])
    (frame,) = decode_all(info)
    for ext in ("png", "jpg", "webp"):
        out = tmp_path / f"out.{ext}"
        with AtomicOutput(out) as target:
            with FrameWriter(image_encode_args(target.tmp_path, width=W, height=H), target.tmp_path) as enc:
                enc.write(frame)
            target.commit()
        o = probe(out)
        assert o.kind == "image" and (o.width, o.height) == (W, H)
    (png,) = decode_all(probe(tmp_path / "out.png"))
    assert np.array_equal(png, frame)
    assert no_partials(tmp_path)


def test_writer_bad_codec_raises_and_leaves_nothing(media, tmp_path):
    info = probe(media["c25"])
    out = tmp_path / "out.mp4"
    frame = np.zeros((H, W, 3), np.uint8)
    with pytest.raises(RenderFailed) as e:
        with AtomicOutput(out) as target:
            argv = encode_args(info, target.tmp_path, width=W, height=H, fps=info.fps,
                               video=EncodeSettings(codec="no_such_codec"))
            with FrameWriter(argv, target.tmp_path) as enc:
                for _ in range(200):
                    enc.write(frame)
            target.commit()
    msg = str(e.value)
    assert "no_such_codec" in msg and str(target.tmp_path) in msg and "\n" not in msg
    assert e.value.exit_code == 5
    assert enc.proc.poll() is not None and reaped(enc.proc.pid)
    assert list(tmp_path.iterdir()) == []


def test_writer_failure_at_close(media, tmp_path):
    info = probe(media["c25"])
    out = tmp_path / "out.mp4"
    with pytest.raises(RenderFailed, match=r"encoder for .*out.mp4.part.*not divisible by 2") as e:
        with AtomicOutput(out) as target:
            argv = encode_args(info, target.tmp_path, width=W + 1, height=H, fps=info.fps, video=FAST)
            k = argv.index("-filter:v")  # drop the even-size crop: x264 fails when it opens
            del argv[k:k + 2]
            with FrameWriter(argv, target.tmp_path) as enc:
                enc.write(np.zeros((H, W + 1, 3), np.uint8))
            target.commit()
    assert "\n" not in str(e.value)
    assert reaped(enc.proc.pid)
    assert list(tmp_path.iterdir()) == []


def test_writer_keyboard_interrupt_aborts(media, tmp_path):
    info = probe(media["c25"])
    out = tmp_path / "out.mp4"
    frame = np.zeros((H, W, 3), np.uint8)
    with pytest.raises(KeyboardInterrupt):
        with AtomicOutput(out) as target:
            argv = encode_args(info, target.tmp_path, width=W, height=H, fps=info.fps, video=FAST)
            with FrameWriter(argv, target.tmp_path) as enc:
                for i in range(10):
                    enc.write(frame)
                raise KeyboardInterrupt
    assert enc.proc.poll() is not None and reaped(enc.proc.pid)
    assert list(tmp_path.iterdir()) == []


def test_atomic_output(tmp_path):
    out = tmp_path / "x.mp4"
    with AtomicOutput(out) as t:
        assert Path(t.tmp_path).parent == tmp_path and Path(t.tmp_path).name.startswith("x.mp4.part")
        Path(t.tmp_path).write_bytes(b"data")
        assert not out.exists()
        t.commit()
    assert out.read_bytes() == b"data" and no_partials(tmp_path)
    with AtomicOutput(tmp_path / "y.mp4") as t:
        Path(t.tmp_path).write_bytes(b"data")  # no commit -> discarded
    assert not (tmp_path / "y.mp4").exists() and no_partials(tmp_path)
    with pytest.raises(RenderFailed, match="wrote nothing"):
        AtomicOutput(tmp_path / "z.mp4").commit()


def test_ensure_output_dir(tmp_path):
    assert ensure_output_dir(tmp_path / "a" / "b" / "out.mp4") == str(tmp_path / "a" / "b")
    (tmp_path / "file").write_text("")
    with pytest.raises(MediaError, match="cannot create output directory"):
        ensure_output_dir(tmp_path / "file" / "out.mp4")


def test_mp4_index_counts_the_samples_on_disk(media, tmp_path):
    """The in-process segment check agrees with ffprobe's packet count, and a file cut short
    counts only the samples still on disk (or defers to ffprobe when its index is gone)."""
    from render.media import mp4index
    from render.media.streams import count_streams

    video = tmp_path / "video.mp4"
    ff("-i", media["c25"], "-an", "-c", "copy", "-movflags", "+faststart", video)
    packets = [s.packets for s in count_streams(video) if s.kind == "video"][0]
    assert mp4index.sample_count(video) == packets > 10
    data = video.read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[:len(data) // 2])
    assert 0 < mp4index.sample_count(cut) < packets
    tail = tmp_path / "tail.mp4"                     # moov at the end: cut, the index is gone
    ff("-i", media["c25"], "-an", "-c", "copy", tail)
    tail.write_bytes(tail.read_bytes()[:len(data) // 2])
    assert mp4index.sample_count(tail) is None
    # with its audio track (a one-segment plan's finished file): the video track's samples
    both = tmp_path / "both.mov"
    ff("-i", media["c25"], "-c", "copy", "-movflags", "+faststart", "-f", "mov", both)
    assert len(count_streams(both)) == 2
    assert mp4index.sample_count(both) == packets
    two = tmp_path / "two.mp4"                       # two video tracks: which one? ffprobe's job
    ff("-i", media["c25"], "-i", media["c25"], "-map", "0:v", "-map", "1:v", "-c", "copy", two)
    assert mp4index.sample_count(two) is None
    assert mp4index.sample_count(media["flac"]) is None     # not an MP4 at all
