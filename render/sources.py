"""The source images of a render: ``source=`` as one image, several (comma-separated) or a folder,
and the face map (``select.map``) that gives each person of the target a source of their own.

Only paths are resolved here (every named file exists and is a regular file, a folder holds
images); the faces in them are found and embedded by :mod:`render.source_face`.

A face map is a YAML file (``select.map=faces.yaml``)::

    - reference: people/alice-in-the-clip.png    # a picture of the person as they look in the target
      source: [alice-1.jpg, alice-2.jpg]          # what they become (one image or several)
    - reference: people/bob-in-the-clip.png
      source: bob.jpg

or the same inline: ``select.map=alice-ref.png=alice-1.jpg+alice-2.jpg,bob-ref.png=bob.jpg``.
Relative paths in a file are taken from the file's folder; inline, from the working folder.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import yaml

from .errors import MediaError, UsageError
from .files import not_regular
from .media.formats import IMAGE_EXTS


def _images_in(folder: Path, what: str) -> list[Path]:
    found = sorted(p for p in folder.iterdir()
                   if p.is_file() and p.suffix.lower() in IMAGE_EXTS and not p.name.startswith("."))
    if not found:
        raise MediaError(f"{what} folder {folder} holds no image (.jpg, .png, .webp, ...)")
    return found


def _existing(path: Path, what: str) -> Path:
    if not path.exists():
        raise MediaError(f"{what} image not found: {path}")
    problem = not_regular(path)
    if problem:      # a FIFO would block for ever when it is hashed or decoded
        raise MediaError(f"{what} {path} is {problem}, not a regular file")
    return path


def image_paths(items: Sequence[str], what: str, base: Path | None = None) -> tuple[Path, ...]:
    """The images named by ``items`` (each a file or a folder of images, taken from ``base``
    when relative), in the order given, each once."""
    out: list[Path] = []
    for item in items:
        item = item.strip()
        if not item:
            raise UsageError(f"{what}: an empty name in the list (two commas, or one at an end)")
        path = Path(item).expanduser()
        if base is not None and not path.is_absolute():
            path = base / path
        found = _images_in(path, what) if path.is_dir() else [_existing(path, what)]
        out += [p for p in found if p not in out]
    return tuple(out)


def source_paths(value: str) -> tuple[Path, ...]:
    """``source=``: one image, several separated by commas, or a folder of images."""
    return image_paths(value.split(","), "source")


@dataclass(frozen=True)
class MapEntry:
    """One person of the face map: what they look like in the target, and what they become."""

    reference: Path
    sources: tuple[Path, ...]


@dataclass(frozen=True)
class FaceMap:
    entries: tuple[MapEntry, ...]
    origin: str                  # the file it was read from, or "select.map" (inline)

    @property
    def sources(self) -> tuple[Path, ...]:
        """Every source image of the map, in the map's order, each once."""
        out: list[Path] = []
        for entry in self.entries:
            out += [p for p in entry.sources if p not in out]
        return tuple(out)


def _inline(value: str) -> list[tuple[str, list[str]]]:
    pairs = []
    for item in value.split(","):
        reference, sep, sources = item.partition("=")
        if not sep or not reference.strip() or not sources.strip():
            raise UsageError(f"select.map: '{item.strip()}' is not REFERENCE=SOURCE (a YAML file, "
                             f"or REF=SRC[+SRC...],REF=SRC...)")
        pairs.append((reference, sources.split("+")))
    return pairs


def _from_yaml(path: Path) -> list[tuple[str, list[str]]]:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise UsageError(f"face map {path} cannot be read as YAML: "
                         f"{' '.join(str(exc).split())}") from None
    rows = data.get("faces") if isinstance(data, dict) else data
    if not isinstance(rows, list) or not rows:
        raise UsageError(f"face map {path}: expected a list of entries, each with reference: and "
                         f"source:")
    pairs = []
    for n, row in enumerate(rows, 1):
        if not isinstance(row, dict) or set(row) != {"reference", "source"}:
            raise UsageError(f"face map {path}: entry {n} needs exactly reference: and source:")
        sources = row["source"] if isinstance(row["source"], list) else [row["source"]]
        if not isinstance(row["reference"], str) or not sources or \
                not all(isinstance(s, str) for s in sources):
            raise UsageError(f"face map {path}: entry {n}: reference and source are image paths")
        pairs.append((row["reference"], sources))
    return pairs


def read_face_map(value: str) -> FaceMap:
    """``select.map``: a YAML file or the inline form (module docstring); every file named must
    exist, and no reference may appear twice."""
    path = Path(value).expanduser()
    if path.suffix.lower() in (".yaml", ".yml"):
        if not path.is_file():
            raise MediaError(f"face map not found: {path}")
        pairs, base, origin = _from_yaml(path), path.parent, str(path)
    else:
        pairs, base, origin = _inline(value), None, "select.map"
    entries = []
    for reference, sources in pairs:
        ref = image_paths([reference], "face map reference", base)
        if len(ref) != 1:
            raise UsageError(f"face map reference {reference} is a folder: give one image")
        entry = MapEntry(ref[0], image_paths(sources, "face map source", base))
        if any(e.reference.resolve() == entry.reference.resolve() for e in entries):
            raise UsageError(f"face map: reference {reference} is named twice")
        entries.append(entry)
    return FaceMap(tuple(entries), origin)


def identity_of(paths: Sequence[Path], sha: Callable[[Path], str]) -> str:
    """The identity of a set of source images in the job key: a single image's SHA-256 (as a
    render of one source always had), else a hash over the sorted hashes (order-free)."""
    digests = sorted(sha(p) for p in paths)
    if len(digests) == 1:
        return digests[0]
    return hashlib.sha256(("sources:" + ",".join(digests)).encode()).hexdigest()


def map_identity(face_map: FaceMap, sha: Callable[[Path], str]) -> str:
    """The face map's identity in the job key: each reference with its sources' identity,
    order-free."""
    rows = sorted(f"{sha(e.reference)}>{identity_of(e.sources, sha)}" for e in face_map.entries)
    return hashlib.sha256(("map:" + ",".join(rows)).encode()).hexdigest()


def _from(base: Path, item: str) -> str:
    return str((base / Path(item.strip()).expanduser()).resolve())


def absolute_source(value: str, base: Path) -> str:
    """``source=`` with each of its paths taken from ``base`` (a job file's folder)."""
    return ",".join(_from(base, item) for item in value.split(","))


def absolute_map(value: str, base: Path) -> str:
    """``select.map=`` with its file, or each path of its inline form, taken from ``base``."""
    if Path(value).suffix.lower() in (".yaml", ".yml"):
        return _from(base, value)
    return ",".join(f"{_from(base, ref)}={'+'.join(_from(base, s) for s in srcs)}"
                    for ref, srcs in _inline(value))
