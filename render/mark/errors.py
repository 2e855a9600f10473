"""The errors of marking, each with the exit code of its family (render/errors.py)."""
from __future__ import annotations

from ..errors import ConfigError, RenderFailed


class MarkError(RenderFailed):
    """The synthetic-media mark could not be written or read (exit code 5)."""


class C2paUnavailable(MarkError):
    """c2pa-python is not installed, so no C2PA manifest can be written or read."""


class SigningKeyError(ConfigError):
    """A user-given C2PA certificate chain or private key is unreadable or unusable (exit code 2)."""
