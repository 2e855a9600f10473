"""What went wrong, from ffmpeg's and ffprobe's stderr: the last line that says something
specific."""
from __future__ import annotations

import re

_GENERIC_PREFIXES = (
    "conversion failed",
    "last message repeated",    # ffmpeg's log de-duplication: the line before says what
    "exiting normally",
    "error initializing output stream",
    "could not write header for output file",
    "error while opening encoder",
    "error opening output file",
    "error opening output files",
    "error splitting the argument list",
    "error closing file",
    "received > 3 system signals",
    "nothing was written into output file",
)
_ADDRESS = re.compile(r" @ 0x[0-9a-fA-F]+\]")


def last_meaningful_line(text: str | bytes | None) -> str:
    """The last stderr line that says something specific (not 'Conversion failed!' & co).

    ``[libx264 @ 0x55d0...] msg`` becomes ``[libx264] msg``. Returns '' when there is nothing.
    """
    if not text:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    lines = [ln.strip() for ln in text.replace("\r", "\n").splitlines()]
    lines = [ln for ln in lines if ln]
    if not lines:
        return ""
    chosen = lines[-1]
    for ln in reversed(lines):
        body = _ADDRESS.sub("]", ln)
        if not body.lower().startswith(_GENERIC_PREFIXES) and body.strip(" -"):
            chosen = ln
            break
    return " ".join(_ADDRESS.sub("]", chosen).split())
