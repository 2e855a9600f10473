"""An output's quality section, read from its report for ``render review``, and the verdict of a
job's reports in a few words for ``render jobs`` (and the pages)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from ..errors import MediaError, UsageError
from ..media.formats import is_image_path
from ..report import SUFFIX, load, report_path
from ..review.verdict import summary


def output_and_report(path: Path) -> tuple[Path, Path]:
    """(the output, its report) for ``path``: an output, or its ``.report.json``."""
    if path.name.endswith(SUFFIX):
        return path.with_name(path.name[:-len(SUFFIX)]), path
    return path, report_path(path)


def quality_of(output: Path, report: Path) -> dict[str, Any]:
    """The quality section of ``output`` from ``report``; UsageError (one line) where there is
    none to review: no report, an image, a failed render, a render without review, or an output
    that is no longer the file its report describes."""
    name = output.name
    if not output.exists():
        raise MediaError(f"{output}: no such file")
    if is_image_path(output):
        raise UsageError(f"{name} is an image: render review takes a video output")
    if not report.is_file():
        raise UsageError(f"{name} has no report beside it ({report.name}): not an output of "
                         f"render")
    data = load(report)
    described = data.get("output") or {}
    if data.get("status") != "done" or not described:
        raise UsageError(f"{report.name} is the report of a render that did not finish "
                         f"({data.get('status')})")
    if described.get("kind") != "video":
        raise UsageError(f"{name} is an image: render review takes a video output")
    if described.get("bytes") != output.stat().st_size:
        raise UsageError(f"{name} is not the file its report describes (its size changed)")
    section = data.get("quality")
    if not isinstance(section, dict) or not isinstance(section.get("tracks"), list):
        raise UsageError(f"{name} was rendered without review (review.enabled=false, or by an "
                         f"older render): nothing to review")
    return section


def verdict_of_reports(paths: Iterable[str | Path]) -> str | None:
    """The verdict of the outputs whose reports are ``paths`` in a few words ("ok", "look: 2
    tracks"); None where none of them was reviewed."""
    looks, reviewed = 0, False
    for path in paths:
        try:
            section = json.loads(Path(path).read_text()).get("quality")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(section, dict) and isinstance(section.get("tracks"), list):
            reviewed = True
            looks += sum(t.get("verdict") == "look" for t in section["tracks"])
    return summary(looks) if reviewed else None
