"""Read raw bgr24 frames from an ffmpeg decoder process.

The child's stderr is drained by a thread into a bounded tail (never an unread pipe: a full
stderr pipe deadlocks ffmpeg). The child is always reaped: ``close()`` terminates, waits, kills.
"""
from __future__ import annotations

import collections
import errno
import logging
import os
import subprocess
import sys
import threading
from typing import IO, Iterator, Sequence

import numpy as np

from render.errors import MediaError, RenderError, RenderFailed

from .stderr import last_meaningful_line

log = logging.getLogger(__name__)

#: seconds to wait for a child after SIGTERM before SIGKILL
TERMINATE_TIMEOUT = 5.0


def input_name(argv: Sequence[str]) -> str:
    """The first ``-i`` argument that is a file (not a pipe), for messages."""
    names = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "-i"]
    for name in names:
        if not str(name).startswith("pipe:"):
            return str(name)
    return str(names[0]) if names else str(argv[0])


def output_name(argv: Sequence[str]) -> str:
    return str(argv[-1]) if argv else ""


#: what ffmpeg and mkvmerge print when a write failed for want of room; ffmpeg may still exit 0
#: (a failed trailer write), leaving a file that looks like damaged media
NO_SPACE = {"No space left on device": errno.ENOSPC, "Disk quota exceeded": errno.EDQUOT}


def no_space(what: str, writes: str | os.PathLike | None,
             code: int = errno.ENOSPC) -> RenderFailed:
    """The one error of a child that ran out of room (``code``: ENOSPC or EDQUOT), naming the
    folder it wrote into."""
    where = f" in {os.path.dirname(os.path.abspath(writes))}" if writes else ""
    return RenderFailed(f"{what}: {os.strerror(code)}{where}")


class StderrTail:
    """Drains a child's stderr on a daemon thread, keeping the last ``keep`` lines; ``no_space``
    tells whether any line said the disk was full."""

    def __init__(self, stream: IO[bytes], *, name: str = "ffmpeg", keep: int = 50) -> None:
        self._stream = stream
        self._name = name
        self._lines: collections.deque[str] = collections.deque(maxlen=keep)
        self._lock = threading.Lock()
        self.no_space = 0       # ENOSPC or EDQUOT once a line said the disk was full
        self._thread = threading.Thread(target=self._run, name=f"stderr-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for raw in iter(self._stream.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip()
                if line:
                    with self._lock:
                        self._lines.append(line)
                    for message, code in NO_SPACE.items():
                        if message in line and not self.no_space:
                            self.no_space = code
                    log.debug("%s: %s", self._name, line)
        except (OSError, ValueError):  # closed underneath us
            pass
        finally:
            try:
                self._stream.close()
            except OSError:
                pass

    def join(self, timeout: float | None = 5.0) -> None:
        self._thread.join(timeout)

    @property
    def text(self) -> str:
        with self._lock:
            return "\n".join(self._lines)

    def last_line(self) -> str:
        return last_meaningful_line(self.text)


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """In the child: SIGKILL when the parent dies (kill -9 included), so that an orphaned encoder
    never sees its input end and finalises a file that looks finished (Linux PR_SET_PDEATHSIG)."""
    import ctypes

    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, 9, 0, 0, 0)   # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:   # the parent died before the prctl took effect
        os._exit(137)


def child_options() -> dict:
    """Popen options for every child of a render: it dies with the renderer."""
    return {"preexec_fn": _die_with_parent} if sys.platform.startswith("linux") else {}


def spawn(argv: list[str], role: str, name: str, **pipes) -> tuple[subprocess.Popen, StderrTail]:
    """Start an ffmpeg child with its stderr drained by a thread (never an unread pipe); the child
    is killed when this process dies (:func:`child_options`)."""
    log.debug("%s: %s", role, " ".join(argv))
    try:
        proc = subprocess.Popen(argv, stderr=subprocess.PIPE, bufsize=0, **child_options(), **pipes)
    except FileNotFoundError:
        raise RenderFailed(f"{argv[0]} not found: install ffmpeg") from None
    except OSError as exc:
        raise RenderFailed(f"cannot start {argv[0]} for {name}: {exc}") from None
    return proc, StderrTail(proc.stderr, name=f"{role} {os.path.basename(name)}")


def grow_pipe(fileobj, size: int = 1 << 20) -> None:
    """Best effort: enlarge a pipe's kernel buffer (Linux, up to pipe-max-size) so that a large
    frame moves in fewer system calls. Silently does nothing where unsupported."""
    try:
        import fcntl

        fcntl.fcntl(fileobj.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), size)
    except (ImportError, OSError, ValueError, AttributeError):
        pass


def reap(proc: subprocess.Popen, timeout: float = TERMINATE_TIMEOUT) -> int:
    """Make sure ``proc`` is dead and waited for: terminate -> wait(timeout) -> kill -> wait.

    Safe to call repeatedly and in ``finally`` blocks; survives a KeyboardInterrupt arriving
    while it waits (the kill still happens, then the interrupt propagates).
    """
    if proc.poll() is not None:
        return proc.returncode
    try:
        try:
            proc.terminate()
        except ProcessLookupError:
            pass
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            # routine while a stopped render unwinds: not a line of its own off a terminal
            log.debug("ffmpeg (pid %d) ignored SIGTERM for %.0f s; killing it", proc.pid, timeout)
    finally:
        if proc.poll() is None:
            try:
                proc.kill()
            except ProcessLookupError:
                pass
            proc.wait()
    return proc.returncode


def _describe(returncode: int) -> str:
    if returncode < 0:
        return f"killed by signal {-returncode}"
    return f"exit status {returncode}"


def run_tool(argv: Sequence[str], what: str, *, timeout: float | None = None,
             ok: Sequence[int] = (0,), writes: str | os.PathLike | None = None) -> str:
    """Run a child (ffmpeg, mkvmerge) to completion, its stdout and stderr drained together by a
    thread (mkvmerge reports on stdout); RenderFailed with its last meaningful line when its exit
    status is not in ``ok``, or naming the folder of ``writes`` when it said the disk was full
    (whatever its exit status). Always reaped, also on KeyboardInterrupt. Returns the output."""
    argv = [str(a) for a in argv]
    log.debug("tool: %s", " ".join(argv))
    r, w = os.pipe()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=w, stderr=w,
                                **child_options())
    except FileNotFoundError:
        os.close(r)
        raise RenderFailed(f"{what}: {argv[0]} not found (install it: ffmpeg, mkvtoolnix)") from None
    finally:
        os.close(w)
    tail = StderrTail(os.fdopen(r, "rb", buffering=0), name=os.path.basename(argv[0]))
    try:
        rc = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        raise RenderFailed(f"{what}: {os.path.basename(argv[0])} took over {timeout:.0f} s") from None
    finally:
        reap(proc)
        tail.join()
    if tail.no_space:
        raise no_space(what, writes, tail.no_space)
    if rc not in ok:
        raise RenderFailed(f"{what}: {tail.last_line() or _describe(rc)}")
    return tail.text


class FrameReader:
    """Iterate the frames an ffmpeg decoder writes to stdout (``decode_args``).

    ``with FrameReader(argv, w, h) as frames: for frame in frames: ...`` yields (h, w, 3) uint8
    arrays, filled with ``readinto`` straight from the pipe (the read is the only copy).

    ``buffers``: None (default) gives every frame its own array, safe to keep and queue.
    An int N cycles through N preallocated arrays: a frame is overwritten N frames later, so
    the consumer must hold fewer than N frames at a time (e.g. a bounded queue of N - 2).

    Errors: a decoder that exits non-zero raises ``error`` (MediaError by default: a bad input)
    with the file name and ffmpeg's last meaningful stderr line; a truncated last frame raises
    RenderFailed. ``close()`` (also on exceptions and KeyboardInterrupt via the context manager
    or the iterator) always reaps the child.
    """

    def __init__(self, argv: Sequence[str], width: int, height: int, *, buffers: int | None = None,
                 error: type[RenderError] = MediaError, name: str | None = None) -> None:
        if width <= 0 or height <= 0:
            raise ValueError(f"invalid frame size {width}x{height}")
        if buffers is not None and buffers < 1:
            raise ValueError("buffers must be >= 1")
        self.argv = [str(a) for a in argv]
        self.width, self.height = int(width), int(height)
        self.frame_size = self.width * self.height * 3
        self.name = name or input_name(self.argv)
        self._error = error
        self._pool = [np.empty((self.height, self.width, 3), np.uint8) for _ in range(buffers or 0)]
        self._next_buf = 0
        self.frames_read = 0
        self._eof = False
        self._closed = False
        self.proc, self._stderr = spawn(self.argv, "decoder", self.name,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
        grow_pipe(self.proc.stdout)

    # -- iteration -----------------------------------------------------------------------------
    def __enter__(self) -> "FrameReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __iter__(self) -> Iterator[np.ndarray]:
        return self

    def __next__(self) -> np.ndarray:
        if self._closed or self._eof:
            raise StopIteration
        try:
            frame = self._read_frame()
        except BaseException:
            self.close()
            raise
        if frame is None:
            self._finish()
            raise StopIteration
        self.frames_read += 1
        return frame

    def read(self) -> np.ndarray | None:
        """The next frame, or None at the end of the stream."""
        try:
            return next(self)
        except StopIteration:
            return None

    def _read_frame(self) -> np.ndarray | None:
        if self._pool:
            frame = self._pool[self._next_buf]
            self._next_buf = (self._next_buf + 1) % len(self._pool)
        else:
            frame = np.empty((self.height, self.width, 3), np.uint8)
        view = memoryview(frame).cast("B")
        stdout = self.proc.stdout
        got = 0
        while got < self.frame_size:
            n = stdout.readinto(view[got:])
            if not n:
                break
            got += n
        if got == self.frame_size:
            return frame
        self._eof = True
        if got == 0:
            return None
        # a partial frame: report the decoder's failure if it failed, else the size mismatch
        rc = self._wait()
        if rc != 0:
            self._raise_failed(rc)
        raise RenderFailed(
            f"decoder of {self.name} ended with a truncated frame ({got} of {self.frame_size} bytes "
            f"after {self.frames_read} frames): frame size {self.width}x{self.height} does not match"
        )

    def _wait(self) -> int:
        try:
            self.proc.stdout.close()
        except OSError:
            pass
        rc = self.proc.wait()
        self._stderr.join()
        return rc

    def _raise_failed(self, rc: int) -> None:
        reason = self._stderr.last_line() or _describe(rc)
        if rc < 0 or "received signal" in reason:
            # stopped from outside (killed, or ffmpeg's own "Exiting normally, received signal"):
            # the render failed, the input is not at fault
            raise RenderFailed(f"the decoder of {self.name} was stopped from outside "
                               f"({_describe(rc) if rc < 0 else reason}): render again")
        raise self._error(f"cannot decode {self.name}: {reason}")

    def _finish(self) -> None:
        self._eof = True
        try:
            rc = self._wait()
            if rc != 0:
                self._raise_failed(rc)
            log.debug("decoder of %s done: %d frames", self.name, self.frames_read)
        finally:
            self.close()

    # -- cleanup -------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the decoder (if still running) and reap it. Idempotent, never raises on cleanup."""
        if self._closed:
            return
        self._closed = True
        proc = self.proc
        try:
            if proc.stdout is not None:
                try:
                    proc.stdout.close()
                except OSError:
                    pass
        finally:
            reap(proc)
            self._stderr.join()

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def stderr_last_line(self) -> str:
        """The decoder's last meaningful error line ('' when it reported nothing)."""
        return self._stderr.last_line()

    def __del__(self) -> None:  # last resort; close() is the contract
        try:
            if not self._closed and self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        except Exception:
            pass
