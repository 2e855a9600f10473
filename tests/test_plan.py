"""Unit tests of the plan layer: a pure function of (config, job, probed media), no I/O."""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from render.config import SCHEMA, load_config
from render.encoder import PINNED_ENCODE_THREADS
from render.errors import MediaError, UsageError
from render.media.probe import AudioStream, MediaInfo
from render.media.timing import FrameTimes
from render.plan import Identity, RenderPlan, plan_render, work_dir_for
from render.segments import segment_bounds


def info(**kw) -> MediaInfo:
    base = dict(path="/in/clip.mp4", kind="video", width=1280, height=720, fps=Fraction(25),
                rotation=0, pix_fmt="yuv420p", frame_count=250, duration=10.0,
                audio=(AudioStream(index=1, codec="aac", channels=2, sample_rate=48000,
                                   duration=10.0),), container="mov,mp4,m4a,3gp,3g2,mj2")
    base.update(kw)
    return MediaInfo(**base)


def cfr(n: int, fps: float = 25.0, first: float = 0.0, readable: int | None = None) -> FrameTimes:
    r = n if readable is None else readable
    return FrameTimes(count=n, readable=r, pts=tuple(round(i / fps, 6) for i in range(r)),
                      first=first, cfr=True, declared=n)


IDENT = Identity(target_sha256="t" * 64, source_sha256="s" * 64, reference_sha256=None,
                 models={"inswapper_128": "m" * 64}, versions={"render": "x", "ffmpeg": "y"})


def plan(overrides=None, *, media=None, times=None, output="/out/clip.mp4", ident=IDENT) -> RenderPlan:
    cfg = load_config({"profile": "low", **(overrides or {})}, env={})
    media = media or info()
    times = times or cfr(media.frame_count)
    return plan_render(cfg, source=Path("/in/face.jpg"), target=Path(media.path),
                       output=Path(output), info=media, times=times, identity=ident)


def pairs(argv):
    return list(zip(argv, argv[1:]))


def test_segments_are_frame_exact_and_cover_the_clip():
    p = plan({"segment.seconds": "4"})
    assert [(s.start, s.end) for s in p.segments] == [(0, 100), (100, 200), (200, 250)]
    assert [s.name for s in p.segments] == ["seg-0000.mp4", "seg-0001.mp4", "seg-0002.mp4"]
    assert p.frames == 250 and p.expect.frames == 250


@pytest.mark.parametrize("start,end,length,every,expect", [
    (0, 10, 4, 1, [(0, 4), (4, 8), (8, 10)]),
    (0, 10, 4, 3, [(0, 6), (6, 10)]),            # rounded up to a multiple of detect.every
    (5, 20, 5, 5, [(5, 10), (10, 15), (15, 20)]),
    (0, 3, 10, 1, [(0, 3)]),
])
def test_segment_bounds(start, end, length, every, expect):
    assert segment_bounds(start, end, length, every) == expect


def test_segment_boundaries_are_multiples_of_detect_every():
    p = plan({"segment.seconds": "1", "detect.every": "4"})
    assert all((s.start - p.start) % 4 == 0 for s in p.segments)
    assert p.segments[0].frames == 28    # 25 rounded up to a multiple of 4


NO_STABILIZE = {"stabilize.enabled": "false"}   # segments decoded without pre-roll or look-ahead


def test_segment_decode_seeks_between_frames_and_takes_exactly_its_frames():
    p = plan({"segment.seconds": "4", **NO_STABILIZE})
    first, second = p.segments[0].decode, p.segments[1].decode
    assert "-ss" not in first and ("-frames:v", "100") in pairs(first)
    assert ("-ss", "3.98") in pairs(second)       # halfway between frame 99 (3.96) and 100 (4.0)
    assert second.index("-ss") < second.index("-i")                 # input option: accurate seek
    assert ("-frames:v", "100") in pairs(second) and second[-1] == "pipe:1"


def test_constant_frame_rate_segments_decode_onto_the_rate_grid():
    p = plan({"segment.seconds": "4"}, times=cfr(250, first=0.5))
    first, second = list(p.segments[0].decode), list(p.segments[1].decode)
    # the first frame at 0: 0.5 s in without a seek, half a frame after the seek
    assert ("-vf", "setpts=PTS-(0.5)/TB") in pairs(first)
    assert ("-vf", "setpts=PTS-(0.02)/TB") in pairs(second)
    assert ("-fps_mode", "cfr") in pairs(second) and ("-r", "25") in pairs(second)
    pts = tuple(round(i / 25 if i < 50 else 2 + (i - 50) / 12.5, 6) for i in range(100))
    vfr = plan(times=FrameTimes(count=100, readable=100, pts=pts, first=0.0, cfr=False, declared=100),
               media=info(frame_count=100))
    dec = list(vfr.segments[0].decode)      # variable rate: passed through, retimed at assembly
    assert ("-fps_mode", "passthrough") in pairs(dec) and "-r" not in dec and "-vf" not in dec


def test_the_grid_rate_is_the_one_the_frames_keep():
    from render.segments import grid_rate

    on30 = cfr(120, fps=30.0)
    assert grid_rate(on30, Fraction(30)) == 30
    # an odd last frame's duration moved the container's average rate: the frames keep 30
    assert grid_rate(on30, Fraction(1200, 41)) == 30
    ntsc = FrameTimes(count=300, readable=300, pts=tuple(round(i * 1001 / 30000, 6) for i in range(300)),
                      first=0.0, cfr=True, declared=300)
    assert grid_rate(ntsc, Fraction(29)) == Fraction(30000, 1001)
    # frames that keep no rate within a quarter frame: no grid, passed through as they come
    jitter = FrameTimes(count=120, readable=120, pts=tuple(round(i / 30 + (0.011 if i % 2 else 0), 6)
                                                           for i in range(120)),
                        first=0.0, cfr=True, declared=120)
    assert grid_rate(jitter, Fraction(30)) is None
    p = plan(times=jitter, media=info(frame_count=120, fps=Fraction(30), duration=4.0))
    dec = list(p.segments[0].decode)
    assert ("-fps_mode", "passthrough") in pairs(dec) and "-r" not in dec


def test_stabilised_segments_decode_a_fixed_pre_roll_and_look_ahead():
    """stabilize.enabled: each segment decodes stabilize.preroll frames before it (rounded to
    whole multiples of detect.every, at most the frames there are) and stabilize.fill after it
    (where the target has them); both are in the plan, and only the segment's frames are
    encoded."""
    p = plan({"segment.seconds": "4", "stabilize.preroll": "10", "stabilize.fill": "3"})
    assert [(s.start, s.end, s.preroll, s.lookahead) for s in p.segments] == \
        [(0, 100, 0, 3), (100, 200, 10, 3), (200, 250, 10, 0)]
    first, second, last = (list(s.decode) for s in p.segments)
    assert "-ss" not in first and ("-frames:v", "103") in pairs(first)
    assert ("-ss", "3.58") in pairs(second)        # halfway between frames 89 and 90
    assert ("-frames:v", "113") in pairs(second) and ("-frames:v", "60") in pairs(last)
    every = plan({"segment.seconds": "1", "detect.every": "4", "stabilize.preroll": "10"})
    assert [s.preroll for s in every.segments[:3]] == [0, 12, 12]   # the detector keeps its place
    trimmed = plan({"trim": "30f-80f", "segment.seconds": "1", "stabilize.preroll": "40"})
    assert [s.preroll for s in trimmed.segments] == [30, 40]         # frames before the trim
    off = plan({"segment.seconds": "4", **NO_STABILIZE})
    assert {(s.preroll, s.lookahead) for s in off.segments} == {(0, 0)}
    assert RenderPlan.from_json(p.to_json()) == p


def test_stabilize_keys_leave_earlier_job_keys_alone_at_their_defaults():
    """stabilize.* are keyed unless at their defaults (off): a profile that turns it on is a
    new job key, so a resume never mixes stabilised and unstabilised segments."""
    off = plan(NO_STABILIZE)
    on = plan()
    assert off.key != on.key
    assert "stabilize.enabled" not in {k for k, v in off.config.items()
                                       if SCHEMA[k].in_job_key(v)}


def test_seek_is_measured_from_the_container_start():
    p = plan({"segment.seconds": "4", **NO_STABILIZE}, times=cfr(250, first=0.5))
    assert ("-ss", "4.48") in pairs(p.segments[1].decode)


def test_segment_encode_is_video_only_with_pinned_threads():
    p = plan({"segment.seconds": "4"})
    enc = list(p.segments[0].encode)
    assert enc[-1].endswith("/seg-0000.mp4") and ("-f", "mp4") in pairs(enc)
    assert "-an" in enc and "-i" in enc and enc.count("-i") == 1 and "pipe:0" in enc
    assert ("-threads", str(PINNED_ENCODE_THREADS)) in pairs(enc)
    assert ("-c:v", "libx264") in pairs(enc) and ("-crf", "20") in pairs(enc)
    assert ("-flags:v", "+cgop") in pairs(enc)
    assert ("-threads", "3") in pairs(plan({"encode.threads": "3"}).segments[0].encode)


def test_one_segment_is_encoded_as_the_finished_file():
    """A plan of one segment (constant frame rate) encodes the audio, the tags and the output's
    muxer in the segment's one pass; the assembly has nothing to mux."""
    cfg = load_config({"profile": "low"}, env={})
    p = plan_render(cfg, source=Path("/in/face.jpg"), target=Path("/in/clip.mp4"),
                    output=Path("/out/clip.mov"), info=info(), times=cfr(250), identity=IDENT,
                    metadata=[("comment", "synthetic")])
    (seg,) = p.segments
    enc = list(seg.encode)
    assert seg.name == "seg-0000.mov" and enc[-1].endswith("/seg-0000.mov")
    assert enc.count("-i") == 2 and "pipe:0" in enc and "/in/clip.mp4" in enc and "-an" not in enc
    assert ("-map", "0:v:0") in pairs(enc) and ("-map", "1:1") in pairs(enc)
    assert ("-c:a:0", "copy") in pairs(enc) and ("-metadata", "comment=synthetic") in pairs(enc)
    assert ("-movflags", "+faststart") in pairs(enc) and enc[-3:-1] == ["-f", "mov"]
    assert ("-threads", str(PINNED_ENCODE_THREADS)) in pairs(enc)
    assert p.assembly.mux == () and p.final_mux == seg.encode
    assert p.expect.audio == 1 and p.expect.audio_duration == 10.0
    assert RenderPlan.from_json(p.to_json()) == p
    # cut by a trim: the audio too, encoded once, in the same pass
    t = plan({"trim": "30f-80f"})
    enc = list(t.segments[0].encode)
    assert len(t.segments) == 1 and t.assembly.mux == ()
    assert ("-ss", "1.2") in pairs(enc) and ("-t", "2") in pairs(enc) and ("-c:a:0", "aac") in pairs(enc)
    # more than one segment: video-only segments, muxed once
    m = plan({"segment.seconds": "4"})
    assert all("-an" in s.encode for s in m.segments) and m.final_mux == m.assembly.mux


def test_assembly_concats_with_stream_copy_and_muxes_the_audio_once():
    p = plan({"segment.seconds": "4"})
    a = p.assembly
    assert a.concat.splitlines() == ["ffconcat version 1.0", "file 'seg-0000.mp4'",
                                     "file 'seg-0001.mp4'", "file 'seg-0002.mp4'"]
    mux = list(a.mux)
    assert ("-f", "concat") in pairs(mux) and mux[mux.index("concat") + 4].endswith("concat.txt")
    assert ("-c:v", "copy") in pairs(mux) and ("-c:a:0", "copy") in pairs(mux)
    assert ("-map", "1:1") in pairs(mux) and mux[-3:-1] == ["-f", "mp4"]
    assert ("-movflags", "+faststart") in pairs(mux)
    assert a.join == () and a.retime == ()     # constant frame rate: no retiming
    assert p.expect.audio == 1 and p.expect.duration == 10.0


def test_trim_in_frames_is_exactly_those_frames():
    p = plan({"trim": "30f-80f", "segment.seconds": "1", **NO_STABILIZE})
    assert (p.start, p.end) == (30, 80)
    assert [(s.start, s.end) for s in p.segments] == [(30, 55), (55, 80)]
    assert ("-ss", "1.18") in pairs(p.segments[0].decode)
    mux = list(p.assembly.mux)
    # the audio is cut to the frames' span and encoded once
    assert ("-ss", "1.2") in pairs(mux) and ("-t", "2") in pairs(mux)
    assert ("-c:a:0", "aac") in pairs(mux)
    assert p.expect.audio_duration == pytest.approx(2.0)


def test_trim_in_seconds():
    p = plan({"trim": "0.4-1.2"})
    assert (p.start, p.end) == (10, 30)
    p = plan({"trim": "9.5-"})
    assert (p.start, p.end) == (238, 250)


def test_trim_past_the_end_is_a_usage_error():
    with pytest.raises(UsageError, match="past the end"):
        plan({"trim": "300f-400f"})


def test_preview_scales_down_only():
    p = plan({"preview": "true"}, media=info(width=1920, height=1080))
    assert (p.width, p.height) == (1280, 720) and p.scale_height == 720
    dec = list(p.segments[0].decode)
    assert dec[dec.index("-vf") + 1] == "setpts=PTS-(0)/TB,scale=1280:720:flags=area"
    p = plan({"preview": "true"})
    assert (p.width, p.height) == (1280, 720) and p.scale_height is None


def test_truncated_target_is_an_error_unless_allow_partial():
    times = cfr(250, readable=180)
    with pytest.raises(MediaError, match=r"ends at frame 180 of 250 \(file truncated\?\)"):
        plan(times=times)
    p = plan({"allow_partial": "true"}, times=times)
    assert p.partial and (p.start, p.end) == (0, 180) and p.expect.frames == 180


def test_webm_gets_vp9_unless_the_user_forced_another_codec():
    p = plan({"segment.seconds": "4"}, output="/out/clip.webm")
    enc = list(p.segments[0].encode)
    assert ("-c:v", "libvpx-vp9") in pairs(enc) and ("-f", "matroska") in pairs(enc)
    assert p.segments[0].name.endswith(".mkv")
    assert ("-c:a:0", "libopus") in pairs(list(p.assembly.mux))
    one = list(plan(output="/out/clip.webm").segments[0].encode)    # one segment: the final file
    assert ("-c:v", "libvpx-vp9") in pairs(one) and ("-f", "webm") in pairs(one)
    assert ("-c:a:0", "libopus") in pairs(one)
    with pytest.raises(UsageError, match="cannot go into .webm"):
        plan({"encode.codec": "libx264"}, output="/out/clip.webm")


def test_variable_frame_rate_is_retimed_with_the_targets_timestamps():
    pts = tuple(round(i / 25 if i < 50 else 2 + (i - 50) / 12.5, 6) for i in range(100))
    times = FrameTimes(count=100, readable=100, pts=pts, first=0.0, cfr=False, declared=100)
    p = plan(times=times, media=info(frame_count=100, duration=10.0))
    a = p.assembly
    assert a.join and a.retime[0] == "mkvmerge"
    stamps = a.timestamps.splitlines()
    assert stamps[0] == "# timestamp format v2" and len(stamps) == 101
    assert float(stamps[51]) == pytest.approx(2000.0) and float(stamps[52]) == pytest.approx(2080.0)
    assert list(a.mux)[list(a.mux).index("-i") + 1].endswith("video-ts.mkv")
    assert p.expect.duration == pytest.approx(pts[-1] + 0.08)


def test_job_key_follows_every_byte_changing_input_and_nothing_else():
    base = plan()
    assert plan().key == base.key
    assert plan({"mask.padding": "0.1"}).key != base.key
    assert plan({"encode.crf": "21"}).key != base.key
    assert plan(ident=Identity(**{**IDENT.__dict__, "target_sha256": "u" * 64})).key != base.key
    assert plan(ident=Identity(**{**IDENT.__dict__, "models": {"inswapper_128": "n" * 64}})).key \
        != base.key
    assert plan(ident=Identity(**{**IDENT.__dict__, "versions": {"render": "z"}})).key != base.key
    # scheduling and display keys do not change the bytes
    assert plan({"progress": "off", "execution.threads": "1", "execution.batch_size": "2",
                 "cache_dir": "/elsewhere"}).key == base.key
    assert base.work_dir == str(work_dir_for(Path("/out/clip.mp4"), base.key))
    assert Path(base.work_dir).parent == Path("/out") and Path(base.work_dir).name.startswith(".clip.mp4.")


def test_plan_round_trips_through_json():
    p = plan({"segment.seconds": "3"})
    assert RenderPlan.from_json(p.to_json()) == p


def test_image_plan_has_no_segments_to_assemble():
    media = info(path="/in/p.png", kind="image", frame_count=1, duration=0.04, audio=(),
                 container="png_pipe")
    p = plan(media=media, output="/out/p.png")
    assert p.kind == "image" and p.assembly is None and len(p.segments) == 1


def test_nvenc_and_nvdec_where_they_work_software_where_they_do_not():
    cfg_keys = {"encode.codec": "h264_nvenc", "encode.preset": "p4", "decode.hwaccel": "auto"}
    cfg = load_config({"profile": "low", **cfg_keys}, env={})
    kw = dict(source=Path("/in/face.jpg"), target=Path("/in/clip.mp4"), output=Path("/out/c.mp4"),
              info=info(), times=cfr(250), identity=IDENT)
    on = plan_render(cfg, hw={"h264_nvenc": True, "cuda": True}, **kw)
    off = plan_render(cfg, hw={"h264_nvenc": False, "cuda": False}, **kw)
    assert ("-c:v", "h264_nvenc") in pairs(list(on.segments[0].encode))
    assert ("-hwaccel", "cuda") in pairs(list(on.segments[0].decode))
    assert ("-c:v", "libx264") in pairs(list(off.segments[0].encode))
    assert ("-preset", "medium") in pairs(list(off.segments[0].encode))    # nvenc's p4 mapped
    assert "-hwaccel" not in off.segments[0].decode
    assert on.key != off.key          # other bytes: another job
