"""Unit tests of the pure ffmpeg argument builders (no subprocess)."""
from __future__ import annotations

from fractions import Fraction

import pytest

from render.errors import MediaError, UsageError
from render.media.argv import fmt_time
from render.media.audio_args import audio_plan
from render.media.formats import final_path, output_format
from render.media.probe import AudioStream, MediaInfo
from render.media.stderr import last_meaningful_line
from render.media.video_args import (
    EncodeSettings,
    decode_args,
    decoded_size,
    encode_args,
    image_encode_args,
    video_codec_args,
)

HEAD = ["ffmpeg", "-hide_banner", "-nostdin", "-loglevel", "error"]


def info(**kw) -> MediaInfo:
    base = dict(path="/in/clip.mp4", kind="video", width=1920, height=1080, fps=Fraction(30000, 1001),
                rotation=0, pix_fmt="yuv420p", frame_count=300, duration=10.01, audio=(),
                container="mov,mp4,m4a,3gp,3g2,mj2")
    base.update(kw)
    return MediaInfo(**base)


def aud(codec: str, index: int = 1, channels: int = 2) -> AudioStream:
    return AudioStream(index=index, codec=codec, channels=channels, sample_rate=48000, duration=10.0)


def opt(argv: list[str], flag: str) -> str:
    """Value following the LAST occurrence of ``flag``."""
    i = len(argv) - 1 - argv[::-1].index(flag)
    return argv[i + 1]


def pairs(argv: list[str]) -> list[tuple[str, str]]:
    return list(zip(argv, argv[1:]))


# ---------------------------------------------------------------------------------- decode

def test_decode_plain():
    argv = decode_args(info())
    assert argv == HEAD + ["-i", "/in/clip.mp4", "-map", "0:v:0", "-an", "-sn", "-dn",
                           "-sws_flags", "accurate_rnd+full_chroma_int+bitexact", "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "bgr24", "pipe:1"]


def test_encode_uses_unbiased_colour_conversion():
    argv = encode_args(info(), "/out/x.mp4", width=1280, height=720, fps=Fraction(25),
                       video=EncodeSettings())
    assert ("-sws_flags", "accurate_rnd+full_chroma_int+bitexact") in pairs(argv)


def test_decode_maps_the_probed_video_stream():
    assert ("-map", "0:2") in pairs(decode_args(info(video_index=2)))  # e.g. after cover art


def test_decode_legacy_vsync():
    argv = decode_args(info(), legacy_vsync=True)
    assert ("-vsync", "passthrough") in pairs(argv) and "-fps_mode" not in argv


def test_decode_trim_is_input_option():
    argv = decode_args(info(), trim=(1.5, 4.0))
    i = argv.index("-i")
    assert argv[i - 4:i] == ["-ss", "1.5", "-t", "2.5"]


def test_decode_trim_open_end_and_zero_start():
    argv = decode_args(info(), trim=(2, None))
    assert ("-ss", "2") in pairs(argv) and "-t" not in argv
    argv = decode_args(info(), trim=(0, 3))
    assert "-ss" not in argv and ("-t", "3") in pairs(argv)
    assert "-ss" not in decode_args(info(), trim=(0, None))


@pytest.mark.parametrize("trim", [(-1, 2), (3, 3), (4, 2), ("a", 1), (1,)])
def test_decode_bad_trim(trim):
    with pytest.raises(UsageError):
        decode_args(info(), trim=trim)


def test_decode_trim_after_end():
    with pytest.raises(MediaError, match="after the end of /in/clip.mp4"):
        decode_args(info(), trim=(20, None))


def test_trim_of_a_video_that_starts_late_counts_from_the_container_start():
    """Video from 2 s to 6.08 s of the file (audio from 0): a trim in its last two seconds is
    inside it (it was refused against the video's 4.08 s length)."""
    late = info(duration=4.08, video_start=2.0, audio=(aud("aac"),))
    assert ("-ss", "5.52") in pairs(decode_args(late, trim=(5.52, None)))
    with pytest.raises(MediaError, match=r"trim starts at 6.1 s, after the end of .* \(6.08 s\)"):
        decode_args(late, trim=(6.1, None))


def test_decode_scale_keeps_aspect_even():
    i = info()
    assert decoded_size(i, 360) == (640, 360)
    assert ("-vf", "scale=640:360:flags=area") in pairs(decode_args(i, scale_height=360))
    odd = info(width=1918, height=1080)
    w, h = decoded_size(odd, 361)
    assert h == 360 and w % 2 == 0 and abs(w / h - 1918 / 1080) < 0.01
    assert opt(decode_args(odd, scale_height=361), "-vf") == f"scale={w}:{h}:flags=area"


def test_decode_scale_never_upscales():
    i = info()
    assert decoded_size(i, None) == (1920, 1080)
    assert decoded_size(i, 1080) == (1920, 1080)
    assert decoded_size(i, 2160) == (1920, 1080)
    assert "-vf" not in decode_args(i, scale_height=2160)


def test_decode_rotated_uses_display_size():
    portrait = info(width=1080, height=1920, rotation=90)
    assert decoded_size(portrait, 960) == (540, 960)


def test_decode_image_one_frame_ignores_trim():
    img = info(path="/in/face.png", kind="image", frame_count=1, duration=0.04, container="png_pipe")
    argv = decode_args(img, trim=(1, 2))
    assert ("-frames:v", "1") in pairs(argv) and "-ss" not in argv


# ---------------------------------------------------------------------------------- encode

def enc(i: MediaInfo, out: str = "/out/clip.mp4.part-42", **kw) -> list[str]:
    kw.setdefault("width", 1920)
    kw.setdefault("height", 1080)
    kw.setdefault("fps", Fraction(30000, 1001))
    kw.setdefault("video", EncodeSettings())
    return encode_args(i, out, **kw)


def test_encode_takes_muxer_and_audio_policy_from_the_final_name():
    """A one-segment plan encodes into a work-folder name: the output's name decides the muxer,
    the audio policy and +faststart; the tags follow the dropped metadata."""
    i = info(audio=(aud("aac"),))
    argv = enc(i, "/w/seg-0000.tmp-h-1.mkv", final_name="clip.webm", video=EncodeSettings(
        codec="libvpx-vp9"), metadata=[("comment", "synthetic media")])
    assert argv[-3:] == ["-f", "webm", "/w/seg-0000.tmp-h-1.mkv"]
    assert ("-c:a:0", "libopus") in pairs(argv) and "-movflags" not in argv
    assert argv.index("-metadata") > argv.index("-map_metadata")
    assert ("-metadata", "comment=synthetic media") in pairs(argv)
    argv = enc(i, "/w/seg-0000.tmp-h-1.webm", final_name="clip.mov")
    assert argv[-3:-1] == ["-f", "mov"] and ("-c:a:0", "copy") in pairs(argv)
    assert ("-movflags", "+faststart") in pairs(argv)


def test_encode_video_only():
    argv = enc(info())
    assert argv[:5] == HEAD
    assert argv[-3:] == ["-f", "mp4", "/out/clip.mp4.part-42"]
    i = argv.index("pipe:0")
    assert argv[i - 11:i + 1] == ["-f", "rawvideo", "-pix_fmt", "bgr24", "-video_size", "1920x1080",
                                   "-framerate", "30000/1001", "-thread_queue_size", "2", "-i",
                                   "pipe:0"]
    assert argv.count("-i") == 1 and ("-map", "0:v:0") in pairs(argv)
    assert "-shortest" not in argv and "-c:a:0" not in argv
    for p in [("-c:v", "libx264"), ("-preset", "medium"), ("-crf", "18"), ("-pix_fmt", "yuv420p"),
              ("-map_metadata", "-1"), ("-fflags", "+bitexact"), ("-flags:v", "+bitexact"),
              ("-movflags", "+faststart"), ("-fps_mode", "passthrough"), ("-y", "-f")]:
        assert p in pairs(argv), p


@pytest.mark.parametrize("out, fmt", [
    ("/o/a.mp4", "mp4"), ("/o/a.mp4.part", "mp4"), ("/o/a.MOV.part-7", "mov"), ("/o/a.m4v", "mp4"),
    ("/o/a.mkv.part-123", "matroska"), ("/o/a.webm", "webm"),
])
def test_encode_format_from_final_extension(out, fmt):
    argv = enc(info(), out)
    assert argv[-3:] == ["-f", fmt, out]
    assert ("-movflags" in argv) == (fmt in ("mp4", "mov"))


def test_final_path_and_bad_extension():
    assert final_path("/o/clip.mp4.part-991") == "/o/clip.mp4"
    assert final_path("/o/clip.mp4.part") == "/o/clip.mp4"
    assert output_format("x.mkv") == ("matroska", "mkv")
    with pytest.raises(MediaError, match="unsupported output format .avi"):
        enc(info(), "/o/clip.avi.part-1")


@pytest.mark.parametrize("ext, codec, expect", [
    ("mp4", "aac", "copy"), ("mp4", "mp3", "copy"), ("mp4", "alac", "copy"), ("mp4", "ac3", "copy"),
    ("mp4", "eac3", "copy"), ("mp4", "opus", "copy"), ("mp4", "flac", "aac"), ("mp4", "vorbis", "aac"),
    ("mp4", "pcm_s16le", "aac"),
    ("mov", "aac", "copy"), ("mov", "pcm_s16le", "copy"), ("mov", "opus", "aac"), ("mov", "flac", "aac"),
    ("mkv", "flac", "copy"), ("mkv", "pcm_s24le", "copy"), ("mkv", "whatever", "copy"),
    ("webm", "opus", "copy"), ("webm", "vorbis", "copy"), ("webm", "aac", "libopus"),
    ("webm", "flac", "libopus"),
])
def test_audio_copy_or_reencode(ext, codec, expect):
    i = info(audio=(aud(codec),))
    assert audio_plan(i, f"/o/x.{ext}.part-1") == [expect]
    argv = enc(i, f"/o/x.{ext}")
    assert ("-c:a:0", expect) in pairs(argv)
    assert ("-map", "1:1") in pairs(argv)
    if expect == "copy":
        assert "-shortest" not in argv and not any(a.startswith("apad") for a in argv)
        assert "-t" not in argv
    else:
        # cut and padded to the video's span (10.01 s); -shortest is not needed
        assert ("-t", "10.01") in pairs(argv) and ("-filter:a:0", "apad=whole_dur=10.01") in pairs(argv)
        assert "-shortest" not in argv
        assert "-b:a:0" in argv


def test_unknown_duration_pads_and_uses_shortest():
    argv = enc(info(audio=(aud("flac"),), duration=0.0))
    assert ("-filter:a:0", "apad") in pairs(argv) and "-shortest" in argv and "-t" not in argv


def test_audio_input_is_the_target():
    argv = enc(info(audio=(aud("aac"),)))
    ins = [argv[k + 1] for k, a in enumerate(argv) if a == "-i"]
    assert ins == ["pipe:0", "/in/clip.mp4"]
    assert argv.index("-map") > argv.index("/in/clip.mp4")


def test_trim_reencodes_audio_with_same_trim():
    i = info(audio=(aud("aac"),))
    argv = enc(i, trim=(2.0, 5.5))
    k = argv.index("/in/clip.mp4")
    assert argv[k - 5:k + 1] == ["-ss", "2", "-t", "3.5", "-i", "/in/clip.mp4"]
    assert ("-c:a:0", "aac") in pairs(argv) and ("-filter:a:0", "apad=whole_dur=3.5") in pairs(argv)
    assert "-shortest" not in argv
    # the raw input never gets a seek
    assert argv.index("-ss") > argv.index("pipe:0")
    # a trim past the end of the video is limited to the video
    argv = enc(i, trim=(8.0, 30.0))
    assert ("-t", "2.01") in pairs(argv) and ("-filter:a:0", "apad=whole_dur=2.01") in pairs(argv)


def test_audio_starting_before_video_is_shifted():
    i = info(audio=(aud("aac"),), video_start=0.2)
    argv = enc(i)
    k = argv.index("/in/clip.mp4")
    assert argv[k - 5:k] == ["-ss", "0.2", "-t", "10.01", "-i"]
    assert ("-c:a:0", "aac") in pairs(argv)
    # tiny offsets (codec delay) are left alone
    assert ("-c:a:0", "copy") in pairs(enc(info(audio=(aud("aac"),), video_start=0.005)))


def test_several_audio_streams_all_mapped():
    i = info(audio=(aud("aac", 1), aud("flac", 2, channels=6)), container="matroska,webm")
    argv = enc(i, "/o/x.mp4")
    assert ("-map", "1:1") in pairs(argv) and ("-map", "1:2") in pairs(argv)
    assert ("-c:a:0", "copy") in pairs(argv) and ("-c:a:1", "aac") in pairs(argv)
    assert ("-b:a:1", "512k") in pairs(argv)
    assert "-shortest" not in argv  # a copied stream cannot be padded: never cut the video
    assert "1:a?" not in argv


def test_video_codec_options():
    assert video_codec_args(EncodeSettings("libx265", 22, "slow")) == [
        "-c:v", "libx265", "-preset", "slow", "-crf", "22", "-x265-params", "log-level=error",
        "-pix_fmt", "yuv420p"]
    assert video_codec_args(EncodeSettings("libvpx-vp9", 30, "good")) == [
        "-c:v", "libvpx-vp9", "-crf", "30", "-b:v", "0", "-deadline", "good", "-pix_fmt", "yuv420p"]
    assert video_codec_args(EncodeSettings("h264_nvenc", 19, "p5", extra=("-tune", "hq"))) == [
        "-c:v", "h264_nvenc", "-preset", "p5", "-rc", "vbr", "-cq", "19", "-b:v", "0",
        "-pix_fmt", "yuv420p", "-tune", "hq"]
    assert video_codec_args(EncodeSettings("libx264", None, None, "yuv444p", threads=4)) == [
        "-c:v", "libx264", "-pix_fmt", "yuv444p", "-threads", "4"]
    argv = enc(info(), "/o/x.mp4", video=EncodeSettings("libx265"))
    assert ("-tag:v", "hvc1") in pairs(argv)


def test_odd_size_is_cropped_to_even_for_yuv420p():
    argv = enc(info(width=101, height=75), width=101, height=75)
    assert opt(argv, "-filter:v") == "crop=100:74:0:0"
    argv = enc(info(width=101, height=75), width=101, height=75, video=EncodeSettings(pix_fmt="yuv444p"))
    assert "-filter:v" not in argv


def test_colour_matrix_and_tags_follow_the_target():
    i = info(color_space="bt709", color_primaries="bt709", color_transfer="bt709", color_range="tv")
    argv = enc(i)
    assert opt(argv, "-filter:v") == "scale=out_color_matrix=bt709:out_range=tv,format=yuv420p"
    for p in [("-colorspace", "bt709"), ("-color_primaries", "bt709"), ("-color_trc", "bt709"),
              ("-color_range", "tv")]:
        assert p in pairs(argv)
    assert "-colorspace" not in enc(info())


def test_fps_is_exact_fraction():
    argv = enc(info(), fps=Fraction(24000, 1001))
    assert ("-framerate", "24000/1001") in pairs(argv)
    assert ("-framerate", "25") in pairs(enc(info(), fps=Fraction(25)))


def test_fmt_time():
    assert fmt_time(0) == "0"
    assert fmt_time(1.5) == "1.5"
    assert fmt_time(1e-7) == "0"
    assert fmt_time(3600.123456789) == "3600.123457"


# ---------------------------------------------------------------------------------- images

@pytest.mark.parametrize("out, codec, extra", [
    ("/o/a.png.part-3", "png", []), ("/o/a.jpg", "mjpeg", ["-q:v", "2"]),
    ("/o/a.JPEG.part", "mjpeg", ["-q:v", "2"]), ("/o/a.webp", "libwebp", ["-quality", "95"]),
])
def test_image_encode_args(out, codec, extra):
    argv = image_encode_args(out, width=640, height=480)
    assert argv[:5] == HEAD
    assert argv[-3:] == ["-f", "image2", out]
    k = argv.index("-c:v")
    assert argv[k:k + 2 + len(extra)] == ["-c:v", codec, *extra]
    for p in [("-frames:v", "1"), ("-video_size", "640x480"), ("-pix_fmt", "bgr24"), ("-i", "pipe:0"),
              ("-update", "1")]:
        assert p in pairs(argv)


def test_image_encode_bad_extension():
    with pytest.raises(MediaError, match="unsupported image output .gif"):
        image_encode_args("/o/a.gif", width=2, height=2)


# ---------------------------------------------------------------------------------- stderr

def test_last_meaningful_line_skips_generic_lines():
    err = ("[mp4 @ 0x55d0c0ffee00] Could not find tag for codec pcm_s16le in stream #1\n"
           "Could not write header for output file #0 (incorrect codec parameters ?): Invalid argument\n"
           "Error initializing output stream 0:0 -- \nConversion failed!\n")
    assert last_meaningful_line(err) == "[mp4] Could not find tag for codec pcm_s16le in stream #1"
    assert last_meaningful_line(b"Unknown encoder 'nope'\n") == "Unknown encoder 'nope'"
    assert last_meaningful_line("") == ""
    assert last_meaningful_line("Conversion failed!\n") == "Conversion failed!"
