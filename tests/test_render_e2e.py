"""End to end through the CLI: generated clip with audio + stand-in models → rendered output."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from render.standins import media as mf
from conftest import cli_env, model_args, run_cli


def _region_masks(shape, boxes, grow=0.3, shrink=0.2):
    """(inside: centre part of each box, outside: everything beyond the grown boxes)."""
    h, w = shape[:2]
    inside = np.zeros((h, w), bool)
    near = np.zeros((h, w), bool)
    for x1, y1, x2, y2 in boxes:
        bw, bh = x2 - x1, y2 - y1
        inside[int(y1 + shrink * bh):int(y2 - shrink * bh), int(x1 + shrink * bw):int(x2 - shrink * bw)] = True
        near[max(0, int(y1 - grow * bh)):int(y2 + grow * bh), max(0, int(x1 - grow * bw)):int(x2 + grow * bw)] = True
    return inside, ~near


def _diff(a, b):
    return np.abs(a.astype(np.int16) - b.astype(np.int16)).max(axis=2)


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    d = tmp_path_factory.mktemp("clip")
    return mf.make_clip(d / "clip.mp4", width=1280, height=720, seconds=3.0)


def test_video_render_end_to_end(workdir, standin_models, clip):
    out = workdir / "out" / "clip.mp4"
    r = run_cli("profile=low", f"source={workdir / 'in' / 'source.jpg'}", f"target={clip.path}",
                f"output={out}", "select.mode=many", *model_args(standin_models, workdir / "cache"))
    assert r.returncode == 0, r.stderr
    # no temp files left: the output and its report
    assert sorted(p.name for p in out.parent.iterdir()) == ["clip.mp4", "clip.mp4.report.json"]
    src, dst = mf.probe_counts(clip.path), mf.probe_counts(out)
    assert dst.frames == src.frames == clip.frame_count
    assert dst.fps == src.fps and (dst.width, dst.height) == (1280, 720)
    assert dst.audio_codec is not None, "audio was dropped"
    assert abs(dst.audio_duration - src.audio_duration) <= 1 / float(src.fps) + 1e-3
    a, b = mf.read_frames(clip.path), mf.read_frames(out)
    assert a.shape == b.shape
    changed_faces = 0
    for i, boxes in enumerate(clip.boxes):
        d = _diff(a[i], b[i])
        if not boxes:   # frame without faces: unchanged within codec tolerance
            assert d.mean() < 2.0 and np.percentile(d, 99.5) < 16, f"frame {i} changed"
            continue
        inside, outside = _region_masks(a[i].shape, boxes)
        assert d[outside].mean() < 2.0 and np.percentile(d[outside], 99.5) < 16, f"frame {i} outside"
        for box in boxes:
            ins, _ = _region_masks(a[i].shape, [box])
            assert d[ins].mean() > 8, f"frame {i}: face {box} not swapped"
            changed_faces += 1
    assert changed_faces >= len(clip.frames_with_faces())
    assert "frame" in r.stderr and "fps" in r.stderr     # plain progress lines off a TTY


def test_one_mode_swaps_only_the_largest_face(workdir, standin_models, clip):
    out = workdir / "out" / "one.mp4"
    r = run_cli("profile=low", f"source={workdir / 'in' / 'source.jpg'}", f"target={clip.path}",
                f"output={out}", *model_args(standin_models, workdir / "cache"))
    assert r.returncode == 0, r.stderr
    a, b = mf.read_frames(clip.path), mf.read_frames(out)
    two = [i for i, boxes in enumerate(clip.boxes) if len(boxes) == 2]
    assert two
    i = two[len(two) // 2]
    small, large = sorted(clip.boxes[i], key=lambda bx: (bx[2] - bx[0]) * (bx[3] - bx[1]))
    d = _diff(a[i], b[i])
    ins_small, _ = _region_masks(a[i].shape, [small])
    ins_large, _ = _region_masks(a[i].shape, [large])
    assert d[ins_large].mean() > 8 and d[ins_small].mean() < 2.0


def test_high_profile_with_enhancer_and_feather_mask(workdir, standin_models, tmp_path):
    clip = mf.make_clip(tmp_path / "short.mp4", width=640, height=360, seconds=1.0)
    out = workdir / "out" / "short.mp4"
    r = run_cli("profile=high", f"source={workdir / 'in' / 'source.jpg'}", f"target={clip.path}",
                f"output={out}", "execution.providers=cpu",
                *model_args(standin_models, workdir / "cache"))
    assert r.returncode == 0, r.stderr
    assert mf.probe_counts(out).frames == clip.frame_count
    a, b = mf.read_frames(clip.path), mf.read_frames(out)
    i = clip.frames_with_faces()[-1]
    largest = max(clip.boxes[i], key=lambda bx: (bx[2] - bx[0]) * (bx[3] - bx[1]))
    ins, _ = _region_masks(a[i].shape, [largest])
    _, outside = _region_masks(a[i].shape, clip.boxes[i])
    d = _diff(a[i], b[i])
    # colour match (on in high) moves the stand-in swapper's tint back to the target's colour
    # statistics: the face still changes, by less than a plain swap's > 8
    assert d[ins].mean() > 5 and d[outside].mean() < 2.0


def test_image_target(workdir, standin_models):
    target = mf.make_image_target(workdir / "in" / "photo.png")
    out = workdir / "out" / "photo.png"
    # detect.size=640: the stand-in detector's fixed box sizes fit the drawn faces at 640
    r = run_cli("profile=moderate", f"source={workdir / 'in' / 'source.jpg'}", f"target={target.path}",
                f"output={out}", "detect.size=640", *model_args(standin_models, workdir / "cache"))
    assert r.returncode == 0, r.stderr
    import cv2
    a, b = cv2.imread(str(target.path)), cv2.imread(str(out))
    assert a.shape == b.shape
    inside, outside = _region_masks(a.shape, target.boxes)
    d = _diff(a, b)
    # colour match (on in moderate) pulls the stand-in's tint back toward the target's colours
    assert d[inside].mean() > 5 and d[outside].max() == 0    # png: lossless outside the face


def test_folder_mode_renders_everything_in_input_dir(workdir, standin_models):
    mf.make_clip(workdir / "in" / "a.mp4", width=320, height=240, seconds=0.6)
    mf.make_image_target(workdir / "in" / "b.jpg", width=320, height=240)
    r = run_cli("profile=low", f"input_dir={workdir / 'in'}", f"output_dir={workdir / 'out'}",
                *model_args(standin_models, workdir / "cache"))
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (workdir / "out").iterdir()) == [
        "a.mp4", "a.mp4.report.json", "b.jpg", "b.jpg.report.json"]


def test_source_embedding_is_cached_on_disk(workdir, standin_models):
    target = mf.make_image_target(workdir / "in" / "p.png", width=320, height=240)
    cache = workdir / "cache"
    for n in (1, 2):
        r = run_cli("profile=low", f"source={workdir / 'in' / 'source.jpg'}", f"target={target.path}",
                    f"output={workdir / 'out' / f'p{n}.png'}", *model_args(standin_models, cache))
        assert r.returncode == 0, r.stderr
    files = list((cache / "embeddings").glob("*.npy"))
    assert len(files) == 1
    import cv2
    assert np.array_equal(cv2.imread(str(workdir / "out" / "p1.png")),
                          cv2.imread(str(workdir / "out" / "p2.png")))


# -- bad input: one clear line, a non-zero exit, nothing in the output folder ------------------------
def _bad(workdir, standin_models, *args, code):
    r = run_cli(*args, *model_args(standin_models, workdir / "cache"))
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == code, r.stderr
    assert lines and lines[-1].startswith("render: error: "), r.stderr
    assert "Traceback" not in r.stderr
    assert list((workdir / "out").iterdir()) == []
    return lines[-1]


def test_missing_source(workdir, standin_models, clip):
    msg = _bad(workdir, standin_models, f"source={workdir / 'nope.jpg'}", f"target={clip.path}",
               f"output={workdir / 'out' / 'x.mp4'}", code=3)
    assert "source image not found" in msg and "nope.jpg" in msg


def test_missing_target(workdir, standin_models):
    msg = _bad(workdir, standin_models, f"source={workdir / 'in' / 'source.jpg'}",
               f"target={workdir / 'missing.mp4'}", f"output={workdir / 'out' / 'x.mp4'}", code=3)
    assert "target not found" in msg


def test_source_without_a_face(workdir, standin_models, clip):
    import cv2
    blank = workdir / "blank.png"
    cv2.imwrite(str(blank), mf.background(320, 240))
    msg = _bad(workdir, standin_models, f"source={blank}", f"target={clip.path}",
               f"output={workdir / 'out' / 'x.mp4'}", code=3)
    assert "no face found in source image" in msg


def test_unreadable_video(workdir, standin_models):
    junk = workdir / "junk.mp4"
    junk.write_bytes(os.urandom(4096))
    msg = _bad(workdir, standin_models, f"source={workdir / 'in' / 'source.jpg'}", f"target={junk}",
               f"output={workdir / 'out' / 'x.mp4'}", code=3)
    assert "junk.mp4" in msg


def test_unknown_profile(workdir, standin_models, clip):
    msg = _bad(workdir, standin_models, "profile=ultra", f"source={workdir / 'in' / 'source.jpg'}",
               f"target={clip.path}", f"output={workdir / 'out' / 'x.mp4'}", code=2)
    assert "unknown profile 'ultra'" in msg


def test_unknown_key(workdir, standin_models, clip):
    msg = _bad(workdir, standin_models, "detect.sise=320", f"target={clip.path}", code=2)
    assert "unknown key 'detect.sise'" in msg and "detect.size" in msg


def test_empty_input_dir(workdir, standin_models):
    msg = _bad(workdir, standin_models, f"input_dir={workdir / 'in'}", f"output_dir={workdir / 'out'}",
               code=3)
    assert "nothing to render" in msg


def test_corrupt_model_stops_before_decoding(workdir, standin_models, clip, tmp_path):
    import shutil
    models = tmp_path / "models"
    shutil.copytree(standin_models, models)
    p = models / "inswapper_128_fp16.onnx"
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0xFF
    p.write_bytes(bytes(data))
    r = run_cli("profile=low", f"source={workdir / 'in' / 'source.jpg'}", f"target={clip.path}",
                f"output={workdir / 'out' / 'x.mp4'}", f"models.dir={models}",
                f"cache_dir={workdir / 'cache'}", "--debug")
    assert r.returncode == 4, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert "inswapper_128_fp16" in last and "render models fetch" in last
    assert "decoder:" not in r.stderr          # no decoder was started
    assert list((workdir / "out").iterdir()) == []


def test_ctrl_c_leaves_nothing_that_looks_finished(workdir, standin_models, tmp_path):
    clip = mf.make_clip(tmp_path / "long.mp4", width=640, height=360, seconds=8.0, audio=True)
    out = workdir / "out" / "long.mp4"
    proc = subprocess.Popen([sys.executable, "-m", "render", "profile=low",
                             f"source={workdir / 'in' / 'source.jpg'}", f"target={clip.path}",
                             f"output={out}", "execution.threads=1",
                             *model_args(standin_models, workdir / "cache")],
                            env=cli_env(), stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and not list((workdir / "out").iterdir()):
        time.sleep(0.05)      # wait until the encoder has started writing
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "render: error: interrupted"
    # nothing that looks finished: only the hidden work folder with its committed segments
    visible = [p.name for p in (workdir / "out").iterdir() if not p.name.startswith(".")]
    assert visible == []
    assert all(".mp4" not in p.name or p.name.startswith("seg-")
               for w in (workdir / "out").iterdir() for p in w.iterdir())
    children = subprocess.run(["pgrep", "-f", f"ffmpeg.*{clip.path}"], capture_output=True, text=True)
    assert children.stdout.strip() == "", "ffmpeg children left running"


def test_preview_renders_at_720p(workdir, standin_models, tmp_path):
    clip = mf.make_clip(tmp_path / "hd.mp4", width=1920, height=1080, seconds=0.6)
    out = workdir / "out" / "hd.mp4"
    r = run_cli("profile=low", "preview=true", f"source={workdir / 'in' / 'source.jpg'}",
                f"target={clip.path}", f"output={out}", *model_args(standin_models, workdir / "cache"))
    assert r.returncode == 0, r.stderr
    p = mf.probe_counts(out)
    assert (p.width, p.height) == (1280, 720) and p.frames == clip.frame_count


@pytest.mark.parametrize("trim,frames", [("0.4-1.2", 20), ("10f-35f", 25), ("2.4-", 15)])
def test_trim_renders_a_range_with_matching_audio(workdir, standin_models, clip, trim, frames):
    out = workdir / "out" / "cut.mp4"
    r = run_cli("profile=low", f"trim={trim}", f"source={workdir / 'in' / 'source.jpg'}",
                f"target={clip.path}", f"output={out}", *model_args(standin_models, workdir / "cache"))
    assert r.returncode == 0, r.stderr
    p = mf.probe_counts(out)
    assert p.frames == frames
    assert p.audio_duration == pytest.approx(frames / 25, abs=1 / 25 + 1e-3)
    # the first output frame is the trim's first frame, swapped where it has faces
    first = int(round(float(trim.split("-")[0].rstrip("f")) * (1 if "f" in trim else 25)))
    a = mf.read_frames(clip.path)[first]
    b = mf.read_frames(out, max_frames=1)[0]
    _, outside = _region_masks(a.shape, clip.boxes[first])
    assert _diff(a, b)[outside].mean() < 2.0


@pytest.mark.parametrize("output,expect,code", [
    ("x.gif", "cannot write '.gif' files", 2),
    ("x.png", "is an image but target", 2),
])
def test_bad_output(workdir, standin_models, clip, output, expect, code):
    msg = _bad(workdir, standin_models, f"source={workdir / 'in' / 'source.jpg'}",
               f"target={clip.path}", f"output={workdir / 'out' / output}", code=code)
    assert expect in msg


@pytest.mark.parametrize("setting,expect", [
    ("encode.preset=superduper", "encode.preset=superduper is not a preset of libx264"),
    ("encode.pix_fmt=bogus", "encode.pix_fmt=bogus is not a pixel format ffmpeg can write"),
])
def test_bad_encoder_setting_is_refused_before_any_work(workdir, standin_models, clip, setting, expect):
    """Both reached ffmpeg: the encoder failed at the first frame, exit 5, work folder left."""
    msg = _bad(workdir, standin_models, f"source={workdir / 'in' / 'source.jpg'}",
               f"target={clip.path}", f"output={workdir / 'out' / 'x.mp4'}", setting, code=2)
    assert expect in msg


def test_unwritable_output_folder(workdir, standin_models, clip):
    msg = _bad(workdir, standin_models, f"source={workdir / 'in' / 'source.jpg'}",
               f"target={clip.path}", "output=/proc/none/x.mp4", code=2)
    assert "cannot create output folder /proc/none" in msg


def test_output_over_the_source_image_is_refused(workdir, standin_models):
    """An image render whose output is the source image itself (it overwrote the source), or the
    reference image: refused before any work, the file untouched."""
    src = workdir / "in" / "source.jpg"
    still = workdir / "in" / "still.png"
    mf.make_source_image(still)
    before = src.read_bytes()
    msg = _bad(workdir, standin_models, f"source={src}", f"target={still}", f"output={src}", code=2)
    assert "would overwrite the source image" in msg
    ref = workdir / "in" / "ref.jpg"
    ref.write_bytes(before)
    msg = _bad(workdir, standin_models, f"source={src}", f"target={still}", "select.mode=reference",
               f"select.reference={ref}", f"output={ref}", code=2)
    assert "would overwrite the reference image" in msg
    assert src.read_bytes() == before and ref.read_bytes() == before


def test_output_that_is_a_folder_or_too_long_a_name_is_refused_before_any_work(workdir, standin_models,
                                                                               clip):
    """Both used to be found only where the render first wrote a file: after every frame for a
    folder (exit 5, work folder left), at the work folder for a long name (an internal error)."""
    folder = workdir / "out2" / "isdir.mp4"
    folder.mkdir(parents=True)
    msg = _bad(workdir, standin_models, f"source={workdir / 'in' / 'source.jpg'}",
               f"target={clip.path}", f"output={folder}", code=2)
    assert "is a folder" in msg
    long_name = workdir / "out" / ("b" * 240 + ".mp4")   # a valid name: 244 of 255 bytes
    msg = _bad(workdir, standin_models, f"source={workdir / 'in' / 'source.jpg'}",
               f"target={clip.path}", f"output={long_name}", code=2)
    assert "is too long" in msg
    assert list(folder.parent.iterdir()) == [folder] and list(folder.iterdir()) == []


def test_video_as_source(workdir, standin_models, clip):
    msg = _bad(workdir, standin_models, f"source={clip.path}", f"target={workdir / 'in' / 'source.jpg'}",
               f"output={workdir / 'out' / 'x.jpg'}", code=3)
    assert "cannot read source image" in msg


def test_rerender_is_bit_identical(workdir, standin_models, tmp_path, signing):
    """Fresh caches each time; the C2PA signature too is reproducible with the same certificate."""
    clip = mf.make_clip(tmp_path / "bits.mp4", width=320, height=240, seconds=0.6)
    outs = []
    for n in (1, 2):
        out = workdir / f"out{n}" / "bits.mp4"     # the name is in the signed title
        r = run_cli("profile=low", "encode.threads=2", f"source={workdir / 'in' / 'source.jpg'}",
                    f"target={clip.path}", f"output={out}", *signing,
                    *model_args(standin_models, workdir / f"cache{n}"))
        assert r.returncode == 0, r.stderr
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
