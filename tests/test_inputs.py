"""Inputs that exist but are no regular file are refused with one line before anything reads them
(a FIFO or /dev/zero as target blocked in hashing for ever)."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from conftest import cli_env, model_args, run_cli
from test_segments import committed
from render.standins import media


@pytest.fixture
def clip(workdir):
    return media.make_clip(workdir / "in" / "clip.mp4", width=160, height=96, seconds=0.5).path


def refused(r, what: str, kind: str) -> None:
    assert r.returncode == 3, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert what in lines[0] and f"is {kind}, not a regular file" in lines[0], lines[0]


def test_a_fifo_or_a_device_as_target_is_refused_at_once(workdir, standin_models, clip):
    fifo = workdir / "in" / "pipe.mp4"
    os.mkfifo(fifo)
    zero = workdir / "in" / "zero.mp4"
    zero.symlink_to("/dev/zero")
    keys = [*model_args(standin_models, workdir / "cache"), "progress=off", "lock.device=none",
            f"source={workdir / 'in' / 'source.jpg'}"]
    r = run_cli(*keys, f"target={fifo}", f"output={workdir / 'out' / 'a.mp4'}", timeout=60)
    refused(r, "target", "a FIFO")
    r = run_cli(*keys, f"target={zero}", f"output={workdir / 'out' / 'b.mp4'}", timeout=60)
    refused(r, "target", "a character device")
    assert not any((workdir / "out").iterdir())


def test_a_fifo_as_source_or_reference_is_refused_at_once(workdir, standin_models, clip):
    fifo = workdir / "in" / "face.jpg"
    os.mkfifo(fifo)
    keys = [*model_args(standin_models, workdir / "cache"), "progress=off", "lock.device=none",
            f"target={clip}", f"output={workdir / 'out' / 'a.mp4'}"]
    refused(run_cli(*keys, f"source={fifo}", timeout=60), "source", "a FIFO")
    r = run_cli(*keys, f"source={workdir / 'in' / 'source.jpg'}", "select.mode=reference",
                f"select.reference={fifo}", timeout=60)
    refused(r, "reference image", "a FIFO")


def test_a_folder_of_targets_never_makes_a_folder_named_like_a_file(workdir, standin_models, clip):
    out = workdir / "out" / "clip.mp4"
    r = run_cli(*model_args(standin_models, workdir / "cache"), "progress=off", "lock.device=none",
                f"source={workdir / 'in' / 'source.jpg'}", f"target={workdir / 'in'}",
                f"output={out}", timeout=120)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "names a file" in r.stderr, r.stderr
    assert not out.exists()


def test_a_targets_kind_comes_from_its_content_not_its_name(workdir, standin_models):
    made = media.make_clip(workdir / "in" / "made.mp4", width=160, height=96, seconds=0.5).path
    disguised = made.rename(workdir / "in" / "clip.png")
    keys = [*model_args(standin_models, workdir / "cache"), "progress=off", "lock.device=none",
            f"source={workdir / 'in' / 'source.jpg'}", f"target={disguised}"]
    r = run_cli(*keys, f"output={workdir / 'out' / 'still.png'}", timeout=120)
    assert r.returncode == 2, r.stderr
    assert "is an image but target" in r.stderr and "is a video" in r.stderr, r.stderr
    assert not (workdir / "out" / "still.png").exists()
    out = workdir / "out" / "clip.mp4"
    r = run_cli(*keys, f"output={out}", timeout=120)
    assert r.returncode == 0, r.stderr
    assert media.probe_counts(out).frames == 12


def test_a_target_replaced_while_rendering_fails_and_commits_nothing_of_it(workdir, standin_models):
    target = media.make_clip(workdir / "in" / "clip.mp4", width=640, height=360, seconds=8.0).path
    other = workdir / "in" / "other.mp4"        # the same length, other pixels
    subprocess.run(["ffmpeg", "-v", "error", "-i", str(target), "-vf", "hflip", "-c:a", "copy",
                    str(other)], check=True)
    out = workdir / "out" / "clip.mp4"
    args = [*model_args(standin_models, workdir / "cache"), "progress=off", "lock.device=none",
            f"source={workdir / 'in' / 'source.jpg'}", f"target={target}", f"output={out}",
            "segment.seconds=1"]
    proc = subprocess.Popen([sys.executable, "-m", "render", *args], env=cli_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and len(committed(workdir / "out")) < 2:
        time.sleep(0.01)
    assert proc.poll() is None, "the render ended before the target could be replaced"
    os.replace(other, target)
    done_before = {p.name for p in committed(workdir / "out")}
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err
    assert err.strip().splitlines() == [f"render: error: target {target} changed while rendering; "
                                        f"run again"], err
    assert not out.exists()
    # at most the segment that was being committed as the file changed; none after it
    assert len({p.name for p in committed(workdir / "out")} - done_before) <= 1


def test_two_renders_of_one_output_beside_each_other_both_succeed(workdir, standin_models):
    """lock.slots=2 lets both run at once: the second waits for the first's work folder and then
    finds the output done (the first removed the folder under the second: FileNotFoundError)."""
    target = media.make_clip(workdir / "in" / "clip.mp4", width=640, height=360, seconds=4.0).path
    out = workdir / "out" / "clip.mp4"
    args = [*model_args(standin_models, workdir / "cache"), "progress=off", "--verbose",
            f"source={workdir / 'in' / 'source.jpg'}", f"target={target}", f"output={out}",
            "segment.seconds=1", "lock.slots=2", f"lock_dir={workdir / 'locks'}"]
    procs = [subprocess.Popen([sys.executable, "-m", "render", *args], env=cli_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    errs = [p.communicate(timeout=180)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    assert sum("waiting for it" in e for e in errs) == 1, errs
    assert any("skipped" in e for e in errs), errs
    assert run_cli("verify", str(out) + ".report.json").returncode == 0
    assert not [p for p in (workdir / "out").iterdir() if p.name.startswith(".")]


def test_an_empty_target_says_so_and_a_folder_goes_on_past_it(workdir, standin_models, clip):
    """A 0-byte target was "Invalid data found when processing input"."""
    (workdir / "in" / "empty.mp4").write_bytes(b"")
    keys = [*model_args(standin_models, workdir / "cache"), "progress=off", "lock.device=none"]
    r = run_cli(*keys, f"source={workdir / 'in' / 'source.jpg'}",
                f"target={workdir / 'in' / 'empty.mp4'}", f"output={workdir / 'out' / 'e.mp4'}")
    assert r.returncode == 3 and r.stderr.strip().splitlines() == [
        f"render: error: target {workdir / 'in' / 'empty.mp4'} is empty (0 bytes)"], r.stderr
    r = run_cli(*keys, f"input_dir={workdir / 'in'}", f"output_dir={workdir / 'out'}")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 3 and lines[-1] == "render: error: 1 rendered, 1 failed: empty.mp4", lines
    assert len([ln for ln in lines if "is empty (0 bytes)" in ln]) == 1, lines   # said once
    assert sorted(p.name for p in (workdir / "out").iterdir()) == ["clip.mp4",
                                                                    "clip.mp4.report.json"]
