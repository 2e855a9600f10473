"""Run ``render`` as ``python -m render`` does, with a SIGTERM landing inside a finalizer that the
garbage collector runs as the named thread starts (``python signal_hooks.py THREAD ARGS...``).

Python prints "Exception ignored in ..." and a traceback for an exception raised in a finalizer,
and swallows it: where a signal handler raises, a signal that lands there is lost that way.
"""
import gc
import os
import signal
import sys
import threading

WHEN = sys.argv.pop(1)


class _Garbage:
    def __init__(self) -> None:
        self.cycle = self

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        sum(range(10))     # the handler runs here, inside the finalizer


_start = threading.Thread.start
_fired: list[bool] = []


def _start_with_signal(self: threading.Thread) -> None:
    if not _fired and self.name == WHEN:
        _fired.append(True)
        _Garbage()
        gc.collect()
    _start(self)


threading.Thread.start = _start_with_signal

from render.cli import main  # noqa: E402

raise SystemExit(main())
