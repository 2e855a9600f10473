"""Renders as plans of committed segments, end to end through the CLI: resume after kill -9,
stale and damaged work, inputs that lie, a full disk, frame timing and containers."""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from render.standins import media as mf
from conftest import cli_env, model_args, run_cli


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def work_dirs(out_dir: Path) -> list[Path]:
    return sorted(p for p in out_dir.iterdir() if p.is_dir() and ".render-" in p.name)


def visible(out_dir: Path) -> list[str]:
    return sorted(p.name for p in out_dir.iterdir() if not p.name.startswith("."))


def ffmpeg_children(clip: Path) -> str:
    return subprocess.run(["pgrep", "-f", f"ffmpeg.*{clip}"], capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    d = tmp_path_factory.mktemp("segclip")
    return mf.make_clip(d / "clip.mp4", width=640, height=360, seconds=6.0)


ARGS = ("profile=low", "segment.seconds=1", "execution.threads=1")


#: one signing identity for every render here (set by the autouse fixture below): outputs made
#: with different cache folders are compared byte for byte
SIGNING: list[str] = []


@pytest.fixture(autouse=True, scope="module")
def _same_signing_identity(signing):
    SIGNING[:] = signing


def render_args(workdir: Path, standin_models: Path, clip_path: Path, out: Path, *extra: str,
                cache: str = "cache") -> list[str]:
    return [*ARGS, *SIGNING, f"source={workdir / 'in' / 'source.jpg'}", f"target={clip_path}", f"output={out}",
            *model_args(standin_models, workdir / cache), *extra]


@pytest.fixture(scope="module")
def reference(tmp_path_factory, standin_models, clip):
    """The SHA-256 of an uninterrupted render of ``clip``."""
    d = tmp_path_factory.mktemp("ref")
    (d / "in").mkdir()
    mf.make_source_image(d / "in" / "source.jpg")
    out = d / "out" / "clip.mp4"
    r = run_cli(*render_args(d, standin_models, clip.path, out))
    assert r.returncode == 0, r.stderr
    return sha(out)


def committed(out_dir: Path) -> list[Path]:
    """Segments under their final names (the sidecar is written just before the rename)."""
    return [p for w in work_dirs(out_dir) for p in w.iterdir()
            if re.fullmatch(r"seg-\d{4}\.(mp4|mkv)", p.name)]


def kill_after_segments(args: list[str], out_dir: Path, n: int,
                        program: tuple[str, ...] = ("-m", "render")) -> None:
    """Start a render (``python PROGRAM ARGS``), SIGKILL it once ``n`` segments are committed."""
    proc = subprocess.Popen([sys.executable, *program, *args], env=cli_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            done = committed(out_dir)
            if len(done) >= n:
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the render finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def resumed_line(stderr: str) -> tuple[int, int, int]:
    """(frames decoded, segments resumed, segments) from the final --verbose line."""
    m = re.search(r"(\d+) frames decoded, (\d+) of (\d+) segments resumed", stderr)
    assert m, stderr
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def test_kill_9_then_resume_gives_the_uninterrupted_bytes(workdir, standin_models, clip, reference):
    out = workdir / "out" / "clip.mp4"
    args = render_args(workdir, standin_models, clip.path, out)
    kill_after_segments(args, workdir / "out", 2)
    time.sleep(0.2)
    assert ffmpeg_children(clip.path) == "", "an ffmpeg child outlived the killed renderer"
    assert visible(workdir / "out") == [], "something that looks finished was left"
    (work,) = work_dirs(workdir / "out")
    assert (work / "plan.json").is_file()
    # a segment decodes its pre-roll and look-ahead too (stabilize.enabled in the profile)
    segments = json.loads((work / "plan.json").read_text())["segments"]
    assert any(s["preroll"] for s in segments)
    whole = sum(s["preroll"] + s["end"] - s["start"] + s["lookahead"] for s in segments)
    r = run_cli(*args, "--verbose")
    assert r.returncode == 0, r.stderr
    decoded, resumed, total = resumed_line(r.stderr)
    assert total == 6 and resumed >= 2 and decoded < whole
    assert "resuming: " in r.stderr and "segments done" in r.stderr
    assert sha(out) == reference
    assert visible(workdir / "out") == ["clip.mp4", "clip.mp4.report.json"]
    assert work_dirs(workdir / "out") == []


def test_damaged_segment_is_rendered_again(workdir, standin_models, clip, reference):
    out = workdir / "out" / "clip.mp4"
    args = render_args(workdir, standin_models, clip.path, out)
    kill_after_segments(args, workdir / "out", 2)
    (work,) = work_dirs(workdir / "out")
    seg = work / "seg-0000.mp4"
    data = bytearray(seg.read_bytes())
    data[len(data) // 2] ^= 0x55
    seg.write_bytes(bytes(data))
    r = run_cli(*args, "--verbose")
    assert r.returncode == 0, r.stderr
    assert "seg-0000.mp4 is damaged" in r.stderr
    assert sha(out) == reference


def test_changed_override_starts_afresh(workdir, standin_models, clip):
    out = workdir / "out" / "clip.mp4"
    kill_after_segments(render_args(workdir, standin_models, clip.path, out), workdir / "out", 1)
    (old,) = work_dirs(workdir / "out")
    segments = json.loads((old / "plan.json").read_text())["segments"]   # the same cuts
    whole = sum(s["preroll"] + s["end"] - s["start"] + s["lookahead"] for s in segments)
    r = run_cli(*render_args(workdir, standin_models, clip.path, out, "mask.padding=0.1", "--verbose"))
    assert r.returncode == 0, r.stderr
    decoded, _, _ = (int(x) for x in re.search(r"(\d+) frames decoded", r.stderr).groups() + (0, 0))
    assert decoded == whole and "resuming" not in r.stderr
    assert not old.exists() and work_dirs(workdir / "out") == []


def test_segments_do_not_depend_on_resume_or_threads(workdir, standin_models, clip, reference):
    """Other ORT threads, lanes, frames in flight and batch: the same bytes (everything that
    changes them is pinned in the plan)."""
    out = workdir / "out" / "clip.mp4"
    r = run_cli(*render_args(workdir, standin_models, clip.path, out, "execution.threads=2",
                             "execution.lanes=3", "execution.frames_in_flight=7", cache="cache2"))
    assert r.returncode == 0, r.stderr
    assert sha(out) == reference


@pytest.mark.parametrize("at_once,extra", [(2, ()), (3, ("execution.lanes=2",))])
def test_segments_rendered_at_once_give_the_same_bytes(workdir, standin_models, clip, reference,
                                                       at_once, extra):
    """execution.parallel_segments=2 and 3 (with two lanes each): the six one-second segments
    are rendered side by side, each with its own decoder and encoder (and, with profile low's
    stabilisation, its own pre-roll and look-ahead), sharing the models and the frames in
    flight; the output is the one-at-a-time render's, and the report says how many ran at
    once."""
    import json

    out = workdir / f"at-once-{at_once}" / "clip.mp4"
    r = run_cli(*render_args(workdir, standin_models, clip.path, out,
                             f"execution.parallel_segments={at_once}", *extra,
                             cache=f"cache-at-once-{at_once}"))
    assert r.returncode == 0, r.stderr
    assert sha(out) == reference
    report = json.loads(Path(str(out) + ".report.json").read_text())
    assert report["timing"]["parallel_segments"] == at_once
    assert len(report["segments"]) == 6


def test_colour_match_and_stabilisation_give_the_same_bytes_for_any_segments_at_once(
        workdir, standin_models, clip):
    """swap.color_match=lab smooths each track's colour from frame to frame and stabilisation
    (on in profile low) filters its points: both start from each segment's pre-roll, so one
    segment at a time and three at once (two lanes each) write the same bytes."""
    outs = []
    for n, extra in ((1, ()), (3, ("execution.lanes=2",))):
        out = workdir / f"colour-{n}" / "clip.mp4"
        r = run_cli(*render_args(workdir, standin_models, clip.path, out, "swap.color_match=lab",
                                 f"execution.parallel_segments={n}", *extra,
                                 cache=f"cache-colour-{n}"))
        assert r.returncode == 0, r.stderr
        outs.append(sha(out))
    assert outs[0] == outs[1]


#: every quality tool on: hyperswap in 512-px tiles, the occlusion, region and area masks,
#: 2dfan4, colour match and GFPGAN (profile low adds stabilisation)
QUALITY = ("swap.model=hyperswap_1a_256", "swap.precision=fp32", "swap.pixel_boost=512",
           "mask.occluder=xseg_1", "mask.parser=bisenet_resnet_34", "mask.regions=skin,eyebrows",
           "mask.areas=mouth", "landmark.model=2dfan4", "swap.color_match=lab",
           "enhance.enabled=true")


def test_every_quality_tool_on_gives_the_same_bytes_resumed_and_sharded(workdir, standin_models,
                                                                        clip):
    """With every quality tool on, a render killed (-9) after two segments and resumed, and the
    same render as three shards assembled, write the uninterrupted render's bytes."""
    def args(name: str, *extra: str) -> list[str]:
        return render_args(workdir, standin_models, clip.path, workdir / name / "clip.mp4",
                           *QUALITY, "lock.device=none", *extra, cache=f"cache-{name}")

    r = run_cli(*args("whole"))
    assert r.returncode == 0, r.stderr
    report = json.loads((workdir / "whole" / "clip.mp4.report.json").read_text())
    roles = {m["role"] for m in report["models"]}
    assert {"occlusion", "region", "landmark"} <= roles, roles
    whole = sha(workdir / "whole" / "clip.mp4")

    (workdir / "resumed").mkdir()
    kill_after_segments(args("resumed"), workdir / "resumed", 2)
    r = run_cli(*args("resumed"), "--verbose")
    assert r.returncode == 0, r.stderr
    assert resumed_line(r.stderr)[1] >= 2
    assert sha(workdir / "resumed" / "clip.mp4") == whole

    for i in (2, 0, 1):
        r = run_cli(*args("sharded", f"shard={i}/3"))
        assert r.returncode == 0, r.stderr
    r = run_cli("assemble", *args("sharded"))
    assert r.returncode == 0, r.stderr
    assert sha(workdir / "sharded" / "clip.mp4") == whole


def test_auto_renders_one_segment_at_a_time_on_a_small_machine(workdir, standin_models, clip,
                                                              reference):
    """parallel_segments=auto (the default) is 1 below 8 cores, such as this class of machine."""
    import json

    if len(os.sched_getaffinity(0)) >= 8:
        pytest.skip("this machine has 8 cores or more: auto renders several segments at once")
    out = workdir / "at-once-auto" / "clip.mp4"
    r = run_cli(*render_args(workdir, standin_models, clip.path, out,
                             "execution.parallel_segments=auto", cache="cache-at-once-auto"))
    assert r.returncode == 0, r.stderr
    assert sha(out) == reference
    assert json.loads(Path(str(out) + ".report.json").read_text())["timing"][
        "parallel_segments"] == 1


def test_saved_optimised_graphs_give_the_same_bytes(workdir, standin_models, clip, reference):
    """execution.graph_cache_min_mb=0: the first render saves every model's optimised graph, the
    second loads them; both outputs are those of a render that optimised at load."""
    out = workdir / "graphs" / "clip.mp4"
    for loads in (False, True):
        r = run_cli(*render_args(workdir, standin_models, clip.path, out, "--debug",
                                 "execution.graph_cache_min_mb=0", "skip_done=false", cache="cache4"))
        assert r.returncode == 0, r.stderr
        assert sha(out) == reference
        assert ("optimised graph from" in r.stderr) is loads, r.stderr[-3000:]
        assert "removing damaged graph cache entry" not in r.stderr
    saved = [p for p in (workdir / "cache4" / "onnxruntime").iterdir() if (p / "stamp.json").is_file()]
    assert len(saved) >= 3, saved         # detector, embedder, swapper


def test_thread_policy_decides_mid_render_and_bytes_stay(workdir, standin_models, clip, reference):
    """execution.threads=0: two lanes of swaps on the CPU provider; the policy measures the first
    frames and, in the middle of a segment, either renices ffmpeg or goes down to one lane; the
    bytes stay those of a render with one lane and one fixed thread."""
    import json

    out = workdir / "policy" / "clip.mp4"   # same name: the mark records it
    r = run_cli(*render_args(workdir, standin_models, clip.path, out, "execution.threads=0",
                             "--verbose", cache="cache3"))
    assert r.returncode == 0, r.stderr
    assert sha(out) == reference
    threads = json.loads(Path(str(out) + ".report.json").read_text())["timing"]["threads"]
    cores = len(os.sched_getaffinity(0))
    if cores > 1:
        assert threads["why"] != "undecided" and "CPU-ms/frame" in threads["why"], threads
        assert "threads: render" in r.stderr
        assert threads["onnxruntime_threads"] == cores // 2
        if "ffmpeg at nice" in threads["why"]:
            assert threads["lanes"] == 2 and threads["ffmpeg_nice"] > 0
        else:
            assert threads["lanes"] == 1 and threads["ffmpeg_nice"] == 0


# -- inputs that lie ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def truncated(tmp_path_factory, clip):
    """The clip with its last ~40 % cut off (moov at the front, so the container still promises
    every frame)."""
    d = tmp_path_factory.mktemp("trunc")
    fast = d / "fast.mp4"
    subprocess.run(["ffmpeg", "-v", "error", "-i", str(clip.path), "-c", "copy", "-movflags",
                    "+faststart", str(fast)], check=True)
    cut = d / "cut.mp4"
    data = fast.read_bytes()
    cut.write_bytes(data[:int(len(data) * 0.6)])
    return cut


def test_truncated_target_is_exit_3_with_the_frame_numbers(workdir, standin_models, truncated, clip):
    out = workdir / "out" / "cut.mp4"
    r = run_cli(*render_args(workdir, standin_models, truncated, out, "progress=off"))
    assert r.returncode == 3, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr                      # exactly one line
    m = re.search(r"ends at frame (\d+) of (\d+) \(file truncated\?\)", lines[0])
    assert m and str(truncated) in lines[0], lines[0]
    assert int(m.group(2)) == clip.frame_count and 0 < int(m.group(1)) < clip.frame_count
    assert list((workdir / "out").iterdir()) == []


def test_allow_partial_renders_the_readable_part(workdir, standin_models, truncated, clip):
    out = workdir / "out" / "cut.mp4"
    r = run_cli(*render_args(workdir, standin_models, truncated, out, "allow_partial=true"))
    assert r.returncode == 0, r.stderr
    p = mf.probe_counts(out)
    assert 0 < p.frames < clip.frame_count
    assert p.audio_duration == pytest.approx(p.frames / 25, abs=0.05)


def test_damaged_audio_in_the_target_is_named_as_the_cause(workdir, standin_models, clip, tmp_path):
    """Noise over a dozen of the clip's audio packets: the video decodes, the audio, copied as it
    is, does not, so the output fails its final check. Exit 3 naming the target as damaged; it was
    exit 5 'assembled X is unreadable: cannot decode <a temp file's path>'."""
    import random

    packets = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "a:0", "-show_entries",
                              "packet=pos,size", "-of", "csv=p=0", str(clip.path)],
                             capture_output=True, text=True, check=True).stdout.split()
    data = bytearray(clip.path.read_bytes())
    noise = random.Random(0)
    for line in packets[100:112]:
        size, pos = (int(v) for v in line.split(","))   # ffprobe prints its own field order
        data[pos:pos + size] = noise.randbytes(size)
    bad = tmp_path / "noisy.mp4"
    bad.write_bytes(bytes(data))
    out = workdir / "out" / "noisy.mp4"
    r = run_cli(*render_args(workdir, standin_models, bad, out, "progress=off"))
    assert r.returncode == 3, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert "assembled noisy.mp4 does not decode" in last and f"nor does its target {bad}" in last, last
    assert ".render-" not in last and not out.exists()


def damage_packet(src: Path, dst: Path, pick) -> None:
    """``src`` with one video packet made unreadable (its first NAL unit's length set to
    2^32-1): ``pick`` chooses it from the (pos, pts) of the packets in file order."""
    rows = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                           "packet=pos,pts", "-of", "csv=p=0", str(src)],
                          capture_output=True, text=True, check=True).stdout.split()
    packets = [(int(pos), int(pts)) for pts, pos in (r.split(",") for r in rows)]
    data = bytearray(src.read_bytes())
    at = pick(packets)[0]
    data[at:at + 4] = b"\xff\xff\xff\xff"
    dst.write_bytes(bytes(data))


def test_a_frame_that_does_not_decode_keeps_the_later_frames_in_place(workdir, standin_models,
                                                                      tmp_path):
    """One packet inside the last segment (frames 75-99) does not decode: its slot takes the next
    decoded frame, the render completes with a warning naming the segment's frames and the
    decoder's complaint, and every frame after it is where it was (passed through as they came,
    they moved up by one; the segment then fell a frame short and the render failed)."""
    silent = mf.make_clip(tmp_path / "silent.mp4", width=640, height=360, seconds=4.0, audio=False)
    bad = tmp_path / "damaged.mp4"
    damage_packet(silent.path, bad, lambda packets: packets[90])
    out = workdir / "out" / "damaged.mp4"
    r = run_cli(*render_args(workdir, standin_models, bad, out, "progress=off"))
    assert r.returncode == 0, r.stderr
    assert re.search(r"decoding damaged.mp4, frames 75-99:.*Invalid", r.stderr), r.stderr
    assert mf.probe_counts(out).frames == 100
    assert run_cli("verify", str(out)).returncode == 0


def _frame_md5s(decode: tuple[str, ...]) -> list[str]:
    """The MD5 of each raw frame a segment's decode arguments give (framemd5 for rawvideo)."""
    argv = list(decode)
    argv[argv.index("-f") + 1], argv[-1] = "framemd5", "-"
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return [line.rsplit(",", 1)[1].strip() for line in out.splitlines() if line and line[0] != "#"]


def _passthrough(decode: tuple[str, ...]) -> tuple[str, ...]:
    """The same decode with the frames passed through as they come (no grid)."""
    argv = list(decode)
    argv[argv.index("-fps_mode") + 1] = "passthrough"
    del argv[argv.index("-r"):argv.index("-r") + 2]
    del argv[argv.index("-vf"):argv.index("-vf") + 2]     # the grid's setpts alone
    return tuple(argv)


def _segment_decodes(path: Path, seconds: str) -> list:
    """The plan's segments of ``path`` (profile low: each decodes a pre-roll and a look-ahead)."""
    from render.config import load_config
    from render.media.probe import probe
    from render.media.timing import frame_times
    from render.plan import Identity, plan_render

    info = probe(path)
    cfg = load_config({"profile": "low", "segment.seconds": seconds}, env={})
    plan = plan_render(cfg, source=path, target=path, output=path.with_name("o.mp4"), info=info,
                       times=frame_times(info), identity=Identity("", "", None, {}, {}))
    return list(plan.segments)


def _own_md5s(seg) -> list[str]:
    """The MD5s of a segment's own frames: its decode less the pre-roll and the look-ahead."""
    md5s = _frame_md5s(seg.decode)
    assert len(md5s) == seg.preroll + seg.frames + seg.lookahead, seg
    return md5s[seg.preroll:seg.preroll + seg.frames]


def test_segment_decodes_put_frames_on_the_grid_without_moving_one(tmp_path):
    """The decode arguments of every segment give exactly the frames ffmpeg passes through, for a
    video that starts after its audio too (mp4 and mkv); with one packet undecodable, exactly one
    slot differs: it holds the next frame, and every later frame is where it belongs."""
    silent = mf.make_clip(tmp_path / "silent.mp4", width=320, height=240, seconds=4.0, audio=False)
    late = tmp_path / "late.mkv"
    subprocess.run(["ffmpeg", "-v", "error", "-itsoffset", "0.2", "-i", str(silent.path), "-f",
                    "lavfi", "-i", "sine=duration=5", "-map", "0:v", "-map", "1:a", "-c:v", "copy",
                    "-c:a", "aac", str(late)], check=True)
    # the last frame lasting four: the container's average rate is 29.27, the frames keep 30
    # (each interval within a millisecond of 1/29.27 s: constant rate; on a 29.27 grid the frames
    # drifted by up to 3 slots over the segment, some repeated, others lost)
    c30 = mf.make_clip(tmp_path / "c30.mp4", width=320, height=240, fps=30, seconds=4.0,
                       audio=False, preset="ultrafast")
    odd = tmp_path / "odd-last.mp4"
    subprocess.run(["ffmpeg", "-v", "error", "-i", str(c30.path), "-c", "copy", "-bsf:v",
                    "setts=duration=if(eq(N\\,119)\\,4*DURATION\\,DURATION)", str(odd)],
                   check=True)
    for path, seconds, rate, n in ((silent.path, "1", "25", 25), (late, "1", "25", 25),
                                   (odd, "10", "30", 120)):
        for seg in _segment_decodes(path, seconds):
            decode = seg.decode
            grid = _frame_md5s(decode)
            assert ("-r", rate) in zip(decode, decode[1:]), decode
            assert seg.frames == n and len(grid) == seg.preroll + n + seg.lookahead
            assert grid == _frame_md5s(_passthrough(decode)), (path, decode)
    bad = tmp_path / "damaged.mp4"
    damage_packet(silent.path, bad, lambda packets: packets[60])
    good = [m for s in _segment_decodes(silent.path, "1") for m in _own_md5s(s)]
    got = [m for s in _segment_decodes(bad, "1") for m in _own_md5s(s)]
    differ = [i for i, (a, b) in enumerate(zip(good, got)) if a != b]
    assert len(got) == 100 and len(differ) == 1, differ
    assert got[differ[0]] == good[differ[0] + 1]


def test_transport_stream_segments_start_on_their_own_first_frame(tmp_path):
    """An MPEG-TS seek lands near the time asked, and decoding starts at the next keyframe: the
    segments inside a GOP began up to a GOP late (frames 50-74 in segment 25-49, or too few).
    Decoded from a margin before the keyframe before them, every segment's frames are the
    frames a straight decode of the whole file gives there."""
    silent = mf.make_clip(tmp_path / "silent.mp4", width=320, height=240, seconds=4.0, audio=False)
    ts = tmp_path / "gop50.ts"
    subprocess.run(["ffmpeg", "-v", "error", "-i", str(silent.path), "-c:v", "libx264", "-preset",
                    "fast", "-g", "37", "-bf", "3", "-f", "mpegts", str(ts)], check=True)
    full = subprocess.run(["ffmpeg", "-v", "error", "-i", str(ts), "-map", "0:v:0", "-sws_flags",
                           "accurate_rnd+full_chroma_int+bitexact", "-fps_mode", "passthrough",
                           "-pix_fmt", "bgr24", "-f", "framemd5", "-"],
                          capture_output=True, text=True, check=True).stdout
    truth = [line.rsplit(",", 1)[1].strip() for line in full.splitlines() if line and line[0] != "#"]
    segments = _segment_decodes(ts, "1")
    assert any(a.startswith("trim=start=") for s in segments for a in s.decode)
    got = [m for s in segments for m in _own_md5s(s)]
    assert len(truth) == len(got) == 100
    assert [i for i, (a, b) in enumerate(zip(truth, got)) if a != b] == []
    for s in segments:      # the pre-roll and the look-ahead are the target's frames there too
        assert _frame_md5s(s.decode) == truth[s.start - s.preroll:s.end + s.lookahead]


def test_frames_missing_at_the_end_are_damage_not_a_truncation(workdir, standin_models, tmp_path):
    """The packet of the last frame shown does not decode: nothing after it can take its slot.
    Exit 3 naming the segment's frames and the decoder's complaint; it was "ends at frame N (file
    truncated?) ... allow_partial=true renders the readable part", which it did not."""
    silent = mf.make_clip(tmp_path / "silent.mp4", width=640, height=360, seconds=4.0, audio=False)
    bad = tmp_path / "damaged.mp4"
    damage_packet(silent.path, bad, lambda packets: max(packets, key=lambda p: p[1]))
    out = workdir / "out" / "damaged.mp4"
    r = run_cli(*render_args(workdir, standin_models, bad, out, "progress=off"))
    assert r.returncode == 3, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert re.search(r"frames 75-99 decode to 24 frames of 25: the file is damaged there "
                     r"\(decoder: .*Invalid data", lines[0]), lines[0]
    assert "truncated" not in lines[0] and "allow_partial" not in lines[0]
    assert not out.exists()


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None,
                    reason="mounting a small tmpfs needs root")
# one segment: the assembly only links the segment (no room needed) and then signs it, which is
# what the full disk stops
@contextlib.contextmanager
def small_disk(folder: Path, kib: int):
    """A tmpfs of ``kib`` KiB mounted on ``folder`` (skips where it cannot be mounted)."""
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={kib}k", "tmpfs", str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.mark.parametrize("seconds", ["1", pytest.param("60", marks=pytest.mark.skipif(
    importlib.util.find_spec("c2pa") is None, reason="c2pa-python is not installed: nothing to sign"))],
    ids=["segments", "one-segment"])
def test_disk_full_during_assembly_keeps_the_existing_output(workdir, standin_models, clip, tmp_path,
                                                             seconds):
    # a first render elsewhere tells the size of one output
    probe_out = workdir / "out" / "size.mp4"
    r = run_cli(*render_args(workdir, standin_models, clip.path, probe_out))
    assert r.returncode == 0, r.stderr
    size = probe_out.stat().st_size
    # room for the existing output, the segments and about half of the assembled file
    with small_disk(tmp_path / "disk", int(size * 2.5 / 1024) + 64) as disk:
        out = disk / "clip.mp4"
        shutil.copyfile(probe_out, out)
        before = sha(out)
        r = run_cli(*render_args(workdir, standin_models, clip.path, out, "mask.padding=0.05",
                                 "progress=off", f"segment.seconds={seconds}"))
        assert r.returncode != 0, "a render on a full disk succeeded?"
        assert "No space left on device" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert sha(out) == before, "the existing output was touched"
        assert visible(disk) == ["clip.mp4"]
        for w in work_dirs(disk):
            assert not [p for p in w.iterdir() if p.name.startswith("clip")], list(w.iterdir())


def test_disk_full_that_ffmpeg_reports_with_exit_0_is_exit_5_naming_the_folder(
        workdir, standin_models, clip, tmp_path):
    """With a little less room than the segment needs, ffmpeg prints "Error writing trailer …: No
    space left on device" and exits 0: the render said "cannot read … Invalid data" (exit 3,
    blaming the media) and left the temp segment behind."""
    probe_out = workdir / "out" / "size.mp4"
    r = run_cli(*render_args(workdir, standin_models, clip.path, probe_out, "segment.seconds=60"))
    assert r.returncode == 0, r.stderr
    with small_disk(tmp_path / "disk", int(probe_out.stat().st_size * 0.9 / 1024)) as disk:
        out = disk / "clip.mp4"
        r = run_cli(*render_args(workdir, standin_models, clip.path, out, "segment.seconds=60",
                                 "progress=off"))
        assert r.returncode == 5, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "No space left on device in " in lines[0], r.stderr
        (work,) = work_dirs(disk)
        assert str(work) in lines[0], r.stderr
        assert visible(disk) == []
        assert not [p for p in work.iterdir() if ".tmp-" in p.name], list(work.iterdir())


def test_the_finished_segment_is_copied_where_there_are_no_hard_links(tmp_path, monkeypatch):
    from render import assembly
    from render.errors import RenderFailed

    src, dst = tmp_path / "seg-0000.mp4", tmp_path / "out.tmp-h-1.mp4"
    src.write_bytes(b"finished file")
    assembly._link_or_copy(src, dst, "assembling out.mp4")
    assert dst.read_bytes() == b"finished file" and os.path.samefile(src, dst)
    assembly._link_or_copy(src, dst, "assembling out.mp4")     # a temp left by this process: replaced
    assert os.path.samefile(src, dst)
    dst.unlink()

    def no_links(a, b):
        raise PermissionError(1, "Operation not permitted")
    monkeypatch.setattr(assembly.os, "link", no_links)
    assembly._link_or_copy(src, dst, "assembling out.mp4")
    assert dst.read_bytes() == b"finished file" and not os.path.samefile(src, dst)

    def no_room(a, b):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(assembly.shutil, "copyfile", no_room)
    with pytest.raises(RenderFailed, match="^assembling out.mp4: cannot copy seg-0000.mp4: No space"):
        assembly._link_or_copy(src, dst, "assembling out.mp4")


# -- timing and containers ------------------------------------------------------------------------
def pts_list(path: Path) -> list[float]:
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                          "packet=pts_time", "-of", "csv=p=0", str(path)],
                         capture_output=True, text=True, check=True).stdout
    pts = sorted(float(x) for x in out.split())
    return [round(t - pts[0], 6) for t in pts]


@pytest.mark.skipif(shutil.which("mkvmerge") is None, reason="mkvtoolnix (mkvmerge) is not installed")
def test_variable_frame_rate_keeps_every_timestamp(workdir, standin_models, clip, tmp_path):
    vfr = tmp_path / "vfr.mp4"
    # frames 0-49 at 25 fps, then at 12.5 fps: the second half of the clip runs twice as long
    subprocess.run(["ffmpeg", "-v", "error", "-i", str(clip.path), "-vf",
                    "setpts='(N/25+if(gte(N,50),(N-50)/25,0))/TB'", "-fps_mode", "passthrough",
                    "-video_track_timescale", "90000", "-c:v", "libx264", "-crf", "12",
                    "-an", str(vfr)], check=True)
    src = pts_list(vfr)
    assert len(set(round(b - a, 4) for a, b in zip(src, src[1:]))) > 1, "the test clip is not VFR"
    out = workdir / "out" / "vfr.mp4"
    r = run_cli(*render_args(workdir, standin_models, vfr, out))
    assert r.returncode == 0, r.stderr
    dst = pts_list(out)
    assert len(dst) == len(src)
    assert max(abs(a - b) for a, b in zip(src, dst)) <= 0.001


@pytest.mark.parametrize("ext", [".mp4", ".mkv"])
def test_audio_longer_than_a_late_video_is_cut_to_the_video(workdir, standin_models, tmp_path, ext):
    """Video starting 0.2 s after its audio, audio running 1 s past the video's end (the MKVs
    ffmpeg writes with AAC start the video late too): the audio is re-encoded from the video's
    start to its end, and the plan expects that length (it expected the whole track, and every
    such render failed at its final check with exit 5)."""
    short = mf.make_clip(tmp_path / "short.mp4", width=320, height=240, seconds=2.0)
    late = tmp_path / f"late{ext}"
    subprocess.run(["ffmpeg", "-v", "error", "-itsoffset", "0.2", "-i", str(short.path), "-f", "lavfi",
                    "-i", "sine=frequency=440:duration=3", "-map", "0:v", "-map", "1:a", "-c:v", "copy",
                    "-c:a", "aac", str(late)], check=True)
    src = mf.probe_counts(late)
    seconds = short.frame_count / 25
    assert src.audio_duration > seconds + 0.5
    out = workdir / "out" / f"late{ext}"
    r = run_cli(*render_args(workdir, standin_models, late, out))
    assert r.returncode == 0, r.stderr
    p = mf.probe_counts(out)
    assert p.frames == short.frame_count
    assert p.audio_duration == pytest.approx(seconds, abs=0.05)
    assert run_cli("verify", f"{out}.report.json").returncode == 0
    # a trim of the video's last 0.16 s: 2.04 s from the container's start, past the video's
    # length (2 s) but inside the video (0.2-2.2 s); it was refused as "after the end"
    cut = workdir / "out" / f"cut{ext}"
    r = run_cli(*render_args(workdir, standin_models, late, cut, "trim=1.84-"))
    assert r.returncode == 0, r.stderr
    p = mf.probe_counts(cut)
    assert p.frames == 4 and p.audio_duration == pytest.approx(0.16, abs=0.05)


def test_constant_frame_rate_stays_exactly_constant(workdir, standin_models, clip):
    out = workdir / "out" / "cfr.mp4"
    r = run_cli(*render_args(workdir, standin_models, clip.path, out))
    assert r.returncode == 0, r.stderr
    ticks = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                            "packet=pts", "-of", "csv=p=0", str(out)],
                           capture_output=True, text=True, check=True).stdout.split()
    ticks = sorted(int(t) for t in ticks)
    assert len(ticks) == clip.frame_count
    assert len({b - a for a, b in zip(ticks, ticks[1:])}) == 1


def test_webm_output_is_vp9_and_opus(workdir, standin_models, tmp_path):
    short = mf.make_clip(tmp_path / "short.mp4", width=320, height=240, seconds=2.0)
    out = workdir / "out" / "short.webm"
    r = run_cli(*render_args(workdir, standin_models, short.path, out))
    assert r.returncode == 0, r.stderr
    p = mf.probe_counts(out)
    src = mf.probe_counts(short.path)
    assert (p.video_codec, p.audio_codec) == ("vp9", "opus")
    assert p.frames == short.frame_count
    assert p.duration == pytest.approx(src.duration, abs=0.05)
    assert p.audio_duration == pytest.approx(src.audio_duration, abs=0.05)


def test_forced_codec_that_webm_cannot_hold_fails_before_any_work(workdir, standin_models, clip):
    out = workdir / "out" / "x.webm"
    r = run_cli(*render_args(workdir, standin_models, clip.path, out, "encode.codec=libx264",
                             "progress=off"))
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "render: error: encode.codec=libx264 cannot go into .webm files (use one of libvpx-vp9, "
        "libvpx, libaom-av1, libsvtav1)"]
    assert list((workdir / "out").iterdir()) == []


def test_source_with_several_faces_uses_the_largest_and_says_so_every_time(workdir, standin_models, tmp_path):
    import cv2
    img = mf.background(640, 480)
    mf.draw_face(img, 200, 240, 200)
    mf.draw_face(img, 470, 240, 120)
    src = tmp_path / "two.png"
    cv2.imwrite(str(src), img)
    target = mf.make_image_target(workdir / "in" / "p.png", width=320, height=240)
    r = run_cli("profile=low", f"source={src}", f"target={target.path}",
                f"output={workdir / 'out' / 'p.png'}", "--verbose",
                *model_args(standin_models, workdir / "cache"))
    assert r.returncode == 0, r.stderr
    assert "has 2 faces: using the largest (source_face=N picks another)" in r.stderr
    # the embedding is cached now: the next render says it all the same
    assert any((workdir / "cache" / "embeddings").iterdir())
    r = run_cli("profile=low", f"source={src}", f"target={target.path}",
                f"output={workdir / 'out' / 'p2.png'}", "--verbose",
                *model_args(standin_models, workdir / "cache"))
    assert r.returncode == 0, r.stderr
    assert "has 2 faces: using the largest (source_face=N picks another)" in r.stderr
    r = run_cli("profile=low", f"source={src}", f"target={target.path}", "source_face=5",
                f"output={workdir / 'out' / 'q.png'}", "progress=off",
                *model_args(standin_models, workdir / "cache"))
    assert r.returncode == 2 and "has 2 faces" in r.stderr


def test_nvenc_and_nvdec_fall_back_to_software_without_a_gpu(workdir, standin_models, tmp_path):
    """This machine has no NVIDIA GPU: the render goes on in software and says so once each."""
    short = mf.make_clip(tmp_path / "hw.mp4", width=320, height=240, seconds=1.0)
    out = workdir / "out" / "hw.mp4"
    r = run_cli(*render_args(workdir, standin_models, short.path, out, "encode.codec=h264_nvenc",
                             "decode.hwaccel=cuda", "progress=off"))
    assert r.returncode == 0, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 2, r.stderr
    assert "h264_nvenc is not available here" in lines[0] and "libx264" in lines[0]
    assert "no CUDA device for NVDEC" in lines[1]
    assert mf.probe_counts(out).video_codec == "h264"
