"""Messages in a student's terms: the uploaded files' own names instead of server paths, and no
hints about settings the page does not offer (the teacher's page shows the full line)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

#: a setting named in a hint ("allow_partial=true renders ...", "raise lock.timeout=")
_KEY = re.compile(r"\b[a-z][a-z0-9_]*(\.[a-z0-9_]+)*=")
#: an absolute path left after the job's own files were named
_PATH = re.compile(r"(?<![\w.])/[^\s'\"(),;:]+(/[^\s'\"(),;:]+)+")
TEACHER = "your teacher can see the details"


def for_student(text: str | None, settings: Mapping[str, str],
                uploads: Mapping[str, Any]) -> str | None:
    """``text`` with the job's files by their uploaded names, other server paths left out and
    clauses that name a setting dropped (then: "your teacher can see the details")."""
    if not text:
        return text
    names = {"target": _name(uploads.get("target"), "your video"),
             "source": _name(uploads.get("source"), "your photo"),
             "output": "the result"}
    for key, name in names.items():
        path = settings.get(key)
        if path:
            # the longest first: the output's folder holds the work folder's files
            text = text.replace(f"'{path}'", path).replace(path, f"'{name}'" if key != "output"
                                                         else name)
    folder = str(Path(settings.get("output", "/")).parent)
    if folder not in ("/", "."):
        text = re.sub(re.escape(folder) + r"/[^\s:;,)]*", "the result's files", text)
    text = _PATH.sub("a file on the server", text)
    parts = re.split(r"(?:;\s+|\s+[—-]\s+|\.\s+)", text)
    kept = [p for p in parts if not _KEY.search(p)]
    if len(kept) == len(parts):
        return text
    return "; ".join(p.strip() for p in kept if p.strip()) + f" ({TEACHER})"


def _name(upload: Any, fallback: str) -> str:
    name = upload.get("name") if isinstance(upload, Mapping) else None
    return str(name) if name else fallback
