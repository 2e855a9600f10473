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
    names = _labels(settings, uploads)
    names[settings.get("output", "")] = "the result"
    # the longest first: the output's folder holds the work folder's files
    for path, name in sorted(names.items(), key=lambda kv: -len(kv[0])):
        if path:
            text = text.replace(f"'{path}'", path).replace(path, name)
    for path, name in names.items():     # a face map's plan names its references by file name
        if Path(path).stem.startswith("reference"):
            text = re.sub(rf"(?<![\w/.]){re.escape(Path(path).name)}", name, text)
    folder = str(Path(settings.get("output", "/")).parent)
    if folder not in ("/", "."):
        text = re.sub(re.escape(folder) + r"/[^\s:;,)]*", "the result's files", text)
    text = _PATH.sub("a file on the server", text)
    parts = re.split(r"(?:;\s+|\s+[—-]\s+|\.\s+)", text)
    kept = [p for p in parts if not _KEY.search(p)]
    if len(kept) == len(parts):
        return text
    return "; ".join(p.strip() for p in kept if p.strip()) + f" ({TEACHER})"


def people(settings: Mapping[str, str], uploads: Mapping[str, Any] | None = None) -> str | None:
    """Whose faces a job puts in, as the pages say it: "2 photos of one person" (several
    sources), "2 people" (a face map), None for one photo."""
    if settings.get("select.mode") == "map":
        found = len(_map_paths(settings.get("select.map", "")))
        if not found and (uploads or {}).get("second") == "second-person":   # a faces.yaml
            found = 2
        return f"{found} people" if found else "a face map"
    photos = [p for p in str(settings.get("source", "")).split(",") if p.strip()]
    return f"{len(photos)} photos of one person" if len(photos) > 1 else None


def _map_paths(value: str) -> list[list[str]]:
    """The inline face map's entries as [reference, source, ...] (a YAML file: none)."""
    if not value or Path(value).suffix.lower() in (".yaml", ".yml"):
        return []
    return [[ref, *srcs.split("+")] for ref, _, srcs in
            (item.partition("=") for item in value.split(",")) if srcs]


def _labels(settings: Mapping[str, str], uploads: Mapping[str, Any]) -> dict[str, str]:
    """The job's input paths → how a student calls them (by the role the page stored each
    file under: source.jpg, source2.png, reference1.png, target.mp4)."""
    roles = {"target": f"'{_name(uploads.get('target'), 'your video')}'",
             "source": f"'{_name(uploads.get('source'), 'your photo')}'",
             "source2": f"'{_name(uploads.get('source2'), 'your second photo')}'",
             "voice": f"'{_name(uploads.get('voice'), 'your voice')}'",
             "reference1": "the face you clicked for the first photo",
             "reference2": "the face you clicked for the second photo",
             "faces": "the faces you clicked"}
    paths = [settings.get("target", ""), settings.get("lip_sync.audio", ""),
             *str(settings.get("source", "")).split(","),
             *(p for entry in _map_paths(settings.get("select.map", "")) for p in entry)]
    if Path(settings.get("select.map", "")).suffix.lower() in (".yaml", ".yml"):
        paths.append(settings["select.map"])
    out = {path: roles[Path(path).stem] for path in paths if Path(path).stem in roles}
    for key in ("source", "target"):         # one photo, a target: whatever their files' names
        if settings.get(key) and "," not in settings[key]:
            out[settings[key]] = roles[key]
    return out


def _name(upload: Any, fallback: str) -> str:
    name = upload.get("name") if isinstance(upload, Mapping) else None
    return str(name) if name else fallback
