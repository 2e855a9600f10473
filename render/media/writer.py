"""Write raw frames into an ffmpeg encoder, into a temp file that is renamed when complete.

Typical use::

    ensure_output_dir(out)
    with AtomicOutput(out) as target:
        argv = encode_args(info, target.tmp_path, width=w, height=h, fps=info.fps, video=settings)
        with FrameWriter(argv, target.tmp_path) as enc:
            for frame in frames:
                enc.write(frame)
        target.commit()          # fsync + os.replace; any exception before it removes the temp file
"""
from __future__ import annotations

import logging
import os
import subprocess
from typing import Sequence

import numpy as np

from render.errors import MediaError, RenderFailed

from ..files import fsync_dir
from .reader import _describe, grow_pipe, no_space, reap, spawn

log = logging.getLogger(__name__)


def ensure_output_dir(path: str | os.PathLike) -> str:
    """Create the directory that will hold the output file ``path``; return it.

    MediaError when it cannot be created or written to.
    """
    directory = os.path.dirname(os.path.abspath(os.fspath(path)))
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        raise MediaError(f"cannot create output directory {directory}: {exc.strerror or exc}") from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise MediaError(f"cannot write to output directory {directory}: permission denied")
    return directory


class AtomicOutput:
    """A temp name beside ``final_path`` (``<name>.part-<pid>``) that becomes ``final_path`` only on
    ``commit()``. Used as a context manager it discards the temp file on any exception (and on
    exit without commit)."""

    def __init__(self, final_path: str | os.PathLike) -> None:
        self.final_path = os.path.abspath(os.fspath(final_path))
        directory, name = os.path.split(self.final_path)
        self.tmp_path = os.path.join(directory, f"{name}.part-{os.getpid()}")
        self.committed = False

    def __enter__(self) -> "AtomicOutput":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if not self.committed:
            self.discard()

    def commit(self) -> str:
        """fsync the temp file, rename it over ``final_path``, fsync the directory."""
        if self.committed:
            return self.final_path
        try:
            fd = os.open(self.tmp_path, os.O_RDONLY)
        except FileNotFoundError:
            raise RenderFailed(f"encoder wrote nothing for {self.final_path}") from None
        try:
            if os.fstat(fd).st_size == 0:
                raise RenderFailed(f"encoder wrote an empty file for {self.final_path}")
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.replace(self.tmp_path, self.final_path)
        except OSError as exc:
            raise RenderFailed(f"cannot move output into place at {self.final_path}: {exc.strerror or exc}") from None
        fsync_dir(os.path.dirname(self.final_path))
        self.committed = True
        log.debug("committed %s", self.final_path)
        return self.final_path

    def discard(self) -> None:
        """Remove the temp file if it exists. Idempotent."""
        try:
            os.unlink(self.tmp_path)
            log.debug("removed partial output %s", self.tmp_path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("cannot remove partial output %s: %s", self.tmp_path, exc)


class FrameWriter:
    """Feed frames to an ffmpeg encoder's stdin (``encode_args`` / ``image_encode_args``).

    ``write(frame)``: (h, w, 3) uint8 bgr, or (h, w, 4) bgra with ``channels=4``. A dead encoder (BrokenPipe) raises RenderFailed with its
    last meaningful stderr line. ``close()`` ends the input, waits for the encoder and checks its
    exit status. ``abort()`` kills and reaps it and removes ``tmp_path``. As a context manager it
    closes on success and aborts on any exception (KeyboardInterrupt included).
    """

    def __init__(self, argv: Sequence[str], tmp_path: str | os.PathLike, *, width: int | None = None,
                 height: int | None = None, name: str | None = None, channels: int = 3) -> None:
        self.argv = [str(a) for a in argv]
        self.tmp_path = os.fspath(tmp_path)
        self.name = name or self.tmp_path
        self.channels = channels
        self.frame_shape = (int(height), int(width), channels) if width and height else None
        self.frames_written = 0
        self._done = False
        self.proc, self._stderr = spawn(self.argv, "encoder", self.tmp_path,
                                        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        grow_pipe(self.proc.stdin)

    def __enter__(self) -> "FrameWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def _failed(self, what: str) -> RenderFailed:
        rc = self.proc.wait()
        self._stderr.join()
        if self._stderr.no_space:
            return no_space(f"encoder for {self.name}", self.tmp_path, self._stderr.no_space)
        reason = self._stderr.last_line() or _describe(rc)
        return RenderFailed(f"encoder for {self.name} {what}: {reason}")

    def write(self, frame: np.ndarray) -> None:
        if self._done:
            raise RenderFailed(f"encoder for {self.name} is already closed")
        if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != self.channels:
            raise ValueError(f"expected an (h, w, {self.channels}) uint8 frame, got {frame.shape} "
                             f"{frame.dtype}")
        if self.frame_shape is not None and frame.shape != self.frame_shape:
            raise ValueError(f"expected a frame of shape {self.frame_shape}, got {frame.shape}")
        if not frame.flags.c_contiguous:
            frame = np.ascontiguousarray(frame)
        try:
            view = memoryview(frame).cast("B")
            while view:  # a raw pipe write may be partial (e.g. interrupted by a signal)
                n = self.proc.stdin.write(view)
                view = view[n or 0:]
        except (BrokenPipeError, ConnectionResetError):
            self._done = True
            self._close_stdin()
            self._remove_tmp()
            raise self._failed(f"stopped after {self.frames_written} frames") from None
        except BaseException:
            self.abort()
            raise
        self.frames_written += 1

    def _close_stdin(self) -> None:
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass

    def close(self) -> None:
        """End the input and wait for the encoder; RenderFailed (temp file removed) on failure."""
        if self._done:
            return
        self._done = True
        try:
            self._close_stdin()
            rc = self.proc.wait()
            self._stderr.join()
        except BaseException:
            self._done = False
            self.abort()
            raise
        if self._stderr.no_space:       # ffmpeg may exit 0 after a trailer it could not write
            self._remove_tmp()
            raise no_space(f"encoder for {self.name}", self.tmp_path, self._stderr.no_space)
        if rc != 0:
            self._remove_tmp()
            raise self._failed(f"failed ({_describe(rc)})")
        log.debug("encoder for %s done: %d frames", self.name, self.frames_written)

    def abort(self) -> None:
        """Kill and reap the encoder, remove the temp file. Idempotent."""
        self._done = True
        try:
            self._close_stdin()
        finally:
            reap(self.proc, timeout=2.0)
            self._stderr.join()
            self._remove_tmp()

    def _remove_tmp(self) -> None:
        try:
            os.unlink(self.tmp_path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("cannot remove partial output %s: %s", self.tmp_path, exc)

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def __del__(self) -> None:
        try:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        except Exception:
            pass
