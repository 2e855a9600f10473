"""Stopping a render, one mechanism for all (render/interrupts.py): signals to the CLI and to a
queue worker, a cancelled job, and what `render jobs` says about a job whose worker is gone. Real
processes, real signals, real ffmpeg."""
from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from render.standins import media as mf
from conftest import cli_env, run_cli
from test_segments import committed, work_dirs
from test_spool import common, jobs, submit, worker

TESTS = Path(__file__).resolve().parent


def wait_for(what, timeout: float = 120.0, step: float = 0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(step)
    raise AssertionError("timed out waiting")


def temps(out_dir: Path) -> list[Path]:
    return [p for w in work_dirs(out_dir) for p in w.glob("*.tmp-*")]


def terminate_when(args: list[str], ready, env: dict | None = None) -> tuple[int, str]:
    """Start a render with ``args``, SIGTERM it once ``ready()``; (exit code, stderr)."""
    proc = subprocess.Popen([sys.executable, "-m", "render", *args], env=env or cli_env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_for(ready)
        proc.send_signal(signal.SIGTERM)
        err = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err


def render_args(workdir: Path, standin_models: Path, target: Path, output: Path, *extra: str):
    return [*common(workdir, standin_models), "progress=off", f"source={workdir / 'in' / 'source.jpg'}",
            f"target={target}", f"output={output}", *extra]


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return mf.make_clip(tmp_path_factory.mktemp("stopclip") / "clip.mp4", width=640, height=360,
                        seconds=16.0)


# -- the CLI ----------------------------------------------------------------------------------------
def test_a_signal_where_python_ignores_exceptions_ends_the_render_with_one_line(workdir,
                                                                            standin_models, clip):
    """A SIGTERM that lands in a finalizer the garbage collector runs as the pipeline's reader
    thread starts: the handler's exception was printed as "Exception ignored in ... Traceback" and
    swallowed. Now a signal inside the segments is only recorded there and raised by the pipeline
    at its next batch: exit 130, one line, no output."""
    out = workdir / "out" / "clip.mp4"
    r = subprocess.run([sys.executable, str(TESTS / "signal_hooks.py"), "render-reader",
                        *render_args(workdir, standin_models, clip.path, out)],
                       env=cli_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=120)
    assert (r.returncode, r.stderr) == (130, "render: error: terminated\n")
    assert not out.exists() and not temps(workdir / "out")


def test_an_ffmpeg_that_ignores_sigterm_adds_no_line_at_progress_off(workdir, standin_models,
                                                                     clip, tmp_path):
    """Off a terminal with progress=off a failing run prints exactly one line: an ffmpeg child
    that outlives its SIGTERM while the stopped render unwinds is killed without a line of its own
    (it is debug information)."""
    real = shutil.which("ffmpeg")
    assert real
    stubborn = tmp_path / "bin"
    stubborn.mkdir()
    # ffmpeg itself, then, when the wrapper was asked to stop, a stay of 30 s that only SIGKILL ends
    (stubborn / "ffmpeg").write_text(f"""#!/bin/sh
trap 'stopped=1' TERM
"{real}" "$@"
rc=$?
if [ -n "$stopped" ]; then exec sleep 30; fi
exit $rc
""")
    (stubborn / "ffmpeg").chmod(0o755)
    out = workdir / "out" / "clip.mp4"
    env = cli_env(PATH=f"{stubborn}:{cli_env()['PATH']}")
    rc, err = terminate_when(render_args(workdir, standin_models, clip.path, out),
                             lambda: temps(workdir / "out"), env)
    assert (rc, err) == (130, "render: error: terminated\n")
    assert not temps(workdir / "out")


def test_sigterm_while_segments_render_at_once_keeps_the_committed_ones(workdir, standin_models,
                                                                       clip):
    """execution.parallel_segments=3: a SIGTERM while three segments are being encoded ends the
    render with one line, exit 130; every running segment's temp file is removed, no ffmpeg is
    left, and the resume renders only the missing segments into the bytes of an uninterrupted
    render."""
    out = workdir / "out" / "clip.mp4"
    args = render_args(workdir, standin_models, clip.path, out, "segment.seconds=2",
                       "execution.parallel_segments=3")
    rc, err = terminate_when(args, lambda: len(temps(workdir / "out")) >= 2)  # two encoding
    assert (rc, err) == (130, "render: error: terminated\n")
    assert not temps(workdir / "out") and not out.exists()
    done = len(committed(workdir / "out"))
    assert done < 8
    time.sleep(0.2)
    assert subprocess.run(["pgrep", "-f", f"ffmpeg.*{clip.path}"],
                          capture_output=True).returncode == 1, "an ffmpeg child was left"
    r = run_cli(*args, "--verbose")
    assert r.returncode == 0, r.stderr
    one = workdir / "one" / "clip.mp4"
    r1 = run_cli(*render_args(workdir, standin_models, clip.path, one, "segment.seconds=2",
                              "execution.parallel_segments=1"))
    assert r1.returncode == 0, r1.stderr
    assert out.read_bytes() == one.read_bytes()


# -- the queue --------------------------------------------------------------------------------------
def test_render_jobs_says_when_a_running_jobs_worker_is_gone(workdir, standin_models, clip):
    """A worker killed mid-job leaves its job in running/: `render jobs` showed its last progress
    ("segment 1/6, 9.8 fps, ETA 5 s") as if it still rendered. The job's flock, held by a live
    worker and released by the kernel when it dies, tells; the job's state carries it for the
    pages too."""
    from render.spool import Spool

    job = submit(workdir, "profile=low", "segment.seconds=1", "mark.enabled=false",
                 f"source={workdir / 'in' / 'source.jpg'}", f"target={clip.path}",
                 f"output={workdir / 'out' / 'clip.mp4'}")
    spool = Spool(workdir / "spool")
    w = worker(workdir, standin_models)
    try:
        wait_for(lambda: (spool.get(job).progress or {}).get("segments_done", 0) >= 1)
        alive = spool.get(job)
        assert alive.state == "running" and not alive.worker_gone
        listing = run_cli("jobs", f"spool_dir={workdir / 'spool'}").stdout
        assert "worker gone" not in listing and "segment" in listing
    finally:
        w.send_signal(signal.SIGKILL)
        w.communicate(timeout=30)
    gone = spool.get(job)
    assert gone.state == "running" and gone.worker_gone
    (line,) = [ln for ln in run_cli("jobs", f"spool_dir={workdir / 'spool'}").stdout.splitlines()
               if ln.startswith(job)]
    assert "running" in line and "worker gone at clip.mp4 segment" in line, line
    assert "fps" not in line and "ETA" not in line, line


def test_a_sigtermed_worker_exits_130_with_one_line_idle_or_rendering(workdir, standin_models,
                                                                      clip):
    """One exit convention: an idle worker and a rendering one both end with exit 130 and one
    line; the job it was rendering goes back to the queue with its committed segments, and its
    unfinished segment is dropped (it exited 0 without a word, after finishing the segment)."""
    spool_dir = workdir / "spool"
    run_args = ["work", f"spool_dir={spool_dir}", "follow=true",
                *common(workdir, standin_models), "progress=off"]
    idle = subprocess.Popen([sys.executable, "-m", "render", *run_args], env=cli_env(),
                            stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: (spool_dir / "tmp").is_dir())
        time.sleep(1.0)
        idle.send_signal(signal.SIGTERM)
        err = idle.communicate(timeout=30)[1]
    finally:
        if idle.poll() is None:
            idle.kill()
            idle.wait()
    assert (idle.returncode, err) == (130, "render: error: terminated\n")

    job = submit(workdir, "profile=low", "segment.seconds=1", "mark.enabled=false",
                 f"source={workdir / 'in' / 'source.jpg'}", f"target={clip.path}",
                 f"output={workdir / 'out' / 'clip.mp4'}")
    rc, err = terminate_when(run_args, lambda: committed(workdir / "out") and temps(workdir / "out"))
    assert (rc, err) == (130, "render: error: terminated\n")
    assert jobs(workdir)[job] == "queued"
    assert committed(workdir / "out") and not temps(workdir / "out")


def test_cancel_stops_a_running_render_within_about_a_second(workdir, standin_models, clip):
    """A cancel was honoured between segments only: the last segment ran to its end and the job
    ended "done". Now the render asks for it batch by batch: it stops within about a second, the
    unfinished segment is dropped, the committed ones stay (a retry resumes them), and the job
    ends cancelled."""
    from render.spool import Spool

    job = submit(workdir, "profile=low", "segment.seconds=8", "mark.enabled=false",
                 f"source={workdir / 'in' / 'source.jpg'}", f"target={clip.path}",
                 f"output={workdir / 'out' / 'clip.mp4'}")
    w = worker(workdir, standin_models)
    try:
        wait_for(lambda: committed(workdir / "out") and temps(workdir / "out"))
        assert Spool(workdir / "spool").cancel(job) == "cancelling"
        asked = time.monotonic()
        wait_for(lambda: jobs(workdir)[job] != "running", timeout=60, step=0.01)
        took = time.monotonic() - asked
        _, err = w.communicate(timeout=60)
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
    assert jobs(workdir)[job] == "cancelled", err
    assert took < 2.0, f"the cancel took {took:.2f} s"
    assert w.returncode == 0, err
    assert not (workdir / "out" / "clip.mp4").exists()
    assert [p.stem for p in committed(workdir / "out")] == ["seg-0000"]
    assert not temps(workdir / "out")
