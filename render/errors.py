"""One exception family for everything a user can get wrong or a render can hit.

Each class carries the process exit code; the CLI prints ``str(exc)`` as one line on stderr
and exits with ``exc.exit_code``. A traceback is printed only with ``--debug``.
"""
from __future__ import annotations


class RenderError(Exception):
    """Base class. The message must fit on one line and say what to do about it."""

    exit_code = 1

    def __str__(self) -> str:  # one line, always
        return " ".join(super().__str__().split())


class UsageError(RenderError):
    """Bad command line: unknown key, malformed argument, missing required key."""

    exit_code = 2


class ConfigError(RenderError):
    """A profile or override fails validation (names the file, the key and what was expected)."""

    exit_code = 2


class MediaError(RenderError):
    """Bad input media: missing file, unreadable video, no face in the source image."""

    exit_code = 3


class ModelError(RenderError):
    """A model is missing, corrupt, or does not follow its contract."""

    exit_code = 4


class RenderFailed(RenderError):
    """ffmpeg or the inference runtime failed while rendering."""

    exit_code = 5


class Interrupted(RenderError):
    """Ctrl-C or SIGTERM; partial output has been removed."""

    exit_code = 130


#: every exit code of ``render`` with what it means, in the words of ``render --help`` (the
#: README's table says the same at length)
EXIT_CODES = {
    0: "done",
    RenderError.exit_code: "verify found a mismatch",
    UsageError.exit_code: "usage/config",
    MediaError.exit_code: "bad input media",
    ModelError.exit_code: "model missing or corrupt",
    RenderFailed.exit_code: "render failed",
    Interrupted.exit_code: "interrupted",
}
