"""Stopping a render: one :class:`StopToken` per process, for signals and cancelled jobs alike.

A stop is requested by the signal handler (SIGTERM → "terminated", SIGINT → "interrupted") or by
a poll the caller adds for a while (:meth:`StopToken.watching`: a queued job's cancel request →
"cancelled"). Where it takes effect depends on what the process is doing:

- inside :meth:`StopToken.polled` (the executor's segments: between and within them, batch by
  batch) the handler only records the request, and the code there asks :meth:`StopToken.check`,
  which raises :class:`Stopped` at a point where the pipeline's threads and children unwind
  cleanly: the unfinished segment is dropped, committed segments stay for a resume;
- from :meth:`StopToken.hold` (a finished output is about to replace the old one) to the end of
  the outermost :meth:`StopToken.guarded` block (its report written beside it) the request waits,
  and is raised when the block ends;
- anywhere else (planning, loading models, waiting for the device, an idle worker) the handler
  raises at once: :class:`~render.errors.Interrupted` for SIGTERM, KeyboardInterrupt for SIGINT.
  A second signal while the first one waits in a polled region is raised at once too.

Signal handlers run on the main thread, as do the polled and guarded blocks: the token's state is
only touched there.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from .errors import Interrupted

#: seconds between two asks of a watched poll (a job's cancel file): a stop within about a second
POLL_S = 0.25

_REASONS = {signal.SIGTERM: "terminated", signal.SIGINT: "interrupted"}


class Stopped(Interrupted):
    """A render asked to stop (SIGTERM, Ctrl-C, a cancelled job) unwound at a clean point; the
    committed segments stay for a resume."""


class StopToken:
    """A request to stop, with its reason; see the module's docstring for where it takes effect."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self._signum: int | None = None          # the signal that set the reason, if one did
        self._source: object | None = None       # the watched poll that set it, if one did
        self._polls: list[Callable[[], str | None]] = []
        self._asked = 0.0
        self._polled = 0                          # depth of polled() blocks
        self._guards = 0                          # depth of guarded() blocks
        self._holding = False                     # hold() called in the outermost guarded() block
        self._resend: list[threading.Timer] = []
        self._resending = False                   # the next signal is the one sent again

    # -- asking ------------------------------------------------------------------------------------
    def requested(self) -> str | None:
        """The reason a stop was requested, None while nobody asked; asks the watched polls at most
        every POLL_S."""
        if self.reason is None and self._polls and time.monotonic() - self._asked >= POLL_S:
            self._asked = time.monotonic()
            for poll in list(self._polls):
                why = poll()
                if why:
                    self.reason, self._source = why, poll
                    break
        return self.reason

    def check(self) -> None:
        """Raise :class:`Stopped` when a stop was requested (not while a commit is held)."""
        if self.requested() and not self._holding:
            raise Stopped(self.reason)

    @property
    def signalled(self) -> str | None:
        """The reason of the signal received (it ends the process), None without one."""
        return _REASONS.get(self._signum, "terminated") if self._signum is not None else None

    def request(self, reason: str) -> None:
        """Ask for a stop; the first reason wins."""
        if self.reason is None:
            self.reason = reason

    def reset(self) -> None:
        """Forget an earlier request (a new command in the same process)."""
        self.reason = self._signum = self._source = None
        self._resending = False
        while self._resend:
            self._resend.pop().cancel()

    # -- where a stop takes effect -------------------------------------------------------------------
    @contextmanager
    def watching(self, poll: Callable[[], str | None]) -> Iterator[None]:
        """Ask ``poll`` too while the block runs (it returns a reason to stop, or None); a stop it
        requested is forgotten when the block ends."""
        self._polls.append(poll)
        self._asked = 0.0
        try:
            yield
        finally:
            self._polls.remove(poll)
            if self._source is poll:
                self.reason = self._source = None

    @contextmanager
    def polled(self) -> Iterator[None]:
        """A block that asks :meth:`check` often: a signal there is recorded, not raised, and a stop
        still pending when the block ends is raised then."""
        self._polled += 1
        try:
            yield
        except Exception as exc:
            # the signal's sender may have stopped our children too (a scheduler signals the
            # whole process group): their failure is the stop's, not the media's
            if not isinstance(exc, Interrupted) and self.requested() and not self._holding:
                raise Stopped(self.reason) from exc
            raise
        finally:
            self._polled -= 1
        self.check()

    @contextmanager
    def guarded(self) -> Iterator[None]:
        """A render from plan to report; a signal that arrived after :meth:`hold` is raised as the
        block ends (unless the block already ends with an exception of its own)."""
        self._guards += 1
        failed = False
        try:
            yield
        except BaseException:
            failed = True
            raise
        finally:
            self._guards -= 1
            if not self._guards:
                # no call between these: Python runs signal handlers only at calls and backward jumps
                held, self._holding = self._holding, False
                if held and self._signum is not None and not failed:
                    raise self._exception(self._signum)

    def hold(self) -> None:
        """The output is about to replace the old one: a stop now waits for the end of the guarded
        block (a no-op outside one)."""
        if self._guards:
            self._holding = True

    # -- signals ---------------------------------------------------------------------------------
    def on_signal(self, signum: int, frame) -> None:
        """SIGTERM / SIGINT: record the request; raise it where it landed unless a polled block will
        see it or a commit holds it (see the module's docstring).

        Not while the main thread is inside the logging module: its at-fork callbacks run around
        the fork of every ffmpeg child (``preexec_fn``), Python ignores an exception raised in
        them, and the module's lock would stay held. There the signal is sent again a moment later.
        """
        again = self._signum is not None and not self._resending
        self._resending = False
        if self._signum is None:
            self._signum = signum
        self.request(_REASONS.get(signum, "terminated"))
        if self._holding or (self._polled and not again):
            return
        if frame is not None and getattr(frame, "f_globals", {}).get("__name__") == "logging":
            timer = threading.Timer(0.02, os.kill, (os.getpid(), signum))
            timer.daemon = True
            self._resend.append(timer)
            self._resending = True
            timer.start()
            return
        raise self._exception(signum)

    @contextmanager
    def handling_signals(self, afterwards: Any = None) -> Iterator[None]:
        """SIGTERM and SIGINT go to :meth:`on_signal` while the block runs; a signal the caller
        ignores stays ignored (a shell's background job ignores SIGINT). After the block the
        handlers are the ones before it, or ``afterwards`` where given (with no instant between
        the two where the default would kill the process)."""
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
        for sig, handler in previous.items():
            if handler is not signal.SIG_IGN:
                signal.signal(sig, self.on_signal)
        try:
            yield
        finally:
            while self._resend:
                self._resend.pop().cancel()
            for sig, handler in previous.items():
                if afterwards is not None and handler is not signal.SIG_IGN:
                    handler = afterwards
                if handler is not None:
                    signal.signal(sig, handler)

    @staticmethod
    def _exception(signum: int) -> BaseException:
        if signum == signal.SIGINT:
            return KeyboardInterrupt()
        return Interrupted(_REASONS.get(signum, "terminated"))


#: the process's token: the CLI's signal handlers set it, renders ask it unless given another
PROCESS = StopToken()

