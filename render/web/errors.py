"""A request the classroom does not carry out, with its HTTP status and a message for people."""
from __future__ import annotations


class Refused(Exception):
    """``status``: 400 bad form, 403 not allowed, 404 not found (or not yours), 409 wrong state,
    413 too large, 415 not a form, 422 bad file or value, 429 too many, 503/507 the server."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(" ".join(message.split()))
        self.status = status


def not_found(what: str = "job") -> Refused:
    """The same answer for what does not exist and for what belongs to someone else."""
    return Refused(404, f"no such {what}")
