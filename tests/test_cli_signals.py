"""SIGTERM (and Ctrl-C) end a CLI render with one line and exit 130, wherever they land: also inside the
logging module's at-fork callbacks, which run around every ffmpeg child's fork and in which Python
ignores exceptions (a Slurm shard cancelled at that moment used to go on rendering, silent)."""
from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time
import types

import pytest

from render.standins import media as mf
from conftest import cli_env, model_args
from render import cli, interrupts
from render.errors import Interrupted
from render.interrupts import PROCESS, Stopped, StopToken


@pytest.fixture(autouse=True)
def _fresh_token():
    PROCESS.reset()
    yield
    PROCESS.reset()


def test_sigterm_inside_logging_is_sent_again_instead_of_raised(monkeypatch):
    sent = []
    monkeypatch.setattr(interrupts.os, "kill", lambda pid, sig: sent.append((pid, sig)))
    in_logging = types.SimpleNamespace(f_globals={"__name__": "logging"})
    PROCESS.on_signal(signal.SIGTERM, in_logging)          # no exception here
    assert PROCESS.requested() == "terminated"
    deadline = time.monotonic() + 5
    while not sent and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sent == [(interrupts.os.getpid(), signal.SIGTERM)]


def test_an_ignored_sigint_stays_ignored_and_the_handlers_are_restored(monkeypatch):
    """A shell's background job starts with SIGINT ignored: Ctrl-C meant for the shell's
    foreground must not stop it."""
    seen = {}
    monkeypatch.setattr(cli, "run", lambda args: seen.update(
        int=signal.getsignal(signal.SIGINT), term=signal.getsignal(signal.SIGTERM)) or 0)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level      # main() sets up the CLI's logging
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    term_before = signal.getsignal(signal.SIGTERM)
    try:
        assert cli.main(["profile=low"]) == 0
        assert seen == {"int": signal.SIG_IGN, "term": PROCESS.on_signal}
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) is term_before
    finally:
        signal.signal(signal.SIGINT, before)
        root.handlers[:] = handlers
        root.setLevel(level)


def test_sigterm_or_sigint_elsewhere_raises_and_leaves_the_stop_reason():
    with pytest.raises(Interrupted, match="terminated"):
        PROCESS.on_signal(signal.SIGTERM, sys._getframe())
    assert PROCESS.requested() == "terminated"
    PROCESS.reset()
    with pytest.raises(KeyboardInterrupt):
        PROCESS.on_signal(signal.SIGINT, sys._getframe())
    assert PROCESS.requested() == "interrupted"


@pytest.mark.parametrize("signum, line", [(signal.SIGTERM, "render: error: terminated"),
                                          (signal.SIGINT, "render: error: interrupted")])
def test_signal_as_the_encoder_starts_ends_the_render_with_one_line(workdir, standin_models,
                                                                    signum, line):
    """The signal the moment the renderer says it starts its encoder (the fork is next; before
    the fix, the interrupt was lost there about every time and the render ran to its end): every
    time, exit 130 with one line, no ffmpeg child left, no output."""
    clip = mf.make_clip(workdir / "in" / "clip.mp4", width=320, height=180, seconds=2.0)
    for i in range(4):
        out = workdir / "out" / f"clip{i}.mp4"
        proc = subprocess.Popen(
            [sys.executable, "-m", "render", "--debug", "profile=low", "execution.threads=1",
             f"source={workdir / 'in' / 'source.jpg'}", f"target={clip.path}", f"output={out}",
             *model_args(standin_models, workdir / "cache")],
            env=cli_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True)
        lines = []
        try:
            for text in proc.stderr:            # to its end: the renderer's last line included
                lines.append(text)
                if text.startswith("render: encoder: ffmpeg"):
                    proc.send_signal(signum)
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        err = "".join(lines)
        assert proc.returncode == 130, err[-2000:]
        assert err.rstrip().splitlines()[-1] == line, err[-2000:]
        assert not out.exists()
        left = subprocess.run(["pgrep", "-f", f"ffmpeg.*{clip.path}"], capture_output=True,
                              text=True).stdout.strip()
        assert not left, left


def test_a_signal_during_the_commit_waits_for_the_report(monkeypatch):
    """From hold() (the output is about to replace the old one) to the end of the guarded block
    (its report written), the handler records the signal instead of raising it; the block's end
    raises it. Before hold(), and outside any block, the handler raises at once."""
    token = StopToken()
    with pytest.raises(Interrupted):
        with token.guarded():
            with pytest.raises(Interrupted):         # not holding yet: raised where it lands
                token.on_signal(signal.SIGTERM, sys._getframe())
            token.hold()
            token.on_signal(signal.SIGTERM, sys._getframe())    # kept
            done = True                                          # the report would be written here
    assert done
    assert token.requested() == "terminated"
    token = StopToken()
    with pytest.raises(KeyboardInterrupt):
        with token.guarded():
            token.hold()
            token.on_signal(signal.SIGINT, sys._getframe())
    # a block that fails on its own keeps its own exception; nothing is left pending
    token = StopToken()
    with pytest.raises(OSError):
        with token.guarded():
            token.hold()
            token.on_signal(signal.SIGTERM, sys._getframe())
            raise OSError("disk full")
    with token.guarded():
        pass
    token.hold()                                         # outside a block: a no-op
    with pytest.raises(Interrupted):
        token.on_signal(signal.SIGTERM, sys._getframe())


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_right_after_the_output_is_replaced_leaves_output_and_report_agreeing(
        workdir, standin_models, signum):
    """A re-render with another setting, signalled the moment the new output replaces the old
    one: the report beside it must be the new one (it was the old one: `render verify` failed on
    the SHA-256), and the exit says it was stopped."""
    clip = mf.make_clip(workdir / "in" / "clip.mp4", width=320, height=180, seconds=2.0)
    out = workdir / "out" / "clip.mp4"
    base = [sys.executable, "-m", "render", "profile=low", "execution.threads=1",
            f"source={workdir / 'in' / 'source.jpg'}", f"target={clip.path}", f"output={out}",
            *model_args(standin_models, workdir / "cache")]
    for crf in (30, 20):
        first = out.stat().st_ino if out.exists() else None
        proc = subprocess.Popen(base + [f"encode.crf={crf}"], env=cli_env(), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        signalled = False
        try:
            while proc.poll() is None and first is not None and not signalled:
                try:
                    if out.stat().st_ino != first:
                        proc.send_signal(signum)
                        signalled = True
                except FileNotFoundError:
                    pass
                time.sleep(0.0002)
            err = proc.communicate(timeout=120)[1]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if first is None:
            assert proc.returncode == 0, err
            continue
        assert signalled
        # the output is hashed again, the work folder removed and the report written after the
        # rename: the signal always lands before the process ends
        assert proc.returncode == 130, err
        check = subprocess.run([sys.executable, "-m", "render", "verify", f"{out}.report.json"],
                               env=cli_env(), capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr


def test_a_signal_in_a_polled_block_waits_for_its_check_and_a_second_one_does_not():
    """The executor's segments ask the token batch by batch (a polled block): a signal there is
    raised by the next check as Stopped, at a point where the pipeline unwinds cleanly, and by the
    block's end at the latest. A second signal is raised where it lands (a render stuck in a batch
    can still be stopped). A queue's cancel request is seen through a watched poll, and forgotten
    when its job ends."""
    token = StopToken()
    with pytest.raises(Stopped, match="terminated"):
        with token.polled():
            token.on_signal(signal.SIGTERM, sys._getframe())     # recorded, not raised
            token.check()
    token = StopToken()
    with pytest.raises(Stopped, match="interrupted"):
        with token.polled():
            token.on_signal(signal.SIGINT, sys._getframe())
    with pytest.raises(KeyboardInterrupt):
        with token.polled():
            token.on_signal(signal.SIGINT, sys._getframe())      # the second: at once
    token = StopToken()
    asked = []
    with token.watching(lambda: asked.append(1) or "cancelled"):
        with pytest.raises(Stopped, match="cancelled"):
            token.check()
    assert asked and token.requested() is None and token.signalled is None

