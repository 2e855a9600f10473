"""Stop signals that must wait: from the moment a finished output replaces the old one until the
report that describes it is written beside it.

A SIGTERM or Ctrl-C in that window used to leave the new output next to the previous render's
report (``render verify`` then failed on the SHA-256). The CLI's signal handler asks
:func:`deferred` first: inside a :func:`guarded` block whose commit has begun (:func:`hold`), the
signal is recorded and raised when the block ends, once the report is written. Before the commit
nothing waits. Signal handlers run on the main thread, so this state is only touched there.
"""
from __future__ import annotations

import signal
from contextlib import contextmanager
from typing import Iterator

from .errors import Interrupted

_guards = 0          # nesting depth of guarded() blocks
_holding = False     # hold() was called inside the outermost guarded() block
_pending: list[int] = []


def deferred(signum: int) -> bool:
    """Called by a signal handler: True when the signal is kept for the end of the block."""
    if _guards and _holding:
        if not _pending:
            _pending.append(signum)
        return True
    return False


def hold() -> None:
    """The output is about to replace the old one: stop signals now wait for the end of the
    guarded block (a no-op outside one)."""
    global _holding
    if _guards:
        _holding = True


@contextmanager
def guarded() -> Iterator[None]:
    """A render from plan to report; a stop signal that arrived after :func:`hold` is raised as
    the block ends (unless the block already ends with an exception of its own)."""
    global _guards, _holding
    _guards += 1
    failed = False
    try:
        yield
    except BaseException:
        failed = True
        raise
    finally:
        _guards -= 1
        if not _guards:
            # no call between these: Python runs signal handlers only at calls and backward jumps
            signum, _holding = (_pending[0] if _pending else None), False
            del _pending[:]
            if signum is not None and not failed:
                if signum == signal.SIGTERM:
                    raise Interrupted("terminated")
                raise KeyboardInterrupt
